//! The event address registers: the I-EAR (instruction cache and ITLB
//! misses) and the D-EAR (data cache misses, DTLB misses, ALAT misses), per
//! generation (libpfm3's EAR layouts, Intel VTune's Itanium event help for
//! PMC10, HP Caliper's itlb measurement for the fill levels). A capture
//! writes the EAR's PMDs and then counts one occurrence of the EAR's
//! counting event, so a counter set to overflow every N captures freezes the
//! PMU with the Nth capture in the PMDs.

use super::counting::{Event, InstructionSet};
use super::registers::{ItaniumModel, ReservedField};
use super::tables::{
    self, Generation, IearCacheSelect, itanium_dear_threshold, itanium_iear_threshold,
    itanium2_dear_threshold, itanium2_iear_cache_select, tlb_umask,
};
use crate::model::itanium::tables::Tables;
use bit_field::BitField;
use core::ops::Range;

/// Which mechanism filled the instruction TLB: the driver's vocabulary type.
pub use crate::arch::itanium::ear::TlbFill;

/// An instruction fetch that missed, for the I-EAR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FetchMiss {
    /// The fetch address.
    pub address: u64,
    /// L1 instruction-cache miss with this latency in cycles, if it missed
    /// the cache.
    pub latency: Option<u32>,
    /// ITLB miss and who filled it, if it missed the (first-level) ITLB.
    pub tlb: Option<TlbFill>,
    /// The cache miss hit the RAB (Itanium 2 / Montecito umask 00h).
    pub rab_hit: bool,
    /// Privilege level 0-3.
    pub cpl: u8,
    /// Instruction set.
    pub isa: InstructionSet,
}

impl FetchMiss {
    /// An I-cache miss at `address` taking `latency` cycles (CPL 0, IA-64).
    pub const fn cache(address: u64, latency: u32) -> Self {
        Self {
            address,
            latency: Some(latency),
            tlb: None,
            rab_hit: false,
            cpl: 0,
            isa: InstructionSet::Ia64,
        }
    }

    /// An ITLB miss at `address` satisfied by `fill` (CPL 0, IA-64).
    pub const fn tlb(address: u64, fill: TlbFill) -> Self {
        Self {
            address,
            latency: None,
            tlb: Some(fill),
            rab_hit: false,
            cpl: 0,
            isa: InstructionSet::Ia64,
        }
    }

    /// Also an ITLB miss satisfied by `fill`.
    pub const fn with_tlb(mut self, fill: TlbFill) -> Self {
        self.tlb = Some(fill);
        self
    }

    /// The cache miss hit the RAB.
    pub const fn rab_hit(mut self) -> Self {
        self.rab_hit = true;
        self
    }

    /// At privilege level `cpl`.
    pub const fn at(mut self, cpl: u8) -> Self {
        self.cpl = cpl;
        self
    }

    /// In instruction set `isa`.
    pub const fn isa(mut self, isa: InstructionSet) -> Self {
        self.isa = isa;
        self
    }
}

/// A data access that missed, for the D-EAR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DataMiss {
    /// The data address.
    pub address: u64,
    /// The bundle address of the instruction (low 4 bits ignored).
    pub ip: u64,
    /// The instruction's slot in the bundle (0-2).
    pub slot: u8,
    /// L1 data-cache load miss with this latency, if it missed the cache.
    pub latency: Option<u32>,
    /// DTLB miss and who filled it.
    pub tlb: Option<TlbFill>,
    /// An ALAT miss (Itanium 2 / Montecito ALAT mode).
    pub alat: bool,
    /// Privilege level 0-3.
    pub cpl: u8,
    /// Instruction set.
    pub isa: InstructionSet,
}

impl DataMiss {
    const fn new(address: u64, ip: u64, slot: u8) -> Self {
        Self {
            address,
            ip,
            slot,
            latency: None,
            tlb: None,
            alat: false,
            cpl: 0,
            isa: InstructionSet::Ia64,
        }
    }

    /// A data-cache miss at `address` by the instruction at `ip`/`slot`,
    /// taking `latency` cycles.
    pub const fn cache(address: u64, ip: u64, slot: u8, latency: u32) -> Self {
        let mut m = Self::new(address, ip, slot);
        m.latency = Some(latency);
        m
    }

    /// A DTLB miss satisfied by `fill`.
    pub const fn tlb(address: u64, ip: u64, slot: u8, fill: TlbFill) -> Self {
        let mut m = Self::new(address, ip, slot);
        m.tlb = Some(fill);
        m
    }

    /// An ALAT miss.
    pub const fn alat(address: u64, ip: u64, slot: u8) -> Self {
        let mut m = Self::new(address, ip, slot);
        m.alat = true;
        m
    }

    /// Also a DTLB miss satisfied by `fill`.
    pub const fn with_tlb(mut self, fill: TlbFill) -> Self {
        self.tlb = Some(fill);
        self
    }

    /// At privilege level `cpl`.
    pub const fn at(mut self, cpl: u8) -> Self {
        self.cpl = cpl;
        self
    }

    /// In instruction set `isa`.
    pub const fn isa(mut self, isa: InstructionSet) -> Self {
        self.isa = isa;
        self
    }
}

/// What an EAR (or the branch trace buffer) did with an injected event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Capture {
    /// Captured into the PMDs, and counted as one EAR (branch) event.
    Captured,
    /// The configuration does not select it (mode, umask, plm, pm/PSR, ism).
    NotSelected,
    /// PMC0.fr is set: nothing captures.
    Frozen,
}

/// Itanium 2 / Montecito I-EAR `ct` field (PMC bits 13:12).
const CT: Range<usize> = 12..14;
/// Itanium 2 / Montecito I-EAR unit mask: 12:5 in cache mode, 11:5 in TLB
/// mode.
const ITA2_IEAR_CACHE_UMASK: Range<usize> = 5..13;
const ITA2_IEAR_TLB_UMASK: Range<usize> = 5..12;
/// Itanium EAR and every D-EAR unit mask, bits 19:16.
const EAR_UMASK: Range<usize> = 16..20;
/// Itanium EAR and every D-EAR `ism`, bits 25:24; Itanium 2 I-EAR 15:14.
const EAR_ISM: Range<usize> = 24..26;
const ITA2_IEAR_ISM: Range<usize> = 14..16;
/// Itanium 2 / Montecito D-EAR mode, bits 8:7.
const ITA2_DEAR_MODE: Range<usize> = 7..9;

impl ItaniumModel {
    /// The I-EAR sees an instruction fetch miss.
    pub fn fetch_miss(&mut self, miss: FetchMiss) -> Capture {
        if self.frozen() {
            return Capture::Frozen;
        }
        let l = self.generation.layout();
        let cfg = self.pmc[l.iear_pmc as usize];
        let (plm, pm) = (cfg & 0xF, cfg & (1 << l.iear_pm_bit) != 0);
        // The ism field: 25:24 on Itanium, 15:14 on Itanium 2; Montecito's
        // PMC37 has none (bits 15:14 reserved).
        let ism = match self.generation {
            Generation::Itanium => cfg.get_bits(EAR_ISM),
            Generation::Itanium2 => cfg.get_bits(ITA2_IEAR_ISM),
            Generation::Montecito => 0,
        };
        if !self.monitor_enabled(plm, pm, miss.cpl) || !miss.isa.admitted_by(ism) {
            return Capture::NotSelected;
        }
        let captured = match self.generation {
            Generation::Itanium => self.itanium_iear(cfg, &miss),
            Generation::Itanium2 | Generation::Montecito => self.itanium2_iear(cfg, &miss),
        };
        let Some((address, latency)) = captured else {
            return Capture::NotSelected;
        };
        self.pmd[l.iear_pmd_address as usize] = address;
        if let Some(latency) = latency {
            self.pmd[l.iear_pmd_latency as usize] = latency;
        }
        self.deliver(&Event::new(l.iear_events, 0, 1).at(miss.cpl).isa(miss.isa));
        Capture::Captured
    }

    /// Itanium PMC10: tlb bit 7 selects ITLB mode (umask: 4 HPW, 8
    /// software) or cache mode (umask: latency code). PMD0: v 0, tlb 1
    /// (0 HPW, 1 software), address 63:5; PMD1: latency 11:0 (cache mode).
    fn itanium_iear(&self, cfg: u64, miss: &FetchMiss) -> Option<(u64, Option<u64>)> {
        let umask = cfg.get_bits(EAR_UMASK);
        let line = miss.address & !0x1F;
        if cfg & (1 << 7) != 0 {
            let (bit, software) = match miss.tlb? {
                TlbFill::Hpw => (tlb_umask::ITANIUM_IEAR_HPW, false),
                TlbFill::Software => (tlb_umask::ITANIUM_IEAR_SOFTWARE, true),
                // No L2 ITLB fill on Itanium (HP Caliper's itlb measurement).
                TlbFill::L2 => return None,
            };
            (umask & bit != 0).then_some((line | (u64::from(software) << 1) | 1, None))
        } else {
            let latency = miss.latency?;
            let threshold = itanium_iear_threshold(umask)?;
            (latency >= threshold).then_some((line | 1, Some(u64::from(latency.min(0xFFF)))))
        }
    }

    /// Itanium 2 / Montecito PMC10 (PMC37): ct 13:12 = 00 ITLB mode (umask
    /// 11:5: 1 L2, 2 HPW, 4 fault), 01 nothing, 1x cache mode (umask 12:5).
    /// PMD0 (34): stat 1:0 (TLB: 1 L2, 2 HPW, 3 software; cache: 1),
    /// address 63:5; PMD1 (35): latency 11:0, overflow 12.
    fn itanium2_iear(&self, cfg: u64, miss: &FetchMiss) -> Option<(u64, Option<u64>)> {
        let line = miss.address & !0x1F;
        match cfg.get_bits(CT) {
            0b00 => {
                let umask = cfg.get_bits(ITA2_IEAR_TLB_UMASK);
                let (bit, stat) = match miss.tlb? {
                    TlbFill::L2 => (tlb_umask::ITANIUM2_IEAR_L2, 1),
                    TlbFill::Hpw => (tlb_umask::ITANIUM2_IEAR_HPW, 2),
                    TlbFill::Software => (tlb_umask::ITANIUM2_IEAR_SOFTWARE, 3),
                };
                (umask & bit != 0).then_some((line | stat, None))
            }
            0b01 => None,
            _ => {
                let latency = miss.latency?;
                let selected =
                    match itanium2_iear_cache_select(cfg.get_bits(ITA2_IEAR_CACHE_UMASK))? {
                        IearCacheSelect::RabHit => miss.rab_hit,
                        IearCacheSelect::AllMisses => latency > 0,
                        IearCacheSelect::AtLeast(t) => latency >= t,
                    };
                let recorded = u64::from(latency.min(0xFFF)) | (u64::from(latency > 0xFFF) << 12);
                selected.then_some((line | 1, Some(recorded)))
            }
        }
    }

    /// The D-EAR sees a data access miss.
    pub fn data_miss(&mut self, miss: DataMiss) -> Capture {
        if self.frozen() {
            return Capture::Frozen;
        }
        let l = self.generation.layout();
        let cfg = self.pmc[l.dear_pmc as usize];
        if !self.monitor_enabled(cfg & 0xF, cfg & (1 << 6) != 0, miss.cpl)
            || !miss.isa.admitted_by(cfg.get_bits(EAR_ISM))
        {
            return Capture::NotSelected;
        }
        let umask = cfg.get_bits(EAR_UMASK);
        let ip = miss.ip & !0xF;
        let slot = u64::from(miss.slot & 3);
        let captured = match self.generation {
            Generation::Itanium => itanium_dear(cfg, umask, &miss)
                // PMD17: vl 0, slot 3:2, bundle address 63:4.
                .map(|lat| (lat, ip | (slot << 2) | 1)),
            Generation::Itanium2 | Generation::Montecito => itanium2_dear(cfg, umask, &miss)
                // PMD17 (36): slot 1:0, bn 2 (0), vl 3, bundle address 63:4.
                .map(|lat| (lat, ip | (1 << 3) | slot)),
        };
        let Some((latency, ip_value)) = captured else {
            return Capture::NotSelected;
        };
        self.pmd[l.dear_pmd_address as usize] = miss.address;
        self.pmd[l.dear_pmd_latency as usize] = latency;
        self.pmd[l.dear_pmd_ip as usize] = ip_value;
        self.deliver(&Event::new(l.dear_events, 0, 1).at(miss.cpl).isa(miss.isa));
        Capture::Captured
    }

    /// The reserved value, if any, in a write of `cfg` to the I-EAR PMC.
    pub(super) fn iear_reserved_field(&self, cfg: u64) -> Option<ReservedField> {
        match self.generation {
            Generation::Itanium => {
                let umask = cfg.get_bits(EAR_UMASK);
                let tlb_mode = cfg & (1 << 7) != 0;
                let defined = tlb_umask::ITANIUM_IEAR_HPW | tlb_umask::ITANIUM_IEAR_SOFTWARE;
                if tlb_mode && umask & !defined != 0 {
                    Some(ReservedField::IEarTlbUmask)
                } else if !tlb_mode && !tables::itanium_iear_umask_defined(umask) {
                    Some(ReservedField::IEarLatency)
                } else {
                    None
                }
            }
            Generation::Itanium2 | Generation::Montecito => match cfg.get_bits(CT) {
                // TLB mode: umask bits 11:8 select nothing.
                0b00 if cfg & 0xF00 != 0 => Some(ReservedField::IEarTlbUmask),
                0b10 | 0b11
                    if itanium2_iear_cache_select(cfg.get_bits(ITA2_IEAR_CACHE_UMASK))
                        .is_none() =>
                {
                    Some(ReservedField::IEarLatency)
                }
                _ => None,
            },
        }
    }

    /// The reserved value, if any, in a write of `cfg` to the D-EAR PMC.
    pub(super) fn dear_reserved_field(&self, cfg: u64) -> Option<ReservedField> {
        let umask = cfg.get_bits(EAR_UMASK);
        let tlb_defined = tlb_umask::DEAR_L2 | tlb_umask::DEAR_HPW | tlb_umask::DEAR_SOFTWARE;
        match self.generation {
            Generation::Itanium => {
                let tlb_mode = cfg & (1 << 7) != 0;
                if tlb_mode && umask & !tlb_defined != 0 {
                    Some(ReservedField::DEarTlbUmask)
                } else if !tlb_mode && !tables::itanium_dear_umask_defined(umask) {
                    Some(ReservedField::DEarLatency)
                } else {
                    None
                }
            }
            Generation::Itanium2 | Generation::Montecito => match cfg.get_bits(ITA2_DEAR_MODE) {
                0 if itanium2_dear_threshold(umask).is_none() => Some(ReservedField::DEarLatency),
                1 if umask & !tlb_defined != 0 => Some(ReservedField::DEarTlbUmask),
                3 => Some(ReservedField::DEarMode),
                _ => None,
            },
        }
    }
}

/// The TLB-mode umask bit and level code (1 L2, 2 HPW, 3 software) of a fill.
const fn dtlb(fill: TlbFill) -> (u64, u64) {
    match fill {
        TlbFill::L2 => (tlb_umask::DEAR_L2, 1),
        TlbFill::Hpw => (tlb_umask::DEAR_HPW, 2),
        TlbFill::Software => (tlb_umask::DEAR_SOFTWARE, 3),
    }
}

/// Itanium PMC11: tlb bit 7 selects DTLB mode (umask: 2 L2, 4 HPW, 8
/// software; PMD3.level 63:62 = 1, 2, 3) or cache mode (umask: latency code;
/// PMD3.latency 11:0). Returns the PMD3 value.
fn itanium_dear(cfg: u64, umask: u64, miss: &DataMiss) -> Option<u64> {
    if cfg & (1 << 7) != 0 {
        let (bit, level) = dtlb(miss.tlb?);
        (umask & bit != 0).then_some(level << 62)
    } else {
        let latency = miss.latency?;
        let threshold = itanium_dear_threshold(umask)?;
        (latency >= threshold).then_some(u64::from(latency.min(0xFFF)))
    }
}

/// Itanium 2 / Montecito PMD3 (PMD33) `stat` (15:14) of a valid cache-mode
/// or ALAT-mode capture: 01b. The sources give `stat` values for TLB mode
/// only; pfmon's sample printer reports a Montecito D-EAR sample "valid"
/// exactly when PMD33 `stat` is non-zero, in every mode, so a valid
/// capture in any mode has `stat` != 0 (see the module notes, 13).
const DEAR_STAT_VALID: u64 = 1;

/// Itanium 2 / Montecito PMC11 (PMC40): mode 8:7 = 0 cache (umask: >= 4 <<
/// umask), 1 DTLB (umask: 2 L2, 4 HPW, 8 fault), 2 ALAT. Returns the PMD3
/// (33) value: latency 12:0, overflow 13, stat 15:14 (TLB mode: 1 L2, 2
/// HPW, 3 fault; cache and ALAT modes: 1).
fn itanium2_dear(cfg: u64, umask: u64, miss: &DataMiss) -> Option<u64> {
    match cfg.get_bits(ITA2_DEAR_MODE) {
        0 => {
            let latency = miss.latency?;
            let threshold = itanium2_dear_threshold(umask)?;
            (latency >= threshold).then_some(
                u64::from(latency.min(0x1FFF))
                    | (u64::from(latency > 0x1FFF) << 13)
                    | (DEAR_STAT_VALID << 14),
            )
        }
        1 => {
            let (bit, stat) = dtlb(miss.tlb?);
            (umask & bit != 0).then_some(stat << 14)
        }
        2 => miss.alat.then_some(DEAR_STAT_VALID << 14),
        _ => None,
    }
}

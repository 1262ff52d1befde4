//! The instruction EAR: its configuration register (Itanium/Itanium 2
//! PMC10, Montecito PMC37) and its captures (PMD0/1, Montecito PMD34/35).

use core::sync::atomic::{AtomicU64, Ordering};

use super::*;
use crate::arch::itanium::Generation;
use crate::arch::itanium::{FieldError, Ism, Plm, pmc_register};
use crate::register::Field;

/// Instruction EAR mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum IearMode {
    /// Instruction cache misses above a latency.
    CacheMiss,
    /// Instruction TLB misses.
    TlbMiss,
    /// Itanium 2 `ct` = 01b: nothing is monitored.
    Off,
}

pmc_register! {
    /// An instruction EAR configuration (PMC10, Montecito PMC37; libpfm3
    /// `pmc10_ita_reg`, `pmc10_ita2_reg`, `pmc37_mont_reg`). Itanium places
    /// `pm` and the ISM elsewhere than its successors, and Montecito has no
    /// ISM; which fields a generation has is its row of the PMC descriptor
    /// table ([`IearConfig::info`]).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct IearConfig(Generation, u64): pmc(IearConfig::info) {
        /// The privilege level mask.
        pub(crate) PLM: 0..=3 => plm, with_plm: Plm;
        /// Itanium `pm`.
        pub(crate) ITA_PM: 6;
        /// Itanium `tlb`: TLB mode (1) or cache mode (0).
        pub(crate) ITA_TLB: 7;
        /// Itanium unit mask.
        pub(crate) ITA_UMASK: 16..=19;
        /// Itanium instruction set mask.
        pub(crate) ITA_ISM: 24..=25;
        /// Itanium 2 and Montecito `pm`.
        pub(crate) PM: 4;
        /// Itanium 2 and Montecito unit mask in cache mode.
        pub(crate) CACHE_UMASK: 5..=12;
        /// Itanium 2 and Montecito unit mask in TLB mode.
        pub(crate) TLB_UMASK: 5..=11;
        /// Itanium 2 and Montecito `ct`: TLB (0), off (1), cache (1x).
        pub(crate) CT: 12..=13;
        /// The high bit of `ct`: cache mode.
        pub(crate) CT_HI: 13;
        /// Itanium 2 instruction set mask.
        pub(crate) ITA2_ISM: 14..=15;
    }
}

/// The I-EAR fields of one generation that move.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct IearLayout {
    pm: Field,
    ism: Option<Field>,
}

const fn iear_layout(generation: Generation) -> IearLayout {
    match generation {
        Generation::Itanium => IearLayout {
            pm: IearConfig::ITA_PM,
            ism: Some(IearConfig::ITA_ISM),
        },
        Generation::Itanium2 => IearLayout {
            pm: IearConfig::PM,
            ism: Some(IearConfig::ITA2_ISM),
        },
        Generation::Montecito => IearLayout {
            pm: IearConfig::PM,
            ism: None,
        },
    }
}

impl IearConfig {
    /// The register number.
    pub const fn pmc(generation: Generation) -> u8 {
        generation.iear_pmc()
    }

    /// Capture instruction cache misses at or above `latency` (PLM zero:
    /// set one with [`IearConfig::with_plm`]).
    pub const fn cache_misses(
        generation: Generation,
        latency: LatencyFilter,
    ) -> Result<IearConfig, FieldError> {
        let umask = match latency.iear_umask(generation) {
            Some(u) => u as u64,
            None => return Err(FieldError::LatencyNotAvailable { generation }),
        };
        let base = Self::info(generation).default;
        let bits = match generation {
            Generation::Itanium => Self::ITA_UMASK.set(Self::ITA_TLB.set_flag(base, false), umask),
            _ => Self::CACHE_UMASK.set(Self::CT_HI.set_flag(base, true), umask),
        };
        Ok(IearConfig { generation, bits })
    }

    /// Capture instruction TLB misses filled as `fills` says. On Itanium
    /// asking for L2 fills is an error ([`FieldError::L2FillNotOnItanium`]).
    pub const fn tlb_misses(
        generation: Generation,
        fills: TlbFills,
    ) -> Result<IearConfig, FieldError> {
        let umask = match tlb_encode(generation, true, fills) {
            Ok(u) => u as u64,
            Err(e) => return Err(e),
        };
        let base = Self::info(generation).default;
        let bits = match generation {
            Generation::Itanium => Self::ITA_UMASK.set(Self::ITA_TLB.set_flag(base, true), umask),
            _ => Self::TLB_UMASK.set(Self::CT.set(base, 0), umask),
        };
        Ok(IearConfig { generation, bits })
    }

    /// The `pm` bit (bit 6 on Itanium, bit 4 after).
    pub const fn privileged(self) -> bool {
        iear_layout(self.generation).pm.flag(self.bits)
    }

    /// With the `pm` bit set or cleared.
    pub const fn with_privileged(self, on: bool) -> IearConfig {
        self.with_bits(iear_layout(self.generation).pm.set_flag(self.bits, on))
    }

    /// The instruction set mask; `None` on Montecito, whose PMC37 has none.
    pub const fn ism(self) -> Option<Ism> {
        match iear_layout(self.generation).ism {
            Some(f) => Some(Ism::from_bits(f.get(self.bits))),
            None => None,
        }
    }

    /// With the instruction set mask replaced.
    pub const fn with_ism(self, ism: Ism) -> Result<IearConfig, FieldError> {
        match iear_layout(self.generation).ism {
            Some(f) => Ok(self.with_bits(f.set(self.bits, ism.bits() as u64))),
            None => Err(FieldError::NoSuchField {
                field: "ism",
                generation: self.generation,
                pmc: self.generation.iear_pmc(),
            }),
        }
    }

    /// The mode.
    pub const fn mode(self) -> IearMode {
        match self.generation {
            Generation::Itanium => {
                if Self::ITA_TLB.flag(self.bits) {
                    IearMode::TlbMiss
                } else {
                    IearMode::CacheMiss
                }
            }
            _ => match Self::CT.get(self.bits) {
                0 => IearMode::TlbMiss,
                1 => IearMode::Off,
                _ => IearMode::CacheMiss,
            },
        }
    }

    /// The unit mask of the current mode (4 bits on Itanium; 8 bits in
    /// cache mode and 7 in TLB mode after).
    pub const fn umask(self) -> u8 {
        match self.generation {
            Generation::Itanium => Self::ITA_UMASK.get(self.bits) as u8,
            _ => match self.mode() {
                IearMode::CacheMiss => Self::CACHE_UMASK.get(self.bits) as u8,
                _ => Self::TLB_UMASK.get(self.bits) as u8,
            },
        }
    }

    /// The latency filter, in cache mode, if the unit mask is a named one.
    pub const fn latency(self) -> Option<LatencyFilter> {
        match self.mode() {
            IearMode::CacheMiss => LatencyFilter::from_iear_umask(self.generation, self.umask()),
            _ => None,
        }
    }

    /// The fills captured, in TLB mode.
    pub const fn tlb_fills(self) -> Option<TlbFills> {
        match self.mode() {
            IearMode::TlbMiss => Some(tlb_decode(self.generation, true, self.umask()).0),
            _ => None,
        }
    }

    /// What is wrong with the unit mask, if anything. In cache mode only the
    /// latency codes the sources name are defined: Itanium 0h-Ah and Fh
    /// (Bh-Eh undefined); Itanium 2 and Montecito the mask patterns 00h
    /// (RAB hit), 40h (any latency) and 80h, C0h, E0h, F0h, F8h, FCh, FEh,
    /// FFh (at least 4096 ... 4 cycles), every other 8-bit pattern undefined
    /// (libpfm's `INSTRUCTION_EAR_CACHE_LAT*` / `L1I_EAR_CACHE_LAT*` codes).
    /// In TLB mode bits that name no fill are undefined, and on Itanium bit 1
    /// (the D-EAR's L2 bit) asks for L2 fills, which the Itanium I-EAR does
    /// not have.
    pub const fn umask_problem(self) -> Option<UmaskProblem> {
        let u = self.umask();
        match (self.generation, self.mode()) {
            (g, IearMode::CacheMiss) => {
                if LatencyFilter::from_iear_umask(g, u).is_none() {
                    Some(UmaskProblem::Undefined(u))
                } else {
                    None
                }
            }
            (_, IearMode::TlbMiss) => {
                if matches!(self.generation, Generation::Itanium) && u & 0x2 != 0 {
                    return Some(UmaskProblem::L2FillOnItanium);
                }
                if tlb_decode(self.generation, true, u).1 != 0 {
                    Some(UmaskProblem::Undefined(u))
                } else {
                    None
                }
            }
            _ => None,
        }
    }
}

/// One I-EAR capture in TLB mode: an instruction TLB miss, its address
/// and the level that filled it (as HP Caliper's itlb measurement records
/// them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ItlbSample {
    /// The instruction address the I-EAR captured (32-byte aligned).
    pub address: u64,
    /// Who filled the translation.
    pub fill: TlbFill,
}

impl ItlbSample {
    /// Decode the I-EAR's address PMD for an I-EAR configured as `config`
    /// with [`IearSample::decode`] (libpfm3's PMD layouts, pfmon's
    /// decoders: Itanium PMD0 `v` 0, `tlb` 1: 0 HPW, 1 software; Itanium 2
    /// PMD0 / Montecito PMD34 `stat` 1:0: 1 L2 ITLB, 2 HPW, 3 software;
    /// address 63:5). `None` unless it is a valid TLB-mode capture.
    pub const fn decode(config: IearConfig, pmd0: u64) -> Option<ItlbSample> {
        match config.mode() {
            IearMode::TlbMiss => Self::from_tlb_pmd(config.generation, pmd0),
            _ => None,
        }
    }

    /// [`ItlbSample::decode`] for an I-EAR known to be in TLB mode: what
    /// the overflow handler calls, the mode having been checked when the
    /// counter was configured. Agrees with [`IearSample::decode`] (tested).
    #[inline]
    pub const fn from_tlb_pmd(generation: Generation, pmd0: u64) -> Option<ItlbSample> {
        let fill = match generation {
            Generation::Itanium if pmd0 & 1 == 0 => return None,
            Generation::Itanium if pmd0 & 2 != 0 => TlbFill::Software,
            Generation::Itanium => TlbFill::Hpw,
            _ => match TlbFill::from_level(pmd0 & 3) {
                Some(fill) => fill,
                None => return None,
            },
        };
        Some(ItlbSample {
            address: pmd0 & !0x1F,
            fill,
        })
    }
}

impl crate::sealed::Sealed for ItlbSample {}

/// A TLB-mode capture in one word, as [`crate::sampling::SampleBuffer`]
/// stores a payload: the 32-byte-aligned address with the fill in bits 1:0
/// (1 L2, 2 HPW, 3 software).
impl crate::sampling::Payload for ItlbSample {
    type Slot = AtomicU64;
    #[allow(clippy::declare_interior_mutable_const)]
    const EMPTY_SLOT: AtomicU64 = AtomicU64::new(0);

    fn store(self, slot: &AtomicU64) {
        let fill = match self.fill {
            TlbFill::L2 => 1,
            TlbFill::Hpw => 2,
            TlbFill::Software => 3,
        };
        slot.store((self.address & !0x1F) | fill, Ordering::Relaxed);
    }

    fn load(slot: &AtomicU64) -> Option<ItlbSample> {
        let v = slot.load(Ordering::Relaxed);
        let fill = match v & 3 {
            1 => TlbFill::L2,
            2 => TlbFill::Hpw,
            3 => TlbFill::Software,
            _ => return None,
        };
        Some(ItlbSample {
            address: v & !0x1F,
            fill,
        })
    }
}

/// One I-EAR capture in cache mode: an instruction cache miss, the line
/// it missed on and its latency (as pfmon's I-EAR sample printers and VTune
/// report them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct IcacheSample {
    /// The 32-byte-aligned address of the instruction cache line that
    /// missed (PMD0 / Montecito PMD34 bits 63:5).
    pub line: u64,
    /// The miss latency in cycles (PMD1 / PMD35 bits 11:0).
    pub latency: u16,
    /// The latency counter overflowed: the latency is above FFFh (Itanium 2
    /// and Montecito PMD1 / PMD35 bit 12; never on Itanium, whose PMD1 has
    /// no such bit).
    pub latency_overflow: bool,
}

impl IcacheSample {
    /// Decode the I-EAR's PMDs for an I-EAR configured as `config` (with
    /// [`IearSample::decode`]). `None` unless it is a valid cache-mode
    /// capture.
    pub const fn decode(config: IearConfig, pmd0: u64, pmd1: u64) -> Option<IcacheSample> {
        match config.mode() {
            IearMode::CacheMiss => Self::from_cache_pmds(config.generation, pmd0, pmd1),
            _ => None,
        }
    }

    /// [`IcacheSample::decode`] for an I-EAR known to be in cache mode:
    /// what the overflow handler calls, the mode having been checked when
    /// the counter was configured. Per generation (libpfm3's PMD layouts,
    /// pfmon's decoders): valid when Itanium PMD0 `v` (bit 0) is set, or
    /// Itanium 2 / Montecito PMD0 (PMD34) `stat` (1:0) is non-zero; the
    /// line is bits 63:5; the latency PMD1 (PMD35) bits 11:0, and from
    /// Itanium 2 on its bit 12 says the latency overflowed. Agrees with
    /// [`IearSample::decode`] (tested).
    #[inline]
    pub const fn from_cache_pmds(
        generation: Generation,
        pmd0: u64,
        pmd1: u64,
    ) -> Option<IcacheSample> {
        let (valid, latency_overflow) = match generation {
            Generation::Itanium => (pmd0 & 1 != 0, false),
            _ => (pmd0 & 3 != 0, pmd1 & (1 << 12) != 0),
        };
        if !valid {
            return None;
        }
        Some(IcacheSample {
            line: pmd0 & !0x1F,
            latency: (pmd1 & 0xFFF) as u16,
            latency_overflow,
        })
    }
}

/// What an I-EAR sample captured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum IearEvent {
    /// An instruction cache miss.
    CacheMiss {
        /// Its latency in cycles (12 bits).
        latency: u16,
        /// The latency counter overflowed (Itanium 2 PMD1 bit 12; never on
        /// Itanium).
        latency_overflow: bool,
    },
    /// An instruction TLB miss.
    TlbMiss {
        /// The level that filled it (`None` if the sample is not valid).
        fill: Option<TlbFill>,
    },
    /// The I-EAR was configured to capture nothing.
    Off,
}

/// A decoded I-EAR sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct IearSample {
    /// Whether the EAR holds a capture.
    pub valid: bool,
    /// The 32-byte-aligned address of the instruction cache line (bits
    /// 63:5 of PMD0; libpfm calls it `icla`/`iaddr`).
    pub line: u64,
    /// What was captured.
    pub event: IearEvent,
}

impl IearSample {
    /// Decode PMD0 and PMD1 (Montecito PMD34/35) for an I-EAR configured as
    /// `config`. Total: any register values decode.
    pub const fn decode(config: IearConfig, pmd0: u64, pmd1: u64) -> IearSample {
        let line = pmd0 & !0x1F;
        match config.generation {
            Generation::Itanium => {
                let valid = pmd0 & 1 != 0;
                let event = match config.mode() {
                    IearMode::TlbMiss => IearEvent::TlbMiss {
                        fill: if !valid {
                            None
                        } else if pmd0 & 2 != 0 {
                            Some(TlbFill::Software)
                        } else {
                            Some(TlbFill::Hpw)
                        },
                    },
                    _ => IearEvent::CacheMiss {
                        latency: (pmd1 & 0xFFF) as u16,
                        latency_overflow: false,
                    },
                };
                IearSample { valid, line, event }
            }
            _ => {
                let stat = pmd0 & 3;
                let valid = stat != 0;
                let event = match config.mode() {
                    IearMode::TlbMiss => IearEvent::TlbMiss {
                        fill: TlbFill::from_level(stat),
                    },
                    IearMode::CacheMiss => IearEvent::CacheMiss {
                        latency: (pmd1 & 0xFFF) as u16,
                        latency_overflow: pmd1 & (1 << 12) != 0,
                    },
                    IearMode::Off => IearEvent::Off,
                };
                IearSample {
                    valid: valid && !matches!(event, IearEvent::Off),
                    line,
                    event,
                }
            }
        }
    }
}

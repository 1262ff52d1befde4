//! The model's own constant tables, transcribed from public PMU code (Linux
//! perfmon's per-model tables; libpfm3's register layouts and its event
//! tables `itanium_events.h`, `itanium2_events.h`), the Itanium SDM rev 2.3
//! Vol. 2 Part 1 section 7.2 and Intel VTune's "Edit Events" help for
//! Itanium: which PMC/PMD numbers each generation
//! implements, which bits of each register are writable, the power-up values,
//! the EAR/BTB register numbers and field positions, and the event codes the
//! EARs and the branch trace buffer feed.
//!
//! Written independently of the driver's layouts (`crate::arch::itanium`) on
//! purpose: the model is a test instrument, and two transcriptions catch each
//! other's mistakes.

/// An Itanium-family PMU generation: the driver's vocabulary type. The
/// model's facts about each ([`Tables`]) are its own transcription.
pub use crate::arch::itanium::Generation;

/// The model's own facts about each generation, transcribed independently
/// of the driver's (`crate::arch::itanium::Generation`'s own).
pub trait Tables: Copy + crate::sealed::Sealed {
    /// Counter width W in bits.
    fn pmd_width(self) -> u32;
    /// The W count bits of a counter PMD.
    fn pmd_mask(self) -> u64;
    /// The last generic counter.
    fn last_counter(self) -> u32;
    /// Whether PMC/PMD `n` is a generic counter pair.
    fn is_counter(self, n: u32) -> bool;
    /// The mask of the PMC event-select field's value.
    fn event_select_mask(self) -> u64;
    /// The EAR and branch-trace register numbers and event codes.
    fn layout(self) -> Layout;
}

impl crate::sealed::Sealed for Generation {}

impl Tables for Generation {
    /// Counter width W in bits (Linux perfmon's `ovfl_val`, libpfm3: 32 on
    /// Itanium, 47 after).
    fn pmd_width(self) -> u32 {
        match self {
            Generation::Itanium => 32,
            Generation::Itanium2 | Generation::Montecito => 47,
        }
    }

    /// The W count bits of a counter PMD.
    fn pmd_mask(self) -> u64 {
        (1 << self.pmd_width()) - 1
    }

    /// The last generic counter: PMC/PMD4..=7, or 4..=15 on Montecito.
    fn last_counter(self) -> u32 {
        match self {
            Generation::Itanium | Generation::Itanium2 => 7,
            Generation::Montecito => 15,
        }
    }

    /// Whether PMC/PMD `n` is a generic counter pair.
    fn is_counter(self, n: u32) -> bool {
        n >= 4 && n <= self.last_counter()
    }

    /// Width of the PMC event-select field: 7 bits (14:8) on Itanium, where
    /// bit 15 is ignored; 8 bits (15:8) after.
    fn event_select_mask(self) -> u64 {
        match self {
            Generation::Itanium => 0x7F,
            Generation::Itanium2 | Generation::Montecito => 0xFF,
        }
    }

    /// The EAR and branch-trace register numbers and event codes.
    fn layout(self) -> Layout {
        match self {
            Generation::Itanium => Layout {
                iear_pmc: 10,
                iear_pm_bit: 6,
                iear_pmd_address: 0,
                iear_pmd_latency: 1,
                dear_pmc: 11,
                dear_pmd_address: 2,
                dear_pmd_latency: 3,
                dear_pmd_ip: 17,
                btb_pmc: 12,
                btb_first_pmd: 8,
                btb_entries: 8,
                btb_index_pmd: 16,
                btb_extension_pmd: None,
                iear_events: events::itanium::INSTRUCTION_EAR_EVENTS,
                dear_events: events::itanium::DATA_EAR_EVENTS,
                branch_event: events::BRANCH_EVENT,
            },
            Generation::Itanium2 => Layout {
                iear_pmc: 10,
                iear_pm_bit: 4,
                iear_pmd_address: 0,
                iear_pmd_latency: 1,
                dear_pmc: 11,
                dear_pmd_address: 2,
                dear_pmd_latency: 3,
                dear_pmd_ip: 17,
                btb_pmc: 12,
                btb_first_pmd: 8,
                btb_entries: 8,
                btb_index_pmd: 16,
                // The extension nibbles live in PMD16 above the index.
                btb_extension_pmd: Some(16),
                iear_events: events::itanium2::L1I_EAR_EVENTS,
                dear_events: events::itanium2::DATA_EAR_EVENTS,
                branch_event: events::BRANCH_EVENT,
            },
            Generation::Montecito => Layout {
                iear_pmc: 37,
                iear_pm_bit: 4,
                iear_pmd_address: 34,
                iear_pmd_latency: 35,
                dear_pmc: 40,
                dear_pmd_address: 32,
                dear_pmd_latency: 33,
                dear_pmd_ip: 36,
                btb_pmc: 39,
                btb_first_pmd: 48,
                btb_entries: 16,
                btb_index_pmd: 38,
                btb_extension_pmd: Some(39),
                iear_events: events::itanium2::L1I_EAR_EVENTS,
                dear_events: events::itanium2::DATA_EAR_EVENTS,
                branch_event: events::BRANCH_EVENT,
            },
        }
    }
}

/// Where a generation keeps its event address registers and its branch trace
/// buffer (libpfm3's EAR and BTB layouts), and the event codes of the
/// counting events they feed (libpfm3's event tables: the `*_EAR_EVENTS`
/// and `BRANCH_EVENT` codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// I-EAR configuration PMC (10, or 37 on Montecito).
    pub iear_pmc: u32,
    /// Bit of the I-EAR PMC's `pm` field (6 on Itanium, 4 after).
    pub iear_pm_bit: u32,
    /// I-EAR address PMD (0, or 34).
    pub iear_pmd_address: u32,
    /// I-EAR latency PMD (1, or 35).
    pub iear_pmd_latency: u32,
    /// D-EAR configuration PMC (11, or 40).
    pub dear_pmc: u32,
    /// D-EAR data-address PMD (2, or 32).
    pub dear_pmd_address: u32,
    /// D-EAR latency/status PMD (3, or 33).
    pub dear_pmd_latency: u32,
    /// D-EAR instruction-address PMD (17, or 36).
    pub dear_pmd_ip: u32,
    /// Branch trace configuration PMC (12, or 39 for Montecito's ETB).
    pub btb_pmc: u32,
    /// First branch trace entry PMD (8, or 48).
    pub btb_first_pmd: u32,
    /// Number of entries (8, or 16).
    pub btb_entries: u32,
    /// The index PMD (16: bbi 2:0, full 3; Montecito 38: ebi 3:0, full 5).
    pub btb_index_pmd: u32,
    /// The PMD holding the 4-bit per-entry extensions (b1, bruflush): PMD16
    /// bits 35:4 on Itanium 2, PMD39 on Montecito; none on Itanium.
    pub btb_extension_pmd: Option<u32>,
    /// The event that counts I-EAR captures.
    pub iear_events: u8,
    /// The event that counts D-EAR captures.
    pub dear_events: u8,
    /// The event that counts branch trace captures (BRANCH_EVENT/ETB_EVENT).
    pub branch_event: u8,
}

/// The event codes the model itself generates (libpfm3's event tables),
/// plus a few common ones for tests.
pub mod events {
    /// BRANCH_EVENT (Itanium, Itanium 2) / ETB_EVENT (Montecito), umask 0.
    pub const BRANCH_EVENT: u8 = 0x11;
    /// CPU_CYCLES (Itanium, Itanium 2) / CPU_OP_CYCLES_ALL (Montecito), umask 0.
    #[cfg(test)]
    pub const CPU_CYCLES: u8 = 0x12;
    /// IA64_INST_RETIRED, umask 0, up to 6 per cycle (PMC4/5 only on Itanium).
    #[cfg(test)]
    pub const IA64_INST_RETIRED: u8 = 0x08;

    /// Itanium (Merced) codes.
    pub mod itanium {
        /// INSTRUCTION_EAR_EVENTS.
        pub const INSTRUCTION_EAR_EVENTS: u8 = 0x23;
        /// DATA_EAR_EVENTS.
        pub const DATA_EAR_EVENTS: u8 = 0x67;
    }

    /// Itanium 2 and Montecito codes.
    pub mod itanium2 {
        /// L1I_EAR_EVENTS.
        pub const L1I_EAR_EVENTS: u8 = 0x43;
        /// DATA_EAR_EVENTS.
        pub const DATA_EAR_EVENTS: u8 = 0xC8;
    }
}

/// PMC0, the overflow status and freeze register (SDM 7.2.2; Linux
/// `perfmon.c`).
pub mod pmc0 {
    /// `fr`: freeze. Set by the hardware on an interrupting overflow; while
    /// set, nothing counts or captures.
    pub const FR: u64 = 1 << 0;
}

/// Generic counter configuration register (PMC4..p) fields: SDM Table 7-4
/// for 7:0 and es, libpfm3's counter layouts and VTune's Itanium event help
/// for the rest.
pub mod counter {
    use core::ops::Range;

    /// `plm`, bits 3:0: bit n enables counting at privilege level n.
    pub const PLM: u64 = 0xF;
    /// `ev`, bit 4: strobe a BPM pin when the counter wraps.
    pub const EV: u64 = 1 << 4;
    /// `oi`, bit 5: on overflow set the overflow bit and PMC0.fr and raise
    /// the PMU interrupt.
    pub const OI: u64 = 1 << 5;
    /// `pm`, bit 6: privileged monitor (enabled by PSR.pp, not PSR.up).
    pub const PM: u64 = 1 << 6;
    /// `es`, bits 15:8 (14:8 on Itanium: see `event_select_mask`).
    pub const ES: Range<usize> = 8..16;
    /// `umask`, bits 19:16.
    pub const UMASK: Range<usize> = 16..20;
    /// `threshold`, bits 22:20 (21:20 on Itanium PMC6/7, per VTune).
    pub const THRESHOLD: Range<usize> = 20..23;
    /// Itanium 2 PMC4 bit 23: enable for every counter.
    pub const ITANIUM2_ENABLE: u64 = 1 << 23;
    /// `ism`, bits 25:24: bit 24 clear admits IA-64, bit 25 clear IA-32.
    pub const ISM: Range<usize> = 24..26;
    /// Itanium 2 bits 27:26: "must be zero for proper operations".
    pub const ITANIUM2_MUST_BE_ZERO: u64 = 3 << 26;
    /// Montecito MESI filter, bits 30:27 (i, s, e, m).
    pub const MONTECITO_MESI: Range<usize> = 27..31;
}

/// The writable bits and power-up value of one register.
///
/// The hardware stores `writable` bits from the value written and keeps the
/// others at their `reset` value (zero for ignored fields: "reads return
/// 0"). Where Linux perfmon has a writable-bits mask (`reserved_mask` in
/// its register descriptors), it is used; where it has none (Itanium: -1
/// everywhere), libpfm3's layout is: defined fields writable, `ig` fields
/// not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegSpec {
    /// Bits software can change.
    pub writable: u64,
    /// Power-up value (Linux perfmon's "default value"; bits outside
    /// `writable` always read as these).
    pub reset: u64,
    /// Writable bits libpfm3 says must be written as zero.
    pub must_be_zero: u64,
}

impl RegSpec {
    const fn rw(writable: u64) -> Self {
        Self {
            writable,
            reset: 0,
            must_be_zero: 0,
        }
    }

    const fn with_reset(writable: u64, reset: u64) -> Self {
        Self {
            writable,
            reset,
            must_be_zero: 0,
        }
    }

    /// A register with no writable bit (PMC1-3: overflow bits of counters
    /// that do not exist).
    const NONE: Self = Self::rw(0);
}

/// Itanium PMC4/5: plm, ev, oi, pm, es 14:8, umask, threshold 22:20, ism.
const ITA_COUNTER_45: u64 = 0x037F_7F7F;
/// Itanium PMC6/7: threshold only 21:20 (VTune's Itanium event help).
const ITA_COUNTER_67: u64 = 0x033F_7F7F;
/// Itanium PMC8/9: mask 29:3, match 59:33, b/f/i/m 63:60 (ig 2:0, 32:30).
const ITA_OPCODE: u64 = 0xFFFF_FFFE_3FFF_FFF8;
/// Itanium 2 counters: Linux's mask 0xfffff7f (6:0, 27:8).
const ITA2_COUNTER: u64 = 0x0FFF_FF7F;
/// Itanium 2 PMC8/9: everything but bit 2 (must be 1) and 31:30.
const ITA2_OPCODE: u64 = 0xFFFF_FFFF_3FFF_FFFB;
/// Itanium 2 PMC13 / Montecito PMC41 (DBR configuration).
const DBR_CONFIG: u64 = 0x0001_E000_1818_1818;
/// Its power-up value.
const DBR_CONFIG_RESET: u64 = 0x0000_2078_FEFE_FEFE;
/// Montecito counters: Linux's mask 0x7c7fff7f (6:0, 22:8, 30:26).
const MONT_COUNTER: u64 = 0x7C7F_FF7F;
/// Montecito counter power-up value: ism = 10b (IA-64 only).
const MONT_ISM_IA64: u64 = 0x0200_0000;

/// The PMC `n` of `generation`, or `None` if it is not implemented (Linux
/// perfmon's tables; layouts from libpfm3).
pub const fn pmc_spec(generation: Generation, n: u32) -> Option<RegSpec> {
    use Generation::*;
    Some(match (generation, n) {
        (Itanium | Itanium2, 0) => RegSpec::with_reset(0xF1, pmc0::FR),
        (Montecito, 0) => RegSpec::rw(0xFFF1),
        (_, 1..=3) => RegSpec::NONE,
        (Itanium, 4 | 5) => RegSpec::rw(ITA_COUNTER_45),
        (Itanium, 6 | 7) => RegSpec::rw(ITA_COUNTER_67),
        (Itanium, 8 | 9) => RegSpec::with_reset(ITA_OPCODE, 0xF000_0000_3FFF_FFF8),
        // I-EAR: plm, pm 6, tlb 7, umask 19:16, ism 25:24.
        (Itanium, 10) => RegSpec::rw(0x030F_00CF),
        // D-EAR: the same plus pt 28 (power-up 1).
        (Itanium, 11) => RegSpec::with_reset(0x130F_00CF, 1 << 28),
        // BTB: plm, pm, tar, tm, ptm, ppm, bpt, bac.
        (Itanium, 12) => RegSpec::rw(0xFFCF),
        // ta (bit 0) plus the bits Linux's power-up value holds (49:32).
        (Itanium, 13) => RegSpec::with_reset(0x0003_FFFF_0000_0001, 0x0003_FFFF_0000_0001),
        (Itanium2, 4) => RegSpec {
            writable: ITA2_COUNTER,
            reset: counter::ITANIUM2_ENABLE,
            must_be_zero: counter::ITANIUM2_MUST_BE_ZERO,
        },
        (Itanium2, 5..=7) => RegSpec {
            writable: ITA2_COUNTER,
            reset: 0,
            must_be_zero: counter::ITANIUM2_MUST_BE_ZERO,
        },
        (Itanium2, 8) => RegSpec::with_reset(ITA2_OPCODE, 0xFFFF_FFFF_3FFF_FFFF),
        (Itanium2, 9) => RegSpec::with_reset(ITA2_OPCODE, 0xFFFF_FFFF_3FFF_FFFC),
        // I-EAR: plm, pm 4, umask/ct 13:5, ism 15:14.
        (Itanium2, 10) => RegSpec::rw(0xFFFF),
        // D-EAR: plm, pm 6, mode 8:7, umask 19:16, ism 25:24.
        (Itanium2, 11) => RegSpec::rw(0x030F_01CF),
        // BTB: plm, pm, ds, tm, ptm, ppm, brt; 5:4 ignored (libpfm3's
        // `btbc_ig1`, and perfmon's mask for Montecito's PMC39), not
        // writable as perfmon's Itanium 2 mask 0xFFFF has them.
        (Itanium2, 12) => RegSpec::rw(0xFFCF),
        (Itanium2, 13) => RegSpec::with_reset(DBR_CONFIG, DBR_CONFIG_RESET),
        (Itanium2, 14) => RegSpec::with_reset(0x2492, 0x0DB6_0DB6_0DB6_0DB6),
        (Itanium2, 15) => RegSpec::with_reset(0xF, 0xFFFF_FFF0),
        (Montecito, 4..=15) => RegSpec::with_reset(MONT_COUNTER, MONT_ISM_IA64),
        (Montecito, 32) => RegSpec::with_reset(0x030F_01FF_FFFF_FFFF, 0x030F_01FF_FFFF_FFFF),
        (Montecito, 33 | 35) => RegSpec::rw(0x01FF_FFFF_FFFF),
        (Montecito, 34) => RegSpec::with_reset(0x000F_01FF_FFFF_FFFF, 0x000F_01FF_FFFF_FFFF),
        (Montecito, 36) => RegSpec::with_reset(0xF, 0xFFFF_FFF0),
        // I-EAR: as Itanium 2 PMC10 without ism.
        (Montecito, 37) => RegSpec::rw(0x3FFF),
        (Montecito, 38) => RegSpec::with_reset(0x2492, 0xDB6),
        // ETB: as Itanium 2 PMC12.
        (Montecito, 39) => RegSpec::rw(0xFFCF),
        // D-EAR: as Itanium 2 PMC11, ism held at 10b.
        (Montecito, 40) => RegSpec::with_reset(0x000F_01CF, MONT_ISM_IA64),
        (Montecito, 41) => RegSpec::with_reset(DBR_CONFIG, DBR_CONFIG_RESET),
        // IP-EAR: plm, pm, mode 10:8, delay 18:11.
        (Montecito, 42) => RegSpec::rw(0x7_FF4F),
        _ => return None,
    })
}

/// What a PMD is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PmdRule {
    /// A generic counter: W count bits; bits 63:W ignored on writes and read
    /// as a copy of bit W-1 (libpfm3's `pmd_sxt32`/`pmd_sxt47`).
    Counter,
    /// Any other PMD: the `writable` bits hold what was written (or
    /// captured); the others read as zero.
    Data {
        /// Bits software (and the EARs/BTB) can set.
        writable: u64,
    },
}

const ALL: u64 = u64::MAX;
/// I-EAR address PMD: bits 4:2 ignored.
const IEAR_ADDRESS: u64 = !0x1C;
/// Itanium 2 PMD16: bbi 2:0, full 3, and per entry b1/bruflush at 4+4i, 5+4i.
const ITA2_BTB_INDEX: u64 = 0xF | (0x3333_3333 << 4);

/// The PMD `n` of `generation`, or `None` if it is not implemented
/// (Linux perfmon's tables; layouts from libpfm3's EAR and BTB registers).
pub fn pmd_kind(generation: Generation, n: u32) -> Option<PmdRule> {
    use Generation::*;
    if generation.is_counter(n) {
        return Some(PmdRule::Counter);
    }
    let writable = match (generation, n) {
        (Itanium | Itanium2, 0) => IEAR_ADDRESS,
        (Itanium, 1) => 0xFFF,
        (Itanium2, 1) => 0x1FFF,
        (Itanium | Itanium2, 2) => ALL,
        (Itanium, 3) => 0xC000_0000_0000_0FFF,
        (Itanium2, 3) => 0xFFFF,
        (Itanium | Itanium2, 8..=15) => ALL,
        (Itanium, 16) => 0xF,
        (Itanium2, 16) => ITA2_BTB_INDEX,
        // vl 0, slot 3:2, iaddr 63:4 (bit 1 ignored).
        (Itanium, 17) => !0x2,
        (Itanium2, 17) => ALL,
        (Montecito, 32) => ALL,
        (Montecito, 33) => 0xFFFF,
        (Montecito, 34) => IEAR_ADDRESS,
        (Montecito, 35) => 0x1FFF,
        (Montecito, 36) => ALL,
        // ebi 3:0, full 5.
        (Montecito, 38) => 0x2F,
        // b1/bruflush per entry.
        (Montecito, 39) => 0x3333_3333_3333_3333,
        (Montecito, 48..=63) => ALL,
        _ => return None,
    };
    Some(PmdRule::Data { writable })
}

/// Itanium I-EAR cache mode: PMC10.umask is a latency-threshold code, code
/// 0 for at least 4 cycles up to 0xA for at least 4096 (each code doubles),
/// 0xF "none" (libpfm3's I-EAR layout and its INSTRUCTION_EAR_CACHE_LAT*
/// events).
/// `None` for 0xF and for the undefined codes 0xB-0xE: nothing qualifies.
pub const fn itanium_iear_threshold(umask: u64) -> Option<u32> {
    match umask {
        0..=0xA => Some(4 << umask),
        _ => None,
    }
}

/// Whether an Itanium I-EAR cache-mode umask is one libpfm3 defines
/// (0-0xA, 0xF).
pub const fn itanium_iear_umask_defined(umask: u64) -> bool {
    matches!(umask, 0..=0xA | 0xF)
}

/// Itanium D-EAR cache mode: codes 0-6 for >= 4..256, 8-0xA for >= 512..2048
/// (7 unused), 0xF "none" (libpfm3 `itanium_events.h`, DATA_EAR_CACHE_LAT*).
pub const fn itanium_dear_threshold(umask: u64) -> Option<u32> {
    match umask {
        0..=6 => Some(4 << umask),
        8..=0xA => Some(4 << (umask - 1)),
        _ => None,
    }
}

/// Whether an Itanium D-EAR cache-mode umask is defined (0-6, 8-0xA, 0xF).
pub const fn itanium_dear_umask_defined(umask: u64) -> bool {
    matches!(umask, 0..=6 | 8..=0xA | 0xF)
}

/// Itanium 2 / Montecito D-EAR cache mode: umask 0-0xA for >= 4..4096.
pub const fn itanium2_dear_threshold(umask: u64) -> Option<u32> {
    match umask {
        0..=0xA => Some(4 << umask),
        _ => None,
    }
}

/// Which L1I misses an Itanium 2 / Montecito I-EAR in cache mode selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IearCacheSelect {
    /// umask 00h: only misses that hit the RAB (L1I_EAR_CACHE_RAB).
    RabHit,
    /// umask 40h: every L1I miss ("> 0 cycles", L1I_EAR_CACHE_LAT0).
    AllMisses,
    /// umask 1...10...0b: misses whose latency is at least this.
    AtLeast(u32),
}

/// Decodes the 8-bit cache-mode umask (PMC10 bits 12:5) of the Itanium 2 /
/// Montecito I-EAR. libpfm3 lists FFh >= 4, FEh >= 8, FCh >= 16,
/// F8h >= 32, F0h >= 128, E0h >= 256, C0h >= 1024, 80h >= 4096, 40h "> 0
/// cycles" and 00h "RAB hit"; the model reads bit 7 set as a run of ones
/// from the top whose length selects the threshold (the eight listed
/// patterns are all such runs), 40h as "all misses", and anything else as
/// undefined (`None`): no source defines 41h-7Fh (bits 7:6 = 01b with bits
/// 5:0 non-zero are not "all misses"; the driver's validator has the same
/// rule, the sources' list).
pub const fn itanium2_iear_cache_select(umask: u64) -> Option<IearCacheSelect> {
    let umask = (umask & 0xFF) as u8;
    if umask == 0 {
        return Some(IearCacheSelect::RabHit);
    }
    if umask == 0x40 {
        return Some(IearCacheSelect::AllMisses);
    }
    if umask & 0x80 == 0 || umask.leading_ones() + umask.trailing_zeros() != 8 {
        return None;
    }
    // Ones from the top: 8 -> >= 4, 7 -> 8, 6 -> 16, 5 -> 32, 4 -> 128,
    // 3 -> 256, 2 -> 1024, 1 -> 4096.
    const BY_ONES: [u32; 9] = [0, 4096, 1024, 256, 128, 32, 16, 8, 4];
    Some(IearCacheSelect::AtLeast(
        BY_ONES[umask.leading_ones() as usize],
    ))
}

/// Fill-source bits of the TLB-mode umasks (libpfm3's EAR TLB events).
pub mod tlb_umask {
    /// Itanium I-EAR (PMC10 bits 19:16): VHPT (hardware page walker) fill.
    pub const ITANIUM_IEAR_HPW: u64 = 0x4;
    /// Itanium I-EAR: software fill. (No L2 option on the I side.)
    pub const ITANIUM_IEAR_SOFTWARE: u64 = 0x8;
    /// D-EAR (PMC11 bits 19:16, every generation): L2 DTLB hit.
    pub const DEAR_L2: u64 = 0x2;
    /// D-EAR: VHPT (HPW) fill.
    pub const DEAR_HPW: u64 = 0x4;
    /// D-EAR: software fill (fault).
    pub const DEAR_SOFTWARE: u64 = 0x8;
    /// Itanium 2 / Montecito I-EAR (umask bits 11:5, i.e. PMC bit 5): L2 ITLB.
    pub const ITANIUM2_IEAR_L2: u64 = 0x1;
    /// Itanium 2 / Montecito I-EAR: VHPT (HPW) fill.
    pub const ITANIUM2_IEAR_HPW: u64 = 0x2;
    /// Itanium 2 / Montecito I-EAR: fault (software fill).
    pub const ITANIUM2_IEAR_SOFTWARE: u64 = 0x4;
}

//! The register map and layouts (documented on [`Counter`]).

use crate::register::{Field, register};

/// `IA32_PMC0`; general counter n is `IA32_PMC0 + n`.
pub const IA32_PMC0: u32 = 0xC1;
/// `IA32_A_PMC0`, the full-width alias of `IA32_PMC0`.
pub const IA32_A_PMC0: u32 = 0x4C1;
/// `IA32_PERFEVTSEL0`; general counter n's is `IA32_PERFEVTSEL0 + n`.
pub const IA32_PERFEVTSEL0: u32 = 0x186;
/// `IA32_FIXED_CTR0`; fixed counter i is `IA32_FIXED_CTR0 + i`.
pub const IA32_FIXED_CTR0: u32 = 0x309;
/// `IA32_FIXED_CTR_CTRL`.
pub const IA32_FIXED_CTR_CTRL: u32 = 0x38D;
/// `IA32_PERF_GLOBAL_STATUS`.
pub const IA32_PERF_GLOBAL_STATUS: u32 = 0x38E;
/// `IA32_PERF_GLOBAL_CTRL`.
pub const IA32_PERF_GLOBAL_CTRL: u32 = 0x38F;
/// `IA32_PERF_GLOBAL_OVF_CTRL` (v4: `IA32_PERF_GLOBAL_STATUS_RESET`).
pub const IA32_PERF_GLOBAL_OVF_CTRL: u32 = 0x390;
/// `IA32_PERF_GLOBAL_STATUS_SET` (v4).
pub const IA32_PERF_GLOBAL_STATUS_SET: u32 = 0x391;
/// `IA32_PERF_GLOBAL_INUSE` (v4).
pub const IA32_PERF_GLOBAL_INUSE: u32 = 0x392;
/// `IA32_PEBS_ENABLE` ([`PebsEnable`]).
pub const IA32_PEBS_ENABLE: u32 = 0x3F1;
/// `MSR_PEBS_DATA_CFG` ([`PebsDataCfg`], PEBS baseline).
pub const MSR_PEBS_DATA_CFG: u32 = 0x3F2;
/// `MSR_PEBS_LD_LAT` ([`PebsLdLat`]).
pub const MSR_PEBS_LD_LAT: u32 = 0x3F6;
/// `IA32_DS_AREA`: the linear address of the DS save area
/// ([`crate::arch::ia32::ds`]).
pub const IA32_DS_AREA: u32 = 0x600;

/// The most general counters the crate drives (its handles `g0`-`g7`).
pub const MAX_GENERAL: u8 = 8;
/// The most fixed counters the crate drives (`f0`-`f3`).
pub const MAX_FIXED: u8 = 4;

/// A counter of the architectural PMU, numbered as its bit in the `GLOBAL`
/// registers: general counter n is n (0-7), fixed counter i is 32 + i
/// (32-35). A counter handle's `N` is this number.
///
/// # Register map
///
/// The register map and layouts of Intel's architectural performance
/// monitoring (SDM Vol. 3B, "Architectural Performance Monitoring",
/// versions 1-5; MSR numbers from Vol. 4, "Architectural MSRs"):
///
/// | MSR | name | layout |
/// |---|---|---|
/// | C1H + n | `IA32_PMCn` | general counter n; a write keeps bits 31:0 and sign-extends them to the counter's width |
/// | 4C1H + n | `IA32_A_PMCn` | the same counter, written at full width (`IA32_PERF_CAPABILITIES[13]`) |
/// | 186H + n | `IA32_PERFEVTSELn` | [`PerfEvtSel`] |
/// | 309H + i | `IA32_FIXED_CTRi` | fixed counter i (NetBurst's `MSR_FLAME_PERFCTR1-3` share 309H-30BH: which one a number means depends on the CPU) |
/// | 345H | `IA32_PERF_CAPABILITIES` | [`PerfCapabilities`](crate::detect::PerfCapabilities) (read by detection) |
/// | 38DH | `IA32_FIXED_CTR_CTRL` | [`FixedCtrCtrl`] |
/// | 38EH | `IA32_PERF_GLOBAL_STATUS` | [`CounterSet`] of overflowed counters (read only) |
/// | 38FH | `IA32_PERF_GLOBAL_CTRL` | [`CounterSet`] of enabled counters (v2+) |
/// | 390H | `IA32_PERF_GLOBAL_OVF_CTRL` | [`CounterSet`]: a 1 clears that status bit (v4 calls it `STATUS_RESET`) |
/// | 391H | `IA32_PERF_GLOBAL_STATUS_SET` | [`CounterSet`]: a 1 sets that status bit (v4) |
/// | 392H | `IA32_PERF_GLOBAL_INUSE` | counters in use (v4, read only) |
/// | 3F1H | `IA32_PEBS_ENABLE` | [`PebsEnable`] |
/// | 3F2H | `MSR_PEBS_DATA_CFG` | [`PebsDataCfg`] (PEBS baseline) |
/// | 3F6H | `MSR_PEBS_LD_LAT` | [`PebsLdLat`] |
/// | 600H | `IA32_DS_AREA` | the DS save area's linear address ([`crate::arch::ia32::ds`]) |
///
/// `IA32_PERF_GLOBAL_STATUS` bit 62 ([`GlobalStatus::ovf_buf`]) is the PEBS
/// buffer's: set when the PEBS index reaches the interrupt threshold.
/// In the `GLOBAL` registers general counter n is bit n and fixed counter i
/// is bit 32 + i; the crate numbers its counter handles the same way
/// ([`Counter`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Counter(u8);

impl Counter {
    /// General counter `n` (0-7).
    pub const fn general(n: u8) -> Option<Counter> {
        if n < MAX_GENERAL {
            Some(Counter(n))
        } else {
            None
        }
    }

    /// Fixed counter `i` (0-3).
    pub const fn fixed(i: u8) -> Option<Counter> {
        if i < MAX_FIXED {
            Some(Counter(32 + i))
        } else {
            None
        }
    }

    /// The counter whose `GLOBAL` bit (and handle number) is `n`.
    pub const fn from_index(n: u8) -> Option<Counter> {
        if n < MAX_GENERAL || (n >= 32 && n < 32 + MAX_FIXED) {
            Some(Counter(n))
        } else {
            None
        }
    }

    /// Its bit in the `GLOBAL` registers, and its handle number.
    pub const fn index(self) -> u8 {
        self.0
    }

    /// The SDM name of the counter's MSR (Vol. 4 Table 2-2):
    /// `"IA32_PMC0"` to `"IA32_PMC7"`, `"IA32_FIXED_CTR0"` to
    /// `"IA32_FIXED_CTR3"`.
    pub const fn name(self) -> &'static str {
        const GENERAL: [&str; 8] = [
            "IA32_PMC0",
            "IA32_PMC1",
            "IA32_PMC2",
            "IA32_PMC3",
            "IA32_PMC4",
            "IA32_PMC5",
            "IA32_PMC6",
            "IA32_PMC7",
        ];
        const FIXED: [&str; 4] = [
            "IA32_FIXED_CTR0",
            "IA32_FIXED_CTR1",
            "IA32_FIXED_CTR2",
            "IA32_FIXED_CTR3",
        ];
        let n = self.number() as usize;
        if self.is_fixed() {
            FIXED[n % 4]
        } else {
            GENERAL[n % 8]
        }
    }

    /// Whether it is a fixed counter.
    pub const fn is_fixed(self) -> bool {
        self.0 >= 32
    }

    /// The general counter's n, or the fixed counter's i.
    pub const fn number(self) -> u8 {
        self.0 & 31
    }

    /// The counter's MSR for a write: `IA32_A_PMCn` when `full_width`
    /// (the value is written as is), `IA32_PMCn` otherwise (bits 31:0,
    /// sign-extended); `IA32_FIXED_CTRi` for a fixed counter.
    pub const fn msr(self, full_width: bool) -> u32 {
        if self.is_fixed() {
            IA32_FIXED_CTR0 + self.number() as u32
        } else if full_width {
            IA32_A_PMC0 + self.number() as u32
        } else {
            IA32_PMC0 + self.number() as u32
        }
    }

    /// Its `IA32_PERFEVTSELn` (`None` for a fixed counter).
    pub const fn evtsel(self) -> Option<u32> {
        if self.is_fixed() {
            None
        } else {
            Some(IA32_PERFEVTSEL0 + self.number() as u32)
        }
    }

    /// RDPMC's ECX for the counter, full width.
    pub const fn rdpmc(self) -> RdpmcIndex {
        RdpmcIndex::new(self)
    }
}

/// A set of counters as the `GLOBAL` registers hold it: bit n for general
/// counter n, bit 32 + i for fixed counter i.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CounterSet(u64);

crate::register::set_operations!(CounterSet, "counter");

impl CounterSet {
    /// The empty set.
    pub const EMPTY: CounterSet = CounterSet(0);

    /// The set as a `GLOBAL` register image.
    pub const fn bits(self) -> u64 {
        self.0
    }

    /// The counters of a `GLOBAL` register image (status bits above the
    /// counters, such as `CondChgd`, are dropped).
    pub const fn from_bits_truncate(bits: u64) -> CounterSet {
        CounterSet(bits & (Field::new(0, MAX_GENERAL).mask() | Field::new(32, MAX_FIXED).mask()))
    }

    /// The general counters of CPUID bitmap `general` (bit n: general
    /// counter n) and the fixed counters of `fixed` (bit i: fixed counter
    /// i) that the crate drives: general counters 0-7, fixed counters 0-3.
    pub const fn from_bitmaps(general: u32, fixed: u32) -> CounterSet {
        let g = Field::new(0, MAX_GENERAL).get(general as u64);
        let f = Field::new(0, MAX_FIXED).get(fixed as u64);
        CounterSet(g | Field::new(32, MAX_FIXED).set(0, f))
    }

    /// General counters 0 to `general - 1` and fixed counters 0 to
    /// `fixed - 1`.
    pub const fn first(general: u8, fixed: u8) -> CounterSet {
        let g = if general > MAX_GENERAL {
            MAX_GENERAL
        } else {
            general
        };
        let f = if fixed > MAX_FIXED { MAX_FIXED } else { fixed };
        let mut bits = 0;
        if g > 0 {
            bits |= Field::new(0, g).mask();
        }
        if f > 0 {
            bits |= Field::new(32, f).mask();
        }
        CounterSet(bits)
    }

    /// This set plus `c`.
    pub const fn with(self, c: Counter) -> CounterSet {
        CounterSet(self.0 | 1 << c.0)
    }

    /// This set without `c`.
    pub const fn without(self, c: Counter) -> CounterSet {
        CounterSet(self.0 & !(1 << c.0))
    }

    /// Whether `c` is in the set.
    pub const fn contains(self, c: Counter) -> bool {
        self.0 & 1 << c.0 != 0
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Number of counters.
    pub const fn len(self) -> u32 {
        self.0.count_ones()
    }

    /// The counters, lowest bit first.
    pub fn iter(self) -> impl Iterator<Item = Counter> {
        let mut rest = self.0;
        core::iter::from_fn(move || {
            if rest == 0 {
                return None;
            }
            let n = rest.trailing_zeros() as u8;
            rest &= rest - 1;
            Some(Counter(n))
        })
    }
}

register! {
    /// `IA32_PERFEVTSELn` (SDM Vol. 3B Figure "Layout of IA32_PERFEVTSELx
    /// MSRs"):
    ///
    /// | bits | field |
    /// |---|---|
    /// | 7:0 | event select |
    /// | 15:8 | unit mask (UMASK) |
    /// | 16 | USR: count at CPL 1-3 |
    /// | 17 | OS: count at CPL 0 |
    /// | 18 | E: edge detect |
    /// | 19 | PC: pin control |
    /// | 20 | INT: APIC interrupt on overflow |
    /// | 21 | AnyThread (v3; deprecated where CPUID.0AH:EDX\[15\] says so) |
    /// | 22 | EN: enable |
    /// | 23 | INV: invert the CMASK comparison |
    /// | 31:24 | CMASK: count cycles with at least this many events (0: count events) |
    /// | 34 | Adaptive_Record: the counter's PEBS records carry the groups of `MSR_PEBS_DATA_CFG` (PEBS baseline; Linux's `ICL_EVENTSEL_ADAPTIVE`) |
    /// | 63:32 | otherwise reserved (a write that sets one raises #GP) |
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct PerfEvtSel(u64) {
        /// Event select, bits 7:0.
        EVENT: 0..=7 => event, with_event: u8;
        /// Unit mask, bits 15:8.
        UMASK: 8..=15 => umask, with_umask: u8;
        /// USR, bit 16: count at CPL above 0.
        USR: 16 => usr, with_usr: bool;
        /// OS, bit 17: count at CPL 0.
        OS: 17 => os, with_os: bool;
        /// E, bit 18: edge detect.
        EDGE: 18 => edge, with_edge: bool;
        /// PC, bit 19: pin control.
        PC: 19 => pc, with_pc: bool;
        /// INT, bit 20: APIC interrupt on overflow.
        INT: 20 => int, with_int: bool;
        /// AnyThread, bit 21.
        ANY: 21 => any_thread, with_any_thread: bool;
        /// EN, bit 22: enable.
        EN: 22 => enable, with_enable: bool;
        /// INV, bit 23: invert the CMASK comparison.
        INV: 23 => inv, with_inv: bool;
        /// CMASK, bits 31:24.
        CMASK: 24..=31 => cmask, with_cmask: u8;
        /// Adaptive_Record, bit 34 (PEBS baseline).
        ADAPTIVE: 34 => adaptive, with_adaptive: bool;
    }
}

impl PerfEvtSel {
    /// Event `select` with unit mask `umask`, nothing else set.
    pub const fn new(select: u8, umask: u8) -> PerfEvtSel {
        PerfEvtSel(0).with_event(select).with_umask(umask)
    }

    /// The image `raw`; `None` if it sets a reserved bit (63:32).
    pub const fn from_bits(raw: u64) -> Option<PerfEvtSel> {
        if raw & !Self::DEFINED != 0 {
            None
        } else {
            Some(PerfEvtSel(raw))
        }
    }
}

register! {
    /// One fixed counter's 4-bit field of `IA32_FIXED_CTR_CTRL` (SDM Vol. 3B
    /// Figure "Layout of IA32_FIXED_CTR_CTRL MSR"): bit 0 OS (count at CPL 0),
    /// bit 1 USR (CPL above 0), bit 2 AnyThread (v3), bit 3 PMI on overflow.
    /// The counter counts when OS or USR is set (and its `GLOBAL_CTRL` bit).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct FixedCtl(u8) {
        /// OS, bit 0: count at CPL 0.
        OS: 0 => os, with_os: bool;
        /// USR, bit 1: count at CPL above 0.
        USR: 1 => usr, with_usr: bool;
        /// AnyThread, bit 2 (v3).
        ANY: 2 => any_thread, with_any_thread: bool;
        /// PMI, bit 3: interrupt on overflow.
        PMI: 3 => pmi, with_pmi: bool;
    }
}

impl FixedCtl {
    /// Counting nothing (the field 0).
    pub const OFF: FixedCtl = FixedCtl(0);

    /// Counting at the privileges given, with or without a PMI.
    pub const fn new(os: bool, usr: bool, pmi: bool) -> FixedCtl {
        FixedCtl::OFF.with_os(os).with_usr(usr).with_pmi(pmi)
    }

    /// Whether the counter counts at some privilege.
    pub const fn counts(self) -> bool {
        self.os() || self.usr()
    }

    /// From `IA32_FIXED_CTR_CTRL`'s 4-bit field (`register!`).
    const fn from_field(v: u64) -> FixedCtl {
        FixedCtl(v as u8 & 0xF)
    }

    /// As `IA32_FIXED_CTR_CTRL`'s 4-bit field (`register!`).
    const fn into_field(self) -> u64 {
        self.0 as u64
    }
}

/// `IA32_FIXED_CTR_CTRL`: a [`FixedCtl`] per fixed counter, 4 bits each
/// from bit 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FixedCtrCtrl(u64);

impl FixedCtrCtrl {
    /// Fixed counter `i`'s field.
    pub const fn field(i: u8) -> Field {
        Field::new(4 * (i % 16), 4)
    }

    /// The image `raw`.
    pub const fn from_bits(raw: u64) -> FixedCtrCtrl {
        FixedCtrCtrl(raw)
    }

    /// The image.
    pub const fn bits(self) -> u64 {
        self.0
    }

    /// Fixed counter `i`'s control.
    pub const fn get(self, i: u8) -> FixedCtl {
        FixedCtl::from_field(Self::field(i).get(self.0))
    }

    /// With fixed counter `i`'s control set to `c`.
    pub const fn with(self, i: u8, c: FixedCtl) -> FixedCtrCtrl {
        FixedCtrCtrl(Self::field(i).set(self.0, c.into_field()))
    }

    /// Fixed counter `i`'s Adaptive_Record bit: bit 32 + 4i (PEBS baseline;
    /// Linux's `ICL_FIXED_0_ADAPTIVE << 4i`), the fixed counters'
    /// counterpart of [`PerfEvtSel::adaptive`]; fixed counters 0-7.
    pub const fn adaptive_field(i: u8) -> Field {
        Field::new(32 + 4 * (i % 8), 1)
    }

    /// Whether fixed counter `i`'s records are adaptive.
    pub const fn adaptive(self, i: u8) -> bool {
        Self::adaptive_field(i).get(self.0) != 0
    }

    /// With fixed counter `i`'s Adaptive_Record bit set to `on`.
    pub const fn with_adaptive(self, i: u8, on: bool) -> FixedCtrCtrl {
        FixedCtrCtrl(Self::adaptive_field(i).set(self.0, on as u64))
    }
}

register! {
    /// `IA32_PERF_GLOBAL_STATUS` bits beyond the counters' (SDM Vol. 3B
    /// "IA32_PERF_GLOBAL_STATUS MSR"; the counters' bits are a
    /// [`CounterSet`]).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct GlobalStatus(u64): from_bits {
        /// LBR_Frz, bit 58 (version 4): the last branch records are frozen
        /// (`IA32_DEBUGCTL.FREEZE_LBRS_ON_PMI` and a PMI request); writing
        /// it to `IA32_PERF_GLOBAL_STATUS_RESET` unfreezes them (SDM Vol.
        /// 3B "Streamlined Freeze_LBRs_On_PMI Operation").
        pub LBR_FRZ: 58 => lbr_frz, with_lbr_frz: bool;
        /// OvfBuf, bit 62: the PEBS index reached the DS area's interrupt
        /// threshold (the PEBS buffer's PMI).
        pub OVF_BUF: 62 => ovf_buf, with_ovf_buf: bool;
        /// CondChgd, bit 63.
        pub COND_CHGD: 63 => cond_chgd, with_cond_chgd: bool;
    }
}

register! {
    /// `IA32_PEBS_ENABLE` (3F1H; SDM Vol. 3B "Layout of IA32_PEBS_ENABLE
    /// MSR" of each PEBS generation). Bit n (`PEBS_EN_PMCn`) turns a
    /// general counter's overflow into a PEBS record (bits 3:0 before PEBS
    /// baseline, every general counter with it). Bits 35:32 mean two
    /// things: before PEBS baseline `LL_EN_PMCn`, load latency on general
    /// counter n (n < 4, Nehalem to Skylake); with PEBS baseline
    /// `PEBS_EN_FIXEDi`, PEBS on fixed counter i, the fixed counters' bits
    /// of the `GLOBAL` registers. (Linux sets the load-latency bits below
    /// architectural perfmon version 5, `intel_pmu_pebs_enable`; PEBS
    /// baseline comes with version 5 on the parts that have it, and the
    /// crate keys the bits on PEBS baseline, which says what they are.)
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct PebsEnable(u64): from_bits {
        /// `PEBS_EN_PMCn`, bits 7:0: PEBS on general counter n.
        pub GENERAL: 0..=7 => general, with_general: u8;
        /// Bits 35:32: `LL_EN_PMCn` (before baseline) or `PEBS_EN_FIXEDi`
        /// (baseline).
        pub HIGH: 32..=35 => high, with_high: u8;
    }
}

impl PebsEnable {
    /// PEBS on the counters of `pebs` (general and, with PEBS baseline,
    /// fixed), and load latency on the general counters of `load_latency`
    /// (only before baseline, where bits 35:32 are `LL_EN_PMCn`; with
    /// baseline a load-latency event needs no bit of its own).
    pub const fn new(pebs: CounterSet, load_latency: CounterSet, baseline: bool) -> PebsEnable {
        let general = Field::new(0, MAX_GENERAL).get(pebs.bits()) as u8;
        let high = if baseline {
            Field::new(32, MAX_FIXED).get(pebs.bits()) as u8
        } else {
            Field::new(0, MAX_FIXED).get(load_latency.bits()) as u8
        };
        PebsEnable(0).with_general(general).with_high(high)
    }
}

register! {
    /// `MSR_PEBS_DATA_CFG` (3F2H, PEBS baseline; SDM Vol. 3B "MSR_PEBS_DATA_CFG"):
    /// the groups an adaptive PEBS record carries after its basic group
    /// (RFLAGS-free: format, EventingIP, applicable counters, TSC), in this
    /// order: memory, general registers, XMM registers, LBR entries. The
    /// driver sets the memory and GPR groups only.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct PebsDataCfg(u64): from_bits {
        /// Memory info, bit 0: data linear address, data source, latency,
        /// TSX information (4 words).
        pub MEMORY: 0 => memory, with_memory: bool;
        /// GPRs, bit 1: RFLAGS, RIP and the 16 general registers (18 words).
        pub GPRS: 1 => gprs, with_gprs: bool;
        /// XMMs, bit 2.
        pub XMMS: 2 => xmms, with_xmms: bool;
        /// LBRs, bit 3.
        pub LBRS: 3 => lbrs, with_lbrs: bool;
        /// LBR entries minus one, bits 31:24.
        pub LBR_ENTRIES: 24..=31 => lbr_entries, with_lbr_entries: u8;
    }
}

register! {
    /// `MSR_PEBS_LD_LAT` (3F6H; SDM Vol. 3B "Load Latency Performance
    /// Monitoring Facility"): the latency threshold, in core cycles, above
    /// which a sampled load counts for the load-latency event.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct PebsLdLat(u64): from_bits {
        /// Threshold, bits 15:0.
        pub THRESHOLD: 0..=15 => threshold, with_threshold: u16;
    }
}

register! {
    /// RDPMC's ECX (SDM Vol. 2B RDPMC): bits 29:0 the counter, bit 30 a fixed
    /// counter, bit 31 a fast read of the low 32 bits (on processors that
    /// support it).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct RdpmcIndex(u32) {
        /// The counter number, bits 29:0.
        COUNTER: 0..=29 => counter, with_counter: u32;
        /// Fixed-counter select, bit 30.
        FIXED: 30 => fixed, with_fixed: bool;
        /// Fast read of the low 32 bits, bit 31.
        FAST: 31 => is_fast, with_fast: bool;
    }
}

impl RdpmcIndex {
    /// ECX for `c`, full width.
    pub const fn new(c: Counter) -> RdpmcIndex {
        RdpmcIndex(0)
            .with_counter(c.number() as u32)
            .with_fixed(c.is_fixed())
    }

    /// The same with the fast-read bit.
    pub const fn fast(self) -> RdpmcIndex {
        self.with_fast(true)
    }

    /// The ECX value.
    pub const fn ecx(self) -> u32 {
        self.0
    }
}

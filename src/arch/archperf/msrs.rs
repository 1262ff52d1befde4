//! Register map and layouts of Intel's architectural performance
//! monitoring (SDM Vol. 3B, "Architectural Performance Monitoring",
//! versions 1-5; MSR numbers from Vol. 4, "Architectural MSRs"):
//!
//! | MSR | name | layout |
//! |---|---|---|
//! | C1H + n | `IA32_PMCn` | general counter n; a write keeps bits 31:0 and sign-extends them to the counter's width |
//! | 4C1H + n | `IA32_A_PMCn` | the same counter, written at full width (`IA32_PERF_CAPABILITIES[13]`) |
//! | 186H + n | `IA32_PERFEVTSELn` | [`PerfEvtSel`] |
//! | 309H + i | `IA32_FIXED_CTRi` | fixed counter i (NetBurst's `MSR_FLAME_PERFCTR1-3` share 309H-30BH: which one a number means depends on the CPU) |
//! | 345H | `IA32_PERF_CAPABILITIES` | [`PerfCapabilities`] |
//! | 38DH | `IA32_FIXED_CTR_CTRL` | [`FixedCtrCtrl`] |
//! | 38EH | `IA32_PERF_GLOBAL_STATUS` | [`CounterSet`] of overflowed counters (read only) |
//! | 38FH | `IA32_PERF_GLOBAL_CTRL` | [`CounterSet`] of enabled counters (v2+) |
//! | 390H | `IA32_PERF_GLOBAL_OVF_CTRL` | [`CounterSet`]: a 1 clears that status bit (v4 calls it `STATUS_RESET`) |
//! | 391H | `IA32_PERF_GLOBAL_STATUS_SET` | [`CounterSet`]: a 1 sets that status bit (v4) |
//! | 392H | `IA32_PERF_GLOBAL_INUSE` | counters in use (v4, read only) |
//!
//! In the `GLOBAL` registers general counter n is bit n and fixed counter i
//! is bit 32 + i; the crate numbers its counter handles the same way
//! ([`Counter`]).

use crate::arch::Field;

/// `IA32_PMC0`; general counter n is `IA32_PMC0 + n`.
pub const IA32_PMC0: u32 = 0xC1;
/// `IA32_A_PMC0`, the full-width alias of `IA32_PMC0`.
pub const IA32_A_PMC0: u32 = 0x4C1;
/// `IA32_PERFEVTSEL0`; general counter n's is `IA32_PERFEVTSEL0 + n`.
pub const IA32_PERFEVTSEL0: u32 = 0x186;
/// `IA32_FIXED_CTR0`; fixed counter i is `IA32_FIXED_CTR0 + i`.
pub const IA32_FIXED_CTR0: u32 = 0x309;
/// `IA32_PERF_CAPABILITIES` (present when CPUID.01H:ECX.PDCM\[15\] is set).
pub const IA32_PERF_CAPABILITIES: u32 = 0x345;
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

/// The most general counters the crate drives (its handles `g0`-`g7`).
pub const MAX_GENERAL: u8 = 8;
/// The most fixed counters the crate drives (`f0`-`f3`).
pub const MAX_FIXED: u8 = 4;

/// A counter of the architectural PMU, numbered as its bit in the `GLOBAL`
/// registers: general counter n is n (0-7), fixed counter i is 32 + i
/// (32-35). A counter handle's `N` is this number.
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

    /// The counters in both sets.
    pub const fn and(self, other: CounterSet) -> CounterSet {
        CounterSet(self.0 & other.0)
    }

    /// The counters in either set.
    pub const fn or(self, other: CounterSet) -> CounterSet {
        CounterSet(self.0 | other.0)
    }

    /// The counters of this set not in `other`.
    pub const fn minus(self, other: CounterSet) -> CounterSet {
        CounterSet(self.0 & !other.0)
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
/// | 63:32 | reserved (a write that sets one raises #GP) |
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PerfEvtSel(u64);

impl PerfEvtSel {
    /// Event select, bits 7:0.
    pub const EVENT: Field = Field::new(0, 8);
    /// Unit mask, bits 15:8.
    pub const UMASK: Field = Field::new(8, 8);
    /// USR, bit 16.
    pub const USR: Field = Field::new(16, 1);
    /// OS, bit 17.
    pub const OS: Field = Field::new(17, 1);
    /// Edge detect, bit 18.
    pub const EDGE: Field = Field::new(18, 1);
    /// Pin control, bit 19.
    pub const PC: Field = Field::new(19, 1);
    /// INT, bit 20.
    pub const INT: Field = Field::new(20, 1);
    /// AnyThread, bit 21.
    pub const ANY: Field = Field::new(21, 1);
    /// EN, bit 22.
    pub const EN: Field = Field::new(22, 1);
    /// INV, bit 23.
    pub const INV: Field = Field::new(23, 1);
    /// CMASK, bits 31:24.
    pub const CMASK: Field = Field::new(24, 8);
    /// The reserved bits 63:32.
    pub const RESERVED: Field = Field::new(32, 32);

    /// Event `select` with unit mask `umask`, nothing else set.
    pub const fn new(select: u8, umask: u8) -> PerfEvtSel {
        PerfEvtSel(Self::UMASK.set(Self::EVENT.set(0, select as u64), umask as u64))
    }

    /// The image `raw`; `None` if it sets a reserved bit.
    pub const fn from_bits(raw: u64) -> Option<PerfEvtSel> {
        if Self::RESERVED.get(raw) != 0 {
            None
        } else {
            Some(PerfEvtSel(raw))
        }
    }

    /// The image.
    pub const fn bits(self) -> u64 {
        self.0
    }

    const fn flag(self, f: Field, on: bool) -> PerfEvtSel {
        PerfEvtSel(f.set(self.0, on as u64))
    }

    /// The event select.
    pub const fn event(self) -> u8 {
        Self::EVENT.get(self.0) as u8
    }

    /// The unit mask.
    pub const fn umask(self) -> u8 {
        Self::UMASK.get(self.0) as u8
    }

    /// CMASK.
    pub const fn cmask(self) -> u8 {
        Self::CMASK.get(self.0) as u8
    }

    /// Whether EN is set.
    pub const fn enabled(self) -> bool {
        Self::EN.get(self.0) != 0
    }

    /// Whether INT is set.
    pub const fn interrupts(self) -> bool {
        Self::INT.get(self.0) != 0
    }

    /// Whether INV is set.
    pub const fn inverted(self) -> bool {
        Self::INV.get(self.0) != 0
    }

    /// Whether E is set.
    pub const fn edge(self) -> bool {
        Self::EDGE.get(self.0) != 0
    }

    /// Whether AnyThread is set.
    pub const fn any_thread(self) -> bool {
        Self::ANY.get(self.0) != 0
    }

    /// Whether USR is set.
    pub const fn usr(self) -> bool {
        Self::USR.get(self.0) != 0
    }

    /// Whether OS is set.
    pub const fn os(self) -> bool {
        Self::OS.get(self.0) != 0
    }

    /// With USR.
    pub const fn with_usr(self, on: bool) -> PerfEvtSel {
        self.flag(Self::USR, on)
    }

    /// With OS.
    pub const fn with_os(self, on: bool) -> PerfEvtSel {
        self.flag(Self::OS, on)
    }

    /// With E.
    pub const fn with_edge(self, on: bool) -> PerfEvtSel {
        self.flag(Self::EDGE, on)
    }

    /// With INT.
    pub const fn with_int(self, on: bool) -> PerfEvtSel {
        self.flag(Self::INT, on)
    }

    /// With AnyThread.
    pub const fn with_any_thread(self, on: bool) -> PerfEvtSel {
        self.flag(Self::ANY, on)
    }

    /// With EN.
    pub const fn with_enable(self, on: bool) -> PerfEvtSel {
        self.flag(Self::EN, on)
    }

    /// With INV.
    pub const fn with_inv(self, on: bool) -> PerfEvtSel {
        self.flag(Self::INV, on)
    }

    /// With CMASK.
    pub const fn with_cmask(self, cmask: u8) -> PerfEvtSel {
        PerfEvtSel(Self::CMASK.set(self.0, cmask as u64))
    }
}

/// One fixed counter's 4-bit field of `IA32_FIXED_CTR_CTRL` (SDM Vol. 3B
/// Figure "Layout of IA32_FIXED_CTR_CTRL MSR"): bit 0 OS (count at CPL 0),
/// bit 1 USR (CPL above 0), bit 2 AnyThread (v3), bit 3 PMI on overflow.
/// The counter counts when OS or USR is set (and its `GLOBAL_CTRL` bit).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FixedCtl(u8);

impl FixedCtl {
    /// OS, bit 0.
    pub const OS: Field = Field::new(0, 1);
    /// USR, bit 1.
    pub const USR: Field = Field::new(1, 1);
    /// AnyThread, bit 2.
    pub const ANY: Field = Field::new(2, 1);
    /// PMI, bit 3.
    pub const PMI: Field = Field::new(3, 1);

    /// Counting nothing (the field 0).
    pub const OFF: FixedCtl = FixedCtl(0);

    /// Counting at the privileges given, with or without a PMI.
    pub const fn new(os: bool, usr: bool, pmi: bool) -> FixedCtl {
        let v = Self::PMI.set(
            Self::USR.set(Self::OS.set(0, os as u64), usr as u64),
            pmi as u64,
        );
        FixedCtl(v as u8)
    }

    /// The 4 bits.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Whether the counter counts at some privilege.
    pub const fn counts(self) -> bool {
        Self::OS.get(self.0 as u64) != 0 || Self::USR.get(self.0 as u64) != 0
    }

    /// Whether its overflow raises a PMI.
    pub const fn pmi(self) -> bool {
        Self::PMI.get(self.0 as u64) != 0
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
        FixedCtl(Self::field(i).get(self.0) as u8)
    }

    /// With fixed counter `i`'s control set to `c`.
    pub const fn with(self, i: u8, c: FixedCtl) -> FixedCtrCtrl {
        FixedCtrCtrl(Self::field(i).set(self.0, c.0 as u64))
    }
}

/// `IA32_PERF_CAPABILITIES` (SDM Vol. 3B "Performance Monitoring
/// Capabilities"); only what the driver uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PerfCapabilities(u64);

impl PerfCapabilities {
    /// `FW_WRITE`, bit 13: the `IA32_A_PMCx` full-width aliases exist.
    pub const FULL_WIDTH_WRITE: Field = Field::new(13, 1);

    /// The image `raw`.
    pub const fn from_bits(raw: u64) -> PerfCapabilities {
        PerfCapabilities(raw)
    }

    /// Whether full-width writes are supported.
    pub const fn full_width_write(self) -> bool {
        Self::FULL_WIDTH_WRITE.get(self.0) != 0
    }
}

/// RDPMC's ECX (SDM Vol. 2B RDPMC): bits 29:0 the counter, bit 30 a fixed
/// counter, bit 31 a fast read of the low 32 bits (on processors that
/// support it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RdpmcIndex(u32);

impl RdpmcIndex {
    /// The counter number, bits 29:0.
    pub const COUNTER: Field = Field::new(0, 30);
    /// Fixed-counter select, bit 30.
    pub const FIXED: Field = Field::new(30, 1);
    /// Fast read, bit 31.
    pub const FAST: Field = Field::new(31, 1);

    /// ECX for `c`, full width.
    pub const fn new(c: Counter) -> RdpmcIndex {
        let v = Self::FIXED.set(Self::COUNTER.set(0, c.number() as u64), c.is_fixed() as u64);
        RdpmcIndex(v as u32)
    }

    /// The same with the fast-read bit.
    pub const fn fast(self) -> RdpmcIndex {
        RdpmcIndex(Self::FAST.set(self.0 as u64, 1) as u32)
    }

    /// The ECX value.
    pub const fn ecx(self) -> u32 {
        self.0
    }
}

/// CPUID leaf 0AH, "Architectural Performance Monitoring Leaf" (SDM Vol. 2A
/// CPUID; Vol. 3B "Architectural Performance Monitoring"): EAX\[7:0\]
/// version, \[15:8\] general counters per logical processor, \[23:16\]
/// their width, \[31:24\] the length of EBX's vector; EBX bit k set:
/// architectural event k NOT available; ECX the fixed counters' bitmap
/// (v5); EDX\[4:0\] contiguous fixed counters, \[12:5\] their width, \[15\]
/// AnyThread deprecated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Leaf0A {
    /// EAX, EBX, ECX, EDX.
    pub regs: [u32; 4],
}

impl Leaf0A {
    const VERSION: Field = Field::new(0, 8);
    const GENERAL: Field = Field::new(8, 8);
    const GENERAL_WIDTH: Field = Field::new(16, 8);
    const VECTOR_LENGTH: Field = Field::new(24, 8);
    const FIXED: Field = Field::new(0, 5);
    const FIXED_WIDTH: Field = Field::new(5, 8);
    const ANY_DEPRECATED: Field = Field::new(15, 1);

    /// The version ID (0: no architectural PMU).
    pub const fn version(self) -> u8 {
        Self::VERSION.get(self.regs[0] as u64) as u8
    }

    /// General counters per logical processor.
    pub const fn general(self) -> u8 {
        Self::GENERAL.get(self.regs[0] as u64) as u8
    }

    /// Their width in bits.
    pub const fn general_width(self) -> u8 {
        Self::GENERAL_WIDTH.get(self.regs[0] as u64) as u8
    }

    /// The length of EBX's event vector.
    pub const fn vector_length(self) -> u8 {
        Self::VECTOR_LENGTH.get(self.regs[0] as u64) as u8
    }

    /// Architectural event `k` (the EBX bit of [`super::events::ArchEvent`])
    /// is available: within the vector and its EBX bit clear.
    pub const fn event_available(self, k: u8) -> bool {
        k < self.vector_length() && k < 32 && self.regs[1] & (1 << k) == 0
    }

    /// Contiguous fixed counters (EDX\[4:0\]; v2+).
    pub const fn fixed_contiguous(self) -> u8 {
        if self.version() < 2 {
            0
        } else {
            Self::FIXED.get(self.regs[3] as u64) as u8
        }
    }

    /// The fixed counters' width (v2+).
    pub const fn fixed_width(self) -> u8 {
        if self.version() < 2 {
            0
        } else {
            Self::FIXED_WIDTH.get(self.regs[3] as u64) as u8
        }
    }

    /// Fixed counter `i` exists: `ECX[i] || EDX[4:0] > i` (SDM: the v5
    /// bitmap, or the contiguous count).
    pub const fn fixed_supported(self, i: u8) -> bool {
        let bitmap = self.version() >= 5 && i < 32 && self.regs[2] & (1 << i) != 0;
        bitmap || self.fixed_contiguous() > i
    }

    /// AnyThread is deprecated (EDX\[15\]).
    pub const fn any_thread_deprecated(self) -> bool {
        Self::ANY_DEPRECATED.get(self.regs[3] as u64) != 0
    }
}

//! The register map and layouts (documented on [`Counter`]).

use crate::register::{Field, register};

pub use crate::detect::{PERF_LEGACY_CTL0, PERF_LEGACY_CTR0};

/// `PERF_CTL0` (`C001_0200H`, with PerfCtrExtCore); counter n's control is
/// at `C001_0200H + 2n`.
pub const PERF_CTL0: u32 = 0xC001_0200;
/// `PERF_CTR0` (`C001_0201H`, with PerfCtrExtCore); counter n is at
/// `C001_0201H + 2n`.
pub const PERF_CTR0: u32 = 0xC001_0201;
/// `PerfCntrGlobalStatus` (`C000_0300H`, PerfMonV2): bit n set when counter
/// n overflowed (read only; a write is ignored).
pub const PERF_CNTR_GLOBAL_STATUS: u32 = 0xC000_0300;
/// `PerfCntrGlobalCtl` (`C000_0301H`, PerfMonV2): bit n enables counter n
/// (with its `PERF_CTLn.EN`).
pub const PERF_CNTR_GLOBAL_CTL: u32 = 0xC000_0301;
/// `PerfCntrGlobalStatusClr` (`C000_0302H`, PerfMonV2): a 1 clears that
/// status bit.
pub const PERF_CNTR_GLOBAL_STATUS_CLR: u32 = 0xC000_0302;
/// `PerfCntrGlobalStatusSet` (`C000_0303H`, PerfMonV2): a 1 sets that
/// status bit.
pub const PERF_CNTR_GLOBAL_STATUS_SET: u32 = 0xC000_0303;

/// The most core counters the crate drives (its handles `c0`-`c5`): six,
/// as PerfCtrExtCore defines (`C001_0200H`-`C001_020BH`). A PerfMonV2 part
/// whose CPUID reports more has the rest left alone.
pub const MAX_COUNTERS: u8 = 6;
/// The legacy counters: four, on every AMD64 processor.
pub const LEGACY_COUNTERS: u8 = 4;
/// The counters' width: 48 bits (AMD64 APM Vol. 2 13.2.1; Linux's
/// `amd_pmu.cntval_bits`, KVM's `BIT_ULL(48) - 1`).
pub const COUNTER_WIDTH: u8 = 48;

/// A core counter of the AMD PMU, numbered as its bit in the PerfMonV2
/// global registers and as RDPMC's ECX: 0-5. A counter handle's `N` is
/// this number.
///
/// # Register map
///
/// AMD64 APM Vol. 2 13.2 ("Performance Monitoring Counters"); the names
/// are the Processor Programming References' (the APM calls the legacy
/// pair `PerfEvtSeln`/`PerfCtrn`):
///
/// | MSR | name | layout |
/// |---|---|---|
/// | C001_0000H + n, n = 0-3 | `PERF_LEGACY_CTLn` | [`PerfCtl`] |
/// | C001_0004H + n | `PERF_LEGACY_CTRn` | counter n, 48 bits |
/// | C001_0200H + 2n, n = 0-5 | `PERF_CTLn` (PerfCtrExtCore) | [`PerfCtl`]; for n < 4 the same register as `PERF_LEGACY_CTLn` |
/// | C001_0201H + 2n | `PERF_CTRn` (PerfCtrExtCore) | counter n; for n < 4 `PERF_LEGACY_CTRn` |
/// | C000_0300H | `PerfCntrGlobalStatus` (PerfMonV2) | [`CounterSet`] of overflowed counters (read only; bit 58 LBRs frozen) |
/// | C000_0301H | `PerfCntrGlobalCtl` (PerfMonV2) | [`CounterSet`]: a counter counts when its bit and its `EN` are set |
/// | C000_0302H | `PerfCntrGlobalStatusClr` (PerfMonV2) | [`CounterSet`]: a 1 clears that status bit |
/// | C000_0303H | `PerfCntrGlobalStatusSet` (PerfMonV2) | [`CounterSet`]: a 1 sets that status bit |
///
/// The legacy addresses alias the first four extended counters (KVM's
/// `pmu.c` header; kvm-unit-tests runs its whole AMD suite through both);
/// the driver uses the extended ones where CPUID reports them, as Linux
/// does (`amd_core_pmu_init`), the legacy ones elsewhere. RDPMC takes the
/// counter number in ECX either way (0-5; 6 and up are the northbridge and
/// L3 counters, which the crate does not drive).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Counter(u8);

impl Counter {
    /// Counter `n` (0-5).
    pub const fn new(n: u8) -> Option<Counter> {
        if n < MAX_COUNTERS {
            Some(Counter(n))
        } else {
            None
        }
    }

    /// The counter whose handle number is `n` (the same as [`Counter::new`]).
    pub const fn from_index(n: u8) -> Option<Counter> {
        Counter::new(n)
    }

    /// Its number: its bit in the global registers, its RDPMC ECX and its
    /// handle number.
    pub const fn index(self) -> u8 {
        self.0
    }

    /// The PPR name of the counter's MSR (`"PERF_CTR0"` to `"PERF_CTR5"`;
    /// on a part without PerfCtrExtCore counters 0-3 are reached as
    /// `PERF_LEGACY_CTR0-3`).
    pub const fn name(self) -> &'static str {
        const NAMES: [&str; MAX_COUNTERS as usize] = [
            "PERF_CTR0",
            "PERF_CTR1",
            "PERF_CTR2",
            "PERF_CTR3",
            "PERF_CTR4",
            "PERF_CTR5",
        ];
        NAMES[self.0 as usize % NAMES.len()]
    }

    /// Its control: `PERF_CTLn` with PerfCtrExtCore (`extended`),
    /// `PERF_LEGACY_CTLn` otherwise.
    pub const fn ctl(self, extended: bool) -> u32 {
        if extended {
            PERF_CTL0 + 2 * self.0 as u32
        } else {
            PERF_LEGACY_CTL0 + self.0 as u32
        }
    }

    /// Its counter register: `PERF_CTRn` with PerfCtrExtCore, `PERF_LEGACY_CTRn`
    /// otherwise.
    pub const fn ctr(self, extended: bool) -> u32 {
        if extended {
            PERF_CTR0 + 2 * self.0 as u32
        } else {
            PERF_LEGACY_CTR0 + self.0 as u32
        }
    }

    /// RDPMC's ECX for the counter: its number (AMD64 APM Vol. 3 RDPMC).
    pub const fn rdpmc(self) -> u32 {
        self.0 as u32
    }
}

/// A set of counters as the PerfMonV2 global registers hold it: bit n for
/// counter n.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CounterSet(u64);

crate::register::set_operations!(CounterSet, "counter");

impl CounterSet {
    /// The empty set.
    pub const EMPTY: CounterSet = CounterSet(0);

    /// The set as a global register image.
    pub const fn bits(self) -> u64 {
        self.0
    }

    /// The counters of a global register image (other status bits, such as
    /// bit 58, LBRs frozen, are dropped).
    pub const fn from_bits_truncate(bits: u64) -> CounterSet {
        CounterSet(bits & Field::new(0, MAX_COUNTERS).mask())
    }

    /// Counters 0 to `n - 1` (at most [`MAX_COUNTERS`]).
    pub const fn first(n: u8) -> CounterSet {
        let n = if n > MAX_COUNTERS { MAX_COUNTERS } else { n };
        if n == 0 {
            CounterSet(0)
        } else {
            CounterSet(Field::new(0, n).mask())
        }
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

    /// The counters, lowest first.
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
    /// `PERF_CTLn` and `PERF_LEGACY_CTLn` (AMD64 APM Vol. 2 13.2.1, Figure
    /// "Performance Event-Select Register (PerfEvtSeln)"; Linux
    /// `perf_event.h`, the `cpu` PMU's AMD formats in `amd/core.c`):
    ///
    /// | bits | field |
    /// |---|---|
    /// | 7:0 | EventSelect\[7:0\] |
    /// | 15:8 | UnitMask |
    /// | 16 | USR: count at CPL 1-3 |
    /// | 17 | OS: count at CPL 0 |
    /// | 18 | Edge: count rising edges of the CntMask comparison |
    /// | 19 | reserved (K7's pin control) |
    /// | 20 | INT: APIC interrupt on overflow |
    /// | 21 | reserved (Intel's AnyThread) |
    /// | 22 | EN: enable |
    /// | 23 | INV: invert the CntMask comparison |
    /// | 31:24 | CntMask: count cycles with at least this many events (0: events) |
    /// | 35:32 | EventSelect\[11:8\] |
    /// | 39:36 | reserved on core counters (family 10h's northbridge IntCoreEnable/IntCoreSel) |
    /// | 40 | GuestOnly: count in guest mode only |
    /// | 41 | HostOnly: count in host mode only |
    /// | 63:42 | reserved |
    ///
    /// The reserved bits are those KVM masks for its AMD guests
    /// (`0xFFFF_FFF0_0028_0000` less the Host/Guest bits it handles
    /// itself); a write that sets one is ignored rather than faulting, so
    /// the driver never sets one ([`PerfCtl::RESERVED`]). HostOnly and
    /// GuestOnly both set count as both clear (in both modes; Linux's
    /// `amd_core_hw_config`); with SVM disabled (`EFER.SVME` = 0) they
    /// have no effect (the source disagreement is recorded at
    /// `pmu::model::amd`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct PerfCtl(u64) {
        /// EventSelect\[7:0\], bits 7:0.
        EVENT_LO: 0..=7 => event_lo, with_event_lo: u8;
        /// UnitMask, bits 15:8.
        UMASK: 8..=15 => umask, with_umask: u8;
        /// USR, bit 16: count at CPL above 0.
        USR: 16 => usr, with_usr: bool;
        /// OS, bit 17: count at CPL 0.
        OS: 17 => os, with_os: bool;
        /// Edge, bit 18: edge detect.
        EDGE: 18 => edge, with_edge: bool;
        /// INT, bit 20: APIC interrupt on overflow.
        INT: 20 => int, with_int: bool;
        /// EN, bit 22: enable.
        EN: 22 => enable, with_enable: bool;
        /// INV, bit 23: invert the CntMask comparison.
        INV: 23 => inv, with_inv: bool;
        /// CntMask, bits 31:24.
        CNT_MASK: 24..=31 => cnt_mask, with_cnt_mask: u8;
        /// EventSelect\[11:8\], bits 35:32.
        EVENT_HI: 32..=35 => event_hi, with_event_hi: u8;
        /// GuestOnly, bit 40.
        GUEST_ONLY: 40 => guest_only, with_guest_only: bool;
        /// HostOnly, bit 41.
        HOST_ONLY: 41 => host_only, with_host_only: bool;
    }
}

impl PerfCtl {
    /// The reserved bits: every bit no field declares (19, 21, 36-39,
    /// 42-63).
    pub const RESERVED: u64 = !Self::DEFINED;

    /// The 12-bit event select `event` with unit mask `umask`, nothing
    /// else set.
    pub const fn new(event: u16, umask: u8) -> PerfCtl {
        PerfCtl(0).with_event(event).with_umask(umask)
    }

    /// The image `raw`, every bit kept (a control read back, the
    /// firmware's).
    pub const fn from_bits(raw: u64) -> PerfCtl {
        PerfCtl(raw)
    }

    /// The 12-bit event select: EventSelect\[11:8\] (bits 35:32) over
    /// EventSelect\[7:0\] (bits 7:0).
    pub const fn event(self) -> u16 {
        (self.event_hi() as u16) << Self::EVENT_LO.bits() | self.event_lo() as u16
    }

    /// With the 12-bit event select `event` (its bits above 11 dropped).
    pub const fn with_event(self, event: u16) -> PerfCtl {
        let hi = (event >> Self::EVENT_LO.bits()) as u8;
        self.with_event_lo(event as u8).with_event_hi(hi)
    }
}

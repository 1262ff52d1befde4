//! The architectural PMU's overflow interrupt path: the state the counter
//! handles share with the handler, and the handler.
//!
//! One PMI is serviced with (asserted in the tests):
//!
//! | access | count | why |
//! |---|---|---|
//! | RDMSR `IA32_PERF_GLOBAL_STATUS` | 1 | which counters overflowed: one read for all (SDM Vol. 3B "Performance Monitoring Interrupt"; the status bit of a counter is set on its overflow) |
//! | RDPMC counter | one per overflowed armed counter | how far past the overflow it counted before the handler ran (skid), for the re-arm |
//! | WRMSR counter | one per overflowed armed counter | re-arm relative to what it holds: `-N + residual` ([`crate::sampling::SampleAfter::rearm`]) |
//! | WRMSR `IA32_PERF_GLOBAL_OVF_CTRL` | 1 | acknowledge every overflow found, in one write |
//! | LVT write | 1 | the local APIC masks the performance-counter entry when it delivers the PMI; the handler unmasks it last (Linux's `intel_pmu_handle_irq` does the same) |
//!
//! Unlike NetBurst, whose handler reads every armed counter to find the
//! overflowed ones, one status read finds them, so an armed counter that did
//! not overflow costs nothing. The handler does not stop the PMU around the
//! service (Linux writes `IA32_PERF_GLOBAL_CTRL` twice per PMI to do so):
//! each re-arm is relative to the count it read, and an event between the
//! read and the write is the only one that can be lost (none on the model).
//! A status bit of a counter the driver did not arm (firmware's) is left
//! alone.
//!
//! The handler takes no lock, executes no locked instruction and allocates
//! nothing, so it may run as an NMI. It returns an error only if a register
//! access fails (only a model fails), with the LVT entry still masked.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::msrs::{
    Counter, CounterSet, IA32_PERF_GLOBAL_OVF_CTRL, IA32_PERF_GLOBAL_STATUS, IA32_PERFEVTSEL0,
};
use crate::access::{MsrBackend, MsrOps, same_backend};
use crate::apic::{LvtPerfCounter, LvtPerfCounterEntry};
use crate::sampling::{OverflowRule, PmiOutcome, Rearm, Sample, SampleAfter, Sink, bump};

/// Per-counter arrays are indexed by the counter's `GLOBAL` bit, so the
/// handler indexes with the bit number it finds (no mapping, no bounds
/// check): 64 entries, 12 used.
const SLOTS: usize = 64;

/// The slot of counter `c`.
const fn slot(c: Counter) -> usize {
    c.index() as usize % SLOTS
}

/// How a counter of `width` bits overflows: its PMI comes with the
/// overflow itself (SDM Vol. 3B: "the counter ... generates a performance
/// monitoring interrupt on overflow"), so no event is owed to it (the
/// events the handler finds past the overflow are skid).
pub const fn overflow_rule(width: u8) -> OverflowRule {
    OverflowRule {
        width: width as u32,
        pmi_delay: 0,
    }
}

/// State shared by the driver and the PMI handler: atomics only, no lock.
/// One per logical processor, inside its [`ArchPerfPmu`](super::ArchPerfPmu).
///
/// Every location the handler writes has one writer at a time (the
/// handler of this logical processor, or the driver halting a counter after
/// disarming it), so the handler updates it with a plain load and store.
/// The handler may interrupt a driver call of its CPU at any register
/// access, as a vector PMI or an NMI (a group's or a multiplexer's bracket
/// is called with the PMU interrupt masked, which holds only the vector):
/// every count stays exact, tested at every access of every operation
/// (`driver/tests/interrupts.rs`).
pub struct PmiState {
    /// The armed counters, as `GLOBAL` bits.
    armed: AtomicU64,
    /// The MSR the handler reads for the overflow bits, which it masks
    /// with the armed set: `IA32_PERF_GLOBAL_STATUS` from version 2.
    /// Version 1 has no such MSR (its read raises #GP) and arms nothing
    /// (sampling needs version 2, [`ConfigError::NoOverflowStatus`]): there
    /// it is `IA32_PERFEVTSEL0`, which every version has, whatever it
    /// reads masked to "not ours" by the empty armed set. So an NMI routed
    /// to the handler on version 1 (as perf routes every NMI) touches no
    /// missing MSR, and deciding so costs the handler no instruction
    /// (the address is a load where it was an immediate). Before a driver
    /// takes the PMU it is the version-1 choice, right on every version.
    ///
    /// [`ConfigError::NoOverflowStatus`]: super::driver::ConfigError::NoOverflowStatus
    status: AtomicU32,
    /// Per counter: RDPMC's ECX for it, set when it is configured.
    ecx: [AtomicU32; SLOTS],
    /// Per counter: the MSR its re-arm writes, set when it is configured.
    msr: [AtomicU32; SLOTS],
    preset: [AtomicU64; SLOTS],
    n: [AtomicU64; SLOTS],
    periods: [AtomicU64; SLOTS],
    at_halt: [AtomicU64; SLOTS],
    interrupts: AtomicU64,
    spurious: AtomicU64,
    /// The overflows the running handler found: its own scratch (one
    /// writer: the handler, which nothing re-enters), kept here rather than
    /// in a register through the loop.
    found: AtomicU64,
}

impl core::fmt::Debug for PmiState {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PmiState")
            .field("armed", &self.armed())
            .field("interrupts", &self.interrupts())
            .finish_non_exhaustive()
    }
}

impl PmiState {
    /// Nothing armed (made by [`super::ArchPerfPmu::new`]).
    #[allow(clippy::declare_interior_mutable_const)]
    pub(super) const fn new() -> PmiState {
        const Z: AtomicU64 = AtomicU64::new(0);
        PmiState {
            armed: Z,
            status: AtomicU32::new(IA32_PERFEVTSEL0),
            ecx: [const { AtomicU32::new(0) }; SLOTS],
            msr: [const { AtomicU32::new(0) }; SLOTS],
            preset: [Z; SLOTS],
            n: [Z; SLOTS],
            periods: [Z; SLOTS],
            at_halt: [Z; SLOTS],
            interrupts: Z,
            spurious: Z,
            found: Z,
        }
    }

    /// A driver takes the PMU (of architectural perfmon `version`):
    /// nothing armed, no counts, the overflow bits read where the version
    /// has them.
    pub(super) fn reset(&self, version: u8) {
        self.armed.store(0, Ordering::Release);
        let status = if version >= 2 {
            IA32_PERF_GLOBAL_STATUS
        } else {
            IA32_PERFEVTSEL0
        };
        self.status.store(status, Ordering::Release);
        for s in 0..SLOTS {
            self.periods[s].store(0, Ordering::Relaxed);
            self.at_halt[s].store(0, Ordering::Relaxed);
        }
        self.interrupts.store(0, Ordering::Relaxed);
        self.spurious.store(0, Ordering::Relaxed);
    }

    /// The armed counters.
    pub fn armed(&self) -> CounterSet {
        CounterSet::from_bits_truncate(self.armed.load(Ordering::Acquire))
    }

    /// Sample-after periods counter `n` (its handle number) completed since
    /// it was configured: serviced by the handler or found by a halt.
    pub fn periods(&self, n: u8) -> u64 {
        Counter::from_index(n).map_or(0, |c| self.periods[slot(c)].load(Ordering::Acquire))
    }

    /// Of [`PmiState::periods`], those a halt found.
    pub fn periods_at_halt(&self, n: u8) -> u64 {
        Counter::from_index(n).map_or(0, |c| self.at_halt[slot(c)].load(Ordering::Acquire))
    }

    /// PMIs handled.
    pub fn interrupts(&self) -> u64 {
        self.interrupts.load(Ordering::Relaxed)
    }

    /// PMIs that found no overflowed armed counter.
    pub fn spurious(&self) -> u64 {
        self.spurious.load(Ordering::Relaxed)
    }

    /// Counter `c` is (re)configured: the MSR its re-arm writes (general
    /// counters at full width or not), its re-arm constants, no periods yet.
    pub(super) fn set_sampling(&self, c: Counter, s: Option<SampleAfter>, full_width: bool) {
        let i = slot(c);
        self.ecx[i].store(c.rdpmc().ecx(), Ordering::Release);
        self.msr[i].store(c.msr(full_width), Ordering::Release);
        let r = s.map_or(Rearm::default(), SampleAfter::rearm_constants);
        self.preset[i].store(r.preset, Ordering::Release);
        self.n[i].store(r.n, Ordering::Release);
        self.periods[i].store(0, Ordering::Release);
        self.at_halt[i].store(0, Ordering::Release);
    }

    /// Counter `c`'s sample-after value `N` (0 if it does not sample).
    pub(super) fn period(&self, c: Counter) -> u64 {
        self.n[slot(c)].load(Ordering::Relaxed)
    }

    /// Counter `c` is armed for the handler (or not).
    pub(super) fn arm(&self, c: Counter, on: bool) {
        let bit = CounterSet::EMPTY.with(c).bits();
        if on {
            self.armed.fetch_or(bit, Ordering::AcqRel);
        } else {
            self.armed.fetch_and(!bit, Ordering::AcqRel);
        }
    }

    /// A halt found `periods` owed by disarmed counter `c`.
    pub(super) fn add_halt_periods(&self, c: Counter, periods: u64) {
        let i = slot(c);
        bump(&self.periods[i], periods);
        bump(&self.at_halt[i], periods);
    }
}

/// The PMI handler (the architectural PMU's part of
/// [`crate::arch::handle_pmi`]): read `IA32_PERF_GLOBAL_STATUS` once,
/// re-arm every armed counter it shows overflowed relative to what the
/// counter holds, hand a [`Sample`] with the interrupted `rip` to `sink`,
/// acknowledge every overflow found in one `IA32_PERF_GLOBAL_OVF_CTRL`
/// write, then unmask the LVT entry by writing `entry`. See the [module
/// documentation](self) for the traffic.
#[inline]
pub(crate) fn handle_pmi<M: MsrBackend, L: LvtPerfCounterEntry, S: Sink>(
    state: &PmiState,
    msr: &mut M,
    lvt: &mut L,
    entry: LvtPerfCounter,
    rip: u64,
    mut sink: S,
) -> Result<PmiOutcome, M::Error> {
    bump(&state.interrupts, 1);
    // `IA32_PERF_GLOBAL_STATUS`, or on version 1 an MSR that exists there
    // (`PmiState::status`): nothing is armed on version 1.
    let status = msr.read_msr(state.status.load(Ordering::Relaxed))?;
    let found = status & state.armed.load(Ordering::Acquire);
    if found == 0 {
        // The entry first, then the count (the handler is not re-entered
        // before it returns: interrupts are off, or NMIs blocked): the two
        // exits then end differently, so the compiler does not merge them,
        // and this one saves none of the loop's registers.
        lvt.write_lvt_perf_counter(entry);
        bump(&state.spurious, 1);
        return Ok(PmiOutcome {
            overflowed: 0,
            late: false,
        });
    }
    // The usual overflow: fewer than N events past the wrap, one period,
    // re-armed to `preset + raw` (`Rearm::rearm`). Anything else (a stale
    // status bit of a counter not past its overflow, or a counter a period
    // or more past it) hands the rest of the interrupt, from that counter,
    // to the out-of-line `service_rare`, so that the loop keeps no register
    // for the rare cases.
    state.found.store(found, Ordering::Relaxed);
    let mut rest = found;
    loop {
        let n = rest.trailing_zeros();
        let i = n as usize % SLOTS;
        let raw = msr.rdpmc(state.ecx[i].load(Ordering::Relaxed))?;
        // What the re-arm needs, loaded after the read: loaded before it,
        // each would have to survive the instruction in a register of its
        // own.
        if raw >= state.n[i].load(Ordering::Relaxed) {
            return service_rare(state, same_backend(msr), lvt, entry, rip, sink, rest, raw);
        }
        let preset = state.preset[i].load(Ordering::Relaxed);
        msr.write_msr(state.msr[i].load(Ordering::Relaxed), preset + raw)?;
        bump(&state.periods[i], 1);
        sink(Sample::new(n as u8, 1, rip));
        rest &= rest - 1;
        if rest == 0 {
            break;
        }
    }
    let found = state.found.load(Ordering::Relaxed);
    msr.write_msr(IA32_PERF_GLOBAL_OVF_CTRL, found)?;
    lvt.write_lvt_perf_counter(entry);
    Ok(PmiOutcome {
        overflowed: found,
        late: false,
    })
}

/// The rest of the interrupt, out of line, from the counter at the lowest
/// bit of `rest`, which read `raw` and is not in the usual case (one
/// period, fewer than N events past the wrap): each counter of `rest` is
/// re-armed relative to what it holds ([`Rearm::rearm`]: by division, a
/// period or more past the wrap), or, not past its overflow at all (a
/// stale status bit), left out of the outcome; then the interrupt ends as
/// the usual handler ends it. Cold, and only ever the handler's last act.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn service_rare<M: MsrBackend, L: LvtPerfCounterEntry, S: Sink>(
    state: &PmiState,
    msr: &mut M,
    lvt: &mut L,
    entry: LvtPerfCounter,
    rip: u64,
    mut sink: S,
    mut rest: u64,
    raw: u64,
) -> Result<PmiOutcome, M::Error> {
    let found = state.found.load(Ordering::Relaxed);
    let mut overflowed = found;
    let mut first = Some(raw);
    while rest != 0 {
        let n = rest.trailing_zeros();
        rest &= rest - 1;
        let i = n as usize % SLOTS;
        let raw = match first.take() {
            Some(raw) => raw,
            None => msr.rdpmc(state.ecx[i].load(Ordering::Relaxed))?,
        };
        let rearm = Rearm {
            preset: state.preset[i].load(Ordering::Relaxed),
            n: state.n[i].load(Ordering::Relaxed),
        };
        let (periods, value) = rearm.rearm(raw);
        if periods != 0 {
            msr.write_msr(state.msr[i].load(Ordering::Relaxed), value)?;
            bump(&state.periods[i], periods);
            sink(Sample::new(n as u8, periods, rip));
        } else {
            overflowed &= !(1 << n);
        }
    }
    msr.write_msr(IA32_PERF_GLOBAL_OVF_CTRL, found)?;
    lvt.write_lvt_perf_counter(entry);
    Ok(PmiOutcome {
        overflowed,
        late: false,
    })
}

//! The AMD core PMU's overflow interrupt path: the state the counter
//! handles share with the handler, and the handler.
//!
//! One PMI is serviced with (asserted in the tests):
//!
//! | access | legacy, PerfCtrExtCore | PerfMonV2 | why |
//! |---|---|---|---|
//! | RDMSR `PerfCntrGlobalStatus` | 0 | 1 | which counters overflowed (PerfMonV2's `amd_pmu_v2_handle_irq`); before PerfMonV2 there is no status register |
//! | RDPMC counter | one per armed counter | one per overflowed armed counter | legacy: a counter has overflowed when its top bit (47) is clear, its preset `-N` (`N <= 2^47`) having it set (Linux's `amd_pmu_test_overflow_topbit`); both: how far past the overflow it counted (skid), for the re-arm |
//! | WRMSR counter | one per overflowed armed counter | the same | re-arm relative to what it holds: `-N + residual` ([`crate::sampling::SampleAfter::rearm`]) |
//! | WRMSR `PerfCntrGlobalStatusClr` | 0 | 1 | acknowledge every status bit found, in one write |
//! | LVT write | 1 | 0 | see below |
//!
//! The handler does not stop the PMU around the service (Linux's PerfMonV2
//! handler writes `PerfCntrGlobalCtl` twice per PMI to do so): each re-arm
//! is relative to the count it read, so an event between the read and the
//! write is the only one that can be lost (none on the model). A status bit
//! of a counter the driver did not arm (the firmware's; bit 58, LBRs
//! frozen) is left alone.
//!
//! # The LVT entry
//!
//! Every other architecture's handler ends by writing the LVT
//! performance-counter entry `entry`, which unmasks it: Intel's local APIC
//! sets the entry's mask bit when it delivers a PMI (SDM Vol. 3A 11.5.1).
//! AMD's does not (Linux's `amd_pmu_v2_handle_irq`: "Unmasking the LVTPC
//! is not required as the Mask (M) bit of the LVT Performance Counter
//! register is cleared by hardware"; KVM masks its virtual entry on
//! delivery only for an Intel-compatible guest, `kvm_apic_local_deliver`),
//! so on AMD the next PMI is delivered whether or not the handler writes
//! the entry. What this handler does:
//!
//! * **With PerfMonV2 it does not write the entry** (as Linux's PerfMonV2
//!   handler): an APIC access saved on every PMI (an xAPIC store is an
//!   uncached MMIO write; an x2APIC one a WRMSR), which is most of what the
//!   PerfMonV2 path's cost would be beside the architectural PMU's. `lvt`
//!   and `entry` are not used.
//! * **Before PerfMonV2 it writes it, last** (as Linux's legacy AMD
//!   handler, the generic `x86_pmu_handle_irq`, writes `APIC_LVTPC` on
//!   every PMI): one store, which rewrites the value the entry holds on
//!   AMD's own APIC, and unmasks it where delivery masked it after all
//!   (a hypervisor presenting an AMD part before PerfMonV2 behind an
//!   Intel-style virtual APIC).
//!
//! A model's PMI must therefore be delivered as AMD's APIC delivers it,
//! without masking the entry ([`crate::apic::deliver_model_pmi_unmasked`],
//! as the crate's QEMU test kernel `amd` does); delivered the Intel way
//! ([`crate::apic::deliver_model_pmi`]), the PerfMonV2 model's first PMI
//! would leave the entry masked and no later one would be delivered.
//!
//! # Late PMIs, decided by count
//!
//! AMD documents (and Linux works around) two ways an overflow's PMI can
//! find nothing to do:
//!
//! * **An earlier invocation serviced its counter.** Two counters overflow;
//!   the first PMI's handler finds both past their overflow and services
//!   both; the second counter's PMI (taken after the first returns, or
//!   still in flight) then finds nothing. Linux claims every unhandled NMI
//!   within 100 ms of a handled one (`amd_pmu_adjust_nmi_window`). This
//!   handler counts instead: every overflow raises a PMI, so an invocation
//!   that services `k` periods (one per counter, more for a counter a
//!   period or more past its wrap) is one interrupt of up to `k` raised,
//!   and leaves `k - 1` late PMIs owed ([`PmiState::owed`]); an invocation
//!   that finds nothing takes one owed PMI if there is one and reports the
//!   interrupt as the PMU's own ([`PmiOutcome::late`], so
//!   [`PmiOutcome::is_ours`]).
//! * **A counter was stopped with its overflow's PMI in flight.** Linux
//!   waits, up to 50 µs, for the NMI handler to re-arm such a counter
//!   before it disables it (`amd_pmu_wait_on_overflow`), lest the NMI find
//!   nothing. Here the halt (and a release) accounts the overflow itself
//!   and owes its PMI: it marks the counter taken out of service before it
//!   disarms it, and once it has read the stopped counter, owes a late PMI
//!   per period the counter was past its last service ([`PmiState`]'s
//!   window). A
//!   PMI that arrives between the disarm and that read finds the counter
//!   in the window: if the counter is past its overflow, that is its PMI,
//!   claimed there, and the halt owes none. No wait, and no event lost or
//!   counted twice (the periods are accounted once, by the handler or by
//!   the halt).
//!
//! What the count cannot decide:
//!
//! * Interrupts that merged (an overflow raised while another PMI of the
//!   CPU is pending is one delivery; a second NMI raised while one is
//!   pending is lost) leave owed PMIs that no interrupt takes; a later
//!   interrupt that finds nothing then takes one, which may be another
//!   source's NMI that no other handler claims. The owed count is capped
//!   at [`MAX_COUNTERS`] (no more PMIs than counters can be in flight), so
//!   at most that many are taken for late PMIs, where Linux's window takes
//!   every one in 100 ms.
//! * Another source's NMI that arrives while an overflow's PMI is in
//!   flight services the overflow (as Linux's handler does): one period
//!   for one interrupt, nothing owed, and the overflow's own PMI then
//!   finds nothing and is not claimed (tested:
//!   `a_foreign_nmi_that_services_an_overflow_leaves_its_pmi_unclaimed`).
//!   Linux's window claims it; this handler reports it as not its own.
//!
//! The handler takes no lock, executes no locked instruction and allocates
//! nothing, so it may run as an NMI. It returns an error only if a register
//! access fails (only a model fails), with the LVT entry not written.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::msrs::{COUNTER_WIDTH, Counter, CounterSet, MAX_COUNTERS};
use super::msrs::{PERF_CNTR_GLOBAL_STATUS, PERF_CNTR_GLOBAL_STATUS_CLR};
use crate::access::{MsrBackend, MsrOps, backend_for_cold_path};
use crate::apic::{LvtPerfCounter, LvtPerfCounterEntry};
use crate::sampling::{
    OverflowRule, PmiOutcome, Rearm, Sample, SampleAfter, Sink, add_single_writer,
};

/// Per-counter arrays are indexed by the counter's number, the bit number
/// the handler finds (no mapping, no bounds check: a bit number of a
/// 64-bit word is below 64): 64 entries, 6 used.
const SLOTS: usize = 64;

/// The slot of counter number `n`.
const fn slot(n: u32) -> usize {
    n as usize % SLOTS
}

/// A counter's top bit, 47: set from its preset `-N` (`N <= 2^47`) until
/// it wraps, clear from the wrap until it has counted 2^47 events more.
const TOP: u64 = 1 << (COUNTER_WIDTH - 1);

/// In [`PmiState`]'s `pending` word: the window of counters taken out of
/// service, bits 7:0 ...
const WINDOW: u64 = 0xFF;
/// ... and the late PMIs owed, from bit 8 up (an increment is one add).
const OWED_SHIFT: u32 = 8;
/// One late PMI owed.
const ONE_OWED: u64 = 1 << OWED_SHIFT;

/// How a counter overflows: 48 bits wide, its PMI raised with the overflow
/// (AMD64 APM Vol. 2 13.2.1: INT "generates an interrupt when the counter
/// overflows"), so no event is owed to it (the events the handler finds
/// past the overflow are skid).
pub const fn overflow_rule() -> OverflowRule {
    OverflowRule {
        width: COUNTER_WIDTH as u32,
        pmi_delay: 0,
    }
}

/// State shared by the driver and the PMI handler: atomics only, no lock.
/// One per logical processor, inside its [`AmdPmu`](super::AmdPmu).
///
/// Every location the handler writes has one writer at a time (the
/// handler of this logical processor, or the driver halting a counter
/// after disarming it), so the handler updates it with a plain load and
/// store; the words both write, the late-PMI bookkeeping and the handler's
/// way in, the driver changes with single read-modify-write instructions,
/// which a PMI on its own CPU cannot split, and checks again
/// (`PmiState::resync`). The handler may interrupt a driver call of its
/// CPU at any register access, as a vector PMI or an NMI: every count
/// stays exact, tested at every access of every operation
/// (`driver/tests/interrupts.rs`).
pub struct PmiState {
    /// The armed counters.
    armed: AtomicU64,
    /// `PerfCntrGlobalStatus` with PerfMonV2; 0 before it, where the
    /// handler tests each armed counter's top bit instead.
    status: AtomicU32,
    /// The handler's way in: `status` while nothing of the late-PMI
    /// bookkeeping is pending (with PerfMonV2 the fast path; before it,
    /// where `status` is 0, [`legacy`]), `status` with bit 63 set while
    /// something is (the general path, [`general`], which owes and
    /// claims). One load and one sign test choose the PerfMonV2 fast path.
    gate: AtomicU64,
    /// Per counter: the MSR its re-arm writes (`PERF_CTRn` or
    /// `PERF_LEGACY_CTRn`), set when it is configured.
    msr: [AtomicU32; SLOTS],
    preset: [AtomicU64; SLOTS],
    n: [AtomicU64; SLOTS],
    periods: [AtomicU64; SLOTS],
    at_halt: [AtomicU64; SLOTS],
    /// PMIs that serviced an overflow; with `spurious`, every PMI (one
    /// increment per PMI, whichever way it ends).
    serviced: AtomicU64,
    spurious: AtomicU64,
    late: AtomicU64,
    /// The late-PMI bookkeeping (module documentation): bits 7:0 the
    /// counters a halt or release is taking out of service (between their
    /// disarm and their read), from bit 8 up the PMIs owed (at most
    /// [`MAX_COUNTERS`]).
    pending: AtomicU64,
    /// The status bits the running handler found (PerfMonV2, general
    /// path): its own scratch (one writer: the handler, which nothing
    /// re-enters), kept here rather than in a register through the loop.
    found: AtomicU64,
}

/// The gate's bit that sends the handler the general way.
const GENERAL: u64 = 1 << 63;

impl core::fmt::Debug for PmiState {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PmiState")
            .field("armed", &self.armed())
            .field("interrupts", &self.interrupts())
            .field("owed", &self.owed())
            .finish_non_exhaustive()
    }
}

impl PmiState {
    /// Nothing armed (made by [`super::AmdPmu::new`]).
    #[allow(clippy::declare_interior_mutable_const)]
    pub(super) const fn new() -> PmiState {
        const Z: AtomicU64 = AtomicU64::new(0);
        PmiState {
            armed: Z,
            status: AtomicU32::new(0),
            gate: Z,
            msr: [const { AtomicU32::new(0) }; SLOTS],
            preset: [Z; SLOTS],
            n: [Z; SLOTS],
            periods: [Z; SLOTS],
            at_halt: [Z; SLOTS],
            serviced: Z,
            spurious: Z,
            late: Z,
            pending: Z,
            found: Z,
        }
    }

    /// A driver takes the PMU: nothing armed, no counts, nothing owed, the
    /// overflow bits read from `PerfCntrGlobalStatus` with PerfMonV2
    /// (`v2`).
    pub(super) fn reset(&self, v2: bool) {
        self.armed.store(0, Ordering::Release);
        let status = if v2 { PERF_CNTR_GLOBAL_STATUS } else { 0 };
        self.status.store(status, Ordering::Release);
        self.gate.store(status.into(), Ordering::Release);
        for s in 0..SLOTS {
            self.periods[s].store(0, Ordering::Relaxed);
            self.at_halt[s].store(0, Ordering::Relaxed);
        }
        for cell in [&self.serviced, &self.spurious, &self.late, &self.pending] {
            cell.store(0, Ordering::Relaxed);
        }
    }

    /// The armed counters.
    pub fn armed(&self) -> CounterSet {
        CounterSet::from_bits_truncate(self.armed.load(Ordering::Acquire))
    }

    /// Sample-after periods counter `n` (its handle number) completed since
    /// it was configured: serviced by the handler or found by a halt.
    pub fn periods(&self, n: u8) -> u64 {
        Counter::new(n).map_or(0, |c| {
            self.periods[slot(c.index().into())].load(Ordering::Acquire)
        })
    }

    /// Of [`PmiState::periods`], those a halt found.
    pub fn periods_at_halt(&self, n: u8) -> u64 {
        Counter::new(n).map_or(0, |c| {
            self.at_halt[slot(c.index().into())].load(Ordering::Acquire)
        })
    }

    /// PMIs handled.
    pub fn interrupts(&self) -> u64 {
        self.serviced.load(Ordering::Relaxed) + self.spurious.load(Ordering::Relaxed)
    }

    /// PMIs that found no overflowed armed counter (the late ones among
    /// them).
    pub fn spurious(&self) -> u64 {
        self.spurious.load(Ordering::Relaxed)
    }

    /// Of [`PmiState::spurious`], those taken as late PMIs of overflows
    /// already serviced ([`PmiOutcome::late`]; module documentation).
    pub fn late(&self) -> u64 {
        self.late.load(Ordering::Relaxed)
    }

    /// The late PMIs owed now: raised by overflows already serviced (or
    /// found by a halt), not yet taken (at most [`MAX_COUNTERS`]).
    pub fn owed(&self) -> u64 {
        owe(self.pending.load(Ordering::Acquire), 0) >> OWED_SHIFT
    }

    /// Counter `c` is (re)configured: the MSR its re-arm writes (`PERF_CTRn`
    /// with PerfCtrExtCore, `extended`, else `PERF_LEGACY_CTRn`), its
    /// re-arm constants, no periods yet.
    pub(super) fn set_sampling(&self, c: Counter, s: Option<SampleAfter>, extended: bool) {
        let i = slot(c.index().into());
        self.msr[i].store(c.ctr(extended), Ordering::Release);
        let r = s.map_or(Rearm::default(), SampleAfter::rearm_constants);
        self.preset[i].store(r.preset, Ordering::Release);
        self.n[i].store(r.n, Ordering::Release);
        self.periods[i].store(0, Ordering::Release);
        self.at_halt[i].store(0, Ordering::Release);
    }

    /// Counter `c`'s sample-after value `N` (0 if it does not sample).
    pub(super) fn period(&self, c: Counter) -> u64 {
        self.n[slot(c.index().into())].load(Ordering::Relaxed)
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
        let i = slot(c.index().into());
        add_single_writer(&self.periods[i], periods);
        add_single_writer(&self.at_halt[i], periods);
    }

    /// Counter `c` is being taken out of service (halted or released): in
    /// the window from before its disarm until [`PmiState::close_window`].
    pub(super) fn open_window(&self, c: Counter) {
        self.gate.fetch_or(GENERAL, Ordering::AcqRel);
        self.pending.fetch_or(1 << c.index(), Ordering::AcqRel);
        self.resync();
    }

    /// Counter `c`, stopped and disarmed, has been read: `periods` past
    /// its last service, whose PMIs are then owed, unless a PMI taken in
    /// the window claimed one already (then one fewer).
    pub(super) fn close_window(&self, c: Counter, periods: u64) {
        let bit = 1 << c.index();
        let was = self.pending.fetch_and(!bit, Ordering::AcqRel);
        let owed = if was & bit != 0 {
            periods
        } else {
            periods.saturating_sub(1)
        };
        if owed > 0 {
            let _ = self
                .pending
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |p| Some(owe(p, owed)));
        }
        self.resync();
    }

    /// The gate set from `pending`, by the handler (which nothing
    /// interrupts on its CPU): the general way exactly while something is
    /// pending.
    #[inline(always)]
    fn set_gate(&self, pending: u64) {
        let status = u64::from(self.status.load(Ordering::Relaxed));
        let gate = if pending == 0 {
            status
        } else {
            status | GENERAL
        };
        self.gate.store(gate, Ordering::Relaxed);
    }

    /// The same, by the driver, which a PMI of its CPU may interrupt
    /// between any two instructions: a handler that changes `pending` in
    /// between sets the gate itself, so the driver's setting is checked
    /// against `pending` again, until no PMI came between.
    fn resync(&self) {
        loop {
            let pending = self.pending.load(Ordering::Acquire);
            self.set_gate(pending);
            if self.pending.load(Ordering::Acquire) == pending {
                return;
            }
        }
    }
}

/// `pending` with `more` late PMIs owed (at most [`MAX_COUNTERS`]: no more
/// PMIs than counters can be in flight; the PerfMonV2 fast path adds
/// without the cap, which applies where they are counted or taken).
const fn owe(pending: u64, more: u64) -> u64 {
    let owed = (pending >> OWED_SHIFT).saturating_add(more);
    let owed = if owed > MAX_COUNTERS as u64 {
        MAX_COUNTERS as u64
    } else {
        owed
    };
    pending & WINDOW | owed << OWED_SHIFT
}

/// The PMI handler (the AMD core PMU's part of [`crate::arch::handle_pmi`]):
/// with PerfMonV2, read `PerfCntrGlobalStatus` once and service every armed
/// counter it shows overflowed; before PerfMonV2, read every armed counter
/// and service those whose top bit is clear; each re-armed relative to what
/// it holds, a [`Sample`] with the interrupted `rip` to `sink`; with
/// PerfMonV2 every status bit found acknowledged in one
/// `PerfCntrGlobalStatusClr` write; late PMIs owed or claimed by count;
/// before PerfMonV2 the LVT entry written `entry` last (module
/// documentation). See the [module documentation](self).
///
/// With PerfMonV2 and nothing of the late-PMI bookkeeping pending, the
/// usual interrupt (each overflowed counter fewer than `N` events past its
/// wrap) and the one that finds nothing are served inline (the first
/// counter first, in the loop of the architectural PMU's handler);
/// anything else (a counter a
/// period or more past its wrap, a stale status bit) hands the rest of the
/// interrupt to an out-of-line path, so that the inline path keeps no
/// register for it. Before PerfMonV2 with nothing pending [`legacy`]
/// serves, and while something is pending the general path
/// ([`general`]).
#[inline]
pub(crate) fn handle_pmi<M: MsrBackend, L: LvtPerfCounterEntry, S: Sink>(
    state: &PmiState,
    msr: &mut M,
    lvt: &mut L,
    entry: LvtPerfCounter,
    rip: u64,
    mut sink: S,
) -> Result<PmiOutcome, M::Error> {
    let gate = state.gate.load(Ordering::Relaxed);
    if gate as i64 <= 0 {
        if gate == 0 {
            return legacy(state, backend_for_cold_path(msr), lvt, entry, rip, sink);
        }
        return general(state, backend_for_cold_path(msr), lvt, entry, rip, sink);
    }
    let found = msr.read_msr(gate as u32)? & state.armed.load(Ordering::Acquire);
    if found == 0 {
        add_single_writer(&state.spurious, 1);
        return Ok(PmiOutcome {
            overflowed: found,
            late: false,
        });
    }
    // The usual overflow of the first counter found, inline: fewer than N
    // events past the wrap, one period, re-armed to `preset + raw`; more
    // counters found continue in [`v2_more`], any other case in
    // [`v2_rare`], both in tail position, with the set found kept in the
    // state (so that this path keeps no register across a call).
    state.found.store(found, Ordering::Relaxed);
    let n = found.trailing_zeros();
    let i = slot(n);
    let raw = msr.rdpmc(n)?;
    // What the re-arm needs, loaded after the read.
    if raw >= state.n[i].load(Ordering::Relaxed) {
        return v2_rare(state, backend_for_cold_path(msr), rip, sink, found);
    }
    let preset = state.preset[i].load(Ordering::Relaxed);
    msr.write_msr(state.msr[i].load(Ordering::Relaxed), preset + raw)?;
    add_single_writer(&state.periods[i], 1);
    sink(Sample::new(n as u8, 1, rip));
    let found = state.found.load(Ordering::Relaxed);
    if found & (found - 1) != 0 {
        return v2_more(state, backend_for_cold_path(msr), rip, sink);
    }
    msr.write_msr(PERF_CNTR_GLOBAL_STATUS_CLR, found)?;
    add_single_writer(&state.serviced, 1);
    Ok(PmiOutcome {
        overflowed: found,
        late: false,
    })
}

/// The PerfMonV2 fast path's interrupt with more than one counter found
/// (`PmiState::found`): the first serviced already, the others here, the
/// usual overflow in the loop of the architectural PMU's handler (any
/// other case hands the rest to [`v2_rare`]); the status acknowledged; a
/// late PMI owed per counter beyond the first (each overflow raised its
/// own), which sends the next PMI the general way.
#[cold]
#[inline(never)]
fn v2_more<M: MsrBackend, S: Sink>(
    state: &PmiState,
    msr: &mut M,
    rip: u64,
    mut sink: S,
) -> Result<PmiOutcome, M::Error> {
    let found = state.found.load(Ordering::Relaxed);
    let mut rest = found & (found - 1);
    while rest != 0 {
        let n = rest.trailing_zeros();
        let i = slot(n);
        let raw = msr.rdpmc(n)?;
        if raw >= state.n[i].load(Ordering::Relaxed) {
            return v2_rare(state, backend_for_cold_path(msr), rip, sink, rest);
        }
        let preset = state.preset[i].load(Ordering::Relaxed);
        msr.write_msr(state.msr[i].load(Ordering::Relaxed), preset + raw)?;
        add_single_writer(&state.periods[i], 1);
        sink(Sample::new(n as u8, 1, rip));
        rest &= rest - 1;
    }
    msr.write_msr(PERF_CNTR_GLOBAL_STATUS_CLR, found)?;
    // Uncapped: the next PMI takes the general path, which caps it.
    add_single_writer(&state.pending, OWED_BEYOND_FIRST[found as usize % 64]);
    state.gate.store(
        state.gate.load(Ordering::Relaxed) | GENERAL,
        Ordering::Relaxed,
    );
    add_single_writer(&state.serviced, 1);
    Ok(PmiOutcome {
        overflowed: found,
        late: false,
    })
}

/// The PerfMonV2 fast path's counter not in the usual case (a period or
/// more past its wrap, or a stale status bit): the rest of the interrupt,
/// from it (the lowest bit of `rest`), by [`rest_of`], after the counters
/// of the set found (`PmiState::found`) the loop serviced already, one
/// period each.
#[cold]
#[inline(never)]
fn v2_rare<M: MsrBackend, S: Sink>(
    state: &PmiState,
    msr: &mut M,
    rip: u64,
    sink: S,
    rest: u64,
) -> Result<PmiOutcome, M::Error> {
    let serviced = state.found.load(Ordering::Relaxed) & !rest;
    let done = u64::from(serviced.count_ones());
    let lvt = &mut ();
    rest_of(
        state,
        msr,
        lvt,
        LvtPerfCounter::RESET,
        rip,
        sink,
        serviced,
        rest,
        done,
    )
}

/// The late PMIs an interrupt that serviced a set of the six counters owes
/// (one per counter beyond the first), as `PmiState::pending` counts them:
/// a load where the PMI path has no POPCNT to rely on.
const OWED_BEYOND_FIRST: [u64; 64] = {
    let mut t = [0; 64];
    let mut set = 1;
    while set < 64 {
        t[set] = (set.count_ones() as u64 - 1) << OWED_SHIFT;
        set += 1;
    }
    t
};

/// The interrupt before PerfMonV2 with nothing of the late-PMI bookkeeping
/// pending (the gate 0: it is set the general way while anything is): every
/// armed counter read, each whose top bit is clear serviced, the usual
/// overflow inline (anything else hands the rest to [`rest_of`]); an
/// interrupt that serviced one counter or none ended here (nothing to
/// acknowledge, owe or claim: the LVT entry written, counted), one that
/// serviced more by [`ended`], which owes their late PMIs. A function of
/// its own, so that the PerfMonV2 fast path keeps none of its registers.
#[inline(never)]
fn legacy<M: MsrBackend, L: LvtPerfCounterEntry, S: Sink>(
    state: &PmiState,
    msr: &mut M,
    lvt: &mut L,
    entry: LvtPerfCounter,
    rip: u64,
    mut sink: S,
) -> Result<PmiOutcome, M::Error> {
    let mut rest = state.armed.load(Ordering::Acquire);
    let mut found = 0u64;
    while rest != 0 {
        let n = rest.trailing_zeros();
        let raw = msr.rdpmc(n)?;
        if raw & TOP == 0 {
            let i = slot(n);
            if raw >= state.n[i].load(Ordering::Relaxed) {
                let done = u64::from(found.count_ones());
                return rest_of(
                    state,
                    backend_for_cold_path(msr),
                    lvt,
                    entry,
                    rip,
                    sink,
                    found,
                    rest,
                    done,
                );
            }
            let preset = state.preset[i].load(Ordering::Relaxed);
            msr.write_msr(state.msr[i].load(Ordering::Relaxed), preset + raw)?;
            add_single_writer(&state.periods[i], 1);
            sink(Sample::new(n as u8, 1, rip));
            found |= 1 << n;
        }
        rest &= rest - 1;
    }
    if found & found.wrapping_sub(1) != 0 {
        return ended(state, backend_for_cold_path(msr), lvt, entry, found);
    }
    lvt.write_lvt_perf_counter(entry);
    let cell = if found == 0 {
        &state.spurious
    } else {
        &state.serviced
    };
    add_single_writer(cell, 1);
    Ok(PmiOutcome {
        overflowed: found,
        late: false,
    })
}

/// The general path, while something of the late-PMI bookkeeping is
/// pending: before PerfMonV2 every armed counter, with it the armed
/// counters the status shows; each whose top bit is clear serviced (the
/// others are not past their overflow: before PerfMonV2 the usual case,
/// with it a stale status bit) by [`rest_of`], which ends the interrupt
/// with [`finish`]: late PMIs owed or claimed.
#[cold]
#[inline(never)]
fn general<M: MsrBackend, L: LvtPerfCounterEntry, S: Sink>(
    state: &PmiState,
    msr: &mut M,
    lvt: &mut L,
    entry: LvtPerfCounter,
    rip: u64,
    sink: S,
) -> Result<PmiOutcome, M::Error> {
    let status = state.status.load(Ordering::Relaxed);
    let armed = state.armed.load(Ordering::Acquire);
    let all = if status == 0 {
        armed
    } else {
        msr.read_msr(status)? & armed
    };
    state.found.store(all, Ordering::Relaxed);
    rest_of(state, msr, lvt, entry, rip, sink, 0, all, 0)
}

/// [`legacy`]'s end for an interrupt that serviced more than one counter:
/// [`finish`] out of line, one period per counter `found`.
#[cold]
#[inline(never)]
fn ended<M: MsrBackend, L: LvtPerfCounterEntry>(
    state: &PmiState,
    msr: &mut M,
    lvt: &mut L,
    entry: LvtPerfCounter,
    found: u64,
) -> Result<PmiOutcome, M::Error> {
    finish(state, msr, lvt, entry, found, found.count_ones().into())
}

/// The rest of an interrupt, out of line, where a counter is not in the
/// usual case (and the whole of the general path's): of the counters a
/// path set out to service (saved in `PmiState::found`: with PerfMonV2 the
/// status bits), those of `rest` (the one at its lowest bit included)
/// serviced by [`Rearm::rearm`] where their top bit is clear, after
/// `serviced` with `done` periods; then [`finish`].
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn rest_of<M: MsrBackend, L: LvtPerfCounterEntry, S: Sink>(
    state: &PmiState,
    msr: &mut M,
    lvt: &mut L,
    entry: LvtPerfCounter,
    rip: u64,
    mut sink: S,
    serviced: u64,
    mut rest: u64,
    done: u64,
) -> Result<PmiOutcome, M::Error> {
    let mut overflowed = serviced;
    let mut periods = done;
    while rest != 0 {
        let n = rest.trailing_zeros();
        rest &= rest - 1;
        let raw = msr.rdpmc(n)?;
        if raw & TOP != 0 {
            continue;
        }
        let i = slot(n);
        let rearm = Rearm {
            preset: state.preset[i].load(Ordering::Relaxed),
            n: state.n[i].load(Ordering::Relaxed),
        };
        let (p, value) = rearm.rearm(raw);
        if p != 0 {
            msr.write_msr(state.msr[i].load(Ordering::Relaxed), value)?;
            add_single_writer(&state.periods[i], p);
            sink(Sample::new(n as u8, p, rip));
            overflowed |= 1 << n;
            periods += p;
        }
    }
    finish(state, msr, lvt, entry, overflowed, periods)
}

/// The end of an interrupt that serviced `periods` periods of the
/// counters `overflowed`: with PerfMonV2 the status acknowledged (the bits
/// in `PmiState::found`); a late PMI owed per period beyond the first; an
/// interrupt that serviced nothing claimed as a late PMI where the count
/// says it is one ([`claim_late`]); counted; the gate set again; before
/// PerfMonV2 the LVT entry written.
fn finish<M: MsrBackend, L: LvtPerfCounterEntry>(
    state: &PmiState,
    msr: &mut M,
    lvt: &mut L,
    entry: LvtPerfCounter,
    overflowed: u64,
    periods: u64,
) -> Result<PmiOutcome, M::Error> {
    let v2 = state.status.load(Ordering::Relaxed) != 0;
    let status_found = state.found.load(Ordering::Relaxed);
    if v2 && status_found != 0 {
        msr.write_msr(PERF_CNTR_GLOBAL_STATUS_CLR, status_found)?;
    }
    let mut pending = owe(state.pending.load(Ordering::Relaxed), 0);
    let mut late = false;
    if periods > 1 {
        pending = owe(pending, periods - 1);
    } else if periods == 0 && pending != 0 {
        (pending, late) = claim_late(msr, pending)?;
    }
    state.pending.store(pending, Ordering::Relaxed);
    state.set_gate(pending);
    if !v2 {
        lvt.write_lvt_perf_counter(entry);
    }
    if periods == 0 {
        add_single_writer(&state.spurious, 1);
        add_single_writer(&state.late, u64::from(late));
    } else {
        add_single_writer(&state.serviced, 1);
    }
    Ok(PmiOutcome { overflowed, late })
}

/// An interrupt that serviced nothing, with late-PMI bookkeeping `pending`:
/// the PMU's own, late, if a counter being taken out of service is past its
/// overflow (the halt's PMI, which the halt then does not owe) or a late
/// PMI is owed. The bookkeeping left, and whether it was.
fn claim_late<M: MsrBackend>(msr: &mut M, pending: u64) -> Result<(u64, bool), M::Error> {
    let mut window = pending & WINDOW;
    while window != 0 {
        let n = window.trailing_zeros();
        window &= window - 1;
        if msr.rdpmc(n)? & TOP == 0 {
            return Ok((pending & !(1 << n), true));
        }
    }
    if pending >> OWED_SHIFT == 0 {
        return Ok((pending, false));
    }
    Ok((pending - ONE_OWED, true))
}

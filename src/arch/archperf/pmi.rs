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
//! # PEBS
//!
//! A PEBS counter's overflow raises no PMI: the assist writes a record into
//! the DS buffer and reloads the counter, and the PMI comes when the PEBS
//! index reaches the interrupt threshold, with `IA32_PERF_GLOBAL_STATUS`
//! bit 62 (OvfBuf). While a PEBS counter is configured the handler's armed
//! set holds bit 62, whose slot sends the loop out of line (its `N` is 0,
//! so no count is below it): the usual interrupt tests nothing more for
//! PEBS, and the buffer's interrupt costs, beside the usual status read,
//! acknowledgement and LVT write, one RDPMC of the lowest PEBS counter
//! (the loop reads a counter before it tests it; the value is not needed)
//! and then memory only: every record from the buffer base to the PEBS
//! index is read, decoded as the record format says ([`RecordLayout`]),
//! handed to the sink as a [`Sample`] of its counter with one period and
//! the record as [`Capture::Pebs`] (the sample's IP is the record's, by the
//! counter's precise level: [`PebsRecord::ip`]), and the index rewound. The
//! PEBS counters' own status bits, which a PEBS overflow may set too (Linux
//! ignores them for the same reason), are acknowledged with bit 62.
//!
//! # Last branch records
//!
//! A counter configured to carry the LBR's records
//! ([`CounterConfig::branches`](super::driver::CounterConfig::branches)) is
//! serviced out of line: its bound in the loop is 0, so the loop hands it,
//! after its RDPMC, to `service_out_of_line`, which reads the records once for
//! every such counter of the interrupt (legacy stack: 1 RDMSR of the TOS
//! and 2 or 3 per record back to the first empty one; architectural LBR: 3
//! per record from record 0; [`Lbr`](super::Lbr)) and hands each sample
//! with [`Capture::Branches`]. The records are frozen by the PMI request
//! (`IA32_DEBUGCTL.FREEZE_LBRS_ON_PMI`, which the driver sets). Version 4
//! and architectural LBR freeze by setting `IA32_PERF_GLOBAL_STATUS.LBR_Frz`
//! (bit 58): while the LBR runs the armed set holds bit 58, whose slot
//! (bound 0, after every counter's) sends the loop out of line, and the
//! one acknowledgement of the interrupt clears it (Linux: "v4 can do that
//! as part of the GLOBAL_STATUS ack"). Versions 2-3 freeze by clearing
//! `IA32_DEBUGCTL.LBR`: while the LBR runs every counter is serviced out of
//! line there, and the interrupt ends with 1 WRMSR of `IA32_DEBUGCTL` (the
//! driver's image) after the acknowledgement. The usual interrupt, without
//! the LBR, tests nothing more for it.
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

use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

use super::lbr::{BranchStack, IA32_DEBUGCTL, LbrPlan, read_stack};
use super::msrs::{
    Counter, CounterSet, GlobalStatus, IA32_PERF_GLOBAL_OVF_CTRL, IA32_PERF_GLOBAL_STATUS,
    IA32_PERFEVTSEL0,
};
use super::pebs::{PebsRecord, Precise, RecordLayout};
use crate::access::{MsrBackend, MsrOps, backend_for_cold_path};
use crate::apic::{LvtPerfCounter, LvtPerfCounterEntry};
use crate::arch::ia32::ds::{self, DsManagement};
use crate::sampling::{
    OverflowRule, PmiOutcome, Rearm, Sample, SampleAfter, Sink, add_single_writer,
};

/// What an architectural-PMU overflow captured besides its counter,
/// periods and IP (the architectural PMU's
/// [`crate::arch::Architecture::Payload`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[allow(
    clippy::large_enum_variant,
    reason = "the record is the sample (no allocator to box it in); a sample without one writes only the tag (the bench's usual paths are unchanged)"
)]
pub enum Capture {
    /// Nothing: a sampling counter's overflow, at the interrupted IP.
    #[default]
    None,
    /// A PEBS record the handler (or the driver's drain) took from the DS
    /// buffer: one period of its counter, at the record's IP for the
    /// counter's precise level (the sample's `rip`).
    Pebs(PebsRecord),
    /// The last branch records, frozen by the PMI, of a counter configured
    /// to carry them ([`CounterConfig::branches`](super::driver::CounterConfig::branches)),
    /// at the interrupted IP; in call-stack mode its call chain
    /// ([`BranchStack::call_chain`]).
    Branches(BranchStack),
}

impl Capture {
    /// The PEBS record, if this is one.
    pub const fn pebs(&self) -> Option<&PebsRecord> {
        match self {
            Capture::Pebs(r) => Some(r),
            _ => None,
        }
    }

    /// The branch records, if this is a stack.
    pub const fn branches(&self) -> Option<&BranchStack> {
        match self {
            Capture::Branches(b) => Some(b),
            _ => None,
        }
    }
}

/// `IA32_PERF_GLOBAL_STATUS` bit 62, the PEBS buffer's, as the handler's
/// armed set holds it.
const BUFFER: u64 = GlobalStatus::OVF_BUF.mask();

/// The slot of [`BUFFER`].
const BUFFER_SLOT: usize = GlobalStatus::OVF_BUF.lsb() as usize;

/// `IA32_PERF_GLOBAL_STATUS` bit 58, `LBR_Frz`, as the handler's armed set
/// holds it while the LBR runs with the version-4 freeze.
const FROZEN: u64 = GlobalStatus::LBR_FRZ.mask();

/// The slot of [`FROZEN`].
const FROZEN_SLOT: usize = GlobalStatus::LBR_FRZ.lsb() as usize;

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
    /// Per counter: the bound of the handler's usual case, its
    /// sample-after value `N`, or 0 for a counter serviced out of line
    /// (one whose samples carry the branch records, or every counter while
    /// the LBR runs with the legacy freeze): no count is below 0, so the
    /// loop hands it to `service_out_of_line`.
    n: [AtomicU64; SLOTS],
    /// Per counter: its sample-after value `N` (0 if it does not sample).
    period: [AtomicU64; SLOTS],
    periods: [AtomicU64; SLOTS],
    at_halt: [AtomicU64; SLOTS],
    interrupts: AtomicU64,
    spurious: AtomicU64,
    /// The overflows the running handler found: its own scratch (one
    /// writer: the handler, which nothing re-enters), kept here rather than
    /// in a register through the loop.
    found: AtomicU64,
    /// The DS save area the driver installed (null while none): its
    /// management area, whose absolute maximum also bounds the buffer.
    ds: AtomicPtr<DsManagement>,
    /// The counters configured for PEBS, as `GLOBAL` bits.
    pebs: AtomicU64,
    /// Of those, the ones whose samples take EventingIP (`:pp`, `:ppp`).
    eventing: AtomicU64,
    /// The records' layout, packed ([`RecordLayout::pack`]; 0: none).
    layout: AtomicU32,
    /// Records the handler could not attribute (a record of another layout
    /// than the one configured, or naming no PEBS counter).
    pebs_dropped: AtomicU64,
    /// How the LBR is read (packed, [`LbrPlan`]; 0: the LBR is off).
    lbr: AtomicU64,
    /// The counters whose samples carry the branch records, as `GLOBAL`
    /// bits.
    branches: AtomicU64,
    /// The `IA32_DEBUGCTL` image the driver wrote: with the legacy freeze
    /// the handler writes it again to unfreeze the records.
    debugctl: AtomicU64,
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
            period: [Z; SLOTS],
            periods: [Z; SLOTS],
            at_halt: [Z; SLOTS],
            interrupts: Z,
            spurious: Z,
            found: Z,
            ds: AtomicPtr::new(core::ptr::null_mut()),
            pebs: Z,
            eventing: Z,
            layout: AtomicU32::new(0),
            pebs_dropped: Z,
            lbr: Z,
            branches: Z,
            debugctl: Z,
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
        self.pebs.store(0, Ordering::Relaxed);
        self.eventing.store(0, Ordering::Relaxed);
        self.layout.store(0, Ordering::Relaxed);
        self.pebs_dropped.store(0, Ordering::Relaxed);
        self.lbr.store(0, Ordering::Release);
        self.branches.store(0, Ordering::Release);
        self.debugctl.store(0, Ordering::Relaxed);
        self.ds.store(core::ptr::null_mut(), Ordering::Release);
        // The buffer's slot: never a period below it, so the loop always
        // hands it out of line (`handle_pmi`).
        self.n[BUFFER_SLOT].store(0, Ordering::Release);
        self.preset[BUFFER_SLOT].store(0, Ordering::Release);
        // The LBR freeze's slot likewise (its RDPMC reads general counter
        // 0, which every driven CPU has).
        self.n[FROZEN_SLOT].store(0, Ordering::Release);
        self.ecx[FROZEN_SLOT].store(0, Ordering::Release);
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
        self.period[i].store(r.n, Ordering::Release);
        self.route(c);
        self.periods[i].store(0, Ordering::Release);
        self.at_halt[i].store(0, Ordering::Release);
    }

    /// Counter `c`'s sample-after value `N` (0 if it does not sample).
    pub(super) fn period(&self, c: Counter) -> u64 {
        self.period[slot(c)].load(Ordering::Relaxed)
    }

    /// Counter `c`'s bound for the usual case: its `N`, or 0 when it is
    /// serviced out of line (its samples carry the branch records, or the
    /// LBR runs with the legacy freeze, which every PMI's handler must
    /// undo).
    fn route(&self, c: Counter) {
        let i = slot(c);
        let plan = LbrPlan::from_bits(self.lbr.load(Ordering::Acquire));
        let out_of_line = self.branches.load(Ordering::Acquire) & 1 << i != 0
            || (plan.on() && plan.legacy_freeze());
        let n = if out_of_line {
            0
        } else {
            self.period[i].load(Ordering::Acquire)
        };
        self.n[i].store(n, Ordering::Release);
    }

    /// Every counter's bound again ([`PmiState::route`]).
    fn route_all(&self) {
        for c in (0..8)
            .filter_map(Counter::general)
            .chain((0..4).filter_map(Counter::fixed))
        {
            self.route(c);
        }
    }

    /// The LBR runs as `plan` says, with `IA32_DEBUGCTL` written `debugctl`
    /// (or, with `None`, no more): the handler arms the freeze's status bit
    /// (version 4) or services every counter out of line (the legacy
    /// freeze). The driver sets it with no counter armed that carries the
    /// records.
    pub(super) fn set_lbr(&self, plan: Option<LbrPlan>, debugctl: u64) {
        let plan = plan.unwrap_or_default();
        self.debugctl.store(debugctl, Ordering::Release);
        self.lbr.store(plan.bits(), Ordering::Release);
        if plan.on() && !plan.legacy_freeze() {
            self.armed.fetch_or(FROZEN, Ordering::AcqRel);
        } else {
            self.armed.fetch_and(!FROZEN, Ordering::AcqRel);
        }
        self.route_all();
    }

    /// Counter `c`'s samples carry the branch records (or not).
    pub(super) fn set_branches(&self, c: Counter, on: bool) {
        let bit = CounterSet::EMPTY.with(c).bits();
        if on {
            self.branches.fetch_or(bit, Ordering::AcqRel);
        } else {
            self.branches.fetch_and(!bit, Ordering::AcqRel);
        }
        self.route(c);
    }

    /// The counters whose samples carry the branch records.
    pub fn branch_counters(&self) -> CounterSet {
        CounterSet::from_bits_truncate(self.branches.load(Ordering::Acquire))
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
        add_single_writer(&self.periods[i], periods);
        add_single_writer(&self.at_halt[i], periods);
    }

    /// The counters configured for PEBS.
    pub fn pebs_counters(&self) -> CounterSet {
        CounterSet::from_bits_truncate(self.pebs.load(Ordering::Acquire))
    }

    /// Records the handler or a drain could not attribute to a PEBS
    /// counter (none on a correct configuration).
    pub fn pebs_dropped(&self) -> u64 {
        self.pebs_dropped.load(Ordering::Relaxed)
    }

    /// Publishes the DS save area the driver installed (or `None`:
    /// withdraws it), for the handler to drain.
    ///
    /// # Safety
    ///
    /// `area` is the management area of a
    /// [`DsArea`](crate::arch::ia32::ds::DsArea) that the caller, the
    /// driver of this logical processor, owns and keeps until it publishes
    /// `None` here, from this logical processor (where the handler runs to
    /// completion first, so none is draining the area when it is
    /// withdrawn).
    pub(super) unsafe fn publish_ds_area(&self, area: Option<NonNull<DsManagement>>) {
        let ptr = area.map_or(core::ptr::null_mut(), NonNull::as_ptr);
        self.ds.store(ptr, Ordering::Release);
    }

    /// The records' layout from now on (the driver sets it while no PEBS
    /// counter is configured, so the handler is not draining).
    pub(super) fn set_layout(&self, layout: Option<RecordLayout>) {
        self.layout
            .store(layout.map_or(0, RecordLayout::pack), Ordering::Release);
    }

    /// Counter `c` is configured for PEBS at precise level `precise` (or,
    /// with `None`, no more): the handler drains the buffer while any is.
    /// The buffer's slot reads the lowest PEBS counter (an RDPMC the loop
    /// makes before it finds the slot is the buffer's).
    pub(super) fn set_pebs(&self, c: Counter, precise: Option<Precise>) {
        let bit = CounterSet::EMPTY.with(c).bits();
        let eventing = precise.is_some_and(Precise::eventing);
        if eventing {
            self.eventing.fetch_or(bit, Ordering::AcqRel);
        } else {
            self.eventing.fetch_and(!bit, Ordering::AcqRel);
        }
        let pebs = if precise.is_some() {
            self.pebs.fetch_or(bit, Ordering::AcqRel) | bit
        } else {
            self.pebs.fetch_and(!bit, Ordering::AcqRel) & !bit
        };
        if let Some(lowest) = CounterSet::from_bits_truncate(pebs).iter().next() {
            self.ecx[BUFFER_SLOT].store(lowest.rdpmc().ecx(), Ordering::Release);
        }
        self.arm_buffer(pebs != 0);
    }

    /// The handler drains the buffer at its interrupt (or not: while the
    /// driver drains it, or with no PEBS counter).
    pub(super) fn arm_buffer(&self, on: bool) {
        if on {
            self.armed.fetch_or(BUFFER, Ordering::AcqRel);
        } else {
            self.armed.fetch_and(!BUFFER, Ordering::AcqRel);
        }
    }

    /// Hands every record in the DS buffer to `f` as a sample (one per
    /// PEBS counter the record is for, one period each, at the record's IP
    /// for the counter's precise level) and rewinds the index; counts the
    /// periods (and, with `at_halt`, as found by a drain after a halt).
    /// Returns the PEBS counters that had records. Lock-free: atomics and
    /// the DS area's memory only.
    ///
    /// The caller is the handler, or the driver with the buffer disarmed
    /// ([`PmiState::arm_buffer`]): one drain at a time.
    pub(super) fn drain_pebs(&self, at_halt: bool, mut f: impl FnMut(Sample<Capture>)) -> u64 {
        let Some(area) = NonNull::new(self.ds.load(Ordering::Acquire)) else {
            return 0;
        };
        let Some(layout) = RecordLayout::unpack(self.layout.load(Ordering::Acquire)) else {
            return 0;
        };
        let pebs = self.pebs.load(Ordering::Acquire);
        let eventing = self.eventing.load(Ordering::Acquire);
        let mut touched = 0u64;
        // One record read over and over: its words past the layout's stay
        // 0, each read writes the layout's.
        let mut record = PebsRecord::empty(layout);
        // SAFETY: only `publish_ds_area` stores the pointer: a DS area the
        // driver owns until it withdraws it, from this logical processor,
        // where the handler runs to completion first; the callers drain
        // one at a time (the driver with the buffer disarmed), and the
        // driver resets the area only with no PEBS counter configured.
        let written = unsafe { ds::written(area, layout.bytes()) };
        for k in 0..written.count() {
            // SAFETY: as above, until the rewind below.
            unsafe { written.read(k, record.words_mut()) };
            if !record.is_valid() {
                add_single_writer(&self.pebs_dropped, 1);
                continue;
            }
            // Formats 1-2 have no exact applicable counters: the driver
            // runs one PEBS counter there, which every record is for.
            let mut counters = if layout.format() < 3 {
                pebs
            } else {
                record.counters().bits() & pebs
            };
            if counters == 0 {
                add_single_writer(&self.pebs_dropped, 1);
                continue;
            }
            while counters != 0 {
                let n = counters.trailing_zeros();
                counters &= counters - 1;
                let i = n as usize % SLOTS;
                let precise = if eventing & 1 << i != 0 {
                    Precise::Zero
                } else {
                    Precise::Constant
                };
                add_single_writer(&self.periods[i], 1);
                if at_halt {
                    add_single_writer(&self.at_halt[i], 1);
                }
                touched |= 1 << i;
                f(Sample::new(n as u8, 1, record.ip(precise)).with_payload(Capture::Pebs(record)));
            }
        }
        // SAFETY: as above.
        unsafe { ds::rewind(area) };
        touched
    }
}

/// The PMI handler (the architectural PMU's part of
/// [`crate::arch::handle_pmi`]): read `IA32_PERF_GLOBAL_STATUS` once,
/// re-arm every armed counter it shows overflowed relative to what the
/// counter holds, hand a [`Sample`] with the interrupted `rip` to `sink`
/// (and, at the PEBS buffer's interrupt, each record drained), acknowledge
/// every overflow found in one `IA32_PERF_GLOBAL_OVF_CTRL` write, then
/// unmask the LVT entry by writing `entry`. See the [module
/// documentation](self) for the traffic.
#[inline]
pub(crate) fn handle_pmi<M: MsrBackend, L: LvtPerfCounterEntry, S: Sink<Capture>>(
    state: &PmiState,
    msr: &mut M,
    lvt: &mut L,
    entry: LvtPerfCounter,
    rip: u64,
    mut sink: S,
) -> Result<PmiOutcome, M::Error> {
    add_single_writer(&state.interrupts, 1);
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
        add_single_writer(&state.spurious, 1);
        return Ok(PmiOutcome {
            overflowed: 0,
            late: false,
        });
    }
    // The usual overflow: fewer than N events past the wrap, one period,
    // re-armed to `preset + raw` (`Rearm::rearm`). Anything else (a stale
    // status bit of a counter not past its overflow, or a counter a period
    // or more past it) hands the rest of the interrupt, from that counter,
    // to the out-of-line `service_out_of_line`, so that the loop keeps no register
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
            return service_out_of_line(
                state,
                backend_for_cold_path(msr),
                lvt,
                entry,
                rip,
                sink,
                rest,
                raw,
            );
        }
        let preset = state.preset[i].load(Ordering::Relaxed);
        msr.write_msr(state.msr[i].load(Ordering::Relaxed), preset + raw)?;
        add_single_writer(&state.periods[i], 1);
        sink(Sample::new(n as u8, 1, rip).with_payload(Capture::None));
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
/// stale status bit), left out of the outcome, a counter that carries the
/// branch records with them (read once, [`read_stack`]); the LBR freeze's
/// bit is acknowledged with the rest (which unfreezes the records); the
/// PEBS buffer's bit, the highest of `rest` when set, drains the buffer
/// ([`PmiState::drain_pebs`]) and acknowledges the PEBS counters' status
/// bits with it; then the interrupt ends as the usual handler ends it,
/// after the legacy freeze's `IA32_DEBUGCTL` write where the LBR runs with
/// it (an interrupt that serviced nothing, a drain of an empty buffer
/// included, counts as spurious). Cold, and only ever the handler's last
/// act.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn service_out_of_line<M: MsrBackend, L: LvtPerfCounterEntry, S: Sink<Capture>>(
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
    let mut overflowed = found & !(BUFFER | FROZEN);
    let mut ack = found;
    let mut first = Some(raw);
    let plan = LbrPlan::from_bits(state.lbr.load(Ordering::Acquire));
    let branches = state.branches.load(Ordering::Acquire);
    // The records, read once for every counter that carries them.
    let mut stack: Option<BranchStack> = None;
    while rest != 0 {
        let n = rest.trailing_zeros();
        rest &= rest - 1;
        let i = n as usize % SLOTS;
        if i == BUFFER_SLOT {
            let pebs = state.pebs.load(Ordering::Acquire);
            ack |= pebs;
            overflowed |= state.drain_pebs(false, &mut sink);
            continue;
        }
        if i == FROZEN_SLOT {
            // The freeze's own bit: nothing to service; acknowledged with
            // the rest, which unfreezes the records.
            continue;
        }
        let raw = match first.take() {
            Some(raw) => raw,
            None => msr.rdpmc(state.ecx[i].load(Ordering::Relaxed))?,
        };
        let rearm = Rearm {
            preset: state.preset[i].load(Ordering::Relaxed),
            n: state.period[i].load(Ordering::Relaxed),
        };
        let (periods, value) = rearm.rearm(raw);
        if periods != 0 {
            msr.write_msr(state.msr[i].load(Ordering::Relaxed), value)?;
            add_single_writer(&state.periods[i], periods);
            let payload = if plan.on() && branches & 1 << i != 0 {
                let records = match stack {
                    Some(records) => records,
                    None => {
                        let mut records = BranchStack::for_plan(plan);
                        read_stack(plan, msr, &mut records)?;
                        stack = Some(records);
                        records
                    }
                };
                Capture::Branches(records)
            } else {
                Capture::None
            };
            sink(Sample::new(n as u8, periods, rip).with_payload(payload));
        } else {
            overflowed &= !(1 << n);
        }
    }
    msr.write_msr(IA32_PERF_GLOBAL_OVF_CTRL, ack)?;
    if plan.on() && plan.legacy_freeze() {
        // The legacy freeze cleared `IA32_DEBUGCTL.LBR`: record again.
        msr.write_msr(IA32_DEBUGCTL, state.debugctl.load(Ordering::Relaxed))?;
    }
    lvt.write_lvt_perf_counter(entry);
    if overflowed == 0 {
        add_single_writer(&state.spurious, 1);
    }
    Ok(PmiOutcome {
        overflowed,
        late: false,
    })
}

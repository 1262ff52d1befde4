//! The NetBurst overflow interrupt path: the state shared between the
//! counter handles and the handler, and the handler routine itself.
//!
//! A kernel calls the crate's one PMI path, [`crate::arch::handle_pmi`],
//! from its interrupt entry for the LVT performance-counter vector (or its
//! NMI handler) with the interrupted RIP and the package's share of the
//! logical processor it runs on ([`super::NetBurstPmu::logical`]); NetBurst's
//! part of it is this module's handler. The routine takes no lock, executes
//! no locked instruction and allocates nothing, so it is safe in an NMI; it
//! touches only atomics in [`PmiState`] (each with one writer), the MSR
//! backend the kernel hands it, and the APIC's LVT entry. The re-arm
//! constants were computed when the counter was configured.
//!
//! Per interrupt it issues exactly (asserted in the tests):
//!
//! | access | count | why |
//! |---|---|---|
//! | RDPMC counter | one per armed counter of this logical processor | the count says whether the counter passed its overflow and how far (see below) |
//! | WRMSR counter | one per overflowed sampling counter | re-arm relative to what it holds: `-N + residual` ([`crate::sampling::SampleAfter::rearm`]); a `FORCE_OVF` counter is not reloaded: the handler accounts its increments since the last service |
//! | WRMSR CCCR | one per overflowed counter | clear the sticky `OVF`: the CCCR image the counter was armed with, which has `OVF` clear |
//! | LVT write | one | NetBurst's APIC masks the entry when it delivers a PMI; it is unmasked only after every `OVF` is clear, or the PMI is raised again (SDM 18.15.5.8, Linux `p4_pmu_handle_irq`) |
//!
//! # Why the counter is read, not the CCCR
//!
//! The handler cannot re-arm without knowing what the counter holds: woken
//! by the counter's own PMI it holds the event that raised the PMI (SDM
//! 18.15.5.8: the manual's `-(N-1)` reload), but woken by another counter's
//! PMI, or by a spurious one, a counter that wrapped on its last event holds
//! 0, and a `-(N-1)` reload would invent an event; an event counting more
//! than once per clock leaves more. So one read per armed counter is
//! unavoidable. Reading the counter instead of the CCCR answers both
//! questions at once: a counter preset to `-N` (`N <= 2^39`) has passed its
//! overflow exactly when [`SampleAfter::split`] finds a completed period, so
//! `OVF` itself need not be read (this also catches an overflow whose `OVF`
//! was not set, the NetBurst erratum Linux guards with its bit-39 check).
//! The per-PMI traffic is the same as reading each CCCR: one read per armed
//! counter, two writes per overflowed one.
//!
//! Linux's handler, for comparison, reads each active counter's CCCR *and*
//! the counter and RDPMCs it (2-3 reads per counter per PMI) and writes the
//! counter twice (erratum N15); see the traffic table in the guide's counters page.
//!
//! A PMI that finds no counter past its overflow is spurious: counted, and
//! the LVT entry is still unmasked. A PMI that races with a halt finds the
//! counter disarmed (the halt has accounted for the period itself, see
//! [`super::driver`]), so it is counted as spurious and nothing is counted
//! twice. A counter serviced before its own PMI arrives (another counter's
//! PMI came first) has its `OVF` cleared with the service; the model then
//! withdraws the PMI it owed (the SDM does not say whether hardware does),
//! and a PMI that comes anyway finds nothing and counts as spurious. Events
//! that arrive between the RDPMC and the counter write are not counted; on
//! the model there are none.
//!
//! # Examples
//!
//! A sampling counter overflows the model into a PMI; the handler re-arms it
//! and hands over the sample:
//!
//! (On a register-level model: a doc test with the `model` feature, ignored without it.)
//!
#![cfg_attr(feature = "model", doc = "```")]
#![cfg_attr(not(feature = "model"), doc = "```ignore")]
//! use pmu::apic::{LvtPerfCounter, LvtPerfCounterEntry, PmiDelivery, Vector};
//! use pmu::arch::handle_pmi;
//! use pmu::arch::netburst::driver::{CounterConfig, NetBurstDriver};
//! use pmu::arch::netburst::pmi::overflow_rule;
//! use pmu::arch::netburst::{Escr, EventSpec, LogicalProcessor, NetBurstPmu};
//! use pmu::model::netburst::{self as model, Config, EventKind, NetBurstModel, Privilege};
//! use pmu::sampling::SampleAfter;
//!
//! struct Lvt;
//! impl LvtPerfCounterEntry for Lvt {
//!     fn write_lvt_perf_counter(&mut self, _: LvtPerfCounter) {}
//! }
//!
//! pmu::owner!(Cpu0);
//! // SAFETY: the one value for this package (the model's).
//! static PACKAGE0: NetBurstPmu = unsafe { NetBurstPmu::new() };
//! let m = NetBurstModel::new(Config::prescott_ht());
//! let cpu = pmu::detect::detect(&m, &mut m.clone())?.usable_netburst().unwrap();
//! let (mut pmu, c) = NetBurstDriver::<Cpu0, _>::take(m, &cpu, &PACKAGE0)?;
//! let spec: EventSpec = "global_power_events:RUNNING:k".parse()?;
//! let every_100 = SampleAfter::new(100, overflow_rule())?;
//! let config = CounterConfig::counting(spec, Escr::FsbEscr0).sampling(every_100);
//! let c0 = c.c0.configure(&mut pmu, &config)?.enable(&mut pmu)?;
//!
//! let running = EventKind::for_spec(&spec, Escr::FsbEscr0).unwrap();
//! pmu.msr().inject(running.on(model::LogicalProcessor::T0, Privilege::Os, 101));
//! assert!(pmu.msr().take_pmi(model::LogicalProcessor::T0).is_some());
//! let entry = LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(0xF0).unwrap()));
//! let mut samples = 0;
//! let t0 = PACKAGE0.logical(LogicalProcessor::T0);
//! let out = handle_pmi(t0, pmu.msr(), &mut Lvt, entry, 0x1000, |_| samples += 1)?;
//! assert_eq!((out.overflowed, samples, PACKAGE0.pmi().periods(0)), (1, 1, 1));
//! assert_eq!(c0.read(&mut pmu)?, every_100.at_residual(1)); // -(N-1): the PMI event counted
//! # Ok::<(), Box<dyn core::error::Error>>(())
//! ```

use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

use super::cccr::CccrValue;
use super::ds::{self, DsManagement, PebsRecord};
use super::msrs::{Cccr, Counter, CounterSet};
use super::thread::LogicalProcessor;
use crate::access::{MsrBackend, MsrOps, backend_for_cold_path};
use crate::apic::{LvtPerfCounter, LvtPerfCounterEntry};
use crate::sampling::{
    OverflowRule, PmiOutcome, Rearm, Sample, SampleAfter, Sink, add_single_writer,
};

const COUNTERS: usize = 18;

/// What a NetBurst overflow captured besides its counter, periods and IP
/// (NetBurst's [`crate::arch::Architecture::Payload`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Capture {
    /// Nothing: a sampling counter's overflow, at the interrupted IP.
    #[default]
    None,
    /// A PEBS record the handler drained from the DS buffer (one period of
    /// the PEBS counter, at the record's precise RIP: the sample's `rip`),
    /// with RFLAGS and the general registers as the assist saved them
    /// (SDM 18.15.7).
    Pebs(PebsRecord),
}

impl Capture {
    /// The PEBS record, if this is one.
    pub const fn pebs(&self) -> Option<&PebsRecord> {
        match self {
            Capture::Pebs(r) => Some(r),
            Capture::None => None,
        }
    }
}

/// Entries of each per-counter array: one per bit of the armed word.
const SLOTS: usize = 64;

/// How a NetBurst counter overflows: 40 bits wide, and the PMI comes with
/// the event after the overflow (SDM 18.15.5.8). The Itanium counterpart,
/// `arch::itanium::pmi::overflow_rule`, takes the generation.
pub const fn overflow_rule() -> OverflowRule {
    OverflowRule {
        width: 40,
        pmi_delay: 1,
    }
}

/// What the handler needs of the sampling counters, one array per field,
/// each indexed by the counter's bit in the armed word (so 64 entries, 18
/// used: the handler indexes with the bit number, no bounds check, no
/// multiplication, and the compiler, not knowing the number below 32,
/// computes the CCCR's MSR number with one `lea`): the
/// re-arm constants and CCCR image, set when a counter is configured and
/// armed, and the period counts, which only the handler of the counter's
/// logical processor (and a halt, which disarms it first) writes.
struct PerCounter {
    preset: [AtomicU64; SLOTS],
    n: [AtomicU64; SLOTS],
    /// CCCR images: 32 bits, bits 63:32 being reserved (SDM's CCCR figure;
    /// [`CccrValue`] keeps them zero), so the handler's WRMSR gives EDX = 0
    /// without computing it.
    cccr: [AtomicU32; SLOTS],
    periods: [AtomicU64; SLOTS],
    /// `FORCE_OVF` counters: the count at the last service.
    last: [AtomicU64; SLOTS],
}

/// What one logical processor's handler writes and reads: its own lines.
#[repr(C, align(64))]
struct PerThread {
    /// The armed counters, as counter bits: sampling counters and
    /// `FORCE_OVF` counters (an overflow on every increment, SDM
    /// 18.15.5.5, serviced by accounting the increments since the last
    /// service, without a reload; their preset is [`FORCED`]); and
    /// [`PEBS_ARMED`]. The usual handler visits its counters as listed in
    /// [`PerThread::list`], and reads the word itself only out of line
    /// ([`service_out_of_line`]); a `FORCE_OVF` counter costs the usual handler
    /// nothing (its preset sends it out of line).
    armed: AtomicU64,
    interrupts: AtomicU64,
    spurious: AtomicU64,
    /// The DS save area the driver serving this logical processor installed
    /// (null while none is): its management area, which also says where the
    /// records are and how many fit, so one atomic publishes the whole area.
    ds: AtomicPtr<DsManagement>,
    /// How many counters of [`PerThread::list`] the handler's loop visits:
    /// the counters of `armed` when it has some and not [`PEBS_ARMED`]; 0
    /// otherwise (nothing armed, or the DS buffer to drain), and while the
    /// driver rewrites the list ([`PmiState::change_armed`]): the handler
    /// then goes out of line, where it reads `armed` ([`service_out_of_line`]).
    /// Every value ever stored here is below 64 (`armed` has at most 63
    /// counter bits), whatever the interleaving of the stores.
    count: AtomicU32,
    /// The armed counters' numbers (a copy of `armed`'s counter bits, for
    /// the loop), the lowest at `list[count]` down to the highest at
    /// `list[1]`, so that the handler's loop counts down to 0: one load,
    /// one decrement and one branch per counter (a bit scan of the word
    /// takes a scan, a copy of the number, and three to clear the bit and
    /// branch).
    /// 64-bit entries, so that the number needs no widening to index the
    /// per-counter arrays. Every value ever stored here is below 63 (a
    /// counter bit of `armed`), so the handler indexes the 64-entry
    /// per-counter arrays with it unchecked ([`slot`]). 64 entries (512
    /// bytes per logical processor, 19 used), indexed by `count` without a
    /// bounds check.
    list: [AtomicU64; SLOTS],
}

/// The bit of `PerThread::armed` that says the logical processor's PEBS
/// counter runs: the handler drains its DS buffer (out of line:
/// `PerThread::count` is 0 while it is set). The sign bit, so that the
/// driver, listing the counters, tests it with the word's zero test.
const PEBS_ARMED: u64 = 1 << 63;

/// The preset of an armed `FORCE_OVF` counter, in place of a sampling
/// counter's `2^40 - N`: `2^40`. Every raw value (below `2^40`) is below
/// it, so the handler finds the counter past its overflow, and `2^40 +
/// raw` has bit 40 set, so the handler takes it for a counter more than a
/// period past its overflow and services it out of line, where this value
/// tells the two apart ([`service_out_of_line`]). No sampling counter has it
/// (`N >= 1`).
const FORCED: u64 = WRAP;

/// `2^40`, the counters' range.
const WRAP: u64 = 1 << overflow_rule().width;

/// State shared by the counter handles (through the driver) and the
/// interrupt handler: atomics only, no lock. One per package, inside its
/// [`NetBurstPmu`](super::NetBurstPmu) ([`NetBurstPmu::pmi`](super::NetBurstPmu::pmi)).
///
/// # No locked instruction in the handler
///
/// Every location the handler writes has one writer at a time, so the
/// handler updates it with a plain load and store (no `lock` prefix, which
/// costs on the order of a hundred cycles on a Pentium 4): a logical
/// processor's interrupt and spurious counts are written only by that
/// processor's handler, and a counter's periods only by the handler of the
/// logical processor the counter interrupts, or by the driver halting the
/// counter after disarming it. The driver must not be interrupted by the
/// handler in the middle of an operation on the same counter from another
/// CPU; a kernel runs the driver and the handler for one logical processor
/// on that processor's CPU, where the handler runs to completion before the
/// interrupted driver resumes. (Were the rule broken, a count could be
/// wrong, never memory: the locations are atomics.)
pub struct PmiState {
    thread: [PerThread; 2],
    slot: PerCounter,
    at_halt: [AtomicU64; COUNTERS],
}

impl core::fmt::Debug for PmiState {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PmiState")
            .field("armed_t0", &self.armed(LogicalProcessor::T0))
            .field("armed_t1", &self.armed(LogicalProcessor::T1))
            .finish_non_exhaustive()
    }
}

impl PmiState {
    /// Nothing armed (made by [`super::NetBurstPmu::new`]).
    #[allow(clippy::declare_interior_mutable_const)]
    pub(super) const fn new() -> Self {
        const Z64: AtomicU64 = AtomicU64::new(0);
        const Z32: AtomicU32 = AtomicU32::new(0);

        const THREAD: PerThread = PerThread {
            armed: AtomicU64::new(0),
            interrupts: Z64,
            spurious: Z64,
            ds: AtomicPtr::new(core::ptr::null_mut()),
            count: AtomicU32::new(0),
            list: [const { AtomicU64::new(0) }; SLOTS],
        };
        PmiState {
            thread: [THREAD; 2],
            slot: PerCounter {
                preset: [Z64; SLOTS],
                n: [Z64; SLOTS],
                cccr: [Z32; SLOTS],
                periods: [Z64; SLOTS],
                last: [Z64; SLOTS],
            },
            at_halt: [Z64; COUNTERS],
        }
    }

    /// Counters whose overflow interrupts `lp` and that are counting.
    pub fn armed(&self, lp: LogicalProcessor) -> CounterSet {
        let t = &self.thread[lp as usize];
        CounterSet::from_bits_truncate(t.armed.load(Ordering::Acquire) as u32)
    }

    /// Sample-after periods of counter `c` completed since it was configured:
    /// serviced by the handler or found by a halt.
    ///
    /// `n` is the counter number, as a handle's `INDEX` (`c12` is 12); the
    /// same form as the Itanium `PmiState`. 0 for a number with no counter.
    pub fn periods(&self, n: u8) -> u64 {
        match self.slot.periods.get(usize::from(n)) {
            Some(p) if usize::from(n) < COUNTERS => p.load(Ordering::Acquire),
            _ => 0,
        }
    }

    /// Of [`PmiState::periods`], those a halt found (the counter overflowed
    /// and the halt cleared `OVF` before the PMI was taken). They have no
    /// interrupted RIP, so they are not in any sample buffer.
    pub fn periods_at_halt(&self, n: u8) -> u64 {
        self.at_halt
            .get(usize::from(n))
            .map_or(0, |p| p.load(Ordering::Acquire))
    }

    /// PMIs handled on `lp`.
    pub fn interrupts(&self, lp: LogicalProcessor) -> u64 {
        self.thread[lp as usize].interrupts.load(Ordering::Relaxed)
    }

    /// PMIs on `lp` that found no overflowed counter.
    pub fn spurious(&self, lp: LogicalProcessor) -> u64 {
        self.thread[lp as usize].spurious.load(Ordering::Relaxed)
    }

    /// Counter `n` is (re)configured: its re-arm constants, computed here
    /// once, and no periods yet.
    pub(super) fn set_sampling(&self, n: u8, s: Option<SampleAfter>) {
        let n = usize::from(n);
        let r = s.map_or(Rearm::default(), SampleAfter::rearm_constants);
        self.slot.preset[n].store(r.preset, Ordering::Release);
        self.slot.n[n].store(r.n, Ordering::Release);
        self.slot.periods[n].store(0, Ordering::Release);
        self.slot.last[n].store(0, Ordering::Release);
        self.at_halt[n].store(0, Ordering::Release);
    }

    /// Arm counter `n` for `lp`'s handler: a sampling counter, or with
    /// `forced` a `FORCE_OVF` one; `cccr` is the image it runs with, which
    /// the handler writes back to clear `OVF`.
    pub(super) fn arm(&self, lp: LogicalProcessor, c: Counter, cccr: CccrValue, forced: bool) {
        // CccrValue's reserved bits 63:32 are zero by construction.
        let i = usize::from(c.index());
        self.slot.cccr[i].store(cccr.bits() as u32, Ordering::Release);
        if forced {
            // Configured without sampling: the preset was 0 (not sampling);
            // `set_sampling` replaces this one when the counter is
            // configured again.
            self.slot.preset[i].store(FORCED, Ordering::Release);
        }
        let set = CounterSet::EMPTY.with(c).bits();
        self.change_armed(lp, |armed| armed.fetch_or(u64::from(set), Ordering::AcqRel));
    }

    /// Changes `lp`'s armed word with `change` and lists its counters again
    /// for the handler ([`PerThread::list`]). Called only by the driver
    /// serving `lp`, on `lp`'s CPU (one writer), where the handler may
    /// interrupt it but runs to completion first: the count is 0 from
    /// before the change to after the list is whole, so an interrupting
    /// handler reads the armed word (before or after the change, as it
    /// would without the list) or the whole list, never a part of it.
    fn change_armed(&self, lp: LogicalProcessor, change: impl FnOnce(&AtomicU64) -> u64) {
        let t = &self.thread[lp as usize];
        t.count.store(0, Ordering::Release);
        change(&t.armed);
        let armed = t.armed.load(Ordering::Acquire);
        if armed as i64 <= 0 {
            // Nothing armed, or PEBS: the handler goes out of line.
            return;
        }
        let mut k = 0;
        let mut rest = armed;
        // Highest first, so that the handler, counting down, visits the
        // lowest first (the order of the register traffic).
        while rest != 0 {
            let n = 63 - rest.leading_zeros();
            rest &= !(1 << n);
            k += 1;
            if let Some(e) = t.list.get(k) {
                e.store(u64::from(n), Ordering::Relaxed);
            }
        }
        // At most 64 bits armed, so `k` fits.
        t.count.store(k as u32, Ordering::Release);
    }

    /// The counters `lp`'s handler visits in its loop, in order (none when
    /// it goes out of line at once).
    #[cfg(test)]
    pub(super) fn listed(&self, lp: LogicalProcessor) -> std::vec::Vec<u8> {
        let t = &self.thread[lp as usize];
        let count = t.count.load(Ordering::Acquire) as usize;
        (1..=count)
            .rev()
            .map(|k| t.list[k].load(Ordering::Relaxed) as u8)
            .collect()
    }

    /// Leaves `lp`'s list as [`PmiState::change_armed`] leaves it while it
    /// rewrites it (count 0) until the next change: what a handler that
    /// interrupts the driver there finds.
    #[cfg(test)]
    pub(super) fn interrupt_listing(&self, lp: LogicalProcessor) {
        self.thread[lp as usize].count.store(0, Ordering::Release);
    }

    /// A `FORCE_OVF` counter `n` (disarmed) holds `raw`: the increments
    /// since it was last serviced, now accounted as serviced.
    pub(super) fn forced_increments(&self, n: u8, raw: u64) -> u64 {
        let last = &self.slot.last[usize::from(n) % SLOTS];
        let owed = raw.wrapping_sub(last.load(Ordering::Relaxed)) & overflow_rule().mask();
        last.store(raw, Ordering::Relaxed);
        owed
    }

    pub(super) fn disarm(&self, lp: LogicalProcessor, c: Counter) {
        let set = CounterSet::EMPTY.with(c).bits();
        self.change_armed(lp, |armed| {
            armed.fetch_and(!u64::from(set), Ordering::AcqRel)
        });
    }

    /// Publishes the DS save area the driver serving `lp` installed (or
    /// `None`: withdraws it), for the handler to drain.
    ///
    /// # Safety
    ///
    /// `area` is the management area of a [`ds::DsArea`] that the caller,
    /// the driver serving `lp`, owns and keeps until it publishes `None`
    /// here, from `lp`'s CPU (where `lp`'s handler runs, so no handler is
    /// draining the area when it is withdrawn).
    pub(super) unsafe fn publish_ds_area(
        &self,
        lp: LogicalProcessor,
        area: Option<NonNull<DsManagement>>,
    ) {
        let ptr = area.map_or(core::ptr::null_mut(), NonNull::as_ptr);
        self.thread[lp as usize].ds.store(ptr, Ordering::Release);
    }

    /// Drains `lp`'s DS buffer into `f`, one period of its PEBS counter per
    /// record (see [`service_out_of_line`] for the handler's own drain).
    pub(super) fn drain_pebs(&self, lp: LogicalProcessor, f: impl FnMut(&PebsRecord)) -> u32 {
        let Some(area) = NonNull::new(self.thread[lp as usize].ds.load(Ordering::Acquire)) else {
            return 0;
        };
        // SAFETY: only `publish_ds_area` stores the pointer: a DS area that
        // the driver serving `lp` owns until it withdraws it, from `lp`'s CPU,
        // where this handler runs to completion first.
        let records = unsafe { ds::drain_published(area, f) };
        add_single_writer(
            &self.slot.periods[usize::from(Counter::pebs_for(lp).index())],
            u64::from(records),
        );
        records
    }

    /// `lp`'s PEBS counter runs (or not): the handler drains the DS buffer.
    pub(super) fn arm_pebs(&self, lp: LogicalProcessor, on: bool) {
        self.change_armed(lp, |armed| {
            if on {
                armed.fetch_or(PEBS_ARMED, Ordering::AcqRel)
            } else {
                armed.fetch_and(!PEBS_ARMED, Ordering::AcqRel)
            }
        });
    }

    /// A halt found `periods` owed by disarmed counter `n`.
    pub(super) fn add_halt_periods(&self, n: u8, periods: u64) {
        add_single_writer(&self.slot.periods[usize::from(n)], periods);
        add_single_writer(&self.at_halt[usize::from(n)], periods);
    }
}

/// The PMI handler for logical processor `lp` (NetBurst's part of
/// [`crate::arch::handle_pmi`]): find the armed counters that passed their
/// overflow, re-arm each relative to what it holds, clear its `OVF`, hand a
/// [`Sample`] with the interrupted `ip` to `sink` (and each PEBS record
/// drained, [`Capture::Pebs`]), then unmask the LVT entry by writing
/// `entry`.
/// Returns what it found; a PMI without any overflow is counted as
/// spurious. See the [module documentation](self) for the traffic and why
/// it is exact.
///
/// Per armed counter the handler does nothing beyond its RDPMC and a
/// comparison with the preset computed at configure time ([`Rearm`]), all
/// a counter not past its overflow costs (every armed counter but the one
/// that interrupted, usually); for one past it, the reload `preset + raw`
/// and a test of its bit 40 (clear: fewer than `N` events past the
/// overflow, the usual case), the two writes, its period count and the
/// sample. A counter a period or more past its overflow, a `FORCE_OVF`
/// counter and the PEBS buffer are left to an out-of-line continuation of
/// the handler. It executes no locked instruction ([`PmiState`]).
///
/// If a register access fails (only a model can fail), the handler stops and
/// returns the error with the LVT entry still masked.
#[inline]
pub(crate) fn handle_pmi<M: MsrBackend, L: LvtPerfCounterEntry, S: Sink<Capture>>(
    state: &PmiState,
    lp: LogicalProcessor,
    msr: &mut M,
    lvt: &mut L,
    entry: LvtPerfCounter,
    rip: u64,
    mut sink: S,
) -> Result<PmiOutcome, M::Error> {
    let thread = &state.thread[lp as usize];
    add_single_writer(&thread.interrupts, 1);
    let count = thread.count.load(Ordering::Acquire);
    // The PEBS buffer to drain (rare), nothing armed, or the driver
    // interrupted while it lists the counters: the whole handler out of
    // line, from the armed word.
    if count == 0 {
        return service_out_of_line(
            state,
            lp,
            backend_for_cold_path(msr),
            lvt,
            entry,
            rip,
            sink,
            0,
            0,
            0,
        );
    }
    let mut overflowed = 0u32;
    let mut k = count as usize;
    // A loop tested at its end: one branch per counter.
    loop {
        // SAFETY: `k` is 1 to 63 here and every list entry below 64
        // (`PerThread::list`).
        unsafe { core::hint::assert_unchecked(k < SLOTS) };
        // Below `SLOTS` (`PerThread::list`), not told to the compiler:
        // knowing it, it builds `0x300 + n` with `mov` and `or`, not `lea`.
        let n = thread.list[k].load(Ordering::Relaxed) as usize;
        let raw = msr.rdpmc(n as u32)?;
        // `Rearm::rearm`, in the order the usual interrupt wants (the
        // guide's performance page): a counter not past its
        // overflow, as all but the interrupting one usually are, costs
        // one comparison; the usual overflow (fewer than N events past
        // it: one period) a bit test of the reload it computes anyway.
        // A whole period or more past it (rare, and a `FORCE_OVF`
        // counter's every service) leaves this loop for the out-of-line
        // handler, which goes on from here and ends the interrupt; so
        // nothing of the rare cases takes a register here.
        // SAFETY: `n` is a list entry, below `SLOTS`.
        let preset = unsafe { slot(&state.slot.preset, n) }.load(Ordering::Relaxed);
        if raw >= preset {
            // Not past its overflow (or not sampling: preset 0). Not cold,
            // but the hint lays the overflow's service out to fall through
            // into the loop's test, which this branch jumps to directly:
            // no jump is added to either path.
            core::hint::cold_path();
        } else {
            // Past the overflow: `raw < preset < 2^40`, so `reload <
            // 2^41`, and its bit 40 is clear exactly when `raw < N`
            // (`preset = 2^40 - N`).
            let reload = raw + preset;
            if reload & WRAP != 0 {
                // `list[k]` is `n`, the counters left `list[k - 1]` down
                // to `list[1]`.
                return service_out_of_line(
                    state,
                    lp,
                    backend_for_cold_path(msr),
                    lvt,
                    entry,
                    rip,
                    sink,
                    reload,
                    k,
                    overflowed,
                );
            }
            // SAFETY: as above.
            unsafe { service(state, msr, &mut sink, n, 1, reload, rip) }?;
            overflowed |= 1 << (n % 32);
        }
        k -= 1;
        if k == 0 {
            break;
        }
    }
    Ok(finish(thread, lvt, entry, overflowed))
}

/// The end of every interrupt: a PMI that found nothing is counted as
/// spurious, and the LVT entry is unmasked (after every `OVF` was cleared).
#[inline(always)]
fn finish<L: LvtPerfCounterEntry>(
    thread: &PerThread,
    lvt: &mut L,
    entry: LvtPerfCounter,
    overflowed: u32,
) -> PmiOutcome {
    if overflowed == 0 {
        add_single_writer(&thread.spurious, 1);
    }
    lvt.write_lvt_perf_counter(entry);
    PmiOutcome {
        // Bits of armed counters (`armed` less `PEBS_ARMED`, the PEBS
        // counters' bits): counters only.
        overflowed: u64::from(CounterSet::from_counter_bits(overflowed).bits()),
        late: false,
    }
}

/// One overflowed sampling counter `n` that completed `periods`: reload it
/// with `reload`, clear its `OVF` with its CCCR image, count the periods and
/// hand the sample to the sink.
///
/// # Safety
///
/// `n < SLOTS`: it indexes the per-counter arrays unchecked.
#[inline(always)]
unsafe fn service<M: MsrBackend, S: Sink<Capture>>(
    state: &PmiState,
    msr: &mut M,
    sink: &mut S,
    n: usize,
    periods: u64,
    reload: u64,
    rip: u64,
) -> Result<(), M::Error> {
    msr.write_msr(Counter::MSR_BASE + n as u32, reload)?;
    // SAFETY: `n < SLOTS` (the caller's promise).
    let cccr = unsafe { slot(&state.slot.cccr, n) }.load(Ordering::Relaxed);
    msr.write_msr(Cccr::MSR_BASE + n as u32, u64::from(cccr))?;
    // SAFETY: as above.
    add_single_writer(unsafe { slot(&state.slot.periods, n) }, 1);
    sink(Sample::new(n as u8, periods, rip).with_payload(Capture::None));
    Ok(())
}

/// `array[n]`, unchecked: the handler's loop takes `n` from
/// [`PerThread::list`], whose entries are all below `SLOTS`, but a bounds
/// check or a mask would cost an instruction per use, and telling the
/// compiler the bound costs one per counter elsewhere.
///
/// # Safety
///
/// `n < SLOTS`.
#[inline(always)]
unsafe fn slot<T>(array: &[T; SLOTS], n: usize) -> &T {
    // SAFETY: `n < SLOTS` (the caller's promise), so the element is in
    // `array`. Not `get_unchecked`, which tells the compiler the bound.
    unsafe { &*array.as_ptr().add(n) }
}

/// The rest of the handler, out of line, from the first thing the usual
/// loop leaves to it: the counter at `list[k]` (`at`), which the loop found
/// past its overflow with `reload = preset + raw` and its bit 40 set (the
/// counters left, `rest`, are those of `list[k]` down to `list[1]`), or,
/// with `reload` 0, everything (`rest` the armed word: [`PEBS_ARMED`] set,
/// nothing armed, or the list being rewritten). For each counter of `rest`
/// (after `at`'s), the usual per-counter service, and for the rare cases:
///
/// - a sampling counter a whole period or more past its overflow: the
///   periods completed, by division ([`Rearm::rearm`]), and the same two
///   writes;
/// - a `FORCE_OVF` counter (preset [`FORCED`]; SDM 18.15.5.5: every
///   increment is an overflow): the increments since its last service are
///   accounted and its `OVF` cleared with the CCCR image, without a reload
///   (1 RDPMC, and 1 WRMSR when it incremented);
/// - with [`PEBS_ARMED`], the DS buffer of `lp` last: every record in it to
///   the sink, one period of the PEBS counter each, and the PEBS index
///   rewound (memory only, no register access; the assist reloaded the
///   counter itself, SDM 18.15.7).
///
/// Then it ends the interrupt as the usual handler does. Cold, and called
/// only as the handler's last act, so that the usual loop keeps no register
/// for the rare cases, only the arguments it passes on; neither `at` nor
/// `rest` is one of them (both come from the list and `k`), and a
/// zero-sized backend is passed as a reference of its own
/// ([`backend_for_cold_path`]), so that the loop needs one callee-saved register,
/// not two.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn service_out_of_line<M: MsrBackend, L: LvtPerfCounterEntry, S: Sink<Capture>>(
    state: &PmiState,
    lp: LogicalProcessor,
    msr: &mut M,
    lvt: &mut L,
    entry: LvtPerfCounter,
    rip: u64,
    mut sink: S,
    reload: u64,
    k: usize,
    mut overflowed: u32,
) -> Result<PmiOutcome, M::Error> {
    let thread = &state.thread[lp as usize];
    let rest = if reload == 0 {
        thread.armed.load(Ordering::Acquire)
    } else {
        // The counters the loop had left, `list[k]` (the one it hands
        // over) down to `list[1]`: counter bits only.
        thread.list[..=k % SLOTS]
            .iter()
            .skip(1)
            .fold(0, |rest, n| rest | 1 << (n.load(Ordering::Relaxed) % 64))
    };
    let at = rest.trailing_zeros() % 32;
    if reload != 0 {
        // `raw` again, from the preset the loop added to it.
        let preset = state.slot.preset[at as usize % SLOTS].load(Ordering::Relaxed);
        overflowed |= service_any(state, msr, &mut sink, at, reload.wrapping_sub(preset), rip)?;
    }
    let mut counters = rest & !PEBS_ARMED;
    if reload != 0 {
        // `at`, its lowest bit, is done.
        counters &= counters - 1;
    }
    while counters != 0 {
        let n = counters.trailing_zeros() % 32;
        counters &= counters - 1;
        let raw = msr.rdpmc(n)?;
        overflowed |= service_any(state, msr, &mut sink, n, raw, rip)?;
    }
    if rest & PEBS_ARMED != 0 {
        let n = Counter::pebs_for(lp).index();
        let drained = state.drain_pebs(lp, |r| {
            sink(Sample::new(n, 1, r.rip).with_payload(Capture::Pebs(*r)));
        });
        if drained > 0 {
            overflowed |= 1 << n;
        }
    }
    Ok(finish(&state.thread[lp as usize], lvt, entry, overflowed))
}

/// [`service_out_of_line`]'s service of counter `n` that holds `raw`, whatever it
/// is: its bit if it overflowed.
#[inline(always)]
fn service_any<M: MsrBackend, S: Sink<Capture>>(
    state: &PmiState,
    msr: &mut M,
    sink: &mut S,
    n: u32,
    raw: u64,
    rip: u64,
) -> Result<u32, M::Error> {
    // The callers' `n` are below 32 already; masked for `service`.
    let n = n % SLOTS as u32;
    let i = n as usize;
    let preset = state.slot.preset[i].load(Ordering::Relaxed);
    if preset == FORCED {
        let last = state.slot.last[i].load(Ordering::Relaxed);
        let increments = raw.wrapping_sub(last) & overflow_rule().mask();
        if increments == 0 {
            return Ok(0);
        }
        state.slot.last[i].store(raw, Ordering::Relaxed);
        msr.write_msr(
            Cccr::MSR_BASE + n,
            u64::from(state.slot.cccr[i].load(Ordering::Relaxed)),
        )?;
        add_single_writer(&state.slot.periods[i], increments);
        sink(Sample::new(n as u8, increments, rip).with_payload(Capture::None));
        return Ok(1 << (n % 32));
    }
    let rearm = Rearm {
        preset,
        n: state.slot.n[i].load(Ordering::Relaxed),
    };
    let (periods, reload) = rearm.rearm(raw);
    if periods == 0 {
        return Ok(0);
    }
    // The periods beyond the one `service` counts.
    add_single_writer(&state.slot.periods[i], periods - 1);
    // SAFETY: `n < SLOTS`, masked above.
    unsafe { service(state, msr, sink, i, periods, reload, rip) }?;
    Ok(1 << (n % 32))
}

//! The NetBurst overflow interrupt path: the state shared between the
//! counter handles and the handler, and the handler routine itself.
//!
//! A kernel calls [`handle_pmi`] from its interrupt entry for the LVT
//! performance-counter vector (or its NMI handler) with the interrupted RIP.
//! The routine takes no lock and allocates nothing, so it is safe in an NMI;
//! it touches only atomics in [`PmiState`], the MSR backend the kernel hands
//! it, and the APIC's LVT entry.
//!
//! Per interrupt it issues exactly (asserted in the tests):
//!
//! | access | count | why |
//! |---|---|---|
//! | RDPMC counter | one per armed counter of this logical processor | the count says whether the counter passed its overflow and how far (see below) |
//! | WRMSR counter | one per overflowed counter | re-arm relative to what it holds: `-N + residual` ([`crate::sampling::SampleAfter::rearm`]) |
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
//! counter twice (erratum N15); see the README's traffic table.
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
//! ```
//! use pmu::apic::{LvtPerfCounter, LvtPerfCounterEntry, PmiDelivery, Vector};
//! use pmu::arch::netburst::driver::{CounterConfig, NetBurstDriver};
//! use pmu::arch::netburst::pmi::{PmiState, handle_pmi, overflow_rule};
//! use pmu::arch::netburst::{Escr, EventSpec, LogicalProcessor};
//! use pmu::model::netburst::{self as model, Config, EventKind, NetBurstModel, Privilege};
//! use pmu::sampling::SampleAfter;
//!
//! struct Lvt;
//! impl LvtPerfCounterEntry for Lvt {
//!     fn write_lvt_perf_counter(&mut self, _: LvtPerfCounter) {}
//! }
//!
//! pmu::owner!(Package0);
//! static PMI: PmiState = PmiState::new();
//! let m = NetBurstModel::new(Config::prescott_ht());
//! let cpu = pmu::detect::detect(&m, &mut m.clone())?.usable_netburst().unwrap();
//! let (mut pmu, c) = NetBurstDriver::<Package0, _>::take(m, &cpu, &PMI)?;
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
//! let out = handle_pmi(&PMI, LogicalProcessor::T0, pmu.msr(), &mut Lvt, entry, 0x1000, |_| samples += 1)?;
//! assert_eq!((out.overflowed.len(), samples, PMI.periods(0)), (1, 1, 1));
//! assert_eq!(c0.read(&mut pmu)?, every_100.at_residual(1)); // -(N-1): the PMI event counted
//! # Ok::<(), Box<dyn core::error::Error>>(())
//! ```

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::cccr::CccrValue;
use super::msrs::{Counter, CounterSet};
use super::thread::LogicalProcessor;
use crate::access::MsrAccess;
use crate::apic::{LvtPerfCounter, LvtPerfCounterEntry};
use crate::sampling::{OverflowRule, Sample, SampleAfter};

const COUNTERS: usize = 18;

/// How a NetBurst counter overflows: 40 bits wide, and the PMI comes with
/// the event after the overflow (SDM 18.15.5.8). The Itanium counterpart,
/// `arch::itanium::pmi::overflow_rule`, takes the generation.
pub const fn overflow_rule() -> OverflowRule {
    OverflowRule {
        width: 40,
        pmi_delay: 1,
    }
}

/// State shared by the counter handles (through the driver) and the
/// interrupt handler: atomics only, so it can live in a `static`.
pub struct PmiState {
    armed: [AtomicU32; 2],
    sample_after: [AtomicU64; COUNTERS],
    /// The CCCR image each armed counter runs with (`OVF` clear).
    cccr: [AtomicU64; COUNTERS],
    periods: [AtomicU64; COUNTERS],
    at_halt: [AtomicU64; COUNTERS],
    interrupts: [AtomicU64; 2],
    spurious: [AtomicU64; 2],
}

impl Default for PmiState {
    fn default() -> Self {
        Self::new()
    }
}

/// What one call of [`handle_pmi`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PmiOutcome {
    /// The counters that had overflowed and were serviced.
    pub overflowed: CounterSet,
}

impl PmiOutcome {
    /// No counter had overflowed.
    pub const fn is_spurious(self) -> bool {
        self.overflowed.is_empty()
    }
}

impl PmiState {
    /// Nothing armed.
    #[allow(clippy::declare_interior_mutable_const)]
    pub const fn new() -> Self {
        const Z32: AtomicU32 = AtomicU32::new(0);
        const Z64: AtomicU64 = AtomicU64::new(0);
        PmiState {
            armed: [Z32; 2],
            sample_after: [Z64; COUNTERS],
            cccr: [Z64; COUNTERS],
            periods: [Z64; COUNTERS],
            at_halt: [Z64; COUNTERS],
            interrupts: [Z64; 2],
            spurious: [Z64; 2],
        }
    }

    /// Counters whose overflow interrupts `lp` and that are counting.
    pub fn armed(&self, lp: LogicalProcessor) -> CounterSet {
        CounterSet::from_bits_truncate(self.armed[lp as usize].load(Ordering::Acquire))
    }

    /// Sample-after periods of counter `c` completed since it was configured:
    /// serviced by the handler or found by a halt.
    ///
    /// `n` is the counter number, as a handle's `INDEX` (`c12` is 12); the
    /// same form as the Itanium `PmiState`. 0 for a number with no counter.
    pub fn periods(&self, n: u8) -> u64 {
        self.periods
            .get(usize::from(n))
            .map_or(0, |p| p.load(Ordering::Acquire))
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
        self.interrupts[lp as usize].load(Ordering::Relaxed)
    }

    /// PMIs on `lp` that found no overflowed counter.
    pub fn spurious(&self, lp: LogicalProcessor) -> u64 {
        self.spurious[lp as usize].load(Ordering::Relaxed)
    }

    pub(super) fn set_sampling(&self, n: u8, s: Option<SampleAfter>) {
        let n = usize::from(n);
        self.sample_after[n].store(s.map_or(0, SampleAfter::get), Ordering::Release);
        self.periods[n].store(0, Ordering::Release);
        self.at_halt[n].store(0, Ordering::Release);
    }

    /// Arm counter `n` for `lp`'s handler; `cccr` is the image it runs with,
    /// which the handler writes back to clear `OVF`.
    pub(super) fn arm(&self, lp: LogicalProcessor, c: Counter, cccr: CccrValue) {
        self.cccr[usize::from(c.index())].store(cccr.bits(), Ordering::Release);
        let set = CounterSet::EMPTY.with(c);
        self.armed[lp as usize].fetch_or(set.bits(), Ordering::AcqRel);
    }

    pub(super) fn disarm(&self, lp: LogicalProcessor, c: Counter) {
        let set = CounterSet::EMPTY.with(c);
        self.armed[lp as usize].fetch_and(!set.bits(), Ordering::AcqRel);
    }

    pub(super) fn add_halt_periods(&self, n: u8, periods: u64) {
        self.periods[usize::from(n)].fetch_add(periods, Ordering::AcqRel);
        self.at_halt[usize::from(n)].fetch_add(periods, Ordering::AcqRel);
    }
}

/// The PMI handler for logical processor `lp`: find the armed counters that
/// passed their overflow, re-arm each relative to what it holds, clear its
/// `OVF`, hand a [`Sample`] with the interrupted `rip` to `sink`, then unmask
/// the LVT entry by writing `entry` (which should be unmasked). Returns what it
/// found; a PMI without any overflow is counted as spurious. See the
/// [module documentation](self) for the traffic and why it is exact.
///
/// If a register access fails (only a model can fail), the handler stops and
/// returns the error with the LVT entry still masked.
pub fn handle_pmi<M: MsrAccess, L: LvtPerfCounterEntry>(
    state: &PmiState,
    lp: LogicalProcessor,
    msr: &mut M,
    lvt: &mut L,
    entry: LvtPerfCounter,
    rip: u64,
    mut sink: impl FnMut(Sample),
) -> Result<PmiOutcome, M::Error> {
    let t = lp as usize;
    state.interrupts[t].fetch_add(1, Ordering::Relaxed);
    let mut overflowed = CounterSet::EMPTY;
    for counter in state.armed(lp).iter() {
        let n = usize::from(counter.index());
        let sample_after = state.sample_after[n].load(Ordering::Acquire);
        if sample_after == 0 {
            continue;
        }
        // Checked when the counter was configured.
        let s = SampleAfter::trusted(sample_after, overflow_rule());
        let (periods, value) = s.rearm(msr.read_pmc(u32::from(counter.index()))?);
        if periods == 0 {
            continue;
        }
        msr.write_msr(counter.msr(), value)?;
        msr.write_msr(counter.cccr().msr(), state.cccr[n].load(Ordering::Acquire))?;
        state.periods[n].fetch_add(periods, Ordering::AcqRel);
        overflowed = overflowed.with(counter);
        sink(Sample {
            counter: counter.index(),
            periods: u32::try_from(periods).unwrap_or(u32::MAX),
            rip,
        });
    }
    if overflowed.is_empty() {
        state.spurious[t].fetch_add(1, Ordering::Relaxed);
    }
    lvt.write_lvt_perf_counter(entry);
    Ok(PmiOutcome { overflowed })
}

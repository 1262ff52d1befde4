//! The real-PMU cases themselves, generic over the [`Bench`] they run on.
//! Each takes the bench's driver afresh through the crate's seam, counts
//! [`ITERATIONS`] iterations of the loop ([`super::workload`]) on the
//! counter the bench names, records what it measured and the bound
//! ([`measured`]), releases whatever it claimed and gives the driver back,
//! whether it passed or not.
//!
//! | case | measures | bound, and where it comes from |
//! |---|---|---|
//! | [`retired_instructions`] | retired instructions of the loop | the loop's own instructions (the event's definition) up to those plus the driver's path ([`PATH_OVERHEAD`]) plus 2 % (kvm-unit-tests' allowance): `bounds::loop_instructions` |
//! | [`core_cycles`] | unhalted core cycles of the loop, and the clock's ticks around it | one cycle per iteration (a chain of one-cycle instructions) up to 8 cycles per TSC tick: `bounds::cycles_against_tsc` |
//! | [`overflow_pmi`] | the overflow PMIs of a counter sampling every [`SAMPLE_AFTER`] retired instructions | every sample interrupts the loop, at least one does, every period sampled or found at the halt, at least the loop's instructions accounted (the event's definition and the counter's INT bit: an overflow raises a PMI) |
//!
//! (`bounds` is `pmu_report::bounds`; its documentation gives each
//! bound's source.)

use core::sync::atomic::{AtomicU64, Ordering};

use hobby::idt::{self, InterruptFrame};
use hobby::test::Outcome;
use hobby::{check, check_eq, pmi};
use pmu::apic::{LvtPerfCounter, PmiDelivery, Vector};
use pmu::arch::{Architecture, Driven, LocalPmu, handle_pmi};
use pmu::counter::{AnyHandle, Driver as _, StateTag};
use pmu::sampling::{Sample, SampleAfter, SampleBuffer};
use pmu_report::bounds;

use super::workload::LOOP_INSTRUCTIONS;
use super::{ArchOf, Bench, Detected, Driver, measured};

/// The interrupt vector of the cases' PMIs.
pub const PMI_VECTOR: u8 = 0xF1;
/// Iterations of the measured loop.
pub const ITERATIONS: u64 = 1_000_000;
/// The most instructions outside the loop that retire between a counter's
/// start and stop: the driver's return from the enabling write into the
/// loop, and its call down to the stopping write. From the code: in this
/// package's unoptimised build the functions on the two paths (the erased
/// handle's `enable` and `halt` with their state check, the architectural
/// driver's `start` and `stop` and its `IA32_PERF_GLOBAL_CTRL` write, the
/// case's own code between them) hold about 1 000 instructions, whose
/// only loops run over the PMU's dozen counters: a few thousand retire at
/// most. 20 000 bounds that for any build and is 0.7 % of the loop. What
/// a hypervisor adds to a guest's count falls in the 2 % allowance
/// (`bounds::INSTRUCTION_SLACK_DIVISOR`).
pub const PATH_OVERHEAD: u64 = 20_000;
/// The sampling case's period: 30 overflows over the loop.
pub const SAMPLE_AFTER: u64 = 100_000;

/// The samples the PMI handler took in the sampling case.
static SAMPLES: SampleBuffer<256> = SampleBuffer::new();
/// PMIs the handler ran for (a model's bench waits on it for each PMI it
/// delivers).
pub(crate) static HANDLED: AtomicU64 = AtomicU64::new(0);
/// PMIs whose handler returned an error (only a model's register access
/// can fail).
static HANDLER_ERRORS: AtomicU64 = AtomicU64::new(0);

/// The run-time handles of bench `B`'s counters.
type Handles<B> = <ArchOf<B> as Architecture>::Handles;

/// The LVT performance-counter entry of the cases: [`PMI_VECTOR`], fixed
/// delivery.
fn entry() -> LvtPerfCounter {
    const VECTOR: Vector = match Vector::new(PMI_VECTOR) {
        Some(v) => v,
        None => panic!("F1H is a vector"),
    };
    LvtPerfCounter::new(PmiDelivery::Fixed(VECTOR))
}

/// The PMI: the architecture's handler on the bench's registers (through
/// the crate's one PMI path), each sample kept, then EOI.
fn on_pmi<B: Bench>(frame: &InterruptFrame) {
    let mut apic = pmi::local_apic();
    let mut regs = B::regs();
    let handled = handle_pmi(B::local(), &mut regs, &mut apic, entry(), frame.rip, |s| {
        SAMPLES.push(Sample::new(s.counter, u64::from(s.periods), s.rip));
    });
    if handled.is_err() {
        HANDLER_ERRORS.fetch_add(1, Ordering::SeqCst);
    }
    HANDLED.fetch_add(1, Ordering::SeqCst);
    apic.eoi();
}

/// Takes bench `B`'s driver, runs `body` on it, its run-time handles and
/// what detection found, then releases whatever is claimed, masks the
/// PMI's entry and gives the driver back, whether `body` passed or not.
fn with_pmu<B: Bench>(
    body: impl FnOnce(&mut Driver<B>, &mut Handles<B>, &Detected<B>) -> Outcome,
) -> Outcome {
    measured::clear();
    let detected = B::prepare()?;
    let (mut d, counters) = B::local().take::<B::Owner>(B::regs(), &detected)?;
    let mut handles = ArchOf::<B>::erase_all(counters);
    let outcome = body(&mut d, &mut handles, &detected);
    let mut released = Ok(());
    for n in 0..=u8::MAX {
        if let Some(h) = ArchOf::<B>::handle(&mut handles, n)
            && h.state() != StateTag::Unclaimed
            && let Err(e) = h.release(&mut d)
        {
            released = Err(e);
        }
    }
    pmi::local_apic().set_perf_counter_entry(entry().masked());
    let given_back = match ArchOf::<B>::from_erased::<B::Owner>(handles) {
        Ok(c) => <B::Local as Driven<'static, B::Regs>>::give_back(d, c).is_ok(),
        Err(_) => false,
    };
    outcome?;
    released?;
    check!(given_back, "a counter handle did not come back unclaimed");
    Ok(())
}

/// Counter `n`'s run-time handle.
fn handle<B: Bench>(
    handles: &mut Handles<B>,
    n: u8,
) -> Result<&mut AnyHandle<ArchOf<B>>, &'static str> {
    ArchOf::<B>::handle(handles, n).ok_or("the bench named a counter the PMU does not have")
}

/// Counter `n`'s name, for the measurements.
fn name<B: Bench>(n: u8) -> &'static str {
    ArchOf::<B>::counter_name(n).unwrap_or("a counter")
}

/// Retired instructions of [`ITERATIONS`] iterations of the loop: within
/// `bounds::loop_instructions(LOOP_INSTRUCTIONS, ITERATIONS,
/// PATH_OVERHEAD)`.
pub fn retired_instructions<B: Bench>() -> Outcome {
    with_pmu::<B>(|d, handles, _| {
        let (n, config) = B::instructions(d)?;
        let h = handle::<B>(handles, n)?;
        h.configure(d, &config)?;
        let allowed = bounds::loop_instructions(LOOP_INSTRUCTIONS, ITERATIONS, PATH_OVERHEAD)?;
        h.enable(d)?;
        B::run_loop(ITERATIONS);
        h.halt(d)?;
        let count = h.read(d)?;
        measured::record(
            format_args!(
                "{count} instructions retired ({}, {}; {ITERATIONS} iterations of {LOOP_INSTRUCTIONS})",
                name::<B>(n),
                B::SOURCE
            ),
            format_args!("{allowed}"),
        );
        bounds::retired_instructions_within(allowed, count)?;
        Ok(())
    })
}

/// Unhalted core cycles of the loop against the clock's ticks around the
/// counting window: `bounds::cycles_against_tsc`, at least one cycle per
/// iteration.
pub fn core_cycles<B: Bench>() -> Outcome {
    with_pmu::<B>(|d, handles, _| {
        let (n, config) = B::core_cycles(d)?;
        let h = handle::<B>(handles, n)?;
        h.configure(d, &config)?;
        let before = B::timestamp();
        h.enable(d)?;
        B::run_loop(ITERATIONS);
        h.halt(d)?;
        let ticks = B::timestamp().wrapping_sub(before);
        let cycles = h.read(d)?;
        measured::record(
            format_args!(
                "{cycles} core cycles over {ticks} {} ticks ({}, {})",
                B::CLOCK,
                name::<B>(n),
                B::SOURCE
            ),
            format_args!(
                "{}",
                Allowed(bounds::core_cycles_interval(ticks, ITERATIONS))
            ),
        );
        bounds::cycles_against_tsc(cycles, ticks, ITERATIONS)?;
        Ok(())
    })
}

/// An interval of counts, or why there is none.
struct Allowed(Result<bounds::Interval, bounds::BoundsError>);

impl core::fmt::Display for Allowed {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match &self.0 {
            Ok(allowed) => write!(f, "{allowed}"),
            Err(e) => write!(f, "none: {e}"),
        }
    }
}

/// Retired instructions sampled every [`SAMPLE_AFTER`] while the loop runs
/// with interrupts open: the PMU's overflow PMIs reach the architecture's
/// handler through the local APIC, each interrupting the loop, and every
/// instruction is accounted for.
pub fn overflow_pmi<B: Bench>() -> Outcome {
    with_pmu::<B>(|d, handles, detected| {
        B::sampling_supported(detected)?;
        let (n, config) = B::instructions(d)?;
        let rule = d
            .overflow_rule(n)
            .ok_or("the driver gave no overflow rule for the counter it named")?;
        let every = SampleAfter::new(SAMPLE_AFTER, rule)?;
        let h = handle::<B>(handles, n)?;
        h.configure(d, &ArchOf::<B>::sampling(config, every))?;
        SAMPLES.drain(|_| {});
        HANDLED.store(0, Ordering::SeqCst);
        HANDLER_ERRORS.store(0, Ordering::SeqCst);
        idt::set_handler(PMI_VECTOR, on_pmi::<B>);
        pmi::local_apic().set_perf_counter_entry(entry());
        h.enable(d)?;
        let window = B::run_sampled_loop(ITERATIONS)?;
        h.halt(d)?;
        // A PMI the APIC still holds (raised after the loop closed
        // interrupts) comes now, to a halted counter whose overflow the
        // halt found: no sample. Bounded: a pending interrupt is taken as
        // soon as the STI shadow ends.
        x86_64::instructions::interrupts::enable();
        for _ in 0..10_000 {
            core::hint::spin_loop();
        }
        x86_64::instructions::interrupts::disable();
        let (owed, residual) = every.split(h.read(d)?);
        let (periods, at_halt) = B::local().periods(n);
        let (mut inside, mut outside, mut sampled, mut foreign) = (0u64, 0u64, 0u64, 0u64);
        SAMPLES.drain(|s| {
            if window.contains(&s.rip) {
                inside += 1;
            } else {
                outside += 1;
            }
            sampled += u64::from(s.periods);
            foreign += u64::from(s.counter != n);
        });
        let counted = (periods + owed) * SAMPLE_AFTER + residual;
        let least = LOOP_INSTRUCTIONS * ITERATIONS;
        measured::record(
            format_args!(
                "{} PMIs, {inside} samples in the loop, {outside} outside; {periods} periods ({at_halt} at the halt), {counted} instructions ({})",
                HANDLED.load(Ordering::SeqCst),
                B::SOURCE
            ),
            format_args!(
                ">= 1 sample, all in the loop; every period sampled or found at the halt; >= {least} instructions"
            ),
        );
        check_eq!(foreign, 0, "samples of another counter");
        check_eq!(outside, 0, "samples interrupting code outside the loop");
        check!(inside >= 1, "no overflow PMI arrived while the loop ran");
        check_eq!(
            sampled + at_halt,
            periods,
            "every period sampled or found at the halt"
        );
        check_eq!(HANDLER_ERRORS.load(Ordering::SeqCst), 0, "handler errors");
        check!(
            counted >= least,
            "{counted} instructions accounted for, fewer than the loop's {least}"
        );
        Ok(())
    })
}

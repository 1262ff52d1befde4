//! The statistical profiler itself, whatever PMU counts for it: shared by
//! `profiler.rs` (the NetBurst PMU model) and `profiler_archperf.rs`
//! (Intel's architectural PMU, real or modelled), each of which includes it
//! with `#[path = "profiler/shared.rs"] mod shared;` and boots through
//! [`main`] with its [`Platform`].
//!
//! Here: the workloads and their expected shares ([`WORKLOADS`]), the
//! per-CPU bookkeeping (samples, tick clocks, carried cycles, findings), the
//! timer tick that feeds a model with the time the CPU ran (TSC time less
//! KVM's steal time, a late tick's capped at [`LATE_TICK`] ticks) up to
//! its PMI, the
//! method (a calibration run counting cycles without interrupts, N = cycles
//! / [`TARGET_SAMPLES`], then the sampled run and its accounting:
//! [`CycleCounter::profile`]), one profile per CPU with a driver each, the
//! PMI entry, and the report with its verdict. Everything an architecture
//! does (taking the driver, the counter that counts core cycles, its
//! overflow rule, the PMI handler, the periods it accounted, giving the
//! driver back) goes through the crate's seam (`pmu::arch::Architecture`,
//! `Driven`, `pmu::arch::handle_pmi`), so this file drives any
//! architecture. In each binary: its [`Platform`], which PMU each CPU has,
//! through which register backend, and on a model how the ticks feed it.
//!
//! Why a module of the examples and not of the `hobby` kernel library: this
//! is one example's method and report (its workloads' expected shares, its
//! 6-point verdict, its output lines), which two binaries of that example
//! share; `hobby` holds what any test kernel needs (boot, interrupts, the
//! APIC timer and TSC, SMP, the workload functions themselves), which this
//! builds on. In a folder of its own because every `examples/*.rs` is a
//! kernel the QEMU harness boots.

use core::fmt;
use core::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};

use hobby::boot::BootInfo;
use hobby::exit::{ExitCode, exit_qemu};
use hobby::idt::{self, InterruptFrame};
use hobby::stacks::{self, Tally};
use hobby::steal;
use hobby::test::Failure;
use hobby::timer::{self, ApicTimer, Divide, Jitter, TickClock};
use hobby::workload::{self, STEP_SYMBOLS, SYMBOLS};
use hobby::{pmi, println, smp};
use pmu::apic::{LvtPerfCounter, PmiDelivery, Vector};
use pmu::arch::{Architecture, Driven, LocalPmu};
use pmu::counter::{self, AnyHandle, Driver, Owner};
use pmu::sampling::{self, CallChain, OverflowRule, Sample, SampleAfter, SampleBuffer};
use pmu_report::symbols::SymbolTable;
use x86_64::instructions::interrupts;

/// The timer tick's vector.
const TIMER_VECTOR: u8 = 0xE1;
/// The PMI's vector.
const PMI_VECTOR: u8 = 0xF0;
/// The model's tick where interrupts are cheap (TCG): 200 µs.
pub const TICK_NS: u64 = 200_000;
/// The samples a profile aims at, per CPU, where the platform runs code
/// about as fast as TCG ([`target_samples`]).
const TARGET_SAMPLES: u64 = 1000;
/// The fewest samples a profile aims at on a slower platform.
const FEWEST_SAMPLES: u64 = 250;
/// How far a share may be from its workload's in a profile of
/// [`TARGET_SAMPLES`] samples: 6 points, about 4 standard errors at ~1000
/// samples (with fewer samples, wider in proportion to 1/sqrt of the
/// samples taken, [`share_bound`]).
const SHARE_BOUND: f64 = 0.06;
/// The longest tick [`choose_model_tick`] tries: 64 times [`TICK_NS`],
/// 12.8 ms.
const MAX_TICK_NS: u64 = TICK_NS << 6;
/// The most of a CPU's time the model's ticks may take
/// ([`choose_model_tick`]): the ticks come at a steady rate whatever code
/// they interrupt, so their time does not bias the profile; it only must
/// leave the workload time to run.
const MAX_TICK_OVERHEAD_PERCENT: u64 = 50;
/// The calibration run, at the 200 µs tick: with [`TARGET_SAMPLES`], a
/// sample period of about 500 µs of cycles, 2.5 ticks, more than a tick
/// plus the tick and PMI handlers (the NetBurst model's injection takes
/// 150-300 µs in a debug build, two CPUs sharing it), so that no tick owes
/// a model more than one sample. A longer tick lengthens it in proportion
/// ([`calibration_ns`]).
const CALIBRATION_NS: u64 = 500_000_000;
/// The longest calibration run a profile aims at: with a long tick (a
/// loaded host or a slow platform, where [`choose_model_tick`] picks up to
/// 12.8 ms), [`TARGET_SAMPLES`] would need a calibration run of up to 32 s
/// and a sampled run as long, past the runner's 60 s timeout (seen in CI
/// while the defmt decoder built beside the boots); fewer samples are
/// aimed at instead (at least [`FEWEST_SAMPLES`]), and the shares' bound
/// widens with that ([`share_bound`]).
const MAX_CALIBRATION_NS: u64 = 4_000_000_000;

/// The longest a sampled run lasts, in calibration runs: it runs until it
/// took the samples aimed at, which takes about one calibration run under
/// TCG, and longer where interrupts are slow to take or a busy host
/// deschedules the virtual CPUs (a model's clock, the TSC, runs on, a tick
/// then carries several sample periods and gives one sample): 4 to 6 under
/// this machine's KVM (nested), where a round of the workload takes 0.5-0.7
/// s. 16 calibration runs are at most 64 s ([`MAX_CALIBRATION_NS`]), 8 s
/// at the 200 µs tick.
const SAMPLED_RUN_LIMIT: u64 = 16;

/// The addresses of a sample's call chain: the workload function, its
/// callers up to the CPU's first frame (about 12 deep here).
pub const DEPTH: usize = 16;
/// Distinct call chains a CPU's flame graph keeps (one per RIP and call
/// path: about 30 in a profile here).
const CHAINS: usize = 128;

/// Per CPU: its samples and their call chains, which its PMI handler
/// pushes.
pub static SAMPLES: [SampleBuffer<4096, CallChain<DEPTH>>; 2] = [const { SampleBuffer::new() }; 2];

/// Per CPU, where the platform's chains come from elsewhere than a
/// frame-pointer walk ([`Platform::chain`]): each sample's frame-pointer
/// chain as well, for the report to compare the two flame graphs.
static WALKED: [SampleBuffer<4096, CallChain<DEPTH>>; 2] = [const { SampleBuffer::new() }; 2];

/// Per CPU: the samples its PMI handler took since its sampled run began
/// (one writer: that CPU's PMI handler).
static TAKEN: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];

/// Per CPU: the TSC time its model's last tick reached.
static CLOCK: [TickClock; 2] = [const { TickClock::new() }; 2];
/// Per CPU: the time the hypervisor had kept it from running when its
/// model's last tick came (`hobby::steal`, KVM's steal time; 0 without).
static STOLEN: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];
/// Per CPU: the cycles a tick carried over to the next (past its model's
/// PMI).
static CARRY: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];
/// Per CPU: whether its model's ticks run ([`start_ticks`], [`rearm_tick`]).
static TICKING: [AtomicBool; 2] = [const { AtomicBool::new(false) }; 2];
/// The APIC timer count of the model's tick ([`set_tick`]).
static APIC_COUNT: AtomicU64 = AtomicU64::new(100_000);
/// The TSC's rate.
static TSC_HZ: AtomicU64 = AtomicU64::new(0);
/// The model's tick ([`set_tick`]).
static TICK: AtomicU64 = AtomicU64::new(TICK_NS);
/// The samples a profile aims at ([`choose_model_tick`]).
static TARGET: AtomicU64 = AtomicU64::new(TARGET_SAMPLES);

/// What a CPU's profile found, for the boot CPU to print.
struct Profile {
    rounds: AtomicU64,
    sampled_rounds: AtomicU64,
    calibration_cycles: AtomicU64,
    n: AtomicU64,
    sampled_cycles: AtomicU64,
    at_halt: AtomicU64,
    counter: AtomicU8,
    counts: [AtomicU64; 4],
    failed: AtomicU64,
}

static PROFILE: [Profile; 2] = [const {
    Profile {
        rounds: AtomicU64::new(0),
        sampled_rounds: AtomicU64::new(0),
        calibration_cycles: AtomicU64::new(0),
        n: AtomicU64::new(0),
        sampled_cycles: AtomicU64::new(0),
        at_halt: AtomicU64::new(0),
        counter: AtomicU8::new(0),
        counts: [const { AtomicU64::new(0) }; 4],
        failed: AtomicU64::new(0),
    }
}; 2];

/// A workload: its name, one round of it, and its expected shares of
/// `work_1x`, `work_2x`, `work_4x` (costs 1, 2, 4), or of `step_1x`,
/// `step_2x`, `step_4x` in a stepped profile.
type Workload = (&'static str, extern "C" fn(), [f64; 3]);

/// Each CPU's workload.
const WORKLOADS: [Workload; 2] = [
    (
        "work_1x, work_2x, work_4x",
        round_1_2_4,
        [1.0 / 7.0, 2.0 / 7.0, 4.0 / 7.0],
    ),
    (
        "work_4x, work_1x, work_1x",
        round_2_0_4,
        [2.0 / 6.0, 0.0, 4.0 / 6.0],
    ),
];

extern "C" fn round_1_2_4() {
    workload::run(1);
}

extern "C" fn round_2_0_4() {
    workload::work_4x();
    workload::work_1x();
    workload::work_1x();
}

/// Each CPU's workload in a stepped profile ([`Platform::STEPPED`]): the
/// same costs, with the small functions that single-step in reasonable
/// time.
const STEP_WORKLOADS: [Workload; 2] = [
    (
        "step_1x, step_2x, step_4x",
        workload::run_stepped,
        [1.0 / 7.0, 2.0 / 7.0, 4.0 / 7.0],
    ),
    (
        "step_4x, step_1x, step_1x",
        round_step_2_0_4,
        [2.0 / 6.0, 0.0, 4.0 / 6.0],
    ),
];

extern "C" fn round_step_2_0_4() {
    workload::step_4x();
    workload::step_1x();
    workload::step_1x();
}

/// The most rounds a stepped profile's calibration run counts (its sampled
/// run repeats them): about 85,000 single-stepped instructions on CPU 0.
const STEP_ROUNDS: u64 = 20;
/// The time a stepped profile's two runs may take, per CPU, which
/// [`choose_step_rounds`] fits the rounds to: a single step costs a few
/// microseconds under TCG, and about a thousand times that under a nested
/// KVM, which intercepts every debug exception.
const STEP_BUDGET_NS: u64 = 20_000_000_000;
/// The samples a stepped profile aims at per round of its calibration
/// run: half the 600-odd branches of the smaller round, so that N is at
/// least 2 (a PEBS period's least).
const STEP_SAMPLES_PER_ROUND: u64 = 300;
/// The rounds [`choose_step_rounds`] chose.
static STEP_ROUNDS_CHOSEN: AtomicU64 = AtomicU64::new(STEP_ROUNDS);

/// A stepped profile's rounds: as many as fit [`STEP_BUDGET_NS`] at the
/// speed a single-stepped unit of work shows, 7 to a round (at least 1,
/// at most [`STEP_ROUNDS`]), and the samples aimed at with them (the
/// shares' bound widens with fewer, [`share_bound`]). Call on CPU 0 before
/// any profile runs; says what it chose.
fn choose_step_rounds<P: Platform>(cal: &timer::Calibration) {
    // One unit of work single-stepped (`step_1x`), a seventh of a round.
    let start = timer::rdtsc();
    P::step(0, workload::step_1x);
    let ticks = timer::rdtsc().wrapping_sub(start);
    let round_ns = (7 * ticks as u128 * 1_000_000_000 / cal.tsc_hz.max(1) as u128) as u64;
    let rounds = (STEP_BUDGET_NS / (2 * round_ns.max(1))).clamp(1, STEP_ROUNDS);
    STEP_ROUNDS_CHOSEN.store(rounds, Ordering::SeqCst);
    let target = (rounds * STEP_SAMPLES_PER_ROUND).min(TARGET_SAMPLES);
    TARGET.store(target, Ordering::SeqCst);
    println!(
        "  single-stepping: a round of CPU 0's workload in about {} ms: {rounds} rounds per run, {target} samples aimed at per CPU",
        round_ns / 1_000_000
    );
}

/// The workloads of platform `P`, and the functions they name.
fn workloads<P: Platform>() -> (&'static [Workload; 2], &'static SymbolTable<3>) {
    if P::STEPPED {
        (&STEP_WORKLOADS, &STEP_SYMBOLS)
    } else {
        (&WORKLOADS, &SYMBOLS)
    }
}

/// What a binary profiles on: which PMU each CPU has (a share of a
/// physical PMU, [`Platform::Local`], driven over register backend
/// [`Platform::Regs`]), a real one or a model, and on a model how the
/// ticks feed it; and what the report calls it. Nothing here does what an
/// architecture does: that is the crate's seam's.
pub trait Platform: 'static {
    /// A CPU's share of its physical PMU, driven over [`Platform::Regs`].
    type Local: Driven<'static, Self::Regs>;
    /// A CPU's register backend.
    type Regs;
    /// The binary's name: its first line and its verdict line start with it.
    const NAME: &'static str;
    /// What the counter counts, for the report ("cycles", "core cycles").
    const EVENT: &'static str;
    /// Whether a real PMU counts; else a model does, which the timer's
    /// ticks feed during the runs ([`Platform::feed`]), or, stepped, the
    /// workload's own instructions.
    const REAL: bool;
    /// Whether the workload runs single-stepped ([`Platform::step`]): the
    /// stepped workloads ([`STEP_WORKLOADS`]), each instruction fed to the
    /// model as it retires, the model's PMI serviced where the debug
    /// exception stopped the workload ([`service`]); no tick. The
    /// calibration run is [`STEP_ROUNDS`] rounds or fewer
    /// ([`choose_step_rounds`]), repeated by the sampled run.
    const STEPPED: bool = false;

    /// Says what counts, in the lines after the first.
    fn introduce();
    /// The end of the line that gives the TSC's and the APIC timer's rates:
    /// the CPUs (`cpus` of them) and their PMUs.
    fn machine(f: &mut fmt::Formatter<'_>, cpus: usize) -> fmt::Result;
    /// CPU `cpu`'s share of its physical PMU.
    fn local(cpu: usize) -> Self::Local;
    /// CPU `cpu`'s register backend (called on that CPU); `None` if it has
    /// none.
    fn regs(cpu: usize) -> Option<Self::Regs>;
    /// What detection finds of CPU `cpu`'s PMU; `None` if nothing usable.
    fn detect(cpu: usize) -> Option<Detected<Self>>;
    /// A model's: `cycles` happen on CPU `cpu`'s model, up to the one that
    /// raises its PMI: how many happened, and whether a PMI was taken from
    /// the model (the tick then delivers it through the APIC). A real PMU's
    /// counts itself: never called.
    fn feed(cpu: usize, cycles: u64) -> (u64, bool);
    /// A model's: starts its counts afresh before a profile.
    fn reset(_cpu: usize) {}
    /// The counter and configuration a profile counts with: core cycles
    /// (`Driven::core_cycles`) unless the platform says otherwise.
    fn counter<O: Owner>(d: &Drv<Self, O>) -> Option<(u8, Config<Self>)> {
        <Self::Local as Driven<'static, Self::Regs>>::core_cycles(d)
    }
    /// The counting configuration `config` made to sample every `n`
    /// events: the seam's ([`Architecture::sampling`]) unless the platform
    /// samples otherwise (precisely).
    fn sampling(config: Config<Self>, n: SampleAfter) -> Config<Self> {
        Arch::<Self>::sampling(config, n)
    }
    /// Before a profile's runs, with the driver taken (a DS area to
    /// install).
    fn prepare<O: Owner>(_cpu: usize, _d: &mut Drv<Self, O>) -> Result<(), Failure> {
        Ok(())
    }
    /// After a run's counter is halted: samples left to hand over (PEBS
    /// records below the buffer's threshold).
    fn after_halt<O: Owner>(_cpu: usize, _d: &mut Drv<Self, O>) -> Result<(), Failure> {
        Ok(())
    }
    /// A stepped platform's: runs one round of `round` single-stepped on
    /// CPU `cpu`.
    fn step(_cpu: usize, round: extern "C" fn()) {
        round();
    }
    /// What a halted counter that read `raw` owes, sampling every `n`:
    /// periods not serviced and the residual events ([`SampleAfter::split`]
    /// unless the platform's counter starts its periods elsewhere).
    fn split(n: SampleAfter, raw: u64) -> (u64, u64) {
        n.split(raw)
    }
    /// A sample's call chain from its payload (the LBR's call stack),
    /// where the platform has one: the report then draws it, and compares
    /// its flame graph with the frame-pointer walk's of the same samples
    /// (`folded-same`); `None`: the walk is the chain.
    fn chain(_sample: &Sample<Payload<Self>>) -> Option<CallChain<DEPTH>> {
        None
    }
    /// Where CPU `cpu`'s frame-pointer walks stop (a stack address, for
    /// [`pmu::sampling::StackBounds::below`]): the stepped call's frame, so
    /// that a walk covers what a recorded call stack covers; `None`: the
    /// whole stack.
    fn stack_top(_cpu: usize) -> Option<u64> {
        None
    }
    /// Whether a sample at `rip` in one of the workload's functions is
    /// where the profile's mode puts it, and what that is ("at its
    /// branch"); `None`: no such check.
    fn placed(_rip: u64) -> Option<(bool, &'static str)> {
        None
    }
}

/// The driver of platform `P` for owner `O`.
pub type Drv<P, O> = <<P as Platform>::Local as Driven<'static, <P as Platform>::Regs>>::Driver<O>;
/// A counter configuration of platform `P`.
pub type Config<P> = <Arch<P> as Architecture>::Config;

/// The architecture of platform `P`.
pub type Arch<P> = <<P as Platform>::Local as LocalPmu<'static>>::Arch;
/// What detection reports on platform `P`.
pub type Detected<P> = <Arch<P> as Architecture>::Detected;
/// What a sample of platform `P` carries.
pub type Payload<P> = <Arch<P> as Architecture>::Payload;

/// What the counter counts, in the report's sentences: cycles, or a
/// stepped profile's branches.
fn unit<P: Platform>() -> &'static str {
    if P::STEPPED { "branches" } else { "cycles" }
}

/// What the counts come from, for the report.
pub fn source<P: Platform>() -> &'static str {
    if P::REAL { "real PMU" } else { "model" }
}

/// This CPU's local APIC.
pub fn apic() -> hobby::apic::Apic {
    pmi::local_apic()
}

/// This CPU's APIC timer.
pub fn apic_timer() -> ApicTimer {
    // SAFETY: as for `apic`: the same identity-mapped page, this CPU's.
    unsafe { ApicTimer::at_default_base() }
}

/// The LVT performance-counter entry: the PMI as a fixed interrupt on
/// [`PMI_VECTOR`].
pub fn entry() -> LvtPerfCounter {
    LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(PMI_VECTOR).unwrap()))
}

/// The APIC timer count of a tick of `ns`.
pub fn tick_count(cal: &timer::Calibration, ns: u64) -> u32 {
    cal.count_for(ns, Divide::By1)
}

/// The model's tick becomes `ns`.
pub fn set_tick(cal: &timer::Calibration, ns: u64) {
    TICK.store(ns, Ordering::SeqCst);
    APIC_COUNT.store(u64::from(tick_count(cal, ns)), Ordering::SeqCst);
}

/// The calibration run's length: [`CALIBRATION_NS`] at the 200 µs tick
/// and [`TARGET_SAMPLES`], as many times longer as the tick is and
/// shorter as fewer samples are aimed at (the sample period stays 2.5
/// ticks).
pub fn calibration_ns() -> u64 {
    let tick = (TICK.load(Ordering::SeqCst) / TICK_NS).max(1);
    CALIBRATION_NS * tick * target_samples() / TARGET_SAMPLES
}

/// The samples a profile aims at, per CPU: [`TARGET_SAMPLES`], or fewer
/// where [`choose_model_tick`] found the platform slow or chose a long
/// tick ([`MAX_CALIBRATION_NS`]).
pub fn target_samples() -> u64 {
    TARGET.load(Ordering::SeqCst)
}

/// How far a share may be from its workload's in a profile that took
/// `samples` in the workload: [`SHARE_BOUND`] scaled by sqrt(1000 /
/// samples), as the standard error of a proportion scales (about 4 of
/// them), and never narrower. Fewer samples than aimed at are taken where
/// the platform is slow ([`choose_model_tick`] aims at fewer) and where the
/// host deschedules the virtual CPUs: the TSC, the model's clock, runs on
/// meanwhile, a tick then carries more than a period, and a tick gives one
/// sample at most (the rest of its cycles are counted, and accounted, but
/// not sampled). Either way the shares stay unbiased, only noisier; a
/// bound fixed at 6 points would fail a profile of 455 samples (2.7
/// standard errors) about once in 20 runs on a loaded host (seen).
fn share_bound(samples: u64) -> f64 {
    let ratio = TARGET_SAMPLES as f64 / samples.max(1) as f64;
    // sqrt by Newton's method (`f64::sqrt` is not in `core`).
    let mut root = ratio.max(1.0);
    for _ in 0..32 {
        root = 0.5 * (root + ratio / root);
    }
    SHARE_BOUND * root.max(1.0)
}

/// Model mode: the model's tick, the shortest from [`TICK_NS`]
/// up to [`MAX_TICK_NS`] that the platform keeps up with while the
/// workload spins, each tick feeding the model as in a run (no counter
/// programmed yet: no PMI) and taking at most
/// [`MAX_TICK_OVERHEAD_PERCENT`] of the CPU (`hobby::timer::kept_up_period`).
/// Where an interrupt and the tick handler's APIC accesses cost little
/// (TCG) that is 200 µs; under a hypervisor whose exits are slow a 200 µs
/// tick would leave the workload almost no time, and ticks the platform
/// cannot deliver on time are taken wherever it next can, not where the
/// time went. Where the platform runs code much slower than TCG
/// (`hobby::pace::scaled`), or the tick is so long that a calibration run
/// would last more than [`MAX_CALIBRATION_NS`], the profile aims at fewer
/// samples (at least [`FEWEST_SAMPLES`]) and its shares' bound widens with
/// that. Call on
/// CPU 0 before any profile runs; says what it chose.
fn choose_model_tick<P: Platform>(cal: &timer::Calibration) {
    let burst = timer::kept_up_period(
        cal,
        Vector::new(TIMER_VECTOR).unwrap(),
        on_tick::<P>,
        (TICK_NS, MAX_TICK_NS),
        timer::Load::Spin,
        MAX_TICK_OVERHEAD_PERCENT,
    );
    set_tick(cal, burst.period_ns);
    let tick = (burst.period_ns / TICK_NS).max(1);
    let within_max = MAX_CALIBRATION_NS * TARGET_SAMPLES / (CALIBRATION_NS * tick);
    let target = hobby::pace::scaled(TARGET_SAMPLES, FEWEST_SAMPLES)
        .min(within_max)
        .max(FEWEST_SAMPLES);
    TARGET.store(target, Ordering::SeqCst);
    println!(
        "  the model's tick: {burst}; {target} samples aimed at per CPU, calibration {} ms",
        calibration_ns() / 1_000_000
    );
}

/// Per CPU: its ticks' random lengths (`hobby::timer::Jitter`: ticks at a
/// fixed period can lock onto the workload's round and sample the same few
/// phases of it).
static JITTER: [Jitter; 2] = [
    Jitter::new(0x9E37_79B9_7F4A_7C15),
    Jitter::new(0xD1B5_4A32_D192_ED03),
];

/// The APIC timer count of CPU `cpu`'s next tick: the model's tick
/// ([`APIC_COUNT`]), jittered ([`JITTER`]). A tick still lasts less than a
/// sample period (2.5 mean ticks).
fn jittered_count(cpu: usize) -> u32 {
    JITTER[cpu].count(APIC_COUNT.load(Ordering::SeqCst) as u32)
}

/// Starts CPU `cpu`'s ticks, the first a [`jittered_count`] from now (each
/// later one as long after the last handler of the previous one,
/// [`rearm_tick`]), its model's clock starting now with nothing carried
/// over; returns the timer, to stop (clear [`TICKING`] first:
/// [`stop_ticks`]).
pub fn start_ticks(cpu: usize) -> ApicTimer {
    let mut timer = apic_timer();
    CARRY[cpu].store(0, Ordering::SeqCst);
    steal::enable();
    STOLEN[cpu].store(steal::stolen_ns(), Ordering::SeqCst);
    CLOCK[cpu].start();
    TICKING[cpu].store(true, Ordering::SeqCst);
    let count = jittered_count(cpu);
    timer.start_one_shot(Vector::new(TIMER_VECTOR).unwrap(), Divide::By1, count);
    timer
}

/// Stops CPU `cpu`'s ticks: no handler re-arms the timer after this.
pub fn stop_ticks(cpu: usize, mut timer: ApicTimer) {
    TICKING[cpu].store(false, Ordering::SeqCst);
    timer.stop();
}

/// Starts the countdown to CPU `cpu`'s next tick, if its ticks run: the
/// last handler of a tick calls it (the tick's own, or the PMI handler of
/// the PMI it delivered), so the next tick comes a (jittered) tick of the
/// interrupted code's time later. A periodic timer would instead keep
/// expiring while the handlers run: where they take much of a tick (a
/// hypervisor with slow exits), ticks pile up and are taken one after
/// another at the same place, and the samples stop being independent.
pub fn rearm_tick(cpu: usize) {
    if TICKING.get(cpu).is_some_and(|t| t.load(Ordering::SeqCst)) {
        // The vector and divide are those `start_ticks` programmed.
        apic_timer().restart_one_shot(jittered_count(cpu));
    }
}

/// The timer tick, on every CPU: the cycles that passed on this CPU since
/// its last tick (and those carried over) happen on its model, up to the
/// one that raises its PMI; the rest waits for the next tick, so the PMI is
/// taken before more cycles count. The PMI is sent through this CPU's APIC
/// and taken as soon as the tick handler returns, at the workload's RIP.
/// One sample per tick at most: a tick that lasted several sample periods
/// (a virtual CPU descheduled by a busy host) does not put several samples
/// on one RIP; its cycles are sampled at the next ticks' RIPs instead (the
/// sample period is kept above a tick's cycles, handlers included, see
/// [`CALIBRATION_NS`]).
fn on_tick<P: Platform>(_: &InterruptFrame) {
    let cpu = smp::cpu().min(1);
    let stolen = steal::stolen_ns();
    let stolen_since = stolen.wrapping_sub(STOLEN[cpu].swap(stolen, Ordering::SeqCst));
    let elapsed = CLOCK[cpu]
        .tick()
        .saturating_sub(tsc_ticks(stolen_since))
        .min(tsc_ticks(LATE_TICK * TICK.load(Ordering::SeqCst)));
    let cycles = elapsed + CARRY[cpu].swap(0, Ordering::SeqCst);
    let (injected, taken) = P::feed(cpu, cycles);
    CARRY[cpu].store(cycles - injected, Ordering::SeqCst);
    let pmi_sent = taken && matches!(pmi::deliver(&mut apic()), pmi::Delivery::Vector(_));
    if !pmi_sent {
        // Else the PMI's handler, which runs next, re-arms it.
        rearm_tick(cpu);
    }
    apic_timer().eoi();
}

/// The most a tick feeds its model, in mean ticks. The time the host kept
/// the virtual CPU from running (the TSC runs on meanwhile) is not its
/// cycles: fed, it would go to whichever function the CPU was in when the
/// host took it, and a profile's shares would follow the host's load
/// instead of the workload. Under KVM a tick subtracts the steal time KVM
/// reports (`hobby::steal`); where no hypervisor says (TCG), a tick later
/// than this came after such a gap, and is cut. A jittered tick lasts at
/// most 1.5 mean ticks.
const LATE_TICK: u64 = 2;

/// How long a run lasts.
#[derive(Clone, Copy)]
enum Until {
    /// About this many nanoseconds of TSC time, whole rounds.
    Time(u64),
    /// Until this CPU's PMI handler took this many samples, whole rounds;
    /// or, failing that, for this many nanoseconds.
    Samples(u64, u64),
    /// This many rounds (a stepped profile's: its runs are exact).
    Rounds(u64),
}

/// The TSC ticks of `ns` nanoseconds.
fn tsc_ticks(ns: u64) -> u64 {
    (u128::from(TSC_HZ.load(Ordering::SeqCst)) * u128::from(ns) / 1_000_000_000) as u64
}

/// Runs `round` on CPU `cpu` until `until`, with interrupts enabled and,
/// where a model counts, its timer ticking (single-stepped, on a stepped
/// platform: [`Platform::step`]); returns the rounds run.
fn profile_run<P: Platform>(cpu: usize, round: extern "C" fn(), until: Until) -> u64 {
    let timer = (!P::REAL && !P::STEPPED).then(|| start_ticks(cpu));
    let (limit, samples, rounds) = match until {
        Until::Time(ns) => (tsc_ticks(ns), u64::MAX, u64::MAX),
        Until::Samples(samples, ns) => (tsc_ticks(ns), samples, u64::MAX),
        Until::Rounds(rounds) => (u64::MAX, u64::MAX, rounds),
    };
    TAKEN[cpu].store(0, Ordering::SeqCst);
    interrupts::enable();
    let mut done = 0;
    let start = timer::rdtsc();
    while done < rounds
        && timer::rdtsc().wrapping_sub(start) < limit
        && TAKEN[cpu].load(Ordering::SeqCst) < samples
    {
        P::step(cpu, round);
        done += 1;
    }
    interrupts::disable();
    if let Some(timer) = timer {
        stop_ticks(cpu, timer);
    }
    done
}

/// The counter a CPU's profile counts its cycles on, as the architecture's
/// part picked and programs it.
pub struct CycleCounter<'a, A: counter::Arch, D: Driver<A>> {
    /// The CPU's driver.
    pub driver: &'a mut D,
    /// The counter's handle, unclaimed (and unclaimed again after).
    pub handle: &'a mut AnyHandle<A>,
    /// Counting the cycles, without interrupts.
    pub counting: D::Config,
    /// A configuration made to sample every `n` events.
    pub sample_every: fn(D::Config, SampleAfter) -> D::Config,
    /// How the counter overflows into a PMI.
    pub rule: OverflowRule,
    /// What the PMI handler accounted on counter `n`: the periods it
    /// serviced, and those it found at a halt (its `periods` and
    /// `periods_at_halt`).
    pub periods: &'a dyn Fn(u8) -> (u64, u64),
    /// After the sampled run's halt ([`Platform::after_halt`]).
    pub after_halt: fn(usize, &mut D) -> Result<(), Failure>,
}

impl<A: counter::Arch, D: Driver<A>> CycleCounter<'_, A, D>
where
    D::Config: Copy,
{
    /// CPU `cpu`'s profile: a calibration run counting its workload's
    /// cycles for about [`calibration_ns`], N from it, then the sampled
    /// run, until it took the samples aimed at ([`Until::Samples`]; a
    /// stepped profile repeats the calibration's rounds); the
    /// findings go to the report.
    pub fn profile<P: Platform>(self, cpu: usize) -> Result<(), Failure> {
        let Self {
            driver: d,
            handle: h,
            counting,
            sample_every,
            rule,
            periods,
            after_halt,
        } = self;
        let (_, round, _) = workloads::<P>().0[cpu];
        let counter = h.index();

        // Calibration: count the run's cycles without interrupts.
        h.configure(d, &counting)?;
        h.enable(d)?;
        let calibration = if P::STEPPED {
            Until::Rounds(STEP_ROUNDS_CHOSEN.load(Ordering::SeqCst))
        } else {
            Until::Time(calibration_ns())
        };
        let rounds = profile_run::<P>(cpu, round, calibration);
        h.halt(d)?;
        let cycles = h.read(d)? + CARRY[cpu].load(Ordering::SeqCst);
        h.release(d)?;
        let n = sampling::calibrate(cycles, target_samples(), rule)?;

        // The profile.
        h.configure(d, &sample_every(counting, n))?;
        h.enable(d)?;
        // Until the samples aimed at are taken, however long that takes:
        // the sample count, which the report judges, then does not depend
        // on how the host schedules the virtual CPUs (a CPU descheduled
        // while its model's clock, the TSC, runs on takes fewer samples per
        // second, never more than one a tick, [`on_tick`]); at most
        // [`SAMPLED_RUN_LIMIT`] calibration runs long. A stepped profile
        // repeats the calibration's rounds: its counts are the workload's
        // own, exactly.
        let until = if P::STEPPED {
            Until::Rounds(rounds)
        } else {
            Until::Samples(target_samples(), calibration_ns() * SAMPLED_RUN_LIMIT)
        };
        let sampled_rounds = profile_run::<P>(cpu, round, until);
        h.halt(d)?;
        after_halt(cpu, d)?;
        let (owed, residual) = P::split(n, h.read(d)?);
        let (serviced, at_halt) = periods(counter);
        let sampled = (serviced + owed) * n.get() + residual + CARRY[cpu].load(Ordering::SeqCst);
        let p = &PROFILE[cpu];
        p.rounds.store(rounds, Ordering::SeqCst);
        p.sampled_rounds.store(sampled_rounds, Ordering::SeqCst);
        p.calibration_cycles.store(cycles, Ordering::SeqCst);
        p.n.store(n.get(), Ordering::SeqCst);
        p.sampled_cycles.store(sampled, Ordering::SeqCst);
        p.at_halt.store(at_halt, Ordering::SeqCst);
        p.counter.store(counter, Ordering::SeqCst);
        h.release(d)?;
        Ok(())
    }
}

/// The kernel's main: the profiler on architecture `P`, every CPU (two at
/// most) profiled at once, then the report; exits QEMU with its verdict.
pub fn main<P: Platform>(_: &'static BootInfo) -> ! {
    println!("pmu example: {}", P::NAME);
    P::introduce();
    if P::STEPPED {
        println!("  debug exceptions, RIPs and symbols: real");
    } else {
        println!("  interrupts, APICs, RIPs and symbols: real");
    }
    match run::<P>() {
        Ok(true) => exit_qemu(ExitCode::Success),
        Ok(false) => exit_qemu(ExitCode::Failure),
        Err(e) => {
            println!("{} failed: {}", P::NAME, e.message());
            exit_qemu(ExitCode::Failure)
        }
    }
}

/// CPU `cpu`'s profile, its PMIs coming on [`PMI_VECTOR`], with a driver
/// of its own (owner `O`): everything through the crate's seam. The driver
/// is taken for the CPU's share of its PMU, picks the counter that counts
/// core cycles and its overflow rule, the profile runs
/// ([`CycleCounter::profile`]), and the driver is given back with every
/// token.
fn profile<P: Platform, O: Owner>(cpu: usize) -> Result<(), Failure> {
    apic().set_perf_counter_entry(entry());
    P::reset(cpu);
    let local = P::local(cpu);
    let detected = P::detect(cpu).ok_or("no PMU this profiler can drive")?;
    let regs = P::regs(cpu).ok_or("no register backend for this CPU")?;
    let (mut d, c) = local.take::<O>(regs, &detected)?;
    P::prepare(cpu, &mut d)?;
    let mut handles = Arch::<P>::erase_all(c);
    let (n, counting) = P::counter(&d).ok_or("no free counter for the profile's event")?;
    let rule = d
        .overflow_rule(n)
        .ok_or("no overflow rule for the counter")?;
    let h = Arch::<P>::handle(&mut handles, n).ok_or("no handle for the counter")?;
    CycleCounter {
        driver: &mut d,
        handle: h,
        counting,
        sample_every: P::sampling,
        rule,
        periods: &|n| local.periods(n),
        after_halt: P::after_halt::<O>,
    }
    .profile::<P>(cpu)?;
    apic().set_perf_counter_entry(entry().masked());
    let Ok(c) = Arch::<P>::from_erased::<O>(handles) else {
        return Err("a handle is not back unclaimed".into());
    };
    // Every token back: the driver is given back, and the CPU's share of
    // its PMU is free for another driver.
    match P::Local::give_back(d, c) {
        Ok(_) => Ok(()),
        Err(_) => Err("the driver did not take its tokens back".into()),
    }
}

/// The PMI entry, on every CPU: [`service`] with the interrupted state;
/// then the tick is re-armed ([`rearm_tick`]: a model's PMIs come from a
/// tick, and are its last handler), and EOI.
fn on_pmi<P: Platform>(frame: &InterruptFrame) {
    let cpu = smp::cpu().min(1);
    service::<P>(cpu, frame.rip, frame.rbp, frame.rsp);
    rearm_tick(cpu);
    apic().eoi();
}

/// The crate's PMI path for CPU `cpu`'s share of its PMU, the PMU
/// interrupting the code at `rip` with frame pointer `rbp` and stack
/// pointer `rsp`: each sample pushed to this CPU's [`SAMPLES`] with its
/// call chain (a PEBS sample's from its precise IP, the rest of the chain
/// the interrupted code's). From the PMI's interrupt, or, in a stepped
/// profile, from the debug exception after the instruction whose event
/// raised the model's PMI (the workload stopped at the next instruction,
/// where an interrupt taken at once would have stopped it).
pub fn service<P: Platform>(cpu: usize, rip: u64, rbp: u64, rsp: u64) {
    let mut apic = apic();
    let bounds = stacks::bounds(rsp);
    let bounds = P::stack_top(cpu).map_or(bounds, |top| bounds.below(top));
    let chain = CallChain::walk(rip, rbp, rsp, &bounds);
    if let Some(mut regs) = P::regs(cpu) {
        let _ = pmu::arch::handle_pmi(P::local(cpu), &mut regs, &mut apic, entry(), rip, |s| {
            let walked = if s.rip == rip {
                chain
            } else {
                CallChain::walk(s.rip, rbp, rsp, &bounds)
            };
            match P::chain(&s) {
                Some(recorded) => {
                    SAMPLES[cpu].push(s.with_payload(recorded));
                    WALKED[cpu].push(s.with_payload(walked));
                }
                None => {
                    SAMPLES[cpu].push(s.with_payload(walked));
                }
            }
            let taken = &TAKEN[cpu];
            taken.store(taken.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        });
    }
}

/// CPU 1's profile, run there.
fn ap_profile<P: Platform>(cpu: usize) -> u64 {
    pmu::owner!(Cpu1);
    match profile::<P, Cpu1>(cpu) {
        Ok(()) => 0,
        Err(e) => {
            println!("  CPU {cpu}: {}", e.message());
            PROFILE[cpu].failed.store(1, Ordering::SeqCst);
            1
        }
    }
}

/// A share drawn as a bar of `#`, 40 columns for 100 %.
struct Bar(f64);

impl fmt::Display for Bar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = (self.0.clamp(0.0, 1.0) * 40.0 + 0.5) as usize;
        (0..n).try_for_each(|_| f.write_str("#"))
    }
}

/// Prints CPU `cpu`'s profile, and its call chains as `stack cpu<n>`
/// lines (from which the runner draws the flame graph, with the function
/// names of this kernel's ELF file); whether its shares are within 6
/// points of the expected ones (wider with fewer samples aimed at,
/// [`share_bound`]).
fn report<P: Platform>(cpu: usize) -> bool {
    let p = &PROFILE[cpu];
    let mut chains: Tally<DEPTH, CHAINS> = Tally::new();
    let (workloads, symbols) = workloads::<P>();
    // Samples in the workload's functions, and those the mode's check
    // ([`Platform::placed`]) finds elsewhere than it puts them.
    let (mut checked, mut misplaced, mut what_placed) = (0u64, 0u64, "");
    SAMPLES[cpu].drain(|s| {
        let i = symbols.position(s.rip).unwrap_or(3);
        p.counts[i].fetch_add(u64::from(s.periods), Ordering::SeqCst);
        chains.add(&s.payload, u64::from(s.periods));
        if i < 3
            && let Some((ok, what)) = P::placed(s.rip)
        {
            checked += 1;
            misplaced += u64::from(!ok);
            what_placed = what;
        }
    });
    let (what, _, expected) = workloads[cpu];
    let counts: [u64; 4] = core::array::from_fn(|i| p.counts[i].load(Ordering::SeqCst));
    let (cycles, sampled, n) = (
        p.calibration_cycles.load(Ordering::SeqCst),
        p.sampled_cycles.load(Ordering::SeqCst),
        p.n.load(Ordering::SeqCst),
    );
    println!(
        "CPU {cpu} ({}), workload {what}: calibration {} rounds = {cycles} {} ({}) -> sample after {n} {}",
        Arch::<P>::counter_name(p.counter.load(Ordering::SeqCst)).unwrap_or("a counter"),
        p.rounds.load(Ordering::SeqCst),
        P::EVENT,
        source::<P>(),
        unit::<P>(),
    );
    let inside: u64 = counts[..3].iter().sum();
    let total = inside + counts[3];
    // The sampled run lasts until the samples aimed at are taken; its
    // cycles are about the calibration run's where the virtual CPU ran
    // when ready (more by the time the interrupt handlers take, CPL-0 time
    // the cycles count too, as on a Pentium 4), and more where a busy host
    // descheduled it (on a model, whose cycles are TSC time, a tick then
    // carries several periods and gives one sample). Each sample is still
    // exactly N cycles, and the periods are all accounted. (A stepped
    // profile repeats the calibration's rounds: the same branches.)
    let sampled_rounds = p.sampled_rounds.load(Ordering::SeqCst);
    println!(
        "  {total} samples ({} dropped, {} found at halt); the sampled run ({sampled_rounds} rounds) counted {sampled} {}, {}.{:02} x the calibration run's: {} periods of {n}",
        SAMPLES[cpu].dropped(),
        p.at_halt.load(Ordering::SeqCst),
        unit::<P>(),
        sampled / cycles.max(1),
        sampled * 100 / cycles.max(1) % 100,
        sampled / n.max(1),
    );
    let stolen = STOLEN[cpu].load(Ordering::SeqCst);
    if stolen > 0 {
        println!(
            "  the host kept this CPU from running for {} ms of its runs (KVM's steal time), not counted",
            stolen / 1_000_000
        );
    }
    println!(
        "  {:<10} {:>8} {:>8} {:>9}",
        "function", "samples", "share", "expected"
    );
    let target = target_samples();
    let bound = share_bound(inside);
    // At least [`FEWEST_SAMPLES`] (or half the target where fewer are
    // aimed at): a profile, not a handful of samples.
    let fewest = FEWEST_SAMPLES.min(target / 2);
    let mut ok =
        p.failed.load(Ordering::SeqCst) == 0 && inside >= fewest && counts[3] * 20 <= total;
    for (i, expected) in expected.iter().enumerate().rev() {
        let share = counts[i] as f64 / inside.max(1) as f64;
        println!(
            "  {:<10} {:>8} {:>7.1}% {:>8.1}%  {}",
            symbols.name_of(i),
            counts[i],
            share * 100.0,
            expected * 100.0,
            Bar(share)
        );
        // Within 6 points: about 4 standard errors at ~1000 samples (wider
        // with fewer, `share_bound`).
        ok &= (share - expected).abs() < bound;
    }
    println!("  {:<10} {:>8}", "(other)", counts[3]);
    if checked > 0 {
        println!(
            "  skid: {} of the {checked} samples in the workload's functions {what_placed}",
            checked - misplaced
        );
        ok &= misplaced == 0;
    }
    // The flame graph's lines, under a root frame per CPU.
    let root = ["cpu0", "cpu1"][cpu];
    chains.print(Some(root));
    if !WALKED[cpu].is_empty() {
        // The same samples' frame-pointer chains, under a root of their
        // own: the runner checks that the two flame graphs are one.
        let mut walked: Tally<DEPTH, CHAINS> = Tally::new();
        WALKED[cpu].drain(|s| walked.add(&s.payload, u64::from(s.periods)));
        let fp = ["fp-cpu0", "fp-cpu1"][cpu];
        walked.print(Some(fp));
        println!("folded-same: {root} {fp}");
        println!(
            "  the flame graph of {root} is of the LBR's call stacks; {fp}'s, of the same samples' frame-pointer walks, must be the same (the runner's flame_graphs_equal case)"
        );
    }
    if chains.unplaced() > 0 {
        println!(
            "  {} samples without a place in the flame graph (past {CHAINS} distinct call chains)",
            chains.unplaced()
        );
    }
    if inside < TARGET_SAMPLES {
        println!(
            "  {inside} samples in the workload ({target} aimed at): shares within {:.1} points",
            bound * 100.0
        );
    }
    if inside < fewest {
        println!(
            "  only {inside} samples in the workload: the sampled run reached its limit ({SAMPLED_RUN_LIMIT} calibration runs) first"
        );
    }
    if inside < TARGET_SAMPLES {
        println!(
            "  {inside} samples in the workload ({target} aimed at): shares within {:.1} points",
            bound * 100.0
        );
    }
    ok
}

/// Sets up the interrupts and the timer, starts CPU 1, profiles every CPU
/// at once and reports each; whether every CPU's shares were right.
fn run<P: Platform>() -> Result<bool, Failure> {
    apic().enable(Vector::new(0xFF).unwrap());
    idt::set_handler(TIMER_VECTOR, on_tick::<P>);
    idt::set_handler(PMI_VECTOR, on_pmi::<P>);
    let cal = timer::calibrate_best_of(&mut apic_timer(), 11_932, 5);
    TSC_HZ.store(cal.tsc_hz, Ordering::SeqCst);
    let cpus = smp::start_aps(2).unwrap_or_else(|_| smp::online());
    println!(
        "  TSC {} MHz, APIC timer {} MHz, {}",
        cal.tsc_hz / 1_000_000,
        cal.apic_hz / 1_000_000,
        fmt::from_fn(|f| P::machine(f, cpus))
    );
    if P::STEPPED {
        choose_step_rounds::<P>(&cal);
    } else if !P::REAL {
        if steal::offered() {
            println!("  the model's clock: TSC time less the steal time KVM reports");
        } else {
            println!(
                "  the model's clock: TSC time (no hypervisor reports steal time), at most {LATE_TICK} ticks' worth a tick"
            );
        }
        choose_model_tick::<P>(&cal);
    }
    if cpus > 1 {
        smp::run_on(1, ap_profile::<P>)?;
    }
    pmu::owner!(Cpu0);
    let here = profile::<P, Cpu0>(0);
    if cpus > 1 {
        smp::wait(1)?;
    }
    here?;
    let mut ok = true;
    println!(
        "flamegraph title: {}: {} ({}), {} CPU(s)",
        P::NAME,
        P::EVENT,
        source::<P>(),
        cpus.min(2)
    );
    for cpu in 0..cpus.min(2) {
        ok &= report::<P>(cpu);
    }
    println!(
        "{}: {}: every CPU's shares {} within {} of its workload's (counts from the {})",
        P::NAME,
        if ok { "PASS" } else { "FAIL" },
        if ok { "are" } else { "are not" },
        "its bound (6 points at 1000 samples, 4 standard errors)",
        source::<P>()
    );
    Ok(ok)
}

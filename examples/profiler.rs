//! A statistical profiler, the main example, on every CPU at once: each CPU
//! runs a workload of functions with known costs (CPU 0: `work_1x`,
//! `work_2x`, `work_4x`, 1:2:4; CPU 1: `work_4x` and `work_1x` twice,
//! 2:0:4); each CPU's local APIC timer, with the TSC measuring the time
//! that really passed, advances the cycle count (`global_power_events`
//! RUNNING) of its logical processor of one NetBurst PMU model package;
//! each CPU's own driver (one per logical processor, `take_for`) has a
//! sampling counter that overflows every N cycles, the model's PMI for that
//! logical processor goes through that CPU's APIC as a real interrupt, and
//! the driver's handler there records the interrupted RIP. A profile per
//! CPU attributes the samples to function names.
//!
//! N is picked by calibration (VTune's method): one run counting cycles
//! without interrupts, then N = cycles / target samples.
//!
//! QEMU has no PMU: the counters are the crate's model of a Pentium 4 PMU
//! with Hyper-Threading, fed with real time. The interrupts, the APICs, the
//! RIPs and the symbol lookup are real. Booted with one CPU (plain `cargo
//! run`), it profiles that one.
//!
//! ```text
//! cargo qemu profiler
//! ```
//!
//! qemu-run: smp2: -smp 2 -accel tcg,thread=multi
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU64, Ordering};

use hobby::boot::BootInfo;
use hobby::exit::{ExitCode, exit_qemu};
use hobby::idt::{self, InterruptFrame};
use hobby::timer::{self, ApicTimer, Divide, TickClock};
use hobby::workload::{self, SYMBOLS};
use hobby::{pmi, println, smp};
use pmu::apic::{LocalApic, LvtPerfCounter, PmiDelivery, Vector};
use pmu::arch::netburst::driver::{CounterConfig, Counters, NetBurstDriver};
use pmu::arch::netburst::pmi::{handle_pmi, overflow_rule};
use pmu::arch::netburst::{Escr, EventSpec, LogicalProcessor, NetBurstPmu};
use pmu::counter::Owner;
use pmu::model::netburst::{Config, EscrGroup, EventKind, LogicalProcessor as ModelLp, Privilege};
use pmu::model::netburst::{ModelMsr, SharedModel};
use pmu::sampling::{self, SampleBuffer};
use x86_64::instructions::interrupts;

hobby::entry_point!(main);

const TIMER_VECTOR: u8 = 0xE1;
const PMI_VECTOR: u8 = 0xF0;
const TICK_NS: u64 = 200_000;
const TARGET_SAMPLES: u64 = 1000;
/// The calibration run: with [`TARGET_SAMPLES`], a sample period of about
/// 500 µs of model cycles, more than a tick (200 µs) plus the tick and PMI
/// handlers (the model's injection takes 150-300 µs in a debug build, two
/// CPUs sharing it), so that no tick owes more than one sample.
const CALIBRATION_NS: u64 = 500_000_000;
/// `global_power_events` RUNNING, as the model sees it: one per clock.
const RUNNING: EventKind = EventKind::new(EscrGroup::Fsb, 0x13, 1);

/// One package: its model and its one `NetBurstPmu`, shared by both CPUs
/// (each takes its own driver of it, and its PMI handler shares its state).
static MODEL: SharedModel = SharedModel::new(Config::prescott_ht());
// SAFETY: the model is a package of its own, and this is its one value.
static PACKAGE: NetBurstPmu = unsafe { NetBurstPmu::new() };
/// Per CPU: its samples, its tick clock and the cycles a tick carried over.
static SAMPLES: [SampleBuffer<4096>; 2] = [const { SampleBuffer::new() }; 2];
static CLOCK: [TickClock; 2] = [const { TickClock::new() }; 2];
static CARRY: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];
static APIC_COUNT: AtomicU64 = AtomicU64::new(100_000);
static TSC_HZ: AtomicU64 = AtomicU64::new(0);

/// What a CPU's profile found, for the boot CPU to print.
struct Profile {
    rounds: AtomicU64,
    calibration_cycles: AtomicU64,
    n: AtomicU64,
    sampled_cycles: AtomicU64,
    at_halt: AtomicU64,
    counts: [AtomicU64; 4],
    failed: AtomicU64,
}

static PROFILE: [Profile; 2] = [const {
    Profile {
        rounds: AtomicU64::new(0),
        calibration_cycles: AtomicU64::new(0),
        n: AtomicU64::new(0),
        sampled_cycles: AtomicU64::new(0),
        at_halt: AtomicU64::new(0),
        counts: [const { AtomicU64::new(0) }; 4],
        failed: AtomicU64::new(0),
    }
}; 2];

/// A workload: its name, one round of it, and its expected shares of
/// `work_1x`, `work_2x`, `work_4x` (costs 1, 2, 4).
type Workload = (&'static str, fn(), [f64; 3]);

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

fn round_1_2_4() {
    workload::run(1);
}

fn round_2_0_4() {
    workload::work_4x();
    workload::work_1x();
    workload::work_1x();
}

fn apic() -> LocalApic {
    pmi::local_apic()
}

fn apic_timer() -> ApicTimer {
    // SAFETY: as for `apic`: the same identity-mapped page, this CPU's.
    unsafe { ApicTimer::at_default_base() }
}

fn entry() -> LvtPerfCounter {
    LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(PMI_VECTOR).unwrap()))
}

/// CPU `cpu` plays logical processor `cpu` of the package.
fn lp_of(cpu: usize) -> (LogicalProcessor, ModelLp) {
    if cpu == 0 {
        (LogicalProcessor::T0, ModelLp::T0)
    } else {
        (LogicalProcessor::T1, ModelLp::T1)
    }
}

/// The timer tick, on every CPU: the cycles that passed on this CPU since
/// its last tick happen on its logical processor of the model.
fn on_tick(_: &InterruptFrame) {
    let cpu = smp::cpu().min(1);
    advance(cpu, CLOCK[cpu].tick());
    apic_timer().eoi();
}

/// `cycles` more (and those carried over) happen on CPU `cpu`'s logical
/// processor, up to the one that raises its PMI; the rest waits for the
/// next tick, so the PMI is taken before more cycles count. The PMI is sent
/// through this CPU's APIC and taken as soon as the tick handler returns,
/// at the workload's RIP. One sample per tick at most: a tick that lasted
/// several sample periods (a virtual CPU descheduled by a busy host) does
/// not put several samples on one RIP; its cycles are sampled at the next
/// ticks' RIPs instead (the sample period is kept above a tick's cycles,
/// handlers included, see `CALIBRATION_NS`).
fn advance(cpu: usize, cycles: u64) {
    let lp = lp_of(cpu).1;
    let cycles = cycles + CARRY[cpu].swap(0, Ordering::SeqCst);
    let got = MODEL.inject_until_own_pmi(RUNNING.on(lp, Privilege::Os, cycles));
    CARRY[cpu].store(cycles - got.injected, Ordering::SeqCst);
    if got.pmi_pending && MODEL.take_pmi(lp).is_some() {
        pmi::deliver(&mut apic());
    }
}

/// The PMI entry, on every CPU: the driver's handler for this CPU's logical
/// processor, then EOI.
fn on_pmi(frame: &InterruptFrame) {
    let cpu = smp::cpu().min(1);
    let (lp, model_lp) = lp_of(cpu);
    let mut apic = apic();
    if let Some(mut msr) = MODEL.msr_as(model_lp) {
        let _ = handle_pmi(
            PACKAGE.pmi(),
            lp,
            &mut msr,
            &mut apic,
            entry(),
            frame.rip,
            |s| {
                SAMPLES[cpu].push(s);
            },
        );
    }
    apic.eoi();
}

fn main(_: &'static BootInfo) -> ! {
    println!("pmu example: profiler");
    println!("  counter: the NetBurst PMU model (QEMU has no PMU), its clock driven by the TSC;");
    println!("  interrupts, APICs, RIPs and symbols: real");
    match run() {
        Ok(true) => exit_qemu(ExitCode::Success),
        Ok(false) => exit_qemu(ExitCode::Failure),
        Err(e) => {
            println!("profiler failed: {}", e.message());
            exit_qemu(ExitCode::Failure)
        }
    }
}

/// A share drawn as a bar of `#`, 40 columns for 100 %.
struct Bar(f64);

impl core::fmt::Display for Bar {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let n = (self.0.clamp(0.0, 1.0) * 40.0 + 0.5) as usize;
        (0..n).try_for_each(|_| f.write_str("#"))
    }
}

/// Runs `round` for `rounds` rounds (or, with `rounds == 0`, for about
/// `ns`) on CPU `cpu`, with its timer ticking; returns the rounds run.
fn profile_run(cpu: usize, round: fn(), rounds: u64, ns: u64) -> u64 {
    let mut timer = apic_timer();
    let count = APIC_COUNT.load(Ordering::SeqCst) as u32;
    CARRY[cpu].store(0, Ordering::SeqCst);
    CLOCK[cpu].start();
    timer.start_periodic(Vector::new(TIMER_VECTOR).unwrap(), Divide::By1, count);
    interrupts::enable();
    let mut done = 0;
    if rounds > 0 {
        while done < rounds {
            round();
            done += 1;
        }
    } else {
        let tsc_hz = TSC_HZ.load(Ordering::SeqCst);
        let limit = (tsc_hz as u128 * ns as u128 / 1_000_000_000) as u64;
        let start = timer::rdtsc();
        while timer::rdtsc().wrapping_sub(start) < limit {
            round();
            done += 1;
        }
    }
    interrupts::disable();
    timer.stop();
    done
}

/// The profile of CPU `cpu`, with its own driver (owner `O`) for its
/// logical processor: a calibration run counting cycles, then the sampled
/// run; the findings go to `PROFILE[cpu]`.
fn profile<O: Owner>(cpu: usize) -> Result<(), hobby::test::Failure> {
    let (lp, _) = lp_of(cpu);
    let (_, round, _) = WORKLOADS[cpu];
    apic().set_perf_counter_entry(entry());
    let info = MODEL.detect().ok_or("detection on the model failed")?;
    let msr: ModelMsr<'static> = MODEL
        .msr_as(lp_of(cpu).1)
        .ok_or("no such logical processor")?;
    let (mut pmu, c) = NetBurstDriver::<O, _>::take_for(lp, msr, &info, &PACKAGE)?;
    let event: EventSpec = pmu::netburst_event!("global_power_events:RUNNING:k");
    // T0 counts on counter 0 (FSB_ESCR0), T1 on counter 2 (FSB_ESCR1).
    let (n_counter, escr) = if cpu == 0 {
        (0, Escr::FsbEscr0)
    } else {
        (2, Escr::FsbEscr1)
    };
    let counting = CounterConfig::counting(event, escr).on(lp);
    let mut handles = c.erase_all();
    let h = &mut handles[n_counter];

    // Calibration: count the run's cycles without interrupts, for about
    // `CALIBRATION_NS` (the sampled run repeats the same rounds).
    h.configure(&mut pmu, &counting)?;
    h.enable(&mut pmu)?;
    let rounds = profile_run(cpu, round, 0, CALIBRATION_NS);
    h.halt(&mut pmu)?;
    let cycles = h.read(&mut pmu)? + CARRY[cpu].load(Ordering::SeqCst);
    h.release(&mut pmu)?;
    let n = sampling::calibrate(cycles, TARGET_SAMPLES, overflow_rule())?;

    // The profile.
    h.configure(&mut pmu, &counting.sampling(n))?;
    h.enable(&mut pmu)?;
    profile_run(cpu, round, rounds, 0);
    h.halt(&mut pmu)?;
    let (owed, residual) = n.split(h.read(&mut pmu)?);
    let counter = n_counter as u8;
    let sampled = (PACKAGE.pmi().periods(counter) + owed) * n.get()
        + residual
        + CARRY[cpu].load(Ordering::SeqCst);
    let p = &PROFILE[cpu];
    SAMPLES[cpu].drain(|s| {
        let i = SYMBOLS.position(s.rip as usize).unwrap_or(3);
        p.counts[i].fetch_add(u64::from(s.periods), Ordering::SeqCst);
    });
    p.rounds.store(rounds, Ordering::SeqCst);
    p.calibration_cycles.store(cycles, Ordering::SeqCst);
    p.n.store(n.get(), Ordering::SeqCst);
    p.sampled_cycles.store(sampled, Ordering::SeqCst);
    p.at_halt
        .store(PACKAGE.pmi().periods_at_halt(counter), Ordering::SeqCst);
    h.release(&mut pmu)?;
    // Every token back: the driver is given back, and `lp` is free for
    // another driver of the package.
    let Ok(c) = Counters::from_erased(handles) else {
        return Err("a handle is not back unclaimed".into());
    };
    let _msr = pmu.give_back(c);
    Ok(())
}

fn ap_profile(cpu: usize) -> u64 {
    pmu::owner!(Cpu1);
    match profile::<Cpu1>(cpu) {
        Ok(()) => 0,
        Err(e) => {
            println!("  CPU {cpu}: {}", e.message());
            PROFILE[cpu].failed.store(1, Ordering::SeqCst);
            1
        }
    }
}

/// Prints CPU `cpu`'s profile; whether its shares are within 6 points of
/// the expected ones.
fn report(cpu: usize) -> bool {
    let p = &PROFILE[cpu];
    let (what, _, expected) = WORKLOADS[cpu];
    let counts: [u64; 4] = core::array::from_fn(|i| p.counts[i].load(Ordering::SeqCst));
    let (cycles, sampled, n) = (
        p.calibration_cycles.load(Ordering::SeqCst),
        p.sampled_cycles.load(Ordering::SeqCst),
        p.n.load(Ordering::SeqCst),
    );
    println!(
        "CPU {cpu} (logical processor T{cpu}), workload {what}: calibration {} rounds = {cycles} cycles (model) -> sample after {n} cycles",
        p.rounds.load(Ordering::SeqCst)
    );
    let inside: u64 = counts[..3].iter().sum();
    let total = inside + counts[3];
    // Why not exactly the target: the model's cycles are real (TSC) time,
    // and the sampled run is longer than the calibration run by the time its
    // interrupt handlers take, which is CPL-0 time RUNNING counts too, as it
    // would on a Pentium 4. Each sample is still exactly N cycles.
    println!(
        "  {total} samples ({} dropped, {} found at halt); the sampled run counted {sampled} cycles, {}.{:02} x the calibration run's: {} periods of {n}",
        SAMPLES[cpu].dropped(),
        p.at_halt.load(Ordering::SeqCst),
        sampled / cycles.max(1),
        sampled * 100 / cycles.max(1) % 100,
        sampled / n.max(1),
    );
    println!(
        "  {:<10} {:>8} {:>8} {:>9}",
        "function", "samples", "share", "expected"
    );
    let mut ok = p.failed.load(Ordering::SeqCst) == 0
        && inside >= TARGET_SAMPLES / 2
        && counts[3] * 20 <= total;
    for (i, expected) in expected.iter().enumerate().rev() {
        let share = counts[i] as f64 / inside.max(1) as f64;
        println!(
            "  {:<10} {:>8} {:>7.1}% {:>8.1}%  {}",
            SYMBOLS.get(i).name,
            counts[i],
            share * 100.0,
            expected * 100.0,
            Bar(share)
        );
        // Within 6 points: about 4 standard errors at ~1000 samples.
        ok &= (share - expected).abs() < 0.06;
    }
    println!("  {:<10} {:>8}", "(other)", counts[3]);
    ok
}

fn run() -> Result<bool, hobby::test::Failure> {
    apic().enable(Vector::new(0xFF).unwrap());
    idt::set_handler(TIMER_VECTOR, on_tick);
    idt::set_handler(PMI_VECTOR, on_pmi);
    let cal = timer::calibrate_best_of(&mut apic_timer(), 11_932, 5);
    APIC_COUNT.store(
        u64::from(cal.count_for(TICK_NS, Divide::By1)),
        Ordering::SeqCst,
    );
    TSC_HZ.store(cal.tsc_hz, Ordering::SeqCst);
    let cpus = smp::start_aps(2).unwrap_or_else(|_| smp::online());
    println!(
        "  TSC {} MHz, APIC timer {} MHz, tick {} us, {cpus} CPU(s), one NetBurst package (model) with a driver per logical processor",
        cal.tsc_hz / 1_000_000,
        cal.apic_hz / 1_000_000,
        TICK_NS / 1000
    );
    if cpus > 1 {
        smp::run_on(1, ap_profile)?;
    }
    pmu::owner!(Cpu0);
    let here = profile::<Cpu0>(0);
    if cpus > 1 {
        smp::wait(1)?;
    }
    here?;
    let mut ok = true;
    for cpu in 0..cpus.min(2) {
        ok &= report(cpu);
    }
    println!(
        "profiler: {}: every CPU's shares {} within 6 points of its workload's (counts from the model)",
        if ok { "PASS" } else { "FAIL" },
        if ok { "are" } else { "are not" }
    );
    Ok(ok)
}

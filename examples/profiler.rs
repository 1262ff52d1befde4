//! A statistical profiler, the main example: a workload of three functions
//! whose costs are 1:2:4 runs; the local APIC timer, with the TSC measuring
//! the time that really passed, advances the NetBurst PMU model's cycle
//! count (`global_power_events` RUNNING); the driver's sampling counter
//! overflows every N cycles, the model's PMI goes through the real APIC as a
//! real interrupt, and the driver's handler records the interrupted RIP.
//! The profile attributes the samples to function names.
//!
//! N is picked by calibration (VTune's method): one run counting cycles
//! without interrupts, then N = cycles / target samples.
//!
//! QEMU has no PMU: the counter is the crate's model of a Pentium 4 PMU, fed
//! with real time. The interrupts, the APIC, the RIPs and the symbol lookup
//! are real.
//!
//! ```text
//! cargo qemu profiler
//! ```
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU64, Ordering};

use hobby::boot::BootInfo;
use hobby::exit::{ExitCode, exit_qemu};
use hobby::idt::{self, InterruptFrame};
use hobby::timer::{self, ApicTimer, Divide, TickClock};
use hobby::workload::{self, EXPECTED_SHARES, SYMBOLS};
use hobby::{pmi, println};
use pmu::apic::{LocalApic, LvtPerfCounter, PmiDelivery, Vector};
use pmu::arch::netburst::driver::{CounterConfig, NetBurstDriver};
use pmu::arch::netburst::pmi::{PmiState, handle_pmi, overflow_rule};
use pmu::arch::netburst::{Escr, EventSpec, LogicalProcessor};
use pmu::model::netburst::{Config, EscrGroup, EventKind, LogicalProcessor as ModelLp, Privilege};
use pmu::model::netburst::{ModelMsr, SharedModel};
use pmu::sampling::{self, SampleBuffer};
use x86_64::instructions::interrupts;

hobby::entry_point!(main);

const TIMER_VECTOR: u8 = 0xE0;
const PMI_VECTOR: u8 = 0xF0;
const TICK_NS: u64 = 100_000;
const TARGET_SAMPLES: u64 = 1500;
/// `global_power_events` RUNNING, as the model sees it: one per clock.
const RUNNING: EventKind = EventKind::new(EscrGroup::Fsb, 0x13, 1);

static MODEL: SharedModel = SharedModel::new(Config::prescott_ht());
static PMI: PmiState = PmiState::new();
static SAMPLES: SampleBuffer<4096> = SampleBuffer::new();
static CLOCK: TickClock = TickClock::new();
static CARRY: AtomicU64 = AtomicU64::new(0);
static APIC_COUNT: AtomicU64 = AtomicU64::new(100_000);

pmu::owner!(
    /// The (model's) NetBurst package this example drives.
    Package0
);

type Driver = NetBurstDriver<'static, Package0, ModelMsr<'static>>;

fn apic() -> LocalApic {
    pmi::local_apic()
}

fn apic_timer() -> ApicTimer {
    // SAFETY: as for `apic`: the same identity-mapped page.
    unsafe { ApicTimer::at_default_base() }
}

fn entry() -> LvtPerfCounter {
    LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(PMI_VECTOR).unwrap()))
}

/// The timer tick: the cycles that passed since the last tick happen on the
/// model, up to the one that raises a PMI (the rest waits for the next tick,
/// so the PMI is taken before more cycles count). The PMI is sent through
/// the APIC and taken as soon as this handler returns, at the workload's RIP.
fn on_tick(_: &InterruptFrame) {
    let cycles = CLOCK.tick() + CARRY.swap(0, Ordering::SeqCst);
    let got = MODEL.inject_until_pmi(RUNNING.on(ModelLp::T0, Privilege::Os, cycles));
    CARRY.store(cycles - got.injected, Ordering::SeqCst);
    if got.pmi_pending && MODEL.take_pmi(ModelLp::T0).is_some() {
        pmi::deliver(&mut apic());
    }
    apic_timer().eoi();
}

/// The kernel's PMI entry: the driver's handler, then EOI.
fn on_pmi(frame: &InterruptFrame) {
    let mut apic = apic();
    let _ = handle_pmi(
        &PMI,
        LogicalProcessor::T0,
        &mut MODEL.msr(),
        &mut apic,
        entry(),
        frame.rip,
        |s| {
            SAMPLES.push(s);
        },
    );
    apic.eoi();
}

fn main(_: &'static BootInfo) -> ! {
    println!("pmu example: profiler");
    println!("  counter: the NetBurst PMU model (QEMU has no PMU), its clock driven by the TSC;");
    println!("  interrupts, APIC, RIPs and symbols: real");
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

/// Runs the workload for `rounds` rounds (or, with `rounds == 0`, for about
/// `ns`), with the timer ticking; returns the rounds run.
fn profile_run(rounds: u64, ns: u64, tsc_hz: u64) -> u64 {
    let mut timer = apic_timer();
    let count = APIC_COUNT.load(Ordering::SeqCst) as u32;
    CARRY.store(0, Ordering::SeqCst);
    CLOCK.start();
    timer.start_periodic(Vector::new(TIMER_VECTOR).unwrap(), Divide::By1, count);
    interrupts::enable();
    let mut done = 0;
    if rounds > 0 {
        while done < rounds {
            workload::run(1);
            done += 1;
        }
    } else {
        let limit = (tsc_hz as u128 * ns as u128 / 1_000_000_000) as u64;
        let start = timer::rdtsc();
        while timer::rdtsc().wrapping_sub(start) < limit {
            workload::run(1);
            done += 1;
        }
    }
    interrupts::disable();
    timer.stop();
    done
}

fn run() -> Result<bool, hobby::test::Failure> {
    apic().enable(Vector::new(0xFF).unwrap());
    apic().set_perf_counter_entry(entry());
    idt::set_handler(TIMER_VECTOR, on_tick);
    idt::set_handler(PMI_VECTOR, on_pmi);
    let cal = timer::calibrate_best_of(&mut apic_timer(), 11_932, 5);
    APIC_COUNT.store(
        u64::from(cal.count_for(TICK_NS, Divide::By1)),
        Ordering::SeqCst,
    );
    println!(
        "  TSC {} MHz, APIC timer {} MHz, tick {} us",
        cal.tsc_hz / 1_000_000,
        cal.apic_hz / 1_000_000,
        TICK_NS / 1000
    );

    let cpu = MODEL.detect().ok_or("detection on the model failed")?;
    let (mut pmu, c) = Driver::take(MODEL.msr(), &cpu, &PMI)?;
    let event: EventSpec = "global_power_events:RUNNING:k".parse()?;
    let counting = CounterConfig::counting(event, Escr::FsbEscr0);

    // Calibration: count the run's cycles without interrupts, for about
    // 250 ms (the sampled run repeats the same rounds; ~1500 samples need
    // no longer a run, and the whole profile stays under a second).
    let c0 = c.c0.configure(&mut pmu, &counting)?;
    let c0 = c0.enable(&mut pmu)?;
    let rounds = profile_run(0, 250_000_000, cal.tsc_hz);
    let c0 = c0.halt(&mut pmu)?;
    let cycles = c0.read(&mut pmu)? + CARRY.load(Ordering::SeqCst);
    let c0 = c0.release(&mut pmu)?;
    let n = sampling::calibrate(cycles, TARGET_SAMPLES, overflow_rule())?;
    println!(
        "  calibration: {rounds} rounds = {cycles} cycles (model) -> sample after {} cycles for ~{TARGET_SAMPLES} samples",
        n.get()
    );

    // The profile.
    let c0 = c0.configure(&mut pmu, &counting.sampling(n))?;
    let c0 = c0.enable(&mut pmu)?;
    profile_run(rounds, 0, cal.tsc_hz);
    let c0 = c0.halt(&mut pmu)?;
    // The cycles the sampled run counted: every completed period plus the
    // residual (and the events the tick carried over).
    let (owed, residual) = n.split(c0.read(&mut pmu)?);
    let sampled_cycles =
        (PMI.periods(0) + owed) * n.get() + residual + CARRY.load(Ordering::SeqCst);
    let mut counts = [0u64; 4];
    SAMPLES.drain(|s| {
        let i = SYMBOLS.position(s.rip as usize).unwrap_or(3);
        counts[i] += u64::from(s.periods);
    });
    let inside: u64 = counts[..3].iter().sum();
    let total = inside + counts[3];
    println!(
        "  {total} samples ({} dropped, {} found at halt) for a target of ~{TARGET_SAMPLES}:",
        SAMPLES.dropped(),
        PMI.periods_at_halt(0)
    );
    // Why not exactly the target: the model's cycles are real (TSC) time,
    // and the sampled run is longer than the calibration run by the time its
    // interrupt handlers take, which is CPL-0 time RUNNING counts too, as it
    // would on a Pentium 4. Each sample is still exactly N cycles.
    println!(
        "  the sampled run counted {sampled_cycles} cycles, {}.{:02} x the calibration run's \
         (the PMI and timer handlers' cycles count too): {} periods of {}",
        sampled_cycles / cycles.max(1),
        sampled_cycles * 100 / cycles.max(1) % 100,
        sampled_cycles / n.get(),
        n.get()
    );
    println!(
        "  {:<10} {:>8} {:>8} {:>9}",
        "function", "samples", "share", "expected"
    );
    let mut ok = inside >= TARGET_SAMPLES / 2 && counts[3] * 20 <= total;
    for (i, expected) in EXPECTED_SHARES.iter().enumerate().rev() {
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
    println!(
        "profiler: {}: the shares {} within 6 points of the workload's 1:2:4 ({total} samples, counts from the model)",
        if ok { "PASS" } else { "FAIL" },
        if ok { "are" } else { "are not" }
    );
    let _ = c0.release(&mut pmu);
    Ok(ok)
}

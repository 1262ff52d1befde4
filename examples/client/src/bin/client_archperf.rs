//! The client kernel on Intel's architectural PMU: count retired
//! instructions on the PMU model, sample them every 1000 with overflow PMIs
//! through the real local APIC, and check the counts. The same steps as the
//! NetBurst client (`src/main.rs`), with the architecture's own types;
//! QEMU has no PMU, so every count here is the model's.
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU64, Ordering};

use hobby::idt::{self, InterruptFrame};
use hobby::test::Outcome;
use hobby::{case, check_eq, pmi, println};
use pmu::apic::{LvtPerfCounter, PmiDelivery, Vector};
use pmu::arch::archperf::ArchPerfPmu;
use pmu::arch::archperf::driver::{ArchPerfDriver, CounterConfig, Counters};
use pmu::arch::handle_pmi;
use pmu::model::archperf::{Config, Event, SharedArchPerfModel};
use pmu::sampling::SampleAfter;

hobby::entry_point!(main);
pmu::owner!(Cpu0);

/// A Skylake's PMU: four general counters of 48 bits, three fixed ones.
static MODEL: SharedArchPerfModel = SharedArchPerfModel::new(Config::skylake());
// SAFETY: the model is a logical processor of its own, and this is its one
// value.
static CPU0: ArchPerfPmu = unsafe { ArchPerfPmu::new() };
static SAMPLES: AtomicU64 = AtomicU64::new(0);
const ENTRY: LvtPerfCounter = LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(0xF0).unwrap()));

fn main(_: &'static hobby::boot::BootInfo) -> ! {
    pmi::local_apic().enable(Vector::new(0xFF).unwrap());
    pmi::local_apic().set_perf_counter_entry(ENTRY);
    idt::set_handler(0xF0, on_pmi);
    hobby::test::run("client_archperf", &[case!(count_and_sample)])
}

/// The PMI: the driver's handler (one `IA32_PERF_GLOBAL_STATUS` read, the
/// overflowed counters re-armed, one acknowledgement, the LVT entry
/// unmasked), then the EOI.
fn on_pmi(frame: &InterruptFrame) {
    let mut apic = pmi::local_apic();
    let r = handle_pmi(&CPU0, &mut MODEL.msr(), &mut apic, ENTRY, frame.rip, |_| {
        SAMPLES.fetch_add(1, Ordering::Relaxed);
    });
    apic.eoi();
    r.expect("the model refused an access");
}

fn count_and_sample() -> Outcome {
    let cpu = MODEL.detect().ok_or("the model has no architectural PMU")?;
    let (mut pmu, counters) = ArchPerfDriver::<Cpu0, _>::take(MODEL.msr(), &cpu, &CPU0)?;
    // Fixed counter 0 counts retired instructions; fixed counters have
    // CPUID's fixed width, whose overflow rule the driver gives.
    let f0 = counters.f0.ok_or("no fixed counter 0")?;
    let every = SampleAfter::new(1000, pmu.fixed_overflow_rule())?;
    let config = CounterConfig::counting("instructions".parse()?).sampling(every);
    let f0 = f0.configure(&mut pmu, &config)?.enable(&mut pmu)?;
    let pmis = pmi::inject(&MODEL, Event::new(0xC0, 0x00, 5500))?;
    let (owed, residual) = every.split(f0.read(&mut pmu)?);
    println!(
        "client_archperf: 5500 instructions -> {pmis} PMIs, {} samples, {residual} events into the next period (model)",
        SAMPLES.load(Ordering::Relaxed)
    );
    check_eq!(
        // Handle numbers are the counters' GLOBAL bits: fixed counter 0 is 32.
        (pmis, pmu.pmi_state().periods(32), owed, residual),
        (5, 5, 0, 500)
    );
    check_eq!(SAMPLES.load(Ordering::Relaxed), 5);
    let f0 = f0.release(&mut pmu)?;
    let _msr = pmu.give_back(Counters {
        f0: Some(f0),
        ..counters
    });
    Ok(())
}

//! A kernel as a user of `pmu` writes it, outside the crate's workspace:
//! count a NetBurst event on the PMU model, sample it every 1000 events with
//! overflow PMIs through the real local APIC, and check the counts. QEMU
//! has no PMU, so every count here is the model's.
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU64, Ordering};

use hobby::idt::{self, InterruptFrame};
use hobby::test::Outcome;
use hobby::{case, check_eq, pmi, println};
use pmu::apic::{LvtPerfCounter, PmiDelivery, Vector};
use pmu::arch::handle_pmi;
use pmu::arch::netburst::driver::{CounterConfig, Counters, NetBurstDriver};
use pmu::arch::netburst::pmi::overflow_rule;
use pmu::arch::netburst::{Escr, LogicalProcessor, NetBurstPmu};
use pmu::model::netburst::{
    Config, EventKind, LogicalProcessor as Lp, Privilege, SharedNetBurstModel,
};
use pmu::sampling::SampleAfter;

hobby::entry_point!(main);
pmu::owner!(Package0);

static MODEL: SharedNetBurstModel = SharedNetBurstModel::new(Config::prescott_ht());
// SAFETY: the model is a package of its own, and this is its one value.
static PACKAGE: NetBurstPmu = unsafe { NetBurstPmu::new() };
static SAMPLES: AtomicU64 = AtomicU64::new(0);
const ENTRY: LvtPerfCounter = LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(0xF0).unwrap()));

fn main(_: &'static hobby::boot::BootInfo) -> ! {
    pmi::local_apic().enable(Vector::new(0xFF).unwrap());
    pmi::local_apic().set_perf_counter_entry(ENTRY);
    idt::set_handler(0xF0, on_pmi);
    hobby::test::run("client", &[case!(count_and_sample)])
}

fn on_pmi(frame: &InterruptFrame) {
    let mut apic = pmi::local_apic();
    let r = handle_pmi(
        PACKAGE.logical(LogicalProcessor::T0),
        &mut MODEL.msr(),
        &mut apic,
        ENTRY,
        frame.rip,
        |_| {
            SAMPLES.fetch_add(1, Ordering::Relaxed);
        },
    );
    apic.eoi();
    r.expect("the model refused an access");
}

fn count_and_sample() -> Outcome {
    let cpu = MODEL.detect().ok_or("the model is not a usable NetBurst")?;
    let (mut pmu, counters) = NetBurstDriver::<Package0, _>::take(MODEL.msr(), &cpu, &PACKAGE)?;
    let event = pmu::netburst_event!("global_power_events:RUNNING:k");
    let every = SampleAfter::new(1000, overflow_rule())?;
    let config = CounterConfig::counting(event, Escr::FsbEscr0).sampling(every);
    let c0 = counters.c0.configure(&mut pmu, &config)?.enable(&mut pmu)?;
    let running = EventKind::for_spec(&event, Escr::FsbEscr0).ok_or("no model event")?;
    let pmis = pmi::inject(&MODEL, running.on(Lp::T0, Privilege::Os, 5500))?;
    let (owed, residual) = every.split(c0.read(&mut pmu)?);
    println!(
        "client: 5500 events -> {pmis} PMIs, {} samples, {residual} events into the next period (model)",
        SAMPLES.load(Ordering::Relaxed)
    );
    check_eq!(
        (pmis, PACKAGE.pmi().periods(0), owed, residual),
        (5, 5, 0, 500)
    );
    check_eq!(SAMPLES.load(Ordering::Relaxed), 5);
    let c0 = c0.release(&mut pmu)?;
    let _msr = pmu.give_back(Counters { c0, ..counters });
    Ok(())
}

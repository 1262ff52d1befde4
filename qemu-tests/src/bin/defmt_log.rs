//! defmt end to end: PMU samples and events logged with `defmt` on COM2
//! (`hobby::defmt_serial`), decoded on the host from this kernel's ELF with
//! the `defmt-decoder` library, and compared with the text the kernel
//! expects (the `defmt-expect:` lines it prints on COM1, rendered with
//! `core::fmt` from the same values). Counts come from the NetBurst model.
//!
//! defmt: com2
#![no_std]
#![no_main]

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
use pmu::sampling::{SampleAfter, SampleBuffer};

hobby::entry_point!(main);
hobby::defmt_global_logger!();
pmu::owner!(Package0);

static MODEL: SharedNetBurstModel = SharedNetBurstModel::new(Config::prescott_ht());
// SAFETY: the model is a package of its own, and this is its one value.
static PACKAGE: NetBurstPmu = unsafe { NetBurstPmu::new() };
static SAMPLES: SampleBuffer<16> = SampleBuffer::new();
const ENTRY: LvtPerfCounter = LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(0xF0).unwrap()));

fn main(_: &'static hobby::boot::BootInfo) -> ! {
    pmi::local_apic().enable(Vector::new(0xFF).unwrap());
    pmi::local_apic().set_perf_counter_entry(ENTRY);
    idt::set_handler(0xF0, on_pmi);
    hobby::test::run("defmt_log", &[case!(samples_and_events_logged_with_defmt)])
}

fn on_pmi(frame: &InterruptFrame) {
    let mut apic = pmi::local_apic();
    let r = handle_pmi(
        PACKAGE.logical(LogicalProcessor::T0),
        &mut MODEL.msr(),
        &mut apic,
        ENTRY,
        frame.rip,
        |s| {
            SAMPLES.push(s.with_payload(()));
        },
    );
    apic.eoi();
    r.expect("the model refused an access");
}

/// Logs with defmt (`println!`: not subject to `DEFMT_LOG` filtering, whose
/// default keeps only errors) and prints the text the host must decode.
macro_rules! log_and_expect {
    ($defmt:literal, $fmt:literal, $($arg:expr),*) => {{
        defmt::println!($defmt, $($arg),*);
        println!(concat!("defmt-expect: ", $fmt), $($arg),*);
    }};
}

fn samples_and_events_logged_with_defmt() -> Outcome {
    let cpu = MODEL.detect().ok_or("the model is not a usable NetBurst")?;
    let (mut pmu, counters) = NetBurstDriver::<Package0, _>::take(MODEL.msr(), &cpu, &PACKAGE)?;
    let event = pmu::netburst_event!("global_power_events:RUNNING:k");
    let every = SampleAfter::new(100, overflow_rule())?;
    let config = CounterConfig::counting(event, Escr::FsbEscr0).sampling(every);
    let c0 = counters.c0.configure(&mut pmu, &config)?.enable(&mut pmu)?;
    log_and_expect!(
        "event {=str}: ESCR {=u64:#x}, CCCR {=u64:#x}, sample after {=u64}",
        "event {}: ESCR {:#x}, CCCR {:#x}, sample after {}",
        event.event().name(),
        event.escr_bits(),
        c0.programmed().cccr().bits(),
        every.get()
    );
    let running = EventKind::for_spec(&event, Escr::FsbEscr0).ok_or("no model event")?;
    let pmis = pmi::inject(&MODEL, running.on(Lp::T0, Privilege::Os, 350))?;
    let mut logged = 0u32;
    SAMPLES.drain(|s| {
        log_and_expect!(
            "sample: counter {=u8}, {=u32} period(s), rip {=u64:#x}",
            "sample: counter {}, {} period(s), rip {:#x}",
            s.counter,
            s.periods,
            s.rip
        );
        // The derived `defmt::Format` of the crate's type, too.
        defmt::println!("{}", s);
        println!("defmt-expect: {:?}", s);
        logged += 1;
    });
    let count = c0.read(&mut pmu)?;
    log_and_expect!(
        "counter 0 holds {=u64:#x} (model)",
        "counter 0 holds {:#x} (model)",
        count
    );
    check_eq!((pmis, logged), (3, 3));
    let c0 = c0.release(&mut pmu)?;
    let _msr = pmu.give_back(Counters { c0, ..counters });
    Ok(())
}

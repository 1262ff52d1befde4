//! The NetBurst PMU model inside a real kernel: an event programmed with the
//! driver's encoders (`pmu::arch::netburst`) counts on the model (written
//! independently from the manuals), overflows after its sample-after value,
//! and its PMI arrives as a real interrupt through the APIC's LVT
//! performance-counter entry. All counts here come from the model.
#![no_std]
#![no_main]

use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use hobby::boot::BootInfo;
use hobby::idt::{self, InterruptFrame};
use hobby::pmi::{self, Delivery, Taken};
use hobby::test::Outcome;
use hobby::{case, check, check_eq, fail, println};
use pmu::access::MsrAccess;
use pmu::apic::{LocalApic, LvtPerfCounter, PmiDelivery, Vector};
use pmu::arch::netburst::EventSpec;
use pmu::model::netburst::{
    Config, EscrGroup, EventKind, LogicalProcessor, NetBurstModel, Privilege,
};

hobby::entry_point!(main);

const PMI_VECTOR: u8 = 0xF0;
const MSR_BPU_COUNTER0: u32 = 0x300;
const MSR_BPU_CCCR0: u32 = 0x360;
const MSR_FSB_ESCR0: u32 = 0x3A2;
const OVF_PMI_T0: u64 = 1 << 26;
const OVF: u64 = 1 << 31;

static PMIS: AtomicU32 = AtomicU32::new(0);
static LAST_RIP: AtomicU64 = AtomicU64::new(0);

fn main(_: &'static BootInfo) -> ! {
    println!("model_pmi: counts below come from the NetBurst PMU model, not hardware");
    hobby::test::run(
        "model_pmi",
        &[case!(
            driver_encoded_event_overflows_the_model_into_a_real_pmi
        )],
    )
}

fn handler(frame: &InterruptFrame) {
    LAST_RIP.store(frame.rip, Ordering::SeqCst);
    PMIS.fetch_add(1, Ordering::SeqCst);
    // SAFETY: the same identity-mapped xAPIC page as in the case; this
    // handler only signals EOI.
    let mut apic =
        unsafe { LocalApic::new(NonNull::new(pmu::apic::DEFAULT_BASE as *mut u8).unwrap()) };
    apic.eoi();
}

fn driver_encoded_event_overflows_the_model_into_a_real_pmi() -> Outcome {
    // SAFETY: the boot code identity-maps the xAPIC page, uncacheable; one
    // CPU, and the handler only touches EOI.
    let mut apic =
        unsafe { LocalApic::new(NonNull::new(pmu::apic::DEFAULT_BASE as *mut u8).unwrap()) };
    apic.enable(Vector::new(0xFF).unwrap());
    apic.set_perf_counter_entry(LvtPerfCounter::new(PmiDelivery::Fixed(
        Vector::new(PMI_VECTOR).unwrap(),
    )));
    idt::set_handler(PMI_VECTOR, handler);

    let Ok(spec) = "netburst::global_power_events:RUNNING:k".parse::<EventSpec>() else {
        fail!("event string rejected")
    };
    let mut model = NetBurstModel::new(Config::prescott_ht());
    // Sample after N = 100 events: preset -(N-1), 40 bits wide (SDM 18.15.5.8).
    let n = 100u64;
    let preset = (1u64 << 40) - (n - 1);
    let programmed = model
        .write_msr(MSR_FSB_ESCR0, spec.escr_bits())
        .and_then(|()| model.write_msr(MSR_BPU_COUNTER0, preset))
        .and_then(|()| model.write_msr(MSR_BPU_CCCR0, spec.cccr_bits() | OVF_PMI_T0));
    check!(
        programmed.is_ok(),
        "the model rejected the driver's images: {programmed:?}"
    );

    // global_power_events (select 13H) with RUNNING (mask bit 0), at CPL 0.
    let running = EventKind::new(EscrGroup::Fsb, 0x13, 1);
    PMIS.store(0, Ordering::SeqCst);
    model.inject(running.on(LogicalProcessor::T0, Privilege::Os, n - 1));
    let cccr = model.read_msr(MSR_BPU_CCCR0).unwrap_or(0);
    check!(cccr & OVF != 0, "no OVF after N-1 events: CCCR {cccr:#x}");
    check!(
        model.take_pmi(LogicalProcessor::T0).is_none(),
        "PMI before the next event"
    );
    model.inject(running.on(LogicalProcessor::T0, Privilege::Os, 1));
    let Some(line) = model.take_pmi(LogicalProcessor::T0) else {
        fail!("no PMI on the event after the overflow")
    };
    check_eq!(line.counters, 1);
    check_eq!(pmi::deliver(&mut apic), Delivery::Vector(PMI_VECTOR));
    // A real CPU takes the interrupt some instructions after the write that
    // sent it (TCG at the next boundary): wait for it, boundedly; it
    // interrupts an instruction of the wait's loop.
    pmi::wait_for_interrupt(&PMIS, 0, Taken::Vector);
    check_eq!(PMIS.load(Ordering::SeqCst), 1);
    let rip = LAST_RIP.load(Ordering::SeqCst);
    let window = pmi::wait_window();
    check!(
        window.contains(&rip),
        "RIP {rip:#x} outside the wait's loop [{:#x}, {:#x}]",
        window.start(),
        window.end()
    );
    check!(
        apic.perf_counter_entry().is_masked(),
        "LVT entry masked by the PMI"
    );
    let count = model.rdpmc(0).unwrap_or(u64::MAX);
    println!("model_pmi: PMI at RIP {rip:#x}, counter 0 = {count} after {n} events (model)");
    check_eq!(count, 1);
    Ok(())
}

//! pmu-hobby's own test kernel: `tests/boot.rs` builds it for
//! x86_64-unknown-none in a scratch crate that depends on this package
//! alone (as a user's kernel would) and boots it under QEMU with
//! `pmu-qemu-run`'s library. Its cases exercise what the library promises:
//! the PVH boot and the console (it runs at all), the case protocol (a
//! case that must fail says why), catching an exception inside a case, and
//! a model's PMI through the real local APIC to an IDT handler.
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU32, Ordering};

use hobby::idt::{self, InterruptFrame};
use hobby::pmi::{self, Delivery};
use hobby::pmu::apic::{LvtPerfCounter, PmiDelivery, Vector};
use hobby::test::Outcome;
use hobby::{case, check, check_eq};

hobby::entry_point!(main);

const PMI_VECTOR: u8 = 0xF0;
static HANDLED: AtomicU32 = AtomicU32::new(0);

fn main(_: &'static hobby::boot::BootInfo) -> ! {
    pmi::local_apic().enable(Vector::new(0xFF).unwrap());
    idt::set_handler(PMI_VECTOR, on_pmi);
    hobby::test::run(
        "hobby",
        &[
            case!(an_exception_inside_a_case_is_caught),
            case!(a_model_pmi_reaches_its_handler_once),
            case!(a_failing_case_says_why),
        ],
    )
}

/// What a PMU driver's handler does with the APIC: unmask the entry, EOI.
fn on_pmi(_: &InterruptFrame) {
    HANDLED.fetch_add(1, Ordering::Relaxed);
    let mut apic = pmi::local_apic();
    let entry = apic.perf_counter_entry();
    apic.set_perf_counter_entry(entry.unmasked());
    apic.eoi();
}

fn an_exception_inside_a_case_is_caught() -> Outcome {
    // SAFETY: the closure owns nothing and holds no lock; UD2 raises #UD.
    let got = unsafe { hobby::fault::catch(|| core::arch::asm!("ud2")) };
    check_eq!(got.map_err(|f| f.vector()), Err(Some(6)), "#UD");
    Ok(())
}

fn a_model_pmi_reaches_its_handler_once() -> Outcome {
    let mut apic = pmi::local_apic();
    let fixed = LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(PMI_VECTOR).unwrap()));
    apic.set_perf_counter_entry(fixed);
    let before = HANDLED.load(Ordering::Relaxed);
    check_eq!(pmi::deliver(&mut apic), Delivery::Vector(PMI_VECTOR));
    check!(
        pmi::wait_for_handler(false),
        "the handler did not run or did not unmask the entry"
    );
    check_eq!(HANDLED.load(Ordering::Relaxed) - before, 1);
    // A masked entry delivers nothing, as the hardware's.
    apic.set_perf_counter_entry(fixed.masked());
    check_eq!(pmi::deliver(&mut apic), Delivery::Masked);
    check_eq!(HANDLED.load(Ordering::Relaxed) - before, 1);
    Ok(())
}

fn a_failing_case_says_why() -> Outcome {
    let two = core::hint::black_box(1) + 1;
    check_eq!(two, 3, "this case must fail");
    Ok(())
}

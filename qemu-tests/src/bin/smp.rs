//! Two CPUs: the hobby kernel brings up the application processor
//! (INIT-SIPI-SIPI, its own stack, GDT, TSS and local APIC, the shared
//! IDT), posts work to it, and both run at once.
//!
//! qemu-run: smp2: -smp 2 -accel tcg,thread=multi
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU64, Ordering};

use hobby::boot::BootInfo;
use hobby::test::Outcome;
use hobby::{case, check, check_eq, println, smp};

hobby::entry_point!(main);

fn main(_: &'static BootInfo) -> ! {
    let started = smp::start_aps(2);
    println!("smp: {started:?} CPUs online");
    hobby::test::run(
        "smp",
        &[
            case!(the_application_processor_comes_up),
            case!(work_runs_on_the_other_cpu),
            case!(both_cpus_run_at_once),
            case!(an_ipi_reaches_the_other_cpu),
        ],
    )
}

fn the_application_processor_comes_up() -> Outcome {
    check_eq!(smp::online(), 2);
    let (Some(bsp), Some(ap)) = (smp::apic_id(0), smp::apic_id(1)) else {
        hobby::fail!("an APIC ID is missing");
    };
    check!(bsp != ap, "two local APICs: {bsp} and {ap}");
    check_eq!(smp::cpu(), 0, "the cases run on the boot CPU");
    Ok(())
}

/// The AP's number and its own APIC ID, as it sees them.
fn who_am_i(cpu: usize) -> u64 {
    let id = hobby::pmi::local_apic().id();
    (cpu as u64) << 32 | u64::from(id) << 1 | u64::from(smp::cpu() == cpu)
}

fn work_runs_on_the_other_cpu() -> Outcome {
    for _ in 0..100 {
        smp::run_on(1, who_am_i)?;
        let got = smp::wait(1)?;
        check_eq!(got >> 32, 1, "the AP's number");
        check_eq!(
            (got >> 1) & 0x7FFF_FFFF,
            u64::from(smp::apic_id(1).unwrap_or(0)),
            "its APIC ID"
        );
        check_eq!(got & 1, 1, "smp::cpu() on the AP says 1");
    }
    check!(smp::wakes(1) >= 1, "the AP was woken by IPI");
    Ok(())
}

static SHARED: AtomicU64 = AtomicU64::new(0);
static AP_SAW_BSP: AtomicU64 = AtomicU64::new(0);
const ADDS: u64 = 1_000_000;

/// Adds 1 a million times, noting how often the other CPU's additions
/// showed in between (they interleave only if both run at once).
fn add_many(_: usize) -> u64 {
    let mut interleaved = 0;
    let mut last = SHARED.load(Ordering::Relaxed);
    for _ in 0..ADDS {
        let before = SHARED.fetch_add(1, Ordering::Relaxed);
        interleaved += u64::from(before != last);
        last = before + 1;
    }
    interleaved
}

fn both_cpus_run_at_once() -> Outcome {
    SHARED.store(0, Ordering::SeqCst);
    smp::run_on(1, add_many)?;
    let here = add_many(0);
    let there = smp::wait(1)?;
    AP_SAW_BSP.store(there, Ordering::SeqCst);
    check_eq!(SHARED.load(Ordering::SeqCst), 2 * ADDS, "no addition lost");
    println!(
        "smp: 2 x {ADDS} locked additions; the other CPU's showed in between {here} (BSP) and {there} (AP) times"
    );
    check!(here + there > 0, "the CPUs ran one after the other");
    Ok(())
}

static PINGS: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];

fn on_ping(_: &hobby::idt::InterruptFrame) {
    PINGS[smp::cpu().min(1)].fetch_add(1, Ordering::SeqCst);
    hobby::pmi::local_apic().eoi();
}

fn an_ipi_reaches_the_other_cpu() -> Outcome {
    const PING: u8 = 0xE8;
    hobby::idt::set_handler(PING, on_ping);
    let vector = pmu::apic::Vector::new(PING).ok_or("vector")?;
    // One at a time: a second fixed IPI of a vector still pending in the
    // target's IRR merges with the first (one IRR bit per vector).
    for n in 1..=10 {
        smp::send_ipi(1, vector)?;
        let start = hobby::timer::rdtsc();
        while PINGS[1].load(Ordering::SeqCst) < n
            && hobby::timer::rdtsc().wrapping_sub(start) < 3_000_000_000
        {
            core::hint::spin_loop();
        }
    }
    check_eq!(
        PINGS[1].load(Ordering::SeqCst),
        10,
        "each IPI handled on CPU 1"
    );
    check_eq!(PINGS[0].load(Ordering::SeqCst), 0, "none on CPU 0");
    Ok(())
}

//! Sixty-four CPUs, the most `pmu-hobby` brings up (`hobby::smp::MAX_CPUS`),
//! as 32 NetBurst packages of two logical processors: every AP comes up on
//! its own stack with its own APIC ID, all 64 run work at once, each takes
//! an IPI, and each finds its package and logical processor from its own
//! CPUID (`pmu::topology`): 32 PMUs, each with a T0 and a T1.
//!
//! qemu-run: smp64: -smp 64,sockets=32,cores=1,threads=2 -accel tcg,thread=multi -cpu qemu64,vendor=GenuineIntel,family=15,model=4,stepping=3
//! tcg-only: 64 vCPUs on this machine's nested KVM (two host cores, a VM exit 50-150 us) take minutes; the 8-vCPU `packages` kernel runs there
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU64, Ordering};

use hobby::boot::BootInfo;
use hobby::idt::InterruptFrame;
use hobby::pmi::local_apic;
use hobby::smp::{self, MAX_CPUS, SmpError};
use hobby::test::Outcome;
use hobby::{case, check, check_eq, println};
use pmu::apic::Vector;

hobby::entry_point!(main);

const CPUS: usize = 64;
const PING_VECTOR: u8 = 0xE8;
const _: () = assert!(
    CPUS == MAX_CPUS,
    "this kernel boots as many CPUs as hobby supports"
);

fn main(_: &'static BootInfo) -> ! {
    hobby::idt::set_handler(PING_VECTOR, on_ping);
    let started = smp::start_aps(CPUS);
    println!("many_cpus: {started:?} CPUs online");
    hobby::test::run(
        "many_cpus",
        &[
            case!(sixty_four_cpus_come_up),
            case!(each_ap_runs_on_its_own_stack),
            case!(all_sixty_four_run_at_once),
            case!(an_ipi_reaches_every_cpu),
            case!(each_cpu_finds_its_package_in_cpuid),
        ],
    )
}

fn sixty_four_cpus_come_up() -> Outcome {
    check_eq!(smp::online(), CPUS);
    check!(
        smp::apic_ids_distinct(),
        "a CPU without an APIC ID, or two sharing one"
    );
    check_eq!(
        smp::start_aps(MAX_CPUS + 1),
        Err(SmpError::TooMany),
        "more than MAX_CPUS is refused"
    );
    check_eq!(smp::apic_id(MAX_CPUS), None);
    Ok(())
}

/// The AP's stack pointer, and whether `smp::cpu()` names it.
fn where_am_i(cpu: usize) -> u64 {
    let rsp: u64;
    // SAFETY: reads RSP into a register, nothing else.
    unsafe { core::arch::asm!("mov {}, rsp", out(reg) rsp, options(nomem, nostack)) };
    rsp << 1 | u64::from(smp::cpu() == cpu)
}

fn each_ap_runs_on_its_own_stack() -> Outcome {
    smp::run_on_aps(where_am_i)?;
    for cpu in 1..CPUS {
        let got = smp::wait(cpu)?;
        check!(got & 1 == 1, "smp::cpu() on CPU {cpu} names another CPU");
        let rsp = (got >> 1) as usize;
        let stack = smp::ap_stack(cpu).ok_or("no stack")?;
        check!(
            stack.contains(&rsp),
            "CPU {cpu}: RSP {rsp:#x} outside its stack {stack:#x?}"
        );
    }
    check_eq!(
        smp::ap_stack(0),
        None,
        "the boot CPU has its own boot stack"
    );
    check_eq!(smp::ap_stack(MAX_CPUS), None);
    Ok(())
}

static SHARED: AtomicU64 = AtomicU64::new(0);
const ADDS: u64 = 2_000;

fn add_many(_: usize) -> u64 {
    for _ in 0..ADDS {
        SHARED.fetch_add(1, Ordering::Relaxed);
    }
    ADDS
}

fn all_sixty_four_run_at_once() -> Outcome {
    SHARED.store(0, Ordering::SeqCst);
    smp::run_on_aps(add_many)?;
    let mut total = add_many(0);
    for cpu in 1..CPUS {
        total += smp::wait(cpu)?;
    }
    check_eq!(total, CPUS as u64 * ADDS);
    check_eq!(
        SHARED.load(Ordering::SeqCst),
        CPUS as u64 * ADDS,
        "no addition lost"
    );
    Ok(())
}

static PINGS: [AtomicU64; CPUS] = [const { AtomicU64::new(0) }; CPUS];

fn on_ping(_: &InterruptFrame) {
    if let Some(p) = PINGS.get(smp::cpu()) {
        p.fetch_add(1, Ordering::SeqCst);
    }
    local_apic().eoi();
}

fn an_ipi_reaches_every_cpu() -> Outcome {
    let vector = Vector::new(PING_VECTOR).ok_or("vector")?;
    for cpu in 1..CPUS {
        smp::send_ipi(cpu, vector)?;
    }
    // Each IPI is handled on its CPU, boundedly.
    let start = hobby::timer::rdtsc();
    while PINGS[1..].iter().any(|p| p.load(Ordering::SeqCst) == 0)
        && hobby::timer::rdtsc().wrapping_sub(start) < hobby::pmi::WAIT_CYCLES
    {
        core::hint::spin_loop();
    }
    for (cpu, p) in PINGS.iter().enumerate() {
        let want = u64::from(cpu != 0);
        let got = p.load(Ordering::SeqCst);
        check!(
            got == want,
            "CPU {cpu}: {got} IPIs handled, {want} sent to it"
        );
    }
    Ok(())
}

fn each_cpu_finds_its_package_in_cpuid() -> Outcome {
    // Every PMU ID 0-31 (APIC IDs 0-63 without the SMT bit) with exactly
    // one T0 and one T1.
    let mut threads = [[0u8; 2]; CPUS / 2];
    for cpu in 0..CPUS {
        let site = match smp::pmu_site(cpu) {
            Some(Ok(site)) => site,
            Some(Err(e)) => hobby::fail!("CPU {cpu}: {e}"),
            None => hobby::fail!("CPU {cpu} is not online"),
        };
        check_eq!(site.sharers, 2, "two logical processors a PMU");
        let (pmu, thread) = (site.pmu as usize, usize::from(site.thread));
        check!(
            pmu < CPUS / 2 && thread < 2,
            "CPU {cpu}: PMU {pmu}, thread {thread}"
        );
        threads[pmu][thread] += 1;
    }
    check!(
        threads.iter().all(|t| *t == [1, 1]),
        "each of 32 PMUs one T0 and one T1: {threads:?}"
    );
    println!("many_cpus: 64 CPUs on 32 PMUs, each with a T0 and a T1 (from each CPU's CPUID)");
    Ok(())
}

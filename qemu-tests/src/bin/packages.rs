//! Eight CPUs, four NetBurst packages of two logical processors each: QEMU
//! presents the topology (`-smp 8,sockets=4,cores=1,threads=2`, a NetBurst
//! signature), every CPU finds its package and logical processor from its
//! own CPUID through `pmu::topology` (never from its CPU number: the APs
//! are numbered in the order they report), and all eight drive their
//! package's PMU at once, each sampling its own event with PMIs taken on
//! itself. A package is a NetBurst PMU model (one per package); every
//! count below comes from the models, not hardware. Where the processor
//! has x2APIC mode (KVM), the kernel runs in it: the INIT-SIPI-SIPI, the
//! wake IPIs and every PMI go through the x2APIC MSRs; under QEMU 7.2's
//! TCG (no x2APIC) through the xAPIC page, and the x2APIC case is skipped.
//!
//! qemu-run: smp8: -smp 8,sockets=4,cores=1,threads=2 -accel tcg,thread=multi -cpu qemu64,vendor=GenuineIntel,family=15,model=4,stepping=3
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};

use hobby::boot::BootInfo;
use hobby::idt::InterruptFrame;
use hobby::pmi::{self, Delivery, Taken, local_apic};
use hobby::test::Outcome;
use hobby::{case, check, check_eq, fail, println, skip, smp};
use pmu::apic::{LvtPerfCounter, PmiDelivery, Vector};
use pmu::arch::handle_pmi;
use pmu::arch::netburst::driver::{CounterConfig, Counters, NetBurstDriver};
use pmu::arch::netburst::pmi::overflow_rule;
use pmu::arch::netburst::{Escr, EventSpec, LogicalProcessor as Lp, NetBurstPmu};
use pmu::counter::Owner;
use pmu::model::netburst::{
    Config, EscrGroup, EventKind, LogicalProcessor as ModelLp, Privilege, SharedNetBurstModel,
};
use pmu::sampling::SampleAfter;
use pmu::topology::PmuSite;

hobby::entry_point!(main);

/// CPUs, packages, and logical processors per package the QEMU line asks
/// for.
const CPUS: usize = 8;
const PACKAGES: usize = 4;
const PMI_VECTOR: u8 = 0xF0;
const PING_VECTOR: u8 = 0xE8;

/// Whether the kernel switched to x2APIC mode (the processor has it).
static X2APIC: AtomicBool = AtomicBool::new(false);

fn main(_: &'static BootInfo) -> ! {
    println!(
        "packages: every PMU count below comes from NetBurst PMU models (one per package), not hardware"
    );
    let x2apic = hobby::apic::enter_x2apic();
    X2APIC.store(x2apic.is_ok(), Ordering::SeqCst);
    match x2apic {
        Ok(()) => println!("packages: the CPUs run in x2APIC mode"),
        Err(e) => println!("packages: xAPIC mode: {e}"),
    }
    local_apic().enable(Vector::new(0xFF).unwrap());
    hobby::idt::set_handler(PMI_VECTOR, on_pmi);
    hobby::idt::set_handler(PING_VECTOR, on_ping);
    let started = smp::start_aps(CPUS);
    println!("packages: {started:?} CPUs online");
    hobby::test::run(
        "packages",
        &[
            case!(eight_cpus_come_up),
            case!(each_cpu_finds_its_package_in_cpuid),
            case!(ipis_reach_every_cpu_in_x2apic_mode),
            case!(all_eight_sample_their_packages_at_once),
        ],
    )
}

fn eight_cpus_come_up() -> Outcome {
    check_eq!(smp::online(), CPUS);
    check!(
        smp::apic_ids_distinct(),
        "eight CPUs, eight distinct APIC IDs"
    );
    Ok(())
}

/// Each CPU's package index (0-3, the order of the packages' PMU IDs) and
/// logical processor (0: T0), for its PMI handler.
static PACKAGE: [AtomicU8; CPUS] = [const { AtomicU8::new(0xFF) }; CPUS];
static THREAD: [AtomicU8; CPUS] = [const { AtomicU8::new(0xFF) }; CPUS];

fn each_cpu_finds_its_package_in_cpuid() -> Outcome {
    let mut sites = [PmuSite::own(0); CPUS];
    let mut pmus = [u32::MAX; PACKAGES];
    let mut seen = 0;
    for (cpu, site) in sites.iter_mut().enumerate() {
        *site = match smp::pmu_site(cpu) {
            Some(Ok(site)) => site,
            Some(Err(e)) => fail!("CPU {cpu}: {e}"),
            None => fail!("CPU {cpu} is not online"),
        };
        // The initial APIC ID (CPUID) is the APIC's ID (xAPIC: the ID
        // register's 8 bits; x2APIC: the x2APIC ID, equal below 256).
        check_eq!(
            Some(site.apic_id),
            smp::apic_id(cpu),
            "CPUID's initial APIC ID is the APIC's"
        );
        check_eq!(site.sharers, 2, "two logical processors a PMU");
        if !pmus[..seen].contains(&site.pmu) {
            check!(seen < PACKAGES, "more than {PACKAGES} PMUs");
            pmus[seen] = site.pmu;
            seen += 1;
        }
    }
    check_eq!(seen, PACKAGES, "four physical PMUs");
    pmus.sort_unstable();
    for (cpu, site) in sites.iter().enumerate() {
        let package = pmus.iter().position(|&p| p == site.pmu).unwrap_or(0xFF);
        PACKAGE[cpu].store(package as u8, Ordering::SeqCst);
        THREAD[cpu].store(site.thread, Ordering::SeqCst);
    }
    // Each package: exactly one T0 and one T1.
    for package in 0..PACKAGES as u8 {
        let mut threads = [0; 2];
        for cpu in 0..CPUS {
            if PACKAGE[cpu].load(Ordering::SeqCst) == package {
                let t = THREAD[cpu].load(Ordering::SeqCst);
                check!(t < 2, "CPU {cpu}: thread {t}");
                threads[usize::from(t)] += 1;
            }
        }
        check_eq!(threads, [1, 1], "one T0 and one T1 a package");
    }
    let mut line = [(0u8, 0u8); CPUS];
    for (cpu, l) in line.iter_mut().enumerate() {
        *l = (
            PACKAGE[cpu].load(Ordering::SeqCst),
            THREAD[cpu].load(Ordering::SeqCst),
        );
    }
    println!("packages: CPU -> (package, thread) from each CPU's CPUID: {line:?}");
    Ok(())
}

static PINGS: [AtomicU64; CPUS] = [const { AtomicU64::new(0) }; CPUS];

fn on_ping(_: &InterruptFrame) {
    if let Some(p) = PINGS.get(smp::cpu()) {
        p.fetch_add(1, Ordering::SeqCst);
    }
    local_apic().eoi();
}

fn ipis_reach_every_cpu_in_x2apic_mode() -> Outcome {
    if !X2APIC.load(Ordering::SeqCst) {
        skip!(
            "no x2APIC on this CPU (CPUID.01H:ECX[21] clear: QEMU 7.2's TCG emulates none; PMU_QEMU_ACCEL=kvm runs it)"
        );
    }
    check!(hobby::apic::x2apic_mode());
    let vector = Vector::new(PING_VECTOR).ok_or("vector")?;
    // One at a time: a second fixed IPI of a vector still pending merges
    // with the first. Each is waited for boundedly.
    for (cpu, pinged) in PINGS.iter().enumerate().skip(1) {
        for n in 1..=3 {
            smp::send_ipi(cpu, vector)?;
            let start = hobby::timer::rdtsc();
            while pinged.load(Ordering::SeqCst) < n
                && hobby::timer::rdtsc().wrapping_sub(start) < pmi::WAIT_CYCLES
            {
                core::hint::spin_loop();
            }
            let pings = pinged.load(Ordering::SeqCst);
            check!(pings == n, "CPU {cpu}: {pings} IPIs handled of {n} sent");
        }
    }
    check_eq!(PINGS[0].load(Ordering::SeqCst), 0, "none on CPU 0");
    // And the self-IPI, through the SELF IPI register.
    let seen = PINGS[0].load(Ordering::SeqCst);
    local_apic().self_ipi(vector);
    check!(
        pmi::wait_for_interrupt(&PINGS[0], seen, Taken::Vector),
        "the self-IPI was not taken"
    );
    println!(
        "packages: 3 IPIs to each of CPUs 1-7 and a self-IPI, through the x2APIC ICR and SELF IPI MSRs"
    );
    Ok(())
}

/// One NetBurst model per package: a Prescott with Hyper-Threading.
static MODELS: [SharedNetBurstModel; PACKAGES] =
    [const { SharedNetBurstModel::new(Config::prescott_ht()) }; PACKAGES];
/// Each package's PMU, one value per model.
// SAFETY: one value per package's model, each a physical PMU of its own.
static PMUS: [NetBurstPmu; PACKAGES] = [const { unsafe { NetBurstPmu::new() } }; PACKAGES];
const RUNNING: EventKind = EventKind::new(EscrGroup::Fsb, 0x13, 1);
/// Sampling period.
const N: u64 = 97;

/// Samples each CPU's handler took, and what went wrong in handlers.
static SAMPLES: [AtomicU64; CPUS] = [const { AtomicU64::new(0) }; CPUS];
/// Periods each CPU's counter still owed when it halted (an overflow whose
/// PMI had not come), and the events of its period in progress.
static OWED: [AtomicU64; CPUS] = [const { AtomicU64::new(0) }; CPUS];
static RESIDUAL: [AtomicU64; CPUS] = [const { AtomicU64::new(0) }; CPUS];
static WRONG_COUNTER: AtomicU32 = AtomicU32::new(0);
static WRONG_RIP: AtomicU32 = AtomicU32::new(0);
static HANDLER_ERRORS: AtomicU32 = AtomicU32::new(0);

fn entry() -> LvtPerfCounter {
    LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(PMI_VECTOR).unwrap()))
}

/// This CPU's package index and logical processor.
fn place(cpu: usize) -> Option<(usize, Lp, ModelLp)> {
    let package = usize::from(PACKAGE.get(cpu)?.load(Ordering::SeqCst));
    let lps = match THREAD[cpu].load(Ordering::SeqCst) {
        0 => (Lp::T0, ModelLp::T0),
        1 => (Lp::T1, ModelLp::T1),
        _ => return None,
    };
    (package < PACKAGES).then_some((package, lps.0, lps.1))
}

/// The counter and ESCR a logical processor samples on (T0: counter 0,
/// FSB_ESCR0; T1: counter 2, FSB_ESCR1): the two of a package never
/// contend.
fn own_counter(lp: Lp) -> (usize, Escr) {
    match lp {
        Lp::T0 => (0, Escr::FsbEscr0),
        Lp::T1 => (2, Escr::FsbEscr1),
    }
}

/// Every CPU's PMI entry: the driver's handler for this CPU's logical
/// processor on its package's model, through this CPU's local APIC.
fn on_pmi(frame: &InterruptFrame) {
    let cpu = smp::cpu();
    let mut apic = local_apic();
    if let Some((package, lp, model_lp)) = place(cpu)
        && let Some(mut msr) = MODELS[package].msr_as(model_lp)
    {
        let own = own_counter(lp).0 as u8;
        let window = pmi::wait_window();
        let r = handle_pmi(
            PMUS[package].logical(lp),
            &mut msr,
            &mut apic,
            entry(),
            frame.rip,
            |s| {
                SAMPLES[cpu].fetch_add(u64::from(s.periods), Ordering::SeqCst);
                if s.counter != own {
                    WRONG_COUNTER.fetch_add(1, Ordering::SeqCst);
                }
                if !window.contains(&s.rip) {
                    WRONG_RIP.fetch_add(1, Ordering::SeqCst);
                }
            },
        );
        if r.is_err() {
            HANDLER_ERRORS.fetch_add(1, Ordering::SeqCst);
        }
    } else {
        HANDLER_ERRORS.fetch_add(1, Ordering::SeqCst);
    }
    apic.eoi();
}

/// Events CPU `cpu` feeds its logical processor: each CPU a different
/// count, never a multiple of N: a NetBurst counter raises its PMI at the
/// increment after the overflow, so a last period that ends on the last
/// event would be accounted at the halt, without a sample. Where the
/// platform runs code far slower than TCG (nested KVM: eight vCPUs on two
/// host cores, every APIC access a VM exit) fewer, but at least two
/// periods each.
fn events(cpu: usize) -> u64 {
    let e = hobby::pace::scaled(2_003 + 211 * cpu as u64, 2 * N + 11 + 13 * cpu as u64);
    if e.is_multiple_of(N) { e + 1 } else { e }
}

/// On CPU `cpu`, as owner `O`: take the package's driver for this logical
/// processor, sample `global_power_events` every N on its own counter,
/// feed [`events`] to the package's model as this logical processor and
/// take each PMI here; return the events the periods and the residual
/// account for (0 on a failure).
fn sample<O: Owner>(cpu: usize) -> u64 {
    let Some((package, lp, model_lp)) = place(cpu) else {
        return 0;
    };
    let model = &MODELS[package];
    let (Some(info), Some(msr)) = (model.detect(), model.msr_as(model_lp)) else {
        return 0;
    };
    let Ok((mut d, c)) = NetBurstDriver::<O, _>::take_for(lp, msr, &info, &PMUS[package]) else {
        return 0;
    };
    local_apic().set_perf_counter_entry(entry());
    let Ok(every) = SampleAfter::new(N, overflow_rule()) else {
        return 0;
    };
    let (n, escr) = own_counter(lp);
    let spec: EventSpec = pmu::netburst_event!("global_power_events:RUNNING:k");
    let config = CounterConfig::counting(spec, escr).on(lp).sampling(every);
    let mut handles = c.erase_all();
    let h = &mut handles[n];
    if h.configure(&mut d, &config).is_err() || h.enable(&mut d).is_err() {
        return 0;
    }
    let total = events(cpu);
    let mut left = total;
    while left > 0 {
        let got = model.inject_until_own_pmi(RUNNING.on(model_lp, Privilege::Os, left.min(1000)));
        left -= got.injected.min(left);
        if got.pmi_pending {
            model.take_pmi(model_lp);
            if pmi::deliver(&mut local_apic()) != Delivery::Vector(PMI_VECTOR)
                || !pmi::wait_for_handler(false)
            {
                return 0;
            }
        } else if got.injected == 0 {
            return 0;
        }
    }
    if h.halt(&mut d).is_err() {
        return 0;
    }
    let Ok(raw) = h.read(&mut d) else { return 0 };
    let (owed, residual) = every.split(raw);
    OWED[cpu].store(owed, Ordering::SeqCst);
    RESIDUAL[cpu].store(residual, Ordering::SeqCst);
    let accounted = (PMUS[package].pmi().periods(n as u8) + owed) * N + residual;
    if h.release(&mut d).is_err() {
        return 0;
    }
    let Ok(c) = Counters::from_erased(handles) else {
        return 0;
    };
    let _msr = d.give_back(c);
    accounted
}

/// [`sample`] as the owner of CPU `cpu`: a driver's owner type is one per
/// live driver, so each CPU has its own.
fn sample_on(cpu: usize) -> u64 {
    macro_rules! owners {
        ($($n:literal => $owner:ident),*) => {
            match cpu {
                $($n => {
                    pmu::owner!($owner);
                    sample::<$owner>(cpu)
                })*
                _ => 0,
            }
        };
    }
    owners!(0 => Cpu0, 1 => Cpu1, 2 => Cpu2, 3 => Cpu3, 4 => Cpu4, 5 => Cpu5, 6 => Cpu6, 7 => Cpu7)
}

fn all_eight_sample_their_packages_at_once() -> Outcome {
    for cpu in 0..CPUS {
        if place(cpu).is_none() {
            fail!("CPU {cpu} has no package: the topology case did not place it");
        }
    }
    for model in &MODELS {
        model.reset();
    }
    // The platform's pace, measured once, here, before eight CPUs ask.
    let _ = events(0);
    smp::run_on_aps(sample_on)?;
    let mut got = [0u64; CPUS];
    got[0] = sample_on(0);
    for (cpu, g) in got.iter_mut().enumerate().skip(1) {
        *g = smp::wait(cpu)?;
    }
    for (cpu, &g) in got.iter().enumerate() {
        check!(
            g == events(cpu),
            "CPU {cpu}: periods x N + residual account for {g} events, it fed {}",
            events(cpu)
        );
    }
    check_eq!(HANDLER_ERRORS.load(Ordering::SeqCst), 0);
    check_eq!(
        WRONG_COUNTER.load(Ordering::SeqCst),
        0,
        "a PMI for another CPU's counter"
    );
    check_eq!(
        WRONG_RIP.load(Ordering::SeqCst),
        0,
        "a sample without its CPU's RIP"
    );
    let mut samples = [0u64; CPUS];
    for (cpu, s) in samples.iter_mut().enumerate() {
        *s = SAMPLES[cpu].load(Ordering::SeqCst);
        let owed = OWED[cpu].load(Ordering::SeqCst);
        let residual = RESIDUAL[cpu].load(Ordering::SeqCst);
        let e = events(cpu);
        check!(
            (*s, owed, residual) == (e / N, 0, e % N),
            "CPU {cpu}: {s} samples, {owed} owed, {residual} events in progress of {e} fed: not one sample per period"
        );
    }
    println!(
        "packages: 8 CPUs at once on 4 package models, N = {N}: events {:?}, samples {samples:?}, each on its own CPU, conserved exactly (models)",
        got
    );
    Ok(())
}

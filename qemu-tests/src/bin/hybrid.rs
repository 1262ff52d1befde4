//! A hybrid Intel part on two CPUs: CPU 0 plays a Meteor Lake performance
//! core (Redwood Cove, `Config::meteor_lake_p_core()`) and CPU 1 one of its
//! efficiency cores (Crestmont, `Config::meteor_lake_e_core()`), each with
//! its own architectural-PMU model (`SharedArchPerfModel`, answering CPUID
//! as those cores of a Core Ultra 7 155H do, leaf 23H included), its own
//! `ArchPerfPmu` and its own driver. Each CPU detects its own core type
//! and counters, counts and samples on its own counters with PMIs through
//! its own local APIC, at the same time as the other; and what the
//! efficiency core lacks (fixed counter 3, the topdown-slots event) is
//! refused there, with its core type and CPUID bit in the message, and
//! accepted on the performance core. Every count comes from the models,
//! not hardware. Where the processor has x2APIC mode (KVM's `-cpu host`)
//! the kernel runs in it.
//!
//! qemu-run: smp2: -smp 2 -accel tcg,thread=multi
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU64, Ordering};

use hobby::boot::BootInfo;
use hobby::idt::InterruptFrame;
use hobby::pmi::{self, local_apic};
use hobby::test::Outcome;
use hobby::text::Text;
use hobby::{case, check, check_eq, println, smp};
use pmu::apic::{LvtPerfCounter, PmiDelivery, Vector};
use pmu::arch::archperf::driver::{ArchPerfDriver, ConfigError, CounterConfig, Counters, Error};
use pmu::arch::archperf::enumeration::Missing;
use pmu::arch::archperf::multiplex::{MultiplexError, Multiplexer};
use pmu::arch::archperf::{ArchEvent, ArchPerfPmu, Counter, EventSpec};
use pmu::arch::handle_pmi;
use pmu::counter::Owner;
use pmu::detect::{ArchPerfCpu, CoreType};
use pmu::model::archperf::{Config, Event, SharedArchPerfModel};
use pmu::sampling::SampleAfter;

hobby::entry_point!(main);

const VECTOR: u8 = 0xF2;
/// CPU 0's model is a performance core, CPU 1's an efficiency core.
static MODELS: [SharedArchPerfModel; 2] = [
    SharedArchPerfModel::new(Config::meteor_lake_p_core()),
    SharedArchPerfModel::new(Config::meteor_lake_e_core()),
];
/// Each CPU's PMU: its model.
// SAFETY: one value per CPU's model, each a logical processor of its own.
static PMUS: [ArchPerfPmu; 2] = [const { unsafe { ArchPerfPmu::new() } }; 2];
/// The sample-after periods each CPU's handler saw.
static SAMPLES: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];
/// Samples of another counter than the sampling one, or handled on the
/// other CPU's PMU.
static FOREIGN: AtomicU64 = AtomicU64::new(0);
static ERRORS: AtomicU64 = AtomicU64::new(0);

/// What each CPU found and did, for the boot CPU to check and print (the
/// application processor does not print).
static DETECTED: [spin::Mutex<Option<ArchPerfCpu>>; 2] = [const { spin::Mutex::new(None) }; 2];
static COUNTED: [spin::Mutex<Result<Counted, &'static str>>; 2] =
    [const { spin::Mutex::new(Err("not run")) }; 2];
static REFUSED: [spin::Mutex<Result<Refused, &'static str>>; 2] =
    [const { spin::Mutex::new(Err("not run")) }; 2];

fn main(_: &'static BootInfo) -> ! {
    println!(
        "hybrid: CPU 0 drives a Meteor Lake performance-core model, CPU 1 an efficiency-core model: every count below comes from the models, not hardware"
    );
    hobby::idt::set_handler(VECTOR, on_pmi);
    match hobby::apic::enter_x2apic() {
        Ok(()) => println!("hybrid: x2APIC mode"),
        Err(e) => println!("hybrid: xAPIC mode: {e}"),
    }
    let started = smp::start_aps(2);
    println!("hybrid: {started:?} CPUs online");
    hobby::test::run(
        "hybrid",
        &[
            case!(each_cpu_detects_its_own_core_type_and_counters),
            case!(each_cpu_counts_and_samples_on_its_own_counters),
            case!(what_the_efficiency_core_lacks_is_refused_there_only),
        ],
    )
}

fn entry() -> LvtPerfCounter {
    LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(VECTOR).unwrap()))
}

/// Both CPUs' PMI entry: this CPU's PMU and model, its handler.
fn on_pmi(frame: &InterruptFrame) {
    let cpu = smp::cpu().min(1);
    let mut apic = local_apic();
    let r = handle_pmi(
        &PMUS[cpu],
        &mut MODELS[cpu].msr(),
        &mut apic,
        entry(),
        frame.rip,
        |s| {
            SAMPLES[cpu].fetch_add(u64::from(s.periods), Ordering::SeqCst);
            if s.counter != 0 {
                FOREIGN.fetch_add(1, Ordering::SeqCst);
            }
        },
    );
    if r.is_err() {
        ERRORS.fetch_add(1, Ordering::SeqCst);
    }
    apic.eoi();
}

/// Runs `work` on CPU 1 and on CPU 0 at once; the results are in the
/// statics `work` fills.
fn on_both(work: fn(usize) -> u64) -> Outcome {
    smp::run_on(1, work)?;
    work(0);
    smp::wait(1)?;
    Ok(())
}

fn detect_here(cpu: usize) -> u64 {
    *DETECTED[cpu].lock() = MODELS[cpu].detect();
    0
}

fn each_cpu_detects_its_own_core_type_and_counters() -> Outcome {
    check_eq!(smp::online(), 2);
    on_both(detect_here)?;
    let (Some(p), Some(e)) = (*DETECTED[0].lock(), *DETECTED[1].lock()) else {
        hobby::fail!("a CPU found no architectural PMU on its model");
    };
    check_eq!(
        (p.core_type, e.core_type),
        (Some(CoreType::Core), Some(CoreType::Atom))
    );
    check!(p.hybrid && e.hybrid, "both say hybrid (CPUID.07H:EDX[15])");
    check!(
        p.ext.is_some() && e.ext.is_some(),
        "both enumerate leaf 23H"
    );
    check_eq!(
        p.leaf,
        e.leaf,
        "leaf 0AH is the same on both: what every core type has"
    );
    check_eq!(
        (p.general_bitmap(), p.fixed_bitmap()),
        (0xFF, 0xF),
        "the performance core: its leaf 23H"
    );
    check_eq!(
        (e.general_bitmap(), e.fixed_bitmap()),
        (0xFF, 0x7),
        "the efficiency core: its leaf 23H"
    );
    let slots = ArchEvent::TopdownSlots.ebx_bit();
    check!(
        p.event_available(slots) && !e.event_available(slots),
        "topdown slots on the performance core only"
    );
    for (cpu, c) in [(0, p), (1, e)] {
        println!(
            "hybrid: CPU {cpu}: {:?} core, general counters {:#x}, fixed counters {:#x} (leaf 23H; leaf 0AH says {:#x}), topdown slots {} (model)",
            c.core_type,
            c.general_bitmap(),
            c.fixed_bitmap(),
            c.leaf.fixed_bitmap(),
            if c.event_available(slots) {
                "available"
            } else {
                "unavailable"
            }
        );
    }
    Ok(())
}

/// Instructions sampled every [`N`], core cycles on fixed counter 1, and
/// (on the performance core) topdown slots on fixed counter 3, each CPU on
/// its own model.
const N: u64 = 100;
const INSTRUCTIONS: [u64; 2] = [5_003, 3_511];
const CYCLES: [u64; 2] = [700, 900];
const SLOTS: u64 = 4_200;

/// What a CPU counted: the instructions its periods and residual account
/// for, its handler's periods, its core cycles and (performance core) its
/// topdown slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Counted {
    accounted: u64,
    sampled: u64,
    cycles: u64,
    slots: Option<u64>,
}

fn count<O: Owner>(cpu: usize) -> Result<Counted, &'static str> {
    let model = &MODELS[cpu];
    model.reset();
    let info = model.detect().ok_or("no architectural PMU")?;
    let (mut d, c) =
        ArchPerfDriver::<O, _>::take(model.msr(), &info, &PMUS[cpu]).map_err(|_| "take refused")?;
    local_apic().set_perf_counter_entry(entry());
    let spec = |s: &str| s.parse::<EventSpec>().map_err(|_| "event string");
    let every = SampleAfter::new(N, d.overflow_rule()).map_err(|_| "sample-after")?;
    let sampling = CounterConfig::counting(spec("instructions")?).sampling(every);
    let g0 =
        c.g0.configure(&mut d, &sampling)
            .map_err(|_| "g0 refused")?;
    let g0 = g0.enable(&mut d).map_err(|_| "g0 enable")?;
    let f1 = c.f1.ok_or("no fixed counter 1")?;
    let f1 = f1
        .configure(&mut d, &CounterConfig::counting(spec("cycles")?))
        .map_err(|_| "f1 refused")?
        .enable(&mut d)
        .map_err(|_| "f1 enable")?;
    // Fixed counter 3 only where this core has it.
    let f3 = match c.f3 {
        Some(f3) => Some(
            f3.configure(&mut d, &CounterConfig::counting(spec("slots")?))
                .map_err(|_| "f3 refused")?
                .enable(&mut d)
                .map_err(|_| "f3 enable")?,
        ),
        None => None,
    };
    pmi::inject(model, Event::new(0xC0, 0x00, INSTRUCTIONS[cpu])).map_err(|_| "a PMI")?;
    model.with(|m| m.inject(Event::new(0x3C, 0x00, CYCLES[cpu])));
    model.with(|m| m.inject(Event::new(0xA4, 0x01, SLOTS)));
    let g0 = g0.halt(&mut d).map_err(|_| "g0 halt")?;
    let raw = g0.read(&mut d).map_err(|_| "g0 read")?;
    let (owed, residual) = every.split(raw);
    let periods = d.pmi_state().periods(0) + owed;
    let counted = Counted {
        accounted: periods * N + residual,
        sampled: SAMPLES[cpu].load(Ordering::SeqCst),
        cycles: f1.read(&mut d).map_err(|_| "f1 read")?,
        slots: match &f3 {
            Some(f3) => Some(f3.read(&mut d).map_err(|_| "f3 read")?),
            None => None,
        },
    };
    let g0 = g0.release(&mut d).map_err(|_| "g0 release")?;
    let f1 = f1.halt(&mut d).map_err(|_| "f1 halt")?;
    let f1 = f1.release(&mut d).map_err(|_| "f1 release")?;
    let f3 = match f3 {
        Some(f3) => Some(
            f3.halt(&mut d)
                .map_err(|_| "f3 halt")?
                .release(&mut d)
                .map_err(|_| "f3 release")?,
        ),
        None => None,
    };
    let _regs = d.give_back(Counters {
        g0,
        f1: Some(f1),
        f3,
        ..c
    });
    Ok(counted)
}

/// `$work::<O>(cpu)` with an owner type `O` of CPU `cpu`'s own (each
/// expansion makes its own two).
macro_rules! with_owner {
    ($work:ident, $cpu:expr) => {{
        pmu::owner!(OnCpu0);
        pmu::owner!(OnCpu1);
        if $cpu == 0 {
            $work::<OnCpu0>($cpu)
        } else {
            $work::<OnCpu1>($cpu)
        }
    }};
}

fn count_here(cpu: usize) -> u64 {
    *COUNTED[cpu].lock() = with_owner!(count, cpu);
    0
}

fn each_cpu_counts_and_samples_on_its_own_counters() -> Outcome {
    SAMPLES.iter().for_each(|s| s.store(0, Ordering::SeqCst));
    on_both(count_here)?;
    let p = (*COUNTED[0].lock())?;
    let e = (*COUNTED[1].lock())?;
    check_eq!(ERRORS.load(Ordering::SeqCst), 0, "the handlers' accesses");
    check_eq!(
        FOREIGN.load(Ordering::SeqCst),
        0,
        "samples of counter 0 only"
    );
    for (cpu, c) in [(0, p), (1, e)] {
        check!(
            c.accounted == INSTRUCTIONS[cpu],
            "CPU {cpu}: instructions = periods x N + residual: {} accounted, {} injected",
            c.accounted,
            INSTRUCTIONS[cpu]
        );
        check!(
            c.sampled == INSTRUCTIONS[cpu] / N,
            "CPU {cpu}: a sample per period, on its own CPU: {} periods sampled",
            c.sampled
        );
        check!(
            c.cycles == CYCLES[cpu],
            "CPU {cpu}: fixed counter 1 counted {}, {} injected",
            c.cycles,
            CYCLES[cpu]
        );
    }
    check_eq!(
        (p.slots, e.slots),
        (Some(SLOTS), None),
        "topdown slots on the performance core's fixed counter 3; the efficiency core has none"
    );
    println!(
        "hybrid: CPU 0 (performance core): {} instructions in {} samples of {N}, {} cycles, {} slots on FIXED_CTR3; CPU 1 (efficiency core): {} instructions in {} samples, {} cycles (models)",
        p.accounted, p.sampled, p.cycles, SLOTS, e.accounted, e.sampled, e.cycles
    );
    Ok(())
}

/// What a CPU's driver said to topdown slots: on a general counter
/// (configure), `slots` (check: fixed counter 3), and the multiplexer;
/// and what the general counter counted where it was accepted.
#[derive(Clone, Copy, Debug)]
struct Refused {
    configure: Result<u64, ConfigError>,
    check: Result<(), ConfigError>,
    multiplex: Result<(), MultiplexError>,
    fixed3: bool,
}

fn refuse<O: Owner>(cpu: usize) -> Result<Refused, &'static str> {
    let model = &MODELS[cpu];
    model.reset();
    let info = model.detect().ok_or("no architectural PMU")?;
    let (mut d, c) =
        ArchPerfDriver::<O, _>::take(model.msr(), &info, &PMUS[cpu]).map_err(|_| "take refused")?;
    let td: EventSpec = "topdown-slots".parse().map_err(|_| "event string")?;
    let slots: EventSpec = "slots".parse().map_err(|_| "event string")?;
    let fixed3 = c.f3.is_some();
    let (configure, g0) = match c.g0.configure(&mut d, &CounterConfig::counting(td)) {
        Ok(h) => {
            let h = h.enable(&mut d).map_err(|_| "enable")?;
            model.with(|m| m.inject(Event::new(0xA4, 0x01, SLOTS)));
            let n = h.read(&mut d).map_err(|_| "read")?;
            let h = h.halt(&mut d).map_err(|_| "halt")?;
            let h = h.release(&mut d).map_err(|_| "release")?;
            (Ok(n), h)
        }
        Err(failed) => match failed.error {
            Error::Config(e) => (Err(e), failed.counter),
            Error::Access(_) => return Err("a refused access"),
        },
    };
    let check = d.check(&slots);
    let handles = Counters { g0, ..c }.erase_all();
    let branches: EventSpec = "branches".parse().map_err(|_| "event string")?;
    let (multiplex, handles) = match Multiplexer::<2>::new(d.cpu(), handles, &[branches, td]) {
        Ok(m) => (Ok(()), m.into_handles().map_err(|_| "running")?),
        Err((e, handles)) => (Err(e), handles),
    };
    let c = Counters::<O>::from_erased(handles).map_err(|_| "the handles")?;
    let _regs = d.give_back(c);
    Ok(Refused {
        configure,
        check,
        multiplex,
        fixed3,
    })
}

fn refuse_here(cpu: usize) -> u64 {
    *REFUSED[cpu].lock() = with_owner!(refuse, cpu);
    0
}

fn what_the_efficiency_core_lacks_is_refused_there_only() -> Outcome {
    on_both(refuse_here)?;
    let p = (*REFUSED[0].lock())?;
    let e = (*REFUSED[1].lock())?;
    check_eq!(
        (p.configure, p.check, p.multiplex, p.fixed3),
        (Ok(SLOTS), Ok(()), Ok(()), true),
        "the performance core counts topdown slots on a general counter and has fixed counter 3"
    );
    check!(
        !e.fixed3,
        "the efficiency core: no token for fixed counter 3"
    );
    let Err(ConfigError::NotOnThisCpu(event)) = e.configure else {
        hobby::fail!("topdown-slots on the efficiency core: {:?}", e.configure);
    };
    check_eq!(event.missing, Missing::Event(ArchEvent::TopdownSlots));
    check_eq!(event.core_type, Some(CoreType::Atom));
    let Err(ConfigError::NotOnThisCpu(fixed)) = e.check else {
        hobby::fail!("slots on the efficiency core: {:?}", e.check);
    };
    check_eq!(
        fixed.missing,
        Missing::Counter(Counter::fixed(3).ok_or("f3")?)
    );
    let Err(MultiplexError::NotOnThisCpu { index: 1, lack }) = e.multiplex else {
        hobby::fail!("the multiplexer on the efficiency core: {:?}", e.multiplex);
    };
    check_eq!(
        lack,
        event,
        "the multiplexer refuses it for the same reason"
    );
    let message = |e: &dyn core::fmt::Display| {
        let mut text = Text::<512>::new();
        text.set(format_args!("{e}"));
        text
    };
    for (what, text) in [
        ("the event", message(&ConfigError::NotOnThisCpu(event))),
        ("the counter", message(&fixed)),
    ] {
        check!(
            text.as_str()
                .contains("an Atom (efficiency) core, CPUID.1AH core type 20H"),
            "{what}'s refusal names the core type: {}",
            text.as_str()
        );
        check!(
            text.as_str().contains("CPUID.23H."),
            "{what}'s refusal names the CPUID leaf: {}",
            text.as_str()
        );
        println!("hybrid: CPU 1 refused {what}: {}", text.as_str());
    }
    Ok(())
}

//! Groups and multiplexing (issue 15, item 7) with real interrupts: the
//! local APIC timer rotates more NetBurst events than the PMU holds at once
//! through the exact scheduler, and more Itanium events than the counters
//! that count them, through the crate's seam alone (issue 36), and the same
//! timer feeds events into the
//! models while counter groups are read, so that a read can be interrupted
//! between two register accesses. Every count comes from a PMU model (the
//! NetBurst and Itanium models of the crate); the multiplexer's times are
//! the model's clocks. Each case ticks at the shortest period the platform
//! keeps up with for its tick handler (`hobby::timer::kept_up_period`:
//! TCG the nominal one, a hypervisor with slow exits a longer one), and
//! repeats as often as the platform's pace allows (`hobby::pace::scaled`:
//! every repetition where the platform runs code about as fast as TCG).
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU64, Ordering};

use hobby::idt::{self, InterruptFrame};
use hobby::test::{Failure, Outcome};
use hobby::timer::{self, ApicTimer, Calibration, Divide};
use hobby::{case, check, check_eq, fail, println};
use pmu::apic::Vector;
use pmu::arch::itanium::driver::Itanium;
use pmu::arch::itanium::driver::{
    CounterConfig as IaConfig, Counters as IaCounters, ItaniumDriver,
};
use pmu::arch::itanium::{Counter as ItaniumHandle, CounterPmc, Generation, ItaniumPmu};
use pmu::arch::itanium::{EventCode, Plm, events};
use pmu::arch::netburst::driver::{CounterConfig, Counters, NetBurstDriver};
use pmu::arch::netburst::multiplex::Multiplexer;
use pmu::arch::netburst::schedule::Part;
use pmu::arch::netburst::{Escr, EventSpec, LogicalProcessor, NetBurstPmu};
use pmu::arch::{Architecture, Driven};
use pmu::counter::{Group, Handle};
use pmu::model::itanium::{Event, Generation as ModelGeneration, SharedItaniumModel};
use pmu::model::netburst::{
    Config, EscrGroup, EventKind, LogicalProcessor as ModelLp, Privilege, SharedNetBurstModel,
};
use x86_64::instructions::interrupts;

hobby::entry_point!(main);
pmu::owner!(Package0);
pmu::owner!(Core0);
pmu::owner!(Package1);
pmu::owner!(Core0Rotation);

const TIMER_VECTOR: u8 = 0x40;
const SPURIOUS_VECTOR: u8 = 0xFF;

static CALIBRATION: spin::Once<Calibration> = spin::Once::new();
static NETBURST: SharedNetBurstModel = SharedNetBurstModel::new(Config::prescott_ht());
static ITANIUM: SharedItaniumModel = SharedItaniumModel::new(ModelGeneration::Itanium2);
// SAFETY: the NetBurst model, reset for `multiplexing`, is a package of its
// own, and this is its one value.
static MULTIPLEXED: NetBurstPmu = unsafe { NetBurstPmu::new() };
// SAFETY: the NetBurst model, reset for `group_netburst_back_to_back`, is a
// package of its own, and this is its one value.
static GROUPED: NetBurstPmu = unsafe { NetBurstPmu::new() };
// SAFETY: the Itanium model is a processor of its own, and this is its one
// value.
static CORE0: ItaniumPmu = unsafe { ItaniumPmu::new() };
/// Timer ticks not yet acted on by the main loop.
static TICKS: AtomicU64 = AtomicU64::new(0);
/// Events the timer handler fed to the model.
static FED: AtomicU64 = AtomicU64::new(0);

fn main(_: &'static hobby::boot::BootInfo) -> ! {
    println!(
        "multiplexing: every count below comes from the NetBurst or Itanium PMU model, not \
         hardware; the multiplexer's times are the model's clocks"
    );
    hobby::pmi::local_apic().enable(Vector::new(SPURIOUS_VECTOR).unwrap());
    let cal = timer::calibrate_best_of(&mut apic_timer(), 11_932, 3);
    CALIBRATION.call_once(|| cal);
    hobby::test::run(
        "multiplexing",
        &[
            case!(multiplexing),
            case!(multiplexing_itanium),
            case!(group_itanium_freeze),
            case!(group_netburst_back_to_back),
        ],
    )
}

fn apic_timer() -> ApicTimer {
    // SAFETY: the default xAPIC page, identity-mapped; one CPU, and only the
    // cases (one at a time) program the timer; handlers only signal EOI.
    unsafe { ApicTimer::at_default_base() }
}

/// The periodic timer into `handler` while this lives (stopped on drop,
/// also on an early `Err` return).
struct Ticking;

impl Ticking {
    fn start(period_ns: u64, handler: idt::Handler) -> Result<Self, Failure> {
        let Some(cal) = CALIBRATION.get() else {
            fail!("no calibration")
        };
        let count = cal.count_for(period_ns, Divide::By1);
        interrupts::disable();
        TICKS.store(0, Ordering::SeqCst);
        FED.store(0, Ordering::SeqCst);
        idt::set_handler(TIMER_VECTOR, handler);
        apic_timer().start_periodic(Vector::new(TIMER_VECTOR).unwrap(), Divide::By1, count);
        interrupts::enable();
        Ok(Ticking)
    }
}

impl Drop for Ticking {
    fn drop(&mut self) {
        interrupts::disable();
        apic_timer().stop();
        // Take a tick that expired before the stop (boundedly: a real CPU
        // takes it some instructions later).
        hobby::pmi::wait_until_taken(TIMER_VECTOR);
    }
}

/// The share of the CPU (percent) a case's ticks may take.
const TICK_OVERHEAD_PERCENT: u64 = 50;

/// The shortest tick period, from `shortest_ns` up to 256 times it, that
/// the platform keeps up with for `handler` while code spins, said on the
/// console.
fn period_for(what: &str, handler: idt::Handler, shortest_ns: u64) -> Result<u64, Failure> {
    let Some(cal) = CALIBRATION.get() else {
        fail!("no calibration")
    };
    let burst = timer::kept_up_period(
        cal,
        Vector::new(TIMER_VECTOR).unwrap(),
        handler,
        (shortest_ns, shortest_ns << 8),
        timer::Load::Spin,
        TICK_OVERHEAD_PERCENT,
    );
    println!("multiplexing: {what}: tick period {burst}");
    Ok(burst.period_ns)
}

/// A tick: the main loop rotates (deferred work, as a kernel would run it
/// from its timer softirq).
fn count_tick(_: &InterruptFrame) {
    TICKS.fetch_add(1, Ordering::SeqCst);
    apic_timer().eoi();
}

/// The six requested events: four that need FSB_ESCR0 or FSB_ESCR1
/// (SDM Table 19-28), so at most two of them count at once, and two on
/// CRU_ESCR0/1 that always fit; each with the model's view and the rate at
/// which the workload produces it (per loop iteration, in the first and
/// the second half of the run).
const EVENTS: [(&str, EventKind, [u64; 2]); 6] = [
    (
        "global_power_events:RUNNING:k",
        EventKind::new(EscrGroup::Fsb, 0x13, 1),
        [100, 100],
    ),
    (
        "FSB_data_activity:DRDY_DRV:k",
        EventKind::new(EscrGroup::Fsb, 0x17, 1),
        [37, 37],
    ),
    (
        "b2b_cycles:BIT1:k",
        EventKind::new(EscrGroup::Fsb, 0x16, 1 << 1),
        [5, 15],
    ),
    (
        "bnr:BIT0:k",
        EventKind::new(EscrGroup::Fsb, 0x08, 1),
        [250, 50],
    ),
    (
        "instr_retired:NBOGUSNTAG:k",
        EventKind::new(EscrGroup::Cru01, 0x02, 1),
        [300, 300],
    ),
    (
        "uops_retired:NBOGUS:k",
        EventKind::new(EscrGroup::Cru01, 0x01, 1),
        [400, 200],
    ),
];

/// The workload's non-halted clocks per iteration (the rate of
/// global_power_events:RUNNING): the multiplexer's time unit.
const CLOCKS_PER_ITERATION: u64 = 100;

/// Rotations in the run (timer ticks of 200 us), where the platform runs
/// code about as fast as TCG (`hobby::pace::scaled`; at least 100).
const ROTATIONS: u64 = 1000;

fn multiplexing() -> Outcome {
    NETBURST.reset();
    let info = NETBURST
        .detect()
        .ok_or("the model is not a usable NetBurst")?;
    let part = Part::new(info.model, 1);
    let (mut d, c) = NetBurstDriver::<Package0, _>::take(NETBURST.msr(), &info, &MULTIPLEXED)?;
    let first: EventSpec = EVENTS[0].0.parse()?;
    let mut requests = [(first, LogicalProcessor::T0); 6];
    for (r, (name, _, _)) in requests.iter_mut().zip(EVENTS) {
        r.0 = name.parse()?;
    }
    let Ok(mut mux) = Multiplexer::<6>::new(part, c.erase_all(), &requests) else {
        fail!("the six events were refused");
    };
    mux.tick(&mut d, 0)?;
    let mut truth = [0u64; 6];
    let mut done = 0;
    let rotations = hobby::pace::scaled(ROTATIONS, 100);
    let period_ns = period_for("rotating", count_tick, 200_000)?;
    let ticking = Ticking::start(period_ns, count_tick)?;
    // Time is the model's: the workload's non-halted clocks (global_power_
    // events:RUNNING, 100 per iteration). QEMU's TSC keeps running while a
    // busy host holds the virtual CPU, when the workload does nothing: with
    // TSC times the estimates were off by up to 9 % under `cargo test`.
    let mut last = 0;
    let mut iterations = 0u64;
    let mut longest = 0;
    while done < rotations {
        // The workload: one iteration's events, at the half's rates.
        let half = usize::from(done >= rotations / 2);
        NETBURST.with(|m| {
            for (i, (_, kind, rate)) in EVENTS.iter().enumerate() {
                m.inject(kind.on(ModelLp::T0, Privilege::Os, rate[half]));
                truth[i] += rate[half];
            }
        });
        iterations += 1;
        if TICKS.swap(0, Ordering::SeqCst) > 0 {
            // The rotation, with interrupts off as every driver call.
            interrupts::without_interrupts(|| {
                let now = iterations * CLOCKS_PER_ITERATION;
                let r = mux.tick(&mut d, now - last);
                longest = longest.max(now - last);
                last = now;
                r
            })?;
            done += 1;
        }
    }
    drop(ticking);
    mux.finish(&mut d, iterations * CLOCKS_PER_ITERATION - last)?;
    println!(
        "multiplexing: 6 events, 4 of them sharing 2 ESCRs; {rotations} rotations on the APIC \
         timer, {iterations} workload iterations (times in model clocks, counts from the model)"
    );
    println!(
        "multiplexing: event                           enabled    running  raw       estimate  true      error   bound"
    );
    for (i, m) in mux.results().iter().enumerate() {
        let (name, _, [r1, r2]) = EVENTS[i];
        let est = m.estimate().ok_or("an event never ran")?;
        let err = est.abs_diff(truth[i]);
        // The least-run-first rotation keeps competing events' running
        // times within one tick (at most `longest`) of their share, at the
        // rate change and at the end, so within two ticks in the second
        // half; with estimate = raw x enabled / running, the error is then
        // at most 2L|r1 - mean| + 4L|r2 - mean| <= 6L|r1 - r2| events for
        // an event whose rate changes half way (L in iterations), and 0
        // for a constant rate (raw = rate x running exactly).
        let bound = 6 * (longest / CLOCKS_PER_ITERATION) * r1.abs_diff(r2);
        println!(
            "multiplexing: {name:<31} {:>10} {:>10} {:<9} {:<9} {:<9} {:.2} % {:.2} %",
            m.enabled,
            m.running,
            m.raw,
            est,
            truth[i],
            err as f64 * 100.0 / truth[i] as f64,
            bound as f64 * 100.0 / truth[i] as f64,
        );
        check!(
            err <= bound,
            "{name}: estimate {est}, true {}: off by more than {bound}",
            truth[i]
        );
        if i < 4 {
            // Two of four at a time, in turn: about half the time.
            let share = m.running as f64 / m.enabled as f64;
            check!(
                (0.4..0.6).contains(&share),
                "{name}: ran {share:.2} of the time"
            );
        } else {
            check!(m.running == m.enabled, "{name} did not always fit");
        }
    }
    println!(
        "multiplexing: the longest tick was {longest} model clocks ({} workload iterations)",
        longest / CLOCKS_PER_ITERATION
    );
    let Ok(handles) = mux.into_handles() else {
        fail!("an event is still on a counter");
    };
    let Ok(c) = Counters::from_erased(handles) else {
        fail!("a token is not back unclaimed");
    };
    let _msr = d.give_back(c);
    Ok(())
}

/// The Itanium events rotated: on the first Itanium the last four count on
/// PMC4/5 only (the catalog's), CPU_CYCLES on any counter; each with the
/// rate at which the workload produces it (per loop iteration).
const ITANIUM_EVENTS: [(&str, u64); 5] = [
    ("CPU_CYCLES", 100),
    ("IA64_INST_RETIRED", 60),
    ("INST_DISPERSED", 90),
    ("NOPS_RETIRED", 7),
    ("PREDICATE_SQUASHED_RETIRED", 3),
];

/// Rotations of the Itanium run, where the platform runs code about as fast
/// as TCG (`hobby::pace::scaled`; at least 100).
const ITANIUM_ROTATIONS: u64 = 400;

/// Itanium's multiplexer through the seam only (`Driven::take`,
/// `Architecture::multiplex`, `Driven::tick`/`finish`) on the APIC timer:
/// five events on the first Itanium's four counters, four of them on
/// PMC4/5 only, so two of those count at a time while CPU_CYCLES always
/// does. The rates are constant and the times are the workload's
/// iterations, so every estimate is exact whatever the ticks' lengths.
fn multiplexing_itanium() -> Outcome {
    const G: Generation = Generation::Itanium;
    ITANIUM.reset(ModelGeneration::Itanium);
    let (mut d, c) = Driven::take::<Core0Rotation>(&CORE0, ITANIUM.regs(), &G)?;
    let c4 = ItaniumHandle::new(G, 4).ok_or("no PMC4")?;
    let cycles = CounterPmc::new(c4, EventCode::new(G, 0x12).ok_or("CPU_CYCLES")?)?;
    let mut list = [cycles; 5];
    for (e, (name, _)) in list.iter_mut().zip(ITANIUM_EVENTS) {
        let info = events::find(G, name).ok_or("not in the catalog")?;
        *e = CounterPmc::for_event(c4, info)?
            .with_plm(Plm::ALL)
            .with_privileged(true);
    }
    let handles = Itanium::erase_all(c);
    let Ok(mut mux) = Itanium::multiplex::<5>(&G, handles, &list) else {
        fail!("the five events were refused");
    };
    type Local = &'static ItaniumPmu;
    interrupts::without_interrupts(|| Local::tick(&mut d, &mut mux, 0))?;
    let rotations = hobby::pace::scaled(ITANIUM_ROTATIONS, 100);
    let period_ns = period_for("rotating Itanium events", count_tick, 200_000)?;
    let ticking = Ticking::start(period_ns, count_tick)?;
    let (mut done, mut iterations, mut last, mut longest) = (0, 0u64, 0, 0);
    while done < rotations {
        ITANIUM.with(|m| {
            for (e, (_, rate)) in list.iter().zip(ITANIUM_EVENTS) {
                m.inject(Event::new(e.es(), e.umask().get(), rate));
            }
        });
        iterations += 1;
        if TICKS.swap(0, Ordering::SeqCst) > 0 {
            interrupts::without_interrupts(|| Local::tick(&mut d, &mut mux, iterations - last))?;
            longest = longest.max(iterations - last);
            last = iterations;
            done += 1;
        }
    }
    drop(ticking);
    longest = longest.max(iterations - last);
    interrupts::without_interrupts(|| Local::finish(&mut d, &mut mux, iterations - last))?;
    println!(
        "multiplexing: Itanium, 5 events through the seam, 4 of them on PMC4/5 only; \
         {rotations} rotations on the APIC timer, {iterations} workload iterations, the \
         longest tick {longest} (times in iterations, counts from the model)"
    );
    for (m, (name, rate)) in mux.results().iter().zip(ITANIUM_EVENTS) {
        println!(
            "multiplexing: {name:<27} enabled {:>8} running {:>8} raw {:>9} estimate {:?}",
            m.enabled,
            m.running,
            m.raw,
            m.estimate()
        );
        check_eq!(m.enabled, iterations, "{name}: enabled the whole run");
        check_eq!(
            m.estimate(),
            Some(rate * iterations),
            "{name}: the estimate"
        );
        if name == "CPU_CYCLES" {
            check_eq!(m.running, m.enabled, "{name} always fits");
        } else {
            // Two of the four at a time, least run first: their running
            // times stay within the longest tick of each other, so each
            // within it of half the time.
            check!(
                (2 * m.running).abs_diff(m.enabled) <= 2 * longest,
                "{name}: ran {} of {}, the longest tick {longest}",
                m.running,
                m.enabled
            );
        }
    }
    let Ok(handles) = mux.into_handles() else {
        fail!("an event is still on a counter");
    };
    let Ok(c) = Itanium::from_erased::<Core0Rotation>(handles) else {
        fail!("a token is not back unclaimed");
    };
    check!(Local::give_back(d, c).is_ok(), "every token given back");
    Ok(())
}

/// A tick that feeds 1,000 cycles to the Itanium model.
fn feed_itanium(_: &InterruptFrame) {
    ITANIUM.with(|m| m.inject(Event::new(0x12, 0, 1000)));
    FED.fetch_add(1000, Ordering::SeqCst);
    apic_timer().eoi();
}

/// Reads of each kind under the timer, where the platform runs code about
/// as fast as TCG (`hobby::pace::scaled`; at least 200).
const READS: u32 = 20_000;

/// The reads of each kind this platform's pace allows.
fn reads() -> u32 {
    hobby::pace::scaled(READS.into(), 200) as u32
}

/// Three Itanium 2 counters of CPU cycles while the timer feeds cycles
/// between any two register accesses: read as a group (under PMC0.fr)
/// every snapshot has three equal counts; read one by one, some do not.
fn group_itanium_freeze() -> Outcome {
    const G: Generation = Generation::Itanium2;
    let period_ns = period_for("feeding the Itanium model", feed_itanium, 20_000)?;
    let reads = reads();
    ITANIUM.reset(ModelGeneration::Itanium2);
    let (mut d, c) = ItaniumDriver::<Core0, _>::take(ITANIUM.regs(), G, &CORE0)?;
    let mut members = [c.c4.erase(), c.c5.erase(), c.c6.erase()];
    for (m, n) in members.iter_mut().zip(4..) {
        let hw = ItaniumHandle::new(G, n).ok_or("no such counter")?;
        let code = EventCode::new(G, 0x12).ok_or("CPU_CYCLES")?;
        let pmc = CounterPmc::new(hw, code)?
            .with_plm(Plm::ALL)
            .with_privileged(true);
        m.configure(&mut d, &IaConfig::counting(pmc))?;
    }
    let Ok(mut group) = Group::new(members) else {
        fail!("three claimed counters of one driver refused as a group");
    };
    group.start(&mut d)?;
    let ticking = Ticking::start(period_ns, feed_itanium)?;
    let (mut group_skewed, mut single_skewed) = (0, 0);
    for _ in 0..reads {
        let v = group.read(&mut d)?;
        group_skewed += u32::from(v != [v[0]; 3]);
        let m = group.members();
        let w = [m[0].read(&mut d)?, m[1].read(&mut d)?, m[2].read(&mut d)?];
        single_skewed += u32::from(w != [w[0]; 3]);
    }
    group.stop(&mut d)?;
    drop(ticking);
    let v = group.read(&mut d)?;
    let fed = FED.load(Ordering::SeqCst);
    println!(
        "multiplexing: Itanium 2 group of 3 under PMC0.fr, {reads} reads each while the timer \
         fed {fed} cycles: {group_skewed} group snapshots skewed, {single_skewed} one-by-one \
         reads skewed; halted at {v:?} (model counts; cycles fed while the group held the PMU \
         frozen are not counted: the price of a snapshot)"
    );
    check_eq!(group_skewed, 0, "a group read is one snapshot");
    check!(single_skewed > 0, "no tick landed between two single reads");
    check_eq!(v, [v[0]; 3], "stopped at one instant");
    check!(v[0] > 0 && v[0] <= fed, "counted {} of {fed} fed", v[0]);
    let [mut m4, mut m5, mut m6] = group.into_members();
    for m in [&mut m4, &mut m5, &mut m6] {
        m.release(&mut d)?;
    }
    let (Ok(c4), Ok(c5), Ok(c6)) = (
        Handle::from_erased(m4),
        Handle::from_erased(m5),
        Handle::from_erased(m6),
    ) else {
        fail!("a member is not back unclaimed");
    };
    check!(
        d.give_back(IaCounters { c4, c5, c6, ..c }).is_ok(),
        "every token given back"
    );
    Ok(())
}

/// A tick that feeds 1,000 non-halted clocks to the NetBurst model.
fn feed_netburst(_: &InterruptFrame) {
    NETBURST.with(|m| m.inject(EVENTS[0].1.on(ModelLp::T0, Privilege::Os, 1000)));
    FED.fetch_add(1000, Ordering::SeqCst);
    apic_timer().eoi();
}

/// Two NetBurst counters of non-halted clocks (global_power_events through
/// FSB_ESCR0 on counter 0 and FSB_ESCR1 on counter 2): NetBurst has no
/// global enable, so a group read is two back-to-back RDPMCs, and a tick
/// between them skews it; with interrupts off around the group operations
/// (as a kernel calls the driver) nothing lands between them, and the group
/// starts and stops with equal counts.
fn group_netburst_back_to_back() -> Outcome {
    let period_ns = period_for("feeding the NetBurst model", feed_netburst, 20_000)?;
    let reads = reads();
    NETBURST.reset();
    let info = NETBURST
        .detect()
        .ok_or("the model is not a usable NetBurst")?;
    let (mut d, c) = NetBurstDriver::<Package1, _>::take(NETBURST.msr(), &info, &GROUPED)?;
    let (mut a, mut b) = (c.c0.erase(), c.c2.erase());
    let spec: EventSpec = EVENTS[0].0.parse()?;
    a.configure(&mut d, &CounterConfig::counting(spec, Escr::FsbEscr0))?;
    b.configure(&mut d, &CounterConfig::counting(spec, Escr::FsbEscr1))?;
    let Ok(mut group) = Group::new([a, b]) else {
        fail!("two claimed counters of one driver refused as a group");
    };
    interrupts::without_interrupts(|| group.start(&mut d))?;
    let ticking = Ticking::start(period_ns, feed_netburst)?;
    let (mut open, mut closed) = (0, 0);
    for _ in 0..reads {
        let v = group.read(&mut d)?;
        open += u32::from(v[0] != v[1]);
        let w = interrupts::without_interrupts(|| group.read(&mut d))?;
        closed += u32::from(w[0] != w[1]);
    }
    drop(ticking);
    interrupts::without_interrupts(|| group.stop(&mut d))?;
    let v = group.read(&mut d)?;
    let fed = FED.load(Ordering::SeqCst);
    println!(
        "multiplexing: NetBurst group of 2 (no global enable: back-to-back CCCR writes and \
         RDPMCs), {reads} reads each while the timer fed {fed} clocks: {open} skewed with \
         interrupts on, {closed} with interrupts off; halted at {v:?} (model counts)"
    );
    check!(open > 0, "no tick landed between the two RDPMCs");
    check_eq!(closed, 0, "nothing lands between back-to-back accesses");
    check_eq!(v, [fed; 2], "started and stopped together: every clock fed");
    let [mut a, mut b] = group.into_members();
    a.release(&mut d)?;
    b.release(&mut d)?;
    let (Ok(c0), Ok(c2)) = (Handle::from_erased(a), Handle::from_erased(b)) else {
        fail!("a member is not back unclaimed");
    };
    let _msr = d.give_back(Counters { c0, c2, ..c });
    Ok(())
}

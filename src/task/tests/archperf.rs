//! Per-task counting on the architectural PMU's model (Skylake: four
//! general counters, three fixed, version 4): exact traffic and semantics.

use std::vec::Vec;

use crate::access::{AccessCounts, Recording};
use crate::apic::{LvtPerfCounter, LvtPerfCounterEntry, PmiDelivery, Vector};
use crate::arch::archperf::driver::{
    ArchPerfDriver, ArchPerfmon, ConfigError, CounterConfig, Counters,
};
use crate::arch::archperf::{ArchPerfPmu, EventSpec};
use crate::arch::handle_pmi;
use crate::counter::{AnyHandle, DriverError, Owner};
use crate::model::archperf::{ArchPerfModel, Config, Event};
use crate::sampling::SampleAfter;
use crate::task::{Attribution, OnCpu, TaskError, TaskEvents, TaskSwitcher};
use crate::testing::archperf_pmu;

type Model = Recording<ArchPerfModel, 256>;
type Ap<'s, O> = ArchPerfDriver<'s, O, Model>;
type Ctx = TaskEvents<ArchPerfmon, 4>;

const INSTRUCTIONS: (u8, u8) = (0xC0, 0x00);
const CYCLES: (u8, u8) = (0x3C, 0x00);
const BRANCHES: (u8, u8) = (0xC4, 0x00);

struct Lvt;

impl LvtPerfCounterEntry for Lvt {
    fn write_lvt_perf_counter(&mut self, _: LvtPerfCounter) {}
}

fn entry() -> LvtPerfCounter {
    LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(0xF0).unwrap()))
}

fn take<O: Owner>(pmu: &ArchPerfPmu) -> (Ap<'_, O>, Counters<O>) {
    let m = ArchPerfModel::new(Config::skylake());
    let info = crate::detect::detect(&m, &mut m.clone())
        .unwrap()
        .arch_perf()
        .unwrap();
    let (mut d, c) = ArchPerfDriver::take(Recording::new(m), &info, pmu).unwrap();
    d.msr().clear();
    (d, c)
}

fn inject<O: Owner>(d: &mut Ap<'_, O>, (select, umask): (u8, u8), n: u64) {
    d.msr().inner_mut().inject(Event::new(select, umask, n));
}

fn traffic<O: Owner>(d: &mut Ap<'_, O>) -> AccessCounts {
    d.msr().take_counts()
}

fn counting(s: &str) -> CounterConfig {
    CounterConfig::counting(s.parse::<EventSpec>().unwrap())
}

fn sampling<O: Owner>(d: &Ap<'_, O>, s: &str, n: u64) -> CounterConfig {
    counting(s).sampling(SampleAfter::new(n, d.overflow_rule()).unwrap())
}

/// The PMI, if the model raised it, through the handler: each sample
/// attributed through `cpu`.
fn deliver<O: Owner>(d: &mut Ap<'_, O>, cpu: &OnCpu, out: &mut Vec<(Attribution, u64)>) {
    if !d.msr().inner_mut().take_pmi() {
        return;
    }
    let pmu = d.physical();
    handle_pmi(pmu, d.msr().inner_mut(), &mut Lvt, entry(), 0, |s| {
        if let Some(a) = cpu.attribute(s.counter) {
            out.push((a, u64::from(s.periods)));
        }
    })
    .unwrap();
}

/// Three counters set aside (PMC2, PMC3, fixed counter 0), PMC0 the
/// kernel's: the traffic of every kind of switch, exactly.
#[test]
fn every_kind_of_switch_costs_exactly_what_the_table_says() {
    crate::owner!(Cpu);
    let pmu = archperf_pmu();
    static ON: OnCpu = OnCpu::new();
    let (mut d, c) = take::<Cpu>(&pmu);
    let g2 = c.g2.unwrap().erase();
    let g3 = c.g3.unwrap().erase();
    let f0 = c.f0.unwrap().erase();
    let mut s = TaskSwitcher::<ArchPerfmon, 3>::new(&mut d, [g2, g3, f0], &ON).unwrap();
    assert_eq!(traffic(&mut d), AccessCounts::msr(0, 0, 0), "setting aside");
    let (mut a, mut b, mut other, mut empty) = (Ctx::new(1), Ctx::new(2), Ctx::new(3), Ctx::new(4));
    for ctx in [&mut a, &mut b] {
        s.attach(&d, ctx, counting("instructions"), false).unwrap();
        s.attach(&d, ctx, sampling(&d, "cycles", 1000), false)
            .unwrap();
    }
    s.attach(&d, &mut other, counting("branches"), false)
        .unwrap();
    s.attach(&d, &mut other, counting("cycles:u"), false)
        .unwrap();
    assert_eq!(traffic(&mut d), AccessCounts::msr(0, 0, 0), "attaching");

    s.switch(&mut d, None::<&mut Ctx>, None, 0).unwrap();
    s.switch(&mut d, None, Some(&mut empty), 1).unwrap();
    s.switch(&mut d, Some(&mut empty), None, 2).unwrap();
    assert_eq!(
        traffic(&mut d),
        AccessCounts::msr(0, 0, 0),
        "neither side counts: nothing"
    );
    s.switch(&mut d, None, Some(&mut a), 3).unwrap();
    assert_eq!(
        traffic(&mut d),
        AccessCounts::msr(0, 5, 0),
        "2 controls, 2 values, GLOBAL_CTRL"
    );
    s.switch(&mut d, Some(&mut a), Some(&mut b), 4).unwrap();
    assert_eq!(
        traffic(&mut d),
        AccessCounts::msr(0, 2, 2),
        "the same event set: the counter values only"
    );
    s.switch(&mut d, Some(&mut b), Some(&mut other), 5).unwrap();
    assert_eq!(
        traffic(&mut d),
        AccessCounts::msr(0, 4, 2),
        "other events on the same counters: 2 reads, 2 controls, 2 values"
    );
    s.switch(&mut d, Some(&mut other), Some(&mut empty), 6)
        .unwrap();
    assert_eq!(
        traffic(&mut d),
        AccessCounts::msr(0, 1, 2),
        "GLOBAL_CTRL stops both, 2 reads"
    );
    s.switch(&mut d, Some(&mut empty), Some(&mut a), 7).unwrap();
    assert_eq!(
        traffic(&mut d),
        AccessCounts::msr(0, 5, 0),
        "the controls changed since: written again"
    );
    s.switch(&mut d, Some(&mut a), None, 8).unwrap();
    assert_eq!(traffic(&mut d), AccessCounts::msr(0, 1, 2));
    let tokens = s.finish(&mut d).unwrap();
    assert_eq!(
        traffic(&mut d),
        AccessCounts::msr(0, 6, 0),
        "each counter's control and value zeroed"
    );
    let [g2, g3, f0] = tokens;
    let c = Counters {
        g2: Some(crate::counter::Handle::from_erased(g2).unwrap()),
        g3: Some(crate::counter::Handle::from_erased(g3).unwrap()),
        f0: Some(crate::counter::Handle::from_erased(f0).unwrap()),
        ..c
    };
    let _ = d.give_back(c);
}

/// Two tasks count instructions and cycles beside the kernel's CPU-wide
/// instructions counter: each task's counts are exactly its own events,
/// the kernel's all of them; a sampling period that spans a switch-out
/// is resumed; an overflow pending at a switch-out is the outgoing
/// task's; each PMI's samples are the running task's.
#[test]
fn counts_follow_their_task_and_the_kernel_counts_beside() {
    crate::owner!(Cpu);
    let pmu = archperf_pmu();
    static ON: OnCpu = OnCpu::new();
    let (mut d, c) = take::<Cpu>(&pmu);
    let kernel =
        c.g0.configure(&mut d, &counting("instructions"))
            .unwrap()
            .enable(&mut d)
            .unwrap();
    let set_aside = [c.g2.unwrap().erase(), c.g3.unwrap().erase()];
    let mut s = TaskSwitcher::<ArchPerfmon, 2>::new(&mut d, set_aside, &ON).unwrap();
    let (mut a, mut b) = (Ctx::new(10), Ctx::new(20));
    s.attach(&d, &mut a, counting("instructions"), false)
        .unwrap();
    s.attach(&d, &mut a, sampling(&d, "cycles", 100), false)
        .unwrap();
    s.attach(&d, &mut b, sampling(&d, "cycles", 30), false)
        .unwrap();
    let mut samples = Vec::new();

    s.switch(&mut d, None, Some(&mut a), 0).unwrap();
    inject(&mut d, INSTRUCTIONS, 500);
    inject(&mut d, CYCLES, 70);
    deliver(&mut d, &ON, &mut samples);
    s.switch(&mut d, Some(&mut a), Some(&mut b), 10).unwrap();
    inject(&mut d, INSTRUCTIONS, 40);
    inject(&mut d, CYCLES, 95);
    deliver(&mut d, &ON, &mut samples);
    s.switch(&mut d, Some(&mut b), Some(&mut a), 15).unwrap();
    // 30 more cycles end A's first period, resumed at 70.
    inject(&mut d, CYCLES, 29);
    deliver(&mut d, &ON, &mut samples);
    assert!(samples.iter().all(|(t, _)| t.task == 20), "{samples:?}");
    inject(&mut d, CYCLES, 1);
    deliver(&mut d, &ON, &mut samples);
    assert_eq!(
        samples.last(),
        Some(&(Attribution { task: 10, event: 1 }, 1)),
        "A's period ends at its 100th cycle, across the switch"
    );
    // 100 more overflow A again, but the PMI is still pending when A is
    // switched out: its period is A's, owed, and the PMI finds nothing.
    inject(&mut d, CYCLES, 105);
    s.switch(&mut d, Some(&mut a), Some(&mut b), 30).unwrap();
    deliver(&mut d, &ON, &mut samples);
    s.switch(&mut d, Some(&mut b), None, 31).unwrap();

    let (ca, cb) = (a.count(1).unwrap(), b.count(0).unwrap());
    assert_eq!(a.count(0).unwrap().count, 500, "A's instructions only");
    assert_eq!((ca.count, ca.periods), (205, 2), "A's cycles");
    assert_eq!(a.residual(1), Some(5));
    assert_eq!(a.take_pending(1), 1, "the period found at the switch-out");
    assert_eq!((cb.count, cb.periods), (95, 3), "B's cycles");
    assert_eq!(b.residual(0), Some(5));
    assert_eq!(b.take_pending(0), 0);
    let by = |task: u64| -> u64 {
        samples
            .iter()
            .filter(|(t, _)| t.task == task)
            .map(|(_, p)| p)
            .sum()
    };
    assert_eq!((by(10), by(20)), (1, 3), "one sample per serviced period");
    assert_eq!((ca.enabled, ca.running), (10 + 15, 10 + 15));
    assert_eq!((cb.enabled, cb.running), (5 + 1, 5 + 1));
    assert_eq!(kernel.read(&mut d).unwrap(), 540, "the kernel's count: all");
    assert_eq!(
        d.physical().pmi().interrupts(),
        3,
        "B's (three periods at once), A's, and the one A's switch-out withdrew"
    );
    assert_eq!(d.physical().pmi().spurious(), 1);
    let _ = s.finish(&mut d).unwrap();
    let _ = kernel.halt(&mut d).unwrap().release(&mut d).unwrap();
    drop(d);
}

/// What does not fit is refused, the context unchanged: more events than
/// counters set aside, an event no counter set aside takes, a precise
/// event; and a context cannot be switched in twice or out where it is
/// not loaded.
#[test]
fn what_does_not_fit_is_refused() {
    crate::owner!(Cpu);
    let pmu = archperf_pmu();
    static ON: OnCpu = OnCpu::new();
    let (mut d, c) = take::<Cpu>(&pmu);
    let mut s =
        TaskSwitcher::<ArchPerfmon, 2>::new(&mut d, [c.g0.erase(), c.f1.unwrap().erase()], &ON)
            .unwrap();
    let mut a = Ctx::new(1);
    s.attach(&d, &mut a, counting("cycles"), false).unwrap();
    s.attach(&d, &mut a, counting("cycles"), false).unwrap();
    assert_eq!(
        s.attach(&d, &mut a, counting("instructions"), false),
        Err(TaskError::DoesNotFit)
    );
    assert_eq!(a.len(), 2, "unchanged");
    let mut b = Ctx::new(2);
    assert_eq!(
        s.attach(&d, &mut b, counting("branches:p"), false),
        Err(TaskError::Driver(DriverError::Config(
            ConfigError::PreciseInContext
        )))
    );
    assert!(b.is_empty());
    s.switch(&mut d, None, Some(&mut a), 0).unwrap();
    let mut c2 = Ctx::new(3);
    assert_eq!(
        s.switch(&mut d, Some(&mut c2), Some(&mut b), 1),
        Err(TaskError::NotLoadedHere)
    );
    assert_eq!(
        s.attach(&d, &mut a, counting("cycles"), false),
        Err(TaskError::Loaded)
    );
    s.switch(&mut d, Some(&mut a), None, 2).unwrap();
    let _: [AnyHandle<ArchPerfmon>; 2] = s.finish(&mut d).unwrap();
    inject(&mut d, BRANCHES, 1);
    drop(d);
}

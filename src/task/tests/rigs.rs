//! Each architecture's model as the randomized run's two CPUs, and the
//! runs: 100,000 switches on the architectural PMU, 30,000 on each of the
//! others (AMD with and without PerfMonV2, NetBurst's two logical
//! processors of one package, two Itanium 2 processors).

use std::boxed::Box;

use super::random::{Hook, K, Rig, run};
use crate::apic::{LvtPerfCounter, LvtPerfCounterEntry, PmiDelivery, Vector};
use crate::arch::handle_pmi;
use crate::counter::{AnyHandle, Owner};
use crate::sampling::SampleAfter;
use crate::testing::Interrupting;

struct Lvt;

impl LvtPerfCounterEntry for Lvt {
    fn write_lvt_perf_counter(&mut self, _: LvtPerfCounter) {}
}

fn entry() -> LvtPerfCounter {
    LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(0xF0).unwrap()))
}

mod archperf {
    use super::*;
    use crate::arch::archperf::ArchPerfPmu;
    use crate::arch::archperf::driver::{ArchPerfDriver, ArchPerfmon, CounterConfig};
    use crate::model::archperf::{ArchPerfModel, Config, Event};

    pub(in super::super) struct ArchPerf;

    /// Instructions, cycles, branches; the kernel's LLC misses.
    const EVENTS: [(&str, u8, u8); 4] = [
        ("instructions", 0xC0, 0x00),
        ("cycles", 0x3C, 0x00),
        ("branches", 0xC4, 0x00),
        ("cache-misses", 0x2E, 0x41),
    ];

    impl Rig for ArchPerf {
        type A = ArchPerfmon;
        type Machine = [ArchPerfPmu; 2];
        type Regs = ArchPerfModel;
        type Driver<O: Owner> = ArchPerfDriver<'static, O, Interrupting<ArchPerfModel, Hook<Self>>>;

        fn machine() -> &'static Self::Machine {
            Box::leak(Box::new([
                crate::testing::archperf_pmu(),
                crate::testing::archperf_pmu(),
            ]))
        }

        fn regs(_: &'static Self::Machine, _: usize) -> ArchPerfModel {
            ArchPerfModel::new(Config::skylake())
        }

        fn take<O: Owner>(
            m: &'static Self::Machine,
            cpu: usize,
            regs: Interrupting<ArchPerfModel, Hook<Self>>,
        ) -> (Self::Driver<O>, AnyHandle<ArchPerfmon>, [AnyHandle<ArchPerfmon>; K]) {
            let info = crate::detect::detect(&regs.inner, &mut regs.inner.clone())
                .unwrap()
                .arch_perf()
                .unwrap();
            let (d, c) = ArchPerfDriver::take(regs, &info, &m[cpu]).unwrap();
            let set_aside = [c.g1.erase(), c.g2.unwrap().erase(), c.f0.unwrap().erase()];
            (d, c.g0.erase(), set_aside)
        }

        fn backend<O: Owner>(
            d: &mut Self::Driver<O>,
        ) -> &mut Interrupting<ArchPerfModel, Hook<Self>> {
            d.msr()
        }

        fn config<O: Owner>(d: &Self::Driver<O>, kind: usize, every: u64) -> CounterConfig {
            let c = CounterConfig::counting(EVENTS[kind].0.parse().unwrap());
            match every {
                0 => c,
                n => c.sampling(SampleAfter::new(n, d.overflow_rule()).unwrap()),
            }
        }

        fn inject(_: &'static Self::Machine, regs: &mut ArchPerfModel, _: usize, kind: usize, n: u64) -> u64 {
            let (_, select, umask) = EVENTS[kind];
            regs.inject(Event::new(select, umask, n));
            n
        }

        fn take_pmi(_: &'static Self::Machine, regs: &mut ArchPerfModel, _: usize) -> bool {
            regs.take_pmi()
        }

        fn handle(
            m: &'static Self::Machine,
            regs: &mut ArchPerfModel,
            cpu: usize,
            sink: &mut dyn FnMut(u8, u64),
        ) {
            handle_pmi(&m[cpu], regs, &mut Lvt, entry(), 0, |s| {
                sink(s.counter, u64::from(s.periods))
            })
            .unwrap();
        }
    }
}

mod amd {
    use super::*;
    use crate::arch::amd::AmdPmu;
    use crate::arch::amd::driver::{AmdCore, AmdDriver, CounterConfig};
    use crate::model::amd::{AmdModel, Config, Event};

    /// AMD's core PMU: `V2` with PerfMonV2 (Zen 4), without (Zen 2).
    pub(in super::super) struct Amd<const V2: bool>;

    /// Instructions, cycles, branches; the kernel's branch misses.
    const EVENTS: [(&str, u16); 4] = [
        ("instructions", 0xC0),
        ("cycles", 0x76),
        ("branches", 0xC2),
        ("branch-misses", 0xC3),
    ];

    impl<const V2: bool> Rig for Amd<V2> {
        type A = AmdCore;
        type Machine = [AmdPmu; 2];
        type Regs = AmdModel;
        type Driver<O: Owner> = AmdDriver<'static, O, Interrupting<AmdModel, Hook<Self>>>;

        fn machine() -> &'static Self::Machine {
            Box::leak(Box::new([crate::testing::amd_pmu(), crate::testing::amd_pmu()]))
        }

        fn regs(_: &'static Self::Machine, _: usize) -> AmdModel {
            AmdModel::new(if V2 { Config::zen4() } else { Config::zen2() })
        }

        fn take<O: Owner>(
            m: &'static Self::Machine,
            cpu: usize,
            regs: Interrupting<AmdModel, Hook<Self>>,
        ) -> (Self::Driver<O>, AnyHandle<AmdCore>, [AnyHandle<AmdCore>; K]) {
            let info = crate::detect::detect(&regs.inner, &mut regs.inner.clone())
                .unwrap()
                .usable_amd()
                .unwrap();
            let (d, c) = AmdDriver::take(regs, &info, &m[cpu]).unwrap();
            let set_aside = [c.c1.erase(), c.c2.erase(), c.c3.erase()];
            (d, c.c0.erase(), set_aside)
        }

        fn backend<O: Owner>(d: &mut Self::Driver<O>) -> &mut Interrupting<AmdModel, Hook<Self>> {
            d.msr()
        }

        fn config<O: Owner>(d: &Self::Driver<O>, kind: usize, every: u64) -> CounterConfig {
            let c = CounterConfig::counting(EVENTS[kind].0.parse().unwrap());
            match every {
                0 => c,
                n => c.sampling(SampleAfter::new(n, d.overflow_rule()).unwrap()),
            }
        }

        fn inject(_: &'static Self::Machine, regs: &mut AmdModel, _: usize, kind: usize, n: u64) -> u64 {
            regs.inject(Event::new(EVENTS[kind].1, 0, n));
            n
        }

        fn take_pmi(_: &'static Self::Machine, regs: &mut AmdModel, _: usize) -> bool {
            regs.take_pmi()
        }

        fn handle(
            m: &'static Self::Machine,
            regs: &mut AmdModel,
            cpu: usize,
            sink: &mut dyn FnMut(u8, u64),
        ) {
            handle_pmi(&m[cpu], regs, &mut Lvt, entry(), 0, |s| {
                sink(s.counter, u64::from(s.periods))
            })
            .unwrap();
        }
    }
}

/// The architectural PMU: 100,000 switches.
#[test]
fn archperf_counts_stay_exact_over_100000_switches() {
    crate::owner!(Cpu0);
    crate::owner!(Cpu1);
    let ran = run::<archperf::ArchPerf, Cpu0, Cpu1>(0x39_0001, 100_000);
    std::println!("archperf: {ran:?}");
    assert!(ran.migrations > 10_000 && ran.pmis > 10_000 && ran.owed > 100, "{ran:?}");
}

/// AMD with PerfMonV2 (Zen 4) and without (Zen 2).
#[test]
fn amd_counts_stay_exact_over_random_switches() {
    crate::owner!(V2Cpu0);
    crate::owner!(V2Cpu1);
    crate::owner!(LegacyCpu0);
    crate::owner!(LegacyCpu1);
    let ran = run::<amd::Amd<true>, V2Cpu0, V2Cpu1>(0x39_0002, 30_000);
    std::println!("amd PerfMonV2: {ran:?}");
    assert!(ran.migrations > 1_000 && ran.pmis > 1_000 && ran.owed > 10, "{ran:?}");
    let ran = run::<amd::Amd<false>, LegacyCpu0, LegacyCpu1>(0x39_0003, 30_000);
    std::println!("amd legacy: {ran:?}");
    assert!(ran.migrations > 1_000 && ran.pmis > 1_000 && ran.owed > 10, "{ran:?}");
}

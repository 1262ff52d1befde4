//! Each architecture's model as the randomized run's two CPUs, and the
//! runs: 100,000 switches on the architectural PMU, 30,000 on each of the
//! others (AMD with and without PerfMonV2, NetBurst's two logical
//! processors of one package, two Itanium 2 processors).

use std::boxed::Box;

use super::random::{Hook, K, Rig, run, sweep, traffic};
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
        ) -> (
            Self::Driver<O>,
            AnyHandle<ArchPerfmon>,
            [AnyHandle<ArchPerfmon>; K],
        ) {
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

        fn inject(
            _: &'static Self::Machine,
            regs: &mut ArchPerfModel,
            _: usize,
            kind: usize,
            n: u64,
        ) -> u64 {
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
            Box::leak(Box::new([
                crate::testing::amd_pmu(),
                crate::testing::amd_pmu(),
            ]))
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

        fn inject(
            _: &'static Self::Machine,
            regs: &mut AmdModel,
            _: usize,
            kind: usize,
            n: u64,
        ) -> u64 {
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

mod netburst {
    use std::sync::Mutex;

    use super::*;
    use crate::access::MsrAccess;
    use crate::arch::netburst::driver::{CounterConfig, NetBurst, NetBurstDriver};
    use crate::arch::netburst::{Escr, EventSpec, LogicalProcessor, NetBurstPmu};
    use crate::model::netburst::{
        Config, EventKind, Fault, LogicalProcessor as ModelLp, NetBurstModel, Privilege,
    };

    /// The two logical processors of one Hyper-Threading package
    /// (Prescott): CPU 0 is T0, CPU 1 is T1, sharing the model and the
    /// package's `NetBurstPmu`.
    pub(in super::super) struct Package;

    /// One logical processor's view of the shared model.
    pub(in super::super) struct View {
        m: &'static Mutex<NetBurstModel>,
        lp: ModelLp,
    }

    impl View {
        fn with<T>(&self, f: impl FnOnce(&mut crate::model::netburst::ThreadView<'_>) -> T) -> T {
            let mut m = self.m.lock().unwrap();
            f(&mut m.thread(self.lp).unwrap())
        }
    }

    impl MsrAccess for View {
        type Error = Fault;
        fn read_msr(&mut self, msr: u32) -> Result<u64, Fault> {
            self.with(|v| v.read_msr(msr))
        }
        fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Fault> {
            self.with(|v| v.write_msr(msr, value))
        }
        fn rdpmc(&mut self, index: u32) -> Result<u64, Fault> {
            self.with(|v| v.rdpmc(index))
        }
    }

    /// Instructions, branches (CRU_ESCR2/3) and store-buffer stalls (ALF),
    /// as configured for T0 (each CPU's driver qualifies them for its
    /// own); the kernel's clock ticks (global_power_events, FSB).
    const EVENTS: [(&str, Escr); 4] = [
        ("instr_retired:NBOGUSNTAG:k", Escr::CruEscr0),
        ("branch_retired:MMTP:k", Escr::CruEscr2),
        ("resource_stall:SBFULL:k", Escr::AlfEscr0),
        ("global_power_events:RUNNING:k", Escr::FsbEscr0),
    ];

    fn lp(cpu: usize) -> (LogicalProcessor, ModelLp) {
        match cpu {
            0 => (LogicalProcessor::T0, ModelLp::T0),
            _ => (LogicalProcessor::T1, ModelLp::T1),
        }
    }

    impl Rig for Package {
        type A = NetBurst;
        type Machine = (Mutex<NetBurstModel>, NetBurstPmu);
        type Regs = View;
        type Driver<O: Owner> = NetBurstDriver<'static, O, Interrupting<View, Hook<Self>>>;

        fn machine() -> &'static Self::Machine {
            Box::leak(Box::new((
                Mutex::new(NetBurstModel::new(Config::prescott_ht())),
                crate::testing::netburst_pmu(),
            )))
        }

        fn regs(m: &'static Self::Machine, cpu: usize) -> View {
            View {
                m: &m.0,
                lp: lp(cpu).1,
            }
        }

        fn take<O: Owner>(
            m: &'static Self::Machine,
            cpu: usize,
            regs: Interrupting<View, Hook<Self>>,
        ) -> (
            Self::Driver<O>,
            AnyHandle<NetBurst>,
            [AnyHandle<NetBurst>; K],
        ) {
            let c = *m.0.lock().unwrap().config();
            let info = crate::detect::NetBurstCpu {
                model: c.model,
                msr_instructions: true,
                perf_mon_available: true,
                pebs_available: true,
                hyper_threading: c.hyper_threading,
                logical_processors: 2,
            };
            let (d, c) = NetBurstDriver::take_for(lp(cpu).0, regs, &info, &m.1).unwrap();
            let all = c.erase_all();
            let [kernel, a, b, e]: [usize; 4] = match cpu {
                0 => [0, 12, 13, 16],
                _ => [2, 14, 15, 17],
            };
            let mut all = all.map(Some);
            let mut take = |n: usize| all[n].take().unwrap();
            let set_aside = [take(a), take(b), take(e)];
            (d, take(kernel), set_aside)
        }

        fn backend<O: Owner>(d: &mut Self::Driver<O>) -> &mut Interrupting<View, Hook<Self>> {
            d.msr()
        }

        fn config<O: Owner>(d: &Self::Driver<O>, kind: usize, every: u64) -> CounterConfig {
            if kind == 3 {
                return d.core_cycles().unwrap().1;
            }
            let (spec, escr) = EVENTS[kind];
            let c = CounterConfig::counting(spec.parse().unwrap(), escr);
            match every {
                0 => c,
                n => c.sampling(
                    SampleAfter::new(n, crate::arch::netburst::pmi::overflow_rule()).unwrap(),
                ),
            }
        }

        fn inject(m: &'static Self::Machine, _: &mut View, cpu: usize, kind: usize, n: u64) -> u64 {
            let (spec, escr) = EVENTS[kind];
            let spec: EventSpec = spec.parse().unwrap();
            let kind = EventKind::for_spec(&spec, escr).unwrap();
            m.0.lock()
                .unwrap()
                .inject(kind.on(lp(cpu).1, Privilege::Os, n));
            n
        }

        fn take_pmi(m: &'static Self::Machine, _: &mut View, cpu: usize) -> bool {
            m.0.lock().unwrap().take_pmi(lp(cpu).1).is_some()
        }

        fn handle(
            m: &'static Self::Machine,
            regs: &mut View,
            cpu: usize,
            sink: &mut dyn FnMut(u8, u64),
        ) {
            handle_pmi(m.1.logical(lp(cpu).0), regs, &mut Lvt, entry(), 0, |s| {
                sink(s.counter, u64::from(s.periods))
            })
            .unwrap();
        }
    }
}

mod itanium {
    use super::*;
    use crate::arch::itanium::driver::{CounterConfig, Itanium, ItaniumDriver};
    use crate::arch::itanium::pmi::overflow_rule;
    use crate::arch::itanium::{CounterPmc, EventCode, Generation, ItaniumPmu, Plm};
    use crate::model::itanium::{self as model, Event, ItaniumModel, Psr};

    /// Two Itanium 2 processors.
    pub(in super::super) struct Itanium2;

    /// CPU cycles, IA-64 instructions retired, NOPs retired; the kernel's
    /// back-end bubbles.
    const EVENTS: [u8; 4] = [0x12, 0x08, 0x50, 0x00];
    const G: Generation = Generation::Itanium2;

    impl Rig for Itanium2 {
        type A = Itanium;
        type Machine = [ItaniumPmu; 2];
        type Regs = ItaniumModel;
        type Driver<O: Owner> = ItaniumDriver<'static, O, Interrupting<ItaniumModel, Hook<Self>>>;
        const PMI_IN_SWITCH: bool = false;

        fn machine() -> &'static Self::Machine {
            Box::leak(Box::new([
                crate::testing::itanium_pmu(),
                crate::testing::itanium_pmu(),
            ]))
        }

        fn regs(_: &'static Self::Machine, _: usize) -> ItaniumModel {
            let mut m = ItaniumModel::new(model::Generation::Itanium2);
            m.set_psr(Psr::MONITORING);
            m
        }

        fn take<O: Owner>(
            m: &'static Self::Machine,
            cpu: usize,
            regs: Interrupting<ItaniumModel, Hook<Self>>,
        ) -> (Self::Driver<O>, AnyHandle<Itanium>, [AnyHandle<Itanium>; K]) {
            let (d, c) = ItaniumDriver::take(regs, G, &m[cpu]).unwrap();
            (d, c.c4.erase(), [c.c5.erase(), c.c6.erase(), c.c7.erase()])
        }

        fn backend<O: Owner>(
            d: &mut Self::Driver<O>,
        ) -> &mut Interrupting<ItaniumModel, Hook<Self>> {
            d.regs()
        }

        /// Configured for counter 4; a context moves it to its counter.
        fn config<O: Owner>(_: &Self::Driver<O>, kind: usize, every: u64) -> CounterConfig {
            let hw = crate::arch::itanium::Counter::new(G, 4).unwrap();
            let pmc = CounterPmc::new(hw, EventCode::new(G, EVENTS[kind]).unwrap())
                .unwrap()
                .with_plm(Plm::ALL)
                .with_privileged(true);
            let c = CounterConfig::counting(pmc);
            match every {
                0 => c,
                n => c.sampling(SampleAfter::new(n, overflow_rule(G)).unwrap()),
            }
        }

        /// One a cycle: an overflow with `oi` freezes the PMU at the end of
        /// its cycle, and what is injected while it is frozen counts for
        /// no counter (the kernel's included).
        fn inject(
            _: &'static Self::Machine,
            regs: &mut ItaniumModel,
            _: usize,
            kind: usize,
            n: u64,
        ) -> u64 {
            regs.inject(Event::new(EVENTS[kind], 0, n)).counted_cycles
        }

        fn take_pmi(_: &'static Self::Machine, regs: &mut ItaniumModel, _: usize) -> bool {
            regs.take_interrupt().is_some()
        }

        fn handle(
            m: &'static Self::Machine,
            regs: &mut ItaniumModel,
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
    assert!(
        ran.migrations > 10_000 && ran.pmis > 10_000 && ran.owed > 100,
        "{ran:?}"
    );
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
    assert!(
        ran.migrations > 1_000 && ran.pmis > 1_000 && ran.owed > 10,
        "{ran:?}"
    );
    let ran = run::<amd::Amd<false>, LegacyCpu0, LegacyCpu1>(0x39_0003, 30_000);
    std::println!("amd legacy: {ran:?}");
    assert!(
        ran.migrations > 1_000 && ran.pmis > 1_000 && ran.owed > 10,
        "{ran:?}"
    );
}

/// Events at every access of a switch are counted for their own task or
/// for none, on each architecture.
#[test]
fn no_event_is_counted_for_the_other_task_at_any_access() {
    crate::owner!(ApSweep);
    crate::owner!(V2Sweep);
    crate::owner!(LegacySweep);
    assert!(sweep::<archperf::ArchPerf, ApSweep>() > 8);
    assert!(sweep::<amd::Amd<true>, V2Sweep>() > 8);
    assert!(sweep::<amd::Amd<false>, LegacySweep>() > 8);
    crate::owner!(NbSweep);
    crate::owner!(ItSweep);
    assert!(sweep::<netburst::Package, NbSweep>() > 8);
    assert!(sweep::<itanium::Itanium2, ItSweep>() > 8);
}

/// Each kind of switch's accesses on each architecture ([`traffic`]'s
/// order): nothing where neither side counts; the counter values only
/// (2 reads, 2 writes) between the same event sets; otherwise at most
/// 2 per counter in use and 3 more (NetBurst's control is two registers,
/// its ESCR and CCCR).
#[test]
fn every_architecture_switches_with_the_accesses_it_promises() {
    crate::owner!(ApTraffic);
    crate::owner!(V2Traffic);
    crate::owner!(LegacyTraffic);
    crate::owner!(NbTraffic);
    crate::owner!(ItTraffic);
    // in: 2 controls, 2 values (+ the global enable); same: 2 + 2;
    // other: 2 reads, 2 controls, 2 values; out: 2 reads (+ 1 global, or
    // 2 controls); given back: a control and a value each.
    assert_eq!(
        traffic::<archperf::ArchPerf, ApTraffic>(),
        [0, 5, 4, 6, 3, 6]
    );
    assert_eq!(traffic::<amd::Amd<true>, V2Traffic>(), [0, 5, 4, 6, 3, 6]);
    assert_eq!(
        traffic::<amd::Amd<false>, LegacyTraffic>(),
        [0, 4, 4, 6, 4, 6]
    );
    assert_eq!(
        traffic::<netburst::Package, NbTraffic>(),
        [0, 6, 4, 8, 4, 6]
    );
    assert_eq!(
        traffic::<itanium::Itanium2, ItTraffic>(),
        [0, 4, 4, 6, 4, 6]
    );
}

/// NetBurst: the two logical processors of one package, each task
/// qualified for the logical processor it runs on at every migration.
#[test]
fn netburst_counts_follow_tasks_across_logical_processors() {
    crate::owner!(T0);
    crate::owner!(T1);
    let ran = run::<netburst::Package, T0, T1>(0x39_0004, 30_000);
    std::println!("netburst: {ran:?}");
    assert!(
        ran.migrations > 1_000 && ran.pmis > 1_000 && ran.owed > 10,
        "{ran:?}"
    );
}

/// Itanium 2: two processors.
#[test]
fn itanium_counts_stay_exact_over_random_switches() {
    crate::owner!(Cpu0);
    crate::owner!(Cpu1);
    let ran = run::<itanium::Itanium2, Cpu0, Cpu1>(0x39_0005, 30_000);
    std::println!("itanium: {ran:?}");
    assert!(
        ran.migrations > 1_000 && ran.pmis > 1_000 && ran.owed > 10,
        "{ran:?}"
    );
}

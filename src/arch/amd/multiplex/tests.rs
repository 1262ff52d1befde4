//! The AMD multiplexer on its model: the shared estimate tests, one
//! `PerfCntrGlobalCtl` write per rotation with PerfMonV2 and `PERF_CTL`
//! writes before it, the firmware's counters left out, refusals.

use std::vec::Vec;

use super::*;
use crate::access::{Access, MsrAccess, Recording};
use crate::arch::amd::driver::Counters;
use crate::arch::amd::{AmdPmu, PERF_CNTR_GLOBAL_CTL, PERF_CTL0, PERF_LEGACY_CTL0};
use crate::model::amd::{AmdModel, Config, Event};
use crate::multiplex::Multiplexed;

type Rec = Recording<AmdModel, 64>;

fn take<O: Owner>(pmu: &AmdPmu, m: AmdModel) -> (AmdDriver<'_, O, Rec>, Counters<O>) {
    let cpu = crate::detect::detect(&m, &mut m.clone())
        .unwrap()
        .usable_amd()
        .unwrap();
    AmdDriver::take(Recording::new(m), &cpu, pmu).unwrap()
}

fn inject<O: Owner>(d: &mut AmdDriver<'_, O, Rec>, select: u16, n: u64) {
    d.msr().inner_mut().inject(Event::new(select, 0, n));
}

/// A K8 whose firmware runs counters 2 and 3 (enabled before the take):
/// two counters left.
fn two_free() -> AmdModel {
    let mut m = AmdModel::new(Config::k8());
    for n in [2, 3] {
        m.write_msr(PERF_LEGACY_CTL0 + n, 0x76 | 1 << 17 | 1 << 22)
            .unwrap();
    }
    m
}

/// Four events, two counters free (the shared estimate tests' workload).
fn run<O: Owner>(
    ticks: u64,
    rate: &dyn Fn(usize, u64) -> u64,
) -> ([Multiplexed; 4], [u64; 4], u32) {
    let pmu = crate::testing::amd_pmu();
    let (mut d, c) = take::<O>(&pmu, two_free());
    let selects = [0x40u16, 0x41, 0x42, 0x43];
    let events = selects.map(|s| EventSpec::raw(s, 0));
    let mut m = Multiplexer::<4>::new(c.erase_all(), &events)
        .map_err(|(e, _)| e)
        .unwrap();
    m.tick(&mut d, 0).unwrap();
    let (mut truth, mut most) = ([0u64; 4], 0);
    for t in 0..ticks {
        most = most.max(m.running().count() as u32);
        for (i, s) in selects.into_iter().enumerate() {
            inject(&mut d, s, rate(i, t));
            truth[i] += rate(i, t);
        }
        m.tick(&mut d, 1).unwrap();
    }
    m.finish(&mut d, 0).unwrap();
    let results: [Multiplexed; 4] = core::array::from_fn(|i| m.results()[i]);
    let c = Counters::<O>::from_erased(m.into_handles().unwrap()).unwrap();
    let _ = d.give_back(c);
    (results, truth, most)
}

crate::multiplex::estimate_test_fns!(run);

/// Eight events on six counters: with PerfMonV2 every rotation that moves
/// events writes `PerfCntrGlobalCtl` once; on a PerfCtrExtCore part the
/// moves are `PERF_CTL` writes and no global one. The estimates are exact
/// at constant rates.
#[test]
fn a_rotation_is_one_global_write_with_perfmon_v2() {
    for (config, v2) in [(Config::zen4(), true), (Config::zen2(), false)] {
        crate::owner!(Cpu);
        let pmu = crate::testing::amd_pmu();
        let (mut d, c) = take::<Cpu>(&pmu, AmdModel::new(config));
        let selects = [0x40u16, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47];
        let events = selects.map(|s| EventSpec::raw(s, 0));
        let mut m = Multiplexer::<8>::new(c.erase_all(), &events)
            .map_err(|(e, _)| e)
            .unwrap();
        m.tick(&mut d, 0).unwrap();
        let mut rotations = 0;
        for _ in 0..120 {
            for (k, s) in selects.into_iter().enumerate() {
                inject(&mut d, s, 10 * (k as u64 + 1));
            }
            d.msr().clear();
            m.tick(&mut d, 1).unwrap();
            let log: Vec<Access> = d.msr().log().to_vec();
            let writes_to = |lo: u32, hi: u32| {
                log.iter()
                    .filter(
                        |a| matches!(a, Access::WriteMsr { msr, .. } if (lo..=hi).contains(msr)),
                    )
                    .count()
            };
            let global = writes_to(PERF_CNTR_GLOBAL_CTL, PERF_CNTR_GLOBAL_CTL);
            let moved = writes_to(PERF_CTL0, PERF_CTL0 + 11) > 0;
            assert_eq!(
                global,
                usize::from(v2 && moved),
                "v2 {v2}: one global write per move"
            );
            rotations += usize::from(moved);
            assert_eq!(d.msr().take_counts().rdpmc, 6, "the running events read");
        }
        assert!(rotations >= 80, "{rotations}");
        m.finish(&mut d, 0).unwrap();
        for (k, r) in m.results().iter().enumerate() {
            assert_eq!(r.enabled, 120);
            assert_eq!(r.estimate(), Some(120 * 10 * (k as u64 + 1)), "event {k}");
        }
        let c = Counters::<Cpu>::from_erased(m.into_handles().unwrap()).unwrap();
        let _ = d.give_back(c);
    }
}

/// The firmware's counters are left out: two free counters carry two
/// events at a time, and the firmware's count on.
#[test]
fn the_firmwares_counters_are_not_used() {
    crate::owner!(Cpu);
    let pmu = crate::testing::amd_pmu();
    let (mut d, c) = take::<Cpu>(&pmu, two_free());
    let events = [0x50u16, 0x51, 0x52].map(|s| EventSpec::raw(s, 0));
    let mut m = Multiplexer::<3>::new(c.erase_all(), &events)
        .map_err(|(e, _)| e)
        .unwrap();
    m.tick(&mut d, 0).unwrap();
    for _ in 0..30 {
        inject(&mut d, 0x50, 3);
        inject(&mut d, 0x51, 5);
        inject(&mut d, 0x52, 7);
        inject(&mut d, 0x76, 1);
        m.tick(&mut d, 1).unwrap();
        assert_eq!(m.running().count(), 2);
    }
    m.finish(&mut d, 0).unwrap();
    let r: Vec<_> = m
        .results()
        .iter()
        .map(|r| (r.running, r.estimate()))
        .collect();
    assert_eq!(r, [(20, Some(90)), (20, Some(150)), (20, Some(210))]);
    let model = d.msr().inner_mut();
    assert_eq!(
        (model.counter(2), model.counter(3)),
        (30, 30),
        "the firmware's count on"
    );
    let c = Counters::<Cpu>::from_erased(m.into_handles().unwrap()).unwrap();
    let _ = d.give_back(c);
}

/// Handles that are not a driver's unclaimed set are refused, and come
/// back; too many events likewise; an event the part's map lacks is
/// refused by the tick that places it.
#[test]
fn refusals() {
    crate::owner!(Cpu);
    let pmu = crate::testing::amd_pmu();
    let (mut d, c) = take::<Cpu>(&pmu, AmdModel::new(Config::zen2()));
    let mut all = c.erase_all();
    if let Some(h) = all[1].as_mut() {
        h.configure(&mut d, &CounterConfig::counting(EventSpec::raw(0x76, 0)))
            .unwrap();
    }
    let Err((e, mut all)) = Multiplexer::<2>::new(all, &[EventSpec::raw(0x40, 0)]) else {
        panic!("a claimed handle taken")
    };
    assert_eq!(e, MultiplexError::Handles { index: 1 });
    assert_eq!(
        e.to_string(),
        "handle 1 is not the driver's counter of that place, unclaimed"
    );
    if let Some(h) = all[1].as_mut() {
        h.release(&mut d).unwrap();
    }
    let Err((e, all)) = Multiplexer::<1>::new(all, &[EventSpec::raw(0x40, 0); 2]) else {
        panic!("too many events")
    };
    assert_eq!(e, MultiplexError::TooMany);
    let events = ["cycles", "ref-cycles"].map(|s| s.parse::<EventSpec>().unwrap());
    let mut m = Multiplexer::<2>::new(all, &events)
        .map_err(|(e, _)| e)
        .unwrap();
    let e = m.tick(&mut d, 0).unwrap_err();
    let unmapped = crate::arch::amd::driver::ConfigError::Unmapped {
        event: "ref-cycles",
        map: "amd_zen2_perfmon_event_map",
    };
    assert_eq!(e, ErasedError::Driver(Error::Config(unmapped)));
    m.finish(&mut d, 0).unwrap();
    let c = Counters::<Cpu>::from_erased(m.into_handles().unwrap()).unwrap();
    let _ = d.give_back(c);
}

//! Itanium's multiplexer against the Itanium model (a test instrument
//! written from the manuals): estimates, placements under the catalog's
//! counter constraints, exact register traffic per tick, refusals. The
//! model is told each event's counters (`Event::only_on`, from the
//! catalog), so an event placed where it cannot count would count nothing
//! there. Every count here comes from the model.

use std::vec::Vec;

use super::*;
use crate::access::{Access, Recording};
use crate::arch::itanium::driver::Counters;
use crate::arch::itanium::{EventCode, Plm, Threshold};
use crate::model::itanium::{Event, ItaniumModel, Psr};
use crate::multiplex::Multiplexed;

type Regs = Recording<ItaniumModel, 64>;
type Driver<'s, O> = ItaniumDriver<'s, O, Regs>;

fn take<O: Owner>(pmu: &super::super::ItaniumPmu, g: Generation) -> (Driver<'_, O>, Counters<O>) {
    let mut m = ItaniumModel::new(match g {
        Generation::Itanium => crate::model::itanium::Generation::Itanium,
        Generation::Itanium2 => crate::model::itanium::Generation::Itanium2,
        Generation::Montecito => crate::model::itanium::Generation::Montecito,
    });
    m.set_psr(Psr::MONITORING);
    ItaniumDriver::take(Recording::new(m), g, pmu).unwrap()
}

/// Catalog event `name`, at every privilege level, a privileged monitor,
/// built on the first counter the catalog allows.
fn event(g: Generation, name: &str) -> CounterPmc {
    let info = events::find(g, name).unwrap();
    let counter = Counter::new(g, info.counters.first().unwrap()).unwrap();
    CounterPmc::for_event(counter, info)
        .unwrap()
        .with_plm(Plm::ALL)
        .with_privileged(true)
}

/// `n` occurrences of `e`, which the model counts only on the counters the
/// catalog allows `e`.
fn inject<O: Owner>(d: &mut Driver<'_, O>, e: CounterPmc, n: u64) {
    let g = d.generation();
    let only = events::rule(g, e.es(), e.umask().get()).unwrap().counters;
    let event = Event::new(e.es(), e.umask().get(), n).only_on(only.bits() as u16);
    d.regs().inner_mut().inject(event);
}

/// Each running event and its counter.
fn places<const E: usize>(m: &Multiplexer<E>) -> [Option<u8>; E] {
    let mut at = [None; E];
    for (i, n) in m.running().zip(m.places()) {
        at[i] = Some(n);
    }
    at
}

/// Four events that count on PMC4/5 only on the first Itanium (the
/// catalog's), with all four counters' handles: two at once.
const ON_PMC4_5: [&str; 4] = [
    "IA64_INST_RETIRED",
    "INST_DISPERSED",
    "NOPS_RETIRED",
    "PREDICATE_SQUASHED_RETIRED",
];

/// Runs `ticks` ticks of [`ON_PMC4_5`] in which event `i` occurs
/// `rate(i, t)` times in tick `t`; returns the results, the true totals and
/// the most events that ran at once.
fn run<O: Owner>(
    ticks: u64,
    rate: &dyn Fn(usize, u64) -> u64,
) -> ([Multiplexed; 4], [u64; 4], u32) {
    let pmu = crate::testing::itanium_pmu();
    let g = Generation::Itanium;
    let (mut d, c) = take::<O>(&pmu, g);
    let list = ON_PMC4_5.map(|name| event(g, name));
    let mut m = Multiplexer::<4>::new(g, c.erase_all(), &list)
        .map_err(|(e, _)| e)
        .unwrap();
    m.tick(&mut d, 0).unwrap();
    let (mut truth, mut most) = ([0u64; 4], 0);
    for t in 0..ticks {
        most = most.max(m.running().count() as u32);
        for (i, &e) in list.iter().enumerate() {
            inject(&mut d, e, rate(i, t));
            truth[i] += rate(i, t);
        }
        m.tick(&mut d, 1).unwrap();
        assert!(m.places().all(|n| n == 4 || n == 5), "PMC4/5 only");
    }
    m.finish(&mut d, 0).unwrap();
    let results: [Multiplexed; 4] = core::array::from_fn(|i| m.results()[i]);
    let c = Counters::<O>::from_erased(m.into_handles().unwrap()).unwrap();
    assert!(d.give_back(c).is_ok());
    (results, truth, most)
}

// The shared estimate tests ([`crate::multiplex::estimate_tests`]), the
// same workloads as NetBurst's and the architectural PMU's: four events, of
// which two fit at once (here by their counter constraints).
crate::multiplex::estimate_test_fns!(run);

/// Two events for any counter listed first and two for PMC4/5 only: a
/// greedy choice (each event in turn on the lowest free counter it may
/// use) puts the first two on PMC4/5 and leaves the others out; the
/// matching places all four, every tick.
#[test]
fn all_four_count_where_a_greedy_choice_would_leave_two_out() {
    crate::owner!(Cpu);
    let pmu = crate::testing::itanium_pmu();
    let g = Generation::Itanium;
    let (mut d, c) = take::<Cpu>(&pmu, g);
    let list = [
        "CPU_CYCLES",
        "DTLB_MISSES",
        "IA64_INST_RETIRED",
        "INST_DISPERSED",
    ]
    .map(|name| event(g, name));
    // The greedy choice, on the catalog's sets.
    let mut free = g.counters();
    let greedy = list.map(|e| {
        let allowed = events::rule(g, e.es(), e.umask().get()).unwrap().counters;
        let n = allowed.intersection(free).first();
        free = n.map_or(free, |n| free.without(n));
        n
    });
    assert_eq!(greedy, [Some(4), Some(5), None, None]);
    let mut m = Multiplexer::<4>::new(g, c.erase_all(), &list)
        .map_err(|(e, _)| e)
        .unwrap();
    m.tick(&mut d, 0).unwrap();
    assert_eq!(places(&m), [Some(6), Some(7), Some(4), Some(5)]);
    for t in 0..50 {
        for (i, &e) in list.iter().enumerate() {
            inject(&mut d, e, 10 + i as u64 + t);
        }
        d.regs().clear();
        m.tick(&mut d, 1).unwrap();
        let n = d.regs().take_counts();
        assert_eq!(
            (n.pmc_reads, n.pmc_writes, n.pmd_reads, n.pmd_writes),
            (0, 0, 4, 0),
            "nothing moves: the four PMDs read, nothing else"
        );
    }
    m.finish(&mut d, 0).unwrap();
    for (i, r) in m.results().iter().enumerate() {
        let truth = (0..50).map(|t| 10 + i as u64 + t).sum::<u64>();
        assert_eq!((r.enabled, r.running, r.raw), (50, 50, truth), "event {i}");
    }
    let c = Counters::<Cpu>::from_erased(m.into_handles().unwrap()).unwrap();
    assert!(d.give_back(c).is_ok());
}

/// Five events on Itanium 2's four counters, one of them counting on PMC4
/// only (L2_FORCE_RECIRC_ANY, the catalog's): each tick moves only what
/// the rotation needs (a running event leaves its counter only when that
/// event arrives and it holds PMC4), with the register traffic exactly as
/// the module docs give it, and the estimates exact.
#[test]
fn each_tick_moves_the_fewest_events_with_exact_traffic() {
    crate::owner!(Cpu);
    let pmu = crate::testing::itanium_pmu();
    let g = Generation::Itanium2;
    let (mut d, c) = take::<Cpu>(&pmu, g);
    let names = [
        "CPU_CYCLES",
        "L2_FORCE_RECIRC_ANY",
        "IA64_INST_RETIRED",
        "DTLB_INSERTS_HPW",
        "BR_MISPRED_DETAIL_ALL_ALL_PRED",
    ];
    let list = names.map(|name| event(g, name));
    assert_eq!(
        events::rule(g, list[1].es(), 0).unwrap().counters,
        CounterSet::single(4)
    );
    let mut m = Multiplexer::<5>::new(g, c.erase_all(), &list)
        .map_err(|(e, _)| e)
        .unwrap();
    m.tick(&mut d, 0).unwrap();
    let mut displaced = 0;
    for t in 0..200 {
        for (i, &e) in list.iter().enumerate() {
            inject(&mut d, e, 10 * (i as u64 + 1));
        }
        let before = places(&m);
        d.regs().clear();
        m.tick(&mut d, 1).unwrap();
        let after = places(&m);
        let log: Vec<Access> = d.regs().log().to_vec();
        let n = d.regs().take_counts();
        let released = (0..5)
            .filter(|&i| before[i].is_some() && before[i] != after[i])
            .count() as u32;
        let arrived = (0..5)
            .filter(|&i| after[i].is_some() && before[i] != after[i])
            .count() as u32;
        let moved = u32::from(released + arrived > 0);
        let running = before.iter().flatten().count() as u32;
        assert_eq!(
            (n.pmc_reads, n.pmc_writes, n.pmd_reads, n.pmd_writes),
            (
                moved,
                2 * moved + released + 2 * arrived,
                running,
                released + arrived
            ),
            "tick {t}: {before:?} -> {after:?}"
        );
        let pmc0 = |write: bool| {
            log.iter()
                .filter(|a| match a {
                    Access::ReadPmc { pmc: 0, .. } => !write,
                    Access::WritePmc { pmc: 0, .. } => write,
                    _ => false,
                })
                .count() as u32
        };
        assert_eq!((pmc0(false), pmc0(true)), (moved, 2 * moved), "tick {t}");
        assert_eq!(after.iter().flatten().count(), 4, "four at once");
        assert!(after[1].is_none_or(|n| n == 4), "PMC4 only");
        for i in (0..5).filter(|&i| before[i].is_some() && after[i].is_some()) {
            if before[i] != after[i] {
                assert!(
                    before[i] == Some(4) && before[1].is_none() && after[1].is_some(),
                    "tick {t}: event {i} moved: {before:?} -> {after:?}"
                );
                displaced += 1;
            }
        }
    }
    assert!(displaced > 0, "the PMC4 event displaced the holder of PMC4");
    m.finish(&mut d, 0).unwrap();
    for (i, r) in m.results().iter().enumerate() {
        assert_eq!((r.enabled, r.running), (200, 160), "event {i}");
        assert_eq!(r.estimate(), Some(200 * 10 * (i as u64 + 1)), "event {i}");
    }
    let c = Counters::<Cpu>::from_erased(m.into_handles().unwrap()).unwrap();
    assert!(d.give_back(c).is_ok());
}

/// Montecito: counters 8-15 take part, and CPU_OP_CYCLES_HALTED (PMC10 only)
/// runs on PMC10; thirteen events on twelve counters, each running 12 of
/// every 13 ticks, the estimates exact.
#[test]
fn montecito_uses_counters_4_to_15() {
    crate::owner!(Cpu);
    let pmu = crate::testing::itanium_pmu();
    let g = Generation::Montecito;
    let (mut d, c) = take::<Cpu>(&pmu, g);
    let units = Unit::ALL.map(|u| u.event_code(g));
    let mut codes = Vec::new();
    let mut list = Vec::from([event(g, "CPU_OP_CYCLES_HALTED")]);
    for e in events::MONTECITO {
        let plain = e.kind == events::EventType::Plain && e.group.is_none();
        if plain
            && e.counters == g.counters()
            && !units.contains(&e.code)
            && !codes.contains(&e.code)
            && list.len() < 13
        {
            codes.push(e.code);
            list.push(event(g, e.name));
        }
    }
    assert_eq!(list.len(), 13);
    let mut m = Multiplexer::<13>::new(g, c.erase_all(), &list)
        .map_err(|(e, _)| e)
        .unwrap();
    m.tick(&mut d, 0).unwrap();
    for _ in 0..130 {
        for (i, &e) in list.iter().enumerate() {
            inject(&mut d, e, i as u64 + 1);
        }
        m.tick(&mut d, 1).unwrap();
        assert_eq!(m.running().count(), 12);
        assert!(places(&m)[0].is_none_or(|n| n == 10));
    }
    m.finish(&mut d, 0).unwrap();
    for (i, r) in m.results().iter().enumerate() {
        assert_eq!((r.enabled, r.running), (130, 120), "event {i}");
        assert_eq!(r.estimate(), Some(130 * (i as u64 + 1)), "event {i}");
    }
    // Counters 8-15 are not another generation's.
    let Err((e, all)) = Multiplexer::<1>::new(Generation::Itanium2, m.into_handles().unwrap(), &[])
    else {
        panic!("Montecito's counters taken for Itanium 2's")
    };
    assert_eq!(e, MultiplexError::Handles { index: 4 });
    let c = Counters::<Cpu>::from_erased(all).unwrap();
    assert!(d.give_back(c).is_ok());
}

/// One event of a cache group runs on the group's counter (an L1D event on
/// PMC5, an L2 event on PMC4); a second of one group is refused.
#[test]
fn a_cache_group_event_runs_on_its_counter() {
    crate::owner!(Cpu);
    let pmu = crate::testing::itanium_pmu();
    let g = Generation::Itanium2;
    let (mut d, c) = take::<Cpu>(&pmu, g);
    let l1d = events::ITANIUM2
        .iter()
        .filter(|e| e.group.is_some_and(|g| g.group == 1) && e.counters.contains(5))
        .map(|e| event(g, e.name))
        .take(2)
        .collect::<Vec<_>>();
    let l2 = event(g, "L2_DATA_REFERENCES_L2_ALL");
    let list = [event(g, "CPU_CYCLES"), l1d[0], l2];
    let mut m = Multiplexer::<3>::new(g, c.erase_all(), &list)
        .map_err(|(e, _)| e)
        .unwrap();
    m.tick(&mut d, 0).unwrap();
    assert_eq!(places(&m), [Some(6), Some(5), Some(4)]);
    m.finish(&mut d, 0).unwrap();
    let all = m.into_handles().unwrap();
    let Err((e, all)) = Multiplexer::<3>::new(g, all, &[l1d[0], l2, l1d[1]]) else {
        panic!("two L1D events taken")
    };
    assert_eq!(
        e,
        MultiplexError::CacheGroup {
            index: 2,
            first: 0,
            group: 1
        }
    );
    assert_eq!(
        e.to_string(),
        "event 2 is the second event of the L1D cache group (event 0 is the first): the \
         group's rules over several counters are not applied, so the multiplexer places one \
         event of each group"
    );
    let c = Counters::<Cpu>::from_erased(all).unwrap();
    assert!(d.give_back(c).is_ok());
}

/// Every refusal hands the handles back unchanged (the driver takes them
/// back whole at the end), with its reason.
#[test]
fn refused_inputs_come_back_with_the_handles() {
    crate::owner!(Cpu);
    let pmu = crate::testing::itanium_pmu();
    let g = Generation::Itanium2;
    let (mut d, c) = take::<Cpu>(&pmu, g);
    let cycles = event(g, "CPU_CYCLES");
    let mut all = c.erase_all();

    // A claimed handle.
    if let Some(h) = all[1].as_mut() {
        h.configure(
            &mut d,
            &CounterConfig::counting(cycles.on(Counter::new(g, 5).unwrap()).unwrap()),
        )
        .unwrap();
    }
    let Err((e, mut back)) = Multiplexer::<2>::new(g, all, &[cycles]) else {
        panic!("a claimed handle taken")
    };
    assert_eq!(e, MultiplexError::Handles { index: 1 });
    assert_eq!(
        e.to_string(),
        "handle 1 is not the driver's counter 5, unclaimed"
    );
    if let Some(h) = back[1].as_mut() {
        h.release(&mut d).unwrap();
    }
    // Handles out of order.
    back.swap(0, 1);
    let Err((e, mut back)) = Multiplexer::<2>::new(g, back, &[cycles]) else {
        panic!("handles out of order taken")
    };
    assert_eq!(e, MultiplexError::Handles { index: 0 });
    back.swap(0, 1);
    let Err((e, back)) = Multiplexer::<1>::new(g, back, &[cycles; 2]) else {
        panic!("too many events")
    };
    assert_eq!(e, MultiplexError::TooMany);
    let mut all = back;

    let unknown = (0..=255u8)
        .find(|&code| events::rule(g, code, 0).is_none())
        .unwrap();
    let c4 = Counter::new(g, 4).unwrap();
    let refused = [
        (
            event(Generation::Montecito, "CPU_OP_CYCLES_ALL"),
            ConfigError::WrongGeneration {
                expected: g,
                found: Generation::Montecito,
            },
        ),
        (cycles.with_plm(Plm::NONE), ConfigError::NoPrivilegeLevel),
        (
            CounterPmc::new(c4, EventCode::new(g, unknown).unwrap())
                .unwrap()
                .with_plm(Plm::ALL),
            ConfigError::Pmc(PmcError::UnknownEvent {
                pmc: 4,
                code: unknown,
            }),
        ),
        (
            cycles
                .with_threshold(Threshold::new(c4, 1).unwrap())
                .unwrap(),
            ConfigError::Pmc(PmcError::ThresholdNotBelowMaxIncrement {
                pmc: 4,
                code: 0x12,
                threshold: 1,
                max_increment: 1,
            }),
        ),
    ];
    for (e, why) in refused {
        let Err((got, back)) = Multiplexer::<2>::new(g, all, &[cycles, e]) else {
            panic!("{e:?} taken")
        };
        assert_eq!(got, MultiplexError::Refused { index: 1, why });
        assert_eq!(
            got.to_string(),
            std::format!("event 1 cannot be counted: {why}")
        );
        all = back;
    }
    // The capture units' events.
    for unit in Unit::ALL {
        let e = CounterPmc::new(c4, EventCode::new(g, unit.event_code(g)).unwrap())
            .unwrap()
            .with_plm(Plm::ALL);
        let Err((got, back)) = Multiplexer::<2>::new(g, all, &[e]) else {
            panic!("{unit:?} taken")
        };
        assert_eq!(got, MultiplexError::NeedsUnit { index: 0, unit });
        all = back;
    }
    let Err((e, back)) = Multiplexer::<1>::new(g, all, &[event(g, "DATA_EAR_EVENTS")]) else {
        panic!("taken")
    };
    assert_eq!(
        e.to_string(),
        "event 0 counts the D-EAR's captures, which need the unit programmed with its \
         counter: configure a counter for it (CounterConfig::itlb, dear or btb), \
         multiplexing does not"
    );
    all = back;
    // No handle for the only counter an event counts on.
    let pmc4 = all[0].take();
    let Err((e, mut back)) =
        Multiplexer::<2>::new(g, all, &[cycles, event(g, "L2_FORCE_RECIRC_ANY")])
    else {
        panic!("taken without PMC4")
    };
    assert_eq!(
        e,
        MultiplexError::NoCounter {
            index: 1,
            counters: CounterSet::single(4)
        }
    );
    assert_eq!(
        e.to_string(),
        "event 1 counts only on counter(s) 4, and no handle of them was given"
    );
    back[0] = pmc4;
    let c = Counters::<Cpu>::from_erased(back).unwrap();
    assert!(d.give_back(c).is_ok(), "every handle came back");
}

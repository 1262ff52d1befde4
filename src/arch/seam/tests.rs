//! The seam alone drives every architecture: one generic function,
//! instantiated for each architecture's model, that multiplexes more
//! events than fit at once through [`Architecture`] and [`Driven`] only.
//! Every count here comes from a model.

use super::{Architecture, Driven};
use crate::counter::Owner;
use crate::multiplex::Multiplexed;

/// Ticks of each run.
const TICKS: u64 = 120;

/// Events `events`, of which two fit at once on the PMU `local` is a share
/// of, multiplexed through the seam: the driver taken ([`Driven::take`]),
/// its tokens erased, the multiplexer made ([`Architecture::multiplex`]),
/// [`TICKS`] ticks in which event `i` occurs `10 (i + 1)` times
/// (`inject`), the run finished, and the handles given back as tokens to
/// the driver. Each event runs exactly half the time, and its count and
/// estimate are exact.
fn multiplex_through_the_seam<'a, O, L, B, F>(
    local: L,
    regs: B,
    detected: &<L::Arch as Architecture>::Detected,
    events: &[<L::Arch as Architecture>::Event; 4],
    inject: F,
) where
    O: Owner,
    L: Driven<'a, B>,
    F: Fn(&mut L::Driver<O>, usize, u64),
{
    let (mut d, c) = local.take::<O>(regs, detected).unwrap();
    let handles = L::Arch::erase_all(c);
    let mut m = L::Arch::multiplex::<4>(detected, handles, events)
        .map_err(|(e, _)| e)
        .unwrap();
    L::tick(&mut d, &mut m, 0).unwrap();
    for _ in 0..TICKS {
        assert_eq!(m.running().count(), 2, "two at once");
        for i in 0..4 {
            inject(&mut d, i, 10 * (i as u64 + 1));
        }
        L::tick(&mut d, &mut m, 1).unwrap();
    }
    L::finish(&mut d, &mut m, 0).unwrap();
    assert_eq!(m.running().count(), 0, "every counter released");
    for (i, r) in m.results().iter().enumerate() {
        let rate = 10 * (i as u64 + 1);
        let expected = Multiplexed {
            enabled: TICKS,
            running: TICKS / 2,
            raw: rate * TICKS / 2,
        };
        assert_eq!(*r, expected, "event {i}");
        assert_eq!(r.estimate(), Some(rate * TICKS), "event {i}");
    }
    let Ok(handles) = m.into_handles() else {
        panic!("an event still runs")
    };
    let Ok(c) = L::Arch::from_erased::<O>(handles) else {
        panic!("not the driver's whole set")
    };
    assert!(
        L::give_back(d, c).is_ok(),
        "the driver takes its tokens back"
    );
}

/// NetBurst (a Prescott with Hyper-Threading, logical processor 0's
/// share): four events that all need FSB_ESCR0 or FSB_ESCR1 (SDM Table
/// 19-28).
#[test]
fn netburst_multiplexes_through_the_seam() {
    use crate::arch::netburst::{EventSpec, LogicalProcessor};
    use crate::model::netburst::{Config, EscrGroup, EventKind, NetBurstModel, Privilege};
    crate::owner!(Cpu);
    let package = crate::testing::netburst_pmu();
    let model = NetBurstModel::new(Config::prescott_ht());
    let cpu = crate::detect::detect(&model, &mut model.clone())
        .unwrap()
        .usable_netburst()
        .unwrap();
    let t0 = LogicalProcessor::T0;
    let spec = |s: &str| s.parse::<EventSpec>().unwrap();
    let events = [
        (spec("global_power_events:RUNNING:k"), t0),
        (spec("FSB_data_activity:DRDY_DRV:k"), t0),
        (spec("b2b_cycles:BIT1:k"), t0),
        (spec("bnr:BIT0:k"), t0),
    ];
    let kinds = [
        EventKind::new(EscrGroup::Fsb, 0x13, 1),
        EventKind::new(EscrGroup::Fsb, 0x17, 1),
        EventKind::new(EscrGroup::Fsb, 0x16, 1 << 1),
        EventKind::new(EscrGroup::Fsb, 0x08, 1),
    ];
    multiplex_through_the_seam::<Cpu, _, _, _>(
        package.logical(t0),
        model,
        &cpu,
        &events,
        |d, i, n| {
            d.msr().inject(kinds[i].on(
                crate::model::netburst::LogicalProcessor::T0,
                Privilege::Os,
                n,
            ));
        },
    );
}

/// Itanium (the first generation): four events that count on PMC4/5 only
/// (the catalog's), the model told so.
#[test]
fn itanium_multiplexes_through_the_seam() {
    use crate::arch::itanium::{Counter, CounterPmc, Generation, Plm, events};
    use crate::model::itanium::{Event, ItaniumModel, Psr};
    crate::owner!(Cpu);
    let pmu = crate::testing::itanium_pmu();
    let g = Generation::Itanium;
    let mut model = ItaniumModel::new(crate::model::itanium::Generation::Itanium);
    model.set_psr(Psr::MONITORING);
    let c4 = Counter::new(g, 4).unwrap();
    let events = [
        "IA64_INST_RETIRED",
        "INST_DISPERSED",
        "NOPS_RETIRED",
        "PREDICATE_SQUASHED_RETIRED",
    ]
    .map(|name| {
        let info = events::find(g, name).unwrap();
        assert_eq!(info.counters.bits(), 0x30, "{name}: PMC4/5 only");
        CounterPmc::for_event(c4, info)
            .unwrap()
            .with_plm(Plm::ALL)
            .with_privileged(true)
    });
    multiplex_through_the_seam::<Cpu, _, _, _>(&pmu, model, &g, &events, |d, i, n| {
        let e = events[i];
        d.regs()
            .inject(Event::new(e.es(), e.umask().get(), n).only_on(0x30));
    });
}

/// The architectural PMU (a Core 2: two general counters): four raw
/// events.
#[test]
fn archperf_multiplexes_through_the_seam() {
    use crate::arch::archperf::EventSpec;
    use crate::model::archperf::{ArchPerfModel, Config, Event};
    crate::owner!(Cpu);
    let pmu = crate::testing::archperf_pmu();
    let model = ArchPerfModel::new(Config::core2());
    let cpu = crate::detect::detect(&model, &mut model.clone())
        .unwrap()
        .arch_perf()
        .unwrap();
    let selects = [0x10u8, 0x11, 0x12, 0x13];
    let events = selects.map(|s| EventSpec::raw(s, 0));
    multiplex_through_the_seam::<Cpu, _, _, _>(&pmu, model, &cpu, &events, |d, i, n| {
        d.msr().inject(Event::new(selects[i], 0, n));
    });
}

/// AMD's core PMU (a K8: four legacy counters, of which the firmware
/// left two enabled, so two are the driver's): four raw events.
#[test]
fn amd_multiplexes_through_the_seam() {
    use crate::access::MsrAccess;
    use crate::arch::amd::{EventSpec, PERF_LEGACY_CTL0};
    use crate::model::amd::{AmdModel, Config, Event};
    crate::owner!(Cpu);
    let pmu = crate::testing::amd_pmu();
    let mut model = AmdModel::new(Config::k8());
    // The firmware's: event 0x76 with OS, USR and EN on counters 2 and 3.
    for n in [2, 3] {
        model
            .write_msr(PERF_LEGACY_CTL0 + n, 0x76 | 1 << 16 | 1 << 17 | 1 << 22)
            .unwrap();
    }
    let cpu = crate::detect::detect(&model, &mut model.clone())
        .unwrap()
        .usable_amd()
        .unwrap();
    let selects = [0x40u16, 0x41, 0x42, 0x43];
    let events = selects.map(|s| EventSpec::raw(s, 0));
    multiplex_through_the_seam::<Cpu, _, _, _>(&pmu, model, &cpu, &events, |d, i, n| {
        d.msr().inject(Event::new(selects[i], 0, n));
    });
}

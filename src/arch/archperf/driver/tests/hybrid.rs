//! One driver per core type of a hybrid part, each on its own logical
//! processor's model (the presets answer CPUID as the recorded parts do:
//! `crate::model::archperf::tests::cpuid`): each takes exactly its
//! CPU's counters, and refuses what its core type lacks with the reason.
//! All counts come from the models.

use super::*;
use crate::arch::archperf::enumeration::Missing;
use crate::detect::{CoreType, Enumeration};

/// Meteor Lake: the Redwood Cove core counts topdown slots on fixed
/// counter 3 and on a general counter; the Crestmont core has no fixed
/// counter 3 (no token) and refuses the event, naming its core type and
/// the CPUID bit, before any register access.
#[test]
fn each_core_type_takes_its_own_counters_and_refuses_what_it_lacks() {
    crate::owner!(PCore);
    crate::owner!(ECore);
    let (p_pmu, e_pmu) = (
        crate::testing::archperf_pmu(),
        crate::testing::archperf_pmu(),
    );
    let (mut p, pc) = take::<PCore>(&p_pmu, Config::meteor_lake_p_core());
    let (mut e, ec) = take::<ECore>(&e_pmu, Config::meteor_lake_e_core());
    assert_eq!(pc.present(), ec.present().with(Counter::fixed(3).unwrap()));
    assert!(pc.f3.is_some() && ec.f3.is_none() && ec.g7.is_some());

    let slots = CounterConfig::counting(spec("slots"));
    let td = CounterConfig::counting(spec("topdown-slots"));
    let Some(f3) = pc.f3 else { unreachable!() };
    let f3 = f3
        .configure(&mut p, &slots)
        .unwrap()
        .enable(&mut p)
        .unwrap();
    let g0 = pc
        .g0
        .configure(&mut p, &td)
        .unwrap()
        .enable(&mut p)
        .unwrap();
    inject(&mut p, (0xA4, 0x01), 600);
    assert_eq!(
        (f3.read(&mut p).unwrap(), g0.read(&mut p).unwrap()),
        (600, 600)
    );

    let refused = ec.g0.configure(&mut e, &td).unwrap_err();
    let Error::Config(ConfigError::NotOnThisCpu(lack)) = refused.error else {
        panic!("{:?}", refused.error)
    };
    assert_eq!(
        (lack.missing, lack.core_type, lack.leaf),
        (
            Missing::Event(ArchEvent::TopdownSlots),
            Some(CoreType::Atom),
            Enumeration::Leaf23
        )
    );
    let message = refused.error.to_string();
    assert!(
        message.contains("an Atom (efficiency) core, CPUID.1AH core type 20H"),
        "{message}"
    );
    assert!(message.contains("bit 7 of CPUID.23H.03H:EAX"), "{message}");
    assert_eq!(
        e.msr().take_counts(),
        counts(0, 0, 0),
        "refused before any access"
    );
    let Err(ConfigError::NotOnThisCpu(no_f3)) = e.check(&spec("slots")) else {
        panic!("slots on the Crestmont core")
    };
    assert_eq!(no_f3.missing, Missing::Counter(Counter::fixed(3).unwrap()));
    assert_eq!(
        (p.check(&spec("slots")), p.check(&spec("topdown-slots"))),
        (Ok(()), Ok(()))
    );
    // What the E-core has, it counts.
    let ec_g0 = refused
        .counter
        .configure(&mut e, &CounterConfig::counting(spec("instructions")));
    let ec_g0 = ec_g0.unwrap().enable(&mut e).unwrap();
    inject(&mut e, INSTRUCTIONS, 77);
    assert_eq!(ec_g0.read(&mut e).unwrap(), 77);

    let g0 = g0.halt(&mut p).unwrap().release(&mut p).unwrap();
    let f3 = f3.halt(&mut p).unwrap().release(&mut p).unwrap();
    let _ = p.give_back(Counters {
        g0,
        f3: Some(f3),
        ..pc
    });
    let g0 = ec_g0.halt(&mut e).unwrap().release(&mut e).unwrap();
    let _ = e.give_back(Counters { g0, ..ec });
}

/// An Alder Lake Golden Cove core beside its E-cores enumerates the common
/// view in leaf 0AH: its driver takes six general and three fixed
/// counters, and never touches the general counters 6-7 and fixed counter
/// 3 the core has (Linux adds them by model number; the crate drives what
/// CPUID enumerates).
#[test]
fn alder_lake_drives_the_enumerated_common_counters() {
    let pmu = crate::testing::archperf_pmu();
    let m = ArchPerfModel::new(Config::alder_lake_p_core_hybrid());
    let info = cpu(&m);
    crate::owner!(Adl);
    let (mut d, c) =
        ArchPerfDriver::<Adl, _>::take(Recording::<_, 64>::new(m), &info, &pmu).unwrap();
    assert_eq!(c.present().len(), 6 + 3);
    assert!(c.g5.is_some() && c.g6.is_none() && c.g7.is_none() && c.f3.is_none());
    let log = d.msr().log().to_vec();
    let touched = |msr: u32| {
        log.iter().any(|a| {
            matches!(a, Access::ReadMsr { msr: m, .. } | Access::WriteMsr { msr: m, .. } if *m == msr)
        })
    };
    assert!(
        touched(IA32_PERFEVTSEL0 + 5)
            && !touched(IA32_PERFEVTSEL0 + 6)
            && !touched(IA32_PERFEVTSEL0 + 7)
    );
    let Err(ConfigError::NotOnThisCpu(lack)) = d.check(&spec("slots")) else {
        panic!("slots without an enumerated fixed counter 3")
    };
    assert!(
        lack.to_string()
            .ends_with("enumerates there what every core type has"),
        "{lack}"
    );
    let _ = d.give_back(c);
}

/// Lunar Lake's Skymont core: fixed counters 0-2 and 4-6. The driver
/// takes 0-2 (3 is the hole; the crate drives fixed counters 0-3 only),
/// and its `GLOBAL_CTRL` and status writes name only those.
#[test]
fn a_fixed_counter_bitmap_with_a_hole() {
    let pmu = crate::testing::archperf_pmu();
    let (mut d, c) = driver!(&pmu, Config::lunar_lake_e_core());
    assert!(c.f0.is_some() && c.f2.is_some() && c.f3.is_none());
    assert_eq!(d.cpu().fixed_bitmap(), 0x77);
    let f2 = c.f2.unwrap();
    let f2 = f2
        .configure(&mut d, &CounterConfig::counting(spec("ref-cycles")))
        .unwrap();
    let f2 = f2.enable(&mut d).unwrap();
    inject(&mut d, (0x3C, 0x01), 40);
    assert_eq!(f2.read(&mut d).unwrap(), 40);
    let global = model(&mut d).read_msr(IA32_PERF_GLOBAL_CTRL).unwrap();
    assert_eq!(
        global >> 32,
        1 << 2,
        "fixed counter 2 alone of the fixed counters"
    );
    let f2 = f2.halt(&mut d).unwrap().release(&mut d).unwrap();
    let _ = d.give_back(Counters { f2: Some(f2), ..c });
}

/// A CPU whose leaf 23H bitmap lacks general counter 0 or 1 is refused at
/// take: the driver's tokens `g0` and `g1` always exist.
#[test]
fn a_bitmap_without_general_counter_0_or_1_is_refused() {
    let pmu = crate::testing::archperf_pmu();
    let m = ArchPerfModel::new(Config::meteor_lake_e_core());
    let mut info = cpu(&m);
    info.ext = info.ext.map(|x| crate::detect::Leaf23 {
        counters: [0xFE, 0x7],
        ..x
    });
    crate::owner!(Holey);
    let Err(e) = ArchPerfDriver::<Holey, _>::take(Recording::<_, 8>::new(m), &info, &pmu) else {
        panic!("taken without general counter 0")
    };
    assert_eq!(e, InitError::TooFewCounters(7));
    assert!(!pmu.is_taken());
}

/// The multiplexer places events on this CPU's general counters only:
/// eight events on the Alder Lake Golden Cove core beside its E-cores
/// rotate over the six counters its CPUID enumerates, never onto the
/// model's `IA32_PMC6`-`7`; and it refuses, up front, an event the core
/// type lacks.
#[test]
fn the_multiplexer_places_on_this_cpus_counters_only() {
    use crate::arch::archperf::multiplex::{MultiplexError, Multiplexer};
    let pmu = crate::testing::archperf_pmu();
    let (mut d, c) = driver!(&pmu, Config::alder_lake_p_core_hybrid());
    let events: [EventSpec; 8] = core::array::from_fn(|i| EventSpec::raw(0x10 + i as u8, 0));
    let mut m = Multiplexer::<8>::new(d.cpu(), c.erase_all(), &events)
        .map_err(|(e, _)| e)
        .unwrap();
    for _ in 0..16 {
        for e in &events {
            inject(&mut d, (e.select, 0), 10);
        }
        m.tick(&mut d, 1).unwrap();
    }
    m.finish(&mut d, 0).unwrap();
    assert!(!d.msr().log_overflowed(), "every access logged");
    let log = d.msr().log().to_vec();
    let selects = |n: u32| {
        log.iter()
            .filter(|a| matches!(a, Access::WriteMsr { msr, .. } if *msr == IA32_PERFEVTSEL0 + n))
            .count()
    };
    assert!((0..6).all(|n| selects(n) > 0) && selects(6) == 0 && selects(7) == 0);
    assert!(
        m.results()
            .iter()
            .all(|r| r.running * 8 <= r.enabled * 6 + 8),
        "{:?}",
        m.results()
    );
    let handles = m.into_handles().unwrap();
    let td = [spec("topdown-slots")];
    let Err((MultiplexError::NotOnThisCpu { index: 0, lack }, handles)) =
        Multiplexer::<1>::new(d.cpu(), handles, &td)
    else {
        panic!("topdown-slots taken where leaf 0AH does not enumerate it")
    };
    assert_eq!(lack.core_type, Some(CoreType::Core));
    let _ = d.give_back(Counters::from_erased(handles).unwrap());
}

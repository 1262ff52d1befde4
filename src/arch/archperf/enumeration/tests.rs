//! Each core type of a hybrid part, from CPUID leaves recorded on real
//! parts (`crate::testing::recorded`: InstLatx64's dumps of an i9-12900K,
//! a Core Ultra 7 155H and a Core Ultra 9 288V, named there): what
//! detection finds on each logical processor, the counters its driver
//! takes, the events it refuses and the messages that say why.

use std::string::ToString;

use super::*;
use crate::detect::{ArchPerfCpu, detect};
use crate::testing::recorded::{ADL_E, ADL_P, ADL_P_ALONE, LNL_E, LNL_P, MTL_E, MTL_P, Recorded};

fn cpu(r: Recorded) -> ArchPerfCpu {
    detect(&r, &mut r.clone())
        .unwrap()
        .arch_perf()
        .unwrap_or_else(|| panic!("{}: no architectural PMU", r.name))
}

/// General counters `g` and fixed counters `f` (numbers), as a set.
fn set(g: &[u8], f: &[u8]) -> CounterSet {
    let g = g.iter().filter_map(|&n| Counter::general(n));
    let f = f.iter().filter_map(|&i| Counter::fixed(i));
    g.chain(f).fold(CounterSet::EMPTY, CounterSet::with)
}

fn spec(s: &str) -> EventSpec {
    s.parse().unwrap()
}

/// Alder Lake has no leaf 23H: both core types enumerate the common view
/// in leaf 0AH (six general, three fixed counters, events 0-6), so both
/// drive the same counters; only the core type differs. With the E-cores
/// disabled the Golden Cove core enumerates its own eight and four.
#[test]
fn alder_lake_enumerates_the_common_view_on_both_core_types() {
    let (p, e) = (cpu(ADL_P), cpu(ADL_E));
    for (c, t) in [(p, CoreType::Core), (e, CoreType::Atom)] {
        assert_eq!((c.version(), c.hybrid, c.core_type), (5, true, Some(t)));
        assert_eq!(c.ext, None, "no leaf 23H: CPUID.(07H,01H):EAX[8] is clear");
        assert_eq!((c.general_bitmap(), c.fixed_bitmap()), (0x3F, 0x7));
        assert_eq!(c.counters_from(), Enumeration::Leaf0A);
        assert_eq!(counters(&c), set(&[0, 1, 2, 3, 4, 5], &[0, 1, 2]));
        assert!((0..7).all(|k| c.event_available(k)) && !c.event_available(7));
    }
    let Err(lack) = check_event(&p, &spec("slots")) else {
        panic!("slots on the common view")
    };
    assert_eq!(
        lack.to_string(),
        "fixed counter 3 (IA32_FIXED_CTR3) is not on this CPU, a Core (performance) core, CPUID.1AH core type 40H: CPUID leaf 0AH enumerates its fixed counters as 0x7 (ECX[i] or EDX[4:0] > i); a hybrid part without CPUID leaf 23H enumerates there what every core type has"
    );
    let alone = cpu(ADL_P_ALONE);
    assert_eq!(
        (alone.hybrid, alone.core_type),
        (true, Some(CoreType::Core))
    );
    assert_eq!(
        counters(&alone),
        set(&[0, 1, 2, 3, 4, 5, 6, 7], &[0, 1, 2, 3])
    );
    assert!(alone.event_available(7));
    assert_eq!(check_event(&alone, &spec("slots")), Ok(()));
}

/// Meteor Lake: leaf 0AH is the common view, leaf 23H each core's own.
/// The Crestmont core lacks fixed counter 3 and topdown slots, which the
/// Redwood Cove core has.
#[test]
fn meteor_lake_cores_enumerate_their_own_counters_in_leaf_23h() {
    let (p, e) = (cpu(MTL_P), cpu(MTL_E));
    for c in [p, e] {
        assert_eq!(c.version(), 5, "version 5, and leaf 23H");
        assert_eq!(c.leaf.fixed_bitmap(), 0x7, "leaf 0AH: the common view");
        assert_eq!(
            (c.counters_from(), c.events_from()),
            (Enumeration::Leaf23, Enumeration::Leaf23)
        );
    }
    assert_eq!(p.ext.and_then(|x| x.general()), Some(0xFF));
    assert_eq!((p.events_bitmap(), e.events_bitmap()), (0xDFF, 0x7F));
    assert_eq!(p.leaf.available_events(), 0x7F, "leaf 0AH's vector of 7");
    assert_eq!(counters(&p), set(&[0, 1, 2, 3, 4, 5, 6, 7], &[0, 1, 2, 3]));
    assert_eq!(counters(&e), set(&[0, 1, 2, 3, 4, 5, 6, 7], &[0, 1, 2]));
    assert!(p.event_available(7) && !e.event_available(7));
    for ok in [
        "slots",
        "topdown-slots",
        "instructions",
        "ref-cycles",
        "branch-misses",
    ] {
        assert_eq!(check_event(&p, &spec(ok)), Ok(()), "{ok} on the P-core");
    }
    let Err(slots) = check_event(&e, &spec("slots")) else {
        panic!("slots on the E-core")
    };
    assert_eq!(slots.missing, Missing::Counter(Counter::fixed(3).unwrap()));
    assert_eq!(
        slots.to_string(),
        "fixed counter 3 (IA32_FIXED_CTR3) is not on this CPU, an Atom (efficiency) core, CPUID.1AH core type 20H: bit 3 of CPUID.23H.01H:EBX, its fixed counters' bitmap, is clear (the bitmap is 0x7)"
    );
    let Err(td) = check_event(&e, &spec("topdown-slots")) else {
        panic!("topdown-slots on the E-core")
    };
    assert_eq!(
        td.to_string(),
        "the architectural event topdown-slots (A4H/01H, CPUID event bit 7) is not on this CPU, an Atom (efficiency) core, CPUID.1AH core type 20H: bit 7 of CPUID.23H.03H:EAX, its events' bitmap, is clear (the bitmap is 0x7f)"
    );
    assert_eq!(check_event(&e, &spec("instructions:u")), Ok(()));
}

/// Lunar Lake (architectural performance monitoring version 6): the Lion
/// Cove core's ten general counters (the crate drives 0-7), the Skymont
/// core's fixed counters 0-2 and 4-6 (the crate drives 0-2: fixed
/// counter 3 is the hole).
#[test]
fn lunar_lake_bitmaps_with_more_counters_and_a_hole() {
    let (p, e) = (cpu(LNL_P), cpu(LNL_E));
    assert_eq!((p.version(), e.version()), (6, 6));
    assert_eq!((p.general_bitmap(), p.general()), (0x3FF, 10));
    assert_eq!(counters(&p), set(&[0, 1, 2, 3, 4, 5, 6, 7], &[0, 1, 2, 3]));
    assert_eq!(e.fixed_bitmap(), 0x77);
    assert!((0..3).chain(4..7).all(|i| e.fixed_supported(i)) && !e.fixed_supported(3));
    assert_eq!(counters(&e), set(&[0, 1, 2, 3, 4, 5, 6, 7], &[0, 1, 2]));
    // Leaf 0AH's vector (13 events, 7 and 9 unavailable) is the common
    // view; leaf 23H's sub-leaf 3 each core's.
    assert_eq!(p.leaf.available_events(), 0x1D7F);
    assert_eq!((p.events_bitmap(), e.events_bitmap()), (0x1DFF, 0x1F7F));
    assert!(!p.leaf.event_available(7) && p.event_available(7));
    assert!(!e.event_available(7));
    assert_eq!(check_event(&p, &spec("slots")), Ok(()));
    let Err(lack) = check_event(&e, &spec("slots")) else {
        panic!("slots on Skymont")
    };
    assert!(lack.to_string().ends_with("(the bitmap is 0x77)"), "{lack}");
    assert_eq!(check_event(&e, &spec("ref-cycles")), Ok(()));
}

/// A VMM may enumerate leaf 23H's sub-leaf 0 without sub-leaf 1 or 3
/// (Linux's fix "perf/x86/intel: Fix ARCH_PERFMON_NUM_COUNTER_LEAF" names
/// the case): leaf 0AH then says.
#[test]
fn leaf_23h_without_its_sub_leaves_falls_back_to_leaf_0ah() {
    let mut c = cpu(MTL_E);
    c.ext = c.ext.map(|x| crate::detect::Leaf23 {
        subleaves: crate::detect::Leaf23Subleaves::from_bits(1),
        ..x
    });
    assert_eq!(
        (c.counters_from(), c.events_from()),
        (Enumeration::Leaf0A, Enumeration::Leaf0A)
    );
    assert_eq!((c.general_bitmap(), c.fixed_bitmap()), (0xFF, 0x7));
    assert!(c.event_available(6) && !c.event_available(7));
}

/// Detection's line names the core type and where the counters come from.
#[test]
fn detection_says_which_leaf_enumerates_the_counters() {
    let text = detect(&MTL_E, &mut MTL_E.clone()).unwrap().to_string();
    assert!(
        text.contains(
            "model 0xaa stepping 0x4 (CPUID.01H:EAX 0x000a06a4): architectural PMU version 5, 8 general counters (48 bits), fixed counters 3, hybrid: an Atom core (its own counters and events: CPUID leaf 23H),"
        ),
        "{text}"
    );
    let text = detect(&ADL_P, &mut ADL_P.clone()).unwrap().to_string();
    assert!(
        text.contains("6 general counters (48 bits), fixed counters 3, hybrid: a Core core,"),
        "{text}"
    );
}

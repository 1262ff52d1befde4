//! Counting: EN, IA32_PERF_GLOBAL_CTRL, USR/OS, CMASK/INV/EDGE, the fixed
//! counters, and bulk injection against clock-by-clock.

use super::helpers::*;

#[test]
fn event_helpers() {
    let e = Event::new(0xC0, 0x00, 5);
    assert_eq!(e.privilege, OS);
    assert_eq!(e.at(USR).privilege, USR);
    assert_eq!(e.times(9).count, 9);
    assert_eq!(Event::arch(ArchEvent::InstructionsRetired, 5), e);
    assert!(e.is(ArchEvent::InstructionsRetired));
    assert!(!e.is(ArchEvent::CoreCycles));
    // Table 20-1.
    let table: [(u8, u8); 8] = ArchEvent::ALL.map(|a| (a.select_code(), a.umask_code()));
    assert_eq!(
        table,
        [
            (0x3C, 0x00),
            (0xC0, 0x00),
            (0x3C, 0x01),
            (0x2E, 0x4F),
            (0x2E, 0x41),
            (0xC4, 0x00),
            (0xC5, 0x00),
            (0xA4, 0x01),
        ]
    );
    assert_eq!(
        ArchEvent::ALL.map(Encoding::cpuid_bit),
        [0, 1, 2, 3, 4, 5, 6, 7]
    );
    assert_eq!(
        FIXED_EVENTS,
        [
            ArchEvent::InstructionsRetired,
            ArchEvent::CoreCycles,
            ArchEvent::ReferenceCycles,
            ArchEvent::TopdownSlots
        ]
    );
}

#[test]
fn gp_counter_counts_with_en_and_its_global_ctrl_bit() {
    let mut m = sky();
    m.write_msr(EVTSEL0, counting(INSTR, 0)).unwrap();
    assert_eq!(
        m.inject(ev(INSTR, 100)),
        Injected {
            injected: 100,
            pmi_pending: false
        }
    );
    assert_eq!(m.rdpmc(0).unwrap(), 100);
    // GLOBAL_CTRL bit 0 clear: stopped (SDM 20.2.2: the enables are ANDed).
    m.write_msr(GLOBAL_CTRL, 0xE).unwrap();
    m.inject(ev(INSTR, 50));
    assert_eq!(m.rdpmc(0).unwrap(), 100);
    m.write_msr(GLOBAL_CTRL, 0xF).unwrap();
    m.inject(ev(INSTR, 1));
    assert_eq!(m.rdpmc(0).unwrap(), 101);
    // EN clear: stopped.
    m.write_msr(EVTSEL0, counting(INSTR, 0) & !EN).unwrap();
    m.inject(ev(INSTR, 50));
    assert_eq!(m.rdpmc(0).unwrap(), 101);
    // Other events, or the same select with another unit mask: not counted.
    m.write_msr(EVTSEL0, counting(INSTR, 0)).unwrap();
    m.inject(ev(CYCLES, 10));
    m.inject(Event::new(0xC0, 0x01, 10));
    m.inject(Event::new(0xC1, 0x00, 10));
    assert_eq!(m.rdpmc(0).unwrap(), 101);
}

#[test]
fn counters_are_enabled_independently() {
    let mut m = sky();
    for i in 0..4 {
        m.write_msr(EVTSEL0 + i, counting(INSTR, 0)).unwrap();
    }
    m.write_msr(GLOBAL_CTRL, 0b1010).unwrap();
    m.inject(ev(INSTR, 7));
    assert_eq!([0, 1, 2, 3].map(|i| m.counter(i)), [0, 7, 0, 7]);
    assert!(!m.gp_counting(0) && m.gp_counting(1));
}

#[test]
fn version_1_counts_with_en_alone() {
    let mut m = ArchPerfModel::new(Config::v1());
    m.write_msr(EVTSEL0 + 1, counting(CYCLES, 0)).unwrap();
    m.inject(ev(CYCLES, 12));
    assert_eq!(m.rdpmc(1).unwrap(), 12);
    assert_eq!(m.rdpmc(0).unwrap(), 0);
    m.write_msr(EVTSEL0 + 1, 0).unwrap();
    m.inject(ev(CYCLES, 12));
    assert_eq!(m.rdpmc(1).unwrap(), 12);
}

#[test]
fn usr_and_os_filters() {
    for (bits, os, usr) in [
        (OS_BIT, 10, 0),
        (USR_BIT, 0, 20),
        (OS_BIT | USR_BIT, 10, 20),
        (0, 0, 0),
    ] {
        let mut m = sky();
        m.write_msr(EVTSEL0, sel(0xC0, 0, EN | bits)).unwrap();
        m.inject(ev(INSTR, 10));
        assert_eq!(m.counter(0), os, "{bits:#X} at CPL 0");
        m.inject(ev(INSTR, 20).at(USR));
        assert_eq!(m.counter(0), os + usr, "{bits:#X} at CPL 3");
    }
}

#[test]
fn cmask_compares_per_clock() {
    // 3 occurrences in one clock.
    for (bits, three, one, zero) in [
        (cmask(0), 3, 1, 0),
        (cmask(1), 1, 1, 0),
        (cmask(2), 1, 0, 0),
        (cmask(4), 0, 0, 0),
        (cmask(2) | INV, 0, 1, 1),
        (cmask(1) | INV, 0, 0, 1),
        // INV is ignored with CMASK = 0.
        (INV, 3, 1, 0),
    ] {
        let mut m = sky();
        m.write_msr(EVTSEL0, counting(INSTR, bits)).unwrap();
        m.cycle(&[ev(INSTR, 3)]);
        assert_eq!(m.counter(0), three, "{bits:#X}, 3 in a clock");
        m.cycle(&[ev(INSTR, 1)]);
        assert_eq!(m.counter(0), three + one, "{bits:#X}, 1 in a clock");
        m.cycle(&[]);
        assert_eq!(m.counter(0), three + one + zero, "{bits:#X}, none");
    }
}

#[test]
fn occurrences_of_one_clock_add_up() {
    let mut m = sky();
    m.write_msr(EVTSEL0, counting(INSTR, cmask(4))).unwrap();
    // 2 + 2 occurrences of the counted event in one clock reach CMASK 4; the
    // other event does not count.
    m.cycle(&[ev(INSTR, 2), ev(CYCLES, 9), ev(INSTR, 2)]);
    assert_eq!(m.counter(0), 1);
    m.cycle(&[ev(INSTR, 2), ev(CYCLES, 9)]);
    assert_eq!(m.counter(0), 1);
}

#[test]
fn edge_counts_false_to_true_transitions() {
    let run = |bits: u64, inputs: &[u64]| {
        let mut m = sky();
        m.write_msr(EVTSEL0, counting(INSTR, EDGE | bits)).unwrap();
        for &n in inputs {
            m.cycle(&[ev(INSTR, n)]);
        }
        m.counter(0)
    };
    // CMASK 1: transitions before clocks 1, 4 and 8.
    assert_eq!(run(cmask(1), &[1, 1, 0, 2, 2, 0, 0, 1]), 3);
    // CMASK 0: the condition is "some occurrence".
    assert_eq!(run(0, &[1, 1, 0, 2, 2, 0, 0, 1]), 3);
    // CMASK 2: 1 does not reach it.
    assert_eq!(run(cmask(2), &[1, 2, 3, 1, 2, 1, 1]), 2);
    // INV, CMASK 1: the condition is "no occurrence".
    assert_eq!(run(cmask(1) | INV, &[1, 0, 0, 1, 0]), 2);
    // Bulk: a run of clocks with the event is one transition.
    let mut m = sky();
    m.write_msr(EVTSEL0, counting(INSTR, EDGE | cmask(1)))
        .unwrap();
    m.inject(ev(INSTR, 1000));
    assert_eq!(m.counter(0), 1);
    m.inject(ev(INSTR, 1000));
    assert_eq!(m.counter(0), 1);
    m.idle(1);
    m.inject(ev(INSTR, 1000));
    assert_eq!(m.counter(0), 2);
    // Re-enabling (EN 0 -> 1) forgets the previous condition.
    m.write_msr(EVTSEL0, counting(INSTR, EDGE | cmask(1)) & !EN)
        .unwrap();
    m.write_msr(EVTSEL0, counting(INSTR, EDGE | cmask(1)))
        .unwrap();
    m.inject(ev(INSTR, 5));
    assert_eq!(m.counter(0), 3);
}

#[test]
fn inverted_cmask_counts_idle_clocks_at_admitted_privilege() {
    let mut m = sky();
    m.write_msr(EVTSEL0, sel(0xC0, 0, EN | OS_BIT | INV | cmask(1)))
        .unwrap();
    m.idle(5);
    assert_eq!(m.counter(0), 5);
    // Clocks of other events are clocks without this one.
    m.inject(ev(CYCLES, 4));
    assert_eq!(m.counter(0), 9);
    m.inject(ev(INSTR, 4));
    assert_eq!(m.counter(0), 9);
    // At CPL 3 the OS-only counter sees no clock.
    m.inject(ev(CYCLES, 4).at(USR));
    assert_eq!(m.privilege(), USR);
    m.idle(5);
    assert_eq!(m.counter(0), 9);
    m.set_privilege(OS);
    m.idle(2);
    assert_eq!(m.counter(0), 11);
}

#[test]
fn one_clock_runs_at_its_first_events_privilege() {
    let mut m = sky();
    m.write_msr(EVTSEL0, sel(0xC0, 0, EN | OS_BIT)).unwrap();
    m.write_msr(EVTSEL0 + 1, sel(0xC0, 0, EN | USR_BIT))
        .unwrap();
    m.cycle(&[ev(INSTR, 2), ev(INSTR, 3).at(USR)]);
    assert_eq!((m.counter(0), m.counter(1)), (2, 3));
    assert_eq!(m.privilege(), OS);
}

#[test]
fn fixed_counters_follow_fixed_ctr_ctrl_and_global_ctrl() {
    let mut m = sky();
    // Field 0 = 01b (OS), field 1 = 10b (USR), field 2 = 11b (all).
    m.write_msr(FIXED_CTRL, 0x321).unwrap();
    // Reset GLOBAL_CTRL has the fixed enables clear: nothing counts yet.
    m.inject(ev(INSTR, 3));
    assert_eq!(m.fixed(0), 0);
    m.write_msr(GLOBAL_CTRL, 0x7_0000_000F).unwrap();
    m.inject(ev(INSTR, 10));
    m.inject(ev(INSTR, 5).at(USR));
    m.inject(ev(CYCLES, 7));
    m.inject(ev(CYCLES, 3).at(USR));
    m.inject(ev(REF, 4));
    m.inject(ev(REF, 6).at(USR));
    assert_eq!([0, 1, 2].map(|i| m.fixed(i)), [10, 3, 10]);
    assert_eq!(m.read_msr(FIXED0 + 2).unwrap(), 10);
    assert_eq!(m.rdpmc((1 << 30) | 1).unwrap(), 3);
    // GLOBAL_CTRL bit 33 clear stops fixed counter 1; a zero field stops 2.
    m.write_msr(GLOBAL_CTRL, 0x5_0000_000F).unwrap();
    m.write_msr(FIXED_CTRL, 0x021).unwrap();
    m.inject(ev(CYCLES, 10).at(USR));
    m.inject(ev(REF, 10));
    m.inject(ev(INSTR, 1));
    assert_eq!([0, 1, 2].map(|i| m.fixed(i)), [11, 3, 10]);
    // A PMI-only field counts nothing.
    m.write_msr(FIXED_CTRL, 0x8).unwrap();
    m.inject(ev(INSTR, 1));
    assert_eq!(m.fixed(0), 11);
}

#[test]
fn fixed_and_general_counters_count_the_same_event() {
    let mut m = sky();
    m.write_msr(FIXED_CTRL, 0x3).unwrap();
    m.write_msr(GLOBAL_CTRL, 0x1_0000_0001).unwrap();
    m.write_msr(EVTSEL0, counting(INSTR, 0)).unwrap();
    m.inject(ev(INSTR, 42));
    assert_eq!((m.counter(0), m.fixed(0)), (42, 42));
    // Reference cycles: 3CH/01H for both (choice 15).
    m.write_msr(FIXED_CTRL, 0x300).unwrap();
    m.write_msr(GLOBAL_CTRL, 0x4_0000_0001).unwrap();
    m.write_msr(EVTSEL0, counting(REF, 0)).unwrap();
    m.inject(ev(REF, 8));
    assert_eq!((m.counter(0), m.fixed(2)), (50, 8));
}

#[test]
fn fixed_counter_3_counts_topdown_slots() {
    let mut m = ArchPerfModel::new(Config::alder_lake_p_core());
    m.write_msr(FIXED_CTRL, 0x3000).unwrap();
    m.write_msr(GLOBAL_CTRL, 0x8_0000_00FF).unwrap();
    // Several slots per clock.
    m.cycle(&[ev(SLOTS, 6)]);
    m.cycle(&[ev(SLOTS, 6)]);
    m.inject(ev(SLOTS, 5));
    assert_eq!(m.fixed(3), 17);
    assert_eq!(m.rdpmc((1 << 30) | 3).unwrap(), 17);
    // A GP counter counts Topdown Slots (A4H/01H) too.
    m.write_msr(EVTSEL0 + 7, counting(SLOTS, 0)).unwrap();
    m.cycle(&[ev(SLOTS, 6)]);
    assert_eq!((m.counter(7), m.fixed(3)), (6, 23));
}

#[test]
fn a_fixed_counter_without_an_event_counts_nothing() {
    let config = Config {
        fixed_counters: 5,
        ..Config::alder_lake_p_core()
    };
    let mut m = ArchPerfModel::new(config);
    m.write_msr(FIXED_CTRL, 0x3_3333).unwrap();
    m.write_msr(GLOBAL_CTRL, 0x1F_0000_0000).unwrap();
    for e in [INSTR, CYCLES, REF, SLOTS, LLC_MISS] {
        m.inject(ev(e, 1));
    }
    assert_eq!([0, 1, 2, 3, 4].map(|i| m.fixed(i)), [1, 1, 1, 1, 0]);
}

#[test]
fn an_unavailable_architectural_event_still_counts() {
    let config = Config {
        unavailable: 1 << 4,
        ..Config::skylake()
    };
    let mut m = ArchPerfModel::new(config);
    assert_eq!(m.cpuid(0xA, 0).ebx, 1 << 4);
    m.write_msr(EVTSEL0, counting(LLC_MISS, 0)).unwrap();
    m.inject(ev(LLC_MISS, 10));
    assert_eq!(m.counter(0), 10);
}

#[test]
fn ctr_frz_stops_every_counter() {
    let mut m = sky();
    m.write_msr(EVTSEL0, counting(INSTR, 0)).unwrap();
    m.write_msr(FIXED_CTRL, 0x3).unwrap();
    m.write_msr(GLOBAL_CTRL, 0x1_0000_0001).unwrap();
    // Set through STATUS_SET (choice 8): frozen, no PMI.
    m.write_msr(STATUS_SET, 1 << 59).unwrap();
    assert!(m.frozen());
    m.inject(ev(INSTR, 10));
    assert_eq!((m.counter(0), m.fixed(0)), (0, 0));
    assert!(!m.pmi_pending());
    // Cleared through STATUS_RESET: counting resumes.
    m.write_msr(OVF_CTRL, 1 << 59).unwrap();
    m.inject(ev(INSTR, 10));
    assert_eq!((m.counter(0), m.fixed(0)), (10, 10));
}

/// A random valid programming of `m`'s configuration, near overflow.
fn random_setup(rng: &mut Rng, config: Config) -> ArchPerfModel {
    let events = [INSTR, CYCLES, REF, SLOTS];
    let mut m = ArchPerfModel::new(config);
    let gp_width = u32::from(config.gp_width);
    let fixed_width = u32::from(config.fixed_width);
    for i in 0..config.gp_count() as u32 {
        let e = events[rng.below(4) as usize];
        let mut bits = EN;
        for (bit, one_in) in [(OS_BIT, 2), (USR_BIT, 2), (EDGE, 4), (INV, 4), (INT, 2)] {
            if rng.chance(one_in) {
                bits |= bit;
            }
        }
        if rng.chance(8) {
            bits &= !EN;
        }
        bits |= cmask(rng.below(3));
        m.write_msr(EVTSEL0 + i, sel(e.0, e.1, bits)).unwrap();
        let value = (1u64 << gp_width) - 1 - rng.below(6);
        if config.full_width_writes {
            m.write_msr(A_PMC0 + i, value).unwrap();
        } else {
            m.write_msr(PMC0 + i, value).unwrap();
        }
    }
    if config.version >= 2 {
        let mut ctrl = 0;
        for i in 0..4 {
            if config.has_fixed(i) {
                // OS, USR, PMI at random (no AnyThread: not on every version).
                ctrl |= (rng.below(16) & 0xB) << (4 * i);
                let value = (1u64 << fixed_width) - 1 - rng.below(6);
                m.write_msr(FIXED0 + i as u32, value).unwrap();
            }
        }
        m.write_msr(FIXED_CTRL, ctrl).unwrap();
        let enables = config.counter_bits() & !(rng.next() & rng.next());
        m.write_msr(GLOBAL_CTRL, enables).unwrap();
        let mut debugctl = 0;
        if rng.chance(3) {
            debugctl |= 1 << 12;
        }
        if rng.chance(3) {
            debugctl |= (1 << 11) | 1;
        }
        m.write_msr(DEBUGCTL, debugctl).unwrap();
    }
    m.set_skid(rng.below(4));
    m
}

/// `inject` in bulk equals the same occurrences clock by clock, whatever
/// the programming (filters, wraps, skid, freezes), and `inject_until_pmi`
/// stops at the same clock as a clock-by-clock search.
#[test]
fn bulk_injection_equals_clock_by_clock() {
    let configs = [
        Config::v1(),
        Config::core2(),
        v3(),
        Config::skylake(),
        Config::alder_lake_p_core(),
    ];
    let events = [INSTR, CYCLES, REF, SLOTS, LLC_MISS];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    // How often the runs met a PMI, a wrap and a freeze (so that the
    // comparison covers them).
    let (mut pmis, mut wraps, mut freezes) = (0, 0, 0);
    for trial in 0..400 {
        let config = configs[trial % configs.len()];
        let m = random_setup(&mut rng, config);
        let (mut bulk, mut clocked) = (m.clone(), m.clone());
        let (mut until, mut searched) = (m.clone(), m);
        for step in 0..8 {
            let e = ev(events[rng.below(5) as usize], rng.below(12));
            let e = if rng.chance(3) { e.at(USR) } else { e };
            let r = bulk.inject(e);
            clocked.set_privilege(e.privilege);
            for _ in 0..e.count {
                clocked.cycle(&[e.times(1)]);
            }
            assert_eq!(
                r,
                Injected {
                    injected: e.count,
                    pmi_pending: bulk.pmi_pending()
                }
            );
            assert_eq!(bulk, clocked, "trial {trial} step {step}: {e:?}");
            pmis += usize::from(bulk.pmi_pending());
            wraps += usize::from(bulk.global_status() & 0xFF_0000_00FF != 0);
            freezes +=
                usize::from(bulk.frozen() || (config.version >= 2 && bulk.global_ctrl() == 0));

            let r = until.inject_until_pmi(e);
            searched.set_privilege(e.privilege);
            let mut n = 0;
            while n < e.count && !searched.pmi_pending() {
                searched.cycle(&[e.times(1)]);
                n += 1;
            }
            assert_eq!(
                r,
                Injected {
                    injected: n,
                    pmi_pending: searched.pmi_pending()
                }
            );
            assert_eq!(
                until, searched,
                "trial {trial} step {step}: until PMI {e:?}"
            );
            if rng.chance(2) {
                assert_eq!(bulk.take_pmi(), clocked.take_pmi());
                assert_eq!(until.take_pmi(), searched.take_pmi());
            }
            if rng.chance(4) && config.version >= 2 {
                let status = bulk.global_status();
                for model in [&mut bulk, &mut clocked] {
                    model
                        .write_msr(OVF_CTRL, status & config.status_reset_bits())
                        .unwrap();
                }
                let status = until.global_status();
                for model in [&mut until, &mut searched] {
                    model
                        .write_msr(OVF_CTRL, status & config.status_reset_bits())
                        .unwrap();
                    model.write_msr(GLOBAL_CTRL, config.counter_bits()).unwrap();
                }
            }
        }
    }
    assert!(
        pmis > 300 && wraps > 500 && freezes > 100,
        "{pmis} {wraps} {freezes}"
    );
}

#[test]
fn bulk_injection_takes_constant_time() {
    let mut m = sky();
    m.write_msr(EVTSEL0, counting(INSTR, 0)).unwrap();
    m.write_msr(FIXED_CTRL, 0x3).unwrap();
    m.write_msr(GLOBAL_CTRL, 0x1_0000_0001).unwrap();
    let n = 3 << 48;
    m.inject(ev(INSTR, n + 5));
    assert_eq!((m.counter(0), m.fixed(0)), (5, 5));
    assert_eq!(m.global_status(), 0x1_0000_0001);
    m.inject(ev(INSTR, u64::MAX));
    assert_eq!(m.counter(0), 5u64.wrapping_add(u64::MAX) & ((1 << 48) - 1));
}

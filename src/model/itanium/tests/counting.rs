//! Counting: event selection, plm, ism, PSR.up/pp with pm, the Itanium 2
//! enable bit, thresholds, Montecito's MESI filter.

use super::helpers::*;

#[test]
fn every_counter_counts_only_its_own_event() {
    for g in GENERATIONS {
        for c in counters(g) {
            let mut m = ready(g);
            if g == Itanium2 && c != 4 {
                // The other counters need PMC4's enable bit (power-up: set).
                assert_ne!(m.pmc(4) & counter::ITANIUM2_ENABLE, 0);
            }
            program(&mut m, c, events::CPU_CYCLES, 0, 0);
            let d = m.inject(cycles(100));
            assert_eq!(d.cycles, 100);
            for n in counters(g) {
                let expect = if n == c { 100 } else { 0 };
                assert_eq!(m.read_pmd(n), Ok(expect), "{g:?}: programmed {c}, read {n}");
            }
        }
    }
}

#[test]
fn plm_selects_privilege_levels() {
    for g in GENERATIONS {
        for plm in 0..16u64 {
            let mut m = ready(g);
            let v = counter_config(g, 4, events::CPU_CYCLES, 0) & !counter::PLM;
            m.write_pmc(4, v | plm).unwrap();
            for cpl in 0..4u8 {
                m.inject(cycles(1 << cpl).at(cpl));
            }
            // Level n contributes 2^n: the count spells out plm.
            assert_eq!(m.counter(4), plm, "{g:?} plm {plm:#06b}");
        }
    }
}

/// VTune's Itanium event help, ISM: "00: monitoring enabled during Itanium
/// processor and IA-32 architecture instruction execution; 10: bit 24 low
/// enables monitoring during Itanium processor instruction execution; 01:
/// bit 25 low enables monitoring during IA-32 architecture instruction
/// execution; 11: disables monitoring". (ism, counts IA-64, counts IA-32)
const ISM_TABLE: [(u64, bool, bool); 4] = [
    (0b00, true, true),
    (0b10, true, false),
    (0b01, false, true),
    (0b11, false, false),
];

#[test]
fn ism_selects_the_instruction_set() {
    for g in [Itanium, Itanium2] {
        for (ism, ia64, ia32) in ISM_TABLE {
            let mut m = ready(g);
            program(&mut m, 4, events::CPU_CYCLES, 0, ism << 24);
            m.inject(cycles(3));
            m.inject(cycles(40).isa(InstructionSet::Ia32));
            let expect = if ia64 { 3 } else { 0 } + if ia32 { 40 } else { 0 };
            assert_eq!(m.counter(4), expect, "{g:?} ism {ism:02b}");
        }
    }
    // Montecito: ism is held at 10b, IA-64 only.
    let mut m = ready(Montecito);
    program(&mut m, 9, events::CPU_CYCLES, 0, 0);
    m.inject(cycles(3));
    m.inject(cycles(40).isa(InstructionSet::Ia32));
    assert_eq!(m.counter(9), 3);
}

#[test]
fn psr_up_enables_user_monitors_and_psr_pp_privileged_ones() {
    for g in GENERATIONS {
        for (up, pp) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut m = ready(g);
            m.set_psr(Psr { up, sp: false, pp });
            program(&mut m, 4, events::CPU_CYCLES, 0, 0);
            program(&mut m, 5, events::CPU_CYCLES, 0, counter::PM);
            m.inject(cycles(10));
            let count = |on| if on { 10 } else { 0 };
            assert_eq!(m.counter(4), count(up), "{g:?} user monitor up={up}");
            assert_eq!(m.counter(5), count(pp), "{g:?} privileged monitor pp={pp}");
        }
    }
}

#[test]
fn the_pmu_powers_up_frozen_on_itanium_and_itanium2() {
    for g in GENERATIONS {
        let mut m = ItaniumModel::new(g);
        m.set_psr(Psr::MONITORING);
        program(&mut m, 4, events::CPU_CYCLES, 0, 0);
        let d = m.inject(cycles(10));
        let frozen = g != Montecito;
        assert_eq!(d.counted_cycles, if frozen { 0 } else { 10 }, "{g:?}");
        assert_eq!(m.counter(4), if frozen { 0 } else { 10 });
        m.write_pmc(0, 0).unwrap();
        m.inject(cycles(10));
        assert_eq!(m.counter(4), if frozen { 10 } else { 20 });
    }
}

#[test]
fn itanium2_pmc4_enable_bit_gates_every_counter() {
    let mut m = ready(Itanium2);
    program(&mut m, 5, events::CPU_CYCLES, 0, 0);
    program(&mut m, 7, events::CPU_CYCLES, 0, 0);
    m.inject(cycles(5));
    assert_eq!((m.counter(5), m.counter(7)), (5, 5));
    // A PMC4 written without bit 23 stops all four.
    m.write_pmc(
        4,
        counter_config(Itanium2, 4, events::CPU_CYCLES, 0) & !counter::ITANIUM2_ENABLE,
    )
    .unwrap();
    m.inject(cycles(5));
    assert_eq!((m.counter(4), m.counter(5), m.counter(7)), (0, 5, 5));
    // Bit 23 on PMC5-7 does not help.
    program(&mut m, 6, events::CPU_CYCLES, 0, counter::ITANIUM2_ENABLE);
    m.inject(cycles(5));
    assert_eq!(m.counter(6), 0);
    m.write_pmc(4, counter::ITANIUM2_ENABLE).unwrap();
    m.inject(cycles(5));
    assert_eq!((m.counter(5), m.counter(6), m.counter(7)), (10, 5, 10));
    // The bit does not exist on the other generations.
    for g in [Itanium, Montecito] {
        let mut m = ItaniumModel::new(g);
        let v = counter_config(g, 4, events::CPU_CYCLES, 0) | counter::ITANIUM2_ENABLE;
        assert_eq!(m.write_pmc(4, v), pmc_fixed(4, counter::ITANIUM2_ENABLE));
    }
}

#[test]
fn event_select_and_umask_must_both_match() {
    for g in GENERATIONS {
        let mut m = ready(g);
        // L3_READS_ALL_READS_HIT-like: es 7Dh umask 0Dh.
        program(&mut m, 4, 0x7D, 0xD, 0);
        m.inject(Event::new(0x7D, 0xD, 4));
        m.inject(Event::new(0x7D, 0xF, 100));
        m.inject(Event::new(0x7D, 0x1D, 100));
        m.inject(Event::new(0x7C, 0xD, 100));
        assert_eq!(m.counter(4), 4, "{g:?}");
    }
}

#[test]
fn itanium_event_select_is_seven_bits() {
    // DATA_EAR_EVENTS is C8h on Itanium 2: fine there.
    let mut m = ready(Itanium2);
    program(&mut m, 4, 0xC8, 0, 0);
    m.inject(Event::new(0xC8, 0, 3));
    assert_eq!(m.counter(4), 3);
    // On Itanium bit 15 is ignored: strict refuses, the hardware counts 48h.
    let mut m = ready(Itanium);
    let v = counter_config(Itanium, 4, 0xC8, 0);
    assert_eq!(m.write_pmc(4, v), pmc_fixed(4, 1 << 15));
    m.set_checking(Checking::Hardware);
    m.write_pmc(4, v).unwrap();
    m.inject(Event::new(0xC8, 0, 3));
    assert_eq!(m.counter(4), 0);
    m.inject(Event::new(0x48, 0, 3));
    assert_eq!(m.counter(4), 3);
}

#[test]
fn threshold_counts_cycles_whose_value_exceeds_it() {
    // IA64_INST_RETIRED, up to 6 per cycle (PMC4/5 on Itanium).
    let retired = |n, per_cycle| Event::new(events::IA64_INST_RETIRED, 0, n).per_cycle(per_cycle);
    for g in GENERATIONS {
        // (threshold, occurrences, per cycle, expected count)
        let cases = [
            (0, 20, 6, 20), // sums the values
            (3, 20, 6, 3),  // 6,6,6 > 3; the last cycle's 2 is not
            (5, 20, 6, 3),
            (6, 20, 6, 0), // "exceeds": 6 is not more than 6
            (1, 10, 4, 3), // 4,4,2
            (2, 10, 4, 2),
            (7, 70, 7, 0),
            (6, 70, 7, 10),
            (0, 9, 9, 9), // 9 per cycle is clipped to 7: 7 + 2
            (6, 9, 9, 1),
        ];
        for (t, n, k, expect) in cases {
            let mut m = ready(g);
            program(&mut m, 4, events::IA64_INST_RETIRED, 0, t << 20);
            let d = m.inject(retired(n, k));
            assert_eq!(
                m.counter(4),
                expect,
                "{g:?} threshold {t}, {n} at {k}/cycle"
            );
            let k = u64::from(k.min(MAX_PER_CYCLE));
            assert_eq!(d.cycles, n.div_ceil(k));
        }
    }
    // Itanium PMC6/7 have two threshold bits: a threshold of 4 is refused,
    // and the hardware keeps 21:20 = 0, i.e. no threshold at all.
    let mut m = ready(Itanium);
    let v = counter_config(Itanium, 6, events::CPU_CYCLES, 0) | (4 << 20);
    assert_eq!(m.write_pmc(6, v), pmc_fixed(6, 1 << 22));
    m.set_checking(Checking::Hardware);
    m.write_pmc(6, v).unwrap();
    m.inject(cycles(12).per_cycle(6));
    assert_eq!(m.counter(6), 12);
}

#[test]
fn counter_restrictions_come_from_the_injected_event() {
    // IA64_INST_RETIRED counts on PMC4/5 only on Itanium (libpfm3's
    // `itanium_events.h`).
    let mut m = ready(Itanium);
    program(&mut m, 4, events::IA64_INST_RETIRED, 0, 0);
    program(&mut m, 6, events::IA64_INST_RETIRED, 0, 0);
    m.inject(Event::new(events::IA64_INST_RETIRED, 0, 8).only_on(0b11_0000));
    assert_eq!((m.counter(4), m.counter(6)), (8, 0));
}

#[test]
fn montecito_has_twelve_counters_and_a_mesi_filter() {
    let mut m = ready(Montecito);
    for c in 4..=15 {
        program(&mut m, c, 0x7D, 0, 0);
    }
    // PMC9: only M and E lines.
    program(
        &mut m,
        9,
        0x7D,
        0,
        (0b1100) << counter::MONTECITO_MESI.start,
    );
    m.inject(Event::new(0x7D, 0, 1).line(Mesi::Modified));
    m.inject(Event::new(0x7D, 0, 10).line(Mesi::Exclusive));
    m.inject(Event::new(0x7D, 0, 100).line(Mesi::Shared));
    m.inject(Event::new(0x7D, 0, 1000).line(Mesi::Invalid));
    m.inject(Event::new(0x7D, 0, 10000));
    // The others have no MESI bit set: they count only the unfiltered event.
    for c in 4..=15 {
        let expect = if c == 9 { 10011 } else { 10000 };
        assert_eq!(m.counter(c), expect, "PMC{c}");
    }
    // The filter is Montecito's: Itanium 2 ignores the line state.
    let mut m = ready(Itanium2);
    program(&mut m, 4, 0x7D, 0, 0);
    m.inject(Event::new(0x7D, 0, 5).line(Mesi::Shared));
    assert_eq!(m.counter(4), 5);
}

#[test]
fn counting_in_bulk_is_exact_for_large_counts() {
    let mut m = ready(Itanium2);
    program(&mut m, 4, events::CPU_CYCLES, 0, 0);
    let d = m.inject(cycles(1 << 40).per_cycle(7));
    assert_eq!(m.counter(4), 1 << 40);
    assert_eq!(d.cycles, (1u64 << 40).div_ceil(7));
}

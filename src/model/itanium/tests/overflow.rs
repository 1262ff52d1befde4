//! Overflow: wrap at W bits, oi (overflow bit, freeze, one interrupt),
//! no counting while frozen, unfreezing, ev strobes.

use super::helpers::*;
use crate::model::itanium::tables::Tables;

#[test]
fn counters_wrap_at_32_or_47_bits() {
    for g in GENERATIONS {
        assert_eq!(g.pmd_width(), if g == Itanium { 32 } else { 47 });
        for c in counters(g) {
            let mut m = ready(g);
            program(&mut m, c, events::CPU_CYCLES, 0, 0);
            m.write_pmd(c, wrap(g) - 5).unwrap();
            let d = m.inject(cycles(12));
            assert_eq!(m.counter(c), 7, "{g:?} PMC{c}");
            assert_eq!(m.read_pmd(c), Ok(7));
            // Without oi: no overflow bit, no freeze, no interrupt.
            assert_eq!(m.read_pmc(0), Ok(0), "{g:?}");
            assert!(!d.froze && !m.frozen() && m.take_interrupt().is_none());
        }
    }
    // Itanium concretely: 0xFFFFFFFB + 12 = 7.
    let mut m = ready(Itanium);
    program(&mut m, 7, events::CPU_CYCLES, 0, 0);
    m.write_pmd(7, 0xFFFF_FFFB).unwrap();
    m.inject(cycles(4));
    assert_eq!(
        m.read_pmd(7),
        Ok(u64::MAX),
        "0xFFFFFFFF reads sign-extended"
    );
    m.inject(cycles(8));
    assert_eq!(m.read_pmd(7), Ok(7));
}

#[test]
fn oi_overflow_sets_its_bit_freezes_and_raises_one_interrupt() {
    for g in GENERATIONS {
        let top = g.last_counter();
        let mut m = ready(g);
        program(&mut m, top, events::CPU_CYCLES, 0, counter::OI);
        program(&mut m, 4, events::CPU_CYCLES, 0, 0);
        m.write_pmd(top, wrap(g) - 10).unwrap();
        let d = m.inject(cycles(25));
        assert_eq!(
            d,
            Delivery {
                cycles: 25,
                counted_cycles: 10,
                froze: true
            },
            "{g:?}"
        );
        assert_eq!(m.counter(top), 0, "{g:?}: stopped in the overflow cycle");
        assert_eq!(m.counter(4), 10, "{g:?}: freeze stops every counter");
        assert_eq!(m.read_pmc(0), Ok((1 << top) | pmc0::FR), "{g:?}");
        assert_eq!(
            m.take_interrupt(),
            Some(Interrupt {
                overflow: 1 << top,
                edges: 1
            })
        );
        assert_eq!(m.take_interrupt(), None, "{g:?}: one interrupt");
        // Frozen: nothing counts, nothing new is raised.
        let d = m.inject(cycles(1000));
        assert_eq!((d.counted_cycles, d.froze), (0, false));
        assert_eq!((m.counter(top), m.counter(4)), (0, 10));
        assert!(!m.interrupt_pending());
    }
}

#[test]
fn the_overflow_cycle_counts_in_full() {
    // 6 per cycle into a counter 4 short of the wrap: the cycle adds 6.
    for g in GENERATIONS {
        let mut m = ready(g);
        program(&mut m, 5, events::IA64_INST_RETIRED, 0, counter::OI);
        m.write_pmd(5, wrap(g) - 4).unwrap();
        let d = m.inject(Event::new(events::IA64_INST_RETIRED, 0, 60).per_cycle(6));
        assert_eq!(d.counted_cycles, 1);
        assert_eq!(m.counter(5), 2, "{g:?}");
        // A thresholded counter wraps on a counted cycle.
        let mut m = ready(g);
        program(
            &mut m,
            4,
            events::IA64_INST_RETIRED,
            0,
            counter::OI | (4 << 20),
        );
        m.write_pmd(4, wrap(g) - 2).unwrap();
        let d = m.inject(Event::new(events::IA64_INST_RETIRED, 0, 60).per_cycle(6));
        assert_eq!((d.counted_cycles, m.counter(4)), (2, 0), "{g:?}");
    }
}

#[test]
fn concurrent_overflows_set_both_bits_and_raise_one_interrupt() {
    for g in GENERATIONS {
        let mut m = ready(g);
        for c in [4, 6] {
            program(&mut m, c, events::CPU_CYCLES, 0, counter::OI);
            m.write_pmd(c, wrap(g) - 3).unwrap();
        }
        // PMC5 would overflow later: it stops at the freeze, no bit.
        program(&mut m, 5, events::CPU_CYCLES, 0, counter::OI);
        m.write_pmd(5, wrap(g) - 4).unwrap();
        m.inject(cycles(10));
        assert_eq!(m.read_pmc(0), Ok((1 << 4) | (1 << 6) | 1), "{g:?}");
        assert_eq!(m.counter(5), wrap(g) - 1);
        assert_eq!(
            m.take_interrupt(),
            Some(Interrupt {
                overflow: (1 << 4) | (1 << 6),
                edges: 1
            })
        );
    }
}

#[test]
fn unfreezing_resumes_counting() {
    for g in GENERATIONS {
        let mut m = ready(g);
        program(&mut m, 4, events::CPU_CYCLES, 0, counter::OI);
        m.write_pmd(4, wrap(g) - 1).unwrap();
        m.inject(cycles(5));
        assert!(m.frozen());
        m.take_interrupt().unwrap();
        // Linux's way: PMC0 = 0 clears fr and every overflow bit.
        m.write_pmc(0, 0).unwrap();
        m.write_pmd(4, wrap(g) - 100).unwrap();
        let d = m.inject(cycles(30));
        assert_eq!((d.counted_cycles, d.froze), (30, false), "{g:?}");
        assert_eq!(m.counter(4), wrap(g) - 70);
        assert!(m.take_interrupt().is_none());
    }
}

#[test]
fn unfreezing_with_the_overflow_bit_left_set_raises_nothing_until_the_next_overflow() {
    let g = Itanium2;
    let mut m = ready(g);
    program(&mut m, 4, events::CPU_CYCLES, 0, counter::OI);
    program(&mut m, 5, events::CPU_CYCLES, 0, counter::OI);
    m.write_pmd(4, wrap(g) - 1).unwrap();
    m.write_pmd(5, wrap(g) - 50).unwrap();
    m.inject(cycles(1));
    assert_eq!(m.take_interrupt().map(|i| i.overflow), Some(1 << 4));
    m.write_pmc(0, 1 << 4).unwrap(); // fr only
    assert!(!m.frozen());
    m.inject(cycles(10));
    assert!(
        m.take_interrupt().is_none(),
        "no second interrupt for the old carry"
    );
    assert_eq!(m.counter(4), 10);
    m.inject(cycles(100));
    assert_eq!(
        m.take_interrupt(),
        Some(Interrupt {
            overflow: 1 << 5,
            edges: 1
        })
    );
    assert_eq!(m.read_pmc(0), Ok((1 << 4) | (1 << 5) | 1), "sticky bits");
}

#[test]
fn interrupts_not_taken_merge_into_the_pending_line() {
    let g = Montecito;
    let mut m = ready(g);
    program(&mut m, 12, events::CPU_CYCLES, 0, counter::OI);
    program(&mut m, 15, events::CPU_CYCLES, 0, counter::OI);
    m.write_pmd(12, wrap(g) - 1).unwrap();
    m.write_pmd(15, wrap(g) - 3).unwrap();
    m.inject(cycles(1));
    // Unfrozen without taking the interrupt; PMC15 overflows next.
    m.write_pmc(0, 0).unwrap();
    m.inject(cycles(5));
    assert_eq!(
        m.take_interrupt(),
        Some(Interrupt {
            overflow: (1 << 12) | (1 << 15),
            edges: 2
        })
    );
    assert_eq!(m.read_pmc(0), Ok((1 << 15) | 1));
    assert_eq!(m.counter(12), 2);
}

#[test]
fn software_freeze_and_overflow_bits_raise_no_interrupt() {
    for g in GENERATIONS {
        let mut m = ready(g);
        program(&mut m, 4, events::CPU_CYCLES, 0, counter::OI);
        m.write_pmc(0, pmc0::FR).unwrap();
        m.inject(cycles(10));
        assert_eq!(m.counter(4), 0, "{g:?}: frozen by software");
        m.write_pmc(0, (1 << 4) | pmc0::FR).unwrap();
        assert!(!m.interrupt_pending());
    }
}

#[test]
fn ev_strobes_the_bpm_pin_on_every_wrap_whatever_oi() {
    for g in GENERATIONS {
        let mut m = ready(g);
        program(&mut m, 4, events::CPU_CYCLES, 0, counter::EV);
        program(&mut m, 5, events::CPU_CYCLES, 0, 0);
        m.write_pmd(4, wrap(g) - 1).unwrap();
        m.write_pmd(5, wrap(g) - 1).unwrap();
        // Two wraps of counter 4 in one injection, without oi.
        m.inject(cycles(wrap(g) + 1).per_cycle(7));
        assert_eq!(m.bpm_strobes(4), 2, "{g:?}");
        assert_eq!(m.bpm_strobes(5), 0, "{g:?}: no ev");
        assert_eq!(m.counter(4), 0);
        assert_eq!(m.read_pmc(0), Ok(0));
        // With oi as well: one wrap, then frozen.
        program(&mut m, 6, events::CPU_CYCLES, 0, counter::EV | counter::OI);
        m.write_pmd(6, wrap(g) - 2).unwrap();
        m.write_pmd(4, wrap(g) - 1).unwrap();
        m.inject(cycles(10));
        assert_eq!(m.bpm_strobes(6), 1);
        assert!(m.frozen());
        assert_eq!(
            m.bpm_strobes(4),
            3,
            "{g:?}: PMC4 wrapped again before the freeze"
        );
    }
}

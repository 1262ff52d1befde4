//! The register map against SDM Table 18-63, cascading and the set types.

use super::*;

/// SDM Table 18-63 (the ESCR MSRs, their select values and counters),
/// transcribed independently of `ESCR_TABLE`: (MSR, name, select, counters).
const REF_ESCRS: &[(u32, &str, u8, &[u8])] = &[
    (0x3A0, "MSR_BSU_ESCR0", 7, &[0, 1]),
    (0x3A1, "MSR_BSU_ESCR1", 7, &[2, 3]),
    (0x3A2, "MSR_FSB_ESCR0", 6, &[0, 1]),
    (0x3A3, "MSR_FSB_ESCR1", 6, &[2, 3]),
    (0x3A4, "MSR_FIRM_ESCR0", 1, &[8, 9]),
    (0x3A5, "MSR_FIRM_ESCR1", 1, &[10, 11]),
    (0x3A6, "MSR_FLAME_ESCR0", 0, &[8, 9]),
    (0x3A7, "MSR_FLAME_ESCR1", 0, &[10, 11]),
    (0x3A8, "MSR_DAC_ESCR0", 5, &[8, 9]),
    (0x3A9, "MSR_DAC_ESCR1", 5, &[10, 11]),
    (0x3AA, "MSR_MOB_ESCR0", 2, &[0, 1]),
    (0x3AB, "MSR_MOB_ESCR1", 2, &[2, 3]),
    (0x3AC, "MSR_PMH_ESCR0", 4, &[0, 1]),
    (0x3AD, "MSR_PMH_ESCR1", 4, &[2, 3]),
    (0x3AE, "MSR_SAAT_ESCR0", 2, &[8, 9]),
    (0x3AF, "MSR_SAAT_ESCR1", 2, &[10, 11]),
    (0x3B0, "MSR_U2L_ESCR0", 3, &[8, 9]),
    (0x3B1, "MSR_U2L_ESCR1", 3, &[10, 11]),
    (0x3B2, "MSR_BPU_ESCR0", 0, &[0, 1]),
    (0x3B3, "MSR_BPU_ESCR1", 0, &[2, 3]),
    (0x3B4, "MSR_IS_ESCR0", 1, &[0, 1]),
    (0x3B5, "MSR_IS_ESCR1", 1, &[2, 3]),
    (0x3B6, "MSR_ITLB_ESCR0", 3, &[0, 1]),
    (0x3B7, "MSR_ITLB_ESCR1", 3, &[2, 3]),
    (0x3B8, "MSR_CRU_ESCR0", 4, &[12, 13, 16]),
    (0x3B9, "MSR_CRU_ESCR1", 4, &[14, 15, 17]),
    (0x3BA, "MSR_IQ_ESCR0", 0, &[12, 13, 16]),
    (0x3BB, "MSR_IQ_ESCR1", 0, &[14, 15, 17]),
    (0x3BC, "MSR_RAT_ESCR0", 2, &[12, 13, 16]),
    (0x3BD, "MSR_RAT_ESCR1", 2, &[14, 15, 17]),
    (0x3BE, "MSR_SSU_ESCR0", 3, &[12, 13, 16]),
    (0x3C0, "MSR_MS_ESCR0", 0, &[4, 5]),
    (0x3C1, "MSR_MS_ESCR1", 0, &[6, 7]),
    (0x3C2, "MSR_TBPU_ESCR0", 2, &[4, 5]),
    (0x3C3, "MSR_TBPU_ESCR1", 2, &[6, 7]),
    (0x3C4, "MSR_TC_ESCR0", 1, &[4, 5]),
    (0x3C5, "MSR_TC_ESCR1", 1, &[6, 7]),
    (0x3C8, "MSR_IX_ESCR0", 5, &[0, 1]),
    (0x3C9, "MSR_IX_ESCR1", 5, &[2, 3]),
    (0x3CA, "MSR_ALF_ESCR0", 1, &[12, 13, 16]),
    (0x3CB, "MSR_ALF_ESCR1", 1, &[14, 15, 17]),
    (0x3CC, "MSR_CRU_ESCR2", 5, &[12, 13, 16]),
    (0x3CD, "MSR_CRU_ESCR3", 5, &[14, 15, 17]),
    (0x3E0, "MSR_CRU_ESCR4", 6, &[12, 13, 16]),
    (0x3E1, "MSR_CRU_ESCR5", 6, &[14, 15, 17]),
];

/// SDM Table 18-63 (the ESCRs each counter's CCCR can select), per counter,
/// the ESCR (by MSR) behind each CCCR select value 0-7 on a model-2 part.
const REF_SELECT_MAP: [[Option<u32>; 8]; 18] = {
    const A_BPU: [Option<u32>; 8] = [
        Some(0x3B2),
        Some(0x3B4),
        Some(0x3AA),
        Some(0x3B6),
        Some(0x3AC),
        Some(0x3C8),
        Some(0x3A2),
        Some(0x3A0),
    ];
    const B_BPU: [Option<u32>; 8] = [
        Some(0x3B3),
        Some(0x3B5),
        Some(0x3AB),
        Some(0x3B7),
        Some(0x3AD),
        Some(0x3C9),
        Some(0x3A3),
        Some(0x3A1),
    ];
    const A_MS: [Option<u32>; 8] = [
        Some(0x3C0),
        Some(0x3C4),
        Some(0x3C2),
        None,
        None,
        None,
        None,
        None,
    ];
    const B_MS: [Option<u32>; 8] = [
        Some(0x3C1),
        Some(0x3C5),
        Some(0x3C3),
        None,
        None,
        None,
        None,
        None,
    ];
    const A_FL: [Option<u32>; 8] = [
        Some(0x3A6),
        Some(0x3A4),
        Some(0x3AE),
        Some(0x3B0),
        None,
        Some(0x3A8),
        None,
        None,
    ];
    const B_FL: [Option<u32>; 8] = [
        Some(0x3A7),
        Some(0x3A5),
        Some(0x3AF),
        Some(0x3B1),
        None,
        Some(0x3A9),
        None,
        None,
    ];
    const A_IQ: [Option<u32>; 8] = [
        Some(0x3BA),
        Some(0x3CA),
        Some(0x3BC),
        Some(0x3BE),
        Some(0x3B8),
        Some(0x3CC),
        Some(0x3E0),
        None,
    ];
    const B_IQ: [Option<u32>; 8] = [
        Some(0x3BB),
        Some(0x3CB),
        Some(0x3BD),
        None,
        Some(0x3B9),
        Some(0x3CD),
        Some(0x3E1),
        None,
    ];
    [
        A_BPU, A_BPU, B_BPU, B_BPU, A_MS, A_MS, B_MS, B_MS, A_FL, A_FL, B_FL, B_FL, A_IQ, A_IQ,
        B_IQ, B_IQ, A_IQ, B_IQ,
    ]
};

#[test]
fn escr_table_matches_reference() {
    assert_eq!(Escr::ALL.len(), REF_ESCRS.len());
    for (e, &(msr, name, sel, ctrs)) in Escr::ALL.iter().zip(REF_ESCRS) {
        assert_eq!(e.msr(), msr, "{name}");
        assert_eq!(e.name(), name);
        assert_eq!(e.select().get(), sel, "{name}");
        let expect = ctrs.iter().fold(CounterSet::EMPTY, |s, &n| {
            s.with(Counter::from_index(n).unwrap())
        });
        assert_eq!(e.counters(), expect, "{name}");
        assert_eq!(Escr::from_msr(msr), Some(*e));
        for c in Counter::ALL {
            assert_eq!(e.feeds(c), ctrs.contains(&c.index()), "{name} {c:?}");
            assert_eq!(Assignment::new(*e, c).is_some(), e.feeds(c));
        }
    }
    // MSR order and discriminant order agree.
    for (i, e) in Escr::ALL.iter().enumerate() {
        assert_eq!(*e as usize, i);
    }
}

#[test]
fn gaps_have_no_escr() {
    for msr in [0x3BF, 0x3C6, 0x3C7, 0x3CE, 0x3DF, 0x39F, 0x3E2] {
        assert_eq!(Escr::from_msr(msr), None, "{msr:#x}");
    }
    let n = (0x3A0..=0x3E1)
        .filter(|m| Escr::from_msr(*m).is_some())
        .count();
    assert_eq!(n, 45);
}

#[test]
fn cccr_select_map_matches_reference() {
    for c in Counter::ALL {
        for sel in 0..8u8 {
            let s = EscrSelect::new(sel).unwrap();
            let got = c.escr_for_select(s, 2).map(Escr::msr);
            assert_eq!(
                got,
                REF_SELECT_MAP[c.index() as usize][sel as usize],
                "{c:?} sel {sel}"
            );
            // IQ_ESCR0/1 (select 0 on IQ counters) vanish from model 3 on.
            let later = c.escr_for_select(s, 3).map(Escr::msr);
            if matches!(got, Some(0x3BA | 0x3BB)) {
                assert_eq!(later, None);
            } else {
                assert_eq!(later, got);
            }
        }
    }
}

#[test]
fn counter_and_cccr_addresses() {
    for n in 0..18u8 {
        let c = Counter::from_index(n).unwrap();
        assert_eq!(c.index(), n);
        assert_eq!(c.msr(), 0x300 + n as u32);
        assert_eq!(c.cccr().msr(), 0x360 + n as u32);
        assert_eq!(c.cccr().counter(), c);
        assert_eq!(c.rdpmc_index(), n as u32);
    }
    assert_eq!(Counter::from_index(18), None);
    assert_eq!(Counter::from_index(255), None);
}

#[test]
fn blocks_and_pairs() {
    let expect: [(Pair, Block, [u8; 2]); 9] = [
        (Pair::BpuA, Block::Bpu, [0, 1]),
        (Pair::BpuB, Block::Bpu, [2, 3]),
        (Pair::MsA, Block::Ms, [4, 5]),
        (Pair::MsB, Block::Ms, [6, 7]),
        (Pair::FlameA, Block::Flame, [8, 9]),
        (Pair::FlameB, Block::Flame, [10, 11]),
        (Pair::IqA, Block::Iq, [12, 13]),
        (Pair::IqB, Block::Iq, [14, 15]),
        (Pair::IqC, Block::Iq, [16, 17]),
    ];
    for (p, b, ctrs) in expect {
        assert_eq!(p.block(), b);
        assert_eq!(p.counters().map(Counter::index), ctrs);
        for n in ctrs {
            let c = Counter::from_index(n).unwrap();
            assert_eq!(c.pair(), p);
            assert_eq!(c.block(), b);
        }
        assert!(b.pairs().contains(&p));
    }
    let total: usize = Block::ALL.iter().map(|b| b.pairs().len()).sum();
    assert_eq!(total, 9);
}

#[test]
fn cascade_partners_follow_the_sdm() {
    // (counter, the only counter it can be cascaded from)
    let expect = [
        (0, 2),
        (2, 0),
        (1, 3),
        (3, 1),
        (4, 6),
        (6, 4),
        (5, 7),
        (7, 5),
        (8, 10),
        (10, 8),
        (9, 11),
        (11, 9),
        (12, 14),
        (14, 12),
        (13, 15),
        (15, 13),
        (16, 14),
        (17, 15),
    ];
    for (to, from) in expect {
        let to = Counter::from_index(to).unwrap();
        for c in Counter::ALL {
            assert_eq!(
                to.can_cascade_from(c),
                c.index() == from,
                "{to:?} from {c:?}"
            );
        }
        // Cascading stays inside the block.
        assert_eq!(to.cascade_source().block(), to.block());
    }
    // 14 cannot be cascaded from 16, nor 16 from 12.
    assert!(!Counter::IqCounter2.can_cascade_from(Counter::IqCounter4));
    assert!(!Counter::IqCounter4.can_cascade_from(Counter::IqCounter0));
}

#[test]
fn extended_cascade_only_on_iq_0_3_4_5_of_models_2_3_4_6() {
    for model in 0..=15u8 {
        for c in Counter::ALL {
            let got = c.extended_cascade_source(model).map(Counter::index);
            let expect = if matches!(model, 2 | 3 | 4 | 6) {
                match c.index() {
                    12 => Some(16),
                    15 => Some(17),
                    16 => Some(17),
                    17 => Some(16),
                    _ => None,
                }
            } else {
                None
            };
            assert_eq!(got, expect, "{c:?} model {model}");
        }
    }
}

#[test]
fn iq_escrs_are_model_specific() {
    for model in 0..=15u8 {
        assert_eq!(Escr::IqEscr0.available_on(model), model == 1 || model == 2);
        assert_eq!(Escr::IqEscr1.available_on(model), model == 1 || model == 2);
        let n = Escr::ALL.iter().filter(|e| e.available_on(model)).count();
        assert_eq!(n, if model == 1 || model == 2 { 45 } else { 43 });
    }
}

#[test]
fn side_matches_feeding_escrs() {
    for c in Counter::ALL {
        for e in Escr::ALL {
            if e.feeds(c) {
                assert_eq!(e.side(), c.side(), "{e:?} {c:?}");
                assert_eq!(e.block(), c.block());
            }
        }
    }
    assert!(Counter::IqCounter4.pebs_capable() && Counter::IqCounter5.pebs_capable());
    assert_eq!(Counter::ALL.iter().filter(|c| c.pebs_capable()).count(), 2);
}

#[test]
fn other_msrs() {
    assert_eq!(MSR_TC_PRECISE_EVENT, 0x3F0);
    assert_eq!(MSR_PEBS_ENABLE, 0x3F1);
    assert_eq!(MSR_PEBS_MATRIX_VERT, 0x3F2);
    assert_eq!(IA32_DS_AREA, 0x600);
    assert_eq!(IA32_MISC_ENABLE, 0x1A0);
    assert_eq!(COUNTER_MASK, 0xFF_FFFF_FFFF);
}

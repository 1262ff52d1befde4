//! The branch trace buffer (Itanium, Itanium 2) and Montecito's ETB:
//! selection, entry format, the index and its wrap, BRANCH_EVENT sampling.

use super::helpers::*;
use crate::model::itanium::tables::Tables;

const SRC: u64 = 0x4000_0000_0000_1230;
const DST: u64 = 0x4000_0000_0000_8000;

/// plm 3:0, tm 9:8, ptm 11:10, ppm 13:12 (all 3: every branch).
fn btb_config(tm: u64, ptm: u64, ppm: u64) -> u64 {
    0xF | (tm << 8) | (ptm << 10) | (ppm << 12)
}

fn source_entry(addr: u64, slot: u64, mp: bool) -> u64 {
    (addr & !0xF) | (slot << 2) | (u64::from(mp) << 1) | 1
}

fn target_entry(addr: u64) -> u64 {
    (addr & !0xF) | (1 << 1)
}

/// The n-th test branch: a taken branch from SRC + 16n, slot n % 3.
fn nth(n: u64) -> Branch {
    Branch::taken(SRC + 16 * n, (n % 3) as u8, DST + 16 * n)
}

#[test]
fn a_branch_records_a_source_and_a_target_entry() {
    for g in GENERATIONS {
        let l = g.layout();
        let mut m = ready(g);
        m.write_pmc(l.btb_pmc, btb_config(3, 3, 3)).unwrap();
        assert_eq!(m.branch(Branch::taken(SRC, 2, DST)), Capture::Captured);
        let first = l.btb_first_pmd;
        assert_eq!(m.read_pmd(first), Ok(source_entry(SRC, 2, false)), "{g:?}");
        assert_eq!(m.read_pmd(first + 1), Ok(target_entry(DST)), "{g:?}");
        assert_eq!(
            m.read_pmd(l.btb_index_pmd),
            Ok(2),
            "{g:?}: index 2, not full"
        );
        // A mispredicted not-taken branch: slot 3, mp 1.
        let nt = Branch::not_taken(SRC, 1, SRC + 16).path_mispredicted();
        assert_eq!(m.branch(nt), Capture::Captured);
        assert_eq!(m.read_pmd(first + 2), Ok(source_entry(SRC, 3, true)));
        assert_eq!(m.read_pmd(first + 3), Ok(target_entry(SRC + 16)));
        // Every entry written is valid (b | mp != 0); the rest are not.
        for e in 0..l.btb_entries {
            let v = m.read_pmd(first + e).unwrap();
            assert_eq!(v & 3 != 0, e < 4, "{g:?} entry {e}");
        }
    }
}

#[test]
fn the_index_wraps_and_sets_full() {
    for g in GENERATIONS {
        let l = g.layout();
        let branches = u64::from(l.btb_entries / 2);
        let mut m = ready(g);
        m.write_pmc(l.btb_pmc, btb_config(3, 3, 3)).unwrap();
        for n in 0..branches {
            m.branch(nth(n));
        }
        // Montecito: ebi 3:0, full bit 5; the others: bbi 2:0, full bit 3.
        let full = if g == Montecito { 1 << 5 } else { 1 << 3 };
        assert_eq!(
            m.read_pmd(l.btb_index_pmd),
            Ok(full),
            "{g:?}: wrapped to 0, full"
        );
        m.branch(nth(branches));
        assert_eq!(m.read_pmd(l.btb_index_pmd), Ok(full | 2), "full is sticky");
        let first = l.btb_first_pmd;
        let newest = nth(branches);
        assert_eq!(
            m.read_pmd(first),
            Ok(source_entry(newest.source, u64::from(newest.slot), false))
        );
        assert_eq!(m.read_pmd(first + 1), Ok(target_entry(newest.target)));
        assert_eq!(
            m.read_pmd(first + 2),
            Ok(source_entry(SRC + 16, 1, false)),
            "{g:?}: the oldest surviving branch"
        );
        // Software resets the index.
        m.write_pmd(l.btb_index_pmd, 0).unwrap();
        m.branch(nth(7));
        assert_eq!(m.read_pmd(l.btb_index_pmd), Ok(2));
    }
}

#[test]
fn tm_ptm_ppm_select_branches() {
    let taken = Branch::taken(SRC, 0, DST);
    let not_taken = Branch::not_taken(SRC, 0, SRC + 16);
    let wrong_target = taken.target_mispredicted();
    let wrong_path = not_taken.path_mispredicted();
    // (tm, ptm, ppm, [taken, not taken, wrong target, wrong path])
    let cases = [
        (3, 3, 3, [true, true, true, true]),
        (2, 3, 3, [true, false, true, false]),
        (1, 3, 3, [false, true, false, true]),
        (0, 3, 3, [false, false, false, false]),
        (3, 1, 3, [false, false, true, false]),
        (3, 2, 3, [true, true, false, true]),
        (3, 3, 1, [false, false, false, true]),
        (3, 3, 2, [true, true, true, false]),
    ];
    for g in GENERATIONS {
        let l = g.layout();
        for (tm, ptm, ppm, expect) in cases {
            let mut m = ready(g);
            m.write_pmc(l.btb_pmc, btb_config(tm, ptm, ppm)).unwrap();
            for (b, want) in [taken, not_taken, wrong_target, wrong_path]
                .iter()
                .zip(expect)
            {
                let want = if want {
                    Capture::Captured
                } else {
                    Capture::NotSelected
                };
                assert_eq!(
                    m.branch(*b),
                    want,
                    "{g:?} tm {tm} ptm {ptm} ppm {ppm}: {b:?}"
                );
            }
        }
    }
}

#[test]
fn brt_selects_the_branch_type_on_itanium2_and_montecito() {
    for g in [Itanium2, Montecito] {
        let l = g.layout();
        let kinds = [
            BranchKind::IpRelative,
            BranchKind::Return,
            BranchKind::Indirect,
        ];
        for brt in 0..4u64 {
            let mut m = ready(g);
            m.write_pmc(l.btb_pmc, btb_config(3, 3, 3) | (brt << 14))
                .unwrap();
            for (i, kind) in kinds.into_iter().enumerate() {
                let want = brt == 0 || brt == i as u64 + 1;
                let got = m.branch(Branch::taken(SRC, 0, DST).kind(kind));
                assert_eq!(got == Capture::Captured, want, "{g:?} brt {brt} {kind:?}");
            }
        }
    }
    // Itanium's bits 15:14 are bpt/bac: no type filter.
    let mut m = ready(Itanium);
    m.write_pmc(12, btb_config(3, 3, 3) | (2 << 14)).unwrap();
    assert_eq!(m.branch(Branch::taken(SRC, 0, DST)), Capture::Captured);
}

#[test]
fn extension_bits_of_written_entries_are_cleared() {
    // Itanium 2 PMD16: per PMD8+i a nibble at 4+4i (b1, bruflush).
    let mut m = ready(Itanium2);
    m.write_pmc(12, btb_config(3, 3, 3)).unwrap();
    m.write_pmd(16, 0x3_3333_3330).unwrap();
    m.branch(Branch::taken(SRC, 0, DST));
    assert_eq!(m.read_pmd(16), Ok(0x3_3333_3002));
    // Montecito PMD39: nibbles in the order 48,56,49,57,...,55,63.
    let mut m = ready(Montecito);
    m.write_pmc(39, btb_config(3, 3, 3)).unwrap();
    m.write_pmd(39, 0x3333_3333_3333_3333).unwrap();
    m.branch(Branch::taken(SRC, 0, DST)); // entries 48 and 49
    assert_eq!(m.read_pmd(39), Ok(0x3333_3333_3333_3030));
    m.write_pmd(38, 8).unwrap();
    m.branch(Branch::taken(SRC, 0, DST)); // entries 56 and 57
    assert_eq!(m.read_pmd(39), Ok(0x3333_3333_3333_0000));
    assert_eq!(m.read_pmd(56), Ok(source_entry(SRC, 0, false)));
}

#[test]
fn btb_gating_and_isa() {
    for g in GENERATIONS {
        let l = g.layout();
        let mut m = ready(g);
        // plm 0: nothing; pm needs PSR.pp.
        m.write_pmc(l.btb_pmc, btb_config(3, 3, 3) & !0xF).unwrap();
        assert_eq!(m.branch(nth(0)), Capture::NotSelected);
        m.write_pmc(l.btb_pmc, btb_config(3, 3, 3) | (1 << 6))
            .unwrap();
        m.set_psr(Psr {
            pp: false,
            ..Psr::MONITORING
        });
        assert_eq!(m.branch(nth(0)), Capture::NotSelected, "{g:?}");
        m.set_psr(Psr::MONITORING);
        // ism does not apply to the branch trace buffer (VTune's Itanium
        // event help).
        assert_eq!(
            m.branch(nth(0).isa(InstructionSet::Ia32)),
            Capture::Captured
        );
        m.write_pmc(0, pmc0::FR).unwrap();
        assert_eq!(m.branch(nth(1)), Capture::Frozen);
        assert_eq!(m.read_pmd(l.btb_index_pmd), Ok(2), "{g:?}");
    }
}

#[test]
fn sampling_every_nth_branch() {
    // "The BTB is full after 4 branch events": count BRANCH_EVENT with oi,
    // preset to overflow on the 4th, and the buffer holds exactly those 4.
    for g in [Itanium, Itanium2] {
        let mut m = ready(g);
        m.write_pmc(12, btb_config(3, 3, 3)).unwrap();
        program(&mut m, 4, events::BRANCH_EVENT, 0, counter::OI);
        m.write_pmd(4, wrap(g) - 4).unwrap();
        for n in 0..4 {
            assert_eq!(m.branch(nth(n)), Capture::Captured);
        }
        assert_eq!(m.branch(nth(4)), Capture::Frozen, "{g:?}");
        assert_eq!(m.read_pmd(16), Ok(1 << 3), "{g:?}: full, index 0");
        for n in 0..4u64 {
            let b = nth(n);
            let src = source_entry(b.source, u64::from(b.slot), false);
            assert_eq!(m.read_pmd(8 + 2 * n as u32), Ok(src), "{g:?}");
        }
        assert_eq!(m.take_interrupt().map(|i| i.overflow), Some(1 << 4));
    }
}

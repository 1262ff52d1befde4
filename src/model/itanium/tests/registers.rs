//! The register file: which registers exist, power-up values, writable
//! bits, strict faults and hardware-mode behaviour, PMD sign extension,
//! user-level reads.

use super::helpers::*;
use crate::model::itanium::tables::Tables;

/// The implemented PMCs of Linux perfmon's tables (`perfmon_*.h`),
/// transcribed here independently of `tables::pmc_spec`.
fn implemented_pmcs(g: Generation) -> Vec<u32> {
    match g {
        Itanium => (0..=13).collect(),
        Itanium2 => (0..=15).collect(),
        Montecito => (0..=15).chain(32..=42).collect(),
    }
}

/// The implemented PMDs of Linux perfmon's tables.
fn implemented_pmds(g: Generation) -> Vec<u32> {
    match g {
        Itanium | Itanium2 => (0..=17).collect(),
        Montecito => (4..=15)
            .chain(32..=36)
            .chain(38..=39)
            .chain(48..=63)
            .collect(),
    }
}

#[test]
fn strict_faults_on_every_unimplemented_register() {
    for g in GENERATIONS {
        let mut m = ItaniumModel::new(g);
        let before = dump(&m);
        for n in 0..=255 {
            let pmc = implemented_pmcs(g).contains(&n);
            let pmd = implemented_pmds(g).contains(&n);
            let unimpl = |a| rrf(a, n, Violation::Unimplemented);
            assert_eq!(m.read_pmc(n).is_ok(), pmc, "{g:?} PMC{n}");
            assert_eq!(m.read_pmd(n).is_ok(), pmd, "{g:?} PMD{n}");
            if !pmc {
                assert_eq!(m.read_pmc(n).map(|_| ()), unimpl(AccessKind::ReadPmc));
                assert_eq!(m.write_pmc(n, 0), unimpl(AccessKind::WritePmc));
            }
            if !pmd {
                assert_eq!(m.read_pmd(n).map(|_| ()), unimpl(AccessKind::ReadPmd));
                assert_eq!(m.write_pmd(n, 0), unimpl(AccessKind::WritePmd));
                assert_eq!(m.read_pmd_user(n).map(|_| ()), unimpl(AccessKind::ReadPmd));
            }
        }
        assert_eq!(dump(&m), before, "{g:?}: faulting accesses changed nothing");
    }
}

#[test]
fn hardware_mode_reads_zero_and_drops_writes_on_unimplemented_registers() {
    // SDM Vol. 2 7.2: "Reading of an unimplemented PMC or PMD register
    // returns zero. Writes to unimplemented PMC or PMD registers are ignored."
    for g in GENERATIONS {
        let mut m = ItaniumModel::with_checking(g, Checking::Hardware);
        let before = dump(&m);
        for n in 0..=255 {
            if !implemented_pmcs(g).contains(&n) {
                assert_eq!(m.write_pmc(n, u64::MAX), Ok(()));
                assert_eq!(m.read_pmc(n), Ok(0));
            }
            if !implemented_pmds(g).contains(&n) {
                assert_eq!(m.write_pmd(n, u64::MAX), Ok(()));
                assert_eq!(m.read_pmd(n), Ok(0));
            }
        }
        assert_eq!(dump(&m), before, "{g:?}");
    }
}

#[test]
fn index_bits_above_seven_are_ignored_by_hardware_refused_by_strict() {
    // SDM Vol. 3 mov indirect: bits 7:0 of r3 are the index.
    let mut m = ItaniumModel::new(Itanium2);
    assert_eq!(
        m.write_pmd(0x104, 5),
        rrf(AccessKind::WritePmd, 0x104, Violation::IndexOutOfRange)
    );
    assert_eq!(
        m.read_pmc(0x300).map(|_| ()),
        rrf(AccessKind::ReadPmc, 0x300, Violation::IndexOutOfRange)
    );
    m.set_checking(Checking::Hardware);
    m.write_pmd(0x104, 5).unwrap();
    assert_eq!(m.read_pmd(4), Ok(5));
    assert_eq!(m.read_pmd(0xF04), Ok(5));
}

/// Linux perfmon's "default values" (its register descriptors), taken as the
/// power-up values; every other PMC and every PMD is zero.
fn power_up_pmcs(g: Generation) -> Vec<(u32, u64)> {
    match g {
        Itanium => vec![
            (0, 1),
            (8, 0xF000_0000_3FFF_FFF8),
            (9, 0xF000_0000_3FFF_FFF8),
            (11, 0x1000_0000),
            (13, 0x0003_FFFF_0000_0001),
        ],
        Itanium2 => vec![
            (0, 1),
            (4, 0x0080_0000),
            (8, 0xFFFF_FFFF_3FFF_FFFF),
            (9, 0xFFFF_FFFF_3FFF_FFFC),
            (13, 0x0000_2078_FEFE_FEFE),
            (14, 0x0DB6_0DB6_0DB6_0DB6),
            (15, 0xFFFF_FFF0),
        ],
        Montecito => {
            let mut v: Vec<_> = (4..=15).map(|n| (n, 0x0200_0000)).collect();
            v.extend([
                (32, 0x030F_01FF_FFFF_FFFF),
                (34, 0x000F_01FF_FFFF_FFFF),
                (36, 0xFFFF_FFF0),
                (38, 0xDB6),
                (40, 0x0200_0000),
                (41, 0x0000_2078_FEFE_FEFE),
            ]);
            v
        }
    }
}

#[test]
fn power_up_values() {
    for g in GENERATIONS {
        let mut m = ItaniumModel::new(g);
        let table = power_up_pmcs(g);
        for n in implemented_pmcs(g) {
            let expect = table.iter().find(|e| e.0 == n).map_or(0, |e| e.1);
            assert_eq!(m.read_pmc(n), Ok(expect), "{g:?} PMC{n}");
            // Writing the power-up value back is always legal.
            assert_eq!(m.write_pmc(n, expect), Ok(()), "{g:?} PMC{n}");
        }
        for n in implemented_pmds(g) {
            assert_eq!(m.read_pmd(n), Ok(0), "{g:?} PMD{n}");
        }
        assert_eq!(m.psr(), Psr::default());
        assert_eq!(m.frozen(), g != Montecito);
    }
}

#[test]
fn itanium_counter_pmc_fields() {
    // Itanium: es is 14:8 (bit 15 ig), threshold 22:20 on PMC4/5 but only
    // 21:20 on PMC6/7 (VTune), bits 7, 23 and 63:26 ignored.
    let mut m = ItaniumModel::new(Itanium);
    let full_45 = 0xF | counter::EV | counter::OI | counter::PM | (0x7F << 8) | (0xF << 16);
    assert_eq!(m.write_pmc(4, full_45 | (7 << 20) | (3 << 24)), Ok(()));
    assert_eq!(m.write_pmc(5, 7 << 20), Ok(()));
    assert_eq!(m.write_pmc(6, 3 << 20), Ok(()));
    assert_eq!(m.write_pmc(6, 4 << 20), pmc_fixed(6, 1 << 22));
    assert_eq!(m.write_pmc(7, 7 << 20), pmc_fixed(7, 1 << 22));
    assert_eq!(m.write_pmc(4, 0x80 << 8), pmc_fixed(4, 1 << 15));
    for bit in [7, 23, 26, 27, 32, 63] {
        assert_eq!(
            m.write_pmc(5, 1 << bit),
            pmc_fixed(5, 1 << bit),
            "bit {bit}"
        );
    }
    assert_eq!(m.read_pmc(6), Ok(3 << 20), "refused writes changed nothing");
    assert_eq!(m.read_pmc(7), Ok(0));
    // What the hardware does with them: ignore.
    m.set_checking(Checking::Hardware);
    m.write_pmc(6, (7 << 20) | (1 << 15) | (1 << 23) | (0x12 << 8))
        .unwrap();
    assert_eq!(m.read_pmc(6), Ok((3 << 20) | (0x12 << 8)));
}

#[test]
fn itanium2_counter_pmc_fields() {
    let mut m = ItaniumModel::new(Itanium2);
    // es is 8 bits; bit 23 is writable on every counter (PMC4: enable).
    assert_eq!(m.write_pmc(5, (0xC8 << 8) | (7 << 20) | (1 << 23)), Ok(()));
    assert_eq!(m.write_pmc(4, 0), Ok(()), "PMC4 without the enable bit");
    assert_eq!(m.write_pmc(6, 3 << 24), Ok(()), "ism 11b");
    // Bits 27:26 must be zero (libpfm); bit 7 and 63:28 are not writable.
    for bit in [26, 27] {
        assert_eq!(
            m.write_pmc(7, 1 << bit),
            rrf(
                AccessKind::WritePmc,
                7,
                Violation::MustBeZero { bits: 1 << bit }
            )
        );
    }
    for bit in [7, 28, 40, 63] {
        assert_eq!(
            m.write_pmc(7, 1 << bit),
            pmc_fixed(7, 1 << bit),
            "bit {bit}"
        );
    }
    // Hardware: 27:26 are kept (perfmon's mask passes them), 7 and 28 dropped.
    m.set_checking(Checking::Hardware);
    m.write_pmc(7, (3 << 26) | (1 << 7) | (1 << 28)).unwrap();
    assert_eq!(m.read_pmc(7), Ok(3 << 26));
}

#[test]
fn montecito_counter_pmc_fields() {
    let mut m = ItaniumModel::new(Montecito);
    // ism "must be 2": held at 10b; all (26) and MESI (30:27) are writable.
    let base = (0x12 << 8) | 0xF | (2 << 24);
    for c in 4..=15 {
        assert_eq!(m.write_pmc(c, base | (0x1F << 26)), Ok(()), "PMC{c}");
    }
    assert_eq!(m.write_pmc(8, base & !(3 << 24)), pmc_fixed(8, 1 << 25));
    assert_eq!(m.write_pmc(9, base | (1 << 24)), pmc_fixed(9, 1 << 24));
    assert_eq!(m.write_pmc(10, base | (1 << 23)), pmc_fixed(10, 1 << 23));
    assert_eq!(m.write_pmc(11, base | (1 << 31)), pmc_fixed(11, 1 << 31));
    m.set_checking(Checking::Hardware);
    m.write_pmc(12, 0x12 << 8).unwrap();
    assert_eq!(
        m.read_pmc(12),
        Ok((0x12 << 8) | (2 << 24)),
        "ism forced to 10b"
    );
}

#[test]
fn pmc0_fr_and_overflow_bits() {
    for g in GENERATIONS {
        let mut m = ItaniumModel::new(g);
        let top = g.last_counter();
        let overflow: u64 = (4..=top).map(|c| 1 << c).sum();
        assert_eq!(m.write_pmc(0, overflow | 1), Ok(()), "{g:?}");
        assert_eq!(m.read_pmc(0), Ok(overflow | 1));
        assert!(m.frozen());
        // Bits 3:1 ignored; overflow bits of counters that do not exist
        // "read as zero and writes are ignored".
        assert_eq!(m.write_pmc(0, 0b10), pmc_fixed(0, 0b10), "{g:?}");
        assert_eq!(
            m.write_pmc(0, 1 << (top + 1)),
            pmc_fixed(0, 1 << (top + 1)),
            "{g:?}"
        );
        // PMC1-3 (counters 64-255): nothing is writable.
        for n in 1..=3 {
            assert_eq!(m.write_pmc(n, 0), Ok(()));
            assert_eq!(m.write_pmc(n, 1 << 9), pmc_fixed(n, 1 << 9));
        }
        assert!(!m.interrupt_pending(), "software writes raise no interrupt");
    }
}

#[test]
fn counter_pmd_width_and_sign_extension() {
    // Itanium: 32 bits; reads copy bit 31 into 63:32.
    let mut m = ItaniumModel::new(Itanium);
    m.write_pmd(4, 0xFFFF_FFF0).unwrap();
    assert_eq!(m.read_pmd(4), Ok(0xFFFF_FFFF_FFFF_FFF0));
    assert_eq!(m.counter(4), 0xFFFF_FFF0);
    m.write_pmd(5, 0x7FFF_FFFF).unwrap();
    assert_eq!(m.read_pmd(5), Ok(0x7FFF_FFFF), "bit 31 clear: no extension");
    // A value read back (sign-extended) may be written again.
    assert_eq!(m.write_pmd(4, 0xFFFF_FFFF_FFFF_FFF0), Ok(()));
    // A 47-bit preset on a 32-bit counter is a driver bug.
    let itanium2_preset = (1u64 << 47) - 16;
    assert_eq!(
        m.write_pmd(6, itanium2_preset),
        rrf(
            AccessKind::WritePmd,
            6,
            Violation::FixedBits {
                bits: 0x7FFF_0000_0000
            }
        )
    );
    assert_eq!(
        m.write_pmd(6, 0xFFFF_FFFF_0000_0010),
        rrf(
            AccessKind::WritePmd,
            6,
            Violation::FixedBits {
                bits: 0xFFFF_FFFF_0000_0000
            }
        ),
        "upper ones with bit 31 clear are not a sign extension"
    );
    m.set_checking(Checking::Hardware);
    m.write_pmd(6, itanium2_preset).unwrap();
    assert_eq!(m.counter(6), 0xFFFF_FFF0, "bits 63:32 ignored");

    // Itanium 2 and Montecito: 47 bits.
    for g in [Itanium2, Montecito] {
        let mut m = ItaniumModel::new(g);
        m.write_pmd(4, itanium2_preset).unwrap();
        assert_eq!(m.read_pmd(4), Ok((-16i64) as u64), "{g:?}");
        assert_eq!(m.write_pmd(5, (-16i64) as u64), Ok(()));
        assert_eq!(m.counter(5), itanium2_preset);
        assert_eq!(
            m.write_pmd(5, 1 << 47),
            rrf(
                AccessKind::WritePmd,
                5,
                Violation::FixedBits { bits: 1 << 47 }
            )
        );
    }
}

#[test]
fn ear_and_btb_pmd_ignored_bits() {
    let fixed = |n, bits| rrf(AccessKind::WritePmd, n, Violation::FixedBits { bits });
    let mut m = ItaniumModel::new(Itanium);
    assert_eq!(m.write_pmd(0, 0x1C), fixed(0, 0x1C), "PMD0 ig 4:2");
    assert_eq!(m.write_pmd(1, 1 << 12), fixed(1, 1 << 12), "latency 11:0");
    assert_eq!(m.write_pmd(3, 1 << 12), fixed(3, 1 << 12), "ig 61:12");
    assert_eq!(m.write_pmd(3, 3 << 62), Ok(()), "level 63:62");
    assert_eq!(m.write_pmd(16, 1 << 4), fixed(16, 1 << 4));
    assert_eq!(m.write_pmd(17, 2), fixed(17, 2));
    assert_eq!(m.write_pmd(8, u64::MAX), Ok(()));

    let mut m = ItaniumModel::new(Itanium2);
    assert_eq!(m.write_pmd(1, 1 << 12), Ok(()), "latency overflow bit");
    assert_eq!(m.write_pmd(1, 1 << 13), fixed(1, 1 << 13));
    assert_eq!(m.write_pmd(3, 0xFFFF), Ok(()));
    assert_eq!(m.write_pmd(16, (0x3 << 4) | 0xF), Ok(()), "b1, bruflush");
    assert_eq!(m.write_pmd(16, 1 << 6), fixed(16, 1 << 6), "extension ig");
    assert_eq!(m.write_pmd(17, u64::MAX), Ok(()));

    let mut m = ItaniumModel::new(Montecito);
    assert_eq!(m.write_pmd(38, 0x2F), Ok(()));
    assert_eq!(m.write_pmd(38, 1 << 4), fixed(38, 1 << 4));
    assert_eq!(m.write_pmd(34, 0x1C), fixed(34, 0x1C));

    let mut m = ItaniumModel::with_checking(Itanium, Checking::Hardware);
    m.write_pmd(0, 0xABCD_EF1F).unwrap();
    assert_eq!(m.read_pmd(0), Ok(0xABCD_EF03), "ignored bits read as zero");
}

#[test]
fn undefined_ear_encodings_are_reserved_values() {
    let reserved = |n, field| rrf(AccessKind::WritePmc, n, Violation::ReservedValue { field });
    use ReservedField::*;
    let mut m = ItaniumModel::new(Itanium);
    // PMC10 cache mode: codes 0-0Ah and 0Fh; TLB mode: 4 and 8 only.
    for umask in 0..16u64 {
        let v = 0xF | (umask << 16);
        let ok = umask <= 0xA || umask == 0xF;
        let expect = if ok {
            Ok(())
        } else {
            reserved(10, IEarLatency)
        };
        assert_eq!(m.write_pmc(10, v), expect, "I-EAR cache umask {umask:#x}");
        let expect = if umask & 3 == 0 {
            Ok(())
        } else {
            reserved(10, IEarTlbUmask)
        };
        assert_eq!(
            m.write_pmc(10, v | (1 << 7)),
            expect,
            "I-EAR TLB {umask:#x}"
        );
        // PMC11 cache mode: 7 and 0Bh-0Eh undefined; TLB mode: bit 0.
        let ok = umask != 7 && (umask <= 0xA || umask == 0xF);
        let expect = if ok {
            Ok(())
        } else {
            reserved(11, DEarLatency)
        };
        assert_eq!(m.write_pmc(11, v), expect, "D-EAR cache umask {umask:#x}");
        let expect = if umask & 1 == 0 {
            Ok(())
        } else {
            reserved(11, DEarTlbUmask)
        };
        assert_eq!(
            m.write_pmc(11, v | (1 << 7)),
            expect,
            "D-EAR TLB {umask:#x}"
        );
    }

    for (g, iear, dear) in [(Itanium2, 10, 11), (Montecito, 37, 40)] {
        let mut m = ItaniumModel::new(g);
        let ism = if g == Montecito { 2 << 24 } else { 0 };
        // I-EAR cache mode (ct = 1x): libpfm3's list is defined, and only
        // it: 41h-7Fh are not "all misses" like 40h.
        for pattern in [0xFF, 0xFE, 0xFC, 0xF8, 0xF0, 0xE0, 0xC0, 0x80, 0x40, 0x00] {
            assert_eq!(m.write_pmc(iear, 0xF | (pattern << 5) | (1 << 13)), Ok(()));
        }
        for pattern in [0x81, 0xF1, 0x01, 0x3F, 0x41, 0x60, 0x7F] {
            assert_eq!(
                m.write_pmc(iear, 0xF | (pattern << 5) | (1 << 13)),
                reserved(iear, IEarLatency),
                "{g:?} {pattern:#x}"
            );
        }
        // I-EAR TLB mode (ct = 00): umask bits 11:8 select nothing.
        assert_eq!(m.write_pmc(iear, 0xF | (7 << 5)), Ok(()));
        assert_eq!(m.write_pmc(iear, 1 << 8), reserved(iear, IEarTlbUmask));
        // ct = 01: "nothing monitored", defined.
        assert_eq!(m.write_pmc(iear, 1 << 12), Ok(()));
        // D-EAR: mode 11b, cache umask > 0Ah, TLB umask bit 0.
        assert_eq!(m.write_pmc(dear, ism | (3 << 7)), reserved(dear, DEarMode));
        assert_eq!(m.write_pmc(dear, ism | (0xA << 16)), Ok(()));
        assert_eq!(
            m.write_pmc(dear, ism | (0xB << 16)),
            reserved(dear, DEarLatency)
        );
        assert_eq!(m.write_pmc(dear, ism | (1 << 7) | (0xE << 16)), Ok(()));
        assert_eq!(
            m.write_pmc(dear, ism | (1 << 7) | (1 << 16)),
            reserved(dear, DEarTlbUmask)
        );
        assert_eq!(
            m.write_pmc(dear, ism | (2 << 7) | (0xF << 16)),
            Ok(()),
            "ALAT"
        );
        // The hardware takes them (and the model then captures nothing).
        m.set_checking(Checking::Hardware);
        m.write_pmc(dear, ism | (3 << 7)).unwrap();
        assert_eq!(m.read_pmc(dear), Ok(ism | (3 << 7)));
    }
}

#[test]
fn ear_and_btb_pmc_layouts_differ_per_generation() {
    // Itanium 2 PMC10 is 16 bits (umask 12:5); Itanium's umask is at 19:16.
    let mut m = ItaniumModel::new(Itanium2);
    assert_eq!(m.write_pmc(10, 0x4 << 16), pmc_fixed(10, 0x4 << 16));
    // Itanium 2 PMC12 bits 5:4 are ignored; Itanium 2 PMC11 has no tlb bit
    // 7 alone but mode 8:7, and no pt bit 28.
    assert_eq!(m.write_pmc(12, 0x30), pmc_fixed(12, 0x30));
    assert_eq!(m.write_pmc(11, 1 << 28), pmc_fixed(11, 1 << 28));
    let mut m = ItaniumModel::new(Itanium);
    assert_eq!(m.write_pmc(11, 0), Ok(()), "pt is writable");
    assert_eq!(
        m.write_pmc(10, 1 << 4),
        pmc_fixed(10, 1 << 4),
        "pm is bit 6"
    );
    assert_eq!(m.write_pmc(12, 0xFFCF), Ok(()));
    // Montecito PMC37 has no ism (15:14 reserved); PMC40's ism is held at 10b.
    let mut m = ItaniumModel::new(Montecito);
    assert_eq!(m.write_pmc(37, 1 << 14), pmc_fixed(37, 1 << 14));
    assert_eq!(m.write_pmc(40, 0), pmc_fixed(40, 1 << 25));
}

#[test]
fn opcode_match_and_range_registers_keep_their_fixed_bits() {
    let mut m = ItaniumModel::new(Itanium2);
    // PMC8 bit 2 must be 1, bits 31:30 are not writable.
    assert_eq!(m.write_pmc(8, 0xFFFF_FFFF_3FFF_FFFB), pmc_fixed(8, 1 << 2));
    assert_eq!(m.write_pmc(9, 0xFFFF_FFFF_FFFF_FFFC), pmc_fixed(9, 3 << 30));
    assert_eq!(m.write_pmc(8, 0x1234_5678_0000_0004), Ok(()));
    // PMC14: only the ibrp and fine bits are writable.
    assert_eq!(m.write_pmc(14, 0x0DB6_0DB6_0DB6_0DB6 | 0x2492), Ok(()));
    assert_eq!(
        m.write_pmc(14, 0),
        pmc_fixed(14, 0x0DB6_0DB6_0DB6_0DB6 & !0x2492)
    );
    m.set_checking(Checking::Hardware);
    m.write_pmc(15, 0).unwrap();
    assert_eq!(m.read_pmc(15), Ok(0xFFFF_FFF0), "power-up bits preserved");
}

#[test]
fn user_level_pmd_reads() {
    for g in GENERATIONS {
        let mut m = ready(g);
        program(&mut m, 5, events::CPU_CYCLES, 0, 0);
        m.write_pmd(5, 1234).unwrap();
        assert_eq!(m.read_pmd_user(5), Ok(1234), "{g:?}: user monitor");
        m.set_psr(Psr {
            sp: true,
            ..Psr::MONITORING
        });
        assert_eq!(m.read_pmd_user(5), Ok(0), "{g:?}: PSR.sp");
        assert_eq!(m.read_pmd(5), Ok(1234), "{g:?}: CPL 0 unaffected");
        m.set_psr(Psr::MONITORING);
        program(&mut m, 5, events::CPU_CYCLES, 0, counter::PM);
        assert_eq!(m.read_pmd_user(5), Ok(0), "{g:?}: privileged monitor");
        // EAR data follows its PMC's pm bit (Itanium bit 6, later bit 4).
        let l = g.layout();
        m.write_pmd(l.iear_pmd_latency, 77).unwrap();
        assert_eq!(m.read_pmd_user(l.iear_pmd_latency), Ok(77));
        m.write_pmc(l.iear_pmc, 1 << l.iear_pm_bit).unwrap();
        assert_eq!(m.read_pmd_user(l.iear_pmd_latency), Ok(0), "{g:?}");
    }
}

#[test]
fn strict_refuses_exactly_the_writes_the_hardware_would_not_keep() {
    // For every implemented register and every single-bit change from its
    // current value: strict checking accepts the write iff the hardware
    // keeps the value as written, except for values the hardware keeps but
    // the sources forbid (must-be-zero bits, undefined EAR encodings).
    for g in GENERATIONS {
        let strict = ItaniumModel::new(g);
        for n in implemented_pmcs(g) {
            let base = strict.pmc(n);
            for bit in 0..64 {
                let v = base ^ (1 << bit);
                let mut s = strict.clone();
                let mut h = strict.clone();
                h.set_checking(Checking::Hardware);
                h.write_pmc(n, v).unwrap();
                let kept = h.read_pmc(n) == Ok(v);
                match s.write_pmc(n, v) {
                    Ok(()) => {
                        assert!(kept, "{g:?} PMC{n} bit {bit}: accepted but not kept");
                        assert_eq!(s.read_pmc(n), Ok(v));
                    }
                    Err(f) => match f.violation() {
                        Some(Violation::FixedBits { bits }) => {
                            assert!(!kept, "{g:?} PMC{n} bit {bit}");
                            assert_eq!(bits, 1 << bit);
                        }
                        Some(Violation::MustBeZero { .. } | Violation::ReservedValue { .. }) => {
                            assert!(kept, "{g:?} PMC{n} bit {bit}: refused, yet kept");
                        }
                        other => panic!("{g:?} PMC{n} bit {bit}: {other:?}"),
                    },
                }
            }
        }
        for n in implemented_pmds(g) {
            for bit in 0..64 {
                let v = 1u64 << bit;
                let mut s = strict.clone();
                let mut h = strict.clone();
                h.set_checking(Checking::Hardware);
                h.write_pmd(n, v).unwrap();
                let kept = h.pmd(n) == v;
                assert_eq!(s.write_pmd(n, v).is_ok(), kept, "{g:?} PMD{n} bit {bit}");
            }
        }
    }
}

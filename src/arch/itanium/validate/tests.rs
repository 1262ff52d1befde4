//! Validation tests: one per illegal case, the two reserved-bit policies,
//! perfmon's forced bits and range effects, every typed value accepted,
//! and a fixed-seed fuzz run over every register of every generation.

use super::*;
use crate::arch::itanium::CounterPmc;
use crate::arch::itanium::btb::BtbConfig;
use crate::arch::itanium::ear::{LatencyFilter, TlbFills};
use crate::arch::itanium::{Counter, PmcKind};
use crate::arch::itanium::{Plm, Threshold, Umask};

const ITA: Generation = Generation::Itanium;
const ITA2: Generation = Generation::Itanium2;
const MONT: Generation = Generation::Montecito;

fn strict(g: Generation, pmc: u8, v: u64) -> Result<Accepted, PmcError> {
    validate(g, Policy::STRICT, pmc, v)
}

fn perfmon(g: Generation, pmc: u8, v: u64) -> Result<Accepted, PmcError> {
    validate(g, Policy::PERFMON, pmc, v)
}

/// A counter value: event `es`, unit mask `umask`, threshold `t`, all
/// privilege levels, on top of the counter's power-up value.
fn ctr(g: Generation, pmc: u8, es: u64, umask: u64, t: u64) -> u64 {
    g.pmc(pmc).unwrap().default | 0xF | es << 8 | umask << 16 | t << 20
}

#[test]
fn each_illegal_case_has_its_own_error() {
    let mut seen = Vec::new();
    let mut expect = |r: Result<Accepted, PmcError>, e: PmcError| {
        assert_eq!(r, Err(e));
        if !seen.contains(&core::mem::discriminant(&e)) {
            seen.push(core::mem::discriminant(&e));
        }
    };

    // Registers.
    expect(strict(ITA, 14, 0), PmcError::NotImplemented { pmc: 14 });
    expect(strict(ITA2, 16, 0), PmcError::NotImplemented { pmc: 16 });
    expect(strict(MONT, 20, 0), PmcError::NotImplemented { pmc: 20 });
    expect(perfmon(MONT, 255, 0), PmcError::NotImplemented { pmc: 255 });
    for g in Generation::ALL {
        for pmc in 0..4 {
            expect(perfmon(g, pmc, 0), PmcError::ControlRegister { pmc });
        }
    }

    // Reserved bits under the Reject policy.
    expect(
        strict(ITA, 4, ctr(ITA, 4, 0x12, 0, 0) | 1 << 7),
        PmcError::ReservedBits {
            pmc: 4,
            bits: 1 << 7,
        },
    );
    expect(
        strict(ITA2, 5, ctr(ITA2, 5, 0x12, 0, 0) | 1 << 23),
        PmcError::ReservedBits {
            pmc: 5,
            bits: 1 << 23,
        },
    );
    expect(
        strict(ITA2, 6, ctr(ITA2, 6, 0x12, 0, 0) | 1 << 26),
        PmcError::ReservedBits {
            pmc: 6,
            bits: 1 << 26,
        },
    );
    expect(
        strict(ITA2, 8, 0xFFFF_FFFF_3FFF_FFFB),
        PmcError::ReservedBits {
            pmc: 8,
            bits: 1 << 2,
        },
    );
    expect(
        strict(ITA2, 14, 0x0DB6_0DB6_0DB6_0DB6 ^ 1 << 5),
        PmcError::ReservedBits {
            pmc: 14,
            bits: 1 << 5,
        },
    );

    // Field widths: refused under both policies.
    for p in [Policy::STRICT, Policy::PERFMON] {
        for pmc in 4..8 {
            expect(
                validate(ITA, p, pmc, ctr(ITA, pmc, 0x80 | 0x12, 0, 0)),
                PmcError::EventCodeTooWide { pmc, code: 0x92 },
            );
        }
        for pmc in [6, 7] {
            // INST_DISPERSED has maximum increment 6 but counts on PMC4/5
            // only; ALAT_REPLACEMENT_ALL (38h/3) increments by 2.
            expect(
                validate(ITA, p, pmc, ctr(ITA, pmc, 0x38, 3, 4)),
                PmcError::ThresholdTooWide {
                    pmc,
                    threshold: 4,
                    bits: 2,
                },
            );
        }
        for (g, pmc) in [(ITA, 12), (ITA2, 12), (MONT, 39)] {
            for ism in 1..4u64 {
                expect(
                    validate(g, p, pmc, BtbConfig::capture_all(g).bits() | ism << 24),
                    PmcError::IsmNotApplicable { pmc },
                );
            }
        }
    }

    // Montecito's fixed ISM under the Reject policy.
    expect(
        strict(MONT, 9, ctr(MONT, 9, 0x12, 0, 0) & !(3 << 24)),
        PmcError::IsmFixed {
            pmc: 9,
            ism: Ism::Both,
        },
    );
    expect(
        strict(MONT, 40, 1 << 24),
        PmcError::IsmFixed {
            pmc: 40,
            ism: Ism::Ia32Only,
        },
    );

    // Privilege policy.
    let system = Policy {
        privilege: PrivilegePolicy::System,
        ..Policy::PERFMON
    };
    let per_task = Policy {
        privilege: PrivilegePolicy::PerTask,
        ..Policy::PERFMON
    };
    expect(
        validate(ITA2, system, 5, ctr(ITA2, 5, 0x12, 0, 0)),
        PmcError::PrivilegeMismatch { pmc: 5, pm: false },
    );
    assert!(validate(ITA2, system, 5, ctr(ITA2, 5, 0x12, 0, 0) | 1 << 6).is_ok());
    expect(
        validate(ITA2, per_task, 10, 1 << 4 | 0xF),
        PmcError::PrivilegeMismatch { pmc: 10, pm: true },
    );
    // Itanium's I-EAR has pm at bit 6; bit 4 is reserved there (replaced).
    expect(
        validate(ITA, per_task, 10, 1 << 6 | 0xF),
        PmcError::PrivilegeMismatch { pmc: 10, pm: true },
    );
    assert_eq!(
        validate(ITA, per_task, 10, 1 << 4 | 0xF).unwrap().replaced,
        1 << 4
    );
    // The power-up value passes any privilege policy (perfmon's rule).
    assert!(validate(ITA2, system, 12, 0).is_ok());

    // Events against the catalog.
    expect(
        strict(ITA, 4, ctr(ITA, 4, 0x13, 0, 0)),
        PmcError::UnknownEvent { pmc: 4, code: 0x13 },
    );
    expect(
        strict(ITA2, 7, ctr(ITA2, 7, 0x0A, 0, 0)),
        PmcError::UnknownEvent { pmc: 7, code: 0x0A },
    );
    // IA64_INST_RETIRED: PMC4/5 only on Itanium.
    expect(
        strict(ITA, 6, ctr(ITA, 6, 0x08, 0, 0)),
        PmcError::EventNotOnCounter {
            pmc: 6,
            code: 0x08,
            umask: 0,
            allowed: CounterSet(0x30),
        },
    );
    // L2_L3ACCESS_CANCEL_ANY: PMC4 only on Itanium 2; its IFETCH sibling
    // (unit mask Bh) counts anywhere.
    expect(
        strict(ITA2, 5, ctr(ITA2, 5, 0xB0, 0x9, 0)),
        PmcError::EventNotOnCounter {
            pmc: 5,
            code: 0xB0,
            umask: 0x9,
            allowed: CounterSet(0x10),
        },
    );
    assert!(strict(ITA2, 5, ctr(ITA2, 5, 0xB0, 0xB, 0)).is_ok());
    assert!(strict(ITA2, 4, ctr(ITA2, 4, 0xB0, 0x9, 0)).is_ok());
    // Thresholds at or above the maximum increment.
    expect(
        strict(ITA, 4, ctr(ITA, 4, 0x12, 0, 1)),
        PmcError::ThresholdNotBelowMaxIncrement {
            pmc: 4,
            code: 0x12,
            threshold: 1,
            max_increment: 1,
        },
    );
    expect(
        strict(ITA2, 6, ctr(ITA2, 6, 0x50, 0, 6)),
        PmcError::ThresholdNotBelowMaxIncrement {
            pmc: 6,
            code: 0x50,
            threshold: 6,
            max_increment: 6,
        },
    );
    assert!(strict(ITA2, 6, ctr(ITA2, 6, 0x50, 0, 5)).is_ok());
    assert!(strict(ITA, 5, ctr(ITA, 5, 0x30, 0, 5)).is_ok()); // NOPS_RETIRED, 6
    expect(
        strict(ITA, 7, ctr(ITA, 7, 0x38, 3, 2)),
        PmcError::ThresholdNotBelowMaxIncrement {
            pmc: 7,
            code: 0x38,
            threshold: 2,
            max_increment: 2,
        },
    );
    assert!(strict(ITA, 7, ctr(ITA, 7, 0x38, 3, 1)).is_ok());

    // EARs.
    expect(
        strict(ITA2, 11, 3 << 7 | 0xF),
        PmcError::UndefinedEarMode { pmc: 11, mode: 3 },
    );
    expect(
        strict(ITA, 10, 0xB << 16 | 0xF),
        PmcError::UndefinedEarUmask {
            pmc: 10,
            umask: 0xB,
        },
    );
    expect(
        strict(ITA, 11, 1 << 28 | 0x7 << 16 | 0xF),
        PmcError::UndefinedEarUmask {
            pmc: 11,
            umask: 0x7,
        },
    );
    expect(
        strict(ITA2, 10, 0x8 << 5 | 0xF),
        PmcError::UndefinedEarUmask {
            pmc: 10,
            umask: 0x8,
        },
    );
    expect(
        strict(ITA2, 11, 1 << 7 | 0x1 << 16 | 0xF),
        PmcError::UndefinedEarUmask {
            pmc: 11,
            umask: 0x1,
        },
    );
    expect(
        strict(MONT, 40, 0x0200_0000 | 0xC << 16 | 0xF),
        PmcError::UndefinedEarUmask {
            pmc: 40,
            umask: 0xC,
        },
    );
    expect(
        strict(ITA, 10, 1 << 7 | 0x2 << 16 | 0xF),
        PmcError::L2FillNotOnItanium { pmc: 10 },
    );
    expect(
        perfmon(ITA, 10, 1 << 7 | 0x6 << 16 | 0xF),
        PmcError::L2FillNotOnItanium { pmc: 10 },
    );
    assert!(strict(ITA, 10, 1 << 7 | 0xC << 16 | 0xF).is_ok());
    assert!(strict(ITA2, 10, 0x1 << 5 | 0xF).is_ok()); // Itanium 2 has L2 ITLB fills

    // The PMC8/13/14 combination, reached from each of the three registers.
    for (g, opc, dbr, ibr, ig_ad) in [(ITA2, 8, 13, 14, 0), (MONT, 32, 41, 38, 57)] {
        let opc_default = g.pmc(opc).unwrap().default;
        let dbr_default = g.pmc(dbr).unwrap().default;
        let ibr_default = g.pmc(ibr).unwrap().default;
        let honour = opc_default & !(1u64 << ig_ad);
        let no_pairs = dbr_default & !(0xF << 45);
        for constrain in [1u64 << 1, 1 << 4] {
            let constraining = ibr_default & !constrain;
            // Last write: PMC13 (41).
            let mut v = Validator::new(g, Policy::STRICT);
            assert!(v.write(ibr, constraining).is_ok());
            assert!(v.write(opc, honour).is_ok());
            expect(
                v.write(dbr, no_pairs),
                PmcError::InconsistentTagging { pmc: dbr },
            );
            // Last write: PMC14 (38).
            let mut v = Validator::new(g, Policy::STRICT);
            assert!(v.write(dbr, no_pairs).is_ok());
            assert!(v.write(opc, honour).is_ok());
            expect(
                v.write(ibr, constraining),
                PmcError::InconsistentTagging { pmc: ibr },
            );
            // Last write: PMC8 (32).
            let mut v = Validator::new(g, Policy::STRICT);
            assert!(v.write(dbr, no_pairs).is_ok());
            assert!(v.write(ibr, constraining).is_ok());
            expect(
                v.write(opc, honour),
                PmcError::InconsistentTagging { pmc: opc },
            );
            // A refused write is not remembered; any one condition missing
            // makes it legal.
            assert_eq!(
                v.tagging_state(),
                Some((opc_default, no_pairs, constraining))
            );
            assert!(v.check(opc, opc_default).is_ok());
            assert!(v.check(dbr, dbr_default).is_ok());
            assert!(v.check(ibr, ibr_default).is_ok());
            // Pairs 2 and 3 do not count.
            let mut v = Validator::new(g, Policy::STRICT);
            assert!(v.write(dbr, no_pairs).is_ok());
            assert!(v.write(opc, honour).is_ok());
            assert!(v.write(ibr, ibr_default & !(1 << 7 | 1 << 10)).is_ok());
        }
    }
    assert_eq!(Validator::new(ITA, Policy::STRICT).tagging_state(), None);

    // Fifteen variants, each reached.
    assert_eq!(seen.len(), 15);
}

/// Perfmon's order (`pfm_write_pmcs`, the reference's "PMC write path"
/// steps 2 -> 3 -> 4): the privilege rule is judged on the value as
/// written, before `oi` is forced and reserved bits are restored.
#[test]
fn privilege_is_judged_on_the_value_as_written() {
    let system = Policy {
        privilege: PrivilegePolicy::System,
        ..Policy::PERFMON
    };
    let per_task = Policy {
        privilege: PrivilegePolicy::PerTask,
        ..Policy::PERFMON
    };
    // Itanium 2 PMC4 = 80_0000h is its power-up value (pm = 0): no
    // privilege check, then oi forced: written as 80_0020h. Judged after
    // forcing (80_0020h differs from the power-up value, pm = 0) it was
    // refused.
    for p in [system, per_task, Policy::PERFMON] {
        assert_eq!(
            validate(ITA2, p, 4, 0x80_0000),
            Ok(Accepted {
                value: 0x80_0020,
                replaced: 0,
                forced: 0x20,
                range: RangeEffect::default(),
            })
        );
    }
    // The same value with oi already set is no longer the power-up value:
    // system-wide it needs pm = 1.
    assert_eq!(
        validate(ITA2, system, 4, 0x80_0020),
        Err(PmcError::PrivilegeMismatch { pmc: 4, pm: false })
    );
    // Itanium 2 PMC10 = 1_0000h differs from its power-up value (0) only in
    // reserved bit 16 (writable 15:0), pm (bit 4) = 0: refused system-wide,
    // although restoring the reserved bit gives the power-up value.
    assert_eq!(
        validate(ITA2, system, 10, 0x1_0000),
        Err(PmcError::PrivilegeMismatch { pmc: 10, pm: false })
    );
    // Per task (pm = 0 wanted) it passes, the bit restored.
    assert_eq!(
        validate(ITA2, per_task, 10, 0x1_0000),
        Ok(Accepted {
            value: 0,
            replaced: 0x1_0000,
            forced: 0,
            range: RangeEffect::default(),
        })
    );
    // pm is read from the value as written too: Itanium 2 PMC5 with pm = 1
    // and a reserved bit (23 on PMC5) passes system-wide, the bit restored
    // and oi forced.
    let raw = ctr(ITA2, 5, 0x12, 0, 0) | 1 << 6 | 1 << 23;
    assert_eq!(
        validate(ITA2, system, 5, raw),
        Ok(Accepted {
            value: ctr(ITA2, 5, 0x12, 0, 0) | 1 << 6 | 1 << 5,
            replaced: 1 << 23,
            forced: 1 << 5,
            range: RangeEffect::default(),
        })
    );
    // Under the strict policy nothing is forced or restored: the privilege
    // rule still comes first.
    let strict_system = Policy {
        privilege: PrivilegePolicy::System,
        ..Policy::STRICT
    };
    assert_eq!(
        validate(ITA2, strict_system, 10, 0x1_0000),
        Err(PmcError::PrivilegeMismatch { pmc: 10, pm: false })
    );
    assert_eq!(
        validate(ITA2, strict_system, 10, 0x1_0010),
        Err(PmcError::ReservedBits {
            pmc: 10,
            bits: 0x1_0000
        })
    );
}

#[test]
fn errors_display_distinct_messages() {
    let all = [
        PmcError::NotImplemented { pmc: 1 },
        PmcError::ControlRegister { pmc: 1 },
        PmcError::ReservedBits { pmc: 1, bits: 2 },
        PmcError::EventCodeTooWide { pmc: 1, code: 2 },
        PmcError::ThresholdTooWide {
            pmc: 1,
            threshold: 2,
            bits: 2,
        },
        PmcError::IsmNotApplicable { pmc: 1 },
        PmcError::IsmFixed {
            pmc: 1,
            ism: Ism::Both,
        },
        PmcError::PrivilegeMismatch { pmc: 1, pm: true },
        PmcError::UnknownEvent { pmc: 1, code: 2 },
        PmcError::EventNotOnCounter {
            pmc: 1,
            code: 2,
            umask: 3,
            allowed: CounterSet(0x10),
        },
        PmcError::ThresholdNotBelowMaxIncrement {
            pmc: 1,
            code: 2,
            threshold: 3,
            max_increment: 3,
        },
        PmcError::UndefinedEarMode { pmc: 1, mode: 3 },
        PmcError::UndefinedEarUmask { pmc: 1, umask: 3 },
        PmcError::L2FillNotOnItanium { pmc: 1 },
        PmcError::InconsistentTagging { pmc: 1 },
    ];
    let msgs: Vec<String> = all.iter().map(|e| e.to_string()).collect();
    for (i, m) in msgs.iter().enumerate() {
        assert!(m.starts_with("PMC1"), "{m}");
        assert!(msgs[..i].iter().all(|o| o != m));
    }
}

#[test]
fn replace_policy_replaces_and_reports() {
    // Itanium counter: ignored bits 7, 23, 63:26 replaced by zeros.
    let raw = ctr(ITA, 5, 0x12, 0, 0) | 1 << 7 | 1 << 23 | 0xFFFF << 48;
    let a = perfmon(ITA, 5, raw).unwrap();
    assert_eq!(a.replaced, 1 << 7 | 1 << 23 | 0xFFFF << 48);
    assert_eq!(a.forced, 1 << 5);
    assert_eq!(a.value, ctr(ITA, 5, 0x12, 0, 0) | 1 << 5);
    // Itanium 2 PMC4: the enable bit and oi are forced on.
    let a = perfmon(ITA2, 4, ctr(ITA2, 4, 0x12, 0, 0) & !(1 << 23)).unwrap();
    assert_eq!(a.forced, 1 << 23 | 1 << 5);
    assert_eq!(a.value & (1 << 23 | 1 << 5), 1 << 23 | 1 << 5);
    // ... but not on PMC5, where bit 23 is reserved.
    let a = perfmon(ITA2, 5, ctr(ITA2, 5, 0x12, 0, 0) | 1 << 23).unwrap();
    assert_eq!((a.replaced, a.forced), (1 << 23, 1 << 5));
    // Strict changes nothing; a clear PMC4 enable bit is accepted.
    let v = ctr(ITA2, 4, 0x12, 0, 0) & !(1 << 23);
    assert_eq!(
        strict(ITA2, 4, v),
        Ok(Accepted {
            value: v,
            replaced: 0,
            forced: 0,
            range: RangeEffect::default()
        })
    );
    // Montecito: the ISM is forced back to IA-64 only.
    let a = perfmon(MONT, 12, ctr(MONT, 12, 0x12, 0, 0) & !(3 << 24) | 1 << 24).unwrap();
    assert_eq!(a.replaced, 3 << 24);
    assert_eq!(a.value >> 24 & 3, 2);
    // Itanium 2 PMC8: bit 2 forced to 1.
    let a = perfmon(ITA2, 8, 0xFFFF_FFFF_3FFF_FFFB).unwrap();
    assert_eq!((a.value, a.replaced), (0xFFFF_FFFF_3FFF_FFFF, 1 << 2));
    // Replacing does not rescue a field the register cannot hold.
    assert!(perfmon(ITA, 6, ctr(ITA, 6, 0x12, 0, 4)).is_err());
}

#[test]
fn range_effects() {
    let none = RangeEffect::default();
    // Itanium PMC13 ta = 0: IBRs; PMC11 pt = 0: DBRs.
    let ta0 = 0x0003_FFFF_0000_0000;
    assert_eq!(
        strict(ITA, 13, ta0).unwrap().range,
        RangeEffect {
            instruction: true,
            data: false
        }
    );
    assert_eq!(strict(ITA, 13, ta0 | 1).unwrap().range, none);
    assert_eq!(
        strict(ITA, 11, 0xF).unwrap().range,
        RangeEffect {
            instruction: false,
            data: true
        }
    );
    assert_eq!(strict(ITA, 11, 1 << 28 | 0xF).unwrap().range, none);
    // Itanium 2 PMC13 active: pair enabled and a cfg field not 11b.
    let d = 0x0000_2078_FEFE_FEFE & !(3 << 3);
    assert!(strict(ITA2, 13, d).unwrap().range.data);
    assert_eq!(strict(ITA2, 13, 0x0000_2078_FEFE_FEFE).unwrap().range, none);
    // PMC14 / PMC38 active: a pair not ignored.
    assert!(
        strict(ITA2, 14, 0x0DB6_0DB6_0DB6_0DB6 & !(1 << 7))
            .unwrap()
            .range
            .instruction
    );
    assert!(
        strict(MONT, 38, 0xDB6 & !(1 << 10))
            .unwrap()
            .range
            .instruction
    );
    assert_eq!(strict(MONT, 38, 0xDB6).unwrap().range, none);
    assert!(strict(MONT, 41, d).unwrap().range.data);
}

#[test]
fn every_typed_value_is_accepted() {
    // Power-up values of every configurable register.
    for g in Generation::ALL {
        for pmc in g.implemented_pmcs() {
            let info = g.pmc(pmc).unwrap();
            if info.kind == PmcKind::Overflow {
                continue;
            }
            let r = strict(g, pmc, info.default);
            if info.kind == PmcKind::Counter && g == MONT {
                assert!(r.is_ok());
            }
            assert!(r.is_ok(), "{g:?} PMC{pmc}: {r:?}");
        }
    }
    // Every catalog event on every counter it allows, at every threshold
    // the counter and the event allow.
    for g in [ITA, ITA2] {
        for e in crate::arch::itanium::events::catalog(g) {
            for n in e.counters {
                let c = Counter::new(g, n).unwrap();
                let base = CounterPmc::for_event(c, e).unwrap().with_plm(Plm::ALL);
                for t in 0..e.max_increment.min(1 << c.threshold_bits()) {
                    let cfg = base.with_threshold(Threshold::new(c, t).unwrap()).unwrap();
                    assert!(
                        strict(g, n, cfg.bits()).is_ok(),
                        "{} on PMC{n} t={t}",
                        e.name
                    );
                }
            }
        }
    }
    // EAR and BTB builders.
    for g in Generation::ALL {
        for f in LatencyFilter::ALL {
            if let Ok(c) = crate::arch::itanium::ear::IearConfig::cache_misses(g, f) {
                assert!(strict(g, g.iear_pmc(), c.with_plm(Plm::ALL).bits()).is_ok());
            }
            if let Ok(c) = crate::arch::itanium::ear::DearConfig::cache_misses(g, f) {
                assert!(strict(g, g.dear_pmc(), c.with_plm(Plm::ALL).bits()).is_ok());
            }
        }
        for bits in 0..8u8 {
            let fills = TlbFills {
                l2: bits & 1 != 0,
                hpw: bits & 2 != 0,
                software: bits & 4 != 0,
            };
            if let Ok(c) = crate::arch::itanium::ear::IearConfig::tlb_misses(g, fills) {
                assert!(strict(g, g.iear_pmc(), c.bits()).is_ok());
            } else {
                assert!(g == ITA && fills.l2);
            }
            let c = crate::arch::itanium::ear::DearConfig::tlb_misses(g, fills).unwrap();
            assert!(strict(g, g.dear_pmc(), c.bits()).is_ok());
        }
        if let Ok(c) = crate::arch::itanium::ear::DearConfig::alat_misses(g) {
            assert!(strict(g, g.dear_pmc(), c.bits()).is_ok());
        }
        assert!(
            strict(
                g,
                g.btb_pmc(),
                BtbConfig::capture_all(g).with_plm(Plm::ALL).bits()
            )
            .is_ok()
        );
    }
    // Montecito counters, against Montecito's catalog: IA64_INST_RETIRED
    // (08h, up to 6 per cycle) on PMC15 with threshold 5 is accepted;
    // threshold 7 never counts, L2D_VICTIMB_FULL_THIS (F3h) has no unit
    // mask Fh entry but its code counts on PMC4-15, and ER_MEM_READ_OUT_LO
    // (B5h) counts on PMC4-9 only.
    let c = Counter::new(MONT, 15).unwrap();
    let pmc = |code: u8, umask: u8, threshold: u8| {
        CounterPmc::new(c, crate::arch::itanium::EventCode::new(MONT, code).unwrap())
            .unwrap()
            .with_umask(Umask::new(umask).unwrap())
            .with_threshold(Threshold::new(c, threshold).unwrap())
            .unwrap()
            .bits()
    };
    assert!(strict(MONT, 15, pmc(0x08, 0, 5)).is_ok());
    assert!(matches!(
        strict(MONT, 15, pmc(0x08, 0, 7)),
        Err(PmcError::ThresholdNotBelowMaxIncrement {
            max_increment: 6,
            ..
        })
    ));
    assert!(strict(MONT, 15, pmc(0xF3, 0xF, 0)).is_ok());
    assert!(matches!(
        strict(MONT, 15, pmc(0xB5, 0, 0)),
        Err(PmcError::EventNotOnCounter {
            pmc: 15,
            code: 0xB5,
            ..
        })
    ));
    assert!(matches!(
        strict(MONT, 15, pmc(0xF4, 0, 0)),
        Err(PmcError::UnknownEvent { code: 0xF4, .. })
    ));
}

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// 200,000 random values per register and generation (a tenth without
/// `PMU_FUZZ=full`: [`crate::testing::fuzz_cases`]): no panic, and
/// the result agrees with the policy.
fn fuzz(g: Generation, seed: u64) {
    let per_register = crate::testing::fuzz_cases(200_000);
    let mut rng = XorShift(seed);
    let mut perfmon_v = Validator::new(g, Policy::PERFMON);
    let mut strict_v = Validator::new(g, Policy::STRICT);
    let mut accepted = 0u64;
    for pmc in 0..=255u8 {
        let info = g.pmc(pmc);
        let rounds = if info.is_some() { per_register } else { 1000 };
        for round in 0..rounds {
            let raw = rng.next();
            // Half the values keep the reserved bits at their power-up
            // values so the deeper checks run too.
            let value = match info {
                Some(i) if round & 1 == 1 => i.merge(raw),
                _ => raw,
            };
            let p = perfmon_v.write(pmc, value);
            let s = strict_v.write(pmc, value);
            match info {
                None => {
                    assert_eq!(p, Err(PmcError::NotImplemented { pmc }));
                    assert_eq!(s, Err(PmcError::NotImplemented { pmc }));
                }
                Some(i) => {
                    if let Ok(a) = p {
                        accepted += 1;
                        assert_eq!(i.reserved_bits(a.value), 0);
                        assert_eq!(a.value ^ a.forced, i.merge(value));
                        assert_eq!(a.replaced, value ^ i.merge(value));
                    }
                    if let Ok(a) = s {
                        assert_eq!(i.reserved_bits(value), 0);
                        assert_eq!((a.value, a.replaced, a.forced), (value, 0, 0));
                    }
                    if i.kind == PmcKind::Overflow {
                        assert_eq!(p, Err(PmcError::ControlRegister { pmc }));
                    }
                    if round % 65_536 == 0
                        && let Err(e) = s
                    {
                        assert!(!e.to_string().is_empty());
                    }
                }
            }
        }
    }
    assert!(accepted > 0);
}

#[test]
fn fuzz_itanium() {
    fuzz(ITA, 0x9E37_79B9_7F4A_7C15);
}

#[test]
fn fuzz_itanium2() {
    fuzz(ITA2, 0xD1B5_4A32_D192_ED03);
}

#[test]
fn fuzz_montecito() {
    fuzz(MONT, 0xA076_1D64_78BD_642F);
}

/// The model's generation for the arch layer's (the model is written
/// independently and has its own type).
fn model_generation(g: Generation) -> crate::model::itanium::Generation {
    match g {
        Generation::Itanium => crate::model::itanium::Generation::Itanium,
        Generation::Itanium2 => crate::model::itanium::Generation::Itanium2,
        Generation::Montecito => crate::model::itanium::Generation::Montecito,
    }
}

/// A field of a register layout: lowest bit, width.
#[derive(Clone, Copy, Debug)]
struct F(u32, u32);

impl F {
    const fn mask(self) -> u64 {
        (u64::MAX >> (64 - self.1)) << self.0
    }
}

/// Fields at most this wide in all (per group) are enumerated jointly;
/// wider ones (opcode masks and match values, 27 or 41 bits) are sampled.
const JOINT_BITS: u32 = 16;

/// The fields of PMC `pmc` on `g`, in groups enumerated jointly. This
/// test's own table, from libpfm3's register layouts (`pfmlib_itanium.h`,
/// `pfmlib_itanium2.h`, `pfmlib_montecito.h`; the reference notes'
/// sections 3-7), not from the validator's writable masks: bits in no field
/// are the layout's reserved (`ig`) bits. Where the sources disagree on a
/// field's extent the table takes the widest (Itanium PMC6/7 threshold
/// 22:20 as libpfm3, not VTune's 21:20; the Itanium 2 enable bit 23 on
/// every counter, as libpfm3's struct has it), so the disputed bits are
/// enumerated, not only sampled.
fn layout(g: Generation, pmc: u8) -> std::vec::Vec<std::vec::Vec<F>> {
    use std::vec;
    let (plm, ev, oi, pm6) = (F(0, 4), F(4, 1), F(5, 1), F(6, 1));
    let counter_event = |es_bits| vec![F(8, es_bits), F(16, 4), F(20, 3)];
    // Itanium 2 and Montecito BTB/ETB: plm, pm 6, ds 7, tm, ptm, ppm, brt.
    let btb2 = vec![vec![
        plm,
        pm6,
        F(7, 1),
        F(8, 2),
        F(10, 2),
        F(12, 2),
        F(14, 2),
    ]];
    // D-EAR: plm, pm 6, mode 8:7, umask 19:16, ism 25:24.
    let dear2 = vec![vec![plm, pm6, F(7, 2), F(16, 4), F(24, 2)]];
    // DBR configuration: cfg_dbrp0-3, ena_dbrp0-3.
    let dbr = vec![vec![F(3, 2), F(11, 2), F(19, 2), F(27, 2), F(45, 4)]];
    // IBR configuration: ibrp0-3, fine.
    let ibr = vec![vec![F(1, 1), F(4, 1), F(7, 1), F(10, 1), F(13, 1)]];
    match (g, pmc) {
        (_, 1..=3) => vec![],
        (ITA | ITA2, 0) => vec![vec![F(0, 1), F(4, 4)]],
        (MONT, 0) => vec![vec![F(0, 1), F(4, 12)]],
        (ITA, 4..=7) => vec![counter_event(7), vec![plm, ev, oi, pm6, F(24, 2)]],
        (ITA2, 4..=7) => vec![counter_event(8), vec![plm, ev, oi, pm6, F(23, 1), F(24, 2)]],
        (MONT, 4..=15) => vec![
            counter_event(8),
            vec![plm, ev, oi, pm6, F(24, 2), F(26, 1), F(27, 4)],
        ],
        // Itanium: mask 29:3, match 59:33, b/f/i/m 63:60.
        (ITA, 8 | 9) => vec![vec![F(60, 4)], vec![F(3, 27)], vec![F(33, 27)]],
        // Itanium 2: ig_ad 0, inv 1, mask 29:3, match 59:33, b/f/i/m.
        (ITA2, 8 | 9) => vec![
            vec![F(0, 1), F(1, 1), F(60, 4)],
            vec![F(3, 27)],
            vec![F(33, 27)],
        ],
        // Itanium I-EAR: plm, pm 6, tlb 7, umask 19:16, ism 25:24; the
        // D-EAR also pt 28.
        (ITA, 10) => vec![vec![plm, pm6, F(7, 1), F(16, 4), F(24, 2)]],
        (ITA, 11) => vec![vec![plm, pm6, F(7, 1), F(16, 4), F(24, 2), F(28, 1)]],
        // Itanium BTB: plm, pm 6, tar 7, tm, ptm, ppm, bpt 14, bac 15.
        (ITA, 12) => vec![vec![
            plm,
            pm6,
            F(7, 1),
            F(8, 2),
            F(10, 2),
            F(12, 2),
            F(14, 1),
            F(15, 1),
        ]],
        (ITA, 13) => vec![vec![F(0, 1)]],
        // Itanium 2 I-EAR: plm, pm 4, umask 12:5 / ct 13:12, ism 15:14.
        (ITA2, 10) => vec![vec![plm, F(4, 1), F(5, 7), F(12, 2), F(14, 2)]],
        (ITA2, 11) | (MONT, 40) => dear2,
        (ITA2, 12) | (MONT, 39) => btb2,
        (ITA2, 13) | (MONT, 41) => dbr,
        (ITA2, 14) | (MONT, 38) => ibr,
        (ITA2, 15) | (MONT, 36) => vec![vec![F(0, 4)]],
        // Montecito opcode matchers: mask 40:0, b/f/i/m 51:48, inv 56,
        // ig_ad 57; match values 40:0.
        (MONT, 32 | 34) => vec![vec![F(48, 4), F(56, 1), F(57, 1)], vec![F(0, 41)]],
        (MONT, 33 | 35) => vec![vec![F(0, 41)]],
        // Montecito I-EAR: as Itanium 2's without ism.
        (MONT, 37) => vec![vec![plm, F(4, 1), F(5, 7), F(12, 2)]],
        // IP-EAR: plm, pm 6, mode 10:8, delay 18:11.
        (MONT, 42) => vec![vec![plm, pm6, F(8, 3), F(11, 8)]],
        _ => panic!("{g:?} PMC{pmc} has no layout in this table"),
    }
}

/// Whether a validator refusal is about the register's layout (a bit or a
/// field value the register cannot hold), which the strict model judges
/// too, rather than the catalog or perfmon's policy, of which the model
/// knows nothing.
fn layout_refusal(e: PmcError) -> bool {
    match e {
        PmcError::ReservedBits { .. }
        | PmcError::IsmFixed { .. }
        | PmcError::EventCodeTooWide { .. }
        | PmcError::ThresholdTooWide { .. }
        | PmcError::IsmNotApplicable { .. }
        | PmcError::UndefinedEarMode { .. }
        | PmcError::UndefinedEarUmask { .. }
        | PmcError::L2FillNotOnItanium { .. } => true,
        PmcError::NotImplemented { .. }
        | PmcError::ControlRegister { .. }
        | PmcError::PrivilegeMismatch { .. }
        | PmcError::UnknownEvent { .. }
        | PmcError::EventNotOnCounter { .. }
        | PmcError::ThresholdNotBelowMaxIncrement { .. }
        | PmcError::InconsistentTagging { .. } => false,
    }
}

/// Where the strict model is deliberately more lenient than the validator:
/// bits the validator treats as reserved but the model stores (their
/// power-up value is not what matters to the hardware). Each is recorded in
/// both module docs: Itanium PMC13 bits 49:32 (perfmon's power-up value
/// sets them; libpfm3's layout has only `ta`), Itanium 2 PMC5-7 bit 23 (the
/// enable bit, PMC4-only per libpfm3, written on every counter by oprofile
/// and the perf_events port).
fn lenient_model_bits(g: Generation, pmc: u8) -> u64 {
    match (g, pmc) {
        (ITA, 13) => 0x0003_FFFF_0000_0000,
        (ITA2, 5..=7) => 1 << 23,
        _ => 0,
    }
}

/// The validator and the strict model agree on every implemented
/// PMC of all three generations, PMC0-3 and Itanium 2 PMC12 included:
///
/// * every value the STRICT validator accepts, the model accepts and holds
///   exactly;
/// * every value the validator refuses for a catalog or policy reason
///   (unknown event, event not on this counter, threshold, PMC8/13/14
///   tagging) is one the model accepts, since those checks run only on
///   values whose layout passed;
/// * every value the validator refuses for its layout, the model refuses
///   too, except the bits of [`lenient_model_bits`] (asserted to be
///   exactly those, each seen).
///
/// Values: every combination of each field group of the register's layout
/// ([`layout`], up to 2^16 per group; the groups of a register cycle
/// against each other so that each group meets many values of the others),
/// wide address fields sampled (zero, all ones, each single bit, random),
/// each with its reserved bits at the power-up value and again perturbed
/// (each reserved bit flipped in turn, or a random pattern). Validator and
/// model see the same writes, so PMC8/13/14's interdependence is checked
/// against the same state.
#[test]
fn the_validator_and_the_strict_model_agree_on_every_pmc() {
    for (g, seed) in [
        (ITA, 0x2545_F491_4F6C_DD1D),
        (ITA2, 0x9E37_79B9_7F4A_7C15),
        (MONT, 0xD1B5_4A32_D192_ED03),
    ] {
        let mut rng = XorShift(seed);
        let mut v = Validator::new(g, Policy::STRICT);
        let mut m = crate::model::itanium::ItaniumModel::new(model_generation(g));
        let (mut accepted, mut catalog, mut both_refuse) = (0u64, 0u64, 0u64);
        let mut wrong = std::vec::Vec::new();
        for pmc in g.implemented_pmcs().iter() {
            let default = g.pmc(pmc).unwrap().default;
            let groups = layout(g, pmc);
            let fields: u64 = groups.iter().flatten().fold(0, |a, f| a | f.mask());
            let reserved = !fields;
            let reserved_bits: std::vec::Vec<u32> =
                (0..64).filter(|b| reserved & (1 << b) != 0).collect();
            let joint: std::vec::Vec<u32> = groups
                .iter()
                .map(|grp| grp.iter().map(|f| f.1).sum())
                .collect();
            let rounds = joint
                .iter()
                .filter(|&&b| b <= JOINT_BITS)
                .map(|&b| 1u64 << b)
                .max()
                .unwrap_or(1)
                .max(4096);
            let mut lenient_seen = 0u64;
            for r in 0..rounds {
                let mut value = default & reserved;
                for (j, grp) in groups.iter().enumerate() {
                    let bits = joint[j];
                    let x = if bits <= JOINT_BITS {
                        // Every value once per block of 2^bits rounds, in a
                        // different order and pairing each block.
                        let size = 1u64 << bits;
                        let block = (r / size).wrapping_add(j as u64);
                        let order = (r % size).wrapping_mul(0x9E37_79B9 | 1) % size;
                        let pairing =
                            (block.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) & (size - 1);
                        order ^ pairing
                    } else {
                        match r % 4 {
                            0 => 0,
                            1 => u64::MAX,
                            2 => 1 << ((r / 4) % u64::from(bits)),
                            _ => rng.next(),
                        }
                    };
                    // Spread x over the group's fields, lowest field first.
                    let mut rest = x;
                    for f in grp {
                        value |= (rest << f.0) & f.mask();
                        rest >>= f.1;
                    }
                }
                let perturbed = if reserved_bits.is_empty() {
                    value ^ (rng.next() & !reserved)
                } else if r % 2 == 0 {
                    value ^ 1 << reserved_bits[(r / 2) as usize % reserved_bits.len()]
                } else {
                    value ^ (rng.next() & reserved)
                };
                for value in [value, perturbed] {
                    let model = m.write_pmc(u32::from(pmc), value);
                    match v.write(pmc, value) {
                        Ok(a) => {
                            accepted += 1;
                            assert_eq!(a.value, value);
                            match model {
                                Ok(()) if m.read_pmc(u32::from(pmc)) == Ok(value) => {}
                                other => wrong.push(std::format!(
                                    "{g:?} PMC{pmc} {value:#x}: accepted; model {other:?}, holds {:?}",
                                    m.read_pmc(u32::from(pmc))
                                )),
                            }
                        }
                        Err(e) if layout_refusal(e) => match (e, model) {
                            (_, Err(_)) => both_refuse += 1,
                            (PmcError::ReservedBits { bits, .. }, Ok(()))
                                if bits & !lenient_model_bits(g, pmc) == 0 =>
                            {
                                lenient_seen |= bits;
                            }
                            (e, Ok(())) => wrong.push(std::format!(
                                "{g:?} PMC{pmc} {value:#x}: validator {e:?}, model accepts"
                            )),
                        },
                        Err(PmcError::ControlRegister { .. }) => {}
                        Err(e) => {
                            catalog += 1;
                            if let Err(f) = model {
                                wrong.push(std::format!(
                                    "{g:?} PMC{pmc} {value:#x}: validator {e:?}, model {f:?}"
                                ));
                            }
                        }
                    }
                }
            }
            assert_eq!(
                lenient_seen,
                lenient_model_bits(g, pmc),
                "{g:?} PMC{pmc}: the model's lenient bits"
            );
        }
        assert!(
            wrong.is_empty(),
            "{} disagreements, e.g. {:#?}",
            wrong.len(),
            &wrong[..wrong.len().min(8)]
        );
        assert!(accepted > 40_000, "{g:?}: {accepted} accepted");
        assert!(catalog > 40_000, "{g:?}: {catalog} catalog refusals");
        std::println!(
            "{g:?}: {accepted} accepted by both; {both_refuse} refused by both (layout); \
             {catalog} refused by the validator's catalog or tagging checks, accepted by the model"
        );
    }
}

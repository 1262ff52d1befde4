//! The last branch records on the architectural PMU against the model,
//! which records the branches the test retires one at a time from its own
//! tables (Nehalem's format 3, Haswell's 4, Skylake's 5, architectural
//! LBR): exact register traffic per operation, the records of each format
//! decoded against the branches that retired, call stacks against the
//! calls really open (randomized), the refusals (with no register access),
//! the freeze on PMI and its undoing, and the task-switch hook. All counts
//! here come from the model.

use super::*;
use crate::arch::archperf::{
    BranchFilter, BranchRecord, BranchStack, BranchType, IA32_DEBUGCTL, IA32_LBR_CTL,
    IA32_LBR_DEPTH, LbrOptions, MSR_LASTBRANCH_0_FROM_IP, MSR_LBR_SELECT,
};
use crate::model::archperf::{Branch, BranchKind, Retirement};
use crate::sampling::{CallChain, ChainEnd};

const BRANCHES: (u8, u8) = (0xC4, 0x00);
/// Kernel-half addresses: the formats' sign extension matters.
const CODE: u64 = 0xFFFF_8000_0010_0000;

fn kernel() -> BranchFilter {
    BranchFilter::from_bits(0).with_kernel(true)
}

fn retired(ip: u64, next_ip: u64, kind: Option<BranchKind>) -> Retirement {
    Retirement {
        branch: kind.map(|kind| Branch { kind, taken: true }),
        ..Retirement::at(ip, next_ip)
    }
}

/// Retires `r`; a PMI it raises goes through the handler at its next
/// instruction, the samples to `out`.
fn step<O: Owner>(d: &mut Ap<'_, O>, r: &Retirement, out: &mut Vec<Sample<Capture>>) -> bool {
    if !(model(d).retire(r) && model(d).take_pmi()) {
        return false;
    }
    let pmu = d.physical();
    handle_pmi(pmu, d.msr(), &mut Lvt::default(), entry(), r.next_ip, |s| {
        out.push(s)
    })
    .unwrap();
    true
}

/// A sampling configuration of `branches` every `n`, carrying the records.
fn sampling_branches<O: Owner>(d: &Ap<'_, O>, n: u64) -> CounterConfig {
    let every = SampleAfter::new(n, d.overflow_rule()).unwrap();
    CounterConfig::counting(EventSpec::raw(BRANCHES.0, BRANCHES.1))
        .sampling(every)
        .with_branches()
}

fn stack(s: &Sample<Capture>) -> BranchStack {
    *s.payload.branches().expect("a sample with branch records")
}

/// Skylake (record format 5, 32 records, version 4): enable zeroes the 96
/// record MSRs, writes `MSR_LBR_SELECT` and `IA32_DEBUGCTL` (LBR and
/// FREEZE_LBRS_ON_PMI) after reading it once; a counter carrying the
/// records configures and starts as any sampling counter; its PMI reads
/// the TOS and 3 MSRs per open call plus the empty FROM that ends them,
/// and acknowledges LBR_Frz with the counter's bit (no RDPMC more); the
/// disable writes `IA32_DEBUGCTL` back.
#[test]
fn call_stack_traffic_is_exact_on_skylake() {
    let pmu = crate::testing::archperf_pmu();
    let (mut d, c) = driver!(&pmu, Config::skylake());
    d.enable_lbr(LbrOptions::call_stack(kernel())).unwrap();
    assert_eq!(d.msr().counts(), counts(1, 32 * 3 + 2, 0));
    let log = d.msr().log();
    assert_eq!(
        log[log.len() - 2..],
        [
            Access::WriteMsr {
                msr: MSR_LBR_SELECT,
                value: 1 << 1 | 1 << 2 | 1 << 6 | 1 << 7 | 1 << 8 | 1 << 9
            },
            Access::WriteMsr {
                msr: IA32_DEBUGCTL,
                value: 1 | 1 << 11
            }
        ]
    );
    d.msr().clear();
    let cfg = sampling_branches(&d, 4);
    let g0 = c.g0.configure(&mut d, &cfg).unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 2, 0));
    let g0 = g0.enable(&mut d).unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 1, 0));
    // root calls a, a calls leaf, leaf loops: the 4th branch overflows.
    let mut out = Vec::new();
    let program = [
        retired(CODE, CODE + 0x100, Some(BranchKind::Call)),
        retired(CODE + 0x104, CODE + 0x200, Some(BranchKind::Call)),
        retired(CODE + 0x204, CODE + 0x200, Some(BranchKind::Conditional)),
        retired(CODE + 0x204, CODE + 0x208, Some(BranchKind::Conditional)),
    ];
    for (k, r) in program.iter().enumerate() {
        assert_eq!(step(&mut d, r, &mut out), k == 3, "branch {k}");
    }
    assert!(d.msr().log().contains(&Access::WriteMsr {
        msr: 0x390,
        value: 1 | 1 << 58
    }));
    assert_eq!(
        d.msr().take_counts(),
        counts(1 + 1 + 2 * 3 + 1, 2, 1),
        "status, TOS, 2 records and the empty one; re-arm, acknowledgement; RDPMC"
    );
    let s = stack(&out[0]);
    assert_eq!(
        (out[0].rip, s.len(), s.is_call_stack()),
        (CODE + 0x208, 2, true)
    );
    let chain: CallChain<8> = s.call_chain(out[0].rip);
    assert_eq!(chain.frames(), &[CODE + 0x208, CODE + 0x105, CODE + 1]);
    assert_eq!(chain.end(), ChainEnd::OldestRecorded);
    assert!(!model(&mut d).lbr_frozen(), "acknowledged: recording again");
    // The LBR stays while a counter carries it.
    assert_eq!(
        d.disable_lbr().unwrap_err(),
        Error::Config(ConfigError::LbrBusy)
    );
    assert_eq!(
        d.enable_lbr(LbrOptions::any(kernel())).unwrap_err(),
        Error::Config(ConfigError::LbrBusy)
    );
    let g0 = g0.halt(&mut d).unwrap().release(&mut d).unwrap();
    d.msr().clear();
    d.disable_lbr().unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 1, 0));
    assert_eq!(model(&mut d).debugctl(), 0);
    assert_eq!(
        d.disable_lbr().unwrap_err(),
        Error::Config(ConfigError::LbrOff)
    );
    let _ = d.give_back(Counters { g0, ..c });
}

/// Haswell (record format 4, version 3): the freeze clears DEBUGCTL.LBR,
/// so while the LBR runs every counter is serviced out of line and the
/// handler writes DEBUGCTL back (1 WRMSR), a counter without the records
/// too.
#[test]
fn the_legacy_freeze_is_undone_by_the_handler() {
    let pmu = crate::testing::archperf_pmu();
    let (mut d, c) = driver!(&pmu, Config::haswell());
    d.enable_lbr(LbrOptions::any(kernel())).unwrap();
    assert_eq!(
        d.msr().take_counts(),
        counts(1, 16 * 2 + 2, 0),
        "no LBR_INFO"
    );
    let every = SampleAfter::new(3, d.overflow_rule()).unwrap();
    let plain = CounterConfig::counting(EventSpec::raw(BRANCHES.0, BRANCHES.1)).sampling(every);
    let g1 =
        c.g1.configure(&mut d, &plain)
            .unwrap()
            .enable(&mut d)
            .unwrap();
    d.msr().clear();
    let mut out = Vec::new();
    for k in 0..3 {
        let r = retired(CODE + 16 * k, CODE + 16 * k + 8, Some(BranchKind::Jump));
        step(&mut d, &r, &mut out);
    }
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].payload, Capture::None, "g1 carries no records");
    assert_eq!(
        d.msr().take_counts(),
        counts(1, 3, 1),
        "status; re-arm, acknowledgement, DEBUGCTL"
    );
    assert_eq!(model(&mut d).debugctl(), 1 | 1 << 11, "recording again");
    let r = retired(CODE + 0x80, CODE + 0x90, Some(BranchKind::Jump));
    step(&mut d, &r, &mut out);
    assert_eq!(
        model(&mut d).lbr_records().next().map(|r| r.1),
        Some(CODE + 0x90)
    );
    let g1 = g1.halt(&mut d).unwrap().release(&mut d).unwrap();
    let _ = d.give_back(Counters { g1, ..c });
}

/// Architectural LBR (Alder Lake's, as the model has it): enable writes
/// the depth (which zeroes the records), DEBUGCTL's freeze, and
/// IA32_LBR_CTL; a PMI reads 3 MSRs per record from record 0.
#[test]
fn architectural_lbr_traffic_is_exact() {
    let pmu = crate::testing::archperf_pmu();
    let (mut d, c) = driver!(&pmu, Config::alder_lake_p_core());
    d.enable_lbr(LbrOptions::call_stack(kernel())).unwrap();
    assert_eq!(d.msr().counts(), counts(1, 3, 0));
    assert_eq!(
        d.msr().log()[1..],
        [
            Access::WriteMsr {
                msr: IA32_LBR_DEPTH,
                value: 32
            },
            Access::WriteMsr {
                msr: IA32_DEBUGCTL,
                value: 1 << 11
            },
            Access::WriteMsr {
                msr: IA32_LBR_CTL,
                value: 1 | 1 << 1 | 1 << 3 | 0b111 << 19
            },
        ]
    );
    let cfg = sampling_branches(&d, 2);
    let g0 = c.g0.configure(&mut d, &cfg).unwrap();
    let g0 = g0.enable(&mut d).unwrap();
    d.msr().clear();
    let mut out = Vec::new();
    step(
        &mut d,
        &retired(CODE, CODE + 0x40, Some(BranchKind::Call)),
        &mut out,
    );
    step(
        &mut d,
        &retired(CODE + 0x44, CODE + 0x48, Some(BranchKind::Conditional)),
        &mut out,
    );
    assert_eq!(d.msr().take_counts(), counts(1 + 3 + 1, 2, 1));
    let chain: CallChain<4> = stack(&out[0]).call_chain(out[0].rip);
    assert_eq!(chain.frames(), &[CODE + 0x48, CODE + 1]);
    let g0 = g0.halt(&mut d).unwrap().release(&mut d).unwrap();
    d.msr().clear();
    d.disable_lbr().unwrap();
    assert_eq!(
        d.msr().take_counts(),
        counts(0, 2, 0),
        "IA32_LBR_CTL, DEBUGCTL"
    );
    let _ = d.give_back(Counters { g0, ..c });
}

/// Every kind of branch the model records, through the driver's records
/// and back: each format's words decode to the branch that retired.
#[test]
fn each_format_decodes_to_the_branches_that_retired() {
    let kinds = [
        BranchKind::Conditional,
        BranchKind::Jump,
        BranchKind::IndirectJump,
        BranchKind::Call,
        BranchKind::IndirectCall,
        BranchKind::Return,
        BranchKind::Other,
    ];
    for (config, mispredicted, cycles, kind) in [
        (Config::nehalem(), Some(false), false, false),
        (Config::haswell(), Some(false), false, false),
        (Config::skylake(), Some(false), true, false),
        (Config::alder_lake_p_core(), Some(false), true, true),
    ] {
        let pmu = crate::testing::archperf_pmu();
        let (mut d, c) = driver!(&pmu, config);
        d.enable_lbr(LbrOptions::any(kernel())).unwrap();
        let cfg = sampling_branches(&d, 7);
        let g0 = c.g0.configure(&mut d, &cfg).unwrap();
        let g0 = g0.enable(&mut d).unwrap();
        let mut out = Vec::new();
        for (k, &kind) in kinds.iter().enumerate() {
            let ip = CODE + 0x100 * k as u64;
            // One plain instruction before each branch: 2 cycles apart.
            step(&mut d, &retired(ip - 4, ip, None), &mut out);
            step(&mut d, &retired(ip, ip + 0x40, Some(kind)), &mut out);
        }
        assert_eq!(out.len(), 1, "{config:?}");
        let s = stack(&out[0]);
        let got: Vec<BranchRecord> = s.iter().collect();
        let want: Vec<(u64, u64)> = (0..7u64)
            .rev()
            .map(|k| (CODE + 0x100 * k, CODE + 0x100 * k + 0x40))
            .collect();
        assert_eq!(
            got.iter().map(|b| (b.from, b.to)).collect::<Vec<_>>(),
            want,
            "{config:?}"
        );
        for (b, &k) in got.iter().zip(kinds.iter().rev()) {
            assert_eq!(b.mispredicted, mispredicted, "{config:?}");
            // The first record counts from the enable; the others 2 apart.
            if cycles && b.from != CODE {
                assert_eq!(b.cycles, Some(2), "{config:?}");
            } else if !cycles {
                assert_eq!(b.cycles, None, "{config:?}");
            }
            let expected = match k {
                BranchKind::Conditional => BranchType::Conditional,
                BranchKind::Jump => BranchType::NearRelativeJump,
                BranchKind::IndirectJump => BranchType::NearIndirectJump,
                BranchKind::Call => BranchType::NearRelativeCall,
                BranchKind::IndirectCall => BranchType::NearIndirectCall,
                BranchKind::Return => BranchType::NearReturn,
                BranchKind::Other => BranchType::Other(8),
            };
            assert_eq!(b.kind, kind.then_some(expected), "{config:?}");
        }
        let g0 = g0.halt(&mut d).unwrap().release(&mut d).unwrap();
        let _ = d.give_back(Counters { g0, ..c });
    }
}

/// Every refusal, with no register access.
#[test]
fn lbr_refusals_touch_no_register() {
    let refused = |config: Config, options: LbrOptions, why: ConfigError| {
        let pmu = crate::testing::archperf_pmu();
        let (mut d, c) = driver!(&pmu, config);
        assert_eq!(
            d.enable_lbr(options).unwrap_err(),
            Error::Config(why),
            "{config:?}"
        );
        assert_eq!(d.msr().take_counts(), counts(0, 0, 0), "{config:?}");
        let _ = d.give_back(c);
    };
    let call_stack = LbrOptions::call_stack(kernel());
    refused(Config::core2(), call_stack, ConfigError::LbrUnavailable);
    refused(Config::nehalem(), call_stack, ConfigError::NoCallStack);
    let nothing = LbrOptions {
        filter: BranchFilter::ANY,
        call_stack: false,
    };
    refused(Config::skylake(), nothing, ConfigError::LbrFilter);
    let no_kinds = LbrOptions {
        filter: kernel(),
        call_stack: false,
    };
    refused(Config::skylake(), no_kinds, ConfigError::LbrFilter);
    let jcc_stack = LbrOptions {
        filter: BranchFilter::ANY.kernel_only(),
        call_stack: true,
    };
    refused(Config::skylake(), jcc_stack, ConfigError::LbrFilter);

    let pmu = crate::testing::archperf_pmu();
    let (mut d, c) = driver!(&pmu, Config::skylake());
    let every = SampleAfter::new(10, d.overflow_rule()).unwrap();
    let spec = EventSpec::raw(BRANCHES.0, BRANCHES.1);
    let cases = [
        (
            CounterConfig::counting(spec)
                .sampling(every)
                .with_branches(),
            ConfigError::LbrOff,
        ),
        (
            CounterConfig::counting(spec).with_branches(),
            ConfigError::BranchesNeedSampling,
        ),
    ];
    let mut g0 = c.g0;
    for (config, why) in cases {
        let e = g0.configure(&mut d, &config).unwrap_err();
        assert_eq!(e.error, Error::Config(why));
        g0 = e.counter;
    }
    d.enable_lbr(LbrOptions::any(kernel())).unwrap();
    d.msr().clear();
    let precise = CounterConfig::counting(spec.with_precise(2))
        .sampling(every)
        .with_branches();
    let e = g0.configure(&mut d, &precise).unwrap_err();
    assert_eq!(e.error, Error::Config(ConfigError::BranchesWithPebs));
    let g0 = e.counter;
    assert_eq!(d.msr().take_counts(), counts(0, 0, 0));
    // Save and restore need the LBR on; a snapshot of another mode does
    // not restore.
    let snapshot = d.save_lbr().unwrap();
    d.enable_lbr(LbrOptions::call_stack(kernel())).unwrap();
    d.msr().clear();
    assert_eq!(
        d.restore_lbr(&snapshot).unwrap_err(),
        Error::Config(ConfigError::LbrSnapshotMismatch)
    );
    assert_eq!(d.msr().take_counts(), counts(0, 0, 0));
    d.disable_lbr().unwrap();
    assert_eq!(
        d.save_lbr().unwrap_err(),
        Error::Config(ConfigError::LbrOff)
    );
    assert_eq!(
        d.restore_lbr(&snapshot).unwrap_err(),
        Error::Config(ConfigError::LbrOff)
    );
    let _ = d.give_back(Counters { g0, ..c });
}

/// The task-switch hook: task A's call stack saved at switch-out, task B's
/// run (on zeroed records) and saved, A's restored: A's next call lands on
/// its own stack, and its returns unwind it. Legacy save: 1 WRMSR (stop),
/// the TOS and 3 per record up to the empty one; restore: every record, the
/// TOS, DEBUGCTL. Architectural: the depth, 3 per saved record, the control.
#[test]
fn a_task_switch_saves_and_restores_its_call_stack() {
    for (config, arch) in [
        (Config::skylake(), false),
        (Config::alder_lake_p_core(), true),
    ] {
        let pmu = crate::testing::archperf_pmu();
        let (mut d, c) = driver!(&pmu, config);
        d.enable_lbr(LbrOptions::call_stack(kernel())).unwrap();
        let empty = d.save_lbr().unwrap();
        d.restore_lbr(&empty).unwrap();
        let mut out = Vec::new();
        let call = |at: u64| retired(at, at + 0x1000, Some(BranchKind::Call));
        step(&mut d, &call(CODE), &mut out);
        step(&mut d, &call(CODE + 0x10), &mut out);
        d.msr().clear();
        let a = d.save_lbr().unwrap();
        // Two records and the empty one (legacy: and the TOS first).
        let reads = 2 * 3 + 1 + u32::from(!arch);
        assert_eq!(d.msr().take_counts(), counts(reads, 1, 0), "{config:?}");
        assert_eq!(
            a.stack().iter().map(|b| b.from).collect::<Vec<_>>(),
            [CODE + 0x10, CODE]
        );
        // Stopped: the switch code's branches are not recorded.
        step(&mut d, &call(CODE + 0x500), &mut out);
        d.restore_lbr(&empty).unwrap();
        step(&mut d, &call(CODE + 0x20), &mut out);
        let b = d.save_lbr().unwrap();
        assert_eq!(b.stack().len(), 1);
        d.msr().clear();
        d.restore_lbr(&a).unwrap();
        // Stopped first; then the depth (architectural) or every record.
        let restore = if arch {
            1 + 1 + 2 * 3 + 1
        } else {
            1 + 32 * 3 + 2
        };
        assert_eq!(d.msr().take_counts(), counts(0, restore, 0), "{config:?}");
        step(&mut d, &call(CODE + 0x30), &mut out);
        let open: Vec<u64> = model(&mut d).lbr_records().map(|r| r.0).collect();
        assert_eq!(open, [CODE + 0x30, CODE + 0x10, CODE], "{config:?}");
        let ret = retired(CODE + 0x2000, CODE + 0x35, Some(BranchKind::Return));
        step(&mut d, &ret, &mut out);
        step(&mut d, &ret, &mut out);
        let open: Vec<u64> = model(&mut d).lbr_records().map(|r| r.0).collect();
        assert_eq!(open, [CODE], "{config:?}");
        assert!(out.is_empty());
        let _ = d.give_back(c);
    }
}

/// Record format 4 on a part without TSX (the model reports none): the
/// restore writes FROM bits 62:61 as the sign extension.
#[test]
fn format_4_restores_with_the_sign_extension() {
    let pmu = crate::testing::archperf_pmu();
    let (mut d, c) = driver!(&pmu, Config::haswell());
    d.enable_lbr(LbrOptions::call_stack(kernel())).unwrap();
    model(&mut d).retire(&retired(CODE, CODE + 0x40, Some(BranchKind::Call)));
    let s = d.save_lbr().unwrap();
    assert_eq!(s.stack().words(0).unwrap().0, CODE & !(7 << 61));
    d.restore_lbr(&s).unwrap();
    let tos = s.tos();
    let from = model(&mut d)
        .read_msr(MSR_LASTBRANCH_0_FROM_IP + u32::from(tos))
        .unwrap();
    assert_eq!(from, CODE & !(1 << 63));
    let _ = d.give_back(c);
}

/// A driver dropped with the LBR on, a counter carrying it, stops it:
/// DEBUGCTL as found (here with BTF set before the take), IA32_LBR_CTL 0,
/// nothing left for the handler.
#[test]
fn a_dropped_driver_disables_the_lbr() {
    crate::owner!(DroppedLegacy);
    crate::owner!(DroppedArch);
    dropped::<DroppedLegacy>(Config::skylake());
    dropped::<DroppedArch>(Config::alder_lake_p_core());
}

fn dropped<O: Owner>(config: Config) {
    let pmu = crate::testing::archperf_pmu();
    let mut m = ArchPerfModel::new(config);
    m.write_msr(IA32_DEBUGCTL, 1 << 1).unwrap();
    let info = cpu(&m);
    let mut rec = Recording::<_, 256>::new(m);
    let (mut d, c) = ArchPerfDriver::<O, _>::take(&mut rec, &info, &pmu).unwrap();
    d.enable_lbr(LbrOptions::call_stack(kernel())).unwrap();
    let every = SampleAfter::new(9, d.overflow_rule()).unwrap();
    let cfg = CounterConfig::counting(EventSpec::raw(BRANCHES.0, BRANCHES.1))
        .sampling(every)
        .with_branches();
    let g0 =
        c.g0.configure(&mut d, &cfg)
            .unwrap()
            .enable(&mut d)
            .unwrap();
    drop(d);
    let m = rec.inner_mut();
    assert_eq!(m.read_msr(IA32_DEBUGCTL).unwrap(), 1 << 1, "{config:?}");
    if let Ok(ctl) = m.read_msr(IA32_LBR_CTL) {
        assert_eq!(ctl, 0);
    }
    assert!(pmu.pmi().armed().is_empty());
    assert!(pmu.pmi().branch_counters().is_empty());
    let _ = g0;
}

/// Randomized: a program of calls, returns and conditional branches at
/// random, the branches counter sampling every 5 to 9 branches; every
/// sample's call chain from the records is exactly the chain of calls
/// really open (the test's shadow stack), on the legacy stack and on
/// architectural LBR.
#[test]
fn every_call_chain_is_the_calls_really_open() {
    for config in [
        Config::skylake(),
        Config::haswell(),
        Config::alder_lake_p_core(),
    ] {
        let pmu = crate::testing::archperf_pmu();
        let (mut d, c) = driver!(&pmu, config);
        d.enable_lbr(LbrOptions::call_stack(kernel())).unwrap();
        let mut rnd = crate::testing::rng(0x5EED_0000 + u64::from(config.model));
        let n = 5 + rnd(5);
        let cfg = sampling_branches(&d, n);
        let g0 = c.g0.configure(&mut d, &cfg).unwrap();
        let g0 = g0.enable(&mut d).unwrap();
        let depth = d.lbr().unwrap().depth() as usize;
        let mut shadow: Vec<u64> = Vec::new();
        let mut ip = CODE;
        let mut samples = 0;
        for _ in 0..20_000 {
            let mut out = Vec::new();
            let roll = rnd(10);
            let (r, next) = if roll < 3 && shadow.len() < depth {
                let target = CODE + 0x10_0000 * (1 + rnd(8)) + 16 * rnd(64);
                shadow.push(ip);
                (retired(ip, target, Some(BranchKind::Call)), target)
            } else if roll < 6 && !shadow.is_empty() {
                let back = shadow.pop().unwrap() + 5;
                (retired(ip, back, Some(BranchKind::Return)), back)
            } else if roll < 8 {
                (retired(ip, ip + 4, Some(BranchKind::Conditional)), ip + 4)
            } else {
                (retired(ip, ip + 3, None), ip + 3)
            };
            step(&mut d, &r, &mut out);
            ip = next;
            for s in out {
                let chain: CallChain<40> = stack(&s).call_chain(s.rip);
                let want: Vec<u64> = core::iter::once(s.rip)
                    .chain(shadow.iter().rev().map(|c| c + 1))
                    .collect();
                assert_eq!(chain.frames(), &want[..], "{config:?}");
                samples += 1;
            }
        }
        assert!(samples > 1000, "{config:?}: {samples} samples");
        let g0 = g0.halt(&mut d).unwrap().release(&mut d).unwrap();
        let _ = d.give_back(Counters { g0, ..c });
    }
}

/// Each filter, on the legacy stack and on architectural LBR: the one
/// filter register written with the SDM's bits, and, of a branch of every
/// kind at each privilege, exactly the ones the filter asks for recorded.
#[test]
fn each_filter_records_what_it_asks_for() {
    let kinds = [
        (BranchKind::Conditional, BranchFilter::CONDITIONAL),
        (BranchKind::Jump, BranchFilter::NEAR_REL_JUMP),
        (BranchKind::IndirectJump, BranchFilter::NEAR_IND_JUMP),
        (BranchKind::Call, BranchFilter::NEAR_REL_CALL),
        (BranchKind::IndirectCall, BranchFilter::NEAR_IND_CALL),
        (BranchKind::Return, BranchFilter::NEAR_RETURN),
        (BranchKind::Other, BranchFilter::OTHER),
    ];
    let filters = [
        // (filter, MSR_LBR_SELECT, IA32_LBR_CTL)
        (
            BranchFilter::from_bits(0)
                .with_conditional(true)
                .user_only(),
            0x1F9,
            1 | 1 << 2 | 1 << 16,
        ),
        (
            BranchFilter::CALLS.kernel_only(),
            0x1E6,
            1 | 1 << 1 | 0b11 << 19,
        ),
        (
            BranchFilter::from_bits(0)
                .with_near_return(true)
                .everywhere(),
            0x1DC,
            0b111 | 1 << 21,
        ),
        (
            BranchFilter::ANY.with_user(true),
            1,
            1 | 1 << 2 | 0x7F << 16,
        ),
        (
            BranchFilter::from_bits(0)
                .with_other(true)
                .with_near_ind_jump(true)
                .everywhere(),
            0xBC,
            0b111 | 1 << 18 | 1 << 22,
        ),
    ];
    for (config, arch) in [
        (Config::skylake(), false),
        (Config::alder_lake_p_core(), true),
    ] {
        for &(filter, select, ctl) in &filters {
            let pmu = crate::testing::archperf_pmu();
            let (mut d, c) = driver!(&pmu, config);
            d.enable_lbr(LbrOptions {
                filter,
                call_stack: false,
            })
            .unwrap();
            let (msr, value) = if arch {
                (IA32_LBR_CTL, ctl)
            } else {
                (MSR_LBR_SELECT, select)
            };
            assert!(
                d.msr().log().contains(&Access::WriteMsr { msr, value }),
                "{config:?} {filter:?}: {msr:#X} <- {value:#X}"
            );
            let mut want = Vec::new();
            let mut at = CODE;
            for &(kind, field) in &kinds {
                for privilege in [Privilege::Os, Privilege::Usr] {
                    let r = Retirement {
                        privilege,
                        ..retired(at, at + 0x80, Some(kind))
                    };
                    model(&mut d).retire(&r);
                    let by_privilege = match privilege {
                        Privilege::Os => filter.kernel(),
                        Privilege::Usr => filter.user(),
                    };
                    if by_privilege && field.get(u64::from(filter.bits())) != 0 {
                        want.push(at);
                    }
                    at += 0x100;
                }
            }
            let got: Vec<u64> = model(&mut d).lbr_records().map(|r| r.1 - 0x80).collect();
            want.reverse();
            assert_eq!(got, want, "{config:?} {filter:?}");
            let _ = d.give_back(c);
        }
    }
}

//! The LBR layouts against the SDM's bit positions, every record format's
//! decoding, the generations by model, and call chains from a call stack.

use super::*;
use crate::detect::{self, LbrCaps};
use crate::model::archperf::{ArchPerfModel, Config};
use crate::sampling::ChainEnd;

/// A kernel address (sign extension above bit 47) and a user one.
const KERNEL: u64 = 0xFFFF_8000_0040_1000;
const USER: u64 = 0x0000_7FFF_0000_2000;

fn detected(config: Config) -> detect::ArchPerfCpu {
    let m = ArchPerfModel::new(config);
    detect::detect(&m, &mut m.clone())
        .unwrap()
        .arch_perf()
        .unwrap()
}

#[test]
fn filters_encode_where_the_sdm_puts_the_bits() {
    // Call stack at CPL 0: everything but near calls and returns, and
    // CPL > 0, suppressed; EN_CALLSTACK.
    let cs = BranchFilter::CALL_STACK.kernel_only();
    assert_eq!(
        cs.select(true).bits(),
        1 << 1 | 1 << 2 | 1 << 6 | 1 << 7 | 1 << 8 | 1 << 9
    );
    // The same on architectural LBR: record bits 19-21, OS, CALL_STACK.
    assert_eq!(cs.ctl(true).bits(), 1 | 1 << 1 | 1 << 3 | 0b111 << 19);
    // Every branch everywhere: nothing suppressed; every record bit.
    let any = BranchFilter::ANY.everywhere();
    assert_eq!(any.select(false).bits(), 0);
    assert_eq!(any.ctl(false).bits(), 0b111 | 0x7F << 16);
    // Conditional branches in user space.
    let jcc = BranchFilter::from_bits(0)
        .with_conditional(true)
        .user_only();
    assert_eq!(jcc.select(false).bits(), 1 | 0x1F8);
    assert_eq!(jcc.ctl(false).bits(), 1 | 1 << 2 | 1 << 16);
    assert_eq!(BranchFilter::CALLS.kinds(), 0b11000);
    // The options ask for what their names say.
    let o = LbrOptions::call_stack(BranchFilter::from_bits(0).with_kernel(true));
    assert!(o.call_stack && o.filter == cs);
    let any_user = LbrOptions::any(BranchFilter::from_bits(0).with_user(true));
    assert_eq!(any_user.filter, BranchFilter::ANY.user_only());
    // The layouts' other fields.
    assert_eq!(
        DebugCtl::LBR.mask() | DebugCtl::FREEZE_LBRS_ON_PMI.mask(),
        1 | 1 << 11
    );
    assert_eq!(LbrDepth::from_bits(0).with_depth(32).bits(), 32);
    assert_eq!(LbrInfo::BR_TYPE.mask(), 0xF << 56);
}

/// Each legacy format's words, as the SDM lays them out, decode to the
/// same branch.
#[test]
fn every_record_format_decodes() {
    let legacy = |n| RecordFormat::Legacy(LbrFormat::new(n).unwrap());
    let one = |format, words: (u64, u64, u64)| {
        let mut s = BranchStack::empty(format, false, 16);
        s.push(words.0, words.1, words.2);
        s.get(0).unwrap()
    };
    let plain = |mispredicted, cycles, tsx, kind| BranchRecord {
        from: KERNEL,
        to: USER,
        mispredicted,
        cycles,
        tsx,
        kind,
    };
    for n in [1, 2] {
        assert_eq!(
            one(legacy(n), (KERNEL, USER, 0)),
            plain(None, None, None, None)
        );
    }
    // Format 3: MISPRED over FROM's sign extension.
    let from3 = (KERNEL & !(1 << 63)) | 1 << 63;
    assert_eq!(
        one(legacy(3), (from3, USER, 0)),
        plain(Some(true), None, None, None)
    );
    assert_eq!(
        one(legacy(3), (KERNEL & !(1 << 63), USER, 0)),
        plain(Some(false), None, None, None)
    );
    // Format 4: MISPRED, IN_TSX, TSX_ABORT.
    let from4 = (KERNEL & !(7 << 61)) | 1 << 63 | 1 << 62;
    assert_eq!(
        one(legacy(4), (from4, USER, 0)),
        plain(Some(true), None, Some((true, false)), None)
    );
    // Formats 5 and 7: LBR_INFO (7 without TSX).
    let info = 1 << 63 | 1 << 61 | 77;
    assert_eq!(
        one(legacy(5), (KERNEL, USER, info)),
        plain(Some(true), Some(77), Some((false, true)), None)
    );
    assert_eq!(
        one(legacy(7), (KERNEL, USER, info)),
        plain(Some(true), Some(77), None, None)
    );
    // Format 6: MISPRED over FROM, the cycles over TO.
    let to6 = (USER & ((1 << 48) - 1)) | 99 << 48;
    let from6 = KERNEL & !(1 << 63);
    assert_eq!(
        one(legacy(6), (from6, to6, 0)),
        plain(Some(false), Some(99), None, None)
    );
    // A kernel TO in format 6 is sign-extended from bit 47.
    let back = one(legacy(6), (from6, (KERNEL & ((1 << 48) - 1)) | 5 << 48, 0));
    assert_eq!((back.to, back.cycles), (KERNEL, Some(5)));
    // Architectural: INFO's type, cycles when valid, mispredict, TSX.
    let info = LbrInfo::from_bits(0)
        .with_cycles(5)
        .with_cycles_valid(true)
        .with_branch_type(4)
        .with_mispredicted(true)
        .bits();
    let arch = one(RecordFormat::Architectural, (KERNEL, USER, info));
    assert_eq!(
        arch,
        plain(
            Some(true),
            Some(5),
            Some((false, false)),
            Some(BranchType::NearRelativeCall)
        )
    );
    let invalid = LbrInfo::from_bits(info).with_cycles_valid(false).bits();
    assert_eq!(
        one(RecordFormat::Architectural, (KERNEL, USER, invalid)).cycles,
        None
    );
    for (v, t) in [
        (0, BranchType::Conditional),
        (1, BranchType::NearIndirectJump),
        (2, BranchType::NearRelativeJump),
        (3, BranchType::NearIndirectCall),
        (5, BranchType::NearReturn),
        (9, BranchType::Other(9)),
    ] {
        assert_eq!(BranchType::from_encoding(v), t);
    }
    // Only formats 1-7 are driven.
    assert!(LbrFormat::new(0).is_none() && LbrFormat::new(8).is_none());
    assert_eq!(
        (1..=7)
            .map(|n| LbrFormat::new(n).unwrap().from_flags())
            .collect::<Vec<_>>(),
        [0, 0, 1, 3, 0, 1, 0]
    );
}

/// On format 4 without TSX a written FROM carries the sign extension in
/// bits 62:61, copied from bits 60:59.
#[test]
fn format_4_without_tsx_writes_the_sign_extension() {
    let read = KERNEL & !(7 << 61);
    assert_eq!(
        FlaggedFrom::from_bits(read).tsx_less().bits(),
        KERNEL & !(1 << 63)
    );
    assert_eq!(FlaggedFrom::from_bits(USER).tsx_less().bits(), USER);
}

/// The LBR of each model preset, as detection and the generation table
/// find it; the parts the crate does not drive have none.
#[test]
fn lbr_by_generation_and_by_cpuid() {
    let skl = Lbr::of(&detected(Config::skylake())).unwrap();
    let Lbr::Legacy { generation, format } = skl else {
        panic!("{skl:?}")
    };
    assert_eq!(
        (generation.depth, generation.info, format.number()),
        (32, Some(0xDC0), 5)
    );
    assert!(skl.call_stack());
    let nhm = Lbr::of(&detected(Config::nehalem())).unwrap();
    assert_eq!((nhm.depth(), nhm.call_stack()), (16, false));
    let hsw = Lbr::of(&detected(Config::haswell())).unwrap();
    assert_eq!((hsw.depth(), hsw.call_stack()), (16, true));
    let adl = Lbr::of(&detected(Config::alder_lake_p_core())).unwrap();
    assert_eq!(
        adl,
        Lbr::Architectural(ArchLbr {
            depth: 32,
            cpl_filter: true,
            branch_filter: true,
            call_stack: true,
            mispredict: true,
            timed: true,
            branch_type: true,
        })
    );
    assert_eq!(Lbr::of(&detected(Config::core2())), None);
    // A model the table does not know; version 1; another family.
    let mut cpu = detected(Config::skylake());
    cpu.model = 0x0F;
    assert_eq!(Lbr::of(&cpu), None);
    let mut cpu = detected(Config::skylake());
    cpu.family = 0x13;
    assert_eq!(Lbr::of(&cpu), None);
    assert_eq!(Lbr::of(&detected(Config::v1())), None);
    // Architectural depths: the deepest up to 32.
    let mut cpu = detected(Config::alder_lake_p_core());
    cpu.lbr = LbrCaps {
        arch: Some([0xFF, 0b111, 0]),
        ..cpu.lbr
    };
    assert_eq!(Lbr::of(&cpu).unwrap().depth(), 32);
    cpu.lbr.arch = Some([0x80, 0, 0]);
    assert_eq!(Lbr::of(&cpu), None, "64 only: deeper than a BranchStack");
    cpu.lbr.arch = Some([0x01, 0, 0]);
    let small = Lbr::of(&cpu).unwrap();
    assert_eq!(small.depth(), 8);
    // Without CPL or branch filtering only "everything" is a filter.
    assert!(!small.filters(BranchFilter::ANY.kernel_only()));
    assert!(!small.filters(BranchFilter::CALLS.everywhere()));
    assert!(small.filters(BranchFilter::ANY.everywhere()));
}

/// A plan's record order: the legacy ring back from the TOS, architectural
/// records from 0.
#[test]
fn records_are_read_newest_first() {
    let skl = Lbr::of(&detected(Config::skylake())).unwrap().plan(true, 4);
    assert_eq!(
        (skl.record(3, 0), skl.record(3, 3), skl.record(3, 4)),
        (3, 0, 31)
    );
    assert_eq!(skl.msrs(2), (0x682, 0x6C2, 0xDC2));
    assert!(!skl.legacy_freeze() && skl.call_stack() && !skl.arch());
    let hsw = Lbr::of(&detected(Config::haswell()))
        .unwrap()
        .plan(false, 3);
    assert_eq!(hsw.msrs(15), (0x68F, 0x6CF, 0));
    assert!(hsw.legacy_freeze());
    let adl = Lbr::of(&detected(Config::alder_lake_p_core()))
        .unwrap()
        .plan(true, 5);
    assert_eq!((adl.record(9, 0), adl.record(9, 7)), (0, 7));
    assert_eq!(adl.msrs(1), (0x1501, 0x1601, 0x1201));
}

/// A call stack's records make the chain of calls still open, each call
/// one byte in; other records make none; a full stack may have lost its
/// oldest calls.
#[test]
fn a_call_stack_is_a_call_chain() {
    let format = RecordFormat::Legacy(LbrFormat::new(5).unwrap());
    let mut s = BranchStack::empty(format, true, 4);
    s.push(0x1010, 0x2000, 0);
    s.push(0x3020, 0x1000, 0);
    let c: CallChain<8> = s.call_chain(0x2004);
    assert_eq!(c.frames(), &[0x2004, 0x1011, 0x3021]);
    assert_eq!(c.end(), ChainEnd::OldestRecorded);
    s.push(0x4000, 0x3000, 0);
    s.push(0x5000, 0x4000, 0);
    assert_eq!(s.call_chain::<8>(1).end(), ChainEnd::Full);
    // A stack past its capacity keeps what it has.
    let mut big = BranchStack::empty(format, true, 32);
    for k in 0..40 {
        big.push(0x100 + k, 0x200, 0);
    }
    assert_eq!(big.len(), MAX_BRANCHES);
    assert_eq!(big.words(MAX_BRANCHES - 1), Some((0x100 + 31, 0x200, 0)));
    assert_eq!(big.words(MAX_BRANCHES), None);
    let not_calls = BranchStack::empty(format, false, 4);
    let mut b = not_calls;
    b.push(0x1010, 0x2000, 0);
    assert_eq!(b.call_chain::<4>(7).frames(), &[7]);
}

//! The model's last branch records at the MSR level, with the SDM's
//! addresses and bit positions written out: which MSRs exist per
//! configuration and their #GP rules, what is recorded under each filter,
//! each format's words, call-stack mode, and the freeze on PMI.

use super::helpers::*;

const SELECT: u32 = 0x1C8;
const TOS: u32 = 0x1C9;
const FROM: u32 = 0x680;
const TO: u32 = 0x6C0;
const INFO: u32 = 0xDC0;
const CTL: u32 = 0x14CE;
const DEPTH: u32 = 0x14CF;
const ARCH_FROM: u32 = 0x1500;
const ARCH_TO: u32 = 0x1600;
const ARCH_INFO: u32 = 0x1200;

/// DEBUGCTL.LBR and FREEZE_LBRS_ON_PMI.
const LBR: u64 = 1;
const FREEZE: u64 = 1 << 11;
/// MSR_LBR_SELECT: CPL_EQ_0, CPL_NEQ_0, JCC, NEAR_RET, EN_CALLSTACK.
const NO_RING0: u64 = 1;
const NO_RING3: u64 = 1 << 1;
const NO_JCC: u64 = 1 << 2;
const NO_RET: u64 = 1 << 5;
const CALL_STACK: u64 = 1 << 9;
/// Call-stack mode at CPL 0: calls and returns only, EN_CALLSTACK.
const KERNEL_CALL_STACK: u64 = NO_RING3 | NO_JCC | 1 << 6 | 1 << 7 | 1 << 8 | CALL_STACK;

fn branch(ip: u64, next_ip: u64, kind: BranchKind, privilege: Privilege) -> Retirement {
    Retirement {
        privilege,
        branch: Some(Branch { kind, taken: true }),
        ..Retirement::at(ip, next_ip)
    }
}

fn call(ip: u64, to: u64) -> Retirement {
    branch(ip, to, BranchKind::Call, OS)
}

fn ret(ip: u64, to: u64) -> Retirement {
    branch(ip, to, BranchKind::Return, OS)
}

/// The records as (FROM, TO) pairs, newest first.
fn records(m: &ArchPerfModel) -> Vec<(u64, u64)> {
    m.lbr_records().map(|r| (r.0, r.1)).collect()
}

#[test]
fn lbr_msrs_exist_where_the_configuration_has_them() {
    let mut s = sky();
    for msr in [SELECT, TOS, FROM, FROM + 31, TO + 31, INFO, INFO + 31] {
        s.read_msr(msr).unwrap();
    }
    for msr in [FROM + 32, TO + 32, INFO + 32, CTL, DEPTH, ARCH_FROM] {
        absent(&mut s, msr);
    }
    // TOS: bits 4:0 for 32 records; EN_CALLSTACK from Haswell on.
    s.write_msr(TOS, 31).unwrap();
    write_faults(&mut s, TOS, 32, GpReason::ReservedBits { bits: 32 });
    s.write_msr(SELECT, 0x3FF).unwrap();
    write_faults(
        &mut s,
        SELECT,
        1 << 10,
        GpReason::ReservedBits { bits: 1 << 10 },
    );
    let mut nhm = ArchPerfModel::new(Config::nehalem());
    nhm.read_msr(FROM + 15).unwrap();
    for msr in [FROM + 16, INFO, CTL] {
        absent(&mut nhm, msr);
    }
    write_faults(
        &mut nhm,
        SELECT,
        CALL_STACK,
        GpReason::ReservedBits { bits: CALL_STACK },
    );
    write_faults(&mut nhm, TOS, 16, GpReason::ReservedBits { bits: 16 });
    let e = nhm.read_msr(FROM + 16).unwrap_err();
    assert_eq!(
        e.to_string(),
        "#GP(0) on RDMSR of MSR_LASTBRANCH_x_FROM_IP, x = 16 (690H): no such MSR on this processor"
    );
    // The records take any value.
    nhm.write_msr(FROM, u64::MAX).unwrap();
    assert_eq!(nhm.read_msr(FROM).unwrap(), u64::MAX);
    let mut core2 = ArchPerfModel::new(Config::core2());
    for msr in [SELECT, TOS, FROM, CTL, DEPTH] {
        absent(&mut core2, msr);
    }
    // IA32_PERF_CAPABILITIES[5:0]: the legacy format.
    assert_eq!(nhm.read_msr(PERF_CAPS).unwrap() & 0x3F, 3);
    let hsw = ArchPerfModel::new(Config::haswell());
    assert_eq!(hsw.clone().read_msr(PERF_CAPS).unwrap() & 0x3F, 4);
    assert_eq!(s.read_msr(PERF_CAPS).unwrap() & 0x3F, 5);
}

#[test]
fn architectural_lbr_msrs_and_cpuid() {
    let mut m = ArchPerfModel::new(Config::alder_lake_p_core());
    assert_ne!(m.cpuid(7, 0).edx & 1 << 19, 0);
    let leaf = m.cpuid(0x1C, 0);
    assert_eq!((leaf.eax, leaf.ebx, leaf.ecx), (0x8000_000F, 0b111, 0b111));
    assert!(m.cpuid(0, 0).eax >= 0x1C);
    // The reset depth is the deepest supported: 32.
    assert_eq!(m.read_msr(DEPTH).unwrap(), 32);
    m.read_msr(ARCH_FROM + 31).unwrap();
    for msr in [ARCH_FROM + 32, SELECT, TOS, FROM] {
        absent(&mut m, msr);
    }
    // IA32_PERF_CAPABILITIES has no legacy format.
    assert_eq!(m.read_msr(PERF_CAPS).unwrap() & 0x3F, 0);
    // A depth CPUID does not offer: #GP.
    for bad in [0, 12, 40, 64] {
        write_faults(&mut m, DEPTH, bad, GpReason::ReservedBits { bits: bad });
    }
    // A write of the depth zeroes the records, and the records above it go.
    m.write_msr(ARCH_TO + 3, 0x1234).unwrap();
    m.write_msr(DEPTH, 8).unwrap();
    assert_eq!(m.read_msr(ARCH_TO + 3).unwrap(), 0);
    absent(&mut m, ARCH_INFO + 8);
    // IA32_LBR_CTL: bits 0-3 and 22:16.
    m.write_msr(CTL, 0x7F_000F).unwrap();
    write_faults(&mut m, CTL, 1 << 4, GpReason::ReservedBits { bits: 1 << 4 });
    write_faults(
        &mut m,
        CTL,
        1 << 23,
        GpReason::ReservedBits { bits: 1 << 23 },
    );
    // Other presets: no architectural LBR.
    assert_eq!(sky().cpuid(7, 0).edx & 1 << 19, 0);
    assert_eq!(sky().cpuid(0x1C, 0).eax, 0);
}

/// Taken branches are recorded newest first with the cycles since the
/// previous record; a branch not taken, or one the filter suppresses, is
/// not; nothing is recorded while DEBUGCTL.LBR is clear.
#[test]
fn the_legacy_stack_records_what_its_filter_takes() {
    let mut m = sky();
    m.retire(&call(0x100, 0x200));
    assert!(records(&m).is_empty(), "DEBUGCTL.LBR clear");
    m.write_msr(DEBUGCTL, LBR).unwrap();
    m.retire(&call(0x100, 0x200));
    m.retire(&Retirement::at(0x200, 0x204));
    m.retire(&Retirement::at(0x204, 0x208));
    let not_taken = Retirement {
        branch: Some(Branch {
            kind: BranchKind::Conditional,
            taken: false,
        }),
        ..Retirement::at(0x208, 0x20A)
    };
    m.retire(&not_taken);
    m.retire(&branch(0x20A, 0x200, BranchKind::Conditional, OS));
    m.retire(&ret(0x210, 0x105));
    assert_eq!(
        records(&m),
        [(0x210, 0x105), (0x20A, 0x200), (0x100, 0x200)]
    );
    // TOS at the third record; INFO the cycles since the previous one
    // (4 instructions, then 1).
    assert_eq!(m.read_msr(TOS).unwrap(), 3);
    assert_eq!(m.read_msr(INFO + 2).unwrap(), 4);
    assert_eq!(m.read_msr(INFO + 3).unwrap(), 1);
    // Suppress conditional branches and returns, then ring 0.
    m.write_msr(SELECT, NO_JCC | NO_RET).unwrap();
    m.retire(&branch(0x300, 0x310, BranchKind::Conditional, OS));
    m.retire(&ret(0x310, 0x400));
    m.retire(&branch(0x320, 0x330, BranchKind::IndirectCall, USR));
    m.write_msr(SELECT, NO_RING0).unwrap();
    m.retire(&call(0x340, 0x350));
    m.retire(&branch(0x360, 0x370, BranchKind::Jump, USR));
    m.write_msr(SELECT, NO_RING3).unwrap();
    m.retire(&branch(0x380, 0x390, BranchKind::Other, USR));
    m.retire(&branch(0x3A0, 0x3B0, BranchKind::IndirectJump, OS));
    assert_eq!(
        records(&m)[..3],
        [(0x3A0, 0x3B0), (0x360, 0x370), (0x320, 0x330)]
    );
    // The ring wraps at 32 records.
    m.write_msr(SELECT, 0).unwrap();
    for k in 0..40 {
        m.retire(&branch(0x1000 + k, 0x2000, BranchKind::Jump, OS));
    }
    let all = records(&m);
    assert_eq!((all.len(), all[0].0, all[31].0), (32, 0x1027, 0x1008));
}

/// Each legacy format's words: format 3's MISPRED and format 4's TSX bits
/// over FROM's sign extension (0: the model predicts every branch), format
/// 5's INFO.
#[test]
fn legacy_formats_lay_out_their_words() {
    const KERNEL_FROM: u64 = 0xFFFF_8000_0000_1000;
    const KERNEL_TO: u64 = 0xFFFF_8000_0000_2000;
    for (config, from, info) in [
        (Config::nehalem(), KERNEL_FROM & !(1 << 63), 0),
        (Config::haswell(), KERNEL_FROM & !(7 << 61), 0),
        (Config::skylake(), KERNEL_FROM, 1),
    ] {
        let mut m = ArchPerfModel::new(config);
        m.write_msr(DEBUGCTL, LBR).unwrap();
        m.retire(&Retirement::at(1, 2));
        m.retire(&call(KERNEL_FROM, KERNEL_TO));
        assert_eq!(
            m.lbr_records().next(),
            Some((from, KERNEL_TO, info)),
            "{config:?}"
        );
    }
}

/// Call-stack mode: calls push, a return flushes the newest record; a
/// return with nothing recorded changes nothing.
#[test]
fn call_stack_mode_keeps_the_open_calls() {
    let mut m = sky();
    m.write_msr(SELECT, KERNEL_CALL_STACK).unwrap();
    m.write_msr(DEBUGCTL, LBR).unwrap();
    m.retire(&ret(0x50, 0x60));
    assert!(records(&m).is_empty());
    assert_eq!(
        m.read_msr(TOS).unwrap(),
        0,
        "an unmatched return pops nothing"
    );
    m.retire(&call(0x100, 0x200)); // root -> a
    m.retire(&call(0x210, 0x300)); // a -> leaf
    m.retire(&branch(0x304, 0x300, BranchKind::Conditional, OS));
    m.retire(&ret(0x310, 0x215)); // leaf -> a
    m.retire(&branch(0x220, 0x400, BranchKind::IndirectCall, OS)); // a -> b
    assert_eq!(records(&m), [(0x220, 0x400), (0x100, 0x200)]);
    m.retire(&ret(0x410, 0x225));
    m.retire(&ret(0x230, 0x105));
    assert!(records(&m).is_empty());
    // The flushed records read 0.
    assert_eq!(
        (m.read_msr(FROM + 1).unwrap(), m.read_msr(TO + 2).unwrap()),
        (0, 0)
    );
    // A user call is not recorded at CPL 0 only.
    m.retire(&branch(0x100, 0x200, BranchKind::Call, USR));
    assert!(records(&m).is_empty());
}

/// Architectural LBR: record 0 is the newest; a push shifts the others
/// down, a call-stack return shifts them up; INFO has the cycles (valid)
/// and the branch type.
#[test]
fn architectural_records_are_a_stack() {
    let mut m = ArchPerfModel::new(Config::alder_lake_p_core());
    m.write_msr(DEPTH, 8).unwrap();
    m.write_msr(CTL, 1 | 1 << 1 | 0x7F << 16).unwrap();
    m.retire(&branch(0x10, 0x20, BranchKind::Conditional, OS));
    m.retire(&call(0x20, 0x30));
    m.retire(&branch(0x30, 0x40, BranchKind::IndirectJump, USR));
    assert_eq!(records(&m), [(0x20, 0x30), (0x10, 0x20)], "USR off");
    assert_eq!(m.read_msr(ARCH_FROM).unwrap(), 0x20);
    let info = m.read_msr(ARCH_INFO).unwrap();
    assert_eq!((info >> 56 & 0xF, info >> 60 & 1, info & 0xFFFF), (4, 1, 1));
    let types: Vec<u64> = [
        BranchKind::Conditional,
        BranchKind::IndirectJump,
        BranchKind::Jump,
        BranchKind::IndirectCall,
        BranchKind::Call,
        BranchKind::Return,
        BranchKind::Other,
    ]
    .iter()
    .map(|&kind| {
        m.retire(&branch(0x50, 0x60, kind, OS));
        m.read_msr(ARCH_INFO).unwrap() >> 56 & 0xF
    })
    .collect();
    assert_eq!(types, [0, 1, 2, 3, 4, 5, 8]);
    // 9 branches in 8 records: the oldest dropped.
    assert_eq!(records(&m).len(), 8);
    // Call-stack mode.
    m.write_msr(DEPTH, 8).unwrap();
    m.write_msr(CTL, 1 | 1 << 1 | 1 << 3 | 0b111 << 19).unwrap();
    m.retire(&call(0x100, 0x200));
    m.retire(&call(0x210, 0x300));
    m.retire(&ret(0x310, 0x215));
    assert_eq!(records(&m), [(0x100, 0x200)]);
    assert_eq!(m.read_msr(ARCH_FROM + 1).unwrap(), 0);
}

/// FREEZE_LBRS_ON_PMI: version 4 sets LBR_Frz when the PMI is raised and
/// records nothing until it is cleared; version 3 clears DEBUGCTL.LBR. The
/// branch that overflowed the counter is in the frozen records.
#[test]
fn a_pmi_freezes_the_records() {
    let branches = (0xC4, 0x00);
    for (config, v4) in [(Config::skylake(), true), (Config::haswell(), false)] {
        let mut m = ArchPerfModel::new(config);
        m.write_msr(DEBUGCTL, LBR | FREEZE).unwrap();
        m.write_msr(EVTSEL0, counting(branches, INT)).unwrap();
        m.write_msr(PMC0, u64::MAX).unwrap(); // one before the wrap
        m.retire(&call(0x100, 0x200));
        assert!(m.pmi_pending());
        m.retire(&call(0x210, 0x300));
        assert_eq!(records(&m), [(0x100, 0x200)], "{config:?}");
        if v4 {
            assert!(m.lbr_frozen());
            assert_ne!(m.global_status() & 1 << 58, 0);
            assert_eq!(m.debugctl() & LBR, LBR);
            m.write_msr(OVF_CTRL, 1 << 58 | 1).unwrap();
        } else {
            assert_eq!(m.debugctl() & LBR, 0);
            m.write_msr(DEBUGCTL, LBR | FREEZE).unwrap();
        }
        m.retire(&call(0x310, 0x400));
        assert_eq!(records(&m), [(0x310, 0x400), (0x100, 0x200)]);
    }
}

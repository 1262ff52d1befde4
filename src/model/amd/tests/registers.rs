//! The register file: which MSRs exist per configuration, the legacy
//! aliases, reserved bits and read-only registers ignored, RDPMC.

use super::helpers::*;

#[test]
fn legacy_parts_have_four_counters_and_nothing_else() {
    let mut m = AmdModel::new(Config::k8());
    for n in 0..4 {
        m.write_msr(LCTL0 + n, 0x76 | EN).unwrap();
        m.write_msr(LCTR0 + n, 100 + u64::from(n)).unwrap();
        assert_eq!(m.rdpmc(n).unwrap(), 100 + u64::from(n));
    }
    for msr in [CTL0, CTR0, ctl(5), STATUS, GCTL, CLR, SET, LCTR0 + 4] {
        absent(&mut m, msr);
    }
    assert_eq!(reason(m.rdpmc(4)), GpReason::NoSuchCounter);
}

/// The legacy addresses are the first four extended counters.
#[test]
fn legacy_addresses_alias_the_first_four_extended_counters() {
    let mut m = AmdModel::new(Config::zen2());
    for n in 0..4u32 {
        m.write_msr(LCTL0 + n, 0xC0 | OS_BIT).unwrap();
        assert_eq!(m.read_msr(ctl(n)).unwrap(), 0xC0 | OS_BIT);
        m.write_msr(ctr(n), 0x1234 + u64::from(n)).unwrap();
        assert_eq!(m.read_msr(LCTR0 + n).unwrap(), 0x1234 + u64::from(n));
    }
    m.write_msr(ctl(5), 0x76).unwrap();
    assert_eq!(m.read_msr(ctl(5)).unwrap(), 0x76);
    assert_eq!(m.rdpmc(5).unwrap(), 0);
    // Between the pairs: no MSR; past counter 5: none either.
    for msr in [ctl(6), ctr(6), STATUS, GCTL] {
        absent(&mut m, msr);
    }
    assert_eq!(reason(m.rdpmc(6)), GpReason::NoSuchCounter);
}

/// Reserved bits are ignored, not #GP (PPR; KVM's "writes are ignored"):
/// bits 19, 21, 36-39 and 42-63 of a control, 63:48 of a counter.
#[test]
fn reserved_bits_are_ignored() {
    let mut m = AmdModel::new(Config::zen4());
    let reserved = 1 << 19 | 1 << 21 | 0xF << 36 | !0u64 << 42;
    m.write_msr(ctl(1), 0x76 | reserved).unwrap();
    assert_eq!(m.read_msr(ctl(1)).unwrap(), 0x76);
    m.write_msr(ctl(1), u64::MAX).unwrap();
    assert_eq!(m.read_msr(ctl(1)).unwrap() & reserved, 0);
    assert_eq!(m.read_msr(ctl(1)).unwrap(), !reserved);
    m.write_msr(ctr(1), u64::MAX).unwrap();
    assert_eq!(m.rdpmc(1).unwrap(), W48 - 1);
    // Global registers keep the counter bits only.
    m.write_msr(GCTL, u64::MAX).unwrap();
    assert_eq!(m.read_msr(GCTL).unwrap(), 0x3F);
}

/// PerfCntrGlobalStatus is read only, its write ignored; StatusClr and
/// StatusSet are write-1 and read 0.
#[test]
fn global_status_registers() {
    let mut m = AmdModel::new(Config::zen4());
    assert_eq!(
        m.read_msr(GCTL).unwrap(),
        0x3F,
        "every counter enabled at RESET"
    );
    m.write_msr(SET, 0b101).unwrap();
    assert_eq!(m.read_msr(STATUS).unwrap(), 0b101);
    assert!(!m.pmi_pending(), "StatusSet raises no PMI");
    m.write_msr(STATUS, 0).unwrap();
    assert_eq!(
        m.read_msr(STATUS).unwrap(),
        0b101,
        "a write to the status is ignored"
    );
    m.write_msr(CLR, 0b100 | 1 << 58).unwrap();
    assert_eq!(m.read_msr(STATUS).unwrap(), 0b001);
    assert_eq!((m.read_msr(CLR).unwrap(), m.read_msr(SET).unwrap()), (0, 0));
}

/// A PerfMonV2 part with fewer counters: CPUID's count decides which
/// exist.
#[test]
fn perfmon_v2_counts_its_counters() {
    let config = Config {
        v2_counters: 5,
        ..Config::zen4()
    };
    let mut m = AmdModel::new(config);
    m.write_msr(ctl(4), 0x76).unwrap();
    absent(&mut m, ctl(5));
    assert_eq!(reason(m.rdpmc(5)), GpReason::NoSuchCounter);
    assert_eq!(m.read_msr(GCTL).unwrap(), 0x1F);
    let f = m.read_msr(ctr(5)).unwrap_err();
    assert_eq!(
        f.to_string(),
        "#GP(0) on RDMSR of MSR C001020BH: no such MSR on this processor"
    );
}

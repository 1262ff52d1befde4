//! Overflow: the wrap at the width, IA32_PERF_GLOBAL_STATUS, the PMI only
//! with INT / PMI, OVF_CTRL / STATUS_RESET, STATUS_SET, skid, the freeze on
//! PMI, and injection up to the PMI.

use super::helpers::*;

const W48: u64 = 1 << 48;
const W40: u64 = 1 << 40;

#[test]
fn a_wrap_sets_status_but_no_pmi_without_int() {
    let mut m = sky();
    m.write_msr(EVTSEL0, counting(INSTR, 0)).unwrap();
    m.write_msr(A_PMC0, W48 - 2).unwrap();
    m.inject(ev(INSTR, 1));
    assert_eq!(m.global_status(), 0);
    assert_eq!(m.counter(0), W48 - 1);
    m.inject(ev(INSTR, 4));
    assert_eq!(m.counter(0), 3);
    assert_eq!(m.read_msr(STATUS).unwrap(), 0x1);
    assert!(!m.pmi_pending());
    assert!(!m.take_pmi());
}

#[test]
fn a_wrap_with_int_raises_the_pmi() {
    let mut m = sky();
    m.write_msr(EVTSEL0 + 2, counting(INSTR, INT)).unwrap();
    // The usual preset: -2 through the legacy alias (sign-extended).
    m.write_msr(PMC0 + 2, (-2i64) as u64).unwrap();
    assert_eq!(m.counter(2), W48 - 2);
    m.inject(ev(INSTR, 1));
    assert!(!m.pmi_pending());
    assert_eq!(
        m.inject(ev(INSTR, 1)),
        Injected {
            injected: 1,
            pmi_pending: true
        }
    );
    assert_eq!(m.counter(2), 0);
    assert_eq!(m.global_status(), 0x4);
    assert_eq!(m.pmi_sources(), 0x4);
    assert!(m.take_pmi());
    assert!(!m.pmi_pending());
    assert_eq!(m.pmi_sources(), 0);
    assert!(!m.take_pmi());
    // The status bit is sticky until software clears it.
    assert_eq!(m.global_status(), 0x4);
}

#[test]
fn the_width_is_the_configured_one() {
    let mut c2 = ArchPerfModel::new(Config::core2());
    c2.write_msr(EVTSEL0, counting(INSTR, INT)).unwrap();
    c2.write_msr(PMC0, 0xFFFF_FFFF).unwrap();
    assert_eq!(c2.counter(0), W40 - 1);
    c2.inject(ev(INSTR, 1));
    assert_eq!(c2.counter(0), 0);
    assert_eq!(c2.global_status(), 1);
    assert!(c2.pmi_pending());
    // A 32-bit part wraps many times in one bulk injection.
    let narrow = Config {
        gp_width: 32,
        ..Config::core2()
    };
    let mut m = ArchPerfModel::new(narrow);
    m.write_msr(EVTSEL0 + 1, counting(INSTR, 0)).unwrap();
    m.inject(ev(INSTR, (1 << 33) + 5));
    assert_eq!(m.counter(1), 5);
    assert_eq!(m.global_status(), 0x2);
}

#[test]
fn fixed_counter_overflow_and_its_pmi_bit() {
    let mut m = sky();
    m.write_msr(GLOBAL_CTRL, 0x7_0000_000F).unwrap();
    // Field 1: OS|USR|PMI (1011b); field 2: OS|USR (0011b).
    m.write_msr(FIXED_CTRL, 0x3B0).unwrap();
    m.write_msr(FIXED0 + 1, W48 - 1).unwrap();
    m.write_msr(FIXED0 + 2, W48 - 1).unwrap();
    m.inject(ev(REF, 1));
    assert_eq!(m.global_status(), 1 << 34);
    assert!(!m.pmi_pending());
    m.inject(ev(CYCLES, 1).at(USR));
    assert_eq!(m.global_status(), (1 << 34) | (1 << 33));
    assert!(m.pmi_pending());
    assert_eq!(m.pmi_sources(), 1 << 33);
    assert_eq!((m.fixed(1), m.fixed(2)), (0, 0));
}

#[test]
fn only_counters_with_int_raise_the_pmi() {
    let mut m = sky();
    m.write_msr(EVTSEL0, counting(INSTR, 0)).unwrap();
    m.write_msr(EVTSEL0 + 1, counting(INSTR, INT)).unwrap();
    m.write_msr(A_PMC0, W48 - 1).unwrap();
    m.write_msr(A_PMC0 + 1, W48 - 3).unwrap();
    m.inject(ev(INSTR, 1));
    assert_eq!((m.global_status(), m.pmi_pending()), (0x1, false));
    m.inject(ev(INSTR, 2));
    assert_eq!((m.global_status(), m.pmi_pending()), (0x3, true));
    assert_eq!(m.pmi_sources(), 0x2);
}

#[test]
fn version_1_raises_the_pmi_without_status() {
    let mut m = ArchPerfModel::new(Config::v1());
    m.write_msr(EVTSEL0, counting(INSTR, INT)).unwrap();
    m.write_msr(PMC0, (-1i64) as u64).unwrap();
    m.inject(ev(INSTR, 1));
    assert!(m.pmi_pending());
    assert_eq!(m.global_status(), 0);
    assert_eq!(m.counter(0), 0);
}

#[test]
fn ovf_ctrl_clears_status_bits() {
    let mut c2 = ArchPerfModel::new(Config::core2());
    c2.write_msr(GLOBAL_CTRL, 0x1_0000_0003).unwrap();
    c2.write_msr(FIXED_CTRL, 0x3).unwrap();
    c2.write_msr(EVTSEL0, counting(INSTR, 0)).unwrap();
    c2.write_msr(EVTSEL0 + 1, counting(INSTR, 0)).unwrap();
    c2.write_msr(PMC0, (-1i64) as u64).unwrap();
    c2.write_msr(PMC0 + 1, (-1i64) as u64).unwrap();
    c2.write_msr(FIXED0, W40 - 1).unwrap();
    c2.inject(ev(INSTR, 1));
    assert_eq!(c2.read_msr(STATUS).unwrap(), 0x1_0000_0003);
    c2.write_msr(OVF_CTRL, 0).unwrap();
    assert_eq!(c2.global_status(), 0x1_0000_0003);
    c2.write_msr(OVF_CTRL, 0x1).unwrap();
    assert_eq!(c2.global_status(), 0x1_0000_0002);
    c2.write_msr(OVF_CTRL, 0xC000_0001_0000_0002).unwrap();
    assert_eq!(c2.global_status(), 0);
    // Version 4: the same address is STATUS_RESET.
    let mut m = sky();
    m.write_msr(STATUS_SET, 0x7C80_0007_0000_000F).unwrap();
    m.write_msr(OVF_CTRL, (1 << 58) | (1 << 55) | 0x5).unwrap();
    assert_eq!(m.global_status(), 0x7880_0007_0000_000A & !(1 << 55));
    m.write_msr(OVF_CTRL, Config::skylake().status_reset_bits())
        .unwrap();
    assert_eq!(m.global_status(), 0);
}

#[test]
fn status_set_sets_bits_without_a_pmi() {
    let mut m = sky();
    m.write_msr(EVTSEL0, counting(INSTR, INT)).unwrap();
    m.write_msr(STATUS_SET, 0x1_0000_0002).unwrap();
    assert_eq!(m.read_msr(STATUS).unwrap(), 0x1_0000_0002);
    m.write_msr(STATUS_SET, 1 << 62).unwrap();
    assert_eq!(m.read_msr(STATUS).unwrap(), (1 << 62) | 0x1_0000_0002);
    assert!(!m.pmi_pending());
    m.write_msr(OVF_CTRL, (1 << 62) | 0x1_0000_0002).unwrap();
    assert_eq!(m.global_status(), 0);
}

#[test]
fn skid_delays_the_pmi_by_counter_increments() {
    let mut m = sky();
    m.set_skid(3);
    m.write_msr(EVTSEL0, counting(INSTR, INT)).unwrap();
    m.write_msr(A_PMC0, W48 - 1).unwrap();
    m.inject(ev(INSTR, 1));
    // Wrapped: status now, the PMI three increments later.
    assert_eq!(m.global_status(), 1);
    assert!(!m.pmi_pending());
    // Other events do not advance the skid.
    m.inject(ev(CYCLES, 100));
    m.idle(100);
    m.inject(ev(INSTR, 2));
    assert!(!m.pmi_pending());
    m.inject(ev(INSTR, 1));
    assert!(m.pmi_pending());
    assert_eq!(m.counter(0), 3);
    // Up to the PMI in one call.
    let mut m = sky();
    m.set_skid(3);
    m.write_msr(EVTSEL0, counting(INSTR, INT)).unwrap();
    m.write_msr(A_PMC0, W48 - 2).unwrap();
    assert_eq!(
        m.inject_until_pmi(ev(INSTR, 100)),
        Injected {
            injected: 5,
            pmi_pending: true
        }
    );
    assert_eq!(m.counter(0), 3);
}

#[test]
fn skid_within_one_clock() {
    for (skid, pending) in [(0, true), (3, true), (4, true), (5, false)] {
        let mut m = sky();
        m.set_skid(skid);
        m.write_msr(EVTSEL0, counting(SLOTS, INT)).unwrap();
        m.write_msr(A_PMC0, W48 - 1).unwrap();
        // Five occurrences in one clock: the wrap is the first, four follow.
        m.cycle(&[ev(SLOTS, 5)]);
        assert_eq!(m.counter(0), 4);
        assert_eq!(m.pmi_pending(), pending, "skid {skid}");
    }
}

#[test]
fn a_requested_pmi_survives_clearing_int_and_status() {
    let mut m = sky();
    m.set_skid(2);
    m.write_msr(EVTSEL0, counting(INSTR, INT)).unwrap();
    m.write_msr(A_PMC0, W48 - 1).unwrap();
    m.inject(ev(INSTR, 1));
    m.write_msr(EVTSEL0, counting(INSTR, 0)).unwrap();
    m.write_msr(OVF_CTRL, 1).unwrap();
    m.inject(ev(INSTR, 1));
    assert!(!m.pmi_pending());
    m.inject(ev(INSTR, 1));
    assert!(m.pmi_pending());
    assert_eq!(m.global_status(), 0);
}

#[test]
fn legacy_freeze_clears_global_ctrl_and_lbr() {
    let mut c2 = ArchPerfModel::new(Config::core2());
    c2.write_msr(DEBUGCTL, (1 << 12) | (1 << 11) | 1).unwrap();
    c2.write_msr(GLOBAL_CTRL, 0x1_0000_0003).unwrap();
    c2.write_msr(FIXED_CTRL, 0x3).unwrap();
    c2.write_msr(EVTSEL0, counting(INSTR, INT)).unwrap();
    c2.write_msr(EVTSEL0 + 1, counting(INSTR, 0)).unwrap();
    c2.write_msr(PMC0, (-3i64) as u64).unwrap();
    // Wrap and PMI in clock 3; frozen from clock 4.
    c2.inject(ev(INSTR, 10));
    assert!(c2.pmi_pending());
    assert_eq!((c2.counter(0), c2.counter(1), c2.fixed(0)), (0, 3, 3));
    assert_eq!(c2.read_msr(GLOBAL_CTRL).unwrap(), 0);
    assert_eq!(c2.read_msr(DEBUGCTL).unwrap(), (1 << 12) | (1 << 11));
    assert_eq!(c2.global_status(), 1);
    // The handler re-enables.
    assert!(c2.take_pmi());
    c2.write_msr(OVF_CTRL, 1).unwrap();
    c2.write_msr(GLOBAL_CTRL, 0x1_0000_0003).unwrap();
    c2.inject(ev(INSTR, 2));
    assert_eq!((c2.counter(0), c2.counter(1), c2.fixed(0)), (2, 5, 5));
}

#[test]
fn streamlined_freeze_sets_ctr_frz_and_lbr_frz() {
    let mut m = sky();
    m.write_msr(DEBUGCTL, (1 << 12) | (1 << 11) | 1).unwrap();
    m.write_msr(GLOBAL_CTRL, 0x1_0000_000F).unwrap();
    m.write_msr(FIXED_CTRL, 0x3).unwrap();
    m.write_msr(EVTSEL0, counting(INSTR, INT)).unwrap();
    m.write_msr(EVTSEL0 + 1, counting(INSTR, 0)).unwrap();
    m.write_msr(A_PMC0, W48 - 3).unwrap();
    m.inject(ev(INSTR, 10));
    assert!(m.pmi_pending());
    assert_eq!((m.counter(0), m.counter(1), m.fixed(0)), (0, 3, 3));
    // GLOBAL_CTRL and DEBUGCTL as they were; CTR_Frz and LBR_Frz set.
    assert_eq!(m.read_msr(GLOBAL_CTRL).unwrap(), 0x1_0000_000F);
    assert_eq!(m.read_msr(DEBUGCTL).unwrap(), (1 << 12) | (1 << 11) | 1);
    assert_eq!(m.read_msr(STATUS).unwrap(), (1 << 59) | (1 << 58) | 1);
    assert!(m.frozen());
    // Acknowledging CTR_Frz with the overflow unfreezes.
    assert!(m.take_pmi());
    m.write_msr(OVF_CTRL, (1 << 59) | (1 << 58) | 1).unwrap();
    m.inject(ev(INSTR, 2));
    assert_eq!((m.counter(0), m.counter(1), m.fixed(0)), (2, 5, 5));
}

#[test]
fn the_freeze_comes_with_the_pmi_after_the_skid() {
    let mut m = sky();
    m.set_skid(2);
    m.write_msr(DEBUGCTL, 1 << 12).unwrap();
    m.write_msr(EVTSEL0, counting(INSTR, INT)).unwrap();
    m.write_msr(EVTSEL0 + 1, counting(INSTR, 0)).unwrap();
    m.write_msr(A_PMC0, W48 - 1).unwrap();
    m.inject(ev(INSTR, 10));
    // Wrap in clock 1, PMI and freeze in clock 3.
    assert_eq!((m.counter(0), m.counter(1)), (2, 3));
    assert_eq!(m.global_status(), (1 << 59) | 1);
}

#[test]
fn no_freeze_without_the_debugctl_bit_or_on_version_1() {
    let mut m = sky();
    m.write_msr(EVTSEL0, counting(INSTR, INT)).unwrap();
    m.write_msr(A_PMC0, W48 - 1).unwrap();
    m.inject(ev(INSTR, 10));
    assert!(m.pmi_pending());
    assert_eq!(m.counter(0), 9);
    assert_eq!(m.global_status(), 1);
}

#[test]
fn inject_until_pmi_stops_at_the_raising_occurrence() {
    let mut m = sky();
    m.write_msr(EVTSEL0, counting(INSTR, INT)).unwrap();
    m.write_msr(A_PMC0, W48 - 5).unwrap();
    assert_eq!(
        m.inject_until_pmi(ev(INSTR, 100)),
        Injected {
            injected: 5,
            pmi_pending: true
        }
    );
    assert_eq!(m.counter(0), 0);
    // Pending: nothing more is injected.
    assert_eq!(
        m.inject_until_pmi(ev(INSTR, 100)),
        Injected {
            injected: 0,
            pmi_pending: true
        }
    );
    assert!(m.take_pmi());
    // No PMI in reach: all of it.
    assert_eq!(
        m.inject_until_pmi(ev(INSTR, 100)),
        Injected {
            injected: 100,
            pmi_pending: false
        }
    );
    assert_eq!(m.counter(0), 100);
    // Fixed counter PMI, with an event the GP counter does not count.
    m.write_msr(FIXED_CTRL, 0xB0).unwrap();
    m.write_msr(GLOBAL_CTRL, 0x2_0000_000F).unwrap();
    m.write_msr(FIXED0 + 1, W48 - 7).unwrap();
    assert_eq!(
        m.inject_until_pmi(ev(CYCLES, 10)),
        Injected {
            injected: 7,
            pmi_pending: true
        }
    );
    assert_eq!(m.pmi_sources(), 1 << 33);
}

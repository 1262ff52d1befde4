//! Counting: the event select (12 bits) and unit mask, USR/OS, `EN` AND
//! PerfCntrGlobalCtl, HostOnly/GuestOnly with SVM, CntMask/INV/Edge.

use super::helpers::*;

#[test]
fn a_counter_counts_its_event_at_its_privileges() {
    let mut m = AmdModel::new(Config::zen2());
    m.write_msr(ctl(0), counting(0xC0, 0)).unwrap();
    m.write_msr(ctl(1), sel(0xC0, 0, OS_BIT | EN)).unwrap();
    m.write_msr(ctl(2), sel(0xC0, 0, USR_BIT | EN)).unwrap();
    m.write_msr(ctl(3), sel(0xC0, 0, OS_BIT | USR_BIT)).unwrap(); // no EN
    m.inject(ev(0xC0, 10));
    m.inject(ev(0xC0, 4).at(USR));
    m.inject(ev(0x76, 7));
    assert_eq!([0, 1, 2, 3].map(|n| m.counter(n)), [14, 10, 4, 0]);
}

/// EventSelect[11:8] is part of the event: 0x1C0 is not 0xC0.
#[test]
fn the_event_select_is_twelve_bits() {
    let mut m = AmdModel::new(Config::zen4());
    m.write_msr(ctl(0), counting(0x1C0, 0)).unwrap();
    m.write_msr(ctl(1), counting(0x0C0, 0)).unwrap();
    m.write_msr(ctl(2), sel(0x0C0, 0x01, OS_BIT | EN)).unwrap();
    m.inject(ev(0x1C0, 3));
    m.inject(ev(0xC0, 5));
    m.inject(Event::new(0xC0, 0x01, 2));
    assert_eq!([0, 1, 2].map(|n| m.counter(n)), [3, 5, 2]);
}

/// PerfMonV2: a counter counts only with its `EN` and its
/// PerfCntrGlobalCtl bit.
#[test]
fn perfmon_v2_ands_en_with_the_global_control() {
    let mut m = AmdModel::new(Config::zen4());
    m.write_msr(ctl(0), counting(0x76, 0)).unwrap();
    m.write_msr(GCTL, 0).unwrap();
    m.inject(ev(0x76, 5));
    assert_eq!(m.counter(0), 0);
    m.write_msr(GCTL, 1).unwrap();
    m.inject(ev(0x76, 5));
    assert_eq!(m.counter(0), 5);
    m.write_msr(ctl(0), sel(0x76, 0, OS_BIT)).unwrap();
    m.inject(ev(0x76, 5));
    assert_eq!(m.counter(0), 5);
    // Without PerfMonV2 there is no global register: EN alone.
    let mut z2 = AmdModel::new(Config::zen2());
    z2.write_msr(ctl(0), counting(0x76, 0)).unwrap();
    z2.inject(ev(0x76, 5));
    assert_eq!(z2.counter(0), 5);
}

/// With SVM enabled HostOnly and GuestOnly pick the mode; both or neither
/// count in both; with SVM disabled they change nothing (choice 5).
#[test]
fn host_and_guest_only() {
    let mut m = AmdModel::new(Config::zen4());
    let modes = [0, HOST_ONLY, GUEST_ONLY, HOST_ONLY | GUEST_ONLY];
    for (n, bits) in modes.into_iter().enumerate() {
        m.write_msr(ctl(n as u32), counting(0xC0, bits)).unwrap();
    }
    m.inject(ev(0xC0, 3));
    m.inject(ev(0xC0, 4).in_guest());
    assert_eq!(
        [0, 1, 2, 3].map(|n| m.counter(n)),
        [7; 4],
        "SVM off: ignored"
    );
    m.set_svme(true);
    m.inject(ev(0xC0, 10));
    m.inject(ev(0xC0, 100).in_guest());
    assert_eq!([0, 1, 2, 3].map(|n| m.counter(n)), [117, 17, 107, 117]);
}

/// CntMask counts clocks with at least CntMask events (INV: fewer); Edge
/// counts the clocks where that turns true; CntMask 0 ignores INV.
#[test]
fn cntmask_inv_and_edge() {
    let mut m = AmdModel::new(Config::zen2());
    m.write_msr(ctl(0), counting(0xC0, cmask(2))).unwrap();
    m.write_msr(ctl(1), counting(0xC0, cmask(2) | INV)).unwrap();
    m.write_msr(ctl(2), counting(0xC0, cmask(2) | EDGE))
        .unwrap();
    m.write_msr(ctl(3), counting(0xC0, INV)).unwrap();
    for n in [3, 1, 2, 2, 0, 4] {
        m.cycle(&[ev(0xC0, n)]);
    }
    // >= 2 in clocks 1, 3, 4, 6; < 2 in 2, 5; rising edges at 1, 3, 6.
    assert_eq!([0, 1, 2, 3].map(|n| m.counter(n)), [4, 2, 3, 12]);
    // A clock whose privilege is not admitted compares false.
    m.write_msr(ctl(4), sel(0xC0, 0, OS_BIT | EN | cmask(1) | INV))
        .unwrap();
    m.set_privilege(USR);
    m.idle(5);
    assert_eq!(m.counter(4), 0);
    m.set_privilege(OS);
    m.idle(5);
    assert_eq!(m.counter(4), 5);
}

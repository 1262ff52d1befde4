//! Overflow: the 48-bit wrap, PerfCntrGlobalStatus with PerfMonV2 only,
//! the PMI only with INT, skid, a stopped counter's PMI, separate PMIs,
//! bulk injection.

use super::helpers::*;

#[test]
fn the_wrap_sets_status_on_v2_and_int_raises_the_pmi() {
    let mut m = AmdModel::new(Config::zen4());
    m.write_msr(ctl(0), counting(0x76, 0)).unwrap();
    m.write_msr(ctr(0), W48 - 2).unwrap();
    m.inject(ev(0x76, 3));
    assert_eq!((m.counter(0), m.global_status()), (1, 1));
    assert!(!m.pmi_pending(), "no INT, no PMI");
    m.write_msr(ctl(2), counting(0x76, INT)).unwrap();
    m.write_msr(ctr(2), W48 - 1).unwrap();
    assert_eq!(
        m.inject_until_pmi(ev(0x76, 10)),
        Injected {
            injected: 1,
            pmi_pending: true
        }
    );
    assert_eq!(
        (m.counter(2), m.global_status(), m.pmi_sources()),
        (0, 0b101, 0b100)
    );
    assert!(m.take_pmi() && !m.take_pmi());
    // Before PerfMonV2: no status, the PMI all the same.
    let mut z2 = AmdModel::new(Config::zen2());
    z2.write_msr(ctl(1), counting(0x76, INT)).unwrap();
    z2.write_msr(ctr(1), W48 - 1).unwrap();
    z2.inject(ev(0x76, 1));
    assert_eq!((z2.global_status(), z2.pmi_pending()), (0, true));
}

/// Skid: the PMI rises with the counter's skid-th increment after the
/// wrap, or at once when the counter stops first (choice 7).
#[test]
fn skid_and_a_stopped_counter() {
    let mut m = AmdModel::new(Config::zen4());
    m.set_skid(5);
    m.write_msr(ctl(0), counting(0x76, INT)).unwrap();
    m.write_msr(ctr(0), W48 - 1).unwrap();
    assert_eq!(
        m.inject_until_pmi(ev(0x76, 100)).injected,
        6,
        "wrap, then 5"
    );
    assert_eq!(m.counter(0), 5);
    assert!(m.take_pmi());
    m.write_msr(ctr(0), W48 - 1).unwrap();
    m.inject(ev(0x76, 3));
    assert!(!m.pmi_pending(), "2 of 5 skid left");
    m.write_msr(GCTL, 0).unwrap();
    assert!(m.pmi_pending(), "stopping the counter raises its PMI");
    assert!(m.take_pmi());
    // Cleared EN likewise.
    m.write_msr(GCTL, 1).unwrap();
    m.write_msr(ctr(0), W48 - 1).unwrap();
    m.inject(ev(0x76, 1));
    m.write_msr(ctl(0), 0).unwrap();
    assert!(m.take_pmi());
}

/// Two overflows: one PMI by default, two with separate PMIs (the late
/// delivery of AMD's erratum).
#[test]
fn merged_and_separate_pmis() {
    for (separate, pmis) in [(false, 1), (true, 2)] {
        let mut m = AmdModel::new(Config::zen2());
        m.set_separate_pmis(separate);
        for n in 0..2 {
            m.write_msr(ctl(n), counting(0x76, INT)).unwrap();
            m.write_msr(ctr(n), W48 - 3).unwrap();
        }
        m.inject(ev(0x76, 3));
        assert_eq!((m.pending_pmis(), m.pmi_sources()), (pmis, 0b11));
        let mut taken = 0;
        while m.take_pmi() {
            taken += 1;
        }
        assert_eq!(taken, pmis);
    }
}

/// Bulk injection is exact at any scale: 2^47 + 5 events from a preset of
/// -2^47 wrap once and leave 5.
#[test]
fn bulk_injection_is_exact() {
    let mut m = AmdModel::new(Config::zen2());
    m.write_msr(ctl(0), counting(0xC0, INT)).unwrap();
    m.write_msr(ctr(0), W48 - (1 << 47)).unwrap();
    let got = m.inject_until_pmi(ev(0xC0, (1 << 47) + 5));
    assert_eq!((got.injected, m.counter(0)), (1 << 47, 0));
    assert!(m.take_pmi());
    m.inject(ev(0xC0, 5));
    assert_eq!(m.counter(0), 5);
    // Many wraps in one injection: one PMI pending (merged), the counter
    // where arithmetic puts it.
    m.write_msr(ctr(0), W48 - 1).unwrap();
    m.inject(ev(0xC0, 3 * W48 + 7));
    assert_eq!((m.counter(0), m.pending_pmis()), (6, 1));
}

//! Counting: event matching, Tables 18-29 and 18-30, the active-thread
//! field, and the compare/complement/threshold/edge filter.

use super::helpers::*;

#[test]
fn counter_halts_when_its_cccr_enable_clears() {
    let mut m = ht();
    let kind = program(&mut m, 12, 0);
    m.inject(kind.on(T0, OS, 10));
    assert_eq!(m.rdpmc(12), Ok(10));
    let v = m.read_msr(0x36C).unwrap();
    m.write_msr(0x36C, v & !cccr::ENABLE).unwrap();
    m.inject(kind.on(T0, OS, 10));
    assert_eq!(m.rdpmc(12), Ok(10), "halted");
    m.write_msr(0x36C, v).unwrap();
    m.inject(kind.on(T0, OS, 5));
    assert_eq!(m.rdpmc(12), Ok(15), "restarted, count kept");
}

#[test]
fn every_counter_counts_through_its_escrs_only() {
    for c in 0..18 {
        let mut m = ht();
        let kind = program(&mut m, c, 0);
        m.inject(kind.on(T0, USR, 7));
        for n in 0..18 {
            let expect = if n == c { 7 } else { 0 };
            assert_eq!(m.rdpmc(n as u32), Ok(expect), "programmed {c}, read {n}");
        }
    }
}

#[test]
fn matching_needs_group_select_and_a_common_mask_bit() {
    let mut m = ht();
    // CRU_ESCR0 instr_retired (02H) NBOGUSNTAG|BOGUSNTAG -> counter 12.
    m.write_msr(0x3B8, escr_value(0x02, 0b0101, ALL_THREADS))
        .unwrap();
    m.write_msr(0x36C, cccr_value(4)).unwrap();
    let instr = |mask| EventKind::new(EscrGroup::Cru01, 0x02, mask);
    m.inject(instr(0b0001).on(T0, OS, 3));
    m.inject(instr(0b0010).on(T0, OS, 100)); // NBOGUSTAG not selected
    m.inject(instr(0b0100).on(T0, OS, 4));
    // Same select on another group (machine_clear is 02H on CRU_ESCR2/3).
    m.inject(EventKind::new(EscrGroup::Cru23, 0x02, 0b0101).on(T0, OS, 100));
    assert_eq!(m.rdpmc(12), Ok(7));
    // ESCR select 0 in the CCCR picks IQ_ESCR0, absent on model 3: nothing.
    m.write_msr(0x36C, cccr_value(0)).unwrap();
    m.inject(instr(1).on(T0, OS, 5));
    assert_eq!(m.rdpmc(12), Ok(7));
}

#[test]
fn escr_side_restrictions() {
    // BSQ_allocation (05H) counts only on BSU_ESCR0 (counters 0, 1).
    let mut m = ht();
    let bsq = EventKind::new(EscrGroup::Bsu, 0x05, 1);
    m.write_msr(0x3A0, escr_value(0x05, 1, ALL_THREADS))
        .unwrap();
    m.write_msr(0x3A1, escr_value(0x05, 1, ALL_THREADS))
        .unwrap();
    m.write_msr(0x360, cccr_value(7)).unwrap();
    m.write_msr(0x362, cccr_value(7)).unwrap();
    m.inject(bsq.on(T0, OS, 9));
    assert_eq!((m.rdpmc(0), m.rdpmc(2)), (Ok(9), Ok(0)));
}

/// SDM Table 18-29 (Vol. 3B 18.16.4), transcribed: for each T0_OS/T0_USR
/// (rows) and T1_OS/T1_USR (columns) setting, the situations that count:
/// a = T0 in OS, b = T0 in USR, c = T1 in OS, d = T1 in USR. Row/column
/// order as printed: 00, 01, 11, 10 (OS bit first).
const TABLE_18_29: [[&str; 4]; 4] = [
    ["", "d", "cd", "c"],
    // The printed cell for 01/10 is "T0 in OS or T1 in OS"; see the module
    // docs, disagreement 1: the model (and this test) use "T0 in USR or T1 in OS".
    ["b", "bd", "bcd", "bc"],
    ["ab", "abd", "abcd", "abc"],
    ["a", "ad", "acd", "ac"],
];

/// Row/column order of Tables 18-29/18-30 as (OS, USR) bits.
const ORDER: [(bool, bool); 4] = [(false, false), (false, true), (true, true), (true, false)];

fn t_bits(t0: (bool, bool), t1: (bool, bool)) -> u64 {
    let mut b = 0;
    if t0.0 {
        b |= escr::T0_OS;
    }
    if t0.1 {
        b |= escr::T0_USR;
    }
    if t1.0 {
        b |= escr::T1_OS;
    }
    if t1.1 {
        b |= escr::T1_USR;
    }
    b
}

#[test]
fn table_18_29_ts_events() {
    let kind = EventKind::new(EscrGroup::Cru01, 0x01, 1); // uops_retired: TS
    assert_eq!(
        tables::specificity(kind.group, kind.select),
        Specificity::ThreadSpecific
    );
    let situations = [('a', T0, OS), ('b', T0, USR), ('c', T1, OS), ('d', T1, USR)];
    for (r, &t0) in ORDER.iter().enumerate() {
        for (col, &t1) in ORDER.iter().enumerate() {
            for &(letter, thread, privilege) in &situations {
                let mut m = ht();
                m.write_msr(0x3B8, escr_value(0x01, 1, t_bits(t0, t1)))
                    .unwrap();
                m.write_msr(0x36C, cccr_value(4)).unwrap();
                // The other thread's state must not matter for a TS event.
                for other in [OS, USR] {
                    m.set_thread_state(
                        thread.other(),
                        ThreadState {
                            active: true,
                            privilege: other,
                        },
                    );
                    m.inject(kind.on(thread, privilege, 1));
                }
                let expect = if TABLE_18_29[r][col].contains(letter) {
                    2
                } else {
                    0
                };
                assert_eq!(
                    m.rdpmc(12),
                    Ok(expect),
                    "row {r} col {col} situation {letter}"
                );
            }
        }
    }
}

/// What a cell of Table 18-30 says.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Ti {
    Zero,
    /// "Counts while (a) T0 in USR or (b) T1 in USR".
    Usr,
    /// "Counts while (a) T0 in OS or (b) T1 in OS".
    Os,
    /// "Counts irrespective of CPL, T0, T1".
    All,
}

/// SDM Table 18-30 (TI events), rows T0 and columns T1 in the order 00, 01,
/// 11, 10.
const TABLE_18_30: [[Ti; 4]; 4] = {
    use Ti::*;
    [
        [Zero, Usr, All, Os],
        [Usr, Usr, All, All],
        [All, All, All, All],
        [Os, All, All, Os],
    ]
};

#[test]
fn table_18_30_ti_events() {
    let kind = EventKind::new(EscrGroup::Firm, 0x04, 1 << 15); // x87_FP_uop ALL: TI
    assert_eq!(
        tables::specificity(kind.group, kind.select),
        Specificity::ThreadIndependent
    );
    for (r, &t0) in ORDER.iter().enumerate() {
        for (col, &t1) in ORDER.iter().enumerate() {
            for p0 in [OS, USR] {
                for p1 in [OS, USR] {
                    let mut m = ht();
                    // FIRM_ESCR0 -> counter 8.
                    m.write_msr(0x3A4, escr_value(0x04, 1 << 15, t_bits(t0, t1)))
                        .unwrap();
                    m.write_msr(0x368, cccr_value(1)).unwrap();
                    m.set_thread_state(
                        T1,
                        ThreadState {
                            active: true,
                            privilege: p1,
                        },
                    );
                    m.set_thread_state(
                        T0,
                        ThreadState {
                            active: true,
                            privilege: p0,
                        },
                    );
                    // The event seen from T0 in p0 (T1 in p1), then from T1
                    // in p1 (T0 in p0): the same situation, counted alike.
                    m.inject(kind.on(T0, p0, 1));
                    m.inject(kind.on(T1, p1, 1));
                    let expect = match TABLE_18_30[r][col] {
                        Ti::Zero => false,
                        Ti::Usr => p0 == USR || p1 == USR,
                        Ti::Os => p0 == OS || p1 == OS,
                        Ti::All => true,
                    };
                    let got = m.rdpmc(8).unwrap();
                    assert_eq!(
                        got,
                        if expect { 2 } else { 0 },
                        "row {r} col {col} T0 {p0:?} T1 {p1:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn ti_event_ignores_a_halted_sibling() {
    let mut m = ht();
    let kind = EventKind::new(EscrGroup::Firm, 0x04, 1 << 15);
    m.write_msr(0x3A4, escr_value(0x04, 1 << 15, escr::T0_OS | escr::T1_OS))
        .unwrap();
    m.write_msr(0x368, cccr_value(1)).unwrap();
    m.set_thread_state(
        T1,
        ThreadState {
            active: false,
            privilege: OS,
        },
    );
    m.inject(kind.on(T0, USR, 4));
    assert_eq!(m.rdpmc(8), Ok(0));
    m.set_thread_state(
        T1,
        ThreadState {
            active: true,
            privilege: OS,
        },
    );
    m.inject(kind.on(T0, USR, 4));
    assert_eq!(m.rdpmc(8), Ok(4));
}

#[test]
fn non_ht_counts_thread_0_only() {
    let mut m = NetBurstModel::new(Config::northwood());
    let kind = EventKind::new(EscrGroup::Cru01, 0x01, 1);
    m.write_msr(0x3B8, escr_value(0x01, 1, escr::T0_USR))
        .unwrap();
    m.write_msr(0x36C, cccr_value(4)).unwrap();
    m.inject(kind.on(T0, USR, 3));
    m.inject(kind.on(T0, OS, 3));
    m.inject(kind.on(T1, USR, 3));
    assert_eq!(m.rdpmc(12), Ok(3));
}

#[test]
fn active_thread_field() {
    // (field, [none, one, both] active) -> counts?
    let table = [
        (0u64, [true, false, false]),
        (1, [false, true, false]),
        (2, [false, false, true]),
        (3, [false, true, true]),
    ];
    for (field, expect) in table {
        for (k, (a0, a1)) in [(false, false), (true, false), (true, true)]
            .into_iter()
            .enumerate()
        {
            let mut m = ht();
            let kind = program(&mut m, 0, 0);
            m.write_msr(0x360, cccr::ENABLE | field << 16).unwrap();
            m.set_thread_state(
                T0,
                ThreadState {
                    active: a0,
                    privilege: OS,
                },
            );
            m.set_thread_state(
                T1,
                ThreadState {
                    active: a1,
                    privilege: OS,
                },
            );
            m.inject(kind.on(T0, OS, 5));
            assert_eq!(
                m.rdpmc(0),
                Ok(if expect[k] { 5 } else { 0 }),
                "field {field} active {k}"
            );
        }
        // "Single" also counts with only T1 active.
        let mut m = ht();
        let kind = program(&mut m, 0, 0);
        m.write_msr(0x360, cccr::ENABLE | field << 16).unwrap();
        m.set_thread_state(T0, ThreadState::new(false));
        m.inject(kind.on(T1, OS, 5));
        assert_eq!(
            m.rdpmc(0),
            Ok(if expect[1] { 5 } else { 0 }),
            "field {field}, T1 alone"
        );
    }
}

fn filter_run(extra: u64, inputs: &[u64]) -> u64 {
    let mut m = ht();
    let kind = program(&mut m, 4, extra);
    for &n in inputs {
        m.cycle(&[kind.on(T0, OS, n)]);
    }
    m.rdpmc(4).unwrap()
}

fn thr(n: u64) -> u64 {
    n << cccr::THRESHOLD.start
}

#[test]
fn compare_complement_threshold_edge() {
    let inputs = [0, 1, 3, 5, 2, 0, 4, 4, 1, 15];
    // No COMPARE: the inputs are summed.
    assert_eq!(filter_run(0, &inputs), 35);
    // Input above THRESHOLD 2: 3, 5, 4, 4, 15.
    assert_eq!(filter_run(cccr::COMPARE | thr(2), &inputs), 5);
    // COMPLEMENT: input at most 2: 0, 1, 2, 0, 1.
    assert_eq!(
        filter_run(cccr::COMPARE | cccr::COMPLEMENT | thr(2), &inputs),
        5
    );
    // EDGE: rising edges of (input > 2): clocks 3, 7, 10.
    assert_eq!(filter_run(cccr::COMPARE | cccr::EDGE | thr(2), &inputs), 3);
    // EDGE without COMPARE has no effect.
    assert_eq!(filter_run(cccr::EDGE | thr(2), &inputs), 35);
    // THRESHOLD 0, COMPARE: any clock with an event.
    assert_eq!(filter_run(cccr::COMPARE, &inputs), 8);
    // The per-clock input is clipped to 15.
    assert_eq!(filter_run(0, &[40]), 15);
    assert_eq!(
        filter_run(cccr::COMPARE | cccr::COMPLEMENT | thr(15), &[40]),
        1
    );
}

#[test]
fn several_events_in_one_clock_add_up() {
    let mut m = ht();
    let kind = program(&mut m, 12, cccr::COMPARE | thr(3));
    // Two threads' events in one clock: 2 + 2 > 3.
    m.cycle(&[kind.on(T0, OS, 2), kind.on(T1, USR, 2)]);
    m.cycle(&[kind.on(T0, OS, 2), kind.on(T1, USR, 1)]);
    assert_eq!(m.rdpmc(12), Ok(1));
}

#[test]
fn non_sleep_clockticks_recipe() {
    // SDM 18.17.2: any non-zero event select, COMPARE, COMPLEMENT, THRESHOLD
    // 15 counts every clock, whatever the ESCR's CPL bits.
    let mut m = ht();
    m.write_msr(0x3CC, escr_value(0x0C, 0xFF, 0)).unwrap(); // execution_event, no T bits
    m.write_msr(
        0x36C,
        cccr_value(5) | cccr::COMPARE | cccr::COMPLEMENT | thr(15),
    )
    .unwrap();
    m.idle(1000);
    m.cycle(&[]);
    m.inject(EventKind::new(EscrGroup::Bpu, 0x03, 1).on(T0, OS, 9));
    assert_eq!(m.rdpmc(12), Ok(1010));
    // With event select 0 the counter counts nothing (SDM 18.15.5.9).
    m.write_msr(0x3CC, escr_value(0, 0xFF, 0)).unwrap();
    m.idle(1000);
    assert_eq!(m.rdpmc(12), Ok(1010));
}

#[test]
fn bulk_injection_equals_clock_by_clock() {
    let mut rng = Rng(42);
    for _ in 0..200 {
        let extra = match rng.below(4) {
            0 => 0,
            1 => cccr::COMPARE | thr(rng.below(3)),
            2 => cccr::COMPARE | cccr::COMPLEMENT | thr(rng.below(3)),
            _ => cccr::COMPARE | cccr::EDGE,
        };
        let mut bulk = ht();
        let mut clock = ht();
        let kind = program(&mut bulk, 6, extra);
        program(&mut clock, 6, extra);
        let n = rng.below(30);
        bulk.inject(kind.on(T1, USR, n));
        for _ in 0..n {
            clock.cycle(&[kind.on(T1, USR, 1)]);
        }
        assert_eq!(bulk.rdpmc(6), clock.rdpmc(6), "extra {extra:#x} n {n}");
    }
}

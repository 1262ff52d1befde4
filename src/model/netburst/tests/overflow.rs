//! Overflow, OVF, FORCE_OVF, PMI, cascading (SDM 18.15.5.5-18.15.5.6).

use super::helpers::*;

fn cccr_msr(c: usize) -> u32 {
    0x360 + c as u32
}

#[test]
fn ovf_is_sticky_after_wrap_until_cleared() {
    let mut m = ht();
    let kind = program(&mut m, 9, 0);
    m.write_msr(0x309, WRAP - 3).unwrap();
    m.inject(kind.on(T0, OS, 2));
    assert_eq!(m.read_msr(0x369).unwrap() & cccr::OVF, 0);
    m.inject(kind.on(T0, OS, 3));
    assert_eq!(m.rdpmc(9), Ok(2), "wrapped around and kept counting");
    assert_ne!(m.read_msr(0x369).unwrap() & cccr::OVF, 0);
    m.inject(kind.on(T0, OS, 1000));
    assert_eq!(m.rdpmc(9), Ok(1002));
    assert_ne!(m.read_msr(0x369).unwrap() & cccr::OVF, 0, "sticky");
    // Writing the counter does not clear it; clearing the bit does.
    m.write_msr(0x309, 0).unwrap();
    assert_ne!(m.read_msr(0x369).unwrap() & cccr::OVF, 0);
    let v = m.read_msr(0x369).unwrap();
    m.write_msr(0x369, v & !cccr::OVF).unwrap();
    assert_eq!(m.read_msr(0x369), Ok(v & !cccr::OVF));
    // A wrap by a huge bulk count, and two wraps at once.
    m.inject(kind.on(T0, OS, 2 * WRAP + 5));
    assert_eq!(m.rdpmc(9), Ok(5));
    assert_ne!(m.read_msr(0x369).unwrap() & cccr::OVF, 0);
}

#[test]
fn pmi_comes_on_the_next_event_after_overflow() {
    let mut m = ht();
    let kind = program(&mut m, 12, cccr::OVF_PMI_T0);
    m.write_msr(0x30C, WRAP - 1).unwrap();
    m.inject(kind.on(T0, OS, 1));
    assert_ne!(m.read_msr(0x36C).unwrap() & cccr::OVF, 0);
    assert!(!m.pmi_pending(T0), "not on the overflowing event itself");
    m.inject(kind.on(T0, OS, 1));
    let pmi = m.take_pmi(T0).expect("PMI on the next event");
    assert_eq!(pmi.counters, 1 << 12);
    assert!(!pmi.pebs_threshold);
    assert_eq!(m.take_pmi(T0), None, "taken");
    assert_eq!(m.take_pmi(T1), None, "OVF_PMI_T1 clear");
    // In bulk: the overflow is followed by more events, so the PMI is raised.
    m.write_msr(0x30C, WRAP - 2).unwrap();
    m.inject(kind.on(T0, OS, 5));
    assert!(m.take_pmi(T0).is_some());
    // Clearing OVF before the next event withdraws it.
    m.write_msr(0x30C, WRAP - 1).unwrap();
    m.inject(kind.on(T0, OS, 1));
    let v = m.read_msr(0x36C).unwrap();
    m.write_msr(0x36C, v & !cccr::OVF).unwrap();
    m.inject(kind.on(T0, OS, 1));
    assert!(!m.pmi_pending(T0));
}

#[test]
fn ovf_pmi_t0_t1_select_the_interrupted_thread() {
    for (bits, t0, t1) in [
        (cccr::OVF_PMI_T0, true, false),
        (cccr::OVF_PMI_T1, false, true),
        (cccr::OVF_PMI_T0 | cccr::OVF_PMI_T1, true, true),
        (0, false, false),
    ] {
        let mut m = ht();
        let kind = program(&mut m, 17, bits);
        m.write_msr(0x311, WRAP - 1).unwrap();
        // Events of either thread drive the shared counter.
        m.inject(kind.on(T1, USR, 1));
        m.inject(kind.on(T0, OS, 1));
        assert_eq!(
            (m.pmi_pending(T0), m.pmi_pending(T1)),
            (t0, t1),
            "bits {bits:#x}"
        );
        if t1 {
            assert_eq!(m.take_pmi(T1).unwrap().counters, 1 << 17);
        }
    }
}

#[test]
fn force_ovf_overflows_on_every_increment() {
    let mut m = ht();
    let kind = program(&mut m, 2, cccr::FORCE_OVF | cccr::OVF_PMI_T0);
    m.inject(kind.on(T0, OS, 1));
    assert_eq!(m.rdpmc(2), Ok(1));
    assert_ne!(m.read_msr(0x362).unwrap() & cccr::OVF, 0);
    assert!(!m.pmi_pending(T0));
    m.inject(kind.on(T0, OS, 1));
    assert!(m.take_pmi(T0).is_some());
    m.inject(kind.on(T0, OS, 3));
    assert!(m.take_pmi(T0).is_some());
    assert_eq!(m.rdpmc(2), Ok(5));
}

/// With a skid of `s` the PMI rises with the counter's `1 + s`-th
/// increment after the clock of its overflow, one event per clock; events
/// the counter does not count do not advance it; `events_without_pmi` says
/// exactly how far it is.
#[test]
fn skid_delays_the_pmi_by_counter_increments() {
    for skid in [0, 1, 2, 7, 100] {
        let mut m = ht();
        m.set_skid(skid);
        assert_eq!(m.skid(), skid);
        let kind = program(&mut m, 12, cccr::OVF_PMI_T0);
        let other = program(&mut m, 4, 0);
        m.write_msr(0x30C, WRAP - 2).unwrap();
        // The wrap with the second event, the PMI 1 + skid events later.
        assert_eq!(m.events_without_pmi(), 2 + skid, "skid {skid}");
        m.inject(kind.on(T0, OS, 1 + skid));
        m.inject(other.on(T0, OS, 500));
        assert_eq!(m.events_without_pmi(), 1, "skid {skid}");
        m.inject(kind.on(T0, OS, 1));
        assert_eq!(m.events_without_pmi(), 0, "skid {skid}");
        assert!(!m.pmi_pending(T0), "skid {skid}: one increment short");
        m.inject(kind.on(T0, OS, 1));
        assert_eq!(m.take_pmi(T0).map(|l| l.counters), Some(1 << 12));
        assert_eq!(m.rdpmc(12), Ok(1 + skid), "skid {skid}");
        // In bulk, in one call: the same count.
        let mut m = ht();
        m.set_skid(skid);
        let kind = program(&mut m, 12, cccr::OVF_PMI_T0);
        m.write_msr(0x30C, WRAP - 2).unwrap();
        m.inject(kind.on(T0, OS, 2 + skid));
        assert!(!m.pmi_pending(T0), "skid {skid}");
        m.inject(kind.on(T0, OS, 1));
        assert!(m.pmi_pending(T0), "skid {skid}");
        m.take_pmi(T0);
        m.write_msr(0x30C, WRAP - 2).unwrap();
        m.inject(kind.on(T0, OS, 2 + skid));
        assert!(!m.pmi_pending(T0), "skid {skid}");
        m.inject(kind.on(T0, OS, 1));
        assert!(
            m.pmi_pending(T0),
            "skid {skid}: a wrap owes its PMI with OVF still set"
        );
    }
}

/// The increments of the overflow's own clock do not count towards the
/// skid (the PMI comes with the next event count, SDM 18.15.5.8); those of
/// the next clock do, all of them.
#[test]
fn skid_counts_from_the_clock_after_the_overflow() {
    for (skid, pending) in [(0, true), (2, true), (3, false)] {
        let mut m = ht();
        m.set_skid(skid);
        let kind = program(&mut m, 12, cccr::OVF_PMI_T0);
        m.write_msr(0x30C, WRAP - 1).unwrap();
        m.cycle(&[kind.on(T0, OS, 5)]);
        assert_eq!(m.rdpmc(12), Ok(4), "wrapped by the first of five");
        assert!(!m.pmi_pending(T0), "skid {skid}");
        m.cycle(&[kind.on(T0, OS, 3)]);
        assert_eq!(m.pmi_pending(T0), pending, "skid {skid}");
    }
}

/// Clearing OVF withdraws a PMI still in its skid, as it does without one.
#[test]
fn clearing_ovf_withdraws_a_pmi_in_its_skid() {
    let mut m = ht();
    m.set_skid(5);
    let kind = program(&mut m, 12, cccr::OVF_PMI_T0);
    m.write_msr(0x30C, WRAP - 1).unwrap();
    m.inject(kind.on(T0, OS, 4));
    let v = m.read_msr(0x36C).unwrap();
    m.write_msr(0x36C, v & !cccr::OVF).unwrap();
    m.inject(kind.on(T0, OS, 100));
    assert!(!m.pmi_pending(T0));
    assert_eq!(m.rdpmc(12), Ok(103));
}

/// FORCE_OVF with a skid: every increment overflows, the first PMI rises
/// `1 + skid` clocks after the first, and the overflow in the clock that
/// raises it owes the next one, `1 + skid` clocks later (taken each clock).
#[test]
fn force_ovf_with_skid_interrupts_every_one_plus_skid_increments() {
    for skid in [0, 1, 3] {
        let mut m = ht();
        m.set_skid(skid);
        let kind = program(&mut m, 2, cccr::FORCE_OVF | cccr::OVF_PMI_T0);
        let raised: Vec<u64> = (1..=20)
            .filter(|_| {
                m.inject(kind.on(T0, OS, 1));
                m.take_pmi(T0).is_some()
            })
            .collect();
        let expected: Vec<u64> = (1..=20)
            .filter(|c| c % (1 + skid) == 1 % (1 + skid) && *c > 1)
            .collect();
        assert_eq!(raised, expected, "skid {skid}");
    }
}

/// The PMI computed over a bulk injection is the one a clock-by-clock run
/// raises: random presets, skids, FORCE_OVF, batch sizes, multi-count
/// clocks and OVF clears, with the line taken after each batch in both.
#[test]
fn bulk_and_clock_by_clock_agree_on_the_pmi_with_skid() {
    let mut rng = Rng(0x5EED_5C1D);
    for round in 0..300 {
        let skid = rng.next() % 12;
        let force = rng.next().is_multiple_of(4);
        let extra = cccr::OVF_PMI_T0 | if force { cccr::FORCE_OVF } else { 0 };
        let mut bulk = ht();
        bulk.set_skid(skid);
        let kind = program(&mut bulk, 12, extra);
        bulk.write_msr(0x30C, WRAP - 1 - rng.next() % 20).unwrap();
        let mut unit = bulk.clone();
        for batch in 0..12 {
            let per_clock = 1 + rng.next() % 3;
            let clocks = rng.next() % 9;
            for _ in 0..clocks {
                unit.cycle(&[kind.on(T0, OS, per_clock)]);
            }
            if per_clock == 1 {
                bulk.inject(kind.on(T0, OS, clocks));
            } else {
                for _ in 0..clocks {
                    bulk.cycle(&[kind.on(T0, OS, per_clock)]);
                }
            }
            let what = format!("round {round} batch {batch} skid {skid} force {force}");
            assert_eq!(bulk.take_pmi(T0), unit.take_pmi(T0), "{what}");
            assert_eq!(bulk.rdpmc(12), unit.rdpmc(12), "{what}");
            assert_eq!(
                bulk.events_without_pmi(),
                unit.events_without_pmi(),
                "{what}"
            );
            if rng.next().is_multiple_of(5) {
                for m in [&mut bulk, &mut unit] {
                    let v = m.read_msr(0x36C).unwrap();
                    m.write_msr(0x36C, v & !cccr::OVF).unwrap();
                }
            }
        }
    }
}

/// Every (from, to) pair of counters in the same block.
fn same_block_pairs() -> impl Iterator<Item = (usize, usize)> {
    (0..18)
        .flat_map(|a| (0..18).map(move |b| (a, b)))
        .filter(|&(a, b)| a != b && tables::block_of(a) == tables::block_of(b))
}

#[test]
fn the_legal_cascade_pairs_are_exactly_the_sdms() {
    let legal: Vec<_> = same_block_pairs()
        .filter(|&(a, b)| can_cascade(a, b))
        .collect();
    assert_eq!(
        legal,
        [
            (0, 2),
            (1, 3),
            (2, 0),
            (3, 1),
            (4, 6),
            (5, 7),
            (6, 4),
            (7, 5),
            (8, 10),
            (9, 11),
            (10, 8),
            (11, 9),
            (12, 14),
            (13, 15),
            (14, 12),
            (14, 16),
            (15, 13),
            (15, 17)
        ]
    );
    for (from, to) in [
        (12, 16),
        (13, 17),
        (16, 14),
        (17, 15),
        (16, 12),
        (0, 1),
        (0, 4),
    ] {
        assert!(!can_cascade(from, to), "{from} -> {to}");
    }
}

/// Sets up `from` to count from 2^40 - 5 and `to` (CASCADE, ENABLE clear) to
/// count the same kind of event, then injects 20 events.
fn cascade_run(from: usize, to: usize) -> NetBurstModel {
    let mut m = ht();
    let kind = program(&mut m, from, 0);
    let kind_to = program(&mut m, to, 0);
    assert_eq!(kind, kind_to);
    let v = m.read_msr(cccr_msr(to)).unwrap();
    m.write_msr(cccr_msr(to), (v & !cccr::ENABLE) | cccr::CASCADE)
        .unwrap();
    m.write_msr(0x300 + from as u32, WRAP - 5).unwrap();
    m.inject(kind.on(T0, OS, 20));
    m
}

#[test]
fn every_legal_cascaded_pair_counts_across_2_pow_40() {
    for (from, to) in same_block_pairs().filter(|&(a, b)| can_cascade(a, b)) {
        let mut m = cascade_run(from, to);
        assert_eq!(m.rdpmc(from as u32), Ok(15), "{from} wrapped");
        assert_eq!(
            m.rdpmc(to as u32),
            Ok(15),
            "{from} -> {to}: started after the overflow"
        );
        // Combined 80-bit count: high part counted by `to`.
        let kind = ts_setup(from).3;
        m.inject(kind.on(T1, USR, WRAP));
        assert_eq!(m.rdpmc(from as u32), Ok(15));
        assert_eq!(m.rdpmc(to as u32), Ok(15 + WRAP - WRAP), "{to} wrapped too");
        assert_ne!(m.read_msr(cccr_msr(to)).unwrap() & cccr::OVF, 0);
    }
}

#[test]
fn illegal_cascade_pairs_never_start() {
    for (from, to) in same_block_pairs().filter(|&(a, b)| !can_cascade(a, b)) {
        // `to` uses the ESCR of its own side; make sure it sees the event.
        let mut m = ht();
        let kind = program(&mut m, from, 0);
        program(&mut m, to, 0);
        let v = m.read_msr(cccr_msr(to)).unwrap();
        m.write_msr(cccr_msr(to), (v & !cccr::ENABLE) | cccr::CASCADE)
            .unwrap();
        m.write_msr(0x300 + from as u32, WRAP - 5).unwrap();
        m.inject(kind.on(T0, OS, 20));
        let alt = cascade_alternate(to).unwrap();
        if alt != from && m.read_msr(cccr_msr(alt)).unwrap() & cccr::OVF == 0 {
            assert_eq!(
                m.rdpmc(to as u32),
                Ok(0),
                "{from} -> {to} is not a cascade pair"
            );
        }
    }
}

#[test]
fn halting_a_cascaded_counter() {
    // By clearing its CASCADE flag.
    let mut m = cascade_run(14, 16);
    let kind = ts_setup(16).3;
    let v = m.read_msr(0x370).unwrap();
    m.write_msr(0x370, v & !cccr::CASCADE).unwrap();
    m.inject(kind.on(T0, OS, 10));
    assert_eq!(m.rdpmc(16), Ok(15), "halted by clearing CASCADE");
    assert_eq!(m.rdpmc(14), Ok(25));
    m.write_msr(0x370, v).unwrap();
    m.inject(kind.on(T0, OS, 10));
    assert_eq!(m.rdpmc(16), Ok(25), "resumed");
    // By clearing the alternate's OVF.
    let a = m.read_msr(0x36E).unwrap();
    m.write_msr(0x36E, a & !cccr::OVF).unwrap();
    m.inject(kind.on(T0, OS, 10));
    assert_eq!(
        m.rdpmc(16),
        Ok(25),
        "halted by clearing the alternate's OVF"
    );
    assert!(!m.is_counting(16));
}

#[test]
fn cascade_chain_12_14_16() {
    let mut m = ht();
    let kind = program(&mut m, 12, 0);
    for c in [14, 16] {
        program(&mut m, c, 0);
        let v = m.read_msr(cccr_msr(c)).unwrap();
        m.write_msr(cccr_msr(c), (v & !cccr::ENABLE) | cccr::CASCADE)
            .unwrap();
    }
    m.write_msr(0x30C, WRAP - 10).unwrap();
    m.write_msr(0x30E, WRAP - 10).unwrap();
    m.inject(kind.on(T0, OS, 30));
    // 12 overflows on event 10; 14 counts events 11-30 and overflows on 20;
    // 16 counts events 21-30.
    assert_eq!(
        (m.rdpmc(12), m.rdpmc(14), m.rdpmc(16)),
        (Ok(20), Ok(10), Ok(10))
    );
}

#[test]
fn extended_cascading_from_16_and_17() {
    // CASCNT4INTO0: counter 16 starts counter 12 (model 3).
    let mut m = ht();
    let kind = program(&mut m, 16, 0);
    program(&mut m, 12, 0);
    let v = m.read_msr(0x36C).unwrap();
    m.write_msr(0x36C, (v & !cccr::ENABLE) | cccr::EXTENDED_CASCADE)
        .unwrap();
    m.write_msr(0x310, WRAP - 4).unwrap();
    m.inject(kind.on(T0, OS, 10));
    assert_eq!(m.rdpmc(12), Ok(6));
    // CASCNT5INTO4: counter 17 starts counter 16.
    let mut m = ht();
    let kind = program(&mut m, 17, 0);
    program(&mut m, 16, 0);
    let v = m.read_msr(0x370).unwrap();
    m.write_msr(0x370, (v & !cccr::ENABLE) | cccr::EXTENDED_CASCADE)
        .unwrap();
    m.write_msr(0x311, WRAP - 1).unwrap();
    m.inject(kind.on(T0, OS, 10));
    assert_eq!(m.rdpmc(16), Ok(9));
}

#[test]
fn cascaded_counter_with_enable_set_still_waits_for_the_overflow() {
    let mut m = ht();
    let kind = program(&mut m, 5, 0);
    program(&mut m, 7, cccr::CASCADE);
    m.write_msr(0x305, WRAP - 3).unwrap();
    m.inject(kind.on(T0, OS, 2));
    assert_eq!(
        m.rdpmc(7),
        Ok(0),
        "ENABLE alone does not start a cascaded counter"
    );
    assert!(!m.is_counting(7));
    m.inject(kind.on(T0, OS, 4));
    assert_eq!(m.rdpmc(7), Ok(3));
    // Clearing CASCADE leaves a plain enabled counter.
    let v = m.read_msr(0x367).unwrap();
    m.write_msr(0x367, v & !cccr::CASCADE).unwrap();
    let a = m.read_msr(0x365).unwrap();
    m.write_msr(0x365, a & !cccr::OVF).unwrap();
    m.inject(kind.on(T0, OS, 4));
    assert_eq!(m.rdpmc(7), Ok(7));
}

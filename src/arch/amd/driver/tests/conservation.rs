//! The randomized conservation test: on each kind of part, two sampling
//! counters with sample-after values from 1 to 2^47 and a counting one,
//! events injected in random amounts, PMIs delivered late (each overflow's
//! its own message, some held back across later steps, as AMD's late NMIs
//! arrive), skid, halts racing overflows whose PMIs are in flight,
//! resumes, and other sources' NMIs. After every run, for each sampling counter:
//! `events = periods x N + residual`, exactly; its samples add up to its
//! periods less those a halt found; every PMI the model raised was the
//! PMU's own (serviced, or claimed late); no sample was made twice.

use super::*;

/// Sample-after values: the smallest, small, medium and up to the largest
/// a 48-bit counter takes (2^47).
fn period(rnd: &mut impl FnMut(u64) -> u64) -> u64 {
    match rnd(7) {
        0 => 1,
        1 => 2 + rnd(5),
        2 => 10 + rnd(90),
        3 => 1000 + rnd(100_000),
        4 => (1 << 47) - rnd(1000),
        5 => 1 << 47,
        _ => 1 + rnd(1 << 40),
    }
}

/// What one run records.
#[derive(Default)]
struct Truth {
    /// Per counter, the events the model counted.
    counted: [u64; 6],
    samples: Vec<Sample>,
    /// PMIs the model raised and the kernel delivered.
    delivered: u64,
    /// Of those, the ones the handler did not take as its own.
    not_ours: u64,
    /// Foreign NMIs sent.
    foreign: u64,
}

/// Injects `n` events of `select`, stopping at each PMI the model raises
/// (which stays pending), and records what each counter counted.
fn feed<O: Owner>(d: &mut Amd<'_, O>, truth: &mut Truth, select: u16, n: u64) -> u64 {
    let m = model(d);
    let before: [u64; 6] = core::array::from_fn(|c| m.counter(c));
    let got = m.inject_until_pmi(Event::new(select, 0, n)).injected;
    for (c, counted) in truth.counted.iter_mut().enumerate() {
        *counted += m.counter(c).wrapping_sub(before[c]) & ((1 << 48) - 1);
    }
    got
}

/// Delivers up to `k` pending model PMIs.
fn deliver<O: Owner>(d: &mut Amd<'_, O>, truth: &mut Truth, k: u32, lvt: &mut Lvt) {
    for _ in 0..k {
        if !model(d).take_pmi() {
            return;
        }
        let o = pmi(d, lvt, 0x1000 + truth.delivered, &mut truth.samples);
        truth.delivered += 1;
        truth.not_ours += u64::from(!o.is_ours());
    }
}

#[test]
fn events_are_periods_times_n_plus_residual_exactly() {
    let mut rnd = crate::testing::rng(0xA3D0_2026);
    let mut runs = 0;
    for (what, config) in PARTS {
        for _ in 0..40 {
            crate::owner!(Random);
            let pmu = crate::testing::amd_pmu();
            let (mut d, c) = take::<Random>(&pmu, config);
            let skid = rnd(4);
            model(&mut d).set_skid(skid);
            model(&mut d).set_separate_pmis(rnd(2) == 0);
            let ns = [period(&mut rnd), period(&mut rnd)];
            let sa = ns.map(|n| SampleAfter::new(n, d.overflow_rule()).unwrap());
            let mut h = c.erase_all();
            let places = [0usize, 2];
            for (k, &p) in places.iter().enumerate() {
                let event = if k == 0 { "cycles" } else { "instructions" };
                let cfg = CounterConfig::counting(spec(event)).sampling(sa[k]);
                h[p].as_mut().unwrap().configure(&mut d, &cfg).unwrap();
                h[p].as_mut().unwrap().enable(&mut d).unwrap();
            }
            let counting = h[1].as_mut().unwrap();
            counting
                .configure(&mut d, &CounterConfig::counting(spec("cycles")))
                .unwrap();
            counting.enable(&mut d).unwrap();
            let (mut truth, mut lvt) = (Truth::default(), Lvt::default());
            for _ in 0..60 {
                // Between deliveries no counter may run 2^48 - N events
                // unserviced (`SampleAfter::split`'s range): a large
                // period's PMIs are delivered within the step.
                let hold = ns.iter().all(|&n| n < 1 << 30);
                let k = rnd(2) as usize;
                let select = if k == 0 { CYCLES } else { INSTRUCTIONS };
                let amount = rnd(2 * ns[k].min(1 << 20) + 3) + if rnd(3) == 0 { ns[k] } else { 0 };
                let mut left = amount;
                while left > 0 {
                    let got = feed(&mut d, &mut truth, select, left);
                    left -= got;
                    if !model(&mut d).pmi_pending() {
                        break;
                    }
                    // Events after the PMI is raised, before it is taken.
                    let late = rnd(3).min(left);
                    feed(&mut d, &mut truth, select, late);
                    left -= late;
                    if !hold {
                        deliver(&mut d, &mut truth, u32::MAX, &mut lvt);
                    } else if model(&mut d).pending_pmis() > 4 || rnd(2) == 0 {
                        deliver(&mut d, &mut truth, 1 + rnd(2) as u32, &mut lvt);
                    }
                    if model(&mut d).pmi_pending() && left > 0 {
                        // The model raises nothing while a PMI is pending
                        // (inject_until_pmi): the rest waits for a step.
                        break;
                    }
                }
                match rnd(8) {
                    // A halt (racing whatever overflow is in flight) and
                    // later a resume.
                    0 | 1 => {
                        let p = places[rnd(2) as usize];
                        let h = h[p].as_mut().unwrap();
                        match h.state() {
                            StateTag::Enabled => h.halt(&mut d).unwrap(),
                            _ => h.resume(&mut d).unwrap(),
                        }
                    }
                    // Some held-back PMIs arrive.
                    2 => deliver(&mut d, &mut truth, 1 + rnd(3) as u32, &mut lvt),
                    // Another source's NMI, while no overflow's PMI is in
                    // flight (one that is would find its counter serviced
                    // by this NMI and go unclaimed: `pmi`'s documentation,
                    // and `a_foreign_nmi_that_services_an_overflow` below).
                    3 if !model(&mut d).pmi_requested() => {
                        let o = pmi(&mut d, &mut lvt, 1, &mut truth.samples);
                        assert_eq!(o.overflowed, 0, "{what}: a foreign NMI serviced a counter");
                        truth.foreign += 1;
                    }
                    _ => {}
                }
            }
            for &p in &places {
                let h = h[p].as_mut().unwrap();
                if h.state() == StateTag::Enabled {
                    h.halt(&mut d).unwrap();
                }
            }
            deliver(&mut d, &mut truth, u32::MAX, &mut lvt);
            let what = format!("{what}, N = {ns:?}, skid {skid}");
            assert_eq!(
                truth.not_ours, 0,
                "{what}: a PMI of the PMU's own taken for another's"
            );
            for (k, &p) in places.iter().enumerate() {
                let raw = h[p].as_mut().unwrap().read(&mut d).unwrap();
                let (owed, residual) = sa[k].split(raw);
                let periods = pmu.pmi().periods(p as u8);
                assert_eq!(
                    truth.counted[p],
                    (periods + owed) * ns[k] + residual,
                    "{what}: counter {p} conserves its events"
                );
                assert_eq!(owed, 0, "{what}: counter {p}'s periods all accounted");
                let sampled: u64 = truth
                    .samples
                    .iter()
                    .filter(|s| usize::from(s.counter) == p)
                    .map(|s| u64::from(s.periods))
                    .sum();
                assert_eq!(
                    sampled + pmu.pmi().periods_at_halt(p as u8),
                    periods,
                    "{what}: counter {p}'s samples, none lost or made twice"
                );
            }
            assert_eq!(
                h[1].as_mut().unwrap().read(&mut d).unwrap(),
                truth.counted[1] & ((1 << 48) - 1),
                "{what}: the counting counter, modulo its 48 bits"
            );
            for h in h.iter_mut().flatten() {
                if h.state() != StateTag::Unclaimed {
                    h.release(&mut d).unwrap();
                }
            }
            let Ok(counters) = Counters::from_erased(h) else {
                panic!("every token back")
            };
            let _ = d.give_back(counters);
            runs += 1;
        }
    }
    assert_eq!(runs, 120);
}

/// What the count cannot decide: another source's NMI that arrives while
/// an overflow's PMI is in flight services the overflow (as Linux's
/// handler does), one period for one interrupt, so nothing is owed; the
/// overflow's own PMI then finds nothing and is not claimed.
#[test]
fn a_foreign_nmi_that_services_an_overflow_leaves_its_pmi_unclaimed() {
    let pmu = crate::testing::amd_pmu();
    let (mut d, c) = driver!(&pmu, Config::zen4());
    let n = SampleAfter::new(10, d.overflow_rule()).unwrap();
    let c0 =
        c.c0.configure(&mut d, &CounterConfig::counting(spec("cycles")).sampling(n));
    let _c0 = c0.unwrap().enable(&mut d).unwrap();
    inject(&mut d, CYCLES, 10);
    assert!(model(&mut d).pmi_requested());
    let (mut lvt, mut out) = (Lvt::default(), Vec::new());
    let foreign = pmi(&mut d, &mut lvt, 1, &mut out);
    assert_eq!(
        foreign.overflowed, 1,
        "the other source's NMI serviced counter 0"
    );
    assert!(model(&mut d).take_pmi());
    let own = pmi(&mut d, &mut lvt, 2, &mut out);
    assert!(!own.is_ours(), "counter 0's own PMI, unclaimed");
    assert_eq!(out.len(), 1, "one sample, not two");
}

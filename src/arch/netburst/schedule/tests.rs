//! Scheduler tests: hand-made sets (Linux's greedy failures, sibling
//! conflicts, saturation, minimal conflicts, occupied registers) and a
//! randomised comparison against an independent brute-force checker.

use super::flow::*;
use super::*;
use crate::arch::netburst::Block;
use crate::arch::netburst::Pmu;
use Escr::*;
use LogicalProcessor::{T0, T1};
use std::format;
use std::string::{String, ToString};
use std::vec::Vec;

// ------------------------------------------------------------------ helpers

/// Model 2 stepping 9 (after F27H): every event but `instr_completed`.
const P2: Part = Part::new(2, 9);
/// Model 3: `instr_completed`, no IQ_ESCR0/1.
const P3: Part = Part::new(3, 3);

fn spec(s: &str) -> EventSpec {
    EventSpec::parse(s, Pmu::NetburstP).unwrap()
}

fn req(s: &str, lp: LogicalProcessor) -> Request {
    Request::new(spec(s), lp)
}

/// `event` with its first catalog mask.
fn ev(event: EventName, lp: LogicalProcessor) -> Request {
    Request::new(EventSpec::with_masks(Pmu::NetburstP, event, 1).unwrap(), lp)
}

fn ctr(n: u8) -> Counter {
    Counter::from_index(n).unwrap()
}

fn mask(idx: &[usize]) -> u32 {
    idx.iter().fold(0, |m, i| m | 1 << i)
}

fn counters(idx: &[u8]) -> CounterSet {
    idx.iter().fold(CounterSet::EMPTY, |s, &n| s.with(ctr(n)))
}

fn escrs(list: &[Escr]) -> EscrSet {
    EscrSet::from_slice(list)
}

fn conflict(r: Result<Schedule, ScheduleError>) -> Conflict {
    match r {
        Err(ScheduleError::Conflict(c)) => c,
        other => panic!("expected a conflict, got {other:?}"),
    }
}

/// Every property a schedule must have, checked from the catalog and the
/// MSR tables directly.
fn assert_valid(part: Part, requests: &[Request], occupied: Occupied, s: &Schedule) {
    assert_eq!(s.len(), requests.len());
    let (mut used_e, mut used_c) = (EscrSet::EMPTY, CounterSet::EMPTY);
    for (i, (r, a)) in requests.iter().zip(s.as_slice()).enumerate() {
        let e = a.escr();
        assert!(r.event().allows(e), "request {i}: {e:?} not allowed");
        assert!(e.available_on(part.model()), "request {i}: {e:?} absent");
        assert!(r.allowed_escrs().contains(e), "request {i}: excluded");
        assert!(e.feeds(a.counter()), "request {i}: not wired");
        assert!(!used_e.contains(e), "request {i}: ESCR {e:?} reused");
        assert!(!used_c.contains(a.counter()), "request {i}: counter reused");
        assert!(!occupied.escrs().contains(e), "request {i}: occupied ESCR");
        assert!(
            !occupied.counters().contains(a.counter()),
            "occupied counter"
        );
        if f27_restricted(part, r.event()) {
            assert_ne!(e, FsbEscr1, "request {i}: FSB_ESCR1 before F27H");
        }
        used_e = used_e.with(e);
        used_c = used_c.with(a.counter());
        assert_eq!(s.get(i), Some(*a));
    }
    assert_eq!(s.get(requests.len()), None);
}

/// The F27H rule, written out independently: IOQ events, signature < F27H.
fn f27_restricted(part: Part, e: EventName) -> bool {
    let old = part.model() < 2 || (part.model() == 2 && part.stepping() < 7);
    old && matches!(e, EventName::IoqAllocation | EventName::IoqActiveEntries)
}

/// Every (ESCR, counter) a request could use alone, from the catalog and
/// `Escr::counters`, independently of the scheduler's tables.
fn options(part: Part, r: &Request, occupied: Occupied) -> Vec<(Escr, Counter)> {
    let mut out = Vec::new();
    for &e in r.event().info().escrs {
        let ok = e.available_on(part.model())
            && !(e == FsbEscr1 && f27_restricted(part, r.event()))
            && r.allowed_escrs().contains(e)
            && !occupied.escrs().contains(e);
        if !ok {
            continue;
        }
        for c in Counter::ALL {
            if e.feeds(c) && !occupied.counters().contains(c) {
                out.push((e, c));
            }
        }
    }
    out
}

/// Exhaustive search: can the requests of `subset` (bit mask) all be
/// placed? Plain backtracking over every (ESCR, counter) option.
fn brute(part: Part, requests: &[Request], occupied: Occupied, subset: u32) -> bool {
    let opts: Vec<Vec<(Escr, Counter)>> = requests
        .iter()
        .enumerate()
        .filter(|(i, _)| subset & (1 << i) != 0)
        .map(|(_, r)| options(part, r, occupied))
        .collect();
    fn go(opts: &[Vec<(Escr, Counter)>], used_e: u64, used_c: u32) -> bool {
        let Some((first, rest)) = opts.split_first() else {
            return true;
        };
        first.iter().any(|&(e, c)| {
            let (be, bc) = (1u64 << e as u32, 1u32 << c.index());
            used_e & be == 0 && used_c & bc == 0 && go(rest, used_e | be, used_c | bc)
        })
    }
    go(&opts, 0, 0)
}

fn all(n: usize) -> u32 {
    if n == 0 { 0 } else { u32::MAX >> (32 - n) }
}

/// A conflict is right iff its members cannot be placed, every proper
/// subset can (checked one member at a time: feasibility is monotone), the
/// registers named can serve exactly one fewer, and every option of every
/// member uses one of them.
fn assert_conflict_minimal(part: Part, requests: &[Request], occupied: Occupied, c: &Conflict) {
    let set = c.requests();
    assert!(c.len() >= 2, "{c:?}");
    assert!(
        !brute(part, requests, occupied, set),
        "not infeasible: {c:?}"
    );
    for i in 0..requests.len() {
        if set & (1 << i) != 0 {
            assert!(
                brute(part, requests, occupied, set & !(1 << i)),
                "not minimal without {i}: {c:?}"
            );
            assert_eq!(
                c.members().find(|m| m.0 == i).unwrap().1,
                requests[i].event()
            );
            for (e, k) in options(part, &requests[i], occupied) {
                assert!(
                    c.escrs().contains(e) || c.counters().contains(k),
                    "request {i} can use {e:?}/{k:?} outside the cut {c:?}"
                );
            }
        }
    }
    assert_eq!(c.capacity(), c.len() - 1, "{c:?}");
    for k in c.counters().iter() {
        assert!(!occupied.counters().contains(k));
    }
}

/// Linux's p4_pmu_schedule_events as `arch/x86/events/intel/p4.c` has it, for
/// the events of one logical CPU, on this crate's catalog: in list order, the
/// thread's ESCR (`escr_msr[thread]`: the ESCR0 side for thread 0, ESCR1 for
/// thread 1; single-ESCR events use their one ESCR), the first free counter
/// of `cntr[thread]` (BPU block: counter 0 / 2, or 0 / 1 and 2 / 3 for
/// single-ESCR events; other blocks: the ESCR's counters), with counter and
/// ESCR masks local to that CPU. `Err(i)`: request i failed.
fn linux_greedy(requests: &[Request]) -> Result<Vec<(Escr, Counter)>, usize> {
    let (mut used_e, mut used_c) = (EscrSet::EMPTY, CounterSet::EMPTY);
    let mut out = Vec::new();
    for (i, r) in requests.iter().enumerate() {
        let t = match r.processor() {
            T0 => 0,
            T1 => 1,
        };
        let list = r.event().info().escrs;
        let e = if list.len() == 2 { list[t] } else { list[0] };
        let mut cntr: Vec<Counter> = e.counters().iter().collect();
        if e.block() == Block::Bpu {
            cntr = std::vec![if list.len() == 2 { cntr[0] } else { cntr[t] }];
        }
        let Some(c) = cntr.into_iter().find(|c| !used_c.contains(*c)) else {
            return Err(i);
        };
        if used_e.contains(e) {
            return Err(i);
        }
        used_e = used_e.with(e);
        used_c = used_c.with(c);
        out.push((e, c));
    }
    Ok(out)
}

/// Plain first-fit without the thread partition: in list order, the first
/// allowed free ESCR with a free counter, its first free counter.
fn first_fit(part: Part, requests: &[Request]) -> Result<Vec<(Escr, Counter)>, usize> {
    let (mut used_e, mut used_c) = (EscrSet::EMPTY, CounterSet::EMPTY);
    let mut out = Vec::new();
    for (i, r) in requests.iter().enumerate() {
        let found = options(part, r, Occupied::NONE)
            .into_iter()
            .find(|(e, c)| !used_e.contains(*e) && !used_c.contains(*c));
        let Some((e, c)) = found else { return Err(i) };
        used_e = used_e.with(e);
        used_c = used_c.with(c);
        out.push((e, c));
    }
    Ok(out)
}

/// Fixed-seed xorshift64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }
}

/// The saturating set: two requests per BPU/MS/FLAME group, three per IQ
/// group, two of them on single-ESCR events, alternating processors.
fn saturating_set() -> Vec<Request> {
    use EventName::*;
    let events = [
        BsqAllocation,
        IoqAllocation,
        IoqActiveEntries,
        BsqActiveEntries,
        TcMsXfer,
        TcMsXfer,
        RetiredBranchType,
        RetiredBranchType,
        SseInputAssist,
        SseInputAssist,
        MemoryCancel,
        MemoryCancel,
        InstrRetired,
        InstrRetired,
        BranchRetired,
        BranchRetired,
        ResourceStall,
        ResourceStall,
    ];
    events
        .iter()
        .enumerate()
        .map(|(i, &e)| ev(e, if i % 2 == 0 { T0 } else { T1 }))
        .collect()
}

// -------------------------------------------------------------------- tests

#[test]
fn group_tables_match_table_18_63() {
    let mut seen = 0u64;
    let mut total = 0;
    for g in 0..GROUPS {
        let c = GROUP_COUNTERS[g];
        total += c.count_ones();
        for e in Escr::ALL {
            let in_g = GROUP_ESCRS[g] & (1 << e as u32) != 0;
            assert_eq!(in_g, ESCR_GROUP[e as usize] as usize == g);
            if in_g {
                assert_eq!(e.counters().bits(), c, "{e:?}");
                assert_eq!(seen & (1 << e as u32), 0);
                seen |= 1 << e as u32;
            }
        }
        // Groups are disjoint in counters too.
        for other in &GROUP_COUNTERS[..g] {
            assert_eq!(other & c, 0);
        }
    }
    assert_eq!(seen, EscrSet::ALL.bits());
    assert_eq!(total, 18);
    assert_eq!(SIDE_ESCRS[0] | SIDE_ESCRS[1], EscrSet::ALL.bits());
    assert_eq!(SIDE_ESCRS[0] & SIDE_ESCRS[1], 0);
}

#[test]
fn escr_set_basics() {
    let s = escrs(&[CruEscr0, FsbEscr1]);
    assert_eq!(s.len(), 2);
    assert!(s.contains(CruEscr0) && !s.contains(CruEscr1));
    assert_eq!(s.iter().collect::<Vec<_>>(), [FsbEscr1, CruEscr0]);
    assert_eq!(EscrSet::ALL.len(), 45);
    assert_eq!(EscrSet::from_bits_truncate(u64::MAX), EscrSet::ALL);
    assert_eq!(s.difference(s), EscrSet::EMPTY);
    assert_eq!(s.union(EscrSet::EMPTY), s);
}

#[test]
fn empty_set() {
    let s = schedule(P2, &[], Occupied::NONE).unwrap();
    assert!(s.is_empty());
    assert_eq!(s.as_slice(), &[]);
}

#[test]
fn linux_same_thread_pairs_fail_but_fit() {
    // Linux's own examples: one ESCR per event per thread.
    let cases: [&[Request]; 4] = [
        // instructions + branch-misses, both CRU_ESCR0 for thread 0.
        &[
            req("instr_retired:NBOGUSNTAG:BOGUSNTAG", T0),
            req("mispred_branch_retired", T0),
        ],
        // cache-references + cache-misses, both BSU_ESCR0 for thread 0.
        &[
            req("BSQ_cache_reference:RD_2ndL_HITS:RD_2ndL_HITE", T0),
            req("BSQ_cache_reference:RD_2ndL_MISS", T0),
        ],
        // Two MS_ESCR0 events on thread 0.
        &[req("tc_ms_xfer", T0), req("uop_queue_writes:FROM_ROM", T0)],
        // Thread 1, CRU_ESCR1 twice.
        &[
            req("uops_retired:NBOGUS", T1),
            req("instr_retired:NBOGUSNTAG", T1),
        ],
    ];
    for set in cases {
        assert_eq!(linux_greedy(set), Err(1), "{set:?}");
        let s = schedule(P2, set, Occupied::NONE).unwrap();
        assert_valid(P2, set, Occupied::NONE, &s);
        // The request's own side first, then the other.
        let side = |lp| if lp == T0 { 0 } else { 1 };
        assert_eq!(s.as_slice()[0].escr().side(), side(set[0].processor()));
        assert_eq!(s.as_slice()[1].escr().side(), 1 - side(set[1].processor()));
    }
}

#[test]
fn greedy_order_failure_fits() {
    // BSQ_cache_reference first takes BSU_ESCR0, the only ESCR of
    // BSQ_allocation: both greedy schedulers fail, the set fits.
    let set = [
        req("BSQ_cache_reference:RD_2ndL_MISS", T0),
        req("BSQ_allocation:REQ_TYPE0", T0),
    ];
    assert_eq!(linux_greedy(&set), Err(1));
    assert_eq!(first_fit(P2, &set), Err(1));
    let s = schedule(P2, &set, Occupied::NONE).unwrap();
    assert_valid(P2, &set, Occupied::NONE, &s);
    assert_eq!(s.as_slice()[0].escr(), BsuEscr1);
    assert_eq!(s.as_slice()[1].escr(), BsuEscr0);

    // Linux, thread 1: BSQ_cache_reference takes BSU_ESCR1, the only ESCR
    // of BSQ_active_entries.
    let set = [
        req("BSQ_cache_reference:RD_2ndL_MISS", T1),
        req("BSQ_active_entries:REQ_TYPE0", T1),
    ];
    assert_eq!(linux_greedy(&set), Err(1));
    let s = schedule(P2, &set, Occupied::NONE).unwrap();
    assert_valid(P2, &set, Occupied::NONE, &s);
    assert_eq!(s.as_slice()[0].escr(), BsuEscr0);

    // cycles and bus-cycles and IOQ_allocation on thread 1: Linux fails on
    // the second; three FSB events for two FSB ESCRs is impossible anyway,
    // and the error says so.
    let set = [
        req("global_power_events", T1),
        req("FSB_data_activity:DRDY_DRV:DRDY_OWN:e", T1),
        req("IOQ_allocation:TYPE_BIT0", T1),
    ];
    assert_eq!(linux_greedy(&set), Err(1));
    let c = conflict(schedule(P2, &set, Occupied::NONE));
    assert_eq!(c.requests(), mask(&[0, 1, 2]));
    assert_eq!(c.escrs(), escrs(&[FsbEscr0, FsbEscr1]));
    assert_conflict_minimal(P2, &set, Occupied::NONE, &c);
}

#[test]
fn sibling_single_escr_conflicts_are_detected() {
    // Linux (per-CPU masks) gives both siblings FSB_ESCR1; here it is one
    // ESCR for the whole set.
    let set = [
        req("IOQ_active_entries:TYPE_BIT0", T0),
        req("IOQ_active_entries:TYPE_BIT0", T1),
        req("IOQ_allocation:TYPE_BIT0", T0),
    ];
    let t0 = linux_greedy(&[set[0], set[2]]).unwrap();
    let t1 = linux_greedy(&[set[1]]).unwrap();
    assert_eq!(t0[0].0, FsbEscr1);
    assert_eq!(t1[0].0, FsbEscr1); // double-booked by Linux
    let c = conflict(schedule(P2, &set, Occupied::NONE));
    assert_eq!(c.requests(), mask(&[0, 1]));
    assert_eq!(c.escrs(), escrs(&[FsbEscr1]));
    assert!(c.counters().is_empty());
    assert_conflict_minimal(P2, &set, Occupied::NONE, &c);
    assert_eq!(
        ScheduleError::Conflict(c).to_string(),
        "IOQ_active_entries (request 0, T0) and IOQ_active_entries (request 1, T1) cannot \
         all be counted together: each needs one of MSR_FSB_ESCR1, which can serve only 1 \
         of these 2"
    );

    // The sibling conflict Linux misses: thread 0 IOQ_active_entries and
    // thread 1 cycles, both on FSB_ESCR1 and counter 2 under Linux.
    let t0 = linux_greedy(&[
        req("IOQ_allocation:TYPE_BIT0", T0),
        req("IOQ_active_entries:TYPE_BIT0", T0),
    ])
    .unwrap();
    let t1 = linux_greedy(&[req("global_power_events", T1)]).unwrap();
    assert_eq!(t0[1], (FsbEscr1, ctr(2)));
    assert_eq!(t1[0], (FsbEscr1, ctr(2)));

    // BSQ_allocation on both threads: BSU_ESCR0 twice under Linux.
    let set = [
        req("BSQ_allocation:REQ_TYPE0", T0),
        req("BSQ_allocation:REQ_TYPE0", T1),
    ];
    assert_eq!(linux_greedy(&set[..1]).unwrap()[0], (BsuEscr0, ctr(0)));
    assert_eq!(linux_greedy(&set[1..]).unwrap()[0], (BsuEscr0, ctr(1)));
    let c = conflict(schedule(P2, &set, Occupied::NONE));
    assert_eq!((c.requests(), c.escrs()), (0b11, escrs(&[BsuEscr0])));

    // Where the second can go elsewhere, it does: BSQ_active_entries (T0)
    // has only BSU_ESCR1; thread 1's BSQ_cache_reference, which Linux puts
    // on BSU_ESCR1 and counter 2 as well, moves to BSU_ESCR0.
    let set = [
        req("BSQ_active_entries:REQ_TYPE0", T0),
        req("BSQ_cache_reference:RD_2ndL_MISS", T1),
    ];
    assert_eq!(linux_greedy(&set[..1]).unwrap()[0], (BsuEscr1, ctr(2)));
    assert_eq!(linux_greedy(&set[1..]).unwrap()[0], (BsuEscr1, ctr(2)));
    let s = schedule(P2, &set, Occupied::NONE).unwrap();
    assert_valid(P2, &set, Occupied::NONE, &s);
    assert_eq!(s.as_slice()[0].escr(), BsuEscr1);
    assert_eq!(s.as_slice()[1].escr(), BsuEscr0);

    // And the same when the sibling's event is already running.
    let occ = Occupied::NONE.with_running(s.as_slice()[0], EventName::BsqActiveEntries);
    let more = [req("BSQ_cache_reference:RD_2ndL_MISS", T1)];
    let s2 = schedule(P2, &more, occ).unwrap();
    assert_valid(P2, &more, occ, &s2);
    assert_eq!(s2.as_slice()[0].escr(), BsuEscr0);
}

#[test]
fn eighteen_counters_saturate() {
    let set = saturating_set();
    let s = schedule(P2, &set, Occupied::NONE).unwrap();
    assert_valid(P2, &set, Occupied::NONE, &s);
    assert_eq!(s.counters().bits(), (1 << 18) - 1);
    assert_eq!(s.escrs().len(), 18);
    // Linux cannot: the thread partition halves the counters.
    assert!(linux_greedy(&set).is_err());
    // Any order works and gives the same counters.
    let mut rng = Rng(0x5eed_0001);
    for _ in 0..200 {
        let mut perm = set.clone();
        for i in (1..perm.len()).rev() {
            perm.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let s = schedule(P2, &perm, Occupied::NONE).unwrap();
        assert_valid(P2, &perm, Occupied::NONE, &s);
        assert_eq!(s.counters().bits(), (1 << 18) - 1);
    }
    // All on one processor: still all 18.
    let t0: Vec<Request> = set.iter().map(|r| Request::new(*r.spec(), T0)).collect();
    let s = schedule(P2, &t0, Occupied::NONE).unwrap();
    assert_valid(P2, &t0, Occupied::NONE, &s);
    // A 19th request.
    let mut more = set.clone();
    more.push(req("global_power_events", T0));
    assert_eq!(
        schedule(P2, &more, Occupied::NONE),
        Err(ScheduleError::TooMany { requests: 19 })
    );
    assert_eq!(
        ScheduleError::TooMany { requests: 19 }.to_string(),
        "19 event requests, but at most 18 (one per counter) can be counted at once"
    );
    // One counter taken: the exact subset that no longer fits.
    for n in 0..18u8 {
        let occ = Occupied::NONE.with_counter(ctr(n));
        let c = conflict(schedule(P2, &set, occ));
        assert_conflict_minimal(P2, &set, occ, &c);
        assert!(c.involves_occupied());
        // The conflict stays inside the block of the counter taken.
        for (i, _, _) in c.members() {
            for (e, _) in options(P2, &set[i], occ) {
                assert_eq!(e.block(), ctr(n).block());
            }
        }
    }
}

#[test]
fn minimal_conflict_escrs_only() {
    // The three CRU_ESCR0/1 events of the module docs among others.
    let set = [
        req("instr_retired:NBOGUSNTAG", T0),
        req("mispred_branch_retired", T0),
        req("instr_completed:NBOGUS", T1),
        req("global_power_events", T0),
        req("uops_retired:NBOGUS", T1),
        req("branch_retired:MMNP", T1),
    ];
    let c = conflict(schedule(P3, &set, Occupied::NONE));
    assert_eq!(c.requests(), mask(&[0, 1, 2]));
    assert_eq!(c.escrs(), escrs(&[CruEscr0, CruEscr1]));
    assert!(c.counters().is_empty());
    assert!(!c.involves_occupied());
    assert_conflict_minimal(P3, &set, Occupied::NONE, &c);
    assert_eq!(
        ScheduleError::Conflict(c).to_string(),
        "instr_retired (request 0, T0), mispred_branch_retired (request 1, T0) and \
         instr_completed (request 2, T1) cannot all be counted together: each needs one of \
         MSR_CRU_ESCR0 and MSR_CRU_ESCR1, which can serve only 2 of these 3"
    );
    // Linux fails too, but says only -EINVAL.
    assert!(linux_greedy(&set).is_err());
}

#[test]
fn minimal_conflict_counters_only() {
    // BPU side 1 taken by the sibling: three BPU-block events for two
    // counters.
    let occ = Occupied::NONE.with_counter(ctr(2)).with_counter(ctr(3));
    let set = [
        req("BPU_fetch_request", T0),
        req("tc_ms_xfer", T0),
        req("ITLB_reference:HIT", T1),
        req("MOB_load_replay:NO_STA", T0),
    ];
    let c = conflict(schedule(P2, &set, occ));
    assert_eq!(c.requests(), mask(&[0, 2, 3]));
    assert!(c.escrs().is_empty());
    assert_eq!(c.counters(), counters(&[0, 1]));
    assert!(c.involves_occupied());
    assert_conflict_minimal(P2, &set, occ, &c);
    assert_eq!(
        ScheduleError::Conflict(c).to_string(),
        "BPU_fetch_request (request 0, T0), ITLB_reference (request 2, T1) and \
         MOB_load_replay (request 3, T0) cannot all be counted together: each needs one of \
         MSR_BPU_COUNTER0 and MSR_BPU_COUNTER1, which can serve only 2 of these 3 (other \
         registers they could use are occupied)"
    );
}

#[test]
fn minimal_conflict_mixed_cut() {
    // BSQ_allocation has only BSU_ESCR0; BSQ_cache_reference BSU_ESCR0 or
    // BSU_ESCR1 (counters 2, 3); the other two are held to side 1. Every
    // placement uses BSU_ESCR0 or counter 2 or 3: three for four.
    let set = [
        req("BSQ_allocation:REQ_TYPE0", T0),
        req("BSQ_cache_reference:RD_2ndL_MISS", T0),
        req("ITLB_reference:HIT", T1).restricted_to(escrs(&[ItlbEscr1])),
        req("MOB_load_replay:NO_STA", T1).restricted_to(escrs(&[MobEscr1])),
    ];
    let c = conflict(schedule(P2, &set, Occupied::NONE));
    assert_eq!(c.requests(), mask(&[0, 1, 2, 3]));
    assert_eq!(c.escrs(), escrs(&[BsuEscr0]));
    assert_eq!(c.counters(), counters(&[2, 3]));
    assert_conflict_minimal(P2, &set, Occupied::NONE, &c);
    assert_eq!(
        ScheduleError::Conflict(c).to_string(),
        "BSQ_allocation (request 0, T0), BSQ_cache_reference (request 1, T0), ITLB_reference \
         (request 2, T1) and MOB_load_replay (request 3, T1) cannot all be counted together: \
         each needs one of MSR_BSU_ESCR0, MSR_BPU_COUNTER2 and MSR_BPU_COUNTER3, which can \
         serve only 3 of these 4"
    );
    // Any three of them fit.
    for drop in 0..4 {
        let sub: Vec<Request> = (0..4).filter(|i| *i != drop).map(|i| set[i]).collect();
        let s = schedule(P2, &sub, Occupied::NONE).unwrap();
        assert_valid(P2, &sub, Occupied::NONE, &s);
    }
}

#[test]
fn iq_block_conflict_of_seven() {
    // Seven IQ-block events for six IQ counters: every six fit, so the
    // minimal subset is all seven, and the cut is the six counters.
    let set = [
        req("global_power_events", T0),
        req("instr_retired:NBOGUSNTAG", T0),
        req("instr_retired:NBOGUSTAG", T1),
        req("branch_retired:MMNP", T0),
        req("branch_retired:MMTP", T1),
        req("resource_stall", T0),
        req("resource_stall", T1),
        req("uop_type:TAGLOADS", T0),
    ];
    let c = conflict(schedule(P2, &set, Occupied::NONE));
    assert_eq!(c.requests(), mask(&[1, 2, 3, 4, 5, 6, 7]));
    assert_eq!(c.counters(), counters(&[12, 13, 14, 15, 16, 17]));
    assert!(c.escrs().is_empty());
    assert_conflict_minimal(P2, &set, Occupied::NONE, &c);
}

#[test]
fn single_request_errors() {
    // instr_completed exists only on models 3, 4, 6.
    let set = [
        req("global_power_events", T0),
        req("instr_completed:NBOGUS", T1),
    ];
    let e = schedule(P2, &set, Occupied::NONE).unwrap_err();
    assert_eq!(
        e,
        ScheduleError::EventUnavailable {
            request: 1,
            event: EventName::InstrCompleted,
            processor: T1,
            model: 2
        }
    );
    assert_eq!(
        e.to_string(),
        "instr_completed (request 1, T1) does not exist on family 0Fh model 2"
    );
    assert!(schedule(Part::new(6, 5), &set, Occupied::NONE).is_ok());

    // IOQ_active_entries without IOQ_allocation.
    let set = [req("IOQ_active_entries:TYPE_BIT0", T0)];
    let e = schedule(P2, &set, Occupied::NONE).unwrap_err();
    assert_eq!(
        e,
        ScheduleError::MissingCompanion {
            request: 0,
            event: EventName::IoqActiveEntries,
            processor: T0,
            needs: EventName::IoqAllocation
        }
    );
    assert_eq!(
        e.to_string(),
        "IOQ_active_entries (request 0, T0) must be programmed together with IOQ_allocation, \
         which is neither requested nor running"
    );
    // Satisfied by a running IOQ_allocation (of either processor).
    let occ = Occupied::NONE.with_running(
        Assignment::new(FsbEscr0, ctr(1)).unwrap(),
        EventName::IoqAllocation,
    );
    let s = schedule(P2, &set, occ).unwrap();
    assert_eq!(s.as_slice()[0].escr(), FsbEscr1);
    assert_valid(P2, &set, occ, &s);

    // Before F27H the IOQ events may not use FSB_ESCR1.
    let set = [
        req("IOQ_allocation:TYPE_BIT0", T0),
        req("IOQ_active_entries:TYPE_BIT0", T0),
    ];
    for (part, ok) in [
        (Part::new(0, 9), false),
        (Part::new(1, 3), false),
        (Part::new(2, 4), false),
        (Part::new(2, 6), false),
        (Part::new(2, 7), true),
        (Part::new(2, 9), true),
        (Part::new(3, 0), true),
    ] {
        assert_eq!(part.before_f27h(), !ok);
        let r = schedule(part, &set, Occupied::NONE);
        if ok {
            assert_valid(part, &set, Occupied::NONE, &r.unwrap());
        } else {
            let e = r.unwrap_err();
            assert_eq!(
                e,
                ScheduleError::NoEscr {
                    request: 1,
                    event: EventName::IoqActiveEntries,
                    processor: T0,
                    excluded: EscrSet::EMPTY,
                    absent: escrs(&[FsbEscr1]),
                    occupied: EscrSet::EMPTY,
                }
            );
            assert_eq!(
                e.to_string(),
                "IOQ_active_entries (request 1, T0) has no usable ESCR: MSR_FSB_ESCR1 is not \
                 available for it on this processor"
            );
        }
    }
    // Two IOQ_allocation before F27H: both need FSB_ESCR0. Other FSB
    // events keep FSB_ESCR1.
    let old = Part::new(1, 2);
    let set = [
        req("IOQ_allocation:TYPE_BIT0", T0),
        req("IOQ_allocation:TYPE_BIT0", T1),
    ];
    let c = conflict(schedule(old, &set, Occupied::NONE));
    assert_eq!(c.escrs(), escrs(&[FsbEscr0]));
    let set = [
        req("IOQ_allocation:TYPE_BIT0", T0),
        req("global_power_events", T0),
    ];
    let s = schedule(old, &set, Occupied::NONE).unwrap();
    assert_eq!(s.as_slice()[1].escr(), FsbEscr1);

    // Every ESCR occupied or excluded.
    let occ = Occupied::NONE.with_escr(FsbEscr0);
    let set = [req("global_power_events", T1).restricted_to(escrs(&[FsbEscr0, CruEscr0]))];
    let e = schedule(P2, &set, occ).unwrap_err();
    assert_eq!(
        e.to_string(),
        "global_power_events (request 0, T1) has no usable ESCR: MSR_FSB_ESCR1 is excluded \
         by the request; MSR_FSB_ESCR0 is occupied"
    );

    // Free ESCRs, but all their counters taken.
    let occ = [12, 13, 14, 15, 16, 17]
        .into_iter()
        .fold(Occupied::NONE, |o, n| o.with_counter(ctr(n)));
    let set = [
        req("global_power_events", T0),
        req("instr_retired:NBOGUSNTAG", T1),
    ];
    let e = schedule(P2, &set, occ).unwrap_err();
    assert_eq!(
        e,
        ScheduleError::NoCounter {
            request: 1,
            event: EventName::InstrRetired,
            processor: T1,
            escrs: escrs(&[CruEscr0, CruEscr1]),
            counters: counters(&[12, 13, 14, 15, 16, 17]),
        }
    );
    assert_eq!(
        e.to_string(),
        "instr_retired (request 1, T1) has no free counter: MSR_CRU_ESCR0 and MSR_CRU_ESCR1 \
         can only feed MSR_IQ_COUNTER0, MSR_IQ_COUNTER1, MSR_IQ_COUNTER2, MSR_IQ_COUNTER3, \
         MSR_IQ_COUNTER4 and MSR_IQ_COUNTER5, which are occupied"
    );
}

#[test]
fn scheduling_around_running_counters() {
    // Thread 0's set first, then thread 1's around it.
    let first = [
        req("global_power_events", T0),
        req("instr_retired:NBOGUSNTAG", T0),
        req("BSQ_cache_reference:RD_2ndL_MISS", T0),
        req("uops_retired:NBOGUS", T0),
    ];
    let s1 = schedule(P2, &first, Occupied::NONE).unwrap();
    assert_valid(P2, &first, Occupied::NONE, &s1);
    let occ = Occupied::NONE.with_schedule(&s1, &first);
    assert_eq!(occ.escrs(), s1.escrs());
    assert_eq!(occ.counters(), s1.counters());
    assert!(occ.is_running(EventName::InstrRetired));
    assert!(!occ.is_running(EventName::IoqAllocation));
    let second = [
        req("global_power_events", T1),
        req("BSQ_cache_reference:RD_2ndL_HITS", T1),
        req("tc_ms_xfer", T1),
    ];
    let s2 = schedule(P2, &second, occ).unwrap();
    assert_valid(P2, &second, occ, &s2);
    assert!(s1.escrs().intersection(s2.escrs()).is_empty());
    // A third CRU_ESCR0/1 event no longer fits: both are running.
    let third = [req("mispred_branch_retired", T1)];
    let e = schedule(P2, &third, occ).unwrap_err();
    assert_eq!(
        e.to_string(),
        "mispred_branch_retired (request 0, T1) has no usable ESCR: MSR_CRU_ESCR0 and \
         MSR_CRU_ESCR1 are occupied"
    );
    // Occupied counters alone (ESCR free) restrict the group.
    let occ = Occupied::NONE.with_counter(ctr(12)).with_counter(ctr(13));
    let s = schedule(P2, &[req("instr_retired:NBOGUSNTAG", T0)], occ).unwrap();
    assert_eq!(s.as_slice()[0].counter(), ctr(16));
}

#[test]
fn counters_in_ascending_order_pebs_last() {
    let set = [
        req("instr_retired:NBOGUSNTAG", T0),
        req("branch_retired:MMNP", T0),
        req("resource_stall", T0),
    ];
    let s = schedule(P2, &set, Occupied::NONE).unwrap();
    let got: Vec<u8> = s.as_slice().iter().map(|a| a.counter().index()).collect();
    assert_eq!(got, [12, 13, 16]);
}

#[test]
fn replay_upstream_and_disputed_select() {
    // As replay-tagging upstream, load_port_replay only on SAAT_ESCR1.
    let r = req("load_port_replay", T0).as_replay_upstream();
    assert_eq!(r.allowed_escrs(), escrs(&[SaatEscr1]));
    let s = schedule(P2, &[r], Occupied::NONE).unwrap();
    assert_eq!(s.as_slice()[0].escr(), SaatEscr1);
    let set = [r, req("store_port_replay", T1).as_replay_upstream()];
    let c = conflict(schedule(P2, &set, Occupied::NONE));
    assert_eq!(c.escrs(), escrs(&[SaatEscr1]));
    // Other events are unchanged.
    let g = req("global_power_events", T0);
    assert_eq!(g.as_replay_upstream(), g);

    // b2b_cycles: placed on an FSB ESCR, routed with Table 18-63's 6.
    for name in ["b2b_cycles:BIT1", "bnr:BIT0", "snoop:BIT2", "response:BIT1"] {
        let r = req(name, T1);
        let s = schedule(P2, &[r], Occupied::NONE).unwrap();
        let a = s.as_slice()[0];
        assert_eq!(a.escr(), FsbEscr1);
        assert_eq!(r.spec().cccr_value().escr_select().get(), 3);
        let cccr = r.cccr_value(a);
        assert_eq!(cccr.escr_select().get(), 6);
        assert_eq!(
            a.counter().escr_for_select(cccr.escr_select(), 2),
            Some(FsbEscr1)
        );
        // Only the select differs from the catalog image.
        assert_eq!(cccr.bits() & !(7 << 13), r.spec().cccr_bits() & !(7 << 13));
    }
}

#[test]
fn part_from_signature() {
    use crate::detect::CpuSignature;
    let p = Part::from_signature(&CpuSignature::from_eax(0xF27)).unwrap();
    assert_eq!((p.model(), p.stepping()), (2, 7));
    assert!(!p.before_f27h());
    assert!(
        Part::from_signature(&CpuSignature::from_eax(0xF24))
            .unwrap()
            .before_f27h()
    );
    assert_eq!(Part::from_signature(&CpuSignature::from_eax(0x6F6)), None);
    // IQ_ESCR0/1 only on models 1, 2.
    for model in 0..16 {
        let n = Part::new(model, 0)
            .escrs_for(EventName::GlobalPowerEvents)
            .len();
        assert_eq!(n, 2);
    }
}

#[test]
fn deterministic() {
    let set = saturating_set();
    let a = schedule(P2, &set, Occupied::NONE);
    for _ in 0..3 {
        assert_eq!(schedule(P2, &set, Occupied::NONE), a);
    }
    let occ = Occupied::NONE.with_counter(ctr(5));
    let b = schedule(P2, &set, occ);
    assert_eq!(schedule(P2, &set, occ), b);
}

/// Random request sets (fixed seed), compared with the exhaustive checker.
fn random_case(rng: &mut Rng, max_len: u64) -> (Part, Vec<Request>, Occupied) {
    use EventName::*;
    const PARTS: [(u8, u8); 8] = [
        (0, 5),
        (1, 2),
        (2, 4),
        (2, 7),
        (2, 9),
        (3, 3),
        (4, 1),
        (6, 5),
    ];
    // Events that compete for few ESCRs, drawn half the time.
    const CONTENDED: [EventName; 16] = [
        BsqCacheReference,
        BsqAllocation,
        BsqActiveEntries,
        IoqAllocation,
        IoqActiveEntries,
        GlobalPowerEvents,
        FsbDataActivity,
        B2bCycles,
        InstrRetired,
        MispredBranchRetired,
        UopsRetired,
        InstrCompleted,
        BranchRetired,
        TcMsXfer,
        LoadPortReplay,
        ResourceStall,
    ];
    let (model, stepping) = PARTS[rng.below(8) as usize];
    let part = Part::new(model, stepping);
    let n = 1 + rng.below(max_len) as usize;
    let mut reqs = Vec::new();
    for _ in 0..n {
        let e = if rng.chance(2) {
            CONTENDED[rng.below(16) as usize]
        } else {
            EventName::ALL[rng.below(46) as usize]
        };
        let lp = if rng.chance(2) { T0 } else { T1 };
        let mut r = ev(e, lp);
        if rng.chance(10) {
            r = r.restricted_to(EscrSet::from_bits_truncate(rng.next()));
        } else if rng.chance(10) {
            r = r.as_replay_upstream();
        }
        reqs.push(r);
    }
    let mut occ = Occupied::NONE;
    for _ in 0..rng.below(8) {
        occ = occ.with_counter(ctr(rng.below(18) as u8));
    }
    for _ in 0..rng.below(3) {
        occ = occ.with_escr(Escr::ALL[rng.below(45) as usize]);
    }
    if rng.chance(4) {
        occ.running |= 1 << IoqAllocation as u32;
    }
    (part, reqs, occ)
}

/// Checks one result against the catalog and the brute-force checker;
/// `exhaustive`: also compare feasibility of the whole set.
fn check_case(part: Part, reqs: &[Request], occ: Occupied, exhaustive: bool) -> &'static str {
    let result = schedule(part, reqs, occ);
    let unavailable = reqs.iter().any(|r| !r.event().available_on(part.model()));
    let missing = reqs.iter().any(|r| {
        r.event() == EventName::IoqActiveEntries
            && !occ.is_running(EventName::IoqAllocation)
            && !reqs.iter().any(|o| o.event() == EventName::IoqAllocation)
    });
    match &result {
        Ok(s) => {
            assert!(!unavailable && !missing);
            assert_valid(part, reqs, occ, s);
            "ok"
        }
        Err(ScheduleError::TooMany { .. }) => {
            assert!(reqs.len() > MAX_REQUESTS);
            "too many"
        }
        Err(ScheduleError::EventUnavailable { request, .. }) => {
            assert!(!reqs[*request].event().available_on(part.model()));
            "unavailable"
        }
        Err(ScheduleError::MissingCompanion { request, needs, .. }) => {
            assert_eq!(reqs[*request].event(), EventName::IoqActiveEntries);
            assert_eq!(*needs, EventName::IoqAllocation);
            assert!(missing);
            "companion"
        }
        Err(ScheduleError::NoEscr {
            request,
            excluded,
            absent,
            occupied,
            ..
        }) => {
            let r = &reqs[*request];
            assert!(brute(part, reqs, occ, 0) && !brute(part, reqs, occ, 1 << request));
            let catalog = EscrSet::from_slice(r.event().info().escrs);
            assert_eq!(excluded.union(*absent).union(*occupied), catalog);
            assert_eq!(
                excluded.len() + absent.len() + occupied.len(),
                catalog.len()
            );
            assert!(options(part, r, occ).is_empty());
            "no ESCR"
        }
        Err(ScheduleError::NoCounter {
            request, counters, ..
        }) => {
            assert!(!brute(part, reqs, occ, 1 << request));
            for c in counters.iter() {
                assert!(occ.counters().contains(c));
            }
            "no counter"
        }
        Err(ScheduleError::Conflict(c)) => {
            assert_conflict_minimal(part, reqs, occ, c);
            // Display never fails and names every member.
            let text = ScheduleError::Conflict(*c).to_string();
            for (_, e, _) in c.members() {
                assert!(text.contains(e.name()), "{text}");
            }
            "conflict"
        }
    }
    .tap(|_| {
        if exhaustive && !unavailable && !missing && reqs.len() <= MAX_REQUESTS {
            // Complete: the scheduler fails only where no placement exists.
            assert_eq!(
                result.is_ok(),
                brute(part, reqs, occ, all(reqs.len())),
                "{part:?} {reqs:?} {occ:?} -> {result:?}"
            );
        }
    })
}

trait Tap: Sized {
    fn tap(self, f: impl FnOnce(&Self)) -> Self {
        f(&self);
        self
    }
}
impl<T> Tap for T {}

#[test]
fn random_small_sets_match_brute_force() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut tally: Vec<(&str, u32)> = Vec::new();
    for _ in 0..6000 {
        let (part, reqs, occ) = random_case(&mut rng, 6);
        let kind = check_case(part, &reqs, occ, true);
        match tally.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, n)) => *n += 1,
            None => tally.push((kind, 1)),
        }
    }
    // Every outcome occurs often enough to mean something.
    let count = |k: &str| tally.iter().find(|t| t.0 == k).map_or(0, |t| t.1);
    for k in [
        "ok",
        "conflict",
        "no ESCR",
        "no counter",
        "companion",
        "unavailable",
    ] {
        assert!(count(k) >= 30, "{k}: {tally:?}");
    }
}

#[test]
fn random_large_sets_are_valid_and_conflicts_minimal() {
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    let mut conflicts = 0;
    for _ in 0..3000 {
        let (part, reqs, occ) = random_case(&mut rng, 18);
        if check_case(part, &reqs, occ, reqs.len() <= 8) == "conflict" {
            conflicts += 1;
        }
    }
    assert!(conflicts >= 100, "{conflicts}");
}

#[test]
fn arbitrary_inputs_never_panic() {
    let mut rng = Rng(0xdead_beef_cafe_f00d);
    for _ in 0..3000 {
        let part = Part::new(rng.below(256) as u8, rng.below(256) as u8);
        let n = rng.below(25) as usize;
        let reqs: Vec<Request> = (0..n)
            .map(|_| {
                let e = EventName::ALL[rng.below(46) as usize];
                let lp = if rng.chance(2) { T0 } else { T1 };
                let mut r = ev(e, lp);
                if rng.chance(3) {
                    r = r.restricted_to(EscrSet::from_bits_truncate(rng.next()));
                }
                r
            })
            .collect();
        let occ = Occupied {
            escrs: EscrSet::from_bits_truncate(rng.next() & rng.next()),
            counters: counter_set(rng.next() as u32 & rng.next() as u32),
            running: rng.next(),
        };
        let r = schedule(part, &reqs, occ);
        if let Err(e) = &r {
            let _ = format!("{e}");
        }
        if let Ok(s) = &r {
            assert_valid(part, &reqs, occ, s);
        }
    }
}

/// Runs the scheduler and counts its augmenting-path searches.
fn searches(part: Part, requests: &[Request], occupied: Occupied) -> u32 {
    let p = Problem::new(part, requests, occupied).unwrap();
    let _ = p.solve(requests, occupied);
    p.searches.get()
}

#[test]
fn worst_case_work_is_bounded() {
    // One search per request placed, plus the one that fails.
    const BOUND: u32 = MAX_REQUESTS as u32;
    // Feasible: one search per request.
    let set = saturating_set();
    assert_eq!(searches(P2, &set, Occupied::NONE), 18);
    // Infeasible, random: within the documented bound.
    let mut rng = Rng(0x1357_9bdf_2468_ace0);
    let mut worst = 0;
    for _ in 0..3000 {
        let (part, reqs, occ) = random_case(&mut rng, 18);
        if let Ok(p) = Problem::new(part, &reqs, occ) {
            let _ = p.solve(&reqs, occ);
            worst = worst.max(p.searches.get());
        }
    }
    assert!(worst <= BOUND, "{worst}");
    // The seven-for-six IQ conflict padded to 18 requests.
    let set = worst_case_infeasible();
    let n = searches(P2, &set, Occupied::NONE);
    assert!(n <= BOUND, "{n}");
    assert!(matches!(
        schedule(P2, &set, Occupied::NONE),
        Err(ScheduleError::Conflict(c)) if c.len() == 7
    ));
}

/// 18 requests whose minimal conflict is the largest one possible (seven
/// IQ events for six IQ counters), listed so the conflict shows up late.
fn worst_case_infeasible() -> Vec<Request> {
    let mut set = saturating_set();
    set.truncate(12);
    set.extend([
        req("instr_retired:NBOGUSNTAG", T0),
        req("instr_retired:NBOGUSTAG", T1),
        req("branch_retired:MMNP", T0),
        req("branch_retired:MMTP", T1),
        req("resource_stall", T0),
        req("uop_type:TAGLOADS", T1),
    ]);
    set.insert(0, req("resource_stall", T1));
    set.remove(12); // drop one FLAME event to stay at 18
    set
}

#[test]
fn error_display_is_total() {
    // Every variant renders, including empty register sets.
    let errs = [
        ScheduleError::TooMany { requests: 0 },
        ScheduleError::NoEscr {
            request: 0,
            event: EventName::BsqAllocation,
            processor: T0,
            excluded: EscrSet::EMPTY,
            absent: EscrSet::EMPTY,
            occupied: EscrSet::EMPTY,
        },
        ScheduleError::NoCounter {
            request: 0,
            event: EventName::BsqAllocation,
            processor: T1,
            escrs: EscrSet::EMPTY,
            counters: CounterSet::EMPTY,
        },
    ];
    for e in errs {
        let s: String = e.to_string();
        assert!(!s.is_empty());
    }
}

//! Host benchmark of the exact NetBurst scheduler
//! (`pmu::arch::netburst::schedule::schedule`): nanoseconds per call for a
//! typical 4-event set, an 18-event set that uses every counter, and an
//! 18-event set whose conflict (seven IQ-block events for six IQ counters)
//! is found by the last search and explained.
//!
//! Run: `cargo bench --bench schedule`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use pmu::arch::netburst::schedule::schedule;
use pmu::arch::netburst::{
    EventSpec, LogicalProcessor, Occupied, Part, Pmu, Request, ScheduleError,
};

use LogicalProcessor::{T0, T1};

fn req(s: &str, lp: LogicalProcessor) -> Request {
    Request::new(EventSpec::parse(s, Pmu::NetburstP).expect(s), lp)
}

/// Linux's generic cycles, instructions, cache-misses and branch-misses,
/// all on one logical processor (Linux cannot co-schedule the last three
/// pairs on one thread).
fn typical() -> Vec<Request> {
    vec![
        req("global_power_events:RUNNING", T0),
        req("instr_retired:NBOGUSNTAG:BOGUSNTAG", T0),
        req("BSQ_cache_reference:RD_2ndL_MISS", T0),
        req("mispred_branch_retired:NBOGUS", T0),
    ]
}

/// Two requests per BPU/MS/FLAME group, three per IQ group.
fn saturating() -> Vec<Request> {
    let names = [
        "BSQ_allocation:REQ_TYPE0",
        "IOQ_allocation:TYPE_BIT0",
        "IOQ_active_entries:TYPE_BIT0",
        "BSQ_active_entries:REQ_TYPE0",
        "tc_ms_xfer",
        "tc_ms_xfer",
        "retired_branch_type:CONDITIONAL",
        "retired_branch_type:CALL",
        "SSE_input_assist",
        "SSE_input_assist",
        "memory_cancel:ST_RB_FULL",
        "memory_cancel:64K_CONF",
        "instr_retired:NBOGUSNTAG",
        "instr_retired:NBOGUSTAG",
        "branch_retired:MMNP",
        "branch_retired:MMTP",
        "resource_stall",
        "resource_stall",
    ];
    names
        .iter()
        .enumerate()
        .map(|(i, n)| req(n, if i % 2 == 0 { T0 } else { T1 }))
        .collect()
}

/// 18 requests, the largest possible minimal conflict (seven IQ events for
/// six IQ counters), the IQ events listed last.
fn infeasible() -> Vec<Request> {
    let mut set = saturating();
    set.truncate(11);
    set.insert(0, req("resource_stall", T1));
    set.extend([
        req("instr_retired:NBOGUSNTAG", T0),
        req("instr_retired:NBOGUSTAG", T1),
        req("branch_retired:MMNP", T0),
        req("branch_retired:MMTP", T1),
        req("resource_stall", T0),
        req("uop_type:TAGLOADS", T1),
    ]);
    set
}

/// Runs `schedule` on `set` in 7 rounds of at least `round` each; returns
/// the median round's ns per call (the machine may be shared) and the
/// total number of calls.
fn measure(set: &[Request], round: Duration) -> (f64, u64) {
    let part = Part::new(2, 9);
    // Warm-up.
    for _ in 0..1000 {
        let _ = black_box(schedule(black_box(part), black_box(set), Occupied::NONE));
    }
    let mut total = 0u64;
    let mut rounds = [0f64; 7];
    for r in &mut rounds {
        let mut iters = 0u64;
        let mut batch = 1000u64;
        let start = Instant::now();
        loop {
            for _ in 0..batch {
                let _ = black_box(schedule(black_box(part), black_box(set), Occupied::NONE));
            }
            iters += batch;
            let elapsed = start.elapsed();
            if elapsed >= round {
                *r = elapsed.as_nanos() as f64 / iters as f64;
                break;
            }
            batch = batch.saturating_mul(2).min(1 << 20);
        }
        total += iters;
    }
    rounds.sort_by(f64::total_cmp);
    (rounds[3], total)
}

fn main() {
    let part = Part::new(2, 9);
    let cases = [
        ("4-events", typical()),
        ("18-events", saturating()),
        ("18-events-infeasible", infeasible()),
    ];
    // Sanity: the first two fit, the last fails with the 7-request conflict.
    assert!(schedule(part, &cases[0].1, Occupied::NONE).is_ok());
    assert!(schedule(part, &cases[1].1, Occupied::NONE).is_ok());
    match schedule(part, &cases[2].1, Occupied::NONE) {
        Err(ScheduleError::Conflict(c)) if c.len() == 7 => {}
        other => panic!("unexpected: {other:?}"),
    }
    for (name, set) in &cases {
        let (ns, iters) = measure(set, Duration::from_millis(100));
        println!("schedule/{name}: {ns:.0} ns/call ({iters} iterations)");
    }
}

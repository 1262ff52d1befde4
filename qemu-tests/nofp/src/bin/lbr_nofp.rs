//! Call chains from the last branch records in a kernel built without
//! frame pointers (`-C force-frame-pointers=no` for every crate of it, the
//! crate and the kernel library too: the QEMU harness builds it so, see its
//! `Cargo.toml`).
//!
//! The workload (`nofp_round` and the functions it calls, this file's) is
//! single-stepped (`hobby::step`), each instruction fed to an
//! architectural-PMU model with architectural LBR (`Config::alder_lake_p_core`:
//! `IA32_LBR_CTL`, records at 1500H/1600H/1200H) in call-stack mode, which
//! records the workload's real calls and returns; a counter of conditional
//! branches samples every 3, each sample carrying the records frozen by its
//! PMI. Every count comes from the model; the instructions, calls and
//! addresses are the workload's own.
//!
//! Cases: the workload's functions really have no frame-pointer prologue
//! (`push rbp; mov rbp, rsp`); every sample's call chain from the LBR is
//! exactly the calls the stepped code had open (the trace's own record of
//! them, `hobby::step::open_calls`), whereas the frame-pointer walks of the
//! same samples lose the callers. The chains are printed under three roots
//! (`lbr`, `truth`, `fp`) for the flame graph, and the runner checks that
//! the LBR's flame graph is the truth's (`flame_graphs_equal`).
#![no_std]
#![no_main]

use core::hint::black_box;
use core::sync::atomic::{AtomicU64, Ordering};

use hobby::boot::BootInfo;
use hobby::pmi::local_apic;
use hobby::stacks::{self, Tally};
use hobby::test::Outcome;
use hobby::{case, check, fail, println, step};
use pmu::apic::{LvtPerfCounter, PmiDelivery, Vector};
use pmu::arch::archperf::driver::{ArchPerfDriver, CounterConfig};
use pmu::arch::archperf::{ArchPerfPmu, BranchFilter, EventSpec, Lbr, LbrOptions};
use pmu::arch::handle_pmi;
use pmu::model::archperf::{CONDITIONAL_BRANCHES, Config, Retirement, SharedArchPerfModel};
use pmu::sampling::{CallChain, SampleAfter};

hobby::entry_point!(main);

/// Addresses per chain: the workload is 3 calls deep below the trace's 2.
const DEPTH: usize = 12;
/// Distinct chains kept per source.
const CHAINS: usize = 32;
/// Rounds of the workload.
const ROUNDS: u32 = 3;
/// Conditional branches per sample.
const N: u64 = 3;

static MODEL: SharedArchPerfModel = SharedArchPerfModel::new(Config::alder_lake_p_core());
// SAFETY: the model is a logical processor of its own, and this is its one
// value.
static CPU: ArchPerfPmu = unsafe { ArchPerfPmu::new() };

/// The samples' chains: from the LBR, from the trace's open calls, from a
/// frame-pointer walk.
struct Chains {
    lbr: Tally<DEPTH, CHAINS>,
    truth: Tally<DEPTH, CHAINS>,
    fp: Tally<DEPTH, CHAINS>,
}

static CHAINS_SEEN: spin::Mutex<Chains> = spin::Mutex::new(Chains {
    lbr: Tally::new(),
    truth: Tally::new(),
    fp: Tally::new(),
});
/// Samples taken; of those, the ones whose LBR chain is not the open
/// calls, and the ones whose frame-pointer walk is shorter than them.
static SAMPLES: AtomicU64 = AtomicU64::new(0);
static WRONG: AtomicU64 = AtomicU64::new(0);
static SHORT_WALKS: AtomicU64 = AtomicU64::new(0);

fn main(_: &'static BootInfo) -> ! {
    println!(
        "lbr_nofp: every count comes from the architectural-PMU model (architectural LBR); the workload, built without frame pointers, is single-stepped"
    );
    hobby::test::run(
        "lbr_nofp",
        &[
            case!(the_workload_has_no_frame_pointers),
            case!(lbr_call_chains_are_the_calls_that_ran),
        ],
    )
}

/// One round of the workload: two outer functions, each calling a middle
/// one and a leaf with a loop (its conditional branch is the sampled
/// event). No frame pointers: RBP is not a frame pointer here.
extern "C" fn nofp_round() {
    nofp_outer_a();
    nofp_outer_b();
    black_box(());
}

#[inline(never)]
fn nofp_outer_a() {
    black_box(nofp_leaf(3));
    nofp_mid();
    black_box(());
}

#[inline(never)]
fn nofp_outer_b() {
    nofp_mid();
    nofp_mid();
    black_box(());
}

#[inline(never)]
fn nofp_mid() {
    black_box(nofp_leaf(5));
}

#[inline(never)]
fn nofp_leaf(units: u32) -> u32 {
    let mut x = 0u32;
    for i in 0..black_box(units * 8) {
        x = black_box(x.wrapping_add(i));
    }
    x
}

/// The first bytes of each workload function, and of the kernel library's
/// `trace`: none is `push rbp; mov rbp, rsp` (55 48 89 E5), the prologue
/// `-C force-frame-pointers=yes` gives every function of the other
/// kernels.
fn the_workload_has_no_frame_pointers() -> Outcome {
    let functions: [(&str, *const ()); 6] = [
        ("nofp_round", nofp_round as *const ()),
        ("nofp_outer_a", nofp_outer_a as *const ()),
        ("nofp_outer_b", nofp_outer_b as *const ()),
        ("nofp_mid", nofp_mid as *const ()),
        ("nofp_leaf", nofp_leaf as *const ()),
        ("hobby::step::trace", step::trace as *const ()),
    ];
    for (name, at) in functions {
        let p = at.cast::<[u8; 4]>();
        // SAFETY: the first 4 bytes of a function of this kernel, in its
        // identity-mapped, readable code (no function here is shorter).
        let first = unsafe { p.read_unaligned() };
        println!("  {name}: first bytes {first:02x?}");
        check!(
            first != [0x55, 0x48, 0x89, 0xE5],
            "{name} starts with a frame-pointer prologue: the kernel was built with frame pointers"
        );
    }
    Ok(())
}

/// After each stepped instruction: the model retires it; a PMI it raises
/// is serviced at the next instruction, each sample's chains tallied.
fn on_step(r: &Retirement) {
    if !MODEL.with(|m| m.retire(r) && m.take_pmi()) {
        return;
    }
    let rip = r.next_ip;
    let (rbp, rsp) = (r.registers.rbp, r.registers.rsp);
    let truth: CallChain<DEPTH> = step::open_calls(rip);
    let bounds = stacks::bounds(rsp).below(step::outer_rsp());
    let walked: CallChain<DEPTH> = CallChain::walk(rip, rbp, rsp, &bounds);
    let entry = LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(0xF0).unwrap())).masked();
    let _ = handle_pmi(&CPU, &mut MODEL.msr(), &mut local_apic(), entry, rip, |s| {
        let Some(records) = s.payload.branches() else {
            return;
        };
        let lbr: CallChain<DEPTH> = records.call_chain(s.rip);
        SAMPLES.fetch_add(1, Ordering::Relaxed);
        if lbr.frames() != truth.frames() {
            WRONG.fetch_add(1, Ordering::Relaxed);
        }
        if walked.frames().len() < truth.frames().len() {
            SHORT_WALKS.fetch_add(1, Ordering::Relaxed);
        }
        let mut chains = CHAINS_SEEN.lock();
        chains.lbr.add(&lbr, u64::from(s.periods));
        chains.truth.add(&truth, u64::from(s.periods));
        chains.fp.add(&walked, u64::from(s.periods));
    });
}

/// Architectural LBR in call-stack mode on the model, a counter of
/// conditional branches carrying the records: every sample's LBR chain is
/// the calls really open; the frame-pointer walks of this kernel lose
/// callers.
fn lbr_call_chains_are_the_calls_that_ran() -> Outcome {
    pmu::owner!(Cpu0);
    let Some(detected) = MODEL.detect() else {
        fail!("the model is not detected as an architectural PMU");
    };
    check!(
        matches!(Lbr::of(&detected), Some(Lbr::Architectural(_))),
        "the model has architectural LBR"
    );
    let (mut d, c) = ArchPerfDriver::<Cpu0, _>::take(MODEL.msr(), &detected, &CPU)?;
    let kernel = BranchFilter::from_bits(0).with_kernel(true);
    d.enable_lbr(LbrOptions::call_stack(kernel))?;
    let n = SampleAfter::new(N, d.overflow_rule())?;
    let event = EventSpec::raw(CONDITIONAL_BRANCHES.0, CONDITIONAL_BRANCHES.1);
    let cfg = CounterConfig::counting(event).sampling(n).with_branches();
    let g0 = c.g0.configure(&mut d, &cfg)?.enable(&mut d)?;
    let mut steps = 0;
    for _ in 0..ROUNDS {
        steps += step::trace(nofp_round, on_step);
    }
    let g0 = g0.halt(&mut d)?.release(&mut d)?;
    d.disable_lbr()?;
    let _ = d.give_back(pmu::arch::archperf::driver::Counters { g0, ..c });
    let (samples, wrong, short) = (
        SAMPLES.load(Ordering::Relaxed),
        WRONG.load(Ordering::Relaxed),
        SHORT_WALKS.load(Ordering::Relaxed),
    );
    println!(
        "  {steps} instructions stepped, {samples} samples: {} LBR chains are the calls that ran; {short} frame-pointer walks lost callers",
        samples - wrong
    );
    println!(
        "flamegraph title: lbr_nofp: conditional branches (model), call chains from the LBR, the trace, frame pointers"
    );
    let chains = CHAINS_SEEN.lock();
    chains.lbr.print(Some("lbr"));
    chains.truth.print(Some("truth"));
    chains.fp.print(Some("fp"));
    println!("folded-same: lbr truth");
    check!(samples >= 50, "only {samples} samples");
    check!(
        wrong == 0,
        "{wrong} of {samples} samples' LBR chains are not the calls that ran"
    );
    check!(
        short > 0,
        "no frame-pointer walk lost a caller: is the workload built with frame pointers?"
    );
    Ok(())
}

//! Call chains from the PMI: the NetBurst driver samples a model counter
//! (QEMU has no PMU: every count comes from the NetBurst PMU model) whose
//! PMIs arrive through the real APIC inside a known call tree; its
//! handler's closure walks the interrupted frame pointers
//! (`pmu::sampling::CallChain`) and the chains travel through a
//! `SampleBuffer` as the samples' payload.
//!
//! First case: the tree `tree_root` -> `branch_a` -> `leaf` (3 samples),
//! `branch_b` -> `leaf` (2, from two call sites) and `branch_b` -> `twig`
//! -> `leaf` (1), the walk bounded below `tree_root`'s frame. The kernel
//! prints the chains as `stack` lines and the folded stacks it expects as
//! `folded-expect` lines; the host folds the chains with the function names
//! of this kernel's ELF symbol table and checks them exactly (the
//! `folded_stacks` case, `pmu_qemu_run::stacks`).
//!
//! Second case: a PMI taken with RBP corrupt (not canonical, unmapped,
//! below the interrupted RSP, a record that links to itself): each chain
//! ends at once with the reason the walk gives, and nothing faults.
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use hobby::boot::BootInfo;
use hobby::idt::{self, InterruptFrame};
use hobby::pmi::{self, Delivery, local_apic};
use hobby::stacks::{self, Tally};
use hobby::test::Outcome;
use hobby::{case, check, check_eq, fail, println};
use pmu::apic::{LvtPerfCounter, PmiDelivery, Vector};
use pmu::arch::handle_pmi;
use pmu::arch::netburst::driver::{CounterConfig, Counters, NetBurstDriver};
use pmu::arch::netburst::pmi::overflow_rule;
use pmu::arch::netburst::{Escr, EventSpec, LogicalProcessor, NetBurstPmu};
use pmu::counter::Owner;
use pmu::model::netburst::{
    Config, EscrGroup, EventKind, LogicalProcessor as ModelLp, Privilege, SharedNetBurstModel,
};
use pmu::sampling::{CallChain, ChainEnd, SampleAfter, SampleBuffer};

hobby::entry_point!(main);

const PMI_VECTOR: u8 = 0xF0;
/// Events per sample.
const N: u64 = 50;
/// Addresses per chain: the tree is 3 deep below its root.
const DEPTH: usize = 8;

static MODEL: SharedNetBurstModel = SharedNetBurstModel::new(Config::prescott_ht());
// SAFETY: the model is a package of its own, and this is its one value.
static PACKAGE: NetBurstPmu = unsafe { NetBurstPmu::new() };
static SAMPLES: SampleBuffer<64, CallChain<DEPTH>> = SampleBuffer::new();
/// PMIs handled.
static PMIS: AtomicU32 = AtomicU32::new(0);
/// Where walks stop: `tree_root`'s frame (0: the whole stack).
static ROOT_FP: AtomicU64 = AtomicU64::new(0);
/// Events injected into the model.
static INJECTED: AtomicU64 = AtomicU64::new(0);

/// `global_power_events` RUNNING, as the model sees it.
const RUNNING: EventKind = EventKind::new(EscrGroup::Fsb, 0x13, 1);

fn main(_: &'static BootInfo) -> ! {
    println!("callchain: every count below comes from the NetBurst PMU model, not hardware");
    local_apic().enable(Vector::new(0xFF).unwrap());
    local_apic().set_perf_counter_entry(entry());
    idt::set_handler(PMI_VECTOR, on_pmi);
    hobby::test::run(
        "callchain",
        &[
            case!(a_known_call_tree_gives_its_chains),
            case!(a_corrupt_frame_pointer_ends_the_chain_without_a_fault),
        ],
    )
}

fn entry() -> LvtPerfCounter {
    LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(PMI_VECTOR).unwrap()))
}

/// The PMI: the chain of the interrupted code (below `ROOT_FP` when set),
/// then the driver's handler, each sample carrying the chain; EOI.
fn on_pmi(frame: &InterruptFrame) {
    let mut bounds = stacks::bounds(frame.rsp);
    let top = ROOT_FP.load(Ordering::SeqCst);
    if top != 0 {
        bounds = bounds.below(top);
    }
    let chain = CallChain::walk(frame.rip, frame.rbp, frame.rsp, &bounds);
    let mut apic = local_apic();
    if let Some(mut msr) = MODEL.msr_as(ModelLp::T0) {
        let _ = handle_pmi(
            PACKAGE.logical(LogicalProcessor::T0),
            &mut msr,
            &mut apic,
            entry(),
            frame.rip,
            |s| {
                SAMPLES.push(s.with_payload(chain));
            },
        );
    }
    PMIS.fetch_add(1, Ordering::SeqCst);
    apic.eoi();
}

/// Feeds the model events up to its next PMI and sends that PMI to this
/// CPU (interrupts are off: it waits, pending, for [`take_pmi_here`]).
#[inline(never)]
fn raise_pmi() -> bool {
    loop {
        let got = MODEL.inject_until_own_pmi(RUNNING.on(ModelLp::T0, Privilege::Os, 1000));
        INJECTED.fetch_add(got.injected, Ordering::SeqCst);
        if got.pmi_pending {
            MODEL.take_pmi(ModelLp::T0);
            return pmi::deliver(&mut local_apic()) == Delivery::Vector(PMI_VECTOR);
        }
        if got.injected == 0 {
            return false;
        }
    }
}

/// Enables interrupts until the PMI handler has run once more (boundedly),
/// with RBP = `rbp` meanwhile (`None`: as it is), so that the PMI is taken
/// inside the calling function, whose frame this is inlined into.
#[inline(always)]
fn take_pmi_here(rbp: Option<u64>) {
    let seen = PMIS.load(Ordering::SeqCst);
    let (set, value) = match rbp {
        Some(v) => (1u64, v),
        None => (0, 0),
    };
    // SAFETY: RBP is changed only between the first and last instructions
    // and restored from a register the block owns; nothing in the loop
    // uses it. Interrupts are enabled for the loop and disabled again; the
    // loop reads `PMIS` and counts down ECX (declared clobbered). The
    // handler preserves every register.
    unsafe {
        core::arch::asm!(
            "mov {saved}, rbp",
            "test {set}, {set}",
            "jz 2f",
            "mov rbp, {value}",
            "2:",
            "sti",
            "3:",
            "pause",
            "cmp dword ptr [{pmis}], {seen:e}",
            "jne 4f",
            "dec ecx",
            "jnz 3b",
            "4:",
            "cli",
            "mov rbp, {saved}",
            saved = out(reg) _,
            set = in(reg) set,
            value = in(reg) value,
            pmis = in(reg) PMIS.as_ptr(),
            seen = in(reg) seen,
            inout("ecx") 200_000_000u32 => _,
        );
    }
}

/// One sample, taken here.
#[inline(never)]
fn leaf() {
    if raise_pmi() {
        take_pmi_here(None);
    }
}

#[inline(never)]
fn twig() {
    leaf();
}

#[inline(never)]
fn branch_a() {
    for _ in 0..3 {
        leaf();
    }
}

#[inline(never)]
fn branch_b() {
    leaf();
    twig();
    leaf();
}

/// The tree, its chains bounded below this function's frame.
#[inline(never)]
fn tree_root() {
    let fp: u64;
    // SAFETY: reads RBP, this function's frame pointer (frame pointers are
    // forced in every kernel).
    unsafe { core::arch::asm!("mov {}, rbp", out(reg) fp) };
    ROOT_FP.store(fp, Ordering::SeqCst);
    branch_a();
    branch_b();
    ROOT_FP.store(0, Ordering::SeqCst);
}

/// For [`leaf_with_rbp`]: RBP 256 bytes below the RSP the PMI interrupts,
/// inside this kernel's stack (where the handler's own frames go).
const BELOW_RSP: u64 = 1;

/// A leaf taken with RBP = `rbp` ([`BELOW_RSP`]: 256 bytes below its RSP).
#[inline(never)]
fn leaf_with_rbp(rbp: u64) {
    let rsp: u64;
    // SAFETY: reads RSP, which the PMI will interrupt with this value: the
    // asm of `take_pmi_here` below runs in this frame and pushes nothing.
    unsafe { core::arch::asm!("mov {}, rsp", out(reg) rsp) };
    let rbp = if rbp == BELOW_RSP { rsp - 256 } else { rbp };
    if raise_pmi() {
        take_pmi_here(Some(rbp));
    }
}

/// Takes the NetBurst driver of logical processor T0, samples RUNNING every
/// [`N`] events on counter 0 while `body` runs, halts, checks that every
/// injected event is accounted, gives everything back.
fn sampling<O: Owner>(body: impl FnOnce()) -> Outcome {
    MODEL.reset();
    INJECTED.store(0, Ordering::SeqCst);
    let info = MODEL.detect().ok_or("detection on the model failed")?;
    let msr = MODEL.msr_as(ModelLp::T0).ok_or("no logical processor T0")?;
    let (mut d, c) = NetBurstDriver::<O, _>::take_for(LogicalProcessor::T0, msr, &info, &PACKAGE)?;
    let spec: EventSpec = pmu::netburst_event!("global_power_events:RUNNING:k");
    let every = SampleAfter::new(N, overflow_rule())?;
    let config = CounterConfig::counting(spec, Escr::FsbEscr0)
        .on(LogicalProcessor::T0)
        .sampling(every);
    let mut handles = c.erase_all();
    let h = &mut handles[0];
    h.configure(&mut d, &config)?;
    h.enable(&mut d)?;
    body();
    h.halt(&mut d)?;
    let (owed, residual) = every.split(h.read(&mut d)?);
    let accounted = (PACKAGE.pmi().periods(0) + owed) * N + residual;
    h.release(&mut d)?;
    check_eq!(
        accounted,
        INJECTED.load(Ordering::SeqCst),
        "events = periods x N + residual"
    );
    let Ok(c) = Counters::from_erased(handles) else {
        fail!("a handle is not back unclaimed")
    };
    let _msr = d.give_back(c);
    Ok(())
}

fn a_known_call_tree_gives_its_chains() -> Outcome {
    pmu::owner!(Tree);
    let before = PMIS.load(Ordering::SeqCst);
    sampling::<Tree>(tree_root)?;
    check_eq!(PMIS.load(Ordering::SeqCst) - before, 6, "a PMI per leaf");
    let mut tally: Tally<DEPTH, 16> = Tally::new();
    let mut depths = [0u32; DEPTH + 1];
    let mut n = 0;
    let mut wrong = None;
    SAMPLES.drain(|s| {
        let chain = s.payload;
        n += 1;
        depths[chain.frames().len()] += 1;
        if chain.end() != ChainEnd::OutOfBounds || chain.frames()[0] != s.rip {
            wrong = Some(chain);
        }
        tally.add(&chain, u64::from(s.periods));
    });
    check_eq!(n, 6, "a sample per PMI");
    check!(
        wrong.is_none(),
        "a chain not ended at tree_root's frame: {wrong:?}"
    );
    // leaf, its caller, tree_root: 3 addresses; through twig: 4.
    check_eq!((depths[3], depths[4]), (5, 1), "chain lengths");
    // Two call sites of leaf in branch_b, one in branch_a and twig each;
    // the RIPs in leaf's loop may differ: at least the four call paths.
    check!(
        tally.rows().len() >= 4,
        "{} distinct chains",
        tally.rows().len()
    );
    check_eq!(tally.unplaced(), 0);
    println!("flamegraph title: callchain: a known call tree (NetBurst PMU model)");
    tally.print(None);
    println!("folded-expect: callchain::tree_root;callchain::branch_a;callchain::leaf 3");
    println!("folded-expect: callchain::tree_root;callchain::branch_b;callchain::leaf 2");
    println!(
        "folded-expect: callchain::tree_root;callchain::branch_b;callchain::twig;callchain::leaf 1"
    );
    Ok(())
}

fn a_corrupt_frame_pointer_ends_the_chain_without_a_fault() -> Outcome {
    pmu::owner!(Corrupt);
    // A frame record that links to itself, on this stack (above the RSP the
    // PMI interrupts, which is inside `leaf_with_rbp`'s frame below).
    let mut record = [0u64, 0xC0DE];
    let self_linked = record.as_mut_ptr() as u64;
    record[0] = self_linked;
    let corrupt = [
        (0x8000_0000_0000_0000, ChainEnd::OutOfBounds, 1), // not canonical
        (0x0000_7FFF_0000_0000, ChainEnd::OutOfBounds, 1), // unmapped
        (BELOW_RSP, ChainEnd::OutOfBounds, 1),             // below the RSP
        (self_linked + 4, ChainEnd::OutOfBounds, 1),       // misaligned
        (self_linked, ChainEnd::NotAscending, 2),          // a cycle
    ];
    sampling::<Corrupt>(|| {
        for (rbp, _, _) in corrupt {
            leaf_with_rbp(rbp);
        }
    })?;
    core::hint::black_box(&mut record);
    let mut got = [(ChainEnd::Full, 0usize, 0u64); 5];
    let mut n = 0;
    SAMPLES.drain(|s| {
        if let Some(g) = got.get_mut(n) {
            let frames = s.payload.frames();
            *g = (
                s.payload.end(),
                frames.len(),
                frames.get(1).copied().unwrap_or(0),
            );
        }
        n += 1;
    });
    check_eq!(n, corrupt.len(), "a sample per PMI");
    for ((rbp, end, len), got) in corrupt.iter().zip(got) {
        check!(
            (got.0, got.1) == (*end, *len),
            "RBP {rbp:#x}: the chain ended {:?} with {} addresses, not {end:?} with {len}",
            got.0,
            got.1
        );
    }
    check_eq!(got[4].2, 0xC0DE, "the self-linked record's return address");
    Ok(())
}

//! HP Caliper's `itlb` measurement (HP Caliper User Guide, "itlb
//! Measurement Report Description") on the Itanium PMU **model**:
//! sample every Nth instruction TLB miss through the I-EAR and print the
//! report per load module, function and 64-byte cache line with the
//! percentages of L2 ITLB, HPW and software fills.
//!
//! There is no IA-64 hardware here and Rust has no IA-64 target: this
//! x86_64 kernel runs the crate's register-level Itanium PMU model. A
//! synthetic instruction stream (a symbol table of three load modules, six
//! functions, each with its own mix of fill levels) feeds ITLB misses to
//! the model's I-EAR; a counter counting the I-EAR event (L1I_EAR_EVENTS /
//! INSTRUCTION_EAR_EVENTS) overflows every N captures and freezes the model
//! PMU; the model's interrupt line goes through the real local APIC as a
//! real interrupt, and the driver's `handle_pmi` reads PMC0, the
//! I-EAR's PMD0, reloads the counter and unfreezes. N comes from a
//! calibration run (`pmu::sampling::calibrate`, as on NetBurst).
//!
//! The kernel checks the report exactly: sampling every Nth miss is
//! deterministic, so the expected report is the one built from every Nth
//! miss of the known stream, and each function's percentages must equal
//! its injected mix. It runs on Itanium 2 (L2 fills reported) and on
//! Itanium (L2 fills not applicable).
//!
//! ```text
//! cargo qemu itlb
//! ```
#![no_std]
#![no_main]

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use hobby::boot::BootInfo;
use hobby::exit::{ExitCode, exit_qemu};
use hobby::idt::{self, InterruptFrame};
use hobby::pmi::{self, Delivery};
use hobby::println;
use hobby::test::Failure;
use pmu::access::Recording;
use pmu::apic::{LvtPerfCounter, PmiDelivery, Vector};
use pmu::arch::handle_pmi;
use pmu::arch::itanium::ItaniumPmu;
use pmu::arch::itanium::Plm;
use pmu::arch::itanium::driver::{CounterConfig, Counters, ItaniumDriver};
use pmu::arch::itanium::ear::{IearConfig, ItlbSample, TlbFill, TlbFills};
use pmu::arch::itanium::pmi::{PmiState, overflow_rule};
use pmu::arch::itanium::{Counter as HwCounter, Generation};
use pmu::counter::Owner;
use pmu::model::itanium::SharedItaniumModel;
use pmu::model::itanium::{
    Capture, FetchMiss, Generation as ModelGeneration, TlbFill as ModelFill,
};
use pmu::sampling::{self, SampleBuffer};
use pmu_report::itlb::{ItlbReport, L2Fills};
use pmu_report::symbols::{Function, LoadModule};

hobby::entry_point!(main);

const PMI_VECTOR: u8 = 0xF0;
/// Misses per granule: all misses of a granule share a function and a fill
/// level, and N divides it, so every granule yields exactly 12 / N samples.
const GRANULE: u64 = 12;
/// Rounds of the stream where the platform runs code about as fast as TCG
/// (one where it is much slower: [`rounds`]).
const ROUNDS: u64 = 5;
/// Samples wanted from the calibrated run, per round: 4 per granule.
const SAMPLES_PER_ROUND: u64 = 180;

/// The stream's rounds on this platform: [`ROUNDS`], or as few as one
/// where it runs code far slower than TCG (`hobby::pace::scaled`: a
/// hypervisor that emulates the guest). Every round has the same mix, so
/// the reports are exact either way.
fn rounds() -> u64 {
    hobby::pace::scaled(ROUNDS, 1)
}

static MODEL: SharedItaniumModel = SharedItaniumModel::new(ModelGeneration::Itanium2);
/// The processors the example measures, one after the other: the model
/// reset to Itanium 2, then to Itanium, each a processor of its own.
// SAFETY: one value per generation's model, each that processor's only one.
static CPUS: [ItaniumPmu; 2] = [const { unsafe { ItaniumPmu::new() } }; 2];
/// The index in `CPUS` of the processor being measured, for the handler.
static CURRENT: AtomicUsize = AtomicUsize::new(0);
static SAMPLES: SampleBuffer<2048, ItlbSample> = SampleBuffer::new();
static HANDLED: AtomicU64 = AtomicU64::new(0);
static ERRORS: AtomicU64 = AtomicU64::new(0);
static NO_EAR: AtomicU64 = AtomicU64::new(0);
/// Register accesses of the handler, summed over interrupts: PMC reads,
/// PMC writes, PMD reads, PMD writes.
static TRAFFIC: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

/// A synthetic IA-64 address space: region 2 for the program, region 1 for
/// the shared libraries (four 64-byte lines per function).
const fn f(name: &'static str, start: u64) -> Function<'static> {
    Function {
        name,
        start,
        end: start + 0x100,
    }
}
const DEMO: &[Function<'static>] = &[
    f("parse_input", 0x4000_0000_0001_0000),
    f("solve", 0x4000_0000_0001_0400),
    f("emit_report", 0x4000_0000_0001_0800),
];
const LIBM: &[Function<'static>] = &[
    f("sin", 0x2000_0000_0010_0000),
    f("cos", 0x2000_0000_0010_0100),
];
const LIBC: &[Function<'static>] = &[f("memcpy", 0x2000_0000_0020_0000)];
const MODULES: &[LoadModule<'static>] = &[
    LoadModule {
        name: "itlb_demo",
        start: 0x4000_0000_0000_0000,
        end: 0x4000_0000_0010_0000,
        functions: DEMO,
    },
    LoadModule {
        name: "libm.so.1",
        start: 0x2000_0000_0010_0000,
        end: 0x2000_0000_0011_0000,
        functions: LIBM,
    },
    LoadModule {
        name: "libc.so.1",
        start: 0x2000_0000_0020_0000,
        end: 0x2000_0000_0021_0000,
        functions: LIBC,
    },
];

/// Each function's fill mix in tenths: (L2 ITLB, HPW, software).
const MIX: [(&str, [u64; 3]); 6] = [
    ("parse_input", [5, 3, 2]),
    ("solve", [1, 6, 3]),
    ("emit_report", [2, 2, 6]),
    ("sin", [8, 1, 1]),
    ("cos", [0, 5, 5]),
    ("memcpy", [3, 3, 4]),
];

fn function(i: usize) -> &'static Function<'static> {
    let all = [&DEMO[0], &DEMO[1], &DEMO[2], &LIBM[0], &LIBM[1], &LIBC[0]];
    all[i]
}

/// The fill of slot `j` (0..10) of function `i` on `g`: the mix's first
/// `l2` slots L2, then HPW, then software. The first Itanium has no L2
/// fills (HP Caliper's itlb report): its L2 slots are HPW fills.
fn fill(g: Generation, i: usize, j: u64) -> TlbFill {
    let [l2, hpw, _] = MIX[i].1;
    if j < l2 {
        if g == Generation::Itanium {
            TlbFill::Hpw
        } else {
            TlbFill::L2
        }
    } else if j < l2 + hpw {
        TlbFill::Hpw
    } else {
        TlbFill::Software
    }
}

/// The stream: [`rounds`] rounds; in each, every function misses in 10 slots
/// of `GRANULE` misses, slot j with fill `fill(g, i, j)`, at addresses
/// spread over the function's four lines.
fn for_each_miss(
    g: Generation,
    mut each: impl FnMut(ItlbSample) -> Result<(), Failure>,
) -> Result<(), Failure> {
    for round in 0..rounds() {
        for i in 0..MIX.len() {
            let func = function(i);
            for j in 0..10 {
                for k in 0..GRANULE {
                    let r = j * GRANULE + k;
                    // Slot j misses mostly in line (3j + round) mod 4, so
                    // the lines' fill mixes differ.
                    let line = (j * 3 + round + u64::from(k % 6 == 5)) % 4;
                    let offset = line * 64 + (r % 2) * 32;
                    each(ItlbSample {
                        address: func.start + offset,
                        fill: fill(g, i, j),
                    })?;
                }
            }
        }
    }
    Ok(())
}

fn apic() -> hobby::apic::Apic {
    pmi::local_apic()
}

fn entry() -> LvtPerfCounter {
    LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(PMI_VECTOR).unwrap()))
}

/// The state the measured processor's driver shares with its handler.
fn pmi() -> &'static PmiState {
    CPUS[CURRENT.load(Ordering::SeqCst)].pmi()
}

/// The kernel's PMU interrupt entry: the crate's PMI path (Itanium's
/// handler, then the LVT entry unmasked: the harness's APIC delivery masks
/// it, `hobby::pmi::deliver`), and EOI. The sample travels through the sample buffer with its I-EAR
/// capture as its payload.
fn on_pmi(frame: &InterruptFrame) {
    let mut apic = apic();
    let mut regs: Recording<_, 8> = Recording::new(MODEL.regs());
    let cpu = &CPUS[CURRENT.load(Ordering::SeqCst)];
    let r = handle_pmi(cpu, &mut regs, &mut apic, entry(), frame.rip, |s| {
        match s.payload.itlb() {
            Some(t) => {
                SAMPLES.push(s.with_payload(t));
            }
            None => {
                NO_EAR.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    if r.is_err() {
        ERRORS.fetch_add(1, Ordering::SeqCst);
    }
    let c = regs.counts();
    for (t, n) in TRAFFIC
        .iter()
        .zip([c.pmc_reads, c.pmc_writes, c.pmd_reads, c.pmd_writes])
    {
        t.fetch_add(u64::from(n), Ordering::SeqCst);
    }
    HANDLED.fetch_add(1, Ordering::SeqCst);
    apic.eoi();
}

const fn model_generation(g: Generation) -> ModelGeneration {
    match g {
        Generation::Itanium => ModelGeneration::Itanium,
        Generation::Itanium2 => ModelGeneration::Itanium2,
        Generation::Montecito => ModelGeneration::Montecito,
    }
}

fn model_fill(f: TlbFill) -> ModelFill {
    match f {
        TlbFill::L2 => ModelFill::L2,
        TlbFill::Hpw => ModelFill::Hpw,
        TlbFill::Software => ModelFill::Software,
    }
}

/// Feed the stream to the model's I-EAR; deliver each PMU interrupt through
/// the APIC before the next miss (the PMU is frozen until the handler
/// unfreezes it). Returns the misses injected.
fn replay(g: Generation) -> Result<u64, Failure> {
    let mut misses = 0;
    for_each_miss(g, |s| {
        let miss = FetchMiss::tlb(s.address, model_fill(s.fill));
        if MODEL.fetch_miss(miss) != Capture::Captured {
            return Err("the I-EAR did not capture a miss (frozen or not selected)".into());
        }
        misses += 1;
        if MODEL.take_interrupt().is_some() {
            let before = HANDLED.load(Ordering::SeqCst);
            match pmi::deliver(&mut apic()) {
                // Waited for boundedly: a real CPU takes the interrupt some
                // instructions after the write that sent it.
                Delivery::Vector(_) => {
                    pmi::wait_for_interrupt(&HANDLED, before, pmi::Taken::Vector);
                }
                _ => return Err("LVT entry masked or invalid".into()),
            }
            if HANDLED.load(Ordering::SeqCst) != before + 1 {
                return Err("the PMU interrupt did not reach the handler".into());
            }
        }
        Ok(())
    })?;
    Ok(misses)
}

/// A `fmt::Write` that hashes (FNV-1a) and counts what is written: two
/// reports are compared without an allocator.
struct Digest(u64, usize);

impl Write for Digest {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for b in s.bytes() {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.1 += s.len();
        Ok(())
    }
}

fn digest(r: &impl fmt::Display) -> (u64, usize) {
    let mut d = Digest(0xcbf2_9ce4_8422_2325, 0);
    let _ = write!(d, "{r}");
    (d.0, d.1)
}

type Report = ItlbReport<'static, 4, 8, 32>;

fn run<O: Owner>(g: Generation) -> Result<bool, Failure> {
    println!("\n=== {} (Itanium PMU model) ===", g.name());
    MODEL.reset(model_generation(g));
    SAMPLES.drain(|_| {});
    apic().set_perf_counter_entry(entry());
    let cpu = usize::from(g == Generation::Itanium);
    CURRENT.store(cpu, Ordering::SeqCst);
    let (mut pmu, c) = ItaniumDriver::<O, _>::take(MODEL.regs(), g, &CPUS[cpu])?;
    let fills = TlbFills {
        l2: g != Generation::Itanium,
        ..TlbFills::ALL
    };
    let ear = IearConfig::tlb_misses(g, fills)?
        .with_plm(Plm::ALL)
        .with_privileged(true);
    let hw = HwCounter::new(g, 4).ok_or("counter 4")?;
    let counting = CounterConfig::itlb(hw, ear)?;

    // Calibration: count the run's I-EAR captures without interrupts.
    let c4 = c.c4.configure(&mut pmu, &counting)?;
    let c4 = c4.enable(&mut pmu)?;
    let misses = replay(g)?;
    let c4 = c4.halt(&mut pmu)?;
    let measured = c4.read(&mut pmu)?;
    let c4 = c4.release(&mut pmu)?;
    let target = SAMPLES_PER_ROUND * rounds();
    let n = sampling::calibrate(measured, target, overflow_rule(g))?;
    println!(
        "  calibration: {measured} ITLB misses captured (of {misses} injected) -> sample after N = {} for ~{target} samples",
        n.get()
    );
    let mut ok = measured == misses;
    if !GRANULE.is_multiple_of(n.get()) {
        return Err("N does not divide the granule: the check below needs it".into());
    }

    // The measurement.
    let c4 = c4.configure(&mut pmu, &counting.sampling(n))?;
    let c4 = c4.enable(&mut pmu)?;
    let handled_before = HANDLED.load(Ordering::SeqCst);
    for t in &TRAFFIC {
        t.store(0, Ordering::SeqCst);
    }
    replay(g)?;
    let c4 = c4.halt(&mut pmu)?;
    let (owed, residual) = n.split(c4.read(&mut pmu)?);
    let periods = pmi().periods(4);
    let interrupts = HANDLED.load(Ordering::SeqCst) - handled_before;

    let l2 = if g == Generation::Itanium {
        L2Fills::NotApplicable
    } else {
        L2Fills::Reported
    };
    let mut report = Report::new(MODULES, l2).with_sample_after(n.get());
    let mut bad = 0u64;
    SAMPLES.drain(|s| {
        if report.record(s.payload).is_err() {
            bad += 1;
        }
    });
    println!("{report}");

    // The expected report: every Nth miss of the stream.
    let mut expected = Report::new(MODULES, l2).with_sample_after(n.get());
    let mut k = 0u64;
    for_each_miss(g, |s| {
        k += 1;
        if k.is_multiple_of(n.get()) {
            let s = ItlbSample {
                address: s.address & !0x1F,
                ..s
            };
            expected.record(s)?;
        }
        Ok(())
    })?;

    println!("  checks (counts from the model; interrupts, APIC and handler real):");
    let mut check = |what: &str, good: bool| {
        println!("    [{}] {what}", if good { "ok" } else { "FAILED" });
        ok &= good;
    };
    check(
        "conservation: misses = periods x N + residual",
        misses == periods * n.get() + residual && owed == 0,
    );
    check(
        "one interrupt per period, no handler error, every sample with its I-EAR capture",
        interrupts == periods
            && ERRORS.load(Ordering::SeqCst) == 0
            && NO_EAR.load(Ordering::SeqCst) == 0
            && bad == 0
            && SAMPLES.dropped() == 0,
    );
    let traffic = TRAFFIC.each_ref().map(|t| t.load(Ordering::SeqCst));
    let mut line = Line::new();
    let _ = write!(
        line,
        "handler traffic over {interrupts} interrupts: {} PMC reads, {} PMC writes, {} PMD reads, {} PMD writes (1 each per interrupt)",
        traffic[0], traffic[1], traffic[2], traffic[3]
    );
    check(line.as_str(), traffic == [interrupts; 4]);
    check(
        "the report equals the one built from every Nth miss of the stream",
        digest(&report) == digest(&expected) && report.not_tabulated().is_empty(),
    );
    for (name, mix) in MIX.iter() {
        let module = MODULES
            .iter()
            .find(|m| m.functions.iter().any(|f| f.name == *name))
            .map_or("", |m| m.name);
        let got = report.function(module, name).unwrap_or_default();
        let t = got.total();
        let (l2, hpw) = if g == Generation::Itanium {
            (0, mix[0] + mix[1])
        } else {
            (mix[0], mix[1])
        };
        let exact = t > 0
            && got.l2 * 10 == l2 * t
            && got.hpw * 10 == hpw * t
            && got.software * 10 == mix[2] * t;
        let mut line = Line::new();
        let _ = write!(
            line,
            "{name}: {t} samples, fills L2/HPW/soft = {}/{}/{} = injected mix {}/{}/{} %",
            got.l2,
            got.hpw,
            got.software,
            l2 * 10,
            hpw * 10,
            mix[2] * 10
        );
        check(line.as_str(), exact);
    }
    let c4 = c4.release(&mut pmu)?;
    if pmu.give_back(Counters { c4, ..c }).is_err() {
        return Err("the driver refused its tokens back".into());
    }
    Ok(ok)
}

/// A small line buffer for check messages.
struct Line([u8; 200], usize);

impl Line {
    fn new() -> Self {
        Line([0; 200], 0)
    }
    fn as_str(&self) -> &str {
        core::str::from_utf8(&self.0[..self.1]).unwrap_or("?")
    }
}

impl Write for Line {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let n = s.len().min(self.0.len() - self.1);
        self.0[self.1..self.1 + n].copy_from_slice(&s.as_bytes()[..n]);
        self.1 += n;
        Ok(())
    }
}

/// One pass of the example on one generation.
type Run = fn(Generation) -> Result<bool, Failure>;

fn main(_: &'static BootInfo) -> ! {
    println!("pmu example: itlb (HP Caliper's itlb measurement)");
    println!("  runs on the Itanium PMU model: no IA-64 hardware, no IA-64 Rust target;");
    println!("  the ITLB misses are a synthetic stream injected into the model's I-EAR;");
    println!("  the interrupts, the APIC and the driver's overflow handler are real");
    apic().enable(Vector::new(0xFF).unwrap());
    idt::set_handler(PMI_VECTOR, on_pmi);
    let mut ok = true;
    // The model is reset to each generation: two CPUs (`CPUS`), two owners.
    pmu::owner!(Itanium2Cpu);
    pmu::owner!(ItaniumCpu);
    let runs: [(Generation, Run); 2] = [
        (Generation::Itanium2, run::<Itanium2Cpu>),
        (Generation::Itanium, run::<ItaniumCpu>),
    ];
    for (g, run) in runs {
        match run(g) {
            Ok(good) => ok &= good,
            Err(e) => {
                println!("itlb failed on {}: {}", g.name(), e.message());
                ok = false;
            }
        }
    }
    if ok {
        println!("\nitlb: every report matches the injected fill mix exactly");
        exit_qemu(ExitCode::Success)
    } else {
        println!("\nitlb: FAILED");
        exit_qemu(ExitCode::Failure)
    }
}

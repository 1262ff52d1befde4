//! Itanium D-EAR, I-EAR (cache mode) and branch trace buffer sampling
//! through the driver, on the Itanium 2 PMU model with real interrupts:
//! each overflow of the counter counting DATA_EAR_EVENTS, L1I_EAR_EVENTS or
//! BRANCH_EVENT goes through the real local APIC to the driver's handler,
//! which reads the D-EAR's PMDs, the I-EAR's PMDs or the branch trace
//! buffer and hands the sample on. Case `dear` builds the D-EAR report by
//! function from the samples; case `icache` prints the sampled instruction
//! cache misses (line, latency); case `btb` prints the source -> target
//! records. Every capture and count comes from the model, not hardware.
#![no_std]
#![no_main]

use hobby::idt::{self, InterruptFrame};
use hobby::pmi;
use hobby::test::Outcome;
use hobby::{case, check, check_eq, println};
use pmu::apic::{LvtPerfCounter, PmiDelivery, Vector};
use pmu::arch::handle_pmi;
use pmu::arch::itanium::btb::{BranchRecord, BtbConfig};
use pmu::arch::itanium::driver::{CounterConfig, Counters, ItaniumDriver};
use pmu::arch::itanium::ear::{DearConfig, DearSample, IcacheSample, IearConfig, LatencyFilter};
use pmu::arch::itanium::pmi::overflow_rule;
use pmu::arch::itanium::{Counter, Generation, ItaniumPmu, Plm, Slot};
use pmu::model::itanium::{
    Branch, DataMiss, FetchMiss, Generation as ModelGeneration, SharedItaniumModel,
};
use pmu::sampling::SampleAfter;
use pmu_report::dear::DearReport;
use pmu_report::symbols::{Function, LoadModule};
use spin::Mutex;

hobby::entry_point!(main);
pmu::owner!(Cpu0);

const G: Generation = Generation::Itanium2;
static MODEL: SharedItaniumModel = SharedItaniumModel::new(ModelGeneration::Itanium2);
// SAFETY: the model is a processor of its own (CPU 0's), and this is its
// one value.
static CPU0: ItaniumPmu = unsafe { ItaniumPmu::new() };
const ENTRY: LvtPerfCounter = LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(0xF0).unwrap()));

/// What the handler received: D-EAR and I-EAR samples and branch records.
struct Received {
    dear: [Option<DearSample>; 16],
    dears: usize,
    icache: [Option<IcacheSample>; 16],
    icaches: usize,
    branches: [Option<BranchRecord>; 32],
    records: usize,
    samples: usize,
}

static RECEIVED: Mutex<Received> = Mutex::new(Received {
    dear: [None; 16],
    dears: 0,
    icache: [None; 16],
    icaches: 0,
    branches: [None; 32],
    records: 0,
    samples: 0,
});

fn main(_: &'static hobby::boot::BootInfo) -> ! {
    println!("ear: every capture below comes from the Itanium 2 PMU model, not hardware");
    pmi::local_apic().enable(Vector::new(0xFF).unwrap());
    idt::set_handler(0xF0, on_pmi);
    hobby::test::run("ear", &[case!(dear), case!(icache), case!(btb)])
}

/// The crate's PMI path (samples into `RECEIVED`; it unmasks the LVT
/// entry, which the harness's APIC delivery masks), then EOI.
fn on_pmi(frame: &InterruptFrame) {
    let mut got = RECEIVED.lock();
    let mut apic = pmi::local_apic();
    let r = handle_pmi(&CPU0, &mut MODEL.regs(), &mut apic, ENTRY, frame.rip, |s| {
        got.samples += 1;
        if let Some(d) = s.payload.dear() {
            let i = got.dears;
            if let Some(slot) = got.dear.get_mut(i) {
                *slot = Some(d);
                got.dears += 1;
            }
        }
        if let Some(c) = s.payload.icache() {
            let i = got.icaches;
            if let Some(slot) = got.icache.get_mut(i) {
                *slot = Some(c);
                got.icaches += 1;
            }
        }
        if let Some(b) = s.payload.btb() {
            for r in b.branches() {
                let i = got.records;
                if let Some(slot) = got.branches.get_mut(i) {
                    *slot = Some(r);
                    got.records += 1;
                }
            }
        }
    });
    drop(got);
    apic.eoi();
    r.expect("the model refused an access");
}

/// Deliver the model's pending overflow interrupt through the APIC, if
/// any, after `handled` others (for the error's message).
fn deliver_pending(handled: u32) -> Result<bool, hobby::test::Failure> {
    if MODEL.take_interrupt().is_none() {
        return Ok(false);
    }
    pmi::local_apic().set_perf_counter_entry(ENTRY);
    pmi::deliver_and_wait(u64::from(handled))?;
    Ok(true)
}

fn reset_received() {
    let mut r = RECEIVED.lock();
    r.dears = 0;
    r.icaches = 0;
    r.records = 0;
    r.samples = 0;
}

const FUNCTIONS: &[Function<'static>] = &[
    Function {
        name: "main",
        start: 0x4000_0000,
        end: 0x4000_0100,
    },
    Function {
        name: "walk_list",
        start: 0x4000_0100,
        end: 0x4000_0400,
    },
    Function {
        name: "hash_lookup",
        start: 0x4000_0400,
        end: 0x4000_0800,
    },
];
const MODULES: &[LoadModule<'static>] = &[LoadModule {
    name: "app",
    start: 0x4000_0000,
    end: 0x4001_0000,
    functions: FUNCTIONS,
}];

/// Every 2nd data cache miss of at least 64 cycles, sampled through the
/// D-EAR; the report by function is exact.
fn dear() -> Outcome {
    MODEL.reset(ModelGeneration::Itanium2);
    reset_received();
    let (mut d, c) = ItaniumDriver::<Cpu0, _>::take(MODEL.regs(), G, &CPU0)?;
    MODEL.with(|m| m.set_psr(pmu::model::itanium::Psr::MONITORING));
    let ear = DearConfig::cache_misses(G, LatencyFilter::AtLeast64)?
        .with_plm(Plm::ALL)
        .with_privileged(true);
    let every = SampleAfter::new(2, overflow_rule(G))?;
    let hw = Counter::new(G, 5).ok_or("counter 5")?;
    let c5 =
        c.c5.configure(&mut d, &CounterConfig::dear_sampling(hw, every, ear)?)?
            .enable(&mut d)?;
    // (data address, instruction bundle, slot, latency): 10 misses, 8 at
    // or above 64 cycles, so 4 samples: the 2nd, 4th, 6th and 8th captured.
    let misses = [
        (0x6000_0040, 0x4000_0110, 1, 120), // walk_list
        (0x6000_0080, 0x4000_0110, 1, 200), // sampled
        (0x6000_00C0, 0x4000_0010, 0, 30),  // below 64: not captured
        (0x6000_1000, 0x4000_0420, 2, 90),  // hash_lookup
        (0x6000_2000, 0x4000_0420, 2, 400), // sampled
        (0x6000_0100, 0x4000_0110, 1, 64),  // walk_list
        (0x6000_0140, 0x4000_0110, 1, 12),  // not captured
        (0x6000_0180, 0x4000_0130, 0, 300), // sampled
        (0x6000_3000, 0x4000_0020, 1, 70),  // main
        (0x6000_3040, 0x4000_0020, 1, 80),  // sampled
    ];
    let mut interrupts = 0;
    for (data, ip, slot, latency) in misses {
        MODEL.with(|m| m.data_miss(DataMiss::cache(data, ip, slot, latency)));
        interrupts += u32::from(deliver_pending(interrupts)?);
    }
    let mut report: DearReport<'_, 4, 8> = DearReport::new(MODULES).with_sample_after(2);
    let got = RECEIVED.lock();
    for s in got.dear.iter().take(got.dears).flatten() {
        report.record(*s);
    }
    println!("ear: {interrupts} PMU interrupts; the D-EAR report, from the model's captures:");
    println!("{report}");
    check_eq!(interrupts, 4);
    check_eq!((got.samples, got.dears), (4, 4));
    let walk = report.function("app", "walk_list").ok_or("walk_list row")?;
    check_eq!(
        (walk.samples, walk.average(), walk.max),
        (2, Some(250), 300)
    );
    let hash = report
        .function("app", "hash_lookup")
        .ok_or("hash_lookup row")?;
    check_eq!((hash.samples, hash.max), (1, 400));
    let main = report.function("app", "main").ok_or("main row")?;
    check_eq!((main.samples, main.max), (1, 80));
    let first = got.dear[0].ok_or("first sample")?;
    check_eq!(first.data_address, 0x6000_0080);
    let ip = first.instruction.ok_or("instruction address")?;
    check_eq!((ip.bundle, ip.slot), (0x4000_0110, Some(Slot::S1)));
    check_eq!(CPU0.pmi().periods(5), 4);
    drop(got);
    let c5 = c5.release(&mut d)?;
    check!(
        d.give_back(Counters { c5, ..c }).is_ok(),
        "every token given back"
    );
    Ok(())
}

/// Every 2nd instruction cache miss of at least 128 cycles, sampled through
/// the I-EAR in cache mode (issue 28): each sample is exactly the model's
/// capture (line, latency, latency overflow).
fn icache() -> Outcome {
    MODEL.reset(ModelGeneration::Itanium2);
    reset_received();
    let (mut d, c) = ItaniumDriver::<Cpu0, _>::take(MODEL.regs(), G, &CPU0)?;
    MODEL.with(|m| m.set_psr(pmu::model::itanium::Psr::MONITORING));
    let ear = IearConfig::cache_misses(G, LatencyFilter::AtLeast128)?
        .with_plm(Plm::ALL)
        .with_privileged(true);
    let every = SampleAfter::new(2, overflow_rule(G))?;
    let hw = Counter::new(G, 7).ok_or("counter 7")?;
    let c7 =
        c.c7.configure(&mut d, &CounterConfig::icache_sampling(hw, every, ear)?)?
            .enable(&mut d)?;
    // (fetch address, latency): 9 misses, 8 at or above 128 cycles, so 4
    // samples: the 2nd, 4th, 6th and 8th captured.
    let misses = [
        (0x4000_0104, 140),  // walk_list
        (0x4000_0128, 200),  // sampled: line 4000_0120
        (0x4000_0010, 40),   // below 128: not captured
        (0x4000_0444, 900),  // hash_lookup
        (0x4000_0460, 128),  // sampled: exactly the threshold
        (0x4000_0020, 300),  // main
        (0x4000_0508, 5000), // sampled: beyond 12 bits, overflow bit
        (0x4000_0140, 150),  // walk_list
        (0x4000_0030, 260),  // sampled
    ];
    let mut interrupts = 0;
    for (address, latency) in misses {
        MODEL.with(|m| m.fetch_miss(FetchMiss::cache(address, latency)));
        interrupts += u32::from(deliver_pending(interrupts)?);
    }
    let got = RECEIVED.lock();
    println!("ear: {interrupts} PMU interrupts; I-EAR cache misses from the model's captures:");
    for s in got.icache.iter().take(got.icaches).flatten() {
        println!(
            "  line {:#018x}  latency {:>4} cycles{}",
            s.line,
            s.latency,
            if s.latency_overflow {
                " (overflowed: more than 4095)"
            } else {
                ""
            }
        );
    }
    check_eq!(interrupts, 4);
    check_eq!((got.samples, got.icaches), (4, 4));
    let want = [
        (0x4000_0120, 200, false),
        (0x4000_0460, 128, false),
        (0x4000_0500, 0xFFF, true),
        (0x4000_0020, 260, false),
    ];
    for (s, (line, latency, overflow)) in got.icache.iter().take(got.icaches).zip(want) {
        let s = s.ok_or("an I-EAR sample")?;
        check_eq!(
            (s.line, s.latency, s.latency_overflow),
            (line, latency, overflow)
        );
    }
    check_eq!(CPU0.pmi().periods(7), 4);
    check_eq!(CPU0.pmi().ear_invalid(), 0);
    drop(got);
    let c7 = c7.release(&mut d)?;
    check!(
        d.give_back(Counters { c7, ..c }).is_ok(),
        "every token given back"
    );
    Ok(())
}

/// Every 3rd taken or not-taken branch, sampled through the branch trace
/// buffer: each sample's records, decoded into source -> target pairs, are
/// exactly the branches since the previous sample.
fn btb() -> Outcome {
    MODEL.reset(ModelGeneration::Itanium2);
    reset_received();
    let (mut d, c) = ItaniumDriver::<Cpu0, _>::take(MODEL.regs(), G, &CPU0)?;
    MODEL.with(|m| m.set_psr(pmu::model::itanium::Psr::MONITORING));
    let btb = BtbConfig::capture_all(G)
        .with_plm(Plm::ALL)
        .with_privileged(true);
    let every = SampleAfter::new(3, overflow_rule(G))?;
    let hw = Counter::new(G, 6).ok_or("counter 6")?;
    let c6 =
        c.c6.configure(&mut d, &CounterConfig::btb_sampling(hw, every, btb)?)?
            .enable(&mut d)?;
    let branch = |i: u64| {
        let source = 0x4000_0000 + i * 0x110;
        if i % 4 == 3 {
            Branch::not_taken(source, 2, source + 0x10)
        } else {
            Branch::taken(source, (i % 3) as u8, 0x4010_0000 + i * 0x40)
        }
    };
    let mut interrupts = 0;
    for i in 0..12 {
        MODEL.with(|m| m.branch(branch(i)));
        interrupts += u32::from(deliver_pending(interrupts)?);
    }
    let got = RECEIVED.lock();
    println!("ear: {interrupts} PMU interrupts; branch trace records from the model's buffer:");
    for r in got.branches.iter().take(got.records).flatten() {
        match r.target {
            Some(t) => println!(
                "  {:#018x} -> {t:#018x}{}",
                r.source_address(),
                if r.slot.is_none() { " (not taken)" } else { "" }
            ),
            None => println!("  {:#018x} -> (no target)", r.source_address()),
        }
    }
    check_eq!(interrupts, 4);
    check_eq!((got.samples, got.records), (4, 12));
    for (i, r) in got.branches.iter().take(got.records).enumerate() {
        let b = branch(i as u64);
        let r = r.ok_or("a record")?;
        check_eq!(r.source, b.source & !0xF);
        check_eq!(r.target, Some(b.target & !0xF));
        check_eq!(r.slot.is_none(), !b.taken);
    }
    check_eq!(CPU0.pmi().periods(6), 4);
    drop(got);
    let c6 = c6.release(&mut d)?;
    check!(
        d.give_back(Counters { c6, ..c }).is_ok(),
        "every token given back"
    );
    Ok(())
}

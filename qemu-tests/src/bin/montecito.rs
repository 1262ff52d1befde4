//! Montecito through the driver, on the Itanium PMU model with real
//! interrupts: counters on PMD4 (of the four every generation has) and on
//! PMD12 and PMD15 (Montecito's own eight), configured from Montecito's
//! event catalog, sampling and counting at once; each overflow interrupt
//! goes through the real local APIC to the driver's handler. The catalog
//! tells the driver that CPU_OP_CYCLES gains one per cycle (so the handler
//! reloads that counter without reading it) and IA64_INST_RETIRED up to
//! six (so it reads that one first). Counts come from the model.
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU64, Ordering};

use hobby::idt::{self, InterruptFrame};
use hobby::pmi;
use hobby::test::Outcome;
use hobby::{case, check, check_eq, println};
use pmu::access::Recording;
use pmu::apic::{LvtPerfCounter, PmiDelivery, Vector};
use pmu::arch::handle_pmi;
use pmu::arch::itanium::driver::{CounterConfig, Counters, ItaniumDriver, MontecitoCounters};
use pmu::arch::itanium::events::find;
use pmu::arch::itanium::pmi::overflow_rule;
use pmu::arch::itanium::{Counter, CounterPmc, Generation, ItaniumPmu};
use pmu::arch::itanium::{EventCode, Plm};
use pmu::model::itanium::{Event, Generation as ModelGeneration, SharedItaniumModel};
use pmu::sampling::SampleAfter;

hobby::entry_point!(main);
pmu::owner!(Core0);

const G: Generation = Generation::Montecito;
static MODEL: SharedItaniumModel = SharedItaniumModel::new(ModelGeneration::Montecito);
// SAFETY: the model is a processor of its own (core 0's), and this is its
// one value.
static CORE0: ItaniumPmu = unsafe { ItaniumPmu::new() };
static SAMPLES: [AtomicU64; 16] = [const { AtomicU64::new(0) }; 16];
static PMD_READS: AtomicU64 = AtomicU64::new(0);
const ENTRY: LvtPerfCounter = LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(0xF0).unwrap()));

fn main(_: &'static hobby::boot::BootInfo) -> ! {
    println!("montecito: every count below comes from the Itanium PMU model, not hardware");
    pmi::local_apic().enable(Vector::new(0xFF).unwrap());
    idt::set_handler(0xF0, on_pmi);
    hobby::test::run("montecito", &[case!(montecito)])
}

/// The crate's PMI path (it unmasks the LVT entry, which the harness's
/// APIC delivery masks), then EOI.
fn on_pmi(frame: &InterruptFrame) {
    let mut regs: Recording<_, 8> = Recording::new(MODEL.regs());
    let mut apic = pmi::local_apic();
    let r = handle_pmi(&CORE0, &mut regs, &mut apic, ENTRY, frame.rip, |s| {
        SAMPLES[usize::from(s.counter) % 16].fetch_add(1, Ordering::SeqCst);
    });
    PMD_READS.fetch_add(u64::from(regs.counts().pmd_reads), Ordering::SeqCst);
    apic.eoi();
    r.expect("the model refused an access");
}

/// Counter `n` counting the catalog event `name` at every privilege level.
fn config(n: u8, name: &str) -> Result<CounterConfig, hobby::test::Failure> {
    let e = find(G, name).ok_or("not in the Montecito catalog")?;
    let hw = Counter::new(G, n).ok_or("no such Montecito counter")?;
    let code = EventCode::new(G, e.code).ok_or("event code")?;
    let pmc = CounterPmc::new(hw, code)?
        .with_plm(Plm::ALL)
        .with_privileged(true);
    Ok(CounterConfig::counting(pmc))
}

/// Feed `event` to the model, delivering each overflow interrupt through the
/// APIC as soon as the model raises it (the model freezes at the overflow,
/// so the rest is fed after the handler has unfrozen it).
fn feed(mut event: Event) -> Result<u64, hobby::test::Failure> {
    let mut interrupts = 0;
    while event.count > 0 {
        let got = MODEL.with(|m| m.inject(event));
        event.count -= got.counted_cycles * u64::from(event.per_cycle.max(1));
        if MODEL.take_interrupt().is_some() {
            pmi::local_apic().set_perf_counter_entry(ENTRY);
            // The handler unmasks the entry; waited for boundedly (a real
            // CPU takes the interrupt some instructions after the write
            // that sent it).
            pmi::deliver_and_wait(interrupts)?;
            interrupts += 1;
        } else if got.counted_cycles == 0 {
            return Err("the model is frozen with no interrupt pending".into());
        }
    }
    Ok(interrupts)
}

fn montecito() -> Outcome {
    MODEL.reset(ModelGeneration::Montecito);
    let (mut d, c) = ItaniumDriver::<Core0, _>::take(MODEL.regs(), G, &CORE0)?;
    let m = c
        .montecito
        .ok_or("a Montecito driver hands out counters 8-15")?;
    let every = |n| SampleAfter::new(n, overflow_rule(G));
    let cycles = config(4, "CPU_OP_CYCLES_ALL")?.sampling(every(50)?);
    let retired = config(12, "IA64_INST_RETIRED")?.sampling(every(40)?);
    let counted = config(15, "IA64_INST_RETIRED")?;
    let c4 = c.c4.configure(&mut d, &cycles)?.enable(&mut d)?;
    let c12 = m.c12.configure(&mut d, &retired)?.enable(&mut d)?;
    let c15 = m.c15.configure(&mut d, &counted)?.enable(&mut d)?;
    check!(
        c4.programmed().one_per_cycle(),
        "CPU_OP_CYCLES: at most 1 per cycle"
    );
    check!(
        !c12.programmed().one_per_cycle(),
        "IA64_INST_RETIRED: up to 6 per cycle"
    );
    // 520 cycles, then 300 retired instructions at 6 per cycle.
    let mut interrupts = feed(Event::new(0x12, 0, 520))?;
    interrupts += feed(Event::new(0x08, 0, 300).per_cycle(6))?;
    let (p4, p12) = (CORE0.pmi().periods(4), CORE0.pmi().periods(12));
    let (s4, s12) = (
        SAMPLES[4].load(Ordering::SeqCst),
        SAMPLES[12].load(Ordering::SeqCst),
    );
    println!(
        "montecito: {interrupts} interrupts; PMD4 {p4} periods of 50 cycles, PMD12 {p12} periods of 40 retired, \
         PMD15 counted {} retired; {} PMD reads in the handler",
        c15.read(&mut d)?,
        PMD_READS.load(Ordering::SeqCst)
    );
    // Conservation on both sampling counters, and the counting one exact.
    let (o4, r4) = every(50)?.split(c4.read(&mut d)?);
    let (o12, r12) = every(40)?.split(c12.read(&mut d)?);
    check_eq!((p4 + o4) * 50 + r4, 520, "cycles");
    check_eq!((p12 + o12) * 40 + r12, 300, "retired instructions");
    check_eq!(c15.read(&mut d)?, 300);
    check_eq!((s4, s12), (p4, p12), "a sample per period");
    // Only the multi-increment counter was read by the handler.
    check_eq!(PMD_READS.load(Ordering::SeqCst), s12);
    let (c4, c12, c15) = (
        c4.release(&mut d)?,
        c12.release(&mut d)?,
        c15.release(&mut d)?,
    );
    let montecito = Some(MontecitoCounters { c12, c15, ..m });
    check!(
        d.give_back(Counters { c4, montecito, ..c }).is_ok(),
        "every token given back, counters 8-15 with them"
    );
    Ok(())
}

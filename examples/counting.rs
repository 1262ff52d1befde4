//! Counting with typestate counters on the NetBurst PMU model: configure,
//! enable, read, halt, resume, release. QEMU has no PMU, so the counter here
//! is the crate's register-level model of a Pentium 4 PMU; every number
//! printed comes from that model.
//!
//! ```text
//! cargo qemu counting
//! ```
#![no_std]
#![no_main]

use hobby::boot::BootInfo;
use hobby::exit::{ExitCode, exit_qemu};
use hobby::println;
use hobby::test::Failure;
use pmu::access::Recording;
use pmu::arch::netburst::driver::{CounterConfig, Counters, NetBurstDriver};
use pmu::arch::netburst::{Escr, EventSpec, NetBurstPmu};
use pmu::model::netburst::SharedNetBurstModel;
use pmu::model::netburst::{Config, EscrGroup, EventKind, LogicalProcessor, Privilege};

hobby::entry_point!(main);

static MODEL: SharedNetBurstModel = SharedNetBurstModel::new(Config::prescott_ht());
// SAFETY: the model is a package of its own, and this is its one value.
static PACKAGE: NetBurstPmu = unsafe { NetBurstPmu::new() };

/// `instr_retired` with `NBOGUSNTAG` as the model sees it (CRU_ESCR0/1,
/// event select 02H, mask bit 0).
const INSTR_RETIRED: EventKind = EventKind::new(EscrGroup::Cru01, 0x02, 1);

fn retire(n: u64) {
    MODEL.with(|m| m.inject(INSTR_RETIRED.on(LogicalProcessor::T0, Privilege::Os, n)));
}

fn main(_: &'static BootInfo) -> ! {
    println!("pmu example: counting (on the NetBurst PMU model: QEMU has no PMU)");
    match run() {
        Ok(()) => exit_qemu(ExitCode::Success),
        Err(e) => {
            println!("counting failed: {}", e.message());
            exit_qemu(ExitCode::Failure)
        }
    }
}

pmu::owner!(
    /// The owner of this example's driver of the (model's) package.
    Package0
);

fn run() -> Result<(), Failure> {
    let cpu = MODEL.detect().ok_or("detection on the model")?;
    let msr = Recording::<_, 8>::new(MODEL.msr());
    let (mut pmu, counters) = NetBurstDriver::<Package0, _>::take(msr, &cpu, &PACKAGE)?;
    pmu.msr().clear();
    let event: EventSpec = "instr_retired:NBOGUSNTAG:k".parse()?;
    let config = CounterConfig::counting(event, Escr::CruEscr0);
    println!(
        "event {event}: ESCR {:#010x} on CRU_ESCR0, counter 12 (IQ_COUNTER0)",
        event.escr_bits()
    );

    let c12 = counters.c12.configure(&mut pmu, &config)?;
    report(&mut pmu, "configure");
    let c12 = c12.enable(&mut pmu)?;
    report(&mut pmu, "enable");
    retire(1000);
    let v = c12.read(&mut pmu)?;
    report(&mut pmu, "read");
    println!("  1000 instructions retired at CPL 0 -> counter = {v}");
    MODEL.with(|m| m.inject(INSTR_RETIRED.on(LogicalProcessor::T0, Privilege::Usr, 500)));
    let v = c12.read(&mut pmu)?;
    println!("  500 more at CPL 3 (the event counts :k only) -> counter = {v}");
    pmu.msr().clear();
    let c12 = c12.halt(&mut pmu)?;
    report(&mut pmu, "halt");
    retire(700);
    let halted = c12.read(&mut pmu)?;
    println!("  700 while halted -> counter = {halted}");
    pmu.msr().clear();
    let c12 = c12.resume(&mut pmu)?;
    report(&mut pmu, "resume");
    retire(234);
    let v = c12.read(&mut pmu)?;
    println!("  234 after resuming -> counter = {v}");
    pmu.msr().clear();
    let c12 = c12.release(&mut pmu)?;
    report(&mut pmu, "release");
    // The CCCR is idle and the counter zero; CRU_ESCR0 keeps its image,
    // inert without an enabled CCCR selecting it: nothing counts after.
    retire(100);
    let zeroed = MODEL.with(|m| m.counter(12) == 0 && m.cccr(12) & !(3 << 16) == 0);
    println!("  released: CCCR idle, counter zeroed and counting nothing: {zeroed}");
    // Every token back (counter 12 released, the other 17 never claimed):
    // the driver is given back, and owner `Package0` is free again.
    let _msr = pmu.give_back(Counters { c12, ..counters });
    if v != 1234 || halted != 1000 || !zeroed {
        return Err("the model counted something else".into());
    }
    Ok(())
}

fn report<M: pmu::access::MsrAccess, const N: usize>(
    pmu: &mut NetBurstDriver<'_, Package0, Recording<M, N>>,
    op: &str,
) {
    let c = pmu.msr().take_counts();
    println!(
        "{op:>9}: {} RDMSR, {} WRMSR, {} RDPMC",
        c.msr_reads, c.msr_writes, c.rdpmc
    );
}

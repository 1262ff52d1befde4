//! Cascading on the NetBurst PMU model: counter 2 is cascaded from counter 0
//! (SDM 18.15.5.6), both counting the same event, so the pair holds a count
//! no single 40-bit counter can: the "virtual count" is the low counter until
//! it overflows, then 2^40 plus the high counter. Then the cascaded counter
//! is halted both ways the manual gives: by clearing the low counter's `OVF`
//! (the high counter stays cascaded and restarts at the next overflow), and
//! by halting it (clearing its `CASCADE`). QEMU has no PMU: every number
//! comes from the crate's model of a Pentium 4 PMU.
//!
//! ```text
//! cargo qemu cascade
//! ```
#![no_std]
#![no_main]

use hobby::boot::BootInfo;
use hobby::exit::{ExitCode, exit_qemu};
use hobby::println;
use hobby::test::Failure;
use pmu::arch::netburst::driver::{CounterConfig, Counters, NetBurstDriver, NetBurstHandle};
use pmu::arch::netburst::{Escr, EventSpec, NetBurstPmu};
use pmu::counter::rules::Readable;
use pmu::counter::state::State;
use pmu::model::netburst::{Config, EscrGroup, EventKind, LogicalProcessor, Privilege};
use pmu::model::netburst::{NetBurstMsr, SharedNetBurstModel};

hobby::entry_point!(main);

static MODEL: SharedNetBurstModel = SharedNetBurstModel::new(Config::prescott_ht());
// SAFETY: the model is a package of its own, and this is its one value.
static PACKAGE: NetBurstPmu = unsafe { NetBurstPmu::new() };

/// `global_power_events` RUNNING as the model sees it.
const RUNNING: EventKind = EventKind::new(EscrGroup::Fsb, 0x13, 1);
const WRAP: u64 = 1 << 40;

pmu::owner!(
    /// The owner of this example's driver of the (model's) package.
    Package0
);

type Driver = NetBurstDriver<'static, Package0, NetBurstMsr<'static>>;

fn clocks(n: u64) {
    MODEL.with(|m| m.inject(RUNNING.on(LogicalProcessor::T0, Privilege::Os, n)));
}

fn main(_: &'static BootInfo) -> ! {
    println!("pmu example: cascade (on the NetBurst PMU model: QEMU has no PMU)");
    match run() {
        Ok(()) => exit_qemu(ExitCode::Success),
        Err(e) => {
            println!("cascade failed: {}", e.message());
            exit_qemu(ExitCode::Failure)
        }
    }
}

/// The pair's count: the low counter until its `OVF` is set, then 2^40 plus
/// the high counter (which started with the event after the overflow).
fn virtual_count<const L: u8, const H: u8, S1: State + Readable, S2: State + Readable>(
    pmu: &mut Driver,
    low: &NetBurstHandle<Package0, L, S1>,
    high: &NetBurstHandle<Package0, H, S2>,
) -> Result<u64, Failure> {
    let ovf = MODEL.with(|m| m.cccr(usize::from(L)) & 1 << 31 != 0);
    let lo = low.read(pmu)?;
    let hi = high.read(pmu)?;
    Ok(if ovf { WRAP + hi } else { lo })
}

fn run() -> Result<(), Failure> {
    let cpu = MODEL.detect().ok_or("detection on the model")?;
    let (mut pmu, c) = Driver::take(MODEL.msr(), &cpu, &PACKAGE)?;
    let event: EventSpec = "global_power_events:RUNNING:k".parse()?;
    let low =
        c.c0.configure(&mut pmu, &CounterConfig::counting(event, Escr::FsbEscr0));
    let low = low?.enable(&mut pmu)?;
    let high =
        c.c2.configure(&mut pmu, &CounterConfig::counting(event, Escr::FsbEscr1));
    let high = high?;
    let high = high.cascade_from(&low, &mut pmu)?;
    println!("counter 0 (FSB_ESCR0) counts clocks; counter 2 (FSB_ESCR1) is cascaded from it");

    let total = WRAP + 123_456_789;
    clocks(total);
    let v = virtual_count(&mut pmu, &low, &high)?;
    println!("after 2^40 + 123456789 clocks (one 40-bit counter wraps):");
    println!(
        "  counter 0 = {}, counter 2 = {}",
        low.read(&mut pmu).unwrap_or(0),
        high.read(&mut pmu).unwrap_or(0)
    );
    println!(
        "  virtual count = {v} ({})",
        if v == total { "exact" } else { "WRONG" }
    );

    println!("halt 1: clear counter 0's OVF (SDM 18.15.5.6) -> counter 2 stops, stays cascaded");
    pmu.clear_overflow(&low)?;
    let before = high.read(&mut pmu)?;
    clocks(1000);
    let after = high.read(&mut pmu)?;
    println!("  1000 more clocks: counter 2 {before} -> {after}");
    let lo = low.read(&mut pmu)?;
    clocks(WRAP - lo + 10);
    let restarted = high.read(&mut pmu)?;
    println!("  counter 0 overflows again, 10 clocks later: counter 2 = {restarted} (restarted)");

    println!("halt 2: halt counter 2 (clear its CASCADE)");
    let high = high.halt(&mut pmu)?;
    clocks(WRAP);
    let halted = high.read(&mut pmu)?;
    println!("  another 2^40 clocks, counter 0 overflows again: counter 2 = {halted} (halted)");
    let (c0, c2) = (low.release(&mut pmu)?, high.release(&mut pmu)?);
    let _msr = pmu.give_back(Counters { c0, c2, ..c });
    if v != total || after != before || restarted != before + 10 || halted != restarted {
        return Err("the model counted something else".into());
    }
    Ok(())
}

//! A statistical profiler, the main example, on every CPU at once: each CPU
//! runs a workload of functions with known costs (CPU 0: `work_1x`,
//! `work_2x`, `work_4x`, 1:2:4; CPU 1: `work_4x` and `work_1x` twice,
//! 2:0:4); each CPU's local APIC timer, with the TSC measuring the time
//! that really passed (at most two ticks' worth a tick: time the host did
//! not run the CPU is not its cycles), advances the cycle count (`global_power_events`
//! RUNNING) of its logical processor of one NetBurst PMU model package;
//! each CPU's own driver (one per logical processor, `take_for`) has a
//! sampling counter that overflows every N cycles, the model's PMI for that
//! logical processor goes through that CPU's APIC as a real interrupt, and
//! the driver's handler there records the interrupted RIP. A profile per
//! CPU attributes the samples to function names.
//!
//! N is picked by calibration (VTune's method): one run counting cycles
//! without interrupts, then N = cycles / target samples; the sampled run
//! lasts until it took the samples aimed at (however the host schedules the
//! virtual CPUs).
//!
//! QEMU has no PMU: the counters are the crate's model of a Pentium 4 PMU
//! with Hyper-Threading, fed with real time. The interrupts, the APICs, the
//! RIPs and the symbol lookup are real. Booted with one CPU (plain `cargo
//! run`), it profiles that one.
//!
//! This file is the NetBurst platform (the model package, each CPU's
//! logical processor of it, how the ticks feed it); the profiler itself
//! (workloads, runs, drivers and PMIs through the crate's seam, report) is
//! `profiler/shared.rs`, which `profiler_archperf.rs` shares.
//!
//! ```text
//! cargo qemu profiler
//! ```
//!
//! qemu-run: smp2: -smp 2 -accel tcg,thread=multi
#![no_std]
#![no_main]

#[path = "profiler/shared.rs"]
mod shared;

use core::fmt;

use hobby::println;
use pmu::arch::netburst::{LogicalPmu, LogicalProcessor, NetBurstPmu};
use pmu::detect::NetBurstCpu;
use pmu::model::netburst::{Config, EscrGroup, EventKind, LogicalProcessor as ModelLp, Privilege};
use pmu::model::netburst::{NetBurstMsr, SharedNetBurstModel};

hobby::entry_point!(shared::main::<NetBurstModel>);

/// The profiler on one NetBurst package (model) with Hyper-Threading, a
/// CPU per logical processor.
enum NetBurstModel {}

/// `global_power_events` RUNNING, as the model sees it: one per clock.
const RUNNING: EventKind = EventKind::new(EscrGroup::Fsb, 0x13, 1);

/// One package: its model and its one `NetBurstPmu`, shared by both CPUs
/// (each takes its own driver of it, and its PMI handler shares its state).
static MODEL: SharedNetBurstModel = SharedNetBurstModel::new(Config::prescott_ht());
// SAFETY: the model is a package of its own, and this is its one value.
static PACKAGE: NetBurstPmu = unsafe { NetBurstPmu::new() };

/// CPU `cpu` plays logical processor `cpu` of the package.
fn lp_of(cpu: usize) -> (LogicalProcessor, ModelLp) {
    if cpu == 0 {
        (LogicalProcessor::T0, ModelLp::T0)
    } else {
        (LogicalProcessor::T1, ModelLp::T1)
    }
}

impl shared::Platform for NetBurstModel {
    type Local = LogicalPmu<'static>;
    type Regs = NetBurstMsr<'static>;
    const NAME: &'static str = "profiler";
    const EVENT: &'static str = "cycles";
    const REAL: bool = false;

    fn introduce() {
        println!(
            "  counter: the NetBurst PMU model (QEMU has no PMU), its clock driven by the TSC;"
        );
    }

    fn machine(f: &mut fmt::Formatter<'_>, cpus: usize) -> fmt::Result {
        write!(
            f,
            "{cpus} CPU(s), one NetBurst package (model) with a driver per logical processor"
        )
    }

    /// CPU `cpu`'s logical processor of the package.
    fn local(cpu: usize) -> LogicalPmu<'static> {
        PACKAGE.logical(lp_of(cpu).0)
    }

    /// The model's registers as CPU `cpu`'s logical processor sees them.
    fn regs(cpu: usize) -> Option<NetBurstMsr<'static>> {
        MODEL.msr_as(lp_of(cpu).1)
    }

    fn detect(_: usize) -> Option<NetBurstCpu> {
        MODEL.detect()
    }

    /// The cycles happen on CPU `cpu`'s logical processor of the package,
    /// up to its PMI. Where the model can bound nothing (a counter's OVF
    /// set), only one cycle: `inject_until_own_pmi` would otherwise search
    /// for this logical processor's next PMI on copies of the model, which
    /// costs 150-300 µs under TCG and a good part of a second where a
    /// hypervisor emulates the guest; the rest waits for the next tick
    /// (carried, as after any tick). That one cycle matters: the unbounded
    /// counter may be this logical processor's own, wrapped on the last
    /// cycle of a tick, its PMI due with the next event (NetBurst raises it
    /// "on the next event count after the counter has overflowed", SDM
    /// 18.15.5.8); with no cycle fed, neither CPU would ever feed again.
    /// Otherwise it is the other logical processor's PMI, raised and not
    /// yet serviced, and the cycle is just counted.
    fn feed(cpu: usize, cycles: u64) -> (u64, bool) {
        let lp = lp_of(cpu).1;
        let cycles = if MODEL.with(|m| m.events_without_pmi()) == 0 {
            cycles.min(1)
        } else {
            cycles
        };
        let got = MODEL.inject_until_own_pmi(RUNNING.on(lp, Privilege::Os, cycles));
        (
            got.injected,
            got.pmi_pending && MODEL.take_pmi(lp).is_some(),
        )
    }
}

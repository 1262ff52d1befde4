//! A statistical profiler, the main example, on every CPU at once: each CPU
//! runs a workload of functions with known costs (CPU 0: `work_1x`,
//! `work_2x`, `work_4x`, 1:2:4; CPU 1: `work_4x` and `work_1x` twice,
//! 2:0:4); each CPU's local APIC timer, with the TSC measuring the time
//! that really passed, advances the cycle count (`global_power_events`
//! RUNNING) of its logical processor of one NetBurst PMU model package;
//! each CPU's own driver (one per logical processor, `take_for`) has a
//! sampling counter that overflows every N cycles, the model's PMI for that
//! logical processor goes through that CPU's APIC as a real interrupt, and
//! the driver's handler there records the interrupted RIP. A profile per
//! CPU attributes the samples to function names.
//!
//! N is picked by calibration (VTune's method): one run counting cycles
//! without interrupts, then N = cycles / target samples; the sampled run
//! repeats the calibration run's rounds.
//!
//! QEMU has no PMU: the counters are the crate's model of a Pentium 4 PMU
//! with Hyper-Threading, fed with real time. The interrupts, the APICs, the
//! RIPs and the symbol lookup are real. Booted with one CPU (plain `cargo
//! run`), it profiles that one.
//!
//! This file is the NetBurst part (the model package, its drivers, the
//! counter each logical processor samples, the PMI handler); the profiler
//! itself (workloads, runs, report) is `profiler/shared.rs`, which
//! `profiler_archperf.rs` shares.
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

use hobby::idt::InterruptFrame;
use hobby::test::Failure;
use hobby::timer::Calibration;
use hobby::{println, smp};
use pmu::arch::handle_pmi;
use pmu::arch::netburst::driver::{CounterConfig, Counters, NetBurstDriver};
use pmu::arch::netburst::pmi::overflow_rule;
use pmu::arch::netburst::{Escr, EventSpec, LogicalProcessor, NetBurstPmu};
use pmu::counter::Owner;
use pmu::model::netburst::{Config, EscrGroup, EventKind, LogicalProcessor as ModelLp, Privilege};
use pmu::model::netburst::{ModelMsr, SharedModel};
use shared::{CycleCounter, SAMPLES, apic, entry};

hobby::entry_point!(shared::main::<NetBurstModel>);

/// The profiler on one NetBurst package (model) with Hyper-Threading, a
/// CPU per logical processor.
enum NetBurstModel {}

/// `global_power_events` RUNNING, as the model sees it: one per clock.
const RUNNING: EventKind = EventKind::new(EscrGroup::Fsb, 0x13, 1);

/// One package: its model and its one `NetBurstPmu`, shared by both CPUs
/// (each takes its own driver of it, and its PMI handler shares its state).
static MODEL: SharedModel = SharedModel::new(Config::prescott_ht());
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

impl shared::Architecture for NetBurstModel {
    const NAME: &'static str = "profiler";
    const EVENT: &'static str = "cycles";
    const SAME_ROUNDS: bool = true;

    fn introduce() {
        println!(
            "  counter: the NetBurst PMU model (QEMU has no PMU), its clock driven by the TSC;"
        );
    }

    fn real() -> bool {
        false
    }

    fn machine(f: &mut fmt::Formatter<'_>, cpus: usize) -> fmt::Result {
        write!(
            f,
            "{cpus} CPU(s), one NetBurst package (model) with a driver per logical processor"
        )
    }

    /// The shortest the platform keeps up with (200 µs under TCG).
    fn choose_tick(cal: &Calibration) {
        shared::choose_model_tick::<Self>(cal);
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
    /// 18.15.5.8); with no cycle fed, neither CPU would ever feed again
    /// (seen: once in 282 boots, both CPUs stuck at 64 samples). Otherwise
    /// it is the other logical processor's PMI, raised and not yet
    /// serviced, and the cycle is just counted.
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

    /// The driver's handler for this CPU's logical processor, then EOI.
    fn on_pmi(frame: &InterruptFrame) {
        let cpu = smp::cpu().min(1);
        let (lp, model_lp) = lp_of(cpu);
        let mut apic = apic();
        let chain = shared::call_chain(frame);
        if let Some(mut msr) = MODEL.msr_as(model_lp) {
            let _ = handle_pmi(
                PACKAGE.logical(lp),
                &mut msr,
                &mut apic,
                entry(),
                frame.rip,
                |s| {
                    SAMPLES[cpu].push(s.with_payload(chain));
                },
            );
        }
        shared::rearm_tick(cpu);
        apic.eoi();
    }

    /// RUNNING on the logical processor's own counter, with a driver of the
    /// package for that logical processor.
    fn profile<O: Owner>(cpu: usize) -> Result<(), Failure> {
        let (lp, model_lp) = lp_of(cpu);
        let info = MODEL.detect().ok_or("detection on the model failed")?;
        let msr: ModelMsr<'static> = MODEL.msr_as(model_lp).ok_or("no such logical processor")?;
        let (mut pmu, c) = NetBurstDriver::<O, _>::take_for(lp, msr, &info, &PACKAGE)?;
        let event: EventSpec = pmu::netburst_event!("global_power_events:RUNNING:k");
        // T0 counts on counter 0 (FSB_ESCR0), T1 on counter 2 (FSB_ESCR1).
        let (n_counter, escr) = if cpu == 0 {
            (0, Escr::FsbEscr0)
        } else {
            (2, Escr::FsbEscr1)
        };
        let mut handles = c.erase_all();
        CycleCounter {
            driver: &mut pmu,
            handle: &mut handles[n_counter],
            counting: CounterConfig::counting(event, escr).on(lp),
            sample_every: CounterConfig::sampling,
            rule: overflow_rule(),
            periods: &|n| (PACKAGE.pmi().periods(n), PACKAGE.pmi().periods_at_halt(n)),
        }
        .profile::<Self>(cpu)?;
        // Every token back: the driver is given back, and `lp` is free for
        // another driver of the package.
        let Ok(c) = Counters::from_erased(handles) else {
            return Err("a handle is not back unclaimed".into());
        };
        let _msr = pmu.give_back(c);
        Ok(())
    }

    fn place(cpu: usize, _: u8) -> &'static str {
        if cpu == 0 {
            "logical processor T0"
        } else {
            "logical processor T1"
        }
    }
}

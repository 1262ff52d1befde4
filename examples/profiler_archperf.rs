//! The statistical profiler of `profiler.rs` on Intel's architectural PMU:
//! the same workloads (CPU 0: `work_1x`, `work_2x`, `work_4x`, 1:2:4; CPU
//! 1: `work_4x` and `work_1x` twice, 2:0:4) and the same report, sampling
//! unhalted core cycles (fixed counter 1) through the architectural PMU's
//! driver, one driver per CPU (the architectural PMU is per logical
//! processor: each CPU has a PMU of its own).
//!
//! Where the guest has a PMU (CPUID leaf 0AH version 1 or later: KVM on a
//! host that exposes its PMU, `PMU_QEMU_ACCEL=kvm`), it samples the real
//! core cycles: the real counter overflows every N cycles and its PMI comes
//! through the local APIC. Otherwise (QEMU's TCG, or KVM without a PMU) it
//! samples each CPU's architectural-PMU model (`Config::skylake()`), whose
//! core-cycle event is fed with real time: each CPU's local APIC timer
//! ticks, and the TSC cycles that passed since the last tick happen on that
//! CPU's model; the model's PMI goes through that CPU's APIC. The output
//! says which. Either way the interrupts, the APICs, the RIPs and the
//! symbol lookup are real, and N is picked by calibration (one run counting
//! cycles without interrupts, then N = cycles / target samples; the sampled
//! run lasts as long). Where interrupts are costly (under a hypervisor whose
//! VM exits are slow), the model's tick lengthens, and both runs with it.
//!
//! This file is the architectural-PMU part (the real PMU or the models, the
//! drivers, the counter each CPU samples, the PMI handler, the tick); the
//! profiler itself (workloads, runs, report) is `profiler/shared.rs`.
//!
//! ```text
//! cargo qemu profiler_archperf
//! PMU_QEMU_ACCEL=kvm cargo qemu profiler_archperf
//! ```
//!
//! qemu-run: smp2: -smp 2 -accel tcg,thread=multi
#![no_std]
#![no_main]

#[path = "profiler/shared.rs"]
mod shared;

use core::fmt::{self, Debug};
use core::sync::atomic::{AtomicBool, Ordering};

use hobby::idt::InterruptFrame;
use hobby::test::Failure;
use hobby::timer::Calibration;
use hobby::{println, smp};
use pmu::access::{MsrBackend, X86Msr};
use pmu::arch::archperf::driver::{ArchPerfDriver, CounterConfig, Counters};
use pmu::arch::archperf::{ArchEvent, ArchPerfPmu, Counter, EventSpec};
use pmu::arch::handle_pmi;
use pmu::counter::Owner;
use pmu::detect::{self, Cpuid, HardwareCpuid};
use pmu::model::archperf::{Config, Event, SharedArchPerfModel};
use pmu::sampling::Sample;
use shared::{CycleCounter, SAMPLES, apic, entry};

hobby::entry_point!(shared::main::<ArchPerf>);

/// The profiler on the architectural PMU of each CPU, real or modelled.
enum ArchPerf {}

/// Unhalted core cycles, 3CH/00H: what fixed counter 1 counts.
const CYCLES: (u8, u8) = (0x3C, 0x00);
/// Fixed counter 1's place in `Counters::erase_all` (and its `GLOBAL` bit is
/// 33).
const FIXED1: usize = 9;

/// Whether the real PMU is sampled (decided once, on CPU 0, before any
/// profile runs).
static REAL: AtomicBool = AtomicBool::new(false);
/// Per CPU: its architectural-PMU model, a logical processor of its own.
static MODELS: [SharedArchPerfModel; 2] =
    [const { SharedArchPerfModel::new(Config::skylake()) }; 2];
/// Per CPU: the PMU value of its model.
static MODEL_CPUS: [ArchPerfPmu; 2] = [
    // SAFETY: CPU 0's model, a logical processor of its own; its one value.
    unsafe { ArchPerfPmu::new() },
    // SAFETY: CPU 1's model, likewise.
    unsafe { ArchPerfPmu::new() },
];
/// Per CPU: the PMU value of its real PMU.
static REAL_CPUS: [ArchPerfPmu; 2] = [
    // SAFETY: the real PMU of CPU 0 (the boot CPU); its one value.
    unsafe { ArchPerfPmu::new() },
    // SAFETY: the real PMU of CPU 1; its one value.
    unsafe { ArchPerfPmu::new() },
];

fn real_msr() -> X86Msr {
    // SAFETY: ring 0, on the CPU that calls it (each CPU makes its own and
    // uses it there); detection reads only the MSRs CPUID enumerates, and
    // the driver and its handler access only the PMU registers of the
    // counters detection found.
    unsafe { X86Msr::new() }
}

/// The version of the architectural PMU this CPU's CPUID reports (0: none).
fn pmu_version() -> u32 {
    let cpuid = HardwareCpuid;
    if cpuid.cpuid(0, 0).eax >= 0xA {
        cpuid.cpuid(0xA, 0).eax & 0xFF
    } else {
        0
    }
}

/// The calibration run counting core cycles, then the sampled run, on
/// fixed counter 1 (or a general counter, on a PMU without a free one),
/// with a driver of `pmu` over `msr`.
fn profile_on<O: Owner, M: MsrBackend>(
    cpu: usize,
    msr: M,
    info: &detect::ArchPerfCpu,
    pmu: &'static ArchPerfPmu,
) -> Result<(), Failure>
where
    M::Error: Debug,
{
    let (mut d, c) = ArchPerfDriver::<O, _>::take(msr, info, pmu)?;
    let mut handles = c.erase_all();
    let free = |place: usize, counter: Option<Counter>| {
        handles[place].is_some() && counter.is_some_and(|c| !d.firmware().contains(c))
    };
    let place = if free(FIXED1, Counter::fixed(1)) {
        FIXED1
    } else {
        (0..8u8)
            .find(|&i| free(usize::from(i), Counter::general(i)))
            .map(usize::from)
            .ok_or("no free counter for core cycles")?
    };
    let h = handles[place].as_mut().ok_or("the counter's handle")?;
    let rule = if Counter::from_index(h.index()).is_some_and(Counter::is_fixed) {
        d.fixed_overflow_rule()
    } else {
        d.overflow_rule()
    };
    CycleCounter {
        driver: &mut d,
        handle: h,
        counting: CounterConfig::counting(EventSpec::arch(ArchEvent::CoreCycles)),
        sample_every: CounterConfig::sampling,
        rule,
        periods: &|n| (pmu.pmi().periods(n), pmu.pmi().periods_at_halt(n)),
    }
    .profile::<ArchPerf>(cpu)?;
    apic().set_perf_counter_entry(entry().masked());
    let Ok(c) = Counters::from_erased(handles) else {
        return Err("a handle is not back unclaimed".into());
    };
    let _msr = d.give_back(c);
    Ok(())
}

impl shared::Architecture for ArchPerf {
    const NAME: &'static str = "profiler_archperf";
    const EVENT: &'static str = "core cycles";
    const SAME_ROUNDS: bool = false;

    /// Decides between the real PMU and the models, by CPU 0's CPUID.
    fn introduce() {
        let version = pmu_version();
        REAL.store(version != 0, Ordering::SeqCst);
        if version != 0 {
            println!(
                "  counter: the real architectural PMU (CPUID leaf 0AH version {version}), core cycles: every count is the hardware's;"
            );
        } else {
            println!(
                "  counter: an architectural-PMU model per CPU (Skylake configuration): this guest exposes no PMU (CPUID leaf 0AH version 0);"
            );
            println!(
                "  the model's core cycles are driven by the TSC: its counts come from the model"
            );
        }
    }

    fn real() -> bool {
        REAL.load(Ordering::SeqCst)
    }

    fn machine(f: &mut fmt::Formatter<'_>, cpus: usize) -> fmt::Result {
        write!(
            f,
            "{cpus} CPU(s), a driver per CPU of its {}",
            shared::source::<Self>()
        )
    }

    /// On the models, the shortest tick the platform keeps up with
    /// (`shared::choose_model_tick`; a real PMU has no tick).
    fn choose_tick(cal: &Calibration) {
        if !Self::real() {
            MODELS[0].reset();
            shared::choose_model_tick::<Self>(cal);
        }
    }

    /// The cycles happen on CPU `cpu`'s model.
    fn feed(cpu: usize, cycles: u64) -> (u64, bool) {
        let got = MODELS[cpu].inject_until_pmi(Event::new(CYCLES.0, CYCLES.1, cycles));
        (got.injected, got.pmi_pending && MODELS[cpu].take_pmi())
    }

    /// The driver's handler on this CPU's real PMU or model, then EOI.
    fn on_pmi(frame: &InterruptFrame) {
        let cpu = smp::cpu().min(1);
        let mut apic = apic();
        let chain = shared::call_chain(frame);
        let sink = |s: Sample| {
            SAMPLES[cpu].push(s.with_payload(chain));
        };
        if Self::real() {
            let Ok(_) = handle_pmi(
                &REAL_CPUS[cpu],
                &mut real_msr(),
                &mut apic,
                entry(),
                frame.rip,
                sink,
            );
        } else {
            let _ = handle_pmi(
                &MODEL_CPUS[cpu],
                &mut MODELS[cpu].msr(),
                &mut apic,
                entry(),
                frame.rip,
                sink,
            );
        }
        shared::rearm_tick(cpu);
        apic.eoi();
    }

    /// On this CPU's real PMU or its model ([`profile_on`]).
    fn profile<O: Owner>(cpu: usize) -> Result<(), Failure> {
        if Self::real() {
            let Ok(found) = detect::detect(&HardwareCpuid, &mut real_msr());
            let info = found
                .arch_perf()
                .ok_or("CPU 0 has an architectural PMU, this CPU none")?;
            profile_on::<O, _>(cpu, real_msr(), &info, &REAL_CPUS[cpu])
        } else {
            MODELS[cpu].reset();
            let info = MODELS[cpu]
                .detect()
                .ok_or("detection on the model failed")?;
            profile_on::<O, _>(cpu, MODELS[cpu].msr(), &info, &MODEL_CPUS[cpu])
        }
    }

    /// The counter's name, by its `GLOBAL` bit.
    fn place(_: usize, counter: u8) -> &'static str {
        match counter {
            33 => "FIXED_CTR1",
            0 => "PMC0",
            1 => "PMC1",
            _ => "a general counter",
        }
    }
}

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
//! This file is the architectural-PMU platforms (the real PMU, or a model
//! per CPU and how the ticks feed it); the profiler itself (workloads,
//! runs, drivers and PMIs through the crate's seam, report) is
//! `profiler/shared.rs`. The driver picks the counter: fixed counter 1
//! where it is free, else a general counter.
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

use core::fmt;

use hobby::boot::BootInfo;
use hobby::println;
use pmu::access::X86Msr;
use pmu::arch::archperf::ArchPerfPmu;
use pmu::detect::{self, ArchPerfCpu, Cpuid, HardwareCpuid};
use pmu::model::archperf::{ArchPerfMsr, Config, Event, SharedArchPerfModel};

hobby::entry_point!(main);

/// The real architectural PMU where the guest has one (CPUID leaf 0AH
/// version 1 or later), each CPU's model otherwise.
fn main(info: &'static BootInfo) -> ! {
    if pmu_version() != 0 {
        shared::main::<RealPmu>(info)
    } else {
        shared::main::<Models>(info)
    }
}

/// The real architectural PMU of each CPU.
enum RealPmu {}

/// Each CPU's architectural-PMU model.
enum Models {}

/// Unhalted core cycles, 3CH/00H: what fixed counter 1 counts.
const CYCLES: (u8, u8) = (0x3C, 0x00);

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

/// The version of the architectural PMU this CPU's CPUID reports (0: none).
fn pmu_version() -> u32 {
    let cpuid = HardwareCpuid;
    if cpuid.cpuid(0, 0).eax >= 0xA {
        cpuid.cpuid(0xA, 0).eax & 0xFF
    } else {
        0
    }
}

impl shared::Platform for RealPmu {
    type Local = &'static ArchPerfPmu;
    type Regs = X86Msr;
    const NAME: &'static str = "profiler_archperf";
    const EVENT: &'static str = "core cycles";
    const REAL: bool = true;

    fn introduce() {
        println!(
            "  counter: the real architectural PMU (CPUID leaf 0AH version {}), core cycles: every count is the hardware's;",
            pmu_version()
        );
    }

    fn machine(f: &mut fmt::Formatter<'_>, cpus: usize) -> fmt::Result {
        write!(f, "{cpus} CPU(s), a driver per CPU of its real PMU")
    }

    fn local(cpu: usize) -> &'static ArchPerfPmu {
        &REAL_CPUS[cpu]
    }

    fn regs(_: usize) -> Option<X86Msr> {
        // SAFETY: ring 0, on the CPU that calls it (each CPU makes its own
        // and uses it there); the drivers and their handler reach the
        // registers through it only, as detection found them.
        Some(unsafe { X86Msr::new() })
    }

    fn detect(cpu: usize) -> Option<ArchPerfCpu> {
        let Ok(found) = detect::detect(&HardwareCpuid, &mut Self::regs(cpu)?);
        found.arch_perf()
    }

    /// A real PMU counts by itself: no tick feeds it.
    fn feed(_: usize, _: u64) -> (u64, bool) {
        (0, false)
    }
}

impl shared::Platform for Models {
    type Local = &'static ArchPerfPmu;
    type Regs = ArchPerfMsr<'static>;
    const NAME: &'static str = "profiler_archperf";
    const EVENT: &'static str = "core cycles";
    const REAL: bool = false;

    fn introduce() {
        println!(
            "  counter: an architectural-PMU model per CPU (Skylake configuration): this guest exposes no PMU (CPUID leaf 0AH version 0);"
        );
        println!("  the model's core cycles are driven by the TSC: its counts come from the model");
    }

    fn machine(f: &mut fmt::Formatter<'_>, cpus: usize) -> fmt::Result {
        write!(f, "{cpus} CPU(s), a driver per CPU of its model")
    }

    fn local(cpu: usize) -> &'static ArchPerfPmu {
        &MODEL_CPUS[cpu]
    }

    fn regs(cpu: usize) -> Option<ArchPerfMsr<'static>> {
        Some(MODELS[cpu].msr())
    }

    fn detect(cpu: usize) -> Option<ArchPerfCpu> {
        MODELS[cpu].detect()
    }

    /// The cycles happen on CPU `cpu`'s model.
    fn feed(cpu: usize, cycles: u64) -> (u64, bool) {
        let got = MODELS[cpu].inject_until_pmi(Event::new(CYCLES.0, CYCLES.1, cycles));
        (got.injected, got.pmi_pending && MODELS[cpu].take_pmi())
    }

    fn reset(cpu: usize) {
        MODELS[cpu].reset();
    }
}

//! Intel's architectural PMU (`pmu::arch::archperf`) as the benches of the
//! real-PMU cases: [`Real`], the PMU of the CPU the kernel runs on through
//! the hardware backend, detected with CPUID (skipped, with the reason,
//! where the machine or the guest has none); and [`Model`], the
//! architectural-PMU model (`Config::skylake()`), fed the events the loop
//! would retire and the cycles it would take, on a clock of its own: the
//! same cases, exact, under TCG or KVM alike.
//!
//! Both count retired instructions on the first general counter the
//! firmware left free (event C0H/00H), and core cycles where the driver
//! counts them (fixed counter 1 where it is free, else a general counter:
//! its `core_cycles`).

use core::ops::RangeInclusive;
use core::sync::atomic::{AtomicU64, Ordering};

use hobby::test::Failure;
use hobby::{Accel, pmi, skip};
use pmu::access::{MsrBackend, X86Msr};
use pmu::arch::archperf::driver::{ArchPerfDriver, CounterConfig};
use pmu::arch::archperf::enumeration;
use pmu::arch::archperf::{ArchEvent, ArchPerfPmu, Counter, EventSpec};
use pmu::counter::Owner;
use pmu::detect::{self, ArchPerfCpu, Cpuid, HardwareCpuid};
use pmu::model::archperf::{ArchPerfMsr, Config, Event, SharedArchPerfModel};

use super::{Bench, workload};

pmu::owner!(
    /// The owner of the real PMU's driver in the cases.
    pub RealOwner
);
pmu::owner!(
    /// The owner of the model's driver in the cases.
    pub ModelOwner
);

// SAFETY: the real architectural PMU of CPU 0, the one CPU the kernels
// that run these cases run them on; this is its one value.
static CPU0: ArchPerfPmu = unsafe { ArchPerfPmu::new() };

/// The model the [`Model`] bench runs on.
static MODEL: SharedArchPerfModel = SharedArchPerfModel::new(Config::skylake());
// SAFETY: the model is a logical processor of its own, and this is its one
// value.
static MODEL_PMU: ArchPerfPmu = unsafe { ArchPerfPmu::new() };
/// The model's clock, in ticks: one per iteration of the loop.
static MODEL_CLOCK: AtomicU64 = AtomicU64::new(0);

/// Instructions retired outside the loop that the model counts for a run:
/// what the driver's paths around the loop retire on a real PMU (a few
/// hundred: `cases::PATH_OVERHEAD`).
const MODEL_PATH: u64 = 300;
/// Core cycles per iteration on the model: a core at twice its TSC's
/// frequency (a turbo ratio of 2).
const MODEL_CYCLES_PER_ITERATION: u64 = 2;

/// Instructions Retired, C0H/00H.
const INSTRUCTIONS: ArchEvent = ArchEvent::InstructionsRetired;
/// UnHalted Core Cycles, 3CH/00H.
const CYCLES: ArchEvent = ArchEvent::CoreCycles;

/// The real architectural PMU of the CPU the kernel runs on.
pub enum Real {}

/// The architectural-PMU model, Skylake configuration.
pub enum Model {}

impl Bench for Real {
    type Regs = X86Msr;
    type Local = &'static ArchPerfPmu;
    type Owner = RealOwner;
    const SOURCE: &'static str = "real PMU";
    const CLOCK: &'static str = "TSC";

    fn prepare() -> Result<ArchPerfCpu, Failure> {
        let cpuid = HardwareCpuid;
        let max = cpuid.cpuid(0, 0).eax;
        let version = if max >= 0xA {
            cpuid.cpuid(0xA, 0).eax & 0xFF
        } else {
            0
        };
        if version == 0 {
            let intel = cpuid.cpuid(0, 0);
            let intel =
                (intel.ebx, intel.edx, intel.ecx) == (0x756E_6547, 0x4965_6E69, 0x6C65_746E);
            match hobby::accel() {
                Accel::Tcg => skip!(
                    "no PMU exposed to this guest (TCG emulates none; CPUID leaf 0AH version 0)"
                ),
                _ if !intel => skip!(
                    "not an Intel CPU: no architectural PMU (CPUID leaf 0AH version 0; {})",
                    Vendor(cpuid.cpuid(0, 0))
                ),
                Accel::Kvm => skip!("no PMU exposed to this guest (CPUID leaf 0AH version 0)"),
                Accel::Other if max < 0xA => skip!(
                    "no architectural PMU: CPUID has no leaf 0AH (largest standard leaf {max:#x})"
                ),
                Accel::Other => skip!("no architectural PMU (CPUID leaf 0AH version 0)"),
            }
        }
        let Ok(found) = detect::detect(&cpuid, &mut Self::regs());
        match found.arch_perf() {
            Some(cpu) => Ok(cpu),
            None => skip!(
                "CPUID leaf 0AH version {version}, but no architectural PMU this crate drives: {found}"
            ),
        }
    }

    fn local() -> &'static ArchPerfPmu {
        &CPU0
    }

    fn regs() -> X86Msr {
        // SAFETY: ring 0, on CPU 0 (the kernels that run these cases start
        // no other CPU); detection reads only the MSRs CPUID enumerates,
        // and the driver and its handler access only the PMU registers of
        // the counters detection found.
        unsafe { X86Msr::new() }
    }

    fn instructions(
        d: &ArchPerfDriver<'static, RealOwner, X86Msr>,
    ) -> Result<(u8, CounterConfig), Failure> {
        instructions(d)
    }

    fn core_cycles(
        d: &ArchPerfDriver<'static, RealOwner, X86Msr>,
    ) -> Result<(u8, CounterConfig), Failure> {
        core_cycles(d)
    }

    fn sampling_supported(cpu: &ArchPerfCpu) -> Result<(), Failure> {
        sampling_supported(cpu)
    }

    fn run_loop(iterations: u64) {
        workload::counted_loop(iterations);
    }

    fn run_sampled_loop(iterations: u64) -> Result<RangeInclusive<u64>, Failure> {
        Ok(workload::sampled_loop(iterations))
    }

    fn timestamp() -> u64 {
        workload::fenced_rdtsc()
    }
}

impl Bench for Model {
    type Regs = ArchPerfMsr<'static>;
    type Local = &'static ArchPerfPmu;
    type Owner = ModelOwner;
    const SOURCE: &'static str = "model";
    const CLOCK: &'static str = "model clock";

    fn prepare() -> Result<ArchPerfCpu, Failure> {
        MODEL.reset();
        MODEL_CLOCK.store(0, Ordering::SeqCst);
        Ok(MODEL
            .detect()
            .ok_or("detection on the model found no architectural PMU")?)
    }

    fn local() -> &'static ArchPerfPmu {
        &MODEL_PMU
    }

    fn regs() -> ArchPerfMsr<'static> {
        MODEL.msr()
    }

    fn instructions(
        d: &ArchPerfDriver<'static, ModelOwner, ArchPerfMsr<'static>>,
    ) -> Result<(u8, CounterConfig), Failure> {
        instructions(d)
    }

    fn core_cycles(
        d: &ArchPerfDriver<'static, ModelOwner, ArchPerfMsr<'static>>,
    ) -> Result<(u8, CounterConfig), Failure> {
        core_cycles(d)
    }

    fn sampling_supported(cpu: &ArchPerfCpu) -> Result<(), Failure> {
        sampling_supported(cpu)
    }

    fn run_loop(iterations: u64) {
        let instructions = workload::LOOP_INSTRUCTIONS * iterations + MODEL_PATH;
        MODEL.with(|m| {
            m.inject(Event::new(
                INSTRUCTIONS.select(),
                INSTRUCTIONS.umask(),
                instructions,
            ));
            m.inject(Event::new(
                CYCLES.select(),
                CYCLES.umask(),
                MODEL_CYCLES_PER_ITERATION * iterations,
            ));
        });
        MODEL_CLOCK.fetch_add(iterations, Ordering::SeqCst);
    }

    fn run_sampled_loop(iterations: u64) -> Result<RangeInclusive<u64>, Failure> {
        let instructions = workload::LOOP_INSTRUCTIONS * iterations + MODEL_PATH;
        // Every PMI the model raises interrupts an instruction of the
        // bounded wait `pmi::inject` opens interrupts for.
        let window = pmi::wait_window();
        pmi::inject(
            &MODEL,
            Event::new(INSTRUCTIONS.select(), INSTRUCTIONS.umask(), instructions),
        )?;
        MODEL_CLOCK.fetch_add(iterations, Ordering::SeqCst);
        Ok(window)
    }

    fn timestamp() -> u64 {
        MODEL_CLOCK.load(Ordering::SeqCst)
    }
}

/// The vendor string of CPUID leaf 0, for messages.
struct Vendor(pmu::detect::CpuidResult);

impl core::fmt::Display for Vendor {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let r = self.0;
        for b in [r.ebx, r.edx, r.ecx].iter().flat_map(|w| w.to_le_bytes()) {
            let c = if b.is_ascii_graphic() { b as char } else { '?' };
            core::fmt::Write::write_char(f, c)?;
        }
        Ok(())
    }
}

/// The first general counter that is free (neither the firmware's nor
/// claimed) counting retired instructions; a skip when the CPU says the
/// event is not available (its CPUID: leaf 0AH, or 23H on a hybrid part)
/// or the firmware uses every general counter.
fn instructions<O: Owner, M: MsrBackend>(
    d: &ArchPerfDriver<'static, O, M>,
) -> Result<(u8, CounterConfig), Failure> {
    if let Err(e) = d.check(&EventSpec::arch(INSTRUCTIONS)) {
        skip!("{e}");
    }
    let busy = d.firmware().union(d.claimed());
    let free = enumeration::counters(d.cpu())
        .iter()
        .find(|c| !c.is_fixed() && !busy.contains(*c));
    match free {
        Some(c) => Ok((
            c.index(),
            CounterConfig::counting(EventSpec::arch(INSTRUCTIONS)),
        )),
        None => skip!("the firmware uses every general counter"),
    }
}

/// Where the driver counts core cycles (fixed counter 1 where it is free,
/// else the first free general counter); a skip when none is free, or
/// when only a general counter is and the CPU says the event is not
/// available.
fn core_cycles<O: Owner, M: MsrBackend>(
    d: &ArchPerfDriver<'static, O, M>,
) -> Result<(u8, CounterConfig), Failure> {
    let Some((n, config)) = d.core_cycles() else {
        skip!("the firmware uses fixed counter 1 and every general counter");
    };
    let on_fixed = Counter::fixed(1).is_some_and(|c| c.index() == n);
    if !on_fixed && let Err(e) = d.check(&EventSpec::arch(CYCLES)) {
        skip!("{e}");
    }
    Ok((n, config))
}

/// The PMI handler finds the overflowed counters in
/// IA32_PERF_GLOBAL_STATUS, which version 1 does not have.
fn sampling_supported(cpu: &ArchPerfCpu) -> Result<(), Failure> {
    if cpu.version() < 2 {
        skip!(
            "architectural PMU version 1: the PMI handler needs IA32_PERF_GLOBAL_STATUS (version 2)"
        );
    }
    Ok(())
}

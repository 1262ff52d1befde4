//! AMD's core PMU (`pmu::arch::amd`) as the benches of the real-PMU cases:
//! [`Real`], the PMU of the CPU the kernel runs on through the hardware
//! backend, found by detection (skipped, with the reason, where the CPU is
//! not AMD's or its counters do not hold a value: QEMU's TCG, and KVM on a
//! host that exposes no PMU, answer them with 0, which detection's
//! read-back probe reports as "counters read 0"); and [`Model`], the AMD
//! core PMU model (`Config::zen4()`: PerfMonV2, six counters), fed the
//! events the loop would retire and the cycles it would take, on a clock
//! of its own: the same cases, exact, under TCG or KVM alike.
//!
//! Both count retired instructions (event C0H, `perf`'s `instructions`)
//! on the first counter the firmware left free, and core cycles (event
//! 76H, `cycles`) where the driver counts them (its `core_cycles`). The
//! model's overflow PMIs are delivered as AMD's local APIC delivers them,
//! the LVT entry left unmasked (`pmu::apic::deliver_model_pmi_unmasked`):
//! AMD's PerfMonV2 handler does not write the entry.

use core::ops::RangeInclusive;
use core::sync::atomic::{AtomicU64, Ordering};

use hobby::pmi::{self, Taken};
use hobby::test::Failure;
use hobby::{Accel, fail, skip};
use pmu::access::{MsrBackend, X86Msr};
use pmu::apic::{ModelPmi, deliver_model_pmi_unmasked};
use pmu::arch::amd::driver::{AmdDriver, CounterConfig};
use pmu::arch::amd::{AmdPmu, EventSpec, HardwareEvent};
use pmu::counter::Owner;
use pmu::detect::{self, AmdCpu, HardwareCpuid, PmuKind};
use pmu::model::amd::{AmdMsr, Config, Event, SharedAmdModel};

use super::{Bench, cases, workload};

pmu::owner!(
    /// The owner of the real PMU's driver in the cases.
    pub RealOwner
);
pmu::owner!(
    /// The owner of the model's driver in the cases.
    pub ModelOwner
);

// SAFETY: the real AMD core PMU of CPU 0, the one CPU the kernels that run
// these cases run them on; this is its one value.
static CPU0: AmdPmu = unsafe { AmdPmu::new() };

/// The model the [`Model`] bench runs on.
static MODEL: SharedAmdModel = SharedAmdModel::new(Config::zen4());
// SAFETY: the model is a logical processor of its own, and this is its one
// value.
static MODEL_PMU: AmdPmu = unsafe { AmdPmu::new() };
/// The model's clock, in ticks: one per iteration of the loop.
static MODEL_CLOCK: AtomicU64 = AtomicU64::new(0);

/// Instructions retired outside the loop that the model counts for a run:
/// what the driver's paths around the loop retire on a real PMU (a few
/// hundred: `cases::PATH_OVERHEAD`).
const MODEL_PATH: u64 = 300;
/// Core cycles per iteration on the model: a core at twice its TSC's
/// frequency (boost over P0).
const MODEL_CYCLES_PER_ITERATION: u64 = 2;

/// Retired Instructions, event C0H (every AMD map's `instructions`).
const INSTRUCTIONS: u16 = 0xC0;
/// Core cycles not in halt, event 76H (every AMD map's `cycles`).
const CYCLES: u16 = 0x76;

/// The real AMD core PMU of the CPU the kernel runs on.
pub enum Real {}

/// The AMD core PMU model, Zen 4 configuration (PerfMonV2).
pub enum Model {}

impl Bench for Real {
    type Regs = X86Msr;
    type Local = &'static AmdPmu;
    type Owner = RealOwner;
    const SOURCE: &'static str = "real PMU";
    const CLOCK: &'static str = "TSC";

    fn prepare() -> Result<AmdCpu, Failure> {
        let Ok(found) = detect::detect(&HardwareCpuid, &mut Self::regs());
        let amd = match found.pmu {
            PmuKind::Amd(amd) => amd,
            _ => skip!(
                "not an AMD CPU with a core PMU ({}): no AMD core PMU",
                found.vendor
            ),
        };
        if let Some(cpu) = found.usable_amd() {
            return Ok(cpu);
        }
        match hobby::accel() {
            Accel::Tcg => skip!(
                "no PMU exposed to this guest (TCG emulates none): {}",
                amd.probe
            ),
            Accel::Kvm => skip!("no PMU exposed to this guest: {}", amd.probe),
            Accel::Other => skip!("the AMD core PMU is not usable: {}", amd.probe),
        }
    }

    fn local() -> &'static AmdPmu {
        &CPU0
    }

    fn regs() -> X86Msr {
        // SAFETY: ring 0, on CPU 0 (the kernels that run these cases start
        // no other CPU); detection reads the MSRs CPUID enumerates and, on
        // an AMD part, probes the first legacy counter (not enabled; its
        // value put back), and the driver and its handler access only the
        // PMU registers of the counters detection found.
        unsafe { X86Msr::new() }
    }

    fn instructions(
        d: &AmdDriver<'static, RealOwner, X86Msr>,
    ) -> Result<(u8, CounterConfig), Failure> {
        instructions(d)
    }

    fn core_cycles(
        d: &AmdDriver<'static, RealOwner, X86Msr>,
    ) -> Result<(u8, CounterConfig), Failure> {
        core_cycles(d)
    }

    fn sampling_supported(_: &AmdCpu) -> Result<(), Failure> {
        Ok(())
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
    type Regs = AmdMsr<'static>;
    type Local = &'static AmdPmu;
    type Owner = ModelOwner;
    const SOURCE: &'static str = "model";
    const CLOCK: &'static str = "model clock";

    fn prepare() -> Result<AmdCpu, Failure> {
        MODEL.reset();
        MODEL_CLOCK.store(0, Ordering::SeqCst);
        Ok(MODEL
            .detect()
            .ok_or("detection on the model found no usable AMD core PMU")?)
    }

    fn local() -> &'static AmdPmu {
        &MODEL_PMU
    }

    fn regs() -> AmdMsr<'static> {
        MODEL.msr()
    }

    fn instructions(
        d: &AmdDriver<'static, ModelOwner, AmdMsr<'static>>,
    ) -> Result<(u8, CounterConfig), Failure> {
        instructions(d)
    }

    fn core_cycles(
        d: &AmdDriver<'static, ModelOwner, AmdMsr<'static>>,
    ) -> Result<(u8, CounterConfig), Failure> {
        core_cycles(d)
    }

    fn sampling_supported(_: &AmdCpu) -> Result<(), Failure> {
        Ok(())
    }

    fn run_loop(iterations: u64) {
        let instructions = workload::LOOP_INSTRUCTIONS * iterations + MODEL_PATH;
        MODEL.with(|m| {
            m.inject(Event::new(INSTRUCTIONS, 0, instructions));
            m.inject(Event::new(
                CYCLES,
                0,
                MODEL_CYCLES_PER_ITERATION * iterations,
            ));
        });
        MODEL_CLOCK.fetch_add(iterations, Ordering::SeqCst);
    }

    /// The loop's instructions fed to the model, each PMI it raises
    /// delivered through the local APIC as AMD's APIC delivers it (the
    /// entry left unmasked) and waited for, boundedly, until the cases'
    /// handler has counted it: every PMI interrupts an instruction of the
    /// bounded wait ([`pmi::wait_window`]).
    fn run_sampled_loop(iterations: u64) -> Result<RangeInclusive<u64>, Failure> {
        let mut left = workload::LOOP_INSTRUCTIONS * iterations + MODEL_PATH;
        let window = pmi::wait_window();
        while left > 0 {
            let got = MODEL.inject_until_pmi(Event::new(INSTRUCTIONS, 0, left));
            left -= got.injected.min(left);
            if got.pmi_pending && MODEL.take_pmi() {
                let seen = cases::HANDLED.load(Ordering::SeqCst);
                let Ok(delivered) = deliver_model_pmi_unmasked(&mut pmi::local_apic());
                let taken = match delivered {
                    ModelPmi::Vector(_) => Taken::Vector,
                    ModelPmi::Nmi => Taken::Nmi,
                    other => fail!("the model's PMI was not delivered: {other:?}"),
                };
                if !pmi::wait_for_interrupt(&cases::HANDLED, seen, taken) {
                    fail!("the handler did not run for a delivered PMI");
                }
            } else if got.injected == 0 {
                break;
            }
        }
        MODEL_CLOCK.fetch_add(iterations, Ordering::SeqCst);
        Ok(window)
    }

    fn timestamp() -> u64 {
        MODEL_CLOCK.load(Ordering::SeqCst)
    }
}

/// The first counter that is free (neither the firmware's nor claimed)
/// counting retired instructions; a skip when the firmware uses every
/// counter.
fn instructions<O: Owner, M: MsrBackend>(
    d: &AmdDriver<'static, O, M>,
) -> Result<(u8, CounterConfig), Failure> {
    let free = d
        .present()
        .difference(d.firmware())
        .difference(d.claimed())
        .iter()
        .next();
    match free {
        Some(c) => Ok((
            c.index(),
            CounterConfig::counting(EventSpec::hardware(HardwareEvent::Instructions)),
        )),
        None => skip!("the firmware uses every core counter"),
    }
}

/// Where the driver counts core cycles (the first free counter); a skip
/// when none is free.
fn core_cycles<O: Owner, M: MsrBackend>(
    d: &AmdDriver<'static, O, M>,
) -> Result<(u8, CounterConfig), Failure> {
    match d.core_cycles() {
        Some(found) => Ok(found),
        None => skip!("the firmware uses every core counter"),
    }
}

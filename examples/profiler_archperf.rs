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
//! ticks, and the TSC cycles that passed since the last tick (at most two
//! ticks' worth: time the host did not run the CPU is not its cycles)
//! happen on that CPU's model; the model's PMI goes through that CPU's
//! APIC. The output
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
//! # Precise and RIP modes
//!
//! Booted with `mode=precise` or `mode=rip` on its command line, it
//! profiles *branches* instead, on each CPU's model driven by the
//! workload's real instructions: the stepped workload
//! (`hobby::workload::run_stepped`, the same 1:2:4 loops, smaller) runs
//! single-stepped (`hobby::step`), and each instruction it retires is fed
//! to the model with its address (a branch as a branch). The model's PMI
//! is serviced where the debug exception stopped the workload, at the next
//! instruction, as an interrupt taken at once would be (under KVM a
//! self-IPI is injected late while the workload single-steps, its debug
//! exceptions going first). In RIP mode (`branches`) a sample is the
//! interrupted RIP: the instruction after the branch that overflowed the
//! counter (skid 1), never a branch of the loops. In precise mode
//! (`branches:pp`) the counter takes PEBS records (Skylake's format 3)
//! into a DS area, and a sample is the record's EventingIP: the branch
//! itself (skid 0), every one. The report checks both, and the shares.
//!
//! # LBR call-stack mode
//!
//! Booted with `mode=lbr`, it samples conditional branches
//! (`BR_INST_RETIRED.CONDITIONAL`, C4H/01H) of the same stepped workload,
//! each sample carrying the model's last branch records in call-stack mode
//! (Skylake's legacy stack, record format 5, frozen by the PMI): its call
//! chain is the calls the records hold ([`pmu::arch::archperf::BranchStack::call_chain`]),
//! which the model recorded from the workload's real calls and returns, no
//! frame pointer read. The report prints those chains' flame graph, and
//! the frame-pointer walks of the same samples (bounded at the stepped
//! call, where the records begin) under roots of their own: the runner
//! checks that the two flame graphs are one (`flame_graphs_equal`). The
//! samples land after a conditional branch, never in a prologue or after
//! an epilogue, where a frame-pointer walk would lose a caller and the
//! records would not (the kernel built without frame pointers,
//! `lbr_nofp`, shows that side).
//!
//! ```text
//! cargo qemu profiler_archperf
//! PMU_QEMU_ACCEL=kvm cargo qemu profiler_archperf
//! cargo qemu profiler_archperf precise
//! cargo qemu profiler_archperf lbr
//! ```
//!
//! qemu-run: smp2: -smp 2 -accel tcg,thread=multi
//! qemu-run: rip: -smp 2 -accel tcg,thread=multi -append mode=rip
//! qemu-run: precise: -smp 2 -accel tcg,thread=multi -append mode=precise
//! qemu-run: lbr: -smp 2 -accel tcg,thread=multi -append mode=lbr
#![no_std]
#![no_main]

#[path = "profiler/shared.rs"]
mod shared;

use core::fmt;

use hobby::boot::BootInfo;
use hobby::println;
use hobby::step;
use hobby::test::Failure;
use hobby::workload::STEP_SYMBOLS;
use pmu::access::X86Msr;
use pmu::arch::archperf::driver::{ArchPerfDriver, CounterConfig, pebs_residual};
use pmu::arch::archperf::pmi::Capture;
use pmu::arch::archperf::{ArchPerfPmu, BranchFilter, EventSpec, LbrOptions, PebsArea};
use pmu::arch::ia32::ds::DsArea;
use pmu::counter::Owner;
use pmu::detect::{self, ArchPerfCpu, Cpuid, HardwareCpuid};
use pmu::model::archperf::{
    ArchPerfMsr, CONDITIONAL_BRANCHES, Config, Event, Retirement, SharedArchPerfModel,
};
use pmu::sampling::{CallChain, Sample, SampleAfter, StackBounds};

hobby::entry_point!(main);

/// The real architectural PMU where the guest has one (CPUID leaf 0AH
/// version 1 or later), each CPU's model otherwise.
fn main(info: &'static BootInfo) -> ! {
    match info.arg("mode") {
        Some("precise") => shared::main::<Stepped<PRECISE>>(info),
        Some("rip") => shared::main::<Stepped<RIP>>(info),
        Some("lbr") => shared::main::<Stepped<LBR>>(info),
        _ if pmu_version() != 0 => shared::main::<RealPmu>(info),
        _ => shared::main::<Models>(info),
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

/// Each CPU's model driven by its single-stepped workload, in mode `MODE`:
/// [`RIP`] (branches at the interrupted RIP), [`PRECISE`] (`branches:pp`,
/// PEBS) or [`LBR`] (conditional branches, each sample with the LBR's call
/// stack).
enum Stepped<const MODE: u8> {}

/// Branches, each sample at the interrupted RIP.
const RIP: u8 = 0;
/// `branches:pp`: PEBS records, each sample at its EventingIP.
const PRECISE: u8 = 1;
/// Conditional branches, each sample with the LBR's call stack.
const LBR: u8 = 2;

/// Per CPU: the DS area of a precise profile, handed over once per boot.
static mut PEBS_AREAS: [PebsArea<256>; 2] = [PebsArea::new(), PebsArea::new()];

/// The event of mode `mode`: branches, precise or not, or conditional
/// branches.
fn branches(mode: u8) -> EventSpec {
    if mode == LBR {
        return EventSpec::raw(CONDITIONAL_BRANCHES.0, CONDITIONAL_BRANCHES.1);
    }
    let e: EventSpec = "branches".parse().unwrap_or(EventSpec::raw(0xC4, 0x00));
    e.with_precise(if mode == PRECISE { 2 } else { 0 })
}

/// After each single-stepped instruction of CPU `cpu`'s workload: the
/// model retires it; a PMI it raises is serviced here, at the next
/// instruction (the crate's PMI path through the seam, as from an
/// interrupt there).
fn on_step<const MODE: u8>(r: &Retirement) {
    let cpu = hobby::smp::cpu().min(1);
    if MODELS[cpu].with(|m| m.retire(r) && m.take_pmi()) {
        shared::service::<Stepped<MODE>>(cpu, r.next_ip, r.registers.rbp, r.registers.rsp);
    }
}

impl<const MODE: u8> shared::Platform for Stepped<MODE> {
    type Local = &'static ArchPerfPmu;
    type Regs = ArchPerfMsr<'static>;
    const NAME: &'static str = "profiler_archperf";
    const EVENT: &'static str = if MODE == LBR {
        "conditional branches"
    } else {
        "branches"
    };
    const REAL: bool = false;
    const STEPPED: bool = true;

    fn introduce() {
        println!(
            "  counter: an architectural-PMU model per CPU (Skylake configuration) fed the workload's own instructions, single-stepped: its counts come from the model;"
        );
        match MODE {
            PRECISE => println!(
                "  precise mode: branches:pp, PEBS records (format 3) in a DS area, each sample at its record's EventingIP (skid 0)"
            ),
            LBR => println!(
                "  LBR call-stack mode: conditional branches (C4H/01H), each sample with the model's last branch records (legacy stack, format 5, frozen on PMI): its call chain is the calls they hold, no frame pointer read"
            ),
            _ => println!(
                "  RIP mode: branches, each sample at the RIP the PMI interrupted, the instruction after the branch (skid 1)"
            ),
        }
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

    /// No tick feeds it: its instructions do (`Platform::step`, [`on_step`]).
    fn feed(_: usize, _: u64) -> (u64, bool) {
        (0, false)
    }

    fn reset(cpu: usize) {
        MODELS[cpu].reset();
    }

    fn counter<O: Owner>(_: &shared::Drv<Self, O>) -> Option<(u8, CounterConfig)> {
        // General counter 0, free in a driver just taken; counting (the
        // calibration run) without precision.
        let counting = if MODE == LBR { LBR } else { RIP };
        Some((0, CounterConfig::counting(branches(counting))))
    }

    fn sampling(config: CounterConfig, n: SampleAfter) -> CounterConfig {
        let config = CounterConfig {
            event: branches(MODE),
            ..config
        }
        .sampling(n);
        if MODE == LBR {
            config.with_branches()
        } else {
            config
        }
    }

    fn prepare<O: Owner>(
        cpu: usize,
        d: &mut ArchPerfDriver<'static, O, ArchPerfMsr<'static>>,
    ) -> Result<(), Failure> {
        if MODE == LBR {
            // Call-stack mode at CPL 0, the records frozen on every PMI.
            let kernel = BranchFilter::from_bits(0).with_kernel(true);
            d.enable_lbr(LbrOptions::call_stack(kernel))?;
            return Ok(());
        }
        if MODE != PRECISE {
            return Ok(());
        }
        let areas = &raw mut PEBS_AREAS;
        // SAFETY: CPU `cpu`'s area, taken by this one call on that CPU (a
        // profile runs once per CPU per boot): the only reference made.
        let area = unsafe { &mut (*areas)[cpu] };
        // SAFETY: a static of this kernel, whose one address space maps it
        // (identity) on every CPU.
        d.set_pebs_area(unsafe { DsArea::new(area) })?;
        // SAFETY: the model writes only the DS area at its IA32_DS_AREA,
        // this CPU's `PEBS_AREAS` entry, which the driver owns as a
        // `DsArea` (its address only): memory nothing references.
        MODELS[cpu].with(|m| unsafe { m.attach_ds_memory() });
        Ok(())
    }

    fn after_halt<O: Owner>(
        cpu: usize,
        d: &mut ArchPerfDriver<'static, O, ArchPerfMsr<'static>>,
    ) -> Result<(), Failure> {
        if MODE == PRECISE {
            d.drain_pebs(|s| {
                let chain = CallChain::walk(s.rip, 0, 0, &StackBounds::EMPTY);
                shared::SAMPLES[cpu].push(s.with_payload(chain));
            })?;
        }
        Ok(())
    }

    fn step(cpu: usize, round: extern "C" fn()) {
        let _ = cpu;
        step::trace(round, on_step::<MODE>);
    }

    fn chain(sample: &Sample<Capture>) -> Option<CallChain<{ shared::DEPTH }>> {
        let stack = sample.payload.branches()?;
        Some(stack.call_chain(sample.rip))
    }

    fn stack_top(_cpu: usize) -> Option<u64> {
        (MODE == LBR).then(step::outer_rsp)
    }

    fn split(n: SampleAfter, raw: u64) -> (u64, u64) {
        if MODE == PRECISE {
            (0, pebs_residual(n, raw))
        } else {
            n.split(raw)
        }
    }

    fn placed(rip: u64) -> Option<(bool, &'static str)> {
        STEP_SYMBOLS.position(rip)?;
        // SAFETY: `rip` is inside one of the stepped workload's functions,
        // this kernel's code: mapped and readable.
        let at_branch = unsafe { step::branch_at(rip, 0) }.is_some();
        Some(if MODE == PRECISE {
            (at_branch, "are at their branch instruction (skid 0)")
        } else {
            (!at_branch, "are past their branch instruction (skid > 0)")
        })
    }
}

//! Intel's architectural PMU driver (`pmu::arch::archperf`) in a real
//! kernel, two ways.
//!
//! On the architectural-PMU model (`Config::skylake()`: four 48-bit general
//! counters, three fixed counters, version 4), under TCG or KVM alike:
//! counting on general and fixed counters, sampling whose overflow PMIs go
//! through the real local APIC as real interrupts (a fixed vector, with the
//! interrupted RIP, and an NMI), a group started and stopped by one
//! `IA32_PERF_GLOBAL_CTRL` write, and counters the firmware left enabled
//! left alone. Every count in these cases comes from the model, not
//! hardware, and is exact. And PEBS: a single-stepped workload
//! (`hobby::step`) feeds the model each instruction it really retires, the
//! model writes its PEBS records into this kernel's DS area, and every
//! precise sample (`branches:pp`) is checked against the instruction that
//! retired its event (skid 0), every ordinary sample (`instructions`)
//! against the one its PMI interrupted (skid 1 or more).
//!
//! The real-PMU cases (`pmu_qemu_tests::real`: retired instructions of a
//! loop of known length within `pmu_report::bounds`'s interval,
//! core cycles against the TSC, and an overflow PMI whose interrupted RIP
//! is inside the loop), twice, through the crate's driver and handler:
//! the `model_*` cases on the model, fed the events the loop would retire
//! (they run everywhere, and their counts are the model's), and the
//! `real_*` cases on the real PMU, detected with CPUID and driven on
//! `X86Msr`. QEMU's TCG has no PMU (CPUID leaf 0AH version 0), nor has a
//! KVM guest on a host that exposes none: the `real_*` cases are then
//! skipped with that reason. On a host whose KVM exposes its PMU they run
//! (`cargo validate` runs them with every other architecture's and
//! reports):
//!
//! ```text
//! PMU_QEMU_ACCEL=kvm cargo qemu archperf
//! ```
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

use hobby::boot::BootInfo;
use hobby::idt::{self, InterruptFrame};
use hobby::pmi;
use hobby::test::{Failure, Outcome};
use hobby::{case, check, check_eq, fail, println};
use pmu::access::{AccessCounts, MsrAccess, Recording};
use pmu::apic::{LvtPerfCounter, PmiDelivery, Vector};
use pmu::arch::archperf::driver::PebsOptions;
use pmu::arch::archperf::driver::{ArchPerfDriver, ConfigError, CounterConfig, Counters};
use pmu::arch::archperf::pmi::Capture;
use pmu::arch::archperf::{ArchPerfPmu, Counter, CounterSet, EventSpec, PebsArea};
use pmu::arch::handle_pmi;
use pmu::arch::ia32::ds::DsArea;
use pmu::counter::{DriverError, Group, Owner};
use pmu::model::archperf::Retirement;
use pmu::model::archperf::{
    ArchPerfModel, ArchPerfMsr, Config, Event, IA32_FIXED_CTR_CTRL, IA32_PERF_GLOBAL_CTRL,
    IA32_PERFEVTSEL0, SharedArchPerfModel,
};
use pmu::sampling::Sample;
use pmu::sampling::{SampleAfter, SampleBuffer};
use pmu_qemu_tests::{real, real_cases};
use x86_64::instructions::interrupts;

hobby::entry_point!(main);

/// The model's PMIs ([`pmi::deliver`]); the real-PMU cases take
/// `real::cases::PMI_VECTOR`.
const PMI_VECTOR: u8 = 0xF0;
const NMI_VECTOR: u8 = 2;

const INSTRUCTIONS: (u8, u8) = (0xC0, 0x00);
const CYCLES: (u8, u8) = (0x3C, 0x00);
const REF_CYCLES: (u8, u8) = (0x3C, 0x01);

static MODEL: SharedArchPerfModel = SharedArchPerfModel::new(Config::skylake());
/// The PMU value of the running model case (its own `static`, `setup!`),
/// for the model's PMI handler; null before the first case.
static MODEL_CPU: AtomicPtr<ArchPerfPmu> = AtomicPtr::new(core::ptr::null_mut());
static NMI_MODE: AtomicBool = AtomicBool::new(false);
static SAMPLES: SampleBuffer<256> = SampleBuffer::new();
static HANDLED: AtomicU64 = AtomicU64::new(0);
static HANDLER_ERRORS: AtomicU64 = AtomicU64::new(0);

type Driver<O> = ArchPerfDriver<'static, O, Recording<ArchPerfMsr<'static>, 16>>;

fn main(_: &'static BootInfo) -> ! {
    println!(
        "archperf: the model cases count on the architectural PMU model (Skylake configuration): their counts come from the model, not hardware"
    );
    println!(
        "archperf: the model_* cases run the real-PMU cases on a model (their counts are the model's); the real_* cases count on the real PMU when this guest has one, and are skipped otherwise"
    );
    pmi::local_apic().enable(Vector::new(0xFF).unwrap());
    idt::set_handler(PMI_VECTOR, on_model_pmi);
    idt::set_handler(NMI_VECTOR, on_model_pmi);
    let [m0, m1, m2] = real_cases!("model_", real::archperf::Model);
    let [r0, r1, r2] = real_cases!("real_", real::archperf::Real);
    hobby::test::run(
        "archperf",
        &[
            case!(counting_on_general_and_fixed_counters),
            case!(sampling_pmis_are_real_interrupts_with_the_interrupted_rip),
            case!(pmi_as_nmi),
            case!(precise_samples_land_on_the_instruction_of_the_event),
            case!(a_group_starts_and_stops_with_one_global_ctrl_write),
            case!(counters_the_firmware_enabled_are_left_alone),
            m0,
            m1,
            m2,
            r0,
            r1,
            r2,
        ],
    )
}

// ---------------------------------------------------------------------------
// The model cases.

fn model_entry() -> LvtPerfCounter {
    if NMI_MODE.load(Ordering::SeqCst) {
        LvtPerfCounter::new(PmiDelivery::Nmi)
    } else {
        LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(PMI_VECTOR).unwrap()))
    }
}

/// The PMU value of the running model case, once a case has taken it.
fn model_cpu() -> Option<&'static ArchPerfPmu> {
    // SAFETY: `MODEL_CPU` is null or the address of a case's `static`
    // value (`take`), which lives for ever and is only shared.
    unsafe { MODEL_CPU.load(Ordering::SeqCst).as_ref() }
}

/// The model's PMI, as a fixed vector or an NMI: the driver's handler with
/// the interrupted RIP (it unmasks the LVT entry the delivery masked), then
/// EOI for a vector.
fn on_model_pmi(frame: &InterruptFrame) {
    let mut apic = pmi::local_apic();
    let serviced = model_cpu().is_some_and(|cpu| {
        handle_pmi(
            cpu,
            &mut MODEL.msr(),
            &mut apic,
            model_entry(),
            frame.rip,
            |s| {
                record_precise(&s);
                SAMPLES.push(s.with_payload(()));
            },
        )
        .is_ok()
    });
    if !serviced {
        HANDLER_ERRORS.fetch_add(1, Ordering::SeqCst);
    }
    HANDLED.fetch_add(1, Ordering::SeqCst);
    if frame.vector != u64::from(NMI_VECTOR) {
        apic.eoi();
    }
}

/// A fresh model and a driver of it, for the calling case's own owner type
/// and PMU value (a case that fails with counters claimed leaves the next
/// one a clean PMU); `$firmware` runs on the reset model before the take.
macro_rules! setup {
    ($nmi:expr) => {
        setup!($nmi, |_| Ok(()))
    };
    ($nmi:expr, $firmware:expr) => {{
        pmu::owner!(Case);
        // SAFETY: the model, reset for this case, is a logical processor
        // of its own, and this is its one value.
        static CASE_CPU: ArchPerfPmu = unsafe { ArchPerfPmu::new() };
        take::<Case>(&CASE_CPU, $nmi, $firmware)
    }};
}

fn take<O: Owner>(
    cpu: &'static ArchPerfPmu,
    nmi: bool,
    firmware: fn(&mut ArchPerfModel) -> Result<(), pmu::model::archperf::Fault>,
) -> Result<(Driver<O>, Counters<O>), Failure> {
    MODEL.reset();
    MODEL.with(firmware)?;
    MODEL_CPU.store(core::ptr::from_ref(cpu).cast_mut(), Ordering::SeqCst);
    NMI_MODE.store(nmi, Ordering::SeqCst);
    SAMPLES.drain(|_| {});
    HANDLED.store(0, Ordering::SeqCst);
    HANDLER_ERRORS.store(0, Ordering::SeqCst);
    pmi::local_apic().set_perf_counter_entry(model_entry());
    let info = MODEL
        .detect()
        .ok_or("detection on the model found no architectural PMU")?;
    let (mut d, c) = ArchPerfDriver::<O, _>::take(Recording::new(MODEL.msr()), &info, cpu)?;
    d.msr().clear();
    Ok((d, c))
}

fn inject((select, umask): (u8, u8), n: u64) {
    MODEL.with(|m| m.inject(Event::new(select, umask, n)));
}

fn traffic<O: Owner>(d: &mut Driver<O>) -> (u32, u32, u32) {
    let AccessCounts {
        msr_reads,
        msr_writes,
        rdpmc,
        ..
    } = d.msr().take_counts();
    (msr_reads, msr_writes, rdpmc)
}

fn spec(s: &str) -> Result<EventSpec, Failure> {
    Ok(s.parse::<EventSpec>()?)
}

/// Instructions and core cycles, each on a general and on its fixed
/// counter: exact counts, nothing counted while halted.
fn counting_on_general_and_fixed_counters() -> Outcome {
    let (mut d, c) = setup!(false)?;
    let instructions = CounterConfig::counting(spec("instructions")?);
    let cycles = CounterConfig::counting(spec("cycles")?);
    let g0 = c.g0.configure(&mut d, &instructions)?.enable(&mut d)?;
    let g1 = c.g1.configure(&mut d, &cycles)?.enable(&mut d)?;
    let f0 = c.f0.ok_or("fixed counter 0")?;
    let f0 = f0.configure(&mut d, &instructions)?.enable(&mut d)?;
    let f1 = c.f1.ok_or("fixed counter 1")?;
    let f1 = f1.configure(&mut d, &cycles)?.enable(&mut d)?;
    check_eq!(
        MODEL.with(|m| m.global_ctrl()),
        0b11 | 0b11 << 32,
        "two general and two fixed enable bits"
    );
    inject(INSTRUCTIONS, 1000);
    inject(CYCLES, 250);
    inject(REF_CYCLES, 40);
    let counts = [
        g0.read(&mut d)?,
        g1.read(&mut d)?,
        f0.read(&mut d)?,
        f1.read(&mut d)?,
    ];
    check_eq!(counts, [1000, 250, 1000, 250]);
    println!(
        "archperf: 1000 instructions and 250 core cycles injected, counted {counts:?} on PMC0, PMC1, FIXED_CTR0, FIXED_CTR1 (model)"
    );
    let (g0, g1) = (g0.halt(&mut d)?, g1.halt(&mut d)?);
    let (f0, f1) = (f0.halt(&mut d)?, f1.halt(&mut d)?);
    check_eq!(MODEL.with(|m| m.global_ctrl()), 0, "every enable bit clear");
    inject(INSTRUCTIONS, 7);
    inject(CYCLES, 7);
    check_eq!(
        [
            g0.read(&mut d)?,
            g1.read(&mut d)?,
            f0.read(&mut d)?,
            f1.read(&mut d)?
        ],
        [1000, 250, 1000, 250],
        "halted counters keep their counts"
    );
    let (g0, g1) = (g0.release(&mut d)?, g1.release(&mut d)?);
    let (f0, f1) = (f0.release(&mut d)?, f1.release(&mut d)?);
    check_eq!(MODEL.with(|m| m.fixed_ctrl()), 0, "fixed fields cleared");
    let _msr = d.give_back(Counters {
        g0,
        g1,
        f0: Some(f0),
        f1: Some(f1),
        ..c
    });
    Ok(())
}

/// A sampling counter (every 100 instructions): each overflow's PMI goes
/// through the real APIC as a real interrupt, and the driver's handler sees
/// the interrupted RIP: an instruction of the bounded wait
/// [`pmi::inject`] opens interrupts for ([`pmi::wait_window`]; under TCG
/// always its first after the STI shadow, under KVM wherever the
/// hypervisor delivers it); then with skid, each period still exactly 100.
fn sampling_pmis_are_real_interrupts_with_the_interrupted_rip() -> Outcome {
    let (mut d, c) = setup!(false)?;
    let n = SampleAfter::new(100, d.overflow_rule())?;
    let g0 =
        c.g0.configure(
            &mut d,
            &CounterConfig::counting(spec("instructions")?).sampling(n),
        )?
        .enable(&mut d)?;
    let window = pmi::wait_window(); // every delivery interrupts an instruction here
    let pmis = pmi::inject(&MODEL, Event::new(INSTRUCTIONS.0, INSTRUCTIONS.1, 1000))?;
    check_eq!(
        pmis,
        10,
        "a PMI with each overflow: the model raises it in the clock of the wrap"
    );
    check_eq!(
        HANDLED.load(Ordering::SeqCst),
        10,
        "each reached the handler"
    );
    let (mut samples, mut wrong) = (0, 0);
    SAMPLES.drain(|s| {
        samples += 1;
        wrong += u32::from(!window.contains(&s.rip) || s.counter != 0 || s.periods != 1);
    });
    check_eq!(
        (samples, wrong),
        (10, 0),
        "10 samples at the interrupted RIP"
    );
    check!(
        !pmi::local_apic().perf_counter_entry().is_masked(),
        "the handler unmasked the LVT entry"
    );
    check_eq!(d.pmi_state().periods(0), 10);
    check_eq!(
        n.split(g0.read(&mut d)?),
        (0, 0),
        "nothing owed, no residual"
    );
    println!(
        "archperf: 1000 instructions, sample after 100: 10 PMIs as real interrupts at RIPs in [{:#x}, {:#x}] (model)",
        window.start(),
        window.end()
    );

    // With a skid of 3 the PMI comes 3 instructions after each overflow;
    // the handler keeps them in the next period.
    MODEL.with(|m| m.set_skid(3));
    let pmis = pmi::inject(&MODEL, Event::new(INSTRUCTIONS.0, INSTRUCTIONS.1, 1000))?;
    check_eq!(pmis, 9, "the 10th overflow's PMI is 3 instructions away");
    let g0 = g0.halt(&mut d)?;
    check_eq!(d.pmi_state().periods_at_halt(0), 1, "the halt found it");
    let (owed, residual) = n.split(g0.read(&mut d)?);
    check_eq!(
        (d.pmi_state().periods(0) + owed) * 100 + residual,
        2000,
        "events = periods x N + residual"
    );
    check_eq!(HANDLER_ERRORS.load(Ordering::SeqCst), 0);
    let g0 = g0.release(&mut d)?;
    let _msr = d.give_back(Counters { g0, ..c });
    Ok(())
}

/// The same PMIs delivered as NMIs: they arrive with interrupts disabled.
fn pmi_as_nmi() -> Outcome {
    let (mut d, c) = setup!(true)?;
    let n = SampleAfter::new(50, d.overflow_rule())?;
    let f1 = c.f1.ok_or("fixed counter 1")?;
    let f1 = f1
        .configure(
            &mut d,
            &CounterConfig::counting(spec("cycles")?).sampling(n),
        )?
        .enable(&mut d)?;
    let pmis = pmi::inject(&MODEL, Event::new(CYCLES.0, CYCLES.1, 500))?;
    check_eq!(pmis, 10);
    check_eq!(HANDLED.load(Ordering::SeqCst), 10);
    let mut samples = 0;
    SAMPLES.drain(|s| samples += u32::from(s.counter == 33 && s.periods == 1));
    check_eq!(
        samples,
        10,
        "fixed counter 1 (GLOBAL bit 33), one period each"
    );
    check_eq!(
        pmi::local_apic().perf_counter_entry(),
        LvtPerfCounter::new(PmiDelivery::Nmi),
        "the NMI entry, unmasked"
    );
    check_eq!(d.pmi_state().periods(33), 10);
    check_eq!(HANDLER_ERRORS.load(Ordering::SeqCst), 0);
    let f1 = f1.halt(&mut d)?.release(&mut d)?;
    let _msr = d.give_back(Counters { f1: Some(f1), ..c });
    Ok(())
}

/// The DS save area of the PEBS case (handed over for good): room for
/// every record of the case, so that none is lost where PMIs come late.
static mut PEBS_AREA: PebsArea<128> = PebsArea::new();
static PEBS_AREA_TAKEN: AtomicBool = AtomicBool::new(false);

/// The precise case's periods: a PEBS record every 7th branch, an
/// ordinary sample every 13th instruction.
const PEBS_EVERY: u64 = 7;
const RIP_EVERY: u64 = 13;
/// Samples each kind of the precise case keeps for its checks.
const KEPT: usize = 1024;

/// The precise case's trace, written by the single-step callback and the
/// PMI handler (one CPU: the callback runs with interrupts disabled, the
/// handler between two stepped instructions or after the workload).
struct Precise {
    /// Instructions and branches retired so far.
    steps: AtomicU64,
    branches: AtomicU64,
    /// The address of the instruction about to execute (the last retired
    /// one's next).
    next: AtomicU64,
    /// The address of each 7th branch (what a PEBS sample must name); the
    /// instruction count and address of each 13th instruction.
    expected: [AtomicU64; KEPT],
    events: [AtomicU64; KEPT],
    event_ips: [AtomicU64; KEPT],
    /// The PEBS samples' IPs; the RIP samples' IPs, the instruction count
    /// and next address when their PMI was taken, the count and address of
    /// their (last) event, and whether a stepped instruction was next to
    /// run ([`hobby::step::stepping`]).
    pebs: [AtomicU64; KEPT],
    rips: [AtomicU64; KEPT],
    taken_at: [AtomicU64; KEPT],
    taken_next: [AtomicU64; KEPT],
    event_of: [AtomicU64; KEPT],
    event_ip_of: [AtomicU64; KEPT],
    inside: [AtomicU64; KEPT],
    pebs_n: AtomicU64,
    /// RIP samples, and the periods they carry (more than one each where
    /// a PMI came a period or more late).
    rip_n: AtomicU64,
    rip_periods: AtomicU64,
    /// The case runs: the PMI handler records its samples.
    on: AtomicBool,
}

static PRECISE: Precise = Precise {
    steps: AtomicU64::new(0),
    branches: AtomicU64::new(0),
    next: AtomicU64::new(0),
    expected: [const { AtomicU64::new(0) }; KEPT],
    events: [const { AtomicU64::new(0) }; KEPT],
    event_ips: [const { AtomicU64::new(0) }; KEPT],
    pebs: [const { AtomicU64::new(0) }; KEPT],
    rips: [const { AtomicU64::new(0) }; KEPT],
    taken_at: [const { AtomicU64::new(0) }; KEPT],
    taken_next: [const { AtomicU64::new(0) }; KEPT],
    event_of: [const { AtomicU64::new(0) }; KEPT],
    event_ip_of: [const { AtomicU64::new(0) }; KEPT],
    inside: [const { AtomicU64::new(0) }; KEPT],
    pebs_n: AtomicU64::new(0),
    rip_n: AtomicU64::new(0),
    rip_periods: AtomicU64::new(0),
    on: AtomicBool::new(false),
};

fn keep(array: &[AtomicU64; KEPT], at: u64, value: u64) {
    if let Some(slot) = array.get(at as usize) {
        slot.store(value, Ordering::SeqCst);
    }
}

fn kept(array: &[AtomicU64; KEPT], at: u64) -> u64 {
    array
        .get(at as usize)
        .map_or(0, |e| e.load(Ordering::SeqCst))
}

/// After each stepped instruction: the model retires it (in one clock, its
/// instruction and, for a branch, its branch), and a PMI it raises goes
/// through the APIC once the LVT entry is unmasked (a PMI sent to a masked
/// entry would be lost, where a late one only carries more: the handler
/// re-arms relative to the count); it is taken before the next
/// instruction under TCG, where the hypervisor delivers it under KVM. The
/// trace keeps what the checks need.
fn on_step(r: &Retirement) {
    let p = &PRECISE;
    let steps = p.steps.fetch_add(1, Ordering::SeqCst) + 1;
    p.next.store(r.next_ip, Ordering::SeqCst);
    if r.branch.is_some() {
        let branches = p.branches.fetch_add(1, Ordering::SeqCst) + 1;
        if branches.is_multiple_of(PEBS_EVERY) {
            keep(&p.expected, branches / PEBS_EVERY - 1, r.ip);
        }
    }
    if steps.is_multiple_of(RIP_EVERY) {
        keep(&p.events, steps / RIP_EVERY - 1, steps);
        keep(&p.event_ips, steps / RIP_EVERY - 1, r.ip);
    }
    let pending = MODEL.with(|m| m.retire(r) || m.pmi_pending());
    if pending && !pmi::local_apic().perf_counter_entry().is_masked() && MODEL.take_pmi() {
        pmi::deliver(&mut pmi::local_apic());
    }
}

/// The PMI handler's record of the precise case's samples.
fn record_precise(s: &Sample<Capture>) {
    let p = &PRECISE;
    if !p.on.load(Ordering::SeqCst) {
        return;
    }
    match (s.counter, s.payload.pebs()) {
        (0, Some(_)) => {
            let k = p.pebs_n.fetch_add(1, Ordering::SeqCst);
            keep(&p.pebs, k, s.rip);
        }
        (1, None) => {
            let k = p.rip_n.fetch_add(1, Ordering::SeqCst);
            let periods = u64::from(s.periods);
            let last = p.rip_periods.fetch_add(periods, Ordering::SeqCst) + periods - 1;
            keep(&p.rips, k, s.rip);
            keep(&p.taken_at, k, p.steps.load(Ordering::SeqCst));
            keep(&p.taken_next, k, p.next.load(Ordering::SeqCst));
            keep(&p.event_of, k, kept(&p.events, last));
            keep(&p.event_ip_of, k, kept(&p.event_ips, last));
            keep(&p.inside, k, u64::from(hobby::step::stepping()));
        }
        _ => {}
    }
}

/// PEBS against the instructions a workload really retires: the workload
/// (`hobby::workload::run_stepped`, three loops of costs 1:2:4) runs
/// single-stepped (`hobby::step`), each instruction fed to the model with
/// its address; PMC0 samples `branches:pp` with PEBS (a record every 7th
/// branch, the PMI at each record), PMC1 `instructions` every 13th with an
/// ordinary PMI. Each precise sample's IP is the 7k-th branch's own
/// address (skid 0: the model's record is of the instruction that retired
/// the event, the handler reports its EventingIP); each ordinary sample's
/// IP is the instruction its PMI interrupted, 1 or more after the 13k-th
/// in retirement order (never the event's own); every branch is in one
/// record or in PMC0's residual count. Under KVM, which injects the
/// self-IPIs late while the workload single-steps (each instruction's
/// debug exception goes first), the RIP samples come late and carry more
/// periods, the PEBS records wait in the buffer: the checks hold all the
/// same.
fn precise_samples_land_on_the_instruction_of_the_event() -> Outcome {
    let (mut d, c) = setup!(false)?;
    if PEBS_AREA_TAKEN.swap(true, Ordering::SeqCst) {
        fail!("the PEBS area is handed over once");
    }
    let area = &raw mut PEBS_AREA;
    // SAFETY: the flag above makes this the only reference ever made.
    let area = unsafe { &mut *area };
    // SAFETY: a static of this kernel, whose one address space maps it
    // (identity) wherever the CPU runs.
    d.set_pebs_area(unsafe { DsArea::new(area) })?;
    // SAFETY: the model writes only the DS area at IA32_DS_AREA, this
    // kernel's `PEBS_AREA`, owned by the driver as a `DsArea` (which keeps
    // only its address): memory nothing references.
    MODEL.with(|m| unsafe { m.attach_ds_memory() });
    let p = &PRECISE;
    for counter in [&p.steps, &p.branches, &p.pebs_n, &p.rip_n, &p.rip_periods] {
        counter.store(0, Ordering::SeqCst);
    }
    let rule = d.overflow_rule();
    let every = SampleAfter::new(PEBS_EVERY, rule)?;
    let precise = CounterConfig::counting(spec("branches:pp")?)
        .sampling(every)
        .pebs(PebsOptions::DEFAULT);
    let g0 = c.g0.configure(&mut d, &precise)?.enable(&mut d)?;
    let rip =
        CounterConfig::counting(spec("instructions")?).sampling(SampleAfter::new(RIP_EVERY, rule)?);
    let g1 = c.g1.configure(&mut d, &rip)?.enable(&mut d)?;
    p.on.store(true, Ordering::SeqCst);
    interrupts::enable();
    let steps = hobby::step::trace(hobby::workload::run_stepped, on_step);
    // A PMI the last instructions raised, delivered and taken here at the
    // latest.
    let _ = pmi::wait_for_handler(false);
    if MODEL.take_pmi() {
        pmi::deliver(&mut pmi::local_apic());
    }
    let _ = pmi::wait_for_handler(false);
    interrupts::disable();
    p.on.store(false, Ordering::SeqCst);
    let (g0, g1) = (g0.halt(&mut d)?, g1.halt(&mut d)?);
    let mut late = 0u64;
    p.on.store(true, Ordering::SeqCst);
    d.drain_pebs(|s| {
        record_precise(&s);
        late += 1;
    })?;
    p.on.store(false, Ordering::SeqCst);
    let branches = p.branches.load(Ordering::SeqCst);
    check_eq!(steps, p.steps.load(Ordering::SeqCst));
    check!(branches > 700, "the loops' branches: {branches}");
    // Precise: skid 0, every one.
    let records = p.pebs_n.load(Ordering::SeqCst);
    check_eq!(records, branches / PEBS_EVERY, "a record every 7th branch");
    check_eq!(MODEL.with(|m| m.pebs_lost()), 0, "no record lost");
    let mut wrong = 0;
    for k in 0..records.min(KEPT as u64) {
        wrong += u32::from(kept(&p.pebs, k) != kept(&p.expected, k));
    }
    check_eq!(
        wrong,
        0,
        "every precise sample at the 7k-th branch's address"
    );
    let jnz = hobby::workload::branches();
    let on_loop_branch = (0..records.min(KEPT as u64))
        .filter(|&k| jnz.contains(&kept(&p.pebs, k)))
        .count() as u64;
    check!(
        on_loop_branch * 10 >= records * 9,
        "most precise samples on a loop's jnz: {on_loop_branch} of {records}"
    );
    let residual = pmu::arch::archperf::driver::pebs_residual(every, g0.read(&mut d)?);
    check_eq!(
        d.pmi_state().periods(0) * PEBS_EVERY + residual,
        branches,
        "every branch in one record or the residual"
    );
    // RIP mode: skid 1 or more, every one.
    let samples = p.rip_n.load(Ordering::SeqCst);
    check_eq!(
        p.rip_periods.load(Ordering::SeqCst),
        steps / RIP_EVERY,
        "a period every 13th instruction"
    );
    let (mut at_event, mut max_skid, mut inside) = (0, 0, 0);
    for k in 0..samples.min(KEPT as u64) {
        let event = kept(&p.event_of, k);
        let taken = kept(&p.taken_at, k);
        let rip = kept(&p.rips, k);
        check!(taken >= event, "the PMI after its event");
        if kept(&p.inside, k) != 0 {
            // Taken between two stepped instructions: it interrupted the
            // next one to execute.
            check_eq!(
                rip,
                kept(&p.taken_next, k),
                "the RIP sample is the instruction the PMI interrupted"
            );
            inside += 1;
        }
        // In retirement order the sample names the instruction after the
        // last one retired when its PMI was taken, 1 or more after the
        // event's. (A loop brings an address back every iteration, so a
        // late sample may name an instruction at its event's address: its
        // skid is the count, not the address; taken at once it names the
        // event's next instruction, never the event's own.)
        let skid = taken + 1 - event;
        max_skid = max_skid.max(skid);
        at_event += u32::from(skid == 1 && rip == kept(&p.event_ip_of, k));
    }
    check_eq!(at_event, 0, "no RIP sample at its event's instruction");
    check_eq!(HANDLER_ERRORS.load(Ordering::SeqCst), 0);
    println!(
        "archperf: {steps} instructions single-stepped, {branches} branches: {records} PEBS samples each at its 7k-th branch (skid 0; {late} drained after the halt), {samples} RIP samples of {} periods ({inside} taken inside the stepped workload) at skid 1 to {max_skid} instructions (model)",
        steps / RIP_EVERY
    );
    MODEL.with(|m| m.detach_ds_memory());
    let (g0, g1) = (g0.release(&mut d)?, g1.release(&mut d)?);
    let _area = d.take_pebs_area()?;
    let _msr = d.give_back(Counters { g0, g1, ..c });
    Ok(())
}

/// Four counters in a group: one `GLOBAL_CTRL` write starts them, one
/// stops them (the model's `GLOBAL_CTRL` shows all four bits at once), and
/// a read is one snapshot.
fn a_group_starts_and_stops_with_one_global_ctrl_write() -> Outcome {
    let (mut d, c) = setup!(false)?;
    let instructions = CounterConfig::counting(spec("instructions")?);
    let cycles = CounterConfig::counting(spec("cycles")?);
    let mut all = c.erase_all();
    // g0, g1, fixed 0 and fixed 1 (places 0, 1, 8, 9 of `erase_all`).
    for (place, config) in [
        (0, &instructions),
        (1, &cycles),
        (8, &instructions),
        (9, &cycles),
    ] {
        all[place]
            .as_mut()
            .ok_or("a counter of the Skylake model")?
            .configure(&mut d, config)?;
    }
    let members = [0, 1, 8, 9].map(|place| all[place].take());
    let [Some(a), Some(b), Some(e), Some(f)] = members else {
        fail!("a configured counter went missing");
    };
    let mut g = match Group::new([a, b, e, f]) {
        Ok(g) => g,
        Err((e, _)) => fail!("group: {e}"),
    };
    traffic(&mut d);
    g.start(&mut d)?;
    check_eq!(
        traffic(&mut d),
        (0, 1, 0),
        "one GLOBAL_CTRL write starts four"
    );
    check_eq!(MODEL.with(|m| m.global_ctrl()), 0b11 | 0b11 << 32);
    inject(INSTRUCTIONS, 700);
    inject(CYCLES, 300);
    check_eq!(g.read(&mut d)?, [700, 300, 700, 300]);
    check_eq!(
        traffic(&mut d),
        (0, 2, 4),
        "stopped, four RDPMCs, restarted: one snapshot"
    );
    g.stop(&mut d)?;
    check_eq!(
        traffic(&mut d),
        (0, 1, 0),
        "one GLOBAL_CTRL write stops four"
    );
    check_eq!(MODEL.with(|m| m.global_ctrl()), 0);
    inject(INSTRUCTIONS, 5);
    check_eq!(g.read(&mut d)?, [700, 300, 700, 300]);
    println!(
        "archperf: a group of 4 started and stopped with one GLOBAL_CTRL write each, counted [700, 300, 700, 300] (model)"
    );
    let [a, b, e, f] = g.into_members();
    for (place, mut m) in [(0, a), (1, b), (8, e), (9, f)] {
        m.release(&mut d)?;
        all[place] = Some(m);
    }
    match Counters::from_erased(all) {
        Ok(c) => {
            let _msr = d.give_back(c);
            Ok(())
        }
        Err(_) => fail!("a handle did not come back unclaimed"),
    }
}

/// General counter 1 and fixed counter 2 enabled before the take, as a
/// firmware would leave them: reported, never written, their enable bits
/// kept in every `GLOBAL_CTRL` write, configuring them refused; they count
/// on.
fn counters_the_firmware_enabled_are_left_alone() -> Outcome {
    const FIRMWARE_SELECT: u64 = 0x3C | 1 << 17 | 1 << 22; // cycles, OS, EN
    const FIRMWARE_GLOBAL: u64 = 1 << 1 | 1 << 34;
    fn firmware(m: &mut ArchPerfModel) -> Result<(), pmu::model::archperf::Fault> {
        m.write_msr(IA32_PERFEVTSEL0 + 1, FIRMWARE_SELECT)?;
        m.write_msr(IA32_FIXED_CTR_CTRL, 0b0011 << 8)?; // fixed 2: OS and USR
        m.write_msr(IA32_PERF_GLOBAL_CTRL, FIRMWARE_GLOBAL)
    }
    let (mut d, c) = setup!(false, firmware)?;
    let (g1, f2) = (
        Counter::general(1).ok_or("PMC1")?,
        Counter::fixed(2).ok_or("FIXED_CTR2")?,
    );
    check_eq!(d.firmware(), CounterSet::EMPTY.with(g1).with(f2));
    check_eq!(MODEL.with(|m| m.global_ctrl()), FIRMWARE_GLOBAL);
    let cycles = CounterConfig::counting(spec("cycles")?);
    let refused = match c.g1.configure(&mut d, &cycles) {
        Ok(_) => fail!("the firmware's counter was configured"),
        Err(e) => e,
    };
    check_eq!(
        refused.error,
        DriverError::Config(ConfigError::UsedByFirmware(1))
    );
    let g0 = c.g0.configure(&mut d, &cycles)?.enable(&mut d)?;
    check_eq!(
        MODEL.with(|m| m.global_ctrl()),
        1 | FIRMWARE_GLOBAL,
        "the driver's write keeps the firmware's bits"
    );
    inject(CYCLES, 100);
    inject(REF_CYCLES, 30);
    check_eq!(g0.read(&mut d)?, 100);
    check_eq!(
        MODEL.with(|m| (m.counter(1), m.fixed(2))),
        (100, 30),
        "the firmware's counters count on"
    );
    let g0 = g0.halt(&mut d)?.release(&mut d)?;
    check_eq!(MODEL.with(|m| m.global_ctrl()), FIRMWARE_GLOBAL);
    check_eq!(
        MODEL.with(|m| (m.evtsel(1), m.fixed_ctrl())),
        (FIRMWARE_SELECT, 0b0011 << 8),
        "never written"
    );
    let _msr = d.give_back(Counters {
        g0,
        g1: refused.counter,
        ..c
    });
    Ok(())
}

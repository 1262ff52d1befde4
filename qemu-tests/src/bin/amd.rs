//! AMD's core PMU driver (`pmu::arch::amd`) in a real kernel, booted as an
//! AMD CPU model: QEMU's default `qemu64` (AuthenticAMD, family 0Fh) and a
//! Zen 2 EPYC (`EPYC-Rome`, family 17h).
//!
//! qemu-run: qemu64:
//! qemu-run: epyc: -cpu EPYC-Rome
//!
//! Detection on the CPU QEMU presents: an AMD core PMU whose counters read
//! 0 under TCG (QEMU answers every PMU MSR with 0 and drops writes), found
//! by detection's read-back probe, not assumed; under KVM the probe is
//! checked against a read-back of the kernel's own (on an Intel host KVM
//! presents the host's vendor, and the case says so).
//!
//! On the AMD model (`pmu::model::amd`: a Zen 4 with PerfMonV2, a Zen 2 with
//! PerfCtrExtCore, a K8 with the legacy counters), under TCG or KVM alike:
//! counting, sampling whose overflow PMIs go through the real local APIC as
//! real interrupts (a fixed vector, with the interrupted RIP, and an NMI),
//! late PMIs (each overflow's PMI a message of its own: the second finds
//! its counter serviced and is claimed as the PMU's own), groups (one
//! `PerfCntrGlobalCtl` write with PerfMonV2) and the multiplexer. The PMIs
//! are delivered as AMD's APIC delivers them, without masking the LVT entry
//! (`pmu::apic::deliver_model_pmi_unmasked`). Every count in these cases
//! comes from the model, not hardware, and is exact.
//!
//! The `*_on_model_and_real` cases run the same code on the model and, where
//! the guest has a usable AMD PMU, on the real counters through `X86Msr`:
//! retired instructions of a loop of known length within
//! `pmu::arch::amd::bounds`' interval, core cycles against the TSC, and
//! overflow PMIs inside the loop. Under TCG, and under KVM on a host that
//! exposes no PMU (this project's), the real half is skipped with the
//! reason detection gives ("counters read 0"); on an AMD host whose KVM
//! exposes its PMU it runs:
//!
//! ```text
//! PMU_QEMU_ACCEL=kvm cargo qemu amd
//! ```
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

use hobby::boot::BootInfo;
use hobby::fault::catch;
use hobby::idt::{self, InterruptFrame};
use hobby::pmi::{self, Taken};
use hobby::test::{Failure, Outcome};
use hobby::{case, check, check_eq, fail, println, skip};
use pmu::access::{AccessCounts, MsrBackend, Recording, X86Msr};
use pmu::apic::{LvtPerfCounter, ModelPmi, PmiDelivery, Vector, deliver_model_pmi_unmasked};
use pmu::arch::amd::bounds;
use pmu::arch::amd::driver::{AmdCore, AmdDriver, ConfigError, CounterConfig, Counters};
use pmu::arch::amd::multiplex::Multiplexer;
use pmu::arch::amd::{AmdPmu, EventSpec, PERF_LEGACY_CTR0};
use pmu::arch::handle_pmi;
use pmu::counter::{AnyHandle, DriverError, ErasedError, Group, Owner, StateTag};
use pmu::detect::{self, CounterProbe, HardwareCpuid, PmuKind, Vendor};
use pmu::model::amd::{AmdMsr, Config, Event, SharedAmdModel};
use pmu::sampling::{SampleAfter, SampleBuffer};

hobby::entry_point!(main);

/// The model's PMIs.
const PMI_VECTOR: u8 = 0xF0;
/// The real PMU's PMIs.
const REAL_PMI_VECTOR: u8 = 0xF1;
const NMI_VECTOR: u8 = 2;

const INSTRUCTIONS: u16 = 0xC0;
const CYCLES: u16 = 0x76;

static ZEN4: SharedAmdModel = SharedAmdModel::new(Config::zen4());
static ZEN2: SharedAmdModel = SharedAmdModel::new(Config::zen2());
static K8: SharedAmdModel = SharedAmdModel::new(Config::k8());
/// The model of the running case and its PMU value (null before the first
/// case), for the model's PMI handler.
static MODEL: AtomicPtr<SharedAmdModel> = AtomicPtr::new(core::ptr::null_mut());
static MODEL_CPU: AtomicPtr<AmdPmu> = AtomicPtr::new(core::ptr::null_mut());
static NMI_MODE: AtomicBool = AtomicBool::new(false);
static SAMPLES: SampleBuffer<256> = SampleBuffer::new();
static HANDLED: AtomicU64 = AtomicU64::new(0);
static LATE: AtomicU64 = AtomicU64::new(0);
static NOT_OURS: AtomicU64 = AtomicU64::new(0);
static HANDLER_ERRORS: AtomicU64 = AtomicU64::new(0);

// SAFETY: the real PMU of CPU 0, the one CPU this kernel runs on; this is
// its one value (the model cases use values of their own).
static CPU0: AmdPmu = unsafe { AmdPmu::new() };
static REAL_SAMPLES: SampleBuffer<256> = SampleBuffer::new();
static REAL_HANDLED: AtomicU64 = AtomicU64::new(0);

/// The parts the model cases run on.
const PARTS: [(&str, &SharedAmdModel); 3] = [
    ("Zen 4 (PerfMonV2)", &ZEN4),
    ("Zen 2 (PerfCtrExtCore)", &ZEN2),
    ("K8 (legacy)", &K8),
];

type Driver<O> = AmdDriver<'static, O, Recording<AmdMsr<'static>, 16>>;

fn main(_: &'static BootInfo) -> ! {
    println!(
        "amd: the model cases count on the AMD core PMU model (Zen 4, Zen 2, K8 configurations): their counts come from the model, not hardware"
    );
    println!(
        "amd: the *_on_model_and_real cases count on the real PMU too where this guest has a usable one, and skip that half otherwise"
    );
    pmi::local_apic().enable(Vector::new(0xFF).unwrap());
    idt::set_handler(PMI_VECTOR, on_model_pmi);
    idt::set_handler(NMI_VECTOR, on_model_pmi);
    idt::set_handler(REAL_PMI_VECTOR, on_real_pmi);
    hobby::test::run(
        "amd",
        &[
            case!(detection_probes_the_counters),
            case!(counting_on_each_kind_of_part),
            case!(sampling_pmis_are_real_interrupts_with_the_interrupted_rip),
            case!(pmi_as_nmi),
            case!(late_pmis_are_claimed_as_the_pmus_own),
            case!(groups_start_in_one_global_write_with_perfmon_v2),
            case!(the_multiplexer_rotates_more_events_than_counters),
            case!(retired_instructions_on_model_and_real),
            case!(core_cycles_on_model_and_real),
            case!(overflow_pmis_on_model_and_real),
        ],
    )
}

// ---------------------------------------------------------------------------
// Detection.

/// What detection says of the CPU QEMU presents. An AMD part (`qemu64`,
/// `EPYC-Rome` under TCG; an AMD host under KVM): the AMD core PMU, its
/// probe's verdict; under TCG exactly "counters read 0" (QEMU's TCG answers
/// every PMU MSR with 0 and drops writes: the project's platform notes),
/// under KVM the verdict of a read-back of the kernel's own on the same
/// counter. Under KVM on an Intel host the guest sees the host's vendor.
fn detection_probes_the_counters() -> Outcome {
    // SAFETY: ring 0 on CPU 0; detection reads CPUID and, on an AMD part,
    // the legacy counter MSRs every AMD64 processor has, writing back what
    // it read; under KVM a missing one would fault and is caught below.
    let mut msr = unsafe { X86Msr::new() };
    let Ok(found) = detect::detect(&HardwareCpuid, &mut msr);
    println!("amd: detect: {found}");
    let amd = match found.pmu {
        PmuKind::Amd(a) => a,
        _ if found.vendor == Vendor::Amd => fail!("an AMD CPU without an AMD core PMU: {found}"),
        _ => skip!(
            "not an AMD CPU ({}): under KVM QEMU presents the host's vendor",
            found.vendor
        ),
    };
    let sig = found.signature.ok_or("no CPUID leaf 1")?;
    check_eq!((amd.family, amd.model), (sig.family, sig.model));
    if hobby::accel() == hobby::Accel::Tcg {
        check_eq!(
            amd.probe,
            CounterProbe::Lost {
                counter: 0,
                wrote: 0xFFFF,
                read: 0
            },
            "QEMU's TCG: the counters read 0"
        );
        check!(
            Text::of(&found).contains("counters read 0"),
            "the report says so: {found}"
        );
        check!(found.usable_amd().is_none());
        check!(!amd.perfmon_v2, "TCG has no PerfMonV2");
        return Ok(());
    }
    // Under KVM: the kernel's own read-back of the probed counter.
    let (CounterProbe::ReadBack { counter } | CounterProbe::Lost { counter, .. }) = amd.probe
    else {
        skip!("the probe found {}: nothing to check it against", amd.probe);
    };
    let ctr = PERF_LEGACY_CTR0 + u32::from(counter);
    // SAFETY: the legacy counter detection just probed, which is not
    // enabled (its control's EN was clear): a write changes no count; the
    // old value is written back.
    let reads_back = unsafe {
        catch(|| {
            let old = msr.read_msr(ctr);
            msr.write_msr(ctr, old ^ 0x5A5A);
            let new = msr.read_msr(ctr);
            msr.write_msr(ctr, old);
            new == old ^ 0x5A5A
        })
    }
    .map_err(|e| Failure::new(format_args!("the legacy counter faulted: {e:?}")))?;
    check_eq!(
        matches!(amd.probe, CounterProbe::ReadBack { .. }),
        reads_back,
        "the probe's verdict is the counter's"
    );
    Ok(())
}

/// A value's `Display` text, cut at 512 bytes (no allocator here).
struct Text {
    bytes: [u8; 512],
    len: usize,
}

impl Text {
    fn of(value: &dyn core::fmt::Display) -> Self {
        let mut text = Text {
            bytes: [0; 512],
            len: 0,
        };
        let _ = core::fmt::write(&mut text, format_args!("{value}"));
        text
    }

    fn as_str(&self) -> &str {
        core::str::from_utf8(&self.bytes[..self.len]).unwrap_or("(cut)")
    }

    fn contains(&self, needle: &str) -> bool {
        self.bytes[..self.len]
            .windows(needle.len())
            .any(|w| w == needle.as_bytes())
    }
}

impl core::fmt::Write for Text {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let n = s.len().min(self.bytes.len() - self.len);
        self.bytes[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
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

/// The running case's model and PMU value, once a case has taken them.
fn active() -> Option<(&'static SharedAmdModel, &'static AmdPmu)> {
    // SAFETY: both pointers are null or the addresses of `static`s, which
    // live for ever and are only shared.
    unsafe {
        Some((
            MODEL.load(Ordering::SeqCst).as_ref()?,
            MODEL_CPU.load(Ordering::SeqCst).as_ref()?,
        ))
    }
}

/// The model's PMI, as a fixed vector or an NMI: the driver's handler with
/// the interrupted RIP, then EOI for a vector.
fn on_model_pmi(frame: &InterruptFrame) {
    let mut apic = pmi::local_apic();
    match active().map(|(model, cpu)| {
        handle_pmi(
            cpu,
            &mut model.msr(),
            &mut apic,
            model_entry(),
            frame.rip,
            |s| {
                SAMPLES.push(s);
            },
        )
    }) {
        Some(Ok(o)) => {
            LATE.fetch_add(u64::from(o.late), Ordering::SeqCst);
            NOT_OURS.fetch_add(u64::from(!o.is_ours()), Ordering::SeqCst);
        }
        _ => {
            HANDLER_ERRORS.fetch_add(1, Ordering::SeqCst);
        }
    }
    HANDLED.fetch_add(1, Ordering::SeqCst);
    if frame.vector != u64::from(NMI_VECTOR) {
        apic.eoi();
    }
}

/// A fresh model and a driver of it, for the calling case's own owner type
/// and PMU value.
macro_rules! setup {
    ($model:expr, $nmi:expr) => {{
        pmu::owner!(Case);
        // SAFETY: the model, reset for this case, is a logical processor
        // of its own, and this is its one value.
        static CASE_CPU: AmdPmu = unsafe { AmdPmu::new() };
        take::<Case>($model, &CASE_CPU, $nmi)
    }};
}

fn take<O: Owner>(
    model: &'static SharedAmdModel,
    cpu: &'static AmdPmu,
    nmi: bool,
) -> Result<(Driver<O>, Counters<O>), Failure> {
    model.reset();
    MODEL.store(core::ptr::from_ref(model).cast_mut(), Ordering::SeqCst);
    MODEL_CPU.store(core::ptr::from_ref(cpu).cast_mut(), Ordering::SeqCst);
    NMI_MODE.store(nmi, Ordering::SeqCst);
    SAMPLES.drain(|_| {});
    for c in [&HANDLED, &LATE, &NOT_OURS, &HANDLER_ERRORS] {
        c.store(0, Ordering::SeqCst);
    }
    pmi::local_apic().set_perf_counter_entry(model_entry());
    let info = model
        .detect()
        .ok_or("detection on the model found no usable AMD core PMU")?;
    let (mut d, c) = AmdDriver::<O, _>::take(Recording::new(model.msr()), &info, cpu)?;
    d.msr().clear();
    Ok((d, c))
}

/// Feeds `n` events of `select` to `model`, delivering every PMI it raises
/// through the local APIC as AMD's APIC does (the entry left unmasked) and
/// waiting, boundedly, for the handler; returns the PMIs delivered.
fn inject(model: &SharedAmdModel, select: u16, n: u64) -> Result<u64, Failure> {
    let mut left = n;
    let mut pmis = 0;
    while left > 0 {
        let got = model.inject_until_pmi(Event::new(select, 0, left));
        left -= got.injected.min(left);
        let mut delivered = false;
        while model.take_pmi() {
            deliver()?;
            pmis += 1;
            delivered = true;
        }
        if !delivered && got.injected == 0 {
            break;
        }
    }
    Ok(pmis)
}

/// One model PMI through the local APIC, and the wait for its handler.
fn deliver() -> Outcome {
    let seen = HANDLED.load(Ordering::SeqCst);
    let Ok(delivered) = deliver_model_pmi_unmasked(&mut pmi::local_apic());
    let taken = match delivered {
        ModelPmi::Vector(_) => Taken::Vector,
        ModelPmi::Nmi => Taken::Nmi,
        other => fail!("the model's PMI was not delivered: {other:?}"),
    };
    check!(
        pmi::wait_for_interrupt(&HANDLED, seen, taken),
        "the handler did not run for a delivered PMI"
    );
    Ok(())
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

/// `body` for one part, a failure's message prefixed with the part's name.
fn on_part(part: &str, body: impl FnOnce() -> Outcome) -> Outcome {
    match body() {
        Err(f) if !f.is_skip() => {
            let message = Text::of(&f.message());
            Err(Failure::new(format_args!("{part}: {}", message.as_str())))
        }
        other => other,
    }
}

fn spec(s: &str) -> Result<EventSpec, Failure> {
    Ok(s.parse::<EventSpec>()?)
}

/// On each kind of part: instructions and cycles counted exactly, nothing
/// while halted, the registers zero after release; with PerfMonV2 the
/// start is a `PerfCntrGlobalCtl` write, before it the control's `EN`.
fn counting_on_each_kind_of_part() -> Outcome {
    for (part, model) in PARTS {
        on_part(part, || {
            let (mut d, c) = setup!(model, false)?;
            let v2 = d.cpu().perfmon_v2;
            let c0 =
                c.c0.configure(&mut d, &CounterConfig::counting(spec("instructions:k")?))?;
            let c1 =
                c.c1.configure(&mut d, &CounterConfig::counting(spec("cycles")?))?;
            traffic(&mut d);
            let (c0, c1) = (c0.enable(&mut d)?, c1.enable(&mut d)?);
            check_eq!(traffic(&mut d), (0, 2, 0), "one write each");
            if v2 {
                check_eq!(model.with(|m| m.global_ctl()), 0b11);
            }
            inject(model, INSTRUCTIONS, 1000)?;
            inject(model, CYCLES, 250)?;
            let counts = [c0.read(&mut d)?, c1.read(&mut d)?];
            check_eq!(counts, [1000, 250]);
            let (c0, c1) = (c0.halt(&mut d)?, c1.halt(&mut d)?);
            inject(model, INSTRUCTIONS, 7)?;
            check_eq!([c0.read(&mut d)?, c1.read(&mut d)?], counts, "halted");
            let (c0, c1) = (c0.release(&mut d)?, c1.release(&mut d)?);
            check_eq!(
                model.with(|m| (m.control(0), m.counter(0), m.global_ctl())),
                (0, 0, 0),
                "released"
            );
            println!("amd: {part}: 1000 instructions and 250 cycles counted exactly (model)");
            let _msr = d.give_back(Counters { c0, c1, ..c });
            Ok(())
        })?;
    }
    Ok(())
}

/// A sampling counter (every 100 instructions) on each kind of part: each
/// overflow's PMI reaches the handler as a real interrupt with the
/// interrupted RIP (an instruction of the bounded wait); then with skid,
/// each period still exactly 100. Before PerfMonV2 the handler writes the
/// LVT entry, with it not.
fn sampling_pmis_are_real_interrupts_with_the_interrupted_rip() -> Outcome {
    for (part, model) in PARTS {
        on_part(part, || {
            let (mut d, c) = setup!(model, false)?;
            let n = SampleAfter::new(100, d.overflow_rule())?;
            let config = CounterConfig::counting(spec("instructions")?).sampling(n);
            let c2 = c.c2.configure(&mut d, &config)?.enable(&mut d)?;
            let window = pmi::wait_window();
            check_eq!(inject(model, INSTRUCTIONS, 1000)?, 10, "a PMI per overflow");
            check_eq!(HANDLED.load(Ordering::SeqCst), 10);
            let (mut samples, mut wrong) = (0, 0);
            SAMPLES.drain(|s| {
                samples += 1;
                wrong += u32::from(!window.contains(&s.rip) || s.counter != 2 || s.periods != 1);
            });
            check_eq!(
                (samples, wrong),
                (10, 0),
                "10 samples at the interrupted RIP"
            );
            check_eq!(n.split(c2.read(&mut d)?), (0, 0));
            model.with(|m| m.set_skid(3));
            check_eq!(inject(model, INSTRUCTIONS, 1000)?, 9, "the 10th PMI 3 away");
            let c2 = c2.halt(&mut d)?;
            check_eq!(d.pmi_state().periods_at_halt(2), 1, "the halt found it");
            let (owed, residual) = n.split(c2.read(&mut d)?);
            check_eq!(
                (d.pmi_state().periods(2) + owed) * 100 + residual,
                2000,
                "events = periods x N + residual"
            );
            // The halt stopped the counter with its PMI in flight: it comes now
            // and is claimed as the PMU's own.
            while model.take_pmi() {
                deliver()?;
            }
            check_eq!(
                (
                    HANDLER_ERRORS.load(Ordering::SeqCst),
                    NOT_OURS.load(Ordering::SeqCst)
                ),
                (0, 0),
                "every PMI the PMU's own"
            );
            println!(
                "amd: {part}: 1000 instructions, sample after 100: 10 PMIs as real interrupts at RIPs in [{:#x}, {:#x}]; with skid 3, the halt's PMI claimed late ({} late) (model)",
                window.start(),
                window.end(),
                LATE.load(Ordering::SeqCst)
            );
            let c2 = c2.release(&mut d)?;
            let _msr = d.give_back(Counters { c2, ..c });
            Ok(())
        })?;
    }
    Ok(())
}

/// The same PMIs delivered as NMIs, on the PerfMonV2 part and the legacy
/// one: they arrive with interrupts disabled.
fn pmi_as_nmi() -> Outcome {
    for (part, model) in [PARTS[0], PARTS[2]] {
        on_part(part, || {
            let (mut d, c) = setup!(model, true)?;
            let n = SampleAfter::new(50, d.overflow_rule())?;
            let config = CounterConfig::counting(spec("cycles")?).sampling(n);
            let c3 = c.c3.configure(&mut d, &config)?.enable(&mut d)?;
            check_eq!(inject(model, CYCLES, 500)?, 10);
            let mut samples = 0;
            SAMPLES.drain(|s| samples += u32::from(s.counter == 3 && s.periods == 1));
            check_eq!(samples, 10, "counter 3, one period each");
            check_eq!(
                pmi::local_apic().perf_counter_entry(),
                LvtPerfCounter::new(PmiDelivery::Nmi),
                "the NMI entry, unmasked"
            );
            check_eq!(HANDLER_ERRORS.load(Ordering::SeqCst), 0);
            let c3 = c3.halt(&mut d)?.release(&mut d)?;
            let _msr = d.give_back(Counters { c3, ..c });
            Ok(())
        })?;
    }
    Ok(())
}

/// AMD's late PMIs: two counters overflow in one clock, each overflow's PMI
/// a message of its own (`set_separate_pmis`). The first PMI's handler
/// services both; the second finds nothing and is claimed as the PMU's
/// own, not passed on as another source's.
fn late_pmis_are_claimed_as_the_pmus_own() -> Outcome {
    for (part, model) in PARTS {
        on_part(part, || {
            let (mut d, c) = setup!(model, false)?;
            model.with(|m| m.set_separate_pmis(true));
            let n = SampleAfter::new(100, d.overflow_rule())?;
            let config = CounterConfig::counting(spec("cycles")?).sampling(n);
            let c0 = c.c0.configure(&mut d, &config)?.enable(&mut d)?;
            let c1 = c.c1.configure(&mut d, &config)?.enable(&mut d)?;
            check_eq!(inject(model, CYCLES, 100)?, 2, "two PMIs");
            check_eq!(
                (
                    HANDLED.load(Ordering::SeqCst),
                    LATE.load(Ordering::SeqCst),
                    NOT_OURS.load(Ordering::SeqCst)
                ),
                (2, 1, 0),
                "the second claimed late"
            );
            let mut samples = 0;
            SAMPLES.drain(|_| samples += 1);
            check_eq!(samples, 2, "one sample each, none twice");
            println!(
                "amd: {part}: two overflows, two PMIs: the second claimed as a late PMI (model)"
            );
            let (c0, c1) = (
                c0.halt(&mut d)?.release(&mut d)?,
                c1.halt(&mut d)?.release(&mut d)?,
            );
            let _msr = d.give_back(Counters { c0, c1, ..c });
            Ok(())
        })?;
    }
    Ok(())
}

/// Groups: with PerfMonV2 one `PerfCntrGlobalCtl` write starts three
/// counters at one instant and one stops them; before it each member's
/// `EN` is written in turn.
fn groups_start_in_one_global_write_with_perfmon_v2() -> Outcome {
    for (part, model) in [PARTS[0], PARTS[1]] {
        on_part(part, || {
            let (mut d, c) = setup!(model, false)?;
            let v2 = d.cpu().perfmon_v2;
            let cycles = CounterConfig::counting(spec("cycles")?);
            let mut all = c.erase_all();
            for place in [0, 2, 4] {
                all[place]
                    .as_mut()
                    .ok_or("a counter")?
                    .configure(&mut d, &cycles)?;
            }
            let members = [0, 2, 4].map(|place| all[place].take());
            let [Some(a), Some(b), Some(e)] = members else {
                fail!("a configured counter went missing");
            };
            let mut g = match Group::new([a, b, e]) {
                Ok(g) => g,
                Err((e, _)) => fail!("group: {e}"),
            };
            traffic(&mut d);
            g.start(&mut d)?;
            let writes = if v2 { 1 } else { 3 };
            check_eq!(traffic(&mut d), (0, writes, 0), "start");
            if v2 {
                check_eq!(
                    model.with(|m| m.global_ctl()),
                    0b10101,
                    "three bits at once"
                );
            }
            inject(model, CYCLES, 700)?;
            check_eq!(g.read(&mut d)?, [700; 3]);
            g.stop(&mut d)?;
            check_eq!(
                traffic(&mut d).1,
                writes + if v2 { 2 } else { 0 },
                "read and stop"
            );
            inject(model, CYCLES, 5)?;
            check_eq!(g.read(&mut d)?, [700; 3], "stopped");
            println!(
                "amd: {part}: a group of 3 started and stopped with {writes} write(s) each (model)"
            );
            let [a, b, e] = g.into_members();
            for (place, mut m) in [(0, a), (2, b), (4, e)] {
                m.release(&mut d)?;
                all[place] = Some(m);
            }
            match Counters::from_erased(all) {
                Ok(c) => {
                    let _msr = d.give_back(c);
                }
                Err(_) => fail!("a handle did not come back unclaimed"),
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// Eight events on the Zen 2 model's six counters, rotated on the tick:
/// each runs three quarters of the time and the estimates are exact.
fn the_multiplexer_rotates_more_events_than_counters() -> Outcome {
    let (mut d, c) = setup!(&ZEN2, false)?;
    let selects = [0x40u16, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47];
    let events = selects.map(|s| EventSpec::raw(s, 0));
    let mut m = match Multiplexer::<8>::new(c.erase_all(), &events) {
        Ok(m) => m,
        Err((e, _)) => fail!("multiplexer: {e}"),
    };
    m.tick(&mut d, 0)?;
    for _ in 0..40 {
        for (k, s) in selects.into_iter().enumerate() {
            ZEN2.with(|z| z.inject(Event::new(s, 0, 10 * (k as u64 + 1))));
        }
        m.tick(&mut d, 1)?;
    }
    m.finish(&mut d, 0)?;
    for (k, r) in m.results().iter().enumerate() {
        check_eq!((r.enabled, r.running), (40, 30), "event {k}");
        check_eq!(r.estimate(), Some(400 * (k as u64 + 1)), "event {k}");
    }
    println!("amd: 8 events on 6 counters, 40 ticks: each ran 30, estimates exact (model)");
    let handles = match m.into_handles() {
        Ok(h) => h,
        Err(_) => fail!("the multiplexer still runs events"),
    };
    match Counters::from_erased(handles) {
        Ok(c) => {
            let _msr = d.give_back(c);
            Ok(())
        }
        Err(_) => fail!("a handle did not come back unclaimed"),
    }
}

// ---------------------------------------------------------------------------
// The cases on the model and on the real PMU: the same code, generic over
// the backend; a workload says what runs (the model: injected events; the
// real PMU: a loop of known length).

/// Iterations of the measured loop.
const ITERATIONS: u64 = 1_000_000;
/// Instructions per iteration of [`counted_loop`]: ADD, DEC, JNZ.
const LOOP_INSTRUCTIONS: u64 = 3;
/// Instructions between a counter's start and stop outside the loop.
const PATH_OVERHEAD: u64 = 20_000;
/// The sampling case's period.
const SAMPLE_AFTER: u64 = 100_000;

/// What runs while a counter counts, on the model or on the real PMU.
trait Workload {
    /// The loop of [`ITERATIONS`] iterations, or its events; interrupts
    /// enabled where `sampled`. Returns the RIPs a PMI taken meanwhile may
    /// interrupt.
    fn run(&mut self, sampled: bool) -> Result<core::ops::RangeInclusive<u64>, Failure>;
    /// The clock cycles are compared with: the TSC, or the model's (one
    /// tick per injected cycle).
    fn ticks(&self) -> u64;
    /// The samples its PMIs produced, handed to `f`; the PMIs handled.
    fn samples(&mut self, f: &mut dyn FnMut(pmu::sampling::Sample)) -> u64;
}

/// The model's: the loop's events injected (and the path's: 1000
/// instructions), its PMIs delivered.
struct ModelLoop {
    model: &'static SharedAmdModel,
    clock: u64,
}

impl Workload for ModelLoop {
    fn run(&mut self, _sampled: bool) -> Result<core::ops::RangeInclusive<u64>, Failure> {
        inject(
            self.model,
            INSTRUCTIONS,
            LOOP_INSTRUCTIONS * ITERATIONS + 1000,
        )?;
        // One cycle and a half per iteration (a dependency chain of DEC).
        let cycles = ITERATIONS * 3 / 2;
        inject(self.model, CYCLES, cycles)?;
        self.clock += cycles;
        Ok(pmi::wait_window())
    }

    fn ticks(&self) -> u64 {
        self.clock
    }

    fn samples(&mut self, f: &mut dyn FnMut(pmu::sampling::Sample)) -> u64 {
        SAMPLES.drain(f);
        HANDLED.load(Ordering::SeqCst)
    }
}

/// The real PMU's: the loop itself.
struct RealLoop;

impl Workload for RealLoop {
    fn run(&mut self, sampled: bool) -> Result<core::ops::RangeInclusive<u64>, Failure> {
        if sampled {
            let (start, end) = sampled_loop(ITERATIONS);
            // A PMI still pending arrives now, to a disarmed counter.
            x86_64::instructions::interrupts::enable();
            for _ in 0..10_000 {
                core::hint::spin_loop();
            }
            x86_64::instructions::interrupts::disable();
            return Ok(start..=end);
        }
        counted_loop(ITERATIONS);
        Ok(0..=0)
    }

    fn ticks(&self) -> u64 {
        fenced_rdtsc()
    }

    fn samples(&mut self, f: &mut dyn FnMut(pmu::sampling::Sample)) -> u64 {
        REAL_SAMPLES.drain(f);
        REAL_HANDLED.load(Ordering::SeqCst)
    }
}

type Handles = [Option<AnyHandle<AmdCore>>; 6];

/// The first counter the firmware does not use.
fn free<O: Owner, M: MsrBackend>(d: &AmdDriver<'_, O, M>, h: &Handles) -> Result<usize, Failure> {
    match (0..6u8).find(|&n| {
        h[usize::from(n)].is_some()
            && !d
                .firmware()
                .contains(pmu::arch::amd::Counter::new(n).unwrap())
    }) {
        Some(n) => Ok(usize::from(n)),
        None => skip!("the firmware uses every counter"),
    }
}

/// Retired instructions of the loop within `bounds::loop_instructions`.
fn retired_instructions<O: Owner, M: MsrBackend>(
    d: &mut AmdDriver<'_, O, M>,
    h: &mut Handles,
    w: &mut dyn Workload,
) -> Result<u64, Failure> {
    let i = free(d, h)?;
    let c = h[i].as_mut().ok_or("a counter")?;
    c.configure(d, &CounterConfig::counting(spec("instructions")?))?;
    let allowed = bounds::loop_instructions(LOOP_INSTRUCTIONS, ITERATIONS, PATH_OVERHEAD)?;
    c.enable(d)?;
    w.run(false)?;
    c.halt(d)?;
    let measured = c.read(d)?;
    bounds::retired_instructions_within(allowed, measured)?;
    Ok(measured)
}

/// Core cycles of the loop against the workload's clock.
fn core_cycles<O: Owner, M: MsrBackend>(
    d: &mut AmdDriver<'_, O, M>,
    h: &mut Handles,
    w: &mut dyn Workload,
) -> Result<u64, Failure> {
    let i = free(d, h)?;
    let c = h[i].as_mut().ok_or("a counter")?;
    c.configure(d, &CounterConfig::counting(spec("cycles")?))?;
    let before = w.ticks();
    c.enable(d)?;
    w.run(false)?;
    c.halt(d)?;
    let ticks = w.ticks().wrapping_sub(before);
    let cycles = c.read(d)?;
    bounds::cycles_against_tsc(cycles, ticks, ITERATIONS)?;
    Ok(cycles)
}

/// Instructions sampled every [`SAMPLE_AFTER`] while the loop runs: every
/// sample's RIP where the workload says PMIs land, every instruction
/// accounted for.
fn overflow_pmis<O: Owner, M: MsrBackend>(
    d: &mut AmdDriver<'_, O, M>,
    h: &mut Handles,
    w: &mut dyn Workload,
) -> Result<u64, Failure> {
    let i = free(d, h)?;
    let index = i as u8;
    let n = SampleAfter::new(SAMPLE_AFTER, d.overflow_rule())?;
    let c = h[i].as_mut().ok_or("a counter")?;
    c.configure(
        d,
        &CounterConfig::counting(spec("instructions")?).sampling(n),
    )?;
    w.samples(&mut |_| {});
    let handled_before = w.samples(&mut |_| {});
    c.enable(d)?;
    let window = w.run(true)?;
    c.halt(d)?;
    let (owed, residual) = n.split(c.read(d)?);
    let state = d.pmi_state();
    let periods = state.periods(index);
    let (mut inside, mut outside, mut sampled, mut foreign) = (0u64, 0u64, 0u64, 0u64);
    let handled = w.samples(&mut |s| {
        if window.contains(&s.rip) {
            inside += 1;
        } else {
            outside += 1;
        }
        sampled += u64::from(s.periods);
        foreign += u64::from(s.counter != index);
    }) - handled_before;
    println!(
        "amd: {handled} PMIs, {inside} samples in [{:#x}, {:#x}], {outside} outside; {periods} periods of {SAMPLE_AFTER} ({} at the halt), residual {residual}",
        window.start(),
        window.end(),
        state.periods_at_halt(index)
    );
    check_eq!(
        (foreign, outside),
        (0, 0),
        "samples of another counter, or elsewhere"
    );
    check!(inside >= 1, "no overflow PMI arrived while the loop ran");
    check_eq!(sampled + state.periods_at_halt(index), periods);
    let counted = (periods + owed) * SAMPLE_AFTER + residual;
    check!(
        counted >= LOOP_INSTRUCTIONS * ITERATIONS,
        "{counted} instructions accounted for, fewer than the loop's"
    );
    Ok(counted)
}

type Body<O, M> =
    fn(&mut AmdDriver<'_, O, M>, &mut Handles, &mut dyn Workload) -> Result<u64, Failure>;

/// `body` on the Zen 4 model, then on the real PMU where this guest has a
/// usable one (skipped, with detection's reason, where it has none).
fn on_model_and_real(
    what: &str,
    model_body: Body<ModelCase, Recording<AmdMsr<'static>, 16>>,
    real_body: Body<Real, X86Msr>,
) -> Outcome {
    let (mut d, c) = take::<ModelCase>(&ZEN4, &MODEL_CASE_CPU, false)?;
    let mut h = c.erase_all();
    let mut w = ModelLoop {
        model: &ZEN4,
        clock: 0,
    };
    let outcome = model_body(&mut d, &mut h, &mut w);
    finish(d, h)?;
    let counted = outcome?;
    println!("amd: {what}: {counted} on the model");
    with_real_pmu(what, real_body)
}

pmu::owner!(ModelCase);
// SAFETY: the Zen 4 model of the model-and-real cases is a logical
// processor of its own; this is its one value.
static MODEL_CASE_CPU: AmdPmu = unsafe { AmdPmu::new() };
pmu::owner!(Real);

/// Releases whatever is claimed and gives the PMU back.
fn finish<O: Owner, M: MsrBackend>(mut d: AmdDriver<'_, O, M>, mut h: Handles) -> Outcome {
    for c in h.iter_mut().flatten() {
        if c.state() != StateTag::Unclaimed {
            c.release(&mut d)?;
        }
    }
    match Counters::from_erased(h) {
        Ok(c) => {
            let _ = d.give_back(c);
            Ok(())
        }
        Err(_) => fail!("a counter handle did not come back unclaimed"),
    }
}

fn retired_instructions_on_model_and_real() -> Outcome {
    on_model_and_real(
        "retired instructions",
        retired_instructions,
        retired_instructions,
    )
}

fn core_cycles_on_model_and_real() -> Outcome {
    on_model_and_real("core cycles", core_cycles, core_cycles)
}

fn overflow_pmis_on_model_and_real() -> Outcome {
    on_model_and_real("overflow PMIs", overflow_pmis, overflow_pmis)
}

fn real_msr() -> X86Msr {
    // SAFETY: ring 0, on CPU 0 (this kernel starts no other CPU); detection
    // reads only the MSRs CPUID enumerates (and the legacy counters every
    // AMD64 part has), and the driver and its handler access only the PMU
    // registers of the counters detection found.
    unsafe { X86Msr::new() }
}

fn real_entry() -> LvtPerfCounter {
    LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(REAL_PMI_VECTOR).unwrap()))
}

/// The real PMU's interrupt: the driver's handler on the real registers,
/// then EOI.
fn on_real_pmi(frame: &InterruptFrame) {
    let mut apic = pmi::local_apic();
    let Ok(_) = handle_pmi(
        &CPU0,
        &mut real_msr(),
        &mut apic,
        real_entry(),
        frame.rip,
        |s| {
            REAL_SAMPLES.push(s);
        },
    );
    REAL_HANDLED.fetch_add(1, Ordering::SeqCst);
    apic.eoi();
}

/// Takes the real PMU, if this guest has a usable one, runs `body` on the
/// loop, then releases everything and gives the PMU back.
fn with_real_pmu(what: &str, body: Body<Real, X86Msr>) -> Outcome {
    let Ok(found) = detect::detect(&HardwareCpuid, &mut real_msr());
    let cpu = match (found.pmu, found.usable_amd()) {
        (_, Some(cpu)) => cpu,
        (PmuKind::Amd(a), None) => skip!("the real half: no usable AMD PMU here: {}", a.probe),
        _ => skip!("the real half: not an AMD CPU: {found}"),
    };
    let (mut d, c) = AmdDriver::<Real, _>::take(real_msr(), &cpu, &CPU0)?;
    pmi::local_apic().set_perf_counter_entry(real_entry());
    let mut h = c.erase_all();
    let outcome = body(&mut d, &mut h, &mut RealLoop);
    pmi::local_apic().set_perf_counter_entry(real_entry().masked());
    finish(d, h)?;
    let counted = outcome?;
    println!("amd: {what}: {counted} on the real PMU ({found})");
    Ok(())
}

/// `iterations` iterations of ADD, DEC, JNZ.
#[inline(never)]
fn counted_loop(iterations: u64) {
    // SAFETY: register-only arithmetic and a backward branch that ends when
    // the count reaches zero (it starts above zero).
    unsafe {
        core::arch::asm!(
            "2:",
            "add {acc}, 1",
            "dec {n}",
            "jnz 2b",
            n = inout(reg) iterations.max(1) => _,
            acc = inout(reg) 0u64 => _,
            options(nomem, nostack),
        );
    }
}

/// [`counted_loop`] with interrupts enabled: the address of the loop's
/// first instruction and of the CLI after it.
#[inline(never)]
fn sampled_loop(iterations: u64) -> (u64, u64) {
    let (start, end): (u64, u64);
    // SAFETY: the loop of `counted_loop`, with interrupts enabled around
    // it and disabled again after it; the interrupt entry stubs preserve
    // every register.
    unsafe {
        core::arch::asm!(
            "lea {start}, [rip + 2f]",
            "lea {end}, [rip + 3f]",
            "sti",
            "2:",
            "add {acc}, 1",
            "dec {n}",
            "jnz 2b",
            "3:",
            "cli",
            start = out(reg) start,
            end = out(reg) end,
            n = inout(reg) iterations.max(1) => _,
            acc = inout(reg) 0u64 => _,
        );
    }
    (start, end)
}

/// RDTSC, ordered with the code around it.
fn fenced_rdtsc() -> u64 {
    let (low, high): (u32, u32);
    // SAFETY: LFENCE and RDTSC only order execution and read the TSC.
    unsafe {
        core::arch::asm!("lfence", "rdtsc", "lfence", out("eax") low, out("edx") high, options(nostack));
    }
    u64::from(high) << 32 | u64::from(low)
}

/// Refusals reach the kernel as errors: a part's map without an event.
#[allow(dead_code)]
fn unmapped(e: ErasedError<DriverError<ConfigError, pmu::model::amd::Fault>>) -> bool {
    matches!(
        e,
        ErasedError::Driver(DriverError::Config(ConfigError::Unmapped { .. }))
    )
}

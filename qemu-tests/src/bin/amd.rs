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
//! The real-PMU cases (`pmu_qemu_tests::real`: retired instructions of a
//! loop of known length within `pmu_report::bounds`' interval, core
//! cycles against the TSC, and overflow PMIs inside the loop), twice,
//! through the crate's driver and handler: the `model_*` cases on the Zen 4
//! model, fed the events the loop would retire (they run everywhere, and
//! their counts are the model's), and the `real_*` cases on the real PMU,
//! found by detection and driven on `X86Msr`. Under TCG, and under KVM on a
//! host that exposes no PMU (this project's), the `real_*` cases are
//! skipped with the reason detection gives ("counters read 0"); on an AMD
//! host whose KVM exposes its PMU they run (`cargo validate` runs them with
//! every other architecture's and reports):
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
use pmu::access::{AccessCounts, Recording, X86Msr};
use pmu::apic::{LvtPerfCounter, ModelPmi, PmiDelivery, Vector, deliver_model_pmi_unmasked};
use pmu::arch::amd::driver::{AmdDriver, CounterConfig, Counters};
use pmu::arch::amd::multiplex::Multiplexer;
use pmu::arch::amd::{AmdPmu, EventSpec, PERF_LEGACY_CTR0};
use pmu::arch::handle_pmi;
use pmu::counter::{Group, Owner};
use pmu::detect::{self, CounterProbe, HardwareCpuid, PmuKind, Vendor};
use pmu::model::amd::{AmdMsr, Config, Event, SharedAmdModel};
use pmu::sampling::{SampleAfter, SampleBuffer};
use pmu_qemu_tests::{real, real_cases};

hobby::entry_point!(main);

/// The model's PMIs; the real-PMU cases take `real::cases::PMI_VECTOR`.
const PMI_VECTOR: u8 = 0xF0;
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
        "amd: the model_* cases run the real-PMU cases on a model (their counts are the model's); the real_* cases count on the real PMU when this guest has a usable one, and are skipped otherwise"
    );
    pmi::local_apic().enable(Vector::new(0xFF).unwrap());
    idt::set_handler(PMI_VECTOR, on_model_pmi);
    idt::set_handler(NMI_VECTOR, on_model_pmi);
    let [m0, m1, m2] = real_cases!("model_", real::amd::Model);
    let [r0, r1, r2] = real_cases!("real_", real::amd::Real);
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

//! The crate's x2APIC layer (`pmu::apic::X2Apic`) on a real x2APIC: KVM's
//! `-cpu host` has one (CPUID.01H:ECX\[21\]); QEMU 7.2's TCG has none, and
//! there every case that needs it says it is skipped and why. Detection
//! reports the mode either way. In x2APIC mode: the APIC ID agrees with
//! CPUID's x2APIC ID (`pmu::topology`), the LVT performance-counter entry
//! reads back through its MSR, a self-IPI through the SELF IPI register
//! reaches the handler, EOI through its MSR lets the next one in, and the
//! NetBurst driver samples on a PMU model whose PMIs the crate's `X2Apic`
//! raises (mask the entry, SELF IPI, or an NMI through the ICR) and whose
//! handler unmasks the entry through it, every count exact. All counts
//! come from the model, not hardware.
#![no_std]
#![no_main]

use core::arch::x86_64::__cpuid;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use hobby::boot::BootInfo;
use hobby::idt::{self, InterruptFrame};
use hobby::pmi::{self, Delivery, PmiError, Taken, Waited};
use hobby::test::Outcome;
use hobby::{case, check, check_eq, println, skip};
use pmu::access::X86Msr;
use pmu::apic::x2apic::{APIC_BASE_ENABLE, APIC_BASE_EXTD, IA32_APIC_BASE};
use pmu::apic::{LvtPerfCounter, PmiDelivery, Vector, X2Apic};
use pmu::arch::handle_pmi;
use pmu::arch::netburst::driver::{CounterConfig, NetBurstDriver};
use pmu::arch::netburst::pmi::overflow_rule;
use pmu::arch::netburst::{Escr, EventSpec, LogicalProcessor as Lp, NetBurstPmu};
use pmu::detect::{HardwareCpuid, detect};
use pmu::model::netburst::{
    Config, EscrGroup, EventKind, LogicalProcessor as ModelLp, Privilege, SharedNetBurstModel,
};
use pmu::sampling::SampleAfter;

hobby::entry_point!(main);

const PMI_VECTOR: u8 = 0xF0;
const SKIP: &str = "no x2APIC on this CPU (CPUID.01H:ECX[21] clear: QEMU 7.2's TCG emulates none; PMU_QEMU_ACCEL=kvm runs this on the host's CPU, which has one)";

/// Whether the kernel is in x2APIC mode (entered in `main` where the CPU
/// has it).
static X2APIC: AtomicBool = AtomicBool::new(false);

fn main(_: &'static BootInfo) -> ! {
    println!("x2apic: counts below come from the NetBurst PMU model, not hardware");
    // Every APIC access of this kernel, the library's bounded waits
    // included, goes through the x2APIC MSRs once this succeeds.
    match hobby::apic::enter_x2apic() {
        Ok(()) => {
            X2APIC.store(true, Ordering::SeqCst);
            apic().enable(Vector::new(0xFF).unwrap()).unwrap_or(());
            println!("x2apic: in x2APIC mode");
        }
        Err(e) => println!("x2apic: staying in xAPIC mode: {e}"),
    }
    hobby::test::run(
        "x2apic",
        &[
            case!(detection_reports_x2apic),
            case!(the_mode_and_id_agree_with_cpuid),
            case!(lvt_entry_reads_back_through_its_msr),
            case!(self_ipis_reach_the_handler_and_eoi_lets_the_next_in),
            case!(model_pmis_through_the_x2apic_keep_every_count),
            case!(model_pmi_as_nmi_through_the_icr),
        ],
    )
}

/// This CPU's x2APIC, through the crate's layer and its hardware backend.
fn apic() -> X2Apic<X86Msr> {
    // SAFETY: CPL 0, used on this CPU (the kernel has one); only x2APIC
    // registers are accessed through it, after `main` entered the mode.
    X2Apic::new(unsafe { X86Msr::new() })
}

/// CPUID.01H:ECX\[21\], read here without the crate.
fn cpuid_says_x2apic() -> bool {
    __cpuid(0).eax >= 1 && __cpuid(1).ecx & 1 << 21 != 0
}

fn detection_reports_x2apic() -> Outcome {
    // SAFETY: CPL 0; detection reads IA32_MISC_ENABLE at most.
    let mut msr = unsafe { X86Msr::new() };
    let Ok(found) = detect(&HardwareCpuid, &mut msr);
    println!("x2apic: detect: {found}");
    check_eq!(found.x2apic, cpuid_says_x2apic(), "Detection::x2apic");
    let mut text = DisplayBuffer::default();
    let _ = core::fmt::write(&mut text, format_args!("{found}"));
    check_eq!(
        text.contains("x2APIC"),
        found.x2apic,
        "the report names x2APIC exactly when the CPU has it"
    );
    check_eq!(
        X2APIC.load(Ordering::SeqCst),
        found.x2apic,
        "the kernel's mode"
    );
    Ok(())
}

fn the_mode_and_id_agree_with_cpuid() -> Outcome {
    if !X2APIC.load(Ordering::SeqCst) {
        skip!("{SKIP}");
    }
    let mut apic = apic();
    // SAFETY: IA32_APIC_BASE exists on every CPU with an APIC, and reading
    // it has no side effect.
    let base = unsafe { apic.msr().read_msr(IA32_APIC_BASE) };
    check_eq!(
        base & (APIC_BASE_ENABLE | APIC_BASE_EXTD),
        APIC_BASE_ENABLE | APIC_BASE_EXTD,
        "IA32_APIC_BASE: enabled, EXTD"
    );
    let Ok(id) = apic.id();
    let site = pmu::topology::own_site(&HardwareCpuid)?;
    check_eq!(
        id,
        site.apic_id,
        "the x2APIC ID register and CPUID's x2APIC ID"
    );
    let Ok(version) = apic.version();
    check!(
        (version >> 16) & 0xFF >= 4,
        "version {version:#x}: no LVT performance-counter entry"
    );
    println!("x2apic: x2APIC ID {id}, version {version:#x}");
    Ok(())
}

fn lvt_entry_reads_back_through_its_msr() -> Outcome {
    if !X2APIC.load(Ordering::SeqCst) {
        skip!("{SKIP}");
    }
    let mut apic = apic();
    for entry in [
        LvtPerfCounter::new(PmiDelivery::Nmi),
        LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(0x20).unwrap())).masked(),
        LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(PMI_VECTOR).unwrap())),
    ] {
        let Ok(()) = apic.set_perf_counter_entry(entry);
        let Ok(read) = apic.perf_counter_entry();
        check_eq!(read, entry);
    }
    Ok(())
}

static IPIS: AtomicU32 = AtomicU32::new(0);
static LAST_RIP: AtomicU64 = AtomicU64::new(0);

fn on_ipi(frame: &InterruptFrame) {
    LAST_RIP.store(frame.rip, Ordering::SeqCst);
    IPIS.fetch_add(1, Ordering::SeqCst);
    let Ok(()) = apic().eoi();
}

fn self_ipis_reach_the_handler_and_eoi_lets_the_next_in() -> Outcome {
    if !X2APIC.load(Ordering::SeqCst) {
        skip!("{SKIP}");
    }
    const VECTOR: u8 = 0xE4;
    idt::set_handler(VECTOR, on_ipi);
    let vector = Vector::new(VECTOR).ok_or("vector")?;
    let window = pmi::wait_window();
    // Each is taken only after the previous one's EOI (same vector: the
    // APIC holds an equal-priority one while one is in service).
    for n in 1..=3u32 {
        let seen = IPIS.load(Ordering::SeqCst);
        let Ok(()) = apic().self_ipi(vector);
        check!(
            pmi::wait_for_interrupt(&IPIS, seen.into(), Taken::Vector),
            "self-IPI {n} through the SELF IPI register was not taken"
        );
        let rip = LAST_RIP.load(Ordering::SeqCst);
        check!(
            window.contains(&rip),
            "RIP {rip:#x} outside the wait's loop [{:#x}, {:#x}]",
            window.start(),
            window.end()
        );
    }
    check_eq!(IPIS.load(Ordering::SeqCst), 3);
    idt::clear_handler(VECTOR);
    Ok(())
}

/// The model and its one PMU value.
static MODEL: SharedNetBurstModel = SharedNetBurstModel::new(Config::prescott_ht());
// SAFETY: the model is a package of its own, and this is its one value.
static PMU: NetBurstPmu = unsafe { NetBurstPmu::new() };
const RUNNING: EventKind = EventKind::new(EscrGroup::Fsb, 0x13, 1);
static SAMPLES: AtomicU64 = AtomicU64::new(0);
static HANDLER_ERRORS: AtomicU32 = AtomicU32::new(0);
static NMI_MODE: AtomicBool = AtomicBool::new(false);

fn entry() -> LvtPerfCounter {
    if NMI_MODE.load(Ordering::SeqCst) {
        LvtPerfCounter::new(PmiDelivery::Nmi)
    } else {
        LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(PMI_VECTOR).unwrap()))
    }
}

/// The PMI handler (vector or NMI): the driver's, unmasking the entry
/// through the crate's `X2Apic`; EOI for a vector.
fn on_pmi(frame: &InterruptFrame) {
    let mut apic = apic();
    let Some(mut msr) = MODEL.msr_as(ModelLp::T0) else {
        HANDLER_ERRORS.fetch_add(1, Ordering::SeqCst);
        return;
    };
    let r = handle_pmi(
        PMU.logical(Lp::T0),
        &mut msr,
        &mut apic,
        entry(),
        frame.rip,
        |s| {
            SAMPLES.fetch_add(u64::from(s.periods), Ordering::SeqCst);
        },
    );
    if r.is_err() {
        HANDLER_ERRORS.fetch_add(1, Ordering::SeqCst);
    }
    if !NMI_MODE.load(Ordering::SeqCst) {
        let Ok(()) = apic.eoi();
    }
}

/// Samples `events` RUNNING events every `n` on counter 0, each PMI raised
/// by the crate's `X2Apic` ([`pmi::deliver`]) and waited for; returns
/// (events accounted, samples, PMIs delivered).
fn sample(events: u64, n: u64) -> Result<(u64, u64, u64), hobby::test::Failure> {
    pmu::owner!(X2ApicCase);
    MODEL.reset();
    SAMPLES.store(0, Ordering::SeqCst);
    let nmi = NMI_MODE.load(Ordering::SeqCst);
    let info = MODEL.detect().ok_or("detection on the model")?;
    let msr = MODEL.msr_as(ModelLp::T0).ok_or("T0")?;
    let (mut d, c) = NetBurstDriver::<X2ApicCase, _>::take_for(Lp::T0, msr, &info, &PMU)
        .map_err(|_| "take_for")?;
    let Ok(()) = apic().set_perf_counter_entry(entry());
    let every = SampleAfter::new(n, overflow_rule())?;
    let spec: EventSpec = pmu::netburst_event!("global_power_events:RUNNING:k");
    let c0 =
        c.c0.configure(
            &mut d,
            &CounterConfig::counting(spec, Escr::FsbEscr0)
                .on(Lp::T0)
                .sampling(every),
        )?
        .enable(&mut d)?;
    let mut left = events;
    let mut pmis = 0;
    while left > 0 {
        let got = MODEL.inject_until_own_pmi(RUNNING.on(ModelLp::T0, Privilege::Os, left));
        left -= got.injected.min(left);
        if got.pmi_pending {
            MODEL.take_pmi(ModelLp::T0);
            let want = if nmi {
                Delivery::Nmi
            } else {
                Delivery::Vector(PMI_VECTOR)
            };
            check_eq!(
                pmi::deliver(&mut apic()),
                want,
                "the PMI raised through the x2APIC"
            );
            if !pmi::wait_for_handler(nmi) {
                let vector = (!nmi).then_some(PMI_VECTOR);
                hobby::fail!(
                    "through the x2APIC: {}",
                    PmiError::NotHandled {
                        vector,
                        pmi: pmis + 1,
                        waited: Waited::Cycles(pmi::WAIT_CYCLES),
                    }
                );
            }
            pmis += 1;
        } else if got.injected == 0 {
            hobby::fail!("the model took no event and raised no PMI");
        }
    }
    let c0 = c0.halt(&mut d)?;
    let raw = c0.read(&mut d)?;
    let (owed, residual) = every.split(raw);
    let accounted = (PMU.pmi().periods(0) + owed) * n + residual;
    let c0 = c0.release(&mut d)?;
    let _msr = d.give_back(pmu::arch::netburst::driver::Counters { c0, ..c });
    Ok((accounted, SAMPLES.load(Ordering::SeqCst), pmis))
}

fn model_pmis_through_the_x2apic_keep_every_count() -> Outcome {
    if !X2APIC.load(Ordering::SeqCst) {
        skip!("{SKIP}");
    }
    idt::set_handler(PMI_VECTOR, on_pmi);
    NMI_MODE.store(false, Ordering::SeqCst);
    // Not a multiple of N: every period's PMI comes (at the increment
    // after its overflow).
    let (events, n) = (1_234, 50);
    let (accounted, samples, pmis) = sample(events, n)?;
    check_eq!(HANDLER_ERRORS.load(Ordering::SeqCst), 0);
    check_eq!(accounted, events, "events = periods x N + residual");
    check_eq!(
        (samples, pmis),
        (events / n, events / n),
        "a PMI and a sample per period"
    );
    let Ok(entry) = apic().perf_counter_entry();
    check!(!entry.is_masked(), "the handler left the entry unmasked");
    println!(
        "x2apic: {events} events every {n}: {pmis} PMIs through the x2APIC, conserved exactly (model)"
    );
    idt::clear_handler(PMI_VECTOR);
    Ok(())
}

fn model_pmi_as_nmi_through_the_icr() -> Outcome {
    if !X2APIC.load(Ordering::SeqCst) {
        skip!("{SKIP}");
    }
    idt::set_handler(2, on_pmi);
    NMI_MODE.store(true, Ordering::SeqCst);
    let (events, n) = (301, 100);
    let result = sample(events, n);
    NMI_MODE.store(false, Ordering::SeqCst);
    idt::clear_handler(2);
    let (accounted, samples, pmis) = result?;
    check_eq!(HANDLER_ERRORS.load(Ordering::SeqCst), 0);
    check_eq!(accounted, events, "events = periods x N + residual");
    check_eq!((samples, pmis), (3, 3), "an NMI and a sample per period");
    Ok(())
}

/// A text buffer for checking what `Display` writes (512 bytes: the report
/// of an AMD part whose counters read 0 runs past 256).
struct DisplayBuffer {
    text: [u8; 512],
    len: usize,
}

impl Default for DisplayBuffer {
    fn default() -> Self {
        DisplayBuffer {
            text: [0; 512],
            len: 0,
        }
    }
}

impl DisplayBuffer {
    fn contains(&self, needle: &str) -> bool {
        self.text[..self.len]
            .windows(needle.len())
            .any(|w| w == needle.as_bytes())
    }
}

impl core::fmt::Write for DisplayBuffer {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let n = s.len().min(self.text.len() - self.len);
        self.text[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

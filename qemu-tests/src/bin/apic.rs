//! The local APIC path a PMI takes: the crate's LVT performance-counter
//! code programs the vector, a self-IPI stands in for the overflow (QEMU has
//! no PMU), and the handler sees the interrupted RIP; EOI gates the next one.
//! The crate's own entry stub (`pmu::pmi_entry!`) takes the PMI as a vector
//! and as an NMI, in place of this kernel's stubs.
//!
#![no_std]
#![no_main]

use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use hobby::boot::BootInfo;
use hobby::idt::{self, InterruptFrame};
use hobby::pmi::{self, Delivery, interrupt_window};
use hobby::test::Outcome;
use hobby::{case, check, check_eq, fail, println};
use pmu::apic::{LocalApic, LvtPerfCounter, PmiDelivery, Vector};
use x86_64::instructions::interrupts;

hobby::entry_point!(main);

const PMI_VECTOR: u8 = 0xF0;
const SPURIOUS_VECTOR: u8 = 0xFF;

/// The APIC handle, shared by the cases and the interrupt handler.
struct BootCpuApic(LocalApic);

// SAFETY: this kernel runs on one CPU only, so the handle can never reach a
// CPU other than the one whose APIC it maps.
unsafe impl Send for BootCpuApic {}

static APIC: spin::Once<spin::Mutex<BootCpuApic>> = spin::Once::new();

fn main(_: &'static BootInfo) -> ! {
    // SAFETY: the boot code identity-maps the xAPIC page at its default
    // address, uncacheable; QEMU's CPU is in xAPIC mode, and this kernel has
    // one CPU and this one handle.
    let apic = unsafe { LocalApic::new(NonNull::new(pmu::apic::DEFAULT_BASE as *mut u8).unwrap()) };
    APIC.call_once(|| spin::Mutex::new(BootCpuApic(apic)));
    hobby::test::run(
        "apic",
        &[
            case!(lvt_entry_is_masked_at_reset),
            case!(lvt_entry_reads_back),
            case!(pmi_vector_reaches_handler_with_interrupted_rip),
            case!(eoi_lets_the_second_pmi_through),
            case!(model_pmi_masks_the_entry_and_interrupts),
            case!(model_pmi_as_nmi),
            case!(crate_entry_stub_takes_a_vector_pmi),
            case!(crate_entry_stub_takes_an_nmi),
        ],
    )
}

fn with_apic<R>(f: impl FnOnce(&mut LocalApic) -> R) -> R {
    interrupts::without_interrupts(|| f(&mut APIC.get().expect("set in main").lock().0))
}

fn lvt_entry_is_masked_at_reset() -> Outcome {
    let entry = with_apic(|apic| apic.perf_counter_entry());
    println!(
        "apic: LVT performance counter at reset = {:#x}",
        entry.bits()
    );
    check_eq!(entry, LvtPerfCounter::RESET);
    Ok(())
}

fn lvt_entry_reads_back() -> Outcome {
    let spurious = Vector::new(SPURIOUS_VECTOR).unwrap();
    let version = with_apic(|apic| {
        apic.enable(spurious);
        apic.version()
    });
    // LVT entries: bits 23:16 hold the index of the last one; the
    // performance-counter entry is index 4, so there must be at least 5.
    check!(
        (version >> 16) & 0xFF >= 4,
        "APIC version {version:#x} has no LVT PC entry"
    );
    for entry in [
        LvtPerfCounter::new(PmiDelivery::Nmi),
        LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(0x20).unwrap())).masked(),
        LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(PMI_VECTOR).unwrap())),
    ] {
        let read = with_apic(|apic| {
            apic.set_perf_counter_entry(entry);
            apic.perf_counter_entry()
        });
        check_eq!(read, entry);
    }
    Ok(())
}

static PMIS: AtomicU32 = AtomicU32::new(0);
static LAST_RIP: AtomicU64 = AtomicU64::new(0);
static EOI_IN_HANDLER: AtomicBool = AtomicBool::new(true);

fn pmi_handler(frame: &InterruptFrame) {
    LAST_RIP.store(frame.rip, Ordering::SeqCst);
    PMIS.fetch_add(1, Ordering::SeqCst);
    if EOI_IN_HANDLER.load(Ordering::SeqCst) {
        // No deadlock: the handler runs with interrupts disabled, and the
        // cases take this lock only with interrupts disabled too.
        APIC.get().expect("set in main").lock().0.eoi();
    }
}

/// The vector the crate's LVT code programmed, read back from the APIC.
fn programmed_vector() -> Result<Vector, hobby::test::Failure> {
    let entry = with_apic(|apic| {
        apic.set_perf_counter_entry(LvtPerfCounter::new(PmiDelivery::Fixed(
            Vector::new(PMI_VECTOR).unwrap(),
        )));
        apic.perf_counter_entry()
    });
    match entry.delivery() {
        Some(PmiDelivery::Fixed(v)) if !entry.is_masked() => Ok(v),
        _ => fail!(
            "LVT entry {:#x} is not an unmasked fixed vector",
            entry.bits()
        ),
    }
}

/// Sends the IPI with interrupts off, then opens the window.
fn ipi_in_window(vector: Vector) -> u64 {
    with_apic(|apic| apic.self_ipi(vector));
    interrupt_window()
}

fn pmi_vector_reaches_handler_with_interrupted_rip() -> Outcome {
    let vector = programmed_vector()?;
    idt::set_handler(vector.get(), pmi_handler);
    PMIS.store(0, Ordering::SeqCst);
    let window = ipi_in_window(vector);
    check_eq!(PMIS.load(Ordering::SeqCst), 1);
    let rip = LAST_RIP.load(Ordering::SeqCst);
    println!("apic: vector {:#x} delivered at RIP {rip:#x}", vector.get());
    check_eq!(rip, window);
    check!(!with_apic(|apic| apic.in_service(vector.get())), "EOI done");
    Ok(())
}

fn eoi_lets_the_second_pmi_through() -> Outcome {
    let vector = programmed_vector()?;
    idt::set_handler(vector.get(), pmi_handler);
    PMIS.store(0, Ordering::SeqCst);
    EOI_IN_HANDLER.store(false, Ordering::SeqCst);
    ipi_in_window(vector);
    check_eq!(PMIS.load(Ordering::SeqCst), 1);
    check!(
        with_apic(|apic| apic.in_service(vector.get())),
        "in service until EOI"
    );
    // Without EOI the second interrupt stays pending in the IRR.
    ipi_in_window(vector);
    check_eq!(PMIS.load(Ordering::SeqCst), 1);
    check!(
        with_apic(|apic| apic.pending(vector.get())),
        "second IPI pending"
    );
    // EOI retires the first; the second is delivered as soon as IF allows.
    EOI_IN_HANDLER.store(true, Ordering::SeqCst);
    with_apic(|apic| apic.eoi());
    let window = interrupt_window();
    check_eq!(PMIS.load(Ordering::SeqCst), 2);
    check_eq!(LAST_RIP.load(Ordering::SeqCst), window);
    check!(!with_apic(|apic| apic.pending(vector.get())));
    Ok(())
}

/// A PMU model's PMI line through `hobby::pmi`: delivered as the LVT vector,
/// leaving the entry masked as a NetBurst APIC does; dropped while masked.
fn model_pmi_masks_the_entry_and_interrupts() -> Outcome {
    let vector = programmed_vector()?;
    idt::set_handler(vector.get(), pmi_handler);
    PMIS.store(0, Ordering::SeqCst);
    check_eq!(with_apic(pmi::deliver), Delivery::Vector(PMI_VECTOR));
    let window = interrupt_window();
    check_eq!(PMIS.load(Ordering::SeqCst), 1);
    check_eq!(LAST_RIP.load(Ordering::SeqCst), window);
    let entry = with_apic(|apic| apic.perf_counter_entry());
    check!(
        entry.is_masked(),
        "entry {:#x} not masked by the PMI",
        entry.bits()
    );
    // Masked: the next PMI is dropped.
    check_eq!(with_apic(pmi::deliver), Delivery::Masked);
    interrupt_window();
    check_eq!(PMIS.load(Ordering::SeqCst), 1);
    // The handler's unmask re-arms it.
    with_apic(|apic| apic.set_perf_counter_entry(entry.unmasked()));
    check_eq!(with_apic(pmi::deliver), Delivery::Vector(PMI_VECTOR));
    interrupt_window();
    check_eq!(PMIS.load(Ordering::SeqCst), 2);
    Ok(())
}

static NMIS: AtomicU32 = AtomicU32::new(0);

fn nmi_handler(_: &InterruptFrame) {
    NMIS.fetch_add(1, Ordering::SeqCst);
}

/// With NMI delivery the PMI arrives even with interrupts disabled.
fn model_pmi_as_nmi() -> Outcome {
    idt::set_handler(2, nmi_handler);
    NMIS.store(0, Ordering::SeqCst);
    let delivered = with_apic(|apic| {
        apic.set_perf_counter_entry(LvtPerfCounter::new(PmiDelivery::Nmi));
        pmi::deliver(apic)
    });
    check_eq!(delivered, Delivery::Nmi);
    // Interrupts are still off here: only an NMI can have come through.
    for _ in 0..1000 {
        if NMIS.load(Ordering::SeqCst) != 0 {
            break;
        }
        core::hint::spin_loop();
    }
    check_eq!(NMIS.load(Ordering::SeqCst), 1);
    check!(with_apic(|apic| apic.perf_counter_entry()).is_masked());
    idt::clear_handler(2);
    Ok(())
}

static STUB_PMIS: AtomicU32 = AtomicU32::new(0);
static STUB_RIP: AtomicU64 = AtomicU64::new(0);
static STUB_CS: AtomicU64 = AtomicU64::new(0);

/// The handler behind the crate's stub: records the frame, and for a fixed
/// vector (not an NMI) sends the EOI, as a kernel's PMI handler does.
extern "C" fn on_stub(frame: &pmu::entry::PmiFrame) {
    STUB_RIP.store(frame.rip, Ordering::SeqCst);
    STUB_CS.store(frame.cs, Ordering::SeqCst);
    STUB_PMIS.fetch_add(1, Ordering::SeqCst);
    if !STUB_IS_NMI.load(Ordering::SeqCst) {
        APIC.get().expect("set in main").lock().0.eoi();
    }
}

static STUB_IS_NMI: AtomicBool = AtomicBool::new(false);

pmu::pmi_entry!(crate_stub => on_stub);

fn stub_address() -> x86_64::VirtAddr {
    x86_64::VirtAddr::new(crate_stub as *const () as u64)
}

/// `pmu::pmi_entry!` as the PMI vector's gate: the handler gets the
/// interrupted RIP and CS, every register survives (the window is asm that
/// would notice nothing else, so the registers are checked around it), and
/// the stub returns where the interrupt came.
fn crate_entry_stub_takes_a_vector_pmi() -> Outcome {
    let vector = programmed_vector()?;
    STUB_IS_NMI.store(false, Ordering::SeqCst);
    STUB_PMIS.store(0, Ordering::SeqCst);
    // SAFETY: the crate's stub handles a no-error-code vector and returns
    // with IRETQ; interrupts are off here, so the gate is not in use.
    check!(unsafe { idt::set_raw_gate(vector.get(), stub_address()) });
    let (window, kept) = window_keeping_registers(vector);
    // SAFETY: as above.
    unsafe { idt::restore_gate(vector.get()) };
    check_eq!(STUB_PMIS.load(Ordering::SeqCst), 1);
    check_eq!(STUB_RIP.load(Ordering::SeqCst), window);
    check_eq!(STUB_CS.load(Ordering::SeqCst) & 3, 0, "taken at CPL 0");
    check!(kept, "a caller-saved register changed across the interrupt");
    check!(!with_apic(|apic| apic.in_service(vector.get())), "EOI done");
    Ok(())
}

/// The same stub as the NMI gate, with the PMI delivered as an NMI.
fn crate_entry_stub_takes_an_nmi() -> Outcome {
    STUB_IS_NMI.store(true, Ordering::SeqCst);
    STUB_PMIS.store(0, Ordering::SeqCst);
    // SAFETY: no NMI is pending or can come before the LVT entry below asks
    // for one; the stub handles the NMI frame and returns with IRETQ.
    check!(unsafe { idt::set_raw_gate(2, stub_address()) });
    let delivered = with_apic(|apic| {
        apic.set_perf_counter_entry(LvtPerfCounter::new(PmiDelivery::Nmi));
        pmi::deliver(apic)
    });
    for _ in 0..1000 {
        if STUB_PMIS.load(Ordering::SeqCst) != 0 {
            break;
        }
        core::hint::spin_loop();
    }
    check_eq!(delivered, Delivery::Nmi);
    // Without the NMI taken it may still come: the gate stays the stub's.
    check_eq!(
        STUB_PMIS.load(Ordering::SeqCst),
        1,
        "taken with interrupts off"
    );
    // SAFETY: the one NMI has been taken and no other source of NMIs is
    // armed.
    unsafe { idt::restore_gate(2) };
    check_eq!(STUB_CS.load(Ordering::SeqCst) & 3, 0);
    Ok(())
}

/// A self-IPI and a one-instruction interrupt window, with known values in
/// the caller-saved registers the stub must preserve; returns the address
/// the interrupt must arrive at and whether every register kept its value.
fn window_keeping_registers(vector: Vector) -> (u64, bool) {
    with_apic(|apic| apic.self_ipi(vector));
    let window: u64;
    let same: u64;
    // SAFETY: interrupts are enabled for one instruction and disabled again;
    // the registers named are declared clobbered or as outputs.
    unsafe {
        core::arch::asm!(
            "mov rax, 0x1111",
            "mov rcx, 0x2222",
            "mov rdx, 0x3333",
            "mov rsi, 0x4444",
            "mov r8, 0x5555",
            "mov r9, 0x6666",
            "mov r10, 0x7777",
            "mov r11, 0x8888",
            "lea rdi, [rip + 2f]",
            "sti",
            "nop",
            "2:",
            "cli",
            "xor rax, 0x1111",
            "xor rcx, 0x2222",
            "xor rdx, 0x3333",
            "xor rsi, 0x4444",
            "xor r8, 0x5555",
            "xor r9, 0x6666",
            "xor r10, 0x7777",
            "xor r11, 0x8888",
            "or rax, rcx",
            "or rax, rdx",
            "or rax, rsi",
            "or rax, r8",
            "or rax, r9",
            "or rax, r10",
            "or rax, r11",
            out("rax") same,
            out("rdi") window,
            out("rcx") _,
            out("rdx") _,
            out("rsi") _,
            out("r8") _,
            out("r9") _,
            out("r10") _,
            out("r11") _,
        );
    }
    (window, same == 0)
}

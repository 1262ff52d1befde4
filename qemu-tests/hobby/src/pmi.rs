//! The performance-monitoring interrupt line of a PMU model, wired to the
//! real local APIC.
//!
//! QEMU's APIC has no PMU behind its LVT performance-counter entry, so a
//! kernel that runs a PMU model calls [`deliver`] when the model raises its
//! PMI line. It does what the APIC does on a NetBurst processor: nothing
//! while the entry is masked; otherwise it sets the mask bit and delivers the
//! entry's vector (or an NMI) to this CPU, so the driver's handler runs as a
//! real interrupt and must unmask the entry itself.

use pmu::apic::{LocalApic, PmiDelivery};
use pmu::model::netburst::{Event, LogicalProcessor, SharedModel};

/// The local APIC of the CPU this runs on (every CPU sees its own at the
/// same address). Safe here because the boot code maps the xAPIC page
/// identity-mapped uncacheable for every CPU, and each CPU uses the
/// handles of its own APIC one at a time (main code with interrupts off
/// while a handler might use its own).
pub fn local_apic() -> LocalApic {
    // SAFETY: see above: the boot code maps the default xAPIC page, QEMU's
    // CPUs are in xAPIC mode, and a handle is used on the CPU that made it.
    unsafe { LocalApic::new(core::ptr::NonNull::new(pmu::apic::DEFAULT_BASE as *mut u8).unwrap()) }
}

/// What [`deliver`] did with a PMI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Sent as the entry's fixed vector (pending until interrupts are on).
    Vector(u8),
    /// Sent as an NMI.
    Nmi,
    /// Dropped: the LVT entry is masked.
    Masked,
    /// Dropped: the entry holds a delivery mode a PMI cannot use.
    Invalid,
}

/// Raises one PMI through `apic`'s LVT performance-counter entry.
pub fn deliver(apic: &mut LocalApic) -> Delivery {
    let entry = apic.perf_counter_entry();
    if entry.is_masked() {
        return Delivery::Masked;
    }
    let Some(delivery) = entry.delivery() else {
        return Delivery::Invalid;
    };
    apic.set_perf_counter_entry(entry.masked());
    match delivery {
        PmiDelivery::Fixed(vector) => {
            apic.self_ipi(vector);
            Delivery::Vector(vector.get())
        }
        PmiDelivery::Nmi => {
            apic.self_nmi();
            Delivery::Nmi
        }
    }
}

/// Opens a one-instruction interrupt window (STI; NOP; CLI) and returns the
/// address a pending interrupt is taken at: the instruction after the STI
/// shadow, which is the RIP the handler sees.
pub fn interrupt_window() -> u64 {
    let rip: u64;
    // SAFETY: interrupts are enabled for one instruction and disabled again;
    // the interrupt entry stubs preserve every register.
    unsafe { core::arch::asm!("lea {w}, [rip + 2f]", "sti", "nop", "2:", "cli", w = out(reg) rip) };
    rip
}

/// Why [`inject`] stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InjectError {
    /// The model raised its PMI but the LVT entry was masked: the previous
    /// PMI's handler did not unmask it.
    Masked,
    /// The LVT entry holds a delivery mode a PMI cannot use.
    Invalid,
}

impl core::fmt::Display for InjectError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            InjectError::Masked => {
                "a PMI came with the LVT entry masked: the handler did not unmask it"
            }
            InjectError::Invalid => "the LVT entry holds a delivery mode a PMI cannot use",
        })
    }
}

/// Feeds `event` to `model` and delivers every PMI the model raises (for
/// either logical processor: this kernel has one CPU) through the local APIC
/// as soon as it is raised, before any further event counts
/// (with a one-instruction interrupt window for a fixed vector, so the
/// kernel's handler runs at once). Returns how many PMIs were delivered.
/// Call it with interrupts disabled; the kernel's handler must run
/// `handle_pmi` (which unmasks the entry) and, for a vector, send the EOI.
pub fn inject(model: &SharedModel, mut event: Event) -> Result<u64, InjectError> {
    let mut pmis = 0;
    while event.count > 0 {
        let got = model.inject_until_pmi(event);
        event.count -= got.injected;
        let line = model
            .take_pmi(LogicalProcessor::T0)
            .or_else(|| model.take_pmi(LogicalProcessor::T1));
        if got.pmi_pending && line.is_some() {
            match deliver(&mut local_apic()) {
                Delivery::Vector(_) => {
                    interrupt_window();
                }
                Delivery::Nmi => {}
                Delivery::Masked => return Err(InjectError::Masked),
                Delivery::Invalid => return Err(InjectError::Invalid),
            }
            pmis += 1;
        }
    }
    Ok(pmis)
}

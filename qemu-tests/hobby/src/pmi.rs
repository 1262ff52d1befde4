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

/// The boot CPU's local APIC. Safe here because a hobby kernel runs on one
/// CPU with the xAPIC page identity-mapped uncacheable by the boot code;
/// callers use the handles one at a time (main code with interrupts off
/// while a handler might use its own).
pub fn local_apic() -> LocalApic {
    // SAFETY: see above: the boot code maps the default xAPIC page, QEMU's
    // CPU is in xAPIC mode, and there is only this CPU.
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

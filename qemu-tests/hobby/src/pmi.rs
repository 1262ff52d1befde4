//! The performance-monitoring interrupt line of a PMU model, wired to the
//! real local APIC.
//!
//! QEMU's APIC has no PMU behind its LVT performance-counter entry, so a
//! kernel that runs a PMU model calls [`deliver`] when the model raises its
//! PMI line. It does what the APIC does on a NetBurst processor (and on
//! every processor with the architectural PMU): nothing while the entry is
//! masked; otherwise it sets the mask bit and delivers the entry's vector
//! (or an NMI) to this CPU, so the driver's handler runs as a real
//! interrupt and must unmask the entry itself. [`inject`] feeds events to
//! a shared model ([`ModelPmiLine`]: the NetBurst or the architectural-PMU
//! model) and delivers each PMI it raises.

use pmu::apic::{LocalApic, ModelPmi};
use pmu::model::archperf::{self, SharedArchPerfModel};
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

/// Raises one PMI through `apic`'s LVT performance-counter entry: the
/// crate's [`pmu::apic::deliver_model_pmi`] on the xAPIC (which cannot
/// fail), its vector as a number.
pub fn deliver(apic: &mut LocalApic) -> Delivery {
    let Ok(delivered) = pmu::apic::deliver_model_pmi(apic);
    match delivered {
        ModelPmi::Vector(vector) => Delivery::Vector(vector.get()),
        ModelPmi::Nmi => Delivery::Nmi,
        ModelPmi::Masked => Delivery::Masked,
        ModelPmi::Invalid => Delivery::Invalid,
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
    /// The PMI was sent, but its handler did not run (or did not unmask the
    /// entry) within [`WAIT_SPINS`] reads of the entry.
    NotHandled,
}

impl core::fmt::Display for InjectError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            InjectError::Masked => {
                "a PMI came with the LVT entry masked: the handler did not unmask it"
            }
            InjectError::Invalid => "the LVT entry holds a delivery mode a PMI cannot use",
            InjectError::NotHandled => {
                "a PMI was sent, but the LVT entry stayed masked: its handler did not run, or did not unmask it"
            }
        })
    }
}

/// How many times [`wait_for_handler`] reads the LVT entry at most: the
/// PMI comes at the first instruction boundary where it can under TCG, and
/// at the first VM exit (the first read) under KVM; the bound only keeps a
/// handler that never runs (or never unmasks the entry) from hanging the
/// run. Each read costs about 0.2 µs under TCG and a VM exit under KVM
/// (75 µs on a nested host): a failure is reported after 20 ms to 8 s.
pub const WAIT_SPINS: u32 = 100_000;

// The bounded waits for a PMI's handler (`wait_for_handler`): read the LVT
// performance-counter entry (its address in RDI) until its mask bit (16) is
// clear, at most ESI times; return the reads left in EAX. The first opens
// interrupts around the loop, between two exported labels, so that the
// RIP a fixed-vector PMI interrupts is known to lie in that range; the
// second leaves interrupts as they are (for an NMI). Clobber only RAX, RSI
// and the flags.
core::arch::global_asm!(
    r#"
    .section .text.hobby_pmi_wait, "ax"
    .balign 16
    .global hobby_pmi_wait_interrupt
    .type hobby_pmi_wait_interrupt, @function
hobby_pmi_wait_interrupt:
    sti
    .global hobby_pmi_wait_window_start
hobby_pmi_wait_window_start:
1:
    mov eax, dword ptr [rdi]
    test eax, 0x10000
    jz 2f
    dec esi
    jnz 1b
2:
    .global hobby_pmi_wait_window_end
hobby_pmi_wait_window_end:
    cli
    mov eax, esi
    ret
    .size hobby_pmi_wait_interrupt, . - hobby_pmi_wait_interrupt

    .balign 16
    .global hobby_pmi_wait_nmi
    .type hobby_pmi_wait_nmi, @function
hobby_pmi_wait_nmi:
1:
    mov eax, dword ptr [rdi]
    test eax, 0x10000
    jz 2f
    dec esi
    jnz 1b
2:
    mov eax, esi
    ret
    .size hobby_pmi_wait_nmi, . - hobby_pmi_wait_nmi
    .text
"#
);

unsafe extern "C" {
    /// Enables interrupts, reads the LVT entry at `lvt` until unmasked or
    /// `spins` times, disables interrupts; returns the reads left.
    fn hobby_pmi_wait_interrupt(lvt: *const u32, spins: u32) -> u32;
    /// The same, with interrupts left as they are.
    fn hobby_pmi_wait_nmi(lvt: *const u32, spins: u32) -> u32;
    fn hobby_pmi_wait_window_start();
    fn hobby_pmi_wait_window_end();
}

/// The LVT performance-counter register of the local APIC (xAPIC, offset
/// 340H; SDM Vol. 3A "Local Vector Table").
const LVT_PERF_COUNTER: u64 = pmu::apic::DEFAULT_BASE + 0x340;

/// The addresses a fixed-vector PMI that [`wait_for_handler`] lets in can
/// interrupt: from the first read of its loop to the CLI after it,
/// inclusive. A handler that runs there sees a RIP in this range (under
/// TCG, always the same one: the instruction after the STI shadow's).
pub fn wait_window() -> core::ops::RangeInclusive<u64> {
    let start = hobby_pmi_wait_window_start as *const () as u64;
    let end = hobby_pmi_wait_window_end as *const () as u64;
    start..=end
}

/// Waits, boundedly ([`WAIT_SPINS`] reads), until the handler of a PMI just
/// [`deliver`]ed has run, which it shows by unmasking the LVT entry: with
/// interrupts enabled for a fixed vector (the handler then interrupts an
/// instruction of [`wait_window`]), with interrupts left disabled for an
/// NMI. Returns whether the entry is unmasked. Unlike [`interrupt_window`],
/// it does not depend on when the accelerator delivers the interrupt (KVM
/// may deliver a self-IPI later than the one-instruction window).
pub fn wait_for_handler(nmi: bool) -> bool {
    let lvt = LVT_PERF_COUNTER as usize as *const u32;
    // SAFETY: `lvt` is the LVT register of this CPU's local APIC, in the
    // xAPIC page the boot code maps identity, uncached (see `local_apic`);
    // the routines only read it, and the first enables interrupts for the
    // length of its loop only (the kernel's handlers, its interrupt entry
    // stubs preserving every register, may run there).
    unsafe {
        if nmi {
            hobby_pmi_wait_nmi(lvt, WAIT_SPINS);
        } else {
            hobby_pmi_wait_interrupt(lvt, WAIT_SPINS);
        }
    }
    !local_apic().perf_counter_entry().is_masked()
}

/// A shared PMU model whose PMI line [`inject`] serves.
pub trait ModelPmiLine {
    /// The events the model takes (each with a count of occurrences).
    type Event: Copy;

    /// How many occurrences `event` still has.
    fn count(event: &Self::Event) -> u64;

    /// `event` with `count` occurrences.
    fn with_count(event: Self::Event, count: u64) -> Self::Event;

    /// Injects occurrences of `event` up to the one that raises the PMI
    /// line; returns how many were injected and whether the line is
    /// pending.
    fn inject_until_pmi(&self, event: Self::Event) -> (u64, bool);

    /// Takes the PMI line (of any logical processor the model has: the
    /// kernel has one CPU): whether one was pending.
    fn take_pmi(&self) -> bool;
}

impl ModelPmiLine for SharedModel {
    type Event = Event;

    fn count(event: &Event) -> u64 {
        event.count
    }

    fn with_count(event: Event, count: u64) -> Event {
        Event { count, ..event }
    }

    fn inject_until_pmi(&self, event: Event) -> (u64, bool) {
        let got = SharedModel::inject_until_pmi(self, event);
        (got.injected, got.pmi_pending)
    }

    fn take_pmi(&self) -> bool {
        SharedModel::take_pmi(self, LogicalProcessor::T0)
            .or_else(|| SharedModel::take_pmi(self, LogicalProcessor::T1))
            .is_some()
    }
}

impl ModelPmiLine for SharedArchPerfModel {
    type Event = archperf::Event;

    fn count(event: &archperf::Event) -> u64 {
        event.count
    }

    fn with_count(event: archperf::Event, count: u64) -> archperf::Event {
        event.times(count)
    }

    fn inject_until_pmi(&self, event: archperf::Event) -> (u64, bool) {
        let got = SharedArchPerfModel::inject_until_pmi(self, event);
        (got.injected, got.pmi_pending)
    }

    fn take_pmi(&self) -> bool {
        SharedArchPerfModel::take_pmi(self)
    }
}

/// Feeds `event` to `model` and delivers every PMI the model raises through
/// the local APIC as soon as it is raised, before any further event counts,
/// and waits (boundedly: [`wait_for_handler`]) until the kernel's handler
/// has run: a fixed vector interrupts an instruction of [`wait_window`], an
/// NMI is taken with interrupts disabled; either way the model is not
/// touched again while the handler may still use it. Returns how many PMIs
/// were delivered. Call it with interrupts disabled; the kernel's handler
/// must run `handle_pmi` (which unmasks the entry) and, for a vector, send
/// the EOI.
pub fn inject<M: ModelPmiLine>(model: &M, event: M::Event) -> Result<u64, InjectError> {
    let mut pmis = 0;
    let mut left = M::count(&event);
    while left > 0 {
        let (injected, pending) = model.inject_until_pmi(M::with_count(event, left));
        left -= injected.min(left);
        if pending && model.take_pmi() {
            let handled = match deliver(&mut local_apic()) {
                Delivery::Vector(_) => wait_for_handler(false),
                Delivery::Nmi => wait_for_handler(true),
                Delivery::Masked => return Err(InjectError::Masked),
                Delivery::Invalid => return Err(InjectError::Invalid),
            };
            if !handled {
                return Err(InjectError::NotHandled);
            }
            pmis += 1;
        } else if injected == 0 {
            // Nothing injected and no PMI taken: a line pending that
            // nobody took (cannot happen with `take_pmi` above, but never
            // spin on it).
            break;
        }
    }
    Ok(pmis)
}

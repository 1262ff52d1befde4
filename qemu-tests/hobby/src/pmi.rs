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
//!
//! A real CPU takes a self-IPI (or any interrupt) some instructions after
//! the write that sends it, not at the next instruction boundary as TCG
//! does: under KVM the hypervisor delivers it at a VM entry of its
//! choosing. So a kernel waits for an interrupt it sent the way real code
//! must: boundedly, with interrupts enabled over a known loop
//! ([`wait_for_interrupt`], [`wait_for_handler`], [`wait_until_pending`],
//! [`wait_until_taken`]; [`wait_window`] is the loop's address range, where
//! the interrupted RIP lies), failing clearly after [`WAIT_CYCLES`] rather
//! than hanging.

use pmu::apic::{ModelPmi, PmiApic};
use pmu::model::archperf::{self, SharedArchPerfModel};
use pmu::model::netburst::{Event, LogicalProcessor, SharedNetBurstModel};

use crate::apic::Register;
/// The local APIC of the CPU this runs on, in the kernel's mode (xAPIC, or
/// x2APIC after [`crate::apic::enter_x2apic`]): see [`crate::apic`].
pub use crate::apic::local_apic;

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

/// Raises one PMI through `apic`'s LVT performance-counter entry, in
/// either APIC mode: the crate's [`pmu::apic::deliver_model_pmi`] on an
/// APIC whose register accesses cannot fail (the crate's [`LocalApic`],
/// its [`X2Apic`] on the hardware's MSRs, this library's
/// [`crate::apic::Apic`]), its vector as a number.
///
/// [`LocalApic`]: pmu::apic::LocalApic
/// [`X2Apic`]: pmu::apic::x2apic::X2Apic
pub fn deliver<A: PmiApic<Error = core::convert::Infallible> + ?Sized>(apic: &mut A) -> Delivery {
    let Ok(delivered) = pmu::apic::deliver_model_pmi(apic);
    match delivered {
        ModelPmi::Vector(vector) => Delivery::Vector(vector.get()),
        ModelPmi::Nmi => Delivery::Nmi,
        ModelPmi::Masked => Delivery::Masked,
        ModelPmi::Invalid => Delivery::Invalid,
    }
}

/// Opens a one-instruction interrupt window (STI; NOP; CLI) and returns the
/// address an interrupt already deliverable is taken at under TCG: the
/// instruction after the STI shadow. It is no way to wait for an interrupt:
/// on a real CPU (KVM) an IPI or PMI arrives some instructions later, so a
/// case that expects an interrupt waits for it with [`wait_for_interrupt`]
/// or [`wait_for_handler`]. It remains for the negative checks: letting in
/// whatever is already deliverable where nothing must be.
pub fn interrupt_window() -> u64 {
    let rip: u64;
    // SAFETY: interrupts are enabled for one instruction and disabled again;
    // the interrupt entry stubs preserve every register.
    unsafe { core::arch::asm!("lea {w}, [rip + 2f]", "sti", "nop", "2:", "cli", w = out(reg) rip) };
    rip
}

/// Why [`inject`] stopped: [`PmiError`]'s `Masked`, `Invalid` or
/// `NotHandled`, whose messages say what was observed (an entry never
/// programmed, one masked since a handler unmasked it, a PMI sent whose
/// handler did not unmask the entry).
pub use crate::pmi_error::{InjectError, PmiError, Waited};

pub use crate::pmi_error::WAIT_CYCLES;

// The bounded waits: read a 32-bit word until (word XOR ESI) AND EDX is
// not zero, or RCX TSC cycles have passed (the TSC is read every 256
// reads: under KVM RDTSC may cost a VM exit); return that value in EAX (0:
// timed out). The word is the memory at RDI, or (the `_msr` routines, for
// an x2APIC register) the low half of the MSR numbered EDI. The
// `_interrupt` routines open interrupts around their loops, both of them
// between two exported labels, so that the RIP an interrupt taken there
// interrupts is known to lie in that range; the others leave interrupts
// as they are (for an NMI). Clobber only RAX, RCX, RDX, R8-R11 and the
// flags.
core::arch::global_asm!(
    r#"
    .macro HOBBY_WAIT_LOOP msr
1:
    mov r11d, 256
2:
    .if \msr
    mov ecx, edi
    rdmsr
    .else
    mov eax, dword ptr [rdi]
    .endif
    xor eax, esi
    test eax, r9d
    jnz 3f
    dec r11d
    jnz 2b
    rdtsc
    shl rdx, 32
    or rax, rdx
    sub rax, r8
    cmp rax, r10
    jb 1b
    xor eax, eax
3:
    .endm

    .macro HOBBY_WAIT_START
    mov r9d, edx
    mov r10, rcx
    rdtsc
    shl rdx, 32
    or rax, rdx
    mov r8, rax
    .endm

    .section .text.hobby_pmi_wait, "ax"
    .balign 16
    .global hobby_pmi_wait_interrupt
    .type hobby_pmi_wait_interrupt, @function
hobby_pmi_wait_interrupt:
    HOBBY_WAIT_START
    sti
    .global hobby_pmi_wait_window_start
hobby_pmi_wait_window_start:
    HOBBY_WAIT_LOOP 0
    cli
    ret
    .size hobby_pmi_wait_interrupt, . - hobby_pmi_wait_interrupt

    .global hobby_pmi_wait_msr_interrupt
    .type hobby_pmi_wait_msr_interrupt, @function
hobby_pmi_wait_msr_interrupt:
    HOBBY_WAIT_START
    sti
    HOBBY_WAIT_LOOP 1
    .global hobby_pmi_wait_window_end
hobby_pmi_wait_window_end:
    cli
    ret
    .size hobby_pmi_wait_msr_interrupt, . - hobby_pmi_wait_msr_interrupt

    .balign 16
    .global hobby_pmi_wait_nmi
    .type hobby_pmi_wait_nmi, @function
hobby_pmi_wait_nmi:
    HOBBY_WAIT_START
    HOBBY_WAIT_LOOP 0
    ret
    .size hobby_pmi_wait_nmi, . - hobby_pmi_wait_nmi

    .global hobby_pmi_wait_msr_nmi
    .type hobby_pmi_wait_msr_nmi, @function
hobby_pmi_wait_msr_nmi:
    HOBBY_WAIT_START
    HOBBY_WAIT_LOOP 1
    ret
    .size hobby_pmi_wait_msr_nmi, . - hobby_pmi_wait_msr_nmi
    .purgem HOBBY_WAIT_LOOP
    .purgem HOBBY_WAIT_START
    .text
"#
);

unsafe extern "C" {
    /// Enables interrupts, reads the word at `word` until `(value ^ xor) &
    /// mask != 0` or `cycles` TSC cycles have passed, disables interrupts;
    /// returns `value ^ xor` (non-zero) or 0 on the timeout.
    fn hobby_pmi_wait_interrupt(word: *const u32, xor: u32, mask: u32, cycles: u64) -> u32;
    /// The same, reading the low half of MSR `msr`.
    fn hobby_pmi_wait_msr_interrupt(msr: u32, xor: u32, mask: u32, cycles: u64) -> u32;
    /// The first, with interrupts left as they are.
    fn hobby_pmi_wait_nmi(word: *const u32, xor: u32, mask: u32, cycles: u64) -> u32;
    /// The second, with interrupts left as they are.
    fn hobby_pmi_wait_msr_nmi(msr: u32, xor: u32, mask: u32, cycles: u64) -> u32;
    fn hobby_pmi_wait_window_start();
    fn hobby_pmi_wait_window_end();
}

/// The addresses an interrupt that a bounded wait with interrupts enabled
/// ([`wait_for_handler`], [`wait_for_interrupt`], [`wait_until_pending`],
/// [`wait_until_taken`], and [`inject`] through them) lets in can
/// interrupt: from the first instruction of the memory-reading loop to the
/// CLI after the x2APIC-register (RDMSR) loop, which follows it, inclusive
/// (the instructions between the two run with interrupts disabled). A
/// handler that runs there sees a RIP in this range (under
/// TCG, always the same one: the instruction after the STI shadow's; under
/// KVM wherever the hypervisor delivers it).
pub fn wait_window() -> core::ops::RangeInclusive<u64> {
    let start = hobby_pmi_wait_window_start as *const () as u64;
    let end = hobby_pmi_wait_window_end as *const () as u64;
    start..=end
}

/// How a bounded wait lets the interrupt it waits for in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taken {
    /// A fixed vector: interrupts are enabled for the wait (its loop is
    /// [`wait_window`]) and disabled again after it.
    Vector,
    /// An NMI: interrupts are left as they are (disabled, in the cases).
    Nmi,
}

/// Reads the 32-bit word `word` (memory, or an x2APIC MSR) until `(value ^
/// xor) & mask != 0`, at most [`WAIT_CYCLES`]; returns whether that held.
///
/// # Safety
///
/// A [`Register::Mmio`] word must be valid for 32-bit reads for the whole
/// wait (a word of memory that handlers may change, or a register of this
/// CPU's xAPIC page); a [`Register::Msr`] must be an x2APIC register that
/// can be read, with the CPU in x2APIC mode; for [`Taken::Vector`] the
/// caller must be ready for any interrupt handler of this kernel to run
/// inside the wait.
unsafe fn wait(word: Register, xor: u32, mask: u32, taken: Taken) -> bool {
    // SAFETY: the caller's promises; the routines only read `word` and
    // the TSC, and the `_interrupt` ones enable interrupts for the length
    // of their loop only (the kernel's handlers, their entry stubs
    // preserving every register, may run there). An aligned 32-bit read
    // is atomic on x86-64, as a relaxed atomic load of the word; RDMSR of
    // an x2APIC register has no side effect.
    let value = unsafe {
        match (word, taken) {
            (Register::Mmio(w), Taken::Vector) => {
                hobby_pmi_wait_interrupt(w, xor, mask, WAIT_CYCLES)
            }
            (Register::Mmio(w), Taken::Nmi) => hobby_pmi_wait_nmi(w, xor, mask, WAIT_CYCLES),
            (Register::Msr(m), Taken::Vector) => {
                hobby_pmi_wait_msr_interrupt(m, xor, mask, WAIT_CYCLES)
            }
            (Register::Msr(m), Taken::Nmi) => hobby_pmi_wait_msr_nmi(m, xor, mask, WAIT_CYCLES),
        }
    };
    value & mask != 0
}

/// Waits, boundedly ([`WAIT_CYCLES`]), until the handler of a PMI just
/// [`deliver`]ed has run, which it shows by unmasking the LVT entry: with
/// interrupts enabled for a fixed vector (the handler then interrupts an
/// instruction of [`wait_window`]), with interrupts left disabled for an
/// NMI. Returns whether the entry is unmasked. Unlike [`interrupt_window`],
/// it does not depend on when the CPU takes the interrupt (KVM may deliver
/// a self-IPI many instructions later).
pub fn wait_for_handler(nmi: bool) -> bool {
    let taken = if nmi { Taken::Nmi } else { Taken::Vector };
    let register = crate::apic::lvt_perf_counter_register();
    // SAFETY: the LVT register of this CPU's local APIC in the kernel's
    // mode: in the xAPIC page the boot code maps identity, uncached (see
    // `local_apic`), or its x2APIC MSR; waiting for the mask bit (16) to
    // clear: the value XOR all ones has it set.
    let unmasked = unsafe { wait(register, !0, 1 << 16, taken) };
    unmasked && !local_apic().perf_counter_entry().is_masked()
}

/// A counter that interrupt handlers advance and a bounded wait watches
/// ([`wait_for_interrupt`]): its low 32 bits are read.
pub trait Watched: sealed::Sealed {
    /// The address of the counter's low 32 bits.
    #[doc(hidden)]
    fn low_word(&self) -> *const u32;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for core::sync::atomic::AtomicU32 {}
    impl Sealed for core::sync::atomic::AtomicU64 {}
}

impl Watched for core::sync::atomic::AtomicU32 {
    fn low_word(&self) -> *const u32 {
        self.as_ptr()
    }
}

impl Watched for core::sync::atomic::AtomicU64 {
    fn low_word(&self) -> *const u32 {
        // x86-64 is little-endian: the low half comes first.
        self.as_ptr().cast()
    }
}

/// Waits, boundedly ([`WAIT_CYCLES`]), until an interrupt handler has
/// moved `counter` off `seen` (compared in its low 32 bits), letting the
/// interrupt in as `taken` says: the way to wait for an IPI, a PMI or a
/// tick that was sent (a real CPU takes it some instructions later, TCG at
/// the next boundary). Returns whether the counter moved; call it with
/// interrupts disabled.
pub fn wait_for_interrupt<C: Watched>(counter: &C, seen: u64, taken: Taken) -> bool {
    // SAFETY: the counter is a live atomic for the whole call; its low
    // word differs from `seen`'s when the XOR is not zero.
    unsafe { wait(Register::Mmio(counter.low_word()), seen as u32, !0, taken) }
}

/// Waits, boundedly ([`WAIT_CYCLES`]) and with interrupts enabled over
/// [`wait_window`], until `vector` is pending in this CPU's IRR: for a
/// case that shows an interrupt the APIC must hold back (an equal-priority
/// one still in service) stays pending while the CPU could take it.
/// Returns whether it is pending; call it with interrupts disabled.
pub fn wait_until_pending(vector: u8) -> bool {
    let (register, bit) = crate::apic::irr_register(vector);
    // SAFETY: an IRR register of this CPU's APIC in the kernel's mode (see
    // `wait_for_handler`); the bit set is the condition.
    unsafe { wait(register, 0, bit, Taken::Vector) }
}

/// Waits, boundedly ([`WAIT_CYCLES`]) and with interrupts enabled over
/// [`wait_window`], until `vector` is no longer pending in this CPU's IRR:
/// its handler has been entered (at once when it was not pending). For
/// taking an interrupt that may be pending when its source stops (a timer
/// tick that expired before the stop). Returns whether it was taken; call
/// it with interrupts disabled.
pub fn wait_until_taken(vector: u8) -> bool {
    let (register, bit) = crate::apic::irr_register(vector);
    // SAFETY: as in `wait_until_pending`; the bit clear is the condition.
    unsafe { wait(register, !0, bit, Taken::Vector) }
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

impl ModelPmiLine for SharedNetBurstModel {
    type Event = Event;

    fn count(event: &Event) -> u64 {
        event.count
    }

    fn with_count(event: Event, count: u64) -> Event {
        Event { count, ..event }
    }

    fn inject_until_pmi(&self, event: Event) -> (u64, bool) {
        let got = SharedNetBurstModel::inject_until_pmi(self, event);
        (got.injected, got.pmi_pending)
    }

    fn take_pmi(&self) -> bool {
        SharedNetBurstModel::take_pmi(self, LogicalProcessor::T0)
            .or_else(|| SharedNetBurstModel::take_pmi(self, LogicalProcessor::T1))
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

/// Raises one PMI through this CPU's LVT performance-counter entry
/// ([`deliver`]) and waits, boundedly, until its handler has unmasked the
/// entry ([`wait_for_handler`]: interrupts enabled over [`wait_window`] for
/// a fixed vector, left disabled for an NMI). `handled` is how many PMIs
/// of the same run were delivered and handled before this one, for the
/// error's message ([`PmiError`]), which says what was seen: the entry
/// masked (never programmed, or masked since a handler unmasked it), a
/// delivery a PMI cannot use, or a PMI sent whose entry stayed masked.
/// Call it with interrupts disabled.
pub fn deliver_and_wait(handled: u64) -> Result<(), PmiError> {
    let (vector, nmi) = match deliver(&mut local_apic()) {
        Delivery::Vector(v) => (Some(v), false),
        Delivery::Nmi => (None, true),
        Delivery::Masked => {
            let entry = local_apic().perf_counter_entry();
            return Err(PmiError::Masked { entry, handled });
        }
        Delivery::Invalid => {
            let entry = local_apic().perf_counter_entry();
            return Err(PmiError::Invalid { entry });
        }
    };
    if wait_for_handler(nmi) {
        Ok(())
    } else {
        Err(PmiError::NotHandled {
            vector,
            pmi: handled + 1,
            waited: Waited::Cycles(WAIT_CYCLES),
        })
    }
}

/// Feeds `event` to `model` and delivers every PMI the model raises through
/// the local APIC as soon as it is raised, before any further event counts,
/// and waits (boundedly: [`wait_for_handler`]) until the kernel's handler
/// has run: a fixed vector interrupts an instruction of [`wait_window`], an
/// NMI is taken with interrupts disabled; either way the model is not
/// touched again while the handler may still use it. Returns how many PMIs
/// were delivered. Call it with interrupts disabled; the kernel's handler
/// must run `pmu::arch::handle_pmi` (which unmasks the entry) and, for a
/// vector, send the EOI.
pub fn inject<M: ModelPmiLine>(model: &M, event: M::Event) -> Result<u64, InjectError> {
    let mut pmis = 0;
    let mut left = M::count(&event);
    while left > 0 {
        let (injected, pending) = model.inject_until_pmi(M::with_count(event, left));
        left -= injected.min(left);
        if pending && model.take_pmi() {
            deliver_and_wait(pmis)?;
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

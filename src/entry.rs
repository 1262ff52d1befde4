//! The PMI's interrupt entry, on stable Rust: [`pmi_entry!`](crate::pmi_entry)
//! defines the stub an IDT gate points at, so a kernel needs no assembly of
//! its own to take PMIs, delivered as a fixed vector or as an NMI.
//!
//! The stub saves the interrupted RBP beside the frame the CPU pushed (so
//! that the handler can walk the interrupted code's frame pointers:
//! [`crate::sampling::CallChain`]) and the registers the x86-64 System V
//! ABI lets a called function clobber (RAX, RCX, RDX, RSI, RDI, R8-R11),
//! calls the kernel's handler (through a function the macro generates, so
//! the handler must be a function) with a reference to the [`PmiFrame`] (the
//! interrupted RIP is `frame.rip`, the sample's address), restores the
//! registers and returns with `IRETQ`. On 64-bit entry the CPU aligns RSP to
//! 16 bytes before pushing its 5-word frame (SDM Vol. 3A 6.14.2); the stub
//! pushes 10 words and pads one more, so the stack is 16-byte aligned at the
//! call, as the ABI wants. Neither a PMI vector nor an NMI pushes an error
//! code, so one stub serves both.
//!
//! What the stub does not do, because it belongs to the handler: send the
//! APIC its end-of-interrupt for a fixed vector (an NMI has none), and
//! unmask the LVT performance-counter entry (NetBurst masks it on delivery;
//! [`crate::arch::handle_pmi`] writes it back). It saves no
//! SSE/x87 state: `x86_64-unknown-none` code is soft-float; a kernel that
//! enables SSE in its handlers must save that state itself.
//!
//! # Examples
//!
//! ```
//! use pmu::entry::PmiFrame;
//!
//! extern "C" fn on_pmi(frame: &PmiFrame) {
//!     // pmu::arch::handle_pmi(..., frame.rip, ...), then EOI for a fixed vector
//!     let _ = frame.rip;
//! }
//!
//! pmu::pmi_entry!(pub pmi_stub => on_pmi);
//! let _stub: unsafe extern "C" fn() = pmi_stub;
//! ```
//!
//! In the kernel, point the IDT gate of the PMI vector (or vector 2, NMI)
//! at the stub; with the `x86_64` crate's IDT, through a pointer (a
//! function cast straight to an integer warns, `function_casts_as_integer`):
//!
//! ```no_run
//! # extern "C" fn on_pmi(_: &pmu::entry::PmiFrame) {}
//! # pmu::pmi_entry!(pmi_stub => on_pmi);
//! use x86_64::VirtAddr;
//! use x86_64::structures::idt::InterruptDescriptorTable;
//!
//! const PMI_VECTOR: u8 = 0xF0;
//! let idt: &'static mut InterruptDescriptorTable =
//!     Box::leak(Box::new(InterruptDescriptorTable::new()));
//! // SAFETY: `pmi_stub` is an interrupt entry (it saves every register and
//! // returns with IRETQ), and the IDT lives for the rest of the run.
//! unsafe { idt[PMI_VECTOR].set_handler_addr(VirtAddr::from_ptr(pmi_stub as *const ())) };
//! idt.load();
//! ```

/// The interrupted RBP, which [`pmi_entry!`](crate::pmi_entry)'s stub saves
/// just below the CPU's frame, then the frame the CPU pushes when it
/// delivers an interrupt in 64-bit mode without an error code (SDM Vol. 3A
/// 6.14.2, "64-Bit Mode Stack Frame"), lowest address first.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PmiFrame {
    /// The interrupted RBP: the interrupted code's frame pointer, where
    /// [`crate::sampling::CallChain::walk`] starts (code built with frame
    /// pointers; otherwise whatever the code kept in RBP).
    pub rbp: u64,
    /// The interrupted instruction pointer: where the sample was taken.
    pub rip: u64,
    /// The interrupted code segment (its low 2 bits are the CPL).
    pub cs: u64,
    /// The interrupted RFLAGS.
    pub rflags: u64,
    /// The interrupted stack pointer.
    pub rsp: u64,
    /// The interrupted stack segment.
    pub ss: u64,
}

impl PmiFrame {
    /// The privilege level the interrupted code ran at (CS bits 1:0).
    pub const fn cpl(&self) -> u8 {
        (self.cs & 3) as u8
    }
}

/// Defines an interrupt entry stub, `unsafe extern "C" fn $name()`, for a
/// PMI delivered by vector or as an NMI: it saves the interrupted RBP and
/// the caller-saved registers, calls a function the macro generates, which
/// calls `$handler(&PmiFrame)`, restores the registers and returns with
/// `IRETQ`. See [`crate::entry`] for what the stub does and does not do.
///
/// `$handler` is the path of a function, `extern "C" fn(&pmu::entry::PmiFrame)`.
/// Anything else does not compile: a value of another type is a type
/// error, and a `static` or `const` that holds a function pointer is
/// refused with "`pmi_entry!`'s handler must name a function": the stub's
/// `call` names the generated function, never a value, so it cannot jump
/// into data.
///
/// It saves no XMM or x87 register: a handler (and everything it calls) must
/// not use SSE, as on `x86_64-unknown-none`, whose code is soft-float. On a
/// target with SSE code generation, save that state around the handler
/// yourself (FXSAVE/XSAVE), or the interrupted code's XMM registers may
/// change under it.
///
/// The stub is only for an IDT gate: calling it as a function is undefined
/// behaviour (it ends with `IRETQ`), which is why it is `unsafe`.
#[macro_export]
macro_rules! pmi_entry {
    ($vis:vis $name:ident => $handler:path) => {
        const _: extern "C" fn(&$crate::entry::PmiFrame) = $handler;
        const _: () = $crate::entry::handler_is_a_function(&$handler);

        /// PMI entry stub (from `pmu::pmi_entry!`): for an IDT gate only.
        #[unsafe(naked)]
        $vis unsafe extern "C" fn $name() {
            /// The function the stub calls: the handler, by name.
            extern "C" fn call_handler(frame: &$crate::entry::PmiFrame) {
                $handler(frame)
            }
            ::core::arch::naked_asm!(
                // Beside the CPU's frame: PmiFrame::rbp.
                "push rbp",
                "push rax",
                "push rcx",
                "push rdx",
                "push rsi",
                "push rdi",
                "push r8",
                "push r9",
                "push r10",
                "push r11",
                // 10 words pushed on the CPU's 5 (aligned to 16 before
                // them): one more makes RSP 16-byte aligned at the call.
                "sub rsp, 8",
                // The PmiFrame starts at RBP's slot, above the pad and the
                // 9 caller-saved registers.
                "lea rdi, [rsp + 80]",
                "cld",
                "call {handler}",
                "add rsp, 8",
                "pop r11",
                "pop r10",
                "pop r9",
                "pop r8",
                "pop rdi",
                "pop rsi",
                "pop rdx",
                "pop rcx",
                "pop rax",
                // RBP is callee-saved: the handler left it as it was.
                "add rsp, 8",
                "iretq",
                handler = sym call_handler,
            )
        }
    };
}

/// [`pmi_entry!`](crate::pmi_entry)'s check that its handler names a function: a function
/// item is zero-sized (its type is the function itself), while a `static`
/// or `const` of function-pointer type holds an address.
#[doc(hidden)]
pub const fn handler_is_a_function<F>(_: &F) {
    assert!(
        size_of::<F>() == 0,
        "`pmi_entry!`'s handler must name a function: a static or constant that holds a function pointer is not one"
    );
}

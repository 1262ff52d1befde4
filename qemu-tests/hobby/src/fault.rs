//! Surviving a fault: run a closure so that an exception or a panic inside it
//! returns an error instead of ending the kernel.
//!
//! [`catch`] records the callee-saved registers and the stack pointer in a
//! `Catcher` and arms it. When an exception arrives with a catcher armed,
//! the IDT dispatcher rewrites the interrupt frame so that IRETQ "returns"
//! to `catch_landing` on the recorded stack, which restores the registers
//! and makes [`catch`] return the fault. A panic does the same through
//! `abandon`. The frames between are abandoned without running destructors,
//! which is why this is a test-harness tool and not a general mechanism: use it
//! around code that holds no locks and owns nothing that must be dropped.

use core::fmt;
use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};

use x86_64::instructions::segmentation::{CS, SS, Segment};

use crate::idt::{InterruptFrame, exception_name};

/// Why a caught closure did not return.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// A CPU exception.
    Exception {
        /// The vector (6 for #UD, 13 for #GP, ...).
        vector: u8,
        /// The error code the CPU pushed, or 0.
        error_code: u64,
        /// The faulting instruction.
        rip: u64,
    },
    /// A panic (its message was printed when it happened).
    Panic,
}

impl Fault {
    /// The exception vector, if this was an exception.
    pub fn vector(&self) -> Option<u8> {
        match *self {
            Self::Exception { vector, .. } => Some(vector),
            Self::Panic => None,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Exception {
                vector,
                error_code,
                rip,
            } => write!(
                f,
                "{} (vector {vector}, error code {error_code:#x}) at RIP {rip:#x}",
                exception_name(u64::from(vector))
            ),
            Self::Panic => f.write_str("panic"),
        }
    }
}

/// The state [`catch`] needs to resume after a fault. The register offsets
/// are used by the assembly below.
#[repr(C)]
struct Catcher {
    rbx: u64,
    rbp: u64,
    r12: u64,
    r13: u64,
    r14: u64,
    r15: u64,
    /// RSP at entry to `catch_trampoline`: it points at the return address.
    rsp: u64,
    fault: Option<Fault>,
}

/// The innermost armed catcher, or null.
static ARMED: AtomicPtr<Catcher> = AtomicPtr::new(ptr::null_mut());

/// Saves the callee-saved registers into `catcher` (RDI), arms it, and calls
/// `body(data)` (RSI, RDX). Returns 0 when `body` returns; returns 1, through
/// `catch_landing`, when a fault abandons it.
#[unsafe(naked)]
unsafe extern "C" fn catch_trampoline(
    catcher: *mut Catcher,
    body: unsafe extern "C" fn(*mut u8),
    data: *mut u8,
) -> u64 {
    core::arch::naked_asm!(
        "mov [rdi + 0], rbx",
        "mov [rdi + 8], rbp",
        "mov [rdi + 16], r12",
        "mov [rdi + 24], r13",
        "mov [rdi + 32], r14",
        "mov [rdi + 40], r15",
        "mov [rdi + 48], rsp",
        "mov [rip + {armed}], rdi",
        "push rdi", // keeps the stack 16-byte aligned for the call
        "mov rdi, rdx",
        "call rsi",
        "pop rdi",
        "xor eax, eax",
        "ret",
        armed = sym ARMED,
    )
}

/// Resumes a `catch_trampoline` whose body faulted: RDI holds the catcher and
/// RSP its recorded value, so `ret` returns from the trampoline.
#[unsafe(naked)]
unsafe extern "C" fn catch_landing() {
    core::arch::naked_asm!(
        "mov rbx, [rdi + 0]",
        "mov rbp, [rdi + 8]",
        "mov r12, [rdi + 16]",
        "mov r13, [rdi + 24]",
        "mov r14, [rdi + 32]",
        "mov r15, [rdi + 40]",
        "mov eax, 1",
        "ret",
    )
}

/// Switches to the catcher's stack and lands (used outside interrupts).
#[unsafe(naked)]
unsafe extern "C" fn jump_to_landing(catcher: *mut Catcher) -> ! {
    core::arch::naked_asm!(
        "mov rsp, [rdi + 48]",
        "jmp {landing}",
        landing = sym catch_landing,
    )
}

unsafe extern "C" fn call_body<F: FnMut()>(data: *mut u8) {
    // SAFETY: `catch` passes a pointer to its own `F`, alive for the call.
    unsafe { (*data.cast::<F>())() }
}

/// Runs `f`; an exception (other than NMI) or a panic inside it makes this
/// return `Err` instead of ending the kernel. Catches nest: the innermost wins.
///
/// # Safety
///
/// A fault or panic inside `f` abandons every frame between it and this
/// call, setjmp/longjmp-style: nothing in them is dropped and no lock they
/// hold is released. The caller guarantees that wherever `f` can fault or
/// panic, none of its frames holds a lock or a resource that others wait
/// for or that must be dropped for memory safety (a spin lock guard, a
/// borrowed `RefCell`, a half-written shared structure).
pub unsafe fn catch<R>(f: impl FnOnce() -> R) -> Result<R, Fault> {
    let mut f = Some(f);
    let mut result = None;
    let mut body = || result = f.take().map(|f| f());
    let mut catcher = Catcher {
        rbx: 0,
        rbp: 0,
        r12: 0,
        r13: 0,
        r14: 0,
        r15: 0,
        rsp: 0,
        fault: None,
    };
    let outer = ARMED.load(Ordering::Acquire);
    let entry = body_entry(&body);
    // SAFETY: the trampoline saves and restores every callee-saved register
    // and returns normally in both of its outcomes; `body` outlives the call.
    // `catcher` and `body` are passed by pointer, so the compiler assumes the
    // call may have changed them, as the fault path does.
    let faulted = unsafe { catch_trampoline(&raw mut catcher, entry, (&raw mut body).cast()) };
    // Disarm before anything else can fault.
    ARMED.store(outer, Ordering::Release);
    match (faulted, result) {
        (0, Some(value)) => Ok(value),
        _ => Err(catcher.fault.unwrap_or(Fault::Panic)),
    }
}

fn body_entry<F: FnMut()>(_: &F) -> unsafe extern "C" fn(*mut u8) {
    call_body::<F>
}

/// Called by the exception dispatcher: if a catcher is armed, makes the
/// interrupted context resume at its landing and returns true.
///
/// # Safety
///
/// `frame` is the saved frame of an exception taken on this CPU, about to
/// be returned to with IRETQ.
pub(crate) unsafe fn divert_to_catcher(frame: &mut InterruptFrame) -> bool {
    let catcher = ARMED.swap(ptr::null_mut(), Ordering::AcqRel);
    if catcher.is_null() {
        return false;
    }
    let fault = Fault::Exception {
        vector: frame.vector as u8,
        error_code: frame.error_code,
        rip: frame.rip,
    };
    // SAFETY: an armed catcher lives in the frame of a `catch` call that has
    // not returned yet (it disarms before returning). Its landing expects
    // exactly the catcher in RDI on the catcher's saved stack, and `catch`'s
    // contract allows abandoning the frames in between.
    unsafe {
        ptr::write_volatile(&raw mut (*catcher).fault, Some(fault));
        let rsp = (*catcher).rsp;
        frame.resume_at(catch_landing as *const () as u64, rsp, catcher as u64);
    }
    if frame.cs & 3 != 0 {
        // A fault in user code (`crate::user`): the landing is kernel code,
        // so IRETQ must go back to CPL 0 (this handler's code segment, and
        // the null stack segment an interrupt from CPL 3 loaded), as
        // `crate::user`'s exit does.
        frame.cs = u64::from(CS::get_reg().0);
        frame.ss = u64::from(SS::get_reg().0);
    }
    true
}

/// Called by the panic handler: lands in the innermost armed catcher, if any.
pub(crate) fn abandon() {
    let catcher = ARMED.swap(ptr::null_mut(), Ordering::AcqRel);
    if catcher.is_null() {
        return;
    }
    // SAFETY: as in `divert_to_catcher`; the panicking frames are abandoned,
    // which `catch`'s contract allows.
    unsafe {
        ptr::write_volatile(&raw mut (*catcher).fault, Some(Fault::Panic));
        jump_to_landing(catcher)
    }
}

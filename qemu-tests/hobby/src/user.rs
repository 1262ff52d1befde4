//! Running code at CPL 3 (ring 3), for tests of what traps there: a
//! function entered with IRETQ on a stack of its own, which returns to the
//! kernel by raising [`EXIT_VECTOR`] with its result in RAX.
//!
//! The boot code maps all memory user-accessible and the GDT has CPL-3
//! segments ([`crate::gdt::user_selectors`]); an interrupt or exception at
//! CPL 3 switches to the CPU's TSS.RSP0 stack, so the kernel's handlers
//! (and a hypervisor's frame handlers, [`crate::idt::set_frame_handler`])
//! run as usual and the interrupted user code resumes with IRETQ. User code
//! runs with interrupts disabled (RFLAGS.IF clear) unless [`run_with`] asks
//! otherwise. One user run at a time, on the boot CPU.

use core::sync::atomic::{AtomicU64, Ordering};

use x86_64::instructions::segmentation::{CS, SS, Segment};

use crate::idt::{self, InterruptFrame};

/// The vector user code raises (`int 0x81`) to return to the kernel, with
/// its result in RAX.
pub const EXIT_VECTOR: u8 = 0x81;

/// The kernel stack pointer `run` left, for the exit to resume on.
static KERNEL_RSP: AtomicU64 = AtomicU64::new(0);

core::arch::global_asm!(
    r#"
    .section .text.hobby_user, "ax"
    .global hobby_user_enter
/* hobby_user_enter(entry, arg, stack_top, cs, ss, rsp_slot), RFLAGS in
   r10 */
hobby_user_enter:
    push rbx
    push rbp
    push r12
    push r13
    push r14
    push r15
    mov [r9], rsp
    push r8             /* SS */
    push rdx            /* RSP */
    push r10            /* RFLAGS */
    push rcx            /* CS */
    push rdi            /* RIP */
    mov rdi, rsi        /* the argument */
    xor eax, eax
    xor ebx, ebx
    xor ebp, ebp
    iretq
    .global hobby_user_return
hobby_user_return:
    pop r15
    pop r14
    pop r13
    pop r12
    pop rbp
    pop rbx
    ret
    .text
"#
);

unsafe extern "C" {
    fn hobby_user_enter();
    fn hobby_user_return();
}

/// Why user code could not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UserError {
    /// The GDT has no user segments yet, or the IDT is not built.
    NotReady,
}

impl core::fmt::Display for UserError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("the GDT and IDT are not ready for CPL 3")
    }
}

/// The exit: back to `run`'s caller, at CPL 0, on the stack it left, with
/// RAX as the result.
fn on_exit(frame: &mut InterruptFrame) -> bool {
    if frame.cs & 3 != 3 {
        return false; // not from user code: nothing to return from
    }
    // SAFETY: a frame from CPL 3 during `run`, which is what the exit gate
    // is for.
    unsafe { return_to_kernel(frame) };
    true
}

/// Rewrites `frame`, an interrupt taken at CPL 3 during [`run`], to resume
/// `run`'s caller at CPL 0 with the frame's RAX as the result (what the
/// exit vector does; for a kernel that schedules several user contexts
/// and returns when the last one is done).
///
/// # Safety
///
/// `frame` was taken at CPL 3 while [`run`] (or [`run_with`]) is running
/// on this CPU; the user code is abandoned.
pub unsafe fn return_to_kernel(frame: &mut InterruptFrame) {
    let rsp = KERNEL_RSP.load(Ordering::SeqCst);
    // SAFETY: `hobby_user_return` pops what `hobby_user_enter` pushed on
    // the stack it recorded at `rsp` (its frame is still live: `run` has
    // not returned), then returns to `run` with RAX; the user code is
    // abandoned, which is what raising the exit vector asks for.
    unsafe { frame.resume_at(hobby_user_return as *const () as u64, rsp, frame.rdi) };
    frame.cs = u64::from(CS::get_reg().0);
    frame.ss = u64::from(SS::get_reg().0);
    frame.rflags = 0x2;
}

/// Runs `entry(arg)` at CPL 3 on `stack` until it raises [`EXIT_VECTOR`];
/// returns the RAX it raised it with.
///
/// # Safety
///
/// `entry` must be code that is safe to run at CPL 3 with `arg` and
/// `stack`, ends with `int 0x81` (it never returns), and nothing else uses
/// `stack` meanwhile.
pub unsafe fn run(
    entry: extern "C" fn(u64) -> !,
    arg: u64,
    stack: &mut [u8],
) -> Result<u64, UserError> {
    // SAFETY: the caller's contract.
    unsafe { run_with(entry, arg, stack, false) }
}

/// [`run`], with interrupts enabled at CPL 3 if `interrupts` (RFLAGS.IF),
/// so that a timer can preempt the user code.
///
/// # Safety
///
/// As for [`run`]; with `interrupts`, every interrupt that can come has a
/// handler.
pub unsafe fn run_with(
    entry: extern "C" fn(u64) -> !,
    arg: u64,
    stack: &mut [u8],
    interrupts: bool,
) -> Result<u64, UserError> {
    let (cs, ss) = crate::gdt::user_selectors().ok_or(UserError::NotReady)?;
    // SAFETY: `on_exit` only rewrites a frame that came from CPL 3 to
    // resume `run` as `hobby_user_enter` arranged; the gate is not in use
    // until user code runs.
    unsafe {
        idt::set_frame_handler(EXIT_VECTOR, on_exit);
        if !idt::allow_from_user(EXIT_VECTOR) {
            return Err(UserError::NotReady);
        }
    }
    let top = (stack.as_mut_ptr() as u64 + stack.len() as u64) & !0xF;
    let slot = KERNEL_RSP.as_ptr();
    let rflags: u64 = if interrupts { 0x202 } else { 0x2 };
    let result: u64;
    // SAFETY: the caller's contract; the selectors are the GDT's CPL-3
    // segments and the exit brings the CPU back here, to the instruction
    // after the call, with every callee-saved register restored by
    // `hobby_user_return` (the C ABI; RFLAGS goes in R10, which a call may
    // clobber).
    unsafe {
        core::arch::asm!(
            "call {enter}",
            enter = sym hobby_user_enter,
            in("rdi") entry as *const () as u64,
            in("rsi") arg,
            in("rdx") top,
            in("rcx") u64::from(cs.0),
            in("r8") u64::from(ss.0),
            in("r9") slot,
            in("r10") rflags,
            lateout("rax") result,
            clobber_abi("C"),
        );
    }
    Ok(result)
}

/// Returns from user code to the kernel with `value` (at CPL 3 only).
pub fn exit(value: u64) -> ! {
    // SAFETY: `int 0x81` is the exit gate `run` opened to CPL 3; it does
    // not come back.
    unsafe { core::arch::asm!("int 0x81", in("rax") value, options(noreturn)) }
}

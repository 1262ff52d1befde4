//! Running code at CPL 3 (ring 3), for tests of what traps there: a
//! function entered with IRETQ on a stack of its own, which returns to the
//! kernel through the gate ([`exit`]) with its result in RAX.
//!
//! The boot code maps all memory user-accessible and the GDT has CPL-3
//! segments ([`crate::gdt::user_selectors`]); an interrupt or exception at
//! CPL 3 switches to the CPU's TSS.RSP0 stack, so the kernel's handlers
//! (and a hypervisor's frame handlers, [`crate::idt::set_frame_handler`])
//! run as usual and the interrupted user code resumes with IRETQ. User code
//! runs with interrupts disabled (RFLAGS.IF clear) unless [`run_with`] asks
//! otherwise. One user run at a time, on the boot CPU.
//!
//! # The gate
//!
//! User code enters the kernel with [`call`]: HLT with a vector number in
//! RCX. HLT is privileged: at CPL 3 it raises #GP(0) (SDM Vol. 2A, HLT),
//! and [`run`]'s #GP handler runs the vector's frame handler
//! ([`crate::idt::set_frame_handler`]) as if user code had raised it with
//! `INT n`, RIP already after the HLT. [`EXIT_VECTOR`] returns to the
//! kernel. Any other #GP at CPL 3 goes to the handler of
//! [`set_gp_handler`] (a hypervisor emulating the instruction), then to the
//! kernel's fault handling. Not `INT n` through a DPL-3 gate, which the SDM
//! allows (Vol. 3A 6.12.1.1) but which a hypervisor need not deliver: the
//! project machine's KVM (`kvm_pvm`, 2026-11-26) raises #UD for `INT n` at
//! CPL 3 (INT3 aside), while it reflects every #GP.

use core::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use x86_64::instructions::segmentation::{CS, SS, Segment};

use crate::idt::{self, FrameHandler, InterruptFrame};

/// The vector user code calls ([`call`], [`exit`]) to return to the
/// kernel, with its result in RAX.
pub const EXIT_VECTOR: u8 = 0x81;

/// The gate's instruction: HLT (F4H), #GP(0) at CPL 3.
const GATE_OPCODE: u8 = 0xF4;

/// The kernel's handler of other #GPs at CPL 3 ([`set_gp_handler`]), or
/// null.
static GP_HANDLER: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());

/// Installs `handler` for the #GPs user code raises other than the gate's
/// (a hypervisor emulating RDMSR, WRMSR, RDPMC): it runs first, and when
/// it returns `false` the #GP goes to the kernel's fault handling.
///
/// # Safety
///
/// As for [`crate::idt::set_frame_handler`].
pub unsafe fn set_gp_handler(handler: FrameHandler) {
    GP_HANDLER.store(handler as *mut (), Ordering::Release);
}

/// The #GP handler [`run`] installs: the gate (HLT at CPL 3: the frame
/// handler of the vector in RCX, RIP after the HLT), else the
/// [`set_gp_handler`] handler.
fn on_gp(frame: &mut InterruptFrame) -> bool {
    if frame.cs & 3 != 3 {
        return false;
    }
    // SAFETY: RIP is the faulting instruction's first byte, in memory that
    // is mapped (all of it is) and that user code could execute.
    let opcode = unsafe { core::ptr::read_volatile(frame.rip as *const u8) };
    if opcode == GATE_OPCODE
        && let Ok(vector) = u8::try_from(frame.rcx)
    {
        frame.rip += 1;
        if idt::run_frame_handler(vector, frame) {
            return true;
        }
        frame.rip -= 1;
        return false;
    }
    let handler = GP_HANDLER.load(Ordering::Acquire);
    if handler.is_null() {
        return false;
    }
    // SAFETY: only `set_gp_handler` stores non-null pointers here, and it
    // stores `FrameHandler` function pointers.
    let handler = unsafe { core::mem::transmute::<*mut (), FrameHandler>(handler) };
    handler(frame)
}

/// Enters the kernel through the gate with `vector` (see the [module
/// documentation](self)): its frame handler sees RAX = `rax`, RDX = `rdx`
/// and the frame's vector `vector`; returns RAX as the handler left it.
/// At CPL 3 during [`run`] only (at CPL 0 it halts).
pub fn call(vector: u8, rax: u64, rdx: u64) -> u64 {
    let out: u64;
    // SAFETY: HLT at CPL 3 raises #GP, which `on_gp` turns into the
    // vector's frame handler; it changes only registers, as the gate's
    // contract allows (the asm declares RAX, RCX and RDX).
    unsafe {
        core::arch::asm!(
            "hlt",
            inout("rax") rax => out,
            inout("rcx") u64::from(vector) => _,
            inout("rdx") rdx => _,
        );
    }
    out
}

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
/// `stack`, ends with [`exit`] (it never returns), and nothing else uses
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
        idt::set_frame_handler(13, on_gp);
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

/// Returns from user code to the kernel with `value` (at CPL 3 during
/// [`run`] only).
pub fn exit(value: u64) -> ! {
    loop {
        // The exit does not come back.
        call(EXIT_VECTOR, value, 0);
    }
}

//! Interrupts and exceptions: 256 entry stubs, the register frame they save,
//! and dispatch to Rust handlers.
//!
//! The entry stubs live in one naked function, `vector_stubs`, as 256
//! 16-byte slots: slot `v` pushes a zero in place of an error code (unless
//! the CPU pushed one for `v`), pushes `v`, and jumps to `common_entry`,
//! which saves every general register, calls `dispatch` with a pointer to
//! the saved [`InterruptFrame`], restores the registers and returns with
//! IRETQ. Handlers see the frame read-only; only the fault catcher changes
//! where the interrupted code resumes, through the `unsafe`
//! [`InterruptFrame::resume_at`]. The kernel runs without SSE (the
//! `x86_64-unknown-none` target is soft-float), so there is no vector state to
//! save.

use core::sync::atomic::{AtomicPtr, Ordering};

use x86_64::VirtAddr;
use x86_64::structures::idt::InterruptDescriptorTable;

use crate::{fault, println};

/// Everything the CPU and the entry stub saved, lowest address first. The
/// interrupted code resumes with these values, so changing them is
/// [`InterruptFrame::resume_at`]'s job, under its contract; handlers get a
/// shared reference.
#[repr(C)]
#[derive(Debug)]
#[allow(missing_docs)]
pub struct InterruptFrame {
    pub r15: u64,
    pub r14: u64,
    pub r13: u64,
    pub r12: u64,
    pub r11: u64,
    pub r10: u64,
    pub r9: u64,
    pub r8: u64,
    pub rbp: u64,
    pub rdi: u64,
    pub rsi: u64,
    pub rdx: u64,
    pub rcx: u64,
    pub rbx: u64,
    pub rax: u64,
    /// The vector that was raised.
    pub vector: u64,
    /// The CPU's error code, or 0 for vectors without one.
    pub error_code: u64,
    /// The interrupted instruction pointer (for a fault: the faulting
    /// instruction; for an interrupt: the next instruction to execute).
    pub rip: u64,
    pub cs: u64,
    pub rflags: u64,
    pub rsp: u64,
    pub ss: u64,
}

impl InterruptFrame {
    /// Make the interrupted context resume at `rip` with stack `rsp` and
    /// `rdi` = `arg` (the first argument register of the C ABI).
    ///
    /// # Safety
    ///
    /// The interrupted code is abandoned at the faulting point: nothing it
    /// owns is dropped and no lock it holds is released. The caller
    /// guarantees that `rip` is code that expects exactly this entry
    /// (stack `rsp`, argument `arg`, the interrupted code segment and
    /// flags), that `rsp` is a live stack that nothing else uses, and that
    /// abandoning the interrupted frames is allowed by whoever started them
    /// (as [`crate::fault::catch`]'s contract allows).
    pub unsafe fn resume_at(&mut self, rip: u64, rsp: u64, arg: u64) {
        self.rip = rip;
        self.rsp = rsp;
        self.rdi = arg;
    }
}

/// A Rust interrupt handler: it sees the saved registers, and the
/// interrupted code resumes unchanged when it returns.
pub type Handler = fn(&InterruptFrame);

static HANDLERS: [AtomicPtr<()>; 256] = [const { AtomicPtr::new(core::ptr::null_mut()) }; 256];

/// Installs `handler` for `vector`, replacing any earlier one.
pub fn set_handler(vector: u8, handler: Handler) {
    HANDLERS[usize::from(vector)].store(handler as *mut (), Ordering::Release);
}

/// A handler that may change the interrupted context: the registers, and
/// where and at which privilege level it resumes (a hypervisor emulating
/// an instruction, `hobby::user` returning from CPL 3). It returns whether
/// it handled the interrupt; if not, the vector's [`Handler`] or the
/// kernel's own handling (fault catching) runs as without it.
pub type FrameHandler = fn(&mut InterruptFrame) -> bool;

static FRAME_HANDLERS: [AtomicPtr<()>; 256] =
    [const { AtomicPtr::new(core::ptr::null_mut()) }; 256];

/// Installs `handler` for `vector`, ahead of any [`Handler`] of it.
///
/// # Safety
///
/// The handler leaves the frame a context the CPU can resume with IRETQ
/// and that the code resuming there expects: for the interrupted code,
/// its registers changed only as the instruction it emulates would change
/// them; for other code, a live stack that nothing else uses, and the
/// interrupted frames abandoned only where their owner allows it (as
/// [`InterruptFrame::resume_at`]'s contract says).
pub unsafe fn set_frame_handler(vector: u8, handler: FrameHandler) {
    FRAME_HANDLERS[usize::from(vector)].store(handler as *mut (), Ordering::Release);
}

/// Runs the frame handler of `vector` on `frame` as if `vector` had been
/// raised there (the frame's vector says `vector` while it runs); returns
/// whether it handled it, `false` also when there is none. For
/// [`crate::user`]'s gate, which stands in for `INT n` at CPL 3.
pub(crate) fn run_frame_handler(vector: u8, frame: &mut InterruptFrame) -> bool {
    let handler = FRAME_HANDLERS[usize::from(vector)].load(Ordering::Acquire);
    if handler.is_null() {
        return false;
    }
    // SAFETY: only `set_frame_handler` stores non-null pointers here, and it
    // stores `FrameHandler` function pointers.
    let handler = unsafe { core::mem::transmute::<*mut (), FrameHandler>(handler) };
    let raised = core::mem::replace(&mut frame.vector, u64::from(vector));
    let handled = handler(frame);
    frame.vector = raised;
    handled
}

/// Removes the frame handler of `vector`.
pub fn clear_frame_handler(vector: u8) {
    FRAME_HANDLERS[usize::from(vector)].store(core::ptr::null_mut(), Ordering::Release);
}

/// Lets code at CPL 3 raise `vector` with `INT` (gate DPL 3; 32-255).
/// Returns `false` for other vectors and before the IDT is built.
///
/// # Safety
///
/// As for [`set_raw_gate`]: no interrupt through this gate meanwhile, no
/// overlapping call.
pub unsafe fn allow_from_user(vector: u8) -> bool {
    let Some(idt) = IDT.get() else { return false };
    if vector < 32 {
        return false;
    }
    // SAFETY: the caller promises the gate is not in use and no call
    // overlaps; the table lives for the whole run.
    let idt = unsafe { &mut *idt.0.get() };
    // SAFETY: the stub slot handles the vector (no error code), as `init`
    // set it.
    unsafe {
        idt[vector]
            .set_handler_addr(stub_slot(u64::from(vector)))
            .set_privilege_level(x86_64::PrivilegeLevel::Ring3);
    }
    true
}

/// Removes the handler of `vector`; the vector then counts as unexpected.
pub fn clear_handler(vector: u8) {
    HANDLERS[usize::from(vector)].store(core::ptr::null_mut(), Ordering::Release);
}

/// The names of the architectural exceptions, for reports.
pub fn exception_name(vector: u64) -> &'static str {
    const NAMES: [&str; 32] = [
        "#DE", "#DB", "NMI", "#BP", "#OF", "#BR", "#UD", "#NM", "#DF", "CSO", "#TS", "#NP", "#SS",
        "#GP", "#PF", "reserved", "#MF", "#AC", "#MC", "#XM", "#VE", "#CP", "reserved", "reserved",
        "reserved", "reserved", "reserved", "reserved", "#HV", "#VC", "#SX", "reserved",
    ];
    NAMES.get(vector as usize).copied().unwrap_or("interrupt")
}

#[unsafe(naked)]
unsafe extern "C" fn vector_stubs() {
    core::arch::naked_asm!(
        ".set hobby_vector, 0",
        ".rept 256",
        ".balign 16",
        // Vectors 8, 10-14, 17, 21, 29 and 30 come with an error code.
        ".if (hobby_vector - 8) && (hobby_vector - 10) && (hobby_vector - 11) && (hobby_vector - 12) && (hobby_vector - 13) && (hobby_vector - 14) && (hobby_vector - 17) && (hobby_vector - 21) && (hobby_vector - 29) && (hobby_vector - 30)",
        "push 0",
        ".endif",
        "push hobby_vector",
        "jmp {common}",
        ".set hobby_vector, hobby_vector + 1",
        ".endr",
        common = sym common_entry,
    )
}

#[unsafe(naked)]
unsafe extern "C" fn common_entry() {
    core::arch::naked_asm!(
        "push rax",
        "push rbx",
        "push rcx",
        "push rdx",
        "push rsi",
        "push rdi",
        "push rbp",
        "push r8",
        "push r9",
        "push r10",
        "push r11",
        "push r12",
        "push r13",
        "push r14",
        "push r15",
        // The CPU aligned RSP to 16 before its 5-word frame; with the error
        // code, the vector and 15 registers, RSP is 16-aligned again here.
        "mov rdi, rsp",
        "cld",
        "call {dispatch}",
        "pop r15",
        "pop r14",
        "pop r13",
        "pop r12",
        "pop r11",
        "pop r10",
        "pop r9",
        "pop r8",
        "pop rbp",
        "pop rdi",
        "pop rsi",
        "pop rdx",
        "pop rcx",
        "pop rbx",
        "pop rax",
        "add rsp, 16",
        "iretq",
        dispatch = sym dispatch,
    )
}

extern "C" fn dispatch(frame: &mut InterruptFrame) {
    let vector = frame.vector as usize;
    let handler = FRAME_HANDLERS[vector % 256].load(Ordering::Acquire);
    if !handler.is_null() {
        // SAFETY: only `set_frame_handler` stores non-null pointers here,
        // and it stores `FrameHandler` function pointers.
        let handler = unsafe { core::mem::transmute::<*mut (), FrameHandler>(handler) };
        if handler(frame) {
            return;
        }
    }
    let handler = HANDLERS[vector % 256].load(Ordering::Acquire);
    if !handler.is_null() {
        // SAFETY: only `set_handler` stores non-null pointers here, and it
        // stores `Handler` function pointers.
        let handler: Handler = unsafe { core::mem::transmute::<*mut (), Handler>(handler) };
        handler(frame);
        return;
    }
    // SAFETY: `frame` is the frame of an exception taken on this CPU, as
    // `divert_to_catcher` requires.
    if vector < 32 && vector != 2 && unsafe { fault::divert_to_catcher(frame) } {
        return;
    }
    crate::serial::emergency_print(format_args!(
        "\nunexpected {} (vector {}) error code {:#x} at RIP {:#x}, RSP {:#x}\n",
        exception_name(frame.vector),
        vector,
        frame.error_code,
        frame.rip,
        frame.rsp
    ));
    crate::exit::exit_qemu(crate::exit::ExitCode::Failure);
}

/// The loaded IDT. It is written after loading only by [`set_raw_gate`]
/// and [`restore_gate`], under their contract.
struct Idt(core::cell::UnsafeCell<InterruptDescriptorTable>);

// SAFETY: the table is written only through `set_raw_gate`/`restore_gate`,
// whose callers promise that no interrupt can use the gate meanwhile and
// that no two calls overlap (every CPU loads this one table and only reads
// it, `load_on_ap`).
unsafe impl Sync for Idt {}

static IDT: spin::Once<Idt> = spin::Once::new();

fn stub_slot(vector: u64) -> VirtAddr {
    VirtAddr::new(vector_stubs as *const () as u64 + 16 * vector)
}

/// Points the gate of `vector` (the NMI, 2, or 32-255) at `entry` instead of
/// this kernel's stub, for an entry stub of another origin (such as the one
/// `pmu::pmi_entry!` makes). Returns `false` for other vectors, and before
/// the kernel has built its IDT.
///
/// # Safety
///
/// `entry` must be an interrupt entry that returns with `IRETQ` and handles
/// the vector's frame (no error code for these vectors), and no interrupt
/// may be delivered through this gate while it is written (mask it, or keep
/// interrupts off; an NMI gate must not be written while an NMI can come).
/// The table is written in place without a lock: no two calls (of this or
/// [`restore_gate`]) may overlap, so do not call it from an interrupt or
/// exception handler that could interrupt another call.
pub unsafe fn set_raw_gate(vector: u8, entry: VirtAddr) -> bool {
    let Some(idt) = IDT.get() else { return false };
    // SAFETY: the caller promises the gate is not in use; the table lives
    // for the whole run, so the CPU keeps reading the written entry.
    let idt = unsafe { &mut *idt.0.get() };
    let gate = match vector {
        2 => &mut idt.non_maskable_interrupt,
        32..=255 => &mut idt[vector],
        _ => return false,
    };
    // SAFETY: the caller's contract above.
    unsafe {
        gate.set_handler_addr(entry);
    }
    true
}

/// Points the gate of `vector` back at this kernel's stub.
///
/// # Safety
///
/// As for [`set_raw_gate`]: no interrupt through this gate meanwhile.
pub unsafe fn restore_gate(vector: u8) -> bool {
    // SAFETY: the stub slot handles every vector; the rest is the caller's.
    unsafe { set_raw_gate(vector, stub_slot(u64::from(vector))) }
}

/// Builds and loads the IDT: every vector's gate points at its stub slot.
pub(crate) fn init() {
    crate::gdt::init();
    let idt = IDT.call_once(|| {
        let mut idt = InterruptDescriptorTable::new();
        let slot = stub_slot;
        // SAFETY: each address is the stub slot for that very vector, which
        // handles the error code the CPU pushes for it (or pushes a zero) and
        // returns with IRETQ; the double-fault IST slot holds a stack that
        // `gdt::init` set up before this.
        unsafe {
            idt.divide_error.set_handler_addr(slot(0));
            idt.debug.set_handler_addr(slot(1));
            idt.non_maskable_interrupt.set_handler_addr(slot(2));
            idt.breakpoint.set_handler_addr(slot(3));
            idt.overflow.set_handler_addr(slot(4));
            idt.bound_range_exceeded.set_handler_addr(slot(5));
            idt.invalid_opcode.set_handler_addr(slot(6));
            idt.device_not_available.set_handler_addr(slot(7));
            idt.double_fault
                .set_handler_addr(slot(8))
                .set_stack_index(crate::gdt::DOUBLE_FAULT_IST_INDEX);
            idt.invalid_tss.set_handler_addr(slot(10));
            idt.segment_not_present.set_handler_addr(slot(11));
            idt.stack_segment_fault.set_handler_addr(slot(12));
            idt.general_protection_fault.set_handler_addr(slot(13));
            idt.page_fault.set_handler_addr(slot(14));
            idt.x87_floating_point.set_handler_addr(slot(16));
            idt.alignment_check.set_handler_addr(slot(17));
            idt.machine_check.set_handler_addr(slot(18));
            idt.simd_floating_point.set_handler_addr(slot(19));
            idt.virtualization.set_handler_addr(slot(20));
            idt.cp_protection_exception.set_handler_addr(slot(21));
            idt.hv_injection_exception.set_handler_addr(slot(28));
            idt.vmm_communication_exception.set_handler_addr(slot(29));
            idt.security_exception.set_handler_addr(slot(30));
            for vector in 32..=255u8 {
                idt[vector].set_handler_addr(slot(u64::from(vector)));
            }
        }
        Idt(core::cell::UnsafeCell::new(idt))
    });
    // SAFETY: the table is in a static, so it outlives its use; it is only
    // written by `set_raw_gate`, under that function's contract.
    unsafe { (*idt.0.get()).load_unsafe() };
    mask_legacy_pic();
    println!("hobby: IDT loaded, legacy PIC masked");
}

/// Loads the boot CPU's IDT on an application processor (every CPU shares
/// the table and the handlers). Does nothing before [`init`].
pub(crate) fn load_on_ap() {
    if let Some(idt) = IDT.get() {
        // SAFETY: as in `init`: the table is a static that only
        // `set_raw_gate` writes, under its contract.
        unsafe { (*idt.0.get()).load_unsafe() };
    }
}

/// Masks every line of both 8259 PICs, so only the local APIC interrupts.
fn mask_legacy_pic() {
    use x86_64::instructions::port::Port;
    // SAFETY: ports 21H and A1H are the 8259s' mask registers; masking all
    // lines only stops legacy interrupts this kernel does not use.
    unsafe {
        Port::<u8>::new(0x21).write(0xFF);
        Port::<u8>::new(0xA1).write(0xFF);
    }
}

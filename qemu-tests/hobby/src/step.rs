//! Single-stepping: a function run one instruction at a time, each
//! instruction reported as it retires.
//!
//! [`trace`] sets RFLAGS.TF around a call of the function: the CPU then
//! raises a debug exception (#DB, vector 1) after every instruction (SDM
//! Vol. 3B "Single-Step Exception Condition"), whose frame holds the
//! address of the next instruction and the registers after the one that
//! retired. The handler turns each into a
//! [`Retirement`], the PMU models'
//! vocabulary for "an instruction retired at IP X": its address (the
//! previous exception's next instruction), the next one's, RFLAGS and the
//! general registers after it, its privilege level, and, for a branch,
//! its kind and whether it was taken (from a decoder of the branch
//! instructions' opcodes, [`branch_at`]); and hands it to the caller's
//! callback, from the exception handler. A model fed these counts the
//! workload's real instructions and branches, and its PEBS records carry
//! their real addresses; a branch recorder gets the real branches.
//!
//! What is reported: the CALL of the function and every instruction it
//! and its callees execute, up to and including the RET that returns from
//! it.
//!
//! The trace also keeps, per CPU, the calls the stepped code has open (a
//! call pushes its address, a return pops it): [`open_calls`] gives them as
//! the call chain of the instruction that runs next, the ground truth a
//! recorded call stack (the LBR's) or a frame-pointer walk can be checked
//! against; [`outer_rsp`] is the stack pointer at the stepped CALL, which
//! bounds a frame-pointer walk to the traced calls. An interrupt taken meanwhile runs unstepped (the interrupt gate
//! clears TF; IRETQ restores it), and the instruction it interrupted is
//! reported when it retires. One trace per CPU at a time; the callback
//! runs with interrupts disabled (an interrupt it sends, such as a model's
//! PMI through the APIC, is taken before the next stepped instruction, or
//! later where the hypervisor delivers it so).

use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use pmu::model::archperf::{Branch, BranchKind, Gprs, Privilege, Retirement};
use pmu::sampling::CallChain;

use crate::idt::{self, InterruptFrame};
use crate::smp;

/// RFLAGS.TF.
const TF: u64 = 1 << 8;
/// DR6.BS: the debug exception was a single step.
const DR6_BS: u64 = 1 << 14;
/// The CPUs a trace can run on at once.
const CPUS: usize = 64;
/// The open calls a trace keeps ([`open_calls`]): deeper calls are counted
/// but not kept.
const MAX_OPEN: usize = 64;

/// What [`trace`] calls after each instruction.
pub type OnRetire = fn(&Retirement);

/// One CPU's trace.
struct Trace {
    /// The callback (null: no trace).
    on_retire: AtomicPtr<()>,
    /// The address of the instruction the next exception reports.
    next: AtomicU64,
    /// Instructions reported.
    steps: AtomicU64,
    /// Reporting (from the CALL of the trampoline to its RET).
    active: AtomicBool,
    /// RSP before the stepped CALL.
    outer: AtomicU64,
    /// The open calls' addresses, oldest first, and how many are open.
    calls: [AtomicU64; MAX_OPEN],
    depth: AtomicUsize,
}

static TRACES: [Trace; CPUS] = [const {
    Trace {
        on_retire: AtomicPtr::new(core::ptr::null_mut()),
        next: AtomicU64::new(0),
        steps: AtomicU64::new(0),
        active: AtomicBool::new(false),
        outer: AtomicU64::new(0),
        calls: [const { AtomicU64::new(0) }; MAX_OPEN],
        depth: AtomicUsize::new(0),
    }
}; CPUS];

/// The function each CPU's trace calls (through the trampoline).
static STEPPED: [AtomicPtr<()>; CPUS] = [const { AtomicPtr::new(core::ptr::null_mut()) }; CPUS];

/// Runs `f` single-stepped on this CPU, calling `on_retire` from the debug
/// exception handler after each of its instructions (see the [module
/// documentation](self)); returns how many were reported. Interrupts keep
/// the state they have (enable them for an interrupt to be taken inside).
pub fn trace(f: extern "C" fn(), on_retire: OnRetire) -> u64 {
    let cpu = smp::cpu() % CPUS;
    let t = &TRACES[cpu];
    idt::set_handler(1, on_debug);
    t.steps.store(0, Ordering::SeqCst);
    t.depth.store(0, Ordering::SeqCst);
    t.outer.store(0, Ordering::SeqCst);
    t.on_retire.store(on_retire as *mut (), Ordering::SeqCst);
    STEPPED[cpu].store(f as *mut (), Ordering::SeqCst);
    t.active.store(true, Ordering::SeqCst);
    // SAFETY: the first stepped instruction's address (the CALL after
    // POPFQ: the trap comes after the instruction that follows it) is
    // stored where the handler reads it, then TF is set; the trampoline
    // calls `f`, an `extern "C" fn()` (the C ABI's clobbers, declared);
    // TF is cleared after its RET; the debug exception handler preserves
    // every register and only reports.
    unsafe {
        core::arch::asm!(
            "lea rax, [rip + 2f]",
            "mov qword ptr [rdi], rax",
            "pushfq",
            "or qword ptr [rsp], {tf}",
            "popfq",
            "2:",
            "call {trampoline}",
            "pushfq",
            "and qword ptr [rsp], {not_tf}",
            "popfq",
            in("rdi") t.next.as_ptr(),
            tf = const TF,
            not_tf = const !TF,
            trampoline = sym hobby_step_entry,
            clobber_abi("C"),
        );
    }
    t.active.store(false, Ordering::SeqCst);
    t.on_retire.store(core::ptr::null_mut(), Ordering::SeqCst);
    t.steps.load(Ordering::SeqCst)
}

/// Whether this CPU's traced code has an instruction still to run: from
/// [`trace`]'s start to the retirement of its last instruction (the
/// trampoline's RET). An interrupt taken while it holds interrupted the
/// next stepped instruction; one taken after, [`trace`]'s own code.
pub fn stepping() -> bool {
    TRACES[smp::cpu() % CPUS].active.load(Ordering::SeqCst)
}

/// The stepped call's target: a naked trampoline, so that the last
/// stepped instruction is known exactly (its RET, `hobby_step_return`),
/// whatever code the compiler makes around [`trace`]. It calls the traced
/// function through [`STEPPED`].
#[unsafe(naked)]
unsafe extern "C" fn hobby_step_entry() {
    core::arch::naked_asm!(
        "push rbp",
        "mov rbp, rsp",
        "call {call}",
        "pop rbp",
        ".global hobby_step_return",
        "hobby_step_return:",
        "ret",
        call = sym call_stepped,
    )
}

unsafe extern "C" {
    /// The trampoline's RET.
    fn hobby_step_return();
}

/// Calls this CPU's traced function (stepped as the rest).
extern "C" fn call_stepped() {
    let f = STEPPED[smp::cpu() % CPUS].load(Ordering::SeqCst);
    if !f.is_null() {
        // SAFETY: only `trace` stores here, an `extern "C" fn()`.
        let f = unsafe { core::mem::transmute::<*mut (), extern "C" fn()>(f) };
        f();
    }
}

/// The debug exception: a single step of this CPU's trace reports the
/// instruction that retired; anything else is left alone (DR6 cleared).
fn on_debug(frame: &InterruptFrame) {
    let dr6: u64;
    // SAFETY: ring 0; reading DR6 has no side effect.
    unsafe { core::arch::asm!("mov {}, dr6", out(reg) dr6, options(nomem, nostack)) };
    // SAFETY: ring 0; DR6's status bits are software's to clear.
    unsafe { core::arch::asm!("mov dr6, {}", in(reg) 0u64, options(nomem, nostack)) };
    if dr6 & DR6_BS == 0 {
        return;
    }
    let t = &TRACES[smp::cpu() % CPUS];
    let ip = t.next.swap(frame.rip, Ordering::SeqCst);
    if !t.active.load(Ordering::SeqCst) {
        return;
    }
    let callback = t.on_retire.load(Ordering::SeqCst);
    if callback.is_null() {
        return;
    }
    // SAFETY: only `trace` stores non-null values here: `OnRetire`
    // function pointers.
    let on_retire = unsafe { core::mem::transmute::<*mut (), OnRetire>(callback) };
    let r = retirement(ip, frame);
    if t.steps.fetch_add(1, Ordering::SeqCst) == 0 {
        // The stepped CALL: RSP before it is 8 above the return address it
        // pushed.
        t.outer.store(frame.rsp + 8, Ordering::SeqCst);
    }
    track_calls(t, &r);
    // The RET of the trampoline is the last instruction reported.
    if ip == hobby_step_return as *const () as u64 {
        t.active.store(false, Ordering::SeqCst);
    }
    on_retire(&r);
}

/// Keeps the open calls: a near call (direct or indirect) pushes its
/// address, a near return pops the newest (none open: nothing).
fn track_calls(t: &Trace, r: &Retirement) {
    let Some(branch) = r.branch else { return };
    let depth = t.depth.load(Ordering::Relaxed);
    match branch.kind {
        BranchKind::Call | BranchKind::IndirectCall => {
            if let Some(slot) = t.calls.get(depth) {
                slot.store(r.ip, Ordering::Relaxed);
            }
            t.depth.store(depth + 1, Ordering::Relaxed);
        }
        BranchKind::Return => t.depth.store(depth.saturating_sub(1), Ordering::Relaxed),
        _ => {}
    }
}

/// The call chain of this CPU's traced code about to run at `rip`: `rip`,
/// then each call the stepped code has open, innermost first, as
/// [`CallChain::from_calls`] makes it from a recorded call stack (so that
/// one compares with the other exactly). Call it from the `on_retire`
/// callback (or after the trace).
pub fn open_calls<const N: usize>(rip: u64) -> CallChain<N> {
    let t = &TRACES[smp::cpu() % CPUS];
    let depth = t.depth.load(Ordering::Relaxed);
    let kept = depth.min(MAX_OPEN);
    let calls = (0..kept)
        .rev()
        .filter_map(|i| t.calls.get(i))
        .map(|c| c.load(Ordering::Relaxed));
    CallChain::from_calls(rip, calls, depth <= MAX_OPEN)
}

/// The stack pointer of this CPU's trace before its stepped CALL (0 before
/// the first instruction is reported): a frame-pointer walk of the traced
/// code bounded below it ([`pmu::sampling::StackBounds::below`]) ends with
/// the return address into [`trace`], as the trace's open calls do.
pub fn outer_rsp() -> u64 {
    TRACES[smp::cpu() % CPUS].outer.load(Ordering::SeqCst)
}

/// The instruction at `ip` that retired, with `frame` the state after it.
fn retirement(ip: u64, frame: &InterruptFrame) -> Retirement {
    Retirement {
        ip,
        next_ip: frame.rip,
        privilege: if frame.cs & 3 == 0 {
            Privilege::Os
        } else {
            Privilege::Usr
        },
        rflags: frame.rflags & !TF,
        registers: Gprs {
            rax: frame.rax,
            rbx: frame.rbx,
            rcx: frame.rcx,
            rdx: frame.rdx,
            rsi: frame.rsi,
            rdi: frame.rdi,
            rbp: frame.rbp,
            rsp: frame.rsp,
            r8: frame.r8,
            r9: frame.r9,
            r10: frame.r10,
            r11: frame.r11,
            r12: frame.r12,
            r13: frame.r13,
            r14: frame.r14,
            r15: frame.r15,
        },
        // SAFETY: `ip` is the address of an instruction this CPU just
        // executed: mapped and readable (the kernel's identity-mapped
        // code), and at least as long as the decoder reads for the
        // instructions it decodes.
        branch: unsafe { branch_at(ip, frame.rip) },
        load: None,
    }
}

/// The branch the instruction at `ip` is, if it is one, and whether it was
/// taken (its next instruction `next` is not the one after it): a decoder
/// of the branch opcodes of 64-bit mode (SDM Vol. 2, Jcc, JMP, CALL, RET,
/// LOOP, JRCXZ, INT, IRET, SYSCALL, SYSRET), past legacy prefixes and REX;
/// any other instruction is no branch.
///
/// # Safety
///
/// The bytes of the instruction at `ip` (its prefixes and up to two opcode
/// bytes and a ModRM byte) are mapped and readable.
pub unsafe fn branch_at(ip: u64, next: u64) -> Option<Branch> {
    let byte = |k: u64| {
        let p = core::ptr::with_exposed_provenance::<u8>((ip + k) as usize);
        // SAFETY: the caller's promise: the instruction's bytes are
        // readable.
        unsafe { p.read_volatile() }
    };
    let mut k = 0;
    // Legacy prefixes, then REX (at most 15 bytes an instruction).
    while k < 14
        && matches!(
            byte(k),
            0x66 | 0x67 | 0xF0 | 0xF2 | 0xF3 | 0x2E | 0x36 | 0x3E | 0x26 | 0x64 | 0x65
        )
    {
        k += 1;
    }
    if (0x40..=0x4F).contains(&byte(k)) {
        k += 1;
    }
    let op = byte(k);
    let conditional = |len: u64| Branch {
        kind: BranchKind::Conditional,
        taken: next != ip + k + len,
    };
    let always = |kind| Branch { kind, taken: true };
    Some(match op {
        0x70..=0x7F | 0xE0..=0xE3 => conditional(2),
        0x0F => match byte(k + 1) {
            0x80..=0x8F => conditional(6),
            0x05 | 0x07 | 0x34 | 0x35 => always(BranchKind::Other),
            _ => return None,
        },
        0xEB | 0xE9 => always(BranchKind::Jump),
        0xE8 => always(BranchKind::Call),
        0xC3 | 0xC2 => always(BranchKind::Return),
        0xCA | 0xCB | 0xCC | 0xCD | 0xCF | 0xEA | 0x9A => always(BranchKind::Other),
        0xFF => match (byte(k + 1) >> 3) & 7 {
            2 => always(BranchKind::IndirectCall),
            4 => always(BranchKind::IndirectJump),
            3 | 5 => always(BranchKind::Other),
            _ => return None,
        },
        _ => return None,
    })
}

//! The hypervisor half of the kvm-unit-tests cases: a guest at CPL 3 whose
//! PMU is one of the crate's emulated PMUs (`pmu::virt::archperf::vpmu`
//! or `pmu::virt::amd::vpmu`), by trap and emulate, and the guest-side
//! helpers its checks use.
//!
//! * RDMSR, WRMSR and RDPMC trap (#GP at CPL 3) and are answered by the
//!   guest's PMU, which applies KVM's rules; an access it refuses is a #GP
//!   into the guest's own handler. An emulated instruction counts as one
//!   retired in the guest, after its effect, as KVM counts the
//!   instructions it emulates (`kvm_skip_emulated_instruction`): the
//!   WRMSR that enables a counter counts, the one that disables it does
//!   not.
//! * The guest's known loops run single-stepped (RFLAGS.TF, set and
//!   cleared by a hypercall): each debug exception is one instruction
//!   retired in the guest at its CPL 0 (a branch also a branch retired,
//!   from `hobby::step::branch_at`), two core cycles and one reference
//!   cycle, fed to its PMU. So the counts of a loop are exact.
//! * A PMI the guest's PMU raises is delivered at the next hypercall
//!   outside a stepped region and outside its PMI handler (the guest's
//!   interrupt window), through its virtual LVT entry: masked by the
//!   delivery for the Intel guest, left unmasked for the AMD one.
//! * CPUID is a hypercall: the physical CPU's answer, the PMU's leaves
//!   replaced by the guest's policy (`GuestPmu::cpuid`).
//!
//! Hypercalls use `hobby::user`'s gate (HLT with the vector in RCX).

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use hobby::idt::{self, InterruptFrame};
use hobby::user;
use pmu::access::MsrAccess;
use pmu::apic::{LvtPerfCounter, LvtPerfCounterEntry, PmiDelivery, Vector};
use pmu::arch::ia32::Privilege;
use pmu::detect::CpuidResult;
use pmu::model::archperf::{ArchEvent, Event, Retirement};
use pmu::virt::{amd, archperf};

use super::GuestMsr;

/// The guest's PMU, of either vendor. (One lives in a static at a time,
/// and the kernel has no allocator to box the larger.)
#[allow(clippy::large_enum_variant)]
pub enum Pmu {
    /// An Intel guest's.
    Intel(archperf::vpmu::VirtualPmu),
    /// An AMD guest's.
    Amd(amd::vpmu::VirtualPmu),
}

impl Pmu {
    fn wrmsr(&mut self, msr: u32, value: u64) -> Option<()> {
        let ok = match self {
            Pmu::Intel(p) => p.wrmsr(msr, value).ok(),
            Pmu::Amd(p) => p.wrmsr(msr, value).ok(),
        };
        // Not the PMU's: this VMM has no other MSR, a #GP.
        ok.filter(|&pmu| pmu).map(|_| ())
    }

    fn rdmsr(&mut self, msr: u32) -> Option<u64> {
        match self {
            Pmu::Intel(p) => p.rdmsr(msr).ok().flatten(),
            Pmu::Amd(p) => p.rdmsr(msr).ok().flatten(),
        }
    }

    fn rdpmc(&mut self, ecx: u32, pce: bool, cpl: u8) -> Option<u64> {
        match self {
            Pmu::Intel(p) => p.rdpmc(ecx, pce, cpl).ok(),
            Pmu::Amd(p) => p.rdpmc(ecx, pce, cpl).ok(),
        }
    }

    /// One instruction retired in the guest, two core cycles and one
    /// reference cycle.
    fn retire(&mut self, r: &Retirement) {
        match self {
            Pmu::Intel(p) => {
                p.retire(r);
                p.feed(Event::arch(ArchEvent::CoreCycles, 2).at(r.privilege));
                p.feed(Event::arch(ArchEvent::ReferenceCycles, 1).at(r.privilege));
            }
            Pmu::Amd(p) => {
                p.retire(r);
                p.feed(pmu::model::amd::Event::new(CYCLES_AMD, 0, 2).at(r.privilege));
            }
        }
    }

    fn pmi_to_inject(&mut self) -> Option<PmiDelivery> {
        match self {
            Pmu::Intel(p) => p.pmi_to_inject(),
            Pmu::Amd(p) => p.pmi_to_inject(),
        }
    }

    fn write_lvt(&mut self, entry: LvtPerfCounter) {
        match self {
            Pmu::Intel(p) => p.write_lvt(entry),
            Pmu::Amd(p) => p.write_lvt(entry),
        }
    }

    fn lvt(&self) -> LvtPerfCounter {
        match self {
            Pmu::Intel(p) => p.lvt(),
            Pmu::Amd(p) => p.lvt(),
        }
    }

    fn cpuid(&self, leaf: u32, subleaf: u32, host: CpuidResult) -> CpuidResult {
        match self {
            Pmu::Intel(p) => p.pmu().cpuid(leaf, subleaf, host),
            Pmu::Amd(p) => p.pmu().cpuid(leaf, subleaf, host),
        }
    }

    /// PMIs injected.
    pub fn injected(&self) -> u64 {
        match self {
            Pmu::Intel(p) => p.injected(),
            Pmu::Amd(p) => p.injected(),
        }
    }
}

/// AMD's cycles event (76H, "cycles not in halt").
pub const CYCLES_AMD: u16 = 0x76;

/// The virtual machine: the guest's PMU and the CPU state the hypervisor
/// keeps for it.
pub struct Vm {
    /// Its PMU.
    pub pmu: Pmu,
    /// Its CR4.PCE and CPL, as RDPMC sees them (the guest runs at CPL 0
    /// of its own unless a check says otherwise).
    pce: bool,
    cpl: u8,
    /// Single-stepping, and the next instruction a step reports.
    stepping: bool,
    next: u64,
    /// In its PMI handler (from the delivery to its return hypercall).
    in_pmi: bool,
    /// Instructions stepped and emulated, #GPs injected.
    pub steps: u64,
    pub emulated: u64,
    pub gps: u64,
}

/// The guest's VM (one case at a time).
pub static VM: spin::Mutex<Option<Vm>> = spin::Mutex::new(None);

/// Hypercalls.
const CPUID: u8 = 0x90;
const STEP: u8 = 0x91;
const SET_CPL: u8 = 0x92;
const SET_LVT: u8 = 0x93;
const GET_LVT: u8 = 0x94;
const PMI_RETURN: u8 = 0x95;

/// RFLAGS.TF.
const TF: u64 = 1 << 8;

/// Runs `guest` at CPL 3 with `pmu` as its PMU; returns its exit value and
/// the VM afterwards.
pub fn run(guest: extern "C" fn(u64) -> !, pmu: Pmu) -> Result<(u64, Vm), &'static str> {
    *VM.lock() = Some(Vm {
        pmu,
        pce: false,
        cpl: 0,
        stepping: false,
        next: 0,
        in_pmi: false,
        steps: 0,
        emulated: 0,
        gps: 0,
    });
    // SAFETY: the handlers only resume the guest after an emulated
    // instruction or a hypercall (its registers changed as the
    // instruction or the gate's contract allows), or enter one of its
    // handlers on its own stack; anything at CPL 0 is left to the kernel.
    unsafe {
        user::set_gp_handler(on_gp);
        idt::set_frame_handler(1, on_debug);
        for v in [CPUID, STEP, SET_CPL, SET_LVT, GET_LVT, PMI_RETURN] {
            idt::set_frame_handler(v, on_hypercall);
        }
    }
    let stack = &raw mut STACK;
    // SAFETY: the guest runs at CPL 3 on its own stack (nothing else uses
    // it) and ends with the exit hypercall.
    let result = unsafe { user::run(guest, 0, &mut *stack) };
    idt::clear_frame_handler(1);
    let vm = VM.lock().take().ok_or("no VM")?;
    Ok((result.map_err(|_| "user mode")?, vm))
}

static mut STACK: [u8; 64 * 1024] = [0; 64 * 1024];

/// Enters the guest's handler at `entry` as a CPU delivers to it: the
/// interrupted RIP on its stack.
fn deliver(frame: &mut InterruptFrame, entry: u64) {
    frame.rsp -= 8;
    // SAFETY: the guest's own stack, mapped, with room below its stack
    // pointer.
    unsafe { (frame.rsp as *mut u64).write(frame.rip) };
    frame.rip = entry;
}

/// The guest's RDMSR, WRMSR and RDPMC, answered by its PMU.
fn on_gp(frame: &mut InterruptFrame) -> bool {
    if frame.cs & 3 != 3 {
        return false;
    }
    let mut vm = VM.lock();
    let Some(vm) = vm.as_mut() else {
        return false;
    };
    // SAFETY: the faulting instruction's first bytes, mapped.
    let opcode = unsafe { core::ptr::read_unaligned(frame.rip as *const [u8; 2]) };
    let ecx = frame.rcx as u32;
    let answer = match opcode {
        [0x0F, 0x30] => vm
            .pmu
            .wrmsr(ecx, frame.rdx << 32 | (frame.rax & 0xFFFF_FFFF))
            .map(|()| None),
        [0x0F, 0x32] => vm.pmu.rdmsr(ecx).map(Some),
        [0x0F, 0x33] => vm.pmu.rdpmc(ecx, vm.pce, vm.cpl).map(Some),
        _ => None,
    };
    match answer {
        Some(value) => {
            if let Some(v) = value {
                frame.rax = v & 0xFFFF_FFFF;
                frame.rdx = v >> 32;
            }
            let r = Retirement {
                ip: frame.rip,
                next_ip: frame.rip + 2,
                privilege: privilege(vm.cpl),
                ..Retirement::NONE
            };
            frame.rip += 2;
            // Counted after its effect, as KVM counts it.
            vm.pmu.retire(&r);
            vm.emulated += 1;
        }
        None => {
            vm.gps += 1;
            deliver(frame, guest_gp_entry as *const () as u64);
        }
    }
    vm.next = frame.rip;
    true
}

/// The guest's CPL as an event's privilege.
fn privilege(cpl: u8) -> Privilege {
    if cpl == 0 {
        Privilege::Os
    } else {
        Privilege::Usr
    }
}

/// A single step of the guest: the instruction that retired.
fn on_debug(frame: &mut InterruptFrame) -> bool {
    if frame.cs & 3 != 3 {
        return false;
    }
    // SAFETY: ring 0; DR6's status bits are software's to clear.
    unsafe { core::arch::asm!("mov dr6, {}", in(reg) 0u64, options(nomem, nostack)) };
    let mut vm = VM.lock();
    let Some(vm) = vm.as_mut().filter(|vm| vm.stepping) else {
        return false;
    };
    let ip = vm.next;
    let r = Retirement {
        ip,
        next_ip: frame.rip,
        privilege: privilege(vm.cpl),
        // SAFETY: the guest's instruction at `ip` just retired: its bytes
        // are mapped (all memory is) and readable.
        branch: unsafe { hobby::step::branch_at(ip, frame.rip) },
        ..Retirement::NONE
    };
    vm.pmu.retire(&r);
    vm.steps += 1;
    vm.next = frame.rip;
    true
}

/// The hypercalls; then the guest's pending PMI, if its window is open.
fn on_hypercall(frame: &mut InterruptFrame) -> bool {
    if frame.cs & 3 != 3 {
        return false;
    }
    let mut vm = VM.lock();
    let Some(vm) = vm.as_mut() else {
        return false;
    };
    match frame.vector as u8 {
        CPUID => {
            let (leaf, sub, reg) = (frame.rax as u32, (frame.rdx >> 2) as u32, frame.rdx & 3);
            let host = core::arch::x86_64::__cpuid_count(leaf, sub);
            let host = CpuidResult {
                eax: host.eax,
                ebx: host.ebx,
                ecx: host.ecx,
                edx: host.edx,
            };
            let r = vm.pmu.cpuid(leaf, sub, host);
            frame.rax = u64::from([r.eax, r.ebx, r.ecx, r.edx][reg as usize]);
        }
        STEP => {
            vm.stepping = frame.rax != 0;
            if vm.stepping {
                frame.rflags |= TF;
            } else {
                frame.rflags &= !TF;
            }
        }
        SET_CPL => {
            vm.pce = frame.rax != 0;
            vm.cpl = frame.rdx as u8;
        }
        SET_LVT => vm
            .pmu
            .write_lvt(LvtPerfCounter::from_bits(frame.rax as u32)),
        GET_LVT => frame.rax = u64::from(vm.pmu.lvt().bits()),
        _ => vm.in_pmi = false,
    }
    vm.next = frame.rip;
    if !vm.stepping && !vm.in_pmi && vm.pmu.pmi_to_inject().is_some() {
        vm.in_pmi = true;
        deliver(frame, guest_pmi_entry as *const () as u64);
    }
    true
}

// ---- The guest's side (CPL 3) ----

/// #GPs the guest's handler took.
pub static GUEST_GPS: AtomicU64 = AtomicU64::new(0);
/// PMIs the guest's handler took, and what it saw in the first: the
/// overflow status and whether its LVT entry was masked.
pub static GUEST_PMIS: AtomicU64 = AtomicU64::new(0);
pub static PMI_STATUS: AtomicU64 = AtomicU64::new(u64::MAX);
pub static PMI_MASKED: AtomicU64 = AtomicU64::new(u64::MAX);
/// The MSR of the guest's overflow status (its vendor's).
pub static STATUS_MSR: AtomicU32 = AtomicU32::new(0);

/// The guest's #GP handler: counts it and resumes after the 2-byte
/// instruction.
#[unsafe(naked)]
unsafe extern "C" fn guest_gp_entry() {
    core::arch::naked_asm!(
        "lock inc qword ptr [rip + {gps}]",
        "add qword ptr [rsp], 2",
        "ret",
        gps = sym GUEST_GPS,
    )
}

/// The guest's PMI entry: flags and the registers a call may clobber
/// saved, `guest_on_pmi()`, all restored, the PMI_RETURN hypercall (its
/// IRET), back to the interrupted code.
#[unsafe(naked)]
unsafe extern "C" fn guest_pmi_entry() {
    core::arch::naked_asm!(
        "pushfq",
        "push rax",
        "push rcx",
        "push rdx",
        "push rsi",
        "push rdi",
        "push r8",
        "push r9",
        "push r10",
        "push r11",
        "push rbp",
        "mov rbp, rsp",
        "and rsp, -16",
        "call {handler}",
        "mov rsp, rbp",
        "pop rbp",
        "pop r11",
        "pop r10",
        "pop r9",
        "pop r8",
        "pop rdi",
        "pop rsi",
        "pop rdx",
        "pop rcx",
        "pop rax",
        "popfq",
        "push rcx",
        "mov ecx, {pmi_return}",
        "hlt",
        "pop rcx",
        "ret",
        handler = sym guest_on_pmi,
        pmi_return = const PMI_RETURN,
    )
}

/// The guest kernel's PMI handler: records the status and the entry's
/// mask, unmasks the entry (as Linux's and kvm-unit-tests' handlers do).
extern "C" fn guest_on_pmi() {
    if GUEST_PMIS.fetch_add(1, Ordering::SeqCst) == 0 {
        PMI_STATUS.store(
            rdmsr(STATUS_MSR.load(Ordering::SeqCst)).unwrap_or(u64::MAX),
            Ordering::SeqCst,
        );
        let entry = LvtPerfCounter::from_bits(user::call(GET_LVT, 0, 0) as u32);
        PMI_MASKED.store(u64::from(entry.is_masked()), Ordering::SeqCst);
    }
    GuestLvt.write_lvt_perf_counter(lvt());
}

/// The guest's LVT entry, through the hypervisor.
pub struct GuestLvt;

impl LvtPerfCounterEntry for GuestLvt {
    fn write_lvt_perf_counter(&mut self, entry: LvtPerfCounter) {
        user::call(SET_LVT, u64::from(entry.bits()), 0);
    }
}

/// The guest's PMI vector.
const PMI_VECTOR: Vector = match Vector::new(0xF0) {
    Some(v) => v,
    None => panic!("a valid vector"),
};

/// The guest's LVT entry: vector F0H, fixed delivery, unmasked.
pub fn lvt() -> LvtPerfCounter {
    LvtPerfCounter::new(PmiDelivery::Fixed(PMI_VECTOR))
}

/// Whether `f` took a #GP in the guest.
fn faults(f: impl FnOnce()) -> bool {
    let before = GUEST_GPS.load(Ordering::SeqCst);
    f();
    GUEST_GPS.load(Ordering::SeqCst) != before
}

/// The guest's WRMSR: whether it took a #GP.
pub fn wrmsr_gp(msr: u32, value: u64) -> bool {
    faults(|| {
        let Ok(()) = GuestMsr::new().write_msr(msr, value);
    })
}

/// The guest's RDMSR, or `Err` for a #GP.
pub fn rdmsr(msr: u32) -> Result<u64, ()> {
    let mut v = 0;
    if faults(|| {
        let Ok(x) = GuestMsr::new().read_msr(msr);
        v = x;
    }) {
        Err(())
    } else {
        Ok(v)
    }
}

/// The guest's RDPMC, or `Err` for a #GP.
pub fn rdpmc(ecx: u32) -> Result<u64, ()> {
    let mut v = 0;
    if faults(|| {
        let Ok(x) = GuestMsr::new().rdpmc(ecx);
        v = x;
    }) {
        Err(())
    } else {
        Ok(v)
    }
}

/// CPUID through the hypervisor: EAX, EBX, ECX, EDX.
pub fn cpuid(leaf: u32, subleaf: u32) -> [u32; 4] {
    core::array::from_fn(|reg| {
        user::call(CPUID, u64::from(leaf), u64::from(subleaf) << 2 | reg as u64) as u32
    })
}

/// The guest's CR4.PCE and CPL for RDPMC.
pub fn set_cpl(pce: bool, cpl: u8) {
    user::call(SET_CPL, u64::from(pce), u64::from(cpl));
}

/// An empty hypercall: the guest's interrupt window (a pending PMI is
/// delivered here).
pub fn window() {
    user::call(GET_LVT, 0, 0);
}

core::arch::global_asm!(
    r#"
    .section .text.hv_kut_loop, "ax"
    .global hv_kut_loop
/* hv_kut_loop(msr, enable, n): WRMSR msr <- enable, n iterations of DEC
   and JNZ, WRMSR msr <- 0. From the first WRMSR (which counts: it is
   emulated) to the second (which does not), 2n + 5 instructions retire,
   n of them branches. */
hv_kut_loop:
    mov r8, rdx
    mov ecx, edi
    mov eax, esi
    mov rdx, rsi
    shr rdx, 32
    wrmsr
    mov rcx, r8
2:
    dec rcx
    jnz 2b
    mov ecx, edi
    xor eax, eax
    xor edx, edx
    wrmsr
    ret
    .text
"#
);

unsafe extern "C" {
    fn hv_kut_loop(msr: u32, enable: u64, n: u64);
}

/// Instructions the known loop retires with `n` iterations (see
/// `hv_kut_loop`).
pub const fn loop_instructions(n: u64) -> u64 {
    2 * n + 5
}

/// Runs the known loop single-stepped: `msr` (a global control, or an
/// event select) enabled with `enable` for `n` iterations, then 0.
pub fn known_loop(msr: u32, enable: u64, n: u64) {
    user::call(STEP, 1, 0);
    // SAFETY: the loop changes only the registers the C ABI lets a call
    // change; its WRMSRs trap to the hypervisor at CPL 3.
    unsafe { hv_kut_loop(msr, enable, n) };
    user::call(STEP, 0, 0);
}

/// The checks a guest made, and the first of those that failed: (what,
/// got, wanted), and how many failed.
pub static CHECKS: AtomicU64 = AtomicU64::new(0);
#[allow(clippy::type_complexity)]
pub static FAILURES: spin::Mutex<([(&str, u64, u64); 16], usize)> =
    spin::Mutex::new(([("", 0, 0); 16], 0));

/// A guest's check `what`: `got` should be `want`.
pub fn check(what: &'static str, got: u64, want: u64) {
    CHECKS.fetch_add(1, Ordering::SeqCst);
    if got != want {
        let mut f = FAILURES.lock();
        let n = f.1;
        if let Some(slot) = f.0.get_mut(n) {
            *slot = (what, got, want);
        }
        f.1 += 1;
    }
}

/// Resets the guest-side records before a case.
pub fn reset() {
    for a in [&GUEST_GPS, &GUEST_PMIS, &CHECKS] {
        a.store(0, Ordering::SeqCst);
    }
    FAILURES.lock().1 = 0;
    PMI_STATUS.store(u64::MAX, Ordering::SeqCst);
    PMI_MASKED.store(u64::MAX, Ordering::SeqCst);
}

/// The case's verdict on the guest's checks.
pub fn verdict() -> Result<(), hobby::test::Failure> {
    let f = FAILURES.lock();
    for (what, got, want) in f.0.iter().take(f.1) {
        hobby::println!("hypervisor: guest check {what} failed: got {got:#x}, wanted {want:#x}");
    }
    hobby::check_eq!(f.1, 0, "guest checks that failed");
    hobby::check!(
        CHECKS.load(Ordering::SeqCst) > 20,
        "the guest made its checks"
    );
    Ok(())
}

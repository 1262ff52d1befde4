//! The application processors (APs): bring-up, per-CPU state, and work
//! posted to a CPU.
//!
//! [`start_aps`] wakes every other CPU with INIT-SIPI-SIPI (SDM Vol. 3A
//! 9.4.4.1, "Typical BSP Initialization Sequence"; 11.6.1 for the ICR). An
//! AP starts in real mode at the start-up page ([`TRAMPOLINE`], 8000H, where
//! the boot CPU copied the trampoline below): it loads a flat 32-bit GDT,
//! enters protected mode, turns on PAE with the boot CPU's page tables,
//! long mode and paging, jumps to 64-bit code, takes the next AP number and
//! its stack with a locked add, and calls Rust, which loads the CPU's own
//! GDT and TSS ([`crate::gdt`]), the shared IDT, software-enables its local
//! APIC and reports for work.
//!
//! An idle AP waits in `hlt` with interrupts on; [`run_on`] posts a
//! function to its mailbox and wakes it with an IPI ([`WAKE_VECTOR`]), and
//! [`wait`] collects the result. Interrupt handlers ([`crate::idt`]) are
//! shared by all CPUs; [`cpu`] says which one runs.
//!
//! Under QEMU, boot with `-smp N -accel tcg,thread=multi` so that the
//! virtual CPUs run in parallel on host threads.
//!
//! Up to [`MAX_CPUS`] (64) CPUs come up; more are parked in the
//! trampoline. The per-CPU state is in arrays of that size, without an
//! allocator: an AP stack of 64 KiB, plus ([`crate::gdt`]) a 16 KiB
//! double-fault stack and a 32 KiB ring-0 stack for interrupts from user
//! mode: 112 KiB of `.bss` a CPU, 7 MiB in all, which the boot code does
//! not clear (the ELF loader zero-fills it; `hobby.ld`), so that a boot
//! touches only the stacks its CPUs use. The CPU numbers follow the
//! order the APs report in, not their APIC IDs: a kernel that needs to
//! know which CPUs share a PMU asks [`pmu_site`], which each CPU read
//! from its own CPUID as it came up ([`pmu::topology::pmu_site`]), not
//! the number. In
//! x2APIC mode ([`crate::apic::enter_x2apic`], before [`start_aps`]) the
//! INIT-SIPI-SIPI and every IPI go through the x2APIC's ICR, and each AP
//! switches to x2APIC mode before it touches its APIC.

use core::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use pmu::apic::{IpiDelivery, IpiDestination, Vector};
use pmu::detect::{HardwareCpuid, detect};
use pmu::topology::{PmuSite, TopologyError};
use x86_64::VirtAddr;
use x86_64::registers::model_specific::GsBase;

use crate::apic::local_apic;
use crate::idt::{self, InterruptFrame};
use crate::tsc::rdtsc;

/// The most CPUs this kernel brings up (the boot CPU included).
pub const MAX_CPUS: usize = 64;
/// The physical page the trampoline is copied to and the APs start at
/// (its number, 08H, is the SIPI vector).
pub const TRAMPOLINE: usize = 0x8000;
/// The vector that wakes an idle AP.
pub const WAKE_VECTOR: u8 = 0xE0;
/// Each AP's stack.
const AP_STACK_SIZE: usize = 64 * 1024;

core::arch::global_asm!(
    r#"
    .set HOBBY_AP_BASE, {base}

    .section .text.boot, "ax"
    .code16
    .global hobby_ap_trampoline
hobby_ap_trampoline:
    cli
    cld
    mov ax, cs
    mov ds, ax
    /* o32 lgdt [disp16]: the trampoline GDT, with a 32-bit base. */
    .byte 0x66, 0x0F, 0x01, 0x16
    .word hobby_ap_gdtr - hobby_ap_trampoline
    mov eax, cr0
    or eax, 1
    mov cr0, eax
    /* ljmpl 0x08:hobby_ap32, at its copy. */
    .byte 0x66, 0xEA
    .long HOBBY_AP_BASE + (hobby_ap32 - hobby_ap_trampoline)
    .word 0x08

    .code32
hobby_ap32:
    mov ax, 0x10
    mov ds, ax
    mov es, ax
    mov ss, ax
"#,
    include_str!("long_mode.s"),
    r#"
    /* ljmp 0x08:hobby_ap64 (the boot GDT's 64-bit code segment). */
    .byte 0xEA
    .long hobby_ap64
    .word 0x08

    .balign 8
hobby_ap_gdt:
    .quad 0
    .quad 0x00CF9A000000FFFF        /* 0x08: 32-bit code */
    .quad 0x00CF92000000FFFF        /* 0x10: data */
hobby_ap_gdt_end:
hobby_ap_gdtr:
    .word hobby_ap_gdt_end - hobby_ap_gdt - 1
    .long HOBBY_AP_BASE + (hobby_ap_gdt - hobby_ap_trampoline)
    .global hobby_ap_trampoline_end
hobby_ap_trampoline_end:

    .code64
hobby_ap64:
    mov ax, 0x10
    mov ds, ax
    mov es, ax
    mov ss, ax
    xor eax, eax
    mov fs, ax
    mov gs, ax
    mov eax, 1
    lock xadd dword ptr [rip + {next}], eax
    cmp eax, {max_aps}
    jae 2f
    mov edi, eax
    inc eax
    imul rax, rax, {stack_size}
    lea rsp, [rip + {stacks}]
    add rsp, rax
    xor ebp, ebp
    call {ap_main}
2:
    cli
    hlt
    jmp 2b
"#,
    base = const TRAMPOLINE,
    next = sym AP_NEXT,
    max_aps = const MAX_CPUS - 1,
    stack_size = const AP_STACK_SIZE,
    stacks = sym AP_STACKS,
    ap_main = sym ap_main,
);

unsafe extern "C" {
    static hobby_ap_trampoline: u8;
    static hobby_ap_trampoline_end: u8;
}

#[repr(C, align(16))]
struct Stacks([[u8; AP_STACK_SIZE]; MAX_CPUS - 1]);

/// The APs' stacks: AP `i` (CPU `i + 1`) runs on the `i`th, top down. Only
/// the APs touch them, each its own.
/// In `.bss.hobby_stacks`, which `hobby.ld` keeps out of the range the
/// boot code clears: the ELF loader zero-fills it as it does `.bss`, and
/// no page of it is touched before a CPU uses it.
#[unsafe(link_section = ".bss.hobby_stacks")]
static mut AP_STACKS: Stacks = Stacks([[0; AP_STACK_SIZE]; MAX_CPUS - 1]);
/// The next AP number (the trampoline adds 1).
static mut AP_NEXT: u32 = 0;

/// What a CPU's mailbox holds.
const IDLE: u8 = 0;
const POSTED: u8 = 1;
const DONE: u8 = 2;

/// One CPU's mailbox: the function posted to it and its result.
struct Mailbox {
    state: AtomicU8,
    work: AtomicUsize,
    result: AtomicU64,
}

static MAILBOX: [Mailbox; MAX_CPUS] = [const {
    Mailbox {
        state: AtomicU8::new(IDLE),
        work: AtomicUsize::new(0),
        result: AtomicU64::new(0),
    }
}; MAX_CPUS];

/// The local APIC ID of CPU `i` (`u32::MAX`: not online).
static APIC_ID: [AtomicU32; MAX_CPUS] = [const { AtomicU32::new(u32::MAX) }; MAX_CPUS];
static ONLINE: AtomicUsize = AtomicUsize::new(1);
/// Where each CPU's PMU is, read by the CPU itself as it came up.
static SITES: [spin::Once<Result<PmuSite, TopologyError>>; MAX_CPUS] =
    [const { spin::Once::new() }; MAX_CPUS];
/// Wake IPIs each CPU took.
static WAKES: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];

/// Why the APs did not all come up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SmpError {
    /// Fewer than asked reported within the wait.
    Missing {
        /// CPUs online (the boot CPU included).
        online: usize,
        /// CPUs asked for.
        wanted: usize,
    },
    /// More CPUs asked for than [`MAX_CPUS`].
    TooMany,
    /// No such CPU, or it is not online.
    NoSuchCpu(usize),
    /// The CPU's mailbox holds work not yet collected.
    Busy(usize),
    /// The boot loader's data lies where the trampoline goes.
    TrampolineInUse,
}

impl core::fmt::Display for SmpError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SmpError::Missing { online, wanted } => {
                write!(f, "{online} of {wanted} CPUs came up")
            }
            SmpError::TooMany => write!(f, "at most {MAX_CPUS} CPUs"),
            SmpError::NoSuchCpu(c) => write!(f, "CPU {c} is not online"),
            SmpError::Busy(c) => write!(f, "CPU {c} has work not yet collected"),
            SmpError::TrampolineInUse => {
                write!(f, "the boot loader's data lies at {TRAMPOLINE:#x}")
            }
        }
    }
}

/// Starts the application processors and waits until `cpus` CPUs (the
/// boot CPU included) are online; call it once, from the boot CPU, with
/// interrupts off. Returns how many are online.
pub fn start_aps(cpus: usize) -> Result<usize, SmpError> {
    if cpus > MAX_CPUS {
        return Err(SmpError::TooMany);
    }
    let mut apic = local_apic();
    APIC_ID[0].store(apic.id(), Ordering::Release);
    record_site(0);
    idt::set_handler(WAKE_VECTOR, on_wake);
    if cpus <= 1 {
        return Ok(1);
    }
    let start = &raw const hobby_ap_trampoline;
    let end = &raw const hobby_ap_trampoline_end;
    let len = end as usize - start as usize;
    let page = TRAMPOLINE..TRAMPOLINE + len;
    let mut loader = crate::boot::LOADER_DATA.get().into_iter().flatten();
    if loader.any(|r| r.start < page.end && page.start < r.end) {
        return Err(SmpError::TrampolineInUse);
    }
    // SAFETY: both symbols delimit the trampoline's bytes in this kernel's
    // text; 8000H is identity-mapped conventional memory that nothing in
    // this kernel uses (checked against the boot loader's data above).
    unsafe { core::ptr::copy_nonoverlapping(start, TRAMPOLINE as *mut u8, len) };
    let page = (TRAMPOLINE >> 12) as u8;
    // SDM 9.4.4.1: INIT, 10 ms, SIPI, 200 µs, SIPI. The waits are TSC
    // cycles at an assumed 1 GHz or more (so at least as long on any
    // TSC rate up to that; QEMU takes the IPIs at once anyway).
    apic.send_ipi(IpiDestination::AllButSelf, IpiDelivery::Init);
    spin_cycles(10_000_000);
    for _ in 0..2 {
        apic.send_ipi(IpiDestination::AllButSelf, IpiDelivery::Startup(page));
        spin_cycles(200_000);
    }
    // Wait for the APs to report: about a second at 3 GHz.
    let start = rdtsc();
    while ONLINE.load(Ordering::Acquire) < cpus && rdtsc().wrapping_sub(start) < 3_000_000_000 {
        core::hint::spin_loop();
    }
    let online = ONLINE.load(Ordering::Acquire);
    if online < cpus {
        return Err(SmpError::Missing {
            online,
            wanted: cpus,
        });
    }
    Ok(online)
}

/// Posts `work` to every AP online (CPUs 1 to [`online`] - 1), which run
/// it at once; collect each result with [`wait`]. Stops at the first CPU
/// that cannot take it.
pub fn run_on_aps(work: fn(usize) -> u64) -> Result<(), SmpError> {
    (1..online()).try_for_each(|cpu| run_on(cpu, work))
}

/// Spins for `cycles` TSC cycles.
fn spin_cycles(cycles: u64) {
    let start = rdtsc();
    while rdtsc().wrapping_sub(start) < cycles {
        core::hint::spin_loop();
    }
}

/// The stack AP `cpu` (1 to [`MAX_CPUS`] - 1) runs on: its addresses,
/// for a kernel that checks where its code runs.
pub fn ap_stack(cpu: usize) -> Option<core::ops::Range<usize>> {
    if cpu == 0 || cpu >= MAX_CPUS {
        return None;
    }
    let base = (&raw const AP_STACKS).cast::<u8>() as usize + (cpu - 1) * AP_STACK_SIZE;
    Some(base..base + AP_STACK_SIZE)
}

/// CPUs online, the boot CPU included.
pub fn online() -> usize {
    ONLINE.load(Ordering::Acquire)
}

/// Each CPU's number, where that CPU's GS base points ([`set_this_cpu`]):
/// entry `i` holds `i`.
static CPU_NUMBERS: [usize; MAX_CPUS] = {
    let mut numbers = [0; MAX_CPUS];
    let mut i = 0;
    while i < MAX_CPUS {
        numbers[i] = i;
        i += 1;
    }
    numbers
};

/// Points this CPU's GS base (IA32_GS_BASE) at its entry of
/// [`CPU_NUMBERS`], so that [`cpu`] reads its number with one load: called
/// by `gdt::init_cpu` as the CPU comes up, before anything asks (the boot
/// CPU right after its serial port, an AP first thing); `cpu` <
/// [`MAX_CPUS`], others are ignored. Nothing in the kernels loads GS
/// after it (no SWAPGS: the user-mode code of `hobby::user` leaves GS
/// alone).
pub(crate) fn set_this_cpu(cpu: usize) {
    if let Some(number) = CPU_NUMBERS.get(cpu) {
        GsBase::write(VirtAddr::from_ptr(number));
    }
}

/// The number of the CPU this runs on (0: the boot CPU): one load through
/// its GS base (set as the CPU comes up), as kernels keep per-CPU data. Handlers
/// call it on every tick: it used to read the local APIC ID, a VM exit
/// under a hypervisor (about 90 µs on the project machine's nested KVM).
pub fn cpu() -> usize {
    let number: usize;
    // SAFETY: every CPU's GS base points at its entry of `CPU_NUMBERS`
    // (`set_this_cpu`, before any code of the kernel's runs on it), an
    // immutable static: the load reads 8 initialised bytes of it.
    unsafe {
        core::arch::asm!(
            "mov {}, gs:[0]",
            out(reg) number,
            options(nostack, readonly, preserves_flags),
        );
    }
    number
}

/// The local APIC ID of CPU `cpu`, if it is online.
pub fn apic_id(cpu: usize) -> Option<u32> {
    let id = APIC_ID.get(cpu)?.load(Ordering::Acquire);
    (id != u32::MAX).then_some(id)
}

/// Reads where this CPU's PMU is (detection and
/// [`pmu::topology::pmu_site`] on its own CPUID) into CPU `cpu`'s slot.
fn record_site(cpu: usize) {
    let Some(slot) = SITES.get(cpu) else { return };
    slot.call_once(|| {
        // SAFETY: CPL 0, this CPU's MSRs; detection reads IA32_MISC_ENABLE
        // at most, which every x86-64 CPU has.
        let mut msr = unsafe { pmu::access::X86Msr::new() };
        let Ok(found) = detect(&HardwareCpuid, &mut msr);
        pmu::topology::pmu_site(&HardwareCpuid, &found)
    });
}

/// Where CPU `cpu`'s PMU is, as the CPU read it from its own CPUID when it
/// came up ([`pmu::topology::pmu_site`]): which CPUs share a physical PMU
/// (equal [`PmuSite::pmu`]) and which logical processor of it each is.
/// `None` for a CPU not online; the error where the CPU has no PMU the
/// crate drives or an impossible topology.
pub fn pmu_site(cpu: usize) -> Option<Result<PmuSite, TopologyError>> {
    SITES.get(cpu)?.get().copied()
}

/// Whether every CPU online has an APIC ID and no two share one.
pub fn apic_ids_distinct() -> bool {
    let ids = || (0..online()).map(apic_id);
    ids()
        .enumerate()
        .all(|(i, a)| a.is_some() && ids().skip(i + 1).all(|b| b != a))
}

/// Wake IPIs CPU `cpu` has taken.
pub fn wakes(cpu: usize) -> u64 {
    WAKES.get(cpu).map_or(0, |w| w.load(Ordering::Acquire))
}

/// Posts `work` to CPU `cpu` (an AP), which runs `work(cpu)` as soon as it
/// is idle; collect the result with [`wait`].
pub fn run_on(cpu: usize, work: fn(usize) -> u64) -> Result<(), SmpError> {
    let id = match apic_id(cpu) {
        Some(id) if cpu != 0 => id,
        _ => return Err(SmpError::NoSuchCpu(cpu)),
    };
    let mailbox = &MAILBOX[cpu];
    if mailbox.state.load(Ordering::Acquire) != IDLE {
        return Err(SmpError::Busy(cpu));
    }
    mailbox.work.store(work as usize, Ordering::Relaxed);
    mailbox.state.store(POSTED, Ordering::Release);
    let wake = Vector::new(WAKE_VECTOR).ok_or(SmpError::NoSuchCpu(cpu))?;
    local_apic().send_ipi(IpiDestination::Apic(id), IpiDelivery::Fixed(wake));
    Ok(())
}

/// Waits until CPU `cpu` has run the work posted with [`run_on`] and
/// returns its result.
pub fn wait(cpu: usize) -> Result<u64, SmpError> {
    let mailbox = MAILBOX.get(cpu).ok_or(SmpError::NoSuchCpu(cpu))?;
    loop {
        match mailbox.state.load(Ordering::Acquire) {
            DONE => break,
            IDLE => return Err(SmpError::NoSuchCpu(cpu)),
            _ => core::hint::spin_loop(),
        }
    }
    let result = mailbox.result.load(Ordering::Relaxed);
    mailbox.state.store(IDLE, Ordering::Release);
    Ok(result)
}

/// Sends a fixed IPI with `vector` to CPU `cpu`.
pub fn send_ipi(cpu: usize, vector: Vector) -> Result<(), SmpError> {
    let id = apic_id(cpu).ok_or(SmpError::NoSuchCpu(cpu))?;
    local_apic().send_ipi(IpiDestination::Apic(id), IpiDelivery::Fixed(vector));
    Ok(())
}

/// The wake IPI: counted; the idle loop does the rest.
fn on_wake(_: &InterruptFrame) {
    if let Some(w) = WAKES.get(cpu()) {
        w.fetch_add(1, Ordering::Relaxed);
    }
    local_apic().eoi();
}

/// An AP's first Rust code: `index` is its AP number (CPU `index + 1`), on
/// its own stack, interrupts off.
extern "C" fn ap_main(index: u32) -> ! {
    let cpu = index as usize + 1;
    crate::gdt::init_cpu(cpu);
    idt::load_on_ap();
    crate::apic::enter_mode_on_ap();
    let mut apic = crate::apic::enable_this_cpu();
    if let Some(slot) = APIC_ID.get(cpu) {
        slot.store(apic.id(), Ordering::Release);
    }
    record_site(cpu);
    ONLINE.fetch_add(1, Ordering::AcqRel);
    let mailbox = &MAILBOX[cpu.min(MAX_CPUS - 1)];
    loop {
        if mailbox.state.load(Ordering::Acquire) == POSTED {
            let work = mailbox.work.load(Ordering::Relaxed);
            // SAFETY: `run_on` stored a `fn(usize) -> u64` there.
            let work: fn(usize) -> u64 = unsafe { core::mem::transmute(work) };
            mailbox.result.store(work(cpu), Ordering::Relaxed);
            mailbox.state.store(DONE, Ordering::Release);
            continue;
        }
        // `sti; hlt`: an IPI that comes after the check above still ends the
        // `hlt` (STI delays interrupts by one instruction).
        x86_64::instructions::interrupts::enable_and_hlt();
        x86_64::instructions::interrupts::disable();
    }
}

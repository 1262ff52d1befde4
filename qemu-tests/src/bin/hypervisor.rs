//! Trap and emulate, the first part of a hobby hypervisor: a guest runs at
//! CPL 3 and drives its PMU with the crate's own NetBurst driver over the
//! hardware backend (`X86Msr`), as a kernel on a Pentium 4 would. Its
//! RDMSR, WRMSR and RDPMC fault at CPL 3 (#GP); the hypervisor's #GP
//! handler decodes the instruction (0F 32, 0F 30, 0F 33) and answers it
//! through `pmu::virt`: the guest's virtual NetBurst PMU
//! (`pmu::virt::vpmu::VirtualPmu`, the register-level model checked by the
//! guest's `GuestPolicy`), then resumes the guest after the instruction;
//! an access the policy refuses is a #GP injected into the guest, whose own
//! handler sees it. A hypercall (`int 0x82`) feeds the virtual PMU the
//! events the guest "caused". QEMU has no PMU: every count comes from the
//! model.
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU64, Ordering};

use hobby::boot::BootInfo;
use hobby::idt::{self, InterruptFrame};
use hobby::test::Outcome;
use hobby::{case, check_eq, println, user};
use pmu::access::{MsrAccess, X86Msr};
use pmu::arch::netburst::driver::{CounterConfig, NetBurstDriver};
use pmu::arch::netburst::pmi::PmiState;
use pmu::arch::netburst::{Escr, EventSpec};
use pmu::detect;
use pmu::model::netburst::{EscrGroup, EventKind, LogicalProcessor, Privilege};
use pmu::virt::netburst::{GuestGp, GuestPolicy};
use pmu::virt::vpmu::VirtualPmu;

hobby::entry_point!(main);

/// The guest's virtual PMU: a one-processor Prescott (model 3) without
/// PEBS.
static VPMU: spin::Mutex<VirtualPmu> = spin::Mutex::new(VirtualPmu::new(GuestPolicy::new(3)));
/// The guest's CR4.PCE, as the hypervisor keeps it.
static GUEST_PCE: AtomicU64 = AtomicU64::new(1);
/// Instructions emulated, and #GPs injected into the guest (with the last
/// reason, for the report).
static EMULATED: AtomicU64 = AtomicU64::new(0);
static INJECTED: AtomicU64 = AtomicU64::new(0);
/// The guest's own #GP handler counts what it is sent.
static GUEST_SAW_GP: AtomicU64 = AtomicU64::new(0);
const HYPERCALL_FEED: u8 = 0x82;
const RUNNING: EventKind = EventKind::new(EscrGroup::Fsb, 0x13, 1);

fn main(_: &'static BootInfo) -> ! {
    println!("hypervisor: every PMU count below comes from the NetBurst PMU model, not hardware");
    // SAFETY: the handlers below only resume the guest after an emulated
    // instruction (its registers changed as the instruction would), or
    // enter the guest's own #GP handler on its stack; a #GP at CPL 0 is
    // left to the kernel.
    unsafe {
        idt::set_frame_handler(13, on_gp);
        idt::set_frame_handler(HYPERCALL_FEED, on_feed);
        idt::allow_from_user(HYPERCALL_FEED);
    }
    hobby::test::run("hypervisor", &[case!(a_guest_driver_traps_and_is_emulated)])
}

/// The guest's #GP: [`user`] code's RDMSR/WRMSR/RDPMC, answered by the
/// virtual PMU.
fn on_gp(frame: &mut InterruptFrame) -> bool {
    if frame.cs & 3 != 3 {
        return false;
    }
    // SAFETY: the guest's code is mapped (all memory is), and RIP is the
    // faulting instruction's first byte.
    let opcode = unsafe { core::ptr::read_unaligned(frame.rip as *const [u8; 2]) };
    let ecx = frame.rcx as u32;
    let mut vpmu = VPMU.lock();
    let answer = match opcode {
        [0x0F, 0x30] => {
            let value = frame.rdx << 32 | (frame.rax & 0xFFFF_FFFF);
            vpmu.wrmsr(ecx, value)
                .and_then(|pmu| pmu.then_some(None).ok_or(GuestGp::NoSuchMsr { msr: ecx }))
        }
        [0x0F, 0x32] => vpmu
            .rdmsr(ecx)
            .and_then(|v| v.map(Some).ok_or(GuestGp::NoSuchMsr { msr: ecx })),
        [0x0F, 0x33] => {
            let pce = GUEST_PCE.load(Ordering::SeqCst) != 0;
            vpmu.rdpmc(ecx, pce, 3).map(Some)
        }
        _ => Err(GuestGp::NoSuchMsr { msr: ecx }),
    };
    match answer {
        Ok(value) => {
            if let Some(v) = value {
                frame.rax = v & 0xFFFF_FFFF;
                frame.rdx = v >> 32;
            }
            frame.rip += 2;
            EMULATED.fetch_add(1, Ordering::SeqCst);
        }
        Err(_) => {
            // Into the guest's own #GP handler, as a CPU at the guest's
            // level would deliver it: the faulting RIP on its stack.
            frame.rsp -= 8;
            // SAFETY: the guest's stack, mapped and its own, has room below
            // its stack pointer.
            unsafe { (frame.rsp as *mut u64).write(frame.rip) };
            frame.rip = guest_gp_entry as *const () as u64;
            INJECTED.fetch_add(1, Ordering::SeqCst);
        }
    }
    true
}

/// The hypercall: the guest ran RAX cycles (`global_power_events`
/// RUNNING) at CPL 0 of its own.
fn on_feed(frame: &mut InterruptFrame) -> bool {
    if frame.cs & 3 != 3 {
        return false;
    }
    VPMU.lock()
        .feed(RUNNING.on(LogicalProcessor::T0, Privilege::Os, frame.rax));
    true
}

/// The guest's #GP handler (at CPL 3): counts the fault and resumes after
/// the 2-byte instruction that raised it.
#[unsafe(naked)]
unsafe extern "C" fn guest_gp_entry() {
    core::arch::naked_asm!(
        "lock inc qword ptr [rip + {saw}]",
        "add qword ptr [rsp], 2",
        "ret",
        saw = sym GUEST_SAW_GP,
    )
}

/// The guest's kernel, at CPL 3: the crate's NetBurst driver on the
/// hardware backend, counting its own cycles.
extern "C" fn guest_main(_: u64) -> ! {
    pmu::owner!(GuestPackage);
    static GUEST_PMI: PmiState = PmiState::new();
    // SAFETY: the guest believes it runs at CPL 0 on a Pentium 4; every
    // access traps to the hypervisor, which emulates it.
    let msr = unsafe { X86Msr::new() };
    // The hypervisor shows the guest a one-processor Prescott.
    let cpu = detect::NetBurst {
        model: 3,
        msr_instructions: true,
        perf_mon_available: true,
        pebs_available: false,
        hyper_threading: false,
        logical_processors: 1,
    };
    let Ok((mut d, c)) = NetBurstDriver::<GuestPackage, _>::take(msr, &cpu, &GUEST_PMI) else {
        user::exit(u64::MAX)
    };
    let spec: EventSpec = pmu::netburst_event!("global_power_events:RUNNING:k");
    let Some(c2) =
        c.c2.configure(&mut d, &CounterConfig::counting(spec, Escr::FsbEscr1))
            .ok()
            .and_then(|h| h.enable(&mut d).ok())
    else {
        user::exit(u64::MAX - 1)
    };
    // The guest runs 1,000 cycles (the hypervisor feeds them).
    // SAFETY: the hypercall gate, opened to CPL 3; RAX is its argument.
    unsafe { core::arch::asm!("int 0x82", in("rax") 1000u64) };
    let counted = c2.read(&mut d).unwrap_or(u64::MAX - 2);
    // An illegal write: T1_OS in a one-processor guest's ESCR.
    let Ok(()) = d.msr().write_msr(0x3A3, 1 << 1);
    let _ = c2.release(&mut d);
    user::exit(counted)
}

static mut GUEST_STACK: [u8; 64 * 1024] = [0; 64 * 1024];

fn a_guest_driver_traps_and_is_emulated() -> Outcome {
    let stack = &raw mut GUEST_STACK;
    // SAFETY: `guest_main` runs at CPL 3 on its own stack (used by nothing
    // else) and ends with the exit hypercall.
    let counted = unsafe { user::run(guest_main, 0, &mut *stack) }?;
    check_eq!(counted, 1000, "the guest's driver read its virtual counter");
    check_eq!(INJECTED.load(Ordering::SeqCst), 1, "one #GP into the guest");
    check_eq!(
        GUEST_SAW_GP.load(Ordering::SeqCst),
        1,
        "the guest's handler saw it"
    );
    let emulated = EMULATED.load(Ordering::SeqCst);
    // take: 18 CCCRs; configure: ESCR, counter; enable: CCCR; read: RDPMC;
    // release: CCCR, counter.
    check_eq!(
        emulated,
        18 + 2 + 1 + 1 + 2,
        "every access trapped and emulated"
    );
    let vpmu = VPMU.lock();
    check_eq!(vpmu.model().cccr(2) & (1 << 12), 0, "released: CCCR 2 idle");
    println!(
        "hypervisor: a CPL-3 guest's NetBurst driver ran on its virtual PMU: {emulated} MSR/RDPMC accesses emulated, 1 #GP injected, its counter read {counted} (model)"
    );
    Ok(())
}

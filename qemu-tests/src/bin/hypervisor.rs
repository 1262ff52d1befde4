//! A hobby hypervisor by trap and emulate (TCG has no VMX). First case: a
//! guest runs at CPL 3 and drives its PMU with the crate's own NetBurst
//! driver over the
//! hardware backend (`X86Msr`), as a kernel on a Pentium 4 would. Its
//! RDMSR, WRMSR and RDPMC fault at CPL 3 (#GP); the hypervisor's #GP
//! handler decodes the instruction (0F 32, 0F 30, 0F 33) and answers it
//! through `pmu::virt`: the guest's virtual NetBurst PMU
//! (`pmu::virt::vpmu::VirtualPmu`, the register-level model checked by the
//! guest's `GuestPolicy`), then resumes the guest after the instruction;
//! an access the policy refuses is a #GP injected into the guest, whose own
//! handler sees it. A hypercall (`hobby::user::call`, the HLT gate: `INT n`
//! at CPL 3 is not delivered by every hypervisor this kernel itself runs
//! under) feeds the virtual PMU the events the guest "caused".
//!
//! Second case: two such guests on one physical PMU (the NetBurst model
//! playing the host's Pentium 4), switched by the APIC timer 1,000 times
//! (300 under KVM, where every tick costs VM exits; the timer one-shot, so
//! a guest runs a whole period after every switch) with
//! a PMU world switch each time (`pmu::virt::netburst::
//! PmuContext`), while the host keeps its own counter: the guests' MSR
//! accesses are checked by `pmu::virt::netburst::check_msr_write`/`check_msr_read`
//! and applied to the physical PMU while the guest is loaded; each guest
//! samples its own workload and gets its PMIs in its own handler with its
//! own RIP (the virtual LVT entry masked on delivery); over 30 illegal
//! writes are each a #GP in the guest; RDPMC works with the guest's CR4.PCE
//! and faults without. QEMU has no PMU: every count comes from the model.
//!
//! Third case: issue 23's cascade leak, contained. Guest 0 cascades
//! counter 3 from counter 1 and lets counter 1 wrap on its last event (its
//! PMI still to come); the world switch takes both CCCRs idle; guest 1
//! then counts 100 events on counter 2 through FSB_ESCR1, the ESCR guest
//! 0's counter 3 selects, and reads that counter and its CCCR: 0 and the
//! idle image, not 100 and guest 0's 4003C000H; its one-processor
//! violations (a CCCR with active thread 01b, an unimplemented PMU MSR,
//! PEBS, the DS area) are #GPs. Back in guest 0 the owed PMI arrives
//! through the crate's virtual LVT entry (`pmu::virt::VirtualLvt`, masked
//! by the delivery) and its counters are as it left them.
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU64, Ordering};

use hobby::boot::BootInfo;
use hobby::idt::{self, InterruptFrame};
use hobby::test::Outcome;
use hobby::{case, check, check_eq, println, user};
use pmu::access::{MsrAccess, X86Msr};
use pmu::arch::netburst::driver::{CounterConfig, NetBurstDriver};
use pmu::arch::netburst::{Escr, EventSpec, NetBurstPmu};
use pmu::detect;
use pmu::model::netburst::{EscrGroup, EventKind, LogicalProcessor, Privilege};
use pmu::virt::netburst::{GuestGp, GuestPolicy};
use pmu::virt::vpmu::VirtualPmu;

// The kvm-unit-tests cases, in files of their own beside this one.
#[path = "hypervisor/kut.rs"]
mod kut;
#[path = "hypervisor/kut_amd.rs"]
mod kut_amd;
#[path = "hypervisor/kut_intel.rs"]
mod kut_intel;

hobby::entry_point!(main);

/// A guest's register backend: the real RDMSR, WRMSR and RDPMC, executed
/// at CPL 3 inside a guest, where each one traps to this kernel's
/// hypervisor, which emulates it (or injects a #GP the guest's handler
/// takes). So any register and value is safe to ask for here, and the
/// guest reaches its (virtual) PMU through the open [`MsrAccess`], as a
/// kernel's own backend does.
struct GuestMsr(X86Msr);

impl GuestMsr {
    /// The guest's backend.
    fn new() -> GuestMsr {
        // SAFETY: the guest believes it runs at CPL 0 on this CPU; every
        // access traps to the hypervisor.
        GuestMsr(unsafe { X86Msr::new() })
    }
}

impl MsrAccess for GuestMsr {
    type Error = core::convert::Infallible;

    fn read_msr(&mut self, msr: u32) -> Result<u64, Self::Error> {
        // SAFETY: at CPL 3 the instruction traps; the hypervisor emulates
        // it or sends the guest a #GP (`GuestMsr`).
        Ok(unsafe { self.0.read_msr(msr) })
    }

    fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Self::Error> {
        // SAFETY: as for `read_msr`: nothing this kernel's memory depends
        // on is written, whatever the register and value.
        unsafe { self.0.write_msr(msr, value) };
        Ok(())
    }

    fn rdpmc(&mut self, index: u32) -> Result<u64, Self::Error> {
        // SAFETY: as for `read_msr` (RDPMC at CPL 3 traps or faults by
        // CR4.PCE, which the hypervisor keeps for the guest).
        Ok(unsafe { self.0.rdpmc(index) })
    }
}

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
        user::set_gp_handler(on_gp);
        idt::set_frame_handler(HYPERCALL_FEED, on_feed);
    }
    hobby::test::run(
        "hypervisor",
        &[
            case!(a_guest_driver_traps_and_is_emulated),
            case!(two_guests_share_the_pmu_by_world_switch),
            case!(a_switched_out_cascade_is_contained),
            case!(an_intel_guest_passes_kvm_unit_tests_pmu_checks),
            case!(an_amd_guest_passes_kvm_unit_tests_pmu_checks),
        ],
    )
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
    // SAFETY: the guest's virtual PMU is one package of its own, and this is
    // its one value.
    static GUEST_PACKAGE: NetBurstPmu = unsafe { NetBurstPmu::new() };
    let msr = GuestMsr::new();
    // The hypervisor shows the guest a one-processor Prescott.
    let cpu = detect::NetBurstCpu {
        model: 3,
        msr_instructions: true,
        perf_mon_available: true,
        pebs_available: false,
        hyper_threading: false,
        logical_processors: 1,
    };
    let Ok((mut d, c)) = NetBurstDriver::<GuestPackage, _>::take(msr, &cpu, &GUEST_PACKAGE) else {
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
    user::call(HYPERCALL_FEED, 1000, 0);
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

mod two {
    //! Two guests, one physical PMU, the world switch on every timer tick.

    use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

    use super::GuestMsr;
    use hobby::idt::{self, InterruptFrame};
    use hobby::timer::{ApicTimer, Divide};
    use hobby::user;
    use pmu::access::MsrAccess;
    use pmu::apic::{LvtPerfCounter, LvtPerfCounterEntry, PmiDelivery, Vector};
    use pmu::arch::handle_pmi;
    use pmu::arch::netburst::driver::{CounterConfig, NetBurstDriver};
    use pmu::arch::netburst::pmi::overflow_rule;
    use pmu::arch::netburst::{
        Counter, CounterSet, Escr, EscrSet, EventName, EventSpec, LogicalProcessor, NetBurstPmu,
    };
    use pmu::counter::Owner;
    use pmu::model::netburst::{
        Config, EscrGroup, EventKind, LogicalProcessor as ModelLp, NetBurstModel, Privilege,
    };
    use pmu::sampling::{SampleAfter, SampleBuffer};
    use pmu::virt::VirtualLvt;
    use pmu::virt::netburst::Verdict;
    use pmu::virt::netburst::{
        EventFilter, GuestPolicy, MISC_ENABLE_PMU_BITS, PmuContext, check_msr_read,
        check_msr_write, emulate_rdpmc, scrub_all,
    };

    /// The physical PMU: the model playing a one-processor Prescott.
    static HW: spin::Mutex<NetBurstModel> =
        spin::Mutex::new(NetBurstModel::new(Config::new(3, false)));
    /// Both guests' policy: the host keeps counter 0 and FSB_ESCR0;
    /// `x87_FP_uop` is filtered out.
    pub const POLICY: GuestPolicy = GuestPolicy {
        model: 3,
        logical_processors: 1,
        filter: EventFilter::Deny(&[EventName::X87FpUop]),
        host_counters: CounterSet::EMPTY.with(Counter::BpuCounter0),
        host_escrs: EscrSet::EMPTY.with(Escr::FsbEscr0),
        host_tagging: false,
    };

    /// A guest's registers while it is not running.
    #[derive(Clone, Copy, Default)]
    struct Regs([u64; 15], u64, u64, u64);

    struct Guest {
        regs: Regs,
        ctx: PmuContext,
        /// Its virtual LVT entry and pending PMI (the crate's).
        lvt: VirtualLvt,
        pce: bool,
        done: bool,
        result: u64,
        /// Events fed while its counter 2 was enabled.
        fed: u64,
        /// In its PMI handler (from delivery to the handler's return,
        /// the PMI_RETURN hypercall that stands for its IRET): its virtual
        /// interrupts are off, so the tick neither feeds it nor switches
        /// away, and no other PMI is delivered to it (as a CPU runs a PMI
        /// handler with IF clear). Until its return, not its unmasking
        /// write: where the platform runs the guest slowly (a hypervisor
        /// emulating this kernel), a PMI delivered between the two would
        /// nest handlers without bound.
        in_pmi: bool,
    }

    impl Guest {
        const fn new() -> Guest {
            Guest {
                regs: Regs([0; 15], 0, 0, 0),
                ctx: PmuContext::new(),
                lvt: VirtualLvt::new(),
                pce: true,
                done: false,
                result: 0,
                fed: 0,
                in_pmi: false,
            }
        }
    }

    static GUESTS: spin::Mutex<[Guest; 2]> = spin::Mutex::new([Guest::new(), Guest::new()]);
    pub static CURRENT: AtomicUsize = AtomicUsize::new(0);
    pub static SWITCHES: AtomicU64 = AtomicU64::new(0);
    pub static TICKS: AtomicU64 = AtomicU64::new(0);
    /// Cycles fed to the physical PMU in all.
    pub static HOST_FED: AtomicU64 = AtomicU64::new(0);
    pub static GPS: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];
    pub static PMIS: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];
    pub static SAMPLES: [SampleBuffer<2048>; 2] = [const { SampleBuffer::new() }; 2];
    pub static RDPMC_WITH_PCE: AtomicU64 = AtomicU64::new(0);
    /// Each guest's package: the virtual PMU it sees (its context, loaded
    /// on the physical PMU while it runs) is a package of its own.
    // SAFETY: one value per guest's virtual package, each its only one.
    static GUEST_PACKAGES: [NetBurstPmu; 2] = [const { unsafe { NetBurstPmu::new() } }; 2];
    /// Switches the guests run to: 1,000 under TCG, where a tick costs
    /// microseconds; 300 elsewhere: under the project machine's KVM a tick
    /// (its EOI, the timer armed again, the world switch) and every
    /// trapped access cost VM exits, so most ticks land on a trapped
    /// access (guest 0's 31 illegal writes take about as many switches)
    /// and 300 give each guest over 20 PMIs.
    pub fn target_switches() -> u64 {
        if hobby::accel() == hobby::Accel::Tcg {
            1000
        } else {
            300
        }
    }
    /// [`target_switches`], for the guests.
    pub static TARGET: AtomicU64 = AtomicU64::new(u64::MAX);
    /// The tick's period, in APIC timer counts at divide 1 (200 µs at the
    /// 1 GHz QEMU's APIC timer runs at).
    const PERIOD: u32 = 200_000;
    /// RUNNING events per tick, and the guests' sample period.
    pub const K: u64 = 500;
    pub const N: u64 = 1500;
    const TICK: u8 = 0xE0;
    const SET_LVT: u8 = 0x83;
    const SET_PCE: u8 = 0x84;
    const DONE: u8 = 0x85;
    const PMI_RETURN: u8 = 0x86;
    const RUNNING: EventKind = EventKind::new(EscrGroup::Fsb, 0x13, 1);

    fn timer() -> ApicTimer {
        // SAFETY: the boot CPU's APIC at its default base; only this
        // kernel's case programs its timer.
        unsafe { ApicTimer::at_default_base() }
    }

    fn save(frame: &InterruptFrame) -> Regs {
        let f = frame;
        Regs(
            [
                f.r15, f.r14, f.r13, f.r12, f.r11, f.r10, f.r9, f.r8, f.rbp, f.rdi, f.rsi, f.rdx,
                f.rcx, f.rbx, f.rax,
            ],
            f.rip,
            f.rflags,
            f.rsp,
        )
    }

    fn load(frame: &mut InterruptFrame, r: &Regs) {
        let [
            r15,
            r14,
            r13,
            r12,
            r11,
            r10,
            r9,
            r8,
            rbp,
            rdi,
            rsi,
            rdx,
            rcx,
            rbx,
            rax,
        ] = r.0;
        (
            frame.r15, frame.r14, frame.r13, frame.r12, frame.r11, frame.r10, frame.r9, frame.r8,
        ) = (r15, r14, r13, r12, r11, r10, r9, r8);
        (
            frame.rbp, frame.rdi, frame.rsi, frame.rdx, frame.rcx, frame.rbx, frame.rax,
        ) = (rbp, rdi, rsi, rdx, rcx, rbx, rax);
        (frame.rip, frame.rflags, frame.rsp) = (r.1, r.2, r.3);
    }

    /// Enters guest `g`'s handler at `entry` as a CPU delivers to it: the
    /// interrupted RIP on its stack.
    fn deliver(frame: &mut InterruptFrame, entry: u64) {
        frame.rsp -= 8;
        // SAFETY: the guest's own stack, mapped, with room below its
        // stack pointer.
        unsafe { (frame.rsp as *mut u64).write(frame.rip) };
        frame.rip = entry;
    }

    /// At guest entry: its pending PMI, if its virtual LVT entry lets it
    /// through (which masks the entry, as a NetBurst APIC does).
    fn maybe_pmi(frame: &mut InterruptFrame, guest: &mut Guest, g: usize) {
        if guest.lvt.deliver().is_some() {
            guest.in_pmi = true;
            PMIS[g].fetch_add(1, Ordering::SeqCst);
            deliver(frame, guest_pmi_entry as *const () as u64);
        }
    }

    /// Switches from the running guest to the other (if it is not done):
    /// registers and PMU context.
    fn switch(frame: &mut InterruptFrame, guests: &mut [Guest; 2], hw: &mut NetBurstModel) {
        let g = CURRENT.load(Ordering::SeqCst);
        let next = 1 - g;
        if guests[next].done {
            return;
        }
        guests[g].regs = save(frame);
        let (a, b) = guests.split_at_mut(1);
        let (cur, nxt) = if g == 0 {
            (&mut a[0], &mut b[0])
        } else {
            (&mut b[0], &mut a[0])
        };
        // An overflow whose PMI the switch withdrew is the guest's PMI,
        // delivered at its next entry.
        let ok = cur
            .ctx
            .save(hw)
            .and_then(|owed| {
                if !owed.is_empty() {
                    cur.lvt.raise();
                }
                cur.ctx.scrub(hw)
            })
            .and_then(|()| nxt.ctx.restore(hw));
        if ok.is_err() {
            super::HOST_FAULTS.fetch_add(1, Ordering::SeqCst);
        }
        load(frame, &nxt.regs);
        CURRENT.store(next, Ordering::SeqCst);
        SWITCHES.fetch_add(1, Ordering::SeqCst);
    }

    /// The timer tick, taken only in a guest: the running guest caused K
    /// cycles; its PMI, if it overflowed, is pending for it; then the other
    /// guest runs.
    ///
    /// The timer is one-shot, armed again when the handler is done: a
    /// guest runs a whole [`PERIOD`] between ticks however long the switch
    /// took (under a hypervisor that emulates this kernel a switch can take
    /// longer than the period, and periodic ticks would then starve the
    /// guests).
    fn on_tick(frame: &mut InterruptFrame) -> bool {
        timer().eoi();
        if frame.cs & 3 != 3 {
            return true;
        }
        tick(frame);
        arm();
        true
    }

    /// Arms the next tick.
    fn arm() {
        if let Some(vector) = Vector::new(TICK) {
            timer().start_one_shot(vector, Divide::By1, PERIOD);
        }
    }

    /// [`on_tick`]'s work, in a guest.
    fn tick(frame: &mut InterruptFrame) {
        TICKS.fetch_add(1, Ordering::SeqCst);
        let g = CURRENT.load(Ordering::SeqCst);
        let mut guests = GUESTS.lock();
        if guests[g].in_pmi {
            // The K cycles a tick feeds are the workload's; the handler's
            // own are not modelled. Fed here, they would make the next PMI
            // due before the handler returns wherever the handler outlasts
            // N / K ticks (under KVM each access it traps takes a tick):
            // a PMI storm that never lets the guest back to its work.
            return;
        }
        let mut hw = HW.lock();
        let cycles = K;
        if hw.cccr(2) & 1 << 12 != 0 {
            guests[g].fed += cycles;
        }
        HOST_FED.fetch_add(cycles, Ordering::SeqCst);
        hw.inject(RUNNING.on(ModelLp::T0, Privilege::Os, cycles));
        if hw.take_pmi(ModelLp::T0).is_some() {
            // The host's PMI: the guest's if one of its counters overflowed.
            match guests[g].ctx.take_overflows(&mut *hw) {
                Ok(mine) if !mine.is_empty() => guests[g].lvt.raise(),
                Ok(_) => {}
                Err(_) => {
                    super::HOST_FAULTS.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
        switch(frame, &mut guests, &mut hw);
        let g = CURRENT.load(Ordering::SeqCst);
        maybe_pmi(frame, &mut guests[g], g);
    }

    /// A guest's RDMSR/WRMSR/RDPMC: checked by its policy, applied to the
    /// physical PMU (it is loaded), or a #GP into the guest.
    fn on_gp(frame: &mut InterruptFrame) -> bool {
        if frame.cs & 3 != 3 {
            return false;
        }
        let g = CURRENT.load(Ordering::SeqCst);
        // SAFETY: the faulting instruction's first bytes, mapped.
        let opcode = unsafe { core::ptr::read_unaligned(frame.rip as *const [u8; 2]) };
        let msr = frame.rcx as u32;
        let mut guests = GUESTS.lock();
        let mut hw = HW.lock();
        let answer: Option<Option<u64>> = match opcode {
            [0x0F, 0x30] => {
                let value = frame.rdx << 32 | (frame.rax & 0xFFFF_FFFF);
                match check_msr_write(&POLICY, msr, value) {
                    Verdict::Apply => {
                        guests[g].ctx.record(msr, value);
                        hw.write_msr(msr, value).ok().map(|()| None)
                    }
                    _ => None,
                }
            }
            [0x0F, 0x32] => match check_msr_read(&POLICY, msr) {
                Verdict::Apply => hw.read_msr(msr).ok().map(Some),
                Verdict::Emulate if msr == 0x1A0 => Some(Some(MISC_ENABLE_PMU_BITS)),
                _ => None,
            },
            [0x0F, 0x33] => {
                let pce = guests[g].pce;
                emulate_rdpmc(&POLICY, msr, pce, 3, |c| hw.counter(usize::from(c.index())))
                    .ok()
                    .map(Some)
            }
            _ => None,
        };
        match answer {
            Some(value) => {
                if let Some(v) = value {
                    frame.rax = v & 0xFFFF_FFFF;
                    frame.rdx = v >> 32;
                }
                frame.rip += 2;
            }
            None => {
                GPS[g].fetch_add(1, Ordering::SeqCst);
                deliver(frame, guest_gp_entry as *const () as u64);
            }
        }
        true
    }

    /// Hypercalls: the guest's LVT entry (RAX), its CR4.PCE (RAX), its PMI
    /// handler's return, done (RAX: its result).
    fn on_hypercall(frame: &mut InterruptFrame) -> bool {
        if frame.cs & 3 != 3 {
            return false;
        }
        let g = CURRENT.load(Ordering::SeqCst);
        let mut guests = GUESTS.lock();
        match frame.vector as u8 {
            SET_LVT => {
                guests[g]
                    .lvt
                    .write(LvtPerfCounter::from_bits(frame.rax as u32));
                if !guests[g].in_pmi {
                    maybe_pmi(frame, &mut guests[g], g);
                }
            }
            PMI_RETURN => {
                guests[g].in_pmi = false;
                maybe_pmi(frame, &mut guests[g], g);
            }
            SET_PCE => guests[g].pce = frame.rax != 0,
            _ => {
                guests[g].done = true;
                guests[g].result = frame.rax;
                if guests[1 - g].done {
                    timer().stop();
                    // SAFETY: the last guest is done: back to `run_with`.
                    unsafe { user::return_to_kernel(frame) };
                } else {
                    let mut hw = HW.lock();
                    switch(frame, &mut guests, &mut hw);
                }
            }
        }
        true
    }

    /// The guest's #GP handler (CPL 3): counts it (the hypervisor did) and
    /// resumes after the 2-byte instruction.
    #[unsafe(naked)]
    unsafe extern "C" fn guest_gp_entry() {
        core::arch::naked_asm!("add qword ptr [rsp], 2", "ret")
    }

    /// The guest's PMI entry (CPL 3): the registers a call may clobber and
    /// the flags saved, `guest_on_pmi(interrupted RIP)` on an aligned
    /// stack, all restored, the PMI_RETURN hypercall, back to the
    /// interrupted code.
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
            "mov rdi, [rsp + 88]",
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
            // PMI_RETURN (the gate, `hobby::user::call`), RCX kept: the
            // handler's IRET.
            "push rcx",
            "mov ecx, {pmi_return}",
            "hlt",
            "pop rcx",
            "ret",
            handler = sym guest_on_pmi,
            pmi_return = const PMI_RETURN,
        )
    }

    /// The guest's LVT entry, through the hypervisor.
    struct GuestLvt;

    impl LvtPerfCounterEntry for GuestLvt {
        fn write_lvt_perf_counter(&mut self, entry: LvtPerfCounter) {
            user::call(SET_LVT, u64::from(entry.bits()), 0);
        }
    }

    fn entry() -> LvtPerfCounter {
        LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(0xF0).unwrap()))
    }

    /// The guest kernel's PMI handler: the crate's handler over the
    /// guest's backend (every access traps), a sample at the guest's RIP.
    extern "C" fn guest_on_pmi(rip: u64) {
        let g = CURRENT.load(Ordering::SeqCst);
        let mut msr = GuestMsr::new();
        let _ = handle_pmi(
            GUEST_PACKAGES[g].logical(LogicalProcessor::T0),
            &mut msr,
            &mut GuestLvt,
            entry(),
            rip,
            |s| {
                SAMPLES[g].push(s.with_payload(()));
            },
        );
    }

    /// 31 writes no guest may make (reserved bits, the missing logical
    /// processor, the host's registers, a filtered event, PEBS, an absent
    /// ESCR, a read-only MSR, no such MSR).
    pub const ILLEGAL: [(u32, u64); 31] = [
        (0x301, 1 << 40),
        (0x305, u64::MAX),
        (0x311, 1 << 45),
        (0x300, 5),
        (0x361, 0x3_D000 | 1),
        (0x361, 0x3_D000 | 1 << 28),
        (0x361, 1 << 40),
        (0x371, 1 << 2),
        (0x361, 0x3_D000 | 1 << 27),
        (0x360, 0),
        (0x361, 0x3_D000),
        (0x362, 0x3_C000 | 1 << 30),
        (0x361, 0x3_D000 | 1 << 11),
        (0x3B8, 0x0400_0200 | 1 << 3 | 1 << 31),
        (0x3B8, 1 << 40),
        (0x3B8, 0x0400_0200 | 1 << 1),
        (0x3B8, 0x0400_0200 | 1),
        (0x3A2, 0x2600_0200 | 1 << 3),
        (0x3A2, 0),
        (0x3BA, 0x0200_0200 | 1 << 3),
        (0x3BB, 0),
        (0x3A5, 0x0800_0000 | 1 << 24 | 1 << 3),
        (0x3A4, 0x0800_0000 | 1 << 24 | 1 << 2),
        (0x3F1, 1 << 25),
        (0x3F1, 1 << 26),
        (0x3F1, 1 << 13),
        (0x3F1, 1 << 63),
        (0x3F2, 1 << 2),
        (0x600, 0x1000),
        (0x1A0, 0),
        (0x10, 0),
    ];

    /// A guest kernel (CPL 3), as owner `O`: 31 illegal writes (guest 0),
    /// RDPMC without and with CR4.PCE, then sampling its own cycles on
    /// counter 2 every N over the workload until the hypervisor has
    /// switched [`TARGET`] times; done with the cycles its counter
    /// accounts for (periods x N + residual).
    fn guest<O: Owner>(g: usize) -> ! {
        let mut msr = GuestMsr::new();
        if g == 0 {
            for (reg, value) in ILLEGAL {
                let Ok(()) = msr.write_msr(reg, value);
            }
        }
        user::call(SET_PCE, 0, 0);
        let Ok(_) = msr.rdpmc(2);
        user::call(SET_PCE, 1, 0);
        let Ok(v) = msr.rdpmc(2);
        RDPMC_WITH_PCE.fetch_add(u64::from(v == 0), Ordering::SeqCst);
        let cpu = pmu::detect::NetBurstCpu {
            model: 3,
            msr_instructions: true,
            perf_mon_available: true,
            pebs_available: false,
            hyper_threading: false,
            logical_processors: 1,
        };
        let done = |v: u64| -> ! {
            loop {
                // DONE does not come back.
                user::call(DONE, v, 0);
            }
        };
        let Ok((mut d, c)) = NetBurstDriver::<O, _>::take(msr, &cpu, &GUEST_PACKAGES[g]) else {
            done(u64::MAX)
        };
        GuestLvt.write_lvt_perf_counter(entry());
        let spec: EventSpec = pmu::netburst_event!("global_power_events:RUNNING:k");
        let Ok(every) = SampleAfter::new(N, overflow_rule()) else {
            done(u64::MAX)
        };
        let config = CounterConfig::counting(spec, Escr::FsbEscr1).sampling(every);
        let Some(c2) =
            c.c2.configure(&mut d, &config)
                .ok()
                .and_then(|h| h.enable(&mut d).ok())
        else {
            done(u64::MAX - 1)
        };
        while SWITCHES.load(Ordering::SeqCst) < TARGET.load(Ordering::SeqCst) {
            hobby::workload::run(1);
        }
        let Ok(c2) = c2.halt(&mut d) else {
            done(u64::MAX - 2)
        };
        let Ok(raw) = c2.read(&mut d) else {
            done(u64::MAX - 3)
        };
        let (owed, residual) = every.split(raw);
        let accounted = (GUEST_PACKAGES[g].pmi().periods(2) + owed) * N + residual;
        let _ = c2.release(&mut d);
        done(accounted)
    }

    pub extern "C" fn guest_a(g: u64) -> ! {
        pmu::owner!(GuestA);
        guest::<GuestA>(g as usize)
    }

    extern "C" fn guest_b(g: u64) -> ! {
        pmu::owner!(GuestB);
        guest::<GuestB>(g as usize)
    }

    static mut STACKS: [[u8; 64 * 1024]; 2] = [[0; 64 * 1024]; 2];

    /// What the case checks.
    pub struct Outcome {
        pub results: [u64; 2],
        pub fed: [u64; 2],
        pub host_counter: u64,
        pub host_regs: (u64, u64),
        pub ticks: u64,
    }

    /// Runs both guests to the end.
    pub fn run() -> Result<Outcome, &'static str> {
        {
            let mut hw = HW.lock();
            // The host's own counter 0 on FSB_ESCR0: RUNNING at CPL 0.
            hw.write_msr(0x3A2, 0x2600_0200 | 1 << 3)
                .map_err(|_| "host ESCR")?;
            hw.write_msr(0x360, 0x3_D000).map_err(|_| "host CCCR")?;
            // Every register a guest can read starts from its neutral image.
            scrub_all(&POLICY, &mut *hw).map_err(|_| "scrub")?;
        }
        // SAFETY: the handlers only rewrite guest (CPL 3) frames, to
        // resume a guest or enter one of its handlers on its own stack, or
        // to return to the kernel when both are done.
        unsafe {
            user::set_gp_handler(on_gp);
            idt::set_frame_handler(TICK, on_tick);
            for v in [SET_LVT, SET_PCE, DONE, PMI_RETURN] {
                idt::set_frame_handler(v, on_hypercall);
            }
        }
        let stacks = &raw mut STACKS;
        // SAFETY: each guest has its own stack, used by nothing else.
        let (a, b) = unsafe { (&mut (*stacks)[0], &mut (*stacks)[1]) };
        GUESTS.lock()[1].regs = Regs(
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0],
            guest_b as *const () as u64,
            0x202,
            (b.as_mut_ptr() as u64 + b.len() as u64) & !0xF,
        );
        TARGET.store(target_switches(), Ordering::SeqCst);
        arm();
        // SAFETY: guest A runs at CPL 3 with interrupts on; every interrupt
        // that can come (the tick) has a handler; the last guest's DONE
        // returns here.
        unsafe { user::run_with(guest_a, 0, a, true) }.map_err(|_| "user mode")?;
        timer().stop();
        let guests = GUESTS.lock();
        let mut hw = HW.lock();
        let host_escr = hw.read_msr(0x3A2).map_err(|_| "host ESCR")?;
        Ok(Outcome {
            results: [guests[0].result, guests[1].result],
            fed: [guests[0].fed, guests[1].fed],
            host_counter: hw.counter(0),
            host_regs: (hw.cccr(0), host_escr),
            ticks: TICKS.load(Ordering::SeqCst),
        })
    }
}

mod leak {
    //! Issue 23's cascade leak on one physical PMU (the model), two guests
    //! run one after the other, a world switch between them.

    use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

    use super::GuestMsr;
    use hobby::idt::{self, InterruptFrame};
    use hobby::user;
    use pmu::access::MsrAccess;
    use pmu::apic::{LvtPerfCounter, LvtPerfCounterEntry, PmiDelivery, Vector};
    use pmu::arch::netburst::{Counter, CounterSet, Escr, EscrSet};
    use pmu::model::netburst::{
        Config, EscrGroup, EventKind, LogicalProcessor as ModelLp, NetBurstModel, Privilege,
    };
    use pmu::virt::VirtualLvt;
    use pmu::virt::netburst::Verdict;
    use pmu::virt::netburst::{
        GuestPolicy, PmuContext, check_msr_read, check_msr_write, scrub_all,
    };

    /// The physical PMU: the model playing a one-processor Prescott.
    static HW: spin::Mutex<NetBurstModel> =
        spin::Mutex::new(NetBurstModel::new(Config::new(3, false)));
    /// The host keeps counter 0 and FSB_ESCR0.
    const POLICY: GuestPolicy = GuestPolicy {
        host_counters: CounterSet::EMPTY.with(Counter::BpuCounter0),
        host_escrs: EscrSet::EMPTY.with(Escr::FsbEscr0),
        ..GuestPolicy::new(3)
    };

    struct Vm {
        ctx: [PmuContext; 2],
        lvt: [VirtualLvt; 2],
    }

    static VM: spin::Mutex<Vm> = spin::Mutex::new(Vm {
        ctx: [PmuContext::new(), PmuContext::new()],
        lvt: [VirtualLvt::new(), VirtualLvt::new()],
    });
    static CURRENT: AtomicUsize = AtomicUsize::new(0);
    /// #GPs injected into each guest.
    pub static GPS: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];
    /// PMIs guest 0's handler took.
    pub static PMIS: AtomicU64 = AtomicU64::new(0);
    /// What the guests read, by slot (see the guests).
    pub static SEEN: [AtomicU64; 8] = [const { AtomicU64::new(u64::MAX) }; 8];
    pub static HOST_FAULTS: AtomicU64 = AtomicU64::new(0);
    const FEED: u8 = 0x82;
    const SET_LVT: u8 = 0x83;
    const ENTER: u8 = 0x84;
    /// BPU_fetch_request TCMISS (BPU_ESCR0/1, select 03H) and
    /// global_power_events RUNNING (FSB_ESCR0/1, select 13H).
    const FETCH: EventKind = EventKind::new(EscrGroup::Bpu, 0x03, 1);
    const RUNNING: EventKind = EventKind::new(EscrGroup::Fsb, 0x13, 1);
    /// CCCR3 as guest 0 writes it: CASCADE, ESCR select 6, active thread
    /// 11b (the 4003C000H).
    pub const CASCADED_CCCR3: u64 = 0x4003_C000;

    fn fault() {
        HOST_FAULTS.fetch_add(1, Ordering::SeqCst);
    }

    /// The world switch: the running guest's context saved (an overflow
    /// whose PMI it withdrew raised on the guest's virtual LVT) and
    /// scrubbed, the other's restored.
    pub fn switch_to(next: usize) {
        let g = CURRENT.load(Ordering::SeqCst);
        let mut vm = VM.lock();
        let mut hw = HW.lock();
        match vm.ctx[g].save(&mut *hw) {
            Ok(owed) if !owed.is_empty() => vm.lvt[g].raise(),
            Ok(_) => {}
            Err(_) => fault(),
        }
        if vm.ctx[g].scrub(&mut *hw).is_err() || vm.ctx[next].restore(&mut *hw).is_err() {
            fault();
        }
        CURRENT.store(next, Ordering::SeqCst);
    }

    /// A guest's RDMSR/WRMSR: checked by its policy and applied to the
    /// physical PMU (its context is loaded), or a #GP into the guest.
    fn on_gp(frame: &mut InterruptFrame) -> bool {
        if frame.cs & 3 != 3 {
            return false;
        }
        let g = CURRENT.load(Ordering::SeqCst);
        // SAFETY: the faulting instruction's first bytes, mapped.
        let opcode = unsafe { core::ptr::read_unaligned(frame.rip as *const [u8; 2]) };
        let msr = frame.rcx as u32;
        let mut vm = VM.lock();
        let mut hw = HW.lock();
        let answer: Option<Option<u64>> = match opcode {
            [0x0F, 0x30] => {
                let value = frame.rdx << 32 | (frame.rax & 0xFFFF_FFFF);
                match check_msr_write(&POLICY, msr, value) {
                    Verdict::Apply => {
                        vm.ctx[g].record(msr, value);
                        hw.write_msr(msr, value).ok().map(|()| None)
                    }
                    _ => None,
                }
            }
            [0x0F, 0x32] => match check_msr_read(&POLICY, msr) {
                Verdict::Apply => hw.read_msr(msr).ok().map(Some),
                _ => None,
            },
            _ => None,
        };
        match answer {
            Some(value) => {
                if let Some(v) = value {
                    frame.rax = v & 0xFFFF_FFFF;
                    frame.rdx = v >> 32;
                }
                frame.rip += 2;
            }
            None => {
                GPS[g].fetch_add(1, Ordering::SeqCst);
                frame.rsp -= 8;
                // SAFETY: the guest's own stack, mapped, with room below
                // its stack pointer.
                unsafe { (frame.rsp as *mut u64).write(frame.rip) };
                frame.rip = guest_gp_entry as *const () as u64;
            }
        }
        true
    }

    /// Hypercalls: FEED (RAX events of kind RDX, 0 FETCH or 1 RUNNING,
    /// the guest caused; the host's PMI, if the model raised one, is the
    /// guest's when its counters overflowed), SET_LVT (RAX: the entry),
    /// ENTER (the guest's entry point: its pending PMI, if its entry lets
    /// it through).
    fn on_hypercall(frame: &mut InterruptFrame) -> bool {
        if frame.cs & 3 != 3 {
            return false;
        }
        let g = CURRENT.load(Ordering::SeqCst);
        let mut vm = VM.lock();
        match frame.vector as u8 {
            FEED => {
                let mut hw = HW.lock();
                let kind = if frame.rdx == 0 { FETCH } else { RUNNING };
                hw.inject(kind.on(ModelLp::T0, Privilege::Os, frame.rax));
                if hw.take_pmi(ModelLp::T0).is_some() {
                    match vm.ctx[g].take_overflows(&mut *hw) {
                        Ok(mine) if !mine.is_empty() => vm.lvt[g].raise(),
                        Ok(_) => {}
                        Err(_) => fault(),
                    }
                }
            }
            SET_LVT => vm.lvt[g].write(LvtPerfCounter::from_bits(frame.rax as u32)),
            _ => {
                if vm.lvt[g].deliver().is_some() {
                    frame.rsp -= 8;
                    // SAFETY: as in `on_gp`.
                    unsafe { (frame.rsp as *mut u64).write(frame.rip) };
                    frame.rip = guest_pmi_entry as *const () as u64;
                }
            }
        }
        true
    }

    /// The guests' #GP handler (CPL 3): resumes after the 2-byte
    /// instruction (the hypervisor counted it).
    #[unsafe(naked)]
    unsafe extern "C" fn guest_gp_entry() {
        core::arch::naked_asm!("add qword ptr [rsp], 2", "ret")
    }

    /// Guest 0's PMI handler (CPL 3): counts the PMI.
    #[unsafe(naked)]
    unsafe extern "C" fn guest_pmi_entry() {
        core::arch::naked_asm!(
            "lock inc qword ptr [rip + {pmis}]",
            "ret",
            pmis = sym PMIS,
        )
    }

    struct GuestLvt;

    impl LvtPerfCounterEntry for GuestLvt {
        fn write_lvt_perf_counter(&mut self, entry: LvtPerfCounter) {
            user::call(SET_LVT, u64::from(entry.bits()), 0);
        }
    }

    fn feed(kind: u64, n: u64) {
        user::call(FEED, n, kind);
    }

    fn msr() -> GuestMsr {
        GuestMsr::new()
    }

    /// Guest 0, first slice: counter 1 counts fetch requests on BPU_ESCR0
    /// from 10 below the wrap, with OVF_PMI; counter 3 cascades from it
    /// through FSB_ESCR1 (ESCR select 6), which guest 0 leaves at 0; 10
    /// events wrap counter 1 on the last one. SEEN\[0\]: its CCCR1.
    extern "C" fn guest0_first(_: u64) -> ! {
        let mut m = msr();
        let Some(vector) = Vector::new(0xF0) else {
            user::exit(1)
        };
        GuestLvt.write_lvt_perf_counter(LvtPerfCounter::new(PmiDelivery::Fixed(vector)));
        let Ok(()) = m.write_msr(0x3B2, 0x03 << 25 | 1 << 9 | 1 << 3);
        let Ok(()) = m.write_msr(0x301, (1 << 40) - 10);
        let Ok(()) = m.write_msr(0x361, 0x3_1000 | 1 << 26);
        let Ok(()) = m.write_msr(0x363, CASCADED_CCCR3);
        feed(0, 10);
        let Ok(v) = m.read_msr(0x361);
        SEEN[0].store(v, Ordering::SeqCst);
        user::exit(0)
    }

    /// Guest 1: its counter 2 on FSB_ESCR1 counts 100 RUNNING events;
    /// SEEN\[1..4\]: CCCR3, counter 3, counter 2. Then four writes a
    /// one-processor guest without PEBS may not make.
    extern "C" fn guest1(_: u64) -> ! {
        let mut m = msr();
        let Ok(()) = m.write_msr(0x3A3, 0x13 << 25 | 1 << 9 | 1 << 3);
        let Ok(()) = m.write_msr(0x302, 0);
        let Ok(()) = m.write_msr(0x362, 0x3_D000);
        feed(1, 100);
        for (slot, reg) in [(1, 0x363), (2, 0x303), (3, 0x302)] {
            let Ok(v) = m.read_msr(reg);
            SEEN[slot].store(v, Ordering::SeqCst);
        }
        for (reg, value) in [
            (0x363, 0x1_0000),
            (0x312, 0),
            (0x3F1, 1 << 25),
            (0x600, 0x1000),
        ] {
            let Ok(()) = m.write_msr(reg, value);
        }
        user::exit(0)
    }

    /// Guest 0 again: entered (its owed PMI delivered), SEEN\[4..7\]:
    /// counter 3, CCCR3, counter 1.
    extern "C" fn guest0_again(_: u64) -> ! {
        user::call(ENTER, 0, 0);
        let mut m = msr();
        for (slot, reg) in [(4, 0x303), (5, 0x363), (6, 0x301)] {
            let Ok(v) = m.read_msr(reg);
            SEEN[slot].store(v, Ordering::SeqCst);
        }
        user::exit(0)
    }

    static mut STACK: [u8; 64 * 1024] = [0; 64 * 1024];

    /// Runs guest 0, switches, guest 1, switches back, guest 0. Returns
    /// the host's counter, its CCCR and ESCR, and whether guest 0's LVT
    /// entry is masked.
    pub fn run() -> Result<(u64, u64, u64, bool), &'static str> {
        {
            let mut hw = HW.lock();
            // The host's own counter 0 on FSB_ESCR0: RUNNING at CPL 0.
            hw.write_msr(0x3A2, 0x2600_0200 | 1 << 3)
                .map_err(|_| "host ESCR")?;
            hw.write_msr(0x360, 0x3_D000).map_err(|_| "host CCCR")?;
            scrub_all(&POLICY, &mut *hw).map_err(|_| "scrub")?;
        }
        // SAFETY: the handlers only rewrite guest (CPL 3) frames, to
        // resume a guest or enter one of its handlers on its own stack.
        unsafe {
            user::set_gp_handler(on_gp);
            for v in [FEED, SET_LVT, ENTER] {
                idt::set_frame_handler(v, on_hypercall);
            }
        }
        let stack = &raw mut STACK;
        let guests: [(extern "C" fn(u64) -> !, Option<usize>); 3] = [
            (guest0_first, Some(1)),
            (guest1, Some(0)),
            (guest0_again, None),
        ];
        for (guest, next) in guests {
            // SAFETY: each guest runs at CPL 3 on this stack (nothing else
            // uses it) and ends with the exit hypercall.
            unsafe { user::run(guest, 0, &mut *stack) }.map_err(|_| "user mode")?;
            if let Some(n) = next {
                switch_to(n);
            }
        }
        let mut hw = HW.lock();
        let escr = hw.read_msr(0x3A2).map_err(|_| "host ESCR")?;
        let masked = VM.lock().lvt[0].entry().is_masked();
        Ok((hw.counter(0), hw.cccr(0), escr, masked))
    }
}

fn a_switched_out_cascade_is_contained() -> Outcome {
    use leak::*;
    let (host, host_cccr, host_escr, masked) = leak::run()?;
    let seen = |i: usize| SEEN[i].load(Ordering::SeqCst);
    check_eq!(
        HOST_FAULTS.load(Ordering::SeqCst),
        0,
        "a switch access faulted"
    );
    check_eq!(seen(0) >> 31 & 1, 1, "guest 0's counter 1 wrapped (OVF)");
    check_eq!(seen(1), 0x3_0000, "guest 1 reads CCCR3 idle, not 4003C000H");
    check_eq!(
        seen(2),
        0,
        "guest 0's counter 3 counted none of guest 1's events"
    );
    check_eq!(seen(3), 100, "guest 1's own counter 2");
    check_eq!(
        GPS[1].load(Ordering::SeqCst),
        4,
        "active thread 01b, 312H, PEBS, DS area: each a #GP in guest 1"
    );
    check_eq!(
        GPS[0].load(Ordering::SeqCst),
        0,
        "guest 0's writes all legal"
    );
    check_eq!(
        PMIS.load(Ordering::SeqCst),
        1,
        "guest 0's overflow PMI, owed across the switch, delivered once"
    );
    check!(masked, "its virtual LVT entry masked by the delivery");
    check_eq!(seen(4), 0, "guest 0's counter 3 as it left it");
    check_eq!(seen(5), CASCADED_CCCR3, "and its CCCR3");
    check_eq!(seen(6), 0, "counter 1 wrapped at its 10th event");
    check_eq!(
        host,
        100,
        "the host's counter: guest 1's 100 RUNNING events"
    );
    check_eq!(host_cccr, 0x3_D000, "the host's CCCR untouched");
    check_eq!(host_escr, 0x2600_0200 | 1 << 3, "the host's ESCR untouched");
    println!(
        "hypervisor: cascade leak contained: after the switch guest 1 read CCCR3 {:#x} and counter 3 = {} (guest 0's cascade idle), its own counter 2 = {}; guest 0 got back CCCR3 {:#x}, counter 3 = {} and its owed PMI through the virtual LVT; 4 #GPs in guest 1; the host's counter {} (model)",
        seen(1),
        seen(2),
        seen(3),
        seen(5),
        seen(4),
        host
    );
    Ok(())
}

static HOST_FAULTS: AtomicU64 = AtomicU64::new(0);

fn two_guests_share_the_pmu_by_world_switch() -> Outcome {
    use two::*;
    let out = two::run()?;
    check_eq!(
        HOST_FAULTS.load(Ordering::SeqCst),
        0,
        "a world-switch access faulted"
    );
    check!(
        SWITCHES.load(Ordering::SeqCst) >= target_switches(),
        "switches"
    );
    for g in 0..2 {
        check_eq!(
            out.results[g],
            out.fed[g],
            "guest {g}: periods x N + residual = the cycles fed while its counter ran"
        );
    }
    check_eq!(
        out.host_counter,
        HOST_FED.load(Ordering::SeqCst),
        "the host's counter saw every cycle"
    );
    check_eq!(out.host_regs.0, 0x3_D000, "the host's CCCR untouched");
    check_eq!(
        out.host_regs.1,
        0x2600_0200 | 1 << 3,
        "the host's ESCR untouched"
    );
    check_eq!(
        out.host_regs.1,
        0x2600_0200 | 1 << 3,
        "the host\'s ESCR untouched"
    );
    // Each guest's driver idles all 18 CCCRs when it takes its PMU: the
    // write to CCCR 0, the host's, is a #GP in the guest too.
    check_eq!(
        GPS[0].load(Ordering::SeqCst),
        ILLEGAL.len() as u64 + 2,
        "each illegal write, RDPMC without CR4.PCE and the host's CCCR 0: a #GP in guest 0"
    );
    check_eq!(
        GPS[1].load(Ordering::SeqCst),
        2,
        "guest 1: RDPMC without CR4.PCE, the host's CCCR 0"
    );
    check_eq!(
        RDPMC_WITH_PCE.load(Ordering::SeqCst),
        2,
        "RDPMC with CR4.PCE read 0 (before configuring)"
    );
    let mut shares = [[0u64; 4]; 2];
    for g in 0..2 {
        SAMPLES[g].drain(|s| {
            let i = hobby::workload::SYMBOLS.position(s.rip).unwrap_or(3);
            shares[g][i] += u64::from(s.periods);
        });
        let inside: u64 = shares[g][..3].iter().sum();
        check!(PMIS[g].load(Ordering::SeqCst) > 20, "guest {g} PMIs");
        check!(
            inside * 10 >= (inside + shares[g][3]) * 9,
            "guest {g}: samples inside its workload"
        );
    }
    println!(
        "hypervisor: 2 guests, {} switches, {} ticks of {K} cycles (a guest in its PMI handler is neither fed nor switched away): guest 0 counted {} and guest 1 {} (exactly what each was fed while its counter ran), the host's counter {} (all of them); PMIs {} and {}; samples by function (work_1x, work_2x, work_4x, other): {:?} and {:?}; {} illegal writes each a #GP in guest 0 (model)",
        SWITCHES.load(Ordering::SeqCst),
        out.ticks,
        out.results[0],
        out.results[1],
        out.host_counter,
        PMIS[0].load(Ordering::SeqCst),
        PMIS[1].load(Ordering::SeqCst),
        shares[0],
        shares[1],
        ILLEGAL.len()
    );
    Ok(())
}

/// Fourth case: an Intel guest (CPL 3) runs kvm-unit-tests' `x86/pmu.c`
/// checks against the crate's emulated architectural PMU
/// (`pmu::virt::archperf::vpmu`), which answers every access as KVM does.
fn an_intel_guest_passes_kvm_unit_tests_pmu_checks() -> Outcome {
    kut::reset();
    let pmu = kut_intel::POLICY.checked().map_err(|_| "policy")?;
    let (exit, vm) = kut::run(
        kut_intel::guest,
        kut::Pmu::Intel(pmu::virt::archperf::vpmu::VirtualPmu::new(pmu)),
    )?;
    check_eq!(exit, 0, "the guest ran to its end");
    kut::verdict()?;
    check_eq!(vm.pmu.injected(), 2, "PMIs injected");
    println!(
        "hypervisor: an Intel guest (version 4, 4 general and 3 fixed counters, full-width writes) passed {} checks of kvm-unit-tests' x86/pmu.c against its emulated PMU: {} instructions single-stepped and {} emulated into it, {} #GPs injected, {} PMIs through its virtual LVT (counts from the model)",
        kut::CHECKS.load(Ordering::SeqCst),
        vm.steps,
        vm.emulated,
        vm.gps,
        vm.pmu.injected()
    );
    Ok(())
}

/// Fifth case: the AMD guest's, against `pmu::virt::amd::vpmu`.
fn an_amd_guest_passes_kvm_unit_tests_pmu_checks() -> Outcome {
    kut::reset();
    let pmu = kut_amd::POLICY.checked().map_err(|_| "policy")?;
    let (exit, vm) = kut::run(
        kut_amd::guest,
        kut::Pmu::Amd(pmu::virt::amd::vpmu::VirtualPmu::new(pmu)),
    )?;
    check_eq!(exit, 0, "the guest ran to its end");
    kut::verdict()?;
    check_eq!(vm.pmu.injected(), 1, "PMIs injected");
    println!(
        "hypervisor: an AMD guest (PerfMonV2, 6 counters) passed {} checks of kvm-unit-tests' x86/pmu.c (AMD) against its emulated PMU: {} instructions single-stepped and {} emulated into it, {} #GPs injected, {} PMI through its virtual LVT (counts from the model)",
        kut::CHECKS.load(Ordering::SeqCst),
        vm.steps,
        vm.emulated,
        vm.gps,
        vm.pmu.injected()
    );
    Ok(())
}

//! An AMD guest running the AMD equivalents of kvm-unit-tests' `x86/pmu.c`
//! checks against its emulated AMD PMU (PerfMonV2, six counters): CPUID
//! (Fn8000_0001's PerfCtrExtCore, Fn8000_0022's PerfMonV2 and count, no
//! leaf 0AH), the known loop counted exactly on every counter for each of
//! kvm-unit-tests' AMD events, through the extended addresses and again
//! through the legacy ones (kvm-unit-tests reruns its suite through the
//! K7 MSRs), `PerfCntrGlobalCtl` gating, overflow and the PMI (the status
//! bit, `PerfCntrGlobalStatusClr` and `Set`, the LVT entry left unmasked),
//! reserved bits dropped without a #GP (HostOnly and GuestOnly among
//! them), 48-bit counters, the RDPMC forms, and #GP on Intel's registers.

use core::sync::atomic::Ordering;

use pmu::apic::LvtPerfCounterEntry;
use pmu::arch::amd::CounterSet;
use pmu::virt::amd::{Generation, GuestPolicy};

use super::kut::{
    self, CYCLES_AMD, GuestLvt, check, cpuid, known_loop, loop_instructions, lvt, rdmsr, rdpmc,
    set_cpl, window, wrmsr_gp,
};

/// The guest's PMU.
pub const POLICY: GuestPolicy = GuestPolicy {
    generation: Generation::PerfMonV2 { counters: 6 },
    host_counters: CounterSet::EMPTY,
};

const N: u64 = 20;
const I: u64 = loop_instructions(N);
const OS_USR_EN: u64 = 1 << 16 | 1 << 17 | 1 << 22;
const INT: u64 = 1 << 20;
const STATUS: u32 = 0xC000_0300;
const CTL: u32 = 0xC000_0301;
const CLR: u32 = 0xC000_0302;
const SET: u32 = 0xC000_0303;
const WIDTH: u64 = (1 << 48) - 1;

fn ctl(n: u32) -> u32 {
    0xC001_0200 + 2 * n
}

fn ctr(n: u32) -> u32 {
    0xC001_0201 + 2 * n
}

fn wrmsr(msr: u32, value: u64) {
    check("a legal WRMSR is taken", u64::from(wrmsr_gp(msr, value)), 0);
}

fn read(msr: u32) -> u64 {
    rdmsr(msr).unwrap_or(u64::MAX)
}

/// Every counter stopped and zeroed, the status clear.
fn clean() {
    wrmsr(CTL, 0);
    for n in 0..6 {
        wrmsr(ctl(n), 0);
        wrmsr(ctr(n), 0);
    }
    wrmsr(CLR, 0x3F);
}

/// The guest kernel.
pub extern "C" fn guest(_: u64) -> ! {
    kut::STATUS_MSR.store(STATUS, Ordering::SeqCst);
    GuestLvt.write_lvt_perf_counter(lvt());
    enumeration();
    counting();
    overflow();
    bits_and_rdpmc();
    hobby::user::exit(0)
}

/// CPUID, RDPMC of counters it does not have, `PerfCntrGlobalCtl` at
/// reset.
fn enumeration() {
    let ext = cpuid(0x8000_0001, 0)[2];
    check(
        "CPUID Fn8000_0001_ECX.PerfCtrExtCore",
        u64::from(ext >> 23 & 1),
        1,
    );
    check("CPUID Fn8000_0001_ECX.IBS", u64::from(ext >> 10 & 1), 0);
    let [eax, ebx, _, _] = cpuid(0x8000_0022, 0).map(u64::from);
    check("CPUID Fn8000_0022_EAX (PerfMonV2 only)", eax, 1);
    check("CPUID Fn8000_0022_EBX (6 counters)", ebx, 6);
    check("CPUID leaf 0AH", u64::from(cpuid(0xA, 0) != [0; 4]), 0);
    for ecx in [64, 6, 1 << 30] {
        check(
            "RDPMC of no counter is #GP",
            u64::from(rdpmc(ecx).is_err()),
            1,
        );
    }
    check("PerfCntrGlobalCtl at reset", read(CTL), 0x3F);
}

/// The known loop on every counter for each event (cycles 76H,
/// instructions C0H, branches C2H, branch misses C3H), through the
/// extended addresses, then through the legacy ones; the counters all at
/// once; `PerfCntrGlobalCtl` gating.
fn counting() {
    let events: [(u64, &str, u64); 4] = [
        (u64::from(CYCLES_AMD), "cycles", 2 * I),
        (0xC0, "retired instructions", I),
        (0xC2, "retired branches", N),
        (0xC3, "retired branch misses", 0),
    ];
    // Each event on all six counters at once.
    for (event, what, want) in events {
        clean();
        for n in 0..6 {
            wrmsr(ctl(n), event | OS_USR_EN);
        }
        known_loop(CTL, 0x3F, N);
        for n in 0..6 {
            check(what, read(ctr(n)), want);
        }
    }
    // The four legacy pairs: the same counters.
    clean();
    for n in 0..4 {
        wrmsr(0xC001_0000 + n, 0xC0 | OS_USR_EN);
    }
    known_loop(CTL, 0xF, N);
    for n in 0..4 {
        check("through PERF_LEGACY_CTRn", read(0xC001_0004 + n), I);
        check("the same counter as PERF_CTRn", read(ctr(n)), I);
    }
    clean();
    for n in 0..6 {
        wrmsr(ctl(n), events[n as usize % 3].0 | OS_USR_EN);
    }
    known_loop(CTL, 0x3F, N);
    let want = [2 * I, I, N, 2 * I, I, N];
    for n in 0..6 {
        check("all six counters at once", read(ctr(n)), want[n as usize]);
    }
    clean();
    wrmsr(ctl(0), 0xC0 | OS_USR_EN);
    wrmsr(ctl(1), 0xC0 | OS_USR_EN);
    known_loop(CTL, 1 << 1, N);
    check(
        "PerfCntrGlobalCtl off: counter 0 counts nothing",
        read(ctr(0)),
        0,
    );
    check("PerfCntrGlobalCtl on: counter 1 counts", read(ctr(1)), I);
}

/// Overflow: preset to 1 - count, the counter ends at 1, its status bit
/// set, one PMI with INT and the LVT entry not masked by it; the clear and
/// set registers; a write to the status ignored; without INT no PMI; a
/// WRMSR of -1 to a running counter wraps it.
fn overflow() {
    clean();
    wrmsr(ctl(0), 0xC0 | OS_USR_EN | INT);
    wrmsr(ctr(0), WIDTH - I + 2);
    known_loop(CTL, 1, N);
    check("overflow: the counter wrapped to 1", read(ctr(0)), 1);
    check("overflow: its status bit", read(STATUS), 1);
    window();
    check(
        "overflow: one PMI",
        kut::GUEST_PMIS.load(Ordering::SeqCst),
        1,
    );
    check(
        "overflow: the PMI's status",
        kut::PMI_STATUS.load(Ordering::SeqCst),
        1,
    );
    check(
        "overflow: the LVT entry left unmasked (AMD)",
        kut::PMI_MASKED.load(Ordering::SeqCst),
        0,
    );
    wrmsr(CLR, 1);
    check("PerfCntrGlobalStatusClr clears", read(STATUS), 0);
    wrmsr(SET, 1 << 2 | 1 << 40);
    check(
        "PerfCntrGlobalStatusSet sets the counters' bits",
        read(STATUS),
        1 << 2,
    );
    wrmsr(STATUS, 0);
    check(
        "a write to PerfCntrGlobalStatus is ignored",
        read(STATUS),
        1 << 2,
    );
    check("the write-1 registers read 0", read(CLR) | read(SET), 0);
    clean();
    wrmsr(ctl(3), 0xC0 | OS_USR_EN);
    wrmsr(ctr(3), WIDTH - I + 2);
    known_loop(CTL, 1 << 3, N);
    window();
    check("overflow without INT: the status bit", read(STATUS), 1 << 3);
    check(
        "overflow without INT: no PMI",
        kut::GUEST_PMIS.load(Ordering::SeqCst),
        1,
    );
    clean();
    wrmsr(ctl(0), 0xC0 | OS_USR_EN);
    wrmsr(CTL, 1);
    wrmsr(ctr(0), WIDTH);
    check("WRMSR -1 to a running counter wraps it", read(ctr(0)), 0);
    check("and sets its status bit", read(STATUS) & 1, 1);
    wrmsr(CTL, 0);
}

/// Reserved bits dropped, no #GP; HostOnly and GuestOnly the
/// hypervisor's; 48-bit counters; RDPMC; Intel's registers.
fn bits_and_rdpmc() {
    clean();
    check(
        "every control bit written: no #GP",
        u64::from(wrmsr_gp(ctl(2), u64::MAX)),
        0,
    );
    check("the reserved bits dropped", read(ctl(2)), 0xF_FFD7_FFFF);
    wrmsr(ctl(2), 0);
    wrmsr(ctl(3), 0xC0 | 1 << 40 | 1 << 41);
    check("HostOnly and GuestOnly dropped", read(0xC001_0003), 0xC0);
    wrmsr(ctr(1), u64::MAX);
    check("a counter keeps 48 bits", read(0xC001_0005), WIDTH);
    wrmsr(ctr(1), 0x1234_5678);
    check("RDPMC 1", rdpmc(1).unwrap_or(0), 0x1234_5678);
    set_cpl(false, 3);
    check(
        "RDPMC at CPL 3 without CR4.PCE is #GP",
        u64::from(rdpmc(1).is_err()),
        1,
    );
    set_cpl(true, 3);
    check(
        "RDPMC at CPL 3 with CR4.PCE",
        rdpmc(1).unwrap_or(0),
        0x1234_5678,
    );
    set_cpl(false, 0);
    for msr in [0x38F, 0x309, 0x4C1, 0xC3, 0xC001_1030, 0xC001_020C] {
        check(
            "Intel's registers, IBS, no such counter: #GP",
            u64::from(wrmsr_gp(msr, 0)),
            1,
        );
    }
    check("Intel's P6 IA32_PMC0 reads 0", read(0xC1), 0);
    check(
        "the #GPs the guest took",
        kut::GUEST_GPS.load(Ordering::SeqCst),
        10,
    );
}

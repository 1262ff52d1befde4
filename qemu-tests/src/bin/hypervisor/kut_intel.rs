//! An Intel guest running the properties kvm-unit-tests' `x86/pmu.c`
//! checks of a guest PMU, against its emulated architectural PMU (version
//! 4, four general and three fixed counters, full-width writes, LLC misses
//! unavailable): CPUID, counting within the bounds of a known loop (here
//! exact: every instruction is single-stepped into the PMU) on every
//! general counter for each available event and on the fixed counters,
//! all counters at once, `IA32_PERF_GLOBAL_CTRL` gating, CMASK, overflow
//! and the PMI (the status bit, `OVF_CTRL`, the LVT entry masked by the
//! delivery), a WRMSR to a running counter, full-width and legacy writes,
//! the RDPMC forms, and #GP on reserved bits and absent registers.

use core::sync::atomic::Ordering;

use pmu::apic::LvtPerfCounterEntry;
use pmu::arch::archperf::CounterSet;
use pmu::virt::archperf::GuestPolicy;

use super::kut::{
    self, GuestLvt, check, cpuid, known_loop, loop_instructions, lvt, rdmsr, rdpmc, set_cpl,
    window, wrmsr_gp,
};

/// The guest's PMU.
pub const POLICY: GuestPolicy = GuestPolicy {
    version: 4,
    general: 4,
    general_width: 48,
    fixed: 3,
    fixed_width: 48,
    unavailable: 1 << 4,
    full_width_writes: true,
    host_counters: CounterSet::EMPTY,
};

/// Iterations of the known loop.
const N: u64 = 20;
const I: u64 = loop_instructions(N);
const OS_USR_EN: u64 = 1 << 16 | 1 << 17 | 1 << 22;
const INT: u64 = 1 << 20;
const GLOBAL_CTRL: u32 = 0x38F;
const GLOBAL_STATUS: u32 = 0x38E;
const OVF_CTRL: u32 = 0x390;
const FIXED_CTRL: u32 = 0x38D;
const WIDTH: u64 = (1 << 48) - 1;

/// A WRMSR the check expects to be taken.
fn wrmsr(msr: u32, value: u64) {
    check("a legal WRMSR is taken", u64::from(wrmsr_gp(msr, value)), 0);
}

/// An RDMSR the check expects to be taken.
fn read(msr: u32) -> u64 {
    rdmsr(msr).unwrap_or(u64::MAX)
}

/// Every counter stopped and zeroed, the status clear.
fn clean() {
    wrmsr(GLOBAL_CTRL, 0);
    wrmsr(FIXED_CTRL, 0);
    for i in 0..4 {
        wrmsr(0x186 + i, 0);
        wrmsr(0xC1 + i, 0);
    }
    for i in 0..3 {
        wrmsr(0x309 + i, 0);
    }
    wrmsr(OVF_CTRL, 0b111 << 32 | 0xF);
}

/// The guest kernel.
pub extern "C" fn guest(_: u64) -> ! {
    kut::STATUS_MSR.store(GLOBAL_STATUS, Ordering::SeqCst);
    GuestLvt.write_lvt_perf_counter(lvt());
    enumeration();
    counting();
    overflow();
    writes_and_rdpmc();
    refusals();
    user_exit()
}

fn user_exit() -> ! {
    hobby::user::exit(0)
}

/// CPUID and the capabilities, as the policy has them; RDPMC of ECX 64
/// (`check_invalid_rdpmc_gp`); `IA32_PERF_GLOBAL_CTRL` at reset.
fn enumeration() {
    let [eax, ebx, ecx, edx] = cpuid(0xA, 0).map(u64::from);
    check("CPUID.0AH:EAX", eax, 4 | 4 << 8 | 48 << 16 | 7 << 24);
    check("CPUID.0AH:EBX (LLC misses unavailable)", ebx, 1 << 4);
    check("CPUID.0AH:ECX", ecx, 0);
    check("CPUID.0AH:EDX", edx, 3 | 48 << 5 | 1 << 15);
    let [_, _, ecx, edx] = cpuid(1, 0).map(u64::from);
    check("CPUID.01H:ECX.PDCM", ecx >> 15 & 1, 1);
    check("CPUID.01H:EDX.DS", edx >> 21 & 1, 0);
    check("IA32_PERF_CAPABILITIES", read(0x345), 1 << 13);
    check("RDPMC with ECX 64 is #GP", u64::from(rdpmc(64).is_err()), 1);
    check("IA32_PERF_GLOBAL_CTRL at reset", read(GLOBAL_CTRL), 0xF);
}

/// The known loop counted exactly on each general counter for each event
/// (`check_gp_counters`; the four counters in one loop, to keep the
/// single-stepped instructions few), on the fixed counters beside the
/// general ones (`check_fixed_counters`, `check_counters_many`);
/// `IA32_PERF_GLOBAL_CTRL` gating; CMASK (`check_gp_counter_cmask`).
fn counting() {
    let events: [(u64, &str, u64); 6] = [
        (0x3C, "core cycles", 2 * I),
        (0xC0, "instructions", I),
        (0x013C, "reference cycles", I),
        (0xC4, "branches", N),
        (0xC5, "branch misses", 0),
        (0x4F2E, "LLC references", 0),
    ];
    // Each event on every general counter at once.
    for (event, what, want) in events {
        clean();
        for i in 0..4 {
            wrmsr(0x186 + i, event | OS_USR_EN);
        }
        known_loop(GLOBAL_CTRL, 0xF, N);
        for i in 0..4 {
            check(what, read(0xC1 + i), want);
        }
    }
    // Everything at once.
    clean();
    for (i, (event, _, _)) in events.iter().take(4).enumerate() {
        wrmsr(0x186 + i as u32, event | OS_USR_EN);
    }
    wrmsr(FIXED_CTRL, 0x333);
    known_loop(GLOBAL_CTRL, 0xF | 0b111 << 32, N);
    let all = [0xC1, 0xC2, 0xC3, 0xC4, 0x309, 0x30A, 0x30B].map(read);
    check("all counters at once: PMC0", all[0], 2 * I);
    check("all counters at once: PMC1", all[1], I);
    check("all counters at once: PMC2", all[2], I);
    check("all counters at once: PMC3", all[3], N);
    check("all counters at once: fixed 0", all[4], I);
    check("all counters at once: fixed 1", all[5], 2 * I);
    check("all counters at once: fixed 2", all[6], I);
    // GLOBAL_CTRL gates: both select instructions, only counter 1 is on.
    clean();
    wrmsr(0x186, 0xC0 | OS_USR_EN);
    wrmsr(0x187, 0xC0 | OS_USR_EN);
    known_loop(GLOBAL_CTRL, 1 << 1, N);
    check(
        "IA32_PERF_GLOBAL_CTRL off: PMC0 counts nothing",
        read(0xC1),
        0,
    );
    check("IA32_PERF_GLOBAL_CTRL on: PMC1 counts", read(0xC2), I);
    // CMASK 2: no clock has two instructions.
    clean();
    wrmsr(0x186, 0xC0 | OS_USR_EN | 2 << 24);
    known_loop(GLOBAL_CTRL, 1, N);
    check("CMASK 2 lowers the count", u64::from(read(0xC1) < I), 1);
}

/// Overflow (`check_counter_overflow`): a counter preset to 1 - count
/// ends at 1 with its status bit set and, with INT, one PMI, delivered
/// with the LVT entry masked; `OVF_CTRL` clears the bit; without INT no
/// PMI; fixed counter 0 the same; a WRMSR of -1 to a running counter
/// overflows it (`check_running_counter_wrmsr`: the WRMSR itself counts).
fn overflow() {
    clean();
    wrmsr(0x186, 0xC0 | OS_USR_EN | INT);
    wrmsr(0x4C1, WIDTH - I + 2);
    known_loop(GLOBAL_CTRL, 1, N);
    check("overflow: the counter wrapped to 1", read(0xC1), 1);
    check("overflow: its status bit", read(GLOBAL_STATUS), 1);
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
        "overflow: the LVT entry masked by the delivery",
        kut::PMI_MASKED.load(Ordering::SeqCst),
        1,
    );
    wrmsr(OVF_CTRL, 1);
    check("OVF_CTRL clears the status", read(GLOBAL_STATUS), 0);
    // Without INT: the status, no PMI.
    wrmsr(0x186, 0xC0 | OS_USR_EN);
    wrmsr(0x4C1, WIDTH - I + 2);
    known_loop(GLOBAL_CTRL, 1, N);
    window();
    check(
        "overflow without INT: the status bit",
        read(GLOBAL_STATUS),
        1,
    );
    check(
        "overflow without INT: no PMI",
        kut::GUEST_PMIS.load(Ordering::SeqCst),
        1,
    );
    // Fixed counter 0 with its PMI bit.
    clean();
    wrmsr(FIXED_CTRL, 0xB);
    wrmsr(0x309, WIDTH - I + 2);
    known_loop(GLOBAL_CTRL, 1 << 32, N);
    window();
    check("fixed overflow: wrapped to 1", read(0x309), 1);
    check(
        "fixed overflow: status bit 32",
        read(GLOBAL_STATUS),
        1 << 32,
    );
    check(
        "fixed overflow: a second PMI",
        kut::GUEST_PMIS.load(Ordering::SeqCst),
        2,
    );
    // A running counter: the WRMSR of -1 counts itself and wraps.
    clean();
    wrmsr(0x186, 0xC0 | OS_USR_EN);
    wrmsr(GLOBAL_CTRL, 1);
    wrmsr(0xC1, 0xFFFF_FFFF);
    check("WRMSR -1 to a running counter wraps it", read(0xC1), 0);
    check("and sets its status bit", read(GLOBAL_STATUS) & 1, 1);
    wrmsr(GLOBAL_CTRL, 0);
    wrmsr(0xC1, 0);
    check("WRMSR 0 to a stopped counter", read(0xC1), 0);
}

/// Full-width and legacy writes (`check_gp_counters_write_width`), the
/// RDPMC forms (`check_rdpmc`) with CR4.PCE and the CPL.
fn writes_and_rdpmc() {
    clean();
    wrmsr(0xC1, 0xFF_FFFF_0123_4567);
    check("a legacy write keeps bits 31:0", read(0xC1), 0x0123_4567);
    check("read through IA32_A_PMC0", read(0x4C1), 0x0123_4567);
    wrmsr(0xC1, 0x8123_4567);
    check(
        "a legacy write is sign-extended",
        read(0x4C1),
        0xFFFF_8123_4567,
    );
    wrmsr(0x4C1, 1 << 47 | 5);
    check("a full-width write", read(0xC1), 1 << 47 | 5);
    check(
        "a full-width write above the width is #GP",
        u64::from(wrmsr_gp(0x4C1, 1 << 48)),
        1,
    );
    check("and changes nothing", read(0xC1), 1 << 47 | 5);
    wrmsr(0x4C2, 0x12_3456_789A);
    wrmsr(0x30A, 0x42);
    check("RDPMC 1", rdpmc(1).unwrap_or(0), 0x12_3456_789A);
    check(
        "RDPMC of fixed counter 1 (ECX bit 30)",
        rdpmc(1 << 30 | 1).unwrap_or(0),
        0x42,
    );
    for ecx in [1 << 31, 4, 1 << 30 | 3, 1 << 16] {
        check(
            "RDPMC of no counter, or fast, is #GP",
            u64::from(rdpmc(ecx).is_err()),
            1,
        );
    }
    set_cpl(false, 3);
    check(
        "RDPMC at CPL 3 without CR4.PCE is #GP",
        u64::from(rdpmc(0).is_err()),
        1,
    );
    set_cpl(true, 3);
    check(
        "RDPMC at CPL 3 with CR4.PCE",
        rdpmc(0).unwrap_or(0),
        1 << 47 | 5,
    );
    set_cpl(false, 0);
}

/// #GP on reserved bits and registers the guest does not have; the legacy
/// K7 pairs read 0; nothing a refused write asked for happened.
fn refusals() {
    clean();
    wrmsr(0x186, 0xC0 | OS_USR_EN);
    let refused: [(u32, u64, &str); 15] = [
        (0x186, 0xC0 | 1 << 21, "AnyThread in IA32_PERFEVTSEL0"),
        (0x186, 0xC0 | 1 << 32, "IA32_PERFEVTSEL0 bit 32"),
        (FIXED_CTRL, 0x4, "AnyThread in IA32_FIXED_CTR_CTRL"),
        (FIXED_CTRL, 0x1000, "fixed counter 3's field"),
        (GLOBAL_CTRL, 1 << 4, "IA32_PERF_GLOBAL_CTRL bit 4"),
        (GLOBAL_CTRL, 1 << 35, "IA32_PERF_GLOBAL_CTRL bit 35"),
        (GLOBAL_STATUS, 0, "IA32_PERF_GLOBAL_STATUS (read-only)"),
        (OVF_CTRL, 1 << 59, "IA32_PERF_GLOBAL_OVF_CTRL bit 59"),
        (0x391, 1, "IA32_PERF_GLOBAL_STATUS_SET (not emulated)"),
        (0xC5, 0, "IA32_PMC4 (no such counter)"),
        (0x345, 0, "IA32_PERF_CAPABILITIES (read-only)"),
        (0x3F1, 0, "IA32_PEBS_ENABLE"),
        (0x600, 0, "IA32_DS_AREA"),
        (0xC001_0200, 0, "AMD's PERF_CTL0"),
        (
            0x1A0,
            1 << 7 | 1 << 11,
            "IA32_MISC_ENABLE's PEBS unavailable bit",
        ),
    ];
    for (msr, value, what) in refused {
        check(what, u64::from(wrmsr_gp(msr, value)), 1);
    }
    check(
        "IA32_PERF_GLOBAL_INUSE is #GP",
        u64::from(rdmsr(0x392).is_err()),
        1,
    );
    check("AMD's PERF_LEGACY_CTL0 reads 0", read(0xC001_0000), 0);
    check(
        "a refused write changed nothing",
        read(0x186),
        0xC0 | OS_USR_EN,
    );
    check(
        "the #GPs the guest took",
        kut::GUEST_GPS.load(Ordering::SeqCst),
        23,
    );
}

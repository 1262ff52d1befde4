//! Boot, CPU identification, PMU detection, and privileged access.
//!
//! qemu-run: qemu64: -cpu qemu64,vendor=AuthenticAMD -append cpu=qemu64
//! qemu-run: netburst: -cpu qemu64,vendor=GenuineIntel,family=15,model=4,stepping=3 -append cpu=netburst
//!
//! The `cpu=` argument tells the kernel which CPU QEMU presents, so that the
//! detection result is checked against an expectation that does not come
//! from the code under test.
#![no_std]
#![no_main]

use hobby::boot::BootInfo;
use hobby::fault::{Fault, catch};
use hobby::test::Outcome;
use hobby::{case, check, check_eq, fail, println};
use pmu::access::X86Msr;
use pmu::detect::{self, CpuSignature, Cpuid, HardwareCpuid, PmuKind, Vendor};

hobby::entry_point!(main);

/// The CPU QEMU was told to present, from the command line.
static EXPECTED: spin::Once<ExpectedCpu> = spin::Once::new();

#[derive(Clone, Copy, Debug, PartialEq)]
enum ExpectedCpu {
    /// QEMU's default `qemu64`: AuthenticAMD, family 0Fh, model 6Bh, stepping 1.
    Qemu64,
    /// `-cpu qemu64,vendor=GenuineIntel,family=15,model=4,stepping=3`.
    NetBurst,
}

fn main(boot: &'static BootInfo) -> ! {
    let expected = match boot.arg("cpu") {
        Some("qemu64") => ExpectedCpu::Qemu64,
        Some("netburst") => ExpectedCpu::NetBurst,
        other => panic!("boot kernel needs cpu=qemu64|netburst, got {other:?}"),
    };
    EXPECTED.call_once(|| expected);
    println!("boot: command line {:?}", boot.cmdline);
    hobby::test::run(
        "boot",
        &[
            case!(reports_cpu_signature),
            case!(detects_the_pmu),
            case!(msr_read_executes_in_ring0),
            case!(faulting_rdpmc_is_an_error_not_a_crash),
            case!(catch_reports_gp_and_pf),
            case!(double_fault_on_a_broken_stack_is_reported),
        ],
    )
}

fn expected() -> ExpectedCpu {
    *EXPECTED.get().expect("set in main")
}

/// The kernel prints the vendor and signature QEMU presents, and they are
/// the ones the command line says QEMU was asked for.
fn reports_cpu_signature() -> Outcome {
    let leaf0 = HardwareCpuid.cpuid(0, 0);
    let sig = CpuSignature::from_eax(HardwareCpuid.cpuid(1, 0).eax);
    let mut vendor = [0u8; 12];
    vendor[..4].copy_from_slice(&leaf0.ebx.to_le_bytes());
    vendor[4..8].copy_from_slice(&leaf0.edx.to_le_bytes());
    vendor[8..].copy_from_slice(&leaf0.ecx.to_le_bytes());
    let vendor = core::str::from_utf8(&vendor).unwrap_or("?");
    println!("boot: CPU {vendor} {sig}");
    let want = match expected() {
        ExpectedCpu::Qemu64 => ("AuthenticAMD", 0xF, 0x6B, 1),
        ExpectedCpu::NetBurst => ("GenuineIntel", 0xF, 4, 3),
    };
    check_eq!((vendor, sig.family, sig.model, sig.stepping), want);
    Ok(())
}

/// `pmu::detect` finds AMD's core PMU on qemu64 (the `amd` kernel checks
/// what its read-back probe finds: counters that read 0 under TCG), and on
/// the NetBurst signature recognises the family but reports
/// IA32_MISC_ENABLE\[7\] clear: QEMU has no PMU MSRs behind either.
fn detects_the_pmu() -> Outcome {
    // SAFETY: ring 0 on the boot CPU; detection reads only IA32_MISC_ENABLE
    // (NetBurst) or AMD's legacy counter 0 and its control (AMD: written
    // back as read, the counter not enabled), and only after CPUID reports
    // RDMSR.
    let mut msr = unsafe { X86Msr::new() };
    let Ok(found) = detect::detect(&HardwareCpuid, &mut msr);
    println!("boot: detect: {found}");
    match expected() {
        ExpectedCpu::Qemu64 => {
            let PmuKind::Amd(amd) = found.pmu else {
                fail!("qemu64 (AuthenticAMD, family 0Fh) not recognised as AMD: {found:?}")
            };
            check_eq!(
                (found.vendor, amd.family, amd.model),
                (Vendor::Amd, 0xF, 0x6B)
            );
            check!(
                !amd.perf_ctr_ext_core && !amd.perfmon_v2,
                "qemu64 has neither"
            );
            // What the probe finds (counters that read 0 under TCG) the
            // `amd` kernel checks.
        }
        ExpectedCpu::NetBurst => {
            let PmuKind::NetBurst(nb) = found.pmu else {
                fail!("NetBurst signature not recognised: {found:?}")
            };
            check_eq!(nb.model, 4);
            check!(nb.msr_instructions);
            check!(!nb.perf_mon_available, "QEMU has no PMU, yet bit 7 is set");
            check!(found.usable_netburst().is_none());
        }
    }
    Ok(())
}

/// RDMSR through the hardware backend runs at CPL0 and returns real data:
/// IA32_APIC_BASE holds the APIC's address, its global enable and BSP flags.
fn msr_read_executes_in_ring0() -> Outcome {
    let cpl = x86_64::instructions::segmentation::CS::get_reg().rpl();
    check_eq!(cpl, x86_64::PrivilegeLevel::Ring0);
    // SAFETY: ring 0, this CPU.
    let mut msr = unsafe { X86Msr::new() };
    // SAFETY: IA32_APIC_BASE (1BH) exists on every x86-64 CPU; reading it
    // has no side effect.
    let apic_base = unsafe { msr.read_msr(0x1B) };
    println!("boot: IA32_APIC_BASE = {apic_base:#x}");
    check_eq!(apic_base & 0xFFFF_F000, pmu::apic::DEFAULT_BASE);
    check!(apic_base & (1 << 11) != 0, "APIC globally enabled");
    check!(apic_base & (1 << 8) != 0, "boot processor");
    Ok(())
}

use x86_64::instructions::segmentation::Segment;

/// RDPMC of a counter the CPU does not have faults: QEMU's TCG, which
/// implements no RDPMC, raises #UD; a real CPU (KVM) raises #GP(0) for a
/// counter that does not exist (SDM Vol. 2B, RDPMC). The harness turns the
/// fault into an error the case can inspect, and the run continues.
fn faulting_rdpmc_is_an_error_not_a_crash() -> Outcome {
    // SAFETY: deliberately breaks the "counter exists" promise: the fault
    // is caught, and RDPMC has no other effect.
    let mut msr = unsafe { X86Msr::new() };
    // SAFETY: the closure holds nothing that must be dropped or released.
    let result = unsafe { catch(|| msr.rdpmc(0)) };
    println!("boot: RDPMC 0 -> {result:?}");
    let accel = hobby::accel();
    if accel != hobby::Accel::Tcg && result.is_ok() {
        hobby::skip!(
            "RDPMC 0 read a counter: {} exposes a PMU to this guest, so nothing faults",
            accel.name()
        );
    }
    let Err(Fault::Exception {
        vector,
        error_code,
        rip,
    }) = result
    else {
        fail!("RDPMC did not fault: {result:?}")
    };
    let want = if accel == hobby::Accel::Tcg { 6 } else { 13 };
    check_eq!(
        (vector, error_code),
        (want, 0),
        "TCG: #UD; a real CPU: #GP(0)"
    );
    check!(rip > 0x10_0000, "fault RIP inside the kernel image");
    Ok(())
}

/// The harness reports #GP and #PF with their error codes, and catches nest.
fn catch_reports_gp_and_pf() -> Outcome {
    fn load(address: u64) -> u64 {
        let value: u64;
        // SAFETY: a plain load; the addresses used here fault, and the
        // fault is caught by the enclosing `catch`.
        unsafe { core::arch::asm!("mov {v}, [{a}]", a = in(reg) address, v = out(reg) value) };
        value
    }
    // SAFETY: plain loads; nothing held across them.
    let outer = unsafe {
        catch(|| {
            let gp = catch(|| load(0x8000_0000_0000_0000));
            let pf = catch(|| load(0x1_0000_0000));
            (gp, pf)
        })
    };
    let Ok((gp, pf)) = outer else {
        fail!("outer catch faulted: {outer:?}")
    };
    check_eq!(gp.map_err(|f| f.vector()), Err(Some(13)));
    let Err(Fault::Exception {
        vector, error_code, ..
    }) = pf
    else {
        fail!("no #PF: {pf:?}")
    };
    check_eq!(vector, 14);
    check_eq!(error_code & 1, 0); // not-present page
    check_eq!(x86_64::registers::control::Cr2::read_raw(), 0x1_0000_0000);
    Ok(())
}

/// An exception on a broken stack cannot be delivered there: the CPU raises
/// #SS, cannot push that either, and escalates to #DF, which runs on its own
/// IST stack and is reported like any other fault.
fn double_fault_on_a_broken_stack_is_reported() -> Outcome {
    let body = || {
        // SAFETY: deliberately points RSP at a non-canonical address and
        // pushes; the resulting double fault is caught and `catch` restores
        // the real stack.
        unsafe {
            core::arch::asm!(
                "mov rsp, {bad}",
                "push rax",
                bad = in(reg) 0x8000_0000_0000_0000u64,
                options(noreturn),
            )
        }
    };
    // SAFETY: the closure holds nothing; its frame is abandoned at the fault.
    let fault = unsafe { catch::<()>(body) };
    let Err(Fault::Exception {
        vector, error_code, ..
    }) = fault
    else {
        fail!("no double fault: {fault:?}")
    };
    check_eq!((vector, error_code), (8, 0));
    Ok(())
}

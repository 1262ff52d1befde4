//! The main hobby-OS example: boot under QEMU, identify the CPU and its PMU,
//! and print what was found.
//!
//! ```text
//! cargo run -p pmu-examples --target x86_64-unknown-none --bin detect
//! ```
#![no_std]
#![no_main]

use hobby::boot::BootInfo;
use hobby::exit::{ExitCode, exit_qemu};
use hobby::println;
use pmu::access::X86Msr;
use pmu::detect::{self, HardwareCpuid, PmuKind};

hobby::entry_point!(main);

fn main(_: &'static BootInfo) -> ! {
    println!("pmu example: detect");
    // SAFETY: ring 0 on the boot CPU; detection reads only IA32_MISC_ENABLE
    // (NetBurst) or AMD's legacy counter 0 and its control (written back as
    // read, the counter not enabled), and only after CPUID reports the MSR
    // instructions.
    let mut msr = unsafe { X86Msr::new() };
    let Ok(found) = detect::detect(&HardwareCpuid, &mut msr);
    println!("{found}");
    match found.pmu {
        PmuKind::NetBurst(nb) if nb.usable() => println!("a NetBurst PMU this crate can drive"),
        PmuKind::NetBurst(_) => println!("a NetBurst signature without its PMU (as under QEMU)"),
        PmuKind::ArchPerf(_) => println!("an architectural PMU (CPUID leaf 0AH)"),
        PmuKind::Amd(_) if found.usable_amd().is_some() => println!("AMD's core PMU"),
        PmuKind::Amd(_) => {
            println!("an AMD CPU whose counters do not hold a value (as under QEMU)")
        }
        PmuKind::None(_) => println!("no PMU this crate drives; the tests use its software models"),
    }
    exit_qemu(ExitCode::Success)
}

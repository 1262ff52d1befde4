//! `hobby`: the smallest kernel that can test a PMU driver for real.
//!
//! It boots straight from `qemu-system-x86_64 -kernel` (PVH entry, 32- to
//! 64-bit trampoline, identity-mapped first 4 GiB), or from GRUB through
//! its multiboot2 header (a bootable image for bare metal), prints on COM1
//! (and, for a kernel that asks, on the VGA text screen), takes
//! every interrupt and exception through its own IDT, catches faults inside
//! test cases, and leaves QEMU with a verdict through `isa-debug-exit`.
//!
//! | module | job |
//! |---|---|
//! | [`boot`] | PVH note, trampoline, hand-off to the kernel's `main` |
//! | [`multiboot2`] | the multiboot2 header and entry (GRUB), and the boot information's command line |
//! | [`apic`] | this CPU's local APIC in xAPIC or x2APIC mode, and the switch to x2APIC |
//! | [`serial`] | COM1 console, `print!` and `println!` |
//! | [`vga`] | the VGA text screen (80x25 at B8000H), for reports read on a screen |
//! | `defmt_serial` (feature `defmt`) | defmt frames on COM2, and the global logger macro |
//! | [`gdt`] | the kernel GDT and TSS (a separate stack for double faults) |
//! | [`idt`] | the 256 entry stubs, the saved register frame, handler dispatch |
//! | [`fault`] | catching exceptions and panics inside a closure |
//! | [`pmi`] | a PMU model's interrupt line, delivered through the real APIC; bounded waits for an interrupt |
//! | [`pmi_error`] | why a model PMI was not delivered or not seen handled, said as it is known (on every target) |
//! | [`pace`] | how fast the platform runs code, and repetition counts scaled to it |
//! | [`smp`] | the application processors (up to 64 CPUs): INIT-SIPI-SIPI, per-CPU stacks, GDT/TSS and APIC, work posted to a CPU, IPIs |
//! | [`timer`] | the local APIC timer (periodic ticks) and the TSC, calibrated against the PIT |
//! | [`stacks`] | the bounds of an interrupted stack, for call chains; a tally of chains printed as the runner's `stack` lines |
//! | [`step`] | single-stepping (RFLAGS.TF): a function run one instruction at a time, each retired instruction reported with its address, the next one's, its registers and its branch kind, as the PMU models' `Retirement` |
//! | [`user`] | running a function at CPL 3 until it raises the exit vector |
//! | [`workload`] | three functions with costs exactly 1:2:4, and their symbol table (`pmu_report::symbols`) |
//! | [`mod@test`] | the test-case runner and its console protocol |
//! | [`text`] | a text in a fixed buffer (no allocator) |
//! | [`exit`] | success or failure exit codes |
//! | [`accel()`] | what runs the kernel: TCG, KVM or something else (CPUID leaf 40000000H) |
//!
//! Everything is compiled only for `x86_64-unknown-none`; on the host the
//! crate is [`pmi_error`] alone, so that host builds of the workspace stay
//! clean. A plain `cargo doc` on the host documents every module all the
//! same (they are compiled for `cfg(doc)` too), as docs.rs does for the
//! kernel target.
#![no_std]

/// The `pmu` crate this library is built on (its model PMIs and APIC types
/// are `pmu`'s): a kernel can name it through `hobby::pmu`.
#[doc(no_inline)]
pub use pmu;

#[cfg(any(target_os = "none", doc))]
pub mod apic;
#[cfg(any(target_os = "none", doc))]
pub mod boot;
#[cfg(all(any(target_os = "none", doc), feature = "defmt"))]
pub mod defmt_serial;
#[cfg(any(target_os = "none", doc))]
pub mod exit;
#[cfg(any(target_os = "none", doc))]
pub mod fault;
#[cfg(any(target_os = "none", doc))]
pub mod gdt;
#[cfg(any(target_os = "none", doc))]
pub mod idt;
#[cfg(any(target_os = "none", doc))]
pub mod multiboot2;
#[cfg(any(target_os = "none", doc))]
pub mod pace;
#[cfg(any(target_os = "none", doc))]
pub mod pmi;
pub mod pmi_error;
#[cfg(any(target_os = "none", doc))]
pub mod serial;
#[cfg(any(target_os = "none", doc))]
pub mod smp;
#[cfg(any(target_os = "none", doc))]
pub mod stacks;
#[cfg(any(target_os = "none", doc))]
pub mod steal;
#[cfg(any(target_os = "none", doc))]
pub mod step;
#[cfg(any(target_os = "none", doc))]
pub mod task;
#[cfg(any(target_os = "none", doc))]
pub mod test;
#[cfg(any(target_os = "none", doc))]
pub mod text;
#[cfg(any(target_os = "none", doc))]
pub mod timer;
#[cfg(any(target_os = "none", doc))]
pub mod tsc;
#[cfg(any(target_os = "none", doc))]
pub mod user;
#[cfg(any(target_os = "none", doc))]
pub mod vga;
#[cfg(any(target_os = "none", doc))]
pub mod workload;

/// Declares the kernel's `main`: `fn(&'static BootInfo) -> !`, called after
/// the console and the IDT are up and the boot CPU's local APIC is
/// software-enabled ([`apic::SPURIOUS_VECTOR`]), with interrupts still
/// disabled.
#[macro_export]
macro_rules! entry_point {
    ($main:path) => {
        #[unsafe(export_name = "hobby_kernel_main")]
        fn __hobby_kernel_main(boot: &'static $crate::boot::BootInfo) -> ! {
            let main: fn(&'static $crate::boot::BootInfo) -> ! = $main;
            main(boot)
        }
    };
}

/// What runs this kernel, from the hypervisor's CPUID signature (leaf
/// 40000000H, present when CPUID.01H:ECX\[31\] says a hypervisor is there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accel {
    /// QEMU's TCG ("TCGTCGTCGTCG"): an emulated CPU, interrupts taken at
    /// the next instruction boundary, the CPU model of `-cpu`.
    Tcg,
    /// KVM ("KVMKVMKVM\0\0\0"): the host's CPU (`-cpu host`), interrupts
    /// taken when the hypervisor delivers them.
    Kvm,
    /// No hypervisor, or another one.
    Other,
}

impl Accel {
    /// The accelerator's name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Accel::Tcg => "TCG",
            Accel::Kvm => "KVM",
            Accel::Other => "a CPU that is neither QEMU's TCG nor KVM",
        }
    }
}

/// Whether guest time is deterministic: QEMU counts instructions
/// (`-icount`), so the TSC and the timers follow the code executed, not
/// the host's scheduling. The runner says so with `time=icount` on the
/// command line of a kernel whose header asks for it (`//! icount:`).
#[cfg(any(target_os = "none", doc))]
pub fn deterministic_time() -> bool {
    boot::info().and_then(|b| b.arg("time")) == Some("icount")
}

/// What runs this kernel ([`Accel`]), read once (CPUID costs a VM exit
/// under KVM).
#[cfg(any(target_os = "none", doc))]
pub fn accel() -> Accel {
    static ACCEL: spin::Once<Accel> = spin::Once::new();
    *ACCEL.call_once(|| {
        use core::arch::x86_64::__cpuid;
        if __cpuid(1).ecx & (1 << 31) == 0 {
            return Accel::Other;
        }
        let leaf = __cpuid(0x4000_0000);
        let mut signature = [0u8; 12];
        signature[..4].copy_from_slice(&leaf.ebx.to_le_bytes());
        signature[4..8].copy_from_slice(&leaf.ecx.to_le_bytes());
        signature[8..].copy_from_slice(&leaf.edx.to_le_bytes());
        match &signature {
            b"TCGTCGTCGTCG" => Accel::Tcg,
            b"KVMKVMKVM\0\0\0" => Accel::Kvm,
            _ => Accel::Other,
        }
    })
}

/// A panic fails the test case it happens in (see [`fault::catch`]); outside
/// any case it fails the whole run.
#[cfg(target_os = "none")]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    serial::emergency_print(format_args!("\npanic: {info}\n"));
    fault::abandon();
    exit::exit_qemu(exit::ExitCode::Failure)
}

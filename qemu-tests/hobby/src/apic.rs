//! The local APIC of the CPU this runs on, in xAPIC or x2APIC mode.
//!
//! Every CPU boots in xAPIC mode, its registers in the memory-mapped page
//! at FEE00000H. Where the processor has x2APIC mode (CPUID.01H:ECX\[21\]:
//! KVM's `-cpu host` here; QEMU 7.2's TCG has none), a kernel may switch to
//! it with [`enter_x2apic`] before it starts the application processors:
//! the boot CPU switches at once, and every AP [`crate::smp::start_aps`]
//! brings up switches first thing. From then on [`local_apic`] hands out
//! the crate's [`X2Apic`] over the CPU's own MSRs instead of the xAPIC
//! page, and everything in this library that talks to the APIC (PMI
//! delivery and the bounded waits of [`crate::pmi`], the IPIs of
//! [`crate::smp`]) goes through it. The APIC timer ([`crate::timer`]) is
//! still programmed through the xAPIC page only: a kernel in x2APIC mode
//! does not use it.
//!
//! Every CPU's APIC is software-enabled ([`SPURIOUS_VECTOR`], TPR 0) before
//! the kernel's code runs on it: the boot CPU's at boot, before the
//! kernel's `main`, each AP's as it comes up. The library does not count on
//! the firmware for it: a CPU comes out of reset with its APIC
//! software-disabled (SVR 000000FFH: SDM Vol. 3A 11.4.7.1, "Local APIC
//! State After Power-Up or Reset"), and while it is, every LVT entry stays
//! masked (a PMI or timer entry written unmasked reads back masked) and no
//! interrupt is delivered (11.4.7.2, "Local APIC State After It Has Been
//! Software Disabled"). SeaBIOS
//! enables the boot CPU's APIC (SVR 1FFH) before it starts the kernel;
//! qboot, the firmware the runner boots with, does not.

use core::convert::Infallible;
use core::sync::atomic::{AtomicBool, Ordering};

use pmu::access::X86Msr;
use pmu::apic::x2apic::{X2Apic, msr};
use pmu::apic::{
    IpiDelivery, IpiDestination, LocalApic, LvtPerfCounter, LvtPerfCounterEntry, PmiApic, Vector,
};
use pmu::detect::{HardwareCpuid, x2apic_supported};

/// Whether the CPUs are (or, for APs not yet up, will be) in x2APIC mode.
static X2APIC: AtomicBool = AtomicBool::new(false);

/// Whether [`enter_x2apic`] switched this kernel to x2APIC mode.
pub fn x2apic_mode() -> bool {
    X2APIC.load(Ordering::Acquire)
}

/// Why [`enter_x2apic`] did not switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum X2ApicError {
    /// CPUID.01H:ECX\[21\] is clear: the processor has no x2APIC mode
    /// (QEMU 7.2's TCG, for one).
    Unsupported,
    /// Application processors are already up (in xAPIC mode): switch
    /// before [`crate::smp::start_aps`].
    ApsOnline,
}

impl core::fmt::Display for X2ApicError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            X2ApicError::Unsupported => {
                "the processor has no x2APIC mode (CPUID.01H:ECX[21] clear; QEMU 7.2's TCG emulates none, KVM's -cpu host has it)"
            }
            X2ApicError::ApsOnline => {
                "application processors are up in xAPIC mode: enter x2APIC mode before smp::start_aps"
            }
        })
    }
}

/// This CPU's hardware MSR backend.
fn hardware_msr() -> X86Msr {
    // SAFETY: the kernel runs at CPL 0; the handle is used on this CPU
    // only (it is `!Send`, and so is every `Apic` holding it); the only
    // MSRs written through it are the x2APIC registers and
    // IA32_APIC_BASE's mode bits (`X2Apic`), none of which changes how
    // memory is accessed.
    unsafe { X86Msr::new() }
}

/// Switches this kernel to x2APIC mode: the boot CPU now (IA32_APIC_BASE
/// EXTD, SDM Vol. 3A 11.12.1), every AP as it comes up. Call it on the
/// boot CPU, with interrupts off, before [`crate::smp::start_aps`]; the
/// APIC's settings (SVR, LVT entries) carry over. Idempotent.
pub fn enter_x2apic() -> Result<(), X2ApicError> {
    if x2apic_mode() {
        return Ok(());
    }
    if !x2apic_supported(&HardwareCpuid) {
        return Err(X2ApicError::Unsupported);
    }
    if crate::smp::online() > 1 {
        return Err(X2ApicError::ApsOnline);
    }
    let Ok(_) = X2Apic::enter(hardware_msr());
    X2APIC.store(true, Ordering::Release);
    Ok(())
}

/// The boot CPU's first APIC step: the mode the firmware left. A firmware
/// may hand over with x2APIC mode on (IA32_APIC_BASE EXTD set: machines
/// with more than 255 logical processors, or with interrupt remapping),
/// where the xAPIC page no longer answers and only the x2APIC MSRs do
/// (SDM Vol. 3A 11.12.1); the kernel then runs in x2APIC mode from the
/// start. QEMU's firmwares leave xAPIC mode.
pub(crate) fn adopt_firmware_mode() {
    if !x2apic_supported(&HardwareCpuid) {
        return;
    }
    // SAFETY: IA32_APIC_BASE exists on every processor with an APIC
    // (CPUID.01H:EDX[9], implied by x2APIC support); reading it changes
    // nothing.
    let base = unsafe { hardware_msr().read_msr(pmu::apic::x2apic::IA32_APIC_BASE) };
    if base & pmu::apic::x2apic::APIC_BASE_EXTD != 0 {
        X2APIC.store(true, Ordering::Release);
    }
}

/// An AP's first APIC step: the mode the boot CPU chose.
pub(crate) fn enter_mode_on_ap() {
    if x2apic_mode() {
        let Ok(_) = X2Apic::enter(hardware_msr());
    }
}

/// The spurious-interrupt vector every CPU's APIC is software-enabled with
/// (the SVR's vector field, SDM Vol. 3A 11.9): FFH, the vector the kernels
/// here give [`Apic::enable`] too. A kernel may enable its APIC again with
/// another vector.
pub const SPURIOUS_VECTOR: Vector = match Vector::new(0xFF) {
    Some(v) => v,
    None => panic!("FFH is a vector"),
};

/// Software-enables the local APIC of the CPU this runs on (SVR bit 8,
/// [`SPURIOUS_VECTOR`]; TPR 0), in the kernel's mode: what the boot code
/// does for the boot CPU and [`crate::smp`] for every AP, whatever state
/// the firmware left (see the [module documentation](self)).
pub(crate) fn enable_this_cpu() -> Apic {
    let mut apic = local_apic();
    apic.enable(SPURIOUS_VECTOR);
    apic
}

/// The local APIC of the CPU this runs on, in the kernel's mode. Safe here
/// because the boot code maps the xAPIC page identity-mapped uncacheable
/// for every CPU, the mode is the same on every CPU once it is up, and
/// each CPU uses the handles of its own APIC one at a time (main code
/// with interrupts off while a handler might use its own).
pub fn local_apic() -> Apic {
    if x2apic_mode() {
        Apic::X2(X2Apic::new(hardware_msr()))
    } else {
        // SAFETY: see above: the boot code maps the default xAPIC page,
        // the CPUs are in xAPIC mode, and a handle is used on the CPU that
        // made it.
        Apic::X(unsafe {
            LocalApic::new(
                core::ptr::NonNull::new(pmu::apic::DEFAULT_BASE as *mut u8)
                    .expect("the default base is not null"),
            )
        })
    }
}

/// This CPU's local APIC in either mode: the operations of the crate's
/// [`LocalApic`] and [`X2Apic`] that a test kernel uses, one name each.
/// `!Send`, as both are.
#[derive(Debug)]
pub enum Apic {
    /// xAPIC mode: the memory-mapped page.
    X(LocalApic),
    /// x2APIC mode: the MSRs.
    X2(X2Apic<X86Msr>),
}

/// Unwraps the hardware backend's result, which cannot be an error.
fn ok<T>(r: Result<T, Infallible>) -> T {
    match r {
        Ok(v) => v,
    }
}

/// The methods of [`Apic`]: each is the method of the same name of the
/// mode's handle, whose hardware backend cannot fail in x2APIC mode.
macro_rules! in_either_mode {
    ($($(#[$doc:meta])* fn $name:ident(&mut self $(, $arg:ident: $ty:ty)*) $(-> $ret:ty)?;)*) => {
        impl Apic {
            $(
                $(#[$doc])*
                pub fn $name(&mut self $(, $arg: $ty)*) $(-> $ret)? {
                    match self {
                        Apic::X(a) => a.$name($($arg),*),
                        Apic::X2(a) => ok(a.$name($($arg),*)),
                    }
                }
            )*
        }
    };
}

in_either_mode! {
    /// The APIC ID (8 bits in xAPIC mode, 32 in x2APIC mode).
    fn id(&mut self) -> u32;
    /// The version register.
    fn version(&mut self) -> u32;
    /// Software-enables the APIC with `spurious` as the spurious vector.
    fn enable(&mut self, spurious: Vector);
    /// End of interrupt.
    fn eoi(&mut self);
    /// The LVT performance-counter entry.
    fn perf_counter_entry(&mut self) -> LvtPerfCounter;
    /// Writes the LVT performance-counter entry.
    fn set_perf_counter_entry(&mut self, entry: LvtPerfCounter);
    /// A fixed interrupt to this CPU (xAPIC: the ICR's self shorthand;
    /// x2APIC: the SELF IPI register).
    fn self_ipi(&mut self, vector: Vector);
    /// An NMI to this CPU.
    fn self_nmi(&mut self);
    /// An IPI to another CPU (or all others).
    fn send_ipi(&mut self, to: IpiDestination, what: IpiDelivery);
    /// Whether `vector` is in service (ISR).
    fn in_service(&mut self, vector: u8) -> bool;
    /// Whether `vector` is pending (IRR).
    fn pending(&mut self, vector: u8) -> bool;
}

impl LvtPerfCounterEntry for Apic {
    fn write_lvt_perf_counter(&mut self, entry: LvtPerfCounter) {
        self.set_perf_counter_entry(entry);
    }
}

/// Where a bounded wait ([`crate::pmi`]) reads an APIC register: a word of
/// the xAPIC page, or an x2APIC MSR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Register {
    /// The 32-bit xAPIC register at this address.
    Mmio(*const u32),
    /// The x2APIC MSR (its low 32 bits).
    Msr(u32),
}

/// The LVT performance-counter register in the kernel's mode.
pub(crate) fn lvt_perf_counter_register() -> Register {
    if x2apic_mode() {
        Register::Msr(msr::LVT_PERF_COUNTER)
    } else {
        Register::Mmio((pmu::apic::DEFAULT_BASE + 0x340) as *const u32)
    }
}

/// The IRR register that holds `vector`, and its bit (eight 32-bit
/// registers, vector `v` at bit `v % 32` of register `v / 32`: xAPIC
/// offset 200H + 10H each, x2APIC MSRs 820H-827H).
pub(crate) fn irr_register(vector: u8) -> (Register, u32) {
    let bit = 1 << (vector % 32);
    let index = u32::from(vector / 32);
    if x2apic_mode() {
        (Register::Msr(msr::IRR0 + index), bit)
    } else {
        let address = pmu::apic::DEFAULT_BASE + 0x200 + 0x10 * u64::from(index);
        (Register::Mmio(address as *const u32), bit)
    }
}

/// [`Apic`] raises a model's PMI through the crate's
/// [`pmu::apic::deliver_model_pmi`] (as [`crate::pmi::deliver`] does) in
/// either mode; its hardware backend cannot fail.
impl PmiApic for Apic {
    type Error = Infallible;

    fn lvt_perf_counter(&mut self) -> Result<LvtPerfCounter, Infallible> {
        Ok(self.perf_counter_entry())
    }

    fn set_lvt_perf_counter(&mut self, entry: LvtPerfCounter) -> Result<(), Infallible> {
        self.set_perf_counter_entry(entry);
        Ok(())
    }

    fn send_self_ipi(&mut self, vector: Vector) -> Result<(), Infallible> {
        self.self_ipi(vector);
        Ok(())
    }

    fn send_self_nmi(&mut self) -> Result<(), Infallible> {
        self.self_nmi();
        Ok(())
    }
}

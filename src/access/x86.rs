//! The hardware backend: RDMSR, WRMSR and RDPMC executed for real.

use core::convert::Infallible;
use core::marker::PhantomData;

use super::MsrAccess;

/// Direct access to this CPU's MSRs and performance counters.
///
/// The handle is `!Send` and `!Sync`: MSRs belong to one logical processor,
/// and a handle moved to another CPU would silently program the wrong PMU.
#[derive(Debug)]
pub struct X86Msr {
    _per_cpu: PhantomData<*mut ()>,
}

impl X86Msr {
    /// Creates the hardware backend.
    ///
    /// # Safety
    ///
    /// For as long as the handle is used, the caller guarantees that:
    /// * the code runs at CPL0 (RDMSR and WRMSR raise #GP elsewhere; RDPMC
    ///   does too unless CR4.PCE is set);
    /// * it is used on the CPU that made it (the handle is `!Send`): its
    ///   registers are that logical processor's, and its PMU the one of
    ///   that CPU's package (NetBurst) or processor (Itanium). Any number of
    ///   `X86Msr`s may exist, one per CPU: which drivers share a physical
    ///   PMU is the business of that PMU's value
    ///   ([`crate::arch::netburst::NetBurstPmu`],
    ///   [`crate::arch::itanium::ItaniumPmu`]), not of the backend;
    /// * the MSRs and counter indices passed to it exist on this CPU (see
    ///   [`crate::detect`]), since any other number raises #GP, and RDPMC
    ///   raises #UD on a CPU without counters (QEMU's TCG, for one);
    /// * the values written do not break memory safety: the driver writes
    ///   only PMU MSRs, but this backend itself accepts any MSR, including
    ///   ones such as `IA32_EFER` or `IA32_DS_AREA` that change how memory
    ///   is accessed.
    pub const unsafe fn new() -> Self {
        Self {
            _per_cpu: PhantomData,
        }
    }
}

impl MsrAccess for X86Msr {
    type Error = Infallible;

    #[inline]
    fn read_msr(&mut self, msr: u32) -> Result<u64, Infallible> {
        let (low, high): (u64, u64);
        // SAFETY: `X86Msr::new`'s contract: CPL0, the MSR exists on this CPU.
        // RDMSR only reads the MSR into EDX:EAX; in 64-bit mode it clears
        // bits 63:32 of RAX and RDX (SDM Vol. 2B, RDMSR), so both are read
        // whole and joined without zero-extending either (as Linux's
        // `EAX_EDX_VAL` does on x86_64, `arch/x86/include/asm/msr.h`).
        unsafe {
            core::arch::asm!(
                "rdmsr",
                in("ecx") msr,
                out("rax") low,
                out("rdx") high,
                options(nomem, nostack, preserves_flags),
            );
        }
        Ok(high << 32 | low)
    }

    #[inline]
    fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Infallible> {
        let mut register = x86_64::registers::model_specific::Msr::new(msr);
        // SAFETY: `X86Msr::new`'s contract: CPL0, the MSR exists on this CPU,
        // and the caller vouches that the value keeps memory safe.
        unsafe { register.write(value) };
        Ok(())
    }

    #[inline]
    fn rdpmc(&mut self, index: u32) -> Result<u64, Infallible> {
        let value: u64;
        // SAFETY: `X86Msr::new`'s contract: CPL0 and a counter index that
        // exists on this CPU. RDPMC only reads a counter into EDX:EAX, and
        // in 64-bit mode clears bits 63:32 of RAX and RDX (SDM Vol. 2B,
        // RDPMC); the two instructions after it join them in RAX.
        unsafe {
            core::arch::asm!(
                "rdpmc",
                "shl rdx, 32",
                "or rax, rdx",
                in("ecx") index,
                out("rax") value,
                out("rdx") _,
                // Not `nomem`: the read must stay ordered with the code it measures.
                options(nostack),
            );
        }
        Ok(value)
    }
}

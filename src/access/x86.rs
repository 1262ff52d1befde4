//! The hardware backend: RDMSR, WRMSR and RDPMC executed for real.

use core::convert::Infallible;
use core::marker::PhantomData;

use super::MsrBackend;
use crate::sealed::{self, Sealed, Token};

/// Direct access to this CPU's MSRs and performance counters: the
/// drivers' backend on hardware. It implements only the sealed
/// [`MsrBackend`], so safe code reaches its registers only through the
/// drivers; its raw accesses ([`X86Msr::read_msr`], [`X86Msr::write_msr`],
/// [`X86Msr::rdpmc`]) are `unsafe`.
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
    ///   [`crate::arch::itanium::ItaniumPmu`]), not of the backend.
    ///
    /// The drivers reach this backend only through their checked paths
    /// (the registers of the PMU detection found, `IA32_DS_AREA` only with
    /// a save area the driver owns); the raw accesses below are `unsafe`,
    /// with contracts of their own.
    pub const unsafe fn new() -> Self {
        Self {
            _per_cpu: PhantomData,
        }
    }

    /// RDMSR: the model-specific register at `msr`.
    ///
    /// # Safety
    ///
    /// `msr` exists on this CPU (any other number raises #GP), and reading
    /// it has no effect the code around relies on not happening (a few
    /// MSRs clear state when read).
    #[inline]
    pub unsafe fn read_msr(&mut self, msr: u32) -> u64 {
        let (low, high): (u64, u64);
        // SAFETY: `X86Msr::new`'s contract (CPL0) and this method's (the MSR
        // exists). RDMSR only reads the MSR into EDX:EAX; in 64-bit mode it
        // clears bits 63:32 of RAX and RDX (SDM Vol. 2B, RDMSR), so both
        // are read whole and joined without zero-extending either (as
        // Linux's `EAX_EDX_VAL` does on x86_64, `arch/x86/include/asm/msr.h`).
        unsafe {
            core::arch::asm!(
                "rdmsr",
                in("ecx") msr,
                out("rax") low,
                out("rdx") high,
                options(nomem, nostack, preserves_flags),
            );
        }
        high << 32 | low
    }

    /// WRMSR: writes `value` to the model-specific register at `msr`.
    ///
    /// # Safety
    ///
    /// `msr` exists on this CPU and accepts `value` (otherwise #GP), and
    /// the write keeps memory safe: registers such as `IA32_EFER`,
    /// `IA32_PAT` or `IA32_DS_AREA` (whose save area the processor then
    /// writes by linear address) change how memory is accessed.
    #[inline]
    pub unsafe fn write_msr(&mut self, msr: u32, value: u64) {
        let mut register = x86_64::registers::model_specific::Msr::new(msr);
        // SAFETY: `X86Msr::new`'s contract (CPL0) and this method's (the
        // MSR exists, accepts the value, and the value keeps memory safe).
        unsafe { register.write(value) };
    }

    /// RDPMC: performance counter `index`, the value placed in ECX.
    ///
    /// # Safety
    ///
    /// The counter exists on this CPU (otherwise #GP; RDPMC raises #UD on
    /// a CPU without counters, QEMU's TCG for one).
    #[inline]
    pub unsafe fn rdpmc(&mut self, index: u32) -> u64 {
        let value: u64;
        // SAFETY: `X86Msr::new`'s contract (CPL0) and this method's (the
        // counter exists). RDPMC only reads a counter into EDX:EAX, and in
        // 64-bit mode clears bits 63:32 of RAX and RDX (SDM Vol. 2B,
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
        value
    }
}

impl Sealed<sealed::Msr> for X86Msr {}

/// The drivers' access to the hardware: each call is one of the crate's
/// checked paths (sealed: the token is the crate's).
impl MsrBackend for X86Msr {
    type Error = Infallible;

    #[inline(always)]
    fn backend_read_msr(&mut self, _: Token, msr: u32) -> Result<u64, Infallible> {
        // SAFETY: only the crate calls this (the token), with the MSRs of
        // the PMU detection found (or IA32_MISC_ENABLE and the x2APIC's,
        // which detection checks first), none of which clears state on a
        // read.
        Ok(unsafe { self.read_msr(msr) })
    }

    #[inline(always)]
    fn backend_write_msr(&mut self, _: Token, msr: u32, value: u64) -> Result<(), Infallible> {
        // SAFETY: only the crate calls this (the token): the drivers write
        // the PMU registers of their own counters, whose values change no
        // memory access, and `IA32_DS_AREA` only with a save area the
        // driver owns for as long as the processor may write it; the
        // x2APIC layer writes the APIC's registers.
        unsafe { self.write_msr(msr, value) };
        Ok(())
    }

    #[inline(always)]
    fn backend_rdpmc(&mut self, _: Token, index: u32) -> Result<u64, Infallible> {
        // SAFETY: only the crate calls this (the token), with the counters
        // of the PMU detection found.
        Ok(unsafe { self.rdpmc(index) })
    }
}

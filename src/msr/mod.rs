//! The MSR access layer: the only door from the driver to the privileged
//! instructions RDMSR, WRMSR and RDPMC.
//!
//! Every other part of the crate talks to the PMU through [`MsrAccess`]. Three
//! kinds of backend implement it:
//!
//! * [`X86Msr`]: the real instructions, for a kernel running at CPL0;
//! * [`Recording`]: a wrapper around any backend that counts and logs every
//!   access, so tests can assert the exact MSR traffic of an operation;
//! * the register-level PMU models (test instruments), which answer like the
//!   hardware would, including #GP for a missing MSR or a reserved bit.
//!
//! A backend reports a fault through its associated [`MsrAccess::Error`]. On
//! real hardware a faulting access never returns (the CPU raises #GP or #UD),
//! so [`X86Msr`] uses [`core::convert::Infallible`] and every `Result` in the
//! typed API compiles down to the bare instruction.

mod hardware;
mod recording;

pub use hardware::X86Msr;
pub use recording::{Access, AccessCounts, Recording};

/// The privileged operations the driver needs, on the CPU that owns the PMU.
///
/// Addresses and counter indices are the raw numbers from the manuals (for
/// example `0x360` for NetBurst's `MSR_BPU_CCCR0`); the architecture modules
/// wrap them in types so that registers of different kinds cannot be mixed up.
pub trait MsrAccess {
    /// How the backend reports an access the hardware would fault on.
    type Error: core::fmt::Debug;

    /// RDMSR: read the model-specific register at `msr`.
    fn read_msr(&mut self, msr: u32) -> Result<u64, Self::Error>;

    /// WRMSR: write `value` to the model-specific register at `msr`.
    fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Self::Error>;

    /// RDPMC: read performance counter `index`, the value placed in ECX.
    ///
    /// On NetBurst, bits 30:0 of ECX select the counter (0-17) and bit 31
    /// requests a "fast" read of the low 32 bits only (SDM Vol. 2B, RDPMC).
    fn read_pmc(&mut self, index: u32) -> Result<u64, Self::Error>;
}

impl<T: MsrAccess + ?Sized> MsrAccess for &mut T {
    type Error = T::Error;

    #[inline]
    fn read_msr(&mut self, msr: u32) -> Result<u64, Self::Error> {
        (**self).read_msr(msr)
    }

    #[inline]
    fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Self::Error> {
        (**self).write_msr(msr, value)
    }

    #[inline]
    fn read_pmc(&mut self, index: u32) -> Result<u64, Self::Error> {
        (**self).read_pmc(index)
    }
}

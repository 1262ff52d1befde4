//! The register-access layer: the only door from the drivers to the PMU
//! registers, for both architectures.
//!
//! Two backend traits, one per register space, side by side:
//!
//! | trait | architecture | instructions |
//! |---|---|---|
//! | [`MsrAccess`] | IA-32 (NetBurst) | RDMSR, WRMSR, RDPMC |
//! | [`PmcPmdAccess`] | Itanium | `mov r = pmc[n]`, `mov pmc[n] = r`, `mov r = pmd[n]`, `mov pmd[n] = r` |
//!
//! and the backends that implement them:
//!
//! * [`X86Msr`] (file `x86.rs`): the real IA-32 instructions, for a kernel
//!   at CPL0. There is no Itanium hardware backend: Rust has no IA-64 target,
//!   so the `mov pmc/pmd` forms cannot be emitted; an IA-64 port would
//!   implement [`PmcPmdAccess`] with them (plus `srlz.d` after a PMC write,
//!   SDM Vol. 2 7.2);
//! * [`Recording`]: wraps a backend of either kind and counts and logs every
//!   access, so tests assert the exact register traffic of an operation;
//! * the register-level PMU models (`pmu::model`, test instruments), which
//!   answer as the hardware would, including #GP (NetBurst) and Reserved
//!   Register/Field faults (Itanium, strict checking).
//!
//! The traits are not sealed: a kernel may bring its own backend (the QEMU
//! test kernels put the models behind interrupt-safe locks; a hypervisor may
//! route a guest's accesses), and the drivers' guarantees rest on the
//! typestate handles, not on who executes the instruction.
//!
//! A backend reports a refused access through its associated `Error`. On
//! real hardware a faulting access never returns (the CPU raises #GP or
//! #UD), so [`X86Msr`] uses [`core::convert::Infallible`] and every `Result`
//! in the typed API compiles down to the bare instruction.
//!
//! # Examples
//!
//! Count the traffic of an access sequence on the NetBurst model:
//!
//! (On a register-level model: a doc test with the `model` feature, ignored without it.)
//!
#![cfg_attr(feature = "model", doc = "```")]
#![cfg_attr(not(feature = "model"), doc = "```ignore")]
//! use pmu::access::{AccessCounts, MsrAccess, Recording};
//! use pmu::model::netburst::{Config, NetBurstModel};
//!
//! let mut msr = Recording::<_, 8>::new(NetBurstModel::new(Config::prescott_ht()));
//! msr.write_msr(0x300, 5)?;              // MSR_BPU_COUNTER0
//! assert_eq!(msr.rdpmc(0)?, 5);       // RDPMC 0
//! assert_eq!(msr.take_counts(), AccessCounts::msr(0, 1, 1));
//! # Ok::<(), pmu::model::netburst::Fault>(())
//! ```

mod recording;
mod x86;

pub use recording::{Access, AccessCounts, Recording};
pub use x86::X86Msr;

/// The privileged IA-32 operations the NetBurst driver needs, on the CPU
/// that owns the PMU.
///
/// Addresses and counter indices are the raw numbers from the manuals (for
/// example `0x360` for NetBurst's `MSR_BPU_CCCR0`); the architecture modules
/// wrap them in types so that registers of different kinds cannot be mixed up.
pub trait MsrAccess {
    /// How the backend reports an access the hardware would fault on (the
    /// hardware backend's is `Infallible`; a model's says which rule the
    /// access broke).
    type Error: core::fmt::Debug + core::fmt::Display;

    /// RDMSR: read the model-specific register at `msr`.
    fn read_msr(&mut self, msr: u32) -> Result<u64, Self::Error>;

    /// WRMSR: write `value` to the model-specific register at `msr`.
    fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Self::Error>;

    /// RDPMC: read performance counter `index`, the value placed in ECX
    /// (named for the instruction, as `read_pmc` on [`PmcPmdAccess`] names
    /// an Itanium PMC read).
    ///
    /// On NetBurst, bits 30:0 of ECX select the counter (0-17) and bit 31
    /// requests a "fast" read of the low 32 bits only (SDM Vol. 2B, RDPMC).
    fn rdpmc(&mut self, index: u32) -> Result<u64, Self::Error>;
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
    fn rdpmc(&mut self, index: u32) -> Result<u64, Self::Error> {
        (**self).rdpmc(index)
    }
}

/// The Itanium PMU register accesses the Itanium driver needs: the indirect
/// register files PMC (configuration) and PMD (data), SDM Vol. 3 `mov`
/// indirect.
pub trait PmcPmdAccess {
    /// How a backend reports a refused access (only a model refuses: the
    /// architecture does not fault on PMC/PMD accesses at CPL 0, SDM Vol. 3
    /// `mov` indirect).
    type Error: core::fmt::Debug + core::fmt::Display;
    /// `mov r = pmc[n]`.
    fn read_pmc(&mut self, n: u8) -> Result<u64, Self::Error>;
    /// `mov pmc[n] = value` (and `srlz.d`).
    fn write_pmc(&mut self, n: u8, value: u64) -> Result<(), Self::Error>;
    /// `mov r = pmd[n]`.
    fn read_pmd(&mut self, n: u8) -> Result<u64, Self::Error>;
    /// `mov pmd[n] = value`.
    fn write_pmd(&mut self, n: u8, value: u64) -> Result<(), Self::Error>;
}

impl<T: PmcPmdAccess + ?Sized> PmcPmdAccess for &mut T {
    type Error = T::Error;

    #[inline]
    fn read_pmc(&mut self, n: u8) -> Result<u64, Self::Error> {
        (**self).read_pmc(n)
    }

    #[inline]
    fn write_pmc(&mut self, n: u8, value: u64) -> Result<(), Self::Error> {
        (**self).write_pmc(n, value)
    }

    #[inline]
    fn read_pmd(&mut self, n: u8) -> Result<u64, Self::Error> {
        (**self).read_pmd(n)
    }

    #[inline]
    fn write_pmd(&mut self, n: u8, value: u64) -> Result<(), Self::Error> {
        (**self).write_pmd(n, value)
    }
}

//! The register-access layer: the only door from the drivers to the PMU
//! registers, for every architecture.
//!
//! Two register spaces, side by side, each with two traits:
//!
//! | space | open trait (software backends) | sealed trait (what the drivers take) | instructions |
//! |---|---|---|---|
//! | IA-32 MSRs | [`MsrAccess`] | [`MsrBackend`] | RDMSR, WRMSR, RDPMC |
//! | Itanium PMC/PMD | [`PmcPmdAccess`] | [`PmcPmdBackend`] | `mov r = pmc[n]`, `mov pmc[n] = r`, `mov r = pmd[n]`, `mov pmd[n] = r` |
//!
//! The drivers, PMI handlers, the x2APIC layer and the hypervisor layer are
//! generic over the sealed traits, whose operations only this crate can
//! call (their methods take a crate-private token). Two kinds of backend
//! implement them:
//!
//! * **The hardware backend** [`X86Msr`] (file `x86.rs`): the real IA-32
//!   instructions, for a kernel at CPL 0. It implements only the sealed
//!   [`MsrBackend`], so safe code reaches a hardware register only through
//!   a driver's checked paths: a driver writes the PMU registers of its own
//!   counters, and `IA32_DS_AREA` only with a save area it owns. Raw access
//!   is `unsafe` at the call: [`X86Msr::read_msr`], [`X86Msr::write_msr`],
//!   [`X86Msr::rdpmc`], as `x86_64`'s `Msr::write` is. There is no Itanium
//!   hardware backend: Rust has no IA-64 target, so the `mov pmc/pmd` forms
//!   cannot be emitted; an IA-64 port would add one beside `X86Msr`, with
//!   `srlz.d` after a PMC write (SDM Vol. 2 7.2).
//! * **Software backends**, which implement the open traits
//!   [`MsrAccess`] and [`PmcPmdAccess`] (and so the sealed ones, through
//!   a blanket implementation): the register-level PMU models (`pmu::model`,
//!   test instruments, which answer as the hardware would, including #GP and
//!   Itanium's Reserved Register/Field faults), [`Recording`] (wraps one and
//!   counts and logs every access, so tests assert the exact register
//!   traffic of an operation), a kernel's interrupt-safe lock around a
//!   model, a hypervisor's routing of a guest's accesses. Their methods are
//!   safe: an access to a software backend cannot break memory safety. A
//!   kernel that wraps the real instructions in its own backend calls
//!   `X86Msr`'s `unsafe` methods and takes on their contracts there.
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

use crate::sealed::{self, Sealed, TOKEN, Token};

/// RDMSR, WRMSR and RDPMC as safe calls, for a software backend: a PMU
/// model, a [`Recording`], a kernel's lock around a model, a hypervisor's
/// routing of a guest's accesses. Every `MsrAccess` is an [`MsrBackend`],
/// so the drivers take it.
///
/// Addresses and counter indices are the raw numbers from the manuals (for
/// example `0x360` for NetBurst's `MSR_BPU_CCCR0`); the architecture modules
/// wrap them in types so that registers of different kinds cannot be mixed up.
///
/// The hardware backend [`X86Msr`] is not an `MsrAccess`: a safe method
/// that writes any MSR with any value would let safe code write
/// `IA32_EFER` or `IA32_DS_AREA`. Its raw accesses are its own `unsafe`
/// methods.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a software MSR backend (`pmu::access::MsrAccess`)",
    note = "the hardware backend `X86Msr` reaches registers only through the drivers, or through its own `unsafe` methods (`X86Msr::write_msr`), whose contract the caller keeps"
)]
pub trait MsrAccess {
    /// How the backend reports an access the hardware would fault on (a
    /// model's error says which rule the access broke).
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

/// The MSR backend the drivers, PMI handlers and the x2APIC and hypervisor
/// layers are generic over: the hardware backend [`X86Msr`], or any
/// software backend ([`MsrAccess`]). Sealed: only this crate implements it
/// and only this crate calls its operations (they take a crate-private
/// token), so that safe code writes a hardware register only through a
/// driver's checked paths.
pub trait MsrBackend: Sealed<sealed::Msr> {
    /// How the backend reports a refused access: `Infallible` on hardware,
    /// a software backend's [`MsrAccess::Error`].
    type Error: core::fmt::Debug + core::fmt::Display;

    /// RDMSR.
    #[doc(hidden)]
    fn backend_read_msr(&mut self, _: Token, msr: u32) -> Result<u64, Self::Error>;

    /// WRMSR.
    #[doc(hidden)]
    fn backend_write_msr(&mut self, _: Token, msr: u32, value: u64) -> Result<(), Self::Error>;

    /// RDPMC.
    #[doc(hidden)]
    fn backend_rdpmc(&mut self, _: Token, index: u32) -> Result<u64, Self::Error>;
}

impl<M: MsrAccess + ?Sized> Sealed<sealed::Msr> for M {}

impl<M: MsrAccess + ?Sized> MsrBackend for M {
    type Error = M::Error;

    #[inline(always)]
    fn backend_read_msr(&mut self, _: Token, msr: u32) -> Result<u64, M::Error> {
        self.read_msr(msr)
    }

    #[inline(always)]
    fn backend_write_msr(&mut self, _: Token, msr: u32, value: u64) -> Result<(), M::Error> {
        self.write_msr(msr, value)
    }

    #[inline(always)]
    fn backend_rdpmc(&mut self, _: Token, index: u32) -> Result<u64, M::Error> {
        self.rdpmc(index)
    }
}

/// The crate's own calls on an [`MsrBackend`], by the instructions' names
/// (the token supplied): what the drivers, handlers and layers write.
pub(crate) trait MsrOps: MsrBackend {
    /// RDMSR.
    fn read_msr(&mut self, msr: u32) -> Result<u64, Self::Error>;
    /// WRMSR.
    fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Self::Error>;
    /// RDPMC.
    fn rdpmc(&mut self, index: u32) -> Result<u64, Self::Error>;
}

impl<M: MsrBackend + ?Sized> MsrOps for M {
    #[inline(always)]
    fn read_msr(&mut self, msr: u32) -> Result<u64, M::Error> {
        self.backend_read_msr(TOKEN, msr)
    }

    #[inline(always)]
    fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), M::Error> {
        self.backend_write_msr(TOKEN, msr, value)
    }

    #[inline(always)]
    fn rdpmc(&mut self, index: u32) -> Result<u64, M::Error> {
        self.backend_rdpmc(TOKEN, index)
    }
}

/// The Itanium PMU register accesses as safe calls, for a software
/// backend (the Itanium model, a [`Recording`]): the indirect register
/// files PMC (configuration) and PMD (data), SDM Vol. 3 `mov` indirect.
/// Every `PmcPmdAccess` is a [`PmcPmdBackend`], so the Itanium driver takes
/// it.
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

/// The PMC/PMD backend the Itanium driver, handler and hypervisor layer are
/// generic over: any software backend ([`PmcPmdAccess`]), and an IA-64
/// port's hardware backend, which would implement only this trait as
/// [`X86Msr`] implements only [`MsrBackend`]. Sealed, for the same reason.
pub trait PmcPmdBackend: Sealed<sealed::PmcPmd> {
    /// How the backend reports a refused access.
    type Error: core::fmt::Debug + core::fmt::Display;

    /// `mov r = pmc[n]`.
    #[doc(hidden)]
    fn backend_read_pmc(&mut self, _: Token, n: u8) -> Result<u64, Self::Error>;
    /// `mov pmc[n] = value` (and `srlz.d`).
    #[doc(hidden)]
    fn backend_write_pmc(&mut self, _: Token, n: u8, value: u64) -> Result<(), Self::Error>;
    /// `mov r = pmd[n]`.
    #[doc(hidden)]
    fn backend_read_pmd(&mut self, _: Token, n: u8) -> Result<u64, Self::Error>;
    /// `mov pmd[n] = value`.
    #[doc(hidden)]
    fn backend_write_pmd(&mut self, _: Token, n: u8, value: u64) -> Result<(), Self::Error>;
}

impl<R: PmcPmdAccess + ?Sized> Sealed<sealed::PmcPmd> for R {}

impl<R: PmcPmdAccess + ?Sized> PmcPmdBackend for R {
    type Error = R::Error;

    #[inline(always)]
    fn backend_read_pmc(&mut self, _: Token, n: u8) -> Result<u64, R::Error> {
        self.read_pmc(n)
    }

    #[inline(always)]
    fn backend_write_pmc(&mut self, _: Token, n: u8, value: u64) -> Result<(), R::Error> {
        self.write_pmc(n, value)
    }

    #[inline(always)]
    fn backend_read_pmd(&mut self, _: Token, n: u8) -> Result<u64, R::Error> {
        self.read_pmd(n)
    }

    #[inline(always)]
    fn backend_write_pmd(&mut self, _: Token, n: u8, value: u64) -> Result<(), R::Error> {
        self.write_pmd(n, value)
    }
}

/// The crate's own calls on a [`PmcPmdBackend`] (the token supplied).
pub(crate) trait PmcPmdOps: PmcPmdBackend {
    /// `mov r = pmc[n]`.
    fn read_pmc(&mut self, n: u8) -> Result<u64, Self::Error>;
    /// `mov pmc[n] = value`.
    fn write_pmc(&mut self, n: u8, value: u64) -> Result<(), Self::Error>;
    /// `mov r = pmd[n]`.
    fn read_pmd(&mut self, n: u8) -> Result<u64, Self::Error>;
    /// `mov pmd[n] = value`.
    fn write_pmd(&mut self, n: u8, value: u64) -> Result<(), Self::Error>;
}

impl<R: PmcPmdBackend + ?Sized> PmcPmdOps for R {
    #[inline(always)]
    fn read_pmc(&mut self, n: u8) -> Result<u64, R::Error> {
        self.backend_read_pmc(TOKEN, n)
    }

    #[inline(always)]
    fn write_pmc(&mut self, n: u8, value: u64) -> Result<(), R::Error> {
        self.backend_write_pmc(TOKEN, n, value)
    }

    #[inline(always)]
    fn read_pmd(&mut self, n: u8) -> Result<u64, R::Error> {
        self.backend_read_pmd(TOKEN, n)
    }

    #[inline(always)]
    fn write_pmd(&mut self, n: u8, value: u64) -> Result<(), R::Error> {
        self.backend_write_pmd(TOKEN, n, value)
    }
}

/// `backend` reborrowed; for a zero-sized backend (`X86Msr`), a reference
/// made afresh, so that a PMI handler's loop keeps no register for the
/// caller's pointer (which a zero-sized backend's accesses do not use) only
/// to pass it to the handler's out-of-line rare path.
#[inline(always)]
pub(crate) fn backend_for_cold_path<M>(backend: &mut M) -> &mut M {
    if size_of::<M>() == 0 {
        // SAFETY: `M` is zero-sized, so a reference to it accesses no
        // memory, and a non-null, aligned pointer such as `dangling` is
        // valid for it. The result borrows `backend` for its whole life, so
        // it is as exclusive as a reborrow of `backend`, whose value (the one
        // value of a zero-sized type) it designates.
        unsafe { core::ptr::NonNull::<M>::dangling().as_mut() }
    } else {
        backend
    }
}

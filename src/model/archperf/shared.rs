//! An architectural-PMU model shared by a kernel's main code and its
//! interrupt handlers, on one CPU or on several (x86-64 kernels: the lock
//! disables interrupts with `CLI`, so this is for ring 0, not for host
//! programs): the counterpart of [`crate::model::netburst::SharedNetBurstModel`].
//!
//! [`SharedArchPerfModel`] is a `static`-friendly lock around
//! [`ArchPerfModel`]. Every access ([`SharedArchPerfModel::with`], and each
//! MSR access through an [`ArchPerfMsr`] handle) disables interrupts while
//! it holds the lock and then restores RFLAGS.IF as it was, so an interrupt
//! handler that takes the lock never finds it held by the code it
//! interrupted on the same CPU. The lock remembers which CPU holds it (its
//! initial APIC ID, CPUID.01H:EBX\[31:24\]): held by another CPU, an access
//! spins; held by the same CPU it can only be re-entry (a closure given to
//! [`SharedArchPerfModel::with`] using an [`ArchPerfMsr`], or an NMI
//! handler), which panics instead of spinning forever. Do not use the model
//! from an NMI handler.
//!
//! CPUID ([`crate::detect::Cpuid`]) depends only on the configuration and
//! takes no lock.

use super::{ArchPerfModel, Config, Event, Fault, Injected};
use crate::access::MsrAccess;
use crate::detect::{Cpuid, CpuidResult};
use crate::model::lock::IrqLock;

/// An [`ArchPerfModel`] behind a spin lock that is only ever held with
/// interrupts disabled. See the [module documentation](self).
#[derive(Debug)]
pub struct SharedArchPerfModel {
    config: Config,
    model: IrqLock<ArchPerfModel>,
}

impl SharedArchPerfModel {
    /// A shared model in the reset state.
    pub const fn new(config: Config) -> Self {
        Self {
            config,
            model: IrqLock::new(ArchPerfModel::new(config)),
        }
    }

    /// The model's configuration.
    pub const fn config(&self) -> &Config {
        &self.config
    }

    /// Runs `f` on the model with interrupts disabled and the lock held;
    /// restores RFLAGS.IF afterwards. Waits while another CPU holds the lock.
    ///
    /// # Panics
    ///
    /// If this CPU holds the lock already: with interrupts disabled that is
    /// re-entry (`f` using an [`ArchPerfMsr`] of the same model, or an NMI
    /// handler), which would otherwise deadlock.
    pub fn with<R>(&self, f: impl FnOnce(&mut ArchPerfModel) -> R) -> R {
        self.model.with(f)
    }

    /// Puts the model back in its reset state.
    pub fn reset(&self) {
        let config = self.config;
        self.with(|model| *model = ArchPerfModel::new(config));
    }

    /// An MSR backend onto the model.
    pub const fn msr(&self) -> ArchPerfMsr<'_> {
        ArchPerfMsr { shared: self }
    }

    /// The model as the driver sees it: `crate::detect::detect` run against
    /// the model's CPUID and MSRs. `None` if detection does not find an
    /// architectural PMU (which would be a model or detection bug).
    pub fn detect(&self) -> Option<crate::detect::ArchPerfCpu> {
        self.with(|model| {
            let cpuid = model.clone();
            crate::detect::detect(&cpuid, model).ok()?.arch_perf()
        })
    }

    /// Takes the PMI line (see [`ArchPerfModel::take_pmi`]).
    pub fn take_pmi(&self) -> bool {
        self.with(ArchPerfModel::take_pmi)
    }

    /// Whether the PMI line is pending.
    pub fn pmi_pending(&self) -> bool {
        self.with(|model| model.pmi_pending())
    }

    /// [`ArchPerfModel::inject_until_pmi`] under one lock: injects up to
    /// `event.count` occurrences, stopping right after the one that raises
    /// the PMI line (nothing while it is pending), so that the caller can
    /// deliver the PMI before any further event counts and carry the rest
    /// over to its next tick.
    pub fn inject_until_pmi(&self, event: Event) -> Injected {
        self.with(|model| model.inject_until_pmi(event))
    }
}

/// CPUID of the configured processor ([`Config::cpuid`]); takes no lock.
impl Cpuid for SharedArchPerfModel {
    fn cpuid(&self, leaf: u32, subleaf: u32) -> CpuidResult {
        self.config.cpuid(leaf, subleaf)
    }
}

/// A [`crate::access::MsrAccess`] backend onto a [`SharedArchPerfModel`]:
/// every access locks the model (interrupts disabled), forwards and unlocks.
/// `Copy`, so main code and a handler can each hold one.
///
/// Do not use it inside [`SharedArchPerfModel::with`] on the same model:
/// that is a nested lock, which panics.
#[derive(Clone, Copy, Debug)]
pub struct ArchPerfMsr<'a> {
    shared: &'a SharedArchPerfModel,
}

impl MsrAccess for ArchPerfMsr<'_> {
    type Error = Fault;

    fn read_msr(&mut self, msr: u32) -> Result<u64, Fault> {
        self.shared.with(|model| model.read_msr(msr))
    }

    fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Fault> {
        self.shared.with(|model| model.write_msr(msr, value))
    }

    fn rdpmc(&mut self, index: u32) -> Result<u64, Fault> {
        self.shared.with(|model| model.rdpmc(index))
    }
}

/// CPUID through the handle, as through the shared model.
impl Cpuid for ArchPerfMsr<'_> {
    fn cpuid(&self, leaf: u32, subleaf: u32) -> CpuidResult {
        self.shared.cpuid(leaf, subleaf)
    }
}

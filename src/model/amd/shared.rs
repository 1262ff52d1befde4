//! An AMD core PMU model shared by a kernel's main code and its interrupt
//! handlers, on one CPU or on several (x86-64 kernels: the lock disables
//! interrupts with `CLI`, so this is for ring 0, not for host programs):
//! the counterpart of [`crate::model::archperf::SharedArchPerfModel`].
//!
//! [`SharedAmdModel`] is a `static`-friendly lock around [`AmdModel`]
//! ([`crate::model::lock::IrqLock`]: held only with interrupts disabled;
//! re-entry on the same CPU, a nested access or an NMI handler, panics
//! rather than deadlocks). Do not use the model from an NMI handler's
//! register accesses while the interrupted code holds it: deliver the
//! model's PMIs between accesses, as `pmu-hobby`'s `pmi::inject` does.
//!
//! CPUID ([`crate::detect::Cpuid`]) depends only on the configuration and
//! takes no lock.

use super::{AmdModel, Config, Event, Fault, Injected};
use crate::access::MsrAccess;
use crate::detect::{Cpuid, CpuidResult};
use crate::model::lock::IrqLock;

/// An [`AmdModel`] behind a spin lock that is only ever held with
/// interrupts disabled. See the [module documentation](self).
#[derive(Debug)]
pub struct SharedAmdModel {
    config: Config,
    model: IrqLock<AmdModel>,
}

impl SharedAmdModel {
    /// A shared model in the reset state.
    pub const fn new(config: Config) -> Self {
        Self {
            config,
            model: IrqLock::new(AmdModel::new(config)),
        }
    }

    /// The model's configuration.
    pub const fn config(&self) -> &Config {
        &self.config
    }

    /// Runs `f` on the model with interrupts disabled and the lock held;
    /// restores RFLAGS.IF afterwards.
    ///
    /// # Panics
    ///
    /// If this CPU holds the lock already (re-entry), which would otherwise
    /// deadlock.
    pub fn with<R>(&self, f: impl FnOnce(&mut AmdModel) -> R) -> R {
        self.model.with(f)
    }

    /// Puts the model back in its reset state.
    pub fn reset(&self) {
        let config = self.config;
        self.with(|model| *model = AmdModel::new(config));
    }

    /// An MSR backend onto the model.
    pub const fn msr(&self) -> AmdMsr<'_> {
        AmdMsr { shared: self }
    }

    /// The model as the driver sees it: `crate::detect::detect` run against
    /// the model's CPUID and MSRs. `None` if detection does not find a
    /// usable AMD core PMU (which would be a model or detection bug).
    pub fn detect(&self) -> Option<crate::detect::AmdCpu> {
        self.with(|model| {
            let cpuid = model.clone();
            crate::detect::detect(&cpuid, model).ok()?.usable_amd()
        })
    }

    /// Takes one pending PMI (see [`AmdModel::take_pmi`]).
    pub fn take_pmi(&self) -> bool {
        self.with(AmdModel::take_pmi)
    }

    /// [`AmdModel::inject_until_pmi`] under one lock.
    pub fn inject_until_pmi(&self, event: Event) -> Injected {
        self.with(|model| model.inject_until_pmi(event))
    }
}

/// CPUID of the configured processor ([`Config::cpuid`]); takes no lock.
impl Cpuid for SharedAmdModel {
    fn cpuid(&self, leaf: u32, subleaf: u32) -> CpuidResult {
        self.config.cpuid(leaf, subleaf)
    }
}

/// A [`crate::access::MsrAccess`] backend onto a [`SharedAmdModel`]:
/// every access locks the model (interrupts disabled), forwards and
/// unlocks. `Copy`, so main code and a handler can each hold one.
#[derive(Clone, Copy, Debug)]
pub struct AmdMsr<'a> {
    shared: &'a SharedAmdModel,
}

impl MsrAccess for AmdMsr<'_> {
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
impl Cpuid for AmdMsr<'_> {
    fn cpuid(&self, leaf: u32, subleaf: u32) -> CpuidResult {
        self.shared.cpuid(leaf, subleaf)
    }
}

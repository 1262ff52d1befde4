//! An Itanium PMU model shared by a kernel's main code and its interrupt
//! handlers on one CPU: the Itanium counterpart of [`crate::model::netburst::SharedNetBurstModel`].
//!
//! **A model, not hardware**: no IA-64 machine is at hand and Rust has no
//! IA-64 target, so this x86_64 kernel runs the crate's register-level
//! Itanium PMU model ([`crate::model::itanium`]); its interrupt line is
//! delivered through the real local APIC (by the kernel, such as `hobby::pmi::deliver`).
//!
//! [`SharedItaniumModel`] is a `static`-friendly lock around [`ItaniumModel`]
//! ([`crate::model::lock::IrqLock`], as the other shared models: held only
//! with interrupts disabled, so a handler never finds the lock held by the
//! code it interrupted; re-entry on the same CPU, a nested access or an NMI
//! handler, panics rather than deadlocks).
//! [`ItaniumPmcPmd`] is a `Copy` handle implementing the driver's
//! [`PmcPmdAccess`] (`mov pmc[]` / `mov pmd[]` on the model), usable both
//! by main code and by the overflow handler.

use super::{Capture, Fault, FetchMiss, Generation, Interrupt, ItaniumModel, Psr};
use crate::access::PmcPmdAccess;
use crate::model::lock::IrqLock;

/// An [`ItaniumModel`] behind a spin lock only ever held with interrupts
/// disabled. See the [module documentation](self).
#[derive(Debug)]
pub struct SharedItaniumModel {
    model: IrqLock<ItaniumModel>,
}

impl SharedItaniumModel {
    /// A model of `generation` in its power-up state.
    pub const fn new(generation: Generation) -> Self {
        Self {
            model: IrqLock::new(ItaniumModel::new(generation)),
        }
    }

    /// Runs `f` on the model with interrupts disabled and the lock held;
    /// waits while another CPU holds it.
    ///
    /// # Panics
    ///
    /// If this CPU holds the lock already (re-entry: `f` using an
    /// [`ItaniumPmcPmd`] of the same model, or an NMI handler).
    pub fn with<R>(&self, f: impl FnOnce(&mut ItaniumModel) -> R) -> R {
        self.model.with(f)
    }

    /// Puts a model of `generation` in its power-up state, with PSR.up and
    /// PSR.pp set (what a kernel does once with `ssm`, SDM Vol. 2 7.2).
    pub fn reset(&self, generation: Generation) {
        self.with(|m| {
            *m = ItaniumModel::new(generation);
            m.set_psr(Psr::MONITORING);
        });
    }

    /// The register handle.
    pub const fn regs(&self) -> ItaniumPmcPmd<'_> {
        ItaniumPmcPmd { shared: self }
    }

    /// The I-EAR sees an instruction fetch miss (see
    /// [`ItaniumModel::fetch_miss`]).
    pub fn fetch_miss(&self, miss: FetchMiss) -> Capture {
        self.with(|m| m.fetch_miss(miss))
    }

    /// Takes the model's pending PMU interrupt, if any.
    pub fn take_interrupt(&self) -> Option<Interrupt> {
        self.with(|m| m.take_interrupt())
    }
}

/// The [`PmcPmdAccess`] of a [`SharedItaniumModel`]: each access locks the
/// model (interrupts disabled), forwards and unlocks.
#[derive(Clone, Copy, Debug)]
pub struct ItaniumPmcPmd<'a> {
    shared: &'a SharedItaniumModel,
}

impl PmcPmdAccess for ItaniumPmcPmd<'_> {
    type Error = Fault;

    fn read_pmc(&mut self, n: u8) -> Result<u64, Fault> {
        self.shared
            .with(|m| ItaniumModel::read_pmc(m, u32::from(n)))
    }

    fn write_pmc(&mut self, n: u8, value: u64) -> Result<(), Fault> {
        self.shared
            .with(|m| ItaniumModel::write_pmc(m, u32::from(n), value))
    }

    fn read_pmd(&mut self, n: u8) -> Result<u64, Fault> {
        self.shared
            .with(|m| ItaniumModel::read_pmd(m, u32::from(n)))
    }

    fn write_pmd(&mut self, n: u8, value: u64) -> Result<(), Fault> {
        self.shared
            .with(|m| ItaniumModel::write_pmd(m, u32::from(n), value))
    }
}

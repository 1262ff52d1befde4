//! An Itanium PMU model shared by a kernel's main code and its interrupt
//! handlers on one CPU: the Itanium counterpart of [`crate::model::netburst::SharedModel`].
//!
//! **A model, not hardware**: no IA-64 machine is at hand and Rust has no
//! IA-64 target, so this x86_64 kernel runs the crate's register-level
//! Itanium PMU model ([`crate::model::itanium`]); its interrupt line is
//! delivered through the real local APIC (by the kernel, such as `hobby::pmi::deliver`).
//!
//! [`SharedItanium`] is a `static`-friendly lock around
//! [`ItaniumModel`]; every access disables interrupts while it holds the
//! lock and restores RFLAGS.IF afterwards, so a handler never finds the lock
//! held by the code it interrupted (a held lock means re-entry and panics).
//! [`ItaniumRegs`] is a `Copy` handle implementing the driver's
//! [`PmcPmdAccess`] (`mov pmc[]` / `mov pmd[]` on the model), usable both
//! by main code and by the overflow handler.

use super::{Capture, Fault, FetchMiss, Generation, Interrupt, ItaniumModel, Psr};
use crate::access::PmcPmdAccess;
use x86_64::instructions::interrupts;

/// An [`ItaniumModel`] behind a spin lock only ever held with interrupts
/// disabled.
#[derive(Debug)]
pub struct SharedItanium {
    model: spin::Mutex<ItaniumModel>,
}

impl SharedItanium {
    /// A model of `generation` in its power-up state.
    pub const fn new(generation: Generation) -> Self {
        Self {
            model: spin::Mutex::new(ItaniumModel::new(generation)),
        }
    }

    /// Runs `f` on the model with interrupts disabled and the lock held.
    ///
    /// # Panics
    ///
    /// If the lock is already held (re-entry: `f` using an
    /// [`ItaniumRegs`] of the same model, or an NMI handler).
    pub fn with<R>(&self, f: impl FnOnce(&mut ItaniumModel) -> R) -> R {
        interrupts::without_interrupts(|| {
            let mut model = self
                .model
                .try_lock()
                .expect("SharedItanium re-entered while locked (nested access or NMI)");
            f(&mut model)
        })
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
    pub const fn regs(&self) -> ItaniumRegs<'_> {
        ItaniumRegs { shared: self }
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

/// The [`PmcPmdAccess`] of a [`SharedItanium`]: each access locks the
/// model (interrupts disabled), forwards and unlocks.
#[derive(Clone, Copy, Debug)]
pub struct ItaniumRegs<'a> {
    shared: &'a SharedItanium,
}

impl PmcPmdAccess for ItaniumRegs<'_> {
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

//! The physical PMU of an architecture with one PMU per CPU (Itanium's
//! processors, the architectural PMU's logical processors), as a value:
//! [`PerCpuPmu`] holds the state the CPU's PMI handler shares with its
//! driver and says whether a driver is live. Each architecture names it
//! with its own state and constructor (`ItaniumPmu`, `ArchPerfPmu`), whose
//! `unsafe` contract is the one promise the crate cannot check.

use super::OwnerFlag;

/// One CPU's PMU with its PMI handler's state `S`: declare one `static` per
/// CPU (through the architecture's constructor) and take its driver from
/// it.
///
/// It is `Sync` because it lives in a `static`; only its own CPU uses it
/// (its driver, and its PMI handler through [`PerCpuPmu::pmi`]).
#[derive(Debug)]
pub struct PerCpuPmu<S> {
    pmi: S,
    taken: OwnerFlag,
}

impl<S> PerCpuPmu<S> {
    /// The PMU with its handler's state `pmi`, no driver.
    ///
    /// # Safety
    ///
    /// As the architecture's constructor says: the value names one CPU's
    /// PMU and no other value names it.
    pub(crate) const unsafe fn with_state(pmi: S) -> PerCpuPmu<S> {
        PerCpuPmu {
            pmi,
            taken: OwnerFlag::new(),
        }
    }

    /// The state the PMI handler shares with the driver: what it counted.
    pub const fn pmi(&self) -> &S {
        &self.pmi
    }

    /// Whether a live driver holds the PMU.
    pub fn is_taken(&self) -> bool {
        self.taken.is_taken()
    }

    /// Marks the PMU held: `false` if a live driver holds it.
    pub(crate) fn take(&self) -> bool {
        self.taken.take().is_ok()
    }

    /// The driver is given back (or its take failed).
    pub(crate) fn give_back(&self) {
        self.taken.give_back();
    }
}

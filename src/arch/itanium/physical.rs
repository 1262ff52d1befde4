//! The physical PMU of one processor (documented on [`ItaniumPmu`]).

use super::pmi::PmiState;
use crate::counter::PerCpuPmu;

/// The physical PMU of one Itanium processor, as a value: [`ItaniumPmu`].
///
/// Each Itanium processor has a PMU of its own (PMC/PMD registers, SDM
/// Vol. 2 7.2), read and written only by that processor, so one
/// `ItaniumPmu` stands for one CPU's PMU: it holds the state its overflow
/// handler shares with its driver ([`PmiState`]) and says whether a driver
/// is live. A second driver is refused before any register is touched
/// ([`InitError::AlreadyTaken`]), so a live driver's handler state is never
/// reset under it.
///
/// It is made once per CPU through an `unsafe` constructor
/// ([`ItaniumPmu::new`]), whose contract is the one promise the crate
/// cannot check: that the value names one physical PMU, and no other value
/// names it.
///
/// [`InitError::AlreadyTaken`]: super::driver::InitError::AlreadyTaken
///
/// The physical PMU of one Itanium processor (see above): declare one `static` per CPU and take its driver
/// from it.
///
/// It is `Sync` because it lives in a `static`; only its own CPU uses it
/// (its driver, and its overflow handler through `pmi()`).
///
/// # Examples
///
/// ```
/// use pmu::arch::itanium::ItaniumPmu;
///
/// // SAFETY: the kernel's one value for CPU 0's PMU.
/// static CPU0: ItaniumPmu = unsafe { ItaniumPmu::new() };
/// assert_eq!(CPU0.pmi().interrupts(), 0);
/// assert!(!CPU0.is_taken());
/// ```
pub type ItaniumPmu = PerCpuPmu<PmiState>;

impl ItaniumPmu {
    /// The PMU of one processor, with no driver.
    ///
    /// # Safety
    ///
    /// The value names the PMU of one physical Itanium processor, and no
    /// other value names the same PMU: make exactly one per CPU (a
    /// `static`). The driver taken from it uses a register backend that
    /// reaches this processor's PMC/PMD registers, on this processor, where
    /// its overflow handler runs with [`ItaniumPmu::pmi`]. A model
    /// ([`crate::model::itanium`]) is a processor of its own.
    pub const unsafe fn new() -> ItaniumPmu {
        // SAFETY: the caller's promise is this constructor's.
        unsafe { PerCpuPmu::with_state(PmiState::new()) }
    }
}

//! The physical PMU of one logical processor (documented on [`ArchPerfPmu`]).

use super::pmi::PmiState;
use crate::counter::PerCpuPmu;

/// The physical PMU of one logical processor, as a value: [`ArchPerfPmu`].
///
/// The architectural PMU is per logical processor (SDM Vol. 3B
/// "Architectural Performance Monitoring": CPUID leaf 0AH counts "general-
/// purpose performance monitoring counters per logical processor"; the
/// `GLOBAL` MSRs are each logical processor's own), so one `ArchPerfPmu`
/// stands for one logical processor's PMU: it holds the state its PMI
/// handler shares with its driver ([`PmiState`]) and says whether a driver
/// is live. A second driver is refused before any register is touched
/// ([`InitError::PmuTaken`]).
///
/// A core's Hyper-Threading siblings share a few registers (AnyThread
/// counting sees both; the `OFFCORE_RSP` MSRs of some model-specific events
/// are per core). The driver uses none of them: AnyThread is never set and
/// model-specific events are out of scope. Driving them would add a value
/// per core that the logical processors' values refer to, as NetBurst's
/// package value is shared by its two logical processors.
///
/// [`InitError::PmuTaken`]: super::driver::InitError::PmuTaken
///
/// The architectural PMU of one logical processor (see above): declare one `static` per CPU and take its driver
/// from it.
///
/// It is `Sync` because it lives in a `static`; only its own CPU uses it
/// (its driver, and its PMI handler through `pmi()`).
///
/// # Examples
///
/// ```
/// use pmu::arch::archperf::ArchPerfPmu;
///
/// // SAFETY: the kernel's one value for CPU 0's PMU.
/// static CPU0: ArchPerfPmu = unsafe { ArchPerfPmu::new() };
/// assert_eq!(CPU0.pmi().interrupts(), 0);
/// assert!(!CPU0.is_taken());
/// ```
pub type ArchPerfPmu = PerCpuPmu<PmiState>;

impl ArchPerfPmu {
    /// The PMU of one logical processor, with no driver.
    ///
    /// # Safety
    ///
    /// The value names the PMU of one logical processor, and no other value
    /// names the same PMU: make exactly one per CPU (a `static`). The
    /// driver taken from it uses an MSR backend that runs on that CPU,
    /// where its PMI handler runs with `pmi()`. A model
    /// ([`crate::model::archperf`]) is a logical processor of its own.
    pub const unsafe fn new() -> ArchPerfPmu {
        // SAFETY: the caller's promise is this constructor's.
        unsafe { PerCpuPmu::with_state(PmiState::new()) }
    }
}

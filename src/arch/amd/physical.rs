//! The physical PMU of one logical processor (documented on [`AmdPmu`]).

use super::pmi::PmiState;
use crate::counter::PerCpuPmu;

/// The AMD core PMU of one logical processor, as a value: [`AmdPmu`].
///
/// The core counters are each logical processor's own (AMD64 APM Vol. 2
/// 13.2: the `PERF_CTL`/`PERF_CTR` pairs and, with PerfMonV2, the global
/// registers are per thread; Linux keeps one `cpu_hw_events` per CPU), so
/// one `AmdPmu` stands for one logical processor's PMU: it holds the state
/// its PMI handler shares with its driver ([`PmiState`]) and says whether
/// a driver is live. A second driver is refused before any register is
/// touched ([`InitError::PmuTaken`]). The northbridge, data-fabric and L3
/// counters, which a package or a complex shares, are not this PMU.
///
/// [`InitError::PmuTaken`]: super::driver::InitError::PmuTaken
///
/// It is `Sync` because it lives in a `static`; only its own CPU uses it
/// (its driver, and its PMI handler through `pmi()`).
///
/// # Examples
///
/// ```
/// use pmu::arch::amd::AmdPmu;
///
/// // SAFETY: the kernel's one value for CPU 0's PMU.
/// static CPU0: AmdPmu = unsafe { AmdPmu::new() };
/// assert_eq!(CPU0.pmi().interrupts(), 0);
/// assert!(!CPU0.is_taken());
/// ```
pub type AmdPmu = PerCpuPmu<PmiState>;

impl AmdPmu {
    /// The PMU of one logical processor, with no driver.
    ///
    /// # Safety
    ///
    /// The value names the PMU of one logical processor, and no other value
    /// names the same PMU: make exactly one per CPU (a `static`). The
    /// driver taken from it uses an MSR backend that runs on that CPU,
    /// where its PMI handler runs with `pmi()`. A model
    /// ([`crate::model::amd`]) is a logical processor of its own.
    pub const unsafe fn new() -> AmdPmu {
        // SAFETY: the caller's promise is this constructor's.
        unsafe { PerCpuPmu::with_state(PmiState::new()) }
    }
}

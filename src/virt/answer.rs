//! What a guest's access to a register of its PMU comes to, when it is not
//! a #GP: the answers of the architectural PMU's and AMD's guest checks
//! ([`super::archperf::GuestPmu`], [`super::amd::GuestPmu`]), one shape
//! for both, over each one's guest registers (`R`).
//!
//! The answers name the guest's *registers*, not MSR numbers: one register
//! has several addresses (`IA32_PMCn` and `IA32_A_PMCn`, AMD's legacy and
//! extended addresses), and a value is given as the register holds it, the
//! transformations of the write already made (sign extension, the width,
//! AMD's reserved bits dropped). A VMM that emulates the PMU applies them
//! to its registers (the crate's `vpmu`s do); one that runs the guest's
//! counters on the hardware writes them to the register of the physical
//! PMU that holds the guest's.

/// What the VMM does with a guest's WRMSR that the checks accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum WriteAnswer<R> {
    /// The guest's register `reg` takes `value` (as the register holds
    /// it: nothing else to transform).
    Store {
        /// The register.
        reg: R,
        /// Its new value.
        value: u64,
    },
    /// The overflow-status bits set here are cleared
    /// (`IA32_PERF_GLOBAL_OVF_CTRL`, AMD's `PerfCntrGlobalStatusClr`).
    ClearStatus(u64),
    /// The overflow-status bits set here are set (AMD's
    /// `PerfCntrGlobalStatusSet`).
    SetStatus(u64),
    /// Nothing changes and nothing faults: the write is dropped, as KVM
    /// drops it (the legacy counter MSRs of a counter the guest does not
    /// have, AMD's read-only `PerfCntrGlobalStatus`).
    Drop,
    /// Not a register of the guest's PMU: the VMM's business.
    NotPmu,
}

/// What the VMM answers a guest's RDMSR that the checks accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ReadAnswer<R> {
    /// The guest's register `reg` (a counter cut to its width: what it
    /// holds, as the registers a check stores never exceed it).
    Reg(R),
    /// This value (a write-only register reads 0, a capability register
    /// reads what the guest is shown).
    Value(u64),
    /// The VMM's own value of the register with the bits of `mask`
    /// replaced by `bits` (`IA32_MISC_ENABLE`'s performance-monitoring
    /// bits).
    Merge {
        /// The bits the guest's PMU decides.
        mask: u64,
        /// Their values.
        bits: u64,
    },
    /// Not a register of the guest's PMU: the VMM's business.
    NotPmu,
}

/// A guest's RDPMC that the checks accept: the counter, and the mask of
/// its width (the value is the counter's, ANDed with it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RdpmcAnswer<C> {
    /// The counter read.
    pub counter: C,
    /// The bits of its width.
    pub mask: u64,
}

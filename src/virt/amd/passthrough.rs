//! The pass-through mode's interception on an SVM host, as data the
//! hypervisor applies: which of AMD's PMU MSRs a guest whose counters run
//! on the hardware may read and write without a `#VMEXIT` (its bits of the
//! MSR permission map), which must be intercepted and why, and whether
//! RDPMC is intercepted. SVM has no control that switches a global enable
//! with the world: the counters' Host/Guest-only bits do it instead
//! ([`GuestPmu::hardware_ctl`]: every guest control runs with GuestOnly set
//! and HostOnly clear, so it counts in guest mode only), and the host's own
//! counters are HostOnly. The crate owns no SVM structure: the hypervisor
//! writes these into its MSR permission map and VMCB.
//!
//! The rules are KVM's mediated vPMU's (`svm_recalc_pmu_msr_intercepts`,
//! `amd_mediated_pmu_load`):
//!
//! | MSR | read | write | why |
//! |---|---|---|---|
//! | `PERF_CTRn` of a guest counter (C001_0201H + 2n with PerfCtrExtCore), `PERF_LEGACY_CTRn` (C001_0004H + n, the same counter for n < 4) | pass | pass | the guest's own counter, 48 bits as the host's |
//! | the same of a counter the guest lacks | intercept | intercept | not the guest's: the checks answer |
//! | `PERF_CTLn`, `PERF_LEGACY_CTLn` | intercept | intercept | every value checked, and GuestOnly forced on, HostOnly off ([`GuestPmu::hardware_ctl`]) |
//! | `PerfCntrGlobalCtl` | pass | pass | only for a PerfMonV2 guest with every counter of the host (none kept by the host) |
//! | `PerfCntrGlobalStatus` | pass | intercept | the same; read-only (KVM drops a write) |
//! | `PerfCntrGlobalStatusClr`, `_Set` | intercept | pass | the same; write-only (a read is KVM's 0) |
//! | the global registers otherwise, and everything else of the PMU | intercept | intercept | shared with the host's counters, absent, or refused by the checks |
//!
//! RDPMC is not intercepted only when the guest's counters are every
//! counter of the host: otherwise an index the guest lacks would read a
//! host counter.
//!
//! # Where sources differ
//!
//! KVM passes the four global registers through both ways; here a
//! direction passes only where the hardware answers as the checks do
//! (tested against [`GuestPmu::check_msr_read`] and
//! [`GuestPmu::check_msr_write`]).

use super::{GuestPmu, PolicyError};
use crate::arch::amd::{Counter, CounterSet};
use crate::detect::AmdCpu;
use crate::virt::archperf::{Intercept, MsrRule, Why};
use crate::virt::x86::{PmuMsr, classify};

/// `PERF_LEGACY_CTR0`.
const PERF_LEGACY_CTR0: u32 = 0xC001_0004;
/// `PERF_CTR0` (PerfCtrExtCore); counter n's at `+ 2n`.
const PERF_CTR0: u32 = 0xC001_0201;
/// `PerfCntrGlobalStatus`, `_Ctl`, `_StatusClr`, `_StatusSet`.
const GLOBALS: [u32; 4] = [0xC000_0300, 0xC000_0301, 0xC000_0302, 0xC000_0303];

/// The pass-through mode's interception for one AMD guest on one host
/// ([`GuestPmu::pass_through`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PassThrough {
    guest: CounterSet,
    extended: bool,
    globals: bool,
    rdpmc_intercepted: bool,
}

impl GuestPmu {
    /// The interception of this guest's PMU in pass-through mode on
    /// `host`; refused where the guest's counters cannot run on the host's
    /// beside the counters the host keeps ([`super::GuestPolicy::fits`]).
    pub fn pass_through(&self, host: &AmdCpu) -> Result<PassThrough, PolicyError> {
        let p = self.policy();
        p.fits(host)?;
        let every = CounterSet::first(host.counters()) == self.counters();
        Ok(PassThrough {
            guest: self.counters(),
            extended: self.extended(),
            globals: every && self.perfmon_v2() && p.host_counters.is_empty(),
            rdpmc_intercepted: !every,
        })
    }
}

impl PassThrough {
    /// How `msr` is treated: every MSR of the PMU ranges
    /// ([`crate::virt::x86::PMU_MSR_RANGES`]) has a rule; `None` for an MSR
    /// that is not the PMU's.
    pub fn rule(&self, msr: u32) -> Option<MsrRule> {
        let both = |i, why| MsrRule {
            read: i,
            write: i,
            why,
        };
        let counter = |n: u8, address_ok: bool| match Counter::new(n) {
            Some(c) if address_ok && self.guest.contains(c) => {
                both(Intercept::Pass, Why::GuestCounter)
            }
            _ => both(Intercept::Trap, Why::NotTheGuests),
        };
        let global = |read, write| {
            if self.globals {
                MsrRule {
                    read,
                    write,
                    why: Why::GuestGlobal,
                }
            } else {
                both(Intercept::Trap, Why::SharedGlobal)
            }
        };
        let (pass, trap) = (Intercept::Pass, Intercept::Trap);
        Some(match classify(msr) {
            PmuMsr::NotPmu => return None,
            PmuMsr::LegacyCtr(n) => counter(n, true),
            PmuMsr::CoreCtr(n) => counter(n, self.extended),
            PmuMsr::LegacyCtl(_) | PmuMsr::CoreCtl(_) => both(trap, Why::Checked),
            PmuMsr::AmdGlobalCtl => global(pass, pass),
            PmuMsr::AmdGlobalStatus => global(pass, trap),
            PmuMsr::AmdGlobalStatusClr | PmuMsr::AmdGlobalStatusSet => global(trap, pass),
            _ => both(trap, Why::Other),
        })
    }

    /// The MSRs of which a read or a write passes through, lowest first
    /// within each kind, with their rules (every other MSR of the PMU is
    /// intercepted both ways): what the hypervisor clears in its MSR
    /// permission map ([`msrpm_bits`]).
    pub fn passed(&self) -> impl Iterator<Item = (u32, MsrRule)> + '_ {
        let counters = self.guest.iter().flat_map(move |c| {
            let n = u32::from(c.index());
            let legacy = (n < 4).then_some(PERF_LEGACY_CTR0 + n);
            let core = self.extended.then_some(PERF_CTR0 + 2 * n);
            [legacy, core].into_iter().flatten()
        });
        let globals = GLOBALS.into_iter().filter(move |_| self.globals);
        counters
            .chain(globals)
            .filter_map(move |m| self.rule(m).map(|r| (m, r)))
    }

    /// Whether RDPMC is intercepted (the VMCB's RDPMC intercept): unless
    /// the guest's counters are every counter of the host.
    pub const fn rdpmc_intercepted(&self) -> bool {
        self.rdpmc_intercepted
    }

    /// The guest's counters.
    pub const fn counters(&self) -> CounterSet {
        self.guest
    }

    /// Whether the guest writes `PerfCntrGlobalCtl` without a `#VMEXIT`
    /// (then its enables are read back at every exit).
    pub const fn global_ctl_passed(&self) -> bool {
        self.globals
    }
}

/// Where `msr`'s two bits are in an SVM MSR permission map (AMD64 APM
/// Vol. 2, "MSR Intercepts": 8 KiB, two bits per MSR, the read intercept
/// then the write intercept, for MSRs 0000_0000H-0000_1FFFH at byte 0,
/// C000_0000H-C000_1FFFH at byte 800H and C001_0000H-C001_1FFFH at byte
/// 1000H): the byte and the read bit's number in it (the write bit is the
/// next); `None` for an MSR outside the map (always intercepted).
pub const fn msrpm_bits(msr: u32) -> Option<(usize, u8)> {
    let (base, start) = match msr & 0xFFFF_E000 {
        0x0000_0000 => (0x000, 0x0000_0000),
        0xC000_0000 => (0x800, 0xC000_0000),
        0xC001_0000 => (0x1000, 0xC001_0000),
        _ => return None,
    };
    let k = (msr - start) as usize * 2;
    Some((base + k / 8, (k % 8) as u8))
}

#[cfg(test)]
mod tests;

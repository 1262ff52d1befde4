//! What a guest's AMD PMU is ([`GuestPolicy`]), checked into the masks its
//! accesses are validated with ([`GuestPmu`]), and what its CPUID says.

use crate::arch::amd::{COUNTER_WIDTH, Counter, CounterSet, MAX_COUNTERS, PerfCtl};
use crate::detect::{
    AmdCpu, CpuidResult, Leaf01Ecx, Leaf80000001Ecx, Leaf80000022Eax, Leaf80000022Ebx,
};
use crate::virt::archperf::guest_cpuid_01_edx;
use crate::virt::x86::{ZERO, hidden_leaf, width_mask, without_amd_pmu};

/// Which of AMD's PMUs a guest is shown (AMD64 APM Vol. 2 13.2; KVM's
/// `amd_pmu_refresh`: version 1 for the first two, 2 for PerfMonV2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Generation {
    /// The four legacy counters (C001_0000H), which nothing enumerates.
    Legacy,
    /// PerfCtrExtCore (CPUID Fn8000_0001_ECX\[23\]): six counters at
    /// C001_0200H, the first four also at the legacy addresses.
    PerfCtrExtCore,
    /// PerfMonV2 (Fn8000_0022_EAX\[0\], with PerfCtrExtCore): `counters`
    /// counters (Fn8000_0022_EBX\[3:0\], 1 to 6) and the global control and
    /// status registers.
    PerfMonV2 {
        /// The counters, 1 to 6.
        counters: u8,
    },
}

/// What a guest is shown of AMD's core PMU, and which of the physical
/// PMU's counters the host keeps for itself (none of the guest's: its
/// counters are the first [`GuestPmu::counters`]). Checked by
/// [`GuestPolicy::checked`]. No IBS, no LBR, no uncore counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GuestPolicy {
    /// The PMU the guest is shown.
    pub generation: Generation,
    /// The physical PMU's counters the host keeps.
    pub host_counters: CounterSet,
}

impl GuestPolicy {
    /// A guest shown `generation`, the host keeping nothing.
    pub const fn new(generation: Generation) -> GuestPolicy {
        GuestPolicy {
            generation,
            host_counters: CounterSet::EMPTY,
        }
    }

    /// The guest's counter count: 4, 6, or PerfMonV2's.
    pub const fn counters(&self) -> u8 {
        match self.generation {
            Generation::Legacy => 4,
            Generation::PerfCtrExtCore => MAX_COUNTERS,
            Generation::PerfMonV2 { counters } => counters,
        }
    }

    /// The policy checked, with the masks its accesses are validated
    /// against; or why it describes no PMU a guest can be given.
    pub const fn checked(self) -> Result<GuestPmu, PolicyError> {
        let n = self.counters();
        if n < 1 || n > MAX_COUNTERS {
            return Err(PolicyError::Counters { counters: n });
        }
        let shared = self.host_counters.intersection(CounterSet::first(n));
        if !shared.is_empty() {
            return Err(PolicyError::HostCounterShown {
                counter: shared.bits().trailing_zeros() as u8,
            });
        }
        Ok(GuestPmu { policy: self })
    }

    /// Whether the guest's counters can run on `host`'s PMU beside the
    /// host's own (the pass-through switch's condition): the host has
    /// every guest and host counter, and PerfCtrExtCore and PerfMonV2
    /// where the guest has them. An emulated guest PMU needs none of it.
    pub fn fits(&self, host: &AmdCpu) -> Result<(), PolicyError> {
        let all = CounterSet::first(self.counters()).union(self.host_counters);
        let top = 64 - all.bits().leading_zeros();
        let (ext, v2) = match self.generation {
            Generation::Legacy => (false, false),
            Generation::PerfCtrExtCore => (true, false),
            Generation::PerfMonV2 { .. } => (true, true),
        };
        let what = if top > u32::from(host.counters()) {
            Some("a counter the host does not have")
        } else if ext && !host.perf_ctr_ext_core {
            Some("the host has no PerfCtrExtCore")
        } else if v2 && !host.perfmon_v2 {
            Some("the host has no PerfMonV2")
        } else {
            None
        };
        match what {
            Some(what) => Err(PolicyError::NotOnHost { what }),
            None => Ok(()),
        }
    }
}

/// Why a [`GuestPolicy`] describes no PMU a guest can be given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PolicyError {
    /// A PerfMonV2 counter count outside 1 to 6.
    Counters {
        /// The count asked for.
        counters: u8,
    },
    /// A counter the host keeps is one of the guest's.
    HostCounterShown {
        /// The counter's number.
        counter: u8,
    },
    /// The guest's counters cannot run on this host's PMU
    /// ([`GuestPolicy::fits`]).
    NotOnHost {
        /// What is missing.
        what: &'static str,
    },
}

impl core::fmt::Display for PolicyError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            PolicyError::Counters { counters } => write!(
                f,
                "{counters} PerfMonV2 counters: a guest has 1 to 6 (KVM's maximum)"
            ),
            PolicyError::HostCounterShown { counter } => write!(
                f,
                "PERF_CTR{counter} is the host's and one of the guest's counters"
            ),
            PolicyError::NotOnHost { what } => {
                write!(f, "the guest's PMU does not fit the host's: {what}")
            }
        }
    }
}

impl core::error::Error for PolicyError {}

/// A guest's AMD PMU, as a checked [`GuestPolicy`] describes it. Its
/// checks are in [`GuestPmu::check_msr_write`],
/// [`GuestPmu::check_msr_read`] and [`GuestPmu::check_rdpmc`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GuestPmu {
    pub(super) policy: GuestPolicy,
}

impl GuestPmu {
    /// The policy.
    pub const fn policy(&self) -> &GuestPolicy {
        &self.policy
    }

    /// The guest's counters.
    pub const fn counters(&self) -> CounterSet {
        CounterSet::first(self.policy.counters())
    }

    /// Whether the guest has the extended addresses (PerfCtrExtCore).
    pub const fn extended(&self) -> bool {
        !matches!(self.policy.generation, Generation::Legacy)
    }

    /// Whether the guest has PerfMonV2 (KVM's version 2).
    pub const fn perfmon_v2(&self) -> bool {
        matches!(self.policy.generation, Generation::PerfMonV2 { .. })
    }

    /// The bits a control keeps of a guest's write: every bit but KVM's
    /// reserved ones, 0xFFFF_FFF0_0028_0000 (19, 21, 36-63:
    /// `amd_pmu_refresh`), which are dropped. HostOnly (41) and GuestOnly
    /// (40) are among the dropped: the hypervisor's.
    pub const fn ctl_writable(&self) -> u64 {
        PerfCtl::DEFINED
            & !PerfCtl::new(0, 0)
                .with_guest_only(true)
                .with_host_only(true)
                .bits()
    }

    /// The counters' width, 48 bits (`counter_bitmask[KVM_PMC_GP]`).
    pub const fn counter_mask(&self) -> u64 {
        width_mask(COUNTER_WIDTH)
    }

    /// A guest control image as the hardware runs it when the guest's
    /// counters are on the physical PMU: GuestOnly set and HostOnly clear,
    /// so that with SVM enabled it counts in guest mode only and never the
    /// host's events, whatever the guest wrote (KVM's mediated PMU: "Always
    /// stuff GuestOnly=1,HostOnly=0"). `guest` is what the checks stored
    /// (no HostOnly or GuestOnly of the guest's own).
    pub const fn hardware_ctl(&self, guest: u64) -> u64 {
        PerfCtl::from_bits(guest)
            .with_guest_only(true)
            .with_host_only(false)
            .bits()
    }

    /// CPUID as the guest reads it: `host` (the VMM's answer for `leaf`)
    /// with the PMU's leaves replaced: Fn8000_0001_ECX's PerfCtrExtCore as
    /// the policy has it and PerfCtrExtNB, PerfCtrExtLLC and IBS clear;
    /// Fn8000_0022 built from the policy (PerfMonV2 and its counter count,
    /// no LBR, no data-fabric or memory-controller counters; zero without
    /// PerfMonV2, as KVM answers); and Intel's PMU hidden, whatever the
    /// host is (leaf 0AH zero, leaf 01H's PDCM and DS clear, leaf 07H's
    /// hybrid bit, ArchPerfmonExt and architectural LBR clear, leaves 1CH
    /// and 23H zero).
    pub fn cpuid(&self, leaf: u32, subleaf: u32, host: CpuidResult) -> CpuidResult {
        if let Some(r) = hidden_leaf(leaf, subleaf, host) {
            return r;
        }
        match leaf {
            1 => CpuidResult {
                ecx: Leaf01Ecx::from_bits(host.ecx).with_pdcm(false).bits(),
                edx: guest_cpuid_01_edx(host.edx),
                ..host
            },
            0x0A => ZERO,
            0x8000_0001 => CpuidResult {
                ecx: Leaf80000001Ecx::from_bits(without_amd_pmu(host.ecx))
                    .with_perf_ctr_ext_core(self.extended())
                    .bits(),
                ..host
            },
            0x8000_0022 if self.perfmon_v2() => CpuidResult {
                eax: Leaf80000022Eax::from_bits(0).with_perfmon_v2(true).bits(),
                ebx: Leaf80000022Ebx::from_bits(0)
                    .with_num_perf_ctr_core(self.policy.counters())
                    .bits(),
                ..ZERO
            },
            0x8000_0022 => ZERO,
            _ => host,
        }
    }

    /// The guest's counter `n`, if it has it.
    pub(super) const fn counter(&self, n: u8) -> Option<Counter> {
        if n < self.policy.counters() {
            Counter::new(n)
        } else {
            None
        }
    }
}

//! What a guest's architectural PMU is ([`GuestPolicy`]), checked into the
//! masks its accesses are validated with ([`GuestPmu`]), and what its
//! CPUID and capability registers say.

use crate::arch::archperf::{
    ArchEvent, Counter, CounterSet, FixedCtl, FixedCtrCtrl, GlobalStatus, MAX_FIXED, MAX_GENERAL,
    PerfEvtSel,
};
use crate::detect::{ArchPerfCpu, CpuidResult, Leaf0A, Leaf0AFields, Leaf01Ecx, PerfCapabilities};

use super::{MISC_ENABLE_PMU_BITS, guest_cpuid_01_edx};
use crate::virt::x86::{ZERO, hidden_leaf, width_mask, without_amd_pmu};

/// The most general counters a guest may have: KVM's
/// `KVM_MAX_NR_INTEL_GP_COUNTERS` (8), the architectural MSR table's
/// `IA32_PMC0-7`, and the crate's handles.
pub const MAX_GUEST_GENERAL: u8 = MAX_GENERAL;

/// The most fixed counters a guest may have: KVM's 3 (instructions, core
/// cycles, reference cycles: `KVM_MAX_NR_INTEL_FIXED_COUNTERS`; it
/// emulates no fixed counter 3, TOPDOWN.SLOTS).
pub const MAX_GUEST_FIXED: u8 = 3;

/// The architectural events a guest's CPUID lists before version 5 (EBX
/// bits 0-6, the seven events of the SDM's Table "UMask and Event Select
/// Encodings for Pre-Defined Architectural Performance Events" before
/// TOPDOWN.SLOTS); version 5 lists eight.
const EVENTS_BEFORE_V5: u8 = 7;

/// What a guest is shown of the architectural PMU and may use: its
/// version and counters, the events its CPUID lists as unavailable,
/// full-width writes, and which of the physical PMU's counters the host
/// keeps for itself. Checked by [`GuestPolicy::checked`] into the
/// [`GuestPmu`] every access is validated against.
///
/// The guest's counters are the first [`general`](GuestPolicy::general)
/// general and the first [`fixed`](GuestPolicy::fixed) fixed counters of
/// the PMU it is shown; a counter the host keeps must not be one of them
/// (so that a guest whose counters run on the hardware, with the
/// pass-through world switch, [`super::PassThroughPmu`], never names a host
/// counter: to the guest the host's counters do not exist).
///
/// There is no PEBS and no LBR option: both are refused to every guest
/// ([`super::check_pebs_msr`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GuestPolicy {
    /// The architectural-perfmon version the guest sees, 1 to 5
    /// (CPUID.0AH:EAX\[7:0\]). KVM offers at most 2 by default
    /// (`kvm_init_pmu_capability`) and takes what the VMM writes into the
    /// guest's CPUID; its rules for the MSRs are the same for every
    /// version above 1 (AnyThread refused throughout,
    /// `IA32_PERF_GLOBAL_STATUS_SET` and `_INUSE` not emulated).
    pub version: u8,
    /// General counters, 1 to 8 (CPUID.0AH:EAX\[15:8\]).
    pub general: u8,
    /// Their width in bits, 32 to 64 (EAX\[23:16\]).
    pub general_width: u8,
    /// Fixed counters, 0 to 3 (EDX\[4:0\]); 0 on version 1, which has none.
    pub fixed: u8,
    /// Their width in bits, 32 to 64 (EDX\[12:5\]); unused without fixed
    /// counters.
    pub fixed_width: u8,
    /// CPUID.0AH:EBX: bit k set, architectural event k
    /// ([`ArchEvent::ebx_bit`]) is not available to the guest; a general
    /// counter programmed with it counts nothing. Bit 7 (TOPDOWN.SLOTS)
    /// only on version 5, whose EBX vector has 8 bits (7 before).
    pub unavailable: u8,
    /// `IA32_PERF_CAPABILITIES.FW_WRITE[13]`: the `IA32_A_PMCx` full-width
    /// aliases exist (with CPUID.01H:ECX.PDCM).
    pub full_width_writes: bool,
    /// The physical PMU's counters the host keeps for itself: none of the
    /// guest's.
    pub host_counters: CounterSet,
}

impl GuestPolicy {
    /// A guest of `version` with `general` and `fixed` counters, 48 bits
    /// wide, every architectural event available, no full-width writes,
    /// nothing kept by the host.
    pub const fn new(version: u8, general: u8, fixed: u8) -> GuestPolicy {
        GuestPolicy {
            version,
            general,
            general_width: 48,
            fixed,
            fixed_width: 48,
            unavailable: 0,
            full_width_writes: false,
            host_counters: CounterSet::EMPTY,
        }
    }

    /// The guest's counters: its general and fixed counters.
    pub const fn counters(&self) -> CounterSet {
        CounterSet::first(self.general, self.fixed)
    }

    /// The policy checked, with the masks its accesses are validated
    /// against; or why it describes no PMU a guest can be given.
    pub const fn checked(self) -> Result<GuestPmu, PolicyError> {
        if self.version < 1 || self.version > 5 {
            return Err(PolicyError::Version {
                version: self.version,
            });
        }
        if self.general < 1 || self.general > MAX_GUEST_GENERAL {
            return Err(PolicyError::GeneralCounters {
                general: self.general,
            });
        }
        if self.fixed > MAX_GUEST_FIXED || (self.version < 2 && self.fixed > 0) {
            return Err(PolicyError::FixedCounters {
                fixed: self.fixed,
                version: self.version,
            });
        }
        let widths_apply = [self.general_width, self.fixed_width];
        let mut k = 0;
        while k < widths_apply.len() {
            let w = widths_apply[k];
            if (k == 0 || self.fixed > 0) && (w < 32 || w > 64) {
                return Err(PolicyError::Width { width: w });
            }
            k += 1;
        }
        if self.version < 5 && self.unavailable >> EVENTS_BEFORE_V5 != 0 {
            return Err(PolicyError::UnknownEvents {
                unavailable: self.unavailable,
            });
        }
        let shared = self.host_counters.intersection(self.counters());
        if let Some(c) = first(shared) {
            return Err(PolicyError::HostCounterShown { counter: c });
        }
        Ok(GuestPmu::of(self))
    }

    /// Whether the guest's counters can run on `host`'s PMU beside the
    /// counters the host keeps (the pass-through switch's condition): the
    /// host's version is at least the guest's, each guest and host counter
    /// exists there, the widths are the host's (a narrower guest counter
    /// would wrap at the host's width), and full-width writes are the
    /// host's. A guest whose counters are emulated needs none of this.
    pub fn fits(&self, host: &ArchPerfCpu) -> Result<(), PolicyError> {
        let leaf = host.leaf;
        let exists = |c: Counter| {
            if c.is_fixed() {
                leaf.fixed_supported(c.number())
            } else {
                c.number() < leaf.general()
            }
        };
        let missing = self
            .counters()
            .union(self.host_counters)
            .iter()
            .find(|&c| !exists(c));
        let problem = if self.version > leaf.version() {
            Some("the host's architectural-perfmon version is lower")
        } else if let Some(c) = missing {
            Some(c.name())
        } else if self.general_width != leaf.general_width()
            || (self.fixed > 0 && self.fixed_width != leaf.fixed_width())
        {
            Some("the counter widths differ from the host's")
        } else if self.full_width_writes && !host.full_width_write {
            Some("the host has no full-width writes")
        } else {
            None
        };
        match problem {
            Some(what) => Err(PolicyError::NotOnHost { what }),
            None => Ok(()),
        }
    }
}

/// The lowest counter of `set`, if any.
const fn first(set: CounterSet) -> Option<Counter> {
    let bits = set.bits();
    if bits == 0 {
        None
    } else {
        Counter::from_index(bits.trailing_zeros() as u8)
    }
}

/// Why a [`GuestPolicy`] describes no PMU a guest can be given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PolicyError {
    /// The version is not 1 to 5.
    Version {
        /// The version asked for.
        version: u8,
    },
    /// The general counters are not 1 to 8 (KVM's minimum and maximum).
    GeneralCounters {
        /// The count asked for.
        general: u8,
    },
    /// More than 3 fixed counters, or any on version 1.
    FixedCounters {
        /// The count asked for.
        fixed: u8,
        /// The version.
        version: u8,
    },
    /// A counter width outside 32 to 64 bits.
    Width {
        /// The width asked for.
        width: u8,
    },
    /// An unavailable-event bit above the EBX vector (bit 7 before
    /// version 5).
    UnknownEvents {
        /// The mask asked for.
        unavailable: u8,
    },
    /// A counter the host keeps is one of the guest's.
    HostCounterShown {
        /// The counter.
        counter: Counter,
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
            PolicyError::Version { version } => write!(
                f,
                "architectural-perfmon version {version}: a guest is given 1 to 5"
            ),
            PolicyError::GeneralCounters { general } => write!(
                f,
                "{general} general counters: a guest has 1 to 8 (KVM's bounds)"
            ),
            PolicyError::FixedCounters { fixed, version } => write!(
                f,
                "{fixed} fixed counters on version {version}: at most 3 (KVM's), none on version 1"
            ),
            PolicyError::Width { width } => {
                write!(f, "a {width}-bit counter: widths are 32 to 64 bits")
            }
            PolicyError::UnknownEvents { unavailable } => write!(
                f,
                "unavailable-event mask {unavailable:#04x}: bit 7 (TOPDOWN.SLOTS) exists from version 5"
            ),
            PolicyError::HostCounterShown { counter } => write!(
                f,
                "{} is the host's and one of the guest's counters",
                counter.name()
            ),
            PolicyError::NotOnHost { what } => {
                write!(f, "the guest's PMU does not fit the host's: {what}")
            }
        }
    }
}

impl core::error::Error for PolicyError {}

/// A guest's architectural PMU, as a checked [`GuestPolicy`] describes it,
/// with the reserved-bit masks its writes are checked against (what KVM's
/// `intel_pmu_refresh` computes from the guest's CPUID, and
/// `kvm_pmu_refresh` before it). Its checks are in
/// [`GuestPmu::check_msr_write`], [`GuestPmu::check_msr_read`] and
/// [`GuestPmu::check_rdpmc`]; its CPUID in [`GuestPmu::cpuid`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GuestPmu {
    pub(super) policy: GuestPolicy,
    /// The general counters' width (`counter_bitmask[KVM_PMC_GP]`).
    pub(super) general_mask: u64,
    /// The fixed counters' (`counter_bitmask[KVM_PMC_FIXED]`).
    pub(super) fixed_mask: u64,
    /// `IA32_PERFEVTSELx` bits a write may not set (`reserved_bits`).
    pub(super) evtsel_reserved: u64,
    /// `IA32_FIXED_CTR_CTRL` bits (`fixed_ctr_ctrl_mask`).
    pub(super) fixed_ctrl_reserved: u64,
    /// `IA32_PERF_GLOBAL_CTRL` bits (`global_ctrl_mask`).
    pub(super) global_ctrl_reserved: u64,
    /// `IA32_PERF_GLOBAL_STATUS` and `_OVF_CTRL` bits
    /// (`global_status_mask`).
    pub(super) global_status_reserved: u64,
}

impl GuestPmu {
    /// The masks of `p` (checked).
    const fn of(p: GuestPolicy) -> GuestPmu {
        // IA32_PERFEVTSELx: KVM's reserved_bits, 0xFFFF_FFFF_0020_0000:
        // bits 63:32 (no TSX qualifiers without HLE/RTM in the guest's
        // CPUID, no Adaptive_Record without PEBS) and AnyThread (bit 21)
        // on every version; PC (bit 19) accepted.
        let evtsel_reserved = !PerfEvtSel::DEFINED
            | PerfEvtSel::new(0, 0)
                .with_any_thread(true)
                .with_adaptive(true)
                .bits();
        // IA32_FIXED_CTR_CTRL: OS, USR and PMI of each guest fixed counter
        // (KVM: `fixed_ctr_ctrl_mask &= ~(0xb << 4i)`), AnyThread never.
        let per = FixedCtl::new(true, true, true);
        let mut fixed_ctrl = FixedCtrCtrl::from_bits(0);
        let mut i = 0;
        while i < p.fixed {
            fixed_ctrl = fixed_ctrl.with(i, per);
            i += 1;
        }
        // IA32_PERF_GLOBAL_CTRL: the guest's counters; STATUS and OVF_CTRL
        // also OvfBuf (62) and CondChgd (63).
        let counters = p.counters().bits();
        let status = counters | GlobalStatus::OVF_BUF.mask() | GlobalStatus::COND_CHGD.mask();
        GuestPmu {
            policy: p,
            general_mask: width_mask(p.general_width),
            fixed_mask: if p.fixed > 0 {
                width_mask(p.fixed_width)
            } else {
                0
            },
            evtsel_reserved,
            fixed_ctrl_reserved: !fixed_ctrl.bits(),
            global_ctrl_reserved: !counters,
            global_status_reserved: !status,
        }
    }

    /// The policy.
    pub const fn policy(&self) -> &GuestPolicy {
        &self.policy
    }

    /// The guest's counters.
    pub const fn counters(&self) -> CounterSet {
        self.policy.counters()
    }

    /// The mask of counter `c`'s width (general or fixed).
    pub const fn width_mask(&self, c: Counter) -> u64 {
        if c.is_fixed() {
            self.fixed_mask
        } else {
            self.general_mask
        }
    }

    /// Whether the guest has `IA32_PERF_CAPABILITIES`
    /// (CPUID.01H:ECX.PDCM): from version 2, or with full-width writes.
    pub const fn pdcm(&self) -> bool {
        self.policy.version >= 2 || self.policy.full_width_writes
    }

    /// Whether the guest has the `IA32_PERF_GLOBAL_*` MSRs and
    /// `IA32_FIXED_CTR_CTRL`: version 2 and later (KVM's
    /// `kvm_pmu_has_perf_global_ctrl`).
    pub const fn has_global_msrs(&self) -> bool {
        self.policy.version >= 2
    }

    /// Whether architectural event `e` is available to the guest: within
    /// its EBX vector (7 events before version 5, 8 from it) and its bit
    /// clear.
    pub const fn event_available(&self, e: ArchEvent) -> bool {
        let length = self.vector_length();
        e.ebx_bit() < length && self.policy.unavailable & (1 << e.ebx_bit()) == 0
    }

    /// The length of the guest's EBX event vector.
    const fn vector_length(&self) -> u8 {
        if self.policy.version >= 5 {
            EVENTS_BEFORE_V5 + 1
        } else {
            EVENTS_BEFORE_V5
        }
    }

    /// Whether the general counter event select `v` selects an
    /// architectural event the guest's CPUID says is unavailable: such a
    /// counter counts nothing (KVM's `intel_hw_event_available`; see the
    /// [module documentation](super) for KVM's later change).
    pub const fn selects_unavailable(&self, v: PerfEvtSel) -> bool {
        let mut k = 0;
        while k < ArchEvent::ALL.len() {
            let e = ArchEvent::ALL[k];
            if e.select() == v.event() && e.umask() == v.umask() {
                return !self.event_available(e);
            }
            k += 1;
        }
        false
    }

    /// CPUID leaf 0AH as the guest reads it: the policy's version,
    /// counters and widths, its EBX vector and unavailable events, no
    /// fixed-counter bitmap (ECX 0: KVM's; the contiguous count says
    /// everything), AnyThread deprecated (EDX\[15\], which KVM sets
    /// whenever it offers a PMU).
    pub const fn leaf_0a(&self) -> Leaf0A {
        let p = &self.policy;
        let (fixed, fixed_width) = if p.version >= 2 {
            (p.fixed, p.fixed_width)
        } else {
            (0, 0)
        };
        Leaf0A::build(Leaf0AFields {
            version: p.version,
            general: p.general,
            general_width: p.general_width,
            vector_length: self.vector_length(),
            unavailable: p.unavailable as u32,
            fixed_bitmap: 0,
            fixed,
            fixed_width,
            any_thread_deprecated: true,
        })
    }

    /// `IA32_PERF_CAPABILITIES` as the guest reads it (when it has it,
    /// [`GuestPmu::pdcm`]): `FW_WRITE` if the policy gives full-width
    /// writes, nothing else (no PEBS, LBR format 0). Built from the
    /// policy, not filtered from the host's: no host capability reaches
    /// the guest.
    pub const fn perf_capabilities(&self) -> u64 {
        PerfCapabilities::from_bits(0)
            .with_full_width_write(self.policy.full_width_writes)
            .bits()
    }

    /// `IA32_MISC_ENABLE`'s performance-monitoring bits as the guest reads
    /// them: performance monitoring available (bit 7), BTS and PEBS
    /// unavailable (11, 12).
    pub const fn misc_enable_bits(&self) -> u64 {
        MISC_ENABLE_PMU_BITS
    }

    /// CPUID as the guest reads it: `host` (the VMM's answer for `leaf`)
    /// with the PMU's leaves replaced: leaf 01H's PDCM as the policy has
    /// it and DS clear (no debug store: no BTS, no PEBS), leaf 0AH
    /// [`GuestPmu::leaf_0a`], one core type (leaf 07H's hybrid bit and
    /// ArchPerfmonExt clear, leaf 23H zero), no architectural LBR (leaf
    /// 07H's bit clear, leaf 1CH zero), and AMD's PMU leaves emptied
    /// (8000_0001H's PerfCtrExtCore, PerfCtrExtNB, PerfCtrExtLLC and IBS
    /// clear, 8000_0022H zero), whatever the host is.
    pub fn cpuid(&self, leaf: u32, subleaf: u32, host: CpuidResult) -> CpuidResult {
        if let Some(r) = hidden_leaf(leaf, subleaf, host) {
            return r;
        }
        match leaf {
            1 => CpuidResult {
                ecx: Leaf01Ecx::from_bits(host.ecx).with_pdcm(self.pdcm()).bits(),
                edx: guest_cpuid_01_edx(host.edx),
                ..host
            },
            0x0A => {
                let [eax, ebx, ecx, edx] = self.leaf_0a().regs;
                CpuidResult { eax, ebx, ecx, edx }
            }
            0x8000_0001 => CpuidResult {
                ecx: without_amd_pmu(host.ecx),
                ..host
            },
            0x8000_0022 => ZERO,
            _ => host,
        }
    }
}

/// Keep `MAX_FIXED` in view: the guest's fixed counters are a subset of
/// the crate's.
const _: () = assert!(MAX_GUEST_FIXED <= MAX_FIXED);

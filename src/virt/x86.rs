//! Which PMU register an x86 MSR number is, for either vendor: the one
//! map both guest checks ([`super::archperf::GuestPmu`],
//! [`super::amd::GuestPmu`]) classify a guest's access with, so that an
//! Intel guest's access to AMD's registers (and the reverse) is answered
//! as KVM answers it, and the MSRs a VMM intercepts for its guests' PMU
//! ([`PMU_MSR_RANGES`]).
//!
//! Intel's numbers are the SDM's (Vol. 4 Table 2-2, the architectural
//! MSRs); AMD's the APM's (Vol. 2 13.2) and the family 17h/19h PPRs'.

use crate::arch::amd::{
    PERF_CNTR_GLOBAL_CTL, PERF_CNTR_GLOBAL_STATUS, PERF_CNTR_GLOBAL_STATUS_CLR,
    PERF_CNTR_GLOBAL_STATUS_SET, PERF_CTL0,
};
use crate::arch::archperf::{
    IA32_A_PMC0, IA32_DS_AREA, IA32_FIXED_CTR_CTRL, IA32_FIXED_CTR0, IA32_PEBS_ENABLE,
    IA32_PERF_GLOBAL_CTRL, IA32_PERF_GLOBAL_INUSE, IA32_PERF_GLOBAL_OVF_CTRL,
    IA32_PERF_GLOBAL_STATUS, IA32_PERF_GLOBAL_STATUS_SET, IA32_PERFEVTSEL0, IA32_PMC0,
    MSR_PEBS_DATA_CFG, MSR_PEBS_LD_LAT,
};
use crate::detect::{
    CpuidResult, IA32_MISC_ENABLE, IA32_PERF_CAPABILITIES, Leaf07Edx, Leaf07Sub1Eax,
    Leaf80000001Ecx, PERF_LEGACY_CTL0, PERF_LEGACY_CTR0,
};
use crate::register::Field;

/// `IA32_DEBUGCTL` (1D9H): its freeze and LBR bits are the PMU's.
pub const IA32_DEBUGCTL: u32 = 0x1D9;
/// AMD's IBS MSRs: `IBS_FETCH_CTL` (C001_1030H) to `IBS_OP_DATA4`
/// (C001_103DH).
pub const IBS_MSRS: core::ops::RangeInclusive<u32> = 0xC001_1030..=0xC001_103D;
/// AMD's L3 (C001_0230H, six control/counter pairs) and data-fabric
/// (C001_0240H, four pairs) counters: the uncore.
pub const AMD_UNCORE_MSRS: [core::ops::RangeInclusive<u32>; 2] =
    [0xC001_0230..=0xC001_023B, 0xC001_0240..=0xC001_0247];

/// The most general counters (`IA32_PMCn`) the map knows: 8.
const GENERAL: u32 = 8;
/// The most fixed counters (`IA32_FIXED_CTRn`): 16, `IA32_FIXED_CTR_CTRL`'s
/// fields.
const FIXED: u32 = 16;
/// AMD's legacy counters (4) and PerfCtrExtCore's (6).
const LEGACY: u32 = 4;
const CORE: u32 = 6;

/// A PMU register of either vendor, by MSR number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PmuMsr {
    /// `IA32_PMCn` (C1H + n, n < 8; `MSR_P6_PERFCTR0`/`1` for n < 2).
    Pmc(u8),
    /// `IA32_A_PMCn` (4C1H + n), the full-width alias.
    FullWidthPmc(u8),
    /// `IA32_PERFEVTSELn` (186H + n; `MSR_P6_EVNTSEL0`/`1` for n < 2).
    EventSelect(u8),
    /// `IA32_FIXED_CTRn` (309H + n, n < 16).
    FixedCounter(u8),
    /// `IA32_FIXED_CTR_CTRL` (38DH).
    FixedCtrCtrl,
    /// `IA32_PERF_GLOBAL_STATUS` (38EH).
    GlobalStatus,
    /// `IA32_PERF_GLOBAL_CTRL` (38FH).
    GlobalCtrl,
    /// `IA32_PERF_GLOBAL_OVF_CTRL` (390H).
    GlobalOvfCtrl,
    /// `IA32_PERF_GLOBAL_STATUS_SET` (391H, version 4).
    GlobalStatusSet,
    /// `IA32_PERF_GLOBAL_INUSE` (392H, version 4).
    GlobalInUse,
    /// `IA32_PERF_CAPABILITIES` (345H).
    PerfCapabilities,
    /// PEBS's MSRs and `IA32_DS_AREA` (3F1H, 3F2H, 3F6H, 600H).
    Pebs,
    /// `IA32_MISC_ENABLE` (1A0H): its bits 7, 11 and 12 are the PMU's.
    MiscEnable,
    /// `IA32_DEBUGCTL` (1D9H): its freeze and LBR bits are the PMU's.
    DebugCtl,
    /// AMD's `PERF_LEGACY_CTLn` (C001_0000H + n, n < 4; Linux's
    /// `MSR_K7_EVNTSELn`).
    LegacyCtl(u8),
    /// AMD's `PERF_LEGACY_CTRn` (C001_0004H + n; `MSR_K7_PERFCTRn`).
    LegacyCtr(u8),
    /// AMD's `PERF_CTLn` (C001_0200H + 2n, n < 6; `MSR_F15H_PERF_CTLn`).
    CoreCtl(u8),
    /// AMD's `PERF_CTRn` (C001_0201H + 2n).
    CoreCtr(u8),
    /// AMD's `PerfCntrGlobalStatus` (C000_0300H).
    AmdGlobalStatus,
    /// AMD's `PerfCntrGlobalCtl` (C000_0301H).
    AmdGlobalCtl,
    /// AMD's `PerfCntrGlobalStatusClr` (C000_0302H).
    AmdGlobalStatusClr,
    /// AMD's `PerfCntrGlobalStatusSet` (C000_0303H).
    AmdGlobalStatusSet,
    /// AMD's IBS MSRs ([`IBS_MSRS`]) and uncore counters
    /// ([`AMD_UNCORE_MSRS`]): no guest has them.
    AmdOther,
    /// Not a PMU register.
    NotPmu,
}

/// `msr - base` if it is below `n`.
const fn index(msr: u32, base: u32, n: u32) -> Option<u8> {
    let i = msr.wrapping_sub(base);
    if i < n { Some(i as u8) } else { None }
}

/// The PMU register `msr` is, if any.
pub const fn classify(msr: u32) -> PmuMsr {
    if let Some(n) = index(msr, IA32_PMC0, GENERAL) {
        return PmuMsr::Pmc(n);
    }
    if let Some(n) = index(msr, IA32_A_PMC0, GENERAL) {
        return PmuMsr::FullWidthPmc(n);
    }
    if let Some(n) = index(msr, IA32_PERFEVTSEL0, GENERAL) {
        return PmuMsr::EventSelect(n);
    }
    if let Some(n) = index(msr, IA32_FIXED_CTR0, FIXED) {
        return PmuMsr::FixedCounter(n);
    }
    if let Some(n) = index(msr, PERF_LEGACY_CTL0, LEGACY) {
        return PmuMsr::LegacyCtl(n);
    }
    if let Some(n) = index(msr, PERF_LEGACY_CTR0, LEGACY) {
        return PmuMsr::LegacyCtr(n);
    }
    if let Some(k) = index(msr, PERF_CTL0, 2 * CORE) {
        return if k % 2 == 0 {
            PmuMsr::CoreCtl(k / 2)
        } else {
            PmuMsr::CoreCtr(k / 2)
        };
    }
    if (msr >= *IBS_MSRS.start() && msr <= *IBS_MSRS.end())
        || (msr >= *AMD_UNCORE_MSRS[0].start() && msr <= *AMD_UNCORE_MSRS[0].end())
        || (msr >= *AMD_UNCORE_MSRS[1].start() && msr <= *AMD_UNCORE_MSRS[1].end())
    {
        return PmuMsr::AmdOther;
    }
    match msr {
        IA32_FIXED_CTR_CTRL => PmuMsr::FixedCtrCtrl,
        IA32_PERF_GLOBAL_STATUS => PmuMsr::GlobalStatus,
        IA32_PERF_GLOBAL_CTRL => PmuMsr::GlobalCtrl,
        IA32_PERF_GLOBAL_OVF_CTRL => PmuMsr::GlobalOvfCtrl,
        IA32_PERF_GLOBAL_STATUS_SET => PmuMsr::GlobalStatusSet,
        IA32_PERF_GLOBAL_INUSE => PmuMsr::GlobalInUse,
        IA32_PERF_CAPABILITIES => PmuMsr::PerfCapabilities,
        IA32_PEBS_ENABLE | MSR_PEBS_DATA_CFG | MSR_PEBS_LD_LAT | IA32_DS_AREA => PmuMsr::Pebs,
        IA32_MISC_ENABLE => PmuMsr::MiscEnable,
        IA32_DEBUGCTL => PmuMsr::DebugCtl,
        PERF_CNTR_GLOBAL_STATUS => PmuMsr::AmdGlobalStatus,
        PERF_CNTR_GLOBAL_CTL => PmuMsr::AmdGlobalCtl,
        PERF_CNTR_GLOBAL_STATUS_CLR => PmuMsr::AmdGlobalStatusClr,
        PERF_CNTR_GLOBAL_STATUS_SET => PmuMsr::AmdGlobalStatusSet,
        _ => PmuMsr::NotPmu,
    }
}

/// Every MSR [`classify`] knows, as inclusive ranges: the MSRs a VMM
/// intercepts (or leaves to these checks) for a guest's PMU of either
/// vendor.
pub const PMU_MSR_RANGES: [core::ops::RangeInclusive<u32>; 17] = [
    IA32_PMC0..=IA32_PMC0 + GENERAL - 1,
    IA32_PERFEVTSEL0..=IA32_PERFEVTSEL0 + GENERAL - 1,
    IA32_MISC_ENABLE..=IA32_MISC_ENABLE,
    IA32_DEBUGCTL..=IA32_DEBUGCTL,
    IA32_FIXED_CTR0..=IA32_FIXED_CTR0 + FIXED - 1,
    IA32_PERF_CAPABILITIES..=IA32_PERF_CAPABILITIES,
    IA32_FIXED_CTR_CTRL..=IA32_PERF_GLOBAL_INUSE,
    IA32_PEBS_ENABLE..=MSR_PEBS_DATA_CFG,
    MSR_PEBS_LD_LAT..=MSR_PEBS_LD_LAT,
    IA32_A_PMC0..=IA32_A_PMC0 + GENERAL - 1,
    IA32_DS_AREA..=IA32_DS_AREA,
    PERF_CNTR_GLOBAL_STATUS..=PERF_CNTR_GLOBAL_STATUS_SET,
    PERF_LEGACY_CTL0..=PERF_LEGACY_CTR0 + LEGACY - 1,
    PERF_CTL0..=PERF_CTL0 + 2 * CORE - 1,
    0xC001_0230..=0xC001_023B,
    0xC001_0240..=0xC001_0247,
    0xC001_1030..=0xC001_103D,
];

/// An all-zero CPUID leaf.
pub(crate) const ZERO: CpuidResult = CpuidResult {
    eax: 0,
    ebx: 0,
    ecx: 0,
    edx: 0,
};

/// CPUID 8000_0001H:ECX without AMD's PMU bits (PerfCtrExtCore,
/// PerfCtrExtNB, PerfCtrExtLLC, IBS).
pub(crate) const fn without_amd_pmu(ecx: u32) -> u32 {
    Leaf80000001Ecx::from_bits(ecx)
        .with_perf_ctr_ext_core(false)
        .with_perf_ctr_ext_nb(false)
        .with_perf_ctr_ext_llc(false)
        .with_ibs(false)
        .bits()
}

/// The CPUID leaves that say more of a PMU than a guest has, as every
/// guest reads them: CPUID.07H:EDX's hybrid bit clear (the guest is shown
/// one PMU, of one core type), CPUID.(07H, 01H):EAX's ArchPerfmonExt clear
/// and leaf 23H zero (KVM offers neither); CPUID.07H:EDX's architectural
/// LBR clear and leaf 1CH zero (no guest LBR). `None` for any other leaf.
pub(crate) fn hidden_leaf(leaf: u32, subleaf: u32, host: CpuidResult) -> Option<CpuidResult> {
    Some(match (leaf, subleaf) {
        (7, 0) => CpuidResult {
            edx: Leaf07Edx::from_bits(host.edx)
                .with_hybrid(false)
                .with_arch_lbr(false)
                .bits(),
            ..host
        },
        (7, 1) => CpuidResult {
            eax: Leaf07Sub1Eax::from_bits(host.eax)
                .with_arch_perfmon_ext(false)
                .bits(),
            ..host
        },
        (0x1C | 0x23, _) => ZERO,
        _ => return None,
    })
}

/// The low `width` bits (1 to 64).
pub(crate) const fn width_mask(width: u8) -> u64 {
    Field::new(0, width).mask()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each range holds only MSRs the map knows, and every MSR the map
    /// knows is in a range (over a window around every range).
    #[test]
    fn the_ranges_are_the_map() {
        for r in &PMU_MSR_RANGES {
            for msr in r.clone() {
                assert_ne!(classify(msr), PmuMsr::NotPmu, "{msr:#X}");
            }
        }
        for msr in (0..0x700)
            .chain(0xC000_0000..0xC000_0400)
            .chain(0xC001_0000..0xC001_1100)
        {
            if classify(msr) != PmuMsr::NotPmu {
                assert!(PMU_MSR_RANGES.iter().any(|r| r.contains(&msr)), "{msr:#X}");
            }
        }
        assert_eq!(classify(0xC1), PmuMsr::Pmc(0));
        assert_eq!(classify(0x4C8), PmuMsr::FullWidthPmc(7));
        assert_eq!(classify(0x318), PmuMsr::FixedCounter(15));
        assert_eq!(classify(0x319), PmuMsr::NotPmu);
        assert_eq!(classify(0xC001_0007), PmuMsr::LegacyCtr(3));
        assert_eq!(classify(0xC001_020A), PmuMsr::CoreCtl(5));
        assert_eq!(classify(0xC001_020B), PmuMsr::CoreCtr(5));
        assert_eq!(classify(0xC001_020C), PmuMsr::NotPmu);
        assert_eq!(classify(0xC000_0303), PmuMsr::AmdGlobalStatusSet);
    }
}

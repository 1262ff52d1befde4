//! The architectural PMU's PEBS and last branch records for a guest:
//! refused, always.
//!
//! # Why PEBS
//!
//! A PEBS assist writes its record through the *linear* address the DS
//! save area gives (`IA32_DS_AREA` and the buffer base and index in it),
//! translated by whatever paging is live when the assist happens. A
//! guest's DS area is a guest-linear address. The assist of an event that
//! overflowed while the guest ran can complete after the VM exit, with the
//! host's CR3 live (KVM: "PEBS memory write can overshoot guest entry and
//! corrupt guest memory", and so it clears `IA32_PEBS_ENABLE` at every
//! entry unless the part isolates PEBS; Linux marks every PMU of version 4
//! and earlier `pebs_no_isolation`); the guest's linear addresses then
//! name whatever the host maps there, and the processor writes it: host
//! memory corrupted by a guest's choice of address, which no check of a
//! value can prevent. So the crate refuses PEBS to every guest: the PEBS
//! MSRs and `IA32_DS_AREA` are #GP ([`check_pebs_msr`]), and the guest sees
//! a processor without PEBS (CPUID.01H:EDX.DS clear, [`guest_cpuid_01_edx`];
//! `IA32_MISC_ENABLE` with PEBS and BTS unavailable, [`MISC_ENABLE_PMU_BITS`];
//! `IA32_PERF_CAPABILITIES` without the PEBS fields,
//! [`guest_perf_capabilities`]). A host that runs PEBS itself clears its
//! `IA32_PEBS_ENABLE` before every guest entry (the driver's counters are
//! the host's; the VMM's world switch does it).
//!
//! Xen refuses a guest's non-zero `IA32_PEBS_ENABLE` too; NetBurst's guest
//! checks ([`super::netburst`]) refuse PEBS for the same reason.
//!
//! # Why the last branch records
//!
//! The records hold the addresses of whatever branched last on the
//! logical processor: after a VM exit the host's kernel and the VMM (and,
//! on a processor the VMM shares, other guests), whose records stay in the
//! stack until newer branches push them out. A guest that reads them learns
//! host addresses (the host kernel's layout, which KASLR hides, and its
//! control flow): CVE-2024-26992 was KVM letting adaptive PEBS records
//! carry the host's LBRs to a guest. KVM passes the LBR MSRs through only
//! while a guest's own LBR event is active, rechecked before every entry,
//! and answers 0 otherwise; the crate keeps no guest LBR context, so it
//! refuses them all: the legacy stack's MSRs (`MSR_LBR_SELECT`,
//! `MSR_LASTBRANCH_TOS`, the records at 40H/60H, 680H, 6C0H, DC0H, the last
//! exception records 1DDH-1DEH) and architectural LBR's (`IA32_LBR_CTL`,
//! `IA32_LBR_DEPTH`, the records at 1200H, 1500H, 1600H) are #GP
//! ([`check_lbr_msr`]), as is a guest's `IA32_DEBUGCTL` write with `LBR` or
//! `FREEZE_LBRS_ON_PMI` (its other bits are the VMM's); the guest sees a
//! processor without them (`IA32_PERF_CAPABILITIES[5:0]` 0,
//! CPUID.07H:EDX\[19\] clear and leaf 1CH zero: [`guest_perf_capabilities`],
//! [`guest_cpuid_07_edx`], [`guest_cpuid_1c`]).
//!
//! # A guest's architectural PMU, with KVM's rules
//!
//! [`GuestPolicy`] says what a guest is shown (its version, counters,
//! widths, unavailable events, full-width writes) and which of the
//! physical PMU's counters the host keeps; [`GuestPolicy::checked`] turns
//! it into a [`GuestPmu`], which answers each of the guest's accesses as
//! KVM answers it (`arch/x86/kvm/pmu.c`, `vmx/pmu_intel.c`, `x86.c`; the
//! rules, and where they part from the SDM, are in [`validate`]'s
//! documentation): [`GuestPmu::check_msr_write`],
//! [`GuestPmu::check_msr_read`] and [`GuestPmu::check_rdpmc`], and what
//! its CPUID says ([`GuestPmu::cpuid`], with leaf 0AH, PDCM and
//! `IA32_PERF_CAPABILITIES` built from the policy). [`vpmu`] (feature
//! `model`) is a trap-and-emulate PMU on the model that follows them on
//! any host.
//!
//! | exit | call | then |
//! |---|---|---|
//! | WRMSR | [`GuestPmu::check_msr_write`] | [`WriteAnswer::Store`]: the guest register takes the value; [`WriteAnswer::ClearStatus`]: its status bits cleared; [`WriteAnswer::Drop`]: nothing; `Err`: inject #GP; [`WriteAnswer::NotPmu`]: the VMM's |
//! | RDMSR | [`GuestPmu::check_msr_read`] | [`ReadAnswer::Reg`]: the register; [`ReadAnswer::Value`]: that value; [`ReadAnswer::Merge`]: the VMM's value with those bits; `Err`: #GP |
//! | RDPMC | [`GuestPmu::check_rdpmc`] | the counter ANDed with the mask, or #GP |
//! | CPUID | [`GuestPmu::cpuid`] | the VMM's answer with the PMU's leaves replaced |
//! | a PMI of the guest's counters | [`VirtualLvt::raise`](super::VirtualLvt::raise) | delivered at the next entry at which the guest's entry is unmasked, masking it |
//!
//! # A vCPU moving between CPUs
//!
//! Nothing of a guest's PMU is a handle: [`GuestPmu`] is a policy, the
//! emulated [`vpmu::VirtualPmu`] plain data (its registers, its pending
//! PMI in its [`VirtualLvt`](super::VirtualLvt)), so a vCPU takes its PMU
//! along as a value to whichever CPU runs it next; nothing of it stays on
//! the CPU it left, and a PMI it was owed there is delivered at its first
//! entry on the next. The counter handles of the crate's drivers (the
//! host's own counters) work only with the driver that issued them, one
//! per physical PMU: they never move with a vCPU, and a VMM that runs a
//! guest's counters on the hardware (the pass-through world switch,
//! [`PassThroughPmu`]) saves them as register images on the CPU it
//! leaves and restores them through the next CPU's register backend.

pub mod validate;
#[cfg(any(test, feature = "model"))]
pub mod vpmu;

mod passthrough;
mod policy;
mod world;

pub use super::answer::{RdpmcAnswer, ReadAnswer, WriteAnswer};
pub use passthrough::{
    GUEST_IA32_PERF_GLOBAL_CTRL, GlobalCtrlValues, HOST_IA32_PERF_GLOBAL_CTRL, Intercept, MsrRule,
    PassThrough, VM_ENTRY_LOAD_IA32_PERF_GLOBAL_CTRL, VM_EXIT_LOAD_IA32_PERF_GLOBAL_CTRL,
    VM_EXIT_SAVE_IA32_PERF_GLOBAL_CTRL, Why, global_ctrl_values, msr_bitmap_bits,
};
pub use policy::{GuestPmu, GuestPolicy, MAX_GUEST_FIXED, MAX_GUEST_GENERAL, PolicyError};
pub use validate::GuestReg;
pub use world::PassThroughPmu;

use super::Verdict;
use crate::arch::archperf::{
    DebugCtl, IA32_DEBUGCTL, IA32_DS_AREA, IA32_LBR_0_FROM_IP, IA32_LBR_0_INFO, IA32_LBR_0_TO_IP,
    IA32_LBR_CTL, IA32_PEBS_ENABLE, MSR_LASTBRANCH_0_FROM_IP, MSR_LASTBRANCH_0_TO_IP,
    MSR_LBR_INFO_0, MSR_LBR_SELECT, MSR_PEBS_DATA_CFG, MSR_PEBS_LD_LAT,
};
use crate::detect::{
    CpuidResult, IA32_MISC_ENABLE, Leaf01Edx, Leaf07Edx, MiscEnable, PerfCapabilities,
};

/// Why a guest's access is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum GuestGp {
    /// PEBS or the DS area: never for a guest (see the [module
    /// documentation](self)).
    PebsRefused {
        /// The MSR.
        msr: u32,
    },
    /// A write to `IA32_MISC_ENABLE`'s read-only PMU bits.
    ReadOnly {
        /// The MSR.
        msr: u32,
    },
    /// The last branch records, or `IA32_DEBUGCTL`'s LBR bits: never for
    /// a guest (see the [module documentation](self)).
    LbrRefused {
        /// The MSR.
        msr: u32,
    },
    /// An MSR the guest's PMU does not have: a counter beyond its counts,
    /// a register of another version or of AMD's PMU, or one KVM does not
    /// emulate (`IA32_PERF_GLOBAL_STATUS_SET`, `_INUSE`).
    NoSuchMsr {
        /// The MSR.
        msr: u32,
    },
    /// A write that sets bits the guest's PMU reserves.
    Reserved {
        /// The MSR.
        msr: u32,
        /// The offending bits.
        bits: u64,
    },
    /// A full-width counter write (`IA32_A_PMCx`) with bits above the
    /// counter's width.
    OutOfWidth {
        /// The MSR.
        msr: u32,
    },
    /// A write to a register that is read-only to a guest
    /// (`IA32_PERF_GLOBAL_STATUS`, `IA32_PERF_CAPABILITIES`).
    ReadOnlyMsr {
        /// The MSR.
        msr: u32,
    },
    /// RDPMC of a counter type or index the guest does not have.
    RdpmcIndex {
        /// The ECX operand.
        ecx: u32,
    },
    /// RDPMC at CPL > 0 with CR4.PCE clear.
    RdpmcNotAllowed,
}

impl core::fmt::Display for GuestGp {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            GuestGp::PebsRefused { msr } => write!(
                f,
                "MSR {msr:#X} is PEBS's: refused to every guest (a PEBS record is written through a linear address with whatever paging is live, the host's after a VM exit)"
            ),
            GuestGp::ReadOnly { msr } => {
                write!(
                    f,
                    "MSR {msr:#X}'s performance-monitoring bits are read-only"
                )
            }
            GuestGp::LbrRefused { msr } => write!(
                f,
                "MSR {msr:#X} is the last branch records': refused to every guest (the records hold the host's branch addresses after a VM exit)"
            ),
            GuestGp::NoSuchMsr { msr } => {
                write!(f, "MSR {msr:#X} is no register of the guest's PMU")
            }
            GuestGp::Reserved { msr, bits } => write!(
                f,
                "WRMSR to {msr:#X} sets bits {bits:#x} the guest's PMU reserves"
            ),
            GuestGp::OutOfWidth { msr } => write!(
                f,
                "WRMSR to {msr:#X} sets bits above the guest counter's width"
            ),
            GuestGp::ReadOnlyMsr { msr } => write!(f, "MSR {msr:#X} is read-only to a guest"),
            GuestGp::RdpmcIndex { ecx } => write!(
                f,
                "RDPMC with ECX {ecx:#X}: no such counter type or counter in the guest's PMU"
            ),
            GuestGp::RdpmcNotAllowed => f.write_str("RDPMC at CPL > 0 with CR4.PCE clear"),
        }
    }
}

impl core::error::Error for GuestGp {}

/// The MSRs of the architectural PMU's PEBS a guest may not touch.
pub const PEBS_MSRS: [u32; 4] = [
    IA32_PEBS_ENABLE,
    MSR_PEBS_DATA_CFG,
    MSR_PEBS_LD_LAT,
    IA32_DS_AREA,
];

/// The `IA32_MISC_ENABLE` performance-monitoring bits a guest reads:
/// performance monitoring available, BTS and PEBS unavailable (the VMM
/// answers the other bits).
pub const MISC_ENABLE_PMU_BITS: u64 = MiscEnable::from_bits(0)
    .with_perf_mon_available(true)
    .with_bts_unavailable(true)
    .with_pebs_unavailable(true)
    .bits();

/// A guest's RDMSR (`write` false) or WRMSR of `msr`: #GP for PEBS's MSRs
/// and `IA32_DS_AREA`; a read of `IA32_MISC_ENABLE` emulated (answer
/// [`MISC_ENABLE_PMU_BITS`] for its PMU bits), a write of it #GP (its PMU
/// bits are read-only); anything else is not PEBS's ([`Verdict::NotPmu`]:
/// the VMM's, or its architectural-PMU checks').
pub fn check_pebs_msr(msr: u32, write: bool) -> Verdict<GuestGp> {
    if PEBS_MSRS.contains(&msr) {
        return Verdict::InjectGp(GuestGp::PebsRefused { msr });
    }
    match (msr, write) {
        (IA32_MISC_ENABLE, false) => Verdict::Emulate,
        (IA32_MISC_ENABLE, true) => Verdict::InjectGp(GuestGp::ReadOnly { msr }),
        _ => Verdict::NotPmu,
    }
}

/// The last branch records' MSRs, as (first, count) ranges: the legacy
/// stack's filter and TOS, Core 2's and Atom's records at 40H and 60H
/// (`MSR_LASTBRANCH_0_FROM_IP` and `_TO_IP` there), the last exception
/// records (`MSR_LER_FROM_LIP`, `MSR_LER_TO_LIP`), the records of Nehalem
/// and later (32 at most), their `LBR_INFO`s, and architectural LBR's
/// control, depth and records (64 at most).
pub const LBR_MSRS: [(u32, u32); 11] = [
    (MSR_LBR_SELECT, 2),
    (0x40, 8),
    (0x60, 8),
    (0x1DD, 2),
    (MSR_LASTBRANCH_0_FROM_IP, 32),
    (MSR_LASTBRANCH_0_TO_IP, 32),
    (MSR_LBR_INFO_0, 32),
    (IA32_LBR_CTL, 2),
    (IA32_LBR_0_INFO, 64),
    (IA32_LBR_0_FROM_IP, 64),
    (IA32_LBR_0_TO_IP, 64),
];

/// Whether `msr` is one of the last branch records' ([`LBR_MSRS`]).
pub fn is_lbr_msr(msr: u32) -> bool {
    LBR_MSRS
        .iter()
        .any(|&(first, n)| msr.wrapping_sub(first) < n)
}

/// A guest's RDMSR (`write` `None`) or WRMSR of `value` to `msr`: #GP for
/// the last branch records' MSRs, and for an `IA32_DEBUGCTL` write that
/// sets `LBR` or `FREEZE_LBRS_ON_PMI`; anything else is not the LBR's
/// ([`Verdict::NotPmu`]: `IA32_DEBUGCTL`'s other bits are the VMM's).
pub fn check_lbr_msr(msr: u32, write: Option<u64>) -> Verdict<GuestGp> {
    if is_lbr_msr(msr) {
        return Verdict::InjectGp(GuestGp::LbrRefused { msr });
    }
    match (msr, write) {
        (IA32_DEBUGCTL, Some(v)) => {
            let v = DebugCtl::from_bits(v);
            if v.lbr() || v.freeze_lbrs_on_pmi() {
                Verdict::InjectGp(GuestGp::LbrRefused { msr })
            } else {
                Verdict::NotPmu
            }
        }
        _ => Verdict::NotPmu,
    }
}

/// `IA32_PERF_CAPABILITIES` as a guest reads it: the host's, with the PEBS
/// fields clear (the trap-like assist, the saved registers, the record
/// format, PEBS baseline) and the LBR format 0, so a guest driver finds
/// neither PEBS nor a legacy LBR stack it knows.
pub const fn guest_perf_capabilities(host: u64) -> u64 {
    PerfCapabilities::from_bits(host)
        .with_pebs_trap(false)
        .with_pebs_arch_regs(false)
        .with_pebs_format(0)
        .with_pebs_baseline(false)
        .with_lbr_format(0)
        .bits()
}

/// CPUID.07H:EDX as a guest reads it: the host's, without architectural
/// LBR (bit 19).
pub const fn guest_cpuid_07_edx(host: u32) -> u32 {
    Leaf07Edx::from_bits(host).with_arch_lbr(false).bits()
}

/// CPUID leaf 1CH as a guest reads it: zero (no architectural LBR).
pub const fn guest_cpuid_1c() -> CpuidResult {
    CpuidResult {
        eax: 0,
        ebx: 0,
        ecx: 0,
        edx: 0,
    }
}

/// CPUID.01H:EDX as a guest reads it: the host's, with DS (bit 21) clear:
/// no debug store, so neither BTS nor PEBS.
pub const fn guest_cpuid_01_edx(host: u32) -> u32 {
    Leaf01Edx::from_bits(host).with_ds(false).bits()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::{Cpuid, detect};
    use crate::model::archperf::{ArchPerfModel, Config};

    /// Every PEBS MSR is #GP in both directions, with the reason;
    /// `IA32_MISC_ENABLE` reads as a processor without PEBS and takes no
    /// write; other MSRs are not PEBS's.
    #[test]
    fn guest_pebs_is_refused() {
        for msr in [0x3F1, 0x3F2, 0x3F6, 0x600] {
            for write in [false, true] {
                assert_eq!(
                    check_pebs_msr(msr, write),
                    Verdict::InjectGp(GuestGp::PebsRefused { msr })
                );
            }
        }
        assert_eq!(check_pebs_msr(0x1A0, false), Verdict::Emulate);
        assert_eq!(
            check_pebs_msr(0x1A0, true),
            Verdict::InjectGp(GuestGp::ReadOnly { msr: 0x1A0 })
        );
        for msr in [0x186, 0x38F, 0x3F0, 0x3F7, 0x601] {
            assert_eq!(check_pebs_msr(msr, true), Verdict::NotPmu, "{msr:#X}");
        }
        assert_eq!(MISC_ENABLE_PMU_BITS, 1 << 7 | 1 << 11 | 1 << 12);
        assert_eq!(
            GuestGp::PebsRefused { msr: 0x600 }.to_string(),
            "MSR 0x600 is PEBS's: refused to every guest (a PEBS record is written through a linear address with whatever paging is live, the host's after a VM exit)"
        );
    }

    /// A guest's view of an Ice Lake host (the model): detection inside
    /// the guest finds the architectural PMU without PEBS.
    #[test]
    fn a_guest_sees_no_pebs() {
        let host = ArchPerfModel::new(Config::icelake());
        let caps = crate::access::MsrAccess::read_msr(&mut host.clone(), 0x345).unwrap();
        let guest = guest_perf_capabilities(caps);
        assert_eq!(guest, 1 << 13, "FW_WRITE only");
        let edx = host.cpuid(1, 0).edx;
        assert_ne!(edx & 1 << 21, 0);
        assert_eq!(guest_cpuid_01_edx(edx), edx & !(1 << 21));
        /// The guest: the host model with CPUID and the capabilities
        /// filtered, `IA32_MISC_ENABLE` emulated.
        struct Guest(ArchPerfModel);
        impl Cpuid for Guest {
            fn cpuid(&self, leaf: u32, subleaf: u32) -> crate::detect::CpuidResult {
                let mut r = self.0.cpuid(leaf, subleaf);
                if leaf == 1 {
                    r.edx = guest_cpuid_01_edx(r.edx);
                }
                r
            }
        }
        impl crate::access::MsrAccess for Guest {
            type Error = crate::model::archperf::Fault;
            fn read_msr(&mut self, msr: u32) -> Result<u64, Self::Error> {
                match check_pebs_msr(msr, false) {
                    Verdict::Emulate => Ok(MISC_ENABLE_PMU_BITS),
                    _ if msr == 0x345 => self.0.read_msr(msr).map(guest_perf_capabilities),
                    _ => self.0.read_msr(msr),
                }
            }
            fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Self::Error> {
                self.0.write_msr(msr, value)
            }
            fn rdpmc(&mut self, index: u32) -> Result<u64, Self::Error> {
                self.0.rdpmc(index)
            }
        }
        let mut guest = Guest(host);
        let cpuid = Guest(guest.0.clone());
        let pebs = detect(&cpuid, &mut guest)
            .unwrap()
            .arch_perf()
            .unwrap()
            .pebs;
        assert!(!pebs.ds && !pebs.usable() && pebs.format == 0);
    }

    /// Every LBR MSR of both generations is #GP in both directions, with
    /// the reason; `IA32_DEBUGCTL` only when a write sets an LBR bit.
    #[test]
    fn guest_lbr_is_refused() {
        let refused = [
            0x1C8, 0x1C9, 0x40, 0x47, 0x60, 0x67, 0x1DD, 0x1DE, 0x680, 0x69F, 0x6C0, 0x6DF, 0xDC0,
            0xDDF, 0x14CE, 0x14CF, 0x1200, 0x123F, 0x1500, 0x153F, 0x1600, 0x163F,
        ];
        for msr in refused {
            for write in [None, Some(0)] {
                assert_eq!(
                    check_lbr_msr(msr, write),
                    Verdict::InjectGp(GuestGp::LbrRefused { msr }),
                    "{msr:#X}"
                );
            }
        }
        for msr in [
            0x3F, 0x48, 0x1C7, 0x1CA, 0x6A0, 0x6E0, 0xDE0, 0x14D0, 0x1240, 0x1640, 0x186,
        ] {
            assert_eq!(check_lbr_msr(msr, Some(0)), Verdict::NotPmu, "{msr:#X}");
        }
        for bit in [0, 11] {
            assert_eq!(
                check_lbr_msr(0x1D9, Some(1 << bit)),
                Verdict::InjectGp(GuestGp::LbrRefused { msr: 0x1D9 })
            );
        }
        // BTF and reads are the VMM's.
        assert_eq!(check_lbr_msr(0x1D9, Some(1 << 1)), Verdict::NotPmu);
        assert_eq!(check_lbr_msr(0x1D9, None), Verdict::NotPmu);
        assert_eq!(
            GuestGp::LbrRefused { msr: 0x680 }.to_string(),
            "MSR 0x680 is the last branch records': refused to every guest (the records hold the host's branch addresses after a VM exit)"
        );
    }

    /// A guest of a host with the legacy stack (Skylake) or with
    /// architectural LBR (Alder Lake), CPUID and the capabilities filtered:
    /// detection inside the guest finds no LBR the crate would drive.
    #[test]
    fn a_guest_sees_no_lbr() {
        use crate::arch::archperf::Lbr;
        for config in [Config::skylake(), Config::alder_lake_p_core()] {
            let host = ArchPerfModel::new(config);
            assert!(
                Lbr::of(
                    &detect(&host, &mut host.clone())
                        .unwrap()
                        .arch_perf()
                        .unwrap()
                )
                .is_some()
            );
            /// The guest's view of the host.
            struct Guest(ArchPerfModel);
            impl Cpuid for Guest {
                fn cpuid(&self, leaf: u32, subleaf: u32) -> crate::detect::CpuidResult {
                    let mut r = self.0.cpuid(leaf, subleaf);
                    match leaf {
                        7 => r.edx = guest_cpuid_07_edx(r.edx),
                        0x1C => r = guest_cpuid_1c(),
                        _ => {}
                    }
                    r
                }
            }
            impl crate::access::MsrAccess for Guest {
                type Error = crate::model::archperf::Fault;
                fn read_msr(&mut self, msr: u32) -> Result<u64, Self::Error> {
                    let v = self.0.read_msr(msr)?;
                    Ok(if msr == 0x345 {
                        guest_perf_capabilities(v)
                    } else {
                        v
                    })
                }
                fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Self::Error> {
                    self.0.write_msr(msr, value)
                }
                fn rdpmc(&mut self, index: u32) -> Result<u64, Self::Error> {
                    self.0.rdpmc(index)
                }
            }
            let mut guest = Guest(host.clone());
            let cpuid = Guest(host);
            let a = detect(&cpuid, &mut guest).unwrap().arch_perf().unwrap();
            assert_eq!((a.lbr.format, a.lbr.arch), (0, None), "{config:?}");
            assert_eq!(Lbr::of(&a), None);
        }
    }
}

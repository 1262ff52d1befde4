//! Each of KVM's rules for an Intel guest's PMU accesses, one test per
//! register (the fuzz tests hold the checks against a KVM rendering over a
//! million random accesses; these say each rule by example), the CPUID the
//! guest reads, and the policy's checks.

use super::*;
use crate::arch::archperf::CounterSet;
use crate::detect::{Cpuid, CpuidResult, detect};
use crate::virt::archperf::{GuestPolicy, PolicyError, WriteAnswer as W};

fn pmu(p: GuestPolicy) -> GuestPmu {
    p.checked().unwrap()
}

fn g(n: u8) -> Counter {
    Counter::general(n).unwrap()
}

fn f(i: u8) -> Counter {
    Counter::fixed(i).unwrap()
}

fn store(reg: GuestReg, value: u64) -> Result<W<GuestReg>, GuestGp> {
    Ok(W::Store { reg, value })
}

fn no_such(msr: u32) -> GuestGp {
    GuestGp::NoSuchMsr { msr }
}

/// `IA32_PMCn`: bits 31:0 sign-extended, cut to the width; `IA32_A_PMCn`
/// only with full-width writes, #GP above the width; a counter beyond the
/// guest's is #GP, but the P6 pair's (C1H, C2H) reads 0 and drops writes.
#[test]
fn general_counter_writes() {
    let p = pmu(GuestPolicy {
        general_width: 40,
        ..GuestPolicy::new(2, 1, 0)
    });
    let c0 = GuestReg::Counter(g(0));
    assert_eq!(
        p.check_msr_write(0xC1, 0xFFFF_FFFF_8000_0001),
        store(c0, 0xFF_8000_0001),
        "sign-extended from bit 31, cut to 40 bits"
    );
    assert_eq!(
        p.check_msr_write(0xC1, 0xFFFF_FFFF_1234_5678),
        store(c0, 0x1234_5678),
        "EDX ignored"
    );
    assert_eq!(p.check_msr_write(0x4C1, 1), Err(no_such(0x4C1)), "no FW");
    assert_eq!(p.check_msr_read(0x4C1), Err(no_such(0x4C1)));
    assert_eq!(p.check_msr_write(0xC2, 5), Ok(W::Drop), "P6 PERFCTR1");
    assert_eq!(p.check_msr_read(0xC2), Ok(ReadAnswer::Value(0)));
    assert_eq!(p.check_msr_write(0xC3, 5), Err(no_such(0xC3)));
    assert_eq!(p.check_msr_read(0xC8), Err(no_such(0xC8)));
    let fw = pmu(GuestPolicy {
        full_width_writes: true,
        ..GuestPolicy::new(2, 4, 0)
    });
    assert_eq!(
        fw.check_msr_write(0x4C3, (1 << 48) - 1),
        store(GuestReg::Counter(g(2)), (1 << 48) - 1)
    );
    assert_eq!(
        fw.check_msr_write(0x4C3, 1 << 48),
        Err(GuestGp::OutOfWidth { msr: 0x4C3 })
    );
    assert_eq!(
        fw.check_msr_read(0x4C4),
        Ok(ReadAnswer::Reg(GuestReg::Counter(g(3))))
    );
    assert_eq!(fw.check_msr_write(0x4C5, 0), Err(no_such(0x4C5)));
    assert_eq!(
        fw.check_msr_write(0xC2, 5),
        store(GuestReg::Counter(g(1)), 5)
    );
}

/// `IA32_PERFEVTSELn`: #GP on bits 63:32 and on AnyThread on every
/// version (3 and 4 too, where the SDM has it); PC taken; the P6 pair's
/// select of a counter the guest lacks is dropped.
#[test]
fn event_select_reserved_bits() {
    for version in 1..=5 {
        let p = pmu(GuestPolicy::new(version, 1, 0));
        let ok = 0xC0 | 1 << 16 | 1 << 17 | 1 << 18 | 1 << 19 | 1 << 20 | 1 << 22 | 1 << 23;
        let ok = ok | 0xFF << 24 | 0xFF << 8;
        assert_eq!(
            p.check_msr_write(0x186, ok),
            store(GuestReg::EventSelect(g(0)), ok)
        );
        for bit in [21, 32, 33, 34, 63] {
            assert_eq!(
                p.check_msr_write(0x186, 1 << bit),
                Err(GuestGp::Reserved {
                    msr: 0x186,
                    bits: 1 << bit
                }),
                "v{version} bit {bit}"
            );
        }
        assert_eq!(p.check_msr_write(0x187, u64::MAX), Ok(W::Drop));
        assert_eq!(p.check_msr_read(0x187), Ok(ReadAnswer::Value(0)));
        assert_eq!(p.check_msr_write(0x188, 0), Err(no_such(0x188)));
    }
}

/// `IA32_FIXED_CTRi`: cut to the fixed width (KVM; the SDM reserves the
/// excess bits); beyond the guest's fixed counters #GP.
#[test]
fn fixed_counters() {
    let p = pmu(GuestPolicy {
        fixed_width: 40,
        ..GuestPolicy::new(2, 2, 2)
    });
    assert_eq!(
        p.check_msr_write(0x30A, u64::MAX),
        store(GuestReg::Counter(f(1)), (1 << 40) - 1)
    );
    assert_eq!(
        p.check_msr_read(0x309),
        Ok(ReadAnswer::Reg(GuestReg::Counter(f(0))))
    );
    assert_eq!(p.check_msr_write(0x30B, 0), Err(no_such(0x30B)));
    let v1 = pmu(GuestPolicy::new(1, 2, 0));
    assert_eq!(v1.check_msr_read(0x309), Err(no_such(0x309)));
}

/// `IA32_FIXED_CTR_CTRL` (version 2+): OS, USR and PMI of each guest
/// fixed counter; AnyThread and other counters' fields #GP.
#[test]
fn fixed_ctr_ctrl() {
    let p = pmu(GuestPolicy::new(3, 2, 3));
    assert_eq!(
        p.check_msr_write(0x38D, 0xBBB),
        store(GuestReg::FixedCtrCtrl, 0xBBB)
    );
    for bits in [1 << 2, 1 << 6, 1 << 10, 1 << 12, 1 << 32, 1 << 63] {
        assert_eq!(
            p.check_msr_write(0x38D, bits | 0xB),
            Err(GuestGp::Reserved { msr: 0x38D, bits }),
            "{bits:#x}"
        );
    }
    let v1 = pmu(GuestPolicy::new(1, 2, 0));
    assert_eq!(v1.check_msr_write(0x38D, 0), Err(no_such(0x38D)));
    assert_eq!(v1.check_msr_read(0x38D), Err(no_such(0x38D)));
}

/// `IA32_PERF_GLOBAL_CTRL`: the guest's counters' bits only (a counter the
/// host keeps is reserved to it); `IA32_PERF_GLOBAL_STATUS` read-only;
/// `IA32_PERF_GLOBAL_OVF_CTRL` the counters, 62 and 63, reading 0; none on
/// version 1; `STATUS_SET` and `INUSE` on no version.
#[test]
fn global_registers() {
    let p = pmu(GuestPolicy {
        host_counters: CounterSet::EMPTY.with(g(4)).with(f(3)),
        ..GuestPolicy::new(4, 4, 3)
    });
    assert_eq!(
        p.check_msr_write(0x38F, 0x7_0000_000F),
        store(GuestReg::GlobalCtrl, 0x7_0000_000F)
    );
    for bits in [1 << 4, 1 << 35, 1 << 62] {
        assert_eq!(
            p.check_msr_write(0x38F, bits),
            Err(GuestGp::Reserved { msr: 0x38F, bits })
        );
    }
    assert_eq!(
        p.check_msr_write(0x38E, 0),
        Err(GuestGp::ReadOnlyMsr { msr: 0x38E })
    );
    assert_eq!(
        p.check_msr_read(0x38E),
        Ok(ReadAnswer::Reg(GuestReg::GlobalStatus))
    );
    let clear = 0xC000_0007_0000_000F;
    assert_eq!(p.check_msr_write(0x390, clear), Ok(W::ClearStatus(clear)));
    for bits in [1 << 4, 1 << 55, 1 << 59, 1 << 61] {
        assert_eq!(
            p.check_msr_write(0x390, bits),
            Err(GuestGp::Reserved { msr: 0x390, bits }),
            "{bits:#x}"
        );
    }
    assert_eq!(p.check_msr_read(0x390), Ok(ReadAnswer::Value(0)));
    for v in [4, 5] {
        let p = pmu(GuestPolicy::new(v, 4, 3));
        for msr in [0x391, 0x392] {
            assert_eq!(p.check_msr_write(msr, 1), Err(no_such(msr)));
            assert_eq!(p.check_msr_read(msr), Err(no_such(msr)));
        }
    }
    let v1 = pmu(GuestPolicy::new(1, 2, 0));
    for msr in 0x38E..=0x390 {
        assert_eq!(v1.check_msr_write(msr, 0), Err(no_such(msr)));
        assert_eq!(v1.check_msr_read(msr), Err(no_such(msr)));
    }
}

/// `IA32_PERF_CAPABILITIES` reads the policy's (`FW_WRITE` or 0) with
/// PDCM, is #GP without, and no guest writes it; `IA32_MISC_ENABLE` reads
/// the PMU's bits, and a write that changes bit 11 or 12 is #GP (bit 7
/// and the rest the VMM's); `IA32_DEBUGCTL` with `FREEZE_PERFMON_ON_PMI`,
/// `FREEZE_LBRS_ON_PMI` or `LBR` is #GP; PEBS's and the last branch
/// records' MSRs are #GP.
#[test]
fn capability_and_shared_registers() {
    let fw = pmu(GuestPolicy {
        full_width_writes: true,
        ..GuestPolicy::new(1, 2, 0)
    });
    assert_eq!(fw.check_msr_read(0x345), Ok(ReadAnswer::Value(1 << 13)));
    assert_eq!(
        fw.check_msr_write(0x345, 1 << 13),
        Err(GuestGp::ReadOnlyMsr { msr: 0x345 })
    );
    let v2 = pmu(GuestPolicy::new(2, 2, 3));
    assert_eq!(v2.check_msr_read(0x345), Ok(ReadAnswer::Value(0)));
    let v1 = pmu(GuestPolicy::new(1, 2, 0));
    assert_eq!(v1.check_msr_read(0x345), Err(no_such(0x345)));
    assert_eq!(
        v2.check_msr_read(0x1A0),
        Ok(ReadAnswer::Merge {
            mask: 1 << 7 | 1 << 11 | 1 << 12,
            bits: 1 << 7 | 1 << 11 | 1 << 12
        })
    );
    let misc = 1 << 7 | 1 << 11 | 1 << 12;
    assert_eq!(v2.check_msr_write(0x1A0, misc | 1), Ok(W::NotPmu));
    assert_eq!(v2.check_msr_write(0x1A0, misc & !(1 << 7)), Ok(W::NotPmu));
    for bit in [11, 12] {
        assert_eq!(
            v2.check_msr_write(0x1A0, misc & !(1 << bit)),
            Err(GuestGp::ReadOnly { msr: 0x1A0 })
        );
    }
    assert_eq!(
        v2.check_msr_write(0x1D9, 1 << 12),
        Err(GuestGp::Reserved {
            msr: 0x1D9,
            bits: 1 << 12
        })
    );
    assert_eq!(v2.check_msr_write(0x1D9, 1 << 1), Ok(W::NotPmu));
    assert_eq!(v2.check_msr_read(0x1D9), Ok(ReadAnswer::NotPmu));
    for bit in [0, 11] {
        assert_eq!(
            v2.check_msr_write(0x1D9, 1 << bit),
            Err(GuestGp::LbrRefused { msr: 0x1D9 }),
            "LBR and FREEZE_LBRS_ON_PMI"
        );
    }
    // MSR_LBR_SELECT, MSR_LASTBRANCH_TOS, a Skylake record, IA32_LBR_CTL,
    // IA32_LBR_DEPTH, an architectural record.
    for msr in [0x1C8, 0x1C9, 0x680, 0x14CE, 0x14CF, 0x1500] {
        assert_eq!(v2.check_msr_write(msr, 0), Err(GuestGp::LbrRefused { msr }));
        assert_eq!(v2.check_msr_read(msr), Err(GuestGp::LbrRefused { msr }));
    }
    for msr in [0x3F1, 0x3F2, 0x3F6, 0x600] {
        assert_eq!(
            v2.check_msr_write(msr, 0),
            Err(GuestGp::PebsRefused { msr })
        );
        assert_eq!(v2.check_msr_read(msr), Err(GuestGp::PebsRefused { msr }));
    }
}

/// AMD's registers in an Intel guest: the four legacy K7 pairs read 0 and
/// drop writes (KVM's `x86.c`), the rest are #GP; other MSRs are not the
/// PMU's.
#[test]
fn amd_registers_in_an_intel_guest() {
    let p = pmu(GuestPolicy::new(2, 4, 3));
    for msr in 0xC001_0000..=0xC001_0007 {
        assert_eq!(p.check_msr_write(msr, 0x42), Ok(W::Drop));
        assert_eq!(p.check_msr_read(msr), Ok(ReadAnswer::Value(0)));
    }
    for msr in [
        0xC001_0200,
        0xC001_020B,
        0xC000_0300,
        0xC000_0303,
        0xC001_1030,
        0xC001_0240,
    ] {
        assert_eq!(p.check_msr_write(msr, 0), Err(no_such(msr)));
        assert_eq!(p.check_msr_read(msr), Err(no_such(msr)));
    }
    for msr in [0x10, 0x1B, 0xC000_0080, 0xC001_0008] {
        assert_eq!(p.check_msr_write(msr, 0), Ok(W::NotPmu));
        assert_eq!(p.check_msr_read(msr), Ok(ReadAnswer::NotPmu));
    }
}

/// RDPMC: ECX\[31:16\] a type (0 general, 4000H fixed), ECX\[15:0\] an
/// index below the guest's count; anything else #GP (the fast bit 31 and
/// kvm-unit-tests' ECX 64 included); CPL > 0 needs CR4.PCE; the width's
/// mask.
#[test]
fn rdpmc_forms() {
    let p = pmu(GuestPolicy {
        fixed_width: 40,
        ..GuestPolicy::new(2, 4, 3)
    });
    let ok = |ecx| p.check_rdpmc(ecx, false, 0).map(|a| (a.counter, a.mask));
    assert_eq!(ok(3), Ok((g(3), (1 << 48) - 1)));
    assert_eq!(ok(1 << 30 | 2), Ok((f(2), (1 << 40) - 1)));
    for ecx in [
        4,
        64,
        1 << 30 | 3,
        1 << 31,
        1 << 31 | 1,
        1 << 16,
        1 << 29,
        0xFFFF,
    ] {
        assert_eq!(
            p.check_rdpmc(ecx, true, 0),
            Err(GuestGp::RdpmcIndex { ecx }),
            "{ecx:#x}"
        );
    }
    assert_eq!(p.check_rdpmc(0, false, 3), Err(GuestGp::RdpmcNotAllowed));
    assert!(p.check_rdpmc(0, true, 3).is_ok());
    assert!(p.check_rdpmc(0, false, 0).is_ok());
    let v1 = pmu(GuestPolicy::new(1, 2, 0));
    assert_eq!(
        v1.check_rdpmc(1 << 30, true, 0),
        Err(GuestGp::RdpmcIndex { ecx: 1 << 30 })
    );
}

/// The guest's CPUID: leaf 0AH from the policy, PDCM with
/// `IA32_PERF_CAPABILITIES`, no DS, no AMD PMU; detection inside the guest
/// finds exactly the policy's PMU.
#[test]
fn the_guest_cpuid_is_the_policy() {
    let p = pmu(GuestPolicy {
        general_width: 44,
        fixed_width: 40,
        unavailable: 1 << 3 | 1 << 6,
        full_width_writes: true,
        ..GuestPolicy::new(5, 6, 3)
    });
    let leaf = p.leaf_0a();
    assert_eq!(
        leaf.regs,
        [
            5 | 6 << 8 | 44 << 16 | 8 << 24,
            0x48,
            0,
            3 | 40 << 5 | 1 << 15
        ]
    );
    let host = CpuidResult {
        eax: 1,
        ebx: 2,
        ecx: 0xFFFF_FFFF,
        edx: 0xFFFF_FFFF,
    };
    assert_eq!(p.cpuid(0x0A, 0, host).ebx, 0x48);
    let one = p.cpuid(1, 0, CpuidResult { ecx: 0, ..host });
    assert_eq!(
        (one.ecx, one.edx & 1 << 21),
        (1 << 15, 0),
        "PDCM set, DS clear"
    );
    assert_eq!(
        p.cpuid(0x8000_0001, 0, host).ecx & (1 << 10 | 1 << 23 | 1 << 24 | 1 << 28),
        0
    );
    assert_eq!(p.cpuid(0x8000_0022, 0, host), crate::virt::x86::ZERO);
    assert_eq!(
        p.cpuid(7, 0, host).edx,
        !(1 << 15 | 1 << 19),
        "not hybrid, no architectural LBR"
    );
    assert_eq!(p.cpuid(0x1C, 0, host), crate::virt::x86::ZERO);
    let ones = CpuidResult { eax: !0, ..host };
    assert_eq!(p.cpuid(7, 1, ones).eax, !(1 << 8), "no leaf 23H");
    assert_eq!(p.cpuid(0x23, 1, host), crate::virt::x86::ZERO);
    assert_eq!(p.cpuid(0xB, 0, host), host);
    let v1 = pmu(GuestPolicy::new(1, 2, 0));
    assert_eq!(
        v1.leaf_0a().regs[3],
        1 << 15,
        "no fixed counters, AnyThread deprecated"
    );
    assert_eq!(v1.cpuid(1, 0, host).ecx & 1 << 15, 0, "no PDCM");

    /// The guest as its kernel sees it: CPUID through the policy, the
    /// MSRs through the checks on the emulated PMU.
    struct Guest(
        GuestPmu,
        core::cell::RefCell<crate::virt::archperf::vpmu::VirtualPmu>,
    );
    impl Cpuid for Guest {
        fn cpuid(&self, leaf: u32, subleaf: u32) -> CpuidResult {
            // A hybrid host with leaf 23H: the guest sees one PMU, its own.
            let host = crate::model::archperf::Config::meteor_lake_p_core().cpuid(leaf, subleaf);
            self.0.cpuid(leaf, subleaf, host)
        }
    }
    impl crate::access::MsrAccess for Guest {
        type Error = GuestGp;
        fn read_msr(&mut self, msr: u32) -> Result<u64, GuestGp> {
            Ok(self.1.get_mut().rdmsr(msr)?.unwrap_or(0))
        }
        fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), GuestGp> {
            self.1.get_mut().wrmsr(msr, value).map(|_| ())
        }
        fn rdpmc(&mut self, index: u32) -> Result<u64, GuestGp> {
            self.1.get_mut().rdpmc(index, false, 0)
        }
    }
    let vpmu = crate::virt::archperf::vpmu::VirtualPmu::new(p);
    let mut guest = Guest(p, core::cell::RefCell::new(vpmu.clone()));
    let cpuid = Guest(p, core::cell::RefCell::new(vpmu));
    let a = detect(&cpuid, &mut guest).unwrap().arch_perf().unwrap();
    assert_eq!(
        (a.leaf.version(), a.leaf.general(), a.leaf.general_width()),
        (5, 6, 44)
    );
    assert_eq!((a.leaf.fixed_contiguous(), a.leaf.fixed_width()), (3, 40));
    assert!(a.full_width_write && !a.pebs.ds && !a.pebs.usable());
    assert_eq!((a.lbr.format, a.lbr.arch), (0, None), "no LBR of any kind");
    assert!(
        !a.hybrid && a.core_type.is_none() && a.ext.is_none(),
        "{a:?}"
    );
    assert!(!a.leaf.event_available(3) && a.leaf.event_available(5));
}

/// The policy's checks, each error with its reason, and the pass-through
/// condition against a host.
#[test]
fn policy_errors() {
    let e = |p: GuestPolicy| p.checked().unwrap_err();
    assert_eq!(
        e(GuestPolicy::new(0, 1, 0)),
        PolicyError::Version { version: 0 }
    );
    assert_eq!(
        e(GuestPolicy::new(6, 1, 0)),
        PolicyError::Version { version: 6 }
    );
    assert_eq!(
        e(GuestPolicy::new(2, 0, 0)),
        PolicyError::GeneralCounters { general: 0 }
    );
    assert_eq!(
        e(GuestPolicy::new(2, 9, 0)),
        PolicyError::GeneralCounters { general: 9 }
    );
    assert_eq!(
        e(GuestPolicy::new(2, 2, 4)),
        PolicyError::FixedCounters {
            fixed: 4,
            version: 2
        }
    );
    assert_eq!(
        e(GuestPolicy::new(1, 2, 1)),
        PolicyError::FixedCounters {
            fixed: 1,
            version: 1
        }
    );
    assert_eq!(
        e(GuestPolicy {
            general_width: 31,
            ..GuestPolicy::new(2, 2, 0)
        }),
        PolicyError::Width { width: 31 }
    );
    assert!(
        GuestPolicy {
            fixed_width: 0,
            ..GuestPolicy::new(2, 2, 0)
        }
        .checked()
        .is_ok(),
        "no fixed counters, no fixed width"
    );
    assert_eq!(
        e(GuestPolicy {
            unavailable: 0x80,
            ..GuestPolicy::new(4, 2, 0)
        }),
        PolicyError::UnknownEvents { unavailable: 0x80 }
    );
    assert_eq!(
        e(GuestPolicy {
            host_counters: CounterSet::EMPTY.with(f(1)),
            ..GuestPolicy::new(2, 2, 3)
        }),
        PolicyError::HostCounterShown { counter: f(1) }
    );
    assert_eq!(
        PolicyError::HostCounterShown { counter: f(1) }.to_string(),
        "IA32_FIXED_CTR1 is the host's and one of the guest's counters"
    );
    assert_eq!(
        PolicyError::Version { version: 6 }.to_string(),
        "architectural-perfmon version 6: a guest is given 1 to 5"
    );
    let host = detect(
        &crate::model::archperf::ArchPerfModel::new(crate::model::archperf::Config::skylake()),
        &mut crate::model::archperf::ArchPerfModel::new(crate::model::archperf::Config::skylake()),
    )
    .unwrap()
    .arch_perf()
    .unwrap();
    let fits = GuestPolicy {
        full_width_writes: true,
        host_counters: CounterSet::EMPTY.with(g(3)),
        ..GuestPolicy::new(4, 3, 3)
    };
    assert_eq!(fits.fits(&host), Ok(()));
    for (p, what) in [
        (
            GuestPolicy::new(5, 3, 3),
            "the host's architectural-perfmon version is lower",
        ),
        (GuestPolicy::new(4, 5, 3), "IA32_PMC4"),
        (
            GuestPolicy {
                general_width: 40,
                ..GuestPolicy::new(4, 2, 0)
            },
            "the counter widths differ from the host's",
        ),
    ] {
        assert_eq!(p.fits(&host), Err(PolicyError::NotOnHost { what }), "{p:?}");
    }
}

//! Each of KVM's rules for an AMD guest's PMU accesses by example, the
//! CPUID the guest reads, `hardware_ctl` on an SVM host, and the policy's
//! checks.

use super::*;
use crate::arch::amd::CounterSet;
use crate::detect::{Cpuid, CpuidResult};
use crate::virt::amd::{Generation, GuestPolicy, PolicyError, WriteAnswer as W};

fn pmu(generation: Generation) -> GuestPmu {
    GuestPolicy::new(generation).checked().unwrap()
}

fn c(n: u8) -> Counter {
    Counter::new(n).unwrap()
}

fn no_such(msr: u32) -> GuestGp {
    GuestGp::NoSuchMsr { msr }
}

/// A control keeps every bit but 19, 21 and 36-63 (HostOnly and GuestOnly
/// among them), dropped without a #GP; a counter keeps 48 bits; the
/// legacy and extended addresses are one register.
#[test]
fn controls_and_counters() {
    let p = pmu(Generation::PerfCtrExtCore);
    let defined = 0xF_FFD7_FFFF;
    for msr in [0xC001_0001, 0xC001_0202] {
        assert_eq!(
            p.check_msr_write(msr, u64::MAX),
            Ok(W::Store {
                reg: GuestReg::Control(c(1)),
                value: defined
            })
        );
    }
    assert_eq!(
        p.check_msr_write(0xC001_0200, 1 << 40 | 1 << 41 | 1 << 19 | 1 << 21 | 0xC0),
        Ok(W::Store {
            reg: GuestReg::Control(c(0)),
            value: 0xC0
        }),
        "HostOnly and GuestOnly are the hypervisor's"
    );
    for msr in [0xC001_0007, 0xC001_0207] {
        assert_eq!(
            p.check_msr_write(msr, u64::MAX),
            Ok(W::Store {
                reg: GuestReg::Counter(c(3)),
                value: (1 << 48) - 1
            })
        );
        assert_eq!(
            p.check_msr_read(msr),
            Ok(ReadAnswer::Reg(GuestReg::Counter(c(3))))
        );
    }
    assert_eq!(
        p.check_msr_read(0xC001_020A),
        Ok(ReadAnswer::Reg(GuestReg::Control(c(5))))
    );
    let legacy = pmu(Generation::Legacy);
    for msr in [0xC001_0200, 0xC001_0209, 0xC001_020B] {
        assert_eq!(legacy.check_msr_write(msr, 0), Err(no_such(msr)));
        assert_eq!(legacy.check_msr_read(msr), Err(no_such(msr)));
    }
    let two = pmu(Generation::PerfMonV2 { counters: 2 });
    for msr in [0xC001_0002, 0xC001_0007, 0xC001_0204, 0xC001_020B] {
        assert_eq!(two.check_msr_write(msr, 0), Err(no_such(msr)), "{msr:#x}");
    }
}

/// PerfMonV2's registers: the status read-only (a write dropped), the
/// control's bits of no guest counter dropped, the clear and set
/// registers reading 0 and acting on the guest's counters; #GP without
/// PerfMonV2.
#[test]
fn perfmon_v2_registers() {
    let p = pmu(Generation::PerfMonV2 { counters: 3 });
    assert_eq!(p.check_msr_write(0xC000_0300, u64::MAX), Ok(W::Drop));
    assert_eq!(
        p.check_msr_read(0xC000_0300),
        Ok(ReadAnswer::Reg(GuestReg::GlobalStatus))
    );
    assert_eq!(
        p.check_msr_write(0xC000_0301, u64::MAX),
        Ok(W::Store {
            reg: GuestReg::GlobalCtl,
            value: 0b111
        })
    );
    assert_eq!(
        p.check_msr_write(0xC000_0302, u64::MAX),
        Ok(W::ClearStatus(0b111))
    );
    assert_eq!(
        p.check_msr_write(0xC000_0303, u64::MAX),
        Ok(W::SetStatus(0b111))
    );
    for msr in [0xC000_0302, 0xC000_0303] {
        assert_eq!(p.check_msr_read(msr), Ok(ReadAnswer::Value(0)));
    }
    for generation in [Generation::Legacy, Generation::PerfCtrExtCore] {
        let p = pmu(generation);
        for msr in 0xC000_0300..=0xC000_0303 {
            assert_eq!(p.check_msr_write(msr, 0), Err(no_such(msr)));
            assert_eq!(p.check_msr_read(msr), Err(no_such(msr)));
        }
    }
}

/// Intel's registers in an AMD guest: the P6 pairs read 0 and drop writes,
/// the rest #GP; IBS and the uncore #GP; `IA32_MISC_ENABLE` and
/// `IA32_DEBUGCTL` the VMM's.
#[test]
fn other_registers_in_an_amd_guest() {
    let p = pmu(Generation::PerfMonV2 { counters: 6 });
    for msr in [0xC1, 0xC2, 0x186, 0x187] {
        assert_eq!(p.check_msr_write(msr, 1), Ok(W::Drop));
        assert_eq!(p.check_msr_read(msr), Ok(ReadAnswer::Value(0)));
    }
    for msr in [
        0xC3,
        0x188,
        0x309,
        0x38D,
        0x38F,
        0x345,
        0x3F1,
        0x4C1,
        0x600,
        0xC001_1030,
        0xC001_0230,
    ] {
        assert_eq!(p.check_msr_write(msr, 0), Err(no_such(msr)), "{msr:#x}");
        assert_eq!(p.check_msr_read(msr), Err(no_such(msr)));
    }
    for msr in [0x1A0, 0x1D9, 0x10, 0xC001_0010] {
        assert_eq!(p.check_msr_write(msr, 0), Ok(W::NotPmu));
        assert_eq!(p.check_msr_read(msr), Ok(ReadAnswer::NotPmu));
    }
}

/// RDPMC: ECX below the guest's count (no type bits on AMD), CR4.PCE at
/// CPL > 0, 48 bits.
#[test]
fn rdpmc_forms() {
    let p = pmu(Generation::Legacy);
    let a = p.check_rdpmc(3, false, 0).unwrap();
    assert_eq!((a.counter, a.mask), (c(3), (1 << 48) - 1));
    for ecx in [4, 6, 1 << 30, 1 << 31, 1 << 30 | 1] {
        assert_eq!(
            p.check_rdpmc(ecx, true, 0),
            Err(GuestGp::RdpmcIndex { ecx })
        );
    }
    assert_eq!(p.check_rdpmc(0, false, 3), Err(GuestGp::RdpmcNotAllowed));
    assert!(p.check_rdpmc(0, true, 3).is_ok());
}

/// The guest's CPUID: PerfCtrExtCore and PerfMonV2 with its count from the
/// policy, nothing of the uncore, IBS, LBR or Intel's PMU; detection
/// inside the guest finds the policy's PMU.
#[test]
fn the_guest_cpuid_is_the_policy() {
    let host = CpuidResult {
        eax: 0xFFFF_FFFF,
        ebx: 0xFFFF_FFFF,
        ecx: 0xFFFF_FFFF,
        edx: 0xFFFF_FFFF,
    };
    let v2 = pmu(Generation::PerfMonV2 { counters: 5 });
    let ext = v2.cpuid(0x8000_0001, 0, host).ecx;
    assert_eq!(ext & (1 << 10 | 1 << 23 | 1 << 24 | 1 << 28), 1 << 23);
    assert_eq!(
        v2.cpuid(0x8000_0022, 0, host),
        CpuidResult {
            eax: 1,
            ebx: 5,
            ecx: 0,
            edx: 0
        }
    );
    assert_eq!(v2.cpuid(0x0A, 0, host), crate::virt::x86::ZERO);
    assert_eq!(v2.cpuid(1, 0, host).ecx & 1 << 15, 0);
    assert_eq!(v2.cpuid(1, 0, host).edx & 1 << 21, 0);
    let legacy = pmu(Generation::Legacy);
    assert_eq!(legacy.cpuid(0x8000_0001, 0, host).ecx & 1 << 23, 0);
    assert_eq!(legacy.cpuid(0x8000_0022, 0, host), crate::virt::x86::ZERO);

    /// The guest's CPUID on a Zen 4 host.
    struct Guest(GuestPmu);
    impl Cpuid for Guest {
        fn cpuid(&self, leaf: u32, subleaf: u32) -> CpuidResult {
            let host = crate::model::amd::Config::zen4().cpuid(leaf, subleaf);
            self.0.cpuid(leaf, subleaf, host)
        }
    }
    let mut vpmu = crate::model::amd::AmdModel::new(crate::model::amd::Config::zen4());
    for (generation, counters) in [
        (Generation::Legacy, 4),
        (Generation::PerfCtrExtCore, 6),
        (Generation::PerfMonV2 { counters: 3 }, 3),
    ] {
        let guest = Guest(pmu(generation));
        let d = crate::detect::detect(&guest, &mut vpmu).unwrap();
        let amd = d.amd().unwrap();
        assert_eq!(amd.counters(), counters, "{generation:?}");
    }
}

/// A control as the hardware runs it for the guest counts in guest mode
/// only (GuestOnly set, HostOnly clear), whatever the guest wrote: on a
/// Zen 4 with SVM enabled, the host's events do not reach it.
#[test]
fn the_hardware_control_counts_the_guest_only() {
    use crate::access::MsrAccess;
    use crate::model::amd::{AmdModel, Config, Event};
    let p = pmu(Generation::PerfMonV2 { counters: 6 });
    let Ok(W::Store { value, .. }) =
        p.check_msr_write(0xC001_0200, 0xC0 | 1 << 16 | 1 << 17 | 1 << 22 | 1 << 41)
    else {
        panic!("a control write");
    };
    let hw = p.hardware_ctl(value);
    assert_eq!(hw, 0xC0 | 1 << 16 | 1 << 17 | 1 << 22 | 1 << 40);
    let mut m = AmdModel::new(Config::zen4());
    m.set_svme(true);
    m.write_msr(0xC001_0200, hw).unwrap();
    m.inject(Event::new(0xC0, 0, 100));
    assert_eq!(m.counter(0), 0, "the host's events");
    m.inject(Event::new(0xC0, 0, 7).in_guest());
    assert_eq!(m.counter(0), 7, "the guest's");
}

/// The policy's checks and the pass-through condition.
#[test]
fn policy_errors() {
    for counters in [0, 7] {
        assert_eq!(
            GuestPolicy::new(Generation::PerfMonV2 { counters }).checked(),
            Err(PolicyError::Counters { counters })
        );
    }
    let shown = GuestPolicy {
        host_counters: CounterSet::EMPTY.with(c(3)),
        ..GuestPolicy::new(Generation::Legacy)
    };
    assert_eq!(
        shown.checked(),
        Err(PolicyError::HostCounterShown { counter: 3 })
    );
    assert_eq!(
        PolicyError::HostCounterShown { counter: 3 }.to_string(),
        "PERF_CTR3 is the host's and one of the guest's counters"
    );
    let zen2 = crate::model::amd::AmdModel::new(crate::model::amd::Config::zen2());
    let host = crate::detect::detect(&zen2, &mut zen2.clone())
        .unwrap()
        .amd()
        .unwrap();
    let ok = GuestPolicy {
        host_counters: CounterSet::EMPTY.with(c(4)).with(c(5)),
        ..GuestPolicy::new(Generation::Legacy)
    };
    assert_eq!(ok.fits(&host), Ok(()));
    assert_eq!(
        GuestPolicy::new(Generation::PerfMonV2 { counters: 4 }).fits(&host),
        Err(PolicyError::NotOnHost {
            what: "the host has no PerfMonV2"
        })
    );
}

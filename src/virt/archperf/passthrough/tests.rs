//! The pass-through map: each rule of the module table, on hosts the
//! models describe (a Skylake and an Ice Lake), and its consistency with
//! the guest checks.

use std::vec::Vec;

use super::*;
use crate::arch::archperf::{IA32_FIXED_CTR0, IA32_PERFEVTSEL0, IA32_PMC0};
use crate::detect::detect;
use crate::model::archperf::{ArchPerfModel, Config};
use crate::virt::archperf::{GuestPolicy, ReadAnswer, WriteAnswer};
use crate::virt::tests::passthrough::passing;

fn host(config: Config) -> ArchPerfCpu {
    detect(&ArchPerfModel::new(config), &mut ArchPerfModel::new(config))
        .unwrap()
        .arch_perf()
        .unwrap()
}

fn g(n: u8) -> Counter {
    Counter::general(n).unwrap()
}

fn f(n: u8) -> Counter {
    Counter::fixed(n).unwrap()
}

/// Every counter of the Skylake model (4 general, 3 fixed, full-width
/// writes) is the guest's: its counters and the global registers pass,
/// RDPMC does not exit; the selects and everything else trap.
#[test]
fn a_guest_with_every_counter_passes_its_counters_and_the_globals() {
    let host = host(Config::skylake());
    assert_eq!(host.leaf.general(), 4, "the model's general counters");
    let p = GuestPolicy {
        full_width_writes: true,
        ..GuestPolicy::new(4, 4, 3)
    };
    let pass = p.checked().unwrap().pass_through(&host).unwrap();
    let passed: Vec<u32> = pass.passed().map(|(m, _)| m).collect();
    assert_eq!(
        passed,
        [
            0xC1, 0x4C1, 0xC2, 0x4C2, 0xC3, 0x4C3, 0xC4, 0x4C4, 0x309, 0x30A, 0x30B, 0x38E, 0x38F
        ]
    );
    assert!(!pass.rdpmc_exits());
    assert!(pass.global_ctrl_passed());
    let trap = |why| Some(MsrRule::both(Intercept::Trap, why));
    assert_eq!(pass.rule(IA32_PERFEVTSEL0), trap(Why::Checked));
    assert_eq!(pass.rule(0x38D), trap(Why::Checked));
    assert_eq!(pass.rule(0x345), trap(Why::Other));
    assert_eq!(pass.rule(0x391), trap(Why::Other));
    assert_eq!(pass.rule(0x4C5), trap(Why::NotTheGuests));
    assert_eq!(pass.rule(0x30C), trap(Why::NotTheGuests));
    assert_eq!(
        pass.rule(0x38F),
        Some(MsrRule::both(Intercept::Pass, Why::GuestGlobal))
    );
    let global = |read, write| {
        Some(MsrRule {
            read,
            write,
            why: Why::GuestGlobal,
        })
    };
    assert_eq!(pass.rule(0x38E), global(Intercept::Pass, Intercept::Trap));
    assert_eq!(pass.rule(0x390), global(Intercept::Trap, Intercept::Trap));
    assert_eq!(pass.rule(0x10), None, "the TSC is not the PMU's");
}

/// The host keeps general counter 3 and fixed counter 2: their MSRs, the
/// global registers and RDPMC trap; without full-width writes the
/// `IA32_A_PMCx` aliases trap too.
#[test]
fn counters_the_host_keeps_keep_the_globals_and_rdpmc_trapped() {
    let host = host(Config::skylake());
    let p = GuestPolicy {
        host_counters: CounterSet::EMPTY.with(g(3)).with(f(2)),
        ..GuestPolicy::new(4, 3, 2)
    };
    let pass = p.checked().unwrap().pass_through(&host).unwrap();
    let passed: Vec<u32> = pass.passed().map(|(m, _)| m).collect();
    assert_eq!(passed, [0xC1, 0xC2, 0xC3, 0x309, 0x30A]);
    assert!(pass.rdpmc_exits());
    assert!(!pass.global_ctrl_passed());
    let trap = |why| Some(MsrRule::both(Intercept::Trap, why));
    for msr in [IA32_PMC0 + 3, IA32_FIXED_CTR0 + 2, 0x4C1] {
        assert_eq!(pass.rule(msr), trap(Why::NotTheGuests), "{msr:#x}");
    }
    for msr in [0x38E, 0x38F, 0x390] {
        assert_eq!(pass.rule(msr), trap(Why::SharedGlobal), "{msr:#x}");
    }
}

/// An Ice Lake has a fourth fixed counter, which no guest is offered: the
/// guest never has every counter, so RDPMC (whose index 4000_0003H would
/// read it) and the global registers trap.
#[test]
fn a_fixed_counter_no_guest_has_keeps_rdpmc_trapped() {
    let host = host(Config::icelake());
    let p = GuestPolicy {
        full_width_writes: true,
        ..GuestPolicy::new(4, host.leaf.general(), 3)
    };
    let pass = p.checked().unwrap().pass_through(&host).unwrap();
    assert!(pass.rdpmc_exits());
    assert!(!pass.global_ctrl_passed());
}

/// A guest whose counters cannot run on the host's is refused, as
/// `GuestPolicy::fits` refuses it.
#[test]
fn a_guest_that_does_not_fit_the_host_is_refused() {
    let host = host(Config::skylake());
    let p = GuestPolicy {
        general_width: 40,
        ..GuestPolicy::new(4, 2, 0)
    };
    assert_eq!(
        p.checked().unwrap().pass_through(&host),
        Err(PolicyError::NotOnHost {
            what: "the counter widths differ from the host's"
        })
    );
}

/// For several guests: every MSR of the PMU ranges has a rule; every MSR
/// that passes is one the checks give the guest (its reads a register of
/// the guest, a write of 0 accepted as a store), never a counter of the
/// host's or one the guest lacks; and the passed list is exactly the MSRs
/// whose rule passes.
#[test]
fn every_passed_msr_is_a_register_the_checks_give_the_guest() {
    let skylake = host(Config::skylake());
    let icelake = host(Config::icelake());
    let cases = [
        (GuestPolicy::new(4, 4, 3), &skylake),
        (
            GuestPolicy {
                full_width_writes: true,
                ..GuestPolicy::new(4, 4, 3)
            },
            &skylake,
        ),
        (
            GuestPolicy {
                host_counters: CounterSet::EMPTY.with(g(2)).with(g(3)),
                ..GuestPolicy::new(2, 2, 3)
            },
            &skylake,
        ),
        (GuestPolicy::new(1, 4, 0), &skylake),
        (
            GuestPolicy {
                full_width_writes: true,
                host_counters: CounterSet::EMPTY.with(g(7)).with(f(3)),
                ..GuestPolicy::new(4, 6, 3)
            },
            &icelake,
        ),
    ];
    for (p, host) in cases {
        let pmu = p.checked().unwrap();
        let pass = pmu.pass_through(host).unwrap();
        let what = std::format!("{p:?}");
        let passing = passing(
            &what,
            |m| pass.rule(m),
            |m| matches!(pmu.check_msr_read(m), Ok(ReadAnswer::Reg(_))),
            |m| {
                matches!(
                    pmu.check_msr_write(m, 0),
                    Ok(WriteAnswer::Store { .. } | WriteAnswer::ClearStatus(_))
                )
            },
        );
        for &msr in &passing {
            if let PmuMsr::Pmc(n) | PmuMsr::FullWidthPmc(n) = classify(msr) {
                assert!(pmu.counters().contains(g(n)), "{msr:#x}");
            }
            if let PmuMsr::FixedCounter(n) = classify(msr) {
                assert!(pmu.counters().contains(f(n)), "{msr:#x}");
            }
        }
        let mut listed: Vec<u32> = pass.passed().map(|(m, _)| m).collect();
        listed.sort_unstable();
        assert_eq!(passing, listed, "{p:?}");
        for c in p.host_counters.iter() {
            for msr in [c.msr(false), c.msr(true)] {
                assert_eq!(pass.rule(msr).map(|r| r.read), Some(Intercept::Trap));
            }
        }
    }
}

/// The VMCS values: the guest's enables of its own counters beside the
/// host's running counters at entry; the host's alone at exit; neither
/// side's bits in the other's place.
#[test]
fn the_global_ctrl_values_keep_each_side_to_itself() {
    let host = host(Config::skylake());
    let p = GuestPolicy {
        host_counters: CounterSet::EMPTY.with(g(3)),
        ..GuestPolicy::new(4, 3, 3)
    };
    let pass = p.checked().unwrap().pass_through(&host).unwrap();
    let host_running = CounterSet::EMPTY.with(g(3)).with(g(0));
    // The guest enables PMC0 and fixed 1, and (reserved for it) PMC3.
    let v = global_ctrl_values(&pass, 1 | 1 << 33 | 1 << 3, host_running);
    assert_eq!(v.host, 1 << 3, "PMC0 is the guest's: stopped outside it");
    assert_eq!(v.guest, 1 << 3 | 1 | 1 << 33);
    let v = global_ctrl_values(&pass, 0, CounterSet::EMPTY);
    assert_eq!(v, GlobalCtrlValues { guest: 0, host: 0 });
    assert_eq!(
        (
            VM_ENTRY_LOAD_IA32_PERF_GLOBAL_CTRL,
            VM_EXIT_LOAD_IA32_PERF_GLOBAL_CTRL,
            VM_EXIT_SAVE_IA32_PERF_GLOBAL_CTRL
        ),
        (0x2000, 0x1000, 0x4000_0000)
    );
}

/// The VMX MSR bitmap's positions (SDM Vol. 3C, "MSR-Bitmap Address").
#[test]
fn the_msr_bitmap_positions() {
    assert_eq!(msr_bitmap_bits(0x38F), Some((0x71, 0x871, 7)));
    assert_eq!(msr_bitmap_bits(0xC1), Some((0x18, 0x818, 1)));
    assert_eq!(msr_bitmap_bits(0x1FFF), Some((0x3FF, 0xBFF, 7)));
    assert_eq!(msr_bitmap_bits(0xC000_0080), Some((0x410, 0xC10, 0)));
    assert_eq!(msr_bitmap_bits(0xC001_0004), None);
    assert_eq!(msr_bitmap_bits(0x2000), None);
}

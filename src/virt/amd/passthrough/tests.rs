//! The AMD pass-through map: each rule of the module table on Zen 2 and
//! Zen 4 models, its consistency with the guest checks, and the MSR
//! permission map's positions.

use std::vec::Vec;

use super::*;
use crate::detect::detect;
use crate::model::amd::{AmdModel, Config};
use crate::virt::amd::{Generation, GuestPolicy, ReadAnswer, WriteAnswer};
use crate::virt::tests::passthrough::passing;

fn host(config: Config) -> AmdCpu {
    let m = AmdModel::new(config);
    detect(&m, &mut m.clone()).unwrap().amd().unwrap()
}

fn c(n: u8) -> Counter {
    Counter::new(n).unwrap()
}

/// A PerfMonV2 guest with all six counters of a Zen 4: its counters
/// through both addresses, the global control, the status's reads and the
/// clear and set registers' writes pass; RDPMC is not intercepted; the
/// controls are.
#[test]
fn a_guest_with_every_counter_passes_its_counters_and_the_globals() {
    let host = host(Config::zen4());
    let pmu = GuestPolicy::new(Generation::PerfMonV2 { counters: 6 })
        .checked()
        .unwrap();
    let pass = pmu.pass_through(&host).unwrap();
    let passed: Vec<u32> = pass.passed().map(|(m, _)| m).collect();
    assert_eq!(
        passed,
        [
            0xC001_0004,
            0xC001_0201,
            0xC001_0005,
            0xC001_0203,
            0xC001_0006,
            0xC001_0205,
            0xC001_0007,
            0xC001_0207,
            0xC001_0209,
            0xC001_020B,
            0xC000_0300,
            0xC000_0301,
            0xC000_0302,
            0xC000_0303
        ]
    );
    assert!(!pass.rdpmc_intercepted());
    let rule = |read, write, why| Some(MsrRule { read, write, why });
    let (p, t) = (Intercept::Pass, Intercept::Trap);
    assert_eq!(pass.rule(0xC001_0200), rule(t, t, Why::Checked));
    assert_eq!(pass.rule(0xC001_0000), rule(t, t, Why::Checked));
    assert_eq!(pass.rule(0xC000_0300), rule(p, t, Why::GuestGlobal));
    assert_eq!(pass.rule(0xC000_0301), rule(p, p, Why::GuestGlobal));
    assert_eq!(pass.rule(0xC000_0303), rule(t, p, Why::GuestGlobal));
    assert_eq!(pass.rule(0xC001_1030), rule(t, t, Why::Other), "IBS");
}

/// The host keeps counters 4 and 5: their registers, the globals and
/// RDPMC are intercepted.
#[test]
fn counters_the_host_keeps_keep_the_globals_and_rdpmc_intercepted() {
    let host = host(Config::zen4());
    let pmu = GuestPolicy {
        host_counters: CounterSet::EMPTY.with(c(4)).with(c(5)),
        ..GuestPolicy::new(Generation::PerfMonV2 { counters: 4 })
    }
    .checked()
    .unwrap();
    let pass = pmu.pass_through(&host).unwrap();
    assert!(pass.rdpmc_intercepted());
    for msr in [
        0xC001_0209,
        0xC001_020B,
        0xC000_0300,
        0xC000_0301,
        0xC000_0302,
    ] {
        let r = pass.rule(msr).unwrap();
        assert_eq!(
            (r.read, r.write),
            (Intercept::Trap, Intercept::Trap),
            "{msr:#x}"
        );
    }
}

/// A legacy guest (four counters at the legacy addresses) on a Zen 2: the
/// extended addresses are not its; a PerfMonV2 guest does not fit there.
#[test]
fn a_legacy_guest_passes_the_legacy_addresses_only() {
    let host = host(Config::zen2());
    let pmu = GuestPolicy {
        host_counters: CounterSet::EMPTY.with(c(4)).with(c(5)),
        ..GuestPolicy::new(Generation::Legacy)
    }
    .checked()
    .unwrap();
    let pass = pmu.pass_through(&host).unwrap();
    let passed: Vec<u32> = pass.passed().map(|(m, _)| m).collect();
    assert_eq!(passed, [0xC001_0004, 0xC001_0005, 0xC001_0006, 0xC001_0007]);
    assert_eq!(
        pass.rule(0xC001_0201).map(|r| r.why),
        Some(Why::NotTheGuests)
    );
    assert_eq!(
        GuestPolicy::new(Generation::PerfMonV2 { counters: 4 })
            .checked()
            .unwrap()
            .pass_through(&host),
        Err(PolicyError::NotOnHost {
            what: "the host has no PerfMonV2"
        })
    );
}

/// For several guests: every MSR of the PMU ranges has a rule, each
/// direction that passes is one the checks accept as the guest's register
/// (a read of it, a write stored, cleared or set), never a counter of the
/// host's, and the passed list is exactly the MSRs with a passing
/// direction.
#[test]
fn every_passed_msr_is_a_register_the_checks_give_the_guest() {
    let zen2 = host(Config::zen2());
    let zen4 = host(Config::zen4());
    let cases = [
        (GuestPolicy::new(Generation::Legacy), &zen2),
        (GuestPolicy::new(Generation::PerfCtrExtCore), &zen2),
        (
            GuestPolicy::new(Generation::PerfMonV2 { counters: 6 }),
            &zen4,
        ),
        (
            GuestPolicy {
                host_counters: CounterSet::EMPTY.with(c(5)),
                ..GuestPolicy::new(Generation::PerfMonV2 { counters: 5 })
            },
            &zen4,
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
                    Ok(WriteAnswer::Store { .. }
                        | WriteAnswer::ClearStatus(_)
                        | WriteAnswer::SetStatus(_))
                )
            },
        );
        for &msr in &passing {
            if let PmuMsr::LegacyCtr(n) | PmuMsr::CoreCtr(n) = classify(msr) {
                assert!(pmu.counters().contains(c(n)), "{msr:#x}");
                assert!(!p.host_counters.contains(c(n)), "{msr:#x}");
            }
        }
        let mut listed: Vec<u32> = pass.passed().map(|(m, _)| m).collect();
        listed.sort_unstable();
        assert_eq!(passing, listed, "{p:?}");
    }
}

/// The MSR permission map's positions (AMD64 APM Vol. 2, "MSR
/// Intercepts"): two bits per MSR, three vectors of 2 KiB.
#[test]
fn the_permission_map_positions() {
    assert_eq!(msrpm_bits(0x0000_0000), Some((0, 0)));
    assert_eq!(msrpm_bits(0x0000_0003), Some((0, 6)));
    assert_eq!(msrpm_bits(0x0000_1FFF), Some((0x7FF, 6)));
    assert_eq!(msrpm_bits(0xC000_0300), Some((0x800 + 0xC0, 0)));
    assert_eq!(msrpm_bits(0xC000_0303), Some((0x800 + 0xC0, 6)));
    assert_eq!(msrpm_bits(0xC001_0004), Some((0x1001, 0)));
    assert_eq!(msrpm_bits(0xC001_0201), Some((0x1000 + 0x80, 2)));
    assert_eq!(msrpm_bits(0xC001_2000), None);
    assert_eq!(msrpm_bits(0x0000_2000), None);
}

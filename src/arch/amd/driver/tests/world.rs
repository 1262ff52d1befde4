//! The pass-through world switch on the AMD model (a Zen 4: six counters,
//! PerfMonV2; SVM enabled in the model): the register traffic of each
//! entry and exit asserted exactly, access by access, the guest's and the
//! host's counts exact across switches, the guest's overflow status
//! acknowledged for the host at exit and restored at entry, and the
//! refusals. All counts here come from the model.

use super::*;
use crate::arch::amd::{PERF_CNTR_GLOBAL_CTL, PERF_CNTR_GLOBAL_STATUS_CLR};

const GUEST_ONLY: u64 = 1 << 40;
const HOST_ONLY: u64 = 1 << 41;
/// USR, OS, INT, EN.
const USR_OS_EN: u64 = 1 << 16 | 1 << 17 | 1 << 22;
const INT: u64 = 1 << 20;
const STATUS_SET: u32 = 0xC000_0303;
const GUEST: u64 = 0b1111;
const HOST: u64 = 1 << 5;

fn w(msr: u32, value: u64) -> Access {
    Access::WriteMsr { msr, value }
}

fn ctl(n: u32) -> u32 {
    PERF_CTL0 + 2 * n
}

fn ctr(n: u32) -> u32 {
    PERF_CTR0 + 2 * n
}

/// A guest counting retired instructions on its four counters (counter 3
/// asks for HostOnly, which the entry drops), every one enabled.
fn guest() -> GuestRegisters {
    let mut g = GuestRegisters::CLEAR;
    for n in 0..4 {
        g.ctl[n] = u64::from(INSTRUCTIONS) | USR_OS_EN;
    }
    g.ctl[3] |= HOST_ONLY;
    g.ctr = [10, 20, 30, 40, 0, 0];
    g.global_ctl = 0b11_1111;
    g
}

/// What the entry writes for `g`'s controls.
fn hardware(g: &GuestRegisters, n: usize) -> u64 {
    (g.ctl[n] | GUEST_ONLY) & !HOST_ONLY
}

fn guest_events<O: Owner>(d: &mut Amd<'_, O>, n: u64) {
    model(d).inject(Event::new(INSTRUCTIONS, 0, n).in_guest());
}

#[test]
fn each_entry_and_exit_costs_exactly_what_the_table_says() {
    let pmu = crate::testing::amd_pmu();
    let (mut d, c) = driver!(&pmu, Config::zen4());
    model(&mut d).set_svme(true);
    // The host counts its own instructions on counter 5 (HostOnly).
    let host =
        c.c5.unwrap()
            .configure(
                &mut d,
                &CounterConfig::counting(spec("instructions").host_only()),
            )
            .unwrap()
            .enable(&mut d)
            .unwrap();
    let mut g = guest();
    assert_eq!(
        d.enter_guest(&g).unwrap_err(),
        Error::Config(ConfigError::GuestState),
        "nothing reserved"
    );
    d.msr().clear();
    d.reserve_guest(CounterSet::first(4)).unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 0, 0), "reserving");
    assert_eq!(d.guest_counters(), CounterSet::first(4));
    assert_eq!(
        d.reserve_guest(CounterSet::first(1)).unwrap_err(),
        Error::Config(ConfigError::GuestState)
    );
    let c0 = match c
        .c0
        .configure(&mut d, &CounterConfig::counting(spec("cycles")))
    {
        Ok(_) => panic!("a host handle configured a guest's counter"),
        Err(f) => {
            assert_eq!(f.error, Error::Config(ConfigError::CounterClaimed(0)));
            f.counter
        }
    };
    let mut g2 = g;
    assert_eq!(
        d.exit_guest(&mut g2, false).unwrap_err(),
        Error::Config(ConfigError::GuestState),
        "no guest loaded"
    );

    // A fresh guest: four controls, four values, then PerfCntrGlobalCtl
    // last (the host's bit and the guest's four).
    let global = d.enter_guest(&g).unwrap();
    assert_eq!(global, HOST | GUEST, "the guest's bits beyond 3 dropped");
    let mut want: Vec<Access> = (0..4)
        .map(|n| w(ctl(n), hardware(&g, n as usize)))
        .collect();
    want.extend((0..4).map(|n| w(ctr(n), 10 * (u64::from(n) + 1))));
    want.push(w(PERF_CNTR_GLOBAL_CTL, HOST | GUEST));
    assert_eq!(d.msr().log(), &want[..], "first entry");
    assert_eq!(d.msr().take_counts(), counts(0, 9, 0));
    assert_eq!(
        d.enter_guest(&g).unwrap_err(),
        Error::Config(ConfigError::GuestState),
        "loaded already"
    );
    assert_eq!(
        d.release_guest().unwrap_err(),
        Error::Config(ConfigError::GuestState),
        "released while loaded"
    );
    d.msr().clear();
    // The guest runs 100 instructions, the host (before VMRUN and after
    // #VMEXIT) 7: GuestOnly keeps the host's out of the guest's counters,
    // HostOnly the guest's out of the host's.
    guest_events(&mut d, 100);
    inject(&mut d, INSTRUCTIONS, 7);

    // Exit: PerfCntrGlobalCtl first (the host's bit only), the status,
    // four values.
    assert_eq!(d.exit_guest(&mut g, false).unwrap(), CounterSet::EMPTY);
    let log = d.msr().log().to_vec();
    assert_eq!(log[0], w(PERF_CNTR_GLOBAL_CTL, HOST));
    assert!(matches!(
        log[1],
        Access::ReadMsr {
            msr: PERF_CNTR_GLOBAL_STATUS,
            value: 0
        }
    ));
    for n in 0..4u32 {
        assert_eq!(
            log[2 + n as usize],
            Access::ReadMsr {
                msr: ctr(n),
                value: 10 * (u64::from(n) + 1) + 100
            }
        );
    }
    assert_eq!(d.msr().take_counts(), counts(5, 1, 0), "exit");
    assert_eq!(g.ctr, [110, 120, 130, 140, 0, 0]);
    // The host runs on: its counter counts only its own.
    inject(&mut d, INSTRUCTIONS, 3);
    guest_events(&mut d, 1000);
    assert_eq!(model(&mut d).counter(0), 110, "stopped while the host runs");
    assert_eq!(host.read(&mut d).unwrap(), 10);
    d.msr().clear();

    // Entry again, controls unchanged: values and PerfCntrGlobalCtl.
    d.enter_guest(&g).unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 5, 0), "re-entry");

    // An overflow of the guest's counter 1 (INT set by the guest).
    d.exit_guest(&mut g, false).unwrap();
    g.ctl[1] |= INT;
    g.ctr[1] = (1 << 48) - 5;
    d.msr().clear();
    d.enter_guest(&g).unwrap();
    assert_eq!(
        d.msr().take_counts(),
        counts(0, 6, 0),
        "one control changed"
    );
    guest_events(&mut d, 10);
    assert_eq!(
        d.exit_guest(&mut g, false).unwrap(),
        CounterSet::first(2).without(Counter::new(0).unwrap())
    );
    let log = d.msr().log().to_vec();
    assert_eq!(log[2], w(PERF_CNTR_GLOBAL_STATUS_CLR, 0b10), "acknowledged");
    assert_eq!(d.msr().take_counts(), counts(5, 2, 0), "exit with status");
    assert_eq!(g.status.bits(), 0b10);
    assert_eq!(g.ctr[1], 5);
    assert_eq!(
        model(&mut d).read_msr(PERF_CNTR_GLOBAL_STATUS).unwrap(),
        0,
        "the host sees no status of the guest's"
    );
    // Its status comes back at entry, and is not new at the next exit.
    d.enter_guest(&g).unwrap();
    assert_eq!(d.msr().log()[4], w(STATUS_SET, 0b10));
    assert_eq!(d.msr().take_counts(), counts(0, 6, 0), "entry with status");
    assert_eq!(
        model(&mut d).read_msr(PERF_CNTR_GLOBAL_STATUS).unwrap(),
        0b10
    );
    assert_eq!(d.exit_guest(&mut g, false).unwrap(), CounterSet::EMPTY);
    assert_eq!(d.msr().take_counts(), counts(5, 2, 0));

    // Released: controls and values zeroed; the host claims counter 0.
    d.release_guest().unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 8, 0), "release");
    for n in 0..4 {
        assert_eq!(model(&mut d).control(n), 0);
        assert_eq!(model(&mut d).counter(n), 0);
    }
    let c0 = c0
        .configure(&mut d, &CounterConfig::counting(spec("cycles")))
        .unwrap();
    assert_eq!(host.read(&mut d).unwrap(), 10);
    let c0 = c0.release(&mut d).unwrap();
    let host = host.halt(&mut d).unwrap().release(&mut d).unwrap();
    let _ = d.give_back(Counters {
        c0,
        c5: Some(host),
        ..c
    });
}

/// The bound: at most 2 accesses per counter in use + 3, for every
/// guest size, on a first entry (every control written) and an exit with
/// status.
#[test]
fn the_bound_holds_for_every_guest_size() {
    for n in 1..=6u8 {
        let pmu = crate::testing::amd_pmu();
        let (mut d, c) = driver!(&pmu, Config::zen4());
        model(&mut d).set_svme(true);
        d.reserve_guest(CounterSet::first(n)).unwrap();
        let mut g = GuestRegisters::CLEAR;
        for i in 0..usize::from(n) {
            g.ctl[i] = u64::from(INSTRUCTIONS) | USR_OS_EN | INT;
            g.ctr[i] = (1 << 48) - 1;
        }
        g.global_ctl = CounterSet::first(n).bits();
        d.msr().clear();
        d.enter_guest(&g).unwrap();
        let entry = d.msr().take_counts();
        assert_eq!(entry, counts(0, 2 * u32::from(n) + 1, 0));
        guest_events(&mut d, 1);
        assert_eq!(d.exit_guest(&mut g, false).unwrap(), CounterSet::first(n));
        let exit = d.msr().take_counts();
        assert_eq!(exit, counts(u32::from(n) + 1, 2, 0));
        let bound = 2 * u32::from(n) + 3;
        for t in [entry, exit] {
            assert!(
                t.msr_reads + t.msr_writes + t.rdpmc <= bound,
                "{n} counters: {t:?}"
            );
        }
        d.msr().clear();
        d.enter_guest(&g).unwrap();
        assert_eq!(d.msr().take_counts(), counts(0, u32::from(n) + 2, 0));
        // A guest that writes PerfCntrGlobalCtl without an exit: its
        // enables read back first.
        model(&mut d).write_msr(PERF_CNTR_GLOBAL_CTL, 0b1).unwrap();
        d.exit_guest(&mut g, true).unwrap();
        assert_eq!(g.global_ctl, 0b1);
        assert_eq!(d.msr().take_counts(), counts(u32::from(n) + 2, 2, 0));
        d.release_guest().unwrap();
        let _ = d.give_back(c);
    }
}

#[test]
fn refusals() {
    let pmu = crate::testing::amd_pmu();
    let (mut d, c) = driver!(&pmu, Config::zen2());
    assert_eq!(
        d.reserve_guest(CounterSet::first(2)).unwrap_err(),
        Error::Config(ConfigError::GuestNeedsPerfMonV2)
    );
    let _ = d.give_back(c);
    let pmu = crate::testing::amd_pmu();
    let (mut d, c) = driver!(&pmu, Config::zen4());
    assert_eq!(
        d.reserve_guest(CounterSet::EMPTY).unwrap_err(),
        Error::Config(ConfigError::GuestState)
    );
    let c1 =
        c.c1.configure(&mut d, &CounterConfig::counting(spec("cycles")))
            .unwrap();
    assert_eq!(
        d.reserve_guest(CounterSet::first(2)).unwrap_err(),
        Error::Config(ConfigError::CounterClaimed(1))
    );
    assert_eq!(d.guest_counters(), CounterSet::EMPTY);
    let c1 = c1.release(&mut d).unwrap();
    assert!(
        ConfigError::GuestNeedsPerfMonV2
            .to_string()
            .contains("PerfMonV2")
    );
    let _ = d.give_back(Counters { c1, ..c });
}

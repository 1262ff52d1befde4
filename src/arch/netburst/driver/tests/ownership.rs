//! One physical PMU, one owner: what a second owner, a second driver of a
//! logical processor, or a stale DS save area would have done, refused with
//! a clear error and no register access. (Resetting an owner flag, a second
//! package value made in safe code, a token given back claimed and a shared
//! DS area do not compile: `tests/compile_fail.rs`.)

use std::boxed::Box;
use std::sync::Mutex;

use super::package::lp_driver;
use super::*;
use crate::arch::netburst::cccr::CccrValue;
use crate::arch::netburst::ds::{DsArea, PebsArea};
use crate::arch::netburst::{IA32_DS_AREA, MSR_PEBS_ENABLE};

fn l1_miss_pebs() -> CounterConfig {
    let n = SampleAfter::new(5, overflow_rule()).unwrap();
    CounterConfig::counting(spec("replay_event:NBOGUS:L1_LD_MISS:k"), Escr::CruEscr2).pebs(n, 1)
}

/// Reproduction 3: two drivers for logical processor T0 of one package.
/// The second is refused before it touches a register, and the first one's
/// claims stand.
#[test]
fn a_second_driver_for_one_logical_processor_is_refused() {
    use LogicalProcessor::{T0, T1};
    crate::owner!(Cpu0);
    crate::owner!(Cpu0Again);
    crate::owner!(Both);
    let model = Mutex::new(NetBurstModel::new(Config::prescott_ht()));
    let package = crate::testing::netburst_pmu();
    let (mut a, ca) = lp_driver::<Cpu0>(T0, &model, &package);
    let c0 = ca.c0.configure(&mut a, &running()).unwrap();
    let m = NetBurstModel::new(Config::prescott_ht());
    let mut twin = Recording::<_, 64>::new(m.clone());
    let info = cpu(&m);
    let Err(InitError::LogicalProcessorTaken { lp: T0 }) =
        NetBurstDriver::<Cpu0Again, _>::take_for(T0, &mut twin, &info, &package)
    else {
        panic!("a second driver for T0")
    };
    let Err(InitError::LogicalProcessorTaken { lp: T0 }) =
        NetBurstDriver::<Both, _>::take(&mut twin, &info, &package)
    else {
        panic!("a driver of both logical processors beside T0's")
    };
    assert_eq!(twin.take_counts(), counts(0, 0, 0), "no register touched");
    assert_eq!(
        package.claimed_counters(),
        CounterSet::EMPTY.with(Counter::BpuCounter0)
    );
    assert!(package.is_served(T0) && !package.is_served(T1));
    // The refused owner types are free again: T1 can be served by one.
    let (b, cb) = lp_driver::<Cpu0Again>(T1, &model, &package);
    let _ = b.give_back(cb);
    let c0 = c0.release(&mut a).unwrap();
    let _ = a.give_back(Counters { c0, ..ca });
    assert!(!package.is_served(T0));
}

/// Reproduction 1 at run time: the owner is free only once the driver is
/// given back with its tokens, so a handle of the first driver can never
/// meet a second driver of the same owner. (Clearing the flag from safe code
/// does not compile; a claimed token cannot be handed back.)
#[test]
fn an_owner_is_free_only_with_every_token_back() {
    crate::owner!(Kernel);
    let package = crate::testing::netburst_pmu();
    let (mut d, c) = take::<Kernel>(&package, Config::prescott_ht());
    let m = NetBurstModel::new(Config::prescott_ht());
    let mut other = Recording::<_, 64>::new(m.clone());
    let other_package = crate::testing::netburst_pmu();
    let Err(InitError::AlreadyTaken) =
        NetBurstDriver::<Kernel, _>::take(&mut other, &cpu(&m), &other_package)
    else {
        panic!("a second driver of one owner")
    };
    assert_eq!(other.take_counts(), counts(0, 0, 0));
    // Erased, grouped and multiplexed tokens come back through the erased
    // form; a claimed one is refused.
    let mut all = c.erase_all();
    all[0].configure(&mut d, &running()).unwrap();
    let Err(mut all) = Counters::<Kernel>::from_erased(all) else {
        panic!("a claimed handle reassembled")
    };
    all[0].release(&mut d).unwrap();
    let c = Counters::<Kernel>::from_erased(all).unwrap();
    let _ = d.give_back(c);
    let (d, c) = take::<Kernel>(&package, Config::prescott_ht());
    let _ = d.give_back(c);
}

/// Tokens of another owner, or out of place, do not reassemble.
#[test]
fn foreign_or_misplaced_handles_do_not_reassemble() {
    crate::owner!(Mine);
    crate::owner!(Theirs);
    let (p1, p2) = (
        crate::testing::netburst_pmu(),
        crate::testing::netburst_pmu(),
    );
    let (a, ca) = take::<Mine>(&p1, Config::prescott_ht());
    let (b, cb) = take::<Theirs>(&p2, Config::prescott_ht());
    let Err(theirs) = Counters::<Mine>::from_erased(cb.erase_all()) else {
        panic!("another owner's tokens")
    };
    let mut mine = ca.erase_all();
    mine.swap(0, 1);
    let Err(mut mine) = Counters::<Mine>::from_erased(mine) else {
        panic!("counter 1 at index 0")
    };
    mine.swap(0, 1);
    let _ = a.give_back(Counters::from_erased(mine).unwrap());
    let _ = b.give_back(Counters::from_erased(theirs).unwrap());
}

/// Reproduction 5: the DS save area goes with the driver that installed
/// it. After a give-back, a new driver of the package arms no PEBS until it
/// installs an area itself, whatever the package's `IA32_DS_AREA` holds.
#[test]
fn pebs_needs_an_area_this_driver_installed() {
    use LogicalProcessor::T0;
    crate::owner!(First);
    crate::owner!(Second);
    let package = crate::testing::netburst_pmu();
    let (mut d, c) = take::<First>(&package, Config::prescott_ht());
    let area: &'static mut PebsArea<2> = Box::leak(Box::new(PebsArea::new()));
    // SAFETY: a leaked allocation: mapped at its address in the test
    // process's one address space.
    d.set_pebs_area(T0, unsafe { DsArea::new(area) }).unwrap();
    let address = d.pebs_area(T0).unwrap().address();
    assert_eq!(model(&mut d).read_msr(IA32_DS_AREA).unwrap(), address);
    // Given back with the area installed: it stays the processor's for
    // good (withdrawn from the handler), and no driver arms PEBS on it.
    let _ = d.give_back(c);
    let (mut d, c) = take::<Second>(&package, Config::prescott_ht());
    let e = c.c16.configure(&mut d, &l1_miss_pebs()).unwrap_err();
    assert_eq!(e.error, Error::Config(ConfigError::NoPebsArea { lp: T0 }));
    assert_eq!(d.msr().take_counts(), counts(0, 0, 0), "nothing written");
    assert_eq!(d.drain_pebs(T0, |_| panic!("no area")), 0);
    let _ = d.give_back(Counters {
        c16: e.counter,
        ..c
    });
}

/// A driver dropped with a sampling
/// counter and a PEBS counter running (their handles alive, its DS save
/// area installed), as a kernel's early return or a test's `?` drops it,
/// idles what it ran: every CCCR it enabled idle, its counters zeroed,
/// `MSR_PEBS_ENABLE` clear, `IA32_DS_AREA` 0, nothing armed, its logical
/// processors and claims free. Its owner stays held for good (its handles
/// live on): taking it again says so; another owner takes the package.
#[test]
fn a_dropped_driver_idles_what_it_ran_and_holds_its_owner() {
    use LogicalProcessor::{T0, T1};
    crate::owner!(Dropped);
    crate::owner!(Next);
    let package = crate::testing::netburst_pmu();
    let m = NetBurstModel::new(Config::prescott_ht());
    let info = cpu(&m);
    let mut rec = Recording::<_, 64>::new(m);
    let (mut d, c) = NetBurstDriver::<Dropped, _>::take(&mut rec, &info, &package).unwrap();
    let area: &'static mut PebsArea<2> = Box::leak(Box::new(PebsArea::new()));
    // SAFETY: a leaked allocation: mapped at its address in the test
    // process's one address space.
    d.set_pebs_area(T0, unsafe { DsArea::new(area) }).unwrap();
    let n = SampleAfter::new(100, overflow_rule()).unwrap();
    let c0 = c.c0.configure(&mut d, &running().sampling(n)).unwrap();
    let c0 = c0.enable(&mut d).unwrap();
    let c16 = c.c16.configure(&mut d, &l1_miss_pebs()).unwrap();
    let c16 = c16.enable(&mut d).unwrap();
    assert_ne!(d.msr().read_msr(MSR_PEBS_ENABLE).unwrap(), 0);
    assert_eq!(
        package.pmi().armed(T0),
        CounterSet::EMPTY.with(Counter::BpuCounter0)
    );
    drop(d);
    let _alive = (c0, c16);
    for counter in [Counter::BpuCounter0, Counter::IqCounter4] {
        assert_eq!(
            rec.read_msr(counter.cccr().msr()).unwrap(),
            CccrValue::IDLE.bits(),
            "{counter:?}'s CCCR idle"
        );
        assert_eq!(
            rec.read_msr(counter.msr()).unwrap(),
            0,
            "{counter:?} zeroed"
        );
    }
    assert_eq!(rec.read_msr(MSR_PEBS_ENABLE).unwrap(), 0, "no PEBS");
    assert_eq!(rec.read_msr(IA32_DS_AREA).unwrap(), 0, "no DS area");
    assert_eq!(package.pmi().armed(T0), CounterSet::EMPTY);
    assert_eq!(package.claimed_counters(), CounterSet::EMPTY);
    assert!(!package.is_served(T0) && !package.is_served(T1));
    rec.clear();
    let e = match NetBurstDriver::<Dropped, _>::take(&mut rec, &info, &package) {
        Err(e) => e,
        Ok(_) => panic!("a dropped driver's owner taken again"),
    };
    let owner = core::any::type_name::<Dropped>();
    assert_eq!(e, InitError::OwnerDropped { owner });
    assert_eq!(
        e.to_string(),
        format!(
            "the driver of owner `{owner}` was dropped without `give_back`: it idled its counters and freed the PMU, but handles it issued may still exist, so `{owner}` cannot own a driver again; take the PMU for another owner type (`pmu::owner!`), or give a driver back with every token to reuse its owner"
        )
    );
    assert_eq!(rec.take_counts(), counts(0, 0, 0), "refused untouched");
    let (d, c) = NetBurstDriver::<Next, _>::take(&mut rec, &info, &package).unwrap();
    let _ = d.give_back(c);
}

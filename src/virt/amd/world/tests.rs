//! The AMD pass-through world switch through its public API on the Zen 4
//! model (SVM enabled in the model): a guest's trapped accesses land in
//! its saved registers, its counters count its events only and the host's
//! its own, its overflow becomes its PMI on its LVT (and the host's
//! handler does not take it), the traffic of an entry and an exit, and the
//! reservation check. All counts here come from the model.

use super::*;
use crate::access::{AccessCounts, MsrOps, Recording};
use crate::apic::Vector;
use crate::arch::amd::driver::CounterConfig;
use crate::arch::amd::{AmdPmu, EventSpec};
use crate::model::amd::{AmdModel, Config, Event};
use crate::virt::amd::{Generation, GuestPolicy};

const INSTRUCTIONS: u64 = 0xC0;
const USR_OS_EN: u64 = 1 << 16 | 1 << 17 | 1 << 22;
const INT: u64 = 1 << 20;

fn host_cpu() -> (AmdModel, AmdCpu) {
    let mut m = AmdModel::new(Config::zen4());
    let info = crate::detect::detect(&m, &mut m.clone())
        .unwrap()
        .usable_amd()
        .unwrap();
    m.set_svme(true);
    (m, info)
}

fn entry() -> LvtPerfCounter {
    LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(0xF0).unwrap()))
}

fn c(n: u8) -> Counter {
    Counter::new(n).unwrap()
}

/// A PerfMonV2 guest of four counters; the host keeps counters 4 and 5.
fn policy() -> GuestPmu {
    GuestPolicy {
        host_counters: CounterSet::first(6).difference(CounterSet::first(4)),
        ..GuestPolicy::new(Generation::PerfMonV2 { counters: 4 })
    }
    .checked()
    .unwrap()
}

#[test]
fn a_guest_counts_its_events_and_takes_its_pmi_through_its_lvt() {
    crate::owner!(Cpu);
    let pmu: AmdPmu = crate::testing::amd_pmu();
    let (m, info) = host_cpu();
    let (mut d, cs) = AmdDriver::<Cpu, _>::take(Recording::<_, 256>::new(m), &info, &pmu).unwrap();
    let spec = "instructions".parse::<EventSpec>().unwrap().host_only();
    let host = cs
        .c5
        .unwrap()
        .configure(&mut d, &CounterConfig::counting(spec))
        .unwrap()
        .enable(&mut d)
        .unwrap();
    let mut v = PassThroughPmu::new(policy(), &info).unwrap();
    assert_eq!(v.registers().global_ctl, 0b1111, "RESET: every enable");
    assert_eq!(
        v.enter(&mut d).unwrap_err(),
        Error::Config(ConfigError::GuestState),
        "nothing reserved"
    );
    d.reserve_guest(CounterSet::first(2)).unwrap();
    assert_eq!(
        v.enter(&mut d).unwrap_err(),
        Error::Config(ConfigError::GuestState),
        "not every counter of the guest's reserved"
    );
    d.release_guest().unwrap();
    d.reserve_guest(v.pass_through().counters()).unwrap();

    // The guest programs counter 0 (counting) and 1 (sampling, 50 before
    // its overflow); its attempt at HostOnly is dropped by the checks.
    v.write_lvt(entry());
    assert!(
        v.wrmsr(0xC001_0200, INSTRUCTIONS | USR_OS_EN | 1 << 41)
            .unwrap()
    );
    assert!(
        v.wrmsr(0xC001_0202, INSTRUCTIONS | USR_OS_EN | INT)
            .unwrap()
    );
    assert!(v.wrmsr(0xC001_0203, (1 << 48) - 50).unwrap());
    assert_eq!(
        v.rdmsr(0xC001_0200).unwrap(),
        Some(INSTRUCTIONS | USR_OS_EN)
    );
    assert_eq!(
        v.registers().ctl[0],
        INSTRUCTIONS | USR_OS_EN | 1 << 40,
        "GuestOnly"
    );
    assert!(!v.wrmsr(0x10, 0).unwrap(), "not the PMU's");
    assert!(
        v.wrmsr(0xC001_0208, 0).is_err(),
        "a counter the guest lacks"
    );

    d.msr().clear();
    assert_eq!(v.enter(&mut d).unwrap(), 1 << 5 | 0b1111);
    assert_eq!(
        d.msr().take_counts(),
        AccessCounts::msr(0, 2 + 4 + 1, 0),
        "two controls, four values, PerfCntrGlobalCtl"
    );
    d.msr()
        .inner_mut()
        .inject(Event::new(0xC0, 0, 30).in_guest());
    d.msr().inner_mut().inject(Event::new(0xC0, 0, 9));
    assert_eq!(v.exit(&mut d).unwrap(), CounterSet::EMPTY);
    assert_eq!(d.msr().take_counts(), AccessCounts::msr(5, 1, 0));
    assert_eq!(v.rdmsr(0xC001_0201).unwrap(), Some(30));
    assert_eq!(v.rdpmc(1, true, 3).unwrap(), (1 << 48) - 20);
    assert_eq!(v.pmi_to_inject(), None);

    // Past the overflow: the guest's PMI, not the host's.
    v.enter(&mut d).unwrap();
    d.msr()
        .inner_mut()
        .inject(Event::new(0xC0, 0, 25).in_guest());
    assert_eq!(v.exit(&mut d).unwrap(), CounterSet::EMPTY.with(c(1)));
    assert_eq!(v.rdmsr(0xC000_0300).unwrap(), Some(0b10));
    assert_eq!(v.counter(c(1)), 5);
    assert_eq!(v.pmi_to_inject(), entry().delivery());
    assert_eq!(v.pmi_to_inject(), None, "once");
    assert_eq!(v.injected(), 1);
    assert_eq!(
        d.msr().inner_mut().read_msr(0xC000_0300).unwrap(),
        0,
        "acknowledged for the host"
    );
    // The guest clears its status (trapped: the hardware's is the host's
    // while the host runs) and re-arms.
    assert!(v.wrmsr(0xC000_0302, 0b10).unwrap());
    assert_eq!(v.registers().status, CounterSet::EMPTY);
    assert_eq!(host.read(&mut d).unwrap(), 9, "the host's own only");

    d.release_guest().unwrap();
    let host = host.halt(&mut d).unwrap().release(&mut d).unwrap();
    let _ = d.give_back(crate::arch::amd::driver::Counters {
        c5: Some(host),
        ..cs
    });
}

/// A guest with every counter and PerfMonV2 writes `PerfCntrGlobalCtl`
/// without an exit: the exit reads its enables back.
#[test]
fn a_passed_global_control_is_read_back_at_exit() {
    crate::owner!(Cpu);
    let pmu: AmdPmu = crate::testing::amd_pmu();
    let (m, info) = host_cpu();
    let (mut d, cs) = AmdDriver::<Cpu, _>::take(Recording::<_, 256>::new(m), &info, &pmu).unwrap();
    let g = GuestPolicy::new(Generation::PerfMonV2 { counters: 6 })
        .checked()
        .unwrap();
    let mut v = PassThroughPmu::new(g, &info).unwrap();
    assert!(v.pass_through().global_ctl_passed());
    d.reserve_guest(v.pass_through().counters()).unwrap();
    assert_eq!(v.enter(&mut d).unwrap(), 0b11_1111);
    // The guest's WRMSR, not trapped.
    d.msr().inner_mut().write_msr(0xC000_0301, 0b100).unwrap();
    d.msr().clear();
    v.exit(&mut d).unwrap();
    assert_eq!(d.msr().take_counts(), AccessCounts::msr(8, 1, 0));
    assert_eq!(v.rdmsr(0xC000_0301).unwrap(), Some(0b100));
    d.release_guest().unwrap();
    let _ = d.give_back(cs);
}

//! The pass-through world switch on the architectural PMU's model (an Ice
//! Lake: eight general counters, four fixed, version 5, full-width
//! writes): the register traffic of each entry and exit asserted exactly,
//! the guest's and the host's counts exact across switches, the guest's
//! PMI through its LVT (and not the host's handler's), its overflow status
//! restored at entry. The VMCS's loads of `IA32_PERF_GLOBAL_CTRL` are
//! played on the model directly (they are the processor's, not the
//! crate's accesses).

use super::*;
use crate::access::{AccessCounts, MsrAccess, Recording};
use crate::apic::{LvtPerfCounterEntry, Vector};
use crate::arch::archperf::driver::{ConfigError, CounterConfig};
use crate::arch::archperf::{ArchPerfPmu, EventSpec};
use crate::arch::handle_pmi;
use crate::model::archperf::{ArchEvent, ArchPerfModel, Config, Event};
use crate::virt::archperf::GuestPolicy;

type Model = Recording<ArchPerfModel, 256>;
type Driver<'s, O> = ArchPerfDriver<'s, O, Model>;

struct Lvt;

impl LvtPerfCounterEntry for Lvt {
    fn write_lvt_perf_counter(&mut self, _: LvtPerfCounter) {}
}

fn entry() -> LvtPerfCounter {
    LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(0xF0).unwrap()))
}

fn host_cpu(config: Config) -> (ArchPerfModel, ArchPerfCpu) {
    let m = ArchPerfModel::new(config);
    let info = crate::detect::detect(&m, &mut m.clone())
        .unwrap()
        .arch_perf()
        .unwrap();
    (m, info)
}

fn traffic<O: Owner>(d: &mut Driver<'_, O>) -> AccessCounts {
    d.msr().take_counts()
}

/// VM entry and exit: the VMCS loads `IA32_PERF_GLOBAL_CTRL`.
fn vmcs_load<O: Owner>(d: &mut Driver<'_, O>, value: u64) {
    d.msr().inner_mut().write_msr(0x38F, value).unwrap();
}

fn run<O: Owner>(d: &mut Driver<'_, O>, n: u64) {
    d.msr()
        .inner_mut()
        .inject(Event::arch(ArchEvent::InstructionsRetired, n));
}

const OS_USR_EN: u64 = 1 << 16 | 1 << 17 | 1 << 22;
const INT: u64 = 1 << 20;

/// A version 5 guest of four general and three fixed counters; the host
/// keeps general counters 4-7 and fixed counter 3.
fn policy() -> GuestPolicy {
    GuestPolicy {
        full_width_writes: true,
        host_counters: CounterSet::first(8, 4).difference(CounterSet::first(4, 3)),
        ..GuestPolicy::new(5, 4, 3)
    }
}

#[test]
fn each_entry_and_exit_costs_exactly_what_the_table_says() {
    crate::owner!(Cpu);
    let pmu = crate::testing::archperf_pmu();
    let (m, info) = host_cpu(Config::icelake());
    let (mut d, c) = Driver::<Cpu>::take(Recording::new(m), &info, &pmu).unwrap();
    // The host counts instructions on general counter 7.
    let spec = "instructions".parse::<EventSpec>().unwrap();
    let host =
        c.g7.unwrap()
            .configure(&mut d, &CounterConfig::counting(spec))
            .unwrap()
            .enable(&mut d)
            .unwrap();
    let mut v = PassThroughPmu::new(policy().checked().unwrap(), &info).unwrap();
    v.write_lvt(entry());
    assert_eq!(
        v.enter(&mut d).unwrap_err(),
        Error::Config(ConfigError::GuestState),
        "nothing reserved"
    );
    d.reserve_guest(CounterSet::first(2, 0)).unwrap();
    assert_eq!(
        v.enter(&mut d).unwrap_err(),
        Error::Config(ConfigError::GuestState),
        "not every counter of the guest's reserved"
    );
    d.release_guest().unwrap();
    traffic(&mut d);
    d.reserve_guest(v.pass_through().counters()).unwrap();
    assert_eq!(traffic(&mut d), AccessCounts::msr(0, 0, 0), "reserving");
    let spec = "cycles".parse::<EventSpec>().unwrap();
    let g0 = match c.g0.configure(&mut d, &CounterConfig::counting(spec)) {
        Ok(_) => panic!("a host handle configured a guest's counter"),
        Err(f) => {
            assert_eq!(f.error, Error::Config(ConfigError::CounterClaimed(0)));
            f.counter
        }
    };
    assert_eq!(
        d.reserve_guest(CounterSet::first(1, 0)).unwrap_err(),
        Error::Config(ConfigError::GuestState)
    );

    // A fresh guest: GLOBAL_CTRL, seven values.
    let values = v.enter(&mut d).unwrap();
    assert_eq!(traffic(&mut d), AccessCounts::msr(0, 8, 0), "first entry");
    assert_eq!(values.host, 1 << 7, "the host's counter only");
    assert_eq!(
        values.guest,
        1 << 7 | 0b1111,
        "the host's and the guest's enables"
    );
    assert_eq!(
        v.enter(&mut d).unwrap_err(),
        Error::Config(ConfigError::GuestState),
        "loaded already"
    );
    traffic(&mut d);
    vmcs_load(&mut d, values.guest);
    run(&mut d, 1000);
    vmcs_load(&mut d, values.host);
    assert_eq!(v.exit(&mut d, None).unwrap(), CounterSet::EMPTY);
    assert_eq!(
        traffic(&mut d),
        AccessCounts::msr(8, 1, 0),
        "exit: the status, seven values; GLOBAL_CTRL last"
    );
    assert_eq!(host.read(&mut d).unwrap(), 1000, "the host counts on");
    traffic(&mut d);

    // The guest programs two general counters and a fixed one (trapped
    // writes, on the saved registers: no access).
    assert_eq!(v.wrmsr(0x186, 0xC0 | OS_USR_EN), Ok(true));
    assert_eq!(v.wrmsr(0x187, 0x3C | OS_USR_EN | INT), Ok(true));
    assert_eq!(v.wrmsr(0x4C2, (1 << 48) - 300), Ok(true));
    assert_eq!(v.wrmsr(0x38D, 0x3), Ok(true));
    assert_eq!(v.wrmsr(0x38F, 0b1111 | 1 << 32), Ok(true));
    assert_eq!(
        traffic(&mut d),
        AccessCounts::msr(0, 0, 0),
        "trapped writes"
    );
    let values = v.enter(&mut d).unwrap();
    assert_eq!(
        traffic(&mut d),
        AccessCounts::msr(0, 1 + 2 + 1 + 7, 0),
        "GLOBAL_CTRL, two selects, FIXED_CTR_CTRL, seven values"
    );
    vmcs_load(&mut d, values.guest);
    run(&mut d, 500);
    d.msr()
        .inner_mut()
        .inject(Event::arch(ArchEvent::CoreCycles, 400));
    // The guest's counter 1 overflowed: the host's PMI handler runs (an
    // NMI exits the guest) and leaves the guest's status bit alone.
    assert!(d.msr().inner_mut().take_pmi());
    let p = d.physical();
    handle_pmi(p, d.msr().inner_mut(), &mut Lvt, entry(), 0, |_| {
        panic!("no sample of the host's")
    })
    .unwrap();
    assert_eq!(d.msr().inner_mut().read_msr(0x38E).unwrap() & 0xF, 0b10);
    vmcs_load(&mut d, values.host);
    traffic(&mut d);
    assert_eq!(
        v.exit(&mut d, None).unwrap(),
        CounterSet::first(0, 0).with(Counter::general(1).unwrap())
    );
    assert_eq!(
        traffic(&mut d),
        AccessCounts::msr(8, 2, 0),
        "exit: the status and its acknowledgement, seven values, GLOBAL_CTRL"
    );
    assert_eq!(d.msr().inner_mut().read_msr(0x38E).unwrap() & 0xF, 0);
    assert_eq!(v.rdmsr(0xC1), Ok(Some(500)), "the guest's instructions");
    assert_eq!(v.rdmsr(0xC2), Ok(Some(100)), "past its overflow");
    assert_eq!(v.rdmsr(0x309), Ok(Some(500)), "fixed counter 0");
    assert_eq!(v.rdmsr(0x38E), Ok(Some(0b10)), "its status");
    assert_eq!(host.read(&mut d).unwrap(), 1500, "guest and host");
    traffic(&mut d);
    // Its PMI, at the next entry; its status restored there.
    assert!(v.pmi_to_inject().is_some());
    let values = v.enter(&mut d).unwrap();
    assert_eq!(
        traffic(&mut d),
        AccessCounts::msr(0, 1 + 7 + 1, 0),
        "same controls: GLOBAL_CTRL, seven values, STATUS_SET"
    );
    assert_eq!(d.msr().inner_mut().read_msr(0x38E).unwrap() & 0xF, 0b10);
    vmcs_load(&mut d, values.guest);
    vmcs_load(&mut d, values.host);
    assert_eq!(v.exit(&mut d, None).unwrap(), CounterSet::EMPTY, "not new");
    traffic(&mut d);
    // The guest's handler clears it (trapped: the host keeps counters).
    assert_eq!(v.wrmsr(0x390, 0b10), Ok(true));
    assert_eq!(v.rdmsr(0x38E), Ok(Some(0)));
    v.enter(&mut d).unwrap();
    assert_eq!(traffic(&mut d), AccessCounts::msr(0, 8, 0), "no status");
    assert_eq!(d.msr().inner_mut().read_msr(0x38E).unwrap() & 0xF, 0);
    // The most an entry costs: every control changed and a status bit,
    // 1 + 4 + 1 + 7 + 1 = 14 of the bound 2n + 3 = 17.
    v.exit(&mut d, None).unwrap();
    for (msr, value) in [
        (0x186, 0xC0 | OS_USR_EN | INT),
        (0x187, 0xC0 | OS_USR_EN),
        (0x188, 0xC0 | OS_USR_EN),
        (0x189, 0xC4 | OS_USR_EN),
        (0x38D, 0x333),
        (0x4C1, (1 << 48) - 1),
    ] {
        assert_eq!(v.wrmsr(msr, value), Ok(true));
    }
    traffic(&mut d);
    let values = v.enter(&mut d).unwrap();
    assert_eq!(traffic(&mut d), AccessCounts::msr(0, 1 + 4 + 1 + 7, 0));
    vmcs_load(&mut d, values.guest);
    run(&mut d, 1);
    vmcs_load(&mut d, values.host);
    d.msr().inner_mut().take_pmi();
    assert_eq!(
        v.exit(&mut d, None).unwrap(),
        CounterSet::EMPTY.with(Counter::general(0).unwrap())
    );
    assert_eq!(traffic(&mut d), AccessCounts::msr(8, 2, 0));
    for (msr, value) in [
        (0x186, 0xC0 | OS_USR_EN),
        (0x187, 0x3C | OS_USR_EN),
        (0x188, 0xC4 | OS_USR_EN),
        (0x189, 0xC0 | OS_USR_EN),
        (0x38D, 0x222),
    ] {
        assert_eq!(v.wrmsr(msr, value), Ok(true));
    }
    v.enter(&mut d).unwrap();
    let t = traffic(&mut d);
    assert_eq!(t, AccessCounts::msr(0, 1 + 4 + 1 + 7 + 1, 0));
    assert!(
        t.msr_reads + t.msr_writes <= 2 * 7 + 3,
        "at most 2 accesses per counter in use, and 3"
    );
    assert_eq!(host.read(&mut d).unwrap(), 1501);
    v.exit(&mut d, None).unwrap();
    traffic(&mut d);
    d.release_guest().unwrap();
    assert_eq!(
        traffic(&mut d),
        AccessCounts::msr(0, 4 + 7 + 1, 0),
        "release: four selects, seven values, FIXED_CTR_CTRL"
    );
    assert_eq!(d.guest_counters(), CounterSet::EMPTY);
    assert_eq!(d.msr().inner_mut().read_msr(0x186).unwrap(), 0);
    // The host may claim it again.
    let spec = "cycles".parse::<EventSpec>().unwrap();
    let g0 = g0
        .configure(&mut d, &CounterConfig::counting(spec))
        .unwrap()
        .enable(&mut d)
        .unwrap();
    d.msr()
        .inner_mut()
        .inject(Event::arch(ArchEvent::CoreCycles, 10));
    assert_eq!(g0.read(&mut d).unwrap(), 10);
}

/// Below version 4 (no `IA32_PERF_GLOBAL_STATUS_SET`) the reservation is
/// refused, as KVM's mediated vPMU refuses such a host.
#[test]
fn a_host_below_version_4_is_refused() {
    crate::owner!(Cpu);
    let pmu: ArchPerfPmu = crate::testing::archperf_pmu();
    let (m, info) = host_cpu(Config {
        version: 3,
        ..Config::skylake()
    });
    let (mut d, _c) = Driver::<Cpu>::take(Recording::new(m), &info, &pmu).unwrap();
    assert_eq!(
        d.reserve_guest(CounterSet::first(2, 0)).unwrap_err(),
        Error::Config(ConfigError::GuestNeedsVersion4)
    );
}

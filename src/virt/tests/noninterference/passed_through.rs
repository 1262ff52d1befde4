//! Noninterference in pass-through mode: guests A and B run their
//! counters on one physical PMU (the model of an Ice Lake, driven by
//! [`ArchPerfDriver`]) through the world switch
//! ([`PassThroughPmu::enter`] and [`PassThroughPmu::exit`] around each of
//! their steps), beside the host's own counter there; A's observations
//! are the same whatever B runs, whatever the host runs and however the
//! slices fall.

use std::cell::RefCell;
use std::rc::Rc;

use super::*;
use crate::arch::archperf::driver::{ArchPerfDriver, ArchPerfmon, CounterConfig};
use crate::arch::archperf::{ArchPerfPmu, Counter, CounterSet, EventSpec};
use crate::counter::{AnyHandle, Handle, Owner};
use crate::virt::archperf::{GuestPolicy, Intercept, PassThroughPmu, global_ctrl_values};

type Driver<'s, O> = ArchPerfDriver<'s, O, ArchPerfModel>;

/// The physical CPU: the host's driver, its instruction counter (general
/// counter 7, CPL 0) and the instructions it should have counted.
struct Cpu<'s, O: Owner> {
    d: Driver<'s, O>,
    host: AnyHandle<ArchPerfmon>,
    fed: u64,
    at_start: u64,
}

type Shared<'s, O> = Rc<RefCell<Cpu<'s, O>>>;

/// A guest whose counters run on the shared CPU's.
struct Passed<'s, O: Owner> {
    vcpu: PassThroughPmu,
    cpu: Shared<'s, O>,
}

impl<O: Owner> Passed<'_, O> {
    /// `f` on the hardware with the guest's registers loaded (VM entry and
    /// exit around it, the VMCS's `IA32_PERF_GLOBAL_CTRL` loads played on
    /// the model), then its PMI, if it raised one, through the host's
    /// handler.
    fn inside<T>(&mut self, f: impl FnOnce(&mut ArchPerfModel) -> T) -> T {
        let mut cpu = self.cpu.borrow_mut();
        let values = self.vcpu.enter(&mut cpu.d).unwrap();
        assert_eq!(
            values,
            global_ctrl_values(
                self.vcpu.pass_through(),
                self.vcpu.registers().global_ctrl,
                cpu.d.host_global()
            )
        );
        cpu.d.msr().write_msr(0x38F, values.guest).unwrap();
        let r = f(cpu.d.msr());
        cpu.d.msr().write_msr(0x38F, values.host).unwrap();
        if cpu.d.msr().take_pmi() {
            let p = cpu.d.physical();
            crate::arch::handle_pmi(p, cpu.d.msr(), &mut NoLvt, lvt(), 0, |_| {
                panic!("no sample of the host's")
            })
            .unwrap();
        }
        self.vcpu.exit(&mut cpu.d, None).unwrap();
        r
    }
}

struct NoLvt;

impl crate::apic::LvtPerfCounterEntry for NoLvt {
    fn write_lvt_perf_counter(&mut self, _: LvtPerfCounter) {}
}

impl<O: Owner> Guest for Passed<'_, O> {
    fn wrmsr(&mut self, msr: u32, value: u64) -> Result<bool, std::string::String> {
        match self.vcpu.pass_through().rule(msr) {
            Some(r) if r.write == Intercept::Pass => self
                .inside(|m| m.write_msr(msr, value))
                .map(|()| true)
                .map_err(|e| e.to_string()),
            _ => self.vcpu.wrmsr(msr, value).map_err(|e| e.to_string()),
        }
    }
    fn rdmsr(&mut self, msr: u32) -> Result<Option<u64>, std::string::String> {
        match self.vcpu.pass_through().rule(msr) {
            Some(r) if r.read == Intercept::Pass => self
                .inside(|m| m.read_msr(msr))
                .map(Some)
                .map_err(|e| e.to_string()),
            _ => self.vcpu.rdmsr(msr).map_err(|e| e.to_string()),
        }
    }
    fn rdpmc(&mut self, ecx: u32) -> Result<u64, std::string::String> {
        if self.vcpu.pass_through().rdpmc_exits() {
            self.vcpu.rdpmc(ecx, false, 0).map_err(|e| e.to_string())
        } else {
            self.inside(|m| m.rdpmc(ecx)).map_err(|e| e.to_string())
        }
    }
    fn run(&mut self, n: u64) {
        self.inside(|m| {
            m.inject(Event::arch(ArchEvent::InstructionsRetired, n).at(Privilege::Os));
        });
        self.cpu.borrow_mut().fed += n;
    }
    fn write_lvt(&mut self, entry: LvtPerfCounter) {
        self.vcpu.write_lvt(entry);
    }
    fn entry(&mut self) -> Option<PmiDelivery> {
        self.vcpu.pmi_to_inject()
    }
}

/// The host's side: its instructions on the physical PMU while no guest
/// is loaded.
struct SharedHost<'s, O: Owner>(Shared<'s, O>);

impl<O: Owner> Host for SharedHost<'_, O> {
    fn run(&mut self, k: u64) {
        let mut cpu = self.0.borrow_mut();
        cpu.d
            .msr()
            .inject(Event::arch(ArchEvent::InstructionsRetired, k).at(Privilege::Os));
        cpu.fed += k;
    }
    fn check(&mut self) {
        let mut cpu = self.0.borrow_mut();
        let cpu = &mut *cpu;
        let count = cpu.host.read(&mut cpu.d).unwrap();
        assert_eq!(
            count - cpu.at_start,
            cpu.fed,
            "the host's count (guests' instructions included)"
        );
    }
}

/// The host keeps general counter 7.
fn host_keeps() -> CounterSet {
    CounterSet::EMPTY.with(Counter::general(7).unwrap())
}

/// A: version 2, two general and three fixed counters.
fn a_policy() -> GuestPolicy {
    GuestPolicy {
        host_counters: host_keeps(),
        ..GuestPolicy::new(2, 2, 3)
    }
}

/// B: version 5, four general and three fixed counters, full-width writes.
fn b_policy() -> GuestPolicy {
    GuestPolicy {
        full_width_writes: true,
        host_counters: host_keeps(),
        ..GuestPolicy::new(5, 4, 3)
    }
}

#[test]
fn an_intel_guest_passed_through_observes_only_its_own_run() {
    crate::owner!(Host7);
    let pmu: ArchPerfPmu = crate::testing::archperf_pmu();
    let m = ArchPerfModel::new(Config {
        pebs: crate::model::archperf::PebsConfig::NONE,
        ..Config::icelake()
    });
    let info = crate::detect::detect(&m, &mut m.clone())
        .unwrap()
        .arch_perf()
        .unwrap();
    let (mut d, c) = Driver::<Host7>::take(m, &info, &pmu).unwrap();
    let mut host = c.g7.map(Handle::erase).unwrap();
    let spec = "instructions:k".parse::<EventSpec>().unwrap();
    host.configure(&mut d, &CounterConfig::counting(spec))
        .unwrap();
    host.enable(&mut d).unwrap();
    // One reservation for both guests: B's counters, which hold A's.
    d.reserve_guest(CounterSet::first(4, 3)).unwrap();
    let cpu = Rc::new(RefCell::new(Cpu {
        d,
        host,
        fed: 0,
        at_start: 0,
    }));
    let guest = |p: GuestPolicy| Passed {
        vcpu: PassThroughPmu::new(p.checked().unwrap(), &info).unwrap(),
        cpu: cpu.clone(),
    };
    let run = |seed: u64| {
        {
            let mut c = cpu.borrow_mut();
            let c = &mut *c;
            c.at_start = c.host.read(&mut c.d).unwrap();
            c.fed = 0;
        }
        scenario(
            guest(a_policy()),
            intel_program(),
            guest(b_policy()),
            &INTEL_MSRS,
            seed,
            &mut SharedHost(cpu.clone()),
        )
    };
    let first = run(1);
    for seed in 2..=5 {
        assert_eq!(run(seed * 0x9E37_79B9), first, "seed {seed}");
    }
    // The same observations as on the emulated PMU.
    let emulated = scenario(
        intel_a(),
        intel_program(),
        intel_b(),
        &INTEL_MSRS,
        1,
        &mut OwnPmu::new(),
    );
    assert_eq!(first, emulated, "pass-through and emulated");
}

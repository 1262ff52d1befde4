//! Noninterference in AMD's pass-through mode: guests A and B run their
//! counters on one physical PMU (the model of a Zen 4 with SVM enabled,
//! driven by [`AmdDriver`]) through the world switch
//! ([`PassThroughPmu::enter`] before each of their steps, as the last act
//! before `VMRUN`, and [`PassThroughPmu::exit`] after it), beside the
//! host's own counter there; A's observations are the same whatever B
//! runs, whatever the host runs and however the slices fall, and the same
//! as on the emulated PMU.

use std::cell::RefCell;
use std::rc::Rc;

use super::*;
use crate::arch::amd::driver::{AmdCore, AmdDriver, CounterConfig};
use crate::arch::amd::{AmdPmu, CounterSet, EventSpec};
use crate::counter::{AnyHandle, Handle, Owner};
use crate::model::amd::{AmdModel, Config as AmdConfig, Event as AmdEvent};
use crate::virt::amd::{GuestPolicy, PassThroughPmu};
use crate::virt::archperf::Intercept;

type Driver<'s, O> = AmdDriver<'s, O, AmdModel>;

/// The physical CPU: the host's driver, its instruction counter (counter
/// 5, both modes) and the instructions it should have counted.
struct Cpu<'s, O: Owner> {
    d: Driver<'s, O>,
    host: AnyHandle<AmdCore>,
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
    /// `f` on the hardware with the guest's registers loaded (entry before
    /// it, exit after it), then the host's PMI, if one was raised, through
    /// the host's handler (SVM: the interrupt is taken once the VMM
    /// enables interrupts after the exit).
    fn inside<T>(&mut self, f: impl FnOnce(&mut AmdModel) -> T) -> T {
        let mut cpu = self.cpu.borrow_mut();
        let global = self.vcpu.enter(&mut cpu.d).unwrap();
        assert_eq!(
            global,
            cpu.d.host_global().bits()
                | (self.vcpu.registers().global_ctl & self.vcpu.pass_through().counters().bits())
        );
        let r = f(cpu.d.msr());
        self.vcpu.exit(&mut cpu.d).unwrap();
        if cpu.d.msr().take_pmi() {
            let p = cpu.d.physical();
            crate::arch::handle_pmi(p, cpu.d.msr(), &mut NoLvt, lvt(), 0, |_| {
                panic!("no sample of the host's")
            })
            .unwrap();
        }
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
        if self.vcpu.pass_through().rdpmc_intercepted() {
            self.vcpu.rdpmc(ecx, false, 0).map_err(|e| e.to_string())
        } else {
            self.inside(|m| m.rdpmc(ecx)).map_err(|e| e.to_string())
        }
    }
    fn run(&mut self, n: u64) {
        self.inside(|m| {
            m.inject(AmdEvent::new(0xC0, 0, n).in_guest());
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

/// The host's side: its instructions on the physical PMU (host mode)
/// while no guest is loaded.
struct SharedHost<'s, O: Owner>(Shared<'s, O>);

impl<O: Owner> Host for SharedHost<'_, O> {
    fn run(&mut self, k: u64) {
        let mut cpu = self.0.borrow_mut();
        cpu.d.msr().inject(AmdEvent::new(0xC0, 0, k));
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

/// A PerfMonV2 guest of `counters` counters; the host keeps counter 5.
fn policy(counters: u8) -> GuestPolicy {
    GuestPolicy {
        host_counters: CounterSet::first(6).difference(CounterSet::first(5)),
        ..GuestPolicy::new(Generation::PerfMonV2 { counters })
    }
}

#[test]
fn an_amd_guest_passed_through_observes_only_its_own_run() {
    crate::owner!(Host5);
    let pmu: AmdPmu = crate::testing::amd_pmu();
    let mut m = AmdModel::new(AmdConfig::zen4());
    let info = crate::detect::detect(&m, &mut m.clone())
        .unwrap()
        .usable_amd()
        .unwrap();
    m.set_svme(true);
    let (mut d, c) = Driver::<Host5>::take(m, &info, &pmu).unwrap();
    let mut host = c.c5.map(Handle::erase).unwrap();
    let spec = "instructions:k".parse::<EventSpec>().unwrap();
    host.configure(&mut d, &CounterConfig::counting(spec))
        .unwrap();
    host.enable(&mut d).unwrap();
    // One reservation for both guests: B's counters, which hold A's.
    d.reserve_guest(CounterSet::first(5)).unwrap();
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
            guest(policy(3)),
            amd_program(),
            guest(policy(5)),
            &AMD_MSRS,
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
        amd_v2(3),
        amd_program(),
        amd_v2(6),
        &AMD_MSRS,
        1,
        &mut OwnPmu::new(),
    );
    assert_eq!(first, emulated, "pass-through and emulated");
}

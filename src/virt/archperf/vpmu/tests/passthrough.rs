//! The shared fuzz ([`crate::virt::tests::fuzz`]) on the pass-through
//! world switch ([`PassThroughPmu`]): per policy, 1,000,000 random guest
//! accesses while the guest's counters are loaded on a physical PMU (the
//! model of an Ice Lake, driven by [`ArchPerfDriver`]) beside the host's
//! own counters. An access that [`PassThrough::rule`] passes goes to the
//! hardware (the model) as the guest's instruction would; one that traps
//! is a VM exit ([`PassThroughPmu::exit`]), the access answered by
//! [`PassThroughPmu::wrmsr`], [`PassThroughPmu::rdmsr`] or
//! [`PassThroughPmu::rdpmc`], and a VM entry ([`PassThroughPmu::enter`]);
//! the VMCS's loads of `IA32_PERF_GLOBAL_CTRL` are played on the model.
//! Every answer is held against the KVM rendering ([`super::kvm`]); each
//! accepted write is checked on the hardware (the guest's register holds
//! it once loaded); every 1,000 accesses the guest exits, the host runs
//! its events and its counts and registers are checked, and the guest
//! enters again. Every count is the model's.

use std::string::String;
use std::vec::Vec;

use super::isolation::{random_ecx, random_value};
use super::kvm::IntelKvm;
use crate::access::MsrAccess;
use crate::arch::archperf::driver::{ArchPerfDriver, ArchPerfmon, CounterConfig, Counters};
use crate::arch::archperf::{
    ArchEvent, ArchPerfPmu, Counter, CounterSet, EventSpec, FixedCtrCtrl, PerfEvtSel,
};
use crate::counter::{AnyHandle, Handle, Owner};
use crate::model::archperf::{ArchPerfModel as Model, Config, Event, PebsConfig};
use crate::virt::archperf::{
    GlobalCtrlValues, GuestGp, GuestPolicy, GuestReg, Intercept, PassThroughPmu, WriteAnswer,
};
use crate::virt::tests::fuzz::{Kvm, Subject, fuzz};

type Driver<'s, O> = ArchPerfDriver<'s, O, Model>;

/// A guest whose counters run on the hardware, the KVM rendering, the
/// host's driver with its two counters.
struct Passed<'s, O: Owner> {
    vcpu: PassThroughPmu,
    kvm: IntelKvm,
    d: Driver<'s, O>,
    /// The host's instruction counter (a general counter it keeps) and
    /// its slots counter (fixed counter 3), if it keeps counters.
    host: Vec<AnyHandle<ArchPerfmon>>,
    values: GlobalCtrlValues,
    /// Instructions and slots the host fed.
    fed: u64,
}

/// An error of the hardware where the checks accept, as a #GP no check
/// gives, so that the fuzz reports it.
const HARDWARE_DIFFERS: GuestGp = GuestGp::NoSuchMsr { msr: u32::MAX };

impl<O: Owner> Passed<'_, O> {
    fn vm_exit(&mut self) {
        // "save IA32_PERF_GLOBAL_CTRL", then the host's loaded.
        let saved = self.hardware(0x38F);
        self.d.msr().write_msr(0x38F, self.values.host).unwrap();
        self.vcpu.exit(&mut self.d, Some(saved)).unwrap();
    }

    fn vm_entry(&mut self) {
        self.values = self.vcpu.enter(&mut self.d).unwrap();
        self.d.msr().write_msr(0x38F, self.values.guest).unwrap();
    }

    fn hardware(&mut self, msr: u32) -> u64 {
        self.d.msr().read_msr(msr).unwrap_or(u64::MAX)
    }

    /// What the checks refuse `msr` with, where the hardware refused it.
    fn refused(&self, check: Result<(), GuestGp>) -> GuestGp {
        check.err().unwrap_or(HARDWARE_DIFFERS)
    }
}

impl<O: Owner> Subject for Passed<'_, O> {
    type Reg = GuestReg;
    type Gp = GuestGp;
    const COMMON: &'static [u32] = &[
        0xC1, 0xC2, 0x186, 0x187, 0x309, 0x30A, 0x38D, 0x38E, 0x38F, 0x390, 0x4C1, 0x4C2,
    ];
    fn check_write(&self, msr: u32, value: u64) -> Result<WriteAnswer<GuestReg>, GuestGp> {
        self.vcpu.pmu().check_msr_write(msr, value)
    }
    fn kvm_write(&mut self, msr: u32, value: u64) -> Kvm {
        self.kvm.wrmsr(msr, value)
    }
    fn kvm_read(&self, msr: u32) -> Kvm {
        self.kvm.rdmsr(msr)
    }
    fn kvm_rdpmc(&self, ecx: u32, pce: bool, cpl: u8) -> Option<u64> {
        self.kvm.rdpmc(ecx, pce, cpl)
    }
    fn vpmu_write(&mut self, msr: u32, value: u64) -> Result<bool, GuestGp> {
        match self.vcpu.pass_through().rule(msr) {
            Some(r) if r.write == Intercept::Pass => {
                let check = self.vcpu.pmu().check_msr_write(msr, value).map(|_| ());
                match self.d.msr().write_msr(msr, value) {
                    Ok(()) => Ok(true),
                    Err(_) => Err(self.refused(check)),
                }
            }
            Some(_) => {
                self.vm_exit();
                let r = self.vcpu.wrmsr(msr, value);
                self.vm_entry();
                r
            }
            None => self.vcpu.wrmsr(msr, value),
        }
    }
    fn vpmu_read(&mut self, msr: u32) -> Result<Option<u64>, GuestGp> {
        match self.vcpu.pass_through().rule(msr) {
            Some(r) if r.read == Intercept::Pass => {
                let check = self.vcpu.pmu().check_msr_read(msr).map(|_| ());
                match self.d.msr().read_msr(msr) {
                    Ok(v) => Ok(Some(v)),
                    Err(_) => Err(self.refused(check)),
                }
            }
            Some(_) => {
                self.vm_exit();
                let r = self.vcpu.rdmsr(msr);
                self.vm_entry();
                r
            }
            None => self.vcpu.rdmsr(msr),
        }
    }
    fn vpmu_rdpmc(&mut self, ecx: u32, pce: bool, cpl: u8) -> Option<u64> {
        if self.vcpu.pass_through().rdpmc_exits() {
            self.vm_exit();
            let r = self.vcpu.rdpmc(ecx, pce, cpl).ok();
            self.vm_entry();
            r
        } else if cpl > 0 && !pce {
            None
        } else {
            self.d.msr().rdpmc(ecx).ok()
        }
    }
    fn apply(&mut self, answer: WriteAnswer<GuestReg>) -> Result<(), String> {
        let guest = self.vcpu.pass_through().counters();
        let pmu = *self.vcpu.pmu();
        let (holds, want) = match answer {
            WriteAnswer::Store { reg, value } => match reg {
                GuestReg::Counter(c) | GuestReg::EventSelect(c) if !guest.contains(c) => {
                    return Err(std::format!("{reg:?} is not the guest's"));
                }
                GuestReg::Counter(c) => (self.hardware(c.msr(true)), value & pmu.width_mask(c)),
                GuestReg::EventSelect(c) => {
                    let image = PerfEvtSel::from_bits(value).map_or(0, |v| {
                        v.with_enable(v.enable() && !pmu.counts_nothing(value))
                            .bits()
                    });
                    (self.hardware(c.evtsel().unwrap_or(0)), image)
                }
                GuestReg::FixedCtrCtrl => {
                    let hw = FixedCtrCtrl::from_bits(self.hardware(0x38D));
                    let mut ours = FixedCtrCtrl::from_bits(0);
                    for c in guest.iter().filter(|c| c.is_fixed()) {
                        ours = ours.with(c.number(), hw.get(c.number()));
                    }
                    (ours.bits(), value)
                }
                GuestReg::GlobalCtrl => (self.hardware(0x38F) & guest.bits(), value & guest.bits()),
                GuestReg::GlobalStatus => return Err("a store to the status".into()),
            },
            WriteAnswer::ClearStatus(bits) => (self.hardware(0x38E) & bits & guest.bits(), 0),
            _ => return Ok(()),
        };
        if holds == want {
            Ok(())
        } else {
            Err(std::format!(
                "{answer:?}: the hardware holds {holds:#x}, not {want:#x}"
            ))
        }
    }
    fn run_host(&mut self, k: u64) -> Result<(), String> {
        self.vm_exit();
        let host_bits = self.d.host_global().bits();
        let global = self.hardware(0x38F);
        self.d
            .msr()
            .inject(Event::arch(ArchEvent::InstructionsRetired, k));
        self.d.msr().inject(Event::arch(ArchEvent::TopdownSlots, k));
        self.d.msr().take_pmi();
        self.fed += k;
        let counts: Vec<_> = self.host.iter().map(|h| h.read(&mut self.d)).collect();
        self.vm_entry();
        if global != host_bits {
            return Err(std::format!(
                "GLOBAL_CTRL {global:#x} outside the guest, the host's {host_bits:#x}"
            ));
        }
        if counts.iter().all(|c| *c == Ok(self.fed)) {
            Ok(())
        } else {
            Err(std::format!("the host counted {counts:?} of {}", self.fed))
        }
    }
    fn random_value(rnd: &mut dyn FnMut(u64) -> u64, msr: u32) -> u64 {
        random_value(rnd, msr)
    }
    fn random_ecx(rnd: &mut dyn FnMut(u64) -> u64) -> u32 {
        random_ecx(rnd)
    }
}

/// The host's counter of `event` on `c`, configured and enabled.
fn host_counter<O: Owner>(
    d: &mut Driver<'_, O>,
    counters: &mut Counters<O>,
    c: Counter,
    event: &str,
) -> AnyHandle<ArchPerfmon> {
    let spec = event.parse::<EventSpec>().unwrap();
    let config = CounterConfig::counting(spec);
    let token = match (c.is_fixed(), c.number()) {
        (true, 3) => counters.f3.take().map(Handle::erase),
        (false, 5) => counters.g5.take().map(Handle::erase),
        (false, 7) => counters.g7.take().map(Handle::erase),
        _ => None,
    };
    let mut h = token.unwrap();
    h.configure(d, &config).unwrap();
    h.enable(d).unwrap();
    h
}

/// The fuzz of a guest under `p` in pass-through mode on `host` (without
/// PEBS), the host counting instructions on general counter `general` and
/// slots on fixed counter 3 (`None`: the host keeps no counter).
fn fuzz_passed<O: Owner>(name: &str, host: Config, p: GuestPolicy, general: Option<u8>, seed: u64) {
    let pmu: ArchPerfPmu = crate::testing::archperf_pmu();
    let m = Model::new(Config {
        pebs: PebsConfig::NONE,
        ..host
    });
    let info = crate::detect::detect(&m, &mut m.clone())
        .unwrap()
        .arch_perf()
        .unwrap();
    let (mut d, mut counters) = Driver::<O>::take(m, &info, &pmu).unwrap();
    let host = match general {
        Some(n) => std::vec![
            host_counter(
                &mut d,
                &mut counters,
                Counter::general(n).unwrap(),
                "instructions",
            ),
            host_counter(&mut d, &mut counters, Counter::fixed(3).unwrap(), "slots"),
        ],
        None => Vec::new(),
    };
    let vcpu = PassThroughPmu::new(p.checked().unwrap(), &info).unwrap();
    d.reserve_guest(vcpu.pass_through().counters()).unwrap();
    let mut s = Passed {
        vcpu,
        kvm: IntelKvm::refresh(&p),
        d,
        host,
        values: GlobalCtrlValues { guest: 0, host: 0 },
        fed: 0,
    };
    s.vm_entry();
    fuzz(
        name,
        s,
        seed,
        "the host's counts and GLOBAL_CTRL exact at every exit",
    );
}

/// Version 2, four general and three fixed counters, no full-width
/// writes (KVM's default offer); the host keeps general counters 4-7 and
/// fixed counter 3.
#[test]
fn random_accesses_of_a_version_2_guest_passed_through() {
    crate::owner!(Cpu);
    let p = GuestPolicy {
        host_counters: CounterSet::first(8, 4).difference(CounterSet::first(4, 3)),
        ..GuestPolicy::new(2, 4, 3)
    };
    fuzz_passed::<Cpu>(
        "pass-through v2, 4+3, host keeps 4-7 and fixed 3",
        Config::icelake(),
        p,
        Some(7),
        0x9E37_79B9_7F4A_7C15,
    );
}

/// Version 5, six general and three fixed counters, full-width writes,
/// LLC misses and branch misses unavailable; the host keeps general
/// counters 6 and 7 and fixed counter 3.
#[test]
fn random_accesses_of_a_version_5_guest_passed_through() {
    crate::owner!(Cpu);
    let p = GuestPolicy {
        full_width_writes: true,
        unavailable: 1 << 4 | 1 << 6,
        host_counters: CounterSet::first(8, 4).difference(CounterSet::first(6, 3)),
        ..GuestPolicy::new(5, 6, 3)
    };
    fuzz_passed::<Cpu>(
        "pass-through v5, 6+3, FW, 2 events unavailable",
        Config::icelake(),
        p,
        Some(7),
        0xD1B5_4A32_D192_ED03,
    );
}

/// Version 4 with one general and one fixed counter and full-width
/// writes; the host keeps general counter 5 and fixed counter 3.
#[test]
fn random_accesses_of_a_version_4_guest_with_one_counter_passed_through() {
    crate::owner!(Cpu);
    let p = GuestPolicy {
        full_width_writes: true,
        host_counters: CounterSet::EMPTY
            .with(Counter::general(5).unwrap())
            .with(Counter::fixed(3).unwrap()),
        ..GuestPolicy::new(4, 1, 1)
    };
    fuzz_passed::<Cpu>(
        "pass-through v4, 1+1, FW",
        Config::icelake(),
        p,
        Some(5),
        0x2545_F491_4F6C_DD1D,
    );
}

/// Version 4, every counter of a Skylake host (four general, three fixed,
/// full-width writes): the global registers pass (`IA32_PERF_GLOBAL_CTRL`
/// both ways, the status's reads, the overflow control's writes) and RDPMC
/// does not exit; the guest's `IA32_PERF_GLOBAL_CTRL` comes back through
/// the VM-exit control "save IA32_PERF_GLOBAL_CTRL".
#[test]
fn random_accesses_of_a_guest_with_every_counter_passed_through() {
    crate::owner!(Cpu);
    let p = GuestPolicy {
        full_width_writes: true,
        ..GuestPolicy::new(4, 4, 3)
    };
    fuzz_passed::<Cpu>(
        "pass-through v4, every counter of a Skylake, globals passed",
        Config::skylake(),
        p,
        None,
        0x8CB9_2BA7_2F3D_8DD7,
    );
}

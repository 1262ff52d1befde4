//! The shared fuzz ([`crate::virt::tests::fuzz`]) on the AMD pass-through
//! world switch ([`PassThroughPmu`]): per policy, 1,000,000 random guest
//! accesses while the guest's counters are loaded on a physical PMU (the
//! model of a Zen 4 with SVM enabled, driven by [`AmdDriver`]) beside the
//! host's own counter. An access that [`PassThrough::rule`] passes goes to
//! the hardware (the model) as the guest's instruction would; one that is
//! intercepted is a `#VMEXIT` ([`PassThroughPmu::exit`]), the access
//! answered by [`PassThroughPmu::wrmsr`], [`PassThroughPmu::rdmsr`] or
//! [`PassThroughPmu::rdpmc`], and a `VMRUN` ([`PassThroughPmu::enter`]).
//! Every answer is held against the KVM rendering ([`super::kvm`]); each
//! accepted write is checked on the hardware (the guest's register holds
//! it once loaded, its control as [`GuestPmu::hardware_ctl`] makes it);
//! every 1,000 accesses the guest exits, the host runs its events and its
//! count and `PerfCntrGlobalCtl` are checked, and the guest enters again.
//! Every count is the model's.

use std::string::String;

use super::isolation::{random_ecx, random_value};
use super::kvm::AmdKvm;
use crate::access::MsrAccess;
use crate::arch::amd::driver::{AmdCore, AmdDriver, CounterConfig};
use crate::arch::amd::{AmdPmu, CounterSet, EventSpec};
use crate::counter::{AnyHandle, Handle, Owner};
use crate::model::amd::{AmdModel as Model, Config, Event};
use crate::virt::amd::{
    Generation, GuestGp, GuestPmu, GuestPolicy, GuestReg, PassThrough, PassThroughPmu, WriteAnswer,
};
use crate::virt::archperf::Intercept;
use crate::virt::tests::fuzz::{Kvm, Subject, fuzz};

type Driver<'s, O> = AmdDriver<'s, O, Model>;

const GLOBAL_STATUS: u32 = 0xC000_0300;
const GLOBAL_CTL: u32 = 0xC000_0301;

/// A guest whose counters run on the hardware, the KVM rendering, the
/// host's driver with its counter.
struct Passed<'s, O: Owner> {
    vcpu: PassThroughPmu,
    kvm: AmdKvm,
    d: Driver<'s, O>,
    /// The host's instruction counter (HostOnly), if it keeps counters.
    host: Option<AnyHandle<AmdCore>>,
    /// Instructions the host ran.
    fed: u64,
}

/// An error of the hardware where the checks accept, as a #GP no check
/// gives, so that the fuzz reports it.
const HARDWARE_DIFFERS: GuestGp = GuestGp::NoSuchMsr { msr: u32::MAX };

impl<O: Owner> Passed<'_, O> {
    fn vm_exit(&mut self) {
        self.vcpu.exit(&mut self.d).unwrap();
    }

    fn vm_entry(&mut self) {
        self.vcpu.enter(&mut self.d).unwrap();
    }

    fn hardware(&mut self, msr: u32) -> u64 {
        self.d.msr().read_msr(msr).unwrap_or(u64::MAX)
    }
}

impl<O: Owner> Subject for Passed<'_, O> {
    type Reg = GuestReg;
    type Gp = GuestGp;
    const COMMON: &'static [u32] = &[
        0xC001_0000,
        0xC001_0001,
        0xC001_0004,
        0xC001_0005,
        0xC001_0200,
        0xC001_0201,
        0xC001_0206,
        0xC001_0209,
        0xC000_0300,
        0xC000_0301,
        0xC000_0302,
        0xC000_0303,
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
                    Err(_) => Err(check.err().unwrap_or(HARDWARE_DIFFERS)),
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
                    Err(_) => Err(check.err().unwrap_or(HARDWARE_DIFFERS)),
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
        if self.vcpu.pass_through().rdpmc_intercepted() {
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
        let pmu: GuestPmu = *self.vcpu.pmu();
        let (holds, want) = match answer {
            WriteAnswer::Store { reg, value } => match reg {
                GuestReg::Counter(c) | GuestReg::Control(c) if !guest.contains(c) => {
                    return Err(std::format!("{reg:?} is not the guest's"));
                }
                GuestReg::Counter(c) => (self.hardware(c.ctr(true)), value & pmu.counter_mask()),
                GuestReg::Control(c) => (self.hardware(c.ctl(true)), pmu.hardware_ctl(value)),
                GuestReg::GlobalCtl => (
                    self.hardware(GLOBAL_CTL) & guest.bits(),
                    value & guest.bits(),
                ),
                GuestReg::GlobalStatus => return Err("a store to the status".into()),
            },
            WriteAnswer::ClearStatus(bits) => {
                (self.hardware(GLOBAL_STATUS) & bits & guest.bits(), 0)
            }
            WriteAnswer::SetStatus(bits) => (
                self.hardware(GLOBAL_STATUS) & bits & guest.bits(),
                bits & guest.bits(),
            ),
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
        let global = self.hardware(GLOBAL_CTL);
        self.d.msr().inject(Event::new(0xC0, 0, k));
        self.d.msr().take_pmi();
        self.fed += k;
        let count = self.host.as_mut().map(|h| h.read(&mut self.d));
        self.vm_entry();
        if global != host_bits {
            return Err(std::format!(
                "PerfCntrGlobalCtl {global:#x} outside the guest, the host's {host_bits:#x}"
            ));
        }
        match count {
            None => Ok(()),
            Some(Ok(n)) if n == self.fed => Ok(()),
            Some(c) => Err(std::format!("the host counted {c:?} of {}", self.fed)),
        }
    }
    fn random_value(rnd: &mut dyn FnMut(u64) -> u64, msr: u32) -> u64 {
        random_value(rnd, msr)
    }
    fn random_ecx(rnd: &mut dyn FnMut(u64) -> u64) -> u32 {
        random_ecx(rnd)
    }
}

/// The fuzz of a guest under `p` in pass-through mode on a Zen 4, the
/// host counting its instructions (HostOnly) on counter 5 where it keeps
/// it.
fn fuzz_passed<O: Owner>(name: &str, p: GuestPolicy, seed: u64) {
    let pmu: AmdPmu = crate::testing::amd_pmu();
    let mut m = Model::new(Config::zen4());
    let info = crate::detect::detect(&m, &mut m.clone())
        .unwrap()
        .usable_amd()
        .unwrap();
    m.set_svme(true);
    let (mut d, mut counters) = Driver::<O>::take(m, &info, &pmu).unwrap();
    let host = if p.host_counters.is_empty() {
        None
    } else {
        let spec = "instructions".parse::<EventSpec>().unwrap().host_only();
        let mut h = counters.c5.take().map(Handle::erase).unwrap();
        h.configure(&mut d, &CounterConfig::counting(spec)).unwrap();
        h.enable(&mut d).unwrap();
        Some(h)
    };
    let vcpu = PassThroughPmu::new(p.checked().unwrap(), &info).unwrap();
    let _: &PassThrough = vcpu.pass_through();
    d.reserve_guest(vcpu.pass_through().counters()).unwrap();
    let mut s = Passed {
        vcpu,
        kvm: AmdKvm::refresh(&p),
        d,
        host,
        fed: 0,
    };
    s.vm_entry();
    fuzz(
        name,
        s,
        seed,
        "on a Zen 4 with SVM; the host's count and PerfCntrGlobalCtl exact at every exit",
    );
}

/// The four legacy counters (the guest's `EN` alone starts them); the host
/// keeps counters 4 and 5.
#[test]
fn random_accesses_of_a_legacy_guest_passed_through() {
    crate::owner!(Cpu);
    let p = GuestPolicy {
        host_counters: CounterSet::first(6).difference(CounterSet::first(4)),
        ..GuestPolicy::new(Generation::Legacy)
    };
    fuzz_passed::<Cpu>(
        "pass-through legacy, host keeps 4-5",
        p,
        0x9E37_79B9_7F4A_7C15,
    );
}

/// PerfCtrExtCore's six counters, every counter of the host (RDPMC not
/// intercepted; no global registers).
#[test]
fn random_accesses_of_a_perf_ctr_ext_core_guest_passed_through() {
    crate::owner!(Cpu);
    let p = GuestPolicy::new(Generation::PerfCtrExtCore);
    fuzz_passed::<Cpu>(
        "pass-through PerfCtrExtCore, 6 counters",
        p,
        0xD1B5_4A32_D192_ED03,
    );
}

/// PerfMonV2 with three counters; the host keeps counters 3-5.
#[test]
fn random_accesses_of_a_perfmon_v2_guest_passed_through() {
    crate::owner!(Cpu);
    let p = GuestPolicy {
        host_counters: CounterSet::first(6).difference(CounterSet::first(3)),
        ..GuestPolicy::new(Generation::PerfMonV2 { counters: 3 })
    };
    fuzz_passed::<Cpu>(
        "pass-through PerfMonV2, 3 counters, host keeps 3-5",
        p,
        0xA076_1D64_78BD_642F,
    );
}

/// PerfMonV2 with every counter of the Zen 4: the global registers pass
/// (`PerfCntrGlobalCtl` both ways, the status's reads, the clear and set
/// registers' writes) and RDPMC is not intercepted.
#[test]
fn random_accesses_of_a_guest_with_every_counter_passed_through() {
    crate::owner!(Cpu);
    let p = GuestPolicy::new(Generation::PerfMonV2 { counters: 6 });
    fuzz_passed::<Cpu>(
        "pass-through PerfMonV2, every counter of a Zen 4, globals passed",
        p,
        0x8CB9_2BA7_2F3D_8DD7,
    );
}

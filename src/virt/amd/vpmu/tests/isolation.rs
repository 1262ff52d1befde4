//! The isolation property of the AMD guest checks, fuzzed: per policy,
//! 1,000,000 random guest accesses in and around both vendors' PMU
//! ranges, each answered by the checks exactly as KVM answers it (the
//! [`kvm`] rendering), the same by the emulated PMU, and, when accepted,
//! applied to a physical PMU (the model of a Zen 4 with SVM enabled) as a
//! VMM that runs the guest's counters there would apply it (the control
//! as [`GuestPmu::hardware_ctl`] makes it, `PerfCntrGlobalCtl` merged with
//! the host's bits), beside the host's own counters: no applied write
//! names a host counter, the host's registers never change, its counts
//! are exact, and no guest counter on the hardware counts the host's
//! events. Every count is the model's.

use std::string::String;
use std::vec::Vec;

use super::kvm::AmdKvm;
use super::*;
use crate::arch::amd::CounterSet;
use crate::model::amd::AmdModel as Model;
use crate::virt::amd::{GuestPmu, GuestPolicy};
use crate::virt::tests::fuzz::{Kvm, Subject, fuzz, u64_of};
use crate::virt::x86::{PmuMsr, classify};

/// A random value for `msr`.
pub(super) fn random_value(rnd: &mut dyn FnMut(u64) -> u64, msr: u32) -> u64 {
    match rnd(4) {
        0 => u64_of(rnd),
        1 => rnd(1 << 32),
        2 => 1 << rnd(64),
        _ => match classify(msr) {
            PmuMsr::LegacyCtr(_) | PmuMsr::CoreCtr(_) => match rnd(3) {
                0 => (1 << 48) - 1 - rnd(64),
                1 => u64::MAX - rnd(64),
                _ => rnd(1000),
            },
            PmuMsr::LegacyCtl(_) | PmuMsr::CoreCtl(_) => {
                let flags = [16, 17, 18, 19, 20, 21, 22, 23, 36, 40, 41, 42]
                    .into_iter()
                    .filter(|_| rnd(3) == 0)
                    .fold(0, |a, b| a | 1 << b);
                [0x76, 0xC0, 0xC2][rnd(3) as usize] | rnd(4) << 24 | flags
            }
            _ => rnd(1 << 8) | if rnd(4) == 0 { 1 << rnd(64) } else { 0 },
        },
    }
}

/// The host's own counting on the physical PMU (SVM enabled): each
/// counter it keeps counts retired instructions in host mode (HostOnly).
struct Host {
    model: Model,
    keeps: CounterSet,
    fed: u64,
    images: Vec<(u32, u64)>,
}

impl Host {
    fn new(keeps: CounterSet) -> Host {
        let mut model = Model::new(crate::model::amd::Config::zen4());
        model.set_svme(true);
        for c in keeps.iter() {
            let ctl = 0xC0 | 1 << 16 | 1 << 17 | 1 << 22 | 1 << 41;
            model.write_msr(c.ctl(true), ctl).unwrap();
        }
        model.write_msr(0xC000_0301, keeps.bits()).unwrap();
        let images = keeps
            .iter()
            .map(|c| c.ctl(true))
            .chain([0xC000_0301])
            .map(|m| (m, model.read_msr(m).unwrap()))
            .collect();
        Host {
            model,
            keeps,
            fed: 0,
            images,
        }
    }

    /// A guest's accepted write as a VMM running the guest's counters on
    /// the hardware applies it.
    fn apply(&mut self, pmu: &GuestPmu, answer: WriteAnswer<GuestReg>) -> Result<(), String> {
        let guest = pmu.counters();
        let (msr, value) = match answer {
            WriteAnswer::Store { reg, value } => match reg {
                GuestReg::Control(c) | GuestReg::Counter(c)
                    if !guest.contains(c) || self.keeps.contains(c) =>
                {
                    return Err(std::format!("{reg:?} is not the guest's"));
                }
                GuestReg::Control(c) => (c.ctl(true), pmu.hardware_ctl(value)),
                GuestReg::Counter(c) => (c.ctr(true), value),
                GuestReg::GlobalCtl => {
                    if value & self.keeps.bits() != 0 {
                        return Err(std::format!("{value:#x} sets a host bit"));
                    }
                    (0xC000_0301, self.keeps.bits() | value)
                }
                GuestReg::GlobalStatus => return Err("a store to the status".into()),
            },
            WriteAnswer::ClearStatus(bits) => (0xC000_0302, bits & guest.bits()),
            WriteAnswer::SetStatus(bits) => (0xC000_0303, bits & guest.bits()),
            _ => return Ok(()),
        };
        self.model
            .write_msr(msr, value)
            .map_err(|f| std::format!("the hardware refuses {msr:#x} {value:#x}: {f}"))
    }

    /// Feeds `k` retired instructions in host mode: the host's counters
    /// count them, the guest's (GuestOnly) do not.
    fn run(&mut self, guest: CounterSet, k: u64) -> Result<(), String> {
        let before: Vec<u64> = guest.iter().map(|c| self.model.counter(ix(c))).collect();
        self.model.inject(Event::new(RETIRED_INSTRUCTIONS, 0, k));
        while self.model.take_pmi() {}
        self.fed += k;
        for c in self.keeps.iter() {
            let got = self.model.counter(ix(c));
            if got != self.fed {
                return Err(std::format!(
                    "host {} counted {got} of {}",
                    c.name(),
                    self.fed
                ));
            }
        }
        for (c, b) in guest.iter().zip(before) {
            if self.model.counter(ix(c)) != b {
                return Err(std::format!("guest {} counted the host's events", c.name()));
            }
        }
        for &(m, v) in &self.images {
            let now = self.model.read_msr(m).unwrap_or(0);
            let mask = if m == 0xC000_0301 {
                self.keeps.bits()
            } else {
                !0
            };
            if now & mask != v & mask {
                return Err(std::format!("host register {m:#x} is now {now:#x}"));
            }
        }
        Ok(())
    }
}

/// A random RDPMC index.
pub(super) fn random_ecx(rnd: &mut dyn FnMut(u64) -> u64) -> u32 {
    match rnd(3) {
        0 => rnd(8) as u32,
        1 => 1 << rnd(32) | rnd(4) as u32,
        _ => rnd(1 << 32) as u32,
    }
}

/// Counter `c`'s number as the model indexes it.
fn ix(c: Counter) -> usize {
    usize::from(c.index())
}

/// An AMD guest's checks, KVM, emulated PMU and physical PMU.
struct Amd {
    pmu: GuestPmu,
    kvm: AmdKvm,
    vpmu: VirtualPmu,
    host: Host,
}

impl Subject for Amd {
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
        0xC000_0301,
        0xC000_0302,
        0xC000_0303,
        0xC1,
    ];
    fn check_write(&self, msr: u32, value: u64) -> Result<WriteAnswer<GuestReg>, GuestGp> {
        self.pmu.check_msr_write(msr, value)
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
        self.vpmu.wrmsr(msr, value)
    }
    fn vpmu_read(&mut self, msr: u32) -> Result<Option<u64>, GuestGp> {
        self.vpmu.rdmsr(msr)
    }
    fn vpmu_rdpmc(&mut self, ecx: u32, pce: bool, cpl: u8) -> Option<u64> {
        self.vpmu.rdpmc(ecx, pce, cpl).ok()
    }
    fn apply(&mut self, answer: WriteAnswer<GuestReg>) -> Result<(), String> {
        self.host.apply(&self.pmu, answer)
    }
    fn run_host(&mut self, k: u64) -> Result<(), String> {
        self.host.run(self.pmu.counters(), k)
    }
    fn random_value(rnd: &mut dyn FnMut(u64) -> u64, msr: u32) -> u64 {
        random_value(rnd, msr)
    }
    fn random_ecx(rnd: &mut dyn FnMut(u64) -> u64) -> u32 {
        random_ecx(rnd)
    }
}

/// The fuzz of a guest under `p`.
fn fuzz_amd(name: &str, p: GuestPolicy, seed: u64) {
    let pmu = p.checked().unwrap();
    let subject = Amd {
        pmu,
        kvm: AmdKvm::refresh(&p),
        vpmu: VirtualPmu::new(pmu),
        host: Host::new(p.host_counters),
    };
    fuzz(
        name,
        subject,
        seed,
        "reserved bits dropped; the host's counts exact, the guest's counters on the hardware counted none of the host's events",
    );
}

/// The four legacy counters; the host keeps counters 4 and 5.
#[test]
fn random_accesses_of_a_legacy_guest() {
    let p = GuestPolicy {
        host_counters: CounterSet::first(6).difference(CounterSet::first(4)),
        ..GuestPolicy::new(Generation::Legacy)
    };
    fuzz_amd("legacy, host keeps 4-5", p, 0x9E37_79B9_7F4A_7C15);
}

/// PerfCtrExtCore's six counters: the host keeps none.
#[test]
fn random_accesses_of_a_perf_ctr_ext_core_guest() {
    let p = GuestPolicy::new(Generation::PerfCtrExtCore);
    fuzz_amd("PerfCtrExtCore, 6 counters", p, 0xD1B5_4A32_D192_ED03);
}

/// PerfMonV2 with three counters (the fourth legacy pair a #GP); the host
/// keeps counters 3-5.
#[test]
fn random_accesses_of_a_perfmon_v2_guest() {
    let p = GuestPolicy {
        host_counters: CounterSet::first(6).difference(CounterSet::first(3)),
        ..GuestPolicy::new(Generation::PerfMonV2 { counters: 3 })
    };
    fuzz_amd(
        "PerfMonV2, 3 counters, host keeps 3-5",
        p,
        0xA076_1D64_78BD_642F,
    );
}

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

use super::kvm::{AmdKvm, Kvm};
use super::*;
use crate::arch::amd::CounterSet;
use crate::model::amd::AmdModel as Model;
use crate::testing::rng;
use crate::virt::amd::{GuestPmu, GuestPolicy};
use crate::virt::x86::{PMU_MSR_RANGES, PmuMsr, classify};

/// A random 64-bit value.
fn u64_of(rnd: &mut impl FnMut(u64) -> u64) -> u64 {
    rnd(1 << 32) << 32 | rnd(1 << 32)
}

/// The registers of the first counters, the globals and Intel's P6
/// counters: drawn more often than their share.
const COMMON: [u32; 12] = [
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

/// A random MSR, as the architectural PMU's fuzz draws them.
fn random_msr(rnd: &mut impl FnMut(u64) -> u64) -> u32 {
    let r = &PMU_MSR_RANGES[rnd(PMU_MSR_RANGES.len() as u64) as usize];
    let (lo, hi) = (u64::from(*r.start()), u64::from(*r.end()));
    (match rnd(24) {
        16.. => u64::from(COMMON[rnd(COMMON.len() as u64) as usize]),
        0..=11 => lo + rnd(hi - lo + 1),
        12 => lo.wrapping_sub(1),
        13 => hi + 1,
        14 => rnd(0x800),
        _ => 0xC000_0000 + rnd(0x1_2000),
    }) as u32
}

/// A random value for `msr`.
fn random_value(rnd: &mut impl FnMut(u64) -> u64, msr: u32) -> u64 {
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

/// Counter `c`'s number as the model indexes it.
fn ix(c: Counter) -> usize {
    usize::from(c.index())
}

/// What the accesses did.
#[derive(Debug, Default)]
struct Tally {
    applied: u64,
    dropped: u64,
    refused: u64,
    elsewhere: u64,
    reads: u64,
    rdpmcs: u64,
}

/// `n` random accesses of a guest under `p`.
fn random_accesses(p: GuestPolicy, seed: u64, n: u64) -> Tally {
    let pmu = p.checked().unwrap();
    let mut kvm = AmdKvm::refresh(&p);
    let mut vpmu = VirtualPmu::new(pmu);
    let mut host = Host::new(p.host_counters);
    let mut rnd = rng(seed);
    let mut t = Tally::default();
    let mut wrong: Vec<String> = Vec::new();
    for i in 0..n {
        let msr = random_msr(&mut rnd);
        match rnd(10) {
            0..=5 => {
                let value = random_value(&mut rnd, msr);
                let answer = pmu.check_msr_write(msr, value);
                let k = kvm.wrmsr(msr, value);
                let v = vpmu.wrmsr(msr, value);
                let agree = match (&answer, k) {
                    (Err(_), Kvm::Gp) | (Ok(WriteAnswer::NotPmu), Kvm::Elsewhere) => true,
                    (Ok(WriteAnswer::NotPmu), _) | (Ok(_), Kvm::Elsewhere) => false,
                    (Ok(_), Kvm::Pmu(_)) => true,
                    _ => false,
                };
                let same = match (&answer, v) {
                    (Err(a), Err(b)) => *a == b,
                    (Ok(WriteAnswer::NotPmu), Ok(false)) => true,
                    (Ok(a), Ok(true)) => *a != WriteAnswer::NotPmu,
                    _ => false,
                };
                if !agree || !same {
                    wrong.push(std::format!(
                        "WRMSR {msr:#x} {value:#x}: checks {answer:?}, KVM {k:?}, vPMU {v:?}"
                    ));
                }
                match answer {
                    Ok(WriteAnswer::NotPmu) => t.elsewhere += 1,
                    Ok(WriteAnswer::Drop) => t.dropped += 1,
                    Ok(a) => {
                        t.applied += 1;
                        if let Err(e) = host.apply(&pmu, a) {
                            wrong.push(std::format!("WRMSR {msr:#x} {value:#x}: {e}"));
                        }
                    }
                    Err(_) => t.refused += 1,
                }
            }
            6..=8 => {
                t.reads += 1;
                let k = kvm.rdmsr(msr);
                let v = vpmu.rdmsr(msr);
                let same = match (k, v) {
                    (Kvm::Gp, Err(_)) | (Kvm::Elsewhere, Ok(None)) => true,
                    (Kvm::Pmu(a), Ok(Some(b))) => a == b,
                    _ => false,
                };
                if !same {
                    wrong.push(std::format!("RDMSR {msr:#x}: KVM {k:?}, vPMU {v:?}"));
                }
            }
            _ => {
                t.rdpmcs += 1;
                let ecx = match rnd(3) {
                    0 => rnd(8) as u32,
                    1 => 1 << rnd(32) | rnd(4) as u32,
                    _ => rnd(1 << 32) as u32,
                };
                let (pce, cpl) = (rnd(2) == 0, [0, 3][rnd(2) as usize]);
                let k = kvm.rdpmc(ecx, pce, cpl);
                let v = vpmu.rdpmc(ecx, pce, cpl).ok();
                if k != v {
                    wrong.push(std::format!("RDPMC {ecx:#x}: KVM {k:?}, vPMU {v:?}"));
                }
            }
        }
        if i % 1000 == 999
            && let Err(e) = host.run(pmu.counters(), 1 + rnd(50))
        {
            wrong.push(std::format!("after access {i}: {e}"));
        }
        if wrong.len() > 8 {
            break;
        }
    }
    if let Err(e) = host.run(pmu.counters(), 1) {
        wrong.push(e);
    }
    assert!(wrong.is_empty(), "{p:?}: {wrong:#?}");
    t
}

/// Runs `n` accesses under `p`, reports, checks each kind of answer
/// happened.
fn fuzz(name: &str, p: GuestPolicy, seed: u64) {
    let n = 1_000_000;
    let t = random_accesses(p, seed, n);
    std::println!(
        "{name}: {n} random accesses: {} writes applied (KVM's answer, the hardware took each, no host register, reserved bits dropped), {} dropped, {} #GP, {} the VMM's; {} reads and {} RDPMCs as KVM answers them; the host's counts exact, the guest's counters on the hardware counted none of the host's events (model)",
        t.applied,
        t.dropped,
        t.refused,
        t.elsewhere,
        t.reads,
        t.rdpmcs
    );
    assert!(t.applied > n / 20, "{name}: {t:?}");
    assert!(t.refused > n / 10, "{name}: {t:?}");
    assert!(
        t.dropped > n / 200 && t.elsewhere > n / 200,
        "{name}: {t:?}"
    );
    assert!(t.reads > n / 5 && t.rdpmcs > n / 20, "{name}: {t:?}");
}

/// The four legacy counters; the host keeps counters 4 and 5.
#[test]
fn random_accesses_of_a_legacy_guest() {
    let p = GuestPolicy {
        host_counters: CounterSet::first(6).difference(CounterSet::first(4)),
        ..GuestPolicy::new(Generation::Legacy)
    };
    fuzz("legacy, host keeps 4-5", p, 0x9E37_79B9_7F4A_7C15);
}

/// PerfCtrExtCore's six counters: the host keeps none.
#[test]
fn random_accesses_of_a_perf_ctr_ext_core_guest() {
    let p = GuestPolicy::new(Generation::PerfCtrExtCore);
    fuzz("PerfCtrExtCore, 6 counters", p, 0xD1B5_4A32_D192_ED03);
}

/// PerfMonV2 with three counters (the fourth legacy pair a #GP); the host
/// keeps counters 3-5.
#[test]
fn random_accesses_of_a_perfmon_v2_guest() {
    let p = GuestPolicy {
        host_counters: CounterSet::first(6).difference(CounterSet::first(3)),
        ..GuestPolicy::new(Generation::PerfMonV2 { counters: 3 })
    };
    fuzz(
        "PerfMonV2, 3 counters, host keeps 3-5",
        p,
        0xA076_1D64_78BD_642F,
    );
}

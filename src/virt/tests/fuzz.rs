//! The fuzz of a guest PMU's checks, one driver for both vendors: random
//! accesses (WRMSR, RDMSR, RDPMC) of random MSRs and values in and around
//! both vendors' PMU ranges, each answered by the checks, by a rendering
//! of KVM in its own terms, and by the emulated PMU, all three held
//! against each other; each accepted write applied to a physical PMU
//! beside the host's own counters, whose registers and counts are checked
//! every 1,000 accesses. Each architecture's test says what its subject
//! is ([`Subject`]).

use core::fmt::Debug;
use std::string::String;
use std::vec::Vec;

use crate::testing::rng;
use crate::virt::answer::WriteAnswer;
use crate::virt::x86::PMU_MSR_RANGES;

/// What KVM does with an access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kvm {
    /// #GP (a handler returned 1).
    Gp,
    /// Handled by the PMU code: the value read (0 for a write).
    Pmu(u64),
    /// Handled elsewhere: the VMM's own register, or none of the PMU's.
    Elsewhere,
}

/// A guest PMU under test: its checks, KVM's rendering, the emulated PMU,
/// the physical PMU beside the host.
pub(crate) trait Subject {
    /// The guest's registers the answers name.
    type Reg: Debug + PartialEq + Copy;
    /// Why an access is a #GP.
    type Gp: Debug + PartialEq + Copy;
    /// MSRs drawn more often than their share.
    const COMMON: &'static [u32];
    fn check_write(&self, msr: u32, value: u64) -> Result<WriteAnswer<Self::Reg>, Self::Gp>;
    fn kvm_write(&mut self, msr: u32, value: u64) -> Kvm;
    fn kvm_read(&self, msr: u32) -> Kvm;
    fn kvm_rdpmc(&self, ecx: u32, pce: bool, cpl: u8) -> Option<u64>;
    fn vpmu_write(&mut self, msr: u32, value: u64) -> Result<bool, Self::Gp>;
    fn vpmu_read(&mut self, msr: u32) -> Result<Option<u64>, Self::Gp>;
    fn vpmu_rdpmc(&mut self, ecx: u32, pce: bool, cpl: u8) -> Option<u64>;
    /// An accepted write applied to the physical PMU; `Err` if the
    /// hardware refuses it or it reaches a host register.
    fn apply(&mut self, answer: WriteAnswer<Self::Reg>) -> Result<(), String>;
    /// `k` of the host's events on the physical PMU; `Err` if the host's
    /// counts or registers are not what it programmed.
    fn run_host(&mut self, k: u64) -> Result<(), String>;
    /// A value for `msr`, often built from its fields.
    fn random_value(rnd: &mut dyn FnMut(u64) -> u64, msr: u32) -> u64;
    /// An RDPMC operand.
    fn random_ecx(rnd: &mut dyn FnMut(u64) -> u64) -> u32;
}

/// A random 64-bit value.
pub(crate) fn u64_of(rnd: &mut dyn FnMut(u64) -> u64) -> u64 {
    rnd(1 << 32) << 32 | rnd(1 << 32)
}

/// A random MSR: one of `common`, in the PMU ranges of either vendor, some
/// beside them, some anywhere low.
fn random_msr(rnd: &mut dyn FnMut(u64) -> u64, common: &[u32]) -> u32 {
    let r = &PMU_MSR_RANGES[rnd(PMU_MSR_RANGES.len() as u64) as usize];
    let (lo, hi) = (u64::from(*r.start()), u64::from(*r.end()));
    (match rnd(24) {
        16.. => u64::from(common[rnd(common.len() as u64) as usize]),
        0..=11 => lo + rnd(hi - lo + 1),
        12 => lo.wrapping_sub(1),
        13 => hi + 1,
        14 => rnd(0x800),
        _ => 0xC000_0000 + rnd(0x1_2000),
    }) as u32
}

/// What the accesses did.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    applied: u64,
    dropped: u64,
    refused: u64,
    elsewhere: u64,
    reads: u64,
    rdpmcs: u64,
}

/// `n` random accesses of the subject's guest, checked as the module says.
fn random_accesses<S: Subject>(s: &mut S, seed: u64, n: u64) -> Tally {
    let mut rnd = rng(seed);
    let mut t = Tally::default();
    let mut wrong: Vec<String> = Vec::new();
    for i in 0..n {
        let msr = random_msr(&mut rnd, S::COMMON);
        match rnd(10) {
            0..=5 => {
                let value = S::random_value(&mut rnd, msr);
                let answer = s.check_write(msr, value);
                let k = s.kvm_write(msr, value);
                let v = s.vpmu_write(msr, value);
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
                        if let Err(e) = s.apply(a) {
                            wrong.push(std::format!("WRMSR {msr:#x} {value:#x}: {e}"));
                        }
                    }
                    Err(_) => t.refused += 1,
                }
            }
            6..=8 => {
                t.reads += 1;
                let k = s.kvm_read(msr);
                let v = s.vpmu_read(msr);
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
                let ecx = S::random_ecx(&mut rnd);
                let (pce, cpl) = (rnd(2) == 0, [0, 3][rnd(2) as usize]);
                let k = s.kvm_rdpmc(ecx, pce, cpl);
                let v = s.vpmu_rdpmc(ecx, pce, cpl);
                if k != v {
                    wrong.push(std::format!(
                        "RDPMC {ecx:#x} {pce} {cpl}: KVM {k:?}, vPMU {v:?}"
                    ));
                }
            }
        }
        if i % 1000 == 999
            && let Err(e) = s.run_host(1 + rnd(50))
        {
            wrong.push(std::format!("after access {i}: {e}"));
        }
        if wrong.len() > 8 {
            break;
        }
    }
    if let Err(e) = s.run_host(1) {
        wrong.push(e);
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    t
}

/// Runs 1,000,000 accesses (a tenth of them without `PMU_FUZZ=full`:
/// [`crate::testing::fuzz_cases`]) of `s`'s guest, reports them (`host` says what
/// the host's side showed), and checks each kind of answer happened, so
/// that no check above is vacuous.
pub(crate) fn fuzz<S: Subject>(name: &str, mut s: S, seed: u64, host: &str) {
    let n = crate::testing::fuzz_cases(1_000_000);
    let t = random_accesses(&mut s, seed, n);
    std::println!(
        "{name}: {n} random accesses: {} writes applied (KVM's answer, the hardware took each, no host register), {} dropped, {} #GP, {} the VMM's; {} reads and {} RDPMCs as KVM answers them; {host} (model)",
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

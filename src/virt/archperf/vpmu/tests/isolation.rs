//! The isolation property of the architectural PMU's guest checks, fuzzed:
//! per policy, 1,000,000 random guest accesses (WRMSR, RDMSR, RDPMC of
//! random MSRs and values in and around both vendors' PMU ranges), each
//!
//! * answered by the checks exactly as KVM answers it (the [`kvm`]
//!   rendering, written in KVM's terms): the same #GPs, the same values
//!   read, the same registers changed;
//! * answered the same by the emulated PMU ([`VirtualPmu`]), whose reads
//!   equal KVM's;
//! * applied, when the checks accept it, to a physical PMU (the model of
//!   an Ice Lake) as a VMM that runs the guest's counters on the hardware
//!   would apply it (a guest register written to the physical register
//!   that holds it, `IA32_PERF_GLOBAL_CTRL` and `IA32_FIXED_CTR_CTRL`
//!   merged with the host's bits), while the host's own counters count
//!   there: no applied write faults on the hardware, none names a host
//!   counter, the host's registers never change and its counts are exact.
//!
//! Every count is the model's.

use std::string::String;
use std::vec::Vec;

use super::kvm::{IntelKvm, Kvm};
use super::*;
use crate::arch::archperf::CounterSet;
use crate::model::archperf::{ArchEvent as ModelEvent, ArchPerfModel as Model};
use crate::testing::rng;
use crate::virt::archperf::GuestPolicy;
use crate::virt::x86::PMU_MSR_RANGES;

/// A random 64-bit value.
fn u64_of(rnd: &mut impl FnMut(u64) -> u64) -> u64 {
    rnd(1 << 32) << 32 | rnd(1 << 32)
}

/// The registers of the first counters of each kind, which most guests
/// have: drawn more often than their share.
const COMMON: [u32; 12] = [
    0xC1, 0xC2, 0x186, 0x187, 0x309, 0x30A, 0x38D, 0x38E, 0x38F, 0x390, 0x4C1, 0x4C2,
];

/// A random MSR: the common ones, in the PMU ranges of either vendor, some
/// beside them, some anywhere low.
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

/// A random value for `msr`: any 64 bits, 32, one bit, or one built from
/// the register's fields (so that accepted writes are common).
fn random_value(rnd: &mut impl FnMut(u64) -> u64, msr: u32) -> u64 {
    let any = |rnd: &mut dyn FnMut(u64) -> u64, bits: &[u64]| {
        bits.iter()
            .filter(|_| rnd(3) == 0)
            .fold(0, |a, &b| a | 1 << b)
    };
    match rnd(5) {
        0 => u64_of(rnd),
        1 => rnd(1 << 32),
        2 => 1 << rnd(64),
        _ => match classify(msr) {
            PmuMsr::Pmc(_) | PmuMsr::FullWidthPmc(_) | PmuMsr::FixedCounter(_) => match rnd(4) {
                0 => rnd(1 << 48),
                1 => (1 << 48) - 1 - rnd(64),
                2 => u64::MAX - rnd(1 << 20),
                _ => rnd(1000),
            },
            PmuMsr::EventSelect(_) => {
                let events = [(0x3C, 0), (0xC0, 0), (0x3C, 1), (0x2E, 0x4F), (0x2E, 0x41)];
                let (select, umask) = events[rnd(events.len() as u64) as usize];
                let flags = any(rnd, &[16, 17, 18, 19, 20, 22, 23]);
                let rare = if rnd(8) == 0 {
                    1 << [21, 32, 33, 34][rnd(4) as usize]
                } else {
                    0
                };
                select | umask << 8 | flags | rnd(4) << 24 | rare
            }
            PmuMsr::FixedCtrCtrl => {
                let mut v = 0;
                for i in 0..4 {
                    v |= (rnd(16) & if rnd(6) == 0 { 0xF } else { 0xB }) << (4 * i);
                }
                v
            }
            PmuMsr::GlobalCtrl | PmuMsr::GlobalOvfCtrl | PmuMsr::GlobalStatus => any(
                rnd,
                &[0, 1, 2, 3, 4, 5, 6, 7, 32, 33, 34, 35, 55, 58, 61, 62, 63],
            ),
            PmuMsr::MiscEnable => (1 << 7 | 1 << 11 | 1 << 12) ^ any(rnd, &[0, 3, 7, 11, 12]),
            PmuMsr::DebugCtl => any(rnd, &[0, 1, 11, 12, 14]),
            _ => rnd(1 << 48),
        },
    }
}

/// The physical PMU: an Ice Lake (8 general counters, 4 fixed, 48 bits,
/// full-width writes), without PEBS.
fn host_config() -> crate::model::archperf::Config {
    crate::model::archperf::Config {
        pebs: crate::model::archperf::PebsConfig::NONE,
        ..crate::model::archperf::Config::icelake()
    }
}

/// The host's own counting on the physical PMU: each general counter it
/// keeps counts instructions at every level, each fixed one its event.
struct Host {
    model: Model,
    keeps: CounterSet,
    /// Instructions and TOPDOWN.SLOTS fed.
    fed: [u64; 2],
    /// The host's registers as it programmed them: (MSR, value).
    images: Vec<(u32, u64)>,
}

impl Host {
    fn new(keeps: CounterSet) -> Host {
        let mut model = Model::new(host_config());
        let mut fixed_ctrl = 0;
        for c in keeps.iter() {
            if c.is_fixed() {
                fixed_ctrl |= 0x3 << (4 * c.number());
            } else {
                let sel = 0xC0 | 1 << 16 | 1 << 17 | 1 << 22;
                model.write_msr(0x186 + u32::from(c.number()), sel).unwrap();
            }
        }
        model.write_msr(0x38D, fixed_ctrl).unwrap();
        model.write_msr(0x38F, keeps.bits()).unwrap();
        let images = keeps
            .iter()
            .filter_map(|c| c.evtsel())
            .chain([0x38D, 0x38F])
            .map(|m| (m, model.read_msr(m).unwrap()))
            .collect();
        Host {
            model,
            keeps,
            fed: [0; 2],
            images,
        }
    }

    /// The host's bits of a shared register image.
    fn kept(&self, msr: u32) -> u64 {
        let mut fields = 0;
        for c in self.keeps.iter().filter(|c| c.is_fixed()) {
            fields |= 0xF << (4 * c.number());
        }
        match msr {
            0x38D => fields,
            _ => self.keeps.bits(),
        }
    }

    /// A guest's accepted write, as a VMM that runs the guest's counters
    /// on the hardware applies it; `Err` if the hardware refuses it or it
    /// reaches a host register.
    fn apply(&mut self, guest: CounterSet, answer: WriteAnswer<GuestReg>) -> Result<(), String> {
        let (msr, value) = match answer {
            WriteAnswer::Store { reg, value } => {
                let c = match reg {
                    GuestReg::Counter(c) | GuestReg::EventSelect(c) => Some(c),
                    _ => None,
                };
                if let Some(c) = c
                    && (!guest.contains(c) || self.keeps.contains(c))
                {
                    return Err(std::format!("{reg:?} is not the guest's"));
                }
                let msr = match reg {
                    GuestReg::Counter(c) => c.msr(true),
                    GuestReg::EventSelect(c) => c.evtsel().unwrap_or(0),
                    GuestReg::FixedCtrCtrl => 0x38D,
                    GuestReg::GlobalCtrl => 0x38F,
                    GuestReg::GlobalStatus => return Err("a store to the status".into()),
                };
                let value = match reg {
                    GuestReg::FixedCtrCtrl | GuestReg::GlobalCtrl => {
                        let host = self.model.read_msr(msr).unwrap_or(0) & self.kept(msr);
                        if value & self.kept(msr) != 0 {
                            return Err(std::format!("{value:#x} sets a host bit of {msr:#x}"));
                        }
                        host | value
                    }
                    _ => value,
                };
                (msr, value)
            }
            WriteAnswer::ClearStatus(bits) => (0x390, bits & guest.bits()),
            _ => return Ok(()),
        };
        self.model
            .write_msr(msr, value)
            .map_err(|f| std::format!("the hardware refuses {msr:#x} {value:#x}: {f}"))
    }

    /// Feeds `k` instructions and `k` slots; checks the host's counts and
    /// registers.
    fn run(&mut self, k: u64) -> Result<(), String> {
        self.model
            .inject(Event::arch(ModelEvent::InstructionsRetired, k));
        self.model.inject(Event::arch(ModelEvent::TopdownSlots, k));
        self.model.take_pmi();
        self.fed[0] += k;
        self.fed[1] += k;
        for c in self.keeps.iter() {
            let (got, want) = if c.is_fixed() {
                (self.model.fixed(usize::from(c.number())), self.fed[1])
            } else {
                (self.model.counter(usize::from(c.number())), self.fed[0])
            };
            if got != want {
                return Err(std::format!("host {} counted {got} of {want}", c.name()));
            }
        }
        for &(m, v) in &self.images {
            let now =
                self.model.read_msr(m).unwrap_or(0) & if m >= 0x38D { self.kept(m) } else { !0 };
            if now != v & if m >= 0x38D { self.kept(m) } else { !0 } {
                return Err(std::format!("host register {m:#x} is now {now:#x}"));
            }
        }
        Ok(())
    }
}

/// What the accesses did, for the report.
#[derive(Debug, Default)]
struct Tally {
    applied: u64,
    dropped: u64,
    refused: u64,
    elsewhere: u64,
    reads: u64,
    rdpmcs: u64,
}

/// `n` random accesses of a guest under `p`, checked as the module says.
fn random_accesses(p: GuestPolicy, seed: u64, n: u64) -> Tally {
    let pmu = p.checked().unwrap();
    let mut kvm = IntelKvm::refresh(&p);
    let mut vpmu = VirtualPmu::new(pmu);
    let mut host = Host::new(p.host_counters);
    let guest = p.counters();
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
                    (Err(_), Kvm::Gp) => true,
                    (Ok(WriteAnswer::NotPmu), Kvm::Elsewhere) => true,
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
                        if let Err(e) = host.apply(guest, a) {
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
                let ecx = match rnd(4) {
                    0 => rnd(10) as u32,
                    1 => 0x4000_0000 | rnd(5) as u32,
                    2 => 1 << rnd(32) | rnd(4) as u32,
                    _ => rnd(1 << 32) as u32,
                };
                let (pce, cpl) = (rnd(2) == 0, [0, 3][rnd(2) as usize]);
                let k = kvm.rdpmc(ecx, pce, cpl);
                let v = vpmu.rdpmc(ecx, pce, cpl).ok();
                if k != v {
                    wrong.push(std::format!(
                        "RDPMC {ecx:#x} {pce} {cpl}: KVM {k:?}, vPMU {v:?}"
                    ));
                }
            }
        }
        if i % 1000 == 999
            && let Err(e) = host.run(1 + rnd(50))
        {
            wrong.push(std::format!("after access {i}: {e}"));
        }
        if wrong.len() > 8 {
            break;
        }
    }
    if let Err(e) = host.run(1) {
        wrong.push(e);
    }
    assert!(wrong.is_empty(), "{p:?}: {wrong:#?}");
    t
}

/// Runs `n` accesses under `p`, reports, and checks each kind of answer
/// happened (so that no check above is vacuous).
fn fuzz(name: &str, p: GuestPolicy, seed: u64) {
    let n = 1_000_000;
    let t = random_accesses(p, seed, n);
    std::println!(
        "{name}: {n} random accesses: {} writes applied (KVM's answer, the hardware took each, no host register), {} dropped, {} #GP, {} the VMM's; {} reads and {} RDPMCs as KVM answers them; the host's counts exact (model)",
        t.applied,
        t.dropped,
        t.refused,
        t.elsewhere,
        t.reads,
        t.rdpmcs
    );
    assert!(t.applied > n / 20, "{name}: {t:?}");
    assert!(t.refused > n / 10, "{name}: {t:?}");
    assert!(t.elsewhere > n / 200, "{name}: {t:?}");
    assert!(t.reads > n / 5 && t.rdpmcs > n / 20, "{name}: {t:?}");
}

/// Version 2, four general and three fixed counters, no full-width
/// writes: KVM's default offer; the host keeps general counters 4-7 and
/// fixed counter 3.
#[test]
fn random_accesses_of_a_version_2_guest() {
    let p = GuestPolicy {
        host_counters: CounterSet::first(8, 4).difference(CounterSet::first(4, 3)),
        ..GuestPolicy::new(2, 4, 3)
    };
    fuzz(
        "v2, 4+3, host keeps 4-7 and fixed 3",
        p,
        0x9E37_79B9_7F4A_7C15,
    );
}

/// Version 5, six general and three fixed counters, full-width writes,
/// LLC misses and branch misses unavailable; the host keeps general
/// counters 6 and 7 and fixed counter 3.
#[test]
fn random_accesses_of_a_version_5_guest() {
    let p = GuestPolicy {
        full_width_writes: true,
        unavailable: 1 << 4 | 1 << 6,
        host_counters: CounterSet::first(8, 4).difference(CounterSet::first(6, 3)),
        ..GuestPolicy::new(5, 6, 3)
    };
    fuzz(
        "v5, 6+3, FW, 2 events unavailable",
        p,
        0xD1B5_4A32_D192_ED03,
    );
}

/// Version 1, two 40-bit general counters; the host keeps general counter
/// 7.
#[test]
fn random_accesses_of_a_version_1_guest() {
    let p = GuestPolicy {
        general_width: 40,
        host_counters: CounterSet::first(8, 0).difference(CounterSet::first(7, 0)),
        ..GuestPolicy::new(1, 2, 0)
    };
    fuzz("v1, 2 counters of 40 bits", p, 0xA076_1D64_78BD_642F);
}

/// Version 4 with one general and one fixed counter and full-width
/// writes (the legacy P6 MSRs of counter 1 are KVM's zeros); the host
/// keeps general counter 5 and fixed counter 3.
#[test]
fn random_accesses_of_a_version_4_guest_with_one_counter() {
    let p = GuestPolicy {
        full_width_writes: true,
        host_counters: CounterSet::EMPTY
            .with(Counter::general(5).unwrap())
            .with(Counter::fixed(3).unwrap()),
        ..GuestPolicy::new(4, 1, 1)
    };
    fuzz("v4, 1+1, FW", p, 0x2545_F491_4F6C_DD1D);
}

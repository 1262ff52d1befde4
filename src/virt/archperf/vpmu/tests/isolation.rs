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

use super::kvm::IntelKvm;
use super::*;
use crate::arch::archperf::CounterSet;
use crate::model::archperf::{ArchEvent as ModelEvent, ArchPerfModel as Model};
use crate::virt::archperf::{GuestPmu, GuestPolicy};
use crate::virt::tests::fuzz::{Kvm, Subject, fuzz, u64_of};

/// A random value for `msr`: any 64 bits, 32, one bit, or one built from
/// the register's fields (so that accepted writes are common).
pub(super) fn random_value(rnd: &mut dyn FnMut(u64) -> u64, msr: u32) -> u64 {
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

/// An Intel guest's checks, KVM, emulated PMU and physical PMU.
struct Intel {
    pmu: GuestPmu,
    kvm: IntelKvm,
    vpmu: VirtualPmu,
    host: Host,
}

impl Subject for Intel {
    type Reg = GuestReg;
    type Gp = GuestGp;
    const COMMON: &'static [u32] = &[
        0xC1, 0xC2, 0x186, 0x187, 0x309, 0x30A, 0x38D, 0x38E, 0x38F, 0x390, 0x4C1, 0x4C2,
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
        self.host.apply(self.pmu.counters(), answer)
    }
    fn run_host(&mut self, k: u64) -> Result<(), String> {
        self.host.run(k)
    }
    fn random_value(rnd: &mut dyn FnMut(u64) -> u64, msr: u32) -> u64 {
        random_value(rnd, msr)
    }
    fn random_ecx(rnd: &mut dyn FnMut(u64) -> u64) -> u32 {
        random_ecx(rnd)
    }
}

/// A random RDPMC operand: a general or fixed index, a flag bit, anything.
pub(super) fn random_ecx(rnd: &mut dyn FnMut(u64) -> u64) -> u32 {
    match rnd(4) {
        0 => rnd(10) as u32,
        1 => 0x4000_0000 | rnd(5) as u32,
        2 => 1 << rnd(32) | rnd(4) as u32,
        _ => rnd(1 << 32) as u32,
    }
}

/// The fuzz of a guest under `p`.
fn fuzz_intel(name: &str, p: GuestPolicy, seed: u64) {
    let pmu = p.checked().unwrap();
    let subject = Intel {
        pmu,
        kvm: IntelKvm::refresh(&p),
        vpmu: VirtualPmu::new(pmu),
        host: Host::new(p.host_counters),
    };
    fuzz(name, subject, seed, "the host's counts exact");
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
    fuzz_intel(
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
    fuzz_intel(
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
    fuzz_intel("v1, 2 counters of 40 bits", p, 0xA076_1D64_78BD_642F);
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
    fuzz_intel("v4, 1+1, FW", p, 0x2545_F491_4F6C_DD1D);
}

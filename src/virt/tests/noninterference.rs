//! Noninterference: what a guest observes of its PMU (every value it
//! reads, every #GP, each PMI and where in its run it arrives) is a
//! function of its own run only. Each scenario runs a fixed guest A beside
//! a guest B and the host, time-sliced on one CPU; it is re-run with B's
//! program, the host's activity on the physical PMU and the slicing drawn
//! anew, and A's observations must be identical every time. For the
//! architectural PMU's and AMD's emulated PMUs, and for an Intel guest
//! beside an AMD one.

use std::vec::Vec;

use crate::access::MsrAccess;
use crate::apic::{LvtPerfCounter, PmiDelivery, Vector};
use crate::arch::ia32::Privilege;
use crate::model::archperf::{ArchEvent, ArchPerfModel, Config, Event};
use crate::testing::rng;
use crate::virt::amd::{self, Generation};
use crate::virt::archperf;

/// A guest PMU of either vendor, as the scenario drives it.
trait Guest {
    fn wrmsr(&mut self, msr: u32, value: u64) -> Result<bool, std::string::String>;
    fn rdmsr(&mut self, msr: u32) -> Result<Option<u64>, std::string::String>;
    fn rdpmc(&mut self, ecx: u32) -> Result<u64, std::string::String>;
    /// `n` instructions retired at the guest's CPL 0.
    fn run(&mut self, n: u64);
    fn write_lvt(&mut self, entry: LvtPerfCounter);
    fn entry(&mut self) -> Option<PmiDelivery>;
}

impl Guest for archperf::vpmu::VirtualPmu {
    fn wrmsr(&mut self, msr: u32, value: u64) -> Result<bool, std::string::String> {
        archperf::vpmu::VirtualPmu::wrmsr(self, msr, value).map_err(|e| e.to_string())
    }
    fn rdmsr(&mut self, msr: u32) -> Result<Option<u64>, std::string::String> {
        archperf::vpmu::VirtualPmu::rdmsr(self, msr).map_err(|e| e.to_string())
    }
    fn rdpmc(&mut self, ecx: u32) -> Result<u64, std::string::String> {
        archperf::vpmu::VirtualPmu::rdpmc(self, ecx, false, 0).map_err(|e| e.to_string())
    }
    fn run(&mut self, n: u64) {
        self.feed(Event::arch(ArchEvent::InstructionsRetired, n));
    }
    fn write_lvt(&mut self, entry: LvtPerfCounter) {
        archperf::vpmu::VirtualPmu::write_lvt(self, entry);
    }
    fn entry(&mut self) -> Option<PmiDelivery> {
        self.pmi_to_inject()
    }
}

impl Guest for amd::vpmu::VirtualPmu {
    fn wrmsr(&mut self, msr: u32, value: u64) -> Result<bool, std::string::String> {
        amd::vpmu::VirtualPmu::wrmsr(self, msr, value).map_err(|e| e.to_string())
    }
    fn rdmsr(&mut self, msr: u32) -> Result<Option<u64>, std::string::String> {
        amd::vpmu::VirtualPmu::rdmsr(self, msr).map_err(|e| e.to_string())
    }
    fn rdpmc(&mut self, ecx: u32) -> Result<u64, std::string::String> {
        amd::vpmu::VirtualPmu::rdpmc(self, ecx, false, 0).map_err(|e| e.to_string())
    }
    fn run(&mut self, n: u64) {
        self.feed(crate::model::amd::Event::new(
            amd::vpmu::RETIRED_INSTRUCTIONS,
            0,
            n,
        ));
    }
    fn write_lvt(&mut self, entry: LvtPerfCounter) {
        amd::vpmu::VirtualPmu::write_lvt(self, entry);
    }
    fn entry(&mut self) -> Option<PmiDelivery> {
        self.pmi_to_inject()
    }
}

/// One step of a guest's program.
#[derive(Clone, Copy, Debug)]
enum Op {
    Write(u32, u64),
    Read(u32),
    Rdpmc(u32),
    Run(u64),
    /// Its PMI handler's last act: unmask the LVT entry.
    Unmask,
}

/// What a guest observes at one step.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Obs {
    Wrote(Result<bool, std::string::String>),
    Read(Result<Option<u64>, std::string::String>),
    Rdpmc(Result<u64, std::string::String>),
    /// A PMI delivered at the entry after step `n` of its program.
    Pmi(usize),
}

fn lvt() -> LvtPerfCounter {
    LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(0xF0).unwrap()))
}

/// A guest's run: its program, the step it is at, what it observed, and
/// its PMI handler's steps still to do.
struct Run<G> {
    pmu: G,
    program: Vec<Op>,
    at: usize,
    handler: Vec<Op>,
    /// The handler's steps for a PMI (status read and clear, unmask).
    on_pmi: Vec<Op>,
    seen: Vec<Obs>,
}

impl<G: Guest> Run<G> {
    fn new(mut pmu: G, program: Vec<Op>, on_pmi: Vec<Op>) -> Run<G> {
        pmu.write_lvt(lvt());
        Run {
            pmu,
            program,
            at: 0,
            handler: Vec::new(),
            on_pmi,
            seen: Vec::new(),
        }
    }

    fn done(&self) -> bool {
        self.at == self.program.len() && self.handler.is_empty()
    }

    /// One step (its handler's first, if it is in one), then the entry.
    fn step(&mut self) {
        let op = if self.handler.is_empty() {
            let op = self.program[self.at];
            self.at += 1;
            op
        } else {
            self.handler.remove(0)
        };
        match op {
            Op::Write(m, v) => self.seen.push(Obs::Wrote(self.pmu.wrmsr(m, v))),
            Op::Read(m) => self.seen.push(Obs::Read(self.pmu.rdmsr(m))),
            Op::Rdpmc(e) => self.seen.push(Obs::Rdpmc(self.pmu.rdpmc(e))),
            Op::Run(n) => self.pmu.run(n),
            Op::Unmask => self.pmu.write_lvt(lvt()),
        }
        if self.pmu.entry().is_some() {
            self.seen.push(Obs::Pmi(self.at));
            self.handler.extend(self.on_pmi.iter().copied());
        }
    }
}

/// Guest A's program on an Intel PMU: two sampling counters and a fixed
/// one, runs, reads, RDPMCs, an illegal write.
fn intel_program() -> (Vec<Op>, Vec<Op>) {
    let mut p = std::vec![
        Op::Write(0x186, 0xC0 | 1 << 17 | 1 << 20 | 1 << 22),
        Op::Write(0xC1, (-400i64) as u64),
        Op::Write(0x187, 0xC0 | 1 << 17 | 1 << 22),
        Op::Write(0x38D, 0x1),
        Op::Write(0x38F, 0b11 | 1 << 32),
        Op::Write(0x186, 1 << 21),
    ];
    for k in 0..60 {
        p.push(Op::Run(37 + k));
        p.push(Op::Rdpmc(k as u32 % 2));
        p.push(Op::Read(0x38E));
        if k % 7 == 0 {
            p.push(Op::Read(0x30A));
        }
    }
    p.push(Op::Rdpmc(1 << 30));
    let handler = std::vec![
        Op::Read(0x38E),
        Op::Write(0xC1, (-400i64) as u64),
        Op::Write(0x390, 1),
        Op::Unmask,
    ];
    (p, handler)
}

/// Guest A's program on an AMD PerfMonV2 PMU.
fn amd_program() -> (Vec<Op>, Vec<Op>) {
    let mut p = std::vec![
        Op::Write(0xC001_0200, 0xC0 | 1 << 17 | 1 << 20 | 1 << 22),
        Op::Write(0xC001_0201, (-500i64) as u64),
        Op::Write(0xC001_0002, 0xC0 | 1 << 17 | 1 << 22 | 1 << 41),
        Op::Write(0xC000_0301, 0b101),
    ];
    for k in 0..60 {
        p.push(Op::Run(41 + k));
        p.push(Op::Rdpmc(if k % 2 == 0 { 0 } else { 2 }));
        p.push(Op::Read(0xC000_0300));
    }
    p.push(Op::Read(0xC001_0002));
    let handler = std::vec![
        Op::Read(0xC000_0300),
        Op::Write(0xC001_0201, (-500i64) as u64),
        Op::Write(0xC000_0302, 1),
        Op::Unmask,
    ];
    (p, handler)
}

/// A random program for guest B on its PMU's registers (`msrs`).
fn random_program(rnd: &mut impl FnMut(u64) -> u64, msrs: &[u32]) -> Vec<Op> {
    (0..200)
        .map(|_| {
            let msr = msrs[rnd(msrs.len() as u64) as usize];
            match rnd(5) {
                0 => Op::Write(msr, rnd(1 << 24) | 1 << 20 | 1 << 22),
                1 => Op::Write(msr, u64::MAX - rnd(1000)),
                2 => Op::Read(msr),
                3 => Op::Rdpmc(rnd(4) as u32),
                _ => Op::Run(1 + rnd(500)),
            }
        })
        .collect()
}

const INTEL_MSRS: [u32; 8] = [0xC1, 0xC2, 0x186, 0x187, 0x38D, 0x38F, 0x390, 0x309];
const AMD_MSRS: [u32; 8] = [
    0xC001_0000,
    0xC001_0004,
    0xC001_0200,
    0xC001_0201,
    0xC001_0202,
    0xC000_0301,
    0xC000_0302,
    0xC000_0303,
];

/// The host's side of a scenario: its own counting between the guests'
/// slices, checked at the end.
trait Host {
    /// `k` instructions of the host's at CPL 0.
    fn run(&mut self, k: u64);
    /// Whether the host counted each instruction it saw.
    fn check(&mut self);
}

/// A physical PMU of the host's alone (the guests' PMUs are emulated): its
/// counter 0 counts instructions at CPL 0.
struct OwnPmu {
    model: ArchPerfModel,
    fed: u64,
}

impl OwnPmu {
    fn new() -> OwnPmu {
        let mut model = ArchPerfModel::new(Config::skylake());
        model.write_msr(0x186, 0xC0 | 1 << 17 | 1 << 22).unwrap();
        OwnPmu { model, fed: 0 }
    }
}

impl Host for OwnPmu {
    fn run(&mut self, k: u64) {
        self.model
            .inject(Event::arch(ArchEvent::InstructionsRetired, k).at(Privilege::Os));
        self.fed += k;
    }
    fn check(&mut self) {
        assert_eq!(self.model.counter(0), self.fed, "the host's count");
    }
}

/// Runs A (its program) beside B (a random one from `seed`) and the host's
/// counting on the physical PMU, sliced at random; A's observations.
fn scenario<A: Guest, B: Guest>(
    a: A,
    (program, handler): (Vec<Op>, Vec<Op>),
    b: B,
    b_msrs: &[u32],
    seed: u64,
    host: &mut dyn Host,
) -> Vec<Obs> {
    let mut rnd = rng(seed);
    let mut a = Run::new(a, program, handler);
    let b_program = random_program(&mut rnd, b_msrs);
    let b_handler = std::vec![Op::Unmask];
    let mut b = Run::new(b, b_program, b_handler);
    while !a.done() {
        for _ in 0..1 + rnd(8) {
            if !a.done() {
                a.step();
            }
        }
        host.run(rnd(300));
        for _ in 0..rnd(8) {
            if !b.done() {
                b.step();
            }
        }
    }
    host.check();
    assert!(a.seen.iter().filter(|o| matches!(o, Obs::Pmi(_))).count() > 3);
    a.seen
}

/// Five runs with B, the host and the slicing drawn anew: A's
/// observations are the same.
fn same_for_a<A: Guest, B: Guest>(
    a: impl Fn() -> A,
    b: impl Fn() -> B,
    b_msrs: &[u32],
    intel: bool,
) {
    let program = || {
        if intel {
            intel_program()
        } else {
            amd_program()
        }
    };
    let first = scenario(a(), program(), b(), b_msrs, 1, &mut OwnPmu::new());
    for seed in 2..=5 {
        assert_eq!(
            scenario(
                a(),
                program(),
                b(),
                b_msrs,
                seed * 0x9E37_79B9,
                &mut OwnPmu::new()
            ),
            first,
            "seed {seed}"
        );
    }
}

fn intel_a() -> archperf::vpmu::VirtualPmu {
    archperf::vpmu::VirtualPmu::new(archperf::GuestPolicy::new(2, 2, 3).checked().unwrap())
}

fn intel_b() -> archperf::vpmu::VirtualPmu {
    let p = archperf::GuestPolicy {
        full_width_writes: true,
        ..archperf::GuestPolicy::new(5, 4, 3)
    };
    archperf::vpmu::VirtualPmu::new(p.checked().unwrap())
}

fn amd_v2(counters: u8) -> amd::vpmu::VirtualPmu {
    let p = amd::GuestPolicy::new(Generation::PerfMonV2 { counters });
    amd::vpmu::VirtualPmu::new(p.checked().unwrap())
}

mod amd_passed_through;
mod passed_through;

#[test]
fn an_intel_guest_observes_only_its_own_run() {
    same_for_a(intel_a, intel_b, &INTEL_MSRS, true);
}

#[test]
fn an_amd_guest_observes_only_its_own_run() {
    same_for_a(|| amd_v2(3), || amd_v2(6), &AMD_MSRS, false);
}

#[test]
fn an_intel_guest_beside_an_amd_guest_observes_only_its_own_run() {
    same_for_a(intel_a, || amd_v2(6), &AMD_MSRS, true);
    same_for_a(|| amd_v2(3), intel_b, &INTEL_MSRS, false);
}

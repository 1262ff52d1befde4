//! Benchmark of the overflow interrupt handlers, NetBurst's, Itanium's and
//! the architectural PMU's `handle_pmi`, in three or four scenarios each. For every scenario it prints:
//!
//! - the register traffic of one interrupt, counted by the recording backend
//!   (this is what carries over to hardware, where one RDMSR or WRMSR costs
//!   tens to hundreds of cycles on a Pentium 4);
//! - nanoseconds per interrupt on this host, with a register file that costs
//!   nothing (best of 5 runs of 2,000,000);
//! - when `valgrind` is on the `PATH`, **instructions per interrupt** counted
//!   by callgrind, which are exact and repeatable: the bench runs itself under
//!   `valgrind --tool=callgrind`, collecting only inside one `#[inline(never)]`
//!   function that calls the handler, over a register file whose every
//!   register access is one placeholder instruction (a load for a read, a
//!   `nop` for a write, the LVT write included). The report gives the total
//!   and the total less those placeholders: the handler's own instructions.
//!
//! Run: `cargo bench --bench pmi`. The registers are placeholders, not a
//! model and not hardware; the counts are of the driver's code on x86_64.

use std::hint::black_box;
use std::process::Command;
use std::time::Instant;

use pmu::apic::{LvtPerfCounter, LvtPerfCounterEntry, PmiDelivery, Vector};

/// Handler calls per callgrind run.
const CALLS: u64 = 10_000;

/// The environment variable that makes this binary run one scenario's calls
/// for callgrind instead of the whole benchmark.
const CHILD: &str = "PMU_BENCH_PMI_CALLGRIND";

/// An LVT entry whose write is one placeholder instruction.
struct Lvt;

impl LvtPerfCounterEntry for Lvt {
    #[inline(always)]
    fn write_lvt_perf_counter(&mut self, entry: LvtPerfCounter) {
        // SAFETY: `nop` has no effect; the operand only makes the entry's
        // value live in a register, as the real APIC store would.
        unsafe {
            core::arch::asm!("nop", in("eax") entry.bits(), options(nomem, nostack, preserves_flags));
        }
    }
}

fn entry() -> LvtPerfCounter {
    LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(0xF0).unwrap()))
}

/// One load: the placeholder for a register read.
#[inline(always)]
fn load(file: &[u64; 64], n: u32) -> u64 {
    let v: u64;
    // SAFETY: `n & 63` indexes the 64-entry array `file`; the instruction
    // only reads it.
    unsafe {
        core::arch::asm!(
            "mov {v}, qword ptr [{base} + {n} * 8]",
            v = lateout(reg) v,
            base = in(reg) file.as_ptr(),
            n = in(reg) u64::from(n & 63),
            options(readonly, nostack, preserves_flags),
        );
    }
    v
}

/// One `nop`: the placeholder for a register write, with the register number
/// and value in registers as a WRMSR needs them.
#[inline(always)]
fn store(n: u32, value: u64) {
    // SAFETY: `nop` has no effect.
    unsafe {
        core::arch::asm!("nop", in("ecx") n, in("rax") value, options(nomem, nostack, preserves_flags));
    }
}

/// A scenario: its name, the register accesses of one interrupt (recording
/// backend) and a closure that runs one interrupt on the placeholder file.
struct Scenario {
    name: &'static str,
    traffic: String,
    /// Placeholder register accesses per interrupt, the LVT write included.
    accesses: u64,
    run: Box<dyn FnMut(u64)>,
}

mod netburst {
    use super::{Lvt, Scenario, entry, load, store};
    use pmu::access::{MsrAccess, Recording};
    use pmu::arch::netburst::driver::{CounterConfig, NetBurstDriver};
    use pmu::arch::netburst::pmi::{PmiState, handle_pmi, overflow_rule};
    use pmu::arch::netburst::{Escr, EventSpec, LogicalProcessor, NetBurstPmu};
    use pmu::counter::Owner;
    use pmu::detect;
    use pmu::sampling::SampleAfter;
    use std::hint::black_box;

    /// The register file: RDPMC of counter n reads `counter[n]`.
    pub struct Regs {
        pub counter: [u64; 64],
    }

    impl MsrAccess for Regs {
        type Error = core::convert::Infallible;
        #[inline(always)]
        fn read_msr(&mut self, msr: u32) -> Result<u64, Self::Error> {
            Ok(load(&self.counter, msr))
        }
        #[inline(always)]
        fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Self::Error> {
            store(msr, value);
            Ok(())
        }
        #[inline(always)]
        fn read_pmc(&mut self, index: u32) -> Result<u64, Self::Error> {
            Ok(load(&self.counter, index))
        }
    }

    /// The handler as measured: everything inside is counted by callgrind.
    #[inline(never)]
    pub fn measured_netburst(state: &PmiState, regs: &mut Regs, rip: u64, sink: &mut u64) -> u32 {
        handle_pmi(
            state,
            LogicalProcessor::T0,
            regs,
            &mut Lvt,
            entry(),
            rip,
            |s| *sink = sink.wrapping_add(s.rip),
        )
        .map_or(0, |o| o.overflowed.bits())
    }

    /// Four sampling counters on four ESCRs: counters 0, 12, 14 and 1.
    fn configs(n: SampleAfter) -> [CounterConfig; 4] {
        let ev = |s: &str| s.parse::<EventSpec>().unwrap();
        [
            CounterConfig::counting(ev("global_power_events:RUNNING"), Escr::FsbEscr0),
            CounterConfig::counting(ev("instr_retired:NBOGUSNTAG"), Escr::CruEscr0),
            CounterConfig::counting(ev("branch_retired:MMNP"), Escr::CruEscr3),
            CounterConfig::counting(ev("BSQ_cache_reference:RD_2ndL_HITS"), Escr::BsuEscr0),
        ]
        .map(|c| c.sampling(n))
    }

    /// `armed` sampling counters with period N = 100,000; those in
    /// `overflowed` read one event past their overflow at every interrupt,
    /// the others read 5 events into their period.
    pub fn scenario<O: Owner>(name: &'static str, armed: usize, overflowed: &[u8]) -> Scenario {
        // SAFETY: the scenario's register file is a package of its own, and
        // this is its one value.
        let package: &'static NetBurstPmu = Box::leak(Box::new(unsafe { NetBurstPmu::new() }));
        let state = package.pmi();
        let cpu = detect::NetBurst {
            model: 3,
            msr_instructions: true,
            perf_mon_available: true,
            pebs_available: true,
            hyper_threading: true,
            logical_processors: 2,
        };
        let n = SampleAfter::new(100_000, overflow_rule()).unwrap();
        let mut regs = Regs {
            counter: [n.at_residual(5); 64],
        };
        for &c in overflowed {
            regs.counter[usize::from(c)] =
                n.at_residual(0).wrapping_add(100_000 + 1) & ((1 << 40) - 1);
        }
        let (mut d, c) =
            NetBurstDriver::<O, _>::take(Recording::<_, 1>::new(regs), &cpu, package).unwrap();
        let cfg = configs(n);
        let mut keep = Vec::new();
        keep.push(
            c.c0.configure(&mut d, &cfg[0])
                .unwrap()
                .enable(&mut d)
                .unwrap()
                .erase(),
        );
        if armed > 1 {
            keep.push(
                c.c12
                    .configure(&mut d, &cfg[1])
                    .unwrap()
                    .enable(&mut d)
                    .unwrap()
                    .erase(),
            );
            keep.push(
                c.c14
                    .configure(&mut d, &cfg[2])
                    .unwrap()
                    .enable(&mut d)
                    .unwrap()
                    .erase(),
            );
            keep.push(
                c.c1.configure(&mut d, &cfg[3])
                    .unwrap()
                    .enable(&mut d)
                    .unwrap()
                    .erase(),
            );
        }
        d.msr().clear();
        let mut sink = 0;
        handle_pmi(
            state,
            LogicalProcessor::T0,
            d.msr(),
            &mut Lvt,
            entry(),
            1,
            |s| sink += s.rip,
        )
        .unwrap();
        let t = d.msr().take_counts();
        let traffic = format!(
            "{} RDPMC, {} RDMSR, {} WRMSR + 1 LVT write",
            t.rdpmc, t.msr_reads, t.msr_writes
        );
        let accesses = t.rdpmc + t.msr_reads + t.msr_writes + 1;
        let mut regs = Regs {
            counter: d.msr().inner_mut().counter,
        };
        let _ = (d, keep);
        Scenario {
            name,
            traffic,
            accesses: accesses as u64,
            run: Box::new(move |rip| {
                black_box(measured_netburst(state, &mut regs, rip, &mut sink));
            }),
        }
    }
}

mod itanium {
    use super::{Scenario, load, store};
    use pmu::access::{PmcPmdAccess, Recording};
    use pmu::arch::itanium::driver::{CounterConfig, ItaniumDriver};
    use pmu::arch::itanium::ear::{IearConfig, TlbFills};
    use pmu::arch::itanium::fields::{EventCode, Plm};
    use pmu::arch::itanium::pmi::{PmiState, handle_pmi, overflow_rule};
    use pmu::arch::itanium::{Counter, Generation, ItaniumPmu, pmc};
    use pmu::counter::Owner;
    use pmu::sampling::SampleAfter;
    use std::hint::black_box;

    /// The register file: PMC n reads `pmc[n]`, PMD n reads `pmd[n]`.
    pub struct Regs {
        pub pmc: [u64; 64],
        pub pmd: [u64; 64],
    }

    impl PmcPmdAccess for Regs {
        type Error = core::convert::Infallible;
        #[inline(always)]
        fn read_pmc(&mut self, n: u8) -> Result<u64, Self::Error> {
            Ok(load(&self.pmc, u32::from(n)))
        }
        #[inline(always)]
        fn write_pmc(&mut self, n: u8, value: u64) -> Result<(), Self::Error> {
            store(u32::from(n), value);
            Ok(())
        }
        #[inline(always)]
        fn read_pmd(&mut self, n: u8) -> Result<u64, Self::Error> {
            Ok(load(&self.pmd, u32::from(n)))
        }
        #[inline(always)]
        fn write_pmd(&mut self, n: u8, value: u64) -> Result<(), Self::Error> {
            store(u32::from(n), value);
            Ok(())
        }
    }

    /// The handler as measured: everything inside is counted by callgrind.
    #[inline(never)]
    pub fn measured_itanium(state: &PmiState, regs: &mut Regs, iip: u64, sink: &mut u64) -> u64 {
        handle_pmi(state, regs, iip, |s| {
            *sink = sink.wrapping_add(s.sample.rip)
        })
        .map_or(0, |o| o.overflowed.0)
    }

    /// Itanium 2: counter 4 samples CPU cycles (event 12H), counter 7 every
    /// Nth ITLB miss through the I-EAR; `overflowed` is the PMC0 image every
    /// interrupt reads (bit 0 is `fr`, bit 4 + n counter n's overflow).
    pub fn scenario<O: Owner>(name: &'static str, overflowed: u64) -> Scenario {
        let g = Generation::Itanium2;
        // SAFETY: the scenario's register file is a processor of its own, and
        // this is its one value.
        let cpu: &'static ItaniumPmu = Box::leak(Box::new(unsafe { ItaniumPmu::new() }));
        let state = cpu.pmi();
        let mut regs = Regs {
            pmc: [0; 64],
            pmd: [0; 64],
        };
        regs.pmc[0] = overflowed;
        // A valid I-EAR capture: address with bit 0 (valid) set.
        regs.pmd[0] = 0x4000_0000_0000_1001;
        let (mut d, c) = ItaniumDriver::<O, _>::take(Recording::<_, 1>::new(regs), g, cpu).unwrap();
        let n = SampleAfter::new(100_000, overflow_rule(g)).unwrap();
        let hw4 = Counter::new(g, 4).unwrap();
        let cycles = pmc::CounterPmc::new(hw4, EventCode::new(g, 0x12).unwrap())
            .unwrap()
            .with_plm(Plm::ALL)
            .with_privileged(true);
        let a =
            c.c4.configure(&mut d, &CounterConfig::counting(cycles).sampling(n))
                .unwrap();
        let a = a.enable(&mut d).unwrap().erase();
        let ear = IearConfig::tlb_misses(g, TlbFills::ALL)
            .unwrap()
            .with_plm(Plm::ALL)
            .with_privileged(true);
        let itlb = CounterConfig::itlb_sampling(Counter::new(g, 7).unwrap(), n, ear).unwrap();
        let b =
            c.c7.configure(&mut d, &itlb)
                .unwrap()
                .enable(&mut d)
                .unwrap()
                .erase();
        d.regs().inner_mut().pmc[0] = overflowed;
        d.regs().clear();
        let mut sink = 0;
        handle_pmi(state, d.regs(), 1, |s| sink += s.sample.rip).unwrap();
        let t = d.regs().take_counts();
        let traffic = format!(
            "{} PMC reads, {} PMC writes, {} PMD reads, {} PMD writes",
            t.pmc_reads, t.pmc_writes, t.pmd_reads, t.pmd_writes
        );
        let accesses = t.pmc_reads + t.pmc_writes + t.pmd_reads + t.pmd_writes;
        let regs = d.regs().inner_mut();
        let mut regs = Regs {
            pmc: regs.pmc,
            pmd: regs.pmd,
        };
        regs.pmc[0] = overflowed;
        let _ = (d, a, b);
        Scenario {
            name,
            traffic,
            accesses: accesses as u64,
            run: Box::new(move |iip| {
                black_box(measured_itanium(state, &mut regs, iip, &mut sink));
            }),
        }
    }
}

mod archperf {
    use super::{Lvt, Scenario, entry, load, store};
    use pmu::access::{MsrAccess, Recording};
    use pmu::arch::archperf::driver::{ArchPerfDriver, CounterConfig};
    use pmu::arch::archperf::msrs::{IA32_PERF_GLOBAL_STATUS, Leaf0A};
    use pmu::arch::archperf::pmi::{PmiState, handle_pmi};
    use pmu::arch::archperf::{ArchPerfPmu, EventSpec};
    use pmu::counter::Owner;
    use pmu::detect;
    use pmu::sampling::SampleAfter;
    use std::hint::black_box;

    /// The register file: RDMSR of m reads `msr[m & 63]`, RDPMC of counter
    /// n reads `counter[n & 63]`.
    pub struct Regs {
        pub msr: [u64; 64],
        pub counter: [u64; 64],
    }

    impl MsrAccess for Regs {
        type Error = core::convert::Infallible;
        #[inline(always)]
        fn read_msr(&mut self, msr: u32) -> Result<u64, Self::Error> {
            Ok(load(&self.msr, msr))
        }
        #[inline(always)]
        fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Self::Error> {
            store(msr, value);
            Ok(())
        }
        #[inline(always)]
        fn read_pmc(&mut self, index: u32) -> Result<u64, Self::Error> {
            Ok(load(&self.counter, index))
        }
    }

    /// The handler as measured: everything inside is counted by callgrind.
    #[inline(never)]
    pub fn measured_archperf(state: &PmiState, regs: &mut Regs, rip: u64, sink: &mut u64) -> u64 {
        handle_pmi(state, regs, &mut Lvt, entry(), rip, |s| {
            *sink = sink.wrapping_add(s.rip)
        })
        .map_or(0, |o| o.overflowed.bits())
    }

    /// `armed` general counters sampling with period N = 100,000 on a
    /// Skylake-like PMU (v4, 4 counters of 48 bits, full-width writes);
    /// those in `overflowed` show in `GLOBAL_STATUS` and read one event
    /// past their overflow.
    pub fn scenario<O: Owner>(name: &'static str, armed: usize, overflowed: &[u8]) -> Scenario {
        // SAFETY: the scenario's register file is a logical processor of
        // its own, and this is its one value.
        let cpu0: &'static ArchPerfPmu = Box::leak(Box::new(unsafe { ArchPerfPmu::new() }));
        let state = cpu0.pmi();
        let cpu = detect::ArchPerf {
            // v4, 4 x 48 bits, 7 events all available; 3 fixed x 48 bits.
            leaf: Leaf0A {
                regs: [4 | 4 << 8 | 48 << 16 | 7 << 24, 0, 0, 3 | 48 << 5],
            },
            full_width_write: true,
            hybrid: false,
            core_type: None,
            model: 0x55,
        };
        let regs = Regs {
            msr: [0; 64],
            counter: [0; 64],
        };
        let (mut d, c) =
            ArchPerfDriver::<O, _>::take(Recording::<_, 1>::new(regs), &cpu, cpu0).unwrap();
        let n = SampleAfter::new(100_000, d.overflow_rule()).unwrap();
        let cfg = CounterConfig::counting(EventSpec::raw(0x3C, 0)).sampling(n);
        let mut keep = Vec::new();
        keep.push(
            c.g0.configure(&mut d, &cfg)
                .unwrap()
                .enable(&mut d)
                .unwrap()
                .erase(),
        );
        if armed > 1 {
            keep.push(
                c.g1.configure(&mut d, &cfg)
                    .unwrap()
                    .enable(&mut d)
                    .unwrap()
                    .erase(),
            );
            let (g2, g3) = (c.g2.unwrap(), c.g3.unwrap());
            keep.push(
                g2.configure(&mut d, &cfg)
                    .unwrap()
                    .enable(&mut d)
                    .unwrap()
                    .erase(),
            );
            keep.push(
                g3.configure(&mut d, &cfg)
                    .unwrap()
                    .enable(&mut d)
                    .unwrap()
                    .erase(),
            );
        }
        let mut status = 0;
        for &k in overflowed {
            d.msr().inner_mut().counter[usize::from(k)] = 1;
            status |= 1 << k;
        }
        d.msr().inner_mut().msr[(IA32_PERF_GLOBAL_STATUS & 63) as usize] = status;
        d.msr().clear();
        let mut sink = 0;
        handle_pmi(state, d.msr(), &mut Lvt, entry(), 1, |s| sink += s.rip).unwrap();
        let t = d.msr().take_counts();
        let traffic = format!(
            "{} RDPMC, {} RDMSR, {} WRMSR + 1 LVT write",
            t.rdpmc, t.msr_reads, t.msr_writes
        );
        let accesses = t.rdpmc + t.msr_reads + t.msr_writes + 1;
        let mut regs = Regs {
            msr: d.msr().inner_mut().msr,
            counter: d.msr().inner_mut().counter,
        };
        let _ = (d, keep);
        Scenario {
            name,
            traffic,
            accesses: accesses as u64,
            run: Box::new(move |rip| {
                black_box(measured_archperf(state, &mut regs, rip, &mut sink));
            }),
        }
    }
}

// Each scenario drives a PMU of its own (its own leaked `NetBurstPmu`,
// `ItaniumPmu` or `ArchPerfPmu`), through a driver of its own owner (an
// owner is taken once).
pmu::owner!(Nb1);
pmu::owner!(Nb2);
pmu::owner!(Nb3);
pmu::owner!(Nb4);
pmu::owner!(Ia1);
pmu::owner!(Ia2);
pmu::owner!(Ia3);
pmu::owner!(Ap1);
pmu::owner!(Ap2);
pmu::owner!(Ap3);
pmu::owner!(Ap4);

fn scenarios() -> Vec<Scenario> {
    vec![
        netburst::scenario::<Nb1>("netburst/1-armed-1-overflowed", 1, &[0]),
        netburst::scenario::<Nb2>("netburst/4-armed-1-overflowed", 4, &[0]),
        netburst::scenario::<Nb3>("netburst/4-armed-4-overflowed", 4, &[0, 12, 14, 1]),
        netburst::scenario::<Nb4>("netburst/4-armed-spurious", 4, &[]),
        itanium::scenario::<Ia1>("itanium2/cycles-overflowed", 1 | 1 << 4),
        itanium::scenario::<Ia2>("itanium2/cycles-and-iear-overflowed", 1 | 1 << 4 | 1 << 7),
        itanium::scenario::<Ia3>("itanium2/spurious", 0),
        archperf::scenario::<Ap1>("archperf/1-armed-1-overflowed", 1, &[0]),
        archperf::scenario::<Ap2>("archperf/4-armed-1-overflowed", 4, &[0]),
        archperf::scenario::<Ap3>("archperf/4-armed-4-overflowed", 4, &[0, 1, 2, 3]),
        archperf::scenario::<Ap4>("archperf/4-armed-spurious", 4, &[]),
    ]
}

/// Under callgrind: run `CALLS` interrupts of one scenario.
fn child(name: &str) {
    let mut s = scenarios()
        .into_iter()
        .find(|s| s.name == name)
        .expect("scenario");
    for i in 0..CALLS {
        (s.run)(black_box(i));
    }
}

/// Instructions per call of the measured function in scenario `name`, or
/// `None` when valgrind cannot be run.
fn instructions(name: &str) -> Option<f64> {
    let exe = std::env::current_exe().ok()?;
    let out = std::env::temp_dir().join(format!("pmu-bench-{}.callgrind", std::process::id()));
    let status = Command::new("valgrind")
        .args(["--tool=callgrind", "--toggle-collect=*::measured_*"])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(&exe)
        .env(CHILD, name)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .ok()?;
    let text = std::fs::read_to_string(&out).ok();
    let _ = std::fs::remove_file(&out);
    if !status.success() {
        return None;
    }
    let total: u64 = text?
        .lines()
        .find_map(|l| {
            l.strip_prefix("summary: ")
                .or_else(|| l.strip_prefix("totals: "))
        })?
        .trim()
        .parse()
        .ok()?;
    Some(total as f64 / CALLS as f64)
}

fn main() {
    if let Ok(name) = std::env::var(CHILD) {
        return child(&name);
    }
    let callgrind = Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    for mut s in scenarios() {
        let iterations = 2_000_000u64;
        let mut best = f64::MAX;
        for _ in 0..5 {
            let start = Instant::now();
            for i in 0..iterations {
                (s.run)(black_box(i));
            }
            best = best.min(start.elapsed().as_nanos() as f64 / iterations as f64);
        }
        let counted = if callgrind {
            match instructions(s.name) {
                Some(i) => format!(
                    "; {i:.0} instructions, {:.0} excluding the {} register-access placeholders (callgrind)",
                    i - s.accesses as f64,
                    s.accesses
                ),
                None => "; callgrind failed".into(),
            }
        } else {
            String::new()
        };
        println!(
            "{}: {} per interrupt; {best:.1} ns{counted}",
            s.name, s.traffic
        );
    }
    if !callgrind {
        println!("(valgrind not found: no instruction counts)");
    }
    // The handlers as measured, and NetBurst's out-of-line FORCE_OVF path.
    for f in [
        "measured_netburst",
        "measured_itanium",
        "measured_archperf",
        "service_rare",
    ] {
        match locked_instructions(f) {
            Some(n) => {
                println!("{f}: {n} locked instructions (lock prefix or xchg with memory; objdump)")
            }
            None => println!("{f}: objdump not found, locked instructions not counted"),
        }
    }
}

/// Locked instructions in the compiled function whose name contains
/// `function`: what a locked read-modify-write compiles to on x86_64 (a
/// `lock` prefix, or `xchg` with a memory operand, which locks implicitly).
fn locked_instructions(function: &str) -> Option<usize> {
    let exe = std::env::current_exe().ok()?;
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn", "-C"])
        .arg(&exe)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut inside = false;
    let mut found = false;
    let mut locked = 0;
    for line in text.lines() {
        if line.ends_with(">:") {
            inside = line.contains(function);
            found |= inside;
        } else if inside {
            let l = line.to_ascii_lowercase();
            if l.contains("lock ") || (l.contains("xchg") && l.contains('(')) {
                locked += 1;
            }
        }
    }
    found.then_some(locked)
}

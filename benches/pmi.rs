//! Host benchmark of the overflow interrupt handlers: NetBurst's `handle_pmi`
//! and Itanium's `handle_pmi`. For NetBurst: nanoseconds per
//! interrupt with a register file that costs nothing, so the figure is the
//! driver's own work (atomics, the loop over armed counters, the reload
//! arithmetic), plus the MSR accesses per interrupt counted by the recording
//! backend. On hardware each RDMSR/WRMSR costs far more than this (tens to
//! hundreds of cycles on a Pentium 4); the access counts are what carry over.
//!
//! Run: `cargo bench --bench pmi`.

use std::hint::black_box;
use std::time::Instant;

use pmu::access::{MsrAccess, Recording};
use pmu::apic::{LvtPerfCounter, LvtPerfCounterEntry, PmiDelivery, Vector};
use pmu::arch::netburst::driver::{CounterConfig, NetBurstDriver};
use pmu::arch::netburst::pmi::{PmiState, handle_pmi, overflow_rule};
use pmu::arch::netburst::{Escr, EventSpec, LogicalProcessor};
use pmu::counter::Owner;
use pmu::detect;
use pmu::sampling::SampleAfter;

/// A register file that answers instantly: the counters in `overflowed`
/// always read (RDPMC) one event past their overflow, with `OVF` set in
/// their CCCRs, as if they overflowed again before every PMI.
struct Regs {
    cccr: [u64; 18],
    counter: [u64; 18],
    overflowed: u32,
}

impl MsrAccess for Regs {
    type Error = core::convert::Infallible;
    fn read_msr(&mut self, msr: u32) -> Result<u64, Self::Error> {
        Ok(match msr {
            0x360..=0x371 => {
                let n = (msr - 0x360) as usize;
                self.cccr[n] | u64::from(self.overflowed >> n & 1) << 31
            }
            0x300..=0x311 => self.counter[(msr - 0x300) as usize],
            _ => 0,
        })
    }
    fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Self::Error> {
        match msr {
            0x360..=0x371 => self.cccr[(msr - 0x360) as usize] = value,
            0x300..=0x311 => self.counter[(msr - 0x300) as usize] = value,
            _ => {}
        }
        Ok(())
    }
    fn read_pmc(&mut self, index: u32) -> Result<u64, Self::Error> {
        let n = (index & 31) as usize % 18;
        Ok(if self.overflowed >> n & 1 != 0 {
            1
        } else {
            self.counter[n]
        })
    }
}

struct NoLvt;

impl LvtPerfCounterEntry for NoLvt {
    fn write_lvt_perf_counter(&mut self, entry: LvtPerfCounter) {
        black_box(entry);
    }
}

/// (counter token index, ESCR, event) for four sampling counters on four
/// different ESCRs.
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

fn bench<O: Owner>(name: &str, armed: usize, overflowed: u32) {
    let state = Box::leak(Box::new(PmiState::new()));
    let cpu = detect::NetBurst {
        model: 3,
        msr_instructions: true,
        perf_mon_available: true,
        pebs_available: true,
        hyper_threading: true,
        logical_processors: 2,
    };
    let regs = Recording::<_, 1>::new(Regs {
        cccr: [0; 18],
        counter: [0; 18],
        overflowed: 0,
    });
    let (mut d, c) = NetBurstDriver::<O, _>::take(regs, &cpu, state).unwrap();
    let n = SampleAfter::new(100_000, overflow_rule()).unwrap();
    let cfg = configs(n);
    // Counters 0, 12, 14 and 1 (their ESCRs feed them).
    let a =
        c.c0.configure(&mut d, &cfg[0])
            .unwrap()
            .enable(&mut d)
            .unwrap();
    let b = (armed > 1).then(|| {
        c.c12
            .configure(&mut d, &cfg[1])
            .unwrap()
            .enable(&mut d)
            .unwrap()
    });
    let e = (armed > 2).then(|| {
        c.c14
            .configure(&mut d, &cfg[2])
            .unwrap()
            .enable(&mut d)
            .unwrap()
    });
    let f = (armed > 3).then(|| {
        c.c1.configure(&mut d, &cfg[3])
            .unwrap()
            .enable(&mut d)
            .unwrap()
    });
    d.msr().inner_mut().overflowed = overflowed;
    let entry = LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(0xF0).unwrap()));
    let mut lvt = NoLvt;
    let mut sink = 0u64;
    // Traffic of one PMI.
    d.msr().clear();
    handle_pmi(
        state,
        LogicalProcessor::T0,
        d.msr(),
        &mut lvt,
        entry,
        1,
        |s| sink += s.rip,
    )
    .unwrap();
    let t = d.msr().take_counts();
    // Speed, on the bare register file.
    let mut regs = Regs {
        cccr: [0; 18],
        counter: [0; 18],
        overflowed,
    };
    let iterations = 2_000_000u64;
    let mut best = f64::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        for i in 0..iterations {
            let r = handle_pmi(
                state,
                LogicalProcessor::T0,
                &mut regs,
                &mut lvt,
                entry,
                i,
                |s| sink = sink.wrapping_add(s.rip),
            );
            black_box(r.ok());
        }
        best = best.min(start.elapsed().as_nanos() as f64 / iterations as f64);
    }
    black_box(sink);
    println!(
        "pmi/{name}: {best:.1} ns/PMI ({iterations} iterations, best of 5); per PMI {} RDMSR, {} WRMSR, {} RDPMC + 1 LVT write",
        t.msr_reads, t.msr_writes, t.rdpmc
    );
    let _ = (a, b, e, f);
}

mod itanium {
    use pmu::counter::Owner;
    use std::hint::black_box;
    use std::time::Instant;

    use pmu::access::{PmcPmdAccess, Recording};
    use pmu::arch::itanium::driver::{CounterConfig, ItaniumDriver};
    use pmu::arch::itanium::ear::{IearConfig, TlbFills};
    use pmu::arch::itanium::fields::{EventCode, Plm};
    use pmu::arch::itanium::pmi::{PmiState, handle_pmi, overflow_rule};
    use pmu::arch::itanium::{Counter, Generation, pmc};
    use pmu::sampling::SampleAfter;

    /// PMC/PMD file that answers instantly; PMC0 always reads with the
    /// overflow bits of `overflowed` set, as if they overflowed again.
    struct Regs {
        pmc: [u64; 64],
        pmd: [u64; 64],
        overflowed: u64,
    }

    impl PmcPmdAccess for Regs {
        type Error = core::convert::Infallible;
        fn read_pmc(&mut self, n: u8) -> Result<u64, Self::Error> {
            let v = self.pmc[usize::from(n) % 64];
            Ok(if n == 0 { v | self.overflowed } else { v })
        }
        fn write_pmc(&mut self, n: u8, value: u64) -> Result<(), Self::Error> {
            self.pmc[usize::from(n) % 64] = value;
            Ok(())
        }
        fn read_pmd(&mut self, n: u8) -> Result<u64, Self::Error> {
            Ok(self.pmd[usize::from(n) % 64])
        }
        fn write_pmd(&mut self, n: u8, value: u64) -> Result<(), Self::Error> {
            self.pmd[usize::from(n) % 64] = value;
            Ok(())
        }
    }

    /// Counter 4 samples CPU cycles (event 12H), counter 7 every Nth ITLB
    /// miss through the I-EAR; `overflowed` is the PMC0 image to report.
    pub fn bench<O: Owner>(name: &str, overflowed: u64) {
        let g = Generation::Itanium2;
        let state = Box::leak(Box::new(PmiState::new()));
        let regs = Recording::<_, 1>::new(Regs {
            pmc: [0; 64],
            pmd: [0; 64],
            overflowed: 0,
        });
        let (mut d, c) = ItaniumDriver::<O, _>::take(regs, g, state).unwrap();
        let n = SampleAfter::new(100_000, overflow_rule(g)).unwrap();
        let hw4 = Counter::new(g, 4).unwrap();
        let cycles = pmc::CounterPmc::new(hw4, EventCode::new(g, 0x12).unwrap())
            .unwrap()
            .with_plm(Plm::ALL)
            .with_privileged(true);
        let a =
            c.c4.configure(&mut d, &CounterConfig::counting(cycles).sampling(n))
                .unwrap();
        let a = a.enable(&mut d).unwrap();
        let ear = IearConfig::tlb_misses(g, TlbFills::ALL)
            .unwrap()
            .with_plm(Plm::ALL)
            .with_privileged(true);
        let itlb = CounterConfig::itlb_sampling(Counter::new(g, 7).unwrap(), n, ear).unwrap();
        let b =
            c.c7.configure(&mut d, &itlb)
                .unwrap()
                .enable(&mut d)
                .unwrap();
        d.regs().inner_mut().overflowed = overflowed;
        d.regs().clear();
        let mut sink = 0u64;
        handle_pmi(state, d.regs(), 1, |s| sink += s.sample.rip).unwrap();
        let t = d.regs().take_counts();
        let mut regs = Regs {
            pmc: [0; 64],
            pmd: [0; 64],
            overflowed,
        };
        let iterations = 2_000_000u64;
        let mut best = f64::MAX;
        for _ in 0..5 {
            let start = Instant::now();
            for i in 0..iterations {
                let r = handle_pmi(state, &mut regs, i, |s| {
                    sink = sink.wrapping_add(s.sample.rip)
                });
                black_box(r.ok());
            }
            best = best.min(start.elapsed().as_nanos() as f64 / iterations as f64);
        }
        black_box(sink);
        println!(
            "itanium-overflow/{name}: {best:.1} ns/interrupt ({iterations} iterations, best of 5); \
             per interrupt {} PMC reads, {} PMC writes, {} PMD reads, {} PMD writes",
            t.pmc_reads, t.pmc_writes, t.pmd_reads, t.pmd_writes
        );
        let _ = (a, b);
    }
}

// Each benchmark drives a PMU of its own (an owner is taken once).
pmu::owner!(Nb1);
pmu::owner!(Nb2);
pmu::owner!(Nb3);
pmu::owner!(Nb4);
pmu::owner!(Ia1);
pmu::owner!(Ia2);
pmu::owner!(Ia3);

fn main() {
    bench::<Nb1>("1-armed-1-overflowed", 1, 1);
    bench::<Nb2>("4-armed-1-overflowed", 4, 1);
    bench::<Nb3>("4-armed-4-overflowed", 4, 1 | 1 << 12 | 1 << 14 | 1 << 1);
    bench::<Nb4>("4-armed-spurious", 4, 0);
    // Itanium 2: PMC0 bit 4 + n is counter n's overflow bit (bit 0 is fr).
    itanium::bench::<Ia1>("cycles-overflowed", 1 | 1 << 4);
    itanium::bench::<Ia2>("cycles-and-iear-overflowed", 1 | 1 << 4 | 1 << 7);
    itanium::bench::<Ia3>("spurious", 0);
}

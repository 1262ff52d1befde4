//! The world switch's isolation property for Itanium, checked on the Itanium model
//! (a test instrument written from the manuals, strict: it reports every
//! write the hardware would silently absorb):
//!
//! * random guest writes, per guest policy: a random PMC or PMD number
//!   (the implemented ones, those around them, up to 255) with a random
//!   value, through [`check_pmc_write`] and [`check_pmd_write`]; every
//!   value they apply the strict model takes exactly (the hardware keeps
//!   what the context records), no applied write reaches a host register,
//!   the host's registers keep their images and its counter counts every
//!   cycle the PMU is not frozen (the guest cannot clear the Itanium 2
//!   power enable);
//! * random world switches between two guests beside a host counter, with
//!   counters (some with `oi`, so guest overflows freeze the PMU and are
//!   taken by the VMM's handler at once), the D-EAR, I-EAR and branch trace
//!   in use and the guests freezing and unfreezing their PMUs: after every
//!   switch every PMC and PMD the incoming guest can read equals what a
//!   private model of its PMU (its own writes and events only) holds, so
//!   no read shows another context's value, PMC0 included; no switched-out
//!   monitor counted or captured (events, misses and branches come while
//!   the other guest runs and while none does); the host's counter is
//!   exact.
//!
//! Every count and capture is the model's. Both run at full size
//! (1,000,000 writes per policy, 10,000 switches) in every `cargo test`.

use std::vec::Vec;

use super::*;
use crate::arch::itanium::btb::BtbConfig;
use crate::arch::itanium::ear::{IearConfig, TlbFills};
use crate::model::itanium::{Branch, FetchMiss, TlbFill};
use crate::testing::rng;

fn model_generation(g: Generation) -> ModelGeneration {
    match g {
        Generation::Itanium => ModelGeneration::Itanium,
        Generation::Itanium2 => ModelGeneration::Itanium2,
        Generation::Montecito => ModelGeneration::Montecito,
    }
}

/// A random 64-bit value from the fixed-seed generator.
fn u64_of(rnd: &mut impl FnMut(u64) -> u64) -> u64 {
    rnd(1 << 32) << 32 | rnd(1 << 32)
}

/// A random register number: mostly 0-63, some up to 255.
fn random_reg(rnd: &mut impl FnMut(u64) -> u64) -> u8 {
    (if rnd(8) == 0 { rnd(256) } else { rnd(64) }) as u8
}

/// A random value for PMC `pmc` of `g`: any 64 bits, a single bit, the
/// power-up value with random writable bits, or a counter configuration
/// from fields (so that accepted values are common).
fn random_pmc_value(rnd: &mut impl FnMut(u64) -> u64, g: Generation, pmc: u8) -> u64 {
    match (rnd(4), g.pmc(pmc)) {
        (0, _) | (_, None) => u64_of(rnd),
        (1, _) => 1 << rnd(64),
        (2, Some(info)) => info.merge(u64_of(rnd)),
        (_, Some(info)) => {
            let code = [0x12, 0x08, 0x11, 0xC8, 0x43][rnd(5) as usize];
            info.merge(code << 8 | rnd(1 << 8) | rnd(1 << 16) << 16 & 0xF_0000)
        }
    }
}

/// A random value for a PMD: any 64 bits, a counter value near the wrap,
/// or a small one.
fn random_pmd_value(rnd: &mut impl FnMut(u64) -> u64, g: Generation) -> u64 {
    match rnd(3) {
        0 => u64_of(rnd),
        1 => g.counter_mask() - rnd(64),
        _ => rnd(1000),
    }
}

/// What the random writes did, for the report.
#[derive(Debug, Default)]
struct WriteTally {
    pmcs_applied: u64,
    pmcs_refused: u64,
    pmcs_refused_model_would_take: u64,
    pmc0_virtual: u64,
    pmds_applied: u64,
    pmds_ignored: u64,
    host_cycles: u64,
}

/// `n` random guest writes under `p`, checked as the module says. The host
/// keeps counter `host` counting CPU cycles (12H).
fn random_writes(p: &GuestPolicy, host: u8, seed: u64, n: u64) -> WriteTally {
    let g = p.generation;
    let mut applied = ItaniumModel::new(model_generation(g));
    applied.set_psr(Psr::MONITORING);
    let host_pmc = CounterPmc::new(
        Counter::new(g, host).unwrap(),
        EventCode::new(g, 0x12).unwrap(),
    )
    .unwrap()
    .with_plm(Plm::ALL)
    .bits();
    applied.write_pmc(u32::from(host), host_pmc).unwrap();
    scrub_all(p, &mut applied).unwrap();
    applied.write_pmc(0, 0).unwrap();
    let host_pmds = p.host_pmds();
    let host_images: Vec<(u8, u64)> = p
        .host_pmcs
        .iter()
        .map(|r| (r, applied.read_pmc(u32::from(r)).unwrap()))
        .collect();
    let mut v = GuestValidator::new(g);
    let mut rnd = rng(seed);
    let mut t = WriteTally::default();
    let mut wrong: Vec<std::string::String> = Vec::new();
    for i in 0..n {
        let reg = random_reg(&mut rnd);
        if rnd(2) == 0 {
            let value = random_pmc_value(&mut rnd, g, reg);
            match check_pmc_write(&mut v, p, reg, value) {
                PmcWrite::Apply(w) => {
                    t.pmcs_applied += 1;
                    if let Err(f) = applied.write_pmc(u32::from(reg), w) {
                        wrong.push(std::format!("applied PMC{reg} {w:#x}: {f}"));
                    }
                    if p.host_pmcs.contains(reg) || reg < 4 {
                        wrong.push(std::format!("applied PMC{reg}"));
                    }
                }
                PmcWrite::Virtual => {
                    t.pmc0_virtual += 1;
                    if reg >= 4 {
                        wrong.push(std::format!("PMC{reg} virtual"));
                    }
                }
                PmcWrite::Ignore(_) => {
                    t.pmcs_refused += 1;
                    let mut probe = applied.clone();
                    t.pmcs_refused_model_would_take +=
                        u64::from(probe.write_pmc(u32::from(reg), value).is_ok());
                }
            }
        } else {
            let value = random_pmd_value(&mut rnd, g);
            match check_pmd_write(p, reg, value) {
                PmdWrite::Apply(w) => {
                    t.pmds_applied += 1;
                    if let Err(f) = applied.write_pmd(u32::from(reg), w) {
                        wrong.push(std::format!("applied PMD{reg} {w:#x}: {f}"));
                    }
                    if host_pmds.contains(reg) {
                        wrong.push(std::format!("applied PMD{reg}"));
                    }
                    if applied.read_pmd(u32::from(reg)).ok().map(|r| r & w) != Some(w) {
                        wrong.push(std::format!("PMD{reg} did not keep {w:#x}"));
                    }
                }
                PmdWrite::Ignore(_) => t.pmds_ignored += 1,
            }
        }
        if i % 1000 == 999 {
            // The host's counter counts every cycle the PMU runs: no guest
            // write stops it (the power enable stays set). A guest counter
            // overflowing with `oi` may freeze the PMU: the host's handler
            // unfreezes it (in the world switch the guest's take_overflows
            // does).
            let before = applied.read_pmd(u32::from(host)).unwrap() & g.counter_mask();
            let d = applied.inject(Event::new(0x12, 0, 100));
            let after = applied.read_pmd(u32::from(host)).unwrap() & g.counter_mask();
            if after.wrapping_sub(before) & g.counter_mask() != d.counted_cycles {
                wrong.push(std::format!(
                    "after write {i}: the host counted {before} -> {after}, {d:?}"
                ));
            }
            t.host_cycles += d.counted_cycles;
            if applied.frozen() {
                applied.write_pmc(0, 0).unwrap();
                applied.take_interrupt();
            }
        }
        if wrong.len() > 8 {
            break;
        }
    }
    for &(r, image) in &host_images {
        if applied.read_pmc(u32::from(r)).ok() != Some(image) {
            wrong.push(std::format!("host PMC{r} changed"));
        }
    }
    assert!(wrong.is_empty(), "{p:?}: {wrong:?}");
    t
}

#[test]
fn random_guest_writes_are_only_what_the_hardware_keeps_and_never_the_hosts() {
    let n = crate::testing::fuzz_cases(1_000_000);
    let policies = [
        (
            "Itanium, host counter 7",
            GuestPolicy {
                generation: Generation::Itanium,
                host_pmcs: RegSet::single(7),
            },
            7,
            0x9E37_79B9_7F4A_7C15,
        ),
        (
            "Itanium 2, host counter 7 and the D-EAR",
            GuestPolicy {
                generation: Generation::Itanium2,
                host_pmcs: RegSet::single(7).with(11),
            },
            7,
            0xD1B5_4A32_D192_ED03,
        ),
        (
            "Montecito, host counter 15 and the ETB",
            GuestPolicy {
                generation: Generation::Montecito,
                host_pmcs: RegSet::single(15).with(39),
            },
            15,
            0xA076_1D64_78BD_642F,
        ),
    ];
    for (name, p, host, seed) in policies {
        let t = random_writes(&p, host, seed, n);
        std::println!(
            "{name}: {n} random writes: PMCs {} applied (the strict model took each), {} \
             dropped as perfmon refuses them ({} of which the model would take), {} to the \
             virtual PMC0; PMDs {} applied, {} dropped; the host's counter exact over {} cycles",
            t.pmcs_applied,
            t.pmcs_refused,
            t.pmcs_refused_model_would_take,
            t.pmc0_virtual,
            t.pmds_applied,
            t.pmds_ignored,
            t.host_cycles
        );
        assert!(t.pmcs_applied > n / 50, "{name}: {t:?}");
        assert!(t.pmcs_refused > n / 20, "{name}: {t:?}");
        assert!(
            t.pmds_applied > n / 20 && t.pmds_ignored > n / 20,
            "{name}: {t:?}"
        );
        assert!(t.host_cycles > n / 20, "{name}: {t:?}");
    }
}

type Hw = Recording<ItaniumModel, 64>;

/// A guest for the switch test: its context and validator, and a private
/// model of its PMU that sees only its own writes and events.
struct Guest {
    ctx: PmuContext,
    validator: GuestValidator,
    reference: ItaniumModel,
    writes: u64,
    interrupts: u64,
}

impl Guest {
    fn new() -> Guest {
        let mut reference = ItaniumModel::new(ModelGeneration::Itanium2);
        reference.set_psr(Psr::MONITORING);
        Guest {
            ctx: PmuContext::new(G),
            validator: GuestValidator::new(G),
            reference,
            writes: 0,
            interrupts: 0,
        }
    }

    /// The guest writes PMC `pmc` while loaded.
    fn pmc(&mut self, p: &GuestPolicy, hw: &mut Hw, pmc: u8, value: u64) {
        match check_pmc_write(&mut self.validator, p, pmc, value) {
            PmcWrite::Apply(w) => {
                self.ctx.write_pmc(hw, pmc, w).unwrap();
                self.reference.write_pmc(u32::from(pmc), w).unwrap();
                self.writes += 1;
            }
            PmcWrite::Virtual if pmc == 0 => {
                self.take(hw);
                self.ctx.write_pmc0(hw, value).unwrap();
                // What a PMC0 keeps: fr and the counters' bits.
                self.reference.write_pmc(0, value & 0xF1).unwrap();
                self.writes += 1;
            }
            // PMC1-3 hold nothing on Itanium 2: the write is ignored.
            PmcWrite::Virtual => {}
            PmcWrite::Ignore(_) => {}
        }
    }

    /// The guest writes PMD `pmd` while loaded.
    fn pmd(&mut self, p: &GuestPolicy, hw: &mut Hw, pmd: u8, value: u64) {
        if let PmdWrite::Apply(w) = check_pmd_write(p, pmd, value) {
            self.ctx.write_pmd(hw, pmd, w).unwrap();
            self.reference.write_pmd(u32::from(pmd), w).unwrap();
            self.writes += 1;
        }
    }

    /// The VMM's interrupt handler while this guest is loaded.
    fn take(&mut self, hw: &mut Hw) {
        hw.inner_mut().take_interrupt();
        if !self.ctx.take_overflows(hw).unwrap().is_empty() {
            self.interrupts += 1;
        }
    }
}

/// One of the set-ups the switch test's guests program.
fn program(rnd: &mut impl FnMut(u64) -> u64, g: &mut Guest, p: &GuestPolicy, hw: &mut Hw) {
    match rnd(6) {
        // A counter (4-6; 7 is the host's): cycles, retired instructions
        // (PMC4/5), branch or D-EAR events, `oi` half of the time, from a
        // preset that is often just below the wrap.
        0..=2 => {
            let n = 4 + rnd(3) as u8;
            let codes: &[u8] = if n < 6 {
                &[0x12, 0x08, 0x11, 0xC8]
            } else {
                &[0x12, 0x11, 0xC8]
            };
            let code = codes[rnd(codes.len() as u64) as usize];
            let c = Counter::new(G, n).unwrap();
            let v = CounterPmc::new(c, EventCode::new(G, code).unwrap())
                .unwrap()
                .with_plm(Plm::ALL)
                .with_privileged(rnd(2) == 0)
                .with_overflow_interrupt(rnd(2) == 0)
                .bits();
            let preset = if rnd(2) == 0 {
                G.counter_mask() - rnd(40)
            } else {
                rnd(1000)
            };
            g.pmd(p, hw, n, preset);
            g.pmc(p, hw, n, v);
        }
        // The D-EAR in cache mode (latency at least 4 or 64 cycles), or the
        // I-EAR in TLB mode.
        3 => {
            if rnd(2) == 0 {
                let f = [LatencyFilter::AtLeast4, LatencyFilter::AtLeast64][rnd(2) as usize];
                let v = DearConfig::cache_misses(G, f).unwrap().with_plm(Plm::ALL);
                g.pmc(p, hw, 11, v.bits());
            } else {
                let fills = TlbFills {
                    l2: true,
                    hpw: true,
                    software: rnd(2) == 0,
                };
                let v = IearConfig::tlb_misses(G, fills).unwrap();
                g.pmc(p, hw, 10, v.with_plm(Plm::ALL).bits());
            }
        }
        // The branch trace buffer, its index reset.
        4 => {
            g.pmc(
                p,
                hw,
                12,
                BtbConfig::capture_all(G).with_plm(Plm::ALL).bits(),
            );
            g.pmd(p, hw, 16, 0);
        }
        // The guest's own freeze: mostly unfrozen (its overflow bits
        // cleared), sometimes frozen.
        _ => g.pmc(p, hw, 0, u64::from(rnd(4) == 0)),
    }
}

/// Events the guest causes while loaded (to the hardware and its private
/// model), or that happen while no guest is (to the hardware only). A
/// guest overflow that freezes the PMU is taken at once (the VMM's
/// handler) and the events after it go on counting for the host. Returns
/// the cycles (12H) among them.
fn events(rnd: &mut impl FnMut(u64) -> u64, hw: &mut Hw, mut guest: Option<&mut Guest>) -> u64 {
    let mut cycles = 0;
    match rnd(4) {
        0 | 1 => {
            let code = [0x12, 0x08, 0x11][rnd(3) as usize];
            let n = if rnd(8) == 0 {
                1 + rnd(3000)
            } else {
                1 + rnd(60)
            };
            let e = Event::new(code, 0, n).at(rnd(4) as u8);
            if let Some(g) = guest.as_deref_mut() {
                g.reference.inject(e);
            }
            let mut left = n;
            while left > 0 {
                let d = hw.inner_mut().inject(Event { count: left, ..e });
                left -= d.counted_cycles;
                if code == 0x12 {
                    cycles += d.counted_cycles;
                }
                if !d.froze {
                    break;
                }
                let g = guest
                    .as_deref_mut()
                    .expect("only a guest's counter freezes");
                g.take(hw);
            }
        }
        2 => {
            let miss = DataMiss::cache(
                0x6000_0000 + rnd(1 << 20) * 16,
                0x4000_0000 + rnd(1 << 16) * 16,
                rnd(3) as u8,
                1 + rnd(100) as u32,
            );
            hw.inner_mut().data_miss(miss);
            if let Some(g) = guest {
                g.reference.data_miss(miss);
                if hw.inner().frozen() {
                    g.take(hw);
                }
            }
        }
        _ => {
            let b = Branch::taken(
                0x4000_0000 + rnd(1 << 16) * 16,
                rnd(3) as u8,
                0x4100_0000 + rnd(1 << 16) * 16,
            );
            let f = FetchMiss::tlb(
                0x4000_0000 + rnd(1 << 16) * 32,
                [TlbFill::L2, TlbFill::Hpw, TlbFill::Software][rnd(3) as usize],
            );
            hw.inner_mut().branch(b);
            hw.inner_mut().fetch_miss(f);
            if let Some(g) = guest {
                g.reference.branch(b);
                g.reference.fetch_miss(f);
                if hw.inner().frozen() {
                    g.take(hw);
                }
            }
        }
    }
    assert!(!hw.inner().frozen(), "a frozen PMU left behind");
    cycles
}

/// Every PMC and PMD the guest can read, against its private model.
fn compare(p: &GuestPolicy, hw: &mut Hw, g: &mut Guest, when: &str) -> u64 {
    g.take(hw);
    let mut reads = 0;
    for r in 0..64u8 {
        let want_pmc = g.reference.read_pmc(u32::from(r)).unwrap_or(0);
        assert_eq!(g.ctx.read_pmc(r), want_pmc, "{when}: PMC{r}");
        let got_pmd = match check_pmd_read(p, r) {
            Ok(()) => hw.read_pmd(r).unwrap(),
            Err(_) => 0,
        };
        let want_pmd = g.reference.read_pmd(u32::from(r)).unwrap_or(0);
        assert_eq!(got_pmd, want_pmd, "{when}: PMD{r}");
        reads += 2;
    }
    reads
}

#[test]
fn random_world_switches_show_no_guest_another_context() {
    let n = 10_000u64;
    let p = policy();
    let mut hw = hardware();
    scrub_all(&p, &mut hw).unwrap();
    let mut guests = [Guest::new(), Guest::new()];
    let mut rnd = rng(0x5851_F42D_4C95_7F2D);
    let (mut host, mut reads, mut owed) = (0u64, 0u64, 0u64);
    let mut g = 0;
    guests[g].ctx.restore(&mut hw).unwrap();
    for switch in 0..n {
        for _ in 0..rnd(10) {
            let guest = &mut guests[g];
            match rnd(10) {
                0..=3 => program(&mut rnd, guest, &p, &mut hw),
                4 => {
                    let r = random_reg(&mut rnd);
                    let v = random_pmc_value(&mut rnd, G, r);
                    guest.pmc(&p, &mut hw, r, v);
                }
                5 => {
                    let r = random_reg(&mut rnd);
                    let v = random_pmd_value(&mut rnd, G);
                    guest.pmd(&p, &mut hw, r, v);
                }
                6..=8 => host += events(&mut rnd, &mut hw, Some(guest)),
                _ => reads += compare(&p, &mut hw, guest, "while loaded"),
            }
        }
        let guest = &mut guests[g];
        if !guest.ctx.save(&mut hw).unwrap().is_empty() {
            owed += 1;
            guest.interrupts += 1;
        }
        guest.ctx.scrub(&mut hw).unwrap();
        for _ in 0..rnd(3) {
            host += events(&mut rnd, &mut hw, None);
        }
        g = 1 - g;
        guests[g].ctx.restore(&mut hw).unwrap();
        reads += compare(
            &p,
            &mut hw,
            &mut guests[g],
            &std::format!("after switch {switch}"),
        );
        assert_eq!(hw.inner().pmc(7), cycles_pmc(7), "the host's PMC7");
        assert_eq!(
            hw.inner().pmd(7) & G.counter_mask(),
            host & G.counter_mask(),
            "the host's counter after switch {switch}"
        );
    }
    let counted: Vec<u64> = guests
        .iter()
        .map(|g| {
            (4..7)
                .map(|c| g.reference.counter(c) & G.counter_mask())
                .sum()
        })
        .collect();
    std::println!(
        "{n} switches: {reads} PMC/PMD reads, each the guest's own value or the neutral \
         image; guest writes applied {} and {}; guest interrupts {} and {} ({owed} at a \
         switch); guest counters (sum) {} and {}; the host's counter exact at {host} cycles \
         (model)",
        guests[0].writes,
        guests[1].writes,
        guests[0].interrupts,
        guests[1].interrupts,
        counted[0],
        counted[1]
    );
    for g in &guests {
        assert!(
            g.writes > n && g.interrupts > 0,
            "{} {}",
            g.writes,
            g.interrupts
        );
    }
    assert!(host > n);
}

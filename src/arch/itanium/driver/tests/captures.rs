//! D-EAR and branch trace buffer sampling through the driver, on the
//! Itanium model (a test instrument written from the manuals): the samples
//! the handler hands on are exactly the model's captures, and the register
//! traffic is exact. Every capture here comes from the model.

use std::vec::Vec;

use super::*;
use crate::arch::itanium::Slot;
use crate::arch::itanium::btb::{BranchRecord, BtbConfig, PredictionMask, TakenMask};
use crate::arch::itanium::ear::{
    DearConfig, DearEvent, DearSample, IcacheSample, IearConfig, InstructionAddress, LatencyFilter,
};
use crate::model::itanium::{Branch, DataMiss, FetchMiss};

fn dear_cache(g: Generation) -> DearConfig {
    DearConfig::cache_misses(g, LatencyFilter::AtLeast64)
        .unwrap()
        .with_plm(Plm::ALL)
        .with_privileged(true)
}

fn slot(s: u8) -> Option<Slot> {
    Slot::from_bits(u64::from(s))
}

/// The sample the D-EAR decoder should make of a cache miss the model
/// captured.
fn cache_sample(m: &DataMiss) -> DearSample {
    DearSample {
        valid: true,
        data_address: m.address,
        instruction: Some(InstructionAddress {
            bundle: m.ip & !0xF,
            slot: slot(m.slot),
        }),
        event: DearEvent::CacheMiss {
            latency: m.latency.unwrap() as u16,
            latency_overflow: false,
        },
    }
}

/// Every Nth data cache miss at or above 64 cycles, on every generation:
/// misses below the threshold are neither captured nor counted; each
/// overflow hands over the Nth capture (data address, latency, instruction
/// address and slot) for 1 PMC0 read, 3 D-EAR PMD reads, 1 reload and the
/// PMC0 write.
#[test]
fn dear_samples_every_nth_cache_miss() {
    for g in Generation::ALL {
        let state = crate::testing::itanium_pmu();
        let (mut d, c) = driver!(&state, g);
        let hw = HwCounter::new(g, 5).unwrap();
        let cfg = CounterConfig::dear_sampling(hw, sa(g, 2), dear_cache(g)).unwrap();
        assert_eq!(cfg.pmc.es(), dear_event_code(g));
        let c5 = c.c5.configure(&mut d, &cfg).unwrap();
        assert_eq!(
            d.regs().take_counts(),
            counts(0, 2, 0, 1),
            "configure: D-EAR PMC, counter PMC, PMD"
        );
        assert_eq!(
            c5.programmed().unit(),
            Some((Unit::Dear, cfg.dear.unwrap().bits()))
        );
        assert!(c5.programmed().one_per_cycle());
        let c5 = c5.enable(&mut d).unwrap();
        let (mut out, mut expected, mut captured) = (Vec::new(), Vec::new(), 0);
        for i in 0..40u64 {
            let latency = [70u32, 12, 64, 300, 63, 1000][i as usize % 6];
            let miss = DataMiss::cache(
                0x6000_0000 + i * 0x88,
                0x4000_0000 + i * 0x30,
                (i % 3) as u8,
                latency,
            );
            model(&mut d).data_miss(miss);
            if latency >= 64 {
                captured += 1;
                if captured % 2 == 0 {
                    expected.push(cache_sample(&miss));
                }
            }
            if model(&mut d).take_interrupt().is_some() {
                d.regs().clear();
                handle_pmi(&state, d.regs(), &mut (), ENTRY, i, |s| out.push(s)).unwrap();
                assert_eq!(d.regs().take_counts(), counts(1, 1, 3, 1), "{g:?}");
            }
        }
        let got: Vec<_> = out.iter().map(|s| s.payload.dear().unwrap()).collect();
        assert_eq!(got, expected, "{g:?}");
        assert!(
            out.iter()
                .all(|s| s.payload.itlb().is_none() && s.payload.btb().is_none())
        );
        assert_eq!(state.pmi().periods(5), captured / 2);
        assert_eq!(state.pmi().ear_invalid(), 0);
        d.regs().clear();
        let _ = c5.release(&mut d).unwrap();
        assert_eq!(d.regs().take_counts(), counts(1, 2, 0, 1), "release");
        assert_eq!(
            model(&mut d).pmc(u32::from(g.dear_pmc())),
            DearConfig::info(g).default,
            "the D-EAR PMC back at its power-up value"
        );
        d.retire();
    }
}

/// The exact register log of a D-EAR configuration and of one D-EAR
/// overflow on Montecito (PMC40; PMD32, PMD33, PMD36).
#[test]
fn dear_register_log_on_montecito() {
    let g = Generation::Montecito;
    let state = crate::testing::itanium_pmu();
    let (mut d, c) = driver!(&state, g);
    let dear = dear_cache(g);
    let cfg = CounterConfig::dear_sampling(HwCounter::new(g, 4).unwrap(), sa(g, 1), dear).unwrap();
    let c4 = c.c4.configure(&mut d, &cfg).unwrap();
    let image = c4.programmed().pmc();
    assert_eq!(
        d.regs().log(),
        [
            Access::WritePmc {
                pmc: 40,
                value: dear.bits()
            },
            Access::WritePmc {
                pmc: 4,
                value: image & !0xF
            },
            Access::WritePmd {
                pmd: 4,
                value: (1 << 47) - 1
            },
        ]
    );
    let _c4 = c4.enable(&mut d).unwrap();
    let miss = DataMiss::cache(0x6000_0040, 0x4000_0010, 2, 90);
    model(&mut d).data_miss(miss);
    assert!(model(&mut d).take_interrupt().is_some());
    d.regs().clear();
    let mut out = Vec::new();
    handle_pmi(&state, d.regs(), &mut (), ENTRY, 7, |s| out.push(s)).unwrap();
    assert_eq!(
        d.regs().log(),
        [
            Access::ReadPmc {
                pmc: 0,
                value: 1 | 1 << 4
            },
            Access::ReadPmd {
                pmd: 32,
                value: 0x6000_0040
            },
            // latency 90, stat 01b.
            Access::ReadPmd {
                pmd: 33,
                value: 90 | 1 << 14
            },
            // bundle, vl 3, slot 2.
            Access::ReadPmd {
                pmd: 36,
                value: 0x4000_0010 | 1 << 3 | 2
            },
            Access::WritePmd {
                pmd: 4,
                value: (1 << 47) - 1
            },
            Access::WritePmc { pmc: 0, value: 0 },
        ]
    );
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].payload.dear(), Some(cache_sample(&miss)));
    assert_eq!(out[0].rip, 7);
}

/// TLB mode hands over the level that filled the miss; ALAT mode (Itanium
/// 2 and Montecito) the address; a counted occurrence without a capture
/// (the D-EAR's PMDs say invalid) is counted in `ear_invalid`, not handed
/// on as a capture.
#[test]
fn dear_tlb_and_alat_modes_and_invalid_captures() {
    use crate::model::itanium::TlbFill as ModelFill;
    for g in Generation::ALL {
        let state = crate::testing::itanium_pmu();
        let (mut d, c) = driver!(&state, g);
        let tlb = DearConfig::tlb_misses(g, TlbFills::ALL)
            .unwrap()
            .with_plm(Plm::ALL)
            .with_privileged(true);
        let hw = HwCounter::new(g, 6).unwrap();
        let c6 =
            c.c6.configure(
                &mut d,
                &CounterConfig::dear_sampling(hw, sa(g, 1), tlb).unwrap(),
            )
            .unwrap()
            .enable(&mut d)
            .unwrap();
        let mut out = Vec::new();
        for (i, (fill, want)) in [
            (ModelFill::L2, ear::TlbFill::L2),
            (ModelFill::Hpw, ear::TlbFill::Hpw),
            (ModelFill::Software, ear::TlbFill::Software),
        ]
        .into_iter()
        .enumerate()
        {
            let miss = DataMiss::tlb(0x7000_0000 + i as u64 * 8, 0x4000_0100, 1, fill);
            model(&mut d).data_miss(miss);
            assert!(model(&mut d).take_interrupt().is_some(), "{g:?} {fill:?}");
            handle_pmi(&state, d.regs(), &mut (), ENTRY, 0, |s| out.push(s)).unwrap();
            let s = out.pop().unwrap().payload.dear().unwrap();
            assert_eq!(s.event, DearEvent::TlbMiss { fill: Some(want) }, "{g:?}");
            assert_eq!(s.data_address, miss.address);
        }
        // DATA_EAR_EVENTS counted with nothing captured: the PMDs hold the
        // last capture on Itanium (whose valid bit stays), so clear them
        // as a fresh PMU has them.
        for pmd in g.dear_pmds() {
            model(&mut d).write_pmd(u32::from(pmd), 0).unwrap();
        }
        model(&mut d).inject(Event::new(dear_event_code(g), 0, 1));
        assert!(model(&mut d).take_interrupt().is_some());
        handle_pmi(&state, d.regs(), &mut (), ENTRY, 0, |s| out.push(s)).unwrap();
        assert_eq!(out.pop().unwrap().payload.dear(), None, "{g:?}");
        assert_eq!(state.pmi().ear_invalid(), 1);
        let _ = c6.release(&mut d).unwrap();
        if g != Generation::Itanium {
            let alat = DearConfig::alat_misses(g)
                .unwrap()
                .with_plm(Plm::ALL)
                .with_privileged(true);
            let hw = HwCounter::new(g, 4).unwrap();
            let _c4 =
                c.c4.configure(
                    &mut d,
                    &CounterConfig::dear_sampling(hw, sa(g, 1), alat).unwrap(),
                )
                .unwrap()
                .enable(&mut d)
                .unwrap();
            model(&mut d).data_miss(DataMiss::alat(0x8000_0008, 0x4000_0200, 0));
            assert!(model(&mut d).take_interrupt().is_some());
            handle_pmi(&state, d.regs(), &mut (), ENTRY, 0, |s| out.push(s)).unwrap();
            let s = out.pop().unwrap().payload.dear().unwrap();
            assert_eq!(
                (s.event, s.data_address),
                (DearEvent::Alat, 0x8000_0008),
                "{g:?}"
            );
        } else {
            assert!(
                DearConfig::alat_misses(g).is_err(),
                "no ALAT mode on Itanium"
            );
        }
        d.retire();
    }
}

/// Refusals: the D-EAR counter must count DATA_EAR_EVENTS; one counter
/// owns the D-EAR; a counter programs one unit; nothing is written.
#[test]
fn dear_and_btb_configurations_are_checked() {
    let g = Generation::Itanium2;
    let state = crate::testing::itanium_pmu();
    let (mut d, c) = driver!(&state, g);
    let mut cfg = cycles_on(g, 4).sampling(sa(g, 10));
    cfg.dear = Some(dear_cache(g));
    let e = c.c4.configure(&mut d, &cfg).unwrap_err();
    assert_eq!(
        e.error,
        Error::Config(ConfigError::NotTheUnitEvent(Unit::Dear))
    );
    let hw4 = HwCounter::new(g, 4).unwrap();
    let mut both = CounterConfig::dear(hw4, dear_cache(g)).unwrap();
    both.btb = Some(BtbConfig::capture_all(g).with_plm(Plm::ALL));
    let e = e.counter.configure(&mut d, &both).unwrap_err();
    assert_eq!(
        e.error,
        Error::Config(ConfigError::NotTheUnitEvent(Unit::Btb))
    );
    let other = DearConfig::cache_misses(Generation::Itanium, LatencyFilter::AtLeast64).unwrap();
    let mut wrong = CounterConfig::dear(hw4, dear_cache(g)).unwrap();
    wrong.dear = Some(other.with_plm(Plm::ALL));
    let e = e.counter.configure(&mut d, &wrong).unwrap_err();
    assert_eq!(
        e.error,
        Error::Config(ConfigError::UnitGeneration(Unit::Dear))
    );
    assert_eq!(
        d.regs().take_counts(),
        counts(0, 0, 0, 0),
        "nothing written"
    );
    let c4 = e
        .counter
        .configure(&mut d, &CounterConfig::dear(hw4, dear_cache(g)).unwrap())
        .unwrap();
    let hw5 = HwCounter::new(g, 5).unwrap();
    let e =
        c.c5.configure(&mut d, &CounterConfig::dear(hw5, dear_cache(g)).unwrap())
            .unwrap_err();
    assert_eq!(
        e.error,
        Error::Config(ConfigError::UnitBusy {
            unit: Unit::Dear,
            owner: 4
        })
    );
    assert_eq!(
        std::format!(
            "{}",
            ConfigError::UnitBusy {
                unit: Unit::Dear,
                owner: 4
            }
        ),
        "counter 4 owns the D-EAR"
    );
    // The branch trace buffer is another unit: counter 5 can have it.
    let btb = BtbConfig::capture_all(g)
        .with_plm(Plm::ALL)
        .with_privileged(true);
    let c5 = e
        .counter
        .configure(&mut d, &CounterConfig::btb(hw5, btb).unwrap())
        .unwrap();
    let _ = (c4.release(&mut d).unwrap(), c5.release(&mut d).unwrap());
}

fn capture_all(g: Generation) -> BtbConfig {
    BtbConfig::capture_all(g)
        .with_plm(Plm::ALL)
        .with_privileged(true)
}

fn record(b: &Branch) -> BranchRecord {
    BranchRecord {
        source: b.source & !0xF,
        slot: if b.taken { slot(b.slot) } else { None },
        target: Some(b.target & !0xF),
        mispredicted: b.path_mispredicted || b.target_mispredicted,
        back_end_flush: false,
    }
}

/// Branch `i` of a test program: mostly taken, every fifth not taken,
/// every seventh mispredicted.
fn branch(i: u64) -> Branch {
    let source = 0x4000_0000 + i * 0x110;
    let b = if i % 5 == 4 {
        Branch::not_taken(source, (i % 3) as u8, source + 0x10)
    } else {
        Branch::taken(source, (i % 3) as u8, 0x4010_0000 + i * 0x40)
    };
    if i % 7 == 6 {
        b.target_mispredicted()
    } else {
        b
    }
}

/// Every Nth branch, on every generation: each overflow hands over the
/// branches since the previous sample as source -> target records, oldest
/// first; the traffic is 1 PMC0 read, the index (and Montecito's PMD39),
/// one read per record, the reload, the index emptied and the PMC0 write.
#[test]
fn btb_samples_every_nth_branch_as_source_target_records() {
    for g in Generation::ALL {
        let state = crate::testing::itanium_pmu();
        let (mut d, c) = driver!(&state, g);
        let n = 3;
        let hw = HwCounter::new(g, 7).unwrap();
        let cfg = CounterConfig::btb_sampling(hw, sa(g, n), capture_all(g)).unwrap();
        assert_eq!(cfg.pmc.es(), btb_event_code(g));
        let c7 = c.c7.configure(&mut d, &cfg).unwrap();
        assert_eq!(
            d.regs().take_counts(),
            counts(0, 2, 0, 2),
            "configure: BTB PMC, counter PMC, index, PMD"
        );
        let c7 = c7.enable(&mut d).unwrap();
        let (mut out, mut expected, mut pending) = (Vec::new(), Vec::new(), Vec::new());
        let extension = u32::from(g == Generation::Montecito);
        for i in 0..30u64 {
            let b = branch(i);
            model(&mut d).branch(b);
            pending.push(record(&b));
            if model(&mut d).take_interrupt().is_some() {
                expected.push(core::mem::take(&mut pending));
                d.regs().clear();
                handle_pmi(&state, d.regs(), &mut (), ENTRY, i, |s| out.push(s)).unwrap();
                assert_eq!(
                    d.regs().take_counts(),
                    counts(1, 1, 1 + extension + 2 * n as u32, 2),
                    "{g:?}"
                );
            }
        }
        assert_eq!(out.len(), 10, "{g:?}");
        let got: Vec<Vec<_>> = out
            .iter()
            .map(|s| s.payload.btb().unwrap().branches().collect())
            .collect();
        assert_eq!(got, expected, "{g:?}");
        assert!(
            got.iter().flatten().any(|r| r.slot.is_none()),
            "not-taken branches"
        );
        assert!(
            got.iter().flatten().any(|r| r.mispredicted),
            "mispredicted branches"
        );
        assert!(
            out.iter()
                .all(|s| s.payload.dear().is_none() && s.payload.itlb().is_none())
        );
        d.regs().clear();
        let _ = c7.release(&mut d).unwrap();
        assert_eq!(d.regs().take_counts(), counts(1, 2, 0, 1), "release");
        d.retire();
    }
}

/// More branches than the ring holds between two samples: the index's
/// `full` bit says the oldest record is at `bbi`, and the records come out
/// oldest first across the wrap (8 records: the last 4 branches of 5; the
/// exact register log on Itanium 2).
#[test]
fn btb_trace_wraps_through_the_index() {
    let g = Generation::Itanium2;
    let state = crate::testing::itanium_pmu();
    let (mut d, c) = driver!(&state, g);
    let hw = HwCounter::new(g, 4).unwrap();
    let cfg = CounterConfig::btb_sampling(hw, sa(g, 5), capture_all(g)).unwrap();
    let _c4 =
        c.c4.configure(&mut d, &cfg)
            .unwrap()
            .enable(&mut d)
            .unwrap();
    let branches: Vec<Branch> = (0..5).map(branch).collect();
    for b in &branches {
        model(&mut d).branch(*b);
    }
    assert!(model(&mut d).take_interrupt().is_some());
    d.regs().clear();
    let mut out = Vec::new();
    handle_pmi(&state, d.regs(), &mut (), ENTRY, 0, |s| out.push(s)).unwrap();
    let log = d.regs().log();
    // PMC0, the index (bbi 2, full), records 2-7 then 0-1, the index
    // emptied, the reload, PMC0.
    assert_eq!(
        log[0],
        Access::ReadPmc {
            pmc: 0,
            value: 1 | 1 << 4
        }
    );
    assert!(matches!(log[1], Access::ReadPmd { pmd: 16, value } if value & 0xF == 2 | 1 << 3));
    let pmds: Vec<u8> = log[2..10]
        .iter()
        .map(|a| match a {
            Access::ReadPmd { pmd, .. } => *pmd,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(pmds, [10, 11, 12, 13, 14, 15, 8, 9]);
    assert_eq!(
        log[10..],
        [
            Access::WritePmd { pmd: 16, value: 0 },
            Access::WritePmd {
                pmd: 4,
                value: (1 << 47) - 5
            },
            Access::WritePmc { pmc: 0, value: 0 },
        ]
    );
    let got: Vec<_> = out[0].payload.btb().unwrap().branches().collect();
    let want: Vec<_> = branches[1..].iter().map(record).collect();
    assert_eq!(got, want);
    // Emptied: the next sample starts afresh.
    assert_eq!(model(&mut d).pmd(16), 0);
}

/// PMC12's filters through the driver: taken branches only, mispredicted
/// only; branches the buffer does not capture are not counted either.
#[test]
fn btb_filters_select_the_branches() {
    for g in Generation::ALL {
        let state = crate::testing::itanium_pmu();
        let (mut d, c) = driver!(&state, g);
        let taken = capture_all(g).with_taken(TakenMask::Taken);
        let hw = HwCounter::new(g, 5).unwrap();
        let c5 =
            c.c5.configure(
                &mut d,
                &CounterConfig::btb_sampling(hw, sa(g, 2), taken).unwrap(),
            )
            .unwrap()
            .enable(&mut d)
            .unwrap();
        let mut out = Vec::new();
        let mut want = Vec::new();
        for i in 0..10 {
            let b = branch(i);
            model(&mut d).branch(b);
            if b.taken {
                want.push(record(&b));
            }
            if model(&mut d).take_interrupt().is_some() {
                handle_pmi(&state, d.regs(), &mut (), ENTRY, 0, |s| out.push(s)).unwrap();
            }
        }
        let got: Vec<_> = out
            .iter()
            .flat_map(|s| s.payload.btb().unwrap().branches().collect::<Vec<_>>())
            .collect();
        assert_eq!(got, want[..got.len()], "{g:?}");
        assert_eq!(got.len(), 8, "{g:?}: 8 of 10 taken, 2 per sample");
        let _ = c5.release(&mut d).unwrap();
        // Mispredicted targets, whatever the path prediction.
        let mispredicted = capture_all(g).with_target_prediction(PredictionMask::Mispredicted);
        let hw = HwCounter::new(g, 6).unwrap();
        let _c6 =
            c.c6.configure(
                &mut d,
                &CounterConfig::btb_sampling(hw, sa(g, 1), mispredicted).unwrap(),
            )
            .unwrap()
            .enable(&mut d)
            .unwrap();
        out.clear();
        for i in 0..14 {
            model(&mut d).branch(branch(i));
            if model(&mut d).take_interrupt().is_some() {
                handle_pmi(&state, d.regs(), &mut (), ENTRY, 0, |s| out.push(s)).unwrap();
            }
        }
        let got: Vec<_> = out
            .iter()
            .flat_map(|s| s.payload.btb().unwrap().branches().collect::<Vec<_>>())
            .collect();
        assert_eq!(got, [record(&branch(6)), record(&branch(13))], "{g:?}");
        d.retire();
    }
}

/// The erased run-time handles ([`AnyHandle`]) configure D-EAR and BTB
/// sampling as the typed ones do, and release the units.
#[test]
fn erased_handles_sample_the_dear_and_the_btb() {
    let g = Generation::Montecito;
    let state = crate::testing::itanium_pmu();
    let (mut d, c) = driver!(&state, g);
    let m = c.montecito.unwrap();
    let mut dear: AnyHandle<Itanium> = m.c9.erase();
    let mut btb: AnyHandle<Itanium> = m.c14.erase();
    let hw9 = HwCounter::new(g, 9).unwrap();
    let hw14 = HwCounter::new(g, 14).unwrap();
    dear.configure(
        &mut d,
        &CounterConfig::dear_sampling(hw9, sa(g, 1), dear_cache(g)).unwrap(),
    )
    .unwrap();
    btb.configure(
        &mut d,
        &CounterConfig::btb_sampling(hw14, sa(g, 2), capture_all(g)).unwrap(),
    )
    .unwrap();
    dear.enable(&mut d).unwrap();
    btb.enable(&mut d).unwrap();
    let miss = DataMiss::cache(0x6000_1000, 0x4000_0040, 1, 200);
    model(&mut d).data_miss(miss);
    let mut out = Vec::new();
    assert!(model(&mut d).take_interrupt().is_some());
    handle_pmi(&state, d.regs(), &mut (), ENTRY, 0, |s| out.push(s)).unwrap();
    let (b0, b1) = (branch(0), branch(1));
    model(&mut d).branch(b0);
    model(&mut d).branch(b1);
    assert!(model(&mut d).take_interrupt().is_some());
    handle_pmi(&state, d.regs(), &mut (), ENTRY, 0, |s| out.push(s)).unwrap();
    assert_eq!(out.len(), 2);
    assert_eq!(
        (out[0].counter, out[0].payload.dear()),
        (9, Some(cache_sample(&miss)))
    );
    assert_eq!(out[1].counter, 14);
    let got: Vec<_> = out[1].payload.btb().unwrap().branches().collect();
    assert_eq!(got, [record(&b0), record(&b1)]);
    dear.release(&mut d).unwrap();
    btb.release(&mut d).unwrap();
    assert_eq!(model(&mut d).pmc(40), DearConfig::info(g).default);
    assert_eq!(model(&mut d).pmc(39), BtbConfig::info(g).default);
    assert!(d.claimed().is_empty());
}

fn iear_cache(g: Generation) -> IearConfig {
    IearConfig::cache_misses(g, LatencyFilter::AtLeast128)
        .unwrap()
        .with_plm(Plm::ALL)
        .with_privileged(true)
}

/// The sample the I-EAR decoder should make of an instruction cache miss
/// the model captured: the 32-byte line, the latency as its PMD1 records it
/// (12 bits; Itanium saturates at FFFh, Itanium 2 and Montecito set the
/// overflow bit beyond).
fn icache_sample(g: Generation, address: u64, latency: u32) -> IcacheSample {
    IcacheSample {
        line: address & !0x1F,
        latency: latency.min(0xFFF) as u16,
        latency_overflow: g != Generation::Itanium && latency > 0xFFF,
    }
}

/// I-EAR cache mode through the driver: every Nth instruction
/// cache miss at or above 128 cycles, on every generation. Misses below
/// the threshold are neither captured nor counted; each overflow hands
/// over the Nth capture (line, latency, latency overflow) for 1 PMC0 read,
/// 2 I-EAR PMD reads (PMD0/1, Montecito PMD34/35), 1 reload and the PMC0
/// write.
#[test]
fn iear_samples_every_nth_icache_miss() {
    for g in Generation::ALL {
        let state = crate::testing::itanium_pmu();
        let (mut d, c) = driver!(&state, g);
        let hw = HwCounter::new(g, 6).unwrap();
        let cfg = CounterConfig::icache_sampling(hw, sa(g, 2), iear_cache(g)).unwrap();
        assert_eq!(cfg.pmc.es(), iear_event_code(g));
        let c6 = c.c6.configure(&mut d, &cfg).unwrap();
        assert_eq!(
            d.regs().take_counts(),
            counts(0, 2, 0, 1),
            "configure: I-EAR PMC, counter PMC, PMD"
        );
        assert!(c6.programmed().captures_icache());
        assert!(!c6.programmed().captures_itlb());
        let c6 = c6.enable(&mut d).unwrap();
        let (mut out, mut expected, mut captured) = (Vec::new(), Vec::new(), 0);
        for i in 0..42u64 {
            let latency = [130u32, 12, 128, 300, 127, 1000, 5000][i as usize % 7];
            // Not line-aligned: the line is bits 63:5.
            let address = 0x4000_0000 + i * 0x1040 + 0x13;
            model(&mut d).fetch_miss(FetchMiss::cache(address, latency));
            if latency >= 128 {
                captured += 1;
                if captured % 2 == 0 {
                    expected.push(icache_sample(g, address, latency));
                }
            }
            if model(&mut d).take_interrupt().is_some() {
                d.regs().clear();
                handle_pmi(&state, d.regs(), &mut (), ENTRY, i, |s| out.push(s)).unwrap();
                assert_eq!(d.regs().take_counts(), counts(1, 1, 2, 1), "{g:?}");
            }
        }
        let got: Vec<_> = out.iter().map(|s| s.payload.icache().unwrap()).collect();
        assert_eq!(got, expected, "{g:?}");
        assert_eq!(got.len(), 15);
        // 5000 cycles: saturated on Itanium, the overflow bit after.
        assert!(
            got.iter()
                .any(|s| s.latency == 0xFFF && s.latency_overflow == (g != Generation::Itanium))
        );
        assert!(out.iter().all(|s| s.payload.itlb().is_none()
            && s.payload.dear().is_none()
            && s.payload.btb().is_none()));
        assert_eq!(state.pmi().periods(6), captured / 2);
        assert_eq!(state.pmi().ear_invalid(), 0);
        d.regs().clear();
        let _ = c6.release(&mut d).unwrap();
        assert_eq!(d.regs().take_counts(), counts(1, 2, 0, 1), "release");
        assert_eq!(
            model(&mut d).pmc(u32::from(g.iear_pmc())),
            IearConfig::info(g).default,
            "the I-EAR PMC back at its power-up value"
        );
        d.retire();
    }
}

/// The exact register log of one cache-mode I-EAR overflow on Montecito
/// (PMD34, PMD35) and Itanium (PMD0, PMD1, `v` bit), and a capture the
/// PMDs say is invalid: counted in `ear_invalid`, handed on without
/// `icache`.
#[test]
fn icache_register_log_and_invalid_capture() {
    for (g, pmd0, pmd1, address_value, latency_value) in [
        // Montecito: stat 01b; latency 300.
        (Generation::Montecito, 34, 35, 0x4000_0040 | 1, 300),
        // Itanium: v = 1; latency 300.
        (Generation::Itanium, 0, 1, 0x4000_0040 | 1, 300),
    ] {
        let state = crate::testing::itanium_pmu();
        let (mut d, c) = driver!(&state, g);
        let cfg =
            CounterConfig::icache_sampling(HwCounter::new(g, 5).unwrap(), sa(g, 1), iear_cache(g))
                .unwrap();
        let _c5 =
            c.c5.configure(&mut d, &cfg)
                .unwrap()
                .enable(&mut d)
                .unwrap();
        model(&mut d).fetch_miss(FetchMiss::cache(0x4000_0047, 300));
        assert!(model(&mut d).take_interrupt().is_some());
        d.regs().clear();
        let mut out = Vec::new();
        handle_pmi(&state, d.regs(), &mut (), ENTRY, 9, |s| out.push(s)).unwrap();
        let reload = g.counter_mask();
        assert_eq!(
            d.regs().log(),
            [
                // fr and counter 5's overflow bit.
                Access::ReadPmc {
                    pmc: 0,
                    value: 1 | 1 << 5
                },
                Access::ReadPmd {
                    pmd: pmd0,
                    value: address_value
                },
                Access::ReadPmd {
                    pmd: pmd1,
                    value: latency_value
                },
                Access::WritePmd {
                    pmd: 5,
                    value: reload
                },
                Access::WritePmc { pmc: 0, value: 0 },
            ],
            "{g:?}"
        );
        assert_eq!(out.len(), 1);
        assert_eq!(
            out[0].payload.icache(),
            Some(IcacheSample {
                line: 0x4000_0040,
                latency: 300,
                latency_overflow: false
            })
        );
        assert_eq!(out[0].rip, 9);
        // The next overflow finds the address PMD cleared (v = 0 / stat =
        // 0): no capture to hand on.
        model(&mut d).fetch_miss(FetchMiss::cache(0x4000_0087, 200));
        assert!(model(&mut d).take_interrupt().is_some());
        model(&mut d)
            .write_pmd(u32::from(pmd0), 0x4000_0080)
            .unwrap();
        out.clear();
        handle_pmi(&state, d.regs(), &mut (), ENTRY, 10, |s| out.push(s)).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].payload.icache(), None);
        assert_eq!(state.pmi().ear_invalid(), 1);
        assert_eq!(state.pmi().periods(5), 2);
        d.retire();
    }
}

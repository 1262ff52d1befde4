//! The I-EAR and D-EAR: capture in every mode and fill level, per
//! generation, their gating, and sampling every Nth event through a counter.

use super::helpers::*;
use crate::model::itanium::tables::Tables;

const ADDR: u64 = 0x4000_0000_0012_3456;
const LINE: u64 = 0x4000_0000_0012_3440; // ADDR with bits 4:0 clear
const IP: u64 = 0x4000_0000_0000_0A50;

/// Itanium PMC10/PMC11: plm 3:0, tlb 7, umask 19:16 (ism 00).
fn itanium_ear(tlb: bool, umask: u64) -> u64 {
    0xF | (u64::from(tlb) << 7) | (umask << 16)
}

/// Itanium 2 / Montecito I-EAR: plm, umask 12:5 or 11:5, ct 13:12.
fn itanium2_iear_tlb(umask: u64) -> u64 {
    0xF | (umask << 5)
}

fn itanium2_iear_cache(pattern: u64) -> u64 {
    0xF | (pattern << 5) | (1 << 13)
}

/// Itanium 2 / Montecito D-EAR: plm, mode 8:7, umask 19:16 (+ Montecito ism).
fn itanium2_dear(g: Generation, mode: u64, umask: u64) -> u64 {
    let ism = if g == Montecito { 2 << 24 } else { 0 };
    0xF | (mode << 7) | (umask << 16) | ism
}

#[test]
fn itanium_iear_tlb_mode_records_the_fill_and_has_no_l2_option() {
    let mut m = ready(Itanium);
    m.write_pmc(10, itanium_ear(true, 0xC)).unwrap();
    assert_eq!(
        m.fetch_miss(FetchMiss::tlb(ADDR, TlbFill::Hpw)),
        Capture::Captured
    );
    // PMD0: v 0, tlb 1 (0 = VHPT), cache line address 63:5.
    assert_eq!(m.read_pmd(0), Ok(LINE | 1));
    assert_eq!(
        m.fetch_miss(FetchMiss::tlb(ADDR, TlbFill::Software)),
        Capture::Captured
    );
    assert_eq!(m.read_pmd(0), Ok(LINE | 0b11));
    assert_eq!(m.read_pmd(1), Ok(0), "PMD1 is cache mode only");
    // HP Caliper: "L2 fills ... do not apply to Itanium systems".
    m.write_pmd(0, 0).unwrap();
    assert_eq!(
        m.fetch_miss(FetchMiss::tlb(ADDR, TlbFill::L2)),
        Capture::NotSelected
    );
    assert_eq!(
        m.fetch_miss(FetchMiss::cache(ADDR, 500)),
        Capture::NotSelected
    );
    // umask 4: HPW fills only; 8: software fills only.
    m.write_pmc(10, itanium_ear(true, 0x4)).unwrap();
    assert_eq!(
        m.fetch_miss(FetchMiss::tlb(ADDR, TlbFill::Software)),
        Capture::NotSelected
    );
    m.write_pmc(10, itanium_ear(true, 0x8)).unwrap();
    assert_eq!(
        m.fetch_miss(FetchMiss::tlb(ADDR, TlbFill::Hpw)),
        Capture::NotSelected
    );
    assert_eq!(m.read_pmd(0), Ok(0));
}

#[test]
fn itanium_iear_cache_mode_latency_codes() {
    // INSTRUCTION_EAR_CACHE_LAT4 .. LAT4096: codes 0..0Ah.
    let thresholds = [4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096];
    for (code, t) in thresholds.into_iter().enumerate() {
        let mut m = ready(Itanium);
        m.write_pmc(10, itanium_ear(false, code as u64)).unwrap();
        assert_eq!(
            m.fetch_miss(FetchMiss::cache(ADDR, t - 1)),
            Capture::NotSelected
        );
        assert_eq!(
            m.fetch_miss(FetchMiss::cache(ADDR, t)),
            Capture::Captured,
            "code {code}"
        );
        assert_eq!(m.read_pmd(0), Ok(LINE | 1), "v set, tlb clear");
        // 11:0 saturate: the >= 4096 code records 4095.
        assert_eq!(m.read_pmd(1), Ok(u64::from(t.min(0xFFF))));
        assert_eq!(
            m.fetch_miss(FetchMiss::tlb(ADDR, TlbFill::Hpw)),
            Capture::NotSelected
        );
    }
    let mut m = ready(Itanium);
    m.write_pmc(10, itanium_ear(false, 0)).unwrap();
    m.fetch_miss(FetchMiss::cache(ADDR, 5000));
    assert_eq!(m.read_pmd(1), Ok(0xFFF), "12-bit latency saturates");
    // 0Fh (LAT_NONE): nothing qualifies.
    m.write_pmc(10, itanium_ear(false, 0xF)).unwrap();
    assert_eq!(
        m.fetch_miss(FetchMiss::cache(ADDR, 5000)),
        Capture::NotSelected
    );
}

#[test]
fn itanium2_iear_tlb_mode_records_every_fill_level() {
    for g in [Itanium2, Montecito] {
        let l = g.layout();
        let mut m = ready(g);
        m.write_pmc(l.iear_pmc, itanium2_iear_tlb(0x7)).unwrap();
        for (fill, stat) in [(TlbFill::L2, 1), (TlbFill::Hpw, 2), (TlbFill::Software, 3)] {
            assert_eq!(m.fetch_miss(FetchMiss::tlb(ADDR, fill)), Capture::Captured);
            assert_eq!(
                m.read_pmd(l.iear_pmd_address),
                Ok(LINE | stat),
                "{g:?} {fill:?}"
            );
        }
        // umask bit per level: 1 L2, 2 HPW, 4 fault.
        for (umask, fill) in [(1, TlbFill::L2), (2, TlbFill::Hpw), (4, TlbFill::Software)] {
            m.write_pmc(l.iear_pmc, itanium2_iear_tlb(umask)).unwrap();
            for other in [TlbFill::L2, TlbFill::Hpw, TlbFill::Software] {
                let expect = if other == fill {
                    Capture::Captured
                } else {
                    Capture::NotSelected
                };
                assert_eq!(m.fetch_miss(FetchMiss::tlb(ADDR, other)), expect, "{g:?}");
            }
        }
        assert_eq!(m.read_pmd(l.iear_pmd_latency), Ok(0));
    }
}

#[test]
fn itanium2_iear_cache_mode_latency_patterns() {
    let patterns = [
        (0xFF, 4),
        (0xFE, 8),
        (0xFC, 16),
        (0xF8, 32),
        (0xF0, 128),
        (0xE0, 256),
        (0xC0, 1024),
        (0x80, 4096),
    ];
    for g in [Itanium2, Montecito] {
        let l = g.layout();
        for (pattern, t) in patterns {
            let mut m = ready(g);
            m.write_pmc(l.iear_pmc, itanium2_iear_cache(pattern))
                .unwrap();
            assert_eq!(
                m.fetch_miss(FetchMiss::cache(ADDR, t - 1)),
                Capture::NotSelected
            );
            assert_eq!(m.fetch_miss(FetchMiss::cache(ADDR, t)), Capture::Captured);
            assert_eq!(
                m.read_pmd(l.iear_pmd_address),
                Ok(LINE | 1),
                "{g:?} stat 01"
            );
            // 11:0 saturate and bit 12 flags the overflow.
            let recorded = if t > 0xFFF { 0x1FFF } else { u64::from(t) };
            assert_eq!(m.read_pmd(l.iear_pmd_latency), Ok(recorded));
        }
        let mut m = ready(g);
        // 40h: every miss ("> 0 cycles").
        m.write_pmc(l.iear_pmc, itanium2_iear_cache(0x40)).unwrap();
        assert_eq!(m.fetch_miss(FetchMiss::cache(ADDR, 1)), Capture::Captured);
        // Latency beyond 12 bits: saturated field plus the overflow bit 12.
        m.fetch_miss(FetchMiss::cache(ADDR, 5000));
        assert_eq!(m.read_pmd(l.iear_pmd_latency), Ok(0xFFF | (1 << 12)));
        // 00h: misses that hit the RAB only.
        m.write_pmc(l.iear_pmc, itanium2_iear_cache(0x00)).unwrap();
        assert_eq!(
            m.fetch_miss(FetchMiss::cache(ADDR, 9)),
            Capture::NotSelected
        );
        assert_eq!(
            m.fetch_miss(FetchMiss::cache(ADDR, 9).rab_hit()),
            Capture::Captured
        );
        // ct = 01: nothing is monitored.
        m.write_pmc(l.iear_pmc, 0xF | (1 << 12) | (0x7 << 5))
            .unwrap();
        let both = FetchMiss::cache(ADDR, 9000).with_tlb(TlbFill::Hpw);
        assert_eq!(m.fetch_miss(both), Capture::NotSelected);
        // An undefined pattern (hardware mode) captures nothing.
        m.set_checking(Checking::Hardware);
        m.write_pmc(l.iear_pmc, itanium2_iear_cache(0x81)).unwrap();
        assert_eq!(
            m.fetch_miss(FetchMiss::cache(ADDR, 9000)),
            Capture::NotSelected
        );
    }
}

#[test]
fn iear_gating_by_plm_pm_psr_ism_and_freeze() {
    for g in GENERATIONS {
        let l = g.layout();
        let tlb_all = match g {
            Itanium => itanium_ear(true, 0xC),
            _ => itanium2_iear_tlb(0x7),
        };
        let miss = FetchMiss::tlb(ADDR, TlbFill::Hpw);
        let mut m = ready(g);
        // plm: level 3 only.
        m.write_pmc(l.iear_pmc, (tlb_all & !0xF) | 0x8).unwrap();
        assert_eq!(m.fetch_miss(miss), Capture::NotSelected, "{g:?}");
        assert_eq!(m.fetch_miss(miss.at(3)), Capture::Captured, "{g:?}");
        // pm: needs PSR.pp.
        m.write_pmc(l.iear_pmc, tlb_all | (1 << l.iear_pm_bit))
            .unwrap();
        m.set_psr(Psr {
            pp: false,
            ..Psr::MONITORING
        });
        assert_eq!(m.fetch_miss(miss), Capture::NotSelected, "{g:?}");
        m.set_psr(Psr::MONITORING);
        assert_eq!(m.fetch_miss(miss), Capture::Captured, "{g:?}");
        // ism (not on Montecito's PMC37): IA-64 only.
        let ism_ia64 = match g {
            Itanium => Some(2 << 24),
            Itanium2 => Some(2 << 14),
            Montecito => None,
        };
        if let Some(ism) = ism_ia64 {
            m.write_pmc(l.iear_pmc, tlb_all | ism).unwrap();
            let ia32 = miss.isa(InstructionSet::Ia32);
            assert_eq!(m.fetch_miss(ia32), Capture::NotSelected, "{g:?}");
            assert_eq!(m.fetch_miss(miss), Capture::Captured, "{g:?}");
        }
        m.write_pmc(0, pmc0::FR).unwrap();
        assert_eq!(m.fetch_miss(miss), Capture::Frozen, "{g:?}");
    }
}

#[test]
fn sampling_every_nth_itlb_miss_freezes_with_the_nth_in_the_iear() {
    // HP Caliper samples every Nth ITLB miss through the I-EAR. The counter
    // counts I-EAR events with oi, preset to overflow on the Nth.
    const N: u64 = 3;
    for g in GENERATIONS {
        let l = g.layout();
        let mut m = ready(g);
        let tlb_all = match g {
            Itanium => itanium_ear(true, 0xC),
            _ => itanium2_iear_tlb(0x7),
        };
        m.write_pmc(l.iear_pmc, tlb_all).unwrap();
        program(&mut m, 5, l.iear_events, 0, counter::OI);
        m.write_pmd(5, wrap(g) - N).unwrap();
        let address = |i: u64| 0x1000_0000 + (i << 12);
        let mut results = Vec::new();
        for i in 1..=5 {
            results.push(m.fetch_miss(FetchMiss::tlb(address(i), TlbFill::Software)));
        }
        use Capture::*;
        assert_eq!(
            results,
            [Captured, Captured, Captured, Frozen, Frozen],
            "{g:?}"
        );
        // Itanium: tlb bit 1 (software) and v; later: stat 3 (software).
        // Both happen to be 11b.
        let stat = 0b11;
        assert_eq!(
            m.read_pmd(l.iear_pmd_address),
            Ok(address(N) | stat),
            "{g:?}"
        );
        assert_eq!(m.read_pmc(0), Ok((1 << 5) | 1));
        assert_eq!(m.take_interrupt().map(|i| i.overflow), Some(1 << 5));
        assert_eq!(m.counter(5), 0);
    }
}

#[test]
fn itanium_dear_cache_and_tlb_modes() {
    // D-side codes: 0-6 for >= 4..256, 8-0Ah for >= 512..2048.
    let codes = [
        (0, 4),
        (1, 8),
        (2, 16),
        (3, 32),
        (4, 64),
        (5, 128),
        (6, 256),
        (8, 512),
        (9, 1024),
        (0xA, 2048),
    ];
    for (code, t) in codes {
        let mut m = ready(Itanium);
        m.write_pmc(11, itanium_ear(false, code)).unwrap();
        let miss = |lat| DataMiss::cache(ADDR, IP, 2, lat);
        assert_eq!(
            m.data_miss(miss(t - 1)),
            Capture::NotSelected,
            "code {code}"
        );
        assert_eq!(m.data_miss(miss(t)), Capture::Captured, "code {code}");
        assert_eq!(m.read_pmd(2), Ok(ADDR));
        assert_eq!(m.read_pmd(3), Ok(u64::from(t)));
        // PMD17: vl 0, slot 3:2, bundle address 63:4.
        assert_eq!(m.read_pmd(17), Ok(IP | (2 << 2) | 1));
    }
    let mut m = ready(Itanium);
    m.write_pmc(11, itanium_ear(true, 0xE)).unwrap();
    for (fill, level) in [(TlbFill::L2, 1), (TlbFill::Hpw, 2), (TlbFill::Software, 3)] {
        assert_eq!(
            m.data_miss(DataMiss::tlb(ADDR, IP, 0, fill)),
            Capture::Captured
        );
        assert_eq!(m.read_pmd(3), Ok(level << 62), "{fill:?}");
        assert_eq!(m.read_pmd(17), Ok(IP | 1));
    }
    m.write_pmc(11, itanium_ear(true, 0x2)).unwrap();
    assert_eq!(
        m.data_miss(DataMiss::tlb(ADDR, IP, 0, TlbFill::Hpw)),
        Capture::NotSelected
    );
    assert_eq!(
        m.data_miss(DataMiss::alat(ADDR, IP, 0)),
        Capture::NotSelected
    );
    // Code 7 is unused on the D side: the hardware captures nothing.
    m.set_checking(Checking::Hardware);
    m.write_pmc(11, itanium_ear(false, 7)).unwrap();
    assert_eq!(
        m.data_miss(DataMiss::cache(ADDR, IP, 0, 9000)),
        Capture::NotSelected
    );
}

#[test]
fn itanium2_dear_cache_tlb_and_alat_modes() {
    for g in [Itanium2, Montecito] {
        let l = g.layout();
        let mut m = ready(g);
        // Cache mode, umask 0-0Ah: >= 4 << umask.
        for umask in 0..=0xA {
            let t = 4u32 << umask;
            m.write_pmc(l.dear_pmc, itanium2_dear(g, 0, umask)).unwrap();
            let miss = |lat| DataMiss::cache(ADDR, IP, 1, lat);
            assert_eq!(m.data_miss(miss(t - 1)), Capture::NotSelected);
            assert_eq!(m.data_miss(miss(t)), Capture::Captured, "{g:?} {umask}");
            assert_eq!(m.read_pmd(l.dear_pmd_address), Ok(ADDR));
            // latency 12:0, stat 15:14 = 01b (valid).
            assert_eq!(m.read_pmd(l.dear_pmd_latency), Ok(u64::from(t) | 1 << 14));
            // slot 1:0, bn 2, vl 3, bundle address 63:4.
            assert_eq!(m.read_pmd(l.dear_pmd_ip), Ok(IP | (1 << 3) | 1));
        }
        m.write_pmc(l.dear_pmc, itanium2_dear(g, 0, 0)).unwrap();
        m.data_miss(DataMiss::cache(ADDR, IP, 0, 9000));
        assert_eq!(
            m.read_pmd(l.dear_pmd_latency),
            Ok(0x1FFF | (1 << 13) | (1 << 14))
        );
        // TLB mode: stat 15:14.
        m.write_pmc(l.dear_pmc, itanium2_dear(g, 1, 0xE)).unwrap();
        for (fill, stat) in [(TlbFill::L2, 1), (TlbFill::Hpw, 2), (TlbFill::Software, 3)] {
            assert_eq!(
                m.data_miss(DataMiss::tlb(ADDR, IP, 2, fill)),
                Capture::Captured
            );
            assert_eq!(m.read_pmd(l.dear_pmd_latency), Ok(stat << 14), "{g:?}");
            assert_eq!(m.read_pmd(l.dear_pmd_ip), Ok(IP | (1 << 3) | 2));
        }
        m.write_pmc(l.dear_pmc, itanium2_dear(g, 1, 0x8)).unwrap();
        assert_eq!(
            m.data_miss(DataMiss::tlb(ADDR, IP, 2, TlbFill::L2)),
            Capture::NotSelected
        );
        // ALAT mode.
        m.write_pmc(l.dear_pmc, itanium2_dear(g, 2, 0)).unwrap();
        assert_eq!(
            m.data_miss(DataMiss::cache(ADDR, IP, 0, 900)),
            Capture::NotSelected
        );
        assert_eq!(
            m.data_miss(DataMiss::alat(ADDR + 8, IP, 0)),
            Capture::Captured
        );
        assert_eq!(m.read_pmd(l.dear_pmd_address), Ok(ADDR + 8));
        assert_eq!(m.read_pmd(l.dear_pmd_latency), Ok(1 << 14), "stat 01b");
        // Mode 11b (hardware mode): nothing.
        m.set_checking(Checking::Hardware);
        m.write_pmc(l.dear_pmc, itanium2_dear(g, 3, 0)).unwrap();
        assert_eq!(
            m.data_miss(DataMiss::alat(ADDR, IP, 0)),
            Capture::NotSelected
        );
    }
}

#[test]
fn dear_gating_and_sampling() {
    for g in GENERATIONS {
        let l = g.layout();
        let mut m = ready(g);
        let tlb_all = match g {
            Itanium => itanium_ear(true, 0xE),
            _ => itanium2_dear(g, 1, 0xE),
        };
        m.write_pmc(l.dear_pmc, tlb_all | (1 << 6)).unwrap();
        let miss = |i: u64| DataMiss::tlb(ADDR + i * 64, IP, 0, TlbFill::Hpw).at(3);
        m.set_psr(Psr {
            pp: false,
            ..Psr::MONITORING
        });
        assert_eq!(
            m.data_miss(miss(0)),
            Capture::NotSelected,
            "{g:?}: pm needs PSR.pp"
        );
        m.set_psr(Psr::MONITORING);
        // IA-32 misses: Itanium and Itanium 2 ism 00 take them, Montecito's
        // ism is IA-64 only.
        let ia32 = m.data_miss(miss(0).isa(InstructionSet::Ia32));
        let expect = if g == Montecito {
            Capture::NotSelected
        } else {
            Capture::Captured
        };
        assert_eq!(ia32, expect, "{g:?}");
        // Every 2nd DTLB miss, counted at CPL 3 only by the counter.
        program(&mut m, 6, l.dear_events, 0, counter::OI);
        m.write_pmc(6, (m.pmc(6) & !counter::PLM) | 0x8).unwrap();
        m.write_pmd(6, wrap(g) - 2).unwrap();
        for i in 1..=2 {
            assert_eq!(m.data_miss(miss(i)), Capture::Captured);
        }
        assert_eq!(m.data_miss(miss(3)), Capture::Frozen);
        assert_eq!(m.read_pmd(l.dear_pmd_address), Ok(ADDR + 128), "{g:?}");
        assert_eq!(m.take_interrupt().map(|i| i.overflow), Some(1 << 6));
    }
}

//! EAR layouts, encoders and decoders, per generation.

use super::*;
use crate::arch::itanium::events;
use crate::arch::itanium::{Ism, Plm, ReservedBits, Slot};

const ITA: Generation = Generation::Itanium;
const ITA2: Generation = Generation::Itanium2;
const MONT: Generation = Generation::Montecito;

#[test]
fn itanium_iear_layout() {
    let c = IearConfig::cache_misses(ITA, LatencyFilter::AtLeast64)
        .unwrap()
        .with_plm(Plm::ALL)
        .with_privileged(true)
        .with_ism(Ism::Ia64Only)
        .unwrap();
    assert_eq!(c.bits(), 0xF | 1 << 6 | 0x4 << 16 | 2 << 24);
    assert_eq!(c.mode(), IearMode::CacheMiss);
    assert_eq!(c.latency(), Some(LatencyFilter::AtLeast64));
    assert_eq!(c.tlb_fills(), None);
    assert_eq!(c.ism(), Some(Ism::Ia64Only));
    assert!(c.privileged());
    let t = IearConfig::tlb_misses(
        ITA,
        TlbFills {
            hpw: true,
            software: true,
            l2: false,
        },
    )
    .unwrap();
    assert_eq!(t.bits(), 1 << 7 | 0xC << 16);
    assert_eq!(t.mode(), IearMode::TlbMiss);
    assert_eq!(
        t.tlb_fills(),
        Some(TlbFills {
            l2: false,
            hpw: true,
            software: true
        })
    );
    // HP Caliper's itlb measurement: L2 fills do not apply to Itanium.
    assert_eq!(
        IearConfig::tlb_misses(ITA, TlbFills::ALL),
        Err(FieldError::L2FillNotOnItanium)
    );
    assert_eq!(
        IearConfig::from_bits(ITA, 1 << 7 | 0x2 << 16)
            .unwrap()
            .umask_problem(),
        Some(UmaskProblem::L2FillOnItanium)
    );
    assert_eq!(
        IearConfig::from_bits(ITA, 1 << 7 | 0x1 << 16)
            .unwrap()
            .umask_problem(),
        Some(UmaskProblem::Undefined(1))
    );
    assert_eq!(
        IearConfig::from_bits(ITA, 0xB << 16)
            .unwrap()
            .umask_problem(),
        Some(UmaskProblem::Undefined(0xB))
    );
    // Ignored bits 5:4, 15:8, 23:20 are reserved.
    for b in [4, 5, 8, 15, 20, 23, 26, 63] {
        assert_eq!(
            IearConfig::from_bits(ITA, 1 << b),
            Err(ReservedBits(1 << b))
        );
    }
    // The latency codes match the catalog's INSTRUCTION_EAR_CACHE_* and
    // _TLB_* unit masks.
    for e in events::ITANIUM.iter().filter(|e| e.kind.is_iear()) {
        let c = IearConfig::from_bits(
            ITA,
            (e.umask as u64) << 16 | ((e.kind == events::EventType::IearTlb) as u64) << 7,
        )
        .unwrap();
        assert_eq!(c.umask_problem(), None, "{}", e.name);
        if e.kind == events::EventType::IearCache {
            assert!(c.latency().is_some(), "{}", e.name);
        }
    }
}

#[test]
fn itanium2_iear_layout() {
    for g in [ITA2, MONT] {
        let c = IearConfig::cache_misses(g, LatencyFilter::AtLeast1024)
            .unwrap()
            .with_plm(Plm::USER)
            .with_privileged(true);
        assert_eq!(c.bits(), 0x8 | 1 << 4 | 0xC0 << 5 | 1 << 13);
        assert_eq!(c.mode(), IearMode::CacheMiss);
        assert_eq!(c.umask(), 0xC0);
        assert_eq!(c.latency(), Some(LatencyFilter::AtLeast1024));
        // ct = 11: cache mode with mask bit 7 set.
        let c = IearConfig::cache_misses(g, LatencyFilter::AtLeast4).unwrap();
        assert_eq!(c.bits() >> 12 & 3, 3);
        assert_eq!(c.mode(), IearMode::CacheMiss);
        let t = IearConfig::tlb_misses(g, TlbFills::ALL).unwrap();
        assert_eq!(t.bits(), 0x7 << 5);
        assert_eq!(t.mode(), IearMode::TlbMiss);
        assert_eq!(t.tlb_fills(), Some(TlbFills::ALL));
        let l2 = TlbFills {
            l2: true,
            ..TlbFills::default()
        };
        assert_eq!(IearConfig::tlb_misses(g, l2).unwrap().bits(), 0x1 << 5);
        // ct = 01: off.
        let off = IearConfig::from_bits(g, 1 << 12).unwrap();
        assert_eq!(off.mode(), IearMode::Off);
        assert_eq!(off.latency(), None);
        assert_eq!(off.tlb_fills(), None);
        // TLB mode bits 11:8 name no fill.
        assert_eq!(
            IearConfig::from_bits(g, 0x8 << 5).unwrap().umask_problem(),
            Some(UmaskProblem::Undefined(0x8))
        );
        // Cache-mode masks other than the ten defined patterns are
        // undefined (the strict model refuses them too).
        assert_eq!(
            IearConfig::from_bits(g, 1 << 13 | 0x55 << 5)
                .unwrap()
                .umask_problem(),
            Some(UmaskProblem::Undefined(0x55))
        );
        for f in LatencyFilter::ALL {
            if let Some(u) = f.iear_umask(g) {
                let c = IearConfig::from_bits(g, 1 << 13 | u64::from(u) << 5).unwrap();
                assert_eq!(c.umask_problem(), None, "{f:?}");
            }
        }
        assert_eq!(
            IearConfig::from_bits(g, 1 << 13 | 0x55 << 5)
                .unwrap()
                .latency(),
            None
        );
        assert_eq!(
            IearConfig::cache_misses(g, LatencyFilter::AtLeast64),
            Err(FieldError::LatencyNotAvailable { generation: g })
        );
        assert_eq!(
            IearConfig::from_bits(g, 1 << 16),
            Err(ReservedBits(1 << 16))
        );
    }
    let c = IearConfig::cache_misses(ITA2, LatencyFilter::AtLeast4)
        .unwrap()
        .with_ism(Ism::Disabled)
        .unwrap();
    assert_eq!(c.bits() >> 14 & 3, 3);
    assert_eq!(c.ism(), Some(Ism::Disabled));
    // Montecito PMC37 has no ISM: bits 15:14 are reserved.
    let m = IearConfig::cache_misses(MONT, LatencyFilter::AtLeast4).unwrap();
    assert_eq!(m.ism(), None);
    assert!(m.with_ism(Ism::Both).is_err());
    assert_eq!(
        IearConfig::from_bits(MONT, 1 << 14),
        Err(ReservedBits(1 << 14))
    );
    assert_eq!(IearConfig::pmc(MONT), 37);
    // The catalog's L1I_EAR_* unit masks decode.
    for e in events::ITANIUM2.iter().filter(|e| e.kind.is_iear()) {
        let c = if e.kind == events::EventType::IearCache {
            IearConfig::from_bits(ITA2, (e.umask as u64) << 5 | 1 << 13).unwrap()
        } else {
            IearConfig::from_bits(ITA2, (e.umask as u64) << 5).unwrap()
        };
        assert_eq!(c.umask_problem(), None, "{}", e.name);
        if e.kind == events::EventType::IearCache {
            assert!(c.latency().is_some(), "{}", e.name);
        } else {
            assert!(c.tlb_fills().is_some());
        }
    }
}

#[test]
fn montecito_ip_ear_fields() {
    let z = IpEarConfig::POWER_UP;
    assert_eq!(z.with_plm(Plm::ALL).bits(), 0xF);
    assert_eq!(z.with_privileged(true).bits(), 1 << 6);
    assert_eq!(z.with_mode(7).unwrap().bits(), 7 << 8);
    assert_eq!(z.with_mode(8), None);
    assert_eq!(z.with_delay(0xFF).bits(), 0xFF << 11);
    let v = z.with_mode(5).unwrap().with_delay(0x81).with_plm(Plm::USER);
    assert_eq!((v.mode(), v.delay(), v.plm()), (5, 0x81, Plm::USER));
    assert_eq!(IpEarConfig::from_bits(v.bits()), Ok(v));
    for b in [4, 5, 7, 19, 63] {
        assert_eq!(IpEarConfig::from_bits(1 << b), Err(ReservedBits(1 << b)));
    }
}

#[test]
fn latency_encodings_round_trip() {
    for g in Generation::ALL {
        for f in LatencyFilter::ALL {
            if let Some(u) = f.iear_umask(g) {
                assert_eq!(LatencyFilter::from_iear_umask(g, u), Some(f));
                let c = IearConfig::cache_misses(g, f).unwrap();
                assert_eq!(c.latency(), Some(f));
            }
            if let Some(u) = f.dear_umask(g) {
                assert_eq!(LatencyFilter::from_dear_umask(g, u), Some(f));
                let c = DearConfig::cache_misses(g, f).unwrap();
                assert_eq!(c.latency(), Some(f));
                assert_eq!(c.umask(), u);
            }
        }
    }
    // Itanium D-EAR skips code 7 and has no 4096; the I-EAR has 4096.
    assert_eq!(LatencyFilter::from_dear_umask(ITA, 7), None);
    assert_eq!(LatencyFilter::AtLeast512.dear_umask(ITA), Some(8));
    assert_eq!(LatencyFilter::AtLeast4096.dear_umask(ITA), None);
    assert_eq!(LatencyFilter::AtLeast4096.iear_umask(ITA), Some(0xA));
    assert_eq!(LatencyFilter::AtLeast512.dear_umask(ITA2), Some(7));
    assert_eq!(LatencyFilter::AtLeast4096.min_cycles(), Some(4096));
    assert_eq!(LatencyFilter::LatNone.min_cycles(), None);
}

#[test]
fn dear_layouts() {
    let c = DearConfig::cache_misses(ITA, LatencyFilter::AtLeast2048)
        .unwrap()
        .with_plm(Plm::ALL)
        .with_privileged(true)
        .with_ism(Ism::Ia32Only)
        .unwrap();
    assert_eq!(c.bits(), 0xF | 1 << 6 | 0xA << 16 | 1 << 24 | 1 << 28);
    assert_eq!(c.pass_tags(), Some(true));
    assert_eq!(c.with_pass_tags(false).unwrap().bits() & 1 << 28, 0);
    assert_eq!(c.mode(), DearMode::CacheMiss);
    let t = DearConfig::tlb_misses(ITA, TlbFills::ALL).unwrap();
    assert_eq!(t.bits(), 1 << 7 | 0xE << 16 | 1 << 28);
    assert_eq!(t.tlb_fills(), Some(TlbFills::ALL));
    assert_eq!(
        DearConfig::alat_misses(ITA),
        Err(FieldError::AlatNotOnItanium)
    );
    assert_eq!(
        DearConfig::from_bits(ITA, 1 << 28 | 0x7 << 16)
            .unwrap()
            .umask_problem(),
        Some(UmaskProblem::Undefined(7))
    );
    assert_eq!(
        DearConfig::from_bits(ITA, 1 << 28 | 1 << 7 | 0x1 << 16)
            .unwrap()
            .umask_problem(),
        Some(UmaskProblem::Undefined(1))
    );
    for b in [4, 5, 8, 15, 20, 23, 26, 27, 29, 63] {
        assert_eq!(
            DearConfig::from_bits(ITA, 1 << 28 | 1 << b),
            Err(ReservedBits(1 << b))
        );
    }
    for g in [ITA2, MONT] {
        let base = DearConfig::info(g).default;
        let c = DearConfig::cache_misses(g, LatencyFilter::AtLeast4096)
            .unwrap()
            .with_plm(Plm::KERNEL);
        assert_eq!(c.bits(), base | 1 | 0xA << 16);
        let t = DearConfig::tlb_misses(g, TlbFills::ALL).unwrap();
        assert_eq!(t.bits(), base | 1 << 7 | 0xE << 16);
        let a = DearConfig::alat_misses(g).unwrap();
        assert_eq!(a.bits(), base | 2 << 7);
        assert_eq!(a.mode(), DearMode::Alat);
        assert_eq!(
            DearConfig::from_bits(g, base | 3 << 7).unwrap().mode(),
            DearMode::Undefined
        );
        assert_eq!(c.pass_tags(), None);
        assert!(c.with_pass_tags(true).is_err());
        assert_eq!(
            DearConfig::from_bits(g, base | 0xB << 16)
                .unwrap()
                .umask_problem(),
            Some(UmaskProblem::Undefined(0xB))
        );
        assert_eq!(
            DearConfig::from_bits(g, base | 1 << 28),
            Err(ReservedBits(1 << 28))
        );
    }
    assert_eq!(DearConfig::info(MONT).default, 0x200_0000);
    let m = DearConfig::cache_misses(MONT, LatencyFilter::AtLeast4).unwrap();
    assert_eq!(m.ism(), Ism::Ia64Only);
    assert_eq!(m.with_ism(Ism::Both), Err(FieldError::IsmFixed));
    assert_eq!(DearConfig::from_bits(MONT, 0), Err(ReservedBits(1 << 25)));
    let i2 = DearConfig::cache_misses(ITA2, LatencyFilter::AtLeast4)
        .unwrap()
        .with_ism(Ism::Ia64Only)
        .unwrap();
    assert_eq!(i2.bits(), 2 << 24);
    // Catalog D-EAR unit masks decode without problems.
    for (g, t) in [(ITA, events::ITANIUM), (ITA2, events::ITANIUM2)] {
        for e in t.iter().filter(|e| e.kind.is_dear()) {
            let mode = match e.kind {
                events::EventType::DearCache => 0,
                events::EventType::DearTlb => 1,
                _ => 2,
            };
            let c = DearConfig::from_bits_truncate(
                g,
                DearConfig::info(g).default | mode << 7 | (e.umask as u64) << 16,
            );
            assert_eq!(c.umask_problem(), None, "{}", e.name);
        }
    }
}

#[test]
fn itanium_samples() {
    let cache = IearConfig::cache_misses(ITA, LatencyFilter::AtLeast8).unwrap();
    let s = IearSample::decode(cache, 0x4000_1234_5678_9AE1, 0xF123);
    assert!(s.valid);
    assert_eq!(s.line, 0x4000_1234_5678_9AE0);
    assert_eq!(
        s.event,
        IearEvent::CacheMiss {
            latency: 0x123,
            latency_overflow: false
        }
    );
    assert!(!IearSample::decode(cache, 0x1000, 0).valid);
    let tlb = IearConfig::tlb_misses(
        ITA,
        TlbFills {
            hpw: true,
            software: true,
            l2: false,
        },
    )
    .unwrap();
    let s = IearSample::decode(tlb, 0x2000 | 0b01, 0);
    assert_eq!(
        s.event,
        IearEvent::TlbMiss {
            fill: Some(TlbFill::Hpw)
        }
    );
    let s = IearSample::decode(tlb, 0x2000 | 0b11, 0);
    assert_eq!(
        s.event,
        IearEvent::TlbMiss {
            fill: Some(TlbFill::Software)
        }
    );
    assert_eq!(s.line, 0x2000);
    let s = IearSample::decode(tlb, 0x2000 | 0b10, 0);
    assert!(!s.valid);
    assert_eq!(s.event, IearEvent::TlbMiss { fill: None });
    // The Itanium I-EAR never reports an L2 fill.
    for raw in 0..64u64 {
        if let IearEvent::TlbMiss { fill } = IearSample::decode(tlb, raw, 0).event {
            assert_ne!(fill, Some(TlbFill::L2));
        }
    }

    let dcache = DearConfig::cache_misses(ITA, LatencyFilter::AtLeast4).unwrap();
    let s = DearSample::decode(
        dcache,
        0xE000_0000_0001_0008,
        0xC000_0000_0000_0ABC,
        0x4000_0000_0000_1239,
    );
    assert!(s.valid);
    assert_eq!(s.data_address, 0xE000_0000_0001_0008);
    assert_eq!(
        s.event,
        DearEvent::CacheMiss {
            latency: 0xABC,
            latency_overflow: false
        }
    );
    let ia = s.instruction.unwrap();
    assert_eq!(ia.bundle, 0x4000_0000_0000_1230);
    assert_eq!(ia.slot, Some(Slot::S2));
    assert_eq!(ia.address(), 0x4000_0000_0000_1232);
    assert!(!DearSample::decode(dcache, 1, 0, 0x1230).valid);
    assert_eq!(DearSample::decode(dcache, 1, 0, 0x1230).instruction, None);
    let dtlb = DearConfig::tlb_misses(ITA, TlbFills::ALL).unwrap();
    let level = |l: u64| DearSample::decode(dtlb, 0, l << 62, 1).event;
    assert_eq!(level(0), DearEvent::TlbMiss { fill: None });
    assert_eq!(
        level(1),
        DearEvent::TlbMiss {
            fill: Some(TlbFill::L2)
        }
    );
    assert_eq!(
        level(2),
        DearEvent::TlbMiss {
            fill: Some(TlbFill::Hpw)
        }
    );
    assert_eq!(
        level(3),
        DearEvent::TlbMiss {
            fill: Some(TlbFill::Software)
        }
    );
    // Slot field 3 is no slot.
    assert_eq!(
        DearSample::decode(dcache, 0, 0, 0xD)
            .instruction
            .unwrap()
            .slot,
        None
    );
}

#[test]
fn itanium2_and_montecito_samples() {
    for g in [ITA2, MONT] {
        let cache = IearConfig::cache_misses(g, LatencyFilter::AtLeast4).unwrap();
        let s = IearSample::decode(cache, 0x1_0000_0040 | 0b01, 0x1FFF);
        assert!(s.valid);
        assert_eq!(s.line, 0x1_0000_0040);
        assert_eq!(
            s.event,
            IearEvent::CacheMiss {
                latency: 0xFFF,
                latency_overflow: true
            }
        );
        assert!(!IearSample::decode(cache, 0x1_0000_0040, 0).valid);
        let tlb = IearConfig::tlb_misses(g, TlbFills::ALL).unwrap();
        let stat = |s: u64| IearSample::decode(tlb, 0x80 | s, 0);
        assert!(!stat(0).valid);
        assert_eq!(stat(0).event, IearEvent::TlbMiss { fill: None });
        assert_eq!(
            stat(1).event,
            IearEvent::TlbMiss {
                fill: Some(TlbFill::L2)
            }
        );
        assert_eq!(
            stat(2).event,
            IearEvent::TlbMiss {
                fill: Some(TlbFill::Hpw)
            }
        );
        assert_eq!(
            stat(3).event,
            IearEvent::TlbMiss {
                fill: Some(TlbFill::Software)
            }
        );
        assert!(stat(3).valid);
        let off = IearConfig::from_bits(g, 1 << 12).unwrap();
        let s = IearSample::decode(off, 3, 0);
        assert_eq!((s.valid, s.event), (false, IearEvent::Off));

        let base = DearConfig::info(g).default;
        let dcache = DearConfig::from_bits(g, base).unwrap();
        // latency 12:0, overflow 13, stat 15:14.
        let s = DearSample::decode(
            dcache,
            0xDEAD_BEE0,
            0x1 << 14 | 1 << 13 | 0x1ABC,
            0xFFF0 | 1 << 3 | 1 << 2 | 1,
        );
        assert!(s.valid);
        assert_eq!(
            s.event,
            DearEvent::CacheMiss {
                latency: 0x1ABC,
                latency_overflow: true
            }
        );
        // bn adds 16 to the bundle address.
        let ia = s.instruction.unwrap();
        assert_eq!(ia.bundle, 0x1_0000);
        assert_eq!(ia.slot, Some(Slot::S1));
        assert_eq!(ia.address(), 0x1_0001);
        let s = DearSample::decode(dcache, 0, 0, 0xFFF0 | 1);
        assert!(!s.valid);
        assert_eq!(s.instruction, None);
        // Wrapping bundle arithmetic at the top of the address space.
        let top = DearSample::decode(dcache, 0, 1 << 14, u64::MAX);
        assert_eq!(top.instruction.unwrap().bundle, 0);
        let dtlb = DearConfig::tlb_misses(g, TlbFills::ALL).unwrap();
        let st = |s: u64| DearSample::decode(dtlb, 0, s << 14, 0).event;
        assert_eq!(st(0), DearEvent::TlbMiss { fill: None });
        assert_eq!(
            st(1),
            DearEvent::TlbMiss {
                fill: Some(TlbFill::L2)
            }
        );
        assert_eq!(
            st(2),
            DearEvent::TlbMiss {
                fill: Some(TlbFill::Hpw)
            }
        );
        assert_eq!(
            st(3),
            DearEvent::TlbMiss {
                fill: Some(TlbFill::Software)
            }
        );
        let alat = DearConfig::alat_misses(g).unwrap();
        let s = DearSample::decode(alat, 0x42, 1 << 14, 0);
        assert_eq!(
            (s.valid, s.event, s.data_address),
            (true, DearEvent::Alat, 0x42)
        );
        let undef = DearConfig::from_bits(g, base | 3 << 7).unwrap();
        let s = DearSample::decode(undef, 0, 3 << 14, 0);
        assert_eq!((s.valid, s.event), (false, DearEvent::Undefined));
    }
}

#[test]
fn decoders_are_total() {
    let mut s = 0x0123_4567_89AB_CDEFu64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    for _ in 0..100_000 {
        let (a, b, c, d) = (next(), next(), next(), next());
        for g in Generation::ALL {
            let i = IearConfig::from_bits_truncate(g, a);
            assert_eq!(IearConfig::from_bits(g, i.bits()), Ok(i));
            let _ = (
                i.mode(),
                i.latency(),
                i.tlb_fills(),
                i.umask_problem(),
                i.ism(),
            );
            let is = IearSample::decode(i, b, c);
            assert_eq!(is.line & 0x1F, 0);
            let dc = DearConfig::from_bits_truncate(g, d);
            assert_eq!(DearConfig::from_bits(g, dc.bits()), Ok(dc));
            let _ = (dc.mode(), dc.latency(), dc.tlb_fills(), dc.umask_problem());
            let ds = DearSample::decode(dc, a, b, c);
            if let Some(ia) = ds.instruction {
                assert_eq!(ia.bundle & 0xF, 0);
            }
            if g == Generation::Itanium
                && let IearEvent::TlbMiss { fill } = is.event
            {
                assert_ne!(fill, Some(TlbFill::L2));
            }
        }
    }
}

/// The handler's TLB-mode decoder agrees with the general decoder on every
/// combination of the low bits, with address bits above, on every
/// generation; in cache mode there is no ITLB sample.
#[test]
fn handler_itlb_decoder_agrees_with_the_general_decoder() {
    for g in [ITA, ITA2, MONT] {
        let fills = TlbFills {
            hpw: true,
            software: true,
            l2: g != ITA,
        };
        let tlb = IearConfig::tlb_misses(g, fills).unwrap();
        let cache = IearConfig::cache_misses(g, LatencyFilter::AtLeast8).unwrap();
        for low in 0..32u64 {
            let pmd0 = 0x4000_0000_1234_5600 | low;
            let s = IearSample::decode(tlb, pmd0, 0);
            let general = match s.event {
                IearEvent::TlbMiss { fill: Some(fill) } if s.valid => Some(ItlbSample {
                    address: s.line,
                    fill,
                }),
                _ => None,
            };
            assert_eq!(ItlbSample::from_tlb_pmd(g, pmd0), general, "{g:?} {low:#x}");
            assert_eq!(ItlbSample::decode(tlb, pmd0), general);
            assert_eq!(ItlbSample::decode(cache, pmd0), None);
        }
    }
}

/// Cache-mode samples, per generation: Itanium's `v` bit and 12-bit
/// latency (its PMD1 bit 12 is not an overflow bit), Itanium 2 and
/// Montecito's `stat` and latency overflow bit.
#[test]
fn icache_samples_per_generation() {
    let cache = IearConfig::cache_misses(ITA, LatencyFilter::AtLeast8).unwrap();
    assert_eq!(
        IcacheSample::decode(cache, 0x4000_1234_5678_9AE1, 0xF123),
        Some(IcacheSample {
            line: 0x4000_1234_5678_9AE0,
            latency: 0x123,
            latency_overflow: false,
        })
    );
    // v = 0: no capture, whatever bit 1 (TLB mode's fill bit) says.
    assert_eq!(
        IcacheSample::decode(cache, 0x4000_0000_0000_0042, 0x10),
        None
    );
    for g in [ITA2, MONT] {
        let cache = IearConfig::cache_misses(g, LatencyFilter::AtLeast4).unwrap();
        assert_eq!(
            IcacheSample::decode(cache, 0x1_0000_0040 | 0b01, 0x1FFF),
            Some(IcacheSample {
                line: 0x1_0000_0040,
                latency: 0xFFF,
                latency_overflow: true,
            })
        );
        assert_eq!(
            IcacheSample::decode(cache, 0x2_0000_0060 | 0b01, 0x0ABC),
            Some(IcacheSample {
                line: 0x2_0000_0060,
                latency: 0xABC,
                latency_overflow: false,
            })
        );
        assert_eq!(IcacheSample::decode(cache, 0x1_0000_0040, 0x20), None);
        // A TLB-mode or switched-off I-EAR holds no cache capture.
        let tlb = IearConfig::tlb_misses(g, TlbFills::ALL).unwrap();
        assert_eq!(IcacheSample::decode(tlb, 0x1_0000_0041, 0x20), None);
        let off = IearConfig::from_bits(g, 1 << 12).unwrap();
        assert_eq!(off.mode(), IearMode::Off);
        assert_eq!(IcacheSample::decode(off, 0x1_0000_0041, 0x20), None);
    }
    assert_eq!(ITA.iear_latency_pmd(), 1);
    assert_eq!(ITA2.iear_latency_pmd(), 1);
    assert_eq!(MONT.iear_latency_pmd(), 35);
}

/// The handler's cache-mode decoder agrees with the general decoder on
/// every combination of the low bits and of the latency PMD's bits 13:11,
/// on every generation; in TLB mode there is no cache sample.
#[test]
fn handler_icache_decoder_agrees_with_the_general_decoder() {
    for g in [ITA, ITA2, MONT] {
        let cache = IearConfig::cache_misses(g, LatencyFilter::AtLeast8).unwrap();
        let fills = TlbFills {
            l2: g != ITA,
            ..TlbFills::ALL
        };
        let tlb = IearConfig::tlb_misses(g, fills).unwrap();
        for low in 0..32u64 {
            for high in 0..8u64 {
                let pmd0 = 0x4000_0000_1234_5600 | low;
                let pmd1 = 0x7A5 | high << 11;
                let s = IearSample::decode(cache, pmd0, pmd1);
                let general = match s.event {
                    IearEvent::CacheMiss {
                        latency,
                        latency_overflow,
                    } if s.valid => Some(IcacheSample {
                        line: s.line,
                        latency,
                        latency_overflow,
                    }),
                    _ => None,
                };
                assert_eq!(
                    IcacheSample::from_cache_pmds(g, pmd0, pmd1),
                    general,
                    "{g:?} {low:#x} {pmd1:#x}"
                );
                assert_eq!(IcacheSample::decode(cache, pmd0, pmd1), general);
                assert_eq!(IcacheSample::decode(tlb, pmd0, pmd1), None);
            }
        }
    }
}

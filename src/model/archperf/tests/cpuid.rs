//! CPUID leaves (SDM Vol. 2A CPUID: leaves 0, 1, 07H, 0AH, 1AH) and the
//! presets, and what the crate's detection makes of them.

use super::helpers::*;
use crate::detect::{CoreType, CpuidResult};

fn regs(r: CpuidResult) -> [u32; 4] {
    [r.eax, r.ebx, r.ecx, r.edx]
}

#[test]
fn presets() {
    let c2 = Config::core2();
    assert_eq!(
        (
            c2.version,
            c2.gp_counters,
            c2.gp_width,
            c2.fixed_counters,
            c2.fixed_width
        ),
        (2, 2, 40, 3, 40)
    );
    assert!(!c2.full_width_writes && !c2.hybrid);
    let sky = Config::skylake();
    assert_eq!(
        (
            sky.version,
            sky.gp_counters,
            sky.gp_width,
            sky.fixed_counters,
            sky.fixed_width
        ),
        (4, 4, 48, 3, 48)
    );
    assert!(sky.full_width_writes && !sky.hybrid);
    let adl = Config::alder_lake_p_core();
    assert_eq!(
        (
            adl.version,
            adl.gp_counters,
            adl.gp_width,
            adl.fixed_counters,
            adl.fixed_width
        ),
        (5, 8, 48, 4, 48)
    );
    assert!(adl.full_width_writes && adl.hybrid);
    assert_eq!((adl.core_type, adl.fixed_bitmap), (0x40, 0xF));
    assert!((0..4).all(|i| adl.has_fixed(i)) && !adl.has_fixed(4));
    let v1 = Config::v1();
    assert_eq!((v1.version, v1.gp_counters, v1.gp_width), (1, 2, 40));
    assert!((0..16).all(|i| !v1.has_fixed(i)));
    assert!(!v1.has_global_msrs() && !v1.has_perf_capabilities());
    // Usable in a const context.
    const M: ArchPerfModel = ArchPerfModel::new(Config::alder_lake_p_core());
    assert_eq!(M.config(), &adl);
}

#[test]
fn leaf_0_is_genuine_intel_up_to_1ah() {
    for config in [
        Config::v1(),
        Config::core2(),
        Config::skylake(),
        Config::alder_lake_p_core(),
    ] {
        let m = ArchPerfModel::new(config);
        let r = m.cpuid(0, 0);
        assert!(r.eax >= 0x1A);
        let mut vendor = [0u8; 12];
        vendor[..4].copy_from_slice(&r.ebx.to_le_bytes());
        vendor[4..8].copy_from_slice(&r.edx.to_le_bytes());
        vendor[8..].copy_from_slice(&r.ecx.to_le_bytes());
        assert_eq!(&vendor, b"GenuineIntel");
    }
}

#[test]
fn leaf_1_signature_msr_and_pdcm() {
    for (config, eax, pdcm) in [
        (Config::v1(), 0x0000_06E0, false),
        (Config::core2(), 0x0000_06F0, true),
        (Config::skylake(), 0x0005_06E0, true),
        (Config::alder_lake_p_core(), 0x0009_0670, true),
    ] {
        let r = ArchPerfModel::new(config).cpuid(1, 0);
        assert_eq!(r.eax, eax);
        assert_ne!(r.edx & (1 << 5), 0, "MSR");
        assert_eq!(r.ecx & (1 << 15) != 0, pdcm);
    }
    let f = Config {
        family: 0x13,
        model: 0x01,
        ..Config::skylake()
    };
    assert_eq!(f.signature(), 0x0040_0F10);
}

#[test]
fn leaf_0ah() {
    for (config, expected) in [
        (Config::v1(), [0x0728_0201, 0, 0, 0]),
        (Config::core2(), [0x0728_0202, 0, 0, 0x0503]),
        (v3(), [0x0730_0403, 0, 0, 0x0603]),
        (Config::skylake(), [0x0730_0404, 0, 0, 0x0603]),
        (Config::alder_lake_p_core(), [0x0830_0805, 0, 0xF, 0x8604]),
    ] {
        assert_eq!(
            regs(ArchPerfModel::new(config).cpuid(0xA, 0)),
            expected,
            "{config:?}"
        );
    }
    let config = Config {
        unavailable: 0b101,
        ..Config::core2()
    };
    assert_eq!(config.cpuid(0xA, 0).ebx, 0b101);
}

#[test]
fn leaves_7_and_1ah_report_the_hybrid_core_type() {
    let adl = ArchPerfModel::new(Config::alder_lake_p_core());
    // Hybrid, and architectural LBR (bit 19).
    assert_eq!(regs(adl.cpuid(7, 0)), [0, 0, 0, 1 << 15 | 1 << 19]);
    assert_eq!(regs(adl.cpuid(0x1A, 0)), [0x4000_0000, 0, 0, 0]);
    let atom = Config {
        core_type: 0x20,
        ..Config::alder_lake_p_core()
    };
    assert_eq!(atom.cpuid(0x1A, 0).eax, 0x2000_0000);
    let sky = sky();
    assert_eq!(regs(sky.cpuid(7, 0)), [0; 4]);
    assert_eq!(regs(sky.cpuid(0x1A, 0)), [0; 4]);
}

#[test]
fn other_leaves_are_zero() {
    let adl = ArchPerfModel::new(Config::alder_lake_p_core());
    for (leaf, subleaf) in [
        (2, 0),
        (4, 0),
        (7, 1),
        (0xB, 0),
        (0x1B, 0),
        (0x8000_0000, 0),
    ] {
        assert_eq!(
            regs(adl.cpuid(leaf, subleaf)),
            [0; 4],
            "{leaf:#X}.{subleaf}"
        );
    }
}

#[test]
fn detection_finds_the_configured_pmu() {
    for config in [
        Config::v1(),
        Config::core2(),
        Config::skylake(),
        Config::alder_lake_p_core(),
    ] {
        let m = ArchPerfModel::new(config);
        let found = crate::detect::detect(&m, &mut m.clone()).unwrap();
        let a = found.arch_perf().expect("an architectural PMU");
        assert_eq!(a.version(), config.version);
        assert_eq!(a.general(), config.gp_counters);
        for i in 0..8 {
            assert_eq!(
                a.fixed_supported(i),
                config.has_fixed(usize::from(i)),
                "{i}"
            );
        }
        assert_eq!(a.full_width_write, config.full_width_writes);
        assert_eq!(a.hybrid, config.hybrid);
        assert_eq!(a.core_type, config.hybrid.then_some(CoreType::Core));
        assert_eq!(a.model, config.model);
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn the_shared_model_answers_cpuid_without_locking() {
    static SHARED: SharedArchPerfModel = SharedArchPerfModel::new(Config::skylake());
    assert_eq!(SHARED.config(), &Config::skylake());
    assert_eq!(regs(SHARED.cpuid(0xA, 0)), [0x0730_0404, 0, 0, 0x0603]);
    assert_eq!(SHARED.msr().cpuid(1, 0).eax, 0x0005_06E0);
}

/// The hybrid presets answer CPUID as the recorded parts do
/// (`crate::testing::recorded`, InstLatx64's dumps): leaf 0AH, the core
/// type, CPUID.(07H,01H):EAX[8] and leaf 23H's sub-leaves 0, 1 and 3. The
/// one difference: the Skymont core records sub-leaf 2 (auto counter
/// reload) valid, which the model does not have.
#[test]
fn hybrid_presets_answer_as_the_recorded_parts() {
    use crate::testing::recorded::*;
    let cases = [
        (Config::alder_lake_p_core_hybrid(), ADL_P),
        (Config::alder_lake_e_core(), ADL_E),
        (Config::alder_lake_p_core(), ADL_P_ALONE),
        (Config::meteor_lake_p_core(), MTL_P),
        (Config::meteor_lake_e_core(), MTL_E),
        (Config::lunar_lake_e_core(), LNL_E),
    ];
    for (config, rec) in cases {
        let m = ArchPerfModel::new(config);
        let name = rec.name;
        assert_eq!(
            regs(m.cpuid(0xA, 0)),
            regs(rec.cpuid(0xA, 0)),
            "{name}: leaf 0AH"
        );
        assert_eq!(
            m.cpuid(0x1A, 0).eax >> 24,
            rec.cpuid(0x1A, 0).eax >> 24,
            "{name}"
        );
        assert_eq!(
            m.cpuid(7, 0).edx & 1 << 15,
            rec.cpuid(7, 0).edx & 1 << 15,
            "{name}"
        );
        assert_eq!(
            m.cpuid(7, 1).eax & 1 << 8,
            rec.cpuid(7, 1).eax & 1 << 8,
            "{name}"
        );
        assert_eq!(
            m.cpuid(0, 0).eax >= 0x23,
            rec.cpuid(0, 0).eax >= 0x23,
            "{name}"
        );
        for sub in [1, 3] {
            assert_eq!(
                regs(m.cpuid(0x23, sub)),
                regs(rec.cpuid(0x23, sub)),
                "{name}: 23H.{sub}"
            );
        }
        let sub0 = rec.cpuid(0x23, 0).eax;
        assert_eq!(
            m.cpuid(0x23, 0).eax,
            sub0 & !(1 << 2),
            "{name}: 23H.0, less sub-leaf 2"
        );
        // Detection finds the same on the model as on the record.
        let on_model = crate::detect::detect(&m, &mut m.clone())
            .unwrap()
            .arch_perf()
            .unwrap();
        let on_record = crate::detect::detect(&rec, &mut rec.clone())
            .unwrap()
            .arch_perf()
            .unwrap();
        assert_eq!(
            on_model.general_bitmap(),
            on_record.general_bitmap(),
            "{name}"
        );
        assert_eq!(on_model.fixed_bitmap(), on_record.fixed_bitmap(), "{name}");
        assert_eq!(on_model.core_type, on_record.core_type, "{name}");
        assert!((0..16).all(|k| on_model.event_available(k) == on_record.event_available(k)));
    }
}

/// A core has its own counters whatever leaf 0AH reports: the Golden Cove
/// core beside its E-cores has general counters 6-7 and fixed counter 3,
/// which its leaf 0AH does not enumerate; the Crestmont core has no fixed
/// counter 3; the Skymont core has fixed counters 4-6 but not 3.
#[test]
fn hybrid_cores_have_their_own_registers() {
    let mut adl = ArchPerfModel::new(Config::alder_lake_p_core_hybrid());
    assert_eq!(adl.cpuid(0xA, 0).eax >> 8 & 0xFF, 6);
    adl.write_msr(EVTSEL0 + 7, counting(INSTR, 0)).unwrap();
    adl.write_msr(FIXED_CTRL, 0x3 << 12).unwrap();
    let mut mtl_e = ArchPerfModel::new(Config::meteor_lake_e_core());
    absent(&mut mtl_e, FIXED0 + 3);
    assert_eq!(reason(mtl_e.rdpmc(1 << 30 | 3)), GpReason::NoSuchCounter);
    mtl_e.rdpmc(7).unwrap();
    let mut lnl_e = ArchPerfModel::new(Config::lunar_lake_e_core());
    absent(&mut lnl_e, FIXED0 + 3);
    for i in [0, 1, 2, 4, 5, 6] {
        lnl_e.rdpmc(1 << 30 | i).unwrap();
    }
    assert_eq!(reason(lnl_e.rdpmc(1 << 30 | 7)), GpReason::NoSuchCounter);
    write_faults(
        &mut lnl_e,
        FIXED_CTRL,
        0x3 << 12,
        GpReason::ReservedBits { bits: 0x3 << 12 },
    );
    lnl_e.write_msr(FIXED_CTRL, 0x3 << 16).unwrap();
}

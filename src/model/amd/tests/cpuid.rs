//! CPUID of the presets, and detection on them.

use super::helpers::*;
use crate::detect::{CounterProbe, Vendor, detect};

#[test]
fn presets_enumerate_their_pmus() {
    let k8 = Config::k8();
    assert_eq!(k8.cpuid(1, 0).eax, 0x0004_0F10, "family 0Fh model 41h");
    assert_eq!(k8.cpuid(0x8000_0001, 0).ecx & 1 << 23, 0);
    assert_eq!(k8.cpuid(0x8000_0022, 0).eax, 0, "beyond the maximum leaf");
    let zen2 = Config::zen2();
    assert_eq!(zen2.cpuid(1, 0).eax, 0x0083_0F10, "family 17h model 31h");
    assert_eq!(zen2.cpuid(0x8000_0001, 0).ecx, 1 << 23);
    let zen4 = Config::zen4();
    assert_eq!(zen4.cpuid(1, 0).eax, 0x00A1_0F10, "family 19h model 11h");
    let leaf = zen4.cpuid(0x8000_0022, 0);
    assert_eq!((leaf.eax & 1, leaf.ebx & 0xF), (1, 6));
    let v = zen4.cpuid(0, 0);
    let mut id = [0u8; 12];
    id[..4].copy_from_slice(&v.ebx.to_le_bytes());
    id[4..8].copy_from_slice(&v.edx.to_le_bytes());
    id[8..].copy_from_slice(&v.ecx.to_le_bytes());
    assert_eq!(&id, b"AuthenticAMD");
}

/// Detection on each preset finds what the preset is, and its probe reads
/// back (the model's counters hold what is written).
#[test]
fn detection_on_the_presets() {
    for (config, counters, ext, v2) in [
        (Config::k8(), 4, false, false),
        (Config::zen2(), 6, true, false),
        (Config::zen4(), 6, true, true),
    ] {
        let m = AmdModel::new(config);
        let d = detect(&m, &mut m.clone()).unwrap();
        let a = d.usable_amd().expect("usable");
        assert_eq!(a.vendor, Vendor::Amd);
        assert_eq!((a.family, a.model), (config.family, config.model));
        assert_eq!(
            (a.counters(), a.perf_ctr_ext_core, a.perfmon_v2),
            (counters, ext, v2)
        );
        assert_eq!(a.probe, CounterProbe::ReadBack { counter: 0 });
    }
    let hygon = Config {
        hygon: true,
        family: 0x18,
        ..Config::zen2()
    };
    let m = AmdModel::new(hygon);
    assert_eq!(detect(&m, &mut m.clone()).unwrap().vendor, Vendor::Hygon);
}

//! The topology functions on recorded CPUID answers: QEMU's `-smp
//! sockets=4,threads=2` NetBurst guest, a Pentium D, a Pentium Extreme
//! Edition, a Xeon MP package, and the NetBurst model's own threads.

use super::*;
use crate::detect::CpuidResult;
use crate::model::netburst::{Config, LogicalProcessor as ModelLp, NetBurstModel};

/// CPUID answers of one logical processor: leaves 0, 1, 4 and 0BH.
#[derive(Clone, Copy)]
struct Cpu {
    max_leaf: u32,
    leaf1_ebx: u32,
    leaf1_edx: u32,
    leaf4_eax: u32,
    leaf_b: CpuidResult,
}

const HTT: u32 = 1 << 28;

impl Cpuid for Cpu {
    fn cpuid(&self, leaf: u32, subleaf: u32) -> CpuidResult {
        assert!(leaf <= self.max_leaf, "leaf {leaf:#x} beyond the maximum");
        match (leaf, subleaf) {
            (0, _) => CpuidResult {
                eax: self.max_leaf,
                ..CpuidResult::default()
            },
            (1, _) => CpuidResult {
                eax: 0xF43,
                ebx: self.leaf1_ebx,
                ecx: 0,
                edx: self.leaf1_edx,
            },
            (4, 0) => CpuidResult {
                eax: self.leaf4_eax,
                ..CpuidResult::default()
            },
            (0xB, 0) => self.leaf_b,
            _ => CpuidResult::default(),
        }
    }
}

/// A NetBurst logical processor with initial APIC ID `apic`, `logical`
/// per package (HTT set when more than one), `cores` per package in leaf 4
/// (0: the maximum leaf stops at 2, as on early Pentium 4s).
fn netburst(apic: u32, logical: u32, cores: u32) -> Cpu {
    Cpu {
        max_leaf: if cores == 0 { 2 } else { 5 },
        leaf1_ebx: apic << 24 | logical << 16 | 8 << 8,
        leaf1_edx: if logical > 1 { HTT } else { 0 },
        // A data cache (type 1) at level 1, cores - 1 in bits 31:26.
        leaf4_eax: cores.saturating_sub(1) << 26 | 1 << 5 | 1,
        leaf_b: CpuidResult::default(),
    }
}

#[test]
fn id_widths_cover_the_count() {
    let widths: Vec<u32> = (0..=9).map(id_width).collect();
    assert_eq!(widths, [0, 0, 1, 2, 2, 3, 3, 3, 3, 4]);
    assert_eq!(id_width(255), 8);
}

#[test]
fn qemu_four_packages_of_two_logical_processors() {
    // `-smp 8,sockets=4,cores=1,threads=2`: initial APIC IDs 0-7, two
    // logical processors per package, leaf 4 one core.
    let sites: Vec<PmuSite> = (0..8)
        .map(|apic| netburst_site(&netburst(apic, 2, 1)).unwrap())
        .collect();
    for (apic, site) in sites.iter().enumerate() {
        let apic = apic as u32;
        assert_eq!(site.apic_id, apic);
        assert_eq!(site.pmu, apic / 2, "the package's one PMU");
        assert_eq!(site.package, apic / 2);
        assert_eq!(site.thread, (apic % 2) as u8);
        assert_eq!(site.sharers, 2);
    }
    assert_eq!(
        sites[6].netburst_logical_processor(),
        Some(LogicalProcessor::T0)
    );
    assert_eq!(
        sites[7].netburst_logical_processor(),
        Some(LogicalProcessor::T1)
    );
}

#[test]
fn without_leaf_4_a_package_is_one_core() {
    let site = netburst_site(&netburst(5, 2, 0)).unwrap();
    assert_eq!((site.pmu, site.package, site.thread), (2, 2, 1));
}

#[test]
fn pentium_d_cores_have_a_pmu_each() {
    // Two cores, no Hyper-Threading: HTT set (two logical processors per
    // package), leaf 4 two cores; each core its own PMU.
    let a = netburst_site(&netburst(0, 2, 2)).unwrap();
    let b = netburst_site(&netburst(1, 2, 2)).unwrap();
    assert_ne!(a.pmu, b.pmu);
    assert_eq!((a.package, b.package), (0, 0), "one package");
    assert_eq!((a.thread, b.thread, a.sharers), (0, 0, 1));
}

#[test]
fn extreme_edition_two_cores_of_two_threads() {
    // Pentium Extreme Edition 840: 4 logical processors, 2 cores; APIC ID
    // bit 0 the thread, bit 1 the core.
    let sites: Vec<PmuSite> = (0..4)
        .map(|apic| netburst_site(&netburst(apic, 4, 2)).unwrap())
        .collect();
    let pmus: Vec<u32> = sites.iter().map(|s| s.pmu).collect();
    let threads: Vec<u8> = sites.iter().map(|s| s.thread).collect();
    assert_eq!(pmus, [0, 0, 1, 1]);
    assert_eq!(threads, [0, 1, 0, 1]);
    assert!(sites.iter().all(|s| s.package == 0 && s.sharers == 2));
}

#[test]
fn single_threaded_package_owns_its_pmu() {
    // HTT clear: EBX[23:16] is not valid (here it says 2) and counts as 1.
    let mut cpu = netburst(3, 1, 1);
    cpu.leaf1_ebx |= 2 << 16;
    let site = netburst_site(&cpu).unwrap();
    assert_eq!(
        (site.pmu, site.package, site.thread, site.sharers),
        (3, 3, 0, 1)
    );
}

#[test]
fn xeon_mp_package_in_the_middle() {
    let site = netburst_site(&netburst(0x0D, 2, 1)).unwrap();
    assert_eq!((site.pmu, site.package, site.thread), (6, 6, 1));
}

#[test]
fn impossible_topologies_are_errors() {
    assert_eq!(
        netburst_site(&netburst(0, 0, 1).with_htt()),
        Err(TopologyError::NoLogicalProcessors)
    );
    assert_eq!(
        netburst_site(&netburst(0, 2, 4)),
        Err(TopologyError::MoreCoresThanLogical {
            cores: 4,
            logical: 2
        })
    );
    assert_eq!(
        netburst_site(&netburst(0, 4, 1)),
        Err(TopologyError::ThreadsPerCore(4))
    );
    let no_leaf1 = Cpu {
        max_leaf: 0,
        ..netburst(0, 2, 1)
    };
    assert_eq!(netburst_site(&no_leaf1), Err(TopologyError::NoLeaf1));
    assert_eq!(own_site(&no_leaf1), Err(TopologyError::NoLeaf1));
    for e in [
        TopologyError::NoLeaf1,
        TopologyError::NoLogicalProcessors,
        TopologyError::MoreCoresThanLogical {
            cores: 4,
            logical: 2,
        },
        TopologyError::ThreadsPerCore(4),
        TopologyError::NoPmu,
    ] {
        assert!(!e.to_string().is_empty());
    }
}

impl Cpu {
    fn with_htt(mut self) -> Self {
        self.leaf1_edx |= HTT;
        self
    }
}

#[test]
fn the_models_threads_share_their_pmu() {
    let mut model = NetBurstModel::new(Config::prescott_ht());
    let t0 = netburst_site(&model.thread(ModelLp::T0).unwrap()).unwrap();
    let t1 = netburst_site(&model.thread(ModelLp::T1).unwrap()).unwrap();
    assert_eq!(t0.pmu, t1.pmu);
    assert_eq!(
        (
            t0.netburst_logical_processor(),
            t1.netburst_logical_processor()
        ),
        (Some(LogicalProcessor::T0), Some(LogicalProcessor::T1))
    );
    // Through detection, which finds a NetBurst.
    let cpuid = model.clone();
    let mut view = model.thread(ModelLp::T1).unwrap();
    let found = crate::detect::detect(&cpuid, &mut view).unwrap();
    let view = model.thread(ModelLp::T1).unwrap();
    assert_eq!(pmu_site(&view, &found), Ok(t1));
}

#[test]
fn the_architectural_pmu_is_per_logical_processor() {
    // Leaf 0BH valid: the x2APIC ID (here beyond 8 bits) names the PMU.
    let cpu = Cpu {
        max_leaf: 0x16,
        leaf1_ebx: 0x12 << 24 | 4 << 16,
        leaf1_edx: HTT,
        leaf4_eax: 0,
        leaf_b: CpuidResult {
            eax: 1,
            ebx: 2,
            ecx: 0x100,
            edx: 0x112,
        },
    };
    assert_eq!(own_site(&cpu), Ok(PmuSite::own(0x112)));
    // Leaf 0BH absent (maximum leaf below it) or invalid: leaf 1's ID.
    let old = Cpu {
        max_leaf: 0xA,
        ..cpu
    };
    assert_eq!(own_site(&old), Ok(PmuSite::own(0x12)));
    let invalid = Cpu {
        leaf_b: CpuidResult::default(),
        ..cpu
    };
    assert_eq!(own_site(&invalid), Ok(PmuSite::own(0x12)));
    let site = PmuSite::own(7);
    assert_eq!((site.sharers, site.thread), (1, 0));
    assert_eq!(
        PmuSite { thread: 2, ..site }.netburst_logical_processor(),
        None
    );
}

#[test]
fn no_pmu_no_site() {
    let cpu = netburst(0, 2, 1);
    let detection = Detection {
        vendor: crate::detect::Vendor::Amd,
        signature: None,
        pmu: PmuKind::None(crate::detect::NoPmu::NoSignature),
        x2apic: false,
    };
    assert_eq!(pmu_site(&cpu, &detection), Err(TopologyError::NoPmu));
}

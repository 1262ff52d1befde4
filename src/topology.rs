//! Which logical processors share a physical PMU, from the hardware.
//!
//! A driver owns a physical PMU ([`crate::arch::netburst::NetBurstPmu`],
//! [`crate::arch::itanium::ItaniumPmu`]), so a kernel must know which of its
//! CPUs reach the same one. That is a fact of the processor, read here from
//! CPUID on the CPU itself ([`PmuSite`]), never guessed from CPU numbers:
//!
//! * **NetBurst**: the logical processors of one core share its PMU (the
//!   ESCRs' T0/T1 bits tell them apart, SDM Vol. 3B "Performance Monitoring
//!   and Intel Hyper-Threading Technology in Processors Based on Intel
//!   NetBurst Microarchitecture"); the cores of a dual-core package do not
//!   ("Performance Monitoring and Dual-Core Technology": each core has
//!   dedicated performance-monitoring resources). Which core and which
//!   logical processor come from the initial APIC ID
//!   (CPUID.01H:EBX\[31:24\]) split into SMT, core and package fields whose
//!   widths follow from the logical processors per package
//!   (CPUID.01H:EBX\[23:16\], valid when CPUID.01H:EDX.HTT\[28\] is set) and
//!   the cores per package (CPUID.(EAX=04H,ECX=0):EAX\[31:26\] + 1, when
//!   leaf 4 exists): SDM Vol. 3A "Identifying Logical Processors in an MP
//!   System" (9.4.5; 8.4.5 in editions before 2022) and "Programming
//!   Considerations for Hardware Multi-Threading Capable Processors" (9.9,
//!   formerly 8.9: "Hierarchical Mapping of Shared Resources" and the
//!   topology enumeration algorithm). The issue that asked for this says
//!   "package membership"; the SDM's dual-core section makes it core
//!   membership, which is the same thing on every single-core NetBurst
//!   package (all but the Pentium D and Pentium Extreme Edition).
//! * **Architectural PMU**: the counters are per logical processor (SDM
//!   Vol. 3B "Architectural Performance Monitoring"): every logical
//!   processor has a PMU of its own, named by its x2APIC ID (CPUID leaf 0BH,
//!   or the initial APIC ID where that leaf is absent).
//! * **Itanium**: each processor (each thread of a Montecito) has its own
//!   PMC/PMD set (a Montecito counter's `all` bit lets it count both
//!   threads' events, but the registers are the thread's): [`PmuSite::own`]
//!   with the processor's local ID. IA-64 has no x86 CPUID to read here.
//!
//! # Examples
//!
//! Two logical processors of a NetBurst package with Hyper-Threading, as
//! the model answers CPUID for each of them:
//!
//! (On a register-level model: a doc test with the `model` feature, ignored without it.)
//!
#![cfg_attr(feature = "model", doc = "```")]
#![cfg_attr(not(feature = "model"), doc = "```ignore")]
//! use pmu::arch::netburst::LogicalProcessor;
//! use pmu::model::netburst::{Config, LogicalProcessor as ModelLp, NetBurstModel};
//! use pmu::topology::netburst_site;
//!
//! let mut model = NetBurstModel::new(Config::prescott_ht());
//! let t0 = netburst_site(&model.thread(ModelLp::T0).unwrap())?;
//! let t1 = netburst_site(&model.thread(ModelLp::T1).unwrap())?;
//! assert_eq!(t0.pmu, t1.pmu, "one PMU for both");
//! assert_eq!(t0.netburst_logical_processor(), Some(LogicalProcessor::T0));
//! assert_eq!(t1.netburst_logical_processor(), Some(LogicalProcessor::T1));
//! assert_eq!(t1.sharers, 2);
//! # Ok::<(), pmu::topology::TopologyError>(())
//! ```

use crate::detect::{Leaf0BEbx, Leaf01Ebx, Leaf01Edx, Leaf04Eax};
use core::fmt;

use crate::arch::netburst::LogicalProcessor;
use crate::detect::{Cpuid, Detection, PmuKind};

/// Where a logical processor's PMU is: which physical PMU, and which of
/// the logical processors sharing it this one is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PmuSite {
    /// This logical processor's APIC ID (initial APIC ID or x2APIC ID).
    pub apic_id: u32,
    /// The physical PMU: equal on exactly the logical processors that
    /// share it (the APIC ID without its SMT field). Not an index from 0:
    /// a kernel maps it to its own PMU values.
    pub pmu: u32,
    /// The package (the APIC ID without its SMT and core fields); for a
    /// PMU of the logical processor's own ([`PmuSite::own`]) the ID itself:
    /// the package is not read there.
    pub package: u32,
    /// Which of the PMU's logical processors this is (its SMT ID, from 0).
    pub thread: u8,
    /// How many logical processors the PMU can serve (1 or 2 on NetBurst:
    /// addressable IDs, so a package with Hyper-Threading disabled in the
    /// BIOS still says 2).
    pub sharers: u8,
}

impl PmuSite {
    /// A PMU of the logical processor's own, named by `id` (its APIC ID,
    /// or an Itanium processor's local ID): the architectural PMU's case
    /// and Itanium's.
    pub const fn own(id: u32) -> PmuSite {
        PmuSite {
            apic_id: id,
            pmu: id,
            package: id,
            thread: 0,
            sharers: 1,
        }
    }

    /// The NetBurst logical processor (T0 or T1) this site is on its
    /// core's PMU: `None` beyond the second (no NetBurst core has more).
    pub const fn netburst_logical_processor(&self) -> Option<LogicalProcessor> {
        match self.thread {
            0 => Some(LogicalProcessor::T0),
            1 => Some(LogicalProcessor::T1),
            _ => None,
        }
    }
}

/// Why the topology could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TopologyError {
    /// CPUID has no leaf 1 (no APIC ID, no logical-processor count).
    NoLeaf1,
    /// CPUID.01H:EDX.HTT is set but EBX\[23:16\] says zero logical
    /// processors per package.
    NoLogicalProcessors,
    /// Leaf 4 reports more cores per package than leaf 1 logical
    /// processors.
    MoreCoresThanLogical {
        /// CPUID.(04H,0):EAX\[31:26\] + 1.
        cores: u8,
        /// CPUID.01H:EBX\[23:16\].
        logical: u8,
    },
    /// More logical processors per core than a NetBurst PMU serves (two:
    /// T0 and T1).
    ThreadsPerCore(u8),
    /// Detection found no PMU this crate drives.
    NoPmu,
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopologyError::NoLeaf1 => {
                f.write_str("CPUID has no leaf 1: no APIC ID to place the CPU")
            }
            TopologyError::NoLogicalProcessors => f.write_str(
                "CPUID.01H:EDX.HTT is set but EBX[23:16] says 0 logical processors per package",
            ),
            TopologyError::MoreCoresThanLogical { cores, logical } => write!(
                f,
                "CPUID leaf 4 says {cores} cores per package, leaf 1 only {logical} logical processors"
            ),
            TopologyError::ThreadsPerCore(n) => write!(
                f,
                "{n} logical processors per core: a NetBurst PMU serves two (T0, T1)"
            ),
            TopologyError::NoPmu => f.write_str("no PMU this crate drives, so no PMU to place"),
        }
    }
}

/// The number of bits that hold `count` IDs: ceil(log2(count)), 0 for 0
/// and 1 (the SDM's "find the smallest power of 2 that covers the count").
const fn id_width(count: u8) -> u32 {
    if count <= 1 {
        0
    } else {
        u8::BITS - (count - 1).leading_zeros()
    }
}

/// The site of the CPU behind `cpuid` on its NetBurst core's PMU (module
/// documentation: the fields of the initial APIC ID). It reads leaves 0, 1
/// and, when the maximum leaf reaches it, 4; it does not check that the
/// CPU is a NetBurst (see [`pmu_site`]).
pub fn netburst_site(cpuid: &impl Cpuid) -> Result<PmuSite, TopologyError> {
    let max_leaf = cpuid.cpuid(0, 0).eax;
    if max_leaf < 1 {
        return Err(TopologyError::NoLeaf1);
    }
    let leaf1 = cpuid.cpuid(1, 0);
    let ebx = Leaf01Ebx::from_bits(leaf1.ebx);
    let apic_id = u32::from(ebx.initial_apic_id());
    let htt = Leaf01Edx::from_bits(leaf1.edx).htt();
    let logical = if htt { ebx.logical_processors() } else { 1 };
    if logical == 0 {
        return Err(TopologyError::NoLogicalProcessors);
    }
    // Leaf 4 subleaf 0 describes a cache (type in EAX[4:0] not 0) and
    // holds the cores per package in EAX[31:26], minus one.
    let cores = if max_leaf >= 4 {
        let leaf4 = Leaf04Eax::from_bits(cpuid.cpuid(4, 0).eax);
        if leaf4.cache_type() != 0 {
            leaf4.cores_minus_one() + 1
        } else {
            1
        }
    } else {
        1
    };
    if cores > logical {
        return Err(TopologyError::MoreCoresThanLogical { cores, logical });
    }
    let threads = logical / cores;
    if threads > 2 {
        return Err(TopologyError::ThreadsPerCore(threads));
    }
    let smt_width = id_width(threads);
    let core_width = id_width(cores);
    Ok(PmuSite {
        apic_id,
        pmu: apic_id >> smt_width,
        package: apic_id >> (smt_width + core_width),
        thread: (apic_id & ((1 << smt_width) - 1)) as u8,
        sharers: threads.max(1),
    })
}

/// The site of the CPU behind `cpuid` where each logical processor has a
/// PMU of its own (the architectural PMU): named by the x2APIC ID of CPUID
/// leaf 0BH (EDX; the leaf is valid when subleaf 0's EBX is not 0), or
/// else the initial APIC ID of leaf 1.
pub fn own_site(cpuid: &impl Cpuid) -> Result<PmuSite, TopologyError> {
    let max_leaf = cpuid.cpuid(0, 0).eax;
    if max_leaf < 1 {
        return Err(TopologyError::NoLeaf1);
    }
    if max_leaf >= 0xB {
        let leaf_b = cpuid.cpuid(0xB, 0);
        if Leaf0BEbx::from_bits(leaf_b.ebx).logical_processors() != 0 {
            return Ok(PmuSite::own(leaf_b.edx));
        }
    }
    let ebx = Leaf01Ebx::from_bits(cpuid.cpuid(1, 0).ebx);
    Ok(PmuSite::own(u32::from(ebx.initial_apic_id())))
}

/// The site of the CPU behind `cpuid` on the PMU `detection` found there
/// ([`crate::detect::detect`] on the same CPU): [`netburst_site`] for a
/// NetBurst, [`own_site`] for an architectural PMU and an AMD core PMU
/// (each logical processor has its own counters: AMD64 APM Vol. 2 13.2),
/// [`TopologyError::NoPmu`]
/// otherwise. Itanium processors use [`PmuSite::own`].
pub fn pmu_site(cpuid: &impl Cpuid, detection: &Detection) -> Result<PmuSite, TopologyError> {
    match detection.pmu {
        PmuKind::NetBurst(_) => netburst_site(cpuid),
        PmuKind::ArchPerf(_) | PmuKind::Amd(_) => own_site(cpuid),
        PmuKind::None(_) => Err(TopologyError::NoPmu),
    }
}

#[cfg(test)]
mod tests;

//! The register file: configuration, the MSR map, the #GP rules, RDPMC, and
//! the [`MsrAccess`] and [`Cpuid`] implementations.

use crate::access::MsrAccess;
use crate::detect::{Cpuid, CpuidResult};

use super::retire::Retirement;
use super::tables::{
    IA32_A_PMC0, IA32_DEBUGCTL, IA32_DS_AREA, IA32_FIXED_CTR_CTRL, IA32_FIXED_CTR0,
    IA32_MISC_ENABLE, IA32_PEBS_ENABLE, IA32_PERF_CAPABILITIES, IA32_PERF_GLOBAL_CTRL,
    IA32_PERF_GLOBAL_INUSE, IA32_PERF_GLOBAL_OVF_CTRL, IA32_PERF_GLOBAL_STATUS,
    IA32_PERF_GLOBAL_STATUS_SET, IA32_PERFEVTSEL0, IA32_PMC0, LD_LAT_THRESHOLD, MAX_FIXED, MAX_GP,
    MSR_PEBS_DATA_CFG, MSR_PEBS_LD_LAT, SLOTS, data_cfg, debugctl, evtsel, fixed_ctrl,
    global_status, lbr, misc_enable, pebs_enable, perf_capabilities, rdpmc,
};
use crate::arch::ia32::Privilege;

/// The highest basic CPUID leaf the model reports (leaf 0 EAX): 1AH, so that
/// the hybrid core-type leaf is reachable; 1CH ([`MAX_LBR_LEAF`]) for a
/// configuration with architectural LBR, 23H ([`MAX_EXT_LEAF`]) for one
/// with [`Config::perfmon_ext`].
pub const MAX_BASIC_LEAF: u32 = 0x1A;

/// The highest basic CPUID leaf of a configuration with architectural LBR
/// (and without leaf 23H): 1CH, "Last Branch Records Information Leaf".
pub const MAX_LBR_LEAF: u32 = 0x1C;

/// The highest basic CPUID leaf of a configuration with leaf 23H
/// ([`Config::perfmon_ext`]), "Architectural Performance Monitoring
/// Extended Leaf".
pub const MAX_EXT_LEAF: u32 = 0x23;

/// CPUID leaf 0AH as the hybrid parts the presets model report it on every
/// core type (the core types' common counters and events), recorded by
/// InstLatx64 (`github.com/InstLatx64/InstLatx64`, `GenuineIntel/`):
/// EAX, EBX, ECX, EDX.
pub mod common_leaf_0a {
    /// Alder Lake (an i9-12900K with its E-cores,
    /// `GenuineIntel0090672_AlderLake_01_LC_BC_CPUID.txt`): version 5, six
    /// 48-bit general counters, fixed counters 0-2 (48 bits), events 0-6.
    pub const ALDER_LAKE: [u32; 4] = [0x0730_0605, 0, 0x7, 0x8603];
    /// Meteor Lake (a Core Ultra 7 155H,
    /// `GenuineIntel00A06A4_MeteorLake_10_CPUID.txt`): version 5, eight
    /// general counters, fixed counters 0-2, events 0-6.
    pub const METEOR_LAKE: [u32; 4] = [0x0730_0805, 0, 0x7, 0x8603];
    /// Lunar Lake (a Core Ultra 9 288V,
    /// `GenuineIntel00B06D1_LunarLake_04_CPUID.txt`): version 6, eight
    /// general counters, fixed counters 0-2, a vector of 13 events of which
    /// 7 (topdown slots) and 9 (topdown bad speculation) are unavailable.
    pub const LUNAR_LAKE: [u32; 4] = [0x0D30_0806, 0x280, 0x7, 0x8603];
}

/// What the modelled processor is: the CPUID leaf 0AH enumeration (SDM Vol.
/// 2A CPUID, Table 3-8, leaf 0AH; Vol. 3B 20.2.1-20.2.5), IA32_PERF_CAPABILITIES
/// .FW_WRITE and the identification CPUID reports.
///
/// Values beyond what the model implements are clamped (and CPUID reports
/// the clamped values): at most [`MAX_GP`] general-purpose and
/// [`MAX_FIXED`] fixed counters, widths within 32..=64 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Config {
    /// Architectural performance-monitoring version, 1 to 5
    /// (CPUID.0AH:EAX\[7:0\]); 6 behaves as 5 ([`Config::lunar_lake_e_core`]).
    pub version: u8,
    /// General-purpose counters per logical processor (CPUID.0AH:EAX\[15:8\]).
    pub gp_counters: u8,
    /// General-purpose counter width in bits (CPUID.0AH:EAX\[23:16\]).
    pub gp_width: u8,
    /// Contiguous fixed-function counters (CPUID.0AH:EDX\[4:0\]); ignored on
    /// version 1, which has none.
    pub fixed_counters: u8,
    /// Fixed-function counter width in bits (CPUID.0AH:EDX\[12:5\]).
    pub fixed_width: u8,
    /// CPUID.0AH:EBX: bit `i` set means architectural event `i` (Table 20-1
    /// order, [`super::Encoding::cpuid_bit`]) is NOT available.
    pub unavailable: u32,
    /// Length of the EBX vector (CPUID.0AH:EAX\[31:24\]).
    pub ebx_length: u8,
    /// Version 5: the fixed-counter bitmap (CPUID.0AH:ECX); fixed counter `i`
    /// exists iff ECX\[i\] or EDX\[4:0\] > i (SDM 20.2.5). Ignored before
    /// version 5.
    pub fixed_bitmap: u32,
    /// IA32_PERF_CAPABILITIES.FW_WRITE\[13\]: IA32_A_PMCx exist (SDM 20.2.6).
    pub full_width_writes: bool,
    /// CPUID family (6 for every preset).
    pub family: u8,
    /// CPUID model (extended model in the high nibble).
    pub model: u8,
    /// A hybrid part (CPUID.07H:EDX\[15\]).
    pub hybrid: bool,
    /// Core type (CPUID.1AH:EAX\[31:24\]): 20H Atom, 40H Core; reported only
    /// when `hybrid`.
    pub core_type: u8,
    /// PEBS ([`PebsConfig`]; [`PebsConfig::NONE`] for a part without).
    pub pebs: PebsConfig,
    /// CPUID leaf 0AH (EAX, EBX, ECX, EDX) as the part reports it where
    /// that is not this core's own PMU: a hybrid part reports there what
    /// every core type has ([`common_leaf_0a`]). `None`: leaf 0AH
    /// enumerates this core's counters and events (from the fields above).
    /// The registers the model has are this core's, whatever leaf 0AH
    /// says.
    pub leaf_0a: Option<[u32; 4]>,
    /// CPUID leaf 23H, "Architectural Performance Monitoring Extended
    /// Leaf" (enumerated by CPUID.(EAX=07H, ECX=01H):EAX\[8\]; Intel ISE):
    /// `Some(events)` reports it, sub-leaf 3's EAX `events` (bit k: the
    /// architectural event of CPUID.0AH:EBX bit k is supported) and
    /// sub-leaf 1 this core's own counters. `None`: no leaf 23H.
    pub perfmon_ext: Option<u32>,
    /// Last branch records ([`LbrConfig`]).
    pub lbr: LbrConfig,
}

/// What the modelled processor has of last branch records (SDM Vol. 3B
/// "Last Branch Records" of Nehalem, Haswell and Skylake; "Architectural
/// Last Branch Records").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum LbrConfig {
    /// None: the LBR MSRs #GP, IA32_PERF_CAPABILITIES\[5:0\] reads 0.
    None,
    /// A legacy stack at 680H/6C0H (and DC0H) with MSR_LBR_SELECT and
    /// MSR_LASTBRANCH_TOS, enabled by IA32_DEBUGCTL.LBR.
    Legacy {
        /// IA32_PERF_CAPABILITIES\[5:0\]: the record format, 1-7 (3
        /// Nehalem, 4 Haswell, 5 Skylake).
        format: u8,
        /// Records: 16 or 32 (a power of two up to 32).
        depth: u8,
        /// MSR_LBR_SELECT.EN_CALLSTACK exists (Haswell and later).
        call_stack: bool,
    },
    /// Architectural LBR: CPUID.07H:EDX\[19\] and leaf 1CH, IA32_LBR_CTL,
    /// IA32_LBR_DEPTH, the records at 1500H/1600H/1200H; every filter,
    /// call-stack mode, the mispredict bit (always 0 in the model), timed
    /// records and the branch type.
    Architectural {
        /// CPUID.1CH:EAX\[7:0\]: bit n, depth 8 × (n + 1).
        depths: u8,
    },
}

impl LbrConfig {
    /// Legacy record format `format` with `depth` records.
    const fn legacy(format: u8, depth: u8, call_stack: bool) -> LbrConfig {
        LbrConfig::Legacy {
            format,
            depth,
            call_stack,
        }
    }

    /// The records a legacy stack has, or the deepest architectural LBR
    /// offers (its reset depth), at most 64 (the most architectural LBR
    /// offers).
    pub const fn max_depth(&self) -> usize {
        let d = match *self {
            LbrConfig::None => 0,
            LbrConfig::Legacy { depth, .. } => depth as usize,
            LbrConfig::Architectural { depths } => {
                if depths == 0 {
                    0
                } else {
                    8 * (8 - depths.leading_zeros() as usize)
                }
            }
        };
        if d > lbr::MAX_RECORDS {
            lbr::MAX_RECORDS
        } else {
            d
        }
    }

    /// The legacy record format (0 for none and for architectural LBR).
    pub const fn legacy_format(&self) -> u8 {
        match *self {
            LbrConfig::Legacy { format, .. } => format,
            _ => 0,
        }
    }

    /// Whether the legacy records have INFO MSRs (formats 5 and 7).
    pub const fn legacy_info(&self) -> bool {
        matches!(self.legacy_format(), 5 | 7)
    }
}

/// What the modelled processor has of PEBS (SDM Vol. 3B "Processor Event
/// Based Sampling" of each generation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PebsConfig {
    /// IA32_PERF_CAPABILITIES\[11:8\], the record format: 0 for no PEBS
    /// (the model then reports no debug store, CPUID.01H:EDX.DS = 0), 1
    /// Nehalem, 2 Haswell, 3 Skylake, 4-5 adaptive.
    pub format: u8,
    /// IA32_PERF_CAPABILITIES\[14\], PEBS baseline (formats 4-5 only):
    /// MSR_PEBS_DATA_CFG, PEBS on every counter.
    pub baseline: bool,
    /// IA32_MISC_ENABLE\[12\] reads 0 (PEBS available); a part whose
    /// firmware disabled PEBS reads 1 and has no PEBS MSRs.
    pub available: bool,
    /// The load-latency event (event select, unit mask): loads above
    /// MSR_PEBS_LD_LAT's threshold count as it (Nehalem
    /// MEM_INST_RETIRED.LATENCY_ABOVE_THRESHOLD 0BH/10H; Sandy Bridge and
    /// later MEM_TRANS_RETIRED.LOAD_LATENCY CDH/01H).
    pub load_latency_event: (u8, u8),
}

impl PebsConfig {
    /// No PEBS.
    pub const NONE: PebsConfig = PebsConfig {
        format: 0,
        baseline: false,
        available: false,
        load_latency_event: (0, 0),
    };

    /// PEBS of record format `format`, available, with PEBS baseline from
    /// format 4, the load-latency event of Sandy Bridge and later (or
    /// Nehalem's for format 1).
    pub const fn format(format: u8) -> PebsConfig {
        PebsConfig {
            format,
            baseline: format >= 4,
            available: true,
            load_latency_event: if format == 1 {
                (0x0B, 0x10)
            } else {
                (0xCD, 0x01)
            },
        }
    }
}

/// `width` clamped to 32..=64.
const fn clamp_width(width: u8) -> u32 {
    if width < 32 {
        32
    } else if width > 64 {
        64
    } else {
        width as u32
    }
}

/// The low `width` bits set.
pub(super) const fn width_mask(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1 << width) - 1
    }
}

impl Config {
    /// An Intel Core 2 (Merom/Conroe, 06_0FH): version 2, two 40-bit
    /// general-purpose counters, three 40-bit fixed counters, no full-width
    /// writes.
    pub const fn core2() -> Self {
        Self {
            version: 2,
            gp_counters: 2,
            gp_width: 40,
            fixed_counters: 3,
            fixed_width: 40,
            unavailable: 0,
            ebx_length: 7,
            fixed_bitmap: 0,
            full_width_writes: false,
            family: 6,
            model: 0x0F,
            hybrid: false,
            core_type: 0,
            pebs: PebsConfig::NONE,
            lbr: LbrConfig::None,
            leaf_0a: None,
            perfmon_ext: None,
        }
    }

    /// A Nehalem (06_1AH): version 3, four 48-bit general-purpose counters,
    /// three 48-bit fixed counters, no full-width writes; PEBS record
    /// format 1 (the RIP of the next instruction, load latency); a 16-deep
    /// legacy LBR stack of record format 3 (a mispredict flag in FROM).
    pub const fn nehalem() -> Self {
        Self {
            version: 3,
            gp_counters: 4,
            gp_width: 48,
            fixed_counters: 3,
            fixed_width: 48,
            unavailable: 0,
            ebx_length: 7,
            fixed_bitmap: 0,
            full_width_writes: false,
            family: 6,
            model: 0x1A,
            hybrid: false,
            core_type: 0,
            pebs: PebsConfig::format(1),
            lbr: LbrConfig::legacy(3, 16, false),
            leaf_0a: None,
            perfmon_ext: None,
        }
    }

    /// A Haswell client (06_3CH): version 3, four 48-bit general-purpose
    /// counters, three 48-bit fixed counters, full-width writes; PEBS
    /// record format 2 (EventingIP); a 16-deep legacy LBR stack of record
    /// format 4 (TSX flags in FROM) with call-stack mode.
    pub const fn haswell() -> Self {
        Self {
            model: 0x3C,
            full_width_writes: true,
            pebs: PebsConfig::format(2),
            lbr: LbrConfig::legacy(4, 16, true),
            ..Self::nehalem()
        }
    }

    /// A Skylake client (06_5EH) with Hyper-Threading: version 4, four 48-bit
    /// general-purpose counters, three 48-bit fixed counters, full-width
    /// writes; PEBS record format 3 (accurate applicable counters, TSC); a
    /// 32-deep legacy LBR stack of record format 5 (`MSR_LBR_INFO_x`) with
    /// call-stack mode.
    pub const fn skylake() -> Self {
        Self {
            version: 4,
            model: 0x5E,
            pebs: PebsConfig::format(3),
            lbr: LbrConfig::legacy(5, 32, true),
            ..Self::haswell()
        }
    }

    /// An Ice Lake client (06_7EH): version 5, eight 48-bit general-purpose
    /// counters, four 48-bit fixed counters (bitmap 0FH), full-width
    /// writes; PEBS record format 4 with PEBS baseline (adaptive records,
    /// PEBS on every counter); Skylake's legacy LBR stack (format 5, 32
    /// records).
    pub const fn icelake() -> Self {
        Self {
            version: 5,
            gp_counters: 8,
            fixed_counters: 4,
            ebx_length: 8,
            fixed_bitmap: 0x0F,
            model: 0x7E,
            pebs: PebsConfig::format(4),
            ..Self::skylake()
        }
    }

    /// An Alder Lake performance core (Golden Cove, 06_97H): version 5,
    /// eight 48-bit general-purpose counters, four 48-bit fixed counters
    /// (fixed counter 3: TOPDOWN.SLOTS; bitmap 0FH), events 0-7,
    /// full-width writes, hybrid, core type 40H, with leaf 0AH reporting
    /// them: an i9-12900K with its E-cores disabled, whose CPUID leaf 0AH
    /// reads `08300805-00000000-0000000F-00008604` (InstLatx64,
    /// `GenuineIntel0090672_AlderLake_01_BC_AVX512_CPUID.txt`). Beside its
    /// E-cores the same core reports the common view:
    /// [`Config::alder_lake_p_core_hybrid`]. Architectural LBR of depths
    /// 8, 16, 24 and 32 (the depths are the model's choice).
    pub const fn alder_lake_p_core() -> Self {
        Self {
            model: 0x97,
            hybrid: true,
            core_type: 0x40,
            pebs: PebsConfig::NONE,
            lbr: LbrConfig::Architectural { depths: 0x0F },
            ..Self::icelake()
        }
    }

    /// An Alder Lake performance core beside its efficiency cores: the
    /// counters of [`Config::alder_lake_p_core`], and CPUID leaf 0AH the
    /// part's common view, six general and three fixed counters
    /// ([`common_leaf_0a::ALDER_LAKE`]), as every core of an i9-12900K
    /// reports it. Without leaf 23H nothing enumerates the core's general
    /// counters 6-7 and fixed counter 3 (Linux adds them by model number).
    pub const fn alder_lake_p_core_hybrid() -> Self {
        Self {
            leaf_0a: Some(common_leaf_0a::ALDER_LAKE),
            ..Self::alder_lake_p_core()
        }
    }

    /// An Alder Lake efficiency core (Gracemont, 06_97H): version 5, six
    /// 48-bit general-purpose counters, three 48-bit fixed counters (bitmap
    /// 07H), events 0-6, hybrid, core type 20H: its own leaf 0AH is the
    /// part's common view ([`common_leaf_0a::ALDER_LAKE`], which Alder
    /// Lake-N, Gracemont cores only, reports too: InstLatx64's
    /// `GenuineIntel00B06E0_AlderLakeN_03_CPUID.txt`; Linux's
    /// `intel_pmu_init` keeps leaf 0AH's counts for the Atom PMU).
    /// Full-width writes as on the performance core (CPUID does not record
    /// IA32_PERF_CAPABILITIES); PEBS and LBR not modelled.
    pub const fn alder_lake_e_core() -> Self {
        Self {
            version: 5,
            gp_counters: 6,
            gp_width: 48,
            fixed_counters: 3,
            fixed_width: 48,
            unavailable: 0,
            ebx_length: 7,
            fixed_bitmap: 0x7,
            full_width_writes: true,
            family: 6,
            model: 0x97,
            hybrid: true,
            core_type: 0x20,
            pebs: PebsConfig::NONE,
            lbr: LbrConfig::None,
            leaf_0a: None,
            perfmon_ext: None,
        }
    }

    /// A Meteor Lake performance core (Redwood Cove, 06_AAH): the counters
    /// of [`Config::alder_lake_p_core`] (eight general, fixed counters
    /// 0-3), CPUID leaf 23H with general counters FFH, fixed counters 0FH
    /// and events DFFH (0-8, 10, 11), and leaf 0AH the part's common view
    /// ([`common_leaf_0a::METEOR_LAKE`]), as a Core Ultra 7 155H's Redwood
    /// Cove cores report them (InstLatx64,
    /// `GenuineIntel00A06A4_MeteorLake_10_CPUID.txt`): version 5 with leaf
    /// 23H.
    pub const fn meteor_lake_p_core() -> Self {
        Self {
            model: 0xAA,
            leaf_0a: Some(common_leaf_0a::METEOR_LAKE),
            perfmon_ext: Some(0xDFF),
            ..Self::alder_lake_p_core()
        }
    }

    /// A Meteor Lake efficiency core (Crestmont, 06_AAH): version 5, eight
    /// 48-bit general counters, fixed counters 0-2, events 0-6 (no topdown
    /// slots: no fixed counter 3, event 7 unsupported), hybrid, core type
    /// 20H, CPUID leaf 23H with general counters FFH, fixed counters 07H
    /// and events 7FH, and leaf 0AH its own counters, which are the part's
    /// common view ([`common_leaf_0a::METEOR_LAKE`]), as a Core Ultra 7
    /// 155H's Crestmont cores report them (same record).
    pub const fn meteor_lake_e_core() -> Self {
        Self {
            gp_counters: 8,
            model: 0xAA,
            perfmon_ext: Some(0x7F),
            ..Self::alder_lake_e_core()
        }
    }

    /// A Lunar Lake efficiency core (Skymont, 06_BDH): architectural
    /// performance monitoring version 6, eight 48-bit general counters,
    /// fixed counters 0-2 and 4-6 (a bitmap with a hole: 77H), events 0-6
    /// and 8-12, hybrid, core type 20H, CPUID leaf 23H reporting them and
    /// leaf 0AH the part's common view ([`common_leaf_0a::LUNAR_LAKE`]), as
    /// a Core Ultra 9 288V's Skymont cores report them (InstLatx64,
    /// `GenuineIntel00B06D1_LunarLake_04_CPUID.txt`). The model counts
    /// nothing on fixed counters 4-6 ([`super::FIXED_EVENTS`]), and
    /// version 6 behaves as version 5 in it: of version 6 it reports leaf
    /// 23H only (sub-leaves 0, 1 and 3; not sub-leaf 2, auto counter
    /// reload, nor the UMASK2 and EQ bits of sub-leaf 0's EBX, which the
    /// record has and the model does not implement).
    pub const fn lunar_lake_e_core() -> Self {
        Self {
            version: 6,
            gp_counters: 8,
            model: 0xBD,
            fixed_counters: 3,
            fixed_bitmap: 0x77,
            leaf_0a: Some(common_leaf_0a::LUNAR_LAKE),
            perfmon_ext: Some(0x1F7F),
            ..Self::alder_lake_e_core()
        }
    }

    /// A version-1 part (Core Duo, 06_0EH): two 40-bit general-purpose
    /// counters, no fixed counters, no IA32_PERF_GLOBAL_* MSRs, no
    /// IA32_PERF_CAPABILITIES.
    pub const fn v1() -> Self {
        Self {
            version: 1,
            gp_counters: 2,
            gp_width: 40,
            fixed_counters: 0,
            fixed_width: 0,
            unavailable: 0,
            ebx_length: 7,
            fixed_bitmap: 0,
            full_width_writes: false,
            family: 6,
            model: 0x0E,
            hybrid: false,
            core_type: 0,
            pebs: PebsConfig::NONE,
            lbr: LbrConfig::None,
            leaf_0a: None,
            perfmon_ext: None,
        }
    }

    /// The number of general-purpose counters the model has (at most
    /// [`MAX_GP`]).
    pub const fn gp_count(&self) -> usize {
        let n = self.gp_counters as usize;
        if n > MAX_GP { MAX_GP } else { n }
    }

    /// The general-purpose counter width the model uses (32..=64).
    pub const fn gp_bits(&self) -> u32 {
        clamp_width(self.gp_width)
    }

    /// The fixed counter width the model uses (32..=64).
    pub const fn fixed_bits(&self) -> u32 {
        clamp_width(self.fixed_width)
    }

    /// Whether fixed counter `i` exists: version 2 or later and `i` below
    /// CPUID.0AH:EDX\[4:0\], or (version 5) CPUID.0AH:ECX\[i\] set (SDM
    /// 20.2.5), and `i` < [`MAX_FIXED`].
    pub const fn has_fixed(&self, i: usize) -> bool {
        if self.version < 2 || i >= MAX_FIXED {
            return false;
        }
        i < self.fixed_counters as usize || (self.version >= 5 && (self.fixed_bitmap >> i) & 1 != 0)
    }

    /// Whether IA32_FIXED_CTR_CTRL and IA32_PERF_GLOBAL_CTRL/STATUS/OVF_CTRL
    /// exist: version 2 and later (SDM 20.2.2; Vol. 4 Table 2-2 "If
    /// CPUID.0AH:EAX\[7:0\] > 1" for FIXED_CTR_CTRL, "> 0" for the GLOBAL
    /// MSRs, which the model, following SDM 20.2.2, gives version 2 only).
    pub const fn has_global_msrs(&self) -> bool {
        self.version >= 2
    }

    /// Whether IA32_PERF_GLOBAL_STATUS_SET and IA32_PERF_GLOBAL_INUSE exist
    /// and the version-4 freeze applies: version 4 and later (SDM 20.2.4).
    pub const fn has_v4(&self) -> bool {
        self.version >= 4
    }

    /// Whether IA32_PERF_CAPABILITIES exists (CPUID.01H:ECX.PDCM\[15\]):
    /// from version 2, or with full-width writes or PEBS.
    pub const fn has_perf_capabilities(&self) -> bool {
        self.version >= 2 || self.full_width_writes || self.pebs.format > 0
    }

    /// Whether the debug store exists (CPUID.01H:EDX.DS\[21\], IA32_DS_AREA):
    /// the model has it exactly where it has PEBS (it models no BTS).
    pub const fn has_ds(&self) -> bool {
        self.pebs.format > 0
    }

    /// Whether the PEBS MSRs exist and records are written: a record format
    /// and PEBS available (IA32_MISC_ENABLE\[12\] clear).
    pub const fn has_pebs(&self) -> bool {
        self.pebs.format > 0 && self.pebs.available
    }

    /// Whether PEBS baseline applies (formats 4-5 with it).
    pub const fn pebs_baseline(&self) -> bool {
        self.has_pebs() && self.pebs.baseline && self.pebs.format >= 4
    }

    /// The bits IA32_PEBS_ENABLE accepts: before PEBS baseline PEBS_EN_PMCn
    /// and LL_EN_PMCn for the general counters 0-3 that exist; with it
    /// PEBS_EN_PMCn for every general counter and PEBS_EN_FIXEDi for every
    /// fixed counter (bits 32 + i; i < 32).
    pub const fn pebs_enable_writable(&self) -> u64 {
        if !self.has_pebs() {
            return 0;
        }
        if self.pebs_baseline() {
            let mut bits = width_mask(self.gp_count() as u32);
            let mut i = 0;
            while i < MAX_FIXED {
                if self.has_fixed(i) {
                    bits |= 1 << (pebs_enable::HIGH_SHIFT as usize + i);
                }
                i += 1;
            }
            bits
        } else {
            let n = if self.gp_count() < pebs_enable::LEGACY_COUNTERS {
                self.gp_count()
            } else {
                pebs_enable::LEGACY_COUNTERS
            };
            let low = width_mask(n as u32);
            low | low << pebs_enable::HIGH_SHIFT
        }
    }

    /// Whether general-purpose counter `gp` (slot `gp`) or fixed counter
    /// `slot - MAX_GP` has a bit in `pebs_enable` that turns it into a PEBS
    /// counter.
    pub const fn pebs_enabled(&self, pebs_enable: u64, slot: usize) -> bool {
        let bit = if slot < MAX_GP {
            slot
        } else {
            pebs_enable::HIGH_SHIFT as usize + slot - MAX_GP
        };
        if slot >= MAX_GP && !self.pebs_baseline() {
            return false;
        }
        bit < 64 && pebs_enable & self.pebs_enable_writable() & (1 << bit) != 0
    }

    /// Whether the AnyThread bits (PERFEVTSELx\[21\], FIXED_CTR_CTRL 4i+2) may
    /// be set: versions 3 and 4 (introduced in 3, SDM 20.2.3; deprecated in
    /// 5, CPUID.0AH:EDX\[15\], SDM 20.2.5).
    pub const fn any_thread_allowed(&self) -> bool {
        matches!(self.version, 3 | 4)
    }

    /// The per-counter bits of IA32_PERF_GLOBAL_CTRL/STATUS/OVF_CTRL that
    /// exist: bit `i` per general-purpose counter, 32 + `i` per fixed counter.
    pub const fn counter_bits(&self) -> u64 {
        let mut bits = width_mask(self.gp_count() as u32);
        let mut i = 0;
        while i < MAX_FIXED {
            if self.has_fixed(i) {
                bits |= 1 << (global_status::FIXED_SHIFT as usize + i);
            }
            i += 1;
        }
        bits
    }

    /// IA32_PERF_GLOBAL_CTRL after reset: the enable bits of the
    /// general-purpose counters set, those of the fixed counters clear (see
    /// the module documentation, choice 2).
    pub const fn global_ctrl_reset(&self) -> u64 {
        if self.has_global_msrs() {
            width_mask(self.gp_count() as u32)
        } else {
            0
        }
    }

    /// The bits IA32_FIXED_CTR_CTRL accepts: OS, USR and PMI (and AnyThread
    /// on versions 3-4) in the field of each fixed counter that exists.
    pub const fn fixed_ctrl_writable(&self) -> u64 {
        let mut per = fixed_ctrl::OS | fixed_ctrl::USR | fixed_ctrl::PMI;
        if self.any_thread_allowed() {
            per |= fixed_ctrl::ANY_THREAD;
        }
        let mut bits = 0;
        let mut i = 0;
        while i < MAX_FIXED {
            if self.has_fixed(i) {
                bits |= fixed_ctrl::field(i, per);
                if self.pebs_baseline() {
                    bits |= fixed_ctrl::adaptive(i);
                }
            }
            i += 1;
        }
        bits
    }

    /// The bits IA32_PERFEVTSELx accepts: 31:0, less AnyThread outside
    /// versions 3-4; Adaptive_Record (bit 34) with PEBS baseline.
    pub const fn evtsel_writable(&self) -> u64 {
        let mut low = !evtsel::RESERVED_HIGH;
        if !self.any_thread_allowed() {
            low &= !evtsel::ANY_THREAD;
        }
        if self.pebs_baseline() {
            low |= evtsel::ADAPTIVE;
        }
        low
    }

    /// The bits IA32_PERF_GLOBAL_OVF_CTRL / STATUS_RESET accepts (write 1 to
    /// clear): the counter bits, 62 (OvfBuf) and 63 (CondChgd) from version
    /// 2 (SDM 20.2.2), 61 (Ovf_Uncore) from version 3 (Vol. 4 Table 2-2, "If
    /// CPUID.0AH:EAX\[7:0\] > 2"), 55, 58, 59 and 60 from version 4 (SDM
    /// 20.2.4.2, Figure "IA32_PERF_GLOBAL_STATUS_RESET MSR").
    pub const fn status_reset_bits(&self) -> u64 {
        let mut bits = self.counter_bits() | global_status::OVF_BUF | global_status::COND_CHGD;
        if self.version >= 3 {
            bits |= global_status::OVF_UNCORE;
        }
        if self.version >= 4 {
            bits |= global_status::TRACE_TOPA_PMI
                | global_status::LBR_FRZ
                | global_status::CTR_FRZ
                | global_status::ASCI;
        }
        bits
    }

    /// The bits IA32_PERF_GLOBAL_STATUS_SET accepts (write 1 to set; version
    /// 4): the counter bits, 55, 58-62; bit 63 (CondChgd) has no "set"
    /// counterpart (SDM 20.2.4.2, Figure "IA32_PERF_GLOBAL_STATUS_SET MSR").
    pub const fn status_set_bits(&self) -> u64 {
        self.counter_bits()
            | global_status::TRACE_TOPA_PMI
            | global_status::LBR_FRZ
            | global_status::CTR_FRZ
            | global_status::ASCI
            | global_status::OVF_UNCORE
            | global_status::OVF_BUF
    }

    /// The bits IA32_DEBUGCTL accepts: LBR, BTF, TR, BTS, BTINT, BTS_OFF_OS,
    /// BTS_OFF_USR, and FREEZE_LBRS_ON_PMI / FREEZE_PERFMON_ON_PMI from
    /// version 2 (Vol. 4 Table 2-2, 1D9H: "If CPUID.01H:ECX\[15\] = 1 &&
    /// CPUID.0AH:EAX\[7:0\] > 1"). Bits 13 (uncore PMI, model-specific), 14
    /// (FREEZE_WHILE_SMM, needs IA32_PERF_CAPABILITIES\[12\], which the model
    /// reports clear) and 15 (RTM_DEBUG, needs CPUID.07H:EBX\[11\], clear)
    /// are reserved in the model.
    pub const fn debugctl_writable(&self) -> u64 {
        if self.version >= 2 {
            debugctl::BASE | debugctl::FREEZE_LBRS_ON_PMI | debugctl::FREEZE_PERFMON_ON_PMI
        } else {
            debugctl::BASE
        }
    }

    /// The bits MSR_LBR_SELECT accepts: the suppress bits 8:0, and
    /// EN_CALLSTACK (bit 9) where the stack has call-stack mode.
    pub const fn lbr_select_writable(&self) -> u64 {
        match self.lbr {
            LbrConfig::Legacy { call_stack, .. } => {
                lbr::select::FILTERS
                    | if call_stack {
                        lbr::select::EN_CALLSTACK
                    } else {
                        0
                    }
            }
            _ => 0,
        }
    }

    /// The bits IA32_LBR_CTL accepts: LBREn, OS, USR, CALL_STACK and the
    /// kinds 22:16 (the model enumerates every filter, CPUID.1CH:EBX).
    pub const fn lbr_ctl_writable(&self) -> u64 {
        lbr::ctl::LBREN | lbr::ctl::OS | lbr::ctl::USR | lbr::ctl::CALL_STACK | lbr::ctl::KINDS
    }

    /// Whether IA32_LBR_DEPTH takes `depth`: a multiple of 8 whose bit
    /// (depth / 8 - 1) CPUID.1CH:EAX\[7:0\] sets.
    pub const fn lbr_depth_valid(&self, depth: u64) -> bool {
        let LbrConfig::Architectural { depths } = self.lbr else {
            return false;
        };
        depth >= 8 && depth <= 64 && depth.is_multiple_of(8) && (depths >> (depth / 8 - 1)) & 1 != 0
    }

    /// The CPUID.01H:EAX signature (stepping 0): family above 0FH goes into
    /// the extended family, the model's high nibble into the extended model.
    pub const fn signature(&self) -> u32 {
        let (base, ext) = if self.family < 0xF {
            (self.family as u32, 0)
        } else {
            (0xF, (self.family - 0xF) as u32)
        };
        let model = self.model as u32;
        (ext << 20) | ((model >> 4) << 16) | (base << 8) | ((model & 0xF) << 4)
    }

    /// CPUID as the modelled processor answers it (SDM Vol. 2A CPUID):
    ///
    /// * leaf 0: maximum leaf [`MAX_BASIC_LEAF`] ([`MAX_LBR_LEAF`] with
    ///   architectural LBR, [`MAX_EXT_LEAF`] with leaf 23H), "GenuineIntel";
    /// * leaf 1: EAX the [`signature`](Self::signature), EBX\[15:8\] CLFLUSH
    ///   line 8 (64 bytes), ECX\[15\] PDCM when IA32_PERF_CAPABILITIES exists,
    ///   EDX FPU, TSC, MSR (bit 5) and APIC;
    /// * leaf 7 subleaf 0: EDX\[15\] hybrid;
    /// * leaf 0AH: EAX version, GP counters, GP width, EBX length; EBX the
    ///   unavailable vector; ECX the fixed bitmap (version 5); EDX fixed
    ///   counters and width (version 2 and later) and, on version 5, bit 15
    ///   (AnyThread deprecation);
    /// * leaf 1AH: EAX\[31:24\] the core type when hybrid;
    /// * with [`Config::perfmon_ext`]: leaf 7 subleaf 1 EAX\[8\]
    ///   (ArchPerfmonExt) and leaf 23H: subleaf 0 EAX the valid subleaves
    ///   (0, 1 and 3), subleaf 1 EAX the general counters' bitmap and EBX
    ///   the fixed counters' (the counters this core has), subleaf 3 EAX
    ///   the events' bitmap;
    /// * leaf 7 EDX\[19\] and leaf 1CH with architectural LBR
    ///   ([`LbrConfig::Architectural`]);
    /// * every other leaf and subleaf: zero.
    pub const fn cpuid(&self, leaf: u32, subleaf: u32) -> CpuidResult {
        let zero = CpuidResult {
            eax: 0,
            ebx: 0,
            ecx: 0,
            edx: 0,
        };
        match leaf {
            0 => CpuidResult {
                eax: if self.perfmon_ext.is_some() {
                    MAX_EXT_LEAF
                } else if let LbrConfig::Architectural { .. } = self.lbr {
                    MAX_LBR_LEAF
                } else {
                    MAX_BASIC_LEAF
                },
                ebx: u32::from_le_bytes(*b"Genu"),
                edx: u32::from_le_bytes(*b"ineI"),
                ecx: u32::from_le_bytes(*b"ntel"),
            },
            1 => {
                let ecx = if self.has_perf_capabilities() {
                    1 << 15
                } else {
                    0
                };
                CpuidResult {
                    eax: self.signature(),
                    ebx: 8 << 8,
                    ecx,
                    // FPU, TSC, MSR, APIC; DS (bit 21) with PEBS.
                    edx: (1 << 0)
                        | (1 << 4)
                        | (1 << 5)
                        | (1 << 9)
                        | if self.has_ds() { 1 << 21 } else { 0 },
                }
            }
            7 if subleaf == 0 => CpuidResult {
                edx: if self.hybrid { 1 << 15 } else { 0 }
                    | if let LbrConfig::Architectural { .. } = self.lbr {
                        1 << 19
                    } else {
                        0
                    },
                ..zero
            },
            7 if subleaf == 1 && self.perfmon_ext.is_some() => CpuidResult {
                eax: 1 << 8,
                ..zero
            },
            0x0A => match self.leaf_0a {
                Some([eax, ebx, ecx, edx]) => CpuidResult { eax, ebx, ecx, edx },
                None => self.own_leaf_0a(),
            },
            0x1A if self.hybrid => CpuidResult {
                eax: (self.core_type as u32) << 24,
                ..zero
            },
            // Architectural LBR: the depths and LIP (the model records
            // linear addresses); CPL and branch filtering, call-stack mode;
            // the mispredict bit, timed records, the branch type.
            0x1C if subleaf == 0 => match self.lbr {
                LbrConfig::Architectural { depths } => CpuidResult {
                    eax: depths as u32 | 1 << 31,
                    ebx: 0b111,
                    ecx: 0b111,
                    edx: 0,
                },
                _ => zero,
            },
            0x23 => match (self.perfmon_ext, subleaf) {
                (Some(_), 0) => CpuidResult {
                    eax: (1 << 0) | (1 << 1) | (1 << 3),
                    ..zero
                },
                (Some(_), 1) => CpuidResult {
                    eax: width_mask(self.gp_count() as u32) as u32,
                    ebx: self.fixed_counters_bitmap(),
                    ..zero
                },
                (Some(events), 3) => CpuidResult {
                    eax: events,
                    ..zero
                },
                _ => zero,
            },
            _ => zero,
        }
    }

    /// The fixed counters this core has, bit i for fixed counter i.
    const fn fixed_counters_bitmap(&self) -> u32 {
        let mut bits = 0;
        let mut i = 0;
        while i < MAX_FIXED {
            if self.has_fixed(i) {
                bits |= 1 << i;
            }
            i += 1;
        }
        bits
    }

    /// CPUID leaf 0AH enumerating this core's own counters and events.
    const fn own_leaf_0a(&self) -> CpuidResult {
        let eax = self.version as u32
            | ((self.gp_count() as u32) << 8)
            | (self.gp_bits() << 16)
            | ((self.ebx_length as u32) << 24);
        let (ecx, edx) = if self.version >= 2 {
            let fixed = if (self.fixed_counters as usize) > MAX_FIXED {
                MAX_FIXED as u32
            } else {
                self.fixed_counters as u32
            };
            let mut edx = fixed | ((self.fixed_bits() & 0xFF) << 5);
            let mut ecx = 0;
            if self.version >= 5 {
                edx |= 1 << 15;
                ecx = self.fixed_bitmap & width_mask(MAX_FIXED as u32) as u32;
            }
            (ecx, edx)
        } else {
            (0, 0)
        };
        CpuidResult {
            eax,
            ebx: self.unavailable,
            ecx,
            edx,
        }
    }
}

/// The instruction that faulted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Instruction {
    /// RDMSR.
    Rdmsr,
    /// WRMSR.
    Wrmsr,
    /// RDPMC.
    Rdpmc,
}

/// Why an access raised #GP(0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum GpReason {
    /// No such MSR on the configured processor (RDMSR/WRMSR of an address
    /// that is not implemented: SDM Vol. 2B RDMSR/WRMSR, #GP(0)).
    UnknownMsr,
    /// The write sets reserved bits: `bits` are the offending ones.
    ReservedBits {
        /// The reserved bits that were set.
        bits: u64,
    },
    /// A WRMSR to a read-only MSR (IA32_PERF_GLOBAL_STATUS,
    /// IA32_PERF_GLOBAL_INUSE, IA32_PERF_CAPABILITIES).
    ReadOnly,
    /// RDPMC of a counter that does not exist (SDM Vol. 2B RDPMC).
    NoSuchCounter,
    /// A full-width write (IA32_A_PMCx, IA32_FIXED_CTRx) with bits set at or
    /// above the counter width (SDM 20.2.6: "EDX\[63:COUNTERWIDTH\] are
    /// reserved"; 20.2.2: fixed-counter bits beyond the width "are reserved
    /// and must be written as zeros").
    OutOfWidth,
    /// RDPMC with ECX\[31\] ("fast" read) set: supported only by processors
    /// without architectural performance monitoring (SDM Vol. 2B RDPMC).
    FastReadUnsupported,
}

/// A fault the hardware would raise; what the model's [`MsrAccess`] returns
/// as its error. A faulting access changes nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Fault {
    /// #GP(0).
    GeneralProtection {
        /// RDMSR, WRMSR or RDPMC.
        instruction: Instruction,
        /// The MSR address (ECX) or, for RDPMC, the ECX operand.
        ecx: u32,
        /// Why.
        reason: GpReason,
    },
}

impl Fault {
    const fn gp(instruction: Instruction, ecx: u32, reason: GpReason) -> Self {
        Self::GeneralProtection {
            instruction,
            ecx,
            reason,
        }
    }

    /// The reason of the #GP.
    pub const fn reason(&self) -> GpReason {
        match *self {
            Self::GeneralProtection { reason, .. } => reason,
        }
    }

    /// The faulting instruction.
    pub const fn instruction(&self) -> Instruction {
        match *self {
            Self::GeneralProtection { instruction, .. } => instruction,
        }
    }

    /// The ECX operand of the faulting instruction.
    pub const fn ecx(&self) -> u32 {
        match *self {
            Self::GeneralProtection { ecx, .. } => ecx,
        }
    }
}

impl core::fmt::Display for GpReason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            GpReason::UnknownMsr => f.write_str("no such MSR on this processor"),
            GpReason::ReservedBits { bits } => write!(f, "reserved bits {bits:#x} set"),
            GpReason::ReadOnly => f.write_str("read-only MSR"),
            GpReason::NoSuchCounter => f.write_str("no counter with that index"),
            GpReason::OutOfWidth => f.write_str("value wider than the counter"),
            GpReason::FastReadUnsupported => {
                f.write_str("fast read (ECX[31]) is not supported with architectural perfmon")
            }
        }
    }
}

/// The SDM name of an architectural MSR the model knows (with its index for
/// the numbered ones), whatever the configuration.
pub fn msr_name(msr: u32) -> Option<(&'static str, Option<u32>)> {
    let numbered = |base: u32, n: usize, name| {
        let i = msr.wrapping_sub(base);
        ((i as usize) < n).then_some((name, Some(i)))
    };
    numbered(IA32_PMC0, MAX_GP, "IA32_PMC")
        .or_else(|| numbered(IA32_PERFEVTSEL0, MAX_GP, "IA32_PERFEVTSEL"))
        .or_else(|| numbered(IA32_FIXED_CTR0, MAX_FIXED, "IA32_FIXED_CTR"))
        .or_else(|| numbered(IA32_A_PMC0, MAX_GP, "IA32_A_PMC"))
        .or(match msr {
            IA32_DEBUGCTL => Some(("IA32_DEBUGCTL", None)),
            IA32_PERF_CAPABILITIES => Some(("IA32_PERF_CAPABILITIES", None)),
            IA32_FIXED_CTR_CTRL => Some(("IA32_FIXED_CTR_CTRL", None)),
            IA32_PERF_GLOBAL_STATUS => Some(("IA32_PERF_GLOBAL_STATUS", None)),
            IA32_PERF_GLOBAL_CTRL => Some(("IA32_PERF_GLOBAL_CTRL", None)),
            IA32_PERF_GLOBAL_OVF_CTRL => Some(("IA32_PERF_GLOBAL_OVF_CTRL", None)),
            IA32_PERF_GLOBAL_STATUS_SET => Some(("IA32_PERF_GLOBAL_STATUS_SET", None)),
            IA32_PERF_GLOBAL_INUSE => Some(("IA32_PERF_GLOBAL_INUSE", None)),
            IA32_MISC_ENABLE => Some(("IA32_MISC_ENABLE", None)),
            IA32_PEBS_ENABLE => Some(("IA32_PEBS_ENABLE", None)),
            MSR_PEBS_DATA_CFG => Some(("MSR_PEBS_DATA_CFG", None)),
            MSR_PEBS_LD_LAT => Some(("MSR_PEBS_LD_LAT", None)),
            IA32_DS_AREA => Some(("IA32_DS_AREA", None)),
            lbr::SELECT => Some(("MSR_LBR_SELECT", None)),
            lbr::TOS => Some(("MSR_LASTBRANCH_TOS", None)),
            lbr::CTL => Some(("IA32_LBR_CTL", None)),
            lbr::DEPTH => Some(("IA32_LBR_DEPTH", None)),
            _ => None,
        })
        // The records' names have their number inside (record x): named
        // with x, the number after it.
        .or_else(|| numbered(lbr::FROM_IP, 32, "MSR_LASTBRANCH_x_FROM_IP, x = "))
        .or_else(|| numbered(lbr::TO_IP, 32, "MSR_LASTBRANCH_x_TO_IP, x = "))
        .or_else(|| numbered(lbr::INFO, 32, "MSR_LBR_INFO_x, x = "))
        .or_else(|| {
            numbered(
                lbr::ARCH_FROM_IP,
                lbr::MAX_RECORDS,
                "IA32_LBR_x_FROM_IP, x = ",
            )
        })
        .or_else(|| numbered(lbr::ARCH_TO_IP, lbr::MAX_RECORDS, "IA32_LBR_x_TO_IP, x = "))
        .or_else(|| numbered(lbr::ARCH_INFO, lbr::MAX_RECORDS, "IA32_LBR_x_INFO, x = "))
}

impl core::error::Error for Fault {}

/// "#GP(0) on WRMSR to IA32_PERF_GLOBAL_STATUS (38EH): read-only MSR".
impl core::fmt::Display for Fault {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let Self::GeneralProtection {
            instruction,
            ecx,
            reason,
        } = self;
        let verb = match instruction {
            Instruction::Rdmsr => "RDMSR of",
            Instruction::Wrmsr => "WRMSR to",
            Instruction::Rdpmc => return write!(f, "#GP(0) on RDPMC with ECX {ecx:#X}: {reason}"),
        };
        match msr_name(*ecx) {
            Some((name, Some(i))) => write!(f, "#GP(0) on {verb} {name}{i} ({ecx:X}H): {reason}"),
            Some((name, None)) => write!(f, "#GP(0) on {verb} {name} ({ecx:X}H): {reason}"),
            None => write!(f, "#GP(0) on {verb} MSR {ecx:X}H: {reason}"),
        }
    }
}

/// A decoded MSR address that exists on the configured processor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reg {
    Pmc(usize),
    FullWidthPmc(usize),
    EvtSel(usize),
    Fixed(usize),
    FixedCtrl,
    GlobalStatus,
    GlobalCtrl,
    GlobalOvfCtrl,
    GlobalStatusSet,
    GlobalInUse,
    PerfCapabilities,
    DebugCtl,
    MiscEnable,
    PebsEnable,
    PebsDataCfg,
    PebsLdLat,
    DsArea,
    LbrSelect,
    LbrTos,
    LbrCtl,
    LbrDepth,
    /// Record x's FROM, TO, INFO (legacy or architectural).
    LbrFrom(usize),
    LbrTo(usize),
    LbrInfo(usize),
}

/// A logical processor's last branch records, as the model keeps them:
/// the record MSRs (legacy: a ring, `tos` the newest; architectural:
/// record 0 the newest), the filters and the depth.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct LbrRecords {
    pub(super) from: [u64; lbr::MAX_RECORDS],
    pub(super) to: [u64; lbr::MAX_RECORDS],
    pub(super) info: [u64; lbr::MAX_RECORDS],
    pub(super) tos: u64,
    pub(super) select: u64,
    pub(super) ctl: u64,
    /// IA32_LBR_DEPTH (architectural LBR).
    pub(super) depth: u64,
    /// The clock of the last record (CYC_CNT counts from it).
    pub(super) last: u64,
}

impl LbrRecords {
    const fn new(config: &Config) -> LbrRecords {
        LbrRecords {
            from: [0; lbr::MAX_RECORDS],
            to: [0; lbr::MAX_RECORDS],
            info: [0; lbr::MAX_RECORDS],
            tos: 0,
            select: 0,
            ctl: 0,
            depth: config.lbr.max_depth() as u64,
            last: 0,
        }
    }

    /// Every record 0.
    pub(super) fn clear(&mut self) {
        self.from = [0; lbr::MAX_RECORDS];
        self.to = [0; lbr::MAX_RECORDS];
        self.info = [0; lbr::MAX_RECORDS];
    }
}

/// The register-level model of one logical processor's architectural PMU.
/// See the [module documentation](super).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchPerfModel {
    pub(super) config: Config,
    /// Counter values: general-purpose `0..MAX_GP`, fixed `MAX_GP..`.
    pub(super) counters: [u64; SLOTS],
    pub(super) evtsel: [u64; MAX_GP],
    pub(super) fixed_ctrl: u64,
    pub(super) global_ctrl: u64,
    pub(super) global_status: u64,
    pub(super) debugctl: u64,
    /// The comparator output of the previous counted clock, for EDGE.
    pub(super) edge_prev: [bool; MAX_GP],
    /// Per slot: a PMI requested by an overflow and waiting for this many
    /// more increments of that counter (the skid).
    pub(super) armed: [Option<u64>; SLOTS],
    pub(super) skid: u64,
    pub(super) pmi: bool,
    /// Status-layout bits of the counters whose overflow raised the line.
    pub(super) pmi_sources: u64,
    /// The privilege level of the current clock (the last injected one).
    pub(super) privilege: Privilege,
    /// IA32_PEBS_ENABLE, MSR_PEBS_DATA_CFG, MSR_PEBS_LD_LAT, IA32_DS_AREA.
    pub(super) pebs_enable: u64,
    pub(super) pebs_data_cfg: u64,
    pub(super) pebs_ld_lat: u64,
    pub(super) ds_area: u64,
    /// Per slot: the PEBS counter overflowed, and its next event takes the
    /// assist.
    pub(super) pebs_armed: [bool; SLOTS],
    /// The kernel said the DS save area at IA32_DS_AREA is memory the model
    /// may write (`ArchPerfModel::attach_ds_memory`).
    pub(super) ds_attached: bool,
    /// Clocks run since reset (the records' TSC).
    pub(super) clock: u64,
    /// The instruction of the current clock, for the records (all zero in
    /// the bulk paths, which have none).
    pub(super) retirement: Retirement,
    /// PEBS records written, and assists that wrote none (a full buffer, or
    /// no memory attached).
    pub(super) pebs_records: u64,
    pub(super) pebs_lost: u64,
    /// The last branch records.
    pub(super) lbr: LbrRecords,
}

impl ArchPerfModel {
    /// A model in the reset state: counters, event selects, fixed control,
    /// status and IA32_DEBUGCTL zero; IA32_PERF_GLOBAL_CTRL
    /// [`Config::global_ctrl_reset`]; no skid; CPL 0.
    pub const fn new(config: Config) -> Self {
        Self {
            config,
            counters: [0; SLOTS],
            evtsel: [0; MAX_GP],
            fixed_ctrl: 0,
            global_ctrl: config.global_ctrl_reset(),
            global_status: 0,
            debugctl: 0,
            edge_prev: [false; MAX_GP],
            armed: [None; SLOTS],
            skid: 0,
            pmi: false,
            pmi_sources: 0,
            privilege: Privilege::Os,
            pebs_enable: 0,
            pebs_data_cfg: 0,
            pebs_ld_lat: 0,
            ds_area: 0,
            pebs_armed: [false; SLOTS],
            ds_attached: false,
            clock: 0,
            retirement: Retirement::NONE,
            pebs_records: 0,
            pebs_lost: 0,
            lbr: LbrRecords::new(&config),
        }
    }

    /// The configuration.
    pub const fn config(&self) -> &Config {
        &self.config
    }

    /// General-purpose counter `gp` (IA32_PMCgp), without RDPMC; 0 if it
    /// does not exist.
    pub fn counter(&self, gp: usize) -> u64 {
        if gp < self.config.gp_count() {
            self.counters[gp]
        } else {
            0
        }
    }

    /// Fixed counter `i` (IA32_FIXED_CTRi), without RDPMC; 0 if it does not
    /// exist.
    pub fn fixed(&self, i: usize) -> u64 {
        if self.config.has_fixed(i) {
            self.counters[MAX_GP + i]
        } else {
            0
        }
    }

    /// IA32_PERF_GLOBAL_STATUS (always 0 on version 1, which has none).
    pub const fn global_status(&self) -> u64 {
        self.global_status
    }

    /// IA32_PERF_GLOBAL_CTRL (meaningless on version 1).
    pub const fn global_ctrl(&self) -> u64 {
        self.global_ctrl
    }

    /// IA32_PERFEVTSELx; 0 if it does not exist.
    pub fn evtsel(&self, gp: usize) -> u64 {
        if gp < self.config.gp_count() {
            self.evtsel[gp]
        } else {
            0
        }
    }

    /// IA32_FIXED_CTR_CTRL.
    pub const fn fixed_ctrl(&self) -> u64 {
        self.fixed_ctrl
    }

    /// IA32_DEBUGCTL.
    pub const fn debugctl(&self) -> u64 {
        self.debugctl
    }

    /// IA32_PERF_GLOBAL_INUSE as the processor computes it (SDM 20.2.4.3):
    /// bit `n` = (IA32_PERFEVTSELn\[7:0\] != 0); bit 32 + `i` =
    /// (IA32_FIXED_CTR_CTRL\[4i+1:4i\] != 0); bit 63 (PMI_InUse) = some
    /// IA32_PERFEVTSELn.INT or IA32_FIXED_CTR_CTRL.PMIi set (the PEBS enables
    /// the SDM also lists are not modelled).
    pub fn global_inuse(&self) -> u64 {
        let mut v = 0;
        let mut pmi = false;
        for n in 0..self.config.gp_count() {
            if self.evtsel[n] & evtsel::EVENT_SELECT != 0 {
                v |= 1 << n;
            }
            pmi |= self.evtsel[n] & evtsel::INT != 0;
        }
        for i in (0..MAX_FIXED).filter(|&i| self.config.has_fixed(i)) {
            let field = (self.fixed_ctrl >> (4 * i)) & 0xF;
            if field & (fixed_ctrl::OS | fixed_ctrl::USR) != 0 {
                v |= 1 << (global_status::FIXED_SHIFT as usize + i);
            }
            pmi |= field & fixed_ctrl::PMI != 0;
        }
        if pmi {
            v |= 1 << 63;
        }
        v
    }

    fn decode(&self, msr: u32) -> Option<Reg> {
        let c = &self.config;
        let index = |base: u32, n: usize| {
            let i = msr.wrapping_sub(base) as usize;
            (i < n).then_some(i)
        };
        if let Some(i) = index(IA32_PMC0, c.gp_count()) {
            return Some(Reg::Pmc(i));
        }
        if let Some(i) = index(IA32_PERFEVTSEL0, c.gp_count()) {
            return Some(Reg::EvtSel(i));
        }
        if c.full_width_writes
            && let Some(i) = index(IA32_A_PMC0, c.gp_count())
        {
            return Some(Reg::FullWidthPmc(i));
        }
        if let Some(i) = index(IA32_FIXED_CTR0, MAX_FIXED) {
            return c.has_fixed(i).then_some(Reg::Fixed(i));
        }
        if let Some(reg) = self.decode_lbr(msr) {
            return Some(reg);
        }
        let reg = match msr {
            IA32_MISC_ENABLE => Reg::MiscEnable,
            IA32_PEBS_ENABLE if c.has_pebs() => Reg::PebsEnable,
            MSR_PEBS_DATA_CFG if c.pebs_baseline() => Reg::PebsDataCfg,
            MSR_PEBS_LD_LAT if c.has_pebs() => Reg::PebsLdLat,
            IA32_DS_AREA if c.has_ds() => Reg::DsArea,
            IA32_DEBUGCTL => Reg::DebugCtl,
            IA32_PERF_CAPABILITIES if c.has_perf_capabilities() => Reg::PerfCapabilities,
            IA32_FIXED_CTR_CTRL if c.has_global_msrs() => Reg::FixedCtrl,
            IA32_PERF_GLOBAL_STATUS if c.has_global_msrs() => Reg::GlobalStatus,
            IA32_PERF_GLOBAL_CTRL if c.has_global_msrs() => Reg::GlobalCtrl,
            IA32_PERF_GLOBAL_OVF_CTRL if c.has_global_msrs() => Reg::GlobalOvfCtrl,
            IA32_PERF_GLOBAL_STATUS_SET if c.has_v4() => Reg::GlobalStatusSet,
            IA32_PERF_GLOBAL_INUSE if c.has_v4() => Reg::GlobalInUse,
            _ => return None,
        };
        Some(reg)
    }

    /// The LBR MSRs of the configuration: legacy MSR_LBR_SELECT,
    /// MSR_LASTBRANCH_TOS and records x < depth (INFO with formats 5 and
    /// 7); architectural IA32_LBR_CTL, IA32_LBR_DEPTH and records x below
    /// the depth IA32_LBR_DEPTH holds (choice 21).
    fn decode_lbr(&self, msr: u32) -> Option<Reg> {
        let (from, to, info, n) = match self.config.lbr {
            LbrConfig::None => return None,
            LbrConfig::Legacy { .. } => {
                match msr {
                    lbr::SELECT => return Some(Reg::LbrSelect),
                    lbr::TOS => return Some(Reg::LbrTos),
                    _ => {}
                }
                let info = if self.config.lbr.legacy_info() {
                    lbr::INFO
                } else {
                    0
                };
                (lbr::FROM_IP, lbr::TO_IP, info, self.config.lbr.max_depth())
            }
            LbrConfig::Architectural { .. } => {
                match msr {
                    lbr::CTL => return Some(Reg::LbrCtl),
                    lbr::DEPTH => return Some(Reg::LbrDepth),
                    _ => {}
                }
                let n = (self.lbr.depth as usize).min(lbr::MAX_RECORDS);
                (lbr::ARCH_FROM_IP, lbr::ARCH_TO_IP, lbr::ARCH_INFO, n)
            }
        };
        let index = |base: u32| {
            let i = msr.wrapping_sub(base) as usize;
            (base != 0 && i < n).then_some(i)
        };
        index(from)
            .map(Reg::LbrFrom)
            .or_else(|| index(to).map(Reg::LbrTo))
            .or_else(|| index(info).map(Reg::LbrInfo))
    }

    pub(super) fn read(&self, msr: u32) -> Result<u64, Fault> {
        let reg =
            self.decode(msr)
                .ok_or(Fault::gp(Instruction::Rdmsr, msr, GpReason::UnknownMsr))?;
        Ok(match reg {
            Reg::Pmc(i) | Reg::FullWidthPmc(i) => self.counters[i],
            Reg::EvtSel(i) => self.evtsel[i],
            Reg::Fixed(i) => self.counters[MAX_GP + i],
            Reg::FixedCtrl => self.fixed_ctrl,
            Reg::GlobalStatus => self.global_status,
            Reg::GlobalCtrl => self.global_ctrl,
            // Write-1 command registers: read as 0 (choice 7).
            Reg::GlobalOvfCtrl | Reg::GlobalStatusSet => 0,
            Reg::GlobalInUse => self.global_inuse(),
            Reg::PerfCapabilities => self.perf_capabilities(),
            Reg::DebugCtl => self.debugctl,
            Reg::MiscEnable => self.misc_enable(),
            Reg::PebsEnable => self.pebs_enable,
            Reg::PebsDataCfg => self.pebs_data_cfg,
            Reg::PebsLdLat => self.pebs_ld_lat,
            Reg::DsArea => self.ds_area,
            Reg::LbrSelect => self.lbr.select,
            Reg::LbrTos => self.lbr.tos,
            Reg::LbrCtl => self.lbr.ctl,
            Reg::LbrDepth => self.lbr.depth,
            Reg::LbrFrom(x) => self.lbr.from[x],
            Reg::LbrTo(x) => self.lbr.to[x],
            Reg::LbrInfo(x) => self.lbr.info[x],
        })
    }

    /// IA32_PERF_CAPABILITIES: FW_WRITE, and with PEBS the trap-like
    /// assist, the saved architectural registers, the record format and
    /// PEBS baseline (choice 10).
    fn perf_capabilities(&self) -> u64 {
        let c = &self.config;
        let mut v = 0;
        if c.full_width_writes {
            v |= perf_capabilities::FW_WRITE;
        }
        v |= u64::from(c.lbr.legacy_format()) & perf_capabilities::LBR_FORMAT;
        if c.pebs.format > 0 {
            v |= perf_capabilities::PEBS_TRAP
                | perf_capabilities::PEBS_ARCH_REG
                | (u64::from(c.pebs.format) & 0xF) << perf_capabilities::PEBS_FORMAT_SHIFT;
            if c.pebs.baseline && c.pebs.format >= 4 {
                v |= perf_capabilities::PEBS_BASELINE;
            }
        }
        v
    }

    /// IA32_MISC_ENABLE's performance-monitoring bits (choice 17):
    /// performance monitoring available, BTS unavailable (the model has no
    /// BTS), PEBS unavailable unless the configuration has PEBS available.
    fn misc_enable(&self) -> u64 {
        let mut v = misc_enable::PERF_MON_AVAILABLE | misc_enable::BTS_UNAVAILABLE;
        if !self.config.has_pebs() {
            v |= misc_enable::PEBS_UNAVAILABLE;
        }
        v
    }

    /// The #GP rule a write of `value` to `reg` breaks, if any.
    fn check_msr_write(&self, reg: Reg, value: u64) -> Result<(), GpReason> {
        let c = &self.config;
        let writable = match reg {
            // Legacy writes take EAX sign-extended; EDX is ignored (20.2.6).
            Reg::Pmc(_) => u64::MAX,
            Reg::FullWidthPmc(_) => {
                return if value & !width_mask(c.gp_bits()) != 0 {
                    Err(GpReason::OutOfWidth)
                } else {
                    Ok(())
                };
            }
            Reg::Fixed(_) => {
                return if value & !width_mask(c.fixed_bits()) != 0 {
                    Err(GpReason::OutOfWidth)
                } else {
                    Ok(())
                };
            }
            Reg::GlobalStatus | Reg::GlobalInUse | Reg::PerfCapabilities | Reg::MiscEnable => {
                return Err(GpReason::ReadOnly);
            }
            Reg::PebsEnable => c.pebs_enable_writable(),
            Reg::PebsDataCfg => data_cfg::MEMORY | data_cfg::GPRS,
            Reg::PebsLdLat => LD_LAT_THRESHOLD,
            Reg::DsArea => {
                // A linear address: canonical (bits 63:47 equal), or #GP
                // as any MSR that holds one.
                let high = value >> 47;
                return if high == 0 || high == (1 << 17) - 1 {
                    Ok(())
                } else {
                    Err(GpReason::ReservedBits { bits: value })
                };
            }
            Reg::EvtSel(_) => c.evtsel_writable(),
            Reg::FixedCtrl => c.fixed_ctrl_writable(),
            Reg::GlobalCtrl => c.counter_bits(),
            Reg::GlobalOvfCtrl => c.status_reset_bits(),
            Reg::GlobalStatusSet => c.status_set_bits(),
            Reg::DebugCtl => c.debugctl_writable(),
            Reg::LbrSelect => c.lbr_select_writable(),
            // The TOS's index bits (choice 21).
            Reg::LbrTos => (c.lbr.max_depth() as u64).saturating_sub(1),
            Reg::LbrCtl => c.lbr_ctl_writable(),
            Reg::LbrDepth => {
                return if c.lbr_depth_valid(value) {
                    Ok(())
                } else {
                    Err(GpReason::ReservedBits { bits: value })
                };
            }
            // The records take any value (choice 21).
            Reg::LbrFrom(_) | Reg::LbrTo(_) | Reg::LbrInfo(_) => u64::MAX,
        };
        let bits = value & !writable;
        if bits != 0 {
            return Err(GpReason::ReservedBits { bits });
        }
        Ok(())
    }

    pub(super) fn write(&mut self, msr: u32, value: u64) -> Result<(), Fault> {
        let gp = |reason| Fault::gp(Instruction::Wrmsr, msr, reason);
        let reg = self.decode(msr).ok_or(gp(GpReason::UnknownMsr))?;
        self.check_msr_write(reg, value).map_err(gp)?;
        match reg {
            Reg::Pmc(i) => {
                // EAX[31:0] sign-extended to 64 bits, kept to the width.
                let extended = value as u32 as i32 as i64 as u64;
                self.counters[i] = extended & width_mask(self.config.gp_bits());
            }
            Reg::FullWidthPmc(i) => self.counters[i] = value,
            Reg::EvtSel(i) => {
                if self.evtsel[i] & evtsel::EN == 0 && value & evtsel::EN != 0 {
                    self.edge_prev[i] = false;
                }
                self.evtsel[i] = value;
            }
            Reg::Fixed(i) => self.counters[MAX_GP + i] = value,
            Reg::FixedCtrl => self.fixed_ctrl = value,
            Reg::GlobalCtrl => self.global_ctrl = value,
            Reg::GlobalOvfCtrl => self.global_status &= !value,
            // Sets the bits and raises no PMI (choice 8).
            Reg::GlobalStatusSet => self.global_status |= value,
            Reg::DebugCtl => self.debugctl = value,
            Reg::PebsEnable => self.pebs_enable = value,
            Reg::PebsDataCfg => self.pebs_data_cfg = value,
            Reg::PebsLdLat => self.pebs_ld_lat = value,
            Reg::DsArea => self.ds_area = value,
            Reg::LbrSelect => self.lbr.select = value,
            Reg::LbrTos => self.lbr.tos = value,
            Reg::LbrCtl => self.lbr.ctl = value,
            Reg::LbrDepth => {
                // A write of the depth resets every record (SDM
                // "Architectural Last Branch Records").
                self.lbr.depth = value;
                self.lbr.clear();
            }
            Reg::LbrFrom(x) => self.lbr.from[x] = value,
            Reg::LbrTo(x) => self.lbr.to[x] = value,
            Reg::LbrInfo(x) => self.lbr.info[x] = value,
            Reg::GlobalStatus | Reg::GlobalInUse | Reg::PerfCapabilities | Reg::MiscEnable => {
                unreachable!("read-only MSRs fault in check_msr_write")
            }
        }
        Ok(())
    }

    /// RDPMC (SDM Vol. 2B RDPMC): ECX\[30\] selects the fixed counters,
    /// ECX\[29:0\] the index; the counter's full width is returned. ECX\[31\]
    /// (fast read) is #GP on every version (choice 5), as is a counter that
    /// does not exist.
    pub(super) fn rdpmc(&self, ecx: u32) -> Result<u64, Fault> {
        let gp = |reason| Fault::gp(Instruction::Rdpmc, ecx, reason);
        if ecx & rdpmc::FAST != 0 {
            return Err(gp(GpReason::FastReadUnsupported));
        }
        let index = (ecx & rdpmc::INDEX) as usize;
        if ecx & rdpmc::FIXED != 0 {
            if self.config.has_fixed(index) {
                return Ok(self.counters[MAX_GP + index]);
            }
        } else if index < self.config.gp_count() {
            return Ok(self.counters[index]);
        }
        Err(gp(GpReason::NoSuchCounter))
    }
}

/// RDMSR, WRMSR and RDPMC at CPL 0.
impl MsrAccess for ArchPerfModel {
    type Error = Fault;

    fn read_msr(&mut self, msr: u32) -> Result<u64, Fault> {
        self.read(msr)
    }

    fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Fault> {
        self.write(msr, value)
    }

    fn rdpmc(&mut self, index: u32) -> Result<u64, Fault> {
        ArchPerfModel::rdpmc(self, index)
    }
}

/// CPUID of the configured processor: [`Config::cpuid`].
impl Cpuid for ArchPerfModel {
    fn cpuid(&self, leaf: u32, subleaf: u32) -> CpuidResult {
        self.config.cpuid(leaf, subleaf)
    }
}

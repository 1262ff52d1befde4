//! The layouts of the registers detection reads, declared with
//! `register!`: CPUID's leaves 01H (signature and feature bits, SDM Vol. 2A
//! CPUID, Figure 3-6 "Version Information Returned by CPUID in EAX",
//! Tables 3-10 and 3-11), 04H, 07H, 0BH and 1AH (the fields the topology
//! and hybrid checks read), 0AH and 23H (the architectural PMU) and 1CH
//! (architectural LBR), and the MSRs
//! `IA32_MISC_ENABLE` (its performance-monitoring bits, SDM Vol. 4 Table
//! 2-2) and `IA32_PERF_CAPABILITIES`; AMD's extended leaves 8000_0001H
//! (the PerfCtrExtCore bit) and 8000_0022H (PerfMonV2 and its counter
//! count; AMD64 APM Vol. 3 Appendix E, "CPUID Fn8000_0001_ECX" and
//! "CPUID Fn8000_0022"). The architectures, the topology and the
//! hypervisor support read them from here.

use crate::register::{Field, register};

/// IA32_MISC_ENABLE, MSR 1A0H.
pub const IA32_MISC_ENABLE: u32 = 0x1A0;

/// `IA32_PERF_CAPABILITIES` (present when CPUID.01H:ECX.PDCM\[15\] is set).
pub const IA32_PERF_CAPABILITIES: u32 = 0x345;

/// `PERF_LEGACY_CTL0` (AMD, MSR `C001_0000H`; the PPRs' name, the APM's
/// `PerfEvtSel0`); legacy counter n's control is at `C001_0000H + n`, n =
/// 0-3, on every AMD processor from family 06h (AMD64 APM Vol. 2 13.2.1;
/// Linux `MSR_K7_EVNTSEL0`).
pub const PERF_LEGACY_CTL0: u32 = 0xC001_0000;

/// `PERF_LEGACY_CTR0` (AMD, MSR `C001_0004H`; the APM's `PerfCtr0`); legacy
/// counter n is at `C001_0004H + n` (Linux `MSR_K7_PERFCTR0`).
pub const PERF_LEGACY_CTR0: u32 = 0xC001_0004;

register! {
    /// What detection reads of an AMD counter control (`PERF_LEGACY_CTLn`,
    /// AMD64 APM Vol. 2 13.2.1): its enable bit, to leave a counter the
    /// firmware runs alone. The whole layout is the driver's
    /// (`pmu::arch::amd::PerfCtl`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct PerfLegacyCtl(u64): from_bits {
        /// EN (bit 22): the counter counts.
        EN: 22 => enabled, with_enabled: bool;
    }
}

register! {
    /// `IA32_MISC_ENABLE` (MSR 1A0H), the bits a PMU driver reads; all three
    /// are read-only.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct MiscEnable(u64): from_bits {
        /// Performance monitoring available (bit 7).
        PERF_MON_AVAILABLE: 7 => perf_mon_available, with_perf_mon_available: bool;
        /// Branch trace storage unavailable (bit 11).
        BTS_UNAVAILABLE: 11 => bts_unavailable, with_bts_unavailable: bool;
        /// Processor event-based sampling unavailable (bit 12).
        PEBS_UNAVAILABLE: 12 => pebs_unavailable, with_pebs_unavailable: bool;
    }
}

register! {
    /// CPUID.01H:EAX, the processor signature (SDM Vol. 2A Figure 3-6).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct Leaf01Eax(u32): from_bits {
        /// Stepping ID (bits 3:0).
        STEPPING: 0..=3 => stepping, with_stepping: u8;
        /// Model (bits 7:4).
        MODEL: 4..=7 => model, with_model: u8;
        /// Family ID (bits 11:8).
        FAMILY: 8..=11 => family, with_family: u8;
        /// Extended model ID (bits 19:16).
        EXTENDED_MODEL: 16..=19 => extended_model, with_extended_model: u8;
        /// Extended family ID (bits 27:20).
        EXTENDED_FAMILY: 20..=27 => extended_family, with_extended_family: u8;
    }
}

register! {
    /// CPUID.01H:EBX, the fields that give a processor's place in its
    /// package (SDM Vol. 2A Table 3-8, "EBX").
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct Leaf01Ebx(u32): from_bits {
        /// Maximum number of addressable IDs for logical processors in this
        /// package (bits 23:16; valid when CPUID.01H:EDX.HTT is set).
        LOGICAL_PROCESSORS: 16..=23 => logical_processors, with_logical_processors: u8;
        /// Initial APIC ID (bits 31:24).
        INITIAL_APIC_ID: 24..=31 => initial_apic_id, with_initial_apic_id: u8;
    }
}

register! {
    /// CPUID.01H:ECX, the feature bits a PMU driver reads (SDM Vol. 2A
    /// Table 3-10).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct Leaf01Ecx(u32): from_bits {
        /// PDCM: `IA32_PERF_CAPABILITIES` exists (bit 15).
        PDCM: 15 => pdcm, with_pdcm: bool;
        /// x2APIC (bit 21).
        X2APIC: 21 => x2apic, with_x2apic: bool;
    }
}

register! {
    /// CPUID.01H:EDX, the feature bits a PMU driver reads (SDM Vol. 2A
    /// Table 3-11).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct Leaf01Edx(u32): from_bits {
        /// MSR: RDMSR and WRMSR exist (bit 5).
        MSR: 5 => msr, with_msr: bool;
        /// DS: the debug store (BTS, PEBS) exists (bit 21).
        DS: 21 => ds, with_ds: bool;
        /// HTT: CPUID.01H:EBX\[23:16\] is valid (bit 28).
        HTT: 28 => htt, with_htt: bool;
    }
}

register! {
    /// CPUID.04H:EAX (subleaf 0), the fields that count a package's cores
    /// (SDM Vol. 2A Table 3-8, "Deterministic Cache Parameters Leaf").
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct Leaf04Eax(u32): from_bits {
        /// Cache type (bits 4:0); 0: no more caches, the leaf says nothing.
        CACHE_TYPE: 0..=4 => cache_type, with_cache_type: u8;
        /// Maximum number of addressable IDs for processor cores in the
        /// package, minus one (bits 31:26).
        CORES_MINUS_ONE: 26..=31 => cores_minus_one, with_cores_minus_one: u8;
    }
}

register! {
    /// CPUID.07H:EBX (subleaf 0), the bits the LBR's record format 4 needs
    /// (SDM Vol. 2A Table 3-8, "Structured Extended Feature Flags").
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct Leaf07Ebx(u32): from_bits {
        /// HLE (bit 4): hardware lock elision, one half of TSX.
        HLE: 4 => hle, with_hle: bool;
        /// RTM (bit 11): restricted transactional memory, the other half.
        RTM: 11 => rtm, with_rtm: bool;
    }
}

register! {
    /// CPUID.07H:EDX (subleaf 0), the bit a PMU driver reads (SDM Vol. 2A
    /// Table 3-8, "Structured Extended Feature Flags").
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct Leaf07Edx(u32): from_bits {
        /// Hybrid: the processor has cores of more than one type (bit 15).
        HYBRID: 15 => hybrid, with_hybrid: bool;
        /// Architectural LBR (bit 19): `IA32_LBR_CTL`, `IA32_LBR_DEPTH` and
        /// the `IA32_LBR_x_*` records, enumerated by leaf 1CH (SDM Vol. 3B
        /// "Architectural Last Branch Records").
        ARCH_LBR: 19 => arch_lbr, with_arch_lbr: bool;
    }
}

register! {
    /// CPUID.1CH:EAX, "Last Branch Records Information Leaf" (SDM Vol. 2A
    /// Table 3-8; Vol. 3B "Architectural Last Branch Records").
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct Leaf1CEax(u32): from_bits {
        /// Supported depths (bits 7:0): bit n set, depth 8 × (n + 1) may be
        /// written to `IA32_LBR_DEPTH`.
        DEPTHS: 0..=7 => depths, with_depths: u8;
        /// Deep C-state reset (bit 30): the records may read 0 after a
        /// C-state deeper than C1.
        DEEP_C_RESET: 30 => deep_c_reset, with_deep_c_reset: bool;
        /// IP values contain LIP (bit 31): the records hold linear
        /// addresses (clear: effective addresses, offsets into CS).
        LIP: 31 => lip, with_lip: bool;
    }
}

register! {
    /// CPUID.1CH:EBX: the filters architectural LBR supports.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct Leaf1CEbx(u32): from_bits {
        /// CPL filtering (bit 0): `IA32_LBR_CTL.OS` and `.USR`.
        CPL_FILTER: 0 => cpl_filter, with_cpl_filter: bool;
        /// Branch filtering (bit 1): `IA32_LBR_CTL` bits 22:16.
        BRANCH_FILTER: 1 => branch_filter, with_branch_filter: bool;
        /// Call-stack mode (bit 2): `IA32_LBR_CTL.CALL_STACK`.
        CALL_STACK: 2 => call_stack, with_call_stack: bool;
    }
}

register! {
    /// CPUID.1CH:ECX: what an architectural LBR record holds.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct Leaf1CEcx(u32): from_bits {
        /// Mispredict bit (bit 0): `IA32_LBR_x_INFO.MISPRED`.
        MISPREDICT: 0 => mispredict, with_mispredict: bool;
        /// Timed LBRs (bit 1): `IA32_LBR_x_INFO.CYC_CNT`.
        TIMED: 1 => timed, with_timed: bool;
        /// Branch type field (bit 2): `IA32_LBR_x_INFO.BR_TYPE`.
        BRANCH_TYPE: 2 => branch_type, with_branch_type: bool;
    }
}

register! {
    /// CPUID.(EAX=07H, ECX=01H):EAX, the bit a PMU driver reads (SDM Vol.
    /// 2A Table 3-8, "Structured Extended Feature Enumeration Sub-leaf";
    /// Linux `X86_FEATURE_ARCH_PERFMON_EXT`, word 12 bit 8).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct Leaf07Sub1Eax(u32): from_bits {
        /// ArchPerfmonExt (bit 8): CPUID leaf 23H, "Architectural
        /// Performance Monitoring Extended Leaf", exists.
        ARCH_PERFMON_EXT: 8 => arch_perfmon_ext, with_arch_perfmon_ext: bool;
    }
}

register! {
    /// CPUID.0BH:EBX, extended topology (SDM Vol. 2A Table 3-8, "Extended
    /// Topology Enumeration Leaf").
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct Leaf0BEbx(u32): from_bits {
        /// Logical processors at this level (bits 15:0); 0: the leaf is
        /// not valid.
        LOGICAL_PROCESSORS: 0..=15 => logical_processors, with_logical_processors: u16;
    }
}

register! {
    /// CPUID.1AH:EAX, the hybrid core's type (SDM Vol. 2A Table 3-8,
    /// "Hybrid Information Enumeration Leaf").
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct Leaf1AEax(u32): from_bits {
        /// Core type (bits 31:24): 20H Atom, 40H Core.
        CORE_TYPE: 24..=31 => core_type, with_core_type: u8;
    }
}

register! {
    /// CPUID.23H.00H:EAX, the valid sub-leaves of leaf 23H (bit n: sub-leaf
    /// n is valid; Intel ISE "Architectural Performance Monitoring Extended
    /// Leaf"; Linux `ARCH_PERFMON_NUM_COUNTER_LEAF` is bit 1, after its fix
    /// "perf/x86/intel: Fix ARCH_PERFMON_NUM_COUNTER_LEAF", which had read
    /// bit 0). The sub-leaves detection reads.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct Leaf23Subleaves(u32): from_bits {
        /// Sub-leaf 1, the general and fixed counters' bitmaps (bit 1).
        COUNTERS: 1 => counters, with_counters: bool;
        /// Sub-leaf 3, the architectural events' bitmap (bit 3).
        EVENTS: 3 => events, with_events: bool;
    }
}

/// Whether bit `i` of a CPUID bitmap (a leaf 23H bitmap, leaf 0AH's fixed
/// counters) is set; `false` past bit 31.
pub(crate) const fn bitmap_has(bitmap: u32, i: u8) -> bool {
    i < 32 && Field::new(i, 1).get(bitmap as u64) != 0
}

/// CPUID leaf 23H, "Architectural Performance Monitoring Extended Leaf"
/// (enumerated by CPUID.(EAX=07H, ECX=01H):EAX\[8\], [`Leaf07Sub1Eax`];
/// Intel ISE, chapter "Architectural Performance Monitoring Extensions";
/// SDM Vol. 3B "Architectural Performance Monitoring Version 6"), the
/// sub-leaves detection reads. Unlike leaf 0AH, which on a hybrid part
/// reports what every core type has, leaf 23H is each logical
/// processor's own view ("true view"): read on each CPU.
///
/// | sub-leaf | register | contents |
/// |---|---|---|
/// | 0 | EAX | the valid sub-leaves ([`Leaf23Subleaves`]) |
/// | 1 | EAX | general counter n exists iff bit n is set (a bitmap: it may have holes) |
/// | 1 | EBX | fixed counter i exists iff bit i is set (Lunar Lake's Skymont: 77H, fixed counters 0-2 and 4-6) |
/// | 3 | EAX | architectural event k is supported iff bit k is set: the opposite sense of CPUID.0AH:EBX, whose set bit says "not available" |
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Leaf23 {
    /// Sub-leaf 0, EAX.
    pub subleaves: Leaf23Subleaves,
    /// Sub-leaf 1, EAX (general counters) and EBX (fixed counters); read
    /// only where sub-leaf 1 is valid, 0 otherwise.
    pub counters: [u32; 2],
    /// Sub-leaf 3, EAX; read only where sub-leaf 3 is valid, 0 otherwise.
    pub events: u32,
}

impl Leaf23 {
    /// The general counters' bitmap, where sub-leaf 1 is valid.
    pub const fn general(self) -> Option<u32> {
        if self.subleaves.counters() {
            Some(self.counters[0])
        } else {
            None
        }
    }

    /// The fixed counters' bitmap, where sub-leaf 1 is valid.
    pub const fn fixed(self) -> Option<u32> {
        if self.subleaves.counters() {
            Some(self.counters[1])
        } else {
            None
        }
    }

    /// Whether architectural event `k` (its bit, as in CPUID.0AH:EBX) is
    /// supported, where sub-leaf 3 is valid.
    pub const fn event_supported(self, k: u8) -> Option<bool> {
        if self.subleaves.events() {
            Some(bitmap_has(self.events, k))
        } else {
            None
        }
    }
}

register! {
    /// `IA32_PERF_CAPABILITIES` (SDM Vol. 3B "Performance Monitoring
    /// Capabilities"); only what the driver uses.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct PerfCapabilities(u64): from_bits {
        /// `LBR_FMT`, bits 5:0: the legacy LBR records' format (SDM Vol. 3B
        /// "LBR Stack and Intel 64 Processors": 0 32-bit, 1 64-bit LIP, 2
        /// 64-bit EIP, 3 with flags, 4 with TSX flags, 5 with `LBR_INFO`,
        /// 6 with cycles in the TO records, 7 LIP with `LBR_INFO`); a part
        /// with architectural LBR enumerates it through CPUID instead
        /// ([`Leaf07Edx::arch_lbr`], leaf 1CH), and detection ignores this
        /// field there.
        LBR_FORMAT: 0..=5 => lbr_format, with_lbr_format: u8;
        /// `PEBS_TRAP`, bit 6: the PEBS assist is trap-like (the record is
        /// written after the instruction that caused it retired; its RIP
        /// field is the next instruction's).
        PEBS_TRAP: 6 => pebs_trap, with_pebs_trap: bool;
        /// `PEBS_ARCH_REG`, bit 7: the record saves the architectural
        /// registers.
        PEBS_ARCH_REG: 7 => pebs_arch_regs, with_pebs_arch_regs: bool;
        /// `PEBS_REC_FMT`, bits 11:8: the PEBS record format (1 Nehalem, 2
        /// Haswell, 3 Skylake, 4 Ice Lake, 5; 0 Core 2's).
        PEBS_FORMAT: 8..=11 => pebs_format, with_pebs_format: u8;
        /// `FW_WRITE`, bit 13: the `IA32_A_PMCx` full-width aliases exist.
        FULL_WIDTH_WRITE: 13 => full_width_write, with_full_width_write: bool;
        /// `PEBS_BASELINE`, bit 14: adaptive PEBS (`MSR_PEBS_DATA_CFG`),
        /// and PEBS on every general and fixed counter (`IA32_PEBS_ENABLE`
        /// bit n for general counter n, bit 32 + i for fixed counter i).
        PEBS_BASELINE: 14 => pebs_baseline, with_pebs_baseline: bool;
    }
}

register! {
    /// CPUID Fn8000_0001_ECX, the AMD feature bits a PMU driver reads (AMD64
    /// APM Vol. 3 Appendix E; Linux `cpufeatures.h` names the same bits
    /// `PERFCTR_CORE`, `PERFCTR_NB`, `PERFCTR_LLC`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct Leaf80000001Ecx(u32): from_bits {
        /// IBS (bit 10): instruction-based sampling.
        IBS: 10 => ibs, with_ibs: bool;
        /// PerfCtrExtCore (bit 23): six core counters at `C001_0200H`
        /// (`PERF_CTL0`) onwards, the first four aliasing the legacy ones.
        PERF_CTR_EXT_CORE: 23 => perf_ctr_ext_core, with_perf_ctr_ext_core: bool;
        /// PerfCtrExtNB (bit 24): northbridge (data fabric) counters.
        PERF_CTR_EXT_NB: 24 => perf_ctr_ext_nb, with_perf_ctr_ext_nb: bool;
        /// PerfCtrExtLLC (bit 28): last-level cache counters.
        PERF_CTR_EXT_LLC: 28 => perf_ctr_ext_llc, with_perf_ctr_ext_llc: bool;
    }
}

register! {
    /// CPUID Fn8000_0022_EAX, "Extended Performance Monitoring and Debug"
    /// (AMD64 APM Vol. 3 Appendix E; Linux `scattered.c`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct Leaf80000022Eax(u32): from_bits {
        /// PerfMonV2 (bit 0): `PerfCntrGlobalCtl`, `PerfCntrGlobalStatus`
        /// and its clear and set registers exist.
        PERFMON_V2: 0 => perfmon_v2, with_perfmon_v2: bool;
        /// LbrExtV2 (bit 1): the version 2 last-branch-record stack.
        LBR_EXT_V2: 1 => lbr_ext_v2, with_lbr_ext_v2: bool;
        /// LbrAndPmcFreeze (bit 2): the counters and LBRs freeze on a PMI.
        LBR_AND_PMC_FREEZE: 2 => lbr_and_pmc_freeze, with_lbr_and_pmc_freeze: bool;
    }
}

register! {
    /// CPUID Fn8000_0022_EBX (AMD64 APM Vol. 3 Appendix E; Linux's `union
    /// cpuid_0x80000022_ebx`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct Leaf80000022Ebx(u32): from_bits {
        /// NumPerfCtrCore (bits 3:0): the core counters.
        NUM_PERF_CTR_CORE: 0..=3 => num_perf_ctr_core, with_num_perf_ctr_core: u8;
        /// LbrV2StackSize (bits 9:4).
        LBR_V2_STACK_SIZE: 4..=9 => lbr_v2_stack_size, with_lbr_v2_stack_size: u8;
        /// NumPerfCtrNB (bits 15:10): data-fabric counters.
        NUM_PERF_CTR_NB: 10..=15 => num_perf_ctr_nb, with_num_perf_ctr_nb: u8;
        /// NumPerfCtrUmc (bits 21:16): memory-controller counters.
        NUM_PERF_CTR_UMC: 16..=21 => num_perf_ctr_umc, with_num_perf_ctr_umc: u8;
    }
}

/// CPUID leaf 0AH, "Architectural Performance Monitoring Leaf" (SDM Vol. 2A
/// CPUID; Vol. 3B "Architectural Performance Monitoring"): EAX\[7:0\]
/// version, \[15:8\] general counters per logical processor, \[23:16\]
/// their width, \[31:24\] the length of EBX's vector; EBX bit k set:
/// architectural event k NOT available; ECX the fixed counters' bitmap
/// (v5); EDX\[4:0\] contiguous fixed counters, \[12:5\] their width, \[15\]
/// AnyThread deprecated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Leaf0A {
    /// EAX, EBX, ECX, EDX.
    pub regs: [u32; 4],
}

register! {
    /// CPUID.0AH:EAX.
    #[derive(Clone, Copy)]
    struct Leaf0AEax(u32) {
        /// Version ID, bits 7:0.
        VERSION: 0..=7 => version, with_version: u8;
        /// General counters per logical processor, bits 15:8.
        GENERAL: 8..=15 => general, with_general: u8;
        /// Their width, bits 23:16.
        GENERAL_WIDTH: 16..=23 => general_width, with_general_width: u8;
        /// The length of EBX's event vector, bits 31:24.
        VECTOR_LENGTH: 24..=31 => vector_length, with_vector_length: u8;
    }
}

register! {
    /// CPUID.0AH:EDX.
    #[derive(Clone, Copy)]
    struct Leaf0AEdx(u32) {
        /// Contiguous fixed counters, bits 4:0.
        FIXED: 0..=4 => fixed, with_fixed: u8;
        /// Their width, bits 12:5.
        FIXED_WIDTH: 5..=12 => fixed_width, with_fixed_width: u8;
        /// AnyThread deprecated, bit 15.
        ANY_DEPRECATED: 15 => any_deprecated, with_any_deprecated: bool;
    }
}

/// The fields of a CPUID leaf 0AH to build ([`Leaf0A::build`]): what a VMM
/// shows a guest (`pmu::virt::archperf`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Leaf0AFields {
    /// EAX\[7:0\], the version ID.
    pub version: u8,
    /// EAX\[15:8\], general counters per logical processor.
    pub general: u8,
    /// EAX\[23:16\], their width.
    pub general_width: u8,
    /// EAX\[31:24\], the length of EBX's event vector.
    pub vector_length: u8,
    /// EBX: bit k set, architectural event k NOT available.
    pub unavailable: u32,
    /// ECX: the fixed counters' bitmap (v5).
    pub fixed_bitmap: u32,
    /// EDX\[4:0\], contiguous fixed counters.
    pub fixed: u8,
    /// EDX\[12:5\], their width.
    pub fixed_width: u8,
    /// EDX\[15\], AnyThread deprecated.
    pub any_thread_deprecated: bool,
}

impl Leaf0A {
    /// The leaf with `f`'s fields (a fixed-counter count above 31 is cut
    /// to EDX\[4:0\]).
    pub const fn build(f: Leaf0AFields) -> Leaf0A {
        let eax = Leaf0AEax(0)
            .with_version(f.version)
            .with_general(f.general)
            .with_general_width(f.general_width)
            .with_vector_length(f.vector_length);
        let edx = Leaf0AEdx(0)
            .with_fixed(f.fixed)
            .with_fixed_width(f.fixed_width)
            .with_any_deprecated(f.any_thread_deprecated);
        Leaf0A {
            regs: [eax.bits(), f.unavailable, f.fixed_bitmap, edx.bits()],
        }
    }

    const fn eax(self) -> Leaf0AEax {
        Leaf0AEax(self.regs[0])
    }

    const fn edx(self) -> Leaf0AEdx {
        Leaf0AEdx(self.regs[3])
    }

    /// The version ID (0: no architectural PMU).
    pub const fn version(self) -> u8 {
        self.eax().version()
    }

    /// General counters per logical processor.
    pub const fn general(self) -> u8 {
        self.eax().general()
    }

    /// Their width in bits.
    pub const fn general_width(self) -> u8 {
        self.eax().general_width()
    }

    /// The length of EBX's event vector.
    pub const fn vector_length(self) -> u8 {
        self.eax().vector_length()
    }

    /// Architectural event `k` (the EBX bit of [`ArchEvent`](crate::arch::archperf::ArchEvent))
    /// is available: within the vector and its EBX bit clear.
    pub const fn event_available(self, k: u8) -> bool {
        k < self.vector_length() && k < 32 && self.regs[1] & (1 << k) == 0
    }

    /// The available architectural events as a bitmap (bit k: event k
    /// available, as in CPUID.23H.03H:EAX): EBX's clear bits within the
    /// vector.
    pub const fn available_events(self) -> u32 {
        let n = self.vector_length();
        !self.regs[1] & Field::new(0, if n > 32 { 32 } else { n }).mask() as u32
    }

    /// Contiguous fixed counters (EDX\[4:0\]; v2+).
    pub const fn fixed_contiguous(self) -> u8 {
        if self.version() < 2 {
            0
        } else {
            self.edx().fixed()
        }
    }

    /// The fixed counters' width (v2+).
    pub const fn fixed_width(self) -> u8 {
        if self.version() < 2 {
            0
        } else {
            self.edx().fixed_width()
        }
    }

    /// Fixed counter `i` exists: `ECX[i] || EDX[4:0] > i` (SDM: the v5
    /// bitmap, or the contiguous count).
    pub const fn fixed_supported(self, i: u8) -> bool {
        bitmap_has(self.fixed_bitmap(), i)
    }

    /// The general counters as a bitmap: counters 0 to [`Leaf0A::general`]
    /// - 1 (leaf 0AH counts them; leaf 23H, [`Leaf23`], maps them).
    pub const fn general_bitmap(self) -> u32 {
        let n = self.general();
        Field::new(0, if n > 32 { 32 } else { n }).mask() as u32
    }

    /// The fixed counters as a bitmap: ECX (version 5 and later) or the
    /// first EDX\[4:0\] (SDM: fixed counter i exists iff `ECX[i] ||
    /// EDX[4:0] > i`).
    pub const fn fixed_bitmap(self) -> u32 {
        let ecx = if self.version() >= 5 { self.regs[2] } else { 0 };
        ecx | Field::new(0, self.fixed_contiguous()).mask() as u32
    }

    /// AnyThread is deprecated (EDX\[15\]).
    pub const fn any_thread_deprecated(self) -> bool {
        self.edx().any_deprecated()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The positions against the SDM's own examples and figures.
    #[test]
    fn fields_sit_where_the_sdm_puts_them() {
        let misc = MiscEnable::from_bits(1 << 7 | 1 << 12);
        assert!(misc.perf_mon_available() && misc.pebs_unavailable() && !misc.bts_unavailable());
        // A Pentium D 9xx: family 0FH, model 6, stepping 5.
        let sig = Leaf01Eax::from_bits(0x0000_0F65);
        assert_eq!((sig.family(), sig.model(), sig.stepping()), (0xF, 6, 5));
        // Haswell: extended model 3, model 0CH.
        let hsw = Leaf01Eax::from_bits(0x0003_06C3);
        assert_eq!(
            (hsw.extended_model(), hsw.model(), hsw.family()),
            (3, 0xC, 6)
        );
        assert_eq!(Leaf01Eax::from_bits(0x0010_0F00).extended_family(), 1);
        let ebx = Leaf01Ebx::from_bits(0x0302_0800);
        assert_eq!((ebx.initial_apic_id(), ebx.logical_processors()), (3, 2));
        assert!(Leaf01Ecx::from_bits(1 << 21).x2apic());
        let edx = Leaf01Edx::from_bits(1 << 5 | 1 << 28);
        assert!(edx.msr() && edx.htt() && !edx.ds());
        // AMD: PerfCtrExtCore is ECX bit 23; a Zen 4's 8000_0022H says
        // PerfMonV2 and six core counters (EBX[3:0]), LBR stack 16.
        assert!(Leaf80000001Ecx::from_bits(1 << 23).perf_ctr_ext_core());
        assert!(!Leaf80000001Ecx::from_bits(1 << 24).perf_ctr_ext_core());
        assert!(Leaf80000022Eax::from_bits(0b111).perfmon_v2());
        let ebx = Leaf80000022Ebx::from_bits(6 | 16 << 4 | 3 << 10);
        assert_eq!(
            (
                ebx.num_perf_ctr_core(),
                ebx.lbr_v2_stack_size(),
                ebx.num_perf_ctr_nb()
            ),
            (6, 16, 3)
        );
    }
}

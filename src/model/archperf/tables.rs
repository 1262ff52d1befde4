//! The model's own constants, transcribed from the manuals (not from the
//! driver): MSR addresses (SDM Vol. 4 Table 2-2, "IA-32 Architectural MSRs"),
//! the bit fields of the architectural performance-monitoring MSRs (SDM Vol.
//! 3B 20.2.1-20.2.6) and the pre-defined architectural events (SDM Vol. 3B
//! Table 20-1).

/// IA32_PMC0 (C1H); IA32_PMCx is at C1H + x (SDM Vol. 4 Table 2-2).
pub const IA32_PMC0: u32 = 0xC1;
/// IA32_PERFEVTSEL0 (186H); IA32_PERFEVTSELx is at 186H + x.
pub const IA32_PERFEVTSEL0: u32 = 0x186;
/// IA32_DEBUGCTL (1D9H).
pub const IA32_DEBUGCTL: u32 = 0x1D9;
/// IA32_FIXED_CTR0 (309H); IA32_FIXED_CTRx is at 309H + x.
pub const IA32_FIXED_CTR0: u32 = 0x309;
/// IA32_PERF_CAPABILITIES (345H), present when CPUID.01H:ECX.PDCM\[15\] = 1.
pub const IA32_PERF_CAPABILITIES: u32 = 0x345;
/// IA32_FIXED_CTR_CTRL (38DH).
pub const IA32_FIXED_CTR_CTRL: u32 = 0x38D;
/// IA32_PERF_GLOBAL_STATUS (38EH), read-only.
pub const IA32_PERF_GLOBAL_STATUS: u32 = 0x38E;
/// IA32_PERF_GLOBAL_CTRL (38FH).
pub const IA32_PERF_GLOBAL_CTRL: u32 = 0x38F;
/// IA32_PERF_GLOBAL_OVF_CTRL (390H); from version 4 named
/// IA32_PERF_GLOBAL_STATUS_RESET, same address (SDM 20.2.4.2).
pub const IA32_PERF_GLOBAL_OVF_CTRL: u32 = 0x390;
/// IA32_PERF_GLOBAL_STATUS_RESET: the version-4 name of 390H.
pub const IA32_PERF_GLOBAL_STATUS_RESET: u32 = IA32_PERF_GLOBAL_OVF_CTRL;
/// IA32_PERF_GLOBAL_STATUS_SET (391H), version 4 and later.
pub const IA32_PERF_GLOBAL_STATUS_SET: u32 = 0x391;
/// IA32_PERF_GLOBAL_INUSE (392H), version 4 and later, read-only.
pub const IA32_PERF_GLOBAL_INUSE: u32 = 0x392;
/// IA32_A_PMC0 (4C1H): the full-width alias of IA32_PMC0, present when
/// IA32_PERF_CAPABILITIES.FW_WRITE\[13\] = 1 (SDM 20.2.6).
pub const IA32_A_PMC0: u32 = 0x4C1;
/// IA32_MISC_ENABLE (1A0H; Vol. 4 Table 2-2): its performance-monitoring
/// bits ([`misc_enable`]).
pub const IA32_MISC_ENABLE: u32 = 0x1A0;
/// IA32_PEBS_ENABLE (3F1H; SDM Vol. 3B "Layout of IA32_PEBS_ENABLE MSR").
pub const IA32_PEBS_ENABLE: u32 = 0x3F1;
/// MSR_PEBS_DATA_CFG (3F2H), with PEBS baseline (adaptive PEBS).
pub const MSR_PEBS_DATA_CFG: u32 = 0x3F2;
/// MSR_PEBS_LD_LAT (3F6H): the load-latency threshold.
pub const MSR_PEBS_LD_LAT: u32 = 0x3F6;
/// IA32_DS_AREA (600H): the DS save area's linear address.
pub const IA32_DS_AREA: u32 = 0x600;

/// The most general-purpose counters the model has: the architectural MSR
/// table defines IA32_PMC0-7 (C1H-C8H), IA32_PERFEVTSEL0-7 (186H-18DH) and
/// IA32_A_PMC0-7 (4C1H-4C8H). A larger `Config::gp_counters` is clamped.
pub const MAX_GP: usize = 8;
/// The most fixed-function counters the model has: IA32_FIXED_CTR_CTRL has
/// sixteen 4-bit fields. A fixed counter at a higher index is absent.
pub const MAX_FIXED: usize = 16;
/// Counter slots: general-purpose counters `0..MAX_GP`, then the fixed ones.
pub(super) const SLOTS: usize = MAX_GP + MAX_FIXED;

/// IA32_PERFEVTSELx fields (SDM 20.2.1.1 and Figure "Layout of
/// IA32_PERFEVTSELx MSRs"; AnyThread from version 3, SDM 20.2.3).
pub mod evtsel {
    /// Event select, bits 7:0.
    pub const EVENT_SELECT: u64 = 0xFF;
    /// Unit mask, bits 15:8.
    pub const UMASK: u64 = 0xFF << 8;
    /// USR (bit 16): count at privilege levels 1, 2 and 3.
    pub const USR: u64 = 1 << 16;
    /// OS (bit 17): count at privilege level 0.
    pub const OS: u64 = 1 << 17;
    /// E (bit 18): edge detect.
    pub const EDGE: u64 = 1 << 18;
    /// PC (bit 19): pin control.
    pub const PC: u64 = 1 << 19;
    /// INT (bit 20): APIC interrupt on overflow.
    pub const INT: u64 = 1 << 20;
    /// AnyThread (bit 21), versions 3 and 4 only in the model.
    pub const ANY_THREAD: u64 = 1 << 21;
    /// EN (bit 22): enable the counter.
    pub const EN: u64 = 1 << 22;
    /// INV (bit 23): invert the CMASK comparison.
    pub const INV: u64 = 1 << 23;
    /// Adaptive_Record (bit 34, PEBS baseline): the counter's PEBS records
    /// carry the groups of MSR_PEBS_DATA_CFG.
    pub const ADAPTIVE: u64 = 1 << 34;
    /// Shift of CMASK.
    pub const CMASK_SHIFT: u32 = 24;
    /// CMASK, bits 31:24.
    pub const CMASK: u64 = 0xFF << CMASK_SHIFT;
    /// Bits 63:32, reserved in versions 1-5.
    pub const RESERVED_HIGH: u64 = !0xFFFF_FFFF;
}

/// IA32_FIXED_CTR_CTRL: a 4-bit field per fixed counter, field `i` at bits
/// 4i+3:4i (SDM 20.2.2, 20.2.3).
pub mod fixed_ctrl {
    /// Bit 0 of a field: count at ring 0 (ENABLE = 01b: OS).
    pub const OS: u64 = 1 << 0;
    /// Bit 1 of a field: count at ring > 0 (ENABLE = 10b: User).
    pub const USR: u64 = 1 << 1;
    /// Bit 2 of a field: AnyThread (version 3 and later; deprecated in 5).
    pub const ANY_THREAD: u64 = 1 << 2;
    /// Bit 3 of a field: PMI on overflow.
    pub const PMI: u64 = 1 << 3;
    /// `bits` placed in the field of fixed counter `i`.
    pub const fn field(i: usize, bits: u64) -> u64 {
        bits << (4 * i)
    }
    /// Fixed counter `i`'s Adaptive_Record bit, 32 + 4i (PEBS baseline;
    /// fixed counters 0-7).
    pub const fn adaptive(i: usize) -> u64 {
        if i < 8 { 1 << (32 + 4 * i) } else { 0 }
    }
}

/// IA32_PERF_GLOBAL_STATUS bits beyond the per-counter overflow bits (bit
/// `i` for IA32_PMCi, bit 32 + `i` for IA32_FIXED_CTRi): SDM 20.2.2, 20.2.4.1
/// and Vol. 4 Table 2-2.
pub mod global_status {
    /// The first fixed-counter bit.
    pub const FIXED_SHIFT: u32 = 32;
    /// Bit 55, Trace_ToPA_PMI (version 4).
    pub const TRACE_TOPA_PMI: u64 = 1 << 55;
    /// Bit 58, LBR_Frz (version 4).
    pub const LBR_FRZ: u64 = 1 << 58;
    /// Bit 59, CTR_Frz (version 4): while set, no counter counts.
    pub const CTR_FRZ: u64 = 1 << 59;
    /// Bit 60, ASCI (version 4).
    pub const ASCI: u64 = 1 << 60;
    /// Bit 61, Ovf_Uncore (version 3).
    pub const OVF_UNCORE: u64 = 1 << 61;
    /// Bit 62, OvfBuf (DS buffer overflow).
    pub const OVF_BUF: u64 = 1 << 62;
    /// Bit 63, CondChgd.
    pub const COND_CHGD: u64 = 1 << 63;
}

/// IA32_DEBUGCTL bits (SDM Vol. 4 Table 2-2, 1D9H; Vol. 3B 18.4.1).
pub mod debugctl {
    /// Bit 0, LBR.
    pub const LBR: u64 = 1 << 0;
    /// Bit 1, BTF.
    pub const BTF: u64 = 1 << 1;
    /// Bit 6, TR.
    pub const TR: u64 = 1 << 6;
    /// Bit 7, BTS.
    pub const BTS: u64 = 1 << 7;
    /// Bit 8, BTINT.
    pub const BTINT: u64 = 1 << 8;
    /// Bit 9, BTS_OFF_OS.
    pub const BTS_OFF_OS: u64 = 1 << 9;
    /// Bit 10, BTS_OFF_USR.
    pub const BTS_OFF_USR: u64 = 1 << 10;
    /// Bit 11, FREEZE_LBRS_ON_PMI (version 2 and later).
    pub const FREEZE_LBRS_ON_PMI: u64 = 1 << 11;
    /// Bit 12, FREEZE_PERFMON_ON_PMI (version 2 and later).
    pub const FREEZE_PERFMON_ON_PMI: u64 = 1 << 12;
    /// The bits the model accepts on every version.
    pub const BASE: u64 = LBR | BTF | TR | BTS | BTINT | BTS_OFF_OS | BTS_OFF_USR;
}

/// IA32_PERF_CAPABILITIES bits the model reports (SDM Vol. 3B "Performance
/// Monitoring Capabilities", Vol. 4 Table 2-2, 345H).
pub mod perf_capabilities {
    /// Bit 6, PEBS_TRAP: the PEBS assist is trap-like.
    pub const PEBS_TRAP: u64 = 1 << 6;
    /// Bit 7, PEBS_ARCH_REG: the records save the architectural registers.
    pub const PEBS_ARCH_REG: u64 = 1 << 7;
    /// Bits 5:0, LBR_FMT: the legacy LBR records' format.
    pub const LBR_FORMAT: u64 = 0x3F;
    /// Bits 11:8, PEBS_REC_FMT: the record format's shift.
    pub const PEBS_FORMAT_SHIFT: u32 = 8;
    /// Bit 13, FW_WRITE: IA32_A_PMCx exist (SDM 20.2.6).
    pub const FW_WRITE: u64 = 1 << 13;
    /// Bit 14, PEBS_BASELINE: adaptive PEBS, PEBS on every counter.
    pub const PEBS_BASELINE: u64 = 1 << 14;
}

/// IA32_MISC_ENABLE's performance-monitoring bits (Vol. 4 Table 2-2, 1A0H).
pub mod misc_enable {
    /// Bit 7: performance monitoring available (read-only).
    pub const PERF_MON_AVAILABLE: u64 = 1 << 7;
    /// Bit 11: branch trace storage unavailable (read-only).
    pub const BTS_UNAVAILABLE: u64 = 1 << 11;
    /// Bit 12: PEBS unavailable (read-only).
    pub const PEBS_UNAVAILABLE: u64 = 1 << 12;
}

/// IA32_PEBS_ENABLE (SDM Vol. 3B, "Layout of IA32_PEBS_ENABLE MSR" of
/// Nehalem, Skylake and Ice Lake): bit n `PEBS_EN_PMCn`; bits 32 + n
/// `LL_EN_PMCn` (load latency, before PEBS baseline) or, with PEBS
/// baseline, `PEBS_EN_FIXEDn`.
pub mod pebs_enable {
    /// The first of the high bits (LL_EN_PMC0 or PEBS_EN_FIXED0).
    pub const HIGH_SHIFT: u32 = 32;
    /// General counters with a PEBS enable before PEBS baseline (PMC0-3).
    pub const LEGACY_COUNTERS: usize = 4;
}

/// MSR_PEBS_DATA_CFG's groups (SDM Vol. 3B "MSR_PEBS_DATA_CFG").
pub mod data_cfg {
    /// Bit 0: the memory info group.
    pub const MEMORY: u64 = 1 << 0;
    /// Bit 1: the GPR group.
    pub const GPRS: u64 = 1 << 1;
    /// Bit 2: the XMM group (not modelled: reserved in the model).
    pub const XMMS: u64 = 1 << 2;
    /// Bit 3: the LBR group (not modelled: reserved in the model).
    pub const LBRS: u64 = 1 << 3;
}

/// MSR_PEBS_LD_LAT: the threshold, bits 15:0.
pub const LD_LAT_THRESHOLD: u64 = 0xFFFF;

/// The 64-bit DS management area's offsets (SDM Vol. 3B "64-bit Format of
/// the DS Save Area"), and the PEBS records' words.
pub mod ds {
    /// PEBS buffer base.
    pub const PEBS_BASE: u64 = 0x20;
    /// PEBS index.
    pub const PEBS_INDEX: u64 = 0x28;
    /// PEBS absolute maximum.
    pub const PEBS_MAXIMUM: u64 = 0x30;
    /// PEBS interrupt threshold.
    pub const PEBS_THRESHOLD: u64 = 0x38;
    /// The first PEBS counter reset value: general counter n's at
    /// 40H + 8n.
    pub const COUNTER_RESET: u64 = 0x40;
    /// Where fixed counter i's reset value is, as a counter index from
    /// 40H: after 8 general counters' with record formats up to 4, after
    /// 32 with format 5 (Linux: "For the PEBS format 5, the Counter Reset
    /// fields allocation for 32 general-purpose counters followed by 16
    /// fixed-function counters").
    pub const fn fixed_reset_index(format: u8, i: usize) -> usize {
        if format >= 5 { 32 + i } else { 8 + i }
    }
    /// Formats 1-3: the words from RFLAGS to the latency (SDM "PEBS Record
    /// Format for Intel Core i7 Processor Family": RFLAGS, RIP, RAX, RBX,
    /// RCX, RDX, RSI, RDI, RBP, RSP, R8-R15, IA32_PERF_GLOBAL_STATUS, Data
    /// Linear Address, Data Source Encoding, Latency value).
    pub const NEHALEM_WORDS: usize = 22;
    /// Format 2 adds EventingIP (B0H) and TX abort information (B8H).
    pub const HASWELL_WORDS: usize = 24;
    /// Format 3 adds the TSC (C0H).
    pub const SKYLAKE_WORDS: usize = 25;
    /// The adaptive record's basic group: Record Format and Size,
    /// Instruction Pointer (EventingIP), Applicable Counters, TSC.
    pub const BASIC_WORDS: usize = 4;
    /// The memory group: address, auxiliary info, latency, TSX.
    pub const MEMORY_WORDS: usize = 4;
    /// The GPR group: RFLAGS, RIP, RAX, RCX, RDX, RBX, RSP, RBP, RSI, RDI,
    /// R8-R15.
    pub const GPR_WORDS: usize = 18;
    /// The record size's shift in the basic group's first word (63:48).
    pub const SIZE_SHIFT: u32 = 48;
}

/// RDPMC's ECX (SDM Vol. 2B, RDPMC).
pub mod rdpmc {
    /// ECX\[30\]: read a fixed-function counter.
    pub const FIXED: u32 = 1 << 30;
    /// ECX\[31\]: "fast" read (only without architectural performance
    /// monitoring).
    pub const FAST: u32 = 1 << 31;
    /// ECX\[29:0\]: the counter index.
    pub const INDEX: u32 = (1 << 30) - 1;
}

/// The pre-defined architectural performance events (SDM Vol. 3B Table 20-1,
/// "UMask and Event Select Encodings for Pre-Defined Architectural
/// Performance Events"), in CPUID.0AH:EBX bit order.
/// The pre-defined architectural events: the driver's vocabulary type. The
/// model's encoding of each ([`Encoding`]) is its own transcription.
pub use crate::arch::archperf::ArchEvent;

/// The model's own encoding of each architectural event (SDM Vol. 3B Table
/// 20-1), transcribed independently of the driver's.
pub trait Encoding: Copy + crate::sealed::Sealed {
    /// The event's bit in CPUID.0AH:EBX (set: not available).
    fn cpuid_bit(self) -> u32;
    /// The event select (PERFEVTSEL bits 7:0).
    fn select_code(self) -> u8;
    /// The unit mask (PERFEVTSEL bits 15:8).
    fn umask_code(self) -> u8;
}

impl crate::sealed::Sealed for ArchEvent {}

impl Encoding for ArchEvent {
    fn cpuid_bit(self) -> u32 {
        match self {
            Self::CoreCycles => 0,
            Self::InstructionsRetired => 1,
            Self::ReferenceCycles => 2,
            Self::LlcReferences => 3,
            Self::LlcMisses => 4,
            Self::BranchInstructionsRetired => 5,
            Self::BranchMissesRetired => 6,
            Self::TopdownSlots => 7,
        }
    }

    /// The event select (PERFEVTSEL bits 7:0).
    fn select_code(self) -> u8 {
        match self {
            Self::CoreCycles | Self::ReferenceCycles => 0x3C,
            Self::InstructionsRetired => 0xC0,
            Self::LlcReferences | Self::LlcMisses => 0x2E,
            Self::BranchInstructionsRetired => 0xC4,
            Self::BranchMissesRetired => 0xC5,
            Self::TopdownSlots => 0xA4,
        }
    }

    /// The unit mask (PERFEVTSEL bits 15:8).
    fn umask_code(self) -> u8 {
        match self {
            Self::CoreCycles
            | Self::InstructionsRetired
            | Self::BranchInstructionsRetired
            | Self::BranchMissesRetired => 0x00,
            Self::ReferenceCycles | Self::TopdownSlots => 0x01,
            Self::LlcReferences => 0x4F,
            Self::LlcMisses => 0x41,
        }
    }
}

/// The architectural event each fixed counter counts (SDM 20.2.2, Table
/// "Association of Fixed-Function Performance Counters with Architectural
/// Performance Events"; fixed counter 3 counts TOPDOWN.SLOTS, the Topdown
/// Slots event of Table 20-1, on the parts that have it): 0 instructions
/// retired, 1 core cycles, 2 reference cycles, 3 topdown slots. Fixed
/// counters 4 and up count nothing in the model.
pub const FIXED_EVENTS: [ArchEvent; 4] = [
    ArchEvent::InstructionsRetired,
    ArchEvent::CoreCycles,
    ArchEvent::ReferenceCycles,
    ArchEvent::TopdownSlots,
];

/// The last branch records' MSRs and bits, as the model has them (SDM
/// Vol. 3B "Last Branch Records" of Nehalem, Haswell and Skylake, and
/// "Architectural Last Branch Records"; Vol. 4's model-specific MSR tables
/// of those generations), transcribed for the model.
pub mod lbr {
    /// MSR_LBR_SELECT (1C8H).
    pub const SELECT: u32 = 0x1C8;
    /// MSR_LASTBRANCH_TOS (1C9H).
    pub const TOS: u32 = 0x1C9;
    /// MSR_LASTBRANCH_0_FROM_IP (680H): record x at 680H + x.
    pub const FROM_IP: u32 = 0x680;
    /// MSR_LASTBRANCH_0_TO_IP (6C0H).
    pub const TO_IP: u32 = 0x6C0;
    /// MSR_LBR_INFO_0 (DC0H).
    pub const INFO: u32 = 0xDC0;
    /// IA32_LBR_CTL (14CEH).
    pub const CTL: u32 = 0x14CE;
    /// IA32_LBR_DEPTH (14CFH).
    pub const DEPTH: u32 = 0x14CF;
    /// IA32_LBR_0_FROM_IP (1500H).
    pub const ARCH_FROM_IP: u32 = 0x1500;
    /// IA32_LBR_0_TO_IP (1600H).
    pub const ARCH_TO_IP: u32 = 0x1600;
    /// IA32_LBR_0_INFO (1200H).
    pub const ARCH_INFO: u32 = 0x1200;
    /// The most records the model keeps (architectural LBR's deepest:
    /// CPUID.1CH:EAX\[7\], 64).
    pub const MAX_RECORDS: usize = 64;

    /// MSR_LBR_SELECT's bits: a set bit suppresses (0-8).
    pub mod select {
        /// CPL_EQ_0: no branches ending in ring 0.
        pub const CPL_EQ_0: u64 = 1 << 0;
        /// CPL_NEQ_0: no branches ending in rings 1-3.
        pub const CPL_NEQ_0: u64 = 1 << 1;
        /// JCC.
        pub const JCC: u64 = 1 << 2;
        /// NEAR_REL_CALL.
        pub const NEAR_REL_CALL: u64 = 1 << 3;
        /// NEAR_IND_CALL.
        pub const NEAR_IND_CALL: u64 = 1 << 4;
        /// NEAR_RET.
        pub const NEAR_RET: u64 = 1 << 5;
        /// NEAR_IND_JMP.
        pub const NEAR_IND_JMP: u64 = 1 << 6;
        /// NEAR_REL_JMP.
        pub const NEAR_REL_JMP: u64 = 1 << 7;
        /// FAR_BRANCH.
        pub const FAR_BRANCH: u64 = 1 << 8;
        /// EN_CALLSTACK (Haswell and later): not a suppress bit.
        pub const EN_CALLSTACK: u64 = 1 << 9;
        /// Bits 8:0.
        pub const FILTERS: u64 = 0x1FF;
    }

    /// IA32_LBR_CTL's bits: a set bit records (16-22).
    pub mod ctl {
        /// LBREn.
        pub const LBREN: u64 = 1 << 0;
        /// OS.
        pub const OS: u64 = 1 << 1;
        /// USR.
        pub const USR: u64 = 1 << 2;
        /// CALL_STACK.
        pub const CALL_STACK: u64 = 1 << 3;
        /// COND.
        pub const COND: u64 = 1 << 16;
        /// NEAR_REL_JMP.
        pub const NEAR_REL_JMP: u64 = 1 << 17;
        /// NEAR_IND_JMP.
        pub const NEAR_IND_JMP: u64 = 1 << 18;
        /// NEAR_REL_CALL.
        pub const NEAR_REL_CALL: u64 = 1 << 19;
        /// NEAR_IND_CALL.
        pub const NEAR_IND_CALL: u64 = 1 << 20;
        /// NEAR_RET.
        pub const NEAR_RET: u64 = 1 << 21;
        /// OTHER_BRANCH.
        pub const OTHER_BRANCH: u64 = 1 << 22;
        /// Bits 22:16.
        pub const KINDS: u64 = 0x7F << 16;
    }

    /// The INFO words' bits (MSR_LBR_INFO_x of Skylake, IA32_LBR_x_INFO).
    pub mod info {
        /// CYC_CNT, bits 15:0.
        pub const CYCLES: u64 = 0xFFFF;
        /// BR_TYPE's shift (bits 59:56, architectural LBR).
        pub const BR_TYPE_SHIFT: u32 = 56;
        /// CYC_CNT_VALID, bit 60 (architectural LBR).
        pub const CYC_CNT_VALID: u64 = 1 << 60;
    }

    /// Architectural LBR's BR_TYPE encodings.
    pub mod br_type {
        /// JCC.
        pub const JCC: u64 = 0;
        /// NEAR_IND_JMP.
        pub const NEAR_IND_JMP: u64 = 1;
        /// NEAR_REL_JMP.
        pub const NEAR_REL_JMP: u64 = 2;
        /// NEAR_IND_CALL.
        pub const NEAR_IND_CALL: u64 = 3;
        /// NEAR_REL_CALL.
        pub const NEAR_REL_CALL: u64 = 4;
        /// NEAR_RET.
        pub const NEAR_RET: u64 = 5;
        /// Other branches: an encoding above the near ones (the model
        /// records 8 for them; Linux decodes such by instruction).
        pub const OTHER: u64 = 8;
    }
}

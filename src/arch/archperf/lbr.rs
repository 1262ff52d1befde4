//! Last branch records of the architectural PMU's processors (documented
//! on [`Lbr`]): the legacy LBR stack of the generations the crate drives
//! and architectural LBR, their registers' layouts, the record formats and
//! their decoding, the filters a kernel asks for ([`BranchFilter`]), and
//! the stack a sample carries ([`BranchStack`]).

use crate::access::{MsrBackend, MsrOps};
use crate::detect::ArchPerfCpu;
use crate::register::register;
use crate::sampling::CallChain;

/// `IA32_DEBUGCTL` ([`DebugCtl`]).
pub const IA32_DEBUGCTL: u32 = 0x1D9;
/// `MSR_LBR_SELECT` ([`LbrSelect`]; Nehalem and later).
pub const MSR_LBR_SELECT: u32 = 0x1C8;
/// `MSR_LASTBRANCH_TOS`: the index of the most recent record.
pub const MSR_LASTBRANCH_TOS: u32 = 0x1C9;
/// `MSR_LASTBRANCH_0_FROM_IP` (Nehalem and later); record x's is 680H + x.
pub const MSR_LASTBRANCH_0_FROM_IP: u32 = 0x680;
/// `MSR_LASTBRANCH_0_TO_IP`; record x's is 6C0H + x.
pub const MSR_LASTBRANCH_0_TO_IP: u32 = 0x6C0;
/// `MSR_LBR_INFO_0` (Skylake and later's legacy stack); record x's is
/// DC0H + x.
pub const MSR_LBR_INFO_0: u32 = 0xDC0;
/// `IA32_LBR_CTL` ([`LbrCtl`]; architectural LBR).
pub const IA32_LBR_CTL: u32 = 0x14CE;
/// `IA32_LBR_DEPTH` (architectural LBR): the records in use.
pub const IA32_LBR_DEPTH: u32 = 0x14CF;
/// `IA32_LBR_0_FROM_IP`; record x's is 1500H + x.
pub const IA32_LBR_0_FROM_IP: u32 = 0x1500;
/// `IA32_LBR_0_TO_IP`; record x's is 1600H + x.
pub const IA32_LBR_0_TO_IP: u32 = 0x1600;
/// `IA32_LBR_0_INFO` ([`LbrInfo`]); record x's is 1200H + x.
pub const IA32_LBR_0_INFO: u32 = 0x1200;

/// The most records a [`BranchStack`] holds: the deepest legacy stack
/// (Skylake's 32). Architectural LBR may offer 64; the driver asks for the
/// deepest depth the CPU supports up to this.
pub const MAX_BRANCHES: usize = 32;

register! {
    /// `IA32_DEBUGCTL` (1D9H), the bits the LBR uses (SDM Vol. 3B "Debug
    /// Control MSR"; Vol. 4 Table 2-2). The driver keeps the others as it
    /// finds them.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct DebugCtl(u64): from_bits {
        /// LBR, bit 0: the legacy stack records (architectural LBR is
        /// enabled by `IA32_LBR_CTL.LBREn` instead).
        pub LBR: 0 => lbr, with_lbr: bool;
        /// FREEZE_LBRS_ON_PMI, bit 11: a PMI request freezes the records
        /// (versions 2-3: the processor clears `LBR`; version 4 and
        /// architectural LBR: it sets `IA32_PERF_GLOBAL_STATUS.LBR_Frz`,
        /// SDM Vol. 3B "Freezing LBR and Performance Counters on PMI" and
        /// "Streamlined Freeze_LBRs_On_PMI Operation").
        pub FREEZE_LBRS_ON_PMI: 11 => freeze_lbrs_on_pmi, with_freeze_lbrs_on_pmi: bool;
    }
}

register! {
    /// `MSR_LBR_SELECT` (1C8H; SDM Vol. 3B "Filtering of Last Branch
    /// Records"): a set bit 0-8 *suppresses* that kind of branch; bit 9
    /// (Haswell and later) turns the stack into a call stack.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct LbrSelect(u64): from_bits {
        /// CPL_EQ_0, bit 0: do not record branches ending in ring 0.
        pub CPL_EQ_0: 0 => cpl_eq_0, with_cpl_eq_0: bool;
        /// CPL_NEQ_0, bit 1: do not record branches ending in rings 1-3.
        pub CPL_NEQ_0: 1 => cpl_neq_0, with_cpl_neq_0: bool;
        /// JCC, bit 2: do not record conditional branches.
        pub JCC: 2 => jcc, with_jcc: bool;
        /// NEAR_REL_CALL, bit 3.
        pub NEAR_REL_CALL: 3 => near_rel_call, with_near_rel_call: bool;
        /// NEAR_IND_CALL, bit 4.
        pub NEAR_IND_CALL: 4 => near_ind_call, with_near_ind_call: bool;
        /// NEAR_RET, bit 5.
        pub NEAR_RET: 5 => near_ret, with_near_ret: bool;
        /// NEAR_IND_JMP, bit 6.
        pub NEAR_IND_JMP: 6 => near_ind_jmp, with_near_ind_jmp: bool;
        /// NEAR_REL_JMP, bit 7.
        pub NEAR_REL_JMP: 7 => near_rel_jmp, with_near_rel_jmp: bool;
        /// FAR_BRANCH, bit 8.
        pub FAR_BRANCH: 8 => far_branch, with_far_branch: bool;
        /// EN_CALLSTACK, bit 9 (Haswell and later): a near return pops
        /// the record of its call (not a suppress bit).
        pub EN_CALLSTACK: 9 => en_callstack, with_en_callstack: bool;
    }
}

register! {
    /// `IA32_LBR_CTL` (14CEH; SDM Vol. 3B "Architectural Last Branch
    /// Records"): a set bit 16-22 *records* that kind of branch (the
    /// reverse of `MSR_LBR_SELECT`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct LbrCtl(u64): from_bits {
        /// LBREn, bit 0: record.
        pub LBREN: 0 => lbren, with_lbren: bool;
        /// OS, bit 1: record branches at CPL 0.
        pub OS: 1 => os, with_os: bool;
        /// USR, bit 2: record branches at CPL above 0.
        pub USR: 2 => usr, with_usr: bool;
        /// CALL_STACK, bit 3: a near return pops the record of its call.
        pub CALL_STACK: 3 => call_stack, with_call_stack: bool;
        /// COND, bit 16: conditional branches.
        pub COND: 16 => cond, with_cond: bool;
        /// NEAR_REL_JMP, bit 17.
        pub NEAR_REL_JMP: 17 => near_rel_jmp, with_near_rel_jmp: bool;
        /// NEAR_IND_JMP, bit 18.
        pub NEAR_IND_JMP: 18 => near_ind_jmp, with_near_ind_jmp: bool;
        /// NEAR_REL_CALL, bit 19.
        pub NEAR_REL_CALL: 19 => near_rel_call, with_near_rel_call: bool;
        /// NEAR_IND_CALL, bit 20.
        pub NEAR_IND_CALL: 20 => near_ind_call, with_near_ind_call: bool;
        /// NEAR_RET, bit 21.
        pub NEAR_RET: 21 => near_ret, with_near_ret: bool;
        /// OTHER_BRANCH, bit 22: far branches, interrupts, SYSCALL and
        /// the like.
        pub OTHER_BRANCH: 22 => other_branch, with_other_branch: bool;
    }
}

register! {
    /// `MSR_LBR_INFO_x` (legacy formats 5 and 7) and `IA32_LBR_x_INFO`
    /// (architectural LBR): what a record says beside its addresses.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct LbrInfo(u64): from_bits {
        /// CYC_CNT, bits 15:0: core cycles since the previous record
        /// (saturating).
        pub CYC_CNT: 0..=15 => cycles, with_cycles: u16;
        /// BR_TYPE, bits 59:56 (architectural LBR with
        /// CPUID.1CH:ECX\[2\]): [`BranchType`].
        pub BR_TYPE: 56..=59 => branch_type, with_branch_type: u8;
        /// CYC_CNT_VALID, bit 60 (architectural LBR).
        pub CYC_CNT_VALID: 60 => cycles_valid, with_cycles_valid: bool;
        /// TSX_ABORT, bit 61.
        pub TSX_ABORT: 61 => tsx_abort, with_tsx_abort: bool;
        /// IN_TSX, bit 62.
        pub IN_TSX: 62 => in_tsx, with_in_tsx: bool;
        /// MISPRED, bit 63.
        pub MISPRED: 63 => mispredicted, with_mispredicted: bool;
    }
}

register! {
    /// A legacy `MSR_LASTBRANCH_x_FROM_IP` of formats 3, 4 and 6 (SDM Vol.
    /// 3B "LBR Stack and Intel 64 Processors"): the flags above the
    /// address, which is sign-extended below them.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct FlaggedFrom(u64): from_bits {
        /// TSX_ABORT, bit 61 (format 4).
        pub TSX_ABORT: 61 => tsx_abort, with_tsx_abort: bool;
        /// IN_TSX, bit 62 (format 4).
        pub IN_TSX: 62 => in_tsx, with_in_tsx: bool;
        /// MISPRED, bit 63 (formats 3, 4, 6).
        pub MISPRED: 63 => mispredicted, with_mispredicted: bool;
    }
}

impl FlaggedFrom {
    /// The address below the top `flags` bits (1 or 3), sign-extended from
    /// the bit under them.
    pub const fn address(self, flags: u8) -> u64 {
        let flags = if flags > 3 { 3 } else { flags };
        (((self.0 << flags) as i64) >> flags) as u64
    }

    /// The image to write back on a format-4 part without TSX, whose
    /// WRMSR takes bits 62:61 as part of the sign extension (a read gives
    /// them 0: Linux's `lbr_from_signext_quirk_wr` copies bits 60:59, which
    /// are sign extension on every address, into them).
    pub const fn tsx_less(self) -> FlaggedFrom {
        let extension = (self.0 >> 59) & 3;
        FlaggedFrom((self.0 & !Self::IN_TSX.mask() & !Self::TSX_ABORT.mask()) | extension << 61)
    }
}

register! {
    /// A legacy `MSR_LASTBRANCH_x_TO_IP` of format 6 (Goldmont): the
    /// cycles since the previous record above a 48-bit address.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct TimedTo(u64): from_bits {
        /// Cycle count, bits 63:48.
        pub CYCLES: 48..=63 => cycles, with_cycles: u16;
    }
}

impl TimedTo {
    /// The address, bits 47:0 sign-extended.
    pub const fn address(self) -> u64 {
        (((self.0 << 16) as i64) >> 16) as u64
    }
}

register! {
    /// `IA32_LBR_DEPTH` (14CFH): how many records are in use, one of the
    /// depths CPUID.1CH:EAX\[7:0\] offers. A write resets every record to 0.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct LbrDepth(u64): from_bits {
        /// DEPTH, bits 8:0.
        pub DEPTH: 0..=8 => depth, with_depth: u16;
    }
}

/// A legacy LBR record format, `IA32_PERF_CAPABILITIES[5:0]` (SDM Vol. 3B
/// "LBR Stack and Intel 64 Processors"; Linux `lbr.c` names them
/// `LBR_FORMAT_*`): where the addresses and the flags sit.
///
/// | format | name | FROM | TO | INFO |
/// |---|---|---|---|---|
/// | 1 | 64-bit LIP | linear address | linear address | none |
/// | 2 | 64-bit EIP | effective address | effective address | none |
/// | 3 | EIP with flags | MISPRED (63) over the address | address | none |
/// | 4 | EIP with flags and TSX | MISPRED, IN_TSX, TSX_ABORT (63-61) | address | none |
/// | 5 | with `LBR_INFO` | address | address | MISPRED, IN_TSX, TSX_ABORT, cycles |
/// | 6 | LIP with flags and cycles | MISPRED | cycles (63:48) over the address | none |
/// | 7 | LIP with `LBR_INFO` | address | address | MISPRED, cycles |
///
/// Format 0 (32-bit records, FROM and TO in one MSR: Pentium M and Core)
/// is not driven.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LbrFormat(u8);

impl LbrFormat {
    /// The formats the crate decodes.
    pub const DRIVEN: core::ops::RangeInclusive<u8> = 1..=7;

    /// Format `n` (1-7), or `None`.
    pub const fn new(n: u8) -> Option<LbrFormat> {
        if n >= 1 && n <= 7 {
            Some(LbrFormat(n))
        } else {
            None
        }
    }

    /// The format's number.
    pub const fn number(self) -> u8 {
        self.0
    }

    /// The flag bits above the FROM address: 1 (MISPRED) for formats 3
    /// and 6, 3 (MISPRED, IN_TSX, TSX_ABORT) for format 4, else 0.
    pub const fn from_flags(self) -> u8 {
        match self.0 {
            3 | 6 => 1,
            4 => 3,
            _ => 0,
        }
    }

    /// The records have `LBR_INFO` MSRs (formats 5 and 7).
    pub const fn info(self) -> bool {
        matches!(self.0, 5 | 7)
    }

    /// The TO records carry cycles in bits 63:48 (format 6).
    pub const fn cycles_in_to(self) -> bool {
        self.0 == 6
    }

    /// `LBR_INFO`'s TSX bits mean something (format 5; format 7's parts
    /// have no TSX).
    pub const fn info_tsx(self) -> bool {
        self.0 == 5
    }
}

/// A generation of processors with the legacy LBR stack the crate drives:
/// where its records are and what its stack can do. The depth and the MSR
/// addresses are per microarchitecture (SDM Vol. 3B "LBR Stack" sections of
/// Nehalem, Sandy Bridge, Haswell and Skylake; Vol. 4's model-specific MSR
/// tables; Linux `intel_pmu_lbr_init_nhm/snb/hsw/skl`); the record format
/// is `IA32_PERF_CAPABILITIES`'.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Generation {
    /// The microarchitectures, for reports.
    pub name: &'static str,
    /// Records in the stack (the TOS runs modulo this).
    pub depth: u8,
    /// `MSR_LASTBRANCH_0_FROM_IP`.
    pub from: u32,
    /// `MSR_LASTBRANCH_0_TO_IP`.
    pub to: u32,
    /// `MSR_LBR_INFO_0`, where the records have one.
    pub info: Option<u32>,
    /// `MSR_LBR_SELECT.EN_CALLSTACK` exists (Haswell and later).
    pub call_stack: bool,
}

/// The legacy generations the crate drives, each with the display models
/// (family 6) that have it (Linux `arch/x86/events/intel/core.c` picks the
/// same init per model; model numbers as Intel's family list gives them).
/// Older stacks (Core 2's and Atom's at 40H/60H, without `MSR_LBR_SELECT`)
/// and the small cores' (Silvermont, Goldmont) are not in it: their CPUs
/// run without LBR.
pub const GENERATIONS: [(&[u8], Generation); 4] = [
    (
        &[0x1A, 0x1E, 0x1F, 0x2E, 0x25, 0x2C, 0x2F],
        Generation {
            name: "Nehalem, Westmere",
            depth: 16,
            from: MSR_LASTBRANCH_0_FROM_IP,
            to: MSR_LASTBRANCH_0_TO_IP,
            info: None,
            call_stack: false,
        },
    ),
    (
        &[0x2A, 0x2D, 0x3A, 0x3E],
        Generation {
            name: "Sandy Bridge, Ivy Bridge",
            depth: 16,
            from: MSR_LASTBRANCH_0_FROM_IP,
            to: MSR_LASTBRANCH_0_TO_IP,
            info: None,
            call_stack: false,
        },
    ),
    (
        &[0x3C, 0x3F, 0x45, 0x46, 0x3D, 0x47, 0x4F, 0x56],
        Generation {
            name: "Haswell, Broadwell",
            depth: 16,
            from: MSR_LASTBRANCH_0_FROM_IP,
            to: MSR_LASTBRANCH_0_TO_IP,
            info: None,
            call_stack: true,
        },
    ),
    (
        &[
            0x4E, 0x5E, 0x55, 0x8E, 0x9E, 0xA5, 0xA6, 0x66, 0x7D, 0x7E, 0x6A, 0x6C, 0x8C, 0x8D,
            0xA7,
        ],
        Generation {
            name: "Skylake to Tiger Lake",
            depth: 32,
            from: MSR_LASTBRANCH_0_FROM_IP,
            to: MSR_LASTBRANCH_0_TO_IP,
            info: Some(MSR_LBR_INFO_0),
            call_stack: true,
        },
    ),
];

/// What a CPU's architectural LBR offers (CPUID leaf 1CH).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ArchLbr {
    /// The depth the driver uses: the deepest CPUID offers up to
    /// [`MAX_BRANCHES`].
    pub depth: u8,
    /// CPUID.1CH:EBX\[0\]: `OS`/`USR` filter.
    pub cpl_filter: bool,
    /// CPUID.1CH:EBX\[1\]: the branch-kind filter (bits 22:16).
    pub branch_filter: bool,
    /// CPUID.1CH:EBX\[2\]: call-stack mode.
    pub call_stack: bool,
    /// CPUID.1CH:ECX\[0\]: `MISPRED` is recorded.
    pub mispredict: bool,
    /// CPUID.1CH:ECX\[1\]: `CYC_CNT` is recorded.
    pub timed: bool,
    /// CPUID.1CH:ECX\[2\]: `BR_TYPE` is recorded.
    pub branch_type: bool,
}

/// A CPU's last branch records as the driver drives them.
///
/// # The LBR for someone who has never seen it
///
/// The processor keeps the last few taken branches it retired, each as a
/// record of three MSRs: where the branch was (FROM), where it went (TO),
/// and on newer parts an INFO word (mispredicted, cycles since the
/// previous record, the branch's type). A filter says which branches are
/// recorded (by privilege and by kind), and in *call-stack mode* a near
/// return removes the record of its call, so the records are the calls
/// still open: the call chain of the code that runs, without frame
/// pointers. With `IA32_DEBUGCTL.FREEZE_LBRS_ON_PMI` the records freeze
/// when a counter requests a PMI, so the handler reads the branches that
/// led to the overflow, not its own.
///
/// Two generations of registers:
///
/// | | legacy stack | architectural LBR |
/// |---|---|---|
/// | found by | the display model ([`GENERATIONS`]) and `IA32_PERF_CAPABILITIES[5:0]` ([`LbrFormat`]) | CPUID.07H:EDX\[19\], leaf 1CH |
/// | enabled by | `IA32_DEBUGCTL.LBR` | `IA32_LBR_CTL.LBREn` |
/// | filter | `MSR_LBR_SELECT` (suppress bits) | `IA32_LBR_CTL` (record bits) |
/// | records | 680H/6C0H(/DC0H) + x, a ring: `MSR_LASTBRANCH_TOS` names the newest | 1500H/1600H/1200H + x, a stack: record 0 is the newest |
/// | depth | the generation's (16 or 32) | `IA32_LBR_DEPTH`, one of CPUID's |
/// | frozen on PMI (version 4+) | `IA32_PERF_GLOBAL_STATUS.LBR_Frz`, cleared by the status acknowledgement | the same |
/// | frozen on PMI (versions 2-3) | `IA32_DEBUGCTL.LBR` cleared, set again by the handler | (none has it) |
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Lbr {
    /// A legacy stack of a known generation, in a driven format.
    Legacy {
        /// The generation: depth and MSRs.
        generation: Generation,
        /// The records' format.
        format: LbrFormat,
    },
    /// Architectural LBR.
    Architectural(ArchLbr),
}

impl Lbr {
    /// The LBR of `cpu`, if the crate drives it: architectural LBR where
    /// CPUID enumerates it (with a depth of at most [`MAX_BRANCHES`]),
    /// else a legacy stack of family 6 whose model is in [`GENERATIONS`]
    /// and whose format is driven. Versions below 2 have no
    /// `FREEZE_LBRS_ON_PMI`: none.
    pub fn of(cpu: &ArchPerfCpu) -> Option<Lbr> {
        if cpu.version() < 2 {
            return None;
        }
        if let (Some(eax), Some(ebx), Some(ecx)) =
            (cpu.lbr.arch_eax(), cpu.lbr.arch_ebx(), cpu.lbr.arch_ecx())
        {
            // Bit n of the depths: 8 × (n + 1) records.
            let depth = (0..8u8)
                .filter(|n| eax.depths() & (1 << n) != 0)
                .map(|n| 8 * (n + 1))
                .filter(|&d| usize::from(d) <= MAX_BRANCHES)
                .max()?;
            return Some(Lbr::Architectural(ArchLbr {
                depth,
                cpl_filter: ebx.cpl_filter(),
                branch_filter: ebx.branch_filter(),
                call_stack: ebx.call_stack(),
                mispredict: ecx.mispredict(),
                timed: ecx.timed(),
                branch_type: ecx.branch_type(),
            }));
        }
        if cpu.family != 6 {
            return None;
        }
        let format = LbrFormat::new(cpu.lbr.format)?;
        let (_, generation) = GENERATIONS
            .iter()
            .find(|(models, _)| models.contains(&cpu.model))?;
        Some(Lbr::Legacy {
            generation: *generation,
            format,
        })
    }

    /// Records in use.
    pub const fn depth(&self) -> u8 {
        match self {
            Lbr::Legacy { generation, .. } => generation.depth,
            Lbr::Architectural(a) => a.depth,
        }
    }

    /// Call-stack mode exists.
    pub const fn call_stack(&self) -> bool {
        match self {
            Lbr::Legacy { generation, .. } => generation.call_stack,
            Lbr::Architectural(a) => a.call_stack,
        }
    }

    /// The filter `filter` can be had (architectural LBR without CPL or
    /// branch filtering records every privilege or every kind).
    pub const fn filters(&self, filter: BranchFilter) -> bool {
        match self {
            Lbr::Legacy { .. } => true,
            Lbr::Architectural(a) => {
                (a.cpl_filter || (filter.user() && filter.kernel()))
                    && (a.branch_filter || filter.kinds() == BranchFilter::ANY.kinds())
            }
        }
    }

    /// How the handler reads the records of a CPU of architectural
    /// perfmon `version` (below 4: the legacy freeze).
    pub(crate) const fn plan(&self, call_stack: bool, version: u8) -> LbrPlan {
        let plan = match *self {
            Lbr::Legacy { generation, format } => LbrPlan::new(
                false,
                generation.depth,
                format.number(),
                call_stack,
                generation.from,
                generation.to,
                match generation.info {
                    Some(info) => info,
                    None => 0,
                },
            ),
            Lbr::Architectural(a) => LbrPlan::new(
                true,
                a.depth,
                0,
                call_stack,
                IA32_LBR_0_FROM_IP,
                IA32_LBR_0_TO_IP,
                IA32_LBR_0_INFO,
            ),
        };
        plan.with_legacy_freeze(version < 4)
    }
}

register! {
    /// Which branches the LBR records, as a kernel asks (Linux's
    /// `PERF_SAMPLE_BRANCH_*`): privileges and kinds. The driver turns it
    /// into `MSR_LBR_SELECT`'s suppress bits or `IA32_LBR_CTL`'s record
    /// bits ([`BranchFilter::select`], [`BranchFilter::ctl`]).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct BranchFilter(u16): from_bits {
        /// Branches at CPL above 0.
        pub USER: 0 => user, with_user: bool;
        /// Branches at CPL 0.
        pub KERNEL: 1 => kernel, with_kernel: bool;
        /// Conditional branches (Jcc, LOOP, JRCXZ), taken.
        pub CONDITIONAL: 2 => conditional, with_conditional: bool;
        /// Near relative jumps.
        pub NEAR_REL_JUMP: 3 => near_rel_jump, with_near_rel_jump: bool;
        /// Near indirect jumps.
        pub NEAR_IND_JUMP: 4 => near_ind_jump, with_near_ind_jump: bool;
        /// Near relative calls.
        pub NEAR_REL_CALL: 5 => near_rel_call, with_near_rel_call: bool;
        /// Near indirect calls.
        pub NEAR_IND_CALL: 6 => near_ind_call, with_near_ind_call: bool;
        /// Near returns.
        pub NEAR_RETURN: 7 => near_return, with_near_return: bool;
        /// Far branches, interrupts, exceptions, SYSCALL/SYSRET and the
        /// like.
        pub OTHER: 8 => other, with_other: bool;
        /// The kinds, bits 8:2.
        KINDS: 2..=8 => kinds: u8;
    }
}

impl BranchFilter {
    /// Every kind, no privilege yet.
    pub const ANY: BranchFilter = BranchFilter(0)
        .with_conditional(true)
        .with_near_rel_jump(true)
        .with_near_ind_jump(true)
        .with_near_rel_call(true)
        .with_near_ind_call(true)
        .with_near_return(true)
        .with_other(true);

    /// Near calls (relative and indirect), no privilege yet.
    pub const CALLS: BranchFilter = BranchFilter(0)
        .with_near_rel_call(true)
        .with_near_ind_call(true);

    /// What call-stack mode records: near calls and returns.
    pub const CALL_STACK: BranchFilter = BranchFilter::CALLS.with_near_return(true);

    /// This filter at CPL 0 only.
    pub const fn kernel_only(self) -> BranchFilter {
        self.with_kernel(true).with_user(false)
    }

    /// This filter at CPL above 0 only.
    pub const fn user_only(self) -> BranchFilter {
        self.with_kernel(false).with_user(true)
    }

    /// This filter at every privilege.
    pub const fn everywhere(self) -> BranchFilter {
        self.with_kernel(true).with_user(true)
    }

    /// `MSR_LBR_SELECT` for this filter: each kind and privilege not asked
    /// for suppressed, `EN_CALLSTACK` as `call_stack` says.
    pub const fn select(self, call_stack: bool) -> LbrSelect {
        LbrSelect(0)
            .with_cpl_eq_0(!self.kernel())
            .with_cpl_neq_0(!self.user())
            .with_jcc(!self.conditional())
            .with_near_rel_call(!self.near_rel_call())
            .with_near_ind_call(!self.near_ind_call())
            .with_near_ret(!self.near_return())
            .with_near_ind_jmp(!self.near_ind_jump())
            .with_near_rel_jmp(!self.near_rel_jump())
            .with_far_branch(!self.other())
            .with_en_callstack(call_stack)
    }

    /// `IA32_LBR_CTL` for this filter (with `LBREn`): each kind and
    /// privilege asked for recorded, `CALL_STACK` as `call_stack` says.
    pub const fn ctl(self, call_stack: bool) -> LbrCtl {
        LbrCtl(0)
            .with_lbren(true)
            .with_os(self.kernel())
            .with_usr(self.user())
            .with_call_stack(call_stack)
            .with_cond(self.conditional())
            .with_near_rel_jmp(self.near_rel_jump())
            .with_near_ind_jmp(self.near_ind_jump())
            .with_near_rel_call(self.near_rel_call())
            .with_near_ind_call(self.near_ind_call())
            .with_near_ret(self.near_return())
            .with_other_branch(self.other())
    }
}

/// What the driver records: a filter, and whether the stack is a call
/// stack ([`super::driver::ArchPerfDriver::enable_lbr`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LbrOptions {
    /// Which branches are recorded.
    pub filter: BranchFilter,
    /// Call-stack mode: the filter must be [`BranchFilter::CALL_STACK`]'s
    /// kinds (Linux asks the same: `PERF_SAMPLE_BRANCH_CALL_STACK` takes
    /// only a privilege).
    pub call_stack: bool,
}

impl LbrOptions {
    /// The last taken branches of every kind at the privileges of `filter`
    /// (`perf record -b`).
    pub const fn any(filter: BranchFilter) -> LbrOptions {
        LbrOptions {
            filter: BranchFilter::ANY
                .with_user(filter.user())
                .with_kernel(filter.kernel()),
            call_stack: false,
        }
    }

    /// Call-stack mode at the privileges of `filter` (`perf record
    /// --call-graph lbr`).
    pub const fn call_stack(filter: BranchFilter) -> LbrOptions {
        LbrOptions {
            filter: BranchFilter::CALL_STACK
                .with_user(filter.user())
                .with_kernel(filter.kernel()),
            call_stack: true,
        }
    }
}

register! {
    /// How the PMI handler reads the records, packed into one word of its
    /// state (0: no LBR).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub(crate) struct LbrPlan(u64): from_bits {
        ON: 0 => on, with_on: bool;
        ARCH: 1 => arch, with_arch: bool;
        CALL_STACK: 2 => call_stack, with_call_stack: bool;
        FORMAT: 3..=5 => format, with_format: u8;
        DEPTH: 6..=12 => depth, with_depth: u8;
        FROM: 13..=28 => from, with_from: u16;
        TO: 29..=44 => to, with_to: u16;
        INFO: 45..=60 => info, with_info: u16;
        /// The freeze clears `IA32_DEBUGCTL.LBR` (versions 2-3): the
        /// handler sets it again; else (version 4, architectural LBR) it
        /// sets `LBR_Frz`, which the status acknowledgement clears.
        LEGACY_FREEZE: 61 => legacy_freeze, with_legacy_freeze: bool;
    }
}

impl LbrPlan {
    /// A plan (MSR addresses below 10000H, as every LBR MSR is).
    const fn new(
        arch: bool,
        depth: u8,
        format: u8,
        call_stack: bool,
        from: u32,
        to: u32,
        info: u32,
    ) -> LbrPlan {
        LbrPlan(0)
            .with_on(true)
            .with_arch(arch)
            .with_call_stack(call_stack)
            .with_format(format)
            .with_depth(depth)
            .with_from(from as u16)
            .with_to(to as u16)
            .with_info(info as u16)
    }

    /// The record `i` places older than the newest: on a legacy stack the
    /// one `i` below the TOS `tos` (modulo the depth), on architectural
    /// LBR record `i`.
    pub(crate) const fn record(self, tos: u8, i: u8) -> u8 {
        let depth = if self.depth() == 0 {
            1
        } else {
            self.depth() as u32
        };
        if self.arch() {
            i
        } else {
            ((tos as u32 + depth - i as u32 % depth) % depth) as u8
        }
    }

    /// Record `x`'s MSRs: FROM, TO and INFO (0: none).
    pub(crate) const fn msrs(self, x: u8) -> (u32, u32, u32) {
        let x = x as u32;
        let info = self.info() as u32;
        (
            self.from() as u32 + x,
            self.to() as u32 + x,
            if info == 0 { 0 } else { info + x },
        )
    }
}

/// How a record's words decode: a legacy format's, or architectural
/// LBR's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RecordFormat {
    /// A legacy stack's records, of this format.
    Legacy(LbrFormat),
    /// Architectural LBR's records.
    Architectural,
}

/// The type of a branch as architectural LBR records it
/// (`IA32_LBR_x_INFO.BR_TYPE`, with CPUID.1CH:ECX\[2\]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum BranchType {
    /// 0: a conditional branch.
    Conditional,
    /// 1: a near indirect jump.
    NearIndirectJump,
    /// 2: a near relative jump.
    NearRelativeJump,
    /// 3: a near indirect call.
    NearIndirectCall,
    /// 4: a near relative call.
    NearRelativeCall,
    /// 5: a near return.
    NearReturn,
    /// Another encoding (other branches; reserved values).
    Other(u8),
}

impl BranchType {
    /// The type `BR_TYPE` encodes.
    pub const fn from_encoding(v: u8) -> BranchType {
        match v {
            0 => BranchType::Conditional,
            1 => BranchType::NearIndirectJump,
            2 => BranchType::NearRelativeJump,
            3 => BranchType::NearIndirectCall,
            4 => BranchType::NearRelativeCall,
            5 => BranchType::NearReturn,
            v => BranchType::Other(v),
        }
    }
}

/// One branch record, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BranchRecord {
    /// The branch instruction's address.
    pub from: u64,
    /// Its target.
    pub to: u64,
    /// Mispredicted, where the format says (formats 3-7, architectural
    /// LBR with CPUID.1CH:ECX\[0\]).
    pub mispredicted: Option<bool>,
    /// Core cycles since the previous record, where the format counts them
    /// (formats 5-7; architectural LBR when `CYC_CNT_VALID`).
    pub cycles: Option<u16>,
    /// In a transaction and aborted it (formats 4-5, architectural LBR),
    /// where the format says.
    pub tsx: Option<(bool, bool)>,
    /// The branch's type (architectural LBR with CPUID.1CH:ECX\[2\]).
    pub kind: Option<BranchType>,
}

/// The branch records a sample carries, newest first, as the handler read
/// them (its payload, [`super::pmi::Capture::Branches`]): the words of
/// each record kept as read and decoded on demand, as PEBS records are.
/// In call-stack mode the records are the calls still open when the PMI
/// froze them, innermost first: [`BranchStack::call_chain`] makes them the
/// sample's call chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BranchStack {
    format: RecordFormat,
    call_stack: bool,
    depth: u8,
    len: u8,
    from: [u64; MAX_BRANCHES],
    to: [u64; MAX_BRANCHES],
    info: [u64; MAX_BRANCHES],
}

impl BranchStack {
    /// No records, of `format`, from a stack of `depth` records (a call
    /// stack when `call_stack`).
    pub const fn empty(format: RecordFormat, call_stack: bool, depth: u8) -> BranchStack {
        BranchStack {
            format,
            call_stack,
            depth,
            len: 0,
            from: [0; MAX_BRANCHES],
            to: [0; MAX_BRANCHES],
            info: [0; MAX_BRANCHES],
        }
    }

    /// The stack a plan reads into.
    pub(crate) const fn for_plan(plan: LbrPlan) -> BranchStack {
        let format = if plan.arch() {
            RecordFormat::Architectural
        } else {
            match LbrFormat::new(plan.format()) {
                Some(f) => RecordFormat::Legacy(f),
                None => RecordFormat::Architectural,
            }
        };
        BranchStack::empty(format, plan.call_stack(), plan.depth())
    }

    /// Appends a record's words as read (an older record than those
    /// before it); a full stack keeps what it has.
    pub fn push(&mut self, from: u64, to: u64, info: u64) {
        let i = usize::from(self.len);
        if let (Some(f), Some(t), Some(n)) = (
            self.from.get_mut(i),
            self.to.get_mut(i),
            self.info.get_mut(i),
        ) {
            *f = from;
            *t = to;
            *n = info;
            self.len += 1;
        }
    }

    /// The records' format.
    pub const fn format(&self) -> RecordFormat {
        self.format
    }

    /// Whether the records are a call stack (call-stack mode).
    pub const fn is_call_stack(&self) -> bool {
        self.call_stack
    }

    /// The depth of the stack the records were read from.
    pub const fn depth(&self) -> u8 {
        self.depth
    }

    /// How many records.
    pub const fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether there is none.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Record `i`'s words as read (FROM, TO, INFO; INFO 0 where the
    /// format has none), 0 the newest.
    pub fn words(&self, i: usize) -> Option<(u64, u64, u64)> {
        if i >= self.len() {
            return None;
        }
        Some((*self.from.get(i)?, *self.to.get(i)?, *self.info.get(i)?))
    }

    /// Record `i` decoded, 0 the newest.
    pub fn get(&self, i: usize) -> Option<BranchRecord> {
        let (from, to, info) = self.words(i)?;
        let info = LbrInfo(info);
        Some(match self.format {
            RecordFormat::Architectural => BranchRecord {
                from,
                to,
                mispredicted: Some(info.mispredicted()),
                cycles: info.cycles_valid().then_some(info.cycles()),
                tsx: Some((info.in_tsx(), info.tsx_abort())),
                kind: Some(BranchType::from_encoding(info.branch_type())),
            },
            RecordFormat::Legacy(format) => {
                let flagged = FlaggedFrom(from);
                let flags = format.from_flags();
                let timed = TimedTo(to);
                BranchRecord {
                    from: flagged.address(flags),
                    to: if format.cycles_in_to() {
                        timed.address()
                    } else {
                        to
                    },
                    mispredicted: if format.info() {
                        Some(info.mispredicted())
                    } else if flags > 0 {
                        Some(flagged.mispredicted())
                    } else {
                        None
                    },
                    cycles: if format.info() {
                        Some(info.cycles())
                    } else if format.cycles_in_to() {
                        Some(timed.cycles())
                    } else {
                        None
                    },
                    tsx: if format.info_tsx() {
                        Some((info.in_tsx(), info.tsx_abort()))
                    } else if flags == 3 {
                        Some((flagged.in_tsx(), flagged.tsx_abort()))
                    } else {
                        None
                    },
                    kind: None,
                }
            }
        })
    }

    /// The records decoded, newest first.
    pub fn iter(&self) -> impl Iterator<Item = BranchRecord> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }

    /// The call chain of a sample at `rip` whose records are a call stack:
    /// `rip`, then each open call innermost first
    /// ([`CallChain::from_calls`]), as a frame-pointer walk would give it
    /// for code built with frame pointers; for records that are not a call
    /// stack, `rip` alone. A stack read full may have lost its oldest
    /// calls: the chain then ends [`Full`](crate::sampling::ChainEnd::Full).
    pub fn call_chain<const N: usize>(&self, rip: u64) -> CallChain<N> {
        let calls = self
            .iter()
            .take(if self.call_stack { self.len() } else { 0 })
            .map(|b| b.from);
        CallChain::from_calls(rip, calls, self.len() < usize::from(self.depth))
    }
}

/// A logical processor's last branch records saved for a task
/// ([`super::driver::ArchPerfDriver::save_lbr`]), to be restored when the
/// task runs again ([`super::driver::ArchPerfDriver::restore_lbr`]): the
/// records as read, newest first, and on a legacy stack the TOS they were
/// read from. In call-stack mode this is what keeps a task's call stack
/// across a switch (Linux saves it in the task's perf context at
/// sched-out, `intel_pmu_lbr_save`, and restores it at sched-in).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LbrSnapshot {
    pub(crate) stack: BranchStack,
    pub(crate) tos: u8,
}

impl LbrSnapshot {
    /// The records saved.
    pub const fn stack(&self) -> &BranchStack {
        &self.stack
    }

    /// The legacy stack's TOS they were read from (0 for architectural
    /// LBR).
    pub const fn tos(&self) -> u8 {
        self.tos
    }
}

/// Reads the records `plan` describes into `stack`, newest first, up to the
/// first empty one (FROM 0: never written since the driver zeroed the
/// records, or popped by a return in call-stack mode). Legacy: 1 RDMSR of
/// `MSR_LASTBRANCH_TOS`, then 2 (3 with `LBR_INFO`) per record from the
/// TOS back; architectural LBR: 3 per record from record 0. Lock-free.
/// Returns the TOS (0 for architectural LBR).
#[inline]
pub(crate) fn read_stack<M: MsrBackend>(
    plan: LbrPlan,
    msr: &mut M,
    stack: &mut BranchStack,
) -> Result<u8, M::Error> {
    let depth = plan.depth().max(1);
    let tos = if plan.arch() {
        0
    } else {
        (msr.read_msr(MSR_LASTBRANCH_TOS)? % u64::from(depth)) as u8
    };
    for i in 0..depth {
        let (from, to, info) = plan.msrs(plan.record(tos, i));
        let from = msr.read_msr(from)?;
        if from == 0 {
            break;
        }
        let to = msr.read_msr(to)?;
        let info = if info == 0 { 0 } else { msr.read_msr(info)? };
        stack.push(from, to, info);
    }
    Ok(tos)
}

#[cfg(test)]
mod tests;

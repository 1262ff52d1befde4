//! The model's own constant tables, transcribed from the manuals: the ESCR
//! map (SDM Vol. 3B Table 18-63 / Vol. 3C Table 35-41), the counter blocks and
//! pairs, the cascade wiring (SDM 18.15.5.6-18.15.5.7, Table 18-65), the
//! register bit layouts (Figures 18-43..18-48) and the TS/TI qualification of
//! events (Table 19-34).
//!
//! These are written independently of the driver's layouts in `crate::arch`
//! on purpose: the model is a test instrument, and two independent
//! transcriptions catch each other's mistakes.

/// Number of performance counters (and CCCRs).
pub const COUNTERS: usize = 18;
/// Width of a performance counter in bits (SDM Figure 18-44).
pub const COUNTER_BITS: u32 = 40;
/// Mask of the 40 counter bits.
pub const COUNTER_MASK: u64 = (1 << COUNTER_BITS) - 1;

/// First counter MSR (MSR_BPU_COUNTER0); counter `n` is at `0x300 + n`.
pub const MSR_COUNTER_BASE: u32 = 0x300;
/// First CCCR MSR (MSR_BPU_CCCR0); CCCR `n` is at `0x360 + n`.
pub const MSR_CCCR_BASE: u32 = 0x360;
/// MSR_TC_PRECISE_EVENT.
pub const MSR_TC_PRECISE_EVENT: u32 = 0x3F0;
/// MSR_PEBS_ENABLE (IA32_PEBS_ENABLE).
pub const MSR_PEBS_ENABLE: u32 = 0x3F1;
/// MSR_PEBS_MATRIX_VERT.
pub const MSR_PEBS_MATRIX_VERT: u32 = 0x3F2;
/// IA32_MISC_ENABLE.
pub const IA32_MISC_ENABLE: u32 = 0x1A0;
/// IA32_DS_AREA (one per logical processor).
pub const IA32_DS_AREA: u32 = 0x600;

/// ESCR bit layout (SDM Figure 18-47 for HT parts; on non-HT parts, Figure
/// 18-43, bits 1:0 are reserved and bits 3:2 are called OS and USR).
pub mod escr {
    use core::ops::Range;

    /// T1_USR: count thread 1 at CPL 1-3.
    pub const T1_USR: u64 = 1 << 0;
    /// T1_OS: count thread 1 at CPL 0.
    pub const T1_OS: u64 = 1 << 1;
    /// T0_USR (USR on non-HT parts).
    pub const T0_USR: u64 = 1 << 2;
    /// T0_OS (OS on non-HT parts).
    pub const T0_OS: u64 = 1 << 3;
    /// Tag enable.
    pub const TAG_ENABLE: u64 = 1 << 4;
    /// Tag value, bits 8:5 (a `bit_field` range).
    pub const TAG_VALUE: Range<usize> = 5..9;
    /// Event mask, bits 24:9.
    pub const EVENT_MASK: Range<usize> = 9..25;
    /// Event select, bits 30:25.
    pub const EVENT_SELECT: Range<usize> = 25..31;
    /// Reserved on every part: bit 31 and bits 63:32.
    pub const RESERVED: u64 = !0x7FFF_FFFF;
    /// Reserved in addition on parts without Hyper-Threading: bits 1:0.
    pub const RESERVED_NON_HT: u64 = T1_USR | T1_OS;
}

/// CCCR bit layout (SDM Figure 18-48 for HT parts, Figure 18-45 otherwise).
pub mod cccr {
    use core::ops::Range;

    /// Extended cascading CASCNTxINTOy (IQ CCCRs 0, 3, 4, 5 of models 2, 3,
    /// 4, 6 only; reserved elsewhere), SDM 18.15.5.7 and Table 18-65.
    pub const EXTENDED_CASCADE: u64 = 1 << 11;
    /// ENABLE.
    pub const ENABLE: u64 = 1 << 12;
    /// ESCR select, bits 15:13 (a `bit_field` range).
    pub const ESCR_SELECT: Range<usize> = 13..16;
    /// Active thread, bits 17:16 (reserved and must be 11b on non-HT parts).
    pub const ACTIVE_THREAD: Range<usize> = 16..18;
    /// Both active-thread bits.
    pub const ACTIVE_THREAD_ANY: u64 = 3 << 16;
    /// COMPARE.
    pub const COMPARE: u64 = 1 << 18;
    /// COMPLEMENT.
    pub const COMPLEMENT: u64 = 1 << 19;
    /// THRESHOLD, bits 23:20.
    pub const THRESHOLD: Range<usize> = 20..24;
    /// EDGE.
    pub const EDGE: u64 = 1 << 24;
    /// FORCE_OVF.
    pub const FORCE_OVF: u64 = 1 << 25;
    /// OVF_PMI_T0 (OVF_PMI on non-HT parts).
    pub const OVF_PMI_T0: u64 = 1 << 26;
    /// OVF_PMI_T1 (reserved on non-HT parts).
    pub const OVF_PMI_T1: u64 = 1 << 27;
    /// CASCADE.
    pub const CASCADE: u64 = 1 << 30;
    /// OVF (sticky).
    pub const OVF: u64 = 1 << 31;
    /// Reserved on every part: bits 10:0, 29:28 and 63:32 (bit 11 is handled
    /// separately, see [`EXTENDED_CASCADE`]).
    pub const RESERVED: u64 = 0x7FF | (3 << 28) | !0xFFFF_FFFF;
}

/// MSR_PEBS_ENABLE bits (SDM Table 35-41, Table 19-33, 18.16.3).
pub mod pebs_enable {
    /// Replay-tagging metric bits used by Table 19-33: 12:0 plus 15 and 16
    /// (Tagged_mispred_branch). See the module docs for the disagreement with
    /// the "23:13 reserved" of Table 35-41.
    pub const METRICS: u64 = 0x1FFF | (1 << 15) | (1 << 16);
    /// UOP_Tag: enable replay tagging.
    pub const UOP_TAG: u64 = 1 << 24;
    /// ENABLE_PEBS_MY_THR (ENABLE_PEBS on non-HT parts).
    pub const MY_THR: u64 = 1 << 25;
    /// ENABLE_PEBS_OTH_THR (HT parts only).
    pub const OTH_THR: u64 = 1 << 26;
}

/// MSR_PEBS_MATRIX_VERT bits used by Table 19-33; the others are reserved.
pub mod matrix_vert {
    /// Loads.
    pub const LOADS: u64 = 1 << 0;
    /// Stores.
    pub const STORES: u64 = 1 << 1;
    /// Tagged mispredicted branches.
    pub const BRANCHES: u64 = 1 << 4;
    /// Every defined bit.
    pub const DEFINED: u64 = LOADS | STORES | BRANCHES;
}

/// A block of ESCRs and counters (SDM Table 18-63's grouping): the driver's
/// vocabulary type.
pub use crate::arch::netburst::Block;

/// The block a counter belongs to.
pub const fn block_of(counter: usize) -> Block {
    match counter {
        0..=3 => Block::Bpu,
        4..=7 => Block::Ms,
        8..=11 => Block::Flame,
        _ => Block::Iq,
    }
}

/// Which ESCR of a pair feeds the counter: 0 for the ESCR0 side (counters 0,
/// 1, 4, 5, 8, 9, 12, 13, 16), 1 for the ESCR1 side.
pub const fn side_of(counter: usize) -> u8 {
    match counter {
        16 => 0,
        17 => 1,
        n => ((n / 2) % 2) as u8,
    }
}

/// The functional unit an ESCR watches. Two ESCRs of one group (ESCR0 and
/// ESCR1) see the same events; an event is named by its group and its event
/// select, because event selects are reused between groups. The CRU ESCRs
/// form three groups, since CRU_ESCR0/1, 2/3 and 4/5 interpret event selects
/// differently (e.g. 02H is instr_retired on CRU_ESCR0/1, machine_clear on
/// CRU_ESCR2/3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[allow(missing_docs)]
pub enum EscrGroup {
    Bsu,
    Fsb,
    Firm,
    Flame,
    Dac,
    Mob,
    Pmh,
    Saat,
    U2l,
    Bpu,
    Is,
    Itlb,
    /// CRU_ESCR0 and CRU_ESCR1.
    Cru01,
    /// IQ_ESCR0 and IQ_ESCR1 (models 1 and 2 only).
    Iq,
    Rat,
    /// SSU_ESCR0 only.
    Ssu,
    Ms,
    Tbpu,
    Tc,
    Ix,
    Alf,
    /// CRU_ESCR2 and CRU_ESCR3 (the at-retirement events).
    Cru23,
    /// CRU_ESCR4 and CRU_ESCR5.
    Cru45,
}

/// One ESCR of SDM Table 18-63.
#[derive(Clone, Copy, Debug)]
pub struct EscrInfo {
    /// MSR address.
    pub msr: u32,
    /// SDM name.
    pub name: &'static str,
    /// Functional unit.
    pub group: EscrGroup,
    /// The CCCR ESCR-select value (bits 15:13) that selects it.
    pub select: u8,
    /// The block whose counters it feeds.
    pub block: Block,
    /// 0 for ESCR0-side (feeds the first pair of the block, and counter 16),
    /// 1 for ESCR1-side.
    pub side: u8,
    /// Present only on family 0Fh models 01h and 02h.
    pub early_models_only: bool,
}

impl EscrInfo {
    /// Whether this ESCR can feed `counter`.
    pub const fn feeds(&self, counter: usize) -> bool {
        counter < COUNTERS
            && block_of(counter) as u8 == self.block as u8
            && side_of(counter) == self.side
    }
}

const fn e(
    msr: u32,
    name: &'static str,
    group: EscrGroup,
    select: u8,
    block: Block,
    side: u8,
) -> EscrInfo {
    EscrInfo {
        msr,
        name,
        group,
        select,
        block,
        side,
        early_models_only: false,
    }
}

/// Number of architecturally defined ESCRs.
pub const ESCRS: usize = 45;

/// The 45 ESCRs of SDM Table 18-63, in MSR order.
pub static ESCR_TABLE: [EscrInfo; ESCRS] = {
    use Block::*;
    use EscrGroup as G;
    let mut iq0 = e(0x3BA, "MSR_IQ_ESCR0", G::Iq, 0, Iq, 0);
    iq0.early_models_only = true;
    let mut iq1 = e(0x3BB, "MSR_IQ_ESCR1", G::Iq, 0, Iq, 1);
    iq1.early_models_only = true;
    [
        e(0x3A0, "MSR_BSU_ESCR0", G::Bsu, 7, Bpu, 0),
        e(0x3A1, "MSR_BSU_ESCR1", G::Bsu, 7, Bpu, 1),
        e(0x3A2, "MSR_FSB_ESCR0", G::Fsb, 6, Bpu, 0),
        e(0x3A3, "MSR_FSB_ESCR1", G::Fsb, 6, Bpu, 1),
        e(0x3A4, "MSR_FIRM_ESCR0", G::Firm, 1, Flame, 0),
        e(0x3A5, "MSR_FIRM_ESCR1", G::Firm, 1, Flame, 1),
        e(0x3A6, "MSR_FLAME_ESCR0", G::Flame, 0, Flame, 0),
        e(0x3A7, "MSR_FLAME_ESCR1", G::Flame, 0, Flame, 1),
        e(0x3A8, "MSR_DAC_ESCR0", G::Dac, 5, Flame, 0),
        e(0x3A9, "MSR_DAC_ESCR1", G::Dac, 5, Flame, 1),
        e(0x3AA, "MSR_MOB_ESCR0", G::Mob, 2, Bpu, 0),
        e(0x3AB, "MSR_MOB_ESCR1", G::Mob, 2, Bpu, 1),
        e(0x3AC, "MSR_PMH_ESCR0", G::Pmh, 4, Bpu, 0),
        e(0x3AD, "MSR_PMH_ESCR1", G::Pmh, 4, Bpu, 1),
        e(0x3AE, "MSR_SAAT_ESCR0", G::Saat, 2, Flame, 0),
        e(0x3AF, "MSR_SAAT_ESCR1", G::Saat, 2, Flame, 1),
        e(0x3B0, "MSR_U2L_ESCR0", G::U2l, 3, Flame, 0),
        e(0x3B1, "MSR_U2L_ESCR1", G::U2l, 3, Flame, 1),
        e(0x3B2, "MSR_BPU_ESCR0", G::Bpu, 0, Bpu, 0),
        e(0x3B3, "MSR_BPU_ESCR1", G::Bpu, 0, Bpu, 1),
        e(0x3B4, "MSR_IS_ESCR0", G::Is, 1, Bpu, 0),
        e(0x3B5, "MSR_IS_ESCR1", G::Is, 1, Bpu, 1),
        e(0x3B6, "MSR_ITLB_ESCR0", G::Itlb, 3, Bpu, 0),
        e(0x3B7, "MSR_ITLB_ESCR1", G::Itlb, 3, Bpu, 1),
        e(0x3B8, "MSR_CRU_ESCR0", G::Cru01, 4, Iq, 0),
        e(0x3B9, "MSR_CRU_ESCR1", G::Cru01, 4, Iq, 1),
        iq0,
        iq1,
        e(0x3BC, "MSR_RAT_ESCR0", G::Rat, 2, Iq, 0),
        e(0x3BD, "MSR_RAT_ESCR1", G::Rat, 2, Iq, 1),
        e(0x3BE, "MSR_SSU_ESCR0", G::Ssu, 3, Iq, 0),
        e(0x3C0, "MSR_MS_ESCR0", G::Ms, 0, Ms, 0),
        e(0x3C1, "MSR_MS_ESCR1", G::Ms, 0, Ms, 1),
        e(0x3C2, "MSR_TBPU_ESCR0", G::Tbpu, 2, Ms, 0),
        e(0x3C3, "MSR_TBPU_ESCR1", G::Tbpu, 2, Ms, 1),
        e(0x3C4, "MSR_TC_ESCR0", G::Tc, 1, Ms, 0),
        e(0x3C5, "MSR_TC_ESCR1", G::Tc, 1, Ms, 1),
        e(0x3C8, "MSR_IX_ESCR0", G::Ix, 5, Bpu, 0),
        e(0x3C9, "MSR_IX_ESCR1", G::Ix, 5, Bpu, 1),
        e(0x3CA, "MSR_ALF_ESCR0", G::Alf, 1, Iq, 0),
        e(0x3CB, "MSR_ALF_ESCR1", G::Alf, 1, Iq, 1),
        e(0x3CC, "MSR_CRU_ESCR2", G::Cru23, 5, Iq, 0),
        e(0x3CD, "MSR_CRU_ESCR3", G::Cru23, 5, Iq, 1),
        e(0x3E0, "MSR_CRU_ESCR4", G::Cru45, 6, Iq, 0),
        e(0x3E1, "MSR_CRU_ESCR5", G::Cru45, 6, Iq, 1),
    ]
};

/// The first ESCR address (MSR_BSU_ESCR0) and the number of addresses up
/// to the last (MSR_CRU_ESCR5), gaps included.
const ESCR_MSR_FIRST: u32 = 0x3A0;
const ESCR_MSR_SPAN: usize = 0x3E2 - 0x3A0;

/// No ESCR, in the lookup tables below (whose entries are [`ESCR_TABLE`]
/// indices).
const NO_ESCR: u8 = u8::MAX;

/// [`escr_index`] as a table, by address from [`ESCR_MSR_FIRST`]: computed
/// at compile time from [`ESCR_TABLE`]. The model looks an ESCR up on
/// every MSR access and every counter of every injection; where the test
/// kernels run on a slow hypervisor (an instruction per microsecond) a
/// search through the 45 rows was most of a model injection's time.
static ESCR_BY_MSR: [u8; ESCR_MSR_SPAN] = {
    let mut by_msr = [NO_ESCR; ESCR_MSR_SPAN];
    let mut i = 0;
    while i < ESCRS {
        by_msr[(ESCR_TABLE[i].msr - ESCR_MSR_FIRST) as usize] = i as u8;
        i += 1;
    }
    by_msr
};

/// [`selected_escr`] as a table, by counter and ESCR-select value (CCCR
/// bits 15:13, eight values): computed at compile time from
/// [`ESCR_TABLE`], as [`ESCR_BY_MSR`] is.
static SELECTED_ESCR: [[u8; 8]; COUNTERS] = {
    let mut selected = [[NO_ESCR; 8]; COUNTERS];
    // The first row that matches, as a search in table order finds it.
    let mut i = ESCRS;
    while i > 0 {
        i -= 1;
        let e = &ESCR_TABLE[i];
        let mut c = 0;
        while c < COUNTERS {
            if e.feeds(c) {
                selected[c][e.select as usize] = i as u8;
            }
            c += 1;
        }
    }
    selected
};

/// An entry of the lookup tables, as an [`ESCR_TABLE`] index.
fn escr_entry(entry: Option<&u8>) -> Option<usize> {
    entry.filter(|&&i| i != NO_ESCR).map(|&i| usize::from(i))
}

/// The index in [`ESCR_TABLE`] of the ESCR at `msr`, if one is defined there.
pub fn escr_index(msr: u32) -> Option<usize> {
    let offset = usize::try_from(msr.checked_sub(ESCR_MSR_FIRST)?).ok()?;
    escr_entry(ESCR_BY_MSR.get(offset))
}

/// The index in [`ESCR_TABLE`] of the ESCR that CCCR `counter` selects with
/// ESCR-select value `select` (SDM Table 18-63), if any.
pub fn selected_escr(counter: usize, select: u8) -> Option<usize> {
    escr_entry(SELECTED_ESCR.get(counter)?.get(usize::from(select)))
}

/// The alternate counter whose overflow starts `counter` when its CCCR
/// CASCADE flag is set (SDM 18.15.5.6): the same position in the other pair
/// of the block (0<->2, 1<->3, ... 12<->14, 13<->15), except that 16 is
/// started only by 14 and 17 only by 15; 14 and 15 are never started by 16
/// and 17 through CASCADE.
pub const CASCADE_ALTERNATE: [u8; COUNTERS] =
    [2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13, 14, 15];

/// Extended cascading (SDM 18.15.5.7, Table 18-65): for the counter whose
/// CCCR bit 11 is defined, the counter whose overflow starts it:
/// IQ_CCCR0 CASCNT4INTO0 (16 -> 12), IQ_CCCR3 CASCNT5INTO3 (17 -> 15),
/// IQ_CCCR4 CASCNT5INTO4 (17 -> 16), IQ_CCCR5 CASCNT4INTO5 (16 -> 17).
pub const fn extended_cascade_source(counter: usize) -> Option<usize> {
    match counter {
        12 => Some(16),
        15 => Some(17),
        16 => Some(17),
        17 => Some(16),
        _ => None,
    }
}

/// Whether the model supports extended cascading (CPUID 0F_02, 0F_03, 0F_04,
/// 0F_06; SDM 18.15.5.7).
pub const fn has_extended_cascading(model: u8) -> bool {
    matches!(model, 2 | 3 | 4 | 6)
}

/// Whether an event is thread-specific or thread-independent (SDM Table
/// 18-30): the driver's vocabulary type (the model lists no event as
/// `Unlisted`).
pub use crate::arch::netburst::Specificity;

/// The TI events of SDM Table 19-34, by group and event select; every other
/// event is TS. b2b_cycles (16H), bnr (08H), snoop (06H) and response (04H)
/// on the FSB ESCRs are not in Table 19-34; the model treats these bus-level
/// events as TI (as FreeBSD's hwpmc does); see the module docs.
pub static TI_EVENTS: [(EscrGroup, u8); 17] = [
    (EscrGroup::Tc, 0x01),   // TC_deliver_mode
    (EscrGroup::Pmh, 0x01),  // page_walk_type
    (EscrGroup::Fsb, 0x17),  // FSB_data_activity
    (EscrGroup::Firm, 0x34), // SSE_input_assist
    (EscrGroup::Firm, 0x08), // packed_SP_uop
    (EscrGroup::Firm, 0x0C), // packed_DP_uop
    (EscrGroup::Firm, 0x0A), // scalar_SP_uop
    (EscrGroup::Firm, 0x0E), // scalar_DP_uop
    (EscrGroup::Firm, 0x02), // 64bit_MMX_uop
    (EscrGroup::Firm, 0x1A), // 128bit_MMX_uop
    (EscrGroup::Firm, 0x04), // x87_FP_uop
    (EscrGroup::Firm, 0x2E), // x87_SIMD_moves_uop
    (EscrGroup::Dac, 0x05),  // WC_Buffer
    (EscrGroup::Fsb, 0x16),  // b2b_cycles (not in Table 19-34)
    (EscrGroup::Fsb, 0x08),  // bnr (not in Table 19-34)
    (EscrGroup::Fsb, 0x06),  // snoop (not in Table 19-34)
    (EscrGroup::Fsb, 0x04),  // response (not in Table 19-34)
];

/// The specificity of event `select` on ESCR group `group`.
pub fn specificity(group: EscrGroup, select: u8) -> Specificity {
    if TI_EVENTS.iter().any(|&(g, s)| g == group && s == select) {
        Specificity::ThreadIndependent
    } else {
        Specificity::ThreadSpecific
    }
}

/// Events that only one ESCR of their pair can count (SDM Table 19-28 ESCR
/// restrictions): (group, event select, the only side that counts it).
pub static SIDE_RESTRICTIONS: [(EscrGroup, u8, u8); 3] = [
    (EscrGroup::Bsu, 0x05, 0), // BSQ_allocation: BSU_ESCR0 only
    (EscrGroup::Bsu, 0x06, 1), // BSQ_active_entries: BSU_ESCR1 only
    (EscrGroup::Fsb, 0x1A, 1), // IOQ_active_entries: FSB_ESCR1 only
];

/// Whether an ESCR on `side` can see event `select` of `group`.
pub fn side_allows(group: EscrGroup, select: u8, side: u8) -> bool {
    SIDE_RESTRICTIONS
        .iter()
        .all(|&(g, s, only)| !(g == group && s == select) || only == side)
}

/// The event selects of the at-retirement events on CRU_ESCR2/3.
pub mod retirement {
    /// front_end_event (mask bit 0 NBOGUS, bit 1 BOGUS).
    pub const FRONT_END_EVENT: u8 = 0x08;
    /// execution_event (mask bits 3:0 NBOGUS0-3, 7:4 BOGUS0-3).
    pub const EXECUTION_EVENT: u8 = 0x0C;
    /// replay_event (mask bit 0 NBOGUS, bit 1 BOGUS).
    pub const REPLAY_EVENT: u8 = 0x09;
    /// uops_retired on CRU_ESCR0/1 (mask bit 0 NBOGUS, bit 1 BOGUS).
    pub const UOPS_RETIRED: u8 = 0x01;
    /// uop_type on RAT_ESCR0/1 (mask bit 1 TAGLOADS, bit 2 TAGSTORES).
    pub const UOP_TYPE: u8 = 0x02;
}

//! The 46 NetBurst events: SDM Vol. 3B Table 19-28 (non-retirement
//! counting), Table 19-29 (at-retirement counting), Table 19-34 (TS/TI
//! qualification) and Table 19-33 (replay-tagging metrics).
//!
//! The table is in libpfm4/Linux order (index = Linux `enum P4_EVENTS`).
//! Names are the SDM's; where libpfm4 spells a name differently the other
//! spelling is kept as an alias so that libpfm4 event strings still parse.
//!
//! # Source disagreements and the resolution chosen
//!
//! The Intel manual is followed throughout; the reference tables list the
//! disagreements, resolved as follows:
//!
//! | topic | sources | resolution |
//! |---|---|---|
//! | `memory_complete` bits 2 `USC`, 3 `ULC`; `BSQ_cache_reference` 6, 7, 11; `WC_Buffer` 2 `WCB_HITM_EVICT`; branch-type bit 0 `UNCONDITIONAL` | listed only in SDM Table 19-34 (qualification), not in the event definitions of Table 19-28, libpfm4 or Linux | Table 19-28 defines the masks; bits it does not define are reserved (SDM 18.15.5.1) and rejected |
//! | `b2b_cycles` `BIT5`, `BIT6` | libpfm4 encodes both as bit 4; SDM Table 19-28 "mask bits 1 through 6" | SDM: `BITn` is mask bit n (strings using them differ from libpfm4's images, deliberately) |
//! | `machine_clear` `MOCLEAR`/`SMCLEAR` | Linux bits 1/2; SDM Table 19-29 and libpfm4 bits 2/6 | SDM: 2 and 6 |
//! | `TC_deliver_mode` `IB` (bit 7) | missing in Linux | SDM Table 19-28: present |
//! | `ITLB_reference` bit 2 | Linux `HIT_UK` | SDM `HIT_UC` |
//! | `mispred_branch_retired` bit 0 | libpfm4 `BOGUS`; SDM Table 19-29 and Linux `NBOGUS` | `NBOGUS`, with `BOGUS` accepted as a libpfm4 alias (same bit) |
//! | `uop_type` | libpfm4 `uops_type` | SDM `uop_type`, `uops_type` accepted |
//! | `instr_completed` ESCRs | libpfm4 `{CRU_ESCR2, CRU_ESCR1}` | SDM Table 19-29: `CRU_ESCR0/1`, select 4 |
//! | `retired_mispred_branch_type` ESCRs | Linux binds `TBPU_ESCR0` for both threads | SDM Table 19-28: `TBPU_ESCR0` (4, 5) and `TBPU_ESCR1` (6, 7) |
//! | `store_port_replay` at-retirement ESCR | Table 19-28 "must use ESCR1"; Table 19-33 (`split_store_retired`) `MSR_SAAT_ESCR0` | Table 19-28 (`SAAT_ESCR1`), agreeing with `load_port_replay` in both tables |
//! | `BSQ_active_entries`, `b2b_cycles`, `bnr`, `snoop`, `response` TS/TI | not in SDM Table 19-34; FreeBSD calls them TI / inherited TS | [`Specificity::Unlisted`]; callers choose |
//! | `b2b_cycles`, `bnr`, `snoop`, `response` CCCR select | SDM Table 19-28 and all code sources: 3; SDM Table 18-63: their `FSB_ESCR0/1` answer to select 6 (select 3 on counters 0-3 is `ITLB_ESCR0/1`) | SDM self-contradiction, unresolvable without hardware: the catalog keeps 3 (libpfm4-identical images) and marks the events with [`Constraint::DisputedEscrSelect`]; [`crate::arch::netburst::Assignment`] routes by Table 18-63 |
//! | `replay_event` bits 2-10 | libpfm4 virtual metric selectors, dropped from the ESCR (`& 0x3`) | kept as [`MaskKind::ReplayMetric`]: not ESCR bits (so the ESCR image equals libpfm4's), used by the replay-tagging builder |

use super::escr::{EventMask, EventSelect};
use super::msrs::Escr;
use super::msrs::EscrSelect;

/// Which SDM table an event comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Counting {
    /// Table 19-28: counted as it happens.
    NonRetirement,
    /// Table 19-29: counted when the (tagged) µop retires.
    AtRetirement,
}

/// Logical-processor qualification (SDM Table 19-34).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Specificity {
    /// TS: attributable to one logical processor (Table 18-29 applies).
    ThreadSpecific,
    /// TI: not attributable (Table 18-30 applies).
    ThreadIndependent,
    /// Not listed in Table 19-34.
    Unlisted,
}

/// The tagging mechanisms of SDM 18.15.6.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Tagging {
    /// Front-end tagging (18.15.6.2, Table 19-31).
    FrontEnd,
    /// Execution tagging (18.15.6.3, Table 19-32).
    Execution,
    /// Replay tagging (18.15.6.4, Table 19-33).
    Replay,
}

/// A per-event rule beyond the ESCR list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Constraint {
    /// Must be programmed together with this other event (Table 19-28:
    /// `IOQ_active_entries` with `IOQ_allocation`).
    RequiresCompanion(Event),
    /// At-retirement counting (as a replay-tagging upstream event) must use
    /// this ESCR.
    AtRetirementEscr(Escr),
    /// An upstream event that tags µops for this downstream event.
    TagsFor(Event),
    /// Counts only µops tagged by this mechanism.
    NeedsTagging(Tagging),
    /// The counter increments twice per occurrence (`TC_misc`).
    CountsTwice,
    /// Use CCCR `EDGE` to count occurrences rather than cycles.
    UseEdge,
    /// Before CPUID signature F27H only `FSB_ESCR0` exists and the CPL
    /// qualification is ignored (Table 19-28 note on `IOQ_allocation`).
    FsbEscr0OnlyBeforeF27,
    /// The per-cycle increment is clipped at 15 (`IOQ_active_entries`).
    ClippedAt15,
    /// The event's CCCR select (Table 19-28, also libpfm4, Linux, FreeBSD)
    /// differs from the select value Table 18-63 gives its ESCRs. The
    /// catalog keeps the Table 19-28 value (so [`EventInfo::escr_select`]
    /// and libpfm4's CCCR image agree); [`crate::arch::netburst::Assignment::select`]
    /// gives the Table 18-63 routing value.
    DisputedEscrSelect {
        /// The value Table 18-63 assigns to the event's ESCRs.
        table_18_63: u8,
    },
}

/// The replay-tagging metrics of SDM Table 19-33 (libpfm4's virtual
/// `replay_event` masks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ReplayMetric {
    /// `1stL_cache_load_miss_retired`.
    L1LoadMiss,
    /// `2ndL_cache_load_miss_retired`.
    L2LoadMiss,
    /// `DTLB_load_miss_retired`.
    DtlbLoadMiss,
    /// `DTLB_store_miss_retired`.
    DtlbStoreMiss,
    /// `DTLB_all_miss_retired`.
    DtlbAllMiss,
    /// `Tagged_mispred_branch`.
    TaggedMispredBranch,
    /// `MOB_load_replay_retired`.
    MobLoadReplay,
    /// `split_load_retired`.
    SplitLoad,
    /// `split_store_retired`.
    SplitStore,
}

/// The upstream event a replay metric needs besides `replay_event`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ReplayUpstream {
    /// The event.
    pub event: Event,
    /// Its mask.
    pub mask: EventMask,
    /// The ESCR it must use, if restricted.
    pub escr: Option<Escr>,
}

impl ReplayMetric {
    /// All nine metrics.
    pub const ALL: [ReplayMetric; 9] = [
        ReplayMetric::L1LoadMiss,
        ReplayMetric::L2LoadMiss,
        ReplayMetric::DtlbLoadMiss,
        ReplayMetric::DtlbStoreMiss,
        ReplayMetric::DtlbAllMiss,
        ReplayMetric::TaggedMispredBranch,
        ReplayMetric::MobLoadReplay,
        ReplayMetric::SplitLoad,
        ReplayMetric::SplitStore,
    ];

    /// The SDM name.
    pub const fn name(self) -> &'static str {
        match self {
            ReplayMetric::L1LoadMiss => "1stL_cache_load_miss_retired",
            ReplayMetric::L2LoadMiss => "2ndL_cache_load_miss_retired",
            ReplayMetric::DtlbLoadMiss => "DTLB_load_miss_retired",
            ReplayMetric::DtlbStoreMiss => "DTLB_store_miss_retired",
            ReplayMetric::DtlbAllMiss => "DTLB_all_miss_retired",
            ReplayMetric::TaggedMispredBranch => "Tagged_mispred_branch",
            ReplayMetric::MobLoadReplay => "MOB_load_replay_retired",
            ReplayMetric::SplitLoad => "split_load_retired",
            ReplayMetric::SplitStore => "split_store_retired",
        }
    }

    /// The metric-select bits of `MSR_PEBS_ENABLE` (Table 19-33, without
    /// bit 24 `UOP_Tag` and bit 25 `ENABLE_PEBS`).
    ///
    /// libpfm3 adds bit 0 for `Tagged_mispred_branch`; the SDM and Linux do
    /// not, and neither does this crate.
    pub const fn pebs_enable_bits(self) -> u64 {
        match self {
            ReplayMetric::L1LoadMiss => 1 << 0,
            ReplayMetric::L2LoadMiss => 1 << 1,
            ReplayMetric::DtlbLoadMiss
            | ReplayMetric::DtlbStoreMiss
            | ReplayMetric::DtlbAllMiss => 1 << 2,
            ReplayMetric::TaggedMispredBranch => 1 << 15 | 1 << 16,
            ReplayMetric::MobLoadReplay => 1 << 9,
            ReplayMetric::SplitLoad | ReplayMetric::SplitStore => 1 << 10,
        }
    }

    /// The `MSR_PEBS_MATRIX_VERT` bits (Table 19-33: bit 0 loads, bit 1
    /// stores, bit 4 tagged mispredicted branches).
    pub const fn matrix_vert_bits(self) -> u64 {
        match self {
            ReplayMetric::DtlbStoreMiss | ReplayMetric::SplitStore => 1 << 1,
            ReplayMetric::DtlbAllMiss => 1 << 0 | 1 << 1,
            ReplayMetric::TaggedMispredBranch => 1 << 4,
            _ => 1 << 0,
        }
    }

    /// The additional upstream event of Table 19-33, if any.
    pub const fn upstream(self) -> Option<ReplayUpstream> {
        match self {
            // PARTIAL_DATA (4) and UNALGN_ADDR (5).
            ReplayMetric::MobLoadReplay => Some(ReplayUpstream {
                event: Event::MobLoadReplay,
                mask: EventMask(1 << 4 | 1 << 5),
                escr: None,
            }),
            ReplayMetric::SplitLoad => Some(ReplayUpstream {
                event: Event::LoadPortReplay,
                mask: EventMask(1 << 1),
                escr: Some(Escr::SaatEscr1),
            }),
            ReplayMetric::SplitStore => Some(ReplayUpstream {
                event: Event::StorePortReplay,
                mask: EventMask(1 << 1),
                escr: Some(Escr::SaatEscr1),
            }),
            _ => None,
        }
    }
}

/// What selecting a named mask does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum MaskKind {
    /// Sets SDM event-mask bit n (ESCR bit 9 + n).
    Bit(u8),
    /// libpfm4 `TAGn` pseudo-mask: sets tag-value bit n and tag enable
    /// (execution-tagging upstream, SDM 18.15.6.3).
    Tag(u8),
    /// libpfm4 virtual `replay_event` mask: selects a Table 19-33 metric; no
    /// ESCR bit.
    ReplayMetric(ReplayMetric),
}

/// One named mask of an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MaskInfo {
    /// The SDM name (or libpfm4's for pseudo-masks).
    pub name: &'static str,
    /// Another accepted spelling (libpfm4's), if different.
    pub alias: Option<&'static str>,
    /// What it selects.
    pub kind: MaskKind,
    /// Used when the event string names no mask (libpfm4 default).
    pub default: bool,
}

const fn m(name: &'static str, bit: u8) -> MaskInfo {
    MaskInfo {
        name,
        alias: None,
        kind: MaskKind::Bit(bit),
        default: false,
    }
}

const fn d(name: &'static str, bit: u8) -> MaskInfo {
    MaskInfo {
        name,
        alias: None,
        kind: MaskKind::Bit(bit),
        default: true,
    }
}

const fn tag(name: &'static str, n: u8) -> MaskInfo {
    MaskInfo {
        name,
        alias: None,
        kind: MaskKind::Tag(n),
        default: false,
    }
}

const fn metric(name: &'static str, r: ReplayMetric) -> MaskInfo {
    MaskInfo {
        name,
        alias: None,
        kind: MaskKind::ReplayMetric(r),
        default: false,
    }
}

/// Everything the catalog knows about one event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EventInfo {
    /// SDM name.
    pub name: &'static str,
    /// libpfm4's name where it differs.
    pub alias: Option<&'static str>,
    /// ESCR event select.
    pub event_select: EventSelect,
    /// CCCR ESCR select.
    pub escr_select: EscrSelect,
    /// The ESCRs the event can be programmed on.
    pub escrs: &'static [Escr],
    /// The named masks.
    pub masks: &'static [MaskInfo],
    /// TS/TI (Table 19-34).
    pub specificity: Specificity,
    /// Table 19-28 or 19-29.
    pub counting: Counting,
    /// Additional rules.
    pub constraints: &'static [Constraint],
}

#[allow(clippy::too_many_arguments)] // one table row
const fn ev(
    name: &'static str,
    select: u8,
    escr_select: u8,
    escrs: &'static [Escr],
    masks: &'static [MaskInfo],
    specificity: Specificity,
    counting: Counting,
    constraints: &'static [Constraint],
) -> EventInfo {
    EventInfo {
        name,
        alias: None,
        event_select: EventSelect::from_bits_truncate(select),
        escr_select: EscrSelect::from_bits_truncate(escr_select),
        escrs,
        masks,
        specificity,
        counting,
        constraints,
    }
}

/// Defines [`Event`] and [`Event::ALL`] from one list, so the two cannot drift.
macro_rules! events {
    ($($name:ident),+ $(,)?) => {
        /// The 46 events, in libpfm4/Linux order.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        #[repr(u8)]
        #[allow(missing_docs)] // see `Event::info().name`
        pub enum Event {
            $($name),+
        }

        impl Event {
            /// All 46 events in catalog order.
            pub const ALL: [Event; 46] = [$(Event::$name),+];
        }
    };
}

events! {
    TcDeliverMode,
    BpuFetchRequest,
    ItlbReference,
    MemoryCancel,
    MemoryComplete,
    LoadPortReplay,
    StorePortReplay,
    MobLoadReplay,
    PageWalkType,
    BsqCacheReference,
    IoqAllocation,
    IoqActiveEntries,
    FsbDataActivity,
    BsqAllocation,
    BsqActiveEntries,
    SseInputAssist,
    PackedSpUop,
    PackedDpUop,
    ScalarSpUop,
    ScalarDpUop,
    Mmx64BitUop,
    Mmx128BitUop,
    X87FpUop,
    TcMisc,
    GlobalPowerEvents,
    TcMsXfer,
    UopQueueWrites,
    RetiredMispredBranchType,
    RetiredBranchType,
    ResourceStall,
    WcBuffer,
    B2bCycles,
    Bnr,
    Snoop,
    Response,
    FrontEndEvent,
    ExecutionEvent,
    ReplayEvent,
    InstrRetired,
    UopsRetired,
    UopType,
    BranchRetired,
    MispredBranchRetired,
    X87Assist,
    MachineClear,
    InstrCompleted,
}

use Constraint as C;
use Counting::{AtRetirement as AR, NonRetirement as NR};
use Escr::*;
use Specificity::{ThreadIndependent as TI, ThreadSpecific as TS, Unlisted};

const TC: &[Escr] = &[TcEscr0, TcEscr1];
const FSB: &[Escr] = &[FsbEscr0, FsbEscr1];
const FIRM: &[Escr] = &[FirmEscr0, FirmEscr1];
const SAAT: &[Escr] = &[SaatEscr0, SaatEscr1];
const DAC: &[Escr] = &[DacEscr0, DacEscr1];
const CRU01: &[Escr] = &[CruEscr0, CruEscr1];
const CRU23: &[Escr] = &[CruEscr2, CruEscr3];
const MS: &[Escr] = &[MsEscr0, MsEscr1];
const TBPU: &[Escr] = &[TbpuEscr0, TbpuEscr1];

const IOQ_MASKS: &[MaskInfo] = &[
    m("TYPE_BIT0", 0),
    m("TYPE_BIT1", 1),
    m("TYPE_BIT2", 2),
    m("TYPE_BIT3", 3),
    m("TYPE_BIT4", 4),
    m("ALL_READ", 5),
    m("ALL_WRITE", 6),
    m("MEM_UC", 7),
    m("MEM_WC", 8),
    m("MEM_WT", 9),
    m("MEM_WP", 10),
    m("MEM_WB", 11),
    m("OWN", 13),
    m("OTHER", 14),
    m("PREFETCH", 15),
];

const BSQ_MASKS: &[MaskInfo] = &[
    m("REQ_TYPE0", 0),
    m("REQ_TYPE1", 1),
    m("REQ_LEN0", 2),
    m("REQ_LEN1", 3),
    m("REQ_IO_TYPE", 5),
    m("REQ_LOCK_TYPE", 6),
    m("REQ_CACHE_TYPE", 7),
    m("REQ_SPLIT_TYPE", 8),
    m("REQ_DEM_TYPE", 9),
    m("REQ_ORD_TYPE", 10),
    m("MEM_TYPE0", 11),
    m("MEM_TYPE1", 12),
    m("MEM_TYPE2", 13),
];

const UOP_MASKS: &[MaskInfo] = &[
    d("ALL", 15),
    tag("TAG0", 0),
    tag("TAG1", 1),
    tag("TAG2", 2),
    tag("TAG3", 3),
];

const BRANCH_TYPE_MASKS: &[MaskInfo] = &[
    m("CONDITIONAL", 1),
    m("CALL", 2),
    m("RETURN", 3),
    m("INDIRECT", 4),
];

const NBOGUS_BOGUS: &[MaskInfo] = &[m("NBOGUS", 0), m("BOGUS", 1)];

const FSB_DISPUTED: &[Constraint] = &[C::DisputedEscrSelect { table_18_63: 6 }];

const UPSTREAM_EXEC: &[Constraint] = &[C::TagsFor(Event::ExecutionEvent)];

/// The catalog, indexed by `Event as usize`.
static EVENTS: [EventInfo; 46] = [
    ev(
        "TC_deliver_mode",
        0x01,
        1,
        TC,
        &[
            m("DD", 0),
            m("DB", 1),
            m("DI", 2),
            m("BD", 3),
            m("BB", 4),
            m("BI", 5),
            m("ID", 6),
            m("IB", 7),
        ],
        TI,
        NR,
        &[],
    ),
    ev(
        "BPU_fetch_request",
        0x03,
        0,
        &[BpuEscr0, BpuEscr1],
        &[d("TCMISS", 0)],
        TS,
        NR,
        &[],
    ),
    ev(
        "ITLB_reference",
        0x18,
        3,
        &[ItlbEscr0, ItlbEscr1],
        &[m("HIT", 0), m("MISS", 1), m("HIT_UC", 2)],
        TS,
        NR,
        &[],
    ),
    ev(
        "memory_cancel",
        0x02,
        5,
        DAC,
        &[m("ST_RB_FULL", 2), m("64K_CONF", 3)],
        TS,
        NR,
        &[],
    ),
    ev(
        "memory_complete",
        0x08,
        2,
        SAAT,
        &[m("LSC", 0), m("SSC", 1)],
        TS,
        NR,
        &[],
    ),
    ev(
        "load_port_replay",
        0x04,
        2,
        SAAT,
        &[d("SPLIT_LD", 1)],
        TS,
        NR,
        &[C::AtRetirementEscr(SaatEscr1)],
    ),
    ev(
        "store_port_replay",
        0x05,
        2,
        SAAT,
        &[d("SPLIT_ST", 1)],
        TS,
        NR,
        &[C::AtRetirementEscr(SaatEscr1)],
    ),
    ev(
        "MOB_load_replay",
        0x03,
        2,
        &[MobEscr0, MobEscr1],
        &[
            m("NO_STA", 1),
            m("NO_STD", 3),
            m("PARTIAL_DATA", 4),
            m("UNALGN_ADDR", 5),
        ],
        TS,
        NR,
        &[],
    ),
    ev(
        "page_walk_type",
        0x01,
        4,
        &[PmhEscr0, PmhEscr1],
        &[m("DTMISS", 0), m("ITMISS", 1)],
        TI,
        NR,
        &[],
    ),
    ev(
        "BSQ_cache_reference",
        0x0C,
        7,
        &[BsuEscr0, BsuEscr1],
        &[
            m("RD_2ndL_HITS", 0),
            m("RD_2ndL_HITE", 1),
            m("RD_2ndL_HITM", 2),
            m("RD_3rdL_HITS", 3),
            m("RD_3rdL_HITE", 4),
            m("RD_3rdL_HITM", 5),
            m("RD_2ndL_MISS", 8),
            m("RD_3rdL_MISS", 9),
            m("WR_2ndL_MISS", 10),
        ],
        TS,
        NR,
        &[],
    ),
    ev(
        "IOQ_allocation",
        0x03,
        6,
        FSB,
        IOQ_MASKS,
        TS,
        NR,
        &[C::FsbEscr0OnlyBeforeF27],
    ),
    ev(
        "IOQ_active_entries",
        0x1A,
        6,
        &[FsbEscr1],
        IOQ_MASKS,
        TS,
        NR,
        &[
            C::RequiresCompanion(Event::IoqAllocation),
            C::ClippedAt15,
            C::FsbEscr0OnlyBeforeF27,
        ],
    ),
    ev(
        "FSB_data_activity",
        0x17,
        6,
        FSB,
        &[
            m("DRDY_DRV", 0),
            m("DRDY_OWN", 1),
            m("DRDY_OTHER", 2),
            m("DBSY_DRV", 3),
            m("DBSY_OWN", 4),
            m("DBSY_OTHER", 5),
        ],
        TI,
        NR,
        &[C::UseEdge],
    ),
    ev(
        "BSQ_allocation",
        0x05,
        7,
        &[BsuEscr0],
        BSQ_MASKS,
        TS,
        NR,
        &[],
    ),
    ev(
        "BSQ_active_entries",
        0x06,
        7,
        &[BsuEscr1],
        BSQ_MASKS,
        Unlisted,
        NR,
        &[],
    ),
    ev(
        "SSE_input_assist",
        0x34,
        1,
        FIRM,
        &[d("ALL", 15)],
        TI,
        NR,
        &[],
    ),
    ev(
        "packed_SP_uop",
        0x08,
        1,
        FIRM,
        UOP_MASKS,
        TI,
        NR,
        UPSTREAM_EXEC,
    ),
    ev(
        "packed_DP_uop",
        0x0C,
        1,
        FIRM,
        UOP_MASKS,
        TI,
        NR,
        UPSTREAM_EXEC,
    ),
    ev(
        "scalar_SP_uop",
        0x0A,
        1,
        FIRM,
        UOP_MASKS,
        TI,
        NR,
        UPSTREAM_EXEC,
    ),
    ev(
        "scalar_DP_uop",
        0x0E,
        1,
        FIRM,
        UOP_MASKS,
        TI,
        NR,
        UPSTREAM_EXEC,
    ),
    ev(
        "64bit_MMX_uop",
        0x02,
        1,
        FIRM,
        UOP_MASKS,
        TI,
        NR,
        UPSTREAM_EXEC,
    ),
    ev(
        "128bit_MMX_uop",
        0x1A,
        1,
        FIRM,
        UOP_MASKS,
        TI,
        NR,
        UPSTREAM_EXEC,
    ),
    ev(
        "x87_FP_uop",
        0x04,
        1,
        FIRM,
        UOP_MASKS,
        TI,
        NR,
        UPSTREAM_EXEC,
    ),
    ev(
        "TC_misc",
        0x06,
        1,
        TC,
        &[d("FLUSH", 4)],
        TS,
        NR,
        &[C::CountsTwice],
    ),
    ev(
        "global_power_events",
        0x13,
        6,
        FSB,
        &[d("RUNNING", 0)],
        TS,
        NR,
        &[],
    ),
    ev("tc_ms_xfer", 0x05, 0, MS, &[d("CISC", 0)], TS, NR, &[]),
    ev(
        "uop_queue_writes",
        0x09,
        0,
        MS,
        &[
            m("FROM_TC_BUILD", 0),
            m("FROM_TC_DELIVER", 1),
            m("FROM_ROM", 2),
        ],
        TS,
        NR,
        &[],
    ),
    ev(
        "retired_mispred_branch_type",
        0x05,
        2,
        TBPU,
        BRANCH_TYPE_MASKS,
        TS,
        NR,
        &[],
    ),
    ev(
        "retired_branch_type",
        0x04,
        2,
        TBPU,
        BRANCH_TYPE_MASKS,
        TS,
        NR,
        &[],
    ),
    ev(
        "resource_stall",
        0x01,
        1,
        &[AlfEscr0, AlfEscr1],
        &[d("SBFULL", 5)],
        TS,
        NR,
        &[],
    ),
    ev(
        "WC_Buffer",
        0x05,
        5,
        DAC,
        &[m("WCB_EVICTS", 0), m("WCB_FULL_EVICT", 1)],
        TI,
        NR,
        &[],
    ),
    ev(
        "b2b_cycles",
        0x16,
        3,
        FSB,
        &[
            m("BIT1", 1),
            m("BIT2", 2),
            m("BIT3", 3),
            m("BIT4", 4),
            m("BIT5", 5),
            m("BIT6", 6),
        ],
        Unlisted,
        NR,
        FSB_DISPUTED,
    ),
    ev(
        "bnr",
        0x08,
        3,
        FSB,
        &[m("BIT0", 0), m("BIT1", 1), m("BIT2", 2)],
        Unlisted,
        NR,
        FSB_DISPUTED,
    ),
    ev(
        "snoop",
        0x06,
        3,
        FSB,
        &[m("BIT2", 2), m("BIT6", 6), m("BIT7", 7)],
        Unlisted,
        NR,
        FSB_DISPUTED,
    ),
    ev(
        "response",
        0x04,
        3,
        FSB,
        &[m("BIT1", 1), m("BIT2", 2), m("BIT8", 8), m("BIT9", 9)],
        Unlisted,
        NR,
        FSB_DISPUTED,
    ),
    ev(
        "front_end_event",
        0x08,
        5,
        CRU23,
        NBOGUS_BOGUS,
        TS,
        AR,
        &[C::NeedsTagging(Tagging::FrontEnd)],
    ),
    ev(
        "execution_event",
        0x0C,
        5,
        CRU23,
        &[
            m("NBOGUS0", 0),
            m("NBOGUS1", 1),
            m("NBOGUS2", 2),
            m("NBOGUS3", 3),
            m("BOGUS0", 4),
            m("BOGUS1", 5),
            m("BOGUS2", 6),
            m("BOGUS3", 7),
        ],
        TS,
        AR,
        &[C::NeedsTagging(Tagging::Execution)],
    ),
    ev(
        "replay_event",
        0x09,
        5,
        CRU23,
        &[
            m("NBOGUS", 0),
            m("BOGUS", 1),
            metric("L1_LD_MISS", ReplayMetric::L1LoadMiss),
            metric("L2_LD_MISS", ReplayMetric::L2LoadMiss),
            metric("DTLB_LD_MISS", ReplayMetric::DtlbLoadMiss),
            metric("DTLB_ST_MISS", ReplayMetric::DtlbStoreMiss),
            metric("DTLB_ALL_MISS", ReplayMetric::DtlbAllMiss),
            metric("BR_MSP", ReplayMetric::TaggedMispredBranch),
            metric("MOB_LD_REPLAY", ReplayMetric::MobLoadReplay),
            metric("SP_LD_RET", ReplayMetric::SplitLoad),
            metric("SP_ST_RET", ReplayMetric::SplitStore),
        ],
        TS,
        AR,
        &[C::NeedsTagging(Tagging::Replay)],
    ),
    ev(
        "instr_retired",
        0x02,
        4,
        CRU01,
        &[
            m("NBOGUSNTAG", 0),
            m("NBOGUSTAG", 1),
            m("BOGUSNTAG", 2),
            m("BOGUSTAG", 3),
        ],
        TS,
        AR,
        &[],
    ),
    ev("uops_retired", 0x01, 4, CRU01, NBOGUS_BOGUS, TS, AR, &[]),
    EventInfo {
        alias: Some("uops_type"),
        ..ev(
            "uop_type",
            0x02,
            2,
            &[RatEscr0, RatEscr1],
            &[m("TAGLOADS", 1), m("TAGSTORES", 2)],
            TS,
            AR,
            &[C::TagsFor(Event::FrontEndEvent)],
        )
    },
    ev(
        "branch_retired",
        0x06,
        5,
        CRU23,
        &[m("MMNP", 0), m("MMNM", 1), m("MMTP", 2), m("MMTM", 3)],
        TS,
        AR,
        &[],
    ),
    ev(
        "mispred_branch_retired",
        0x03,
        4,
        CRU01,
        &[MaskInfo {
            alias: Some("BOGUS"),
            ..d("NBOGUS", 0)
        }],
        TS,
        AR,
        &[],
    ),
    ev(
        "x87_assist",
        0x03,
        5,
        CRU23,
        &[
            m("FPSU", 0),
            m("FPSO", 1),
            m("POAO", 2),
            m("POAU", 3),
            m("PREA", 4),
        ],
        TS,
        AR,
        &[],
    ),
    ev(
        "machine_clear",
        0x02,
        5,
        CRU23,
        &[m("CLEAR", 0), m("MOCLEAR", 2), m("SMCLEAR", 6)],
        TS,
        AR,
        &[C::UseEdge],
    ),
    ev("instr_completed", 0x07, 4, CRU01, NBOGUS_BOGUS, TS, AR, &[]),
];

impl Event {
    /// The catalog entry.
    pub fn info(self) -> &'static EventInfo {
        &EVENTS[self as usize]
    }

    /// The SDM name.
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// Look up an event by SDM or libpfm4 name, ignoring ASCII case.
    pub fn from_name(name: &str) -> Option<Event> {
        Event::ALL.into_iter().find(|e| {
            let i = e.info();
            i.name.eq_ignore_ascii_case(name)
                || i.alias.is_some_and(|a| a.eq_ignore_ascii_case(name))
        })
    }

    /// Whether the event exists on family 0Fh model `model`:
    /// `instr_completed` only on models 3, 4 and 6 (SDM Table 19-29).
    pub const fn available_on(self, model: u8) -> bool {
        match self {
            Event::InstrCompleted => matches!(model, 3 | 4 | 6),
            _ => true,
        }
    }

    /// Whether the event may be programmed on `escr`.
    pub fn allows(self, escr: Escr) -> bool {
        self.info().escrs.contains(&escr)
    }
}

impl EventInfo {
    /// The index of the mask called `name` (SDM or libpfm4 spelling,
    /// ignoring ASCII case).
    pub fn mask_index(&self, name: &str) -> Option<usize> {
        self.masks.iter().position(|mi| {
            mi.name.eq_ignore_ascii_case(name)
                || mi.alias.is_some_and(|a| a.eq_ignore_ascii_case(name))
        })
    }

    /// The index of the default mask, if the event has one.
    pub fn default_mask(&self) -> Option<usize> {
        self.masks.iter().position(|mi| mi.default)
    }

    /// The union of all real (ESCR) mask bits the event defines.
    pub fn valid_mask_bits(&self) -> EventMask {
        self.masks
            .iter()
            .fold(EventMask::EMPTY, |acc, mi| match mi.kind {
                MaskKind::Bit(b) => acc.union(EventMask(1 << b)),
                _ => acc,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference: netburst_events.md, one row per event, transcribed
    /// independently: (name, EvSel, CCCRsel, ESCR MSRs, masks as
    /// (name, bit, default), TS/TI: 'S', 'I' or '-').
    type Row = (
        &'static str,
        u8,
        u8,
        &'static [u32],
        &'static [(&'static str, u8, bool)],
        char,
    );
    const REF: &[Row] = &[
        (
            "TC_deliver_mode",
            0x01,
            1,
            &[0x3C4, 0x3C5],
            &[
                ("DD", 0, false),
                ("DB", 1, false),
                ("DI", 2, false),
                ("BD", 3, false),
                ("BB", 4, false),
                ("BI", 5, false),
                ("ID", 6, false),
                ("IB", 7, false),
            ],
            'I',
        ),
        (
            "BPU_fetch_request",
            0x03,
            0,
            &[0x3B2, 0x3B3],
            &[("TCMISS", 0, true)],
            'S',
        ),
        (
            "ITLB_reference",
            0x18,
            3,
            &[0x3B6, 0x3B7],
            &[("HIT", 0, false), ("MISS", 1, false), ("HIT_UC", 2, false)],
            'S',
        ),
        (
            "memory_cancel",
            0x02,
            5,
            &[0x3A8, 0x3A9],
            &[("ST_RB_FULL", 2, false), ("64K_CONF", 3, false)],
            'S',
        ),
        (
            "memory_complete",
            0x08,
            2,
            &[0x3AE, 0x3AF],
            &[("LSC", 0, false), ("SSC", 1, false)],
            'S',
        ),
        (
            "load_port_replay",
            0x04,
            2,
            &[0x3AE, 0x3AF],
            &[("SPLIT_LD", 1, true)],
            'S',
        ),
        (
            "store_port_replay",
            0x05,
            2,
            &[0x3AE, 0x3AF],
            &[("SPLIT_ST", 1, true)],
            'S',
        ),
        (
            "MOB_load_replay",
            0x03,
            2,
            &[0x3AA, 0x3AB],
            &[
                ("NO_STA", 1, false),
                ("NO_STD", 3, false),
                ("PARTIAL_DATA", 4, false),
                ("UNALGN_ADDR", 5, false),
            ],
            'S',
        ),
        (
            "page_walk_type",
            0x01,
            4,
            &[0x3AC, 0x3AD],
            &[("DTMISS", 0, false), ("ITMISS", 1, false)],
            'I',
        ),
        (
            "BSQ_cache_reference",
            0x0C,
            7,
            &[0x3A0, 0x3A1],
            &[
                ("RD_2ndL_HITS", 0, false),
                ("RD_2ndL_HITE", 1, false),
                ("RD_2ndL_HITM", 2, false),
                ("RD_3rdL_HITS", 3, false),
                ("RD_3rdL_HITE", 4, false),
                ("RD_3rdL_HITM", 5, false),
                ("RD_2ndL_MISS", 8, false),
                ("RD_3rdL_MISS", 9, false),
                ("WR_2ndL_MISS", 10, false),
            ],
            'S',
        ),
        ("IOQ_allocation", 0x03, 6, &[0x3A2, 0x3A3], REF_IOQ, 'S'),
        ("IOQ_active_entries", 0x1A, 6, &[0x3A3], REF_IOQ, 'S'),
        (
            "FSB_data_activity",
            0x17,
            6,
            &[0x3A2, 0x3A3],
            &[
                ("DRDY_DRV", 0, false),
                ("DRDY_OWN", 1, false),
                ("DRDY_OTHER", 2, false),
                ("DBSY_DRV", 3, false),
                ("DBSY_OWN", 4, false),
                ("DBSY_OTHER", 5, false),
            ],
            'I',
        ),
        ("BSQ_allocation", 0x05, 7, &[0x3A0], REF_BSQ, 'S'),
        ("BSQ_active_entries", 0x06, 7, &[0x3A1], REF_BSQ, '-'),
        (
            "SSE_input_assist",
            0x34,
            1,
            &[0x3A4, 0x3A5],
            &[("ALL", 15, true)],
            'I',
        ),
        ("packed_SP_uop", 0x08, 1, &[0x3A4, 0x3A5], REF_UOP, 'I'),
        ("packed_DP_uop", 0x0C, 1, &[0x3A4, 0x3A5], REF_UOP, 'I'),
        ("scalar_SP_uop", 0x0A, 1, &[0x3A4, 0x3A5], REF_UOP, 'I'),
        ("scalar_DP_uop", 0x0E, 1, &[0x3A4, 0x3A5], REF_UOP, 'I'),
        ("64bit_MMX_uop", 0x02, 1, &[0x3A4, 0x3A5], REF_UOP, 'I'),
        ("128bit_MMX_uop", 0x1A, 1, &[0x3A4, 0x3A5], REF_UOP, 'I'),
        ("x87_FP_uop", 0x04, 1, &[0x3A4, 0x3A5], REF_UOP, 'I'),
        (
            "TC_misc",
            0x06,
            1,
            &[0x3C4, 0x3C5],
            &[("FLUSH", 4, true)],
            'S',
        ),
        (
            "global_power_events",
            0x13,
            6,
            &[0x3A2, 0x3A3],
            &[("RUNNING", 0, true)],
            'S',
        ),
        (
            "tc_ms_xfer",
            0x05,
            0,
            &[0x3C0, 0x3C1],
            &[("CISC", 0, true)],
            'S',
        ),
        (
            "uop_queue_writes",
            0x09,
            0,
            &[0x3C0, 0x3C1],
            &[
                ("FROM_TC_BUILD", 0, false),
                ("FROM_TC_DELIVER", 1, false),
                ("FROM_ROM", 2, false),
            ],
            'S',
        ),
        (
            "retired_mispred_branch_type",
            0x05,
            2,
            &[0x3C2, 0x3C3],
            REF_BR,
            'S',
        ),
        ("retired_branch_type", 0x04, 2, &[0x3C2, 0x3C3], REF_BR, 'S'),
        (
            "resource_stall",
            0x01,
            1,
            &[0x3CA, 0x3CB],
            &[("SBFULL", 5, true)],
            'S',
        ),
        (
            "WC_Buffer",
            0x05,
            5,
            &[0x3A8, 0x3A9],
            &[("WCB_EVICTS", 0, false), ("WCB_FULL_EVICT", 1, false)],
            'I',
        ),
        (
            "b2b_cycles",
            0x16,
            3,
            &[0x3A2, 0x3A3],
            // SDM bits 1-6 (libpfm4 maps BIT5/BIT6 to bit 4: not followed).
            &[
                ("BIT1", 1, false),
                ("BIT2", 2, false),
                ("BIT3", 3, false),
                ("BIT4", 4, false),
                ("BIT5", 5, false),
                ("BIT6", 6, false),
            ],
            '-',
        ),
        (
            "bnr",
            0x08,
            3,
            &[0x3A2, 0x3A3],
            &[("BIT0", 0, false), ("BIT1", 1, false), ("BIT2", 2, false)],
            '-',
        ),
        (
            "snoop",
            0x06,
            3,
            &[0x3A2, 0x3A3],
            &[("BIT2", 2, false), ("BIT6", 6, false), ("BIT7", 7, false)],
            '-',
        ),
        (
            "response",
            0x04,
            3,
            &[0x3A2, 0x3A3],
            &[
                ("BIT1", 1, false),
                ("BIT2", 2, false),
                ("BIT8", 8, false),
                ("BIT9", 9, false),
            ],
            '-',
        ),
        (
            "front_end_event",
            0x08,
            5,
            &[0x3CC, 0x3CD],
            &[("NBOGUS", 0, false), ("BOGUS", 1, false)],
            'S',
        ),
        (
            "execution_event",
            0x0C,
            5,
            &[0x3CC, 0x3CD],
            &[
                ("NBOGUS0", 0, false),
                ("NBOGUS1", 1, false),
                ("NBOGUS2", 2, false),
                ("NBOGUS3", 3, false),
                ("BOGUS0", 4, false),
                ("BOGUS1", 5, false),
                ("BOGUS2", 6, false),
                ("BOGUS3", 7, false),
            ],
            'S',
        ),
        (
            "replay_event",
            0x09,
            5,
            &[0x3CC, 0x3CD],
            &[("NBOGUS", 0, false), ("BOGUS", 1, false)],
            'S',
        ),
        (
            "instr_retired",
            0x02,
            4,
            &[0x3B8, 0x3B9],
            &[
                ("NBOGUSNTAG", 0, false),
                ("NBOGUSTAG", 1, false),
                ("BOGUSNTAG", 2, false),
                ("BOGUSTAG", 3, false),
            ],
            'S',
        ),
        (
            "uops_retired",
            0x01,
            4,
            &[0x3B8, 0x3B9],
            &[("NBOGUS", 0, false), ("BOGUS", 1, false)],
            'S',
        ),
        (
            "uop_type",
            0x02,
            2,
            &[0x3BC, 0x3BD],
            &[("TAGLOADS", 1, false), ("TAGSTORES", 2, false)],
            'S',
        ),
        (
            "branch_retired",
            0x06,
            5,
            &[0x3CC, 0x3CD],
            &[
                ("MMNP", 0, false),
                ("MMNM", 1, false),
                ("MMTP", 2, false),
                ("MMTM", 3, false),
            ],
            'S',
        ),
        (
            "mispred_branch_retired",
            0x03,
            4,
            &[0x3B8, 0x3B9],
            &[("NBOGUS", 0, true)],
            'S',
        ),
        (
            "x87_assist",
            0x03,
            5,
            &[0x3CC, 0x3CD],
            &[
                ("FPSU", 0, false),
                ("FPSO", 1, false),
                ("POAO", 2, false),
                ("POAU", 3, false),
                ("PREA", 4, false),
            ],
            'S',
        ),
        (
            "machine_clear",
            0x02,
            5,
            &[0x3CC, 0x3CD],
            &[
                ("CLEAR", 0, false),
                ("MOCLEAR", 2, false),
                ("SMCLEAR", 6, false),
            ],
            'S',
        ),
        (
            "instr_completed",
            0x07,
            4,
            &[0x3B8, 0x3B9],
            &[("NBOGUS", 0, false), ("BOGUS", 1, false)],
            'S',
        ),
    ];
    const REF_IOQ: &[(&str, u8, bool)] = &[
        ("TYPE_BIT0", 0, false),
        ("TYPE_BIT1", 1, false),
        ("TYPE_BIT2", 2, false),
        ("TYPE_BIT3", 3, false),
        ("TYPE_BIT4", 4, false),
        ("ALL_READ", 5, false),
        ("ALL_WRITE", 6, false),
        ("MEM_UC", 7, false),
        ("MEM_WC", 8, false),
        ("MEM_WT", 9, false),
        ("MEM_WP", 10, false),
        ("MEM_WB", 11, false),
        ("OWN", 13, false),
        ("OTHER", 14, false),
        ("PREFETCH", 15, false),
    ];
    const REF_BSQ: &[(&str, u8, bool)] = &[
        ("REQ_TYPE0", 0, false),
        ("REQ_TYPE1", 1, false),
        ("REQ_LEN0", 2, false),
        ("REQ_LEN1", 3, false),
        ("REQ_IO_TYPE", 5, false),
        ("REQ_LOCK_TYPE", 6, false),
        ("REQ_CACHE_TYPE", 7, false),
        ("REQ_SPLIT_TYPE", 8, false),
        ("REQ_DEM_TYPE", 9, false),
        ("REQ_ORD_TYPE", 10, false),
        ("MEM_TYPE0", 11, false),
        ("MEM_TYPE1", 12, false),
        ("MEM_TYPE2", 13, false),
    ];
    const REF_UOP: &[(&str, u8, bool)] = &[("ALL", 15, true)];
    const REF_BR: &[(&str, u8, bool)] = &[
        ("CONDITIONAL", 1, false),
        ("CALL", 2, false),
        ("RETURN", 3, false),
        ("INDIRECT", 4, false),
    ];

    #[test]
    fn catalog_matches_reference_table() {
        assert_eq!(Event::ALL.len(), 46);
        assert_eq!(REF.len(), 46);
        for (i, (e, row)) in Event::ALL.iter().zip(REF).enumerate() {
            let (name, sel, csel, escrs, masks, tsti) = *row;
            let info = e.info();
            assert_eq!(*e as usize, i);
            assert_eq!(info.name, name);
            assert_eq!(info.event_select.get(), sel, "{name}");
            assert_eq!(info.escr_select.get(), csel, "{name}");
            let msrs: Vec<u32> = info.escrs.iter().map(|x| x.msr()).collect();
            assert_eq!(msrs, escrs, "{name}");
            let real: Vec<(&str, u8, bool)> = info
                .masks
                .iter()
                .filter_map(|mi| match mi.kind {
                    MaskKind::Bit(b) => Some((mi.name, b, mi.default)),
                    _ => None,
                })
                .collect();
            assert_eq!(real, masks, "{name}");
            let spec = match tsti {
                'S' => Specificity::ThreadSpecific,
                'I' => Specificity::ThreadIndependent,
                _ => Specificity::Unlisted,
            };
            assert_eq!(info.specificity, spec, "{name}");
            assert_eq!(Event::from_name(name), Some(*e));
            assert_eq!(Event::from_name(&name.to_ascii_uppercase()), Some(*e));
        }
    }

    #[test]
    fn internal_consistency() {
        for e in Event::ALL {
            let info = e.info();
            // Every allowed ESCR answers to the event's CCCR select value.
            let disputed = info
                .constraints
                .iter()
                .any(|c| matches!(c, Constraint::DisputedEscrSelect { .. }));
            for escr in info.escrs {
                if disputed {
                    assert_ne!(escr.select(), info.escr_select, "{}", info.name);
                    assert_eq!(escr.select().get(), 6);
                } else {
                    assert_eq!(escr.select(), info.escr_select, "{}", info.name);
                }
                assert!(e.allows(*escr));
            }
            // At most one default mask; mask names unique.
            assert!(info.masks.iter().filter(|m| m.default).count() <= 1);
            for (i, a) in info.masks.iter().enumerate() {
                assert_eq!(info.mask_index(a.name), Some(i), "{}:{}", info.name, a.name);
                if let Some(al) = a.alias {
                    assert_eq!(info.mask_index(al), Some(i));
                }
                if let MaskKind::Bit(b) = a.kind {
                    assert!(b < 16);
                }
                if let MaskKind::Tag(t) = a.kind {
                    assert!(t < 4);
                }
            }
            // At-retirement events are exactly the CRU/RAT ones of Table 19-29.
            let at_ret = info.escrs.iter().all(|x| {
                matches!(
                    x,
                    CruEscr0 | CruEscr1 | CruEscr2 | CruEscr3 | RatEscr0 | RatEscr1
                )
            });
            assert_eq!(
                info.counting == Counting::AtRetirement,
                at_ret,
                "{}",
                info.name
            );
        }
    }

    #[test]
    fn disagreement_resolutions() {
        // libpfm4 alias spellings.
        assert_eq!(Event::from_name("uops_type"), Some(Event::UopType));
        let mbr = Event::MispredBranchRetired.info();
        assert_eq!(mbr.mask_index("BOGUS"), mbr.mask_index("NBOGUS"));
        // machine_clear follows the SDM.
        let mc = Event::MachineClear.info();
        assert_eq!(
            mc.masks[mc.mask_index("SMCLEAR").unwrap()].kind,
            MaskKind::Bit(6)
        );
        // instr_completed on CRU_ESCR0/1, only on models 3, 4, 6.
        assert_eq!(Event::InstrCompleted.info().escrs, &[CruEscr0, CruEscr1]);
        for model in 0..16 {
            assert_eq!(
                Event::InstrCompleted.available_on(model),
                matches!(model, 3 | 4 | 6)
            );
            assert!(Event::GlobalPowerEvents.available_on(model));
        }
        // IOQ_active_entries only on FSB_ESCR1, with IOQ_allocation.
        let ioq = Event::IoqActiveEntries.info();
        assert_eq!(ioq.escrs, &[FsbEscr1]);
        assert!(
            ioq.constraints
                .contains(&Constraint::RequiresCompanion(Event::IoqAllocation))
        );
        // Table-19-34-only bits are not accepted.
        assert_eq!(
            Event::MemoryComplete.info().valid_mask_bits(),
            EventMask(0b11)
        );
        assert_eq!(Event::WcBuffer.info().valid_mask_bits(), EventMask(0b11));
        assert!(Event::from_name("nonexistent").is_none());
    }

    #[test]
    fn replay_metrics_match_table_19_33() {
        // (metric, PEBS_ENABLE incl. bit 24, MATRIX_VERT) from the reference
        // (Linux p4_pebs_bind_map == SDM Table 19-33 bits without bit 25).
        let expect = [
            (ReplayMetric::L1LoadMiss, 0x0100_0001u64, 0x1u64),
            (ReplayMetric::L2LoadMiss, 0x0100_0002, 0x1),
            (ReplayMetric::DtlbLoadMiss, 0x0100_0004, 0x1),
            (ReplayMetric::DtlbStoreMiss, 0x0100_0004, 0x2),
            (ReplayMetric::DtlbAllMiss, 0x0100_0004, 0x3),
            (ReplayMetric::TaggedMispredBranch, 0x0101_8000, 0x10),
            (ReplayMetric::MobLoadReplay, 0x0100_0200, 0x1),
            (ReplayMetric::SplitLoad, 0x0100_0400, 0x1),
            (ReplayMetric::SplitStore, 0x0100_0400, 0x2),
        ];
        for (mt, en, vert) in expect {
            assert_eq!(mt.pebs_enable_bits() | 1 << 24, en, "{}", mt.name());
            assert_eq!(mt.matrix_vert_bits(), vert, "{}", mt.name());
        }
        let up = ReplayMetric::SplitLoad.upstream().unwrap();
        assert_eq!(
            (up.event, up.escr),
            (Event::LoadPortReplay, Some(SaatEscr1))
        );
        let up = ReplayMetric::MobLoadReplay.upstream().unwrap();
        assert_eq!(up.mask, EventMask(0x30));
        assert!(ReplayMetric::L1LoadMiss.upstream().is_none());
        // Every metric is selectable by name on replay_event.
        let re = Event::ReplayEvent.info();
        for mt in ReplayMetric::ALL {
            assert!(
                re.masks
                    .iter()
                    .any(|m| m.kind == MaskKind::ReplayMetric(mt))
            );
        }
    }
}

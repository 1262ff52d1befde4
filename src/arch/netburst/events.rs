//! The 46 NetBurst events: SDM Vol. 3B Table 19-28 (non-retirement
//! counting), Table 19-29 (at-retirement counting), Table 19-34 (TS/TI
//! qualification) and Table 19-33 (replay-tagging metrics).
//!
//! This file has the types and lookups; the table itself, in libpfm4/Linux
//! order (index = Linux `enum P4_EVENTS`), is `catalog.rs`, and `tests.rs`
//! checks it against the SDM and libpfm4 tables, transcribed separately.
//! Names are the SDM's; where libpfm4 spells a name differently the other
//! spelling is kept as an alias so that libpfm4 event strings still parse.
//!
//! # Source disagreements and the resolution chosen
//!
//! The Intel manual is followed throughout; the disagreements between the
//! sources are resolved as follows:
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
//!
//! # Examples
//!
//! ```
//! use pmu::arch::netburst::{Counting, Escr, EventName};
//!
//! let e = EventName::from_name("instr_retired").unwrap();
//! assert_eq!(e.info().counting, Counting::AtRetirement);    // Table 19-29
//! assert!(e.allows(Escr::CruEscr0) && !e.allows(Escr::FsbEscr0));
//! assert_eq!(EventName::ALL.len(), 46);
//! ```

use super::escr::{EventMask, EventSelect};
use super::msrs::Escr;
use super::msrs::EscrSelect;
use super::tagging_msrs::{PebsEnable, PebsMatrixVert};
use super::thread::Specificity;

/// Which SDM table an event comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Counting {
    /// Table 19-28: counted as it happens.
    NonRetirement,
    /// Table 19-29: counted when the (tagged) µop retires.
    AtRetirement,
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
    RequiresCompanion(EventName),
    /// At-retirement counting (as a replay-tagging upstream event) must use
    /// this ESCR.
    AtRetirementEscr(Escr),
    /// An upstream event that tags µops for this downstream event.
    TagsFor(EventName),
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
    pub event: EventName,
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
    pub const fn pebs_enable(self) -> PebsEnable {
        let off = PebsEnable::OFF;
        match self {
            ReplayMetric::L1LoadMiss => off.with_l1_load_miss(true),
            ReplayMetric::L2LoadMiss => off.with_l2_load_miss(true),
            ReplayMetric::DtlbLoadMiss
            | ReplayMetric::DtlbStoreMiss
            | ReplayMetric::DtlbAllMiss => off.with_dtlb_miss(true),
            ReplayMetric::TaggedMispredBranch => off.with_tagged_mispred_branch(0b11),
            ReplayMetric::MobLoadReplay => off.with_mob_load_replay(true),
            ReplayMetric::SplitLoad | ReplayMetric::SplitStore => off.with_split(true),
        }
    }

    /// The `MSR_PEBS_MATRIX_VERT` bits (Table 19-33: bit 0 loads, bit 1
    /// stores, bit 4 tagged mispredicted branches).
    pub const fn matrix_vert(self) -> PebsMatrixVert {
        let off = PebsMatrixVert::OFF;
        match self {
            ReplayMetric::DtlbStoreMiss | ReplayMetric::SplitStore => off.with_stores(true),
            ReplayMetric::DtlbAllMiss => off.with_loads(true).with_stores(true),
            ReplayMetric::TaggedMispredBranch => off.with_tagged_mispred_branch(true),
            _ => off.with_loads(true),
        }
    }

    /// The additional upstream event of Table 19-33, if any.
    pub const fn upstream(self) -> Option<ReplayUpstream> {
        match self {
            // PARTIAL_DATA (4) and UNALGN_ADDR (5).
            ReplayMetric::MobLoadReplay => Some(ReplayUpstream {
                event: EventName::MobLoadReplay,
                mask: EventMask(1 << 4 | 1 << 5),
                escr: None,
            }),
            ReplayMetric::SplitLoad => Some(ReplayUpstream {
                event: EventName::LoadPortReplay,
                mask: EventMask(1 << 1),
                escr: Some(Escr::SaatEscr1),
            }),
            ReplayMetric::SplitStore => Some(ReplayUpstream {
                event: EventName::StorePortReplay,
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

/// Defines [`EventName`] and [`EventName::ALL`] from one list, so the two cannot drift.
macro_rules! events {
    ($($name:ident),+ $(,)?) => {
        /// The 46 events, in libpfm4/Linux order.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        #[repr(u8)]
        #[allow(missing_docs)] // see `EventName::info().name`
        pub enum EventName {
            $($name),+
        }

        impl EventName {
            /// All 46 events in catalog order.
            pub const ALL: [EventName; 46] = [$(EventName::$name),+];
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

mod catalog;

use catalog::EVENTS;

/// Whether `name` is `sdm` or `alias`, ignoring ASCII case.
const fn names_match(sdm: &str, alias: Option<&str>, name: &[u8]) -> bool {
    sdm.as_bytes().eq_ignore_ascii_case(name)
        || match alias {
            Some(a) => a.as_bytes().eq_ignore_ascii_case(name),
            None => false,
        }
}

impl EventName {
    /// The catalog entry.
    pub const fn info(self) -> &'static EventInfo {
        &EVENTS[self as usize]
    }

    /// The SDM name.
    pub const fn name(self) -> &'static str {
        self.info().name
    }

    /// Look up an event by SDM or libpfm4 name, ignoring ASCII case.
    pub const fn from_name(name: &str) -> Option<EventName> {
        Self::from_name_bytes(name.as_bytes())
    }

    /// [`EventName::from_name`] on the bytes of a name (the const parser's form).
    pub(crate) const fn from_name_bytes(name: &[u8]) -> Option<EventName> {
        let mut i = 0;
        while i < EventName::ALL.len() {
            let e = EventName::ALL[i];
            if names_match(e.info().name, e.info().alias, name) {
                return Some(e);
            }
            i += 1;
        }
        None
    }

    /// Whether the event exists on family 0Fh model `model`:
    /// `instr_completed` only on models 3, 4 and 6 (SDM Table 19-29).
    pub const fn available_on(self, model: u8) -> bool {
        match self {
            EventName::InstrCompleted => matches!(model, 3 | 4 | 6),
            _ => true,
        }
    }

    /// Whether an ESCR programmed with this event marks µops for another
    /// counter's event: the front-end tagging event `uop_type` (SDM
    /// 18.15.6.2) and the upstream events replay tagging needs (Table
    /// 19-33: `MOB_load_replay`, `load_port_replay`, `store_port_replay`).
    /// Such an ESCR acts while any counter of its block runs (18.15.5.9),
    /// not only through its own counter. Execution tagging is an ESCR
    /// image's `Tag_Enable` bit, whatever the event.
    pub const fn tags_uops(self) -> bool {
        matches!(
            self,
            EventName::UopType
                | EventName::MobLoadReplay
                | EventName::LoadPortReplay
                | EventName::StorePortReplay
        )
    }

    /// The tagging mechanism whose tagged µops the event counts at
    /// retirement (`front_end_event`, `execution_event`, `replay_event`:
    /// SDM 18.15.6, Tables 19-31 to 19-33), the same as the catalog's
    /// [`Constraint::NeedsTagging`] but without the catalog.
    pub const fn needs_tagging(self) -> Option<Tagging> {
        match self {
            EventName::FrontEndEvent => Some(Tagging::FrontEnd),
            EventName::ExecutionEvent => Some(Tagging::Execution),
            EventName::ReplayEvent => Some(Tagging::Replay),
            _ => None,
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
    pub const fn mask_index(&self, name: &str) -> Option<usize> {
        self.mask_index_bytes(name.as_bytes())
    }

    /// [`EventInfo::mask_index`] on the bytes of a name.
    pub(crate) const fn mask_index_bytes(&self, name: &[u8]) -> Option<usize> {
        let mut i = 0;
        while i < self.masks.len() {
            if names_match(self.masks[i].name, self.masks[i].alias, name) {
                return Some(i);
            }
            i += 1;
        }
        None
    }

    /// The index of the default mask, if the event has one.
    pub const fn default_mask(&self) -> Option<usize> {
        let mut i = 0;
        while i < self.masks.len() {
            if self.masks[i].default {
                return Some(i);
            }
            i += 1;
        }
        None
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
mod tests;

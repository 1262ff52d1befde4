//! The Itanium (230 entries), Itanium 2 (497 entries) and Montecito (637
//! entries) event catalogs, from libpfm3's `itanium_events.h`,
//! `itanium2_events.h` and `montecito_events.h` (the same tables as
//! libpfm4's `lib/events/`): name, event code, unit mask, maximum increment
//! per cycle, the counters that may count it, the address-range, opcode and
//! (Montecito) MESI qualifiers it honours, whether it is an EAR or branch
//! trace event, and on Montecito its thread attribution class. One entry
//! per event and unit mask, named libpfm's way (`EVENT_UMASKNAME`).
//!
//! # Reading an entry
//!
//! * [`EventInfo::code`] goes into the counter's `es` field and
//!   [`EventInfo::umask`] into its unit mask, except for the EAR "virtual"
//!   events ([`EventType::is_ear`]): there the counter counts the EAR's
//!   captures (Itanium `INSTRUCTION_EAR_EVENTS` 23h / `DATA_EAR_EVENTS` 67h,
//!   Itanium 2 `L1I_EAR_EVENTS` 43h / `DATA_EAR_EVENTS` C8h) with unit mask
//!   0, and the entry's unit mask is the EAR configuration's
//!   ([`crate::arch::itanium::ear`]). `BRANCH_EVENT` (11h) counts branch
//!   trace buffer captures and programs [`crate::arch::itanium::btb`].
//! * [`EventInfo::max_increment`] is the most the event can count in one
//!   cycle: the exclusive upper bound of a useful threshold (the counter adds
//!   one in cycles where the count *exceeds* the threshold, VTune's Itanium
//!   event help).
//! * Itanium: seven events count on PMC4/5 only, the six whose maximum
//!   increment is 6 and `BUS_SNOOPQ_REQ` (3): consistent with the 2-bit
//!   thresholds of PMC6/7. Itanium 2: `L2_FORCE_RECIRC_*` and most
//!   `L2_L3ACCESS_CANCEL_*` count on PMC4 only.
//! * Montecito: most events count on PMC/PMD4-15, 98 on PMC4-9 only, and
//!   `CPU_OP_CYCLES_HALTED` on PMC10 only; its branch trace buffer is the
//!   execution trace buffer (`ETB_EVENT`, with `BRANCH_EVENT` as libpfm's
//!   alias), recorded as [`EventType::Btb`]. Each event has a thread
//!   attribution class ([`ThreadAttribution`]).
//! * Itanium 2 and Montecito cache-group events ([`CacheGroup`]): events of different
//!   sets of one group cannot be measured together, at least one L1D-group
//!   event must be on PMC5 and one L2-group event on PMC4 (libpfm3's rules,
//!   `valid_assign()` in `pfmlib_itanium2.c`). These are scheduling rules
//!   over several counters; the
//!   catalog records the data, and single-register validation does not
//!   apply them.
//!
//! # Source notes
//!
//! | topic | sources | resolution |
//! |---|---|---|
//! | event names, codes, masks | the only source at hand is libpfm3's tables; the names are libpfm's (event plus unit-mask name) | transcribed as they are |
//! | several entries share one code and unit mask (`IA64_INST_RETIRED`, `IA64_INST_RETIRED_THIS` and `IA64_TAGGED_INST_RETIRED_IBRP0_PMC8` on Itanium 2; each EAR counting event and its EAR variants) | aliases in libpfm | kept; lookups by code report the first non-EAR entry, and all aliases agree on counters and maximum increment |
//! | one code, different counters or maximum increments per unit mask (Itanium 2 B0h, B8h, B9h, BAh) | the tables | [`rule`] matches code *and* unit mask; for a unit mask the catalog does not list it falls back to the union of the code's counters and its largest increment |
//! | two different Montecito events with one code and unit mask (BCh/0: `ER_REJECT_ALL_L1_REQ` on PMC4-9, `L2D_OZQ_FULL_THIS` on PMC4-15) | libpfm3's Montecito table | [`rule`] takes the union of their counters and the larger increment, so neither event is refused a counter it may use; `entry` is the first |
//! | threshold semantics | HP Caliper: at or above; VTune and libpfm: above | VTune (see [`crate::arch::itanium::CounterPmc`]) |
//!
//! # Examples
//!
//! ```
//! use pmu::arch::itanium::events::{find, rule};
//! use pmu::arch::itanium::Generation;
//!
//! let e = find(Generation::Itanium2, "IA64_INST_RETIRED").unwrap();
//! assert_eq!((e.code, e.max_increment), (0x08, 6));         // up to 6 per cycle
//! assert_eq!(rule(Generation::Itanium2, 0x12, 0).unwrap().max_increment, 1); // CPU_CYCLES
//! // Montecito's cycles, and its PMC10-only halted cycles (up to 7 per cycle):
//! assert_eq!(find(Generation::Montecito, "CPU_OP_CYCLES_ALL").unwrap().code, 0x12);
//! assert_eq!(rule(Generation::Montecito, 0x18, 0).unwrap().max_increment, 7);
//! ```

mod itanium;
mod itanium2;
mod montecito;

use super::generation::{CounterSet, Generation};

/// The qualifiers an event honours (libpfm3's per-event qualifier bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Qualifiers {
    /// Instruction address range restriction (IBRs).
    pub instruction_range: bool,
    /// Opcode matching (PMC8/9).
    pub opcode: bool,
    /// Data address range restriction (DBRs).
    pub data_range: bool,
    /// Montecito: the MESI filter bits of the counter's PMC apply.
    pub mesi: bool,
}

/// EAR and BTB events, and plain ones (libpfm3's EAR and BTB event types).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum EventType {
    /// An ordinary counting event.
    Plain,
    /// Captures branches into the branch trace buffer (`BRANCH_EVENT`).
    Btb,
    /// I-EAR, instruction cache misses above a latency.
    IearCache,
    /// I-EAR, instruction TLB misses.
    IearTlb,
    /// D-EAR, data cache misses above a latency.
    DearCache,
    /// D-EAR, data TLB misses.
    DearTlb,
    /// D-EAR, ALAT misses (Itanium 2).
    DearAlat,
}

impl EventType {
    /// Whether it is an EAR event (the unit mask belongs to the EAR).
    pub const fn is_ear(self) -> bool {
        self.is_iear() || self.is_dear()
    }

    /// Whether it is an instruction EAR event.
    pub const fn is_iear(self) -> bool {
        matches!(self, EventType::IearCache | EventType::IearTlb)
    }

    /// Whether it is a data EAR event.
    pub const fn is_dear(self) -> bool {
        matches!(
            self,
            EventType::DearCache | EventType::DearTlb | EventType::DearAlat
        )
    }

    /// Whether it is the branch trace buffer event.
    pub const fn is_btb(self) -> bool {
        matches!(self, EventType::Btb)
    }
}

/// Itanium 2 cache event group and set (libpfm3's Itanium 2 event table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CacheGroup {
    /// 1: the L1D group; 2: the L2 group.
    pub group: u8,
    /// The set within the group.
    pub set: u8,
}

/// Montecito's thread attribution class of an event (libpfm3's `caf`):
/// how a count is attributed to the two threads of a core.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ThreadAttribution {
    /// Counted for the thread that is active (libpfm `caf` 0).
    Active,
    /// Not tied to a thread: counted for whichever is being monitored (1).
    Floating,
    /// Counted for the thread that caused it (2).
    Causal,
    /// Floating, but counted for the thread it concerns when known (3).
    SelfFloating,
}

/// One catalog entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EventInfo {
    /// libpfm's name.
    pub name: &'static str,
    /// The catalog it belongs to.
    pub generation: Generation,
    /// The event code (`es`).
    pub code: u8,
    /// The unit mask (the counter's, or for EAR events the EAR's).
    pub umask: u8,
    /// The most the event counts in one cycle.
    pub max_increment: u8,
    /// The counters (by number: PMC n with PMD n) that may count it.
    pub counters: CounterSet,
    /// The qualifiers it honours.
    pub qualifiers: Qualifiers,
    /// EAR, BTB or plain.
    pub kind: EventType,
    /// The Itanium 2 or Montecito cache group, if any.
    pub group: Option<CacheGroup>,
    /// Montecito's thread attribution class (`None` before Montecito).
    pub thread_attribution: Option<ThreadAttribution>,
}

impl EventInfo {
    /// The unit mask to program into the counter (zero for EAR events).
    pub const fn counter_umask(&self) -> u8 {
        if self.kind.is_ear() { 0 } else { self.umask }
    }
}

const C4567: CounterSet = CounterSet(0xF0);
const C45: CounterSet = CounterSet(0x30);
const C4: CounterSet = CounterSet(0x10);
const C4_15: CounterSet = CounterSet(0xFFF0);
const C4_9: CounterSet = CounterSet(0x3F0);
const C10: CounterSet = CounterSet(0x400);

const fn q(instruction_range: bool, opcode: bool, data_range: bool) -> Qualifiers {
    Qualifiers {
        instruction_range,
        opcode,
        data_range,
        mesi: false,
    }
}
const fn with_mesi(q: Qualifiers) -> Qualifiers {
    Qualifiers { mesi: true, ..q }
}
const Q_: Qualifiers = q(false, false, false);
const QI: Qualifiers = q(true, false, false);
const QID: Qualifiers = q(true, false, true);
const QIO: Qualifiers = q(true, true, false);
const QIOD: Qualifiers = q(true, true, true);
const QIODM: Qualifiers = with_mesi(QIOD);
const QM: Qualifiers = with_mesi(Q_);

const ACTIVE: ThreadAttribution = ThreadAttribution::Active;
const FLOATING: ThreadAttribution = ThreadAttribution::Floating;
const CAUSAL: ThreadAttribution = ThreadAttribution::Causal;
const SELF_FLOATING: ThreadAttribution = ThreadAttribution::SelfFloating;

const PLAIN: EventType = EventType::Plain;
const BTB: EventType = EventType::Btb;
const IEAR_CACHE: EventType = EventType::IearCache;
const IEAR_TLB: EventType = EventType::IearTlb;
const DEAR_CACHE: EventType = EventType::DearCache;
const DEAR_TLB: EventType = EventType::DearTlb;
const DEAR_ALAT: EventType = EventType::DearAlat;

const NG: Option<CacheGroup> = None;
const fn g(group: u8, set: u8) -> Option<CacheGroup> {
    Some(CacheGroup { group, set })
}

const fn itanium_row(
    name: &'static str,
    code: u8,
    umask: u8,
    max_increment: u8,
    counters: CounterSet,
    qualifiers: Qualifiers,
    kind: EventType,
) -> EventInfo {
    // An Itanium 2 row without a cache group, relabelled.
    EventInfo {
        generation: Generation::Itanium,
        ..itanium2_row(
            name,
            code,
            umask,
            max_increment,
            counters,
            qualifiers,
            kind,
            None,
        )
    }
}

#[allow(clippy::too_many_arguments)] // one table row
const fn itanium2_row(
    name: &'static str,
    code: u8,
    umask: u8,
    max_increment: u8,
    counters: CounterSet,
    qualifiers: Qualifiers,
    kind: EventType,
    group: Option<CacheGroup>,
) -> EventInfo {
    EventInfo {
        name,
        generation: Generation::Itanium2,
        code,
        umask,
        max_increment,
        counters,
        qualifiers,
        kind,
        group,
        thread_attribution: None,
    }
}

#[allow(clippy::too_many_arguments)] // one table row
const fn montecito_row(
    name: &'static str,
    code: u8,
    umask: u8,
    max_increment: u8,
    counters: CounterSet,
    qualifiers: Qualifiers,
    kind: EventType,
    thread_attribution: ThreadAttribution,
    group: Option<CacheGroup>,
) -> EventInfo {
    EventInfo {
        generation: Generation::Montecito,
        thread_attribution: Some(thread_attribution),
        ..itanium2_row(
            name,
            code,
            umask,
            max_increment,
            counters,
            qualifiers,
            kind,
            group,
        )
    }
}

/// The Itanium catalog (230 entries).
pub const ITANIUM: &[EventInfo] = &itanium::TABLE;
/// The Itanium 2 catalog (497 entries).
pub const ITANIUM2: &[EventInfo] = &itanium2::TABLE;
/// The Montecito catalog (637 entries).
pub const MONTECITO: &[EventInfo] = &montecito::TABLE;

/// The catalog of `generation`.
pub const fn catalog(generation: Generation) -> &'static [EventInfo] {
    match generation {
        Generation::Itanium => ITANIUM,
        Generation::Itanium2 => ITANIUM2,
        Generation::Montecito => MONTECITO,
    }
}

const fn eq_ignore_case(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if !a[i].eq_ignore_ascii_case(&b[i]) {
            return false;
        }
        i += 1;
    }
    true
}

/// The entry of `generation` named `name` (ASCII case ignored).
pub const fn find(generation: Generation, name: &str) -> Option<&'static EventInfo> {
    let table = catalog(generation);
    let mut i = 0;
    while i < table.len() {
        if eq_ignore_case(table[i].name, name) {
            return Some(&table[i]);
        }
        i += 1;
    }
    None
}

/// The entries with event code `code`, in catalog order.
pub fn with_code(generation: Generation, code: u8) -> impl Iterator<Item = &'static EventInfo> {
    let index = code_index(generation);
    let (start, end) = match index {
        Some(ix) => (
            ix.start[code as usize] as usize,
            ix.start[code as usize + 1] as usize,
        ),
        None => (0, 0),
    };
    let table = catalog(generation);
    (start..end).filter_map(move |k| match index {
        Some(ix) => table.get(ix.order[k] as usize),
        None => None,
    })
}

/// What a counter configured with a code and unit mask may do, according
/// to the catalog.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EventRule {
    /// The largest per-cycle increment.
    pub max_increment: u8,
    /// The counters allowed.
    pub counters: CounterSet,
    /// The catalog entry that matched code and unit mask, if one did
    /// (otherwise the rule is the union over the code's entries).
    pub entry: Option<&'static EventInfo>,
}

/// The rule for a counter counting `code` with counter unit mask `umask`:
/// the plain (non-EAR) entries with that code and unit mask (the union of
/// their counters, their largest increment, the first as `entry`), or
/// failing that the union of the counters and the largest maximum increment
/// of all entries with that code. `None` if the catalog has no event with that
/// code.
pub const fn rule(generation: Generation, code: u8, umask: u8) -> Option<EventRule> {
    let ix = match code_index(generation) {
        Some(ix) => ix,
        None => return None,
    };
    let table = catalog(generation);
    let start = ix.start[code as usize] as usize;
    let end = ix.start[code as usize + 1] as usize;
    if start == end {
        return None;
    }
    // The union over the code's entries, and over its plain entries with
    // this unit mask (Montecito has two different events at BCh/0).
    let (mut counters, mut max_increment) = (CounterSet::EMPTY, 0);
    let (mut exact_counters, mut exact_increment) = (CounterSet::EMPTY, 0);
    let mut entry: Option<&'static EventInfo> = None;
    let mut k = start;
    while k < end {
        let e = &table[ix.order[k] as usize];
        if !e.kind.is_ear() && e.umask == umask {
            if entry.is_none() {
                entry = Some(e);
            }
            exact_counters = exact_counters.union(e.counters);
            if e.max_increment > exact_increment {
                exact_increment = e.max_increment;
            }
        }
        counters = counters.union(e.counters);
        if e.max_increment > max_increment {
            max_increment = e.max_increment;
        }
        k += 1;
    }
    Some(match entry {
        Some(_) => EventRule {
            max_increment: exact_increment,
            counters: exact_counters,
            entry,
        },
        None => EventRule {
            max_increment,
            counters,
            entry: None,
        },
    })
}

/// The catalog sorted by code: `order[start[c]..start[c + 1]]` are the
/// indices of the entries with code `c`, in catalog order.
struct CodeIndex<const N: usize> {
    start: [u16; 257],
    order: [u16; N],
}

const fn build_index<const N: usize>(table: &[EventInfo; N]) -> CodeIndex<N> {
    let mut start = [0u16; 257];
    let mut i = 0;
    while i < N {
        start[table[i].code as usize + 1] += 1;
        i += 1;
    }
    let mut c = 0;
    while c < 256 {
        start[c + 1] += start[c];
        c += 1;
    }
    let mut next = [0u16; 256];
    let mut c = 0;
    while c < 256 {
        next[c] = start[c];
        c += 1;
    }
    let mut order = [0u16; N];
    let mut i = 0;
    while i < N {
        let code = table[i].code as usize;
        order[next[code] as usize] = i as u16;
        next[code] += 1;
        i += 1;
    }
    CodeIndex { start, order }
}

static ITANIUM_INDEX: CodeIndex<230> = build_index(&itanium::TABLE);
static ITANIUM2_INDEX: CodeIndex<497> = build_index(&itanium2::TABLE);
static MONTECITO_INDEX: CodeIndex<637> = build_index(&montecito::TABLE);

/// The code index, as slices so every size fits one type.
#[derive(Clone, Copy)]
struct IndexRef {
    start: &'static [u16; 257],
    order: &'static [u16],
}

const fn code_index(generation: Generation) -> Option<IndexRef> {
    match generation {
        Generation::Itanium => Some(IndexRef {
            start: &ITANIUM_INDEX.start,
            order: &ITANIUM_INDEX.order,
        }),
        Generation::Itanium2 => Some(IndexRef {
            start: &ITANIUM2_INDEX.start,
            order: &ITANIUM2_INDEX.order,
        }),
        Generation::Montecito => Some(IndexRef {
            start: &MONTECITO_INDEX.start,
            order: &MONTECITO_INDEX.order,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (name, code, umask, max increment, counters, qualifiers "IODM", kind,
    /// group/set), typed from libpfm3's tables by hand.
    type Row = (
        &'static str,
        u8,
        u8,
        u8,
        &'static [u8],
        &'static str,
        EventType,
        Option<(u8, u8)>,
    );

    const ALL12: &[u8] = &[4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
    const FIRST6: &[u8] = &[4, 5, 6, 7, 8, 9];

    /// Montecito rows typed by hand, with their thread attribution class
    /// (libpfm's `caf`: 0 active, 1 floating, 2 causal, 3 self-floating).
    #[rustfmt::skip]
    const MONTECITO_SAMPLE: &[(Row, u8)] = &[
        (("CPU_OP_CYCLES_ALL", 0x12, 0x0, 1, ALL12, "", EventType::Plain, None), 2),
        (("CPU_OP_CYCLES_QUAL", 0x12, 0x1, 1, ALL12, "IO", EventType::Plain, None), 2),
        (("CPU_OP_CYCLES_HALTED", 0x18, 0x0, 7, &[10], "", EventType::Plain, None), 2),
        (("IA64_INST_RETIRED", 0x08, 0x0, 6, ALL12, "IO", EventType::Plain, None), 0),
        (("NOPS_RETIRED", 0x50, 0x0, 6, ALL12, "IO", EventType::Plain, None), 0),
        (("BUS_ALL_SELF", 0x87, 0x2, 1, FIRST6, "", EventType::Plain, None), 3),
        (("ER_MEM_READ_OUT_LO", 0xB5, 0x0, 7, FIRST6, "", EventType::Plain, None), 1),
        (("L1D_READ_MISSES_ALL", 0xC7, 0x0, 2, ALL12, "IOD", EventType::Plain, Some((1, 2))), 0),
        (("BE_L1D_FPU_BUBBLE_L1D_STBUFRECIR", 0xCA, 0xE, 1, ALL12, "", EventType::Plain, Some((1, 4))), 0),
        (("UC_STORES_RETIRED", 0xD0, 0x0, 2, ALL12, "IOD", EventType::Plain, Some((1, 8))), 0),
        (("L2D_INSERT_HITS", 0xB1, 0x0, 4, ALL12, "IOD", EventType::Plain, None), 1),
        (("L2I_READS_ALL_ALL", 0x78, 0xF, 1, ALL12, "I", EventType::Plain, None), 1),
        (("L3_READS_ALL_ALL", 0xDD, 0xF, 1, ALL12, "IODM", EventType::Plain, None), 1),
        (("L3_LINES_REPLACED", 0xDF, 0x0, 1, ALL12, "M", EventType::Plain, None), 1),
        (("SI_CYCLES", 0x8E, 0x0, 1, ALL12, "", EventType::Plain, None), 2),
        (("THREAD_SWITCH_EVENTS_ALL", 0x0C, 0x7, 1, ALL12, "", EventType::Plain, None), 0),
        (("ETB_EVENT", 0x11, 0x0, 1, ALL12, "IO", EventType::Btb, None), 0),
        (("BRANCH_EVENT", 0x11, 0x0, 1, ALL12, "IO", EventType::Btb, None), 0),
        (("DATA_EAR_ALAT", 0xC8, 0x0, 1, ALL12, "IOD", EventType::DearAlat, None), 1),
        (("DATA_EAR_CACHE_LAT1024", 0xC8, 0x8, 1, ALL12, "IOD", EventType::DearCache, None), 1),
        (("DATA_EAR_TLB_VHPT_OR_FAULT", 0xC8, 0xC, 1, ALL12, "IOD", EventType::DearTlb, None), 1),
        (("L1I_EAR_CACHE_LAT4", 0x43, 0xFF, 1, ALL12, "I", EventType::IearCache, None), 1),
        (("L1I_EAR_CACHE_RAB", 0x43, 0x00, 1, ALL12, "I", EventType::IearCache, None), 1),
        (("L1I_EAR_TLB_L2TLB", 0x43, 0x1, 1, ALL12, "I", EventType::IearTlb, None), 1),
    ];

    #[rustfmt::skip]
    const ITANIUM_SAMPLE: &[Row] = &[
        ("CPU_CYCLES", 0x12, 0x0, 1, &[4, 5, 6, 7], "", EventType::Plain, None),
        ("PIPELINE_BACKEND_FLUSH_CYCLE", 0x00, 0x0, 1, &[4, 5, 6, 7], "", EventType::Plain, None),
        ("IA64_INST_RETIRED", 0x08, 0x0, 6, &[4, 5], "IO", EventType::Plain, None),
        ("IA64_TAGGED_INST_RETIRED_PMC9", 0x08, 0x2, 6, &[4, 5], "IO", EventType::Plain, None),
        ("INST_DISPERSED", 0x2D, 0x0, 6, &[4, 5], "I", EventType::Plain, None),
        ("NOPS_RETIRED", 0x30, 0x0, 6, &[4, 5], "IO", EventType::Plain, None),
        ("BUS_SNOOPQ_REQ", 0x56, 0x0, 3, &[4, 5], "", EventType::Plain, None),
        ("ALAT_INST_CHKA_LDC_ALL", 0x36, 0x3, 2, &[4, 5, 6, 7], "IO", EventType::Plain, None),
        ("ALAT_REPLACEMENT_FP", 0x38, 0x1, 2, &[4, 5, 6, 7], "IOD", EventType::Plain, None),
        ("BRANCH_EVENT", 0x11, 0x0, 1, &[4, 5, 6, 7], "IO", EventType::Btb, None),
        ("BRANCH_MULTIWAY_NOT_TAKEN_WRONG_TARGET", 0x0E, 0xB, 1, &[4, 5, 6, 7], "IO", EventType::Plain, None),
        ("BUS_PARTIAL_SELF", 0x48, 0x2, 1, &[4, 5, 6, 7], "", EventType::Plain, None),
        ("FP_FLUSH_TO_ZERO", 0x0B, 0x0, 2, &[4, 5, 6, 7], "IO", EventType::Plain, None),
        ("L3_WRITES_L2_WRITEBACK_MISS", 0x7E, 0xA, 1, &[4, 5, 6, 7], "", EventType::Plain, None),
        ("INSTRUCTION_EAR_TLB_SW", 0x23, 0x8, 1, &[4, 5, 6, 7], "I", EventType::IearTlb, None),
        ("INSTRUCTION_EAR_TLB_VHPT", 0x23, 0x4, 1, &[4, 5, 6, 7], "I", EventType::IearTlb, None),
        ("INSTRUCTION_EAR_CACHE_LAT4096", 0x23, 0xA, 1, &[4, 5, 6, 7], "I", EventType::IearCache, None),
        ("INSTRUCTION_EAR_CACHE_LAT_NONE", 0x23, 0xF, 1, &[4, 5, 6, 7], "I", EventType::IearCache, None),
        ("DATA_EAR_CACHE_LAT512", 0x67, 0x8, 1, &[4, 5, 6, 7], "IO", EventType::DearCache, None),
        ("DATA_EAR_TLB_L2", 0x67, 0x2, 1, &[4, 5, 6, 7], "IO", EventType::DearTlb, None),
        ("DATA_EAR_EVENTS", 0x67, 0x0, 1, &[4, 5, 6, 7], "IOD", EventType::Plain, None),
        ("DTLB_INSERTS_HPW", 0x62, 0x0, 1, &[4, 5, 6, 7], "IOD", EventType::Plain, None),
        ("UNSTALLED_BACKEND_CYCLE", 0x05, 0x0, 1, &[4, 5, 6, 7], "", EventType::Plain, None),
        ("STORES_RETIRED", 0x6D, 0x0, 2, &[4, 5, 6, 7], "IOD", EventType::Plain, None),
    ];

    #[rustfmt::skip]
    const ITANIUM2_SAMPLE: &[Row] = &[
        ("CPU_CYCLES", 0x12, 0x0, 1, &[4, 5, 6, 7], "", EventType::Plain, None),
        ("BACK_END_BUBBLE_ALL", 0x00, 0x0, 1, &[4, 5, 6, 7], "", EventType::Plain, None),
        ("IA64_INST_RETIRED", 0x08, 0x0, 6, &[4, 5, 6, 7], "IO", EventType::Plain, None),
        ("NOPS_RETIRED", 0x50, 0x0, 6, &[4, 5, 6, 7], "IO", EventType::Plain, None),
        ("INST_DISPERSED", 0x4D, 0x0, 6, &[4, 5, 6, 7], "I", EventType::Plain, None),
        ("BUS_SNOOPQ_REQ", 0x96, 0x0, 7, &[4, 5, 6, 7], "", EventType::Plain, None),
        ("FP_OPS_RETIRED", 0x09, 0x0, 4, &[4, 5, 6, 7], "I", EventType::Plain, None),
        ("ALAT_CAPACITY_MISS_FP", 0x58, 0x2, 2, &[4, 5, 6, 7], "IOD", EventType::Plain, None),
        ("L1D_READ_MISSES_ALL", 0xC7, 0x0, 2, &[4, 5, 6, 7], "IOD", EventType::Plain, Some((1, 1))),
        ("L2_FORCE_RECIRC_ANY", 0xB4, 0x0, 4, &[4], "IOD", EventType::Plain, Some((2, 2))),
        ("L2_L3ACCESS_CANCEL_ANY", 0xB0, 0x9, 1, &[4], "IOD", EventType::Plain, Some((2, 1))),
        ("L3_READS_ALL_ALL", 0xDD, 0xF, 1, &[4, 5, 6, 7], "IOD", EventType::Plain, None),
        ("BE_L1D_FPU_BUBBLE_L1D_STBUFRECIR", 0xCA, 0xE, 1, &[4, 5, 6, 7], "", EventType::Plain, Some((1, 2))),
        ("L2_OZQ_CANCELS2_OZ_DATA_CONF", 0xA8, 0x6, 4, &[4, 5, 6, 7], "IOD", EventType::Plain, Some((2, 0))),
        ("SYLL_NOT_DISPERSED_FE", 0x4E, 0x4, 5, &[4, 5, 6, 7], "I", EventType::Plain, None),
        ("BR_MISPRED_DETAIL_IPREL_WRONG_TARGET", 0x5B, 0x7, 3, &[4, 5, 6, 7], "IO", EventType::Plain, None),
        ("EXTERN_DP_PINS_0_TO_3_PIN0_OR_PIN1_OR_PIN2", 0x9E, 0x7, 1, &[4, 5, 6, 7], "", EventType::Plain, None),
        ("BE_LOST_BW_DUE_TO_FE_IBFULL", 0x72, 0x5, 2, &[4, 5, 6, 7], "", EventType::Plain, None),
        ("BRANCH_EVENT", 0x11, 0x0, 1, &[4, 5, 6, 7], "IO", EventType::Btb, None),
        ("DATA_EAR_ALAT", 0xC8, 0x0, 1, &[4, 5, 6, 7], "IOD", EventType::DearAlat, None),
        ("DATA_EAR_CACHE_LAT4096", 0xC8, 0xA, 1, &[4, 5, 6, 7], "IOD", EventType::DearCache, None),
        ("DATA_EAR_TLB_VHPT_OR_FAULT", 0xC8, 0xC, 1, &[4, 5, 6, 7], "IOD", EventType::DearTlb, None),
        ("L1I_EAR_CACHE_LAT4", 0x43, 0xFF, 1, &[4, 5, 6, 7], "I", EventType::IearCache, None),
        ("L1I_EAR_CACHE_RAB", 0x43, 0x00, 1, &[4, 5, 6, 7], "I", EventType::IearCache, None),
        ("L1I_EAR_TLB_L2TLB_OR_VHPT", 0x43, 0x3, 1, &[4, 5, 6, 7], "I", EventType::IearTlb, None),
        ("L1I_EAR_EVENTS", 0x43, 0x0, 1, &[4, 5, 6, 7], "I", EventType::Plain, None),
        ("DTLB_INSERTS_HPW", 0xC9, 0x0, 4, &[4, 5, 6, 7], "IOD", EventType::Plain, None),
        ("UC_STORES_RETIRED", 0xD0, 0x0, 2, &[4, 5, 6, 7], "IOD", EventType::Plain, Some((1, 4))),
    ];

    fn check(g: Generation, rows: &[Row]) {
        for &(name, code, umask, maxinc, ctrs, qual, kind, grp) in rows {
            let e = find(g, name).unwrap_or_else(|| panic!("{name} missing"));
            assert_eq!(e.name, name);
            assert_eq!(e.generation, g);
            assert_eq!(e.code, code, "{name}");
            assert_eq!(e.umask, umask, "{name}");
            assert_eq!(e.max_increment, maxinc, "{name}");
            assert_eq!(e.counters.iter().collect::<Vec<_>>(), ctrs, "{name}");
            let want = Qualifiers {
                instruction_range: qual.contains('I'),
                opcode: qual.contains('O'),
                data_range: qual.contains('D'),
                mesi: qual.contains('M'),
            };
            assert_eq!(e.qualifiers, want, "{name}");
            assert_eq!(e.kind, kind, "{name}");
            assert_eq!(e.group.map(|c| (c.group, c.set)), grp, "{name}");
        }
    }

    #[test]
    fn itanium_sample_matches_the_reference() {
        check(Generation::Itanium, ITANIUM_SAMPLE);
    }

    #[test]
    fn itanium2_sample_matches_the_reference() {
        check(Generation::Itanium2, ITANIUM2_SAMPLE);
    }

    #[test]
    fn montecito_sample_matches_the_reference() {
        let g = Generation::Montecito;
        let rows: Vec<Row> = MONTECITO_SAMPLE.iter().map(|&(r, _)| r).collect();
        check(g, &rows);
        let classes = [
            ThreadAttribution::Active,
            ThreadAttribution::Floating,
            ThreadAttribution::Causal,
            ThreadAttribution::SelfFloating,
        ];
        for &((name, ..), caf) in MONTECITO_SAMPLE {
            let e = find(g, name).unwrap();
            assert_eq!(
                e.thread_attribution,
                Some(classes[usize::from(caf)]),
                "{name}"
            );
        }
        for g in [Generation::Itanium, Generation::Itanium2] {
            assert!(
                catalog(g)
                    .iter()
                    .all(|e| e.thread_attribution.is_none() && !e.qualifiers.mesi)
            );
        }
    }

    #[test]
    fn table_invariants() {
        assert_eq!(ITANIUM.len(), 230);
        assert_eq!(ITANIUM2.len(), 497);
        assert_eq!(MONTECITO.len(), 637);
        for g in [
            Generation::Itanium,
            Generation::Itanium2,
            Generation::Montecito,
        ] {
            let t = catalog(g);
            for (i, e) in t.iter().enumerate() {
                assert_eq!(e.generation, g);
                // Names are unique.
                assert!(t[..i].iter().all(|o| o.name != e.name), "{}", e.name);
                assert!(e.max_increment >= 1);
                assert!(!e.counters.is_empty());
                assert_eq!(e.counters.intersection(g.counters()), e.counters);
                if e.kind.is_ear() {
                    // EAR events count on the EAR's counting event.
                    let partner = match (g, e.kind.is_iear()) {
                        (Generation::Itanium, true) => 0x23,
                        (Generation::Itanium, false) => 0x67,
                        (_, true) => 0x43,
                        (_, false) => 0xC8,
                    };
                    assert_eq!(e.code, partner, "{}", e.name);
                    assert_eq!(e.counter_umask(), 0);
                } else {
                    assert!(e.umask < 16, "{}", e.name);
                    assert_eq!(e.counter_umask(), e.umask);
                }
                if e.kind.is_btb() {
                    assert!(matches!(e.name, "BRANCH_EVENT" | "ETB_EVENT"), "{}", e.name);
                    assert_eq!(e.code, 0x11);
                }
            }
        }
        // Itanium: 7-bit codes; the events whose increment exceeds the
        // 2-bit threshold range of PMC6/7 count on PMC4/5 only, and the
        // seven PMC4/5-only events are exactly libpfm3's list.
        let mut only45 = Vec::new();
        for e in ITANIUM {
            assert!(e.code <= 0x7F, "{}", e.name);
            assert!(e.group.is_none());
            if e.max_increment > 3 {
                assert_eq!(e.counters, C45, "{}", e.name);
            }
            if e.counters != C4567 {
                assert_eq!(e.counters, C45);
                only45.push(e.name);
            }
        }
        only45.sort();
        assert_eq!(
            only45,
            [
                "BUS_SNOOPQ_REQ",
                "IA64_INST_RETIRED",
                "IA64_TAGGED_INST_RETIRED_PMC8",
                "IA64_TAGGED_INST_RETIRED_PMC9",
                "INST_DISPERSED",
                "NOPS_RETIRED",
                "PREDICATE_SQUASHED_RETIRED",
            ]
        );
        // Itanium 2: PMC4-only events are the L2 ones of libpfm3's table.
        for e in ITANIUM2 {
            if e.counters != C4567 {
                assert_eq!(e.counters, C4, "{}", e.name);
                assert!(
                    e.name.starts_with("L2_FORCE_RECIRC_")
                        || e.name.starts_with("L2_L3ACCESS_CANCEL_"),
                    "{}",
                    e.name
                );
            }
        }
        // Montecito: PMC4-15, or PMC4-9 only (98 entries), or PMC10 only
        // (CPU_OP_CYCLES_HALTED), and 8-bit codes up to F3h.
        let mut first6 = 0;
        for e in MONTECITO {
            assert!(e.code <= 0xF3, "{}", e.name);
            match e.counters {
                C4_15 => {}
                C4_9 => first6 += 1,
                C10 => assert_eq!(e.name, "CPU_OP_CYCLES_HALTED"),
                other => panic!("{}: counters {other:?}", e.name),
            }
            assert!(e.thread_attribution.is_some(), "{}", e.name);
        }
        assert_eq!(first6, 98);
        // Kind counts from libpfm3's tables (Itanium: 12 I-EAR cache, 2 I-EAR
        // TLB, 11 D-EAR cache, 3 D-EAR TLB, 1 BTB; Itanium 2: 10, 7, 11, 7,
        // 1 ALAT, 1 BTB; Montecito: 10, 7, 11, 7, 1 ALAT, and the ETB as
        // ETB_EVENT and BRANCH_EVENT).
        let count = |t: &[EventInfo], k| t.iter().filter(|e| e.kind == k).count();
        assert_eq!(
            [
                EventType::IearCache,
                EventType::IearTlb,
                EventType::DearCache,
                EventType::DearTlb,
                EventType::DearAlat,
                EventType::Btb
            ]
            .map(|k| (count(ITANIUM, k), count(ITANIUM2, k), count(MONTECITO, k))),
            [
                (12, 10, 10),
                (2, 7, 7),
                (11, 11, 11),
                (3, 7, 7),
                (0, 1, 1),
                (1, 1, 2)
            ]
        );
    }

    #[test]
    fn lookup_by_name() {
        assert_eq!(find(Generation::Itanium, "cpu_cycles").unwrap().code, 0x12);
        assert_eq!(find(Generation::Itanium2, "Cpu_Cycles").unwrap().code, 0x12);
        assert_eq!(find(Generation::Itanium, "CPU_CYCLE"), None);
        assert_eq!(find(Generation::Itanium, ""), None);
        assert_eq!(
            find(Generation::Montecito, "CPU_CYCLES"),
            None,
            "CPU_OP_CYCLES_ALL there"
        );
        assert!(find(Generation::Montecito, "cpu_op_cycles_all").is_some());
        // Itanium-only and Itanium 2-only names.
        assert!(find(Generation::Itanium, "INSTRUCTION_EAR_EVENTS").is_some());
        assert!(find(Generation::Itanium2, "INSTRUCTION_EAR_EVENTS").is_none());
        assert!(find(Generation::Itanium2, "L1I_EAR_EVENTS").is_some());
        for g in [
            Generation::Itanium,
            Generation::Itanium2,
            Generation::Montecito,
        ] {
            for e in catalog(g) {
                assert!(core::ptr::eq(find(g, e.name).unwrap(), e));
            }
        }
    }

    #[test]
    fn lookup_by_code() {
        let g = Generation::Itanium2;
        let names: Vec<_> = with_code(g, 0xB0).map(|e| e.umask).collect();
        assert_eq!(names.len(), 8);
        for c in 0..=255u8 {
            for e in with_code(g, c) {
                assert_eq!(e.code, c);
            }
            assert_eq!(
                with_code(g, c).count(),
                ITANIUM2.iter().filter(|e| e.code == c).count()
            );
            assert_eq!(
                with_code(Generation::Itanium, c).count(),
                ITANIUM.iter().filter(|e| e.code == c).count()
            );
            assert_eq!(
                with_code(Generation::Montecito, c).count(),
                MONTECITO.iter().filter(|e| e.code == c).count()
            );
        }
    }

    #[test]
    fn rules() {
        let g = Generation::Itanium2;
        // Exact match: one umask of B0h counts on PMC4-7, the others on PMC4.
        let r = rule(g, 0xB0, 0xB).unwrap();
        assert_eq!(r.counters, C4567);
        assert_eq!(r.entry.unwrap().name, "L2_L3ACCESS_CANCEL_IFETCH");
        assert_eq!(rule(g, 0xB0, 0x9).unwrap().counters, C4);
        // No entry with umask 0: union of counters, largest increment.
        let r = rule(g, 0xB0, 0x0).unwrap();
        assert_eq!((r.counters, r.max_increment, r.entry), (C4567, 1, None));
        // B8h: increments 1 and 4 per umask.
        assert_eq!(rule(g, 0xB8, 0x0).unwrap().max_increment, 1);
        assert_eq!(rule(g, 0xB8, 0x8).unwrap().max_increment, 4);
        assert_eq!(rule(g, 0xB8, 0xF).unwrap().max_increment, 4);
        // EAR entries never match the counter umask: the counting event does.
        let r = rule(g, 0xC8, 0x0).unwrap();
        assert_eq!(r.entry.unwrap().name, "DATA_EAR_EVENTS");
        // Unknown codes.
        assert!(rule(Generation::Itanium, 0x13, 0).is_none());
        assert!(rule(Generation::Itanium2, 0x0A, 0).is_none());
        assert!(rule(Generation::Itanium, 0x7F, 0).is_some());
        assert!(rule(Generation::Itanium, 0x80, 0).is_none());
        let r = rule(Generation::Montecito, 0x12, 0).unwrap();
        assert_eq!((r.max_increment, r.counters), (1, C4_15));
        assert_eq!(rule(Generation::Montecito, 0x18, 0).unwrap().counters, C10);
        // Every entry's own rule agrees with it (aliases agree).
        for g in [
            Generation::Itanium,
            Generation::Itanium2,
            Generation::Montecito,
        ] {
            for e in catalog(g) {
                let r = rule(g, e.code, e.counter_umask()).unwrap();
                if !e.kind.is_ear() {
                    assert_eq!(
                        r.counters.intersection(e.counters),
                        e.counters,
                        "{}",
                        e.name
                    );
                    assert!(r.max_increment >= e.max_increment, "{}", e.name);
                    if (g, e.code, e.umask) != (Generation::Montecito, 0xBC, 0) {
                        assert_eq!(r.counters, e.counters, "{}", e.name);
                        assert_eq!(r.max_increment, e.max_increment, "{}", e.name);
                    }
                }
            }
            // The one shared code and unit mask: both events' counters.
            let r = rule(Generation::Montecito, 0xBC, 0).unwrap();
            assert_eq!(r.counters, C4_15);
            assert_eq!(r.entry.unwrap().name, "ER_REJECT_ALL_L1_REQ");
        }
    }
}

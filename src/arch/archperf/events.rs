//! The architectural events and event strings (documented on [`EventSpec`]).

use core::fmt;
use core::str::FromStr;

use super::msrs::PerfEvtSel;
use crate::arch::event_syntax::{self, NumberError, SplitError, Term};

/// A pre-defined architectural event (SDM Vol. 3B, "Pre-defined
/// Architectural Performance Events", Table "UMask and Event Select
/// Encodings for Pre-Defined Architectural Performance Events"): its bit in
/// CPUID.0AH:EBX (set: not available) is its discriminant.
///
/// Where the SDM and `perf` name an event differently, [`ArchEvent::name`]
/// is `perf`'s (the names Linux's `arch/x86/events/intel/core.c` maps,
/// `intel_perfmon_event_map` and `intel_arch_events_map`): see each
/// variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ArchEvent {
    /// UnHalted Core Cycles, 3CH/00H: `perf`'s `cycles` (`cpu-cycles`).
    CoreCycles = 0,
    /// Instruction Retired, C0H/00H: `instructions`.
    InstructionsRetired = 1,
    /// UnHalted Reference Cycles, 3CH/01H: `perf`'s `bus-cycles`
    /// (`PERF_COUNT_HW_BUS_CYCLES`, `0x013c` in `intel_perfmon_event_map`;
    /// `intel_arch_events_map` pairs EBX bit 2 with it). `perf`'s
    /// `ref-cycles` is another event: the pseudo-encoding `0x0300` that
    /// only fixed counter 2 counts ([`EventSpec`]). The SDM's name says
    /// "reference", `perf`'s the clock it counts on the older parts (the
    /// bus clock; the crystal clock on later ones).
    ReferenceCycles = 2,
    /// LLC Reference, 2EH/4FH: `cache-references`.
    LlcReferences = 3,
    /// LLC Misses, 2EH/41H: `cache-misses`.
    LlcMisses = 4,
    /// Branch Instruction Retired, C4H/00H: `branches`
    /// (`branch-instructions`).
    BranchInstructionsRetired = 5,
    /// Branch Misses Retired, C5H/00H: `branch-misses`.
    BranchMissesRetired = 6,
    /// Topdown Slots, A4H/01H: this crate's `topdown-slots`. `perf` has no
    /// generic name for it (Intel's event lists, which `perf` reads per
    /// model, call it `TOPDOWN.SLOTS_P`); `perf`'s `slots` is the
    /// pseudo-encoding `0x0400` that only fixed counter 3 counts.
    TopdownSlots = 7,
}

impl ArchEvent {
    /// Every architectural event, by EBX bit.
    pub const ALL: [ArchEvent; 8] = [
        ArchEvent::CoreCycles,
        ArchEvent::InstructionsRetired,
        ArchEvent::ReferenceCycles,
        ArchEvent::LlcReferences,
        ArchEvent::LlcMisses,
        ArchEvent::BranchInstructionsRetired,
        ArchEvent::BranchMissesRetired,
        ArchEvent::TopdownSlots,
    ];

    /// (event select, unit mask, name) by EBX bit.
    const TABLE: [(u8, u8, &'static str); 8] = [
        (0x3C, 0x00, "cycles"),
        (0xC0, 0x00, "instructions"),
        (0x3C, 0x01, "bus-cycles"),
        (0x2E, 0x4F, "cache-references"),
        (0x2E, 0x41, "cache-misses"),
        (0xC4, 0x00, "branches"),
        (0xC5, 0x00, "branch-misses"),
        (0xA4, 0x01, "topdown-slots"),
    ];

    /// Its bit in CPUID.0AH:EBX.
    pub const fn ebx_bit(self) -> u8 {
        self as u8
    }

    /// The event select.
    pub const fn select(self) -> u8 {
        Self::TABLE[self as usize].0
    }

    /// The unit mask.
    pub const fn umask(self) -> u8 {
        Self::TABLE[self as usize].1
    }

    /// The name the parser takes for it: `perf`'s (`bus-cycles` for
    /// UnHalted Reference Cycles), or this crate's `topdown-slots` for the
    /// one `perf` has no generic name for (see the variants).
    pub const fn name(self) -> &'static str {
        Self::TABLE[self as usize].2
    }

    /// The architectural event with this encoding.
    pub fn from_encoding(select: u8, umask: u8) -> Option<ArchEvent> {
        ArchEvent::ALL
            .into_iter()
            .find(|e| e.select() == select && e.umask() == umask)
    }
}

/// What each fixed counter counts, as Linux places events on them
/// (`arch/x86/events/intel/core.c`, `FIXED_EVENT_CONSTRAINT`): (event
/// select, unit mask, name) of fixed counter `i`. Counters 2 and 3 take
/// the pseudo-encodings of their events (event select 00H, unit mask the
/// counter's number plus one: `arch/x86/include/asm/perf_event.h`), which
/// Linux never extends to a general counter; 0 and 1 take the events'
/// real encodings, which general counters count too.
///
/// Source disagreement: the SDM's table of fixed counters ("Association of
/// Fixed-Function Performance Counters with Architectural Performance
/// Events") pairs fixed counter 2 with "UnHalted Reference Cycles"
/// (3CH/01H) and fixed counter 3 with "Topdown Slots" (A4H/01H), while its
/// event descriptions say fixed counter 2 counts at the TSC's rate and
/// 3CH/01H at the bus or crystal clock's. This crate follows Linux: fixed
/// counter 2 takes `ref-cycles` (00H/03H) only, fixed counter 3 `slots`
/// (00H/04H) only; 3CH/01H (`bus-cycles`) and A4H/01H (`topdown-slots`)
/// count on general counters.
const FIXED: [(u8, u8, &str); 4] = [
    (0xC0, 0x00, "instructions"),
    (0x3C, 0x00, "cycles"),
    (0x00, 0x03, "ref-cycles"),
    (0x00, 0x04, "slots"),
];

/// The event names the parser takes: (name, event select, unit mask).
///
/// * `perf`'s generic hardware events (`PERF_TYPE_HARDWARE`; names and
///   aliases from `tools/perf/util/parse-events.l`) with the encodings
///   Linux maps them to on Intel's architectural PMU
///   (`arch/x86/events/intel/core.c`, `intel_perfmon_event_map`, a value
///   being `umask << 8 | event`): `cpu-cycles`/`cycles` `0x003c`,
///   `instructions` `0x00c0`, `cache-references` `0x4f2e`, `cache-misses`
///   `0x412e`, `branch-instructions`/`branches` `0x00c4`, `branch-misses`
///   `0x00c5`, `bus-cycles` `0x013c`, `ref-cycles` `0x0300` (the
///   pseudo-encoding of fixed counter 2).
/// * The `cpu` PMU's event `slots` (`EVENT_ATTR_STR(slots, ...,
///   "event=0x00,umask=0x4")` in the same file, on the parts with fixed
///   counter 3).
/// * This crate's own: `topdown-slots` (A4H/01H, the SDM's architectural
///   event "Topdown Slots") and `ref-tsc` (an earlier name of this crate's
///   for `ref-cycles`).
const NAMES: [(&str, u8, u8); 13] = [
    ("cycles", 0x3C, 0x00),
    ("cpu-cycles", 0x3C, 0x00),
    ("instructions", 0xC0, 0x00),
    ("cache-references", 0x2E, 0x4F),
    ("cache-misses", 0x2E, 0x41),
    ("branches", 0xC4, 0x00),
    ("branch-instructions", 0xC4, 0x00),
    ("branch-misses", 0xC5, 0x00),
    ("bus-cycles", 0x3C, 0x01),
    ("ref-cycles", 0x00, 0x03),
    ("slots", 0x00, 0x04),
    ("topdown-slots", 0xA4, 0x01),
    ("ref-tsc", 0x00, 0x03),
];

/// `perf`'s generic hardware events that Linux maps to no event on Intel's
/// architectural PMU: `intel_perfmon_event_map` has no entry for them
/// (some models' set-up code adds one of their own, a model-specific event
/// this crate leaves to the caller's `event=` terms).
const UNMAPPED: [&str; 4] = [
    "stalled-cycles-frontend",
    "idle-cycles-frontend",
    "stalled-cycles-backend",
    "idle-cycles-backend",
];

/// Where a term or raw config sets its field in `perf_event_attr.config`,
/// as Linux's `cpu` PMU formats say (`arch/x86/events/intel/core.c`,
/// `PMU_FORMAT_ATTR`: `event` `config:0-7`, `umask` `config:8-15`, `edge`
/// `config:18`, `any` `config:21` (version 3 and later), `inv` `config:23`,
/// `cmask` `config:24-31`): (term, first bit, width). The layout is
/// `IA32_PERFEVTSELx`'s (SDM Vol. 3B Figure "Layout of IA32_PERFEVTSELx
/// MSRs").
const FORMAT: [(&str, u32, u32); 6] = [
    ("event", 0, 8),
    ("umask", 8, 8),
    ("edge", 18, 1),
    ("any", 21, 1),
    ("inv", 23, 1),
    ("cmask", 24, 8),
];

/// The bits of a raw config that a format term covers (the union of
/// [`FORMAT`]).
const FORMAT_BITS: u64 = 0xFFA4_FFFF;

/// `perf`'s event modifiers that this driver has no counterpart for, with
/// what each means (`tools/perf/Documentation/perf-list.txt`, "EVENT
/// MODIFIERS").
const OTHER_MODIFIERS: [(char, &str); 12] = [
    ('h', "hypervisor counting"),
    ('I', "non-idle counting"),
    ('G', "guest counting"),
    ('H', "host counting"),
    ('P', "maximum precise level (PEBS)"),
    ('S', "sample read"),
    ('D', "pinned"),
    ('W', "weak group"),
    ('e', "exclusive"),
    ('b', "BPF aggregation"),
    ('R', "retire latency"),
    ('X', "no regrouping"),
];

/// An event to count on the architectural PMU, with its filters: the
/// fields of `IA32_PERFEVTSELx` that say what counts (SDM Vol. 3B Figure
/// "Layout of IA32_PERFEVTSELx MSRs"). It parses from the event strings
/// `perf` users write, resolved as `perf` resolves them on Intel's
/// architectural PMU (Linux's `arch/x86/events/intel/core.c` and
/// `tools/perf/util/parse-events.l`); model-specific event tables are out
/// of scope.
///
/// # Names
///
/// | name | event select/unit mask (`perf_event_attr.config`) | counts on |
/// |---|---|---|
/// | `cycles`, `cpu-cycles` | 3CH/00H (`0x003c`) | fixed counter 1, general counters |
/// | `instructions` | C0H/00H (`0x00c0`) | fixed counter 0, general counters |
/// | `cache-references` | 2EH/4FH (`0x4f2e`) | general counters |
/// | `cache-misses` | 2EH/41H (`0x412e`) | general counters |
/// | `branches`, `branch-instructions` | C4H/00H (`0x00c4`) | general counters |
/// | `branch-misses` | C5H/00H (`0x00c5`) | general counters |
/// | `bus-cycles` | 3CH/01H (`0x013c`) | general counters |
/// | `ref-cycles` (`ref-tsc`) | 00H/03H (`0x0300`, a pseudo-encoding) | fixed counter 2 only |
/// | `slots` | 00H/04H (`0x0400`, a pseudo-encoding) | fixed counter 3 only |
/// | `topdown-slots` (not `perf`'s) | A4H/01H (`0x01a4`) | general counters |
///
/// `stalled-cycles-frontend` and `stalled-cycles-backend` (and their
/// `idle-` aliases) are refused: Linux maps them to no event on the
/// architectural PMU. Where `perf` and the SDM name an event differently
/// (3CH/01H: the SDM's "UnHalted Reference Cycles", `perf`'s `bus-cycles`;
/// fixed counter 2: the SDM pairs it with 3CH/01H, `perf` counts
/// `ref-cycles` there under its own encoding) the names are `perf`'s;
/// [`ArchEvent`] and [`EventSpec::fixed_counter`] say more.
///
/// # Syntax
///
/// | form | example |
/// |---|---|
/// | a name | `cycles` |
/// | terms | `event=0x3c,umask=0x00,cmask=2,inv` |
/// | a raw config (hexadecimal, `perf`'s `rNNN`) | `r13c`, `r0x13c` |
/// | any of these in `perf`'s PMU syntax | `cpu/ref-cycles/`, `cpu/event=0x3c,any=1/`, `cpu/r13c/` |
///
/// Terms (each at most once; a term without `=` is 1, as in `perf`;
/// numbers in decimal or `0x` hexadecimal): `event=` (required, or
/// `config=`), `umask=`, `cmask=` (8 bits each), `inv`, `edge`, `any` (0 or
/// 1: INV, E, AnyThread) and `config=`, the whole `perf_event_attr.config`
/// in the layout of Linux's `cpu` PMU formats (`event` bits 7:0, `umask`
/// 15:8, `edge` 18, `any` 21, `inv` 23, `cmask` 31:24), which a raw config
/// is too. Bits outside those are refused rather than dropped as Linux
/// drops them: USR and OS come from the modifiers; `pc` (pin control, bit
/// 19), which `perf` accepts and Linux clears, is refused by name.
///
/// Modifiers follow a `:` (or, in the PMU syntax, the closing `/`): `u`
/// (CPL > 0 only), `k` (CPL 0 only), `uk` or `ku` (both, as without
/// modifiers), and `p` once, twice or three times: `perf`'s precise level
/// (`precise_ip` 1-3, [`EventSpec::precise`]), which a sampling
/// configuration takes as PEBS (the driver's [`CounterConfig`]: `:p` the
/// record's RIP field, `:pp` and `:ppp` its EventingIP, the instruction of
/// the event itself, [`super::Precise`]). `perf`'s other modifiers (`h`,
/// `P`, `G`, ...), a fourth `p` and a repeated `u` or `k` are refused, each
/// with a message.
///
/// [`CounterConfig`]: super::driver::CounterConfig
///
/// Errors give the byte offset of the offending term, and the closest name
/// or term where one is near ([`ParseError`]).
///
/// ```
/// use pmu::arch::archperf::{ArchEvent, EventSpec};
///
/// let e: EventSpec = "event=0x3c,umask=0x00,cmask=2,inv:u".parse()?;
/// assert_eq!((e.select, e.umask, e.cmask, e.inv, e.usr, e.os), (0x3C, 0, 2, true, true, false));
/// let i: EventSpec = "instructions:uk".parse()?;
/// assert_eq!(i.architectural(), Some(ArchEvent::InstructionsRetired));
/// assert_eq!(i.fixed_counter(), Some(0));
/// let r: EventSpec = "cpu/ref-cycles/k".parse()?;
/// assert_eq!((r.perf_config(), r.fixed_counter(), r.counts_on_general()), (0x0300, Some(2), false));
/// let b: EventSpec = "bus-cycles".parse()?;
/// assert_eq!((b.architectural(), b.fixed_counter()), (Some(ArchEvent::ReferenceCycles), None));
/// let err = "event=0x3c,umaks=1".parse::<EventSpec>().unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "unknown term `umaks` at byte 11: expected event=, umask=, cmask=, inv, edge, any or config=; did you mean `umask`?"
/// );
/// # Ok::<(), pmu::arch::archperf::ParseError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EventSpec {
    /// Event select.
    pub select: u8,
    /// Unit mask.
    pub umask: u8,
    /// CMASK: count cycles with at least this many events (0: events).
    pub cmask: u8,
    /// INV: cycles with fewer than CMASK events.
    pub inv: bool,
    /// E: count rising edges of the CMASK comparison.
    pub edge: bool,
    /// AnyThread: count the events of every logical processor of the core
    /// (version 3 and 4; deprecated where CPUID.0AH:EDX\[15\] says so; Linux
    /// refuses it below version 3).
    pub any: bool,
    /// Count at CPL > 0.
    pub usr: bool,
    /// Count at CPL 0.
    pub os: bool,
    /// `perf`'s precise level (`precise_ip`): 0, or 1-3 for `:p`, `:pp`,
    /// `:ppp`, which a sampling configuration takes as PEBS.
    pub precise: u8,
}

impl EventSpec {
    /// Event `select` with `umask`, at every privilege, no filter.
    pub const fn raw(select: u8, umask: u8) -> EventSpec {
        EventSpec {
            select,
            umask,
            cmask: 0,
            inv: false,
            edge: false,
            any: false,
            usr: true,
            os: true,
            precise: 0,
        }
    }

    /// The same event at `perf`'s precise level `level` (`precise_ip` 0-3;
    /// more is taken as 3).
    pub const fn with_precise(mut self, level: u8) -> EventSpec {
        self.precise = if level > 3 { 3 } else { level };
        self
    }

    /// An architectural event at every privilege.
    pub const fn arch(e: ArchEvent) -> EventSpec {
        EventSpec::raw(e.select(), e.umask())
    }

    /// What fixed counter `i` counts, at every privilege (`None` past 3):
    /// the encodings of [`EventSpec::fixed_counter`].
    pub const fn fixed(i: u8) -> Option<EventSpec> {
        if (i as usize) < FIXED.len() {
            Some(EventSpec::raw(FIXED[i as usize].0, FIXED[i as usize].1))
        } else {
            None
        }
    }

    /// At CPL > 0 only.
    pub const fn user(mut self) -> EventSpec {
        self.usr = true;
        self.os = false;
        self
    }

    /// At CPL 0 only.
    pub const fn kernel(mut self) -> EventSpec {
        self.usr = false;
        self.os = true;
        self
    }

    /// The pre-defined architectural event this is, if any.
    pub fn architectural(&self) -> Option<ArchEvent> {
        ArchEvent::from_encoding(self.select, self.umask)
    }

    /// The fixed counter that counts this event, if one does, as Linux
    /// places it (`FIXED_EVENT_CONSTRAINT` in
    /// `arch/x86/events/intel/core.c`): C0H/00H on fixed counter 0,
    /// 3CH/00H on 1, the pseudo-encodings 00H/03H (`ref-cycles`) on 2 and
    /// 00H/04H (`slots`) on 3. Only without CMASK, INV or E (a fixed
    /// counter has none: Linux's constraint compares them too), and without
    /// AnyThread (Linux would set the fixed field's AnyThread bit; this
    /// driver's fixed-counter path does not program it, so it refuses the
    /// filter rather than drop it). 3CH/01H (`bus-cycles`), which the SDM
    /// pairs with fixed counter 2, is not that counter's event: see
    /// [`EventSpec`].
    pub fn fixed_counter(&self) -> Option<u8> {
        if self.cmask != 0 || self.inv || self.edge || self.any {
            return None;
        }
        FIXED
            .iter()
            .position(|&(s, u, _)| (s, u) == (self.select, self.umask))
            .map(|i| i as u8)
    }

    /// Whether fixed counter `i` counts this event.
    pub fn counts_on_fixed(&self, i: u8) -> bool {
        self.fixed_counter() == Some(i)
    }

    /// Whether a general counter can count it: every encoding but those
    /// with event select 00H, the fixed counters' pseudo-encodings (Linux's
    /// `use_fixed_pseudo_encoding`, `arch/x86/include/asm/perf_event.h`,
    /// which it never places on a general counter: `ref-cycles` counts on
    /// fixed counter 2 only).
    pub const fn counts_on_general(&self) -> bool {
        self.select != 0
    }

    /// The `perf_event_attr.config` `perf` builds for it: the terms' fields
    /// where Linux's `cpu` PMU formats put them (event bits 7:0, umask
    /// 15:8, edge 18, any 21, inv 23, cmask 31:24), without the privilege
    /// (`perf` passes that as the `exclude_user` and `exclude_kernel`
    /// flags). For a name, the value Linux's `intel_perfmon_event_map`
    /// holds: `0x013c` for `bus-cycles`, `0x0300` for `ref-cycles`.
    pub const fn perf_config(&self) -> u64 {
        self.select as u64
            | (self.umask as u64) << 8
            | (self.edge as u64) << 18
            | (self.any as u64) << 21
            | (self.inv as u64) << 23
            | (self.cmask as u64) << 24
    }

    /// The event of a `perf_event_attr.config` ([`EventSpec::perf_config`]),
    /// at every privilege; `Err` with the bits no format term covers.
    const fn from_perf_config(config: u64) -> Result<EventSpec, u64> {
        let stray = config & !FORMAT_BITS;
        if stray != 0 {
            return Err(stray);
        }
        let mut spec = EventSpec::raw(config as u8, (config >> 8) as u8);
        spec.edge = config >> 18 & 1 != 0;
        spec.any = config >> 21 & 1 != 0;
        spec.inv = config >> 23 & 1 != 0;
        spec.cmask = (config >> 24) as u8;
        Ok(spec)
    }

    /// The `IA32_PERFEVTSELx` image: the event, its filters and privilege,
    /// without EN and INT.
    pub const fn evtsel(&self) -> PerfEvtSel {
        PerfEvtSel::new(self.select, self.umask)
            .with_cmask(self.cmask)
            .with_inv(self.inv)
            .with_edge(self.edge)
            .with_any_thread(self.any)
            .with_usr(self.usr)
            .with_os(self.os)
    }
}

/// Why an event string was refused: what, where, the term, and the closest
/// name or term where one is near.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ParseError {
    /// Byte offset of the offending term.
    pub offset: usize,
    /// What was wrong.
    pub kind: ParseErrorKind,
    term: Term,
    suggestion: Option<&'static str>,
}

impl ParseError {
    fn new(kind: ParseErrorKind, offset: usize, term: &str) -> ParseError {
        ParseError {
            offset,
            kind,
            term: Term::new(term),
            suggestion: None,
        }
    }

    fn suggesting(mut self, typed: &str, names: impl Iterator<Item = &'static str>) -> ParseError {
        self.suggestion = event_syntax::closest(typed, names);
        self
    }

    /// The offending term (its first 24 bytes).
    pub fn term(&self) -> &str {
        self.term.as_str()
    }

    /// The name or term closest to a misspelt one (edit distance, a
    /// transposition counting as one edit), when one is near enough to be
    /// meant: `umask` for `umaks`, `cycles` for `cyles`.
    pub const fn suggestion(&self) -> Option<&'static str> {
        self.suggestion
    }
}

/// What was wrong with an event string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ParseErrorKind {
    /// No event where one belongs (an empty string, `cpu//`, `:u`).
    Empty,
    /// An empty term between commas.
    EmptyTerm,
    /// A term that is none of `event`, `umask`, `cmask`, `inv`, `edge`,
    /// `any`, `config`.
    UnknownTerm,
    /// A name that is no event the parser knows.
    UnknownEvent,
    /// A `perf` name that Linux maps to no event on the architectural PMU
    /// (`stalled-cycles-frontend`, `stalled-cycles-backend`).
    Unmapped,
    /// A value that is not a number.
    BadNumber,
    /// A value too big for its field.
    TooBig {
        /// The field's width in bits.
        bits: u8,
    },
    /// Terms without `event=` (or `config=`).
    MissingEvent,
    /// A term that sets a field an earlier term set.
    RepeatedTerm,
    /// The `pc` term (pin control), which Linux clears.
    PinControl,
    /// A raw config (or `config=`) with bits no format term covers.
    RawBits {
        /// Those bits.
        bits: u64,
    },
    /// A PMU other than `cpu` (`name/.../`).
    UnknownPmu,
    /// `cpu/` without its closing `/`.
    Unclosed,
    /// A modifier that is not one of `perf`'s.
    BadModifier,
    /// A modifier given twice.
    RepeatedModifier,
    /// One of `perf`'s modifiers that this driver has no counterpart for
    /// (`h`, `P`, `G`, ...).
    UnsupportedModifier,
    /// A fourth `p`: `perf`'s precise levels are 0 to 3.
    TooPrecise,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (term, at) = (self.term(), self.offset);
        match self.kind {
            ParseErrorKind::Empty => write!(
                f,
                "no event at byte {at}: expected a name (such as `cycles`), terms (`event=0x..`) or a raw config (`r..`)"
            )?,
            ParseErrorKind::EmptyTerm => {
                write!(f, "empty term at byte {at}: remove the extra `,`")?
            }
            ParseErrorKind::UnknownTerm => write!(
                f,
                "unknown term `{term}` at byte {at}: expected event=, umask=, cmask=, inv, edge, any or config="
            )?,
            ParseErrorKind::UnknownEvent => {
                write!(f, "unknown event `{term}` at byte {at}: expected ")?;
                for (name, _, _) in NAMES {
                    write!(f, "{name}, ")?;
                }
                f.write_str("event=0x..,umask=0x.. or r<hex>")?
            }
            ParseErrorKind::Unmapped => write!(
                f,
                "`{term}` at byte {at} is a perf event that Linux maps to no event on the architectural PMU (intel_perfmon_event_map has none): give the model's encoding as event=0x..,umask=0x.."
            )?,
            ParseErrorKind::BadNumber => write!(
                f,
                "`{term}` at byte {at} is not a number (decimal or 0x hexadecimal)"
            )?,
            ParseErrorKind::TooBig { bits } => write!(
                f,
                "`{term}` at byte {at} does not fit its {bits}-bit field (0 to {})",
                (1u64 << bits) - 1
            )?,
            ParseErrorKind::MissingEvent => {
                write!(f, "the terms at byte {at} have no event= (or config=) term")?
            }
            ParseErrorKind::RepeatedTerm => write!(
                f,
                "term `{term}` at byte {at} sets a field an earlier term set: give each once (config= sets them all)"
            )?,
            ParseErrorKind::PinControl => write!(
                f,
                "term `{term}` at byte {at} is not supported: pin control (IA32_PERFEVTSELx bit 19) is a bit Linux clears (X86_RAW_EVENT_MASK has no PC), so perf never programs it"
            )?,
            ParseErrorKind::RawBits { bits } => write!(
                f,
                "raw config `{term}` at byte {at} sets bits {bits:#x} that no term covers (event 7:0, umask 15:8, edge 18, any 21, inv 23, cmask 31:24); the privilege comes from the :u and :k modifiers"
            )?,
            ParseErrorKind::UnknownPmu => write!(
                f,
                "unknown PMU `{term}` at byte {at}: expected cpu/.../ (the architectural PMU of the logical processor the driver runs on)"
            )?,
            ParseErrorKind::Unclosed => write!(
                f,
                "`cpu/` at byte {at} has no closing `/`: expected cpu/.../"
            )?,
            ParseErrorKind::BadModifier if term.is_empty() => {
                write!(f, "empty modifier at byte {at}: expected {MODIFIERS}")?
            }
            ParseErrorKind::BadModifier => write!(
                f,
                "unknown modifier `{term}` at byte {at}: expected {MODIFIERS}"
            )?,
            ParseErrorKind::TooPrecise => write!(
                f,
                "modifier `{term}` at byte {at} asks for a precise level above 3: perf's are p, pp and ppp"
            )?,
            ParseErrorKind::RepeatedModifier => write!(
                f,
                "modifier `{term}` at byte {at} is given twice (perf refuses a repeated modifier too)"
            )?,
            ParseErrorKind::UnsupportedModifier => {
                let what = OTHER_MODIFIERS
                    .iter()
                    .find(|(c, _)| term.starts_with(*c))
                    .map_or("", |(_, what)| what);
                write!(
                    f,
                    "modifier `{term}` at byte {at} is perf's {what}, which this driver has no counterpart for: expected {MODIFIERS}"
                )?
            }
        }
        match self.suggestion {
            Some(name) => write!(f, "; did you mean `{name}`?"),
            None => Ok(()),
        }
    }
}

impl core::error::Error for ParseError {}

/// A number in decimal or `0x` hexadecimal that fits `bits` bits (64 for
/// `config=`), the text at byte `at`.
fn number(text: &str, at: usize, bits: u32) -> Result<u64, ParseError> {
    event_syntax::number(text, bits).map_err(|e| {
        let kind = match e {
            NumberError::Bad => ParseErrorKind::BadNumber,
            NumberError::TooBig(bits) => ParseErrorKind::TooBig { bits },
        };
        ParseError::new(kind, at, text)
    })
}

/// A raw config's event: `perf`'s `rNNN` (`text` after the `r`, hexadecimal,
/// optionally `0x`-prefixed) or a `config=` value, at byte `at`.
fn raw_config(text: &str, config: u64, at: usize) -> Result<EventSpec, ParseError> {
    EventSpec::from_perf_config(config)
        .map_err(|bits| ParseError::new(ParseErrorKind::RawBits { bits }, at, text))
}

/// The terms `event=..,umask=..,...` starting at byte `base`.
fn terms(body: &str, base: usize) -> Result<EventSpec, ParseError> {
    let mut spec = EventSpec::raw(0, 0);
    // The fields set so far, as bits of the config (`config=` sets all).
    let mut set = 0u64;
    let mut has_event = false;
    let mut at = base;
    for term in body.split(',') {
        let (key, value) = match term.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (term, None),
        };
        let value_at = at + key.len() + 1;
        if term.is_empty() {
            return Err(ParseError::new(ParseErrorKind::EmptyTerm, at, term));
        }
        let (fields, config) = match key {
            "config" => {
                let v = value.unwrap_or("1");
                let config = number(v, value_at, 64)?;
                spec = raw_config(v, config, value_at)?;
                (FORMAT_BITS, None)
            }
            "pc" => return Err(ParseError::new(ParseErrorKind::PinControl, at, key)),
            _ => match FORMAT.iter().find(|(name, _, _)| *name == key) {
                Some(&(_, shift, width)) => {
                    let v = number(value.unwrap_or("1"), value_at, width)?;
                    (((1u64 << width) - 1) << shift, Some(v << shift))
                }
                None => {
                    return Err(ParseError::new(ParseErrorKind::UnknownTerm, at, key)
                        .suggesting(key, FORMAT.iter().map(|(n, _, _)| *n).chain(["config"])));
                }
            },
        };
        if set & fields != 0 {
            return Err(ParseError::new(ParseErrorKind::RepeatedTerm, at, key));
        }
        set |= fields;
        has_event |= fields & 0xFF != 0;
        if let Some(bits) = config {
            // One field's bits: merged into the event so far.
            let merged = spec.perf_config() | bits;
            spec = EventSpec::from_perf_config(merged).unwrap_or(spec);
        }
        at += term.len() + 1;
    }
    if has_event {
        Ok(spec)
    } else {
        Err(ParseError::new(ParseErrorKind::MissingEvent, base, body))
    }
}

/// A name, terms or a raw config at byte `at`, without modifiers.
fn body(text: &str, at: usize) -> Result<EventSpec, ParseError> {
    if text.is_empty() {
        return Err(ParseError::new(ParseErrorKind::Empty, at, text));
    }
    let first = text.split(['=', ',']).next().unwrap_or(text);
    let is_term = text.contains(['=', ','])
        || first == "config"
        || first == "pc"
        || FORMAT.iter().any(|(n, _, _)| *n == first);
    if is_term {
        return terms(text, at);
    }
    if let Some(config) = event_syntax::raw_hex(text) {
        let config = config.map_err(|_| ParseError::new(ParseErrorKind::BadNumber, at, text))?;
        return raw_config(text, config, at);
    }
    if let Some(&(_, select, umask)) = NAMES.iter().find(|(name, _, _)| *name == text) {
        return Ok(EventSpec::raw(select, umask));
    }
    if UNMAPPED.contains(&text) {
        return Err(ParseError::new(ParseErrorKind::Unmapped, at, text));
    }
    Err(ParseError::new(ParseErrorKind::UnknownEvent, at, text)
        .suggesting(text, NAMES.iter().map(|(n, _, _)| *n)))
}

/// What a modifier may be, for the messages.
const MODIFIERS: &str = "u (CPL > 0), k (CPL 0) or both, and p, pp or ppp (precise level, PEBS)";

/// Applies the modifiers `mods` (after the `:`, at byte `at`) to `spec`:
/// as `perf` does (`get_event_modifier`), the first of `u` and `k`
/// excludes every privilege, and each one given includes its own; each
/// `p` raises the precise level, at most to 3.
fn modifiers(mut spec: EventSpec, mods: &str, at: usize) -> Result<EventSpec, ParseError> {
    if mods.is_empty() {
        return Err(ParseError::new(ParseErrorKind::BadModifier, at, mods));
    }
    let (mut usr, mut os, mut precise) = (false, false, 0u8);
    let mut privilege = false;
    for (i, c) in mods.char_indices() {
        let here = &mods[i..i + c.len_utf8()];
        let seen = match c {
            'u' => {
                privilege = true;
                core::mem::replace(&mut usr, true)
            }
            'k' => {
                privilege = true;
                core::mem::replace(&mut os, true)
            }
            'p' if precise < 3 => {
                precise += 1;
                false
            }
            'p' => return Err(ParseError::new(ParseErrorKind::TooPrecise, at + i, here)),
            _ if OTHER_MODIFIERS.iter().any(|(m, _)| *m == c) => {
                return Err(ParseError::new(
                    ParseErrorKind::UnsupportedModifier,
                    at + i,
                    here,
                ));
            }
            _ => return Err(ParseError::new(ParseErrorKind::BadModifier, at + i, here)),
        };
        if seen {
            return Err(ParseError::new(
                ParseErrorKind::RepeatedModifier,
                at + i,
                here,
            ));
        }
    }
    if privilege {
        spec.usr = usr;
        spec.os = os;
    }
    spec.precise = precise;
    Ok(spec)
}

impl FromStr for EventSpec {
    type Err = ParseError;

    /// `event[:mods]` or `cpu/event/[mods]`, where `event` is a name,
    /// terms or a raw config and `mods` is `u`, `k` or both (see
    /// [`EventSpec`]).
    fn from_str(s: &str) -> Result<EventSpec, ParseError> {
        let parts = event_syntax::split(s, "cpu").map_err(|e| match e {
            SplitError::UnknownPmu(pmu) => ParseError::new(ParseErrorKind::UnknownPmu, 0, pmu)
                .suggesting(pmu, ["cpu"].into_iter()),
            SplitError::Unclosed => ParseError::new(ParseErrorKind::Unclosed, 0, "cpu/"),
        })?;
        let spec = body(parts.event, parts.event_at)?;
        match parts.mods {
            Some((mods, at)) => modifiers(spec, mods, at),
            None => Ok(spec),
        }
    }
}

#[cfg(test)]
mod tests;

//! The architectural events and event strings (documented on [`EventSpec`]).

use core::fmt;
use core::str::FromStr;

use super::msrs::PerfEvtSel;

/// A pre-defined architectural event: its bit in CPUID.0AH:EBX (set: not
/// available) is its discriminant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ArchEvent {
    /// UnHalted Core Cycles, 3CH/00H.
    CoreCycles = 0,
    /// Instruction Retired, C0H/00H.
    InstructionsRetired = 1,
    /// UnHalted Reference Cycles, 3CH/01H.
    ReferenceCycles = 2,
    /// LLC Reference, 2EH/4FH.
    LlcReferences = 3,
    /// LLC Misses, 2EH/41H.
    LlcMisses = 4,
    /// Branch Instruction Retired, C4H/00H.
    BranchInstructionsRetired = 5,
    /// Branch Misses Retired, C5H/00H.
    BranchMissesRetired = 6,
    /// Topdown Slots, A4H/01H.
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

    /// (event select, unit mask, `perf` name) by EBX bit.
    const TABLE: [(u8, u8, &'static str); 8] = [
        (0x3C, 0x00, "cycles"),
        (0xC0, 0x00, "instructions"),
        (0x3C, 0x01, "ref-cycles"),
        (0x2E, 0x4F, "cache-references"),
        (0x2E, 0x41, "cache-misses"),
        (0xC4, 0x00, "branches"),
        (0xC5, 0x00, "branch-misses"),
        (0xA4, 0x01, "slots"),
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

    /// The name `perf` gives it (and this crate's parser takes).
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

/// What each fixed counter counts: (event select, unit mask, name) of
/// fixed counter `i`. Fixed counter 2's encoding is Linux's pseudo-encoding
/// for `CPU_CLK_UNHALTED.REF_TSC`; fixed counter 3 also accepts its
/// pseudo-encoding 00H/04H.
///
/// Source disagreement: the SDM's table of fixed counters pairs fixed
/// counter 2 with the architectural event "UnHalted Reference Cycles"
/// (3CH/01H), while its event description says fixed counter 2 counts at
/// the TSC's rate and 3CH/01H at the reference (bus or crystal) clock's;
/// Linux counts `ref-cycles` on fixed counter 2 only, under the
/// pseudo-encoding. The driver accepts both encodings on fixed counter 2
/// (what it counts is the hardware's), and `ref-tsc` names it.
const FIXED: [(u8, u8, &str); 4] = [
    (0xC0, 0x00, "instructions"),
    (0x3C, 0x00, "cycles"),
    (0x00, 0x03, "ref-tsc"),
    (0xA4, 0x01, "slots"),
];

/// Events of the architectural PMU: the pre-defined architectural events
/// (SDM Vol. 3B, Table "UMask and Event Select Encodings for Pre-Defined
/// Architectural Performance Events"), which CPUID leaf 0AH says are
/// available, and any event by its raw encoding, in the syntax `perf` users
/// know: `event=0x3c,umask=0x00,cmask=2,inv,edge`, or a name (`cycles`,
/// `instructions`, ...), each optionally followed by `:u` (CPL > 0 only) or
/// `:k` (CPL 0 only). Model-specific event tables are out of scope.
///
/// The fixed counters count one event each (SDM Vol. 3B "Fixed-Function
/// Performance Counters"): fixed counter 0 `INST_RETIRED.ANY`, 1
/// `CPU_CLK_UNHALTED.THREAD` (`CPU_CLK_UNHALTED.CORE`), 2
/// `CPU_CLK_UNHALTED.REF_TSC`, 3 `TOPDOWN.SLOTS`. Counter 2 counts at the
/// TSC's rate, which is not the rate of the general-counter event
/// "UnHalted Reference Cycles" (3CH/01H, the bus or crystal clock): they
/// are two events, and `ref-tsc` (Linux's pseudo-encoding `event=0x00,
/// umask=0x03`) names the fixed one.
///
/// ```
/// use pmu::arch::archperf::{ArchEvent, EventSpec};
///
/// let e: EventSpec = "event=0x3c,umask=0x00,cmask=2,inv:u".parse()?;
/// assert_eq!((e.select, e.umask, e.cmask, e.inv, e.usr, e.os), (0x3C, 0, 2, true, true, false));
/// let i: EventSpec = "instructions".parse()?;
/// assert_eq!(i.architectural(), Some(ArchEvent::InstructionsRetired));
/// assert_eq!(i.fixed_counter(), Some(0));
/// let err = "event=0x3c,umaks=1".parse::<EventSpec>().unwrap_err();
/// assert_eq!(err.to_string(), "unknown term `umaks` at byte 11: expected event=, umask=, cmask=, inv or edge");
/// # Ok::<(), pmu::arch::archperf::ParseError>(())
/// ```
///
/// An event to count, with its filters: the fields of `IA32_PERFEVTSELx`
/// that say what counts (SDM Vol. 3B Figure "Layout of IA32_PERFEVTSELx").
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
    /// Count at CPL > 0.
    pub usr: bool,
    /// Count at CPL 0.
    pub os: bool,
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
            usr: true,
            os: true,
        }
    }

    /// An architectural event at every privilege.
    pub const fn arch(e: ArchEvent) -> EventSpec {
        EventSpec::raw(e.select(), e.umask())
    }

    /// What fixed counter `i` counts, at every privilege (`None` past 3).
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

    /// The fixed counter that counts this event, if one does, without
    /// filters (a fixed counter has no CMASK, INV or E).
    pub fn fixed_counter(&self) -> Option<u8> {
        if self.cmask != 0 || self.inv || self.edge {
            return None;
        }
        let also = match (self.select, self.umask) {
            (0x3C, 0x01) => Some(2),
            (0x00, 0x04) => Some(3),
            _ => None,
        };
        FIXED
            .iter()
            .position(|&(s, u, _)| (s, u) == (self.select, self.umask))
            .map(|i| i as u8)
            .or(also)
    }

    /// Whether fixed counter `i` counts this event.
    pub fn counts_on_fixed(&self, i: u8) -> bool {
        self.fixed_counter() == Some(i)
    }

    /// The `IA32_PERFEVTSELx` image: the event, its filters and privilege,
    /// without EN and INT.
    pub const fn evtsel(&self) -> PerfEvtSel {
        PerfEvtSel::new(self.select, self.umask)
            .with_cmask(self.cmask)
            .with_inv(self.inv)
            .with_edge(self.edge)
            .with_usr(self.usr)
            .with_os(self.os)
    }
}

/// Names besides the architectural events' own `perf` names.
const ALIASES: [(&str, EventSpec); 4] = [
    ("cpu-cycles", EventSpec::arch(ArchEvent::CoreCycles)),
    (
        "branch-instructions",
        EventSpec::arch(ArchEvent::BranchInstructionsRetired),
    ),
    ("topdown-slots", EventSpec::arch(ArchEvent::TopdownSlots)),
    ("ref-tsc", EventSpec::raw(FIXED[2].0, FIXED[2].1)),
];

/// Why an event string was refused: what, where, and the term.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ParseError {
    /// Byte offset of the offending term.
    pub offset: usize,
    /// What was wrong.
    pub kind: ParseErrorKind,
    term: [u8; 24],
    term_len: u8,
}

impl ParseError {
    fn new(kind: ParseErrorKind, offset: usize, term: &str) -> ParseError {
        let mut bytes = [0; 24];
        // Cut at a character boundary, so the copy stays UTF-8.
        let mut len = term.len().min(bytes.len());
        while !term.is_char_boundary(len) {
            len -= 1;
        }
        bytes[..len].copy_from_slice(&term.as_bytes()[..len]);
        ParseError {
            offset,
            kind,
            term: bytes,
            term_len: len as u8,
        }
    }

    /// The offending term (its first 24 bytes).
    pub fn term(&self) -> &str {
        let bytes = self.term.get(..usize::from(self.term_len)).unwrap_or(&[]);
        core::str::from_utf8(bytes).unwrap_or("")
    }
}

/// What was wrong with an event string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ParseErrorKind {
    /// The string is empty.
    Empty,
    /// A term that is neither a known key nor a flag.
    UnknownTerm,
    /// A name that is no architectural event.
    UnknownEvent,
    /// A number that does not parse or does not fit its field.
    BadNumber,
    /// A raw encoding without `event=`.
    MissingEvent,
    /// A privilege suffix other than `:u` or `:k`.
    BadModifier,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (term, at) = (self.term(), self.offset);
        match self.kind {
            ParseErrorKind::Empty => f.write_str("the event string is empty"),
            ParseErrorKind::UnknownTerm => write!(
                f,
                "unknown term `{term}` at byte {at}: expected event=, umask=, cmask=, inv or edge"
            ),
            ParseErrorKind::UnknownEvent => {
                write!(f, "unknown event `{term}` at byte {at}: expected ")?;
                for (k, e) in ArchEvent::ALL.iter().enumerate() {
                    write!(f, "{}{}", if k == 0 { "" } else { ", " }, e.name())?;
                }
                f.write_str(", ref-tsc, or event=0x..,umask=0x..")
            }
            ParseErrorKind::BadNumber => write!(
                f,
                "`{term}` at byte {at} is not a number from 0 to 255 (decimal or 0x hexadecimal)"
            ),
            ParseErrorKind::MissingEvent => {
                write!(f, "the raw encoding at byte {at} has no event= term")
            }
            ParseErrorKind::BadModifier => write!(
                f,
                "unknown modifier `{term}` at byte {at}: expected :u (user) or :k (kernel)"
            ),
        }
    }
}

impl core::error::Error for ParseError {}

fn number(text: &str, at: usize) -> Result<u8, ParseError> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u8::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| ParseError::new(ParseErrorKind::BadNumber, at, text))
}

/// `event=..,umask=..,cmask=..,inv,edge` starting at byte `base`.
fn raw_terms(body: &str, base: usize) -> Result<EventSpec, ParseError> {
    let mut spec = EventSpec::raw(0, 0);
    let mut has_event = false;
    let mut at = base;
    for term in body.split(',') {
        match term.split_once('=') {
            Some(("event", v)) => {
                spec.select = number(v, at + 6)?;
                has_event = true;
            }
            Some(("umask", v)) => spec.umask = number(v, at + 6)?,
            Some(("cmask", v)) => spec.cmask = number(v, at + 6)?,
            None if term == "inv" => spec.inv = true,
            None if term == "edge" => spec.edge = true,
            _ => {
                let key = term.split_once('=').map_or(term, |(k, _)| k);
                return Err(ParseError::new(ParseErrorKind::UnknownTerm, at, key));
            }
        }
        at += term.len() + 1;
    }
    if has_event {
        Ok(spec)
    } else {
        Err(ParseError::new(ParseErrorKind::MissingEvent, base, body))
    }
}

impl FromStr for EventSpec {
    type Err = ParseError;

    /// `name[:u|:k]` or `event=0x..[,umask=0x..][,cmask=n][,inv][,edge][:u|:k]`.
    fn from_str(s: &str) -> Result<EventSpec, ParseError> {
        let (body, modifier) = match s.rsplit_once(':') {
            Some((body, m)) => (body, Some(m)),
            None => (s, None),
        };
        if body.is_empty() {
            return Err(ParseError::new(ParseErrorKind::Empty, 0, s));
        }
        let spec = if body.contains('=') {
            raw_terms(body, 0)?
        } else {
            ArchEvent::ALL
                .iter()
                .map(|e| (e.name(), EventSpec::arch(*e)))
                .chain(ALIASES)
                .find(|(name, _)| *name == body)
                .map(|(_, spec)| spec)
                .ok_or_else(|| ParseError::new(ParseErrorKind::UnknownEvent, 0, body))?
        };
        match modifier {
            None => Ok(spec),
            Some("u") => Ok(spec.user()),
            Some("k") => Ok(spec.kernel()),
            Some(m) => Err(ParseError::new(
                ParseErrorKind::BadModifier,
                body.len() + 1,
                m,
            )),
        }
    }
}

//! libpfm4-compatible event strings (documented on [`EventSpec`]).

use core::fmt;
use core::str::FromStr;

use super::cccr::{CccrValue, Threshold};
use super::escr::{EscrValue, EventMask, TagValue, ThreadCpl};
use super::events::{EventInfo, EventName, MaskInfo, MaskKind, ReplayMetric};
use super::msrs::{Escr, EscrSelect, EscrSet};
use super::tag_bits::{TagBits, replay_registers};

/// libpfm4's two NetBurst PMU models.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Pmu {
    /// `netburst`: family 0Fh except models 3, 4, 6; no `instr_completed`.
    Netburst,
    /// `netburst_p`: family 0Fh models 3, 4, 6 (Prescott, Cedar Mill); all
    /// 46 events.
    NetburstP,
}

impl Pmu {
    /// The libpfm4 PMU name.
    pub const fn name(self) -> &'static str {
        match self {
            Pmu::Netburst => "netburst",
            Pmu::NetburstP => "netburst_p",
        }
    }

    /// The PMU of family 0Fh model `model`.
    pub const fn for_model(model: u8) -> Pmu {
        if matches!(model, 3 | 4 | 6) {
            Pmu::NetburstP
        } else {
            Pmu::Netburst
        }
    }

    /// Whether the PMU has `event`.
    pub const fn has(self, event: EventName) -> bool {
        match self {
            Pmu::Netburst => !matches!(event, EventName::InstrCompleted),
            Pmu::NetburstP => true,
        }
    }

    const fn from_name(s: &[u8]) -> Option<Pmu> {
        if s.eq_ignore_ascii_case(Pmu::Netburst.name().as_bytes()) {
            Some(Pmu::Netburst)
        } else if s.eq_ignore_ascii_case(Pmu::NetburstP.name().as_bytes()) {
            Some(Pmu::NetburstP)
        } else {
            None
        }
    }
}

/// The five libpfm4 NetBurst modifiers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Modifier {
    /// `u`: count at CPL 1-3.
    U,
    /// `k`: count at CPL 0.
    K,
    /// `cmpl`: complement the threshold comparison.
    Cmpl,
    /// `e`: edge detect.
    E,
    /// `thr=N`: threshold 0-15.
    Thr,
}

impl Modifier {
    const ALL: [Modifier; 5] = [
        Modifier::U,
        Modifier::K,
        Modifier::Cmpl,
        Modifier::E,
        Modifier::Thr,
    ];

    /// The modifier's name in event strings.
    pub const fn name(self) -> &'static str {
        match self {
            Modifier::U => "u",
            Modifier::K => "k",
            Modifier::Cmpl => "cmpl",
            Modifier::E => "e",
            Modifier::Thr => "thr",
        }
    }

    const fn from_name(s: &[u8]) -> Option<Modifier> {
        let mut i = 0;
        while i < Self::ALL.len() {
            if Self::ALL[i].name().as_bytes().eq_ignore_ascii_case(s) {
                return Some(Self::ALL[i]);
            }
            i += 1;
        }
        None
    }
}

/// Why an event string was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ParseErrorKind {
    /// The string is empty.
    Empty,
    /// The part before `::` is neither `netburst` nor `netburst_p`.
    UnknownPmu,
    /// No event name.
    MissingEvent,
    /// No event of that name.
    UnknownEvent,
    /// The event exists, but not on this PMU (model-specific event, e.g.
    /// `netburst::instr_completed`).
    WrongPmu {
        /// The event.
        event: EventName,
        /// The PMU named (or defaulted).
        pmu: Pmu,
    },
    /// An empty `:`-separated field.
    EmptyField,
    /// Not a mask of this event, nor a modifier.
    UnknownMask {
        /// The event.
        event: EventName,
    },
    /// `name=value` where `name` is not a modifier.
    UnknownModifier,
    /// A mask given a value.
    MaskTakesNoValue,
    /// A modifier that needs a value (`thr`) was given none.
    MissingValue {
        /// The modifier.
        modifier: Modifier,
    },
    /// The value is not a number.
    InvalidValue {
        /// The modifier.
        modifier: Modifier,
    },
    /// The value is out of range (`thr` above 15, a boolean above 1).
    ValueOutOfRange {
        /// The modifier.
        modifier: Modifier,
    },
    /// The same modifier appears twice.
    ModifierRepeated {
        /// The modifier.
        modifier: Modifier,
    },
    /// No mask given and the event has no default mask.
    NoDefaultMask {
        /// The event.
        event: EventName,
    },
}

/// The longest offending field a [`ParseError`] keeps, in bytes (a longer
/// one is cut at a character boundary).
const FIELD_MAX: usize = 32;

/// A rejected event string: what, where (byte offset of the offending
/// field), the field itself, and the closest name the string may have
/// meant. Its `Display` is [`ParseError::message`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ParseError {
    /// What went wrong.
    pub kind: ParseErrorKind,
    /// Byte offset into the string.
    pub offset: usize,
    field: [u8; FIELD_MAX],
    field_len: u8,
    suggestion: Option<&'static str>,
}

impl ParseError {
    /// `kind` at `offset`, about `field` (its first [`FIELD_MAX`] bytes).
    const fn new(kind: ParseErrorKind, offset: usize, field: &[u8]) -> ParseError {
        let mut len = if field.len() < FIELD_MAX {
            field.len()
        } else {
            FIELD_MAX
        };
        // Cut before a UTF-8 continuation byte, so the copy stays UTF-8
        // (the field is a piece of a `&str` split at ASCII bytes).
        while len > 0 && len < field.len() && field[len] & 0xC0 == 0x80 {
            len -= 1;
        }
        let mut bytes = [0; FIELD_MAX];
        let mut i = 0;
        while i < len {
            bytes[i] = field[i];
            i += 1;
        }
        ParseError {
            kind,
            offset,
            field: bytes,
            field_len: len as u8,
            suggestion: None,
        }
    }

    const fn suggesting(mut self, name: Option<&'static str>) -> ParseError {
        self.suggestion = name;
        self
    }

    /// The offending field: the event name, mask or modifier at
    /// [`ParseError::offset`] (its first 32 bytes).
    pub const fn field(&self) -> &str {
        match core::str::from_utf8(self.field.split_at(self.field_len as usize).0) {
            Ok(s) => s,
            Err(_) => "",
        }
    }

    /// The closest name to a misspelt event, mask or modifier (edit
    /// distance, ignoring ASCII case), when one is close enough to be meant:
    /// `instr_retired` for `instr_retird`.
    pub const fn suggestion(&self) -> Option<&'static str> {
        self.suggestion
    }

    /// The whole message, one sentence: what is wrong, where, the field,
    /// what is allowed, and the suggestion. A `const fn`:
    /// [`netburst_event!`](crate::netburst_event) stops the build with it.
    ///
    /// ```
    /// use pmu::arch::netburst::EventSpec;
    ///
    /// let e = "instr_retird:NBOGUS".parse::<EventSpec>().unwrap_err();
    /// assert_eq!(
    ///     e.to_string(),
    ///     "`instr_retird` at byte 0 is not a NetBurst event; did you mean `instr_retired`?"
    /// );
    /// assert_eq!(e.message().as_str(), e.to_string());
    /// ```
    pub const fn message(&self) -> Message {
        use ParseErrorKind::*;
        let (m, field, at) = (Message::new(), self.field(), self.offset);
        let m = match self.kind {
            Empty => m.push("the event string is empty: name an event, such as `instr_retired`"),
            UnknownPmu => m.code(field).push(
                " at byte 0 is not a NetBurst PMU: write `netburst::`, `netburst_p::` or no prefix",
            ),
            MissingEvent => m
                .push("the event string has no event name at byte ")
                .number(at),
            UnknownEvent => m.code(field).at(at).push(" is not a NetBurst event"),
            WrongPmu { event, pmu } => wrong_pmu(m, event, pmu, at),
            EmptyField => m
                .push("the field at byte ")
                .number(at)
                .push(" is empty: remove the extra `:`"),
            UnknownMask { event } => m
                .code(field)
                .at(at)
                .push(" is neither a mask of ")
                .code(event.name())
                .push(" nor a modifier (u, k, cmpl, e, thr=N)"),
            UnknownModifier => m
                .code(field)
                .at(at)
                .push(" is not a modifier: `name=value` takes u, k, cmpl, e or thr"),
            MaskTakesNoValue => m
                .push("mask ")
                .code(field)
                .at(at)
                .push(" takes no value: write it without `=`"),
            MissingValue { modifier } => m
                .push("modifier ")
                .code(modifier.name())
                .at(at)
                .push(" needs a value: write `thr=N` with N from 0 to 15"),
            InvalidValue { modifier } => m
                .push("the value of modifier ")
                .code(modifier.name())
                .at(at)
                .push(" is not a number: write it in decimal or 0x hexadecimal"),
            ValueOutOfRange { modifier } => value_out_of_range(m, modifier, at),
            ModifierRepeated { modifier } => m
                .push("modifier ")
                .code(modifier.name())
                .at(at)
                .push(" is given a second time: give each modifier once"),
            NoDefaultMask { event } => no_default_mask(m, event),
        };
        match self.suggestion {
            Some(name) => m.push("; did you mean ").code(name).push("?"),
            None => m,
        }
    }
}

/// A field of an event string split at its `=`: `(key, Some(value))`, or
/// `(field, None)` without one.
const fn key_value(field: &[u8]) -> (&[u8], Option<&[u8]>) {
    match find(field, b"=") {
        Some(p) => {
            let (k, v) = field.split_at(p);
            (k, Some(v.split_at(1).1))
        }
        None => (field, None),
    }
}

/// The error for field `key` at byte `at`, neither a mask nor a modifier of
/// `event` (`is_mask`: it names a mask, but with a value), with the
/// closest name as a suggestion.
const fn unknown_field(
    event: EventName,
    key: &[u8],
    value: Option<&[u8]>,
    is_mask: bool,
    at: usize,
) -> ParseError {
    let info = event.info();
    let (kind, suggestion) = match (value, is_mask) {
        (Some(_), true) => (ParseErrorKind::MaskTakesNoValue, None),
        (Some(_), false) => (
            ParseErrorKind::UnknownModifier,
            closest_field(info, key, false),
        ),
        (None, _) => (
            ParseErrorKind::UnknownMask { event },
            closest_field(info, key, true),
        ),
    };
    ParseError::new(kind, at, key).suggesting(suggestion)
}

/// The modifiers an event string gives (`u`, `k`, `cmpl`, `e`, `thr`).
struct Modifiers {
    os: bool,
    usr: bool,
    edge: bool,
    complement: bool,
    threshold: Threshold,
    /// Which were given, by [`Modifier`].
    seen: [bool; 5],
}

impl Modifiers {
    const NONE: Modifiers = Modifiers {
        os: false,
        usr: false,
        edge: false,
        complement: false,
        threshold: Threshold::ZERO,
        seen: [false; 5],
    };

    /// `modifier` given the value `v` (checked by `modifier_value`).
    const fn set(&mut self, modifier: Modifier, v: u64) {
        self.seen[modifier as usize] = true;
        let on = v != 0;
        match modifier {
            Modifier::U => self.usr = on,
            Modifier::K => self.os = on,
            Modifier::Cmpl => self.complement = on,
            Modifier::E => self.edge = on,
            Modifier::Thr => {
                // v <= 15 was checked.
                self.threshold = match Threshold::new(v as u8) {
                    Some(t) => t,
                    None => Threshold::ZERO,
                };
            }
        }
    }

    /// `spec` with the modifiers; neither `u` nor `k` given counts at both
    /// privilege levels.
    const fn apply(&self, spec: EventSpec) -> EventSpec {
        let (os, usr) = if !self.seen[Modifier::U as usize] && !self.seen[Modifier::K as usize] {
            (true, true)
        } else {
            (self.os, self.usr)
        };
        spec.with_privilege(os, usr)
            .with_edge(self.edge)
            .with_complement(self.complement)
            .with_threshold(self.threshold)
    }
}

/// [`ParseErrorKind::WrongPmu`]'s message: the PMU the event needs.
const fn wrong_pmu(m: Message, event: EventName, pmu: Pmu, at: usize) -> Message {
    let m = m
        .push("event ")
        .code(event.name())
        .at(at)
        .push(" is not available on PMU ")
        .code(pmu.name());
    match pmu {
        Pmu::Netburst => m
            .push(": it needs netburst_p (family 0Fh models 3, 4, 6), write `netburst_p::")
            .push(event.name())
            .push("`"),
        Pmu::NetburstP => m,
    }
}

/// [`ParseErrorKind::ValueOutOfRange`]'s message: the modifier's range.
const fn value_out_of_range(m: Message, modifier: Modifier, at: usize) -> Message {
    let m = m
        .push("the value of modifier ")
        .code(modifier.name())
        .at(at)
        .push(" is out of range: ");
    match modifier {
        Modifier::Thr => m.push("`thr` takes 0 to 15"),
        _ => m.code(modifier.name()).push(" takes 0 or 1"),
    }
}

/// [`ParseErrorKind::NoDefaultMask`]'s message: a mask to name.
const fn no_default_mask(m: Message, event: EventName) -> Message {
    let m = m
        .push("event ")
        .code(event.name())
        .push(" has no default mask: name one");
    match event.info().masks.first() {
        Some(mask) => m
            .push(", such as `")
            .push(event.name())
            .push(":")
            .push(mask.name)
            .push("`"),
        None => m,
    }
}

/// An error message built without an allocator, at run time or by the
/// compiler ([`ParseError::message`]).
#[derive(Clone, Copy)]
pub struct Message {
    bytes: [u8; Message::CAPACITY],
    len: usize,
}

impl Message {
    /// Room for the longest message (two names, a field and the text).
    const CAPACITY: usize = 256;

    const fn new() -> Message {
        Message {
            bytes: [0; Message::CAPACITY],
            len: 0,
        }
    }

    /// `s` appended; a piece that does not fit is left out whole, so the
    /// text stays UTF-8.
    const fn push(mut self, s: &str) -> Message {
        let s = s.as_bytes();
        if self.len + s.len() > Message::CAPACITY {
            return self;
        }
        let mut i = 0;
        while i < s.len() {
            self.bytes[self.len + i] = s[i];
            i += 1;
        }
        self.len += s.len();
        self
    }

    /// `` `s` ``.
    const fn code(self, s: &str) -> Message {
        self.push("`").push(s).push("`")
    }

    /// ` at byte N`.
    const fn at(self, offset: usize) -> Message {
        self.push(" at byte ").number(offset)
    }

    /// `n` in decimal.
    const fn number(self, n: usize) -> Message {
        let mut digits = [0u8; 20];
        let (mut n, mut i) = (n, digits.len());
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        match core::str::from_utf8(digits.split_at(i).1) {
            Ok(s) => self.push(s),
            Err(_) => self,
        }
    }

    /// The text.
    pub const fn as_str(&self) -> &str {
        match core::str::from_utf8(self.bytes.split_at(self.len).0) {
            Ok(s) => s,
            Err(_) => "",
        }
    }
}

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Levenshtein distance between the first 48 bytes of `a` and of `b`,
/// ignoring ASCII case.
const fn distance(a: &[u8], b: &[u8]) -> usize {
    const MAX: usize = 48;
    let n = if a.len() < MAX { a.len() } else { MAX };
    let m = if b.len() < MAX { b.len() } else { MAX };
    let mut prev = [0usize; MAX + 1];
    let mut cur = [0usize; MAX + 1];
    let mut j = 0;
    while j <= m {
        prev[j] = j;
        j += 1;
    }
    let mut i = 1;
    while i <= n {
        cur[0] = i;
        let mut j = 1;
        while j <= m {
            let cost = if a[i - 1].eq_ignore_ascii_case(&b[j - 1]) {
                0
            } else {
                1
            };
            let mut best = prev[j - 1] + cost;
            if prev[j] + 1 < best {
                best = prev[j] + 1;
            }
            if cur[j - 1] + 1 < best {
                best = cur[j - 1] + 1;
            }
            cur[j] = best;
            j += 1;
        }
        prev = cur;
        i += 1;
    }
    prev[m]
}

/// The closest of the names seen so far and `name`, for a misspelling of
/// `typed`.
#[derive(Clone, Copy)]
struct Closest<'t> {
    typed: &'t [u8],
    best: Option<(&'static str, usize)>,
}

impl<'t> Closest<'t> {
    const fn to(typed: &'t [u8]) -> Closest<'t> {
        Closest { typed, best: None }
    }

    const fn consider(mut self, name: &'static str) -> Closest<'t> {
        let d = distance(self.typed, name.as_bytes());
        match self.best {
            Some((_, best)) if best <= d => {}
            _ => self.best = Some((name, d)),
        }
        self
    }

    /// The closest name, when it is within a third of the typed length
    /// (at least 1, at most 3 edits): far enough for `instr_retird`, near
    /// enough not to offer `RUNNING` for `NOPE`.
    const fn result(self) -> Option<&'static str> {
        let mut limit = self.typed.len() / 3;
        if limit < 1 {
            limit = 1;
        } else if limit > 3 {
            limit = 3;
        }
        match self.best {
            Some((name, d)) if d <= limit => Some(name),
            _ => None,
        }
    }
}

/// The event of `pmu` whose name or alias is closest to `typed`.
const fn closest_event(pmu: Pmu, typed: &[u8]) -> Option<&'static str> {
    let mut c = Closest::to(typed);
    let mut i = 0;
    while i < EventName::ALL.len() {
        let e = EventName::ALL[i];
        if pmu.has(e) {
            c = c.consider(e.info().name);
            if let Some(alias) = e.info().alias {
                c = c.consider(alias);
            }
        }
        i += 1;
    }
    c.result()
}

/// The mask of `info` or the modifier closest to `typed` (modifiers only,
/// when `masks` is false).
const fn closest_field(info: &EventInfo, typed: &[u8], masks: bool) -> Option<&'static str> {
    let mut c = Closest::to(typed);
    let mut i = 0;
    while masks && i < info.masks.len() {
        c = c.consider(info.masks[i].name);
        if let Some(alias) = info.masks[i].alias {
            c = c.consider(alias);
        }
        i += 1;
    }
    let mut k = 0;
    while k < Modifier::ALL.len() {
        c = c.consider(Modifier::ALL[k].name());
        k += 1;
    }
    c.result()
}

/// The kind alone, without the field and offset a [`ParseError`] adds
/// ([`ParseErrorKind::message`], with the names it carries).
impl fmt::Display for ParseErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ParseErrorKind::*;
        match *self {
            WrongPmu { event, pmu } => write!(
                f,
                "event `{}` is not available on PMU `{}`",
                event.name(),
                pmu.name()
            ),
            UnknownMask { event } => write!(
                f,
                "the field is neither a mask of `{}` nor a modifier (u, k, cmpl, e, thr=N)",
                event.name()
            ),
            MissingValue { modifier }
            | InvalidValue { modifier }
            | ValueOutOfRange { modifier }
            | ModifierRepeated { modifier } => {
                write!(f, "{} (modifier `{}`)", self.message(), modifier.name())
            }
            NoDefaultMask { event } => write!(
                f,
                "event `{}` has no default mask: name one of its masks",
                event.name()
            ),
            other => f.write_str(other.message()),
        }
    }
}

impl core::error::Error for ParseErrorKind {}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message().as_str())
    }
}

impl core::error::Error for ParseError {}

/// A fully qualified NetBurst event: what libpfm4 calls an encoding.
///
/// Invariants (kept by every constructor): the masks are indices into the
/// event's catalog entry and at least one is selected.
///
/// What the register images need from the catalog (the ESCR image without
/// its CPL bits, the CCCR's ESCR select, the ESCRs the event may use) is
/// computed once by the constructors, which are `const`: a spec built at
/// compile time ([`netburst_event!`](crate::netburst_event)) takes neither
/// the parser nor the catalog into the kernel that uses it.
///
/// # Event strings
///
/// libpfm4-compatible NetBurst event strings:
/// `[netburst::|netburst_p::]event[:MASK...][:u][:k][:cmpl][:e][:thr=N]`.
///
/// The result is an [`EventSpec`] whose [`EventSpec::escr_bits`] and
/// [`EventSpec::cccr_bits`] are the ESCR and CCCR images libpfm4 computes
/// for the same string (checked against libpfm4's own test vectors):
///
/// * ESCR: event select and event mask from the catalog; `TAGn` pseudo-masks
///   set tag-value bit n and tag enable; `u` sets `T0_USR` and `T1_USR`, `k`
///   sets `T0_OS` and `T1_OS` (both logical processors); with neither
///   modifier both are set (libpfm4's default privilege mask, `PLM0|PLM3`).
///   Replay-metric masks of `replay_event` contribute no ESCR bit.
/// * CCCR: `ENABLE`, the catalog's ESCR select, active thread 11b; `e` sets
///   `EDGE` and `COMPARE`, `cmpl` sets `COMPLEMENT` and `COMPARE`, `thr=N`
///   (0-15) sets `THRESHOLD` and, when N is non-zero, `COMPARE`.
///
/// Names are matched ignoring ASCII case. Boolean modifiers also take `=0` or
/// `=1`; numbers may be decimal or `0x` hexadecimal.
///
/// Deliberate differences from libpfm4: a modifier given twice is an error
/// (libpfm4 accepts an identical repeat); `b2b_cycles:BIT5`/`BIT6` encode
/// SDM mask bits 5/6 (libpfm4: bit 4); `mispred_branch_retired` prints its
/// mask as `NBOGUS` (libpfm4 `BOGUS`, accepted as input). A string without a
/// PMU prefix is parsed for the PMU given to [`EventSpec::parse`] (`FromStr`:
/// `netburst`, the PMU without `instr_completed`).
///
/// # Examples
///
/// ```
/// use pmu::arch::netburst::EventSpec;
///
/// let spec: EventSpec = "global_power_events:RUNNING:k".parse()?;
/// assert_eq!(spec.escr_bits(), 0x2600_020A); // select 13h, mask bit 0, T0_OS and T1_OS
/// // Displayed in libpfm4's canonical form, every modifier spelled out:
/// assert_eq!(
///     spec.to_string(),
///     "netburst::global_power_events:RUNNING:k=1:u=0:e=0:cmpl=0:thr=0"
/// );
/// assert!("global_power_events:NOPE".parse::<EventSpec>().is_err());
/// # Ok::<(), pmu::arch::netburst::ParseError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EventSpec {
    pmu: Pmu,
    event: EventName,
    masks: u32,
    os: bool,
    usr: bool,
    edge: bool,
    complement: bool,
    threshold: Threshold,
    escr: EscrValue,
    escr_select: EscrSelect,
    escrs: EscrSet,
    /// The replay metrics selected (bit `m as u16` for metric `m`).
    replay: u16,
    /// What the event provides for tagging and what it needs.
    provides: TagBits,
    needs: TagBits,
    /// The replay registers its metrics select.
    replay_registers: (u32, u8),
}

impl EventSpec {
    /// `event` with the masks `masks` (catalog indices, checked by the
    /// caller), counting at every CPL, and what the images need from the
    /// catalog.
    const fn build(pmu: Pmu, event: EventName, masks: u32) -> EventSpec {
        let info = event.info();
        let mut mask = EventMask::EMPTY;
        let mut tag = 0u8;
        let mut replay = 0u16;
        let mut i = 0;
        while i < info.masks.len() && i < 32 {
            if masks & (1 << i) != 0 {
                match info.masks[i].kind {
                    MaskKind::Bit(b) => mask = mask.union(EventMask(1 << b)),
                    MaskKind::Tag(n) => tag |= 1 << n,
                    MaskKind::ReplayMetric(m) => replay |= 1 << m as u16,
                }
            }
            i += 1;
        }
        let escr = EscrValue::new(info.event_select, mask);
        let escr = match TagValue::new(tag) {
            Some(t) if tag != 0 => escr.with_tag_value(t).with_tag_enable(true),
            _ => escr,
        };
        let (enable, vert) = replay_registers(replay);
        EventSpec {
            pmu,
            event,
            masks,
            os: true,
            usr: true,
            edge: false,
            complement: false,
            threshold: Threshold::ZERO,
            escr,
            escr_select: info.escr_select,
            escrs: EscrSet::from_slice(info.escrs),
            replay,
            provides: TagBits::provided(event, mask, tag),
            needs: TagBits::needed(event, mask, replay),
            replay_registers: (enable as u32, vert as u8),
        }
    }

    /// The event with its default mask, counting at every CPL on both
    /// logical processors. Fails if the PMU lacks the event or the event has
    /// no default mask.
    pub const fn new(pmu: Pmu, event: EventName) -> Result<EventSpec, ParseErrorKind> {
        if !pmu.has(event) {
            return Err(ParseErrorKind::WrongPmu { event, pmu });
        }
        match event.info().default_mask() {
            Some(dfl) => Ok(EventSpec::build(pmu, event, 1 << dfl)),
            None => Err(ParseErrorKind::NoDefaultMask { event }),
        }
    }

    /// The event with the masks at catalog indices `masks` (bit i = mask i).
    /// `None` if the set is empty, names a mask the event lacks, or the PMU
    /// lacks the event.
    pub const fn with_masks(pmu: Pmu, event: EventName, masks: u32) -> Option<EventSpec> {
        let n = event.info().masks.len();
        if masks == 0 || (n < 32 && masks >> n != 0) || !pmu.has(event) {
            return None;
        }
        Some(EventSpec::build(pmu, event, masks))
    }

    /// With `k` (CPL 0) and `u` (CPL 1-3) set as given.
    pub const fn with_privilege(mut self, os: bool, usr: bool) -> EventSpec {
        self.os = os;
        self.usr = usr;
        self
    }

    /// With edge detection (`e`).
    pub const fn with_edge(mut self, on: bool) -> EventSpec {
        self.edge = on;
        self
    }

    /// With the complement flag (`cmpl`).
    pub const fn with_complement(mut self, on: bool) -> EventSpec {
        self.complement = on;
        self
    }

    /// With a threshold (`thr`).
    pub const fn with_threshold(mut self, t: Threshold) -> EventSpec {
        self.threshold = t;
        self
    }

    /// Parse `s`; a string without a PMU prefix is taken for `default_pmu`.
    /// Never panics. A `const fn`: [`netburst_event!`](crate::netburst_event)
    /// runs it at compile time.
    pub const fn parse(s: &str, default_pmu: Pmu) -> Result<EventSpec, ParseError> {
        const fn err(
            kind: ParseErrorKind,
            offset: usize,
            field: &[u8],
        ) -> Result<EventSpec, ParseError> {
            Err(ParseError::new(kind, offset, field))
        }
        let (pmu, event, name, base, mut fields) = match split_event(s.as_bytes(), default_pmu) {
            Ok(parts) => parts,
            Err(e) => return Err(e),
        };
        let info: &EventInfo = event.info();
        let mut masks = 0u32;
        let mut modifiers = Modifiers::NONE;
        let mut offset = base + name.len();
        // `fields` is empty or starts with the ':' before the next field.
        while !fields.is_empty() {
            fields = fields.split_at(1).1;
            offset += 1; // the ':'
            let (field, tail) = fields.split_at(match find(fields, b":") {
                Some(p) => p,
                None => fields.len(),
            });
            fields = tail;
            let at = offset;
            offset += field.len();
            if field.is_empty() {
                return err(ParseErrorKind::EmptyField, at, field);
            }
            let (key, value) = key_value(field);
            let mask = info.mask_index_bytes(key);
            if let (None, Some(i)) = (value, mask) {
                masks |= 1 << i;
                continue;
            }
            let Some(modifier) = Modifier::from_name(key) else {
                return Err(unknown_field(event, key, value, mask.is_some(), at));
            };
            if modifiers.seen[modifier as usize] {
                return err(ParseErrorKind::ModifierRepeated { modifier }, at, key);
            }
            match modifier_value(modifier, value, at, key, field) {
                Ok(v) => modifiers.set(modifier, v),
                Err(e) => return Err(e),
            }
        }
        if masks == 0 {
            match info.default_mask() {
                Some(i) => masks = 1 << i,
                None => return err(ParseErrorKind::NoDefaultMask { event }, base, name),
            }
        }
        Ok(modifiers.apply(EventSpec::build(pmu, event, masks)))
    }

    /// Whether the event may be programmed on `escr` (its catalog entry's
    /// ESCRs, Table 19-28/19-29), without a catalog lookup.
    pub const fn allows(&self, escr: Escr) -> bool {
        self.escrs.contains(escr)
    }

    /// The PMU.
    pub const fn pmu(&self) -> Pmu {
        self.pmu
    }

    /// The event.
    pub const fn event(&self) -> EventName {
        self.event
    }

    /// Whether the event takes part in tagging at all: it tags µops, counts
    /// tagged ones, or selects a replay metric. The driver keeps its
    /// tagging books only for such events (for a spec built at compile time
    /// this is a constant, so a kernel without them carries none of that
    /// code).
    pub const fn touches_tagging(&self) -> bool {
        self.provides.0 != 0 || self.event.needs_tagging().is_some()
    }

    /// What an ESCR programmed with this event on `escr` provides for
    /// tagging (computed when the spec was built).
    pub const fn tags_provided(&self, escr: Escr) -> TagBits {
        self.provides.on(escr)
    }

    /// What this event needs other claimed ESCRs to provide for tagging:
    /// nothing for an `execution_event` with `COMPARE` (a threshold on its
    /// per-cycle count, as in Linux's cycles alias, not a count of tagged
    /// µops).
    pub const fn tags_needed(&self) -> TagBits {
        if self.compare() && matches!(self.event, EventName::ExecutionEvent) {
            TagBits(0)
        } else {
            self.needs
        }
    }

    /// The metric bits of `MSR_PEBS_ENABLE` and the `MSR_PEBS_MATRIX_VERT`
    /// image its replay metrics select (Table 19-33; `(0, 0)` for none).
    pub const fn replay_registers(&self) -> (u64, u64) {
        (
            self.replay_registers.0 as u64,
            self.replay_registers.1 as u64,
        )
    }

    /// Whether replay metric `m` is selected (a `replay_event` virtual
    /// mask). Unlike [`EventSpec::replay_metrics`] this needs no catalog.
    pub const fn selects_replay_metric(&self, m: ReplayMetric) -> bool {
        self.replay & (1 << m as u16) != 0
    }

    /// The selected masks.
    pub fn masks(&self) -> impl Iterator<Item = &'static MaskInfo> + '_ {
        self.event
            .info()
            .masks
            .iter()
            .enumerate()
            .filter(|(i, _)| self.masks & (1 << i) != 0)
            .map(|(_, m)| m)
    }

    /// The selected masks as a bit set of catalog indices.
    pub const fn mask_indices(&self) -> u32 {
        self.masks
    }

    /// `k`: count at CPL 0.
    pub const fn os(&self) -> bool {
        self.os
    }

    /// `u`: count at CPL 1-3.
    pub const fn usr(&self) -> bool {
        self.usr
    }

    /// `e`.
    pub const fn edge(&self) -> bool {
        self.edge
    }

    /// `cmpl`.
    pub const fn complement(&self) -> bool {
        self.complement
    }

    /// `thr`.
    pub const fn threshold(&self) -> Threshold {
        self.threshold
    }

    /// Whether the CCCR `COMPARE` flag is set (by `e`, `cmpl` or a non-zero
    /// `thr`).
    pub const fn compare(&self) -> bool {
        self.edge || self.complement || self.threshold.get() != 0
    }

    /// The real ESCR event-mask bits.
    pub const fn event_mask(&self) -> EventMask {
        self.escr.event_mask()
    }

    /// The tag value set by `TAGn` pseudo-masks, if any.
    pub const fn tag(&self) -> Option<TagValue> {
        if self.escr.tag_enable() {
            Some(self.escr.tag_value())
        } else {
            None
        }
    }

    /// The replay metrics selected (replay_event only).
    pub fn replay_metrics(&self) -> impl Iterator<Item = ReplayMetric> + '_ {
        self.masks().filter_map(|m| match m.kind {
            MaskKind::ReplayMetric(r) => Some(r),
            _ => None,
        })
    }

    /// The typed ESCR image.
    pub const fn escr_value(&self) -> EscrValue {
        self.escr
            .with_cpl(ThreadCpl::both_threads(self.os, self.usr))
    }

    /// The typed CCCR image.
    pub const fn cccr_value(&self) -> CccrValue {
        CccrValue::new(self.escr_select)
            .with_enable(true)
            .with_compare(self.compare())
            .with_complement(self.complement)
            .with_edge(self.edge)
            .with_threshold(self.threshold)
    }

    /// The ESCR image, as libpfm4's `codes[0]`.
    pub const fn escr_bits(&self) -> u64 {
        self.escr_value().bits()
    }

    /// The CCCR image, as libpfm4's `codes[1]`.
    pub const fn cccr_bits(&self) -> u64 {
        self.cccr_value().bits()
    }
}

/// Where `needle` first occurs in `hay`.
const fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let mut i = 0;
    while i + needle.len() <= hay.len() {
        let mut j = 0;
        while j < needle.len() && hay[i + j] == needle[j] {
            j += 1;
        }
        if j == needle.len() {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// Decimal or `0x` hexadecimal; `Err(true)` on overflow, `Err(false)` if not
/// a number.
const fn parse_number(s: &[u8]) -> Result<u64, bool> {
    let (digits, radix) = if s.len() >= 2 && s[0] == b'0' && (s[1] == b'x' || s[1] == b'X') {
        (s.split_at(2).1, 16)
    } else {
        (s, 10)
    };
    if digits.is_empty() {
        return Err(false);
    }
    let mut v: u64 = 0;
    let mut i = 0;
    while i < digits.len() {
        let Some(d) = (digits[i] as char).to_digit(radix) else {
            return Err(false);
        };
        v = match v.checked_mul(radix as u64) {
            Some(m) => match m.checked_add(d as u64) {
                Some(a) => a,
                None => return Err(true),
            },
            None => return Err(true),
        };
        i += 1;
    }
    Ok(v)
}

impl ParseErrorKind {
    /// What went wrong, without the field, offset and names
    /// [`ParseError::message`] adds (the message
    /// [`netburst_event!`](crate::netburst_event) stops the build with).
    pub const fn message(self) -> &'static str {
        use ParseErrorKind::*;
        match self {
            Empty => "the event string is empty",
            UnknownPmu => "the PMU prefix is neither `netburst::` nor `netburst_p::`",
            MissingEvent => "the event string has no event name",
            UnknownEvent => "the name is not a NetBurst event",
            WrongPmu { .. } => "the event is not available on this PMU",
            EmptyField => "a field is empty: remove the extra `:`",
            UnknownMask { .. } => "the field is neither a mask of the event nor a modifier",
            UnknownModifier => "the name before `=` is not a modifier (u, k, cmpl, e, thr)",
            MaskTakesNoValue => "a mask takes no value: write it without `=`",
            MissingValue { .. } => "the modifier needs a value: write `thr=N`, N from 0 to 15",
            InvalidValue { .. } => "the modifier's value is not a number",
            ValueOutOfRange { .. } => {
                "the modifier's value is out of range: `thr` takes 0 to 15, the others 0 or 1"
            }
            ModifierRepeated { .. } => "a modifier is given twice: give each modifier once",
            NoDefaultMask { .. } => "the event has no default mask: name one of its masks",
        }
    }
}

/// A NetBurst [`EventSpec`](crate::arch::netburst::EventSpec) parsed at
/// compile time: `netburst_event!("global_power_events:RUNNING:k")` is the
/// spec `"global_power_events:RUNNING:k".parse()` returns, built as a
/// `const` item, so the kernel carries neither the parser nor the event
/// catalog. The argument must be a constant expression (a literal). A
/// string the run-time parser refuses stops the build with the same
/// message ([`ParseError::message`]: the field, its offset, what is
/// allowed and the closest name). Strings without a PMU
/// prefix are for `netburst`, as with `parse()`; write `netburst_p::...`
/// for the Prescott-only `instr_completed`.
///
/// ```
/// use pmu::arch::netburst::EventSpec;
///
/// const RUNNING: EventSpec = pmu::netburst_event!("global_power_events:RUNNING:k");
/// assert_eq!(RUNNING, "global_power_events:RUNNING:k".parse()?);
/// assert_eq!(RUNNING.escr_bits(), 0x2600_020A);
/// # Ok::<(), pmu::arch::netburst::ParseError>(())
/// ```
///
/// ```compile_fail
/// // error: evaluation panicked: `instr_retird` at byte 0 is not a NetBurst
/// //        event; did you mean `instr_retired`?
/// let _ = pmu::netburst_event!("instr_retird:NBOGUS");
/// ```
#[macro_export]
macro_rules! netburst_event {
    ($event:expr) => {{
        // A `const` item, not a `const` block: items are evaluated by
        // `cargo check` too, so a bad string fails every build.
        const SPEC: $crate::arch::netburst::EventSpec =
            match $crate::arch::netburst::EventSpec::parse(
                $event,
                $crate::arch::netburst::Pmu::Netburst,
            ) {
                ::core::result::Result::Ok(spec) => spec,
                ::core::result::Result::Err(e) => ::core::panic!("{}", e.message().as_str()),
            };
        SPEC
    }};
}

impl FromStr for EventSpec {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<EventSpec, ParseError> {
        EventSpec::parse(s, Pmu::Netburst)
    }
}

/// The canonical string, in libpfm4's `fstr` format:
/// `pmu::event:MASK...:k=K:u=U:e=E:cmpl=C:thr=T`. It parses back to the same
/// spec.
impl fmt::Display for EventSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}::{}", self.pmu.name(), self.event.name())?;
        for m in self.masks() {
            write!(f, ":{}", m.name)?;
        }
        write!(
            f,
            ":k={}:u={}:e={}:cmpl={}:thr={}",
            self.os as u8,
            self.usr as u8,
            self.edge as u8,
            self.complement as u8,
            self.threshold.get()
        )
    }
}

/// The start of an event string: its PMU (`netburst::`, `netburst_p::`, or
/// `default_pmu`), its event, the event's name and offset, and the rest
/// (empty, or starting with the `:` before the first field).
#[allow(clippy::type_complexity, reason = "a private helper's five parts")]
const fn split_event(
    s: &[u8],
    default_pmu: Pmu,
) -> Result<(Pmu, EventName, &[u8], usize, &[u8]), ParseError> {
    if s.is_empty() {
        return Err(ParseError::new(ParseErrorKind::Empty, 0, s));
    }
    let (pmu, rest, base) = match find(s, b"::") {
        Some(pos) => {
            let (head, tail) = s.split_at(pos);
            match Pmu::from_name(head) {
                Some(p) => (p, tail.split_at(2).1, pos + 2),
                None => return Err(ParseError::new(ParseErrorKind::UnknownPmu, 0, head)),
            }
        }
        None => (default_pmu, s, 0),
    };
    let (name, fields) = rest.split_at(match find(rest, b":") {
        Some(p) => p,
        None => rest.len(),
    });
    if name.is_empty() {
        return Err(ParseError::new(ParseErrorKind::MissingEvent, base, name));
    }
    let Some(event) = EventName::from_name_bytes(name) else {
        let e = ParseError::new(ParseErrorKind::UnknownEvent, base, name);
        return Err(e.suggesting(closest_event(pmu, name)));
    };
    if !pmu.has(event) {
        return Err(ParseError::new(
            ParseErrorKind::WrongPmu { event, pmu },
            base,
            name,
        ));
    }
    Ok((pmu, event, name, base, fields))
}

/// The value of modifier `modifier` (field `field` at `at`, its name `key`,
/// its value text `value`): 1 when none is given, except for `thr`, which
/// needs one; at most 15 for `thr`, 1 for the flags.
const fn modifier_value(
    modifier: Modifier,
    value: Option<&[u8]>,
    at: usize,
    key: &[u8],
    field: &[u8],
) -> Result<u64, ParseError> {
    let v = match value {
        None if matches!(modifier, Modifier::Thr) => {
            return Err(ParseError::new(
                ParseErrorKind::MissingValue { modifier },
                at,
                key,
            ));
        }
        None => 1,
        Some(v) => match parse_number(v) {
            Ok(n) => n,
            Err(true) => {
                return Err(ParseError::new(
                    ParseErrorKind::ValueOutOfRange { modifier },
                    at,
                    field,
                ));
            }
            Err(false) => {
                return Err(ParseError::new(
                    ParseErrorKind::InvalidValue { modifier },
                    at,
                    field,
                ));
            }
        },
    };
    let limit = if matches!(modifier, Modifier::Thr) {
        15
    } else {
        1
    };
    if v > limit {
        return Err(ParseError::new(
            ParseErrorKind::ValueOutOfRange { modifier },
            at,
            field,
        ));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::format;
    use std::string::{String, ToString};
    use std::vec::Vec;

    /// libpfm4 `tests/validate_x86.c`, every `netburst::`/`netburst_p::`
    /// entry: (string, expected result: Ok((codes[0], codes[1], fstr)) or
    /// the libpfm4 error).
    #[allow(clippy::type_complexity)]
    const LIBPFM4_VECTORS: &[(&str, Result<(u64, u64, &str), &str>)] = &[
        (
            "netburst::global_power_events",
            Ok((
                0x2600020f,
                0x3d000,
                "netburst::global_power_events:RUNNING:k=1:u=1:e=0:cmpl=0:thr=0",
            )),
        ),
        (
            "netburst::global_power_events:RUNNING:u:k",
            Ok((
                0x2600020f,
                0x3d000,
                "netburst::global_power_events:RUNNING:k=1:u=1:e=0:cmpl=0:thr=0",
            )),
        ),
        (
            "netburst::global_power_events:RUNNING:e",
            Ok((
                0x2600020f,
                0x107d000,
                "netburst::global_power_events:RUNNING:k=1:u=1:e=1:cmpl=0:thr=0",
            )),
        ),
        (
            "netburst::global_power_events:RUNNING:cmpl:e:u",
            Ok((
                0x26000205,
                0x10fd000,
                "netburst::global_power_events:RUNNING:k=0:u=1:e=1:cmpl=1:thr=0",
            )),
        ),
        (
            "netburst::global_power_events:RUNNING:cmpl:thr=8:u",
            Ok((
                0x26000205,
                0x8fd000,
                "netburst::global_power_events:RUNNING:k=0:u=1:e=0:cmpl=1:thr=8",
            )),
        ),
        (
            "netburst::global_power_events:RUNNING:cmpl:thr=32:u",
            Err("PFM_ERR_ATTR_VAL"),
        ),
        ("netburst::instr_completed:nbogus", Err("PFM_ERR_NOTFOUND")),
        (
            "netburst_p::instr_completed:nbogus",
            Ok((
                0xe00020f,
                0x39000,
                "netburst_p::instr_completed:NBOGUS:k=1:u=1:e=0:cmpl=0:thr=0",
            )),
        ),
    ];

    /// The compile-time form is the run-time parser run by the compiler:
    /// the same spec, images included, for strings exercising every part.
    #[test]
    fn compile_time_specs_equal_run_time_ones() {
        const SPECS: [(EventSpec, &str); 5] = [
            (
                crate::netburst_event!("global_power_events:RUNNING:k"),
                "global_power_events:RUNNING:k",
            ),
            (
                crate::netburst_event!("netburst_p::instr_completed:NBOGUS:u"),
                "netburst_p::instr_completed:NBOGUS:u",
            ),
            (
                crate::netburst_event!("packed_SP_uop:TAG0:TAG2"),
                "packed_SP_uop:TAG0:TAG2",
            ),
            (
                crate::netburst_event!("global_power_events:cmpl:thr=0x8:e=1:k=1:u=0"),
                "global_power_events:cmpl:thr=0x8:e=1:k=1:u=0",
            ),
            (
                crate::netburst_event!("REPLAY_EVENT:NBOGUS:L1_LD_MISS"),
                "REPLAY_EVENT:NBOGUS:L1_LD_MISS",
            ),
        ];
        for (spec, s) in SPECS {
            let parsed: EventSpec = s.parse().unwrap();
            assert_eq!(spec, parsed, "{s}");
            assert_eq!(
                (spec.escr_bits(), spec.cccr_bits()),
                (parsed.escr_bits(), parsed.cccr_bits())
            );
        }
        // The precomputed images agree with the catalog, for every event's
        // default spec.
        for e in EventName::ALL {
            let Ok(spec) = EventSpec::new(Pmu::NetburstP, e) else {
                continue;
            };
            let info = e.info();
            assert_eq!(spec.cccr_value().escr_select(), info.escr_select, "{e:?}");
            assert_eq!(spec.escr_value().event_select(), info.event_select, "{e:?}");
            for &escr in info.escrs {
                assert!(spec.allows(escr), "{e:?} on {escr:?}");
            }
            assert_eq!(
                Escr::ALL.iter().filter(|&&x| spec.allows(x)).count(),
                info.escrs.len(),
                "{e:?}"
            );
        }
    }

    #[test]
    fn libpfm4_vectors_bit_for_bit() {
        for (s, expect) in LIBPFM4_VECTORS {
            let got = s.parse::<EventSpec>();
            match (got, expect) {
                (Ok(spec), Ok((escr, cccr, fstr))) => {
                    assert_eq!(spec.escr_bits(), *escr, "{s}");
                    assert_eq!(spec.cccr_bits(), *cccr, "{s}");
                    assert_eq!(spec.to_string(), *fstr, "{s}");
                }
                (Err(e), Err(code)) => {
                    let ok = match *code {
                        "PFM_ERR_ATTR_VAL" => {
                            matches!(
                                e.kind,
                                ParseErrorKind::ValueOutOfRange {
                                    modifier: Modifier::Thr
                                }
                            )
                        }
                        "PFM_ERR_NOTFOUND" => matches!(
                            e.kind,
                            ParseErrorKind::WrongPmu {
                                event: EventName::InstrCompleted,
                                pmu: Pmu::Netburst
                            }
                        ),
                        _ => false,
                    };
                    assert!(ok, "{s}: {e:?} vs {code}");
                }
                (got, _) => panic!("{s}: got {got:?}, expected {expect:?}"),
            }
        }
    }

    fn kind(s: &str) -> ParseErrorKind {
        EventSpec::parse(s, Pmu::Netburst).unwrap_err().kind
    }

    #[test]
    fn precise_errors() {
        use ParseErrorKind::*;
        assert_eq!(kind(""), Empty);
        assert_eq!(kind("pentium4::global_power_events"), UnknownPmu);
        assert_eq!(kind("netburst::"), MissingEvent);
        assert_eq!(kind("netburst::no_such_event"), UnknownEvent);
        assert_eq!(
            kind("global_power_events:NOPE"),
            UnknownMask {
                event: EventName::GlobalPowerEvents
            }
        );
        assert_eq!(kind("global_power_events:RUNNING:"), EmptyField);
        assert_eq!(kind("netburst::global_power_events:RUNNING::u"), EmptyField);
        // The first `::` always separates the PMU (as in libpfm4).
        assert_eq!(kind("global_power_events::u"), UnknownPmu);
        assert_eq!(kind("global_power_events:RUNNING=1"), MaskTakesNoValue);
        assert_eq!(kind("global_power_events:foo=1"), UnknownModifier);
        assert_eq!(
            kind("global_power_events:thr"),
            MissingValue {
                modifier: Modifier::Thr
            }
        );
        assert_eq!(
            kind("global_power_events:thr="),
            InvalidValue {
                modifier: Modifier::Thr
            }
        );
        assert_eq!(
            kind("global_power_events:thr=x"),
            InvalidValue {
                modifier: Modifier::Thr
            }
        );
        assert_eq!(
            kind("global_power_events:thr=16"),
            ValueOutOfRange {
                modifier: Modifier::Thr
            }
        );
        assert_eq!(
            kind("global_power_events:thr=99999999999999999999999"),
            ValueOutOfRange {
                modifier: Modifier::Thr
            }
        );
        assert_eq!(
            kind("global_power_events:u=2"),
            ValueOutOfRange {
                modifier: Modifier::U
            }
        );
        assert_eq!(
            kind("global_power_events:u:u"),
            ModifierRepeated {
                modifier: Modifier::U
            }
        );
        assert_eq!(
            kind("global_power_events:k=0:k=1"),
            ModifierRepeated {
                modifier: Modifier::K
            }
        );
        assert_eq!(
            kind("global_power_events:e:E"),
            ModifierRepeated {
                modifier: Modifier::E
            }
        );
        assert_eq!(
            kind("branch_retired"),
            NoDefaultMask {
                event: EventName::BranchRetired
            }
        );
        assert_eq!(
            kind("instr_completed:NBOGUS"),
            WrongPmu {
                event: EventName::InstrCompleted,
                pmu: Pmu::Netburst
            }
        );
        // Offsets point at the offending field.
        let e = EventSpec::parse(
            "netburst::global_power_events:RUNNING:thr=99",
            Pmu::Netburst,
        )
        .unwrap_err();
        assert_eq!(e.offset, "netburst::global_power_events:RUNNING:".len());
        assert!(e.to_string().contains("thr"));
    }

    #[test]
    fn encodings() {
        let p = |s: &str| EventSpec::parse(s, Pmu::NetburstP).unwrap();
        // TAGn pseudo-masks: tag value + tag enable, no mask bit.
        let s = p("packed_SP_uop:TAG0:TAG2");
        assert_eq!(s.escr_bits(), 0x08 << 25 | 0b0101 << 5 | 1 << 4 | 0xF);
        assert_eq!(
            p("packed_SP_uop").escr_bits(),
            0x08 << 25 | 1 << (9 + 15) | 0xF
        );
        // Replay metrics contribute no ESCR bit (libpfm4's `& 0x3`).
        let r = p("replay_event:NBOGUS:L1_LD_MISS:DTLB_ALL_MISS");
        assert_eq!(r.escr_bits(), 0x09 << 25 | 1 << 9 | 0xF);
        assert_eq!(
            r.replay_metrics().collect::<Vec<_>>(),
            [ReplayMetric::L1LoadMiss, ReplayMetric::DtlbAllMiss]
        );
        // thr=0 leaves COMPARE clear; k=0:u=0 counts nothing.
        assert_eq!(p("global_power_events:thr=0").cccr_bits(), 0x3d000);
        assert_eq!(
            p("global_power_events:thr=0xf").cccr_bits(),
            0x3d000 | 0xF << 20 | 1 << 18
        );
        assert_eq!(p("global_power_events:k=0:u=0").escr_bits() & 0xF, 0);
        assert_eq!(p("global_power_events:k").escr_bits() & 0xF, 0b1010);
        // Case-insensitive names; libpfm4 aliases.
        assert_eq!(
            p("NETBURST_P::GLOBAL_POWER_EVENTS:running").escr_bits(),
            0x2600020f
        );
        assert_eq!(p("uops_type:TAGLOADS").event(), EventName::UopType);
        assert_eq!(
            p("mispred_branch_retired:BOGUS"),
            p("mispred_branch_retired:NBOGUS")
        );
        assert_eq!(
            p("mispred_branch_retired").escr_bits(),
            0x03 << 25 | 1 << 9 | 0xF
        );
        // Repeated masks are harmless, as in libpfm4.
        assert_eq!(
            p("global_power_events:RUNNING:RUNNING").escr_bits(),
            0x2600020f
        );
        // A default PMU applies only without a prefix.
        assert!(EventSpec::parse("instr_completed:NBOGUS", Pmu::NetburstP).is_ok());
        assert_eq!(Pmu::for_model(4), Pmu::NetburstP);
        assert_eq!(Pmu::for_model(2), Pmu::Netburst);
    }

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    fn random_spec(r: &mut Rng) -> EventSpec {
        let pmu = if r.next() & 1 == 0 {
            Pmu::Netburst
        } else {
            Pmu::NetburstP
        };
        loop {
            let event = EventName::ALL[r.below(46)];
            let n = event.info().masks.len();
            let masks = (r.next() as u32) & ((1u32 << n) - 1);
            if let Some(s) = EventSpec::with_masks(pmu, event, masks) {
                return s
                    .with_privilege(r.next() & 1 == 0, r.next() & 1 == 0)
                    .with_edge(r.next() & 1 == 0)
                    .with_complement(r.next() & 1 == 0)
                    .with_threshold(Threshold::new(r.below(16) as u8).unwrap());
            }
        }
    }

    #[test]
    fn property_round_trip_of_valid_specs() {
        let mut r = Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..20_000 {
            let spec = random_spec(&mut r);
            let text = spec.to_string();
            let back =
                EventSpec::parse(&text, Pmu::Netburst).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(back, spec, "{text}");
            assert_eq!(back.escr_bits(), spec.escr_bits());
            assert_eq!(back.cccr_bits(), spec.cccr_bits());
            // Images never carry reserved bits.
            assert_eq!(spec.escr_bits() & EscrValue::RESERVED, 0);
            assert_eq!(spec.cccr_bits() & CccrValue::RESERVED, 0);
            assert!(spec.cccr_value().enable());
        }
    }

    #[test]
    fn fuzz_never_panics() {
        const ALPHABET: &[&str] = &[
            ":",
            "::",
            "=",
            "0",
            "1",
            "8",
            "15",
            "16",
            "0x",
            "f",
            "u",
            "k",
            "e",
            "cmpl",
            "thr",
            "netburst",
            "netburst_p",
            "global_power_events",
            "RUNNING",
            "replay_event",
            "NBOGUS",
            "TAG3",
            "instr_completed",
            "é",
            "\u{0}",
            " ",
            ",",
            "-",
            "99999999999999999999",
            "packed_SP_uop",
            "L1_LD_MISS",
            "x",
        ];
        let mut r = Rng(0xC0FF_EE00_1234_5678);
        let seeds: Vec<String> = (0..64).map(|_| random_spec(&mut r).to_string()).collect();
        for i in 0..crate::testing::fuzz_cases(60_000) {
            let s: String = if i % 2 == 0 {
                (0..r.below(12))
                    .map(|_| ALPHABET[r.below(ALPHABET.len())])
                    .collect()
            } else {
                // Mutate a valid canonical string.
                let mut chars: Vec<char> = seeds[r.below(seeds.len())].chars().collect();
                for _ in 0..1 + r.below(4) {
                    let pos = r.below(chars.len() + 1);
                    match r.below(3) {
                        0 if pos < chars.len() => {
                            chars.remove(pos);
                        }
                        1 => chars.insert(pos, [' ', ':', '=', '0', 'x', 'é'][r.below(6)]),
                        _ if pos < chars.len() => chars[pos] = char::from(32 + r.below(95) as u8),
                        _ => {}
                    }
                }
                chars.into_iter().collect()
            };
            if let Ok(spec) = EventSpec::parse(&s, Pmu::Netburst) {
                // Anything accepted round-trips through its canonical form.
                let back = EventSpec::parse(&spec.to_string(), Pmu::Netburst).unwrap();
                assert_eq!(back.escr_bits(), spec.escr_bits(), "{s}");
                assert_eq!(back.cccr_bits(), spec.cccr_bits(), "{s}");
            }
        }
    }

    #[test]
    fn every_event_with_a_default_parses_bare() {
        for e in EventName::ALL {
            let s = EventSpec::parse(e.name(), Pmu::NetburstP);
            assert_eq!(s.is_ok(), e.info().default_mask().is_some(), "{}", e.name());
            // Each single mask by name.
            for (i, m) in e.info().masks.iter().enumerate() {
                let text = [e.name(), ":", m.name].concat();
                let spec = EventSpec::parse(&text, Pmu::NetburstP).unwrap();
                assert_eq!(spec.mask_indices(), 1 << i);
                if let MaskKind::Bit(b) = m.kind {
                    assert_eq!(spec.escr_bits() >> 9 & 0xFFFF, 1 << b, "{text}");
                }
            }
        }
    }

    fn message(s: &str) -> String {
        EventSpec::parse(s, Pmu::Netburst).unwrap_err().to_string()
    }

    /// Every message names the field and its offset, says what is
    /// allowed, and offers the closest name when one is near.
    #[test]
    fn messages_teach() {
        let cases = [
            (
                "instr_retird:NBOGUS",
                "`instr_retird` at byte 0 is not a NetBurst event; did you mean `instr_retired`?",
            ),
            (
                "netburst_p::INSTR_COMPLETD",
                "`INSTR_COMPLETD` at byte 12 is not a NetBurst event; did you mean `instr_completed`?",
            ),
            // `instr_completed` is no suggestion where the PMU lacks it.
            (
                "instr_complete",
                "`instr_complete` at byte 0 is not a NetBurst event",
            ),
            (
                "no_such_thing",
                "`no_such_thing` at byte 0 is not a NetBurst event",
            ),
            (
                "instr_retired:NBOGUSNTG:k",
                "`NBOGUSNTG` at byte 14 is neither a mask of `instr_retired` nor a modifier (u, k, cmpl, e, thr=N); did you mean `NBOGUSNTAG`?",
            ),
            (
                "global_power_events:NOPE",
                "`NOPE` at byte 20 is neither a mask of `global_power_events` nor a modifier (u, k, cmpl, e, thr=N)",
            ),
            (
                "global_power_events:tht=3",
                "`tht` at byte 20 is not a modifier: `name=value` takes u, k, cmpl, e or thr; did you mean `thr`?",
            ),
            (
                "global_power_events:thr=16",
                "the value of modifier `thr` at byte 20 is out of range: `thr` takes 0 to 15",
            ),
            (
                "global_power_events:u=2",
                "the value of modifier `u` at byte 20 is out of range: `u` takes 0 or 1",
            ),
            (
                "netburst::instr_completed:NBOGUS",
                "event `instr_completed` at byte 10 is not available on PMU `netburst`: it needs netburst_p (family 0Fh models 3, 4, 6), write `netburst_p::instr_completed`",
            ),
            (
                "pentium4::instr_retired",
                "`pentium4` at byte 0 is not a NetBurst PMU: write `netburst::`, `netburst_p::` or no prefix",
            ),
            (
                "",
                "the event string is empty: name an event, such as `instr_retired`",
            ),
            (
                "global_power_events:RUNNING:",
                "the field at byte 28 is empty: remove the extra `:`",
            ),
            (
                "global_power_events:RUNNING=1",
                "mask `RUNNING` at byte 20 takes no value: write it without `=`",
            ),
            (
                "global_power_events:u:u",
                "modifier `u` at byte 22 is given a second time: give each modifier once",
            ),
        ];
        for (s, expected) in cases {
            assert_eq!(message(s), expected, "{s}");
            let e = EventSpec::parse(s, Pmu::Netburst).unwrap_err();
            assert_eq!(e.message().as_str(), expected, "{s}");
            assert_eq!(&s[e.offset..][..e.field().len()], e.field(), "{s}");
        }
        let e = EventSpec::parse("instr_retird", Pmu::Netburst).unwrap_err();
        assert_eq!(e.suggestion(), Some("instr_retired"));
        assert_eq!(e.field(), "instr_retird");
        // An event without a default mask says how to name one.
        let bare = EventName::ALL
            .into_iter()
            .find(|e| e.info().default_mask().is_none())
            .unwrap();
        let text = message(bare.name());
        assert!(
            text.starts_with(&format!(
                "event `{}` has no default mask: name one, such as `{}:",
                bare.name(),
                bare.name()
            )),
            "{text}"
        );
    }

    /// A field longer than an error keeps is cut at a character boundary.
    #[test]
    fn long_fields_are_cut_whole() {
        let s = "global_power_events:ééééééééééééééééééé";
        let e = EventSpec::parse(s, Pmu::Netburst).unwrap_err();
        assert_eq!(e.field(), "é".repeat(16));
        assert!(e.to_string().starts_with("`éééééééééééééééé` at byte 20"));
    }

    /// The compile-time form stops the build with the same message: the
    /// const evaluation of [`ParseError::message`] equals the run-time one.
    #[test]
    fn messages_are_const() {
        const E: ParseError = match EventSpec::parse("instr_retird:NBOGUS", Pmu::Netburst) {
            Ok(_) => panic!("parsed"),
            Err(e) => e,
        };
        const TEXT: Message = E.message();
        assert_eq!(TEXT.as_str(), message("instr_retird:NBOGUS"));
    }
}

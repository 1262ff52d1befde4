//! AMD's events and event strings (documented on [`EventSpec`]).

use core::fmt;
use core::str::FromStr;

use super::msrs::PerfCtl;
use crate::arch::event_syntax::{self, ModifierError, NumberError, SplitError, Term};
use crate::detect::{AmdCpu, Vendor};

/// `perf`'s generic hardware events (`PERF_TYPE_HARDWARE`; names from
/// `tools/perf/util/parse-events.l`), which Linux maps to an encoding per
/// AMD generation ([`EventMap`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum HardwareEvent {
    /// `cycles` (`cpu-cycles`): core cycles not in halt, event 76H.
    Cycles,
    /// `instructions`: retired instructions, event C0H.
    Instructions,
    /// `cache-references`.
    CacheReferences,
    /// `cache-misses`.
    CacheMisses,
    /// `branches` (`branch-instructions`): retired branches, event C2H.
    Branches,
    /// `branch-misses`: retired mispredicted branches, event C3H.
    BranchMisses,
    /// `stalled-cycles-frontend` (`idle-cycles-frontend`).
    StalledCyclesFrontend,
    /// `stalled-cycles-backend` (`idle-cycles-backend`).
    StalledCyclesBackend,
    /// `ref-cycles`: cycles at the P0 frequency (as `MPERF` counts), event
    /// 120H, from Zen 4.
    RefCycles,
}

impl HardwareEvent {
    /// Every one, in the order of Linux's maps.
    pub const ALL: [HardwareEvent; 9] = [
        HardwareEvent::Cycles,
        HardwareEvent::Instructions,
        HardwareEvent::CacheReferences,
        HardwareEvent::CacheMisses,
        HardwareEvent::Branches,
        HardwareEvent::BranchMisses,
        HardwareEvent::StalledCyclesFrontend,
        HardwareEvent::StalledCyclesBackend,
        HardwareEvent::RefCycles,
    ];

    /// `perf`'s name (the first of its aliases).
    pub const fn name(self) -> &'static str {
        MAPS[self as usize].0
    }

    /// The `perf_event_attr.config` Linux programs for it under `map`
    /// (`umask << 8 | event[7:0] | event[11:8] << 32`), or `None` where the
    /// map has no entry.
    pub const fn config(self, map: EventMap) -> Option<u64> {
        let c = MAPS[self as usize].1[map as usize];
        if c == NONE { None } else { Some(c) }
    }
}

/// Which of Linux's AMD event maps (`arch/x86/events/amd/core.c`,
/// `amd_pmu_event_map`) a part takes, by family and model as Linux tells
/// its generations apart (`arch/x86/kernel/cpu/amd.c`, `bsp_init_amd`:
/// `X86_FEATURE_ZEN1` for family 17h models 00h-2Fh and 50h-5Fh, `ZEN2` for
/// 30h-4Fh, 60h-7Fh, 90h-91h, A0h-AFh, `ZEN4` for family 19h models
/// 10h-1Fh and 60h-AFh).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum EventMap {
    /// `amd_perfmon_event_map`: families before 17h (K7 to family 16h),
    /// and a family 17h model Linux places in no Zen generation.
    K7,
    /// `amd_zen1_perfmon_event_map`: Zen and Zen+ (family 17h); Hygon's
    /// family 18h (see [`EventMap::of`]).
    Zen1,
    /// `amd_zen2_perfmon_event_map`: Zen 2, and family 19h but Zen 4.
    Zen2,
    /// `amd_zen4_perfmon_event_map`: Zen 4 (family 19h) and family 1Ah on.
    Zen4,
}

impl EventMap {
    /// The map of a `vendor` part of `family` and `model`.
    ///
    /// Source disagreement: Hygon's family 18h (a Zen 1 design) took the
    /// one family-17h-and-later map Linux had before 2024 (it tested
    /// `family >= 0x17`); since the map was split, Linux chooses by its
    /// Zen feature bits, which its Hygon set-up does not set. The crate
    /// keeps the Zen 1 map for it, the encodings of the core it is.
    pub const fn of(vendor: Vendor, family: u16, model: u8) -> EventMap {
        if matches!(vendor, Vendor::Hygon) && family == 0x18 {
            return EventMap::Zen1;
        }
        match (family, model) {
            (0x1A.., _) | (0x19, 0x10..=0x1F | 0x60..=0xAF) => EventMap::Zen4,
            (0x19, _) | (0x17, 0x30..=0x4F | 0x60..=0x7F | 0x90..=0x91 | 0xA0..=0xAF) => {
                EventMap::Zen2
            }
            (0x17, 0x00..=0x2F | 0x50..=0x5F) => EventMap::Zen1,
            _ => EventMap::K7,
        }
    }

    /// The map detection's `cpu` takes.
    pub const fn for_cpu(cpu: &AmdCpu) -> EventMap {
        EventMap::of(cpu.vendor, cpu.family, cpu.model)
    }

    /// Linux's name for it.
    pub const fn name(self) -> &'static str {
        match self {
            EventMap::K7 => "amd_perfmon_event_map",
            EventMap::Zen1 => "amd_zen1_perfmon_event_map",
            EventMap::Zen2 => "amd_zen2_perfmon_event_map",
            EventMap::Zen4 => "amd_zen4_perfmon_event_map",
        }
    }
}

/// No entry in a map.
const NONE: u64 = u64::MAX;

/// Per [`HardwareEvent`], `perf`'s name and its config in each [`EventMap`]
/// (K7, Zen 1, Zen 2, Zen 4), transcribed from Linux's
/// `arch/x86/events/amd/core.c` (`amd_perfmon_event_map`,
/// `amd_zen1_perfmon_event_map`, `amd_zen2_perfmon_event_map`,
/// `amd_zen4_perfmon_event_map`, the 2024 revision that split them).
const MAPS: [(&str, [u64; 4]); 9] = [
    ("cycles", [0x0076; 4]),
    ("instructions", [0x00C0; 4]),
    ("cache-references", [0x077D, 0xFF60, 0xFF60, 0xFF60]),
    ("cache-misses", [0x077E, 0x0964, 0x0964, 0x0964]),
    ("branches", [0x00C2; 4]),
    ("branch-misses", [0x00C3; 4]),
    ("stalled-cycles-frontend", [0x00D0, 0x0287, 0x00A9, 0x00A9]),
    ("stalled-cycles-backend", [0x00D1, 0x0187, NONE, NONE]),
    ("ref-cycles", [NONE, NONE, NONE, 0x1_0000_0120]),
];

/// The names the parser takes: `perf`'s, with its aliases
/// (`tools/perf/util/parse-events.l`).
const NAMES: [(&str, HardwareEvent); 13] = [
    ("cycles", HardwareEvent::Cycles),
    ("cpu-cycles", HardwareEvent::Cycles),
    ("instructions", HardwareEvent::Instructions),
    ("cache-references", HardwareEvent::CacheReferences),
    ("cache-misses", HardwareEvent::CacheMisses),
    ("branches", HardwareEvent::Branches),
    ("branch-instructions", HardwareEvent::Branches),
    ("branch-misses", HardwareEvent::BranchMisses),
    (
        "stalled-cycles-frontend",
        HardwareEvent::StalledCyclesFrontend,
    ),
    ("idle-cycles-frontend", HardwareEvent::StalledCyclesFrontend),
    (
        "stalled-cycles-backend",
        HardwareEvent::StalledCyclesBackend,
    ),
    ("idle-cycles-backend", HardwareEvent::StalledCyclesBackend),
    ("ref-cycles", HardwareEvent::RefCycles),
];

/// `perf`'s generic events no AMD map has an entry for.
const UNMAPPED: [&str; 1] = ["bus-cycles"];

/// A format term of Linux's `cpu` PMU on AMD (`amd/core.c`,
/// `PMU_FORMAT_ATTR`: `event` "config:0-7,32-35", `umask` "config:8-15",
/// `edge` "config:18", `inv` "config:23", `cmask` "config:24-31"): its
/// name, its width, and where its bits go in the config (the value's low
/// `low_width` bits at `low_at`, the rest at `high_at`).
struct Format {
    name: &'static str,
    width: u32,
    low_at: u32,
    low_width: u32,
    high_at: u32,
}

impl Format {
    /// The config bits of value `v` (`v` fits [`Format::width`]).
    const fn place(&self, v: u64) -> u64 {
        let low = v & ((1 << self.low_width) - 1);
        low << self.low_at | (v >> self.low_width) << self.high_at
    }

    /// The config bits the term sets.
    const fn mask(&self) -> u64 {
        self.place((1 << self.width) - 1)
    }
}

/// Linux's AMD formats (see [`Format`]).
const FORMAT: [Format; 5] = [
    Format {
        name: "event",
        width: 12,
        low_at: 0,
        low_width: 8,
        high_at: 32,
    },
    Format {
        name: "umask",
        width: 8,
        low_at: 8,
        low_width: 8,
        high_at: 0,
    },
    Format {
        name: "edge",
        width: 1,
        low_at: 18,
        low_width: 1,
        high_at: 0,
    },
    Format {
        name: "inv",
        width: 1,
        low_at: 23,
        low_width: 1,
        high_at: 0,
    },
    Format {
        name: "cmask",
        width: 8,
        low_at: 24,
        low_width: 8,
        high_at: 0,
    },
];

/// The config bits some format term covers: Linux's `AMD64_RAW_EVENT_MASK`
/// (event, unit mask, edge, inv, cmask, event\[11:8\]).
const FORMAT_BITS: u64 = 0xF_FF84_FFFF;

/// `perf`'s event modifiers that this driver has no counterpart for, with
/// what each means (`tools/perf/Documentation/perf-list.txt`, "EVENT
/// MODIFIERS").
const OTHER_MODIFIERS: [(char, &str); 11] = [
    ('h', "hypervisor counting"),
    ('I', "non-idle counting"),
    (
        'p',
        "precise level (on AMD instruction-based sampling, which this driver does not drive)",
    ),
    (
        'P',
        "maximum precise level (on AMD instruction-based sampling, which this driver does not drive)",
    ),
    ('S', "sample read"),
    ('D', "pinned"),
    ('W', "weak group"),
    ('e', "exclusive"),
    ('b', "BPF aggregation"),
    ('R', "retire latency"),
    ('X', "no regrouping"),
];

/// What an [`EventSpec`] counts: a generic event, resolved per part, or a
/// raw encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Event {
    /// A `perf` generic event, whose encoding the part's [`EventMap`] gives.
    Hardware(HardwareEvent),
    /// An encoding: the 12-bit event select and the unit mask.
    Raw {
        /// EventSelect\[11:0\].
        select: u16,
        /// UnitMask.
        umask: u8,
    },
}

/// An event to count on the AMD core PMU, with its filters: the fields of
/// `PERF_CTLn` that say what counts ([`PerfCtl`]). It parses from the
/// event strings `perf` users write, resolved as `perf` resolves them on
/// AMD (Linux's `arch/x86/events/amd/core.c` and
/// `tools/perf/util/parse-events.l`).
///
/// # Names
///
/// `perf`'s generic hardware events ([`HardwareEvent`]), whose encoding
/// depends on the part, as Linux's maps give it ([`EventMap`]: a name is
/// kept as such and resolved by the driver for its CPU):
///
/// | name | K7-16h | Zen 1 | Zen 2, family 19h | Zen 4, family 1Ah |
/// |---|---|---|---|---|
/// | `cycles`, `cpu-cycles` | 0x76 | 0x76 | 0x76 | 0x76 |
/// | `instructions` | 0xc0 | 0xc0 | 0xc0 | 0xc0 |
/// | `cache-references` | 0x077d | 0xff60 | 0xff60 | 0xff60 |
/// | `cache-misses` | 0x077e | 0x0964 | 0x0964 | 0x0964 |
/// | `branches`, `branch-instructions` | 0xc2 | 0xc2 | 0xc2 | 0xc2 |
/// | `branch-misses` | 0xc3 | 0xc3 | 0xc3 | 0xc3 |
/// | `stalled-cycles-frontend` (`idle-`) | 0xd0 | 0x0287 | 0xa9 | 0xa9 |
/// | `stalled-cycles-backend` (`idle-`) | 0xd1 | 0x0187 | none | none |
/// | `ref-cycles` | none | none | none | 0x100000120 |
///
/// A name a part's map has no entry for is refused by the driver
/// (`ConfigError::Unmapped`); `bus-cycles`, which no AMD map has, is
/// refused here.
///
/// # Syntax
///
/// | form | example |
/// |---|---|
/// | a name | `cycles` |
/// | terms | `event=0x76,umask=0x00`, `event=0x1c0,cmask=2,inv` |
/// | a raw config (hexadecimal, `perf`'s `rNNN`) | `r76`, `r0x100000120` |
/// | any of these in `perf`'s PMU syntax | `cpu/instructions/u`, `cpu/event=0xc0,edge/` |
///
/// Terms (each at most once; a term without `=` is 1, as in `perf`;
/// numbers in decimal or `0x` hexadecimal): `event=` (required, or
/// `config=`; 12 bits, which go to `PERF_CTL`'s bits 7:0 and 35:32),
/// `umask=`, `cmask=` (8 bits each), `inv`, `edge` (0 or 1), and
/// `config=`, the whole `perf_event_attr.config` in the layout of Linux's
/// AMD formats, which a raw config is too. Bits outside those are refused
/// rather than dropped as Linux drops them: the privilege and the
/// host/guest filter come from the modifiers.
///
/// Modifiers follow a `:` (or, in the PMU syntax, the closing `/`): `u`
/// (CPL > 0 only), `k` (CPL 0 only), `H` (host mode only: `PERF_CTL`'s
/// HostOnly), `G` (guest mode only: GuestOnly); as in `perf`, the first of
/// `u`/`k` excludes both privileges and each one given includes its own,
/// and likewise `H`/`G` (so `:HG` counts in both modes, as no modifier
/// does). `perf`'s other modifiers (`p`: on AMD instruction-based
/// sampling; `h`, `I`, ...) and a repeated modifier are refused, each with
/// a message.
///
/// Source difference: `perf` sets `exclude_guest` for an event without
/// `H` or `G`, and Linux then sets HostOnly while SVM is enabled
/// (`amd_core_hw_config`, `amd_pmu_enable_virt`); the crate's default
/// counts in both modes, as the hardware does with neither bit, and sets
/// HostOnly only for `:H`.
///
/// Errors give the byte offset of the offending term, and the closest name
/// or term where one is near ([`ParseError`]).
///
/// ```
/// use pmu::arch::amd::{EventMap, EventSpec, HardwareEvent};
///
/// let e: EventSpec = "event=0x1c0,umask=0x01,cmask=2,inv:uH".parse()?;
/// let ctl = e.perf_ctl(EventMap::Zen2).unwrap();
/// assert_eq!((ctl.event(), ctl.umask(), ctl.cnt_mask(), ctl.inv()), (0x1C0, 1, 2, true));
/// assert_eq!((ctl.usr(), ctl.os(), ctl.host_only(), ctl.guest_only()), (true, false, true, false));
/// let r: EventSpec = "cpu/ref-cycles/k".parse()?;
/// assert_eq!(r.perf_config(EventMap::Zen4), Some(0x1_0000_0120));
/// assert_eq!(r.perf_config(EventMap::Zen2), None); // Zen 2 has no ref-cycles
/// let c: EventSpec = "cache-misses".parse()?;
/// assert_eq!((c.perf_config(EventMap::K7), c.perf_config(EventMap::Zen1)), (Some(0x077E), Some(0x0964)));
/// let err = "event=0x76,umaks=1".parse::<EventSpec>().unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "unknown term `umaks` at byte 11: expected event=, umask=, edge, inv, cmask= or config=; did you mean `umask`?"
/// );
/// # Ok::<(), pmu::arch::amd::ParseError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EventSpec {
    /// What counts.
    pub event: Event,
    /// CntMask: count cycles with at least this many events (0: events).
    pub cmask: u8,
    /// INV: cycles with fewer than CntMask events.
    pub inv: bool,
    /// Edge: count rising edges of the CntMask comparison.
    pub edge: bool,
    /// Count at CPL > 0.
    pub usr: bool,
    /// Count at CPL 0.
    pub os: bool,
    /// Count in host mode (with SVM enabled; both modes: neither
    /// HostOnly nor GuestOnly).
    pub host: bool,
    /// Count in guest mode.
    pub guest: bool,
}

impl EventSpec {
    /// Event `select` (12 bits) with `umask`, at every privilege, in both
    /// modes, no filter.
    pub const fn raw(select: u16, umask: u8) -> EventSpec {
        EventSpec::of(Event::Raw {
            select: select & 0xFFF,
            umask,
        })
    }

    /// A `perf` generic event, at every privilege, in both modes.
    pub const fn hardware(e: HardwareEvent) -> EventSpec {
        EventSpec::of(Event::Hardware(e))
    }

    const fn of(event: Event) -> EventSpec {
        EventSpec {
            event,
            cmask: 0,
            inv: false,
            edge: false,
            usr: true,
            os: true,
            host: true,
            guest: true,
        }
    }

    /// At CPL > 0 only.
    pub const fn user(mut self) -> EventSpec {
        (self.usr, self.os) = (true, false);
        self
    }

    /// At CPL 0 only.
    pub const fn kernel(mut self) -> EventSpec {
        (self.usr, self.os) = (false, true);
        self
    }

    /// In host mode only (HostOnly).
    pub const fn host_only(mut self) -> EventSpec {
        (self.host, self.guest) = (true, false);
        self
    }

    /// In guest mode only (GuestOnly).
    pub const fn guest_only(mut self) -> EventSpec {
        (self.host, self.guest) = (false, true);
        self
    }

    /// The `perf_event_attr.config` this is on a part of `map` (event bits
    /// 7:0 and 35:32, umask 15:8, edge 18, inv 23, cmask 31:24), without
    /// the privilege and host/guest filters (`perf` passes those as
    /// flags); `None` for a generic event the map has no entry for.
    pub const fn perf_config(&self, map: EventMap) -> Option<u64> {
        let base = match self.event {
            Event::Hardware(e) => match e.config(map) {
                Some(c) => c,
                None => return None,
            },
            Event::Raw { select, umask } => PerfCtl::new(select, umask).bits(),
        };
        let filters = PerfCtl::from_bits(0)
            .with_edge(self.edge)
            .with_inv(self.inv)
            .with_cnt_mask(self.cmask);
        Some(base | filters.bits())
    }

    /// The `PERF_CTLn` image on a part of `map`: the event, its filters,
    /// privilege and mode, without EN and INT; `None` for a generic event
    /// the map has no entry for. Both modes excluded (`host` and `guest`
    /// clear) counts nowhere: USR and OS clear, as Linux emulates it
    /// (`amd_core_hw_config`: HostOnly and GuestOnly both set would count
    /// in both modes).
    pub const fn perf_ctl(&self, map: EventMap) -> Option<PerfCtl> {
        let Some(config) = self.perf_config(map) else {
            return None;
        };
        let nowhere = !self.host && !self.guest;
        Some(
            PerfCtl::from_bits(config & FORMAT_BITS)
                .with_usr(self.usr && !nowhere)
                .with_os(self.os && !nowhere)
                .with_host_only(self.host && !self.guest)
                .with_guest_only(self.guest && !self.host),
        )
    }

    /// The event of a `perf_event_attr.config`, at every privilege and in
    /// both modes; `Err` with the bits no format term covers.
    const fn from_perf_config(config: u64) -> Result<EventSpec, u64> {
        let stray = config & !FORMAT_BITS;
        if stray != 0 {
            return Err(stray);
        }
        let ctl = PerfCtl::from_bits(config);
        let mut spec = EventSpec::raw(ctl.event(), ctl.umask());
        spec.edge = ctl.edge();
        spec.inv = ctl.inv();
        spec.cmask = ctl.cnt_mask();
        Ok(spec)
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

    /// The name or term closest to a misspelt one, when one is near enough
    /// to be meant: `umask` for `umaks`, `cycles` for `cyles`.
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
    /// A term that is none of `event`, `umask`, `edge`, `inv`, `cmask`,
    /// `config`.
    UnknownTerm,
    /// A name that is no event the parser knows.
    UnknownEvent,
    /// A `perf` name that no AMD map has an entry for (`bus-cycles`).
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
    /// (`p`, `h`, ...).
    UnsupportedModifier,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (term, at) = (self.term(), self.offset);
        let modifiers = "expected u (CPL > 0), k (CPL 0), H (host mode), G (guest mode)";
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
                "unknown term `{term}` at byte {at}: expected event=, umask=, edge, inv, cmask= or config="
            )?,
            ParseErrorKind::UnknownEvent => {
                write!(f, "unknown event `{term}` at byte {at}: expected ")?;
                for (name, _) in NAMES {
                    write!(f, "{name}, ")?;
                }
                f.write_str("event=0x..,umask=0x.. or r<hex>")?
            }
            ParseErrorKind::Unmapped => write!(
                f,
                "`{term}` at byte {at} is a perf event that Linux maps to no event on any AMD part (no amd_*_perfmon_event_map has one): give an encoding as event=0x..,umask=0x.."
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
            ParseErrorKind::RawBits { bits } => write!(
                f,
                "raw config `{term}` at byte {at} sets bits {bits:#x} that no term covers (event 7:0 and 35:32, umask 15:8, edge 18, inv 23, cmask 31:24); the privilege and the host/guest filter come from the :u, :k, :H and :G modifiers"
            )?,
            ParseErrorKind::UnknownPmu => write!(
                f,
                "unknown PMU `{term}` at byte {at}: expected cpu/.../ (the core PMU of the logical processor the driver runs on)"
            )?,
            ParseErrorKind::Unclosed => write!(
                f,
                "`cpu/` at byte {at} has no closing `/`: expected cpu/.../"
            )?,
            ParseErrorKind::BadModifier if term.is_empty() => {
                write!(f, "empty modifier at byte {at}: {modifiers}")?
            }
            ParseErrorKind::BadModifier => {
                write!(f, "unknown modifier `{term}` at byte {at}: {modifiers}")?
            }
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
                    "modifier `{term}` at byte {at} is perf's {what}, which this driver has no counterpart for: {modifiers}"
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

/// A number for a term, the text at byte `at`.
fn number(text: &str, at: usize, bits: u32) -> Result<u64, ParseError> {
    event_syntax::number(text, bits).map_err(|e| {
        let kind = match e {
            NumberError::Bad => ParseErrorKind::BadNumber,
            NumberError::TooBig(bits) => ParseErrorKind::TooBig { bits },
        };
        ParseError::new(kind, at, text)
    })
}

/// A raw config (`rNNN`, `config=`), the text at byte `at`.
fn raw_config(text: &str, config: u64, at: usize) -> Result<EventSpec, ParseError> {
    EventSpec::from_perf_config(config)
        .map_err(|bits| ParseError::new(ParseErrorKind::RawBits { bits }, at, text))
}

/// The terms `event=..,umask=..,...` starting at byte `base`: each sets
/// its bits of a config, which is the event in the end.
fn terms(body: &str, base: usize) -> Result<EventSpec, ParseError> {
    let mut config = 0u64;
    // The config bits set so far (`config=` sets all).
    let mut set = 0u64;
    let mut at = base;
    for term in body.split(',') {
        if term.is_empty() {
            return Err(ParseError::new(ParseErrorKind::EmptyTerm, at, term));
        }
        let (key, value) = term.split_once('=').unwrap_or((term, "1"));
        let value_at = at + key.len() + 1;
        let (bits, covers) = if key == "config" {
            let v = number(value, value_at, 64)?;
            raw_config(value, v, value_at)?;
            (v, FORMAT_BITS)
        } else if let Some(format) = FORMAT.iter().find(|f| f.name == key) {
            let v = number(value, value_at, format.width)?;
            (format.place(v), format.mask())
        } else {
            let names = FORMAT.iter().map(|f| f.name).chain(["config"]);
            return Err(
                ParseError::new(ParseErrorKind::UnknownTerm, at, key).suggesting(key, names)
            );
        };
        if set & covers != 0 {
            return Err(ParseError::new(ParseErrorKind::RepeatedTerm, at, key));
        }
        (set, config) = (set | covers, config | bits);
        at += term.len() + 1;
    }
    if set & FORMAT[0].mask() == 0 {
        return Err(ParseError::new(ParseErrorKind::MissingEvent, base, body));
    }
    raw_config(body, config, base)
}

/// A name, terms or a raw config at byte `at`, without modifiers.
fn body(text: &str, at: usize) -> Result<EventSpec, ParseError> {
    if text.is_empty() {
        return Err(ParseError::new(ParseErrorKind::Empty, at, text));
    }
    let first = text.split(['=', ',']).next().unwrap_or(text);
    if text.contains(['=', ',']) || first == "config" || FORMAT.iter().any(|f| f.name == first) {
        return terms(text, at);
    }
    if let Some(config) = event_syntax::raw_hex(text) {
        let config = config.map_err(|_| ParseError::new(ParseErrorKind::BadNumber, at, text))?;
        return raw_config(text, config, at);
    }
    if let Some(&(_, e)) = NAMES.iter().find(|(name, _)| *name == text) {
        return Ok(EventSpec::hardware(e));
    }
    if UNMAPPED.contains(&text) {
        return Err(ParseError::new(ParseErrorKind::Unmapped, at, text));
    }
    Err(ParseError::new(ParseErrorKind::UnknownEvent, at, text)
        .suggesting(text, NAMES.iter().map(|(n, _)| *n)))
}

/// Applies the modifiers `mods` (after the `:`, at byte `at`) to `spec`.
fn modifiers(mut spec: EventSpec, mods: &str, at: usize) -> Result<EventSpec, ParseError> {
    const U: u32 = 1;
    const K: u32 = 2;
    const H: u32 = 4;
    const G: u32 = 8;
    let other = OTHER_MODIFIERS.map(|(c, _)| c);
    let set = event_syntax::modifier_set(mods, &['u', 'k', 'H', 'G'], &other).map_err(|e| {
        let (kind, i) = match e {
            ModifierError::Empty => (ParseErrorKind::BadModifier, 0),
            ModifierError::Bad(i) => (ParseErrorKind::BadModifier, i),
            ModifierError::Repeated(i) => (ParseErrorKind::RepeatedModifier, i),
            ModifierError::Unsupported(i) => (ParseErrorKind::UnsupportedModifier, i),
        };
        ParseError::new(kind, at + i, event_syntax::char_at(mods, i))
    })?;
    if set & (U | K) != 0 {
        (spec.usr, spec.os) = (set & U != 0, set & K != 0);
    }
    if set & (H | G) != 0 {
        (spec.host, spec.guest) = (set & H != 0, set & G != 0);
    }
    Ok(spec)
}

impl FromStr for EventSpec {
    type Err = ParseError;

    /// `event[:mods]` or `cpu/event/[mods]`, where `event` is a name,
    /// terms or a raw config and `mods` letters of `u`, `k`, `H`, `G` (see
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

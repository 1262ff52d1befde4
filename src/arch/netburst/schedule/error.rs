//! Why a set of requests cannot be placed: the minimal conflicting subset
//! and the registers it competes for, with its `Display` text.

use core::fmt;

use crate::arch::netburst::LogicalProcessor;
use crate::arch::netburst::events::EventName;
use crate::arch::netburst::{CounterSet, Escr, EscrSet};

use super::*;

/// A minimal set of requests that compete for too few registers.
///
/// The members cannot all be placed together, but any one of them can be
/// dropped and the others fit. Every placement of every member uses one of
/// [`Conflict::escrs`] or one of [`Conflict::counters`], and there are
/// exactly `len() - 1` of those.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Conflict {
    pub(super) requests: u32,
    pub(super) events: [EventName; MAX_REQUESTS],
    pub(super) processors: [LogicalProcessor; MAX_REQUESTS],
    pub(super) escrs: EscrSet,
    pub(super) counters: CounterSet,
    pub(super) occupied: bool,
}

impl Conflict {
    /// The member requests as a bit mask of request indices.
    pub const fn requests(&self) -> u32 {
        self.requests
    }

    /// Whether request `request` is a member.
    pub const fn contains(&self, request: usize) -> bool {
        request < MAX_REQUESTS && self.requests & (1 << request) != 0
    }

    /// Number of members (at least 2).
    pub const fn len(&self) -> usize {
        self.requests.count_ones() as usize
    }

    /// Never true: a conflict has members.
    pub const fn is_empty(&self) -> bool {
        self.requests == 0
    }

    /// The members: (request index, event, logical processor), by index.
    pub fn members(
        &self,
    ) -> impl Iterator<Item = (usize, EventName, LogicalProcessor)> + Clone + '_ {
        (0..MAX_REQUESTS)
            .filter(|i| self.contains(*i))
            .map(|i| (i, self.events[i], self.processors[i]))
    }

    /// The ESCRs the members compete for (each serves one request).
    pub const fn escrs(&self) -> EscrSet {
        self.escrs
    }

    /// The counters the members compete for.
    pub const fn counters(&self) -> CounterSet {
        self.counters
    }

    /// How many members the contested registers can serve: `len() - 1`.
    pub const fn capacity(&self) -> usize {
        (self.escrs.len() + self.counters.len()) as usize
    }

    /// Whether occupied registers are part of the reason (the members could
    /// otherwise use some of them).
    pub const fn involves_occupied(&self) -> bool {
        self.occupied
    }
}

/// Why a set of requests cannot be placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ScheduleError {
    /// More than [`MAX_REQUESTS`] requests.
    TooMany {
        /// How many were given.
        requests: usize,
    },
    /// The event does not exist on this model (`instr_completed` outside
    /// models 3, 4, 6).
    EventUnavailable {
        /// Request index.
        request: usize,
        /// Its event.
        event: EventName,
        /// Its logical processor.
        processor: LogicalProcessor,
        /// The model.
        model: u8,
    },
    /// The event must be programmed together with another one that is
    /// neither requested nor running.
    MissingCompanion {
        /// Request index.
        request: usize,
        /// Its event.
        event: EventName,
        /// Its logical processor.
        processor: LogicalProcessor,
        /// The event it needs.
        needs: EventName,
    },
    /// None of the event's ESCRs is usable.
    NoEscr {
        /// Request index.
        request: usize,
        /// Its event.
        event: EventName,
        /// Its logical processor.
        processor: LogicalProcessor,
        /// Catalog ESCRs the request's restriction excludes.
        excluded: EscrSet,
        /// Catalog ESCRs this part lacks for the event.
        absent: EscrSet,
        /// Catalog ESCRs that are occupied.
        occupied: EscrSet,
    },
    /// The event's free ESCRs feed only occupied counters.
    NoCounter {
        /// Request index.
        request: usize,
        /// Its event.
        event: EventName,
        /// Its logical processor.
        processor: LogicalProcessor,
        /// Its free ESCRs.
        escrs: EscrSet,
        /// The (occupied) counters they feed.
        counters: CounterSet,
    },
    /// Requests compete for too few ESCRs and counters.
    Conflict(Conflict),
}

/// SDM names of the 18 counters (Table 18-63).
const COUNTER_NAMES: [&str; 18] = [
    "MSR_BPU_COUNTER0",
    "MSR_BPU_COUNTER1",
    "MSR_BPU_COUNTER2",
    "MSR_BPU_COUNTER3",
    "MSR_MS_COUNTER0",
    "MSR_MS_COUNTER1",
    "MSR_MS_COUNTER2",
    "MSR_MS_COUNTER3",
    "MSR_FLAME_COUNTER0",
    "MSR_FLAME_COUNTER1",
    "MSR_FLAME_COUNTER2",
    "MSR_FLAME_COUNTER3",
    "MSR_IQ_COUNTER0",
    "MSR_IQ_COUNTER1",
    "MSR_IQ_COUNTER2",
    "MSR_IQ_COUNTER3",
    "MSR_IQ_COUNTER4",
    "MSR_IQ_COUNTER5",
];

/// "event (request i, Tn)".
struct Label(usize, EventName, LogicalProcessor);

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = match self.2 {
            LogicalProcessor::T0 => "T0",
            LogicalProcessor::T1 => "T1",
        };
        write!(f, "{} (request {}, {})", self.1.name(), self.0, t)
    }
}

/// Writes "a", "a and b", "a, b and c" (`conj` instead of "and").
fn write_list<T: fmt::Display>(
    f: &mut fmt::Formatter<'_>,
    items: impl Iterator<Item = T> + Clone,
    conj: &str,
) -> fmt::Result {
    let n = items.clone().count();
    for (i, x) in items.enumerate() {
        if i > 0 {
            if i + 1 == n {
                write!(f, " {conj} ")?;
            } else {
                f.write_str(", ")?;
            }
        }
        write!(f, "{x}")?;
    }
    Ok(())
}

fn escr_names(s: EscrSet) -> impl Iterator<Item = &'static str> + Clone {
    s.iter().map(Escr::name)
}

fn counter_names(s: CounterSet) -> impl Iterator<Item = &'static str> + Clone {
    (0..18usize)
        .filter(move |i| s.bits() & (1 << i) != 0)
        .map(|i| COUNTER_NAMES[i])
}

fn is_are(n: u32) -> &'static str {
    if n == 1 { "is" } else { "are" }
}

/// [`ScheduleError::NoEscr`]'s reasons: which of the ESCRs were excluded,
/// absent or occupied, each group named with its reason.
fn write_escr_reasons(
    f: &mut fmt::Formatter<'_>,
    excluded: EscrSet,
    absent: EscrSet,
    occupied: EscrSet,
) -> fmt::Result {
    let mut sep = ": ";
    for (set, why) in [
        (excluded, "excluded by the request"),
        (absent, "not available for it on this processor"),
        (occupied, "occupied"),
    ] {
        if !set.is_empty() {
            f.write_str(sep)?;
            write_list(f, escr_names(set), "and")?;
            write!(f, " {} {why}", is_are(set.len()))?;
            sep = "; ";
        }
    }
    Ok(())
}

/// [`ScheduleError::Conflict`]: the members, the registers they compete
/// for and how many of them those can serve.
fn write_conflict(f: &mut fmt::Formatter<'_>, c: &Conflict) -> fmt::Result {
    let members = c.members().map(|(i, e, p)| Label(i, e, p));
    write_list(f, members, "and")?;
    f.write_str(" cannot all be counted together: each needs one of ")?;
    let regs = escr_names(c.escrs).chain(counter_names(c.counters));
    write_list(f, regs, "and")?;
    write!(
        f,
        ", which can serve only {} of these {}",
        c.capacity(),
        c.len()
    )?;
    if c.occupied {
        f.write_str(" (other registers they could use are occupied)")?;
    }
    Ok(())
}

impl fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ScheduleError::TooMany { requests } => write!(
                f,
                "{requests} event requests, but at most {MAX_REQUESTS} (one per counter) can be counted at once"
            ),
            ScheduleError::EventUnavailable {
                request,
                event,
                processor,
                model,
            } => write!(
                f,
                "{} does not exist on family 0Fh model {model}",
                Label(request, event, processor)
            ),
            ScheduleError::MissingCompanion {
                request,
                event,
                processor,
                needs,
            } => write!(
                f,
                "{} must be programmed together with {}, which is neither requested nor running",
                Label(request, event, processor),
                needs.name()
            ),
            ScheduleError::NoEscr {
                request,
                event,
                processor,
                excluded,
                absent,
                occupied,
            } => {
                write!(f, "{} has no usable ESCR", Label(request, event, processor))?;
                write_escr_reasons(f, excluded, absent, occupied)
            }
            ScheduleError::NoCounter {
                request,
                event,
                processor,
                escrs,
                counters,
            } => {
                write!(
                    f,
                    "{} has no free counter: ",
                    Label(request, event, processor)
                )?;
                write_list(f, escr_names(escrs), "and")?;
                f.write_str(" can only feed ")?;
                write_list(f, counter_names(counters), "and")?;
                write!(f, ", which {} occupied", is_are(counters.len()))
            }
            ScheduleError::Conflict(ref c) => write_conflict(f, c),
        }
    }
}

impl core::error::Error for ScheduleError {}

//! Exact NetBurst event scheduling: place a set of event requests on ESCRs
//! and counters so that every constraint holds, whenever that is possible,
//! and say precisely why when it is not.
//!
//! # The problem
//!
//! A request is an [`EventSpec`] plus the [`LogicalProcessor`] it counts for
//! ([`Request`]). Placing it means choosing an ESCR the event allows
//! ([`EventInfo::escrs`](super::EventInfo::escrs), SDM Vol. 3B Tables 19-28
//! and 19-29) that exists on the processor ([`Escr::available_on`]) and a
//! counter that ESCR feeds (SDM Table 18-63, [`Assignment::new`]).
//!
//! On Hyper-Threading parts both logical processors share every ESCR,
//! CCCR and counter; the ESCR's `T0_*`/`T1_*` flags and the CCCR's
//! `OVF_PMI_T0`/`OVF_PMI_T1` bits say whose events count and whom the
//! overflow interrupts (SDM 18.16). So the logical processor never restricts
//! *where* a request may go, and **each ESCR and each counter is used by at
//! most one request of the whole set**, whatever processors the requests
//! are for. Registers already claimed (by running counters of either
//! processor) are passed in as [`Occupied`] and avoided.
//!
//! # Structure that makes it easy
//!
//! Every ESCR feeds all the counters of one *group*: one side of one block
//! (SDM Table 18-63): BPU side 0 = counters 0, 1; BPU side 1 = 2, 3; MS 4, 5
//! / 6, 7; FLAME 8, 9 / 10, 11; IQ side 0 = 12, 13, 16 and IQ side 1 = 14,
//! 15, 17. Two ESCRs of the same group feed exactly the same counters, so
//! which counter of a group a request gets never matters, only how many
//! requests a group receives. The problem is therefore a flow problem:
//!
//! ```text
//! source --1--> request --> ESCR it may use --1--> its group --free counters--> sink
//! ```
//!
//! A placement of all requests is an integral flow of value n (one unit per
//! request; the ESCR -> group edge of capacity 1 makes each ESCR serve one
//! request; the group -> sink edge caps a group at its free counters), and
//! conversely every integral flow of value n is a placement (the requests a
//! group receives get its free counters in ascending order, so the PEBS
//! counters 16 and 17 are used last).
//!
//! # Algorithm and worst-case bound
//!
//! Requests are inserted one at a time, most constrained first (fewest
//! (ESCR, free counter) options, ties by index). Each insertion is a
//! breadth-first search for an augmenting path in the residual graph: from
//! the new request to an ESCR; a used ESCR leads on to the request using it
//! (which would move elsewhere), an unused one to its group; a group with a
//! free counter ends the path, a full group leads back to its used ESCRs
//! (one of their requests would move to another group). This is the
//! backtracking of an exact search, but with visited marks: every request,
//! ESCR and group is expanded at most once per insertion, so nothing is ever
//! explored twice and there is no exponential blow-up.
//!
//! Exactness: the flow over the already-placed requests is maximum, and the
//! only unsaturated source edge is the new request's, so by the max-flow /
//! augmenting-path theorem the placed requests plus the new one fit iff this
//! search finds a path. Feasibility is monotone (a subset of a feasible set
//! is feasible), so the first failed insertion proves the whole set
//! infeasible.
//!
//! Bound, with R <= 18 requests, 45 ESCRs, 8 groups: one search queues
//! each node at most once, so it expands at most R + 45 + 8 = 71 nodes and
//! scans at most sum(|ESCRs(r)|) + 2 * 45 + 45 edges (at most 2 ESCRs per
//! event in the catalog: <= 171 edges; <= 945 for arbitrary ESCR lists).
//! Applying a path costs O(path length) <= O(R). A call runs at most
//! R <= 18 searches, feasible or not: the explanation below comes for free
//! from the failing search. So a call costs O(R * (R * k + 45)) for k ESCRs
//! per event: a few thousand elementary steps at most. The test
//! `worst_case_work_is_bounded` counts the searches.
//!
//! # Explaining failure
//!
//! Single-request causes are reported first, in request order: an event the
//! model lacks ([`ScheduleError::EventUnavailable`]), a missing
//! `IOQ_allocation` companion ([`ScheduleError::MissingCompanion`]), no
//! usable ESCR ([`ScheduleError::NoEscr`]: none exists on this part, is
//! allowed by the request, or is free) and no free counter behind the free
//! ESCRs ([`ScheduleError::NoCounter`]).
//!
//! Otherwise requests compete, and [`ScheduleError::Conflict`] names a
//! *minimal* conflicting subset S -- the requests cannot all be placed, but
//! drop any one and the others fit -- and the registers they compete for.
//! Both come from the failed search of request u:
//!
//! * S is the set of requests the search reached, u included. Its cut
//!   (below) has capacity |S| - 1, so S does not fit (Hall's condition,
//!   violated by one). For any v in S other than u, the search found a
//!   residual path from u to v; shifting every request along it places u
//!   and frees v, so S without v fits; S without u fits as it was. So S is
//!   minimal, with no deletion filtering needed (the random tests confirm
//!   minimality against an exhaustive checker).
//! * The registers are the minimum cut the search stopped at: the used
//!   ESCRs it reached whose group it did not reach (each serves one
//!   request), and the free counters of the groups it reached (all full).
//!   Every placement of every member of S uses one of them, and there are
//!   exactly |S| - 1.
//!
//! # How this differs from Linux's `p4_pmu_schedule_events`
//!
//! (arch/x86/events/intel/p4.c; see `linux_p4_driver_notes.md`)
//!
//! * Linux is greedy first-fit in event-list order with no backtracking: an
//!   early event can take the only ESCR or counter a later one could use
//!   (e.g. `BSQ_cache_reference` on `BSU_ESCR0` before `BSQ_allocation`,
//!   which has only `BSU_ESCR0`). Here the search is exact.
//! * Linux partitions statically by thread: thread 0 uses the `*_ESCR0`
//!   side (and in the BPU block only counter 0), thread 1 the `*_ESCR1`
//!   side, so two events that share an ESCR pair can never be counted on
//!   the same thread (instructions and branch-misses both on `CRU_ESCR0`;
//!   cache-references and cache-misses both on `BSU_ESCR0`), and a non-HT
//!   CPU never uses half of its counters. Here either side serves either
//!   processor; the request's own side is only a preference.
//! * Linux keeps its used-counter and used-ESCR masks per logical CPU, so
//!   the single-ESCR events (`IOQ_active_entries` on `FSB_ESCR1`,
//!   `BSQ_allocation` on `BSU_ESCR0`, `BSQ_active_entries` on `BSU_ESCR1`)
//!   can be given the same physical ESCR -- and counter -- by both
//!   siblings (apparent bug 3 in the notes). Here one set spans both
//!   processors, and [`Occupied`] carries the sibling's claims.
//! * Linux's failure is `-EINVAL` for the whole set; here the error names
//!   the events and registers.
//!
//! # Constraints of the catalog
//!
//! | [`Constraint`] | effect on placement |
//! |---|---|
//! | `RequiresCompanion(e)` | enforced: `IOQ_active_entries` needs an `IOQ_allocation` request in the set or running ([`Occupied::with_running`]); either logical processor (the SDM names none) |
//! | `FsbEscr0OnlyBeforeF27` | enforced: on parts before CPUID signature F27H ([`Part::before_f27h`], model and stepping) the event may not use `FSB_ESCR1`; so `IOQ_active_entries` cannot be counted there. Like the catalog and the PMU model, this crate reads the SDM note as an event restriction, not as the MSR being absent |
//! | `DisputedEscrSelect` | none: placement is by ESCR and counter; the CCCR select to program is [`Assignment::select`] (below) |
//! | `AtRetirementEscr(e)` | only when the event is a replay-tagging upstream: [`Request::as_replay_upstream`] restricts it to `e` |
//! | `TagsFor`, `NeedsTagging` | none: tagging needs the upstream programmed too, but that is the set-up's business ([`super::tagging`]); an upstream that is requested is placed like any event |
//! | `CountsTwice`, `UseEdge`, `ClippedAt15` | none: they change what a count means, not where it is made |
//!
//! Model availability is enforced too: `instr_completed` only on models 3,
//! 4, 6 ([`Event::available_on`]); `IQ_ESCR0/1` only on models 1, 2 (no
//! catalog event uses them).
//!
//! Not modelled, and left to the caller through [`Occupied`]: a request
//! that needs one particular counter (PEBS on `IQ_COUNTER4`/`5`, the two
//! counters of a cascade) -- place it by hand and pass its registers as
//! occupied; and Linux's "broken CCCR1" (it avoids counter 1; no Intel
//! erratum for it was found, see `netburst_msrs.md`), which this scheduler
//! uses like any counter, only after counter 0 -- pass
//! `Occupied::NONE.with_counter(Counter::BpuCounter1)` to follow Linux.
//!
//! # CCCR select: routed by Table 18-63
//!
//! `b2b_cycles`, `bnr`, `snoop` and `response` carry CCCR select 3 in SDM
//! Table 19-28 (and in libpfm4, Linux, FreeBSD), but their ESCRs,
//! `FSB_ESCR0/1`, answer to select 6 in Table 18-63, where select 3 on
//! counters 0-3 is `ITLB_ESCR0/1` (see the table in [`super::events`]). The
//! scheduler's output is a routing, and Table 18-63 is the table of the
//! routing multiplexer; every other `FSB_ESCR` event uses 6 in Table 19-28
//! as well. So the scheduler routes by Table 18-63: program the CCCR with
//! [`Assignment::select`] ([`Request::cccr_value`] does), which for these
//! four events differs from [`EventInfo::escr_select`](super::EventInfo::escr_select)
//! and from libpfm4's CCCR image.
//!
//! # Cost
//!
//! No allocation, no recursion (the searches use fixed arrays), no panics:
//! more than [`MAX_REQUESTS`] requests is [`ScheduleError::TooMany`].
//! Deterministic: the result depends only on the arguments.
//!
//! `cargo bench --bench schedule` (median of 7 rounds), measured on a KVM
//! guest with 2 vCPUs of an AVX-512 "Intel Xeon Processor" at 2.0 GHz,
//! shared with other builds, 2026-11-21, over five runs:
//!
//! | set | ns per call |
//! |---|---|
//! | 4 events (cycles, instructions, cache misses, branch misses, one thread) | 180-280 |
//! | 18 events using all 18 counters | 760-1110 |
//! | 18 events, infeasible (7 IQ events for 6 IQ counters, found last), with the explanation | 810-1150 |
//!
//! # Example
//!
//! ```ignore
//! use pmu::arch::netburst::schedule::schedule;
//! use pmu::arch::netburst::{EventSpec, LogicalProcessor, Occupied, Part, Pmu, Request};
//! let spec = |s| EventSpec::parse(s, Pmu::Netburst).unwrap();
//! let requests = [
//!     Request::new(spec("instr_retired:NBOGUSNTAG"), LogicalProcessor::T0),
//!     Request::new(spec("mispred_branch_retired"), LogicalProcessor::T0),
//! ];
//! let s = schedule(Part::new(2, 9), &requests, Occupied::NONE)?;
//! for (r, a) in requests.iter().zip(s.as_slice()) {
//!     // write r.spec().escr_value() to a.escr(), clear a.counter(),
//!     // then r.cccr_value(*a) to a.cccr().
//! }
//! ```

use core::fmt;

use super::cccr::CccrValue;
use super::events::{Constraint, Event};
use super::msrs::{Assignment, Block, Counter, CounterSet, Escr, EscrSet};
use super::parse::EventSpec;
use super::thread::LogicalProcessor;
use crate::detect::CpuSignature;

#[cfg(test)]
mod tests;

/// The most requests one call places: one per counter.
pub const MAX_REQUESTS: usize = 18;

const ESCRS: usize = 45;
const GROUPS: usize = 8;
const NONE: u8 = u8::MAX;
const ALL_COUNTERS: u32 = (1 << 18) - 1;

// --------------------------------------------------------------------- Part

/// The processor a schedule is for: family 0Fh model and stepping
/// (CPUID.01H:EAX). The model decides which ESCRs and events exist; model
/// and stepping together decide the `FSB_ESCR1` rule of the IOQ events
/// ("before CPUID signature F27H", SDM Table 19-28).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Part {
    model: u8,
    stepping: u8,
}

impl Part {
    /// Family 0Fh, `model`, `stepping`. When the stepping is unknown, 0 is
    /// the conservative choice (a model-2 part is then taken to be older
    /// than F27H).
    pub const fn new(model: u8, stepping: u8) -> Part {
        Part { model, stepping }
    }

    /// The part of a family 0Fh signature; `None` for other families.
    pub const fn from_signature(sig: &CpuSignature) -> Option<Part> {
        if sig.family == 0xF {
            Some(Part::new(sig.model, sig.stepping))
        } else {
            None
        }
    }

    /// The model number.
    pub const fn model(self) -> u8 {
        self.model
    }

    /// The stepping.
    pub const fn stepping(self) -> u8 {
        self.stepping
    }

    /// Whether the CPUID signature is below F27H (family 0Fh, model 2,
    /// stepping 7): models 0 and 1, and model 2 steppings 0-6.
    pub const fn before_f27h(self) -> bool {
        self.model < 2 || (self.model == 2 && self.stepping < 7)
    }

    /// The ESCRs `event` may use on this part: its catalog ESCRs that exist
    /// here ([`Escr::available_on`]), without `FSB_ESCR1` for the
    /// [`Constraint::FsbEscr0OnlyBeforeF27`] events before F27H.
    pub fn escrs_for(self, event: Event) -> EscrSet {
        let info = event.info();
        let mut s = EscrSet::EMPTY;
        for &e in info.escrs {
            if e.available_on(self.model) {
                s = s.with(e);
            }
        }
        if self.before_f27h()
            && info
                .constraints
                .iter()
                .any(|c| matches!(c, Constraint::FsbEscr0OnlyBeforeF27))
        {
            s = s.difference(EscrSet::EMPTY.with(Escr::FsbEscr1));
        }
        s
    }
}

// ------------------------------------------------------------------ Request

/// One event to place: what to count, for which logical processor, and
/// optionally a restriction of the ESCRs it may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Request {
    spec: EventSpec,
    processor: LogicalProcessor,
    escrs: EscrSet,
}

impl Request {
    /// `spec`, counted for `processor`, on any ESCR its event allows.
    pub const fn new(spec: EventSpec, processor: LogicalProcessor) -> Request {
        Request {
            spec,
            processor,
            escrs: EscrSet::ALL,
        }
    }

    /// The same request, allowed only the ESCRs of `escrs` (on top of the
    /// event's own list).
    pub const fn restricted_to(mut self, escrs: EscrSet) -> Request {
        self.escrs = self.escrs.intersection(escrs);
        self
    }

    /// The same request used as a replay-tagging upstream event (at-retirement
    /// counting, SDM Table 19-33): restricted to the ESCR of the event's
    /// [`Constraint::AtRetirementEscr`] (`SAAT_ESCR1` for
    /// `load_port_replay`/`store_port_replay`); unchanged for other events.
    pub fn as_replay_upstream(self) -> Request {
        let mut r = self;
        for c in self.spec.event().info().constraints {
            if let Constraint::AtRetirementEscr(e) = *c {
                r = r.restricted_to(EscrSet::EMPTY.with(e));
            }
        }
        r
    }

    /// The event specification.
    pub const fn spec(&self) -> &EventSpec {
        &self.spec
    }

    /// The event.
    pub const fn event(&self) -> Event {
        self.spec.event()
    }

    /// The logical processor the request counts for.
    pub const fn processor(&self) -> LogicalProcessor {
        self.processor
    }

    /// The ESCRs the request allows ([`EscrSet::ALL`] unless restricted).
    pub const fn allowed_escrs(&self) -> EscrSet {
        self.escrs
    }

    /// The CCCR image for this request routed through `a`: the spec's CCCR
    /// with the ESCR select of Table 18-63 ([`Assignment::select`]), which
    /// differs from the catalog's for the `DisputedEscrSelect` events.
    pub fn cccr_value(&self, a: Assignment) -> CccrValue {
        self.spec.cccr_value().with_escr_select(a.select())
    }
}

// ----------------------------------------------------------------- Occupied

/// Registers already claimed, by either logical processor, that the
/// scheduler must leave alone, and the events running on them (they satisfy
/// [`Constraint::RequiresCompanion`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Occupied {
    escrs: EscrSet,
    counters: CounterSet,
    running: u64,
}

impl Occupied {
    /// Nothing occupied.
    pub const NONE: Occupied = Occupied {
        escrs: EscrSet::EMPTY,
        counters: CounterSet::EMPTY,
        running: 0,
    };

    /// Plus an occupied ESCR.
    pub const fn with_escr(mut self, e: Escr) -> Occupied {
        self.escrs = self.escrs.with(e);
        self
    }

    /// Plus an occupied counter (and so its CCCR).
    pub const fn with_counter(mut self, c: Counter) -> Occupied {
        self.counters = self.counters.with(c);
        self
    }

    /// Plus the ESCR and counter of `a`.
    pub const fn with_assignment(self, a: Assignment) -> Occupied {
        self.with_escr(a.escr()).with_counter(a.counter())
    }

    /// Plus `event` running on `a`.
    pub const fn with_running(mut self, a: Assignment, event: Event) -> Occupied {
        self.running |= 1 << event as u32;
        self.with_assignment(a)
    }

    /// Plus every request of a schedule, running on its assignment
    /// (`requests` as passed to [`schedule`] for `s`).
    pub fn with_schedule(self, s: &Schedule, requests: &[Request]) -> Occupied {
        s.as_slice()
            .iter()
            .zip(requests)
            .fold(self, |o, (a, r)| o.with_running(*a, r.event()))
    }

    /// The occupied ESCRs.
    pub const fn escrs(self) -> EscrSet {
        self.escrs
    }

    /// The occupied counters.
    pub const fn counters(self) -> CounterSet {
        self.counters
    }

    /// Whether `event` was declared running.
    pub const fn is_running(self, event: Event) -> bool {
        self.running & (1 << event as u32) != 0
    }
}

// ----------------------------------------------------------------- Schedule

/// A placement: request i is counted through `as_slice()[i]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Schedule {
    assignments: [Assignment; MAX_REQUESTS],
    len: u8,
}

/// Filler for the unused slots of a [`Schedule`] (never exposed).
const FILLER: Assignment = match Assignment::new(Escr::BsuEscr0, Counter::BpuCounter0) {
    Some(a) => a,
    None => panic!("BSU_ESCR0 feeds counter 0"),
};

impl Schedule {
    /// The assignments, one per request, in request order.
    pub fn as_slice(&self) -> &[Assignment] {
        &self.assignments[..self.len as usize]
    }

    /// The assignment of request `request`.
    pub fn get(&self, request: usize) -> Option<Assignment> {
        self.as_slice().get(request).copied()
    }

    /// Number of requests placed.
    pub const fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether there were no requests.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The ESCRs used.
    pub fn escrs(&self) -> EscrSet {
        self.as_slice()
            .iter()
            .fold(EscrSet::EMPTY, |s, a| s.with(a.escr()))
    }

    /// The counters used.
    pub fn counters(&self) -> CounterSet {
        self.as_slice()
            .iter()
            .fold(CounterSet::EMPTY, |s, a| s.with(a.counter()))
    }
}

// ------------------------------------------------------------------- errors

/// A minimal set of requests that compete for too few registers.
///
/// The members cannot all be placed together, but any one of them can be
/// dropped and the others fit. Every placement of every member uses one of
/// [`Conflict::escrs`] or one of [`Conflict::counters`], and there are
/// exactly `len() - 1` of those.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Conflict {
    requests: u32,
    events: [Event; MAX_REQUESTS],
    processors: [LogicalProcessor; MAX_REQUESTS],
    escrs: EscrSet,
    counters: CounterSet,
    occupied: bool,
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
    pub fn members(&self) -> impl Iterator<Item = (usize, Event, LogicalProcessor)> + Clone + '_ {
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
        event: Event,
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
        event: Event,
        /// Its logical processor.
        processor: LogicalProcessor,
        /// The event it needs.
        needs: Event,
    },
    /// None of the event's ESCRs is usable.
    NoEscr {
        /// Request index.
        request: usize,
        /// Its event.
        event: Event,
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
        event: Event,
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
struct Label(usize, Event, LogicalProcessor);

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
            ScheduleError::Conflict(ref c) => {
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
        }
    }
}

// ------------------------------------------------------------ the scheduler

/// The group (block side) an ESCR feeds: 2 * block + side.
const fn group_of(e: Escr) -> usize {
    let b = match e.block() {
        Block::Bpu => 0,
        Block::Ms => 1,
        Block::Flame => 2,
        Block::Iq => 3,
    };
    b * 2 + (e.side() & 1) as usize
}

/// Per ESCR (by index): its group.
const ESCR_GROUP: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < ESCRS {
        t[i] = group_of(Escr::ALL[i]) as u8;
        i += 1;
    }
    t
};

/// Per group: the ESCRs feeding it (bit mask).
const GROUP_ESCRS: [u64; GROUPS] = {
    let mut t = [0u64; GROUPS];
    let mut i = 0;
    while i < ESCRS {
        t[group_of(Escr::ALL[i])] |= 1 << i;
        i += 1;
    }
    t
};

/// Per group: its counters (bit mask). Every ESCR of the group feeds
/// exactly these (SDM Table 18-63; checked by a test).
const GROUP_COUNTERS: [u32; GROUPS] = {
    let mut t = [0u32; GROUPS];
    let mut i = 0;
    while i < ESCRS {
        t[group_of(Escr::ALL[i])] = Escr::ALL[i].counters().bits();
        i += 1;
    }
    t
};

/// Per logical processor: the ESCRs of its own side (tried first).
const SIDE_ESCRS: [u64; 2] = {
    let mut t = [0u64; 2];
    let mut i = 0;
    while i < ESCRS {
        t[(Escr::ALL[i].side() & 1) as usize] |= 1 << i;
        i += 1;
    }
    t
};

fn counter_set(bits: u32) -> CounterSet {
    Counter::ALL
        .into_iter()
        .filter(|c| bits & (1 << c.index()) != 0)
        .fold(CounterSet::EMPTY, CounterSet::with)
}

/// BFS node codes: request r (< 64), ESCR 64 + e, group 128 + g.
const ESCR_NODE: u8 = 64;
const GROUP_NODE: u8 = 128;
/// `escr_from` marker: reached backwards from group `g` (low bits).
const FROM_GROUP: u8 = 0x80;
/// Each node is queued at most once per search.
const QUEUE: usize = MAX_REQUESTS + ESCRS + GROUPS;

/// Appends `node` to the search queue (each node is queued at most once,
/// so the queue never fills).
fn push(queue: &mut [u8; QUEUE], tail: &mut usize, node: u8) {
    if let Some(slot) = queue.get_mut(*tail) {
        *slot = node;
        *tail += 1;
    }
}

/// The flow: which ESCR each request uses, who uses each ESCR, how many
/// requests each group receives.
#[derive(Clone, Copy)]
struct Flow {
    escr_of: [u8; MAX_REQUESTS],
    user_of: [u8; 64],
    load: [u8; GROUPS],
}

impl Flow {
    const EMPTY: Flow = Flow {
        escr_of: [NONE; MAX_REQUESTS],
        user_of: [NONE; 64],
        load: [0; GROUPS],
    };
}

/// What a failed search reached (bit masks).
#[derive(Clone, Copy, Default)]
struct Reach {
    requests: u32,
    escrs: u64,
    groups: u8,
}

/// The prepared instance: usable ESCRs per request, free counters per group.
struct Problem {
    n: usize,
    /// Free ESCRs the request may use whose group has a free counter.
    usable: [u64; MAX_REQUESTS],
    /// The part of `usable` on the request's own side.
    preferred: [u64; MAX_REQUESTS],
    /// ESCRs the request could use if nothing were occupied.
    existing: [u64; MAX_REQUESTS],
    free_counters: u32,
    cap: [u8; GROUPS],
    /// Insertion order: most constrained first.
    order: [u8; MAX_REQUESTS],
    /// Searches run (for the work-bound test).
    #[cfg(test)]
    searches: core::cell::Cell<u32>,
}

/// Places each request on an ESCR and a counter, or explains why that is
/// impossible. `occupied` registers are avoided. See the module docs.
pub fn schedule(
    part: Part,
    requests: &[Request],
    occupied: Occupied,
) -> Result<Schedule, ScheduleError> {
    Problem::new(part, requests, occupied)?.solve(requests, occupied)
}

impl Problem {
    /// Places every request, or explains the conflict.
    fn solve(&self, requests: &[Request], occupied: Occupied) -> Result<Schedule, ScheduleError> {
        let mut flow = Flow::EMPTY;
        if let Err(reach) = self.place(&mut flow) {
            let c = self.explain(requests, occupied, &flow, reach);
            return Err(ScheduleError::Conflict(c));
        }
        self.schedule(&flow)
    }

    fn new(part: Part, requests: &[Request], occupied: Occupied) -> Result<Problem, ScheduleError> {
        let n = requests.len();
        if n > MAX_REQUESTS {
            return Err(ScheduleError::TooMany { requests: n });
        }
        let free_counters = ALL_COUNTERS & !occupied.counters.bits();
        let mut cap = [0u8; GROUPS];
        for (g, c) in cap.iter_mut().enumerate() {
            *c = (GROUP_COUNTERS[g] & free_counters).count_ones() as u8;
        }
        let mut p = Problem {
            n,
            usable: [0; MAX_REQUESTS],
            preferred: [0; MAX_REQUESTS],
            existing: [0; MAX_REQUESTS],
            free_counters,
            cap,
            order: [0; MAX_REQUESTS],
            #[cfg(test)]
            searches: core::cell::Cell::new(0),
        };
        for (i, r) in requests.iter().enumerate() {
            let event = r.event();
            let processor = r.processor;
            if !event.available_on(part.model) {
                return Err(ScheduleError::EventUnavailable {
                    request: i,
                    event,
                    processor,
                    model: part.model,
                });
            }
            for c in event.info().constraints {
                if let Constraint::RequiresCompanion(needs) = *c {
                    let present = occupied.is_running(needs)
                        || requests
                            .iter()
                            .enumerate()
                            .any(|(j, o)| j != i && o.event() == needs);
                    if !present {
                        return Err(ScheduleError::MissingCompanion {
                            request: i,
                            event,
                            processor,
                            needs,
                        });
                    }
                }
            }
            let catalog = EscrSet::from_slice(event.info().escrs);
            let excluded = catalog.difference(r.escrs);
            let existing = catalog
                .intersection(r.escrs)
                .intersection(part.escrs_for(event));
            let absent = catalog.intersection(r.escrs).difference(existing);
            let busy = existing.intersection(occupied.escrs);
            let free = existing.difference(busy);
            if free.is_empty() {
                return Err(ScheduleError::NoEscr {
                    request: i,
                    event,
                    processor,
                    excluded,
                    absent,
                    occupied: busy,
                });
            }
            let mut usable = 0u64;
            let mut fed = 0u32;
            let mut m = free.bits();
            while m != 0 {
                let e = m.trailing_zeros() as usize;
                m &= m - 1;
                let g = ESCR_GROUP[e] as usize;
                fed |= GROUP_COUNTERS[g];
                if cap[g] > 0 {
                    usable |= 1 << e;
                }
            }
            if usable == 0 {
                return Err(ScheduleError::NoCounter {
                    request: i,
                    event,
                    processor,
                    escrs: free,
                    counters: counter_set(fed),
                });
            }
            let side = match processor {
                LogicalProcessor::T0 => 0,
                LogicalProcessor::T1 => 1,
            };
            p.usable[i] = usable;
            p.preferred[i] = usable & SIDE_ESCRS[side];
            p.existing[i] = existing.bits();
        }
        // Most constrained first: fewest (ESCR, free counter) options; a
        // stable insertion sort keeps ties in request order.
        let options = |r: usize| -> u32 {
            let mut m = p.usable[r];
            let mut k = 0;
            while m != 0 {
                let e = m.trailing_zeros() as usize;
                m &= m - 1;
                k += p.cap[ESCR_GROUP[e] as usize] as u32;
            }
            k
        };
        let mut key = [0u32; MAX_REQUESTS];
        for (r, k) in key.iter_mut().enumerate().take(n) {
            *k = options(r);
        }
        for i in 0..n {
            let mut j = i;
            while j > 0 && key[p.order[j - 1] as usize] > key[i] {
                p.order[j] = p.order[j - 1];
                j -= 1;
            }
            p.order[j] = i as u8;
        }
        Ok(p)
    }

    /// Places the requests one by one in `order`; on the first that does
    /// not fit, returns what its search reached (the flow is left as it
    /// was before that search).
    fn place(&self, flow: &mut Flow) -> Result<(), Reach> {
        for &r in &self.order[..self.n] {
            self.augment(flow, r as usize)?;
        }
        Ok(())
    }

    /// One breadth-first search for an augmenting path from request
    /// `start` (not yet placed); applies it if found.
    fn augment(&self, flow: &mut Flow, start: usize) -> Result<(), Reach> {
        #[cfg(test)]
        self.searches.set(self.searches.get() + 1);
        let mut reach = Reach {
            requests: 1 << start,
            ..Reach::default()
        };
        // How each ESCR was reached: from request r (forward) or from group
        // g (FROM_GROUP | g, backward); how each group was reached: from
        // an unused ESCR.
        let mut escr_from = [NONE; 64];
        let mut group_from = [NONE; GROUPS];
        let mut queue = [0u8; QUEUE];
        let mut tail = 0;
        push(&mut queue, &mut tail, start as u8);
        let mut head = 0;
        while head < tail {
            let node = queue[head];
            head += 1;
            if node < ESCR_NODE {
                // A request: to each ESCR it may use, own side first.
                let r = node as usize;
                for cands in [self.preferred[r], self.usable[r] & !self.preferred[r]] {
                    let mut m = cands & !reach.escrs;
                    while m != 0 {
                        let e = m.trailing_zeros() as usize;
                        m &= m - 1;
                        reach.escrs |= 1 << e;
                        escr_from[e] = r as u8;
                        push(&mut queue, &mut tail, ESCR_NODE + e as u8);
                    }
                }
            } else if node < GROUP_NODE {
                let e = (node - ESCR_NODE) as usize;
                let user = flow.user_of[e];
                if user != NONE {
                    // Used: its request would have to move.
                    if reach.requests & (1 << user) == 0 {
                        reach.requests |= 1 << user;
                        push(&mut queue, &mut tail, user);
                    }
                } else {
                    // Unused: on to its group.
                    let g = ESCR_GROUP[e] as usize;
                    if reach.groups & (1 << g) == 0 {
                        reach.groups |= 1 << g;
                        group_from[g] = e as u8;
                        if flow.load[g] < self.cap[g] {
                            return if self.apply(flow, start, g, &escr_from, &group_from) {
                                Ok(())
                            } else {
                                Err(reach)
                            };
                        }
                        push(&mut queue, &mut tail, GROUP_NODE + g as u8);
                    }
                }
            } else {
                // A full group: one of its requests would have to leave.
                let g = (node - GROUP_NODE) as usize & (GROUPS - 1);
                let mut m = GROUP_ESCRS[g] & !reach.escrs;
                while m != 0 {
                    let e = m.trailing_zeros() as usize;
                    m &= m - 1;
                    if flow.user_of[e] != NONE {
                        reach.escrs |= 1 << e;
                        escr_from[e] = FROM_GROUP | g as u8;
                        push(&mut queue, &mut tail, ESCR_NODE + e as u8);
                    }
                }
            }
        }
        Err(reach)
    }

    /// Follows the search tree back from group `g` (which has a free
    /// counter) to `start`, moving every request on the path to its new
    /// ESCR. Each step back either reaches a request or passes a group, all
    /// distinct, so the walk is bounded; `false` (never expected) if it
    /// does not reach `start`, with the flow unchanged.
    fn apply(
        &self,
        flow: &mut Flow,
        start: usize,
        g: usize,
        escr_from: &[u8; 64],
        group_from: &[u8; GROUPS],
    ) -> bool {
        let mut moves = [(NONE, NONE); MAX_REQUESTS];
        let mut k = 0;
        let mut e = group_from[g];
        let mut reached = false;
        for _ in 0..MAX_REQUESTS + GROUPS + 1 {
            let Some(&from) = escr_from.get(e as usize) else {
                break;
            };
            if from == NONE {
                break;
            }
            if from & FROM_GROUP != 0 {
                e = group_from[(from & !FROM_GROUP) as usize & (GROUPS - 1)];
                continue;
            }
            let r = from as usize;
            let Some(slot) = moves.get_mut(k) else { break };
            *slot = (from, e);
            k += 1;
            if r == start {
                reached = true;
                break;
            }
            e = flow.escr_of[r];
        }
        if !reached {
            return false;
        }
        // Vacate first (a vacated ESCR may be taken again on the path),
        // then occupy: O(path length).
        for &(r, _) in &moves[..k] {
            let old = flow.escr_of[r as usize];
            if old != NONE {
                flow.user_of[old as usize] = NONE;
                let g = ESCR_GROUP[old as usize] as usize;
                flow.load[g] = flow.load[g].saturating_sub(1);
            }
        }
        for &(r, e) in &moves[..k] {
            flow.escr_of[r as usize] = e;
            flow.user_of[e as usize] = r;
            flow.load[ESCR_GROUP[e as usize] as usize] += 1;
        }
        true
    }

    /// Counters for a complete flow: each group's free counters in
    /// ascending order (so 16 and 17, the PEBS counters, last), to its
    /// requests in request order.
    fn schedule(&self, flow: &Flow) -> Result<Schedule, ScheduleError> {
        let mut out = Schedule {
            assignments: [FILLER; MAX_REQUESTS],
            len: self.n as u8,
        };
        let mut taken = 0u32;
        for r in 0..self.n {
            let e = flow.escr_of[r] as usize;
            let g = ESCR_GROUP[e & 63] as usize;
            let avail = GROUP_COUNTERS[g] & self.free_counters & !taken;
            let placed = Escr::ALL
                .get(e)
                .zip(Counter::from_index(avail.trailing_zeros() as u8));
            match placed.and_then(|(e, c)| Assignment::new(*e, c)) {
                Some(a) => {
                    taken |= 1 << a.counter().index();
                    out.assignments[r] = a;
                }
                // Unreachable: a complete flow gives every request an ESCR
                // and no group more requests than free counters. Reported
                // rather than panicking.
                None => return Err(ScheduleError::TooMany { requests: self.n }),
            }
        }
        Ok(out)
    }

    /// The conflict a failed search proves: the requests it reached (with
    /// the new one) and the cut it stopped at (module docs).
    fn explain(
        &self,
        requests: &[Request],
        occupied: Occupied,
        flow: &Flow,
        reach: Reach,
    ) -> Conflict {
        let set = reach.requests;
        // Cut: used ESCRs reached whose group was not (an unused ESCR
        // always leads on to its group), and the free counters of the
        // (full) groups reached.
        let (mut escrs, mut counters) = (0u64, 0u32);
        let mut m = reach.escrs;
        while m != 0 {
            let e = m.trailing_zeros() as usize;
            m &= m - 1;
            let g = ESCR_GROUP[e];
            if flow.user_of[e] != NONE && reach.groups & (1 << g) == 0 {
                escrs |= 1 << e;
            }
        }
        for (g, &c) in GROUP_COUNTERS.iter().enumerate() {
            if reach.groups & (1 << g) != 0 {
                counters |= c & self.free_counters;
            }
        }
        let mut c = Conflict {
            requests: set,
            events: [Event::ALL[0]; MAX_REQUESTS],
            processors: [LogicalProcessor::T0; MAX_REQUESTS],
            escrs: EscrSet::from_bits_truncate(escrs),
            counters: counter_set(counters),
            occupied: false,
        };
        for (i, r) in requests.iter().enumerate().take(self.n) {
            if set & (1 << i) != 0 {
                c.events[i] = r.event();
                c.processors[i] = r.processor;
                let mut fed = 0u32;
                for e in EscrSet::from_bits_truncate(self.existing[i]).iter() {
                    fed |= GROUP_COUNTERS[group_of(e)];
                }
                c.occupied |= self.existing[i] & occupied.escrs.bits() != 0
                    || fed & occupied.counters.bits() != 0;
            }
        }
        c
    }
}

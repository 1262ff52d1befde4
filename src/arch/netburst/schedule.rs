//! Exact NetBurst event scheduling: place a set of event requests on ESCRs
//! and counters so that every constraint holds, whenever that is possible,
//! and say precisely why when it is not.
//!
//! Files: this one has the requests, parts, occupied registers, the
//! resulting schedule and [`schedule`]; `flow.rs` the search; `error.rs`
//! the conflict explanation; `tests.rs` the tests.
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
//! (arch/x86/events/intel/p4.c)
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
//!   siblings (an apparent bug, found by reading `p4.c`). Here one set
//!   spans both processors, and [`Occupied`] carries the sibling's claims.
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
//! | `TagsFor`, `NeedsTagging` | none: tagging needs the upstream programmed too, but that is the set-up's business ([`super::TaggingPlan`]); an upstream that is requested is placed like any event |
//! | `CountsTwice`, `UseEdge`, `ClippedAt15` | none: they change what a count means, not where it is made |
//!
//! Model availability is enforced too: `instr_completed` only on models 3,
//! 4, 6 ([`EventName::available_on`]); `IQ_ESCR0/1` only on models 1, 2 (no
//! catalog event uses them).
//!
//! Not modelled, and left to the caller through [`Occupied`]: a request
//! that needs one particular counter (PEBS on `IQ_COUNTER4`/`5`, the two
//! counters of a cascade) -- place it by hand and pass its registers as
//! occupied; and Linux's "broken CCCR1" (it avoids counter 1 after a comment
//! in `asm/perf_event_p4.h`; no Intel erratum for it was found), which this
//! scheduler uses like any counter, only after counter 0 -- pass
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
//! ```
//! use pmu::arch::netburst::schedule::schedule;
//! use pmu::arch::netburst::{EventSpec, LogicalProcessor, Occupied, Part, Pmu, Request};
//! let spec = |s| EventSpec::parse(s, Pmu::Netburst).unwrap();
//! let requests = [
//!     Request::new(spec("instr_retired:NBOGUSNTAG"), LogicalProcessor::T0),
//!     Request::new(spec("mispred_branch_retired"), LogicalProcessor::T0),
//! ];
//! // Linux's first-fit refuses this pair; the exact search places both.
//! let s = schedule(Part::new(2, 9), &requests, Occupied::NONE)?;
//! assert_eq!(s.as_slice().len(), 2);
//! assert_ne!(s.as_slice()[0].escr(), s.as_slice()[1].escr());
//! # Ok::<(), pmu::arch::netburst::ScheduleError>(())
//! ```

use super::cccr::CccrValue;
use super::events::{Constraint, EventName};
use super::msrs::{Assignment, Counter, CounterSet, Escr, EscrSet};
use super::parse::EventSpec;
use super::thread::LogicalProcessor;
use crate::detect::CpuSignature;

mod error;
mod flow;
#[cfg(test)]
mod tests;

pub use error::{Conflict, ScheduleError};
use flow::Problem;
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
    pub fn escrs_for(self, event: EventName) -> EscrSet {
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
    pub const fn event(&self) -> EventName {
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

    /// Plus the ESCRs and counters in `escrs` and `counters` (claims made
    /// elsewhere, such as [`super::driver::NetBurstDriver::occupied`]).
    pub const fn with_claims(mut self, escrs: EscrSet, counters: CounterSet) -> Occupied {
        self.escrs = EscrSet::from_bits_truncate(self.escrs.bits() | escrs.bits());
        self.counters = CounterSet::from_bits_truncate(self.counters.bits() | counters.bits());
        self
    }

    /// Plus the ESCR and counter of `a`.
    pub const fn with_assignment(self, a: Assignment) -> Occupied {
        self.with_escr(a.escr()).with_counter(a.counter())
    }

    /// Plus `event` running on `a`.
    pub const fn with_running(mut self, a: Assignment, event: EventName) -> Occupied {
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
    pub const fn is_running(self, event: EventName) -> bool {
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

/// Places each request on an ESCR and a counter, or explains why that is
/// impossible. `occupied` registers are avoided. See the module docs.
pub fn schedule(
    part: Part,
    requests: &[Request],
    occupied: Occupied,
) -> Result<Schedule, ScheduleError> {
    Problem::new(part, requests, occupied)?.solve(requests, occupied)
}

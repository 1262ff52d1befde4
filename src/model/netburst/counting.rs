//! Counting semantics: which injected events a counter sees, thread and
//! privilege qualification (SDM Tables 18-29 and 18-30), the CCCR
//! active-thread field, and the compare/complement/threshold/edge filter
//! (SDM 18.15.3, 18.16.2).

use super::registers::{LogicalProcessor, NetBurstModel, ThreadState};
use super::tables::{self, EscrGroup, Specificity, cccr, escr};
use bit_field::BitField;

/// The privilege level an event occurs at: the driver's vocabulary type.
pub use crate::arch::ia32::Privilege;

/// Which event occurred, as an ESCR would select it: the functional unit
/// (ESCR group), the event select and the event-mask bits that describe the
/// occurrence (SDM mask bit `n` is ESCR bit `9 + n`). An ESCR matches when
/// its group and event select are equal and its event mask shares a bit with
/// `mask`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EventKind {
    /// The functional unit whose ESCRs see the event.
    pub group: EscrGroup,
    /// Event select (ESCR bits 30:25).
    pub select: u8,
    /// Event-mask bits of the occurrence (ESCR bits 24:9, shifted down).
    pub mask: u16,
}

impl EventKind {
    /// An event kind.
    pub const fn new(group: EscrGroup, select: u8, mask: u16) -> Self {
        Self {
            group,
            select,
            mask,
        }
    }

    /// The occurrence that an ESCR programmed from `spec` at `escr` counts:
    /// the ESCR's functional unit from the model's own table of SDM Table
    /// 18-63 (by MSR address), the event select and every event-mask bit
    /// of the spec's ESCR image. `None` if the model has no ESCR at that
    /// address. This reads only the spec's image, not the driver's
    /// placement rules, so a test that injects it still checks the driver.
    pub fn for_spec(
        spec: &crate::arch::netburst::EventSpec,
        escr: crate::arch::netburst::Escr,
    ) -> Option<Self> {
        let group = tables::ESCR_TABLE[tables::escr_index(escr.msr())?].group;
        let image = spec.escr_value().bits();
        Some(Self::new(
            group,
            image.get_bits(escr::EVENT_SELECT) as u8,
            image.get_bits(escr::EVENT_MASK) as u16,
        ))
    }

    /// `count` occurrences of this event on `thread` at `privilege`.
    pub const fn on(self, thread: LogicalProcessor, privilege: Privilege, count: u64) -> Event {
        Event {
            kind: self,
            thread,
            privilege,
            count,
        }
    }
}

/// Occurrences of an event on a logical processor at a privilege level.
///
/// For [`NetBurstModel::cycle`], `count` is how many occurrences happen in
/// that one clock (the counter input sums them, clipped to 15: the counter
/// sees at most a 4-bit increment per clock). For [`NetBurstModel::inject`],
/// `count` occurrences happen in `count` consecutive clocks, one per clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Event {
    /// Which event.
    pub kind: EventKind,
    /// The logical processor it occurred on. For a TI event this is one
    /// logical processor in the given privilege state (Table 18-30).
    pub thread: LogicalProcessor,
    /// The privilege level of that logical processor when it occurred.
    pub privilege: Privilege,
    /// How many occurrences.
    pub count: u64,
}

/// The largest per-clock input a counter can see (four 1-bit event lines
/// summed into a 4-bit value, SDM 18.15.3).
pub const MAX_INPUT_PER_CYCLE: u64 = 15;

/// How one counter increments in each clock of a run of identical clocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Increment {
    /// Increment in the first clock of the run.
    pub first: u64,
    /// Increment in each later clock.
    pub later: u64,
    /// The threshold-comparator output after the run (for EDGE).
    pub output: bool,
}

impl NetBurstModel {
    /// Sets the state of logical processor `lp` (active, privilege). Without
    /// Hyper-Threading T1 stays inactive whatever is asked.
    pub fn set_thread_state(&mut self, lp: LogicalProcessor, state: ThreadState) {
        let exists = lp == LogicalProcessor::T0 || self.config.hyper_threading;
        self.threads[lp.index()] = if exists {
            state
        } else {
            ThreadState::new(false)
        };
    }

    /// The state of logical processor `lp`.
    pub fn thread_state(&self, lp: LogicalProcessor) -> ThreadState {
        self.threads[lp.index()]
    }

    /// The [`tables::ESCR_TABLE`] index of the ESCR that counter `c`'s CCCR
    /// selects, if that ESCR exists on this model.
    pub(super) fn selected_escr(&self, c: usize) -> Option<usize> {
        let select = self.cccrs[c].get_bits(cccr::ESCR_SELECT) as u8;
        tables::selected_escr(c, select).filter(|&i| self.config.has_escr(i))
    }

    /// Whether the ESCR value `escr_value` at table index `i` selects `kind`.
    pub(super) fn escr_matches(&self, i: usize, escr_value: u64, kind: &EventKind) -> bool {
        let info = &tables::ESCR_TABLE[i];
        let select = escr_value.get_bits(escr::EVENT_SELECT) as u8;
        let mask = escr_value.get_bits(escr::EVENT_MASK);
        info.group == kind.group
            && select == kind.select
            && mask & u64::from(kind.mask) != 0
            && tables::side_allows(kind.group, kind.select, info.side)
    }

    /// Whether the T0_OS/T0_USR/T1_OS/T1_USR bits of `escr_value` admit an
    /// occurrence of `kind` on `thread` at `privilege`: SDM Table 18-29 for
    /// TS events (only the bits of the thread it occurred on matter), Table
    /// 18-30 for TI events (the OS bits of both threads together select "some
    /// logical processor at CPL 0", the USR bits "some logical processor at
    /// CPL > 0"; the other logical processor is taken in its current state).
    pub(super) fn privilege_admits(
        &self,
        escr_value: u64,
        kind: &EventKind,
        thread: LogicalProcessor,
        privilege: Privilege,
    ) -> bool {
        let ht = self.config.hyper_threading;
        if !ht && thread == LogicalProcessor::T1 {
            return false;
        }
        let bit = |t: LogicalProcessor, p: Privilege| match (t, p) {
            (LogicalProcessor::T0, Privilege::Os) => escr::T0_OS,
            (LogicalProcessor::T0, Privilege::Usr) => escr::T0_USR,
            (LogicalProcessor::T1, Privilege::Os) => escr::T1_OS,
            (LogicalProcessor::T1, Privilege::Usr) => escr::T1_USR,
        };
        match tables::specificity(kind.group, kind.select) {
            // The model's table lists every event TS or TI (Table 19-34);
            // an unlisted one would be qualified per thread, as TS.
            Specificity::ThreadSpecific | Specificity::Unlisted => {
                escr_value & bit(thread, privilege) != 0
            }
            Specificity::ThreadIndependent => {
                let os = escr_value & (escr::T0_OS | escr::T1_OS) != 0;
                let usr = escr_value & (escr::T0_USR | escr::T1_USR) != 0;
                let other = self.threads[thread.other().index()];
                let some_thread_in =
                    |p: Privilege| privilege == p || (ht && other.active && other.privilege == p);
                if os && usr {
                    // "Counts irrespective of CPL, T0, T1".
                    return true;
                }
                (os && some_thread_in(Privilege::Os)) || (usr && some_thread_in(Privilege::Usr))
            }
        }
    }

    /// The CCCR active-thread field (SDM 18.16.2): 00 count when no logical
    /// processor is active, 01 when exactly one is, 10 when both are, 11 when
    /// at least one is. (On non-HT parts the field must be 11b.)
    pub(super) fn active_thread_admits(&self, c: usize) -> bool {
        let active = self.threads.iter().filter(|t| t.active).count();
        match self.cccrs[c].get_bits(cccr::ACTIVE_THREAD) {
            0 => active == 0,
            1 => active == 1,
            2 => active == 2,
            _ => active >= 1,
        }
    }

    /// The raw per-clock input of counter `c` (before the CCCR filter) for a
    /// clock in which `events` occur, or `None` when the counter's selected
    /// ESCR is missing or has event select 0 (SDM 18.15.5.9: such a counter
    /// counts nothing). With `one_per_event`, each matching event contributes
    /// 1 (bulk injection: one occurrence per clock).
    pub(super) fn counter_input(
        &self,
        c: usize,
        events: &[Event],
        one_per_event: bool,
    ) -> Option<u64> {
        let i = self.selected_escr(c)?;
        let value = self.escrs[i];
        if value.get_bits(escr::EVENT_SELECT) == 0 {
            return None;
        }
        let mut input = 0u64;
        for e in events {
            if e.count > 0
                && self.escr_matches(i, value, &e.kind)
                && self.privilege_admits(value, &e.kind, e.thread, e.privilege)
            {
                input = input.saturating_add(if one_per_event { 1 } else { e.count });
            }
        }
        Some(input.min(MAX_INPUT_PER_CYCLE))
    }

    /// The CCCR filter (SDM 18.15.3, 18.15.5.2) for a run of clocks that all
    /// have counter input `input`: without COMPARE the counter adds the
    /// input; with COMPARE it adds 1 in a clock whose input is above
    /// THRESHOLD (or, with COMPLEMENT, at most THRESHOLD); with EDGE as well,
    /// only in a clock where that comparison becomes true after being false.
    pub(super) fn filter(&self, c: usize, input: Option<u64>) -> Increment {
        let v = self.cccrs[c];
        let Some(input) = input else {
            return Increment::default();
        };
        if !self.active_thread_admits(c) {
            return Increment::default();
        }
        if v & cccr::COMPARE == 0 {
            return Increment {
                first: input,
                later: input,
                output: false,
            };
        }
        let threshold = v.get_bits(cccr::THRESHOLD);
        let out = if v & cccr::COMPLEMENT != 0 {
            input <= threshold
        } else {
            input > threshold
        };
        if v & cccr::EDGE != 0 {
            Increment {
                first: u64::from(out && !self.edge_prev[c]),
                later: 0,
                output: out,
            }
        } else {
            Increment {
                first: u64::from(out),
                later: u64::from(out),
                output: out,
            }
        }
    }

    /// One clock in which `events` occur (each with `count` occurrences in
    /// this clock). Use this form to exercise THRESHOLD, COMPLEMENT and EDGE.
    pub fn cycle(&mut self, events: &[Event]) {
        self.run(events, false, 1);
    }

    /// `event.count` occurrences of `event`, one per clock, in
    /// `event.count` consecutive clocks (so a counter set up to count clocks,
    /// e.g. COMPARE + COMPLEMENT + THRESHOLD 15, advances by `event.count`).
    pub fn inject(&mut self, event: Event) {
        let cycles = event.count;
        self.run(&[event], true, cycles);
    }

    /// `cycles` clocks in which no event occurs.
    pub fn idle(&mut self, cycles: u64) {
        self.run(&[], true, cycles);
    }
}

//! Advancing the counters: 40-bit wrap and the sticky OVF flag, FORCE_OVF,
//! OVF_PMI_T0/T1 and the per-logical-processor PMI lines, cascading (SDM
//! 18.15.5.5-18.15.5.8) and the PEBS assist hook.

use super::counting::{Event, Increment};
use super::registers::{LogicalProcessor, NetBurstModel, PmiLine};
use super::tables::{self, COUNTER_BITS, COUNTER_MASK, COUNTERS, cccr};

impl NetBurstModel {
    /// Whether counter `c` counts now: without CASCADE (and without the
    /// extended-cascade bit) while its CCCR ENABLE is set; with CASCADE while
    /// the alternate counter's OVF is set (and likewise for the extended
    /// cascade bit and its source counter). Clearing CASCADE or the
    /// alternate's OVF halts a cascaded counter (SDM 18.15.5.5).
    pub fn is_counting(&self, c: usize) -> bool {
        let Some(&v) = self.cccrs.get(c) else {
            return false;
        };
        let cascade = v & cccr::CASCADE != 0;
        let extended = v & cccr::EXTENDED_CASCADE != 0;
        if !cascade && !extended {
            return v & cccr::ENABLE != 0;
        }
        let ovf = |n: usize| self.cccrs[n] & cccr::OVF != 0;
        (cascade && ovf(usize::from(tables::CASCADE_ALTERNATE[c])))
            || (extended && tables::extended_cascade_source(c).is_some_and(ovf))
    }

    /// How many occurrences of events the model can count from now without
    /// raising a PMI, whatever events they are (`u64::MAX`: no PMI source),
    /// so that a driver of the model can inject that many in one call and
    /// stop exactly where a PMI may come: every counter whose CCCR has
    /// `OVF_PMI_T0` or `OVF_PMI_T1` needs `2^40 - value` increments to wrap,
    /// one increment at most per occurrence, and raises the PMI on the
    /// increment after (SDM 18.15.5.8), [`skid`](Self::set_skid) increments
    /// later still; one whose PMI is due raises it with the last increment
    /// still owed; with its `OVF` or `FORCE_OVF` set and no PMI due, or PEBS
    /// enabled for either logical processor (an assist may interrupt with
    /// any occurrence), the next occurrence may raise it: 0.
    pub fn events_without_pmi(&self) -> u64 {
        if self.pebs_enable & (tables::pebs_enable::MY_THR | tables::pebs_enable::OTH_THR) != 0 {
            return 0;
        }
        (0..COUNTERS)
            .filter(|&c| self.cccrs[c] & (cccr::OVF_PMI_T0 | cccr::OVF_PMI_T1) != 0)
            .map(|c| match self.pmi_due[c] {
                Some(owed) => owed - 1,
                None if self.cccrs[c] & (cccr::OVF | cccr::FORCE_OVF) != 0 => 0,
                None => ((1u64 << COUNTER_BITS) - self.counters[c]).saturating_add(self.skid),
            })
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Sets the PMI skid: with `events` = 0 (the default) a counter's PMI
    /// rises with its first increment after the clock in which it
    /// overflowed (SDM 18.15.5.8: "on the next event count after the counter
    /// has overflowed"); otherwise with its `1 + events`-th, as a real
    /// processor's PMI comes some events after the overflow that caused it.
    /// An overflow of a counter whose PMI is already due joins it (one PMI
    /// line per logical processor); an overflow in or after the clock in
    /// which the PMI rises owes a PMI of its own (with `FORCE_OVF`, where
    /// every increment overflows, a PMI every `1 + events` increments).
    /// Clearing the counter's `OVF` (or both its `OVF_PMI` bits) withdraws
    /// a PMI still due, as without skid.
    pub fn set_skid(&mut self, events: u64) {
        self.skid = events;
    }

    /// The PMI skid (see [`set_skid`](Self::set_skid)).
    pub const fn skid(&self) -> u64 {
        self.skid
    }

    /// Whether a PMI is pending on logical processor `lp`.
    pub fn pmi_pending(&self, lp: LogicalProcessor) -> bool {
        self.pmi[lp.index()].pending
    }

    /// Takes (acknowledges) the PMI of logical processor `lp`: returns what
    /// raised it and lowers the line, or `None` if none is pending.
    pub fn take_pmi(&mut self, lp: LogicalProcessor) -> Option<PmiLine> {
        let line = core::mem::replace(&mut self.pmi[lp.index()], PmiLine::NONE);
        line.pending.then_some(line)
    }

    pub(super) fn raise_pmi(&mut self, t: usize, counter: Option<usize>) {
        let line = &mut self.pmi[t];
        line.pending = true;
        match counter {
            Some(c) => line.counters |= 1 << c,
            None => line.pebs_threshold = true,
        }
    }

    /// Raises the PMI of every logical processor whose OVF_PMI bit counter
    /// `c` has.
    fn raise_counter_pmi(&mut self, c: usize) {
        let v = self.cccrs[c];
        if v & cccr::OVF_PMI_T0 != 0 {
            self.raise_pmi(0, Some(c));
        }
        if self.config.hyper_threading && v & cccr::OVF_PMI_T1 != 0 {
            self.raise_pmi(1, Some(c));
        }
    }

    /// Runs `cycles` identical clocks in which `events` occur.
    pub(super) fn run(&mut self, events: &[Event], one_per_event: bool, cycles: u64) {
        // Each counter's input, computed when it first counts in this run
        // (most counters are stopped; a cascade may start one part way).
        let mut inputs: [Option<Option<u64>>; COUNTERS] = [None; COUNTERS];
        let mut remaining = cycles;
        while remaining > 0 {
            // Which counters run, and by how much, is fixed until some OVF
            // flag goes from 0 to 1 (a cascade may start) or a PEBS assist
            // reloads a counter: run up to the first such clock.
            let mut running = [false; COUNTERS];
            let mut incs = [Increment::default(); COUNTERS];
            let mut step = remaining;
            for c in 0..COUNTERS {
                running[c] = self.is_counting(c);
                if running[c] {
                    let input = *inputs[c]
                        .get_or_insert_with(|| self.counter_input(c, events, one_per_event));
                    incs[c] = self.filter(c, input);
                    if let Some(k) = self.cycles_to_state_change(c, incs[c]) {
                        step = step.min(k);
                    }
                }
            }
            for c in 0..COUNTERS {
                if running[c] {
                    self.advance(c, incs[c], step);
                }
                self.edge_prev[c] = running[c] && incs[c].output;
            }
            remaining -= step;
        }
    }

    /// The first clock (1-based) of the run in which counter `c` changes
    /// anything beyond its count: its OVF goes from 0 to 1, or a PEBS counter
    /// overflows or takes its assist.
    fn cycles_to_state_change(&self, c: usize, inc: Increment) -> Option<u64> {
        let first_increment = if inc.first > 0 {
            Some(1)
        } else if inc.later > 0 {
            Some(2)
        } else {
            None
        };
        let pebs = self.pebs_thread_of(c);
        if pebs.is_some_and(|t| self.pebs[t].armed) {
            return first_increment;
        }
        if self.cccrs[c] & cccr::OVF != 0 && pebs.is_none() {
            return None;
        }
        if self.cccrs[c] & cccr::FORCE_OVF != 0 {
            return first_increment;
        }
        let need = (1u64 << COUNTER_BITS) - self.counters[c];
        if inc.first >= need {
            Some(1)
        } else if inc.later == 0 {
            None
        } else {
            Some(1 + (need - inc.first).div_ceil(inc.later))
        }
    }

    /// Advances counter `c` by `s` clocks of increment `inc`.
    fn advance(&mut self, c: usize, inc: Increment, s: u64) {
        let later_cycles = if inc.later > 0 { s - 1 } else { 0 };
        let incrementing = u64::from(inc.first > 0) + later_cycles;
        if incrementing == 0 {
            return;
        }
        // A PEBS counter's next at-retirement event after its overflow takes
        // the PEBS assist instead (which reloads the counter).
        if let Some(t) = self.pebs_thread_of(c)
            && self.pebs[t].armed
            && self.pebs_assist(c, t)
        {
            return;
        }
        let total = u128::from(inc.first) + u128::from(inc.later) * u128::from(later_cycles);
        let before = self.counters[c];
        let sum = u128::from(before) + total;
        let wraps = sum >> COUNTER_BITS;
        self.counters[c] = (sum as u64) & COUNTER_MASK;
        let force = self.cccrs[c] & cccr::FORCE_OVF != 0;
        // "The PMI is generated on the next event count after the counter has
        // overflowed" (SDM 18.15.5.8), the skid later still.
        if self.cccrs[c] & (cccr::OVF_PMI_T0 | cccr::OVF_PMI_T1) != 0 {
            let step = Step {
                first: u128::from(inc.first),
                later: if later_cycles > 0 {
                    u128::from(inc.later)
                } else {
                    0
                },
                clocks: 1 + u128::from(later_cycles),
            };
            let wrap = Wraps {
                force,
                first: (1u128 << COUNTER_BITS) - u128::from(before),
            };
            let (raised, due) = pmi_over(step, wrap, self.pmi_due[c], self.skid);
            self.pmi_due[c] = due;
            if raised {
                self.raise_counter_pmi(c);
            }
        } else {
            self.pmi_due[c] = None;
        }
        if wraps == 0 && !force {
            return;
        }
        self.cccrs[c] |= cccr::OVF;
        if let Some(t) = self.pebs_thread_of(c) {
            self.pebs[t].armed = true;
        }
    }
}

/// One run of identical clocks as one counter sees it: `first` increments
/// in clock 1, `later` in each of clocks 2 to `clocks`.
#[derive(Clone, Copy)]
struct Step {
    first: u128,
    later: u128,
    clocks: u128,
}

impl Step {
    /// The counter's increments in clocks 1 to `j`.
    const fn through(self, j: u128) -> u128 {
        if j == 0 {
            0
        } else {
            self.first + (j - 1) * self.later
        }
    }

    /// The clock (1-based) in which the counter's `k`-th increment (k >= 1)
    /// of the step comes, if it does.
    fn clock_of(self, k: u128) -> Option<u128> {
        if self.first >= k {
            Some(1)
        } else if self.later == 0 {
            None
        } else {
            let j = 1 + (k - self.first).div_ceil(self.later);
            (j <= self.clocks).then_some(j)
        }
    }
}

/// Where a counter overflows in a step, by increment (1-based): at `first`
/// and every `2^40` after, or (`FORCE_OVF`) at every increment.
#[derive(Clone, Copy)]
struct Wraps {
    force: bool,
    first: u128,
}

impl Wraps {
    /// The first overflow after increment `x`.
    const fn after(self, x: u128) -> u128 {
        let period = 1u128 << COUNTER_BITS;
        if self.force {
            x + 1
        } else if x < self.first {
            self.first
        } else {
            self.first + ((x - self.first) / period + 1) * period
        }
    }
}

/// The PMI of a counter with `OVF_PMI` over `step`: whether it rises in the
/// step, and the increments still owed after it by a PMI that is due. `due`
/// is what was owed before the step; an overflow owes a PMI at the
/// `1 + skid`-th increment after its clock and joins one already due; one
/// in or after the clock in which a PMI rises owes its own
/// ([`NetBurstModel::set_skid`]).
fn pmi_over(step: Step, wraps: Wraps, due: Option<u64>, skid: u64) -> (bool, Option<u64>) {
    let total = step.through(step.clocks);
    let owed = |clock: u128| step.through(clock) + 1 + u128::from(skid);
    // The increment (of this step) with which the PMI due rises.
    let mut at = match due {
        Some(d) => u128::from(d),
        None => {
            let w = wraps.after(0);
            if w > total {
                return (false, None);
            }
            step.clock_of(w).map_or(u128::MAX, owed)
        }
    };
    let mut raised = false;
    loop {
        let Some(fire) = step.clock_of(at) else {
            let left = at - total;
            return (raised, Some(left.min(u128::from(u64::MAX)) as u64));
        };
        raised = true;
        // With FORCE_OVF every clock that increments overflows, so the PMIs
        // rise every ceil((1 + skid) / later) clocks from here on: jump to
        // the last one in the step.
        let fire = if wraps.force && step.later > 0 {
            let stride = (1 + u128::from(skid)).div_ceil(step.later);
            fire + (step.clocks - fire) / stride * stride
        } else {
            fire
        };
        let w = wraps.after(step.through(fire - 1));
        if w > total {
            return (raised, None);
        }
        at = step.clock_of(w).map_or(u128::MAX, owed);
    }
}

/// The alternate counter whose overflow starts counter `to` when `to` has
/// CASCADE set (SDM 18.15.5.6), or `None` for `to >= 18`.
pub fn cascade_alternate(to: usize) -> Option<usize> {
    tables::CASCADE_ALTERNATE.get(to).map(|&n| usize::from(n))
}

/// Whether counter `to` can be cascaded from counter `from` with the CCCR
/// CASCADE flag: 0<->2, 1<->3, 4<->6, 5<->7, 8<->10, 9<->11, 12<->14,
/// 13<->15, 14->16 and 15->17 (not 12->16, 13->17, 16->14 or 17->15).
pub fn can_cascade(from: usize, to: usize) -> bool {
    cascade_alternate(to) == Some(from)
}

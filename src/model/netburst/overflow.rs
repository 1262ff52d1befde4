//! Advancing the counters: 40-bit wrap and the sticky OVF flag, FORCE_OVF,
//! OVF_PMI_T0/T1 and the per-logical-processor PMI lines, cascading (SDM
//! 18.15.5.5-18.15.5.8) and the PEBS assist hook.

use super::counting::{Event, Increment};
use super::registers::{LogicalProcessor, NetBurstModel};
use super::tables::{self, COUNTER_BITS, COUNTER_MASK, COUNTERS, cccr};

/// The performance-monitoring interrupt line of one logical processor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PmiLine {
    /// A PMI has been raised and not yet taken.
    pub pending: bool,
    /// Bit `n` set: counter `n` overflowed with OVF_PMI for this logical
    /// processor (since the last [`NetBurstModel::take_pmi`]).
    pub counters: u32,
    /// The PEBS buffer reached its interrupt threshold.
    pub pebs_threshold: bool,
}

impl PmiLine {
    /// No PMI.
    pub const NONE: Self = Self {
        pending: false,
        counters: 0,
        pebs_threshold: false,
    };
}

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
    /// increment after (SDM 18.15.5.8); with its `OVF` or `FORCE_OVF` set, or
    /// PEBS enabled for either logical processor (an assist may interrupt
    /// with any occurrence), the next occurrence may raise it: 0.
    pub fn events_without_pmi(&self) -> u64 {
        if self.pebs_enable & (tables::pebs_enable::MY_THR | tables::pebs_enable::OTH_THR) != 0 {
            return 0;
        }
        (0..COUNTERS)
            .filter(|&c| self.cccrs[c] & (cccr::OVF_PMI_T0 | cccr::OVF_PMI_T1) != 0)
            .map(|c| {
                if self.cccrs[c] & (cccr::OVF | cccr::FORCE_OVF) != 0 {
                    0
                } else {
                    (1u64 << COUNTER_BITS) - self.counters[c]
                }
            })
            .min()
            .unwrap_or(u64::MAX)
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
        let mut inputs = [None; COUNTERS];
        for (c, input) in inputs.iter_mut().enumerate() {
            *input = self.counter_input(c, events, one_per_event);
        }
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
                    incs[c] = self.filter(c, inputs[c]);
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
        // "The PMI is generated on the next event count after the counter has
        // overflowed" (SDM 18.15.5.8).
        if self.pmi_armed[c] {
            self.pmi_armed[c] = false;
            self.raise_counter_pmi(c);
        }
        let total = u128::from(inc.first) + u128::from(inc.later) * u128::from(later_cycles);
        let sum = u128::from(self.counters[c]) + total;
        let wraps = sum >> COUNTER_BITS;
        self.counters[c] = (sum as u64) & COUNTER_MASK;
        let force = self.cccrs[c] & cccr::FORCE_OVF != 0;
        if wraps == 0 && !force {
            return;
        }
        self.cccrs[c] |= cccr::OVF;
        // Did an overflow happen before the last incrementing clock (so an
        // increment followed it), and did one happen in the last?
        let last_inc = if later_cycles > 0 {
            inc.later
        } else {
            inc.first
        };
        let (followed, in_last) = if force {
            (incrementing >= 2, true)
        } else {
            let in_last = sum - u128::from(last_inc) < (wraps << COUNTER_BITS);
            (!in_last || wraps >= 2, in_last)
        };
        if self.cccrs[c] & (cccr::OVF_PMI_T0 | cccr::OVF_PMI_T1) != 0 {
            if followed {
                self.raise_counter_pmi(c);
            }
            self.pmi_armed[c] = in_last;
        }
        if let Some(t) = self.pebs_thread_of(c) {
            self.pebs[t].armed = true;
        }
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

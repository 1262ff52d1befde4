//! Advancing the counters: the wrap at 48 bits, PerfCntrGlobalStatus
//! (PerfMonV2), INT and the PMI with its skid and its late delivery (APM
//! Vol. 2 13.2.1 INT; 13.2.2).

use super::counting::{Privilege, Step};
use super::registers::AmdModel;
use super::tables::{MAX, WIDTH, ctl};

/// 2^48: a counter wraps there.
const SPAN: u128 = 1 << WIDTH;

impl AmdModel {
    /// Sets the PMI skid: with 0 (the default) a PMI rises in the clock in
    /// which a counter with INT wraps; otherwise with that counter's
    /// `events`-th increment after the wrap, or at once when the counter
    /// stops counting before then (choice 7).
    pub fn set_skid(&mut self, events: u64) {
        self.skid = events;
    }

    /// The PMI skid (see [`AmdModel::set_skid`]).
    pub const fn skid(&self) -> u64 {
        self.skid
    }

    /// With `on`, every overflow's PMI is a message of its own, taken one
    /// [`AmdModel::take_pmi`] at a time (the shape of AMD's late NMIs: the
    /// second counter's PMI arrives after the first's handler serviced
    /// both); otherwise (the default) a PMI raised while one is pending
    /// merges with it, as one interrupt (choice 6).
    pub fn set_separate_pmis(&mut self, on: bool) {
        self.separate = on;
    }

    /// Whether a PMI is pending (raised and not yet taken).
    pub const fn pmi_pending(&self) -> bool {
        self.pmis > 0
    }

    /// Whether a PMI is pending or requested by a wrap whose skid has not
    /// run out: an overflow's interrupt is in flight.
    pub fn pmi_requested(&self) -> bool {
        self.pmi_pending() || self.armed.iter().any(Option::is_some)
    }

    /// How many PMI messages are pending (more than 1 only with
    /// [`AmdModel::set_separate_pmis`]).
    pub const fn pending_pmis(&self) -> u32 {
        self.pmis
    }

    /// Takes one pending PMI: whether there was one (the kernel delivers
    /// it; the model has no APIC).
    pub fn take_pmi(&mut self) -> bool {
        if self.pmis == 0 {
            return false;
        }
        self.pmis -= 1;
        if self.pmis == 0 {
            self.pmi_sources = 0;
        }
        true
    }

    /// The counters (bit n: counter n) whose overflow raised the pending
    /// PMIs.
    pub const fn pmi_sources(&self) -> u64 {
        self.pmi_sources
    }

    /// Counter `n`'s overflow raises its PMI now.
    fn raise(&mut self, n: usize) {
        self.armed[n] = None;
        self.pmi_sources |= 1 << n;
        self.pmis = if self.separate {
            self.pmis.saturating_add(1)
        } else {
            1
        };
    }

    /// Counter `n`, counting before a write (`was`), may have stopped: a
    /// PMI its wrap requested and its skid still holds rises now (choice 7).
    pub(super) fn stopped(&mut self, n: usize, was: bool) {
        if was && !self.counting(n) && self.armed[n].is_some() {
            self.raise(n);
        }
    }

    /// The clocks, at most `left`, until the next clock in which something
    /// happens to a counter advancing as `plan` says: a wrap, or the end of
    /// a PMI's skid. A run of clocks is cut there, so that its end is
    /// exact.
    fn next_event(&self, plan: &[Option<Step>; MAX], left: u64) -> u64 {
        let mut step = left;
        for (n, s) in plan.iter().enumerate() {
            let Some(s) = s else { continue };
            if s.first != s.later {
                return 1;
            }
            if s.later == 0 {
                continue;
            }
            let per = u128::from(s.later);
            let to_wrap = SPAN - u128::from(self.ctr[n]);
            let mut clocks = to_wrap.div_ceil(per);
            if let Some(a) = self.armed[n] {
                clocks = clocks.min(u128::from(a).div_ceil(per));
            }
            step = step.min(u64::try_from(clocks).unwrap_or(u64::MAX).max(1));
        }
        step
    }

    /// Applies `clocks` clocks of `plan` (cut by [`AmdModel::next_event`]:
    /// at most one wrap per counter, in the last clock).
    fn apply(&mut self, plan: &[Option<Step>; MAX], clocks: u64) {
        for (n, s) in plan.iter().enumerate() {
            let Some(s) = *s else { continue };
            self.edge_prev[n] = s.cond;
            let total =
                u128::from(s.first) + u128::from(s.later) * u128::from(clocks.saturating_sub(1));
            if total == 0 {
                continue;
            }
            let sum = u128::from(self.ctr[n]) + total;
            self.ctr[n] = (sum % SPAN) as u64;
            if let Some(a) = self.armed[n] {
                if total >= u128::from(a) {
                    self.raise(n);
                } else {
                    self.armed[n] = Some(a - total as u64);
                }
            }
            if sum < SPAN {
                continue;
            }
            if self.config.perfmon_v2 {
                self.global_status |= 1 << n;
            }
            if self.ctl[n] & ctl::INT == 0 || self.armed[n].is_some() {
                // No interrupt, or one still to come that a further wrap
                // does not postpone.
                continue;
            }
            let after = (sum - SPAN) % SPAN;
            if after >= u128::from(self.skid) {
                self.raise(n);
            } else {
                self.armed[n] = Some(self.skid - after as u64);
            }
        }
    }

    /// Runs `clocks` identical clocks at `privilege` and mode `guest` in
    /// which `events` occur (with `one_each`, one occurrence per matching
    /// event per clock); with `stop_at_pmi` it stops after the clock that
    /// raises a PMI (or before the first, if one is pending). Returns the
    /// clocks run.
    pub(super) fn run(
        &mut self,
        events: &[super::Event],
        one_each: bool,
        clocks: u64,
        privilege: Privilege,
        guest: bool,
        stop_at_pmi: bool,
    ) -> u64 {
        (self.privilege, self.guest) = (privilege, guest);
        let mut left = clocks;
        while left > 0 {
            if stop_at_pmi && self.pmi_pending() {
                break;
            }
            let plan = self.plan(events, one_each, privilege, guest);
            let step = self.next_event(&plan, left);
            self.apply(&plan, step);
            left -= step;
        }
        clocks - left
    }
}

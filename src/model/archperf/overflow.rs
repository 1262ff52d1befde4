//! Advancing the counters: the wrap at the counter width, the overflow bits
//! of IA32_PERF_GLOBAL_STATUS, INT / PMI and the PMI line with its skid, and
//! the freeze on PMI (SDM Vol. 3B 20.2.1.1 INT, 20.2.2, 20.2.4.1; 18.4.7
//! "Freezing LBR and Performance Counters on PMI", 17.4.7 in older
//! editions).

use super::counting::{Event, Increment, Privilege};
use super::registers::ArchPerfModel;
use super::tables::{MAX_GP, SLOTS, debugctl, evtsel, fixed_ctrl, global_status};

/// One counter after `t` increments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Advanced {
    /// The new value (wrapped to the width).
    pub value: u64,
    /// The counter wrapped at least once.
    pub wrapped: bool,
    /// The increment (1-based) at which the counter's PMI line rises, if it
    /// does within the `t` increments (the earliest one).
    pub raise_at: Option<u64>,
    /// A PMI still to come after the `t` increments: in this many more.
    pub armed: Option<u64>,
}

/// Advances a `width`-bit counter at `value` by `t` increments. `armed`: a
/// PMI waiting for that many increments; `int`: INT / PMI set, so each wrap
/// requests a PMI that rises `skid` increments after it.
pub(super) fn advance_counter(
    value: u64,
    width: u32,
    armed: Option<u64>,
    int: bool,
    skid: u64,
    t: u64,
) -> Advanced {
    let span = 1u128 << width;
    let v = u128::from(value) % span;
    let t = u128::from(t);
    let skid = u128::from(skid);
    let first_wrap = span - v;
    let wrapped = t >= first_wrap;
    let mut raise: Option<u128> = None;
    let mut next: Option<u128> = None;
    if let Some(c) = armed.map(u128::from) {
        if c <= t {
            raise = Some(c);
        } else {
            next = Some(c - t);
        }
    }
    if int && wrapped {
        let first_pmi = first_wrap + skid;
        if first_pmi <= t {
            raise = Some(raise.map_or(first_pmi, |r| r.min(first_pmi)));
        }
        // The wraps are at first_wrap + k * span, k = 0..=last; the earliest
        // whose PMI (skid increments later) is still to come.
        let last = (t - first_wrap) / span;
        let k = if t < first_pmi {
            0
        } else {
            (t - first_pmi) / span + 1
        };
        if k <= last {
            let left = first_wrap + k * span + skid - t;
            next = Some(next.map_or(left, |n| n.min(left)));
        }
    }
    Advanced {
        value: ((v + t) % span) as u64,
        wrapped,
        raise_at: raise.map(|r| r as u64),
        armed: next.map(|n| n.min(u128::from(u64::MAX)) as u64),
    }
}

/// The IA32_PERF_GLOBAL_STATUS bit of counter slot `s`.
pub(super) const fn status_bit(s: usize) -> u64 {
    if s < MAX_GP {
        1 << s
    } else {
        1 << (global_status::FIXED_SHIFT as usize + s - MAX_GP)
    }
}

impl ArchPerfModel {
    /// Sets the PMI skid: with `events` = 0 (the default) the PMI line rises
    /// in the clock in which a counter with INT / PMI wraps; otherwise it
    /// rises with that counter's `events`-th increment after the wrap.
    pub fn set_skid(&mut self, events: u64) {
        self.skid = events;
    }

    /// The PMI skid (see [`set_skid`](Self::set_skid)).
    pub const fn skid(&self) -> u64 {
        self.skid
    }

    /// Whether the PMI line is pending (raised and not yet taken).
    pub const fn pmi_pending(&self) -> bool {
        self.pmi
    }

    /// Takes the PMI line: returns whether it was pending and clears it
    /// (the kernel delivers the PMI; the model has no LVT). A PMI whose
    /// skid has not yet elapsed stays requested.
    pub fn take_pmi(&mut self) -> bool {
        self.pmi_sources = 0;
        core::mem::replace(&mut self.pmi, false)
    }

    /// The counters (IA32_PERF_GLOBAL_STATUS layout: bit `i` general-purpose
    /// counter `i`, bit 32 + `i` fixed counter `i`) whose overflow raised the
    /// pending PMI line since it was last taken.
    pub const fn pmi_sources(&self) -> u64 {
        self.pmi_sources
    }

    /// The width of counter slot `s`.
    pub(super) fn width(&self, s: usize) -> u32 {
        if s < MAX_GP {
            self.config.gp_bits()
        } else {
            self.config.fixed_bits()
        }
    }

    /// Whether slot `s` interrupts on overflow: PERFEVTSELx.INT, or the PMI
    /// bit of its IA32_FIXED_CTR_CTRL field.
    pub(super) fn interrupts(&self, s: usize) -> bool {
        if s < MAX_GP {
            self.evtsel[s] & evtsel::INT != 0
        } else {
            self.fixed_field(s - MAX_GP) & fixed_ctrl::PMI != 0
        }
    }

    /// Whether raising the PMI line freezes the counters (IA32_DEBUGCTL
    /// .FREEZE_PERFMON_ON_PMI, version 2 and later).
    fn freezes_on_pmi(&self) -> bool {
        self.config.has_global_msrs() && self.debugctl & debugctl::FREEZE_PERFMON_ON_PMI != 0
    }

    fn advance_slot(&self, s: usize, t: u64) -> Advanced {
        advance_counter(
            self.counters[s],
            self.width(s),
            self.armed[s],
            self.interrupts(s),
            self.skid,
            t,
        )
    }

    /// The clock (1-based, at most `clocks`) of `plan` in which the PMI line
    /// first rises, if it does.
    fn first_pmi_clock(&self, plan: &[Increment; SLOTS], clocks: u64) -> Option<u64> {
        (0..SLOTS)
            .filter_map(|s| {
                let t = plan[s].total(clocks);
                if t == 0 {
                    return None;
                }
                plan[s].clock_of(self.advance_slot(s, t).raise_at?)
            })
            .min()
    }

    /// Runs `clocks` clocks of `plan`: counts, wraps, sets the overflow
    /// status (version 2 and later), raises the PMI line.
    fn apply(&mut self, plan: &[Increment; SLOTS], clocks: u64) {
        let mut raised = false;
        self.clock = self.clock.wrapping_add(clocks);
        for (s, inc) in plan.iter().enumerate() {
            if s < MAX_GP
                && clocks > 0
                && let Some(cond) = inc.cond
            {
                self.edge_prev[s] = cond;
            }
            let t = inc.total(clocks);
            // A PEBS counter counts in `pebs_clock` (the run steps one
            // clock at a time while one counts).
            if t == 0 || self.pebs_slot(s) {
                continue;
            }
            let adv = self.advance_slot(s, t);
            self.counters[s] = adv.value;
            self.armed[s] = adv.armed;
            if adv.wrapped && self.config.has_global_msrs() {
                self.global_status |= status_bit(s);
            }
            if adv.raise_at.is_some() {
                raised = true;
                self.pmi_sources |= status_bit(s);
            }
        }
        if raised {
            self.raise_pmi();
        }
        if clocks == 1 {
            self.pebs_clock(plan);
        }
    }

    /// Raises the PMI line and applies the freezes IA32_DEBUGCTL asks for
    /// (SDM Vol. 3B 18.4.7; 20.2.4): versions 2-3 ("legacy" freeze) clear
    /// IA32_PERF_GLOBAL_CTRL (FREEZE_PERFMON_ON_PMI) and IA32_DEBUGCTL.LBR
    /// (FREEZE_LBRS_ON_PMI); from version 4 ("streamlined" freeze) they set
    /// IA32_PERF_GLOBAL_STATUS.CTR_Frz / LBR_Frz instead, leaving
    /// IA32_PERF_GLOBAL_CTRL as it is.
    pub(super) fn raise_pmi(&mut self) {
        self.pmi = true;
        if !self.config.has_global_msrs() {
            return;
        }
        let v4 = self.config.has_v4();
        if self.debugctl & debugctl::FREEZE_PERFMON_ON_PMI != 0 {
            if v4 {
                self.global_status |= global_status::CTR_FRZ;
            } else {
                self.global_ctrl = 0;
            }
        }
        if self.debugctl & debugctl::FREEZE_LBRS_ON_PMI != 0 {
            if v4 {
                self.global_status |= global_status::LBR_FRZ;
            } else {
                self.debugctl &= !debugctl::LBR;
            }
        }
    }

    /// Runs `clocks` identical clocks at privilege `clock` in which `events`
    /// occur (with `one_each`, one occurrence per matching event per clock).
    /// A freeze takes effect from the clock after the PMI: the run is cut at
    /// each PMI that freezes; with `stop_at_pmi` it stops after the clock
    /// that raises the line (or before the first, if it is pending).
    /// Returns the clocks run.
    pub(super) fn run(
        &mut self,
        events: &[Event],
        one_each: bool,
        clocks: u64,
        clock: Privilege,
        stop_at_pmi: bool,
    ) -> u64 {
        self.privilege = clock;
        let mut left = clocks;
        while left > 0 {
            if stop_at_pmi && self.pmi {
                break;
            }
            let plan = self.plan(events, one_each, clock);
            let step = if self.pebs_live(&plan) {
                1
            } else if stop_at_pmi || self.freezes_on_pmi() {
                self.first_pmi_clock(&plan, left).unwrap_or(left)
            } else {
                left
            };
            self.apply(&plan, step);
            left -= step;
        }
        clocks - left
    }
}

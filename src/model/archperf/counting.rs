//! Counting semantics: which injected events a counter sees (event select
//! and unit mask, USR/OS, EN, IA32_PERF_GLOBAL_CTRL, CTR_Frz), the
//! CMASK/INV/EDGE filter of the general-purpose counters (SDM 20.2.1.1) and
//! the fixed counters' events and enables (SDM 20.2.2).

use super::registers::ArchPerfModel;
use super::retire::Retirement;
use super::tables::Encoding;
use super::tables::{
    ArchEvent, FIXED_EVENTS, MAX_FIXED, MAX_GP, SLOTS, evtsel, fixed_ctrl, global_status,
};

/// The privilege level an event occurs at: the driver's vocabulary type.
pub use crate::arch::ia32::Privilege;

/// Occurrences of a performance event, as a PERFEVTSEL would select it:
/// event select and unit mask (matched exactly), at a privilege level.
///
/// For [`ArchPerfModel::cycle`], `count` is how many occurrences happen in
/// that one clock. For [`ArchPerfModel::inject`], `count` occurrences happen
/// in `count` consecutive clocks, one per clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Event {
    /// Event select (PERFEVTSELx bits 7:0).
    pub select: u8,
    /// Unit mask (PERFEVTSELx bits 15:8).
    pub umask: u8,
    /// How many occurrences.
    pub count: u64,
    /// The privilege level they occur at.
    pub privilege: Privilege,
}

impl Event {
    /// `count` occurrences of event `select` / `umask` at CPL 0.
    pub const fn new(select: u8, umask: u8, count: u64) -> Self {
        Self {
            select,
            umask,
            count,
            privilege: Privilege::Os,
        }
    }

    /// `count` occurrences of the architectural event `event` at CPL 0.
    pub fn arch(event: ArchEvent, count: u64) -> Self {
        Self::new(event.select_code(), event.umask_code(), count)
    }

    /// The same occurrences at `privilege`.
    pub const fn at(self, privilege: Privilege) -> Self {
        Self { privilege, ..self }
    }

    /// The same event, `count` occurrences.
    pub const fn times(self, count: u64) -> Self {
        Self { count, ..self }
    }

    /// Whether this is the architectural event `event`.
    pub fn is(&self, event: ArchEvent) -> bool {
        self.select == event.select_code() && self.umask == event.umask_code()
    }
}

/// BR_INST_RETIRED.CONDITIONAL (event select C4H, unit mask 01H; Sandy
/// Bridge and later, a model-specific event): the conditional branches
/// [`ArchPerfModel::retire`] counts beside every branch.
pub const CONDITIONAL_BRANCHES: (u8, u8) = (0xC4, 0x01);

/// What an injection did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Injected {
    /// How many occurrences (clocks) were injected.
    pub injected: u64,
    /// Whether the PMI line is pending afterwards.
    pub pmi_pending: bool,
}

/// How one counter increments in each clock of a run of identical clocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Increment {
    /// Increment in the first clock of the run.
    pub first: u64,
    /// Increment in each later clock.
    pub later: u64,
    /// For a counting general-purpose counter: its comparator output in
    /// every clock of the run (stored for EDGE after the run).
    pub cond: Option<bool>,
}

impl Increment {
    /// Total increments over `clocks` clocks.
    pub fn total(&self, clocks: u64) -> u64 {
        if clocks == 0 {
            0
        } else {
            self.first
                .saturating_add((clocks - 1).saturating_mul(self.later))
        }
    }

    /// The clock (1-based) in which the `k`-th increment (1-based) happens,
    /// if it ever does.
    pub fn clock_of(&self, k: u64) -> Option<u64> {
        if k <= self.first {
            Some(1)
        } else if self.later == 0 {
            None
        } else {
            Some(1 + (k - self.first).div_ceil(self.later))
        }
    }
}

/// Whether a privilege filter (`os`, `usr` enables) admits `privilege`.
const fn admits(os: bool, usr: bool, privilege: Privilege) -> bool {
    match privilege {
        Privilege::Os => os,
        Privilege::Usr => usr,
    }
}

impl ArchPerfModel {
    /// The privilege level of the current clock (set by the last injected
    /// event; used by [`ArchPerfModel::idle`] and empty
    /// [`ArchPerfModel::cycle`]s).
    pub const fn privilege(&self) -> Privilege {
        self.privilege
    }

    /// Sets the privilege level of the following idle clocks.
    pub fn set_privilege(&mut self, privilege: Privilege) {
        self.privilege = privilege;
    }

    /// Version 4 and later: IA32_PERF_GLOBAL_STATUS.CTR_Frz is set, and no
    /// counter counts (SDM 20.2.4.1: counting needs "!CTR_FRZ").
    pub fn frozen(&self) -> bool {
        self.config.has_v4() && self.global_status & global_status::CTR_FRZ != 0
    }

    /// Whether general-purpose counter `gp` counts: PERFEVTSELgp.EN and, from
    /// version 2, IA32_PERF_GLOBAL_CTRL bit `gp` (SDM 20.2.2: the two are
    /// ANDed), and, from version 4, CTR_Frz clear.
    pub fn gp_counting(&self, gp: usize) -> bool {
        gp < self.config.gp_count()
            && self.evtsel[gp] & evtsel::EN != 0
            && (!self.config.has_global_msrs() || self.global_ctrl & (1 << gp) != 0)
            && !self.frozen()
    }

    /// Whether fixed counter `i` counts: its IA32_FIXED_CTR_CTRL enable field
    /// is not 00b, IA32_PERF_GLOBAL_CTRL bit 32 + `i` is set, and (version 4)
    /// CTR_Frz is clear (SDM 20.2.2, 20.2.4.1).
    pub fn fixed_counting(&self, i: usize) -> bool {
        self.config.has_fixed(i)
            && self.fixed_field(i) & (fixed_ctrl::OS | fixed_ctrl::USR) != 0
            && self.global_ctrl & (1 << (global_status::FIXED_SHIFT as usize + i)) != 0
            && !self.frozen()
    }

    pub(super) fn fixed_field(&self, i: usize) -> u64 {
        (self.fixed_ctrl >> (4 * i)) & 0xF
    }

    /// The per-clock input of general-purpose counter `gp`: the occurrences
    /// of its event (select and unit mask equal) at a privilege its USR/OS
    /// bits admit. With `one_each`, each matching event contributes 1.
    fn gp_input(&self, gp: usize, events: &[Event], one_each: bool) -> u64 {
        let v = self.evtsel[gp];
        let select = (v & evtsel::EVENT_SELECT) as u8;
        let umask = ((v & evtsel::UMASK) >> 8) as u8;
        let (os, usr) = (v & evtsel::OS != 0, v & evtsel::USR != 0);
        events
            .iter()
            .filter(|e| {
                e.count > 0
                    && e.select == select
                    && e.umask == umask
                    && admits(os, usr, e.privilege)
            })
            .fold(0u64, |sum, e| {
                sum.saturating_add(if one_each { 1 } else { e.count })
            })
    }

    /// The CMASK/INV/EDGE filter (SDM 20.2.1.1) for a run of clocks at
    /// privilege `clock` that all have input `input`. CMASK = 0: the counter
    /// adds the input (INV is ignored). CMASK > 0: it adds 1 in a clock whose
    /// input is >= CMASK (with INV: < CMASK). EDGE: it adds 1 only in a
    /// clock where that condition (with CMASK = 0: input > 0) is true and was
    /// false in the previous counted clock. A clock at a privilege level the
    /// USR/OS bits do not admit makes the condition false.
    fn gp_filter(&self, gp: usize, input: u64, clock: Privilege) -> Increment {
        let v = self.evtsel[gp];
        let cmask = (v & evtsel::CMASK) >> evtsel::CMASK_SHIFT;
        let admitted = admits(v & evtsel::OS != 0, v & evtsel::USR != 0, clock);
        let cond = admitted
            && if cmask == 0 {
                input > 0
            } else {
                (input >= cmask) != (v & evtsel::INV != 0)
            };
        let (first, later) = if v & evtsel::EDGE != 0 {
            (u64::from(cond && !self.edge_prev[gp]), 0)
        } else if cmask == 0 {
            (input, input)
        } else {
            (u64::from(cond), u64::from(cond))
        };
        Increment {
            first,
            later,
            cond: Some(cond),
        }
    }

    /// The per-clock input of fixed counter `i`: occurrences of its
    /// architectural event at a privilege its enable field admits.
    fn fixed_input(&self, i: usize, events: &[Event], one_each: bool) -> u64 {
        let Some(&event) = FIXED_EVENTS.get(i) else {
            return 0;
        };
        let field = self.fixed_field(i);
        let (os, usr) = (field & fixed_ctrl::OS != 0, field & fixed_ctrl::USR != 0);
        events
            .iter()
            .filter(|e| e.count > 0 && e.is(event) && admits(os, usr, e.privilege))
            .fold(0u64, |sum, e| {
                sum.saturating_add(if one_each { 1 } else { e.count })
            })
    }

    /// How every counter increments in a run of identical clocks at
    /// privilege `clock` in which `events` occur.
    pub(super) fn plan(
        &self,
        events: &[Event],
        one_each: bool,
        clock: Privilege,
    ) -> [Increment; SLOTS] {
        let mut plan = [Increment::default(); SLOTS];
        for (gp, slot) in plan.iter_mut().enumerate().take(MAX_GP) {
            if self.gp_counting(gp) {
                *slot = self.gp_filter(gp, self.gp_input(gp, events, one_each), clock);
            }
        }
        for i in 0..MAX_FIXED {
            if self.fixed_counting(i) {
                let input = self.fixed_input(i, events, one_each);
                plan[MAX_GP + i] = Increment {
                    first: input,
                    later: input,
                    cond: None,
                };
            }
        }
        plan
    }

    /// One clock in which `events` occur (each with `count` occurrences in
    /// this clock), at the privilege level of the first event (the current
    /// one for an empty slice: one clock has one CPL; each event still
    /// counts only where its own privilege is admitted). Use this form to
    /// exercise CMASK, INV and EDGE.
    pub fn cycle(&mut self, events: &[Event]) {
        let clock = events.first().map_or(self.privilege, |e| e.privilege);
        self.run(events, false, 1, clock, false);
    }

    /// `event.count` occurrences of `event`, one per clock, in `event.count`
    /// consecutive clocks at `event.privilege`. Returns how many were
    /// injected (all) and whether the PMI line is pending afterwards.
    pub fn inject(&mut self, event: Event) -> Injected {
        let injected = self.run(&[event], true, event.count, event.privilege, false);
        Injected {
            injected,
            pmi_pending: self.pmi,
        }
    }

    /// Like [`inject`](Self::inject) but stops right after the occurrence
    /// whose clock raises the PMI line, so that the caller can deliver the
    /// PMI before further events count. Injects nothing while the line is
    /// already pending.
    pub fn inject_until_pmi(&mut self, event: Event) -> Injected {
        let injected = self.run(&[event], true, event.count, event.privilege, true);
        Injected {
            injected,
            pmi_pending: self.pmi,
        }
    }

    /// `clocks` clocks in which no event occurs, at the current privilege
    /// level (a counter with CMASK and INV counts them).
    pub fn idle(&mut self, clocks: u64) {
        self.run(&[], true, clocks, self.privilege, false);
    }

    /// One instruction retired, in one clock: it counts as
    /// INST_RETIRED.ANY (C0H/00H), a branch also as
    /// BR_INST_RETIRED.ALL_BRANCHES (C4H/00H), a conditional branch (taken
    /// or not) also as BR_INST_RETIRED.CONDITIONAL ([`CONDITIONAL_BRANCHES`],
    /// C4H/01H: Sandy Bridge's and later parts' encoding), a load above
    /// MSR_PEBS_LD_LAT's threshold as the configuration's load-latency
    /// event ([`super::PebsConfig::load_latency_event`]), at its privilege
    /// level; a PEBS assist in this clock records this instruction. Returns
    /// whether the PMI line is pending afterwards.
    pub fn retire(&mut self, r: &Retirement) -> bool {
        let mut events = [Event::new(0, 0, 0); 4];
        let mut n = 0;
        let mut push = |e: Event| {
            if let Some(slot) = events.get_mut(n) {
                *slot = e.at(r.privilege);
                n += 1;
            }
        };
        push(Event::arch(ArchEvent::InstructionsRetired, 1));
        if let Some(branch) = r.branch {
            push(Event::arch(ArchEvent::BranchInstructionsRetired, 1));
            if branch.kind == super::retire::BranchKind::Conditional {
                push(Event::new(
                    CONDITIONAL_BRANCHES.0,
                    CONDITIONAL_BRANCHES.1,
                    1,
                ));
            }
        }
        if let Some(load) = r.load
            && load.latency > self.pebs_ld_lat
            && self.config.has_pebs()
        {
            let (select, umask) = self.config.pebs.load_latency_event;
            push(Event::new(select, umask, 1));
        }
        self.retirement = *r;
        // Recorded as it retires, before its events count: the branch that
        // overflows a counter is in the records its PMI freezes.
        self.record_branch(r);
        self.run(&events[..n], false, 1, r.privilege, false);
        self.retirement = Retirement::NONE;
        self.pmi
    }
}

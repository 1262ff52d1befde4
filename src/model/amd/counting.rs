//! Counting semantics: which injected events a counter sees (event select
//! and unit mask, USR/OS, HostOnly/GuestOnly, `EN` and PerfCntrGlobalCtl)
//! and the CntMask/INV/Edge filter (APM Vol. 2 13.2.1).

use super::registers::AmdModel;
use super::tables::{MAX, ctl};

/// The privilege level an event occurs at: the driver's vocabulary type.
pub use crate::arch::ia32::Privilege;

/// Occurrences of a performance event, as an event-select register picks
/// it: the 12-bit event select and the unit mask (matched exactly), at a
/// privilege level, in host or guest mode.
///
/// For [`AmdModel::cycle`], `count` is how many occurrences happen in that
/// one clock. For [`AmdModel::inject`], `count` occurrences happen in
/// `count` consecutive clocks, one per clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Event {
    /// EventSelect\[11:0\].
    pub select: u16,
    /// UnitMask.
    pub umask: u8,
    /// How many occurrences.
    pub count: u64,
    /// The privilege level they occur at.
    pub privilege: Privilege,
    /// They occur in guest mode (SVM).
    pub guest: bool,
}

impl Event {
    /// `count` occurrences of event `select` / `umask` at CPL 0 in host
    /// mode.
    pub const fn new(select: u16, umask: u8, count: u64) -> Event {
        Event {
            select,
            umask,
            count,
            privilege: Privilege::Os,
            guest: false,
        }
    }

    /// The same occurrences at `privilege`.
    pub const fn at(self, privilege: Privilege) -> Event {
        Event { privilege, ..self }
    }

    /// The same occurrences in guest mode.
    pub const fn in_guest(self) -> Event {
        Event {
            guest: true,
            ..self
        }
    }

    /// The same event, `count` occurrences.
    pub const fn times(self, count: u64) -> Event {
        Event { count, ..self }
    }
}

/// What an injection did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Injected {
    /// How many occurrences (clocks) were injected.
    pub injected: u64,
    /// Whether a PMI is pending afterwards.
    pub pmi_pending: bool,
}

/// How a counter advances in a run of identical clocks: `first` in the
/// first, `later` in each after it; `cond` the comparison's result in
/// every clock (for Edge).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Step {
    pub first: u64,
    pub later: u64,
    pub cond: bool,
}

impl AmdModel {
    /// The privilege level of the current clock (the last injected
    /// event's; used by [`AmdModel::idle`]).
    pub const fn privilege(&self) -> Privilege {
        self.privilege
    }

    /// Sets the privilege level of the following idle clocks.
    pub fn set_privilege(&mut self, privilege: Privilege) {
        self.privilege = privilege;
    }

    /// Whether counter `n` counts: its `EN` and, with PerfMonV2, its
    /// PerfCntrGlobalCtl bit (ANDed: Linux's "PerfMonV2 counter control"
    /// commit, and APM Vol. 2 13.2.2).
    pub fn counting(&self, n: usize) -> bool {
        n < self.config.counters()
            && self.ctl[n] & ctl::EN != 0
            && (!self.config.perfmon_v2 || self.global_ctl & (1 << n) != 0)
    }

    /// Whether counter `n`'s filters admit a clock at `privilege`, in
    /// guest mode or not: USR (CPL > 0) or OS (CPL 0), and with SVM
    /// enabled its HostOnly/GuestOnly (one of them: that mode only; both
    /// or neither: both modes; choice 5).
    fn admits(&self, n: usize, privilege: Privilege, guest: bool) -> bool {
        let v = self.ctl[n];
        let level = match privilege {
            Privilege::Os => v & ctl::OS != 0,
            Privilege::Usr => v & ctl::USR != 0,
        };
        let host_only = v & ctl::HOST_ONLY != 0;
        let guest_only = v & ctl::GUEST_ONLY != 0;
        let mode = !self.svme || host_only == guest_only || guest_only == guest;
        level && mode
    }

    /// Counter `n`'s event select: EventSelect\[11:8\] over \[7:0\].
    fn select(&self, n: usize) -> u16 {
        let v = self.ctl[n];
        ((v & ctl::EVENT_HIGH) >> (ctl::EVENT_HIGH_SHIFT - 8)) as u16 | (v & ctl::EVENT_LOW) as u16
    }

    /// Counter `n`'s per-clock input: the occurrences of its event (select
    /// and unit mask equal) its filters admit; with `one_each`, 1 per
    /// matching event.
    fn input(&self, n: usize, events: &[Event], one_each: bool) -> u64 {
        let umask = ((self.ctl[n] & ctl::UNIT_MASK) >> 8) as u8;
        let select = self.select(n);
        events
            .iter()
            .filter(|e| {
                e.count > 0
                    && (e.select, e.umask) == (select, umask)
                    && self.admits(n, e.privilege, e.guest)
            })
            .fold(0u64, |sum, e| {
                sum.saturating_add(if one_each { 1 } else { e.count })
            })
    }

    /// How counter `n` advances in clocks of input `input` at `privilege`
    /// and mode `guest` (APM Vol. 2 13.2.1): CntMask 0 adds the input (INV
    /// has no effect); CntMask > 0 adds 1 in a clock whose input is at
    /// least CntMask (INV: below it); Edge adds 1 only where that
    /// comparison (CntMask 0: input > 0) turns true. A clock the filters
    /// do not admit compares false.
    pub(super) fn step(&self, n: usize, input: u64, privilege: Privilege, guest: bool) -> Step {
        let v = self.ctl[n];
        let cmask = (v & ctl::CNT_MASK) >> ctl::CNT_MASK_SHIFT;
        let cond = self.admits(n, privilege, guest)
            && if cmask == 0 {
                input > 0
            } else {
                (input >= cmask) != (v & ctl::INV != 0)
            };
        let (first, later) = if v & ctl::EDGE != 0 {
            (u64::from(cond && !self.edge_prev[n]), 0)
        } else if cmask == 0 {
            (input, input)
        } else {
            (u64::from(cond), u64::from(cond))
        };
        Step { first, later, cond }
    }

    /// How every counting counter advances in a run of clocks in which
    /// `events` occur, at `privilege` and mode `guest`.
    pub(super) fn plan(
        &self,
        events: &[Event],
        one_each: bool,
        privilege: Privilege,
        guest: bool,
    ) -> [Option<Step>; MAX] {
        core::array::from_fn(|n| {
            self.counting(n)
                .then(|| self.step(n, self.input(n, events, one_each), privilege, guest))
        })
    }

    /// One clock in which `events` occur (each with `count` occurrences in
    /// this clock), at the privilege and mode of the first event (the
    /// current ones for an empty slice; each event still counts only where
    /// its own are admitted).
    pub fn cycle(&mut self, events: &[Event]) {
        let (privilege, guest) = events
            .first()
            .map_or((self.privilege, self.guest), |e| (e.privilege, e.guest));
        self.run(events, false, 1, privilege, guest, false);
    }

    /// `event.count` occurrences of `event`, one per clock.
    pub fn inject(&mut self, event: Event) -> Injected {
        let injected = self.run(
            &[event],
            true,
            event.count,
            event.privilege,
            event.guest,
            false,
        );
        Injected {
            injected,
            pmi_pending: self.pmi_pending(),
        }
    }

    /// Like [`AmdModel::inject`] but stops right after the occurrence whose
    /// clock raises a PMI, so that the caller can deliver it before further
    /// events count. Injects nothing while a PMI is pending.
    pub fn inject_until_pmi(&mut self, event: Event) -> Injected {
        let injected = self.run(
            &[event],
            true,
            event.count,
            event.privilege,
            event.guest,
            true,
        );
        Injected {
            injected,
            pmi_pending: self.pmi_pending(),
        }
    }

    /// `clocks` clocks without events, at the current privilege and mode
    /// (a counter with CntMask and INV counts them).
    pub fn idle(&mut self, clocks: u64) {
        self.run(&[], true, clocks, self.privilege, self.guest, false);
    }
}

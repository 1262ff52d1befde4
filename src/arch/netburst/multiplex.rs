//! Multiplexing on NetBurst: more events than the PMU holds at once, each
//! counted part of the time, rotated on the caller's timer tick through the
//! exact scheduler ([`super::schedule`]), each reported with its time
//! enabled, time running and scaled estimate ([`Multiplexed`]).
//!
//! On each [`Multiplexer::tick`] the running events are read, every event
//! is charged the tick's time (the running ones what they counted since the
//! last read), and the next set is chosen: taking the events in order of
//! the time they have run so far, least first, each joins the set if the
//! scheduler can still place the whole set (SDM Table 18-63's ESCR and
//! counter wiring, Tables 19-28/19-29's ESCRs per event) beside what the
//! package's other drivers hold ([`NetBurstDriver::occupied`]). An event
//! placed where it already runs keeps counting untouched; the others are
//! released and the new ones configured and enabled. So events that
//! compete for the same registers share them evenly in time (plain round
//! robin over the whole list would not: events that always fit would shift
//! the turns), events that always fit count without a gap, and every event
//! runs with as many others as fit.
//!
//! The rotation itself is the crate's one multiplexer
//! ([`crate::multiplex::Multiplexer`]); this module is its NetBurst
//! placement ([`Events`]).

use super::driver::{CounterConfig, Error, NetBurst, NetBurstDriver};
use super::msrs::{Assignment, EscrSet};
use super::parse::EventSpec;
use super::pmi::overflow_rule;
use super::schedule::{Occupied, Part, Request, ScheduleError, schedule};
use super::thread::LogicalProcessor;
use crate::access::MsrBackend;
use crate::counter::{AnyHandle, ErasedError, Owner, StateTag};
#[cfg(any(doc, test))]
use crate::multiplex::Multiplexed;
use crate::multiplex::{PlaceOn, Placement};

/// Why events cannot be multiplexed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum MultiplexError {
    /// More events than the multiplexer holds.
    TooMany,
    /// Event `index` cannot be placed even alone on this part.
    Unschedulable {
        /// Its index.
        index: usize,
        /// Why.
        why: ScheduleError,
    },
    /// The handles are not one driver's 18 unclaimed counters in order
    /// ([`super::driver::Counters::erase_all`]): handle `index` is not.
    Handles {
        /// Its position.
        index: usize,
    },
}

impl core::fmt::Display for MultiplexError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            MultiplexError::TooMany => f.write_str("more events than the multiplexer holds"),
            MultiplexError::Unschedulable { index, why } => {
                write!(f, "event {index} cannot be counted on this part: {why}")
            }
            MultiplexError::Handles { index } => write!(
                f,
                "handle {index} is not counter {index} of the driver, unclaimed"
            ),
        }
    }
}

/// The error of a rotation: a refused transition or register access.
pub type RotateError<E> = ErasedError<Error<E>>;

/// Up to `E` events multiplexed on the 18 counters of one driver, whose
/// run-time handles it holds: the crate's one multiplexer
/// ([`crate::multiplex::Multiplexer`]) placing events through NetBurst's
/// exact scheduler ([`Events`]).
pub type Multiplexer<const E: usize> = crate::multiplex::Multiplexer<Events<E>, E>;

/// What NetBurst's [`Multiplexer`] places: the events (each an event and
/// the logical processor to count it for), the part, and the driver's 18
/// run-time handles.
#[derive(Debug)]
pub struct Events<const E: usize> {
    part: Part,
    events: [Option<Request>; E],
    handles: [AnyHandle<NetBurst>; 18],
}

impl<const E: usize> Multiplexer<E> {
    /// Multiplexes `events` (each an event and the logical processor to
    /// count it for) on `part` with `handles` (all 18 of a driver, in
    /// order and unclaimed: [`super::driver::Counters::erase_all`]).
    /// Nothing runs until the first [`Multiplexer::tick`]. Refused with
    /// the handles given back.
    #[allow(
        clippy::result_large_err,
        reason = "the error hands the handles back by value: a no_std crate has no Box"
    )]
    pub fn new(
        part: Part,
        handles: [AnyHandle<NetBurst>; 18],
        events: &[(EventSpec, LogicalProcessor)],
    ) -> Result<Self, (MultiplexError, [AnyHandle<NetBurst>; 18])> {
        if events.len() > E {
            return Err((MultiplexError::TooMany, handles));
        }
        let owner = handles[0].owner();
        if let Some(index) = (0..18).find(|&i| {
            let h = &handles[i];
            usize::from(h.index()) != i || h.state() != StateTag::Unclaimed || h.owner() != owner
        }) {
            return Err((MultiplexError::Handles { index }, handles));
        }
        let mut list = [None; E];
        for (i, &(spec, lp)) in events.iter().enumerate() {
            let r = Request::new(spec, lp);
            if let Err(why) = schedule(part, &[r], Occupied::NONE) {
                return Err((MultiplexError::Unschedulable { index: i, why }, handles));
            }
            list[i] = Some(r);
        }
        let placement = Events {
            part,
            events: list,
            handles,
        };
        Ok(Self::with_placement(placement, events.len()))
    }
}

impl<const E: usize> Events<E> {
    /// What the package's other drivers hold: its claims, less the places
    /// of the events running now.
    fn others<O: Owner, M: MsrBackend>(
        d: &NetBurstDriver<'_, O, M>,
        now: &[Option<Assignment>],
    ) -> Occupied {
        let all = d.occupied();
        let (mut escrs, mut counters) = (all.escrs(), all.counters());
        for a in now.iter().flatten() {
            escrs = escrs.difference(EscrSet::EMPTY.with(a.escr()));
            counters = counters.without(a.counter());
        }
        Occupied::NONE.with_claims(escrs, counters)
    }
}

impl<const E: usize> crate::sealed::Sealed for Events<E> {}

impl<const E: usize> Placement for Events<E> {
    type Arch = NetBurst;
    type Place = Assignment;
    type Config = CounterConfig;
    type Handles = [AnyHandle<NetBurst>; 18];

    fn handle(&mut self, a: Assignment) -> Option<&mut AnyHandle<NetBurst>> {
        self.handles.get_mut(usize::from(a.counter().index()))
    }

    fn handle_ref(&self, a: Assignment) -> Option<&AnyHandle<NetBurst>> {
        self.handles.get(usize::from(a.counter().index()))
    }

    fn config(&self, i: usize, a: Assignment) -> Option<CounterConfig> {
        let r = self.events.get(i).copied().flatten()?;
        Some(CounterConfig::counting(*r.spec(), a.escr()).on(r.processor()))
    }

    fn all_unclaimed(&self) -> bool {
        self.handles
            .iter()
            .all(|h| h.state() == StateTag::Unclaimed)
    }

    fn into_handles(self) -> [AnyHandle<NetBurst>; 18] {
        self.handles
    }
}

impl<O: Owner, M: MsrBackend, const E: usize> PlaceOn<NetBurstDriver<'_, O, M>> for Events<E> {
    fn count_mask(&self, _: &NetBurstDriver<'_, O, M>) -> u64 {
        overflow_rule().mask()
    }

    /// Events least run first join the set while the exact scheduler can
    /// still place the whole set beside what the package's other drivers
    /// hold; the set is then placed as the scheduler places it.
    fn choose(
        &self,
        d: &NetBurstDriver<'_, O, M>,
        order: &[usize],
        now: &[Option<Assignment>],
        next: &mut [Option<Assignment>],
    ) {
        let others = Self::others(d, now);
        let Some(first) = order.iter().find_map(|&i| self.events[i]) else {
            return;
        };
        let mut chosen = [0usize; 18];
        // Filled from the front; the filler is never scheduled.
        let mut set = [first; 18];
        let mut k = 0;
        for &i in order {
            let Some(r) = self.events[i] else { continue };
            if k == set.len() {
                break;
            }
            set[k] = r;
            if schedule(self.part, &set[..=k], others).is_ok() {
                chosen[k] = i;
                k += 1;
            }
        }
        if let Ok(placed) = schedule(self.part, &set[..k], others) {
            for (slot, a) in placed.as_slice().iter().enumerate() {
                next[chosen[slot]] = Some(*a);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Recording;
    use crate::arch::netburst::NetBurstPmu;
    use crate::arch::netburst::driver::Counters;
    use crate::model::netburst::{
        Config, EscrGroup, EventKind, LogicalProcessor as ModelLp, NetBurstModel, Privilege,
    };

    fn spec(s: &str) -> EventSpec {
        s.parse().unwrap()
    }

    /// The PMU the model presents, as detection reports it.
    fn cpu(m: &NetBurstModel) -> crate::detect::NetBurstCpu {
        crate::detect::detect(m, &mut m.clone())
            .unwrap()
            .usable_netburst()
            .unwrap()
    }

    /// Four events that all need FSB_ESCR0 or FSB_ESCR1 (SDM Table 19-28),
    /// so at most two count at once, and the model's view of each.
    fn events() -> ([(EventSpec, LogicalProcessor); 4], [EventKind; 4]) {
        let t0 = LogicalProcessor::T0;
        (
            [
                (spec("global_power_events:RUNNING:k"), t0),
                (spec("FSB_data_activity:DRDY_DRV:k"), t0),
                (spec("b2b_cycles:BIT1:k"), t0),
                (spec("bnr:BIT0:k"), t0),
            ],
            [
                EventKind::new(EscrGroup::Fsb, 0x13, 1),
                EventKind::new(EscrGroup::Fsb, 0x17, 1),
                EventKind::new(EscrGroup::Fsb, 0x16, 1 << 1),
                EventKind::new(EscrGroup::Fsb, 0x08, 1),
            ],
        )
    }

    /// Runs `ticks` ticks in which event `i` occurs `rate(i, t)` times in
    /// tick `t`; returns the results and the true totals.
    fn run<O: Owner>(
        ticks: u64,
        rate: &dyn Fn(usize, u64) -> u64,
    ) -> ([Multiplexed; 4], [u64; 4], u32) {
        let state = crate::testing::netburst_pmu();
        let m = NetBurstModel::new(Config::prescott_ht());
        let info = cpu(&m);
        let (mut d, c) =
            NetBurstDriver::<O, _>::take(Recording::<_, 64>::new(m), &info, &state).unwrap();
        let (list, kinds) = events();
        let mut mux = Multiplexer::<8>::new(Part::new(3, 1), c.erase_all(), &list).unwrap();
        mux.tick(&mut d, 0).unwrap();
        let mut truth = [0u64; 4];
        let mut most_at_once = 0;
        for t in 0..ticks {
            most_at_once = most_at_once.max(mux.running().count() as u32);
            for (i, k) in kinds.iter().enumerate() {
                let n = rate(i, t);
                d.msr()
                    .inner_mut()
                    .inject(k.on(ModelLp::T0, Privilege::Os, n));
                truth[i] += n;
            }
            mux.tick(&mut d, 1).unwrap();
        }
        mux.finish(&mut d, 0).unwrap();
        let results: [Multiplexed; 4] = core::array::from_fn(|i| mux.results()[i]);
        assert!(mux.into_handles().is_ok(), "every counter released");
        let _ = d.retire();
        (results, truth, most_at_once)
    }

    // The shared estimate tests ([`crate::multiplex::estimate_tests`]) on
    // four events that all need FSB_ESCR0 or FSB_ESCR1: two at once.
    crate::multiplex::estimate_test_fns!(run);

    /// Events that always fit do not shift the competing events' turns:
    /// with instr_retired (CRU_ESCR0/1) beside the four FSB events, it runs
    /// every tick and each FSB event exactly half of them.
    #[test]
    fn events_that_always_fit_leave_the_shares_even() {
        crate::owner!(Shares);
        let state = crate::testing::netburst_pmu();
        let m = NetBurstModel::new(Config::prescott_ht());
        let info = cpu(&m);
        let (mut d, c) = NetBurstDriver::<Shares, _>::take(m, &info, &state).unwrap();
        let (four, _) = events();
        let mut list = [(spec("instr_retired:NBOGUSNTAG:k"), LogicalProcessor::T0); 5];
        list[1..].copy_from_slice(&four);
        let mut mux = Multiplexer::<5>::new(Part::new(3, 1), c.erase_all(), &list).unwrap();
        mux.tick(&mut d, 0).unwrap();
        for _ in 0..120 {
            mux.tick(&mut d, 1).unwrap();
        }
        mux.finish(&mut d, 0).unwrap();
        let running = mux.results().iter().map(|m| m.running);
        assert!(running.eq([120, 60, 60, 60, 60]), "{:?}", mux.results());
        assert!(mux.into_handles().is_ok());
        let _ = d.retire();
    }

    /// An event the part cannot count at all is refused up front, with the
    /// handles given back.
    #[test]
    fn an_unschedulable_event_is_refused() {
        crate::owner!(Refused);
        let state = crate::testing::netburst_pmu();
        let m = NetBurstModel::new(Config::northwood());
        let info = cpu(&m);
        let (_d, c) = NetBurstDriver::<Refused, _>::take(m, &info, &state).unwrap();
        // instr_completed exists only on models 3, 4 and 6.
        let bad = [(
            spec("netburst_p::instr_completed:NBOGUS:k"),
            LogicalProcessor::T0,
        )];
        let Err((e, handles)) = Multiplexer::<2>::new(Part::new(2, 9), c.erase_all(), &bad) else {
            panic!("accepted");
        };
        assert!(
            matches!(e, MultiplexError::Unschedulable { index: 0, .. }),
            "{e}"
        );
        assert_eq!(handles.len(), 18);
        let too_many = [(spec("global_power_events:RUNNING:k"), LogicalProcessor::T0); 3];
        assert!(matches!(
            Multiplexer::<2>::new(Part::new(2, 9), handles, &too_many),
            Err((MultiplexError::TooMany, _))
        ));
    }

    /// The model with time passing at every access (one instr_retired and
    /// one of each FSB event before each), and accesses refused from
    /// `fail_at` on, until `fail_until`.
    struct Timed {
        m: NetBurstModel,
        accesses: u64,
        fail_at: u64,
        fail_until: u64,
    }

    impl Timed {
        fn access(&mut self) -> Result<(), crate::model::netburst::Fault> {
            self.accesses += 1;
            let (_, kinds) = events();
            for k in kinds.iter().chain([&RETIRED]) {
                self.m.inject(k.on(ModelLp::T0, Privilege::Os, 1));
            }
            if (self.fail_at..self.fail_until).contains(&self.accesses) {
                // Any refused access: MSR 0 is not a PMU register.
                crate::access::MsrAccess::read_msr(&mut self.m, 0)?;
            }
            Ok(())
        }
    }

    impl crate::access::MsrAccess for Timed {
        type Error = crate::model::netburst::Fault;
        fn read_msr(&mut self, msr: u32) -> Result<u64, Self::Error> {
            self.access()?;
            crate::access::MsrAccess::read_msr(&mut self.m, msr)
        }
        fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Self::Error> {
            self.access()?;
            crate::access::MsrAccess::write_msr(&mut self.m, msr, value)
        }
        fn rdpmc(&mut self, index: u32) -> Result<u64, Self::Error> {
            self.access()?;
            crate::access::MsrAccess::rdpmc(&mut self.m, index)
        }
    }

    /// instr_retired, NBOGUSNTAG (CRU_ESCR0/1).
    const RETIRED: EventKind = EventKind::new(EscrGroup::Cru01, 0x02, 1);

    fn timed<O: Owner>(state: &NetBurstPmu) -> (NetBurstDriver<'_, O, Timed>, Counters<O>) {
        let m = NetBurstModel::new(Config::prescott_ht());
        let info = cpu(&m);
        let t = Timed {
            m,
            accesses: 0,
            fail_at: u64::MAX,
            fail_until: u64::MAX,
        };
        NetBurstDriver::take(t, &info, state).unwrap()
    }

    fn with_retired() -> [(EventSpec, LogicalProcessor); 5] {
        let (four, _) = events();
        let mut list = [(spec("instr_retired:NBOGUSNTAG:k"), LogicalProcessor::T0); 5];
        list[1..].copy_from_slice(&four);
        list
    }

    /// An event that always fits stays on its counter across rotations, so
    /// it misses nothing even though every register access takes time: its
    /// count is the true count exactly (the events during the rotations'
    /// own accesses included). The competing events, moved every tick,
    /// miss the events during their own reconfiguration.
    #[test]
    fn an_event_that_always_fits_counts_without_a_gap() {
        crate::owner!(Gapless);
        let state = crate::testing::netburst_pmu();
        let (mut d, c) = timed::<Gapless>(&state);
        let mut mux =
            Multiplexer::<5>::new(Part::new(3, 1), c.erase_all(), &with_retired()).unwrap();
        mux.tick(&mut d, 0).unwrap();
        let start = d.msr().accesses;
        for _ in 0..50 {
            mux.tick(&mut d, 1).unwrap();
        }
        let end = d.msr().accesses;
        mux.finish(&mut d, 0).unwrap();
        // instr_retired counted from after its enabling write to its last
        // read: every access in between brought one.
        let retired = mux.results()[0];
        assert_eq!(retired.running, retired.enabled);
        assert!(retired.raw >= end - start, "{retired:?}");
        assert_eq!(retired.estimate(), Some(retired.raw));
        let moved = mux.results()[1];
        assert!(moved.raw < moved.running * (end - start) / 50, "{moved:?}");
        assert!(mux.into_handles().is_ok());
    }

    /// A rotation whose register accesses fail keeps every claimed counter
    /// tracked: the next tick goes on and `finish` releases them all, so
    /// the driver can be given back.
    #[test]
    fn a_failed_rotation_leaks_no_counter() {
        for fail_after in 1..12 {
            crate::owner!(Failing);
            let state = crate::testing::netburst_pmu();
            let (mut d, c) = timed::<Failing>(&state);
            let mut mux =
                Multiplexer::<5>::new(Part::new(3, 1), c.erase_all(), &with_retired()).unwrap();
            mux.tick(&mut d, 0).unwrap();
            mux.tick(&mut d, 1).unwrap();
            let t = d.msr();
            (t.fail_at, t.fail_until) = (t.accesses + fail_after, t.accesses + fail_after + 1);
            assert!(mux.tick(&mut d, 1).is_err(), "access {fail_after} refused");
            mux.tick(&mut d, 1).unwrap();
            mux.finish(&mut d, 0).unwrap();
            assert!(mux.into_handles().is_ok(), "failing access {fail_after}");
            assert!(d.claimed().is_empty());
            let _ = d.retire();
        }
    }

    /// Handles that are not one driver's 18 in order, unclaimed, are
    /// refused and given back.
    #[test]
    fn the_handles_are_checked() {
        crate::owner!(Checked);
        let state = crate::testing::netburst_pmu();
        let m = NetBurstModel::new(Config::prescott_ht());
        let info = cpu(&m);
        let (mut d, c) = NetBurstDriver::<Checked, _>::take(m, &info, &state).unwrap();
        let mut handles = c.erase_all();
        handles.swap(3, 4);
        let Err((e, mut handles)) =
            Multiplexer::<5>::new(Part::new(3, 1), handles, &with_retired())
        else {
            panic!("handles out of order accepted");
        };
        assert_eq!(e, MultiplexError::Handles { index: 3 });
        handles.swap(3, 4);
        handles[12]
            .configure(
                &mut d,
                &CounterConfig::counting(
                    spec("instr_retired:NBOGUSNTAG:k"),
                    super::super::Escr::CruEscr0,
                ),
            )
            .unwrap();
        let Err((e, mut handles)) =
            Multiplexer::<5>::new(Part::new(3, 1), handles, &with_retired())
        else {
            panic!("a claimed handle accepted");
        };
        assert_eq!(e, MultiplexError::Handles { index: 12 });
        assert_eq!(
            e.to_string(),
            "handle 12 is not counter 12 of the driver, unclaimed"
        );
        handles[12].release(&mut d).unwrap();
    }
}

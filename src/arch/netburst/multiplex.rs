//! Multiplexing on NetBurst: more events than the PMU holds at once, each
//! counted part of the time, rotated on the caller's timer tick through the
//! exact scheduler ([`super::schedule`]), each reported with its time
//! enabled, time running and scaled estimate ([`Multiplexed`]).
//!
//! On each [`Multiplexer::tick`] the events that ran are read and released,
//! every event is charged the tick's time (the running ones their counts
//! too), and the next set is chosen: starting one event further along the
//! list each tick (round robin), each event joins the set if the scheduler
//! can still place the whole set (SDM Table 18-63's ESCR and counter
//! wiring, Tables 19-28/19-29's ESCRs per event); the set is then
//! programmed on the counters the schedule names. So every event runs, in
//! turn, with as many others as fit.

use super::driver::{CounterConfig, Error, NetBurst, NetBurstDriver};
use super::parse::EventSpec;
use super::schedule::{Occupied, Part, Request, ScheduleError, schedule};
use super::thread::LogicalProcessor;
use crate::access::MsrAccess;
use crate::counter::{AnyHandle, ErasedError, Owner, StateTag};
use crate::multiplex::Multiplexed;

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
}

impl core::fmt::Display for MultiplexError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            MultiplexError::TooMany => f.write_str("more events than the multiplexer holds"),
            MultiplexError::Unschedulable { index, why } => {
                write!(f, "event {index} cannot be counted on this part: {why}")
            }
        }
    }
}

/// The error of a rotation: a refused transition or register access.
pub type RotateError<E> = ErasedError<Error<E>>;

/// Up to `E` events multiplexed on the 18 counters of one driver, whose
/// run-time handles it holds.
#[derive(Debug)]
pub struct Multiplexer<const E: usize> {
    part: Part,
    events: [Option<Request>; E],
    n: usize,
    counts: [Multiplexed; E],
    /// The counter each running event is on.
    on: [Option<u8>; E],
    next: usize,
    handles: [AnyHandle<NetBurst>; 18],
}

impl<const E: usize> Multiplexer<E> {
    /// Multiplexes `events` (each an event and the logical processor to
    /// count it for) on `part` with `handles` (all 18 of a driver,
    /// [`super::driver::Counters::erase_all`], unclaimed). Nothing runs
    /// until the first [`Multiplexer::tick`]. Refused with the handles
    /// given back.
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
        let mut m = Multiplexer {
            part,
            events: [None; E],
            n: events.len(),
            counts: [Multiplexed::default(); E],
            on: [None; E],
            next: 0,
            handles,
        };
        for (i, &(spec, lp)) in events.iter().enumerate() {
            let r = Request::new(spec, lp);
            if let Err(why) = schedule(part, &[r], Occupied::NONE) {
                return Err((MultiplexError::Unschedulable { index: i, why }, m.handles));
            }
            m.events[i] = Some(r);
        }
        Ok(m)
    }

    /// One rotation: the running events are read and released, every event
    /// is charged `dt` (the running ones their counts), and the next set is
    /// programmed and enabled. The first call (with `dt` 0) starts.
    pub fn tick<O: Owner, M: MsrAccess>(
        &mut self,
        d: &mut NetBurstDriver<'_, O, M>,
        dt: u64,
    ) -> Result<(), RotateError<M::Error>> {
        self.stop(d, dt)?;
        self.start_next(d)
    }

    /// Reads and releases the running events and charges every event `dt`.
    fn stop<O: Owner, M: MsrAccess>(
        &mut self,
        d: &mut NetBurstDriver<'_, O, M>,
        dt: u64,
    ) -> Result<(), RotateError<M::Error>> {
        for i in 0..self.n {
            let counted = match self.on[i].take() {
                Some(c) => {
                    let h = &mut self.handles[usize::from(c)];
                    let v = h.read(d)?;
                    h.release(d)?;
                    Some(v)
                }
                None => None,
            };
            self.counts[i].account(dt, counted.is_some(), counted.unwrap_or(0));
        }
        Ok(())
    }

    /// Picks the next set (round robin, as many as the scheduler places)
    /// and starts it.
    fn start_next<O: Owner, M: MsrAccess>(
        &mut self,
        d: &mut NetBurstDriver<'_, O, M>,
    ) -> Result<(), RotateError<M::Error>> {
        let Some(first) = self.events[..self.n].iter().flatten().next() else {
            return Ok(());
        };
        let mut chosen = [0usize; 18];
        // Filled from the front; the filler is never scheduled.
        let mut set = [*first; 18];
        let mut k = 0;
        for j in 0..self.n {
            let i = (self.next + j) % self.n;
            let Some(r) = self.events[i] else { continue };
            if k == set.len() {
                break;
            }
            set[k] = r;
            if schedule(self.part, &set[..=k], Occupied::NONE).is_ok() {
                chosen[k] = i;
                k += 1;
            }
        }
        self.next = (self.next + 1) % self.n;
        let Ok(placed) = schedule(self.part, &set[..k], Occupied::NONE) else {
            return Ok(());
        };
        for (slot, a) in placed.as_slice().iter().enumerate() {
            let i = chosen[slot];
            let r = &set[slot];
            let c = a.counter().index();
            let h = &mut self.handles[usize::from(c)];
            h.configure(
                d,
                &CounterConfig::counting(*r.spec(), a.escr()).on(r.processor()),
            )?;
            h.enable(d)?;
            self.on[i] = Some(c);
        }
        Ok(())
    }

    /// Ends the run: the last `dt` charged, every counter released.
    pub fn finish<O: Owner, M: MsrAccess>(
        &mut self,
        d: &mut NetBurstDriver<'_, O, M>,
        dt: u64,
    ) -> Result<(), RotateError<M::Error>> {
        self.stop(d, dt)
    }

    /// The events' counts so far, in the order given.
    pub fn results(&self) -> &[Multiplexed] {
        &self.counts[..self.n]
    }

    /// Which events are on a counter now.
    pub fn running(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.n).filter(|&i| self.on[i].is_some())
    }

    /// The handles back, once nothing runs (after [`Multiplexer::finish`]);
    /// `Err(self)` while an event is still on a counter.
    #[allow(
        clippy::result_large_err,
        reason = "hands the multiplexer back by value"
    )]
    pub fn into_handles(self) -> Result<[AnyHandle<NetBurst>; 18], Self> {
        if self
            .handles
            .iter()
            .any(|h| h.state() != StateTag::Unclaimed)
        {
            return Err(self);
        }
        Ok(self.handles)
    }
}

#[cfg(test)]
mod tests {
    use std::println;

    use super::*;
    use crate::access::Recording;
    use crate::arch::netburst::pmi::PmiState;
    use crate::model::netburst::{
        Config, EscrGroup, EventKind, LogicalProcessor as ModelLp, NetBurstModel, Privilege,
    };

    fn spec(s: &str) -> EventSpec {
        s.parse().unwrap()
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
        rate: impl Fn(usize, u64) -> u64,
    ) -> ([Multiplexed; 4], [u64; 4], u32) {
        let state = PmiState::new();
        let m = NetBurstModel::new(Config::prescott_ht());
        let info = crate::detect::NetBurst {
            model: 3,
            msr_instructions: true,
            perf_mon_available: true,
            pebs_available: true,
            hyper_threading: true,
            logical_processors: 2,
        };
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
        assert!(d.give_back().is_ok());
        (results, truth, most_at_once)
    }

    /// Constant rates: every event runs half the time (two of the four fit
    /// at once), and the scaled estimate is exact.
    #[test]
    fn constant_rates_are_estimated_exactly() {
        crate::owner!(Constant);
        let rates = [100, 37, 5, 250];
        let (results, truth, most) = run::<Constant>(400, |i, _| rates[i]);
        assert_eq!(most, 2, "two FSB ESCRs: two events at once");
        for i in 0..4 {
            assert_eq!(results[i].enabled, 400);
            assert_eq!(results[i].running, 200, "round robin: half the ticks each");
            assert_eq!(results[i].estimate(), Some(truth[i]), "event {i}");
        }
    }

    /// Rates that change over time: the estimates' error is measured (and
    /// printed: 0 %, 0.25 %, 0 %, 0 % for a ramp, a decline, a square wave
    /// and a rate doubling every 100 ticks, since round robin gives each
    /// event two of every four ticks, evenly spread) and stays under 1 %.
    #[test]
    fn changing_rates_are_estimated_within_a_bound() {
        let rate = |i: usize, t: u64| match i {
            0 => 100 + t / 4, // a slow ramp
            1 => 300 - t / 2, // a slow decline
            2 => {
                if (t / 50).is_multiple_of(2) {
                    10
                } else {
                    30
                }
            } // a square wave
            _ => 20 << (t / 100), // doubling every 100 ticks
        };
        crate::owner!(Changing);
        let (results, truth, _) = run::<Changing>(400, rate);
        let mut worst = [0f64; 4];
        for i in 0..4 {
            let est = results[i].estimate().unwrap() as f64;
            let err = (est - truth[i] as f64).abs() / truth[i] as f64;
            worst[i] = err;
            println!(
                "multiplexed event {i}: true {} estimate {} (raw {} running {}/{}): error {:.3} %",
                truth[i],
                est,
                results[i].raw,
                results[i].running,
                results[i].enabled,
                err * 100.0
            );
        }
        assert!(worst.iter().all(|&e| e < 0.01), "{worst:?}");
        assert!(
            worst[1] > 0.0,
            "the decline is not sampled evenly: a real error"
        );
    }

    /// An event the part cannot count at all is refused up front, with the
    /// handles given back.
    #[test]
    fn an_unschedulable_event_is_refused() {
        crate::owner!(Refused);
        let state = PmiState::new();
        let m = NetBurstModel::new(Config::northwood());
        let info = crate::detect::NetBurst {
            model: 2,
            msr_instructions: true,
            perf_mon_available: true,
            pebs_available: true,
            hyper_threading: false,
            logical_processors: 1,
        };
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
}

//! Multiplexing on the architectural PMU: more events than it has general
//! counters, rotated on the caller's timer tick, each reported with its
//! time enabled, time running and scaled estimate ([`Multiplexed`]).
//!
//! Any architectural or raw event runs on any general counter (the
//! model-specific counter restrictions some events have are out of scope),
//! so placement is simple: on each [`Multiplexer::tick`] the running events
//! are read, every event is charged the tick's time ([`Rotation`]), and the
//! events least run so far take the general counters (those the firmware
//! does not use). An event that stays keeps its counter and counts on
//! untouched; the others are released and the newcomers configured on the
//! freed counters. The whole change is one bracket of the driver
//! ([`crate::counter::Driver::freeze`]): the departing events stop and the
//! arriving ones start with one `IA32_PERF_GLOBAL_CTRL` write.
//!
//! (On a register-level model: a doc test with the `model` feature, ignored without it.)
//!
#![cfg_attr(feature = "model", doc = "```")]
#![cfg_attr(not(feature = "model"), doc = "```ignore")]
//! use pmu::arch::archperf::driver::{ArchPerfDriver, Counters};
//! use pmu::arch::archperf::multiplex::Multiplexer;
//! use pmu::arch::archperf::{ArchPerfPmu, EventSpec};
//! use pmu::model::archperf::{ArchPerfModel, Config, Event};
//!
//! // SAFETY: the model is a logical processor of its own; this is its value.
//! let cpu0 = unsafe { ArchPerfPmu::new() };
//! pmu::owner!(Cpu0);
//! let model = ArchPerfModel::new(Config::core2()); // 2 general counters
//! let cpu = pmu::detect::detect(&model, &mut model.clone())?.arch_perf().unwrap();
//! let (mut d, c) = ArchPerfDriver::<Cpu0, _>::take(model, &cpu, &cpu0)?;
//! let events = [0x10, 0x11, 0x12].map(|s| EventSpec::raw(s, 0));
//! let mut m = Multiplexer::<3>::new(d.cpu(), c.erase_all(), &events).map_err(|(e, _)| e)?;
//! m.tick(&mut d, 0)?;
//! for _ in 0..30 {
//!     for s in [0x10, 0x11, 0x12] {
//!         d.msr().inject(Event::new(s, 0, 100)); // 100 of each per tick
//!     }
//!     m.tick(&mut d, 1)?;
//! }
//! m.finish(&mut d, 0)?;
//! for r in m.results() {
//!     assert_eq!((r.enabled, r.running, r.estimate()), (30, 20, Some(3000)));
//! }
//! let counters = Counters::<Cpu0>::from_erased(m.into_handles().map_err(|_| "running")?)
//!     .map_err(|_| "not whole")?;
//! let _model = d.give_back(counters);
//! # Ok::<(), Box<dyn core::error::Error>>(())
//! ```

use super::driver::{ArchPerfDriver, ArchPerfmon, CounterConfig, Error};
use super::enumeration::{Lack, check_event};
use super::events::EventSpec;
use super::msrs::{Counter, MAX_GENERAL};
use crate::access::MsrBackend;
use crate::counter::{AnyHandle, ErasedError, Owner, StateTag};
use crate::detect::ArchPerfCpu;
#[cfg(doc)]
use crate::multiplex::{Multiplexed, Rotation};
use crate::multiplex::{PlaceOn, Placement, foreign_handle};

/// The handles of a driver in [`super::driver::Counters::erase_all`]'s
/// form.
pub type Handles = [Option<AnyHandle<ArchPerfmon>>; 12];

/// Why events cannot be multiplexed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum MultiplexError {
    /// More events than the multiplexer holds.
    TooMany,
    /// The handles are not one driver's unclaimed counters in
    /// [`super::driver::Counters::erase_all`]'s order: handle `index` is
    /// not.
    Handles {
        /// Its position.
        index: usize,
    },
    /// Event `index` counts on no general counter: a fixed counter's
    /// pseudo-encoding such as `ref-cycles` (event select 00H; see
    /// [`EventSpec::counts_on_general`]), which the multiplexer cannot
    /// place.
    NotGeneral {
        /// Its position.
        index: usize,
        /// The fixed counter that counts it, if one does.
        fixed: Option<u8>,
    },
    /// Event `index` is an architectural event this CPU (on a hybrid
    /// part: this core type) does not count ([`Lack`]).
    NotOnThisCpu {
        /// Its position.
        index: usize,
        /// What the CPU lacks, and where its CPUID says so.
        lack: Lack,
    },
}

impl core::fmt::Display for MultiplexError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            MultiplexError::TooMany => f.write_str("more events than the multiplexer holds"),
            MultiplexError::Handles { index } => write!(
                f,
                "handle {index} is not the driver's counter of that place, unclaimed"
            ),
            MultiplexError::NotGeneral {
                index,
                fixed: Some(fixed),
            } => write!(
                f,
                "event {index} counts on fixed counter {fixed} only, and the multiplexer places events on general counters: configure fixed counter {fixed} for it"
            ),
            MultiplexError::NotGeneral { index, fixed: None } => write!(
                f,
                "event {index} has event select 00H, which no general counter counts (a fixed counter's pseudo-encoding)"
            ),
            MultiplexError::NotOnThisCpu { index, lack } => write!(f, "event {index}: {lack}"),
        }
    }
}

impl core::error::Error for MultiplexError {}

/// The error of a rotation: a refused transition or register access.
pub type RotateError<E> = ErasedError<Error<E>>;

/// Up to `E` events multiplexed on the general counters of one driver,
/// whose run-time handles it holds: the crate's one multiplexer
/// ([`crate::multiplex::Multiplexer`]) placing events on the general
/// counters ([`Events`]).
pub type Multiplexer<const E: usize> = crate::multiplex::Multiplexer<Events<E>, E>;

/// What the architectural PMU's [`Multiplexer`] places: the events and the
/// driver's run-time handles.
#[derive(Debug)]
pub struct Events<const E: usize> {
    events: [EventSpec; E],
    handles: Handles,
}

impl<const E: usize> Multiplexer<E> {
    /// Multiplexes `events` with `handles` (a driver's, unclaimed, as
    /// [`super::driver::Counters::erase_all`] gives them) on the logical
    /// processor `cpu` describes (the driver's
    /// [`ArchPerfDriver::cpu`]): the general counters the handles are, the
    /// events `cpu` counts. Nothing runs until the first
    /// [`Multiplexer::tick`]. Refused with the handles given back, for an
    /// event no general counter counts ([`MultiplexError::NotGeneral`]:
    /// `ref-cycles`, `slots`) and for an architectural event `cpu` lacks
    /// ([`MultiplexError::NotOnThisCpu`]: on a hybrid part, per core type).
    #[allow(
        clippy::result_large_err,
        reason = "the error hands the handles back by value: a no_std crate has no Box"
    )]
    pub fn new(
        cpu: &ArchPerfCpu,
        handles: Handles,
        events: &[EventSpec],
    ) -> Result<Self, (MultiplexError, Handles)> {
        if events.len() > E {
            return Err((MultiplexError::TooMany, handles));
        }
        if let Some(index) = events.iter().position(|e| !e.counts_on_general()) {
            let fixed = events[index].fixed_counter();
            return Err((MultiplexError::NotGeneral { index, fixed }, handles));
        }
        for (index, e) in events.iter().enumerate() {
            if let Err(lack) = check_event(cpu, e) {
                return Err((MultiplexError::NotOnThisCpu { index, lack }, handles));
            }
        }
        const PLACES: [u8; 12] = [0, 1, 2, 3, 4, 5, 6, 7, 32, 33, 34, 35];
        if let Some(index) = foreign_handle(&handles, |i| PLACES.get(i).copied()) {
            return Err((MultiplexError::Handles { index }, handles));
        }
        let mut list = [EventSpec::raw(0, 0); E];
        list[..events.len()].copy_from_slice(events);
        let placement = Events {
            events: list,
            handles,
        };
        Ok(Self::with_placement(placement, events.len()))
    }
}

impl<const E: usize> Events<E> {
    /// Whether general counter `n` can take an event: it has a handle and
    /// the firmware does not use it.
    fn usable<O: Owner, M: MsrBackend>(&self, d: &ArchPerfDriver<'_, O, M>, n: u8) -> bool {
        self.handles[usize::from(n)].is_some()
            && Counter::general(n).is_some_and(|c| !d.firmware().contains(c))
    }
}

impl<const E: usize> crate::sealed::Sealed for Events<E> {}

impl<const E: usize> Placement for Events<E> {
    type Arch = ArchPerfmon;
    /// A general counter's number.
    type Place = u8;
    type Config = CounterConfig;
    type Handles = Handles;

    fn handle(&mut self, n: u8) -> Option<&mut AnyHandle<ArchPerfmon>> {
        self.handles.get_mut(usize::from(n))?.as_mut()
    }

    fn handle_ref(&self, n: u8) -> Option<&AnyHandle<ArchPerfmon>> {
        self.handles.get(usize::from(n))?.as_ref()
    }

    fn config(&self, i: usize, _: u8) -> Option<CounterConfig> {
        Some(CounterConfig::counting(*self.events.get(i)?))
    }

    fn all_unclaimed(&self) -> bool {
        self.handles
            .iter()
            .flatten()
            .all(|h| h.state() == StateTag::Unclaimed)
    }

    fn into_handles(self) -> Handles {
        self.handles
    }
}

impl<O: Owner, M: MsrBackend, const E: usize> PlaceOn<ArchPerfDriver<'_, O, M>> for Events<E> {
    fn count_mask(&self, d: &ArchPerfDriver<'_, O, M>) -> u64 {
        d.overflow_rule().mask()
    }

    /// The events least run first take the usable general counters: those
    /// running keep theirs, the others (in the order given) the lowest
    /// usable counters left free.
    fn choose(
        &self,
        d: &ArchPerfDriver<'_, O, M>,
        order: &[usize],
        now: &[Option<u8>],
        next: &mut [Option<u8>],
    ) {
        let usable = (0..MAX_GENERAL).filter(|&n| self.usable(d, n)).count();
        let mut chosen = [false; E];
        for &i in order.iter().take(usable) {
            chosen[i] = true;
            next[i] = now[i];
        }
        for i in (0..next.len()).filter(|&i| chosen[i] && now[i].is_none()) {
            let taken = |n: u8| next.contains(&Some(n));
            next[i] = (0..MAX_GENERAL).find(|&n| self.usable(d, n) && !taken(n));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::vec::Vec;

    use super::*;
    use crate::access::{Access, MsrAccess, Recording};
    use crate::arch::archperf::ArchEvent;
    use crate::arch::archperf::IA32_PERFEVTSEL0;
    use crate::arch::archperf::driver::Counters;
    use crate::arch::archperf::enumeration::Missing;
    use crate::model::archperf::{ArchPerfModel, Config, Event};
    use crate::multiplex::Multiplexed;

    fn take<O: Owner>(
        pmu: &crate::arch::archperf::ArchPerfPmu,
        m: ArchPerfModel,
    ) -> (
        ArchPerfDriver<'_, O, Recording<ArchPerfModel, 64>>,
        Counters<O>,
    ) {
        let cpu = crate::detect::detect(&m, &mut m.clone())
            .unwrap()
            .arch_perf()
            .unwrap();
        ArchPerfDriver::take(Recording::new(m), &cpu, pmu).unwrap()
    }

    fn inject<O: Owner>(
        d: &mut ArchPerfDriver<'_, O, Recording<ArchPerfModel, 64>>,
        select: u8,
        n: u64,
    ) {
        d.msr().inner_mut().inject(Event::new(select, 0, n));
    }

    /// Runs `ticks` ticks of four events on a part with two general
    /// counters (a Core 2) in which event `i` occurs `rate(i, t)` times in
    /// tick `t`; returns the results, the true totals and the most events
    /// that ran at once.
    fn run<O: Owner>(
        ticks: u64,
        rate: &dyn Fn(usize, u64) -> u64,
    ) -> ([Multiplexed; 4], [u64; 4], u32) {
        let pmu = crate::testing::archperf_pmu();
        let (mut d, c) = take::<O>(&pmu, ArchPerfModel::new(Config::core2()));
        let selects = [0x10u8, 0x11, 0x12, 0x13];
        let events = selects.map(|s| EventSpec::raw(s, 0));
        let mut m = Multiplexer::<4>::new(d.cpu(), c.erase_all(), &events)
            .map_err(|(e, _)| e)
            .unwrap();
        m.tick(&mut d, 0).unwrap();
        let (mut truth, mut most) = ([0u64; 4], 0);
        for t in 0..ticks {
            most = most.max(m.running().count() as u32);
            for (i, s) in selects.into_iter().enumerate() {
                inject(&mut d, s, rate(i, t));
                truth[i] += rate(i, t);
            }
            m.tick(&mut d, 1).unwrap();
        }
        m.finish(&mut d, 0).unwrap();
        let results: [Multiplexed; 4] = core::array::from_fn(|i| m.results()[i]);
        let c = Counters::<O>::from_erased(m.into_handles().unwrap()).unwrap();
        let _ = d.give_back(c);
        (results, truth, most)
    }

    // The shared estimate tests ([`crate::multiplex::estimate_tests`]), the
    // same workloads as NetBurst's: four events, two general counters.
    crate::multiplex::estimate_test_fns!(run);

    /// Six events on four general counters at constant rates: each runs
    /// two thirds of the time, the estimates are exact, and each rotation
    /// writes GLOBAL_CTRL once.
    #[test]
    fn constant_rates_are_estimated_exactly_with_one_global_write_per_tick() {
        crate::owner!(Cpu);
        let pmu = crate::testing::archperf_pmu();
        let (mut d, c) = take::<Cpu>(&pmu, ArchPerfModel::new(Config::skylake()));
        let selects = [0x10u8, 0x11, 0x12, 0x13, 0x14, 0x15];
        let events = selects.map(|s| EventSpec::raw(s, 0));
        let mut m = Multiplexer::<6>::new(d.cpu(), c.erase_all(), &events)
            .map_err(|(e, _)| e)
            .unwrap();
        m.tick(&mut d, 0).unwrap();
        let mut rotations = 0;
        for _ in 0..300 {
            for (k, s) in selects.into_iter().enumerate() {
                inject(&mut d, s, 10 * (k as u64 + 1));
            }
            d.msr().clear();
            m.tick(&mut d, 1).unwrap();
            let log = d.msr().log();
            let writes_to = |m: u32| {
                log.iter()
                    .filter(|a| matches!(a, Access::WriteMsr { msr, .. } if *msr == m))
                    .count()
            };
            let global = writes_to(crate::arch::archperf::IA32_PERF_GLOBAL_CTRL);
            let moved = (0..4)
                .map(|n| writes_to(IA32_PERFEVTSEL0 + n))
                .sum::<usize>();
            assert_eq!(
                global,
                usize::from(moved > 0),
                "one GLOBAL_CTRL write when events move"
            );
            rotations += usize::from(moved > 0);
            let t = d.msr().take_counts();
            assert_eq!(t.rdpmc, 4, "the running events read");
        }
        // Six events, four counters: two of every three ticks move two
        // events; the third keeps the set (least run first).
        assert_eq!(rotations, 200);
        m.finish(&mut d, 0).unwrap();
        for (k, r) in m.results().iter().enumerate() {
            assert_eq!((r.enabled, r.running), (300, 200), "event {k}");
            assert_eq!(r.estimate(), Some(300 * 10 * (k as u64 + 1)), "event {k}");
        }
        let handles = m.into_handles().unwrap();
        let c = Counters::<Cpu>::from_erased(handles).unwrap();
        assert_eq!(d.msr().inner_mut().read_msr(IA32_PERFEVTSEL0).unwrap(), 0);
        let _ = d.give_back(c);
    }

    /// The firmware's counter is left out of the rotation; events that fit
    /// always run.
    #[test]
    fn the_firmwares_counters_are_not_used() {
        crate::owner!(Cpu);
        let pmu = crate::testing::archperf_pmu();
        let mut model = ArchPerfModel::new(Config::core2());
        model
            .write_msr(IA32_PERFEVTSEL0 + 1, 0x3C | 1 << 17 | 1 << 22)
            .unwrap();
        let (mut d, c) = take::<Cpu>(&pmu, model);
        let events = [0x20u8, 0x21].map(|s| EventSpec::raw(s, 0));
        let mut m = Multiplexer::<2>::new(d.cpu(), c.erase_all(), &events)
            .map_err(|(e, _)| e)
            .unwrap();
        m.tick(&mut d, 0).unwrap();
        for _ in 0..10 {
            inject(&mut d, 0x20, 7);
            inject(&mut d, 0x21, 3);
            m.tick(&mut d, 1).unwrap();
            assert_eq!(m.running().count(), 1, "one general counter left");
        }
        m.finish(&mut d, 0).unwrap();
        let r: Vec<_> = m
            .results()
            .iter()
            .map(|r| (r.running, r.estimate()))
            .collect();
        assert_eq!(r, [(5, Some(70)), (5, Some(30))]);
        assert_eq!(
            d.msr().inner_mut().read_msr(IA32_PERFEVTSEL0 + 1).unwrap(),
            0x3C | 1 << 17 | 1 << 22,
            "untouched"
        );
    }

    /// Handles that are not a driver's unclaimed set are refused, and come
    /// back.
    #[test]
    fn foreign_or_claimed_handles_are_refused() {
        crate::owner!(Cpu);
        let pmu = crate::testing::archperf_pmu();
        let (mut d, c) = take::<Cpu>(&pmu, ArchPerfModel::new(Config::skylake()));
        let mut all = c.erase_all();
        if let Some(h) = all[1].as_mut() {
            h.configure(&mut d, &CounterConfig::counting(EventSpec::raw(0x3C, 0)))
                .unwrap();
        }
        let Err((e, mut all)) = Multiplexer::<2>::new(d.cpu(), all, &[EventSpec::raw(0x10, 0)])
        else {
            panic!("a claimed handle taken")
        };
        assert_eq!(e, MultiplexError::Handles { index: 1 });
        if let Some(h) = all[1].as_mut() {
            h.release(&mut d).unwrap();
        }
        let Err((e, all)) = Multiplexer::<1>::new(d.cpu(), all, &[EventSpec::raw(0x10, 0); 2])
        else {
            panic!("too many events")
        };
        assert_eq!(e, MultiplexError::TooMany);
        // `ref-cycles` and `slots` count on their fixed counters only
        // (Linux's pseudo-encodings), event select 00H on no counter.
        let mut all = all;
        for (events, index, fixed, message) in [
            (
                ["bus-cycles", "ref-cycles"],
                1,
                Some(2),
                "event 1 counts on fixed counter 2 only, and the multiplexer places events on general counters: configure fixed counter 2 for it",
            ),
            (
                ["slots", "cycles"],
                0,
                Some(3),
                "event 0 counts on fixed counter 3 only, and the multiplexer places events on general counters: configure fixed counter 3 for it",
            ),
            (
                ["cycles", "event=0,umask=7"],
                1,
                None,
                "event 1 has event select 00H, which no general counter counts (a fixed counter's pseudo-encoding)",
            ),
        ] {
            let events = events.map(|s| s.parse::<EventSpec>().unwrap());
            let Err((e, back)) = Multiplexer::<2>::new(d.cpu(), all, &events) else {
                panic!("{events:?} taken")
            };
            assert_eq!(e, MultiplexError::NotGeneral { index, fixed });
            assert_eq!(e.to_string(), message);
            all = back;
        }
        // An architectural event this CPU lacks: a Skylake's leaf 0AH
        // enumerates events 0-6 (vector length 7), not topdown slots.
        let Err((e, all)) = Multiplexer::<2>::new(
            d.cpu(),
            all,
            &["bus-cycles", "topdown-slots"].map(|s| s.parse().unwrap()),
        ) else {
            panic!("topdown-slots taken on a Skylake")
        };
        let MultiplexError::NotOnThisCpu { index: 1, lack } = e else {
            panic!("{e:?}")
        };
        assert_eq!(lack.missing, Missing::Event(ArchEvent::TopdownSlots));
        assert_eq!(
            e.to_string(),
            "event 1: the architectural event topdown-slots (A4H/01H, CPUID event bit 7) is not on this CPU: CPUID.0AH:EBX[7] is set or beyond EAX[31:24]'s vector length (its available events: 0x7f)"
        );
        let m = Multiplexer::<2>::new(
            d.cpu(),
            all,
            &["bus-cycles", "branches"].map(|s| s.parse().unwrap()),
        )
        .map_err(|(e, _)| e)
        .unwrap();
        let _ = Counters::<Cpu>::from_erased(m.into_handles().unwrap()).map(|c| d.give_back(c));
    }
}

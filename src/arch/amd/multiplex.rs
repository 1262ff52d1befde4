//! Multiplexing on the AMD core PMU: more events than it has counters,
//! rotated on the caller's timer tick, each reported with its time enabled,
//! time running and scaled estimate ([`Multiplexed`]).
//!
//! Any event runs on any core counter (the counter restrictions some
//! family 15h events have, and Zen's paired events, which the driver
//! refuses, are out of scope), so on each [`Multiplexer::tick`] the
//! running events are read, every event is charged the tick's time
//! ([`Rotation`]), and the events least run so far take the counters the
//! firmware does not use. An event that stays keeps its counter and counts
//! on untouched; the others are released and the newcomers configured on
//! the freed counters. The whole change is one bracket of the driver
//! ([`crate::counter::Driver::freeze`]): with PerfMonV2 the departing
//! events stop and the arriving ones start with one `PerfCntrGlobalCtl`
//! write; before it each moves with its own `PERF_CTLn` writes, one after
//! another.
//!
//! A `perf` generic event this part's map has no entry for is refused by
//! the tick that first places it ([`super::driver::ConfigError::Unmapped`]).
//!
//! (On a register-level model: a doc test with the `model` feature, ignored without it.)
//!
#![cfg_attr(feature = "model", doc = "```")]
#![cfg_attr(not(feature = "model"), doc = "```ignore")]
//! use pmu::arch::amd::driver::{AmdDriver, Counters};
//! use pmu::arch::amd::multiplex::Multiplexer;
//! use pmu::arch::amd::{AmdPmu, EventSpec};
//! use pmu::model::amd::{AmdModel, Config, Event};
//!
//! // SAFETY: the model is a logical processor of its own; this is its value.
//! let cpu0 = unsafe { AmdPmu::new() };
//! pmu::owner!(Cpu0);
//! let model = AmdModel::new(Config::k8()); // 4 legacy counters
//! let cpu = pmu::detect::detect(&model, &mut model.clone())?.usable_amd().unwrap();
//! let (mut d, c) = AmdDriver::<Cpu0, _>::take(model, &cpu, &cpu0)?;
//! let events = [0x40, 0x41, 0x42, 0x43, 0x44, 0x45].map(|s| EventSpec::raw(s, 0));
//! let mut m = Multiplexer::<6>::new(c.erase_all(), &events).map_err(|(e, _)| e)?;
//! m.tick(&mut d, 0)?;
//! for _ in 0..30 {
//!     for s in [0x40, 0x41, 0x42, 0x43, 0x44, 0x45] {
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

use super::driver::{AmdCore, AmdDriver, CounterConfig, Error, Handles};
use super::events::EventSpec;
use super::msrs::{Counter, MAX_COUNTERS};
use crate::access::MsrBackend;
use crate::counter::{AnyHandle, ErasedError, Owner, StateTag};
#[cfg(doc)]
use crate::multiplex::{Multiplexed, Rotation};
use crate::multiplex::{PlaceOn, Placement, foreign_handle, least_run_take_free};

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
}

impl core::fmt::Display for MultiplexError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            MultiplexError::TooMany => f.write_str("more events than the multiplexer holds"),
            MultiplexError::Handles { index } => write!(
                f,
                "handle {index} is not the driver's counter of that place, unclaimed"
            ),
        }
    }
}

impl core::error::Error for MultiplexError {}

/// The error of a rotation: a refused transition or register access.
pub type RotateError<E> = ErasedError<Error<E>>;

/// Up to `E` events multiplexed on the core counters of one driver, whose
/// run-time handles it holds: the crate's one multiplexer
/// ([`crate::multiplex::Multiplexer`]) placing events on the core
/// counters ([`Events`]).
pub type Multiplexer<const E: usize> = crate::multiplex::Multiplexer<Events<E>, E>;

/// What the AMD core PMU's [`Multiplexer`] places: the events and the
/// driver's run-time handles.
#[derive(Debug)]
pub struct Events<const E: usize> {
    events: [EventSpec; E],
    handles: Handles,
}

impl<const E: usize> Multiplexer<E> {
    /// Multiplexes `events` with `handles` (a driver's, unclaimed, as
    /// [`super::driver::Counters::erase_all`] gives them). Nothing runs
    /// until the first [`Multiplexer::tick`]. Refused with the handles
    /// given back.
    #[allow(
        clippy::result_large_err,
        reason = "the error hands the handles back by value: a no_std crate has no Box"
    )]
    pub fn new(handles: Handles, events: &[EventSpec]) -> Result<Self, (MultiplexError, Handles)> {
        if events.len() > E {
            return Err((MultiplexError::TooMany, handles));
        }
        let number = |i: usize| u8::try_from(i).ok().filter(|&n| n < MAX_COUNTERS);
        if let Some(index) = foreign_handle(&handles, number) {
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

impl<const E: usize> crate::sealed::Sealed for Events<E> {}

impl<const E: usize> Placement for Events<E> {
    type Arch = AmdCore;
    /// A counter's number.
    type Place = u8;
    type Config = CounterConfig;
    type Handles = Handles;

    fn handle(&mut self, n: u8) -> Option<&mut AnyHandle<AmdCore>> {
        self.handles.get_mut(usize::from(n))?.as_mut()
    }

    fn handle_ref(&self, n: u8) -> Option<&AnyHandle<AmdCore>> {
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

impl<O: Owner, M: MsrBackend, const E: usize> PlaceOn<AmdDriver<'_, O, M>> for Events<E> {
    fn count_mask(&self, d: &AmdDriver<'_, O, M>) -> u64 {
        d.overflow_rule().mask()
    }

    /// The events least run first take the usable counters (a handle, not
    /// the firmware's): those running keep theirs, the others (in the
    /// order given) the lowest usable counters left free.
    fn choose(
        &self,
        d: &AmdDriver<'_, O, M>,
        order: &[usize],
        now: &[Option<u8>],
        next: &mut [Option<u8>],
    ) {
        let usable = |n: u8| {
            self.handles
                .get(usize::from(n))
                .is_some_and(Option::is_some)
                && Counter::new(n).is_some_and(|c| !d.firmware().contains(c))
        };
        least_run_take_free::<E>(MAX_COUNTERS, usable, order, now, next);
    }
}

#[cfg(test)]
mod tests;

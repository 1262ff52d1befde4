//! Multiplexing on Itanium: more counting events than the generic counters
//! hold (PMC/PMD4-7; 4-15 on Montecito), rotated on the caller's timer
//! tick, each reported with its time enabled, time running and scaled
//! estimate ([`Multiplexed`]).
//!
//! An event is a counter's PMC image ([`CounterPmc`], built on any counter
//! of the generation: its event code, unit mask, privilege levels, `pm`,
//! threshold, ISM and Montecito's `all` and MESI bits), which the
//! multiplexer moves from counter to counter ([`CounterPmc::on`]). Not
//! every counter counts every event: the catalog lists each event's
//! counters ([`super::events::rule`]: the first Itanium's events with
//! increments up to 6 on PMC4/5 only, Itanium 2's `L2_FORCE_RECIRC_*` and
//! most `L2_L3ACCESS_CANCEL_*` on PMC4 only, Montecito's 98 events on
//! PMC4-9 and `CPU_OP_CYCLES_HALTED` on PMC10), and a threshold above 3
//! does not fit the first Itanium's PMC6/7. [`Multiplexer::new`] finds, for
//! each event, the counters whose image the driver's own check accepts
//! ([`Validator`] under [`Policy::STRICT`], as [`super::driver`] checks
//! every configuration), among the handles given.
//!
//! On each [`Multiplexer::tick`] the running events are read, every event
//! is charged the tick's time ([`Rotation`]), and the next set is placed by
//! an exact bipartite matching (`crate::multiplex`'s matching): the events
//! least run so far go first, each joining the set while some placement of
//! the whole set exists (never left out because an earlier event took the
//! one counter it can use where another would have served), and of the
//! placements of the set, one that moves the fewest running events off
//! their counters. An event that keeps its counter counts on untouched;
//! the others are released and the newcomers configured and enabled, all
//! in one bracket of the driver ([`crate::counter::Driver::freeze`]:
//! PMC0.fr set, then cleared, SDM Vol. 2 7.2.1), and a tick that moves
//! nothing touches no register but the running events' PMDs.
//!
//! # Register traffic per tick
//!
//! Asserted exactly in the tests (`multiplex/tests.rs`) through
//! [`crate::access::Recording`]: one PMD read per running event; and when
//! events move, one PMC0 read and two PMC0 writes (the freeze and the
//! thaw), a PMC and a PMD write per event released (its PMC at its power-up
//! value, its PMD 0), a PMC and a PMD write to configure each newcomer
//! (`plm` 0, PMD 0) and a PMC write to enable it.
//!
//! # What is refused
//!
//! [`Multiplexer::new`] refuses, with the handles given back
//! ([`MultiplexError`]): more events than it holds; handles that are not
//! the driver's unclaimed ones in [`super::driver::Counters::erase_all`]'s
//! order; an event of another generation, with `plm` 0, or one the driver
//! would refuse on every counter (a code the catalog lacks, a threshold at
//! or above the event's maximum increment); an event no counter with a
//! handle given can count; and the events that count the captures of the
//! I-EAR, the D-EAR or the branch trace buffer ([`Unit::event_code`]), which
//! need their unit programmed with the counter (the driver's
//! [`CounterConfig::itlb`], [`CounterConfig::dear`], [`CounterConfig::btb`])
//! and whose captures belong to one counter: out of scope for multiplexing.
//!
//! The Itanium 2 and Montecito cache groups (the catalog's
//! [`CacheGroup`](super::events::CacheGroup)) come with scheduling rules
//! over several counters (libpfm3's `valid_assign()`, as
//! [`super::events`] records them): events of different sets of one group
//! cannot count together, and one L1D-group event must be on PMC5, one
//! L2-group event on PMC4. The multiplexer places one event of each group,
//! always on that counter, and refuses a second one
//! ([`MultiplexError::CacheGroup`]): which member sets a group's counting
//! when several count together is not documented beyond those rules.
//!
//! (On a register-level model: a doc test with the `model` feature, ignored without it.)
//!
#![cfg_attr(feature = "model", doc = "```")]
#![cfg_attr(not(feature = "model"), doc = "```ignore")]
//! use pmu::arch::itanium::driver::{Counters, ItaniumDriver};
//! use pmu::arch::itanium::multiplex::Multiplexer;
//! use pmu::arch::itanium::{events, Counter, CounterPmc, Generation, ItaniumPmu, Plm};
//! use pmu::model::itanium::{Event, ItaniumModel, Psr};
//!
//! pmu::owner!(Cpu0);
//! // SAFETY: the model is a processor of its own; this is its one value.
//! let cpu0 = unsafe { ItaniumPmu::new() };
//! let g = Generation::Itanium; // PMC/PMD4-7
//! let mut model = ItaniumModel::new(pmu::model::itanium::Generation::Itanium);
//! model.set_psr(Psr::MONITORING); // the kernel's PSR.pp / PSR.up
//! let (mut d, c) = ItaniumDriver::<Cpu0, _>::take(model, g, &cpu0)?;
//! // Five events; the last three count on PMC4/5 only (the catalog's).
//! let names = ["CPU_CYCLES", "DTLB_MISSES", "IA64_INST_RETIRED", "INST_DISPERSED", "NOPS_RETIRED"];
//! let c4 = Counter::new(g, 4).unwrap();
//! let mut list = [CounterPmc::new(c4, pmu::arch::itanium::EventCode::new(g, 0).unwrap())?; 5];
//! for (e, name) in list.iter_mut().zip(names) {
//!     let info = events::find(g, name).unwrap();
//!     *e = CounterPmc::for_event(c4, info)?.with_plm(Plm::ALL).with_privileged(true);
//! }
//! let mut m = Multiplexer::<5>::new(g, c.erase_all(), &list).map_err(|(e, _)| e)?;
//! m.tick(&mut d, 0)?;
//! for _ in 0..30 {
//!     for e in &list {
//!         d.regs().inject(Event::new(e.es(), e.umask().get(), 100)); // 100 of each per tick
//!     }
//!     m.tick(&mut d, 1)?;
//! }
//! m.finish(&mut d, 0)?;
//! // Four run at once: CPU_CYCLES and DTLB_MISSES always (on PMC6/7), the
//! // other three in turn on PMC4/5, two of every three ticks each.
//! let running: Vec<_> = m.results().iter().map(|r| (r.running, r.estimate())).collect();
//! assert_eq!(running, [(30, Some(3000)), (30, Some(3000)), (20, Some(3000)), (20, Some(3000)), (20, Some(3000))]);
//! let counters = Counters::<Cpu0>::from_erased(m.into_handles().map_err(|_| "running")?)
//!     .map_err(|_| "not whole")?;
//! let _model = d.give_back(counters).map_err(|_| "not its tokens")?;
//! # Ok::<(), Box<dyn core::error::Error>>(())
//! ```

use super::driver::{ConfigError, CounterConfig, Error, Itanium, ItaniumDriver, Unit};
use super::events;
use super::generation::{Counter, CounterSet, Generation};
use super::pmc::CounterPmc;
use super::pmi::overflow_rule;
use super::validate::{PmcError, Policy, Validator};
use crate::access::PmcPmdBackend;
use crate::counter::{AnyHandle, ErasedError, Owner, StateTag};
#[cfg(doc)]
use crate::multiplex::{Multiplexed, Rotation};
use crate::multiplex::{PlaceOn, Placement, foreign_handle, matching};

/// The handles of a driver in [`super::driver::Counters::erase_all`]'s
/// form: counter `4 + i` at `i`.
pub type Handles = [Option<AnyHandle<Itanium>>; 12];

/// Why events cannot be multiplexed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum MultiplexError {
    /// More events than the multiplexer holds.
    TooMany,
    /// The handles are not one driver's unclaimed counters of this
    /// generation in [`super::driver::Counters::erase_all`]'s order:
    /// handle `index` is not.
    Handles {
        /// Its position.
        index: usize,
    },
    /// The driver would refuse event `index` on every counter (the reason
    /// given is its refusal on the first counter the catalog allows the
    /// event, or PMC4): another generation's image, `plm` 0, a code the
    /// catalog lacks, a threshold at or above the event's maximum
    /// increment.
    Refused {
        /// Its position.
        index: usize,
        /// The driver's reason.
        why: ConfigError,
    },
    /// Event `index` counts a capture unit's captures, which need the unit
    /// programmed with the counter: not multiplexed.
    NeedsUnit {
        /// Its position.
        index: usize,
        /// The unit.
        unit: Unit,
    },
    /// Event `index` is the second of one cache group (Itanium 2 and
    /// Montecito: 1 the L1D group, 2 the L2 group), whose rules over
    /// several counters the multiplexer does not apply.
    CacheGroup {
        /// Its position.
        index: usize,
        /// The group's first event.
        first: usize,
        /// The group.
        group: u8,
    },
    /// No counter whose handle was given counts event `index`.
    NoCounter {
        /// Its position.
        index: usize,
        /// The counters that count it on this generation.
        counters: CounterSet,
    },
}

impl core::fmt::Display for MultiplexError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            MultiplexError::TooMany => f.write_str("more events than the multiplexer holds"),
            MultiplexError::Handles { index } => write!(
                f,
                "handle {index} is not the driver's counter {}, unclaimed",
                index + 4
            ),
            MultiplexError::Refused { index, why } => {
                write!(f, "event {index} cannot be counted: {why}")
            }
            MultiplexError::NeedsUnit { index, unit } => write!(
                f,
                "event {index} counts the {}'s captures, which need the unit programmed with \
                 its counter: configure a counter for it (CounterConfig::itlb, dear or btb), \
                 multiplexing does not",
                unit.name()
            ),
            MultiplexError::CacheGroup {
                index,
                first,
                group,
            } => write!(
                f,
                "event {index} is the second event of the {} cache group (event {first} is \
                 the first): the group's rules over several counters are not applied, so the \
                 multiplexer places one event of each group",
                if group == 1 { "L1D" } else { "L2" }
            ),
            MultiplexError::NoCounter { index, counters } => {
                write!(
                    f,
                    "event {index} counts only on counter(s) {}, and no handle of them was given",
                    List(counters)
                )
            }
        }
    }
}

/// A counter set as `4, 5`.
struct List(CounterSet);

impl core::fmt::Display for List {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for (k, n) in self.0.iter().enumerate() {
            if k > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{n}")?;
        }
        Ok(())
    }
}

impl core::error::Error for MultiplexError {}

/// The error of a rotation: a refused transition or register access.
pub type RotateError<E> = ErasedError<Error<E>>;

/// Up to `E` events multiplexed on the generic counters of one driver,
/// whose run-time handles it holds: the crate's one multiplexer
/// ([`crate::multiplex::Multiplexer`]) placing events by a matching under
/// their counter constraints ([`Events`]).
pub type Multiplexer<const E: usize> = crate::multiplex::Multiplexer<Events<E>, E>;

/// What Itanium's [`Multiplexer`] places: the events, the counters each can
/// count on, and the driver's run-time handles.
#[derive(Debug)]
pub struct Events<const E: usize> {
    generation: Generation,
    events: [Option<CounterPmc>; E],
    /// The counters with a handle given that count each event.
    allowed: [CounterSet; E],
    handles: Handles,
}

impl<const E: usize> Multiplexer<E> {
    /// Multiplexes `events` (counter PMC images, each on any counter of
    /// `generation`, the driver's) with `handles` (a driver's, unclaimed,
    /// as [`super::driver::Counters::erase_all`] gives them; `None` for a
    /// counter kept out of the rotation). Nothing runs until the first
    /// [`Multiplexer::tick`]. Refused with the handles given back (module
    /// docs, [`MultiplexError`]).
    #[allow(
        clippy::result_large_err,
        reason = "the error hands the handles back by value: a no_std crate has no Box"
    )]
    pub fn new(
        generation: Generation,
        handles: Handles,
        events: &[CounterPmc],
    ) -> Result<Self, (MultiplexError, Handles)> {
        if events.len() > E {
            return Err((MultiplexError::TooMany, handles));
        }
        let number = |i: usize| {
            u8::try_from(i + 4)
                .ok()
                .filter(|&n| generation.counters().contains(n))
        };
        if let Some(index) = foreign_handle(&handles, number) {
            return Err((MultiplexError::Handles { index }, handles));
        }
        let given = handles
            .iter()
            .flatten()
            .fold(CounterSet::EMPTY, |set, h| set.with(h.index()));
        let mut placement = Events {
            generation,
            events: [None; E],
            allowed: [CounterSet::EMPTY; E],
            handles,
        };
        let mut groups: [Option<usize>; 2] = [None; 2];
        for (index, &event) in events.iter().enumerate() {
            let counts_on = match counters(generation, event, &mut groups, index) {
                Ok(c) => c,
                Err(e) => return Err((e, placement.handles)),
            };
            let allowed = counts_on.intersection(given);
            if allowed.is_empty() {
                let e = MultiplexError::NoCounter {
                    index,
                    counters: counts_on,
                };
                return Err((e, placement.handles));
            }
            placement.events[index] = Some(event);
            placement.allowed[index] = allowed;
        }
        Ok(Self::with_placement(placement, events.len()))
    }
}

/// The counters of `generation` that count `event` (event `index`), as the
/// driver checks a configuration; a cache-group event's anchor counter
/// only, the group's first event recorded in `groups`.
fn counters(
    generation: Generation,
    event: CounterPmc,
    groups: &mut [Option<usize>; 2],
    index: usize,
) -> Result<CounterSet, MultiplexError> {
    let refused = |why| MultiplexError::Refused { index, why };
    let found = event.counter().generation();
    if found != generation {
        return Err(refused(ConfigError::WrongGeneration {
            expected: generation,
            found,
        }));
    }
    if let Some(unit) = Unit::ALL
        .into_iter()
        .find(|u| u.event_code(generation) == event.es())
    {
        return Err(MultiplexError::NeedsUnit { index, unit });
    }
    if event.plm().get() == 0 {
        return Err(refused(ConfigError::NoPrivilegeLevel));
    }
    let (code, umask) = (event.es(), event.umask().get());
    let catalog = events::rule(generation, code, umask).map_or(CounterSet::EMPTY, |r| r.counters);
    let mut candidates = generation.counters();
    // One event of a cache group, on the group's counter (L1D: PMC5, L2:
    // PMC4; libpfm3's `valid_assign()`, as `events` records it).
    if let Some(group) = cache_group(generation, code, umask) {
        let slot = usize::from(group != 1);
        if let Some(first) = groups.get(slot).copied().flatten() {
            return Err(MultiplexError::CacheGroup {
                index,
                first,
                group,
            });
        }
        if let Some(g) = groups.get_mut(slot) {
            *g = Some(index);
        }
        candidates = CounterSet::single(if group == 1 { 5 } else { 4 });
    }
    let validator = Validator::new(generation, Policy::STRICT);
    let check = |n: u8| -> Result<CounterPmc, ConfigError> {
        let counter = Counter::new(generation, n).ok_or(ConfigError::NoSuchCounter(n))?;
        // `on` refuses only a threshold too wide for the counter's field
        // (the generations agree, checked above).
        let image = event
            .on(counter)
            .ok_or(ConfigError::Pmc(PmcError::ThresholdTooWide {
                pmc: n,
                threshold: event.threshold().get(),
                bits: counter.threshold_bits(),
            }))?;
        validator
            .check(n, image.with_overflow_interrupt(false).bits())
            .map_err(ConfigError::Pmc)?;
        Ok(image)
    };
    let counts_on = candidates
        .iter()
        .filter(|&n| check(n).is_ok())
        .fold(CounterSet::EMPTY, CounterSet::with);
    if counts_on.is_empty() {
        let first = candidates
            .intersection(catalog)
            .first()
            .or(candidates.first())
            .unwrap_or(4);
        let why = match check(first) {
            Err(why) => why,
            Ok(_) => ConfigError::NoSuchCounter(first),
        };
        return Err(refused(why));
    }
    Ok(counts_on)
}

/// The cache group of event `code` with unit mask `umask`: the catalog
/// entry's, or for a unit mask the catalog does not list, any of the
/// code's entries' (so a group's rule is never missed).
fn cache_group(generation: Generation, code: u8, umask: u8) -> Option<u8> {
    match events::rule(generation, code, umask).and_then(|r| r.entry) {
        Some(entry) => entry.group.map(|g| g.group),
        None => events::with_code(generation, code).find_map(|e| e.group.map(|g| g.group)),
    }
}

impl<const E: usize> crate::sealed::Sealed for Events<E> {}

impl<const E: usize> Placement for Events<E> {
    type Arch = Itanium;
    /// A counter's number (4-15).
    type Place = u8;
    type Config = CounterConfig;
    type Handles = Handles;

    fn handle(&mut self, n: u8) -> Option<&mut AnyHandle<Itanium>> {
        self.handles
            .get_mut(usize::from(n.checked_sub(4)?))?
            .as_mut()
    }

    fn handle_ref(&self, n: u8) -> Option<&AnyHandle<Itanium>> {
        self.handles.get(usize::from(n.checked_sub(4)?))?.as_ref()
    }

    /// Event `i`'s image moved to counter `n` ([`CounterPmc::on`]),
    /// counting.
    fn config(&self, i: usize, n: u8) -> Option<CounterConfig> {
        let event = self.events.get(i).copied().flatten()?;
        let image = event.on(Counter::new(self.generation, n)?)?;
        Some(CounterConfig::counting(image))
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

impl<O: Owner, R: PmcPmdBackend, const E: usize> PlaceOn<ItaniumDriver<'_, O, R>> for Events<E> {
    fn count_mask(&self, d: &ItaniumDriver<'_, O, R>) -> u64 {
        overflow_rule(d.generation()).mask()
    }

    /// The matching (module docs): least run first, each event on a
    /// counter it can count on, the fewest running events moved.
    fn choose(
        &self,
        _: &ItaniumDriver<'_, O, R>,
        order: &[usize],
        now: &[Option<u8>],
        next: &mut [Option<u8>],
    ) {
        let allowed = self.allowed.map(CounterSet::bits);
        matching::choose::<E>(&allowed, order, now, next);
    }
}

#[cfg(test)]
mod tests;

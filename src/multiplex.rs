//! Multiplexed counts: an event that shared the counters with others was
//! counted only part of the time it was asked for, so its count is reported
//! with the time it was enabled (asked for) and the time it was running (on
//! a counter), and scaled to the whole time: `raw × enabled / running`, the
//! estimate performance-counter libraries give (Linux perf's
//! `time_enabled`/`time_running`).
//!
//! One multiplexer serves every architecture: [`Multiplexer`] holds a
//! driver's run-time handles and the events, and on each
//! [`Multiplexer::tick`] reads the running events, charges every event the
//! tick's time ([`Rotation`]: least run first, so that events competing for
//! the counters share them evenly), asks the architecture's [`Placement`]
//! where the next set runs, and moves only the events whose place changes,
//! inside one bracket of the driver ([`crate::counter::Driver::freeze`]:
//! one `GLOBAL_CTRL` write on the architectural PMU, PMC0.fr set and
//! cleared on Itanium, one `PerfCntrGlobalCtl` write on AMD with
//! PerfMonV2, nothing on NetBurst), or without a bracket when nothing
//! moves. An event that keeps its place counts on untouched. The
//! placements: [`crate::arch::netburst::multiplex`] through NetBurst's
//! exact scheduler, [`crate::arch::archperf::multiplex`] on the general
//! counters, [`crate::arch::itanium::multiplex`] by a bipartite matching
//! under each event's counter constraints (`multiplex/matching.rs`),
//! [`crate::arch::amd::multiplex`] on the AMD core counters. Every
//! architecture's multiplexer is also reached through the crate's seam
//! ([`crate::arch::Architecture::multiplex`], [`crate::arch::Driven::tick`]).
//!
//! A register access that fails (only a model refuses one) returns the
//! error with every claimed counter still tracked: the next tick, or
//! [`Multiplexer::finish`], releases it.

use crate::counter::{AnyHandle, Arch, Driver, ErasedError, StateTag};
use crate::sealed::{Sealed, TOKEN};

pub(crate) mod matching;

/// One event's multiplexed count. Times are in whatever unit the caller's
/// clock ticks (timer ticks, TSC cycles).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Multiplexed {
    /// Time the event was asked for.
    pub enabled: u64,
    /// Time it was on a counter.
    pub running: u64,
    /// What it counted while running.
    pub raw: u64,
}

impl Multiplexed {
    /// The scaled estimate of the whole time's count, `raw × enabled /
    /// running`, rounded down (integer arithmetic, 128 bits wide, saturating
    /// at `u64::MAX`); `None` if the event never ran.
    pub const fn estimate(&self) -> Option<u64> {
        if self.running == 0 {
            return None;
        }
        let e = self.raw as u128 * self.enabled as u128 / self.running as u128;
        Some(if e > u64::MAX as u128 {
            u64::MAX
        } else {
            e as u64
        })
    }

    /// Accounts `dt` of time, running or not, and `counted` events.
    pub const fn account(&mut self, dt: u64, running: bool, counted: u64) {
        self.enabled = self.enabled.saturating_add(dt);
        if running {
            self.running = self.running.saturating_add(dt);
            self.raw = self.raw.saturating_add(counted);
        }
    }
}

/// The rotation of up to `E` events: each event's [`Multiplexed`] count,
/// where each running event is (`P`, the architecture's placement) with the
/// count its counter held when last read, and which event goes first among
/// those that have run equally long (it moves on every
/// [`Rotation::least_run_first`]).
#[derive(Clone, Copy, Debug)]
pub struct Rotation<P, const E: usize> {
    n: usize,
    counts: [Multiplexed; E],
    on: [Option<(P, u64)>; E],
    next: usize,
}

impl<P: Copy, const E: usize> Rotation<P, E> {
    /// `n` events (at most `E`), none running.
    pub const fn new(n: usize) -> Self {
        Rotation {
            n: if n < E { n } else { E },
            counts: [Multiplexed {
                enabled: 0,
                running: 0,
                raw: 0,
            }; E],
            on: [None; E],
            next: 0,
        }
    }

    /// How many events rotate.
    pub const fn len(&self) -> usize {
        self.n
    }

    /// Whether no event rotates.
    pub const fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Where event `i` runs, if it does.
    pub fn place(&self, i: usize) -> Option<P> {
        self.on.get(i).copied().flatten().map(|(p, _)| p)
    }

    /// Event `i` now runs at `p` from a counter that holds 0 (`None`: it
    /// stopped).
    pub fn set_place(&mut self, i: usize, p: Option<P>) {
        if let Some(slot) = self.on.get_mut(i) {
            *slot = p.map(|p| (p, 0));
        }
    }

    /// Charges every event `dt`: a running one also what its counter
    /// counted since the last read (`read` reads it; counts wrap at `mask`).
    pub fn account<Er>(
        &mut self,
        dt: u64,
        mask: u64,
        mut read: impl FnMut(P) -> Result<u64, Er>,
    ) -> Result<(), Er> {
        for i in 0..self.n {
            let counted = match &mut self.on[i] {
                Some((p, last)) => {
                    let v = read(*p)?;
                    let delta = v.wrapping_sub(*last) & mask;
                    *last = v;
                    Some(delta)
                }
                None => None,
            };
            self.counts[i].account(dt, counted.is_some(), counted.unwrap_or(0));
        }
        Ok(())
    }

    /// The events, least run first; among equals from the one whose turn
    /// it is, which moves on by one each call.
    pub fn least_run_first(&mut self) -> impl Iterator<Item = usize> + use<P, E> {
        let mut order = [0usize; E];
        for (j, slot) in order.iter_mut().enumerate().take(self.n) {
            *slot = (self.next + j) % self.n;
        }
        // Insertion sort by running time: stable, so equals keep the turn
        // order.
        for k in 1..self.n {
            let mut j = k;
            while j > 0 && self.counts[order[j - 1]].running > self.counts[order[j]].running {
                order.swap(j - 1, j);
                j -= 1;
            }
        }
        if self.n > 0 {
            self.next = (self.next + 1) % self.n;
        }
        let n = self.n;
        order.into_iter().take(n)
    }

    /// The events' counts so far.
    pub fn results(&self) -> &[Multiplexed] {
        &self.counts[..self.n]
    }

    /// The events running now.
    pub fn running(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.n).filter(|&i| self.on[i].is_some())
    }

    /// The places of the running events.
    pub fn places(&self) -> impl Iterator<Item = P> + '_ {
        self.on[..self.n].iter().flatten().map(|(p, _)| *p)
    }
}

/// Where an architecture's events can run: the part of what
/// [`Multiplexer`] asks that does not depend on the driver's owner or
/// backend. A placement holds a driver's run-time handles and the events.
/// Sealed: each architecture's multiplexer brings its own.
pub trait Placement: Sealed {
    /// The architecture.
    type Arch: Arch;
    /// Where a running event is (the counter, and on NetBurst its ESCR).
    type Place: Copy + PartialEq + core::fmt::Debug;
    /// A counter's configuration (the driver's).
    type Config;
    /// The handles, as the caller gave them.
    type Handles;

    /// The handle of the counter at `place`.
    fn handle(&mut self, place: Self::Place) -> Option<&mut AnyHandle<Self::Arch>>;
    /// The same, to read.
    fn handle_ref(&self, place: Self::Place) -> Option<&AnyHandle<Self::Arch>>;
    /// The configuration that counts event `i` at `place` (`None` if there
    /// is no event `i`).
    fn config(&self, i: usize, place: Self::Place) -> Option<Self::Config>;
    /// Whether every handle is unclaimed (nothing runs).
    fn all_unclaimed(&self) -> bool;
    /// The handles back.
    fn into_handles(self) -> Self::Handles;
}

/// The part of a [`Placement`] that asks driver `D`: the counters' width,
/// and what else the package holds.
pub trait PlaceOn<D: Driver<Self::Arch, Config = Self::Config>>: Placement {
    /// Counts wrap at this mask (the counters' width).
    fn count_mask(&self, d: &D) -> u64;
    /// The next set: `order` lists the events least run first, `now` where
    /// each runs (`None`: it does not); `next` receives where each is to
    /// run, as many as fit beside what the driver's package holds
    /// otherwise. An event keeping its place is given the place it has.
    fn choose(
        &self,
        d: &D,
        order: &[usize],
        now: &[Option<Self::Place>],
        next: &mut [Option<Self::Place>],
    );
}

/// The position of the first of `handles` that is not the driver's
/// counter `number(position)`, unclaimed, of the first handle's owner, if
/// one is not (a driver's set in its `erase_all` order; a `None`, a counter
/// kept out of the rotation, passes): the check a placement's constructor
/// makes of the handles it is given.
pub(crate) fn foreign_handle<A: Arch>(
    handles: &[Option<AnyHandle<A>>],
    number: impl Fn(usize) -> Option<u8>,
) -> Option<usize> {
    let owner = handles.iter().flatten().next().map(AnyHandle::owner);
    handles.iter().enumerate().position(|(i, h)| {
        h.as_ref().is_some_and(|h| {
            Some(h.index()) != number(i)
                || h.state() != StateTag::Unclaimed
                || Some(h.owner()) != owner
        })
    })
}

/// The error of a rotation: a refused transition or register access.
pub type RotateError<D, A> = ErasedError<<D as Driver<A>>::Error>;

/// The placement of a PMU whose counters `0..counters` all count any event
/// (the AMD core PMU's, [`crate::arch::amd::multiplex`]), for
/// [`PlaceOn::choose`]: the events least run first take the counters
/// `usable` admits, those running keeping theirs, the others (in `order`)
/// the lowest usable counters left free.
pub(crate) fn least_run_take_free<const E: usize>(
    counters: u8,
    usable: impl Fn(u8) -> bool,
    order: &[usize],
    now: &[Option<u8>],
    next: &mut [Option<u8>],
) {
    let fit = (0..counters).filter(|&n| usable(n)).count();
    let mut chosen = [false; E];
    for &i in order.iter().take(fit) {
        if let (Some(c), Some(&place)) = (chosen.get_mut(i), now.get(i)) {
            *c = true;
            next[i] = place;
        }
    }
    for i in 0..next.len().min(E) {
        if chosen[i] && now[i].is_none() {
            let taken = |n: u8| next.contains(&Some(n));
            next[i] = (0..counters).find(|&n| usable(n) && !taken(n));
        }
    }
}

/// Up to `E` events multiplexed on the counters of one driver, placed by
/// `P` ([`Placement`]).
#[derive(Debug)]
pub struct Multiplexer<P: Placement, const E: usize> {
    placement: P,
    rotation: Rotation<P::Place, E>,
}

impl<P: Placement, const E: usize> Multiplexer<P, E> {
    /// `n` events (at most `E`) placed by `placement`; nothing runs until
    /// the first [`Multiplexer::tick`].
    pub(crate) fn with_placement(placement: P, n: usize) -> Self {
        Multiplexer {
            placement,
            rotation: Rotation::new(n),
        }
    }

    /// One rotation: the running events are read, every event is charged
    /// `dt` (the running ones their counts), and the next set is placed
    /// (least run first): events staying where they are keep counting,
    /// the others are released, the new ones configured and enabled, all
    /// in one bracket of the driver. The first call (with `dt` 0) starts.
    pub fn tick<D>(&mut self, d: &mut D, dt: u64) -> Result<(), RotateError<D, P::Arch>>
    where
        D: Driver<P::Arch, Config = P::Config>,
        P: PlaceOn<D>,
    {
        self.account(d, dt)?;
        let n = self.rotation.len();
        let mut order = [0usize; E];
        for (slot, i) in order.iter_mut().zip(self.rotation.least_run_first()) {
            *slot = i;
        }
        let mut now = [None; E];
        for (i, p) in now.iter_mut().enumerate().take(n) {
            *p = self.rotation.place(i);
        }
        let mut next = [None; E];
        self.placement
            .choose(d, &order[..n], &now[..n], &mut next[..n]);
        // Nothing moves and nothing waits to be enabled (after a failed
        // tick): no bracket, so a driver whose freeze costs accesses
        // (Itanium's PMC0) pays nothing on a tick that keeps the set.
        let placement = &self.placement;
        let waiting = next[..n]
            .iter()
            .flatten()
            .any(|&p| placement.handle_ref(p).map(AnyHandle::state) == Some(StateTag::Configured));
        if now[..n] == next[..n] && !waiting {
            return Ok(());
        }
        d.freeze(TOKEN).map_err(ErasedError::Driver)?;
        let moved = self.move_events(d, &order[..n], &now[..n], &next[..n]);
        d.thaw(TOKEN).map_err(ErasedError::Driver)?;
        moved
    }

    /// Releases the events whose place changes, then configures the
    /// arrivals and enables each placed event that is not counting yet.
    fn move_events<D>(
        &mut self,
        d: &mut D,
        order: &[usize],
        now: &[Option<P::Place>],
        next: &[Option<P::Place>],
    ) -> Result<(), RotateError<D, P::Arch>>
    where
        D: Driver<P::Arch, Config = P::Config>,
        P: PlaceOn<D>,
    {
        for i in (0..now.len()).filter(|&i| now[i] != next[i]) {
            self.release(d, i)?;
        }
        // Arrivals in the order they were chosen (least run first).
        for &i in order {
            let Some(place) = next[i] else { continue };
            let Some(config) = self.placement.config(i, place) else {
                continue;
            };
            let Some(h) = self.placement.handle(place) else {
                continue;
            };
            if now[i] != Some(place) {
                h.configure(d, &config)?;
                // Configured with the counter at 0.
                self.rotation.set_place(i, Some(place));
            }
            if h.state() == StateTag::Configured {
                h.enable(d)?;
            }
        }
        Ok(())
    }

    /// Reads the running events and charges every event `dt`.
    fn account<D>(&mut self, d: &mut D, dt: u64) -> Result<(), RotateError<D, P::Arch>>
    where
        D: Driver<P::Arch, Config = P::Config>,
        P: PlaceOn<D>,
    {
        let mask = self.placement.count_mask(d);
        let placement = &self.placement;
        self.rotation
            .account(dt, mask, |p| match placement.handle_ref(p) {
                Some(h) => h.read(d),
                None => Ok(0),
            })
    }

    /// Releases event `i`'s counter, if it holds one (forgotten only once
    /// released).
    fn release<D>(&mut self, d: &mut D, i: usize) -> Result<(), RotateError<D, P::Arch>>
    where
        D: Driver<P::Arch, Config = P::Config>,
        P: PlaceOn<D>,
    {
        if let Some(p) = self.rotation.place(i) {
            if let Some(h) = self.placement.handle(p) {
                h.release(d)?;
            }
            self.rotation.set_place(i, None);
        }
        Ok(())
    }

    /// Ends the run: the last `dt` charged, every counter released.
    pub fn finish<D>(&mut self, d: &mut D, dt: u64) -> Result<(), RotateError<D, P::Arch>>
    where
        D: Driver<P::Arch, Config = P::Config>,
        P: PlaceOn<D>,
    {
        self.account(d, dt)?;
        (0..self.rotation.len()).try_for_each(|i| self.release(d, i))
    }

    /// The events' counts so far, in the order given.
    pub fn results(&self) -> &[Multiplexed] {
        self.rotation.results()
    }

    /// Which events are on a counter now.
    pub fn running(&self) -> impl Iterator<Item = usize> + '_ {
        self.rotation.running()
    }

    /// Where the running events are.
    pub fn places(&self) -> impl Iterator<Item = P::Place> + '_ {
        self.rotation.places()
    }

    /// The handles back, once nothing runs (after [`Multiplexer::finish`]);
    /// `Err(self)` while an event is still on a counter.
    #[allow(
        clippy::result_large_err,
        reason = "hands the multiplexer back by value"
    )]
    pub fn into_handles(self) -> Result<P::Handles, Self> {
        if !self.placement.all_unclaimed() {
            return Err(self);
        }
        Ok(self.placement.into_handles())
    }
}

/// The three estimate tests of [`estimate_tests`] as `#[test]`s of an
/// architecture's multiplexer, each with an owner of its own; `$run` is the
/// architecture's run, generic over the owner.
#[cfg(test)]
macro_rules! estimate_test_fns {
    ($run:ident) => {
        #[test]
        fn constant_rates_are_estimated_exactly() {
            crate::owner!(Constant);
            crate::multiplex::estimate_tests::constant_rates_are_estimated_exactly(&|t, r| {
                $run::<Constant>(t, r)
            });
        }

        #[test]
        fn changing_rates_are_estimated_within_a_bound() {
            crate::owner!(Changing);
            crate::multiplex::estimate_tests::changing_rates_are_estimated_within_a_bound(
                &|t, r| $run::<Changing>(t, r),
            );
        }

        #[test]
        fn a_rate_in_step_with_the_rotation_defeats_the_estimate() {
            crate::owner!(Aliased);
            crate::multiplex::estimate_tests::a_rate_in_step_with_the_rotation_defeats_the_estimate(
                &|t, r| $run::<Aliased>(t, r),
            );
        }
    };
}
#[cfg(test)]
pub(crate) use estimate_test_fns;

/// The estimate tests every architecture's multiplexer passes, on the
/// same workloads: four events of which two fit at once, run for `ticks`
/// rotations by an architecture's test (`Run`: the results, the true
/// totals, and the most events seen running at once).
#[cfg(test)]
pub(crate) mod estimate_tests {
    use std::println;

    use super::Multiplexed;

    /// An architecture's run: `ticks` ticks in which event `i` occurs
    /// `rate(i, t)` times in tick `t`.
    pub(crate) type Run<'a> =
        &'a dyn Fn(u64, &dyn Fn(usize, u64) -> u64) -> ([Multiplexed; 4], [u64; 4], u32);

    /// Constant rates: every event runs half the time, and the scaled
    /// estimate is exact.
    pub(crate) fn constant_rates_are_estimated_exactly(run: Run<'_>) {
        let rates = [100, 37, 5, 250];
        let (results, truth, most) = run(400, &|i, _| rates[i]);
        assert_eq!(most, 2, "two events at once");
        for i in 0..4 {
            assert_eq!(results[i].enabled, 400);
            assert_eq!(results[i].running, 200, "round robin: half the ticks each");
            assert_eq!(results[i].estimate(), Some(truth[i]), "event {i}");
        }
    }

    /// The estimates' errors, measured and printed.
    fn errors(run: Run<'_>, rate: &dyn Fn(usize, u64) -> u64) -> [f64; 4] {
        let (results, truth, _) = run(400, rate);
        core::array::from_fn(|i| {
            let est = results[i].estimate().unwrap() as f64;
            let err = (est - truth[i] as f64).abs() / truth[i] as f64;
            println!(
                "multiplexed event {i}: true {} estimate {} (raw {} running {}/{}): error {:.3} %",
                truth[i],
                est,
                results[i].raw,
                results[i].running,
                results[i].enabled,
                err * 100.0
            );
            err
        })
    }

    /// Rates that change slowly against the rotation (a ramp, a decline, a
    /// square wave of 100 ticks, a rate doubling every 100 ticks): each
    /// event runs two of every four ticks, evenly spread, and the estimates'
    /// error stays under 1 % (measured and printed).
    pub(crate) fn changing_rates_are_estimated_within_a_bound(run: Run<'_>) {
        let worst = errors(run, &|i, t| match i {
            0 => 100 + t / 4,
            1 => 300 - t / 2,
            2 => [10, 30][((t / 50) % 2) as usize],
            _ => 20 << (t / 100),
        });
        assert!(worst.iter().all(|&e| e < 0.01), "{worst:?}");
    }

    /// The limit of any multiplexing estimate: events whose rate changes in
    /// step with the rotation are seen only in some phases. Here the pairs
    /// {0, 1} and {2, 3} alternate in a four-tick pattern (run, off, off,
    /// run), and every event occurs exactly in the first pair's ticks: the
    /// first pair's estimates are double the truth, the second's zero
    /// (100 % error each).
    pub(crate) fn a_rate_in_step_with_the_rotation_defeats_the_estimate(run: Run<'_>) {
        let worst = errors(run, &|_, t| [100, 0, 0, 100][(t % 4) as usize]);
        assert_eq!(worst, [1.0; 4]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_scales_to_the_enabled_time() {
        let m = Multiplexed {
            enabled: 10,
            running: 4,
            raw: 1000,
        };
        assert_eq!(m.estimate(), Some(2500));
        assert_eq!(Multiplexed::default().estimate(), None);
        let huge = Multiplexed {
            enabled: u64::MAX,
            running: 1,
            raw: 3,
        };
        assert_eq!(huge.estimate(), Some(u64::MAX), "saturates");
        let mut a = Multiplexed::default();
        a.account(5, true, 50);
        a.account(5, false, 999);
        assert_eq!(
            a,
            Multiplexed {
                enabled: 10,
                running: 5,
                raw: 50
            }
        );
        assert_eq!(a.estimate(), Some(100));
    }

    /// Least run first, equals in turn order, the turn moving on each time;
    /// a running event is charged what its counter counted since the last
    /// read, wrapping at the mask.
    #[test]
    fn a_rotation_offers_the_least_run_first() {
        let mut r = Rotation::<u8, 4>::new(3);
        assert_eq!(r.least_run_first().collect::<std::vec::Vec<_>>(), [0, 1, 2]);
        assert_eq!(r.least_run_first().collect::<std::vec::Vec<_>>(), [1, 2, 0]);
        r.set_place(2, Some(7));
        let reads = [0xFFu64, 0x05];
        let mut k = 0;
        let mut read = |p: u8| -> Result<u64, ()> {
            assert_eq!(p, 7);
            k += 1;
            Ok(reads[k - 1])
        };
        r.account(10, 0xFF, &mut read).unwrap();
        r.account(10, 0xFF, &mut read).unwrap();
        assert_eq!(
            r.results()[2],
            Multiplexed {
                enabled: 20,
                running: 20,
                raw: 0xFF + 6
            }
        );
        assert_eq!(
            r.results()[0],
            Multiplexed {
                enabled: 20,
                running: 0,
                raw: 0
            }
        );
        // The turn is at 2, but 2 has run longest: it goes last.
        assert_eq!(r.least_run_first().collect::<std::vec::Vec<_>>(), [0, 1, 2]);
        assert_eq!(r.places().collect::<std::vec::Vec<_>>(), [7]);
        assert_eq!(r.running().collect::<std::vec::Vec<_>>(), [2]);
    }
}

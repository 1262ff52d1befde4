//! Multiplexed counts: an event that shared the counters with others was
//! counted only part of the time it was asked for, so its count is reported
//! with the time it was enabled (asked for) and the time it was running (on
//! a counter), and scaled to the whole time: `raw × enabled / running`, the
//! estimate performance-counter libraries give (Linux perf's
//! `time_enabled`/`time_running`).
//!
//! Each architecture's multiplexer decides where events can run
//! ([`crate::arch::netburst::multiplex`] through NetBurst's exact scheduler,
//! [`crate::arch::archperf::multiplex`] on the general counters); the
//! bookkeeping they share is here: [`Multiplexed`] per event, and
//! [`Rotation`], which charges every event its time and offers the events
//! least run first, so that events competing for the counters share them
//! evenly.

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

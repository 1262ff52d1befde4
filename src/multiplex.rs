//! Multiplexed counts: an event that shared the counters with others was
//! counted only part of the time it was asked for, so its count is reported
//! with the time it was enabled (asked for) and the time it was running (on
//! a counter), and scaled to the whole time: `raw × enabled / running`, the
//! estimate performance-counter libraries give (Linux perf's
//! `time_enabled`/`time_running`).
//!
//! The architecture's multiplexer decides which events run when
//! ([`crate::arch::netburst::multiplex`]); this is the bookkeeping both
//! share.

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
}

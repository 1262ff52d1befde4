//! What the driver owns besides counters and ESCRs: the package-wide
//! `MSR_PEBS_ENABLE` and `MSR_PEBS_MATRIX_VERT` (SDM Table 35-41: shared by
//! the logical processors), and what each claimed counter contributes to
//! tagging, against which a counter of tagged µops is checked before it is
//! programmed (SDM 18.15.6: the downstream event counts only what an
//! upstream ESCR, or the PEBS MSRs, tagged).
//!
//! What a counter contributes is one byte ([`TagBits`], precomputed in
//! its [`EventSpec`](crate::arch::netburst::EventSpec)), so the check is an
//! OR over 18 bytes and costs a counting-only kernel little code.

use super::{ConfigError, CounterConfig};
use crate::arch::netburst::events::{Event, ReplayMetric, Tagging};
use crate::arch::netburst::msrs::{Counter, CounterSet};
use crate::arch::netburst::tagging::{TagBits, pebs_enable_image};
use crate::arch::netburst::thread::LogicalProcessor;

/// The error for the lowest of the `missing` tag bits.
fn missing(missing: u8) -> ConfigError {
    let bit = missing.trailing_zeros() as u8;
    if bit < 4 {
        return ConfigError::Untagged {
            tagging: Tagging::Execution,
            bit: Some(bit),
        };
    }
    if missing & TagBits::FRONT_END != 0 {
        return ConfigError::Untagged {
            tagging: Tagging::FrontEnd,
            bit: None,
        };
    }
    let metric = TagBits::UPSTREAM
        .iter()
        .find(|(_, b)| missing & b != 0)
        .map_or(ReplayMetric::MobLoadReplay, |(m, _)| *m);
    ConfigError::MissingUpstream {
        event: metric.upstream().map_or(Event::ReplayEvent, |u| u.event),
    }
}

/// The images of the two PEBS MSRs a configuration needs written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct PebsWrites {
    /// `MSR_PEBS_ENABLE`, if it changes.
    pub enable: Option<u64>,
    /// `MSR_PEBS_MATRIX_VERT`, if it changes.
    pub matrix_vert: Option<u64>,
}

/// The package-wide tagging and PEBS state.
#[derive(Debug)]
pub(super) struct Package {
    /// What each claimed counter provides, per logical processor.
    provides: [[u8; 18]; 2],
    /// Replay tagging: the metric bits of `MSR_PEBS_ENABLE` and the
    /// `MSR_PEBS_MATRIX_VERT` image the claimed `replay_event` counters
    /// share, and those counters.
    replay: (u64, u64),
    replay_users: CounterSet,
    /// PEBS runs for each logical processor.
    pebs_on: [bool; 2],
    /// The logical processor whose view `MSR_PEBS_ENABLE` is written in
    /// (`ENABLE_PEBS_MY_THR` is its own, `_OTH_THR` the other's): the one
    /// the driver runs on, as [`super::NetBurstDriver::set_pebs_area`] said.
    home: LogicalProcessor,
    hyper_threading: bool,
    /// The values last written (both are 0 after reset).
    written: (u64, u64),
}

impl Package {
    pub(super) const fn new(hyper_threading: bool) -> Package {
        Package {
            provides: [[0; 18]; 2],
            replay: (0, 0),
            replay_users: CounterSet::EMPTY,
            pebs_on: [false; 2],
            home: LogicalProcessor::T0,
            hyper_threading,
            written: (0, 0),
        }
    }

    /// Checks `c` for counter `counter` against what is claimed: the
    /// upstream half of its tagging (SDM 18.15.6.2-18.15.6.4), the shared
    /// replay-tagging registers, and PEBS (18.15.7, 18.16.3). Returns the
    /// replay registers `c` needs (`(0, 0)` without replay tagging).
    pub(super) fn check(
        &self,
        counter: Counter,
        c: &CounterConfig,
    ) -> Result<(u64, u64), ConfigError> {
        let have = self.provides[c.lp as usize].iter().fold(0, |t, p| t | p);
        let lacking = c.event.tags_needed().0 & !have;
        if lacking != 0 {
            return Err(missing(lacking));
        }
        let replay = c.event.replay_registers();
        if c.event.event() == Event::ReplayEvent && replay.0 == 0 {
            return Err(ConfigError::Untagged {
                tagging: Tagging::Replay,
                bit: None,
            });
        }
        if replay.0 != 0 && !self.replay_users.is_empty() && replay != self.replay {
            return Err(ConfigError::ReplayTaggingBusy);
        }
        if c.pebs.is_some() {
            if counter != Counter::pebs_for(c.lp) {
                return Err(ConfigError::NotPebsCounter { lp: c.lp });
            }
            if c.event.event().needs_tagging().is_none() {
                return Err(ConfigError::NotAtRetirement);
            }
            if c.lp != self.home {
                return Err(ConfigError::PebsElsewhere { lp: c.lp });
            }
        }
        Ok(replay)
    }

    /// Counter `counter` is claimed with `c` (checked); returns the PEBS
    /// MSR writes it needs.
    pub(super) fn book(
        &mut self,
        counter: Counter,
        c: &CounterConfig,
        replay: (u64, u64),
    ) -> PebsWrites {
        if let Some(slot) = self.provides[c.lp as usize].get_mut(usize::from(counter.index())) {
            *slot = c.event.tags_provided(c.escr).0;
        }
        if replay.0 != 0 {
            self.replay = replay;
            self.replay_users = self.replay_users.with(counter);
        }
        if c.pebs.is_some() {
            self.pebs_on[c.lp as usize] = true;
        }
        self.writes()
    }

    /// Counter `counter`, which counted for `lp` (with PEBS, if `pebs`), is
    /// released; returns the PEBS MSR writes that follow.
    pub(super) fn unbook(
        &mut self,
        counter: Counter,
        lp: LogicalProcessor,
        pebs: bool,
    ) -> PebsWrites {
        if let Some(slot) = self.provides[lp as usize].get_mut(usize::from(counter.index())) {
            *slot = 0;
        }
        if pebs {
            self.pebs_on[lp as usize] = false;
        }
        self.replay_users = self.replay_users.without(counter);
        if self.replay_users.is_empty() {
            self.replay = (0, 0);
        }
        self.writes()
    }

    /// Whether PEBS runs for `lp` (its counter is claimed for PEBS).
    pub(super) const fn pebs_on(&self, lp: LogicalProcessor) -> bool {
        self.pebs_on[lp as usize]
    }

    /// The driver runs on `lp` from now on, for PEBS.
    pub(super) fn set_home(&mut self, lp: LogicalProcessor) {
        self.home = lp;
    }

    /// The PEBS MSR images now, and which of them differ from what was
    /// written last (those are then taken as written).
    fn writes(&mut self) -> PebsWrites {
        let other = match self.home {
            LogicalProcessor::T0 => LogicalProcessor::T1,
            LogicalProcessor::T1 => LogicalProcessor::T0,
        };
        let enable = pebs_enable_image(
            self.replay.0,
            self.pebs_on[self.home as usize],
            self.hyper_threading && self.pebs_on[other as usize],
        );
        let vert = self.replay.1;
        let out = PebsWrites {
            enable: (enable != self.written.0).then_some(enable),
            matrix_vert: (vert != self.written.1).then_some(vert),
        };
        self.written = (enable, vert);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The replay metrics' upstream bits name exactly the metrics that have
    /// an upstream event.
    #[test]
    fn upstream_bits_cover_every_metric_with_an_upstream() {
        for m in ReplayMetric::ALL {
            let listed = TagBits::UPSTREAM.iter().any(|(u, _)| *u == m);
            assert_eq!(listed, m.upstream().is_some(), "{}", m.name());
        }
    }
}

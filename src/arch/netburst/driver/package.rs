//! What the driver books besides counters and ESCRs: its share of the
//! package-wide `MSR_PEBS_ENABLE` and `MSR_PEBS_MATRIX_VERT` (SDM Table
//! 35-41: shared by the logical processors; their state is the physical
//! PMU's, [`PebsRegisters`]), and what each claimed counter contributes to
//! tagging, against which a counter of tagged µops is checked before it is
//! programmed (SDM 18.15.6: the downstream event counts only what an
//! upstream ESCR, or the PEBS MSRs, tagged).
//!
//! What a counter contributes is one byte ([`TagBits`], precomputed in
//! its [`EventSpec`](crate::arch::netburst::EventSpec)), so the check is an
//! OR over 18 bytes and costs a counting-only kernel little code.

use super::{ConfigError, CounterConfig};
use crate::arch::netburst::Counter;
use crate::arch::netburst::LogicalProcessor;
use crate::arch::netburst::TagBits;
use crate::arch::netburst::events::{EventName, ReplayMetric, Tagging};
use crate::arch::netburst::physical::{PebsRegisters, PebsWrites};

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
        event: metric
            .upstream()
            .map_or(EventName::ReplayEvent, |u| u.event),
    }
}

/// What one driver knows for tagging: what each counter it claimed
/// provides, per logical processor (tags are per logical processor), and
/// the logical processor it writes `MSR_PEBS_ENABLE` from.
#[derive(Debug)]
pub(super) struct Package {
    provides: [[u8; 18]; 2],
    /// The logical processor whose view `MSR_PEBS_ENABLE` is written in
    /// (`ENABLE_PEBS_MY_THR` is its own, `_OTH_THR` the other's): the one
    /// the driver runs on.
    home: LogicalProcessor,
}

impl Package {
    pub(super) const fn new(home: LogicalProcessor) -> Package {
        Package {
            provides: [[0; 18]; 2],
            home,
        }
    }

    /// Checks `c` for counter `counter` against what is claimed: the
    /// upstream half of its tagging (SDM 18.15.6.2-18.15.6.4), the shared
    /// replay-tagging registers `regs`, and PEBS (18.15.7, 18.16.3).
    /// Returns the replay registers `c` needs (`(0, 0)` without replay
    /// tagging).
    pub(super) fn check(
        &self,
        counter: Counter,
        c: &CounterConfig,
        regs: &PebsRegisters,
    ) -> Result<(u64, u64), ConfigError> {
        let have = self.provides[c.lp as usize].iter().fold(0, |t, p| t | p);
        let lacking = c.event.tags_needed().0 & !have;
        if lacking != 0 {
            return Err(missing(lacking));
        }
        let replay = c.event.replay_registers();
        if c.event.event() == EventName::ReplayEvent && replay.0 == 0 {
            return Err(ConfigError::Untagged {
                tagging: Tagging::Replay,
                bit: None,
            });
        }
        if regs.replay_busy(replay) {
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

    /// Counter `counter` is claimed with `c` (checked): records what it
    /// provides, and in `regs` what it needs; returns the PEBS MSR writes.
    pub(super) fn record_claim(
        &mut self,
        counter: Counter,
        c: &CounterConfig,
        replay: (u64, u64),
        regs: &mut PebsRegisters,
        hyper_threading: bool,
    ) -> PebsWrites {
        if let Some(slot) = self.provides[c.lp as usize].get_mut(usize::from(counter.index())) {
            *slot = c.event.tags_provided(c.escr).0;
        }
        regs.record_claim(counter, replay, c.pebs.is_some().then_some(c.lp));
        regs.writes(self.home, hyper_threading)
    }

    /// Counter `counter`, which counted for `lp` (with PEBS, if `pebs`), is
    /// released; returns the PEBS MSR writes that follow.
    pub(super) fn record_release(
        &mut self,
        counter: Counter,
        lp: LogicalProcessor,
        pebs: bool,
        regs: &mut PebsRegisters,
        hyper_threading: bool,
    ) -> PebsWrites {
        if let Some(slot) = self.provides[lp as usize].get_mut(usize::from(counter.index())) {
            *slot = 0;
        }
        regs.record_release(counter, pebs.then_some(lp));
        regs.writes(self.home, hyper_threading)
    }

    /// The driver runs on `lp` from now on, for PEBS.
    pub(super) fn set_home(&mut self, lp: LogicalProcessor) {
        self.home = lp;
    }
}

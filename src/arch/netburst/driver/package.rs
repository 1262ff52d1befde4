//! What the driver owns besides counters and ESCRs: the package-wide
//! `MSR_PEBS_ENABLE` and `MSR_PEBS_MATRIX_VERT` (SDM Table 35-41: shared by
//! the logical processors), and a record of what each claimed counter
//! counts, against which a counter of tagged µops is checked before it is
//! programmed (SDM 18.15.6: the downstream event counts only what an
//! upstream ESCR, or the PEBS MSRs, tagged).

use super::{ConfigError, CounterConfig};
use crate::arch::netburst::escr::EventMask;
use crate::arch::netburst::events::{Event, ReplayMetric, Tagging};
use crate::arch::netburst::msrs::{Counter, CounterSet, Escr};
use crate::arch::netburst::tagging::pebs_enable_image;
use crate::arch::netburst::thread::LogicalProcessor;

/// What a claimed counter counts, as far as tagging cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Booking {
    event: Event,
    mask: EventMask,
    escr: Escr,
    /// The execution-tagging tag value, when the ESCR has `Tag_Enable`.
    tag: u8,
    lp: LogicalProcessor,
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
    booked: [Option<Booking>; 18],
    /// Replay tagging: the metric bits of `MSR_PEBS_ENABLE` and the
    /// `MSR_PEBS_MATRIX_VERT` image the claimed `replay_event` counters
    /// share, and those counters.
    replay_enable: u64,
    replay_vert: u64,
    replay_users: CounterSet,
    /// PEBS runs for each logical processor.
    pebs_on: [bool; 2],
    /// The logical processor whose view `MSR_PEBS_ENABLE` is written in
    /// (`ENABLE_PEBS_MY_THR` is its own, `_OTH_THR` the other's): the one
    /// the driver runs on, as [`super::NetBurstDriver::set_pebs_area`] said.
    home: LogicalProcessor,
    hyper_threading: bool,
    /// The values last written (both are 0 after reset).
    written_enable: u64,
    written_vert: u64,
}

impl Package {
    pub(super) const fn new(hyper_threading: bool) -> Package {
        Package {
            booked: [None; 18],
            replay_enable: 0,
            replay_vert: 0,
            replay_users: CounterSet::EMPTY,
            pebs_on: [false; 2],
            home: LogicalProcessor::T0,
            hyper_threading,
            written_enable: 0,
            written_vert: 0,
        }
    }

    /// Whether a claimed counter of `lp` counts `event` with at least the
    /// mask bits `mask` (on `escr`, if given).
    fn has_upstream(
        &self,
        lp: LogicalProcessor,
        event: Event,
        mask: EventMask,
        escr: Option<Escr>,
    ) -> bool {
        self.booked.iter().flatten().any(|b| {
            b.lp == lp
                && b.event == event
                && b.mask.contains(mask)
                && escr.is_none_or(|e| e == b.escr)
        })
    }

    /// The tag bits the claimed execution-tagging ESCRs of `lp` set.
    fn tags(&self, lp: LogicalProcessor) -> u8 {
        self.booked
            .iter()
            .flatten()
            .filter(|b| b.lp == lp)
            .fold(0, |t, b| t | b.tag)
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
        let event = c.event.event();
        let (mut enable, mut vert) = (0, 0);
        match event.needs_tagging() {
            Some(Tagging::FrontEnd) => {
                // uop_type TAGLOADS (mask bit 1) or TAGSTORES (bit 2).
                let loads = self.has_upstream(c.lp, Event::UopType, EventMask(1 << 1), None);
                let stores = self.has_upstream(c.lp, Event::UopType, EventMask(1 << 2), None);
                if !loads && !stores {
                    return Err(ConfigError::Untagged {
                        tagging: Tagging::FrontEnd,
                        bit: None,
                    });
                }
            }
            // With compare, execution_event is a threshold on its per-cycle
            // count (Linux's cycles alias), not a count of tagged µops.
            Some(Tagging::Execution) if !c.event.compare() => {
                let wanted = c.event.event_mask().execution_tag_bits();
                let missing = wanted & !self.tags(c.lp);
                if missing != 0 {
                    return Err(ConfigError::Untagged {
                        tagging: Tagging::Execution,
                        bit: Some(missing.trailing_zeros() as u8),
                    });
                }
            }
            Some(Tagging::Replay) => {
                for m in ReplayMetric::ALL {
                    if !c.event.selects_replay_metric(m) {
                        continue;
                    }
                    enable |= m.pebs_enable_bits();
                    vert |= m.matrix_vert_bits();
                    if let Some(up) = m.upstream()
                        && !self.has_upstream(c.lp, up.event, up.mask, up.escr)
                    {
                        return Err(ConfigError::MissingUpstream { event: up.event });
                    }
                }
                if enable == 0 {
                    return Err(ConfigError::Untagged {
                        tagging: Tagging::Replay,
                        bit: None,
                    });
                }
                if !self.replay_users.is_empty()
                    && (enable, vert) != (self.replay_enable, self.replay_vert)
                {
                    return Err(ConfigError::ReplayTaggingBusy);
                }
            }
            _ => {}
        }
        if c.pebs.is_some() {
            if counter != Counter::pebs_for(c.lp) {
                return Err(ConfigError::NotPebsCounter { lp: c.lp });
            }
            if event.needs_tagging().is_none() {
                return Err(ConfigError::NotAtRetirement);
            }
            if c.lp != self.home {
                return Err(ConfigError::PebsElsewhere { lp: c.lp });
            }
        }
        Ok((enable, vert))
    }

    /// Counter `counter` is claimed with `c` (checked); returns the PEBS
    /// MSR writes it needs.
    pub(super) fn book(
        &mut self,
        counter: Counter,
        c: &CounterConfig,
        replay: (u64, u64),
    ) -> PebsWrites {
        let v = c.event.escr_value();
        self.booked[usize::from(counter.index())] = Some(Booking {
            event: c.event.event(),
            mask: c.event.event_mask(),
            escr: c.escr,
            tag: if v.tag_enable() {
                v.tag_value().get()
            } else {
                0
            },
            lp: c.lp,
        });
        if replay.0 != 0 {
            self.replay_enable = replay.0;
            self.replay_vert = replay.1;
            self.replay_users = self.replay_users.with(counter);
        }
        if c.pebs.is_some() {
            self.pebs_on[c.lp as usize] = true;
        }
        self.writes()
    }

    /// Counter `counter` is released; returns the PEBS MSR writes that
    /// follow.
    pub(super) fn unbook(&mut self, counter: Counter) -> PebsWrites {
        if let Some(b) = self.booked[usize::from(counter.index())].take()
            && counter == Counter::pebs_for(b.lp)
        {
            self.pebs_on[b.lp as usize] = false;
        }
        self.replay_users = self.replay_users.without(counter);
        if self.replay_users.is_empty() {
            self.replay_enable = 0;
            self.replay_vert = 0;
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
            self.replay_enable,
            self.pebs_on[self.home as usize],
            self.hyper_threading && self.pebs_on[other as usize],
        );
        let out = PebsWrites {
            enable: (enable != self.written_enable).then_some(enable),
            matrix_vert: (self.replay_vert != self.written_vert).then_some(self.replay_vert),
        };
        self.written_enable = enable;
        self.written_vert = self.replay_vert;
        out
    }
}

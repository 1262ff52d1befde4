//! The package-wide PEBS MSR state (`MSR_PEBS_ENABLE`,
//! `MSR_PEBS_MATRIX_VERT`, SDM Table 35-41: shared by the logical
//! processors), which the physical PMU holds behind a lock for the
//! package's drivers: who uses replay tagging and PEBS, what was written
//! last, and the writes that bring the MSRs up to date.

use crate::arch::netburst::pebs_enable_image;
use crate::arch::netburst::{Counter, CounterSet, LogicalProcessor};

/// The images of the two PEBS MSRs a configuration needs written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PebsWrites {
    /// `MSR_PEBS_ENABLE`, if it changes.
    pub enable: Option<u64>,
    /// `MSR_PEBS_MATRIX_VERT`, if it changes.
    pub matrix_vert: Option<u64>,
}

/// The package-wide PEBS MSR state, shared by the package's drivers under
/// a lock (`NetBurstPmu`).
#[derive(Debug)]
pub(crate) struct PebsRegisters {
    /// Replay tagging: the metric bits of `MSR_PEBS_ENABLE` and the
    /// `MSR_PEBS_MATRIX_VERT` image the claimed `replay_event` counters
    /// share, and those counters.
    replay: (u64, u64),
    replay_users: CounterSet,
    /// PEBS runs for each logical processor.
    pebs_on: [bool; 2],
    /// The state last written: replay metric bits and PEBS per logical
    /// processor (`MSR_PEBS_ENABLE`), and `MSR_PEBS_MATRIX_VERT`; all clear
    /// after reset. (The image depends on who writes it, the state not.)
    written: (u64, [bool; 2], u64),
}

impl PebsRegisters {
    pub(crate) const fn new() -> PebsRegisters {
        PebsRegisters {
            replay: (0, 0),
            replay_users: CounterSet::EMPTY,
            pebs_on: [false; 2],
            written: (0, [false; 2], 0),
        }
    }

    /// Whether replay tagging `replay` (metric bits and vertical matrix
    /// image, as [`EventSpec::replay_registers`](crate::arch::netburst::EventSpec::replay_registers)
    /// gives them) conflicts with the one the claimed `replay_event`
    /// counters share.
    pub(crate) fn replay_busy(&self, replay: (u64, u64)) -> bool {
        replay.0 != 0 && !self.replay_users.is_empty() && replay != self.replay
    }

    /// Counter `counter` is claimed with replay tagging `replay` (`(0, 0)`
    /// without), and with PEBS for `pebs` if any.
    pub(crate) fn record_claim(
        &mut self,
        counter: Counter,
        replay: (u64, u64),
        pebs: Option<LogicalProcessor>,
    ) {
        if replay.0 != 0 {
            self.replay = replay;
            self.replay_users = self.replay_users.with(counter);
        }
        if let Some(lp) = pebs {
            self.pebs_on[lp as usize] = true;
        }
    }

    /// Counter `counter` is released, with PEBS for `pebs` if it had it.
    pub(crate) fn record_release(&mut self, counter: Counter, pebs: Option<LogicalProcessor>) {
        if let Some(lp) = pebs {
            self.pebs_on[lp as usize] = false;
        }
        self.replay_users = self.replay_users.without(counter);
        if self.replay_users.is_empty() {
            self.replay = (0, 0);
        }
    }

    /// Whether PEBS runs for `lp` (its counter is claimed for PEBS).
    pub(crate) const fn pebs_on(&self, lp: LogicalProcessor) -> bool {
        self.pebs_on[lp as usize]
    }

    /// The PEBS MSR images now, as logical processor `writer` writes them,
    /// and which of them differ from what was written last (those are then
    /// taken as written).
    pub(crate) fn writes(&mut self, writer: LogicalProcessor, hyper_threading: bool) -> PebsWrites {
        let other = writer.other();
        let enable = pebs_enable_image(
            self.replay.0,
            self.pebs_on[writer as usize],
            hyper_threading && self.pebs_on[other as usize],
        );
        let vert = self.replay.1;
        let (metrics, pebs, written_vert) = self.written;
        let out = PebsWrites {
            enable: (metrics != self.replay.0 || pebs != self.pebs_on).then_some(enable),
            matrix_vert: (vert != written_vert).then_some(vert),
        };
        self.written = (self.replay.0, self.pebs_on, vert);
        out
    }
}

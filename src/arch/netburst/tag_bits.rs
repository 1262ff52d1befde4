//! What each event provides and needs for tagging, as one byte
//! ([`TagBits`], precomputed in every parsed event), and the replay
//! registers a set of replay metrics selects ([`replay_registers`]): the
//! catalog's tagging facts in the form the parser stores and the driver
//! checks (SDM 18.15.6, Tables 19-31 to 19-33).

use super::escr::EventMask;
use super::events::{EventName, ReplayMetric};
use super::msrs::Escr;
use super::tagging_msrs::{PebsEnable, PebsMatrixVert};

/// What an event does for tagging, or needs, as the bits of one byte
/// (precomputed in every [`EventSpec`](crate::arch::netburst::EventSpec), so that the driver's check costs a
/// counting-only kernel almost no code): bits 0-3 the execution-tagging tag
/// bits (SDM 18.15.6.3), then front-end tagging (18.15.6.2), then the
/// upstream events of the three replay metrics that have one (Table 19-33).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TagBits(pub u8);

impl TagBits {
    /// `uop_type` with `TAGLOADS` or `TAGSTORES`.
    pub const FRONT_END: u8 = 1 << 4;
    /// The replay metrics with an upstream event, and their bits.
    pub const UPSTREAM: [(ReplayMetric, u8); 3] = [
        (ReplayMetric::MobLoadReplay, 1 << 5),
        (ReplayMetric::SplitLoad, 1 << 6),
        (ReplayMetric::SplitStore, 1 << 7),
    ];

    /// What an ESCR programmed with `event`, `mask` and (for execution
    /// tagging) tag bits `tag` provides, on any ESCR the event allows
    /// (see [`TagBits::on`]).
    pub const fn provided(event: EventName, mask: EventMask, tag: u8) -> TagBits {
        let mut t = tag & 0xF;
        if matches!(event, EventName::UopType) && mask.0 & 0b110 != 0 {
            t |= Self::FRONT_END;
        }
        let mut i = 0;
        while i < Self::UPSTREAM.len() {
            let (m, bit) = Self::UPSTREAM[i];
            if let Some(up) = m.upstream()
                && up.event as u8 == event as u8
                && mask.contains(up.mask)
            {
                t |= bit;
            }
            i += 1;
        }
        TagBits(t)
    }

    /// The bits left when the ESCR is `escr`: a replay metric's upstream
    /// event restricted to one ESCR provides nothing elsewhere.
    pub const fn on(self, escr: Escr) -> TagBits {
        let mut t = self.0;
        let mut i = 0;
        while i < Self::UPSTREAM.len() {
            let (m, bit) = Self::UPSTREAM[i];
            if let Some(up) = m.upstream()
                && let Some(only) = up.escr
                && only as u8 != escr as u8
            {
                t &= !bit;
            }
            i += 1;
        }
        TagBits(t)
    }

    /// What a downstream `event` with `mask` and replay metrics `metrics`
    /// (bit `m as u16` per metric) needs other claimed ESCRs to provide.
    pub const fn needed(event: EventName, mask: EventMask, metrics: u16) -> TagBits {
        match event {
            EventName::FrontEndEvent => TagBits(Self::FRONT_END),
            EventName::ExecutionEvent => TagBits(mask.execution_tag_bits()),
            EventName::ReplayEvent => {
                let mut t = 0;
                let mut i = 0;
                while i < Self::UPSTREAM.len() {
                    let (m, bit) = Self::UPSTREAM[i];
                    if metrics & (1 << m as u16) != 0 {
                        t |= bit;
                    }
                    i += 1;
                }
                TagBits(t)
            }
            _ => TagBits(0),
        }
    }
}

/// The replay registers metrics `metrics` (bit `m as u16` per metric)
/// select: the metric bits of `MSR_PEBS_ENABLE` and the
/// `MSR_PEBS_MATRIX_VERT` image (Table 19-33).
pub const fn replay_registers(metrics: u16) -> (u64, u64) {
    let (mut enable, mut vert) = (PebsEnable::OFF, PebsMatrixVert::OFF);
    let mut i = 0;
    while i < ReplayMetric::ALL.len() {
        let m = ReplayMetric::ALL[i];
        if metrics & (1 << m as u16) != 0 {
            enable = enable.union(m.pebs_enable());
            vert = vert.union(m.matrix_vert());
        }
        i += 1;
    }
    (enable.bits(), vert.bits())
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

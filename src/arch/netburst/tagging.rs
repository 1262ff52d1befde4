//! The tagging mechanisms as requests and plans (documented on [`TaggingPlan`]).

use super::escr::{EventMask, TagValue};
use super::events::{Constraint, EventName, MaskInfo, MaskKind, ReplayMetric};
use super::msrs::{Counter, CounterSet, Escr, EscrSet};
use super::parse::{EventSpec, Pmu};
use super::tagging_msrs::PebsEnable;

/// The `MSR_PEBS_ENABLE` image, as written by one logical processor: the
/// replay metrics' bits (Table 19-33) with `UOP_Tag` when there are any,
/// and PEBS for the writer (`my_thread`) and for the other logical
/// processor (`other_thread`).
pub const fn pebs_enable_image(metric_bits: u64, my_thread: bool, other_thread: bool) -> u64 {
    PebsEnable::from_bits(metric_bits)
        .with_uop_tag(metric_bits != 0)
        .with_enable_pebs_my_thr(my_thread)
        .with_enable_pebs_oth_thr(other_thread)
        .bits()
}

/// One counter of a tagging set-up: the event to configure on `counter`'s
/// handle, on `escr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TaggedCounter {
    /// The counter.
    pub counter: Counter,
    /// The ESCR feeding it.
    pub escr: Escr,
    /// The event, with its masks, tag and CPL.
    pub event: EventSpec,
}

/// Most counters one set-up uses: four upstream events and the downstream
/// one.
pub const MAX_TAGGED_COUNTERS: usize = 5;

/// A checked tagging set-up: the counters to configure, upstream first, the
/// downstream counter last.
///
/// # The tagging mechanisms
///
/// The three at-retirement tagging mechanisms of SDM Vol. 3B
/// 18.15.6.2-18.15.6.4 as requests: each builder checks a whole set-up
/// (upstream events, tag bits, downstream masks, which ESCR feeds which
/// counter) and returns a [`TaggingPlan`], the event and ESCR to configure
/// on each counter's handle, upstream first. Nothing here touches the
/// hardware: the driver configures the counters, and checks again, against
/// what is claimed, that a downstream counter's tags are set
/// ([`crate::arch::netburst::driver::ConfigError::Untagged`]).
///
/// Every upstream ESCR is given a counter of its own to claim: an ESCR is
/// programmed only through a claimed counter, and SDM 18.15.5.9 warns that
/// an ESCR whose counters are all disabled may be powered down, even when
/// it is used only for tagging.
///
/// # Examples
///
/// Execution tagging (SDM 18.15.6.3): `x87_FP_uop` tags its µops with tag
/// value 1, `execution_event` on counter 12 counts the tagged non-bogus ones.
///
/// ```
/// use pmu::arch::netburst::{Counter, Escr, EventName, ExecUpstream, ExecutionTagging, TagValue};
///
/// let tag = TagValue::new(1).unwrap();
/// let plan = ExecutionTagging::new(Counter::IqCounter0, tag, TagValue::new(0).unwrap(), true, false)
///     .with_upstream(ExecUpstream { event: EventName::X87FpUop, counter: Counter::FlameCounter0, tag })?
///     .plan()?;
/// let (up, down) = (plan.iter().next().unwrap(), plan.downstream());
/// assert_eq!((up.counter, up.escr), (Counter::FlameCounter0, Escr::FirmEscr0));
/// assert_eq!(up.event.tag(), Some(tag));                   // x87_FP_uop:ALL:TAG0
/// assert_eq!((down.counter, down.escr), (Counter::IqCounter0, Escr::CruEscr2));
/// // Each goes to its counter's handle: CounterConfig::counting(up.event, up.escr).
/// # Ok::<(), pmu::arch::netburst::TaggingError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TaggingPlan {
    counters: [Option<TaggedCounter>; MAX_TAGGED_COUNTERS],
    len: usize,
    downstream: TaggedCounter,
}

impl TaggingPlan {
    fn new(downstream: TaggedCounter) -> TaggingPlan {
        TaggingPlan {
            counters: [None; MAX_TAGGED_COUNTERS],
            len: 0,
            downstream,
        }
    }

    fn push(&mut self, t: TaggedCounter) -> Result<(), TaggingError> {
        let slot = self
            .counters
            .get_mut(self.len)
            .ok_or(TaggingError::TooManyUpstreams)?;
        *slot = Some(t);
        self.len += 1;
        Ok(())
    }

    /// The counters in the order to configure them: upstream first, the
    /// downstream counter last.
    pub fn iter(&self) -> impl Iterator<Item = TaggedCounter> + '_ {
        self.counters
            .iter()
            .flatten()
            .copied()
            .chain([self.downstream])
    }

    /// The downstream counter, which counts the tagged µops.
    pub const fn downstream(&self) -> TaggedCounter {
        self.downstream
    }

    /// The counters the plan uses.
    pub fn counters(&self) -> CounterSet {
        self.iter()
            .fold(CounterSet::EMPTY, |s, t| s.with(t.counter))
    }
}

/// Why a tagging set-up is invalid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TaggingError {
    /// The downstream event cannot be counted on this counter (it needs an
    /// IQ counter fed by `CRU_ESCR2/3`).
    CounterNotFed(Counter),
    /// Front-end tagging with neither `TAGLOADS` nor `TAGSTORES`.
    NothingTagged,
    /// No `NBOGUS`/`BOGUS` bit selected downstream.
    NothingCounted,
    /// Upstream tag bit n is set but neither `NBOGUSn` nor `BOGUSn` is
    /// enabled downstream (SDM 18.15.6.3: the tag value "should coincide
    /// with the event mask selected in the downstream ESCR").
    TagNotCounted {
        /// Tag bit.
        bit: u8,
    },
    /// `NBOGUSn`/`BOGUSn` is enabled downstream but no upstream sets tag
    /// bit n.
    MaskBitNotTagged {
        /// Tag bit.
        bit: u8,
    },
    /// An upstream with a zero tag value.
    EmptyTag,
    /// The event is not an execution-tagging upstream event.
    NotAnUpstreamEvent(EventName),
    /// The upstream event cannot be counted on this counter.
    UpstreamCounterNotFed(EventName, Counter),
    /// Two events need the same ESCR.
    EscrConflict(Escr),
    /// Two events need the same counter.
    CounterConflict(Counter),
    /// More than four upstream events.
    TooManyUpstreams,
    /// The replay metric needs an upstream counter and none was given, or
    /// one was given for a metric without an upstream event.
    UpstreamCounter,
    /// Two counters given for one upstream and downstream.
    SameCounter(Counter),
}

impl core::fmt::Display for TaggingError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            TaggingError::CounterNotFed(c) => write!(
                f,
                "the downstream event cannot be counted on counter {} (it needs an IQ counter fed by CRU_ESCR2/3)",
                c.index()
            ),
            TaggingError::NothingTagged => {
                f.write_str("front-end tagging with neither TAGLOADS nor TAGSTORES")
            }
            TaggingError::NothingCounted => f.write_str("no NBOGUS/BOGUS bit selected downstream"),
            TaggingError::TagNotCounted { bit } => write!(
                f,
                "upstream tag bit {bit} is set but neither NBOGUS{bit} nor BOGUS{bit} is counted downstream"
            ),
            TaggingError::MaskBitNotTagged { bit } => write!(
                f,
                "NBOGUS{bit}/BOGUS{bit} is counted downstream but no upstream sets tag bit {bit}"
            ),
            TaggingError::EmptyTag => f.write_str("an upstream event with a zero tag value"),
            TaggingError::NotAnUpstreamEvent(e) => {
                write!(f, "{} is not an execution-tagging upstream event", e.name())
            }
            TaggingError::UpstreamCounterNotFed(e, c) => write!(
                f,
                "the upstream event {} cannot be counted on counter {}",
                e.name(),
                c.index()
            ),
            TaggingError::EscrConflict(e) => write!(f, "two events need {}", e.name()),
            TaggingError::CounterConflict(c) => write!(f, "two events need counter {}", c.index()),
            TaggingError::TooManyUpstreams => f.write_str("more than four upstream events"),
            TaggingError::UpstreamCounter => f.write_str(
                "the replay metric's upstream counter is missing, or given for a metric without one",
            ),
            TaggingError::SameCounter(c) => write!(
                f,
                "counter {} is given for two events of the set-up",
                c.index()
            ),
        }
    }
}

impl core::error::Error for TaggingError {}

/// The downstream `CRU_ESCR2/3` feeding `counter`.
fn downstream_escr(counter: Counter) -> Result<Escr, TaggingError> {
    [Escr::CruEscr2, Escr::CruEscr3]
        .into_iter()
        .find(|e| e.feeds(counter))
        .ok_or(TaggingError::CounterNotFed(counter))
}

/// The ESCR among `event`'s allowed ones that feeds `counter`.
fn escr_for(event: EventName, counter: Counter) -> Result<Escr, TaggingError> {
    event
        .info()
        .escrs
        .iter()
        .copied()
        .find(|e| e.feeds(counter))
        .ok_or(TaggingError::UpstreamCounterNotFed(event, counter))
}

/// `event` with the catalog masks `pick` selects, counting at the CPLs
/// given.
fn spec(
    event: EventName,
    pick: impl Fn(&MaskInfo) -> bool,
    os: bool,
    usr: bool,
) -> Result<EventSpec, TaggingError> {
    let masks = event
        .info()
        .masks
        .iter()
        .enumerate()
        .filter(|(_, m)| pick(m))
        .fold(0u32, |set, (i, _)| set | 1 << i);
    EventSpec::with_masks(Pmu::Netburst, event, masks)
        .map(|s| s.with_privilege(os, usr))
        .ok_or(TaggingError::NothingCounted)
}

/// Front-end tagging (SDM 18.15.6.2, Table 19-31): `uop_type` tags loads
/// and/or stores upstream, `front_end_event` counts the tagged µops at
/// retirement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FrontEndTagging {
    /// `uop_type:TAGLOADS` (Table 19-31 `memory_loads`).
    pub tag_loads: bool,
    /// `uop_type:TAGSTORES` (Table 19-31 `memory_stores`).
    pub tag_stores: bool,
    /// Count non-bogus (retired) tagged µops.
    pub nbogus: bool,
    /// Count bogus (squashed) tagged µops.
    pub bogus: bool,
    /// The counter for `uop_type` (fed by a `RAT_ESCR`).
    pub upstream: Counter,
    /// The IQ counter for `front_end_event`.
    pub counter: Counter,
    /// Count at CPL 0.
    pub os: bool,
    /// Count at CPL 1-3.
    pub usr: bool,
}

impl FrontEndTagging {
    /// The plan: `uop_type` on its `RAT_ESCR`, then `front_end_event` on
    /// `CRU_ESCR2/3`.
    pub fn plan(&self) -> Result<TaggingPlan, TaggingError> {
        if !self.tag_loads && !self.tag_stores {
            return Err(TaggingError::NothingTagged);
        }
        if !self.nbogus && !self.bogus {
            return Err(TaggingError::NothingCounted);
        }
        if self.upstream == self.counter {
            return Err(TaggingError::SameCounter(self.counter));
        }
        let down = downstream_escr(self.counter)?;
        let up = escr_for(EventName::UopType, self.upstream)?;
        let (loads, stores) = (self.tag_loads, self.tag_stores);
        let tags = move |m: &MaskInfo| {
            (loads && m.kind == MaskKind::Bit(1)) || (stores && m.kind == MaskKind::Bit(2))
        };
        let (nbogus, bogus) = (self.nbogus, self.bogus);
        let counted = move |m: &MaskInfo| {
            (nbogus && m.kind == MaskKind::Bit(0)) || (bogus && m.kind == MaskKind::Bit(1))
        };
        let mut plan = TaggingPlan::new(TaggedCounter {
            counter: self.counter,
            escr: down,
            event: spec(EventName::FrontEndEvent, counted, self.os, self.usr)?,
        });
        plan.push(TaggedCounter {
            counter: self.upstream,
            escr: up,
            event: spec(EventName::UopType, tags, self.os, self.usr)?,
        })?;
        Ok(plan)
    }
}

/// One upstream event of execution tagging.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ExecUpstream {
    /// The event (one of the `*_uop` events of Table 19-32).
    pub event: EventName,
    /// The counter that counts it (and keeps its ESCR powered).
    pub counter: Counter,
    /// The tag bits it sets.
    pub tag: TagValue,
}

/// Execution tagging (SDM 18.15.6.3, Table 19-32): up to four upstream
/// events each tag their µops with tag bits, `execution_event` counts µops
/// carrying the selected `NBOGUSn`/`BOGUSn` bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ExecutionTagging {
    upstreams: [Option<ExecUpstream>; 4],
    nbogus: TagValue,
    bogus: TagValue,
    counter: Counter,
    os: bool,
    usr: bool,
}

impl ExecutionTagging {
    /// Count on `counter`: `NBOGUSn` for the bits of `nbogus`, `BOGUSn` for
    /// those of `bogus`, at CPL 0 (`os`) and CPL 1-3 (`usr`).
    pub const fn new(
        counter: Counter,
        nbogus: TagValue,
        bogus: TagValue,
        os: bool,
        usr: bool,
    ) -> ExecutionTagging {
        ExecutionTagging {
            upstreams: [None; 4],
            nbogus,
            bogus,
            counter,
            os,
            usr,
        }
    }

    /// Add an upstream event (at most four).
    pub fn with_upstream(mut self, u: ExecUpstream) -> Result<ExecutionTagging, TaggingError> {
        let slot = self
            .upstreams
            .iter_mut()
            .find(|s| s.is_none())
            .ok_or(TaggingError::TooManyUpstreams)?;
        *slot = Some(u);
        Ok(self)
    }

    /// The plan: per upstream its `FIRM_ESCRx` event with mask `ALL` and
    /// its tag (`TAGn`, which sets tag value and `Tag_Enable`), then
    /// `execution_event` on `CRU_ESCR2/3`. The tag bits set upstream and
    /// those counted downstream must coincide (SDM 18.15.6.3: the tag value
    /// "should coincide with the event mask selected in the downstream
    /// ESCR").
    pub fn plan(&self) -> Result<TaggingPlan, TaggingError> {
        let down = downstream_escr(self.counter)?;
        let counted = self.nbogus.get() | self.bogus.get();
        if counted == 0 {
            return Err(TaggingError::NothingCounted);
        }
        let (nbogus, bogus) = (self.nbogus.get(), self.bogus.get());
        let counts = move |m: &MaskInfo| match m.kind {
            MaskKind::Bit(b) if b < 4 => nbogus & 1 << b != 0,
            MaskKind::Bit(b) if b < 8 => bogus & 1 << (b - 4) != 0,
            _ => false,
        };
        let mut plan = TaggingPlan::new(TaggedCounter {
            counter: self.counter,
            escr: down,
            event: spec(EventName::ExecutionEvent, counts, self.os, self.usr)?,
        });
        let mut tags = 0u8;
        let mut escrs_used = EscrSet::EMPTY;
        let mut counters_used = CounterSet::EMPTY.with(self.counter);
        for u in self.upstreams.iter().flatten() {
            if !u
                .event
                .info()
                .constraints
                .contains(&Constraint::TagsFor(EventName::ExecutionEvent))
            {
                return Err(TaggingError::NotAnUpstreamEvent(u.event));
            }
            if u.tag.get() == 0 {
                return Err(TaggingError::EmptyTag);
            }
            let escr = escr_for(u.event, u.counter)?;
            if escrs_used.contains(escr) {
                return Err(TaggingError::EscrConflict(escr));
            }
            escrs_used = escrs_used.with(escr);
            if counters_used.contains(u.counter) {
                return Err(TaggingError::CounterConflict(u.counter));
            }
            counters_used = counters_used.with(u.counter);
            tags |= u.tag.get();
            // Mask bit 15 `ALL` (Table 19-32) plus the tag bits.
            let tag = u.tag.get();
            let pick = move |m: &MaskInfo| match m.kind {
                MaskKind::Bit(15) => true,
                MaskKind::Tag(n) => tag & 1 << n != 0,
                _ => false,
            };
            plan.push(TaggedCounter {
                counter: u.counter,
                escr,
                event: spec(u.event, pick, self.os, self.usr)?,
            })?;
        }
        for bit in 0..4u8 {
            let tagged = tags & (1 << bit) != 0;
            let counts = counted & (1 << bit) != 0;
            if tagged && !counts {
                return Err(TaggingError::TagNotCounted { bit });
            }
            if counts && !tagged {
                return Err(TaggingError::MaskBitNotTagged { bit });
            }
        }
        Ok(plan)
    }
}

/// Replay tagging (SDM 18.15.6.4, Table 19-33). `MSR_PEBS_ENABLE` and
/// `MSR_PEBS_MATRIX_VERT` are the driver's: the metric is a mask of the
/// downstream `replay_event`, and the driver writes the two registers
/// (with PEBS, when the counter is configured with
/// [`CounterConfig::pebs`](crate::arch::netburst::driver::CounterConfig::pebs)).
///
/// Source disagreement: SDM 18.15.6.4 says the tags can serve ordinary
/// sampling "by not setting bit 24 nor bit 25", yet also that replay
/// tagging "must be enabled with the UOP_Tag flag (bit 24)". Linux and
/// libpfm3 set bit 24; so does the driver, always.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ReplayTagging {
    /// The metric.
    pub metric: ReplayMetric,
    /// The IQ counter for `replay_event`.
    pub counter: Counter,
    /// The counter for the metric's additional upstream event (Table 19-33:
    /// `MOB_load_replay`, `load_port_replay`, `store_port_replay`); must be
    /// `Some` exactly when the metric has one.
    pub upstream_counter: Option<Counter>,
    /// Count non-bogus tagged µops (Table 19-33 metrics use `NBOGUS`).
    pub nbogus: bool,
    /// Count bogus tagged µops.
    pub bogus: bool,
    /// Count at CPL 0.
    pub os: bool,
    /// Count at CPL 1-3.
    pub usr: bool,
}

impl ReplayTagging {
    /// The plan: the metric's upstream event if it has one, then
    /// `replay_event` with the metric on `CRU_ESCR2/3`.
    pub fn plan(&self) -> Result<TaggingPlan, TaggingError> {
        if !self.nbogus && !self.bogus {
            return Err(TaggingError::NothingCounted);
        }
        let down = downstream_escr(self.counter)?;
        let (nbogus, bogus, metric) = (self.nbogus, self.bogus, self.metric);
        let counts = move |m: &MaskInfo| match m.kind {
            MaskKind::Bit(0) => nbogus,
            MaskKind::Bit(1) => bogus,
            MaskKind::ReplayMetric(r) => r == metric,
            _ => false,
        };
        let mut plan = TaggingPlan::new(TaggedCounter {
            counter: self.counter,
            escr: down,
            event: spec(EventName::ReplayEvent, counts, self.os, self.usr)?,
        });
        match (self.metric.upstream(), self.upstream_counter) {
            (Some(up), Some(c)) => {
                if c == self.counter {
                    return Err(TaggingError::CounterConflict(c));
                }
                let escr = match up.escr {
                    Some(e) if e.feeds(c) => e,
                    Some(_) => return Err(TaggingError::UpstreamCounterNotFed(up.event, c)),
                    None => escr_for(up.event, c)?,
                };
                let mask = up.mask;
                let pick = move |m: &MaskInfo| matches!(m.kind, MaskKind::Bit(b) if mask.contains(EventMask(1 << b)));
                plan.push(TaggedCounter {
                    counter: c,
                    escr,
                    event: spec(up.event, pick, self.os, self.usr)?,
                })?;
            }
            (None, None) => {}
            _ => return Err(TaggingError::UpstreamCounter),
        }
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::netburst::ThreadCpl;
    use Counter::*;

    /// (counter, ESCR, ESCR image without its CPL bits) of each counter.
    fn images(p: &TaggingPlan) -> std::vec::Vec<(Counter, Escr, u64)> {
        p.iter()
            .map(|t| {
                let image = t.event.escr_value().with_cpl(ThreadCpl::NONE);
                (t.counter, t.escr, image.bits())
            })
            .collect()
    }

    fn tag(v: u8) -> TagValue {
        TagValue::new(v).unwrap()
    }

    #[test]
    fn front_end_tagging() {
        let fe = FrontEndTagging {
            tag_loads: true,
            tag_stores: false,
            nbogus: true,
            bogus: false,
            upstream: IqCounter1,
            counter: IqCounter0,
            os: true,
            usr: false,
        };
        let p = fe.plan().unwrap();
        assert_eq!(
            images(&p),
            [
                (IqCounter1, Escr::RatEscr0, 0x02 << 25 | 1 << 10), // uop_type TAGLOADS
                (IqCounter0, Escr::CruEscr2, 0x08 << 25 | 1 << 9),  // front_end_event NBOGUS
            ]
        );
        assert!(p.iter().all(|t| t.event.os() && !t.event.usr()));
        // Thread-1 side counters use RAT_ESCR1 / CRU_ESCR3.
        let p = FrontEndTagging {
            upstream: IqCounter3,
            counter: IqCounter2,
            tag_stores: true,
            ..fe
        }
        .plan()
        .unwrap();
        assert_eq!(
            images(&p),
            [
                (IqCounter3, Escr::RatEscr1, 0x02 << 25 | 0b110 << 9),
                (IqCounter2, Escr::CruEscr3, 0x08 << 25 | 1 << 9),
            ]
        );
        let refused = |f: FrontEndTagging| f.plan().unwrap_err();
        assert_eq!(
            refused(FrontEndTagging {
                counter: BpuCounter0,
                ..fe
            }),
            TaggingError::CounterNotFed(BpuCounter0)
        );
        assert_eq!(
            refused(FrontEndTagging {
                upstream: BpuCounter0,
                ..fe
            }),
            TaggingError::UpstreamCounterNotFed(EventName::UopType, BpuCounter0)
        );
        assert_eq!(
            refused(FrontEndTagging {
                tag_loads: false,
                ..fe
            }),
            TaggingError::NothingTagged
        );
        assert_eq!(
            refused(FrontEndTagging {
                nbogus: false,
                ..fe
            }),
            TaggingError::NothingCounted
        );
        assert_eq!(
            refused(FrontEndTagging {
                upstream: IqCounter0,
                ..fe
            }),
            TaggingError::SameCounter(IqCounter0)
        );
    }

    #[test]
    fn execution_tagging() {
        let up0 = ExecUpstream {
            event: EventName::PackedSpUop,
            counter: FlameCounter0,
            tag: tag(1),
        };
        let up1 = ExecUpstream {
            event: EventName::X87FpUop,
            counter: FlameCounter2,
            tag: tag(2),
        };
        let t = ExecutionTagging::new(IqCounter1, tag(0b11), tag(0), true, true)
            .with_upstream(up0)
            .unwrap()
            .with_upstream(up1)
            .unwrap();
        let p = t.plan().unwrap();
        assert_eq!(
            images(&p),
            [
                // FIRM_ESCR0 packed_SP_uop ALL, tag 1 and Tag_Enable.
                (
                    FlameCounter0,
                    Escr::FirmEscr0,
                    0x08 << 25 | 1 << 24 | 1 << 5 | 1 << 4
                ),
                // FIRM_ESCR1 x87_FP_uop ALL, tag 2.
                (
                    FlameCounter2,
                    Escr::FirmEscr1,
                    0x04 << 25 | 1 << 24 | 2 << 5 | 1 << 4
                ),
                // execution_event NBOGUS0|1.
                (IqCounter1, Escr::CruEscr2, 0x0C << 25 | 0b11 << 9),
            ]
        );
        assert_eq!(
            p.counters(),
            CounterSet::EMPTY
                .with(FlameCounter0)
                .with(FlameCounter2)
                .with(IqCounter1)
        );
        // Mismatches are errors.
        let only0 = ExecutionTagging::new(IqCounter1, tag(1), tag(0), true, true)
            .with_upstream(up0)
            .unwrap();
        assert!(only0.plan().is_ok());
        let both = ExecUpstream { tag: tag(3), ..up0 };
        let e = ExecutionTagging::new(IqCounter1, tag(1), tag(0), true, true)
            .with_upstream(both)
            .unwrap();
        assert_eq!(e.plan(), Err(TaggingError::TagNotCounted { bit: 1 }));
        let e = ExecutionTagging::new(IqCounter1, tag(0b101), tag(0), true, true)
            .with_upstream(up0)
            .unwrap();
        assert_eq!(e.plan(), Err(TaggingError::MaskBitNotTagged { bit: 2 }));
        let e = ExecutionTagging::new(IqCounter1, tag(0), tag(0), true, true)
            .with_upstream(up0)
            .unwrap();
        assert_eq!(e.plan(), Err(TaggingError::NothingCounted));
        // BOGUSn bits count the same tags (mask bits 4-7).
        let b = ExecutionTagging::new(IqCounter1, tag(0), tag(1), true, true)
            .with_upstream(up0)
            .unwrap();
        assert_eq!(
            b.plan().unwrap().downstream().event.event_mask().get(),
            0x10
        );
        // Structural errors.
        let same_escr = ExecUpstream {
            counter: FlameCounter1,
            ..up1
        };
        let e = ExecutionTagging::new(IqCounter1, tag(3), tag(0), true, true)
            .with_upstream(up0)
            .unwrap()
            .with_upstream(same_escr)
            .unwrap();
        assert_eq!(e.plan(), Err(TaggingError::EscrConflict(Escr::FirmEscr0)));
        let bad = ExecUpstream {
            event: EventName::GlobalPowerEvents,
            ..up0
        };
        let e = ExecutionTagging::new(IqCounter1, tag(1), tag(0), true, true)
            .with_upstream(bad)
            .unwrap();
        assert_eq!(
            e.plan(),
            Err(TaggingError::NotAnUpstreamEvent(
                EventName::GlobalPowerEvents
            ))
        );
        let unfed = ExecUpstream {
            counter: IqCounter0,
            ..up0
        };
        let e = ExecutionTagging::new(IqCounter1, tag(1), tag(0), true, true)
            .with_upstream(unfed)
            .unwrap();
        assert_eq!(
            e.plan(),
            Err(TaggingError::UpstreamCounterNotFed(
                EventName::PackedSpUop,
                IqCounter0
            ))
        );
        let zero = ExecUpstream { tag: tag(0), ..up0 };
        let e = ExecutionTagging::new(IqCounter1, tag(1), tag(0), true, true)
            .with_upstream(zero)
            .unwrap();
        assert_eq!(e.plan(), Err(TaggingError::EmptyTag));
        let mut full = ExecutionTagging::new(IqCounter1, tag(1), tag(0), true, true);
        for _ in 0..4 {
            full = full.with_upstream(up0).unwrap();
        }
        assert_eq!(full.with_upstream(up0), Err(TaggingError::TooManyUpstreams));
    }

    #[test]
    fn replay_tagging_every_metric() {
        for metric in ReplayMetric::ALL {
            let upstream_counter = metric.upstream().map(|u| match u.escr {
                Some(e) => e.counters().iter().next().unwrap(),
                None => BpuCounter0,
            });
            let r = ReplayTagging {
                metric,
                counter: IqCounter4,
                upstream_counter,
                nbogus: true,
                bogus: false,
                os: true,
                usr: true,
            };
            let p = r.plan().unwrap();
            let down = p.downstream();
            assert_eq!((down.counter, down.escr), (IqCounter4, Escr::CruEscr2));
            assert_eq!(
                down.event.escr_value().with_cpl(ThreadCpl::NONE).bits(),
                0x09 << 25 | 1 << 9
            );
            assert!(down.event.selects_replay_metric(metric));
            assert_eq!(
                ReplayMetric::ALL
                    .iter()
                    .filter(|m| down.event.selects_replay_metric(**m))
                    .count(),
                1
            );
            match (metric.upstream(), upstream_counter) {
                (Some(u), Some(c)) => {
                    let up = p.iter().next().unwrap();
                    assert_eq!((up.counter, up.event.event()), (c, u.event));
                    assert_eq!(up.event.event_mask(), u.mask);
                    assert!(u.escr.is_none_or(|e| e == up.escr));
                }
                _ => assert_eq!(p.iter().count(), 1),
            }
            // Without an upstream counter where one is needed (and vice versa).
            let swapped = ReplayTagging {
                upstream_counter: if upstream_counter.is_some() {
                    None
                } else {
                    Some(BpuCounter0)
                },
                ..r
            };
            assert_eq!(swapped.plan(), Err(TaggingError::UpstreamCounter));
        }
        let r = ReplayTagging {
            metric: ReplayMetric::SplitLoad,
            counter: IqCounter0,
            upstream_counter: Some(FlameCounter0),
            nbogus: true,
            bogus: false,
            os: true,
            usr: true,
        };
        // split_load must use SAAT_ESCR1 (counters 10, 11).
        assert_eq!(
            r.plan(),
            Err(TaggingError::UpstreamCounterNotFed(
                EventName::LoadPortReplay,
                FlameCounter0
            ))
        );
        assert_eq!(
            ReplayTagging { nbogus: false, ..r }.plan(),
            Err(TaggingError::NothingCounted)
        );
    }
}

//! Builders for the three at-retirement tagging mechanisms of SDM Vol. 3B
//! 18.15.6.2-18.15.6.4. Each returns the complete, validated list of MSR
//! writes, in order; nothing here touches the hardware.
//!
//! Every builder programs, per event: the ESCR, then the counter (cleared),
//! then the CCCR with `ENABLE` set, so counting starts only once the ESCR is
//! in place. Upstream ESCRs are always paired with an enabled counter they
//! can feed: SDM 18.15.5.9 warns that an ESCR whose counters are all disabled
//! may be powered down, even when it is used only for tagging.
//!
//! # Examples
//!
//! Execution tagging (SDM 18.15.6.3): `x87_FP_uop` tags its µops with tag
//! value 1, `execution_event` on counter 12 counts the tagged non-bogus ones.
//!
//! ```
//! use pmu::arch::netburst::{Counter, Event, ExecUpstream, ExecutionTagging, TagValue, ThreadCpl};
//!
//! let tag = TagValue::new(1).unwrap();
//! let writes = ExecutionTagging::new(
//!     Counter::IqCounter0,
//!     tag,
//!     TagValue::new(0).unwrap(),
//!     ThreadCpl::both_threads(true, false),
//! )
//! .with_upstream(ExecUpstream { event: Event::X87FpUop, counter: Counter::FlameCounter0, tag })?
//! .build()?;
//! assert!(!writes.as_slice().is_empty());                   // the MSR writes, in order
//! # Ok::<(), pmu::arch::netburst::TaggingError>(())
//! ```

use super::cccr::CccrValue;
use super::escr::{EscrValue, EventMask, TagValue, ThreadCpl};
use super::events::{Constraint, Event, ReplayMetric};
use super::msrs::{Counter, CounterSet, Escr, EscrSet, MSR_PEBS_ENABLE, MSR_PEBS_MATRIX_VERT};

/// `MSR_PEBS_ENABLE` bit 24, `UOP_Tag`: enable replay tagging.
pub const PEBS_ENABLE_UOP_TAG: u64 = 1 << 24;
/// `MSR_PEBS_ENABLE` bit 25, `ENABLE_PEBS_MY_THR` (`ENABLE_PEBS` on non-HT
/// parts). SDM 18.15.7.1 calls bit 24 "Enable PEBS"; Table 35-41 and 18.16.3
/// put PEBS at bit 25, which this crate follows.
pub const PEBS_ENABLE_PEBS: u64 = 1 << 25;
/// `MSR_PEBS_ENABLE` bit 26, `ENABLE_PEBS_OTH_THR`: PEBS for the other
/// logical processor of a Hyper-Threading package (SDM 18.16.3; reserved
/// without Hyper-Threading).
pub const PEBS_ENABLE_OTHER_THREAD: u64 = 1 << 26;

/// The `MSR_PEBS_ENABLE` image, as written by one logical processor: the
/// replay metrics' bits (Table 19-33) with `UOP_Tag` when there are any,
/// and PEBS for the writer (`my_thread`) and for the other logical
/// processor (`other_thread`).
pub const fn pebs_enable_image(metric_bits: u64, my_thread: bool, other_thread: bool) -> u64 {
    let mut v = metric_bits;
    if metric_bits != 0 {
        v |= PEBS_ENABLE_UOP_TAG;
    }
    if my_thread {
        v |= PEBS_ENABLE_PEBS;
    }
    if other_thread {
        v |= PEBS_ENABLE_OTHER_THREAD;
    }
    v
}

/// One WRMSR.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MsrWrite {
    /// MSR address.
    pub msr: u32,
    /// Value.
    pub value: u64,
}

/// Capacity of [`MsrWrites`].
pub const MAX_WRITES: usize = 16;

/// A fixed-capacity, ordered list of MSR writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MsrWrites {
    buf: [MsrWrite; MAX_WRITES],
    len: usize,
}

impl MsrWrites {
    const fn new() -> MsrWrites {
        MsrWrites {
            buf: [MsrWrite { msr: 0, value: 0 }; MAX_WRITES],
            len: 0,
        }
    }

    fn push(&mut self, msr: u32, value: u64) -> Result<(), TaggingError> {
        let slot = self
            .buf
            .get_mut(self.len)
            .ok_or(TaggingError::TooManyWrites)?;
        *slot = MsrWrite { msr, value };
        self.len += 1;
        Ok(())
    }

    /// Program `escr` with `value` and start `counter` on it.
    fn event(
        &mut self,
        escr: Escr,
        value: EscrValue,
        counter: Counter,
    ) -> Result<(), TaggingError> {
        self.push(escr.msr(), value.bits())?;
        self.push(counter.msr(), 0)?;
        let cccr = CccrValue::new(escr.select()).with_enable(true);
        self.push(counter.cccr().msr(), cccr.bits())
    }

    /// The writes, in order.
    pub fn as_slice(&self) -> &[MsrWrite] {
        &self.buf[..self.len]
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
    NotAnUpstreamEvent(Event),
    /// The upstream event cannot be counted on this counter.
    UpstreamCounterNotFed(Event, Counter),
    /// Two events need the same ESCR.
    EscrConflict(Escr),
    /// Two events need the same counter.
    CounterConflict(Counter),
    /// More than four upstream events.
    TooManyUpstreams,
    /// The replay metric needs an upstream counter and none was given, or
    /// one was given for a metric without an upstream event.
    UpstreamCounter,
    /// PEBS requested on a counter other than 16/17 (SDM 18.15.7, 18.16.3).
    NotPebsCapable(Counter),
    /// Internal capacity exceeded (cannot happen with valid input).
    TooManyWrites,
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
            TaggingError::NotPebsCapable(c) => write!(
                f,
                "PEBS on counter {}: only counters 16 and 17 can (SDM 18.15.7)",
                c.index()
            ),
            TaggingError::TooManyWrites => f.write_str("too many MSR writes for one set-up"),
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
fn escr_for(event: Event, counter: Counter) -> Result<Escr, TaggingError> {
    event
        .info()
        .escrs
        .iter()
        .copied()
        .find(|e| e.feeds(counter))
        .ok_or(TaggingError::UpstreamCounterNotFed(event, counter))
}

fn event_escr(event: Event, mask: EventMask, cpl: ThreadCpl) -> EscrValue {
    EscrValue::new(event.info().event_select, mask).with_cpl(cpl)
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
    /// The IQ counter for `front_end_event`.
    pub counter: Counter,
    /// CPL/thread flags for both ESCRs.
    pub cpl: ThreadCpl,
}

impl FrontEndTagging {
    /// The MSR writes: `RAT_ESCRx` (`uop_type`), `CRU_ESCR2/3`
    /// (`front_end_event`), counter, CCCR. The RAT ESCR is the one on the
    /// counter's side, so the enabled counter keeps it powered.
    pub fn build(&self) -> Result<MsrWrites, TaggingError> {
        if !self.tag_loads && !self.tag_stores {
            return Err(TaggingError::NothingTagged);
        }
        if !self.nbogus && !self.bogus {
            return Err(TaggingError::NothingCounted);
        }
        let down = downstream_escr(self.counter)?;
        let up = escr_for(Event::UopType, self.counter)?;
        let up_mask = EventMask((self.tag_loads as u16) << 1 | (self.tag_stores as u16) << 2);
        let down_mask = EventMask(self.nbogus as u16 | (self.bogus as u16) << 1);
        let mut w = MsrWrites::new();
        w.push(
            up.msr(),
            event_escr(Event::UopType, up_mask, self.cpl).bits(),
        )?;
        w.event(
            down,
            event_escr(Event::FrontEndEvent, down_mask, self.cpl),
            self.counter,
        )?;
        Ok(w)
    }
}

/// One upstream event of execution tagging.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ExecUpstream {
    /// The event (one of the `*_uop` events of Table 19-32).
    pub event: Event,
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
    cpl: ThreadCpl,
}

impl ExecutionTagging {
    /// Count on `counter`: `NBOGUSn` for the bits of `nbogus`, `BOGUSn` for
    /// those of `bogus`.
    pub const fn new(
        counter: Counter,
        nbogus: TagValue,
        bogus: TagValue,
        cpl: ThreadCpl,
    ) -> ExecutionTagging {
        ExecutionTagging {
            upstreams: [None; 4],
            nbogus,
            bogus,
            counter,
            cpl,
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

    /// The MSR writes: per upstream its `FIRM_ESCRx` (mask `ALL`, tag value,
    /// tag enable), counter and CCCR; then `CRU_ESCR2/3`
    /// (`execution_event`), counter and CCCR.
    pub fn build(&self) -> Result<MsrWrites, TaggingError> {
        let down = downstream_escr(self.counter)?;
        let counted = self.nbogus.get() | self.bogus.get();
        if counted == 0 {
            return Err(TaggingError::NothingCounted);
        }
        let mut w = MsrWrites::new();
        let mut tags = 0u8;
        let mut escrs_used = EscrSet::EMPTY;
        let mut counters_used = CounterSet::EMPTY.with(self.counter);
        for u in self.upstreams.iter().flatten() {
            if !u
                .event
                .info()
                .constraints
                .contains(&Constraint::TagsFor(Event::ExecutionEvent))
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
            // Mask bit 15 `ALL` (Table 19-32) plus the tag.
            let v = event_escr(u.event, EventMask(1 << 15), self.cpl)
                .with_tag_value(u.tag)
                .with_tag_enable(true);
            w.event(escr, v, u.counter)?;
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
        let mask = EventMask(self.nbogus.get() as u16 | (self.bogus.get() as u16) << 4);
        w.event(
            down,
            event_escr(Event::ExecutionEvent, mask, self.cpl),
            self.counter,
        )?;
        Ok(w)
    }
}

/// Replay tagging (SDM 18.15.6.4, Table 19-33).
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
    /// Also set `ENABLE_PEBS` (bit 25); the counter must be 16 or 17 and the
    /// DS area must be set up separately (`IA32_DS_AREA`).
    pub pebs: bool,
    /// CPL/thread flags.
    pub cpl: ThreadCpl,
}

impl ReplayTagging {
    /// The MSR writes: `MSR_PEBS_ENABLE` (metric bits | `UOP_Tag` [|
    /// `ENABLE_PEBS`]), `MSR_PEBS_MATRIX_VERT`, the upstream event if any,
    /// then `CRU_ESCR2/3` (`replay_event`), counter and CCCR.
    ///
    /// Source disagreement: SDM 18.15.6.4 says the tags can serve ordinary
    /// sampling "by not setting bit 24 nor bit 25", yet also that replay
    /// tagging "must be enabled with the UOP_Tag flag (bit 24)". Linux and
    /// libpfm3 set bit 24; so does this builder, always.
    pub fn build(&self) -> Result<MsrWrites, TaggingError> {
        if !self.nbogus && !self.bogus {
            return Err(TaggingError::NothingCounted);
        }
        if self.pebs && !self.counter.pebs_capable() {
            return Err(TaggingError::NotPebsCapable(self.counter));
        }
        let down = downstream_escr(self.counter)?;
        let mut w = MsrWrites::new();
        let enable = self.metric.pebs_enable_bits()
            | PEBS_ENABLE_UOP_TAG
            | if self.pebs { PEBS_ENABLE_PEBS } else { 0 };
        w.push(MSR_PEBS_ENABLE, enable)?;
        w.push(MSR_PEBS_MATRIX_VERT, self.metric.matrix_vert_bits())?;
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
                w.event(escr, event_escr(up.event, up.mask, self.cpl), c)?;
            }
            (None, None) => {}
            _ => return Err(TaggingError::UpstreamCounter),
        }
        let mask = EventMask(self.nbogus as u16 | (self.bogus as u16) << 1);
        w.event(
            down,
            event_escr(Event::ReplayEvent, mask, self.cpl),
            self.counter,
        )?;
        Ok(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Counter::*;

    fn pairs(w: &MsrWrites) -> std::vec::Vec<(u32, u64)> {
        w.as_slice().iter().map(|x| (x.msr, x.value)).collect()
    }

    const ALL: ThreadCpl = ThreadCpl::ALL;

    #[test]
    fn front_end_tagging() {
        let fe = FrontEndTagging {
            tag_loads: true,
            tag_stores: false,
            nbogus: true,
            bogus: false,
            counter: IqCounter0,
            cpl: ALL,
        };
        let w = fe.build().unwrap();
        assert_eq!(
            pairs(&w),
            [
                (0x3BC, 0x02 << 25 | 1 << 10 | 0xF), // RAT_ESCR0: uop_type TAGLOADS
                (0x3CC, 0x08 << 25 | 1 << 9 | 0xF),  // CRU_ESCR2: front_end_event NBOGUS
                (0x30C, 0),
                (0x36C, 0x3_B000), // select 5, enable, active thread 11b
            ]
        );
        // Thread-1 side uses RAT_ESCR1 / CRU_ESCR3.
        let w = FrontEndTagging {
            counter: IqCounter5,
            tag_stores: true,
            ..fe
        }
        .build()
        .unwrap();
        assert_eq!(w.as_slice()[0].msr, 0x3BD);
        assert_eq!(w.as_slice()[0].value >> 9 & 0xFFFF, 0b110);
        assert_eq!(w.as_slice()[1].msr, 0x3CD);
        assert_eq!(
            FrontEndTagging {
                counter: BpuCounter0,
                ..fe
            }
            .build(),
            Err(TaggingError::CounterNotFed(BpuCounter0))
        );
        assert_eq!(
            FrontEndTagging {
                tag_loads: false,
                ..fe
            }
            .build(),
            Err(TaggingError::NothingTagged)
        );
        assert_eq!(
            FrontEndTagging {
                nbogus: false,
                ..fe
            }
            .build(),
            Err(TaggingError::NothingCounted)
        );
    }

    fn tag(v: u8) -> TagValue {
        TagValue::new(v).unwrap()
    }

    #[test]
    fn execution_tagging() {
        let up0 = ExecUpstream {
            event: Event::PackedSpUop,
            counter: FlameCounter0,
            tag: tag(1),
        };
        let up1 = ExecUpstream {
            event: Event::X87FpUop,
            counter: FlameCounter2,
            tag: tag(2),
        };
        let t = ExecutionTagging::new(IqCounter1, tag(0b11), tag(0), ALL)
            .with_upstream(up0)
            .unwrap()
            .with_upstream(up1)
            .unwrap();
        let w = t.build().unwrap();
        assert_eq!(
            pairs(&w),
            [
                (0x3A4, 0x08 << 25 | 1 << 24 | 1 << 5 | 1 << 4 | 0xF), // FIRM_ESCR0 packed_SP_uop ALL, tag 1
                (0x308, 0),
                (0x368, 0x3_3000),                                     // select 1
                (0x3A5, 0x04 << 25 | 1 << 24 | 2 << 5 | 1 << 4 | 0xF), // FIRM_ESCR1 x87_FP_uop, tag 2
                (0x30A, 0),
                (0x36A, 0x3_3000),
                (0x3CC, 0x0C << 25 | 0b11 << 9 | 0xF), // execution_event NBOGUS0|1
                (0x30D, 0),
                (0x36D, 0x3_B000),
            ]
        );
        // Mismatches are errors.
        let only0 = ExecutionTagging::new(IqCounter1, tag(1), tag(0), ALL)
            .with_upstream(up0)
            .unwrap();
        assert!(only0.build().is_ok());
        let both = ExecUpstream { tag: tag(3), ..up0 };
        let e = ExecutionTagging::new(IqCounter1, tag(1), tag(0), ALL)
            .with_upstream(both)
            .unwrap();
        assert_eq!(e.build(), Err(TaggingError::TagNotCounted { bit: 1 }));
        let e = ExecutionTagging::new(IqCounter1, tag(0b101), tag(0), ALL)
            .with_upstream(up0)
            .unwrap();
        assert_eq!(e.build(), Err(TaggingError::MaskBitNotTagged { bit: 2 }));
        let e = ExecutionTagging::new(IqCounter1, tag(0), tag(0), ALL)
            .with_upstream(up0)
            .unwrap();
        assert_eq!(e.build(), Err(TaggingError::NothingCounted));
        // BOGUSn bits count the same tags (mask bits 4-7).
        let b = ExecutionTagging::new(IqCounter1, tag(0), tag(1), ALL)
            .with_upstream(up0)
            .unwrap();
        assert_eq!(b.build().unwrap().as_slice()[3].value >> 9 & 0xFF, 0x10);
        // Structural errors.
        let same_escr = ExecUpstream {
            counter: FlameCounter1,
            ..up1
        };
        let e = ExecutionTagging::new(IqCounter1, tag(3), tag(0), ALL)
            .with_upstream(up0)
            .unwrap()
            .with_upstream(same_escr)
            .unwrap();
        assert_eq!(e.build(), Err(TaggingError::EscrConflict(Escr::FirmEscr0)));
        let bad = ExecUpstream {
            event: Event::GlobalPowerEvents,
            ..up0
        };
        let e = ExecutionTagging::new(IqCounter1, tag(1), tag(0), ALL)
            .with_upstream(bad)
            .unwrap();
        assert_eq!(
            e.build(),
            Err(TaggingError::NotAnUpstreamEvent(Event::GlobalPowerEvents))
        );
        let unfed = ExecUpstream {
            counter: IqCounter0,
            ..up0
        };
        let e = ExecutionTagging::new(IqCounter1, tag(1), tag(0), ALL)
            .with_upstream(unfed)
            .unwrap();
        assert_eq!(
            e.build(),
            Err(TaggingError::UpstreamCounterNotFed(
                Event::PackedSpUop,
                IqCounter0
            ))
        );
        let zero = ExecUpstream { tag: tag(0), ..up0 };
        let e = ExecutionTagging::new(IqCounter1, tag(1), tag(0), ALL)
            .with_upstream(zero)
            .unwrap();
        assert_eq!(e.build(), Err(TaggingError::EmptyTag));
        let mut full = ExecutionTagging::new(IqCounter1, tag(1), tag(0), ALL);
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
                pebs: true,
                cpl: ALL,
            };
            let w = r.build().unwrap();
            let s = w.as_slice();
            assert_eq!(
                s[0],
                MsrWrite {
                    msr: 0x3F1,
                    value: metric.pebs_enable_bits() | 3 << 24
                }
            );
            assert_eq!(
                s[1],
                MsrWrite {
                    msr: 0x3F2,
                    value: metric.matrix_vert_bits()
                }
            );
            let n = s.len();
            assert_eq!(n, if upstream_counter.is_some() { 8 } else { 5 });
            assert_eq!(
                s[n - 3],
                MsrWrite {
                    msr: 0x3CC,
                    value: 0x09 << 25 | 1 << 9 | 0xF
                }
            );
            assert_eq!(
                s[n - 1],
                MsrWrite {
                    msr: 0x370,
                    value: 0x3_B000
                }
            );
            if let (Some(u), Some(c)) = (metric.upstream(), upstream_counter) {
                assert_eq!(s[2].value >> 25, u.event.info().event_select.get() as u64);
                assert_eq!(s[2].value >> 9 & 0xFFFF, u.mask.get() as u64);
                assert_eq!(s[4].msr, c.cccr().msr());
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
            assert_eq!(swapped.build(), Err(TaggingError::UpstreamCounter));
        }
        let r = ReplayTagging {
            metric: ReplayMetric::L1LoadMiss,
            counter: IqCounter0,
            upstream_counter: None,
            nbogus: true,
            bogus: false,
            pebs: true,
            cpl: ALL,
        };
        assert_eq!(r.build(), Err(TaggingError::NotPebsCapable(IqCounter0)));
        // Without PEBS only UOP_Tag is set, as Linux does.
        assert_eq!(
            ReplayTagging { pebs: false, ..r }
                .build()
                .unwrap()
                .as_slice()[0]
                .value,
            0x0100_0001
        );
        // split_load must use SAAT_ESCR1 (counters 10, 11).
        let sl = ReplayTagging {
            metric: ReplayMetric::SplitLoad,
            upstream_counter: Some(FlameCounter0),
            pebs: false,
            ..r
        };
        assert_eq!(
            sl.build(),
            Err(TaggingError::UpstreamCounterNotFed(
                Event::LoadPortReplay,
                FlameCounter0
            ))
        );
        assert_eq!(
            ReplayTagging { nbogus: false, ..r }.build(),
            Err(TaggingError::NothingCounted)
        );
    }
}

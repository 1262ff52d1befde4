//! The NetBurst driver: typestate counters ([`crate::counter`]) over the
//! ESCR/CCCR/counter triples, with the register traffic the hardware needs
//! and nothing more.
//!
//! # MSR traffic per operation
//!
//! Each handle caches its ESCR and CCCR images, so no operation reads back a
//! register the driver wrote. Counted with [`crate::access::Recording`] in the
//! tests below (exact equality, not bounds):
//!
//! | operation | RDMSR | WRMSR | RDPMC | accesses |
//! |---|---|---|---|---|
//! | configure | 0 | 2 | 0 | ESCR image, counter preset (the CCCR of an Unclaimed counter is idle already: `take` and `release` leave it so) |
//! | enable / resume | 0 | 1 | 0 | CCCR with `ENABLE` |
//! | cascade_from | 0 | 1 | 0 | CCCR with `CASCADE` |
//! | halt, counting counter | 0 | 1 | 0 | CCCR without `ENABLE` |
//! | halt, sampling counter | 0 | 1 (+1) | 1 | CCCR; RDPMC to find an overflow whose PMI the halt cancelled; counter rewrite only if there was one |
//! | halt, `FORCE_OVF` counter | 0 | 1 | 1 | CCCR; RDPMC to account the increments since the last PMI service |
//! | read | 0 | 0 | 1 | RDPMC (all 40 bits) |
//! | clear_overflow | 0 | 1 | 0 | CCCR image of the current state, `OVF` clear |
//! | release | 0 | 2 (+1) | 0 | CCCR idle (active thread 11b, all else 0), counter 0; the ESCR only if it tags µops (below) |
//! | PMI handler | 0 | 2 per overflowed counter (1 for a `FORCE_OVF` one) | 1 per armed counter | plus one LVT write ([`super::pmi`]); PEBS records are memory, no access |
//! | [`NetBurstDriver::set_pebs_area`] | 0 | 1 | 0 | `IA32_DS_AREA` (and the DS management area, in memory) |
//! | configure, release: a PEBS or replay-tagging counter | 0 | +1 or +2 | 0 | `MSR_PEBS_ENABLE`, `MSR_PEBS_MATRIX_VERT`, each only when its image changes |
//!
//! # Tagging and PEBS
//!
//! At-retirement events count µops an upstream ESCR (or the PEBS MSRs)
//! tagged (SDM 18.15.6). The driver keeps what each claimed counter's ESCR
//! tags, per logical processor, and refuses a downstream counter whose tags
//! nothing claimed sets ([`ConfigError::Untagged`],
//! [`ConfigError::MissingUpstream`]): configure the upstream counters
//! first ([`super::TaggingPlan`] plans a whole set-up). It owns the
//! package-wide `MSR_PEBS_ENABLE` and `MSR_PEBS_MATRIX_VERT` (Table 35-41):
//! the replay metrics of the claimed `replay_event` counters (one metric
//! set at a time, [`ConfigError::ReplayTaggingBusy`]) and PEBS per logical
//! processor ([`CounterConfig::pebs`], [`NetBurstDriver::set_pebs_area`]).
//! The PEBS counter's overflow takes the PEBS assist instead of a PMI
//! (its CCCR has no `OVF_PMI`); the PMI comes from the DS buffer's
//! threshold and the handler drains the records (each a sample carrying
//! it, [`super::pmi::Capture::Pebs`]).
//!
//! Linux's NetBurst driver (`arch/x86/events/intel/p4.c`), for comparison:
//! start = 4 WRMSR (counter twice for erratum N15, ESCR, CCCR), disable = 1
//! WRMSR, read = 1 RDPMC, and per PMI 3 reads for every active counter plus
//! 3 writes for each overflowed one.
//!
//! Erratum N15 (a counter write may not take) is not worked around: the
//! model does not exhibit it and the doubled write Linux uses is known not to
//! follow the erratum's own workaround.
//!
//! # Releasing leaves the ESCR
//!
//! An ESCR counts only through a counter whose CCCR selects it and is
//! enabled (SDM 18.15.3, 18.15.5.9: writing an ESCR starts nothing),
//! so once the CCCR is idle the ESCR's image is inert: its `T0_*`/`T1_*`
//! bits count nothing, and the next `configure` that books the ESCR writes
//! the whole register. Release therefore writes 2 registers: the CCCR idle
//! and the counter zeroed (so the next owner cannot read this owner's
//! count). The exception is an ESCR that tags µops for other counters: one
//! with `Tag_Enable` set (execution tagging, SDM 18.15.6.3) or programmed
//! with a front-end or replay tagging event (`uop_type`, 18.15.6.2; the
//! upstream events of Table 19-33). It keeps tagging while any counter of
//! its block is enabled (18.15.5.9), whoever owns that counter, so release
//! clears it too (3 WRMSR).
//!
//! # Halting a sampling counter
//!
//! `OVF` is hardware state the handle cannot know, and a CCCR write must
//! give it some value. The halt writes it clear, then reads the (now frozen)
//! counter: if the counter passed its overflow since the last reload, the
//! period is accounted for there ([`PmiState::periods_at_halt`]) and the
//! counter is rewritten to the same point of the next period. A PMI that was
//! pending for that overflow then finds the counter disarmed and counts as
//! spurious, so the period is neither lost nor counted twice.
//!
//! # Two CPUs, one package (Hyper-Threading)
//!
//! The 18 counters, 18 CCCRs and 45 ESCRs are shared by the two logical
//! processors of a package (SDM 18.16). Each counter is configured for one
//! logical processor: its ESCR counts only that processor's
//! `T*_OS`/`T*_USR` (Table 18-29), its CCCR has active thread 11b (as Linux
//! does) and interrupts only that processor (`OVF_PMI_T0` or
//! `OVF_PMI_T1`). What is per package and what per CPU:
//!
//! | what | whose | how it is shared |
//! |---|---|---|
//! | the package's [`NetBurstPmu`] | the package | one `static`, made once per package (its `unsafe` constructor's contract); both drivers are taken from it, and it refuses a second driver for a logical processor |
//! | counters, CCCRs, ESCRs | the package | claimed one at a time, package-wide: an atomic claim in the [`NetBurstPmu`], so the two CPUs' drivers never hold one register at once; each written only by its claimer |
//! | `MSR_PEBS_ENABLE`, `MSR_PEBS_MATRIX_VERT` | the package | a spin lock in the [`NetBurstPmu`], taken by a driver's configure or release of a PEBS or replay-tagging counter, never by a PMI handler |
//! | `IA32_DS_AREA`, the DS save area | each logical processor | owned by the driver that installed it ([`NetBurstDriver::set_pebs_area`]) until it hands it back ([`NetBurstDriver::take_pebs_area`]) |
//! | a driver ([`NetBurstDriver::take_for`]), its MSR backend, its handles | one CPU | created and used on that CPU (handles are never `Send`; a driver is `Send` exactly when its backend is, and the hardware backend is not: [`crate::counter`], "Auto traits"); one owner type per CPU |
//! | the PMI handler's state for a logical processor | that CPU | written by that CPU's handler and driver only ([`PmiState`], inside the [`NetBurstPmu`]: atomics only) |
//!
//! A kernel that runs the package's PMU from one CPU takes one driver for
//! both logical processors ([`NetBurstDriver::take`]); an SMP kernel takes
//! one per CPU ([`NetBurstDriver::take_for`], each configuring counters for
//! its own logical processor, [`ConfigError::OtherLogicalProcessor`]), and
//! both use the PMU at once. The first driver of a package idles the 18
//! CCCRs; the others join without touching a register (they wait until
//! the first has done so). A claim lost to the other CPU is refused
//! ([`ConfigError::CounterClaimed`], [`ConfigError::EscrBusy`]), with the
//! handle given back.
//!
//! The PMI state's counts are exact without a lock because every slot of
//! it has one writer at a time ([`PmiState`]): with one driver per CPU the
//! driver and the handler of a logical processor run on the same CPU; with
//! one driver for both ([`NetBurstDriver::take`]), halt a sampling counter
//! of logical processor k on k's CPU (or with k's LVT entry masked):
//! halting it from the other processor while k's handler services the same
//! overflow may miscount that one period, never more.
//!
//! # Examples
//!
//! Take the PMU of a package (here the model's), count one event, release,
//! give the PMU back with every token:
//!
//! (On a register-level model: a doc test with the `model` feature, ignored without it.)
//!
#![cfg_attr(feature = "model", doc = "```")]
#![cfg_attr(not(feature = "model"), doc = "```ignore")]
//! use pmu::arch::netburst::driver::{CounterConfig, Counters, InitError, NetBurstDriver};
//! use pmu::arch::netburst::{Escr, EventSpec, NetBurstPmu};
//! use pmu::model::netburst::{Config, EventKind, LogicalProcessor, NetBurstModel, Privilege};
//!
//! // SAFETY: the one value for this package (the model's).
//! static PACKAGE0: NetBurstPmu = unsafe { NetBurstPmu::new() };
//! pmu::owner!(Cpu0);
//! pmu::owner!(Cpu1);
//! let model = NetBurstModel::new(Config::prescott_ht());
//! let cpu = pmu::detect::detect(&model, &mut model.clone())?.usable_netburst().unwrap();
//! let (mut pmu, c) = NetBurstDriver::<Cpu0, _>::take(model.clone(), &cpu, &PACKAGE0)?;
//! // One driver per owner, one per logical processor:
//! let again = NetBurstDriver::<Cpu0, _>::take(model.clone(), &cpu, &PACKAGE0);
//! assert!(matches!(again, Err(InitError::AlreadyTaken)));
//! let other = NetBurstDriver::<Cpu1, _>::take(model, &cpu, &PACKAGE0);
//! assert!(matches!(other, Err(InitError::LogicalProcessorTaken { .. })));
//!
//! let spec: EventSpec = "global_power_events:RUNNING:k".parse()?;
//! let c0 = c.c0.configure(&mut pmu, &CounterConfig::counting(spec, Escr::FsbEscr0))?;
//! let c0 = c0.enable(&mut pmu)?;
//! let running = EventKind::for_spec(&spec, Escr::FsbEscr0).unwrap();
//! pmu.msr().inject(running.on(LogicalProcessor::T0, Privilege::Os, 42));
//! assert_eq!(c0.read(&mut pmu)?, 42);
//! let c0 = c0.release(&mut pmu)?;
//! // Every token back, each Unclaimed: the owner and the package are free.
//! let _model = pmu.give_back(Counters { c0, ..c });
//! assert!(!PACKAGE0.is_served(pmu::arch::netburst::LogicalProcessor::T0));
//! # Ok::<(), Box<dyn core::error::Error>>(())
//! ```

use core::fmt;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;

use super::cccr::{ActiveThread, CccrValue, ExtendedCascade};
use super::ds::{DsArea, PebsRecord, RECORD_BYTES};
use super::escr::ThreadCpl;
use super::events::{EventName, Tagging};
use super::msrs::{
    Counter, CounterSet, Escr, EscrSet, IA32_DS_AREA, MSR_PEBS_ENABLE, MSR_PEBS_MATRIX_VERT,
};
use super::parse::EventSpec;
use super::physical::{Joined, NetBurstPmu, PebsWrites, Refused};
use super::pmi::{PmiState, overflow_rule};
use super::thread::LogicalProcessor;
use crate::access::{MsrBackend, MsrOps};
use crate::counter::owner::{self, Ending};
use crate::counter::rules::{CanCascade, Readable};
use crate::counter::state::{Cascaded, State, Unclaimed};
use crate::counter::{self, Arch, Cascade, Failed, Owner, OwnerId, StateTag, Transition};
use crate::detect;
use crate::sampling::SampleAfter;
use crate::sealed::{Sealed, TOKEN, Token};

/// A PEBS counter's preset and reload for a record every `s` events: the
/// assist takes the event after the overflow, so a period of N starts at
/// `-(N-1)` (SDM 18.15.7).
const fn pebs_reset(s: SampleAfter) -> u64 {
    s.at_residual(1)
}

/// The value a free CCCR is given: [`CccrValue::IDLE`] (active thread 11b,
/// every other field clear; the model's #GP on a non-HT CCCR without 11b
/// is how the requirement was found).
const IDLE_CCCR: u64 = CccrValue::IDLE.bits();

/// The NetBurst architecture, as a type parameter of [`counter::Handle`].
#[derive(Debug)]
pub enum NetBurst {}

/// A NetBurst counter handle: counter `N` of the PMU owned by `O`, in
/// state `S`.
pub type NetBurstHandle<O, const N: u8, S> = counter::Handle<NetBurst, O, N, S>;

/// What a claimed NetBurst counter remembers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Programmed {
    escr: Option<Escr>,
    /// The CCCR has `FORCE_OVF` (and the PMI bit).
    force_ovf: bool,
    /// The ESCR tags µops for other counters ([`Programmed::escr_tags`]).
    escr_tags: bool,
    /// The counter runs PEBS ([`CounterConfig::pebs`]).
    pebs: bool,
    /// It is in the driver's tagging books ([`EventSpec::touches_tagging`]
    /// or PEBS).
    tagged: bool,
    cccr: CccrValue,
    lp: LogicalProcessor,
    sampling: Option<SampleAfter>,
    /// The ESCR's image (its event, masks and this logical processor's
    /// `T*_OS`/`T*_USR`), which a context switch writes.
    escr_value: u64,
}

impl Programmed {
    /// The ESCR feeding the counter (`None` when unclaimed).
    pub const fn escr(&self) -> Option<Escr> {
        self.escr
    }

    /// Whether the ESCR tags µops for other counters: its image has
    /// `Tag_Enable` (ESCR bit 4, execution tagging, SDM 18.15.6.3) or its
    /// event is a front-end or replay tagging one
    /// ([`EventName::tags_uops`](super::EventName::tags_uops)). Such an ESCR acts
    /// whether or not its own counter counts, so `release` clears it.
    pub const fn escr_tags(&self) -> bool {
        self.escr_tags
    }

    /// The CCCR image with `ENABLE`, `CASCADE` and `OVF` clear.
    pub const fn cccr(&self) -> CccrValue {
        self.cccr
    }

    /// The logical processor the counter counts for and interrupts.
    pub const fn logical_processor(&self) -> LogicalProcessor {
        self.lp
    }

    /// The sample-after value, for a sampling counter.
    pub const fn sampling(&self) -> Option<SampleAfter> {
        self.sampling
    }

    /// Whether the counter runs PEBS (its period is [`Programmed::sampling`]).
    pub const fn pebs(&self) -> bool {
        self.pebs
    }

    const fn cccr_for(&self, state: StateTag) -> CccrValue {
        match state {
            StateTag::Enabled => self.cccr.with_enable(true),
            StateTag::Cascaded => self.cccr.with_cascade(true),
            _ => self.cccr,
        }
    }
}

impl Sealed for NetBurst {}

impl Arch for NetBurst {
    const NAME: &'static str = "NetBurst";
    const COUNTERS: u8 = 18;
    type Programmed = Programmed;
    const UNPROGRAMMED: Programmed = Programmed {
        escr_tags: false,
        pebs: false,
        tagged: false,
        force_ovf: false,
        escr: None,
        cccr: CccrValue::from_bits_truncate(0),
        lp: LogicalProcessor::T0,
        sampling: None,
        escr_value: 0,
    };

    fn can_cascade(from: u8, to: u8) -> bool {
        match (Counter::from_index(from), Counter::from_index(to)) {
            (Some(f), Some(t)) => t.can_cascade_from(f),
            _ => false,
        }
    }
}

macro_rules! cascade_pairs {
    ($(($from:literal, $to:literal)),* $(,)?) => {
        $(impl Cascade<$from, $to> for NetBurst {})*

        #[cfg(test)]
        pub(super) const CASCADE_PAIRS: &[(u8, u8)] = &[$(($from, $to)),*];
    };
}

// SDM 18.15.5.6: the same position in the other pair of the block, either
// way; 16 only from 14, 17 only from 15 (never 14 from 16 or 15 from 17).
cascade_pairs!(
    (0, 2),
    (2, 0),
    (1, 3),
    (3, 1),
    (4, 6),
    (6, 4),
    (5, 7),
    (7, 5),
    (8, 10),
    (10, 8),
    (9, 11),
    (11, 9),
    (12, 14),
    (14, 12),
    (13, 15),
    (15, 13),
    (14, 16),
    (15, 17),
);

// Every counter has exactly one cascade source, so with only the real impls
// the compiler would infer `FROM` from the single candidate and report a
// type mismatch instead of the rule. A second, unusable candidate per
// counter (255: no handle for counter 255 can exist, `Counter::token`
// asserts `N < 18` and erased handles never carry it) keeps the inference
// ambiguous, so an illegal pair fails the `Cascade` bound with its message.
macro_rules! ambiguity_guards {
    ($($to:literal)*) => { $(impl Cascade<255, $to> for NetBurst {})* };
}
ambiguity_guards!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17);

macro_rules! counters {
    ($($field:ident = $n:literal),* $(,)?) => {
        /// The claim tokens for the 18 counters of the PMU owned by `O`,
        /// handed out once by [`NetBurstDriver::take`].
        #[derive(Debug)]
        #[allow(missing_docs)]
        pub struct Counters<O: Owner> {
            $(pub $field: NetBurstHandle<O, $n, Unclaimed>,)*
        }

        impl<O: Owner> Counters<O> {
            const fn issue() -> Counters<O> {
                Counters { $($field: counter::Handle::token(),)* }
            }

            /// All 18 tokens as run-time handles, indexed by counter number
            /// (for placements computed at run time, e.g. by
            /// [`super::schedule`]).
            pub fn erase_all(self) -> [counter::AnyHandle<NetBurst>; 18] {
                [$(self.$field.erase(),)*]
            }

            /// The 18 tokens back from run-time handles (as
            /// [`Counters::erase_all`] made them, or a group's or
            /// multiplexer's handles after release): each must be counter
            /// `i` at index `i`, Unclaimed, issued for owner `O`; otherwise
            /// they come back unchanged.
            #[allow(clippy::result_large_err, reason = "the handles come back by value")]
            pub fn from_erased(
                all: [counter::AnyHandle<NetBurst>; 18],
            ) -> Result<Counters<O>, [counter::AnyHandle<NetBurst>; 18]> {
                let whole = all.iter().zip(0u8..).all(|(h, i)| {
                    h.owner() == OwnerId::of::<O>()
                        && h.index() == i
                        && h.state() == StateTag::Unclaimed
                });
                // An Unclaimed handle carries nothing but its identity:
                // the 18 checked ones are these tokens.
                if whole { Ok(Counters::issue()) } else { Err(all) }
            }
        }
    };
}

counters!(
    c0 = 0,
    c1 = 1,
    c2 = 2,
    c3 = 3,
    c4 = 4,
    c5 = 5,
    c6 = 6,
    c7 = 7,
    c8 = 8,
    c9 = 9,
    c10 = 10,
    c11 = 11,
    c12 = 12,
    c13 = 13,
    c14 = 14,
    c15 = 15,
    c16 = 16,
    c17 = 17,
);

/// What to count on a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CounterConfig {
    /// The event, its masks, CPL and filtering.
    pub event: EventSpec,
    /// The ESCR to program (from [`super::schedule`] or chosen by hand): it
    /// must allow the event and feed the counter.
    pub escr: Escr,
    /// The logical processor to count for and interrupt.
    pub lp: LogicalProcessor,
    /// Interrupt every N events (`None`: count only).
    pub sampling: Option<SampleAfter>,
    /// `FORCE_OVF` (CCCR bit 25): the counter overflows on every increment
    /// (SDM 18.15.5.5), so with its PMI it interrupts on every increment
    /// while it goes on counting from 0; the handler accounts each
    /// increment as one period of [`crate::arch::netburst::pmi::PmiState`]
    /// and does not reload the counter. Exclusive with `sampling`.
    pub force_ovf: bool,
    /// PEBS (SDM 18.15.7): every `sampling` period the next at-retirement
    /// event takes the PEBS assist, which writes a record of the precise
    /// RIP and registers into the DS buffer of [`NetBurstDriver::set_pebs_area`]
    /// and reloads the counter; the PMI comes once the buffer holds this
    /// many records (at most its capacity). Set with [`CounterConfig::pebs`].
    pub pebs: Option<u32>,
}

impl CounterConfig {
    /// Count `event` on `escr` for logical processor T0, without interrupts.
    pub const fn counting(event: EventSpec, escr: Escr) -> CounterConfig {
        CounterConfig {
            event,
            escr,
            lp: LogicalProcessor::T0,
            sampling: None,
            force_ovf: false,
            pebs: None,
        }
    }

    /// For logical processor `lp`.
    pub const fn on(mut self, lp: LogicalProcessor) -> CounterConfig {
        self.lp = lp;
        self
    }

    /// Interrupt every `n` events.
    pub const fn sampling(mut self, n: SampleAfter) -> CounterConfig {
        self.sampling = Some(n);
        self.force_ovf = false;
        self
    }

    /// Interrupt on every increment with `FORCE_OVF` (see
    /// [`CounterConfig::force_ovf`]), counting on meanwhile.
    pub const fn every_increment(mut self) -> CounterConfig {
        self.force_ovf = true;
        self.sampling = None;
        self.pebs = None;
        self
    }

    /// PEBS: a record every `n` events (`n` >= 2: the assist takes the
    /// event after the overflow, so the counter is preset to `-(n - 1)`),
    /// the PMI after `records_per_pmi` records. The counter must be the
    /// logical processor's PEBS counter (16 for T0, 17 for T1, SDM
    /// 18.16.3) and the event an at-retirement one (`front_end_event`,
    /// `execution_event`, `replay_event`), tagged as those need.
    pub const fn pebs(mut self, n: SampleAfter, records_per_pmi: u32) -> CounterConfig {
        self.sampling = Some(n);
        self.force_ovf = false;
        self.pebs = Some(records_per_pmi);
        self
    }
}

/// Why the driver refused a configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ConfigError {
    /// The ESCR is not wired to the counter (SDM Table 18-63).
    NotWired {
        /// The ESCR.
        escr: Escr,
        /// The counter.
        counter: Counter,
    },
    /// The event cannot be counted on this ESCR (SDM Tables 19-28, 19-29).
    EscrNotAllowed {
        /// The ESCR.
        escr: Escr,
    },
    /// The ESCR does not exist on this CPU model.
    EscrMissing {
        /// The ESCR.
        escr: Escr,
    },
    /// Another claimed counter uses the ESCR.
    EscrBusy {
        /// The ESCR.
        escr: Escr,
    },
    /// The counter is claimed already (only a hand-built
    /// [`crate::counter::AnyHandle`] could ask; the typed handles cannot).
    CounterClaimed(Counter),
    /// Logical processor T1 on a part without Hyper-Threading.
    NoSuchLogicalProcessor,
    /// The sample-after value was checked against another counter width.
    SampleAfterRule,
    /// Both `sampling` and `force_ovf`: a `FORCE_OVF` counter already
    /// interrupts on every increment.
    ForceOvfWithSampling,
    /// Counter `to` has no extended cascade from counter `from` on this
    /// model (SDM Table 18-65: 16 into 12, 17 into 15, 16 and 17 into each
    /// other, on models 2, 3, 4 and 6).
    NoExtendedCascade {
        /// The source counter asked for.
        from: u8,
        /// The cascaded counter.
        to: u8,
    },
    /// No counter has this number (only an [`crate::counter::AnyHandle`]
    /// built by hand can name one).
    NoSuchCounter(u8),
    /// The event counts tagged µops, and no claimed counter of the same
    /// logical processor tags them: configure the upstream first
    /// (`uop_type` for `front_end_event`, an ESCR with tag bit `bit` for
    /// `execution_event`, SDM 18.15.6.2-18.15.6.3), or select a replay
    /// metric for `replay_event` (Table 19-33).
    Untagged {
        /// The mechanism.
        tagging: Tagging,
        /// Execution tagging: the first tag bit counted and not set.
        bit: Option<u8>,
    },
    /// The replay metric needs its upstream event counted on a claimed
    /// counter of the same logical processor first (Table 19-33).
    MissingUpstream {
        /// The event.
        event: EventName,
    },
    /// Replay tagging is set up with other metrics by a claimed counter:
    /// `MSR_PEBS_ENABLE` and `MSR_PEBS_MATRIX_VERT` are one per package.
    ReplayTaggingBusy,
    /// PEBS is unavailable (IA32_MISC_ENABLE\[12\]).
    PebsUnavailable,
    /// PEBS for `lp` runs only on its counter: 16 for T0, 17 for T1 (SDM
    /// 18.16.3).
    NotPebsCounter {
        /// The logical processor.
        lp: LogicalProcessor,
    },
    /// PEBS needs an at-retirement event (SDM 18.15.7).
    NotAtRetirement,
    /// This driver serves one logical processor
    /// ([`NetBurstDriver::take_for`]): a counter for `lp` is configured by
    /// the driver on `lp`'s CPU.
    OtherLogicalProcessor {
        /// The logical processor asked for.
        lp: LogicalProcessor,
    },
    /// PEBS for `lp` needs its DS save area first
    /// ([`NetBurstDriver::set_pebs_area`]).
    NoPebsArea {
        /// The logical processor.
        lp: LogicalProcessor,
    },
    /// PEBS for `lp` must be set up by the driver running on `lp`:
    /// `IA32_DS_AREA` and `ENABLE_PEBS_MY_THR` are the writer's own (SDM
    /// Table 35-41, 18.16.3).
    PebsElsewhere {
        /// The logical processor.
        lp: LogicalProcessor,
    },
    /// A PEBS period must be at least 2 (the assist takes the event after
    /// the overflow).
    PebsPeriod,
    /// The DS save area of `lp` is in use by its PEBS counter.
    PebsBusy {
        /// The logical processor.
        lp: LogicalProcessor,
    },
    /// A context (a task's counters, [`crate::arch::Switch`]) carries no
    /// µop tagging, PEBS or `FORCE_OVF`: their state is the package's
    /// tagging MSRs and the DS area, not the counter's.
    NotInContext,
    /// No ESCR set aside for contexts with its counter allows the event
    /// (a counter set aside takes the free ESCRs that feed it).
    NoContextEscr,
}

fn counter_at<E>(n: u8) -> Result<Counter, Error<E>> {
    Counter::from_index(n).ok_or(Error::Config(ConfigError::NoSuchCounter(n)))
}

/// A driver error: a refused configuration, or a faulting register access
/// (only a model can fault; on hardware `E` is uninhabited).
pub type Error<E> = counter::DriverError<ConfigError, E>;

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::NotWired { escr, counter } => write_not_wired(f, *escr, *counter),
            ConfigError::EscrNotAllowed { escr } => {
                write!(f, "the event cannot be counted on {}", escr.name())
            }
            ConfigError::EscrMissing { escr } => {
                write!(f, "{} does not exist on this CPU model", escr.name())
            }
            ConfigError::EscrBusy { escr } => {
                write!(f, "{} is used by another claimed counter", escr.name())
            }
            ConfigError::CounterClaimed(c) => write!(f, "counter {} is claimed", c.index()),
            ConfigError::NoSuchLogicalProcessor => {
                f.write_str("logical processor T1 does not exist: this part has no Hyper-Threading")
            }
            ConfigError::SampleAfterRule => {
                f.write_str("the sample-after value was checked against another counter rule")
            }
            ConfigError::NoExtendedCascade { from, to } => write!(
                f,
                "counter {to} has no extended cascade from counter {from} on this model (SDM Table 18-65)"
            ),
            ConfigError::ForceOvfWithSampling => f.write_str(
                "FORCE_OVF interrupts on every increment: it takes no sample-after value",
            ),
            ConfigError::NoSuchCounter(n) => write!(f, "there is no counter {n}: the counters are 0 to 17"),
            ConfigError::Untagged { tagging, bit } => write_untagged(f, *tagging, *bit),
            ConfigError::MissingUpstream { event } => write!(
                f,
                "the replay metric needs {} counted on a claimed counter of the same logical processor first (SDM Table 19-33)",
                event.name()
            ),
            ConfigError::ReplayTaggingBusy => f.write_str(
                "replay tagging is set up with other metrics by a claimed counter (MSR_PEBS_ENABLE is one per package)",
            ),
            ConfigError::PebsUnavailable => {
                f.write_str("PEBS is unavailable (IA32_MISC_ENABLE[12] set)")
            }
            ConfigError::NotPebsCounter { lp } => write!(
                f,
                "PEBS for {lp:?} runs only on counter {} (SDM 18.16.3)",
                Counter::pebs_for(*lp).index()
            ),
            ConfigError::NotAtRetirement => {
                f.write_str("PEBS needs an at-retirement event (SDM 18.15.7)")
            }
            ConfigError::NoPebsArea { lp } => {
                write!(f, "PEBS for {lp:?} needs its DS save area first")
            }
            ConfigError::PebsElsewhere { lp } => write!(
                f,
                "PEBS for {lp:?} must be set up by the driver running on {lp:?} (IA32_DS_AREA and ENABLE_PEBS_MY_THR are per logical processor)"
            ),
            ConfigError::PebsPeriod => f.write_str("a PEBS period must be at least 2"),
            ConfigError::OtherLogicalProcessor { lp } => write!(
                f,
                "this driver serves the other logical processor: configure counters for {lp:?} with the driver on its CPU"
            ),
            ConfigError::PebsBusy { lp } => {
                write!(f, "the DS save area of {lp:?} is in use by its PEBS counter")
            }
            ConfigError::NotInContext => f.write_str(
                "a task's counters carry no µop tagging, PEBS or FORCE_OVF: that state is the package's, not the counter's",
            ),
            ConfigError::NoContextEscr => f.write_str(
                "no ESCR set aside for tasks with this counter allows the event: set aside a counter whose ESCRs do",
            ),
        }
    }
}

/// [`ConfigError::NotWired`]: the ESCR, the counter and the counters the
/// ESCR does feed.
fn write_not_wired(f: &mut fmt::Formatter<'_>, escr: Escr, counter: Counter) -> fmt::Result {
    write!(
        f,
        "{} does not feed counter {}: it feeds counters ",
        escr.name(),
        counter.index()
    )?;
    let feeds = escr.counters();
    for (i, c) in feeds.iter().enumerate() {
        let sep = match i {
            0 => "",
            _ if i + 1 == feeds.len() as usize => " and ",
            _ => ", ",
        };
        write!(f, "{sep}{}", c.index())?;
    }
    f.write_str(" (SDM Table 18-63)")
}

/// [`ConfigError::Untagged`]: what the tagged event needs claimed first.
fn write_untagged(f: &mut fmt::Formatter<'_>, tagging: Tagging, bit: Option<u8>) -> fmt::Result {
    match tagging {
        Tagging::FrontEnd => f.write_str(
            "front_end_event counts µops uop_type tagged: claim a uop_type counter (TAGLOADS or TAGSTORES) for the same logical processor first (SDM 18.15.6.2)",
        ),
        Tagging::Execution => write!(
            f,
            "execution_event counts tag bit {} but no claimed ESCR of the same logical processor sets it: claim the upstream event with that tag first (SDM 18.15.6.3)",
            bit.unwrap_or(0)
        ),
        Tagging::Replay => f.write_str("replay_event needs a replay metric (SDM Table 19-33)"),
    }
}

/// Why the driver could not take the PMU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum InitError<E> {
    /// A driver for this owner is live: the PMU has its owner already.
    AlreadyTaken,
    /// The driver of this owner was dropped without `give_back`: the owner
    /// is held for good ([`crate::counter::owner`]); take the PMU for
    /// another owner type.
    OwnerDropped {
        /// The owner type's name.
        owner: &'static str,
    },
    /// IA32_MISC_ENABLE\[7\] is clear: the PMU MSRs must not be used.
    PerfMonUnavailable,
    /// A driver for logical processor T1 on a part without
    /// Hyper-Threading.
    NoSuchLogicalProcessor,
    /// A live driver of the package serves `lp` already (one driver per
    /// logical processor: [`NetBurstPmu`]).
    LogicalProcessorTaken {
        /// The logical processor.
        lp: LogicalProcessor,
    },
    /// Clearing the CCCRs faulted.
    Access(E),
}

impl<E: fmt::Debug> fmt::Display for InitError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InitError::AlreadyTaken => f.write_str("the PMU's owner is taken by a live driver"),
            InitError::OwnerDropped { owner } => owner::write_dropped(f, owner),
            InitError::PerfMonUnavailable => {
                f.write_str("performance monitoring is unavailable (IA32_MISC_ENABLE[7] clear)")
            }
            InitError::NoSuchLogicalProcessor => {
                f.write_str("logical processor T1 does not exist: this part has no Hyper-Threading")
            }
            InitError::LogicalProcessorTaken { lp } => write!(
                f,
                "a live driver of this package serves {lp:?} already (one driver per logical processor)"
            ),
            InitError::Access(e) => write!(f, "clearing the CCCRs faulted: {e:?}"),
        }
    }
}

impl<E: fmt::Debug> core::error::Error for InitError<E> {}

impl core::error::Error for ConfigError {}

/// A driver of the NetBurst PMU of one package ([`NetBurstPmu`]) for one
/// or both of its logical processors, held for owner `O`, owning the MSR
/// backend and the DS save areas it installed.
pub struct NetBurstDriver<'s, O: Owner, M: MsrBackend> {
    msr: M,
    model: u8,
    hyper_threading: bool,
    pmu: &'s NetBurstPmu,
    /// The DS save area installed for each logical processor
    /// ([`NetBurstDriver::set_pebs_area`]), published to the PMI state.
    ds: [Option<DsArea>; 2],
    /// The logical processor this driver serves ([`NetBurstDriver::take_for`]);
    /// `None`: both, from one CPU ([`NetBurstDriver::take`]).
    only: Option<LogicalProcessor>,
    /// The counters claimed through this driver (the package's claims,
    /// shared with the other drivers of the package, are in `pmi`).
    claimed: CounterSet,
    /// Counters cascaded by the extended cascade bit (CCCR bit 11).
    extended: CounterSet,
    /// The images of each claimed counter, as its handle holds them: what
    /// ending the driver releases it with ([`Drop`]).
    images: [Programmed; 18],
    pebs_available: bool,
    /// The PEBS MSRs and what tagging checks need ([`package`]).
    package: Package,
    /// The ESCRs claimed with the counters set aside for contexts
    /// ([`crate::arch::Switch`]).
    context_escrs: EscrSet,
    /// The counters set aside for contexts.
    context_counters: CounterSet,
    _owner: PhantomData<O>,
}

impl<'s, O: Owner, M: MsrBackend> NetBurstDriver<'s, O, M> {
    /// Take the PMU of the package described by `cpu` for owner `O`, from
    /// one CPU, for both logical processors (counters are configured for
    /// either, [`CounterConfig::on`]): the driver of a kernel that runs the
    /// package's PMU from one CPU. The first driver of a package disables
    /// all 18 CCCRs (a previous owner, for example the kernel before a
    /// kexec, may have left counters running with interrupts on); every
    /// driver hands out the 18 claim tokens. `pmu` is the package
    /// ([`NetBurstPmu`]). Refused, before any register is touched, while a
    /// driver of `O` is live ([`InitError::AlreadyTaken`],
    /// [`crate::counter::owner`]) or a live driver serves either logical
    /// processor ([`InitError::LogicalProcessorTaken`]).
    pub fn take(
        msr: M,
        cpu: &detect::NetBurstCpu,
        pmu: &'s NetBurstPmu,
    ) -> Result<(Self, Counters<O>), InitError<M::Error>> {
        Self::take_with(msr, cpu, pmu, None)
    }

    /// Take the PMU of the package for logical processor `lp` alone, on
    /// `lp`'s CPU, for owner `O` (one owner type per CPU): each CPU of a
    /// Hyper-Threading package takes its own driver with its own MSR
    /// backend from the package's one `pmu`, and both use the shared PMU at
    /// once; a second driver for `lp` is refused
    /// ([`InitError::LogicalProcessorTaken`]). Each driver configures counters for its own logical processor
    /// only ([`ConfigError::OtherLogicalProcessor`]); a counter or ESCR is
    /// claimed for the whole package, by one driver at a time (an atomic
    /// claim: the loser is refused with [`ConfigError::CounterClaimed`] or
    /// [`ConfigError::EscrBusy`]); each CPU's PMI handler services the
    /// counters of its logical processor. See the module documentation
    /// ("Two CPUs, one package").
    pub fn take_for(
        lp: LogicalProcessor,
        msr: M,
        cpu: &detect::NetBurstCpu,
        pmu: &'s NetBurstPmu,
    ) -> Result<(Self, Counters<O>), InitError<M::Error>> {
        let hyper_threading = cpu.hyper_threading && cpu.logical_processors >= 2;
        if lp == LogicalProcessor::T1 && !hyper_threading {
            return Err(InitError::NoSuchLogicalProcessor);
        }
        Self::take_with(msr, cpu, pmu, Some(lp))
    }

    fn take_with(
        mut msr: M,
        cpu: &detect::NetBurstCpu,
        pmu: &'s NetBurstPmu,
        only: Option<LogicalProcessor>,
    ) -> Result<(Self, Counters<O>), InitError<M::Error>> {
        if !cpu.perf_mon_available {
            return Err(InitError::PerfMonUnavailable);
        }
        match owner::take::<O>() {
            Ok(()) => {}
            Err(owner::Taken::Live) => return Err(InitError::AlreadyTaken),
            Err(owner::Taken::Dropped) => {
                return Err(InitError::OwnerDropped {
                    owner: core::any::type_name::<O>(),
                });
            }
        }
        let lps = served(only);
        if let Err(lp) = pmu.serve(lps) {
            owner::give_back::<O>();
            return Err(InitError::LogicalProcessorTaken { lp });
        }
        let claims = pmu.claims();
        if claims.join() == Joined::First {
            for c in Counter::ALL {
                if let Err(e) = msr.write_msr(c.cccr().msr(), IDLE_CCCR) {
                    claims.leave();
                    pmu.unserve(lps);
                    owner::give_back::<O>();
                    return Err(InitError::Access(e));
                }
            }
            claims.ready();
        }
        let hyper_threading = cpu.hyper_threading && cpu.logical_processors >= 2;
        let driver = NetBurstDriver {
            msr,
            model: cpu.model,
            hyper_threading,
            pmu,
            ds: [None, None],
            only,
            claimed: CounterSet::EMPTY,
            extended: CounterSet::EMPTY,
            images: [NetBurst::UNPROGRAMMED; 18],
            pebs_available: cpu.pebs_available,
            package: Package::new(only.unwrap_or(LogicalProcessor::T0)),
            context_escrs: EscrSet::EMPTY,
            context_counters: CounterSet::EMPTY,
            _owner: PhantomData,
        };
        Ok((driver, Counters::issue()))
    }

    /// Give the PMU back with every claim token this driver issued, and get
    /// the backend back: owner `O` and the logical processors it served are
    /// free again. `counters` holds all 18 tokens Unclaimed (released
    /// handles, reassembled with [`Counters::from_erased`] from run-time
    /// ones), so no handle of this driver outlives it and nothing is
    /// claimed: a type guarantee. A DS save area still installed is taken
    /// back (`IA32_DS_AREA` = 0, 1 WRMSR; its memory stays the processor's
    /// for good, so it is not returned: take it back first with
    /// [`NetBurstDriver::take_pebs_area`] to use it again); otherwise no
    /// register is accessed.
    ///
    /// A driver dropped without `give_back` idles what it ran (releases
    /// every claimed counter, takes its DS areas back) and frees the
    /// package's logical processors, but holds owner `O` for good
    /// ([`crate::counter::owner`]).
    pub fn give_back(self, counters: Counters<O>) -> M {
        let _ = counters;
        self.into_backend(Ending::GivenBack)
    }

    /// Tests only: give the driver back although tokens may remain (tests
    /// whose handles die with each round).
    #[cfg(test)]
    pub(crate) fn retire(self) -> M {
        self.into_backend(Ending::GivenBack)
    }

    /// Ends the driver (as `how` says) and moves its backend out.
    fn into_backend(self, how: Ending) -> M {
        let mut this = ManuallyDrop::new(self);
        this.end(how);
        // SAFETY: `this` is never dropped (`ManuallyDrop`) or used after
        // this read, so the backend is moved out exactly once. The fields
        // left behind own nothing that needs dropping: references, sets,
        // images, and DS areas, whose memory is `'static` (`end` took them
        // back from the processor).
        unsafe { core::ptr::read(&this.msr) }
    }

    /// Ends the driver: every counter it still claims released (none when
    /// it is given back with every token), every DS save area taken back,
    /// so nothing of it counts, interrupts, or is written by the processor;
    /// then the package's logical processors and owner `O` are given back
    /// (or `O` held for good, when the driver was dropped). A refused
    /// access (only a model refuses) leaves that register as it was.
    fn end(&mut self, how: Ending) {
        for c in self.claimed.iter() {
            let p = self.images[usize::from(c.index())];
            let _ = counter::Driver::release(self, TOKEN, c.index(), &p);
        }
        for lp in [LogicalProcessor::T0, LogicalProcessor::T1] {
            if self.ds[lp as usize].is_some() && self.take_pebs_area(lp).is_err() {
                // SAFETY: withdrawing: no pointer is published.
                unsafe { self.pmu.pmi().publish_ds_area(lp, None) };
            }
        }
        let pmu = self.pmu;
        pmu.claims().release(0, self.context_escrs.bits());
        self.context_escrs = EscrSet::EMPTY;
        pmu.claims().leave();
        pmu.unserve(served(self.only));
        owner::end::<O>(how);
    }

    /// The counters claimed through this driver's handles.
    pub const fn claimed(&self) -> CounterSet {
        self.claimed
    }

    /// The counters and ESCRs claimed in the package by every driver (this
    /// one's included), as the scheduler's [`Occupied`]: what a placement
    /// for this logical processor must leave alone (SDM 18.16: the two
    /// logical processors share them).
    ///
    /// [`Occupied`]: super::schedule::Occupied
    pub fn occupied(&self) -> super::schedule::Occupied {
        super::schedule::Occupied::NONE
            .with_claims(self.pmu.claimed_escrs(), self.pmu.claimed_counters())
    }

    /// Where this driver counts core cycles (`perf`'s `cycles`, which Linux
    /// maps to `global_power_events` RUNNING on NetBurst, `p4.c`'s
    /// `p4_general_events`): the first counter fed by `FSB_ESCR0` or
    /// `FSB_ESCR1` (SDM Table 18-63: counters 0-3) that is free in the
    /// package, with a free ESCR, for the logical processor this driver
    /// serves (T0 for a driver of both); the logical processor's "own" ESCR
    /// first (`FSB_ESCR0` for T0, `FSB_ESCR1` for T1). `None` when every
    /// such pair is claimed.
    pub fn core_cycles(&self) -> Option<(u8, CounterConfig)> {
        let lp = self.only.unwrap_or(LogicalProcessor::T0);
        let escrs = match lp {
            LogicalProcessor::T0 => [Escr::FsbEscr0, Escr::FsbEscr1],
            LogicalProcessor::T1 => [Escr::FsbEscr1, Escr::FsbEscr0],
        };
        let claimed = self.occupied();
        let event: EventSpec = crate::netburst_event!("global_power_events:RUNNING");
        escrs
            .into_iter()
            .filter(|e| !claimed.escrs().contains(*e))
            .find_map(|e| {
                let c = Counter::ALL
                    .into_iter()
                    .find(|&c| e.feeds(c) && !claimed.counters().contains(c))?;
                Some((c.index(), CounterConfig::counting(event, e).on(lp)))
            })
    }

    /// The MSR backend.
    pub fn msr(&mut self) -> &mut M {
        &mut self.msr
    }

    /// The state shared with the PMI handler.
    pub fn pmi_state(&self) -> &'s PmiState {
        self.pmu.pmi()
    }

    /// The package this driver was taken from.
    pub fn physical(&self) -> &'s NetBurstPmu {
        self.pmu
    }

    /// The DS save area installed for `lp` by this driver.
    pub fn pebs_area(&self, lp: LogicalProcessor) -> Option<&DsArea> {
        self.ds[lp as usize].as_ref()
    }

    fn build_programmed(&self, n: u8, c: &CounterConfig) -> Result<Programmed, ConfigError> {
        let counter = Counter::from_index(n).ok_or(ConfigError::NoSuchCounter(n))?;
        if !c.escr.feeds(counter) {
            return Err(ConfigError::NotWired {
                escr: c.escr,
                counter,
            });
        }
        if !c.escr.available_on(self.model) {
            return Err(ConfigError::EscrMissing { escr: c.escr });
        }
        if !c.event.allows(c.escr) {
            return Err(ConfigError::EscrNotAllowed { escr: c.escr });
        }
        // Whether the counter and the ESCR are free is decided by the
        // atomic claim, after every other check (`claim_and_write`).
        let t1 = c.lp == LogicalProcessor::T1;
        if t1 && !self.hyper_threading {
            return Err(ConfigError::NoSuchLogicalProcessor);
        }
        if self.only.is_some_and(|lp| lp != c.lp) {
            return Err(ConfigError::OtherLogicalProcessor { lp: c.lp });
        }
        if c.sampling.is_some_and(|s| s.rule() != overflow_rule()) {
            return Err(ConfigError::SampleAfterRule);
        }
        if c.force_ovf && c.sampling.is_some() {
            return Err(ConfigError::ForceOvfWithSampling);
        }
        // A PEBS counter's overflow takes the assist, not a PMI: the PMI
        // comes from the DS buffer's threshold (SDM 18.15.7).
        let interrupt = (c.sampling.is_some() && c.pebs.is_none()) || c.force_ovf;
        let cccr = c
            .event
            .cccr_value()
            .with_enable(false)
            .with_escr_select(c.escr.select())
            .with_active_thread(ActiveThread::Any)
            .with_ovf_pmi_t0(interrupt && !t1)
            .with_ovf_pmi_t1(interrupt && t1)
            .with_force_ovf(c.force_ovf);
        Ok(Programmed {
            escr: Some(c.escr),
            force_ovf: c.force_ovf,
            escr_tags: c.event.escr_value().tag_enable() || c.event.event().tags_uops(),
            pebs: c.pebs.is_some(),
            tagged: c.pebs.is_some() || c.event.touches_tagging(),
            cccr,
            lp: c.lp,
            sampling: c.sampling,
            escr_value: self.escr_image(c),
        })
    }

    fn escr_image(&self, c: &CounterConfig) -> u64 {
        let (os, usr) = (c.event.os(), c.event.usr());
        let none = ThreadCpl::NONE;
        let cpl = match c.lp {
            LogicalProcessor::T0 => ThreadCpl {
                t0_os: os,
                t0_usr: usr,
                ..none
            },
            LogicalProcessor::T1 => ThreadCpl {
                t1_os: os,
                t1_usr: usr,
                ..none
            },
        };
        c.event.escr_value().with_cpl(cpl).bits()
    }

    /// Clear the `OVF` flag of a claimed counter, keeping the rest of its
    /// state (1 WRMSR). Clearing the alternate's `OVF` is one of the two ways
    /// to halt a cascaded counter (SDM 18.15.5.6); the other is halting it.
    pub fn clear_overflow<const N: u8, S: State + Readable>(
        &mut self,
        counter: &NetBurstHandle<O, N, S>,
    ) -> Result<(), Error<M::Error>> {
        self.clear_overflow_at(N, counter.programmed(), S::TAG)
    }

    /// [`NetBurstDriver::clear_overflow`] for a run-time handle: refused
    /// if it is unclaimed or another driver's.
    pub fn clear_overflow_erased(
        &mut self,
        counter: &counter::AnyHandle<NetBurst>,
    ) -> Result<(), counter::ErasedError<Error<M::Error>>> {
        counter.check::<Self>(counter::Operation::ClearOverflow)?;
        self.clear_overflow_at(counter.index(), counter.programmed(), counter.state())
            .map_err(counter::ErasedError::Driver)
    }

    fn clear_overflow_at(
        &mut self,
        n: u8,
        p: &Programmed,
        state: StateTag,
    ) -> Result<(), Error<M::Error>> {
        let extended = state == StateTag::Cascaded && self.extended.contains(counter_at(n)?);
        let image = match self.extended_image(n, p) {
            Some(image) if extended => image,
            _ => p.cccr_for(state),
        };
        self.write_cccr(n, image.bits())
    }

    /// The extended cascade (CCCR bit 11, SDM 18.15.5.7 and Table 18-65):
    /// on family 0Fh models 2, 3, 4 and 6, counter 12 (`IQ_COUNTER0`) can
    /// count only while counter 16 has overflowed, 15 while 17 has, and 16
    /// and 17 each while the other has: a Configured or Halted `counter`
    /// becomes Cascaded from `source` (which proves counter `FROM` is
    /// claimed). One CCCR write; halting it (or clearing `source`'s `OVF`)
    /// stops it, as for the ordinary cascade. Refused, with the handle
    /// given back, on other models and for other pairs
    /// ([`ConfigError::NoExtendedCascade`]).
    pub fn cascade_extended<const N: u8, const FROM: u8, S: CanCascade, S2: Readable>(
        &mut self,
        counter: NetBurstHandle<O, N, S>,
        source: &NetBurstHandle<O, FROM, S2>,
    ) -> Transition<NetBurst, O, N, S, Cascaded, Error<M::Error>> {
        let _ = source;
        let p = *counter.programmed();
        let done = if self.extended_source(N, FROM).is_some() {
            counter::Driver::cascade(self, TOKEN, N, FROM, &p)
        } else {
            Err(Error::Config(ConfigError::NoExtendedCascade {
                from: FROM,
                to: N,
            }))
        };
        match done {
            Ok(()) => Ok(counter.into_claimed()),
            Err(error) => Err(Failed { counter, error }),
        }
    }

    /// Counter `from` is counter `n`'s extended cascade source on this model.
    fn extended_source(&self, n: u8, from: u8) -> Option<Counter> {
        Counter::from_index(n)?
            .extended_cascade_source(self.model)
            .filter(|s| s.index() == from)
    }

    /// The CCCR image of counter `n` extended-cascaded: `None` where this
    /// model has no extended cascade into it.
    fn extended_image(&self, n: u8, p: &Programmed) -> Option<CccrValue> {
        let proof = ExtendedCascade::new(Counter::from_index(n)?.cccr(), self.model)?;
        Some(p.cccr.with_extended_cascade(proof, true))
    }

    fn write_cccr(&mut self, n: u8, value: u64) -> Result<(), Error<M::Error>> {
        let c = counter_at(n)?;
        self.msr
            .write_msr(c.cccr().msr(), value)
            .map_err(Error::Access)
    }

    fn write_counter(&mut self, n: u8, value: u64) -> Result<(), Error<M::Error>> {
        let c = counter_at(n)?;
        self.msr.write_msr(c.msr(), value).map_err(Error::Access)
    }

    /// Claims `counter` and its ESCR for the package (atomically: another
    /// driver's claim of either refuses this one) and writes the ESCR and
    /// the counter preset; a refused write gives the claim back.
    fn claim_and_write(
        &mut self,
        counter: Counter,
        config: &CounterConfig,
        p: &Programmed,
    ) -> Result<(), Error<M::Error>> {
        let (c, e) = claim_bits(counter, Some(config.escr));
        self.pmu.claims().claim(c, e).map_err(|r| match r {
            Refused::Counter => ConfigError::CounterClaimed(counter),
            Refused::Escr => ConfigError::EscrBusy { escr: config.escr },
        })?;
        match self.write_images(counter, config, p) {
            Ok(()) => {
                self.claimed = self.claimed.with(counter);
                Ok(())
            }
            Err(err) => {
                self.pmu.claims().release(c, e);
                Err(err)
            }
        }
    }

    /// The ESCR image and the counter preset of a claimed counter (the
    /// CCCR is idle already: an Unclaimed counter's CCCR is the idle image,
    /// written by the package's first `take` and by `release`, which counts
    /// nothing, so the first CCCR write is the one that enables or
    /// cascades).
    fn write_images(
        &mut self,
        counter: Counter,
        config: &CounterConfig,
        p: &Programmed,
    ) -> Result<(), Error<M::Error>> {
        let escr_image = self.escr_image(config);
        self.msr
            .write_msr(config.escr.msr(), escr_image)
            .map_err(Error::Access)?;
        let preset = match p.sampling {
            Some(s) if p.pebs => pebs_reset(s),
            s => s.map_or(0, SampleAfter::preset),
        };
        let n = counter.index();
        self.pmu.pmi().set_sampling(n, p.sampling);
        self.write_counter(n, preset)
    }

    /// Arms counter `n`, about to run with CCCR `image`, for the handler:
    /// a sampling or `FORCE_OVF` counter, or the PEBS counter's buffer.
    fn arm(&self, n: u8, p: &Programmed, image: CccrValue) -> Result<(), Error<M::Error>> {
        if p.pebs {
            self.pmu.pmi().arm_pebs(p.lp, true);
        } else if p.sampling.is_some() || p.force_ovf {
            self.pmu.pmi().arm(p.lp, counter_at(n)?, image, p.force_ovf);
        }
        Ok(())
    }

    fn write_pebs_msrs(&mut self, w: PebsWrites) -> Result<(), Error<M::Error>> {
        if let Some(v) = w.enable {
            self.msr
                .write_msr(MSR_PEBS_ENABLE, v)
                .map_err(Error::Access)?;
        }
        if let Some(v) = w.matrix_vert {
            self.msr
                .write_msr(MSR_PEBS_MATRIX_VERT, v)
                .map_err(Error::Access)?;
        }
        Ok(())
    }

    /// Installs logical processor `lp`'s DS save area for PEBS (SDM
    /// 18.15.7): the driver owns `area` from now on (the processor writes
    /// records and the PEBS index there behind the program's back), writes
    /// its management area and `IA32_DS_AREA` (1 WRMSR), and publishes it
    /// to the PMI handler, which drains it. Returns the area installed
    /// before, if any. PEBS is armed only on an area this driver installed
    /// ([`ConfigError::NoPebsArea`]).
    ///
    /// Call it on logical processor `lp`: `IA32_DS_AREA` is each logical
    /// processor's own, and `MSR_PEBS_ENABLE`'s `ENABLE_PEBS_MY_THR` is the
    /// writer's (SDM Table 35-41, 18.16.3), so the driver writes
    /// `MSR_PEBS_ENABLE` as seen from `lp` from then on, and a PEBS counter
    /// is configured only for `lp` ([`ConfigError::PebsElsewhere`]); a
    /// driver of both logical processors installs an area for one of them
    /// only. Refused while `lp`'s PEBS counter is claimed for PEBS
    /// ([`ConfigError::PebsBusy`]).
    pub fn set_pebs_area(
        &mut self,
        lp: LogicalProcessor,
        area: DsArea,
    ) -> Result<Option<DsArea>, Error<M::Error>> {
        if !self.pebs_available {
            return Err(Error::Config(ConfigError::PebsUnavailable));
        }
        if lp == LogicalProcessor::T1 && !self.hyper_threading {
            return Err(Error::Config(ConfigError::NoSuchLogicalProcessor));
        }
        if self.only.is_some_and(|only| only != lp) {
            return Err(Error::Config(ConfigError::OtherLogicalProcessor { lp }));
        }
        if self.ds[lp.other() as usize].is_some() {
            return Err(Error::Config(ConfigError::PebsElsewhere { lp }));
        }
        if self.pmu.pebs().pebs_on(lp) {
            return Err(Error::Config(ConfigError::PebsBusy { lp }));
        }
        let mut area = area;
        area.reset(RECORD_BYTES, 0);
        self.msr
            .write_msr(IA32_DS_AREA, area.address())
            .map_err(Error::Access)?;
        // SAFETY: the area is this driver's until `take_pebs_area` or
        // `give_back` withdraws it, which they do from `lp`'s CPU (the
        // contract of `NetBurstPmu::new`).
        unsafe {
            self.pmu
                .pmi()
                .publish_ds_area(lp, Some(area.management_ptr()));
        }
        self.package.set_home(lp);
        Ok(self.ds[lp as usize].replace(area))
    }

    /// Takes `lp`'s DS save area back: refused while `lp`'s PEBS counter
    /// is claimed for PEBS ([`ConfigError::PebsBusy`]), so no counter can
    /// make the processor write it; withdraws it from the PMI handler and
    /// writes `IA32_DS_AREA` = 0 (1 WRMSR). [`ConfigError::NoPebsArea`] if
    /// this driver installed none.
    pub fn take_pebs_area(&mut self, lp: LogicalProcessor) -> Result<DsArea, Error<M::Error>> {
        if self.ds[lp as usize].is_none() {
            return Err(Error::Config(ConfigError::NoPebsArea { lp }));
        }
        if self.pmu.pebs().pebs_on(lp) {
            return Err(Error::Config(ConfigError::PebsBusy { lp }));
        }
        self.msr.write_msr(IA32_DS_AREA, 0).map_err(Error::Access)?;
        // SAFETY: withdrawing: no pointer is published.
        unsafe { self.pmu.pmi().publish_ds_area(lp, None) };
        self.ds[lp as usize]
            .take()
            .ok_or(Error::Config(ConfigError::NoPebsArea { lp }))
    }

    /// Hands the PEBS records in `lp`'s DS buffer to `f` and empties it,
    /// accounting one period of the PEBS counter for each (the PMI handler
    /// does the same at the buffer's threshold): for the records left
    /// below the threshold when the counter was halted. Call it with the
    /// PEBS counter halted (or `lp`'s PMI masked), so that the handler is
    /// not draining at the same time. Returns how many records there were.
    pub fn drain_pebs(&mut self, lp: LogicalProcessor, f: impl FnMut(&PebsRecord)) -> u32 {
        if self.ds[lp as usize].is_none() {
            return 0;
        }
        self.pmu.pmi().drain_pebs(lp, f)
    }
}

/// A driver dropped without [`NetBurstDriver::give_back`] idles what it ran
/// and frees the package's logical processors; its owner stays held for
/// good ([`crate::counter::owner`]).
impl<O: Owner, M: MsrBackend> Drop for NetBurstDriver<'_, O, M> {
    fn drop(&mut self) {
        self.end(Ending::Dropped);
    }
}

impl<O: Owner, M: MsrBackend> Sealed for NetBurstDriver<'_, O, M> {}

impl<O: Owner, M: MsrBackend> counter::DriverOf<NetBurst, O> for NetBurstDriver<'_, O, M> {}

impl<O: Owner, M: MsrBackend> counter::Driver<NetBurst> for NetBurstDriver<'_, O, M> {
    type Owner = O;
    type Config = CounterConfig;
    type Error = Error<M::Error>;

    fn program(
        &mut self,
        _: Token,
        n: u8,
        config: &CounterConfig,
    ) -> Result<Programmed, Self::Error> {
        let p = self.build_programmed(n, config)?;
        let counter = counter_at(n)?;
        if !p.tagged {
            self.claim_and_write(counter, config, &p)?;
            self.images[usize::from(n)] = p;
            return Ok(p);
        }
        // The package's PEBS MSRs: checked, booked and written under their
        // lock, so that the other CPU's driver sees all of it or none.
        let pmu = self.pmu;
        if config.pebs.is_some() {
            if !self.pebs_available {
                return Err(Error::Config(ConfigError::PebsUnavailable));
            }
            if config.sampling.is_none_or(|s| s.get() < 2) {
                return Err(Error::Config(ConfigError::PebsPeriod));
            }
            // Only on an area this driver installed: `IA32_DS_AREA` of
            // `config.lp` was written by this driver.
            if self.ds[config.lp as usize].is_none() {
                return Err(Error::Config(ConfigError::NoPebsArea { lp: config.lp }));
            }
        }
        let mut regs = pmu.pebs();
        let replay = self.package.check(counter, config, &regs)?;
        self.claim_and_write(counter, config, &p)?;
        if let (Some(records), Some(s), Some(area)) = (
            config.pebs,
            p.sampling,
            self.ds[config.lp as usize].as_mut(),
        ) {
            area.reset(RECORD_BYTES, records);
            area.set_counter_reset(0, pebs_reset(s));
        }
        let writes =
            self.package
                .record_claim(counter, config, replay, &mut regs, self.hyper_threading);
        self.images[usize::from(n)] = p;
        self.write_pebs_msrs(writes)?;
        Ok(p)
    }

    fn start(&mut self, _: Token, n: u8, p: &Programmed) -> Result<(), Self::Error> {
        let image = p.cccr_for(StateTag::Enabled);
        self.arm(n, p, image)?;
        self.write_cccr(n, image.bits())
    }

    fn stop(&mut self, _: Token, n: u8, p: &Programmed) -> Result<(), Self::Error> {
        self.pmu.pmi().disarm(p.lp, counter_at(n)?);
        self.extended = self.extended.without(counter_at(n)?);
        self.write_cccr(n, p.cccr.bits())?;
        if p.pebs {
            // Records already written stay for `drain_pebs`.
            self.pmu.pmi().arm_pebs(p.lp, false);
            return Ok(());
        }
        if p.force_ovf {
            // The increments since the last service are owed: the halt
            // accounts for them (its CCCR write cleared `OVF`).
            let raw = self.msr.rdpmc(u32::from(n)).map_err(Error::Access)?;
            let owed = self.pmu.pmi().forced_increments(n, raw);
            if owed > 0 {
                self.pmu.pmi().add_halt_periods(n, owed);
            }
            return Ok(());
        }
        let Some(s) = p.sampling else {
            return Ok(());
        };
        let raw = self.msr.rdpmc(u32::from(n)).map_err(Error::Access)?;
        let (owed, residual) = s.split(raw);
        if owed > 0 {
            self.pmu.pmi().add_halt_periods(n, owed);
            self.write_counter(n, s.at_residual(residual))?;
        }
        Ok(())
    }

    fn cascade(&mut self, _: Token, n: u8, from: u8, p: &Programmed) -> Result<(), Self::Error> {
        let c = counter_at(n)?;
        // The ordinary pair (CASCADE), or this model's extended cascade
        // (bit 11; only `cascade_extended` and erased handles ask for it).
        let (image, extended) = if NetBurst::can_cascade(from, n) {
            (p.cccr_for(StateTag::Cascaded), false)
        } else {
            match self
                .extended_source(n, from)
                .and_then(|_| self.extended_image(n, p))
            {
                Some(image) => (image, true),
                None => {
                    return Err(Error::Config(ConfigError::NoExtendedCascade {
                        from,
                        to: n,
                    }));
                }
            }
        };
        self.arm(n, p, image)?;
        self.write_cccr(n, image.bits())?;
        self.extended = if extended {
            self.extended.with(c)
        } else {
            self.extended.without(c)
        };
        Ok(())
    }

    fn can_cascade(&self, from: u8, to: u8) -> bool {
        NetBurst::can_cascade(from, to) || self.extended_source(to, from).is_some()
    }

    fn overflow_rule(&self, n: u8) -> Option<crate::sampling::OverflowRule> {
        Counter::from_index(n).map(|_| overflow_rule())
    }

    fn read(&mut self, _: Token, n: u8, _p: &Programmed) -> Result<u64, Self::Error> {
        self.msr.rdpmc(u32::from(n)).map_err(Error::Access)
    }

    fn release(&mut self, _: Token, n: u8, p: &Programmed) -> Result<(), Self::Error> {
        self.pmu.pmi().disarm(p.lp, counter_at(n)?);
        if p.pebs {
            self.pmu.pmi().arm_pebs(p.lp, false);
        }
        self.extended = self.extended.without(counter_at(n)?);
        self.write_cccr(n, IDLE_CCCR)?;
        if let Some(escr) = p.escr
            && p.escr_tags
        {
            // An ESCR counts nothing unless an enabled CCCR selects it, and
            // the next `configure` that books it writes all of it; only a
            // tagging ESCR acts on its own (`Programmed::escr_tags`).
            self.msr.write_msr(escr.msr(), 0).map_err(Error::Access)?;
        }
        self.write_counter(n, 0)?;
        if p.tagged {
            let pmu = self.pmu;
            let mut regs = pmu.pebs();
            let writes = self.package.record_release(
                counter_at(n)?,
                p.lp,
                p.pebs,
                &mut regs,
                self.hyper_threading,
            );
            self.write_pebs_msrs(writes)?;
        }
        self.pmu.pmi().set_sampling(n, None);
        self.claimed = self.claimed.without(counter_at(n)?);
        // Last: from here the other drivers of the package may claim it.
        let (c, e) = claim_bits(counter_at(n)?, p.escr);
        self.pmu.claims().release(c, e);
        Ok(())
    }
}

/// The logical processors a driver serves: `only`, or both.
const fn served(only: Option<LogicalProcessor>) -> &'static [LogicalProcessor] {
    match only {
        Some(LogicalProcessor::T0) => &[LogicalProcessor::T0],
        Some(LogicalProcessor::T1) => &[LogicalProcessor::T1],
        None => &[LogicalProcessor::T0, LogicalProcessor::T1],
    }
}

/// Counter `c` and ESCR `e` as the claim bits of [`NetBurstPmu`].
fn claim_bits(c: Counter, e: Option<Escr>) -> (u32, u64) {
    let escr = e.map_or(0, |e| super::msrs::EscrSet::EMPTY.with(e).bits());
    (CounterSet::EMPTY.with(c).bits(), escr)
}

mod package;
use package::Package;

mod switch;

#[cfg(test)]
mod tests;

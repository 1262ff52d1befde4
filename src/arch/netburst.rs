//! Intel NetBurst (Pentium 4, Xeon, Pentium D) performance monitoring:
//! register map, register layouts, event catalog, libpfm4 event strings,
//! thread qualification and tagging set-ups (data and encoding, no register
//! access), and the driver ([`driver`]) and overflow handler ([`pmi`]),
//! which reach the registers only through [`crate::access::MsrAccess`].
//!
//! # The NetBurst PMU for someone who has never seen one
//!
//! CPUID family 0Fh has nothing like the later "architectural" PMU with a
//! pair of `PERFEVTSEL`/`PMC` registers per counter. Counting an event takes
//! three kinds of MSR (SDM Vol. 3B 18.15):
//!
//! * **Counters** ([`Counter`]): 18 of them, 40 bits wide, MSR `0x300 + n`,
//!   read with RDPMC index n. A counter only counts.
//! * **CCCRs** ([`Cccr`], [`CccrValue`]): one Counter Configuration Control
//!   Register per counter, MSR `0x360 + n`. It enables the counter, chooses
//!   *which ESCR* feeds it (a 3-bit ESCR select), and filters the ESCR's
//!   per-cycle output: threshold/compare/complement/edge, overflow interrupt
//!   per logical processor (`OVF_PMI_T0`/`OVF_PMI_T1`), `FORCE_OVF`, the
//!   sticky `OVF` flag and `CASCADE`.
//! * **ESCRs** ([`Escr`], [`EscrValue`]): 45 Event Selection Control
//!   Registers at scattered addresses `0x3A0`-`0x3E1`. An ESCR selects the
//!   event (6-bit event select, 16-bit event mask), the CPL and logical
//!   processor qualification (`T0_OS`, `T0_USR`, `T1_OS`, `T1_USR`), and a
//!   tag for at-retirement tagging. Each ESCR is wired to only 2 or 3
//!   counters, and each event can be programmed only on particular ESCRs.
//!
//! So "count event E" means: choose an ESCR that E allows ([`EventInfo`]),
//! choose a counter that ESCR feeds ([`Assignment`]), write the ESCR, clear
//! the counter, then write the CCCR with `ENABLE` and the ESCR's select
//! value. The ESCR select value is *relative to the counter*: select 5 means
//! `CRU_ESCR2` on counters 12, 13, 16 but `IX_ESCR1` on counters 2, 3.
//!
//! The counters come in 9 pairs in 4 blocks (BPU 0-3, MS 4-7, FLAME 8-11,
//! IQ 12-17; [`Block`], [`Pair`]). A counter can start counting when the
//! same-position counter of the other pair in its block overflows (cascade:
//! 0<->2, 1<->3, ..., 12<->14, 13<->15; 16 only from 14 and 17 only from 15;
//! [`Counter::cascade_source`]). Counters 16 and 17 are the PEBS counters.
//!
//! On Hyper-Threading parts the two logical processors *share* all of this:
//! the ESCR's T0/T1 flags and the CCCR's active-thread field decide which
//! processor's events count ([`counts`]). Some events cannot be attributed
//! to a processor at all (thread-independent, [`Specificity`]).
//!
//! Events come in two kinds (SDM Tables 19-28 and 19-29): non-retirement
//! events count as they happen; at-retirement events count µops that were
//! *tagged* earlier in the pipeline and then retired (`NBOGUS`) or were
//! squashed (`BOGUS`). Tagging is set up with an upstream ESCR (or the PEBS
//! MSRs) that marks µops and a downstream `CRU_ESCR2/3` event that counts
//! them ([`TaggingPlan`]).
//!
//! # Modules
//!
//! | module | contents |
//! |---|---|
//! | (root) | the register map ([`Counter`], [`Cccr`], [`Escr`], blocks, pairs, cascade, model availability, the MSR numbers; SDM Table 18-63), the typed register images ([`EscrValue`], [`CccrValue`], [`PebsEnable`], ...), event strings ([`EventSpec`]), logical-processor qualification ([`counts`]), tagging plans ([`TaggingPlan`]) and the package's PMU ([`NetBurstPmu`]) |
//! | [`events`] | the 46-event catalog (SDM Tables 19-28, 19-29, 19-33, 19-34) and the table of source disagreements |
//! | [`driver`] | the typestate counter driver: ESCR/CCCR/counter programming with exact MSR traffic, cascading, sampling presets |
//! | [`pmi`] | the overflow interrupt handler and the state it shares with the counter handles |
//! | [`schedule`] | exact placement of event sets on ESCRs and counters (max-flow search, minimal-conflict explanations; SDM Table 18-63) |
//!
//! # Source disagreements
//!
//! The Intel SDM is followed; every departure of another source, and every
//! place where the SDM contradicts itself, is recorded where the rule lives:
//! register layouts on [`EscrValue`] and [`CccrValue`], IQ ESCR availability in
//! [`Escr::available_on`], the event catalog in [`events`] (including the
//! unresolved CCCR select of `b2b_cycles`/`bnr`/`snoop`/`response`), a typo
//! in Table 18-29 on [`counts`], and the `MSR_PEBS_ENABLE` bit-24/25 wording
//! on [`PebsEnable`].
//!
//! # Example
//!
//! ```
//! use pmu::arch::netburst::{EventSpec, Pmu};
//! let spec = EventSpec::parse("netburst::global_power_events:RUNNING:u", Pmu::Netburst)?;
//! assert_eq!(spec.escr_bits(), 0x2600_0205);
//! assert_eq!(spec.cccr_bits(), 0x0003_D000);
//! # Ok::<(), pmu::arch::netburst::ParseError>(())
//! ```

// The register layouts, the register map, the event strings and the
// vocabulary: private modules whose items are all here, at the
// architecture's root (one path each; each module's documentation is on
// its main item).
mod cccr;
mod escr;
mod msrs;
mod parse;
mod physical;
mod tag_bits;
mod tagging;
mod tagging_msrs;
mod thread;

pub mod driver;
pub mod ds;
pub mod events;
pub mod multiplex;
pub mod pmi;
pub mod schedule;
mod seam;

pub use cccr::*;
pub use escr::*;
pub use events::{
    Constraint, Counting, EventInfo, EventName, MaskInfo, MaskKind, ReplayMetric, Tagging,
};
pub use msrs::*;
pub use parse::*;
pub use physical::*;
pub use schedule::{Conflict, Occupied, Part, Request, Schedule, ScheduleError};
pub use tag_bits::*;
pub use tagging::*;
pub use tagging_msrs::*;
pub use thread::*;

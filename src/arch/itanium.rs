//! Intel Itanium performance monitoring: the register layouts of Itanium
//! (Merced), Itanium 2 (McKinley, Madison) and, where the sources cover it,
//! Montecito, the checks a PMC value must pass before it is written, and
//! the Itanium and Itanium 2 event catalogs.
//!
//! **No Itanium hardware backend.** Rust has no IA-64 target (LLVM dropped
//! it), so nothing here can run on an Itanium: the layouts, encoders and
//! validation are total computations on `u64` register images, and the
//! driver ([`driver`]) and overflow handler ([`pmi`]) reach the registers
//! only through [`crate::access::PmcPmdAccess`], implemented by the
//! register-level model (`crate::model::itanium`) and, on an IA-64 port, by
//! the `mov pmc[]`/`mov pmd[]` instructions. No `unsafe`, no allocation, no
//! panics on any input.
//!
//! # The Itanium PMU for someone who has never seen one
//!
//! The architecture (Itanium SDM vol 2 §7.2) has two register files:
//!
//! * **PMCs** (configuration). PMC0-3 are control registers: PMC0 bit 0 is
//!   the *freeze* bit `fr`, and bit n of PMC0-3 is the overflow bit of
//!   counter n ([`Pmc0`]). PMC4 and up configure the *generic counters*,
//!   one PMC per counter ([`CounterPmc`]): which privilege levels count
//!   (`plm`), the event (`es`) and its unit mask, a threshold, the
//!   instruction set (IA-64 and/or IA-32, `ism`), whether the monitor is
//!   privileged (`pm`), and whether an overflow interrupts (`oi`). Other
//!   PMCs configure the *event address registers* ([`ear`]), the *branch
//!   trace buffer* ([`btb`]), *opcode matchers* and *address range
//!   restriction* ([`opcode`]).
//! * **PMDs** (data). PMD n of a generic counter holds its count, W bits
//!   wide ([`CounterPmd`]); the EAR and BTB PMDs hold captured addresses,
//!   latencies and branch records.
//!
//! Counting an event: write the counter's PMC with the event code, unit
//! mask and a privilege level, preset its PMD, and let PSR.up (user
//! monitors) or PSR.pp (privileged monitors) enable it. When the count
//! carries out of bit W-1 with `oi` set, the hardware sets the counter's
//! overflow bit and PMC0.fr, freezing all counters, and raises one PMU
//! interrupt; software reads PMC0, handles the overflow, and writes PMC0 to
//! unfreeze. Sampling every N events presets the counter to 2^W - N
//! ([`pmd::sampling_preset`]). The EARs add *what* was sampled: a counter
//! counting the EAR's event overflows every N captures, and the EAR's PMDs
//! hold the last captured instruction or data miss: its address, latency,
//! or which TLB level filled it ([`ear::IearSample`], [`ear::DearSample`]).
//! This is how HP Caliper's ITLB report attributes sampled misses to L2
//! ITLB, hardware page walker and software fills (HP Caliper's itlb
//! measurement).
//!
//! # The generations
//!
//! | | Itanium | Itanium 2 | Montecito |
//! |---|---|---|---|
//! | counters, width | PMC/PMD4-7, 32 bits | PMC/PMD4-7, 47 bits | PMC/PMD4-15, 47 bits |
//! | `es` | 7 bits (14:8) | 8 bits (15:8) | 8 bits |
//! | threshold | 3 bits on PMC4/5, 2 on PMC6/7 | 3 bits | 3 bits |
//! | extra counter bits | | PMC4 bit 23: power enable of all counters | `all` threads, MESI filter; ISM fixed IA-64 |
//! | I-EAR | PMC10 `tlb` bit 7, umask 19:16, ISM 25:24; PMD0 `v`/`tlb`, PMD1 latency | PMC10 `ct` 13:12, umask 12:5 / 11:5, ISM 15:14; PMD0 `stat` | PMC37 (no ISM), PMD34/35 |
//! | I-EAR TLB fills | HPW, software (no L2) | L2 ITLB, HPW, software | as Itanium 2 |
//! | D-EAR | PMC11 `tlb` 7, `pt` 28; PMD2/3/17 | PMC11 `mode` 8:7 (adds ALAT); PMD3 `stat`, PMD17 `bn` | PMC40, PMD32/33/36 |
//! | BTB | PMC12 (`tar`, `tac`, `bac`); 8 records PMD8-15, index PMD16 | PMC12 (`ds`, `brt`); per-record `b1`/`bruflush` in PMD16 | PMC39; 16 records PMD48-63, index PMD38, extensions PMD39 |
//! | opcode match, ranges | PMC8/9; PMC13 `ta` | PMC8/9 (+`ig_ad`, `inv`); PMC13 DBR, PMC14 IBR, PMC15 | PMC32-35, PMC36, PMC38 IBR, PMC41 DBR; IP-EAR PMC42 |
//!
//! Each generation has its own layout tables ([`pmc::CounterLayout`],
//! [`Generation::pmc`]); nothing assumes one generation's bits on another.
//!
//! # Modules
//!
//! | module | contents |
//! |---|---|
//! | (root) | [`Generation`], counters ([`Counter`]), register maps, each PMC's power-up value and writable bits, PMD roles; bit fields and bounded field types: [`Plm`], [`Ism`], [`Umask`], [`EventCode`], [`Threshold`] (width per counter), [`Slot`]; [`Pmc0`] (freeze, overflow), PMC1-3, the counter configuration layouts and [`CounterPmc`]; counter values ([`CounterPmd`]: count, sign extension, sampling presets); [`ItaniumPmu`] |
//! | [`ear`] | I-EAR and D-EAR configurations and sample decoders (latency, TLB fill level, valid bits) |
//! | [`btb`] | branch trace buffer configuration, records, index and walk, source -> target records |
//! | [`opcode`] | opcode matchers, range-restriction configuration |
//! | [`events`] | the Itanium and Itanium 2 event catalogs, lookup by name and by code |
//! | [`validate`] | perfmon-style PMC write validation with a distinct error per illegal case |
//! | [`multiplex`] | more counting events than counters, rotated on a timer tick: placed by a bipartite matching under each event's counter constraints |
//!
//! # Source disagreements
//!
//! The sources are the Itanium SDM, Intel's VTune documentation (the
//! "Edit Events" help for Itanium processors), HP Caliper's (the itlb
//! measurement report), Linux perfmon (`arch/ia64/kernel/perfmon.c` and its
//! per-model tables), libpfm3 and others. Intel documents win; each
//! disagreement is recorded where its rule lives:
//!
//! * [`CounterPmc`]: Itanium PMC6/7 threshold width (VTune 2 bits vs perfmon and
//!   libpfm 3), Itanium 2 bit 23 (PMC4 only vs all counters) and bits 27:26,
//!   "exceeds" vs "at or above" threshold semantics, what PMC0 bits mean
//!   overflow, PMC0's power-up value.
//! * [`Generation`]: writable bits where perfmon enforces nothing (Itanium)
//!   or more than the layout (Itanium 2 counters).
//! * [`ear`]: the Itanium 2 I-EAR cache mask patterns, the D-EAR valid bit
//!   in cache and ALAT modes, unknown power-up values.
//! * [`btb`]: record validity and the `mp` bit on target records, `brt`
//!   values, the name of Itanium PMC12 bit 14, `b1` in the prediction
//!   format.
//! * [`opcode`]: perfmon's McKinley PMC14 test (0x2222) vs the field
//!   positions (0x492), the sense of the PMC14 bits.
//! * [`events`]: aliases and per-unit-mask rules.
//!
//! # Examples
//!
//! A counter's PMC image (SDM Vol. 2 Table 7-4: `plm` 3:0, `oi` 5, `pm` 6,
//! `es` 15:8), built from typed fields and checked like perfmon checks it:
//!
//! ```
//! use pmu::arch::itanium::Counter;
//! use pmu::arch::itanium::{CounterPmc, EventCode, Generation, Plm, Policy, Validator};
//!
//! let g = Generation::Itanium2;
//! let pmc = CounterPmc::new(Counter::new(g, 4).unwrap(), EventCode::new(g, 0x12).unwrap())? // CPU_CYCLES
//!     .with_plm(Plm::ALL)
//!     .with_overflow_interrupt(true);
//! assert_eq!(pmc.bits(), 0x12 << 8 | 1 << 5 | 0xF | 1 << 23); // PMC4 keeps its enable bit 23
//! assert!(Validator::new(g, Policy::STRICT).check(4, pmc.bits()).is_ok());
//! # Ok::<(), pmu::arch::itanium::FieldError>(())
//! ```

pub mod btb;
mod descriptors;
pub mod driver;
pub mod ear;
pub mod events;
mod fields;
mod generation;
pub mod multiplex;
pub mod opcode;
mod physical;
mod pmc;
mod pmd;
pub mod pmi;
mod seam;
pub mod validate;

pub use btb::{BtbConfig, BtbEntry, BtbIndex, BtbRecord};
pub use descriptors::{PmcInfo, PmcKind};
pub use ear::{DearConfig, DearSample, IearConfig, IearSample, LatencyFilter, TlbFill, TlbFills};
pub use events::{EventInfo, EventType};
pub use fields::*;
pub use generation::*;
pub use physical::*;
pub use pmc::*;
pub use pmd::*;
pub use validate::{Accepted, PmcError, Policy, ReservedPolicy, Validator};

//! A register-level model of the Itanium-family PMU (Itanium/Merced, Itanium
//! 2 McKinley/Madison, dual-core Itanium 2 Montecito). **This is a model, a
//! test instrument, not hardware**: no IA-64 machine is at hand, Rust has no
//! IA-64 target and QEMU has no PMU, so the driver runs against this model on
//! the host and inside the x86_64 QEMU test kernels. Anything it counts is
//! what the test injected.
//!
//! It is written from the manuals and public PMU code (Itanium SDM rev 2.3
//! Vol. 2 Part 1 section 7.2 and Vol. 3 `mov` indirect; Linux perfmon's
//! per-model tables, libpfm3's register layouts and its event tables
//! `itanium_events.h` and `itanium2_events.h`; Intel VTune's "Edit Events"
//! help for Itanium (PMC fields) and HP Caliper's itlb measurement report
//! (I-EAR fill levels)), with its own constants (`tables.rs`), independently
//! of the driver's layouts in `crate::arch::itanium`, so that each can catch
//! the other's mistakes. `no_std`, allocation-free, no `unsafe`;
//! [`ItaniumModel::new`] is a `const fn`, so a model can live in a `static`
//! behind a lock.
//!
//! # How a test drives it
//!
//! ```
//! use pmu::access::MsrAccess;
//! use pmu::model::itanium::*;
//! # fn main() -> Result<(), Fault> {
//! let mut m = ItaniumModel::new(Generation::Itanium2);
//! m.write_pmc(0, 0)?;                                    // unfreeze (PMC0.fr)
//! m.set_psr(Psr::MONITORING);                            // PSR.up and PSR.pp
//! m.write_pmc(5, (0x12 << 8) | 1 << 5 | 0xF)?;           // CPU_CYCLES, all levels, oi
//! m.write_pmd(5, (1 << 47) - 100)?;                      // overflow after 100
//! m.inject(Event::new(0x12, 0, 150));                    // counts 100, then freezes
//! assert_eq!(m.read_pmc(0)?, (1 << 5) | 1);              // overflow bit 5, fr
//! assert!(m.take_interrupt().is_some());                 // once
//! assert!(m.take_interrupt().is_none());
//! m.fetch_miss(FetchMiss::tlb(0x4000_0000, TlbFill::Hpw)); // I-EAR
//! m.data_miss(DataMiss::cache(0x6000_0040, 0x4000_0010, 1, 40)); // D-EAR
//! m.branch(Branch::taken(0x4000_0020, 2, 0x4000_0100));  // BTB
//! // Or through the crate's backend trait (harness address map, see `access.rs`):
//! m.msr().write_msr(0x105, 0)?;                          // PMD5 = 0
//! # Ok(())
//! # }
//! ```
//!
//! # What it models
//!
//! * **Register file** (`registers.rs`, `tables.rs`): the PMCs and PMDs each
//!   generation implements (Linux perfmon's tables: Itanium PMC0-13 /
//!   PMD0-17, Itanium 2 PMC0-15 / PMD0-17, Montecito PMC0-15, 32-42 /
//!   PMD4-15, 32-36, 38-39, 48-63), their writable bits and power-up values
//!   (perfmon's register descriptors, libpfm3's layouts), counters of
//!   W = 32 / 47 / 47 bits whose reads copy bit W-1 into 63:W (perfmon's
//!   `ovfl_val`, libpfm3's `pmd_sxt32`/`pmd_sxt47`), PSR.up/pp (monitor
//!   enables by `pm`) and PSR.sp, user-level PMD reads (zero when PSR.sp or
//!   the monitor's `pm` is set: SDM 7.2; VTune, "Privilege Monitor").
//! * **Faults** ([`Checking`]): the architecture does *not* fault on PMU
//!   register accesses (SDM Vol. 2 7.2: unimplemented PMCs/PMDs read zero and
//!   drop writes; Vol. 3 `mov` indirect: PMC/PMD accesses "do not fault";
//!   `ig` fields are ignored). Under [`Checking::Strict`] (the default) the
//!   model reports what the hardware would silently absorb, as a
//!   [`Fault::ReservedRegisterField`] (the fault the architecture raises for
//!   reserved registers and fields outside the PMU, SDM Vol. 1 3.1): an index
//!   above 255, an unimplemented register, a write that changes a bit the
//!   hardware ignores or holds at its power-up value, a bit libpfm3 says
//!   must be zero, an undefined EAR umask or mode, and counter-PMD upper
//!   bits that are neither zero nor a sign extension. A refused access
//!   changes nothing. [`Checking::Hardware`] does what the hardware does.
//! * **Counting** (`counting.rs`, SDM 7.2.1, VTune): a counter counts an
//!   injected [`Event`] when PMC0.fr is clear, (Itanium 2) PMC4 bit 23 is
//!   set, PSR.up (`pm` = 0) or PSR.pp (`pm` = 1) is set, `plm` has the
//!   event's privilege level, `ism` admits its instruction set (bit 24 clear
//!   admits IA-64, bit 25 clear IA-32: 00 both, 10b IA-64, 01b IA-32, 11b
//!   none), `es` and `umask` equal the event's, and (Montecito) the MESI
//!   filter admits its line state (an event injected with a line state
//!   counts only where that state's bit, 27 i to 30 m, is set; one without
//!   is not filtered). Per cycle the event occurs up to 7 times; with
//!   threshold t > 0 the counter adds 1 in each cycle in which more than t
//!   occur, else it adds the occurrences.
//! * **Overflow** (SDM 7.2.1-7.2.2, VTune): a carry out of bit W-1 wraps
//!   the counter; with `oi` it sets the counter's overflow bit in PMC0
//!   (bit n for counter n: 7:4, or 15:4 on Montecito) and PMC0.fr, and
//!   raises the PMU interrupt once ([`ItaniumModel::take_interrupt`]); while
//!   fr is set nothing counts or captures; software unfreezes by writing
//!   PMC0. With `ev` every wrap strobes the counter's BPM pin
//!   ([`ItaniumModel::bpm_strobes`]), whatever `oi`.
//! * **EARs** (`ear.rs`; libpfm3's EAR layouts, VTune, HP Caliper): the I-EAR
//!   in TLB mode (fill level: L2 ITLB, HPW, software; Itanium has no L2
//!   option) or cache mode (latency threshold); the D-EAR in cache, TLB and
//!   (Itanium 2, Montecito) ALAT modes, with data address, instruction
//!   address and latency; both per generation's PMD layouts. An EAR keeps
//!   the most recent capture (a valid bit does not lock it) and stops with
//!   the rest of the PMU when PMC0.fr is set. A capture counts one EAR
//!   event (INSTRUCTION_EAR_EVENTS 23h / L1I_EAR_EVENTS 43h, DATA_EAR_EVENTS
//!   67h / C8h, umask 0), so a counter preset to overflow after N captures
//!   freezes the PMU with the Nth in the PMDs (HP Caliper: "samples every Nth
//!   instruction TLB miss").
//! * **Branch trace** (`btb.rs`, libpfm3's layouts): `tm`/`ptm`/`ppm` (and
//!   `brt`) selection, a source and a target entry per branch, the index
//!   with its sticky `full` bit, one BRANCH_EVENT (11h) per branch.
//! * **Backend** (`access.rs`): the model implements [`crate::access::PmcPmdAccess`], and [`MsrAdapter`] drives it through
//!   [`crate::access::MsrAccess`] with a harness-only address map (PMC n at n,
//!   PMD n at 100H + n, PSR bits at 200H).
//!
//! # What it does not model
//!
//! Timing, pipelines, caches and TLBs (events are what the test injects);
//! event semantics (the model has no event table: `umask` matches by
//! equality, the per-event maximum increment is not enforced beyond 7 and
//! counter restrictions apply only when the injected event says so,
//! [`Event::only_on`]); opcode matching (PMC8/9, PMC15, Montecito PMC32-36)
//! and instruction/data address-range restriction (PMC13/14, Montecito
//! PMC38/41, PMC11.pt): stored with their masks, no effect (inject the
//! tagged events directly); the PMV (vector, mask) and interrupt delivery
//! (the harness's job, as the LVT is for NetBurst); a PMI skid: a real
//! processor takes the interrupt some instructions after the overflow too,
//! but the overflow itself set PMC0.fr, which "suspends event monitoring"
//! (SDM Vol. 2 7.2.2), so no event counts between the overflow and the
//! handler and a skid could change only the interrupted IIP, which the
//! harness chooses (the NetBurst and architectural-PMU models, whose
//! counters run on after the overflow, have a skid: `set_skid`); DCR.pp; Privileged
//! Operation faults at CPL > 0 and NaT consumption; serialization (writes
//! take effect at once); Montecito's second hardware thread (the `all` bit
//! is stored), its IP-EAR (PMC42 stored, the ETB always records branches);
//! Itanium BTB `tar`/`bpt`/`bac` (stored, not filtered on); Itanium 2 BTB
//! `ds` = 1 (entries keep the address format); the Itanium 2 extension bits
//! `b1`/`bruflush` and D-EAR `bn` (recorded as 0); Itanium's "PMD not
//! preserved" when `plm` is zero (the model preserves it); PAL_PERF_MON_INFO.
//!
//! # Where the sources disagree, and what the model does
//!
//! 1. **Faults.** The brief for this model and SDM Vol. 1 3.1 ("an access to
//!    one of these unimplemented registers causes a Reserved Register/Field
//!    fault") against SDM Vol. 2 7.2 and Vol. 3 `mov` indirect, which exempt
//!    the PMC/PMD files. The hardware behaviour is [`Checking::Hardware`];
//!    [`Checking::Strict`], the default, reports the same accesses as
//!    Reserved Register/Field faults so that a driver bug shows.
//! 2. **Threshold width on Itanium PMC6/7.** VTune's Itanium help: 2 bits,
//!    21:20; libpfm 3, Linux perfmon and the perf_events port: 3 bits on all
//!    counters. The model follows Intel (VTune): bit 22 of PMC6/7 is not
//!    writable (consistent with the maxinc-6 events being PMC4/5-only).
//! 3. **Threshold comparison.** VTune and libpfm: the counter adds 1 in a
//!    cycle whose value *exceeds* the threshold; HP Caliper documents
//!    ">= threshold". The model follows VTune (strictly greater).
//! 4. **Overflow bit without `oi`.** SDM 7.2.2 sets the overflow bit only
//!    when an interrupt criterion is met (overflow with `oi`); VTune is
//!    silent. The model leaves PMC0 untouched on a wrap without `oi` (the
//!    counter wraps, `ev` still strobes).
//! 5. **EAR latency comparison.** VTune says misses whose latency
//!    *exceeds* the threshold are captured; the event tables name every code
//!    ">= N" (LAT4 ">= 4" ...). The model captures latency >= N.
//! 6. **Power-up values.** Not in the manuals at hand; the model takes Linux
//!    perfmon's register "default values" as power-up values (perfmon calls
//!    them so: "PMC reserved fields must have their power-up values
//!    preserved"): PMC0 = 1 (frozen) on Itanium and Itanium 2 but 0 on
//!    Montecito, Itanium 2 PMC4 bit 23 set, Itanium PMC11.pt set, Montecito
//!    counter and D-EAR `ism` = 10b, the opcode-match and range-config
//!    defaults. PMDs and PSR bits start at zero (the model's choice).
//! 7. **Writable bits.** Where Linux perfmon's mask exists (Itanium 2,
//!    Montecito) it is used, except: Itanium 2 PMC12 bits 5:4 are ignored
//!    per libpfm's layout (`btbc_ig1`; perfmon's Itanium 2 mask 0xFFFF
//!    passes them, its Montecito mask for the same register, PMC39, 0xFFCF,
//!    does not), so strict checking refuses them; the driver's validator
//!    follows the same rule; Itanium 2 counter
//!    bits 27:26, writable per perfmon, "must be zero" per libpfm, are kept
//!    but strict checking refuses them; Itanium 2 PMC8/9 bit 32 is `ig` in
//!    libpfm but writable per perfmon: writable. Itanium (perfmon: no mask):
//!    libpfm's layout, `ig` fields not writable; PMC13's undocumented bits
//!    49:32 are writable because perfmon's default sets them.
//! 8. **The Itanium 2 enable bit.** libpfm: PMC4 bit 23 gates all counters;
//!    oprofile and the perf_events port set it in every counter PMC ("it is
//!    supposedly ignored in other pmc registers"). The model: PMC4 bit 23
//!    gates all counters (not the EARs or the BTB), and bit 23 of PMC5-7 is
//!    writable with no effect.
//! 9. **Counter PMD upper bits.** SDM Table 7-3 says bits 63:W read 0, but
//!    its text allows implementations that copy bit W-1, and libpfm
//!    (`pmd_sxt32`/`pmd_sxt47`) gives that for all three generations: the
//!    model sign-extends on read.
//! 10. **Latency code 0Fh ("LAT_NONE")** in Itanium EAR cache mode: read as
//!     "no miss qualifies". Itanium 2 I-EAR cache umasks other than the ten
//!     libpfm lists (FFh, FEh, FCh, F8h, F0h, E0h, C0h, 80h, 40h, 00h) are
//!     undefined, and strict checking refuses them; no source defines
//!     41h-7Fh, which are not "all misses" like 40h (see
//!     `tables::itanium2_iear_cache_select`). The driver's
//!     validator has the same rule in its own code (`LatencyFilter`).
//! 11. **BTB target entries.** libpfm3's layout gives `b` (1 = source), and
//!     the sources take an entry as valid if b|mp != 0; a target entry must
//!     then carry mp = 1. The model writes source entries b = 1,
//!     mp = mispredicted, slot (3 for not taken), and target entries b = 0,
//!     mp = 1 (as libpfm's Itanium 2 BTB example decodes them: two entries
//!     per branch event, full after four).
//! 12. **Unfreezing with an overflow bit still set.** SDM 7.2.1 guarantees no
//!     further interrupt only if software clears the overflow bit with or
//!     before fr; otherwise it is unspecified. The model raises none (the
//!     interrupt is edge-triggered); a later overflow raises a new one.
//! 13. **Fields the sources give a position but no encoding**: Itanium 2
//!     I-EAR `ism` (15:14) is read like the counters' `ism`; Montecito's
//!     I-EAR has no `ism` and admits both; the EARs' `stat` in cache mode is
//!     01b for the I-EAR and, in cache and ALAT modes, 01b for the D-EAR too
//!     (pfmon's sample printer reports a Montecito D-EAR sample valid
//!     exactly when `stat` is non-zero, and the driver's decoder follows
//!     the same rule);
//!     `brt` 1/2/3 select IP-relative, return, non-return indirect branches
//!     (the order of the BR_MISPRED_DETAIL umasks); I-EAR PMD1 is written in
//!     cache mode only and an Itanium PMD1/PMD3 latency saturates at FFFh,
//!     an Itanium 2 latency beyond its field sets the overflow bit.

mod access;
mod btb;
mod counting;
mod ear;
mod registers;
#[cfg(target_arch = "x86_64")]
pub mod shared;
mod tables;

#[cfg(test)]
mod tests;

pub use access::{MsrAdapter, PMC_BASE, PMD_BASE, PSR_ADDRESS};
pub use btb::{Branch, BranchKind};
pub use counting::{Delivery, Event, InstructionSet, Interrupt, MAX_PER_CYCLE, Mesi};
pub use ear::{Capture, DataMiss, FetchMiss, TlbFill};
pub use registers::{
    AccessKind, Checking, Fault, ItaniumModel, Psr, REGISTER_SLOTS, ReservedField, Violation,
};
#[cfg(target_arch = "x86_64")]
pub use shared::{ItaniumPmcPmd, SharedItaniumModel};
pub use tables::{Generation, Layout, Tables};

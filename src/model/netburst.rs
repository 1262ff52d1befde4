//! A register-level model of the NetBurst (Pentium 4 / Xeon, CPUID family
//! 0Fh) PMU: a test instrument the real driver runs against, on the host and
//! inside the QEMU test kernels (QEMU emulates no PMU).
//!
//! It is written from the manuals (SDM Vol. 3B 18.15-18.16, in particular
//! 18.15.5.5-18.15.5.6, 18.15.6.2-18.15.6.4 and 18.16.4; Vol. 3C Table
//! 35-41, Vol. 2B RDPMC), with its own constants (`tables.rs`),
//! independently of the driver's layouts in `crate::arch::netburst`, so
//! that each can catch the other's mistakes.
//! `no_std`, allocation-free, no `unsafe`; [`NetBurstModel::new`] is a
//! `const fn`, so a model can live in a `static` (behind a lock).
//!
//! # How a test drives it
//!
//! ```
//! use pmu::access::MsrAccess;
//! use pmu::model::netburst::*;
//! # fn main() -> Result<(), Fault> {
//! let mut m = NetBurstModel::new(Config::prescott_ht());
//! // Program through the driver or directly (MsrAccess, as T0):
//! m.write_msr(0x3B8, (0x02 << 25) | (1 << 9) | (1 << 3))?;          // CRU_ESCR0 instr_retired
//! m.write_msr(0x36C, (1 << 12) | (4 << 13) | (3 << 16))?;           // IQ_CCCR0: enable, ESCR 4
//! // Inject events (bulk: one per clock), or clock by clock:
//! let instr = EventKind::new(EscrGroup::Cru01, 0x02, 1);
//! m.inject(instr.on(LogicalProcessor::T0, Privilege::Os, 100));
//! m.cycle(&[instr.on(LogicalProcessor::T0, Privilege::Os, 3)]); // 3 in one clock
//! assert_eq!(m.rdpmc(12)?, 103);
//! assert!(m.take_pmi(LogicalProcessor::T0).is_none(), "no OVF_PMI bit set");
//! # Ok(())
//! # }
//! ```
//! `m.thread(LogicalProcessor::T1)` gives the view from the second logical
//! processor (its own IA32_DS_AREA, "my/other thread" PEBS bits, CPUID APIC
//! ID). [`NetBurstModel`] also implements [`crate::detect::Cpuid`], so
//! `pmu::detect::detect(&model, &mut model.clone())` finds a NetBurst CPU of
//! the configured model with IA32_MISC_ENABLE\[7\] set and \[12\] as configured.
//!
//! # What it models
//!
//! * **Register file** (`registers.rs`): 18 40-bit counters (300H-311H), 18
//!   CCCRs (360H-371H), the ESCRs of SDM Table 18-63 that exist on the
//!   configured model (IQ_ESCR0/1 only on models 1 and 2; 43 or 45),
//!   MSR_TC_PRECISE_EVENT, MSR_PEBS_ENABLE, MSR_PEBS_MATRIX_VERT,
//!   IA32_MISC_ENABLE and the per-thread IA32_DS_AREA. Any other MSR, a
//!   write that sets a reserved bit (reported bit by bit), a non-HT CCCR
//!   whose active-thread field is not 11b, a non-canonical IA32_DS_AREA, and
//!   every PMU MSR while IA32_MISC_ENABLE\[7\] is clear raise #GP
//!   ([`Fault`]); a faulting write changes nothing. RDPMC returns 40 bits,
//!   or the low 32 with ECX\[31\] (fast read); any index but 0-17 is #GP.
//! * **Counting** (`counting.rs`): a counter counts an event when it runs, the
//!   ESCR its CCCR selects has that group, event select and a common mask
//!   bit, the ESCR's T0/T1 OS/USR bits admit it (Table 18-29 for TS events,
//!   Table 18-30 for TI events, Table 19-34 classification), the CCCR's
//!   active-thread field admits the current thread activity, and the CCCR
//!   filter passes: per clock, the input (sum of matching occurrences,
//!   clipped to 15) is added as is, or with COMPARE becomes 1 when above
//!   THRESHOLD (COMPLEMENT: at most THRESHOLD), and with EDGE only on a
//!   false-to-true transition. A counter whose selected ESCR has event select
//!   0 counts nothing (18.15.5.9).
//! * **Overflow** (`overflow.rs`): 40-bit wrap sets the sticky OVF; FORCE_OVF
//!   makes every increment an overflow; with OVF_PMI_T0/T1 the PMI line of
//!   T0/T1 is raised on the next increment after the overflow (18.15.5.8),
//!   or, with a skid ([`NetBurstModel::set_skid`]), that many increments
//!   of the counter later still, as a real PMI comes some events after its
//!   overflow; the line stays pending until [`NetBurstModel::take_pmi`]. Cascading:
//!   a counter with CASCADE runs while its alternate's OVF is set (the
//!   pairs of SDM 18.15.5.6: 0<->2, 1<->3, ..., 12<->14, 13<->15, 14->16,
//!   15->17) and halts when CASCADE or that OVF is cleared (18.15.5.5);
//!   extended cascading (CASCNTxINTOy, CCCR bit 11 of IQ_CCCR0/3/4/5,
//!   models 2, 3, 4, 6).
//! * **Tagging and PEBS** (`tagging.rs`): execution, front-end and replay
//!   tagging of [`Uops`] batches and the at-retirement events; PEBS records
//!   for counter 16 (T0) / 17 (T1) into a model-owned buffer mirroring the DS
//!   save area.
//! * **Two logical processors**: one set of ESCRs/CCCRs/counters shared by
//!   both; per-thread PMI lines, IA32_DS_AREA, PEBS enables and thread state
//!   ([`ThreadState`]: active, privilege).
//!
//! # What it does not model
//!
//! Timing and the real microarchitecture: events are whatever the test
//! injects (no pipeline, caches, TLBs or bus; a µop batch executes and
//! retires one µop per clock); the exact clock on which hardware raises the
//! PMI (the skid is the test's choice, in increments of the overflowed
//! counter) or writes PEBS records; the IA32_MISC_ENABLE bits other than 7, 11
//! and 12 have no effect; MSR_TC_PRECISE_EVENT has no effect; the Xeon-with-L3
//! iFSB counters (RDPMC 18-25, MSRs 107CCH-107D3H); BTS; errata (counter
//! write erratum N15, the "broken CCCR1" Linux avoids, no PMI in cascade
//! mode on 0F_02, "unflagged" overflows: the model always sets OVF on a
//! wrap); the LVT performance-counter entry and its masking on delivery
//! (that is the APIC's, done by the QEMU harness); CR4.PCE (RDPMC is always
//! allowed); TS/TI per mask bit (the model classifies whole events);
//! event-mask bits the SDM leaves undocumented are accepted and simply match
//! nothing.
//!
//! # Where the sources disagree, and what the model does
//!
//! 1. **Table 18-29, row T0_OS/T0_USR = 01, column T1_OS/T1_USR = 10** reads
//!    "counts while (a) T0 in OS or (b) T1 in OS", contradicting the rule
//!    text of the same page (a TS event counts by the bits of its own thread
//!    only) and the rest of the row (01 = T0 in USR). The model follows the
//!    rule: "T0 in USR or T1 in OS".
//! 2. **Table 18-30** (TI events; 18-67 in later SDMs) is not reproduced in
//!    the sources at hand (18.16.4 only names it); the model implements the
//!    SDM table as: the OS bits of both threads together admit "a logical
//!    processor at CPL 0", the USR bits "at CPL > 0", OS and USR bits
//!    together admit every occurrence ("counts irrespective of CPL, T0,
//!    T1"). A halted sibling is in no privilege state. The test transcribes
//!    the 16 cells.
//! 3. **b2b_cycles, bnr, snoop, response, BSQ_active_entries** are not in
//!    Table 19-34: the model treats the four FSB bus events as TI (as
//!    FreeBSD does) and BSQ_active_entries as TS (like BSQ_allocation).
//!    Those four events are listed with CCCR select 3 in the event table, but
//!    Table 18-63 puts FSB_ESCR0/1 at select 6 (select 3 on counters 0-3 is
//!    ITLB_ESCR0/1): the model follows the register map, Table 18-63.
//! 4. **Cascade start**: SDM 18.15.5.3 says a counter is started either by
//!    ENABLE or by its alternate's overflow; 18.15.5.5 says a cascaded
//!    counter halts when CASCADE or the alternate's OVF is cleared. The model
//!    therefore runs a counter with CASCADE exactly while the alternate's OVF
//!    is set, whatever its ENABLE bit (if ENABLE also had to be set,
//!    clearing CASCADE would not halt it).
//! 5. **IQ_ESCR0/1**: SDM Table 18-63 note: models 1 and 2 only; perfctr and
//!    oprofile also give them to model 0. The model follows the SDM.
//! 6. **SSU_ESCR1 (3BFH)**: Linux defines it as a guess; not in the SDM; #GP.
//! 7. **MSR_PEBS_ENABLE**: Table 35-41 calls bits 23:13 reserved, but Table
//!    19-33 (Tagged_mispred_branch) sets bits 15 and 16; the model accepts
//!    12:0, 15, 16, 24, 25 and (HT) 26. SDM 18.15.7 calls bit 24 "Enable
//!    PEBS" while Table 35-41 and 18.16.3 put PEBS at bit 25 and UOP_Tag at
//!    24: the model follows Table 35-41 (24 = UOP_Tag, 25 = ENABLE_PEBS_MY_THR,
//!    26 = ENABLE_PEBS_OTH_THR). 18.15.6.4 says replay tags can also be used
//!    without bits 24/25, contradicting "replay tagging must also be enabled
//!    with UOP_Tag": the model requires bit 24 for replay tagging.
//! 8. **MSR_PEBS_MATRIX_VERT**: perfctr accepts bits 0-1 only; Table 19-33
//!    also uses bit 4 (branches): the model accepts 0, 1 and 4.
//! 9. **PEBS counter**: 18.15.7 says only counter 16 (IQ_COUNTER4) does PEBS;
//!    18.16.3 says IQ_CCCR4 for logical processor 0 and IQ_CCCR5 for 1. The
//!    model uses 16 for T0 and, with Hyper-Threading only, 17 for T1.
//! 10. **Reserved bits the SDM does not say fault**: the model is strict
//!     where the manuals only say "reserved": counter bits 63:40, ESCR bit 31
//!     and 63:32 (1:0 without HT), CCCR bits 10:0, 11 (except extended
//!     cascade), 29:28, 63:32 (27 without HT), and a non-HT CCCR whose bits
//!     17:16 are not 11b ("must be set to 11B"; perfctr rejects it too) all
//!     #GP. Linux's own reserved mask is only 0xFFF; oprofile preserves bits
//!     on read-modify-write. MSR_TC_PRECISE_EVENT's layout is not documented:
//!     the model keeps bits 15:0 (reset FC00H, as perfctr observed) and faults
//!     on 63:16. IA32_MISC_ENABLE's read-only bits 7, 11, 12 ignore writes.
//! 11. **ESCR side restrictions**: BSQ_allocation only on BSU_ESCR0,
//!     BSQ_active_entries only on BSU_ESCR1 (the SDM only says "ESCR1"; Linux
//!     guessed the name), IOQ_active_entries only on FSB_ESCR1; the model's
//!     other ESCR of the pair does not see those events. The split-store
//!     replay metric's upstream ESCR is SAAT_ESCR0 in Table 19-33 but
//!     "ESCR1" in Table 19-28: the model accepts either SAAT ESCR.
//! 12. **uop_type** needs no tag-enable bit in the model (SDM 18.15.6.2 only
//!     asks for the uop_type ESCR's mask bits TAGLOADS/TAGSTORES).
//! 13. **Clock counting in bulk**: [`NetBurstModel::inject`] spends one clock
//!     per occurrence, so a "non-sleep clockticks" counter (COMPARE,
//!     COMPLEMENT, THRESHOLD 15, SDM 18.17.2) advances by the same count.
//! 14. **FSB_ESCR1 before signature F27H**: the SDM's IOQ_allocation note says
//!     only FSB_ESCR0 is available; the model reads that as an event
//!     restriction and keeps the MSR on every model.
//! 15. **PEBS interrupt**: the model raises the PEBS PMI (marked
//!     [`PmiLine::pebs_threshold`]) when the PEBS index reaches the interrupt
//!     threshold, whatever the OVF_PMI bits; the PEBS assist that follows a
//!     PEBS counter's overflow consumes the pending counter PMI. The cost of
//!     a bulk injection grows with the number of PEBS records it writes.
//!
//! The CCCR active-thread encoding (00 none, 01 single, 10 both, 11 any
//! logical processor active) follows SDM 18.16.2; the other sources give
//! only the field's position.

mod counting;
mod ds;
mod overflow;
mod registers;
#[cfg(target_arch = "x86_64")]
pub mod shared;
mod tables;
mod tagging;

#[cfg(test)]
mod tests;

pub use counting::{Event, EventKind, MAX_INPUT_PER_CYCLE, Privilege};
pub use ds::{DsManagement, PEBS_RECORD_SIZE, PEBS_RECORD_SLOTS, PebsRecord};
pub use overflow::{can_cascade, cascade_alternate};
pub use registers::{
    Config, Fault, GpReason, Instruction, LogicalProcessor, NetBurstModel, PmiLine, ThreadState,
    ThreadView,
};
#[cfg(target_arch = "x86_64")]
pub use shared::{Injected, NetBurstMsr, SharedNetBurstModel, any_pmi_pending, inject_until_pmi};
pub use tables::{EscrGroup, Specificity};
pub use tagging::{EventList, MAX_UPSTREAM, UopKind, Uops, replay};

//! A register-level model of AMD's core performance counters (the legacy
//! four, PerfCtrExtCore's six, PerfMonV2's global registers): a test
//! instrument the AMD driver runs against, on the host and inside the QEMU
//! test kernels.
//!
//! It is written from the manuals, with its own constants (`tables.rs`),
//! independently of the driver, so that each can catch the other's
//! mistakes. Sources: AMD64 Architecture Programmer's Manual Vol. 2,
//! section 13.2 ("Performance Monitoring Counters": PerfEvtSeln, PerfCtrn,
//! the extended core counters and PerfMonV2's global control and status),
//! Vol. 3 (RDPMC; Appendix E, CPUID Fn8000_0001 and Fn8000_0022); the
//! family 17h and 19h Processor Programming References (the `PERF_CTL`,
//! `PERF_CTR`, `PerfCntrGlobal*` MSR descriptions: reserved bits and
//! read-only registers). `no_std`, allocation-free, no `unsafe`;
//! [`AmdModel::new`] is a `const fn`, so a model can live in a `static`
//! (behind a lock: [`SharedAmdModel`]).
//!
//! # How a test drives it
//!
//! ```
//! use pmu::access::MsrAccess;
//! use pmu::model::amd::*;
//! # fn main() -> Result<(), Fault> {
//! let mut m = AmdModel::new(Config::zen4());
//! // PERF_CTL0: retired instructions (C0H), OS, INT, EN.
//! m.write_msr(0xC001_0200, 0xC0 | 1 << 17 | 1 << 20 | 1 << 22)?;
//! m.write_msr(0xC001_0201, (1 << 48) - 3)?;     // PERF_CTR0: 3 before the wrap
//! let done = m.inject_until_pmi(Event::new(0xC0, 0, 10));
//! assert_eq!(done, Injected { injected: 3, pmi_pending: true });
//! assert_eq!(m.read_msr(0xC000_0300)?, 1);       // PerfCntrGlobalStatus: counter 0
//! assert_eq!(m.rdpmc(0)?, 0);
//! assert!(m.take_pmi());
//! m.write_msr(0xC000_0302, 1)?;                  // PerfCntrGlobalStatusClr
//! assert_eq!(m.global_status(), 0);
//! m.write_msr(0xC001_0200, u64::MAX)?;           // reserved bits: ignored, no #GP
//! assert_eq!(m.read_msr(0xC001_0000)?, 0x030F_FFD7_FFFF); // the legacy alias
//! # Ok(())
//! # }
//! ```
//!
//! [`AmdModel`] implements [`crate::access::MsrAccess`] (RDMSR, WRMSR,
//! RDPMC at CPL 0, faulting with [`Fault`]) and [`crate::detect::Cpuid`]
//! ([`Config::cpuid`]).
//!
//! # What it models
//!
//! * **Register file** (`registers.rs`): `PERF_LEGACY_CTL0-3` (C001_0000H)
//!   and `PERF_LEGACY_CTR0-3` (C001_0004H) on every configuration; with
//!   PerfCtrExtCore `PERF_CTL0-5` (C001_0200H + 2n) and `PERF_CTR0-5`
//!   (C001_0201H + 2n), of which the first four are the legacy registers
//!   (one register, two addresses); with PerfMonV2 `PerfCntrGlobalStatus`,
//!   `PerfCntrGlobalCtl`, `PerfCntrGlobalStatusClr` and
//!   `PerfCntrGlobalStatusSet` (C000_0300H-C000_0303H), the counter count
//!   CPUID Fn8000_0022_EBX\[3:0\] gives (at most six in the model). RDMSR or
//!   WRMSR of any other MSR, and RDPMC of a counter that does not exist,
//!   raise #GP ([`GpReason`]); a faulting access changes nothing. Writes
//!   that set reserved bits and writes to the read-only status register
//!   are ignored (choices 1 and 2), where Intel's architectural PMU raises
//!   #GP.
//! * **Counting** (`counting.rs`): a counter counts an [`Event`] when its
//!   `EN` is set and, with PerfMonV2, its PerfCntrGlobalCtl bit (the two
//!   are ANDed), the 12-bit event select and the unit mask are equal to the
//!   event's, USR (CPL > 0) or OS (CPL 0) admits its privilege, and, with
//!   EFER.SVME set ([`AmdModel::set_svme`]), HostOnly/GuestOnly admit its
//!   mode. Per clock the matching occurrences are the input: CntMask 0 adds
//!   it (INV has no effect); CntMask > 0 adds 1 when the input is at least
//!   CntMask (INV: below it); Edge adds 1 only where that comparison turns
//!   true. [`AmdModel::inject`] spends one clock per occurrence (in bulk,
//!   in time proportional to the wraps, not the events),
//!   [`AmdModel::cycle`] is one clock with any number of occurrences,
//!   [`AmdModel::idle`] clocks without events.
//! * **Overflow** (`overflow.rs`): a counter wraps at 48 bits; with
//!   PerfMonV2 the wrap sets its PerfCntrGlobalStatus bit; with INT it
//!   raises a PMI, in the clock of the wrap or with the counter's
//!   [`skid`](AmdModel::set_skid)-th increment after it, pending until
//!   [`AmdModel::take_pmi`]. Optionally every overflow's PMI is a message
//!   of its own ([`AmdModel::set_separate_pmis`]), the late delivery of
//!   AMD's erratum: a PMI that arrives after an earlier handler has
//!   serviced its counter. No LVT: the kernel (the QEMU harness) delivers
//!   the PMI.
//! * **CPUID** ([`Config::cpuid`]): the vendor, the signature, Fn8000_0001
//!   (PerfCtrExtCore) and Fn8000_0022 (PerfMonV2, the counter count);
//!   presets [`Config::k8`] (legacy), [`Config::zen2`] (PerfCtrExtCore) and
//!   [`Config::zen4`] (PerfMonV2).
//!
//! # What it does not model
//!
//! Timing and the microarchitecture (events are what the test injects),
//! the northbridge, data-fabric and L3 counters, instruction-based
//! sampling, LBRs (and status bit 58, LBRs frozen) and the PMC freeze of
//! CPUID Fn8000_0022_EAX\[2\], the second thread of a core, family 15h's
//! per-event counter restrictions and Zen's paired events (any event counts
//! on any counter), SVM itself (one EFER.SVME bit and the mode each event
//! occurs in), CR4.PCE (RDPMC is at CPL 0), errata other than the late PMI.
//!
//! # Where the sources are silent or disagree, and what the model does
//!
//! 1. **Reserved bits of `PERF_CTL`** (19, 21, 36-39, 42-63): the APM marks
//!    them reserved; the PPRs and KVM (`svm/pmu.c`: "Per PPR ... writes are
//!    ignored", its reserved mask `0xFFFF_FFF0_0028_0000`) drop them
//!    silently. The model drops them: a write keeps the defined fields and
//!    reads back without the reserved bits. Bits 63:48 of a counter are
//!    dropped likewise (48-bit counters). PerfCntrGlobalCtl,
//!    PerfCntrGlobalStatusClr and PerfCntrGlobalStatusSet keep the counter
//!    bits only.
//! 2. **PerfCntrGlobalStatus is read only**: "Read-only MSR. Writes are
//!    ignored" (PPR, as KVM quotes it): a write is ignored, no #GP.
//! 3. **PerfCntrGlobalCtl at RESET**: every counter's bit set, so that
//!    software that knows only `EN` counts (KVM's `kvm_pmu_refresh` comment:
//!    both vendors set every general-purpose enable bit at RESET).
//! 4. **The write-1 registers** (StatusClr, StatusSet) read as 0;
//!    StatusSet sets status bits and raises no PMI.
//! 5. **HostOnly/GuestOnly with SVM disabled**: a 2026 KVM selftest states
//!    the bits are ignored and the counter counts in both modes, and that
//!    both bits set count as neither; Linux's `amd_pmu_disable_virt`
//!    comment says a GuestOnly counter with SVM disabled "will not count
//!    anything". The model follows the selftest (which checks the
//!    hardware's behaviour as KVM virtualizes it): with EFER.SVME clear the
//!    bits change nothing.
//! 6. **PMI delivery**: the APM says INT raises an interrupt on overflow and
//!    nothing of merging; an interrupt raised while one is pending is one
//!    delivery on the APIC (a fixed vector pending in the IRR, an NMI
//!    latched once). The model merges by default and, with
//!    [`AmdModel::set_separate_pmis`], delivers each overflow's PMI on its
//!    own: the late-NMI shape Linux handles (`amd_pmu_adjust_nmi_window`).
//! 7. **Skid** is counted in increments of the overflowing counter, as the
//!    architectural-PMU model counts it; unlike there, a PMI whose skid has
//!    not run out rises at once when the counter stops counting (`EN` or
//!    its PerfCntrGlobalCtl bit cleared): the interrupt was requested at
//!    the wrap, and stopping the counter does not withdraw it (the case
//!    Linux's `amd_pmu_wait_on_overflow` waits for).
//! 8. **Legacy and extended addresses** are one register file (KVM's
//!    `pmu.c` header, kvm-unit-tests running its AMD suite through both):
//!    a write through one reads back through the other.

mod counting;
mod overflow;
mod registers;
#[cfg(target_arch = "x86_64")]
pub mod shared;
mod tables;

#[cfg(test)]
mod tests;

pub use counting::{Event, Injected, Privilege};
pub use registers::{AmdModel, Config, Fault, GpReason, Instruction, MAX_STANDARD_LEAF};
#[cfg(target_arch = "x86_64")]
pub use shared::{AmdMsr, SharedAmdModel};
pub use tables::{
    CORE_CTL0, CORE_CTR0, GLOBAL_CTL, GLOBAL_STATUS, GLOBAL_STATUS_CLR, GLOBAL_STATUS_SET,
    LEGACY_CTL0, LEGACY_CTR0, cpuid, ctl,
};

//! AMD's core performance counters (AMD64 APM Vol. 2 13.2,
//! "Performance Monitoring Counters"): the legacy counters of every AMD64
//! processor, the six of PerfCtrExtCore and the global registers of
//! PerfMonV2, with the same shape as the architectural PMU's module:
//! register map and layouts ([`Counter`], [`PerfCtl`]), events
//! ([`EventSpec`]), the physical PMU ([`AmdPmu`]), the driver ([`driver`])
//! and the PMI handler ([`pmi`]), which reach the registers only through
//! [`crate::access::MsrAccess`].
//!
//! # The AMD core PMU for someone who has never seen one
//!
//! Each logical processor has *core counters*, each a pair of an event
//! select register (`PERF_CTLn`, [`PerfCtl`]: a 12-bit event select split
//! over bits 7:0 and 35:32, unit mask, privilege, CntMask/INV/Edge filter,
//! interrupt, enable, and HostOnly/GuestOnly for a hypervisor) and a
//! 48-bit counter (`PERF_CTRn`). Every AMD64 processor has four (the
//! legacy `PERF_LEGACY_CTL0-3`/`PERF_LEGACY_CTR0-3` at `C001_0000H`,
//! unenumerated); CPUID 8000_0001H:ECX\[23\] (PerfCtrExtCore) says there
//! are six at `C001_0200H`, the first four the legacy ones under other
//! addresses. Until PerfMonV2 there is no global register at all: each
//! counter is started by its own `EN`, and nothing says which counter
//! overflowed (the handler reads each one: a counter preset to `-N` has
//! its top bit set until it wraps). PerfMonV2 (CPUID 8000_0022H, which
//! also counts the counters) adds `PerfCntrGlobalCtl` (ANDed with each
//! `EN`), `PerfCntrGlobalStatus` and its clear and set registers, like
//! Intel's version 2. The PMI comes through the local APIC's
//! performance-counter entry, which on AMD the delivery does not mask.
//!
//! # Modules
//!
//! | module | contents |
//! |---|---|
//! | (root) | MSR numbers, counters and sets of counters, the `PERF_CTL` layout ([`Counter`]); `perf`'s generic events per generation and event strings ([`EventSpec`]: `instructions:u`, `event=0x1c0,umask=0x01,cmask=2`, `:H`/`:G`); [`AmdPmu`], the physical PMU of one logical processor as a value |
//! | [`events`] | `perf`'s generic events per generation and event strings ([`EventSpec`]), re-exported at the root |
//! | [`driver`] | the typestate driver: legacy, PerfCtrExtCore and PerfMonV2 counters, `PerfCntrGlobalCtl` starts and stops, groups in one write (PerfMonV2), firmware-used counters left alone |
//! | [`pmi`] | the PMI handler: each armed counter's top bit (legacy) or one status read and one acknowledgement (PerfMonV2); late PMIs decided by count |
//! | [`multiplex`] | more events than counters, rotated on the caller's tick |
//!
//! The register-level model the tests run the driver against is
//! `crate::model::amd` (feature `model`), written from the APM
//! independently of these layouts. On a CPU whose hypervisor exposes the
//! AMD PMU (KVM with `-cpu host` on an AMD host that exposes its PMU), the
//! `amd` QEMU kernel runs the same cases on the real counters.

pub mod driver;
pub mod events;
mod msrs;
pub mod multiplex;
mod physical;
pub mod pmi;
mod seam;

pub use events::*;
pub use msrs::*;
pub use physical::*;

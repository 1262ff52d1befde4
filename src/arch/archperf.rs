//! Intel's architectural performance monitoring (versions 1-5, and 6 on the
//! counters and registers version 5 has; per core type on a hybrid part:
//! [`enumeration`]): the PMU of
//! every Intel Core and Atom processor since 2006 (SDM Vol. 3B,
//! "Architectural Performance Monitoring"), with the same shape as the
//! NetBurst and Itanium modules: register map and layouts ([`Counter`], [`PerfEvtSel`]),
//! events ([`EventSpec`]), the physical PMU ([`ArchPerfPmu`]), the driver
//! ([`driver`]) and the PMI handler ([`pmi`]), which reach the registers only
//! through [`crate::access::MsrAccess`].
//!
//! # The architectural PMU for someone who has never seen one
//!
//! Each logical processor has *general counters* (CPUID.0AH:EAX\[15:8\] of
//! them, 2-8 on the parts the crate drives), each a pair of an event select
//! register (`IA32_PERFEVTSELx`, [`PerfEvtSel`]: event, unit mask, privilege,
//! CMASK/INV/EDGE filter, interrupt, enable) and a counter (`IA32_PMCx`, 40
//! to 48 bits), and from version 2 *fixed counters* that each count one
//! event (instructions, core cycles, TSC-rate reference cycles, topdown
//! slots), controlled by 4-bit fields of `IA32_FIXED_CTR_CTRL`. From version
//! 2, `IA32_PERF_GLOBAL_CTRL` enables any set of counters with one write,
//! `IA32_PERF_GLOBAL_STATUS` says which overflowed, and
//! `IA32_PERF_GLOBAL_OVF_CTRL` acknowledges them. CPUID leaf 0AH says how
//! many counters of which width exist and which of the pre-defined
//! architectural events are available ([`detect`](crate::detect)).
//!
//! From Nehalem on, PEBS (precise event-based sampling) turns a counter's
//! overflow into a record of the event's own instruction, which the
//! processor writes into the DS save area (`IA32_DS_AREA`,
//! [`crate::arch::ia32::ds`]); `IA32_PEBS_ENABLE` says which counters, the
//! record format is `IA32_PERF_CAPABILITIES[11:8]`'s (the guide's archperf
//! page).
//!
//! From Nehalem on, the *last branch records* (LBR) keep the last taken
//! branches, and in call-stack mode (Haswell on) the calls still open: a
//! sample can carry them ([`Lbr`], [`BranchStack`]; the guide's profiling
//! page), the legacy stack of the generations in [`GENERATIONS`] or
//! architectural LBR (CPUID.07H:EDX\[19\]).
//!
//! Nothing here is NetBurst's: NetBurst (family 0Fh) predates the
//! architectural PMU, and its `MSR_FLAME_PERFCTR1-3` sit at 309H-30BH,
//! where the fixed counters are on every later part.
//!
//! # Modules
//!
//! | module | contents |
//! |---|---|
//! | (root) | MSR numbers, counters and sets of counters, the register layouts (the PEBS MSRs' too: [`PebsEnable`], [`PebsDataCfg`], [`PebsLdLat`]), RDPMC's ECX, CPUID leaf 0AH ([`Counter`]); the architectural events and event strings ([`EventSpec`]: `instructions:u`, `event=0x3c,umask=0x00,cmask=2`, `branches:pp`); PEBS records of formats 1-5 ([`PebsRecord`], [`RecordLayout`], [`PebsArea`]); the last branch records ([`Lbr`], its layouts [`DebugCtl`], [`LbrSelect`], [`LbrCtl`], [`LbrInfo`], formats 1-7 [`LbrFormat`], [`BranchFilter`], [`BranchStack`], [`LbrSnapshot`]); [`ArchPerfPmu`], the physical PMU of one logical processor as a value |
//! | [`enumeration`] | what one logical processor has (per core type on a hybrid part: CPUID leaf 23H's bitmaps, or leaf 0AH), the counters its driver takes and the events it refuses, and why ([`enumeration::Lack`]) |
//! | [`events`] | the architectural events, their names and `perf`-style event strings ([`EventSpec`]), re-exported at the root |
//! | [`driver`] | the typestate driver: general and fixed counters, `GLOBAL_CTRL` starts and stops, groups in one write, firmware-used counters left alone; PEBS (`set_pebs_area`, precise configurations, `drain_pebs`); the LBR (`enable_lbr`, `disable_lbr`, `save_lbr`/`restore_lbr` for a task switch, counters whose samples carry the records) |
//! | [`pmi`] | the PMI handler: one status read, one acknowledgement; the PEBS buffer's interrupt drained out of line; the LBR read out of line, frozen by the PMI |
//! | [`multiplex`] | more events than general counters, rotated on the caller's tick, each rotation one `GLOBAL_CTRL` write |
//!
//! The register-level model the tests run the driver against is
//! `crate::model::archperf` (feature `model`), written from the SDM
//! independently of these layouts. On a CPU whose hypervisor exposes a PMU
//! (KVM with `-cpu host`, on a host that has one), the `archperf` QEMU
//! kernel runs the same cases on the real counters.

pub mod driver;
pub mod enumeration;
pub mod events;
mod lbr;
mod msrs;
pub mod multiplex;
mod pebs;
mod physical;
pub mod pmi;
mod seam;

pub use events::*;
pub use lbr::*;
pub use msrs::*;
pub use pebs::*;
pub use physical::*;

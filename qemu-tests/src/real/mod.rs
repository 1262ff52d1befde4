//! The real-PMU cases of every architecture, written once: retired
//! instructions of a loop of known length within bounds, core cycles
//! against the TSC, and an overflow PMI inside the loop
//! ([`cases`]). Each is generic over a [`Bench`]: an architecture's PMU
//! over a register backend (through the crate's seam, `pmu::arch::Driven`),
//! with the loop and the clock that go with it. On a **real** PMU the
//! bench runs the loop itself and reads the TSC; on a **model** it feeds
//! the model the events the loop retires and the cycles it takes, on a
//! clock of its own, so the same code, with the same driver calls, bounds
//! and accounting, runs (and must pass) where no PMU is exposed: the
//! `archperf` and `amd` kernels run every case on both.
//!
//! The bounds are the manuals' definitions of the events, as
//! kvm-unit-tests' `x86/pmu.c` bounds its counts: see [`workload`] for the
//! loop and `pmu_report::bounds` for the intervals (with
//! AMD's reasons).
//!
//! The registry, [`ARCHITECTURES`], lists each architecture's real PMU and
//! its cases ([`real_cases!`](crate::real_cases)); the `validate` kernel runs them all and
//! reports each with what it measured ([`measured`]). An architecture
//! joins with its bench (a module here, as [`archperf`] and [`amd`] are)
//! and one entry:
//!
//! ```text
//! Architecture { name: "amd", cases: &real_cases!("amd_", amd::Real) },
//! ```
//!
//! Kernels that run these cases leave them interrupt vector
//! [`cases::PMI_VECTOR`].

pub mod amd;
pub mod archperf;
pub mod cases;
pub mod measured;
pub mod workload;

use core::ops::RangeInclusive;

use hobby::test::Failure;
use pmu::arch::{Architecture as Arch, Driven, LocalPmu};
use pmu::counter::Owner;

pub use hobby::test::Case;

/// Where the real-PMU cases run: a CPU's share of a PMU ([`Bench::Local`])
/// over a register backend ([`Bench::Regs`]), real or a model, and how the
/// loop runs and time is read on it. What an architecture does (taking its
/// driver, its PMI handler, its overflow rule, the periods it accounted)
/// is the crate's seam's; a bench says only which counters count what.
pub trait Bench: 'static {
    /// The register backend (the hardware's, or a model's).
    type Regs;
    /// A CPU's share of the PMU, driven over [`Bench::Regs`].
    type Local: Driven<'static, Self::Regs>;
    /// The owner the cases take the driver as (one per bench).
    type Owner: Owner;
    /// What counts, for the measurements: `real PMU` or `model`.
    const SOURCE: &'static str;
    /// The clock of [`Bench::timestamp`], for the measurements: `TSC`, or
    /// a model's.
    const CLOCK: &'static str;

    /// The PMU as detection finds it, afresh (a model is reset, its clock
    /// too); a real PMU this machine does not have skips the case, saying
    /// why ([`hobby::skip!`]).
    fn prepare() -> Result<Detected<Self>, Failure>;
    /// The share of the PMU the cases drive.
    fn local() -> Self::Local;
    /// A register backend (the PMI handler makes its own).
    fn regs() -> Self::Regs;
    /// The first free counter that counts retired instructions, and its
    /// configuration; a skip when the PMU cannot count them.
    fn instructions(driver: &Driver<Self>) -> Result<(u8, Config<Self>), Failure>;
    /// The first free counter that counts unhalted core cycles, and its
    /// configuration; a skip when the PMU cannot count them.
    fn core_cycles(driver: &Driver<Self>) -> Result<(u8, Config<Self>), Failure>;
    /// Whether the PMU's overflow interrupt can be handled; a skip if not.
    fn sampling_supported(detected: &Detected<Self>) -> Result<(), Failure>;
    /// `iterations` iterations of [`workload::counted_loop`], as a counter
    /// sees them: the loop itself on a real PMU; on a model, the events it
    /// retires and the cycles it takes, its clock advanced by its ticks.
    fn run_loop(iterations: u64);
    /// [`Bench::run_loop`] with interrupts open, the PMU's overflow PMIs
    /// taken during it: returns the instruction addresses a PMI may
    /// interrupt (the loop's; a model's delivery window).
    fn run_sampled_loop(iterations: u64) -> Result<RangeInclusive<u64>, Failure>;
    /// The clock core cycles are held against: the TSC on a real PMU
    /// ([`workload::fenced_rdtsc`]), a model's own.
    fn timestamp() -> u64;
}

/// The architecture of bench `B`.
pub type ArchOf<B> = <<B as Bench>::Local as LocalPmu<'static>>::Arch;
/// What detection reports on bench `B`.
pub type Detected<B> = <ArchOf<B> as Arch>::Detected;
/// A counter configuration on bench `B`.
pub type Config<B> = <ArchOf<B> as Arch>::Config;
/// The driver of bench `B`, for its owner.
pub type Driver<B> =
    <<B as Bench>::Local as Driven<'static, <B as Bench>::Regs>>::Driver<<B as Bench>::Owner>;

/// The real-PMU cases on bench `$bench`, as `hobby::test` cases named
/// `$prefix` + the case's name.
#[macro_export]
macro_rules! real_cases {
    ($prefix:literal, $bench:ty) => {
        [
            $crate::real::Case {
                name: concat!($prefix, "retired_instructions_within_bounds"),
                run: $crate::real::cases::retired_instructions::<$bench>,
            },
            $crate::real::Case {
                name: concat!($prefix, "core_cycles_against_the_tsc"),
                run: $crate::real::cases::core_cycles::<$bench>,
            },
            $crate::real::Case {
                name: concat!($prefix, "overflow_pmi_inside_the_loop"),
                run: $crate::real::cases::overflow_pmi::<$bench>,
            },
        ]
    };
}

/// One architecture's real PMU and its cases, as the `validate` kernel
/// runs them.
pub struct Architecture {
    /// Its name (the crate's module: `pmu::arch::<name>`).
    pub name: &'static str,
    /// Its cases on its real PMU ([`real_cases!`](crate::real_cases)).
    pub cases: &'static [Case],
}

/// Every architecture's real PMU, in the order the report lists them.
pub static ARCHITECTURES: &[Architecture] = &[
    Architecture {
        name: "archperf",
        cases: &real_cases!("archperf_", archperf::Real),
    },
    Architecture {
        name: "amd",
        cases: &real_cases!("amd_", amd::Real),
    },
];

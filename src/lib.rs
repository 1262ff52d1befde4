//! `pmu`: a bare-metal driver for CPU performance-monitoring units (Intel
//! NetBurst, Intel Itanium, Intel's architectural PMU and AMD's core PMU).
//! `no_std`, no allocator.
//!
//! # Where to start
//!
//! * **The guide** ([`guide`]): how to use the crate, page by page
//!   (counters and sampling, ownership, many CPUs, each architecture,
//!   your kernel, your hypervisor, testing, measured figures).
//! * **The drivers**: [`arch::netburst::driver::NetBurstDriver`],
//!   [`arch::itanium::driver::ItaniumDriver`],
//!   [`arch::archperf::driver::ArchPerfDriver`] and
//!   [`arch::amd::driver::AmdDriver`]. A driver is *taken* once
//!   per PMU for an owner type ([`owner!`]) and hands out typestate counter
//!   handles ([`counter::Handle`]): configure, enable, halt, resume,
//!   cascade, read, release, each with exactly the register accesses the
//!   hardware needs.
//! * **The seam** ([`arch::Architecture`]): what every architecture
//!   provides, the same way, and the one overflow interrupt path,
//!   [`arch::handle_pmi`], called from the kernel's PMU interrupt (or NMI)
//!   for any architecture; lock-free, allocation-free, and exact about the
//!   events it accounts ([`sampling`]).
//! * **The models** (feature `model`): `model::netburst::NetBurstModel`,
//!   `model::itanium::ItaniumModel`, `model::archperf::ArchPerfModel` and
//!   `model::amd::AmdModel`,
//!   register-level PMU models written from the manuals, which the tests drive the real driver against (QEMU
//!   has no PMU).
//!
//! (On a register-level model: a doc test with the `model` feature, ignored without it.)
//!
#![cfg_attr(feature = "model", doc = "```")]
#![cfg_attr(not(feature = "model"), doc = "```ignore")]
//! use pmu::arch::netburst::driver::{CounterConfig, NetBurstDriver};
//! use pmu::arch::netburst::{Escr, NetBurstPmu};
//! use pmu::model::netburst::{Config, NetBurstModel};
//!
//! // SAFETY: the one value for this package (here the model's).
//! static PACKAGE: NetBurstPmu = unsafe { NetBurstPmu::new() }; // one per physical PMU
//! pmu::owner!(Cpu0);                         // one type per driver
//!
//! let model = NetBurstModel::new(Config::prescott_ht()); // or X86Msr on hardware
//! let cpu = pmu::detect::detect(&model, &mut model.clone())?.usable_netburst().unwrap();
//! let (mut pmu, counters) = NetBurstDriver::<Cpu0, _>::take(model, &cpu, &PACKAGE)?;
//! let event = "instr_retired:NBOGUSNTAG:k".parse()?;
//! let c12 = counters.c12.configure(&mut pmu, &CounterConfig::counting(event, Escr::CruEscr0))?;
//! let c12 = c12.enable(&mut pmu)?;           // the handle's type is now Enabled
//! assert_eq!(c12.read(&mut pmu)?, 0);
//! # Ok::<(), Box<dyn core::error::Error>>(())
//! ```
//!
//! # Layers
//!
//! | layer | module | what it does |
//! |---|---|---|
//! | register declarations | [`register`] | the foundation every register layout is declared with: [`register::Field`] (a position and a width), `register!` (a typed register image from its fields) and the set operations; it imports nothing |
//! | register access | [`access`] | the only code that reaches PMU registers: [`access::MsrAccess`] (RDMSR, WRMSR, RDPMC) and [`access::PmcPmdAccess`] (Itanium PMC/PMD), the hardware backend, a recording wrapper for exact access counts |
//! | detection | [`detect`] | identifies the PMU from CPUID and IA32_MISC_ENABLE (and, on AMD, a read-back of a counter) without executing anything the CPU may lack; the layouts of the CPUID leaves and MSRs it reads ([`detect::Leaf0A`], [`detect::MiscEnable`], ...) |
//! | interrupt delivery | [`apic`], [`entry`] | the local APIC's LVT performance-counter entry, EOI and self-IPI; the PMI's interrupt entry stub ([`pmi_entry!`]) |
//! | typestate counters | [`counter`] | architecture-independent handles whose type is their owner and state; owners ([`counter::owner`]); the run-time form [`counter::AnyHandle`] |
//! | sampling | [`sampling`] | sample-after values, presets and re-arming, calibration, the interrupt-to-kernel sample buffer |
//! | multiplexing | [`multiplex`] | more events than counters: the one multiplexer over each architecture's placement, time enabled and running, scaled estimates |
//! | architectures | [`arch`] | per architecture: register layouts and data tables, the driver behind the handles, its overflow handler; the seam every architecture meets the crate at |
//! | topology | [`topology`] | which CPUs share a PMU, from CPUID |
//! | models | `model` (feature `model`) | register-level PMU models: test instruments written from the manuals |
//! | hypervisors | [`virt`] | guest PMUs: MSR classes, guest access checks, RDPMC, the world switch, emulated PMUs (on the models) |
//!
//! Each layer imports only from the layers above it in this table (besides
//! the crate-private `sealed`), never from one below, and inside
//! each directory no two files import each other, directly or around a
//! loop: a unit test reads the sources and fails on any import circle.
//!
//! Everything that touches hardware is `unsafe` to construct and safe to use
//! through the drivers: two constructors' contracts are the promises the
//! caller makes. The hardware backend's ([`access::X86Msr::new`]): CPL 0,
//! used on the CPU that made it. The physical PMU's
//! (`arch::netburst::NetBurstPmu::new`, `arch::itanium::ItaniumPmu::new`,
//! `arch::archperf::ArchPerfPmu::new`, `arch::amd::AmdPmu::new`): one value per physical PMU, its
//! drivers' backends on the CPUs it serves. The rest (one driver per owner
//! type and per logical processor, every token back before an owner is free,
//! memory the CPU writes owned by the driver) the types and the drivers
//! check. The traits behind the drivers are sealed, and the hardware
//! backend's raw register accesses are `unsafe` at the call
//! ([`guide::ownership`]).
#![cfg_attr(not(test), no_std)]

pub mod access;
pub mod apic;
pub mod arch;
pub mod counter;
pub mod detect;
#[cfg(target_arch = "x86_64")]
pub mod entry;
pub mod guide;
#[cfg(test)]
mod layering;
#[cfg(any(test, feature = "model"))]
pub mod model;
pub mod multiplex;
pub mod register;
pub mod sampling;
mod sealed;
pub mod task;
#[cfg(test)]
mod testing;
pub mod topology;
pub mod virt;

/// The README's code blocks, compiled and run as doc tests where the
/// `model` feature is on (the repository's `cargo test` turns it on; most
/// blocks run on a model). A packaged crate tested without the feature
/// runs the examples in the rustdoc only, those on a model ignored.
#[cfg(doctest)]
#[cfg_attr(feature = "model", doc = include_str!("../README.md"))]
pub struct ReadmeDoctests;

//! `pmu`: a bare-metal driver for CPU performance-monitoring units.
//!
//! The crate is `no_std`, needs no allocator, and is built in layers, each a
//! module of its own:
//!
//! | layer | module | what it does |
//! |---|---|---|
//! | MSR access | [`msr`] | the only code that executes RDMSR, WRMSR and RDPMC, behind the [`msr::MsrAccess`] trait; a recording wrapper for exact access counts |
//! | detection | [`detect`] | identifies the PMU from CPUID and IA32_MISC_ENABLE without executing anything the CPU may lack |
//! | interrupt delivery | [`apic`] | the local APIC's LVT performance-counter entry, EOI and self-IPI |
//! | typestate counters | [`counter`] | architecture-independent handles whose type is their state (Configured, Enabled, Halted, Cascaded); the run-time form [`counter::AnyCounter`] |
//! | sampling | [`sampling`] | sample-after values, counter presets and reloads, calibration, the interrupt-to-kernel sample buffer |
//! | architectures | [`arch`] | register layouts, event catalogs and the drivers behind the handles (NetBurst: [`arch::netburst::driver`], its PMI handler [`arch::netburst::pmi`], event scheduling [`arch::netburst::schedule`]) |
//! | models | `model` (feature `model`) | register-level PMU models: test instruments written from the manuals |
//!
//! See the README for the status of each part.
//!
//! Everything that touches hardware is `unsafe` to construct and safe to use:
//! the constructor's contract (CPL0, the right CPU, the right page) is the one
//! promise the caller makes.
#![cfg_attr(not(test), no_std)]

pub mod apic;
pub mod arch;
pub mod counter;
pub mod detect;
#[cfg(any(test, feature = "model"))]
pub mod model;
pub mod msr;
pub mod sampling;

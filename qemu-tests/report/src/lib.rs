//! `pmu-report`: what the [`pmu`] crate's test and example kernels make of
//! the samples and counts the driver hands them. None of it is the driver:
//! it reads the driver's public types and formats or checks them.
//! `no_std`, no allocator.
//!
//! | module | job |
//! |---|---|
//! | [`symbols`] | the kernels' symbol table: functions and load modules by address range, and a `static` table of code labels an interrupt handler looks the interrupted RIP up in |
//! | [`itlb`] | HP Caliper's itlb report: sampled Itanium instruction TLB misses by load module, function and cache line, by fill level |
//! | [`dear`] | a D-EAR report: sampled Itanium data addresses and latencies by function |
//! | [`bounds`] | the intervals a count on a real PMU may fall in (retired instructions of a known loop, cycles against the TSC), for the real-PMU cases of the `archperf` and `amd` QEMU kernels |
//!
//! The host runner attributes addresses with its own table, read from a
//! kernel's ELF symbols (`pmu-qemu-run`).
#![cfg_attr(not(test), no_std)]

pub mod bounds;
pub mod dear;
pub mod itlb;
pub mod symbols;
mod table;

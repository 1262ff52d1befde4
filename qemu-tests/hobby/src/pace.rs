//! How fast this platform runs the kernels' code, so that the counts of
//! rounds, reads and events a case repeats fit the time a test run has.
//!
//! The cases' counts were chosen where a workload unit
//! ([`work_1x`], [`UNIT_ITERATIONS`] iterations
//! of six register instructions) takes 55-75 µs: QEMU 7.2's TCG on the
//! project machine. KVM on a host with hardware virtualization runs it
//! faster still. A hypervisor that emulates its guest (the project
//! machine's nested KVM, `kvm_pvm`, measured 2026-11-26: about 0.6 µs per
//! instruction, 130 ms a unit, and 50-150 µs for each CPUID, RDTSC, CLI,
//! STI, APIC register or I/O port access) runs the same cases 1000-2000
//! times slower: at the same counts one kernel takes many minutes.
//!
//! [`scaled`] keeps a count where the platform is within [`TOLERATED`]
//! times the reference (TCG on a busy host included, so its counts never
//! change) and divides it by the [`slowdown`] elsewhere, never below the
//! floor the case needs for what it checks. What each repetition checks
//! stays exact; a case prints how many it ran.

use crate::timer::{rdtsc, tsc_hz};
use crate::workload::{UNIT_ITERATIONS, work_1x};

/// A workload unit's time on the reference platform, at most (ns).
pub const REFERENCE_UNIT_NS: u64 = 75_000;

/// The slowdown up to which [`scaled`] keeps every count.
pub const TOLERATED: u64 = 8;

/// A workload unit's time here, in ns: the faster of two, measured once
/// (the first call also measures the TSC's rate against the PIT, 10 ms).
pub fn unit_ns() -> u64 {
    static UNIT_NS: spin::Once<u64> = spin::Once::new();
    *UNIT_NS.call_once(|| {
        let hz = tsc_hz().max(1);
        let cycles = (0..2)
            .map(|_| {
                let start = rdtsc();
                work_1x();
                rdtsc().wrapping_sub(start)
            })
            .min()
            .unwrap_or(0);
        (u128::from(cycles) * 1_000_000_000 / u128::from(hz)) as u64
    })
}

/// How many times slower than the reference this platform runs a workload
/// unit ([`REFERENCE_UNIT_NS`]; [`UNIT_ITERATIONS`] iterations): at least 1.
pub fn slowdown() -> u64 {
    const { assert!(UNIT_ITERATIONS == 20_000) };
    (unit_ns() / REFERENCE_UNIT_NS).max(1)
}

/// `n` repetitions where the platform is within [`TOLERATED`] times the
/// reference; elsewhere `n / slowdown()`, at least `floor` (and never more
/// than `n`).
pub fn scaled(n: u64, floor: u64) -> u64 {
    let slowdown = slowdown();
    if slowdown <= TOLERATED {
        n
    } else {
        (n / slowdown).max(floor).min(n)
    }
}

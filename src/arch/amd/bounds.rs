//! What a count taken on a real AMD core PMU may be: the intervals of the
//! architectural PMU's real-PMU checks ([`crate::arch::archperf::bounds`]),
//! which the real-PMU cases hold AMD's counts to (the `pmu-qemu-tests`
//! library's `real` module: the `amd` kernel's `real_*` cases and the
//! `validate` kernel, under KVM on a host that exposes its PMU or on bare
//! metal).
//!
//! They hold on AMD for the same reasons:
//!
//! * **Retired instructions** (event C0H, Linux's `instructions` on every
//!   AMD map): a loop of known length counts at least its own
//!   instructions, and kvm-unit-tests' 2 % allowance covers what else
//!   retires (its AMD runs use the same bound, `x86/pmu.c`).
//! * **Core cycles against the TSC** (event 76H, `cycles`): AMD's TSC
//!   ticks at the P0 (base) frequency (AMD64 APM Vol. 2 "Time-Stamp
//!   Counter", invariant TSC), and no AMD part's boost frequency is 4
//!   times its base, so the bound of 8 core cycles per TSC tick holds; the
//!   lower bound is the loop's own, one cycle per iteration of its
//!   dependency chain.

pub use crate::arch::archperf::bounds::{
    BoundsError, INSTRUCTION_SLACK_DIVISOR, Interval, MAX_CYCLES_PER_TSC_TICK, Quantity,
    core_cycles_interval, cycles_against_tsc, loop_instructions, retired_instructions_within,
};

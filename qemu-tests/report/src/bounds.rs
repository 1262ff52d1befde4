//! What a count taken on a real PMU may be: the intervals the real-PMU
//! cases (the `pmu-qemu-tests` library's `real` module: the `archperf`
//! kernel's `real_*` cases and the `validate` kernel, under KVM on a host
//! that exposes its PMU or on bare metal) hold a measured count to.
//!
//! A model counts exactly what it is fed; a real PMU counts the code that
//! really ran, so a check on real hardware compares against an interval,
//! not a number. The approach is kvm-unit-tests' (`x86/pmu.c`): run a loop
//! whose instruction count is known, and accept a count from the loop's
//! own instructions up to a bounded excess (there `10*N` to `10.2*N` for N
//! iterations of a 10-instruction loop: 2 %), and core cycles only within a
//! wide plausibility range (there `1*N` to `50*N`).
//!
//! Each bound and where it comes from (none is tuned to a measurement):
//!
//! | bound | value | source |
//! |---|---|---|
//! | fewest retired instructions | the loop's: instructions per iteration x iterations | the event's definition: "Instructions Retired" counts each instruction once, at retirement (SDM Vol. 3B, "Pre-defined Architectural Performance Events"; fixed counter 0's INST_RETIRED.ANY the same); the loop is built so that its count per iteration is exact (no string instruction, no macro-fusion pair: the cases' `workload` module) |
//! | most retired instructions | those + the caller's path overhead + 2 % of the loop ([`INSTRUCTION_SLACK_DIVISOR`]) | the path: the instructions that retire between the counter's start and the loop and between the loop and the stop, from the code (the caller's bound, `PATH_OVERHEAD` in the cases); the 2 %: kvm-unit-tests' allowance (`10.2*N`), for what else retires at the counted privilege: a hypervisor's emulated instructions (KVM adds those it emulates), SMI and NMI handlers, VM-entry overcount errata |
//! | fewest core cycles | one per iteration of a loop-carried chain of one-cycle instructions | an instruction completes in no less than a core cycle, and each iteration waits for the last one's result, at any frequency: kvm-unit-tests' `1*N` |
//! | most core cycles | [`MAX_CYCLES_PER_TSC_TICK`] (8) per TSC tick of the window | the TSC ticks at the processor's nominal frequency (SDM Vol. 3B, "Time-Stamp Counter": invariant TSC), the core at most at its maximum turbo; the largest ratio of the two in Intel's specifications is about 4.5 (9 W Alder Lake-U parts: 1.0-1.1 GHz base, 4.4-4.7 GHz turbo), AMD's smaller (boost over the P0 frequency, which the TSC counts); 8 is nearly twice that |
//!
//! # Retired instructions ([`loop_instructions`], [`retired_instructions_within`])
//!
//! A counter enabled before a loop and stopped after it counts every
//! instruction of the loop: `per_iteration * iterations` is the minimum. On
//! top come the instructions between the enabling write and the loop and
//! between the loop and the stopping write (the driver's return and call
//! paths: the caller's `overhead`), and whatever else retires at the
//! counter's privilege meanwhile: an NMI or SMI handler, a hypervisor's
//! emulated instructions (KVM counts the instructions it emulates), an
//! erratum's overcount. kvm-unit-tests allows 2 % of the loop for those;
//! so does [`loop_instructions`] ([`INSTRUCTION_SLACK_DIVISOR`]), on top of
//! the caller's path overhead.
//!
//! # Core cycles against the TSC ([`cycles_against_tsc`])
//!
//! Unhalted core cycles (fixed counter 1, or event 3CH/00H) tick at the
//! core's current frequency; the TSC ticks at a constant rate, the
//! processor's nominal frequency (SDM Vol. 3B "Time-Stamp Counter":
//! invariant TSC). Over a window in which the core never halts, `cycles /
//! tsc_ticks` is the ratio of the two frequencies, which nothing fixes:
//!
//! * **Above**: the core runs faster than the TSC only by its turbo ratio.
//!   The largest ratio of maximum turbo to nominal frequency among Intel
//!   parts is about 4.5 (low-power parts with a 1.0-1.1 GHz base and a
//!   4.4-4.7 GHz turbo); the bound is nearly twice that,
//!   [`MAX_CYCLES_PER_TSC_TICK`] = 8, for parts the crate has not seen. A
//!   counter that counts more than 8 core cycles per TSC tick over a window
//!   that encloses it counts something else (slots, or another logical
//!   processor's cycles too).
//! * **Below**: nothing bounds the ratio from below. The core may run at
//!   its lowest frequency (a fifth of the TSC's, or less with thermal clock
//!   modulation), SMM may take time the counter does not see, and a
//!   hypervisor may deschedule the virtual CPU while the TSC runs on. So
//!   the TSC gives no lower bound; the lower bound is the work's own: a
//!   loop whose iterations form a dependency chain of one-cycle
//!   instructions takes at least one cycle per iteration (kvm-unit-tests'
//!   `1*N`) at whatever frequency it runs, descheduled or not.
//!
//! The check is a plausibility check: it catches a counter that counts
//! nothing, counts at another clock's rate (the reference clock runs at
//! 1/100 or less of the core's), or counts far too much; it cannot tell
//! core cycles from an event of a similar rate.
//!
//! ```
//! use pmu_report::bounds::{Interval, cycles_against_tsc, loop_instructions};
//! use pmu_report::bounds::retired_instructions_within;
//!
//! // 1 000 000 iterations of a 3-instruction loop, at most 20 000
//! // instructions of driver path around it.
//! let allowed = loop_instructions(3, 1_000_000, 20_000)?;
//! assert_eq!(allowed, Interval { min: 3_000_000, max: 3_080_000 });
//! assert!(retired_instructions_within(allowed, 3_000_412).is_ok());
//! let e = retired_instructions_within(allowed, 2_999_999).unwrap_err();
//! assert!(e.to_string().starts_with("retired instructions: 2999999 measured"));
//! // 1 500 000 cycles over 1 000 000 TSC ticks, at least 1 000 000 needed.
//! assert!(cycles_against_tsc(1_500_000, 1_000_000, 1_000_000).is_ok());
//! assert!(cycles_against_tsc(999_999, 1_000_000, 1_000_000).is_err());
//! # Ok::<(), pmu_report::bounds::BoundsError>(())
//! ```
//!
//! # On AMD
//!
//! The same intervals hold AMD's counts (the `amd` kernel's `real_*` cases),
//! for the same reasons:
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

use core::fmt;

/// kvm-unit-tests' allowance for instructions a real run counts beyond the
/// loop's: 1/50 (2 %) of the loop's instructions.
pub const INSTRUCTION_SLACK_DIVISOR: u64 = 50;

/// The most unhalted core cycles a window of one TSC tick may hold (see the
/// [module documentation](self)): nearly twice the largest turbo-to-TSC
/// frequency ratio of Intel's parts (about 4.5).
pub const MAX_CYCLES_PER_TSC_TICK: u64 = 8;

/// A closed interval of counts, `min..=max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Interval {
    /// The smallest count allowed.
    pub min: u64,
    /// The largest count allowed.
    pub max: u64,
}

impl Interval {
    /// Whether `count` is inside.
    pub const fn contains(self, count: u64) -> bool {
        self.min <= count && count <= self.max
    }
}

impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..={}", self.min, self.max)
    }
}

/// What a count measures, for the messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Quantity {
    /// Instructions retired (fixed counter 0, or event C0H/00H).
    RetiredInstructions,
    /// Unhalted core cycles (fixed counter 1, or event 3CH/00H).
    CoreCycles,
}

impl Quantity {
    const fn name(self) -> &'static str {
        match self {
            Quantity::RetiredInstructions => "retired instructions",
            Quantity::CoreCycles => "core cycles",
        }
    }
}

/// Why an interval could not be made, or a count is not in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum BoundsError {
    /// The expected count does not fit in 64 bits.
    Overflow,
    /// An interval whose minimum is above its maximum.
    Empty(Interval),
    /// No TSC tick elapsed over the window (the TSC was not read around
    /// the run, or it is stopped).
    NoTscTicks,
    /// A measured count outside the interval a real run allows.
    OutOfBounds {
        /// What was counted.
        quantity: Quantity,
        /// The count.
        measured: u64,
        /// What a real run allows.
        allowed: Interval,
    },
}

impl fmt::Display for BoundsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            BoundsError::Overflow => f.write_str("the expected count does not fit in 64 bits"),
            BoundsError::Empty(i) => write!(f, "empty interval {i}: its minimum is above its maximum"),
            BoundsError::NoTscTicks => f.write_str(
                "no TSC tick elapsed over the window: read the TSC before enabling and after stopping the counter",
            ),
            BoundsError::OutOfBounds {
                quantity,
                measured,
                allowed,
            } => {
                write!(
                    f,
                    "{}: {measured} measured, a real run allows {allowed}",
                    quantity.name()
                )?;
                let why = match (quantity, measured < allowed.min) {
                    (Quantity::RetiredInstructions, true) => {
                        "fewer than the loop's own instructions: the counter missed some, or did not count the whole loop"
                    }
                    (Quantity::RetiredInstructions, false) => {
                        "more than the loop, its path overhead and 2 % (kvm-unit-tests' allowance): the counter counted something else"
                    }
                    (Quantity::CoreCycles, true) => {
                        "fewer cycles than the work needs at any frequency: the counter missed cycles, or counts another clock"
                    }
                    (Quantity::CoreCycles, false) => {
                        "more than 8 core cycles per TSC tick: no core runs that much faster than its TSC"
                    }
                };
                write!(f, " ({why})")
            }
        }
    }
}

impl core::error::Error for BoundsError {}

/// The retired-instruction counts a real run of `iterations` iterations of
/// a loop of `per_iteration` instructions allows, when at most `overhead`
/// instructions outside the loop retire between the counter's start and
/// stop (the driver's paths; see the [module documentation](self)): from
/// the loop's instructions to those plus `overhead` plus 2 % of the loop.
pub const fn loop_instructions(
    per_iteration: u64,
    iterations: u64,
    overhead: u64,
) -> Result<Interval, BoundsError> {
    let Some(min) = per_iteration.checked_mul(iterations) else {
        return Err(BoundsError::Overflow);
    };
    let slack = min / INSTRUCTION_SLACK_DIVISOR;
    match min.checked_add(slack) {
        Some(m) => match m.checked_add(overhead) {
            Some(max) => Ok(Interval { min, max }),
            None => Err(BoundsError::Overflow),
        },
        None => Err(BoundsError::Overflow),
    }
}

/// `measured` retired instructions are within `expected` (made by
/// [`loop_instructions`], or by hand: an empty interval is refused);
/// returns the count.
pub const fn retired_instructions_within(
    expected: Interval,
    measured: u64,
) -> Result<u64, BoundsError> {
    within(Quantity::RetiredInstructions, expected, measured)
}

/// The core-cycle counts a window of `tsc_ticks` TSC ticks allows for work
/// that needs at least `min_cycles` core cycles at any frequency (one per
/// iteration of a loop-carried chain of one-cycle instructions): from
/// `min_cycles` to [`MAX_CYCLES_PER_TSC_TICK`] per tick. `tsc_ticks` must
/// cover the counting window (read the TSC before enabling the counter and
/// after stopping it). See the [module documentation](self) for why the
/// TSC bounds the count only from above.
pub const fn core_cycles_interval(
    tsc_ticks: u64,
    min_cycles: u64,
) -> Result<Interval, BoundsError> {
    if tsc_ticks == 0 {
        return Err(BoundsError::NoTscTicks);
    }
    let max = tsc_ticks.saturating_mul(MAX_CYCLES_PER_TSC_TICK);
    if min_cycles > max {
        // The work cannot have fit in the window: the window is not the
        // one the work ran in.
        return Err(BoundsError::Empty(Interval {
            min: min_cycles,
            max,
        }));
    }
    Ok(Interval {
        min: min_cycles,
        max,
    })
}

/// `cycles` unhalted core cycles are plausible for a window of `tsc_ticks`
/// TSC ticks and work that needs at least `min_cycles`
/// ([`core_cycles_interval`]); returns the interval they were held to.
pub const fn cycles_against_tsc(
    cycles: u64,
    tsc_ticks: u64,
    min_cycles: u64,
) -> Result<Interval, BoundsError> {
    let allowed = match core_cycles_interval(tsc_ticks, min_cycles) {
        Ok(i) => i,
        Err(e) => return Err(e),
    };
    match within(Quantity::CoreCycles, allowed, cycles) {
        Ok(_) => Ok(allowed),
        Err(e) => Err(e),
    }
}

const fn within(quantity: Quantity, allowed: Interval, measured: u64) -> Result<u64, BoundsError> {
    if allowed.min > allowed.max {
        Err(BoundsError::Empty(allowed))
    } else if allowed.contains(measured) {
        Ok(measured)
    } else {
        Err(BoundsError::OutOfBounds {
            quantity,
            measured,
            allowed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    #[test]
    fn the_loop_interval_is_the_loop_plus_its_overhead_plus_2_percent() {
        // kvm-unit-tests' loop: 10 instructions, N = 1 000 000: 10N..=10.2N
        // with no path overhead.
        assert_eq!(
            loop_instructions(10, 1_000_000, 0),
            Ok(Interval {
                min: 10_000_000,
                max: 10_200_000
            })
        );
        assert_eq!(
            loop_instructions(3, 1_000, 500),
            Ok(Interval {
                min: 3_000,
                max: 3_560
            })
        );
        assert_eq!(
            loop_instructions(0, 5, 7),
            Ok(Interval { min: 0, max: 7 }),
            "no loop: the overhead alone"
        );
    }

    #[test]
    fn instructions_just_inside_and_just_outside() {
        let allowed = loop_instructions(3, 1_000_000, 20_000).unwrap();
        assert_eq!(
            allowed,
            Interval {
                min: 3_000_000,
                max: 3_080_000
            }
        );
        assert_eq!(
            retired_instructions_within(allowed, 3_000_000),
            Ok(3_000_000)
        );
        assert_eq!(
            retired_instructions_within(allowed, 3_080_000),
            Ok(3_080_000)
        );
        let below = retired_instructions_within(allowed, 2_999_999).unwrap_err();
        assert_eq!(
            below,
            BoundsError::OutOfBounds {
                quantity: Quantity::RetiredInstructions,
                measured: 2_999_999,
                allowed
            }
        );
        assert_eq!(
            below.to_string(),
            "retired instructions: 2999999 measured, a real run allows 3000000..=3080000 \
             (fewer than the loop's own instructions: the counter missed some, or did not count the whole loop)"
        );
        let above = retired_instructions_within(allowed, 3_080_001).unwrap_err();
        assert!(
            above.to_string().contains("3080001 measured") && above.to_string().contains("2 %"),
            "{above}"
        );
        assert!(retired_instructions_within(allowed, 0).is_err());
    }

    #[test]
    fn impossible_intervals_are_refused() {
        assert_eq!(
            loop_instructions(u64::MAX, 2, 0),
            Err(BoundsError::Overflow)
        );
        assert_eq!(
            loop_instructions(u64::MAX / 2, 2, u64::MAX / 2),
            Err(BoundsError::Overflow),
            "the slack or the overhead overflows"
        );
        let empty = Interval { min: 5, max: 4 };
        assert_eq!(
            retired_instructions_within(empty, 4),
            Err(BoundsError::Empty(empty))
        );
        assert_eq!(
            BoundsError::Empty(empty).to_string(),
            "empty interval 5..=4: its minimum is above its maximum"
        );
    }

    #[test]
    fn cycles_just_inside_and_just_outside() {
        // 1 000 000 iterations of a one-cycle chain over 400 000 TSC ticks:
        // 1 000 000..=3 200 000 core cycles.
        assert_eq!(
            core_cycles_interval(400_000, 1_000_000),
            Ok(Interval {
                min: 1_000_000,
                max: 3_200_000
            })
        );
        assert!(cycles_against_tsc(1_000_000, 400_000, 1_000_000).is_ok());
        assert!(cycles_against_tsc(3_200_000, 400_000, 1_000_000).is_ok());
        let below = cycles_against_tsc(999_999, 400_000, 1_000_000).unwrap_err();
        assert!(
            below.to_string().starts_with(
                "core cycles: 999999 measured, a real run allows 1000000..=3200000 (fewer cycles"
            ),
            "{below}"
        );
        let above = cycles_against_tsc(3_200_001, 400_000, 1_000_000).unwrap_err();
        assert!(
            above
                .to_string()
                .contains("more than 8 core cycles per TSC tick"),
            "{above}"
        );
    }

    #[test]
    fn a_slow_core_or_a_descheduled_guest_is_not_refused() {
        // The core at a tenth of the TSC's frequency, or a virtual CPU that
        // ran a tenth of the window: still plausible, the work's minimum met.
        assert!(cycles_against_tsc(1_000_000, 10_000_000, 1_000_000).is_ok());
        // A reference-clock rate (1/100 of the core's) misses the minimum.
        assert!(cycles_against_tsc(10_000, 1_000_000, 1_000_000).is_err());
    }

    #[test]
    fn the_window_must_hold_the_work() {
        assert_eq!(cycles_against_tsc(5, 0, 1), Err(BoundsError::NoTscTicks));
        assert_eq!(
            core_cycles_interval(100, 801),
            Err(BoundsError::Empty(Interval { min: 801, max: 800 })),
            "801 cycles cannot fit in 100 ticks"
        );
        assert_eq!(
            core_cycles_interval(u64::MAX, 1).map(|i| i.max),
            Ok(u64::MAX),
            "saturates"
        );
    }
}

//! The work the real-PMU cases count: a loop whose retired instructions and
//! least core cycles follow from the manuals' definitions, with interrupts
//! off ([`counted_loop`]) or open ([`sampled_loop`]), and the TSC read in
//! order with the code around it ([`fenced_rdtsc`]).
//!
//! Each iteration is three instructions, `DEC`, `LEA`, `JNZ`:
//!
//! * **Retired instructions**: every instruction of every iteration
//!   retires once, and the "Instructions Retired" event (C0H/00H, fixed
//!   counter 0's INST_RETIRED.ANY) counts each instruction once, at its
//!   retirement (SDM Vol. 3B, "Pre-defined Architectural Performance
//!   Events"; AMD's "Retired Instructions", PMCx0C0, APM Vol. 2 "Core
//!   Performance Monitor Counters", likewise). The loop has no string or
//!   repeated instruction (which a counter may count once or per
//!   iteration) and no macro-fusion pair: `LEA` sits between `DEC` and the
//!   `JNZ` that tests DEC's flags (LEA writes none), so no part fuses them
//!   into one (fusion needs the two to be adjacent), and no question of
//!   how a fused pair counts arises. So [`LOOP_INSTRUCTIONS`] per iteration,
//!   exactly.
//! * **Core cycles**: each `LEA acc, [acc + n]` needs the previous one's
//!   result, a chain of one instruction per iteration; no instruction
//!   completes in less than a core cycle, and a two-register LEA is no
//!   instruction any part eliminates at rename (as some remove moves or
//!   small immediate additions). So an iteration takes at least one
//!   unhalted core cycle, at whatever frequency, on any core: the
//!   kvm-unit-tests lower bound `1*N` for its loop.

use core::ops::RangeInclusive;

/// Instructions per iteration of [`counted_loop`] and [`sampled_loop`]:
/// DEC, LEA, JNZ (see the [module documentation](self)).
pub const LOOP_INSTRUCTIONS: u64 = 3;

/// `iterations` iterations of the loop (at least one), interrupts as they
/// are (off, in a case).
#[inline(never)]
pub fn counted_loop(iterations: u64) {
    // SAFETY: register-only arithmetic and a backward branch that ends when
    // the count reaches zero (it starts above zero).
    unsafe {
        core::arch::asm!(
            "2:",
            "dec {n}",
            "lea {acc}, [{acc} + {n}]",
            "jnz 2b",
            n = inout(reg) iterations.max(1) => _,
            acc = inout(reg) 0u64 => _,
            options(nomem, nostack),
        );
    }
}

/// [`counted_loop`] with interrupts enabled around it: returns the
/// addresses of the loop's first instruction and of the CLI after it. An
/// interrupt taken while the loop runs interrupts an instruction in that
/// range (inclusive: one taken just before the CLI has its address); none
/// can be taken outside it.
#[inline(never)]
pub fn sampled_loop(iterations: u64) -> RangeInclusive<u64> {
    let (start, end): (u64, u64);
    // SAFETY: the loop of `counted_loop`, with interrupts enabled around
    // it and disabled again after it; the interrupt entry stubs preserve
    // every register.
    unsafe {
        core::arch::asm!(
            "lea {start}, [rip + 2f]",
            "lea {end}, [rip + 3f]",
            "sti",
            "2:",
            "dec {n}",
            "lea {acc}, [{acc} + {n}]",
            "jnz 2b",
            "3:",
            "cli",
            start = out(reg) start,
            end = out(reg) end,
            n = inout(reg) iterations.max(1) => _,
            acc = inout(reg) 0u64 => _,
        );
    }
    start..=end
}

/// RDTSC, ordered with the code around it (LFENCE before and after: SDM
/// Vol. 2B, RDTSC, "If software requires RDTSC to be executed only after
/// all previous instructions have executed ...").
pub fn fenced_rdtsc() -> u64 {
    let (low, high): (u32, u32);
    // SAFETY: LFENCE and RDTSC only order execution and read the TSC into
    // EDX:EAX (CPL 0; CR4.TSD is clear).
    unsafe {
        core::arch::asm!("lfence", "rdtsc", "lfence", out("eax") low, out("edx") high, options(nostack));
    }
    u64::from(high) << 32 | u64::from(low)
}

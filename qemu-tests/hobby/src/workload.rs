//! A workload with a known profile: three functions whose costs are exactly
//! in ratio 1:2:4, for checking that a sampling profiler attributes time
//! correctly.
//!
//! [`work_1x`], [`work_2x`] and [`work_4x`] are written in assembly, from
//! one macro, so their code is byte-for-byte the same except for the
//! iteration count: a frame (`push rbp; mov rbp, rsp`, so that a PMI's call
//! chain names their caller: [`crate::stacks`]) and two more instructions,
//! then a loop of the same six register-only instructions run
//! [`UNIT_ITERATIONS`] times 1, 2 or 4 (its one branch, `jnz`, at an
//! exported label: [`branches`]), then `pop rbp; ret`. The same functions
//! with [`STEP_UNIT_ITERATIONS`] per unit ([`step_1x`], [`step_2x`],
//! [`step_4x`], [`run_stepped`]) are small enough to single-step. Each function starts on a 64-byte boundary with its loop head on a
//! 16-byte one, so under TCG every iteration is the same translated block
//! and costs the same; on hardware the loops are the same dependency chain.
//! Each is bracketed by exported labels (`work_1x` .. `work_1x_end`), so
//! [`SYMBOLS`] knows each function's exact address range. [`run`] calls the
//! three in turn.
//!
//! Under QEMU 7.2 TCG an iteration takes about 3 ns on the project machine,
//! one unit ([`UNIT_ITERATIONS`] iterations) 55-75 µs and a round (7 units)
//! 0.35-0.5 ms; 20 calls each of the three took 1.33, 2.60 and 5.33 ms
//! (1 : 1.96 : 4.02). A timer-sampling profile at 10 kHz over 0.7 s (the
//! `timer` kernel, 18 boots, 3900-7000 samples each) gave shares of
//! 0.138-0.148, 0.278-0.292 and 0.568-0.583 (expected 0.143, 0.286, 0.571),
//! within 1.7 standard errors of a binomial proportion every time, with
//! 0.3-1.4 % of the samples outside the three functions (in [`run`]).

use pmu_report::symbols::{LabelRange, SymbolTable};

/// Loop iterations of one cost unit ([`work_1x`] runs one unit).
pub const UNIT_ITERATIONS: u32 = 20_000;

/// Cost units of one round of [`run`]: 1 + 2 + 4.
pub const ROUND_UNITS: u32 = 7;

core::arch::global_asm!(
    r#"
    .macro HOBBY_WORK name, unit, units
    .section .text.hobby_workload, "ax"
    .balign 64
    .global \name
    .type \name, @function
\name:
    push rbp
    mov rbp, rsp
    mov ecx, \unit * \units
    mov eax, 1
    .balign 16
1:
    add rax, rcx
    xor rdx, rax
    rol rax, 7
    lea rdx, [rdx + rdx * 2]
    dec ecx
    .global \name\()_branch
\name\()_branch:
    jnz 1b
    pop rbp
    ret
    .global \name\()_end
\name\()_end:
    .size \name, \name\()_end - \name
    .endm

    HOBBY_WORK work_1x, {unit}, 1
    HOBBY_WORK work_2x, {unit}, 2
    HOBBY_WORK work_4x, {unit}, 4
    HOBBY_WORK step_1x, {step_unit}, 1
    HOBBY_WORK step_2x, {step_unit}, 2
    HOBBY_WORK step_4x, {step_unit}, 4
    .purgem HOBBY_WORK
    .text
"#,
    unit = const UNIT_ITERATIONS,
    step_unit = const STEP_UNIT_ITERATIONS,
);

unsafe extern "C" {
    /// One cost unit of work: [`UNIT_ITERATIONS`] loop iterations. Clobbers
    /// only caller-saved registers (RAX, RCX, RDX, flags), so safe to call.
    pub safe fn work_1x();
    /// Two cost units: the loop of [`work_1x`], twice as many iterations.
    pub safe fn work_2x();
    /// Four cost units: the loop of [`work_1x`], four times as many
    /// iterations.
    pub safe fn work_4x();
    fn work_1x_end();
    fn work_2x_end();
    fn work_4x_end();
    /// One cost unit of [`run_stepped`]'s work: the loop of [`work_1x`],
    /// [`STEP_UNIT_ITERATIONS`] iterations.
    pub safe fn step_1x();
    /// Two cost units of [`run_stepped`]'s work.
    pub safe fn step_2x();
    /// Four cost units of [`run_stepped`]'s work.
    pub safe fn step_4x();
    fn step_1x_end();
    fn step_2x_end();
    fn step_4x_end();
    fn work_1x_branch();
    fn work_2x_branch();
    fn work_4x_branch();
    fn step_1x_branch();
    fn step_2x_branch();
    fn step_4x_branch();
}

/// Loop iterations of one cost unit of the stepped workload
/// ([`run_stepped`]): small enough to single-step ([`crate::step`]) a
/// round (7 units, 6 instructions an iteration: about 4,200 steps) in a
/// few milliseconds.
pub const STEP_UNIT_ITERATIONS: u32 = 100;

/// The stepped workload's functions' address ranges, as [`SYMBOLS`]'s
/// (index 0: `step_1x`, 1: `step_2x`, 2: `step_4x`).
pub static STEP_SYMBOLS: SymbolTable<3> = SymbolTable::new([
    LabelRange {
        name: "step_1x",
        start: step_1x,
        end: step_1x_end,
    },
    LabelRange {
        name: "step_2x",
        start: step_2x,
        end: step_2x_end,
    },
    LabelRange {
        name: "step_4x",
        start: step_4x,
        end: step_4x_end,
    },
]);

/// The address of each workload function's loop branch (its one `jnz`, the
/// branch of every iteration): [`SYMBOLS`]'s order, then
/// [`STEP_SYMBOLS`]'s.
pub fn branches() -> [u64; 6] {
    let labels: [unsafe extern "C" fn(); 6] = [
        work_1x_branch,
        work_2x_branch,
        work_4x_branch,
        step_1x_branch,
        step_2x_branch,
        step_4x_branch,
    ];
    labels.map(|l| l as usize as u64)
}

/// One round of the stepped workload: [`step_1x`], [`step_2x`],
/// [`step_4x`], costs 1:2:4 as [`run`]'s (an `extern "C"` function, for
/// [`crate::step::trace`]).
pub extern "C" fn run_stepped() {
    step_1x();
    step_2x();
    step_4x();
}

/// The three workload functions' address ranges, in cost order (index 0:
/// `work_1x`, 1: `work_2x`, 2: `work_4x`).
pub static SYMBOLS: SymbolTable<3> = SymbolTable::new([
    LabelRange {
        name: "work_1x",
        start: work_1x,
        end: work_1x_end,
    },
    LabelRange {
        name: "work_2x",
        start: work_2x,
        end: work_2x_end,
    },
    LabelRange {
        name: "work_4x",
        start: work_4x,
        end: work_4x_end,
    },
]);

/// The expected share of each [`SYMBOLS`] entry in a profile of [`run`]:
/// 1/7, 2/7, 4/7 (ignoring the few instructions of `run` itself).
pub const EXPECTED_SHARES: [f64; 3] = [1.0 / 7.0, 2.0 / 7.0, 4.0 / 7.0];

/// Runs `rounds` rounds of [`work_1x`], [`work_2x`], [`work_4x`].
pub fn run(rounds: u32) {
    for _ in 0..rounds {
        work_1x();
        work_2x();
        work_4x();
    }
}

//! The harness checks itself: these cases fail on purpose, and the host
//! runner requires each to fail with the stated reason, so a harness that
//! stopped noticing failures would fail the test run.
//!
//! tcg-only: its RDPMC must raise TCG's #UD (a real CPU raises #GP); the harness code it checks is the same under KVM
//! expect-fail: unguarded_rdpmc: unexpected #UD
//! expect-fail: panicking_case: panicked
//! expect-fail: failing_check: left 2, right 3
#![no_std]
#![no_main]

use hobby::boot::BootInfo;
use hobby::test::Outcome;
use hobby::{case, check_eq};
use pmu::access::X86Msr;

hobby::entry_point!(main);

fn main(_: &'static BootInfo) -> ! {
    hobby::test::run(
        "selftest",
        &[
            case!(unguarded_rdpmc),
            case!(panicking_case),
            case!(failing_check),
            case!(runs_after_failures),
        ],
    )
}

/// RDPMC raises #UD under QEMU's TCG (which implements no RDPMC); nothing
/// catches it but the runner.
fn unguarded_rdpmc() -> Outcome {
    // SAFETY: CPL 0, this CPU.
    let mut msr = unsafe { X86Msr::new() };
    // SAFETY: deliberately breaks the "counter exists" promise; the runner
    // catches the #UD, and RDPMC has no other effect.
    let _ = unsafe { msr.rdpmc(0) };
    Ok(())
}

fn panicking_case() -> Outcome {
    panic!("deliberate panic");
}

fn failing_check() -> Outcome {
    check_eq!(1 + 1, 3);
    Ok(())
}

/// After three failures the runner is still running cases.
fn runs_after_failures() -> Outcome {
    check_eq!(u32::MAX.count_ones(), 32);
    Ok(())
}

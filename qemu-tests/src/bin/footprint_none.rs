//! The footprint baseline: the hobby kernel without the driver, for
//! `cargo size-report` to subtract (see `qemu-tests/src/footprint.rs`).
#![no_std]
#![no_main]

use hobby::boot::BootInfo;
use hobby::exit::{ExitCode, exit_qemu};
use hobby::println;

hobby::entry_point!(main);

fn main(_: &'static BootInfo) -> ! {
    println!("footprint_none: no driver linked");
    exit_qemu(ExitCode::Success)
}

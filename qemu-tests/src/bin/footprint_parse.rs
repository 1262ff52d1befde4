//! The same counting-only kernel with its event string parsed at run time
//! (a string the compiler cannot see, as if read from a command line):
//! `cargo size-report` reports the difference from `footprint_const` as the
//! parser's cost.
#![no_std]
#![no_main]

use hobby::boot::BootInfo;

#[path = "../footprint.rs"]
mod footprint;

hobby::entry_point!(main);

fn main(_: &'static BootInfo) -> ! {
    footprint::count("footprint_parse", || {
        core::hint::black_box("instr_retired:NBOGUSNTAG:k")
            .parse()
            .ok()
    })
}

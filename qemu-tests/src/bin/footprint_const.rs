//! A counting-only kernel whose event is named at compile time
//! (`pmu::netburst_event!`): it carries neither the event-string parser nor
//! the event catalog. Measured by `cargo size-report`.
#![no_std]
#![no_main]

use hobby::boot::BootInfo;

#[path = "../footprint.rs"]
mod footprint;

hobby::entry_point!(main);

fn main(_: &'static BootInfo) -> ! {
    footprint::count("footprint_const", || {
        Some(pmu::netburst_event!("instr_retired:NBOGUSNTAG:k"))
    })
}

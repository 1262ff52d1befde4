//! Leaving QEMU with a verdict, through the `isa-debug-exit` device at I/O
//! port F4H. QEMU exits with status `(value << 1) | 1`; a triple fault with
//! `-no-reboot` exits 0, so only the exact success status counts as success.

use x86_64::instructions::port::Port;

/// The verdict a kernel run ends with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum ExitCode {
    /// Every case passed: QEMU exits with status 33.
    Success = 0x10,
    /// Something failed: QEMU exits with status 35.
    Failure = 0x11,
}

/// Ends the QEMU run. Without the exit device (a kernel booted by hand)
/// the CPU halts instead.
pub fn exit_qemu(code: ExitCode) -> ! {
    // SAFETY: port F4H is QEMU's isa-debug-exit device; on a machine without
    // it the write goes nowhere.
    unsafe { Port::new(0xF4).write(code as u32) };
    loop {
        x86_64::instructions::interrupts::disable();
        x86_64::instructions::hlt();
    }
}

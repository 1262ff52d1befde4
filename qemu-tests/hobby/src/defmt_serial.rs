//! defmt frames on the second serial port (COM2, a 16550 UART at I/O port
//! 2F8H), beside the text console on COM1, for kernels that log with
//! `defmt` (feature `defmt`). QEMU writes COM2 to a file with a second
//! `-serial` option; a host tool decodes the frames with the kernel's ELF
//! (`pmu-defmt-decode`, on the `defmt-decoder` library).
//!
//! [`defmt_global_logger!`](crate::defmt_global_logger) makes this the
//! kernel's defmt logger. The kernel links with defmt's linker script too
//! (`cargo:rustc-link-arg-bins=-Tdefmt.x` in its build script; the defmt
//! crate puts the script on the linker's search path).
//!
//! A frame is written with interrupts disabled, from `acquire` to
//! `release`, so a maskable interrupt cannot interleave its own frame. An
//! NMI (or an exception handler) that logs while it interrupted a frame is
//! refused with a panic rather than corrupting the stream; one that logs
//! while no frame is being written succeeds.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

use x86_64::instructions::interrupts;

use crate::serial::Uart;

const COM2: Uart = Uart(0x2F8);

/// The encoder and the interrupt state to restore, owned by whoever set
/// `TAKEN`.
struct Frame {
    encoder: defmt::Encoder,
    interrupts_were_enabled: bool,
}

struct FrameCell(UnsafeCell<Frame>);

// SAFETY: the frame is only touched between `acquire` and `release`, and
// `acquire` gets it only by swapping `TAKEN` from clear to set (an atomic
// swap, so of two contenders, on this CPU or another, one gets it and the
// other is refused); `release` clears it last. One user at a time.
unsafe impl Sync for FrameCell {}

static FRAME: FrameCell = FrameCell(UnsafeCell::new(Frame {
    encoder: defmt::Encoder::new(),
    interrupts_were_enabled: false,
}));
static TAKEN: AtomicBool = AtomicBool::new(false);
static UART_READY: AtomicBool = AtomicBool::new(false);

fn put(bytes: &[u8]) {
    COM2.put_all(bytes);
}

/// Starts a frame: what the global logger's `acquire` calls.
#[doc(hidden)]
pub fn acquire() {
    let were_enabled = interrupts::are_enabled();
    interrupts::disable();
    if TAKEN.swap(true, Ordering::Acquire) {
        panic!("defmt: a frame was started inside another (from an interrupt handler?)");
    }
    if !UART_READY.swap(true, Ordering::Relaxed) {
        COM2.init();
    }
    // SAFETY: `TAKEN` was clear and is now set by us (see `FrameCell`).
    let frame = unsafe { &mut *FRAME.0.get() };
    frame.interrupts_were_enabled = were_enabled;
    frame.encoder.start_frame(put);
}

/// Writes encoded bytes of the current frame.
///
/// # Safety
///
/// Only between [`acquire`] and [`release`] (defmt's `Logger` contract).
#[doc(hidden)]
pub unsafe fn write(bytes: &[u8]) {
    // SAFETY: the caller holds the frame (between acquire and release).
    let frame = unsafe { &mut *FRAME.0.get() };
    frame.encoder.write(bytes, put);
}

/// Ends the frame and restores the interrupt flag.
///
/// # Safety
///
/// Only after [`acquire`], once (defmt's `Logger` contract).
#[doc(hidden)]
pub unsafe fn release() {
    // SAFETY: the caller holds the frame.
    let frame = unsafe { &mut *FRAME.0.get() };
    frame.encoder.end_frame(put);
    let restore = frame.interrupts_were_enabled;
    TAKEN.store(false, Ordering::Release);
    if restore {
        interrupts::enable();
    }
}

/// Makes COM2 this kernel's defmt global logger (see
/// [`defmt_serial`](crate::defmt_serial)). Use it once, in the kernel crate.
#[macro_export]
macro_rules! defmt_global_logger {
    () => {
        #[::defmt::global_logger]
        struct HobbyDefmtLogger;

        // SAFETY: acquire/release bracket every frame with interrupts off
        // and refuse a nested frame, as `defmt::Logger` requires.
        unsafe impl ::defmt::Logger for HobbyDefmtLogger {
            fn acquire() {
                $crate::defmt_serial::acquire();
            }
            unsafe fn flush() {}
            unsafe fn release() {
                // SAFETY: defmt calls release once after acquire.
                unsafe { $crate::defmt_serial::release() }
            }
            unsafe fn write(bytes: &[u8]) {
                // SAFETY: defmt writes only between acquire and release.
                unsafe { $crate::defmt_serial::write(bytes) }
            }
        }
    };
}

//! The COM1 serial console (a 16550 UART at I/O port 3F8H), where QEMU's
//! `-serial stdio` picks up everything the kernel prints; the same UART
//! code drives COM2 (2F8H) for binary output such as defmt frames.

use core::fmt::{self, Write};

use x86_64::instructions::interrupts;
use x86_64::instructions::port::Port;

const COM1: u16 = 0x3F8;

/// A 16550 UART at I/O base `.0` (COM1 3F8H, COM2 2F8H).
pub(crate) struct Uart(pub(crate) u16);

impl Uart {
    fn out(&self, offset: u16, value: u8) {
        // SAFETY: a UART's registers are the 8 I/O ports from its base;
        // writing them only configures or feeds the UART.
        unsafe { Port::new(self.0 + offset).write(value) }
    }

    fn line_status(&self) -> u8 {
        // SAFETY: reading the line-status register has no side effect.
        unsafe { Port::new(self.0 + 5).read() }
    }

    /// Sends one byte, waiting for room in the transmitter.
    pub(crate) fn put(&self, byte: u8) {
        while self.line_status() & 0x20 == 0 {
            core::hint::spin_loop();
        }
        self.out(0, byte);
    }

    /// Programs the UART for 115200 baud, 8N1, FIFOs on, no interrupts.
    pub(crate) fn init(&self) {
        self.out(1, 0x00); // no UART interrupts
        self.out(3, 0x80); // DLAB: divisor follows
        self.out(0, 0x01); // divisor 1 = 115200 baud
        self.out(1, 0x00);
        self.out(3, 0x03); // 8 data bits, no parity, 1 stop bit
        self.out(2, 0xC7); // FIFOs on and cleared
        self.out(4, 0x0B); // DTR, RTS, OUT2
    }
}

impl Write for Uart {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for byte in s.bytes() {
            if byte == b'\n' {
                self.put(b'\r');
            }
            self.put(byte);
        }
        Ok(())
    }
}

static CONSOLE: spin::Mutex<Uart> = spin::Mutex::new(Uart(COM1));

/// Programs COM1 for 115200 baud, 8N1, FIFOs on, no interrupts.
pub fn init() {
    Uart(COM1).init();
}

/// Prints to the serial console with interrupts disabled, so an interrupt
/// handler that prints cannot deadlock on the console lock.
#[doc(hidden)]
pub fn _print(args: fmt::Arguments<'_>) {
    interrupts::without_interrupts(|| {
        // A formatting error has nowhere better to go than the console.
        let _ = CONSOLE.lock().write_fmt(args);
    });
}

/// Prints from a context that may have interrupted a holder of the console
/// lock (an exception or panic inside `print!`): takes the lock if it is
/// free, and otherwise writes anyway rather than deadlock.
pub(crate) fn emergency_print(args: fmt::Arguments<'_>) {
    match CONSOLE.try_lock() {
        Some(mut uart) => {
            let _ = uart.write_fmt(args);
        }
        None => {
            let _ = Uart(COM1).write_fmt(args);
        }
    }
}

/// Prints to the serial console.
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => ($crate::serial::_print(format_args!($($arg)*)));
}

/// Prints a line to the serial console.
#[macro_export]
macro_rules! println {
    () => ($crate::print!("\n"));
    ($($arg:tt)*) => ($crate::serial::_print(format_args!("{}\n", format_args!($($arg)*))));
}

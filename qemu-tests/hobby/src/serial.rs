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

    /// Sends `bytes`, up to [`FIFO`] at a time: with the transmitter
    /// holding register empty (LSR bit 5; with FIFOs on, the transmit FIFO
    /// empty) the 16550A takes 16 bytes without another look, which
    /// `REP OUTSB` writes with one instruction. Under a hypervisor every
    /// port access is a VM exit (50-150 µs on the project machine's nested
    /// KVM), and a hypervisor hands a string output to its device model in
    /// one exit: about one exit per 16 bytes instead of two per byte.
    pub(crate) fn put_all(&self, bytes: &[u8]) {
        for chunk in bytes.chunks(FIFO) {
            while self.line_status() & 0x20 == 0 {
                core::hint::spin_loop();
            }
            // SAFETY: writes `chunk.len()` bytes from `chunk` to the data
            // port (the UART's base), which only feeds the transmitter;
            // RSI, RCX and DX are declared, the direction flag is clear
            // (the ABI's state between functions).
            unsafe {
                core::arch::asm!(
                    "rep outsb",
                    inout("rsi") chunk.as_ptr() => _,
                    inout("rcx") chunk.len() => _,
                    in("dx") self.0,
                    options(nostack, preserves_flags, readonly),
                );
            }
        }
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

/// The 16550A's transmit FIFO, in bytes.
const FIFO: usize = 16;

impl Write for Uart {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // Each line break as CR LF, through a FIFO-sized buffer.
        let mut buffer = [0u8; FIFO];
        let mut len = 0;
        for byte in s.bytes() {
            if len + 2 > FIFO {
                self.put_all(&buffer[..len]);
                len = 0;
            }
            if byte == b'\n' {
                buffer[len] = b'\r';
                len += 1;
            }
            buffer[len] = byte;
            len += 1;
        }
        self.put_all(&buffer[..len]);
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

//! The VGA text screen: 80 columns by 25 rows of character and attribute
//! bytes at B8000H, the mode a PC BIOS leaves and the one GRUB sets before
//! it enters a multiboot2 kernel that asks for no framebuffer
//! ([`crate::multiboot2`]). A kernel that reports to a user who may have
//! only a screen (a machine booted from a USB stick) writes its lines here
//! as well as on the serial console.
//!
//! A line longer than the screen is wide breaks between words, its
//! continuation indented by [`INDENT`] columns. The screen is written from
//! a copy kept in memory: a line writes only its
//! own cells, and the screen is redrawn from the copy only when it scrolls.
//! Under a hypervisor every access to the VGA memory is emulated (a VM exit
//! under KVM), so a report of a few lines costs a few hundred exits, not
//! thousands. A kernel that never calls this module touches no VGA memory
//! or port.
//!
//! Under UEFI without a compatibility module there is no text mode: the
//! page at B8000H is then ordinary memory (which nothing in these kernels
//! uses), the writes land there harmlessly, and only the serial console
//! shows the lines.

use core::fmt;

use crate::text::Text;
use x86_64::instructions::interrupts;
use x86_64::instructions::port::Port;

/// The text buffer's physical address (identity-mapped by the boot code).
const TEXT: usize = 0xB8000;
/// Columns of the screen.
pub const COLUMNS: usize = 80;
/// Rows of the screen.
pub const ROWS: usize = 25;
/// Light grey on black: the BIOS's attribute for text.
const ATTRIBUTE: u16 = 0x07 << 8;
/// Columns a broken line's continuation is indented by.
pub const INDENT: usize = 2;
/// The longest text one [`write`] lays out; the rest is cut.
const LONGEST: usize = 1024;

/// The screen as last written: its characters, and where the next one goes.
struct Screen {
    cells: [[u8; COLUMNS]; ROWS],
    row: usize,
    column: usize,
}

static SCREEN: spin::Mutex<Screen> = spin::Mutex::new(Screen {
    cells: [[b' '; COLUMNS]; ROWS],
    row: 0,
    column: 0,
});

impl Screen {
    /// Writes cell (`row`, `column`) of the VGA memory from the copy.
    fn show(&self, row: usize, column: usize) {
        let cell = (TEXT as *mut u16).wrapping_add(row * COLUMNS + column);
        // SAFETY: `row` < ROWS and `column` < COLUMNS, so the cell lies in
        // the 4000-byte text buffer at B8000H, identity-mapped by the boot
        // code, which no Rust object occupies: on a PC it is the VGA's
        // text memory, elsewhere unused memory below 1 MiB.
        unsafe { cell.write_volatile(ATTRIBUTE | u16::from(self.cells[row][column])) };
    }

    /// Every cell from the copy.
    fn redraw(&self) {
        for row in 0..ROWS {
            for column in 0..COLUMNS {
                self.show(row, column);
            }
        }
    }

    /// The next line: the following row, or the last one after every row
    /// moved up by one (the screen redrawn).
    fn new_line(&mut self) {
        self.column = 0;
        if self.row + 1 < ROWS {
            self.row += 1;
            return;
        }
        self.cells.copy_within(1.., 0);
        self.cells[ROWS - 1] = [b' '; COLUMNS];
        self.redraw();
    }

    /// One character (anything but printable ASCII shown as `?`),
    /// wrapping at the last column.
    fn put(&mut self, byte: u8) {
        if self.column == COLUMNS {
            self.new_line();
        }
        let shown = if byte == b' ' || byte.is_ascii_graphic() {
            byte
        } else {
            b'?'
        };
        self.cells[self.row][self.column] = shown;
        self.show(self.row, self.column);
        self.column += 1;
    }
}

impl Screen {
    /// Lays out `text`: its line breaks kept, each line broken between
    /// words where it would pass the last column (a word longer than a row
    /// broken where it must), its continuation indented by [`INDENT`].
    fn lay_out(&mut self, text: &str) {
        for (i, line) in text.split('\n').enumerate() {
            if i > 0 {
                self.new_line();
            }
            for (j, word) in line.split(' ').enumerate() {
                let space = usize::from(j > 0);
                if self.column > INDENT && self.column + space + word.len() > COLUMNS {
                    self.new_line();
                    (0..INDENT).for_each(|_| self.put(b' '));
                } else if space == 1 {
                    self.put(b' ');
                }
                word.bytes().for_each(|b| self.put(b));
            }
        }
    }
}

/// Clears the screen, puts the next line at the top and hides the
/// hardware cursor (CRT controller register 0AH, bit 5: cursor off).
pub fn clear() {
    interrupts::without_interrupts(|| {
        let mut screen = SCREEN.lock();
        screen.cells = [[b' '; COLUMNS]; ROWS];
        screen.row = 0;
        screen.column = 0;
        screen.redraw();
    });
    // SAFETY: 3D4H/3D5H are the colour VGA's CRT controller index and
    // data ports; register 0AH only shapes the cursor. On a machine
    // without VGA the writes go nowhere.
    unsafe {
        Port::new(0x3D4).write(0x0Au8);
        Port::new(0x3D5).write(0x20u8);
    }
}

/// Writes `args` on the screen, with interrupts disabled (as the serial
/// console does, so a handler that writes cannot deadlock on the screen).
pub fn write(args: fmt::Arguments<'_>) {
    let mut text = Text::<LONGEST>::new();
    text.set(args);
    interrupts::without_interrupts(|| SCREEN.lock().lay_out(text.as_str()));
}

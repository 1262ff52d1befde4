//! A text of at most `N` bytes in a fixed buffer, for code that has no
//! allocator: a failure's message ([`crate::test`]), a line laid out on
//! the screen ([`crate::vga`]). Writing past the end cuts the text (at a
//! character boundary when it is read back).

use core::fmt;

/// Up to `N` bytes of UTF-8 text.
pub struct Text<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> Text<N> {
    /// The empty text.
    pub const fn new() -> Self {
        Text {
            bytes: [0; N],
            len: 0,
        }
    }

    /// Empties the text.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// The text becomes `args`, formatted (cut at `N` bytes).
    pub fn set(&mut self, args: fmt::Arguments<'_>) {
        self.len = 0;
        // Running out of room is the only error, and it just cuts the text.
        let _ = fmt::write(self, args);
    }

    /// Whether the text is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The text (up to the last whole character, if it was cut inside
    /// one).
    pub fn as_str(&self) -> &str {
        match core::str::from_utf8(&self.bytes[..self.len]) {
            Ok(text) => text,
            Err(e) => core::str::from_utf8(&self.bytes[..e.valid_up_to()]).unwrap_or(""),
        }
    }
}

impl<const N: usize> Default for Text<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> fmt::Write for Text<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let n = s.len().min(N - self.len);
        self.bytes[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        if n < s.len() { Err(fmt::Error) } else { Ok(()) }
    }
}

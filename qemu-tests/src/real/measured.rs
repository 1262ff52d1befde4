//! What the last real-PMU case measured and the bound it held the
//! measurement to, kept for a report ([`last`]), as text: a case records
//! its measurement ([`record`]) before it judges it, so that a failed case
//! reports what it saw as well as a passed one.

use core::fmt::{self, Write};

use hobby::println;

/// The longest text kept of each part; longer text is cut.
const TEXT: usize = 160;

/// A fixed-size text (no allocator).
struct Text {
    bytes: [u8; TEXT],
    len: usize,
}

impl Text {
    const EMPTY: Text = Text {
        bytes: [0; TEXT],
        len: 0,
    };

    fn set(&mut self, args: fmt::Arguments<'_>) {
        self.len = 0;
        // Overflow is the only error, and it just cuts the text.
        let _ = self.write_fmt(args);
    }

    fn as_str(&self) -> &str {
        match core::str::from_utf8(&self.bytes[..self.len]) {
            Ok(s) => s,
            Err(e) => core::str::from_utf8(&self.bytes[..e.valid_up_to()]).unwrap_or(""),
        }
    }
}

impl Write for Text {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let n = s.len().min(TEXT - self.len);
        self.bytes[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        if n < s.len() { Err(fmt::Error) } else { Ok(()) }
    }
}

/// The measurement and its bound; both empty when the last case measured
/// nothing (it was skipped, or failed before it measured).
struct Measurement {
    value: Text,
    bound: Text,
}

static LAST: spin::Mutex<Measurement> = spin::Mutex::new(Measurement {
    value: Text::EMPTY,
    bound: Text::EMPTY,
});

/// Forgets the last measurement: a case calls it first.
pub fn clear() {
    let mut last = LAST.lock();
    last.value.len = 0;
    last.bound.len = 0;
}

/// Records what a case measured (`value`, with its unit and where it was
/// counted) and the bound it holds it to (`bound`), and prints both on the
/// console.
pub fn record(value: fmt::Arguments<'_>, bound: fmt::Arguments<'_>) {
    let mut last = LAST.lock();
    last.value.set(value);
    last.bound.set(bound);
    println!(
        "real: measured {}; bound {}",
        last.value.as_str(),
        last.bound.as_str()
    );
}

/// Calls `f` with the last measurement and its bound, if the last case
/// recorded one.
pub fn last(f: impl FnOnce(&str, &str)) {
    let last = LAST.lock();
    if last.value.len > 0 {
        f(last.value.as_str(), last.bound.as_str());
    }
}

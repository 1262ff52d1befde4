//! What the last real-PMU case measured and the bound it held the
//! measurement to, kept for a report ([`last`]), as text: a case records
//! its measurement ([`record`]) before it judges it, so that a failed case
//! reports what it saw as well as a passed one.

use core::fmt;

use hobby::println;
use hobby::text::Text;

/// The longest text kept of each part; longer text is cut.
const TEXT: usize = 160;

/// The measurement and its bound; both empty when the last case measured
/// nothing (it was skipped, or failed before it measured).
struct Measurement {
    value: Text<TEXT>,
    bound: Text<TEXT>,
}

static LAST: spin::Mutex<Measurement> = spin::Mutex::new(Measurement {
    value: Text::new(),
    bound: Text::new(),
});

/// Forgets the last measurement: a case calls it first.
pub fn clear() {
    let mut last = LAST.lock();
    last.value.clear();
    last.bound.clear();
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
    if !last.value.is_empty() {
        f(last.value.as_str(), last.bound.as_str());
    }
}

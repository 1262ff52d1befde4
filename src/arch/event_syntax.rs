//! What the event-string parsers of the architectures with `perf`'s syntax
//! (the architectural PMU's and AMD's `EventSpec`) share: the offending
//! term an error keeps, the nearest name to a misspelt one, numbers,
//! `perf`'s PMU syntax (`cpu/.../mods`) and the modifier letters. Each
//! parser keeps its own names, terms, error kinds and messages.

use core::fmt;

/// The longest offending term an error keeps, in bytes.
const TERM_MAX: usize = 24;

/// The offending term of a parse error: its first 24 bytes, cut at a
/// character boundary so that it stays UTF-8.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct Term {
    bytes: [u8; TERM_MAX],
    len: u8,
}

impl Term {
    /// `text`, cut to its first 24 bytes.
    pub(crate) fn new(text: &str) -> Term {
        let mut bytes = [0; TERM_MAX];
        let mut len = text.len().min(TERM_MAX);
        while !text.is_char_boundary(len) {
            len -= 1;
        }
        bytes[..len].copy_from_slice(&text.as_bytes()[..len]);
        Term {
            bytes,
            len: len as u8,
        }
    }

    /// The text kept.
    pub(crate) fn as_str(&self) -> &str {
        let bytes = self.bytes.get(..usize::from(self.len)).unwrap_or(&[]);
        core::str::from_utf8(bytes).unwrap_or("")
    }
}

impl fmt::Debug for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// Optimal-string-alignment distance between `a` and `b` (insertions,
/// deletions, substitutions and transpositions of neighbours, one edit
/// each); `usize::MAX` for a string longer than 32 bytes.
pub(crate) fn distance(a: &[u8], b: &[u8]) -> usize {
    const MAX: usize = 32;
    if a.len() > MAX || b.len() > MAX {
        return usize::MAX;
    }
    // Three rows of the table: i - 2, i - 1 and i.
    let mut rows = [[0usize; MAX + 1]; 3];
    for (j, cell) in rows[1].iter_mut().enumerate().take(b.len() + 1) {
        *cell = j;
    }
    for i in 1..=a.len() {
        let (before, rest) = rows.split_at_mut(2);
        let (two_up, up) = (&before[0], &before[1]);
        let cur = &mut rest[0];
        cur[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (up[j - 1] + cost).min(up[j] + 1).min(cur[j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(two_up[j - 2] + 1);
            }
            cur[j] = best;
        }
        rows.rotate_left(1);
    }
    // After the last rotation the last row computed is the middle one.
    rows[1][b.len()]
}

/// The name of `names` closest to `typed`, when it is within a third of the
/// typed length (at least 1 edit, at most 3).
pub(crate) fn closest(
    typed: &str,
    names: impl Iterator<Item = &'static str>,
) -> Option<&'static str> {
    let limit = (typed.len() / 3).clamp(1, 3);
    names
        .map(|n| (distance(typed.as_bytes(), n.as_bytes()), n))
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, n)| n)
}

/// Why a number was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NumberError {
    /// Not a number (decimal or `0x` hexadecimal).
    Bad,
    /// Too big for its field of this many bits.
    TooBig(u8),
}

/// A number in decimal or `0x` hexadecimal that fits `bits` bits (64: any).
pub(crate) fn number(text: &str, bits: u32) -> Result<u64, NumberError> {
    let (digits, radix) = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (text, 10),
    };
    // Digits only: `from_str_radix` would take a sign too.
    let value = Some(digits)
        .filter(|d| !d.is_empty() && d.bytes().all(|b| char::from(b).is_digit(radix)))
        .and_then(|d| u64::from_str_radix(d, radix).ok())
        .ok_or(NumberError::Bad)?;
    if bits < 64 && value >> bits != 0 {
        return Err(NumberError::TooBig(bits as u8));
    }
    Ok(value)
}

/// `perf`'s raw config `rNNN` (`text` after the `r`, hexadecimal, optionally
/// `0x`-prefixed): `None` when `text` is not one (it may be a name),
/// `Some(Err)` for digits too many for 64 bits.
pub(crate) fn raw_hex(text: &str) -> Option<Result<u64, NumberError>> {
    let hex = text.strip_prefix('r')?;
    let digits = hex
        .strip_prefix("0x")
        .or_else(|| hex.strip_prefix("0X"))
        .unwrap_or(hex);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some(u64::from_str_radix(digits, 16).map_err(|_| NumberError::Bad))
}

/// An event string cut into its event and its modifiers: `event[:mods]`, or
/// in `perf`'s PMU syntax `pmu/event/[mods]` (`[:mods]` also accepted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Parts<'a> {
    /// The event: a name, terms or a raw config.
    pub(crate) event: &'a str,
    /// Its byte offset.
    pub(crate) event_at: usize,
    /// The modifiers and their offset, if a `:` (or text after the PMU
    /// syntax's closing `/`) gives any.
    pub(crate) mods: Option<(&'a str, usize)>,
}

/// Why the PMU syntax was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SplitError<'a> {
    /// A PMU other than `pmu`: its name.
    UnknownPmu(&'a str),
    /// `pmu/` without its closing `/`.
    Unclosed,
}

/// Cuts `s` into its parts, `pmu` being the one PMU name the syntax takes.
pub(crate) fn split<'a>(s: &'a str, pmu: &str) -> Result<Parts<'a>, SplitError<'a>> {
    let Some((name, rest)) = s.split_once('/') else {
        return Ok(match s.split_once(':') {
            Some((event, mods)) => Parts {
                event,
                event_at: 0,
                mods: Some((mods, event.len() + 1)),
            },
            None => Parts {
                event: s,
                event_at: 0,
                mods: None,
            },
        });
    };
    if name != pmu {
        return Err(SplitError::UnknownPmu(name));
    }
    let event_at = name.len() + 1;
    let Some((event, after)) = rest.split_once('/') else {
        return Err(SplitError::Unclosed);
    };
    let mods_at = event_at + event.len() + 1;
    let mods = match after.strip_prefix(':') {
        Some(mods) => Some((mods, mods_at + 1)),
        None if after.is_empty() => None,
        None => Some((after, mods_at)),
    };
    Ok(Parts {
        event,
        event_at,
        mods,
    })
}

/// Why modifiers were refused, with the offset of the offending letter
/// within the modifiers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ModifierError {
    /// No modifier after the `:`.
    Empty,
    /// A letter that is none of `perf`'s modifiers.
    Bad(usize),
    /// A letter given twice.
    Repeated(usize),
    /// One of `perf`'s modifiers that the parser has no counterpart for.
    Unsupported(usize),
}

/// The letters of `accepted` that `mods` gives, as bits (bit `i` for
/// `accepted[i]`); a letter of `unsupported` (`perf`'s other modifiers) is
/// refused as such, any other as unknown, and a repeated one as repeated.
pub(crate) fn modifier_set(
    mods: &str,
    accepted: &[char],
    unsupported: &[char],
) -> Result<u32, ModifierError> {
    if mods.is_empty() {
        return Err(ModifierError::Empty);
    }
    let mut set = 0u32;
    for (at, c) in mods.char_indices() {
        let Some(i) = accepted.iter().position(|&a| a == c) else {
            return Err(if unsupported.contains(&c) {
                ModifierError::Unsupported(at)
            } else {
                ModifierError::Bad(at)
            });
        };
        let bit = 1u32 << (i % 32);
        if set & bit != 0 {
            return Err(ModifierError::Repeated(at));
        }
        set |= bit;
    }
    Ok(set)
}

/// The one character at byte `at` of `text` (empty past its end).
pub(crate) fn char_at(text: &str, at: usize) -> &str {
    let len = text[at..].chars().next().map_or(0, char::len_utf8);
    &text[at..at + len]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The edit distance counts a transposition as one edit.
    #[test]
    fn distance_is_optimal_string_alignment() {
        let table = [
            ("umaks", "umask", 1),
            ("cyles", "cycles", 1),
            ("", "abc", 3),
            ("abc", "abc", 0),
            ("ab", "ba", 1),
            ("kitten", "sitting", 3),
            ("ca", "abc", 3),
        ];
        for (a, b, d) in table {
            assert_eq!(distance(a.as_bytes(), b.as_bytes()), d, "{a} {b}");
            assert_eq!(distance(b.as_bytes(), a.as_bytes()), d, "{b} {a}");
        }
        assert_eq!(distance(&[b'a'; 33], b"a"), usize::MAX);
    }

    /// Numbers, raw configs, the PMU syntax and modifier sets.
    #[test]
    fn the_shared_pieces() {
        assert_eq!(number("0x1f", 8), Ok(0x1F));
        assert_eq!(number("256", 8), Err(NumberError::TooBig(8)));
        assert_eq!(number("-1", 8), Err(NumberError::Bad));
        assert_eq!(number("", 8), Err(NumberError::Bad));
        assert_eq!(raw_hex("r13c"), Some(Ok(0x13C)));
        assert_eq!(raw_hex("r0x13c"), Some(Ok(0x13C)));
        assert_eq!(raw_hex("ref-cycles"), None);
        assert_eq!(raw_hex("r11112222333344445"), Some(Err(NumberError::Bad)));
        let p = split("cpu/event=0x76/uk", "cpu").unwrap();
        assert_eq!(
            (p.event, p.event_at, p.mods),
            ("event=0x76", 4, Some(("uk", 15)))
        );
        let p = split("cpu/cycles/:k", "cpu").unwrap();
        assert_eq!(p.mods, Some(("k", 12)));
        assert_eq!(split("cycles:u", "cpu").unwrap().mods, Some(("u", 7)));
        assert_eq!(split("cpu/cycles", "cpu"), Err(SplitError::Unclosed));
        assert_eq!(
            split("cpo/cycles/", "cpu"),
            Err(SplitError::UnknownPmu("cpo"))
        );
        assert_eq!(modifier_set("ku", &['u', 'k'], &['p']), Ok(0b11));
        assert_eq!(
            modifier_set("up", &['u', 'k'], &['p']),
            Err(ModifierError::Unsupported(1))
        );
        assert_eq!(
            modifier_set("uu", &['u', 'k'], &[]),
            Err(ModifierError::Repeated(1))
        );
        assert_eq!(modifier_set("x", &['u'], &[]), Err(ModifierError::Bad(0)));
        assert_eq!(modifier_set("", &['u'], &[]), Err(ModifierError::Empty));
        let t = Term::new("ééééééééééééé");
        assert_eq!(t.as_str().len(), 24);
        assert_eq!(char_at("aé", 1), "é");
    }
}

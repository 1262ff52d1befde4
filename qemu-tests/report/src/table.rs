//! The table core both Itanium sample reports are built on (the `itlb`
//! report, [`crate::itlb`], and the D-EAR report,
//! [`crate::dear`]): the caller's symbol table ([`LoadModule`],
//! [`Function`]) and the lookups in it, fixed-size tables of rows that
//! count samples (no allocation: a full table counts what it could not
//! place), their ranking, percentages in tenths, and the rules the reports
//! print.

use core::fmt;

#[cfg(doc)]
use crate::symbols::Function;
use crate::symbols::LoadModule;

/// `None` in a key: outside every load module / function.
pub(crate) const UNKNOWN: u16 = u16::MAX;

/// What a report row counts: the samples added to it (the itlb report's
/// [`FillCounts`], the D-EAR report's latencies).
pub(crate) trait Tally: Copy {
    /// One sample's contribution.
    type Sample: Copy;
    /// Nothing counted.
    const ZERO: Self;
    /// Count one sample.
    fn add(&mut self, s: Self::Sample);
    /// The samples counted.
    fn total(&self) -> u64;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Row<K, C> {
    pub(crate) key: K,
    pub(crate) counts: C,
}

/// A fixed-size table of rows keyed by `K` counting `C`, in insertion
/// order.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Table<K: Copy + Eq, C: Tally, const N: usize> {
    rows: [Row<K, C>; N],
    len: usize,
}

impl<K: Copy + Eq, C: Tally, const N: usize> Table<K, C, N> {
    pub(crate) const fn new(empty: K) -> Self {
        Table {
            rows: [Row {
                key: empty,
                counts: C::ZERO,
            }; N],
            len: 0,
        }
    }

    pub(crate) fn rows(&self) -> &[Row<K, C>] {
        &self.rows[..self.len]
    }

    /// The counts of the first row whose key satisfies `matches`.
    pub(crate) fn find(&self, matches: impl Fn(&K) -> bool) -> Option<C> {
        self.rows()
            .iter()
            .find(|r| matches(&r.key))
            .map(|r| r.counts)
    }

    /// Count `sample` in `key`'s row; `false` if the table is full.
    pub(crate) fn add(&mut self, key: K, sample: C::Sample) -> bool {
        let i = match self.rows().iter().position(|r| r.key == key) {
            Some(i) => i,
            None if self.len < N => {
                self.rows[self.len] = Row {
                    key,
                    counts: C::ZERO,
                };
                self.len += 1;
                self.len - 1
            }
            None => return false,
        };
        self.rows[i].counts.add(sample);
        true
    }

    /// The rows `keep` selects, in ascending order of `order` (distinct
    /// per row): a function's addresses in address order, with no storage.
    pub(crate) fn ascending<'t>(
        &'t self,
        order: impl Fn(&K) -> u64 + Copy + 't,
        keep: impl Fn(&K) -> bool + Copy + 't,
    ) -> impl Iterator<Item = &'t Row<K, C>> + 't {
        let mut last: Option<u64> = None;
        core::iter::from_fn(move || {
            let next = self
                .rows()
                .iter()
                .filter(|r| keep(&r.key) && last.is_none_or(|l| order(&r.key) > l))
                .min_by_key(|r| order(&r.key))?;
            last = Some(order(&next.key));
            Some(next)
        })
    }

    /// The rows by count, most first, ties by `order`; at most N² compares,
    /// no storage (the tables are small).
    pub(crate) fn ranked<'t>(
        &'t self,
        order: impl Fn(&K) -> u64 + Copy + 't,
    ) -> impl Iterator<Item = &'t Row<K, C>> + 't {
        let rank = move |r: &Row<K, C>| (core::cmp::Reverse(r.counts.total()), order(&r.key));
        let mut last: Option<(core::cmp::Reverse<u64>, u64)> = None;
        core::iter::from_fn(move || {
            let next = self
                .rows()
                .iter()
                .filter(|r| last.is_none_or(|l| rank(r) > l))
                .min_by_key(|r| rank(r))?;
            last = Some(rank(next));
            Some(next)
        })
    }
}

/// A (module, function) key; [`UNKNOWN`] for none.
pub(crate) type FunctionKey = (u16, u16);

/// Where an address is in a symbol table (the caller's load modules and
/// their functions), shared by the itlb and D-EAR reports.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Symbols<'a>(pub(crate) &'a [LoadModule<'a>]);

impl<'a> Symbols<'a> {
    /// The load module containing `address`, or [`UNKNOWN`].
    pub(crate) fn module_of(self, address: u64) -> u16 {
        self.0
            .iter()
            .position(|m| (m.start..m.end).contains(&address))
            .and_then(|i| u16::try_from(i).ok())
            .filter(|&i| i != UNKNOWN)
            .unwrap_or(UNKNOWN)
    }

    /// The function of `module` containing `address`.
    pub(crate) fn function_of(self, module: u16, address: u64) -> FunctionKey {
        let Some(m) = self.0.get(usize::from(module)) else {
            return (module, UNKNOWN);
        };
        let f = m
            .functions
            .iter()
            .position(|f| (f.start..f.end).contains(&address))
            .and_then(|i| u16::try_from(i).ok())
            .filter(|&i| i != UNKNOWN)
            .unwrap_or(UNKNOWN);
        (module, f)
    }

    /// The key of function `function` of module `module`, by name.
    pub(crate) fn key(self, module: &str, function: &str) -> Option<FunctionKey> {
        let m = self.0.iter().position(|m| m.name == module)?;
        let f = self.0[m]
            .functions
            .iter()
            .position(|f| f.name == function)?;
        Some((u16::try_from(m).ok()?, u16::try_from(f).ok()?))
    }

    /// The width of the longest function name among `keys`, at least that
    /// of the heading "Function".
    pub(crate) fn function_width(self, keys: impl Iterator<Item = FunctionKey>) -> usize {
        keys.map(|k| self.function_name(k).len())
            .max()
            .unwrap_or(0)
            .max("Function".len())
    }

    pub(crate) fn module_name(self, m: u16) -> &'a str {
        self.0.get(usize::from(m)).map_or("(unknown)", |m| m.name)
    }

    pub(crate) fn function_name(self, (m, f): FunctionKey) -> &'a str {
        self.0
            .get(usize::from(m))
            .and_then(|m| m.functions.get(usize::from(f)))
            .map_or("(unknown)", |f| f.name)
    }
}

/// A percentage with one decimal, rounded half up, from integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tenths(u64);

impl Tenths {
    pub(crate) fn percent(part: u64, whole: u64) -> Tenths {
        if whole == 0 {
            return Tenths(0);
        }
        let (p, w) = (u128::from(part), u128::from(whole));
        Tenths(((p * 2000 + w) / (2 * w)) as u64)
    }
}

impl fmt::Display for Tenths {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Through a small buffer so that width and alignment apply.
        let mut buf = [0u8; 24];
        let mut w = Cursor(&mut buf, 0);
        let _ = fmt::write(&mut w, format_args!("{}.{}", self.0 / 10, self.0 % 10));
        let n = w.1;
        f.pad(core::str::from_utf8(&buf[..n]).unwrap_or("?"))
    }
}

struct Cursor<'b>(&'b mut [u8], usize);

impl fmt::Write for Cursor<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.1 + s.len();
        if end > self.0.len() {
            return Err(fmt::Error);
        }
        self.0[self.1..end].copy_from_slice(s.as_bytes());
        self.1 = end;
        Ok(())
    }
}

pub(crate) const RULE: &str =
    "------------------------------------------------------------------------------";
pub(crate) const DASHES: &str =
    "- - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -";
pub(crate) fn order_key((m, f): FunctionKey) -> u64 {
    u64::from(m) << 16 | u64::from(f)
}

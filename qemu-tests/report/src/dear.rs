//! A D-EAR report by function, in the manner of HP Caliper's reports (the
//! layout of [`crate::itlb`]): sampled data cache, data TLB and ALAT
//! misses grouped by the function containing the instruction that missed,
//! with the latencies and the data addresses sampled.
//!
//! Each [`DearSample`] (from the overflow handler of a counter sampling the
//! D-EAR, [`pmu::arch::itanium::driver::CounterConfig::dear_sampling`]) carries the data
//! address (PMD2, Montecito PMD32), the latency or the TLB level (PMD3,
//! PMD33) and the instruction's bundle and slot (PMD17, PMD36) (the
//! reference's Itanium 2 PMU tables; libpfm3's D-EAR layouts). The report
//! attributes a sample to the function whose range contains the
//! instruction address, in the caller's symbol table ([`LoadModule`]s with
//! [`Function`]s, shared with the itlb report), and to the load module
//! containing it, or to `(unknown)`; a sample whose instruction address is
//! not valid (Itanium 2 and Montecito PMD17/PMD36 `vl` 0 with a valid
//! `stat`) goes to `(unknown)`. (On the first Itanium PMD17 `vl` 0 makes
//! the whole capture invalid, and the handler hands on no sample.)
//!
//! Two levels: the function summary (samples, share, cumulative share,
//! average and maximum latency of the cache-mode samples, TLB fill levels),
//! and per function the data addresses sampled (each with its samples and
//! latencies and the last instruction that missed on it), in address order.
//! Rows are ordered by samples, most first, ties in symbol-table order, as
//! in the itlb report. Latencies are in cycles as the D-EAR counts them
//! (12 bits on Itanium, 13 on Itanium 2 and Montecito); a latency whose
//! counter overflowed (Itanium 2 PMD3 bit 13) is counted at its recorded
//! value and the row says so ([`Latencies::overflowed`]).
//!
//! Fixed-size tables, no allocation: samples a table has no row for are
//! counted ([`DearNotTabulated`]) and printed, never a panic; integer
//! arithmetic only, so the text is the same on every target.
//!
//! # Examples
//!
//! ```
//! use pmu_report::dear::DearReport;
//! use pmu::arch::itanium::ear::{DearEvent, DearSample, InstructionAddress};
//! use pmu_report::symbols::{Function, LoadModule};
//! use pmu::arch::itanium::Slot;
//!
//! let funcs = [Function { name: "walk", start: 0x1000, end: 0x2000 }];
//! let modules = [LoadModule { name: "a.out", start: 0x1000, end: 0x2000, functions: &funcs }];
//! let mut r: DearReport<'_, 2, 4> = DearReport::new(&modules);
//! let miss = |latency| DearSample {
//!     valid: true,
//!     data_address: 0x6000_0040,
//!     instruction: Some(InstructionAddress { bundle: 0x1010, slot: Some(Slot::S1) }),
//!     event: DearEvent::CacheMiss { latency, latency_overflow: false },
//! };
//! r.record(miss(100));
//! r.record(miss(300));
//! let walk = r.function("a.out", "walk").unwrap();
//! assert_eq!((walk.samples, walk.average(), walk.max), (2, Some(200), 300));
//! ```

use core::fmt;

use crate::itlb::FillCounts;
#[cfg(doc)]
use crate::symbols::Function;
use crate::symbols::LoadModule;
use crate::table::{DASHES, FunctionKey, RULE, Symbols, Table, Tally, Tenths, order_key};
use pmu::arch::itanium::ear::{DearEvent, DearSample};

/// What one function or data address accumulated: samples, latencies of
/// the cache-mode samples, TLB fill levels of the TLB-mode ones, ALAT
/// misses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Latencies {
    /// All samples.
    pub samples: u64,
    /// Cache-mode samples (those with a latency).
    pub cache: u64,
    /// The sum of their latencies, in cycles.
    pub total_latency: u64,
    /// The smallest latency (0 when there is none).
    pub min: u16,
    /// The largest latency.
    pub max: u16,
    /// Latencies whose counter overflowed (counted at their recorded value).
    pub overflowed: u64,
    /// TLB-mode samples by the level that filled them.
    pub fills: FillCounts,
    /// ALAT misses.
    pub alat: u64,
    /// The instruction address (bundle | slot) of the last sample.
    pub last_instruction: Option<u64>,
}

impl Latencies {
    /// Nothing counted.
    pub const ZERO: Latencies = Latencies {
        samples: 0,
        cache: 0,
        total_latency: 0,
        min: 0,
        max: 0,
        overflowed: 0,
        fills: FillCounts::ZERO,
        alat: 0,
        last_instruction: None,
    };

    /// The average latency of the cache-mode samples, rounded half up
    /// (`None` without any).
    pub const fn average(&self) -> Option<u64> {
        if self.cache == 0 {
            None
        } else {
            Some((self.total_latency * 2 + self.cache) / (2 * self.cache))
        }
    }

    fn add(&mut self, s: DearSample) {
        self.samples += 1;
        self.last_instruction = s.instruction.map(|i| i.address());
        match s.event {
            DearEvent::CacheMiss {
                latency,
                latency_overflow,
            } => {
                self.min = if self.cache == 0 {
                    latency
                } else {
                    self.min.min(latency)
                };
                self.max = self.max.max(latency);
                self.cache += 1;
                self.total_latency += u64::from(latency);
                self.overflowed += u64::from(latency_overflow);
            }
            DearEvent::TlbMiss { fill: Some(f) } => self.fills.add(f),
            DearEvent::Alat => self.alat += 1,
            DearEvent::TlbMiss { fill: None } | DearEvent::Undefined => {}
        }
    }
}

impl Tally for Latencies {
    type Sample = DearSample;
    const ZERO: Latencies = Latencies::ZERO;
    fn add(&mut self, s: DearSample) {
        Latencies::add(self, s);
    }
    fn total(&self) -> u64 {
        self.samples
    }
}

/// Samples a table had no row for (each is still in the totals).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DearNotTabulated {
    /// Missing from the function table.
    pub functions: u64,
    /// Missing from the data-address table.
    pub addresses: u64,
}

/// A data address and the function whose instruction missed on it.
type AddressKey = (u64, FunctionKey);

/// The D-EAR report: samples by function (at most `FUNCTIONS` rows) and by
/// data address within a function (at most `ADDRESSES` rows).
/// [`fmt::Display`] prints it (see the [module documentation](self)).
#[derive(Clone, Debug)]
pub struct DearReport<'a, const FUNCTIONS: usize, const ADDRESSES: usize> {
    symbols: &'a [LoadModule<'a>],
    sample_after: Option<u64>,
    total: Latencies,
    functions: Table<FunctionKey, Latencies, FUNCTIONS>,
    addresses: Table<AddressKey, Latencies, ADDRESSES>,
    not_tabulated: DearNotTabulated,
}

impl<'a, const FUNCTIONS: usize, const ADDRESSES: usize> DearReport<'a, FUNCTIONS, ADDRESSES> {
    /// An empty report over `symbols`.
    pub const fn new(symbols: &'a [LoadModule<'a>]) -> Self {
        const NONE: FunctionKey = (crate::table::UNKNOWN, crate::table::UNKNOWN);
        DearReport {
            symbols,
            sample_after: None,
            total: Latencies::ZERO,
            functions: Table::new(NONE),
            addresses: Table::new((0, NONE)),
            not_tabulated: DearNotTabulated {
                functions: 0,
                addresses: 0,
            },
        }
    }

    /// Say in the header that one capture in `n` was sampled.
    pub const fn with_sample_after(mut self, n: u64) -> Self {
        self.sample_after = Some(n);
        self
    }

    /// Count one sample (an invalid one, `valid` false, is not counted and
    /// returns `false`).
    pub fn record(&mut self, s: DearSample) -> bool {
        if !s.valid {
            return false;
        }
        self.total.add(s);
        let symbols = Symbols(self.symbols);
        let function = match s.instruction {
            Some(i) => symbols.function_of(symbols.module_of(i.address()), i.address()),
            None => (crate::table::UNKNOWN, crate::table::UNKNOWN),
        };
        if !self.functions.add(function, s) {
            self.not_tabulated.functions += 1;
        }
        if !self.addresses.add((s.data_address, function), s) {
            self.not_tabulated.addresses += 1;
        }
        true
    }

    /// Everything counted.
    pub const fn total(&self) -> Latencies {
        self.total
    }

    /// Samples the tables had no row for.
    pub const fn not_tabulated(&self) -> DearNotTabulated {
        self.not_tabulated
    }

    /// The row of function `function` of load module `module`.
    pub fn function(&self, module: &str, function: &str) -> Option<Latencies> {
        let key = Symbols(self.symbols).key(module, function)?;
        self.functions.find(|k| *k == key)
    }

    /// The row of data address `address` for the first function, in table
    /// order, that missed on it (each function that missed on an address
    /// has a row of its own).
    pub fn address(&self, address: u64) -> Option<Latencies> {
        self.addresses.find(|k| k.0 == address)
    }

    fn latency_columns(f: &mut fmt::Formatter<'_>, l: &Latencies) -> fmt::Result {
        match l.average() {
            Some(a) => write!(f, " {a:>8} {:>8}", l.max),
            None => write!(f, " {:>8} {:>8}", "-", "-"),
        }?;
        write!(
            f,
            " {:>5} {:>5} {:>5} {:>5}",
            l.fills.l2, l.fills.hpw, l.fills.software, l.alat
        )
    }
}

impl<const FUNCTIONS: usize, const ADDRESSES: usize> DearReport<'_, FUNCTIONS, ADDRESSES> {
    /// The title and the sampling rate.
    fn header(&self, f: &mut fmt::Formatter<'_>, total: u64) -> fmt::Result {
        writeln!(
            f,
            "dear measurement: sampled data cache, data TLB and ALAT misses (D-EAR)"
        )?;
        match self.sample_after {
            Some(n) => writeln!(
                f,
                "Sampling: one in every {n} D-EAR captures, {total} samples"
            )?,
            None => writeln!(f, "Samples: {total}")?,
        }
        Ok(())
    }

    /// The function summary and the totals.
    fn function_summary(
        &self,
        f: &mut fmt::Formatter<'_>,
        symbols: Symbols<'_>,
        total: u64,
    ) -> fmt::Result {
        let width = symbols.function_width(self.functions.rows().iter().map(|r| r.key));
        writeln!(f, "\nFunction Summary\n{RULE}")?;
        writeln!(
            f,
            "{:>7} {:>8} {:>8} {:>8} {:>8} {:>5} {:>5} {:>5} {:>5}  {:<width$}  Load Module\n{RULE}",
            "% Total",
            "Cumulat",
            "Sampled",
            "Avg Lat",
            "Max Lat",
            "L2TLB",
            "HPW",
            "Soft",
            "ALAT",
            "Function"
        )?;
        let mut cumulative = 0;
        for row in self.functions.ranked(|&k| order_key(k)) {
            let n = row.counts.samples;
            cumulative += n;
            write!(
                f,
                "{:>7} {:>8} {:>8}",
                Tenths::percent(n, total),
                Tenths::percent(cumulative, total),
                n
            )?;
            Self::latency_columns(f, &row.counts)?;
            writeln!(
                f,
                "  {:<width$}  {}",
                symbols.function_name(row.key),
                symbols.module_name(row.key.0)
            )?;
        }
        writeln!(f, "{RULE}")?;
        write!(
            f,
            "{:>7} {:>8} {:>8}",
            Tenths::percent(total, total),
            "",
            total
        )?;
        Self::latency_columns(f, &self.total)?;
        writeln!(f, "  [total]")?;
        Ok(())
    }

    /// Each function's data addresses, in address order.
    fn function_details(&self, f: &mut fmt::Formatter<'_>, symbols: Symbols<'_>) -> fmt::Result {
        writeln!(f, "\nFunction Details")?;
        for func in self.functions.ranked(|&k| order_key(k)) {
            writeln!(
                f,
                "{RULE}\n{} [{}]: {} samples",
                symbols.function_name(func.key),
                symbols.module_name(func.key.0),
                func.counts.samples
            )?;
            writeln!(
                f,
                "{:>8} {:>8} {:>8} {:>5} {:>5} {:>5} {:>5}  {:<18}  Instruction",
                "Sampled", "Avg Lat", "Max Lat", "L2TLB", "HPW", "Soft", "ALAT", "Data Address"
            )?;
            writeln!(f, "{DASHES}")?;
            for row in self.addresses.ascending(|k| k.0, |k| k.1 == func.key) {
                write!(f, "{:>8}", row.counts.samples)?;
                Self::latency_columns(f, &row.counts)?;
                write!(f, "  {:#018x}  ", row.key.0)?;
                match row.counts.last_instruction {
                    Some(ip) => writeln!(f, "{ip:#018x}")?,
                    None => writeln!(f, "(not valid)")?,
                }
            }
        }
        writeln!(f, "{RULE}")?;
        Ok(())
    }

    /// What the tables could not hold, and the overflowed latencies.
    fn footer(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nt = self.not_tabulated;
        if nt.functions + nt.addresses > 0 {
            writeln!(
                f,
                "Tables full, samples not tabulated: {} by function (capacity {FUNCTIONS}), \
                 {} by data address (capacity {ADDRESSES})",
                nt.functions, nt.addresses
            )?;
        }
        if self.total.overflowed > 0 {
            writeln!(
                f,
                "{} latencies overflowed the D-EAR's latency counter (counted at their recorded value)",
                self.total.overflowed
            )?;
        }
        Ok(())
    }
}

impl<const FUNCTIONS: usize, const ADDRESSES: usize> fmt::Display
    for DearReport<'_, FUNCTIONS, ADDRESSES>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let symbols = Symbols(self.symbols);
        let total = self.total.samples;
        self.header(f, total)?;
        self.function_summary(f, symbols, total)?;
        self.function_details(f, symbols)?;
        self.footer(f)
    }
}

#[cfg(test)]
mod tests;

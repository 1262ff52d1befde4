//! The HP Caliper `itlb` measurement report (HP Caliper User Guide, "itlb
//! Measurement Report Description"), from I-EAR samples.
//!
//! Caliper "takes samples every Nth instruction TLB miss ... At each sample
//! point, HP Caliper records both the cache line that resulted in an
//! instruction TLB miss and the level of the TLB hierarchy that satisfied
//! the miss (L2 instruction TLB, HPW, or software)" (Caliper, "How
//! Instruction TLB Metrics Are Obtained"). This module turns such samples
//! ([`ItlbSample`]: an instruction address and an [`TlbFill`]) and a symbol
//! table ([`LoadModule`]s with [`Function`]s) into the report's three
//! levels: per load module, per function, and per 64-byte cache line
//! ("Function Details"), each row with the number of sampled misses and the
//! percentages of L2 ITLB, HPW and software fills, one decimal
//! (Caliper, Table 28).
//!
//! # Rules, and where they come from
//!
//! * **Cache lines are 64 bytes** ("On Itanium 2 systems, cache lines are 64
//!   bytes (12 instructions). Cache lines are the finest level of
//!   granularity available in itlb measurement reports", Caliper). A
//!   sample's line is its address with bits 5:0 clear. The I-EAR itself
//!   records the address to 32 bytes (PMD0 bits 63:5 on every generation,
//!   libpfm3's I-EAR PMD layouts).
//! * **A line belongs to the function at its start address** ("HP Caliper
//!   attributes samples for a given cache line to the function associated
//!   with the start address of the cache line", Caliper). When no function
//!   contains the line's start (a function beginning in the middle of the
//!   line, after a gap), the sample goes to the function containing the
//!   sampled address; otherwise to `(unknown)`. The load module is the one
//!   containing the sampled address, or `(unknown)`.
//! * **L2 fills per generation.** "L2 fills are not reported for, and do not
//!   apply to, Itanium systems" (Caliper, Table 28). The first-generation
//!   Itanium's I-EAR has no L2 ITLB option: its TLB-mode umask selects HPW
//!   (4) or software (8) fills and PMD0.tlb says which (0 HPW, 1 software);
//!   Itanium 2 and Montecito report `stat` = 1 L2 ITLB, 2 HPW, 3 software
//!   (libpfm3's I-EAR layouts, pfmon's decoders, and the libpfm3 events
//!   INSTRUCTION_EAR_TLB_* and L1I_EAR_TLB_*). A report built with
//!   [`L2Fills::NotApplicable`] shows `n/a` in the L2 column and refuses L2
//!   samples.
//! * **Ordering** (Table 28: "% Total", "Cumulat % of Total"): rows by
//!   sampled misses, most first, ties in symbol-table order; the cache lines
//!   of a function in address order, "preceded and followed by a row of
//!   dashes", "non-contiguous cache lines are separated by a row of tildes"
//!   (Caliper, "Function Details").
//!
//! # Fixed-size tables
//!
//! No allocation: the report aggregates into three caller-sized tables
//! (`MODULES`, `FUNCTIONS`, `LINES` rows). A sample whose row does not fit
//! is still counted in the totals and in every table it does fit; the
//! misses a table could not take are counted ([`NotTabulated`]) and printed
//! under the report, never a panic. Percentages are computed in integers
//! (rounded half up), so the text is the same on every target.
//!
//! # Examples
//!
//! ```
//! use pmu::arch::itanium::ear::{ItlbSample, TlbFill};
//! use pmu_report::itlb::{ItlbReport, L2Fills};
//! use pmu_report::symbols::{Function, LoadModule};
//!
//! let funcs = [Function { name: "main", start: 0x1000, end: 0x2000 }];
//! let modules = [LoadModule { name: "a.out", start: 0x1000, end: 0x2000, functions: &funcs }];
//! let mut r: ItlbReport<'_, 1, 1, 4> = ItlbReport::new(&modules, L2Fills::Reported);
//! r.record(ItlbSample { address: 0x1040, fill: TlbFill::Hpw }).unwrap();
//! r.record(ItlbSample { address: 0x1040, fill: TlbFill::L2 }).unwrap();
//! assert_eq!(r.function("a.out", "main").unwrap().total(), 2);
//! assert_eq!(r.total().of(TlbFill::Hpw), 1);
//! ```

use core::fmt;

/// The cache-line size of the report (HP Caliper's itlb measurement).
pub const LINE_BYTES: u64 = 64;

#[cfg(any(doc, test))]
use crate::symbols::Function;
use crate::symbols::LoadModule;
use crate::table::{DASHES, FunctionKey, RULE, Symbols, Table, Tally, Tenths, UNKNOWN, order_key};
use pmu::arch::itanium::ear::{ItlbSample, TlbFill};

/// Whether the processor's I-EAR can report L2 ITLB fills.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum L2Fills {
    /// Itanium 2 and Montecito: L2 ITLB, HPW and software fills.
    Reported,
    /// The first-generation Itanium: HPW and software only (HP Caliper's
    /// itlb measurement).
    NotApplicable,
}

/// Misses counted by fill level.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FillCounts {
    /// L2 ITLB fills.
    pub l2: u64,
    /// HPW fills.
    pub hpw: u64,
    /// Software fills.
    pub software: u64,
}

impl FillCounts {
    /// Nothing counted.
    pub const ZERO: FillCounts = FillCounts {
        l2: 0,
        hpw: 0,
        software: 0,
    };

    /// All sampled misses.
    pub const fn total(&self) -> u64 {
        self.l2 + self.hpw + self.software
    }

    /// The count of one fill level.
    pub const fn of(&self, fill: TlbFill) -> u64 {
        match fill {
            TlbFill::L2 => self.l2,
            TlbFill::Hpw => self.hpw,
            TlbFill::Software => self.software,
        }
    }

    pub(super) fn add(&mut self, fill: TlbFill) {
        let c = match fill {
            TlbFill::L2 => &mut self.l2,
            TlbFill::Hpw => &mut self.hpw,
            TlbFill::Software => &mut self.software,
        };
        *c += 1;
    }
}

impl Tally for FillCounts {
    type Sample = TlbFill;
    const ZERO: FillCounts = FillCounts::ZERO;
    fn add(&mut self, fill: TlbFill) {
        FillCounts::add(self, fill);
    }
    fn total(&self) -> u64 {
        FillCounts::total(self)
    }
}

/// Sampled misses a table had no row for (each is still in the totals).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NotTabulated {
    /// Misses missing from the load-module table.
    pub modules: u64,
    /// Misses missing from the function table.
    pub functions: u64,
    /// Misses missing from the cache-line table.
    pub lines: u64,
}

impl NotTabulated {
    /// Whether every sample found its rows.
    pub const fn is_empty(&self) -> bool {
        self.modules == 0 && self.functions == 0 && self.lines == 0
    }
}

/// Which tables took a sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Tabulated {
    /// The load-module table had (or made) its row.
    pub module: bool,
    /// The function table had (or made) its row.
    pub function: bool,
    /// The cache-line table had (or made) its row.
    pub line: bool,
}

/// A refused sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Refused {
    /// An L2 ITLB fill in a report for a processor without them (Caliper:
    /// "L2 fills ... do not apply to Itanium systems").
    L2NotApplicable,
}

impl core::fmt::Display for Refused {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Refused::L2NotApplicable => {
                f.write_str("an L2 ITLB fill in a report for a processor without L2 fills")
            }
        }
    }
}

impl core::error::Error for Refused {}

/// A cache line: its address and the function it is attributed to.
type LineKey = (u64, FunctionKey);

/// The itlb report: sampled ITLB misses aggregated per load module, per
/// function and per cache line, into tables of at most `MODULES`,
/// `FUNCTIONS` and `LINES` rows. [`fmt::Display`] prints it laid out like
/// Caliper's (see the [module documentation](self)).
#[derive(Clone, Debug)]
pub struct ItlbReport<'a, const MODULES: usize, const FUNCTIONS: usize, const LINES: usize> {
    symbols: &'a [LoadModule<'a>],
    l2: L2Fills,
    sample_after: Option<u64>,
    total: FillCounts,
    refused: u64,
    modules: Table<u16, FillCounts, MODULES>,
    functions: Table<FunctionKey, FillCounts, FUNCTIONS>,
    lines: Table<LineKey, FillCounts, LINES>,
    not_tabulated: NotTabulated,
}

impl<'a, const MODULES: usize, const FUNCTIONS: usize, const LINES: usize>
    ItlbReport<'a, MODULES, FUNCTIONS, LINES>
{
    /// An empty report over `symbols` (at most 65535 modules of at most
    /// 65535 functions each are told apart; more are `(unknown)`).
    pub const fn new(symbols: &'a [LoadModule<'a>], l2: L2Fills) -> Self {
        ItlbReport {
            symbols,
            l2,
            sample_after: None,
            total: FillCounts::ZERO,
            refused: 0,
            modules: Table::new(UNKNOWN),
            functions: Table::new((UNKNOWN, UNKNOWN)),
            lines: Table::new((0, (UNKNOWN, UNKNOWN))),
            not_tabulated: NotTabulated {
                modules: 0,
                functions: 0,
                lines: 0,
            },
        }
    }

    /// Say in the header that one miss in `n` was sampled.
    pub const fn with_sample_after(mut self, n: u64) -> Self {
        self.sample_after = Some(n);
        self
    }

    /// Count one sample.
    pub fn record(&mut self, s: ItlbSample) -> Result<Tabulated, Refused> {
        if s.fill == TlbFill::L2 && self.l2 == L2Fills::NotApplicable {
            self.refused += 1;
            return Err(Refused::L2NotApplicable);
        }
        self.total.add(s.fill);
        let line = s.address & !(LINE_BYTES - 1);
        let module = self.module_of(s.address);
        let function = match self.function_of(module, line) {
            (_, UNKNOWN) => self.function_of(module, s.address),
            f => f,
        };
        let t = Tabulated {
            module: self.modules.add(module, s.fill),
            function: self.functions.add(function, s.fill),
            line: self.lines.add((line, function), s.fill),
        };
        self.not_tabulated.modules += u64::from(!t.module);
        self.not_tabulated.functions += u64::from(!t.function);
        self.not_tabulated.lines += u64::from(!t.line);
        Ok(t)
    }

    /// All counted misses.
    pub const fn total(&self) -> FillCounts {
        self.total
    }

    /// Samples refused by [`ItlbReport::record`].
    pub const fn refused(&self) -> u64 {
        self.refused
    }

    /// Misses the tables had no row for.
    pub const fn not_tabulated(&self) -> NotTabulated {
        self.not_tabulated
    }

    /// The counts of load module `name` (`None`: no row).
    pub fn module(&self, name: &str) -> Option<FillCounts> {
        let m = self.symbols.iter().position(|m| m.name == name)?;
        self.modules.find(|k| usize::from(*k) == m)
    }

    /// The counts of function `function` of load module `module`.
    pub fn function(&self, module: &str, function: &str) -> Option<FillCounts> {
        let key = Symbols(self.symbols).key(module, function)?;
        self.functions.find(|k| *k == key)
    }

    /// The counts of the cache line starting at `line`.
    pub fn line(&self, line: u64) -> Option<FillCounts> {
        self.lines.find(|k| k.0 == line)
    }

    fn module_of(&self, address: u64) -> u16 {
        Symbols(self.symbols).module_of(address)
    }

    fn function_of(&self, module: u16, address: u64) -> FunctionKey {
        Symbols(self.symbols).function_of(module, address)
    }

    fn module_name(&self, m: u16) -> &'a str {
        Symbols(self.symbols).module_name(m)
    }

    fn function_name(&self, key: FunctionKey) -> &'a str {
        Symbols(self.symbols).function_name(key)
    }

    /// A summary row's leading columns: its share of `total`, the
    /// cumulative share, its sample count and its fill shares.
    fn summary_row(
        &self,
        f: &mut fmt::Formatter<'_>,
        c: &FillCounts,
        cumulative: u64,
        total: u64,
    ) -> fmt::Result {
        let n = c.total();
        write!(
            f,
            "{:>7} {:>8} {:>8}",
            Tenths::percent(n, total),
            Tenths::percent(cumulative, total),
            n
        )?;
        self.fills(f, c)
    }

    fn fills(&self, f: &mut fmt::Formatter<'_>, c: &FillCounts) -> fmt::Result {
        match self.l2 {
            L2Fills::Reported => write!(f, " {:>8}", Tenths::percent(c.l2, c.total()))?,
            L2Fills::NotApplicable => write!(f, " {:>8}", "n/a")?,
        }
        write!(
            f,
            " {:>8} {:>8}",
            Tenths::percent(c.hpw, c.total()),
            Tenths::percent(c.software, c.total())
        )
    }
}

/// A summary's title, rule and the first two lines of its column heading
/// (the caller writes the third, which names its key columns).
fn summary_head(f: &mut fmt::Formatter<'_>, title: &str) -> fmt::Result {
    writeln!(f, "\n{title} Summary\n{RULE}")?;
    writeln!(
        f,
        "{:>7} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "% Total", "Cumulat", "Sampled", "% ITLB", "% ITLB", "% ITLB"
    )?;
    writeln!(
        f,
        "{:>7} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "Sampled", "% of", "ITLB", "L2", "HPW", "Soft"
    )?;
    Ok(())
}

const TILDES: &str = "~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~";

impl<const MODULES: usize, const FUNCTIONS: usize, const LINES: usize>
    ItlbReport<'_, MODULES, FUNCTIONS, LINES>
{
    /// The title, the sampling rate and the note on L2 fills.
    fn header(&self, f: &mut fmt::Formatter<'_>, total: u64) -> fmt::Result {
        writeln!(
            f,
            "itlb measurement: sampled instruction TLB misses (I-EAR)"
        )?;
        match self.sample_after {
            Some(n) => writeln!(f, "Sampling: one in every {n} ITLB misses, {total} samples")?,
            None => writeln!(f, "Samples: {total}")?,
        }
        if self.l2 == L2Fills::NotApplicable {
            writeln!(
                f,
                "L2 fills are not reported for, and do not apply to, Itanium systems (n/a)"
            )?;
        }
        Ok(())
    }

    /// The load-module summary.
    fn module_summary(&self, f: &mut fmt::Formatter<'_>, total: u64) -> fmt::Result {
        summary_head(f, "Load Module")?;
        writeln!(
            f,
            "{:>7} {:>8} {:>8} {:>8} {:>8} {:>8}  Load Module\n{RULE}",
            "Misses", "Total", "Misses", "Fill", "Fill", "Fill"
        )?;
        let mut cumulative = 0;
        for row in self.modules.ranked(|&m| u64::from(m)) {
            cumulative += row.counts.total();
            self.summary_row(f, &row.counts, cumulative, total)?;
            writeln!(f, "  {}", self.module_name(row.key))?;
        }
        writeln!(f, "{RULE}")?;
        write!(
            f,
            "{:>7} {:>8} {:>8}",
            Tenths::percent(total, total),
            "",
            total
        )?;
        self.fills(f, &self.total)?;
        writeln!(f, "  [total]")?;
        Ok(())
    }

    /// The function summary.
    fn function_summary(&self, f: &mut fmt::Formatter<'_>, total: u64) -> fmt::Result {
        let width =
            Symbols(self.symbols).function_width(self.functions.rows().iter().map(|r| r.key));
        summary_head(f, "Function")?;
        writeln!(
            f,
            "{:>7} {:>8} {:>8} {:>8} {:>8} {:>8}  {:<width$}  Load Module\n{RULE}",
            "Misses", "Total", "Misses", "Fill", "Fill", "Fill", "Function"
        )?;
        let mut cumulative = 0;
        for row in self.functions.ranked(|&k| order_key(k)) {
            cumulative += row.counts.total();
            self.summary_row(f, &row.counts, cumulative, total)?;
            writeln!(
                f,
                "  {:<width$}  {}",
                self.function_name(row.key),
                self.module_name(row.key.0)
            )?;
        }
        writeln!(f, "{RULE}")?;
        Ok(())
    }

    /// Each function's cache lines, ranked as the function summary.
    fn function_details(&self, f: &mut fmt::Formatter<'_>, total: u64) -> fmt::Result {
        writeln!(f, "\nFunction Details")?;
        for func in self.functions.ranked(|&k| order_key(k)) {
            writeln!(
                f,
                "{RULE}\n{} [{}]: {} sampled misses",
                self.function_name(func.key),
                self.module_name(func.key.0),
                func.counts.total()
            )?;
            writeln!(
                f,
                "{:>7} {:>8} {:>8} {:>8} {:>8}",
                "% Total", "Sampled", "% ITLB", "% ITLB", "% ITLB"
            )?;
            writeln!(
                f,
                "{:>7} {:>8} {:>8} {:>8} {:>8}",
                "Sampled", "ITLB", "L2", "HPW", "Soft"
            )?;
            writeln!(
                f,
                "{:>7} {:>8} {:>8} {:>8} {:>8}  Cache Line",
                "Misses", "Misses", "Fill", "Fill", "Fill"
            )?;
            self.cache_lines(f, func.key, total)?;
        }
        writeln!(f, "{RULE}")?;
        Ok(())
    }

    /// `function`'s cache lines in address order, a gap between lines that
    /// are not adjacent.
    fn cache_lines(
        &self,
        f: &mut fmt::Formatter<'_>,
        function: FunctionKey,
        total: u64,
    ) -> fmt::Result {
        let mut previous: Option<u64> = None;
        for line in self.lines.ascending(|k| k.0, |k| k.1 == function) {
            match previous {
                None => writeln!(f, "{DASHES}")?,
                Some(p) if p + LINE_BYTES != line.key.0 => writeln!(f, "{TILDES}\n{DASHES}")?,
                Some(_) => {}
            }
            let n = line.counts.total();
            write!(f, "{:>7} {:>8}", Tenths::percent(n, total), n)?;
            self.fills(f, &line.counts)?;
            writeln!(f, "  {:#018x}\n{DASHES}", line.key.0)?;
            previous = Some(line.key.0);
        }
        Ok(())
    }

    /// What the tables could not hold, and the refused samples.
    fn footer(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nt = self.not_tabulated;
        if !nt.is_empty() {
            writeln!(
                f,
                "Tables full, misses not tabulated: {} by load module (capacity {MODULES}), \
                     {} by function (capacity {FUNCTIONS}), {} by cache line (capacity {LINES})",
                nt.modules, nt.functions, nt.lines
            )?;
        }
        if self.refused > 0 {
            writeln!(
                f,
                "Refused: {} samples claiming an L2 ITLB fill on Itanium",
                self.refused
            )?;
        }
        Ok(())
    }
}

impl<const MODULES: usize, const FUNCTIONS: usize, const LINES: usize> fmt::Display
    for ItlbReport<'_, MODULES, FUNCTIONS, LINES>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.total.total();
        self.header(f, total)?;
        self.module_summary(f, total)?;
        self.function_summary(f, total)?;
        self.function_details(f, total)?;
        self.footer(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    const APP_FNS: &[Function<'static>] = &[
        Function {
            name: "main",
            start: 0x4000_0000,
            end: 0x4000_0100,
        },
        Function {
            name: "solve",
            start: 0x4000_0100,
            end: 0x4000_0400,
        },
    ];
    const LIBC_FNS: &[Function<'static>] = &[Function {
        name: "memcpy",
        start: 0x2000_0020,
        end: 0x2000_0200,
    }];
    const SYMBOLS: &[LoadModule<'static>] = &[
        LoadModule {
            name: "app",
            start: 0x4000_0000,
            end: 0x4001_0000,
            functions: APP_FNS,
        },
        LoadModule {
            name: "libc.so.1",
            start: 0x2000_0000,
            end: 0x2001_0000,
            functions: LIBC_FNS,
        },
    ];

    fn s(address: u64, fill: TlbFill) -> ItlbSample {
        ItlbSample { address, fill }
    }

    fn record_all<const M: usize, const F: usize, const L: usize>(
        r: &mut ItlbReport<'_, M, F, L>,
        samples: &[(u64, TlbFill, u32)],
    ) {
        for &(a, fill, n) in samples {
            for _ in 0..n {
                r.record(s(a, fill)).unwrap();
            }
        }
    }

    use TlbFill::{Hpw, L2, Software};

    /// The mix the driver's handler hands on in its itlb test (two L2
    /// fills, one HPW, one software, in one function): the module row's
    /// percentages are the mix.
    #[test]
    fn the_handlers_sample_mix_makes_the_module_row() {
        const FNS: &[Function<'static>] = &[Function {
            name: "hot",
            start: 0x4000_0000,
            end: 0x4000_0100,
        }];
        const MODS: &[LoadModule<'static>] = &[LoadModule {
            name: "a.out",
            start: 0x4000_0000,
            end: 0x4001_0000,
            functions: FNS,
        }];
        let mut report: ItlbReport<'_, 2, 2, 4> = ItlbReport::new(MODS, L2Fills::Reported);
        record_all(
            &mut report,
            &[
                (0x4000_0040, L2, 1),
                (0x4000_00C0, L2, 1),
                (0x4000_0040, Hpw, 1),
                (0x4000_00C0, Software, 1),
            ],
        );
        let hot = report.function("a.out", "hot").unwrap();
        assert_eq!((hot.l2, hot.hpw, hot.software), (2, 1, 1));
        let text = report.to_string();
        assert!(
            text.contains("  100.0    100.0        4     50.0     25.0     25.0  a.out\n"),
            "{text}"
        );
    }

    #[test]
    fn itanium2_report_text_is_exact() {
        let mut r: ItlbReport<'_, 4, 8, 16> =
            ItlbReport::new(SYMBOLS, L2Fills::Reported).with_sample_after(100);
        record_all(
            &mut r,
            &[
                (0x4000_0010, L2, 3),
                (0x4000_0040, Hpw, 1),
                (0x4000_0200, L2, 2),
                (0x4000_0220, Software, 2),
                (0x4000_0380, Hpw, 1),
                // memcpy starts mid-line: the line's start is in no
                // function, so the sampled address decides.
                (0x2000_0030, Software, 1),
                (0x5000_0000, Hpw, 1),
            ],
        );
        assert_eq!(r.total().total(), 11);
        assert_eq!(
            r.function("app", "solve"),
            Some(FillCounts {
                l2: 2,
                hpw: 1,
                software: 2
            })
        );
        assert_eq!(r.line(0x4000_0200).unwrap().total(), 4);
        let expected = "\
itlb measurement: sampled instruction TLB misses (I-EAR)
Sampling: one in every 100 ITLB misses, 11 samples

Load Module Summary
------------------------------------------------------------------------------
% Total  Cumulat  Sampled   % ITLB   % ITLB   % ITLB
Sampled     % of     ITLB       L2      HPW     Soft
 Misses    Total   Misses     Fill     Fill     Fill  Load Module
------------------------------------------------------------------------------
   81.8     81.8        9     55.6     22.2     22.2  app
    9.1     90.9        1      0.0      0.0    100.0  libc.so.1
    9.1    100.0        1      0.0    100.0      0.0  (unknown)
------------------------------------------------------------------------------
  100.0                11     45.5     27.3     27.3  [total]

Function Summary
------------------------------------------------------------------------------
% Total  Cumulat  Sampled   % ITLB   % ITLB   % ITLB
Sampled     % of     ITLB       L2      HPW     Soft
 Misses    Total   Misses     Fill     Fill     Fill  Function   Load Module
------------------------------------------------------------------------------
   45.5     45.5        5     40.0     20.0     40.0  solve      app
   36.4     81.8        4     75.0     25.0      0.0  main       app
    9.1     90.9        1      0.0      0.0    100.0  memcpy     libc.so.1
    9.1    100.0        1      0.0    100.0      0.0  (unknown)  (unknown)
------------------------------------------------------------------------------

Function Details
------------------------------------------------------------------------------
solve [app]: 5 sampled misses
% Total  Sampled   % ITLB   % ITLB   % ITLB
Sampled     ITLB       L2      HPW     Soft
 Misses   Misses     Fill     Fill     Fill  Cache Line
- - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -
   36.4        4     50.0      0.0     50.0  0x0000000040000200
- - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -
~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~ ~
- - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -
    9.1        1      0.0    100.0      0.0  0x0000000040000380
- - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -
------------------------------------------------------------------------------
main [app]: 4 sampled misses
% Total  Sampled   % ITLB   % ITLB   % ITLB
Sampled     ITLB       L2      HPW     Soft
 Misses   Misses     Fill     Fill     Fill  Cache Line
- - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -
   27.3        3    100.0      0.0      0.0  0x0000000040000000
- - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -
    9.1        1      0.0    100.0      0.0  0x0000000040000040
- - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -
------------------------------------------------------------------------------
memcpy [libc.so.1]: 1 sampled misses
% Total  Sampled   % ITLB   % ITLB   % ITLB
Sampled     ITLB       L2      HPW     Soft
 Misses   Misses     Fill     Fill     Fill  Cache Line
- - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -
    9.1        1      0.0      0.0    100.0  0x0000000020000000
- - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -
------------------------------------------------------------------------------
(unknown) [(unknown)]: 1 sampled misses
% Total  Sampled   % ITLB   % ITLB   % ITLB
Sampled     ITLB       L2      HPW     Soft
 Misses   Misses     Fill     Fill     Fill  Cache Line
- - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -
    9.1        1      0.0    100.0      0.0  0x0000000050000000
- - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -
------------------------------------------------------------------------------
";
        assert_eq!(r.to_string(), expected);
    }

    #[test]
    fn itanium_report_has_no_l2_column_and_refuses_l2_samples() {
        let mut r: ItlbReport<'_, 2, 2, 2> = ItlbReport::new(SYMBOLS, L2Fills::NotApplicable);
        assert_eq!(r.record(s(0x4000_0000, L2)), Err(Refused::L2NotApplicable));
        record_all(&mut r, &[(0x4000_0000, Hpw, 2), (0x4000_0008, Software, 1)]);
        let text = r.to_string();
        let expected = "\
itlb measurement: sampled instruction TLB misses (I-EAR)
Samples: 3
L2 fills are not reported for, and do not apply to, Itanium systems (n/a)

Load Module Summary
------------------------------------------------------------------------------
% Total  Cumulat  Sampled   % ITLB   % ITLB   % ITLB
Sampled     % of     ITLB       L2      HPW     Soft
 Misses    Total   Misses     Fill     Fill     Fill  Load Module
------------------------------------------------------------------------------
  100.0    100.0        3      n/a     66.7     33.3  app
------------------------------------------------------------------------------
  100.0                 3      n/a     66.7     33.3  [total]
";
        assert!(text.starts_with(expected), "{text}");
        assert!(text.ends_with(
            "------------------------------------------------------------------------------\n\
             Refused: 1 samples claiming an L2 ITLB fill on Itanium\n"
        ));
    }

    #[test]
    fn full_tables_are_reported_not_panicked() {
        let mut r: ItlbReport<'_, 1, 1, 1> = ItlbReport::new(SYMBOLS, L2Fills::Reported);
        let t = r.record(s(0x4000_0000, Hpw)).unwrap();
        assert_eq!(
            t,
            Tabulated {
                module: true,
                function: true,
                line: true
            }
        );
        let t = r.record(s(0x4000_0100, Hpw)).unwrap();
        assert_eq!(
            t,
            Tabulated {
                module: true,
                function: false,
                line: false
            }
        );
        r.record(s(0x2000_0040, Software)).unwrap();
        assert_eq!(
            r.not_tabulated(),
            NotTabulated {
                modules: 1,
                functions: 2,
                lines: 2
            }
        );
        assert_eq!(r.total().total(), 3);
        let text = r.to_string();
        assert!(text.ends_with(
            "Tables full, misses not tabulated: 1 by load module (capacity 1), \
             2 by function (capacity 1), 2 by cache line (capacity 1)\n"
        ));
        // The summary's percentages are of all samples.
        assert!(text.contains("   66.7     66.7        2      0.0    100.0      0.0  app\n"));
    }

    #[test]
    fn percentages_round_half_up_in_tenths() {
        assert_eq!(Tenths::percent(1, 3).to_string(), "33.3");
        assert_eq!(Tenths::percent(2, 3).to_string(), "66.7");
        assert_eq!(Tenths::percent(1, 8).to_string(), "12.5");
        assert_eq!(Tenths::percent(1, 16).to_string(), "6.3");
        assert_eq!(Tenths::percent(0, 0).to_string(), "0.0");
        assert_eq!(format!("{:>6}", Tenths::percent(1, 1)), " 100.0");
    }
}

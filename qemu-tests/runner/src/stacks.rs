//! Call stacks a kernel reports, turned into folded stacks (Brendan Gregg's
//! format, one `root;caller;callee count` line per distinct stack) with the
//! function names from the kernel's own ELF symbol table, and, with the
//! `flamegraph` feature, into an SVG flame graph ([`write_svg`], by the
//! `inferno` crate).
//!
//! # The kernel's side
//!
//! ```text
//! stack: <count> <hex address> <hex address> ...         one call stack, innermost first
//! stack <root>: <count> <hex address> ...                the same under a root frame (a CPU, a task)
//! flamegraph title: <text>                               the SVG's title
//! folded-expect: <root;caller;callee> <count>            a line the folded stacks must contain
//! ```
//!
//! The first address of a stack is where it was interrupted (symbolised as
//! it is), each later one a return address (symbolised one byte back, in
//! the call instruction: a call that ends a function returns past its
//! end). Addresses are hexadecimal without `0x`. An address in no function
//! of the symbol table folds as `[unknown]`. `pmu::sampling::CallChain`
//! gives these addresses, and `pmu-hobby`'s `stacks` module prints them.
//!
//! A kernel that prints `folded-expect:` lines gets one more case,
//! `folded_stacks` ([`check`]): the stacks it reported, folded with its ELF,
//! must be exactly those lines (any order).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::{CaseResult, Verdict};

/// The stacks of one run, as the kernel reported them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stacks {
    /// Each reported stack: its root frame (if any), its count, its
    /// addresses innermost first.
    pub stacks: Vec<(Option<String>, u64, Vec<u64>)>,
    /// The title the kernel gave (`flamegraph title:`).
    pub title: Option<String>,
    /// The folded lines the kernel expects (`folded-expect:`).
    pub expected: Vec<String>,
}

impl Stacks {
    /// The stack lines of `console`; a malformed `stack` line is an error
    /// naming it.
    pub fn parse(console: &str) -> Result<Stacks, String> {
        let mut out = Stacks::default();
        for line in console.lines() {
            if let Some(title) = line.strip_prefix("flamegraph title: ") {
                out.title = Some(title.trim().to_string());
            } else if let Some(expected) = line.strip_prefix("folded-expect: ") {
                out.expected.push(expected.trim().to_string());
            } else if let Some(rest) = line.strip_prefix("stack") {
                let Some((root, body)) = rest.split_once(": ") else {
                    continue;
                };
                let root = match root.strip_prefix(' ') {
                    Some(r) if !r.is_empty() && !r.contains(' ') => Some(r.to_string()),
                    None if root.is_empty() => None,
                    _ => continue,
                };
                let bad =
                    || format!("a stack line that is not `stack[ root]: count addr...`: {line:?}");
                let mut words = body.split_whitespace();
                let count = words.next().and_then(|w| w.parse().ok()).ok_or_else(bad)?;
                let addrs = words
                    .map(|w| u64::from_str_radix(w, 16))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|_| bad())?;
                if addrs.is_empty() {
                    return Err(bad());
                }
                out.stacks.push((root, count, addrs));
            }
        }
        Ok(out)
    }

    /// Whether the kernel reported any stack.
    pub fn is_empty(&self) -> bool {
        self.stacks.is_empty()
    }

    /// The samples in all stacks.
    pub fn samples(&self) -> u64 {
        self.stacks.iter().map(|s| s.1).sum()
    }

    /// The folded stacks: `root;outermost;...;innermost` to its count,
    /// names from `symbols`.
    pub fn fold(&self, symbols: &Symbols) -> BTreeMap<String, u64> {
        let mut folded = BTreeMap::new();
        for (root, count, addrs) in &self.stacks {
            let mut line = String::new();
            if let Some(root) = root {
                line += root;
            }
            for (i, &a) in addrs.iter().enumerate().rev() {
                if !line.is_empty() {
                    line.push(';');
                }
                let at = if i == 0 { a } else { a.wrapping_sub(1) };
                line += symbols.name(at).unwrap_or("[unknown]");
            }
            *folded.entry(line).or_insert(0) += count;
        }
        folded
    }
}

/// The folded stacks as text, a `stack count` line each.
pub fn folded_text(folded: &BTreeMap<String, u64>) -> String {
    let mut text = String::new();
    for (stack, count) in folded {
        let _ = writeln!(text, "{stack} {count}");
    }
    text
}

/// The functions of an ELF file: address ranges and demangled names.
#[derive(Clone, Debug, Default)]
pub struct Symbols {
    /// Start, end (exclusive) and name, sorted by start.
    functions: Vec<(u64, u64, String)>,
}

impl Symbols {
    /// The function symbols (`STT_FUNC`, with a size) of the ELF file
    /// `elf`, their names demangled without the hash suffix.
    pub fn from_elf(elf: &[u8]) -> Result<Symbols, String> {
        use object::{Object, ObjectSymbol, SymbolKind};
        let file = object::File::parse(elf).map_err(|e| format!("not an ELF file: {e}"))?;
        let mut functions: Vec<_> = file
            .symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0)
            .filter_map(|s| {
                let name = s.name().ok()?;
                let name = format!("{:#}", rustc_demangle::demangle(name));
                Some((s.address(), s.address() + s.size(), name))
            })
            .collect();
        if functions.is_empty() {
            return Err("the ELF file has no function symbols (stripped?)".into());
        }
        functions.sort();
        functions.dedup_by_key(|f| f.0);
        Ok(Symbols { functions })
    }

    /// The symbols of the ELF file at `path`.
    pub fn from_path(path: &Path) -> Result<Symbols, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Symbols::from_elf(&bytes).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The function containing `address`.
    pub fn name(&self, address: u64) -> Option<&str> {
        let i = self.functions.partition_point(|f| f.0 <= address);
        let (start, end, name) = self.functions.get(i.checked_sub(1)?)?;
        (*start..*end).contains(&address).then_some(name.as_str())
    }
}

/// The `folded_stacks` case of a kernel whose console has `folded-expect:`
/// lines (`None` without any): its stacks folded with the symbols of
/// `kernel` must be exactly the expected lines.
pub fn check(console: &str, kernel: &Path) -> Option<CaseResult> {
    let case = |passed: bool, note: String| {
        let verdict = if passed {
            Verdict::Passed
        } else {
            Verdict::Failed
        };
        CaseResult::new("folded_stacks", verdict, note)
    };
    let stacks = match Stacks::parse(console) {
        Ok(s) if s.expected.is_empty() => return None,
        Ok(s) => s,
        Err(e) => return Some(case(false, format!("\n    {e}"))),
    };
    let symbols = match Symbols::from_path(kernel) {
        Ok(s) => s,
        Err(e) => return Some(case(false, format!("\n    {e}"))),
    };
    let got: Vec<String> = folded_text(&stacks.fold(&symbols))
        .lines()
        .map(String::from)
        .collect();
    let mut expected = stacks.expected.clone();
    expected.sort();
    if got == expected {
        return Some(case(true, format!(" ({} stacks)", got.len())));
    }
    let mut note = String::from("\n    folded:");
    for l in &got {
        note += &format!("\n    | {l}");
    }
    note += "\n    expected:";
    for l in &expected {
        note += &format!("\n    | {l}");
    }
    Some(case(false, note))
}

/// Writes the flame graph of `folded` to `path` as SVG, titled `title`
/// (`inferno`'s flame graph: the root at the bottom, a frame's width its
/// share of the samples).
#[cfg(feature = "flamegraph")]
pub fn write_svg(folded: &BTreeMap<String, u64>, title: &str, path: &Path) -> Result<(), String> {
    let text = folded_text(folded);
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_string();
    options.count_name = "samples".to_string();
    let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    inferno::flamegraph::from_lines(&mut options, text.lines(), &mut out)
        .map_err(|e| format!("writing {}: {e}", path.display()))
}

/// The stacks `console` reports, folded with `kernel`'s symbols and drawn
/// to `svg` (`None` when it reports none): the samples drawn, or why not.
#[cfg(feature = "flamegraph")]
pub fn flamegraph(console: &str, kernel: &Path, svg: &Path) -> Option<Result<u64, String>> {
    let stacks = match Stacks::parse(console) {
        Ok(s) if s.is_empty() => return None,
        Ok(s) => s,
        Err(e) => return Some(Err(e)),
    };
    let name = kernel.file_name().map_or_else(
        || kernel.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let title = stacks.title.clone().unwrap_or(name);
    Some(
        Symbols::from_path(kernel)
            .and_then(|symbols| write_svg(&stacks.fold(&symbols), &title, svg))
            .map(|()| stacks.samples()),
    )
}

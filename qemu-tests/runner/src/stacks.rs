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
//! folded-same: <root> <root>                             two roots' folded stacks must be equal
//! ```
//!
//! The first address of a stack is where it was interrupted (symbolised as
//! it is), each later one a return address (symbolised one byte back, in
//! the call instruction: a call that ends a function returns past its
//! end). Addresses are hexadecimal without `0x`. An address in no function
//! of the symbol table folds as `[unknown]`. `pmu::sampling::CallChain`
//! gives these addresses, and `pmu-hobby`'s `stacks` module prints them.
//!
//! These lines are for the runner: it does not copy them to its output
//! ([`is_stack_line`]), and says instead where the flame graph went.
//!
//! A kernel that prints `folded-expect:` lines gets one more case,
//! `folded_stacks` ([`check`]): the stacks it reported, folded with its ELF,
//! must be exactly those lines (any order). A kernel that prints
//! `folded-same: a b` gets the case `flame_graphs_equal`: the stacks under
//! root `a` and those under root `b`, folded with its ELF and their roots
//! taken off, must be the same lines with the same counts: the two flame
//! graphs are one (a profile's stacks from two sources, such as the LBR's
//! call stacks and a frame-pointer walk).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::CaseResult;

/// Whether `line` is one of the stack protocol's lines (see the [module
/// documentation](self)), which the runner does not echo.
pub fn is_stack_line(line: &str) -> bool {
    stack_line(line).is_some_and(|l| l.is_ok())
        || line.starts_with("flamegraph title: ")
        || line.starts_with("folded-expect: ")
        || line.starts_with("folded-same: ")
}

/// One stack line: `stack: ...` always (malformed, an error quoting it);
/// `stack <root>: ...` only when well-formed (else it is the kernel's own
/// text, such as `stack usage: 3 KiB`).
type StackLine = (Option<String>, u64, Vec<u64>);

fn stack_line(line: &str) -> Option<Result<StackLine, String>> {
    let (head, body) = line.strip_prefix("stack")?.split_once(": ")?;
    let root = match head.strip_prefix(' ') {
        Some(r) if !r.is_empty() && !r.contains(' ') => Some(r.to_string()),
        None if head.is_empty() => None,
        _ => return None,
    };
    let mut words = body.split_whitespace();
    let count = words.next().and_then(|w| w.parse().ok());
    let addrs: Option<Vec<u64>> = words.map(|w| u64::from_str_radix(w, 16).ok()).collect();
    match (count, addrs) {
        (Some(count), Some(addrs)) if !addrs.is_empty() => Some(Ok((root, count, addrs))),
        _ if root.is_some() => None,
        _ => Some(Err(format!(
            "a stack line that is not `stack[ root]: count address...`: {line:?}"
        ))),
    }
}

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
    /// The roots whose folded stacks must be equal (`folded-same:`).
    pub same: Vec<(String, String)>,
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
            } else if let Some(same) = line.strip_prefix("folded-same: ") {
                let mut roots = same.split_whitespace().map(String::from);
                match (roots.next(), roots.next(), roots.next()) {
                    (Some(a), Some(b), None) => out.same.push((a, b)),
                    _ => {
                        return Err(format!(
                            "a folded-same line that is not `folded-same: root root`: {line:?}"
                        ));
                    }
                }
            } else if let Some(stack) = stack_line(line) {
                out.stacks.push(stack?);
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
    /// The code symbols of the ELF file `elf`, their names demangled
    /// without the hash suffix: functions (`STT_FUNC`) with their sizes,
    /// and code labels without a size (assembly entry points, such as a
    /// kernel's boot code), which reach to the next symbol.
    pub fn from_elf(elf: &[u8]) -> Result<Symbols, String> {
        use object::{Object, ObjectSection, ObjectSymbol, SectionKind, SymbolKind};
        let file = object::File::parse(elf).map_err(|e| format!("not an ELF file: {e}"))?;
        // A label in assembly has no type: it is code when its section is.
        let in_code = |s: &object::Symbol<'_, '_>| {
            s.section_index()
                .and_then(|i| file.section_by_index(i).ok())
                .is_some_and(|sec| sec.kind() == SectionKind::Text)
        };
        let mut code: Vec<(u64, u64, String)> = file
            .symbols()
            .filter(|s| s.address() != 0)
            .filter(|s| match s.kind() {
                SymbolKind::Text => true,
                SymbolKind::Unknown | SymbolKind::Label => in_code(s),
                _ => false,
            })
            .filter_map(|s| {
                let name = format!("{:#}", rustc_demangle::demangle(s.name().ok()?));
                Some((s.address(), s.address() + s.size(), name))
            })
            .collect();
        if code.is_empty() {
            return Err("the ELF file has no function symbols (stripped?)".into());
        }
        // Functions before labels at the same address: they win.
        code.sort_by_key(|c| (c.0, c.1 == c.0));
        // A label reaches to the next symbol.
        let starts: Vec<u64> = code.iter().map(|c| c.0).collect();
        for (start, end, _) in code.iter_mut().filter(|c| c.1 == c.0) {
            let next = starts.partition_point(|&s| s <= *start);
            *end = starts.get(next).copied().unwrap_or(*start);
        }
        Ok(Symbols::from_functions(code))
    }

    /// Functions given as (start, end, name), for tests and for symbol
    /// tables from elsewhere; of several at one address, the first given.
    pub fn from_functions(mut functions: Vec<(u64, u64, String)>) -> Symbols {
        functions.sort_by_key(|f| f.0);
        functions.dedup_by_key(|f| f.0);
        Symbols { functions }
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

/// The cases of a kernel's stack lines (none without `folded-expect:` or
/// `folded-same:` lines): `folded_stacks`, its stacks folded with the
/// symbols of `kernel` exactly the expected lines; `flame_graphs_equal`,
/// the folded stacks of each `folded-same` pair of roots equal with the
/// roots taken off.
pub fn check(console: &str, kernel: &Path) -> Vec<CaseResult> {
    let stacks = match Stacks::parse(console) {
        Ok(s) if s.expected.is_empty() && s.same.is_empty() => return Vec::new(),
        Ok(s) => s,
        Err(e) => {
            return vec![CaseResult::judged(
                "folded_stacks",
                false,
                format!("\n    {e}"),
            )];
        }
    };
    let symbols = Symbols::from_path(kernel);
    let mut cases = Vec::new();
    if !stacks.expected.is_empty() {
        cases.push(expected_case(&stacks, &symbols));
    }
    if !stacks.same.is_empty() {
        cases.push(same_case(&stacks, &symbols));
    }
    cases
}

fn lines(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The `folded_stacks` case: the stacks folded exactly the expected lines.
fn expected_case(stacks: &Stacks, symbols: &Result<Symbols, String>) -> CaseResult {
    let case = |passed, note| CaseResult::judged("folded_stacks", passed, note);
    let symbols = match symbols {
        Ok(s) => s,
        Err(e) => return case(false, format!("\n    {e}")),
    };
    let got: Vec<String> = folded_text(&stacks.fold(symbols))
        .lines()
        .map(String::from)
        .collect();
    let mut expected = stacks.expected.clone();
    expected.sort();
    if got == expected {
        return case(true, format!(" ({} stacks)", got.len()));
    }
    let note = CaseResult::mismatch("folded", &lines(&got), &lines(&expected));
    case(false, note)
}

/// The folded stacks under `root`, the root taken off (and the stacks
/// under no root or another left out).
fn under(folded: &BTreeMap<String, u64>, root: &str) -> Vec<String> {
    folded
        .iter()
        .filter_map(|(stack, count)| {
            let rest = stack.strip_prefix(root)?.strip_prefix(';')?;
            Some(format!("{rest} {count}"))
        })
        .collect()
}

/// The `flame_graphs_equal` case: each `folded-same` pair's stacks equal.
fn same_case(stacks: &Stacks, symbols: &Result<Symbols, String>) -> CaseResult {
    let case = |passed, note| CaseResult::judged("flame_graphs_equal", passed, note);
    let symbols = match symbols {
        Ok(s) => s,
        Err(e) => return case(false, format!("\n    {e}")),
    };
    let folded = stacks.fold(symbols);
    let mut compared = 0;
    for (a, b) in &stacks.same {
        let (left, right) = (under(&folded, a), under(&folded, b));
        if left.is_empty() {
            return case(false, format!("\n    no stacks under root {a}"));
        }
        if left != right {
            let note = CaseResult::mismatch(&format!("{a}'s"), &lines(&left), &lines(&right));
            return case(
                false,
                format!("{note}\n    (the stacks under {b} are the expected ones)"),
            );
        }
        compared += left.len();
    }
    case(
        true,
        format!(
            " ({} pair{} of roots, {compared} stacks each side)",
            stacks.same.len(),
            if stacks.same.len() == 1 { "" } else { "s" }
        ),
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    fn symbols() -> Symbols {
        Symbols::from_functions(vec![
            (0x100, 0x140, "k::leaf".into()),
            (0x140, 0x180, "k::mid".into()),
            (0x180, 0x1C0, "k::root".into()),
        ])
    }

    #[test]
    fn stacks_fold_innermost_last_with_return_addresses_one_byte_back() {
        let console = "boot\n\
            stack: 2 110 150 190\n\
            stack: 1 120 150 190\n\
            stack cpu1: 4 108 180\n\
            stack usage: fine\n\
            flamegraph title: t\n";
        let s = Stacks::parse(console).unwrap();
        assert_eq!(s.stacks.len(), 3);
        assert_eq!(s.samples(), 7);
        assert_eq!(s.title.as_deref(), Some("t"));
        let folded = s.fold(&symbols());
        // 0x180 returns into k::mid (its call is the last instruction).
        assert_eq!(
            folded_text(&folded),
            "cpu1;k::mid;k::leaf 4\nk::root;k::mid;k::leaf 3\n"
        );
    }

    #[test]
    fn unknown_addresses_fold_as_unknown() {
        let s = Stacks::parse("stack: 1 110 900\n").unwrap();
        assert_eq!(folded_text(&s.fold(&symbols())), "[unknown];k::leaf 1\n");
        assert_eq!(symbols().name(0xFF), None);
        assert_eq!(symbols().name(0x1C0), None);
        assert_eq!(symbols().name(0x1BF), Some("k::root"));
    }

    #[test]
    fn malformed_stack_lines_are_errors_that_quote_them() {
        for bad in ["stack: 1", "stack: 1 xyz", "stack: x 100"] {
            let e = Stacks::parse(bad);
            assert!(e.as_ref().is_err_and(|e| e.contains(bad)), "{bad}: {e:?}");
        }
        // With a root, only a well-formed line is a stack line.
        assert_eq!(Stacks::parse("stack usage: 3 KiB"), Ok(Stacks::default()));
    }

    #[test]
    fn only_protocol_lines_are_kept_from_the_echo() {
        assert!(is_stack_line("stack: 3 100 200"));
        assert!(is_stack_line("stack cpu0: 3 100"));
        assert!(is_stack_line("folded-expect: a;b 1"));
        assert!(!is_stack_line("stack usage: 3 KiB"));
        assert!(!is_stack_line("stack overflow"));
        assert!(!is_stack_line("test k::stack ... ok"));
    }

    /// Two roots' flame graphs: equal when their folded stacks (roots off)
    /// are, whatever the addresses (a return address and a call's address
    /// plus one fold alike); a difference is named.
    #[test]
    fn two_roots_flame_graphs_compare() {
        let console = "stack lbr: 2 110 150 190\n\
            stack fp: 1 118 14F 19A\n\
            stack fp: 1 110 150 190\n\
            stack lbr: 1 120 181\n\
            stack fp: 1 120 181\n\
            folded-same: lbr fp\n";
        let s = Stacks::parse(console).unwrap();
        assert_eq!(s.same, [("lbr".to_string(), "fp".to_string())]);
        let symbols = Ok(symbols());
        let case = same_case(&s, &symbols);
        assert!(!case.failed(), "{case:?}");
        assert!(case.note.contains("2 stacks each side"), "{case:?}");
        let unequal = console.replace("stack fp: 1 120 181", "stack fp: 1 120 150");
        let case = same_case(&Stacks::parse(&unequal).unwrap(), &symbols);
        assert!(case.failed() && case.note.contains("k::leaf"), "{case:?}");
        let none = "stack fp: 1 110\nfolded-same: lbr fp\n";
        let case = same_case(&Stacks::parse(none).unwrap(), &symbols);
        assert!(case.failed() && case.note.contains("no stacks under root lbr"));
        assert!(Stacks::parse("folded-same: one\n").is_err());
        assert!(is_stack_line("folded-same: a b"));
    }

    #[test]
    fn the_check_compares_folded_stacks_exactly() {
        let dir = std::env::temp_dir().join(format!("pmu-stacks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Not an ELF file: the check fails, saying so.
        let fake = dir.join("kernel");
        std::fs::write(&fake, b"not elf").unwrap();
        let console = "stack: 1 110\nfolded-expect: k::leaf 1\n";
        let case = &check(console, &fake)[0];
        assert!(
            case.failed() && case.note.contains("not an ELF"),
            "{case:?}"
        );
        assert!(
            check("stack: 1 110\n", &fake).is_empty(),
            "no expectations, no case"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

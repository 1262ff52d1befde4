//! The crate's modules import each other in one direction only: a test
//! that fails on any import circle (compiled for tests only).
//!
//! It reads the library's sources (`src/`, from `lib.rs` down the `mod`
//! declarations), drops comments, string literals and test code (items
//! under `#[cfg(test)]`, hence every `tests` module), and collects every
//! path into the crate: `use crate::..`, `use super::..`, `use self::..`
//! trees, and `crate::`, `$crate::`, `super::` and `self::` paths anywhere
//! else (types, calls, macro invocations, macro bodies). Each path is
//! resolved to the module (file) that defines what it names. A path
//! through a module above the importing one (a directory's `mod.rs`
//! facade, `super::X`) is followed through that module's `use`
//! declarations to the defining file, so a facade does not hide a
//! dependency; a path through any other module stops at that module, so a
//! re-export does not hide one either. A glob import of a module above
//! (`use super::*`) counts as an import of each name the file uses that
//! the glob brings in from elsewhere.
//!
//! The graph is then checked at every level: for each module with two or
//! more child modules (the crate root's top-level modules, `arch`, each
//! architecture and model directory, ...), an import from inside child
//! `a` to inside child `b` is an edge `a -> b`, and every strongly
//! connected component of two or more children is a circle, reported with
//! the imports that form it (file, line and path).
//!
//! `cargo test -p pmu --lib layering -- --nocapture` also prints the
//! top-level module graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module by its path below the crate root (`[]` is the root).
type ModPath = Vec<String>;

/// One level's graph: for each edge `(a, b)` between two children, the
/// imports that form it.
type Level = BTreeMap<(String, String), Vec<String>>;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Punct(char),
    /// `::`.
    PathSep,
    /// A literal or a lifetime.
    Lit,
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    line: usize,
}

impl Token {
    fn is(&self, c: char) -> bool {
        self.tok == Tok::Punct(c)
    }

    fn ident(&self) -> Option<&str> {
        match &self.tok {
            Tok::Ident(s) => Some(s),
            _ => None,
        }
    }
}

/// The tokens of `src` that matter here: identifiers, punctuation and
/// `::`, every literal (strings included) one opaque token, comments gone.
fn lex(src: &str) -> Vec<Token> {
    let c: Vec<char> = src.chars().collect();
    let at = |k: usize| c.get(k).copied().unwrap_or('\0');
    let ident_char = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    // Skips from `from` to past the closing `"` of a (non-raw) string.
    let string_end = |mut k: usize, line: &mut usize| {
        while k < c.len() && c[k] != '"' {
            if c[k] == '\\' {
                k += 1;
            }
            if at(k) == '\n' {
                *line += 1;
            }
            k += 1;
        }
        k + 1
    };
    while i < c.len() {
        let ch = c[i];
        let start_line = line;
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if c[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if ch == '"' {
            i = string_end(i + 1, &mut line);
            out.push(Token {
                tok: Tok::Lit,
                line: start_line,
            });
        } else if ch == '\'' {
            // A character literal, or a lifetime (a label): both opaque.
            if at(i + 1) == '\\' {
                i += 3;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
                while i < c.len() && ident_char(c[i]) {
                    i += 1;
                }
            }
            out.push(Token {
                tok: Tok::Lit,
                line: start_line,
            });
        } else if ch.is_ascii_digit() {
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
            out.push(Token {
                tok: Tok::Lit,
                line: start_line,
            });
        } else if ident_char(ch) {
            // Raw strings (r"..", r#".."#, br"..", cr".."), byte and C
            // strings (b"..", c".."), byte characters, raw identifiers.
            let prefix_r = if ch == 'r' {
                Some(i + 1)
            } else if (ch == 'b' || ch == 'c') && at(i + 1) == 'r' {
                Some(i + 2)
            } else {
                None
            };
            if let Some(j) = prefix_r {
                let mut hashes = 0;
                while at(j + hashes) == '#' {
                    hashes += 1;
                }
                if at(j + hashes) == '"' {
                    let mut k = j + hashes + 1;
                    loop {
                        if k >= c.len() {
                            break;
                        }
                        if c[k] == '"' && (1..=hashes).all(|h| at(k + h) == '#') {
                            k += 1 + hashes;
                            break;
                        }
                        if c[k] == '\n' {
                            line += 1;
                        }
                        k += 1;
                    }
                    i = k;
                    out.push(Token {
                        tok: Tok::Lit,
                        line: start_line,
                    });
                    continue;
                }
                if ch == 'r' && hashes == 1 && ident_char(at(j + 1)) {
                    i = j + 1; // r#ident: the identifier follows
                    continue;
                }
            }
            if (ch == 'b' || ch == 'c') && at(i + 1) == '"' {
                i = string_end(i + 2, &mut line);
                out.push(Token {
                    tok: Tok::Lit,
                    line: start_line,
                });
                continue;
            }
            if ch == 'b' && at(i + 1) == '\'' {
                i += 1; // the character literal follows
                continue;
            }
            let s = i;
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
            out.push(Token {
                tok: Tok::Ident(c[s..i].iter().collect()),
                line: start_line,
            });
        } else if ch == ':' && at(i + 1) == ':' {
            out.push(Token {
                tok: Tok::PathSep,
                line,
            });
            i += 2;
        } else {
            out.push(Token {
                tok: Tok::Punct(ch),
                line,
            });
            i += 1;
        }
    }
    out
}

/// The index past the group that opens at `open` (`(`, `[` or `{`).
fn group_end(toks: &[Token], open: usize) -> usize {
    let mut depth = 0i32;
    for (k, t) in toks.iter().enumerate().skip(open) {
        if t.is('(') || t.is('[') || t.is('{') {
            depth += 1;
        } else if t.is(')') || t.is(']') || t.is('}') {
            depth -= 1;
            if depth == 0 {
                return k + 1;
            }
        }
    }
    toks.len()
}

/// If a `#[cfg(test)]` (or `#[cfg(all(test, ..))]`) attribute starts at
/// `i`, the index past it.
fn cfg_test_at(toks: &[Token], i: usize) -> Option<usize> {
    let id = |k: usize| toks.get(k).and_then(Token::ident);
    let p = |k: usize, c: char| toks.get(k).is_some_and(|t| t.is(c));
    if !(p(i, '#') && p(i + 1, '[') && id(i + 2) == Some("cfg") && p(i + 3, '(')) {
        return None;
    }
    let test = id(i + 4) == Some("test") && p(i + 5, ')') && p(i + 6, ']');
    let all_test = id(i + 4) == Some("all") && p(i + 5, '(') && id(i + 6) == Some("test");
    (test || all_test).then(|| group_end(toks, i + 1))
}

/// The tokens without test code: each item, field, statement or
/// expression under `#[cfg(test)]`, with its other attributes.
fn strip_test_code(toks: Vec<Token>) -> Vec<Token> {
    let mut out = Vec::with_capacity(toks.len());
    let mut i = 0;
    while i < toks.len() {
        let Some(mut k) = cfg_test_at(&toks, i) else {
            out.push(toks[i].clone());
            i += 1;
            continue;
        };
        while toks.get(k).is_some_and(|t| t.is('#')) && toks.get(k + 1).is_some_and(|t| t.is('[')) {
            k = group_end(&toks, k + 1);
        }
        // The item ends at a `;` or `,` outside brackets, at the end of
        // its block, or before the bracket that closes around it.
        let mut depth = 0i32;
        while k < toks.len() {
            let t = &toks[k];
            if t.is('(') || t.is('[') || t.is('{') {
                depth += 1;
            } else if t.is(')') || t.is(']') || t.is('}') {
                if depth == 0 {
                    break;
                }
                depth -= 1;
                if depth == 0 && t.is('}') {
                    k += 1;
                    break;
                }
            } else if depth == 0 && (t.is(';') || t.is(',')) {
                k += 1;
                break;
            }
            k += 1;
        }
        i = k;
    }
    out
}

/// A `use` declaration's leaf: the path, and the name it brings (`None`
/// for a glob).
#[derive(Clone, Debug)]
struct Import {
    path: Vec<String>,
    name: Option<String>,
    /// `pub use` (of any visibility): a glob re-exports only these.
    public: bool,
}

/// A path into the crate as written, where it is written.
#[derive(Clone, Debug)]
struct Ref {
    path: Vec<String>,
    line: usize,
    /// The inline modules (`mod name { .. }`) around it, outermost first.
    inline: Vec<String>,
}

/// Parses the use tree at `k` under `prefix` into `out`; the index past it.
fn use_tree(toks: &[Token], mut k: usize, prefix: &[String], out: &mut Vec<Import>) -> usize {
    if toks.get(k).is_some_and(|t| t.tok == Tok::PathSep) {
        k += 1;
    }
    if toks.get(k).is_some_and(|t| t.is('$')) {
        k += 1;
    }
    let Some(t) = toks.get(k) else {
        return k;
    };
    if t.is('{') {
        k += 1;
        while k < toks.len() && !toks[k].is('}') {
            k = use_tree(toks, k, prefix, out);
            if toks.get(k).is_some_and(|t| t.is(',')) {
                k += 1;
            }
        }
        return k + 1;
    }
    if t.is('*') {
        out.push(Import {
            path: prefix.to_vec(),
            name: None,
            public: false,
        });
        return k + 1;
    }
    let Some(seg) = t.ident() else {
        return k + 1;
    };
    let mut path = prefix.to_vec();
    if seg != "self" || prefix.is_empty() {
        path.push(seg.to_string());
    }
    k += 1;
    if toks.get(k).is_some_and(|t| t.tok == Tok::PathSep) {
        return use_tree(toks, k + 1, &path, out);
    }
    let mut name = path.last().cloned();
    if toks.get(k).and_then(Token::ident) == Some("as") {
        name = toks.get(k + 1).and_then(Token::ident).map(str::to_string);
        k += 2;
    }
    out.push(Import {
        path,
        name,
        public: false,
    });
    k
}

/// What one source file says, test code dropped.
#[derive(Debug, Default)]
struct Scanned {
    /// `mod name;` at file level: the child modules in files of their own.
    children: Vec<String>,
    /// Names of the items defined at file level (or in a macro invocation
    /// there, such as `register! { pub struct .. }`).
    defs: BTreeSet<String>,
    /// `#[macro_export]` macros defined in the file (they live at the root).
    exported: Vec<String>,
    /// File-level `use` declarations (what the module re-exports, or
    /// brings into scope for its children).
    imports: Vec<Import>,
    /// Every path into the crate.
    refs: Vec<Ref>,
    /// Every name used on its own (not after `.` or `::`), with the line
    /// of its first use: what a glob import of a module above may bring.
    names: BTreeMap<String, usize>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Block {
    /// The body of a macro invocation (`name! { .. }`): items in it are the
    /// file's.
    Macro,
    /// An inline module.
    Mod,
    Other,
}

const KEYWORDS: [&str; 8] = [
    "fn", "unsafe", "extern", "async", "const", "mut", "impl", "dyn",
];

fn scan(src: &str) -> Scanned {
    let toks = strip_test_code(lex(src));
    let mut out = Scanned::default();
    let mut blocks: Vec<(Block, Option<String>)> = Vec::new();
    let mut export_next = false;
    let id = |k: usize| toks.get(k).and_then(Token::ident);
    let sep = |k: usize| toks.get(k).is_some_and(|t| t.tok == Tok::PathSep);
    let mut i = 0;
    while i < toks.len() {
        let file_level = blocks.iter().all(|(b, _)| *b == Block::Macro);
        let inline: Vec<String> = blocks.iter().filter_map(|(_, n)| n.clone()).collect();
        let t = &toks[i];
        let prev = |n: usize| i.checked_sub(n).map(|k| &toks[k]);
        if t.is('{') || t.is('(') || t.is('[') {
            let macro_body =
                prev(1).is_some_and(|p| p.is('!')) && prev(2).is_some_and(|p| p.ident().is_some());
            let module = t.is('{') && prev(2).and_then(Token::ident) == Some("mod");
            blocks.push(if macro_body {
                (Block::Macro, None)
            } else if module {
                (
                    Block::Mod,
                    prev(1).and_then(Token::ident).map(str::to_string),
                )
            } else {
                (Block::Other, None)
            });
            i += 1;
            continue;
        }
        if t.is('}') || t.is(')') || t.is(']') {
            blocks.pop();
            i += 1;
            continue;
        }
        if t.is('#')
            && toks.get(i + 1).is_some_and(|t| t.is('['))
            && id(i + 2) == Some("macro_export")
        {
            export_next = true;
        }
        let Some(word) = t.ident() else {
            i += 1;
            continue;
        };
        let after_sep = prev(1).is_some_and(|p| p.tok == Tok::PathSep);
        if !after_sep && !prev(1).is_some_and(|p| p.is('.')) {
            out.names.entry(word.to_string()).or_insert(t.line);
        }
        match word {
            "use" if !after_sep => {
                let public = prev(1).and_then(Token::ident) == Some("pub")
                    || (prev(1).is_some_and(|p| p.is(')'))
                        && toks[..i]
                            .iter()
                            .rposition(|t| t.is('('))
                            .is_some_and(|k| k > 0 && toks[k - 1].ident() == Some("pub")));
                let mut leaves = Vec::new();
                i = use_tree(&toks, i + 1, &[], &mut leaves);
                for mut leaf in leaves {
                    leaf.public = public;
                    if matches!(
                        leaf.path.first().map(String::as_str),
                        Some("crate" | "super" | "self")
                    ) || leaf.path.len() > 1
                    {
                        out.refs.push(Ref {
                            path: leaf.path.clone(),
                            line: t.line,
                            inline: inline.clone(),
                        });
                    }
                    if file_level {
                        out.imports.push(leaf);
                    }
                }
                continue;
            }
            "crate" | "super" | "self" if sep(i + 1) && !after_sep => {
                let mut path = vec![word.to_string()];
                let mut k = i + 1;
                while sep(k) {
                    match id(k + 1) {
                        Some(s) => path.push(s.to_string()),
                        None => break,
                    }
                    k += 2;
                }
                out.refs.push(Ref {
                    path,
                    line: t.line,
                    inline,
                });
                i = k;
                continue;
            }
            "macro_rules" if toks.get(i + 1).is_some_and(|t| t.is('!')) => {
                if let Some(name) = id(i + 2) {
                    out.defs.insert(name.to_string());
                    if export_next {
                        out.exported.push(name.to_string());
                    }
                }
                export_next = false;
            }
            "struct" | "enum" | "union" | "trait" | "fn" | "const" | "static" | "type" | "mod"
                if file_level =>
            {
                if let Some(name) = id(i + 1).filter(|n| !KEYWORDS.contains(n)) {
                    out.defs.insert(name.to_string());
                    if word == "mod"
                        && toks.get(i + 2).is_some_and(|t| t.is(';'))
                        && blocks.is_empty()
                    {
                        out.children.push(name.to_string());
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// One module of the crate: a file.
#[derive(Debug)]
struct Module {
    /// The file, relative to the crate's directory (`src/..`).
    file: String,
    scanned: Scanned,
}

/// An import of one module from another, as written.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Edge {
    from: ModPath,
    to: ModPath,
    file: String,
    line: usize,
    /// The path as written.
    path: String,
}

impl Edge {
    /// `file:line `path``.
    fn at(&self) -> String {
        format!("{}:{} `{}`", self.file, self.line, self.path)
    }
}

/// The crate's modules and their imports.
struct Crate {
    modules: BTreeMap<ModPath, Module>,
    /// `#[macro_export]` macros: name, defining module.
    exported: BTreeMap<String, ModPath>,
}

fn is_prefix(a: &[String], b: &[String]) -> bool {
    b.len() >= a.len() && b[..a.len()] == *a
}

fn show(m: &[String]) -> String {
    if m.is_empty() {
        "crate".to_string()
    } else {
        m.join("::")
    }
}

impl Crate {
    /// Loads the crate from `src/lib.rs` down, `read` giving a file's text
    /// by its path relative to the crate's directory.
    fn load(read: &dyn Fn(&str) -> Option<String>) -> Crate {
        let mut modules = BTreeMap::new();
        let mut exported = BTreeMap::new();
        let mut todo: Vec<(ModPath, String)> = vec![(Vec::new(), "src/lib.rs".to_string())];
        while let Some((path, file)) = todo.pop() {
            let text = read(&file).unwrap_or_else(|| panic!("cannot read {file}"));
            let scanned = scan(&text);
            let dir = if file.ends_with("/lib.rs") || file.ends_with("/mod.rs") {
                file[..file.rfind('/').unwrap()].to_string()
            } else {
                file.trim_end_matches(".rs").to_string()
            };
            for child in &scanned.children {
                let flat = format!("{dir}/{child}.rs");
                let nested = format!("{dir}/{child}/mod.rs");
                let file = if read(&flat).is_some() { flat } else { nested };
                let mut p = path.clone();
                p.push(child.clone());
                todo.push((p, file));
            }
            for name in &scanned.exported {
                exported.insert(name.clone(), path.clone());
            }
            modules.insert(path, Module { file, scanned });
        }
        Crate { modules, exported }
    }

    /// The crate as the sources in `src/` are.
    fn from_sources() -> Crate {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        Crate::load(&|file| std::fs::read_to_string(root.join(file)).ok())
    }

    fn child(&self, m: &[String], name: &str) -> Option<ModPath> {
        let mut c = m.to_vec();
        c.push(name.to_string());
        self.modules.contains_key(&c).then_some(c)
    }

    /// Where `path`, written in module `at` inside the inline modules
    /// `inline`, starts, and the segments after that start; `None` for a
    /// path outside the crate.
    fn start<'p>(
        &self,
        at: &[String],
        inline: &[String],
        path: &'p [String],
    ) -> Option<(ModPath, &'p [String])> {
        let first = path.first()?.as_str();
        let mut base: ModPath = at.iter().chain(inline).cloned().collect();
        let rest = match first {
            "crate" => {
                base.clear();
                &path[1..]
            }
            "self" => &path[1..],
            "super" => {
                let ups = path.iter().take_while(|s| *s == "super").count();
                base.truncate(base.len().saturating_sub(ups));
                &path[ups..]
            }
            _ => {
                self.child(at, first)?;
                base = at.to_vec();
                path
            }
        };
        while !self.modules.contains_key(&base) {
            base.pop();
        }
        Some((base, rest))
    }

    /// The module that `path`, written in module `at` (inside the inline
    /// modules `inline`), names or whose item it names; `importer` is the
    /// module whose import is being resolved.
    fn resolve(
        &self,
        importer: &[String],
        at: &[String],
        inline: &[String],
        path: &[String],
        depth: u32,
    ) -> Option<ModPath> {
        let (mut cur, rest) = self.start(at, inline, path)?;
        let mut i = 0;
        while i < rest.len() {
            match self.child(&cur, &rest[i]) {
                Some(c) => cur = c,
                None => break,
            }
            i += 1;
        }
        match rest.get(i) {
            None => Some(cur),
            Some(item) => Some(self.provider(importer, cur, item, depth)),
        }
    }

    /// Whether module `m` has a name `item` (defined, imported or
    /// glob-imported).
    fn has(&self, m: &[String], item: &str, depth: u32) -> bool {
        let Some(module) = self.modules.get(m) else {
            return false;
        };
        let s = &module.scanned;
        depth < 16
            && (s.defs.contains(item)
                || (m.is_empty() && self.exported.contains_key(item))
                || s.imports
                    .iter()
                    .any(|i| i.public && i.name.as_deref() == Some(item))
                || s.imports
                    .iter()
                    .filter(|i| i.public && i.name.is_none())
                    .any(|i| {
                        self.resolve(m, m, &[], &i.path, depth + 1)
                            .is_some_and(|g| g != m && self.has(&g, item, depth + 1))
                    }))
    }

    /// The module that provides `item` of module `m` to `importer`: `m`
    /// itself, unless `m` is `importer` or above it (a facade, or a parent
    /// the path climbs to), whose `use` declarations are then followed.
    fn provider(&self, importer: &[String], m: ModPath, item: &str, depth: u32) -> ModPath {
        if depth > 16 || !is_prefix(&m, importer) {
            return m;
        }
        let Some(module) = self.modules.get(&m) else {
            return m;
        };
        let s = &module.scanned;
        if s.defs.contains(item) {
            return m;
        }
        if m.is_empty()
            && let Some(def) = self.exported.get(item)
        {
            return def.clone();
        }
        if let Some(i) = s.imports.iter().find(|i| i.name.as_deref() == Some(item)) {
            return self
                .resolve(importer, &m, &[], &i.path, depth + 1)
                .unwrap_or(m);
        }
        for i in s.imports.iter().filter(|i| i.name.is_none()) {
            if let Some(g) = self.resolve(&m, &m, &[], &i.path, depth + 1)
                && g != m
                && self.has(&g, item, depth + 1)
            {
                return self.provider(importer, g, item, depth + 1);
            }
        }
        m
    }

    /// Every import from one module into another.
    fn edges(&self) -> Vec<Edge> {
        let mut out = BTreeSet::new();
        for (m, module) in &self.modules {
            // A glob import of a module above (`use super::*`) brings its
            // names: each one used here that it imports from elsewhere is
            // an import from there.
            let s = &module.scanned;
            for glob in s.imports.iter().filter(|i| i.name.is_none()) {
                let Some(g) = self.resolve(m, m, &[], &glob.path, 0) else {
                    continue;
                };
                if g == *m || !is_prefix(&g, m) {
                    continue;
                }
                for (name, &line) in &s.names {
                    let own = s.defs.contains(name)
                        || s.imports.iter().any(|i| i.name.as_ref() == Some(name));
                    if own {
                        continue;
                    }
                    let to = self.provider(m, g.clone(), name, 0);
                    if to != g && to != *m {
                        out.insert(Edge {
                            from: m.clone(),
                            to,
                            file: module.file.clone(),
                            line,
                            path: format!("{}::* ({name})", glob.path.join("::")),
                        });
                    }
                }
            }
            for r in &module.scanned.refs {
                let Some(to) = self.resolve(m, m, &r.inline, &r.path, 0) else {
                    continue;
                };
                if to != *m {
                    out.insert(Edge {
                        from: m.clone(),
                        to,
                        file: module.file.clone(),
                        line: r.line,
                        path: r.path.join("::"),
                    });
                }
            }
        }
        out.into_iter().collect()
    }

    /// For module `parent`: its children, and the edges between them (an
    /// import from inside one child into another), each with what forms it.
    fn level(&self, parent: &[String], edges: &[Edge]) -> (Vec<String>, Level) {
        let children = self
            .modules
            .get(parent)
            .map_or(Vec::new(), |m| m.scanned.children.clone());
        let below = |m: &[String]| {
            (m.len() > parent.len() && is_prefix(parent, m)).then(|| m[parent.len()].clone())
        };
        let mut graph = Level::new();
        for e in edges {
            if let (Some(a), Some(b)) = (below(&e.from), below(&e.to))
                && a != b
            {
                graph.entry((a, b)).or_default().push(e.at());
            }
        }
        (children, graph)
    }

    /// Every circle at every level, described; empty if there is none.
    fn circles(&self) -> Vec<String> {
        let edges = self.edges();
        let mut out = Vec::new();
        for parent in self.modules.keys() {
            let (children, graph) = self.level(parent, &edges);
            if children.len() < 2 {
                continue;
            }
            let pairs: Vec<(String, String)> = graph.keys().cloned().collect();
            for component in strongly_connected(&children, &pairs) {
                let mut text = format!(
                    "import circle among the modules of `{}`: {{{}}}\n",
                    show(parent),
                    component.join(", ")
                );
                for ((a, b), at) in &graph {
                    if component.contains(a) && component.contains(b) {
                        text += &format!("  {a} -> {b}:\n");
                        for place in at {
                            text += &format!("    {place}\n");
                        }
                    }
                }
                out.push(text);
            }
        }
        out
    }
}

/// The strongly connected components of two or more nodes (Tarjan), each
/// sorted, in the order found.
fn strongly_connected(nodes: &[String], edges: &[(String, String)]) -> Vec<Vec<String>> {
    struct State<'g> {
        next: usize,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'g>(v: &'g str, edges: &'g [(String, String)], s: &mut State<'g>) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        for (_, w) in edges.iter().filter(|(a, _)| a == v) {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(w, edges, s);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.stack.contains(&w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let at = s.stack.iter().rposition(|x| *x == v).unwrap();
            let mut component: Vec<String> = s.stack.drain(at..).map(str::to_string).collect();
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        next: 0,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for v in nodes
        .iter()
        .map(String::as_str)
        .chain(edges.iter().map(|(a, _)| a.as_str()))
    {
        if !s.index.contains_key(v) {
            visit(v, edges, &mut s);
        }
    }
    s.out
}

#[test]
fn no_module_imports_in_a_circle() {
    let krate = Crate::from_sources();
    let (top, graph) = krate.level(&[], &krate.edges());
    println!("top-level modules: {}", top.join(", "));
    for (a, b) in graph.keys() {
        println!("{a} -> {b}");
    }
    let circles = krate.circles();
    assert!(
        circles.is_empty(),
        "{} import circle(s); break each by moving declarations to the module they belong to \
         (no two modules may import each other, directly or around a loop):\n{}",
        circles.len(),
        circles.concat()
    );
}

/// The scan sees the crate: its modules, and imports known to be there.
#[test]
fn the_scan_reads_the_crate() {
    let krate = Crate::from_sources();
    assert!(krate.modules.len() > 100, "{} modules", krate.modules.len());
    let m = |s: &str| s.split("::").map(str::to_string).collect::<ModPath>();
    assert!(
        krate
            .modules
            .contains_key(&m("arch::netburst::physical::claims"))
    );
    // Test code is not read: neither this module nor any `tests` module.
    assert!(!krate.modules.contains_key(&m("layering")));
    assert!(!krate.modules.keys().any(|k| k.iter().any(|s| s == "tests")));
    let edges = krate.edges();
    let has = |from: &str, to: &str| edges.iter().any(|e| e.from == m(from) && e.to == m(to));
    // A `use super::..` tree, a `crate::` path in code, a path through a
    // facade (`crate::arch::netburst::LogicalProcessor`, defined in
    // `thread.rs`), a `#[macro_export]` macro at the root.
    assert!(has("arch::netburst::driver", "arch::netburst::physical"));
    assert!(has("arch::netburst::driver", "detect"));
    assert!(has(
        "arch::netburst::driver::package",
        "arch::netburst::thread"
    ));
    assert!(
        edges
            .iter()
            .any(|e| e.from == m("arch::archperf::driver") && e.to == m("access"))
    );
}

/// The cycle finder, on a graph made by hand.
#[test]
fn the_cycle_finder_finds_every_circle() {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let e = |v: &[(&str, &str)]| {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect::<Vec<_>>()
    };
    let nodes = s(&["a", "b", "c", "d", "e", "f", "g"]);
    // a -> b -> c -> a, c -> d, d <-> e, e -> f, g alone.
    let edges = e(&[
        ("a", "b"),
        ("b", "c"),
        ("c", "a"),
        ("c", "d"),
        ("d", "e"),
        ("e", "d"),
        ("e", "f"),
    ]);
    let mut found = strongly_connected(&nodes, &edges);
    found.sort();
    assert_eq!(found, vec![s(&["a", "b", "c"]), s(&["d", "e"])]);
    // A chain and a diamond have none.
    let none = e(&[("a", "b"), ("b", "c"), ("a", "d"), ("d", "c"), ("c", "e")]);
    assert!(strongly_connected(&nodes, &none).is_empty());
}

/// The whole check, on a crate made up for it: imports in `use` trees,
/// in code, through a facade and through `use super::*` form circles;
/// comments, strings and test code do not.
#[test]
fn a_made_up_crate_has_the_circles_it_was_given() {
    let files: BTreeMap<&str, &str> = [
        (
            "src/lib.rs",
            "mod a;\nmod b;\nmod c;\nmod d;\nmod e;\n#[cfg(test)]\nmod t;\n",
        ),
        (
            "src/a.rs",
            "//! Not an import: crate::c::Doc.\nuse crate::b::{self, Thing as Other};\n\
             pub struct A;\nfn f() -> &'static str { /* crate::c::X */ \"crate::c::Y\" }\n",
        ),
        (
            "src/b.rs",
            "pub struct Thing;\npub fn g() {\n    let _ = crate::a::A;\n}\n\
             #[cfg(test)]\nmod tests {\n    use crate::c::Q;\n}\n",
        ),
        (
            "src/c.rs",
            "pub struct C;\n#[cfg(test)]\nuse crate::a::A;\n",
        ),
        (
            "src/d/mod.rs",
            "mod x;\nmod y;\npub use x::*;\npub use y::Why;\n",
        ),
        ("src/d/x.rs", "pub struct Ex;\npub fn f(_: super::Why) {}\n"),
        (
            "src/d/y.rs",
            "pub struct Why;\npub fn g(_: crate::d::Ex) {}\n",
        ),
        ("src/e/mod.rs", "mod p;\nmod q;\nuse q::Cue;\n"),
        (
            "src/e/p.rs",
            "use super::*;\npub struct Pea;\nfn f(_: Cue) {}\n",
        ),
        (
            "src/e/q.rs",
            "pub struct Cue;\nfn g(_: crate::e::p::Pea) {}\n",
        ),
        ("src/t.rs", "use crate::c::C;\n"),
    ]
    .into_iter()
    .collect();
    let krate = Crate::load(&|f| files.get(f).map(|s| s.to_string()));
    let circles = krate.circles();
    assert_eq!(circles.len(), 3, "{}", circles.concat());
    assert_eq!(
        circles[0],
        "import circle among the modules of `crate`: {a, b}\n  a -> b:\n    src/a.rs:2 `crate::b`\n    \
         src/a.rs:2 `crate::b::Thing`\n  b -> a:\n    src/b.rs:3 `crate::a::A`\n"
    );
    assert_eq!(
        circles[1],
        "import circle among the modules of `d`: {x, y}\n  x -> y:\n    src/d/x.rs:2 `super::Why`\n  \
         y -> x:\n    src/d/y.rs:2 `crate::d::Ex`\n"
    );
    assert_eq!(
        circles[2],
        "import circle among the modules of `e`: {p, q}\n  p -> q:\n    src/e/p.rs:3 `super::* (Cue)`\n  \
         q -> p:\n    src/e/q.rs:2 `crate::e::p::Pea`\n"
    );
    // Nothing imports `c`: not the comment, the string, nor test code.
    assert!(!krate.edges().iter().any(|e| e.to == ["c".to_string()]));
}

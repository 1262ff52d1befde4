//! `cargo test`'s time budget, and where the time went when a run exceeds
//! it: how long cargo ran before this harness started (compiling the test
//! binaries and running those before it), the kernels' build with its
//! critical path (from cargo's `--timings` report of that build), and the
//! boots.
//!
//! The critical path is the chain of compilation units that ended last:
//! from the unit that finished the build, back through the unit whose end
//! let it start (the latest of those that unblocked it), to a unit nothing
//! held back. Cargo's report lists, per unit, its start and duration in
//! seconds from the build's start and the units its end unblocked
//! (`unblocked_units`, and `unblocked_rmeta_units` for those that needed
//! only its metadata).

use std::path::Path;
use std::time::Duration;

/// The budget of a `cargo test` on a fresh clone (seconds), unless
/// `PMU_TEST_BUDGET_S` says otherwise.
pub const DEFAULT_BUDGET_S: f64 = 60.0;

/// The budget: `PMU_TEST_BUDGET_S`, or [`DEFAULT_BUDGET_S`].
pub fn budget() -> f64 {
    std::env::var("PMU_TEST_BUDGET_S")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_BUDGET_S)
}

/// How long ago the process that started this one (`cargo test`) started,
/// from Linux's `/proc` (`None` elsewhere): start times there are in clock
/// ticks since boot, at `USER_HZ`, 100 on x86 (and every architecture
/// Rust's host tools run on).
pub fn parent_age() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let ppid: u32 = stat_field(&stat, 4)?.parse().ok()?;
    let parent = std::fs::read_to_string(format!("/proc/{ppid}/stat")).ok()?;
    let started: f64 = stat_field(&parent, 22)?.parse().ok()?;
    let uptime = std::fs::read_to_string("/proc/uptime").ok()?;
    let uptime: f64 = uptime.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_secs_f64((uptime - started / 100.0).max(0.0)))
}

/// Field `n` (1-based, as `proc(5)` numbers them) of a `/proc/<pid>/stat`
/// line; the command name (field 2) may hold spaces and parentheses, so
/// the fields after it are counted from its closing parenthesis.
fn stat_field(stat: &str, n: usize) -> Option<&str> {
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(n.checked_sub(3)?)
}

/// One compilation unit of a cargo build.
#[derive(Clone, Debug, PartialEq)]
pub struct Unit {
    /// The crate.
    pub name: String,
    /// What of it (cargo's words: empty for the library, ` build-script`,
    /// ` bin "x"`...).
    pub target: String,
    /// Seconds from the build's start.
    pub start: f64,
    /// Seconds it took.
    pub duration: f64,
    /// The units (by `i`) its end let start.
    unblocked: Vec<u64>,
    /// The units its metadata let start (before its end).
    unblocked_rmeta: Vec<u64>,
    /// Cargo's number for it.
    i: u64,
}

impl Unit {
    fn end(&self) -> f64 {
        self.start + self.duration
    }
}

/// The units of the `--timings` report `html` (its `UNIT_DATA`).
pub fn units(html: &str) -> Option<Vec<Unit>> {
    let data = &html[html.find("const UNIT_DATA = ")? + "const UNIT_DATA = ".len()..];
    let (value, _) = json::parse(data)?;
    let json::Value::Array(items) = value else {
        return None;
    };
    items
        .iter()
        .map(|u| {
            let numbers = |key| -> Vec<u64> {
                match u.get(key) {
                    Some(json::Value::Array(a)) => a
                        .iter()
                        .filter_map(json::Value::number)
                        .map(|n| n as u64)
                        .collect(),
                    _ => Vec::new(),
                }
            };
            Some(Unit {
                unblocked: numbers("unblocked_units"),
                unblocked_rmeta: numbers("unblocked_rmeta_units"),
                name: u.get("name")?.string()?.to_string(),
                target: u.get("target")?.string()?.trim().to_string(),
                start: u.get("start")?.number()?,
                duration: u.get("duration")?.number()?,
                i: u.get("i")?.number()? as u64,
            })
        })
        .collect()
}

/// The critical path of a build's `units`, first unit first.
pub fn critical_path(units: &[Unit]) -> Vec<Unit> {
    let Some(mut at) = units.iter().max_by(|a, b| a.end().total_cmp(&b.end())) else {
        return Vec::new();
    };
    let mut path = vec![at.clone()];
    // When a unit `u` let `at` start: at its end, or, for its metadata,
    // somewhere before (the report does not say when: at `at`'s start at
    // the latest).
    let ready = |u: &Unit, at: &Unit| {
        if u.unblocked.contains(&at.i) {
            Some(u.end())
        } else if u.unblocked_rmeta.contains(&at.i) {
            Some(u.end().min(at.start))
        } else {
            None
        }
    };
    // Each step goes to a unit that started earlier: at most `units.len()`.
    while let Some((before, _)) = units
        .iter()
        .filter(|u| u.start < at.start)
        .filter_map(|u| Some((u, ready(u, at)?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
    {
        path.push(before.clone());
        at = before;
        if path.len() > units.len() {
            break;
        }
    }
    path.reverse();
    path
}

/// The critical path as one line: each unit with its start and end (a gap
/// between one's end and the next's start is time the next waited for a
/// job slot, not for a dependency).
pub fn path_line(path: &[Unit]) -> String {
    let steps: Vec<String> = path
        .iter()
        .map(|u| {
            let what = if u.target.is_empty() {
                u.name.clone()
            } else {
                format!("{} ({})", u.name, u.target)
            };
            format!("{what} {:.1}-{:.1} s", u.start, u.end())
        })
        .collect();
    steps.join(" -> ")
}

/// The critical path of the last build whose report cargo left in
/// `target_dir` (`--timings`), with the build's length; only a report
/// written less than `within` ago, if given.
pub fn build_critical_path(target_dir: &Path, within: Option<Duration>) -> Option<String> {
    let file = target_dir.join("cargo-timings/cargo-timing.html");
    if let Some(within) = within {
        let age = std::fs::metadata(&file)
            .ok()?
            .modified()
            .ok()?
            .elapsed()
            .ok()?;
        if age > within {
            return None;
        }
    }
    let html = std::fs::read_to_string(file).ok()?;
    let units = units(&html)?;
    let path = critical_path(&units);
    let end = path.last()?.end();
    let work: f64 = units.iter().map(|u| u.duration).sum();
    Some(format!(
        "{end:.1} s ({work:.1} s of compilation in {} units): {}",
        units.len(),
        path_line(&path)
    ))
}

/// What the harness prints when the run exceeded its budget: the phases,
/// and the kernels' build's critical path.
pub fn over_budget(
    total: Duration,
    before_harness: Duration,
    before_path: Option<String>,
    kernels: Duration,
    kernels_path: Option<String>,
    boots: Duration,
    longest: &str,
) -> String {
    let s = |d: Duration| d.as_secs_f64();
    let mut out = format!(
        "qemu: cargo test took {:.1} s, over its budget of {:.0} s (PMU_TEST_BUDGET_S); where the time went:\n",
        s(total),
        budget()
    );
    out += &format!(
        "  {:.1} s before this harness: compiling the test binaries and running those before it",
        s(before_harness)
    );
    match before_path {
        Some(path) => out += &format!("; the build's critical path, {path}\n"),
        None => out += " (`cargo test --timings` reports that build's critical path here)\n",
    }
    out += &format!("  {:.1} s building the kernels", s(kernels));
    match kernels_path {
        Some(path) => out += &format!("; the build's critical path, {path}\n"),
        None => out += " (no timing report)\n",
    }
    out += &format!("  {:.1} s booting them; {longest}", s(boots));
    out
}

/// Just enough JSON for cargo's timing report.
mod json {
    /// A JSON value.
    #[derive(Debug, PartialEq)]
    pub enum Value {
        Null,
        Bool(bool),
        Number(f64),
        String(String),
        Array(Vec<Value>),
        Object(Vec<(String, Value)>),
    }

    impl Value {
        /// The value of `key`, in an object.
        pub fn get(&self, key: &str) -> Option<&Value> {
            match self {
                Value::Object(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
                _ => None,
            }
        }

        /// The number it is.
        pub fn number(&self) -> Option<f64> {
            match self {
                Value::Number(n) => Some(*n),
                _ => None,
            }
        }

        /// The string it is.
        pub fn string(&self) -> Option<&str> {
            match self {
                Value::String(s) => Some(s),
                _ => None,
            }
        }
    }

    /// The value at the start of `text` (after white space), and the text
    /// after it.
    pub fn parse(text: &str) -> Option<(Value, &str)> {
        let text = text.trim_start();
        let first = text.chars().next()?;
        match first {
            '[' => {
                let mut rest = text[1..].trim_start();
                let mut items = Vec::new();
                if let Some(r) = rest.strip_prefix(']') {
                    return Some((Value::Array(items), r));
                }
                loop {
                    let (v, r) = parse(rest)?;
                    items.push(v);
                    let r = r.trim_start();
                    if let Some(r) = r.strip_prefix(',') {
                        rest = r;
                    } else {
                        return Some((Value::Array(items), r.strip_prefix(']')?));
                    }
                }
            }
            '{' => {
                let mut rest = text[1..].trim_start();
                let mut fields = Vec::new();
                if let Some(r) = rest.strip_prefix('}') {
                    return Some((Value::Object(fields), r));
                }
                loop {
                    let (Value::String(key), r) = parse(rest)? else {
                        return None;
                    };
                    let (v, r) = parse(r.trim_start().strip_prefix(':')?)?;
                    fields.push((key, v));
                    let r = r.trim_start();
                    if let Some(r) = r.strip_prefix(',') {
                        rest = r.trim_start();
                    } else {
                        return Some((Value::Object(fields), r.strip_prefix('}')?));
                    }
                }
            }
            '"' => {
                let mut out = String::new();
                let mut chars = text[1..].char_indices();
                while let Some((i, c)) = chars.next() {
                    match c {
                        '"' => return Some((Value::String(out), &text[i + 2..])),
                        '\\' => {
                            let (_, e) = chars.next()?;
                            match e {
                                'n' => out.push('\n'),
                                't' => out.push('\t'),
                                'u' => {
                                    let hex: String = (0..4)
                                        .filter_map(|_| chars.next().map(|(_, c)| c))
                                        .collect();
                                    out.push(
                                        char::from_u32(u32::from_str_radix(&hex, 16).ok()?)
                                            .unwrap_or('?'),
                                    );
                                }
                                other => out.push(other),
                            }
                        }
                        c => out.push(c),
                    }
                }
                None
            }
            't' => Some((Value::Bool(true), text.strip_prefix("true")?)),
            'f' => Some((Value::Bool(false), text.strip_prefix("false")?)),
            'n' => Some((Value::Null, text.strip_prefix("null")?)),
            _ => {
                let end = text
                    .find(|c: char| !(c.is_ascii_digit() || "+-.eE".contains(c)))
                    .unwrap_or(text.len());
                Some((Value::Number(text[..end].parse().ok()?), &text[end..]))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report as cargo writes it: `pmu`'s metadata unblocks the kernel
    /// library, whose end unblocks the kernel; a build script on the side.
    const REPORT: &str = r#"<script>
const UNIT_DATA = [
  {"i": 1, "name": "pmu", "version": "0.1.0", "mode": "todo", "target": "", "features": [],
   "start": 0.1, "duration": 9.0, "unblocked_units": [], "unblocked_rmeta_units": [2], "sections": null},
  {"i": 3, "name": "x86_64", "version": "0.15.5", "mode": "todo", "target": " build-script", "features": ["a\"b"],
   "start": 0.0, "duration": 0.5, "unblocked_units": [], "unblocked_rmeta_units": [], "sections": null},
  {"i": 2, "name": "pmu-hobby", "version": "0.1.0", "mode": "todo", "target": "", "features": [],
   "start": 4.0, "duration": 3.0, "unblocked_units": [4], "unblocked_rmeta_units": [], "sections": null},
  {"i": 4, "name": "pmu-qemu-tests", "version": "0.1.0", "mode": "todo", "target": " bin \"smp\"", "features": [],
   "start": 9.2, "duration": 2.5, "unblocked_units": [], "unblocked_rmeta_units": [], "sections": null}
];
const CONCURRENCY_DATA = {};
</script>"#;

    #[test]
    fn the_critical_path_follows_what_held_each_unit_back() {
        let units = units(REPORT).expect("the report parses");
        assert_eq!(units.len(), 4);
        assert_eq!(units[1].target, "build-script");
        let path = critical_path(&units);
        let names: Vec<&str> = path.iter().map(|u| u.name.as_str()).collect();
        // The binary ends last (11.7 s); it waited for pmu-hobby (ended at
        // 7.0), which waited for pmu's metadata (the unit started at 0.1).
        assert_eq!(names, ["pmu", "pmu-hobby", "pmu-qemu-tests"]);
        assert_eq!(
            path_line(&path),
            "pmu 0.1-9.1 s -> pmu-hobby 4.0-7.0 s -> pmu-qemu-tests (bin \"smp\") 9.2-11.7 s"
        );
    }

    #[test]
    fn a_report_that_is_not_cargo_s_gives_nothing() {
        assert_eq!(units("<html></html>"), None);
        assert_eq!(units("const UNIT_DATA = [{\"i\": 1}];"), None);
        assert_eq!(critical_path(&[]), Vec::new());
    }

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let stat =
            "4242 (cargo (test) x) S 17 4242 17 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 12345 0";
        assert_eq!(stat_field(stat, 4), Some("17"));
        assert_eq!(stat_field(stat, 22), Some("12345"));
    }

    #[test]
    fn the_report_names_each_phase() {
        let text = over_budget(
            Duration::from_secs(90),
            Duration::from_secs(50),
            None,
            Duration::from_secs(25),
            Some("11.7 s: pmu 9.0 s -> pmu-hobby 3.0 s".into()),
            Duration::from_secs(15),
            "longest boots: smp 4.0 s",
        );
        assert!(text.contains("took 90.0 s, over its budget"), "{text}");
        assert!(text.contains("50.0 s before this harness"), "{text}");
        assert!(
            text.contains(
                "25.0 s building the kernels; the build's critical path, 11.7 s: pmu 9.0 s"
            ),
            "{text}"
        );
        assert!(
            text.contains("15.0 s booting them; longest boots: smp 4.0 s"),
            "{text}"
        );
    }
}

//! The validation report: what the `validate` kernel
//! (`qemu-tests/src/bin/validate.rs`, whose documentation gives the lines)
//! prints after `report: `, read back ([`parse`]), checked (every line in
//! its form, every case with a verdict, a measurement and a bound or a
//! reason, the tally agreeing with the cases: [`Report::agrees_with`]
//! checks them against the case lines too), and written out for a user to
//! paste into an issue ([`Report::render`]).

use std::fmt::Write as _;

use pmu_qemu_run::{CaseResult, Verdict};

/// The report format this reads (the kernel's `pmu-validate` number).
pub const FORMAT: u32 = 1;

/// The prefix of the kernel's report lines.
const PREFIX: &str = "report: ";

/// The CPU, as CPUID leaves 0 and 1 give it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cpu {
    /// The vendor string (`GenuineIntel`, `AuthenticAMD`).
    pub vendor: String,
    /// The displayed family.
    pub family: u32,
    /// The displayed model.
    pub model: u32,
    /// The stepping.
    pub stepping: u32,
    /// CPUID.01H:EAX.
    pub signature: u32,
}

/// One case, as the report gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    /// Its name (`<architecture>_<case>`).
    pub name: String,
    /// How it ended.
    pub verdict: Verdict,
    /// What it measured, when it measured.
    pub measured: Option<String>,
    /// The bound it held the measurement to, when it measured.
    pub bound: Option<String>,
    /// Why it was skipped, or how it failed (empty for a pass).
    pub said: String,
}

/// A validation report, read from a kernel's console.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The checkout the kernel was built from (`unknown` when not given).
    pub commit: String,
    /// What ran the kernel: `KVM`, `TCG`, `bare metal`, or a hypervisor.
    pub platform: String,
    /// How it was entered: `PVH` or `multiboot2`.
    pub boot: String,
    /// The CPU.
    pub cpu: Cpu,
    /// The brand string, when CPUID has one.
    pub brand: Option<String>,
    /// The largest standard and extended CPUID leaves.
    pub max_leaves: (u32, u32),
    /// The PMU leaves that exist and are not all zero: leaf, subleaf, EAX,
    /// EBX, ECX, EDX.
    pub leaves: Vec<(u32, u32, [u32; 4])>,
    /// The PMU leaves that exist and are all zero.
    pub zero_leaves: Vec<(u32, u32)>,
    /// The cases, in the order they ran.
    pub cases: Vec<Case>,
    /// Passed, failed, skipped, as the kernel tallied them.
    pub result: (usize, usize, usize),
}

/// `text` as a hexadecimal number (`what` names it in the error).
fn hex(text: &str, what: &str) -> Result<u32, String> {
    u32::from_str_radix(text, 16)
        .map_err(|_| format!("{what}: `{text}` is not a hexadecimal number"))
}

/// `text` as a decimal number.
fn number<T: std::str::FromStr>(text: &str, what: &str) -> Result<T, String> {
    text.parse()
        .map_err(|_| format!("{what}: `{text}` is not a number"))
}

/// `leaf.subleaf`, as `0000000A.0`.
fn leaf(text: &str) -> Result<(u32, u32), String> {
    let (leaf, subleaf) = text
        .split_once('.')
        .ok_or_else(|| format!("CPUID leaf `{text}`: not <leaf>.<subleaf>"))?;
    if leaf.len() != 8 {
        return Err(format!(
            "CPUID leaf `{text}`: the leaf is not 8 hexadecimal digits"
        ));
    }
    Ok((hex(leaf, "CPUID leaf")?, number(subleaf, "CPUID subleaf")?))
}

/// The header: `pmu-validate 1; commit <c>; platform <p>; boot <b>`.
fn header(line: &str) -> Result<(String, String, String), String> {
    let fields: Vec<&str> = line.split("; ").collect();
    let [format, commit, platform, boot] = fields.as_slice() else {
        return Err(format!(
            "the first line is not `pmu-validate <n>; commit <c>; platform <p>; boot <b>`: `{line}`"
        ));
    };
    let format = format
        .strip_prefix("pmu-validate ")
        .ok_or_else(|| format!("the first line does not start with `pmu-validate`: `{line}`"))?;
    let format: u32 = number(format, "report format")?;
    if format != FORMAT {
        return Err(format!(
            "report format {format}: this tool reads format {FORMAT} (build both from one checkout)"
        ));
    }
    let field = |text: &str, key: &str| {
        text.strip_prefix(key)
            .filter(|v| !v.is_empty())
            .map(String::from)
            .ok_or_else(|| format!("the first line has no `{}<value>`: `{line}`", key))
    };
    Ok((
        field(commit, "commit ")?,
        field(platform, "platform ")?,
        field(boot, "boot ")?,
    ))
}

/// `cpu <vendor> family <n> model <n> stepping <n> (<FF_MMH>, CPUID.01H:EAX <hex>)`.
fn cpu(line: &str) -> Result<Cpu, String> {
    let bad = || format!("not `cpu <vendor> family <n> model <n> stepping <n> (...)`: `{line}`");
    // The vendor string may hold spaces ("VIA VIA VIA "): all before
    // ` family `.
    let (vendor, rest) = line
        .strip_prefix("cpu ")
        .and_then(|l| l.split_once(" family "))
        .ok_or_else(bad)?;
    let words: Vec<&str> = rest.split_whitespace().collect();
    let [
        family,
        "model",
        model,
        "stepping",
        stepping,
        _pair,
        "CPUID.01H:EAX",
        eax,
    ] = words.as_slice()
    else {
        return Err(bad());
    };
    let eax = eax.strip_suffix(')').ok_or_else(bad)?;
    Ok(Cpu {
        vendor: vendor.to_string(),
        family: number(family, "family")?,
        model: number(model, "model")?,
        stepping: number(stepping, "stepping")?,
        signature: hex(eax, "CPUID.01H:EAX")?,
    })
}

/// `case <name>: passed|skipped|failed: ...`.
fn case(line: &str) -> Result<Case, String> {
    let (name, rest) = line
        .split_once(": ")
        .ok_or_else(|| format!("a case line without `: `: `{line}`"))?;
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(format!("a case line whose name is not one word: `{line}`"));
    }
    let (verdict, rest) = match rest.split_once(':') {
        Some((verdict, rest)) => (verdict, rest.strip_prefix(' ').unwrap_or(rest)),
        None => (rest, ""),
    };
    let verdict = match verdict {
        "passed" => Verdict::Passed,
        "skipped" => Verdict::Skipped,
        "failed" => Verdict::Failed,
        other => {
            return Err(format!(
                "case {name}: `{other}` is not passed, skipped or failed"
            ));
        }
    };
    let (measured, bound, said) = match rest.strip_prefix("measured ") {
        Some(m) => {
            let (measured, rest) = m
                .split_once("; bound ")
                .ok_or_else(|| format!("case {name}: a measurement without its bound: `{line}`"))?;
            let (bound, said) = rest.split_once("; ").unwrap_or((rest, ""));
            (
                Some(measured.to_string()),
                Some(bound.to_string()),
                said.to_string(),
            )
        }
        None => (None, None, rest.to_string()),
    };
    match verdict {
        Verdict::Passed if measured.is_none() => {
            return Err(format!(
                "case {name} passed without a measurement and its bound"
            ));
        }
        Verdict::Passed if !said.is_empty() => {
            return Err(format!("case {name} passed, yet says `{said}`"));
        }
        Verdict::Skipped | Verdict::Failed if said.trim().is_empty() => {
            return Err(format!("case {name} did not pass and does not say why"));
        }
        _ => {}
    }
    Ok(Case {
        name: name.to_string(),
        verdict,
        measured,
        bound,
        said,
    })
}

/// `result <p> passed, <f> failed, <s> skipped`.
fn result(line: &str) -> Result<(usize, usize, usize), String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let [p, "passed,", f, "failed,", s, "skipped"] = words.as_slice() else {
        return Err(format!(
            "not `result <p> passed, <f> failed, <s> skipped`: `{line}`"
        ));
    };
    Ok((
        number(p, "passed")?,
        number(f, "failed")?,
        number(s, "skipped")?,
    ))
}

/// Reads the report out of a kernel's console (anything else it printed is
/// ignored), checking every line's form and that the tally agrees with
/// the cases. The error names the first line that is not right, or what
/// is missing.
pub fn parse(console: &str) -> Result<Report, String> {
    let mut lines = console
        .lines()
        .filter_map(|l| l.trim_end().strip_prefix(PREFIX));
    let first = lines.next().ok_or(
        "no report lines (`report: ...`): not the validate kernel's console, or it stopped before its report",
    )?;
    let (commit, platform, boot) = header(first)?;
    let mut cpu_seen = None;
    let mut brand = None;
    let mut max_leaves = None;
    let mut leaves = Vec::new();
    let mut zero_leaves = Vec::new();
    let mut cases = Vec::new();
    let mut tally = None;
    for line in lines {
        if tally.is_some() {
            return Err(format!("a line after the result: `{line}`"));
        }
        let (key, rest) = line.split_once(' ').unwrap_or((line, ""));
        match key {
            "cpu" => cpu_seen = Some(cpu(line)?),
            "brand" => brand = Some(rest.to_string()),
            "cpuid" => {
                if let Some(max) = rest.strip_prefix("max ") {
                    let (standard, extended) = max
                        .split_once(' ')
                        .ok_or_else(|| format!("not `cpuid max <leaf> <leaf>`: `{line}`"))?;
                    max_leaves = Some((
                        hex(standard, "largest leaf")?,
                        hex(extended, "largest extended leaf")?,
                    ));
                } else if let Some(zero) = rest.strip_prefix("zero:") {
                    for l in zero.split_whitespace() {
                        zero_leaves.push(leaf(l)?);
                    }
                } else {
                    let (l, regs) = rest.split_once(": ").ok_or_else(|| {
                        format!("not `cpuid <leaf>.<subleaf>: <4 registers>`: `{line}`")
                    })?;
                    let (l, s) = leaf(l)?;
                    let regs = regs
                        .split_whitespace()
                        .map(|r| hex(r, "CPUID register"))
                        .collect::<Result<Vec<_>, _>>()?;
                    let regs: [u32; 4] = regs.try_into().map_err(|_| {
                        format!("CPUID leaf {l:08X}.{s}: not four registers: `{line}`")
                    })?;
                    leaves.push((l, s, regs));
                }
            }
            "case" => cases.push(case(rest)?),
            "result" => tally = Some(result(rest)?),
            _ => return Err(format!("a report line of no known kind: `{line}`")),
        }
    }
    let cpu = cpu_seen.ok_or("no `cpu` line")?;
    let max_leaves = max_leaves.ok_or("no `cpuid max` line")?;
    let result = tally.ok_or("no `result` line: the run stopped before its end")?;
    let count = |v: Verdict| cases.iter().filter(|c| c.verdict == v).count();
    let counted = (
        count(Verdict::Passed),
        count(Verdict::Failed),
        count(Verdict::Skipped),
    );
    if counted != result {
        return Err(format!(
            "the result says {} passed, {} failed, {} skipped; the case lines {} passed, {} failed, {} skipped",
            result.0, result.1, result.2, counted.0, counted.1, counted.2
        ));
    }
    if cases.is_empty() {
        return Err("no case lines".into());
    }
    Ok(Report {
        commit,
        platform,
        boot,
        cpu,
        brand,
        max_leaves,
        leaves,
        zero_leaves,
        cases,
        result,
    })
}

impl Report {
    /// Whether the report's cases are the kernel's case lines (`results`,
    /// as the runner judged them): the same names, in the same order, with
    /// the same verdicts.
    pub fn agrees_with(&self, results: &[CaseResult]) -> Result<(), String> {
        let report: Vec<(&str, Verdict)> = self
            .cases
            .iter()
            .map(|c| (c.name.as_str(), c.verdict))
            .collect();
        let lines: Vec<(&str, Verdict)> = results
            .iter()
            .map(|c| (c.name.as_str(), c.verdict))
            .collect();
        if report == lines {
            Ok(())
        } else {
            Err(format!(
                "the report's cases {report:?} are not the case lines {lines:?}"
            ))
        }
    }

    /// Whether no case failed.
    pub fn passed(&self) -> bool {
        self.result.1 == 0
    }

    /// The report as a user pastes it into an issue: `how` (lines saying
    /// how it was run: the command, QEMU, the host), then the kernel's
    /// findings, as a fenced text block.
    pub fn render(&self, how: &[String]) -> String {
        let mut out = String::from("```text\n");
        let _ = writeln!(out, "pmu validation report (format {FORMAT})");
        for line in how {
            let _ = writeln!(out, "{line}");
        }
        let c = &self.cpu;
        let _ = writeln!(out, "commit:   {}", self.commit);
        let _ = writeln!(out, "platform: {} (booted by {})", self.platform, self.boot);
        let _ = writeln!(
            out,
            "cpu:      {} family {} model {} stepping {} ({:02X}_{:02X}H, CPUID.01H:EAX {:08X})",
            c.vendor, c.family, c.model, c.stepping, c.family, c.model, c.signature
        );
        if let Some(brand) = &self.brand {
            let _ = writeln!(out, "brand:    {brand}");
        }
        let _ = writeln!(
            out,
            "cpuid:    largest leaf {:08X}, largest extended leaf {:08X}",
            self.max_leaves.0, self.max_leaves.1
        );
        let _ = writeln!(out, "          leaf.sub    EAX      EBX      ECX      EDX");
        for (l, s, [a, b, c, d]) in &self.leaves {
            let _ = writeln!(
                out,
                "          {l:08X}.{s}  {a:08X} {b:08X} {c:08X} {d:08X}"
            );
        }
        if !self.zero_leaves.is_empty() {
            let zero: Vec<String> = self
                .zero_leaves
                .iter()
                .map(|(l, s)| format!("{l:08X}.{s}"))
                .collect();
            let _ = writeln!(out, "          all zero: {}", zero.join(" "));
        }
        let _ = writeln!(out, "cases:");
        for case in &self.cases {
            let verdict = match case.verdict {
                Verdict::Passed => "passed",
                Verdict::Failed => "FAILED",
                Verdict::Skipped => "skipped",
            };
            let _ = writeln!(out, "  {}: {verdict}", case.name);
            if let (Some(m), Some(b)) = (&case.measured, &case.bound) {
                let _ = writeln!(out, "    measured {m}");
                let _ = writeln!(out, "    bound    {b}");
            }
            if !case.said.is_empty() {
                let _ = writeln!(out, "    {}", case.said);
            }
        }
        let (p, f, s) = self.result;
        let _ = writeln!(out, "result:   {p} passed, {f} failed, {s} skipped");
        out.push_str("```\n");
        out
    }
}

/// The suite's case `report` for a kernel that prints a validation report
/// (header line `check-report:`): its report is well-formed ([`parse`])
/// and its cases are the kernel's case lines (`cases`, as the runner
/// judged them: [`Report::agrees_with`]).
pub fn check(console: &str, cases: &[CaseResult]) -> CaseResult {
    match parse(console).and_then(|r| r.agrees_with(cases).map(|()| r)) {
        Ok(r) => CaseResult::judged(
            "report",
            true,
            format!(
                " ({} cases in format {FORMAT}: {} passed, {} failed, {} skipped)",
                r.cases.len(),
                r.result.0,
                r.result.1,
                r.result.2
            ),
        ),
        Err(e) => CaseResult::judged("report", false, format!("\n    {e}")),
    }
}

#[cfg(test)]
mod tests;

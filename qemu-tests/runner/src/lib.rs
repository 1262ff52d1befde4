//! `pmu-qemu-run`: boots an x86_64 kernel under QEMU and turns what it
//! reports into an exit status, for `cargo run` and `cargo test` of
//! bare-metal kernels (the cargo runner of the `pmu` crate's test and
//! example kernels and of kernels built on `pmu-hobby`). The binary is
//! `pmu-qemu-run KERNEL.elf [QEMU ARGS...]`; this library is what it runs,
//! for host programs that boot kernels themselves.
//!
//! # The kernel's side: the protocol
//!
//! ## Boot
//!
//! The kernel is an x86_64 ELF with a PVH entry note (what QEMU's
//! `-kernel` boots without a bootloader). QEMU runs it as
//!
//! ```text
//! qemu-system-x86_64 -M pc -m 128M -display none -monitor none \
//!     -serial stdio -no-reboot \
//!     -device isa-debug-exit,iobase=0xf4,iosize=0x04 \
//!     -kernel KERNEL.elf [-bios qboot.rom] <accelerator arguments> [QEMU ARGS...]
//! ```
//!
//! COM1 (I/O port 3F8h) is the console: every line the kernel writes there
//! is copied to the runner's standard output as it comes.
//!
//! A bootable CD image (a boot loader and its kernel, such as the `pmu`
//! crate's validation image, GRUB booting a multiboot2 kernel) boots the
//! same way with `-cdrom IMAGE.iso` instead of `-kernel` and QEMU's
//! default firmware, which reads CDs ([`qemu::boot_cdrom`]).
//!
//! The firmware is qboot where QEMU has `qboot.rom`, QEMU's default
//! (SeaBIOS) otherwise ([`qemu::Firmware`]; the [`qemu` module
//! documentation](qemu#the-firmware) says why and what a kernel must set
//! up itself: its local APIC).
//!
//! ## Exit: port F4h
//!
//! The kernel ends the run by writing one byte to the `isa-debug-exit`
//! device at I/O port **F4h**; QEMU exits with status `byte << 1 | 1`:
//!
//! | the kernel writes | QEMU exits with | verdict |
//! |---|---|---|
//! | **10h** | 33 | success |
//! | 11h | 35 | failure ("kernel reported failure") |
//! | any other byte | `byte << 1 \| 1` | failure, the status reported |
//! | nothing: a triple fault or reset (`-no-reboot`) | 0 | failure ("without a verdict") |
//! | nothing within `PMU_QEMU_TIMEOUT` seconds | (killed) | failure ("kernel hung") |
//!
//! In assembly: `mov dx, 0xf4; mov al, 0x10; out dx, al`.
//!
//! ## Case lines
//!
//! A kernel that is a test suite says so, and reports each case, on its
//! console (everything else it prints is its own output):
//!
//! ```text
//! suite <name>: <n> cases                   the plan: n case lines must follow
//! test <suite>::<case> ... ok               passed
//! test <suite>::<case> ... FAILED           failed; the next line, indented
//!     <why>                                 by four spaces, says why
//! test <suite>::<case> ... skipped: <why>   skipped (what the case needs is not
//!                                           there, e.g. a real PMU): neither
//!                                           passed nor failed
//! ```
//!
//! The run passes when the exit says success, every planned case reported,
//! none failed, and the exit status agrees with the cases (success exactly
//! when no case failed). A skipped case counts as reported, never as passed
//! and not as failed. A kernel that prints no `suite` line is one case,
//! `run`, judged by its exit alone. [`judge`] applies these rules; a
//! case listed in [`Run::expect_fail`] passes only by failing with its text.
//!
//! # Environment
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `PMU_QEMU_ACCEL` | `tcg` (QEMU's emulated CPU, no PMU) or `kvm` (`-enable-kvm -cpu host,-arch-capabilities`: the host's CPU and the PMU its KVM exposes; refused when `/dev/kvm` cannot be opened read-write); see [`qemu::Accel`] | `tcg` |
//! | `PMU_QEMU_TIMEOUT` | seconds before a kernel without a verdict counts as hung ([`qemu::timeout`]) | 60 under TCG, 300 under KVM |
//! | `PMU_QEMU_FIRMWARE` | `qboot` (`-bios qboot.rom` where QEMU has it, QEMU's default firmware otherwise) or `default` (QEMU's default, SeaBIOS); see [`qemu::Firmware`] | `qboot` |
//! | `QEMU` | the QEMU binary | `qemu-system-x86_64` |
//!
//! The runner prints the accelerator on its first line and the firmware on
//! its second. When QEMU is
//! missing and the runner runs as root on a machine with apt, it installs
//! Debian's `qemu-system-x86` ([`qemu::ensure_qemu`]); otherwise it says
//! which package to install.
//!
//! # The binary's exit status
//!
//! 0 when the run passed; 1 when it failed (each failed case is printed on
//! standard error with why); 2 for a usage error or an unusable
//! `PMU_QEMU_ACCEL` or `PMU_QEMU_FIRMWARE`; 127 when QEMU cannot be found or installed;
//! 141 when its standard output is a closed pipe (`| head`): it stops
//! quietly, QEMU killed ([`output`]).

use std::path::Path;

pub mod output;
pub mod qemu;
pub mod stacks;

/// One boot of one kernel, as its source header describes it.
#[derive(Debug)]
pub struct Run {
    /// The kernel binary's name.
    pub kernel: String,
    /// The configuration's name (empty for a kernel with a single plain boot).
    pub config: String,
    /// Extra QEMU arguments.
    pub qemu_args: Vec<String>,
    /// The cases that must fail, each with a text its failure must
    /// contain (a test kernel's `expect-fail:` header lines).
    pub expect_fail: Vec<(String, String)>,
}

impl Run {
    /// `kernel[config]`, or `kernel` for a plain boot.
    pub fn label(&self) -> String {
        if self.config.is_empty() {
            self.kernel.clone()
        } else {
            format!("{}[{}]", self.kernel, self.config)
        }
    }
}

impl Run {
    /// A plain boot of `kernel` with `qemu_args`, nothing expected to fail
    /// (what `pmu-qemu-run` judges).
    pub fn plain(kernel: &str, qemu_args: Vec<String>) -> Run {
        Run {
            kernel: kernel.into(),
            config: String::new(),
            qemu_args,
            expect_fail: Vec::new(),
        }
    }
}

/// What became of one case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It passed (an expected failure that failed as it must passes).
    Passed,
    /// It failed.
    Failed,
    /// The kernel skipped it: neither passed nor failed.
    Skipped,
}

impl Verdict {
    /// The word of the host's case line.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Passed => "ok",
            Verdict::Failed => "FAILED",
            Verdict::Skipped => "skipped",
        }
    }
}

/// The verdict on one case.
#[derive(Debug)]
pub struct CaseResult {
    /// The case's name (`run` for a kernel that is not a test suite).
    pub name: String,
    /// What became of it.
    pub verdict: Verdict,
    /// What to print after the verdict.
    pub note: String,
}

impl CaseResult {
    /// A case named `name` with `verdict` and `note` (what to print after
    /// the verdict).
    pub fn new(name: impl Into<String>, verdict: Verdict, note: String) -> CaseResult {
        CaseResult {
            name: name.into(),
            verdict,
            note,
        }
    }

    /// A case named `name` that passed or failed, with `note`.
    pub fn judged(name: impl Into<String>, passed: bool, note: String) -> CaseResult {
        let verdict = if passed {
            Verdict::Passed
        } else {
            Verdict::Failed
        };
        CaseResult::new(name, verdict, note)
    }

    /// The note of a case whose lines (`what`) differ from those expected:
    /// both, one per line.
    pub fn mismatch(what: &str, got: &[&str], expected: &[&str]) -> String {
        let mut note = format!("\n    {what}:");
        for l in got {
            note += &format!("\n    | {l}");
        }
        note += "\n    expected:";
        for l in expected {
            note += &format!("\n    | {l}");
        }
        note
    }

    /// Whether it passed.
    pub fn passed(&self) -> bool {
        self.verdict == Verdict::Passed
    }

    /// Whether it failed.
    pub fn failed(&self) -> bool {
        self.verdict == Verdict::Failed
    }
}

/// The tally line: `N passed, N failed`, and `, N skipped` when `skipped` is
/// not zero.
pub fn tally(passed: usize, failed: usize, skipped: usize) -> String {
    if skipped == 0 {
        format!("{passed} passed, {failed} failed")
    } else {
        format!("{passed} passed, {failed} failed, {skipped} skipped")
    }
}

/// Turns a kernel's console output and exit status into case results: one
/// per case of a `hobby::test` suite (all planned cases must report, and the
/// exit status must agree with them), or one `run` case for any other kernel.
/// The lines it reads are in the [crate documentation](crate#case-lines).
pub fn judge(console: &str, exit_success: bool, runner_said: &str, run: &Run) -> Vec<CaseResult> {
    let planned = console.lines().find_map(|l| {
        let rest = l.strip_prefix("suite ")?;
        let (_, count) = rest.split_once(": ")?;
        count.strip_suffix(" cases")?.parse::<usize>().ok()
    });
    let Some(planned) = planned else {
        // Not a test kernel: the run is the case.
        return vec![if exit_success {
            CaseResult::new("run", Verdict::Passed, String::new())
        } else {
            CaseResult::new("run", Verdict::Failed, format!("\n    {runner_said}"))
        }];
    };

    let mut results = Vec::new();
    let mut lines = console.lines().peekable();
    let mut kernel_failures = 0;
    while let Some(line) = lines.next() {
        let Some(rest) = line.strip_prefix("test ") else {
            continue;
        };
        let (name, verdict, why) = if let Some(name) = rest.strip_suffix(" ... ok") {
            (name, Verdict::Passed, String::new())
        } else if let Some(name) = rest.strip_suffix(" ... FAILED") {
            let why = match lines.peek() {
                Some(next) if next.starts_with("    ") => next.trim().to_string(),
                _ => String::new(),
            };
            (name, Verdict::Failed, why)
        } else if let Some((name, why)) = rest.split_once(" ... skipped: ") {
            (name, Verdict::Skipped, why.trim().to_string())
        } else {
            continue;
        };
        let case = name.rsplit("::").next().unwrap_or(name).to_string();
        if verdict == Verdict::Failed {
            kernel_failures += 1;
        }
        let expected = run.expect_fail.iter().find(|(c, _)| *c == case);
        results.push(match (expected, verdict) {
            (None, Verdict::Passed) => CaseResult::new(case, Verdict::Passed, String::new()),
            (None, Verdict::Failed) => {
                CaseResult::new(case, Verdict::Failed, format!("\n    {why}"))
            }
            (None, Verdict::Skipped) => CaseResult::new(case, Verdict::Skipped, format!(": {why}")),
            (Some((_, reason)), Verdict::Failed) if why.contains(reason.as_str()) => {
                CaseResult::new(
                    case,
                    Verdict::Passed,
                    format!(" (failed as it must: {why})"),
                )
            }
            (Some((_, reason)), Verdict::Failed) => CaseResult::new(
                case,
                Verdict::Failed,
                format!("\n    must fail with `{reason}`, failed with `{why}`"),
            ),
            (Some(_), Verdict::Passed) => CaseResult::new(
                case,
                Verdict::Failed,
                "\n    passed, but this case must fail".into(),
            ),
            (Some((_, reason)), Verdict::Skipped) => CaseResult::new(
                case,
                Verdict::Failed,
                format!("\n    skipped ({why}), but this case must fail with `{reason}`"),
            ),
        });
    }
    for (case, _) in &run.expect_fail {
        if !results.iter().any(|r| r.name == *case) {
            results.push(CaseResult::new(
                case.clone(),
                Verdict::Failed,
                "\n    expected to fail, but never reported".into(),
            ));
        }
    }
    let reported = results.len().min(planned);
    if reported < planned {
        results.push(CaseResult::new(
            "(run)",
            Verdict::Failed,
            format!(
                "\n    {} of {planned} cases never reported; {runner_said}",
                planned - reported
            ),
        ));
    } else if exit_success != (kernel_failures == 0) {
        results.push(CaseResult::new(
            "(run)",
            Verdict::Failed,
            format!(
                "\n    exit status says {}, the cases say {kernel_failures} failed; {runner_said}",
                if exit_success { "success" } else { "failure" }
            ),
        ));
    }
    results
}

/// Boots `kernel` with the console on this terminal (standard output) and
/// judges it, its call stacks too ([`stacks::check`]): what the
/// `pmu-qemu-run` binary does. Returns the cases and the console; `Err`
/// when standard output was closed during the boot (QEMU was killed,
/// nothing judged: [`output`]).
pub fn boot_and_judge(
    kernel: &Path,
    accel: qemu::Accel,
    qemu_args: &[String],
) -> Result<(Vec<CaseResult>, String), output::Closed> {
    let boot = qemu::boot(kernel, accel, qemu_args, true);
    if boot.stdout_closed {
        return Err(output::Closed);
    }
    let name = kernel.file_name().map_or_else(
        || kernel.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let mut results = judge(
        &boot.console,
        boot.success,
        &boot.said,
        &Run::plain(&name, qemu_args.to_vec()),
    );
    results.extend(stacks::check(&boot.console, kernel));
    Ok((results, boot.console))
}

#[cfg(test)]
mod tests;

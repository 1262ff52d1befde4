//! The host side of the QEMU tests: builds every test kernel
//! (`qemu-tests/src/bin`), example kernel (`examples/`) and the external
//! client (`examples/client`, a crate outside the workspace) for
//! `x86_64-unknown-none`, boots each under QEMU ([`qemu::boot`], what
//! `pmu-qemu-run` does too) and judges what it printed. `tests/qemu.rs` runs them all for `cargo test`;
//! the `qemu` binary (`cargo qemu <kernel>`) boots one.
//!
//! A kernel's source says how to boot it, in its leading doc comment:
//!
//! ```text
//! //! qemu-run: <config>: <extra QEMU arguments>      (one line per boot; none = one plain boot)
//! //! expect-fail: <case>: <text the failure must contain>
//! //! tcg-only: <why>                                  (not booted under KVM: one skipped case)
//! //! icount: <why>                                    (under TCG, guest time counts instructions)
//! ```
//!
//! A kernel that prints `suite <name>: <n> cases` reports its cases with the
//! protocol of `hobby::test`; any other kernel (the examples) is one case that
//! passes when it exits with the success code. A run whose exit status does
//! not match what it reported, that hangs, or that stops before reporting all
//! its cases, adds a failure.
//!
//! # Case lines
//!
//! The lines [`judge`] reads from a test kernel's console (everything else
//! is the kernel's own output):
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
//! A skipped case counts as reported, never as passed and not as failed;
//! its reason is printed after the verdict. A case listed as `expect-fail`
//! that is skipped fails (it did not fail as it must).
//!
//! Each case becomes one line here, `qemu <kernel>[<config>]::<case> ...
//! ok|FAILED|skipped: <why>`, and [`Workspace::test_all`] ends with the tally
//! `N passed, N failed`, or `N passed, N failed, N skipped` when a case was
//! skipped ([`tally`]). The run succeeds when nothing failed and something
//! passed.
//!
//! # Accelerator
//!
//! `PMU_QEMU_ACCEL` (`tcg`, the default, or `kvm`: `-enable-kvm -cpu host`,
//! refused when `/dev/kvm` is not usable) says how every kernel boots; see
//! [`qemu::Accel`] for the exact arguments. The runners print it on their
//! first line. A kernel whose header says `tcg-only: <why>` (one that
//! fails on purpose with TCG's own faults) is not booted under KVM: it is
//! one case, `(run)`, skipped with `TCG only: <why>`.
//!
//! # Deterministic time
//!
//! A kernel whose cases judge statistics of time (how ticks spread, which
//! function a tick lands in) says `icount: <why>` in its header: under TCG
//! it boots with [`ICOUNT`] (`-icount`: the TSC, the APIC timer and the PIT
//! follow the instructions executed, not the host's scheduling, and a
//! halted CPU jumps to its next timer), on single-threaded TCG (`-icount`
//! excludes multi-threaded TCG, so a kernel's `-accel tcg,thread=multi`
//! becomes `-accel tcg`; never for a kernel whose cases race CPUs against
//! each other), and with `time=icount` on its command line, which the
//! kernel reads (`hobby::deterministic_time`). Under KVM there is no
//! `-icount`: such a kernel boots as any other and its cases hold by their
//! own design there.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::Mutex;
use std::thread;

pub mod qemu;

/// The target the kernels are built for.
pub const TARGET: &str = "x86_64-unknown-none";

/// The kernel crate outside the workspace that uses `pmu` as a user's
/// would (its binary is `client`).
const CLIENT: &str = "examples/client";

/// One boot of one kernel, as its source header describes it.
#[derive(Debug)]
pub struct Run {
    /// The kernel binary's name.
    pub kernel: String,
    /// The configuration's name (empty for a kernel with a single plain boot).
    pub config: String,
    /// Extra QEMU arguments.
    pub qemu_args: Vec<String>,
    expect_fail: Vec<(String, String)>,
    /// The kernel logs with defmt on COM2 (header line `defmt: com2`).
    defmt: bool,
    /// Why the kernel runs only under TCG (header line `tcg-only: <why>`):
    /// under KVM it is not booted, and reported as one skipped case.
    tcg_only: Option<String>,
    /// Why the kernel needs deterministic time (header line `icount:
    /// <why>`): under TCG it boots with [`ICOUNT`].
    icount: Option<String>,
}

/// The QEMU arguments of deterministic time (see the [crate
/// documentation](crate#deterministic-time)): one instruction per 2^4 ns
/// of guest time, a halted CPU skipping to its next timer (`sleep=off`).
/// The shift trades instructions for guest time: a case that spins for a
/// guest millisecond runs 16 times fewer instructions than at 1 ns (the
/// timer kernel, warm: about 2 s at shift 4, 3 s at 3, 7-10 s at 0-2 on
/// the project machine, 2026-11-26).
pub const ICOUNT: [&str; 2] = ["-icount", "shift=4,sleep=off"];

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
            defmt: false,
            tcg_only: None,
            icount: None,
        }
    }

    /// The kernel's QEMU arguments under `accel`: its header's, with
    /// [`ICOUNT`] for an `icount:` kernel under TCG (see the [crate
    /// documentation](crate#deterministic-time)).
    pub fn boot_args(&self, accel: qemu::Accel) -> Vec<String> {
        if self.icount.is_none() || accel != qemu::Accel::Tcg {
            return self.qemu_args.clone();
        }
        let mut args = Vec::new();
        let mut append = None;
        let mut rest = self.qemu_args.iter();
        while let Some(a) = rest.next() {
            match a.as_str() {
                // Multi-threaded TCG cannot count instructions.
                "-accel" => {
                    rest.next();
                }
                "-append" => append = rest.next().cloned(),
                _ => args.push(a.clone()),
            }
        }
        args.extend(["-accel", "tcg"].map(String::from));
        args.extend(ICOUNT.map(String::from));
        let cmdline = match append {
            Some(a) => format!("{a} time=icount"),
            None => "time=icount".into(),
        };
        args.extend(["-append".to_string(), cmdline]);
        args
    }

    /// What `accel` makes of this run without booting it: one skipped
    /// case, `(run)`, for a TCG-only kernel under KVM; `None` when it boots.
    pub fn not_booted(&self, accel: qemu::Accel) -> Option<CaseResult> {
        match (&self.tcg_only, accel) {
            (Some(why), qemu::Accel::Kvm) => Some(CaseResult::new(
                "(run)",
                Verdict::Skipped,
                format!(": TCG only: {why}"),
            )),
            _ => None,
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
    fn new(name: impl Into<String>, verdict: Verdict, note: String) -> CaseResult {
        CaseResult {
            name: name.into(),
            verdict,
            note,
        }
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

/// The repository and the tools the kernels are built and booted with.
#[derive(Debug)]
pub struct Workspace {
    root: PathBuf,
    target_dir: PathBuf,
}

impl Default for Workspace {
    fn default() -> Self {
        Self::new()
    }
}

impl Workspace {
    /// The repository this crate sits in.
    pub fn new() -> Self {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let root = root.canonicalize().unwrap_or(root);
        // Beside the other build products, under the target directory the
        // caller chose; in a directory of its own, because `cargo test`
        // holds the lock of its own build directory while tests run.
        let target =
            std::env::var_os("CARGO_TARGET_DIR").map_or(root.join("target"), PathBuf::from);
        Self {
            target_dir: target.join("qemu"),
            root,
        }
    }

    /// Installs what is missing (the Rust target, QEMU) and builds every
    /// kernel.
    pub fn prepare(&self) -> Result<(), String> {
        ensure_target(&self.root)?;
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        println!("qemu: building kernels for {TARGET}");
        let built = Command::new(&cargo)
            .current_dir(&self.root)
            .args(["build", "--quiet", "--bins", "--target", TARGET])
            .args(["-p", "pmu-qemu-tests", "-p", "pmu-examples", "--target-dir"])
            .arg(&self.target_dir)
            .status();
        if !matches!(built, Ok(s) if s.success()) {
            return Err(format!("building the kernels failed ({built:?})"));
        }
        // The external client, a workspace of its own: built from its own
        // directory, with its own cargo configuration, as a user would.
        let client = Command::new(&cargo)
            .current_dir(self.root.join(CLIENT))
            .args(["build", "--quiet", "--target", TARGET, "--target-dir"])
            .arg(&self.target_dir)
            .status();
        if !matches!(client, Ok(s) if s.success()) {
            return Err(format!("building the external client failed ({client:?})"));
        }
        // Install QEMU once, before runs start in parallel.
        qemu::ensure_qemu()
    }

    /// Builds `kernels` (of `qemu-tests/src/bin`) in release; returns the
    /// directory that holds them.
    pub fn build_release(&self, kernels: &[&str]) -> Result<PathBuf, String> {
        ensure_target(&self.root)?;
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(&cargo);
        build
            .current_dir(&self.root)
            .args(["build", "--quiet", "--release", "--target", TARGET])
            .args(["-p", "pmu-qemu-tests", "--target-dir"])
            .arg(&self.target_dir);
        for k in kernels {
            build.args(["--bin", k]);
        }
        match build.status() {
            Ok(s) if s.success() => Ok(self.target_dir.join(TARGET).join("release")),
            other => Err(format!(
                "building {kernels:?} in release failed ({other:?})"
            )),
        }
    }

    /// Starts building `pmu-defmt-decode` (in a target directory of its own,
    /// so that it runs beside the kernel build); the handle yields the
    /// program's path.
    fn build_decoder_in_background(&self) -> thread::JoinHandle<Result<PathBuf, String>> {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let root = self.root.clone();
        let dir = self.target_dir.join("host");
        thread::spawn(move || {
            let status = Command::new(&cargo)
                .current_dir(&root)
                .args(["build", "--quiet", "-p", "pmu-defmt-decode", "--target-dir"])
                .arg(&dir)
                .status();
            match status {
                Ok(s) if s.success() => Ok(dir.join("debug").join("pmu-defmt-decode")),
                other => Err(format!("building pmu-defmt-decode failed ({other:?})")),
            }
        })
    }

    /// Every boot of every kernel, in name order.
    pub fn runs(&self) -> Result<Vec<Run>, String> {
        discover(&self.root)
    }

    fn kernel(&self, run: &Run) -> PathBuf {
        self.target_dir.join(TARGET).join("debug").join(&run.kernel)
    }

    /// Boots `run` under `accel` with the console on this terminal; returns
    /// its verdict.
    pub fn boot_attached(&self, run: &Run, accel: qemu::Accel) -> ExitCode {
        if let (Some(why), qemu::Accel::Kvm) = (&run.tcg_only, accel) {
            println!(
                "qemu: {} is TCG only ({why}): `cargo test` skips it under KVM; booting it anyway",
                run.label()
            );
        }
        let args = run.boot_args(accel);
        if args.is_empty() {
            println!("qemu: booting {}", run.label());
        } else {
            println!("qemu: booting {} (QEMU {})", run.label(), args.join(" "));
        }
        let boot = qemu::boot(&self.kernel(run), accel, &args, true);
        if !boot.success {
            eprintln!("qemu: {}", boot.said);
        }
        if boot.success {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    }

    /// Boots every run (two or more at a time) under the accelerator
    /// `PMU_QEMU_ACCEL` names (printed first), prints every case, and ends
    /// with the [`tally`]: `N passed, N failed` (`, N skipped` when a case
    /// was skipped). Succeeds when nothing failed and something passed.
    pub fn test_all(&self) -> ExitCode {
        let accel = match qemu::Accel::from_env() {
            Ok(accel) => accel,
            Err(e) => {
                eprintln!("qemu: {e}");
                return ExitCode::FAILURE;
            }
        };
        println!("qemu: {accel}");
        // The defmt decoder (a host program on a large library) builds in
        // the background while the kernels build and boot.
        let decoder = self.build_decoder_in_background();
        let runs = match self.prepare().and_then(|()| self.runs()) {
            Ok(runs) => runs,
            Err(e) => {
                eprintln!("qemu: {e}");
                return ExitCode::FAILURE;
            }
        };
        // Joined by the first defmt run that needs it.
        let decoder_build = Mutex::new(Some(decoder));
        let decoder = std::sync::OnceLock::new();
        let decoder_path = || {
            decoder
                .get_or_init(|| match decoder_build.lock().unwrap().take() {
                    Some(h) => h
                        .join()
                        .unwrap_or_else(|_| Err("the decoder build panicked".into())),
                    None => Err("the decoder build is gone".into()),
                })
                .clone()
        };
        let next = Mutex::new(runs.iter());
        let results = Mutex::new(Vec::new());
        let took = Mutex::new(Vec::new());
        // A kernel booted with several virtual CPUs (`-smp`) uses a host
        // core per CPU: it boots alone, the others two at a time.
        let cores = std::sync::RwLock::new(());
        let workers = thread::available_parallelism().map_or(2, |n| n.get().min(4));
        thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| {
                    loop {
                        // Take the next run and let go of the queue before
                        // booting it (a guard in a `while let` scrutinee
                        // would live for the whole boot).
                        let run = next.lock().unwrap().next();
                        let Some(run) = run else { break };
                        let smp = run.qemu_args.iter().any(|a| a == "-smp");
                        let (_alone, _shared) = if smp {
                            (Some(cores.write().unwrap_or_else(|e| e.into_inner())), None)
                        } else {
                            (None, Some(cores.read().unwrap_or_else(|e| e.into_inner())))
                        };
                        let started = std::time::Instant::now();
                        let skipped = run.not_booted(accel);
                        let booted = skipped.is_none();
                        let mut cases = match skipped {
                            Some(skipped) => vec![skipped],
                            None => boot(&self.kernel(run), run, accel, &self.target_dir),
                        };
                        if run.defmt && booted {
                            cases.push(check_defmt(
                                &self.kernel(run),
                                &self.target_dir,
                                &decoder_path,
                            ));
                        }
                        let mut out = String::new();
                        for case in &cases {
                            let verdict = case.verdict.word();
                            let (label, name, note) = (run.label(), &case.name, &case.note);
                            out += &format!("qemu {label}::{name} ... {verdict}{note}\n");
                        }
                        print!("{out}");
                        took.lock().unwrap().push((run.label(), started.elapsed()));
                        let mut results = results.lock().unwrap();
                        results.extend(cases.into_iter().map(|c| c.verdict));
                    }
                });
            }
        });
        let results = results.into_inner().unwrap();
        println!("qemu: {}", longest(took.into_inner().unwrap()));
        let count = |v: Verdict| results.iter().filter(|&&r| r == v).count();
        let (passed, failed) = (count(Verdict::Passed), count(Verdict::Failed));
        println!("{}", tally(passed, failed, count(Verdict::Skipped)));
        if failed == 0 && passed > 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    }
}

/// The line that names the boots that took longest (five at most), each
/// with its seconds: where the run's time goes.
pub fn longest(mut took: Vec<(String, std::time::Duration)>) -> String {
    took.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let named: Vec<String> = took
        .iter()
        .take(5)
        .map(|(label, t)| format!("{label} {:.1} s", t.as_secs_f64()))
        .collect();
    format!("longest boots: {}", named.join(", "))
}

/// Makes sure the bare-metal target is installed (rust-toolchain.toml names
/// it, but rustup adds targets only when it installs the toolchain).
fn ensure_target(root: &Path) -> Result<(), String> {
    let sysroot = Command::new("rustc")
        .current_dir(root)
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| format!("cannot run rustc: {e}"))?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&sysroot.stdout).trim());
    if sysroot.join("lib/rustlib").join(TARGET).exists() {
        return Ok(());
    }
    println!("qemu tests: installing the {TARGET} target with rustup");
    let status = Command::new("rustup")
        .current_dir(root)
        .args(["target", "add", TARGET])
        .status()
        .map_err(|e| format!("{TARGET} is missing and rustup cannot be run: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`rustup target add {TARGET}` failed"))
    }
}

/// Every kernel source and the boots its header asks for.
fn discover(root: &Path) -> Result<Vec<Run>, String> {
    let mut sources = Vec::new();
    for dir in ["qemu-tests/src/bin", "examples"] {
        let entries = fs::read_dir(root.join(dir)).map_err(|e| format!("{dir}: {e}"))?;
        for entry in entries {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("build.rs") {
                sources.push(path);
            }
        }
    }
    sources.push(root.join(CLIENT).join("src/main.rs"));
    sources.sort();
    let mut runs = Vec::new();
    for path in sources {
        let kernel = if path.starts_with(root.join(CLIENT)) {
            "client".to_string()
        } else {
            path.file_stem().unwrap().to_string_lossy().into_owned()
        };
        let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let header = text.lines().take_while(|l| l.starts_with("//!"));
        let mut configs = Vec::new();
        let mut expect_fail = Vec::new();
        let mut defmt = false;
        let mut tcg_only = None;
        let mut icount = None;
        for line in header {
            let line = line.trim_start_matches("//!").trim();
            if let Some(rest) = line.strip_prefix("qemu-run:") {
                let (config, args) = rest.split_once(':').unwrap_or((rest, ""));
                let args = args.split_whitespace().map(String::from).collect();
                configs.push((config.trim().to_string(), args));
            } else if let Some(rest) = line.strip_prefix("expect-fail:") {
                let (case, reason) = rest.split_once(':').ok_or_else(|| {
                    format!("{}: expect-fail needs `case: reason`", path.display())
                })?;
                expect_fail.push((case.trim().to_string(), reason.trim().to_string()));
            } else if line == "defmt: com2" {
                defmt = true;
            } else if let Some(why) = line.strip_prefix("tcg-only:") {
                tcg_only = Some(why.trim().to_string());
            } else if let Some(why) = line.strip_prefix("icount:") {
                icount = Some(why.trim().to_string());
            }
        }
        if configs.is_empty() {
            configs.push((String::new(), Vec::new()));
        }
        for (config, qemu_args) in configs {
            runs.push(Run {
                kernel: kernel.clone(),
                config,
                qemu_args,
                expect_fail: expect_fail.clone(),
                defmt,
                tcg_only: tcg_only.clone(),
                icount: icount.clone(),
            });
        }
    }
    Ok(runs)
}

/// Where a defmt kernel's COM2 bytes go.
fn defmt_frames(kernel: &Path, target_dir: &Path) -> PathBuf {
    let name = kernel
        .file_name()
        .map_or("kernel".into(), |n| n.to_string_lossy().into_owned());
    target_dir.join(format!("{name}.defmt"))
}

/// Boots one kernel under `accel` and judges what it printed.
fn boot(kernel: &Path, run: &Run, accel: qemu::Accel, target_dir: &Path) -> Vec<CaseResult> {
    let mut args = run.boot_args(accel);
    if run.defmt {
        // COM1 is the console (`-serial stdio`); the second `-serial` is COM2.
        args.push("-serial".into());
        args.push(format!(
            "file:{}",
            defmt_frames(kernel, target_dir).display()
        ));
    }
    let boot = qemu::boot(kernel, accel, &args, false);
    if run.defmt {
        // Kept for `check_defmt`, which compares with the decoded frames.
        let _ = fs::write(
            defmt_frames(kernel, target_dir).with_extension("console"),
            &boot.console,
        );
    }
    let mut results = judge(&boot.console, boot.success, &boot.said, run);
    if results.iter().any(CaseResult::failed)
        && let Some(last) = results.last_mut()
    {
        last.note += "\n    --- kernel console ---\n";
        for line in boot.console.lines() {
            last.note += &format!("    | {line}\n");
        }
        last.note += "    ----------------------";
    }
    results
}

/// The host half of a defmt kernel's check, as one more case,
/// `defmt_decoded`: the frames the kernel wrote on COM2, decoded with its
/// ELF by `pmu-defmt-decode`, must be exactly the lines the kernel printed
/// after `defmt-expect: ` on its console, in order.
fn check_defmt(
    kernel: &Path,
    target_dir: &Path,
    decoder: &dyn Fn() -> Result<PathBuf, String>,
) -> CaseResult {
    let case = |passed, note: String| {
        let verdict = if passed {
            Verdict::Passed
        } else {
            Verdict::Failed
        };
        CaseResult::new("defmt_decoded", verdict, note)
    };
    let decoder = match decoder() {
        Ok(d) => d,
        Err(e) => return case(false, format!("\n    {e}")),
    };
    let frames = defmt_frames(kernel, target_dir);
    let out = match Command::new(&decoder).arg(kernel).arg(&frames).output() {
        Ok(out) if out.status.success() => out,
        Ok(out) => {
            return case(
                false,
                format!("\n    {}", String::from_utf8_lossy(&out.stderr).trim()),
            );
        }
        Err(e) => {
            return case(
                false,
                format!("\n    cannot run {}: {e}", decoder.display()),
            );
        }
    };
    let decoded = String::from_utf8_lossy(&out.stdout).into_owned();
    // The console of that run is not kept, so the expectations are read
    // back from the same boot's COM1 record: the kernel prints them there.
    let console = fs::read_to_string(frames.with_extension("console")).unwrap_or_default();
    let expected: Vec<&str> = console
        .lines()
        .filter_map(|l| l.strip_prefix("defmt-expect: "))
        .collect();
    let got: Vec<&str> = decoded.lines().collect();
    if !expected.is_empty() && got == expected {
        case(true, format!(" ({} messages decoded)", got.len()))
    } else {
        let mut note = String::from("\n    decoded:");
        for l in &got {
            note += &format!("\n    | {l}");
        }
        note += "\n    expected:";
        for l in &expected {
            note += &format!("\n    | {l}");
        }
        case(false, note)
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

#[cfg(test)]
mod tests;

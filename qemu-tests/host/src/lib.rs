//! The host side of the QEMU tests: builds every test kernel
//! (`qemu-tests/src/bin`), example kernel (`examples/`) and the external
//! client (`examples/client`, a crate outside the workspace) for
//! `x86_64-unknown-none`, boots each under QEMU with the runner's library
//! (`pmu-qemu-run`, [`qemu::boot`]) and judges what it printed ([`judge`]:
//! the exit code on port F4h and the case lines, documented in that crate);
//! a kernel that logs with defmt has its frames decoded by the program
//! `pmu-defmt-decode`, which the caller names. The QEMU suite
//! (`qemu-tests/suite`, its `tests/qemu.rs`) runs them all for `cargo
//! test`; the `qemu` binary (`cargo qemu <kernel>`) boots one.
//!
//! The kernels of package `pmu-qemu-nofp` (`qemu-tests/nofp/src/bin`) are
//! built without frame pointers, every crate of them, in a target
//! directory of their own, beside the others ([`Workspace::prepare`]).
//!
//! A kernel's source says how to boot it, in its leading doc comment:
//!
//! ```text
//! //! qemu-run: <config>: <extra QEMU arguments>      (one line per boot; none = one plain boot)
//! //! expect-fail: <case>: <text the failure must contain>
//! //! defmt: com2                                     (it logs defmt frames on COM2)
//! //! tcg-only: <why>                                  (not booted under KVM: one skipped case)
//! //! icount: <why>                                    (under TCG, guest time counts instructions)
//! //! check-report: <why>                              (its validation report is checked: one more case, `report`)
//! ```
//!
//! Each case becomes one line here, `qemu <kernel>[<config>]::<case> ...
//! ok|FAILED|skipped: <why>`, and [`Workspace::test_all`] ends with the tally
//! `N passed, N failed`, or `N passed, N failed, N skipped` when a case was
//! skipped ([`tally`]). The run succeeds when nothing failed and something
//! passed. Before the tally a line names the boots that took longest
//! ([`longest`]). The kernels boot two at a time, one with several CPUs
//! alone, those first and then the longest first, by the times the last
//! run kept in `target/qemu/boot-seconds-<accelerator>.txt`
//! ([`in_boot_order`]).
//!
//! # Accelerator
//!
//! `PMU_QEMU_ACCEL` (`tcg`, the default, or `kvm`) says how every kernel
//! boots ([`qemu::Accel`] has the exact arguments); the first line names
//! it. A kernel under KVM counts as hung after 300 s instead of TCG's 60
//! ([`qemu::timeout`]). A kernel whose header says `tcg-only: <why>` (one
//! that fails on purpose with TCG's own faults) is not booted under KVM: it
//! is one case, `(run)`, skipped with `TCG only: <why>`
//! ([`KernelRun::not_booted`]).
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

pub mod budget;
pub mod image;
pub mod report;
pub mod validate;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::Mutex;
use std::thread;

pub use pmu_qemu_run::{CaseResult, Run, Verdict, judge, qemu, stacks, tally};

/// One boot of one kernel of the repository: the runner's [`Run`] and
/// whether the kernel logs defmt frames on COM2 (header line `defmt: com2`),
/// which the host decodes and checks as one more case.
#[derive(Debug)]
pub struct KernelRun {
    /// The boot.
    pub run: Run,
    /// It logs with defmt.
    pub defmt: bool,
    /// The package its binary is in (`None`: the external client, a
    /// workspace of its own).
    pub package: Option<&'static str>,
    /// Why the kernel runs only under TCG (header line `tcg-only: <why>`):
    /// under KVM it is not booted, and reported as one skipped case.
    pub tcg_only: Option<String>,
    /// Why the kernel needs deterministic time (header line `icount:
    /// <why>`): under TCG it boots with [`ICOUNT`].
    pub icount: Option<String>,
    /// The kernel prints a validation report (header line `check-report:
    /// <why>`): the host reads it back and checks it against the case
    /// lines, as one more case, `report` ([`report::check`]).
    pub check_report: Option<String>,
}

/// The QEMU arguments of deterministic time (see the [crate
/// documentation](crate#deterministic-time)): one instruction per 2^4 ns
/// of guest time, a halted CPU skipping to its next timer (`sleep=off`).
/// The shift trades instructions for guest time: a case that spins for a
/// guest millisecond runs 16 times fewer instructions than at 1 ns (the
/// timer kernel, warm: about 2 s at shift 4, 3 s at 3, 7-10 s at 0-2 on
/// the project machine, 2026-11-26).
pub const ICOUNT: [&str; 2] = ["-icount", "shift=4,sleep=off"];

impl KernelRun {
    /// The kernel's QEMU arguments under `accel`: its header's, with
    /// [`ICOUNT`] for an `icount:` kernel under TCG (see the [crate
    /// documentation](crate#deterministic-time)).
    pub fn boot_args(&self, accel: qemu::Accel) -> Vec<String> {
        if self.icount.is_none() || accel != qemu::Accel::Tcg {
            return self.run.qemu_args.clone();
        }
        let mut args = Vec::new();
        let mut append = None;
        let mut rest = self.run.qemu_args.iter();
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

    /// Whether the kernel boots with several virtual CPUs (`-smp`): it
    /// needs a host core per CPU, and boots alone.
    pub fn several_cpus(&self) -> bool {
        self.run.qemu_args.iter().any(|a| a == "-smp")
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

/// The target the kernels are built for.
pub const TARGET: &str = "x86_64-unknown-none";

/// The kernel crate outside the workspace that uses `pmu` as a user's
/// would (its binary is `client`).
const CLIENT: &str = "examples/client";

/// The package whose kernels are built without frame pointers
/// (`qemu-tests/nofp`), every crate of them (the crate and the kernel
/// library too): in a target directory of their own
/// ([`Workspace::kernel_without_frame_pointers`]).
const NO_FRAME_POINTERS: &str = "pmu-qemu-nofp";

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

    /// A `cargo build` of kernels for [`TARGET`], from `dir`, into
    /// `target_dir`. Without incremental compilation and with line tables
    /// only for the crates that would carry full debug information: on a
    /// fresh clone these builds are most of `cargo test`'s time, and the
    /// incremental caches and full debug information of opt-level 2 code
    /// cost about a third of it (35 to 25 CPU-seconds for the workspace's
    /// kernels); nothing reads the kernels' DWARF beyond line numbers.
    /// `cargo qemu` builds the same way, so the two share their artifacts.
    fn kernel_build(dir: &Path, target_dir: &Path) -> Command {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        build
            .current_dir(dir)
            .env("CARGO_INCREMENTAL", "0")
            .args(["build", "--target", TARGET])
            .args(["--config", "profile.dev.debug=\"line-tables-only\""])
            .arg("--target-dir")
            .arg(target_dir);
        build
    }

    /// Where the kernels without frame pointers are built: a target
    /// directory of their own (their crates' flags differ from the other
    /// kernels', so sharing one would rebuild them by turns).
    fn no_frame_pointers_dir(&self) -> PathBuf {
        self.target_dir.join("nofp")
    }

    /// The build of [`NO_FRAME_POINTERS`]'s kernels (`kernel` alone, if
    /// given) as [`Workspace::kernel_build`] builds the others, but with
    /// `RUSTFLAGS` `-C force-frame-pointers=no`, which replaces the
    /// workspace's flags (`.cargo/config.toml`'s `=yes`) for every crate of
    /// the kernel. (A later `=no` beside `=yes`, from `cargo rustc` or a
    /// `--config` array, does not undo it: rustc keeps the stronger of the
    /// two.) On a fresh clone this builds the crate and the kernel library
    /// a second time (about 11 CPU seconds here), beside the other
    /// kernels' build.
    fn kernel_without_frame_pointers(&self, kernel: Option<&str>) -> Command {
        let mut build = Self::kernel_build(&self.root, &self.no_frame_pointers_dir());
        build
            .env("RUSTFLAGS", "-C force-frame-pointers=no")
            .args(["-p", NO_FRAME_POINTERS]);
        match kernel {
            Some(k) => build.args(["--bin", k]),
            None => build.arg("--bins"),
        };
        build
    }

    /// Where the external client is built: a target directory of its own,
    /// so that its build runs beside the workspace's (cargo locks a target
    /// directory for one build at a time).
    fn client_target_dir(&self) -> PathBuf {
        self.target_dir.join("client")
    }

    /// Installs what is missing (the Rust target, QEMU) and builds every
    /// kernel, saying what it builds and how long it took: the workspace's
    /// kernels and the external client at the same time.
    pub fn prepare(&self) -> Result<(), String> {
        ensure_target(&self.root)?;
        let started = std::time::Instant::now();
        let kernels = self.runs().map_or(0, |runs| {
            let mut names: Vec<_> = runs.iter().map(|k| &k.run.kernel).collect();
            names.dedup();
            names.len()
        });
        println!(
            "qemu: building {kernels} kernels for {TARGET} (test kernels, examples, the external client)"
        );
        // The external client, a workspace of its own: built from its own
        // directory, with its own cargo configuration, as a user would.
        let client = Self::kernel_build(&self.root.join(CLIENT), &self.client_target_dir())
            .arg("--quiet")
            .spawn();
        // The kernels without frame pointers, in a target directory of
        // their own, at the same time.
        let nofp = self
            .kernel_without_frame_pointers(None)
            .arg("--quiet")
            .spawn();
        // With cargo's timing report, whose critical path the harness
        // prints when `cargo test` exceeds its budget (`budget`).
        let built = Self::kernel_build(&self.root, &self.target_dir)
            .args([
                "--timings",
                "--quiet",
                "--bins",
                "-p",
                "pmu-qemu-tests",
                "-p",
                "pmu-examples",
            ])
            .status();
        let client = client.and_then(|mut c| c.wait());
        let nofp = nofp.and_then(|mut c| c.wait());
        if !matches!(built, Ok(s) if s.success()) {
            return Err(format!("building the kernels failed ({built:?})"));
        }
        if !matches!(nofp, Ok(s) if s.success()) {
            return Err(format!(
                "building the kernels without frame pointers failed ({nofp:?})"
            ));
        }
        if !matches!(client, Ok(s) if s.success()) {
            return Err(format!("building the external client failed ({client:?})"));
        }
        println!(
            "qemu: kernels built in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        // Install QEMU once, before runs start in parallel.
        qemu::ensure_qemu()
    }

    /// Installs what is missing and builds the one kernel `k` boots, with
    /// cargo's progress on the terminal: what `cargo qemu <kernel>` waits
    /// for (the first time, the crate and the kernel library too).
    pub fn prepare_one(&self, k: &KernelRun) -> Result<(), String> {
        ensure_target(&self.root)?;
        let started = std::time::Instant::now();
        let built = match k.package {
            Some(NO_FRAME_POINTERS) => {
                println!(
                    "qemu: building kernel {} (package {NO_FRAME_POINTERS}) without frame pointers for {TARGET}",
                    k.run.kernel
                );
                self.kernel_without_frame_pointers(Some(&k.run.kernel))
                    .status()
            }
            Some(package) => {
                println!(
                    "qemu: building kernel {} (package {package}) for {TARGET}",
                    k.run.kernel
                );
                Self::kernel_build(&self.root, &self.target_dir)
                    .args(["-p", package, "--bin", &k.run.kernel])
                    .status()
            }
            None => {
                println!(
                    "qemu: building kernel {} ({CLIENT}, a workspace of its own) for {TARGET}",
                    k.run.kernel
                );
                Self::kernel_build(&self.root.join(CLIENT), &self.client_target_dir()).status()
            }
        };
        if !matches!(built, Ok(s) if s.success()) {
            return Err(format!(
                "building kernel {} failed ({built:?})",
                k.run.kernel
            ));
        }
        println!(
            "qemu: {} built in {:.1} s",
            k.run.kernel,
            started.elapsed().as_secs_f64()
        );
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

    /// Where the last run under `accel` left how long each boot took
    /// ([`boot_times_text`]), for the next run's order ([`in_boot_order`]).
    fn boot_times_file(&self, accel: qemu::Accel) -> PathBuf {
        let name = match accel {
            qemu::Accel::Tcg => "tcg",
            qemu::Accel::Kvm => "kvm",
        };
        self.target_dir.join(format!("boot-seconds-{name}.txt"))
    }

    /// Every boot of every kernel, in name order.
    pub fn runs(&self) -> Result<Vec<KernelRun>, String> {
        discover(&self.root)
    }

    /// The repository.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where `cargo validate` leaves its image and report:
    /// `target/validate` (beside the kernels' `target/qemu`).
    pub fn validate_dir(&self) -> PathBuf {
        self.target_dir.with_file_name("validate")
    }

    /// The built binary of run `k`.
    pub fn kernel(&self, k: &KernelRun) -> PathBuf {
        let run = &k.run;
        let dir = match k.package {
            None => self.client_target_dir(),
            Some(NO_FRAME_POINTERS) => self.no_frame_pointers_dir(),
            Some(_) => self.target_dir.clone(),
        };
        dir.join(TARGET).join("debug").join(&run.kernel)
    }

    /// Boots `k` under `accel` with the console on this terminal (a
    /// TCG-only kernel too, saying so); returns its verdict.
    pub fn boot_attached(&self, k: &KernelRun, accel: qemu::Accel) -> ExitCode {
        let run = &k.run;
        if let (Some(why), qemu::Accel::Kvm) = (&k.tcg_only, accel) {
            println!(
                "qemu: {} is TCG only ({why}): `cargo test` skips it under KVM; booting it anyway",
                run.label()
            );
        }
        let args = k.boot_args(accel);
        if args.is_empty() {
            println!("qemu: booting {}", run.label());
        } else {
            println!("qemu: booting {} (QEMU {})", run.label(), args.join(" "));
        }
        let kernel = self.kernel(k);
        let boot = qemu::boot(&kernel, accel, &args, true);
        if !boot.success {
            eprintln!("qemu: {}", boot.said);
        }
        #[cfg(feature = "flamegraph")]
        self.draw_flamegraph(k, &kernel, &boot.console);
        // The stack lines' cases, as `cargo test` judges them.
        let mut stacks_ok = true;
        for case in stacks::check(&boot.console, &kernel) {
            let verdict = case.verdict.word();
            println!(
                "qemu: {}::{} ... {verdict}{}",
                run.label(),
                case.name,
                case.note
            );
            stacks_ok &= !case.failed();
        }
        if boot.success && stacks_ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    }

    /// Where the flame graph of run `k` goes: `target/flamegraph/<kernel>`,
    /// with `-<config>` for a run with a config, `.svg`.
    pub fn flamegraph_path(&self, k: &KernelRun) -> PathBuf {
        let run = &k.run;
        let name = if run.config.is_empty() {
            run.kernel.clone()
        } else {
            format!("{}-{}", run.kernel, run.config)
        };
        self.target_dir
            .join("flamegraph")
            .join(format!("{name}.svg"))
    }

    /// The flame graph of the call stacks `console` reports (none: nothing
    /// drawn), at [`Workspace::flamegraph_path`], and a line saying where.
    #[cfg(feature = "flamegraph")]
    fn draw_flamegraph(&self, k: &KernelRun, kernel: &Path, console: &str) {
        let svg = self.flamegraph_path(k);
        if let Some(dir) = svg.parent() {
            let _ = fs::create_dir_all(dir);
        }
        match stacks::flamegraph(console, kernel, &svg) {
            Some(Ok(samples)) => {
                let shown = svg.strip_prefix(&self.root).unwrap_or(&svg);
                println!(
                    "qemu: flame graph of {samples} samples: {}",
                    shown.display()
                );
            }
            Some(Err(e)) => eprintln!("qemu: no flame graph: {e}"),
            None => {}
        }
    }

    /// Boots every run (two or more at a time, [`in_boot_order`]) under
    /// the accelerator `PMU_QEMU_ACCEL` names (printed first), prints every
    /// case, and ends with the [`tally`]: `N passed, N failed` (`, N
    /// skipped` when a case was skipped). Succeeds when nothing failed and
    /// something passed. `decoder` is the `pmu-defmt-decode` program, for
    /// the kernels that log with defmt.
    pub fn test_all(&self, decoder: &Path) -> ExitCode {
        let accel = match qemu::Accel::from_env() {
            Ok(accel) => accel,
            Err(e) => {
                eprintln!("qemu: {e}");
                return ExitCode::FAILURE;
            }
        };
        println!("qemu: {accel}");
        match qemu::firmware() {
            Ok(f) => println!("qemu: {f}"),
            Err(e) => {
                eprintln!("qemu: {e}");
                return ExitCode::FAILURE;
            }
        }
        let cargo_age = budget::parent_age();
        let harness = std::time::Instant::now();
        let runs = match self.prepare().and_then(|()| self.runs()) {
            Ok(runs) => runs,
            Err(e) => {
                eprintln!("qemu: {e}");
                return ExitCode::FAILURE;
            }
        };
        let history = self.boot_times_file(accel);
        let runs = in_boot_order(
            runs,
            &past_boot_times(&history, &self.boot_times_file(accel.other())),
        );
        let kernels = harness.elapsed();
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
                        let k = next.lock().unwrap().next();
                        let Some(k) = k else { break };
                        let run = &k.run;
                        let (_alone, _shared) = if k.several_cpus() {
                            (Some(cores.write().unwrap_or_else(|e| e.into_inner())), None)
                        } else {
                            (None, Some(cores.read().unwrap_or_else(|e| e.into_inner())))
                        };
                        let started = std::time::Instant::now();
                        let skipped = k.not_booted(accel);
                        let booted = skipped.is_none();
                        let mut cases = match skipped {
                            Some(skipped) => vec![skipped],
                            None => boot(&self.kernel(k), k, accel, &self.target_dir),
                        };
                        if k.defmt && booted {
                            cases.push(check_defmt(&self.kernel(k), &self.target_dir, decoder));
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
        let took = took.into_inner().unwrap();
        // For the next run's order; a run that cannot keep it still runs.
        let _ = fs::write(&history, boot_times_text(&took));
        let longest = longest(took);
        println!("qemu: {longest}");
        if let Some(age) = cargo_age {
            let total = age + harness.elapsed();
            if total.as_secs_f64() > budget::budget() {
                let boots = harness.elapsed() - kernels;
                let path = budget::build_critical_path(&self.target_dir, None);
                // The test binaries' build, where `cargo test --timings`
                // reported it (beside the kernels' target directory).
                let outer = self
                    .target_dir
                    .parent()
                    .and_then(|t| budget::build_critical_path(t, Some(total)));
                println!(
                    "{}",
                    budget::over_budget(total, age, outer, kernels, path, boots, &longest)
                );
            }
        }
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

/// The boot times of the last run under this accelerator (file `own`), or,
/// where there is none, under the other (`other`: under KVM the kernels
/// that take longest are mostly those that take longest under TCG); empty
/// where neither was kept.
fn past_boot_times(own: &Path, other: &Path) -> Vec<(String, f64)> {
    let text = fs::read_to_string(own)
        .or_else(|_| fs::read_to_string(other))
        .unwrap_or_default();
    parse_boot_times(&text)
}

/// The boot times as a file keeps them: a line per run, its label and its
/// seconds.
pub fn boot_times_text(took: &[(String, std::time::Duration)]) -> String {
    took.iter()
        .map(|(label, t)| format!("{label} {:.3}\n", t.as_secs_f64()))
        .collect()
}

/// The lines of [`boot_times_text`] (others are skipped).
pub fn parse_boot_times(text: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter_map(|line| {
            let (label, seconds) = line.rsplit_once(' ')?;
            Some((label.to_string(), seconds.parse().ok()?))
        })
        .collect()
}

/// The order to boot `runs` in, given how long each took last time
/// (`past`, by label): the kernels with several CPUs first (each boots
/// alone, so they take their time one after another whatever the order),
/// then the others longest first, so that the two boots at a time end
/// together instead of one long boot running on alone at the end (under
/// KVM here: 51 s of boots with the kernels in name order, the timer
/// kernel, 8 s, among the last; 40 s in this order). A run without a past time counts as long (a new
/// kernel); with no past at all the order stays the names'.
pub fn in_boot_order(mut runs: Vec<KernelRun>, past: &[(String, f64)]) -> Vec<KernelRun> {
    let seconds = |k: &KernelRun| {
        let label = k.run.label();
        past.iter()
            .find(|(l, _)| *l == label)
            .map_or(f64::INFINITY, |&(_, s)| s)
    };
    runs.sort_by(|a, b| {
        b.several_cpus()
            .cmp(&a.several_cpus())
            .then(seconds(b).total_cmp(&seconds(a)))
    });
    runs
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
fn discover(root: &Path) -> Result<Vec<KernelRun>, String> {
    let mut sources = Vec::new();
    for dir in ["qemu-tests/src/bin", "examples", "qemu-tests/nofp/src/bin"] {
        let entries = fs::read_dir(root.join(dir)).map_err(|e| format!("{dir}: {e}"))?;
        for entry in entries {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("build.rs") {
                sources.push(path);
            }
        }
    }
    sources.push(root.join(CLIENT).join("src/main.rs"));
    let client_bins = root.join(CLIENT).join("src/bin");
    let entries = fs::read_dir(&client_bins).map_err(|e| format!("{CLIENT}/src/bin: {e}"))?;
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.extension().is_some_and(|e| e == "rs") {
            sources.push(path);
        }
    }
    sources.sort();
    let mut runs = Vec::new();
    for path in sources {
        let (kernel, package) = if path.ends_with(Path::new(CLIENT).join("src/main.rs")) {
            ("client".to_string(), None)
        } else if path.starts_with(root.join(CLIENT)) {
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            (name, None)
        } else {
            let package = if path.starts_with(root.join("examples")) {
                "pmu-examples"
            } else if path.starts_with(root.join("qemu-tests/nofp")) {
                NO_FRAME_POINTERS
            } else {
                "pmu-qemu-tests"
            };
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            (name, Some(package))
        };
        let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let header = text.lines().take_while(|l| l.starts_with("//!"));
        let mut configs = Vec::new();
        let mut expect_fail = Vec::new();
        let mut defmt = false;
        let mut tcg_only = None;
        let mut icount = None;
        let mut check_report = None;
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
            } else if let Some(why) = line.strip_prefix("check-report:") {
                check_report = Some(why.trim().to_string());
            }
        }
        if configs.is_empty() {
            configs.push((String::new(), Vec::new()));
        }
        for (config, qemu_args) in configs {
            runs.push(KernelRun {
                run: Run {
                    kernel: kernel.clone(),
                    config,
                    qemu_args,
                    expect_fail: expect_fail.clone(),
                },
                defmt,
                package,
                tcg_only: tcg_only.clone(),
                icount: icount.clone(),
                check_report: check_report.clone(),
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
fn boot(kernel: &Path, k: &KernelRun, accel: qemu::Accel, target_dir: &Path) -> Vec<CaseResult> {
    let run = &k.run;
    let mut args = k.boot_args(accel);
    if k.defmt {
        // COM1 is the console (`-serial stdio`); the second `-serial` is COM2.
        args.push("-serial".into());
        args.push(format!(
            "file:{}",
            defmt_frames(kernel, target_dir).display()
        ));
    }
    let boot = qemu::boot(kernel, accel, &args, false);
    if k.defmt {
        // Kept for `check_defmt`, which compares with the decoded frames.
        let _ = fs::write(
            defmt_frames(kernel, target_dir).with_extension("console"),
            &boot.console,
        );
    }
    let mut results = judge(&boot.console, boot.success, &boot.said, run);
    if k.check_report.is_some() {
        let checked = report::check(&boot.console, &results);
        results.push(checked);
    }
    results.extend(pmu_qemu_run::stacks::check(&boot.console, kernel));
    if results.iter().any(CaseResult::failed)
        && let Some(last) = results.last_mut()
    {
        // Kept whole, for a rare failure to be diagnosed from one run.
        let dir = target_dir.join("failed");
        let file = dir.join(format!("{}-{accel:?}.log", run.label()).to_lowercase());
        if fs::create_dir_all(&dir)
            .and_then(|()| fs::write(&file, &boot.console))
            .is_ok()
        {
            last.note += &format!("\n    (the console is kept in {})", file.display());
        }
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
fn check_defmt(kernel: &Path, target_dir: &Path, decoder: &Path) -> CaseResult {
    let case = |passed, note| CaseResult::judged("defmt_decoded", passed, note);
    let frames = defmt_frames(kernel, target_dir);
    let out = match Command::new(decoder).arg(kernel).arg(&frames).output() {
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
        case(false, CaseResult::mismatch("decoded", &got, &expected))
    }
}

#[cfg(test)]
mod tests;

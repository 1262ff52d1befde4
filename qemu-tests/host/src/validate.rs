//! `cargo validate` (this package's `validate` binary): the validation
//! run, every real-PMU case of every architecture on this machine's CPU
//! (the `validate` kernel), and its report to paste into an issue
//! ([`crate::report`]).
//!
//! | command | what it does |
//! |---|---|
//! | `cargo validate` | builds the `validate` kernel and boots it under KVM on this machine's CPU (`-enable-kvm -cpu host,-arch-capabilities`; `PMU_QEMU_ACCEL=tcg` boots it under TCG, where every case is skipped) |
//! | `cargo validate iso [FILE]` | builds the bootable image for bare metal ([`crate::image`]; default `target/validate/pmu-validate.iso`) |
//! | `cargo validate boot-iso [FILE]` | builds the image and boots it under QEMU from a CD (`-cdrom`, QEMU's default firmware; the accelerator as `cargo validate`'s) |
//! | `cargo validate report FILE` | the report of a console log: a bare-metal run's serial output |
//!
//! The report goes to standard output and to `target/validate/report.txt`.
//! The exit status is 0 when the run gave a well-formed report and no case
//! failed, 1 otherwise, 2 for a usage error.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use crate::{KernelRun, Workspace, image, qemu, report};

/// The kernel that runs the cases.
const KERNEL: &str = "validate";

/// What `cargo validate` says for a usage error.
const USAGE: &str = "usage: cargo validate                  the real-PMU cases under KVM on this machine's CPU (PMU_QEMU_ACCEL=tcg: under TCG)
       cargo validate iso [FILE]       the bootable image for bare metal (default target/validate/pmu-validate.iso)
       cargo validate boot-iso [FILE]  the image, booted under QEMU from a CD
       cargo validate report FILE      the report of a console log (a bare-metal run's serial output)";

/// `cargo validate` with `args` (those after the command's name).
pub fn main(args: &[String]) -> ExitCode {
    let workspace = Workspace::new();
    let outcome = match args {
        [] => run_kernel(&workspace),
        [iso] if iso == "iso" => make_image(&workspace, None).map(|iso| {
            println!("validate: bootable image {}", shown(&workspace, &iso));
            println!(
                "validate: write it to a USB stick with `dd if={} of=/dev/sdX bs=4M conv=fsync` (sdX: the stick, whose contents it replaces), boot the machine from it in BIOS (legacy) mode; the report appears on the screen and on COM1 (115200 8N1)",
                iso.display()
            );
            true
        }),
        [iso, file] if iso == "iso" => make_image(&workspace, Some(file.into())).map(|iso| {
            println!("validate: bootable image {}", iso.display());
            true
        }),
        [boot] if boot == "boot-iso" => boot_image(&workspace, None),
        [boot, file] if boot == "boot-iso" => boot_image(&workspace, Some(file.into())),
        [report, file] if report == "report" => from_log(&workspace, Path::new(file)),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("validate: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The accelerator: `PMU_QEMU_ACCEL` when set, KVM otherwise (the point of
/// the run: the host's CPU).
fn accel() -> Result<qemu::Accel, String> {
    match std::env::var("PMU_QEMU_ACCEL") {
        Ok(v) if !v.trim().is_empty() => qemu::Accel::from_env(),
        _ => qemu::Accel::Kvm.usable().map_err(|e| {
            format!(
                "{e}\nThe validation run counts on this machine's CPU under KVM. `PMU_QEMU_ACCEL=tcg cargo validate` runs it under TCG (every case skipped: TCG has no PMU); `cargo validate iso` makes an image that runs it on bare metal."
            )
        }),
    }
}

/// The `validate` kernel's run, built (cargo's progress on the terminal).
fn built_kernel(workspace: &Workspace) -> Result<(KernelRun, PathBuf), String> {
    let k = workspace
        .runs()?
        .into_iter()
        .find(|k| k.run.kernel == KERNEL)
        .ok_or("no validate kernel in qemu-tests/src/bin")?;
    workspace.prepare_one(&k)?;
    let path = workspace.kernel(&k);
    Ok((k, path))
}

/// The checkout's `git describe --always --dirty`, or `unknown` outside a
/// git checkout: the kernel reports it.
fn commit(workspace: &Workspace) -> String {
    Command::new("git")
        .current_dir(workspace.root())
        .args(["describe", "--always", "--dirty"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|c| !c.is_empty() && !c.contains(char::is_whitespace))
        .unwrap_or_else(|| "unknown".into())
}

/// The first line of `qemu-system-x86_64 --version`.
fn qemu_version() -> String {
    Command::new(qemu::qemu_binary())
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(String::from)
        })
        .unwrap_or_else(|| "version unknown".into())
}

/// A file's first line, or `unknown`.
fn first_line(path: &str) -> String {
    fs::read_to_string(path)
        .ok()
        .and_then(|t| t.lines().next().map(|l| l.trim().to_string()))
        .unwrap_or_else(|| "unknown".into())
}

/// How the run was made, for the report's head: the command (with
/// `PMU_QEMU_ACCEL` when set), QEMU and
/// its accelerator arguments, and under KVM the host's kernel and whether
/// its KVM exposes a PMU to guests (`kvm.enable_pmu`).
pub fn how(command: &str, accel: qemu::Accel, medium: &str) -> Vec<String> {
    let env = std::env::var("PMU_QEMU_ACCEL")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .map_or(String::new(), |v| format!("PMU_QEMU_ACCEL={v} "));
    let mut lines = vec![
        format!("command:  {env}{command}"),
        format!(
            "qemu:     {} ({medium}, {})",
            qemu_version(),
            accel.qemu_args(&[]).join(" ")
        ),
    ];
    if accel == qemu::Accel::Kvm {
        lines.push(format!(
            "host:     Linux {}, kvm.enable_pmu={}",
            first_line("/proc/sys/kernel/osrelease"),
            first_line("/sys/module/kvm/parameters/enable_pmu")
        ));
    }
    lines
}

/// Reads the report out of `console`, prints it and keeps it in
/// `target/validate/report.txt`: whether the run passed (`exit_ok`: the
/// kernel's exit said success; no case failed). On a console without a
/// well-formed report, prints the console and why.
fn conclude(
    workspace: &Workspace,
    console: &str,
    exit_ok: bool,
    how: &[String],
    said: &str,
) -> Result<bool, String> {
    let report = match report::parse(console) {
        Ok(r) => r,
        Err(e) => {
            for line in console.lines() {
                eprintln!("| {line}");
            }
            return Err(format!(
                "no well-formed report: {e}{}",
                if said.is_empty() {
                    String::new()
                } else {
                    format!(" (QEMU: {said})")
                }
            ));
        }
    };
    let text = report.render(how);
    print!("{text}");
    let file = workspace.validate_dir().join("report.txt");
    if fs::create_dir_all(workspace.validate_dir())
        .and_then(|()| fs::write(&file, &text))
        .is_ok()
    {
        println!(
            "validate: the report is in {}; paste it into an issue",
            shown(workspace, &file)
        );
    }
    if !exit_ok && report.passed() {
        println!("validate: the kernel did not exit with success: {said}");
    }
    Ok(exit_ok && report.passed())
}

/// `path` relative to the repository, when it lies inside.
fn shown(workspace: &Workspace, path: &Path) -> String {
    path.strip_prefix(workspace.root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// `cargo validate`: the kernel under the accelerator, its report.
fn run_kernel(workspace: &Workspace) -> Result<bool, String> {
    let accel = accel()?;
    let (_, kernel) = built_kernel(workspace)?;
    let commit = commit(workspace);
    println!("validate: booting the validate kernel: {accel}");
    let args = ["-append".to_string(), format!("commit={commit}")];
    let boot = qemu::boot(&kernel, accel, &args, false);
    let how = how("cargo validate", accel, "-kernel");
    conclude(workspace, &boot.console, boot.success, &how, &boot.said)
}

/// Builds the image at `iso` (default `target/validate/pmu-validate.iso`).
fn make_image(workspace: &Workspace, iso: Option<PathBuf>) -> Result<PathBuf, String> {
    image::ensure_tools()?;
    let (_, kernel) = built_kernel(workspace)?;
    let iso = iso.unwrap_or_else(|| workspace.validate_dir().join("pmu-validate.iso"));
    let staging = workspace.validate_dir().join("iso");
    image::build(&kernel, &commit(workspace), &staging, &iso)?;
    Ok(iso)
}

/// `cargo validate boot-iso`: the image, booted from a CD under QEMU.
fn boot_image(workspace: &Workspace, iso: Option<PathBuf>) -> Result<bool, String> {
    let accel = accel()?;
    let iso = make_image(workspace, iso)?;
    qemu::ensure_qemu()?;
    println!(
        "validate: booting {} from a CD (SeaBIOS, GRUB, multiboot2): {accel}",
        shown(workspace, &iso)
    );
    let boot = qemu::boot_cdrom(&iso, accel, &[], false);
    let how = how("cargo validate boot-iso", accel, "-cdrom");
    conclude(workspace, &boot.console, boot.success, &how, &boot.said)
}

/// `cargo validate report FILE`: the report of a console log.
fn from_log(workspace: &Workspace, file: &Path) -> Result<bool, String> {
    let text = fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let console = String::from_utf8_lossy(&text).replace('\r', "");
    let how = [format!(
        "command:  cargo validate report {}",
        file.display()
    )];
    conclude(workspace, &console, true, &how, "")
}

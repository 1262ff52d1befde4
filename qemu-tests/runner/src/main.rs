//! `pmu-qemu-run KERNEL.elf [QEMU ARGS...]`: boots an x86_64 ELF kernel
//! (PVH entry) under QEMU with its console on this terminal, and exits 0
//! only when the kernel wrote the success code (10h) to port F4h and, for a
//! kernel that reports test cases, every planned case reported and none
//! failed. The protocol, the environment variables and the exit statuses
//! are in the library's documentation (`pmu_qemu_run`) and the README.
//!
//! As the cargo runner of a kernel crate (`.cargo/config.toml`):
//!
//! ```toml
//! [target.x86_64-unknown-none]
//! runner = "pmu-qemu-run"
//! ```

use std::path::Path;
use std::process::ExitCode;

use pmu_qemu_run::{output, qemu};

/// A line on standard output; when that is a closed pipe (`| head`), the
/// run ends there, quietly, with [`output::CLOSED_STATUS`].
macro_rules! say {
    ($($arg:tt)*) => {
        if output::stdout(format_args!($($arg)*)).is_err() {
            return ExitCode::from(output::CLOSED_STATUS);
        }
    };
}

/// A line on standard error, lost when nobody reads it.
macro_rules! complain {
    ($($arg:tt)*) => {
        output::stderr(format_args!($($arg)*))
    };
}

const USAGE: &str = "\
usage: pmu-qemu-run KERNEL.elf [QEMU ARGS...]
       pmu-qemu-run --install-only | --help | --version

Boots an x86_64 ELF kernel with a PVH entry note under QEMU (console on
COM1, copied here) and exits 0 when the run passed:
  - the kernel wrote 10h to the isa-debug-exit port F4h (QEMU status 33);
    any other byte, a triple fault, or no verdict in time fails;
  - a kernel that prints `suite <name>: <n> cases` reports each case as
    `test <suite>::<case> ... ok | FAILED | skipped: <why>` (a FAILED line
    is followed by a line indented four spaces saying why); every planned
    case must report, none may fail, and the exit must agree.

Environment:
  PMU_QEMU_ACCEL    tcg (default: QEMU's emulated CPU, no PMU) or kvm
                    (-enable-kvm -cpu host,-arch-capabilities; needs a
                    read-write /dev/kvm)
  PMU_QEMU_TIMEOUT  seconds before a kernel without a verdict is hung (60
                    under TCG, 300 under KVM)
  PMU_QEMU_FIRMWARE qboot (default: -bios qboot.rom where QEMU has it,
                    QEMU's default firmware otherwise) or default (SeaBIOS)
  QEMU              the QEMU binary (qemu-system-x86_64)

Exit status: 0 passed, 1 failed, 2 usage, PMU_QEMU_ACCEL or
PMU_QEMU_FIRMWARE error, 127 QEMU missing, 141 standard output closed
(`| head`: the run stops quietly, QEMU killed). --install-only installs QEMU
(Debian's qemu-system-x86, as root with apt) when it is missing, and boots
nothing.

As a cargo runner, in a kernel crate's .cargo/config.toml:
  [target.x86_64-unknown-none]
  runner = \"pmu-qemu-run\"";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((kernel, qemu_args)) = args.split_first() else {
        complain!("{USAGE}");
        return ExitCode::from(2);
    };
    match kernel.as_str() {
        "--help" | "-h" => {
            say!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        "--version" | "-V" => {
            say!("pmu-qemu-run {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        "--install-only" => {}
        other if other.starts_with('-') => {
            complain!(
                "pmu-qemu-run: unknown option {other}: the first argument is the kernel\n\n{USAGE}"
            );
            return ExitCode::from(2);
        }
        _ => {}
    }
    if let Err(e) = qemu::ensure_qemu() {
        complain!("pmu-qemu-run: {e}");
        return ExitCode::from(127);
    }
    if kernel == "--install-only" {
        return ExitCode::SUCCESS;
    }
    let accel = match qemu::Accel::from_env() {
        Ok(accel) => accel,
        Err(e) => {
            complain!("pmu-qemu-run: {e}");
            return ExitCode::from(2);
        }
    };
    say!("pmu-qemu-run: {accel}");
    match qemu::firmware() {
        Ok(f) => say!("pmu-qemu-run: {f}"),
        Err(e) => {
            complain!("pmu-qemu-run: {e}");
            return ExitCode::from(2);
        }
    }
    let path = Path::new(kernel);
    let Ok((results, console)) = pmu_qemu_run::boot_and_judge(path, accel, qemu_args) else {
        return ExitCode::from(output::CLOSED_STATUS);
    };
    let name = path
        .file_name()
        .map_or(kernel.clone(), |n| n.to_string_lossy().into_owned());
    if draw_flamegraph(&console, path).is_err() {
        return ExitCode::from(output::CLOSED_STATUS);
    }
    let failed: Vec<_> = results.iter().filter(|r| r.failed()).collect();
    for r in &failed {
        complain!("pmu-qemu-run: {name}::{} FAILED{}", r.name, r.note);
    }
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The flame graph of the stacks the kernel reported, if any, beside the
/// kernel (its path with `.svg` appended), and a line saying where (`Err`:
/// standard output is closed).
#[cfg(feature = "flamegraph")]
fn draw_flamegraph(console: &str, kernel: &Path) -> Result<(), output::Closed> {
    let mut svg = kernel.as_os_str().to_owned();
    svg.push(".svg");
    let svg = Path::new(&svg);
    match pmu_qemu_run::stacks::flamegraph(console, kernel, svg) {
        Some(Ok(samples)) => output::stdout(format_args!(
            "pmu-qemu-run: flame graph of {samples} samples: {}",
            svg.display()
        )),
        Some(Err(e)) => {
            complain!("pmu-qemu-run: no flame graph: {e}");
            Ok(())
        }
        None => Ok(()),
    }
}

/// Built without the `flamegraph` feature: the stacks are only checked.
#[cfg(not(feature = "flamegraph"))]
fn draw_flamegraph(_: &str, _: &Path) -> Result<(), output::Closed> {
    Ok(())
}

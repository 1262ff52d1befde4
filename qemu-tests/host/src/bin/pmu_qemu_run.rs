//! `pmu-qemu-run KERNEL [QEMU ARGS...]`: boot an x86_64 ELF kernel (PVH
//! entry) under QEMU, with its console on this terminal, and exit with
//! success only when the kernel wrote the success code to `isa-debug-exit`
//! and, for a kernel that runs a `hobby::test` suite, every planned case
//! reported and passed. Installs Debian's QEMU when it is missing and this
//! runs as root with apt.
//!
//! Install it with `cargo install --path qemu-tests/host --bin pmu-qemu-run` (or from the
//! repository with `cargo install --git`), then name it as the cargo runner
//! of your kernel crate:
//!
//! ```toml
//! [target.x86_64-unknown-none]
//! runner = "pmu-qemu-run"
//! ```
//!
//! Environment: `PMU_QEMU_TIMEOUT` (seconds, default 60 under TCG and 300
//! under KVM), `QEMU` (the
//! binary, default `qemu-system-x86_64`), `PMU_QEMU_ACCEL` (`tcg`, the
//! default, or `kvm`: `-enable-kvm -cpu host`, refused when `/dev/kvm` is
//! not usable; printed on the first line). `pmu-qemu-run --install-only`
//! only makes sure QEMU is there. A case the kernel skipped does not fail
//! the run.

use std::path::Path;
use std::process::ExitCode;

use qemu_host::{Run, judge, qemu};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((kernel, qemu_args)) = args.split_first() else {
        eprintln!("usage: pmu-qemu-run KERNEL.elf [QEMU ARGS...] | --install-only");
        return ExitCode::from(2);
    };
    if let Err(e) = qemu::ensure_qemu() {
        eprintln!("pmu-qemu-run: {e}");
        return ExitCode::from(127);
    }
    if kernel == "--install-only" {
        return ExitCode::SUCCESS;
    }
    let accel = match qemu::Accel::from_env() {
        Ok(accel) => accel,
        Err(e) => {
            eprintln!("pmu-qemu-run: {e}");
            return ExitCode::from(2);
        }
    };
    println!("pmu-qemu-run: {accel}");
    let boot = qemu::boot(Path::new(kernel), accel, qemu_args, true);
    let name = Path::new(kernel)
        .file_name()
        .map_or(kernel.clone(), |n| n.to_string_lossy().into_owned());
    let results = judge(
        &boot.console,
        boot.success,
        &boot.said,
        &Run::plain(&name, qemu_args.to_vec()),
    );
    let failed: Vec<_> = results.iter().filter(|r| r.failed()).collect();
    for r in &failed {
        eprintln!("pmu-qemu-run: {name}::{} FAILED{}", r.name, r.note);
    }
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

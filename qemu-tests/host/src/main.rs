//! `cargo qemu <kernel> [config]`: builds that kernel (cargo's progress on
//! the terminal) and boots it under QEMU with its console on this terminal. `cargo qemu` alone lists them.
//! `PMU_QEMU_ACCEL=kvm cargo qemu <kernel>` boots it under KVM on the host's
//! CPU (`qemu_host::qemu::Accel`); the first line says which accelerator.

use std::process::ExitCode;

use qemu_host::{Workspace, qemu};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let workspace = Workspace::new();
    let runs = match workspace.runs() {
        Ok(runs) => runs,
        Err(e) => {
            eprintln!("qemu: {e}");
            return ExitCode::FAILURE;
        }
    };
    let [kernel, rest @ ..] = args.as_slice() else {
        println!("usage: cargo qemu <kernel> [config]; the kernels and their configs:");
        for run in &runs {
            println!("  {}", run.run.label());
        }
        return ExitCode::SUCCESS;
    };
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
    let config = rest.first();
    let Some(k) = runs
        .iter()
        .find(|k| k.run.kernel == *kernel && config.is_none_or(|c| k.run.config == *c))
    else {
        eprintln!("qemu: no kernel {kernel} with config {config:?}; `cargo qemu` lists them");
        return ExitCode::FAILURE;
    };
    // Only the kernel asked for, with cargo's progress: the first command
    // of the README builds for a while on a fresh clone.
    if let Err(e) = workspace.prepare_one(k) {
        eprintln!("qemu: {e}");
        return ExitCode::FAILURE;
    }
    workspace.boot_attached(k, accel)
}

//! The binary's command line: `--help` and `--version` answer and exit 0
//! without QEMU; a missing kernel or an unknown option is a usage error
//! (status 2), never a boot of a kernel named like an option.

use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pmu-qemu-run"))
        .args(args)
        // A QEMU that does not exist: none of these may need it.
        .env("QEMU", "/nonexistent/qemu-system-x86_64")
        .output()
        .expect("run pmu-qemu-run")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn help_prints_the_protocol_and_exits_0() {
    for flag in ["--help", "-h"] {
        let out = run(&[flag]);
        assert_eq!(out.status.code(), Some(0), "{flag}");
        let help = text(&out.stdout);
        assert!(help.starts_with("usage: pmu-qemu-run KERNEL.elf"), "{help}");
        for needle in [
            "port F4h",
            "10h",
            "suite <name>: <n> cases",
            "test <suite>::<case> ... ok | FAILED | skipped: <why>",
            "PMU_QEMU_ACCEL",
            "PMU_QEMU_TIMEOUT",
            "300 under KVM",
            "runner = \"pmu-qemu-run\"",
        ] {
            assert!(help.contains(needle), "--help lacks {needle:?}");
        }
    }
}

#[test]
fn version_prints_the_package_version() {
    for flag in ["--version", "-V"] {
        let out = run(&[flag]);
        assert_eq!(out.status.code(), Some(0), "{flag}");
        assert_eq!(
            text(&out.stdout),
            format!("pmu-qemu-run {}\n", env!("CARGO_PKG_VERSION"))
        );
    }
}

#[test]
fn usage_errors_exit_2_without_booting() {
    let none = run(&[]);
    assert_eq!(none.status.code(), Some(2));
    assert!(text(&none.stderr).starts_with("usage: pmu-qemu-run"));
    let unknown = run(&["--bogus", "kernel.elf"]);
    assert_eq!(unknown.status.code(), Some(2));
    let said = text(&unknown.stderr);
    assert!(
        said.starts_with("pmu-qemu-run: unknown option --bogus: the first argument is the kernel"),
        "{said}"
    );
    assert!(!said.contains("::run FAILED"), "nothing booted: {said}");
}

//! Builds `tests/kernel/selftest.rs` for x86_64-unknown-none in a scratch
//! crate that depends on this package alone (its linker script from the
//! build script, `pmu` through `hobby::pmu`), as a user's kernel would, and
//! boots it under QEMU (`pmu-qemu-run`'s library): every case reports, the
//! one that must fail fails with its reason, the others pass.
//!
//! Needs the `x86_64-unknown-none` target (`rustup target add
//! x86_64-unknown-none`) and QEMU (`qemu-system-x86_64`; the runner installs
//! Debian's package as root with apt). Where this package is built without
//! its workspace (unpacked from its `.crate`), `pmu` comes from the registry
//! or from a `[patch]` in a cargo configuration above the target directory
//! (the repository's CI does that with the unpacked `pmu`).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use pmu_qemu_run::{Run, Verdict, judge, qemu};

const TARGET: &str = "x86_64-unknown-none";

/// The scratch kernel crate, written fresh.
fn scratch() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hobby-selftest");
    let hobby = Path::new(env!("CARGO_MANIFEST_DIR"));
    let _ = fs::remove_dir_all(dir.join("src"));
    fs::create_dir_all(dir.join("src")).unwrap();
    fs::write(
        dir.join("Cargo.toml"),
        format!(
            r#"[package]
name = "hobby-selftest"
version = "0.0.0"
edition = "2024"
publish = false

[[bin]]
name = "selftest"
path = "src/main.rs"
test = false
bench = false

[dependencies]
hobby = {{ package = "pmu-hobby", path = {:?} }}

# A workspace of its own, wherever the target directory is.
[workspace]
"#,
            hobby.display().to_string()
        ),
    )
    .unwrap();
    fs::write(
        dir.join("build.rs"),
        "fn main() {\n    println!(\"cargo:rustc-link-arg-bins=-Thobby.ld\");\n    println!(\"cargo:rustc-link-arg-bins=--no-pie\");\n}\n",
    )
    .unwrap();
    fs::copy(
        hobby.join("tests/kernel/selftest.rs"),
        dir.join("src/main.rs"),
    )
    .unwrap();
    dir
}

#[test]
fn the_selftest_kernel_boots_and_reports_every_case() {
    let dir = scratch();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let built = Command::new(&cargo)
        .current_dir(&dir)
        .args(["build", "--quiet", "--target", TARGET])
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .expect("run cargo");
    assert!(
        built.status.success(),
        "building the self-test kernel failed (is the {TARGET} target installed? \
         `rustup target add {TARGET}`):\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let kernel = dir.join("target").join(TARGET).join("debug/selftest");
    qemu::ensure_qemu().expect("QEMU");
    let accel = qemu::Accel::from_env().expect("PMU_QEMU_ACCEL");
    let boot = qemu::boot(&kernel, accel, &[], false);
    let mut run = Run::plain("selftest", Vec::new());
    run.expect_fail = vec![(
        "a_failing_case_says_why".into(),
        "two == 3 (this case must fail): left 2, right 3".into(),
    )];
    let results = judge(&boot.console, boot.success, &boot.said, &run);
    let verdicts: Vec<_> = results
        .iter()
        .map(|r| (r.name.as_str(), r.verdict))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("an_exception_inside_a_case_is_caught", Verdict::Passed),
            ("a_model_pmi_reaches_its_handler_once", Verdict::Passed),
            ("a_failing_case_says_why", Verdict::Passed),
        ],
        "console:\n{}\n{}",
        boot.console,
        boot.said
    );
    assert!(
        !boot.success,
        "a case failed: the kernel exits with failure"
    );
    assert!(
        boot.console.contains("suite hobby: 3 cases"),
        "{}",
        boot.console
    );
}

//! The runner's parsing of case lines, its tally and its accelerator
//! arguments, on consoles written here (no QEMU).

use std::path::Path;

use super::qemu::{Accel, Firmware, kvm_usable, qboot_in};
use super::*;

fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

fn run_expecting(fail: &[(&str, &str)]) -> Run {
    let mut run = Run::plain("k", Vec::new());
    run.expect_fail = fail
        .iter()
        .map(|(c, r)| (c.to_string(), r.to_string()))
        .collect();
    run
}

fn verdicts(results: &[CaseResult]) -> Vec<(&str, Verdict)> {
    results
        .iter()
        .map(|r| (r.name.as_str(), r.verdict))
        .collect()
}

const CONSOLE: &str = "\
hobby: IDT loaded, legacy PIC masked
suite k: 3 cases
test k::counts ... ok
test k::real_cycles ... skipped: no PMU exposed to this guest (CPUID leaf 0AH version 0)
test k::broken ... FAILED
    src/bin/k.rs:10: left 2, right 3
suite k: 1 passed, 1 failed, 1 skipped
";

#[test]
fn a_skipped_case_is_reported_with_its_reason_and_never_passes() {
    let results = judge(
        CONSOLE,
        false,
        "kernel reported failure",
        &Run::plain("k", vec![]),
    );
    assert_eq!(
        verdicts(&results),
        [
            ("counts", Verdict::Passed),
            ("real_cycles", Verdict::Skipped),
            ("broken", Verdict::Failed)
        ]
    );
    assert_eq!(
        results[1].note,
        ": no PMU exposed to this guest (CPUID leaf 0AH version 0)"
    );
    assert!(!results[1].passed() && !results[1].failed());
    assert_eq!(results[2].note, "\n    src/bin/k.rs:10: left 2, right 3");
}

#[test]
fn skipped_cases_count_as_reported_and_do_not_fail_the_run() {
    let console = "\
suite k: 2 cases
test k::a ... ok
test k::b ... skipped: not here
suite k: 1 passed, 0 failed, 1 skipped
";
    let results = judge(console, true, "", &Run::plain("k", vec![]));
    assert_eq!(
        verdicts(&results),
        [("a", Verdict::Passed), ("b", Verdict::Skipped)],
        "no `(run)` failure: every planned case reported, the exit status agrees"
    );
    // The kernel exiting with failure when only skips happened is a
    // disagreement: skips are not failures.
    let results = judge(
        console,
        false,
        "kernel reported failure",
        &Run::plain("k", vec![]),
    );
    assert_eq!(
        results.last().map(|r| (r.name.as_str(), r.verdict)),
        Some(("(run)", Verdict::Failed))
    );
}

#[test]
fn a_missing_case_line_still_fails_the_run() {
    let console = "suite k: 2 cases\ntest k::a ... skipped: not here\n";
    let results = judge(console, false, "kernel hung", &Run::plain("k", vec![]));
    let last = results.last().unwrap();
    assert_eq!(
        (last.name.as_str(), last.verdict),
        ("(run)", Verdict::Failed)
    );
    assert!(
        last.note.contains("1 of 2 cases never reported"),
        "{}",
        last.note
    );
}

#[test]
fn an_expected_failure_that_is_skipped_fails() {
    let console = "suite k: 1 cases\ntest k::must_fail ... skipped: no PMU\n";
    let results = judge(
        console,
        true,
        "",
        &run_expecting(&[("must_fail", "unexpected #UD")]),
    );
    assert_eq!(verdicts(&results), [("must_fail", Verdict::Failed)]);
    assert!(
        results[0].note.contains("skipped (no PMU)"),
        "{}",
        results[0].note
    );
}

#[test]
fn expected_failures_are_judged_as_before() {
    let console =
        "suite k: 2 cases\ntest k::a ... FAILED\n    unexpected #UD at 0x1000\ntest k::b ... ok\n";
    let run = run_expecting(&[("a", "unexpected #UD"), ("b", "x")]);
    let results = judge(console, false, "kernel reported failure", &run);
    assert_eq!(
        verdicts(&results),
        [("a", Verdict::Passed), ("b", Verdict::Failed)]
    );
}

#[test]
fn a_kernel_without_a_suite_is_one_case() {
    let results = judge("hello\n", true, "", &Run::plain("example", vec![]));
    assert_eq!(verdicts(&results), [("run", Verdict::Passed)]);
    let results = judge(
        "hello\n",
        false,
        "kernel hung",
        &Run::plain("example", vec![]),
    );
    assert_eq!(verdicts(&results), [("run", Verdict::Failed)]);
    assert_eq!(results[0].note, "\n    kernel hung");
}

#[test]
fn the_tally_names_skips_only_when_there_are_some() {
    assert_eq!(tally(12, 0, 0), "12 passed, 0 failed");
    assert_eq!(tally(12, 1, 3), "12 passed, 1 failed, 3 skipped");
    assert_eq!(tally(0, 0, 1), "0 passed, 0 failed, 1 skipped");
}

#[test]
fn the_accelerator_variable() {
    assert_eq!(Accel::parse(None), Ok(Accel::Tcg));
    assert_eq!(Accel::parse(Some("")), Ok(Accel::Tcg));
    assert_eq!(Accel::parse(Some("tcg")), Ok(Accel::Tcg));
    assert_eq!(Accel::parse(Some("kvm")), Ok(Accel::Kvm));
    let e = Accel::parse(Some("hvf")).unwrap_err();
    assert!(
        e.contains("PMU_QEMU_ACCEL=hvf") && e.contains("tcg") && e.contains("kvm"),
        "{e}"
    );
    assert!(Accel::Tcg.to_string().starts_with("accelerator tcg"));
    assert!(Accel::Kvm.to_string().starts_with("accelerator kvm"));
}

#[test]
fn tcg_arguments_keep_the_kernel_s_own() {
    assert_eq!(Accel::Tcg.qemu_args(&[]), args("-accel tcg"));
    assert_eq!(
        Accel::Tcg.qemu_args(&args(
            "-cpu qemu64,vendor=GenuineIntel -append cpu=netburst"
        )),
        args("-accel tcg -cpu qemu64,vendor=GenuineIntel -append cpu=netburst")
    );
    assert_eq!(
        Accel::Tcg.qemu_args(&args("-smp 2 -accel tcg,thread=multi")),
        args("-smp 2 -accel tcg,thread=multi"),
        "the kernel's own -accel, alone"
    );
}

#[test]
fn kvm_arguments_run_the_host_cpu_unless_the_kernel_names_one() {
    assert_eq!(
        Accel::Kvm.qemu_args(&[]),
        args("-enable-kvm -cpu host,-arch-capabilities")
    );
    assert_eq!(
        Accel::Kvm.qemu_args(&args("-smp 2 -accel tcg,thread=multi")),
        args("-enable-kvm -cpu host,-arch-capabilities -smp 2"),
        "TCG's options dropped"
    );
    assert_eq!(
        Accel::Kvm.qemu_args(&args("-cpu qemu64,family=15 -append cpu=netburst")),
        args("-enable-kvm -cpu qemu64,family=15 -append cpu=netburst"),
        "a kernel that checks an emulated CPU model keeps it"
    );
}

#[test]
fn kvm_is_refused_with_a_reason_when_its_device_is_missing() {
    let e = kvm_usable(Path::new("/nonexistent/kvm")).unwrap_err();
    assert!(
        e.contains("PMU_QEMU_ACCEL=kvm") && e.contains("/nonexistent/kvm is not usable"),
        "{e}"
    );
}

#[test]
fn a_kernel_under_kvm_gets_longer_before_it_counts_as_hung() {
    if std::env::var_os("PMU_QEMU_TIMEOUT").is_some() {
        return; // the variable decides both
    }
    assert_eq!(super::qemu::timeout(Accel::Tcg).as_secs(), 60);
    assert_eq!(super::qemu::timeout(Accel::Kvm).as_secs(), 300);
}

#[test]
fn the_firmware_variable() {
    let found = || Ok(());
    let missing = || Err("qboot.rom is not there".to_string());
    assert_eq!(Firmware::parse(None, found), Ok(Firmware::Qboot));
    assert_eq!(Firmware::parse(Some(" qboot "), found), Ok(Firmware::Qboot));
    assert_eq!(
        Firmware::parse(Some(""), missing),
        Ok(Firmware::Default(Some("qboot.rom is not there".into())))
    );
    assert_eq!(
        Firmware::parse(Some("default"), found),
        Ok(Firmware::Default(None))
    );
    let err = Firmware::parse(Some("ovmf"), found).unwrap_err();
    assert!(err.contains("PMU_QEMU_FIRMWARE=ovmf"), "{err}");
}

#[test]
fn qboot_is_found_only_in_a_listed_directory_that_has_it() {
    let dir = std::env::temp_dir().join(format!("pmu-qemu-run-qboot-{}", std::process::id()));
    let with = dir.join("with");
    let without = dir.join("without");
    std::fs::create_dir_all(&with).unwrap();
    std::fs::create_dir_all(&without).unwrap();
    std::fs::write(with.join("qboot.rom"), b"").unwrap();
    let listed = |dirs: &[&Path]| {
        dirs.iter()
            .map(|d| format!("{}\n", d.display()))
            .collect::<String>()
    };
    assert_eq!(qboot_in(&listed(&[&without, &with])), Ok(()));
    let err = qboot_in(&listed(&[&without])).unwrap_err();
    assert!(err.contains(&without.display().to_string()), "{err}");
    assert!(qboot_in("").unwrap_err().contains("none listed"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn qboot_is_asked_for_unless_the_kernel_names_its_firmware() {
    assert_eq!(
        Firmware::Qboot.qemu_args(&args("-smp 2")),
        args("-bios qboot.rom")
    );
    assert!(Firmware::Qboot.qemu_args(&args("-bios my.rom")).is_empty());
    assert!(Firmware::Default(None).qemu_args(&[]).is_empty());
}

/// A writer that fails every write with `kind`.
struct Failing(std::io::ErrorKind);

impl std::io::Write for Failing {
    fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
        Err(self.0.into())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A line goes out whole, with its newline; a closed pipe is `Closed`, any
/// other failure loses the line only.
#[test]
fn output_lines_report_a_closed_pipe_and_nothing_else() {
    let mut written = Vec::new();
    assert_eq!(
        output::line(&mut written, format_args!("pmu-qemu-run: {}", 1)),
        Ok(())
    );
    assert_eq!(written, b"pmu-qemu-run: 1\n");
    assert_eq!(
        output::line(
            &mut Failing(std::io::ErrorKind::BrokenPipe),
            format_args!("x")
        ),
        Err(output::Closed)
    );
    assert_eq!(
        output::line(
            &mut Failing(std::io::ErrorKind::StorageFull),
            format_args!("x")
        ),
        Ok(())
    );
}

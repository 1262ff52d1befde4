//! The runner's parsing of case lines, its tally and its accelerator
//! arguments, on consoles written here (no QEMU).

use std::path::Path;

use super::qemu::{Accel, kvm_usable};
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
fn a_tcg_only_kernel_is_one_skipped_case_under_kvm_and_boots_under_tcg() {
    let mut run = Run::plain("k", Vec::new());
    assert!(
        run.not_booted(Accel::Kvm).is_none(),
        "no header line: boots"
    );
    run.tcg_only = Some("TCG's #UD".into());
    assert!(run.not_booted(Accel::Tcg).is_none());
    let skipped = run.not_booted(Accel::Kvm).expect("skipped under KVM");
    assert_eq!(
        (skipped.name.as_str(), skipped.verdict),
        ("(run)", Verdict::Skipped)
    );
    assert_eq!(skipped.note, ": TCG only: TCG's #UD");
}

#[test]
fn the_selftest_kernel_is_tcg_only_and_the_others_are_not() {
    let runs = Workspace::new().runs().expect("the kernels' headers");
    let tcg_only: Vec<&str> = runs
        .iter()
        .filter(|r| r.tcg_only.is_some())
        .map(|r| r.kernel.as_str())
        .collect();
    assert_eq!(tcg_only, ["selftest"]);
}

#[test]
fn the_longest_boots_are_named_longest_first() {
    let took = [
        ("a", 1500),
        ("b[x]", 200),
        ("c", 9000),
        ("d", 700),
        ("e", 50),
        ("f", 300),
    ]
    .map(|(l, ms)| (l.to_string(), std::time::Duration::from_millis(ms)))
    .to_vec();
    assert_eq!(
        longest(took),
        "longest boots: c 9.0 s, a 1.5 s, d 0.7 s, f 0.3 s, b[x] 0.2 s"
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
fn an_icount_kernel_counts_instructions_under_tcg_only() {
    let mut run = Run::plain("k", args("-smp 2 -accel tcg,thread=multi"));
    assert_eq!(run.boot_args(Accel::Tcg), run.qemu_args, "no header line");
    run.icount = Some("statistics of time".into());
    assert_eq!(
        run.boot_args(Accel::Tcg),
        args("-smp 2 -accel tcg -icount shift=4,sleep=off -append time=icount")
    );
    assert_eq!(
        run.boot_args(Accel::Kvm),
        run.qemu_args,
        "no -icount under KVM"
    );
    let run = Run {
        icount: Some("x".into()),
        ..Run::plain("k", args("-append cpu=netburst"))
    };
    let mut expected = args("-accel tcg -icount shift=4,sleep=off -append");
    expected.push("cpu=netburst time=icount".into());
    assert_eq!(run.boot_args(Accel::Tcg), expected);
}

#[test]
fn the_timer_kernel_has_deterministic_time() {
    let runs = Workspace::new().runs().expect("the kernels' headers");
    let icount: Vec<&str> = runs
        .iter()
        .filter(|r| r.icount.is_some())
        .map(|r| r.kernel.as_str())
        .collect();
    assert_eq!(icount, ["timer"]);
}

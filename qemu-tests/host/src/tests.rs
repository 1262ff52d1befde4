//! The harness's reading of the kernels' headers and its report lines
//! (no QEMU).

use super::qemu::Accel;
use super::*;

fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

/// A test kernel's plain boot with `qemu_args` and no header lines.
fn kernel_run(qemu_args: Vec<String>) -> KernelRun {
    KernelRun {
        run: Run::plain("k", qemu_args),
        defmt: false,
        package: Some("pmu-qemu-tests"),
        tcg_only: None,
        icount: None,
        check_report: None,
    }
}

#[test]
fn a_tcg_only_kernel_is_one_skipped_case_under_kvm_and_boots_under_tcg() {
    let mut k = kernel_run(Vec::new());
    assert!(k.not_booted(Accel::Kvm).is_none(), "no header line: boots");
    k.tcg_only = Some("TCG's #UD".into());
    assert!(k.not_booted(Accel::Tcg).is_none());
    let skipped = k.not_booted(Accel::Kvm).expect("skipped under KVM");
    assert_eq!(
        (skipped.name.as_str(), skipped.verdict),
        ("(run)", Verdict::Skipped)
    );
    assert_eq!(skipped.note, ": TCG only: TCG's #UD");
}

#[test]
fn only_the_selftest_and_64_cpu_kernels_are_tcg_only() {
    let runs = Workspace::new().runs().expect("the kernels' headers");
    let tcg_only: Vec<&str> = runs
        .iter()
        .filter(|r| r.tcg_only.is_some())
        .map(|r| r.run.kernel.as_str())
        .collect();
    assert_eq!(tcg_only, ["many_cpus", "selftest"]);
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
/// A kernel run labelled `name`, with `-smp 2` where `smp`.
fn named(name: &str, smp: bool) -> KernelRun {
    let mut k = kernel_run(if smp { args("-smp 2") } else { Vec::new() });
    k.run.kernel = name.into();
    k
}

fn labels(runs: &[KernelRun]) -> Vec<String> {
    runs.iter().map(|k| k.run.label()).collect()
}

#[test]
fn boots_go_several_cpus_first_then_longest_first() {
    let runs = || {
        vec![
            named("a", false),
            named("b", true),
            named("c", false),
            named("d", false),
            named("e", true),
        ]
    };
    // No past: the kernels with several CPUs first, each part in name order.
    assert_eq!(
        labels(&in_boot_order(runs(), &[])),
        ["b", "e", "a", "c", "d"]
    );
    let past = parse_boot_times("a 1.5\nb 0.2\nc 9.25\ne 3\nnot a line\n");
    assert_eq!(past.len(), 4);
    // `d` has no past time: it counts as long.
    assert_eq!(
        labels(&in_boot_order(runs(), &past)),
        ["e", "b", "d", "c", "a"]
    );
}

#[test]
fn boot_times_are_kept_as_lines_of_label_and_seconds() {
    let took = [("profiler[smp2]", 10_500), ("timer", 7_250)]
        .map(|(l, ms)| (l.to_string(), std::time::Duration::from_millis(ms)))
        .to_vec();
    let text = boot_times_text(&took);
    assert_eq!(text, "profiler[smp2] 10.500\ntimer 7.250\n");
    assert_eq!(
        parse_boot_times(&text),
        [
            ("profiler[smp2]".to_string(), 10.5),
            ("timer".to_string(), 7.25)
        ]
    );
}

#[test]
fn an_icount_kernel_counts_instructions_under_tcg_only() {
    let mut k = kernel_run(args("-smp 2 -accel tcg,thread=multi"));
    assert_eq!(k.boot_args(Accel::Tcg), k.run.qemu_args, "no header line");
    k.icount = Some("statistics of time".into());
    assert_eq!(
        k.boot_args(Accel::Tcg),
        args("-smp 2 -accel tcg -icount shift=4,sleep=off -append time=icount")
    );
    assert_eq!(
        k.boot_args(Accel::Kvm),
        k.run.qemu_args,
        "no -icount under KVM"
    );
    let k = KernelRun {
        icount: Some("x".into()),
        ..kernel_run(args("-append cpu=netburst"))
    };
    let mut expected = args("-accel tcg -icount shift=4,sleep=off -append");
    expected.push("cpu=netburst time=icount".into());
    assert_eq!(k.boot_args(Accel::Tcg), expected);
}

#[test]
fn the_timer_kernel_has_deterministic_time() {
    let runs = Workspace::new().runs().expect("the kernels' headers");
    let icount: Vec<&str> = runs
        .iter()
        .filter(|r| r.icount.is_some())
        .map(|r| r.run.kernel.as_str())
        .collect();
    assert_eq!(icount, ["timer"]);
}

#[test]
fn only_the_validate_kernel_has_its_report_checked() {
    let runs = Workspace::new().runs().expect("the kernels' headers");
    let checked: Vec<&str> = runs
        .iter()
        .filter(|r| r.check_report.is_some())
        .map(|r| r.run.kernel.as_str())
        .collect();
    assert_eq!(checked, ["validate"]);
}

#[test]
fn the_image_s_grub_boots_the_validate_kernel_by_multiboot2() {
    let cfg = image::grub_cfg("v0.1-3-gabc");
    assert!(
        cfg.contains("\n    multiboot2 /boot/pmu-validate.elf commit=v0.1-3-gabc\n    boot\n"),
        "{cfg}"
    );
    assert!(cfg.contains(&format!("\nset timeout={}\n", image::TIMEOUT_S)));
    assert_eq!(cfg.matches("menuentry ").count(), 1, "one entry: {cfg}");
}

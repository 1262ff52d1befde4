//! The harness's reading of the kernels' headers and its report lines
//! (no QEMU).

use super::qemu::Accel;
use super::*;

#[test]
fn a_tcg_only_kernel_is_one_skipped_case_under_kvm_and_boots_under_tcg() {
    let mut k = KernelRun {
        run: Run::plain("k", Vec::new()),
        defmt: false,
        package: Some("pmu-qemu-tests"),
        tcg_only: None,
    };
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

//! The validation report's form, on recorded kernel output: the `validate`
//! kernel's console under TCG (`cargo qemu validate`), under this
//! machine's KVM on an AMD EPYC whose KVM exposes no PMU
//! (`PMU_QEMU_ACCEL=kvm cargo qemu validate`), and booted from the
//! bootable image by GRUB (`cargo validate boot-iso`, its COM1), each
//! recorded 2026-11-29; and on consoles made from them to cover what no
//! machine here can produce (passed and failed cases, whose measurements
//! are the `archperf` kernel's `model_*` cases' lines).

use pmu_qemu_run::{Run, Verdict, judge};

use super::*;

const TCG: &str = include_str!("tcg_pvh.console");
const KVM_AMD: &str = include_str!("kvm_amd_pvh.console");
const GRUB: &str = include_str!("tcg_multiboot2.console");

/// A console with a passed, a failed and a skipped case, two
/// architectures (the `amd_` case's line is of the same form as any other
/// architecture's), made from the recorded TCG console and the model
/// cases' measurements.
const MADE: &str = "\
hobby: IDT loaded, legacy PIC masked
report: pmu-validate 1; commit 35c81b2; platform bare metal; boot multiboot2
report: cpu GenuineIntel family 6 model 207 stepping 2 (06_CFH, CPUID.01H:EAX 000C06F2)
report: brand Intel(R) Xeon(R) Platinum 8570
report: cpuid max 00000023 80000008
report: cpuid 0000000A.0: 07300805 00000000 00000000 00008603
report: cpuid zero: 0000001A.0
suite validate: 3 cases
real: measured 3000300 instructions retired (IA32_PMC0, real PMU; 1000000 iterations of 3); bound 3000000..=3080000
test validate::archperf_retired_instructions_within_bounds ... ok
report: case archperf_retired_instructions_within_bounds: passed: measured 3000300 instructions retired (IA32_PMC0, real PMU; 1000000 iterations of 3); bound 3000000..=3080000
real: measured 999999 core cycles over 1000000 TSC ticks (IA32_FIXED_CTR1, real PMU); bound 1000000..=8000000
test validate::archperf_core_cycles_against_the_tsc ... FAILED
    core cycles: 999999 measured, a real run allows 1000000..=8000000
report: case archperf_core_cycles_against_the_tsc: failed: measured 999999 core cycles over 1000000 TSC ticks (IA32_FIXED_CTR1, real PMU); bound 1000000..=8000000; core cycles: 999999 measured, a real run allows 1000000..=8000000
test validate::amd_retired_instructions_within_bounds ... skipped: not an AMD CPU
report: case amd_retired_instructions_within_bounds: skipped: not an AMD CPU
report: result 1 passed, 1 failed, 1 skipped
suite validate: 1 passed, 1 failed, 1 skipped
";

/// The case lines of `console`, as the runner judges them.
fn judged(console: &str) -> Vec<CaseResult> {
    let exit_ok = !console.contains("... FAILED");
    judge(console, exit_ok, "", &Run::plain("validate", Vec::new()))
}

/// `console` with the report line that starts with `from` replaced by
/// `to` (`None`: removed).
fn edited(console: &str, from: &str, to: Option<&str>) -> String {
    console
        .lines()
        .filter_map(|l| match l.strip_prefix("report: ") {
            Some(rest) if rest.starts_with(from) => to.map(|t| format!("report: {t}")),
            _ => Some(l.to_string()),
        })
        .map(|l| l + "\n")
        .collect()
}

#[test]
fn the_tcg_report_reads_back_with_every_fact() {
    let r = parse(TCG).expect("the recorded TCG report");
    assert_eq!(
        (r.commit.as_str(), r.platform.as_str(), r.boot.as_str()),
        ("unknown", "TCG", "PVH")
    );
    assert_eq!(
        r.cpu,
        Cpu {
            vendor: "AuthenticAMD".into(),
            family: 15,
            model: 107,
            stepping: 1,
            signature: 0x0006_0FB1,
        }
    );
    assert_eq!(r.brand.as_deref(), Some("QEMU Virtual CPU version 2.5+"));
    assert_eq!(r.max_leaves, (0xD, 0x8000_000A));
    assert_eq!(
        r.leaves,
        [
            (1, 0, [0x0006_0FB1, 0x800, 0x8000_2001, 0x078B_FBFD]),
            (0x8000_0001, 0, [0x0006_0FB1, 0, 5, 0x2193_FBFD]),
        ]
    );
    assert_eq!(r.zero_leaves, [(7, 0), (0xA, 0)]);
    assert_eq!(r.result, (0, 0, 3));
    let names: Vec<&str> = r.cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "archperf_retired_instructions_within_bounds",
            "archperf_core_cycles_against_the_tsc",
            "archperf_overflow_pmi_inside_the_loop",
        ]
    );
    for c in &r.cases {
        assert_eq!(c.verdict, Verdict::Skipped);
        assert_eq!((&c.measured, &c.bound), (&None, &None));
        assert_eq!(
            c.said,
            "no PMU exposed to this guest (TCG emulates none; CPUID leaf 0AH version 0)"
        );
    }
    assert!(r.passed(), "skipped cases do not fail a run");
    assert_eq!(r.agrees_with(&judged(TCG)), Ok(()));
}

#[test]
fn the_kvm_and_grub_reports_read_back() {
    let kvm = parse(KVM_AMD).expect("the recorded KVM report");
    assert_eq!((kvm.platform.as_str(), kvm.boot.as_str()), ("KVM", "PVH"));
    assert_eq!(
        (
            kvm.cpu.vendor.as_str(),
            kvm.cpu.family,
            kvm.cpu.model,
            kvm.cpu.stepping
        ),
        ("AuthenticAMD", 25, 17, 1)
    );
    assert_eq!(kvm.zero_leaves, [(0xA, 0), (0x1A, 0), (0x8000_001B, 0)]);
    assert!(
        kvm.cases
            .iter()
            .all(|c| c.said.starts_with("not an Intel CPU"))
    );
    let grub = parse(GRUB).expect("the recorded report of the image");
    assert_eq!(
        (grub.platform.as_str(), grub.boot.as_str()),
        ("TCG", "multiboot2")
    );
    assert_ne!(grub.commit, "unknown", "the image's GRUB entry passes it");
    assert_eq!(grub.agrees_with(&judged(GRUB)), Ok(()));
}

#[test]
fn measurements_bounds_and_failures_read_back() {
    let r = parse(MADE).expect("the made report");
    assert_eq!(r.result, (1, 1, 1));
    assert!(!r.passed());
    let [pass, fail, skip] = r.cases.as_slice() else {
        panic!("three cases: {:?}", r.cases);
    };
    assert_eq!(pass.verdict, Verdict::Passed);
    assert_eq!(
        pass.measured.as_deref(),
        Some("3000300 instructions retired (IA32_PMC0, real PMU; 1000000 iterations of 3)")
    );
    assert_eq!(pass.bound.as_deref(), Some("3000000..=3080000"));
    assert_eq!(pass.said, "");
    assert_eq!(fail.verdict, Verdict::Failed);
    assert_eq!(fail.bound.as_deref(), Some("1000000..=8000000"));
    assert_eq!(
        fail.said,
        "core cycles: 999999 measured, a real run allows 1000000..=8000000"
    );
    assert_eq!(
        (skip.verdict, skip.said.as_str()),
        (Verdict::Skipped, "not an AMD CPU")
    );
    assert_eq!(r.platform, "bare metal");
    assert_eq!(r.agrees_with(&judged(MADE)), Ok(()));
}

#[test]
fn the_rendered_report_is_a_fenced_block_with_every_fact() {
    let r = parse(MADE).unwrap();
    let how = ["command:  cargo validate report serial.log".to_string()];
    let expected = "\
```text
pmu validation report (format 1)
command:  cargo validate report serial.log
commit:   35c81b2
platform: bare metal (booted by multiboot2)
cpu:      GenuineIntel family 6 model 207 stepping 2 (06_CFH, CPUID.01H:EAX 000C06F2)
brand:    Intel(R) Xeon(R) Platinum 8570
cpuid:    largest leaf 00000023, largest extended leaf 80000008
          leaf.sub    EAX      EBX      ECX      EDX
          0000000A.0  07300805 00000000 00000000 00008603
          all zero: 0000001A.0
cases:
  archperf_retired_instructions_within_bounds: passed
    measured 3000300 instructions retired (IA32_PMC0, real PMU; 1000000 iterations of 3)
    bound    3000000..=3080000
  archperf_core_cycles_against_the_tsc: FAILED
    measured 999999 core cycles over 1000000 TSC ticks (IA32_FIXED_CTR1, real PMU)
    bound    1000000..=8000000
    core cycles: 999999 measured, a real run allows 1000000..=8000000
  amd_retired_instructions_within_bounds: skipped
    not an AMD CPU
result:   1 passed, 1 failed, 1 skipped
```
";
    assert_eq!(r.render(&how), expected);
}

#[test]
fn what_is_wrong_is_named() {
    let cases = [
        (
            edited(TCG, "result", None),
            "no `result` line: the run stopped before its end",
        ),
        (edited(TCG, "cpu ", None), "no `cpu` line"),
        (
            edited(TCG, "result", Some("result 1 passed, 0 failed, 2 skipped")),
            "the result says 1 passed, 0 failed, 2 skipped; the case lines 0 passed, 0 failed, 3 skipped",
        ),
        (
            edited(
                TCG,
                "pmu-validate",
                Some("pmu-validate 2; commit x; platform TCG; boot PVH"),
            ),
            "report format 2: this tool reads format 1 (build both from one checkout)",
        ),
        (
            edited(TCG, "cpuid max", Some("cpuid max 0000000D")),
            "not `cpuid max <leaf> <leaf>`: `cpuid max 0000000D`",
        ),
        (
            edited(TCG, "brand", Some("bogus line")),
            "a report line of no known kind: `bogus line`",
        ),
        (
            edited(
                TCG,
                "case archperf_retired",
                Some("case archperf_retired_instructions_within_bounds: passed"),
            ),
            "case archperf_retired_instructions_within_bounds passed without a measurement and its bound",
        ),
        (
            edited(
                TCG,
                "case archperf_retired",
                Some("case archperf_retired_instructions_within_bounds: skipped: "),
            ),
            "case archperf_retired_instructions_within_bounds did not pass and does not say why",
        ),
        (
            edited(
                TCG,
                "case archperf_retired",
                Some(
                    "case archperf_retired_instructions_within_bounds: passed: measured 5 instructions",
                ),
            ),
            "case archperf_retired_instructions_within_bounds: a measurement without its bound: `archperf_retired_instructions_within_bounds: passed: measured 5 instructions`",
        ),
        (
            "hobby: IDT loaded\n".to_string(),
            "no report lines (`report: ...`): not the validate kernel's console, or it stopped before its report",
        ),
    ];
    for (console, error) in cases {
        assert_eq!(parse(&console), Err(error.to_string()), "{console}");
    }
}

#[test]
fn the_suite_case_checks_the_report_against_the_case_lines() {
    let passed = check(TCG, &judged(TCG));
    assert_eq!(
        (passed.name.as_str(), passed.verdict),
        ("report", Verdict::Passed)
    );
    assert_eq!(
        passed.note,
        " (3 cases in format 1: 0 passed, 0 failed, 3 skipped)"
    );
    // A report that says a case passed where its case line says skipped.
    let mut lines = judged(TCG);
    lines[0].verdict = Verdict::Passed;
    let failed = check(TCG, &lines);
    assert_eq!(failed.verdict, Verdict::Failed);
    assert!(
        failed.note.contains("are not the case lines"),
        "{}",
        failed.note
    );
    let cut = check(&edited(TCG, "result", None), &judged(TCG));
    assert_eq!(cut.verdict, Verdict::Failed);
}

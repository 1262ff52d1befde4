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

/// A closed standard output (`pmu-qemu-run --help | head -0`) ends the run
/// quietly with 141, not with a panic (101).
#[test]
fn a_closed_stdout_ends_the_run_quietly() {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader); // nobody reads: the first write fails with EPIPE
    let child = Command::new(env!("CARGO_BIN_EXE_pmu-qemu-run"))
        .arg("--help")
        .env("QEMU", "/nonexistent/qemu-system-x86_64")
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run pmu-qemu-run");
    let out = child.wait_with_output().expect("its exit");
    assert_eq!(out.status.code(), Some(141), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "", "nothing said");
}

/// A closed standard error loses the message only: a usage error still
/// exits 2.
#[test]
fn a_closed_stderr_keeps_the_status() {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let status = Command::new(env!("CARGO_BIN_EXE_pmu-qemu-run"))
        .arg("--bogus")
        .stderr(writer)
        .status()
        .expect("run pmu-qemu-run");
    assert_eq!(status.code(), Some(2));
}

/// A boot whose reader goes away mid-run (`| head`): the runner kills QEMU
/// at its next console line and exits 141, without a panic. QEMU is a
/// shell script here that prints a console line every 10 ms forever.
#[cfg(unix)]
#[test]
fn a_boot_stops_when_its_reader_goes() {
    use std::io::{BufRead, BufReader, Read};
    use std::os::unix::fs::PermissionsExt;
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("closed-pipe");
    std::fs::create_dir_all(&dir).unwrap();
    let qemu = dir.join("qemu");
    let pid_file = dir.join("qemu.pid");
    let _ = std::fs::remove_file(&pid_file);
    std::fs::write(
        &qemu,
        "#!/bin/sh\n\
         case \"$1\" in --version) echo 'fake QEMU'; exit 0;; esac\n\
         echo $$ > \"$FAKE_QEMU_PID\"\n\
         i=0\n\
         while :; do echo \"console line $i\"; i=$((i+1)); sleep 0.01; done\n",
    )
    .unwrap();
    std::fs::set_permissions(&qemu, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_pmu-qemu-run"))
        .arg(dir.join("kernel.elf"))
        .env("QEMU", &qemu)
        .env("FAKE_QEMU_PID", &pid_file)
        .env("PMU_QEMU_FIRMWARE", "default")
        .env_remove("PMU_QEMU_ACCEL")
        .env("PMU_QEMU_TIMEOUT", "60")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run pmu-qemu-run");
    // Read the accelerator, the firmware and two console lines, then go.
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for _ in 0..4 {
        let line = lines.next().expect("a line").expect("text");
        assert!(line.starts_with("pmu-qemu-run: ") || line.starts_with("console line"));
    }
    drop(lines);
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the runner kept running");
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut said = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut said)
        .unwrap();
    assert_eq!(status.code(), Some(141), "{said}");
    assert!(!said.contains("panicked"), "{said}");
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    assert!(
        !std::path::Path::new(&format!("/proc/{}", pid.trim())).exists(),
        "QEMU (pid {}) was killed",
        pid.trim()
    );
}

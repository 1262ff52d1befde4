//! Booting one kernel under QEMU and turning its verdict into success or
//! failure: what `pmu-qemu-run` does and what every test boot goes through.
//!
//! The kernel reports through the `isa-debug-exit` device at port F4h: it
//! writes 10H for success (QEMU exits with status 33 = 10H << 1 | 1) and
//! anything else for failure. A triple fault (QEMU exits 0 under
//! `-no-reboot`), any other status, or no verdict within the timeout fails.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The QEMU binary (`$QEMU`, default `qemu-system-x86_64`).
pub fn qemu_binary() -> String {
    std::env::var("QEMU").unwrap_or_else(|_| "qemu-system-x86_64".into())
}

/// Seconds before a kernel without a verdict counts as hung
/// (`$PMU_QEMU_TIMEOUT`, default 60).
pub fn timeout() -> Duration {
    let s = std::env::var("PMU_QEMU_TIMEOUT")
        .ok()
        .and_then(|s| s.parse().ok());
    Duration::from_secs(s.unwrap_or(60))
}

/// Makes sure QEMU can be run: when it is missing and this process runs as
/// root on a machine with apt, installs Debian's `qemu-system-x86`;
/// otherwise says which package to install.
pub fn ensure_qemu() -> Result<(), String> {
    let qemu = qemu_binary();
    if Command::new(&qemu)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return Ok(());
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0");
    let apt = Command::new("apt-get").arg("--version").output().is_ok();
    if !(root && apt) {
        return Err(format!(
            "{qemu} not found: install the package qemu-system-x86 (Debian/Ubuntu)"
        ));
    }
    eprintln!("pmu-qemu-run: {qemu} not found; installing Debian's qemu-system-x86");
    let update = Command::new("apt-get").args(["update", "-qq"]).status();
    let install = Command::new("apt-get")
        .args([
            "install",
            "-y",
            "-qq",
            "--no-install-recommends",
            "qemu-system-x86",
        ])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status();
    match (update, install) {
        (Ok(u), Ok(i)) if u.success() && i.success() => Ok(()),
        _ => Err("installing qemu-system-x86 failed".into()),
    }
}

/// What one boot produced.
pub struct Boot {
    /// Everything the kernel printed on its console (COM1), `\r` removed.
    pub console: String,
    /// The kernel wrote the success code.
    pub success: bool,
    /// Why not, when it did not: a line for people.
    pub said: String,
}

/// Boots `kernel` with `args` added to the fixed QEMU command line. With
/// `echo`, console lines are copied to this process's stdout as they come.
pub fn boot(kernel: &Path, args: &[String], echo: bool) -> Boot {
    let qemu = qemu_binary();
    let spawned = Command::new(&qemu)
        .args([
            "-M", "pc", "-m", "128M", "-display", "none", "-monitor", "none",
        ])
        .args(["-serial", "stdio", "-no-reboot"])
        .args([
            "-device",
            "isa-debug-exit,iobase=0xf4,iosize=0x04",
            "-kernel",
        ])
        .arg(kernel)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            return Boot {
                console: String::new(),
                success: false,
                said: format!("cannot run {qemu}: {e}"),
            };
        }
    };
    let (lines, rx) = mpsc::channel::<String>();
    let stdout = child.stdout.take().map(BufReader::new);
    let reader = std::thread::spawn(move || {
        for line in stdout
            .into_iter()
            .flat_map(|r| r.lines())
            .map_while(Result::ok)
        {
            let _ = lines.send(line.replace('\r', ""));
        }
    });
    let mut stderr = child.stderr.take();
    let deadline = Instant::now() + timeout();
    let mut console = String::new();
    let mut collect = |line: String| {
        if echo {
            println!("{line}");
            let _ = std::io::stdout().flush();
        }
        console += &line;
        console.push('\n');
    };
    let status = loop {
        while let Ok(line) = rx.try_recv() {
            collect(line);
        }
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => break None,
        }
    };
    let _ = reader.join();
    while let Ok(line) = rx.try_recv() {
        collect(line);
    }
    let mut qemu_said = String::new();
    if let Some(e) = stderr.as_mut() {
        let _ = e.read_to_string(&mut qemu_said);
    }
    let (success, said) = match status.and_then(|s| s.code()) {
        Some(33) => (true, String::new()),
        Some(35) => (false, "kernel reported failure".into()),
        Some(0) => (
            false,
            "QEMU exited without a verdict (triple fault or reset?)".into(),
        ),
        Some(code) => (
            false,
            format!("QEMU exited with status {code}: {}", qemu_said.trim()),
        ),
        None if status.is_none() => (
            false,
            format!("kernel hung: no verdict after {}s", timeout().as_secs()),
        ),
        None => (false, "QEMU was killed by a signal".into()),
    };
    Boot {
        console,
        success,
        said,
    }
}

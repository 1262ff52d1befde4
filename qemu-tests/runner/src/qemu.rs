//! Booting one kernel under QEMU and turning its verdict into success or
//! failure: what `pmu-qemu-run` does and what every test boot goes through.
//!
//! The kernel reports through the `isa-debug-exit` device at port F4h: it
//! writes 10H for success (QEMU exits with status 33 = 10H << 1 | 1) and
//! anything else for failure. A triple fault (QEMU exits 0 under
//! `-no-reboot`), any other status, or no verdict within the timeout fails.
//!
//! # The accelerator
//!
//! `PMU_QEMU_ACCEL` picks how QEMU runs the kernel ([`Accel::from_env`]):
//!
//! | value | QEMU arguments | the guest's CPU |
//! |---|---|---|
//! | unset, empty or `tcg` | `-accel tcg` (unless the kernel's header names an `-accel` of its own, such as `-accel tcg,thread=multi`) | QEMU's emulated model (`qemu64`, or the kernel's `-cpu`): no PMU, CPUID leaf 0AH version 0 |
//! | `kvm` | `-enable-kvm -cpu host,-arch-capabilities` (a kernel's own `-cpu` is kept: a kernel that checks an emulated CPU model still gets it; a kernel's `-accel tcg...` is dropped) | the host's CPU, with the PMU the host's KVM exposes (none on a host without one or with `enable_pmu=0`) |
//!
//! `-arch-capabilities` hides `IA32_ARCH_CAPABILITIES` (CPUID.07H:EDX\[29\])
//! from the guest, which no kernel here uses: QEMU 7.2 aborts at start
//! ("failed to set MSR 0x10a") where the host's KVM refuses the value
//! `-cpu host` derives for it (seen on a nested AMD EPYC host).
//!
//! `kvm` is refused, before anything boots, when `/dev/kvm` cannot be opened
//! for reading and writing. The runners print the accelerator on their
//! first line.
//!
//! # The firmware
//!
//! QEMU runs a firmware before the kernel's PVH entry point even with
//! `-kernel`: for `-M pc` its default is SeaBIOS, which spends most of a
//! short kernel's boot on work a PVH kernel does not need (probing disks
//! and option ROMs, building tables, a boot menu). The runner boots with
//! **qboot** instead (`-bios qboot.rom`), a minimal firmware that QEMU
//! ships for exactly this (Debian's `qemu-system-data` has
//! `/usr/share/qemu/qboot.rom`): measured on the project machine, the
//! `counters` kernel boots in 0.075 s instead of 0.24 s under TCG and in
//! 0.78 s instead of 4.7 s under (nested) KVM. [`Firmware::from_env`]
//! picks it:
//!
//! | `PMU_QEMU_FIRMWARE` | firmware |
//! |---|---|
//! | unset, empty or `qboot` | qboot, where `qboot.rom` is in one of the data directories QEMU searches (`QEMU -L help`); otherwise QEMU's default, saying so |
//! | `default` | QEMU's default (SeaBIOS for `-M pc`) |
//!
//! A kernel whose own arguments name `-bios` keeps its firmware. The
//! kernels must not count on what either firmware leaves behind: SeaBIOS
//! software-enables the boot CPU's local APIC and sets its LINT0 to
//! ExtINT and LINT1 to NMI, qboot leaves the APIC as reset left it
//! (disabled, every LVT entry masked). `pmu-hobby` enables every CPU's
//! APIC itself. The runners print the firmware on their second line.

use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The QEMU binary (`$QEMU`, default `qemu-system-x86_64`).
pub fn qemu_binary() -> String {
    std::env::var("QEMU").unwrap_or_else(|_| "qemu-system-x86_64".into())
}

/// How QEMU runs the kernels: `PMU_QEMU_ACCEL` (see the [module
/// documentation](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accel {
    /// QEMU's own emulation (the default): the same on every host.
    Tcg,
    /// The host's CPU under KVM (`-enable-kvm -cpu host,-arch-capabilities`).
    Kvm,
}

/// The CPU model of a KVM boot: the host's (module documentation: why
/// without `arch-capabilities`).
const HOST_CPU: &str = "host,-arch-capabilities";

/// The device KVM is reached through.
const KVM_DEVICE: &str = "/dev/kvm";

impl Accel {
    /// The accelerator `PMU_QEMU_ACCEL` asks for; for `kvm`, only when
    /// `/dev/kvm` can be opened for reading and writing. The error says why
    /// not, for people.
    pub fn from_env() -> Result<Accel, String> {
        let value = std::env::var("PMU_QEMU_ACCEL").ok();
        Accel::parse(value.as_deref())?.usable()
    }

    /// This accelerator, if it can run here: for `kvm`, only when
    /// `/dev/kvm` can be opened for reading and writing (the error says
    /// why not, for people).
    pub fn usable(self) -> Result<Accel, String> {
        if self == Accel::Kvm {
            kvm_usable(Path::new(KVM_DEVICE))?;
        }
        Ok(self)
    }

    /// The accelerator a `PMU_QEMU_ACCEL` value names (unset or empty:
    /// TCG), without checking that it can run.
    pub fn parse(value: Option<&str>) -> Result<Accel, String> {
        match value.map(str::trim) {
            None | Some("") | Some("tcg") => Ok(Accel::Tcg),
            Some("kvm") => Ok(Accel::Kvm),
            Some(other) => Err(format!(
                "PMU_QEMU_ACCEL={other}: not an accelerator the runner knows; use tcg (the default) or kvm"
            )),
        }
    }

    /// The other accelerator.
    pub fn other(self) -> Accel {
        match self {
            Accel::Tcg => Accel::Kvm,
            Accel::Kvm => Accel::Tcg,
        }
    }

    /// The QEMU arguments for a kernel whose header asks for `kernel_args`:
    /// the accelerator's and the kernel's, merged (see the [module
    /// documentation](self)).
    pub fn qemu_args(self, kernel_args: &[String]) -> Vec<String> {
        let names = |option: &str| kernel_args.iter().any(|a| a == option);
        let mut args = Vec::new();
        match self {
            Accel::Tcg => {
                if !names("-accel") {
                    args.extend(["-accel".to_string(), "tcg".to_string()]);
                }
                args.extend(kernel_args.iter().cloned());
            }
            Accel::Kvm => {
                args.push("-enable-kvm".into());
                if !names("-cpu") {
                    args.extend(["-cpu".to_string(), HOST_CPU.to_string()]);
                }
                let mut rest = kernel_args.iter();
                while let Some(a) = rest.next() {
                    // KVM runs each virtual CPU on a host thread of its
                    // own: a kernel's TCG options do not apply.
                    if a == "-accel" {
                        match rest.next() {
                            Some(v) if v.starts_with("tcg") => continue,
                            Some(v) => args.extend([a.clone(), v.clone()]),
                            None => args.push(a.clone()),
                        }
                    } else {
                        args.push(a.clone());
                    }
                }
            }
        }
        args
    }
}

impl fmt::Display for Accel {
    /// The line the runners print first.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Accel::Tcg => f.write_str(
                "accelerator tcg (QEMU's emulated CPU, no PMU; PMU_QEMU_ACCEL=kvm runs on the host's CPU)",
            ),
            Accel::Kvm => f.write_str(
                "accelerator kvm (PMU_QEMU_ACCEL=kvm: -enable-kvm -cpu host,-arch-capabilities: the host's CPU and whatever PMU its KVM exposes)",
            ),
        }
    }
}

/// Whether KVM can be used through `device`: it opens for reading and
/// writing, as QEMU opens it.
pub(crate) fn kvm_usable(device: &Path) -> Result<(), String> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(device)
        .map(drop)
        .map_err(|e| {
            format!(
                "PMU_QEMU_ACCEL=kvm, but {} is not usable ({e}): KVM needs a host with hardware virtualization, the kvm module loaded and read-write access to {0} (the kvm group); unset PMU_QEMU_ACCEL to run under TCG",
                device.display()
            )
        })
}

/// Seconds before a kernel booted under `accel` without a verdict counts
/// as hung: `$PMU_QEMU_TIMEOUT`, or by default 60 under TCG and 300 under
/// KVM. A hypervisor that emulates its guest (the project machine's nested
/// KVM runs a kernel about 1000 times slower than TCG: 0.6 µs an
/// instruction, 50-150 µs a VM exit) takes up to a minute for a kernel
/// that TCG boots in a second or two, and longer on a busy host; the
/// bound is only spent on a kernel that hangs.
pub fn timeout(accel: Accel) -> Duration {
    let s = std::env::var("PMU_QEMU_TIMEOUT")
        .ok()
        .and_then(|s| s.parse().ok());
    let default = match accel {
        Accel::Tcg => 60,
        Accel::Kvm => 300,
    };
    Duration::from_secs(s.unwrap_or(default))
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
    if !can_apt_install() {
        return Err(format!(
            "{qemu} not found: install the package qemu-system-x86 (Debian/Ubuntu)"
        ));
    }
    crate::output::stderr(format_args!(
        "pmu-qemu-run: {qemu} not found; installing Debian's qemu-system-x86"
    ));
    apt_install(&["qemu-system-x86"])
}

/// Whether this process can install Debian packages: it runs as root on a
/// machine with apt.
pub fn can_apt_install() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0");
    root && Command::new("apt-get").arg("--version").output().is_ok()
}

/// Installs Debian's `packages` (`apt-get update`, then `apt-get install
/// --no-install-recommends`, non-interactive), where
/// [`can_apt_install`]; the error says which failed.
pub fn apt_install(packages: &[&str]) -> Result<(), String> {
    let update = Command::new("apt-get").args(["update", "-qq"]).status();
    let install = Command::new("apt-get")
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(packages)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status();
    match (update, install) {
        (Ok(u), Ok(i)) if u.success() && i.success() => Ok(()),
        _ => Err(format!("installing {} failed", packages.join(" "))),
    }
}

/// The firmware QEMU runs before the kernel (see the [module
/// documentation](self#the-firmware)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Firmware {
    /// qboot: `-bios qboot.rom`, found in QEMU's data directories.
    Qboot,
    /// QEMU's default for `-M pc` (SeaBIOS): no `-bios` argument. `Some`
    /// says why qboot is not used although it was asked for (the file is
    /// not found).
    Default(Option<String>),
}

/// qboot's file name, which QEMU looks up in its data directories.
const QBOOT: &str = "qboot.rom";

impl Firmware {
    /// The firmware `PMU_QEMU_FIRMWARE` asks for (unset: qboot where QEMU
    /// has it). The error says why the value is not understood.
    pub fn from_env() -> Result<Firmware, String> {
        let value = std::env::var("PMU_QEMU_FIRMWARE").ok();
        Firmware::parse(value.as_deref(), find_qboot)
    }

    /// The firmware a `PMU_QEMU_FIRMWARE` value names, `find` saying
    /// whether qboot is there (and why not).
    pub(crate) fn parse(
        value: Option<&str>,
        find: impl FnOnce() -> Result<(), String>,
    ) -> Result<Firmware, String> {
        match value.map(str::trim) {
            None | Some("") | Some("qboot") => Ok(match find() {
                Ok(()) => Firmware::Qboot,
                Err(why) => Firmware::Default(Some(why)),
            }),
            Some("default") => Ok(Firmware::Default(None)),
            Some(other) => Err(format!(
                "PMU_QEMU_FIRMWARE={other}: not a firmware the runner knows; use qboot (the default) or default (QEMU's own, SeaBIOS)"
            )),
        }
    }

    /// The QEMU arguments that select this firmware, unless the kernel's
    /// own arguments `kernel_args` name a `-bios`.
    pub fn qemu_args(&self, kernel_args: &[String]) -> Vec<String> {
        match self {
            Firmware::Qboot if !kernel_args.iter().any(|a| a == "-bios") => {
                vec!["-bios".into(), QBOOT.into()]
            }
            _ => Vec::new(),
        }
    }
}

impl fmt::Display for Firmware {
    /// The line the runners print second.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Firmware::Qboot => f.write_str(
                "firmware qboot (-bios qboot.rom: a minimal firmware, boots faster than SeaBIOS; PMU_QEMU_FIRMWARE=default uses QEMU's own)",
            ),
            Firmware::Default(None) => {
                f.write_str("firmware QEMU's default (SeaBIOS; PMU_QEMU_FIRMWARE=default)")
            }
            Firmware::Default(Some(why)) => write!(
                f,
                "firmware QEMU's default (SeaBIOS), not qboot: {why}; kernels boot slower (install qboot.rom, e.g. Debian's qemu-system-data)"
            ),
        }
    }
}

/// Whether one of the data directories of the QEMU binary
/// ([`qemu_binary`]), as `-L help` lists them, holds `qboot.rom`; the
/// error says why not.
fn find_qboot() -> Result<(), String> {
    let qemu = qemu_binary();
    let listed = Command::new(&qemu)
        .args(["-L", "help"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {qemu} -L help ({e})"))?;
    qboot_in(&String::from_utf8_lossy(&listed.stdout))
}

/// Whether one of `listed`'s directories (one a line, as `-L help` prints
/// them) holds `qboot.rom`; the error names them.
pub(crate) fn qboot_in(listed: &str) -> Result<(), String> {
    let dirs: Vec<&str> = listed
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    dirs.iter()
        .map(|d| Path::new(d).join(QBOOT))
        .any(|p| p.is_file())
        .then_some(())
        .ok_or_else(|| {
            format!(
                "{QBOOT} is not in QEMU's data directories ({})",
                if dirs.is_empty() {
                    "none listed by -L help".to_string()
                } else {
                    dirs.join(", ")
                }
            )
        })
}

/// The firmware of every boot of this process: [`Firmware::from_env`],
/// looked up once.
pub fn firmware() -> &'static Result<Firmware, String> {
    static FIRMWARE: std::sync::OnceLock<Result<Firmware, String>> = std::sync::OnceLock::new();
    FIRMWARE.get_or_init(Firmware::from_env)
}

/// What one boot produced.
pub struct Boot {
    /// Everything the kernel printed on its console (COM1), `\r` removed.
    pub console: String,
    /// The kernel wrote the success code.
    pub success: bool,
    /// Why not, when it did not: a line for people.
    pub said: String,
    /// With `echo`: standard output was a closed pipe (its reader gone,
    /// `| head`), so the boot stopped there and QEMU was killed.
    pub stdout_closed: bool,
}

/// Boots `kernel` under `accel` with `args` (the kernel's) added to the
/// fixed QEMU command line ([`Accel::qemu_args`]), after the [`firmware`]
/// ([`Firmware::qemu_args`]). With `echo`, console lines are copied to
/// this process's stdout as they come; when that is a closed pipe, QEMU is
/// killed and the boot ends there ([`Boot::stdout_closed`]).
pub fn boot(kernel: &Path, accel: Accel, args: &[String], echo: bool) -> Boot {
    let firmware = match firmware() {
        Ok(f) => f.qemu_args(args),
        Err(e) => {
            return Boot {
                console: String::new(),
                success: false,
                said: e.clone(),
                stdout_closed: false,
            };
        }
    };
    let mut medium = vec!["-kernel".into(), kernel.as_os_str().to_owned()];
    medium.extend(firmware.into_iter().map(Into::into));
    run(&medium, accel, args, echo)
}

/// Boots the bootable CD image `iso` (`-cdrom`: QEMU's default firmware,
/// SeaBIOS, reads its El Torito boot record and starts its boot loader,
/// which boots the kernel) under `accel`, with `args` added, as [`boot`]
/// boots a kernel: the same machine, console and exit device. qboot boots
/// no CD, so the firmware is always QEMU's default.
pub fn boot_cdrom(iso: &Path, accel: Accel, args: &[String], echo: bool) -> Boot {
    let medium = ["-cdrom".into(), iso.as_os_str().to_owned()];
    run(&medium, accel, args, echo)
}

/// Runs QEMU on the fixed command line with `medium` (what it boots and
/// the firmware it boots with), `accel`'s arguments and `args`, and
/// collects the console and the verdict.
fn run(medium: &[std::ffi::OsString], accel: Accel, args: &[String], echo: bool) -> Boot {
    let qemu = qemu_binary();
    let args = accel.qemu_args(args);
    let spawned = Command::new(&qemu)
        .args([
            "-M", "pc", "-m", "128M", "-display", "none", "-monitor", "none",
        ])
        .args(["-serial", "stdio", "-no-reboot"])
        .args(["-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"])
        .args(medium)
        .args(&args)
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
                stdout_closed: false,
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
    let deadline = Instant::now() + timeout(accel);
    let mut console = String::new();
    let closed = std::cell::Cell::new(false);
    let mut collect = |line: String| {
        if echo && !closed.get() && !crate::stacks::is_stack_line(&line) {
            closed.set(crate::output::stdout(format_args!("{line}")).is_err());
        }
        console += &line;
        console.push('\n');
    };
    let status = loop {
        while let Ok(line) = rx.try_recv() {
            collect(line);
        }
        if closed.get() {
            // Nobody reads the console any more: stop the kernel.
            let _ = child.kill();
            let _ = child.wait();
            break None;
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
        _ if closed.get() => (
            false,
            "standard output closed: QEMU stopped, no verdict".into(),
        ),
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
            format!(
                "kernel hung: no verdict after {}s",
                timeout(accel).as_secs()
            ),
        ),
        None => (false, "QEMU was killed by a signal".into()),
    };
    Boot {
        console,
        success,
        said,
        stdout_closed: closed.get(),
    }
}

//! The bootable image of the validation run: GRUB and the `validate`
//! kernel (which GRUB boots through its multiboot2 header,
//! `hobby::multiboot2`) on an ISO 9660 image made by `grub-mkrescue`.
//! The image carries an El Torito boot record for CDs and, through
//! xorriso, a hybrid MBR, so the same file written to a USB stick (`dd`)
//! boots a PC in BIOS mode (legacy boot, or UEFI's compatibility module):
//! GRUB's menu boots the kernel after [`TIMEOUT_S`] seconds, the kernel
//! writes its report on the VGA text screen and on COM1 and halts. UEFI
//! without a compatibility module has no text screen and is not
//! supported.
//!
//! `grub-mkrescue` needs Debian's [`PACKAGES`]; [`ensure_tools`] installs
//! them when they are missing and this runs as root on a machine with apt
//! (as the runner installs QEMU), and otherwise says which to install.

use std::fs;
use std::path::Path;
use std::process::Command;

use crate::qemu;

/// The Debian packages `grub-mkrescue` needs for a BIOS image: GRUB's
/// i386-pc modules, the tool itself, the ISO writer, and the FAT tools it
/// calls for an EFI image.
pub const PACKAGES: [&str; 4] = ["grub-pc-bin", "grub-common", "xorriso", "mtools"];

/// Seconds GRUB's menu waits before it boots the validation run.
pub const TIMEOUT_S: u32 = 3;

/// Where the kernel lies on the image.
const KERNEL: &str = "boot/pmu-validate.elf";

/// GRUB's configuration: one entry, booting the kernel with `commit=` on
/// its command line (the kernel reports it), chosen after [`TIMEOUT_S`].
/// GRUB's menu goes to the screen only, so that COM1 carries nothing but
/// the kernel's lines.
pub fn grub_cfg(commit: &str) -> String {
    format!(
        "# The pmu validation image: GRUB boots the validate kernel (multiboot2),\n\
         # which runs every real-PMU case on this machine's CPU, writes its report\n\
         # on the screen and on COM1 (115200 8N1), and halts.\n\
         set timeout={TIMEOUT_S}\n\
         set default=0\n\
         menuentry \"pmu validation: run the real-PMU cases and print the report\" {{\n\
         \x20   multiboot2 /{KERNEL} commit={commit}\n\
         \x20   boot\n\
         }}\n"
    )
}

/// Whether `program` runs (`--version`).
fn runs(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// What is missing for a BIOS image: `grub-mkrescue`, `xorriso`, GRUB's
/// i386-pc modules (none when all are there).
fn missing() -> Vec<&'static str> {
    let mut missing = Vec::new();
    if !runs("grub-mkrescue") {
        missing.push("grub-mkrescue (grub-common)");
    }
    if !runs("xorriso") {
        missing.push("xorriso");
    }
    if !Path::new("/usr/lib/grub/i386-pc").is_dir() {
        missing.push("GRUB's i386-pc modules (grub-pc-bin)");
    }
    missing
}

/// Makes sure `grub-mkrescue` can make a BIOS image: when something is
/// missing and this process runs as root on a machine with apt, installs
/// [`PACKAGES`]; otherwise says what to install.
pub fn ensure_tools() -> Result<(), String> {
    let lacking = missing();
    if lacking.is_empty() {
        return Ok(());
    }
    let packages = PACKAGES.join(" ");
    if !qemu::can_apt_install() {
        return Err(format!(
            "the image needs {}: install the packages {packages} (Debian/Ubuntu)",
            lacking.join(", ")
        ));
    }
    eprintln!(
        "validate: {} missing; installing {packages}",
        lacking.join(", ")
    );
    qemu::apt_install(&PACKAGES)?;
    match missing().as_slice() {
        [] => Ok(()),
        still => Err(format!(
            "after installing {packages}, still missing: {}",
            still.join(", ")
        )),
    }
}

/// Makes the image `iso` of `kernel`, staging its files in `staging` (made
/// afresh), `commit` on the kernel's command line. The tools must be there
/// ([`ensure_tools`]).
pub fn build(kernel: &Path, commit: &str, staging: &Path, iso: &Path) -> Result<(), String> {
    let _ = fs::remove_dir_all(staging);
    let grub = staging.join("boot/grub");
    fs::create_dir_all(&grub).map_err(|e| format!("{}: {e}", grub.display()))?;
    fs::copy(kernel, staging.join(KERNEL))
        .map_err(|e| format!("copying {}: {e}", kernel.display()))?;
    fs::write(grub.join("grub.cfg"), grub_cfg(commit)).map_err(|e| format!("grub.cfg: {e}"))?;
    if let Some(dir) = iso.parent() {
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let made = Command::new("grub-mkrescue")
        .arg("-o")
        .arg(iso)
        .arg(staging)
        .output()
        .map_err(|e| format!("cannot run grub-mkrescue: {e}"))?;
    if made.status.success() && iso.is_file() {
        Ok(())
    } else {
        Err(format!(
            "grub-mkrescue failed ({}): {}",
            made.status,
            String::from_utf8_lossy(&made.stderr).trim()
        ))
    }
}

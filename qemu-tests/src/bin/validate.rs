//! The validation run: every real-PMU case of every architecture
//! (`pmu_qemu_tests::real::ARCHITECTURES`) on the CPU this kernel runs on,
//! and a report a user can paste into an issue. `cargo validate` boots it
//! under KVM on the host's CPU (`-cpu host`), and `cargo validate iso`
//! makes a bootable image of it for bare metal (GRUB, multiboot2); under
//! TCG, or under a KVM that exposes no PMU, every case is skipped with its
//! reason.
//!
//! The report is the lines that start with `report: `, on the serial
//! console and (without the prefix) on the VGA text screen, for a machine
//! whose user has only a screen. The host tool (`qemu-tests/host`, module
//! `report`) collects them and checks their form; in order:
//!
//! ```text
//! report: pmu-validate 1; commit <git describe, or unknown>; platform <KVM|TCG|bare metal|hypervisor "<signature>">; boot <PVH|multiboot2>
//! report: cpu <vendor> family <n> model <n> stepping <n> (<FF_MMH>, CPUID.01H:EAX <hex>)
//! report: brand <brand string>                        (when CPUID has one)
//! report: cpuid max <largest standard leaf> <largest extended leaf>
//! report: cpuid <leaf>.<subleaf>: <eax> <ebx> <ecx> <edx>   (each PMU leaf that exists and is not all zero)
//! report: cpuid zero: <leaf>.<subleaf> ...              (those that exist and are all zero)
//! report: case <name>: passed: measured <what>; bound <bound>
//! report: case <name>: skipped: <reason>
//! report: case <name>: failed: [measured <what>; bound <bound>; ]<message>
//! report: result <p> passed, <f> failed, <s> skipped
//! ```
//!
//! Each case also prints its `test validate::<name> ...` line, as every
//! test kernel does, and the kernel exits QEMU with the verdict; on bare
//! metal it halts. The command line may carry `commit=<id>` (the host
//! tool passes the checkout's `git describe`).
//!
//! check-report: its report lines are well-formed and agree with its case lines
#![no_std]
#![no_main]

use core::fmt::{self, Write};

use hobby::boot::BootInfo;
use hobby::test::{self, Ran, Tally};
use hobby::{println, vga};
use pmu::detect::{CpuSignature, Cpuid, CpuidResult, HardwareCpuid};
use pmu_qemu_tests::real::{ARCHITECTURES, measured};

hobby::entry_point!(main);

/// The report's format: the host tool refuses others.
const FORMAT: u32 = 1;

/// The CPUID leaves the report lists (leaf, subleaf) where they exist: the
/// signature and feature flags (PDCM, the hypervisor bit), the hybrid flag
/// (07H:EDX\[15\]), Intel's architectural PMU (0AH), the hybrid core type
/// (1AH), the architectural PMU's extended leaf (23H, version 6), AMD's
/// counter extensions (8000_0001H ECX), IBS (8000_001BH) and PerfMonV2
/// (8000_0022H).
const LEAVES: [(u32, u32); 11] = [
    (0x1, 0),
    (0x7, 0),
    (0xA, 0),
    (0x1A, 0),
    (0x23, 0),
    (0x23, 1),
    (0x23, 2),
    (0x23, 3),
    (0x8000_0001, 0),
    (0x8000_001B, 0),
    (0x8000_0022, 0),
];

/// A report line: on the serial console after `report: `, and on the
/// screen.
macro_rules! report {
    ($($arg:tt)*) => {{
        println!("report: {}", format_args!($($arg)*));
        vga::write(format_args!("{}\n", format_args!($($arg)*)));
    }};
}

fn main(boot: &'static BootInfo) -> ! {
    vga::clear();
    report!(
        "pmu-validate {FORMAT}; commit {}; platform {}; boot {}",
        boot.arg("commit").unwrap_or("unknown"),
        Platform,
        boot.protocol.name()
    );
    cpu();
    leaves();
    let total: usize = ARCHITECTURES.iter().map(|a| a.cases.len()).sum();
    println!("suite validate: {total} cases");
    let mut tally = Tally::default();
    for architecture in ARCHITECTURES {
        for case in architecture.cases {
            let ran = test::run_case("validate", case);
            tally.add(ran);
            let mut reported = false;
            measured::last(|value, bound| {
                reported = true;
                let verdict = match ran {
                    Ran::Passed => "passed",
                    Ran::Skipped => "skipped",
                    Ran::Failed => "failed",
                };
                let said = Said(ran);
                report!(
                    "case {}: {verdict}: measured {value}; bound {bound}{said}",
                    case.name
                );
            });
            if !reported {
                match ran {
                    Ran::Skipped => {
                        report!("case {}: skipped: {}", case.name, OneLine(test::message()))
                    }
                    // A case passes only after it recorded what it measured.
                    Ran::Passed | Ran::Failed => {
                        report!("case {}: failed: {}", case.name, OneLine(test::message()))
                    }
                }
            }
        }
    }
    let Tally {
        passed,
        failed,
        skipped,
    } = tally;
    report!("result {passed} passed, {failed} failed, {skipped} skipped");
    vga::write(format_args!(
        "The report is complete (also on COM1, 115200 8N1). The machine is halted."
    ));
    test::conclude("validate", tally)
}

/// What follows a measurement on a case's report line: the failure, for a
/// case that failed.
struct Said(Ran);

impl fmt::Display for Said {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Ran::Failed => write!(f, "; {}", OneLine(test::message())),
            Ran::Passed | Ran::Skipped => Ok(()),
        }
    }
}

/// A text on one line: each line break a space.
struct OneLine<T>(T);

impl<T: fmt::Display> fmt::Display for OneLine<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Flat<'a, 'b>(&'a mut fmt::Formatter<'b>);
        impl Write for Flat<'_, '_> {
            fn write_str(&mut self, s: &str) -> fmt::Result {
                for (i, part) in s.split('\n').enumerate() {
                    if i > 0 {
                        self.0.write_char(' ')?;
                    }
                    self.0.write_str(part)?;
                }
                Ok(())
            }
        }
        write!(Flat(f), "{}", self.0)
    }
}

/// What runs this kernel: the hypervisor CPUID names (leaf 40000000H,
/// present when CPUID.01H:ECX\[31\] is set), or bare metal.
struct Platform;

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if HardwareCpuid.cpuid(1, 0).ecx & (1 << 31) == 0 {
            return f.write_str("bare metal");
        }
        let leaf = HardwareCpuid.cpuid(0x4000_0000, 0);
        let mut signature = [0u8; 12];
        signature[..4].copy_from_slice(&leaf.ebx.to_le_bytes());
        signature[4..8].copy_from_slice(&leaf.ecx.to_le_bytes());
        signature[8..].copy_from_slice(&leaf.edx.to_le_bytes());
        match &signature {
            b"TCGTCGTCGTCG" => f.write_str("TCG"),
            b"KVMKVMKVM\0\0\0" => f.write_str("KVM"),
            _ => write!(f, "hypervisor \"{}\"", Ascii(&signature)),
        }
    }
}

/// Bytes as text: printable ASCII as is, NULs dropped, anything else `?`.
struct Ascii<'a>(&'a [u8]);

impl fmt::Display for Ascii<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for &b in self.0 {
            match b {
                0 => {}
                b' ' | b'!'..=b'~' if b != b'"' => f.write_char(b as char)?,
                _ => f.write_char('?')?,
            }
        }
        Ok(())
    }
}

/// The vendor, family, model and stepping (CPUID leaves 0 and 1, decoded
/// as SDM Vol. 2A's CPUID says: `pmu::detect::CpuSignature`), and the
/// brand string (8000_0002H-8000_0004H) where there is one.
fn cpu() {
    let leaf0 = HardwareCpuid.cpuid(0, 0);
    let mut vendor = [0u8; 12];
    vendor[..4].copy_from_slice(&leaf0.ebx.to_le_bytes());
    vendor[4..8].copy_from_slice(&leaf0.edx.to_le_bytes());
    vendor[8..].copy_from_slice(&leaf0.ecx.to_le_bytes());
    let s = CpuSignature::from_eax(HardwareCpuid.cpuid(1, 0).eax);
    report!(
        "cpu {} family {} model {} stepping {} ({:02X}_{:02X}H, CPUID.01H:EAX {:08X})",
        Ascii(trim(&vendor)),
        s.family,
        s.model,
        s.stepping,
        s.family,
        s.model,
        s.raw
    );
    if HardwareCpuid.cpuid(0x8000_0000, 0).eax >= 0x8000_0004 {
        let mut brand = [0u8; 48];
        for (i, leaf) in (0x8000_0002..=0x8000_0004).enumerate() {
            let r = HardwareCpuid.cpuid(leaf, 0);
            for (j, reg) in [r.eax, r.ebx, r.ecx, r.edx].into_iter().enumerate() {
                let at = i * 16 + j * 4;
                brand[at..at + 4].copy_from_slice(&reg.to_le_bytes());
            }
        }
        report!("brand {}", Ascii(trim(&brand)));
    }
}

/// `bytes` without the spaces and NULs around them.
fn trim(bytes: &[u8]) -> &[u8] {
    let blank = |b: &u8| *b == b' ' || *b == 0;
    let start = bytes.iter().position(|b| !blank(b)).unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !blank(b))
        .map_or(start, |e| e + 1);
    &bytes[start..end]
}

/// The largest leaves, then each PMU leaf of [`LEAVES`] that exists: its
/// four registers, or, for those all zero, its number on one line.
fn leaves() {
    let max = HardwareCpuid.cpuid(0, 0).eax;
    let max_extended = HardwareCpuid.cpuid(0x8000_0000, 0).eax;
    report!("cpuid max {max:08X} {max_extended:08X}");
    let exists = |leaf: u32| {
        if leaf >= 0x8000_0000 {
            max_extended >= 0x8000_0000 && leaf <= max_extended
        } else {
            leaf <= max
        }
    };
    let mut zero = Zero::default();
    for (leaf, subleaf) in LEAVES.into_iter().filter(|&(l, _)| exists(l)) {
        let r = HardwareCpuid.cpuid(leaf, subleaf);
        if r == CpuidResult::default() {
            zero.push(leaf, subleaf);
        } else {
            report!(
                "cpuid {leaf:08X}.{subleaf}: {:08X} {:08X} {:08X} {:08X}",
                r.eax,
                r.ebx,
                r.ecx,
                r.edx
            );
        }
    }
    if zero.len > 0 {
        report!("cpuid zero:{zero}");
    }
}

/// The leaves found all zero.
#[derive(Default)]
struct Zero {
    leaves: [(u32, u32); LEAVES.len()],
    len: usize,
}

impl Zero {
    fn push(&mut self, leaf: u32, subleaf: u32) {
        if let Some(slot) = self.leaves.get_mut(self.len) {
            *slot = (leaf, subleaf);
            self.len += 1;
        }
    }
}

impl fmt::Display for Zero {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (leaf, subleaf) in &self.leaves[..self.len] {
            write!(f, " {leaf:08X}.{subleaf}")?;
        }
        Ok(())
    }
}

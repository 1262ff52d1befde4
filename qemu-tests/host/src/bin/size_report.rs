//! `cargo size-report`: what the `pmu` crate adds to a kernel, measured.
//!
//! Builds the three footprint kernels (`qemu-tests/src/bin/footprint_*.rs`)
//! in release for `x86_64-unknown-none` and prints their section sizes, read
//! from the ELF section headers, and the differences:
//!
//! - `footprint_none`: the hobby kernel without the driver;
//! - `footprint_const`: counts one NetBurst event on the hardware backend,
//!   the event named at compile time with `pmu::netburst_event!`;
//! - `footprint_parse`: the same, the event string parsed at run time.
//!
//! `const - none` is what the crate adds to a counting-only kernel;
//! `parse - const` is what run-time parsing adds (parser and catalog). The
//! crate's own functions in `footprint_const` are listed from the symbol
//! table, so the driver's `.text` is also given without the kernel's
//! changes around it.

use std::path::Path;
use std::process::ExitCode;

use qemu_host::{TARGET, Workspace};

const KERNELS: [&str; 3] = ["footprint_none", "footprint_const", "footprint_parse"];
const SECTIONS: [&str; 4] = [".text", ".rodata", ".data", ".bss"];

fn main() -> ExitCode {
    match report() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("size-report: {e}");
            ExitCode::FAILURE
        }
    }
}

fn report() -> Result<(), String> {
    let ws = Workspace::new();
    let dir = ws.build_release(&KERNELS)?;
    let elves: Vec<Elf> = KERNELS
        .iter()
        .map(|k| Elf::read(&dir.join(k)))
        .collect::<Result<_, _>>()?;
    let sizes: Vec<[u64; 4]> = elves
        .iter()
        .map(|e| SECTIONS.map(|s| e.section_size(s)))
        .collect();
    println!(
        "size report: release kernels for {TARGET}, linked with qemu-tests/hobby/hobby.ld (bytes)"
    );
    println!(
        "{:<16} {:>7} {:>7} {:>7} {:>7}",
        "kernel", ".text", ".rodata", ".data", ".bss"
    );
    for (k, s) in KERNELS.iter().zip(&sizes) {
        println!("{k:<16} {:>7} {:>7} {:>7} {:>7}", s[0], s[1], s[2], s[3]);
    }
    let diff = |a: usize, b: usize| -> String {
        (0..3)
            .map(|i| {
                format!(
                    "{} {}",
                    SECTIONS[i],
                    sizes[a][i] as i64 - sizes[b][i] as i64
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "added by the crate to a counting-only kernel (const - none): {}",
        diff(1, 0)
    );
    println!(
        "added by parsing the event string at run time (parse - const): {}",
        diff(2, 1)
    );
    let pmu_text: Vec<(String, u64)> = elves[1].pmu_functions();
    let total: u64 = pmu_text.iter().map(|(_, s)| s).sum();
    println!(
        "pmu functions in footprint_const: {} in {} functions",
        total,
        pmu_text.len()
    );
    for (name, size) in &pmu_text {
        println!("  {size:>6}  {name}");
    }
    // The parser's own functions (its module is `parse`, so match the
    // function names, not the path).
    let parser = |e: &Elf| {
        const PARSER: [&str; 6] = [
            "parse",
            "from_str",
            "parse_number",
            "from_name",
            "from_name_bytes",
            "mask_index_bytes",
        ];
        e.pmu_functions()
            .iter()
            .filter(|(n, _)| PARSER.contains(&n.rsplit("::").next().unwrap_or("")))
            .count()
    };
    println!(
        "parser functions: {} in footprint_const, {} in footprint_parse",
        parser(&elves[1]),
        parser(&elves[2])
    );
    Ok(())
}

/// The parts of an ELF64 little-endian file the report needs.
struct Elf {
    bytes: Vec<u8>,
    /// (name, file offset, size, entry size) per section.
    sections: Vec<(String, u64, u64, u64)>,
}

impl Elf {
    fn read(path: &Path) -> Result<Elf, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        if bytes.get(..5) != Some(b"\x7fELF\x02") {
            return Err(format!("{}: not an ELF64 file", path.display()));
        }
        let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]) as u64;
        let (shoff, shentsize, shnum, shstrndx) =
            (le64(&bytes, 0x28), u16_at(0x3A), u16_at(0x3C), u16_at(0x3E));
        let header = |i: u64| (shoff + i * shentsize) as usize;
        let strtab = le64(&bytes, header(shstrndx) + 0x18);
        let mut sections = Vec::new();
        for i in 0..shnum {
            let h = header(i);
            let name = cstr(&bytes, (strtab + le32(&bytes, h)) as usize);
            sections.push((
                name,
                le64(&bytes, h + 0x18),
                le64(&bytes, h + 0x20),
                le64(&bytes, h + 0x38),
            ));
        }
        Ok(Elf { bytes, sections })
    }

    fn section(&self, name: &str) -> Option<&(String, u64, u64, u64)> {
        self.sections.iter().find(|s| s.0 == name)
    }

    fn section_size(&self, name: &str) -> u64 {
        self.section(name).map_or(0, |s| s.2)
    }

    /// Function symbols of the `pmu` crate (mangled names whose path starts
    /// with `pmu`, or whose impl type does), biggest first.
    fn pmu_functions(&self) -> Vec<(String, u64)> {
        let (Some(symtab), Some(strtab)) = (self.section(".symtab"), self.section(".strtab"))
        else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for i in 0..symtab.2 / symtab.3.max(1) {
            let s = (symtab.1 + i * symtab.3) as usize;
            let kind = self.bytes[s + 4] & 0xF;
            let size = le64(&self.bytes, s + 16);
            let name = cstr(&self.bytes, (strtab.1 + le32(&self.bytes, s)) as usize);
            // STT_FUNC
            if kind == 2 && size > 0 && (name.starts_with("_ZN3pmu") || name.contains("$LT$pmu.."))
            {
                out.push((demangle(&name), size));
            }
        }
        out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        out
    }
}

fn le32(b: &[u8], o: usize) -> u64 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) as u64
}

fn le64(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

fn cstr(b: &[u8], o: usize) -> String {
    let end = b[o..]
        .iter()
        .position(|&c| c == 0)
        .map_or(b.len(), |p| o + p);
    String::from_utf8_lossy(&b[o..end]).into_owned()
}

/// A readable form of a legacy-mangled Rust name: the path segments joined
/// with `::`, the hash dropped, the common escapes undone.
fn demangle(name: &str) -> String {
    let Some(mut rest) = name.strip_prefix("_ZN") else {
        return name.to_string();
    };
    let mut parts = Vec::new();
    while let Some(len_end) = rest.find(|c: char| !c.is_ascii_digit()) {
        let Ok(len) = rest[..len_end].parse::<usize>() else {
            break;
        };
        let part = &rest[len_end..len_end + len];
        rest = &rest[len_end + len..];
        if !(part.starts_with('h') && part.len() == 17) {
            parts.push(part.to_string());
        }
    }
    parts
        .join("::")
        .replace("$LT$", "<")
        .replace("$GT$", ">")
        .replace("$u20$", " ")
        .replace("$C$", ",")
        .replace("..", "::")
        .replace("$RF$", "&")
}

//! Every public trait of the crate, sealed or meant for users to implement:
//! the sources are read, each `pub trait` found must be listed here with
//! its kind, and a sealed one must say so in its declaration. A new public
//! trait fails this test until it is sealed or given a reason.

use std::path::Path;
use std::string::String;
use std::vec::Vec;

/// What a public trait is.
enum Kind {
    /// Sealed by [`super::Sealed`] among its supertraits.
    Sealed,
    /// Sealed through a supertrait that is sealed (listed here as such).
    Through(&'static str),
    /// Meant for users to implement, and why.
    Users(&'static str),
}

use Kind::{Sealed, Through, Users};

/// Each public trait: the file that declares it, its name, its kind.
const TRAITS: &[(&str, &str, Kind)] = &[
    (
        "access.rs",
        "MsrAccess",
        Users(
            "a software MSR backend: a model, a recorder, a kernel's lock around a model, a hypervisor's routing of a guest's accesses; its accesses cannot break memory safety, and the hardware backend does not implement it",
        ),
    ),
    ("access.rs", "MsrBackend", Sealed),
    (
        "access.rs",
        "PmcPmdAccess",
        Users("a software PMC/PMD backend (the Itanium model, a recorder), as MsrAccess"),
    ),
    ("access.rs", "PmcPmdBackend", Sealed),
    (
        "apic.rs",
        "LvtPerfCounterEntry",
        Users(
            "where a PMI handler unmasks the LVT entry: a kernel's own APIC type, a recorder in tests",
        ),
    ),
    (
        "apic.rs",
        "PmiApic",
        Users("a kernel's own local APIC type, through which a model's PMI is raised"),
    ),
    ("counter.rs", "State", Sealed),
    ("counter.rs", "Claimed", Through("State")),
    ("counter.rs", "Arch", Sealed),
    ("counter.rs", "Cascade", Through("Arch")),
    ("counter.rs", "Driver", Sealed),
    ("counter.rs", "DriverOf", Through("Driver")),
    ("counter.rs", "CanConfigure", Through("State")),
    ("counter.rs", "CanEnable", Through("Claimed")),
    ("counter.rs", "CanHalt", Through("Claimed")),
    ("counter.rs", "CanResume", Through("Claimed")),
    ("counter.rs", "CanCascade", Through("Claimed")),
    ("counter.rs", "Readable", Through("Claimed")),
    ("counter.rs", "CanRelease", Through("Claimed")),
    (
        "counter/owner.rs",
        "Owner",
        Users(
            "an owner type names one PMU: `pmu::owner!` implements it (an `unsafe` trait: its flag must be the type's own)",
        ),
    ),
    (
        "detect.rs",
        "Cpuid",
        Users(
            "a source of CPUID results: the instruction, a hypervisor's guest view, a table in tests",
        ),
    ),
    ("multiplex.rs", "Placement", Sealed),
    ("multiplex.rs", "PlaceOn", Through("Placement")),
    (
        "sampling.rs",
        "Sink",
        Users("the kernel's consumer of the samples a PMI handler produces"),
    ),
    ("sampling.rs", "Payload", Sealed),
    ("arch/ia32/ds.rs", "RecordSlot", Sealed),
    ("arch/seam.rs", "Architecture", Sealed),
    ("arch/seam.rs", "LocalPmu", Sealed),
    ("arch/seam.rs", "Driven", Through("LocalPmu")),
    ("arch/seam/switch.rs", "Switch", Through("Driver")),
    ("model/archperf/tables.rs", "Encoding", Sealed),
    ("model/itanium/tables.rs", "Tables", Sealed),
];

/// A public trait declaration found in the sources: its file (relative to
/// `src/`), name, and supertraits as written.
struct Found {
    file: String,
    name: String,
    supertraits: String,
}

/// Every `pub trait` and `pub unsafe trait` of the library's sources, but
/// the seal itself and test code.
fn found() -> Vec<Found> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    collect(&src, &mut files);
    let mut out = Vec::new();
    for path in files {
        let file = path
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let test_code = file.ends_with("tests.rs")
            || file.contains("/tests/")
            || file.starts_with("tests/")
            || file == "testing.rs"
            || file == "sealed.rs";
        if test_code {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (at, _) in text.match_indices("trait ") {
            let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
            let before = text[line_start..at].trim();
            if before != "pub" && before != "pub unsafe" {
                continue;
            }
            let rest = &text[at + "trait ".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.push(Found {
                supertraits: supertraits(&rest[name.len()..]),
                file: file.clone(),
                name,
            });
        }
    }
    out
}

fn collect(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// The supertrait list of a declaration, `after` following the trait's
/// name: past its generic parameters, from a `:` to the body or `where`.
fn supertraits(after: &str) -> String {
    let mut depth = 0i32;
    let mut start = None;
    for (i, c) in after.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            ':' if depth == 0 && start.is_none() => start = Some(i + 1),
            '{' | ';' if depth == 0 => return start.map_or(String::new(), |s| after[s..i].into()),
            _ => {}
        }
        if depth == 0 && after[i..].starts_with("where") {
            return start.map_or(String::new(), |s| after[s..i].into());
        }
    }
    String::new()
}

/// Whether `list` (a supertrait list) names `name` as a whole word.
fn names(list: &str, name: &str) -> bool {
    list.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|w| w == name)
}

#[test]
fn every_public_trait_is_sealed_or_meant_for_users() {
    let found = found();
    let mut wrong = Vec::new();
    for f in &found {
        match TRAITS
            .iter()
            .find(|(file, name, _)| *file == f.file && *name == f.name)
        {
            None => wrong.push(format!(
                "{} ({}): a public trait not listed here: seal it (`: crate::sealed::Sealed`) or list it as meant for users, with the reason",
                f.name, f.file
            )),
            Some((_, _, Sealed)) if !names(&f.supertraits, "Sealed") => wrong.push(format!(
                "{}: listed as sealed, but `Sealed` is not among its supertraits ({:?})",
                f.name, f.supertraits
            )),
            Some((_, _, Through(t))) => {
                let sealed = TRAITS
                    .iter()
                    .any(|(_, n, k)| n == t && matches!(k, Sealed | Through(_)));
                if !names(&f.supertraits, t) || !sealed {
                    wrong.push(format!(
                        "{}: listed as sealed through `{t}`, which is not a sealed supertrait of it ({:?})",
                        f.name, f.supertraits
                    ));
                }
            }
            Some((_, _, Users(""))) => {
                wrong.push(format!("{}: meant for users, but no reason", f.name))
            }
            Some(_) => {}
        }
    }
    for (file, name, _) in TRAITS {
        if !found.iter().any(|f| f.file == *file && f.name == *name) {
            wrong.push(format!("{name} ({file}): listed, but not declared there"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The scan finds what it should: the list would otherwise pass on an
/// empty scan.
#[test]
fn the_scan_reads_declarations() {
    let found = found();
    assert_eq!(found.len(), TRAITS.len());
    let driver = found.iter().find(|f| f.name == "Driver").unwrap();
    assert!(names(&driver.supertraits, "Sealed"));
    assert!(
        !names(&driver.supertraits, "Arch"),
        "{:?}",
        driver.supertraits
    );
    assert_eq!(
        supertraits("<const FROM: u8, const TO: u8>: Arch {}").trim(),
        "Arch"
    );
    assert_eq!(supertraits(" {").trim(), "");
    assert_eq!(supertraits("<P = ()> {").trim(), "");
}

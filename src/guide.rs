//! The guide: how to use the crate, page by page, beyond the README's first
//! steps. Each page is a module with no items, so rustdoc renders it (and
//! docs.rs shows it) beside the API it describes, and its examples run as
//! doc tests on the models (with the `model` feature, as the repository's
//! `cargo test` has it). The same pages are plain Markdown in
//! `src/guide/` of the repository.
//!
//! | page | what it covers |
//! |---|---|
//! | [`counters`] | typestate handles, their register traffic beside Linux's, the overflow handler, sampling and its conservation rule |
//! | [`ownership`] | one owner per physical PMU: the one `unsafe` promise, owners that cannot be forged, memory the CPU writes |
//! | [`smp`] | many CPUs: a driver per logical processor, what a package shares and how, which CPUs share a PMU (`pmu::topology`) |
//! | [`netburst`] | NetBurst's PEBS and µop tagging, and the exact event scheduler |
//! | [`itanium`] | the Itanium driver: PMC/PMD, freeze and overflow, EAR and branch-trace sampling, validation |
//! | [`archperf`] | Intel's architectural PMU (every Core and Atom since 2006) |
//! | [`amd`] | AMD's core PMU: the legacy counters, PerfCtrExtCore, PerfMonV2; detection's read-back probe, late PMIs |
//! | [`groups`] | counter groups and multiplexing |
//! | [`profiling`] | call chains from the PMI, folded stacks and flame graphs |
//! | [`kernel`] | using the crate in your kernel: dependencies, the hobby kernel library, the runner, your own boot and IDT |
//! | [`tasks`] | counting per task: the scheduler's switch hook, migration, what a switch costs |
//! | [`hypervisor`] | using it in a hypervisor: exit handling, the world switch, the threat model |
//! | [`testing`] | `cargo test`'s parts, writing a QEMU test |
//! | [`platforms`] | what runs where: host, QEMU (TCG and KVM), models, hardware; the validation run on your machine (`cargo validate`, the bootable image) |
//! | [`performance`] | measured figures: the PMI path, scheduling, footprint, test times, with date and machine |
//! | [`layout`] | the repository's files and layers, and the dependencies |
//! | [`packaging`] | the four published crates, and how each is tested unpacked |
//!
//! Sources: the Intel SDM Vol. 3B chapters 18-19 (NetBurst: 18.15-18.16,
//! Tables 18-29, 18-30, 18-63; events: Tables 19-28 to 19-34; the
//! architectural PMU: "Architectural Performance Monitoring"), the Intel
//! Itanium Architecture SDM Vol. 2 7.2 and Vol. 3 (`mov` indirect), the
//! AMD64 APM Vol. 2 13.2 and the family 17h/19h PPRs, and, for facts the
//! manuals leave open, Linux's `p4.c`, `arch/x86/events/intel`,
//! `arch/x86/events/amd` and perfmon drivers and libpfm's tables. Where sources disagree the module
//! docs say which one the code follows and why.

macro_rules! pages {
    ($($name:ident),* $(,)?) => {$(
        // The pages' examples run on the models: doc tests where the `model`
        // feature is on (the repository's `cargo test`), as the README's.
        #[cfg_attr(
            any(not(doctest), feature = "model"),
            doc = include_str!(concat!("guide/", stringify!($name), ".md"))
        )]
        #[cfg_attr(all(doctest, not(feature = "model")), doc = "A guide page.")]
        // A page may show a whole `build.rs` or `main.rs`, `fn main` included.
        #[allow(clippy::needless_doctest_main)]
        pub mod $name {}
    )*
        /// Every page, in the order of the index above.
        #[cfg(test)]
        const PAGES: &[&str] = &[$(stringify!($name)),*];
    };
}

pages!(
    counters,
    ownership,
    smp,
    netburst,
    itanium,
    archperf,
    amd,
    groups,
    profiling,
    kernel,
    tasks,
    hypervisor,
    testing,
    platforms,
    performance,
    layout,
    packaging,
);

#[cfg(test)]
mod tests {
    use super::PAGES;

    /// The README stays a front door (at most 250 lines) and
    /// links every guide page, each of which exists and is listed here.
    #[test]
    fn readme_is_a_front_door_to_every_page() {
        let readme = include_str!("../README.md");
        assert!(
            readme.lines().count() <= 250,
            "README.md has {} lines",
            readme.lines().count()
        );
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/guide");
        let mut on_disk: std::vec::Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.unwrap().file_name().into_string().ok())
            .filter_map(|n| n.strip_suffix(".md").map(str::to_owned))
            .collect();
        on_disk.sort();
        let mut listed: std::vec::Vec<_> = PAGES.iter().map(|p| p.to_string()).collect();
        listed.sort();
        assert_eq!(on_disk, listed, "src/guide/*.md and the pages listed");
        for page in PAGES {
            let link = format!("](src/guide/{page}.md)");
            assert!(readme.contains(&link), "README links no {page}");
            assert!(
                include_str!("guide.rs").contains(&format!("[`{page}`]")),
                "guide index lacks {page}"
            );
        }
    }
}

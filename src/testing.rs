//! Test support shared by the unit tests (compiled for tests only).

/// A fixed-seed xorshift64 generator: `rnd(m)` is a number below `m`
/// (Marsaglia's shifts 13, 7, 17), the same sequence on every run.
pub(crate) fn rng(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |m| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % m
    }
}

/// A NetBurst package of its own, for a test on a model.
pub(crate) fn netburst_pmu() -> crate::arch::netburst::NetBurstPmu {
    // SAFETY: each test's model is a package of its own, and this value is
    // the only one that names it.
    unsafe { crate::arch::netburst::NetBurstPmu::new() }
}

/// An Itanium processor's PMU of its own, for a test on a model.
pub(crate) fn itanium_pmu() -> crate::arch::itanium::ItaniumPmu {
    // SAFETY: each test's model is a processor of its own, and this value is
    // the only one that names it.
    unsafe { crate::arch::itanium::ItaniumPmu::new() }
}

/// A logical processor's architectural PMU of its own, for a test on a
/// model.
pub(crate) fn archperf_pmu() -> crate::arch::archperf::ArchPerfPmu {
    // SAFETY: each test's model is a logical processor of its own, and this
    // value is the only one that names it.
    unsafe { crate::arch::archperf::ArchPerfPmu::new() }
}

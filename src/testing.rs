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

//! What the test kernels of this package share (each kernel is a binary of
//! `src/bin`, built for `x86_64-unknown-none` on the `hobby` kernel
//! library):
//!
//! | module | job |
//! |---|---|
//! | [`real`] | the real-PMU cases of every architecture, generic over the bench they run on (a real PMU or a model), and their registry: what the `archperf`, `amd` and `validate` kernels run |
//!
//! (`src/footprint.rs` is not a module of this library: it is the body of
//! the footprint kernels, included by each, so that nothing here is linked
//! into the kernels `cargo size-report` measures.)
#![no_std]

pub mod real;

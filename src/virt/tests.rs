//! Properties of the guest PMUs of both x86 vendors together, and the
//! fuzz driver the architectural PMU's and AMD's isolation tests use.

pub(crate) mod fuzz;
mod noninterference;

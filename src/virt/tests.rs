//! Properties of the guest PMUs of both x86 vendors together, and the
//! fuzz driver the architectural PMU's and AMD's isolation tests use, and
//! the check their pass-through maps share.

pub(crate) mod fuzz;
mod noninterference;
pub(crate) mod passthrough;

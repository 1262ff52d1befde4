//! Properties of the guest PMUs of both x86 vendors together, and the
//! fuzz driver both architectures' isolation tests use.

pub(crate) mod fuzz;
mod noninterference;

//! Properties of the guest PMUs of both x86 vendors together.

mod noninterference;

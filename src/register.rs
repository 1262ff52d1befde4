//! How the crate declares registers: a foundation below every other module
//! that lays out register images (the architectures' layouts in
//! [`crate::arch`], the local APIC's in [`crate::apic`], the CPUID leaves
//! and the MSRs detection reads in [`crate::detect`]).
//!
//! * [`Field`]: a bit field of a 64-bit register, a position and a width;
//! * `register!` (crate-internal): declares a typed register image from a
//!   list of fields, generating its accessors, so no register image is
//!   shifted or masked by hand anywhere else (the Itanium PMC images add
//!   their reserved-bit checks on top, with the Itanium layouts'
//!   `pmc_register!`);
//! * `set_operations!` (crate-internal): `union`, `intersection` and
//!   `difference`, one name each on every set of counters or register
//!   numbers of every architecture.
//!
//! # Examples
//!
//! A layout's fields are [`Field`]s, with `const` accessors:
//!
//! ```
//! use pmu::arch::itanium::{CounterLayout, Generation};
//!
//! // The event select of an Itanium 2 counter configuration: bits 15:8.
//! let es = CounterLayout::of(Generation::Itanium2).es;
//! assert_eq!((es.lsb(), es.bits(), es.msb()), (8, 8, 15));
//! assert_eq!(es.set(0, 0x12), 0x12 << 8);
//! assert_eq!(es.get(0x1234), 0x12);
//! ```

mod field;
mod set;

pub use field::Field;
pub(crate) use field::register;
pub(crate) use set::set_operations;

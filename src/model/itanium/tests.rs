//! Unit tests of the Itanium model, driven through its PMC/PMD accessors and
//! the `MsrAccess` adapter.

mod btb;
mod counting;
mod ear;
mod helpers;
mod msr;
mod overflow;
mod registers;

//! Unit tests of the NetBurst model, driven at the MSR level.

mod counting;
mod helpers;
mod overflow;
mod registers;
mod tagging;

//! Unit tests of the architectural-PMU model, driven at the MSR level with
//! the SDM's addresses and bit positions written out (not the model's
//! constants).

mod counting;
mod cpuid;
mod helpers;
mod lbr;
mod overflow;
mod pebs;
mod registers;

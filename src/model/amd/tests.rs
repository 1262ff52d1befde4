//! The AMD model against the APM's and PPRs' rules, written out here.

mod counting;
mod cpuid;
mod helpers;
mod overflow;
mod registers;

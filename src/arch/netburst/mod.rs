//! Intel NetBurst (Pentium 4, Xeon, Pentium D) performance monitoring.

pub mod cccr;
pub mod escr;
pub mod msrs;

pub use cccr::{ActiveThread, CccrValue, EscrSelect, ExtendedCascade, Threshold};
pub use escr::{EscrValue, EventMask, EventSelect, ReservedBits, TagValue, ThreadCpl};
pub use msrs::{Assignment, Block, Cccr, Counter, CounterSet, Escr, Pair};

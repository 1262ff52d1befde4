//! Intel NetBurst (Pentium 4, Xeon, Pentium D) performance monitoring.

pub mod cccr;
pub mod escr;
pub mod events;
pub mod msrs;
pub mod parse;
pub mod tagging;
pub mod thread;

pub use cccr::{ActiveThread, CccrValue, EscrSelect, ExtendedCascade, Threshold};
pub use escr::{EscrValue, EventMask, EventSelect, ReservedBits, TagValue, ThreadCpl};
pub use events::{
    Constraint, Counting, Event, EventInfo, MaskInfo, MaskKind, ReplayMetric, Specificity, Tagging,
};
pub use msrs::{Assignment, Block, Cccr, Counter, CounterSet, Escr, Pair};
pub use parse::{EventSpec, Modifier, ParseError, ParseErrorKind, Pmu};
pub use tagging::{
    ExecUpstream, ExecutionTagging, FrontEndTagging, MsrWrite, MsrWrites, ReplayTagging,
    TaggingError,
};
pub use thread::{CplState, LogicalProcessor, Privilege};

//! Per-architecture register layouts, tables and encoders.

pub mod itanium;
pub mod netburst;

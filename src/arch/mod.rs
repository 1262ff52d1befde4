//! Per-architecture register layouts, tables and encoders.

pub mod netburst;

//! Register-level software models of PMUs: test instruments.

pub mod netburst;

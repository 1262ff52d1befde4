//! Per-architecture register layouts, tables and encoders, and the field
//! type their layouts are declared with.

mod field;
pub mod itanium;
pub mod netburst;

pub use field::Field;

//! Per-architecture register layouts, tables and encoders, and the field
//! type their layouts are declared with.
//!
//! # Examples
//!
//! Register images are built from typed fields (SDM Figure 18-45):
//!
//! ```
//! use pmu::arch::netburst::{ActiveThread, CccrValue};
//!
//! let cccr = CccrValue::from_bits_truncate(0)
//!     .with_enable(true)
//!     .with_active_thread(ActiveThread::Any)
//!     .with_ovf_pmi_t0(true);
//! assert_eq!(cccr.bits(), 1 << 12 | 3 << 16 | 1 << 26);
//! ```

pub mod archperf;
mod field;
pub mod itanium;
pub mod netburst;

pub use field::Field;

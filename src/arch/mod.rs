//! The architectures: per architecture its register layouts, tables and
//! encoders, its driver and its PMI handler, each behind the one seam the
//! rest of the crate and a kernel meet it at ([`Architecture`], [`Driven`],
//! [`handle_pmi`]); and the field type their layouts are declared with.
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
pub mod ia32;
pub mod itanium;
pub mod netburst;
mod seam;
mod set;

pub use field::Field;
pub(crate) use field::register;
pub use seam::{Architecture, Driven, LocalPmu, handle_pmi};
pub(crate) use set::set_operations;

#[cfg(test)]
mod tests {
    /// The PMI path sits below the drivers and takes no lock: no
    /// architecture's `pmi.rs` imports its driver module (whose claims and
    /// PEBS images live behind a lock in the physical PMU's value), nor a
    /// lock.
    #[test]
    fn the_pmi_modules_import_no_driver_and_no_lock() {
        let modules = [
            ("netburst", include_str!("netburst/pmi.rs")),
            ("itanium", include_str!("itanium/pmi.rs")),
            ("archperf", include_str!("archperf/pmi.rs")),
        ];
        for (arch, source) in modules {
            for line in source.lines().map(str::trim_start) {
                let import = line.starts_with("use ") || line.starts_with("pub use ");
                assert!(
                    !(import && line.contains("driver")),
                    "{arch}/pmi.rs: {line}"
                );
                assert!(
                    !line.contains("Mutex") && !line.contains("spin::"),
                    "{arch}/pmi.rs: {line}"
                );
            }
        }
    }
}

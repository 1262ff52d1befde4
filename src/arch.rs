//! The architectures: per architecture its register layouts (declared with
//! [`crate::register`]'s fields), tables and encoders, its driver and its
//! PMI handler, each behind the one seam the rest of the crate and a kernel
//! meet it at ([`Architecture`], [`Driven`], [`handle_pmi`]).
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

pub mod amd;
pub mod archperf;
mod event_syntax;
pub mod ia32;
pub mod itanium;
pub mod netburst;
mod seam;

pub use seam::{Architecture, Driven, LocalPmu, handle_pmi};
pub use seam::{
    Bank, BankError, Positions, Quiesce, Saved, Slot, Switch, arm_bank, peeked, switch_bank,
};
pub(crate) use seam::{release_all, reserve};

#[cfg(test)]
mod tests {
    use crate::arch::{archperf, itanium, netburst};

    /// The three architectures' sets answer the same operations alike.
    #[test]
    fn every_architecture_names_the_operations_alike() {
        let (a, b) = (0b0110u32, 0b0011u32);
        let nb = netburst::CounterSet::from_bits_truncate;
        assert_eq!(nb(a).union(nb(b)).bits(), 0b0111);
        assert_eq!(nb(a).intersection(nb(b)).bits(), 0b0010);
        assert_eq!(nb(a).difference(nb(b)).bits(), 0b0100);
        let ap = archperf::CounterSet::from_bits_truncate;
        let (a64, b64) = (u64::from(a), u64::from(b));
        assert_eq!(ap(a64).union(ap(b64)).bits(), 0b0111);
        assert_eq!(ap(a64).intersection(ap(b64)).bits(), 0b0010);
        assert_eq!(ap(a64).difference(ap(b64)).bits(), 0b0100);
        let it = itanium::CounterSet;
        assert_eq!(it(a64).union(it(b64)).bits(), 0b0111);
        assert_eq!(it(a64).intersection(it(b64)).bits(), 0b0010);
        assert_eq!(it(a64).difference(it(b64)).bits(), 0b0100);
        let r = itanium::RegSet::range(4, 7).difference(itanium::RegSet::single(5));
        assert_eq!(r.bits(), 0b1101_0000);
    }

    /// The PMI path sits below the drivers and takes no lock: no
    /// architecture's `pmi.rs` imports its driver module (whose claims and
    /// PEBS images live behind a lock in the physical PMU's value), nor a
    /// lock.
    #[test]
    fn the_pmi_modules_import_no_driver_and_no_lock() {
        let modules = [
            ("netburst", include_str!("arch/netburst/pmi.rs")),
            ("itanium", include_str!("arch/itanium/pmi.rs")),
            ("archperf", include_str!("arch/archperf/pmi.rs")),
            ("amd", include_str!("arch/amd/pmi.rs")),
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

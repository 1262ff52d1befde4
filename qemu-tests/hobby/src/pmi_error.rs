//! What a kernel knows when a model PMI goes wrong, said as it is known.
//!
//! [`crate::pmi::inject`] and the kernels that deliver model PMIs
//! themselves see a PMI fail in four ways: the LVT performance-counter
//! entry was masked when the model raised it, the entry held a delivery a
//! PMI cannot use, the PMI was sent but the entry stayed masked (so the
//! handler either never ran or ran without unmasking it), or the
//! handler's own count moved by other than one. [`PmiError`] carries what
//! was observed, and its message says only that: a masked entry that
//! still holds its reset value was never programmed (the firmware leaves
//! it masked, and no handler ran to unmask it); one masked after a
//! handler unmasked it was masked by something since.
//!
//! The messages are pure functions of the observations, compiled on every
//! target, so the host tests their text (`tests/pmi_error.rs`).

use core::fmt;

use pmu::apic::{LvtPerfCounter, PmiDelivery};

/// How long every bounded wait of [`crate::pmi`] waits at most, in TSC
/// cycles: 2^32, about 1 s at 4 GHz and 4 s at 1 GHz. An interrupt comes at
/// the first instruction boundary where it can under TCG, and within a few
/// VM exits under KVM (about 1 ms on a nested host that emulates the
/// guest); the bound only turns an interrupt that never comes into a
/// failure instead of a hang, and is spent only then.
pub const WAIT_CYCLES: u64 = 1 << 32;

/// How long a wait for a PMI's handler lasted before it gave up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waited {
    /// This many TSC cycles: [`WAIT_CYCLES`] for the waits of
    /// [`crate::pmi`].
    Cycles(u64),
    /// This many reads of the entry (a kernel's own loop).
    Polls(u64),
}

impl fmt::Display for Waited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Waited::Cycles(n) if n.is_power_of_two() && n > 1 << 16 => {
                write!(f, "2^{} TSC cycles", n.trailing_zeros())
            }
            Waited::Cycles(n) => write!(f, "{n} TSC cycles"),
            Waited::Polls(n) => write!(f, "{n} polls"),
        }
    }
}

/// Why a model PMI was not delivered, or not seen handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PmiError {
    /// The model raised PMI number `handled + 1` but the LVT entry was
    /// masked, so the APIC delivered nothing; the handlers of the
    /// `handled` PMIs before it (in the same run of deliveries) had
    /// unmasked the entry.
    Masked {
        /// The entry, as read when the PMI came.
        entry: LvtPerfCounter,
        /// PMIs delivered and handled before it.
        handled: u64,
    },
    /// The LVT entry holds a delivery a PMI cannot use: a mode other than
    /// fixed or NMI, or a fixed vector below 16.
    Invalid {
        /// The entry.
        entry: LvtPerfCounter,
    },
    /// PMI number `pmi` was sent as fixed vector `vector` (`None`: as an
    /// NMI), and the entry stayed masked for the whole bounded wait: the
    /// handler did not run, or ran without unmasking the entry.
    NotHandled {
        /// The vector it was sent as; `None` for an NMI.
        vector: Option<u8>,
        /// Its number, from 1.
        pmi: u64,
        /// How long the wait lasted.
        waited: Waited,
    },
    /// PMI number `pmi` was sent once, and the handler's own count moved
    /// by `runs` (not 1) within the bounded wait.
    Runs {
        /// Its number, from 1.
        pmi: u64,
        /// How far the handler's count moved.
        runs: u64,
        /// How long the wait lasted.
        waited: Waited,
    },
}

/// The error of [`crate::pmi::inject`] (its `Masked`, `Invalid` and
/// `NotHandled`).
pub type InjectError = PmiError;

/// An LVT performance-counter entry as the messages show it: its value,
/// what it delivers, and its mask.
struct Entry(LvtPerfCounter);

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = self.0;
        write!(f, "{:#x}: ", e.bits())?;
        match e.delivery() {
            Some(PmiDelivery::Fixed(v)) => write!(f, "vector {:#x}", v.get())?,
            Some(PmiDelivery::Nmi) => f.write_str("NMI")?,
            None if e.delivery_mode() == 0 => write!(f, "vector {:#x}, below 16", e.vector_bits())?,
            None => write!(f, "delivery mode {:03b}", e.delivery_mode())?,
        }
        f.write_str(if e.is_masked() {
            ", masked"
        } else {
            ", unmasked"
        })
    }
}

/// How a PMI was sent (a fixed vector, or `None`: an NMI), as the
/// messages say it.
struct Sent(Option<u8>);

impl fmt::Display for Sent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(v) => write!(f, "as vector {v:#x}"),
            None => f.write_str("as an NMI"),
        }
    }
}

impl fmt::Display for PmiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PmiError::Masked { entry, handled: 0 } if entry == LvtPerfCounter::RESET => write!(
                f,
                "PMI 1 not delivered: the LVT performance-counter entry is masked and holds its reset value ({}): it was never programmed (the firmware leaves it masked); program it with set_perf_counter_entry",
                Entry(entry)
            ),
            PmiError::Masked { entry, handled: 0 } => write!(
                f,
                "PMI 1 not delivered: the LVT performance-counter entry is masked ({}): it was programmed masked, or the handler of an earlier PMI left it masked; unmask it with set_perf_counter_entry",
                Entry(entry)
            ),
            PmiError::Masked { entry, handled } => write!(
                f,
                "PMI {} not delivered: the LVT performance-counter entry is masked ({}), though PMI {handled}'s handler had unmasked it: something masked it since",
                handled + 1,
                Entry(entry)
            ),
            PmiError::Invalid { entry } => write!(
                f,
                "PMI not delivered: the LVT performance-counter entry ({}) holds a delivery a PMI cannot use (fixed with a vector from 16 to 255, or NMI); program it with set_perf_counter_entry",
                Entry(entry)
            ),
            PmiError::NotHandled {
                vector,
                pmi,
                waited,
            } => write!(
                f,
                "PMI {pmi} was sent {}, but the LVT entry stayed masked for {waited}: its handler did not run, or ran and left the entry masked",
                Sent(vector)
            ),
            PmiError::Runs {
                pmi,
                runs: 0,
                waited,
            } => write!(
                f,
                "PMI {pmi} was sent, but its handler did not run within {waited}"
            ),
            PmiError::Runs { pmi, runs, waited } => write!(
                f,
                "PMI {pmi} was sent once, but its handler ran {runs} times within {waited}"
            ),
        }
    }
}

impl core::error::Error for PmiError {}

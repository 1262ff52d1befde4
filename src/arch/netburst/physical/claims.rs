//! The claims protocol of one NetBurst package: which counters and ESCRs
//! are claimed, and whether the PMU has been reset for its live drivers.
//! The two logical processors of a package share its 18 counters, 18 CCCRs
//! and 45 ESCRs (SDM 18.16), so each CPU's driver claims through here, with
//! atomic read-modify-writes: two CPUs claim at once without a lock, and a
//! claim that loses is refused, never shared.
//!
//! The file depends on nothing of the crate but `super::sync` (the atomics),
//! so that `tests/loom.rs` compiles this very file against loom's atomics
//! and model-checks every interleaving of two drivers joining, claiming,
//! releasing and leaving.

use super::sync::{AtomicU32, AtomicU64, Ordering, spin_loop};

/// `drivers` bit 31: the PMU has been reset for the live drivers.
const READY: u32 = 1 << 31;

/// The package-wide claims (see the module documentation). All zero bits:
/// nothing claimed, no driver.
#[derive(Debug)]
pub(crate) struct Claims {
    /// Claimed counters, bit n for counter n.
    pub(crate) counters: AtomicU32,
    /// Claimed ESCRs, bit n for the ESCR of index n.
    pub(crate) escrs: AtomicU64,
    /// Live drivers (bits 30:0) and [`READY`].
    pub(crate) drivers: AtomicU32,
}

/// What [`Claims::join`] tells a new driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Joined {
    /// The first live driver: it resets the PMU, then calls
    /// [`Claims::ready`] (or [`Claims::leave`] if the reset failed).
    First,
    /// The PMU is reset and other drivers are live.
    Ready,
}

/// Why [`Claims::claim`] refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The counter is claimed.
    Counter,
    /// The ESCR is claimed.
    Escr,
}

impl Claims {
    /// A driver of the package is taken. The first one of a package
    /// without live drivers resets the PMU; the others wait until it has.
    pub(crate) fn join(&self) -> Joined {
        loop {
            let s = self.drivers.load(Ordering::Acquire);
            if s == 0 {
                if self
                    .drivers
                    .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    return Joined::First;
                }
            } else if s & READY != 0 {
                if self
                    .drivers
                    .compare_exchange(s, s + 1, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    return Joined::Ready;
                }
            } else {
                spin_loop();
            }
        }
    }

    /// The first driver has reset the PMU.
    pub(crate) fn ready(&self) {
        self.drivers.fetch_or(READY, Ordering::AcqRel);
    }

    /// A driver is given back (or its take failed): the last one leaves the
    /// package to be reset again by the next.
    pub(crate) fn leave(&self) {
        loop {
            let s = self.drivers.load(Ordering::Acquire);
            let next = if s & !READY <= 1 { 0 } else { s - 1 };
            if self
                .drivers
                .compare_exchange(s, next, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return;
            }
        }
    }

    /// Claims the counter of bit `counter` and the ESCR of bit `escr` for
    /// one driver: both or neither.
    pub(crate) fn claim(&self, counter: u32, escr: u64) -> Result<(), Refused> {
        if self.counters.fetch_or(counter, Ordering::AcqRel) & counter != 0 {
            return Err(Refused::Counter);
        }
        if self.escrs.fetch_or(escr, Ordering::AcqRel) & escr != 0 {
            self.counters.fetch_and(!counter, Ordering::AcqRel);
            return Err(Refused::Escr);
        }
        Ok(())
    }

    /// Gives back what [`Claims::claim`] took (`escr` 0: none).
    pub(crate) fn release(&self, counter: u32, escr: u64) {
        if escr != 0 {
            self.escrs.fetch_and(!escr, Ordering::AcqRel);
        }
        self.counters.fetch_and(!counter, Ordering::AcqRel);
    }

    /// The counters claimed by every driver of the package, as bits.
    pub(crate) fn counters(&self) -> u32 {
        self.counters.load(Ordering::Acquire)
    }

    /// The ESCRs claimed by every driver of the package, as bits.
    pub(crate) fn escrs(&self) -> u64 {
        self.escrs.load(Ordering::Acquire)
    }
}

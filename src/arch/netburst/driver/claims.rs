//! What the drivers of one NetBurst package share: which counters and ESCRs
//! are claimed, whether the PMU has been reset, and the package-wide PEBS
//! MSRs. The two logical processors of a package share its 18 counters,
//! 18 CCCRs and 45 ESCRs (SDM 18.16), so each CPU's driver claims through
//! here: counters and ESCRs with atomic read-modify-writes (two CPUs claim
//! at once without a lock; a claim that loses is refused, never shared),
//! `MSR_PEBS_ENABLE`/`MSR_PEBS_MATRIX_VERT` under a spin lock, held only
//! while a driver (never a PMI handler) computes and writes them.
//!
//! It lives in the package's [`PmiState`](super::super::pmi::PmiState),
//! which the drivers and the PMI handlers of the package share.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::ConfigError;
use super::package::PebsRegisters;
use crate::arch::netburst::msrs::{Counter, CounterSet, Escr, EscrSet};

/// `drivers` bit 31: the PMU has been reset for the live drivers.
const READY: u32 = 1 << 31;

/// The package-wide claims (see the module documentation).
#[derive(Debug)]
pub(crate) struct Claims {
    counters: AtomicU32,
    escrs: AtomicU64,
    /// Live drivers (bits 30:0) and [`READY`].
    drivers: AtomicU32,
    pebs: spin::Mutex<PebsRegisters>,
}

/// What [`Claims::join`] tells a new driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Joined {
    /// The first live driver: it resets the PMU, then calls
    /// [`Claims::ready`].
    First,
    /// The PMU is reset and other drivers are live.
    Ready,
}

impl Claims {
    /// Nothing claimed, no driver (all zero bits).
    pub(crate) const fn new() -> Claims {
        Claims {
            counters: AtomicU32::new(0),
            escrs: AtomicU64::new(0),
            drivers: AtomicU32::new(0),
            pebs: spin::Mutex::new(PebsRegisters::new()),
        }
    }

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
                core::hint::spin_loop();
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

    /// Claims counter `c` and ESCR `e` for one driver, both or neither.
    pub(crate) fn claim(&self, c: Counter, e: Escr) -> Result<(), ConfigError> {
        let counter = CounterSet::EMPTY.with(c).bits();
        if self.counters.fetch_or(counter, Ordering::AcqRel) & counter != 0 {
            return Err(ConfigError::CounterClaimed(c));
        }
        let escr = EscrSet::EMPTY.with(e).bits();
        if self.escrs.fetch_or(escr, Ordering::AcqRel) & escr != 0 {
            self.counters.fetch_and(!counter, Ordering::AcqRel);
            return Err(ConfigError::EscrBusy { escr: e });
        }
        Ok(())
    }

    /// Gives back what [`Claims::claim`] took.
    pub(crate) fn release(&self, c: Counter, e: Option<Escr>) {
        if let Some(e) = e {
            self.escrs
                .fetch_and(!EscrSet::EMPTY.with(e).bits(), Ordering::AcqRel);
        }
        self.counters
            .fetch_and(!CounterSet::EMPTY.with(c).bits(), Ordering::AcqRel);
    }

    /// The counters claimed by every driver of the package.
    pub(crate) fn counters(&self) -> CounterSet {
        CounterSet::from_bits_truncate(self.counters.load(Ordering::Acquire))
    }

    /// The ESCRs claimed by every driver of the package.
    pub(crate) fn escrs(&self) -> EscrSet {
        EscrSet::from_bits_truncate(self.escrs.load(Ordering::Acquire))
    }

    /// The package's PEBS MSR images, for one driver at a time (never from
    /// a PMI handler).
    pub(crate) fn pebs(&self) -> spin::MutexGuard<'_, PebsRegisters> {
        self.pebs.lock()
    }
}

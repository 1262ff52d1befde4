//! The physical PMU of one package (documented on [`NetBurstPmu`]).

use core::sync::atomic::AtomicU8;

use super::msrs::{CounterSet, EscrSet};
use super::pmi::PmiState;
use super::thread::LogicalProcessor;

/// The atomics `claims.rs` is written against (`tests/loom.rs` swaps in
/// loom's).
mod sync {
    pub(super) use core::hint::spin_loop;
    pub(super) use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
}

mod claims;
mod pebs;

pub(crate) use claims::{Claims, Joined, Refused};
pub(crate) use pebs::{PebsRegisters, PebsWrites};

/// The physical NetBurst PMU of one package, as a value: [`NetBurstPmu`].
///
/// The two logical processors of a Hyper-Threading package share one PMU
/// (SDM 18.16): 18 counters, 18 CCCRs, 45 ESCRs, `MSR_PEBS_ENABLE` and
/// `MSR_PEBS_MATRIX_VERT` (Table 35-41: one per package). `IA32_DS_AREA`
/// and the PMI are each logical processor's own. One `NetBurstPmu` stands
/// for one package and owns what is per package:
///
/// | what | how it is shared by the package's drivers |
/// |---|---|
/// | which logical processors have a driver | a driver serves one ([`NetBurstDriver::take_for`]) or both ([`NetBurstDriver::take`]); a second driver for a served logical processor is refused ([`InitError::LogicalProcessorTaken`]) before any register is touched |
/// | counter and ESCR claims | atomic claims (`claims.rs`, model-checked with loom in `tests/loom.rs`): two CPUs claim at once without a lock; the loser is refused |
/// | `MSR_PEBS_ENABLE`, `MSR_PEBS_MATRIX_VERT` images | a spin lock, taken by a driver's configure or release of a PEBS or replay-tagging counter, never by a PMI handler |
/// | the PMI handlers' state ([`PmiState`]) | atomics only, no lock: each location has one writer ([`PmiState`]) |
///
/// It is made once per package through an `unsafe` constructor
/// ([`NetBurstPmu::new`]), whose contract is the one promise the crate
/// cannot check: that the value names one physical package, and no other
/// value names it. Everything else (one driver per logical processor, one
/// driver per owner type, every token back before an owner is free again,
/// DS save areas owned by the driver that installed them) is checked by
/// the types or refused at run time.
///
/// [`NetBurstDriver::take_for`]: super::driver::NetBurstDriver::take_for
/// [`NetBurstDriver::take`]: super::driver::NetBurstDriver::take
/// [`InitError::LogicalProcessorTaken`]: super::driver::InitError::LogicalProcessorTaken
///
/// The physical PMU of one NetBurst package (see above): declare one `static` per package and take the
/// package's drivers from it.
///
/// It is `Sync` by design: the package's two logical processors, on two
/// CPUs, share it (their drivers claim through it, their PMI handlers read
/// and write their own lines of its [`PmiState`]).
///
/// # Examples
///
/// ```
/// use pmu::arch::netburst::NetBurstPmu;
///
/// // SAFETY: the kernel's one value for package 0.
/// static PACKAGE0: NetBurstPmu = unsafe { NetBurstPmu::new() };
/// assert!(PACKAGE0.pmi().armed(pmu::arch::netburst::LogicalProcessor::T0).is_empty());
/// ```
#[derive(Debug)]
pub struct NetBurstPmu {
    pmi: PmiState,
    claims: Claims,
    /// The logical processors served by a live driver, bit `lp as u8`.
    served: AtomicU8,
    pebs: spin::Mutex<PebsRegisters>,
}

impl NetBurstPmu {
    /// The PMU of one package, with no driver, nothing claimed, nothing
    /// armed.
    ///
    /// # Safety
    ///
    /// The value names one physical NetBurst package, and no other value
    /// names the same package: make exactly one per package (a `static`),
    /// for the whole time the package's PMU is driven. A model
    /// ([`crate::model::netburst`]) is a package of its own.
    ///
    /// Every driver taken from it reaches this package's registers, from
    /// the CPU it serves: a driver for logical processor `lp`
    /// ([`NetBurstDriver::take_for`]) uses an MSR backend that runs on
    /// `lp`'s CPU, where `lp`'s PMI handler also runs with this value's
    /// [`NetBurstPmu::pmi`]; a driver for both
    /// ([`NetBurstDriver::take`]) uses one that runs on one CPU of the
    /// package, and is given a DS save area only for that CPU's logical
    /// processor ([`NetBurstDriver::set_pebs_area`]).
    ///
    /// Two values for one package would let two drivers claim one counter,
    /// and a DS save area be handed back while the other value's handler
    /// may still read it.
    ///
    /// [`NetBurstDriver::take_for`]: super::driver::NetBurstDriver::take_for
    /// [`NetBurstDriver::take`]: super::driver::NetBurstDriver::take
    /// [`NetBurstDriver::set_pebs_area`]: super::driver::NetBurstDriver::set_pebs_area
    pub const unsafe fn new() -> NetBurstPmu {
        use core::sync::atomic::{AtomicU32, AtomicU64};
        NetBurstPmu {
            pmi: PmiState::new(),
            claims: Claims {
                counters: AtomicU32::new(0),
                escrs: AtomicU64::new(0),
                drivers: AtomicU32::new(0),
            },
            served: AtomicU8::new(0),
            pebs: spin::Mutex::new(PebsRegisters::new()),
        }
    }

    /// The state the package's PMI handlers share with its drivers.
    pub const fn pmi(&self) -> &PmiState {
        &self.pmi
    }

    /// Logical processor `lp`'s share of the package's PMU: what its driver
    /// is taken for and its PMI handler serves
    /// ([`crate::arch::LocalPmu`]).
    pub const fn logical(&self, lp: LogicalProcessor) -> LogicalPmu<'_> {
        LogicalPmu { pmu: self, lp }
    }

    /// The counters claimed in the package, by every driver.
    pub fn claimed_counters(&self) -> CounterSet {
        CounterSet::from_bits_truncate(self.claims.counters())
    }

    /// The ESCRs claimed in the package, by every driver.
    pub fn claimed_escrs(&self) -> EscrSet {
        EscrSet::from_bits_truncate(self.claims.escrs())
    }

    /// Whether a live driver serves `lp`.
    pub fn is_served(&self, lp: LogicalProcessor) -> bool {
        self.served.load(core::sync::atomic::Ordering::Acquire) & lp_bit(lp) != 0
    }

    pub(super) fn claims(&self) -> &Claims {
        &self.claims
    }

    /// The package's PEBS MSR images, for one driver at a time (never from
    /// a PMI handler).
    pub(super) fn pebs(&self) -> spin::MutexGuard<'_, PebsRegisters> {
        self.pebs.lock()
    }

    /// Marks the logical processors of `lps` served, all or none: `Err`
    /// names one that a live driver serves already.
    pub(super) fn serve(&self, lps: &[LogicalProcessor]) -> Result<(), LogicalProcessor> {
        use core::sync::atomic::Ordering;
        let want = lps.iter().fold(0, |m, &lp| m | lp_bit(lp));
        let mut now = self.served.load(Ordering::Acquire);
        loop {
            if let Some(&busy) = lps.iter().find(|&&lp| now & lp_bit(lp) != 0) {
                return Err(busy);
            }
            match self.served.compare_exchange_weak(
                now,
                now | want,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(()),
                Err(seen) => now = seen,
            }
        }
    }

    /// The logical processors of `lps` have no driver any more.
    pub(super) fn unserve(&self, lps: &[LogicalProcessor]) {
        let mask = lps.iter().fold(0, |m, &lp| m | lp_bit(lp));
        self.served
            .fetch_and(!mask, core::sync::atomic::Ordering::AcqRel);
    }
}

const fn lp_bit(lp: LogicalProcessor) -> u8 {
    1 << lp as u8
}

/// One logical processor's share of its package's PMU
/// ([`NetBurstPmu::logical`]): the two logical processors of a
/// Hyper-Threading package share one PMU (SDM 18.16), and each CPU's
/// driver and PMI handler serve their own logical processor of it.
#[derive(Clone, Copy, Debug)]
pub struct LogicalPmu<'a> {
    pmu: &'a NetBurstPmu,
    lp: LogicalProcessor,
}

impl<'a> LogicalPmu<'a> {
    /// The package.
    pub const fn package(self) -> &'a NetBurstPmu {
        self.pmu
    }

    /// The logical processor.
    pub const fn logical_processor(self) -> LogicalProcessor {
        self.lp
    }
}

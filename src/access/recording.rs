//! A backend wrapper that counts and logs every access, for either
//! register space.

use super::{MsrAccess, PmcPmdAccess};

/// One access that went through a [`Recording`] backend, with the value read
/// or written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Access {
    /// RDMSR of `msr` that returned `value`.
    ReadMsr {
        /// MSR address.
        msr: u32,
        /// Value returned.
        value: u64,
    },
    /// WRMSR of `value` to `msr`.
    WriteMsr {
        /// MSR address.
        msr: u32,
        /// Value written.
        value: u64,
    },
    /// RDPMC with ECX = `index` that returned `value`.
    Rdpmc {
        /// The ECX operand.
        index: u32,
        /// Value returned.
        value: u64,
    },
    /// `mov r = pmc[pmc]` (Itanium) that returned `value`.
    ReadPmc {
        /// The PMC number.
        pmc: u8,
        /// Value returned.
        value: u64,
    },
    /// `mov pmc[pmc] = value` (Itanium).
    WritePmc {
        /// The PMC number.
        pmc: u8,
        /// Value written.
        value: u64,
    },
    /// `mov r = pmd[pmd]` (Itanium) that returned `value`.
    ReadPmd {
        /// The PMD number.
        pmd: u8,
        /// Value returned.
        value: u64,
    },
    /// `mov pmd[pmd] = value` (Itanium).
    WritePmd {
        /// The PMD number.
        pmd: u8,
        /// Value written.
        value: u64,
    },
}

/// How many accesses of each kind a [`Recording`] backend has passed on,
/// faulted ones included. A backend uses one register space, so either the
/// first three fields (IA-32) or the last four (Itanium) count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AccessCounts {
    /// RDMSR instructions.
    pub msr_reads: u32,
    /// WRMSR instructions.
    pub msr_writes: u32,
    /// RDPMC instructions.
    pub rdpmc: u32,
    /// Itanium PMC reads.
    pub pmc_reads: u32,
    /// Itanium PMC writes.
    pub pmc_writes: u32,
    /// Itanium PMD reads.
    pub pmd_reads: u32,
    /// Itanium PMD writes.
    pub pmd_writes: u32,
}

impl AccessCounts {
    /// No access.
    pub const ZERO: AccessCounts = AccessCounts {
        msr_reads: 0,
        msr_writes: 0,
        rdpmc: 0,
        pmc_reads: 0,
        pmc_writes: 0,
        pmd_reads: 0,
        pmd_writes: 0,
    };

    /// IA-32 traffic: `(RDMSR, WRMSR, RDPMC)`.
    pub const fn msr(msr_reads: u32, msr_writes: u32, rdpmc: u32) -> AccessCounts {
        AccessCounts {
            msr_reads,
            msr_writes,
            rdpmc,
            ..AccessCounts::ZERO
        }
    }

    /// Itanium traffic: `(PMC reads, PMC writes, PMD reads, PMD writes)`.
    pub const fn pmc_pmd(
        pmc_reads: u32,
        pmc_writes: u32,
        pmd_reads: u32,
        pmd_writes: u32,
    ) -> AccessCounts {
        AccessCounts {
            pmc_reads,
            pmc_writes,
            pmd_reads,
            pmd_writes,
            ..AccessCounts::ZERO
        }
    }

    /// All accesses, of every kind.
    pub const fn total(&self) -> u32 {
        self.msr_reads
            + self.msr_writes
            + self.rdpmc
            + self.pmc_reads
            + self.pmc_writes
            + self.pmd_reads
            + self.pmd_writes
    }
}

/// Wraps a backend of either register space ([`MsrAccess`] or
/// [`PmcPmdAccess`]) and records every access it passes on: counts of each
/// kind, and a log of the first `N` successful accesses in order.
///
/// The log is a fixed array, so recording needs no allocator and works inside
/// a test kernel. Accesses past the first `N` are still counted, and
/// [`Recording::log_overflowed`] says that some were not logged.
#[derive(Debug)]
pub struct Recording<B, const N: usize = 64> {
    inner: B,
    counts: AccessCounts,
    log: [Access; N],
    logged: usize,
    dropped: usize,
}

impl<B, const N: usize> Recording<B, N> {
    /// Starts recording the accesses made through `inner`.
    pub const fn new(inner: B) -> Self {
        Self {
            inner,
            counts: AccessCounts::ZERO,
            log: [Access::Rdpmc { index: 0, value: 0 }; N],
            logged: 0,
            dropped: 0,
        }
    }

    /// The counts since creation or the last [`Recording::clear`].
    pub const fn counts(&self) -> AccessCounts {
        self.counts
    }

    /// The logged accesses, oldest first.
    pub fn log(&self) -> &[Access] {
        &self.log[..self.logged]
    }

    /// Whether accesses were made that did not fit in the log.
    pub const fn log_overflowed(&self) -> bool {
        self.dropped != 0
    }

    /// Forgets the counts and the log; the wrapped backend is untouched.
    pub fn clear(&mut self) {
        self.counts = AccessCounts::ZERO;
        self.logged = 0;
        self.dropped = 0;
    }

    /// Returns the counts and clears them: the traffic of one operation is
    /// `rec.clear(); op(&mut rec); rec.take_counts()`.
    pub fn take_counts(&mut self) -> AccessCounts {
        let counts = self.counts;
        self.clear();
        counts
    }

    /// The wrapped backend.
    pub const fn inner(&self) -> &B {
        &self.inner
    }

    /// The wrapped backend, mutably; accesses made through it directly are
    /// not recorded.
    pub const fn inner_mut(&mut self) -> &mut B {
        &mut self.inner
    }

    /// Stops recording and returns the wrapped backend.
    pub fn into_inner(self) -> B {
        self.inner
    }

    /// Count one access, run it, and log it if it succeeded.
    fn record<T, E>(
        &mut self,
        count: fn(&mut AccessCounts) -> &mut u32,
        access: impl FnOnce(&mut B) -> Result<T, E>,
        logged: impl FnOnce(&T) -> Access,
    ) -> Result<T, E> {
        *count(&mut self.counts) += 1;
        let value = access(&mut self.inner)?;
        let entry = logged(&value);
        match self.log.get_mut(self.logged) {
            Some(slot) => {
                *slot = entry;
                self.logged += 1;
            }
            None => self.dropped += 1,
        }
        Ok(value)
    }
}

impl<B: MsrAccess, const N: usize> MsrAccess for Recording<B, N> {
    type Error = B::Error;

    fn read_msr(&mut self, msr: u32) -> Result<u64, B::Error> {
        self.record(
            |c| &mut c.msr_reads,
            |b| b.read_msr(msr),
            |&value| Access::ReadMsr { msr, value },
        )
    }

    fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), B::Error> {
        self.record(
            |c| &mut c.msr_writes,
            |b| b.write_msr(msr, value),
            |_| Access::WriteMsr { msr, value },
        )
    }

    fn rdpmc(&mut self, index: u32) -> Result<u64, B::Error> {
        self.record(
            |c| &mut c.rdpmc,
            |b| b.rdpmc(index),
            |&value| Access::Rdpmc { index, value },
        )
    }
}

impl<B: PmcPmdAccess, const N: usize> PmcPmdAccess for Recording<B, N> {
    type Error = B::Error;

    fn read_pmc(&mut self, pmc: u8) -> Result<u64, B::Error> {
        self.record(
            |c| &mut c.pmc_reads,
            |b| b.read_pmc(pmc),
            |&value| Access::ReadPmc { pmc, value },
        )
    }

    fn write_pmc(&mut self, pmc: u8, value: u64) -> Result<(), B::Error> {
        self.record(
            |c| &mut c.pmc_writes,
            |b| b.write_pmc(pmc, value),
            |_| Access::WritePmc { pmc, value },
        )
    }

    fn read_pmd(&mut self, pmd: u8) -> Result<u64, B::Error> {
        self.record(
            |c| &mut c.pmd_reads,
            |b| b.read_pmd(pmd),
            |&value| Access::ReadPmd { pmd, value },
        )
    }

    fn write_pmd(&mut self, pmd: u8, value: u64) -> Result<(), B::Error> {
        self.record(
            |c| &mut c.pmd_writes,
            |b| b.write_pmd(pmd, value),
            |_| Access::WritePmd { pmd, value },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backend for these tests only: MSR 0x10 holds a value, every other
    /// MSR faults, RDPMC returns the index times two.
    struct OneMsr(u64);

    impl MsrAccess for OneMsr {
        type Error = u32;

        fn read_msr(&mut self, msr: u32) -> Result<u64, u32> {
            if msr == 0x10 { Ok(self.0) } else { Err(msr) }
        }

        fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), u32> {
            if msr == 0x10 {
                self.0 = value;
                Ok(())
            } else {
                Err(msr)
            }
        }

        fn rdpmc(&mut self, index: u32) -> Result<u64, u32> {
            Ok(u64::from(index) * 2)
        }
    }

    #[test]
    fn counts_and_logs_each_access_in_order() {
        let mut rec: Recording<_, 8> = Recording::new(OneMsr(5));
        assert_eq!(rec.read_msr(0x10), Ok(5));
        assert_eq!(rec.write_msr(0x10, 7), Ok(()));
        assert_eq!(rec.rdpmc(3), Ok(6));
        assert_eq!(rec.read_msr(0x10), Ok(7));
        assert_eq!(rec.counts(), AccessCounts::msr(2, 1, 1));
        assert_eq!(rec.counts().total(), 4);
        assert_eq!(
            rec.log(),
            &[
                Access::ReadMsr {
                    msr: 0x10,
                    value: 5
                },
                Access::WriteMsr {
                    msr: 0x10,
                    value: 7
                },
                Access::Rdpmc { index: 3, value: 6 },
                Access::ReadMsr {
                    msr: 0x10,
                    value: 7
                },
            ]
        );
    }

    #[test]
    fn faulting_accesses_are_counted_but_not_logged() {
        let mut rec: Recording<_, 8> = Recording::new(OneMsr(0));
        assert_eq!(rec.write_msr(0x11, 1), Err(0x11));
        assert_eq!(rec.read_msr(0x12), Err(0x12));
        assert_eq!(rec.counts().msr_writes, 1);
        assert_eq!(rec.counts().msr_reads, 1);
        assert!(rec.log().is_empty());
        assert_eq!(rec.inner().0, 0, "the faulting write changed nothing");
    }

    #[test]
    fn a_full_log_keeps_counting() {
        let mut rec: Recording<_, 2> = Recording::new(OneMsr(0));
        for i in 0..5 {
            rec.rdpmc(i).unwrap();
        }
        assert_eq!(rec.counts().rdpmc, 5);
        assert_eq!(rec.log().len(), 2);
        assert!(rec.log_overflowed());
        assert_eq!(rec.take_counts().rdpmc, 5);
        assert_eq!(rec.counts(), AccessCounts::default());
        assert!(!rec.log_overflowed());
        assert!(rec.log().is_empty());
    }

    #[test]
    fn works_through_a_mutable_reference() {
        fn touch(mut msr: impl MsrAccess) {
            let _ = msr.rdpmc(1);
        }
        let mut rec: Recording<_, 1> = Recording::new(OneMsr(0));
        touch(&mut rec);
        touch(&mut rec);
        assert_eq!(rec.counts().rdpmc, 2);
        assert_eq!(rec.into_inner().0, 0);
    }
}

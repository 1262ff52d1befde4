//! Test support shared by the unit tests (compiled for tests only).

/// A fixed-seed xorshift64 generator: `rnd(m)` is a number below `m`
/// (Marsaglia's shifts 13, 7, 17), the same sequence on every run.
pub(crate) fn rng(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |m| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % m
    }
}

/// A NetBurst package of its own, for a test on a model.
pub(crate) fn netburst_pmu() -> crate::arch::netburst::NetBurstPmu {
    // SAFETY: each test's model is a package of its own, and this value is
    // the only one that names it.
    unsafe { crate::arch::netburst::NetBurstPmu::new() }
}

/// An Itanium processor's PMU of its own, for a test on a model.
pub(crate) fn itanium_pmu() -> crate::arch::itanium::ItaniumPmu {
    // SAFETY: each test's model is a processor of its own, and this value is
    // the only one that names it.
    unsafe { crate::arch::itanium::ItaniumPmu::new() }
}

/// A logical processor's architectural PMU of its own, for a test on a
/// model.
pub(crate) fn archperf_pmu() -> crate::arch::archperf::ArchPerfPmu {
    // SAFETY: each test's model is a logical processor of its own, and this
    // value is the only one that names it.
    unsafe { crate::arch::archperf::ArchPerfPmu::new() }
}

/// What happens at each register access of the code an [`Interrupting`]
/// backend serves, before the access executes: where a test makes the PMU
/// overflow, and where the CPU takes the interrupt (the handler runs with
/// the inner registers: its own accesses are not counted and do not
/// interrupt).
pub(crate) trait Interrupt<B> {
    /// Before access `at` (0-based, counted from [`Interrupting::arm`]).
    fn before(&mut self, at: usize, regs: &mut B);
}

/// A register backend that lets a test act between any two register
/// accesses of the code using it, as hardware does: an overflow can happen
/// and a PMI (an NMI, which nothing masks, or a vector where the code runs
/// with interrupts enabled) can be taken before any instruction. The hook
/// sees every access's number; a test sweeps the places it acts at.
pub(crate) struct Interrupting<B, H> {
    /// The registers (a model).
    pub(crate) inner: B,
    /// What happens between the accesses.
    pub(crate) hook: H,
    accesses: usize,
}

impl<B, H: Interrupt<B>> Interrupting<B, H> {
    /// `inner`, with `hook` between its accesses.
    pub(crate) fn new(inner: B, hook: H) -> Self {
        Interrupting {
            inner,
            hook,
            accesses: 0,
        }
    }

    /// Counts the accesses from 0 again.
    pub(crate) fn arm(&mut self) {
        self.accesses = 0;
    }

    /// The accesses since [`Interrupting::arm`].
    pub(crate) fn accesses(&self) -> usize {
        self.accesses
    }

    fn access(&mut self) {
        self.hook.before(self.accesses, &mut self.inner);
        self.accesses += 1;
    }
}

impl<B: crate::access::MsrAccess, H: Interrupt<B>> crate::access::MsrAccess for Interrupting<B, H> {
    type Error = B::Error;

    fn read_msr(&mut self, msr: u32) -> Result<u64, B::Error> {
        self.access();
        self.inner.read_msr(msr)
    }

    fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), B::Error> {
        self.access();
        self.inner.write_msr(msr, value)
    }

    fn read_pmc(&mut self, index: u32) -> Result<u64, B::Error> {
        self.access();
        self.inner.read_pmc(index)
    }
}

impl<B: crate::access::PmcPmdAccess, H: Interrupt<B>> crate::access::PmcPmdAccess
    for Interrupting<B, H>
{
    type Error = B::Error;

    fn read_pmc(&mut self, n: u8) -> Result<u64, B::Error> {
        self.access();
        self.inner.read_pmc(n)
    }

    fn write_pmc(&mut self, n: u8, value: u64) -> Result<(), B::Error> {
        self.access();
        self.inner.write_pmc(n, value)
    }

    fn read_pmd(&mut self, n: u8) -> Result<u64, B::Error> {
        self.access();
        self.inner.read_pmd(n)
    }

    fn write_pmd(&mut self, n: u8, value: u64) -> Result<(), B::Error> {
        self.access();
        self.inner.write_pmd(n, value)
    }
}

//! Test support shared by the unit tests (compiled for tests only).

pub(crate) mod recorded;

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

/// How many random cases a fuzz test runs: `full` with `PMU_FUZZ=full` in
/// the environment (CI), a tenth of it otherwise, so that a plain `cargo
/// test` of an unoptimised build stays quick. The same seed, so a plain run
/// is the full run's first tenth.
pub(crate) fn fuzz_cases(full: u64) -> u64 {
    if std::env::var_os("PMU_FUZZ").is_some_and(|v| v == "full") {
        full
    } else {
        full.div_ceil(10)
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

/// A logical processor's AMD core PMU of its own, for a test on a model.
pub(crate) fn amd_pmu() -> crate::arch::amd::AmdPmu {
    // SAFETY: each test's model is a logical processor of its own, and this
    // value is the only one that names it.
    unsafe { crate::arch::amd::AmdPmu::new() }
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

    fn rdpmc(&mut self, index: u32) -> Result<u64, B::Error> {
        self.access();
        self.inner.rdpmc(index)
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

/// Where, relative to the call under test, a sweep's overflow happens or
/// its interrupt is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum At {
    /// Nowhere (the run without an interrupt).
    Never,
    /// Before the call's access with this number (0-based).
    Access(usize),
    /// After the call returns.
    After,
}

impl At {
    /// The access number, if inside the call.
    pub(crate) const fn access(self) -> Option<usize> {
        match self {
            At::Access(n) => Some(n),
            _ => None,
        }
    }
}

/// The interleavings of one call that a test sweeps: `case(overflow,
/// take)` runs the call on a fresh rig with the PMU overflowing and the
/// interrupt taken where they say, checks, and returns the call's accesses.
/// First the call without either; then, for every access of it and after
/// it, the overflow there with the interrupt taken after the call; with
/// `inside` (the contract lets the interrupt land inside the call), also
/// taken at that access and at every later one of the call as it runs with
/// that overflow (an interrupt comes some instructions after its overflow,
/// and the overflow may change the call's accesses). Returns the cases run.
pub(crate) fn sweep(inside: bool, mut case: impl FnMut(At, At) -> usize) -> usize {
    let accesses = case(At::Never, At::Never);
    assert!(accesses > 0, "a call without a register access");
    let mut runs = 1;
    for at in 0..=accesses {
        let overflow = if at < accesses {
            At::Access(at)
        } else {
            At::After
        };
        let with_overflow = case(overflow, At::After);
        runs += 1;
        if inside && at < accesses {
            for taken in at..with_overflow {
                case(overflow, At::Access(taken));
                runs += 1;
            }
        }
    }
    runs
}

//! An Itanium guest PMU for a hypervisor: guest PMC writes through the
//! arch layer's [`Validator`], guest PMD access, and the world switch.
//!
//! Itanium has no MSRs: a guest's `mov pmc[r] = r` and `mov pmd[r] = r`
//! trap to the VMM (privileged at the guest's level, or virtualised). On
//! each trap:
//!
//! | guest access | call | then |
//! |---|---|---|
//! | write PMC4 and up | [`check_pmc_write`] (its [`Validator`] remembers the opcode-matcher and range registers perfmon's checks read) | [`Verdict::Apply`]: [`PmuContext::record_pmc`] |
//! | write PMC0-3 (freeze, overflow bits) | [`check_pmc_write`] | [`Verdict::Emulate`]: the guest's virtual PMC0 ([`PmuContext::write_pmc0`] while loaded, else [`PmuContext::record_pmc`]) |
//! | read or write a PMD | [`check_pmd`] | [`Verdict::Apply`]: [`PmuContext::record_pmd`] |
//!
//! The world switch ([`PmuContext::save`], [`PmuContext::restore`]) freezes
//! the PMU with PMC0.fr first (SDM Vol. 2 7.2: a frozen PMU counts nothing,
//! so the counters can be read and written consistently), and writes PMC0
//! last, unfrozen, with the context's overflow bits; a side's own freeze is
//! virtual, so the host's counters run beside a guest (see
//! [`PmuContext`]).

use crate::access::PmcPmdAccess;
use crate::arch::itanium::fields::Plm;
use crate::arch::itanium::generation::{Counter, Generation, RegSet};
use crate::arch::itanium::pmc::{CounterPmc, Pmc0};
use crate::arch::itanium::validate::{PmcError, Validator};

pub use super::Verdict;

/// What a guest may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GuestPolicy {
    /// The generation the guest sees.
    pub generation: Generation,
    /// PMC/PMD pairs (counters) the host keeps for itself.
    pub host_counters: RegSet,
}

/// Why a guest access faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum GuestFault {
    /// The [`Validator`] refused the PMC value.
    Pmc(PmcError),
    /// A register of a counter the host keeps.
    HostOwned {
        /// The register number.
        reg: u8,
    },
    /// No such PMD on the generation.
    NoSuchPmd {
        /// The register number.
        pmd: u8,
    },
}

impl core::fmt::Display for GuestFault {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            GuestFault::Pmc(e) => write!(f, "{e}"),
            GuestFault::HostOwned { reg } => write!(f, "register {reg} belongs to the host"),
            GuestFault::NoSuchPmd { pmd } => write!(f, "no PMD{pmd} on this generation"),
        }
    }
}

impl core::error::Error for GuestFault {}

/// The guest writes `value` to PMC `pmc`: PMC0-3 are the guest's virtual
/// control registers ([`Verdict::Emulate`]); a counter the host keeps
/// faults; every other value goes through `validator` (under the policy it
/// was made with, [`crate::arch::itanium::validate::Policy::STRICT`] for a
/// guest that must see the hardware's rules).
pub fn check_pmc_write(
    validator: &mut Validator,
    policy: &GuestPolicy,
    pmc: u8,
    value: u64,
) -> Verdict<GuestFault> {
    if pmc < 4 {
        return Verdict::Emulate;
    }
    if policy.host_counters.contains(pmc) {
        return Verdict::InjectGp(GuestFault::HostOwned { reg: pmc });
    }
    match validator.write(pmc, value) {
        Ok(_) => Verdict::Apply,
        Err(e) => Verdict::InjectGp(GuestFault::Pmc(e)),
    }
}

/// The guest reads or writes PMD `pmd`.
pub fn check_pmd(policy: &GuestPolicy, pmd: u8) -> Verdict<GuestFault> {
    if !policy.generation.implemented_pmds().contains(pmd) {
        return Verdict::InjectGp(GuestFault::NoSuchPmd { pmd });
    }
    if policy.host_counters.contains(pmd) {
        return Verdict::InjectGp(GuestFault::HostOwned { reg: pmd });
    }
    Verdict::Apply
}

/// One side's Itanium PMU state for the world switch: its virtual PMC0
/// (its freeze bit and its counters' overflow bits) and the PMCs and PMDs
/// it uses.
///
/// PMC0 is shared by every counter (SDM Vol. 2 7.2): one freeze bit, one
/// overflow bit per counter. So that the host's counters keep counting
/// while a guest runs, and a guest never changes them, a context owns only
/// its counters' overflow bits, its freeze is virtual (its counters' `plm`
/// is zero while it is frozen: VTune's Itanium help, "writing zeroes to
/// all plm bits effectively disables the monitor"), and the hardware PMC0
/// is left running with the other counters' bits as they were.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PmuContext {
    generation: Generation,
    pmc0: u64,
    pmcs: [u64; 64],
    pmds: [u64; 64],
    pmcs_used: RegSet,
    pmds_used: RegSet,
}

impl PmuContext {
    /// Nothing used, its PMC0 frozen (the power-up state).
    pub const fn new(generation: Generation) -> PmuContext {
        PmuContext {
            generation,
            pmc0: Pmc0::FROZEN.bits(),
            pmcs: [0; 64],
            pmds: [0; 64],
            pmcs_used: RegSet(0),
            pmds_used: RegSet(0),
        }
    }

    /// Records a PMC write the side made (PMC0: its virtual PMC0; PMC1-3
    /// hold no overflow bit on any generation). `false` above PMC63.
    /// While the context is loaded, a PMC0 write is applied with
    /// [`PmuContext::write_pmc0`] instead.
    pub fn record_pmc(&mut self, pmc: u8, value: u64) -> bool {
        match (pmc, self.pmcs.get_mut(usize::from(pmc))) {
            (0, _) => self.pmc0 = value,
            (1..=3, _) => {}
            (_, Some(slot)) => {
                *slot = value;
                self.pmcs_used = self.pmcs_used.with(pmc);
            }
            (_, None) => return false,
        }
        true
    }

    /// Records a PMD write the side made. `false` above PMD63.
    pub fn record_pmd(&mut self, pmd: u8, value: u64) -> bool {
        let Some(slot) = self.pmds.get_mut(usize::from(pmd)) else {
            return false;
        };
        *slot = value;
        self.pmds_used = self.pmds_used.with(pmd);
        true
    }

    /// The side's virtual PMC0 (freeze and overflow bits).
    pub const fn pmc0(&self) -> u64 {
        self.pmc0
    }

    /// PMD `pmd`'s value, while the context is not loaded.
    pub fn pmd(&self, pmd: u8) -> u64 {
        self.pmds.get(usize::from(pmd)).copied().unwrap_or(0)
    }

    /// The counters the context uses (their PMDs).
    const fn counters(&self) -> RegSet {
        self.pmds_used.intersection(self.generation.counters())
    }

    /// PMC `pmc`'s image on the hardware: a counter's with `plm` zero while
    /// the side's PMU is frozen.
    fn hardware_pmc(&self, pmc: u8) -> u64 {
        let v = self.pmcs.get(usize::from(pmc)).copied().unwrap_or(0);
        match Counter::new(self.generation, pmc) {
            Some(c) if Pmc0::from_bits(self.pmc0).frozen() => CounterPmc::from_bits_truncate(c, v)
                .with_plm(Plm::NONE)
                .bits(),
            _ => v,
        }
    }

    /// Freezes the PMU, keeping every overflow bit (1 PMC read, 1 PMC
    /// write); returns PMC0 as it was.
    fn freeze<R: PmcPmdAccess>(regs: &mut R) -> Result<Pmc0, R::Error> {
        let was = Pmc0::from_bits(regs.read_pmc(0)?);
        regs.write_pmc(0, was.with_frozen(true).bits())?;
        Ok(was)
    }

    /// Takes the context off the PMU: the PMU frozen first (its overflow
    /// bits kept), the context's PMDs read and its counters' overflow bits
    /// taken into its virtual PMC0. The PMU is left frozen for the next
    /// [`PmuContext::restore`]. 1 PMC read, 1 PMC write, a PMD read per
    /// PMD in use.
    ///
    /// Between the read and the freezing write a counter could overflow
    /// and lose its bit; on hardware a VMM first stops monitoring with
    /// PSR.up/PSR.pp (`rum`/`rsm`, which this access layer does not reach),
    /// as Linux perfmon does before it saves a context.
    pub fn save<R: PmcPmdAccess>(&mut self, regs: &mut R) -> Result<(), R::Error> {
        let was = Self::freeze(regs)?;
        for pmd in self.pmds_used.iter() {
            self.pmds[usize::from(pmd)] = regs.read_pmd(pmd)?;
        }
        self.pmc0 = Pmc0::from_bits(self.pmc0)
            .with_overflow_bits_of(was, self.counters())
            .bits();
        Ok(())
    }

    /// Puts the context on the PMU: frozen first, its PMCs (its counters
    /// with `plm` zero while its virtual PMC0 is frozen), its PMDs, and
    /// PMC0 last: unfrozen, with its counters' overflow bits and every
    /// other counter's as they were. 2 PMC writes and a PMC read, plus one
    /// write per PMC and PMD in use.
    pub fn restore<R: PmcPmdAccess>(&self, regs: &mut R) -> Result<(), R::Error> {
        let was = Self::freeze(regs)?;
        for pmc in self.pmcs_used.iter() {
            regs.write_pmc(pmc, self.hardware_pmc(pmc))?;
        }
        for pmd in self.pmds_used.iter() {
            regs.write_pmd(pmd, self.pmds[usize::from(pmd)])?;
        }
        let pmc0 = was
            .with_overflow_bits_of(Pmc0::from_bits(self.pmc0), self.counters())
            .with_frozen(false);
        regs.write_pmc(0, pmc0.bits())
    }

    /// The side writes its PMC0 while its context is loaded (a guest's
    /// [`Verdict::Emulate`]): its virtual freeze becomes its counters'
    /// `plm` and its overflow bits go to the hardware PMC0; the freeze bit
    /// and the other counters' bits stay. A PMC write per counter PMC in
    /// use, 1 PMC read and 1 PMC write.
    pub fn write_pmc0<R: PmcPmdAccess>(
        &mut self,
        regs: &mut R,
        value: u64,
    ) -> Result<(), R::Error> {
        self.pmc0 = value;
        for pmc in self
            .pmcs_used
            .intersection(self.generation.counters())
            .iter()
        {
            regs.write_pmc(pmc, self.hardware_pmc(pmc))?;
        }
        let now = Pmc0::from_bits(regs.read_pmc(0)?);
        let pmc0 = now.with_overflow_bits_of(Pmc0::from_bits(value), self.counters());
        regs.write_pmc(0, pmc0.bits())
    }
}

#[cfg(test)]
mod tests;

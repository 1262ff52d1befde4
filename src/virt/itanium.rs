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
//! | write PMC0-3 (freeze, overflow bits) | [`check_pmc_write`] | [`Verdict::Emulate`]: the guest's virtual PMC0 ([`PmuContext::record_pmc`]) |
//! | read or write a PMD | [`check_pmd`] | [`Verdict::Apply`]: [`PmuContext::record_pmd`] |
//!
//! The world switch ([`PmuContext::save`], [`PmuContext::restore`]) freezes
//! the PMU with PMC0.fr first (SDM Vol. 2 7.2: a frozen PMU counts nothing,
//! so the counters can be read and written consistently), and writes the
//! context's PMC0 (its freeze bit and its overflow bits) last, which
//! unfreezes it only if the side had it running.

use crate::access::PmcPmdAccess;
use crate::arch::itanium::generation::{Generation, RegSet};
use crate::arch::itanium::pmc::Pmc0;
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

/// One side's Itanium PMU state for the world switch: its PMC0 and the
/// PMCs and PMDs it uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PmuContext {
    pmc0: u64,
    pmcs: [u64; 64],
    pmds: [u64; 64],
    pmcs_used: RegSet,
    pmds_used: RegSet,
}

impl Default for PmuContext {
    fn default() -> Self {
        Self::new()
    }
}

impl PmuContext {
    /// Nothing used, PMC0 frozen (the power-up state).
    pub const fn new() -> PmuContext {
        PmuContext {
            pmc0: Pmc0::from_bits(0).with_frozen(true).bits(),
            pmcs: [0; 64],
            pmds: [0; 64],
            pmcs_used: RegSet(0),
            pmds_used: RegSet(0),
        }
    }

    /// Records a PMC write the side made (PMC0-3: its virtual control
    /// registers; PMC0 is the one the switch uses). `false` above PMC63.
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

    /// The side's PMC0 (freeze and overflow bits).
    pub const fn pmc0(&self) -> u64 {
        self.pmc0
    }

    /// PMD `pmd`'s value, while the context is not loaded.
    pub fn pmd(&self, pmd: u8) -> u64 {
        self.pmds.get(usize::from(pmd)).copied().unwrap_or(0)
    }

    /// Takes the context off the PMU: PMC0 is read (its overflow bits),
    /// and written back with fr set, the freeze, before anything else;
    /// then every PMD in use is read (frozen, they hold still). The side's
    /// own freeze bit is kept for [`PmuContext::restore`]. 1 PMC read, 1
    /// PMC write and a PMD read per PMD in use.
    ///
    /// A PMC0 write sets the overflow bits too, so the freeze writes back
    /// those just read; a counter that overflows between the read and the
    /// write would lose its bit. On hardware a VMM first stops monitoring
    /// with PSR.up/PSR.pp (`rum`/`rsm`, which this access layer does not
    /// reach), as Linux perfmon does before it saves a context.
    pub fn save<R: PmcPmdAccess>(&mut self, regs: &mut R) -> Result<(), R::Error> {
        let frozen = Pmc0::from_bits(0).with_frozen(true).bits();
        let was = Pmc0::from_bits(self.pmc0).frozen();
        let now = regs.read_pmc(0)?;
        regs.write_pmc(0, now | frozen)?;
        self.pmc0 = Pmc0::from_bits(now).with_frozen(was).bits();
        for pmd in self.pmds_used.iter() {
            self.pmds[usize::from(pmd)] = regs.read_pmd(pmd)?;
        }
        Ok(())
    }

    /// Puts the context on the PMU: PMC0 = fr first, the PMCs in use, the
    /// PMDs in use, then the context's PMC0 last (unfrozen only if the
    /// side's was). 2 PMC writes plus one per PMC and PMD in use.
    pub fn restore<R: PmcPmdAccess>(&self, regs: &mut R) -> Result<(), R::Error> {
        regs.write_pmc(0, Pmc0::from_bits(0).with_frozen(true).bits())?;
        for pmc in self.pmcs_used.iter() {
            regs.write_pmc(pmc, self.pmcs[usize::from(pmc)])?;
        }
        for pmd in self.pmds_used.iter() {
            regs.write_pmd(pmd, self.pmds[usize::from(pmd)])?;
        }
        regs.write_pmc(0, self.pmc0)
    }
}

#[cfg(test)]
mod tests;

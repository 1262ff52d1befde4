//! An Itanium guest PMU for a hypervisor: guest PMC writes through the
//! arch layer's [`Validator`], guest PMD access, and the world switch.
//!
//! Itanium has no MSRs: a guest's `mov pmc[r] = r` and `mov pmd[r] = r`
//! trap to the VMM (privileged at the guest's level, or virtualised). The
//! architecture does not fault on them (SDM Vol. 2 7.2: an unimplemented
//! PMC or PMD reads zero and ignores writes; Vol. 3 `mov` indirect: PMC and
//! PMD accesses "do not fault"), so a write this module refuses is dropped,
//! never a fault: what Linux perfmon does with a value it refuses
//! (`pfm_write_pmcs` returns `-EINVAL` and the register keeps its value),
//! and a value it takes has its reserved fields replaced by their power-up
//! values, as perfmon writes it (`pfm_mck_reserved`). On each trap:
//!
//! | guest access | call | then |
//! |---|---|---|
//! | write PMC4 and up | [`check_pmc_write`] (its [`GuestValidator`] remembers the opcode-matcher and range registers perfmon's checks read) | [`PmcWrite::Apply`]`(v)`: [`PmuContext::write_pmc`] while loaded, else [`PmuContext::record_pmc`]; [`PmcWrite::Ignore`]: nothing |
//! | write PMC0-3 (freeze, overflow bits) | [`check_pmc_write`] | [`PmcWrite::Virtual`]: [`PmuContext::write_pmc0`] while loaded, else [`PmuContext::record_pmc`] |
//! | read a PMC | [`PmuContext::read_pmc`] (while loaded, after [`PmuContext::take_overflows`]) | the value |
//! | write a PMD | [`check_pmd_write`] | [`PmdWrite::Apply`]`(v)`: [`PmuContext::write_pmd`] while loaded, else [`PmuContext::record_pmd`]; [`PmdWrite::Ignore`]: nothing |
//! | read a PMD | [`check_pmd_read`] | `Ok`: the hardware's while loaded, else [`PmuContext::pmd`]; `Err`: 0 |
//! | the PMU interrupt while the guest is loaded | [`PmuContext::take_overflows`] | not empty: the guest's interrupt |
//! | the guest leaves the CPU | [`PmuContext::save`] (not empty: the guest's interrupt), then [`PmuContext::scrub`] | |
//! | the guest comes back | [`PmuContext::restore`] | |
//!
//! Once, before the first guest: [`scrub_all`].
//!
//! # The world switch, and what a guest can see
//!
//! [`PmuContext::save`] freezes the PMU with PMC0.fr first (SDM Vol. 2
//! 7.2: a frozen PMU counts and captures nothing, so the PMDs can be read
//! consistently), reads every PMD the context uses (the counters' and
//! those its EAR and branch-trace configurations fill, perfmon's `dep_pmd`)
//! and takes its counters' overflow bits out of the hardware PMC0 into its
//! virtual PMC0. [`PmuContext::scrub`] gives the PMCs it used their
//! power-up values (monitors with `plm` 0 count and capture nothing) and
//! its PMDs 0, then unfreezes unless the host's own overflow froze the PMU.
//! [`PmuContext::restore`] freezes, writes the PMCs and PMDs, and
//! unfreezes. A guest's PMC reads are answered from its context (its
//! value, or the power-up value of a PMC it never wrote), its PMD reads by
//! the hardware while loaded: each register it can read holds its own
//! value or its neutral image (PMC power-up value, PMD 0), never another
//! context's (checked against a private model of each guest over 10,000
//! random switches).
//!
//! PMC0 is one register for every counter (SDM Vol. 2 7.2): one freeze
//! bit, one overflow bit per counter. So that the host's counters keep
//! counting while a guest runs, and a guest never changes them, a guest's
//! PMC0 is virtual: its freeze is its monitors' `plm` held at zero on the
//! hardware ("to stop, mask monitoring by clearing plm", perfmon; VTune's
//! Itanium help: "writing zeroes to all plm bits effectively disables the
//! monitor"), EARs and branch trace included, and its overflow bits are
//! kept in its context, never in the hardware PMC0. An overflow of one of
//! its counters with `oi` freezes the whole PMU until the VMM's interrupt
//! handler calls [`PmuContext::take_overflows`], which turns it into the
//! guest's virtual freeze and unfreezes the PMU; the host's counters lose
//! the events of that window, and a host overflow stops the guest's
//! counters the same way (one freeze bit: the crate cannot do better).
//!
//! # Where the sources disagree
//!
//! * Itanium 2 PMC12 bits 5:4: writable in perfmon's mask, ignored in
//!   libpfm's layout ([`disputed_bits`]): a guest's value gets them at
//!   their power-up value 0, so that what it reads back is what the
//!   hardware keeps under either reading.
//! * Reserved fields: perfmon replaces them by their power-up values, the
//!   arch layer's [`Policy::STRICT`] refuses them. A guest gets perfmon's
//!   treatment ([`GUEST_VALIDATION`]): no architecture faults on them.

use crate::access::{PmcPmdBackend, PmcPmdOps};
use crate::arch::itanium::Pmc0;
use crate::arch::itanium::validate::{
    PmcError, Policy, PrivilegePolicy, ReservedPolicy, Validator, disputed_bits,
};
use crate::arch::itanium::{CounterSet, Generation, RegSet};
use crate::register::Field;

/// The validation a guest's PMC writes get: perfmon's reserved-field rule
/// (replace by the power-up value), either privilege (a guest kernel may
/// program system-wide or per-task monitors), no forced `oi` (perfmon
/// forces it only to virtualise 64-bit counters; a guest's counters are its
/// own), and the Itanium 2 PMC4 power enable (bit 23) forced on, as
/// perfmon's `pfm_mck_pmc_check` forces it: it gates every counter, the
/// host's included.
pub const GUEST_VALIDATION: Policy = Policy {
    reserved: ReservedPolicy::Replace,
    privilege: PrivilegePolicy::Any,
    force_overflow_interrupt: false,
    force_pmc4_enable: true,
};

/// A guest's PMC checker: the arch layer's [`Validator`] under
/// [`GUEST_VALIDATION`], with the opcode-matcher and range values perfmon's
/// tagging check reads (one per guest).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GuestValidator(Validator);

impl GuestValidator {
    /// A checker for a guest of `generation`, its registers at their
    /// power-up values.
    pub const fn new(generation: Generation) -> GuestValidator {
        GuestValidator(Validator::new(generation, GUEST_VALIDATION))
    }

    /// The validator inside.
    pub const fn validator(&self) -> &Validator {
        &self.0
    }
}

/// What a guest may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GuestPolicy {
    /// The generation the guest sees.
    pub generation: Generation,
    /// The PMCs the host keeps, and with them the PMDs each controls
    /// (perfmon's `dep_pmd`): a counter's own PMD, an EAR's or the branch
    /// trace buffer's.
    pub host_pmcs: RegSet,
}

impl GuestPolicy {
    /// The PMDs the host keeps.
    const fn host_pmds(&self) -> RegSet {
        let mut set = RegSet::EMPTY;
        let mut n = 0;
        while n < 64 {
            if self.host_pmcs.contains(n)
                && let Some(info) = self.generation.pmc(n)
            {
                set = set.union(info.pmds);
            }
            n += 1;
        }
        set
    }
}

/// Why a guest access is refused (dropped, never a fault).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum GuestRefusal {
    /// The [`Validator`] refused the PMC value, as perfmon refuses it.
    Pmc(PmcError),
    /// A register the host keeps.
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

impl core::fmt::Display for GuestRefusal {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            GuestRefusal::Pmc(e) => write!(f, "{e}"),
            GuestRefusal::HostOwned { reg } => write!(f, "register {reg} belongs to the host"),
            GuestRefusal::NoSuchPmd { pmd } => write!(f, "no PMD{pmd} on this generation"),
        }
    }
}

impl core::error::Error for GuestRefusal {}

/// What the VMM does with a guest's PMC write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PmcWrite {
    /// Record this value and write it while the guest is loaded: the
    /// guest's, with reserved fields at their power-up values and the
    /// forced bits set, as perfmon would write it.
    Apply(u64),
    /// PMC0-3: the guest's virtual PMC0 (freeze and overflow bits).
    Virtual,
    /// Dropped, as perfmon refuses it; the guest sees no fault and the
    /// register keeps its value.
    Ignore(GuestRefusal),
}

/// What the VMM does with a guest's PMD write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PmdWrite {
    /// Record this value and write it while the guest is loaded: the bits
    /// the PMD keeps ([`Generation::pmd_writable`]; a counter's W bits, as
    /// perfmon writes `value & ovfl_val`).
    Apply(u64),
    /// Dropped: an unimplemented or host PMD, whose writes the guest's
    /// processor would ignore.
    Ignore(GuestRefusal),
}

/// The guest writes `value` to PMC `pmc`: PMC0-3 are the guest's virtual
/// control registers ([`PmcWrite::Virtual`]); a PMC the host keeps is
/// dropped; every other value goes through `validator`, and the bits the
/// sources dispute get their power-up value ([`disputed_bits`]).
pub fn check_pmc_write(
    validator: &mut GuestValidator,
    policy: &GuestPolicy,
    pmc: u8,
    value: u64,
) -> PmcWrite {
    if pmc < 4 {
        return PmcWrite::Virtual;
    }
    if policy.host_pmcs.contains(pmc) {
        return PmcWrite::Ignore(GuestRefusal::HostOwned { reg: pmc });
    }
    match validator.0.write(pmc, value) {
        Ok(a) => PmcWrite::Apply(a.value & !disputed_bits(policy.generation, pmc)),
        Err(e) => PmcWrite::Ignore(GuestRefusal::Pmc(e)),
    }
}

/// The guest reads PMD `pmd`: `Err` for an unimplemented PMD or one the
/// host keeps, which the guest reads as 0 (an unimplemented PMD's value,
/// SDM Vol. 2 7.2).
pub fn check_pmd_read(policy: &GuestPolicy, pmd: u8) -> Result<(), GuestRefusal> {
    if !policy.generation.implemented_pmds().contains(pmd) {
        return Err(GuestRefusal::NoSuchPmd { pmd });
    }
    if policy.host_pmds().contains(pmd) {
        return Err(GuestRefusal::HostOwned { reg: pmd });
    }
    Ok(())
}

/// The guest writes `value` to PMD `pmd`.
pub fn check_pmd_write(policy: &GuestPolicy, pmd: u8, value: u64) -> PmdWrite {
    if let Err(f) = check_pmd_read(policy, pmd) {
        return PmdWrite::Ignore(f);
    }
    match policy.generation.pmd_writable(pmd) {
        Some(keep) => PmdWrite::Apply(value & keep),
        None => PmdWrite::Ignore(GuestRefusal::NoSuchPmd { pmd }),
    }
}

/// `plm` (bits 3:0) of every monitor PMC: the counters, the EARs, the
/// branch trace buffer and Montecito's IP-EAR.
const PLM: Field = Field::new(0, 4);

/// Whether PMC `pmc` of `generation` is a monitor (has `plm` and `pm`), as
/// its descriptor row says.
const fn is_monitor(generation: Generation, pmc: u8) -> bool {
    match generation.pmc(pmc) {
        Some(info) => info.is_monitor(),
        None => false,
    }
}

/// Gives every register a guest under `policy` can reach its neutral
/// image: its PMCs (4 and up) their power-up values, its PMDs 0, its
/// counters' overflow bits in PMC0 clear. The host's registers are not
/// touched. Run once before the first guest.
pub fn scrub_all<R: PmcPmdBackend>(policy: &GuestPolicy, regs: &mut R) -> Result<(), R::Error> {
    let g = policy.generation;
    for pmc in g.implemented_pmcs().iter() {
        if pmc >= 4
            && !policy.host_pmcs.contains(pmc)
            && let Some(info) = g.pmc(pmc)
        {
            regs.write_pmc(pmc, info.default)?;
        }
    }
    let host_pmds = policy.host_pmds();
    for pmd in g.implemented_pmds().iter() {
        if !host_pmds.contains(pmd) {
            regs.write_pmd(pmd, 0)?;
        }
    }
    // Counter n is PMC n's: the host's PMCs take their counters.
    let guest_counters = CounterSet(g.counters().0 & !policy.host_pmcs.0);
    let pmc0 = Pmc0::from_bits(regs.read_pmc(0)?);
    regs.write_pmc(
        0,
        pmc0.with_overflow_bits_of(Pmc0::UNFROZEN, guest_counters)
            .bits(),
    )
}

/// One side's Itanium PMU state for the world switch: its virtual PMC0
/// (its freeze bit and its counters' overflow bits) and the PMCs and PMDs
/// it uses.
///
/// The hardware PMC0 holds only the host's overflow bits and the real
/// freeze; a context's freeze is virtual (its monitors' `plm` zero on the
/// hardware while it is frozen) and its overflow bits live here (see the
/// [module documentation](self)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PmuContext {
    generation: Generation,
    pmc0: u64,
    pmcs: [u64; 64],
    pmds: [u64; 64],
    pmcs_used: RegSet,
    pmds_used: RegSet,
    /// Whether the hardware stays frozen after [`PmuContext::scrub`]:
    /// it was frozen at [`PmuContext::save`] by something other than this
    /// context's own overflow.
    frozen_after: bool,
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
            frozen_after: false,
        }
    }

    /// The bits a virtual PMC0 keeps: `fr` and the generation's counters'
    /// overflow bits (bits 3:1 are ignored, SDM Vol. 2 7.2).
    const fn pmc0_bits(&self) -> u64 {
        1 | self.generation.counters().0
    }

    /// Records a PMC write the side made, while the context is not loaded
    /// (for a guest: the value of [`PmcWrite::Apply`], or the raw value of
    /// a [`PmcWrite::Virtual`] PMC0 write; PMC1-3 hold no overflow bit on
    /// any generation). A PMC makes the PMDs it controls part of the
    /// context. `false` above PMC63.
    pub fn record_pmc(&mut self, pmc: u8, value: u64) -> bool {
        match (pmc, self.pmcs.get_mut(usize::from(pmc))) {
            (0, _) => self.pmc0 = value & self.pmc0_bits(),
            (1..=3, _) => {}
            (_, Some(slot)) => {
                *slot = value;
                self.pmcs_used = self.pmcs_used.with(pmc);
                if let Some(info) = self.generation.pmc(pmc) {
                    self.pmds_used = self.pmds_used.union(info.pmds);
                }
            }
            (_, None) => return false,
        }
        true
    }

    /// The side writes PMC `pmc` (4 and up) while its context is loaded:
    /// recorded, and written to the hardware (with `plm` zero while the
    /// side is frozen). 1 PMC write.
    pub fn write_pmc<R: PmcPmdBackend>(
        &mut self,
        regs: &mut R,
        pmc: u8,
        value: u64,
    ) -> Result<(), R::Error> {
        if pmc < 4 || !self.record_pmc(pmc, value) {
            return Ok(());
        }
        regs.write_pmc(pmc, self.hardware_pmc(pmc))
    }

    /// Records a PMD write the side made while its context is not loaded.
    /// `false` above PMD63.
    pub fn record_pmd(&mut self, pmd: u8, value: u64) -> bool {
        let Some(slot) = self.pmds.get_mut(usize::from(pmd)) else {
            return false;
        };
        *slot = value;
        self.pmds_used = self.pmds_used.with(pmd);
        true
    }

    /// The side writes PMD `pmd` while its context is loaded: recorded and
    /// written. 1 PMD write.
    pub fn write_pmd<R: PmcPmdBackend>(
        &mut self,
        regs: &mut R,
        pmd: u8,
        value: u64,
    ) -> Result<(), R::Error> {
        if !self.record_pmd(pmd, value) {
            return Ok(());
        }
        regs.write_pmd(pmd, value)
    }

    /// The side's virtual PMC0 (freeze and overflow bits).
    pub const fn pmc0(&self) -> u64 {
        self.pmc0
    }

    /// The side reads PMC `pmc`: its virtual PMC0, a PMC's value as the
    /// side wrote it (the hardware's may have `plm` zero), the power-up
    /// value of one it never wrote, 0 for one the generation lacks. While
    /// loaded, call [`PmuContext::take_overflows`] first: an overflow since
    /// then is still only in the hardware PMC0.
    pub fn read_pmc(&self, pmc: u8) -> u64 {
        if pmc == 0 {
            return self.pmc0;
        }
        match self.generation.pmc(pmc) {
            Some(_) if self.pmcs_used.contains(pmc) => self.pmcs[usize::from(pmc)],
            Some(info) if pmc >= 4 => info.default,
            _ => 0,
        }
    }

    /// PMD `pmd`'s value, while the context is not loaded (0 for one it
    /// does not use: the hardware's after a scrub).
    pub fn pmd(&self, pmd: u8) -> u64 {
        match self.pmds.get(usize::from(pmd)) {
            Some(&v) if self.pmds_used.contains(pmd) => v,
            _ => 0,
        }
    }

    /// The counters the context uses (their PMDs: counter n counts in PMD n).
    const fn counters(&self) -> CounterSet {
        CounterSet(self.pmds_used.0 & self.generation.counters().0)
    }

    /// PMC `pmc`'s image on the hardware: a monitor's with `plm` zero
    /// while the side's PMU is frozen.
    fn hardware_pmc(&self, pmc: u8) -> u64 {
        let v = self.pmcs.get(usize::from(pmc)).copied().unwrap_or(0);
        if Pmc0::from_bits(self.pmc0).frozen() && is_monitor(self.generation, pmc) {
            PLM.set(v, 0)
        } else {
            v
        }
    }

    /// Rewrites the hardware images of the monitor PMCs in use (after the
    /// virtual freeze changed).
    fn write_monitors<R: PmcPmdBackend>(&self, regs: &mut R) -> Result<(), R::Error> {
        for pmc in self.pmcs_used.iter() {
            if is_monitor(self.generation, pmc) {
                regs.write_pmc(pmc, self.hardware_pmc(pmc))?;
            }
        }
        Ok(())
    }

    /// Takes this context's counters' overflow bits out of the hardware
    /// PMC0 value `hw` into the virtual PMC0; an overflow (with `oi`, the
    /// only kind that sets a bit, SDM Vol. 2 7.2.2) freezes the side's PMU,
    /// as it froze the hardware. Returns the counters newly overflowed and
    /// `hw` without them.
    fn take_bits(&mut self, hw: Pmc0) -> (CounterSet, Pmc0) {
        let mine = hw.overflowed(self.generation).intersection(self.counters());
        if !mine.is_empty() {
            self.pmc0 |= mine.0 | Pmc0::FROZEN.bits();
        }
        (mine, Pmc0::from_bits(hw.bits() & !mine.0))
    }

    /// The PMU interrupt came while this context is loaded: its counters
    /// that overflowed (their bits taken into its virtual PMC0, its PMU
    /// virtually frozen) and the hardware unfrozen unless another
    /// counter's overflow is pending. Not empty: the interrupt is the
    /// side's. 1 PMC read; with an overflow of its own, 1 PMC write per
    /// monitor PMC in use and 1 more.
    pub fn take_overflows<R: PmcPmdBackend>(
        &mut self,
        regs: &mut R,
    ) -> Result<CounterSet, R::Error> {
        let hw = Pmc0::from_bits(regs.read_pmc(0)?);
        let (mine, rest) = self.take_bits(hw);
        if mine.is_empty() {
            return Ok(mine);
        }
        self.write_monitors(regs)?;
        regs.write_pmc(0, rest.with_frozen(rest.any_overflow_bit()).bits())?;
        Ok(mine)
    }

    /// Takes the context off the PMU: the PMU frozen first, the context's
    /// PMDs read (its counters, and what its EARs and branch trace
    /// captured) and its counters' overflow bits taken out of the hardware
    /// PMC0 into its virtual PMC0. The PMU is left frozen for
    /// [`PmuContext::scrub`]. 1 PMC read, 1 PMC write, a PMD read per PMD
    /// in use. Returns the counters that overflowed since the last
    /// [`PmuContext::take_overflows`]: their interrupt is the side's.
    ///
    /// Between the read and the freezing write a counter could overflow
    /// and lose its bit; on hardware a VMM first stops monitoring with
    /// PSR.up/PSR.pp (`rum`/`rsm`, which this access layer does not reach),
    /// as Linux perfmon does before it saves a context.
    pub fn save<R: PmcPmdBackend>(&mut self, regs: &mut R) -> Result<CounterSet, R::Error> {
        let was = Pmc0::from_bits(regs.read_pmc(0)?);
        let (mine, rest) = self.take_bits(was);
        regs.write_pmc(0, rest.with_frozen(true).bits())?;
        // Frozen by something else than this context's own overflow (a
        // host overflow, or the host's own freeze): stays frozen.
        self.frozen_after = was.frozen() && (mine.is_empty() || rest.any_overflow_bit());
        for pmd in self.pmds_used.iter() {
            self.pmds[usize::from(pmd)] = regs.read_pmd(pmd)?;
        }
        Ok(mine)
    }

    /// After [`PmuContext::save`]: the PMCs the context used get their
    /// power-up values, its PMDs 0, so the next side learns nothing of it
    /// and none of its monitors counts or captures; then the PMU is
    /// unfrozen, unless it was frozen for another reason when saved. A PMC
    /// write per PMC in use, a PMD write per PMD in use, 1 PMC read and 1
    /// PMC write.
    pub fn scrub<R: PmcPmdBackend>(&self, regs: &mut R) -> Result<(), R::Error> {
        for pmc in self.pmcs_used.iter() {
            if let Some(info) = self.generation.pmc(pmc) {
                regs.write_pmc(pmc, info.default)?;
            }
        }
        for pmd in self.pmds_used.iter() {
            regs.write_pmd(pmd, 0)?;
        }
        let now = Pmc0::from_bits(regs.read_pmc(0)?);
        regs.write_pmc(0, now.with_frozen(self.frozen_after).bits())
    }

    /// Puts the context on the PMU: frozen first, its PMCs (its monitors
    /// with `plm` zero while its virtual PMC0 is frozen), its PMDs, and
    /// PMC0 last, with its freeze bit as it was (the host's). 2 PMC writes
    /// and a PMC read, plus one write per PMC and PMD in use.
    pub fn restore<R: PmcPmdBackend>(&self, regs: &mut R) -> Result<(), R::Error> {
        let was = Pmc0::from_bits(regs.read_pmc(0)?);
        regs.write_pmc(0, was.with_frozen(true).bits())?;
        for pmc in self.pmcs_used.iter() {
            regs.write_pmc(pmc, self.hardware_pmc(pmc))?;
        }
        for pmd in self.pmds_used.iter() {
            regs.write_pmd(pmd, self.pmds[usize::from(pmd)])?;
        }
        regs.write_pmc(0, was.bits())
    }

    /// The side writes its PMC0 while its context is loaded (a guest's
    /// [`PmcWrite::Virtual`]): the virtual PMC0 takes the value (its freeze
    /// and its counters' overflow bits), and its monitors' hardware `plm`
    /// follows the freeze. Call [`PmuContext::take_overflows`] first. A PMC
    /// write per monitor PMC in use.
    pub fn write_pmc0<R: PmcPmdBackend>(
        &mut self,
        regs: &mut R,
        value: u64,
    ) -> Result<(), R::Error> {
        self.pmc0 = value & self.pmc0_bits();
        self.write_monitors(regs)
    }
}

#[cfg(test)]
mod tests;

//! The Itanium driver: typestate counters ([`crate::counter`]) over the
//! generic PMC/PMD pairs (PMC/PMD4-7 on Itanium and Itanium 2, 4-15 on
//! Montecito; Linux perfmon's per-model PMU tables), with exact
//! register traffic, and event-address sampling through the I-EAR.
//!
//! # Register access
//!
//! Itanium software reaches the PMU with the `mov pmc[r] = r` / `mov r =
//! pmd[r]` instructions (SDM Vol. 3, `mov` indirect register file), through
//! the crate's one access layer: [`crate::access::PmcPmdAccess`], beside the
//! IA-32 [`crate::access::MsrAccess`]. Rust has no IA-64 target, so the
//! crate cannot emit them; the register-level model
//! (`crate::model::itanium::ItaniumModel`, a test instrument, feature
//! `model`) implements the trait, and [`crate::access::Recording`] counts
//! and logs every access, as it does for MSRs.
//!
//! # Starting and stopping one counter
//!
//! The architecture has four ways to stop counting (SDM Vol. 2 7.2; Intel
//! VTune's Itanium event help): PMC0.fr freezes *every* counter; PSR.up /
//! PSR.pp stop every user / privileged monitor; Itanium 2's PMC4 bit 23
//! powers *all four* counters (libpfm3 `pmc_ita2_counter_reg`: "pmc4 only:
//! power enable bit"); only the counter's own `plm` field is per counter:
//! "Writing zeroes to all plm bits effectively disables the monitor"
//! (VTune, PLM). So:
//!
//! * **enable / resume** write the counter's PMC with its privilege level
//!   mask; **halt** writes it with `plm` = 0 (Linux perfmon masks monitoring
//!   the same way, `pmc & ~0xf`, in `pfm_mask_monitoring`);
//! * PMC0.fr is cleared once by [`ItaniumDriver::take`] and afterwards only
//!   by the overflow handler; the Itanium 2 enable bit keeps its power-up
//!   value 1 (PMC4's image always carries it, [`pmc::CounterPmc::new`]);
//! * PSR.pp (privileged monitors, `pm` = 1) or PSR.up (`pm` = 0) is the
//!   kernel's to set once (`ssm psr.pp; srlz.d`, as the perf_events port's
//!   `arch/ia64/kernel/perf_event.c` does); this trait has no PSR access.
//!
//! VTune's help adds that with `plm` zero "the Itanium processor will not
//! preserve the value of the corresponding PMD register(s)". On the
//! first-generation Itanium (the processor that dialog describes: 7-bit
//! `es`, 2-bit threshold on PMC6/7) a halt therefore reads the PMD and the
//! resume writes it back; Itanium 2 and Montecito keep the count. On the
//! first-generation Itanium a sampling counter halted after its overflow
//! but before the interrupt was taken cannot leave that overflow to the
//! handler (which would reload a PMD that is not preserved, and the resume
//! would overwrite the reload): the halt accounts for the period itself
//! ([`PmiState::periods_at_halt`]), withdraws the overflow from PMC0 as a
//! release does, and saves the counter at the same point of the next
//! period; the late interrupt is spurious. On Itanium 2 and Montecito the
//! halted counter keeps its overflow for the handler.
//!
//! # Register traffic per operation
//!
//! Asserted exactly in the tests (`driver/tests.rs`) with [`crate::access::Recording`]:
//!
//! | operation | PMC reads | PMC writes | PMD reads | PMD writes | what |
//! |---|---|---|---|---|---|
//! | [`ItaniumDriver::take`] | 0 | 2 + counters + 3 | 0 | counters | PMC0 = fr, every counter PMC at its power-up value, every counter PMD 0, the I-EAR, D-EAR and BTB PMCs at theirs, PMC0 = 0 |
//! | configure | 0 | 1 (+1 I-EAR, D-EAR or BTB PMC) | 0 | 1 (+1 BTB: PMD16 = 0) | the unit's PMC, the counter's PMC with `plm` 0, PMD preset (0, or `2^W - N`); a BTB counter empties the buffer |
//! | enable / resume | 0 | 1 | 0 | 0 (Itanium resume: 1) | PMC with `plm` |
//! | halt | 0 (Itanium, overflow pending: 1) | 1 (Itanium, overflow pending: 2) | 0 (Itanium: 1) | 0 | PMC with `plm` 0; Itanium: the PMD saved, a pending overflow accounted and withdrawn |
//! | read | 0 | 0 | 1 (Itanium, halted: 0) | 0 | the PMD, low W bits |
//! | release | 0 (sampling: 1) | 1 (+1 I-EAR, D-EAR or BTB PMC) (+1 if an overflow was pending) | 0 | 1 | PMC at its power-up value, PMD 0; a sampling counter's pending overflow withdrawn from PMC0 |
//! | overflow interrupt ([`super::pmi`]) | 1 | 1 | 1 per TLB-mode I-EAR sample, 2 per cache-mode I-EAR sample, 3 per D-EAR sample, 1 + records (+1 Montecito) per BTB sample (+1 per overflowed counter whose event can count more than 1 per cycle) | 1 per overflowed counter (+1 per BTB sample) | PMC0, captures, reloads, PMC0 = 0 last |
//!
//! # Interrupts inside driver calls
//!
//! The driver is called with the PMU interrupt held, whatever vector
//! delivers it: an ordinary one (PMV.vector 16-255) or vector 2, the NMI
//! (SDM Vol. 2 5.8.1). A group's freeze and thaw
//! ([`crate::counter::Driver::freeze`]), the release of a sampling counter
//! and, on the first-generation Itanium, its halt edit PMC0 by a
//! read-modify-write (the halt also accounts an overflow from a count it
//! read first), while the handler rewrites PMC0 whole, and PMC0 has no
//! atomic update (SDM Vol. 2 7.2.1: resetting the overflow and freeze bits
//! is software's responsibility): a handler run between the read and the
//! write leaves the PMU frozen with an overflow bit it already serviced, or
//! counts a period twice (`driver/tests/interrupts.rs` shows each). The
//! task priority does not hold vector 2 (TPR.mmi masks "essentially all
//! but NMI", SDM Vol. 2 Part 2 10.3.3): a kernel delivering the PMU
//! interrupt as the NMI holds it with PSR.i clear during driver calls
//! (no external interrupt, vector 2 included, is taken then, SDM Vol. 2
//! 5.8.2). The other calls (configure, enable, resume, read, the halt on
//! Itanium 2 and Montecito, the release of a counting counter) keep every
//! count exact with the interrupt taken at any of their accesses (tested
//! at every one).
//!
//! # Validation
//!
//! Every PMC value the driver writes for a configuration (the counter's
//! PMC with `oi` set exactly for sampling counters, and the I-EAR's PMC)
//! first passes the arch layer's [`Validator`] under [`Policy::STRICT`]
//! (implemented register, field widths, reserved bits at their power-up
//! values, catalog event on an allowed counter, threshold below the event's
//! maximum increment, EAR unit masks; see [`super::validate`]), then the
//! driver's own rules ([`ConfigError`]). A refused configuration writes
//! nothing and hands the unchanged handle back.
//!
//! # Sampling every Nth ITLB miss (HP Caliper's itlb measurement)
//!
//! [`CounterConfig::itlb_sampling`] programs the I-EAR in TLB mode
//! ([`IearConfig::tlb_misses`]) and a counter counting the I-EAR's own
//! event (INSTRUCTION_EAR_EVENTS 23h on Itanium, L1I_EAR_EVENTS 43h after,
//! unit mask 0: libpfm3's event tables), preset to `2^W - N` with `oi`. The
//! I-EAR counts one event per capture, so the Nth capture overflows the
//! counter, which freezes the PMU with that capture still in PMD0 (PMD34
//! on Montecito); the overflow handler reads it, reloads `2^W - N` and
//! unfreezes, which re-arms the I-EAR ([`super::pmi`]). N can come from
//! [`crate::sampling::calibrate`] over a counting run
//! ([`CounterConfig::itlb`] without sampling), as on NetBurst.
//!
//! # Sampling instruction cache misses through the I-EAR
//!
//! [`CounterConfig::icache_sampling`] programs the I-EAR in cache mode
//! ([`IearConfig::cache_misses`]: misses at or above a latency) and a
//! counter counting the I-EAR's event, as for ITLB misses; on its overflow
//! the handler reads PMD0 and PMD1 (PMD34 and PMD35 on Montecito) and
//! hands an [`IcacheSample`](super::ear::IcacheSample) to the sink: the
//! missed line, the latency and, from Itanium 2 on, whether the latency
//! overflowed, the capture's validity decoded per generation (Itanium PMD0
//! `v`, Itanium 2 and Montecito `stat`; libpfm3's I-EAR PMD layouts,
//! pfmon's sample printers), as VTune and pfmon sample the I-EAR's cache
//! mode. The handler reads them in the branch it keeps for the D-EAR and
//! the branch trace buffer. Which capture a sample carries follows the
//! I-EAR's mode, whichever constructor built the configuration.
//!
//! # Sampling the D-EAR and the branch trace buffer
//!
//! [`CounterConfig::dear_sampling`] programs the D-EAR (PMC11, Montecito
//! PMC40: `mode` cache, TLB or ALAT, the latency threshold in the unit
//! mask, `plm` and `pm`; the reference's Itanium 2 PMU tables, libpfm3's
//! D-EAR layouts) and a counter counting DATA_EAR_EVENTS
//! ([`dear_event_code`]); on its overflow the handler reads PMD2, PMD3 and
//! PMD17 (Montecito PMD32, PMD33, PMD36) and hands a decoded
//! [`DearSample`](super::ear::DearSample) (data address, latency or TLB
//! level, instruction bundle and slot) to the sink; `pmu-report`'s D-EAR report
//! groups them by function. [`CounterConfig::btb_sampling`] programs PMC12
//! (Montecito PMC39: `tm`, `ptm`, `ppm`, `plm`, `pm`) and a counter counting
//! BRANCH_EVENT ([`btb_event_code`]), and empties the buffer (PMD16 = 0);
//! on its overflow the handler reads the index PMD16 (PMD38 and PMD39),
//! the records it names (PMD8-15, PMD48-63) and empties it again, and the
//! sample's [`BtbSample::branches`](super::btb::BtbSample::branches) are
//! the source -> target records, oldest first. Both are read in a branch of
//! the handler marked cold, which the other counters skip with one test
//! ([`super::pmi`]).
//! One counter at a time owns each unit ([`Unit`], [`ConfigError::UnitBusy`]).
//!
//! Cascading does not exist on Itanium: [`Itanium`] implements no
//! [`crate::counter::Cascade`] pair, so `cascade_from` does not compile
//! (`tests/compile_fail.rs`), and [`crate::counter::AnyHandle`] refuses it
//! at run time.
//!
//! # Examples
//!
//! Take an Itanium 2 PMU (the model's), count CPU cycles on PMC/PMD4:
//!
//! (On a register-level model: a doc test with the `model` feature, ignored without it.)
//!
#![cfg_attr(feature = "model", doc = "```")]
#![cfg_attr(not(feature = "model"), doc = "```ignore")]
//! use pmu::arch::itanium::driver::{CounterConfig, ItaniumDriver};
//! use pmu::arch::itanium::Counter;
//! use pmu::arch::itanium::{CounterPmc, EventCode, Generation, ItaniumPmu, Plm};
//! use pmu::model::itanium::{Event, ItaniumModel, Psr};
//!
//! pmu::owner!(Cpu0);
//! // SAFETY: the one value for this processor's PMU (the model's).
//! static CPU0: ItaniumPmu = unsafe { ItaniumPmu::new() };
//! let g = Generation::Itanium2;
//! let mut model = ItaniumModel::new(pmu::model::itanium::Generation::Itanium2);
//! model.set_psr(Psr::MONITORING);                        // the kernel's PSR.pp / PSR.up
//! let (mut pmu, c) = ItaniumDriver::<Cpu0, _>::take(model, g, &CPU0)?;
//! let cycles = CounterPmc::new(Counter::new(g, 4).unwrap(), EventCode::new(g, 0x12).unwrap())?
//!     .with_plm(Plm::ALL)
//!     .with_privileged(true);
//! let c4 = c.c4.configure(&mut pmu, &CounterConfig::counting(cycles))?.enable(&mut pmu)?;
//! pmu.regs().inject(Event::new(0x12, 0, 500));
//! assert_eq!(c4.read(&mut pmu)?, 500);
//! let _ = c4.release(&mut pmu)?;
//! # Ok::<(), Box<dyn core::error::Error>>(())
//! ```

use core::fmt;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;

use super::btb::BtbConfig;
use super::ear::{DearConfig, IearConfig, IearMode};
use super::fields::Plm;
use super::generation::{Counter as HwCounter, CounterSet, Generation};
use super::physical::ItaniumPmu;
use super::pmi::{Captures, PmiState, overflow_rule};
use super::validate::{PmcError, Policy, Validator};
use super::{pmc, pmd};
use crate::access::{PmcPmdBackend, PmcPmdOps};
use crate::counter::owner::{self, Ending};
use crate::counter::state::Unclaimed;
use crate::counter::{self, Arch, Owner, OwnerId, StateTag};
use crate::sampling::SampleAfter;
use crate::sealed::{Sealed, Token};

/// The event a counter counts to sample the I-EAR: one occurrence per
/// capture, unit mask 0 (libpfm3 `itanium_events.h`: Itanium
/// INSTRUCTION_EAR_EVENTS 23h; `itanium2_events.h`, `montecito_events.h`:
/// Itanium 2 and Montecito L1I_EAR_EVENTS 43h).
pub const fn iear_event_code(generation: Generation) -> u8 {
    match generation {
        Generation::Itanium => 0x23,
        _ => 0x43,
    }
}

/// The event a counter counts to sample the D-EAR: one occurrence per
/// capture, unit mask 0 (libpfm3 `itanium_events.h`: Itanium
/// DATA_EAR_EVENTS 67h; `itanium2_events.h`, `montecito_events.h`:
/// DATA_EAR_EVENTS C8h).
pub const fn dear_event_code(generation: Generation) -> u8 {
    match generation {
        Generation::Itanium => 0x67,
        _ => 0xC8,
    }
}

/// The event a counter counts to sample the branch trace buffer:
/// BRANCH_EVENT 11h, one per captured branch, unit mask 0, on every
/// generation (libpfm3's event tables; Montecito's catalog names the same
/// code ETB_EVENT too).
pub const fn btb_event_code(_generation: Generation) -> u8 {
    0x11
}

/// A capture unit a counter can sample through: the instruction EAR, the
/// data EAR or the branch trace buffer (SDM Vol. 2 7.2; the reference's
/// Itanium 2 PMU tables: I-EAR PMC10, D-EAR PMC11, BTB PMC12). Each has one
/// configuration register, so one counter at a time owns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Unit {
    /// The instruction EAR (PMC10, Montecito PMC37).
    Iear,
    /// The data EAR (PMC11, Montecito PMC40).
    Dear,
    /// The branch trace buffer (PMC12; Montecito's execution trace buffer,
    /// PMC39).
    Btb,
}

impl Unit {
    /// Every unit.
    pub const ALL: [Unit; 3] = [Unit::Iear, Unit::Dear, Unit::Btb];

    /// The name the manuals use (Montecito's manual calls the branch trace
    /// buffer the execution trace buffer, ETB).
    pub const fn name(self) -> &'static str {
        match self {
            Unit::Iear => "I-EAR",
            Unit::Dear => "D-EAR",
            Unit::Btb => "branch trace buffer (ETB on Montecito)",
        }
    }

    /// The unit's configuration register on `generation`.
    pub const fn pmc(self, generation: Generation) -> u8 {
        match self {
            Unit::Iear => generation.iear_pmc(),
            Unit::Dear => generation.dear_pmc(),
            Unit::Btb => generation.btb_pmc(),
        }
    }

    /// The event a counter sampling the unit counts, unit mask 0.
    pub const fn event_code(self, generation: Generation) -> u8 {
        match self {
            Unit::Iear => iear_event_code(generation),
            Unit::Dear => dear_event_code(generation),
            Unit::Btb => btb_event_code(generation),
        }
    }

    const fn slot(self) -> usize {
        self as usize
    }
}

/// The Itanium architecture, as a type parameter of [`counter::Handle`].
/// No [`counter::Cascade`] impls: Itanium counters do not cascade.
#[derive(Debug)]
pub enum Itanium {}

/// An Itanium counter handle: counter `N` (PMC/PMD N) of the PMU owned by
/// `O`, in state `S`.
pub type ItaniumHandle<O, const N: u8, S> = counter::Handle<Itanium, O, N, S>;

/// What to count on a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CounterConfig {
    /// The counter's PMC image (from [`pmc::CounterPmc`]): event code,
    /// unit mask, privilege levels, `pm`, threshold, ism. Its `oi` bit is
    /// set by the driver exactly when `sampling` is.
    pub pmc: pmc::CounterPmc,
    /// Interrupt every N events (`None`: count only).
    pub sampling: Option<SampleAfter>,
    /// Program the I-EAR too (built with [`IearConfig`], e.g.
    /// [`IearConfig::tlb_misses`]), and hand its capture to the overflow
    /// handler with each sample (the counter must count the I-EAR event).
    pub iear: Option<IearConfig>,
    /// Program the D-EAR too (built with [`DearConfig`]: cache misses above
    /// a latency, TLB misses, ALAT misses), and hand its capture to the
    /// overflow handler with each sample (the counter must count the D-EAR
    /// event, [`dear_event_code`]).
    pub dear: Option<DearConfig>,
    /// Program the branch trace buffer too (built with [`BtbConfig`]), and
    /// hand its records to the overflow handler with each sample (the
    /// counter must count BRANCH_EVENT, [`btb_event_code`]).
    pub btb: Option<BtbConfig>,
}

impl CounterConfig {
    /// Count with `pmc`, without interrupts.
    pub const fn counting(pmc: pmc::CounterPmc) -> CounterConfig {
        CounterConfig {
            pmc,
            sampling: None,
            iear: None,
            dear: None,
            btb: None,
        }
    }

    /// Interrupt every `n` events.
    pub const fn sampling(mut self, n: SampleAfter) -> CounterConfig {
        self.sampling = Some(n);
        self
    }

    /// Count the instruction TLB misses the I-EAR captures: counter
    /// `counter` counts the I-EAR event ([`iear_event_code`]) at the
    /// I-EAR's privilege levels and `pm`, and the I-EAR is programmed with
    /// `iear` (for example `IearConfig::tlb_misses(g, TlbFills::ALL)`
    /// with a `plm`).
    /// Add [`CounterConfig::sampling`] to sample every Nth miss (as HP
    /// Caliper's itlb measurement does);
    /// each overflow then hands the Nth miss's capture to the handler.
    pub fn itlb(counter: HwCounter, iear: IearConfig) -> Result<CounterConfig, ConfigError> {
        let pmc = Self::unit_counter(counter, Unit::Iear, iear.plm(), iear.privileged())?;
        Ok(CounterConfig {
            iear: Some(iear),
            ..CounterConfig::counting(pmc)
        })
    }

    /// Counter `counter` counting `unit`'s event at privilege levels `plm`
    /// and `pm` = `privileged`.
    fn unit_counter(
        counter: HwCounter,
        unit: Unit,
        plm: Plm,
        privileged: bool,
    ) -> Result<pmc::CounterPmc, ConfigError> {
        let g = counter.generation();
        let code = super::fields::EventCode::new(g, unit.event_code(g))
            .ok_or(ConfigError::NotTheUnitEvent(unit))?;
        Ok(pmc::CounterPmc::new(counter, code)
            .map_err(|_| ConfigError::NotTheUnitEvent(unit))?
            .with_plm(plm)
            .with_privileged(privileged))
    }

    /// Count the data cache, data TLB or ALAT misses the D-EAR captures
    /// (SDM Vol. 2 7.2; the reference's Itanium 2 tables: PMC11 `mode`
    /// 0 cache, 1 TLB, 2 ALAT, the latency threshold in the unit mask):
    /// counter `counter` counts DATA_EAR_EVENTS ([`dear_event_code`]) at
    /// the D-EAR's privilege levels and `pm`, and the D-EAR is programmed
    /// with `dear` (for example `DearConfig::cache_misses(g,
    /// LatencyFilter::AtLeast64)` with a `plm`). Add
    /// [`CounterConfig::sampling`] to sample every Nth capture: each
    /// overflow hands the Nth capture (data address, latency or TLB level,
    /// instruction address) to the handler's sink.
    pub fn dear(counter: HwCounter, dear: DearConfig) -> Result<CounterConfig, ConfigError> {
        let pmc = Self::unit_counter(counter, Unit::Dear, dear.plm(), dear.privileged())?;
        Ok(CounterConfig {
            dear: Some(dear),
            ..CounterConfig::counting(pmc)
        })
    }

    /// [`CounterConfig::dear`] with sample-after `n`.
    pub fn dear_sampling(
        counter: HwCounter,
        n: SampleAfter,
        dear: DearConfig,
    ) -> Result<CounterConfig, ConfigError> {
        Ok(Self::dear(counter, dear)?.sampling(n))
    }

    /// Count the branches the branch trace buffer captures (PMC12, Montecito
    /// PMC39: `tm` taken / not taken, `ptm` and `ppm` predicted /
    /// mispredicted, `plm` and `pm`): counter `counter` counts BRANCH_EVENT
    /// ([`btb_event_code`]) at the buffer's privilege levels and `pm`, and
    /// the buffer is programmed with `btb` and emptied (index 0). Add
    /// [`CounterConfig::sampling`] to sample every Nth branch: each overflow
    /// hands the buffer's records to the handler's sink, and the handler
    /// empties it for the next sample.
    pub fn btb(counter: HwCounter, btb: BtbConfig) -> Result<CounterConfig, ConfigError> {
        let pmc = Self::unit_counter(counter, Unit::Btb, btb.plm(), btb.privileged())?;
        Ok(CounterConfig {
            btb: Some(btb),
            ..CounterConfig::counting(pmc)
        })
    }

    /// [`CounterConfig::btb`] with sample-after `n`.
    pub fn btb_sampling(
        counter: HwCounter,
        n: SampleAfter,
        btb: BtbConfig,
    ) -> Result<CounterConfig, ConfigError> {
        Ok(Self::btb(counter, btb)?.sampling(n))
    }

    /// The capture units the configuration programs, with their PMC
    /// images and generations.
    fn units(&self) -> impl Iterator<Item = (Unit, Generation, u64)> {
        let iear = self.iear.map(|c| (Unit::Iear, c.generation(), c.bits()));
        let dear = self.dear.map(|c| (Unit::Dear, c.generation(), c.bits()));
        let btb = self.btb.map(|c| (Unit::Btb, c.generation(), c.bits()));
        iear.into_iter().chain(dear).chain(btb)
    }

    /// Count the instruction cache misses the I-EAR captures in cache mode
    /// (`iear` built with [`IearConfig::cache_misses`], with a `plm`): the
    /// same counter as [`CounterConfig::itlb`] (the I-EAR's event, at the
    /// I-EAR's privilege levels and `pm`). Add [`CounterConfig::sampling`]
    /// to sample every Nth miss at or above the latency: each overflow
    /// hands the Nth capture (line, latency) to the handler's sink as
    /// [`Capture::icache`](super::pmi::Capture::icache).
    pub fn icache(counter: HwCounter, iear: IearConfig) -> Result<CounterConfig, ConfigError> {
        Self::itlb(counter, iear)
    }

    /// [`CounterConfig::icache`] with sample-after `n`.
    pub fn icache_sampling(
        counter: HwCounter,
        n: SampleAfter,
        iear: IearConfig,
    ) -> Result<CounterConfig, ConfigError> {
        Ok(Self::icache(counter, iear)?.sampling(n))
    }

    /// [`CounterConfig::itlb`] with sample-after `n`.
    pub fn itlb_sampling(
        counter: HwCounter,
        n: SampleAfter,
        iear: IearConfig,
    ) -> Result<CounterConfig, ConfigError> {
        Ok(Self::itlb(counter, iear)?.sampling(n))
    }
}

/// Why the driver refused a configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ConfigError {
    /// The PMC image is for another generation.
    WrongGeneration {
        /// The driver's.
        expected: Generation,
        /// The image's.
        found: Generation,
    },
    /// The PMC image is for another counter than the handle's.
    WrongCounter {
        /// The handle's counter.
        handle: u8,
        /// The image's counter.
        image: u8,
    },
    /// The arch layer's [`Validator`] (Linux perfmon's `pfm_write_pmcs`
    /// checks, under [`Policy::STRICT`]) refused a PMC value.
    Pmc(PmcError),
    /// The configuration of this capture unit is for another generation.
    UnitGeneration(Unit),
    /// `plm` is zero: the counter would never count (VTune's Itanium event
    /// help, PLM).
    NoPrivilegeLevel,
    /// The sample-after value was checked against another counter width
    /// (use [`overflow_rule`]).
    SampleAfterRule,
    /// A counter programming a capture unit must count that unit's event
    /// ([`Unit::event_code`]) with unit mask 0 (libpfm3 programs an EAR or
    /// BTB event's counter with unit mask 0); a counter programs one unit.
    NotTheUnitEvent(Unit),
    /// Another claimed counter owns the capture unit.
    UnitBusy {
        /// The unit.
        unit: Unit,
        /// Its owner's counter.
        owner: u8,
    },
    /// No counter has this number on this generation.
    NoSuchCounter(u8),
    /// The counter is claimed already (only a hand-built
    /// [`crate::counter::AnyHandle`] could ask; the typed handles cannot).
    CounterClaimed(u8),
    /// Itanium counters do not cascade (only a hand-built
    /// [`crate::counter::AnyHandle`] can ask).
    NoCascade,
    /// A context (a task's counters, [`crate::arch::Switch`]) carries no
    /// capture unit (I-EAR, D-EAR, branch trace buffer): one per processor,
    /// whose captures are not the counter's.
    NotInContext,
}

/// A driver error: a refused configuration, or a refused register access
/// (only a model refuses).
pub type Error<E> = counter::DriverError<ConfigError, E>;

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::WrongGeneration { expected, found } => write!(
                f,
                "the PMC image is for {}, the driver for {}",
                found.name(),
                expected.name()
            ),
            ConfigError::WrongCounter { handle, image } => write!(
                f,
                "the PMC image is for counter {image}, the handle is counter {handle}"
            ),
            ConfigError::Pmc(e) => write!(f, "{e}"),
            ConfigError::UnitGeneration(u) => {
                write!(
                    f,
                    "the {} configuration is for another generation",
                    u.name()
                )
            }
            ConfigError::NoPrivilegeLevel => {
                f.write_str("plm is zero: the counter would never count")
            }
            ConfigError::SampleAfterRule => {
                f.write_str("the sample-after value was checked against another counter width")
            }
            ConfigError::NotTheUnitEvent(u) => write!(
                f,
                "a counter programming the {0} must count the {0}'s event with unit mask 0, \
                 and program no other unit",
                u.name()
            ),
            ConfigError::UnitBusy { unit, owner } => {
                write!(f, "counter {owner} owns the {}", unit.name())
            }
            ConfigError::NoSuchCounter(n) => write!(f, "this generation has no counter {n}"),
            ConfigError::CounterClaimed(n) => write!(f, "counter {n} is claimed"),
            ConfigError::NoCascade => f.write_str("Itanium counters do not cascade"),
            ConfigError::NotInContext => f.write_str(
                "a task's counters carry no I-EAR, D-EAR or branch trace buffer: their captures are the processor's, not the counter's",
            ),
        }
    }
}

/// What a claimed Itanium counter remembers: the register images.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Programmed {
    pmc: u64,
    stopped: u64,
    iear: Option<IearConfig>,
    dear: Option<DearConfig>,
    btb: Option<BtbConfig>,
    sampling: Option<SampleAfter>,
    one_per_cycle: bool,
}

impl Programmed {
    /// The counter's PMC image while counting (with its `plm`).
    pub const fn pmc(&self) -> u64 {
        self.pmc
    }

    /// The PMC image while not counting: `plm` 0 (VTune's Itanium event
    /// help, PLM).
    pub const fn pmc_stopped(&self) -> u64 {
        self.stopped
    }

    /// The I-EAR configuration, for an I-EAR counter.
    pub const fn iear(&self) -> Option<IearConfig> {
        self.iear
    }

    /// The D-EAR configuration, for a D-EAR counter.
    pub const fn dear(&self) -> Option<DearConfig> {
        self.dear
    }

    /// The branch trace buffer configuration, for a BTB counter.
    pub const fn btb(&self) -> Option<BtbConfig> {
        self.btb
    }

    /// The capture unit the counter programs, with its PMC image.
    pub const fn unit(&self) -> Option<(Unit, u64)> {
        match (self.iear, self.dear, self.btb) {
            (Some(c), _, _) => Some((Unit::Iear, c.bits())),
            (_, Some(c), _) => Some((Unit::Dear, c.bits())),
            (_, _, Some(c)) => Some((Unit::Btb, c.bits())),
            _ => None,
        }
    }

    /// What the overflow handler reads with each overflow.
    const fn captures(&self) -> Captures {
        match (self.dear, self.btb, self.iear) {
            (Some(c), _, _) => Captures::Dear(c),
            (_, Some(c), _) => Captures::Btb(c),
            (_, _, Some(e)) => match e.mode() {
                IearMode::TlbMiss => Captures::Itlb,
                IearMode::CacheMiss => Captures::Icache,
                IearMode::Off => Captures::Nothing,
            },
            _ => Captures::Nothing,
        }
    }

    /// The sample-after value, for a sampling counter.
    pub const fn sampling(&self) -> Option<SampleAfter> {
        self.sampling
    }

    /// Whether the counter drives an I-EAR in TLB mode, whose capture the
    /// overflow handler reads and hands on as an
    /// [`ItlbSample`](super::ear::ItlbSample).
    pub const fn captures_itlb(&self) -> bool {
        matches!(self.iear, Some(e) if matches!(e.mode(), IearMode::TlbMiss))
    }

    /// Whether the counter drives an I-EAR in cache mode, whose capture
    /// (line, latency) the overflow handler reads and hands on as an
    /// [`IcacheSample`](super::ear::IcacheSample).
    pub const fn captures_icache(&self) -> bool {
        matches!(self.iear, Some(e) if matches!(e.mode(), IearMode::CacheMiss))
    }

    /// Whether the counter gains at most one per cycle: a non-zero
    /// threshold (one per cycle whose count exceeds it, VTune's Itanium
    /// event help) or a catalog event whose maximum increment is 1, or the
    /// I-EAR event (libpfm3's event tables: maximum increment 1).
    /// Then an overflow leaves the frozen counter at exactly 0 and the
    /// overflow handler reloads without reading it ([`super::pmi`]).
    pub const fn one_per_cycle(&self) -> bool {
        self.one_per_cycle
    }
}

impl Sealed for Itanium {}

impl Arch for Itanium {
    const NAME: &'static str = "Itanium";
    const COUNTERS: u8 = 16;
    type Programmed = Programmed;
    const UNPROGRAMMED: Programmed = Programmed {
        pmc: 0,
        stopped: 0,
        iear: None,
        dear: None,
        btb: None,
        sampling: None,
        one_per_cycle: false,
    };

    /// Never: no Itanium generation cascades counters (SDM Vol. 2 7.2 has
    /// no such mechanism, nor have libpfm3's counter layouts).
    fn can_cascade(_from: u8, _to: u8) -> bool {
        false
    }
}

/// The claim tokens of the PMU owned by `O`, handed out once by
/// [`ItaniumDriver::take`]: PMC/PMD4-7, and on Montecito also 8-15.
#[derive(Debug)]
#[allow(missing_docs)]
pub struct Counters<O: Owner> {
    pub c4: ItaniumHandle<O, 4, Unclaimed>,
    pub c5: ItaniumHandle<O, 5, Unclaimed>,
    pub c6: ItaniumHandle<O, 6, Unclaimed>,
    pub c7: ItaniumHandle<O, 7, Unclaimed>,
    /// Montecito's counters 8-15 (`None` before Montecito).
    pub montecito: Option<MontecitoCounters<O>>,
}

/// Montecito's counters 8-15 (Linux perfmon's Montecito table,
/// `perfmon_montecito.h`: PMC/PMD4-15).
#[derive(Debug)]
#[allow(missing_docs)]
pub struct MontecitoCounters<O: Owner> {
    pub c8: ItaniumHandle<O, 8, Unclaimed>,
    pub c9: ItaniumHandle<O, 9, Unclaimed>,
    pub c10: ItaniumHandle<O, 10, Unclaimed>,
    pub c11: ItaniumHandle<O, 11, Unclaimed>,
    pub c12: ItaniumHandle<O, 12, Unclaimed>,
    pub c13: ItaniumHandle<O, 13, Unclaimed>,
    pub c14: ItaniumHandle<O, 14, Unclaimed>,
    pub c15: ItaniumHandle<O, 15, Unclaimed>,
}

impl<O: Owner> Counters<O> {
    fn issue(generation: Generation) -> Counters<O> {
        Counters {
            c4: counter::Handle::token(),
            c5: counter::Handle::token(),
            c6: counter::Handle::token(),
            c7: counter::Handle::token(),
            montecito: matches!(generation, Generation::Montecito).then(|| MontecitoCounters {
                c8: counter::Handle::token(),
                c9: counter::Handle::token(),
                c10: counter::Handle::token(),
                c11: counter::Handle::token(),
                c12: counter::Handle::token(),
                c13: counter::Handle::token(),
                c14: counter::Handle::token(),
                c15: counter::Handle::token(),
            }),
        }
    }

    /// The tokens as run-time handles, indexed by counter number less 4
    /// (PMC4 first; `None` for Montecito's counters 8-15 on an earlier
    /// generation), for code that picks counters at run time.
    pub fn erase_all(self) -> [Option<counter::AnyHandle<Itanium>>; 12] {
        let m = self.montecito.map(|m| {
            [
                m.c8.erase(),
                m.c9.erase(),
                m.c10.erase(),
                m.c11.erase(),
                m.c12.erase(),
                m.c13.erase(),
                m.c14.erase(),
                m.c15.erase(),
            ]
        });
        let mut all = [const { None }; 12];
        all[0] = Some(self.c4.erase());
        all[1] = Some(self.c5.erase());
        all[2] = Some(self.c6.erase());
        all[3] = Some(self.c7.erase());
        if let Some(m) = m {
            for (slot, h) in all[4..].iter_mut().zip(m) {
                *slot = Some(h);
            }
        }
        all
    }

    /// The tokens back from run-time handles (as [`Counters::erase_all`]
    /// made them): each counter `4 + i` at index `i`, Unclaimed, issued
    /// for owner `O`, counters 8-15 all present or all absent; otherwise
    /// they come back unchanged.
    #[allow(clippy::result_large_err, reason = "the handles come back by value")]
    pub fn from_erased(
        all: [Option<counter::AnyHandle<Itanium>>; 12],
    ) -> Result<Counters<O>, [Option<counter::AnyHandle<Itanium>>; 12]> {
        let mut present = 0u16;
        let mut whole = true;
        for (i, h) in all.iter().enumerate() {
            if let Some(h) = h {
                present |= 1 << i;
                whole &= h.owner() == OwnerId::of::<O>()
                    && usize::from(h.index()) == i + 4
                    && h.state() == StateTag::Unclaimed;
            }
        }
        // PMC4-7 always; 8-15 together (Montecito) or not at all.
        whole &= present == 0x00F || present == 0xFFF;
        if !whole {
            return Err(all);
        }
        // An Unclaimed handle carries nothing but its identity: the checked
        // ones are these tokens.
        Ok(Counters::issue(if present == 0xFFF {
            Generation::Montecito
        } else {
            Generation::Itanium2
        }))
    }
}

/// Why the driver could not take the PMU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum InitError<E> {
    /// A driver for this owner is live: the PMU has its owner already.
    AlreadyTaken,
    /// The driver of this owner was dropped without `give_back`: the owner
    /// is held for good ([`crate::counter::owner`]); take the PMU for
    /// another owner type.
    OwnerDropped {
        /// The owner type's name.
        owner: &'static str,
    },
    /// A live driver holds this processor's PMU ([`ItaniumPmu`]).
    PmuTaken,
    /// Resetting the PMU registers was refused (only a model refuses).
    Access(E),
}

impl<E: fmt::Debug> fmt::Display for InitError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InitError::AlreadyTaken => f.write_str("the PMU's owner is taken by a live driver"),
            InitError::OwnerDropped { owner } => owner::write_dropped(f, owner),
            InitError::PmuTaken => f.write_str("a live driver holds this processor's PMU already"),
            InitError::Access(e) => write!(f, "resetting the PMU registers was refused: {e:?}"),
        }
    }
}

impl<E: fmt::Debug> core::error::Error for InitError<E> {}

impl core::error::Error for ConfigError {}

/// The driver of the PMU of one Itanium processor ([`ItaniumPmu`]), held
/// for owner `O`, owning the register backend.
pub struct ItaniumDriver<'s, O: Owner, R: PmcPmdBackend> {
    regs: R,
    generation: Generation,
    pmu: &'s ItaniumPmu,
    /// The counter owning each capture unit, by [`Unit`].
    unit_owner: [Option<u8>; 3],
    validator: Validator,
    /// Itanium only: the count of a halted counter (its PMD is not
    /// preserved while `plm` is zero, VTune's Itanium event help).
    saved: [Option<u64>; 16],
    claimed: CounterSet,
    /// While a group holds the PMU frozen ([`counter::Driver::freeze`]):
    /// PMC0 as it was before, with the overflow bits the driver has
    /// withdrawn since cleared; thawing writes it back.
    before_freeze: Option<pmc::Pmc0>,
    /// Brackets opened inside the outermost one.
    freeze_nesting: u8,
    _owner: PhantomData<O>,
}

impl<'s, O: Owner, R: PmcPmdBackend> ItaniumDriver<'s, O, R> {
    /// Take the PMU of owner `O`, of `generation`: freeze it (PMC0 = fr), put
    /// every counter PMC at its power-up value (`plm` 0: stopped; Itanium 2
    /// PMC4 keeps its enable bit 23), zero every counter PMD, reset the
    /// I-EAR, D-EAR and branch trace buffer PMCs, then unfreeze (PMC0 = 0: fr and every overflow bit clear, as
    /// Linux perfmon's `pfm_unfreeze_pmu` does). `pmu` is the processor's
    /// PMU ([`ItaniumPmu`]), whose handler state is reset here. Refused,
    /// before any register is touched and with the live driver's state
    /// untouched, while a driver of `O` is live ([`InitError::AlreadyTaken`],
    /// [`crate::counter::owner`]) or a live driver holds `pmu`
    /// ([`InitError::PmuTaken`]).
    pub fn take(
        mut regs: R,
        generation: Generation,
        pmu: &'s ItaniumPmu,
    ) -> Result<(Self, Counters<O>), InitError<R::Error>> {
        match owner::take::<O>() {
            Ok(()) => {}
            Err(owner::Taken::Live) => return Err(InitError::AlreadyTaken),
            Err(owner::Taken::Dropped) => {
                return Err(InitError::OwnerDropped {
                    owner: core::any::type_name::<O>(),
                });
            }
        }
        if !pmu.take() {
            owner::give_back::<O>();
            return Err(InitError::PmuTaken);
        }
        if let Err(e) = Self::reset(&mut regs, generation) {
            pmu.give_back();
            owner::give_back::<O>();
            return Err(InitError::Access(e));
        }
        pmu.pmi().reset(generation);
        let driver = ItaniumDriver {
            regs,
            generation,
            pmu,
            unit_owner: [None; 3],
            validator: Validator::new(generation, Policy::STRICT),
            saved: [None; 16],
            claimed: CounterSet::EMPTY,
            before_freeze: None,
            freeze_nesting: 0,
            _owner: PhantomData,
        };
        Ok((driver, Counters::issue(generation)))
    }

    fn reset(regs: &mut R, generation: Generation) -> Result<(), R::Error> {
        regs.write_pmc(0, pmc::Pmc0::FROZEN.bits())?;
        for n in generation.counters().iter() {
            let default = generation.pmc(n).map_or(0, |i| i.default);
            regs.write_pmc(n, default)?;
            regs.write_pmd(n, 0)?;
        }
        for unit in Unit::ALL {
            let n = unit.pmc(generation);
            regs.write_pmc(n, generation.pmc(n).map_or(0, |i| i.default))?;
        }
        regs.write_pmc(0, pmc::Pmc0::UNFROZEN.bits())
    }

    /// Give the PMU back with every claim token this driver issued, and get
    /// the backend back: owner `O` and the PMU are free again. `counters`
    /// holds the tokens Unclaimed (released handles; a run-time one comes
    /// back with `Handle::from_erased`), so no handle of this driver
    /// outlives it and nothing is claimed: a type guarantee, without a
    /// register access. `Err` gives both back when `counters` lacks
    /// Montecito's counters 8-15 on Montecito (or has them elsewhere).
    #[allow(
        clippy::result_large_err,
        reason = "the error hands the driver back by value: a no_std crate has no Box"
    )]
    pub fn give_back(self, counters: Counters<O>) -> Result<R, (Self, Counters<O>)> {
        let montecito = matches!(self.generation, Generation::Montecito);
        if counters.montecito.is_some() != montecito {
            return Err((self, counters));
        }
        Ok(self.into_backend(Ending::GivenBack))
    }

    /// Tests only: free the owner although handles may remain (loop tests
    /// whose handles die with each round).
    #[cfg(test)]
    pub(crate) fn retire(self) {
        let _ = self.into_backend(Ending::GivenBack);
    }

    /// Ends the driver (as `how` says) and moves its backend out.
    fn into_backend(self, how: Ending) -> R {
        let mut this = ManuallyDrop::new(self);
        this.end(how);
        // SAFETY: `this` is never dropped (`ManuallyDrop`) or used after
        // this read, so the backend is moved out exactly once. The fields
        // left behind own nothing that needs dropping (a reference, sets,
        // saved counts, the validator's images).
        unsafe { core::ptr::read(&this.regs) }
    }

    /// Ends the driver: if it still claims a counter (never when it is
    /// given back with every token), the PMU is reset as [`ItaniumDriver::take`]
    /// resets it (frozen, every counter and capture PMC at its power-up
    /// value, every counter PMD 0, unfrozen) and the handler's state with
    /// it, so nothing of it counts or interrupts; then the processor's PMU
    /// and owner `O` are given back (or `O` held for good, when the driver
    /// was dropped). A refused access (only a model refuses) stops the
    /// reset there.
    fn end(&mut self, how: Ending) {
        if !self.claimed.is_empty() || self.before_freeze.is_some() {
            let _ = Self::reset(&mut self.regs, self.generation);
            self.pmu.pmi().reset(self.generation);
        }
        self.pmu.give_back();
        owner::end::<O>(how);
    }

    /// The counters claimed through this driver's handles.
    pub const fn claimed(&self) -> CounterSet {
        self.claimed
    }

    /// Where this driver counts core cycles (`CPU_CYCLES`, event 12H,
    /// which every counter of every generation takes): the first
    /// unclaimed counter from 4, at every privilege level, monitored as a
    /// privileged monitor. `None` when every counter is claimed.
    pub fn core_cycles(&self) -> Option<(u8, CounterConfig)> {
        let g = self.generation;
        let event = super::EventCode::new(g, 0x12)?;
        g.counters().iter().find_map(|n| {
            if self.claimed.contains(n) {
                return None;
            }
            let pmc = pmc::CounterPmc::new(HwCounter::new(g, n)?, event).ok()?;
            Some((
                n,
                CounterConfig::counting(pmc.with_plm(Plm::ALL).with_privileged(true)),
            ))
        })
    }

    /// The register backend.
    pub fn regs(&mut self) -> &mut R {
        &mut self.regs
    }

    /// The generation.
    pub const fn generation(&self) -> Generation {
        self.generation
    }

    /// The state shared with the overflow handler.
    pub const fn pmi_state(&self) -> &'s PmiState {
        self.pmu.pmi()
    }

    /// The processor's PMU this driver was taken from.
    pub const fn physical(&self) -> &'s ItaniumPmu {
        self.pmu
    }

    /// Check `c` for counter `n` and build its images. Every PMC value
    /// goes through the arch layer's [`Validator`] under [`Policy::STRICT`]
    /// (implemented register, field widths, reserved bits, catalog event and
    /// counter, EAR unit masks: `validate.rs`), plus the driver's own
    /// rules (generation, counter, `plm`, sample-after rule, the capture
    /// unit's event and ownership).
    fn build_programmed(&self, n: u8, c: &CounterConfig) -> Result<Programmed, ConfigError> {
        HwCounter::new(self.generation, n).ok_or(ConfigError::NoSuchCounter(n))?;
        if self.claimed.contains(n) {
            return Err(ConfigError::CounterClaimed(n));
        }
        self.image_of(n, c)
    }

    /// The images of `c` on counter `n`, whether or not it is free.
    fn image_of(&self, n: u8, c: &CounterConfig) -> Result<Programmed, ConfigError> {
        let g = self.generation;
        HwCounter::new(g, n).ok_or(ConfigError::NoSuchCounter(n))?;
        let image = c.pmc;
        if image.counter().generation() != g {
            return Err(ConfigError::WrongGeneration {
                expected: g,
                found: image.counter().generation(),
            });
        }
        if image.counter().index() != n {
            return Err(ConfigError::WrongCounter {
                handle: n,
                image: image.counter().index(),
            });
        }
        if image.plm().get() == 0 {
            return Err(ConfigError::NoPrivilegeLevel);
        }
        if c.sampling.is_some_and(|s| s.rule() != overflow_rule(g)) {
            return Err(ConfigError::SampleAfterRule);
        }
        let image = image.with_overflow_interrupt(c.sampling.is_some());
        let pmc = self
            .validator
            .check(n, image.bits())
            .map_err(ConfigError::Pmc)?
            .value;
        let mut units = 0;
        for (unit, generation, bits) in c.units() {
            units += 1;
            if generation != g {
                return Err(ConfigError::UnitGeneration(unit));
            }
            if units > 1 || image.es() != unit.event_code(g) || image.umask().get() != 0 {
                return Err(ConfigError::NotTheUnitEvent(unit));
            }
            if let Some(owner) = self.unit_owner[unit.slot()].filter(|&o| o != n) {
                return Err(ConfigError::UnitBusy { unit, owner });
            }
            self.validator
                .check(unit.pmc(g), bits)
                .map_err(ConfigError::Pmc)?;
        }
        // The EAR and BTB events count one per capture on every generation
        // (libpfm3's event tables: maximum increment 1).
        let one_per_cycle = image.threshold().get() != 0
            || units > 0
            || matches!(
                super::events::rule(g, image.es(), image.umask().get()),
                Some(r) if r.max_increment == 1
            );
        let stopped = pmc::CounterPmc::from_bits_truncate(image.counter(), pmc)
            .with_plm(Plm::NONE)
            .bits();
        Ok(Programmed {
            pmc,
            stopped,
            iear: c.iear,
            dear: c.dear,
            btb: c.btb,
            sampling: c.sampling,
            one_per_cycle,
        })
    }

    fn reg<T>(r: Result<T, R::Error>) -> Result<T, Error<R::Error>> {
        r.map_err(Error::Access)
    }
}

/// A driver dropped without [`ItaniumDriver::give_back`] resets the PMU if
/// it still claims a counter and frees it; its owner stays held for good
/// ([`crate::counter::owner`]).
impl<O: Owner, R: PmcPmdBackend> Drop for ItaniumDriver<'_, O, R> {
    fn drop(&mut self) {
        self.end(Ending::Dropped);
    }
}

impl<O: Owner, R: PmcPmdBackend> Sealed for ItaniumDriver<'_, O, R> {}

impl<O: Owner, R: PmcPmdBackend> counter::DriverOf<Itanium, O> for ItaniumDriver<'_, O, R> {}

impl<O: Owner, R: PmcPmdBackend> counter::Driver<Itanium> for ItaniumDriver<'_, O, R> {
    type Owner = O;
    type Config = CounterConfig;
    type Error = Error<R::Error>;

    fn program(
        &mut self,
        _: Token,
        n: u8,
        config: &CounterConfig,
    ) -> Result<Programmed, Self::Error> {
        let p = self.build_programmed(n, config)?;
        let g = self.generation;
        if let Some((unit, bits)) = p.unit() {
            Self::reg(self.regs.write_pmc(unit.pmc(g), bits))?;
            if unit == Unit::Btb {
                // An empty buffer: the first sample holds only branches
                // after the configuration (PMD16 `bbi` 0, `full` 0).
                Self::reg(self.regs.write_pmd(g.btb_index_pmd(), 0))?;
            }
        }
        Self::reg(self.regs.write_pmc(n, p.pmc_stopped()))?;
        let preset = p.sampling.map_or(0, SampleAfter::preset);
        Self::reg(self.regs.write_pmd(n, preset))?;
        // Owned only once every write went through: a failed configuration
        // leaves the unit free.
        if let Some((unit, _)) = p.unit() {
            self.unit_owner[unit.slot()] = Some(n);
        }
        self.saved[usize::from(n)] = None;
        self.pmu
            .pmi()
            .set_sampling(n, p.sampling, p.captures(), p.one_per_cycle);
        self.claimed = self.claimed.with(n);
        Ok(p)
    }

    fn start(&mut self, _: Token, n: u8, p: &Programmed) -> Result<(), Self::Error> {
        if let Some(v) = self.saved[usize::from(n)] {
            Self::reg(self.regs.write_pmd(n, v))?;
            self.saved[usize::from(n)] = None;
        }
        Self::reg(self.regs.write_pmc(n, p.pmc))
    }

    fn stop(&mut self, _: Token, n: u8, p: &Programmed) -> Result<(), Self::Error> {
        Self::reg(self.regs.write_pmc(n, p.pmc_stopped()))?;
        if self.generation == Generation::Itanium {
            let raw = pmd::count(self.generation, Self::reg(self.regs.read_pmd(n))?);
            // An overflow whose interrupt is still pending left the counter
            // wrapped: account for it here and withdraw it (module docs),
            // and keep the same point of the next period.
            let v = match p.sampling {
                Some(s) => {
                    let (owed, residual) = s.split(raw);
                    if owed > 0 {
                        self.clear_pending_overflow(n)?;
                        self.pmu.pmi().add_halt_periods(n, owed);
                    }
                    s.at_residual(residual)
                }
                None => raw,
            };
            self.saved[usize::from(n)] = Some(v);
        }
        Ok(())
    }

    fn cascade(&mut self, _: Token, _n: u8, _from: u8, _p: &Programmed) -> Result<(), Self::Error> {
        Err(Error::Config(ConfigError::NoCascade))
    }

    fn overflow_rule(&self, n: u8) -> Option<crate::sampling::OverflowRule> {
        HwCounter::new(self.generation, n).map(|_| overflow_rule(self.generation))
    }

    fn read(&mut self, _: Token, n: u8, _p: &Programmed) -> Result<u64, Self::Error> {
        if let Some(v) = self.saved[usize::from(n)] {
            return Ok(v);
        }
        Ok(pmd::count(
            self.generation,
            Self::reg(self.regs.read_pmd(n))?,
        ))
    }

    fn release(&mut self, _: Token, n: u8, p: &Programmed) -> Result<(), Self::Error> {
        let g = self.generation;
        Self::reg(self.regs.write_pmc(n, g.pmc(n).map_or(0, |i| i.default)))?;
        Self::reg(self.regs.write_pmd(n, 0))?;
        if let Some((unit, _)) = p.unit() {
            let pmc = unit.pmc(g);
            Self::reg(
                self.regs
                    .write_pmc(pmc, g.pmc(pmc).map_or(0, |i| i.default)),
            )?;
            self.unit_owner[unit.slot()] = None;
        }
        if p.sampling.is_some() {
            self.clear_pending_overflow(n)?;
        }
        self.saved[usize::from(n)] = None;
        self.pmu
            .pmi()
            .set_sampling(n, None, Captures::Nothing, false);
        self.claimed = self.claimed.without(n);
        Ok(())
    }

    /// PMC0.fr set (SDM Vol. 2 7.2.1: no counter counts while it is), the
    /// rest of PMC0 kept: one read, one write, and one PMD read per
    /// counting sampling counter. The counters count until the write, and
    /// the write replaces PMC0, so the overflow bit of a sampling counter
    /// that overflows between the read and the write would be lost (its
    /// interrupt would find nothing, and the counter, wrapped, would not be
    /// re-armed): after the write, each counting sampling counter whose bit
    /// was clear is read, and one found wrapped past its preset has its bit
    /// put back, with the freeze, for the thaw to write, so that its
    /// interrupt samples it. Nested brackets freeze and thaw once.
    fn freeze(&mut self, _: Token) -> Result<(), Self::Error> {
        if self.before_freeze.is_some() {
            self.freeze_nesting = self.freeze_nesting.saturating_add(1);
            return Ok(());
        }
        let g = self.generation;
        let pmc0 = pmc::Pmc0::from_bits(Self::reg(self.regs.read_pmc(0))?);
        Self::reg(self.regs.write_pmc(0, pmc0.with_frozen(true).bits()))?;
        let mut before = pmc0;
        let unseen = CounterSet(self.pmu.pmi().sampling() & !pmc0.overflowed(g).0);
        for n in unseen.iter() {
            // Halted on Itanium: its count is saved, its PMD meaningless.
            if self.saved[usize::from(n) % 16].is_some() {
                continue;
            }
            let raw = pmd::count(g, Self::reg(self.regs.read_pmd(n))?);
            if let Some(counter) = HwCounter::new(g, n).filter(|_| self.pmu.pmi().wrapped(n, raw)) {
                before = before.with_overflow(counter, true).with_frozen(true);
            }
        }
        self.before_freeze = Some(before);
        Ok(())
    }

    /// PMC0 as before the freeze, less the overflows withdrawn meanwhile
    /// (frozen only if it was and an overflow is still pending, as
    /// `clear_pending_overflow` leaves it): one write. If the write fails
    /// the driver still knows the PMU frozen, and a second thaw retries.
    fn thaw(&mut self, _: Token) -> Result<(), Self::Error> {
        if self.freeze_nesting > 0 {
            self.freeze_nesting -= 1;
            return Ok(());
        }
        let Some(before) = self.before_freeze else {
            return Ok(());
        };
        let after = before.with_frozen(before.frozen() && before.any_overflow_bit());
        Self::reg(self.regs.write_pmc(0, after.bits()))?;
        self.before_freeze = None;
        Ok(())
    }
}

impl<O: Owner, R: PmcPmdBackend> ItaniumDriver<'_, O, R> {
    /// Withdraw counter `n`'s overflow whose interrupt has not been taken:
    /// clear its PMC0 overflow bit, and PMC0.fr with it when no other
    /// counter's overflow is pending (their interrupt still unfreezes the PMU
    /// then). Without this the next owner of the counter would find the PMU
    /// frozen and the stale overflow credited to its count (SDM Vol. 2
    /// 7.2.1: "software's responsibility to reset the overflow and freeze
    /// bits"). Only a counter with `oi` can have the bit, so only sampling
    /// counters pay the PMC0 read. The counter is already stopped and zeroed,
    /// so unfreezing cannot let it count. Like every driver call, this must
    /// not be interrupted by the overflow handler on this CPU (a kernel calls
    /// the driver with the PMU interrupt masked, as for any state it shares
    /// with a handler).
    fn clear_pending_overflow(&mut self, n: u8) -> Result<(), Error<R::Error>> {
        let g = self.generation;
        let Some(counter) = HwCounter::new(g, n) else {
            return Ok(());
        };
        // Under a group's freeze the bit is withdrawn from the value the
        // thaw writes back: no access now.
        if let Some(before) = &mut self.before_freeze {
            *before = before.with_overflow(counter, false);
            return Ok(());
        }
        let pmc0 = pmc::Pmc0::from_bits(Self::reg(self.regs.read_pmc(0))?);
        if !pmc0.overflowed(g).contains(n) {
            return Ok(());
        }
        let rest = pmc0.with_overflow(counter, false);
        let rest = rest.with_frozen(rest.any_overflow_bit());
        Self::reg(self.regs.write_pmc(0, rest.bits()))
    }
}

mod switch;

#[cfg(test)]
mod tests;

//! The Itanium overflow interrupt path: the state shared between the
//! counter handles and the handler, and the handler routine.
//!
//! A counter whose `oi` bit is set and that carries out of bit W-1 sets its
//! overflow bit in PMC0 and PMC0.fr, which freezes every counter (and the
//! EARs) at once, and raises one PMU interrupt (seed 000, `oi`: "a
//! Performance Monitor interrupt is raised and the performance monitor
//! freeze bit (PMC\[0\].fr) is set when the monitor overflows"; SDM Vol. 2
//! 7.2.1-7.2.2; reference section 1). The kernel's handler for the PMV
//! vector (Linux: 0xEE, reference section 9) calls [`handle_pmi`] with
//! the interrupted IIP. Per interrupt it issues exactly:
//!
//! | access | count | why |
//! |---|---|---|
//! | read PMC0 | 1 | the overflow bits say which counters overflowed (reference section 4) |
//! | read I-EAR PMD0 (PMD34 on Montecito) | 1 per overflowed I-EAR sampling counter | the captured address and fill level (reference section 5; seed 002). PMD1 holds a latency in cache mode only, so it is not read in TLB mode |
//! | read PMD n | 1 per overflowed counter that can gain more than 1 per cycle | an event counting k > 1 in the cycle that wrapped the counter leaves it at `r > 0` although the PMU froze at once; the reload must keep `r` ([`crate::sampling::SampleAfter::rearm`]). A counter that gains at most 1 per cycle ([`super::driver::Programmed::one_per_cycle`]: threshold set, or a catalog event with maximum increment 1) holds exactly 0, so it is not read |
//! | write PMD n | 1 per overflowed counter | re-arm: `2^W - N + (r mod N)`, completing `1 + r div N` periods ([`crate::sampling`]) |
//! | write PMC0 = 0 | 1, last | clears fr and every overflow bit in one write, as Linux's `pfm_unfreeze_pmu` does (reference section 4); "It is software's responsibility to reset the overflow and freeze bits" (SDM 7.2.1). Unfreezing re-arms the I-EAR: it captures again once fr is clear |
//!
//! Because the PMU stays frozen from the overflow to the final write, and
//! the reload keeps what the counter counted past its overflow, no event is
//! lost or counted twice; one interrupt completes one period per overflowed
//! counter, or more when an event counting several per cycle carried it a
//! whole period past the overflow (`N` smaller than the maximum increment).
//! This holds on every generation. An interrupt whose PMC0 has no
//! overflow bit is spurious: counted, 1 read, and PMC0 written back to 0
//! only if it was not already 0.
//!
//! The handler takes no lock and allocates nothing: it touches the atomics
//! of [`PmiState`] and the register backend the kernel hands it.
//!
//! # Examples
//!
//! ```
//! use pmu::arch::itanium::pmi::overflow_rule;
//! use pmu::arch::itanium::Generation;
//! use pmu::sampling::SampleAfter;
//!
//! // The PMU freezes at the overflow: no event between it and the handler,
//! // but an event counting 6 in the wrapping cycle leaves the counter at 5.
//! let n = SampleAfter::new(4, overflow_rule(Generation::Itanium2))?;
//! assert_eq!(n.rearm(0), (1, (1 << 47) - 4));
//! assert_eq!(n.rearm(5), (2, (1 << 47) - 3));              // 5 = 1 x 4 + 1 past
//! # Ok::<(), pmu::sampling::SampleAfterError>(())
//! ```

use core::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};

use super::ear::{IearConfig, ItlbSample};
use super::generation::{Generation, RegSet};
use super::pmc::Pmc0;
use super::pmd;
use crate::access::PmcPmdAccess;
use crate::sampling::{OverflowRule, Sample, SampleAfter};

const SLOTS: usize = 16;

/// How a counter of `generation` overflows: W = 32 on Itanium, 47 on
/// Itanium 2 and Montecito (reference section 2, "counter width W"), and no
/// event counts between the overflow and the handler, because an overflow
/// with `oi` sets PMC0.fr, which freezes every counter at once (seed 000,
/// `oi`; SDM Vol. 2 7.2.1). A counter can still hold more than 0 when the
/// handler reads it, if its event counted several in the wrapping cycle
/// ([`crate::sampling::SampleAfter::rearm`]).
pub const fn overflow_rule(generation: Generation) -> OverflowRule {
    OverflowRule {
        width: generation.counter_width() as u32,
        pmi_delay: 0,
    }
}

/// State shared by the driver and the overflow handler: atomics only, so it
/// can live in a `static`.
pub struct PmiState {
    generation: AtomicU8,
    sample_after: [AtomicU64; SLOTS],
    /// Per counter: it gains at most one per cycle, so an overflow leaves
    /// it at exactly 0 and the handler need not read it.
    one_per_cycle: [AtomicBool; SLOTS],
    periods: [AtomicU64; SLOTS],
    at_halt: [AtomicU64; SLOTS],
    /// Per counter: whether it samples the I-EAR, and the I-EAR image.
    has_ear: [AtomicBool; SLOTS],
    ear: [AtomicU64; SLOTS],
    interrupts: AtomicU64,
    spurious: AtomicU64,
    ear_invalid: AtomicU64,
}

impl Default for PmiState {
    fn default() -> Self {
        Self::new()
    }
}

/// One serviced overflow: the generic [`Sample`] (counter, one period, the
/// interrupted IIP in `rip`) and, for an I-EAR sampling counter, the
/// I-EAR's capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct OverflowSample {
    /// Counter, periods, interrupted IIP.
    pub sample: Sample,
    /// The captured instruction TLB miss (`None` for a counter without the
    /// I-EAR, or an invalid capture).
    pub itlb: Option<ItlbSample>,
}

/// What one call of [`handle_pmi`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PmiOutcome {
    /// PMC0 as read.
    pub pmc0: u64,
    /// The counters that overflowed and were serviced.
    pub overflowed: RegSet,
}

impl PmiOutcome {
    /// No counter had overflowed.
    pub const fn is_spurious(self) -> bool {
        self.overflowed.is_empty()
    }
}

const fn generation_from(v: u8) -> Generation {
    match v {
        0 => Generation::Itanium,
        1 => Generation::Itanium2,
        _ => Generation::Montecito,
    }
}

const fn generation_code(g: Generation) -> u8 {
    match g {
        Generation::Itanium => 0,
        Generation::Itanium2 => 1,
        Generation::Montecito => 2,
    }
}

impl PmiState {
    /// Nothing configured (Itanium 2 until a driver takes the PMU).
    #[allow(clippy::declare_interior_mutable_const)]
    pub const fn new() -> Self {
        const Z64: AtomicU64 = AtomicU64::new(0);
        const FALSE: AtomicBool = AtomicBool::new(false);
        PmiState {
            generation: AtomicU8::new(1),
            sample_after: [Z64; SLOTS],
            one_per_cycle: [FALSE; SLOTS],
            periods: [Z64; SLOTS],
            at_halt: [Z64; SLOTS],
            has_ear: [FALSE; SLOTS],
            ear: [Z64; SLOTS],
            interrupts: AtomicU64::new(0),
            spurious: AtomicU64::new(0),
            ear_invalid: AtomicU64::new(0),
        }
    }

    /// The generation the driver took.
    pub fn generation(&self) -> Generation {
        generation_from(self.generation.load(Ordering::Acquire))
    }

    /// Periods counter `n` completed since it was configured (one per
    /// serviced overflow).
    pub fn periods(&self, n: u8) -> u64 {
        self.periods[usize::from(n) % SLOTS].load(Ordering::Acquire)
    }

    /// Of [`PmiState::periods`], those a halt found on the first-generation
    /// Itanium (the counter overflowed and was halted before the interrupt
    /// was taken; see [`super::driver`]). They have no interrupted IIP, so
    /// no sample.
    pub fn periods_at_halt(&self, n: u8) -> u64 {
        self.at_halt[usize::from(n) % SLOTS].load(Ordering::Acquire)
    }

    pub(super) fn add_halt_periods(&self, n: u8, periods: u64) {
        let i = usize::from(n) % SLOTS;
        self.periods[i].fetch_add(periods, Ordering::AcqRel);
        self.at_halt[i].fetch_add(periods, Ordering::AcqRel);
    }

    /// Interrupts handled.
    pub fn interrupts(&self) -> u64 {
        self.interrupts.load(Ordering::Relaxed)
    }

    /// Interrupts that found no overflow bit in PMC0.
    pub fn spurious(&self) -> u64 {
        self.spurious.load(Ordering::Relaxed)
    }

    /// I-EAR samples whose PMD0 said "not valid" (Itanium: v = 0; Itanium
    /// 2: stat = 0): handed on without `itlb`.
    pub fn ear_invalid(&self) -> u64 {
        self.ear_invalid.load(Ordering::Relaxed)
    }

    pub(super) fn reset(&self, g: Generation) {
        self.generation.store(generation_code(g), Ordering::Release);
        for n in 0..SLOTS as u8 {
            self.set_sampling(n, None, None, false);
        }
        self.interrupts.store(0, Ordering::Relaxed);
        self.spurious.store(0, Ordering::Relaxed);
        self.ear_invalid.store(0, Ordering::Relaxed);
    }

    pub(super) fn set_sampling(
        &self,
        n: u8,
        s: Option<SampleAfter>,
        ear: Option<IearConfig>,
        one_per_cycle: bool,
    ) {
        let i = usize::from(n) % SLOTS;
        self.sample_after[i].store(s.map_or(0, SampleAfter::get), Ordering::Release);
        self.one_per_cycle[i].store(one_per_cycle, Ordering::Release);
        self.periods[i].store(0, Ordering::Release);
        self.at_halt[i].store(0, Ordering::Release);
        self.ear[i].store(ear.map_or(0, IearConfig::bits), Ordering::Release);
        self.has_ear[i].store(ear.is_some(), Ordering::Release);
    }
}

/// The overflow interrupt handler: read PMC0 once, re-arm every overflowed
/// sampling counter relative to what it holds, read the I-EAR for I-EAR
/// sampling counters, hand an [`OverflowSample`] to `sink` per overflowed
/// counter, and unfreeze (PMC0 = 0) last. See the [module documentation](self).
///
/// An overflow bit of a counter that is not sampling (released, or never
/// configured with `oi`) is not a sample: it is cleared with the rest.
///
/// If a register access fails (only a model can fail) the handler stops and
/// returns the error with the PMU still frozen.
pub fn handle_pmi<R: PmcPmdAccess>(
    state: &PmiState,
    regs: &mut R,
    iip: u64,
    mut sink: impl FnMut(OverflowSample),
) -> Result<PmiOutcome, R::Error> {
    let g = state.generation();
    state.interrupts.fetch_add(1, Ordering::Relaxed);
    let pmc0 = regs.read_pmc(0)?;
    let mut overflowed = RegSet::EMPTY;
    for counter in Pmc0::from_bits(pmc0).overflowed(g) {
        let n = usize::from(counter);
        let Some(sample_after) = state.sample_after.get(n).map(|s| s.load(Ordering::Acquire))
        else {
            continue;
        };
        if sample_after == 0 {
            continue;
        }
        let itlb = if state.has_ear[n].load(Ordering::Acquire) {
            let config = IearConfig::from_bits_truncate(g, state.ear[n].load(Ordering::Acquire));
            let v = ItlbSample::decode(config, regs.read_pmd(g.iear_address_pmd())?);
            if v.is_none() {
                state.ear_invalid.fetch_add(1, Ordering::Relaxed);
            }
            v
        } else {
            None
        };
        // Checked when the counter was configured.
        let s = SampleAfter::trusted(sample_after, overflow_rule(g));
        let (periods, reload) = if state.one_per_cycle[n].load(Ordering::Acquire) {
            (1, s.preset())
        } else {
            s.rearm(pmd::count(g, regs.read_pmd(n as u8)?))
        };
        regs.write_pmd(n as u8, reload)?;
        state.periods[n].fetch_add(periods, Ordering::AcqRel);
        overflowed = overflowed.with(counter);
        sink(OverflowSample {
            sample: Sample {
                counter: n as u8,
                periods: u32::try_from(periods).unwrap_or(u32::MAX),
                rip: iip,
            },
            itlb,
        });
    }
    if overflowed.is_empty() {
        state.spurious.fetch_add(1, Ordering::Relaxed);
    }
    if pmc0 != 0 {
        regs.write_pmc(0, Pmc0::UNFROZEN.bits())?;
    }
    Ok(PmiOutcome { pmc0, overflowed })
}

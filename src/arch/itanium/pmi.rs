//! The Itanium overflow interrupt path: the state shared between the
//! counter handles and the handler, and the handler routine.
//!
//! A counter whose `oi` bit is set and that carries out of bit W-1 sets its
//! overflow bit in PMC0 and PMC0.fr, which freezes every counter (and the
//! EARs) at once, and raises one PMU interrupt (VTune's Itanium event help,
//! `oi`: "a Performance Monitor interrupt is raised and the performance
//! monitor freeze bit (PMC\[0\].fr) is set when the monitor overflows";
//! SDM Vol. 2 7.2.1-7.2.2). The kernel's handler for the PMV vector (Linux:
//! `IA64_PERFMON_VECTOR`, 0xEE) calls the crate's one PMI path,
//! [`crate::arch::handle_pmi`], with the processor's PMU and the
//! interrupted IIP; Itanium's part of it is this module's handler. Per
//! interrupt it issues exactly:
//!
//! | access | count | why |
//! |---|---|---|
//! | read PMC0 | 1 | the overflow bits say which counters overflowed (SDM Vol. 2 7.2.2; Linux perfmon's `PMC0_HAS_OVFL`) |
//! | read I-EAR PMD0 (PMD34 on Montecito) | 1 per overflowed counter sampling an I-EAR in TLB mode | the captured address and fill level (libpfm3's and pfmon's I-EAR PMD layouts; HP Caliper's itlb measurement). PMD1 holds a latency in cache mode only, so it is not read in TLB mode |
//! | read I-EAR PMD0, PMD1 (Montecito PMD34, PMD35) | 2 per overflowed counter sampling an I-EAR in cache mode | the missed line and whether the capture is valid (Itanium `v`, Itanium 2 `stat`), the latency and, from Itanium 2 on, its overflow bit (libpfm3's I-EAR PMD layouts; pfmon's I-EAR sample printers) |
//! | read D-EAR PMD2, PMD3, PMD17 (Montecito PMD32, PMD33, PMD36) | 3 per overflowed counter sampling the D-EAR | data address, latency or TLB level and status, instruction address (libpfm3's D-EAR PMD layouts; the reference's Itanium 2 PMU tables: PMC11, PMD2,3,17) |
//! | read PMD16 (Montecito PMD38, then PMD39), then the records the index says hold data (PMD8-15, Montecito PMD48-63) | 1 (+1) + records per overflowed counter sampling the branch trace buffer | the index (`bbi`/`ebi`, `full`) says which records hold the trace, oldest first (libpfm3's BTB and ETB layouts) |
//! | write PMD16 = 0 (Montecito PMD38) | 1 per overflowed counter sampling the branch trace buffer | empties the buffer, so that the next sample holds only the branches after this one (as pfmon resets the index with each BTB sample) |
//! | read PMD n | 1 per overflowed counter that can gain more than 1 per cycle | an event counting k > 1 in the cycle that wrapped the counter leaves it at `r > 0` although the PMU froze at once; the reload must keep `r` ([`crate::sampling::SampleAfter::rearm`]). A counter that gains at most 1 per cycle ([`super::driver::Programmed::one_per_cycle`]: threshold set, or a catalog event with maximum increment 1) holds exactly 0, so it is not read |
//! | write PMD n | 1 per overflowed counter | re-arm: `2^W - N + (r mod N)`, completing `1 + r div N` periods ([`crate::sampling`]) |
//! | write PMC0 = 0 | 1, last | clears fr and every overflow bit in one write, as Linux's `pfm_unfreeze_pmu` does (`perfmon.c`); "It is software's responsibility to reset the overflow and freeze bits" (SDM 7.2.1). Unfreezing re-arms the I-EAR: it captures again once fr is clear |
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
//! The handler takes no lock, executes no locked instruction and allocates
//! nothing: it touches the atomics of [`PmiState`], each with one writer,
//! and the register backend the kernel hands it. What it needs per counter
//! (the re-arm constants, whether to read the count, whether to read the
//! I-EAR) was computed when the counter was configured.
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

use core::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use super::btb::{BtbConfig, BtbIndex, BtbSample};
use super::ear::{DearConfig, DearSample, IcacheSample, ItlbSample};
use super::generation::Generation;
use super::pmc::Pmc0;
use crate::access::{PmcPmdBackend, PmcPmdOps};
use crate::apic::{LvtPerfCounter, LvtPerfCounterEntry};
use crate::sampling::{
    OverflowRule, PmiOutcome, Rearm, Sample, SampleAfter, Sink, add_single_writer,
};

const SLOTS: usize = 16;

/// How a counter of `generation` overflows: W = 32 on Itanium, 47 on
/// Itanium 2 and Montecito (Linux perfmon's `ovfl_val`, libpfm3), and no
/// event counts between the overflow and the handler, because an overflow
/// with `oi` sets PMC0.fr, which freezes every counter at once (VTune's
/// Itanium event help, `oi`; SDM Vol. 2 7.2.1). A counter can still hold
/// more than 0 when the handler reads it, if its event counted several in
/// the wrapping cycle ([`crate::sampling::SampleAfter::rearm`]).
pub const fn overflow_rule(generation: Generation) -> OverflowRule {
    OverflowRule {
        width: generation.counter_width() as u32,
        pmi_delay: 0,
    }
}

/// [`PerCounter::flags`]: the counter can gain more than one per cycle, so the
/// handler reads it.
const READ_COUNT: u8 = 1;
/// [`PerCounter::flags`]: the counter samples an I-EAR in TLB mode
/// (`Programmed::captures_itlb`).
const SAMPLES_IEAR: u8 = 2;
/// [`PerCounter::flags`]: the counter samples the D-EAR.
const SAMPLES_DEAR: u8 = 4;
/// [`PerCounter::flags`]: the counter samples the branch trace buffer.
const SAMPLES_BTB: u8 = 8;
/// [`PerCounter::flags`]: the counter samples an I-EAR in cache mode.
const SAMPLES_ICACHE: u8 = 16;
/// [`PerCounter::flags`]: what the handler reads in its cold branch.
const SAMPLES_RARE: u8 = SAMPLES_DEAR | SAMPLES_BTB | SAMPLES_ICACHE;

/// What a configured counter captures with each overflow, for
/// [`PmiState`]: nothing, the I-EAR in TLB or cache mode, the D-EAR (its
/// image decodes the capture) or the branch trace buffer (its image decodes
/// the records).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Captures {
    /// Nothing.
    Nothing,
    /// The I-EAR in TLB mode.
    Itlb,
    /// The I-EAR in cache mode.
    Icache,
    /// The D-EAR, configured so.
    Dear(DearConfig),
    /// The branch trace buffer, configured so.
    Btb(BtbConfig),
}

/// What the handler needs of the sampling counters, one array per field
/// indexed by counter number (so the handler indexes with the overflow
/// bit's number, no multiplication): the re-arm constants and flags, set
/// when a counter is configured, and the period counts, written only by
/// the handler (and by a halt, which the handler cannot interrupt: see
/// [`PmiState`]).
struct PerCounter {
    preset: [AtomicU64; SLOTS],
    n: [AtomicU64; SLOTS],
    periods: [AtomicU64; SLOTS],
    flags: [AtomicU8; SLOTS],
}

impl PerCounter {
    /// Slot `i`'s re-arm constants.
    #[inline(always)]
    fn rearm(&self, i: usize) -> Rearm {
        Rearm {
            preset: self.preset[i].load(Ordering::Relaxed),
            n: self.n[i].load(Ordering::Relaxed),
        }
    }
}

/// State shared by the driver and the overflow handler: atomics only, no
/// lock. One per processor, inside its [`ItaniumPmu`](super::ItaniumPmu)
/// ([`ItaniumPmu::pmi`](super::ItaniumPmu::pmi)).
///
/// Every location the handler writes has one writer at a time, so it is
/// updated with a plain load and store, no locked instruction: an Itanium
/// PMU belongs to one CPU, whose handler runs to completion before a driver
/// call it interrupted resumes, and the driver is called with the PMU
/// interrupt held, whatever its vector (see "Interrupts inside driver
/// calls" in [`super::driver`]).
/// (Were the rule broken a count could be wrong, never memory: the
/// locations are atomics.)
pub struct PmiState {
    generation: AtomicU8,
    /// The counters configured to sample, as PMC0 overflow bits (bit n is
    /// counter n's, SDM Vol. 2 7.2.1).
    sampling: AtomicU64,
    /// The counter-value mask of the generation (bits W-1:0), set when a
    /// driver takes the PMU (no counter samples before).
    count_mask: AtomicU64,
    interrupts: AtomicU64,
    spurious: AtomicU64,
    ear_invalid: AtomicU64,
    /// The D-EAR's PMC image (one counter at a time owns the D-EAR).
    dear_config: AtomicU64,
    /// The branch trace buffer's PMC image (one owner at a time).
    btb_config: AtomicU64,
    slot: PerCounter,
    at_halt: [AtomicU64; SLOTS],
}

impl core::fmt::Debug for PmiState {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PmiState")
            .field("generation", &self.generation())
            .field("interrupts", &self.interrupts())
            .finish_non_exhaustive()
    }
}

/// What an overflowed Itanium counter captured, the payload of its
/// [`Sample`]: nothing (a plain counting event), or the capture of the
/// unit it samples (a counter samples at most one: the I-EAR in TLB or
/// cache mode, the D-EAR, or the branch trace buffer). An invalid capture
/// ([`PmiState::ear_invalid`]) is `None`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Capture {
    /// No capture.
    None,
    /// The captured instruction TLB miss.
    Itlb(ItlbSample),
    /// The captured instruction cache miss: line, latency.
    Icache(IcacheSample),
    /// The D-EAR's capture: data address, latency or TLB level, and the
    /// instruction's address.
    Dear(DearSample),
    /// The branch trace buffer as read at the overflow; its
    /// [`BtbSample::branches`] are the source -> target records, oldest
    /// first.
    Btb(BtbSample),
}

impl Capture {
    /// The I-EAR's TLB-mode capture, if that is what this is.
    pub const fn itlb(&self) -> Option<ItlbSample> {
        match self {
            Capture::Itlb(s) => Some(*s),
            _ => None,
        }
    }

    /// The I-EAR's cache-mode capture, if that is what this is.
    pub const fn icache(&self) -> Option<IcacheSample> {
        match self {
            Capture::Icache(s) => Some(*s),
            _ => None,
        }
    }

    /// The D-EAR's capture, if that is what this is.
    pub const fn dear(&self) -> Option<DearSample> {
        match self {
            Capture::Dear(s) => Some(*s),
            _ => None,
        }
    }

    /// The branch trace buffer's records, if that is what this is.
    pub const fn btb(&self) -> Option<BtbSample> {
        match self {
            Capture::Btb(s) => Some(*s),
            _ => None,
        }
    }
}

/// The generation's code in [`PmiState`]: Itanium 2 is 0, so that a new
/// state is all zero bits and a `static` of it lives in `.bss`.
const fn generation_from(v: u8) -> Generation {
    match v {
        0 => Generation::Itanium2,
        1 => Generation::Itanium,
        _ => Generation::Montecito,
    }
}

const fn generation_code(g: Generation) -> u8 {
    match g {
        Generation::Itanium2 => 0,
        Generation::Itanium => 1,
        Generation::Montecito => 2,
    }
}

impl PmiState {
    /// Nothing configured (Itanium 2 until a driver takes the PMU); made by
    /// [`super::ItaniumPmu::new`].
    #[allow(clippy::declare_interior_mutable_const)]
    pub(super) const fn new() -> Self {
        const Z64: AtomicU64 = AtomicU64::new(0);
        const Z8: AtomicU8 = AtomicU8::new(0);
        PmiState {
            generation: AtomicU8::new(0),
            sampling: Z64,
            count_mask: Z64,
            interrupts: Z64,
            spurious: Z64,
            ear_invalid: Z64,
            dear_config: Z64,
            btb_config: Z64,
            slot: PerCounter {
                preset: [Z64; SLOTS],
                n: [Z64; SLOTS],
                periods: [Z64; SLOTS],
                flags: [Z8; SLOTS],
            },
            at_halt: [Z64; SLOTS],
        }
    }

    /// The generation the driver took.
    #[inline]
    pub fn generation(&self) -> Generation {
        generation_from(self.generation.load(Ordering::Acquire))
    }

    /// Periods counter `n` completed since it was configured (one per
    /// serviced overflow).
    pub fn periods(&self, n: u8) -> u64 {
        self.slot.periods[usize::from(n) % SLOTS].load(Ordering::Acquire)
    }

    /// Of [`PmiState::periods`], those a halt found on the first-generation
    /// Itanium (the counter overflowed and was halted before the interrupt
    /// was taken; see [`super::driver`]). They have no interrupted IIP, so
    /// no sample.
    pub fn periods_at_halt(&self, n: u8) -> u64 {
        self.at_halt[usize::from(n) % SLOTS].load(Ordering::Acquire)
    }

    /// Sampling counter `n` serviced by the handler (or not: its overflow
    /// bit then counts as a non-sampling counter's), its constants and
    /// periods kept: for a context switch, which disarms a counter before
    /// it reads it.
    pub(super) fn arm(&self, n: u8, on: bool) {
        let bit = 1u64 << (usize::from(n) % SLOTS);
        let sampling = self.sampling.load(Ordering::Relaxed);
        let sampling = if on { sampling | bit } else { sampling & !bit };
        self.sampling.store(sampling, Ordering::Release);
    }

    /// The counters configured to sample, as PMC0 overflow bits.
    pub(super) fn sampling(&self) -> u64 {
        self.sampling.load(Ordering::Acquire)
    }

    /// Whether sampling counter `n`, holding `raw`, has passed its
    /// overflow (wrapped below its preset) since it was last armed.
    pub(super) fn wrapped(&self, n: u8, raw: u64) -> bool {
        let i = usize::from(n) % SLOTS;
        self.slot.rearm(i).rearm(raw).0 != 0
    }

    pub(super) fn add_halt_periods(&self, n: u8, periods: u64) {
        let i = usize::from(n) % SLOTS;
        add_single_writer(&self.slot.periods[i], periods);
        add_single_writer(&self.at_halt[i], periods);
    }

    /// Interrupts handled.
    pub fn interrupts(&self) -> u64 {
        self.interrupts.load(Ordering::Relaxed)
    }

    /// Interrupts that found no overflow bit in PMC0.
    pub fn spurious(&self) -> u64 {
        self.spurious.load(Ordering::Relaxed)
    }

    /// EAR samples whose capture said "not valid": I-EAR PMD0 (Itanium:
    /// v = 0; Itanium 2: stat = 0), handed on without `itlb` or `icache`;
    /// D-EAR (Itanium PMD17 `vl` = 0; Itanium 2 PMD3 `stat` = 0), handed on
    /// without `dear`.
    pub fn ear_invalid(&self) -> u64 {
        self.ear_invalid.load(Ordering::Relaxed)
    }

    pub(super) fn reset(&self, g: Generation) {
        self.generation.store(generation_code(g), Ordering::Release);
        self.count_mask.store(g.counter_mask(), Ordering::Release);
        for n in 0..SLOTS as u8 {
            self.set_sampling(n, None, Captures::Nothing, false);
        }
        self.interrupts.store(0, Ordering::Relaxed);
        self.spurious.store(0, Ordering::Relaxed);
        self.ear_invalid.store(0, Ordering::Relaxed);
    }

    /// Counter `n` is (re)configured: its re-arm constants, computed here
    /// once, whether the handler must read it, what it captures, and no
    /// periods yet.
    pub(super) fn set_sampling(
        &self,
        n: u8,
        s: Option<SampleAfter>,
        captures: Captures,
        one_per_cycle: bool,
    ) {
        let i = usize::from(n) % SLOTS;
        let slot = &self.slot;
        let r = s.map_or(Rearm::default(), SampleAfter::rearm_constants);
        slot.preset[i].store(r.preset, Ordering::Release);
        slot.n[i].store(r.n, Ordering::Release);
        slot.periods[i].store(0, Ordering::Release);
        self.at_halt[i].store(0, Ordering::Release);
        let unit = match captures {
            Captures::Nothing => 0,
            Captures::Itlb => SAMPLES_IEAR,
            Captures::Icache => SAMPLES_ICACHE,
            Captures::Dear(c) => {
                self.dear_config.store(c.bits(), Ordering::Release);
                SAMPLES_DEAR
            }
            Captures::Btb(c) => {
                self.btb_config.store(c.bits(), Ordering::Release);
                SAMPLES_BTB
            }
        };
        let flags = if one_per_cycle { 0 } else { READ_COUNT } | unit;
        slot.flags[i].store(flags, Ordering::Release);
        let bit = 1u64 << i;
        let sampling = self.sampling.load(Ordering::Relaxed);
        let sampling = if s.is_some() {
            sampling | bit
        } else {
            sampling & !bit
        };
        self.sampling.store(sampling, Ordering::Release);
    }
}

/// The overflow interrupt handler (Itanium's part of
/// [`crate::arch::handle_pmi`]): read PMC0 once, re-arm every overflowed
/// sampling counter relative to what it holds, read the I-EAR (TLB or cache
/// mode), the D-EAR or the branch trace buffer for counters sampling them, hand an
/// [`Sample`] with its [`Capture`] to `sink` per overflowed counter, and unfreeze
/// (PMC0 = 0), then write `entry` to the interrupt's delivery entry `lvt`:
/// on an IA-32 host that runs the Itanium model, the local APIC's LVT entry
/// its PMI came through (masked by the delivery); an IA-64 kernel, whose
/// PMU interrupt vector (PMV) is not masked by delivery, passes `&mut ()`
/// (and any `entry`).
/// See the [module documentation](self).
///
/// An overflow bit of a counter that is not sampling (released, or never
/// configured with `oi`) is not a sample: it is cleared with the rest. The
/// handler executes no locked instruction ([`PmiState`]) and derives
/// nothing it could have computed at configure time.
///
/// If a register access fails (only a model can fail) the handler stops and
/// returns the error with the PMU still frozen.
#[inline]
pub(crate) fn handle_pmi<R: PmcPmdBackend, L: LvtPerfCounterEntry, S: Sink<Capture>>(
    state: &PmiState,
    regs: &mut R,
    lvt: &mut L,
    entry: LvtPerfCounter,
    iip: u64,
    mut sink: S,
) -> Result<PmiOutcome, R::Error> {
    add_single_writer(&state.interrupts, 1);
    let pmc0 = regs.read_pmc(0)?;
    let mut overflowed = 0u64;
    let mut rest = pmc0 & state.sampling.load(Ordering::Acquire);
    while rest != 0 {
        let n = rest.trailing_zeros() as u8;
        rest &= rest - 1;
        let flags = state.slot.flags[usize::from(n) % SLOTS].load(Ordering::Relaxed);
        // The D-EAR, the branch trace buffer or a cache-mode I-EAR: rare,
        // so in a cold branch (no call: a call in this loop costs every
        // interrupt its registers; guide, performance).
        let captured = if flags & SAMPLES_RARE != 0 {
            cold_path();
            read_captures(state, regs, flags)?
        } else {
            Capture::None
        };
        if service_counter(state, regs, iip, n, flags, captured, &mut sink)? {
            overflowed |= 1 << n;
        }
    }
    if overflowed == 0 {
        add_single_writer(&state.spurious, 1);
    }
    if pmc0 != 0 {
        regs.write_pmc(0, Pmc0::UNFROZEN.bits())?;
    }
    lvt.write_lvt_perf_counter(entry);
    Ok(PmiOutcome {
        overflowed,
        late: false,
    })
}

/// Marks the branch that calls it as rarely taken.
#[cold]
#[inline(always)]
fn cold_path() {}

/// One overflowed sampling counter `n` (its `flags`): its TLB-mode I-EAR
/// capture read if it samples one, re-armed relative to what it holds (read
/// only if it can gain more than one per cycle), its periods counted and
/// handed to the sink with `captured` (the D-EAR, branch trace buffer or
/// cache-mode I-EAR capture, read by the caller). Whether it completed a
/// period.
#[inline(always)]
fn service_counter<R: PmcPmdBackend>(
    state: &PmiState,
    regs: &mut R,
    iip: u64,
    n: u8,
    flags: u8,
    captured: Capture,
    sink: &mut impl Sink<Capture>,
) -> Result<bool, R::Error> {
    let i = usize::from(n) % SLOTS;
    let slot = &state.slot;
    let capture = if flags & SAMPLES_IEAR != 0 {
        let g = state.generation();
        match ItlbSample::from_tlb_pmd(g, regs.read_pmd(g.iear_address_pmd())?) {
            Some(v) => Capture::Itlb(v),
            None => {
                add_single_writer(&state.ear_invalid, 1);
                Capture::None
            }
        }
    } else {
        captured
    };
    let rearm = slot.rearm(i);
    let (periods, reload) = if flags & READ_COUNT == 0 {
        (1, rearm.preset)
    } else {
        let raw = regs.read_pmd(n)? & state.count_mask.load(Ordering::Relaxed);
        rearm.rearm(raw)
    };
    if periods == 0 {
        return Ok(false);
    }
    regs.write_pmd(n, reload)?;
    add_single_writer(&slot.periods[i], periods);
    sink(Sample::new(n, periods, iip).with_payload(capture));
    Ok(true)
}

/// Read the D-EAR (PMD2, PMD3, PMD17; Montecito PMD32, PMD33, PMD36) for a
/// counter sampling it, the I-EAR in cache mode (PMD0, PMD1; Montecito
/// PMD34, PMD35) for one sampling that, or the branch trace buffer (the
/// index, Montecito's PMD39, the records the index names) for one sampling
/// that, and empty the buffer (index = 0) for the next sample.
#[inline(always)]
fn read_captures<R: PmcPmdBackend>(
    state: &PmiState,
    regs: &mut R,
    flags: u8,
) -> Result<Capture, R::Error> {
    let g = state.generation();
    if flags & SAMPLES_ICACHE != 0 {
        let line = regs.read_pmd(g.iear_address_pmd())?;
        let latency = regs.read_pmd(g.iear_latency_pmd())?;
        let icache = IcacheSample::from_cache_pmds(g, line, latency);
        if icache.is_none() {
            add_single_writer(&state.ear_invalid, 1);
        }
        return Ok(icache.map_or(Capture::None, Capture::Icache));
    }
    if flags & SAMPLES_DEAR != 0 {
        let config = DearConfig::from_bits_truncate(g, state.dear_config.load(Ordering::Relaxed));
        let [address, latency, instruction] = g.dear_pmds();
        let (a, l, i) = (
            regs.read_pmd(address)?,
            regs.read_pmd(latency)?,
            regs.read_pmd(instruction)?,
        );
        let s = DearSample::decode(config, a, l, i);
        if !s.valid {
            add_single_writer(&state.ear_invalid, 1);
        }
        return Ok(if s.valid {
            Capture::Dear(s)
        } else {
            Capture::None
        });
    }
    let config = BtbConfig::from_bits_truncate(g, state.btb_config.load(Ordering::Relaxed));
    let index = BtbIndex::from_bits(g, regs.read_pmd(g.btb_index_pmd())?);
    let extension = match g.btb_extension_pmd() {
        Some(pmd) => regs.read_pmd(pmd)?,
        None => 0,
    };
    let mut sample = BtbSample::new(config, index, extension);
    for entry in index.walk() {
        if let Some(pmd) = BtbIndex::record_pmd(g, entry) {
            sample.set_record(entry, regs.read_pmd(pmd)?);
        }
    }
    regs.write_pmd(g.btb_index_pmd(), 0)?;
    Ok(Capture::Btb(sample))
}

//! Event-based sampling, independent of the architecture: sample-after
//! values and the counter presets they imply, calibration, and the sample
//! buffer between the interrupt path and the kernel.
//!
//! # Presets, re-arming and conservation
//!
//! A counter `w` bits wide that should interrupt every `N` events is preset
//! to `2^w - N`: its `N`th event wraps it to 0. The interrupt does not always
//! come with that event, and the counter does not always hold 0 when the
//! handler reads it:
//!
//! * NetBurst raises the PMI "on the next event count after the counter has
//!   overflowed" (SDM Vol. 3B 18.15.5.8), so a handler woken by the
//!   counter's own PMI finds one event of the next period already counted
//!   (the manual's `-(N-1)` reload accounts for exactly that one). But a
//!   handler woken by *another* counter's PMI, or by a spurious one, may find
//!   the counter wrapped on its very last event, holding 0;
//! * an event that counts more than once per cycle (Itanium's "maximum
//!   increment", NetBurst's multi-count events) carries the counter past 0
//!   in the cycle that wraps it: it holds `r > 0` although the PMU froze at
//!   once (Itanium).
//!
//! So no fixed reload is right. The handler re-arms relative to what the
//! counter holds ([`SampleAfter::rearm`]): the raw value `v` says how many
//! periods completed since the last (re)load and how far into the current
//! one the counter is ([`SampleAfter::split`]), and the new value puts the
//! counter exactly that far into a fresh period. With it every event lands
//! in exactly one place: for a counter whose raw value is `v`,
//! `events = periods × N + residual`, where `periods` counts the periods the
//! handler (or a halt) accounted and `split(v)` gives the residual (and any
//! periods that completed but were not serviced yet). The [`OverflowRule`]
//! still records the delay, which says how many events a period can have
//! advanced by the time the handler runs.
//!
//! | | first preset | value the handler writes | periods per interrupt |
//! |---|---|---|---|
//! | counter holds `r` after the wrap | `-N` | `-N + (r mod N)` | `1 + r div N` |
//! | NetBurst, own PMI, one event per clock | `-N` | `-(N-1)` (SDM 18.15.5.8), `-1` for `N = 1` | 1, 2 for `N = 1` |
//! | Itanium, one event per cycle | `-N` | `-N` | 1 |
//!
//! The sample buffer counts what it could not store, so samples are
//! conserved too: `stored + dropped = periods serviced by the interrupt
//! handler`.
//!
//! # Examples
//!
//! A 40-bit counter sampling every 1000 events, and the handler's re-arm:
//!
//! ```
//! use pmu::sampling::{OverflowRule, SampleAfter, calibrate};
//!
//! let rule = OverflowRule { width: 40, pmi_delay: 1 };      // NetBurst
//! let n = SampleAfter::new(1000, rule)?;
//! assert_eq!(n.preset(), (1 << 40) - 1000);
//! // Woken by its own PMI the counter holds the PMI event: 1 period, -(N-1).
//! assert_eq!(n.rearm(1), (1, (1 << 40) - 999));
//! // 2.5 million events in a calibration run, 500 samples wanted:
//! assert_eq!(calibrate(2_500_000, 500, rule)?.get(), 5000);
//! # Ok::<(), Box<dyn core::error::Error>>(())
//! ```

use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::sealed::Sealed;

mod callchain;

pub use callchain::{CallChain, CallChainSlot, ChainEnd, StackBounds};

/// `cell += by` for a cell with one writer (a PMI handler's statistics, a
/// counter's periods): a load and a store, no locked read-modify-write,
/// which the handlers must not execute (the PMI benchmark counts them).
#[inline(always)]
pub(crate) fn add_single_writer(cell: &AtomicU64, by: u64) {
    cell.store(
        cell.load(Ordering::Relaxed).wrapping_add(by),
        Ordering::Relaxed,
    );
}

/// How an architecture's counters overflow into an interrupt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct OverflowRule {
    /// Counter width in bits (NetBurst 40, Itanium 32, Itanium 2 47).
    pub width: u32,
    /// Events the counter counts between its overflow and the interrupt's
    /// handler (NetBurst: 1, the event that raises the PMI).
    pub pmi_delay: u64,
}

impl OverflowRule {
    /// `2^width - 1`.
    pub const fn mask(self) -> u64 {
        if self.width >= 64 {
            u64::MAX
        } else {
            (1 << self.width) - 1
        }
    }

    /// The largest sample-after value: half the counter's range, so that a
    /// preset counter and a wrapped one are never confused (Linux's NetBurst
    /// driver likewise caps the period at 2^39 - 1).
    pub const fn max_sample_after(self) -> u64 {
        1 << (self.width - 1)
    }

    const fn neg(self, n: u64) -> u64 {
        (self.mask() - n).wrapping_add(1) & self.mask()
    }
}

/// Why a sample-after value was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SampleAfterError {
    /// Zero: a counter cannot interrupt after no events.
    Zero {
        /// The largest accepted value.
        max: u64,
    },
    /// Larger than [`OverflowRule::max_sample_after`].
    TooLarge {
        /// The largest accepted value.
        max: u64,
    },
}

impl core::fmt::Display for SampleAfterError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SampleAfterError::Zero { max } => write!(
                f,
                "a sample-after value of 0 is not allowed: a counter interrupts after 1 to {max} events"
            ),
            SampleAfterError::TooLarge { max } => write!(
                f,
                "a sample-after value above {max} is not allowed: a counter interrupts after 1 to {max} events (half its range, so that a preset counter is never taken for a wrapped one)"
            ),
        }
    }
}

impl core::error::Error for SampleAfterError {}

/// Interrupt every `N` events ("sample after value", VTune's term).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SampleAfter {
    n: u64,
    rule: OverflowRule,
}

impl SampleAfter {
    /// `N` events per sample on a counter following `rule`.
    pub const fn new(n: u64, rule: OverflowRule) -> Result<SampleAfter, SampleAfterError> {
        if n == 0 {
            Err(SampleAfterError::Zero {
                max: rule.max_sample_after(),
            })
        } else if n > rule.max_sample_after() {
            Err(SampleAfterError::TooLarge {
                max: rule.max_sample_after(),
            })
        } else {
            Ok(SampleAfter { n, rule })
        }
    }

    /// `N`.
    pub const fn get(self) -> u64 {
        self.n
    }

    /// The counter rule this value was checked against.
    pub const fn rule(self) -> OverflowRule {
        self.rule
    }

    /// The value to preset before the first period: `-N`.
    pub const fn preset(self) -> u64 {
        self.rule.neg(self.n)
    }

    /// Re-arm a counter that holds `raw`: the periods it completed since the
    /// last (re)load, and the value that puts it as far into a fresh period
    /// as it is into the current one (`-N + residual`). See the module docs:
    /// this is exact whatever the counter counted after its overflow.
    pub const fn rearm(self, raw: u64) -> (u64, u64) {
        self.rearm_constants().rearm(raw & self.rule.mask())
    }

    /// What an interrupt handler keeps to re-arm this counter: `N` and the
    /// preset, computed once when the counter is configured.
    pub const fn rearm_constants(self) -> Rearm {
        Rearm {
            n: self.n,
            preset: self.preset(),
        }
    }

    /// Split a raw counter value into periods completed since the last
    /// (re)load but not yet serviced, and the residual events of the current
    /// period (`< N`). Meaningful while fewer than `2^width - N` events went
    /// unserviced.
    pub const fn split(self, raw: u64) -> (u64, u64) {
        let since = (raw & self.rule.mask()).wrapping_add(self.n) & self.rule.mask();
        (since / self.n, since % self.n)
    }

    /// The raw value of a counter `residual` events into a period.
    pub const fn at_residual(self, residual: u64) -> u64 {
        self.preset().wrapping_add(residual % self.n) & self.rule.mask()
    }
}

/// A sampling counter's re-arm constants, `N` and the preset `2^w - N`,
/// computed when the counter is configured so that the interrupt handler
/// checks and derives nothing ([`SampleAfter::rearm_constants`]).
///
/// Because `N <= 2^(w-1)` ([`OverflowRule::max_sample_after`]), a counter
/// has passed its overflow exactly when its raw value is below the preset:
/// counting up from `2^w - N` it holds `[2^w - N, 2^w)` before the wrap and
/// `[0, 2^w - N)` after. So comparisons with `N` and the preset decide
/// ([`Rearm::rearm`]: one for the usual overflow of fewer than `N` events
/// past the wrap, two for a counter that has not overflowed; the NetBurst
/// handler tests the preset first, one comparison for a counter not past
/// its overflow, then bit `w` of `preset + raw`, clear exactly for the
/// usual overflow), and only a counter a whole period or more past its
/// wrap needs a division.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Rearm {
    /// `N`; 0 for a counter that does not sample.
    pub n: u64,
    /// `2^w - N`, the value the counter starts a period from.
    pub preset: u64,
}

impl Rearm {
    /// The same as [`SampleAfter::rearm`] for a raw value below `2^w`:
    /// periods completed and the value to write. `(0, raw)` when the counter
    /// has not passed its overflow (and for `Rearm::default()`, whose
    /// preset is 0).
    #[inline(always)]
    pub const fn rearm(self, raw: u64) -> (u64, u64) {
        // `n <= preset`, so `raw < n` (the usual overflow: fewer than N
        // events past the wrap) is tested first and needs no division.
        if raw < self.n {
            (1, self.preset + raw)
        } else if raw < self.preset {
            // A whole period or more past the wrap: rare, and the only
            // division.
            core::hint::cold_path();
            match (raw.checked_div(self.n), raw.checked_rem(self.n)) {
                (Some(q), Some(r)) => (1 + q, self.preset + r),
                _ => (0, raw),
            }
        } else {
            (0, raw)
        }
    }
}

/// Why calibration could not pick a sample-after value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CalibrationError {
    /// The target number of samples is zero.
    NoTarget,
    /// The measured run counted fewer events than samples wanted: even
    /// `N = 1` cannot reach the target.
    TooFewEvents {
        /// Events the calibration run counted.
        events: u64,
        /// Samples wanted.
        target: u64,
    },
    /// The resulting value is refused by the counter.
    SampleAfter(SampleAfterError),
}

impl core::fmt::Display for CalibrationError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CalibrationError::NoTarget => {
                f.write_str("the target is 0 samples: ask for at least 1")
            }
            CalibrationError::TooFewEvents { events, target } => write!(
                f,
                "the measured run counted {events} events, which cannot give {target} samples even at one sample per event"
            ),
            CalibrationError::SampleAfter(e) => e.fmt(f),
        }
    }
}

impl core::error::Error for CalibrationError {}

/// Pick the sample-after value that makes a run like the measured one yield
/// `target` samples (VTune's calibration: count the event over one run, then
/// divide). Rounds to the nearest value, at least 1.
pub const fn calibrate(
    measured_events: u64,
    target: u64,
    rule: OverflowRule,
) -> Result<SampleAfter, CalibrationError> {
    if target == 0 {
        return Err(CalibrationError::NoTarget);
    }
    if measured_events < target {
        return Err(CalibrationError::TooFewEvents {
            events: measured_events,
            target,
        });
    }
    let n = measured_events / target + ((measured_events % target) * 2 >= target) as u64;
    match SampleAfter::new(n, rule) {
        Ok(s) => Ok(s),
        Err(e) => Err(CalibrationError::SampleAfter(e)),
    }
}

/// One overflow handed from the interrupt path to a consumer, with what the
/// overflow captured as a typed payload `P` (none by default; Itanium's
/// handler gives its EAR and branch-trace captures,
/// `crate::arch::itanium::pmi::Capture`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Sample<P = ()> {
    /// The counter that overflowed.
    pub counter: u8,
    /// Sample-after periods this interrupt completed for the counter (see
    /// [`SampleAfter::rearm`]): usually 1, more when the counter ran more
    /// than a period past its overflow before the handler read it.
    pub periods: u32,
    /// The instruction pointer the interrupt interrupted.
    pub rip: u64,
    /// What the overflow captured.
    pub payload: P,
}

impl Sample {
    /// Counter `counter` completed `periods` periods, interrupted at `rip`;
    /// `periods` saturates at `u32::MAX` (a counter cannot run that far
    /// past its overflow unnoticed in practice).
    #[inline(always)]
    pub const fn new(counter: u8, periods: u64, rip: u64) -> Sample {
        Sample {
            counter,
            periods: if periods <= u32::MAX as u64 {
                periods as u32
            } else {
                u32::MAX
            },
            rip,
            payload: (),
        }
    }
}

impl<P: Copy> Sample<P> {
    /// The same sample carrying `payload` instead.
    #[inline(always)]
    pub const fn with_payload<Q: Copy>(self, payload: Q) -> Sample<Q> {
        Sample {
            counter: self.counter,
            periods: self.periods,
            rip: self.rip,
            payload,
        }
    }
}

/// What an overflow interrupt handler hands its samples to, on every
/// architecture: a closure taking each [`Sample`] (`FnMut(Sample<P>)`;
/// every such closure is a `Sink`, and its argument's type is inferred
/// where a handler asks for a `Sink`). `P` is the architecture's payload
/// ([`crate::arch::Architecture::Payload`]): what the overflow captured
/// besides its counter, periods and IP (NetBurst's PEBS record, Itanium's
/// EAR and branch captures; the architectural PMU's PEBS record). A kernel's
/// consumer of its own type is reached through a closure that borrows it.
///
/// The handler calls the sink from the interrupt (it may be an NMI): it
/// must not take a lock or wait.
///
/// # Examples
///
/// ```
/// use pmu::sampling::{Sample, Sink};
///
/// /// Counts the periods per counter, as a kernel's sink might.
/// struct Periods([u64; 18]);
///
/// fn handler(mut sink: impl Sink) {
///     // What a handler does with its sink:
///     sink(Sample::new(4, 2, 0x1000));
/// }
///
/// let mut periods = Periods([0; 18]);
/// handler(|s| {
///     if let Some(p) = periods.0.get_mut(usize::from(s.counter)) {
///         *p += u64::from(s.periods);
///     }
/// });
/// assert_eq!(periods.0[4], 2);
/// ```
pub trait Sink<P = ()>: FnMut(Sample<P>) {}

/// Every closure taking samples.
impl<P, F: FnMut(Sample<P>)> Sink<P> for F {}

/// What one call of a PMI handler found, on every architecture
/// ([`crate::arch::handle_pmi`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PmiOutcome {
    /// The counters whose overflow was serviced, by counter number (the
    /// handle's: bit `n` is counter `n`; on the architectural PMU the
    /// counter's `IA32_PERF_GLOBAL_*` bit).
    pub overflowed: u64,
    /// No overflow was serviced, but the interrupt was the PMU's own: a
    /// late PMI of an overflow already serviced, by an earlier invocation
    /// or by a halt (the AMD core PMU's handler decides it by count,
    /// `crate::arch::amd::pmi`); always `false` on the other
    /// architectures.
    pub late: bool,
}

impl PmiOutcome {
    /// No counter had overflowed: the interrupt was not this PMU's (an NMI
    /// of someone else), or its overflow was serviced already (see
    /// [`PmiOutcome::late`]).
    pub const fn is_spurious(self) -> bool {
        self.overflowed == 0
    }

    /// Whether the interrupt was this PMU's: an overflow was serviced, or
    /// it was a late PMI ([`PmiOutcome::late`]). A kernel that routes NMIs
    /// to several handlers passes on the ones that are not.
    pub const fn is_ours(self) -> bool {
        self.overflowed != 0 || self.late
    }

    /// Whether counter `n`'s overflow was serviced.
    pub const fn serviced(self, n: u8) -> bool {
        n < 64 && self.overflowed & 1 << n != 0
    }
}

/// What a sample carries beside its counter, periods and RIP, and how
/// [`SampleBuffer`] stores it: in a slot of atomics, so that the ring stays
/// lock-free (its head and tail publish the slot; the payload's own loads
/// and stores are relaxed). `()` stores nothing; Itanium's TLB-mode I-EAR
/// capture ([`crate::arch::itanium::ear::ItlbSample`]) one word; a
/// [`CallChain`] a word per address and one more. Sealed: the payloads are
/// what the crate's handlers capture.
pub trait Payload: Copy + Sealed {
    /// A payload's storage in the ring.
    type Slot: Sync;
    /// A slot before anything is stored in it (the ring is made of these).
    #[allow(clippy::declare_interior_mutable_const)]
    const EMPTY_SLOT: Self::Slot;
    /// Stores the payload in `slot` (the ring's one producer does, in a
    /// slot no reader holds).
    fn store(self, slot: &Self::Slot);
    /// The payload [`Payload::store`] left in `slot` (`None` for a slot it
    /// did not store).
    fn load(slot: &Self::Slot) -> Option<Self>;
}

impl Sealed for () {}

impl Payload for () {
    type Slot = ();
    const EMPTY_SLOT: () = ();

    #[inline(always)]
    fn store(self, _: &()) {}

    #[inline(always)]
    fn load(_: &()) -> Option<()> {
        Some(())
    }
}

/// A fixed-size ring of samples and their payloads `P` between one
/// producer, the overflow interrupt (it may be an NMI: pushing takes no
/// lock and never waits), and the kernel, whose readers serialise on a
/// `spin` lock. Full means dropped, and counted.
pub struct SampleBuffer<const CAP: usize, P: Payload = ()> {
    rips: [AtomicU64; CAP],
    meta: [AtomicU32; CAP],
    payloads: [P::Slot; CAP],
    head: AtomicUsize,
    tail: AtomicUsize,
    dropped: AtomicU64,
    readers: spin::Mutex<()>,
    payload: core::marker::PhantomData<fn(P) -> P>,
}

impl<const CAP: usize, P: Payload> Default for SampleBuffer<CAP, P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const CAP: usize, P: Payload> SampleBuffer<CAP, P> {
    /// An empty buffer (usable in a `static`).
    #[allow(clippy::declare_interior_mutable_const)]
    pub const fn new() -> Self {
        const { assert!(CAP > 0 && CAP < usize::MAX / 2, "capacity") };
        const Z64: AtomicU64 = AtomicU64::new(0);
        const Z32: AtomicU32 = AtomicU32::new(0);
        SampleBuffer {
            rips: [Z64; CAP],
            meta: [Z32; CAP],
            payloads: [const { P::EMPTY_SLOT }; CAP],
            head: AtomicUsize::new(0),
            tail: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
            readers: spin::Mutex::new(()),
            payload: core::marker::PhantomData,
        }
    }

    /// Store a sample; `false` (and counted as dropped) if the buffer is
    /// full. Only one context may push (the overflow handler of the CPU that
    /// owns the buffer); it never blocks.
    pub fn push(&self, s: Sample<P>) -> bool {
        let head = self.head.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Acquire);
        if head.wrapping_sub(tail) >= CAP {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        let i = head % CAP;
        self.rips[i].store(s.rip, Ordering::Relaxed);
        let periods = s.periods.min(0xFF_FFFF);
        self.meta[i].store(periods << 8 | u32::from(s.counter), Ordering::Relaxed);
        s.payload.store(&self.payloads[i]);
        self.head.store(head.wrapping_add(1), Ordering::Release);
        true
    }

    /// Hand every stored sample to `f`, oldest first, and free the slots.
    /// Returns how many were drained.
    pub fn drain(&self, mut f: impl FnMut(Sample<P>)) -> usize {
        let _reader = self.readers.lock();
        let head = self.head.load(Ordering::Acquire);
        let mut tail = self.tail.load(Ordering::Relaxed);
        let mut n = 0;
        while tail != head {
            let i = tail % CAP;
            let meta = self.meta[i].load(Ordering::Relaxed);
            let rip = self.rips[i].load(Ordering::Relaxed);
            let payload = P::load(&self.payloads[i]);
            tail = tail.wrapping_add(1);
            self.tail.store(tail, Ordering::Release);
            // Only words `push` made are stored, so every one decodes; one
            // that did not would be counted as dropped, not handed on.
            match payload {
                Some(payload) => {
                    f(Sample {
                        counter: meta as u8,
                        periods: meta >> 8,
                        rip,
                        payload,
                    });
                    n += 1;
                }
                None => {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        n
    }

    /// Samples stored and not yet drained.
    pub fn len(&self) -> usize {
        self.head
            .load(Ordering::Acquire)
            .wrapping_sub(self.tail.load(Ordering::Acquire))
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Samples refused because the buffer was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NB: OverflowRule = OverflowRule {
        width: 40,
        pmi_delay: 1,
    };
    const IA64: OverflowRule = OverflowRule {
        width: 47,
        pmi_delay: 0,
    };

    #[test]
    fn presets_follow_the_manual() {
        let s = SampleAfter::new(100, NB).unwrap();
        assert_eq!(s.preset(), (1 << 40) - 100);
        // Woken by its own PMI, the counter holds the PMI event: -(N-1).
        assert_eq!(s.rearm(1), (1, (1 << 40) - 99), "-(N-1), SDM 18.15.5.8");
        // Woken early, on the wrapping event itself: -N, nothing invented.
        assert_eq!(s.rearm(0), (1, (1 << 40) - 100));
        // Not overflowed: nothing owed, the counter keeps its place.
        assert_eq!(s.rearm(s.preset() + 5), (0, s.preset() + 5));
        let one = SampleAfter::new(1, NB).unwrap();
        assert_eq!(one.preset(), (1 << 40) - 1);
        assert_eq!(one.rearm(1), (2, (1 << 40) - 1), "N = 1: two periods");
        let i = SampleAfter::new(7, IA64).unwrap();
        assert_eq!(i.rearm(0), (1, (1 << 47) - 7));
        // Itanium: an event counting 9 in the wrapping cycle leaves 9.
        assert_eq!(i.rearm(9), (2, (1 << 47) - 7 + 2));
        let zero = SampleAfter::new(0, NB).unwrap_err();
        assert_eq!(
            zero,
            SampleAfterError::Zero {
                max: 549_755_813_888
            }
        );
        assert_eq!(
            zero.to_string(),
            "a sample-after value of 0 is not allowed: a counter interrupts after 1 to 549755813888 events"
        );
        assert_eq!(
            SampleAfter::new((1 << 39) + 1, NB),
            Err(SampleAfterError::TooLarge { max: 1 << 39 })
        );
        assert!(SampleAfter::new(1 << 39, NB).is_ok());
    }

    /// Simulate a counter step by step with increments of 1 to 5 per step,
    /// a handler that runs at random points (its own PMI, early, or
    /// spuriously) and re-arms with `rearm`, and check conservation against
    /// `split` after every step, for many N on both rules.
    #[test]
    fn conservation_with_random_handler_timing_and_increments() {
        let mut rnd = crate::testing::rng(0x9e37_79b9_7f4a_7c15u64);
        for rule in [NB, IA64] {
            for n in [1u64, 2, 3, 5, 17, 64] {
                let s = SampleAfter::new(n, rule).unwrap();
                let (mut c, mut periods, mut events) = (s.preset(), 0u64, 0u64);
                for _ in 0..2000 {
                    let k = 1 + rnd(5);
                    c = (c + k) & rule.mask();
                    events += k;
                    if rnd(3) == 0 {
                        let (p, v) = s.rearm(c);
                        periods += p;
                        c = v;
                    }
                    let (owed, residual) = s.split(c);
                    assert_eq!(events, (periods + owed) * n + residual, "N={n}");
                    assert!(residual < n);
                }
            }
        }
    }

    /// The handler's constants give what the definition by `split` gives,
    /// on both sides of every boundary, for the smallest and largest N.
    #[test]
    fn rearm_constants_agree_with_split() {
        for rule in [NB, IA64] {
            for n in [
                1,
                2,
                3,
                1000,
                rule.max_sample_after() - 1,
                rule.max_sample_after(),
            ] {
                let s = SampleAfter::new(n, rule).unwrap();
                let p = s.preset();
                for raw in [
                    0,
                    1,
                    n - 1,
                    n,
                    n + 1,
                    2 * n,
                    3 * n + 1,
                    p - 1,
                    p,
                    p + 1,
                    rule.mask(),
                ] {
                    let raw = raw & rule.mask();
                    let (periods, residual) = s.split(raw);
                    let by_split = (
                        periods,
                        if periods == 0 {
                            raw
                        } else {
                            s.at_residual(residual)
                        },
                    );
                    assert_eq!(
                        s.rearm_constants().rearm(raw),
                        by_split,
                        "N={n} raw={raw:#x}"
                    );
                }
            }
        }
        assert_eq!(Rearm::default().rearm(5), (0, 5), "not sampling: nothing");
    }

    #[test]
    fn calibration_rounds_to_target() {
        let s = calibrate(1_000_000, 300, NB).unwrap();
        assert_eq!(s.get(), 3333);
        assert_eq!(calibrate(1_000, 400, NB).unwrap().get(), 3, "2.5 rounds up");
        assert_eq!(calibrate(5, 0, NB), Err(CalibrationError::NoTarget));
        assert_eq!(
            calibrate(5, 6, NB),
            Err(CalibrationError::TooFewEvents {
                events: 5,
                target: 6
            })
        );
        assert!(matches!(
            calibrate(u64::MAX, 1, NB),
            Err(CalibrationError::SampleAfter(
                SampleAfterError::TooLarge { .. }
            ))
        ));
    }

    #[test]
    fn buffer_is_a_ring_that_counts_drops() {
        let b: SampleBuffer<4> = SampleBuffer::new();
        for i in 0..6u64 {
            let stored = b.push(Sample {
                counter: 3,
                periods: 1,
                rip: i,
                payload: (),
            });
            assert_eq!(stored, i < 4);
        }
        assert_eq!((b.len(), b.dropped()), (4, 2));
        let mut seen = [0u64; 4];
        assert_eq!(b.drain(|s| seen[s.rip as usize] += 1), 4);
        assert_eq!(seen, [1; 4]);
        assert!(b.is_empty());
        for round in 0..10u64 {
            assert!(b.push(Sample {
                counter: 17,
                periods: 2,
                rip: round,
                payload: ()
            }));
            let mut got = None;
            b.drain(|s| got = Some(s));
            assert_eq!(
                got,
                Some(Sample {
                    counter: 17,
                    periods: 2,
                    rip: round,
                    payload: ()
                })
            );
        }
    }
}

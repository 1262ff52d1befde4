//! PMC0-3 and the counter configuration registers (documented on [`CounterPmc`]).

use super::events::EventInfo;
use super::fields::{EventCode, FieldError, Ism, Plm, Threshold, Umask, pmc_register};
use super::generation::{Counter, CounterSet, Generation};
use crate::register::{Field, register};

register! {
    /// PMC0: bit 0 `fr` (freeze), bits 3:1 ignored, bit n (n >= 4) the
    /// overflow bit of counter n (SDM vol 2 §7.2; Linux `perfmon.c`).
    ///
    /// Overflow and freeze bits are sticky: software clears them. Writing 0
    /// unfreezes the PMU and clears every overflow bit in one write (what
    /// Linux perfmon's `pfm_unfreeze_pmu` does); an interrupt is raised only
    /// for a carry out of bit W-1 of a counter whose `oi` bit is set. The
    /// overflow bits form a set of counters ([`CounterSet`]), not fields.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct Pmc0(u64): from_bits {
        /// The freeze bit.
        pub(super) FR: 0 => frozen, with_frozen: bool;
    }
}

impl Pmc0 {
    /// Unfrozen, no overflow bit: the value the interrupt handler writes
    /// back.
    pub const UNFROZEN: Pmc0 = Pmc0(0);
    /// Frozen, no overflow bit.
    pub const FROZEN: Pmc0 = Pmc0(0).with_frozen(true);

    /// The implemented counters of `generation` whose overflow bit is set.
    pub const fn overflowed(self, generation: Generation) -> CounterSet {
        CounterSet(self.0 & generation.counters().0)
    }

    /// Bits set outside `fr` and the implemented counters' overflow bits
    /// (bits 3:1, which are ignored, and overflow bits of counters that do
    /// not exist).
    pub const fn stray_bits(self, generation: Generation) -> u64 {
        self.0 & !generation.counters().0 & !Self::FR.mask()
    }

    /// Linux's test for "an overflow is pending": any bit but `fr`
    /// (`PMC0_HAS_OVFL` in Linux `perfmon.c`).
    pub const fn any_overflow_bit(self) -> bool {
        self.0 & !Self::FR.mask() != 0
    }

    /// The overflow bits of the counters in `set` taken from `other`, every
    /// other bit (the freeze bit included) from `self`.
    pub const fn with_overflow_bits_of(self, other: Pmc0, set: CounterSet) -> Pmc0 {
        Pmc0((self.0 & !set.0) | (other.0 & set.0))
    }

    /// With `counter`'s overflow bit set or cleared.
    pub const fn with_overflow(self, counter: Counter, on: bool) -> Pmc0 {
        Pmc0(Field::new(counter.index(), 1).set_flag(self.0, on))
    }
}

/// Where the architected overflow bit of counter pair `pair` (4-255) lives:
/// `(pmc, bit)` = `(pair / 64, pair % 64)`, in PMC0-3 (SDM vol 2 §7.2).
/// `None` for pairs 0-3, which are not counters. No
/// generation implements a counter above 15, so PMC1-3 hold no overflow bit
/// on any of them.
pub const fn overflow_bit_location(pair: u8) -> Option<(u8, u8)> {
    if pair < 4 {
        None
    } else {
        Some((pair / 64, pair % 64))
    }
}

/// The counter configuration fields of one generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CounterLayout {
    /// Privilege level mask, 3:0.
    pub plm: Field,
    /// External visibility, 4.
    pub ev: Field,
    /// Overflow interrupt, 5.
    pub oi: Field,
    /// Privileged monitor, 6.
    pub pm: Field,
    /// Event select.
    pub es: Field,
    /// Unit mask, 19:16.
    pub umask: Field,
    /// Threshold at its widest (22:20).
    pub threshold: Field,
    /// The counters whose threshold is one bit narrower (21:20).
    pub narrow_threshold: CounterSet,
    /// Instruction set mask, 25:24.
    pub ism: Field,
    /// The power enable bit and the one counter that has it.
    pub enable: Option<(Field, u8)>,
    /// Montecito: count both threads.
    pub all_threads: Option<Field>,
    /// Montecito: the MESI filter (i, s, e, m from the low bit).
    pub mesi: Option<Field>,
    /// Whether the ISM is fixed at IA-64 only.
    pub ism_fixed: bool,
}

/// The layout of a counter configuration register (PMC4-7) on the first
/// Itanium: where `plm`, `ev`, `oi`, `pm`, the 7-bit event select (14:8),
/// the unit mask, the threshold (3 bits, 2 on PMC6-7) and the instruction
/// set mask lie, with no power-enable bit and no thread or MESI fields. The
/// drivers and models encode and decode PMC4-7 through it; Itanium 2 and
/// Montecito start from it ([`ITANIUM2_COUNTER`], [`MONTECITO_COUNTER`]).
/// Sources: libpfm3 `pmc_ita_count_reg`, VTune's Itanium event help.
pub const ITANIUM_COUNTER: CounterLayout = CounterLayout {
    plm: CounterPmc::PLM,
    ev: CounterPmc::EV,
    oi: CounterPmc::OI,
    pm: CounterPmc::PM,
    es: CounterPmc::ITA_ES,
    umask: CounterPmc::UMASK,
    threshold: CounterPmc::THRESHOLD,
    narrow_threshold: CounterSet::range(6, 7),
    ism: CounterPmc::ISM,
    enable: None,
    all_threads: None,
    mesi: None,
    ism_fixed: false,
};

/// Itanium 2 (libpfm3 `pmc_ita2_counter_reg`).
pub const ITANIUM2_COUNTER: CounterLayout = CounterLayout {
    es: CounterPmc::ES,
    narrow_threshold: CounterSet::EMPTY,
    enable: Some((CounterPmc::ENABLE, 4)),
    ..ITANIUM_COUNTER
};

/// Montecito (libpfm3 `pmc_mont_counter_reg`).
pub const MONTECITO_COUNTER: CounterLayout = CounterLayout {
    es: CounterPmc::ES,
    narrow_threshold: CounterSet::EMPTY,
    all_threads: Some(CounterPmc::ALL_THREADS),
    mesi: Some(CounterPmc::MESI),
    ism_fixed: true,
    ..ITANIUM_COUNTER
};

impl CounterLayout {
    /// The layout of `generation`.
    pub const fn of(generation: Generation) -> &'static CounterLayout {
        match generation {
            Generation::Itanium => &ITANIUM_COUNTER,
            Generation::Itanium2 => &ITANIUM2_COUNTER,
            Generation::Montecito => &MONTECITO_COUNTER,
        }
    }

    /// The bits of counter `index`'s configuration that its fields declare
    /// writable: the writable bits of its row in the generation's PMC
    /// descriptor table (a fixed ISM is not writable; the power enable bit
    /// only on its counter).
    pub const fn writable(&self, index: u8) -> u64 {
        let mut w = self.plm.mask()
            | self.ev.mask()
            | self.oi.mask()
            | self.pm.mask()
            | self.es.mask()
            | self.umask.mask()
            | self.threshold_of(index).mask();
        if !self.ism_fixed {
            w |= self.ism.mask();
        }
        if let Some((enable, counter)) = self.enable
            && counter == index
        {
            w |= enable.mask();
        }
        if let Some(all) = self.all_threads {
            w |= all.mask();
        }
        if let Some(mesi) = self.mesi {
            w |= mesi.mask();
        }
        w
    }

    /// The threshold field of counter `index`.
    pub const fn threshold_of(&self, index: u8) -> Field {
        if self.narrow_threshold.contains(index) {
            CounterPmc::NARROW_THRESHOLD
        } else {
            self.threshold
        }
    }
}

/// The MESI filter of a Montecito counter (bits 30:27, libpfm3
/// `pmc_mont_counter_reg`): count only cache events on lines in the selected
/// states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MesiFilter {
    /// Invalid (bit 27).
    pub i: bool,
    /// Shared (bit 28).
    pub s: bool,
    /// Exclusive (bit 29).
    pub e: bool,
    /// Modified (bit 30).
    pub m: bool,
}

impl MesiFilter {
    /// All four states (what libpfm3 programs for events that honour the
    /// filter).
    pub const ALL: MesiFilter = MesiFilter::from_bits(0xF);

    /// From the 4-bit field (higher bits ignored).
    pub const fn from_bits(v: u64) -> MesiFilter {
        let b = MesiBits::from_bits(v as u8);
        MesiFilter {
            i: b.i(),
            s: b.s(),
            e: b.e(),
            m: b.m(),
        }
    }

    /// The 4-bit field.
    pub const fn bits(self) -> u8 {
        MesiBits::from_bits(0)
            .with_i(self.i)
            .with_s(self.s)
            .with_e(self.e)
            .with_m(self.m)
            .bits()
    }
}

register! {
    /// The MESI filter field's bits, from the low bit (libpfm3
    /// `pmc_mont_counter_reg`: bits 27-30 of the counter configuration).
    #[derive(Clone, Copy)]
    struct MesiBits(u8): from_bits {
        /// Invalid.
        I: 0 => i, with_i: bool;
        /// Shared.
        S: 1 => s, with_s: bool;
        /// Exclusive.
        E: 2 => e, with_e: bool;
        /// Modified.
        M: 3 => m, with_m: bool;
    }
}

pmc_register! {
    /// A counter configuration register value for one counter of one
    /// generation. Bits outside the writable fields always hold the register's
    /// power-up value (see [`crate::arch::itanium::Generation`]).
    ///
    /// The fields every generation places alike have generated accessors; the
    /// event select, the threshold, the ISM and the power enable, `all` and
    /// MESI bits differ between generations (and the threshold and power enable
    /// between counters), so the declaration lists each placement and the
    /// generation's [`CounterLayout`] picks one: their accessors read the
    /// field from the layout and refuse what it lacks.
    ///
    /// # PMC0-3 and the counter configuration registers
    ///
    /// PMC0-3 (freeze and overflow bits) and the generic counter configuration
    /// registers PMC4-7 (PMC4-15 on Montecito), one layout table per generation.
    ///
    /// # Counter configuration (libpfm3, Linux perfmon; VTune's Itanium help)
    ///
    /// | bits | Itanium | Itanium 2 | Montecito |
    /// |---|---|---|---|
    /// | 3:0 | plm | plm | plm |
    /// | 4 | ev (external visibility: BPM pin strobe on wrap) | ev | ev |
    /// | 5 | oi (overflow interrupt, sets PMC0.fr) | oi | oi |
    /// | 6 | pm (privileged monitor: PSR.pp instead of PSR.up) | pm | pm |
    /// | 7 | ignored | ignored | ignored |
    /// | 15:8 | es 14:8 (7 bits), 15 ignored | es (8 bits) | es (8 bits) |
    /// | 19:16 | umask | umask | umask |
    /// | 22:20 | threshold: 22:20 on PMC4/5, 21:20 on PMC6/7 | threshold | threshold |
    /// | 23 | ignored | PMC4: power enable for all counters; else ignored | ignored |
    /// | 25:24 | ism | ism | ism, fixed 10b |
    /// | 26 | ignored | reserved (must be 0) | `all`: count both threads |
    /// | 30:27 | ignored | reserved (27:26 must be 0) | MESI filter i, s, e, m |
    ///
    /// # Source disagreements and the resolution
    ///
    /// | topic | sources | resolution |
    /// |---|---|---|
    /// | Itanium threshold width on PMC6/7 | VTune (Itanium "Edit Events" help): 2 bits, 21:20; libpfm3, perfmon and the perf port: 3 bits on all counters | VTune, the Intel document: 2 bits. Consistent with the catalog, which puts every Itanium event whose maximum increment exceeds 3 on PMC4/5 only |
    /// | Itanium 2 bit 23 | libpfm3: PMC4-only power enable; perfmon: writable on all four, forced to 1 on PMC4; oprofile (2.4) and the perf port set it on every counter | libpfm3's layout: PMC4 only, and the power-up value has it set, so a builder starting from it enables the counters |
    /// | Itanium 2 bits 27:26 | perfmon's mask lets them through; libpfm3: must be zero | libpfm3: reserved |
    /// | threshold semantics | VTune and libpfm: the counter adds one when the event count *exceeds* the threshold; HP Caliper: *at or above* | VTune (Intel): exceeds, so a threshold at or above the event's maximum increment never counts ([`crate::arch::itanium::validate`] refuses it) |
    /// | what PMC0 bits mean overflow | architecture (SDM vol 2 §7.2): bits 63:4 are the overflow bits of PMD4-63; implemented: 4-7 (Itanium, Itanium 2), 4-15 (Montecito); Linux tests *any* bit but 0 | [`Pmc0::overflowed`] reports the implemented counters, [`Pmc0::stray_bits`] the rest, [`Pmc0::any_overflow_bit`] Linux's test |
    /// | PMC0 power-up value | perfmon: 1 (frozen) on Itanium and Itanium 2, 0 on Montecito | recorded per generation in [`crate::arch::itanium::PmcInfo::default`] |
    ///
    /// # Examples
    ///
    /// ```
    /// use pmu::arch::itanium::Counter;
    /// use pmu::arch::itanium::{Generation, Pmc0};
    ///
    /// // PMC0 bit 0 is the freeze bit, bit n the overflow bit of counter n.
    /// let c5 = Counter::new(Generation::Itanium2, 5).unwrap();
    /// let pmc0 = Pmc0::FROZEN.with_overflow(c5, true);
    /// assert_eq!(pmc0.bits(), 1 << 5 | 1);
    /// assert!(pmc0.frozen() && pmc0.overflowed(Generation::Itanium2).contains(5));
    /// ```
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct CounterPmc(pub counter: Counter, u64): pmc(Counter::info) {
        /// The privilege level mask.
        pub(crate) PLM: 0..=3 => plm, with_plm: Plm;
        /// `ev` (bit 4): strobe a BPM pin when the counter wraps.
        pub(crate) EV: 4 => external_visibility, with_external_visibility: bool;
        /// `oi` (bit 5): interrupt and set PMC0.fr when the counter
        /// overflows.
        pub(crate) OI: 5 => overflow_interrupt, with_overflow_interrupt: bool;
        /// `pm` (bit 6): a privileged monitor, enabled by PSR.pp, readable
        /// by privileged code only.
        pub(crate) PM: 6 => privileged, with_privileged: bool;
        /// The event select of Itanium 2 and Montecito (8 bits).
        pub(crate) ES: 8..=15;
        /// The event select of Itanium (7 bits; bit 15 ignored).
        pub(crate) ITA_ES: 8..=14;
        /// The unit mask.
        pub(crate) UMASK: 16..=19 => umask, with_umask: Umask;
        /// The threshold at its widest.
        pub(crate) THRESHOLD: 20..=22;
        /// The threshold of Itanium PMC6/7.
        pub(crate) NARROW_THRESHOLD: 20..=21;
        /// Itanium 2 PMC4: the power enable of all four counters.
        pub(crate) ENABLE: 23;
        /// The instruction set mask.
        pub(crate) ISM: 24..=25;
        /// Montecito `all`: count both threads.
        pub(crate) ALL_THREADS: 26;
        /// Montecito's MESI filter.
        pub(crate) MESI: 27..=30;
    }
}

impl CounterPmc {
    /// Counting event code `es` on `counter`, from the register's power-up
    /// value (on Itanium 2 PMC4 that has the power enable bit set; on
    /// Montecito the ISM is IA-64 only): PLM zero, so nothing counts until
    /// [`CounterPmc::with_plm`].
    pub const fn new(counter: Counter, es: EventCode) -> Result<CounterPmc, FieldError> {
        let layout = CounterLayout::of(counter.generation());
        if !layout.es.fits(es.get() as u64) {
            return Err(FieldError::EventCodeTooWide {
                code: es.get(),
                bits: layout.es.bits(),
            });
        }
        Ok(CounterPmc {
            counter,
            bits: layout.es.set(counter.info().default, es.get() as u64),
        })
    }

    /// Counting catalog event `event` on `counter`: its code and unit mask.
    /// For an EAR or BTB event the counter counts the EAR's (or BTB's)
    /// captures and the unit mask stays zero: the event's unit mask belongs
    /// in the EAR configuration (as libpfm3 programs EAR and BTB events).
    pub const fn for_event(counter: Counter, event: &EventInfo) -> Result<CounterPmc, FieldError> {
        if !matches!(
            (event.generation, counter.generation()),
            (Generation::Itanium, Generation::Itanium)
                | (Generation::Itanium2, Generation::Itanium2)
                | (Generation::Montecito, Generation::Montecito)
        ) {
            return Err(FieldError::WrongGeneration {
                expected: counter.generation(),
                found: event.generation,
            });
        }
        if !event.counters.contains(counter.index()) {
            return Err(FieldError::EventNotOnCounter {
                event: event.name,
                pmc: counter.index(),
            });
        }
        let code = match EventCode::new(event.generation, event.code) {
            Some(c) => c,
            None => {
                return Err(FieldError::EventCodeTooWide {
                    code: event.code,
                    bits: event.generation.event_code_bits(),
                });
            }
        };
        let umask = if event.kind.is_ear() { 0 } else { event.umask };
        match CounterPmc::new(counter, code) {
            Ok(c) => Ok(c.with_umask(Umask::from_bits_truncate(umask as u64))),
            Err(e) => Err(e),
        }
    }

    /// The same configuration on `counter`, a counter of the same
    /// generation: every field (`plm`, `ev`, `oi`, `pm`, `es`, unit mask,
    /// threshold, ISM, Montecito's `all` and MESI filter) carried over,
    /// on `counter`'s power-up value, so that a power enable bit (Itanium 2
    /// PMC4's bit 23, which gates all four counters) is `counter`'s own,
    /// never carried from or to another counter. `None` if `counter` is of
    /// another generation, or the threshold does not fit its field (the
    /// first Itanium's PMC6/7 hold 2 bits, VTune's Itanium event help).
    /// What the multiplexer uses to move an event between counters
    /// ([`crate::arch::itanium::multiplex`]).
    pub fn on(self, counter: Counter) -> Option<CounterPmc> {
        let g = counter.generation();
        if g != self.counter.generation() {
            return None;
        }
        let mut c = CounterPmc::new(counter, EventCode::new(g, self.es())?)
            .ok()?
            .with_plm(self.plm())
            .with_external_visibility(self.external_visibility())
            .with_overflow_interrupt(self.overflow_interrupt())
            .with_privileged(self.privileged())
            .with_umask(self.umask())
            .with_threshold(Threshold::new(counter, self.threshold().get())?)
            .ok()?
            .with_ism(self.ism())
            .ok()?;
        if let Some(all) = self.all_threads() {
            c = c.with_all_threads(all).ok()?;
        }
        if let Some(mesi) = self.mesi() {
            c = c.with_mesi(mesi).ok()?;
        }
        Some(c)
    }

    /// The generation's layout.
    pub const fn layout(self) -> &'static CounterLayout {
        CounterLayout::of(self.counter.generation())
    }

    /// The event code.
    pub const fn es(self) -> u8 {
        self.layout().es.get(self.bits) as u8
    }

    /// With the event code replaced.
    pub const fn with_es(self, es: EventCode) -> Result<CounterPmc, FieldError> {
        let f = self.layout().es;
        if !f.fits(es.get() as u64) {
            return Err(FieldError::EventCodeTooWide {
                code: es.get(),
                bits: f.bits(),
            });
        }
        Ok(self.with_bits(f.set(self.bits, es.get() as u64)))
    }

    /// The threshold field of this counter (21:20 on Itanium PMC6/7, else
    /// 22:20).
    pub const fn threshold_field(self) -> Field {
        self.layout().threshold_of(self.counter.index())
    }

    /// The threshold.
    pub const fn threshold(self) -> Threshold {
        let v = self.threshold_field().get(self.bits) as u8;
        match Threshold::new(self.counter, v) {
            Some(t) => t,
            None => Threshold::ZERO, // unreachable: the field is the counter's width
        }
    }

    /// With the threshold replaced; refused if it does not fit this
    /// counter's field (a threshold made for Itanium PMC4 may not fit PMC6).
    pub const fn with_threshold(self, t: Threshold) -> Result<CounterPmc, FieldError> {
        let f = self.threshold_field();
        if !t.fits(f.bits()) {
            return Err(FieldError::ThresholdTooWide {
                value: t.get(),
                bits: f.bits(),
            });
        }
        Ok(self.with_bits(f.set(self.bits, t.get() as u64)))
    }

    /// The instruction set mask.
    pub const fn ism(self) -> Ism {
        Ism::from_bits(self.layout().ism.get(self.bits))
    }

    /// With the instruction set mask replaced; on Montecito only
    /// [`Ism::Ia64Only`] is accepted.
    pub const fn with_ism(self, ism: Ism) -> Result<CounterPmc, FieldError> {
        let layout = self.layout();
        if layout.ism_fixed && !matches!(ism, Ism::Ia64Only) {
            return Err(FieldError::IsmFixed);
        }
        Ok(self.with_bits(layout.ism.set(self.bits, ism.bits() as u64)))
    }

    /// The power enable bit (Itanium 2 PMC4 only; it gates all four
    /// counters). `None` where the counter has no such bit.
    pub const fn enable(self) -> Option<bool> {
        match self.layout().enable {
            Some((f, pmc)) if pmc == self.counter.index() => Some(f.flag(self.bits)),
            _ => None,
        }
    }

    /// With the power enable bit set or cleared.
    pub const fn with_enable(self, on: bool) -> Result<CounterPmc, FieldError> {
        match self.layout().enable {
            Some((f, pmc)) if pmc == self.counter.index() => {
                Ok(self.with_bits(f.set_flag(self.bits, on)))
            }
            _ => Err(self.no_such("enable")),
        }
    }

    /// Montecito's `all` bit: count the events of both threads. `None`
    /// before Montecito.
    pub const fn all_threads(self) -> Option<bool> {
        match self.layout().all_threads {
            Some(f) => Some(f.flag(self.bits)),
            None => None,
        }
    }

    /// With Montecito's `all` bit set or cleared.
    pub const fn with_all_threads(self, on: bool) -> Result<CounterPmc, FieldError> {
        match self.layout().all_threads {
            Some(f) => Ok(self.with_bits(f.set_flag(self.bits, on))),
            None => Err(self.no_such("all")),
        }
    }

    /// Montecito's MESI filter. `None` before Montecito.
    pub const fn mesi(self) -> Option<MesiFilter> {
        match self.layout().mesi {
            Some(f) => Some(MesiFilter::from_bits(f.get(self.bits))),
            None => None,
        }
    }

    /// With Montecito's MESI filter replaced.
    pub const fn with_mesi(self, mesi: MesiFilter) -> Result<CounterPmc, FieldError> {
        match self.layout().mesi {
            Some(f) => Ok(self.with_bits(f.set(self.bits, mesi.bits() as u64))),
            None => Err(self.no_such("mesi")),
        }
    }

    const fn no_such(self, field: &'static str) -> FieldError {
        FieldError::NoSuchField {
            field,
            generation: self.counter.generation(),
            pmc: self.counter.index(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::itanium::ReservedBits;
    use crate::arch::itanium::events;

    fn ctr(g: Generation, n: u8) -> Counter {
        Counter::new(g, n).unwrap()
    }

    fn zero(g: Generation, n: u8) -> CounterPmc {
        CounterPmc::new(ctr(g, n), EventCode::new(g, 0).unwrap()).unwrap()
    }

    #[test]
    fn pmc0_layout() {
        let p = Pmc0::from_bits(0b1011_0001 | 1 << 9 | 0b110);
        assert!(p.frozen());
        assert_eq!(p.overflowed(Generation::Itanium), CounterSet(0b1011_0000));
        assert_eq!(
            p.overflowed(Generation::Montecito),
            CounterSet(0b10_1011_0000)
        );
        assert_eq!(p.stray_bits(Generation::Itanium2), 1 << 9 | 0b110);
        assert_eq!(p.stray_bits(Generation::Montecito), 0b110);
        assert!(p.any_overflow_bit());
        assert!(!Pmc0::FROZEN.any_overflow_bit());
        assert!(Pmc0::FROZEN.frozen() && !Pmc0::UNFROZEN.frozen());
        // Linux's test also fires on an ignored bit.
        assert!(Pmc0::from_bits(0b10).any_overflow_bit());
        let q = Pmc0::UNFROZEN
            .with_overflow(ctr(Generation::Itanium, 6), true)
            .with_frozen(true);
        assert_eq!(q.bits(), 0x41);
        assert_eq!(q.with_frozen(false).bits(), 0x40);
        assert_eq!(
            q.with_overflow(ctr(Generation::Itanium, 6), false).bits(),
            1
        );
        let m = Pmc0::UNFROZEN.with_overflow(ctr(Generation::Montecito, 15), true);
        assert_eq!(m.bits(), 1 << 15);
        assert_eq!(overflow_bit_location(3), None);
        assert_eq!(overflow_bit_location(4), Some((0, 4)));
        assert_eq!(overflow_bit_location(63), Some((0, 63)));
        assert_eq!(overflow_bit_location(64), Some((1, 0)));
        assert_eq!(overflow_bit_location(255), Some((3, 63)));
    }

    #[test]
    fn every_field_of_every_generation() {
        for g in Generation::ALL {
            for n in g.counters() {
                let z = zero(g, n);
                let base = z.bits();
                assert_eq!(base, ctr(g, n).info().default);
                let diff = |c: CounterPmc| c.bits() ^ base;
                assert_eq!(diff(z.with_plm(Plm::ALL)), 0xF);
                assert_eq!(diff(z.with_plm(Plm::USER)), 0x8);
                assert_eq!(diff(z.with_external_visibility(true)), 1 << 4);
                assert_eq!(diff(z.with_overflow_interrupt(true)), 1 << 5);
                assert_eq!(diff(z.with_privileged(true)), 1 << 6);
                assert_eq!(diff(z.with_umask(Umask::new(0xF).unwrap())), 0xF << 16);
                assert_eq!(diff(z.with_umask(Umask::new(0x5).unwrap())), 0x5 << 16);
                let max_es = if g == Generation::Itanium { 0x7F } else { 0xFF };
                let es = z.with_es(EventCode::new(g, max_es).unwrap()).unwrap();
                assert_eq!(diff(es), (max_es as u64) << 8);
                assert_eq!(es.es(), max_es);
                let t_bits = ctr(g, n).threshold_bits();
                let t_max = (1u8 << t_bits) - 1;
                let t = z
                    .with_threshold(Threshold::new(ctr(g, n), t_max).unwrap())
                    .unwrap();
                assert_eq!(diff(t), (t_max as u64) << 20);
                assert_eq!(t.threshold().get(), t_max);
                if g == Generation::Montecito {
                    assert_eq!(z.ism(), Ism::Ia64Only);
                    assert_eq!(z.with_ism(Ism::Both), Err(FieldError::IsmFixed));
                    assert_eq!(z.with_ism(Ism::Ia64Only), Ok(z));
                    assert_eq!(diff(z.with_all_threads(true).unwrap()), 1 << 26);
                    assert_eq!(z.all_threads(), Some(false));
                    assert_eq!(diff(z.with_mesi(MesiFilter::ALL).unwrap()), 0xF << 27);
                    let only_m = MesiFilter {
                        m: true,
                        ..MesiFilter::default()
                    };
                    assert_eq!(diff(z.with_mesi(only_m).unwrap()), 1 << 30);
                    assert_eq!(z.with_mesi(only_m).unwrap().mesi(), Some(only_m));
                } else {
                    assert_eq!(z.ism(), Ism::Both);
                    for ism in [Ism::Both, Ism::Ia32Only, Ism::Ia64Only, Ism::Disabled] {
                        let v = z.with_ism(ism).unwrap();
                        assert_eq!(diff(v), (ism.bits() as u64) << 24);
                        assert_eq!(v.ism(), ism);
                    }
                    assert_eq!(z.all_threads(), None);
                    assert!(z.with_all_threads(true).is_err());
                    assert_eq!(z.mesi(), None);
                    assert!(z.with_mesi(MesiFilter::ALL).is_err());
                }
                if (g, n) == (Generation::Itanium2, 4) {
                    assert_eq!(z.enable(), Some(true));
                    assert_eq!(diff(z.with_enable(false).unwrap()), 1 << 23);
                } else {
                    assert_eq!(z.enable(), None);
                    assert_eq!(
                        z.with_enable(true),
                        Err(FieldError::NoSuchField {
                            field: "enable",
                            generation: g,
                            pmc: n
                        })
                    );
                }
                // Every typed value is well-formed.
                let full = z
                    .with_plm(Plm::ALL)
                    .with_external_visibility(true)
                    .with_overflow_interrupt(true)
                    .with_privileged(true)
                    .with_umask(Umask::new(0xF).unwrap());
                assert_eq!(CounterPmc::from_bits(ctr(g, n), full.bits()), Ok(full));
            }
        }
    }

    #[test]
    fn itanium_threshold_is_narrower_on_pmc6_and_7() {
        let g = Generation::Itanium;
        for n in [4, 5] {
            let z = zero(g, n);
            assert_eq!(z.threshold_field(), Field::new(20, 3));
            let t = Threshold::new(ctr(g, n), 6).unwrap();
            assert_eq!(z.with_threshold(t).unwrap().bits(), 6 << 20);
        }
        let t_from_pmc4 = Threshold::new(ctr(g, 4), 4).unwrap();
        for n in [6, 7] {
            let z = zero(g, n);
            assert_eq!(z.threshold_field(), Field::new(20, 2));
            assert_eq!(
                z.with_threshold(t_from_pmc4),
                Err(FieldError::ThresholdTooWide { value: 4, bits: 2 })
            );
            let t = Threshold::new(ctr(g, n), 3).unwrap();
            assert_eq!(z.with_threshold(t).unwrap().bits(), 3 << 20);
            // Bit 22 is not part of the field: it is reserved on PMC6/7.
            assert_eq!(
                CounterPmc::from_bits(ctr(g, n), 1 << 22),
                Err(ReservedBits(1 << 22))
            );
            assert_eq!(
                CounterPmc::from_bits_truncate(ctr(g, n), 7 << 20)
                    .threshold()
                    .get(),
                3
            );
        }
        // A 3-bit threshold from PMC4 still fits PMC6 when small enough.
        let small = Threshold::new(ctr(g, 4), 2).unwrap();
        assert!(zero(g, 6).with_threshold(small).is_ok());
    }

    #[test]
    fn es_width_differs_between_generations() {
        // Itanium: 7 bits, bit 15 reserved.
        let z = zero(Generation::Itanium, 4);
        assert_eq!(z.layout().es, Field::new(8, 7));
        assert_eq!(
            CounterPmc::from_bits(ctr(Generation::Itanium, 4), 0x80 << 8),
            Err(ReservedBits(1 << 15))
        );
        assert_eq!(EventCode::new(Generation::Itanium, 0x80), None);
        let wide = EventCode::new(Generation::Itanium2, 0xC8).unwrap();
        assert_eq!(
            CounterPmc::new(ctr(Generation::Itanium, 5), wide),
            Err(FieldError::EventCodeTooWide {
                code: 0xC8,
                bits: 7
            })
        );
        assert_eq!(
            z.with_es(wide),
            Err(FieldError::EventCodeTooWide {
                code: 0xC8,
                bits: 7
            })
        );
        // Itanium 2 and Montecito: 8 bits.
        for g in [Generation::Itanium2, Generation::Montecito] {
            let c = CounterPmc::new(ctr(g, 5), wide).unwrap();
            assert_eq!(c.es(), 0xC8);
            assert_eq!(c.bits() & 0xFF00, 0xC800);
        }
    }

    #[test]
    fn reserved_bits_per_generation() {
        let check = |g: Generation, n: u8, bad: u64| {
            assert_eq!(
                CounterPmc::from_bits(ctr(g, n), ctr(g, n).info().default | bad),
                Err(ReservedBits(bad)),
                "{g:?} PMC{n} bit mask {bad:#x}"
            );
        };
        for n in 4..8 {
            check(Generation::Itanium, n, 1 << 7);
            check(Generation::Itanium, n, 1 << 15);
            check(Generation::Itanium, n, 1 << 23);
            check(Generation::Itanium, n, 1 << 26);
            check(Generation::Itanium, n, 1 << 63);
            check(Generation::Itanium2, n, 1 << 7);
            check(Generation::Itanium2, n, 1 << 26);
            check(Generation::Itanium2, n, 1 << 27);
            check(Generation::Itanium2, n, 1 << 40);
        }
        for n in 5..8 {
            check(Generation::Itanium2, n, 1 << 23);
        }
        for n in 4..16 {
            check(Generation::Montecito, n, 1 << 7);
            check(Generation::Montecito, n, 1 << 23);
            check(Generation::Montecito, n, 1 << 31);
            // ISM is not writable: clearing bit 25 is a reserved-bit change.
            assert_eq!(
                CounterPmc::from_bits(ctr(Generation::Montecito, n), 0),
                Err(ReservedBits(1 << 25))
            );
            assert_eq!(
                CounterPmc::from_bits_truncate(ctr(Generation::Montecito, n), 0).ism(),
                Ism::Ia64Only
            );
        }
        // Itanium 2 PMC4: clearing the enable bit is allowed (it is writable).
        assert!(CounterPmc::from_bits(ctr(Generation::Itanium2, 4), 0).is_ok());
    }

    #[test]
    fn for_event_programs_code_and_umask() {
        let g = Generation::Itanium2;
        let e = events::find(g, "BE_RSE_BUBBLE_AR_DEP").unwrap();
        let c = CounterPmc::for_event(ctr(g, 6), e).unwrap();
        assert_eq!(c.es(), 0x01);
        assert_eq!(c.umask().get(), 0x2);
        // EAR events put their umask in the EAR, not the counter.
        let ear = events::find(g, "DATA_EAR_CACHE_LAT64").unwrap();
        let c = CounterPmc::for_event(ctr(g, 5), ear).unwrap();
        assert_eq!((c.es(), c.umask().get()), (0xC8, 0));
        // Counter restrictions and generation mismatch.
        let pmc4_only = events::find(g, "L2_L3ACCESS_CANCEL_ANY").unwrap();
        assert!(CounterPmc::for_event(ctr(g, 4), pmc4_only).is_ok());
        assert_eq!(
            CounterPmc::for_event(ctr(g, 5), pmc4_only),
            Err(FieldError::EventNotOnCounter {
                event: "L2_L3ACCESS_CANCEL_ANY",
                pmc: 5
            })
        );
        let ita = events::find(Generation::Itanium, "NOPS_RETIRED").unwrap();
        assert_eq!(
            CounterPmc::for_event(ctr(g, 4), ita),
            Err(FieldError::WrongGeneration {
                expected: g,
                found: Generation::Itanium
            })
        );
        assert!(CounterPmc::for_event(ctr(Generation::Itanium, 5), ita).is_ok());
        assert!(CounterPmc::for_event(ctr(Generation::Itanium, 6), ita).is_err());
    }

    #[test]
    fn decoding_round_trips() {
        let mut s = 0x1234_5678_9ABC_DEF1u64;
        for _ in 0..crate::testing::fuzz_cases(50_000) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            for g in Generation::ALL {
                for n in g.counters() {
                    let c = ctr(g, n);
                    let v = CounterPmc::from_bits_truncate(c, s);
                    assert_eq!(c.info().reserved_bits(v.bits()), 0);
                    assert_eq!(CounterPmc::from_bits(c, v.bits()), Ok(v));
                    let mut rebuilt = CounterPmc::new(c, EventCode::new(g, v.es()).unwrap())
                        .unwrap()
                        .with_plm(v.plm())
                        .with_external_visibility(v.external_visibility())
                        .with_overflow_interrupt(v.overflow_interrupt())
                        .with_privileged(v.privileged())
                        .with_umask(v.umask())
                        .with_threshold(v.threshold())
                        .unwrap()
                        .with_ism(v.ism())
                        .unwrap();
                    if let Some(e) = v.enable() {
                        rebuilt = rebuilt.with_enable(e).unwrap();
                    }
                    if let Some(a) = v.all_threads() {
                        rebuilt = rebuilt.with_all_threads(a).unwrap();
                    }
                    if let Some(m) = v.mesi() {
                        rebuilt = rebuilt.with_mesi(m).unwrap();
                    }
                    assert_eq!(rebuilt, v);
                }
            }
        }
    }

    /// An image moved to another counter keeps every field, and the
    /// counter's own power enable bit; a threshold too wide for the
    /// counter, or another generation's counter, is refused.
    #[test]
    fn an_image_moves_between_counters() {
        let mut rnd = crate::testing::rng(0x4D0E);
        for g in Generation::ALL {
            for from in g.counters() {
                for to in g.counters() {
                    let max_es = if g == Generation::Itanium { 0x7F } else { 0xFF };
                    let es = EventCode::new(g, rnd(max_es + 1) as u8).unwrap();
                    let mut c = zero(g, from)
                        .with_es(es)
                        .unwrap()
                        .with_plm(Plm::from_bits_truncate(rnd(16)))
                        .with_external_visibility(rnd(2) == 1)
                        .with_overflow_interrupt(rnd(2) == 1)
                        .with_privileged(rnd(2) == 1)
                        .with_umask(Umask::from_bits_truncate(rnd(16)))
                        .with_threshold(Threshold::new(ctr(g, from), rnd(4) as u8).unwrap())
                        .unwrap();
                    if g == Generation::Montecito {
                        c = c
                            .with_all_threads(rnd(2) == 1)
                            .unwrap()
                            .with_mesi(MesiFilter::from_bits(rnd(16)))
                            .unwrap();
                    } else {
                        c = c.with_ism(Ism::from_bits(rnd(4))).unwrap();
                    }
                    let moved = c.on(ctr(g, to)).unwrap();
                    assert_eq!(moved.counter(), ctr(g, to));
                    assert_eq!(moved.on(ctr(g, from)), Some(c), "{g:?} {from} -> {to}");
                    assert_eq!(moved.enable(), zero(g, to).enable(), "the counter's own");
                }
            }
        }
        // Itanium 2: PMC4's power enable bit stays PMC4's.
        let g = Generation::Itanium2;
        let off = zero(g, 4).with_enable(false).unwrap();
        assert_eq!(
            off.on(ctr(g, 5)).unwrap().on(ctr(g, 4)).unwrap().enable(),
            Some(true)
        );
        // The first Itanium: a threshold of 4 fits PMC4/5, not PMC6/7.
        let g = Generation::Itanium;
        let wide = zero(g, 4)
            .with_threshold(Threshold::new(ctr(g, 4), 4).unwrap())
            .unwrap();
        assert!(wide.on(ctr(g, 5)).is_some());
        assert_eq!(wide.on(ctr(g, 6)), None);
        assert_eq!(
            wide.on(ctr(Generation::Itanium2, 4)),
            None,
            "another generation"
        );
    }
}

//! Counting injected events: which counters see an event (freeze, the
//! Itanium 2 enable bit, PSR.up/pp and `pm`, `plm`, `ism`, `es`, `umask`,
//! the Montecito MESI filter), thresholds, wrap at W bits, the overflow bits
//! and freeze of PMC0, the one interrupt line, and the `ev` BPM strobes
//! (SDM Vol. 2 7.2.1-7.2.2; Intel VTune's Itanium event help; libpfm3's
//! counter layouts; Linux perfmon).

use super::registers::{InterruptLine, ItaniumModel};
use super::tables::{Generation, counter, pmc0};
use crate::model::itanium::tables::Tables;
use bit_field::BitField;

/// The instruction set executing when an event occurs (PSR.is).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum InstructionSet {
    /// IA-64 (PSR.is = 0); admitted when `ism` bit 24 (the low bit) is clear.
    #[default]
    Ia64,
    /// IA-32 (PSR.is = 1); admitted when `ism` bit 25 (the high bit) is clear.
    Ia32,
}

impl InstructionSet {
    /// Whether a two-bit `ism` field admits this instruction set (VTune:
    /// 00 both, 10b IA-64 only, 01b IA-32 only, 11b none).
    pub const fn admitted_by(self, ism: u64) -> bool {
        match self {
            Self::Ia64 => ism & 1 == 0,
            Self::Ia32 => ism & 2 == 0,
        }
    }
}

/// The cache-line state an event concerns, for Montecito's MESI filter
/// (counter PMC bits 27 i, 28 s, 29 e, 30 m).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Mesi {
    /// Invalid (bit 27).
    Invalid,
    /// Shared (bit 28).
    Shared,
    /// Exclusive (bit 29).
    Exclusive,
    /// Modified (bit 30).
    Modified,
}

impl Mesi {
    /// The counter PMC bit that admits this state on Montecito.
    pub const fn pmc_bit(self) -> u64 {
        1 << (counter::MONTECITO_MESI.start
            + match self {
                Self::Invalid => 0,
                Self::Shared => 1,
                Self::Exclusive => 2,
                Self::Modified => 3,
            })
    }
}

/// The largest per-cycle increment any event has in libpfm3's event tables
/// (`pme_maxincr`: 1-7). Larger per-cycle values are clipped to it.
pub const MAX_PER_CYCLE: u8 = 7;

/// Occurrences of one event to inject: `count` occurrences, delivered
/// `per_cycle` per cycle (the last cycle gets the remainder), at privilege
/// level `cpl` in instruction set `isa`.
///
/// The model does not carry the event tables: a counter counts the event
/// when its `es` equals `code` and its `umask` equals `umask` (whatever the
/// umask means for that event), so a test injects the pair the counter is
/// meant to select, with `per_cycle` within the event's maximum increment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Event {
    /// Event code (PMC.es).
    pub code: u8,
    /// Unit mask (PMC.umask, 4 bits).
    pub umask: u8,
    /// Number of occurrences.
    pub count: u64,
    /// Occurrences per cycle (1..=7; 0 is taken as 1, more as 7).
    pub per_cycle: u8,
    /// Privilege level 0-3 (only bits 1:0 are used).
    pub cpl: u8,
    /// Instruction set.
    pub isa: InstructionSet,
    /// Cache-line state, for Montecito's MESI filter; `None`: not filtered.
    pub line: Option<Mesi>,
    /// Counters allowed to count it (bit n: counter n), for events
    /// restricted to some counters (libpfm3's `pme_counters`).
    /// Default: every counter.
    pub counters: u16,
}

impl Event {
    /// `count` occurrences of event `code` with `umask`, one per cycle, at
    /// privilege level 0, IA-64, any counter.
    pub const fn new(code: u8, umask: u8, count: u64) -> Self {
        Self {
            code,
            umask,
            count,
            per_cycle: 1,
            cpl: 0,
            isa: InstructionSet::Ia64,
            line: None,
            counters: u16::MAX,
        }
    }

    /// With `n` occurrences per cycle.
    pub const fn per_cycle(mut self, n: u8) -> Self {
        self.per_cycle = n;
        self
    }

    /// At privilege level `cpl` (0-3).
    pub const fn at(mut self, cpl: u8) -> Self {
        self.cpl = cpl;
        self
    }

    /// In instruction set `isa`.
    pub const fn isa(mut self, isa: InstructionSet) -> Self {
        self.isa = isa;
        self
    }

    /// Concerning a line in state `line` (Montecito MESI filter).
    pub const fn line(mut self, line: Mesi) -> Self {
        self.line = Some(line);
        self
    }

    /// Countable only by the counters in `mask` (bit n: counter n).
    pub const fn only_on(mut self, mask: u16) -> Self {
        self.counters = mask;
        self
    }
}

/// What an injection did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Delivery {
    /// Cycles the injection spans.
    pub cycles: u64,
    /// Cycles in which the PMU was not frozen (so counters could count).
    pub counted_cycles: u64,
    /// Whether an overflow with `oi` froze the PMU during the injection.
    pub froze: bool,
}

/// A taken performance-monitor interrupt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Interrupt {
    /// The overflow bits (PMC0 format, bit n = counter n) of the overflows
    /// that raised it.
    pub overflow: u64,
    /// How many interrupting overflow events happened since the line was last
    /// taken (the line is a single pending flag: later ones merge into it).
    pub edges: u32,
}

impl ItaniumModel {
    /// Injects `event` and counts it in every counter that selects it,
    /// cycle by cycle: an overflow with `oi` freezes the PMU at the end of
    /// its cycle and the rest of the injection is not counted.
    pub fn inject(&mut self, event: Event) -> Delivery {
        self.deliver(&event)
    }

    /// Whether the PMU interrupt is pending.
    pub const fn interrupt_pending(&self) -> bool {
        self.interrupt.pending
    }

    /// Takes the pending PMU interrupt (lowers the line), or `None`.
    pub fn take_interrupt(&mut self) -> Option<Interrupt> {
        let line = core::mem::replace(&mut self.interrupt, InterruptLine::NONE);
        line.pending.then_some(Interrupt {
            overflow: line.overflow,
            edges: line.edges,
        })
    }

    /// How many times counter `n` strobed its BPM pin (`ev` set, a wrap);
    /// on Itanium PMC4-7 strobe BPM0-3. 0 for a non-counter.
    pub fn bpm_strobes(&self, n: u32) -> u64 {
        if self.generation.is_counter(n) {
            self.strobes[n as usize]
        } else {
            0
        }
    }

    /// Whether a monitor with privilege-level mask `plm` and privileged bit
    /// `pm` is enabled for an event at `cpl`: not frozen, `plm` admits the
    /// level, and PSR.pp (privileged monitor) or PSR.up (user monitor) set.
    pub(super) fn monitor_enabled(&self, plm: u64, pm: bool, cpl: u8) -> bool {
        !self.frozen() && plm & (1 << (cpl & 3)) != 0 && if pm { self.psr.pp } else { self.psr.up }
    }

    /// Whether counter `c` counts `e`.
    fn selects(&self, c: u32, e: &Event) -> bool {
        let v = self.pmc[c as usize];
        let generation = self.generation;
        if generation == Generation::Itanium2 && self.pmc[4] & counter::ITANIUM2_ENABLE == 0 {
            return false;
        }
        let es = v.get_bits(counter::ES) & generation.event_select_mask();
        let umask = v.get_bits(counter::UMASK);
        let line_ok = match (generation, e.line) {
            (Generation::Montecito, Some(line)) => v & line.pmc_bit() != 0,
            _ => true,
        };
        e.counters & (1 << c) != 0
            && es == u64::from(e.code)
            && umask == u64::from(e.umask)
            && line_ok
            && self.monitor_enabled(v & counter::PLM, v & counter::PM != 0, e.cpl)
            && e.isa.admitted_by(v.get_bits(counter::ISM))
    }

    pub(super) fn deliver(&mut self, e: &Event) -> Delivery {
        let k = u64::from(e.per_cycle.clamp(1, MAX_PER_CYCLE));
        let full = e.count / k;
        let rem = e.count % k;
        let cycles = full + u64::from(rem > 0);
        if cycles == 0 || self.frozen() {
            return Delivery {
                cycles,
                counted_cycles: 0,
                froze: false,
            };
        }
        let generation = self.generation;
        let w = generation.pmd_width();
        // Per counter: increment in each full cycle, and in the last
        // (partial) cycle.
        let mut incs = [(0u64, 0u64); 16];
        let mut stop = cycles;
        let mut freeze = false;
        for c in 4..=generation.last_counter() {
            if !self.selects(c, e) {
                continue;
            }
            // Threshold t > 0: +1 in each cycle whose input exceeds t (VTune:
            // "exceeds the threshold"); t = 0: the input itself.
            let t = self.threshold(c);
            let filter = |input: u64| if t == 0 { input } else { u64::from(input > t) };
            let inc = (filter(k), if rem > 0 { filter(rem) } else { 0 });
            incs[c as usize] = inc;
            if self.pmc[c as usize] & counter::OI != 0
                && let Some(t) = cycles_to_wrap(self.pmd[c as usize], w, inc, full, rem > 0)
                && t <= stop
            {
                stop = t;
                freeze = true;
            }
        }
        let mask = generation.pmd_mask();
        let mut raised = 0u64;
        for c in 4..=generation.last_counter() {
            let (a, b) = incs[c as usize];
            if a == 0 && b == 0 {
                continue;
            }
            let total = u128::from(a) * u128::from(stop.min(full))
                + if stop > full { u128::from(b) } else { 0 };
            let sum = u128::from(self.pmd[c as usize]) + total;
            let wraps = sum >> w;
            self.pmd[c as usize] = (sum as u64) & mask;
            if wraps == 0 {
                continue;
            }
            let config = self.pmc[c as usize];
            if config & counter::EV != 0 {
                let s = &mut self.strobes[c as usize];
                *s = s.saturating_add(u64::try_from(wraps).unwrap_or(u64::MAX));
            }
            // Only an overflow with oi sets the overflow bit (SDM 7.2.2:
            // the processor sets it when one of the interrupt criteria is met).
            if config & counter::OI != 0 {
                raised |= 1 << c;
            }
        }
        if freeze {
            self.pmc[0] |= raised | pmc0::FR;
            self.raise_interrupt(raised);
        }
        Delivery {
            cycles,
            counted_cycles: stop,
            froze: freeze,
        }
    }

    /// One interrupting overflow event: the line goes (or stays) pending.
    fn raise_interrupt(&mut self, overflow: u64) {
        let line = &mut self.interrupt;
        line.pending = true;
        line.overflow |= overflow;
        line.edges = line.edges.saturating_add(1);
    }
}

/// The first cycle (1-based) in which a counter at `value` with increments
/// `(per full cycle, in the last partial cycle)` carries out of bit `w - 1`,
/// over `full` full cycles and, if `partial`, one more.
fn cycles_to_wrap(value: u64, w: u32, inc: (u64, u64), full: u64, partial: bool) -> Option<u64> {
    let need = (1u128 << w) - u128::from(value);
    let (a, b) = (u128::from(inc.0), u128::from(inc.1));
    if a > 0 {
        let t = need.div_ceil(a);
        if t <= u128::from(full) {
            return Some(t as u64);
        }
    }
    (partial && a * u128::from(full) + b >= need).then_some(full + 1)
}

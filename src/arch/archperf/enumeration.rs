//! What one logical processor's PMU has, as its CPUID enumerates it, and
//! why it lacks what it lacks ([`Lack`]): the counters the driver takes
//! ([`counters`]) and the events it refuses ([`check_event`]), per core
//! type on a hybrid part.
//!
//! A hybrid part's core types have different PMUs. Where CPUID leaf 23H
//! exists (CPUID.(EAX=07H, ECX=01H):EAX\[8\]: Meteor Lake, Lunar Lake,
//! Arrow Lake and later) each logical processor reads there its own
//! general and fixed counters, as bitmaps that may have holes (Lunar
//! Lake's Skymont cores: fixed counters 0-2 and 4-6), and its own
//! architectural events; elsewhere leaf 0AH says, and on a hybrid part
//! leaf 0AH reports what every core type has
//! ([`crate::detect::ArchPerfCpu`] has the recorded values). So a driver
//! taken on a Meteor Lake Crestmont (Atom) core has no fixed counter 3 and
//! refuses the topdown-slots event, which the same part's Redwood Cove
//! (Core) cores count.
//!
//! The crate drives general counters 0-7 and fixed counters 0-3
//! ([`Counter`]): a CPU's counters beyond them (Lunar Lake's Lion Cove
//! cores have ten general counters, its Skymont cores fixed counters 4-6)
//! are left alone.

use core::fmt;

use super::events::{ArchEvent, EventSpec};
use super::msrs::{Counter, CounterSet};
use crate::detect::{ArchPerfCpu, CoreType, Enumeration};

/// The counters of `cpu` the crate drives: general counters 0-7 and fixed
/// counters 0-3 where `cpu`'s bitmaps have them
/// ([`ArchPerfCpu::general_bitmap`], [`ArchPerfCpu::fixed_bitmap`]).
pub fn counters(cpu: &ArchPerfCpu) -> CounterSet {
    CounterSet::from_bitmaps(cpu.general_bitmap(), cpu.fixed_bitmap())
}

/// What a logical processor lacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Missing {
    /// A counter the crate drives, which this CPU does not have.
    Counter(Counter),
    /// A pre-defined architectural event this CPU does not count.
    Event(ArchEvent),
}

/// Why a logical processor refused something: what it lacks, its core
/// type on a hybrid part, and the CPUID leaf and bitmap that say so. Its
/// `Display` is the message a refusal shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Lack {
    /// What is missing.
    pub missing: Missing,
    /// The core type (CPUID leaf 1AH), on a hybrid part.
    pub core_type: Option<CoreType>,
    /// Whether the part is hybrid (CPUID.07H:EDX\[15\]).
    pub hybrid: bool,
    /// The leaf that says what this CPU has of that kind.
    pub leaf: Enumeration,
    /// What this CPU has of that kind, one bit each: its general counters,
    /// its fixed counters, or its available architectural events (leaf
    /// 23H's bitmap as read; from leaf 0AH, the counts, the fixed-counter
    /// rule and EBX's clear bits within its vector, as bitmaps).
    pub has: u32,
}

impl Lack {
    /// `missing` on `cpu`, with what `cpu` has of that kind.
    pub fn on(cpu: &ArchPerfCpu, missing: Missing) -> Lack {
        let (leaf, has) = match missing {
            Missing::Counter(c) if c.is_fixed() => (cpu.counters_from(), cpu.fixed_bitmap()),
            Missing::Counter(_) => (cpu.counters_from(), cpu.general_bitmap()),
            Missing::Event(_) => (cpu.events_from(), cpu.events_bitmap()),
        };
        Lack {
            missing,
            core_type: cpu.core_type,
            hybrid: cpu.hybrid,
            leaf,
            has,
        }
    }
}

impl fmt::Display for Lack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.missing {
            Missing::Counter(c) if c.is_fixed() => {
                write!(f, "fixed counter {} ({})", c.number(), c.name())?;
            }
            Missing::Counter(c) => write!(f, "general counter {} ({})", c.number(), c.name())?,
            Missing::Event(e) => write!(
                f,
                "the architectural event {} ({:02X}H/{:02X}H, CPUID event bit {})",
                e.name(),
                e.select(),
                e.umask(),
                e.ebx_bit()
            )?,
        }
        f.write_str(" is not on this CPU")?;
        match self.core_type {
            Some(t) => write!(f, ", {t}")?,
            None if self.hybrid => f.write_str(", a core of a hybrid part")?,
            None => {}
        }
        let has = self.has;
        match (self.missing, self.leaf) {
            (Missing::Counter(c), Enumeration::Leaf23) => write!(
                f,
                ": bit {} of CPUID.23H.01H:{}, its {} counters' bitmap, is clear (the bitmap is {has:#x})",
                c.number(),
                if c.is_fixed() { "EBX" } else { "EAX" },
                if c.is_fixed() { "fixed" } else { "general" },
            ),
            (Missing::Counter(c), Enumeration::Leaf0A) if c.is_fixed() => write!(
                f,
                ": CPUID leaf 0AH enumerates its fixed counters as {has:#x} (ECX[i] or EDX[4:0] > i)"
            ),
            (Missing::Counter(_), Enumeration::Leaf0A) => write!(
                f,
                ": CPUID.0AH:EAX[15:8] enumerates {} general counters",
                has.count_ones()
            ),
            (Missing::Event(e), Enumeration::Leaf23) => write!(
                f,
                ": bit {} of CPUID.23H.03H:EAX, its events' bitmap, is clear (the bitmap is {has:#x})",
                e.ebx_bit()
            ),
            (Missing::Event(e), Enumeration::Leaf0A) => write!(
                f,
                ": CPUID.0AH:EBX[{}] is set or beyond EAX[31:24]'s vector length (its available events: {has:#x})",
                e.ebx_bit()
            ),
        }?;
        if self.hybrid && self.leaf == Enumeration::Leaf0A {
            f.write_str(
                "; a hybrid part without CPUID leaf 23H enumerates there what every core type has",
            )?;
        }
        Ok(())
    }
}

impl core::error::Error for Lack {}

/// Whether `cpu` can count `e` on some counter it has: refused when `e` is
/// a pre-defined architectural event `cpu` does not count
/// ([`ArchPerfCpu::event_available`]) or a fixed counter's pseudo-encoding
/// (`ref-cycles`, `slots`) whose fixed counter `cpu` lacks. Other events
/// count on any general counter (model-specific events are not checked:
/// CPUID does not enumerate them).
pub fn check_event(cpu: &ArchPerfCpu, e: &EventSpec) -> Result<(), Lack> {
    if let Some(a) = e.architectural()
        && !cpu.event_available(a.ebx_bit())
    {
        return Err(Lack::on(cpu, Missing::Event(a)));
    }
    if !e.counts_on_general()
        && let Some(c) = e.fixed_counter().and_then(Counter::fixed)
        && !counters(cpu).contains(c)
    {
        return Err(Lack::on(cpu, Missing::Counter(c)));
    }
    Ok(())
}

#[cfg(test)]
mod tests;

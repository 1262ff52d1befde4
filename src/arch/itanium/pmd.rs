//! The counter PMDs (documented on [`CounterPmd`]).

use super::generation::{Counter, Generation};

/// What bits 63:W of a counter PMD read as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum UpperBits {
    /// All zero.
    Zero,
    /// Copies of bit W-1 (with bit W-1 set; a clear bit W-1 reads as
    /// [`UpperBits::Zero`]).
    SignExtension,
    /// Anything else: not a value the architecture allows.
    Other,
}

/// A value read from a counter PMD.
///
/// # The counter data registers
///
/// The generic counter data registers PMD4-7 (PMD4-15 on Montecito): the
/// count, what the upper bits read as, and the presets for sampling.
///
/// A counter is W bits wide: 32 on Itanium, 47 on Itanium 2 and Montecito
/// (Linux perfmon's `ovfl_val`, libpfm3's counter widths). Bits 63:W ignore
/// writes; on reads the architecture allows either zeros or copies of bit
/// W-1 ("so count values appear sign extended", SDM vol 2 §7.2); libpfm3
/// describes both generations' PMDs as sign-extended (`pmd_sxt32`,
/// `pmd_sxt47`).
/// [`CounterPmd::count`] therefore ignores bits 63:W, and
/// [`CounterPmd::upper_bits`] says which of the two forms a read had.
///
/// An overflow is a carry out of bit W-1 (VTune's Itanium event help, `oi`:
/// "a carry out from bit 31" on Itanium). To sample every N events, preset
/// the counter to 2^W - N ([`sampling_preset`]): the N-th event carries
/// out.
///
/// # Examples
///
/// ```
/// use pmu::arch::itanium::sampling_preset;
/// use pmu::arch::itanium::Generation;
///
/// // A 47-bit counter that overflows on its 1000th event:
/// assert_eq!(sampling_preset(Generation::Itanium2, 1000), Some((1 << 47) - 1000));
/// // A 32-bit Itanium counter cannot wait for 2^32 + 1 events.
/// assert_eq!(sampling_preset(Generation::Itanium, (1 << 32) + 1), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CounterPmd {
    counter: Counter,
    raw: u64,
}

impl CounterPmd {
    /// Any raw value read from `counter`'s PMD.
    pub const fn from_bits(counter: Counter, raw: u64) -> CounterPmd {
        CounterPmd { counter, raw }
    }

    /// The raw value.
    pub const fn bits(self) -> u64 {
        self.raw
    }

    /// The counter.
    pub const fn counter(self) -> Counter {
        self.counter
    }

    /// The count: bits W-1:0.
    pub const fn count(self) -> u64 {
        self.raw & self.counter.generation().counter_mask()
    }

    /// What bits 63:W hold.
    pub const fn upper_bits(self) -> UpperBits {
        let g = self.counter.generation();
        let w = g.counter_width();
        let upper = self.raw & !g.counter_mask();
        let top = (self.raw >> (w - 1)) & 1;
        if upper == 0 {
            UpperBits::Zero
        } else if top == 1 && upper == !g.counter_mask() {
            UpperBits::SignExtension
        } else {
            UpperBits::Other
        }
    }

    /// Events left before the counter carries out of bit W-1: 2^W - count
    /// (2^W for a count of zero).
    pub const fn events_until_overflow(self) -> u64 {
        let g = self.counter.generation();
        (g.counter_mask() - self.count()) + 1
    }
}

/// The count a read of a counter PMD of `generation` gives: bits W-1:0 of
/// `raw` (bits 63:W read as 0 or as copies of bit W-1, SDM Vol. 2 Table 7-3;
/// see [`CounterPmd::upper_bits`]).
pub const fn count(generation: Generation, raw: u64) -> u64 {
    raw & generation.counter_mask()
}

/// The value to write to a counter PMD of `generation` so that it holds
/// `count` (bits 63:W are ignored by the hardware; this writes them zero).
pub const fn write_image(generation: Generation, count: u64) -> u64 {
    count & generation.counter_mask()
}

/// The preset that makes a counter of `generation` overflow on the
/// `period`-th event: 2^W - `period`. `None` for a period of 0 or above
/// 2^W (a 32-bit Itanium counter cannot wait for more than 2^32 events).
pub const fn sampling_preset(generation: Generation, period: u64) -> Option<u64> {
    let m = generation.counter_mask();
    if period == 0 || period - 1 > m {
        None
    } else {
        Some((m - (period - 1)) & m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(g: Generation, n: u8) -> Counter {
        Counter::new(g, n).unwrap()
    }

    #[test]
    fn count_and_upper_bits() {
        let ita = c(Generation::Itanium, 4);
        let v = CounterPmd::from_bits(ita, 0xFFFF_FFFF_8000_0001);
        assert_eq!(v.count(), 0x8000_0001);
        assert_eq!(v.upper_bits(), UpperBits::SignExtension);
        assert_eq!(
            CounterPmd::from_bits(ita, 0x7FFF_FFFF).upper_bits(),
            UpperBits::Zero
        );
        assert_eq!(
            CounterPmd::from_bits(ita, 0x8000_0000).upper_bits(),
            UpperBits::Zero
        );
        assert_eq!(
            CounterPmd::from_bits(ita, 0x1_0000_0000).upper_bits(),
            UpperBits::Other
        );
        // Sign extension of a clear bit 31 is not sign extension.
        assert_eq!(
            CounterPmd::from_bits(ita, 0xFFFF_FFFF_0000_0001).upper_bits(),
            UpperBits::Other
        );
        let ita2 = c(Generation::Itanium2, 7);
        let v = CounterPmd::from_bits(ita2, u64::MAX);
        assert_eq!(v.count(), (1 << 47) - 1);
        assert_eq!(v.upper_bits(), UpperBits::SignExtension);
        assert_eq!(v.events_until_overflow(), 1);
        assert_eq!(
            CounterPmd::from_bits(ita2, 0).events_until_overflow(),
            1 << 47
        );
        assert_eq!(
            CounterPmd::from_bits(c(Generation::Montecito, 15), 1 << 47).upper_bits(),
            UpperBits::Other
        );
    }

    #[test]
    fn presets() {
        let g = Generation::Itanium;
        assert_eq!(sampling_preset(g, 0), None);
        assert_eq!(sampling_preset(g, 1), Some(0xFFFF_FFFF));
        assert_eq!(sampling_preset(g, 1000), Some(0x1_0000_0000 - 1000));
        assert_eq!(sampling_preset(g, 1 << 32), Some(0));
        assert_eq!(sampling_preset(g, (1 << 32) + 1), None);
        assert_eq!(sampling_preset(g, u64::MAX), None);
        let g2 = Generation::Itanium2;
        assert_eq!(sampling_preset(g2, 1 << 40), Some((1 << 47) - (1 << 40)));
        assert_eq!(sampling_preset(g2, 1 << 47), Some(0));
        assert_eq!(sampling_preset(g2, (1 << 47) + 1), None);
        // The preset overflows after exactly `period` events.
        for g in Generation::ALL {
            for period in [1u64, 2, 100_000, 1 << 31] {
                let p = sampling_preset(g, period).unwrap();
                let v = CounterPmd::from_bits(c(g, 4), p);
                assert_eq!(v.events_until_overflow(), period);
            }
        }
        assert_eq!(write_image(g, 0x1_2345_6789), 0x2345_6789);
        assert_eq!(write_image(g2, u64::MAX), (1 << 47) - 1);
    }
}

//! The generations and their register maps (documented on [`Generation`]).

/// An Itanium PMU generation (Itanium, Itanium 2 or Montecito), and what
/// each implements: counters and their width, the PMC and PMD register
/// maps, each PMC's power-up value and writable bits, and which PMDs each
/// PMC controls.
///
/// Sources: Linux perfmon's per-model PMU tables (`perfmon_itanium.h`,
/// `perfmon_mckinley.h`, `perfmon_montecito.h`: the implemented registers,
/// and the register descriptors' defaults and writable masks), libpfm3's
/// register layouts (`pfmlib_itanium.h`, `pfmlib_itanium2.h`,
/// `pfmlib_montecito.h`) and the Itanium SDM Vol. 2 7.2.
///
/// | | Itanium (Merced) | Itanium 2 (McKinley, Madison) | Montecito |
/// |---|---|---|---|
/// | CPUID family | 07h | 1Fh | 20h |
/// | counters | PMC/PMD4-7 | PMC/PMD4-7 | PMC/PMD4-15 |
/// | counter width | 32 | 47 | 47 |
/// | `es` field | 7 bits, 14:8 | 8 bits, 15:8 | 8 bits, 15:8 |
/// | threshold | 3 bits on PMC4/5, 2 bits on PMC6/7 | 3 bits | 3 bits |
/// | I-EAR / D-EAR / BTB config | PMC10 / PMC11 / PMC12 | PMC10 / PMC11 / PMC12 | PMC37 / PMC40 / PMC39 |
/// | implemented PMCs | 0-13 | 0-15 | 0-15, 32-42 |
/// | implemented PMDs | 0-17 | 0-17 | 4-15, 32-36, 38-39, 48-63 |
///
/// # Writable bits and power-up values
///
/// Linux perfmon keeps, per PMC, a power-up value and a mask of the bits a
/// write may change; every other bit is replaced by its power-up value
/// (`pfm_mck_reserved` in `perfmon_mckinley.h`). This crate uses the same
/// pair for every register of every generation
/// ([`PmcInfo`](crate::arch::itanium::PmcInfo)), with these
/// choices:
///
/// * **Itanium**: perfmon's Itanium table enforces nothing (mask -1). This
///   crate derives the writable bits from libpfm3's register layouts
///   instead, so that the ignored and reserved fields
///   (counter bits 7, 15, 23, 63:26, bit 22 on PMC6/7) are caught. Power-up
///   values are perfmon's where the sources give one (PMC0, PMC8/9,
///   PMC11, PMC13) and zero elsewhere (PMC4-7, PMC10, PMC12: assumed).
/// * **Itanium 2**: perfmon's masks and power-up values (zero assumed for
///   PMC5-7 and PMC10-12, which the sources do not list), except on the
///   counters: perfmon's
///   mask 0x0FFF_FF7F lets bits 27:26 through and treats bit 23 alike on all
///   four counters. libpfm3 says bits 26-27 "must be zero for proper
///   operations" and names bit 23 the *PMC4-only* power enable bit. This
///   crate follows the layout: 27:26 are reserved, bit 23 is writable on
///   PMC4 only (OP24 and the perf port write it on every counter, where the
///   hardware ignores it; here such a value is refused or has the bit
///   replaced, per policy). Likewise the branch trace buffer's PMC12:
///   perfmon's mask 0xFFFF makes bits 5:4 writable, libpfm3's
///   `pmc12_ita2_reg` names them `btbc_ig1` (ignored), and perfmon's own
///   mask for the same register on Montecito (PMC39, 0xFFCF) leaves them
///   out. This crate follows the layout: bits 5:4 are reserved (writable
///   0xFFCF), so the validator refuses them under
///   [`ReservedPolicy::Reject`](super::ReservedPolicy::Reject) and replaces
///   them by their power-up value 0 under perfmon's policy, which puts the
///   hardware in the same state as perfmon's write (the bits are ignored).
///   The register-level model takes the same rule from the same source, in
///   its own table.
/// * **Montecito**: perfmon's masks and power-up values throughout: the
///   counters' and D-EAR's ISM is fixed at 10b (IA-64 only), the
///   I-EAR (PMC37) has no ISM at all.
///
/// # Examples
///
/// ```
/// use pmu::arch::itanium::Generation;
///
/// assert_eq!(Generation::Itanium.counter_width(), 32);
/// assert_eq!(Generation::Itanium2.counter_width(), 47);
/// assert_eq!(Generation::Montecito.counters().len(), 12);   // PMD4-15
/// assert_eq!(Generation::Montecito.iear_pmc(), 37);
/// ```
///
/// A PMU generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Generation {
    /// Itanium (Merced), CPUID family 07h.
    Itanium,
    /// Itanium 2 (McKinley, Madison), CPUID family 1Fh.
    Itanium2,
    /// Dual-core Itanium 2 9000/9100 (Montecito, Montvale), CPUID family 20h.
    Montecito,
}

impl Generation {
    /// All three, oldest first.
    pub const ALL: [Generation; 3] = [
        Generation::Itanium,
        Generation::Itanium2,
        Generation::Montecito,
    ];

    /// The name.
    pub const fn name(self) -> &'static str {
        match self {
            Generation::Itanium => "Itanium",
            Generation::Itanium2 => "Itanium 2",
            Generation::Montecito => "Montecito",
        }
    }

    /// The generation of a CPUID family number (Linux perfmon's
    /// `pmu_family`).
    pub const fn from_cpuid_family(family: u8) -> Option<Generation> {
        match family {
            0x07 => Some(Generation::Itanium),
            0x1F => Some(Generation::Itanium2),
            0x20 => Some(Generation::Montecito),
            _ => None,
        }
    }

    /// The CPUID family number.
    pub const fn cpuid_family(self) -> u8 {
        match self {
            Generation::Itanium => 0x07,
            Generation::Itanium2 => 0x1F,
            Generation::Montecito => 0x20,
        }
    }

    /// The width W of the generic counters (Linux perfmon's `ovfl_val`,
    /// libpfm3: 32 on Itanium, 47 after; overflow is the carry out of bit
    /// W-1).
    pub const fn counter_width(self) -> u8 {
        match self {
            Generation::Itanium => 32,
            Generation::Itanium2 | Generation::Montecito => 47,
        }
    }

    /// The low W bits.
    pub const fn counter_mask(self) -> u64 {
        (1u64 << self.counter_width()) - 1
    }

    /// The generic counters (PMC/PMD pairs): 4-7, or 4-15 on Montecito.
    pub const fn counters(self) -> CounterSet {
        match self {
            Generation::Itanium | Generation::Itanium2 => CounterSet::range(4, 7),
            Generation::Montecito => CounterSet::range(4, 15),
        }
    }

    /// The width of the counters' `es` field (7 on Itanium, else 8).
    pub const fn event_code_bits(self) -> u8 {
        match self {
            Generation::Itanium => 7,
            Generation::Itanium2 | Generation::Montecito => 8,
        }
    }

    /// The implemented PMCs (Linux perfmon's tables).
    pub const fn implemented_pmcs(self) -> RegSet {
        match self {
            Generation::Itanium => RegSet::range(0, 13),
            Generation::Itanium2 => RegSet::range(0, 15),
            Generation::Montecito => RegSet::range(0, 15).union(RegSet::range(32, 42)),
        }
    }

    /// The implemented PMDs (Linux perfmon's tables).
    pub const fn implemented_pmds(self) -> RegSet {
        match self {
            Generation::Itanium | Generation::Itanium2 => RegSet::range(0, 17),
            Generation::Montecito => RegSet::range(4, 15)
                .union(RegSet::range(32, 36))
                .union(RegSet::range(38, 39))
                .union(RegSet::range(48, 63)),
        }
    }

    /// The instruction EAR's configuration register: PMC10, PMC37 on
    /// Montecito.
    pub const fn iear_pmc(self) -> u8 {
        match self {
            Generation::Montecito => 37,
            _ => 10,
        }
    }

    /// The I-EAR's address PMD: PMD0 (Itanium, Itanium 2), PMD34 (Montecito)
    /// (libpfm3's EAR layouts).
    pub const fn iear_address_pmd(self) -> u8 {
        match self {
            Generation::Montecito => 34,
            _ => 0,
        }
    }

    /// The I-EAR's latency PMD (cache mode): PMD1 (Itanium, Itanium 2),
    /// PMD35 (Montecito) (libpfm3's EAR layouts).
    pub const fn iear_latency_pmd(self) -> u8 {
        match self {
            Generation::Montecito => 35,
            _ => 1,
        }
    }

    /// The data EAR's configuration register: PMC11, PMC40 on Montecito.
    pub const fn dear_pmc(self) -> u8 {
        match self {
            Generation::Montecito => 40,
            _ => 11,
        }
    }

    /// The branch trace buffer's configuration register: PMC12, PMC39 (the
    /// execution trace buffer) on Montecito.
    pub const fn btb_pmc(self) -> u8 {
        match self {
            Generation::Montecito => 39,
            _ => 12,
        }
    }

    /// The data EAR's PMDs, as `[address, latency, instruction]`: PMD2,
    /// PMD3, PMD17; Montecito PMD32, PMD33, PMD36 (libpfm3's D-EAR PMD
    /// layouts; Linux perfmon's dependencies of PMC11 / PMC40).
    pub const fn dear_pmds(self) -> [u8; 3] {
        match self {
            Generation::Montecito => [32, 33, 36],
            _ => [2, 3, 17],
        }
    }

    /// The branch trace index PMD: PMD16; Montecito's execution trace
    /// buffer index PMD38 (libpfm3's BTB and ETB layouts).
    pub const fn btb_index_pmd(self) -> u8 {
        match self {
            Generation::Montecito => 38,
            _ => 16,
        }
    }

    /// Montecito's execution trace buffer extension PMD39 (`None` before:
    /// Itanium 2 keeps the extension bits in PMD16, Itanium has none).
    pub const fn btb_extension_pmd(self) -> Option<u8> {
        match self {
            Generation::Montecito => Some(39),
            _ => None,
        }
    }

    /// The bits of PMD `index` the hardware keeps on a write (the others
    /// are ignored: a write cannot set them); `None` if the PMD is not
    /// implemented. A counter keeps its W bits (SDM Vol. 2 7.2: bits 63:W
    /// ignore writes; Linux perfmon writes `value & ovfl_val`). The EAR and
    /// branch trace PMDs keep their fields and drop their `ig` bits
    /// (libpfm3's layouts: Itanium `pmd0_ita_reg` ig 4:2, `pmd3_ita_reg`
    /// ig 61:12, `pmd17_ita_reg` ig 1; Itanium 2 `pmd1_ita2_reg` latency
    /// 11:0 and overflow 12, `pmd3_ita2_reg` 15:0, `pmd16_ita2_reg` bbi,
    /// full and b1/bruflush per record with 2 ig bits each; Montecito
    /// `pmd38` ebi 3:0, ig 4, full 5, `pmd39` b1/bruflush per record).
    pub const fn pmd_writable(self, index: u8) -> Option<u64> {
        const ALL: u64 = u64::MAX;
        /// An I-EAR address PMD: ig 4:2.
        const IEAR_ADDRESS: u64 = !(0b111 << 2);
        /// b1 and bruflush of each record's 4-bit extension.
        const EXTENSIONS: u64 = 0x3333_3333_3333_3333;
        let kind = match self.pmd(index) {
            Some(k) => k,
            None => return None,
        };
        Some(match (self, kind) {
            (_, PmdKind::Counter) => self.counter_mask(),
            (_, PmdKind::IearAddress) => IEAR_ADDRESS,
            (Generation::Itanium, PmdKind::IearLatency) => 0xFFF,
            (_, PmdKind::IearLatency) => 0x1FFF,
            (_, PmdKind::DearAddress | PmdKind::BtbRecord) => ALL,
            (Generation::Itanium, PmdKind::DearLatency) => 0b11 << 62 | 0xFFF,
            (_, PmdKind::DearLatency) => 0xFFFF,
            (Generation::Itanium, PmdKind::DearInstruction) => !0b10,
            (_, PmdKind::DearInstruction) => ALL,
            (Generation::Itanium, PmdKind::BtbIndex) => 0xF,
            (Generation::Itanium2, PmdKind::BtbIndex) => 0xF | (EXTENSIONS & 0xFFFF_FFFF) << 4,
            (Generation::Montecito, PmdKind::BtbIndex) => 0xF | 1 << 5,
            (_, PmdKind::BtbExtension) => EXTENSIONS,
        })
    }

    /// What PMD `index` is on this generation; `None` if not implemented.
    pub const fn pmd(self, index: u8) -> Option<PmdKind> {
        if !self.implemented_pmds().contains(index) {
            return None;
        }
        Some(match self {
            Generation::Itanium | Generation::Itanium2 => match index {
                0 => PmdKind::IearAddress,
                1 => PmdKind::IearLatency,
                2 => PmdKind::DearAddress,
                3 => PmdKind::DearLatency,
                4..=7 => PmdKind::Counter,
                8..=15 => PmdKind::BtbRecord,
                16 => PmdKind::BtbIndex,
                _ => PmdKind::DearInstruction,
            },
            Generation::Montecito => match index {
                4..=15 => PmdKind::Counter,
                32 => PmdKind::DearAddress,
                33 => PmdKind::DearLatency,
                34 => PmdKind::IearAddress,
                35 => PmdKind::IearLatency,
                36 => PmdKind::DearInstruction,
                38 => PmdKind::BtbIndex,
                39 => PmdKind::BtbExtension,
                _ => PmdKind::BtbRecord,
            },
        })
    }
}

/// Declares a set of numbers 0-63 as a `u64` bit mask (bit n = number n),
/// with `const fn` operations and an ascending iterator: [`RegSet`] for PMC
/// or PMD numbers and [`CounterSet`] for counter numbers. Two types from one
/// declaration, so that a set of counters is never taken for a set of
/// registers.
macro_rules! number_set {
    (
        $(#[$doc:meta])*
        $vis:vis struct $name:ident, $iter:ident, $member:literal;
    ) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        pub struct $name($vis u64);

        crate::register::set_operations!($name, $member);

        impl $name {
            /// The empty set.
            pub const EMPTY: $name = $name(0);

            #[doc = concat!("The set as a bit mask (bit n = ", $member, " n).")]
            pub const fn bits(self) -> u64 {
                self.0
            }

            #[doc = concat!($member, "s `first..=last` (empty if `first > last`; numbers above 63")]
            /// are dropped).
            pub const fn range(first: u8, last: u8) -> $name {
                let mut bits = 0u64;
                let mut i = first;
                while i <= last && i < 64 {
                    bits |= 1 << i;
                    i += 1;
                }
                $name(bits)
            }

            /// The set holding `n` only (empty above 63).
            pub const fn single(n: u8) -> $name {
                if n < 64 { $name(1 << n) } else { $name(0) }
            }

            /// Whether `n` is in the set.
            pub const fn contains(self, n: u8) -> bool {
                n < 64 && self.0 & (1 << n) != 0
            }

            /// With `n` added.
            pub const fn with(self, n: u8) -> $name {
                self.union($name::single(n))
            }

            #[doc = concat!("This set without ", $member, " `n`.")]
            pub const fn without(self, n: u8) -> $name {
                $name(self.0 & !$name::single(n).0)
            }

            #[doc = concat!("How many ", $member, "s.")]
            pub const fn len(self) -> u32 {
                self.0.count_ones()
            }

            /// Whether the set is empty.
            pub const fn is_empty(self) -> bool {
                self.0 == 0
            }

            #[doc = concat!("The lowest ", $member, " number, if any.")]
            pub const fn first(self) -> Option<u8> {
                if self.0 == 0 {
                    None
                } else {
                    Some(self.0.trailing_zeros() as u8)
                }
            }

            #[doc = concat!("The ", $member, " numbers in ascending order.")]
            pub const fn iter(self) -> $iter {
                $iter(self.0)
            }
        }

        impl IntoIterator for $name {
            type Item = u8;
            type IntoIter = $iter;
            fn into_iter(self) -> $iter {
                self.iter()
            }
        }

        #[doc = concat!("Iterator over a [`", stringify!($name), "`], ascending.")]
        #[derive(Clone, Debug)]
        pub struct $iter(u64);

        impl Iterator for $iter {
            type Item = u8;
            fn next(&mut self) -> Option<u8> {
                if self.0 == 0 {
                    return None;
                }
                let n = self.0.trailing_zeros() as u8;
                self.0 &= self.0 - 1;
                Some(n)
            }
        }
    };
}

number_set! {
    /// A set of register numbers 0-63, PMCs or PMDs, as a bit mask: the
    /// implemented registers of a generation
    /// ([`Generation::implemented_pmcs`], [`Generation::implemented_pmds`]),
    /// the PMDs a PMC controls
    /// ([`PmcInfo::pmds`](crate::arch::itanium::PmcInfo::pmds)). A set of counters is a
    /// [`CounterSet`].
    pub struct RegSet, RegSetIter, "register";
}

number_set! {
    /// A set of generic counters by number (counter n is PMC n with PMD n,
    /// and bit n of PMC0 is its overflow bit, SDM Vol. 2 7.2.1), as a bit
    /// mask: a generation's counters ([`Generation::counters`]), the counters
    /// an event can count on, those that overflowed. The same role as
    /// NetBurst's and the architectural PMU's `CounterSet`; Itanium names its
    /// counters by number, so the members are `u8`s (4-7, Montecito 4-15).
    /// A set of PMC or PMD numbers is a [`RegSet`].
    pub(crate) struct CounterSet, CounterSetIter, "counter";
}

impl CounterSet {
    /// The counters of bit mask `bits` (a PMC0 image, say); bits that name
    /// no counter of any generation (those outside Montecito's 4-15: the
    /// freeze bit, bits 3:1, and 63:16) are dropped.
    pub const fn from_bits_truncate(bits: u64) -> CounterSet {
        CounterSet(bits & Generation::Montecito.counters().0)
    }
}

/// One generic counter of one generation: PMC n configures it, PMD n holds
/// its count, PMC0 bit n is its overflow bit. Only [`Counter::new`] makes
/// one, so the number is always a counter of the generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Counter {
    generation: Generation,
    index: u8,
}

impl Counter {
    /// The counter's name as the SDM's register tables give it: its data
    /// register, `"PMD4"` to `"PMD15"` (its configuration is the PMC of
    /// the same number).
    pub const fn name(self) -> &'static str {
        const NAMES: [&str; 12] = [
            "PMD4", "PMD5", "PMD6", "PMD7", "PMD8", "PMD9", "PMD10", "PMD11", "PMD12", "PMD13",
            "PMD14", "PMD15",
        ];
        NAMES[(self.index as usize).saturating_sub(4) % 12]
    }

    /// Counter `index` of `generation`, if it has one.
    pub const fn new(generation: Generation, index: u8) -> Option<Counter> {
        if generation.counters().contains(index) {
            Some(Counter { generation, index })
        } else {
            None
        }
    }

    /// The generation.
    pub const fn generation(self) -> Generation {
        self.generation
    }

    /// The register number (PMC n / PMD n).
    pub const fn index(self) -> u8 {
        self.index
    }

    /// The width of its threshold field: 2 on Itanium PMC6/7, else 3 (VTune's
    /// Itanium event help: "PMC\[4,5\] define 3 threshold bits 22:20, while
    /// PMC\[6,7\] define 2 threshold bits 21:20"; see
    /// [`crate::arch::itanium::CounterPmc`] for the disagreement with perfmon and
    /// libpfm).
    pub const fn threshold_bits(self) -> u8 {
        match (self.generation, self.index) {
            (Generation::Itanium, 6 | 7) => 2,
            _ => 3,
        }
    }
}

/// What a PMD holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PmdKind {
    /// A generic counter's count.
    Counter,
    /// I-EAR: the instruction cache line address and status (PMD0, PMD34).
    IearAddress,
    /// I-EAR: the latency (PMD1, PMD35).
    IearLatency,
    /// D-EAR: the data address (PMD2, PMD32).
    DearAddress,
    /// D-EAR: latency and status or TLB level (PMD3, PMD33).
    DearLatency,
    /// D-EAR: the instruction address (PMD17, PMD36).
    DearInstruction,
    /// A branch trace record (PMD8-15, Montecito PMD48-63).
    BtbRecord,
    /// The branch trace index (PMD16, Montecito PMD38).
    BtbIndex,
    /// Montecito PMD39: the per-record extension bits.
    BtbExtension,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::itanium::PmcKind;

    #[test]
    fn generation_facts() {
        for g in Generation::ALL {
            assert_eq!(Generation::from_cpuid_family(g.cpuid_family()), Some(g));
        }
        assert_eq!(Generation::from_cpuid_family(0x0F), None);
        assert_eq!(Generation::Itanium.counter_width(), 32);
        assert_eq!(Generation::Itanium.counter_mask(), 0xFFFF_FFFF);
        assert_eq!(Generation::Itanium2.counter_width(), 47);
        assert_eq!(Generation::Itanium2.counter_mask(), (1 << 47) - 1);
        assert_eq!(Generation::Montecito.counter_width(), 47);
        assert_eq!(Generation::Itanium.counters(), CounterSet(0xF0));
        assert_eq!(Generation::Itanium2.counters(), CounterSet(0xF0));
        assert_eq!(Generation::Montecito.counters(), CounterSet(0xFFF0));
        assert_eq!(Generation::Itanium.event_code_bits(), 7);
        assert_eq!(Generation::Itanium2.event_code_bits(), 8);
        assert_eq!(Generation::Itanium.implemented_pmcs().len(), 14);
        assert_eq!(Generation::Itanium2.implemented_pmcs().len(), 16);
        assert_eq!(Generation::Montecito.implemented_pmcs().len(), 27);
        assert_eq!(Generation::Itanium.implemented_pmds().len(), 18);
        assert_eq!(
            Generation::Montecito.implemented_pmds().len(),
            12 + 5 + 2 + 16
        );
        assert_eq!(
            (
                Generation::Itanium2.iear_pmc(),
                Generation::Itanium2.dear_pmc(),
                Generation::Itanium2.btb_pmc()
            ),
            (10, 11, 12)
        );
        assert_eq!(
            (
                Generation::Montecito.iear_pmc(),
                Generation::Montecito.dear_pmc(),
                Generation::Montecito.btb_pmc()
            ),
            (37, 40, 39)
        );
    }

    #[test]
    fn pmc_map_matches_implemented_set() {
        for g in Generation::ALL {
            for i in 0..=255u8 {
                assert_eq!(
                    g.pmc(i).is_some(),
                    g.implemented_pmcs().contains(i),
                    "{g:?} PMC{i}"
                );
                assert_eq!(
                    g.pmd(i).is_some(),
                    g.implemented_pmds().contains(i),
                    "{g:?} PMD{i}"
                );
                if let Some(p) = g.pmc(i) {
                    // Every PMD a PMC controls is implemented.
                    assert_eq!(p.pmds.intersection(g.implemented_pmds()), p.pmds);
                    assert_eq!(p.kind == PmcKind::Counter, g.counters().contains(i));
                    // The power-up value is a legal value.
                    assert_eq!(p.reserved_bits(p.default), 0);
                    assert_eq!(p.merge(p.default), p.default);
                }
            }
        }
    }

    #[test]
    fn perfmon_masks_and_defaults() {
        // Linux perfmon descriptor values (`perfmon_*.h`).
        let m = |g: Generation, i| g.pmc(i).unwrap();
        let ita2 = Generation::Itanium2;
        assert_eq!(m(ita2, 4).default, 0x80_0000);
        assert_eq!(m(ita2, 10).writable, 0xFFFF);
        assert_eq!(m(ita2, 11).writable, 0x30F_01CF);
        // Not perfmon's 0xFFFF: libpfm3's layout (bits 5:4 ignored).
        assert_eq!(m(ita2, 12).writable, 0xFFCF);
        assert_eq!(m(ita2, 13).default, 0x2078_FEFE_FEFE);
        assert_eq!(m(ita2, 13).writable, 0x1_E000_1818_1818);
        assert_eq!(m(ita2, 14).default, 0x0DB6_0DB6_0DB6_0DB6);
        assert_eq!(m(ita2, 14).writable, 0x2492);
        assert_eq!(m(ita2, 15).default, 0xFFFF_FFF0);
        assert_eq!(m(ita2, 8).writable, 0xFFFF_FFFF_3FFF_FFFB);
        let mont = Generation::Montecito;
        for i in 4..16 {
            assert_eq!(m(mont, i).default, 0x200_0000);
            assert_eq!(m(mont, i).writable, 0x7C7F_FF7F);
        }
        assert_eq!(m(mont, 37).writable, 0x3FFF);
        assert_eq!(m(mont, 40).writable, 0xF_01CF);
        assert_eq!(m(mont, 42).writable, 0x7_FF4F);
        assert_eq!(m(mont, 39).writable, 0xFFCF);
        assert_eq!(m(mont, 0).default, 0);
        assert_eq!(m(Generation::Itanium, 0).default, 1);
        assert_eq!(m(Generation::Itanium, 11).default, 0x1000_0000);
        assert_eq!(m(Generation::Itanium, 8).default, 0xF000_0000_3FFF_FFF8);
        // PMD dependencies (perfmon's `dep_pmd`).
        assert_eq!(m(Generation::Itanium, 10).pmds, RegSet(0b11));
        assert_eq!(m(Generation::Itanium, 11).pmds, RegSet(0b1100 | 1 << 17));
        assert_eq!(m(Generation::Itanium, 12).pmds, RegSet(0x1_FF00));
        assert_eq!(m(mont, 37).pmds, RegSet(3 << 34));
        assert_eq!(m(mont, 40).pmds, RegSet(3 << 32 | 1 << 36));
    }

    #[test]
    fn reg_set() {
        let s = RegSet::range(4, 7).with(12);
        assert_eq!(s.iter().collect::<Vec<_>>(), [4, 5, 6, 7, 12]);
        assert_eq!(s.first(), Some(4));
        assert_eq!(RegSet::range(9, 3), RegSet::EMPTY);
        assert_eq!(RegSet::range(60, 255).len(), 4);
        assert!(RegSet::single(64).is_empty());
        assert!(!s.contains(200));
    }

    #[test]
    fn counter_set_from_a_pmc0_image() {
        // fr, two reserved bits, counters 4 and 15, and bit 16.
        let s = CounterSet::from_bits_truncate(1 | 1 << 2 | 1 << 4 | 1 << 15 | 1 << 16);
        assert_eq!(s.iter().collect::<Vec<_>>(), [4, 15]);
        assert_eq!(s.bits(), 1 << 4 | 1 << 15);
        assert_eq!(s.without(15), CounterSet::single(4));
    }

    #[test]
    fn counters_and_threshold_widths() {
        assert_eq!(Counter::new(Generation::Itanium, 8), None);
        assert_eq!(Counter::new(Generation::Itanium, 3), None);
        assert!(Counter::new(Generation::Montecito, 15).is_some());
        assert_eq!(Counter::new(Generation::Montecito, 16), None);
        let bits = |g, n| Counter::new(g, n).unwrap().threshold_bits();
        assert_eq!(
            [4, 5, 6, 7].map(|n| bits(Generation::Itanium, n)),
            [3, 3, 2, 2]
        );
        assert_eq!(
            [4, 5, 6, 7].map(|n| bits(Generation::Itanium2, n)),
            [3, 3, 3, 3]
        );
        assert_eq!(bits(Generation::Montecito, 15), 3);
    }

    #[test]
    fn pm_positions() {
        let pm = |g: Generation, i| g.pmc(i).unwrap().pm_bit();
        assert_eq!(pm(Generation::Itanium, 10), Some(6));
        assert_eq!(pm(Generation::Itanium2, 10), Some(4));
        assert_eq!(pm(Generation::Montecito, 37), Some(4));
        assert_eq!(pm(Generation::Itanium2, 11), Some(6));
        assert_eq!(pm(Generation::Itanium2, 12), Some(6));
        assert_eq!(pm(Generation::Itanium2, 5), Some(6));
        assert_eq!(pm(Generation::Itanium2, 13), None);
        assert_eq!(pm(Generation::Itanium2, 0), None);
    }

    /// The PMD layouts agree with the register-level model's (transcribed
    /// from the same libpfm3 layouts separately): on every implemented PMD
    /// of every generation the model keeps the writable mask and refuses
    /// each bit outside it (a bit the hardware ignores); an unimplemented
    /// PMD has no mask and the model refuses it.
    #[test]
    fn pmd_layouts_agree_with_the_model() {
        use crate::model::itanium::{Generation as ModelGeneration, ItaniumModel};
        let mut masks = 0;
        for (g, mg) in [
            (Generation::Itanium, ModelGeneration::Itanium),
            (Generation::Itanium2, ModelGeneration::Itanium2),
            (Generation::Montecito, ModelGeneration::Montecito),
        ] {
            for pmd in 0..=255u8 {
                let mut m = ItaniumModel::new(mg);
                match g.pmd_writable(pmd) {
                    Some(w) => {
                        masks += 1;
                        assert!(m.write_pmd(u32::from(pmd), w).is_ok(), "{g:?} PMD{pmd}");
                        for bit in (0..64).filter(|b| w & 1 << b == 0) {
                            assert!(
                                m.write_pmd(u32::from(pmd), 1 << bit).is_err(),
                                "{g:?} PMD{pmd} bit {bit}"
                            );
                        }
                    }
                    None => assert!(m.write_pmd(u32::from(pmd), 0).is_err(), "{g:?} PMD{pmd}"),
                }
            }
        }
        assert_eq!(masks, 18 + 18 + 35);
    }
}

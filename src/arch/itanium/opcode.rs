//! Opcode matchers and the address-range restriction configuration:
//! Itanium and Itanium 2 PMC8/9, Itanium PMC13, Itanium 2 PMC13/14/15, and
//! Montecito's PMC32-36, PMC38 and PMC41 (libpfm3's layouts; Linux
//! perfmon's defaults and its `pfm_mck_pmc_check` / `pfm_mont_pmc_check`).
//!
//! An opcode matcher tags the instructions whose encoding matches: events
//! with the `O` qualifier ([`crate::arch::itanium::events::Qualifiers`])
//! then count only tagged instructions. Range restriction tags instructions
//! (IBR pairs) or data references (DBR pairs) by address.
//!
//! | register | layout |
//! |---|---|
//! | Itanium PMC8/9 | mask 29:3 (27 bits), match 59:33 (27 bits), unit bits b 60, f 61, i 62, m 63; power-up F000_0000_3FFF_FFF8h (match anything in any unit) |
//! | Itanium 2 PMC8/9 | as Itanium, plus `ig_ad` 0 (ignore the address range), `inv` 1 (invert the range), bit 2 fixed at 1 |
//! | Itanium PMC13 | `ta` 0: tag all; 0 makes the IBR range restriction effective |
//! | Itanium 2 PMC13, Montecito PMC41 | `cfg_dbrp0..3` at 4:3, 12:11, 20:19, 28:27; `ena_dbrp0..3` 48:45 |
//! | Itanium 2 PMC14, Montecito PMC38 | `ibrp0..3` at 1, 4, 7, 10 (1: the pair is ignored); `fine` 13 |
//! | Itanium 2 PMC15, Montecito PMC36 | four bits 3:0 (Itanium 2: `ibrp0_pmc8`, `ibrp1_pmc9`, `ibrp2_pmc8`, `ibrp3_pmc9`; Montecito: `ch0..3_ig_opcm`) |
//! | Montecito PMC32/34 | mask 40:0, b 48, f 49, i 50, m 51; PMC32 also `inv` 56, `ig_ad` 57 |
//! | Montecito PMC33/35 | match 40:0 |
//!
//! The 27-bit matcher fields cover instruction bits 40:27 and 12:0 (libpfm3).
//!
//! # Source notes
//!
//! | topic | sources | resolution |
//! |---|---|---|
//! | when PMC14 makes IBR range restriction active | perfmon's McKinley check tests `value & 0x2222` (bits 1, 5, 9, 13); the field positions (libpfm3 and perfmon's own writable mask 0x2492) are 1, 4, 7, 10; perfmon's Montecito check tests 0x492 | the field positions: active when any of bits 1, 4, 7, 10 is clear ([`InstructionRangeConfig::is_active`]) |
//! | meaning of a PMC14 bit | libpfm3's Itanium 2 header: "constrained by ibrN"; libpfm3's Montecito names: `ig_ibrpN` (ignore); power-up value: all set | set = the pair is ignored, clear = it constrains (the power-up value must be unconstrained) |
//! | Itanium 2 PMC8/9 bit 32 | libpfm3: ignored; perfmon's mask: writable | perfmon's mask (writable, ignored by the hardware) |
//! | Itanium PMC13 bits 49:32 | set in perfmon's power-up value, undescribed | kept at the power-up value |
//!
//! # Examples
//!
//! ```
//! use pmu::arch::itanium::opcode::OpcodeMatcher;
//! use pmu::arch::itanium::Generation;
//!
//! // The match-everything opcode matcher of Itanium 2 PMC8.
//! let m = OpcodeMatcher::match_all(Generation::Itanium2, 8).unwrap();
//! assert_eq!(m.pmc(), 8);
//! assert!(OpcodeMatcher::match_all(Generation::Itanium2, 7).is_none(), "not a matcher");
//! ```

use super::fields::{ReservedBits, pmc_register};
use super::generation::Generation;
use crate::register::{Field, register};

/// The instruction units an opcode matcher considers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Units {
    /// Memory (M) slots.
    pub m: bool,
    /// Integer (I) slots.
    pub i: bool,
    /// Floating-point (F) slots.
    pub f: bool,
    /// Branch (B) slots.
    pub b: bool,
}

impl Units {
    /// All four.
    pub const ALL: Units = Units {
        m: true,
        i: true,
        f: true,
        b: true,
    };

    /// From four bits b, f, i, m (low to high; higher bits ignored).
    pub const fn from_bits(v: u64) -> Units {
        let u = UnitBits::from_bits(v as u8);
        Units {
            b: u.b(),
            f: u.f(),
            i: u.i(),
            m: u.m(),
        }
    }

    /// As four bits b, f, i, m (low to high).
    pub const fn bits(self) -> u8 {
        UnitBits::from_bits(0)
            .with_b(self.b)
            .with_f(self.f)
            .with_i(self.i)
            .with_m(self.m)
            .bits()
    }

    /// The units field of a matcher image (`register!`).
    const fn from_field(v: u64) -> Units {
        Units::from_bits(v)
    }

    /// The field value (`register!`).
    const fn into_field(self) -> u64 {
        self.bits() as u64
    }
}

register! {
    /// The units field's bits, from the low bit (libpfm3's matcher
    /// layouts: PMC8/9 63:60, Montecito PMC32/34 51:48).
    #[derive(Clone, Copy)]
    struct UnitBits(u8): from_bits {
        /// Branch slots.
        B: 0 => b, with_b: bool;
        /// Floating-point slots.
        F: 1 => f, with_f: bool;
        /// Integer slots.
        I: 2 => i, with_i: bool;
        /// Memory slots.
        M: 3 => m, with_m: bool;
    }
}

/// An Itanium or Itanium 2 opcode matcher (PMC8 or PMC9). The struct is
/// written by hand, its fields declared with `register!`: it holds the
/// register number beside the image, its constructors answer `None` for a
/// register that is not a matcher, and the setters of the 27-bit fields
/// refuse wider values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct OpcodeMatcher {
    generation: Generation,
    pmc: u8,
    bits: u64,
}

register! {
    impl OpcodeMatcher(u64) {
        /// Itanium 2 `ig_ad` (bit 0).
        pub(crate) IG_AD: 0;
        /// Itanium 2 `inv` (bit 1).
        pub(crate) INV: 1;
        /// The 27-bit mask (1: ignore that encoding bit).
        pub(crate) MASK: 3..=29 => mask: u32;
        /// The 27-bit match value.
        pub(crate) MATCH: 33..=59 => match_value: u32;
        /// The units considered.
        pub(crate) UNITS: 60..=63 => units, with_units: Units;
    }
}

impl OpcodeMatcher {
    /// The power-up value of PMC8 or PMC9 (`pmc`) of `generation`: matches
    /// everything. `None` for other registers and for Montecito (see
    /// [`MontecitoOpcodeMatcher`]).
    pub const fn match_all(generation: Generation, pmc: u8) -> Option<OpcodeMatcher> {
        match (generation, pmc) {
            (Generation::Itanium | Generation::Itanium2, 8 | 9) => Some(OpcodeMatcher {
                generation,
                pmc,
                bits: generation.pmc_or_empty(pmc).default,
            }),
            _ => None,
        }
    }

    /// Decode a raw value, refusing non-writable bits that differ from the
    /// power-up value (Itanium 2 bit 2 must be 1).
    pub const fn from_bits(
        generation: Generation,
        pmc: u8,
        raw: u64,
    ) -> Result<Option<OpcodeMatcher>, ReservedBits> {
        match Self::match_all(generation, pmc) {
            None => Ok(None),
            Some(m) => {
                let r = generation.pmc_or_empty(pmc).reserved_bits(raw);
                if r != 0 {
                    Err(ReservedBits(r))
                } else {
                    Ok(Some(m.with_bits(raw)))
                }
            }
        }
    }

    /// The register image.
    pub const fn bits(self) -> u64 {
        self.bits
    }

    /// The register number.
    pub const fn pmc(self) -> u8 {
        self.pmc
    }

    const fn with_bits(self, bits: u64) -> OpcodeMatcher {
        OpcodeMatcher { bits, ..self }
    }

    /// With the mask replaced; `None` if it does not fit 27 bits.
    pub const fn with_mask(self, mask: u32) -> Option<OpcodeMatcher> {
        if Self::MASK.fits(mask as u64) {
            Some(self.with_bits(Self::MASK.set(self.bits, mask as u64)))
        } else {
            None
        }
    }

    /// With the match value replaced; `None` if it does not fit 27 bits.
    pub const fn with_match_value(self, v: u32) -> Option<OpcodeMatcher> {
        if Self::MATCH.fits(v as u64) {
            Some(self.with_bits(Self::MATCH.set(self.bits, v as u64)))
        } else {
            None
        }
    }

    /// Itanium 2 `ig_ad` (bit 0): ignore the instruction address range.
    /// `None` on Itanium.
    pub const fn ignore_address_range(self) -> Option<bool> {
        match self.generation {
            Generation::Itanium2 => Some(Self::IG_AD.flag(self.bits)),
            _ => None,
        }
    }

    /// With `ig_ad` set or cleared; `None` on Itanium.
    pub const fn with_ignore_address_range(self, on: bool) -> Option<OpcodeMatcher> {
        match self.generation {
            Generation::Itanium2 => Some(self.with_bits(Self::IG_AD.set_flag(self.bits, on))),
            _ => None,
        }
    }

    /// Itanium 2 `inv` (bit 1): invert the range check. `None` on Itanium.
    pub const fn invert_range(self) -> Option<bool> {
        match self.generation {
            Generation::Itanium2 => Some(Self::INV.flag(self.bits)),
            _ => None,
        }
    }

    /// With `inv` set or cleared; `None` on Itanium.
    pub const fn with_invert_range(self, on: bool) -> Option<OpcodeMatcher> {
        match self.generation {
            Generation::Itanium2 => Some(self.with_bits(Self::INV.set_flag(self.bits, on))),
            _ => None,
        }
    }
}

register! {
    /// A Montecito opcode matcher's mask register (PMC32 or PMC34; the
    /// layout in this module's table).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub(super) struct MontecitoMask(u64) {
        /// The 41-bit mask.
        pub(crate) MASK: 0..=40 => mask: u64;
        /// The units considered.
        pub(crate) UNITS: 48..=51 => units, with_units: Units;
        /// PMC32 `inv`.
        pub(crate) INV: 56 => invert_range, with_invert_range: bool;
        /// PMC32 `ig_ad`.
        pub(crate) IG_AD: 57 => ignore_address_range, with_ignore_address_range: bool;
    }
}

register! {
    /// A Montecito opcode matcher's match register (PMC33 or PMC35; the
    /// layout in this module's table).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub(super) struct MontecitoMatch(u64) {
        /// The 41-bit match value.
        pub(crate) MATCH: 0..=40 => match_value: u64;
    }
}

/// A Montecito opcode matcher: the mask half (PMC32 or PMC34) and the match
/// half (PMC33 or PMC35), two images declared with `register!`; this pair
/// is written by hand because one matcher spans both registers and only
/// matcher 0 has `inv` and `ig_ad`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MontecitoOpcodeMatcher {
    first: bool,
    mask_reg: MontecitoMask,
    match_reg: MontecitoMatch,
}

impl MontecitoOpcodeMatcher {
    /// Matcher 0 (PMC32/33) or 1 (PMC34/35) at its power-up value (matches
    /// everything); `None` for other numbers.
    pub const fn match_all(matcher: u8) -> Option<MontecitoOpcodeMatcher> {
        let first = match matcher {
            0 => true,
            1 => false,
            _ => return None,
        };
        let mask_pmc = if first { 32 } else { 34 };
        Some(MontecitoOpcodeMatcher {
            first,
            mask_reg: MontecitoMask(Generation::Montecito.pmc_or_empty(mask_pmc).default),
            match_reg: MontecitoMatch(Generation::Montecito.pmc_or_empty(mask_pmc + 1).default),
        })
    }

    /// The mask register's number (32 or 34).
    pub const fn mask_pmc(self) -> u8 {
        if self.first { 32 } else { 34 }
    }

    /// The match register's number (33 or 35).
    pub const fn match_pmc(self) -> u8 {
        self.mask_pmc() + 1
    }

    /// The mask register image.
    pub const fn mask_bits(self) -> u64 {
        self.mask_reg.bits()
    }

    /// The match register image.
    pub const fn match_bits(self) -> u64 {
        self.match_reg.bits()
    }

    /// The 41-bit mask.
    pub const fn mask(self) -> u64 {
        self.mask_reg.mask()
    }

    /// With the mask replaced; `None` if it does not fit 41 bits.
    pub const fn with_mask(self, v: u64) -> Option<MontecitoOpcodeMatcher> {
        if MontecitoMask::MASK.fits(v) {
            Some(MontecitoOpcodeMatcher {
                mask_reg: MontecitoMask(MontecitoMask::MASK.set(self.mask_reg.0, v)),
                ..self
            })
        } else {
            None
        }
    }

    /// The 41-bit match value.
    pub const fn match_value(self) -> u64 {
        self.match_reg.match_value()
    }

    /// With the match value replaced; `None` if it does not fit 41 bits.
    pub const fn with_match_value(self, v: u64) -> Option<MontecitoOpcodeMatcher> {
        if MontecitoMatch::MATCH.fits(v) {
            Some(MontecitoOpcodeMatcher {
                match_reg: MontecitoMatch(MontecitoMatch::MATCH.set(self.match_reg.0, v)),
                ..self
            })
        } else {
            None
        }
    }

    /// The units considered.
    pub const fn units(self) -> Units {
        self.mask_reg.units()
    }

    /// With the units replaced.
    pub const fn with_units(self, u: Units) -> MontecitoOpcodeMatcher {
        MontecitoOpcodeMatcher {
            mask_reg: self.mask_reg.with_units(u),
            ..self
        }
    }

    /// PMC32 `ig_ad` (bit 57); `None` for matcher 1.
    pub const fn ignore_address_range(self) -> Option<bool> {
        if self.first {
            Some(self.mask_reg.ignore_address_range())
        } else {
            None
        }
    }

    /// PMC32 `inv` (bit 56); `None` for matcher 1.
    pub const fn invert_range(self) -> Option<bool> {
        if self.first {
            Some(self.mask_reg.invert_range())
        } else {
            None
        }
    }

    /// With PMC32's `ig_ad` and `inv` replaced; `None` for matcher 1.
    pub const fn with_range_bits(
        self,
        ignore: bool,
        invert: bool,
    ) -> Option<MontecitoOpcodeMatcher> {
        if self.first {
            Some(MontecitoOpcodeMatcher {
                mask_reg: self
                    .mask_reg
                    .with_ignore_address_range(ignore)
                    .with_invert_range(invert),
                ..self
            })
        } else {
            None
        }
    }
}

pmc_register! {
    /// Itanium PMC13: the `ta` (tag all) bit (libpfm3's layout; perfmon's
    /// power-up value also sets bits 49:32, which this crate keeps as
    /// reserved).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct RangeTag(u64): pmc(Generation::Itanium.pmc_or_empty(13)) {
        /// `ta`: tag every instruction (no IBR range restriction).
        pub(crate) TA: 0 => tag_all, with_tag_all: bool;
    }
}

impl RangeTag {
    /// The power-up value: `ta` set, nothing restricted.
    pub const POWER_UP: RangeTag = RangeTag(0x0003_FFFF_0000_0001);

    /// Whether the IBR range restriction is active (`ta` clear).
    pub const fn is_active(self) -> bool {
        !self.tag_all()
    }
}

pmc_register! {
    /// The data address range configuration (Itanium 2 PMC13, Montecito
    /// PMC41; libpfm3 `pmc13_ita2_reg`, `pmc41_mont_reg`: `cfg_dbrpN` and
    /// `ena_dbrpN`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct DataRangeConfig(u64): pmc(Generation::Itanium2.pmc_or_empty(13)) {
        /// `cfg_dbrp0`.
        pub(crate) CFG0: 3..=4;
        /// `cfg_dbrp1`.
        pub(crate) CFG1: 11..=12;
        /// `cfg_dbrp2`.
        pub(crate) CFG2: 19..=20;
        /// `cfg_dbrp3`.
        pub(crate) CFG3: 27..=28;
        /// `ena_dbrp0-3`.
        pub(crate) ENA: 45..=48;
        /// `ena_dbrp0`.
        ENA0: 45;
        /// `ena_dbrp1`.
        ENA1: 46;
        /// `ena_dbrp2`.
        ENA2: 47;
        /// `ena_dbrp3`.
        ENA3: 48;
    }
}

impl DataRangeConfig {
    /// The power-up value (both generations): pair 0 enabled, every `cfg`
    /// field 11b, so not active.
    pub const POWER_UP: DataRangeConfig = DataRangeConfig(0x0000_2078_FEFE_FEFE);

    /// Decode any raw value, replacing non-writable bits by their power-up
    /// values.
    pub const fn from_bits_truncate(raw: u64) -> DataRangeConfig {
        DataRangeConfig(Generation::Itanium2.pmc_or_empty(13).merge(raw))
    }

    const fn cfg_field(pair: u8) -> Field {
        match pair & 3 {
            0 => Self::CFG0,
            1 => Self::CFG1,
            2 => Self::CFG2,
            _ => Self::CFG3,
        }
    }

    const fn ena_field(pair: u8) -> Field {
        match pair & 3 {
            0 => Self::ENA0,
            1 => Self::ENA1,
            2 => Self::ENA2,
            _ => Self::ENA3,
        }
    }

    /// `cfg_dbrpN` of pair `pair` (0-3; higher numbers wrap).
    pub const fn cfg(self, pair: u8) -> u8 {
        Self::cfg_field(pair).get(self.0) as u8
    }

    /// With `cfg_dbrpN` replaced (the value's low 2 bits).
    pub const fn with_cfg(self, pair: u8, v: u8) -> DataRangeConfig {
        DataRangeConfig(Self::cfg_field(pair).set(self.0, v as u64))
    }

    /// `ena_dbrpN` of pair `pair` (0-3; higher numbers wrap).
    pub const fn enabled(self, pair: u8) -> bool {
        Self::ena_field(pair).flag(self.0)
    }

    /// With `ena_dbrpN` set or cleared.
    pub const fn with_enabled(self, pair: u8, on: bool) -> DataRangeConfig {
        DataRangeConfig(Self::ena_field(pair).set_flag(self.0, on))
    }

    /// Whether any DBR pair is enabled (bits 48:45).
    pub const fn any_enabled(self) -> bool {
        Self::ENA.get(self.0) != 0
    }

    /// Whether the DBR range restriction is active, perfmon's test: a pair
    /// enabled and not every `cfg` field 11b.
    pub const fn is_active(self) -> bool {
        let cfg = Self::CFG0.mask() | Self::CFG1.mask() | Self::CFG2.mask() | Self::CFG3.mask();
        self.any_enabled() && self.0 & cfg != cfg
    }
}

/// The instruction address range configuration (Itanium 2 PMC14, Montecito
/// PMC38). The struct is written by hand, its fields declared with
/// `register!`: its constructors answer `None` on Itanium, which has no such
/// register.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct InstructionRangeConfig {
    generation: Generation,
    bits: u64,
}

register! {
    impl InstructionRangeConfig(u64) {
        /// `ig_ibrp0`: IBR pair 0 ignored.
        pub(crate) IG_IBRP0: 1;
        /// `ig_ibrp1`.
        pub(crate) IG_IBRP1: 4;
        /// `ig_ibrp2`.
        pub(crate) IG_IBRP2: 7;
        /// `ig_ibrp3`.
        pub(crate) IG_IBRP3: 10;
        /// `fine` (bit 13): fine-grained ranges (both ends within one 4 KB
        /// page; libpfm3 notes an Itanium 2 erratum: two-bundle
        /// granularity).
        pub(crate) FINE: 13 => fine, with_fine: bool;
    }
}

impl InstructionRangeConfig {
    /// The register number (14, or 38 on Montecito); `None` on Itanium.
    pub const fn pmc(generation: Generation) -> Option<u8> {
        match generation {
            Generation::Itanium => None,
            Generation::Itanium2 => Some(14),
            Generation::Montecito => Some(38),
        }
    }

    /// The power-up value: every pair ignored. `None` on Itanium.
    pub const fn power_up(generation: Generation) -> Option<InstructionRangeConfig> {
        match Self::pmc(generation) {
            Some(p) => Some(InstructionRangeConfig {
                generation,
                bits: generation.pmc_or_empty(p).default,
            }),
            None => None,
        }
    }

    /// Decode a raw value, refusing non-writable bits that differ from the
    /// power-up value. `Ok(None)` on Itanium.
    pub const fn from_bits(
        generation: Generation,
        raw: u64,
    ) -> Result<Option<InstructionRangeConfig>, ReservedBits> {
        match Self::pmc(generation) {
            None => Ok(None),
            Some(p) => {
                let r = generation.pmc_or_empty(p).reserved_bits(raw);
                if r != 0 {
                    Err(ReservedBits(r))
                } else {
                    Ok(Some(InstructionRangeConfig {
                        generation,
                        bits: raw,
                    }))
                }
            }
        }
    }

    /// Decode any raw value, replacing non-writable bits by their power-up
    /// values. `None` on Itanium.
    pub const fn from_bits_truncate(
        generation: Generation,
        raw: u64,
    ) -> Option<InstructionRangeConfig> {
        match Self::pmc(generation) {
            Some(p) => Some(InstructionRangeConfig {
                generation,
                bits: generation.pmc_or_empty(p).merge(raw),
            }),
            None => None,
        }
    }

    /// The register image.
    pub const fn bits(self) -> u64 {
        self.bits
    }

    const fn with_bits(self, bits: u64) -> InstructionRangeConfig {
        InstructionRangeConfig { bits, ..self }
    }

    const fn pair_field(pair: u8) -> Field {
        match pair & 3 {
            0 => Self::IG_IBRP0,
            1 => Self::IG_IBRP1,
            2 => Self::IG_IBRP2,
            _ => Self::IG_IBRP3,
        }
    }

    /// Whether IBR pair `pair` (0-3; higher numbers wrap) is ignored.
    pub const fn ignored(self, pair: u8) -> bool {
        Self::pair_field(pair).flag(self.bits)
    }

    /// With pair `pair` ignored or constraining.
    pub const fn with_ignored(self, pair: u8, on: bool) -> InstructionRangeConfig {
        self.with_bits(Self::pair_field(pair).set_flag(self.bits, on))
    }

    /// Whether the IBR range restriction is active: some pair not ignored.
    pub const fn is_active(self) -> bool {
        let pairs = Self::IG_IBRP0.mask()
            | Self::IG_IBRP1.mask()
            | Self::IG_IBRP2.mask()
            | Self::IG_IBRP3.mask();
        self.bits & pairs != pairs
    }
}

pmc_register! {
    /// The opcode matcher configuration (Itanium 2 PMC15, Montecito PMC36):
    /// four bits whose meaning libpfm3 gives only as names.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct OpcodeMatcherConfig(u64): pmc(Generation::Itanium2.pmc_or_empty(15)) {
        /// Itanium 2 `ibrp0_pmc8`, Montecito `ch0_ig_opcm`.
        BIT0: 0;
        /// Itanium 2 `ibrp1_pmc9`, Montecito `ch1_ig_opcm`.
        BIT1: 1;
        /// Itanium 2 `ibrp2_pmc8`, Montecito `ch2_ig_opcm`.
        BIT2: 2;
        /// Itanium 2 `ibrp3_pmc9`, Montecito `ch3_ig_opcm`.
        BIT3: 3;
    }
}

impl OpcodeMatcherConfig {
    /// The power-up value (FFFF_FFF0h: the four bits clear).
    pub const POWER_UP: OpcodeMatcherConfig = OpcodeMatcherConfig(0xFFFF_FFF0);

    /// Bit `n` (0-3; higher numbers wrap): Itanium 2 `ibrp0_pmc8`,
    /// `ibrp1_pmc9`, `ibrp2_pmc8`, `ibrp3_pmc9`; Montecito `chN_ig_opcm`.
    pub const fn bit(self, n: u8) -> bool {
        Self::bit_field(n).flag(self.0)
    }

    /// With bit `n` set or cleared.
    pub const fn with_bit(self, n: u8, on: bool) -> OpcodeMatcherConfig {
        OpcodeMatcherConfig(Self::bit_field(n).set_flag(self.0, on))
    }

    const fn bit_field(n: u8) -> Field {
        match n & 3 {
            0 => Self::BIT0,
            1 => Self::BIT1,
            2 => Self::BIT2,
            _ => Self::BIT3,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn itanium_opcode_matcher_fields() {
        let m = OpcodeMatcher::match_all(Generation::Itanium, 8).unwrap();
        assert_eq!(m.bits(), 0xF000_0000_3FFF_FFF8);
        assert_eq!(m.mask(), (1 << 27) - 1);
        assert_eq!(m.match_value(), 0);
        assert_eq!(m.units(), Units::ALL);
        assert_eq!(m.ignore_address_range(), None);
        assert_eq!(m.with_invert_range(true), None);
        let z = OpcodeMatcher::from_bits(Generation::Itanium, 9, 0)
            .unwrap()
            .unwrap();
        assert_eq!(z.with_mask(1).unwrap().bits(), 1 << 3);
        assert_eq!(z.with_mask(1 << 26).unwrap().bits(), 1 << 29);
        assert_eq!(z.with_mask(1 << 27), None);
        assert_eq!(z.with_match_value(1).unwrap().bits(), 1 << 33);
        assert_eq!(z.with_match_value(1 << 26).unwrap().bits(), 1 << 59);
        assert_eq!(z.with_match_value(1 << 27), None);
        let only = |u: Units| z.with_units(u).bits();
        assert_eq!(
            only(Units {
                b: true,
                ..Units::default()
            }),
            1 << 60
        );
        assert_eq!(
            only(Units {
                f: true,
                ..Units::default()
            }),
            1 << 61
        );
        assert_eq!(
            only(Units {
                i: true,
                ..Units::default()
            }),
            1 << 62
        );
        assert_eq!(
            only(Units {
                m: true,
                ..Units::default()
            }),
            1 << 63
        );
        for b in [0, 1, 2, 30, 31, 32] {
            assert_eq!(
                OpcodeMatcher::from_bits(Generation::Itanium, 8, 1 << b),
                Err(ReservedBits(1 << b))
            );
        }
        assert_eq!(OpcodeMatcher::match_all(Generation::Itanium, 10), None);
        assert_eq!(OpcodeMatcher::match_all(Generation::Montecito, 8), None);
        assert_eq!(
            OpcodeMatcher::from_bits(Generation::Itanium, 7, 0),
            Ok(None)
        );
    }

    #[test]
    fn itanium2_opcode_matcher_fields() {
        let g = Generation::Itanium2;
        let m8 = OpcodeMatcher::match_all(g, 8).unwrap();
        assert_eq!(m8.bits(), 0xFFFF_FFFF_3FFF_FFFF);
        assert_eq!(m8.ignore_address_range(), Some(true));
        assert_eq!(m8.invert_range(), Some(true));
        let m9 = OpcodeMatcher::match_all(g, 9).unwrap();
        assert_eq!(m9.bits(), 0xFFFF_FFFF_3FFF_FFFC);
        assert_eq!(m9.ignore_address_range(), Some(false));
        assert_eq!(
            m9.with_ignore_address_range(true).unwrap().bits(),
            0xFFFF_FFFF_3FFF_FFFD
        );
        assert_eq!(
            m9.with_invert_range(true).unwrap().bits(),
            0xFFFF_FFFF_3FFF_FFFE
        );
        // Bit 2 must stay 1; bits 31:30 stay 0.
        assert_eq!(
            OpcodeMatcher::from_bits(g, 8, 0xFFFF_FFFF_3FFF_FFFB),
            Err(ReservedBits(1 << 2))
        );
        assert_eq!(
            OpcodeMatcher::from_bits(g, 9, 0xFFFF_FFFF_7FFF_FFFC),
            Err(ReservedBits(1 << 30))
        );
        assert!(OpcodeMatcher::from_bits(g, 9, 0x4).unwrap().is_some());
        assert_eq!(m9.with_mask(0).unwrap().mask(), 0);
    }

    #[test]
    fn montecito_opcode_matchers() {
        let m0 = MontecitoOpcodeMatcher::match_all(0).unwrap();
        assert_eq!((m0.mask_pmc(), m0.match_pmc()), (32, 33));
        assert_eq!(m0.mask_bits(), 0x030F_01FF_FFFF_FFFF);
        assert_eq!(m0.mask(), (1 << 41) - 1);
        assert_eq!(m0.units(), Units::ALL);
        assert_eq!(m0.ignore_address_range(), Some(true));
        assert_eq!(m0.invert_range(), Some(true));
        let m1 = MontecitoOpcodeMatcher::match_all(1).unwrap();
        assert_eq!((m1.mask_pmc(), m1.match_pmc()), (34, 35));
        assert_eq!(m1.mask_bits(), 0x000F_01FF_FFFF_FFFF);
        assert_eq!(m1.ignore_address_range(), None);
        assert_eq!(m1.with_range_bits(true, true), None);
        assert_eq!(MontecitoOpcodeMatcher::match_all(2), None);
        let c = m0
            .with_mask(0x155)
            .unwrap()
            .with_match_value(0x1_0000_0000)
            .unwrap()
            .with_units(Units {
                m: true,
                ..Units::default()
            })
            .with_range_bits(false, true)
            .unwrap();
        assert_eq!(c.mask_bits(), 0x155 | 1 << 51 | 1 << 56);
        assert_eq!(c.match_bits(), 0x1_0000_0000);
        assert_eq!(c.with_mask(1 << 41), None);
        assert_eq!(c.with_match_value(1 << 41), None);
        for (pmc, v) in [(32, c.mask_bits()), (33, c.match_bits())] {
            let i = Generation::Montecito.pmc(pmc).unwrap();
            assert_eq!(i.reserved_bits(v), 0);
        }
    }

    #[test]
    fn range_configs() {
        let t = RangeTag::POWER_UP;
        assert!(t.tag_all() && !t.is_active());
        let t = t.with_tag_all(false);
        assert!(t.is_active());
        assert_eq!(RangeTag::from_bits(t.bits()), Ok(t));
        assert_eq!(
            RangeTag::from_bits(0),
            Err(ReservedBits(0x0003_FFFF_0000_0000))
        );

        // The power-up value enables DBR pair 0 with every cfg field 11b:
        // not active.
        let d = DataRangeConfig::POWER_UP;
        assert!(d.enabled(0) && !d.enabled(1) && !d.is_active());
        assert_eq!((0..4).map(|p| d.cfg(p)).collect::<Vec<_>>(), [3, 3, 3, 3]);
        let none = d.with_enabled(0, false);
        assert!(!none.any_enabled() && !none.is_active());
        let on = none.with_enabled(2, true);
        assert_eq!(on.bits() ^ none.bits(), 1 << 47);
        assert!(on.enabled(2) && on.any_enabled());
        // Enabled but every cfg field 11b: not active (perfmon's test).
        assert!(!on.is_active());
        let active = on.with_cfg(1, 0);
        assert_eq!(active.bits() ^ on.bits(), 3 << 11);
        assert!(active.is_active());
        assert_eq!(d.with_cfg(3, 1).bits() ^ d.bits(), 2 << 27);
        assert_eq!(DataRangeConfig::from_bits(active.bits()), Ok(active));
        assert_eq!(
            DataRangeConfig::from_bits(d.bits() ^ 1 << 2),
            Err(ReservedBits(1 << 2))
        );

        assert_eq!(InstructionRangeConfig::power_up(Generation::Itanium), None);
        for g in [Generation::Itanium2, Generation::Montecito] {
            let i = InstructionRangeConfig::power_up(g).unwrap();
            assert!((0..4).all(|p| i.ignored(p)));
            assert!(!i.is_active() && !i.fine());
            for (p, bit) in [(0, 1), (1, 4), (2, 7), (3, 10)] {
                let c = i.with_ignored(p, false);
                assert_eq!(c.bits() ^ i.bits(), 1 << bit);
                assert!(c.is_active());
            }
            assert_eq!(i.with_fine(true).bits() ^ i.bits(), 1 << 13);
            // Bit 5 (perfmon's McKinley 0x2222 test) is not a field.
            assert_eq!(
                InstructionRangeConfig::from_bits(g, i.bits() ^ 1 << 5),
                Err(ReservedBits(1 << 5))
            );
        }
        assert_eq!(InstructionRangeConfig::pmc(Generation::Montecito), Some(38));
        // The declared fields are perfmon's writable mask.
        assert_eq!(InstructionRangeConfig::DEFINED, 0x2492);

        let o = OpcodeMatcherConfig::POWER_UP;
        assert!((0..4).all(|n| !o.bit(n)));
        assert_eq!(o.with_bit(3, true).bits(), 0xFFFF_FFF8);
        assert_eq!(
            OpcodeMatcherConfig::from_bits(0xF),
            Err(ReservedBits(0xFFFF_FFF0))
        );
    }
}

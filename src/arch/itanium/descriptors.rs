//! The PMC descriptor tables: one per generation, one row per implemented
//! PMC, in the spirit of Linux perfmon's register descriptor tables
//! (`perfmon_itanium.h`, `perfmon_mckinley.h`, `perfmon_montecito.h`: a
//! row per PMC with its type, default value, reserved mask and checker).
//!
//! A row ([`PmcInfo`]) holds the register's number, role, power-up value,
//! writable bits, the PMDs it controls, the position of its `pm` bit and
//! the checker the validator ([`super::validate`]) applies to it. The
//! writable bits are derived from the fields the register images declare
//! (`pmc_register!` and `register!` in [`BtbConfig`], [`DearConfig`],
//! [`IearConfig`], [`IpEarConfig`], [`RangeTag`], [`DataRangeConfig`],
//! [`OpcodeMatcherConfig`], [`OpcodeMatcher`], [`InstructionRangeConfig`];
//! [`CounterLayout`] for the counters), except where perfmon's mask is the
//! only source (the opcode matchers after Itanium); the choices between
//! sources are documented on [`Generation`].
//!
//! The row type ([`PmcInfo`], [`PmcKind`], the checker) and the lookups
//! into the tables live here too: [`Generation::pmc`] (a PMC's row),
//! [`Counter::info`] and the configuration registers' `info`
//! ([`BtbConfig::info`], [`DearConfig::info`], [`IearConfig::info`]),
//! inherent methods of those types written beside the tables they read.
//! The register images check their reserved bits against their rows
//! through them (`pmc_register!`'s `from_bits`), while the
//! rows' writable bits come from the images' fields: in the imports, the
//! tables sit above the layouts they are built from, and [`Generation`]
//! below both.

use super::btb::BtbConfig;
use super::ear::{DearConfig, IearConfig, IpEarConfig};
use super::generation::{Counter, CounterSet, Generation, RegSet};
use super::opcode::{
    DataRangeConfig, InstructionRangeConfig, MontecitoMask, OpcodeMatcher, OpcodeMatcherConfig,
    RangeTag,
};
use super::pmc::{CounterLayout, ITANIUM_COUNTER, ITANIUM2_COUNTER, MONTECITO_COUNTER};
use crate::register::Field;

/// What a PMC does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PmcKind {
    /// PMC0-3: the freeze bit and the overflow bits (SDM vol 2 §7.2; Linux
    /// `perfmon.c`). Control registers: perfmon refuses writes to them.
    Overflow,
    /// The configuration of the generic counter with the same number.
    Counter,
    /// An opcode matcher: PMC8/9 on Itanium and Itanium 2; the mask half
    /// PMC32/34 on Montecito (libpfm3's opcode matcher layouts).
    OpcodeMatcher,
    /// Montecito PMC33/35: the match half of an opcode matcher.
    OpcodeMatchValue,
    /// Opcode matcher configuration: Itanium 2 PMC15, Montecito PMC36.
    OpcodeMatcherConfig,
    /// Instruction EAR configuration: PMC10, Montecito PMC37.
    IEar,
    /// Data EAR configuration: PMC11, Montecito PMC40.
    DEar,
    /// Branch (execution) trace buffer configuration: PMC12, Montecito PMC39.
    Btb,
    /// Montecito PMC42: the IP-EAR configuration.
    IpEar,
    /// Itanium PMC13: the tag-all bit of instruction range restriction.
    RangeTag,
    /// Data address range configuration: Itanium 2 PMC13, Montecito PMC41.
    DataRange,
    /// Instruction address range configuration: Itanium 2 PMC14, Montecito
    /// PMC38.
    InstructionRange,
}

/// A row of a generation's PMC descriptor table (perfmon's register
/// descriptor): the PMC's number, role, power-up value, writable bits,
/// controlled PMDs, `pm` bit and the validator's checker. Only the crate's
/// tables make rows ([`Generation::pmc`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PmcInfo {
    /// The register number.
    pub pmc: u8,
    /// What the register does.
    pub kind: PmcKind,
    /// Its power-up value (perfmon's "default value").
    pub default: u64,
    /// The bits software may change; the others must keep [`PmcInfo::default`].
    pub writable: u64,
    /// The PMDs whose contents it controls (perfmon's `dep_pmd`).
    pub pmds: RegSet,
    /// The `pm` bit, on the monitors.
    pub(crate) pm: Option<Field>,
    /// What the validator checks beyond the reserved bits.
    pub(crate) checker: Checker,
    /// Bits the sources dispute ([`super::validate::disputed_bits`]).
    pub(crate) disputed: u64,
}

impl PmcInfo {
    const UNIMPLEMENTED: PmcInfo = PmcInfo {
        pmc: 0,
        kind: PmcKind::Overflow,
        default: 0,
        writable: 0,
        pmds: RegSet::EMPTY,
        pm: None,
        checker: Checker::Plain,
        disputed: 0,
    };

    /// The bits of `raw` outside the writable fields that differ from the
    /// power-up value.
    pub const fn reserved_bits(self, raw: u64) -> u64 {
        (raw ^ self.default) & !self.writable
    }

    /// `raw` with every bit outside the writable fields replaced by its
    /// power-up value (perfmon's rule).
    pub const fn merge(self, raw: u64) -> u64 {
        (raw & self.writable) | (self.default & !self.writable)
    }

    /// The position of the `pm` (privileged monitor) bit, for registers that
    /// have one (the monitors: counters, EARs, branch trace buffer, IP-EAR).
    pub const fn pm_bit(self) -> Option<u8> {
        match self.pm {
            Some(f) => Some(f.lsb()),
            None => None,
        }
    }

    /// Whether the register is a monitor (it has `plm` and `pm`: the
    /// counters, EARs, branch trace buffer and IP-EAR): its row names a
    /// `pm` bit.
    pub const fn is_monitor(self) -> bool {
        self.pm.is_some()
    }
}

impl Generation {
    /// What PMC `index` is on this generation: its row of the generation's
    /// PMC descriptor table, with its power-up value, writable bits, the
    /// PMDs it controls and how the validator checks it; `None` if not
    /// implemented.
    pub const fn pmc(self, index: u8) -> Option<PmcInfo> {
        table(self).row(index)
    }

    /// [`Generation::pmc`], or a row with nothing writable (so every set
    /// bit is reserved) if the generation has no such register.
    pub(crate) const fn pmc_or_empty(self, index: u8) -> PmcInfo {
        match self.pmc(index) {
            Some(i) => i,
            None => PmcInfo::UNIMPLEMENTED,
        }
    }
}

impl Counter {
    /// Its configuration register's power-up value and writable bits.
    pub const fn info(self) -> PmcInfo {
        // `new` admits counters only, which every table has.
        self.generation().pmc_or_empty(self.index())
    }
}

impl BtbConfig {
    /// The register's power-up value and writable bits.
    pub const fn info(generation: Generation) -> PmcInfo {
        generation.pmc_or_empty(generation.btb_pmc())
    }
}

impl DearConfig {
    /// The register's power-up value and writable bits.
    pub const fn info(generation: Generation) -> PmcInfo {
        generation.pmc_or_empty(generation.dear_pmc())
    }
}

impl IearConfig {
    /// The register's power-up value and writable bits.
    pub const fn info(generation: Generation) -> PmcInfo {
        generation.pmc_or_empty(generation.iear_pmc())
    }
}

/// What the validator checks on a PMC beyond its reserved bits: the
/// checker of its descriptor row (perfmon's `write_check`), each variant
/// one function of [`super::validate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) enum Checker {
    /// PMC0-3: refused (the driver writes PMC0 itself).
    Control,
    /// Nothing beyond the reserved bits.
    Plain,
    /// A generic counter of this layout: field widths, the fixed ISM,
    /// forced bits, the event against the catalog.
    Counter(&'static CounterLayout),
    /// The I-EAR configuration: its unit mask.
    Iear,
    /// The D-EAR configuration: mode, unit mask, `pt`; `ism_fixed` on
    /// Montecito.
    Dear {
        /// The ISM must stay at its power-up value.
        ism_fixed: bool,
    },
    /// The branch trace buffer configuration: no ISM.
    Btb,
    /// Itanium PMC13: `ta` clear restricts to the IBR ranges.
    RangeTag,
    /// The DBR range configuration.
    DataRange,
    /// The IBR range configuration.
    InstructionRange,
}

impl Checker {
    /// Whether the instruction set mask must keep its power-up value
    /// (Montecito's counters and D-EAR: IA-64 only).
    pub(crate) const fn ism_fixed(self) -> bool {
        match self {
            Checker::Counter(layout) => layout.ism_fixed,
            Checker::Dear { ism_fixed } => ism_fixed,
            _ => false,
        }
    }
}

/// The three registers perfmon's tagging check reads together (opcode
/// matcher, DBR and IBR configuration) and the opcode matcher's `ig_ad`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Tagging {
    /// The opcode matcher whose `ig_ad` counts.
    pub(crate) opcode: u8,
    /// The DBR range configuration.
    pub(crate) dbr: u8,
    /// The IBR range configuration.
    pub(crate) ibr: u8,
    /// `ig_ad` in the opcode matcher.
    pub(crate) ig_ad: Field,
}

/// One generation's descriptor table.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PmcTable {
    /// A row per implemented PMC, by number.
    pub(crate) rows: &'static [PmcInfo],
    /// The tagging check's registers; `None` on Itanium.
    pub(crate) tagging: Option<Tagging>,
}

impl PmcTable {
    /// The row of PMC `pmc`, if implemented.
    pub(crate) const fn row(&self, pmc: u8) -> Option<PmcInfo> {
        let mut i = 0;
        while i < self.rows.len() {
            if self.rows[i].pmc == pmc {
                return Some(self.rows[i]);
            }
            i += 1;
        }
        None
    }
}

/// The union of the fields' bits.
const fn fields(list: &[Field]) -> u64 {
    let mut mask = 0;
    let mut i = 0;
    while i < list.len() {
        mask |= list[i].mask();
        i += 1;
    }
    mask
}

const fn row(pmc: u8, kind: PmcKind, default: u64, writable: u64, checker: Checker) -> PmcInfo {
    PmcInfo {
        pmc,
        kind,
        default,
        writable,
        pmds: RegSet::EMPTY,
        pm: None,
        checker,
        disputed: 0,
    }
}

/// PMC0-3: PMC0 holds `fr` and the counters' overflow bits.
const fn control(pmc: u8, default: u64, counters: CounterSet) -> PmcInfo {
    let writable = if pmc == 0 {
        super::pmc::Pmc0::FR.mask() | counters.0
    } else {
        0
    };
    row(pmc, PmcKind::Overflow, default, writable, Checker::Control)
}

/// A counter configuration: its writable bits are its layout's fields.
const fn counter(layout: &'static CounterLayout, pmc: u8, default: u64) -> PmcInfo {
    PmcInfo {
        pmds: RegSet::single(pmc),
        pm: Some(layout.pm),
        ..row(
            pmc,
            PmcKind::Counter,
            default,
            layout.writable(pmc),
            Checker::Counter(layout),
        )
    }
}

/// A monitor (a register with `plm` and `pm`) controlling `pmds`.
const fn monitor(base: PmcInfo, pm: Field, pmds: RegSet) -> PmcInfo {
    PmcInfo {
        pm: Some(pm),
        pmds,
        ..base
    }
}

const ITA_COUNTERS: CounterSet = CounterSet::range(4, 7);
const MONT_COUNTERS: CounterSet = CounterSet::range(4, 15);
/// The branch trace buffer's PMDs: records and index (Itanium, Itanium 2).
const BTB_PMDS: RegSet = RegSet::range(8, 16);
/// Montecito's execution trace buffer: index, extension, records.
const ETB_PMDS: RegSet = RegSet::range(38, 39).union(RegSet::range(48, 63));

/// Itanium (Merced): perfmon's table for the registers and defaults,
/// libpfm3's layouts for the writable bits.
const ITANIUM: PmcTable = PmcTable {
    rows: &[
        // PMC0: perfmon default 1 (frozen).
        control(0, 0x1, ITA_COUNTERS),
        control(1, 0, ITA_COUNTERS),
        control(2, 0, ITA_COUNTERS),
        control(3, 0, ITA_COUNTERS),
        counter(&ITANIUM_COUNTER, 4, 0),
        counter(&ITANIUM_COUNTER, 5, 0),
        counter(&ITANIUM_COUNTER, 6, 0),
        counter(&ITANIUM_COUNTER, 7, 0),
        // mask 29:3, match 59:33, b/f/i/m 63:60 (libpfm3's layout).
        row(
            8,
            PmcKind::OpcodeMatcher,
            0xF000_0000_3FFF_FFF8,
            fields(&[
                OpcodeMatcher::MASK,
                OpcodeMatcher::MATCH,
                OpcodeMatcher::UNITS,
            ]),
            Checker::Plain,
        ),
        row(
            9,
            PmcKind::OpcodeMatcher,
            0xF000_0000_3FFF_FFF8,
            fields(&[
                OpcodeMatcher::MASK,
                OpcodeMatcher::MATCH,
                OpcodeMatcher::UNITS,
            ]),
            Checker::Plain,
        ),
        // libpfm3 `pmc10_ita_reg`.
        monitor(
            row(
                10,
                PmcKind::IEar,
                0,
                fields(&[
                    IearConfig::PLM,
                    IearConfig::ITA_PM,
                    IearConfig::ITA_TLB,
                    IearConfig::ITA_UMASK,
                    IearConfig::ITA_ISM,
                ]),
                Checker::Iear,
            ),
            IearConfig::ITA_PM,
            RegSet::range(0, 1),
        ),
        // libpfm3 `pmc11_ita_reg`; perfmon default 0x1000_0000 (`pt` set).
        monitor(
            row(
                11,
                PmcKind::DEar,
                0x1000_0000,
                fields(&[
                    DearConfig::PLM,
                    DearConfig::PM,
                    DearConfig::ITA_TLB,
                    DearConfig::UMASK,
                    DearConfig::ISM,
                    DearConfig::ITA_PT,
                ]),
                Checker::Dear { ism_fixed: false },
            ),
            DearConfig::PM,
            RegSet::range(2, 3).with(17),
        ),
        // libpfm3 `pmc12_ita_reg`.
        monitor(
            row(
                12,
                PmcKind::Btb,
                0,
                fields(&[
                    BtbConfig::PLM,
                    BtbConfig::PM,
                    BtbConfig::BIT7,
                    BtbConfig::TM,
                    BtbConfig::PTM,
                    BtbConfig::PPM,
                    BtbConfig::TAC,
                    BtbConfig::BAC,
                ]),
                Checker::Btb,
            ),
            BtbConfig::PM,
            BTB_PMDS,
        ),
        // `ta` (libpfm3's layout); perfmon default 0x0003_FFFF_0000_0001.
        row(
            13,
            PmcKind::RangeTag,
            0x0003_FFFF_0000_0001,
            RangeTag::DEFINED,
            Checker::RangeTag,
        ),
    ],
    tagging: None,
};

/// The Itanium 2 (and Montecito) opcode matcher writable mask: perfmon's
/// (bit 2 "must be 1" per libpfm3, bits 31:30 forced).
const ITA2_OPCM_WRITABLE: u64 = 0xFFFF_FFFF_3FFF_FFFB;
/// The Itanium 2 branch trace buffer fields (libpfm3 `pmc12_ita2_reg`;
/// bits 5:4 `btbc_ig1` ignored, not perfmon's 0xFFFF: see
/// [`Generation`]). Montecito's PMC39 has the same (perfmon 0xFFCF).
const ITA2_BTB_WRITABLE: u64 = fields(&[
    BtbConfig::PLM,
    BtbConfig::PM,
    BtbConfig::BIT7,
    BtbConfig::TM,
    BtbConfig::PTM,
    BtbConfig::PPM,
    BtbConfig::BRT,
]);
/// The instruction range configuration's writable bits: `ig_ibrpN` at 1,
/// 4, 7, 10 and `fine` 13 (perfmon's mask 0x2492, libpfm3's layout).
const IBR_WRITABLE: u64 = InstructionRangeConfig::DEFINED;

/// Itanium 2: perfmon's masks and defaults (see [`Generation`] for where
/// this crate follows libpfm3's layouts instead).
const ITANIUM2: PmcTable = PmcTable {
    rows: &[
        control(0, 0x1, ITA_COUNTERS),
        control(1, 0, ITA_COUNTERS),
        control(2, 0, ITA_COUNTERS),
        control(3, 0, ITA_COUNTERS),
        // PMC4: the power enable bit set at power-up.
        counter(&ITANIUM2_COUNTER, 4, 0x0080_0000),
        counter(&ITANIUM2_COUNTER, 5, 0),
        counter(&ITANIUM2_COUNTER, 6, 0),
        counter(&ITANIUM2_COUNTER, 7, 0),
        row(
            8,
            PmcKind::OpcodeMatcher,
            0xFFFF_FFFF_3FFF_FFFF,
            ITA2_OPCM_WRITABLE,
            Checker::Plain,
        ),
        row(
            9,
            PmcKind::OpcodeMatcher,
            0xFFFF_FFFF_3FFF_FFFC,
            ITA2_OPCM_WRITABLE,
            Checker::Plain,
        ),
        // libpfm3 `pmc10_ita2_reg` (perfmon 0xFFFF).
        monitor(
            row(
                10,
                PmcKind::IEar,
                0,
                fields(&[
                    IearConfig::PLM,
                    IearConfig::PM,
                    IearConfig::CACHE_UMASK,
                    IearConfig::CT,
                    IearConfig::ITA2_ISM,
                ]),
                Checker::Iear,
            ),
            IearConfig::PM,
            RegSet::range(0, 1),
        ),
        // libpfm3 `pmc11_ita2_reg` (perfmon 0x030F_01CF).
        monitor(
            row(
                11,
                PmcKind::DEar,
                0,
                fields(&[
                    DearConfig::PLM,
                    DearConfig::PM,
                    DearConfig::MODE,
                    DearConfig::UMASK,
                    DearConfig::ISM,
                ]),
                Checker::Dear { ism_fixed: false },
            ),
            DearConfig::PM,
            RegSet::range(2, 3).with(17),
        ),
        PmcInfo {
            // Writable in perfmon's mask, ignored in libpfm3's layout.
            disputed: 0b11 << 4,
            ..monitor(
                row(12, PmcKind::Btb, 0, ITA2_BTB_WRITABLE, Checker::Btb),
                BtbConfig::PM,
                BTB_PMDS,
            )
        },
        row(
            13,
            PmcKind::DataRange,
            0x0000_2078_FEFE_FEFE,
            DataRangeConfig::DEFINED,
            Checker::DataRange,
        ),
        row(
            14,
            PmcKind::InstructionRange,
            0x0DB6_0DB6_0DB6_0DB6,
            IBR_WRITABLE,
            Checker::InstructionRange,
        ),
        row(
            15,
            PmcKind::OpcodeMatcherConfig,
            0xFFFF_FFF0,
            OpcodeMatcherConfig::DEFINED,
            Checker::Plain,
        ),
    ],
    tagging: Some(Tagging {
        opcode: 8,
        dbr: 13,
        ibr: 14,
        ig_ad: OpcodeMatcher::IG_AD,
    }),
};

/// Montecito: perfmon's masks and defaults throughout (the counters' and
/// the D-EAR's ISM fixed at 10b, no ISM on the I-EAR).
const MONTECITO: PmcTable = PmcTable {
    rows: &[
        // PMC0: perfmon default 0.
        control(0, 0, MONT_COUNTERS),
        control(1, 0, MONT_COUNTERS),
        control(2, 0, MONT_COUNTERS),
        control(3, 0, MONT_COUNTERS),
        counter(&MONTECITO_COUNTER, 4, 0x0200_0000),
        counter(&MONTECITO_COUNTER, 5, 0x0200_0000),
        counter(&MONTECITO_COUNTER, 6, 0x0200_0000),
        counter(&MONTECITO_COUNTER, 7, 0x0200_0000),
        counter(&MONTECITO_COUNTER, 8, 0x0200_0000),
        counter(&MONTECITO_COUNTER, 9, 0x0200_0000),
        counter(&MONTECITO_COUNTER, 10, 0x0200_0000),
        counter(&MONTECITO_COUNTER, 11, 0x0200_0000),
        counter(&MONTECITO_COUNTER, 12, 0x0200_0000),
        counter(&MONTECITO_COUNTER, 13, 0x0200_0000),
        counter(&MONTECITO_COUNTER, 14, 0x0200_0000),
        counter(&MONTECITO_COUNTER, 15, 0x0200_0000),
        row(
            32,
            PmcKind::OpcodeMatcher,
            0x030F_01FF_FFFF_FFFF,
            0x030F_01FF_FFFF_FFFF,
            Checker::Plain,
        ),
        row(
            33,
            PmcKind::OpcodeMatchValue,
            0,
            0x01FF_FFFF_FFFF,
            Checker::Plain,
        ),
        row(
            34,
            PmcKind::OpcodeMatcher,
            0x000F_01FF_FFFF_FFFF,
            0x000F_01FF_FFFF_FFFF,
            Checker::Plain,
        ),
        row(
            35,
            PmcKind::OpcodeMatchValue,
            0,
            0x01FF_FFFF_FFFF,
            Checker::Plain,
        ),
        row(
            36,
            PmcKind::OpcodeMatcherConfig,
            0xFFFF_FFF0,
            OpcodeMatcherConfig::DEFINED,
            Checker::Plain,
        ),
        // libpfm3 `pmc37_mont_reg` (perfmon 0x3FFF): no ISM.
        monitor(
            row(
                37,
                PmcKind::IEar,
                0,
                fields(&[
                    IearConfig::PLM,
                    IearConfig::PM,
                    IearConfig::CACHE_UMASK,
                    IearConfig::CT,
                ]),
                Checker::Iear,
            ),
            IearConfig::PM,
            RegSet::range(34, 35),
        ),
        row(
            38,
            PmcKind::InstructionRange,
            0xDB6,
            IBR_WRITABLE,
            Checker::InstructionRange,
        ),
        monitor(
            row(39, PmcKind::Btb, 0, ITA2_BTB_WRITABLE, Checker::Btb),
            BtbConfig::PM,
            ETB_PMDS,
        ),
        // perfmon 0xF_01CF: the ISM fixed at its power-up 10b.
        monitor(
            row(
                40,
                PmcKind::DEar,
                0x0200_0000,
                fields(&[
                    DearConfig::PLM,
                    DearConfig::PM,
                    DearConfig::MODE,
                    DearConfig::UMASK,
                ]),
                Checker::Dear { ism_fixed: true },
            ),
            DearConfig::PM,
            RegSet::range(32, 33).with(36),
        ),
        row(
            41,
            PmcKind::DataRange,
            0x0000_2078_FEFE_FEFE,
            DataRangeConfig::DEFINED,
            Checker::DataRange,
        ),
        // libpfm3 `pmc42_mont_reg` (perfmon 0x7_FF4F).
        monitor(
            row(42, PmcKind::IpEar, 0, IpEarConfig::DEFINED, Checker::Plain),
            IpEarConfig::PM,
            ETB_PMDS,
        ),
    ],
    tagging: Some(Tagging {
        opcode: 32,
        dbr: 41,
        ibr: 38,
        ig_ad: MontecitoMask::IG_AD,
    }),
};

/// The descriptor table of `generation`.
pub(crate) const fn table(generation: Generation) -> &'static PmcTable {
    match generation {
        Generation::Itanium => &ITANIUM,
        Generation::Itanium2 => &ITANIUM2,
        Generation::Montecito => &MONTECITO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One row per PMC, by number, and each row's checker is the one its
    /// role calls for.
    #[test]
    fn one_row_per_pmc_and_the_checker_of_its_role() {
        for g in Generation::ALL {
            let rows = table(g).rows;
            assert!(rows.windows(2).all(|w| w[0].pmc < w[1].pmc), "{g:?}");
            for r in rows {
                let expected = match r.kind {
                    PmcKind::Overflow => matches!(r.checker, Checker::Control),
                    PmcKind::Counter => matches!(r.checker, Checker::Counter(_)),
                    PmcKind::IEar => r.checker == Checker::Iear,
                    PmcKind::DEar => matches!(r.checker, Checker::Dear { .. }),
                    PmcKind::Btb => r.checker == Checker::Btb,
                    PmcKind::RangeTag => r.checker == Checker::RangeTag,
                    PmcKind::DataRange => r.checker == Checker::DataRange,
                    PmcKind::InstructionRange => r.checker == Checker::InstructionRange,
                    _ => r.checker == Checker::Plain,
                };
                assert!(expected, "{g:?} PMC{}", r.pmc);
                // Monitors, and only they, have a `pm` bit, and it is writable.
                let monitor = matches!(
                    r.kind,
                    PmcKind::Counter
                        | PmcKind::IEar
                        | PmcKind::DEar
                        | PmcKind::Btb
                        | PmcKind::IpEar
                );
                assert_eq!(r.is_monitor(), monitor, "{g:?} PMC{}", r.pmc);
                if let Some(pm) = r.pm {
                    assert_eq!(r.writable & pm.mask(), pm.mask(), "{g:?} PMC{}", r.pmc);
                }
            }
        }
    }
}

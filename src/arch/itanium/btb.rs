//! The branch trace buffer: configuration PMC12 (Montecito's execution
//! trace buffer: PMC39), the records PMD8-15 (Montecito PMD48-63), the
//! index PMD16 (Montecito PMD38) and, on Montecito, the extension register
//! PMD39 (libpfm3's BTB and ETB layouts; Intel VTune's Itanium event help
//! names PMC12 the branch trace register).
//!
//! The buffer is a ring of 8 records (16 on Montecito). A taken branch
//! writes a source record (the branch's bundle and slot) and a target
//! record; which branches are captured is filtered by outcome (`tm`),
//! target prediction (`ptm`) and path prediction (`ppm`). The index
//! register holds the next slot to write and a sticky "full" bit: the
//! oldest record is at the next index when full, at 0 otherwise
//! ([`BtbIndex::walk`]). The ISM does not apply to PMC12 (VTune).
//!
//! # Layouts
//!
//! | | Itanium PMC12 | Itanium 2 PMC12, Montecito PMC39 |
//! |---|---|---|
//! | plm, pm | 3:0, 6 | 3:0, 6 |
//! | 7 | `tar`: capture branches predicted by the target address register | `ds`: record targets (0) or predictions (1) |
//! | 9:8 | `tm`: 0 none, 1 not taken, 2 taken, 3 all | same |
//! | 11:10 | `ptm`: 1 target mispredicted, 2 target predicted, 3 all | same |
//! | 13:12 | `ppm`: the same for the predicted path | same |
//! | 14 | `tac` (libpfm's parameter name; libpfm3's `pmc12_ita_reg` says `bpt`): target address cache | `brt` 15:14: branch type, 0 all |
//! | 15 | `bac`: branch address calculator | |
//!
//! | record (PMD8-15, PMD48-63) | meaning |
//! |---|---|
//! | bit 0 `b` | 1: source record (bundle address of the branch); 0: target record |
//! | bit 1 `mp` | on a source record: mispredicted |
//! | 3:2 slot | the branch's slot; 3: not taken |
//! | 63:4 | the bundle address (`ds` = 0); with `ds` = 1 on Itanium 2: 40:4 low address, 60:41 the low 20 bits of the prediction, 63:61 high address |
//!
//! Index: Itanium and Itanium 2 PMD16 `bbi` 2:0 and `full` 3; Itanium 2
//! adds one 4-bit extension per record from bit 4 (`b1` adds one bundle, 16
//! bytes, to a source address; `bruflush`: a back-end misprediction).
//! Montecito PMD38 `ebi` 3:0 and `full` 5, the extensions in PMD39 in the
//! order 48, 56, 49, 57, ..., 55, 63.
//!
//! # Source notes
//!
//! | topic | resolution |
//! |---|---|
//! | record validity: the sources give "valid if `b` or `mp` is set", so a target record (`b` = 0) is valid only with `mp` = 1 | followed: `b` = 0, `mp` = 0 is [`BtbRecord::Empty`]; `mp` on a target record marks it valid and is not reported as a misprediction |
//! | `brt` values other than 0 ("all branches") are not described by the sources | kept as a raw 2-bit [`BranchTypeMask`] |
//! | Itanium PMC12 bit 14 is `bpt` in libpfm3's `pmc12_ita_reg`, `tac` in libpfm3's parameter | named `tac` here, both names recorded |
//! | whether `b1` applies to records in the `ds` = 1 format | pfmon's decoder states the rule for the address format; this crate applies it to source records of both formats |
//!
//! # Examples
//!
//! ```
//! use pmu::arch::itanium::{BtbConfig, Generation};
//!
//! // Every branch, taken or not, predicted or not (PMC12, SDM Vol. 2 7.2).
//! assert_eq!(BtbConfig::capture_all(Generation::Itanium).bits(), 0xFF80);
//! assert_eq!(BtbConfig::capture_all(Generation::Itanium2).bits(), 0x3F00);
//! ```

use super::fields::{FieldError, Plm, Slot, pmc_register};
use super::generation::Generation;

/// Which branch outcomes are captured (`tm`, 9:8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum TakenMask {
    /// None.
    None = 0,
    /// Not-taken branches.
    NotTaken = 1,
    /// Taken branches.
    Taken = 2,
    /// All.
    All = 3,
}

impl TakenMask {
    const fn from_bits(v: u64) -> TakenMask {
        match v & 3 {
            0 => TakenMask::None,
            1 => TakenMask::NotTaken,
            2 => TakenMask::Taken,
            _ => TakenMask::All,
        }
    }
}

/// Which predictions are captured (`ptm` 11:10 for the target, `ppm`
/// 13:12 for the path).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum PredictionMask {
    /// None.
    None = 0,
    /// Mispredicted ones.
    Mispredicted = 1,
    /// Correctly predicted ones.
    Correct = 2,
    /// All.
    All = 3,
}

impl PredictionMask {
    const fn from_bits(v: u64) -> PredictionMask {
        match v & 3 {
            0 => PredictionMask::None,
            1 => PredictionMask::Mispredicted,
            2 => PredictionMask::Correct,
            _ => PredictionMask::All,
        }
    }
}

/// Itanium 2 `brt` (15:14): 0 captures all branch types; the sources do not
/// describe 1-3.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BranchTypeMask(u8);

impl BranchTypeMask {
    /// All branch types.
    pub const ALL: BranchTypeMask = BranchTypeMask(0);

    /// `Some` if `v` fits in 2 bits.
    pub const fn new(v: u8) -> Option<BranchTypeMask> {
        if v < 4 { Some(BranchTypeMask(v)) } else { None }
    }

    /// The value.
    pub const fn get(self) -> u8 {
        self.0
    }
}

pmc_register! {
    /// A branch trace buffer configuration (PMC12, Montecito PMC39; libpfm3
    /// `pmc12_ita_reg`, `pmc12_ita2_reg`, `pmc39_mont_reg`). Which fields a
    /// generation has is its row of the PMC descriptor table
    /// ([`BtbConfig::info`]).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct BtbConfig(Generation, u64): pmc(BtbConfig::info) {
        /// The privilege level mask.
        pub(crate) PLM: 0..=3 => plm, with_plm: Plm;
        /// The `pm` bit.
        pub(crate) PM: 6 => privileged, with_privileged: bool;
        /// Itanium `tar`, Itanium 2 and Montecito `ds`.
        pub(crate) BIT7: 7;
        /// `tm`: which outcomes.
        pub(crate) TM: 8..=9;
        /// `ptm`: which target predictions.
        pub(crate) PTM: 10..=11;
        /// `ppm`: which path predictions.
        pub(crate) PPM: 12..=13;
        /// Itanium `tac` (libpfm3's layout: `bpt`).
        pub(crate) TAC: 14;
        /// Itanium `bac`.
        pub(crate) BAC: 15;
        /// Itanium 2 and Montecito `brt`: the branch type mask.
        pub(crate) BRT: 14..=15;
    }
}

macro_rules! itanium_flag {
    ($get:ident, $set:ident, $field:ident, $name:literal, $doc:literal) => {
        #[doc = concat!($doc, " `None` after Itanium.")]
        pub const fn $get(self) -> Option<bool> {
            match self.generation {
                Generation::Itanium => Some(Self::$field.flag(self.bits)),
                _ => None,
            }
        }

        #[doc = concat!("With `", $name, "` set or cleared (Itanium only).")]
        pub const fn $set(self, on: bool) -> Result<BtbConfig, FieldError> {
            match self.generation {
                Generation::Itanium => Ok(self.with_bits(Self::$field.set_flag(self.bits, on))),
                g => Err(FieldError::NoSuchField {
                    field: $name,
                    generation: g,
                    pmc: g.btb_pmc(),
                }),
            }
        }
    };
}

impl BtbConfig {
    /// Capture every branch: `tm`, `ptm`, `ppm` all 3; on Itanium `tar`,
    /// `tac`, `bac` set; on Itanium 2 targets (`ds` 0) of all branch types
    /// (libpfm3's setting for `BRANCH_EVENT`). PLM zero.
    pub const fn capture_all(generation: Generation) -> BtbConfig {
        let mut bits = Self::info(generation).default;
        bits = Self::TM.set(bits, 3);
        bits = Self::PTM.set(bits, 3);
        bits = Self::PPM.set(bits, 3);
        bits = match generation {
            Generation::Itanium => Self::BAC.set(Self::TAC.set(Self::BIT7.set(bits, 1), 1), 1),
            _ => Self::BRT.set(Self::BIT7.set(bits, 0), 0),
        };
        BtbConfig { generation, bits }
    }

    /// Outcomes captured.
    pub const fn taken(self) -> TakenMask {
        TakenMask::from_bits(Self::TM.get(self.bits))
    }

    /// With the outcome filter replaced.
    pub const fn with_taken(self, m: TakenMask) -> BtbConfig {
        self.with_bits(Self::TM.set(self.bits, m as u64))
    }

    /// Target predictions captured.
    pub const fn target_prediction(self) -> PredictionMask {
        PredictionMask::from_bits(Self::PTM.get(self.bits))
    }

    /// With the target prediction filter replaced.
    pub const fn with_target_prediction(self, m: PredictionMask) -> BtbConfig {
        self.with_bits(Self::PTM.set(self.bits, m as u64))
    }

    /// Path predictions captured.
    pub const fn path_prediction(self) -> PredictionMask {
        PredictionMask::from_bits(Self::PPM.get(self.bits))
    }

    /// With the path prediction filter replaced.
    pub const fn with_path_prediction(self, m: PredictionMask) -> BtbConfig {
        self.with_bits(Self::PPM.set(self.bits, m as u64))
    }

    itanium_flag!(
        tar,
        with_tar,
        BIT7,
        "tar",
        "Itanium `tar` (bit 7): capture branches predicted by the target address register."
    );
    itanium_flag!(
        tac,
        with_tac,
        TAC,
        "tac",
        "Itanium `tac` (bit 14, `bpt` in libpfm3's `pmc12_ita_reg`): capture branches predicted by the target address cache."
    );
    itanium_flag!(
        bac,
        with_bac,
        BAC,
        "bac",
        "Itanium `bac` (bit 15): capture branches predicted by the branch address calculator."
    );

    /// Itanium 2 `ds` (bit 7): records hold predictions instead of
    /// targets. `None` on Itanium.
    pub const fn records_predictions(self) -> Option<bool> {
        match self.generation {
            Generation::Itanium => None,
            _ => Some(Self::BIT7.flag(self.bits)),
        }
    }

    /// With `ds` set or cleared (Itanium 2, Montecito).
    pub const fn with_records_predictions(self, on: bool) -> Result<BtbConfig, FieldError> {
        match self.generation {
            Generation::Itanium => Err(self.no_such("ds")),
            _ => Ok(self.with_bits(Self::BIT7.set_flag(self.bits, on))),
        }
    }

    /// Itanium 2 `brt` (15:14). `None` on Itanium.
    pub const fn branch_types(self) -> Option<BranchTypeMask> {
        match self.generation {
            Generation::Itanium => None,
            _ => Some(BranchTypeMask(Self::BRT.get(self.bits) as u8)),
        }
    }

    /// With `brt` replaced (Itanium 2, Montecito).
    pub const fn with_branch_types(self, m: BranchTypeMask) -> Result<BtbConfig, FieldError> {
        match self.generation {
            Generation::Itanium => Err(self.no_such("brt")),
            _ => Ok(self.with_bits(Self::BRT.set(self.bits, m.0 as u64))),
        }
    }

    const fn no_such(self, field: &'static str) -> FieldError {
        FieldError::NoSuchField {
            field,
            generation: self.generation,
            pmc: self.generation.btb_pmc(),
        }
    }
}

/// The per-record extension bits of Itanium 2 and Montecito.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BtbExtension {
    /// Add one bundle (16 bytes) to the source address.
    pub b1: bool,
    /// The branch was mispredicted in the back end.
    pub bruflush: bool,
}

impl BtbExtension {
    const fn from_nibble(v: u64) -> BtbExtension {
        BtbExtension {
            b1: v & 1 != 0,
            bruflush: v & 2 != 0,
        }
    }
}

/// One decoded branch trace record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum BtbRecord {
    /// Nothing recorded (`b` and `mp` clear).
    Empty,
    /// The target of a branch: the bundle execution went to.
    Target {
        /// The 16-byte-aligned bundle address.
        bundle: u64,
    },
    /// A branch.
    Source {
        /// The branch's bundle address (with the `b1` extension applied).
        bundle: u64,
        /// The branch's slot; `None` for a branch not taken (slot field 3).
        slot: Option<Slot>,
        /// Mispredicted in the front end (`mp`).
        mispredicted: bool,
        /// Mispredicted in the back end (Itanium 2 `bruflush`).
        back_end_flush: bool,
    },
}

impl BtbRecord {
    /// Whether a branch was mispredicted in front or back end (a source
    /// record with `mp` or `bruflush`).
    pub const fn is_mispredicted(self) -> bool {
        matches!(
            self,
            BtbRecord::Source {
                mispredicted: true,
                ..
            } | BtbRecord::Source {
                back_end_flush: true,
                ..
            }
        )
    }
}

/// A decoded record with, in the `ds` = 1 format, the prediction bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BtbEntry {
    /// The record.
    pub record: BtbRecord,
    /// Bits 60:41 in the prediction format (the low 20 bits of the
    /// prediction register), `None` in the address format.
    pub prediction: Option<u32>,
}

impl BtbEntry {
    /// Decode one record register `raw` written under `config`, with its
    /// extension bits `ext` (all clear on Itanium). Total.
    pub const fn decode(config: BtbConfig, raw: u64, ext: BtbExtension) -> BtbEntry {
        let b = raw & 1 != 0;
        let mp = raw & 2 != 0;
        let predictions = matches!(config.records_predictions(), Some(true));
        let (address, prediction) = if predictions {
            (
                (raw >> 61) << 61 | ((raw >> 4) & ((1 << 37) - 1)) << 4,
                Some(((raw >> 41) & 0xF_FFFF) as u32),
            )
        } else {
            (raw & !0xF, None)
        };
        let ext = match config.generation {
            Generation::Itanium => BtbExtension {
                b1: false,
                bruflush: false,
            },
            _ => ext,
        };
        let record = if b {
            BtbRecord::Source {
                bundle: address.wrapping_add((ext.b1 as u64) << 4),
                slot: Slot::from_bits(raw >> 2),
                mispredicted: mp,
                back_end_flush: ext.bruflush,
            }
        } else if mp {
            BtbRecord::Target { bundle: address }
        } else {
            BtbRecord::Empty
        };
        BtbEntry { record, prediction }
    }
}

/// The branch trace index (PMD16, Montecito PMD38) and, on Itanium 2, the
/// extension bits it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BtbIndex {
    generation: Generation,
    raw: u64,
}

impl BtbIndex {
    /// Any raw value read from the index register.
    pub const fn from_bits(generation: Generation, raw: u64) -> BtbIndex {
        BtbIndex { generation, raw }
    }

    /// The raw value.
    pub const fn bits(self) -> u64 {
        self.raw
    }

    /// The number of records: 8, or 16 on Montecito.
    pub const fn capacity(generation: Generation) -> u8 {
        match generation {
            Generation::Montecito => 16,
            _ => 8,
        }
    }

    /// The PMD holding record `entry` (0-based), if there is one.
    pub const fn record_pmd(generation: Generation, entry: u8) -> Option<u8> {
        if entry >= Self::capacity(generation) {
            None
        } else {
            match generation {
                Generation::Montecito => Some(48 + entry),
                _ => Some(8 + entry),
            }
        }
    }

    /// The record that will be written next (`bbi` 2:0, Montecito `ebi`
    /// 3:0).
    pub const fn next(self) -> u8 {
        match self.generation {
            Generation::Montecito => (self.raw & 0xF) as u8,
            _ => (self.raw & 0x7) as u8,
        }
    }

    /// The sticky full bit (bit 3, Montecito bit 5).
    pub const fn full(self) -> bool {
        match self.generation {
            Generation::Montecito => self.raw & (1 << 5) != 0,
            _ => self.raw & (1 << 3) != 0,
        }
    }

    /// The extension bits of record `entry`: on Itanium 2 from this
    /// register (bits 4 + 4 * entry), on Montecito from `pmd39` (nibbles in
    /// the order 48, 56, 49, 57, ...), none on Itanium.
    pub const fn extension(self, entry: u8, pmd39: u64) -> BtbExtension {
        if entry >= Self::capacity(self.generation) {
            return BtbExtension {
                b1: false,
                bruflush: false,
            };
        }
        match self.generation {
            Generation::Itanium => BtbExtension {
                b1: false,
                bruflush: false,
            },
            Generation::Itanium2 => BtbExtension::from_nibble(self.raw >> (4 + 4 * entry as u32)),
            Generation::Montecito => {
                let nibble = if entry < 8 {
                    2 * entry
                } else {
                    2 * (entry - 8) + 1
                };
                BtbExtension::from_nibble(pmd39 >> (4 * nibble as u32))
            }
        }
    }

    /// The records holding data, oldest first: all of them starting at
    /// [`BtbIndex::next`] when full, else `0..next`.
    pub const fn walk(self) -> BtbWalk {
        let n = Self::capacity(self.generation);
        if self.full() {
            BtbWalk {
                next: self.next() % n,
                left: n,
                capacity: n,
            }
        } else {
            BtbWalk {
                next: 0,
                left: self.next(),
                capacity: n,
            }
        }
    }
}

/// Record numbers of a trace, oldest first.
#[derive(Clone, Debug)]
pub struct BtbWalk {
    next: u8,
    left: u8,
    capacity: u8,
}

impl Iterator for BtbWalk {
    type Item = u8;
    fn next(&mut self) -> Option<u8> {
        if self.left == 0 || self.capacity == 0 {
            return None;
        }
        let e = self.next;
        self.next = (self.next + 1) % self.capacity;
        self.left -= 1;
        Some(e)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

/// The trace in `records` (record registers by record number, so
/// `records[0]` is PMD8 or PMD48), oldest first, decoded. Records missing
/// from a short slice are skipped; `pmd39` is Montecito's extension
/// register (ignored before).
pub fn trace(
    config: BtbConfig,
    index: BtbIndex,
    pmd39: u64,
    records: &[u64],
) -> impl Iterator<Item = BtbEntry> + '_ {
    index.walk().filter_map(move |e| {
        records
            .get(e as usize)
            .map(|&raw| BtbEntry::decode(config, raw, index.extension(e, pmd39)))
    })
}

/// One branch of a trace: a source record and the target record written
/// after it (libpfm3's BTB layout: a captured branch writes its source
/// record, then its target record; pfmon's decoder prints them as
/// "source -> target" pairs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BranchRecord {
    /// The branch's bundle address (with the `b1` extension applied).
    pub source: u64,
    /// The branch's slot; `None` for a branch not taken (slot field 3).
    pub slot: Option<Slot>,
    /// The target bundle (with `ds` = 1 on Itanium 2: the address bits of
    /// the prediction format); `None` when the source record is the newest
    /// of the trace or is followed by another source record.
    pub target: Option<u64>,
    /// Mispredicted in the front end (`mp` of the source record).
    pub mispredicted: bool,
    /// Mispredicted in the back end (Itanium 2 `bruflush`).
    pub back_end_flush: bool,
}

impl BranchRecord {
    /// The source as IA-64 tools print it: the bundle address with the
    /// slot in bits 3:0 (3 for a branch not taken).
    pub const fn source_address(self) -> u64 {
        self.source
            | match self.slot {
                Some(s) => s.get() as u64,
                None => 3,
            }
    }
}

/// Pair decoded entries, oldest first, into [`BranchRecord`]s: each source
/// record with the target record that follows it. A target record with no
/// source before it (its source was the oldest record, overwritten when the
/// ring wrapped) and empty records are skipped.
pub fn branches<I: Iterator<Item = BtbEntry>>(entries: I) -> impl Iterator<Item = BranchRecord> {
    let mut entries = entries.peekable();
    core::iter::from_fn(move || {
        loop {
            let BtbRecord::Source {
                bundle,
                slot,
                mispredicted,
                back_end_flush,
            } = entries.next()?.record
            else {
                continue;
            };
            let target = match entries.peek().map(|e| e.record) {
                Some(BtbRecord::Target { bundle }) => {
                    entries.next();
                    Some(bundle)
                }
                _ => None,
            };
            return Some(BranchRecord {
                source: bundle,
                slot,
                mispredicted,
                back_end_flush,
                target,
            });
        }
    })
}

/// The most records a branch trace holds: Montecito's 16 (8 before).
pub const MAX_RECORDS: usize = 16;

/// The branch trace buffer as read at one sample: its configuration, the
/// index register (PMD16, Montecito PMD38), Montecito's extension register
/// PMD39, and the record registers the index says hold data (PMD8-15,
/// Montecito PMD48-63; the others read as empty). Decoded on demand
/// ([`BtbSample::entries`], [`BtbSample::branches`]), so that the overflow
/// handler only reads registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BtbSample {
    config: BtbConfig,
    index: BtbIndex,
    extension: u64,
    records: [u64; MAX_RECORDS],
}

impl BtbSample {
    /// A sample with no records read yet.
    pub const fn new(config: BtbConfig, index: BtbIndex, extension: u64) -> BtbSample {
        BtbSample {
            config,
            index,
            extension,
            records: [0; MAX_RECORDS],
        }
    }

    /// Record `entry`'s raw register value (entries beyond the capacity
    /// are ignored).
    pub fn set_record(&mut self, entry: u8, raw: u64) {
        if let Some(r) = self.records.get_mut(usize::from(entry)) {
            *r = raw;
        }
    }

    /// The configuration the records were written under.
    pub const fn config(&self) -> BtbConfig {
        self.config
    }

    /// The index register as read.
    pub const fn index(&self) -> BtbIndex {
        self.index
    }

    /// The decoded records, oldest first ([`trace`]).
    pub fn entries(&self) -> impl Iterator<Item = BtbEntry> + '_ {
        let n = usize::from(BtbIndex::capacity(self.config.generation));
        trace(
            self.config,
            self.index,
            self.extension,
            &self.records[..n.min(MAX_RECORDS)],
        )
    }

    /// The branches, oldest first, as source -> target pairs ([`branches`]).
    pub fn branches(&self) -> impl Iterator<Item = BranchRecord> + '_ {
        branches(self.entries())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::itanium::{Plm, ReservedBits};

    const ITA: Generation = Generation::Itanium;
    const ITA2: Generation = Generation::Itanium2;
    const MONT: Generation = Generation::Montecito;

    #[test]
    fn itanium_pmc12_fields() {
        let z = BtbConfig::from_bits(ITA, 0).unwrap();
        assert_eq!(z.with_plm(Plm::ALL).bits(), 0xF);
        assert_eq!(z.with_privileged(true).bits(), 1 << 6);
        assert_eq!(z.with_tar(true).unwrap().bits(), 1 << 7);
        assert_eq!(z.with_taken(TakenMask::Taken).bits(), 2 << 8);
        assert_eq!(
            z.with_target_prediction(PredictionMask::Mispredicted)
                .bits(),
            1 << 10
        );
        assert_eq!(
            z.with_path_prediction(PredictionMask::Correct).bits(),
            2 << 12
        );
        assert_eq!(z.with_tac(true).unwrap().bits(), 1 << 14);
        assert_eq!(z.with_bac(true).unwrap().bits(), 1 << 15);
        assert_eq!(z.records_predictions(), None);
        assert!(z.with_records_predictions(true).is_err());
        assert_eq!(z.branch_types(), None);
        assert!(z.with_branch_types(BranchTypeMask::ALL).is_err());
        let all = BtbConfig::capture_all(ITA);
        assert_eq!(all.bits(), 0xFF80);
        assert_eq!(
            (all.tar(), all.tac(), all.bac()),
            (Some(true), Some(true), Some(true))
        );
        assert_eq!(all.taken(), TakenMask::All);
        assert_eq!(all.target_prediction(), PredictionMask::All);
        assert_eq!(all.path_prediction(), PredictionMask::All);
        // Bits 5:4 and everything above 15 (including the ISM position
        // 25:24) are not PMC12 fields.
        for b in [4, 5, 16, 24, 25, 63] {
            assert_eq!(BtbConfig::from_bits(ITA, 1 << b), Err(ReservedBits(1 << b)));
        }
    }

    #[test]
    fn itanium2_pmc12_and_montecito_pmc39_fields() {
        for g in [ITA2, MONT] {
            let z = BtbConfig::from_bits(g, 0).unwrap();
            assert_eq!(z.with_records_predictions(true).unwrap().bits(), 1 << 7);
            assert_eq!(
                z.with_branch_types(BranchTypeMask::new(3).unwrap())
                    .unwrap()
                    .bits(),
                3 << 14
            );
            assert_eq!(z.tar(), None);
            assert!(z.with_tac(true).is_err());
            let all = BtbConfig::capture_all(g);
            assert_eq!(all.bits(), 0x3F00);
            assert_eq!(all.records_predictions(), Some(false));
            assert_eq!(all.branch_types(), Some(BranchTypeMask::ALL));
            for b in [16, 24, 25] {
                assert_eq!(BtbConfig::from_bits(g, 1 << b), Err(ReservedBits(1 << b)));
            }
        }
        // Bits 5:4 are ignored on Itanium 2's PMC12 (libpfm3's layout, not
        // perfmon's 0xFFFF mask; `generation`'s module docs) as on
        // Montecito's PMC39 (perfmon's 0xFFCF).
        for g in [ITA2, MONT] {
            for b in [4, 5] {
                assert_eq!(BtbConfig::from_bits(g, 1 << b), Err(ReservedBits(1 << b)));
            }
        }
        assert_eq!(BranchTypeMask::new(4), None);
    }

    #[test]
    fn record_kinds() {
        let ita = BtbConfig::capture_all(ITA);
        let none = BtbExtension::default();
        assert_eq!(BtbEntry::decode(ita, 0x1230, none).record, BtbRecord::Empty);
        assert_eq!(
            BtbEntry::decode(ita, 0x1230 | 0b10, none).record,
            BtbRecord::Target { bundle: 0x1230 }
        );
        let src = BtbEntry::decode(ita, 0x1230 | 0b1001, none);
        assert_eq!(
            src.record,
            BtbRecord::Source {
                bundle: 0x1230,
                slot: Some(Slot::S2),
                mispredicted: false,
                back_end_flush: false
            }
        );
        assert_eq!(src.prediction, None);
        assert!(!src.record.is_mispredicted());
        // Slot 3: not taken; mp set: mispredicted.
        let nt = BtbEntry::decode(ita, 0x1230 | 0b1111, none).record;
        assert_eq!(
            nt,
            BtbRecord::Source {
                bundle: 0x1230,
                slot: None,
                mispredicted: true,
                back_end_flush: false
            }
        );
        assert!(nt.is_mispredicted());
        // Itanium has no extension bits: they are ignored.
        let ext = BtbExtension {
            b1: true,
            bruflush: true,
        };
        assert_eq!(
            BtbEntry::decode(ita, 0x1231, ext).record,
            BtbEntry::decode(ita, 0x1231, none).record
        );

        for g in [ITA2, MONT] {
            let c = BtbConfig::capture_all(g);
            // b1 adds one bundle to a source address; bruflush is a back-end
            // misprediction.
            let r = BtbEntry::decode(c, 0x5000 | 0b0101, ext).record;
            assert_eq!(
                r,
                BtbRecord::Source {
                    bundle: 0x5010,
                    slot: Some(Slot::S1),
                    mispredicted: false,
                    back_end_flush: true
                }
            );
            assert!(r.is_mispredicted());
            // Targets are not adjusted.
            assert_eq!(
                BtbEntry::decode(c, 0x5000 | 0b10, ext).record,
                BtbRecord::Target { bundle: 0x5000 }
            );
            // The prediction format: hiaddr 63:61, pred 60:41, loaddr 40:4.
            let p = c.with_records_predictions(true).unwrap();
            let raw = 0b101 << 61 | 0xABCDE << 41 | 0x1_2345_6789 << 4 | 0b0001;
            let e = BtbEntry::decode(p, raw, BtbExtension::default());
            assert_eq!(e.prediction, Some(0xABCDE));
            assert_eq!(
                e.record,
                BtbRecord::Source {
                    bundle: 0b101 << 61 | 0x1_2345_6789 << 4,
                    slot: Some(Slot::S0),
                    mispredicted: false,
                    back_end_flush: false
                }
            );
            // Wrapping at the top of the address space.
            assert_eq!(
                BtbEntry::decode(c, !0b10, ext).record,
                BtbRecord::Source {
                    bundle: 0,
                    slot: None,
                    mispredicted: false,
                    back_end_flush: true
                }
            );
        }
    }

    #[test]
    fn index_and_walk() {
        let ix = BtbIndex::from_bits(ITA, 0b0101);
        assert_eq!((ix.next(), ix.full()), (5, false));
        assert_eq!(ix.walk().collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
        let ix = BtbIndex::from_bits(ITA, 0b1101);
        assert!(ix.full());
        assert_eq!(ix.walk().collect::<Vec<_>>(), [5, 6, 7, 0, 1, 2, 3, 4]);
        assert_eq!(BtbIndex::from_bits(ITA, 0b1000).walk().count(), 8);
        assert_eq!(BtbIndex::from_bits(ITA, 0).walk().count(), 0);
        assert_eq!(BtbIndex::record_pmd(ITA, 0), Some(8));
        assert_eq!(BtbIndex::record_pmd(ITA, 7), Some(15));
        assert_eq!(BtbIndex::record_pmd(ITA, 8), None);
        // Itanium 2 extensions: nibble per record from bit 4.
        let ix = BtbIndex::from_bits(ITA2, 0b1 << 4 | 0b10 << 8 | 0b11 << 32);
        assert_eq!(
            ix.extension(0, 0),
            BtbExtension {
                b1: true,
                bruflush: false
            }
        );
        assert_eq!(
            ix.extension(1, 0),
            BtbExtension {
                b1: false,
                bruflush: true
            }
        );
        assert_eq!(
            ix.extension(7, 0),
            BtbExtension {
                b1: true,
                bruflush: true
            }
        );
        assert_eq!(ix.extension(8, u64::MAX), BtbExtension::default());
        assert_eq!(
            BtbIndex::from_bits(ITA, u64::MAX).extension(0, 0),
            BtbExtension::default()
        );
        // Montecito: 16 records, ebi 3:0, full bit 5, extensions in PMD39
        // interleaved 48, 56, 49, 57, ...
        let m = BtbIndex::from_bits(MONT, 0b10_1110);
        assert_eq!((m.next(), m.full()), (14, true));
        assert_eq!(
            m.walk().collect::<Vec<_>>(),
            [14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]
        );
        assert_eq!(BtbIndex::from_bits(MONT, 0b1_0011).walk().count(), 3); // bit 4 ignored
        assert_eq!(BtbIndex::record_pmd(MONT, 15), Some(63));
        let pmd39 = 0x1 | 0x2 << 4 | 0x3 << 8 | 0x1 << 60;
        assert_eq!(
            m.extension(0, pmd39),
            BtbExtension {
                b1: true,
                bruflush: false
            }
        ); // PMD48
        assert_eq!(
            m.extension(8, pmd39),
            BtbExtension {
                b1: false,
                bruflush: true
            }
        ); // PMD56
        assert_eq!(
            m.extension(1, pmd39),
            BtbExtension {
                b1: true,
                bruflush: true
            }
        ); // PMD49
        assert_eq!(
            m.extension(15, pmd39),
            BtbExtension {
                b1: true,
                bruflush: false
            }
        ); // PMD63: nibble 15
        assert_eq!(m.extension(7, pmd39), BtbExtension::default()); // PMD55: nibble 14
    }

    #[test]
    fn whole_trace() {
        let c = BtbConfig::capture_all(ITA2);
        // Two branches: source at 0x100 slot 2 (record 6), its target 0x800
        // (record 7), then (wrapped) source 0x900 slot 0 mispredicted
        // (record 0), target 0x100 (record 1); next = 2, full.
        let mut recs = [0u64; 8];
        recs[6] = 0x100 | 0b1001;
        recs[7] = 0x800 | 0b10;
        recs[0] = 0x900 | 0b0011;
        recs[1] = 0x100 | 0b10;
        let ix = BtbIndex::from_bits(ITA2, 0b1010 | 0b0010 << 4); // record 0: bruflush
        let got: Vec<_> = trace(c, ix, 0, &recs).map(|e| e.record).collect();
        assert_eq!(got.len(), 8);
        let live: Vec<_> = got.iter().filter(|r| **r != BtbRecord::Empty).collect();
        assert_eq!(
            live,
            [
                &BtbRecord::Source {
                    bundle: 0x100,
                    slot: Some(Slot::S2),
                    mispredicted: false,
                    back_end_flush: false
                },
                &BtbRecord::Target { bundle: 0x800 },
                &BtbRecord::Source {
                    bundle: 0x900,
                    slot: Some(Slot::S0),
                    mispredicted: true,
                    back_end_flush: true
                },
                &BtbRecord::Target { bundle: 0x100 },
            ]
        );
        // A short slice yields what it has, without panicking.
        assert_eq!(trace(c, ix, 0, &recs[..3]).count(), 3);
        assert_eq!(trace(c, ix, 0, &[]).count(), 0);
    }

    #[test]
    fn decoding_is_total() {
        let mut s = 0xFEED_FACE_CAFE_BEEFu64;
        for _ in 0..100_000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            for g in Generation::ALL {
                let c = BtbConfig::from_bits_truncate(g, s);
                assert_eq!(BtbConfig::from_bits(g, c.bits()), Ok(c));
                let ix = BtbIndex::from_bits(g, s.rotate_left(17));
                let n = ix.walk().count();
                assert!(n <= BtbIndex::capacity(g) as usize);
                for e in ix.walk() {
                    assert!(e < BtbIndex::capacity(g));
                    let entry = BtbEntry::decode(c, s, ix.extension(e, s));
                    if let BtbRecord::Source { bundle, .. } | BtbRecord::Target { bundle } =
                        entry.record
                    {
                        assert_eq!(bundle & 0xF, 0);
                    }
                }
            }
        }
    }

    /// Pairing: a source with the target after it; a target whose source
    /// was overwritten (the oldest record of a wrapped ring) is skipped; a
    /// source followed by a source, or last, has no target; empty records
    /// are skipped. The ring is walked from `bbi` when full.
    #[test]
    fn branches_pair_sources_with_targets_across_the_wrap() {
        let c = BtbConfig::capture_all(ITA2);
        let src = |a: u64, slot: u64| a | slot << 2 | 1;
        let tgt = |a: u64| a | 0b10;
        // Written in order: records 5, 6, 7 then 0, 1, 2, 3, 4 (bbi 5,
        // full): the oldest, record 5, is an orphan target.
        let mut records = [0u64; 8];
        records[5] = tgt(0x9990);
        records[6] = src(0x1000, 1);
        records[7] = tgt(0x2000);
        records[0] = src(0x1100, 3);
        records[1] = src(0x1200, 2);
        records[2] = tgt(0x2200);
        records[3] = 0;
        records[4] = src(0x1300, 0) | 0b10;
        let mut sample = BtbSample::new(c, BtbIndex::from_bits(ITA2, 5 | 1 << 3), 0);
        for (e, r) in records.iter().enumerate() {
            sample.set_record(e as u8, *r);
        }
        sample.set_record(200, 1); // beyond the ring: ignored
        let got: std::vec::Vec<_> = sample.branches().collect();
        let b = |source, slot, target, mispredicted| BranchRecord {
            source,
            slot,
            target,
            mispredicted,
            back_end_flush: false,
        };
        assert_eq!(
            got,
            [
                b(0x1000, Some(Slot::S1), Some(0x2000), false),
                b(0x1100, None, None, false),
                b(0x1200, Some(Slot::S2), Some(0x2200), false),
                b(0x1300, Some(Slot::S0), None, true),
            ]
        );
        assert_eq!(got[0].source_address(), 0x1001);
        assert_eq!(got[1].source_address(), 0x1103);
        // Not full: records 0..bbi only.
        let partial = BtbSample {
            index: BtbIndex::from_bits(ITA2, 2),
            ..sample
        };
        let got: std::vec::Vec<_> = partial.branches().collect();
        assert_eq!(
            got,
            [
                b(0x1100, None, None, false),
                b(0x1200, Some(Slot::S2), None, false)
            ]
        );
    }
}

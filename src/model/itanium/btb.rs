//! The branch trace buffer (Itanium, Itanium 2: PMC12, PMD8-15, PMD16) and
//! Montecito's execution trace buffer (PMC39, PMD48-63, PMD38, PMD39)
//! (libpfm3's BTB and ETB layouts). Each captured branch writes two entries,
//! its source and its target, then counts one BRANCH_EVENT.

use super::counting::{Event, InstructionSet};
use super::ear::Capture;
use super::registers::ItaniumModel;
use super::tables::Generation;
use crate::model::itanium::tables::Tables;
use bit_field::BitField;

/// The kind of a branch, for the Itanium 2 / Montecito `brt` filter (PMC12
/// bits 15:14).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum BranchKind {
    /// IP-relative (`brt` = 1).
    #[default]
    IpRelative,
    /// Return (`brt` = 2).
    Return,
    /// Non-return indirect (`brt` = 3).
    Indirect,
}

impl BranchKind {
    /// The `brt` value that selects only this kind.
    pub const fn brt(self) -> u64 {
        match self {
            Self::IpRelative => 1,
            Self::Return => 2,
            Self::Indirect => 3,
        }
    }
}

/// A retired branch, as the branch trace buffer sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Branch {
    /// The bundle address of the branch (low 4 bits ignored).
    pub source: u64,
    /// Its slot (0-2).
    pub slot: u8,
    /// Where execution went on: the target if taken, the next bundle if not.
    pub target: u64,
    /// Taken.
    pub taken: bool,
    /// The outcome (taken/not taken) was mispredicted.
    pub path_mispredicted: bool,
    /// The target was mispredicted (taken branches).
    pub target_mispredicted: bool,
    /// Branch type.
    pub kind: BranchKind,
    /// Privilege level 0-3.
    pub cpl: u8,
    /// Instruction set (the buffer records either; `ism` does not apply to
    /// PMC12, VTune's Itanium event help).
    pub isa: InstructionSet,
}

impl Branch {
    /// A correctly predicted taken IP-relative branch at CPL 0.
    pub const fn taken(source: u64, slot: u8, target: u64) -> Self {
        Self {
            source,
            slot,
            target,
            taken: true,
            path_mispredicted: false,
            target_mispredicted: false,
            kind: BranchKind::IpRelative,
            cpl: 0,
            isa: InstructionSet::Ia64,
        }
    }

    /// A correctly predicted not-taken branch falling through to `next`.
    pub const fn not_taken(source: u64, slot: u8, next: u64) -> Self {
        let mut b = Self::taken(source, slot, next);
        b.taken = false;
        b
    }

    /// With the outcome mispredicted.
    pub const fn path_mispredicted(mut self) -> Self {
        self.path_mispredicted = true;
        self
    }

    /// With the target mispredicted.
    pub const fn target_mispredicted(mut self) -> Self {
        self.target_mispredicted = true;
        self
    }

    /// Of kind `kind`.
    pub const fn kind(mut self, kind: BranchKind) -> Self {
        self.kind = kind;
        self
    }

    /// At privilege level `cpl`.
    pub const fn at(mut self, cpl: u8) -> Self {
        self.cpl = cpl;
        self
    }

    /// In instruction set `isa`.
    pub const fn isa(mut self, isa: InstructionSet) -> Self {
        self.isa = isa;
        self
    }
}

/// The index register's fields: (index mask, full bit).
const fn index_fields(generation: Generation) -> (u64, u64) {
    match generation {
        // PMD16: bbi 2:0, full 3.
        Generation::Itanium | Generation::Itanium2 => (0x7, 1 << 3),
        // PMD38: ebi 3:0, full 5.
        Generation::Montecito => (0xF, 1 << 5),
    }
}

impl ItaniumModel {
    /// The branch trace buffer sees a retired branch. Selection (PMC12 /
    /// PMC39): `plm` and `pm`/PSR; `tm` 9:8 (1 not taken, 2 taken, 3 both);
    /// `ptm` 11:10 (1 target mispredicted, 2 target correct, 3 both; a
    /// not-taken branch counts as target-correct); `ppm` 13:12 (likewise for
    /// the outcome); on Itanium 2 and Montecito `brt` 15:14 (0 all, else
    /// [`BranchKind::brt`]).
    pub fn branch(&mut self, branch: Branch) -> Capture {
        if self.frozen() {
            return Capture::Frozen;
        }
        let l = self.generation.layout();
        let cfg = self.pmc[l.btb_pmc as usize];
        // tm 9:8, ptm 11:10, ppm 13:12, brt 15:14 (libpfm3's layouts).
        let tm = cfg.get_bits(8..10);
        let ptm = cfg.get_bits(10..12);
        let ppm = cfg.get_bits(12..14);
        let brt = cfg.get_bits(14..16);
        let pick = |mask: u64, bad: bool| mask & if bad { 1 } else { 2 } != 0;
        let brt_ok = self.generation == Generation::Itanium || brt == 0 || brt == branch.kind.brt();
        let selected = self.monitor_enabled(cfg & 0xF, cfg & (1 << 6) != 0, branch.cpl)
            && tm & if branch.taken { 2 } else { 1 } != 0
            && pick(ptm, branch.taken && branch.target_mispredicted)
            && pick(ppm, branch.path_mispredicted)
            && brt_ok;
        if !selected {
            return Capture::NotSelected;
        }
        // Entry: b 0 (1 = source), mp 1, slot 3:2 (3 = not taken), address
        // 63:4. A target entry is b = 0 with mp = 1 ("valid if b|mp != 0").
        let slot = if branch.taken {
            u64::from(branch.slot.min(2))
        } else {
            3
        };
        let mispredicted = branch.path_mispredicted || branch.target_mispredicted;
        let source = (branch.source & !0xF) | (slot << 2) | (u64::from(mispredicted) << 1) | 1;
        let target = (branch.target & !0xF) | (1 << 1);
        self.record_entry(source);
        self.record_entry(target);
        self.deliver(
            &Event::new(l.branch_event, 0, 1)
                .at(branch.cpl)
                .isa(branch.isa),
        );
        Capture::Captured
    }

    /// Writes one entry at the index, clears its extension nibble (b1 and
    /// bruflush are not modelled), advances the index and sets `full` when it
    /// wraps.
    fn record_entry(&mut self, entry: u64) {
        let l = self.generation.layout();
        let (index_mask, full) = index_fields(self.generation);
        let index_reg = l.btb_index_pmd as usize;
        let i = self.pmd[index_reg] & index_mask;
        self.pmd[(l.btb_first_pmd + i as u32) as usize] = entry;
        if let Some(ext) = l.btb_extension_pmd {
            let nibble = match self.generation {
                // PMD16 bits 4+4i.. for PMD8+i.
                Generation::Itanium2 => 4 + 4 * i,
                // PMD39 in the order 48,56,49,57,...,55,63.
                _ => 4 * if i < 8 { 2 * i } else { 2 * (i - 8) + 1 },
            };
            self.pmd[ext as usize] &= !(0xF << nibble);
        }
        let next = (i + 1) & index_mask;
        let mut v = (self.pmd[index_reg] & !index_mask) | next;
        if next == 0 {
            v |= full;
        }
        self.pmd[index_reg] = v;
    }
}

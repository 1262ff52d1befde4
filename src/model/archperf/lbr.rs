//! The last branch records: which retired branches a record is made of
//! (the enable, the freeze, the privilege and kind filters), how a record
//! is laid out in each format, and call-stack mode (SDM Vol. 3B "Last
//! Branch Records": "LBR Stack and Intel 64 Processors", "Filtering of
//! Last Branch Records", "LBR Call Stack", "Streamlined Freeze_LBRs_On_PMI
//! Operation"; "Architectural Last Branch Records").
//!
//! A branch is recorded when it retires ([`ArchPerfModel::retire`] with a
//! taken [`Branch`](super::Branch)), before the events it makes are
//! counted: the branch that overflows a counter is in the records its PMI
//! freezes.

use super::registers::{ArchPerfModel, LbrConfig};
use super::retire::{BranchKind, Retirement};
use super::tables::{debugctl, global_status, lbr};
use crate::arch::ia32::Privilege;

/// One record's three words.
type Record = (u64, u64, u64);

impl ArchPerfModel {
    /// Whether the records are frozen: IA32_PERF_GLOBAL_STATUS.LBR_Frz
    /// (version 4 and later; the legacy freeze clears IA32_DEBUGCTL.LBR
    /// instead).
    pub fn lbr_frozen(&self) -> bool {
        self.config.has_v4() && self.global_status & global_status::LBR_FRZ != 0
    }

    /// The records, newest first, up to the first empty one (FROM 0), as
    /// the model holds them (raw MSR words: FROM, TO, INFO).
    pub fn lbr_records(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        let arch = matches!(self.config.lbr, LbrConfig::Architectural { .. });
        let depth = self.lbr_depth();
        (0..depth)
            .map(move |i| {
                let x = if arch {
                    i
                } else {
                    (self.lbr.tos as usize + depth - i) % depth
                };
                (self.lbr.from[x], self.lbr.to[x], self.lbr.info[x])
            })
            .take_while(|r| r.0 != 0)
    }

    /// Records in use: the legacy stack's, or IA32_LBR_DEPTH.
    fn lbr_depth(&self) -> usize {
        match self.config.lbr {
            LbrConfig::Architectural { .. } => (self.lbr.depth as usize).min(lbr::MAX_RECORDS),
            _ => self.config.lbr.max_depth(),
        }
    }

    /// Records the branch `r` retired, if the records are on, not frozen,
    /// and the filter takes it; in call-stack mode a near return pops
    /// instead.
    pub(super) fn record_branch(&mut self, r: &Retirement) {
        let Some(branch) = r.branch else { return };
        if !branch.taken || self.lbr_depth() == 0 || self.lbr_frozen() {
            return;
        }
        let kernel = r.privilege == Privilege::Os;
        let (on, taken, call_stack) = match self.config.lbr {
            LbrConfig::None => return,
            LbrConfig::Legacy { .. } => {
                let s = self.lbr.select;
                let suppress = match branch.kind {
                    BranchKind::Conditional => lbr::select::JCC,
                    BranchKind::Jump => lbr::select::NEAR_REL_JMP,
                    BranchKind::IndirectJump => lbr::select::NEAR_IND_JMP,
                    BranchKind::Call => lbr::select::NEAR_REL_CALL,
                    BranchKind::IndirectCall => lbr::select::NEAR_IND_CALL,
                    BranchKind::Return => lbr::select::NEAR_RET,
                    BranchKind::Other => lbr::select::FAR_BRANCH,
                };
                let cpl = if kernel {
                    lbr::select::CPL_EQ_0
                } else {
                    lbr::select::CPL_NEQ_0
                };
                (
                    self.debugctl & debugctl::LBR != 0,
                    s & (suppress | cpl) == 0,
                    s & lbr::select::EN_CALLSTACK != 0,
                )
            }
            LbrConfig::Architectural { .. } => {
                let c = self.lbr.ctl;
                let record = match branch.kind {
                    BranchKind::Conditional => lbr::ctl::COND,
                    BranchKind::Jump => lbr::ctl::NEAR_REL_JMP,
                    BranchKind::IndirectJump => lbr::ctl::NEAR_IND_JMP,
                    BranchKind::Call => lbr::ctl::NEAR_REL_CALL,
                    BranchKind::IndirectCall => lbr::ctl::NEAR_IND_CALL,
                    BranchKind::Return => lbr::ctl::NEAR_RET,
                    BranchKind::Other => lbr::ctl::OTHER_BRANCH,
                };
                let cpl = if kernel { lbr::ctl::OS } else { lbr::ctl::USR };
                (
                    c & lbr::ctl::LBREN != 0,
                    c & record != 0 && c & cpl != 0,
                    c & lbr::ctl::CALL_STACK != 0,
                )
            }
        };
        if !on || !taken {
            return;
        }
        if call_stack && branch.kind == BranchKind::Return {
            self.pop_record();
        } else {
            let record = self.record_of(r, branch.kind);
            self.push_record(record);
        }
    }

    /// The words of the record of `r`, a branch of `kind`, in the
    /// configured format (the model predicts every branch: MISPRED 0; no
    /// transaction: the TSX bits 0).
    fn record_of(&mut self, r: &Retirement, kind: BranchKind) -> Record {
        let cycles = self
            .clock
            .wrapping_sub(self.lbr.last)
            .min(lbr::info::CYCLES);
        self.lbr.last = self.clock;
        let (from, to) = (r.ip, r.next_ip);
        match self.config.lbr {
            LbrConfig::Architectural { .. } => {
                let br_type = match kind {
                    BranchKind::Conditional => lbr::br_type::JCC,
                    BranchKind::IndirectJump => lbr::br_type::NEAR_IND_JMP,
                    BranchKind::Jump => lbr::br_type::NEAR_REL_JMP,
                    BranchKind::IndirectCall => lbr::br_type::NEAR_IND_CALL,
                    BranchKind::Call => lbr::br_type::NEAR_REL_CALL,
                    BranchKind::Return => lbr::br_type::NEAR_RET,
                    BranchKind::Other => lbr::br_type::OTHER,
                };
                let info = cycles | lbr::info::CYC_CNT_VALID | br_type << lbr::info::BR_TYPE_SHIFT;
                (from, to, info)
            }
            _ => match self.config.lbr.legacy_format() {
                // MISPRED (63) over the address.
                3 => (from & !(1 << 63), to, 0),
                // MISPRED, IN_TSX, TSX_ABORT (63:61) over the address.
                4 => (from & !(7 << 61), to, 0),
                // LBR_INFO: the cycles; the addresses whole.
                5 | 7 => (from, to, cycles),
                // MISPRED over FROM; the cycles in TO's bits 63:48.
                6 => (from & !(1 << 63), (to & ((1 << 48) - 1)) | cycles << 48, 0),
                _ => (from, to, 0),
            },
        }
    }

    /// A new newest record: the legacy TOS advances (modulo the depth) and
    /// its record is overwritten; architectural records shift down by one,
    /// the oldest dropped.
    fn push_record(&mut self, (from, to, info): Record) {
        let depth = self.lbr_depth();
        let x = match self.config.lbr {
            LbrConfig::Architectural { .. } => {
                for i in (1..depth).rev() {
                    self.lbr.from[i] = self.lbr.from[i - 1];
                    self.lbr.to[i] = self.lbr.to[i - 1];
                    self.lbr.info[i] = self.lbr.info[i - 1];
                }
                0
            }
            _ => {
                self.lbr.tos = (self.lbr.tos + 1) % depth as u64;
                self.lbr.tos as usize
            }
        };
        self.lbr.from[x] = from;
        self.lbr.to[x] = to;
        self.lbr.info[x] = info;
    }

    /// Call-stack mode's return: the newest record is flushed (zeroed) and
    /// the next older becomes the newest (legacy: the TOS goes back one;
    /// architectural: the records shift up). With no record to flush (the
    /// newest empty: a return from a call made before recording began)
    /// nothing changes (choice 22).
    fn pop_record(&mut self) {
        let depth = self.lbr_depth();
        match self.config.lbr {
            LbrConfig::Architectural { .. } => {
                if self.lbr.from[0] == 0 {
                    return;
                }
                for i in 0..depth - 1 {
                    self.lbr.from[i] = self.lbr.from[i + 1];
                    self.lbr.to[i] = self.lbr.to[i + 1];
                    self.lbr.info[i] = self.lbr.info[i + 1];
                }
                let last = depth - 1;
                (self.lbr.from[last], self.lbr.to[last], self.lbr.info[last]) = (0, 0, 0);
            }
            _ => {
                let x = self.lbr.tos as usize % depth;
                if self.lbr.from[x] == 0 {
                    return;
                }
                (self.lbr.from[x], self.lbr.to[x], self.lbr.info[x]) = (0, 0, 0);
                self.lbr.tos = (self.lbr.tos + depth as u64 - 1) % depth as u64;
            }
        }
    }
}

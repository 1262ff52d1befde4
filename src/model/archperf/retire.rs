//! Instructions retired one at a time, with their addresses: the feed that
//! makes the model's PEBS records real ([`Retirement`]).
//!
//! A test kernel that single-steps a workload (RFLAGS.TF: a debug exception
//! after every instruction, whose frame holds the next instruction's
//! address and the registers after the one that retired) hands each step
//! to the model as a [`Retirement`]: the instruction that retired at `ip`,
//! the next one at `next_ip`, the registers after it, and what it was (a
//! branch, a load), through `ArchPerfModel::retire` (`counting.rs`). The
//! model counts the events the instruction makes in one clock, and a PEBS assist it takes records that instruction's
//! addresses: so a precise sample's IP can be checked against the
//! instruction that really retired the N-th event, and the check can fail.
//! The same feed serves anything else that wants "an instruction retired
//! at IP X" (a branch recorder).

use crate::arch::ia32::{Gprs, Privilege};

/// What kind of branch an instruction is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum BranchKind {
    /// A conditional jump (Jcc, LOOP, JRCXZ).
    Conditional,
    /// A direct unconditional jump.
    Jump,
    /// An indirect jump.
    IndirectJump,
    /// A direct call.
    Call,
    /// An indirect call.
    IndirectCall,
    /// A return.
    Return,
    /// Another control transfer (a far jump or call, an interrupt return,
    /// SYSCALL, ...).
    Other,
}

/// A branch instruction, and whether it was taken (to `next_ip`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Branch {
    /// Its kind.
    pub kind: BranchKind,
    /// Taken (the next instruction is its target) or not (a conditional
    /// branch that fell through).
    pub taken: bool,
}

/// A load an instruction made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Load {
    /// Its linear address.
    pub address: u64,
    /// Its latency in core cycles.
    pub latency: u64,
    /// Where it was satisfied (a data source encoding: the records' DSE).
    pub source: u64,
}

/// One instruction retired: where, what came next, the state after it,
/// and what it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Retirement {
    /// The instruction's address.
    pub ip: u64,
    /// The next instruction's address (a taken branch's target).
    pub next_ip: u64,
    /// The privilege level it ran at.
    pub privilege: Privilege,
    /// RFLAGS after it.
    pub rflags: u64,
    /// The general registers after it.
    pub registers: Gprs,
    /// It was a branch.
    pub branch: Option<Branch>,
    /// It loaded from memory.
    pub load: Option<Load>,
}

impl Retirement {
    /// No instruction: what the bulk paths (`ArchPerfModel::inject`,
    /// `ArchPerfModel::cycle`) record, every field zero, at CPL 0.
    pub const NONE: Retirement = Retirement {
        ip: 0,
        next_ip: 0,
        privilege: Privilege::Os,
        rflags: 0,
        registers: Gprs::ZERO,
        branch: None,
        load: None,
    };

    /// The instruction at `ip`, followed by the one at `next_ip`, at CPL 0,
    /// nothing else known.
    pub const fn at(ip: u64, next_ip: u64) -> Retirement {
        Retirement {
            ip,
            next_ip,
            ..Retirement::NONE
        }
    }
}

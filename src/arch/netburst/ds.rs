//! NetBurst's PEBS records in the DS save area (SDM Vol. 3B 18.15.7,
//! "64-bit DS save area"): the record's layout ([`PebsRecord`]) and the
//! memory that holds them ([`PebsArea`]). The area's owner, [`DsArea`], and
//! its management area, [`DsManagement`], are the x86 PMUs' shared ones
//! ([`crate::arch::ia32::ds`]), which say how the memory is owned and why
//! it must be mapped at one linear address in every address space while
//! PEBS runs.
//!
//! NetBurst uses one PEBS counter reset value, at 40H (the architectural
//! PMU's counter 0 reset sits at the same offset), and 144-byte records:
//! RFLAGS, RIP, then RAX, RBX, RCX, RDX, RSI, RDI, RBP, RSP, R8-R15, the
//! state after the instruction whose µop took the PEBS assist.

use core::mem::{offset_of, size_of};
use core::ptr::NonNull;

use crate::arch::ia32::ds::{self, DsMemory, RecordSlot};
pub use crate::arch::ia32::ds::{DsArea, DsManagement};
use crate::sealed::Sealed;

/// One 64-bit PEBS record (SDM 18.15.7): the architectural state after the
/// retired instruction that took the assist.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[allow(missing_docs)]
pub struct PebsRecord {
    pub rflags: u64,
    /// The precise instruction pointer.
    pub rip: u64,
    pub rax: u64,
    pub rbx: u64,
    pub rcx: u64,
    pub rdx: u64,
    pub rsi: u64,
    pub rdi: u64,
    pub rbp: u64,
    pub rsp: u64,
    pub r8: u64,
    pub r9: u64,
    pub r10: u64,
    pub r11: u64,
    pub r12: u64,
    pub r13: u64,
    pub r14: u64,
    pub r15: u64,
}

/// Bytes per PEBS record (SDM 18.15.7, 64-bit format).
pub const PEBS_RECORD_BYTES: u64 = 144;

const _: () = {
    assert!(size_of::<PebsRecord>() == PEBS_RECORD_BYTES as usize);
    assert!(offset_of!(PebsRecord, rip) == 8);
    assert!(offset_of!(PebsRecord, r15) == 136);
};

impl PebsRecord {
    /// The record of 18 words as the processor wrote them.
    #[inline(always)]
    fn from_words(w: &[u64]) -> PebsRecord {
        let at = |i: usize| w.get(i).copied().unwrap_or(0);
        PebsRecord {
            rflags: at(0),
            rip: at(1),
            rax: at(2),
            rbx: at(3),
            rcx: at(4),
            rdx: at(5),
            rsi: at(6),
            rdi: at(7),
            rbp: at(8),
            rsp: at(9),
            r8: at(10),
            r9: at(11),
            r10: at(12),
            r11: at(13),
            r12: at(14),
            r13: at(15),
            r14: at(16),
            r15: at(17),
        }
    }
}

impl Sealed for PebsRecord {}

impl RecordSlot for PebsRecord {
    const ZERO: PebsRecord = PebsRecord {
        rflags: 0,
        rip: 0,
        rax: 0,
        rbx: 0,
        rcx: 0,
        rdx: 0,
        rsi: 0,
        rdi: 0,
        rbp: 0,
        rsp: 0,
        r8: 0,
        r9: 0,
        r10: 0,
        r11: 0,
        r12: 0,
        r13: 0,
        r14: 0,
        r15: 0,
    };
}

/// Caller-provided memory for one logical processor's PEBS: the DS
/// management area followed by room for `K` records. Declare it as a
/// `static mut` or leak it, make it a [`DsArea`] (whose `unsafe`
/// constructor states that it is mapped at one linear address in every
/// address space) and hand it to
/// [`NetBurstDriver::set_pebs_area`](super::driver::NetBurstDriver::set_pebs_area).
pub type PebsArea<const K: usize> = DsMemory<PebsRecord, K>;

/// The 144-byte record size as the shared DS area takes it.
pub(crate) const RECORD_BYTES: u32 = PEBS_RECORD_BYTES as u32;

/// Hands `lp`'s records in the area at `area` to `f` and rewinds the index
/// ([`ds::drain_published`] for NetBurst's record).
///
/// # Safety
///
/// As [`ds::drain_published`]'s: `area` is a live [`DsArea`]'s management
/// area, and nothing else drains or resets it during the call.
#[inline(always)]
pub(crate) unsafe fn drain_published(
    area: NonNull<DsManagement>,
    mut f: impl FnMut(&PebsRecord),
) -> u32 {
    // SAFETY: the caller's promise is `ds::drain_published`'s.
    unsafe { ds::drain_published(area, RECORD_BYTES, |w| f(&PebsRecord::from_words(w))) }
}

//! Shared helpers for the model tests: the manuals' numbers, written out.

pub use crate::access::MsrAccess;
pub use crate::detect::Cpuid;
pub use crate::model::amd::*;

pub const OS: Privilege = Privilege::Os;
pub const USR: Privilege = Privilege::Usr;

// MSR addresses (APM Vol. 2 13.2; PPR MSR list).
pub const LCTL0: u32 = 0xC001_0000;
pub const LCTR0: u32 = 0xC001_0004;
pub const CTL0: u32 = 0xC001_0200;
pub const CTR0: u32 = 0xC001_0201;
pub const STATUS: u32 = 0xC000_0300;
pub const GCTL: u32 = 0xC000_0301;
pub const CLR: u32 = 0xC000_0302;
pub const SET: u32 = 0xC000_0303;

// PerfEvtSeln bits (APM Vol. 2 13.2.1).
pub const USR_BIT: u64 = 1 << 16;
pub const OS_BIT: u64 = 1 << 17;
pub const EDGE: u64 = 1 << 18;
pub const INT: u64 = 1 << 20;
pub const EN: u64 = 1 << 22;
pub const INV: u64 = 1 << 23;
pub const GUEST_ONLY: u64 = 1 << 40;
pub const HOST_ONLY: u64 = 1 << 41;

pub const W48: u64 = 1 << 48;

/// CntMask field value.
pub const fn cmask(n: u64) -> u64 {
    n << 24
}

/// A PerfEvtSel value for the 12-bit `select` with `umask`.
pub const fn sel(select: u16, umask: u8, bits: u64) -> u64 {
    (select as u64 & 0xFF) | (select as u64 >> 8) << 32 | (umask as u64) << 8 | bits
}

/// PerfEvtSel counting `select` at both privilege levels, enabled, plus
/// `bits`.
pub const fn counting(select: u16, bits: u64) -> u64 {
    sel(select, 0, OS_BIT | USR_BIT | EN | bits)
}

/// Control `n`'s and counter `n`'s MSRs on a part with PerfCtrExtCore.
pub const fn ctl(n: u32) -> u32 {
    CTL0 + 2 * n
}

/// See [`ctl`].
pub const fn ctr(n: u32) -> u32 {
    CTR0 + 2 * n
}

pub fn ev(select: u16, count: u64) -> Event {
    Event::new(select, 0, count)
}

/// The reason of a fault, panicking on success.
#[track_caller]
pub fn reason<T: core::fmt::Debug>(r: Result<T, Fault>) -> GpReason {
    r.unwrap_err().reason
}

/// Asserts that `msr` does not exist: RDMSR and WRMSR fault with
/// `UnknownMsr` and change nothing.
#[track_caller]
pub fn absent(m: &mut AmdModel, msr: u32) {
    assert_eq!(
        reason(m.read_msr(msr)),
        GpReason::UnknownMsr,
        "RDMSR {msr:#X}"
    );
    let before = m.clone();
    let e = m.write_msr(msr, 0).unwrap_err();
    assert_eq!(
        (e.instruction, e.ecx, e.reason),
        (Instruction::Wrmsr, msr, GpReason::UnknownMsr)
    );
    assert_eq!(*m, before, "a faulting WRMSR {msr:#X} changed the model");
}

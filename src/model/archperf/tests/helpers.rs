//! Shared helpers for the model tests: the SDM's numbers, written out.

pub use crate::access::MsrAccess;
pub use crate::detect::Cpuid;
pub use crate::model::archperf::*;

pub const OS: Privilege = Privilege::Os;
pub const USR: Privilege = Privilege::Usr;

// MSR addresses (SDM Vol. 4 Table 2-2).
pub const PMC0: u32 = 0xC1;
pub const EVTSEL0: u32 = 0x186;
pub const DEBUGCTL: u32 = 0x1D9;
pub const FIXED0: u32 = 0x309;
pub const PERF_CAPS: u32 = 0x345;
pub const FIXED_CTRL: u32 = 0x38D;
pub const STATUS: u32 = 0x38E;
pub const GLOBAL_CTRL: u32 = 0x38F;
pub const OVF_CTRL: u32 = 0x390;
pub const STATUS_SET: u32 = 0x391;
pub const INUSE: u32 = 0x392;
pub const A_PMC0: u32 = 0x4C1;

// IA32_PERFEVTSELx bits (SDM 20.2.1.1).
pub const USR_BIT: u64 = 1 << 16;
pub const OS_BIT: u64 = 1 << 17;
pub const EDGE: u64 = 1 << 18;
pub const PC: u64 = 1 << 19;
pub const INT: u64 = 1 << 20;
pub const ANY: u64 = 1 << 21;
pub const EN: u64 = 1 << 22;
pub const INV: u64 = 1 << 23;

/// CMASK field value.
pub const fn cmask(n: u64) -> u64 {
    n << 24
}

/// A PERFEVTSEL value.
pub const fn sel(select: u8, umask: u8, bits: u64) -> u64 {
    select as u64 | (umask as u64) << 8 | bits
}

// Table 20-1 encodings.
pub const INSTR: (u8, u8) = (0xC0, 0x00);
pub const CYCLES: (u8, u8) = (0x3C, 0x00);
pub const REF: (u8, u8) = (0x3C, 0x01);
pub const SLOTS: (u8, u8) = (0xA4, 0x01);
pub const LLC_MISS: (u8, u8) = (0x2E, 0x41);

pub fn ev(e: (u8, u8), count: u64) -> Event {
    Event::new(e.0, e.1, count)
}

/// PERFEVTSEL counting `e` at both privilege levels, enabled, plus `bits`.
pub fn counting(e: (u8, u8), bits: u64) -> u64 {
    sel(e.0, e.1, OS_BIT | USR_BIT | EN | bits)
}

/// A version-3 part (Nehalem-like): 4 x 48-bit GP counters, 3 x 48 fixed.
pub const fn v3() -> Config {
    Config {
        pebs: crate::model::archperf::PebsConfig::NONE,
        ..Config::nehalem()
    }
}

pub fn sky() -> ArchPerfModel {
    ArchPerfModel::new(Config::skylake())
}

/// The reason of a fault, panicking on success.
#[track_caller]
pub fn reason<T: core::fmt::Debug>(r: Result<T, Fault>) -> GpReason {
    r.unwrap_err().reason()
}

/// Asserts that writing `value` to `msr` faults with `why` and changes
/// nothing in the model.
#[track_caller]
pub fn write_faults(m: &mut ArchPerfModel, msr: u32, value: u64, why: GpReason) {
    let before = m.clone();
    let e = m.write_msr(msr, value).unwrap_err();
    assert_eq!(e.reason(), why, "WRMSR {msr:#X} <- {value:#X}");
    assert_eq!(e.instruction(), Instruction::Wrmsr);
    assert_eq!(e.ecx(), msr);
    assert_eq!(*m, before, "a faulting WRMSR {msr:#X} changed the model");
}

/// Asserts that `msr` does not exist: RDMSR and WRMSR (of 0) fault with
/// `UnknownMsr`.
#[track_caller]
pub fn absent(m: &mut ArchPerfModel, msr: u32) {
    assert_eq!(
        reason(m.read_msr(msr)),
        GpReason::UnknownMsr,
        "RDMSR {msr:#X}"
    );
    write_faults(m, msr, 0, GpReason::UnknownMsr);
}

/// A small deterministic generator (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }
}

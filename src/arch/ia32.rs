//! What the x86 PMUs share across architectures: the privilege level an
//! event occurs at, the general registers a record or a model's retired
//! instruction carries ([`Gprs`]), and the DS save area ([`ds`]: the memory PEBS writes,
//! one ownership type for NetBurst and the architectural PMU). (The IA-32
//! architectural registers that detection
//! reads, CPUID's leaves, `IA32_MISC_ENABLE` and `IA32_PERF_CAPABILITIES`,
//! are laid out in [`crate::detect`].)

/// The privilege level of the code an event occurs in, as x86 PMUs
/// distinguish it: the NetBurst ESCR's `OS`/`USR` flags, `IA32_PERFEVTSELx`'s
/// `OS`/`USR` bits, the fixed counters' fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Privilege {
    /// CPL 0.
    Os,
    /// CPL 1, 2 or 3.
    Usr,
}

/// The sixteen 64-bit general registers, in the order the SDM's PEBS
/// records store them (RAX, RBX, RCX, RDX, RSI, RDI, RBP, RSP, R8-R15: SDM
/// Vol. 3B, the 64-bit PEBS record tables): what an architectural PEBS
/// record's general-register fields decode to, and the registers after an
/// instruction retired as the PMU models take it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[allow(missing_docs)]
pub struct Gprs {
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

impl Gprs {
    /// Every register zero (`Default` in a `const`).
    pub const ZERO: Gprs = Gprs {
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

pub mod ds;

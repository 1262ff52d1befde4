//! What the x86 PMUs share across architectures: the privilege level an
//! event occurs at, and the DS save area ([`ds`]: the memory PEBS writes,
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

pub mod ds;

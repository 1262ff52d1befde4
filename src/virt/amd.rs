//! A guest's AMD core PMU, with KVM's rules (`arch/x86/kvm/svm/pmu.c`,
//! `pmu.c`, `x86.c`).
//!
//! [`GuestPolicy`] says what a guest is shown (the four legacy counters,
//! PerfCtrExtCore's six, or PerfMonV2 with its counter count) and which of
//! the physical PMU's counters the host keeps; [`GuestPolicy::checked`]
//! turns it into a [`GuestPmu`], which answers each of the guest's
//! accesses as KVM does ([`GuestPmu::check_msr_write`],
//! [`GuestPmu::check_msr_read`], [`GuestPmu::check_rdpmc`]; the rules are
//! in [`validate`]'s documentation) and what its CPUID says
//! ([`GuestPmu::cpuid`]: Fn8000_0001's PerfCtrExtCore and Fn8000_0022
//! built from the policy). [`vpmu`] (feature `model`) is a trap-and-emulate
//! PMU on the model that follows them on any host.
//!
//! The answers are those of the architectural PMU's checks
//! ([`WriteAnswer`], [`ReadAnswer`]), over AMD's registers ([`GuestReg`]);
//! the exits are handled as the [architectural PMU's
//! table](super::archperf) says. Where AMD differs:
//!
//! * reserved bits are dropped, never a #GP: a control's bits 19, 21 and
//!   36-63 (HostOnly and GuestOnly among them, so a guest neither sets nor
//!   reads them: they are the hypervisor's, [`GuestPmu::hardware_ctl`]),
//!   `PerfCntrGlobalCtl`'s bits of no guest counter, a write to the
//!   read-only `PerfCntrGlobalStatus` ("AMD ignores writes to reserved bits
//!   and read-only PMU MSRs, whereas Intel generates #GP", `kvm_pmu_set_msr`);
//! * the legacy addresses (`PERF_LEGACY_CTLn`/`CTRn`, C001_0000H-C001_0007H)
//!   and the first four extended ones (C001_0200H-C001_0207H) are one set
//!   of registers ([`GuestReg`] names the counter, not the address);
//! * the guest's LVT entry is not masked by a PMI's delivery
//!   ([`VirtualLvt::amd`](super::VirtualLvt::amd)).
//!
//! A vCPU takes its PMU along as the architectural PMU's does (see
//! [there](super::archperf#a-vcpu-moving-between-cpus)).

pub mod validate;
#[cfg(any(test, feature = "model"))]
pub mod vpmu;

mod passthrough;
mod policy;
mod world;

pub use super::answer::{RdpmcAnswer, ReadAnswer, WriteAnswer};
pub use passthrough::{PassThrough, msrpm_bits};
pub use policy::{Generation, GuestPmu, GuestPolicy, PolicyError};
pub use validate::GuestReg;
pub use world::PassThroughPmu;

/// Why a guest's access to its AMD PMU is a #GP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum GuestGp {
    /// An MSR the guest's PMU does not have: a counter beyond its count,
    /// an extended address without PerfCtrExtCore, a PerfMonV2 register
    /// without PerfMonV2, Intel's PMU registers (but the four legacy P6
    /// ones, which KVM reads as 0), IBS, the uncore.
    NoSuchMsr {
        /// The MSR.
        msr: u32,
    },
    /// RDPMC of a counter the guest does not have (on AMD this #GP comes
    /// before any intercept: `kvm_pmu_check_rdpmc_early`).
    RdpmcIndex {
        /// The ECX operand.
        ecx: u32,
    },
    /// RDPMC at CPL > 0 with CR4.PCE clear.
    RdpmcNotAllowed,
}

impl core::fmt::Display for GuestGp {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            GuestGp::NoSuchMsr { msr } => {
                write!(f, "MSR {msr:#X} is no register of the guest's AMD PMU")
            }
            GuestGp::RdpmcIndex { ecx } => write!(
                f,
                "RDPMC with ECX {ecx:#X}: no such counter in the guest's AMD PMU"
            ),
            GuestGp::RdpmcNotAllowed => f.write_str("RDPMC at CPL > 0 with CR4.PCE clear"),
        }
    }
}

impl core::error::Error for GuestGp {}

//! Register-level software models of PMUs: test instruments.
//!
//! * [`netburst`]: the NetBurst PMU (MSRs, #GP rules, counting, cascade,
//!   PMI, tagging, PEBS), driven through [`crate::access::MsrAccess`].
//! * [`archperf`]: Intel's architectural performance monitoring, versions 1
//!   to 5 (general-purpose and fixed counters, the IA32_PERF_GLOBAL_* MSRs,
//!   full-width writes, CMASK/INV/EDGE, overflow status, PMI with skid,
//!   freeze on PMI), driven through [`crate::access::MsrAccess`].
//! * [`amd`]: AMD's core performance counters (the legacy four,
//!   PerfCtrExtCore's six, PerfMonV2's global control and status), 48-bit
//!   wrap, PMI with skid and with late delivery, HostOnly/GuestOnly;
//!   reserved-bit writes ignored as the PPRs specify, driven through
//!   [`crate::access::MsrAccess`].
//! * [`itanium`]: the Itanium, Itanium 2 and Montecito PMU (PMC/PMD
//!   register file, counting with `plm`/`ism`/threshold, overflow freeze and
//!   interrupt, I-EAR, D-EAR, branch trace buffer). Real hardware does not
//!   fault on PMU register accesses; the model's default strict checking
//!   reports the accesses the hardware would silently absorb. Reached through
//!   its own `read_pmc`/`write_pmd`-style methods or, via
//!   [`itanium::MsrAdapter`], through `MsrAccess` with a harness-only address
//!   map (PMC n at n, PMD n at 100H + n).
//!
//! # Examples
//!
//! ```
//! use pmu::access::MsrAccess;
//! use pmu::model::netburst::{Config, Fault, GpReason, NetBurstModel};
//!
//! let mut m = NetBurstModel::new(Config::northwood());       // no Hyper-Threading
//! // A reserved ESCR bit raises #GP, as the hardware would, and changes nothing.
//! let e = m.write_msr(0x3A2, 1 << 31).unwrap_err();
//! assert_eq!(e.reason(), GpReason::ReservedBits { bits: 1 << 31 });
//! # let _: Fault = e;
//! ```

pub mod amd;
pub mod archperf;
pub mod itanium;
#[cfg(target_arch = "x86_64")]
pub mod lock;
pub mod netburst;

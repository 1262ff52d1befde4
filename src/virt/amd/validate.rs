//! A guest's accesses to its AMD PMU, answered as KVM answers them
//! (`arch/x86/kvm/svm/pmu.c`, `pmu.c`, `x86.c`, read at their 2024 and
//! 2026 revisions):
//!
//! | MSR | read | write |
//! |---|---|---|
//! | `PERF_LEGACY_CTLn` (C001_0000H + n), n < counters | as stored | bits 19, 21 and 36-63 dropped, no #GP (`amd_pmu_set_msr`: `data &= ~pmu->reserved_bits`) |
//! | `PERF_LEGACY_CTRn` (C001_0004H + n) | the counter | cut to 48 bits (`pmc_write_counter`) |
//! | `PERF_CTLn`/`PERF_CTRn` (C001_0200H + 2n, + 1), with PerfCtrExtCore | as the legacy pair: the same registers for n < 4 | likewise |
//! | a legacy or extended address of a counter the guest lacks | #GP | #GP (`get_gp_pmc_amd` finds none for an address `amd_is_valid_msr` accepts) |
//! | `PerfCntrGlobalStatus`, PerfMonV2 | the status | dropped ("Per PPR, Read-only MSR. Writes are ignored.") |
//! | `PerfCntrGlobalCtl`, PerfMonV2 | as stored | bits of no guest counter dropped (`data &= ~pmu->global_ctrl_mask`) |
//! | `PerfCntrGlobalStatusClr`, PerfMonV2 | 0 | clears those status bits |
//! | `PerfCntrGlobalStatusSet`, PerfMonV2 | 0 | sets those of the guest's counters (emulated since 2025, "the MSR is supposed to exist in all AMD v2 PMUs") |
//! | Intel's `IA32_PMC0`/`1`, `IA32_PERFEVTSEL0`/`1` | 0 | dropped (`x86.c`: the P6 MSRs of a PMU that does not have them) |
//! | Intel's other PMU MSRs, IBS, the uncore counters | #GP | #GP |
//! | `IA32_MISC_ENABLE`, `IA32_DEBUGCTL` | the VMM's | the VMM's |
//!
//! RDPMC: ECX below the guest's counter count (every bit of it: KVM no
//! longer strips bits 31:30 on AMD), else #GP; #GP at CPL > 0 with CR4.PCE
//! clear; the counter's 48 bits.
//!
//! Where the APM and KVM differ: a KVM guest's controls never hold
//! HostOnly or GuestOnly (KVM drops them as reserved, and runs a guest's
//! counters on the hardware with GuestOnly set); a guest of the hardware
//! keeps them. Followed: KVM's, with [`GuestPmu::hardware_ctl`] for the
//! hardware image. (KVM's 2026 nested-SVM work lets a guest that has SVM
//! keep them; the crate's guests have none.)

use crate::arch::amd::Counter;

use super::GuestGp;
use super::policy::GuestPmu;
use crate::virt::answer::{RdpmcAnswer, ReadAnswer, WriteAnswer};
use crate::virt::x86::{PmuMsr, classify};

/// A register of a guest's AMD PMU, as the answers name it (whichever of
/// its addresses the guest used).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum GuestReg {
    /// Counter n's control (`PERF_LEGACY_CTLn`, `PERF_CTLn`).
    Control(Counter),
    /// Counter n (`PERF_LEGACY_CTRn`, `PERF_CTRn`).
    Counter(Counter),
    /// `PerfCntrGlobalCtl`.
    GlobalCtl,
    /// `PerfCntrGlobalStatus`.
    GlobalStatus,
}

/// Which register of a counter an address names.
#[derive(Clone, Copy)]
enum Half {
    Control,
    Counter,
}

impl GuestPmu {
    /// The counter register `half` of counter `n` through an address the
    /// guest has (`extended`: C001_0200H's; the legacy ones always).
    const fn pair(&self, n: u8, half: Half, extended: bool) -> Option<GuestReg> {
        if extended && !self.extended() {
            return None;
        }
        match (self.counter(n), half) {
            (Some(c), Half::Control) => Some(GuestReg::Control(c)),
            (Some(c), Half::Counter) => Some(GuestReg::Counter(c)),
            (None, _) => None,
        }
    }

    /// The counter register `msr` names, if it names one (`Ok(None)`: not a
    /// counter register; `Err`: one the guest does not have).
    const fn counter_reg(&self, msr: u32) -> Result<Option<GuestReg>, GuestGp> {
        let reg = match classify(msr) {
            PmuMsr::LegacyCtl(n) => self.pair(n, Half::Control, false),
            PmuMsr::LegacyCtr(n) => self.pair(n, Half::Counter, false),
            PmuMsr::CoreCtl(n) => self.pair(n, Half::Control, true),
            PmuMsr::CoreCtr(n) => self.pair(n, Half::Counter, true),
            _ => return Ok(None),
        };
        match reg {
            Some(r) => Ok(Some(r)),
            None => Err(GuestGp::NoSuchMsr { msr }),
        }
    }

    /// The guest's WRMSR of `value` to `msr`: what it does, or the #GP it
    /// raises (nothing changes then). See the [module
    /// documentation](self).
    pub fn check_msr_write(&self, msr: u32, value: u64) -> Result<WriteAnswer<GuestReg>, GuestGp> {
        if let Some(reg) = self.counter_reg(msr)? {
            let value = match reg {
                GuestReg::Control(_) => value & self.ctl_writable(),
                _ => value & self.counter_mask(),
            };
            return Ok(WriteAnswer::Store { reg, value });
        }
        let counters = self.counters().bits();
        let v2 = self.perfmon_v2();
        Ok(match classify(msr) {
            PmuMsr::NotPmu | PmuMsr::MiscEnable | PmuMsr::DebugCtl => WriteAnswer::NotPmu,
            PmuMsr::AmdGlobalStatus if v2 => WriteAnswer::Drop,
            PmuMsr::AmdGlobalCtl if v2 => WriteAnswer::Store {
                reg: GuestReg::GlobalCtl,
                value: value & counters,
            },
            PmuMsr::AmdGlobalStatusClr if v2 => WriteAnswer::ClearStatus(value & counters),
            PmuMsr::AmdGlobalStatusSet if v2 => WriteAnswer::SetStatus(value & counters),
            PmuMsr::Pmc(n) | PmuMsr::EventSelect(n) if n < 2 => WriteAnswer::Drop,
            _ => return Err(GuestGp::NoSuchMsr { msr }),
        })
    }

    /// The guest's RDMSR of `msr`: what it reads, or the #GP it raises.
    /// See the [module documentation](self).
    pub fn check_msr_read(&self, msr: u32) -> Result<ReadAnswer<GuestReg>, GuestGp> {
        if let Some(reg) = self.counter_reg(msr)? {
            return Ok(ReadAnswer::Reg(reg));
        }
        let v2 = self.perfmon_v2();
        Ok(match classify(msr) {
            PmuMsr::NotPmu | PmuMsr::MiscEnable | PmuMsr::DebugCtl => ReadAnswer::NotPmu,
            PmuMsr::AmdGlobalStatus if v2 => ReadAnswer::Reg(GuestReg::GlobalStatus),
            PmuMsr::AmdGlobalCtl if v2 => ReadAnswer::Reg(GuestReg::GlobalCtl),
            PmuMsr::AmdGlobalStatusClr | PmuMsr::AmdGlobalStatusSet if v2 => ReadAnswer::Value(0),
            PmuMsr::Pmc(n) | PmuMsr::EventSelect(n) if n < 2 => ReadAnswer::Value(0),
            _ => return Err(GuestGp::NoSuchMsr { msr }),
        })
    }

    /// The guest's RDPMC with `ecx` at `cpl` with its CR4.PCE: the counter
    /// and its 48 bits, or the #GP (see the [module documentation](self)).
    pub fn check_rdpmc(
        &self,
        ecx: u32,
        cr4_pce: bool,
        cpl: u8,
    ) -> Result<RdpmcAnswer<Counter>, GuestGp> {
        let counter = u8::try_from(ecx).ok().and_then(|n| self.counter(n));
        let Some(counter) = counter else {
            return Err(GuestGp::RdpmcIndex { ecx });
        };
        if cpl > 0 && !cr4_pce {
            return Err(GuestGp::RdpmcNotAllowed);
        }
        Ok(RdpmcAnswer {
            counter,
            mask: self.counter_mask(),
        })
    }
}

#[cfg(test)]
mod tests;

//! A guest's accesses to its architectural PMU, answered as KVM answers
//! them.
//!
//! The rules, with the KVM code each follows (`arch/x86/kvm/pmu.c`,
//! `vmx/pmu_intel.c`, `x86.c`, read at their 2024 and 2026 revisions); the
//! masks are [`GuestPmu`]'s, computed from the policy as
//! `intel_pmu_refresh` computes them from the guest's CPUID:
//!
//! | MSR | read | write |
//! |---|---|---|
//! | `IA32_PMCn` (C1H + n), n < general | the counter | bits 31:0 sign-extended, cut to the width (`intel_pmu_set_msr`: `(s64)(s32)data`; `pmc_write_counter` masks) |
//! | `IA32_A_PMCn` (4C1H + n), with full-width writes | the counter | as is; a bit above the width is #GP (`intel_pmu_set_msr`) |
//! | `IA32_PERFEVTSELn` (186H + n), n < general | as written | #GP on bits 63:32 or 21 (AnyThread): `reserved_bits` 0xFFFF_FFFF_0020_0000 on every version; PC (19) taken |
//! | `IA32_PMC0`/`1`, `IA32_PERFEVTSEL0`/`1` of a counter the guest lacks | 0 | dropped (`x86.c`: the P6 MSRs of a PMU that does not have them) |
//! | `IA32_FIXED_CTRi` (309H + i), i < fixed | the counter | cut to the fixed width (`pmc_write_counter`) |
//! | `IA32_FIXED_CTR_CTRL`, version 2+ | as written | #GP unless only OS, USR and PMI of the guest's fixed counters (`fixed_ctr_ctrl_mask`: AnyThread refused) |
//! | `IA32_PERF_GLOBAL_CTRL`, version 2+ | as written | #GP on a bit of no guest counter (`kvm_valid_perf_global_ctrl`) |
//! | `IA32_PERF_GLOBAL_STATUS`, version 2+ | the status | #GP: read-only (`kvm_pmu_set_msr`) |
//! | `IA32_PERF_GLOBAL_OVF_CTRL`, version 2+ | 0 | #GP outside the counters, 62 and 63 (`global_status_mask`); else clears them |
//! | `IA32_PERF_GLOBAL_STATUS_SET`, `_INUSE` | #GP | #GP: not emulated (absent from `kvm_pmu_is_valid_msr`) |
//! | `IA32_PERF_CAPABILITIES` | the policy's, with PDCM; else #GP | #GP (`x86.c`: only the host may write it) |
//! | `IA32_MISC_ENABLE` | the VMM's, bits 7, 11, 12 the guest's PMU's | #GP if bit 11 or 12 changes (`MSR_IA32_MISC_ENABLE_PMU_RO_MASK`); else the VMM's (bit 7 kept) |
//! | `IA32_DEBUGCTL` | the VMM's | #GP with `FREEZE_PERFMON_ON_PMI`, `FREEZE_LBRS_ON_PMI` (not among KVM's supported bits without guest LBR) or `LBR` ([`check_lbr_msr`]); else the VMM's |
//! | the last branch records' (legacy and architectural) | #GP | #GP ([`check_lbr_msr`]: no guest LBR) |
//! | PEBS's and `IA32_DS_AREA` | #GP | #GP ([`check_pebs_msr`]: no guest PEBS) |
//! | AMD's `PERF_LEGACY_CTLn`/`CTRn` (C001_0000H-C001_0007H) | 0 | dropped (`x86.c`: the K7 MSRs of a PMU that does not have them) |
//! | AMD's other PMU MSRs | #GP | #GP |
//!
//! RDPMC (`intel_rdpmc_ecx_to_pmc`, `kvm_pmu_rdpmc`): ECX\[31:16\] is a
//! type, 0 (general) or 4000H (fixed, bit 30), ECX\[15:0\] the index, below
//! the guest's count of that type; anything else (the "fast" bit 31
//! included) is #GP, as is CPL > 0 with CR4.PCE clear. The value is the
//! counter ANDed with its width.
//!
//! # Where the SDM and KVM differ, and what is done
//!
//! The checks answer as KVM does; the architectural-PMU model
//! ([`crate::model::archperf`]) answers as the SDM, and the places where
//! they part are these:
//!
//! * AnyThread (`IA32_PERFEVTSELx[21]`, `FIXED_CTR_CTRL` bit 4i+2): the SDM
//!   has it on versions 3 and 4; KVM refuses it on every version (a guest
//!   would count its sibling's, another VM's or the host's, events):
//!   #GP.
//! * `IA32_FIXED_CTRi` bits above the width: the SDM says they "must be
//!   written as zeros" (the model raises #GP); KVM cuts the value to the
//!   width (`pmc_write_counter`): cut.
//! * `IA32_PERF_GLOBAL_STATUS_SET` and `_INUSE` exist from version 4 in
//!   the SDM; KVM emulates neither for any version: #GP. A guest of
//!   version 4 or 5 restores no status with them.
//! * The legacy counter MSRs of a counter the guest lacks (`IA32_PMC0`/`1`,
//!   `IA32_PERFEVTSEL0`/`1`, AMD's four K7 pairs): the hardware raises #GP;
//!   KVM reads 0 and drops writes (`kvm_get_msr_common`,
//!   `kvm_set_msr_common`), which is followed. (A proposed series of 2025
//!   would make them #GP.)
//! * An architectural event the guest's CPUID.0AH:EBX lists as
//!   unavailable: the SDM leaves counting it undefined (the model counts
//!   it); KVM through 2024 did not count it on a general counter
//!   (`intel_hw_event_available`), and dropped the check later, leaving
//!   the guest's CPUID to the VMM's event filter. The crate keeps the
//!   check, as the policy is that filter: such a counter counts nothing
//!   ([`GuestPmu::selects_unavailable`]); fixed counters always count
//!   (KVM: "Fixed counters are always available").
//! * `IA32_DEBUGCTL.LBR` (bit 0) of a guest without LBR: KVM drops the
//!   bit (and BTF) with a warning and takes the rest of the write
//!   (`vmx_set_msr`); the crate, which shows no guest LBR and has no answer
//!   that changes a value the VMM keeps, refuses the write: #GP. A guest
//!   that found no LBR in CPUID does not set it.
//! * RDPMC's ECX: current SDMs read bits 31:16 as a type, older ones bit
//!   30 as the fixed-counter select and bit 31 as a fast read; every ECX
//!   the two readings treat differently is #GP under KVM's (the model's
//!   choice 5 too).

use crate::arch::archperf::{Counter, PerfEvtSel};
use crate::register::register;
use crate::virt::Verdict;

use super::policy::GuestPmu;
use super::{GuestGp, check_lbr_msr, check_pebs_msr};
use crate::virt::answer::{RdpmcAnswer, ReadAnswer, WriteAnswer};
use crate::virt::x86::{PmuMsr, classify};

/// A register of a guest's architectural PMU, as the answers name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum GuestReg {
    /// A general or fixed counter's count (`IA32_PMCn`/`IA32_A_PMCn`,
    /// `IA32_FIXED_CTRi`).
    Counter(Counter),
    /// A general counter's `IA32_PERFEVTSELn`.
    EventSelect(Counter),
    /// `IA32_FIXED_CTR_CTRL`.
    FixedCtrCtrl,
    /// `IA32_PERF_GLOBAL_CTRL`.
    GlobalCtrl,
    /// `IA32_PERF_GLOBAL_STATUS`.
    GlobalStatus,
}

register! {
    /// `IA32_DEBUGCTL`'s performance-monitoring freeze (SDM Vol. 3B
    /// "Freezing LBR and Performance Counters on PMI"; Vol. 4 Table 2-2,
    /// 1D9H).
    #[derive(Clone, Copy)]
    struct DebugCtlFreeze(u64) {
        /// `FREEZE_PERFMON_ON_PMI`, bit 12.
        FREEZE_PERFMON_ON_PMI: 12 => freeze_perfmon_on_pmi, with_freeze_perfmon_on_pmi: bool;
    }
}

register! {
    /// RDPMC's ECX as architectural perfmon reads it (SDM Vol. 2B RDPMC,
    /// current editions; KVM's `INTEL_RDPMC_TYPE_MASK` and `_INDEX_MASK`):
    /// a type and an index.
    #[derive(Clone, Copy)]
    struct RdpmcEcx(u32) {
        /// The counter's index, bits 15:0.
        INDEX: 0..=15 => index, with_index: u16;
        /// The counter type, bits 31:16: 0 general, 4000H fixed.
        TYPE: 16..=31 => kind, with_kind: u16;
    }
}

/// RDPMC's type of the fixed counters (ECX bit 30: 4000H in bits 31:16).
const RDPMC_FIXED: u16 = 0x4000;

/// `IA32_MISC_ENABLE` bits a guest may not change (KVM's
/// `MSR_IA32_MISC_ENABLE_PMU_RO_MASK`: BTS and PEBS unavailable).
const MISC_ENABLE_RO: u64 = crate::detect::MiscEnable::from_bits(0)
    .with_bts_unavailable(true)
    .with_pebs_unavailable(true)
    .bits();

/// Bits 31:0 sign-extended to 64 (a legacy counter write, SDM 20.2.6).
const fn sign_extend_32(value: u64) -> u64 {
    value as u32 as i32 as i64 as u64
}

impl GuestPmu {
    /// The guest's general counter `n`, if it has it.
    const fn general(&self, n: u8) -> Option<Counter> {
        if n < self.policy.general {
            Counter::general(n)
        } else {
            None
        }
    }

    /// The guest's fixed counter `i`, if it has it.
    const fn fixed(&self, i: u8) -> Option<Counter> {
        if i < self.policy.fixed {
            Counter::fixed(i)
        } else {
            None
        }
    }

    /// The guest's WRMSR of `value` to `msr`: what it does, or the #GP it
    /// raises (nothing changes then). See the [module
    /// documentation](self) for the rules.
    pub fn check_msr_write(&self, msr: u32, value: u64) -> Result<WriteAnswer<GuestReg>, GuestGp> {
        if let Verdict::InjectGp(gp) = check_lbr_msr(msr, Some(value)) {
            return Err(gp);
        }
        let no_such = Err(GuestGp::NoSuchMsr { msr });
        let reserved = |mask: u64| {
            if value & mask != 0 {
                Err(GuestGp::Reserved {
                    msr,
                    bits: value & mask,
                })
            } else {
                Ok(())
            }
        };
        let store = |reg: GuestReg, value: u64| Ok(WriteAnswer::Store { reg, value });
        let global = self.has_global_msrs();
        match classify(msr) {
            PmuMsr::NotPmu => Ok(WriteAnswer::NotPmu),
            PmuMsr::Pmc(n) => match self.general(n) {
                Some(c) => store(
                    GuestReg::Counter(c),
                    sign_extend_32(value) & self.general_mask,
                ),
                None if n < 2 => Ok(WriteAnswer::Drop),
                None => no_such,
            },
            PmuMsr::FullWidthPmc(n) => match self.general(n) {
                Some(c) if self.policy.full_width_writes => {
                    if value & !self.general_mask != 0 {
                        Err(GuestGp::OutOfWidth { msr })
                    } else {
                        store(GuestReg::Counter(c), value)
                    }
                }
                _ => no_such,
            },
            PmuMsr::EventSelect(n) => match self.general(n) {
                Some(c) => {
                    reserved(self.evtsel_reserved)?;
                    store(GuestReg::EventSelect(c), value)
                }
                None if n < 2 => Ok(WriteAnswer::Drop),
                None => no_such,
            },
            // KVM cuts a fixed counter's value to its width where the SDM
            // makes the excess bits reserved (see the module documentation).
            PmuMsr::FixedCounter(i) => match self.fixed(i) {
                Some(c) => store(GuestReg::Counter(c), value & self.fixed_mask),
                None => no_such,
            },
            PmuMsr::FixedCtrCtrl if global => {
                reserved(self.fixed_ctrl_reserved)?;
                store(GuestReg::FixedCtrCtrl, value)
            }
            PmuMsr::GlobalCtrl if global => {
                reserved(self.global_ctrl_reserved)?;
                store(GuestReg::GlobalCtrl, value)
            }
            PmuMsr::GlobalStatus if global => Err(GuestGp::ReadOnlyMsr { msr }),
            PmuMsr::GlobalOvfCtrl if global => {
                reserved(self.global_status_reserved)?;
                Ok(WriteAnswer::ClearStatus(value))
            }
            PmuMsr::PerfCapabilities if self.pdcm() => Err(GuestGp::ReadOnlyMsr { msr }),
            PmuMsr::MiscEnable => {
                if (value ^ self.misc_enable_bits()) & MISC_ENABLE_RO != 0 {
                    Err(GuestGp::ReadOnly { msr })
                } else {
                    Ok(WriteAnswer::NotPmu)
                }
            }
            PmuMsr::DebugCtl => {
                let freeze = DebugCtlFreeze(0).with_freeze_perfmon_on_pmi(true).bits();
                reserved(freeze)?;
                Ok(WriteAnswer::NotPmu)
            }
            PmuMsr::Pebs => match check_pebs_msr(msr, true) {
                Verdict::InjectGp(gp) => Err(gp),
                _ => no_such,
            },
            PmuMsr::LegacyCtl(_) | PmuMsr::LegacyCtr(_) => Ok(WriteAnswer::Drop),
            PmuMsr::FixedCtrCtrl
            | PmuMsr::GlobalCtrl
            | PmuMsr::GlobalStatus
            | PmuMsr::GlobalOvfCtrl
            | PmuMsr::GlobalStatusSet
            | PmuMsr::GlobalInUse
            | PmuMsr::PerfCapabilities
            | PmuMsr::CoreCtl(_)
            | PmuMsr::CoreCtr(_)
            | PmuMsr::AmdGlobalStatus
            | PmuMsr::AmdGlobalCtl
            | PmuMsr::AmdGlobalStatusClr
            | PmuMsr::AmdGlobalStatusSet
            | PmuMsr::AmdOther => no_such,
        }
    }

    /// The guest's RDMSR of `msr`: what it reads, or the #GP it raises.
    /// See the [module documentation](self) for the rules.
    pub fn check_msr_read(&self, msr: u32) -> Result<ReadAnswer<GuestReg>, GuestGp> {
        if let Verdict::InjectGp(gp) = check_lbr_msr(msr, None) {
            return Err(gp);
        }
        let no_such = Err(GuestGp::NoSuchMsr { msr });
        let global = self.has_global_msrs();
        let reg = |r: GuestReg| Ok(ReadAnswer::Reg(r));
        match classify(msr) {
            PmuMsr::NotPmu | PmuMsr::DebugCtl => Ok(ReadAnswer::NotPmu),
            PmuMsr::Pmc(n) => match self.general(n) {
                Some(c) => reg(GuestReg::Counter(c)),
                None if n < 2 => Ok(ReadAnswer::Value(0)),
                None => no_such,
            },
            PmuMsr::FullWidthPmc(n) => match self.general(n) {
                Some(c) if self.policy.full_width_writes => reg(GuestReg::Counter(c)),
                _ => no_such,
            },
            PmuMsr::EventSelect(n) => match self.general(n) {
                Some(c) => reg(GuestReg::EventSelect(c)),
                None if n < 2 => Ok(ReadAnswer::Value(0)),
                None => no_such,
            },
            PmuMsr::FixedCounter(i) => match self.fixed(i) {
                Some(c) => reg(GuestReg::Counter(c)),
                None => no_such,
            },
            PmuMsr::FixedCtrCtrl if global => reg(GuestReg::FixedCtrCtrl),
            PmuMsr::GlobalCtrl if global => reg(GuestReg::GlobalCtrl),
            PmuMsr::GlobalStatus if global => reg(GuestReg::GlobalStatus),
            PmuMsr::GlobalOvfCtrl if global => Ok(ReadAnswer::Value(0)),
            PmuMsr::PerfCapabilities if self.pdcm() => {
                Ok(ReadAnswer::Value(self.perf_capabilities()))
            }
            PmuMsr::MiscEnable => Ok(ReadAnswer::Merge {
                mask: super::MISC_ENABLE_PMU_BITS,
                bits: self.misc_enable_bits(),
            }),
            PmuMsr::Pebs => match check_pebs_msr(msr, false) {
                Verdict::InjectGp(gp) => Err(gp),
                _ => no_such,
            },
            PmuMsr::LegacyCtl(_) | PmuMsr::LegacyCtr(_) => Ok(ReadAnswer::Value(0)),
            PmuMsr::FixedCtrCtrl
            | PmuMsr::GlobalCtrl
            | PmuMsr::GlobalStatus
            | PmuMsr::GlobalOvfCtrl
            | PmuMsr::GlobalStatusSet
            | PmuMsr::GlobalInUse
            | PmuMsr::PerfCapabilities
            | PmuMsr::CoreCtl(_)
            | PmuMsr::CoreCtr(_)
            | PmuMsr::AmdGlobalStatus
            | PmuMsr::AmdGlobalCtl
            | PmuMsr::AmdGlobalStatusClr
            | PmuMsr::AmdGlobalStatusSet
            | PmuMsr::AmdOther => no_such,
        }
    }

    /// The guest's RDPMC with `ecx` at `cpl` with its CR4.PCE: the counter
    /// and its width's mask, or the #GP (see the [module
    /// documentation](self)). The guest runs in protected mode (a 64-bit
    /// guest; KVM's check also needs CR0.PE).
    pub fn check_rdpmc(
        &self,
        ecx: u32,
        cr4_pce: bool,
        cpl: u8,
    ) -> Result<RdpmcAnswer<Counter>, GuestGp> {
        let e = RdpmcEcx(ecx);
        let index = e.index();
        let n = u8::try_from(index).ok();
        let counter = match (e.kind(), n) {
            (0, Some(n)) => self.general(n),
            (RDPMC_FIXED, Some(i)) => self.fixed(i),
            _ => None,
        };
        let Some(counter) = counter else {
            return Err(GuestGp::RdpmcIndex { ecx });
        };
        if cpl > 0 && !cr4_pce {
            return Err(GuestGp::RdpmcNotAllowed);
        }
        Ok(RdpmcAnswer {
            counter,
            mask: self.width_mask(counter),
        })
    }

    /// Whether a general counter's event select image `value` selects an
    /// event the guest may not count ([`GuestPmu::selects_unavailable`] of
    /// its event and unit mask).
    pub fn counts_nothing(&self, value: u64) -> bool {
        PerfEvtSel::from_bits(value & PerfEvtSel::DEFINED)
            .is_some_and(|v| self.selects_unavailable(v))
    }
}

#[cfg(test)]
mod tests;

//! A second rendering of KVM's handling of an AMD guest's PMU MSRs, for
//! the fuzz tests to hold the checks against: written in KVM's terms
//! (`amd_pmu_refresh`'s literal masks, `get_gp_pmc_amd`,
//! `amd_is_valid_msr`, `kvm_pmu_get_msr`/`kvm_pmu_set_msr` and the
//! `x86.c` cases around them), not with the crate's layouts or its MSR
//! map. It counts nothing.

use crate::virt::amd::{Generation, GuestPolicy};
use crate::virt::tests::fuzz::Kvm;

const MSR_K7_EVNTSEL0: u32 = 0xC001_0000;
const MSR_K7_EVNTSEL3: u32 = 0xC001_0003;
const MSR_K7_PERFCTR0: u32 = 0xC001_0004;
const MSR_K7_PERFCTR3: u32 = 0xC001_0007;
const MSR_F15H_PERF_CTL0: u32 = 0xC001_0200;
const MSR_F15H_PERF_CTR5: u32 = 0xC001_020B;
const GLOBAL_STATUS: u32 = 0xC000_0300;
const GLOBAL_CTL: u32 = 0xC000_0301;
const GLOBAL_STATUS_CLR: u32 = 0xC000_0302;
const GLOBAL_STATUS_SET: u32 = 0xC000_0303;

/// An AMD guest's PMU as KVM holds it.
pub(super) struct AmdKvm {
    version: u32,
    nr_gp: u32,
    perfctr_core: bool,
    reserved_bits: u64,
    global_ctrl_mask: u64,
    global_status_mask: u64,
    counter: [u64; 6],
    eventsel: [u64; 6],
    global_ctrl: u64,
    global_status: u64,
}

#[derive(PartialEq)]
enum Type {
    Counter,
    Eventsel,
}

impl AmdKvm {
    /// `amd_pmu_refresh` for the CPUID the policy gives, the PMU reset.
    pub(super) fn refresh(p: &GuestPolicy) -> AmdKvm {
        let (version, nr_gp, perfctr_core) = match p.generation {
            Generation::PerfMonV2 { counters } => (2, u32::from(counters), true),
            Generation::PerfCtrExtCore => (1, 6, true),
            Generation::Legacy => (1, 4, false),
        };
        let mask = if version > 1 {
            !((1u64 << nr_gp) - 1)
        } else {
            !0
        };
        AmdKvm {
            version,
            nr_gp,
            perfctr_core,
            reserved_bits: 0xFFFF_FFF0_0028_0000,
            global_ctrl_mask: mask,
            global_status_mask: mask,
            counter: [0; 6],
            eventsel: [0; 6],
            global_ctrl: if version > 1 { (1 << nr_gp) - 1 } else { 0 },
            global_status: 0,
        }
    }

    /// `get_gp_pmc_amd`.
    fn gp_pmc(&self, msr: u32, t: Type) -> Option<usize> {
        let idx = match msr {
            MSR_F15H_PERF_CTL0..=MSR_F15H_PERF_CTR5 => {
                if !self.perfctr_core {
                    return None;
                }
                let even = msr & 1 == 0;
                if even != (t == Type::Eventsel) {
                    return None;
                }
                (msr - MSR_F15H_PERF_CTL0) / 2
            }
            MSR_K7_EVNTSEL0..=MSR_K7_EVNTSEL3 if t == Type::Eventsel => msr - MSR_K7_EVNTSEL0,
            MSR_K7_PERFCTR0..=MSR_K7_PERFCTR3 if t == Type::Counter => msr - MSR_K7_PERFCTR0,
            _ => return None,
        };
        (idx < self.nr_gp).then_some(idx as usize)
    }

    /// `kvm_pmu_is_valid_msr` with `amd_is_valid_msr`.
    fn is_valid_msr(&self, msr: u32) -> bool {
        if self.gp_pmc(msr, Type::Counter).is_some() || self.gp_pmc(msr, Type::Eventsel).is_some() {
            return true;
        }
        match msr {
            MSR_K7_EVNTSEL0..=MSR_K7_PERFCTR3 => self.version > 0,
            MSR_F15H_PERF_CTL0..=MSR_F15H_PERF_CTR5 => self.perfctr_core,
            GLOBAL_STATUS..=GLOBAL_STATUS_SET => self.version > 1,
            _ => false,
        }
    }

    /// The guest's RDMSR, as `kvm_get_msr_common` routes it.
    pub(super) fn rdmsr(&self, msr: u32) -> Kvm {
        let p6 = matches!(msr, 0xC1 | 0xC2 | 0x186 | 0x187);
        if self.is_valid_msr(msr) {
            return match msr {
                GLOBAL_STATUS => Kvm::Pmu(self.global_status),
                GLOBAL_CTL => Kvm::Pmu(self.global_ctrl),
                GLOBAL_STATUS_CLR | GLOBAL_STATUS_SET => Kvm::Pmu(0),
                _ => {
                    if let Some(i) = self.gp_pmc(msr, Type::Counter) {
                        Kvm::Pmu(self.counter[i])
                    } else if let Some(i) = self.gp_pmc(msr, Type::Eventsel) {
                        Kvm::Pmu(self.eventsel[i])
                    } else {
                        Kvm::Gp
                    }
                }
            };
        }
        if p6 {
            Kvm::Pmu(0)
        } else if matches!(msr, 0x1A0 | 0x1D9) || !is_pmu_range(msr) {
            Kvm::Elsewhere
        } else {
            Kvm::Gp
        }
    }

    /// The guest's WRMSR, as `kvm_set_msr_common` routes it.
    pub(super) fn wrmsr(&mut self, msr: u32, data: u64) -> Kvm {
        let p6 = matches!(msr, 0xC1 | 0xC2 | 0x186 | 0x187);
        if self.is_valid_msr(msr) {
            return if self.set_msr(msr, data) {
                Kvm::Pmu(0)
            } else {
                Kvm::Gp
            };
        }
        if p6 {
            Kvm::Pmu(0)
        } else if matches!(msr, 0x1A0 | 0x1D9) || !is_pmu_range(msr) {
            Kvm::Elsewhere
        } else {
            Kvm::Gp
        }
    }

    /// `kvm_pmu_set_msr` and `amd_pmu_set_msr`: `false` is a #GP.
    fn set_msr(&mut self, msr: u32, mut data: u64) -> bool {
        match msr {
            // "Per PPR, Read-only MSR. Writes are ignored."
            GLOBAL_STATUS => {}
            GLOBAL_CTL => {
                data &= !self.global_ctrl_mask;
                self.global_ctrl = data;
            }
            GLOBAL_STATUS_CLR => self.global_status &= !data,
            GLOBAL_STATUS_SET => self.global_status |= data & !self.global_status_mask,
            _ => {
                if let Some(i) = self.gp_pmc(msr, Type::Counter) {
                    self.counter[i] = data & ((1 << 48) - 1);
                } else if let Some(i) = self.gp_pmc(msr, Type::Eventsel) {
                    self.eventsel[i] = data & !self.reserved_bits;
                } else {
                    return false;
                }
            }
        }
        true
    }

    /// `kvm_pmu_rdpmc` (with `amd_check_rdpmc_early`).
    pub(super) fn rdpmc(&self, idx: u32, cr4_pce: bool, cpl: u8) -> Option<u64> {
        if idx >= self.nr_gp {
            return None;
        }
        if !cr4_pce && cpl != 0 {
            return None;
        }
        Some(self.counter[idx as usize] & ((1 << 48) - 1))
    }
}

/// Whether an MSR KVM does not handle is one the fuzz treats as a PMU's
/// (#GP there; the VMM's elsewhere).
fn is_pmu_range(msr: u32) -> bool {
    crate::virt::x86::PMU_MSR_RANGES
        .iter()
        .any(|r| r.contains(&msr))
}

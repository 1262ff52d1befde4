//! A trap-and-emulate architectural PMU for a guest (feature `model`), on
//! any host: the register-level model ([`crate::model::archperf`]) of the
//! processor the guest's [`GuestPmu`] describes holds its registers and
//! counts what the VMM feeds it; every access is answered by the same
//! [`GuestPmu::check_msr_write`], [`GuestPmu::check_msr_read`] and
//! [`GuestPmu::check_rdpmc`] as a VMM that runs the guest's counters on
//! the hardware would use, and a PMI the model raises is the guest's
//! [`VirtualLvt`]'s (masked on delivery, as Intel's APIC does).
//!
//! * Counts are exact: each event the VMM feeds ([`VirtualPmu::feed`],
//!   [`VirtualPmu::retire`] for an instruction that retired in the guest,
//!   an emulated one included) counts on each of the guest's counters
//!   that selects it, at the guest's privilege level, by the model's rules
//!   (event select and unit mask, USR/OS, CMASK/INV/EDGE, the enables of
//!   `IA32_PERF_GLOBAL_CTRL`); a general counter whose event the guest's
//!   CPUID lists as unavailable counts nothing (its `EN` is kept clear in
//!   the model, the guest reads its own image).
//! * A PMI is raised in the clock of the wrap (no skid: the emulated PMU
//!   is exact) and delivered at the next entry at which the guest's LVT
//!   entry is unmasked ([`VirtualPmu::pmi_to_inject`]).
//! * A vCPU switch takes nothing off the hardware: the value is the
//!   vCPU's PMU, and a PMI owed to it (raised on the last event before the
//!   exit, or while its entry was masked) waits in its [`VirtualLvt`] for
//!   its next entry, on whichever CPU (see the [parent
//!   documentation](super#a-vcpu-moving-between-cpus)).

use super::validate::GuestReg;
use super::{GuestGp, GuestPmu, ReadAnswer, WriteAnswer};
use crate::access::MsrAccess;
use crate::apic::{LvtPerfCounter, PmiDelivery};
use crate::arch::archperf::{
    Counter, IA32_A_PMC0, IA32_FIXED_CTR_CTRL, IA32_FIXED_CTR0, IA32_PERF_GLOBAL_CTRL,
    IA32_PERF_GLOBAL_OVF_CTRL, IA32_PERF_GLOBAL_STATUS, IA32_PERFEVTSEL0, MAX_GENERAL, PerfEvtSel,
};
use crate::model::archperf::{ArchPerfModel, Config, Event, PebsConfig, Retirement};
use crate::virt::VirtualLvt;

/// A guest's emulated architectural PMU.
#[derive(Clone, Debug)]
pub struct VirtualPmu {
    pmu: GuestPmu,
    model: ArchPerfModel,
    /// The guest's images of its event selects (the model's have `EN`
    /// clear where the event is unavailable to the guest).
    evtsel: [u64; MAX_GENERAL as usize],
    lvt: VirtualLvt,
}

/// The model of the processor `pmu` describes: its version, counters,
/// widths and EBX vector; no PEBS; full-width writes in the model (the
/// guest's are checked before), so every counter value can be stored.
const fn config(pmu: &GuestPmu) -> Config {
    let p = pmu.policy();
    let leaf = pmu.leaf_0a();
    Config {
        version: p.version,
        gp_counters: p.general,
        gp_width: p.general_width,
        fixed_counters: p.fixed,
        fixed_width: if p.fixed > 0 { p.fixed_width } else { 48 },
        unavailable: p.unavailable as u32,
        ebx_length: leaf.vector_length(),
        fixed_bitmap: 0,
        full_width_writes: true,
        pebs: PebsConfig::NONE,
        ..Config::v1()
    }
}

/// The model's MSR that holds `reg`.
const fn model_msr(reg: GuestReg) -> u32 {
    match reg {
        GuestReg::Counter(c) if c.is_fixed() => IA32_FIXED_CTR0 + c.number() as u32,
        GuestReg::Counter(c) => IA32_A_PMC0 + c.number() as u32,
        GuestReg::EventSelect(c) => IA32_PERFEVTSEL0 + c.number() as u32,
        GuestReg::FixedCtrCtrl => IA32_FIXED_CTR_CTRL,
        GuestReg::GlobalCtrl => IA32_PERF_GLOBAL_CTRL,
        GuestReg::GlobalStatus => IA32_PERF_GLOBAL_STATUS,
    }
}

impl VirtualPmu {
    /// The guest's PMU after reset: counters, event selects and fixed
    /// control 0, `IA32_PERF_GLOBAL_CTRL` with every general counter's
    /// enable set (KVM's `kvm_pmu_refresh`, the SDM's RESET value), the
    /// LVT entry masked.
    pub const fn new(pmu: GuestPmu) -> VirtualPmu {
        VirtualPmu {
            model: ArchPerfModel::new(config(&pmu)),
            pmu,
            evtsel: [0; MAX_GENERAL as usize],
            lvt: VirtualLvt::new(),
        }
    }

    /// The guest's PMU.
    pub const fn pmu(&self) -> &GuestPmu {
        &self.pmu
    }

    /// The guest's WRMSR (`Ok(false)`: not its PMU's, the VMM's). A
    /// refused write changes nothing.
    pub fn wrmsr(&mut self, msr: u32, value: u64) -> Result<bool, GuestGp> {
        let answer = self.pmu.check_msr_write(msr, value)?;
        let (model_msr, value) = match answer {
            WriteAnswer::NotPmu => return Ok(false),
            WriteAnswer::Drop | WriteAnswer::SetStatus(_) => return Ok(true),
            WriteAnswer::ClearStatus(bits) => (IA32_PERF_GLOBAL_OVF_CTRL, bits),
            WriteAnswer::Store {
                reg: GuestReg::EventSelect(c),
                value,
            } => {
                self.evtsel[usize::from(c.number())] = value;
                let counts = !self.pmu.counts_nothing(value);
                let image = PerfEvtSel::from_bits(value)
                    .map_or(0, |v| v.with_enable(v.enable() && counts).bits());
                (model_msr(GuestReg::EventSelect(c)), image)
            }
            WriteAnswer::Store { reg, value } => (model_msr(reg), value),
        };
        let written = self.model.write_msr(model_msr, value);
        debug_assert!(written.is_ok(), "the checks applied {msr:#x} {value:#x}");
        written
            .map(|()| true)
            .map_err(|_| GuestGp::NoSuchMsr { msr })
    }

    /// The guest's RDMSR (`Ok(None)`: not its PMU's; `IA32_MISC_ENABLE`
    /// answers its performance-monitoring bits, bits 7, 11 and 12, which
    /// the VMM merges into its own value).
    pub fn rdmsr(&mut self, msr: u32) -> Result<Option<u64>, GuestGp> {
        Ok(Some(match self.pmu.check_msr_read(msr)? {
            ReadAnswer::NotPmu => return Ok(None),
            ReadAnswer::Value(v) | ReadAnswer::Merge { bits: v, .. } => v,
            ReadAnswer::Reg(GuestReg::EventSelect(c)) => self.evtsel[usize::from(c.number())],
            ReadAnswer::Reg(reg) => self.read(reg),
        }))
    }

    /// The model's value of `reg` (a counter cut to its width).
    fn read(&mut self, reg: GuestReg) -> u64 {
        let v = self.model.read_msr(model_msr(reg));
        debug_assert!(v.is_ok(), "the checks read {reg:?}");
        let v = v.unwrap_or(0);
        match reg {
            GuestReg::Counter(c) => v & self.pmu.width_mask(c),
            _ => v,
        }
    }

    /// The guest's RDPMC at `cpl` with its CR4.PCE.
    pub fn rdpmc(&mut self, ecx: u32, cr4_pce: bool, cpl: u8) -> Result<u64, GuestGp> {
        let a = self.pmu.check_rdpmc(ecx, cr4_pce, cpl)?;
        Ok(self.read(GuestReg::Counter(a.counter)) & a.mask)
    }

    /// The guest caused `event` (`event.count` occurrences, one per clock,
    /// at its privilege level in the guest): it counts where the guest's
    /// counters select it; a PMI it raises waits for the next entry.
    pub fn feed(&mut self, event: Event) {
        self.model.inject(event);
        self.collect();
    }

    /// An instruction retired in the guest (single-stepped, or emulated
    /// by the VMM, as KVM counts the instructions it emulates): instructions
    /// retired, and branches retired for a branch.
    pub fn retire(&mut self, r: &Retirement) {
        self.model.retire(r);
        self.collect();
    }

    /// The model's PMI, if it raised one, onto the guest's LVT.
    fn collect(&mut self) {
        if self.model.take_pmi() {
            self.lvt.raise();
        }
    }

    /// The guest writes its local APIC's LVT performance-counter entry.
    pub fn write_lvt(&mut self, entry: LvtPerfCounter) {
        self.lvt.write(entry);
    }

    /// The entry as the guest reads it (with the mask bit a delivery set).
    pub const fn lvt(&self) -> LvtPerfCounter {
        self.lvt.entry()
    }

    /// At guest entry: the PMI to inject, if one is pending and the entry
    /// is unmasked; delivering it masks the entry until the guest's
    /// handler unmasks it.
    pub fn pmi_to_inject(&mut self) -> Option<PmiDelivery> {
        self.lvt.deliver()
    }

    /// Whether a PMI waits for delivery.
    pub const fn pmi_pending(&self) -> bool {
        self.lvt.pending()
    }

    /// PMIs injected so far.
    pub const fn injected(&self) -> u64 {
        self.lvt.injected()
    }

    /// The guest's counter `c` (a VMM's diagnostics; 0 for a counter it
    /// does not have).
    pub fn counter(&self, c: Counter) -> u64 {
        if !self.pmu.counters().contains(c) {
            0
        } else if c.is_fixed() {
            self.model.fixed(usize::from(c.number()))
        } else {
            self.model.counter(usize::from(c.number()))
        }
    }

    /// The model behind the PMU (for a VMM's diagnostics).
    pub const fn model(&self) -> &ArchPerfModel {
        &self.model
    }
}

#[cfg(test)]
mod tests;

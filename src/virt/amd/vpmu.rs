//! A trap-and-emulate AMD core PMU for a guest (feature `model`), on any
//! host: the register-level model ([`crate::model::amd`]) of the PMU the
//! guest's [`GuestPmu`] describes holds its registers and counts what the
//! VMM feeds it; every access is answered by [`GuestPmu::check_msr_write`],
//! [`GuestPmu::check_msr_read`] and [`GuestPmu::check_rdpmc`], and a PMI
//! the model raises is the guest's [`VirtualLvt::amd`] entry's (not masked
//! by the delivery, as AMD's APIC does not mask it).
//!
//! Counts are exact (each fed event counts on each counter that selects
//! it: 12-bit event select and unit mask, USR/OS, CntMask/INV/Edge, `EN`
//! and, with PerfMonV2, `PerfCntrGlobalCtl`); a PMI rises in the clock of
//! the wrap and waits in the guest's [`VirtualLvt`] for its next entry, on
//! whichever CPU (see the [architectural PMU's
//! documentation](crate::virt::archperf#a-vcpu-moving-between-cpus)).

use super::validate::GuestReg;
use super::{GuestGp, GuestPmu, ReadAnswer, WriteAnswer};
use crate::access::MsrAccess;
use crate::apic::{LvtPerfCounter, PmiDelivery};
use crate::arch::amd::{
    Counter, PERF_CNTR_GLOBAL_CTL, PERF_CNTR_GLOBAL_STATUS, PERF_CNTR_GLOBAL_STATUS_CLR,
    PERF_CNTR_GLOBAL_STATUS_SET,
};
use crate::model::amd::{AmdModel, Config, Event};
use crate::model::archperf::Retirement;
use crate::virt::VirtualLvt;

use super::policy::Generation;

/// AMD's retired-instructions event (C0H) and retired branch instructions
/// (C2H), the ones an instruction the VMM reports counts as (Linux's
/// `amd_*_perfmon_event_map`; kvm-unit-tests' `amd_gp_events`).
pub const RETIRED_INSTRUCTIONS: u16 = 0xC0;
/// See [`RETIRED_INSTRUCTIONS`].
pub const RETIRED_BRANCHES: u16 = 0xC2;

/// A guest's emulated AMD PMU.
#[derive(Clone, Debug)]
pub struct VirtualPmu {
    pmu: GuestPmu,
    model: AmdModel,
    lvt: VirtualLvt,
}

/// The model of the PMU `pmu` describes (a Zen 4 by identification).
const fn config(pmu: &GuestPmu) -> Config {
    let (perf_ctr_ext_core, perfmon_v2, v2_counters) = match pmu.policy().generation {
        Generation::Legacy => (false, false, 0),
        Generation::PerfCtrExtCore => (true, false, 0),
        Generation::PerfMonV2 { counters } => (true, true, counters),
    };
    Config {
        perf_ctr_ext_core,
        perfmon_v2,
        v2_counters,
        ..Config::zen4()
    }
}

impl VirtualPmu {
    /// The guest's PMU after reset: controls and counters 0, with
    /// PerfMonV2 `PerfCntrGlobalCtl` with every counter's enable set (KVM's
    /// `kvm_pmu_refresh`), the LVT entry masked.
    pub const fn new(pmu: GuestPmu) -> VirtualPmu {
        VirtualPmu {
            model: AmdModel::new(config(&pmu)),
            pmu,
            lvt: VirtualLvt::amd(),
        }
    }

    /// The guest's PMU.
    pub const fn pmu(&self) -> &GuestPmu {
        &self.pmu
    }

    /// The model's MSR that holds `reg` (the extended address where the
    /// guest has it).
    const fn model_msr(&self, reg: GuestReg) -> u32 {
        let ext = self.pmu.extended();
        match reg {
            GuestReg::Control(c) => c.ctl(ext),
            GuestReg::Counter(c) => c.ctr(ext),
            GuestReg::GlobalCtl => PERF_CNTR_GLOBAL_CTL,
            GuestReg::GlobalStatus => PERF_CNTR_GLOBAL_STATUS,
        }
    }

    /// The guest's WRMSR (`Ok(false)`: not its PMU's, the VMM's). A
    /// refused write changes nothing.
    pub fn wrmsr(&mut self, msr: u32, value: u64) -> Result<bool, GuestGp> {
        let (to, value) = match self.pmu.check_msr_write(msr, value)? {
            WriteAnswer::NotPmu => return Ok(false),
            WriteAnswer::Drop => return Ok(true),
            WriteAnswer::Store { reg, value } => (self.model_msr(reg), value),
            WriteAnswer::ClearStatus(bits) => (PERF_CNTR_GLOBAL_STATUS_CLR, bits),
            WriteAnswer::SetStatus(bits) => (PERF_CNTR_GLOBAL_STATUS_SET, bits),
        };
        let written = self.model.write_msr(to, value);
        debug_assert!(written.is_ok(), "the checks applied {msr:#x} {value:#x}");
        written
            .map(|()| true)
            .map_err(|_| GuestGp::NoSuchMsr { msr })
    }

    /// The guest's RDMSR (`Ok(None)`: not its PMU's).
    pub fn rdmsr(&mut self, msr: u32) -> Result<Option<u64>, GuestGp> {
        Ok(Some(match self.pmu.check_msr_read(msr)? {
            ReadAnswer::NotPmu => return Ok(None),
            ReadAnswer::Value(v) | ReadAnswer::Merge { bits: v, .. } => v,
            ReadAnswer::Reg(reg) => self.read(reg),
        }))
    }

    /// The model's value of `reg`.
    fn read(&mut self, reg: GuestReg) -> u64 {
        let v = self.model.read_msr(self.model_msr(reg));
        debug_assert!(v.is_ok(), "the checks read {reg:?}");
        v.unwrap_or(0)
    }

    /// The guest's RDPMC at `cpl` with its CR4.PCE.
    pub fn rdpmc(&mut self, ecx: u32, cr4_pce: bool, cpl: u8) -> Result<u64, GuestGp> {
        let a = self.pmu.check_rdpmc(ecx, cr4_pce, cpl)?;
        Ok(self.read(GuestReg::Counter(a.counter)) & a.mask)
    }

    /// The guest caused `event` (`event.count` occurrences, one per
    /// clock): it counts where the guest's counters select it; a PMI it
    /// raises waits for the next entry.
    pub fn feed(&mut self, event: Event) {
        self.model.inject(event);
        self.collect();
    }

    /// An instruction retired in the guest (single-stepped, or emulated by
    /// the VMM): one clock with a retired instruction ([`RETIRED_INSTRUCTIONS`])
    /// and, for a branch, a retired branch ([`RETIRED_BRANCHES`]), at its
    /// privilege level.
    pub fn retire(&mut self, r: &Retirement) {
        let at = |select| Event::new(select, 0, 1).at(r.privilege);
        let instr = at(RETIRED_INSTRUCTIONS);
        if r.branch.is_some() {
            self.model.cycle(&[instr, at(RETIRED_BRANCHES)]);
        } else {
            self.model.cycle(&[instr]);
        }
        self.collect();
    }

    /// The model's PMIs, if it raised any, onto the guest's LVT.
    fn collect(&mut self) {
        while self.model.take_pmi() {
            self.lvt.raise();
        }
    }

    /// The guest writes its local APIC's LVT performance-counter entry.
    pub fn write_lvt(&mut self, entry: LvtPerfCounter) {
        self.lvt.write(entry);
    }

    /// The entry as the guest reads it (a delivery leaves it unmasked).
    pub const fn lvt(&self) -> LvtPerfCounter {
        self.lvt.entry()
    }

    /// At guest entry: the PMI to inject, if one is pending and the entry
    /// is unmasked.
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

    /// The guest's counter `c` (0 for one it does not have).
    pub fn counter(&self, c: Counter) -> u64 {
        if self.pmu.counters().contains(c) {
            self.model.counter(usize::from(c.index()))
        } else {
            0
        }
    }

    /// The model behind the PMU (for a VMM's diagnostics).
    pub const fn model(&self) -> &AmdModel {
        &self.model
    }
}

#[cfg(test)]
mod tests;

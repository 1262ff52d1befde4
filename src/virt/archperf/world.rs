//! The pass-through world switch of an architectural-PMU guest on a host
//! with the same PMU (KVM's mediated vPMU is the model): the guest's
//! counters run on the hardware while it runs. A [`PassThroughPmu`] is
//! one vCPU's PMU: its registers as plain data ([`GuestRegisters`], so it
//! moves between CPUs as a value), its interception ([`PassThrough`]) and
//! its local APIC's LVT entry ([`VirtualLvt`]).
//!
//! A VMM, per vCPU thread, with interrupts disabled around each call:
//!
//! 1. once per CPU: [`ArchPerfDriver::reserve_guest`] with
//!    [`PassThrough::counters`] (the counters the guest policy does not
//!    leave to the host);
//! 2. before VM entry: [`PassThroughPmu::enter`], which returns the two
//!    `IA32_PERF_GLOBAL_CTRL` values ([`GlobalCtrlValues`]): the guest's
//!    into the VMCS guest-state field (2808H) with the VM-entry control
//!    "load IA32_PERF_GLOBAL_CTRL", the host's into the host-state field
//!    (2C04H) with the VM-exit control of the same name; then
//!    [`PassThroughPmu::pmi_to_inject`] for the guest's PMI;
//! 3. after VM exit, before handling it: [`PassThroughPmu::exit`] (with
//!    the guest's `IA32_PERF_GLOBAL_CTRL` that "save
//!    IA32_PERF_GLOBAL_CTRL" stored, where the guest writes it without an
//!    exit); then a trapped RDMSR, WRMSR or RDPMC is answered by
//!    [`PassThroughPmu::rdmsr`], [`PassThroughPmu::wrmsr`] or
//!    [`PassThroughPmu::rdpmc`], on the saved registers: the next entry
//!    loads what they changed.
//!
//! Accesses that [`PassThrough::rule`] passes reach the hardware directly
//! while the guest runs; the others trap and are checked by
//! [`GuestPmu::check_msr_write`] and [`GuestPmu::check_msr_read`]. A guest
//! counter's overflow while the guest runs raises the host's PMI (a VM
//! exit); the host's PMI handler neither services nor acknowledges it
//! (the counter is never armed for it) and the exit finds it in
//! `IA32_PERF_GLOBAL_STATUS`: the guest's PMI, raised on its
//! [`VirtualLvt`] and delivered at an entry where its entry is unmasked.
//! Its status bit is restored at every entry through
//! `IA32_PERF_GLOBAL_STATUS_SET` (version 4: below it the driver refuses
//! the reservation, as KVM's mediated vPMU does) until the guest clears
//! it. The register traffic of each step: [`crate::arch::archperf::driver`]'s
//! `world` documentation on [`ArchPerfDriver::enter_guest`].

use super::{GlobalCtrlValues, global_ctrl_values};
use super::{GuestGp, GuestPmu, GuestReg, PassThrough, PolicyError, ReadAnswer, WriteAnswer};
use crate::access::MsrBackend;
use crate::apic::{LvtPerfCounter, PmiDelivery};
use crate::arch::archperf::driver::{ArchPerfDriver, Error, GuestRegisters};
use crate::arch::archperf::{Counter, CounterSet, FixedCtrCtrl, MAX_GENERAL, PerfEvtSel};
use crate::counter::Owner;
use crate::detect::ArchPerfCpu;
use crate::virt::VirtualLvt;

/// One vCPU's pass-through PMU (module documentation).
#[derive(Clone, Debug)]
pub struct PassThroughPmu {
    pmu: GuestPmu,
    pass: PassThrough,
    regs: GuestRegisters,
    /// The guest's images of its event selects (the hardware's have `EN`
    /// clear where the event is unavailable to the guest).
    evtsel: [u64; MAX_GENERAL as usize],
    lvt: VirtualLvt,
}

impl PassThroughPmu {
    /// The guest's PMU after reset on `host`: counters, event selects and
    /// fixed control 0, `IA32_PERF_GLOBAL_CTRL` with every general
    /// counter's enable set (version 2 and later: KVM's `kvm_pmu_refresh`,
    /// the SDM's RESET value), its LVT entry masked. Refused where the
    /// guest's counters do not fit the host's ([`GuestPmu::pass_through`]).
    pub fn new(pmu: GuestPmu, host: &ArchPerfCpu) -> Result<PassThroughPmu, PolicyError> {
        let pass = pmu.pass_through(host)?;
        let mut regs = GuestRegisters::CLEAR;
        if pmu.has_global_msrs() {
            regs.global_ctrl = CounterSet::first(pmu.policy().general, 0).bits();
        }
        Ok(PassThroughPmu {
            pmu,
            pass,
            regs,
            evtsel: [0; MAX_GENERAL as usize],
            lvt: VirtualLvt::new(),
        })
    }

    /// The guest's PMU.
    pub const fn pmu(&self) -> &GuestPmu {
        &self.pmu
    }

    /// Its interception: the MSR bitmap and RDPMC exiting.
    pub const fn pass_through(&self) -> &PassThrough {
        &self.pass
    }

    /// Its registers as last saved.
    pub const fn registers(&self) -> &GuestRegisters {
        &self.regs
    }

    /// Loads the guest's registers on `d` before VM entry
    /// ([`ArchPerfDriver::enter_guest`]): the two `IA32_PERF_GLOBAL_CTRL`
    /// values the VMM puts in the VMCS. Refused unless `d` reserved the
    /// guest's counters ([`ArchPerfDriver::reserve_guest`]) and holds no
    /// guest loaded. Every reserved counter is loaded: one the guest does
    /// not have with a clear select and 0, so that nothing of another
    /// guest's stays on it (guests of different counter counts share one
    /// reservation, the union of theirs).
    pub fn enter<O: Owner, M: MsrBackend>(
        &mut self,
        d: &mut ArchPerfDriver<'_, O, M>,
    ) -> Result<GlobalCtrlValues, Error<M::Error>> {
        self.reserved_on(d)?;
        d.enter_guest(&self.regs)?;
        Ok(global_ctrl_values(
            &self.pass,
            self.regs.global_ctrl,
            d.host_global(),
        ))
    }

    /// Saves the guest's registers from `d` after VM exit
    /// ([`ArchPerfDriver::exit_guest`]); `saved_global_ctrl`: the guest's
    /// `IA32_PERF_GLOBAL_CTRL` as the VM-exit control "save
    /// IA32_PERF_GLOBAL_CTRL" stored it, where the guest writes it without
    /// an exit ([`PassThrough::global_ctrl_passed`]; ignored otherwise). A
    /// counter that overflowed while the guest ran raises its PMI on its
    /// LVT. Returns those counters.
    pub fn exit<O: Owner, M: MsrBackend>(
        &mut self,
        d: &mut ArchPerfDriver<'_, O, M>,
        saved_global_ctrl: Option<u64>,
    ) -> Result<CounterSet, Error<M::Error>> {
        self.reserved_on(d)?;
        let new = d.exit_guest(&mut self.regs)?;
        if let Some(v) = saved_global_ctrl
            && self.pass.global_ctrl_passed()
        {
            self.regs.global_ctrl = v & self.pass.counters().bits();
        }
        if !new.is_empty() {
            self.lvt.raise();
        }
        Ok(new)
    }

    /// Refused unless `d` reserved every counter of the guest's.
    fn reserved_on<O: Owner, M: MsrBackend>(
        &self,
        d: &ArchPerfDriver<'_, O, M>,
    ) -> Result<(), Error<M::Error>> {
        if self
            .pass
            .counters()
            .difference(d.guest_counters())
            .is_empty()
        {
            Ok(())
        } else {
            Err(Error::Config(
                crate::arch::archperf::driver::ConfigError::GuestState,
            ))
        }
    }

    /// A trapped WRMSR of the guest, between an exit and the next entry
    /// (`Ok(false)`: not its PMU's, the VMM's). A refused write changes
    /// nothing.
    pub fn wrmsr(&mut self, msr: u32, value: u64) -> Result<bool, GuestGp> {
        match self.pmu.check_msr_write(msr, value)? {
            WriteAnswer::NotPmu => return Ok(false),
            WriteAnswer::Drop | WriteAnswer::SetStatus(_) => {}
            WriteAnswer::ClearStatus(bits) => {
                self.regs.status = self
                    .regs
                    .status
                    .difference(CounterSet::from_bits_truncate(bits));
            }
            WriteAnswer::Store { reg, value } => self.store(reg, value),
        }
        Ok(true)
    }

    fn store(&mut self, reg: GuestReg, value: u64) {
        match reg {
            GuestReg::Counter(c) => self.regs.set_value(c, value),
            GuestReg::EventSelect(c) => {
                let i = usize::from(c.number()) % MAX_GENERAL as usize;
                self.evtsel[i] = value;
                let counts = !self.pmu.counts_nothing(value);
                self.regs.evtsel[i] = PerfEvtSel::from_bits(value)
                    .map_or(0, |v| v.with_enable(v.enable() && counts).bits());
            }
            GuestReg::FixedCtrCtrl => self.regs.fixed_ctrl = FixedCtrCtrl::from_bits(value),
            GuestReg::GlobalCtrl => self.regs.global_ctrl = value,
            GuestReg::GlobalStatus => {
                self.regs.status =
                    CounterSet::from_bits_truncate(value).intersection(self.pass.counters());
            }
        }
    }

    /// A trapped RDMSR of the guest, between an exit and the next entry
    /// (`Ok(None)`: not its PMU's; `IA32_MISC_ENABLE` answers its
    /// performance-monitoring bits, which the VMM merges into its own).
    pub fn rdmsr(&mut self, msr: u32) -> Result<Option<u64>, GuestGp> {
        Ok(Some(match self.pmu.check_msr_read(msr)? {
            ReadAnswer::NotPmu => return Ok(None),
            ReadAnswer::Value(v) | ReadAnswer::Merge { bits: v, .. } => v,
            ReadAnswer::Reg(reg) => self.read(reg),
        }))
    }

    fn read(&self, reg: GuestReg) -> u64 {
        match reg {
            GuestReg::Counter(c) => self.counter(c),
            GuestReg::EventSelect(c) => self
                .evtsel
                .get(usize::from(c.number()))
                .copied()
                .unwrap_or(0),
            GuestReg::FixedCtrCtrl => self.regs.fixed_ctrl.bits(),
            GuestReg::GlobalCtrl => self.regs.global_ctrl,
            GuestReg::GlobalStatus => self.regs.status.bits(),
        }
    }

    /// A trapped RDPMC of the guest at `cpl` with its CR4.PCE, between an
    /// exit and the next entry.
    pub fn rdpmc(&mut self, ecx: u32, cr4_pce: bool, cpl: u8) -> Result<u64, GuestGp> {
        let a = self.pmu.check_rdpmc(ecx, cr4_pce, cpl)?;
        Ok(self.counter(a.counter) & a.mask)
    }

    /// The guest's counter `c` as last saved, cut to its width (0 for a
    /// counter it does not have).
    pub fn counter(&self, c: Counter) -> u64 {
        if self.pass.counters().contains(c) {
            self.regs.value(c) & self.pmu.width_mask(c)
        } else {
            0
        }
    }

    /// The guest writes its local APIC's LVT performance-counter entry.
    pub fn write_lvt(&mut self, entry: LvtPerfCounter) {
        self.lvt.write(entry);
    }

    /// The entry as the guest reads it.
    pub const fn lvt(&self) -> LvtPerfCounter {
        self.lvt.entry()
    }

    /// At guest entry: the PMI to inject, if one is pending and the entry
    /// is unmasked; delivering it masks the entry.
    pub fn pmi_to_inject(&mut self) -> Option<PmiDelivery> {
        self.lvt.deliver()
    }

    /// PMIs injected so far.
    pub const fn injected(&self) -> u64 {
        self.lvt.injected()
    }
}

#[cfg(test)]
mod tests;

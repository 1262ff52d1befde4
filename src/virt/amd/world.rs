//! The pass-through world switch of an AMD guest on a host with the same
//! PMU (KVM's mediated vPMU is the model): the guest's counters run on the
//! hardware while it runs. A [`PassThroughPmu`] is one vCPU's PMU: its
//! registers as plain data ([`GuestRegisters`], so it moves between CPUs as
//! a value), its interception ([`PassThrough`]: the MSR permission map and
//! the RDPMC intercept) and its local APIC's LVT entry ([`VirtualLvt`]).
//!
//! A VMM, per vCPU thread, with interrupts disabled around each call:
//!
//! 1. once per CPU: [`AmdDriver::reserve_guest`] with
//!    [`PassThrough::counters`] (the counters the guest policy does not
//!    leave to the host); PerfMonV2 hosts only;
//! 2. as the last step before `VMRUN`: [`PassThroughPmu::enter`], which
//!    writes `PerfCntrGlobalCtl` with the host's bits and the guest's
//!    enables (SVM has no control that loads it with the world); then
//!    [`PassThroughPmu::pmi_to_inject`] for the guest's PMI;
//! 3. as the first step after `#VMEXIT`: [`PassThroughPmu::exit`], which
//!    clears the guest's enables and saves its counters; then a trapped
//!    RDMSR, WRMSR or RDPMC is answered by [`PassThroughPmu::rdmsr`],
//!    [`PassThroughPmu::wrmsr`] or [`PassThroughPmu::rdpmc`], on the saved
//!    registers: the next entry loads what they changed.
//!
//! Every guest control reaches the hardware as
//! [`GuestPmu::hardware_ctl`] builds it (GuestOnly set, HostOnly clear), so
//! with `EFER.SVME` set the guest's counters count nothing of the host's
//! between the entry's last write and `VMRUN`, or between `#VMEXIT` and
//! the exit's first. A guest counter's overflow while the guest runs
//! raises the host's PMI (a `#VMEXIT`); the host's PMI handler neither
//! services nor acknowledges it (the counter is never armed for it) and
//! the exit finds it in `PerfCntrGlobalStatus`: the guest's PMI, raised on
//! its [`VirtualLvt`] (AMD's: delivery does not mask it). Its status bit
//! is restored at every entry through `PerfCntrGlobalStatusSet` until the
//! guest clears it. The register traffic of each step:
//! [`crate::arch::amd::driver`]'s `world` documentation on
//! [`AmdDriver::enter_guest`].

use super::{GuestGp, GuestPmu, GuestReg, PassThrough, PolicyError, ReadAnswer, WriteAnswer};
use crate::access::MsrBackend;
use crate::apic::{LvtPerfCounter, PmiDelivery};
use crate::arch::amd::driver::{AmdDriver, ConfigError, Error, GuestRegisters};
use crate::arch::amd::{Counter, CounterSet, MAX_COUNTERS};
use crate::counter::Owner;
use crate::detect::AmdCpu;
use crate::virt::VirtualLvt;

/// One vCPU's pass-through PMU (module documentation).
#[derive(Clone, Debug)]
pub struct PassThroughPmu {
    pmu: GuestPmu,
    pass: PassThrough,
    regs: GuestRegisters,
    /// The guest's images of its controls (the hardware's have GuestOnly
    /// set).
    ctl: [u64; MAX_COUNTERS as usize],
    lvt: VirtualLvt,
}

impl PassThroughPmu {
    /// The guest's PMU after reset on `host`: counters and controls clear,
    /// `PerfCntrGlobalCtl` with every counter's bit set (its RESET value,
    /// and what a guest without PerfMonV2 needs, whose `EN` alone starts a
    /// counter), its LVT entry masked. Refused where the guest's counters
    /// do not fit the host's ([`GuestPmu::pass_through`]).
    pub fn new(pmu: GuestPmu, host: &AmdCpu) -> Result<PassThroughPmu, PolicyError> {
        let pass = pmu.pass_through(host)?;
        let mut regs = GuestRegisters::CLEAR;
        regs.global_ctl = pmu.counters().bits();
        Ok(PassThroughPmu {
            pmu,
            pass,
            regs,
            ctl: [0; MAX_COUNTERS as usize],
            lvt: VirtualLvt::amd(),
        })
    }

    /// The guest's PMU.
    pub const fn pmu(&self) -> &GuestPmu {
        &self.pmu
    }

    /// Its interception: the MSR permission map and the RDPMC intercept.
    pub const fn pass_through(&self) -> &PassThrough {
        &self.pass
    }

    /// Its registers as last saved.
    pub const fn registers(&self) -> &GuestRegisters {
        &self.regs
    }

    /// Loads the guest's registers on `d` and starts them, as the last
    /// step before `VMRUN` ([`AmdDriver::enter_guest`]); returns the
    /// `PerfCntrGlobalCtl` written. Refused unless `d` reserved the guest's
    /// counters ([`AmdDriver::reserve_guest`]) and holds no guest loaded.
    /// Every reserved counter is loaded: one the guest does not have with
    /// a clear control and 0, so that nothing of another guest's stays on
    /// it (guests of different counter counts share one reservation, the
    /// union of theirs).
    pub fn enter<O: Owner, M: MsrBackend>(
        &mut self,
        d: &mut AmdDriver<'_, O, M>,
    ) -> Result<u64, Error<M::Error>> {
        self.reserved_on(d)?;
        d.enter_guest(&self.regs)
    }

    /// Stops and saves the guest's registers from `d`, as the first step
    /// after `#VMEXIT` ([`AmdDriver::exit_guest`]; its `PerfCntrGlobalCtl`
    /// read back where the guest writes it without an exit). A counter
    /// that overflowed while the guest ran raises its PMI on its LVT.
    /// Returns those counters.
    pub fn exit<O: Owner, M: MsrBackend>(
        &mut self,
        d: &mut AmdDriver<'_, O, M>,
    ) -> Result<CounterSet, Error<M::Error>> {
        self.reserved_on(d)?;
        let new = d.exit_guest(&mut self.regs, self.pass.global_ctl_passed())?;
        if !new.is_empty() {
            self.lvt.raise();
        }
        Ok(new)
    }

    /// Refused unless `d` reserved every counter of the guest's.
    fn reserved_on<O: Owner, M: MsrBackend>(
        &self,
        d: &AmdDriver<'_, O, M>,
    ) -> Result<(), Error<M::Error>> {
        if self
            .pass
            .counters()
            .difference(d.guest_counters())
            .is_empty()
        {
            Ok(())
        } else {
            Err(Error::Config(ConfigError::GuestState))
        }
    }

    /// A trapped WRMSR of the guest, between an exit and the next entry
    /// (`Ok(false)`: not its PMU's, the VMM's). A refused write changes
    /// nothing.
    pub fn wrmsr(&mut self, msr: u32, value: u64) -> Result<bool, GuestGp> {
        let counters = self.pass.counters();
        match self.pmu.check_msr_write(msr, value)? {
            WriteAnswer::NotPmu => return Ok(false),
            WriteAnswer::Drop => {}
            WriteAnswer::SetStatus(bits) => {
                self.regs.status = self
                    .regs
                    .status
                    .union(CounterSet::from_bits_truncate(bits).intersection(counters));
            }
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
            GuestReg::Control(c) => {
                let i = usize::from(c.index()) % MAX_COUNTERS as usize;
                self.ctl[i] = value;
                self.regs.ctl[i] = self.pmu.hardware_ctl(value);
            }
            GuestReg::GlobalCtl => self.regs.global_ctl = value & self.pass.counters().bits(),
            GuestReg::GlobalStatus => {
                self.regs.status =
                    CounterSet::from_bits_truncate(value).intersection(self.pass.counters());
            }
        }
    }

    /// A trapped RDMSR of the guest, between an exit and the next entry
    /// (`Ok(None)`: not its PMU's).
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
            GuestReg::Control(c) => self.ctl.get(usize::from(c.index())).copied().unwrap_or(0),
            GuestReg::GlobalCtl => self.regs.global_ctl,
            GuestReg::GlobalStatus => self.regs.status.bits(),
        }
    }

    /// A trapped RDPMC of the guest at `cpl` with its CR4.PCE, between an
    /// exit and the next entry.
    pub fn rdpmc(&mut self, ecx: u32, cr4_pce: bool, cpl: u8) -> Result<u64, GuestGp> {
        let a = self.pmu.check_rdpmc(ecx, cr4_pce, cpl)?;
        Ok(self.counter(a.counter) & a.mask)
    }

    /// The guest's counter `c` as last saved, cut to its 48 bits (0 for a
    /// counter it does not have).
    pub fn counter(&self, c: Counter) -> u64 {
        if self.pass.counters().contains(c) {
            self.regs.value(c) & self.pmu.counter_mask()
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
    /// is unmasked.
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

//! An emulated NetBurst PMU for a guest (feature `model`): a guest gets a
//! Pentium 4 PMU even on a host without one. The register-level NetBurst
//! model holds the virtual PMU's registers and counts what the hypervisor
//! feeds it; every guest access is first checked against the guest's
//! [`GuestPolicy`]; the guest's local APIC performance-counter entry is
//! virtual, with NetBurst's rule that delivering a PMI masks it (SDM
//! 18.15.5.8); a PMI the model raises is queued and injected at the next
//! guest entry ([`VirtualPmu::pmi_to_inject`]).
//!
//! The guest is shown one logical processor (T0 of the model).

use super::Verdict;
use super::netburst::{
    GuestGp, GuestPolicy, check_read, check_write, emulate_rdpmc, misc_enable_pmu_bits,
};
use crate::access::MsrAccess;
use crate::apic::{LvtPerfCounter, PmiDelivery};
use crate::arch::netburst::msrs::{Counter, IA32_DS_AREA, IA32_MISC_ENABLE};
use crate::model::netburst::{Config, Event, LogicalProcessor, NetBurstModel};

/// A guest's virtual NetBurst PMU.
#[derive(Clone, Debug)]
pub struct VirtualPmu {
    model: NetBurstModel,
    policy: GuestPolicy,
    lvt: LvtPerfCounter,
    ds_area: u64,
    injected: u64,
}

/// What a guest access did.
pub type Access<T> = Result<T, GuestGp>;

impl VirtualPmu {
    /// A virtual PMU of the processor `policy` describes (its model, one
    /// logical processor), in its reset state; the LVT entry masked.
    pub const fn new(policy: GuestPolicy) -> VirtualPmu {
        let mut config = Config::new(policy.model, false);
        config.pebs_available = policy.pebs;
        VirtualPmu {
            model: NetBurstModel::new(config),
            policy,
            lvt: LvtPerfCounter::RESET,
            ds_area: 0,
            injected: 0,
        }
    }

    /// The guest's WRMSR of a PMU register (`Ok(false)`: not a PMU
    /// register, the VMM's). A refused write changes nothing.
    pub fn wrmsr(&mut self, msr: u32, value: u64) -> Access<bool> {
        match check_write(&self.policy, msr, value) {
            Verdict::NotPmu => Ok(false),
            Verdict::InjectGp(gp) => Err(gp),
            Verdict::Emulate if msr == IA32_DS_AREA => {
                self.ds_area = value;
                Ok(true)
            }
            Verdict::Emulate => Ok(true),
            Verdict::Apply => {
                // The policy's checks are the model's plus the VMM's; a
                // write the model still refuses is a #GP all the same.
                self.model
                    .write_msr(msr, value)
                    .map_err(|_| GuestGp::Reserved { msr, bits: value })?;
                Ok(true)
            }
        }
    }

    /// The guest's RDMSR of a PMU register (`Ok(None)`: not a PMU
    /// register).
    pub fn rdmsr(&mut self, msr: u32) -> Access<Option<u64>> {
        match check_read(&self.policy, msr) {
            Verdict::NotPmu => Ok(None),
            Verdict::InjectGp(gp) => Err(gp),
            Verdict::Emulate if msr == IA32_MISC_ENABLE => {
                Ok(Some(misc_enable_pmu_bits(&self.policy)))
            }
            Verdict::Emulate => Ok(Some(self.ds_area)),
            Verdict::Apply => self
                .model
                .read_msr(msr)
                .map(Some)
                .map_err(|_| GuestGp::NoSuchMsr { msr }),
        }
    }

    /// The guest's RDPMC at `cpl` with its CR4.PCE.
    pub fn rdpmc(&mut self, ecx: u32, cr4_pce: bool, cpl: u8) -> Access<u64> {
        let model = &self.model;
        emulate_rdpmc(&self.policy, ecx, cr4_pce, cpl, |c: Counter| {
            model.counter(usize::from(c.index()))
        })
    }

    /// The hypervisor feeds the virtual PMU `count` occurrences of `event`
    /// that the guest caused (on its one logical processor).
    pub fn feed(&mut self, event: Event) {
        self.model.inject(Event {
            thread: LogicalProcessor::T0,
            ..event
        });
    }

    /// The guest writes its local APIC's LVT performance-counter entry.
    pub fn write_lvt(&mut self, entry: LvtPerfCounter) {
        self.lvt = LvtPerfCounter::from_bits(entry.writable_bits());
    }

    /// The guest reads it (the mask bit set by a delivery shows).
    pub const fn lvt(&self) -> LvtPerfCounter {
        self.lvt
    }

    /// At guest entry: the PMI to inject, if the model raised one and the
    /// virtual LVT entry is unmasked; delivering it masks the entry, as a
    /// NetBurst APIC does, until the guest's handler unmasks it. A PMI
    /// raised while the entry is masked stays pending for a later entry.
    pub fn pmi_to_inject(&mut self) -> Option<PmiDelivery> {
        if self.lvt.is_masked() || !self.model.pmi_pending(LogicalProcessor::T0) {
            return None;
        }
        let delivery = self.lvt.delivery()?;
        self.model.take_pmi(LogicalProcessor::T0);
        self.lvt = self.lvt.masked();
        self.injected += 1;
        Some(delivery)
    }

    /// PMIs injected so far.
    pub const fn injected(&self) -> u64 {
        self.injected
    }

    /// The model behind the virtual PMU (for a VMM's diagnostics).
    pub const fn model(&self) -> &NetBurstModel {
        &self.model
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apic::Vector;
    use crate::model::netburst::{EscrGroup, EventKind, Privilege};

    const RUNNING: EventKind = EventKind::new(EscrGroup::Fsb, 0x13, 1);

    /// A guest samples every 100 events on its virtual PMU: the model
    /// raises the PMI, it is injected at the next entry with the LVT entry
    /// masked by the delivery, held while masked, and injected again once
    /// the guest's handler unmasks.
    #[test]
    fn a_guest_samples_on_its_virtual_pmu() {
        let mut v = VirtualPmu::new(GuestPolicy::new(3));
        let entry = LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(0xF0).unwrap()));
        v.write_lvt(entry);
        // global_power_events RUNNING, T0_OS, on FSB_ESCR1 and counter 2,
        // preset to -100, with OVF_PMI_T0.
        assert_eq!(v.wrmsr(0x3A3, 0x13 << 25 | 1 << 9 | 1 << 3), Ok(true));
        assert_eq!(v.wrmsr(0x302, (1 << 40) - 100), Ok(true));
        let cccr = 6 << 13 | 0b11 << 16 | 1 << 12 | 1 << 26;
        assert_eq!(v.wrmsr(0x362, cccr), Ok(true));
        v.feed(RUNNING.on(LogicalProcessor::T0, Privilege::Os, 100));
        assert_eq!(
            v.pmi_to_inject(),
            None,
            "the PMI comes with the event after the overflow"
        );
        v.feed(RUNNING.on(LogicalProcessor::T0, Privilege::Os, 1));
        assert_eq!(
            v.pmi_to_inject(),
            Some(PmiDelivery::Fixed(Vector::new(0xF0).unwrap()))
        );
        assert!(v.lvt().is_masked(), "masked by the delivery");
        // The guest's handler re-arms and clears OVF, but the entry is
        // still masked: the next overflow waits.
        assert_eq!(v.wrmsr(0x302, (1 << 40) - 100), Ok(true));
        assert_eq!(v.wrmsr(0x362, cccr), Ok(true));
        v.feed(RUNNING.on(LogicalProcessor::T0, Privilege::Os, 101));
        assert_eq!(v.pmi_to_inject(), None, "held while masked");
        v.write_lvt(entry);
        assert!(v.pmi_to_inject().is_some(), "delivered once unmasked");
        assert_eq!(v.injected(), 2);
        assert_eq!(v.rdpmc(2, false, 0), Ok(1), "one event of the next period");
        assert_eq!(v.rdpmc(2, false, 3), Err(GuestGp::RdpmcNotAllowed));
        assert_eq!(v.rdmsr(0x1A0), Ok(Some(1 << 7 | 1 << 12)));
        assert_eq!(
            v.wrmsr(0x3A3, 1 << 1),
            Err(GuestGp::OtherLogicalProcessor { msr: 0x3A3 })
        );
        assert_eq!(v.wrmsr(0x10, 0), Ok(false), "not a PMU register");
    }
}

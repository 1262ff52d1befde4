//! An emulated NetBurst PMU for a guest (feature `model`): a guest gets a
//! Pentium 4 PMU even on a host without one. The register-level NetBurst
//! model holds the virtual PMU's registers and counts what the hypervisor
//! feeds it; every guest access is first checked against the guest's
//! [`GuestPolicy`] by the same [`check_msr_write`]/[`check_msr_read`] as the
//! world-switched path, the one rule for both (a write they apply the
//! model takes: the isolation tests run the same million random writes
//! through both); the guest's local APIC performance-counter entry is the
//! crate's [`VirtualLvt`], masked on delivery as on NetBurst (SDM
//! 18.15.5.8), a PMI the model raises injected at the next guest entry
//! ([`VirtualPmu::pmi_to_inject`]).
//!
//! The guest is shown one logical processor (T0 of the model), without
//! PEBS.

use super::VirtualLvt;
use super::netburst::Verdict;
use super::netburst::{
    GuestGp, GuestPolicy, MISC_ENABLE_PMU_BITS, check_msr_read, check_msr_write, emulate_rdpmc,
};
use crate::access::MsrAccess;
use crate::apic::{LvtPerfCounter, PmiDelivery};
use crate::arch::netburst::Counter;
use crate::model::netburst::{Config, Event, Fault, GpReason, LogicalProcessor, NetBurstModel};

/// A guest's virtual NetBurst PMU.
#[derive(Clone, Debug)]
pub struct VirtualPmu {
    model: NetBurstModel,
    policy: GuestPolicy,
    lvt: VirtualLvt,
}

/// What a guest access did.
pub type GuestResult<T> = Result<T, GuestGp>;

/// The model's #GP as the guest's: only reached if [`check_msr_write`] applied
/// a write the model refuses, which the isolation tests show it never
/// does; the model's answer is the hardware's, so it is passed on rather
/// than hidden.
fn model_gp(msr: u32, fault: Fault) -> GuestGp {
    match fault.reason() {
        GpReason::ReservedBits { bits } => GuestGp::Reserved { msr, bits },
        GpReason::ActiveThreadMustBeAny => GuestGp::ActiveThreadMustBeAny { msr },
        GpReason::NonCanonicalAddress => GuestGp::PebsRefused { msr },
        GpReason::NoSuchMsr | GpReason::PerfMonUnavailable | GpReason::CounterIndexOutOfRange => {
            GuestGp::NoSuchMsr { msr }
        }
    }
}

impl VirtualPmu {
    /// A virtual PMU of the processor `policy` describes (its model, one
    /// logical processor whatever `policy.logical_processors` says), in its
    /// reset state; the LVT entry masked.
    pub const fn new(policy: GuestPolicy) -> VirtualPmu {
        let mut config = Config::new(policy.model, false);
        config.pebs_available = false;
        VirtualPmu {
            model: NetBurstModel::new(config),
            policy: GuestPolicy {
                logical_processors: 1,
                ..policy
            },
            lvt: VirtualLvt::new(),
        }
    }

    /// The guest's WRMSR of a PMU register (`Ok(false)`: not a PMU
    /// register, the VMM's). A refused write changes nothing.
    pub fn wrmsr(&mut self, msr: u32, value: u64) -> GuestResult<bool> {
        match check_msr_write(&self.policy, msr, value) {
            Verdict::NotPmu => Ok(false),
            Verdict::InjectGp(gp) => Err(gp),
            Verdict::Emulate => Ok(true),
            Verdict::Apply => {
                let written = self.model.write_msr(msr, value);
                debug_assert!(
                    written.is_ok(),
                    "check_msr_write applied {msr:#x} {value:#x}"
                );
                written.map(|()| true).map_err(|f| model_gp(msr, f))
            }
        }
    }

    /// The guest's RDMSR of a PMU register (`Ok(None)`: not a PMU
    /// register).
    pub fn rdmsr(&mut self, msr: u32) -> GuestResult<Option<u64>> {
        match check_msr_read(&self.policy, msr) {
            Verdict::NotPmu => Ok(None),
            Verdict::InjectGp(gp) => Err(gp),
            Verdict::Emulate => Ok(Some(MISC_ENABLE_PMU_BITS)),
            Verdict::Apply => self
                .model
                .read_msr(msr)
                .map(Some)
                .map_err(|f| model_gp(msr, f)),
        }
    }

    /// The guest's RDPMC at `cpl` with its CR4.PCE.
    pub fn rdpmc(&mut self, ecx: u32, cr4_pce: bool, cpl: u8) -> GuestResult<u64> {
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
        self.lvt.write(entry);
    }

    /// The guest reads it (the mask bit set by a delivery shows).
    pub const fn lvt(&self) -> LvtPerfCounter {
        self.lvt.entry()
    }

    /// At guest entry: the PMI to inject, if the model raised one and the
    /// virtual LVT entry is unmasked; delivering it masks the entry, as a
    /// NetBurst APIC does, until the guest's handler unmasks it. A PMI
    /// raised while the entry is masked stays pending for a later entry
    /// ([`VirtualLvt::deliver`]).
    pub fn pmi_to_inject(&mut self) -> Option<PmiDelivery> {
        if self.model.take_pmi(LogicalProcessor::T0).is_some() {
            self.lvt.raise();
        }
        self.lvt.deliver()
    }

    /// PMIs injected so far.
    pub const fn injected(&self) -> u64 {
        self.lvt.injected()
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
        assert_eq!(v.rdmsr(0x1A0), Ok(Some(1 << 7 | 1 << 11 | 1 << 12)));
        assert_eq!(
            v.wrmsr(0x3A3, 1 << 1),
            Err(GuestGp::OtherLogicalProcessor { msr: 0x3A3 })
        );
        assert_eq!(v.wrmsr(0x10, 0), Ok(false), "not a PMU register");
    }
}

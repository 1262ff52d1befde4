//! Support for hypervisors: what a VMM calls on a guest's PMU MSR accesses,
//! its RDPMC, and around its entries and exits.
//!
//! * [`netburst`]: classify a guest's MSR access ([`netburst::classify`]),
//!   validate a guest write against a [`netburst::GuestPolicy`] (reserved
//!   bits, the other logical processor's bits and the active-thread field
//!   for a guest with one, an event allow/deny list, registers and tagging
//!   the host keeps; PEBS and the DS area always refused), answered as
//!   [`netburst::Verdict`]; emulate RDPMC ([`netburst::emulate_rdpmc`]: the 40-bit
//!   width, the fast-read bit 31, CR4.PCE and the CPL); and the world
//!   switch ([`netburst::PmuContext`]): a guest's (or the host's) PMU state
//!   saved and restored in a safe order, touching only the registers in
//!   use, leaving no switched-out counter running and no register a guest
//!   can read holding another context's value.
//! * [`itanium`]: guest PMC writes through the arch layer's
//!   [`Validator`](crate::arch::itanium::validate::Validator) as Linux
//!   perfmon treats them (a refused write is dropped, never a fault), PMDs,
//!   and the world switch under PMC0.fr with a virtual PMC0.
//! * [`archperf`]: a guest's architectural PMU (versions 1-5) with KVM's
//!   rules: [`archperf::GuestPolicy`] (version, counters, widths,
//!   unavailable events, full-width writes, the counters the host keeps)
//!   checked into an [`archperf::GuestPmu`] that answers every guest RDMSR,
//!   WRMSR and RDPMC as KVM does (`arch/x86/kvm/pmu.c`, `vmx/pmu_intel.c`,
//!   `x86.c`; where KVM and the SDM differ, KVM's answer, cited) and
//!   synthesises the guest's CPUID leaf 0AH, PDCM and
//!   `IA32_PERF_CAPABILITIES`; its PEBS refused to every guest (its MSRs
//!   #GP, `IA32_MISC_ENABLE`, `IA32_PERF_CAPABILITIES` and CPUID as a guest
//!   without PEBS reads them), with the reason: a record is written through
//!   a linear address while whatever paging is live; and [`archperf::vpmu`]
//!   (feature `model`), a trap-and-emulate architectural PMU on any host.
//! * [`amd`]: the same for AMD's core PMU (legacy, PerfCtrExtCore,
//!   PerfMonV2; CPUID Fn8000_0001/Fn8000_0022 from the policy) with
//!   `svm/pmu.c`'s rules (reserved bits dropped, never a #GP; the legacy
//!   and extended addresses one register; HostOnly and GuestOnly the
//!   hypervisor's, [`amd::GuestPmu::hardware_ctl`]), and [`amd::vpmu`].
//! * [`answer`]: what an accepted access of either vendor's guest comes to
//!   (a register stored, status bits cleared or set, a write dropped, a
//!   value read), naming the guest's registers, for an emulated PMU and a
//!   VMM that runs the guest's counters on the hardware alike.
//! * [`x86`]: which PMU register of either vendor an MSR number is, and
//!   the MSR ranges a VMM intercepts for its guests' PMU.
//! * [`VirtualLvt`]: a guest's virtual LVT performance-counter entry,
//!   masked on delivery as on NetBurst and the architectural PMU (not on
//!   AMD's, [`VirtualLvt::amd`]), PMIs injected at guest entry; used by
//!   every guest PMU.
//! * [`vpmu`] (feature `model`): an emulated NetBurst PMU for a guest on a
//!   host without one: the register-level model as the virtual PMU, checked
//!   by the same rules as the world-switched path, with a [`VirtualLvt`].
//!
//! KVM and Xen need an architectural PMU (CPUID leaf 0AH) or AMD's and
//! offer no NetBurst guest PMU; the NetBurst checks follow what they do
//! for theirs
//! (guest writes checked against reserved masks built from the guest's
//! PMU, an event filter, RDPMC against CR4.PCE and the CPL, the context
//! switched with everything disabled first and enabled last) and the
//! NetBurst manual's rules (SDM Vol. 3B 18.15-18.16, Vol. 3C Table 35-41).

pub mod amd;
pub mod answer;
pub mod archperf;
pub mod itanium;
pub mod netburst;
#[cfg(any(test, feature = "model"))]
pub mod vpmu;
pub mod x86;

use crate::apic::{LvtPerfCounter, PmiDelivery};

/// What to do with a guest's access to a PMU MSR (an illegal access is a
/// #GP in the guest, as on the hardware): the NetBurst checks'
/// ([`netburst::check_msr_write`]) and the architectural PMU's PEBS
/// refusal's ([`archperf::check_pebs_msr`]). (The architectural and AMD
/// guest PMUs answer with [`answer`]'s types, which carry the values.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Verdict<G> {
    /// Legal: record it in the guest's context (and write it to the
    /// hardware while the guest's context is loaded).
    Apply,
    /// Legal, but the register is virtual: the VMM answers it itself (a
    /// read of IA32_MISC_ENABLE).
    Emulate,
    /// Not a PMU register: the VMM's own business.
    NotPmu,
    /// Inject #GP into the guest, as the hardware would (or as the policy
    /// requires), for this reason; nothing changes.
    InjectGp(G),
}

/// A guest's virtual local APIC LVT performance-counter entry (offset 340H)
/// and its pending PMI: one for every NetBurst guest, whether its PMU is
/// emulated ([`vpmu::VirtualPmu`]) or world-switched on the hardware
/// ([`netburst::PmuContext`]).
///
/// A NetBurst local APIC sets the entry's mask bit when it delivers a PMI
/// (SDM Vol. 3B 18.15.5.8; the handler unmasks it once the overflow is
/// serviced, as Linux's `p4_pmu_handle_irq` does); KVM delivers a guest
/// PMI the same way, as a request flag raised on the vCPU and injected
/// through the guest's virtual LVT entry at the next entry
/// (`arch/x86/kvm/pmu.c`, `kvm_pmu_deliver_pmi`). So: the VMM
/// [`raise`](VirtualLvt::raise)s a PMI for the guest (its counter
/// overflowed with `OVF_PMI`), and at every guest entry asks
/// [`deliver`](VirtualLvt::deliver) whether to inject one; a PMI raised
/// while the entry is masked waits for the guest's unmasking write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct VirtualLvt {
    entry: LvtPerfCounter,
    pending: bool,
    injected: u64,
    /// Delivering a PMI sets the entry's mask bit (Intel's APICs; not
    /// AMD's).
    masks: bool,
}

impl Default for VirtualLvt {
    fn default() -> Self {
        Self::new()
    }
}

impl VirtualLvt {
    /// The entry after reset (masked), no PMI pending; a delivery masks
    /// it, as Intel's local APICs do (NetBurst's, SDM Vol. 3B 18.15.5.8,
    /// and the architectural PMU's, Vol. 3B "Generic ... Interrupt"
    /// handling: the handler unmasks).
    pub const fn new() -> VirtualLvt {
        VirtualLvt {
            entry: LvtPerfCounter::RESET,
            pending: false,
            injected: 0,
            masks: true,
        }
    }

    /// An AMD guest's entry: after reset (masked), no PMI pending, and a
    /// delivery leaves it as it is. AMD's local APIC does not set the
    /// mask bit when it delivers a PMI (Linux `amd_pmu_v2_handle_irq`:
    /// unmasking "is not required"), and KVM masks its virtual entry on
    /// delivery for Intel-compatible guests only (`lapic.c`,
    /// `kvm_apic_local_deliver`, since the fix of a16eb25b09c0).
    pub const fn amd() -> VirtualLvt {
        VirtualLvt {
            masks: false,
            ..VirtualLvt::new()
        }
    }

    /// The guest writes the entry (its writable bits: vector, delivery
    /// mode, mask).
    pub fn write(&mut self, entry: LvtPerfCounter) {
        self.entry = LvtPerfCounter::from_bits(entry.writable_bits());
    }

    /// The entry as the guest reads it (with the mask bit a delivery set).
    pub const fn entry(&self) -> LvtPerfCounter {
        self.entry
    }

    /// A PMI for the guest: delivered at the next entry at which the entry
    /// is unmasked. PMIs raised before that merge into one, as the APIC's
    /// one pending interrupt does.
    pub fn raise(&mut self) {
        self.pending = true;
    }

    /// Whether a PMI waits for delivery.
    pub const fn pending(&self) -> bool {
        self.pending
    }

    /// At guest entry: the PMI to inject, if one is pending and the entry
    /// is unmasked with a delivery mode a PMI can use; delivering it masks
    /// the entry (not an [`amd`](VirtualLvt::amd) entry).
    pub fn deliver(&mut self) -> Option<PmiDelivery> {
        if !self.pending || self.entry.is_masked() {
            return None;
        }
        let delivery = self.entry.delivery()?;
        self.pending = false;
        if self.masks {
            self.entry = self.entry.masked();
        }
        self.injected += 1;
        Some(delivery)
    }

    /// PMIs delivered so far.
    pub const fn injected(&self) -> u64 {
        self.injected
    }
}

#[cfg(test)]
mod tests;

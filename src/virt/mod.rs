//! Support for hypervisors: what a VMM calls on a guest's PMU MSR accesses,
//! its RDPMC, and around its entries and exits.
//!
//! * [`netburst`]: classify a guest's MSR access ([`netburst::classify`]),
//!   validate a guest write against a [`netburst::GuestPolicy`] (reserved
//!   bits, the other logical processor's bits for a guest with one, the
//!   PEBS/DS policy, an event allow/deny list, registers the host keeps),
//!   answered as [`Verdict`]; emulate RDPMC ([`netburst::emulate_rdpmc`]:
//!   the 40-bit width, the fast-read bit 31, CR4.PCE and the CPL); and the
//!   world switch ([`netburst::PmuContext`]): a guest's (or the host's) PMU
//!   state saved and restored in a safe order, touching only the registers
//!   in use.
//! * [`itanium`]: guest PMC writes through the arch layer's
//!   [`Validator`](crate::arch::itanium::validate::Validator), PMDs, and the
//!   world switch under PMC0.fr.
//! * [`vpmu`] (feature `model`): an emulated NetBurst PMU for a guest on a
//!   host without one: the register-level model as the virtual PMU, a
//!   virtual LVT entry masked on delivery, PMIs injected at guest entry.
//!
//! KVM and Xen need an architectural PMU (CPUID leaf 0AH) and offer no
//! NetBurst guest PMU; the checks here follow what they do for theirs
//! (guest writes checked against reserved masks built from the guest's
//! PMU, an event filter, RDPMC against CR4.PCE and the CPL, the context
//! switched with everything disabled first and enabled last) and the
//! NetBurst manual's rules (SDM Vol. 3B 18.15-18.16, Vol. 3C Table 35-41).

pub mod itanium;
pub mod netburst;
#[cfg(any(test, feature = "model"))]
pub mod vpmu;

/// What to do with a guest's access to a PMU MSR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Verdict<G> {
    /// Legal: record it in the guest's context (and write it to the
    /// hardware while the guest's context is loaded).
    Apply,
    /// Legal, but the register is virtual: the VMM answers it itself (a
    /// read of IA32_MISC_ENABLE, the guest's DS area address).
    Emulate,
    /// Not a PMU register: the VMM's own business.
    NotPmu,
    /// Inject #GP into the guest, as the hardware would (or as the policy
    /// requires), for this reason; nothing changes.
    InjectGp(G),
}

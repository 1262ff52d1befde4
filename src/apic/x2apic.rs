//! The local APIC in x2APIC mode: the same registers a PMU driver needs, as
//! MSRs (SDM Vol. 3A 11.12, "Extended XAPIC (x2APIC)", and its MSR address
//! table): MSR `800H + offset / 10H` for the xAPIC register at `offset`.
//! What differs from the memory-mapped xAPIC (11.12.1-11.12.11):
//!
//! * the APIC ID register (`802H`) holds the whole 32-bit x2APIC ID;
//! * EOI (`80BH`) must be written with 0: any other value is a #GP;
//! * the ICR is one 64-bit MSR (`830H`), destination in bits 63:32;
//! * a SELF IPI register (`83FH`) sends a fixed interrupt to this CPU
//!   with one write of the vector (bits 7:0; the rest is reserved);
//! * reserved bits written as 1 raise #GP instead of being ignored.
//!
//! The mode is entered through `IA32_APIC_BASE` (`1BH`): bit 11 (xAPIC
//! global enable) and bit 10 (`EXTD`) both set (11.12.1), when CPUID.01H:ECX
//! bit 21 says the processor has it ([`crate::detect::x2apic_supported`]).
//! It is tested through the recording backend over a small model of the
//! x2APIC MSRs, and on a real x2APIC by the `x2apic`, `smp` and `packages`
//! test kernels under KVM (`PMU_QEMU_ACCEL=kvm`; QEMU 7.2's TCG does not
//! emulate x2APIC, and there those kernels skip what needs it), where it
//! raises model PMIs (LVT entry, SELF IPI, NMI through the ICR), takes
//! EOIs and carries the SMP kernels' IPIs ([`X2Apic::send_ipi`]).

use super::{Icr, IpiDelivery, IpiDestination, LvtPerfCounter, LvtPerfCounterEntry, Svr, Vector};
use crate::access::{MsrBackend, MsrOps};

/// `IA32_APIC_BASE`.
pub const IA32_APIC_BASE: u32 = 0x1B;
/// `IA32_APIC_BASE` bit 11: the APIC is globally enabled.
pub const APIC_BASE_ENABLE: u64 = ApicBase::ENABLE.mask();
/// `IA32_APIC_BASE` bit 10 (`EXTD`): x2APIC mode.
pub const APIC_BASE_EXTD: u64 = ApicBase::EXTD.mask();

crate::register::register! {
    /// `IA32_APIC_BASE` (MSR 1BH; SDM Vol. 3A Figure 11-26), the two bits
    /// that select the APIC's mode.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct ApicBase(u64) {
        /// `EXTD` (bit 10): x2APIC mode.
        EXTD: 10;
        /// Global enable (bit 11).
        ENABLE: 11;
    }
}

/// The x2APIC MSRs this layer uses (SDM Vol. 3A Table 11-6).
pub mod msr {
    /// Local APIC ID.
    pub const ID: u32 = 0x802;
    /// Version.
    pub const VERSION: u32 = 0x803;
    /// Task priority.
    pub const TPR: u32 = 0x808;
    /// End of interrupt (write 0).
    pub const EOI: u32 = 0x80B;
    /// Spurious interrupt vector.
    pub const SVR: u32 = 0x80F;
    /// In-service register, bits 31:0 (eight MSRs, 810H-817H).
    pub const ISR0: u32 = 0x810;
    /// Interrupt request register, bits 31:0 (eight MSRs, 820H-827H).
    pub const IRR0: u32 = 0x820;
    /// Interrupt command register (64 bits).
    pub const ICR: u32 = 0x830;
    /// LVT performance-monitoring counters entry.
    pub const LVT_PERF_COUNTER: u32 = 0x834;
    /// Self IPI (write only).
    pub const SELF_IPI: u32 = 0x83F;
}

/// The local APIC of the CPU the code runs on, in x2APIC mode, through an
/// MSR backend. Every method is one MSR access (two for
/// [`X2Apic::self_nmi`], which reads the ID first) and returns the
/// backend's error (a model's; the hardware backend's cannot happen).
///
/// Like [`super::LocalApic`] it is the APIC of the CPU whose MSRs the
/// backend reaches: the hardware backend is that of the executing CPU.
#[derive(Debug)]
pub struct X2Apic<M: MsrBackend> {
    msr: M,
}

impl<M: MsrBackend> X2Apic<M> {
    /// The x2APIC reached through `msr`, which must be in x2APIC mode
    /// ([`X2Apic::enter`]): in xAPIC mode these MSRs raise #GP.
    pub const fn new(msr: M) -> Self {
        X2Apic { msr }
    }

    /// Switches the APIC reached through `msr` to x2APIC mode (SDM Vol. 3A
    /// 11.12.1: `IA32_APIC_BASE` bits 11 and 10 set, from xAPIC mode; one
    /// RDMSR, one WRMSR) and returns it. The memory-mapped page is inert
    /// from then on. Check [`crate::detect::x2apic_supported`] first: on a
    /// processor without x2APIC the write raises #GP.
    pub fn enter(mut msr: M) -> Result<Self, M::Error> {
        let base = msr.read_msr(IA32_APIC_BASE)?;
        msr.write_msr(IA32_APIC_BASE, base | APIC_BASE_ENABLE | APIC_BASE_EXTD)?;
        Ok(X2Apic { msr })
    }

    /// The MSR backend.
    pub fn msr(&mut self) -> &mut M {
        &mut self.msr
    }

    /// The 32-bit x2APIC ID.
    pub fn id(&mut self) -> Result<u32, M::Error> {
        Ok(self.msr.read_msr(msr::ID)? as u32)
    }

    /// The version register: version in 7:0, highest LVT entry in 23:16.
    pub fn version(&mut self) -> Result<u32, M::Error> {
        Ok(self.msr.read_msr(msr::VERSION)? as u32)
    }

    /// Software-enables the APIC (SVR bit 8) with `spurious` as the spurious
    /// vector, and accepts every priority (TPR = 0).
    pub fn enable(&mut self, spurious: Vector) -> Result<(), M::Error> {
        self.msr.write_msr(msr::TPR, 0)?;
        let svr = Svr(0).with_enabled(true).with_vector(spurious.get());
        self.msr.write_msr(msr::SVR, u64::from(svr.bits()))
    }

    /// Signals end of interrupt (the only value allowed is 0).
    pub fn eoi(&mut self) -> Result<(), M::Error> {
        self.msr.write_msr(msr::EOI, 0)
    }

    /// Reads the LVT performance-counter entry.
    pub fn perf_counter_entry(&mut self) -> Result<LvtPerfCounter, M::Error> {
        let v = self.msr.read_msr(msr::LVT_PERF_COUNTER)?;
        Ok(LvtPerfCounter::from_bits(v as u32))
    }

    /// Writes the LVT performance-counter entry: one WRMSR, reserved bits
    /// zero (they raise #GP in x2APIC mode).
    pub fn set_perf_counter_entry(&mut self, entry: LvtPerfCounter) -> Result<(), M::Error> {
        self.msr
            .write_msr(msr::LVT_PERF_COUNTER, u64::from(entry.writable_bits()))
    }

    /// Sends `vector` to this CPU through the SELF IPI register (one WRMSR).
    pub fn self_ipi(&mut self, vector: Vector) -> Result<(), M::Error> {
        self.msr.write_msr(msr::SELF_IPI, u64::from(vector.get()))
    }

    /// Sends an NMI to this CPU: the ICR with delivery mode NMI, addressed
    /// to this APIC's ID (the SELF IPI register sends fixed interrupts only).
    pub fn self_nmi(&mut self) -> Result<(), M::Error> {
        let id = self.id()?;
        self.send_ipi(IpiDestination::Apic(id), IpiDelivery::Nmi)
    }

    /// Sends an inter-processor interrupt: one WRMSR of the 64-bit ICR,
    /// the destination's x2APIC ID in bits 63:32 (physical destination
    /// mode), the low half as in xAPIC mode (SDM Vol. 3A 11.12.9, "ICR
    /// Operation in x2APIC Mode"). Unlike [`super::LocalApic::send_ipi`]
    /// there is nothing to wait for: x2APIC mode has no delivery-status
    /// bit (11.12.9: the bit is reserved), the write sends the IPI.
    pub fn send_ipi(&mut self, to: IpiDestination, what: IpiDelivery) -> Result<(), M::Error> {
        self.msr
            .write_msr(msr::ICR, Icr::ipi(to, what, true).bits())
    }

    /// Whether `vector` is in service (ISR bit set).
    pub fn in_service(&mut self, vector: u8) -> Result<bool, M::Error> {
        self.vector_bit(msr::ISR0, vector)
    }

    /// Whether `vector` is pending (IRR bit set).
    pub fn pending(&mut self, vector: u8) -> Result<bool, M::Error> {
        self.vector_bit(msr::IRR0, vector)
    }

    fn vector_bit(&mut self, bank: u32, vector: u8) -> Result<bool, M::Error> {
        let word = self.msr.read_msr(bank + u32::from(vector / 32))?;
        Ok(word & 1 << (vector % 32) != 0)
    }
}

/// A PMI handler unmasks the entry through the x2APIC too. Only for a
/// backend that cannot fail (the hardware's): the handler has nowhere to
/// report an error.
impl<M: MsrBackend<Error = core::convert::Infallible>> LvtPerfCounterEntry for X2Apic<M> {
    fn write_lvt_perf_counter(&mut self, entry: LvtPerfCounter) {
        let Ok(()) = self.set_perf_counter_entry(entry);
    }
}

/// The x2APIC delivers a model's PMI too ([`super::deliver_model_pmi`]),
/// with the backend's errors.
impl<M: MsrBackend> super::PmiApic for X2Apic<M> {
    type Error = M::Error;

    fn lvt_perf_counter(&mut self) -> Result<LvtPerfCounter, M::Error> {
        self.perf_counter_entry()
    }

    fn set_lvt_perf_counter(&mut self, entry: LvtPerfCounter) -> Result<(), M::Error> {
        self.set_perf_counter_entry(entry)
    }

    fn send_self_ipi(&mut self, vector: Vector) -> Result<(), M::Error> {
        self.self_ipi(vector)
    }

    fn send_self_nmi(&mut self) -> Result<(), M::Error> {
        self.self_nmi()
    }
}

#[cfg(test)]
mod tests;

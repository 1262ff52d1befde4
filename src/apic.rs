//! The local APIC as far as a PMU driver needs it, memory-mapped (xAPIC,
//! [`LocalApic`]) or through MSRs (x2APIC, [`X2Apic`]): the
//! LVT performance-counter entry that turns a counter overflow into an
//! interrupt, end-of-interrupt, and a self-IPI for testing the handler.
//!
//! Register offsets and the LVT layout follow SDM Vol. 3A chapter "Advanced
//! Programmable Interrupt Controller" (the register address map table and the
//! "Local Vector Table" figure). On NetBurst processors the APIC sets the mask
//! bit of the performance-counter entry when it delivers a PMI, so the handler
//! unmasks it once the overflow is serviced, and only after the counter's OVF
//! flag is clear, or the interrupt fires again at once (the ordering Linux's
//! NetBurst driver follows in `p4_pmu_handle_irq`,
//! `arch/x86/events/intel/p4.c`).
//!
//! # Examples
//!
//! The LVT performance-counter entry a PMI handler writes back (the APIC
//! itself needs its MMIO page, so only the register image is shown):
//!
//! ```
//! use pmu::apic::{LvtPerfCounter, PmiDelivery, Vector};
//!
//! let entry = LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(0xF0).unwrap()));
//! assert_eq!(entry.bits(), 0xF0);                 // fixed delivery, unmasked
//! assert!(entry.masked().is_masked());            // what the APIC does on a PMI
//! assert_eq!(LvtPerfCounter::new(PmiDelivery::Nmi).bits(), 0b100 << 8);
//! assert!(Vector::new(15).is_none(), "vectors 0-15 are reserved");
//! ```

use crate::register::register;
use core::ptr::NonNull;

use volatile::VolatilePtr;

pub mod x2apic;
pub use x2apic::X2Apic;

/// Register offsets in the xAPIC page.
mod reg {
    pub const ID: usize = 0x020;
    pub const VERSION: usize = 0x030;
    pub const TPR: usize = 0x080;
    pub const EOI: usize = 0x0B0;
    pub const SVR: usize = 0x0F0;
    pub const ISR: usize = 0x100;
    pub const IRR: usize = 0x200;
    pub const ICR_LOW: usize = 0x300;
    pub const ICR_HIGH: usize = 0x310;
    pub const LVT_PERF_COUNTER: usize = 0x340;
}

/// The architectural default physical address of the xAPIC page.
pub const DEFAULT_BASE: u64 = 0xFEE0_0000;

/// An interrupt vector usable for a fixed-delivery interrupt: 16-255.
/// Vectors 0-15 are reserved, and the APIC reports an illegal-vector error
/// for them (SDM Vol. 3A 11.5.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Vector(u8);

impl Vector {
    /// `Some` for 16-255.
    pub const fn new(vector: u8) -> Option<Self> {
        if vector >= 16 {
            Some(Self(vector))
        } else {
            None
        }
    }

    /// The vector number.
    pub const fn get(self) -> u8 {
        self.0
    }
}

/// How the APIC delivers a performance-monitoring interrupt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PmiDelivery {
    /// Fixed delivery (000b) through the given vector.
    Fixed(Vector),
    /// NMI delivery (100b); the vector field is ignored.
    Nmi,
}

register! {
    /// The LVT performance-counter register (offset 340H; SDM Vol. 3A
    /// Figure 11-8, "Local Vector Table"). Everything but the fields below
    /// is reserved.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct LvtPerfCounter(u32) {
        /// Vector (bits 7:0).
        VECTOR: 0..=7 => vector_bits, with_vector_bits: u8;
        /// Delivery mode (bits 10:8): 000b fixed, 100b NMI.
        DELIVERY_MODE: 8..=10 => delivery_mode, with_delivery_mode: u8;
        /// Delivery status (bit 12, read-only): an interrupt is still
        /// pending delivery.
        DELIVERY_STATUS: 12 => send_pending, with_send_pending: bool;
        /// Mask (bit 16).
        MASK: 16 => is_masked, with_mask: bool;
    }
}

impl LvtPerfCounter {
    /// Delivery mode fixed (000b).
    const MODE_FIXED: u8 = 0b000;
    /// Delivery mode NMI (100b).
    const MODE_NMI: u8 = 0b100;
    /// The bits software may write: vector, delivery mode and mask.
    const WRITABLE: u32 =
        (Self::VECTOR.mask() | Self::DELIVERY_MODE.mask() | Self::MASK.mask()) as u32;

    /// An unmasked entry delivering PMIs as `delivery` says.
    #[inline]
    pub const fn new(delivery: PmiDelivery) -> Self {
        match delivery {
            PmiDelivery::Fixed(v) => Self(0).with_vector_bits(v.0),
            PmiDelivery::Nmi => Self(0).with_delivery_mode(Self::MODE_NMI),
        }
    }

    /// The value after reset: masked, vector 0, fixed.
    pub const RESET: Self = Self(0).with_mask(true);

    /// The same entry with the mask bit set.
    #[inline]
    pub const fn masked(self) -> Self {
        self.with_mask(true)
    }

    /// The same entry with the mask bit clear.
    #[inline]
    pub const fn unmasked(self) -> Self {
        self.with_mask(false)
    }

    /// The delivery the entry selects, or `None` for a mode a PMI cannot use
    /// (or a fixed vector below 16).
    #[inline]
    pub const fn delivery(self) -> Option<PmiDelivery> {
        match self.delivery_mode() {
            Self::MODE_FIXED => match Vector::new(self.vector_bits()) {
                Some(v) => Some(PmiDelivery::Fixed(v)),
                None => None,
            },
            Self::MODE_NMI => Some(PmiDelivery::Nmi),
            _ => None,
        }
    }

    /// The bits software may write: vector, delivery mode and mask (the
    /// delivery status is read-only, the rest reserved).
    #[inline]
    pub const fn writable_bits(self) -> u32 {
        self.0 & Self::WRITABLE
    }

    /// Decodes a raw register value; reserved bits are dropped.
    #[inline]
    pub const fn from_bits(bits: u32) -> Self {
        Self(bits & Self::DEFINED as u32)
    }
}

register! {
    /// The interrupt command register as one 64-bit value (SDM Vol. 3A
    /// Figure 11-12, "Interrupt Command Register"; 11.12.9 for x2APIC
    /// mode): xAPIC writes its high half (offset 310H) and then its low
    /// half (300H); x2APIC writes it whole (MSR 830H).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct Icr(u64) {
        /// Vector (bits 7:0).
        VECTOR: 0..=7 => vector, with_vector: u8;
        /// Delivery mode (bits 10:8): 000b fixed, 100b NMI, 101b INIT,
        /// 110b start-up.
        DELIVERY_MODE: 8..=10 => delivery_mode, with_delivery_mode: u8;
        /// Delivery status (bit 12, xAPIC only): the IPI is not yet sent.
        DELIVERY_STATUS: 12 => send_pending, with_send_pending: bool;
        /// Level (bit 14): assert.
        LEVEL: 14 => assert, with_assert: bool;
        /// Destination shorthand (bits 19:18): 00b none, 01b self, 11b all
        /// but self.
        SHORTHAND: 18..=19 => shorthand, with_shorthand: u8;
        /// Destination in xAPIC mode (bits 63:56: the high half's 31:24).
        XAPIC_DESTINATION: 56..=63 => xapic_destination, with_xapic_destination: u8;
        /// Destination in x2APIC mode (bits 63:32).
        X2APIC_DESTINATION: 32..=63 => x2apic_destination, with_x2apic_destination: u32;
    }
}

impl Icr {
    /// Shorthand 01b: this CPU.
    const SELF: u8 = 0b01;
    /// Shorthand 11b: every CPU but this one.
    const ALL_BUT_SELF: u8 = 0b11;

    /// The ICR that sends `what` to `to` (physical destination mode; an
    /// xAPIC ID is its low 8 bits).
    const fn ipi(to: IpiDestination, what: IpiDelivery, x2apic: bool) -> Icr {
        let icr = what.icr();
        match to {
            IpiDestination::Apic(id) if x2apic => icr.with_x2apic_destination(id),
            IpiDestination::Apic(id) => icr.with_xapic_destination(id as u8),
            IpiDestination::AllButSelf => icr.with_shorthand(Self::ALL_BUT_SELF),
        }
    }

    /// The low half (xAPIC offset 300H).
    const fn low(self) -> u32 {
        self.0 as u32
    }

    /// The high half (xAPIC offset 310H).
    const fn high(self) -> u32 {
        (self.0 >> 32) as u32
    }
}

register! {
    /// The spurious-interrupt vector register (SVR; SDM Vol. 3A Figure
    /// 11-23).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct Svr(u32) {
        /// Spurious vector (bits 7:0).
        VECTOR: 0..=7 => vector, with_vector: u8;
        /// APIC software enable (bit 8).
        ENABLE: 8 => enabled, with_enabled: bool;
    }
}

register! {
    /// The xAPIC ID register (offset 20H; SDM Vol. 3A Figure 11-6).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct ApicIdRegister(u32) {
        /// The APIC ID (bits 31:24).
        ID: 24..=31 => id, with_id: u8;
    }
}

/// What an inter-processor interrupt delivers (the ICR delivery mode, SDM
/// Vol. 3A 11.6.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum IpiDelivery {
    /// A fixed interrupt through `vector` (000b).
    Fixed(Vector),
    /// An NMI (100b).
    Nmi,
    /// INIT (101b, level assert): the start of INIT-SIPI-SIPI (SDM Vol. 3A
    /// 9.4.4.1).
    Init,
    /// Start-up (110b): the target starts in real mode at `page * 4096`.
    Startup(u8),
}

/// Whom an IPI goes to (the ICR destination shorthand).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum IpiDestination {
    /// The APIC with this ID (physical destination mode, no shorthand).
    Apic(u32),
    /// Every APIC but the sender's (shorthand 11b).
    AllButSelf,
}

impl IpiDelivery {
    /// The ICR's vector, delivery mode and level assert.
    const fn icr(self) -> Icr {
        let assert = Icr(0).with_assert(true);
        match self {
            IpiDelivery::Fixed(v) => assert.with_vector(v.0),
            IpiDelivery::Nmi => assert.with_delivery_mode(0b100),
            IpiDelivery::Init => assert.with_delivery_mode(0b101),
            IpiDelivery::Startup(page) => assert.with_delivery_mode(0b110).with_vector(page),
        }
    }
}

/// Where a PMI handler writes the LVT performance-counter entry to unmask
/// it: the [`LocalApic`] in a kernel, a recorder in tests.
pub trait LvtPerfCounterEntry {
    /// Write the LVT performance-counter register.
    fn write_lvt_perf_counter(&mut self, entry: LvtPerfCounter);
}

/// No entry to rewrite: the PMU interrupt of an Itanium processor (its PMV)
/// is not masked by its delivery, so its kernel passes `&mut ()`.
impl LvtPerfCounterEntry for () {
    #[inline(always)]
    fn write_lvt_perf_counter(&mut self, _: LvtPerfCounter) {}
}

impl LvtPerfCounterEntry for LocalApic {
    fn write_lvt_perf_counter(&mut self, entry: LvtPerfCounter) {
        self.set_perf_counter_entry(entry);
    }
}

/// A local APIC through which [`deliver_model_pmi`] raises a PMU model's
/// interrupt: the LVT performance-counter entry and a self-interrupt.
/// [`LocalApic`] (xAPIC) and [`X2Apic`] implement it; a kernel with an APIC
/// type of its own implements these four register operations.
pub trait PmiApic {
    /// A register access's error: none for the xAPIC, the MSR backend's for
    /// the x2APIC.
    type Error;

    /// Reads the LVT performance-counter entry.
    fn lvt_perf_counter(&mut self) -> Result<LvtPerfCounter, Self::Error>;

    /// Writes the LVT performance-counter entry.
    fn set_lvt_perf_counter(&mut self, entry: LvtPerfCounter) -> Result<(), Self::Error>;

    /// Sends `vector` to this CPU, fixed delivery.
    fn send_self_ipi(&mut self, vector: Vector) -> Result<(), Self::Error>;

    /// Sends an NMI to this CPU.
    fn send_self_nmi(&mut self) -> Result<(), Self::Error>;
}

impl PmiApic for LocalApic {
    type Error = core::convert::Infallible;

    fn lvt_perf_counter(&mut self) -> Result<LvtPerfCounter, Self::Error> {
        Ok(self.perf_counter_entry())
    }

    fn set_lvt_perf_counter(&mut self, entry: LvtPerfCounter) -> Result<(), Self::Error> {
        self.set_perf_counter_entry(entry);
        Ok(())
    }

    fn send_self_ipi(&mut self, vector: Vector) -> Result<(), Self::Error> {
        self.self_ipi(vector);
        Ok(())
    }

    fn send_self_nmi(&mut self) -> Result<(), Self::Error> {
        self.self_nmi();
        Ok(())
    }
}

/// What [`deliver_model_pmi`] did with a PMI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ModelPmi {
    /// Sent as the entry's fixed vector: pending until interrupts are on.
    Vector(Vector),
    /// Sent as an NMI.
    Nmi,
    /// Not sent: the entry is masked (the previous PMI's handler has not
    /// unmasked it yet).
    Masked,
    /// Not sent: the entry's delivery mode is neither fixed nor NMI.
    Invalid,
}

/// Delivers one PMI a PMU model raised (its `take_pmi` returned it)
/// through `apic`, as the APIC of a NetBurst processor or one with the
/// architectural PMU delivers a counter's overflow: nothing while the LVT
/// performance-counter entry is masked; otherwise it sets the entry's mask
/// bit and sends the entry's vector, or an NMI, to this CPU. The kernel's
/// handler then runs as for a real overflow, and must unmask the entry
/// ([`crate::arch::handle_pmi`] does). Emulated CPUs (QEMU's TCG) have no PMU
/// behind the entry: this is the model's interrupt line.
///
/// Three or four register accesses: read the entry, write it masked, send
/// (the x2APIC NMI reads the APIC ID first); one when the entry is masked
/// or invalid.
///
/// ```
/// use pmu::apic::{LvtPerfCounter, ModelPmi, PmiApic, PmiDelivery, Vector, deliver_model_pmi};
///
/// /// An APIC that records what is sent (a kernel passes its `LocalApic`).
/// struct Apic { lvt: LvtPerfCounter, sent: Vec<&'static str> }
/// impl PmiApic for Apic {
///     type Error = core::convert::Infallible;
///     fn lvt_perf_counter(&mut self) -> Result<LvtPerfCounter, Self::Error> { Ok(self.lvt) }
///     fn set_lvt_perf_counter(&mut self, e: LvtPerfCounter) -> Result<(), Self::Error> {
///         self.lvt = e;
///         Ok(())
///     }
///     fn send_self_ipi(&mut self, _: Vector) -> Result<(), Self::Error> { Ok(self.sent.push("ipi")) }
///     fn send_self_nmi(&mut self) -> Result<(), Self::Error> { Ok(self.sent.push("nmi")) }
/// }
///
/// let vector = Vector::new(0xF0).unwrap();
/// let mut apic = Apic { lvt: LvtPerfCounter::new(PmiDelivery::Fixed(vector)), sent: vec![] };
/// assert_eq!(deliver_model_pmi(&mut apic), Ok(ModelPmi::Vector(vector)));
/// assert!(apic.lvt.is_masked(), "masked by the delivery, as the hardware does");
/// assert_eq!(deliver_model_pmi(&mut apic), Ok(ModelPmi::Masked), "until the handler unmasks it");
/// assert_eq!(apic.sent, ["ipi"]);
/// ```
pub fn deliver_model_pmi<A: PmiApic + ?Sized>(apic: &mut A) -> Result<ModelPmi, A::Error> {
    deliver(apic, true)
}

/// Delivers one PMI a PMU model raised through `apic` as AMD's local APIC
/// delivers a counter's overflow: as [`deliver_model_pmi`], but without
/// setting the entry's mask bit (AMD's APIC leaves it clear: Linux's
/// `amd_pmu_v2_handle_irq`), so that the next PMI is delivered whether or
/// not the handler writes the entry (`crate::arch::amd::pmi` writes it
/// before PerfMonV2 only). Two or three register accesses: read the entry,
/// send (the x2APIC NMI reads the APIC ID first); one when the entry is
/// masked or invalid.
pub fn deliver_model_pmi_unmasked<A: PmiApic + ?Sized>(apic: &mut A) -> Result<ModelPmi, A::Error> {
    deliver(apic, false)
}

/// [`deliver_model_pmi`], masking the entry as it delivers (`mask`) or not.
fn deliver<A: PmiApic + ?Sized>(apic: &mut A, mask: bool) -> Result<ModelPmi, A::Error> {
    let entry = apic.lvt_perf_counter()?;
    if entry.is_masked() {
        return Ok(ModelPmi::Masked);
    }
    let Some(delivery) = entry.delivery() else {
        return Ok(ModelPmi::Invalid);
    };
    if mask {
        apic.set_lvt_perf_counter(entry.masked())?;
    }
    match delivery {
        PmiDelivery::Fixed(vector) => {
            apic.send_self_ipi(vector)?;
            Ok(ModelPmi::Vector(vector))
        }
        PmiDelivery::Nmi => {
            apic.send_self_nmi()?;
            Ok(ModelPmi::Nmi)
        }
    }
}

/// The memory-mapped local APIC of the CPU the code runs on.
///
/// `!Send` and `!Sync`: every CPU sees its own APIC at the same address, so a
/// handle moved to another CPU would silently program that CPU's APIC.
#[derive(Debug)]
pub struct LocalApic {
    base: NonNull<u32>,
}

impl LocalApic {
    /// Takes the xAPIC page at virtual address `base`.
    ///
    /// # Safety
    ///
    /// `base` must be the virtual address of this CPU's xAPIC register page
    /// (4 KiB, mapped uncacheable), valid for as long as the handle lives, and
    /// the CPU must be in xAPIC mode (not x2APIC, where the page is inert).
    /// Other code may use the APIC too, but not the registers this handle
    /// writes (LVT performance counter, SVR, ICR) concurrently.
    pub const unsafe fn new(base: NonNull<u8>) -> Self {
        Self { base: base.cast() }
    }

    fn register(&self, offset: usize) -> VolatilePtr<'_, u32> {
        // SAFETY: `new`'s contract makes the whole page valid MMIO for the
        // handle's lifetime, and every offset used is a 16-byte aligned
        // register inside that page.
        unsafe { VolatilePtr::new(self.base.byte_add(offset)) }
    }

    /// The local APIC ID register.
    pub fn id(&self) -> u32 {
        u32::from(ApicIdRegister(self.register(reg::ID).read()).id())
    }

    /// The version register: version in 7:0, highest LVT entry in 23:16.
    pub fn version(&self) -> u32 {
        self.register(reg::VERSION).read()
    }

    /// Software-enables the APIC (SVR bit 8) with `spurious` as the spurious
    /// vector, and accepts every priority (TPR = 0).
    pub fn enable(&mut self, spurious: Vector) {
        self.register(reg::TPR).write(0);
        let svr = Svr(0).with_enabled(true).with_vector(spurious.get());
        self.register(reg::SVR).write(svr.bits());
    }

    /// Signals end of interrupt for the vector in service.
    pub fn eoi(&mut self) {
        self.register(reg::EOI).write(0);
    }

    /// Reads the LVT performance-counter entry.
    pub fn perf_counter_entry(&self) -> LvtPerfCounter {
        LvtPerfCounter::from_bits(self.register(reg::LVT_PERF_COUNTER).read())
    }

    /// Writes the LVT performance-counter entry: one MMIO write.
    pub fn set_perf_counter_entry(&mut self, entry: LvtPerfCounter) {
        self.register(reg::LVT_PERF_COUNTER)
            .write(entry.writable_bits());
    }

    /// Sends `vector` to this CPU (ICR destination shorthand "self", fixed
    /// delivery, SDM Vol. 3A 11.6.1). Test kernels use it to raise the PMI
    /// vector without a counter overflow.
    pub fn self_ipi(&mut self, vector: Vector) {
        let icr = IpiDelivery::Fixed(vector).icr().with_shorthand(Icr::SELF);
        self.register(reg::ICR_HIGH).write(icr.high());
        self.register(reg::ICR_LOW).write(icr.low());
    }

    /// Sends an NMI to this CPU (ICR delivery mode NMI, addressed to the
    /// local APIC ID, since the "self" shorthand is defined for fixed
    /// delivery only; SDM Vol. 3A 11.6.1). Test kernels use it to raise a
    /// PMI configured for NMI delivery.
    pub fn self_nmi(&mut self) {
        let id = self.id();
        self.send_ipi(IpiDestination::Apic(id), IpiDelivery::Nmi);
    }

    /// Sends an inter-processor interrupt (SDM Vol. 3A 11.6.1): the ICR's
    /// high word (the destination), then its low word, which sends it; then
    /// waits until the APIC reports it sent (delivery status clear).
    pub fn send_ipi(&mut self, to: IpiDestination, what: IpiDelivery) {
        let icr = Icr::ipi(to, what, false);
        self.register(reg::ICR_HIGH).write(icr.high());
        self.register(reg::ICR_LOW).write(icr.low());
        while Icr(u64::from(self.register(reg::ICR_LOW).read())).send_pending() {
            core::hint::spin_loop();
        }
    }

    /// Whether `vector` is in service (ISR bit set): delivered, not yet EOI'd.
    pub fn in_service(&self, vector: u8) -> bool {
        self.vector_bit(reg::ISR, vector)
    }

    /// Whether `vector` is pending (IRR bit set): accepted, not yet delivered.
    pub fn pending(&self, vector: u8) -> bool {
        self.vector_bit(reg::IRR, vector)
    }

    fn vector_bit(&self, bank: usize, vector: u8) -> bool {
        let word = self.register(bank + usize::from(vector / 32) * 0x10).read();
        word & (1 << (vector % 32)) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_below_16_are_rejected() {
        assert_eq!(Vector::new(15), None);
        assert_eq!(Vector::new(16).map(Vector::get), Some(16));
        assert_eq!(Vector::new(255).map(Vector::get), Some(255));
    }

    #[test]
    fn lvt_entry_layout() {
        let v = Vector::new(0xF0).unwrap();
        let fixed = LvtPerfCounter::new(PmiDelivery::Fixed(v));
        assert_eq!(fixed.bits(), 0xF0);
        assert_eq!(fixed.masked().bits(), 0x1_00F0);
        assert_eq!(fixed.masked().unmasked(), fixed);
        assert_eq!(fixed.delivery(), Some(PmiDelivery::Fixed(v)));
        let nmi = LvtPerfCounter::new(PmiDelivery::Nmi);
        assert_eq!(nmi.bits(), 0x400);
        assert_eq!(nmi.delivery(), Some(PmiDelivery::Nmi));
        assert!(LvtPerfCounter::RESET.is_masked());
        assert_eq!(
            LvtPerfCounter::from_bits(0x0001_1000 | 0x7F0).bits(),
            0x0001_17F0
        );
        assert!(LvtPerfCounter::from_bits(0x1000).send_pending());
        assert_eq!(LvtPerfCounter::from_bits(0xFFFF_FFFF).bits(), 0x0001_17FF);
        // SMI (010b) and ExtINT (111b) are not PMI deliveries; nor is vector 5.
        assert_eq!(LvtPerfCounter::from_bits(0x200).delivery(), None);
        assert_eq!(LvtPerfCounter::from_bits(0x700).delivery(), None);
        assert_eq!(LvtPerfCounter::from_bits(0x5).delivery(), None);
    }
}

//! The x2APIC layer against a small model of the x2APIC MSRs written from
//! SDM Vol. 3A 11.12 (a test instrument: it raises #GP where the manual
//! says, so a wrong value or register fails), with the exact MSR traffic
//! counted by the recording backend.

use core::convert::Infallible;
use core::fmt;
use std::collections::BTreeMap;
use std::vec::Vec;

use super::*;
use crate::access::{AccessCounts, Recording};
use crate::apic::PmiDelivery;

/// Why the model refused an access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Gp {
    /// An x2APIC MSR outside x2APIC mode (SDM 11.12.1).
    NotX2ApicMode(u32),
    /// Reserved bits set, or a non-zero EOI (11.12.1.2, 11.12.5).
    Reserved(u32),
    /// A read of a write-only register (EOI, SELF IPI).
    WriteOnly(u32),
    /// No such MSR.
    Unknown(u32),
}

impl fmt::Display for Gp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#GP: {self:?}")
    }
}

/// The x2APIC MSRs of one CPU, with APIC ID 7.
#[derive(Default)]
struct Model {
    base: u64,
    regs: BTreeMap<u32, u64>,
    /// Vectors sent with SELF IPI, and ICR values written.
    self_ipis: Vec<u8>,
    icr: Vec<u64>,
    eois: u32,
}

impl Model {
    fn new() -> Model {
        Model {
            // xAPIC mode at the default base: enabled, not EXTD.
            base: 0xFEE0_0000 | APIC_BASE_ENABLE,
            ..Model::default()
        }
    }

    /// The bits a write may set, by register.
    fn writable(msr: u32) -> Option<u64> {
        Some(match msr {
            msr::TPR => 0xFF,
            msr::SVR => 0x11FF,
            msr::EOI => 0,
            msr::LVT_PERF_COUNTER => 0x1_07FF,
            msr::SELF_IPI => 0xFF,
            // Vector, delivery mode, destination mode, level, trigger,
            // shorthand, destination (63:32).
            msr::ICR => 0xFFFF_FFFF_000C_CFFF,
            _ => return None,
        })
    }
}

impl crate::access::MsrAccess for Model {
    type Error = Gp;

    fn read_msr(&mut self, msr: u32) -> Result<u64, Gp> {
        if msr == IA32_APIC_BASE {
            return Ok(self.base);
        }
        if self.base & APIC_BASE_EXTD == 0 {
            return Err(Gp::NotX2ApicMode(msr));
        }
        match msr {
            msr::EOI | msr::SELF_IPI => Err(Gp::WriteOnly(msr)),
            msr::ID => Ok(7),
            msr::VERSION => Ok(0x0005_0014),
            0x810..=0x817 | 0x820..=0x827 => Ok(self.regs.get(&msr).copied().unwrap_or(0)),
            _ if Model::writable(msr).is_some() => Ok(self.regs.get(&msr).copied().unwrap_or(0)),
            _ => Err(Gp::Unknown(msr)),
        }
    }

    fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Gp> {
        if msr == IA32_APIC_BASE {
            self.base = value;
            return Ok(());
        }
        if self.base & APIC_BASE_EXTD == 0 {
            return Err(Gp::NotX2ApicMode(msr));
        }
        let writable = Model::writable(msr).ok_or(Gp::Unknown(msr))?;
        if value & !writable != 0 {
            return Err(Gp::Reserved(msr));
        }
        match msr {
            msr::EOI => self.eois += 1,
            msr::SELF_IPI => self.self_ipis.push(value as u8),
            msr::ICR => self.icr.push(value),
            _ => {
                self.regs.insert(msr, value);
            }
        }
        Ok(())
    }

    fn rdpmc(&mut self, index: u32) -> Result<u64, Gp> {
        Err(Gp::Unknown(index))
    }
}

fn counts(reads: u32, writes: u32) -> AccessCounts {
    AccessCounts::msr(reads, writes, 0)
}

#[test]
fn every_operation_is_the_manuals_msr_access() {
    let model = Recording::<_, 16>::new(Model::new());
    let mut apic = X2Apic::new(model);
    assert_eq!(
        apic.id(),
        Err(Gp::NotX2ApicMode(msr::ID)),
        "xAPIC mode: the MSRs fault"
    );
    let mut apic = X2Apic::enter(apic.msr).unwrap();
    assert_eq!(
        apic.msr().take_counts(),
        counts(2, 1),
        "the failed read, base RDMSR, WRMSR"
    );
    assert_eq!(
        apic.msr().inner_mut().base,
        0xFEE0_0000 | APIC_BASE_ENABLE | APIC_BASE_EXTD
    );
    assert_eq!(apic.id(), Ok(7));
    assert_eq!(
        apic.version().map(|v| v >> 16 & 0xFF),
        Ok(5),
        "highest LVT entry"
    );
    apic.msr().clear();

    let spurious = Vector::new(0xFF).unwrap();
    apic.enable(spurious).unwrap();
    assert_eq!(apic.msr().take_counts(), counts(0, 2), "TPR, SVR");
    assert_eq!(apic.msr().inner_mut().regs[&msr::SVR], 0x1FF);

    let entry = LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(0xF0).unwrap()));
    apic.set_perf_counter_entry(entry.masked()).unwrap();
    assert_eq!(apic.msr().take_counts(), counts(0, 1));
    assert_eq!(apic.perf_counter_entry(), Ok(entry.masked()));
    // The delivery-status bit is read-only: never written back.
    let with_status = LvtPerfCounter::from_bits(entry.bits() | 1 << 12);
    apic.set_perf_counter_entry(with_status).unwrap();
    assert_eq!(apic.perf_counter_entry(), Ok(entry));
    apic.set_perf_counter_entry(LvtPerfCounter::new(PmiDelivery::Nmi))
        .unwrap();
    assert_eq!(apic.msr().inner_mut().regs[&msr::LVT_PERF_COUNTER], 0x400);
    apic.msr().clear();

    apic.eoi().unwrap();
    apic.self_ipi(Vector::new(0xF0).unwrap()).unwrap();
    assert_eq!(apic.msr().take_counts(), counts(0, 2), "one WRMSR each");
    apic.self_nmi().unwrap();
    assert_eq!(apic.msr().take_counts(), counts(1, 1), "ID, ICR");
    let m = apic.msr().inner_mut();
    assert_eq!((m.eois, m.self_ipis.as_slice()), (1, &[0xF0][..]));
    assert_eq!(m.icr, [7 << 32 | 0x4400], "NMI, assert, to APIC 7");
    m.icr.clear();

    // IPIs to other CPUs: one ICR write each, the x2APIC ID in 63:32.
    let wake = Vector::new(0xE0).unwrap();
    for (to, what) in [
        (IpiDestination::Apic(0x1_0003), IpiDelivery::Fixed(wake)),
        (IpiDestination::Apic(2), IpiDelivery::Nmi),
        (IpiDestination::AllButSelf, IpiDelivery::Init),
        (IpiDestination::AllButSelf, IpiDelivery::Startup(0x08)),
    ] {
        apic.send_ipi(to, what).unwrap();
    }
    assert_eq!(apic.msr().take_counts(), counts(0, 4), "one WRMSR each");
    assert_eq!(
        apic.msr().inner_mut().icr,
        [
            0x1_0003 << 32 | 0x40E0,
            2 << 32 | 0x4400,
            0b11 << 18 | 0x4500,
            0b11 << 18 | 0x4608,
        ]
    );
    let m = apic.msr().inner_mut();

    m.regs.insert(msr::ISR0 + 7, 1 << 16);
    m.regs.insert(msr::IRR0 + 1, 1 << 1);
    assert_eq!(apic.in_service(0xF0), Ok(true));
    assert_eq!(apic.in_service(0xF1), Ok(false));
    assert_eq!(apic.pending(0x21), Ok(true));
    // The model refuses what the hardware refuses.
    assert_eq!(
        apic.msr().write_msr(msr::EOI, 1),
        Err(Gp::Reserved(msr::EOI))
    );
    assert_eq!(
        apic.msr().write_msr(msr::SELF_IPI, 0x1F0),
        Err(Gp::Reserved(msr::SELF_IPI))
    );
}

/// The PMI handler unmasks the entry through the x2APIC: one WRMSR of the
/// LVT performance-counter register.
#[test]
fn the_pmi_handler_unmasks_through_the_x2apic() {
    struct Msrs(BTreeMap<u32, u64>);
    impl crate::access::MsrAccess for Msrs {
        type Error = Infallible;
        fn read_msr(&mut self, msr: u32) -> Result<u64, Infallible> {
            Ok(self.0.get(&msr).copied().unwrap_or(0))
        }
        fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Infallible> {
            self.0.insert(msr, value);
            Ok(())
        }
        fn rdpmc(&mut self, _: u32) -> Result<u64, Infallible> {
            Ok(0)
        }
    }
    let state = crate::testing::netburst_pmu();
    let mut apic = X2Apic::new(Msrs(BTreeMap::new()));
    let entry = LvtPerfCounter::new(PmiDelivery::Nmi);
    let mut pmu = Msrs(BTreeMap::new());
    let out = crate::arch::handle_pmi(
        state.logical(crate::arch::netburst::LogicalProcessor::T0),
        &mut pmu,
        &mut apic,
        entry,
        0,
        |_| {},
    );
    assert_eq!(out.map(|o| o.is_spurious()), Ok(true));
    assert_eq!(apic.msr().0.get(&msr::LVT_PERF_COUNTER), Some(&0x400));
}

/// CPUID.01H:ECX bit 21 says whether x2APIC mode exists.
#[test]
fn x2apic_support_is_cpuid_leaf_1_ecx_bit_21() {
    use crate::detect::{Cpuid, CpuidResult, x2apic_supported};
    struct Leaf1(u32);
    impl Cpuid for Leaf1 {
        fn cpuid(&self, leaf: u32, _: u32) -> CpuidResult {
            let (eax, ecx) = match leaf {
                0 => (1, 0),
                1 => (0, self.0),
                _ => (0, 0),
            };
            CpuidResult {
                eax,
                ebx: 0,
                ecx,
                edx: 0,
            }
        }
    }
    assert!(x2apic_supported(&Leaf1(1 << 21)));
    assert!(!x2apic_supported(&Leaf1(!(1 << 21))));
}

/// A model's PMI delivered through the x2APIC (`deliver_model_pmi`): the
/// entry read, written back masked, the vector sent with SELF IPI (or an
/// NMI through the ICR), exactly those MSR accesses in that order; nothing
/// but the read while the entry is masked or its delivery mode invalid.
#[test]
fn a_model_pmi_is_delivered_as_the_hardware_delivers_it() {
    use crate::access::Access::{ReadMsr, WriteMsr};
    use crate::apic::{ModelPmi, deliver_model_pmi};

    let mut apic = X2Apic::enter(Recording::<_, 16>::new(Model::new())).unwrap();
    let vector = Vector::new(0xF0).unwrap();
    let fixed = LvtPerfCounter::new(PmiDelivery::Fixed(vector));
    apic.set_perf_counter_entry(fixed).unwrap();
    apic.msr().clear();

    assert_eq!(deliver_model_pmi(&mut apic), Ok(ModelPmi::Vector(vector)));
    assert_eq!(
        apic.msr().log(),
        [
            ReadMsr {
                msr: msr::LVT_PERF_COUNTER,
                value: 0xF0
            },
            WriteMsr {
                msr: msr::LVT_PERF_COUNTER,
                value: 0x1_00F0
            },
            WriteMsr {
                msr: msr::SELF_IPI,
                value: 0xF0
            },
        ]
    );
    apic.msr().clear();
    // Masked until the handler unmasks it: the next PMI is not sent.
    assert_eq!(deliver_model_pmi(&mut apic), Ok(ModelPmi::Masked));
    assert_eq!(apic.msr().take_counts(), counts(1, 0));
    assert_eq!(apic.msr().inner_mut().self_ipis, [0xF0]);

    apic.set_perf_counter_entry(LvtPerfCounter::new(PmiDelivery::Nmi))
        .unwrap();
    apic.msr().clear();
    assert_eq!(deliver_model_pmi(&mut apic), Ok(ModelPmi::Nmi));
    assert_eq!(apic.msr().take_counts(), counts(2, 2), "LVT, ID; LVT, ICR");
    assert_eq!(apic.msr().inner_mut().icr, [7 << 32 | 0x4400]);
    assert_eq!(apic.perf_counter_entry().map(|e| e.is_masked()), Ok(true));

    // SMI delivery (010b) is no PMI delivery: nothing is sent.
    apic.set_perf_counter_entry(LvtPerfCounter::from_bits(0b010 << 8))
        .unwrap();
    apic.msr().clear();
    assert_eq!(deliver_model_pmi(&mut apic), Ok(ModelPmi::Invalid));
    assert_eq!(apic.msr().take_counts(), counts(1, 0));

    // A faulting access is the caller's error, not a panic.
    let mut xapic_mode = X2Apic::new(Model::new());
    assert_eq!(
        deliver_model_pmi(&mut xapic_mode),
        Err(Gp::NotX2ApicMode(msr::LVT_PERF_COUNTER))
    );
}

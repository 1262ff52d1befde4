//! The emulated architectural PMU: counting, PMIs through the virtual LVT,
//! the guest's images.

use super::*;
use crate::apic::Vector;
use crate::arch::archperf::ArchEvent;
use crate::virt::archperf::GuestPolicy;
use crate::virt::x86::{PmuMsr, classify};

fn entry() -> LvtPerfCounter {
    LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(0xF0).unwrap()))
}

/// A guest samples instructions every 100 on its emulated PMU: the PMI is
/// delivered at the next entry and masks the entry; held while masked.
#[test]
fn a_guest_samples_on_its_virtual_pmu() {
    let pmu = GuestPolicy::new(2, 4, 3).checked().unwrap();
    let mut v = VirtualPmu::new(pmu);
    v.write_lvt(entry());
    // PERFEVTSEL0: instructions, OS, INT, EN; PMC0 at -100.
    assert_eq!(v.wrmsr(0x186, 0xC0 | 1 << 17 | 1 << 20 | 1 << 22), Ok(true));
    assert_eq!(v.wrmsr(0xC1, (-100i64) as u64), Ok(true));
    assert_eq!(v.rdmsr(0xC1), Ok(Some((1 << 48) - 100)));
    v.feed(Event::arch(ArchEvent::InstructionsRetired, 99));
    assert_eq!(v.pmi_to_inject(), None);
    v.feed(Event::arch(ArchEvent::InstructionsRetired, 1));
    assert_eq!(v.rdmsr(0x38E), Ok(Some(1)), "GLOBAL_STATUS: PMC0");
    assert!(v.pmi_to_inject().is_some());
    assert!(v.lvt().is_masked());
    assert_eq!(v.wrmsr(0x390, 1), Ok(true));
    assert_eq!(v.rdmsr(0x38E), Ok(Some(0)));
    assert_eq!(v.injected(), 1);
}

mod isolation;
mod kvm;

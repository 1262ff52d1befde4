//! The emulated AMD PMU: counting, PMIs through the virtual LVT left
//! unmasked, the aliases.

use super::*;
use crate::apic::Vector;
use crate::virt::amd::GuestPolicy;

fn entry() -> LvtPerfCounter {
    LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(0xF0).unwrap()))
}

/// A PerfMonV2 guest samples retired instructions every 100: its PMI is
/// delivered at the next entry and the entry stays unmasked.
#[test]
fn a_guest_samples_on_its_virtual_pmu() {
    let pmu = GuestPolicy::new(Generation::PerfMonV2 { counters: 6 })
        .checked()
        .unwrap();
    let mut v = VirtualPmu::new(pmu);
    v.write_lvt(entry());
    // PERF_LEGACY_CTL0: retired instructions, OS, INT, EN (and HostOnly,
    // dropped); PERF_CTR0 (through its extended address) at -100.
    let ctl = 0xC0 | 1 << 17 | 1 << 20 | 1 << 22;
    assert_eq!(v.wrmsr(0xC001_0000, ctl | 1 << 41), Ok(true));
    assert_eq!(v.rdmsr(0xC001_0200), Ok(Some(ctl)));
    assert_eq!(v.wrmsr(0xC001_0201, (-100i64) as u64), Ok(true));
    assert_eq!(v.rdmsr(0xC001_0004), Ok(Some((1 << 48) - 100)));
    v.feed(Event::new(RETIRED_INSTRUCTIONS, 0, 100));
    assert_eq!(v.rdmsr(0xC000_0300), Ok(Some(1)));
    assert!(v.pmi_to_inject().is_some());
    assert!(!v.lvt().is_masked(), "AMD's APIC leaves the entry unmasked");
    assert_eq!(v.wrmsr(0xC000_0302, 1), Ok(true));
    assert_eq!(v.rdmsr(0xC000_0300), Ok(Some(0)));
}

mod isolation;
mod kvm;
mod passthrough;

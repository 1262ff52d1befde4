//! The emulated architectural PMU: exact counts, the guest's images of an
//! unavailable event's select, PMIs through the virtual LVT, a PMI owed
//! across a switch, the PMU moving with its vCPU to another CPU, and the
//! noninterference and isolation properties (the submodules).

use super::*;
use crate::apic::Vector;
use crate::arch::archperf::ArchEvent;
use crate::arch::ia32::Privilege;
use crate::model::archperf::{Branch, BranchKind};
use crate::virt::archperf::GuestPolicy;
use crate::virt::x86::{PmuMsr, classify};

mod isolation;
mod kvm;
mod passthrough;

fn entry() -> LvtPerfCounter {
    LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(0xF0).unwrap()))
}

fn vpmu(p: GuestPolicy) -> VirtualPmu {
    let mut v = VirtualPmu::new(p.checked().unwrap());
    v.write_lvt(entry());
    v
}

const OS: u64 = 1 << 17;
const USR: u64 = 1 << 16;
const INT: u64 = 1 << 20;
const EN: u64 = 1 << 22;
const INSTR: u64 = 0xC0;

/// A guest samples instructions every 100 on its emulated PMU: the PMI is
/// delivered at the next entry and masks the entry; held while masked,
/// delivered once the handler unmasks.
#[test]
fn a_guest_samples_on_its_virtual_pmu() {
    let mut v = vpmu(GuestPolicy::new(2, 4, 3));
    assert_eq!(v.wrmsr(0x186, INSTR | OS | INT | EN), Ok(true));
    assert_eq!(v.wrmsr(0xC1, (-100i64) as u64), Ok(true));
    assert_eq!(v.rdmsr(0xC1), Ok(Some((1 << 48) - 100)));
    v.feed(Event::arch(ArchEvent::InstructionsRetired, 99));
    assert_eq!(v.pmi_to_inject(), None);
    v.feed(Event::arch(ArchEvent::InstructionsRetired, 1));
    assert_eq!(v.rdmsr(0x38E), Ok(Some(1)), "GLOBAL_STATUS: PMC0");
    assert!(v.pmi_to_inject().is_some());
    assert!(v.lvt().is_masked(), "masked by the delivery");
    // The handler re-arms and clears the status, the entry still masked.
    assert_eq!(v.wrmsr(0xC1, (-100i64) as u64), Ok(true));
    assert_eq!(v.wrmsr(0x390, 1), Ok(true));
    assert_eq!(v.rdmsr(0x38E), Ok(Some(0)));
    v.feed(Event::arch(ArchEvent::InstructionsRetired, 100));
    assert_eq!(v.pmi_to_inject(), None, "held while masked");
    v.write_lvt(entry());
    assert!(v.pmi_to_inject().is_some(), "delivered once unmasked");
    assert_eq!(v.injected(), 2);
    assert_eq!(v.rdpmc(0, false, 0), Ok(0), "wrapped to 0 on the 100th");
    assert_eq!(v.rdpmc(0, false, 3), Err(GuestGp::RdpmcNotAllowed));
}

/// Counts are exact by the guest's registers: privilege levels, the
/// fixed counters' fields, `IA32_PERF_GLOBAL_CTRL` gating (version 2) or
/// `EN` alone (version 1), CMASK, full-width and legacy writes.
#[test]
fn counts_are_exact() {
    let mut v = vpmu(GuestPolicy {
        full_width_writes: true,
        ..GuestPolicy::new(2, 2, 3)
    });
    v.wrmsr(0x186, INSTR | OS | EN).unwrap();
    v.wrmsr(0x187, INSTR | USR | EN).unwrap();
    v.wrmsr(0x38D, 0x1 | 0x2 << 4 | 0x3 << 8).unwrap();
    v.wrmsr(0x38F, 0b11 | 0b111 << 32).unwrap();
    v.feed(Event::arch(ArchEvent::InstructionsRetired, 10));
    v.feed(Event::arch(ArchEvent::InstructionsRetired, 7).at(Privilege::Usr));
    v.feed(Event::arch(ArchEvent::CoreCycles, 5).at(Privilege::Usr));
    v.feed(Event::arch(ArchEvent::ReferenceCycles, 3));
    let read = |v: &mut VirtualPmu, msr| v.rdmsr(msr).unwrap().unwrap();
    assert_eq!(
        [read(&mut v, 0xC1), read(&mut v, 0xC2)],
        [10, 7],
        "OS and USR"
    );
    assert_eq!(
        [
            read(&mut v, 0x309),
            read(&mut v, 0x30A),
            read(&mut v, 0x30B)
        ],
        [10, 5, 3],
        "fixed: instructions at OS, cycles at USR, reference cycles at both"
    );
    // GLOBAL_CTRL gates: counter 1 and fixed 0 off.
    v.wrmsr(0x38F, 0b01 | 0b110 << 32).unwrap();
    v.feed(Event::arch(ArchEvent::InstructionsRetired, 4));
    v.feed(Event::arch(ArchEvent::InstructionsRetired, 4).at(Privilege::Usr));
    assert_eq!([read(&mut v, 0xC1), read(&mut v, 0xC2)], [14, 7]);
    assert_eq!(read(&mut v, 0x309), 10);
    // A full-width write, and a legacy one sign-extended.
    v.wrmsr(0x4C1, 0xFFFF_0000_0000).unwrap();
    v.wrmsr(0xC2, 0x8000_0000).unwrap();
    assert_eq!(read(&mut v, 0xC1), 0xFFFF_0000_0000);
    assert_eq!(read(&mut v, 0x4C2), 0xFFFF_8000_0000);
    // CMASK 2: clocks with at least 2 instructions.
    v.wrmsr(0x186, INSTR | OS | EN | 2 << 24).unwrap();
    v.wrmsr(0xC1, 0).unwrap();
    v.model
        .cycle(&[Event::arch(ArchEvent::InstructionsRetired, 3)]);
    v.model
        .cycle(&[Event::arch(ArchEvent::InstructionsRetired, 1)]);
    assert_eq!(read(&mut v, 0xC1), 1);
    // Version 1: EN alone, no global registers.
    let mut v1 = vpmu(GuestPolicy::new(1, 2, 0));
    v1.wrmsr(0x186, INSTR | OS | EN).unwrap();
    v1.feed(Event::arch(ArchEvent::InstructionsRetired, 6));
    assert_eq!(v1.rdpmc(0, false, 0), Ok(6));
    assert!(v1.rdmsr(0x38F).is_err());
}

/// A general counter programmed with an event the guest's CPUID lists as
/// unavailable counts nothing; the guest reads back what it wrote; a
/// fixed counter counts its event anyway.
#[test]
fn an_unavailable_event_counts_nothing() {
    let mut v = vpmu(GuestPolicy {
        unavailable: 1 << ArchEvent::InstructionsRetired.ebx_bit(),
        ..GuestPolicy::new(2, 2, 1)
    });
    let sel = INSTR | OS | EN;
    v.wrmsr(0x186, sel).unwrap();
    v.wrmsr(0x187, 0xC4 | OS | EN).unwrap();
    v.wrmsr(0x38D, 0x1).unwrap();
    v.wrmsr(0x38F, 0b11 | 1 << 32).unwrap();
    v.feed(Event::arch(ArchEvent::InstructionsRetired, 9));
    v.feed(Event::arch(ArchEvent::BranchInstructionsRetired, 4));
    assert_eq!(v.rdmsr(0x186), Ok(Some(sel)), "the guest's image");
    assert_eq!(v.model().evtsel(0) & EN, 0, "not running in the model");
    assert_eq!(v.rdpmc(0, false, 0), Ok(0));
    assert_eq!(v.rdpmc(1, false, 0), Ok(4), "branches are available");
    assert_eq!(v.rdpmc(1 << 30, false, 0), Ok(9), "fixed counter 0 counts");
}

/// Each instruction the VMM reports (single-stepped, or emulated) counts
/// as an instruction retired, a branch also as a branch retired.
#[test]
fn retired_instructions_count() {
    let mut v = vpmu(GuestPolicy::new(2, 2, 1));
    v.wrmsr(0x186, INSTR | OS | EN).unwrap();
    v.wrmsr(0x187, 0xC4 | OS | EN).unwrap();
    let mut r = Retirement::NONE;
    for k in 0..10 {
        r.branch = (k % 3 == 0).then_some(Branch {
            kind: BranchKind::Conditional,
            taken: true,
        });
        v.retire(&r);
    }
    assert_eq!(
        [v.rdpmc(0, false, 0), v.rdpmc(1, false, 0)],
        [Ok(10), Ok(4)]
    );
}

/// An overflow on the last event a guest causes before a switch raises
/// its PMI in its own PMU: the guest switched in meanwhile gets nothing,
/// and the first guest gets it once, at its next entry.
#[test]
fn a_pmi_owed_across_a_switch_is_delivered_once_to_its_guest() {
    let mut a = vpmu(GuestPolicy::new(2, 2, 0));
    let mut b = vpmu(GuestPolicy::new(5, 4, 3));
    a.wrmsr(0x186, INSTR | OS | INT | EN).unwrap();
    a.wrmsr(0xC1, (-5i64) as u64).unwrap();
    a.feed(Event::arch(ArchEvent::InstructionsRetired, 5));
    // The exit and the switch: b runs, its entries deliver nothing.
    for _ in 0..3 {
        b.feed(Event::arch(ArchEvent::InstructionsRetired, 100));
        assert_eq!(b.pmi_to_inject(), None);
    }
    assert!(a.pmi_pending());
    assert!(a.pmi_to_inject().is_some(), "a's next entry");
    assert_eq!(a.pmi_to_inject(), None, "once");
    assert_eq!((a.injected(), b.injected()), (1, 0));
}

/// A vCPU's PMU moves with it to another CPU (here another thread): it is
/// a value, nothing of it stays behind; its counts go on exactly and a PMI
/// it was owed is delivered at its first entry there.
#[test]
fn the_pmu_moves_with_its_vcpu() {
    let mut v = vpmu(GuestPolicy::new(4, 4, 3));
    v.wrmsr(0x186, INSTR | OS | INT | EN).unwrap();
    v.wrmsr(0xC1, (-10i64) as u64).unwrap();
    v.wrmsr(0x38D, 0x1).unwrap();
    v.wrmsr(0x38F, 0xF | 0b111 << 32).unwrap();
    v.feed(Event::arch(ArchEvent::InstructionsRetired, 10));
    let moved = std::thread::spawn(move || {
        let delivered = v.pmi_to_inject().is_some();
        v.write_lvt(entry());
        v.feed(Event::arch(ArchEvent::InstructionsRetired, 32));
        (delivered, v)
    });
    let (delivered, mut v) = moved.join().unwrap();
    assert!(delivered, "the owed PMI, on the other CPU");
    assert_eq!(v.rdpmc(0, false, 0), Ok(32));
    assert_eq!(v.rdpmc(1 << 30, false, 0), Ok(42));
    assert_eq!(v.injected(), 1);
}

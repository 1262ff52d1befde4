//! The time a hypervisor kept each CPU from running: KVM's steal time.
//!
//! Under a hypervisor a virtual CPU is a thread of the host, which the
//! host deschedules when it has other work; the TSC runs on meanwhile. A
//! test that turns TSC time into a model's cycles then counts time the CPU
//! did not run, and credits it to whatever code the CPU was in when the
//! host took it. KVM says how much time that was: a guest that finds
//! `KVM_FEATURE_STEAL_TIME` (CPUID 4000_0001H:EAX\[5\], after the
//! "KVMKVMKVM" signature of leaf 4000_0000H) gives each CPU a 64-byte
//! record by writing its physical address to `MSR_KVM_STEAL_TIME`
//! (4B56_4D03H, bit 0 enables), and KVM adds the nanoseconds the CPU was
//! runnable but not running to its `steal` field each time it runs the CPU
//! again, the `version` field odd while it writes (Linux's
//! `Documentation/virt/kvm/x86/msr.rst`).
//!
//! [`enable`] asks for it on the calling CPU; [`stolen_ns`] reads the
//! calling CPU's total. Without KVM (QEMU's TCG, bare metal) nothing is
//! stolen that this can see: [`enable`] says so and [`stolen_ns`] reads 0.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

use pmu::detect::{Cpuid, HardwareCpuid};

use crate::smp::{self, MAX_CPUS};

/// `MSR_KVM_STEAL_TIME`.
const MSR_KVM_STEAL_TIME: u32 = 0x4B56_4D03;
/// CPUID 4000_0001H:EAX's `KVM_FEATURE_STEAL_TIME`.
const FEATURE_STEAL_TIME: u32 = 1 << 5;

/// KVM's `struct kvm_steal_time`, which KVM writes: `steal` (ns), then
/// `version`, `flags`, `preempted` and padding to 64 bytes.
#[repr(C, align(64))]
struct Record(UnsafeCell<[u64; 8]>);

// SAFETY: each CPU's record is read only by that CPU ([`stolen_ns`]) and
// written only by the hypervisor, on that CPU's behalf, while the CPU does
// not run; the reads are volatile and retried on a torn version.
unsafe impl Sync for Record {}

/// Each CPU's record (the kernel's statics are identity-mapped: the
/// address is the physical one KVM needs).
static RECORDS: [Record; MAX_CPUS] = [const { Record(UnsafeCell::new([0; 8])) }; MAX_CPUS];
/// Whether each CPU's record is enabled.
static ENABLED: [AtomicBool; MAX_CPUS] = [const { AtomicBool::new(false) }; MAX_CPUS];

/// Whether the hypervisor is KVM and offers steal time.
pub fn offered() -> bool {
    let sig = HardwareCpuid.cpuid(0x4000_0000, 0);
    let kvm = [sig.ebx, sig.ecx, sig.edx] == [0x4B4D_564B, 0x564B_4D56, 0x0000_004D];
    kvm && sig.eax >= 0x4000_0001
        && HardwareCpuid.cpuid(0x4000_0001, 0).eax & FEATURE_STEAL_TIME != 0
}

/// Asks KVM for the calling CPU's steal time (once: later calls only say
/// whether it is on); `false` where it is not offered ([`offered`]), and
/// [`stolen_ns`] then reads 0.
pub fn enable() -> bool {
    let cpu = smp::cpu();
    let (Some(record), Some(enabled)) = (RECORDS.get(cpu), ENABLED.get(cpu)) else {
        return false;
    };
    if enabled.load(Ordering::Acquire) {
        return true;
    }
    if !offered() {
        return false;
    }
    let address = record.0.get() as u64;
    // SAFETY: CPL 0; the MSR exists where KVM offers the feature, and its
    // value is the 64-byte-aligned, identity-mapped address of this CPU's
    // record, a static nothing but the hypervisor writes.
    unsafe { pmu::access::X86Msr::new().write_msr(MSR_KVM_STEAL_TIME, address | 1) };
    enabled.store(true, Ordering::Release);
    true
}

/// The nanoseconds the hypervisor kept the calling CPU from running since
/// [`enable`]; 0 where it is not enabled.
pub fn stolen_ns() -> u64 {
    let cpu = smp::cpu();
    let (Some(record), Some(enabled)) = (RECORDS.get(cpu), ENABLED.get(cpu)) else {
        return 0;
    };
    if !enabled.load(Ordering::Acquire) {
        return 0;
    }
    let words = record.0.get().cast::<u64>();
    loop {
        // SAFETY: reads of this CPU's own record, in bounds (words 0 and
        // 1 of 8); volatile, as the hypervisor writes it.
        let (before, steal, after) = unsafe {
            let before = words.add(1).read_volatile() as u32;
            let steal = words.read_volatile();
            (before, steal, words.add(1).read_volatile() as u32)
        };
        if before == after && before % 2 == 0 {
            return steal;
        }
    }
}

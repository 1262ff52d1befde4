//! The pass-through mode's interception, as data a VMX hypervisor applies:
//! which of the architectural PMU's MSRs a guest whose counters run on the
//! hardware may read and write without a VM exit (the MSR bitmap), which
//! must trap and why, whether RDPMC exits, and the VMCS controls that
//! switch `IA32_PERF_GLOBAL_CTRL` with the world. The crate owns no VMX
//! structure: the VMM writes these into its MSR bitmap and VMCS.
//!
//! The rules are KVM's mediated vPMU's (`vmx_recalc_pmu_msr_intercepts`,
//! `kvm_need_perf_global_ctrl_intercept`, `kvm_need_rdpmc_intercept`):
//!
//! | MSR | read | write | why |
//! |---|---|---|---|
//! | `IA32_PMCx` of a guest counter, `IA32_A_PMCx` with full-width writes | pass | pass | the guest's own counter, on the hardware while it runs; its width is the host's ([`GuestPolicy::fits`](super::GuestPolicy::fits)), so the hardware answers as the checks would |
//! | `IA32_FIXED_CTRx` of a guest counter | pass | trap | the same for reads; a write of bits above the width is the hardware's #GP where the checks (and KVM) keep the bits of the width |
//! | the same of a counter the guest lacks (beyond its counts, the host's, `IA32_A_PMCx` without full-width writes) | trap | trap | not the guest's: the checks answer (#GP, or KVM's zeros) |
//! | `IA32_PERFEVTSELx`, `IA32_FIXED_CTR_CTRL` | trap | trap | every value is checked first (reserved bits, AnyThread, unavailable events: the VMM's event filter) and the hardware's copy is the VMM's |
//! | `IA32_PERF_GLOBAL_CTRL` | pass | pass | only when the guest has every counter of the host (none kept by the host) and version 2 or later: the global registers are then the guest's alone |
//! | `IA32_PERF_GLOBAL_STATUS` | pass | trap | the same; read-only (a write is the checks' #GP) |
//! | `IA32_PERF_GLOBAL_OVF_CTRL` | trap | trap | a read is KVM's 0, which the hardware's register need not give; a write of bits the checks refuse (55, 58, 61-63 where the hardware has them: the host's LBR freeze, OvfBuf, CondChgd) the hardware takes |
//! | the same otherwise | trap | trap | the host's counters share them (its bits merged by the VMM), or a version 1 guest has none (#GP) |
//! | everything else of the PMU (`IA32_PERF_CAPABILITIES`, `_STATUS_SET`, `_INUSE`, PEBS, LBR, `IA32_MISC_ENABLE`, `IA32_DEBUGCTL`) | trap | trap | synthesised or refused by the checks |
//!
//! RDPMC runs without an exit only when the guest's counters are every
//! counter of the host (and the widths the host's, which
//! [`GuestPolicy::fits`](super::GuestPolicy::fits) requires): otherwise an index the guest lacks
//! would read a host counter. KVM compares the counts with its own
//! capability, which caps the host's fixed counters at what it offers
//! guests; here the guest must have each counter the host has (a fourth
//! fixed counter, which guests are not offered, keeps RDPMC and the global
//! registers trapped), so no index reaches a counter outside the guest's.
//!
//! `IA32_PERF_GLOBAL_CTRL` is switched atomically with the world by the
//! VMCS: the VM-entry control "load IA32_PERF_GLOBAL_CTRL" (entry control
//! bit 13) loads the guest's value from the guest-state field (encoding
//! 2808H), the VM-exit control of the same name (exit control bit 12) the
//! host's from the host-state field (2C04H), and, when the guest writes it
//! without an exit, the VM-exit control "save IA32_PERF_GLOBAL_CTRL" (exit
//! control bit 30, on parts that have it) stores the guest's value back:
//! no host counter counts guest code and no guest counter counts the exit
//! path. [`global_ctrl_values`] gives the two values.
//!
//! # Where sources differ
//!
//! KVM's mediated vPMU passes `IA32_FIXED_CTRx` writes through, so there
//! a guest's write of bits above the counter's width faults (the
//! hardware's #GP, SDM Vol. 3B 20.2.2) where KVM's emulation keeps the
//! bits of the width; the fuzz of the world switch (the pass-through
//! mode run against the KVM rendering) found the difference. Here such
//! writes trap, so that a guest sees one answer in both modes; reads pass.
//! The same fuzz found that the hardware takes `IA32_PERF_GLOBAL_OVF_CTRL`
//! writes of bits the checks (and KVM) refuse with #GP, among them the
//! host's: its writes trap too, where KVM's mediated vPMU passes them.
//!
//! KVM's mediated vPMU passes the three global registers through both
//! ways; here a direction passes only where the hardware answers as the
//! checks do (tested against [`GuestPmu::check_msr_read`] and
//! [`GuestPmu::check_msr_write`]): the status's writes and the overflow
//! control's reads trap, which a guest does not do in normal operation.
//!
//! KVM's mediated vPMU requires a host of version 4 (for
//! `IA32_PERF_GLOBAL_STATUS_SET`, to restore the guest's status) while it
//! offers guests version 2 by default; the map here follows the guest's
//! policy and leaves the host's version to [`GuestPolicy::fits`](super::GuestPolicy::fits) (at least
//! the guest's). On Nehalem and Westmere the VM-exit load of
//! `IA32_PERF_GLOBAL_CTRL` may clear bits 34:32 (errata AAK155, AAP115,
//! AAT100, BC86, BA97): KVM switches the MSR through the VM-entry/exit
//! MSR-load lists there instead; so does a VMM on those parts, with the
//! same two values.

use super::{GuestPmu, PolicyError};
use crate::arch::archperf::{
    Counter, CounterSet, IA32_A_PMC0, IA32_PERF_GLOBAL_CTRL, IA32_PERF_GLOBAL_STATUS,
};
use crate::detect::ArchPerfCpu;
use crate::virt::x86::{PmuMsr, classify};

/// VM-entry control bit 13: "load IA32_PERF_GLOBAL_CTRL" (SDM Vol. 3C,
/// VM-entry controls).
pub const VM_ENTRY_LOAD_IA32_PERF_GLOBAL_CTRL: u32 = 1 << 13;
/// VM-exit control bit 12: "load IA32_PERF_GLOBAL_CTRL" (SDM Vol. 3C,
/// VM-exit controls).
pub const VM_EXIT_LOAD_IA32_PERF_GLOBAL_CTRL: u32 = 1 << 12;
/// VM-exit control bit 30: "save IA32_PERF_GLOBAL_CTRL" (Linux's
/// `VM_EXIT_SAVE_IA32_PERF_GLOBAL_CTRL`; on parts that report it).
pub const VM_EXIT_SAVE_IA32_PERF_GLOBAL_CTRL: u32 = 1 << 30;
/// The VMCS field of the guest's `IA32_PERF_GLOBAL_CTRL` (guest-state
/// area).
pub const GUEST_IA32_PERF_GLOBAL_CTRL: u32 = 0x2808;
/// The VMCS field of the host's `IA32_PERF_GLOBAL_CTRL` (host-state area).
pub const HOST_IA32_PERF_GLOBAL_CTRL: u32 = 0x2C04;

/// Whether an access exits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Intercept {
    /// The guest accesses the hardware register directly (its MSR-bitmap
    /// bit clear).
    Pass,
    /// The access exits; the VMM answers it with the guest checks
    /// ([`GuestPmu::check_msr_write`], [`GuestPmu::check_msr_read`]).
    Trap,
}

/// Why an MSR is passed through or trapped (the module documentation's
/// table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Why {
    /// One of the guest's counters: on the hardware while it runs.
    GuestCounter,
    /// A counter the guest does not have: the checks answer.
    NotTheGuests,
    /// An event select or `IA32_FIXED_CTR_CTRL`: every value checked first.
    Checked,
    /// A global register the guest has alone.
    GuestGlobal,
    /// A global register shared with the host's counters, or absent from a
    /// version 1 guest.
    SharedGlobal,
    /// Another PMU register: synthesised or refused by the checks.
    Other,
}

/// How one MSR is treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MsrRule {
    /// Reads (RDMSR).
    pub read: Intercept,
    /// Writes (WRMSR).
    pub write: Intercept,
    /// Why.
    pub why: Why,
}

impl MsrRule {
    const fn both(i: Intercept, why: Why) -> MsrRule {
        MsrRule {
            read: i,
            write: i,
            why,
        }
    }
}

/// The pass-through mode's interception for one guest on one host
/// ([`GuestPmu::pass_through`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PassThrough {
    guest: CounterSet,
    full_width: bool,
    globals: bool,
    rdpmc_exits: bool,
}

impl GuestPmu {
    /// The interception of this guest's PMU in pass-through mode on
    /// `host`; refused where the guest's counters cannot run on the host's
    /// beside the counters the host keeps ([`GuestPolicy::fits`](super::GuestPolicy::fits)).
    pub fn pass_through(&self, host: &ArchPerfCpu) -> Result<PassThrough, PolicyError> {
        let p = self.policy();
        p.fits(host)?;
        let same_counts = host_counters(host) == p.counters();
        Ok(PassThrough {
            guest: p.counters(),
            full_width: p.full_width_writes,
            globals: same_counts && self.has_global_msrs() && p.host_counters.is_empty(),
            rdpmc_exits: !same_counts,
        })
    }
}

/// Every counter of `host`'s PMU: its general counters and each fixed
/// counter it supports (a version 5 bitmap may leave holes).
fn host_counters(host: &ArchPerfCpu) -> CounterSet {
    let mut set = CounterSet::first(host.leaf.general(), 0);
    for i in 0..16 {
        if host.leaf.fixed_supported(i)
            && let Some(c) = Counter::fixed(i)
        {
            set = set.with(c);
        }
    }
    set
}

impl PassThrough {
    /// How `msr` is treated: every MSR of the PMU ranges
    /// ([`crate::virt::x86::PMU_MSR_RANGES`]) has a rule; `None` for an MSR
    /// that is not the PMU's (the VMM's own business).
    pub fn rule(&self, msr: u32) -> Option<MsrRule> {
        let counter = |c: Option<Counter>, alias_ok: bool| match c {
            Some(c) if alias_ok && self.guest.contains(c) => {
                MsrRule::both(Intercept::Pass, Why::GuestCounter)
            }
            _ => MsrRule::both(Intercept::Trap, Why::NotTheGuests),
        };
        Some(match classify(msr) {
            PmuMsr::NotPmu => return None,
            PmuMsr::Pmc(n) => counter(Counter::general(n), true),
            PmuMsr::FullWidthPmc(n) => counter(Counter::general(n), self.full_width),
            // A write of bits above the width: the hardware's #GP, the
            // checks' (and KVM's) truncation (module documentation).
            PmuMsr::FixedCounter(n) => match counter(Counter::fixed(n), true) {
                r if r.why == Why::GuestCounter => MsrRule {
                    write: Intercept::Trap,
                    ..r
                },
                r => r,
            },
            PmuMsr::EventSelect(_) | PmuMsr::FixedCtrCtrl => {
                MsrRule::both(Intercept::Trap, Why::Checked)
            }
            m @ (PmuMsr::GlobalCtrl | PmuMsr::GlobalStatus | PmuMsr::GlobalOvfCtrl) => {
                if !self.globals {
                    return Some(MsrRule::both(Intercept::Trap, Why::SharedGlobal));
                }
                // The status is read-only (a write is the checks' #GP); the
                // overflow control's writes trap: the hardware takes bits
                // the checks refuse (the host's LBR freeze, OvfBuf,
                // CondChgd), its reads are KVM's 0.
                let (read, write) = match m {
                    PmuMsr::GlobalStatus => (Intercept::Pass, Intercept::Trap),
                    PmuMsr::GlobalOvfCtrl => (Intercept::Trap, Intercept::Trap),
                    _ => (Intercept::Pass, Intercept::Pass),
                };
                MsrRule {
                    read,
                    write,
                    why: Why::GuestGlobal,
                }
            }
            _ => MsrRule::both(Intercept::Trap, Why::Other),
        })
    }

    /// The MSRs of which a read or a write passes through, lowest first,
    /// with their rules (every other MSR of the PMU traps both): what the
    /// VMM clears in its MSR bitmap.
    pub fn passed(&self) -> impl Iterator<Item = (u32, MsrRule)> + '_ {
        let counters = self.guest.iter().flat_map(move |c| {
            let full =
                (!c.is_fixed() && self.full_width).then(|| IA32_A_PMC0 + u32::from(c.number()));
            [Some(c.msr(false)), full].into_iter().flatten()
        });
        let globals = [IA32_PERF_GLOBAL_STATUS, IA32_PERF_GLOBAL_CTRL]
            .into_iter()
            .filter(move |_| self.globals);
        counters
            .chain(globals)
            .filter_map(move |m| self.rule(m).map(|r| (m, r)))
    }

    /// Whether RDPMC exits (the "RDPMC exiting" processor-based control):
    /// unless the guest's counter counts are the host's.
    pub const fn rdpmc_exits(&self) -> bool {
        self.rdpmc_exits
    }

    /// Whether the guest writes `IA32_PERF_GLOBAL_CTRL` without an exit,
    /// so that the VMM sets [`VM_EXIT_SAVE_IA32_PERF_GLOBAL_CTRL`] (or
    /// reads the MSR at every exit) to learn its value.
    pub const fn global_ctrl_passed(&self) -> bool {
        self.globals
    }

    /// The guest's counters.
    pub const fn counters(&self) -> CounterSet {
        self.guest
    }
}

/// The two `IA32_PERF_GLOBAL_CTRL` values of the VMCS: the guest's
/// (guest-state field, loaded at VM entry) and the host's (host-state
/// field, loaded at VM exit).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GlobalCtrlValues {
    /// Loaded at VM entry: the guest's enables of its counters, and the
    /// host's counters that keep counting while it runs.
    pub guest: u64,
    /// Loaded at VM exit: the host's counters only.
    pub host: u64,
}

/// The values for a guest of `pass` whose `IA32_PERF_GLOBAL_CTRL` is
/// `guest` (as it wrote it; bits of counters not its own are dropped) on a
/// host whose counters `host_running` run (bits of the guest's counters
/// are dropped: they are the guest's while it runs and stopped outside
/// it).
pub fn global_ctrl_values(
    pass: &PassThrough,
    guest: u64,
    host_running: CounterSet,
) -> GlobalCtrlValues {
    let host = host_running.difference(pass.guest).bits();
    GlobalCtrlValues {
        guest: host | (guest & pass.guest.bits()),
        host,
    }
}

/// Where `msr`'s bits are in a VMX MSR bitmap (SDM Vol. 3C, "MSR-Bitmap
/// Address": 4 KiB, one bit per MSR; the read bitmap of MSRs
/// 0000_0000H-0000_1FFFH at byte 0 and of C000_0000H-C000_1FFFH at byte
/// 400H, the write bitmaps at 800H and C00H): the read bit's byte, the
/// write bit's byte and the bit's number in each; `None` for an MSR outside
/// the bitmap (its accesses always exit).
pub const fn msr_bitmap_bits(msr: u32) -> Option<(usize, usize, u8)> {
    let (read, offset) = match msr & 0xFFFF_E000 {
        0x0000_0000 => (0x000, msr as usize),
        0xC000_0000 => (0x400, (msr - 0xC000_0000) as usize),
        _ => return None,
    };
    Some((
        read + offset / 8,
        read + 0x800 + offset / 8,
        (offset % 8) as u8,
    ))
}

#[cfg(test)]
mod tests;

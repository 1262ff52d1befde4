//! A NetBurst guest PMU for a hypervisor: MSR classification, guest write
//! validation, RDPMC emulation, and the world switch.
//!
//! # On each exit
//!
//! | exit | call | then |
//! |---|---|---|
//! | WRMSR | [`check_write`] | [`Verdict::Apply`]: [`PmuContext::record`] (and the WRMSR itself while the guest's context is loaded); [`Verdict::Emulate`]: store the value for the guest; [`Verdict::InjectGp`]: inject #GP |
//! | RDMSR | [`check_read`] | [`Verdict::Apply`]: the register's value (the hardware's while loaded, else [`PmuContext::read`]); [`Verdict::Emulate`]: the VMM's value |
//! | RDPMC | [`emulate_rdpmc`] | the value into EDX:EAX, or #GP |
//! | VM exit (the guest's PMU leaves the CPU) | [`PmuContext::save`] for the guest, then [`PmuContext::restore`] for the host (or the next guest) | |
//!
//! # The world switch
//!
//! [`PmuContext::save`] first disables every CCCR in use (reading it
//! first: its sticky `OVF` is hardware state, SDM 18.15.5.8), so no counter
//! moves while the others are read, then reads the counters;
//! [`PmuContext::restore`] writes the ESCRs and the PEBS MSRs, then the
//! counters, and the CCCRs last, so nothing counts before its ESCR is in
//! place. Only the registers the context uses are touched: for `k` counters
//! and `e` ESCRs in use a save is `2k` RDMSR and `k` WRMSR and a restore
//! `e + 2k` WRMSR (+2 with PEBS), where switching all 81 registers would
//! read 81 and write 18 to save and write 81 to restore.

use crate::access::MsrAccess;
use crate::arch::netburst::cccr::CccrValue;
use crate::arch::netburst::escr::EscrValue;
use crate::arch::netburst::events::Event;
use crate::arch::netburst::msrs::{
    Counter, CounterSet, Escr, EscrSet, IA32_DS_AREA, IA32_MISC_ENABLE, MSR_PEBS_ENABLE,
    MSR_PEBS_MATRIX_VERT, MSR_TC_PRECISE_EVENT,
};
use crate::arch::netburst::tagging::{PEBS_ENABLE_OTHER_THREAD, PEBS_ENABLE_PEBS};

pub use super::Verdict;

/// Which PMU register an MSR number is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum MsrClass {
    /// A counter (`MSR_*_COUNTERn`, 300H-311H).
    Counter(Counter),
    /// A counter's CCCR (360H-371H).
    Cccr(Counter),
    /// An ESCR.
    Escr(Escr),
    /// `MSR_PEBS_ENABLE` (3F1H).
    PebsEnable,
    /// `MSR_PEBS_MATRIX_VERT` (3F2H).
    PebsMatrixVert,
    /// `MSR_TC_PRECISE_EVENT` (3F0H).
    TcPreciseEvent,
    /// `IA32_DS_AREA` (600H).
    DsArea,
    /// `IA32_MISC_ENABLE` (1A0H): PMU availability bits 7 and 12.
    MiscEnable,
    /// Not a PMU register.
    NotPmu,
}

/// The class of MSR `msr` (SDM Vol. 3C Table 35-41, Vol. 3B Table 18-63).
pub const fn classify(msr: u32) -> MsrClass {
    let counter = msr.wrapping_sub(Counter::MSR_BASE);
    if counter < 18
        && let Some(c) = Counter::from_index(counter as u8)
    {
        return MsrClass::Counter(c);
    }
    let cccr = msr.wrapping_sub(crate::arch::netburst::msrs::Cccr::MSR_BASE);
    if cccr < 18
        && let Some(c) = Counter::from_index(cccr as u8)
    {
        return MsrClass::Cccr(c);
    }
    if let Some(e) = Escr::from_msr(msr) {
        return MsrClass::Escr(e);
    }
    match msr {
        MSR_PEBS_ENABLE => MsrClass::PebsEnable,
        MSR_PEBS_MATRIX_VERT => MsrClass::PebsMatrixVert,
        MSR_TC_PRECISE_EVENT => MsrClass::TcPreciseEvent,
        IA32_DS_AREA => MsrClass::DsArea,
        IA32_MISC_ENABLE => MsrClass::MiscEnable,
        _ => MsrClass::NotPmu,
    }
}

/// Which events a guest may program (KVM's PMU event filter, by event).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum EventFilter {
    /// Every event.
    AllowAll,
    /// Only these (an event select the catalog does not know for its ESCR
    /// is refused).
    Allow(&'static [Event]),
    /// Every event but these.
    Deny(&'static [Event]),
}

/// What a guest is shown and allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GuestPolicy {
    /// The family 0Fh model the guest sees (which ESCRs exist, Table
    /// 18-63; the extended cascade).
    pub model: u8,
    /// Logical processors the guest's virtual package has: with 1, the
    /// `T1_*` ESCR bits, `OVF_PMI_T1` and `ENABLE_PEBS_OTH_THR` are
    /// reserved, as on a part without Hyper-Threading.
    pub logical_processors: u8,
    /// Whether the guest may use PEBS and the DS save area.
    pub pebs: bool,
    /// The events it may count.
    pub filter: EventFilter,
    /// Counters (with their CCCRs) the host keeps for itself.
    pub host_counters: CounterSet,
    /// ESCRs the host keeps for itself.
    pub host_escrs: EscrSet,
}

impl GuestPolicy {
    /// A guest with one logical processor of model `model`, no PEBS,
    /// every event, nothing kept by the host.
    pub const fn new(model: u8) -> GuestPolicy {
        GuestPolicy {
            model,
            logical_processors: 1,
            pebs: false,
            filter: EventFilter::AllowAll,
            host_counters: CounterSet::EMPTY,
            host_escrs: EscrSet::EMPTY,
        }
    }

    const fn ht(&self) -> bool {
        self.logical_processors >= 2
    }

    fn allows(&self, escr: Escr, select: u8) -> bool {
        let event = Event::ALL
            .iter()
            .find(|e| e.info().event_select.get() == select && e.info().escrs.contains(&escr));
        match (self.filter, event) {
            (EventFilter::AllowAll, _) => true,
            (EventFilter::Allow(list), Some(e)) => list.contains(e),
            (EventFilter::Allow(_), None) => false,
            (EventFilter::Deny(list), Some(e)) => !list.contains(e),
            (EventFilter::Deny(_), None) => true,
        }
    }
}

/// Why a guest access gets #GP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum GuestGp {
    /// Reserved bits set (the hardware raises #GP).
    Reserved {
        /// The MSR.
        msr: u32,
        /// The offending bits.
        bits: u64,
    },
    /// The other logical processor's bits, in a guest with one.
    OtherLogicalProcessor {
        /// The MSR.
        msr: u32,
    },
    /// A register the host keeps (or a CCCR selecting or cascading from
    /// one).
    HostOwned {
        /// The MSR.
        msr: u32,
    },
    /// The event filter refuses the event.
    Filtered {
        /// The ESCR.
        escr: Escr,
        /// Its event select.
        select: u8,
    },
    /// PEBS or the DS area, for a guest that may not use them.
    PebsRefused {
        /// The MSR.
        msr: u32,
    },
    /// A non-canonical DS area address (KVM and Xen refuse it).
    NonCanonical,
    /// An ESCR the guest's model does not have (Table 18-63).
    NoSuchMsr {
        /// The MSR.
        msr: u32,
    },
    /// A write to a read-only PMU bit (IA32_MISC_ENABLE 7 and 12).
    ReadOnly {
        /// The MSR.
        msr: u32,
    },
    /// RDPMC at CPL > 0 with CR4.PCE clear.
    RdpmcNotAllowed,
    /// RDPMC of no counter (ECX beyond 17, or reserved ECX bits set).
    RdpmcIndex {
        /// ECX.
        ecx: u32,
    },
}

impl core::fmt::Display for GuestGp {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            GuestGp::Reserved { msr, bits } => {
                write!(f, "WRMSR {msr:#x} sets reserved bits {bits:#x}")
            }
            GuestGp::OtherLogicalProcessor { msr } => write!(
                f,
                "WRMSR {msr:#x} sets the other logical processor's bits in a one-processor guest"
            ),
            GuestGp::HostOwned { msr } => write!(f, "MSR {msr:#x} belongs to the host"),
            GuestGp::Filtered { escr, select } => write!(
                f,
                "event select {select:#x} on {} is filtered out",
                escr.name()
            ),
            GuestGp::PebsRefused { msr } => write!(f, "MSR {msr:#x}: PEBS is not for this guest"),
            GuestGp::NonCanonical => f.write_str("the DS area address is not canonical"),
            GuestGp::NoSuchMsr { msr } => write!(f, "no MSR {msr:#x} on this model"),
            GuestGp::ReadOnly { msr } => write!(f, "MSR {msr:#x} is read-only there"),
            GuestGp::RdpmcNotAllowed => f.write_str("RDPMC at CPL > 0 with CR4.PCE clear"),
            GuestGp::RdpmcIndex { ecx } => write!(f, "RDPMC of no counter (ECX {ecx:#x})"),
        }
    }
}

impl core::error::Error for GuestGp {}

/// Counters are 40 bits wide (SDM 18.15.2): bits 63:40 are reserved.
const COUNTER_RESERVED: u64 = !((1 << 40) - 1);
/// `MSR_PEBS_ENABLE`: 23:13 reserved except 15 and 16 (Table 19-33's
/// `Tagged_mispred_branch`; see the model's note on Table 35-41), 63:27
/// reserved.
const PEBS_ENABLE_RESERVED: u64 = !0x07FF_FFFF | (0x00FF_E000 & !(3 << 15));
/// `MSR_PEBS_MATRIX_VERT`: bits 0, 1 and 4 (Table 19-33).
const MATRIX_VERT_RESERVED: u64 = !0x13;
/// `IA32_MISC_ENABLE` bits 7 and 12 are read-only.
const MISC_ENABLE_PMU_BITS: u64 = 1 << 7 | 1 << 12;

/// Whether `v` is a canonical 48-bit linear address.
const fn canonical(v: u64) -> bool {
    let top = v >> 47;
    top == 0 || top == 0x1_FFFF
}

/// The guest writes `value` to `msr`: what the VMM does (SDM reserved bits
/// for the guest's model and logical processors, then `policy`). Nothing
/// is changed here.
pub fn check_write(policy: &GuestPolicy, msr: u32, value: u64) -> Verdict<GuestGp> {
    match write_rule(policy, msr, value) {
        Ok(v) => v,
        Err(gp) => Verdict::InjectGp(gp),
    }
}

fn write_rule(p: &GuestPolicy, msr: u32, value: u64) -> Result<Verdict<GuestGp>, GuestGp> {
    let reserved = |bits: u64| {
        if bits == 0 {
            Ok(())
        } else {
            Err(GuestGp::Reserved { msr, bits })
        }
    };
    match classify(msr) {
        MsrClass::NotPmu => Ok(Verdict::NotPmu),
        MsrClass::Counter(c) => {
            host_counter(p, c, msr)?;
            reserved(value & COUNTER_RESERVED)?;
            Ok(Verdict::Apply)
        }
        MsrClass::Cccr(c) => {
            host_counter(p, c, msr)?;
            reserved(value & CccrValue::reserved_mask(c.cccr(), p.model))?;
            let v = CccrValue::from_bits_truncate(value);
            if !p.ht() && v.ovf_pmi_t1() {
                return Err(GuestGp::OtherLogicalProcessor { msr });
            }
            // The ESCR it selects, and the counter it cascades from, must
            // not be the host's: the guest would count the host's events.
            if let Some(e) = c.escr_for_select(v.escr_select(), p.model)
                && p.host_escrs.contains(e)
                && (v.enable() || v.cascade())
            {
                return Err(GuestGp::HostOwned { msr });
            }
            if v.cascade() && p.host_counters.contains(c.cascade_source()) {
                return Err(GuestGp::HostOwned { msr });
            }
            Ok(Verdict::Apply)
        }
        MsrClass::Escr(e) => {
            if !e.available_on(p.model) {
                return Err(GuestGp::NoSuchMsr { msr });
            }
            if p.host_escrs.contains(e) {
                return Err(GuestGp::HostOwned { msr });
            }
            reserved(value & EscrValue::RESERVED)?;
            let v = EscrValue::from_bits_truncate(value);
            if !p.ht() && (v.t1_os() || v.t1_usr()) {
                return Err(GuestGp::OtherLogicalProcessor { msr });
            }
            let counts = v.t0_os() || v.t0_usr() || v.t1_os() || v.t1_usr();
            let select = v.event_select().get();
            if counts && !p.allows(e, select) {
                return Err(GuestGp::Filtered { escr: e, select });
            }
            Ok(Verdict::Apply)
        }
        MsrClass::PebsEnable => {
            reserved(value & PEBS_ENABLE_RESERVED)?;
            if !p.ht() && value & PEBS_ENABLE_OTHER_THREAD != 0 {
                return Err(GuestGp::OtherLogicalProcessor { msr });
            }
            if !p.pebs && value & (PEBS_ENABLE_PEBS | PEBS_ENABLE_OTHER_THREAD) != 0 {
                return Err(GuestGp::PebsRefused { msr });
            }
            Ok(Verdict::Apply)
        }
        MsrClass::PebsMatrixVert => {
            reserved(value & MATRIX_VERT_RESERVED)?;
            Ok(Verdict::Apply)
        }
        MsrClass::TcPreciseEvent => Ok(Verdict::Apply),
        MsrClass::DsArea => {
            if !p.pebs {
                return Err(GuestGp::PebsRefused { msr });
            }
            if !canonical(value) {
                return Err(GuestGp::NonCanonical);
            }
            Ok(Verdict::Emulate)
        }
        MsrClass::MiscEnable => Err(GuestGp::ReadOnly { msr }),
    }
}

fn host_counter(p: &GuestPolicy, c: Counter, msr: u32) -> Result<(), GuestGp> {
    if p.host_counters.contains(c) {
        Err(GuestGp::HostOwned { msr })
    } else {
        Ok(())
    }
}

/// The guest reads `msr`: what the VMM does. The host's registers read as
/// #GP (a guest never learns of them); IA32_MISC_ENABLE's PMU bits and the
/// DS area are the VMM's to answer.
pub fn check_read(policy: &GuestPolicy, msr: u32) -> Verdict<GuestGp> {
    match classify(msr) {
        MsrClass::NotPmu => Verdict::NotPmu,
        MsrClass::Counter(c) | MsrClass::Cccr(c) if policy.host_counters.contains(c) => {
            Verdict::InjectGp(GuestGp::HostOwned { msr })
        }
        MsrClass::Escr(e) if !e.available_on(policy.model) => {
            Verdict::InjectGp(GuestGp::NoSuchMsr { msr })
        }
        MsrClass::Escr(e) if policy.host_escrs.contains(e) => {
            Verdict::InjectGp(GuestGp::HostOwned { msr })
        }
        MsrClass::DsArea if !policy.pebs => Verdict::InjectGp(GuestGp::PebsRefused { msr }),
        MsrClass::MiscEnable | MsrClass::DsArea => Verdict::Emulate,
        _ => Verdict::Apply,
    }
}

/// The `IA32_MISC_ENABLE` PMU bits a guest reads: performance monitoring
/// available (bit 7), and PEBS unavailable (bit 12) unless the policy
/// allows it. (The other bits are the VMM's.)
pub const fn misc_enable_pmu_bits(policy: &GuestPolicy) -> u64 {
    let pebs_unavailable = if policy.pebs { 0 } else { 1 << 12 };
    (1 << 7 | pebs_unavailable) & MISC_ENABLE_PMU_BITS
}

/// Emulates the guest's RDPMC (SDM Vol. 2B RDPMC, NetBurst form): ECX bits
/// 4:0 name the counter (0-17), bit 31 asks for a fast read (the low 32
/// bits); any other ECX bit, or a counter beyond 17, is #GP, as is RDPMC at
/// CPL > 0 with CR4.PCE clear, and a counter the host keeps. `counter`
/// gives the guest's value of a counter (the hardware's while the guest's
/// context is loaded, else [`PmuContext::counter`]).
pub fn emulate_rdpmc(
    policy: &GuestPolicy,
    ecx: u32,
    cr4_pce: bool,
    cpl: u8,
    counter: impl FnOnce(Counter) -> u64,
) -> Result<u64, GuestGp> {
    if cpl > 0 && !cr4_pce {
        return Err(GuestGp::RdpmcNotAllowed);
    }
    const FAST: u32 = 1 << 31;
    let index = ecx & !FAST;
    let c = match Counter::from_index(index as u8) {
        Some(c) if index < 18 => c,
        _ => return Err(GuestGp::RdpmcIndex { ecx }),
    };
    if policy.host_counters.contains(c) {
        return Err(GuestGp::HostOwned { msr: c.msr() });
    }
    let v = counter(c) & !COUNTER_RESERVED;
    Ok(if ecx & FAST != 0 { v & 0xFFFF_FFFF } else { v })
}

/// One side's PMU state for the world switch: its registers, and which of
/// them it uses (tracked as it writes them, [`PmuContext::record`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PmuContext {
    counters: [u64; 18],
    cccrs: [u64; 18],
    escrs: [u64; 45],
    pebs_enable: u64,
    matrix_vert: u64,
    counters_used: CounterSet,
    escrs_used: EscrSet,
    pebs_used: bool,
}

impl Default for PmuContext {
    fn default() -> Self {
        Self::new()
    }
}

impl PmuContext {
    /// Nothing used, every register 0.
    pub const fn new() -> PmuContext {
        PmuContext {
            counters: [0; 18],
            cccrs: [0; 18],
            escrs: [0; 45],
            pebs_enable: 0,
            matrix_vert: 0,
            counters_used: CounterSet::EMPTY,
            escrs_used: EscrSet::EMPTY,
            pebs_used: false,
        }
    }

    /// Records a write the side made (for a guest: one [`check_write`]
    /// answered [`Verdict::Apply`]). Returns `false` for an MSR that is not
    /// part of the context.
    pub fn record(&mut self, msr: u32, value: u64) -> bool {
        match classify(msr) {
            MsrClass::Counter(c) => {
                self.counters[usize::from(c.index())] = value & !COUNTER_RESERVED;
                self.counters_used = self.counters_used.with(c);
            }
            MsrClass::Cccr(c) => {
                self.cccrs[usize::from(c.index())] = value;
                self.counters_used = self.counters_used.with(c);
            }
            MsrClass::Escr(e) => {
                self.escrs[e as usize] = value;
                self.escrs_used = self.escrs_used.with(e);
            }
            MsrClass::PebsEnable => {
                self.pebs_enable = value;
                self.pebs_used = true;
            }
            MsrClass::PebsMatrixVert => {
                self.matrix_vert = value;
                self.pebs_used = true;
            }
            _ => return false,
        }
        true
    }

    /// The context's value of `msr`, while it is not loaded.
    pub fn read(&self, msr: u32) -> Option<u64> {
        Some(match classify(msr) {
            MsrClass::Counter(c) => self.counters[usize::from(c.index())],
            MsrClass::Cccr(c) => self.cccrs[usize::from(c.index())],
            MsrClass::Escr(e) => self.escrs[e as usize],
            MsrClass::PebsEnable => self.pebs_enable,
            MsrClass::PebsMatrixVert => self.matrix_vert,
            _ => return None,
        })
    }

    /// Counter `c`'s value, while the context is not loaded.
    pub fn counter(&self, c: Counter) -> u64 {
        self.counters[usize::from(c.index())]
    }

    /// The counters (and CCCRs) the context uses.
    pub const fn counters_used(&self) -> CounterSet {
        self.counters_used
    }

    /// The ESCRs the context uses.
    pub const fn escrs_used(&self) -> EscrSet {
        self.escrs_used
    }

    /// Takes the context off the hardware: every CCCR in use is read (its
    /// `OVF`) and written back with `ENABLE` clear, first, so nothing
    /// counts while the counters are read; then each counter in use is read.
    /// `2k` RDMSR and `k` WRMSR for `k` counters in use.
    pub fn save<M: MsrAccess>(&mut self, msr: &mut M) -> Result<(), M::Error> {
        for c in Counter::ALL {
            if self.counters_used.contains(c) {
                let v = msr.read_msr(c.cccr().msr())?;
                self.cccrs[usize::from(c.index())] = v;
                let off = CccrValue::from_bits_truncate(v).with_enable(false);
                msr.write_msr(c.cccr().msr(), off.bits())?;
            }
        }
        for c in Counter::ALL {
            if self.counters_used.contains(c) {
                self.counters[usize::from(c.index())] = msr.read_msr(c.msr())?;
            }
        }
        Ok(())
    }

    /// Puts the context on the hardware: the ESCRs in use, the PEBS MSRs if
    /// used, the counters, and the CCCRs last (with `OVF` as saved, so a
    /// pending overflow is still pending). `e + 2k` WRMSR (+2 with PEBS).
    /// The registers the context does not use are left as they are: the
    /// caller scrubs them ([`PmuContext::scrub`]) if the side that used
    /// them before must not be seen.
    pub fn restore<M: MsrAccess>(&self, msr: &mut M) -> Result<(), M::Error> {
        for e in Escr::ALL {
            if self.escrs_used.contains(e) {
                msr.write_msr(e.msr(), self.escrs[e as usize])?;
            }
        }
        if self.pebs_used {
            msr.write_msr(MSR_PEBS_MATRIX_VERT, self.matrix_vert)?;
            msr.write_msr(MSR_PEBS_ENABLE, self.pebs_enable)?;
        }
        for c in Counter::ALL {
            if self.counters_used.contains(c) {
                msr.write_msr(c.msr(), self.counters[usize::from(c.index())])?;
            }
        }
        for c in Counter::ALL {
            if self.counters_used.contains(c) {
                msr.write_msr(c.cccr().msr(), self.cccrs[usize::from(c.index())])?;
            }
        }
        Ok(())
    }

    /// After [`PmuContext::save`]: zeroes the counters and ESCRs the
    /// context used (its CCCRs are disabled already), so the next side
    /// learns nothing of it. `k + e` WRMSR.
    pub fn scrub<M: MsrAccess>(&self, msr: &mut M) -> Result<(), M::Error> {
        for c in Counter::ALL {
            if self.counters_used.contains(c) {
                msr.write_msr(c.msr(), 0)?;
            }
        }
        for e in Escr::ALL {
            if self.escrs_used.contains(e) {
                msr.write_msr(e.msr(), 0)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

//! A NetBurst guest PMU for a hypervisor: MSR classification, guest write
//! validation, RDPMC emulation, and the world switch.
//!
//! # On each exit
//!
//! | exit | call | then |
//! |---|---|---|
//! | WRMSR | [`check_msr_write`] | [`Verdict::Apply`]: [`PmuContext::record`] (and the WRMSR itself while the guest's context is loaded); [`Verdict::InjectGp`]: inject #GP; [`Verdict::NotPmu`]: the VMM's |
//! | RDMSR | [`check_msr_read`] | [`Verdict::Apply`]: the register's value (the hardware's while loaded, else [`PmuContext::read`]); [`Verdict::Emulate`]: [`MISC_ENABLE_PMU_BITS`] for `IA32_MISC_ENABLE` |
//! | RDPMC | [`emulate_rdpmc`] | the value into EDX:EAX, or #GP |
//! | the host's PMI while the guest is loaded | [`PmuContext::take_overflows`] | not empty: [`VirtualLvt::raise`] |
//! | VM exit that leaves the CPU (vCPU put, preemption) | [`PmuContext::save`] (not empty: [`VirtualLvt::raise`]), then [`PmuContext::scrub`] | |
//! | VM entry (vCPU load) | [`PmuContext::restore`], then [`VirtualLvt::deliver`] | inject the PMI it returns |
//!
//! Once, before the first guest runs: [`scrub_all`], so that every register
//! a guest can read starts from the same image.
//!
//! # The world switch, and what a guest can see
//!
//! [`PmuContext::save`] first takes every CCCR in use to the idle image
//! ([`CccrValue::IDLE`]: `ENABLE`, `CASCADE`, the extended cascade bit 11,
//! `FORCE_OVF`, `OVF_PMI` and `OVF` clear, active thread 11b), reading it
//! first so that the context keeps its full image, sticky `OVF` included
//! (SDM 18.15.5.8), for [`PmuContext::restore`]. Clearing `ENABLE` alone is
//! not enough: a counter with `CASCADE` runs while its alternate's `OVF` is
//! set whatever its `ENABLE` (SDM 18.15.5.6), so a switched-out guest's
//! cascaded counter would count the next guest's events through the ESCR
//! its CCCR still selects. Then the counters are read.
//! [`PmuContext::scrub`] zeroes the counters and ESCRs the context used and
//! gives the tagging MSRs it used (`MSR_TC_PRECISE_EVENT`,
//! `MSR_PEBS_ENABLE`, `MSR_PEBS_MATRIX_VERT`) their neutral images.
//! [`PmuContext::restore`] writes the ESCRs and tagging MSRs, then the
//! counters, and the CCCRs last, so nothing counts before its ESCR is in
//! place. Only the registers the context uses are touched: for `k`
//! counters, `e` ESCRs and `t` tagging MSRs in use a save is `2k` RDMSR
//! and `k` WRMSR, a scrub `k + e + t` WRMSR and a restore `e + t + 2k`
//! WRMSR, where switching all 84 registers would write 84 for each.
//!
//! After a switch every register a guest may read ([`check_msr_read`]
//! answers [`Verdict::Apply`]) holds either its own value or its neutral
//! image (counters and ESCRs 0, a CCCR [`CccrValue::IDLE`], the tagging
//! MSRs their reset values), never another context's; the registers the
//! host keeps it can neither read nor write. `pmu::virt::netburst`'s tests
//! check this against a private model of each guest's PMU over 10,000
//! random switches (the isolation tests).
//!
//! # PMIs across the switch
//!
//! NetBurst raises a counter's PMI "on the next event count after the
//! counter has overflowed" (SDM 18.15.5.8). An overflow on the last event
//! before a switch has not raised its PMI yet, and the idle image (no
//! `OVF`, no `OVF_PMI`) withdraws it on the model; restoring `OVF` does not
//! re-arm it there. So [`PmuContext::save`] returns the counters that
//! overflowed with `OVF_PMI` and were not yet reported by
//! [`PmuContext::take_overflows`]: the VMM raises the guest's virtual PMI
//! for them, one event early rather than never. (Whether a real part
//! re-arms the PMI from a restored `OVF` the manuals do not say; if it
//! does, the guest sees one more PMI for that overflow, which a NetBurst
//! handler, finding no new `OVF`, absorbs.)
//!
//! # Guest PEBS: refused
//!
//! A PEBS assist writes its record to the linear address in
//! `IA32_DS_AREA`, through whatever paging is current, and cannot take a
//! fault (SDM 18.15.7: the DS save area must be in non-paged memory). A
//! guest's PEBS on the hardware would need the VMM to load the guest's DS
//! area and PEBS enable atomically with every entry and exit (VM-entry and
//! VM-exit MSR-load lists), to keep the guest's DS area and buffer mapped
//! and pinned in the guest's memory through its shadow paging, and to
//! disable PEBS before any host code runs: none of which this crate sees.
//! KVM refused guest PEBS for years and still forces `PEBS_ENABLE` to 0 at
//! entry where it cannot be made safe, because "PEBS memory write can
//! overshoot guest entry and corrupt guest memory" (Linux
//! `arch/x86/events/intel/core.c`, `intel_guest_get_msrs`; the sentence
//! is sometimes quoted as Xen's, but it is that Linux comment; Xen's
//! `vpmu_intel.c` refuses a non-zero `PEBS_ENABLE` outright).
//! So there is no PEBS option: `PEBS_ENABLE`'s PEBS bits (25, 26) and
//! every access to `IA32_DS_AREA` are #GP ([`GuestGp::PebsRefused`]), a
//! guest's DS area value never reaches the host's MSR, and the guest reads
//! `IA32_MISC_ENABLE` with BTS and PEBS unavailable
//! ([`MISC_ENABLE_PMU_BITS`]; the VMM also clears CPUID.01H:EDX.DS\[21\]).
//! A host that uses PEBS itself must clear its PEBS enable before every
//! guest entry, as KVM does: the assist would otherwise write the guest's
//! records through the host's DS area address.
//!
//! # Where the sources disagree, and what this module does
//!
//! * `MSR_TC_PRECISE_EVENT` (3F0H): no manual documents its bits; perfctr
//!   observed a reset value of FC00H and leaves it alone. A guest may write
//!   bits 15:0 (63:16 are #GP, as on the model), and its neutral image is
//!   FC00H, so a scrubbed register reads as an unused one.
//! * A one-processor guest's CCCR active-thread field: SDM Figure 18-45
//!   ("Reserved: must be set to 11B" without Hyper-Threading) and perfctr
//!   refuse anything else; Linux and oprofile always write 11b. Anything
//!   else is #GP ([`GuestGp::ActiveThreadMustBeAny`]): with 01b or 10b on a
//!   Hyper-Threading host a guest would learn whether the sibling logical
//!   processor is active.
//! * MSRs in 300H-3FFH that family 0Fh does not implement (312H-35FH,
//!   372H-39FH, the gaps between ESCRs, 3E2H-3EFH, 3F3H-3FFH; SDM Vol. 3C
//!   Table 35-41 lists none there): #GP ([`GuestGp::NoSuchMsr`]), as the
//!   hardware answers, found by the crate's register map ([`classify`]).
//! * `instr_retired`'s `NBOGUSTAG`/`BOGUSTAG` masks count tagged
//!   instructions (SDM Table 19-29); a guest of a host that tags µops may
//!   not count them (below), the conservative reading.
//!
//! # Tagging the host uses
//!
//! The tags on a µop are the package's, not a counter's: a µop one ESCR
//! tags is counted by every at-retirement counter that selects the tag
//! (SDM 18.15.6.2-18.15.6.4). With [`GuestPolicy::host_tagging`] set, a
//! guest may not tag µops (an ESCR's `Tag_Enable`, `uop_type` and the
//! replay metrics' upstream events), count tagged ones (`front_end_event`,
//! `execution_event`, `replay_event`, `instr_retired`'s tagged masks), or
//! touch the three tagging MSRs (#GP, [`GuestGp::TaggingRefused`],
//! [`GuestGp::HostOwned`]). Without it the host must not use tagging at
//! all: the guests switch those MSRs with their contexts.
//!
//! # What a guest can still observe
//!
//! An ESCR takes part in tagging only while a counter of its block runs
//! (SDM 18.15.5.9: otherwise it "may be powered down"; the model powers it
//! while any counter of the block runs, the host's included). A guest that
//! tags from an ESCR without running a counter of its block itself (which
//! the SDM leaves undefined) can learn whether the host runs one there.
//! Thread-independent events (the bus and cache events of SDM Table
//! 19-34) count the package's activity, the sibling logical processor's
//! included: a guest on one logical processor of a Hyper-Threading package
//! sees its sibling's share in them ([`EventFilter`] can deny them).

use crate::access::{MsrBackend, MsrOps};
use crate::arch::netburst::EscrValue;
use crate::arch::netburst::events::EventName;
use crate::arch::netburst::{ActiveThread, CccrValue};
use crate::arch::netburst::{
    COUNTER_MASK, Counter, CounterSet, Escr, EscrSet, IA32_DS_AREA, IA32_MISC_ENABLE,
    MSR_PEBS_ENABLE, MSR_PEBS_MATRIX_VERT, MSR_TC_PRECISE_EVENT, RdpmcIndex,
};
use crate::arch::netburst::{PebsEnable, PebsMatrixVert, TcPreciseEvent};
use crate::detect::MiscEnable;

pub use super::{Verdict, VirtualLvt};

/// Which PMU register an MSR number is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum MsrClass {
    /// A counter (`MSR_*_COUNTERn`, 300H-311H).
    Counter(Counter),
    /// A counter's CCCR (360H-371H).
    Cccr(Counter),
    /// An ESCR (SDM Table 18-63; whether the guest's model has it is
    /// [`Escr::available_on`]).
    Escr(Escr),
    /// `MSR_PEBS_ENABLE` (3F1H).
    PebsEnable,
    /// `MSR_PEBS_MATRIX_VERT` (3F2H).
    PebsMatrixVert,
    /// `MSR_TC_PRECISE_EVENT` (3F0H).
    TcPreciseEvent,
    /// `IA32_DS_AREA` (600H).
    DsArea,
    /// `IA32_MISC_ENABLE` (1A0H): PMU availability bits 7, 11 and 12.
    MiscEnable,
    /// An address in the PMU's range 300H-3FFH ([`PMU_MSRS`]) where family
    /// 0Fh implements no MSR: the hardware raises #GP.
    Unimplemented,
    /// Not a PMU register.
    NotPmu,
}

/// The MSR range of the NetBurst PMU: the counters (300H-311H), CCCRs
/// (360H-371H), ESCRs (3A0H-3E1H) and tagging MSRs (3F0H-3F2H) of SDM Vol.
/// 3C Table 35-41, and the unimplemented addresses between and after them.
pub const PMU_MSRS: core::ops::RangeInclusive<u32> = 0x300..=0x3FF;

/// The class of MSR `msr` (SDM Vol. 3C Table 35-41, Vol. 3B Table 18-63).
pub const fn classify(msr: u32) -> MsrClass {
    let counter = msr.wrapping_sub(Counter::MSR_BASE);
    if counter < 18
        && let Some(c) = Counter::from_index(counter as u8)
    {
        return MsrClass::Counter(c);
    }
    let cccr = msr.wrapping_sub(crate::arch::netburst::Cccr::MSR_BASE);
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
        _ if msr >= *PMU_MSRS.start() && msr <= *PMU_MSRS.end() => MsrClass::Unimplemented,
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
    Allow(&'static [EventName]),
    /// Every event but these.
    Deny(&'static [EventName]),
}

/// What a guest is shown and allowed. There is no PEBS option: guest PEBS
/// is always refused (see the [module documentation](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GuestPolicy {
    /// The family 0Fh model the guest sees (which ESCRs exist, Table
    /// 18-63; the extended cascade).
    pub model: u8,
    /// Logical processors the guest's virtual package has: with 1, the
    /// `T1_*` ESCR bits, `OVF_PMI_T1` and `ENABLE_PEBS_OTH_THR` are
    /// reserved and a CCCR's active-thread field must be 11b, as on a part
    /// without Hyper-Threading. A guest may be shown 2 only on a
    /// Hyper-Threading host, whose package it then has to itself.
    pub logical_processors: u8,
    /// The events it may count.
    pub filter: EventFilter,
    /// Counters (with their CCCRs) the host keeps for itself. A host
    /// counter must not cascade from a counter it does not keep.
    pub host_counters: CounterSet,
    /// ESCRs the host keeps for itself.
    pub host_escrs: EscrSet,
    /// The host uses µop tagging (it tags µops, counts tagged ones, or
    /// uses the tagging MSRs): the guest may do none of it (see the
    /// [module documentation](self)).
    pub host_tagging: bool,
}

impl GuestPolicy {
    /// A guest with one logical processor of model `model`, every event,
    /// nothing kept by the host.
    pub const fn new(model: u8) -> GuestPolicy {
        GuestPolicy {
            model,
            logical_processors: 1,
            filter: EventFilter::AllowAll,
            host_counters: CounterSet::EMPTY,
            host_escrs: EscrSet::EMPTY,
            host_tagging: false,
        }
    }

    const fn ht(&self) -> bool {
        self.logical_processors >= 2
    }

    fn allows(&self, escr: Escr, select: u8) -> bool {
        match (self.filter, event_on(escr, select)) {
            (EventFilter::AllowAll, _) => true,
            (EventFilter::Allow(list), Some(e)) => list.contains(&e),
            (EventFilter::Allow(_), None) => false,
            (EventFilter::Deny(list), Some(e)) => !list.contains(&e),
            (EventFilter::Deny(_), None) => true,
        }
    }
}

/// The catalog's event with event select `select` on `escr`, if any.
fn event_on(escr: Escr, select: u8) -> Option<EventName> {
    EventName::ALL
        .iter()
        .find(|e| e.info().event_select.get() == select && e.allows(escr))
        .copied()
}

/// Whether an ESCR image (one that counts: some `T*_OS`/`T*_USR` bit set)
/// tags µops or counts tagged ones: `Tag_Enable` (execution tagging, SDM
/// 18.15.6.3), an event that tags µops for another counter
/// ([`EventName::tags_uops`]: `uop_type`, the replay metrics' upstream
/// events), an at-retirement event that counts tagged µops
/// ([`EventName::needs_tagging`]), or `instr_retired` with `NBOGUSTAG` or
/// `BOGUSTAG` (mask bits 1 and 3, SDM Table 19-29).
fn takes_part_in_tagging(escr: Escr, v: EscrValue) -> bool {
    if v.tag_enable() {
        return true;
    }
    match event_on(escr, v.event_select().get()) {
        Some(EventName::InstrRetired) => v.event_mask().0 & 0b1010 != 0,
        Some(e) => e.tags_uops() || e.needs_tagging().is_some(),
        None => false,
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
    /// A CCCR whose active-thread field (bits 17:16) is not 11b, in a
    /// guest with one logical processor (SDM Figure 18-45: "must be set to
    /// 11B" without Hyper-Threading).
    ActiveThreadMustBeAny {
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
    /// An ESCR image that tags µops or counts tagged ones, while the host
    /// uses tagging ([`GuestPolicy::host_tagging`]).
    TaggingRefused {
        /// The MSR.
        msr: u32,
    },
    /// PEBS or the DS area: never for a guest.
    PebsRefused {
        /// The MSR.
        msr: u32,
    },
    /// An MSR the guest's model does not have: an ESCR absent there (Table
    /// 18-63), or an unimplemented address in the PMU's range.
    NoSuchMsr {
        /// The MSR.
        msr: u32,
    },
    /// A write to `IA32_MISC_ENABLE`, whose PMU bits 7, 11 and 12 are
    /// read-only.
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
            GuestGp::ActiveThreadMustBeAny { msr } => write!(
                f,
                "WRMSR {msr:#x}: a one-processor guest's CCCR active-thread field must be 11b"
            ),
            GuestGp::HostOwned { msr } => write!(f, "MSR {msr:#x} belongs to the host"),
            GuestGp::Filtered { escr, select } => write!(
                f,
                "event select {select:#x} on {} is filtered out",
                escr.name()
            ),
            GuestGp::TaggingRefused { msr } => {
                write!(f, "WRMSR {msr:#x}: the host uses µop tagging")
            }
            GuestGp::PebsRefused { msr } => write!(f, "MSR {msr:#x}: PEBS is not for guests"),
            GuestGp::NoSuchMsr { msr } => write!(f, "no MSR {msr:#x} on this model"),
            GuestGp::ReadOnly { msr } => write!(f, "MSR {msr:#x} is read-only there"),
            GuestGp::RdpmcNotAllowed => f.write_str("RDPMC at CPL > 0 with CR4.PCE clear"),
            GuestGp::RdpmcIndex { ecx } => write!(f, "RDPMC of no counter (ECX {ecx:#x})"),
        }
    }
}

impl core::error::Error for GuestGp {}

/// Counters are 40 bits wide (SDM 18.15.2): bits 63:40 are reserved.
const COUNTER_RESERVED: u64 = !COUNTER_MASK;
/// The `IA32_MISC_ENABLE` bits a guest reads from the PMU's part of the
/// register: performance monitoring available (bit 7), BTS unavailable
/// (bit 11) and PEBS unavailable (bit 12), all read-only (SDM Vol. 3C
/// Table 35-41). The VMM answers the other bits.
pub const MISC_ENABLE_PMU_BITS: u64 = MiscEnable::from_bits(0)
    .with_perf_mon_available(true)
    .with_bts_unavailable(true)
    .with_pebs_unavailable(true)
    .bits();

/// The tagging MSRs, in the order of [`PmuContext`]'s slots: 3F0H-3F2H.
const TAGGING_MSRS: [u32; 3] = [MSR_TC_PRECISE_EVENT, MSR_PEBS_ENABLE, MSR_PEBS_MATRIX_VERT];
/// Their neutral images (reset values).
const TAGGING_NEUTRAL: [u64; 3] = [
    TcPreciseEvent::RESET.bits(),
    PebsEnable::OFF.bits(),
    PebsMatrixVert::OFF.bits(),
];

/// The guest writes `value` to `msr`: what the VMM does (SDM reserved bits
/// for the guest's model and logical processors, then `policy`). Nothing
/// is changed here. Every write answered [`Verdict::Apply`] is one the
/// guest's processor takes without #GP (the isolation tests check a
/// million random writes per policy against the NetBurst model).
pub fn check_msr_write(policy: &GuestPolicy, msr: u32, value: u64) -> Verdict<GuestGp> {
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
    let host_tagging = || {
        if p.host_tagging {
            Err(GuestGp::HostOwned { msr })
        } else {
            Ok(())
        }
    };
    match classify(msr) {
        MsrClass::NotPmu => return Ok(Verdict::NotPmu),
        MsrClass::Unimplemented => return Err(GuestGp::NoSuchMsr { msr }),
        MsrClass::Counter(c) => {
            host_counter(p, c, msr)?;
            reserved(value & COUNTER_RESERVED)?;
        }
        MsrClass::Cccr(c) => {
            host_counter(p, c, msr)?;
            reserved(value & CccrValue::reserved_mask(c.cccr(), p.model))?;
            cccr_rule(
                p,
                c,
                msr,
                CccrValue::from_bits_truncate_for(value, c.cccr(), p.model),
            )?;
        }
        MsrClass::Escr(e) => {
            if !e.available_on(p.model) {
                return Err(GuestGp::NoSuchMsr { msr });
            }
            if p.host_escrs.contains(e) {
                return Err(GuestGp::HostOwned { msr });
            }
            reserved(value & EscrValue::RESERVED)?;
            escr_rule(p, e, msr, EscrValue::from_bits_truncate(value))?;
        }
        MsrClass::PebsEnable => {
            host_tagging()?;
            reserved(value & PebsEnable::RESERVED)?;
            let v = PebsEnable::from_bits(value);
            if !p.ht() && v.enable_pebs_oth_thr() {
                return Err(GuestGp::OtherLogicalProcessor { msr });
            }
            if v.enable_pebs_my_thr() || v.enable_pebs_oth_thr() {
                return Err(GuestGp::PebsRefused { msr });
            }
        }
        MsrClass::PebsMatrixVert => {
            host_tagging()?;
            reserved(value & PebsMatrixVert::RESERVED)?;
        }
        MsrClass::TcPreciseEvent => {
            host_tagging()?;
            reserved(value & TcPreciseEvent::RESERVED)?;
        }
        MsrClass::DsArea => return Err(GuestGp::PebsRefused { msr }),
        MsrClass::MiscEnable => return Err(GuestGp::ReadOnly { msr }),
    }
    Ok(Verdict::Apply)
}

/// A CCCR image without reserved bits, for counter `c`: the logical
/// processors the guest has, and the host's ESCRs and counters.
fn cccr_rule(p: &GuestPolicy, c: Counter, msr: u32, v: CccrValue) -> Result<(), GuestGp> {
    if !p.ht() && v.ovf_pmi_t1() {
        return Err(GuestGp::OtherLogicalProcessor { msr });
    }
    if !p.ht() && v.active_thread() != ActiveThread::Any {
        return Err(GuestGp::ActiveThreadMustBeAny { msr });
    }
    // The ESCR it selects, and the counters it cascades from, must not be
    // the host's: the guest would count the host's events, or start
    // counting on the host's overflow.
    let runs = v.enable() || v.cascade() || v.extended_cascade();
    if let Some(e) = c.escr_for_select(v.escr_select(), p.model)
        && p.host_escrs.contains(e)
        && runs
    {
        return Err(GuestGp::HostOwned { msr });
    }
    if v.cascade() && p.host_counters.contains(c.cascade_source()) {
        return Err(GuestGp::HostOwned { msr });
    }
    if v.extended_cascade()
        && let Some(from) = c.extended_cascade_source(p.model)
        && p.host_counters.contains(from)
    {
        return Err(GuestGp::HostOwned { msr });
    }
    Ok(())
}

/// An ESCR image without reserved bits, on a guest's ESCR `e`: its logical
/// processors, the event filter and the host's tagging.
fn escr_rule(p: &GuestPolicy, e: Escr, msr: u32, v: EscrValue) -> Result<(), GuestGp> {
    if !p.ht() && (v.t1_os() || v.t1_usr()) {
        return Err(GuestGp::OtherLogicalProcessor { msr });
    }
    let counts = v.t0_os() || v.t0_usr() || v.t1_os() || v.t1_usr();
    let select = v.event_select().get();
    if counts && !p.allows(e, select) {
        return Err(GuestGp::Filtered { escr: e, select });
    }
    if counts && p.host_tagging && takes_part_in_tagging(e, v) {
        return Err(GuestGp::TaggingRefused { msr });
    }
    Ok(())
}

fn host_counter(p: &GuestPolicy, c: Counter, msr: u32) -> Result<(), GuestGp> {
    if p.host_counters.contains(c) {
        Err(GuestGp::HostOwned { msr })
    } else {
        Ok(())
    }
}

/// The guest reads `msr`: what the VMM does. The host's registers read as
/// #GP (a guest never learns of them), as do unimplemented MSRs of the
/// PMU's range and `IA32_DS_AREA`; `IA32_MISC_ENABLE`'s PMU bits are the
/// VMM's to answer ([`MISC_ENABLE_PMU_BITS`]).
pub fn check_msr_read(policy: &GuestPolicy, msr: u32) -> Verdict<GuestGp> {
    match classify(msr) {
        MsrClass::NotPmu => Verdict::NotPmu,
        MsrClass::Unimplemented => Verdict::InjectGp(GuestGp::NoSuchMsr { msr }),
        MsrClass::Counter(c) | MsrClass::Cccr(c) if policy.host_counters.contains(c) => {
            Verdict::InjectGp(GuestGp::HostOwned { msr })
        }
        MsrClass::Escr(e) if !e.available_on(policy.model) => {
            Verdict::InjectGp(GuestGp::NoSuchMsr { msr })
        }
        MsrClass::Escr(e) if policy.host_escrs.contains(e) => {
            Verdict::InjectGp(GuestGp::HostOwned { msr })
        }
        MsrClass::PebsEnable | MsrClass::PebsMatrixVert | MsrClass::TcPreciseEvent
            if policy.host_tagging =>
        {
            Verdict::InjectGp(GuestGp::HostOwned { msr })
        }
        MsrClass::DsArea => Verdict::InjectGp(GuestGp::PebsRefused { msr }),
        MsrClass::MiscEnable => Verdict::Emulate,
        _ => Verdict::Apply,
    }
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
    let Some((index, c)) = RdpmcIndex::from_ecx(ecx).and_then(|i| Some((i, i.counter()?))) else {
        return Err(GuestGp::RdpmcIndex { ecx });
    };
    if policy.host_counters.contains(c) {
        return Err(GuestGp::HostOwned { msr: c.msr() });
    }
    let v = counter(c) & !COUNTER_RESERVED;
    Ok(if index.fast() { u64::from(v as u32) } else { v })
}

/// Gives every register a guest under `policy` can read its neutral image:
/// the CCCRs [`CccrValue::IDLE`] (first, so nothing counts), the counters
/// and the ESCRs of the guest's model 0, and (unless the host keeps them)
/// the tagging MSRs their reset values. The host's registers are not
/// touched. Run once before the first guest, so that a register no context
/// has used reads the same as one a switched-out context has scrubbed.
/// `2(18 - h) + e + 3` WRMSR for `h` host counters and `e` guest ESCRs.
pub fn scrub_all<M: MsrBackend>(policy: &GuestPolicy, msr: &mut M) -> Result<(), M::Error> {
    let guest_counters = Counter::ALL
        .into_iter()
        .filter(|&c| !policy.host_counters.contains(c));
    for c in guest_counters.clone() {
        msr.write_msr(c.cccr().msr(), CccrValue::IDLE.bits())?;
    }
    for c in guest_counters {
        msr.write_msr(c.msr(), 0)?;
    }
    for e in Escr::ALL {
        if e.available_on(policy.model) && !policy.host_escrs.contains(e) {
            msr.write_msr(e.msr(), 0)?;
        }
    }
    if !policy.host_tagging {
        for (m, v) in TAGGING_MSRS.into_iter().zip(TAGGING_NEUTRAL) {
            msr.write_msr(m, v)?;
        }
    }
    Ok(())
}

/// One side's PMU state for the world switch: its registers, which of them
/// it uses (tracked as it writes them, [`PmuContext::record`]), and which
/// of its overflows have had their PMI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PmuContext {
    counters: [u64; 18],
    cccrs: [u64; 18],
    escrs: [u64; 45],
    /// `MSR_TC_PRECISE_EVENT`, `MSR_PEBS_ENABLE`, `MSR_PEBS_MATRIX_VERT`.
    tagging: [u64; 3],
    counters_used: CounterSet,
    escrs_used: EscrSet,
    /// Bit `i`: `TAGGING_MSRS[i]` in use.
    tagging_used: u8,
    /// Counters whose current overflow (`OVF` set) has had its PMI raised
    /// or owed ([`PmuContext::take_overflows`], [`PmuContext::save`]).
    pmi_reported: CounterSet,
}

impl Default for PmuContext {
    fn default() -> Self {
        Self::new()
    }
}

impl PmuContext {
    /// Nothing used; every register its neutral image (see [`scrub_all`]).
    pub const fn new() -> PmuContext {
        PmuContext {
            counters: [0; 18],
            cccrs: [CccrValue::IDLE.bits(); 18],
            escrs: [0; 45],
            tagging: TAGGING_NEUTRAL,
            counters_used: CounterSet::EMPTY,
            escrs_used: EscrSet::EMPTY,
            tagging_used: 0,
            pmi_reported: CounterSet::EMPTY,
        }
    }

    /// Records a write the side made (for a guest: one [`check_msr_write`]
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
                if !CccrValue::from_bits_truncate(value).ovf() {
                    self.pmi_reported = self.pmi_reported.without(c);
                }
            }
            MsrClass::Escr(e) => {
                self.escrs[e as usize] = value;
                self.escrs_used = self.escrs_used.with(e);
            }
            MsrClass::TcPreciseEvent | MsrClass::PebsEnable | MsrClass::PebsMatrixVert => {
                let i = tagging_slot(msr);
                self.tagging[i] = value;
                self.tagging_used |= 1 << i;
            }
            _ => return false,
        }
        true
    }

    /// The context's value of `msr`, while it is not loaded: its own value
    /// for a register it used, the neutral image (what the hardware holds
    /// after [`scrub_all`] and [`PmuContext::scrub`]) for one it did not.
    pub fn read(&self, msr: u32) -> Option<u64> {
        Some(match classify(msr) {
            MsrClass::Counter(c) => self.counters[usize::from(c.index())],
            MsrClass::Cccr(c) => self.cccrs[usize::from(c.index())],
            MsrClass::Escr(e) => self.escrs[e as usize],
            MsrClass::TcPreciseEvent | MsrClass::PebsEnable | MsrClass::PebsMatrixVert => {
                self.tagging[tagging_slot(msr)]
            }
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

    /// Whether counter `c`'s CCCR image `image` shows an overflow with a
    /// PMI requested whose PMI has not been reported yet; marks it
    /// reported. An image without `OVF` forgets an earlier report.
    fn newly_overflowed(&mut self, c: Counter, image: u64) -> bool {
        let v = CccrValue::from_bits_truncate(image);
        if !v.ovf() {
            self.pmi_reported = self.pmi_reported.without(c);
            return false;
        }
        if !(v.ovf_pmi_t0() || v.ovf_pmi_t1()) || self.pmi_reported.contains(c) {
            return false;
        }
        self.pmi_reported = self.pmi_reported.with(c);
        true
    }

    /// The host took a PMI while this context is loaded: the context's
    /// counters that overflowed with `OVF_PMI` since their last report
    /// (each reported once per overflow, until the side clears its `OVF`).
    /// Not empty: the PMI is the side's ([`VirtualLvt::raise`]). `k` RDMSR.
    pub fn take_overflows<M: MsrBackend>(&mut self, msr: &mut M) -> Result<CounterSet, M::Error> {
        let mut out = CounterSet::EMPTY;
        for c in self.counters_used.iter() {
            let image = msr.read_msr(c.cccr().msr())?;
            if self.newly_overflowed(c, image) {
                out = out.with(c);
            }
        }
        Ok(out)
    }

    /// Takes the context off the hardware: every CCCR in use is read (its
    /// full image, sticky `OVF` included) and written idle
    /// ([`CccrValue::IDLE`]) first, so that nothing counts or cascades while
    /// the counters are read and none of them counts until the context is
    /// restored; then each counter in use is read. `2k` RDMSR and `k` WRMSR
    /// for `k` counters in use.
    ///
    /// Returns the counters that overflowed with `OVF_PMI` and have not had
    /// their PMI ([`PmuContext::take_overflows`]): their PMI would have come
    /// with the next event, which the idle image withdraws, so the VMM
    /// raises the side's virtual PMI for them now ([`VirtualLvt::raise`]).
    pub fn save<M: MsrBackend>(&mut self, msr: &mut M) -> Result<CounterSet, M::Error> {
        for c in self.counters_used.iter() {
            let v = msr.read_msr(c.cccr().msr())?;
            self.cccrs[usize::from(c.index())] = v;
            msr.write_msr(c.cccr().msr(), CccrValue::IDLE.bits())?;
        }
        for c in self.counters_used.iter() {
            self.counters[usize::from(c.index())] = msr.read_msr(c.msr())?;
        }
        let mut owed = CounterSet::EMPTY;
        for c in self.counters_used.iter() {
            if self.newly_overflowed(c, self.cccrs[usize::from(c.index())]) {
                owed = owed.with(c);
            }
        }
        Ok(owed)
    }

    /// Puts the context on the hardware: the ESCRs and tagging MSRs in use,
    /// the counters, and the CCCRs last (with `OVF` as saved, so a pending
    /// overflow is still pending). `e + t + 2k` WRMSR. The registers the
    /// context does not use hold their neutral images if every side that
    /// used them was scrubbed ([`PmuContext::scrub`], [`scrub_all`]).
    pub fn restore<M: MsrBackend>(&self, msr: &mut M) -> Result<(), M::Error> {
        for e in self.escrs_used.iter() {
            msr.write_msr(e.msr(), self.escrs[e as usize])?;
        }
        for (i, m) in TAGGING_MSRS.into_iter().enumerate() {
            if self.tagging_used & 1 << i != 0 {
                msr.write_msr(m, self.tagging[i])?;
            }
        }
        for c in self.counters_used.iter() {
            msr.write_msr(c.msr(), self.counters[usize::from(c.index())])?;
        }
        for c in self.counters_used.iter() {
            msr.write_msr(c.cccr().msr(), self.cccrs[usize::from(c.index())])?;
        }
        Ok(())
    }

    /// After [`PmuContext::save`] (which left its CCCRs idle): zeroes the
    /// counters and ESCRs the context used and gives the tagging MSRs it
    /// used their neutral images, so the next side learns nothing of it.
    /// `k + e + t` WRMSR.
    pub fn scrub<M: MsrBackend>(&self, msr: &mut M) -> Result<(), M::Error> {
        for c in self.counters_used.iter() {
            msr.write_msr(c.msr(), 0)?;
        }
        for e in self.escrs_used.iter() {
            msr.write_msr(e.msr(), 0)?;
        }
        for (i, m) in TAGGING_MSRS.into_iter().enumerate() {
            if self.tagging_used & 1 << i != 0 {
                msr.write_msr(m, TAGGING_NEUTRAL[i])?;
            }
        }
        Ok(())
    }
}

/// The slot of a tagging MSR (3F0H-3F2H) in [`PmuContext`].
const fn tagging_slot(msr: u32) -> usize {
    (msr - MSR_TC_PRECISE_EVENT) as usize
}

#[cfg(test)]
mod tests;

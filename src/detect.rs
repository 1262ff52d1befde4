//! PMU detection from CPUID, IA32_MISC_ENABLE and, on AMD, a read-back of
//! one counter.
//!
//! Detection executes only instructions every x86-64 CPU has: CPUID, and,
//! after CPUID.01H:EDX.MSR[bit 5] says RDMSR exists, RDMSR of
//! IA32_MISC_ENABLE (Intel) or RDMSR and WRMSR of AMD's first legacy
//! counter and its control (AMD: below). It never executes RDPMC, which
//! raises #UD on a CPU without counters (QEMU's TCG does exactly that).
//!
//! A NetBurst processor (Pentium 4, Xeon, Pentium D) is a GenuineIntel CPU of
//! family 0Fh with extended family 0 (SDM Vol. 3B 18.15; Vol. 2A CPUID). Its
//! performance-monitoring facilities are usable only when
//! IA32_MISC_ENABLE\[7\] ("Performance Monitoring Available") is set; bit 12
//! ("PEBS Unavailable") says whether precise event-based sampling is missing
//! (SDM Vol. 3C Table 35-41, MSR 1A0H). On an architectural PMU the same
//! bit is read where CPUID.01H:EDX.DS says the debug store exists, and
//! `IA32_PERF_CAPABILITIES` gives the PEBS record format ([`ArchPebs`]).
//!
//! An AMD processor (`AuthenticAMD`, and Hygon's `HygonGenuine`, which
//! Linux drives with the same code) of family 06h or later has the AMD
//! core PMU ([`AmdCpu`]): four legacy counters, six with PerfCtrExtCore
//! (CPUID 8000_0001H:ECX\[23\]), and the PerfMonV2 global registers with
//! the counter count of CPUID 8000_0022H. QEMU's default CPU model
//! (`qemu64`) is such a part (AuthenticAMD, family 0Fh), and behind it
//! (under TCG, and under KVM where the host exposes no PMU) the counter
//! MSRs read 0 and drop what is written: detection finds that out with a
//! read-back probe of one legacy counter that is not enabled
//! ([`CounterProbe`]: it writes the counter and puts the value back) and
//! reports "counters read 0"; [`Detection::usable_amd`] is then `None`.
//! The legacy MSRs it probes exist on every AMD64 processor (and KVM
//! answers them whether or not it exposes a PMU); the PerfCtrExtCore and
//! PerfMonV2 MSRs are touched only where CPUID says they exist.
//!
//! # Examples
//!
//! The NetBurst model answers CPUID and RDMSR like a Pentium 4 with
//! Hyper-Threading:
//!
//! (On a register-level model: a doc test with the `model` feature, ignored without it.)
//!
#![cfg_attr(feature = "model", doc = "```")]
#![cfg_attr(not(feature = "model"), doc = "```ignore")]
//! use pmu::detect::{PmuKind, detect};
//! use pmu::model::netburst::{Config, NetBurstModel};
//!
//! let model = NetBurstModel::new(Config::prescott_ht());
//! let found = detect(&model, &mut model.clone())?;
//! let PmuKind::NetBurst(nb) = found.pmu else { panic!("not a NetBurst") };
//! assert_eq!(nb.model, 3);
//! assert!(nb.perf_mon_available && nb.hyper_threading);
//! assert_eq!(found.usable_netburst(), Some(nb));
//! # Ok::<(), pmu::model::netburst::Fault>(())
//! ```

use core::fmt;

use crate::access::{MsrBackend, MsrOps};

mod registers;

pub use registers::*;

/// The four registers CPUID returns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[allow(missing_docs)]
pub struct CpuidResult {
    pub eax: u32,
    pub ebx: u32,
    pub ecx: u32,
    pub edx: u32,
}

/// A source of CPUID results: the real instruction ([`HardwareCpuid`]) or a
/// table, for tests and for the PMU models.
pub trait Cpuid {
    /// CPUID with EAX = `leaf` and ECX = `subleaf`.
    fn cpuid(&self, leaf: u32, subleaf: u32) -> CpuidResult;
}

/// The CPUID instruction of the CPU the code runs on. CPUID exists on every
/// x86-64 processor and is harmless at any privilege level.
#[derive(Clone, Copy, Debug, Default)]
pub struct HardwareCpuid;

impl Cpuid for HardwareCpuid {
    fn cpuid(&self, leaf: u32, subleaf: u32) -> CpuidResult {
        let r = core::arch::x86_64::__cpuid_count(leaf, subleaf);
        CpuidResult {
            eax: r.eax,
            ebx: r.ebx,
            ecx: r.ecx,
            edx: r.edx,
        }
    }
}

/// The CPU vendor from CPUID leaf 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Vendor {
    /// "GenuineIntel".
    Intel,
    /// "AuthenticAMD".
    Amd,
    /// "HygonGenuine": Hygon's processors (family 18h), built on AMD's Zen
    /// core, whose PMU is AMD's (Linux's `init_hw_perf_events` calls
    /// `amd_pmu_init` for both).
    Hygon,
    /// Any other vendor string, as the 12 bytes of EBX, EDX, ECX.
    Other([u8; 12]),
}

impl Vendor {
    fn from_leaf0(r: CpuidResult) -> Self {
        let mut id = [0u8; 12];
        id[0..4].copy_from_slice(&r.ebx.to_le_bytes());
        id[4..8].copy_from_slice(&r.edx.to_le_bytes());
        id[8..12].copy_from_slice(&r.ecx.to_le_bytes());
        match &id {
            b"GenuineIntel" => Self::Intel,
            b"AuthenticAMD" => Self::Amd,
            b"HygonGenuine" => Self::Hygon,
            _ => Self::Other(id),
        }
    }

    /// The vendor identification string as CPUID returns it.
    pub fn id(&self) -> &[u8; 12] {
        match self {
            Self::Intel => b"GenuineIntel",
            Self::Amd => b"AuthenticAMD",
            Self::Hygon => b"HygonGenuine",
            Self::Other(id) => id,
        }
    }
}

impl fmt::Display for Vendor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for &b in self.id() {
            let c = if b.is_ascii_graphic() { b as char } else { '?' };
            fmt::Write::write_char(f, c)?;
        }
        Ok(())
    }
}

/// The processor signature, CPUID.01H:EAX, decoded as SDM Vol. 2A (CPUID,
/// Figure 3-6) says: the displayed family adds the extended family only when
/// the base family is 0Fh, the displayed model adds the extended model when the
/// base family is 06h or 0Fh.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CpuSignature {
    /// CPUID.01H:EAX as returned.
    pub raw: u32,
    /// Base family, bits 11:8.
    pub base_family: u8,
    /// Extended family, bits 27:20.
    pub extended_family: u8,
    /// Displayed family.
    pub family: u16,
    /// Displayed model.
    pub model: u8,
    /// Stepping, bits 3:0.
    pub stepping: u8,
}

impl CpuSignature {
    /// Decodes CPUID.01H:EAX.
    pub const fn from_eax(raw: u32) -> Self {
        let eax = Leaf01Eax::from_bits(raw);
        let stepping = eax.stepping();
        let base_model = eax.model();
        let base_family = eax.family();
        let extended_model = eax.extended_model();
        let extended_family = eax.extended_family();
        let family = if base_family == 0xF {
            base_family as u16 + extended_family as u16
        } else {
            base_family as u16
        };
        let model = if base_family == 0x6 || base_family == 0xF {
            extended_model << 4 | base_model
        } else {
            base_model
        };
        Self {
            raw,
            base_family,
            extended_family,
            family,
            model,
            stepping,
        }
    }
}

impl fmt::Display for CpuSignature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "family {:#x} model {:#x} stepping {:#x} (CPUID.01H:EAX {:#010x})",
            self.family, self.model, self.stepping, self.raw
        )
    }
}

/// What detection found out about a NetBurst processor's PMU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NetBurstCpu {
    /// The NetBurst model number (0-6; 3, 4 and 6 are the 90/65 nm parts).
    pub model: u8,
    /// CPUID.01H:EDX.MSR[bit 5]: RDMSR and WRMSR exist.
    pub msr_instructions: bool,
    /// IA32_MISC_ENABLE\[7\]. When clear, the PMU MSRs must not be used: on real
    /// hardware they are absent; under QEMU they read as zero and drop writes.
    pub perf_mon_available: bool,
    /// IA32_MISC_ENABLE\[12\] clear: PEBS is supported.
    pub pebs_available: bool,
    /// CPUID.01H:EDX.HTT[bit 28]: the package may hold two logical
    /// processors that share this PMU (Hyper-Threading).
    pub hyper_threading: bool,
    /// CPUID.01H:EBX\[23:16\]: logical processors per package (1 when HTT is 0).
    pub logical_processors: u8,
}

impl NetBurstCpu {
    /// Whether the driver may program the PMU: the MSRs exist and the
    /// processor says performance monitoring is available.
    pub const fn usable(&self) -> bool {
        self.msr_instructions && self.perf_mon_available
    }
}

/// The kind of core a logical processor of a hybrid part is (CPUID leaf
/// 1AH, EAX\[31:24\]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CoreType {
    /// 20H: Intel Atom (an efficient core).
    Atom,
    /// 40H: Intel Core (a performance core).
    Core,
    /// Another value.
    Other(u8),
}

/// What detection found out about an architectural PMU (Intel, any family
/// but NetBurst's, CPUID leaf 0AH version 1 or later; SDM Vol. 3B
/// "Architectural Performance Monitoring"). Per logical processor: on a
/// hybrid part another logical processor may report other counters.
///
/// # Hybrid parts
///
/// Which counters and architectural events this logical processor has
/// ([`ArchPerfCpu::general_bitmap`], [`ArchPerfCpu::fixed_bitmap`],
/// [`ArchPerfCpu::event_available`]) comes from CPUID leaf 23H where
/// CPUID.(EAX=07H, ECX=01H):EAX\[8\] enumerates it ([`ArchPerfCpu::ext`]),
/// and from leaf 0AH otherwise. The two differ on a hybrid part: leaf 0AH
/// reports what every core type has, leaf 23H what this core has.
/// Recorded on an Intel Core Ultra 7 155H (Meteor Lake; InstLatx64's
/// `GenuineIntel00A06A4_MeteorLake_10_CPUID.txt`), every logical processor
/// reports leaf 0AH `07300805-00000000-00000007-00008603` (8 general
/// counters, fixed counters 0-2, events 0-6), while leaf 23H reports fixed
/// counters 0-3 and events 0-8, 10, 11 on the Redwood Cove (Core) cores
/// and fixed counters 0-2, events 0-6 on the Crestmont (Atom) cores.
///
/// A hybrid part without leaf 23H (Alder Lake, Raptor Lake) has only the
/// common view: an i9-12900K reports `07300605-00000000-00000007-00008603`
/// (6 general, 3 fixed counters) on its Golden Cove and Gracemont cores
/// alike, and `08300805-00000000-0000000F-00008604` (8 general, 4 fixed)
/// with its E-cores disabled (InstLatx64's
/// `GenuineIntel0090672_AlderLake_01_LC_BC_CPUID.txt` and
/// `..._BC_AVX512_CPUID.txt`). Linux adds the Golden Cove core's two
/// general counters and fixed counter 3 from the model number
/// (`intel_pmu_init`: `num_counters + 2`, `num_counters_fixed + 1`, and a
/// quirk for the E-cores-disabled case); this crate drives what CPUID
/// enumerates, so there it uses the common counters on every core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ArchPerfCpu {
    /// CPUID leaf 0AH as read (version, counters, widths, events, fixed
    /// counters).
    pub leaf: Leaf0A,
    /// CPUID leaf 23H as read, where CPUID.(EAX=07H, ECX=01H):EAX\[8\]
    /// says it exists (Meteor Lake, Lunar Lake, Arrow Lake and later): this
    /// logical processor's own counters and events.
    pub ext: Option<Leaf23>,
    /// `IA32_PERF_CAPABILITIES[13]` (read when CPUID.01H:ECX.PDCM\[15\] is
    /// set): the counters take full-width writes through `IA32_A_PMCx`.
    pub full_width_write: bool,
    /// CPUID.07H:EDX\[15\]: a hybrid part (its logical processors may be
    /// of different core types, with different PMUs).
    pub hybrid: bool,
    /// This logical processor's core type, on a hybrid part.
    pub core_type: Option<CoreType>,
    /// The display family (CPUID.01H).
    pub family: u16,
    /// The display model (CPUID.01H).
    pub model: u8,
    /// What the CPU says of PEBS ([`ArchPebs`]).
    pub pebs: ArchPebs,
    /// What the CPU says of its last branch records ([`LbrCaps`]).
    pub lbr: LbrCaps,
}

/// What an architectural-PMU CPU says of its last branch records (SDM Vol.
/// 3B "Last Branch Records" and "Architectural Last Branch Records"): the
/// legacy stack's record format, or architectural LBR's CPUID leaf. The
/// legacy stack's depth and MSR addresses are the microarchitecture's
/// (`crate::arch::archperf::Lbr::of` knows the generations the crate
/// drives); architectural LBR says everything through CPUID.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LbrCaps {
    /// `IA32_PERF_CAPABILITIES[5:0]`: the legacy records' format (read
    /// when CPUID.01H:ECX.PDCM is set; 0 otherwise).
    pub format: u8,
    /// CPUID leaf 1CH (EAX, EBX, ECX) when CPUID.07H:EDX\[19\] says the
    /// part has architectural LBR.
    pub arch: Option<[u32; 3]>,
    /// TSX (CPUID.07H:EBX HLE\[4\] or RTM\[11\]): on a part without it,
    /// record format 4's FROM bits 62:61 are the address's sign extension
    /// when written (Linux's `lbr_from_signext_quirk_wr`).
    pub tsx: bool,
}

impl LbrCaps {
    /// Leaf 1CH's EAX: the depths, deep C-state reset, LIP.
    pub const fn arch_eax(&self) -> Option<Leaf1CEax> {
        match self.arch {
            Some([eax, _, _]) => Some(Leaf1CEax::from_bits(eax)),
            None => None,
        }
    }

    /// Leaf 1CH's EBX: CPL filtering, branch filtering, call-stack mode.
    pub const fn arch_ebx(&self) -> Option<Leaf1CEbx> {
        match self.arch {
            Some([_, ebx, _]) => Some(Leaf1CEbx::from_bits(ebx)),
            None => None,
        }
    }

    /// Leaf 1CH's ECX: mispredict bit, timed LBRs, branch type.
    pub const fn arch_ecx(&self) -> Option<Leaf1CEcx> {
        match self.arch {
            Some([_, _, ecx]) => Some(Leaf1CEcx::from_bits(ecx)),
            None => None,
        }
    }
}

/// What an architectural-PMU CPU says of PEBS (SDM Vol. 3B "Processor Event
/// Based Sampling (PEBS)"; the DS-area PEBS of Nehalem to today's parts):
/// all zero when it has none.
///
/// Architectural PEBS (the newest parts' PEBS, enumerated by CPUID leaf
/// 23H's sub-leaves 4 and 5, which writes records through its own MSRs,
/// `IA32_PEBS_BASE` and `IA32_PEBS_INDEX`, instead of the DS save area,
/// with a new record header and per-counter configuration MSRs; documented
/// in Intel's "Architecture Instruction Set Extensions and Future
/// Features", not yet in the SDM's PEBS chapter) is out of scope:
/// detection reads leaf 23H's counters and events only
/// ([`ArchPerfCpu::ext`]), and a CPU is driven with PEBS only where `IA32_PERF_CAPABILITIES`
/// reports one of the DS-area record formats 1-5 and `IA32_MISC_ENABLE`
/// says PEBS is available, so a part whose PEBS is only architectural is
/// driven without PEBS.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ArchPebs {
    /// CPUID.01H:EDX.DS\[21\]: the debug store (the DS save area) exists.
    pub ds: bool,
    /// `IA32_MISC_ENABLE[12]` ("PEBS unavailable") clear; read only when
    /// [`ArchPebs::ds`] and the MSR instructions exist.
    pub available: bool,
    /// `IA32_PERF_CAPABILITIES[11:8]`: the record format.
    pub format: u8,
    /// `IA32_PERF_CAPABILITIES[14]`: PEBS baseline (adaptive PEBS, PEBS on
    /// every general and fixed counter).
    pub baseline: bool,
    /// `IA32_PERF_CAPABILITIES[6]`: a trap-like assist.
    pub trap: bool,
}

impl ArchPebs {
    /// The record formats the crate drives: Nehalem's 1, Haswell's 2,
    /// Skylake's 3, Ice Lake's 4 and format 5 (4's records with format 5's
    /// counter-reset layout). Core 2's format 0 (one counter, a record
    /// without the memory fields) is not driven.
    pub const FORMATS: core::ops::RangeInclusive<u8> = 1..=5;

    /// Whether the driver may use PEBS: the DS area exists, PEBS is
    /// available, and the record format is one of [`ArchPebs::FORMATS`].
    pub const fn usable(&self) -> bool {
        self.ds && self.available && self.format >= 1 && self.format <= 5
    }
}

/// Which CPUID leaf says what a logical processor's PMU has
/// ([`ArchPerfCpu::counters_from`], [`ArchPerfCpu::events_from`]), for the
/// messages that say why a CPU lacks something.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Enumeration {
    /// CPUID leaf 0AH: counts and EBX's vector of unavailable events (on a
    /// hybrid part, what every core type has).
    Leaf0A,
    /// CPUID leaf 23H: this logical processor's own bitmaps.
    Leaf23,
}

impl ArchPerfCpu {
    /// The version (1-5 and later).
    pub const fn version(&self) -> u8 {
        self.leaf.version()
    }

    /// This logical processor's general counters, bit n for counter n:
    /// CPUID.23H.01H:EAX where leaf 23H enumerates them, the first
    /// CPUID.0AH:EAX\[15:8\] otherwise.
    pub const fn general_bitmap(&self) -> u32 {
        match self.ext {
            Some(ext) => match ext.general() {
                Some(bitmap) => bitmap,
                None => self.leaf.general_bitmap(),
            },
            None => self.leaf.general_bitmap(),
        }
    }

    /// This logical processor's fixed counters, bit i for fixed counter i:
    /// CPUID.23H.01H:EBX where leaf 23H enumerates them, leaf 0AH's
    /// `ECX[i] || EDX[4:0] > i` otherwise.
    pub const fn fixed_bitmap(&self) -> u32 {
        match self.ext {
            Some(ext) => match ext.fixed() {
                Some(bitmap) => bitmap,
                None => self.leaf.fixed_bitmap(),
            },
            None => self.leaf.fixed_bitmap(),
        }
    }

    /// How many general counters this logical processor has
    /// ([`ArchPerfCpu::general_bitmap`]'s bits).
    pub const fn general(&self) -> u8 {
        self.general_bitmap().count_ones() as u8
    }

    /// Fixed counter `i` exists on this logical processor
    /// ([`ArchPerfCpu::fixed_bitmap`]).
    pub const fn fixed_supported(&self, i: u8) -> bool {
        registers::bitmap_has(self.fixed_bitmap(), i)
    }

    /// This logical processor's available architectural events, bit k for
    /// event k: CPUID.23H.03H:EAX where leaf 23H enumerates them, leaf
    /// 0AH's EBX clear bits within its vector otherwise
    /// ([`ArchPerfCpu::event_available`]).
    pub const fn events_bitmap(&self) -> u32 {
        match self.ext {
            Some(ext) if ext.subleaves.events() => ext.events,
            _ => self.leaf.available_events(),
        }
    }

    /// Architectural event `k` (its CPUID.0AH:EBX bit, as
    /// [`ArchEvent::ebx_bit`](crate::arch::archperf::ArchEvent::ebx_bit)
    /// numbers it) is available on this logical processor: its bit set in
    /// CPUID.23H.03H:EAX where leaf 23H enumerates the events, within leaf
    /// 0AH's vector with its EBX bit clear otherwise.
    pub const fn event_available(&self, k: u8) -> bool {
        match self.ext {
            Some(ext) => match ext.event_supported(k) {
                Some(yes) => yes,
                None => self.leaf.event_available(k),
            },
            None => self.leaf.event_available(k),
        }
    }

    /// The leaf the counters come from.
    pub const fn counters_from(&self) -> Enumeration {
        match self.ext {
            Some(ext) if ext.subleaves.counters() => Enumeration::Leaf23,
            _ => Enumeration::Leaf0A,
        }
    }

    /// The leaf the architectural events come from.
    pub const fn events_from(&self) -> Enumeration {
        match self.ext {
            Some(ext) if ext.subleaves.events() => Enumeration::Leaf23,
            _ => Enumeration::Leaf0A,
        }
    }
}

impl fmt::Display for CoreType {
    /// `an Atom core (CPUID.1AH core type 20H)`, `a Core core (...)`: as
    /// the messages that say which core type refused something write it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CoreType::Atom => f.write_str("an Atom (efficiency) core, CPUID.1AH core type 20H"),
            CoreType::Core => f.write_str("a Core (performance) core, CPUID.1AH core type 40H"),
            CoreType::Other(t) => write!(f, "a core of CPUID.1AH core type {t:02X}H"),
        }
    }
}

/// What the read-back probe of an AMD counter found ([`AmdCpu::probe`]):
/// detection writes one legacy counter that is not enabled
/// (`PERF_LEGACY_CTRn`, `n` the first whose `PERF_LEGACY_CTLn.EN` is
/// clear) with its value XOR FFFFH, reads it back and writes the old value
/// again, as Linux's `check_hw_exists` does to find "emulators that don't
/// trap on the MSR access and always return 0s". Five MSR accesses at
/// most besides the control reads; a counter that is not enabled does not
/// count, so the probe changes nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CounterProbe {
    /// The counter read back what was written: the counters are there.
    ReadBack {
        /// The legacy counter probed (0-3).
        counter: u8,
    },
    /// The counter did not read back what was written: the MSRs exist
    /// (no fault) but hold nothing, as QEMU's TCG answers every PMU MSR
    /// (reads 0, writes dropped) and KVM answers the legacy ones when it
    /// exposes no PMU. Displayed "counters read 0" when `read` is 0.
    Lost {
        /// The legacy counter probed (0-3).
        counter: u8,
        /// The value written.
        wrote: u64,
        /// The value read back.
        read: u64,
    },
    /// Every legacy counter was found enabled (the firmware's): none could
    /// be probed, and the driver would have none to use.
    AllEnabled,
    /// Not probed: CPUID.01H:EDX.MSR says RDMSR and WRMSR do not exist.
    NoMsr,
}

impl fmt::Display for CounterProbe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            CounterProbe::ReadBack { counter } => {
                write!(f, "PERF_LEGACY_CTR{counter} reads back what is written")
            }
            CounterProbe::Lost {
                counter,
                wrote,
                read: 0,
            } => write!(
                f,
                "counters read 0: PERF_LEGACY_CTR{counter} read 0 after {wrote:#x} was written (the MSRs answer, but hold nothing: an emulator, or a hypervisor that exposes no PMU)"
            ),
            CounterProbe::Lost {
                counter,
                wrote,
                read,
            } => write!(
                f,
                "counters do not hold what is written: PERF_LEGACY_CTR{counter} read {read:#x} after {wrote:#x} was written"
            ),
            CounterProbe::AllEnabled => f.write_str(
                "every legacy counter is enabled (by the firmware): none free to probe or use",
            ),
            CounterProbe::NoMsr => f.write_str("no RDMSR/WRMSR (CPUID.01H:EDX.MSR = 0)"),
        }
    }
}

/// What detection found out about an AMD core PMU (AMD64 APM Vol. 2
/// 13.2, "Performance Monitoring Counters"): per logical processor, four
/// legacy counters (`PERF_LEGACY_CTL0-3`/`PERF_LEGACY_CTR0-3`), six with
/// PerfCtrExtCore (`PERF_CTL0-5`/`PERF_CTR0-5`, the first four the legacy
/// ones under other addresses), and with PerfMonV2 the global control and
/// status registers and the counter count CPUID 8000_0022H:EBX\[3:0\]
/// gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AmdCpu {
    /// [`Vendor::Amd`] or [`Vendor::Hygon`].
    pub vendor: Vendor,
    /// The display family (CPUID.01H:EAX; 17h Zen 1 and 2, 19h Zen 3 and
    /// 4, 1Ah Zen 5; Hygon 18h).
    pub family: u16,
    /// The display model.
    pub model: u8,
    /// CPUID.01H:EDX.MSR: RDMSR and WRMSR exist.
    pub msr_instructions: bool,
    /// CPUID 8000_0001H:ECX\[23\], PerfCtrExtCore: six counters at
    /// `C001_0200H` onwards.
    pub perf_ctr_ext_core: bool,
    /// CPUID 8000_0022H:EAX\[0\], PerfMonV2: `PerfCntrGlobalCtl`,
    /// `PerfCntrGlobalStatus` and its clear and set registers.
    pub perfmon_v2: bool,
    /// CPUID 8000_0022H:EBX\[3:0\], the core counters with PerfMonV2 (0
    /// without).
    pub v2_counters: u8,
    /// What the read-back probe of a legacy counter found.
    pub probe: CounterProbe,
}

impl AmdCpu {
    /// The core counters: CPUID 8000_0022H's count with PerfMonV2, six
    /// with PerfCtrExtCore, four otherwise (the legacy counters, which
    /// nothing enumerates: Linux and KVM assume four).
    pub const fn counters(&self) -> u8 {
        if self.perfmon_v2 {
            self.v2_counters
        } else if self.perf_ctr_ext_core {
            6
        } else {
            4
        }
    }

    /// Whether the driver may program the PMU: RDMSR and WRMSR exist and
    /// the probed counter held what was written.
    pub const fn usable(&self) -> bool {
        self.msr_instructions && matches!(self.probe, CounterProbe::ReadBack { .. })
    }
}

/// Why no supported PMU was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum NoPmu {
    /// The vendor is neither Intel nor AMD (nor Hygon).
    Vendor(Vendor),
    /// CPUID has no leaf 1, so there is no signature to check.
    NoSignature,
    /// An Intel processor of another family than NetBurst's whose CPUID
    /// leaf 0AH reports no architectural PMU (version 0, or no such leaf):
    /// what a guest sees when its hypervisor exposes no PMU.
    Family(u16),
    /// An AMD (or Hygon) processor of a family before 06h (K5, K6), which
    /// has no AMD64 performance counters (Linux's `amd_pmu_init` refuses
    /// them).
    AmdFamily(u16),
}

/// The PMU detection found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PmuKind {
    /// A NetBurst processor; check [`NetBurstCpu::usable`] before programming it.
    NetBurst(NetBurstCpu),
    /// An architectural PMU (Intel, CPUID leaf 0AH).
    ArchPerf(ArchPerfCpu),
    /// An AMD core PMU; check [`AmdCpu::usable`] before programming it.
    Amd(AmdCpu),
    /// No PMU this crate drives.
    None(NoPmu),
}

/// The result of [`detect`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Detection {
    /// The vendor string of CPUID leaf 0.
    pub vendor: Vendor,
    /// The signature of CPUID leaf 1, when the CPU has that leaf.
    pub signature: Option<CpuSignature>,
    /// What PMU that makes it.
    pub pmu: PmuKind,
    /// CPUID.01H:ECX\[21\]: the local APIC has x2APIC mode
    /// ([`crate::apic::X2Apic`]; [`x2apic_supported`] reads the same bit).
    pub x2apic: bool,
}

impl Detection {
    /// The NetBurst PMU, if one was found and may be programmed.
    pub fn usable_netburst(&self) -> Option<NetBurstCpu> {
        match self.pmu {
            PmuKind::NetBurst(nb) if nb.usable() => Some(nb),
            _ => None,
        }
    }

    /// The architectural PMU, if one was found.
    pub fn arch_perf(&self) -> Option<ArchPerfCpu> {
        match self.pmu {
            PmuKind::ArchPerf(a) => Some(a),
            _ => None,
        }
    }

    /// The AMD core PMU, if one was found (usable or not).
    pub fn amd(&self) -> Option<AmdCpu> {
        match self.pmu {
            PmuKind::Amd(a) => Some(a),
            _ => None,
        }
    }

    /// The AMD core PMU, if one was found and may be programmed (its
    /// probed counter held what was written).
    pub fn usable_amd(&self) -> Option<AmdCpu> {
        self.amd().filter(AmdCpu::usable)
    }
}

impl fmt::Display for Detection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.vendor)?;
        if let Some(sig) = self.signature {
            write!(f, " {sig}")?;
        }
        let pmu = match self.pmu {
            PmuKind::None(NoPmu::Vendor(_)) => {
                f.write_str(": no PMU this crate drives (neither an Intel nor an AMD CPU)")
            }
            PmuKind::None(NoPmu::AmdFamily(family)) => write!(
                f,
                ": no PMU this crate drives (family {family:#x}: AMD's performance counters start with family 6)"
            ),
            PmuKind::Amd(a) => {
                write!(f, ": AMD core PMU, {} counters", a.counters())?;
                if a.perfmon_v2 {
                    f.write_str(" (PerfMonV2)")?;
                } else if a.perf_ctr_ext_core {
                    f.write_str(" (PerfCtrExtCore)")?;
                } else {
                    f.write_str(" (legacy)")?;
                }
                write!(f, "; {}", a.probe)
            }
            PmuKind::None(NoPmu::NoSignature) => {
                f.write_str(": no NetBurst PMU (CPUID has no leaf 1)")
            }
            PmuKind::None(NoPmu::Family(family)) => write!(
                f,
                ": no PMU this crate drives (family {family:#x}: not NetBurst's 0xf, and CPUID leaf 0AH reports no architectural PMU)"
            ),
            PmuKind::ArchPerf(a) => write!(
                f,
                ": architectural PMU version {}, {} general counters ({} bits), fixed counters {}{}{}{}",
                a.version(),
                a.general(),
                a.leaf.general_width(),
                a.fixed_bitmap().count_ones(),
                if a.full_width_write {
                    ", full-width writes"
                } else {
                    ""
                },
                match a.core_type {
                    Some(CoreType::Atom) => ", hybrid: an Atom core",
                    Some(CoreType::Core) => ", hybrid: a Core core",
                    Some(CoreType::Other(_)) => ", hybrid",
                    None => "",
                },
                match (a.counters_from(), a.events_from()) {
                    (Enumeration::Leaf23, Enumeration::Leaf23) => {
                        " (its own counters and events: CPUID leaf 23H)"
                    }
                    (Enumeration::Leaf23, Enumeration::Leaf0A) => {
                        " (its own counters: CPUID leaf 23H)"
                    }
                    (Enumeration::Leaf0A, Enumeration::Leaf23) => {
                        " (its own events: CPUID leaf 23H)"
                    }
                    (Enumeration::Leaf0A, Enumeration::Leaf0A) => "",
                }
            )
            .and_then(|()| match a.lbr {
                LbrCaps { arch: Some(_), .. } => f.write_str(", architectural LBR"),
                LbrCaps { format, .. } if format > 0 => write!(f, ", LBR record format {format}"),
                _ => Ok(()),
            })
            .and_then(|()| match a.pebs {
                p if p.usable() => write!(
                    f,
                    ", PEBS record format {}{}",
                    p.format,
                    if p.baseline { " (baseline: adaptive)" } else { "" }
                ),
                ArchPebs { ds: false, .. } => Ok(()),
                p if !p.available => f.write_str(", PEBS unavailable (IA32_MISC_ENABLE[12])"),
                p => write!(f, ", PEBS record format {} (not driven)", p.format),
            }),
            PmuKind::NetBurst(nb) => {
                write!(f, ": NetBurst signature (model {})", nb.model)?;
                if !nb.msr_instructions {
                    f.write_str(", but no RDMSR/WRMSR (CPUID.01H:EDX.MSR = 0)")
                } else if !nb.perf_mon_available {
                    f.write_str(
                        ", but IA32_MISC_ENABLE[7] = 0: the performance-monitoring MSRs \
                         are not really there",
                    )
                } else {
                    write!(
                        f,
                        ", performance monitoring available, PEBS {}, {} logical processor(s)",
                        if nb.pebs_available {
                            "available"
                        } else {
                            "unavailable"
                        },
                        nb.logical_processors
                    )
                }
            }
        };
        pmu?;
        if self.x2apic {
            f.write_str("; x2APIC")?;
        }
        Ok(())
    }
}

/// Whether the processor has x2APIC mode (CPUID.01H:ECX bit 21, SDM Vol.
/// 3A 11.12.1), which [`crate::apic::X2Apic`] drives.
pub fn x2apic_supported(cpuid: &impl Cpuid) -> bool {
    cpuid.cpuid(0, 0).eax >= 1 && Leaf01Ecx::from_bits(cpuid.cpuid(1, 0).ecx).x2apic()
}

/// Identifies the PMU of the CPU behind `cpuid` and `msr`.
///
/// Reads IA32_MISC_ENABLE through `msr` only for a NetBurst signature whose
/// CPUID reports the MSR instructions; an error from that read is returned.
pub fn detect<M: MsrBackend>(cpuid: &impl Cpuid, msr: &mut M) -> Result<Detection, M::Error> {
    let leaf0 = cpuid.cpuid(0, 0);
    let vendor = Vendor::from_leaf0(leaf0);
    let signature = (leaf0.eax >= 1).then(|| cpuid.cpuid(1, 0));
    let mut detection = Detection {
        vendor,
        signature: signature.map(|leaf1| CpuSignature::from_eax(leaf1.eax)),
        pmu: PmuKind::None(NoPmu::Vendor(vendor)),
        x2apic: signature.is_some_and(|leaf1| Leaf01Ecx::from_bits(leaf1.ecx).x2apic()),
    };
    if !matches!(vendor, Vendor::Intel | Vendor::Amd | Vendor::Hygon) {
        return Ok(detection);
    }
    let (Some(leaf1), Some(sig)) = (signature, detection.signature) else {
        detection.pmu = PmuKind::None(NoPmu::NoSignature);
        return Ok(detection);
    };
    if vendor != Vendor::Intel {
        detection.pmu = amd(cpuid, vendor, leaf1, sig, msr)?;
        return Ok(detection);
    }
    if sig.family != 0xF {
        detection.pmu = match arch_perf(cpuid, leaf0.eax, leaf1, sig, msr)? {
            Some(a) => PmuKind::ArchPerf(a),
            None => PmuKind::None(NoPmu::Family(sig.family)),
        };
        return Ok(detection);
    }
    let edx = Leaf01Edx::from_bits(leaf1.edx);
    let msr_instructions = edx.msr();
    let hyper_threading = edx.htt();
    let misc_enable = MiscEnable::from_bits(if msr_instructions {
        msr.read_msr(IA32_MISC_ENABLE)?
    } else {
        0
    });
    detection.pmu = PmuKind::NetBurst(NetBurstCpu {
        model: sig.model,
        msr_instructions,
        perf_mon_available: misc_enable.perf_mon_available(),
        pebs_available: msr_instructions && !misc_enable.pebs_unavailable(),
        hyper_threading,
        logical_processors: if hyper_threading {
            Leaf01Ebx::from_bits(leaf1.ebx).logical_processors()
        } else {
            1
        },
    });
    Ok(detection)
}

/// The architectural PMU of an Intel CPU of another family than NetBurst's
/// (`max_leaf` is CPUID.0:EAX): CPUID leaf 0AH, `IA32_PERF_CAPABILITIES`
/// when PDCM says it exists, and the hybrid leaves 07H and 1AH.
fn arch_perf<M: MsrBackend>(
    cpuid: &impl Cpuid,
    max_leaf: u32,
    leaf1: CpuidResult,
    sig: CpuSignature,
    msr: &mut M,
) -> Result<Option<ArchPerfCpu>, M::Error> {
    if max_leaf < 0xA {
        return Ok(None);
    }
    let a = cpuid.cpuid(0xA, 0);
    let leaf = Leaf0A {
        regs: [a.eax, a.ebx, a.ecx, a.edx],
    };
    if leaf.version() == 0 {
        return Ok(None);
    }
    let edx = Leaf01Edx::from_bits(leaf1.edx);
    let msr_instructions = edx.msr();
    let caps = if msr_instructions && Leaf01Ecx::from_bits(leaf1.ecx).pdcm() {
        PerfCapabilities::from_bits(msr.read_msr(IA32_PERF_CAPABILITIES)?)
    } else {
        PerfCapabilities::from_bits(0)
    };
    let full_width_write = caps.full_width_write();
    // IA32_MISC_ENABLE[12] says whether PEBS is available; the MSR is read
    // only where the DS mechanism exists at all.
    let available = edx.ds()
        && msr_instructions
        && !MiscEnable::from_bits(msr.read_msr(IA32_MISC_ENABLE)?).pebs_unavailable();
    let pebs = ArchPebs {
        ds: edx.ds(),
        available,
        format: caps.pebs_format(),
        baseline: caps.pebs_baseline(),
        trap: caps.pebs_trap(),
    };
    let leaf7 = if max_leaf >= 7 {
        cpuid.cpuid(7, 0)
    } else {
        CpuidResult {
            eax: 0,
            ebx: 0,
            ecx: 0,
            edx: 0,
        }
    };
    let (ebx7, leaf7) = (
        Leaf07Ebx::from_bits(leaf7.ebx),
        Leaf07Edx::from_bits(leaf7.edx),
    );
    let hybrid = leaf7.hybrid();
    let lbr = LbrCaps {
        format: caps.lbr_format(),
        tsx: ebx7.hle() || ebx7.rtm(),
        arch: (leaf7.arch_lbr() && max_leaf >= 0x1C).then(|| {
            let r = cpuid.cpuid(0x1C, 0);
            [r.eax, r.ebx, r.ecx]
        }),
    };
    let ext = (max_leaf >= 0x23
        && Leaf07Sub1Eax::from_bits(cpuid.cpuid(7, 1).eax).arch_perfmon_ext())
    .then(|| leaf_23h(cpuid));
    let core_type = (hybrid && max_leaf >= 0x1A).then(|| {
        match Leaf1AEax::from_bits(cpuid.cpuid(0x1A, 0).eax).core_type() {
            0x20 => CoreType::Atom,
            0x40 => CoreType::Core,
            other => CoreType::Other(other),
        }
    });
    Ok(Some(ArchPerfCpu {
        leaf,
        ext,
        full_width_write,
        hybrid,
        core_type,
        family: sig.family,
        model: sig.model,
        pebs,
        lbr,
    }))
}

/// CPUID leaf 23H's sub-leaves 0, 1 and 3 (1 and 3 only where sub-leaf 0
/// says they are valid).
fn leaf_23h(cpuid: &impl Cpuid) -> Leaf23 {
    let subleaves = Leaf23Subleaves::from_bits(cpuid.cpuid(0x23, 0).eax);
    let counters = if subleaves.counters() {
        let r = cpuid.cpuid(0x23, 1);
        [r.eax, r.ebx]
    } else {
        [0; 2]
    };
    let events = if subleaves.events() {
        cpuid.cpuid(0x23, 3).eax
    } else {
        0
    };
    Leaf23 {
        subleaves,
        counters,
        events,
    }
}

/// The AMD core PMU of an AMD or Hygon processor: CPUID 8000_0001H and
/// 8000_0022H where the maximum extended leaf reaches them, then the
/// read-back probe of a legacy counter ([`CounterProbe`]).
fn amd<M: MsrBackend>(
    cpuid: &impl Cpuid,
    vendor: Vendor,
    leaf1: CpuidResult,
    sig: CpuSignature,
    msr: &mut M,
) -> Result<PmuKind, M::Error> {
    if sig.family < 6 {
        return Ok(PmuKind::None(NoPmu::AmdFamily(sig.family)));
    }
    let max_extended = cpuid.cpuid(0x8000_0000, 0).eax;
    let perf_ctr_ext_core = max_extended >= 0x8000_0001
        && Leaf80000001Ecx::from_bits(cpuid.cpuid(0x8000_0001, 0).ecx).perf_ctr_ext_core();
    let (perfmon_v2, v2_counters) = if max_extended >= 0x8000_0022 {
        let leaf = cpuid.cpuid(0x8000_0022, 0);
        let v2 = Leaf80000022Eax::from_bits(leaf.eax).perfmon_v2();
        let n = Leaf80000022Ebx::from_bits(leaf.ebx).num_perf_ctr_core();
        (v2, if v2 { n } else { 0 })
    } else {
        (false, 0)
    };
    let msr_instructions = Leaf01Edx::from_bits(leaf1.edx).msr();
    let probe = if msr_instructions {
        probe_counter(msr)?
    } else {
        CounterProbe::NoMsr
    };
    Ok(PmuKind::Amd(AmdCpu {
        vendor,
        family: sig.family,
        model: sig.model,
        msr_instructions,
        perf_ctr_ext_core,
        perfmon_v2,
        v2_counters,
        probe,
    }))
}

/// The read-back probe ([`CounterProbe`]) of the first legacy counter that
/// is not enabled.
fn probe_counter<M: MsrBackend>(msr: &mut M) -> Result<CounterProbe, M::Error> {
    /// The bits the probe flips (Linux's `check_hw_exists` flips the same).
    const FLIP: u64 = 0xFFFF;
    for n in 0..4u8 {
        let ctl = PerfLegacyCtl::from_bits(msr.read_msr(PERF_LEGACY_CTL0 + u32::from(n))?);
        if ctl.enabled() {
            continue;
        }
        let ctr = PERF_LEGACY_CTR0 + u32::from(n);
        let before = msr.read_msr(ctr)?;
        let wrote = before ^ FLIP;
        msr.write_msr(ctr, wrote)?;
        let read = msr.read_msr(ctr)?;
        msr.write_msr(ctr, before)?;
        return Ok(if read == wrote {
            CounterProbe::ReadBack { counter: n }
        } else {
            CounterProbe::Lost {
                counter: n,
                wrote,
                read,
            }
        });
    }
    Ok(CounterProbe::AllEnabled)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a made-up CPU does with AMD's legacy counter MSRs.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum AmdMsrs {
        /// They fault (an Intel CPU).
        Fault,
        /// They read 0 and drop writes (QEMU's TCG).
        ReadZero,
        /// They hold what is written: controls 0-3, counters 0-3.
        Real([u64; 8]),
    }

    /// CPUID, IA32_MISC_ENABLE and AMD's legacy counter MSRs of a made-up
    /// CPU; any other MSR faults.
    #[derive(Clone, Copy)]
    struct FakeCpu {
        leaf0: CpuidResult,
        leaf1: CpuidResult,
        /// CPUID 8000_0000H, 8000_0001H and 8000_0022H.
        extended: [CpuidResult; 3],
        misc_enable: u64,
        amd: AmdMsrs,
        msr_reads: u32,
        msr_writes: u32,
    }

    impl FakeCpu {
        fn new(vendor: &[u8; 12], max_leaf: u32, eax1: u32, edx1: u32, misc: u64) -> Self {
            let word = |i: usize| u32::from_le_bytes(vendor[i..i + 4].try_into().unwrap());
            Self {
                leaf0: CpuidResult {
                    eax: max_leaf,
                    ebx: word(0),
                    edx: word(4),
                    ecx: word(8),
                },
                leaf1: CpuidResult {
                    eax: eax1,
                    ebx: 2 << 16,
                    ecx: 0,
                    edx: edx1,
                },
                extended: [CpuidResult::default(); 3],
                misc_enable: misc,
                amd: AmdMsrs::Fault,
                msr_reads: 0,
                msr_writes: 0,
            }
        }

        /// An AMD part: maximum extended leaf `max_ext`, 8000_0001H:ECX
        /// `ecx`, 8000_0022H EAX/EBX, the counter MSRs `amd`.
        fn amd(eax1: u32, max_ext: u32, ecx: u32, v2: (u32, u32), amd: AmdMsrs) -> Self {
            let mut cpu = FakeCpu::new(b"AuthenticAMD", 0xD, eax1, MSR, 0);
            cpu.extended[0].eax = max_ext;
            cpu.extended[1].ecx = ecx;
            (cpu.extended[2].eax, cpu.extended[2].ebx) = v2;
            cpu.amd = amd;
            cpu
        }

        /// The slot of an AMD legacy counter MSR.
        fn amd_slot(msr: u32) -> Option<usize> {
            let i = msr.wrapping_sub(PERF_LEGACY_CTL0) as usize;
            (i < 8).then_some(i)
        }
    }

    impl Cpuid for FakeCpu {
        fn cpuid(&self, leaf: u32, _: u32) -> CpuidResult {
            let max_ext = self.extended[0].eax;
            match leaf {
                0 => self.leaf0,
                1 if self.leaf0.eax >= 1 => self.leaf1,
                // No architectural PMU (version 0), not hybrid.
                7 | 0xA if self.leaf0.eax >= leaf => CpuidResult::default(),
                0x8000_0000 => self.extended[0],
                0x8000_0001 if max_ext >= leaf => self.extended[1],
                0x8000_0022 if max_ext >= leaf => self.extended[2],
                _ => panic!("CPUID leaf {leaf:#x} beyond the maximum"),
            }
        }
    }

    impl crate::access::MsrAccess for FakeCpu {
        type Error = u32;
        fn read_msr(&mut self, msr: u32) -> Result<u64, u32> {
            self.msr_reads += 1;
            match (FakeCpu::amd_slot(msr), self.amd) {
                _ if msr == IA32_MISC_ENABLE => Ok(self.misc_enable),
                (Some(_), AmdMsrs::ReadZero) => Ok(0),
                (Some(i), AmdMsrs::Real(regs)) => Ok(regs[i]),
                _ => Err(msr),
            }
        }
        fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), u32> {
            self.msr_writes += 1;
            match (FakeCpu::amd_slot(msr), &mut self.amd) {
                (Some(_), AmdMsrs::ReadZero) => Ok(()),
                (Some(i), AmdMsrs::Real(regs)) => {
                    regs[i] = value;
                    Ok(())
                }
                _ => Err(msr),
            }
        }
        fn rdpmc(&mut self, _: u32) -> Result<u64, u32> {
            panic!("detection must never execute RDPMC")
        }
    }

    const MSR: u32 = 1 << 5;
    const HTT: u32 = 1 << 28;

    fn run(cpu: &mut FakeCpu) -> Detection {
        detect(&cpu.clone(), cpu).unwrap()
    }

    /// QEMU's default CPU model under TCG: AuthenticAMD, family 0Fh model
    /// 6Bh stepping 1, no PerfCtrExtCore, maximum extended leaf 8000_000AH;
    /// the legacy counters read 0 and drop writes. Detection finds an AMD
    /// core PMU of four legacy counters, probes counter 0 (its control is
    /// not enabled) and reports "counters read 0": not usable.
    #[test]
    fn qemu64_default_cpu_is_amd_whose_counters_read_0() {
        let mut cpu = FakeCpu::amd(0x0006_0FB1, 0x8000_000A, 0, (0, 0), AmdMsrs::ReadZero);
        let d = run(&mut cpu);
        assert_eq!(d.vendor, Vendor::Amd);
        let a = d.amd().expect("an AMD core PMU");
        assert_eq!((a.family, a.model, a.counters()), (0xF, 0x6B, 4));
        assert!(!a.perf_ctr_ext_core && !a.perfmon_v2);
        assert_eq!(
            a.probe,
            CounterProbe::Lost {
                counter: 0,
                wrote: 0xFFFF,
                read: 0
            }
        );
        assert!(!a.usable());
        assert_eq!((d.usable_amd(), d.usable_netburst()), (None, None));
        assert_eq!(
            (cpu.msr_reads, cpu.msr_writes),
            (3, 2),
            "PERF_LEGACY_CTL0; PERF_LEGACY_CTR0 read, written, read, restored"
        );
        let text = d.to_string();
        assert!(
            text.contains(": AMD core PMU, 4 counters (legacy); counters read 0"),
            "{text}"
        );
    }

    /// A part whose counters hold what is written: a Zen 2 (family 17h
    /// model 31h, PerfCtrExtCore) and a Zen 4 (family 19h model 11h,
    /// PerfMonV2 with six counters); the probe skips a counter the
    /// firmware enabled and puts the probed value back.
    #[test]
    fn zen_parts_and_the_probe() {
        let firmware_ctl = 0x76 | 1 << 17 | 1 << 22; // cycles, OS, EN
        let mut regs = [0u64; 8];
        regs[0] = firmware_ctl;
        regs[5] = 0x1234; // PERF_LEGACY_CTR1
        let zen2 = 0x0083_0F10; // family 17h, model 31h
        let mut cpu = FakeCpu::amd(zen2, 0x8000_001F, 1 << 23, (0, 0), AmdMsrs::Real(regs));
        let d = run(&mut cpu);
        let a = d.usable_amd().expect("a usable AMD core PMU");
        assert_eq!((a.family, a.model, a.counters()), (0x17, 0x31, 6));
        assert!(a.perf_ctr_ext_core && !a.perfmon_v2);
        assert_eq!(a.probe, CounterProbe::ReadBack { counter: 1 });
        assert_eq!(cpu.amd, AmdMsrs::Real(regs), "the probed value put back");
        assert!(d.to_string().contains("6 counters (PerfCtrExtCore)"), "{d}");

        let zen4 = 0x00A1_0F11; // family 19h, model 11h
        let mut cpu = FakeCpu::amd(zen4, 0x8000_0022, 1 << 23, (1, 6), AmdMsrs::Real([0; 8]));
        let d = run(&mut cpu);
        let a = d.usable_amd().expect("a usable AMD core PMU");
        assert_eq!(
            (a.family, a.model, a.counters(), a.v2_counters),
            (0x19, 0x11, 6, 6)
        );
        assert!(a.perfmon_v2);
        assert!(d.to_string().contains("6 counters (PerfMonV2)"), "{d}");

        // Every control enabled: nothing to probe, nothing usable.
        let mut cpu = FakeCpu::amd(
            zen2,
            0x8000_001F,
            1 << 23,
            (0, 0),
            AmdMsrs::Real([firmware_ctl; 8]),
        );
        let d = run(&mut cpu);
        assert_eq!(d.amd().map(|a| a.probe), Some(CounterProbe::AllEnabled));
        assert_eq!(d.usable_amd(), None);
        assert_eq!(cpu.msr_writes, 0);
    }

    /// Hygon's vendor string is AMD's PMU; an AMD part before family 6
    /// has none, and nothing is read.
    #[test]
    fn hygon_and_old_amd_families() {
        let mut cpu = FakeCpu::amd(
            0x0090_0F00,
            0x8000_001F,
            1 << 23,
            (0, 0),
            AmdMsrs::Real([0; 8]),
        );
        let [b, d, c] =
            [0, 4, 8].map(|i| u32::from_le_bytes(b"HygonGenuine"[i..i + 4].try_into().unwrap()));
        (cpu.leaf0.ebx, cpu.leaf0.edx, cpu.leaf0.ecx) = (b, d, c);
        let found = run(&mut cpu);
        assert_eq!(found.vendor, Vendor::Hygon);
        assert_eq!(
            found.usable_amd().map(|a| (a.vendor, a.family)),
            Some((Vendor::Hygon, 0x18))
        );
        let mut k6 = FakeCpu::amd(0x0000_0580, 0x8000_0005, 0, (0, 0), AmdMsrs::ReadZero);
        let found = run(&mut k6);
        assert_eq!(found.pmu, PmuKind::None(NoPmu::AmdFamily(5)));
        assert_eq!(k6.msr_reads, 0);
        assert!(found.to_string().contains("start with family 6"), "{found}");
    }

    #[test]
    fn detection_reports_x2apic() {
        let mut cpu = FakeCpu::new(b"GenuineIntel", 5, 0xF43, MSR | HTT, 1 << 7);
        let without = run(&mut cpu);
        assert!(!without.x2apic);
        assert!(!without.to_string().contains("x2APIC"));
        cpu.leaf1.ecx |= 1 << 21;
        let with = run(&mut cpu);
        assert!(with.x2apic && x2apic_supported(&cpu));
        assert!(with.to_string().ends_with("; x2APIC"), "{with}");
        // No leaf 1, no x2APIC bit to read.
        let mut old = FakeCpu::new(b"GenuineIntel", 0, 0, 0, 0);
        assert!(!run(&mut old).x2apic);
    }

    #[test]
    fn pentium4_with_perf_mon_and_ht() {
        // Family 0Fh model 4 stepping 3: signature 0F43h.
        let mut cpu = FakeCpu::new(b"GenuineIntel", 5, 0xF43, MSR | HTT, 1 << 7);
        let d = run(&mut cpu);
        let nb = d.usable_netburst().expect("usable NetBurst PMU");
        assert_eq!(nb.model, 4);
        assert!(nb.pebs_available);
        assert!(nb.hyper_threading);
        assert_eq!(nb.logical_processors, 2);
        assert_eq!(d.signature.unwrap().stepping, 3);
        assert_eq!(cpu.msr_reads, 1);
    }

    #[test]
    fn misc_enable_bits_7_and_12() {
        let mut cpu = FakeCpu::new(b"GenuineIntel", 2, 0xF29, MSR, (1 << 7) | (1 << 12));
        let PmuKind::NetBurst(nb) = run(&mut cpu).pmu else {
            panic!("not NetBurst")
        };
        assert!(nb.usable());
        assert!(!nb.pebs_available);
        assert_eq!(nb.logical_processors, 1);

        let mut cpu = FakeCpu::new(b"GenuineIntel", 2, 0xF43, MSR, 1);
        let d = run(&mut cpu);
        let PmuKind::NetBurst(nb) = d.pmu else {
            panic!("not NetBurst")
        };
        assert!(!nb.perf_mon_available);
        assert_eq!(d.usable_netburst(), None);
        let text = std::format!("{d}");
        assert!(text.contains("not really there"), "{text}");
    }

    #[test]
    fn no_rdmsr_without_cpuid_msr_bit() {
        let mut cpu = FakeCpu::new(b"GenuineIntel", 1, 0xF12, 0, u64::MAX);
        let PmuKind::NetBurst(nb) = run(&mut cpu).pmu else {
            panic!("not NetBurst")
        };
        assert_eq!(cpu.msr_reads, 0);
        assert!(!nb.usable());
        assert!(!nb.pebs_available);
    }

    #[test]
    fn other_families_and_missing_leaf() {
        // Family 6 whose leaf 0AH reports version 0: a guest without a PMU.
        let mut cpu = FakeCpu::new(b"GenuineIntel", 0xA, 0x6F6, MSR, 1 << 7);
        assert_eq!(run(&mut cpu).pmu, PmuKind::None(NoPmu::Family(6)));
        assert_eq!(cpu.msr_reads, 0);
        // Extended family 1 makes family 10h (the IA-32 face of Itanium 2).
        let mut cpu = FakeCpu::new(b"GenuineIntel", 1, 0x0010_0F00, MSR, 1 << 7);
        assert_eq!(run(&mut cpu).pmu, PmuKind::None(NoPmu::Family(0x10)));
        let mut cpu = FakeCpu::new(b"GenuineIntel", 0, 0xF43, MSR, 1 << 7);
        let d = run(&mut cpu);
        assert_eq!(d.pmu, PmuKind::None(NoPmu::NoSignature));
        assert_eq!(d.signature, None);
        assert_eq!(cpu.msr_reads, 0);
    }

    #[test]
    fn signature_decoding() {
        let s = CpuSignature::from_eax(0x0003_06C3); // Haswell
        assert_eq!((s.family, s.model, s.stepping), (6, 0x3C, 3));
        let s = CpuSignature::from_eax(0x0000_0F65); // Pentium D 9xx
        assert_eq!((s.family, s.model, s.stepping), (0xF, 6, 5));
        let s = CpuSignature::from_eax(0x0000_0543); // Pentium: no extended model
        assert_eq!((s.family, s.model), (5, 4));
        assert_eq!(Vendor::Other(*b"HygonGenuine").id(), b"HygonGenuine");
    }

    /// An architectural PMU's PEBS, as the models report it: the record
    /// format and PEBS baseline from IA32_PERF_CAPABILITIES, availability
    /// from IA32_MISC_ENABLE[12], which is read only where CPUID.01H:EDX.DS
    /// says the debug store exists.
    #[test]
    fn arch_perf_pebs_from_capabilities_and_misc_enable() {
        use crate::model::archperf::{ArchPerfModel, Config, PebsConfig};
        let cases = [
            (Config::nehalem(), 1, false, true),
            (Config::haswell(), 2, false, true),
            (Config::skylake(), 3, false, true),
            (Config::icelake(), 4, true, true),
            (Config::core2(), 0, false, false),
        ];
        for (config, format, baseline, usable) in cases {
            let m = ArchPerfModel::new(config);
            let mut rec = crate::access::Recording::<_, 8>::new(m.clone());
            let a = detect(&m, &mut rec).unwrap().arch_perf().unwrap();
            assert_eq!(
                (a.pebs.format, a.pebs.baseline, a.pebs.usable()),
                (format, baseline, usable),
                "{config:?}"
            );
            assert_eq!(a.pebs.trap, format > 0);
            let misc_reads = rec
                .log()
                .iter()
                .filter(|x| {
                    matches!(
                        x,
                        crate::access::Access::ReadMsr {
                            msr: IA32_MISC_ENABLE,
                            ..
                        }
                    )
                })
                .count();
            assert_eq!(misc_reads, usize::from(format > 0), "{config:?}");
        }
        let off = Config {
            pebs: PebsConfig {
                available: false,
                ..PebsConfig::format(3)
            },
            ..Config::skylake()
        };
        let m = ArchPerfModel::new(off);
        let d = detect(&m, &mut m.clone()).unwrap();
        let a = d.arch_perf().unwrap();
        assert!(a.pebs.ds && !a.pebs.available && !a.pebs.usable());
        let text = std::format!("{d}");
        assert!(
            text.ends_with(", PEBS unavailable (IA32_MISC_ENABLE[12])"),
            "{text}"
        );
        let ice = ArchPerfModel::new(Config::icelake());
        let text = std::format!("{}", detect(&ice, &mut ice.clone()).unwrap());
        assert!(
            text.ends_with(", PEBS record format 4 (baseline: adaptive)"),
            "{text}"
        );
    }
}

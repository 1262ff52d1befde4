//! The register file: configuration, the MSR map, what writes do, RDPMC,
//! and the [`MsrAccess`] and [`Cpuid`] implementations.

use super::tables::{
    CORE_CTL0, CORE_CTR0, GLOBAL_CTL, GLOBAL_STATUS, GLOBAL_STATUS_CLR, GLOBAL_STATUS_SET, LEGACY,
    LEGACY_CTL0, LEGACY_CTR0, MAX, WIDTH, cpuid, ctl,
};
use crate::access::MsrAccess;
use crate::arch::ia32::Privilege;
use crate::detect::{Cpuid, CpuidResult};

/// The highest standard CPUID leaf the model reports (Fn0000_0000_EAX).
pub const MAX_STANDARD_LEAF: u32 = 0x10;

/// What the modelled processor is: its identification and the PMU CPUID
/// enumerates (APM Vol. 3 Appendix E, Fn8000_0001_ECX\[23\] and
/// Fn8000_0022).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Config {
    /// `HygonGenuine` instead of `AuthenticAMD`.
    pub hygon: bool,
    /// The display family (0Fh K8, 17h Zen 1-2, 19h Zen 3-4).
    pub family: u16,
    /// The display model.
    pub model: u8,
    /// Fn8000_0001_ECX\[23\], PerfCtrExtCore: six counters at C001_0200H.
    pub perf_ctr_ext_core: bool,
    /// Fn8000_0022_EAX\[0\], PerfMonV2.
    pub perfmon_v2: bool,
    /// Fn8000_0022_EBX\[3:0\]: the core counters with PerfMonV2 (the model
    /// has at most six).
    pub v2_counters: u8,
    /// Fn8000_0000_EAX: the highest extended leaf.
    pub max_extended_leaf: u32,
}

impl Config {
    /// An Athlon 64 (K8, family 0Fh model 41h): the four legacy counters
    /// only, as QEMU's `qemu64` presents the family.
    pub const fn k8() -> Config {
        Config {
            hygon: false,
            family: 0x0F,
            model: 0x41,
            perf_ctr_ext_core: false,
            perfmon_v2: false,
            v2_counters: 0,
            max_extended_leaf: 0x8000_0018,
        }
    }

    /// A Zen 2 EPYC (Rome, family 17h model 31h): PerfCtrExtCore, six
    /// counters, no PerfMonV2.
    pub const fn zen2() -> Config {
        Config {
            hygon: false,
            family: 0x17,
            model: 0x31,
            perf_ctr_ext_core: true,
            perfmon_v2: false,
            v2_counters: 0,
            max_extended_leaf: 0x8000_001F,
        }
    }

    /// A Zen 4 EPYC (Genoa, family 19h model 11h): PerfCtrExtCore and
    /// PerfMonV2 with six counters.
    pub const fn zen4() -> Config {
        Config {
            hygon: false,
            family: 0x19,
            model: 0x11,
            perf_ctr_ext_core: true,
            perfmon_v2: true,
            v2_counters: 6,
            max_extended_leaf: 0x8000_0026,
        }
    }

    /// The core counters the model has: PerfMonV2's count (at most
    /// six), six with PerfCtrExtCore, four otherwise.
    pub const fn counters(&self) -> usize {
        if self.perfmon_v2 {
            let n = self.v2_counters as usize;
            if n > MAX { MAX } else { n }
        } else if self.perf_ctr_ext_core {
            MAX
        } else {
            LEGACY
        }
    }

    /// The counter bits of the PerfMonV2 global registers: one per counter.
    pub const fn counter_bits(&self) -> u64 {
        (1 << self.counters()) - 1
    }

    /// PerfCntrGlobalCtl after RESET: every counter enabled, so that
    /// software that knows only `EN` counts (see the module documentation,
    /// choice 3).
    pub const fn global_ctl_reset(&self) -> u64 {
        if self.perfmon_v2 {
            self.counter_bits()
        } else {
            0
        }
    }

    /// Fn0000_0001_EAX: base family 0FH and the rest in the extended
    /// family from family 10h; the model's high nibble in the extended
    /// model (APM Vol. 3 Appendix E, "Family, Model, Stepping").
    pub const fn signature(&self) -> u32 {
        let (base, ext) = if self.family < 0xF {
            (self.family as u32, 0)
        } else {
            (0xF, (self.family - 0xF) as u32)
        };
        let model = self.model as u32;
        (ext << 20) | ((model >> 4) << 16) | (base << 8) | ((model & 0xF) << 4)
    }

    /// CPUID as the modelled processor answers it: the vendor, the
    /// signature, Fn8000_0000, Fn8000_0001_ECX (PerfCtrExtCore) and
    /// Fn8000_0022 (PerfMonV2, the counter count) within the configured
    /// extended range; zero elsewhere.
    pub const fn cpuid(&self, leaf: u32, _subleaf: u32) -> CpuidResult {
        let zero = CpuidResult {
            eax: 0,
            ebx: 0,
            ecx: 0,
            edx: 0,
        };
        let vendor: &[u8; 12] = if self.hygon {
            b"HygonGenuine"
        } else {
            b"AuthenticAMD"
        };
        if leaf >= 0x8000_0000 && leaf > self.max_extended_leaf {
            return zero;
        }
        match leaf {
            0 => CpuidResult {
                eax: MAX_STANDARD_LEAF,
                ebx: vendor_word(vendor, 0),
                edx: vendor_word(vendor, 4),
                ecx: vendor_word(vendor, 8),
            },
            1 => CpuidResult {
                eax: self.signature(),
                ebx: 8 << 8,
                ecx: 0,
                edx: cpuid::EDX1,
            },
            0x8000_0000 => CpuidResult {
                eax: self.max_extended_leaf,
                ebx: vendor_word(vendor, 0),
                edx: vendor_word(vendor, 4),
                ecx: vendor_word(vendor, 8),
            },
            0x8000_0001 => CpuidResult {
                ecx: if self.perf_ctr_ext_core {
                    cpuid::PERF_CTR_EXT_CORE
                } else {
                    0
                },
                ..zero
            },
            0x8000_0022 if self.perfmon_v2 => CpuidResult {
                eax: cpuid::PERFMON_V2,
                ebx: self.v2_counters as u32 & cpuid::NUM_PERF_CTR_CORE,
                ..zero
            },
            _ => zero,
        }
    }
}

/// Bytes `i..i + 4` of a vendor string, as CPUID returns them in a
/// register.
const fn vendor_word(vendor: &[u8; 12], i: usize) -> u32 {
    u32::from_le_bytes([vendor[i], vendor[i + 1], vendor[i + 2], vendor[i + 3]])
}

/// The instruction that faulted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Instruction {
    /// RDMSR.
    Rdmsr,
    /// WRMSR.
    Wrmsr,
    /// RDPMC.
    Rdpmc,
}

/// Why the model raised #GP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum GpReason {
    /// An MSR this processor does not have (APM Vol. 2: RDMSR and WRMSR of
    /// an unimplemented MSR raise #GP).
    UnknownMsr,
    /// RDPMC of a counter this processor does not have (APM Vol. 3 RDPMC:
    /// #GP "if ECX specifies an unimplemented performance counter").
    NoSuchCounter,
}

impl core::fmt::Display for GpReason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            GpReason::UnknownMsr => "no such MSR on this processor",
            GpReason::NoSuchCounter => "no counter with that index",
        })
    }
}

/// A fault the model raised: #GP(0), with the instruction, its ECX and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Fault {
    /// The faulting instruction.
    pub instruction: Instruction,
    /// Its ECX: the MSR, or RDPMC's counter index.
    pub ecx: u32,
    /// Why.
    pub reason: GpReason,
}

impl core::fmt::Display for Fault {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let verb = match self.instruction {
            Instruction::Rdmsr => "RDMSR of MSR",
            Instruction::Wrmsr => "WRMSR to MSR",
            Instruction::Rdpmc => "RDPMC with ECX",
        };
        write!(f, "#GP(0) on {verb} {:X}H: {}", self.ecx, self.reason)
    }
}

impl core::error::Error for Fault {}

/// A decoded MSR that exists on the configured processor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reg {
    /// A control, by counter (legacy or extended address alike).
    Ctl(usize),
    /// A counter.
    Ctr(usize),
    GlobalStatus,
    GlobalCtl,
    GlobalStatusClr,
    GlobalStatusSet,
}

/// The register-level model of one logical processor's AMD core PMU. See
/// the [module documentation](super).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AmdModel {
    pub(super) config: Config,
    pub(super) ctr: [u64; MAX],
    pub(super) ctl: [u64; MAX],
    pub(super) global_ctl: u64,
    pub(super) global_status: u64,
    /// EFER.SVME: HostOnly and GuestOnly act only while it is set.
    pub(super) svme: bool,
    /// The privilege and mode of the current clock (the last injected
    /// event's).
    pub(super) privilege: Privilege,
    pub(super) guest: bool,
    /// The comparison's result in the previous counted clock, for Edge.
    pub(super) edge_prev: [bool; MAX],
    /// Per counter: a PMI its wrap requested, waiting for this many more
    /// increments (the skid).
    pub(super) armed: [Option<u64>; MAX],
    pub(super) skid: u64,
    /// PMI messages raised and not yet taken.
    pub(super) pmis: u32,
    /// Each overflow's PMI is a message of its own (choice 6).
    pub(super) separate: bool,
    /// The counters whose overflow raised a PMI since the last taken.
    pub(super) pmi_sources: u64,
}

impl AmdModel {
    /// A model in the reset state: controls, counters and status 0,
    /// PerfCntrGlobalCtl [`Config::global_ctl_reset`], no skid, SVM off,
    /// CPL 0 in host mode.
    pub const fn new(config: Config) -> AmdModel {
        AmdModel {
            config,
            ctr: [0; MAX],
            ctl: [0; MAX],
            global_ctl: config.global_ctl_reset(),
            global_status: 0,
            svme: false,
            privilege: Privilege::Os,
            guest: false,
            edge_prev: [false; MAX],
            armed: [None; MAX],
            skid: 0,
            pmis: 0,
            separate: false,
            pmi_sources: 0,
        }
    }

    /// The configuration.
    pub const fn config(&self) -> &Config {
        &self.config
    }

    /// Counter `n`, without RDPMC; 0 if it does not exist.
    pub fn counter(&self, n: usize) -> u64 {
        if n < self.config.counters() {
            self.ctr[n]
        } else {
            0
        }
    }

    /// Control `n`; 0 if it does not exist.
    pub fn control(&self, n: usize) -> u64 {
        if n < self.config.counters() {
            self.ctl[n]
        } else {
            0
        }
    }

    /// PerfCntrGlobalCtl (PerfMonV2; 0 before it).
    pub const fn global_ctl(&self) -> u64 {
        self.global_ctl
    }

    /// PerfCntrGlobalStatus (PerfMonV2; always 0 before it).
    pub const fn global_status(&self) -> u64 {
        self.global_status
    }

    /// Sets EFER.SVME (the model's only SVM state): with it, HostOnly and
    /// GuestOnly select the mode a counter counts in.
    pub fn set_svme(&mut self, on: bool) {
        self.svme = on;
    }

    fn decode(&self, msr: u32) -> Option<Reg> {
        let c = &self.config;
        let index = |base: u32, stride: u32, n: usize| {
            let d = msr.wrapping_sub(base);
            let i = (d / stride) as usize;
            (d.is_multiple_of(stride) && i < n).then_some(i)
        };
        if let Some(i) = index(LEGACY_CTL0, 1, LEGACY) {
            return Some(Reg::Ctl(i));
        }
        if let Some(i) = index(LEGACY_CTR0, 1, LEGACY) {
            return Some(Reg::Ctr(i));
        }
        if c.perf_ctr_ext_core {
            if let Some(i) = index(CORE_CTL0, 2, c.counters()) {
                return Some(Reg::Ctl(i));
            }
            if let Some(i) = index(CORE_CTR0, 2, c.counters()) {
                return Some(Reg::Ctr(i));
            }
        }
        if !c.perfmon_v2 {
            return None;
        }
        match msr {
            GLOBAL_STATUS => Some(Reg::GlobalStatus),
            GLOBAL_CTL => Some(Reg::GlobalCtl),
            GLOBAL_STATUS_CLR => Some(Reg::GlobalStatusClr),
            GLOBAL_STATUS_SET => Some(Reg::GlobalStatusSet),
            _ => None,
        }
    }

    pub(super) fn read(&self, msr: u32) -> Result<u64, Fault> {
        let reg = self.decode(msr).ok_or(Fault {
            instruction: Instruction::Rdmsr,
            ecx: msr,
            reason: GpReason::UnknownMsr,
        })?;
        Ok(match reg {
            Reg::Ctl(i) => self.ctl[i],
            Reg::Ctr(i) => self.ctr[i],
            Reg::GlobalStatus => self.global_status,
            Reg::GlobalCtl => self.global_ctl,
            // Write-1 command registers read as 0 (choice 4).
            Reg::GlobalStatusClr | Reg::GlobalStatusSet => 0,
        })
    }

    pub(super) fn write(&mut self, msr: u32, value: u64) -> Result<(), Fault> {
        let reg = self.decode(msr).ok_or(Fault {
            instruction: Instruction::Wrmsr,
            ecx: msr,
            reason: GpReason::UnknownMsr,
        })?;
        let bits = self.config.counter_bits();
        match reg {
            Reg::Ctl(i) => {
                let was = self.counting(i);
                let value = value & ctl::WRITABLE;
                if self.ctl[i] & ctl::EN == 0 && value & ctl::EN != 0 {
                    self.edge_prev[i] = false;
                }
                self.ctl[i] = value;
                self.stopped(i, was);
            }
            Reg::Ctr(i) => self.ctr[i] = value & ((1 << WIDTH) - 1),
            Reg::GlobalCtl => {
                let was: [bool; MAX] = core::array::from_fn(|i| self.counting(i));
                self.global_ctl = value & bits;
                for (i, was) in was.into_iter().enumerate() {
                    self.stopped(i, was);
                }
            }
            // Read only: the write is ignored (choice 2).
            Reg::GlobalStatus => {}
            Reg::GlobalStatusClr => self.global_status &= !(value & bits),
            // Sets the bits and raises no PMI (choice 4).
            Reg::GlobalStatusSet => self.global_status |= value & bits,
        }
        Ok(())
    }

    /// RDPMC (APM Vol. 3 RDPMC): ECX 0-5 the core counters (0-3 without
    /// PerfCtrExtCore); any other ECX #GP (the northbridge and L3 counters,
    /// 6-15, are not modelled).
    pub(super) fn rdpmc(&self, ecx: u32) -> Result<u64, Fault> {
        let i = ecx as usize;
        if i < self.config.counters() {
            Ok(self.ctr[i])
        } else {
            Err(Fault {
                instruction: Instruction::Rdpmc,
                ecx,
                reason: GpReason::NoSuchCounter,
            })
        }
    }
}

/// RDMSR, WRMSR and RDPMC at CPL 0.
impl MsrAccess for AmdModel {
    type Error = Fault;

    fn read_msr(&mut self, msr: u32) -> Result<u64, Fault> {
        self.read(msr)
    }

    fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Fault> {
        self.write(msr, value)
    }

    fn rdpmc(&mut self, index: u32) -> Result<u64, Fault> {
        AmdModel::rdpmc(self, index)
    }
}

/// CPUID of the configured processor: [`Config::cpuid`].
impl Cpuid for AmdModel {
    fn cpuid(&self, leaf: u32, subleaf: u32) -> CpuidResult {
        self.config.cpuid(leaf, subleaf)
    }
}

//! The register file: configuration, the MSR map, the #GP rules, RDPMC, and
//! the [`MsrAccess`] and [`Cpuid`] implementations (per logical processor).

use crate::access::MsrAccess;
use crate::detect::{Cpuid, CpuidResult};

use super::ds::PebsState;
use super::tables::{
    self, COUNTER_MASK, COUNTERS, ESCR_TABLE, ESCRS, IA32_DS_AREA, IA32_MISC_ENABLE, MSR_CCCR_BASE,
    MSR_COUNTER_BASE, MSR_PEBS_ENABLE, MSR_PEBS_MATRIX_VERT, MSR_TC_PRECISE_EVENT, cccr, escr,
    escr_index, matrix_vert, pebs_enable,
};

/// One of the two logical processors (hyper-threads) that share the PMU:
/// the driver's vocabulary type (the model keeps its own bit tables, not
/// its own words for the same concepts).
pub use crate::arch::netburst::LogicalProcessor;

use crate::arch::ia32::Privilege;

/// What the modelled processor is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Config {
    /// CPUID family 0Fh model number (0-6). Models 1 and 2 have IQ_ESCR0/1;
    /// models 2, 3, 4 and 6 have extended cascading.
    pub model: u8,
    /// CPUID stepping (bits 3:0 of the signature).
    pub stepping: u8,
    /// Hyper-Threading: two logical processors share the PMU, ESCR bits 1:0
    /// are T1_USR/T1_OS, CCCR bits 17:16 are the active-thread field and bit
    /// 27 is OVF_PMI_T1.
    pub hyper_threading: bool,
    /// IA32_MISC_ENABLE\[7\]: when clear, every PMU MSR is absent (#GP).
    pub perf_mon_available: bool,
    /// IA32_MISC_ENABLE\[12\] clear: PEBS exists (MSR_PEBS_ENABLE bits 25/26).
    pub pebs_available: bool,
}

impl Config {
    /// A processor of family 0Fh `model` with everything available.
    pub const fn new(model: u8, hyper_threading: bool) -> Self {
        Self {
            model,
            stepping: 1,
            hyper_threading,
            perf_mon_available: true,
            pebs_available: true,
        }
    }

    /// A Hyper-Threading Pentium 4 (Prescott, 0F_03).
    pub const fn prescott_ht() -> Self {
        Self::new(3, true)
    }

    /// A Northwood Pentium 4 without Hyper-Threading (0F_02): has IQ_ESCR0/1.
    pub const fn northwood() -> Self {
        Self::new(2, false)
    }

    /// Whether the ESCR at `index` in the model's table of SDM Table 18-63
    /// exists on this model.
    pub const fn has_escr(&self, index: usize) -> bool {
        index < ESCRS && (!ESCR_TABLE[index].early_models_only || matches!(self.model, 1 | 2))
    }

    /// The CPUID signature family 0Fh, model, stepping.
    pub const fn signature(&self) -> u32 {
        0xF00 | ((self.model as u32 & 0xF) << 4) | (self.stepping as u32 & 0xF)
    }
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

/// Why an access raised #GP(0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum GpReason {
    /// No MSR at that address on the configured model.
    NoSuchMsr,
    /// A PMU MSR while IA32_MISC_ENABLE\[7\] (performance monitoring available)
    /// is clear: the MSR is not there.
    PerfMonUnavailable,
    /// The write sets reserved bits: `bits` are the offending ones.
    ReservedBits {
        /// The reserved bits that were set.
        bits: u64,
    },
    /// A CCCR write on a part without Hyper-Threading whose bits 17:16 are not
    /// 11b (SDM Figure 18-45: "Reserved: must be set to 11B").
    ActiveThreadMustBeAny,
    /// IA32_DS_AREA written with a non-canonical linear address.
    NonCanonicalAddress,
    /// RDPMC with ECX\[30:0\] not a counter number (0-17).
    CounterIndexOutOfRange,
}

/// A fault the hardware would raise; what the model's [`MsrAccess`] returns
/// as its error. A faulting access changes nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Fault {
    /// #GP(0).
    GeneralProtection {
        /// RDMSR, WRMSR or RDPMC.
        instruction: Instruction,
        /// The MSR address (ECX) or, for RDPMC, the ECX operand.
        ecx: u32,
        /// Why.
        reason: GpReason,
    },
}

impl Fault {
    /// The reason of the #GP.
    pub const fn reason(&self) -> GpReason {
        match *self {
            Self::GeneralProtection { reason, .. } => reason,
        }
    }
}

impl core::fmt::Display for GpReason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            GpReason::NoSuchMsr => f.write_str("no such MSR on this model"),
            GpReason::PerfMonUnavailable => {
                f.write_str("performance monitoring is unavailable (IA32_MISC_ENABLE[7] clear)")
            }
            GpReason::ReservedBits { bits } => write!(f, "reserved bits {bits:#x} set"),
            GpReason::ActiveThreadMustBeAny => {
                f.write_str("CCCR active-thread field must be 11b without Hyper-Threading")
            }
            GpReason::NonCanonicalAddress => f.write_str("non-canonical address"),
            GpReason::CounterIndexOutOfRange => f.write_str("no counter with that index"),
        }
    }
}

impl core::error::Error for Fault {}

/// "#GP(0) on WRMSR to MSR_FSB_ESCR0 (3A2H): reserved bits 0x1 set": the
/// ESCR's SDM name from the model's own table (SDM Table 18-63).
impl core::fmt::Display for Fault {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let Self::GeneralProtection {
            instruction,
            ecx,
            reason,
        } = self;
        let (verb, what) = match instruction {
            Instruction::Rdmsr => ("RDMSR of", "MSR"),
            Instruction::Wrmsr => ("WRMSR to", "MSR"),
            Instruction::Rdpmc => ("RDPMC of", "counter"),
        };
        match escr_index(*ecx).filter(|_| *instruction != Instruction::Rdpmc) {
            Some(i) => write!(
                f,
                "#GP(0) on {verb} {} ({ecx:X}H): {reason}",
                ESCR_TABLE[i].name
            ),
            None => write!(f, "#GP(0) on {verb} {what} {ecx:X}H: {reason}"),
        }
    }
}

/// A decoded MSR address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reg {
    Counter(usize),
    Cccr(usize),
    Escr(usize),
    TcPreciseEvent,
    PebsEnable,
    PebsMatrixVert,
    MiscEnable,
    DsArea,
}

/// IA32_MISC_ENABLE bits the model lets software write (SDM Table 35-41 for
/// family 0Fh): 0 fast strings, 2 FOPCODE compatibility, 3 automatic thermal
/// control, 9 hardware prefetcher disable, 10 FERR# multiplexing, 13 TM2,
/// 16 EIST, 18 MONITOR FSM, 19 adjacent cache line prefetch disable, 22 limit
/// CPUID maxval, 23 xTPR disable, 24 L1 data cache context mode, 34 XD bit
/// disable. Bits 7, 11 and 12 are read-only (writes to them are ignored);
/// every other bit is reserved.
pub const MISC_ENABLE_WRITABLE: u64 = (1 << 0)
    | (1 << 2)
    | (1 << 3)
    | (1 << 9)
    | (1 << 10)
    | (1 << 13)
    | (1 << 16)
    | (1 << 18)
    | (1 << 19)
    | (1 << 22)
    | (1 << 23)
    | (1 << 24)
    | (1 << 34);
/// IA32_MISC_ENABLE read-only bits: 7 (performance monitoring available), 11
/// (BTS unavailable), 12 (PEBS unavailable).
pub const MISC_ENABLE_READ_ONLY: u64 = (1 << 7) | (1 << 11) | (1 << 12);
/// MSR_TC_PRECISE_EVENT: the model lets software write bits 15:0 and treats
/// 63:16 as reserved; its reset value is FC00H (as perfctr observed).
pub const TC_PRECISE_EVENT_WRITABLE: u64 = 0xFFFF;
/// Reset value of MSR_TC_PRECISE_EVENT.
pub const TC_PRECISE_EVENT_RESET: u64 = 0xFC00;

/// The state of a logical processor that the PMU sees: whether it is active
/// (not halted; the CCCR active-thread field, SDM 18.16.2) and its current
/// privilege level (used for the other thread of a TI event, Table 18-30).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ThreadState {
    /// The logical processor is running (not halted / absent).
    pub active: bool,
    /// Its current privilege level.
    pub privilege: Privilege,
}

impl ThreadState {
    /// Active, at CPL 0.
    pub const RUNNING_OS: Self = Self {
        active: true,
        privilege: Privilege::Os,
    };

    /// Active or not, at CPL 0.
    pub const fn new(active: bool) -> Self {
        Self {
            active,
            privilege: Privilege::Os,
        }
    }
}

/// The performance-monitoring interrupt line of one logical processor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PmiLine {
    /// A PMI has been raised and not yet taken.
    pub pending: bool,
    /// Bit `n` set: counter `n` overflowed with OVF_PMI for this logical
    /// processor (since the last [`NetBurstModel::take_pmi`]).
    pub counters: u32,
    /// The PEBS buffer reached its interrupt threshold.
    pub pebs_threshold: bool,
}

impl PmiLine {
    /// No PMI.
    pub const NONE: Self = Self {
        pending: false,
        counters: 0,
        pebs_threshold: false,
    };
}

/// The register-level model of one physical NetBurst package's PMU, shared
/// by its logical processors. See the [module documentation](super).
#[derive(Clone, Debug)]
pub struct NetBurstModel {
    pub(super) config: Config,
    pub(super) counters: [u64; COUNTERS],
    pub(super) cccrs: [u64; COUNTERS],
    pub(super) escrs: [u64; ESCRS],
    pub(super) tc_precise_event: u64,
    /// MSR_PEBS_ENABLE bits other than 25/26 (shared by both threads).
    pub(super) pebs_enable: u64,
    /// PEBS enabled, per logical processor (absolute, not "my/other").
    pub(super) pebs_on: [bool; 2],
    pub(super) matrix_vert: u64,
    pub(super) misc_enable: u64,
    pub(super) ds_area: [u64; 2],
    pub(super) threads: [ThreadState; 2],
    /// Threshold output of the previous cycle, for EDGE.
    pub(super) edge_prev: [bool; COUNTERS],
    /// A PMI owed by an overflow with OVF_PMI set and not yet raised: the
    /// counter's increments still to come (from the clock after the
    /// overflow's) until it rises: 1 + the skid ([`NetBurstModel::set_skid`]).
    pub(super) pmi_due: [Option<u64>; COUNTERS],
    /// The PMI skid, in increments of the overflowed counter.
    pub(super) skid: u64,
    pub(super) pmi: [PmiLine; 2],
    pub(super) pebs: [PebsState; 2],
}

impl NetBurstModel {
    /// A model in the reset state (all ESCRs, CCCRs and counters zero).
    pub const fn new(config: Config) -> Self {
        let mut misc = 0;
        if config.perf_mon_available {
            misc |= 1 << 7;
        }
        if !config.pebs_available {
            misc |= 1 << 12;
        }
        Self {
            config,
            counters: [0; COUNTERS],
            cccrs: [0; COUNTERS],
            escrs: [0; ESCRS],
            tc_precise_event: TC_PRECISE_EVENT_RESET,
            pebs_enable: 0,
            pebs_on: [false; 2],
            matrix_vert: 0,
            misc_enable: misc,
            ds_area: [0; 2],
            threads: [
                ThreadState::RUNNING_OS,
                ThreadState::new(config.hyper_threading),
            ],
            edge_prev: [false; COUNTERS],
            pmi_due: [None; COUNTERS],
            skid: 0,
            pmi: [PmiLine::NONE; 2],
            pebs: [PebsState::EMPTY; 2],
        }
    }

    /// The configuration.
    pub const fn config(&self) -> &Config {
        &self.config
    }

    /// A view through logical processor `lp`: its [`MsrAccess`] sees the
    /// shared PMU plus the per-thread registers (IA32_DS_AREA, the "my/other
    /// thread" PEBS bits). `None` for T1 without Hyper-Threading.
    pub fn thread(&mut self, lp: LogicalProcessor) -> Option<ThreadView<'_>> {
        (lp == LogicalProcessor::T0 || self.config.hyper_threading)
            .then_some(ThreadView { model: self, lp })
    }

    /// Counter `n` (40 bits), without going through RDPMC; 0 for `n >= 18`.
    pub fn counter(&self, n: usize) -> u64 {
        self.counters.get(n).copied().unwrap_or(0)
    }

    /// CCCR `n`; 0 for `n >= 18`.
    pub fn cccr(&self, n: usize) -> u64 {
        self.cccrs.get(n).copied().unwrap_or(0)
    }

    fn decode(&self, msr: u32) -> Option<Reg> {
        let n = msr.wrapping_sub(MSR_COUNTER_BASE) as usize;
        if n < COUNTERS {
            return Some(Reg::Counter(n));
        }
        let n = msr.wrapping_sub(MSR_CCCR_BASE) as usize;
        if n < COUNTERS {
            return Some(Reg::Cccr(n));
        }
        if let Some(i) = tables::escr_index(msr) {
            return self.config.has_escr(i).then_some(Reg::Escr(i));
        }
        match msr {
            MSR_TC_PRECISE_EVENT => Some(Reg::TcPreciseEvent),
            MSR_PEBS_ENABLE => Some(Reg::PebsEnable),
            MSR_PEBS_MATRIX_VERT => Some(Reg::PebsMatrixVert),
            IA32_MISC_ENABLE => Some(Reg::MiscEnable),
            IA32_DS_AREA => Some(Reg::DsArea),
            _ => None,
        }
    }

    /// Decodes `msr` for `instruction`, applying the "MSR exists" rules.
    fn lookup(&self, instruction: Instruction, msr: u32) -> Result<Reg, Fault> {
        let gp = |reason| Fault::GeneralProtection {
            instruction,
            ecx: msr,
            reason,
        };
        let reg = self.decode(msr).ok_or(gp(GpReason::NoSuchMsr))?;
        let pmu_register = !matches!(reg, Reg::MiscEnable | Reg::DsArea);
        if pmu_register && !self.config.perf_mon_available {
            return Err(gp(GpReason::PerfMonUnavailable));
        }
        Ok(reg)
    }

    pub(super) fn read(&self, lp: LogicalProcessor, msr: u32) -> Result<u64, Fault> {
        Ok(match self.lookup(Instruction::Rdmsr, msr)? {
            Reg::Counter(n) => self.counters[n],
            Reg::Cccr(n) => self.cccrs[n],
            Reg::Escr(i) => self.escrs[i],
            Reg::TcPreciseEvent => self.tc_precise_event,
            Reg::PebsEnable => {
                let mut v = self.pebs_enable;
                if self.pebs_on[lp.index()] {
                    v |= pebs_enable::MY_THR;
                }
                if self.config.hyper_threading && self.pebs_on[lp.other().index()] {
                    v |= pebs_enable::OTH_THR;
                }
                v
            }
            Reg::PebsMatrixVert => self.matrix_vert,
            Reg::MiscEnable => self.misc_enable,
            Reg::DsArea => self.ds_area[lp.index()],
        })
    }

    /// The reserved bits of a write of `value` to `reg`, or the must-be-one
    /// violation; `Ok` when the write is legal.
    fn check_msr_write(&self, reg: Reg, value: u64) -> Result<(), GpReason> {
        let ht = self.config.hyper_threading;
        let reserved = match reg {
            Reg::Counter(_) => !COUNTER_MASK,
            Reg::Cccr(n) => {
                let mut r = cccr::RESERVED;
                let ext_ok = tables::has_extended_cascading(self.config.model)
                    && tables::extended_cascade_source(n).is_some();
                if !ext_ok {
                    r |= cccr::EXTENDED_CASCADE;
                }
                if !ht {
                    r |= cccr::OVF_PMI_T1;
                }
                r
            }
            Reg::Escr(_) => {
                if ht {
                    escr::RESERVED
                } else {
                    escr::RESERVED | escr::RESERVED_NON_HT
                }
            }
            Reg::TcPreciseEvent => !TC_PRECISE_EVENT_WRITABLE,
            Reg::PebsEnable => {
                let mut ok = pebs_enable::METRICS | pebs_enable::UOP_TAG;
                if self.config.pebs_available {
                    ok |= pebs_enable::MY_THR;
                    if ht {
                        ok |= pebs_enable::OTH_THR;
                    }
                }
                !ok
            }
            Reg::PebsMatrixVert => !matrix_vert::DEFINED,
            Reg::MiscEnable => !(MISC_ENABLE_WRITABLE | MISC_ENABLE_READ_ONLY),
            Reg::DsArea => {
                // Canonical 48-bit linear address: bits 63:47 all equal.
                let top = value >> 47;
                return if top == 0 || top == (1 << 17) - 1 {
                    Ok(())
                } else {
                    Err(GpReason::NonCanonicalAddress)
                };
            }
        };
        let bits = value & reserved;
        if bits != 0 {
            return Err(GpReason::ReservedBits { bits });
        }
        if let Reg::Cccr(_) = reg
            && !ht
            && value & cccr::ACTIVE_THREAD_ANY != cccr::ACTIVE_THREAD_ANY
        {
            return Err(GpReason::ActiveThreadMustBeAny);
        }
        Ok(())
    }

    pub(super) fn write(
        &mut self,
        lp: LogicalProcessor,
        msr: u32,
        value: u64,
    ) -> Result<(), Fault> {
        let reg = self.lookup(Instruction::Wrmsr, msr)?;
        self.check_msr_write(reg, value)
            .map_err(|reason| Fault::GeneralProtection {
                instruction: Instruction::Wrmsr,
                ecx: msr,
                reason,
            })?;
        match reg {
            Reg::Counter(n) => self.counters[n] = value,
            Reg::Cccr(n) => self.write_cccr(n, value),
            Reg::Escr(i) => self.escrs[i] = value,
            Reg::TcPreciseEvent => self.tc_precise_event = value,
            Reg::PebsEnable => {
                self.pebs_enable = value & !(pebs_enable::MY_THR | pebs_enable::OTH_THR);
                self.pebs_on[lp.index()] = value & pebs_enable::MY_THR != 0;
                if self.config.hyper_threading {
                    self.pebs_on[lp.other().index()] = value & pebs_enable::OTH_THR != 0;
                }
            }
            Reg::PebsMatrixVert => self.matrix_vert = value,
            Reg::MiscEnable => {
                self.misc_enable =
                    (self.misc_enable & MISC_ENABLE_READ_ONLY) | (value & MISC_ENABLE_WRITABLE);
            }
            Reg::DsArea => self.ds_area[lp.index()] = value,
        }
        Ok(())
    }

    fn write_cccr(&mut self, n: usize, value: u64) {
        let old = self.cccrs[n];
        if old & cccr::ENABLE == 0 && value & cccr::ENABLE != 0 {
            self.edge_prev[n] = false;
        }
        // Clearing OVF (or both OVF_PMI bits) withdraws a PMI that was waiting
        // for its increments after the overflow (the skid's included).
        if value & cccr::OVF == 0 || value & (cccr::OVF_PMI_T0 | cccr::OVF_PMI_T1) == 0 {
            self.pmi_due[n] = None;
        }
        self.cccrs[n] = value;
    }

    pub(super) fn rdpmc(&self, index: u32) -> Result<u64, Fault> {
        let gp = |reason| Fault::GeneralProtection {
            instruction: Instruction::Rdpmc,
            ecx: index,
            reason,
        };
        if !self.config.perf_mon_available {
            return Err(gp(GpReason::PerfMonUnavailable));
        }
        let fast = index & (1 << 31) != 0;
        let n = (index & 0x7FFF_FFFF) as usize;
        let value = *self
            .counters
            .get(n)
            .ok_or(gp(GpReason::CounterIndexOutOfRange))?;
        Ok(if fast { value & 0xFFFF_FFFF } else { value })
    }

    fn cpuid_for(&self, lp: LogicalProcessor, leaf: u32) -> CpuidResult {
        let max_leaf = if self.config.model >= 3 { 5 } else { 2 };
        match leaf {
            0 => {
                let word = |s: &[u8; 4]| u32::from_le_bytes(*s);
                CpuidResult {
                    eax: max_leaf,
                    ebx: word(b"Genu"),
                    edx: word(b"ineI"),
                    ecx: word(b"ntel"),
                }
            }
            1 => {
                let ht = self.config.hyper_threading;
                let logical = if ht { 2 } else { 1 };
                // FPU, TSC, MSR, APIC, DS, HTT.
                let mut edx = (1 << 0) | (1 << 4) | (1 << 5) | (1 << 9) | (1 << 21);
                if ht {
                    edx |= 1 << 28;
                }
                CpuidResult {
                    eax: self.config.signature(),
                    ebx: ((lp.index() as u32) << 24) | (logical << 16) | (8 << 8),
                    ecx: 0,
                    edx,
                }
            }
            _ => CpuidResult::default(),
        }
    }
}

/// The model as seen from logical processor T0.
impl MsrAccess for NetBurstModel {
    type Error = Fault;

    fn read_msr(&mut self, msr: u32) -> Result<u64, Fault> {
        self.read(LogicalProcessor::T0, msr)
    }

    fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Fault> {
        self.write(LogicalProcessor::T0, msr, value)
    }

    fn rdpmc(&mut self, index: u32) -> Result<u64, Fault> {
        NetBurstModel::rdpmc(self, index)
    }
}

/// CPUID of a family 0Fh GenuineIntel processor of the configured model, as
/// seen from T0: leaf 0 (vendor, maximum leaf 2, or 5 from model 3), leaf 1
/// (signature; EDX with FPU, TSC, MSR, APIC, DS and, with Hyper-Threading,
/// HTT; EBX\[23:16\] logical processors, EBX\[31:24\] initial APIC ID). Other
/// leaves read as zero.
impl Cpuid for NetBurstModel {
    fn cpuid(&self, leaf: u32, _subleaf: u32) -> CpuidResult {
        self.cpuid_for(LogicalProcessor::T0, leaf)
    }
}

/// The PMU as seen from one logical processor; see [`NetBurstModel::thread`].
#[derive(Debug)]
pub struct ThreadView<'m> {
    model: &'m mut NetBurstModel,
    lp: LogicalProcessor,
}

impl ThreadView<'_> {
    /// Which logical processor this view is.
    pub const fn logical_processor(&self) -> LogicalProcessor {
        self.lp
    }

    /// The shared model.
    pub fn model(&mut self) -> &mut NetBurstModel {
        self.model
    }
}

impl MsrAccess for ThreadView<'_> {
    type Error = Fault;

    fn read_msr(&mut self, msr: u32) -> Result<u64, Fault> {
        self.model.read(self.lp, msr)
    }

    fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Fault> {
        self.model.write(self.lp, msr, value)
    }

    fn rdpmc(&mut self, index: u32) -> Result<u64, Fault> {
        self.model.rdpmc(index)
    }
}

/// CPUID as seen from this logical processor (its initial APIC ID is 0 or 1).
impl Cpuid for ThreadView<'_> {
    fn cpuid(&self, leaf: u32, _subleaf: u32) -> CpuidResult {
        self.model.cpuid_for(self.lp, leaf)
    }
}

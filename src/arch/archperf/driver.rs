//! The architectural PMU's driver: typestate counters ([`crate::counter`])
//! over the general counters (`IA32_PERFEVTSELx`/`IA32_PMCx`) and the fixed
//! counters (`IA32_FIXED_CTR_CTRL`/`IA32_FIXED_CTRx`), started and stopped
//! through `IA32_PERF_GLOBAL_CTRL` (version 2 and later; SDM Vol. 3B
//! "Architectural Performance Monitoring Version 2").
//!
//! # MSR traffic per operation
//!
//! Each handle caches its images and the driver caches `GLOBAL_CTRL` and
//! `FIXED_CTR_CTRL`, so no operation reads back a register the driver
//! wrote (counted with [`crate::access::Recording`] in the tests):
//!
//! | operation | RDMSR | WRMSR | RDPMC | accesses |
//! |---|---|---|---|---|
//! | configure | 0 | 2 | 0 | the counter preset; `PERFEVTSELx` with EN (or `FIXED_CTR_CTRL`): on v2+ the counter counts only once its `GLOBAL_CTRL` bit is set |
//! | enable / resume | 0 | 1 | 0 | `GLOBAL_CTRL` with the counter's bit (v1: `PERFEVTSELx` with EN) |
//! | halt, counting counter | 0 | 1 | 0 | `GLOBAL_CTRL` without it (v1: EN clear) |
//! | halt, sampling counter | 0 | 1 (+2) | 1 | as above; RDPMC to find an overflow whose PMI the halt cancelled, then the counter rewritten and its status bit acknowledged |
//! | read | 0 | 0 | 1 | RDPMC (bit 30 for a fixed counter) |
//! | release | 0 | 2 | 0 | `PERFEVTSELx` = 0 (or the fixed field cleared), the counter 0 |
//! | group start or stop ([`crate::counter::Group`]) | 0 | 1 (+2 per sampling member stopped past its overflow) | 0 (stop: 1 per sampling member) | one `GLOBAL_CTRL` write: every member starts (stops) at one instant; a stopped sampling member is then read as a halt reads it, after the write, when it has really stopped |
//! | group read | 0 | 2 | K | `GLOBAL_CTRL` stopped, K RDPMCs, restored: one snapshot |
//! | PMI | 1 | 1 + 1 per overflowed counter | 1 per overflowed counter | [`super::pmi`] |
//! | [`ArchPerfDriver::set_pebs_area`], [`ArchPerfDriver::take_pebs_area`] | 0 | 1 | 0 | `IA32_DS_AREA` (and the DS management area, in memory) |
//! | configure a PEBS counter | 0 | 3 (+1, +1) | 0 | the preset `-(N-1)`, `IA32_PEBS_ENABLE`, the control without INT (with Adaptive_Record on PEBS baseline); `MSR_PEBS_DATA_CFG` for the first PEBS counter on baseline and `MSR_PEBS_LD_LAT` where they change; the counter's reset value in the DS area (memory) |
//! | halt a PEBS counter | 0 | 1 | 0 | `GLOBAL_CTRL` (its periods are its records: nothing to find) |
//! | release a PEBS counter | 0 | 3 (+1) | 0 | `IA32_PEBS_ENABLE`, the control, the counter (`GLOBAL_CTRL` if it ran) |
//! | the PEBS buffer's PMI | 1 | 1 | 1 | the status read, the RDPMC of the buffer's slot (the lowest PEBS counter), the acknowledgement of bit 62 and the PEBS counters' bits; the records are memory ([`super::pmi`]) |
//! | [`ArchPerfDriver::drain_pebs`] | 0 | 0 | 0 | memory only |
//!
//! # PEBS
//!
//! A configuration whose event has a precise level (`branches:pp`,
//! [`EventSpec::precise`]) and a sample-after value N is a PEBS counter: a
//! record every N events (preset and reload `-(N-1)`: the assist takes the
//! event after the overflow, SDM Vol. 3B "PEBS"), the options of
//! [`PebsOptions`], on a DS area this driver installed
//! ([`ArchPerfDriver::set_pebs_area`], whose memory the driver owns until
//! [`ArchPerfDriver::take_pebs_area`]; its `unsafe` constructor states the
//! linear mapping PEBS needs). The guide's archperf page has the formats,
//! which IP a sample reports on each, and the refusals.
//!
//! # Counters the firmware uses
//!
//! A BIOS or an SMM handler may use counters behind the kernel's back. At
//! take the driver reads every `PERFEVTSELx` and `FIXED_CTR_CTRL`; a
//! counter found enabled (EN set, or a non-zero fixed field: Linux's
//! `check_hw_exists` test) is reported ([`ArchPerfDriver::firmware`]) and
//! left alone: its registers are never written, its `GLOBAL_CTRL` bit and
//! status bit are kept, and configuring it is refused
//! ([`ConfigError::UsedByFirmware`]).
//!
//! # Legacy and full-width writes
//!
//! A write to `IA32_PMCx` keeps bits 31:0 and sign-extends them; with
//! `IA32_PERF_CAPABILITIES[13]` the `IA32_A_PMCx` aliases take the whole
//! width. Without them a preset `-N` is exact only for `N <= 2^31`, so a
//! longer sample-after value is refused ([`ConfigError::PeriodNeedsFullWidth`]).
//!
//! # Examples
//!
//! (On a register-level model: a doc test with the `model` feature, ignored without it.)
//!
#![cfg_attr(feature = "model", doc = "```")]
#![cfg_attr(not(feature = "model"), doc = "```ignore")]
//! use pmu::arch::archperf::driver::{ArchPerfDriver, CounterConfig, Counters};
//! use pmu::arch::archperf::{ArchPerfPmu, EventSpec};
//! use pmu::model::archperf::{ArchPerfModel, Config, Event};
//!
//! // SAFETY: the one value for this logical processor (the model's).
//! static CPU0: ArchPerfPmu = unsafe { ArchPerfPmu::new() };
//! pmu::owner!(Cpu0);
//! let model = ArchPerfModel::new(Config::skylake());
//! let cpu = pmu::detect::detect(&model, &mut model.clone())?.arch_perf().unwrap();
//! let (mut pmu, c) = ArchPerfDriver::<Cpu0, _>::take(model, &cpu, &CPU0)?;
//! let instructions: EventSpec = "instructions".parse()?;
//! let g0 = c.g0.configure(&mut pmu, &CounterConfig::counting(instructions))?.enable(&mut pmu)?;
//! pmu.msr().inject(Event::new(0xC0, 0x00, 1000));
//! assert_eq!(g0.read(&mut pmu)?, 1000);
//! let g0 = g0.halt(&mut pmu)?.release(&mut pmu)?;
//! let _model = pmu.give_back(Counters { g0, ..c });
//! # Ok::<(), Box<dyn core::error::Error>>(())
//! ```

use core::fmt;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;

use super::enumeration::{self, Lack, Missing};
use super::events::{ArchEvent, EventSpec};
use super::lbr::{DebugCtl, Lbr, LbrOptions};
use super::msrs::{Counter, CounterSet, FixedCtl, FixedCtrCtrl, MAX_GENERAL, PerfEvtSel};
use super::msrs::{IA32_DS_AREA, IA32_PEBS_ENABLE, MSR_PEBS_DATA_CFG, MSR_PEBS_LD_LAT};
use super::msrs::{IA32_FIXED_CTR_CTRL, IA32_PERF_GLOBAL_CTRL, IA32_PERF_GLOBAL_OVF_CTRL};
use super::msrs::{PebsDataCfg, PebsEnable, PebsLdLat};
use super::pebs::{Precise, RecordLayout};
use super::physical::ArchPerfPmu;
use super::pmi::{Capture, PmiState, overflow_rule};
use crate::access::{MsrBackend, MsrOps};
use crate::arch::ia32::ds::DsArea;
use crate::counter::owner::{self, Ending};
use crate::counter::state::Unclaimed;
use crate::counter::{self, Arch, Owner, OwnerId, StateTag};
use crate::detect;
use crate::sampling::{OverflowRule, Sample, SampleAfter};
use crate::sealed::{Sealed, TOKEN, Token};

/// The architectural PMU, as a type parameter of [`counter::Handle`].
#[derive(Debug)]
pub enum ArchPerfmon {}

/// A counter handle of the architectural PMU: counter `N` (its `GLOBAL`
/// bit: general counters 0-7, fixed counters 32-35) of the PMU owned by
/// `O`, in state `S`.
pub type ArchPerfHandle<O, const N: u8, S> = counter::Handle<ArchPerfmon, O, N, S>;

/// What a claimed counter remembers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Programmed {
    /// The `PERFEVTSELx` image with EN (general counters) or the fixed
    /// counter's control field.
    select: PerfEvtSel,
    fixed: FixedCtl,
    sampling: Option<SampleAfter>,
    /// PEBS, at this precise level.
    pebs: Option<Precise>,
    /// Load latency (`MSR_PEBS_LD_LAT`; `LL_EN_PMCn` before PEBS
    /// baseline).
    load_latency: bool,
    /// Samples carry the branch records.
    branches: bool,
}

impl Programmed {
    /// The `PERFEVTSELx` image a general counter runs with.
    pub const fn evtsel(&self) -> PerfEvtSel {
        self.select
    }

    /// A fixed counter's control field.
    pub const fn fixed_ctl(&self) -> FixedCtl {
        self.fixed
    }

    /// The sample-after value, for a sampling counter.
    pub const fn sampling(&self) -> Option<SampleAfter> {
        self.sampling
    }

    /// The precise level, for a PEBS counter.
    pub const fn pebs(&self) -> Option<Precise> {
        self.pebs
    }

    /// Whether its samples carry the branch records.
    pub const fn branches(&self) -> bool {
        self.branches
    }
}

impl Sealed for ArchPerfmon {}

impl Arch for ArchPerfmon {
    const NAME: &'static str = "architectural PMU";
    const COUNTERS: u8 = 36;
    type Programmed = Programmed;
    const UNPROGRAMMED: Programmed = Programmed {
        select: PerfEvtSel::new(0, 0),
        fixed: FixedCtl::OFF,
        sampling: None,
        pebs: None,
        load_latency: false,
        branches: false,
    };

    /// Never: the architectural PMU has no cascading.
    fn can_cascade(_from: u8, _to: u8) -> bool {
        false
    }
}

/// The claim tokens of the PMU owned by `O`, handed out once by
/// [`ArchPerfDriver::take`]: general counters 0 and 1 always (the driver
/// needs them), 2-7 and the fixed counters 0-3 where this logical
/// processor's CPUID says they exist ([`super::enumeration::counters`]: on
/// a hybrid part, this core type's).
#[derive(Debug)]
#[allow(missing_docs)]
pub struct Counters<O: Owner> {
    pub g0: ArchPerfHandle<O, 0, Unclaimed>,
    pub g1: ArchPerfHandle<O, 1, Unclaimed>,
    pub g2: Option<ArchPerfHandle<O, 2, Unclaimed>>,
    pub g3: Option<ArchPerfHandle<O, 3, Unclaimed>>,
    pub g4: Option<ArchPerfHandle<O, 4, Unclaimed>>,
    pub g5: Option<ArchPerfHandle<O, 5, Unclaimed>>,
    pub g6: Option<ArchPerfHandle<O, 6, Unclaimed>>,
    pub g7: Option<ArchPerfHandle<O, 7, Unclaimed>>,
    pub f0: Option<ArchPerfHandle<O, 32, Unclaimed>>,
    pub f1: Option<ArchPerfHandle<O, 33, Unclaimed>>,
    pub f2: Option<ArchPerfHandle<O, 34, Unclaimed>>,
    pub f3: Option<ArchPerfHandle<O, 35, Unclaimed>>,
}

impl<O: Owner> Counters<O> {
    fn issue(present: CounterSet) -> Counters<O> {
        fn token<O: Owner, const N: u8>(
            present: CounterSet,
        ) -> Option<ArchPerfHandle<O, N, Unclaimed>> {
            Counter::from_index(N)
                .filter(|c| present.contains(*c))
                .map(|_| counter::Handle::token())
        }
        Counters {
            g0: counter::Handle::token(),
            g1: counter::Handle::token(),
            g2: token(present),
            g3: token(present),
            g4: token(present),
            g5: token(present),
            g6: token(present),
            g7: token(present),
            f0: token(present),
            f1: token(present),
            f2: token(present),
            f3: token(present),
        }
    }

    /// The counters these tokens stand for.
    pub fn present(&self) -> CounterSet {
        let mut set = CounterSet::first(2, 0);
        let optional = [
            (self.g2.is_some(), 2),
            (self.g3.is_some(), 3),
            (self.g4.is_some(), 4),
            (self.g5.is_some(), 5),
            (self.g6.is_some(), 6),
            (self.g7.is_some(), 7),
            (self.f0.is_some(), 32),
            (self.f1.is_some(), 33),
            (self.f2.is_some(), 34),
            (self.f3.is_some(), 35),
        ];
        for (here, n) in optional {
            if let (true, Some(c)) = (here, Counter::from_index(n)) {
                set = set.with(c);
            }
        }
        set
    }

    /// Every token as a run-time handle, by counter.
    pub fn erase_all(self) -> [Option<counter::AnyHandle<ArchPerfmon>>; 12] {
        [
            Some(self.g0.erase()),
            Some(self.g1.erase()),
            self.g2.map(counter::Handle::erase),
            self.g3.map(counter::Handle::erase),
            self.g4.map(counter::Handle::erase),
            self.g5.map(counter::Handle::erase),
            self.g6.map(counter::Handle::erase),
            self.g7.map(counter::Handle::erase),
            self.f0.map(counter::Handle::erase),
            self.f1.map(counter::Handle::erase),
            self.f2.map(counter::Handle::erase),
            self.f3.map(counter::Handle::erase),
        ]
    }

    /// The tokens back from run-time handles ([`Counters::erase_all`]'s
    /// form, after release): each Unclaimed, issued for `O`, at its place;
    /// otherwise they come back unchanged.
    #[allow(clippy::result_large_err, reason = "the handles come back by value")]
    pub fn from_erased(
        all: [Option<counter::AnyHandle<ArchPerfmon>>; 12],
    ) -> Result<Counters<O>, [Option<counter::AnyHandle<ArchPerfmon>>; 12]> {
        const PLACES: [u8; 12] = [0, 1, 2, 3, 4, 5, 6, 7, 32, 33, 34, 35];
        let mut present = CounterSet::EMPTY;
        let mut whole = all[0].is_some() && all[1].is_some();
        for (h, n) in all.iter().zip(PLACES) {
            if let Some(h) = h {
                whole &= h.owner() == OwnerId::of::<O>()
                    && h.index() == n
                    && h.state() == StateTag::Unclaimed;
                if let Some(c) = Counter::from_index(n) {
                    present = present.with(c);
                }
            }
        }
        if whole {
            Ok(Counters::issue(present))
        } else {
            Err(all)
        }
    }
}

/// Why the driver refused a configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ConfigError {
    /// No counter the driver drives has this number (general counters
    /// 0-7 are 0-7, fixed counters 0-3 are 32-35).
    NoSuchCounter(u8),
    /// This logical processor (on a hybrid part: this core type) lacks a
    /// counter or an architectural event: its CPUID (leaf 23H, or leaf
    /// 0AH) says so, and the message names the core type and the bit
    /// ([`Lack`]).
    NotOnThisCpu(Lack),
    /// The counter is claimed already (only a hand-built
    /// [`crate::counter::AnyHandle`] can ask).
    CounterClaimed(u8),
    /// The firmware uses the counter (found enabled at take).
    UsedByFirmware(u8),
    /// A fixed counter counts one event only.
    NotFixedEvent {
        /// The fixed counter (0-3).
        fixed: u8,
    },
    /// A pseudo-encoding (event select 00H: `ref-cycles`, `slots`) counts on
    /// its fixed counter only, as Linux places it.
    NotGeneralEvent {
        /// The general counter asked for.
        counter: u8,
        /// The fixed counter that counts the event.
        fixed: Option<u8>,
    },
    /// AnyThread needs architectural perfmon version 3 or later, where
    /// CPUID does not deprecate it (CPUID.0AH:EDX\[15\]; Linux refuses it
    /// below version 3).
    AnyThreadUnavailable {
        /// This CPU's version.
        version: u8,
    },
    /// The sample-after value was checked against another counter rule
    /// (use [`ArchPerfDriver::overflow_rule`]).
    SampleAfterRule,
    /// A sample-after value above 2^31 needs full-width writes
    /// (`IA32_PERF_CAPABILITIES[13]`), which this CPU lacks.
    PeriodNeedsFullWidth,
    /// Sampling needs `IA32_PERF_GLOBAL_STATUS` (version 2 and later): the
    /// PMI handler finds the overflowed counters there.
    NoOverflowStatus,
    /// A precise event (`:p`, `:pp`, `:ppp`) asks for PEBS, which this CPU
    /// lacks or does not make available ([`detect::ArchPebs::usable`]).
    PebsUnavailable,
    /// PEBS needs a DS save area installed by this driver first
    /// ([`ArchPerfDriver::set_pebs_area`]).
    NoPebsArea,
    /// This counter cannot take PEBS records here: before PEBS baseline
    /// general counters 0-3 only, with it every general and fixed counter.
    NotPebsCounter(u8),
    /// A precise level (`:p`) on a counting configuration: PEBS samples.
    PreciseNeedsSampling,
    /// A PEBS period must be at least 2: the assist takes the event after
    /// the overflow, so a period of N starts at `-(N-1)`.
    PebsPeriod,
    /// Before PEBS baseline a PEBS event takes no CMASK, INV, EDGE or
    /// AnyThread (SDM Vol. 3B, "PEBS" of Nehalem and later).
    PebsFilter,
    /// `:pp` or `:ppp` asks for the instruction of the event itself
    /// (EventingIP), which record format 1 does not have: `:p` takes the
    /// next instruction's address it does have.
    NoEventingIp {
        /// This CPU's record format.
        format: u8,
    },
    /// Record formats 1 and 2 do not say reliably which counter a record
    /// is for (their status field is `IA32_PERF_GLOBAL_STATUS`, which may
    /// hold other counters' bits: Linux drops such records), so the driver
    /// runs one PEBS counter at a time there.
    PebsOneCounter {
        /// This CPU's record format.
        format: u8,
    },
    /// The PEBS buffer is set up for other options ([`PebsOptions`]:
    /// records per PMI, adaptive groups, load-latency threshold), which the
    /// PEBS counters share.
    PebsOptionsDiffer,
    /// Load latency (`MSR_PEBS_LD_LAT`) only on a general counter that has
    /// a load-latency enable: 0-3 before PEBS baseline, any general counter
    /// with it.
    NoLoadLatency(u8),
    /// The DS save area is in use: a PEBS counter is configured.
    PebsBusy,
    /// A PEBS counter runs: halt the PEBS counters before draining their
    /// buffer from the driver (the PMI handler drains it meanwhile).
    PebsRunning,
    /// A context (a task's or a guest's counters, [`crate::arch::Switch`])
    /// carries no precise event: its PEBS records go to the DS buffer of
    /// the CPU, not the context.
    PreciseInContext,
    /// The pass-through world switch restores a guest's overflow status
    /// through `IA32_PERF_GLOBAL_STATUS_SET`, which version 4 introduced
    /// (SDM Vol. 3B 20.2.4; KVM's mediated vPMU requires it too), and a
    /// guest's counter values of any width through full-width writes
    /// (`IA32_A_PMCx`, `IA32_PERF_CAPABILITIES[13]`, SDM Vol. 3B 20.2.6): a
    /// legacy `IA32_PMCx` write sign-extends bit 31.
    GuestNeedsVersion4,
    /// Counters are reserved for a guest already, a guest is loaded (or
    /// none is, for an exit), or no counter is reserved for one.
    GuestState,
    /// This CPU has no last branch records the crate drives
    /// ([`Lbr::of`]: architectural LBR, or a legacy stack of a known
    /// generation and format; version 2 or later for the freeze on PMI).
    LbrUnavailable,
    /// The LBR filter asks for nothing (no privilege or no kind), or for
    /// what this CPU cannot filter (architectural LBR without CPL or
    /// branch filtering), or call-stack mode with other kinds than near
    /// calls and returns.
    LbrFilter,
    /// Call-stack mode is not on this CPU (legacy stacks before Haswell;
    /// architectural LBR without CPUID.1CH:EBX\[2\]).
    NoCallStack,
    /// Branch records on samples need the LBR enabled first
    /// ([`ArchPerfDriver::enable_lbr`]).
    LbrOff,
    /// A counter's samples carry the branch records: the LBR stays as it
    /// is until it is released.
    LbrBusy,
    /// Branch records ride on samples: a counting configuration takes
    /// none.
    BranchesNeedSampling,
    /// A PEBS counter's samples are its records (whose LBR group the
    /// driver does not configure): no branch records beside them.
    BranchesWithPebs,
    /// The LBR snapshot is of another LBR (another format, depth or mode)
    /// than the one enabled.
    LbrSnapshotMismatch,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::NoSuchCounter(n) => write!(
                f,
                "no counter {n}: the driver's counters are general counters 0-7 (0-7) and fixed counters 0-3 (32-35)"
            ),
            ConfigError::NotOnThisCpu(lack) => write!(f, "{lack}"),
            ConfigError::CounterClaimed(n) => write!(f, "counter {n} is claimed"),
            ConfigError::UsedByFirmware(n) => write!(
                f,
                "counter {n} was found enabled at take: the firmware uses it, so the driver leaves it alone"
            ),
            ConfigError::NotFixedEvent { fixed } => {
                let name = EventSpec::fixed(*fixed)
                    .and_then(|e| e.fixed_counter())
                    .map_or("nothing else", |i| match i {
                        0 => "instructions",
                        1 => "cycles",
                        2 => "ref-cycles",
                        _ => "slots",
                    });
                write!(
                    f,
                    "fixed counter {fixed} counts {name} only, without cmask, inv, edge or any"
                )
            }
            ConfigError::NotGeneralEvent { counter, fixed } => {
                write!(
                    f,
                    "general counter {counter} cannot count a pseudo-encoding (event select 00H)"
                )?;
                match fixed {
                    Some(i) => write!(f, ": it counts on fixed counter {i} only"),
                    None => Ok(()),
                }
            }
            ConfigError::AnyThreadUnavailable { version } => write!(
                f,
                "AnyThread needs architectural performance monitoring version 3 or later, not deprecated by CPUID.0AH:EDX[15] (this CPU has version {version}{})",
                if *version >= 3 { ", AnyThread deprecated" } else { "" }
            ),
            ConfigError::SampleAfterRule => f.write_str(
                "the sample-after value was checked against another counter rule: use ArchPerfDriver::overflow_rule",
            ),
            ConfigError::PeriodNeedsFullWidth => f.write_str(
                "a sample-after value above 2^31 needs full-width counter writes (IA32_PERF_CAPABILITIES[13]), which this CPU lacks",
            ),
            ConfigError::NoOverflowStatus => f.write_str(
                "sampling needs IA32_PERF_GLOBAL_STATUS, which architectural performance monitoring has from version 2 (this CPU has version 1)",
            ),
            ConfigError::PebsUnavailable => f.write_str(
                "a precise event (:p) needs PEBS, which this CPU lacks or makes unavailable (CPUID.01H:EDX.DS, IA32_MISC_ENABLE[12], IA32_PERF_CAPABILITIES record format 1-5)",
            ),
            ConfigError::NoPebsArea => f.write_str(
                "PEBS needs a DS save area: install one with ArchPerfDriver::set_pebs_area first",
            ),
            ConfigError::NotPebsCounter(n) => write!(
                f,
                "counter {n} takes no PEBS records here: general counters 0-3 before PEBS baseline, every general and fixed counter with it"
            ),
            ConfigError::PreciseNeedsSampling => f.write_str(
                "a precise level (:p, :pp, :ppp) needs a sampling configuration: PEBS takes samples",
            ),
            ConfigError::PebsPeriod => f.write_str(
                "a PEBS period must be at least 2 (the assist takes the event after the overflow)",
            ),
            ConfigError::PebsFilter => f.write_str(
                "before PEBS baseline a PEBS event takes no cmask, inv, edge or any",
            ),
            ConfigError::NoEventingIp { format } => write!(
                f,
                ":pp and :ppp ask for the event's own instruction (EventingIP), which PEBS record format {format} lacks: use :p, the next instruction's address"
            ),
            ConfigError::PebsOneCounter { format } => write!(
                f,
                "PEBS record format {format} does not say reliably which counter a record is for: one PEBS counter at a time"
            ),
            ConfigError::PebsOptionsDiffer => f.write_str(
                "the PEBS buffer is set up with other options (records per PMI, adaptive groups, load-latency threshold), which the PEBS counters share",
            ),
            ConfigError::NoLoadLatency(n) => write!(
                f,
                "counter {n} has no load-latency enable: general counters 0-3 before PEBS baseline, general counters with it"
            ),
            ConfigError::PebsBusy => {
                f.write_str("the DS save area is in use: a PEBS counter is configured")
            }
            ConfigError::PebsRunning => f.write_str(
                "a PEBS counter runs: halt the PEBS counters before draining their buffer",
            ),
            ConfigError::GuestNeedsVersion4 => f.write_str(
                "the pass-through world switch needs IA32_PERF_GLOBAL_STATUS_SET (architectural perfmon version 4) to restore a guest's overflow status, and full-width counter writes to restore its values",
            ),
            ConfigError::GuestState => f.write_str(
                "counters reserved for a guest already, a guest loaded (or none, for an exit), or no counter reserved for a guest",
            ),
            ConfigError::PreciseInContext => f.write_str(
                "a task's or guest's counters carry no precise event (:p): its PEBS records would go to the CPU's DS buffer, not the context",
            ),
            ConfigError::LbrUnavailable => f.write_str(
                "this CPU has no last branch records the crate drives (architectural LBR, or the legacy stack of Nehalem to Tiger Lake in record formats 1-7, with architectural perfmon version 2 or later)",
            ),
            ConfigError::LbrFilter => f.write_str(
                "the LBR filter asks for no privilege or no kind of branch, for a filter this CPU lacks, or for call-stack mode with other kinds than near calls and returns",
            ),
            ConfigError::NoCallStack => f.write_str(
                "LBR call-stack mode is not on this CPU (legacy stacks from Haswell on; architectural LBR with CPUID.1CH:EBX[2])",
            ),
            ConfigError::LbrOff => {
                f.write_str("branch records need the LBR: ArchPerfDriver::enable_lbr first")
            }
            ConfigError::LbrBusy => f.write_str(
                "a counter's samples carry the branch records: release it before changing the LBR",
            ),
            ConfigError::BranchesNeedSampling => f.write_str(
                "branch records ride on samples: a counting configuration takes none",
            ),
            ConfigError::BranchesWithPebs => f.write_str(
                "a PEBS counter's samples are its records: no branch records beside them",
            ),
            ConfigError::LbrSnapshotMismatch => f.write_str(
                "the LBR snapshot is of another LBR format, depth or mode than the one enabled",
            ),
        }
    }
}

impl core::error::Error for ConfigError {}

/// A driver error: a refused configuration or a faulting register access.
pub type Error<E> = counter::DriverError<ConfigError, E>;

/// Why the driver could not take the PMU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum InitError<E> {
    /// A driver for this owner is live.
    AlreadyTaken,
    /// The driver of this owner was dropped without `give_back`: the owner
    /// is held for good ([`crate::counter::owner`]); take the PMU for
    /// another owner type.
    OwnerDropped {
        /// The owner type's name.
        owner: &'static str,
    },
    /// A live driver holds this logical processor's PMU ([`ArchPerfPmu`]).
    PmuTaken,
    /// This CPU lacks general counter 0 or 1, which the driver needs
    /// (CPUID.0AH:EAX\[15:8\] counts fewer than two, or leaf 23H's
    /// bitmap lacks one): how many general counters it has.
    TooFewCounters(u8),
    /// Reading or resetting the PMU's registers faulted.
    Access(E),
}

impl<E: fmt::Debug> fmt::Display for InitError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InitError::AlreadyTaken => f.write_str("the PMU's owner is taken by a live driver"),
            InitError::OwnerDropped { owner } => owner::write_dropped(f, owner),
            InitError::PmuTaken => {
                f.write_str("a live driver holds this logical processor's PMU already")
            }
            InitError::TooFewCounters(n) => write!(
                f,
                "this CPU enumerates {n} general counters, not counters 0 and 1, which the driver needs"
            ),
            InitError::Access(e) => write!(f, "reading or resetting the PMU faulted: {e:?}"),
        }
    }
}

impl<E: fmt::Debug> core::error::Error for InitError<E> {}

/// What configures a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CounterConfig {
    /// The event, its filters and privilege; a precise level
    /// ([`EventSpec::precise`], `:p`) makes a sampling configuration PEBS.
    pub event: EventSpec,
    /// Interrupt every N events (`None`: count only); with a precise
    /// event, a PEBS record every N events.
    pub sampling: Option<SampleAfter>,
    /// How the PEBS buffer is used, for a precise event.
    pub pebs: PebsOptions,
    /// Each sample carries the last branch records, frozen by its PMI
    /// ([`Capture::Branches`]; the LBR enabled first with
    /// [`ArchPerfDriver::enable_lbr`]; not with PEBS).
    pub branches: bool,
}

/// How a PEBS counter's buffer is used. The PEBS counters of a logical
/// processor share one DS buffer, one `MSR_PEBS_DATA_CFG` and one
/// `MSR_PEBS_LD_LAT`: a second PEBS counter must ask for the same records
/// per PMI and adaptive groups, and, with load latency, the same threshold
/// ([`ConfigError::PebsOptionsDiffer`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PebsOptions {
    /// The PMI after this many records (the DS interrupt threshold; at
    /// most what the buffer holds; 1, Linux's default, a PMI per record).
    pub records_per_pmi: u32,
    /// Adaptive records (PEBS baseline) carry the memory group.
    pub memory: bool,
    /// Adaptive records carry the GPR group (RFLAGS, the next
    /// instruction's RIP, the general registers).
    pub gprs: bool,
    /// Load latency for this counter: only loads above this many cycles
    /// count (`MSR_PEBS_LD_LAT`; before PEBS baseline also the counter's
    /// `LL_EN_PMCn`), for a load-latency event (a model-specific one, such
    /// as Skylake's `MEM_TRANS_RETIRED.LOAD_LATENCY`, CDH/01H). Adaptive
    /// records then carry the memory group (so every PEBS counter beside
    /// it asks for [`PebsOptions::memory`]).
    pub load_latency: Option<u16>,
}

impl PebsOptions {
    /// A PMI per record, the basic record only (formats 1-3: their fixed
    /// record), no load latency.
    pub const DEFAULT: PebsOptions = PebsOptions {
        records_per_pmi: 1,
        memory: false,
        gprs: false,
        load_latency: None,
    };

    /// The adaptive groups these options ask for.
    const fn data_cfg(&self) -> PebsDataCfg {
        PebsDataCfg::from_bits(0)
            .with_memory(self.memory || self.load_latency.is_some())
            .with_gprs(self.gprs)
    }
}

impl Default for PebsOptions {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl CounterConfig {
    /// Count `event`, without interrupts.
    pub const fn counting(event: EventSpec) -> CounterConfig {
        CounterConfig {
            event,
            sampling: None,
            pebs: PebsOptions::DEFAULT,
            branches: false,
        }
    }

    /// Interrupt every `n` events (with a precise event, a PEBS record
    /// every `n` events).
    pub const fn sampling(mut self, n: SampleAfter) -> CounterConfig {
        self.sampling = Some(n);
        self
    }

    /// The PEBS buffer's options, for a precise event.
    pub const fn pebs(mut self, options: PebsOptions) -> CounterConfig {
        self.pebs = options;
        self
    }

    /// Each sample carries the last branch records
    /// ([`CounterConfig::branches`]).
    pub const fn with_branches(mut self) -> CounterConfig {
        self.branches = true;
        self
    }
}

/// The events a PEBS counter that read `raw` holds toward its next record,
/// for sample-after value `s`: it starts each period at `-(N-1)`
/// ([`SampleAfter::at_residual`] of 1) and takes its record at the event
/// after its overflow, the N-th, when the assist reloads it; so `(raw -
/// (-(N-1)))` modulo the counter's width, 0 to N-1 (more only while a full
/// buffer kept the assist from reloading it). With the records drained,
/// `events = records × N + pebs_residual`.
pub const fn pebs_residual(s: SampleAfter, raw: u64) -> u64 {
    raw.wrapping_sub(s.at_residual(1)) & s.rule().mask()
}

/// The driver of one logical processor's architectural PMU
/// ([`ArchPerfPmu`]), held for owner `O`, owning the MSR backend.
pub struct ArchPerfDriver<'s, O: Owner, M: MsrBackend> {
    msr: M,
    pmu: &'s ArchPerfPmu,
    cpu: detect::ArchPerfCpu,
    /// The counters this CPU has that the driver may use.
    present: CounterSet,
    firmware: CounterSet,
    claimed: CounterSet,
    /// The driver's counters enabled in `GLOBAL_CTRL` (v2+).
    running: CounterSet,
    /// `GLOBAL_CTRL` bits of the firmware's counters, kept in every write.
    firmware_global: CounterSet,
    fixed_ctrl: FixedCtrCtrl,
    /// Open freeze brackets ([`counter::Driver::freeze`]).
    freeze: u8,
    /// Inside a bracket: `GLOBAL_CTRL` was written with the driver's
    /// counters stopped (for a snapshot), or an image change is owed.
    stopped: bool,
    dirty: bool,
    /// Sampling counters halted inside a bracket: they stop with the
    /// bracket's `GLOBAL_CTRL` write, so the overflow a halt must find is
    /// read after it ([`counter::Driver::thaw`]).
    halting: CounterSet,
    /// The DS save area this driver installed ([`ArchPerfDriver::set_pebs_area`]),
    /// published to the PMI state.
    ds: Option<DsArea>,
    /// The counters configured for PEBS, and of those the ones with load
    /// latency (their `LL_EN_PMCn` before PEBS baseline).
    pebs: CounterSet,
    load_latency: CounterSet,
    /// What the PEBS buffer is set up with, while a PEBS counter is
    /// configured: records per PMI and the adaptive groups.
    pebs_buffer: Option<(u32, PebsDataCfg)>,
    /// `MSR_PEBS_DATA_CFG` and `MSR_PEBS_LD_LAT` as this driver last wrote
    /// them (`None`: not since take).
    data_cfg: Option<PebsDataCfg>,
    ld_lat: Option<u16>,
    /// The counters set aside for contexts ([`crate::arch::Switch`]) that
    /// run now: their `GLOBAL_CTRL` bits, kept in every write.
    contexts: CounterSet,
    /// The context switch changed `contexts` or `fixed_ctrl`: owed writes
    /// of `GLOBAL_CTRL` and `FIXED_CTR_CTRL` ([`crate::arch::Switch`]).
    global_owed: bool,
    fixed_owed: bool,
    /// The counters reserved for a pass-through guest
    /// ([`ArchPerfDriver::reserve_guest`]), whether a guest's registers are
    /// loaded on them, and their event selects as last written.
    guest: CounterSet,
    guest_loaded: bool,
    guest_evtsel: [u64; MAX_GENERAL as usize],
    /// The LBR this driver enabled ([`ArchPerfDriver::enable_lbr`]), with
    /// its options, and the `IA32_DEBUGCTL` it found and the one it wrote.
    lbr: Option<EnabledLbr>,
    /// The counters whose samples carry the branch records.
    branch_counters: CounterSet,
    _owner: PhantomData<O>,
}

/// The LBR as a driver enabled it.
#[derive(Clone, Copy, Debug)]
struct EnabledLbr {
    lbr: Lbr,
    options: LbrOptions,
    /// `IA32_DEBUGCTL` as found before the first enable: restored by the
    /// disable.
    found: DebugCtl,
    /// `IA32_DEBUGCTL` as the driver wrote it.
    written: DebugCtl,
}

impl<'s, O: Owner, M: MsrBackend> ArchPerfDriver<'s, O, M> {
    /// Take the PMU of logical processor `pmu` described by `cpu`, for
    /// owner `O`: read every `PERFEVTSELx` and `FIXED_CTR_CTRL` to find the
    /// counters the firmware uses (left alone, see the module
    /// documentation), clear the others' selects, fixed fields,
    /// `GLOBAL_CTRL` bits and status bits, and hand out the claim tokens.
    /// Refused before any register access while a driver of `O` is live
    /// ([`InitError::AlreadyTaken`]) or `pmu` is held
    /// ([`InitError::PmuTaken`]).
    pub fn take(
        mut msr: M,
        cpu: &detect::ArchPerfCpu,
        pmu: &'s ArchPerfPmu,
    ) -> Result<(Self, Counters<O>), InitError<M::Error>> {
        let present = enumeration::counters(cpu);
        let pair = [Counter::general(0), Counter::general(1)];
        if !pair
            .into_iter()
            .all(|c| c.is_some_and(|c| present.contains(c)))
        {
            return Err(InitError::TooFewCounters(cpu.general()));
        }
        match owner::take::<O>() {
            Ok(()) => {}
            Err(owner::Taken::Live) => return Err(InitError::AlreadyTaken),
            Err(owner::Taken::Dropped) => {
                return Err(InitError::OwnerDropped {
                    owner: core::any::type_name::<O>(),
                });
            }
        }
        if !pmu.take() {
            owner::give_back::<O>();
            return Err(InitError::PmuTaken);
        }
        match Self::reset(&mut msr, cpu, present) {
            Ok((firmware, firmware_global, fixed_ctrl)) => {
                pmu.pmi().reset(cpu.version());
                let driver = ArchPerfDriver {
                    msr,
                    pmu,
                    cpu: *cpu,
                    present,
                    firmware,
                    claimed: CounterSet::EMPTY,
                    running: CounterSet::EMPTY,
                    firmware_global,
                    fixed_ctrl,
                    freeze: 0,
                    stopped: false,
                    dirty: false,
                    halting: CounterSet::EMPTY,
                    ds: None,
                    pebs: CounterSet::EMPTY,
                    load_latency: CounterSet::EMPTY,
                    pebs_buffer: None,
                    data_cfg: None,
                    ld_lat: None,
                    contexts: CounterSet::EMPTY,
                    global_owed: false,
                    fixed_owed: false,
                    guest: CounterSet::EMPTY,
                    guest_loaded: false,
                    guest_evtsel: [0; MAX_GENERAL as usize],
                    lbr: None,
                    branch_counters: CounterSet::EMPTY,
                    _owner: PhantomData,
                };
                Ok((driver, Counters::issue(present)))
            }
            Err(e) => {
                pmu.give_back();
                owner::give_back::<O>();
                Err(InitError::Access(e))
            }
        }
    }

    /// Finds the firmware's counters and resets the others: returns the
    /// firmware's counters, their `GLOBAL_CTRL` bits, and the
    /// `FIXED_CTR_CTRL` image left (the firmware's fields).
    #[allow(clippy::type_complexity)]
    fn reset(
        msr: &mut M,
        cpu: &detect::ArchPerfCpu,
        present: CounterSet,
    ) -> Result<(CounterSet, CounterSet, FixedCtrCtrl), M::Error> {
        let mut firmware = CounterSet::EMPTY;
        let mut selects = [0u64; 8];
        for c in present.iter().filter(|c| !c.is_fixed()) {
            if let Some(evtsel) = c.evtsel() {
                let v = msr.read_msr(evtsel)?;
                selects[usize::from(c.number()) % 8] = v;
                if PerfEvtSel::from_bits(v).is_none_or(PerfEvtSel::enable) {
                    firmware = firmware.with(c);
                }
            }
        }
        let has_fixed = present.iter().any(Counter::is_fixed);
        let found = if has_fixed {
            FixedCtrCtrl::from_bits(msr.read_msr(IA32_FIXED_CTR_CTRL)?)
        } else {
            FixedCtrCtrl::default()
        };
        let mut kept = FixedCtrCtrl::default();
        for c in present.iter().filter(|c| c.is_fixed()) {
            let ctl = found.get(c.number());
            if ctl != FixedCtl::OFF {
                firmware = firmware.with(c);
                kept = kept.with(c.number(), ctl);
            }
        }
        for c in present
            .difference(firmware)
            .iter()
            .filter(|c| !c.is_fixed())
        {
            if let (Some(evtsel), true) = (c.evtsel(), selects[usize::from(c.number()) % 8] != 0) {
                msr.write_msr(evtsel, 0)?;
            }
        }
        if has_fixed && kept != found {
            msr.write_msr(IA32_FIXED_CTR_CTRL, kept.bits())?;
        }
        let mut firmware_global = CounterSet::EMPTY;
        if cpu.version() >= 2 {
            let global = CounterSet::from_bits_truncate(msr.read_msr(IA32_PERF_GLOBAL_CTRL)?);
            firmware_global = global.intersection(firmware);
            if global != firmware_global {
                msr.write_msr(IA32_PERF_GLOBAL_CTRL, firmware_global.bits())?;
            }
            msr.write_msr(
                IA32_PERF_GLOBAL_OVF_CTRL,
                present.difference(firmware).bits(),
            )?;
        }
        Ok((firmware, firmware_global, kept))
    }

    /// Give the PMU back with every claim token this driver issued, and get
    /// the backend back: owner `O` and the PMU are free again. Every token
    /// is Unclaimed, so nothing is claimed and nothing runs: no register
    /// access.
    ///
    /// A driver dropped without `give_back` releases every counter it
    /// still claims and frees the PMU, but holds owner `O` for good
    /// ([`crate::counter::owner`]).
    pub fn give_back(self, counters: Counters<O>) -> M {
        let _ = counters;
        self.into_backend(Ending::GivenBack)
    }

    /// Ends the driver (as `how` says) and moves its backend out.
    fn into_backend(self, how: Ending) -> M {
        let mut this = ManuallyDrop::new(self);
        this.end(how);
        // SAFETY: `this` is never dropped (`ManuallyDrop`) or used after
        // this read, so the backend is moved out exactly once. The fields
        // left behind own nothing that needs dropping (a reference, the
        // detection result, sets and images).
        unsafe { core::ptr::read(&this.msr) }
    }

    /// Ends the driver: every counter it still claims released (none when
    /// it is given back with every token; a bracket left open is closed
    /// first), so nothing of it counts or interrupts, and its DS save area
    /// taken back (`IA32_DS_AREA` 0: the processor writes it no more, and
    /// its memory stays the processor's for good); then the PMU and owner
    /// `O` are given back (or `O` held for good, when the driver was
    /// dropped). A refused access (only a model refuses) leaves that
    /// register as it was.
    fn end(&mut self, how: Ending) {
        if !self.contexts.is_empty() {
            // Counters a context switch left running: stopped first.
            self.contexts = CounterSet::EMPTY;
            let _ = self.write_global();
        }
        if !self.claimed.is_empty() {
            self.freeze = 0;
            self.stopped = false;
            for c in self.claimed.iter() {
                // The handle's images are gone with it: release needs only
                // the select's image on version 1, where it disables the
                // counter before zeroing its select anyway, and whether it
                // is a PEBS counter, which the driver knows.
                let p = Programmed {
                    pebs: self.pebs.contains(c).then_some(Precise::Constant),
                    ..ArchPerfmon::UNPROGRAMMED
                };
                let _ = counter::Driver::release(self, TOKEN, c.index(), &p);
            }
        }
        if self.ds.is_some() && self.take_pebs_area().is_err() {
            // SAFETY: withdrawing: no pointer is published.
            unsafe { self.pmu.pmi().publish_ds_area(None) };
        }
        if self.lbr.is_some() && self.disable_lbr().is_err() {
            self.pmu.pmi().set_lbr(None, 0);
        }
        self.pmu.give_back();
        owner::end::<O>(how);
    }

    /// Where this driver counts core cycles (`perf`'s `cycles`: unhalted
    /// core cycles, 3CH/00H): fixed counter 1 where the CPU has it and it
    /// is free (not the firmware's, not claimed), else the first free
    /// general counter where the CPU has the event. `None` when every one
    /// is taken.
    pub fn core_cycles(&self) -> Option<(u8, CounterConfig)> {
        let free = |c: &Counter| {
            self.present.contains(*c) && !self.firmware.contains(*c) && !self.claimed.contains(*c)
        };
        let general = self
            .cpu
            .event_available(ArchEvent::CoreCycles.ebx_bit())
            .then(|| (0..MAX_GENERAL).filter_map(Counter::general).find(free))
            .flatten();
        let c = Counter::fixed(1).filter(free).or(general)?;
        let config = CounterConfig::counting(EventSpec::arch(ArchEvent::CoreCycles));
        Some((c.index(), config))
    }

    /// The MSR backend.
    pub fn msr(&mut self) -> &mut M {
        &mut self.msr
    }

    /// The state shared with the PMI handler.
    pub fn pmi_state(&self) -> &'s PmiState {
        self.pmu.pmi()
    }

    /// The logical processor's PMU this driver was taken from.
    pub fn physical(&self) -> &'s ArchPerfPmu {
        self.pmu
    }

    /// The counters found enabled at take: the firmware's, left alone.
    pub const fn firmware(&self) -> CounterSet {
        self.firmware
    }

    /// The counters claimed through this driver's handles.
    pub const fn claimed(&self) -> CounterSet {
        self.claimed
    }

    /// Whether AnyThread may be set: from version 3, unless
    /// CPUID.0AH:EDX\[15\] deprecates it (SDM Vol. 3B 20.2.3 and 20.2.5;
    /// Linux's `intel_pmu_hw_config` refuses it below version 3).
    fn any_thread(&self) -> bool {
        self.cpu.version() >= 3 && !self.cpu.leaf.any_thread_deprecated()
    }

    /// How this CPU's general counters overflow (fixed counters: the same
    /// rule at their width), for [`SampleAfter::new`]. General and fixed
    /// counters of one width share it; a fixed counter of another width
    /// takes [`ArchPerfDriver::fixed_overflow_rule`].
    pub const fn overflow_rule(&self) -> OverflowRule {
        overflow_rule(self.cpu.leaf.general_width())
    }

    /// How this CPU's fixed counters overflow.
    pub const fn fixed_overflow_rule(&self) -> OverflowRule {
        overflow_rule(self.cpu.leaf.fixed_width())
    }

    /// What detection found.
    pub const fn cpu(&self) -> &detect::ArchPerfCpu {
        &self.cpu
    }

    fn counter(&self, n: u8) -> Result<Counter, ConfigError> {
        let c = Counter::from_index(n).ok_or(ConfigError::NoSuchCounter(n))?;
        if self.present.contains(c) {
            Ok(c)
        } else {
            Err(ConfigError::NotOnThisCpu(Lack::on(
                &self.cpu,
                Missing::Counter(c),
            )))
        }
    }

    /// Whether this CPU (on a hybrid part: this core type) can count `e`
    /// on some counter it has ([`enumeration::check_event`]): refused with
    /// [`ConfigError::NotOnThisCpu`] for an architectural event its CPUID
    /// says it lacks, or a fixed counter's pseudo-encoding whose counter it
    /// lacks. No register access. Configuring checks the same.
    pub fn check(&self, e: &EventSpec) -> Result<(), ConfigError> {
        enumeration::check_event(&self.cpu, e).map_err(ConfigError::NotOnThisCpu)
    }

    fn global(&self) -> bool {
        self.cpu.version() >= 2
    }

    /// Writes `GLOBAL_CTRL`: the driver's running counters (none while a
    /// snapshot is taken) and the firmware's.
    fn write_global(&mut self) -> Result<(), Error<M::Error>> {
        self.msr
            .write_msr(IA32_PERF_GLOBAL_CTRL, self.host_global().bits())
            .map_err(Error::Access)
    }

    /// Counter `c` runs (or not): its `GLOBAL_CTRL` bit (v1: EN).
    fn set_running(&mut self, c: Counter, p: &Programmed, on: bool) -> Result<(), Error<M::Error>> {
        if !self.global() {
            let evtsel = c
                .evtsel()
                .ok_or(Error::Config(ConfigError::NoSuchCounter(c.index())))?;
            let image = p.select.with_enable(on);
            return self
                .msr
                .write_msr(evtsel, image.bits())
                .map_err(Error::Access);
        }
        self.running = if on {
            self.running.with(c)
        } else {
            self.running.without(c)
        };
        if self.freeze > 0 {
            self.dirty = true;
            return Ok(());
        }
        self.write_global()
    }

    fn build_programmed(
        &self,
        c: Counter,
        config: &CounterConfig,
    ) -> Result<Programmed, ConfigError> {
        if self.claimed.contains(c) {
            return Err(ConfigError::CounterClaimed(c.index()));
        }
        if self.firmware.contains(c) {
            return Err(ConfigError::UsedByFirmware(c.index()));
        }
        self.image_of(c, config)
    }

    /// The images of `config` on counter `c`, whether or not it is free.
    fn image_of(&self, c: Counter, config: &CounterConfig) -> Result<Programmed, ConfigError> {
        let rule = if c.is_fixed() {
            self.fixed_overflow_rule()
        } else {
            self.overflow_rule()
        };
        if let Some(s) = config.sampling {
            if !self.global() {
                return Err(ConfigError::NoOverflowStatus);
            }
            if s.rule() != rule {
                return Err(ConfigError::SampleAfterRule);
            }
            if !self.cpu.full_width_write && !c.is_fixed() && s.get() > 1 << 31 {
                return Err(ConfigError::PeriodNeedsFullWidth);
            }
        }
        let e = &config.event;
        if e.any && !self.any_thread() {
            return Err(ConfigError::AnyThreadUnavailable {
                version: self.cpu.version(),
            });
        }
        if c.is_fixed() {
            if !e.counts_on_fixed(c.number()) {
                return Err(ConfigError::NotFixedEvent { fixed: c.number() });
            }
        } else if !e.counts_on_general() {
            return Err(ConfigError::NotGeneralEvent {
                counter: c.number(),
                fixed: e.fixed_counter(),
            });
        } else if let Some(a) = e.architectural()
            && !self.cpu.event_available(a.ebx_bit())
        {
            return Err(ConfigError::NotOnThisCpu(Lack::on(
                &self.cpu,
                Missing::Event(a),
            )));
        }
        if config.branches {
            if config.sampling.is_none() {
                return Err(ConfigError::BranchesNeedSampling);
            }
            if e.precise > 0 {
                return Err(ConfigError::BranchesWithPebs);
            }
            if self.lbr.is_none() {
                return Err(ConfigError::LbrOff);
            }
        }
        let pebs = match Precise::from_level(e.precise) {
            None => None,
            Some(_) if config.sampling.is_none() => {
                return Err(ConfigError::PreciseNeedsSampling);
            }
            Some(precise) => {
                self.check_pebs(c, config, precise)?;
                Some(precise)
            }
        };
        // A PEBS counter's overflow takes the assist, not a PMI (Linux
        // clears INT for it, `intel_pmu_pebs_enable`); with PEBS baseline
        // its records carry the adaptive groups (Adaptive_Record).
        let interrupt = config.sampling.is_some() && pebs.is_none();
        let adaptive = pebs.is_some() && self.cpu.pebs.baseline;
        Ok(Programmed {
            // v2+: EN stays set, `GLOBAL_CTRL` starts and stops; v1: EN is
            // the start.
            select: e
                .evtsel()
                .with_int(interrupt)
                .with_enable(self.global())
                .with_adaptive(adaptive && !c.is_fixed()),
            fixed: FixedCtl::new(e.os, e.usr, interrupt),
            sampling: config.sampling,
            pebs,
            load_latency: pebs.is_some() && config.pebs.load_latency.is_some(),
            branches: config.branches,
        })
    }

    /// The counter's preset: `-N` for a sampling counter, 0 otherwise.
    fn preset(p: &Programmed) -> u64 {
        p.sampling.map_or(0, SampleAfter::preset)
    }

    fn write_counter(&mut self, c: Counter, value: u64) -> Result<(), Error<M::Error>> {
        self.msr
            .write_msr(c.msr(self.cpu.full_width_write), value)
            .map_err(Error::Access)
    }

    /// Writes counter `c`'s control: its `PERFEVTSELx`, or its field of
    /// `FIXED_CTR_CTRL` (cached) with its Adaptive_Record bit `adaptive`
    /// (a general counter's is in `select`).
    fn write_control(
        &mut self,
        c: Counter,
        select: PerfEvtSel,
        fixed: FixedCtl,
        adaptive: bool,
    ) -> Result<(), Error<M::Error>> {
        match c.evtsel() {
            Some(evtsel) => self
                .msr
                .write_msr(evtsel, select.bits())
                .map_err(Error::Access),
            None => {
                self.fixed_ctrl = self
                    .fixed_ctrl
                    .with(c.number(), fixed)
                    .with_adaptive(c.number(), adaptive);
                self.write_fixed_ctrl()
            }
        }
    }

    /// Writes `IA32_FIXED_CTR_CTRL` as cached.
    fn write_fixed_ctrl(&mut self) -> Result<(), Error<M::Error>> {
        self.msr
            .write_msr(IA32_FIXED_CTR_CTRL, self.fixed_ctrl.bits())
            .map_err(Error::Access)
    }

    /// The DS save area installed by this driver.
    pub fn pebs_area(&self) -> Option<&DsArea> {
        self.ds.as_ref()
    }

    /// The counters configured for PEBS.
    pub const fn pebs_counters(&self) -> CounterSet {
        self.pebs
    }

    /// Installs this logical processor's DS save area for PEBS (SDM Vol. 3B
    /// "Debug Store (DS) Mechanism"): the driver owns `area` from now on
    /// (the processor writes records and the PEBS index there behind the
    /// program's back), writes its management area and `IA32_DS_AREA` (1
    /// WRMSR), and publishes it to the PMI handler, which drains it.
    /// Returns the area installed before, if any. PEBS runs only on an area
    /// this driver installed ([`ConfigError::NoPebsArea`]); refused where
    /// PEBS is not usable ([`ConfigError::PebsUnavailable`]) and while a
    /// PEBS counter is configured ([`ConfigError::PebsBusy`]).
    ///
    /// The area's `unsafe` constructor ([`DsArea::new`]) is where the
    /// kernel states that it is mapped at one linear address in every
    /// address space while PEBS runs.
    pub fn set_pebs_area(&mut self, area: DsArea) -> Result<Option<DsArea>, Error<M::Error>> {
        if !self.cpu.pebs.usable() {
            return Err(Error::Config(ConfigError::PebsUnavailable));
        }
        if !self.pebs.is_empty() {
            return Err(Error::Config(ConfigError::PebsBusy));
        }
        let mut area = area;
        // No record yet: a PEBS counter's configuration sets the area up
        // for its records.
        area.reset(8, 0);
        self.msr
            .write_msr(IA32_DS_AREA, area.address())
            .map_err(Error::Access)?;
        // SAFETY: the area is this driver's until `take_pebs_area` or its
        // end withdraws it, which they do on this logical processor (the
        // contract of `ArchPerfPmu::new`).
        unsafe { self.pmu.pmi().publish_ds_area(Some(area.management_ptr())) };
        Ok(self.ds.replace(area))
    }

    /// Takes the DS save area back: refused while a PEBS counter is
    /// configured ([`ConfigError::PebsBusy`]), so no counter can make the
    /// processor write it; withdraws it from the PMI handler and writes
    /// `IA32_DS_AREA` = 0 (1 WRMSR). [`ConfigError::NoPebsArea`] if this
    /// driver installed none.
    pub fn take_pebs_area(&mut self) -> Result<DsArea, Error<M::Error>> {
        if self.ds.is_none() {
            return Err(Error::Config(ConfigError::NoPebsArea));
        }
        if !self.pebs.is_empty() {
            return Err(Error::Config(ConfigError::PebsBusy));
        }
        self.msr.write_msr(IA32_DS_AREA, 0).map_err(Error::Access)?;
        // SAFETY: withdrawing: no pointer is published.
        unsafe { self.pmu.pmi().publish_ds_area(None) };
        self.ds.take().ok_or(Error::Config(ConfigError::NoPebsArea))
    }

    /// Hands the PEBS records in the DS buffer to `f` as samples (as the
    /// PMI handler does at the buffer's threshold: one per PEBS counter a
    /// record is for, one period each, at the record's IP for the
    /// counter's precise level, the record as [`Capture::Pebs`]) and
    /// empties the buffer: the records left below the threshold when the
    /// PEBS counters were halted. Their periods count as found at a halt
    /// ([`PmiState::periods_at_halt`]). Refused while a PEBS counter runs
    /// ([`ConfigError::PebsRunning`]: the handler drains meanwhile); the
    /// handler is kept off the buffer during the drain. No register
    /// access. Returns how many samples were handed over.
    pub fn drain_pebs(
        &mut self,
        mut f: impl FnMut(Sample<Capture>),
    ) -> Result<u64, Error<M::Error>> {
        if self.ds.is_none() {
            return Err(Error::Config(ConfigError::NoPebsArea));
        }
        if !self.running.intersection(self.pebs).is_empty() {
            return Err(Error::Config(ConfigError::PebsRunning));
        }
        let state = self.pmu.pmi();
        state.arm_buffer(false);
        let mut samples = 0;
        state.drain_pebs(true, |s| {
            samples += 1;
            f(s);
        });
        state.arm_buffer(!self.pebs.is_empty());
        Ok(samples)
    }

    /// Where counter `c`'s reset value sits in the DS management area
    /// (its index from 40H): general counter n at n; fixed counter i after
    /// the general counters' fields, 8 of them with record formats up to 4
    /// (Linux's `MAX_PEBS_EVENTS_FMT4`), 32 with format 5 (Linux's PEBS
    /// format 5 patch: "32 general-purpose counters followed by 16
    /// fixed-function counters").
    const fn reset_index(&self, c: Counter) -> usize {
        let general = if self.cpu.pebs.format >= 5 { 32 } else { 8 };
        if c.is_fixed() {
            general + c.number() as usize
        } else {
            c.number() as usize
        }
    }

    /// Whether counter `c` takes PEBS records here: with PEBS baseline
    /// every counter, before it general counters 0-3 (SDM: `PEBS_EN_PMC0`
    /// to `PEBS_EN_PMC3`).
    const fn pebs_capable(&self, c: Counter) -> bool {
        self.cpu.pebs.baseline || (!c.is_fixed() && c.number() < 4)
    }

    /// The checks a PEBS configuration of counter `c` must pass, before
    /// any register is written.
    fn check_pebs(
        &self,
        c: Counter,
        config: &CounterConfig,
        precise: Precise,
    ) -> Result<(), ConfigError> {
        let pebs = self.cpu.pebs;
        if !pebs.usable() {
            return Err(ConfigError::PebsUnavailable);
        }
        if self.ds.is_none() {
            return Err(ConfigError::NoPebsArea);
        }
        if !self.pebs_capable(c) {
            return Err(ConfigError::NotPebsCounter(c.index()));
        }
        if config.sampling.is_none_or(|s| s.get() < 2) {
            return Err(ConfigError::PebsPeriod);
        }
        let e = &config.event;
        if !pebs.baseline && (e.cmask != 0 || e.inv || e.edge || e.any) {
            return Err(ConfigError::PebsFilter);
        }
        if precise.eventing() && pebs.format < 2 {
            return Err(ConfigError::NoEventingIp {
                format: pebs.format,
            });
        }
        if pebs.format < 3 && !self.pebs.is_empty() {
            return Err(ConfigError::PebsOneCounter {
                format: pebs.format,
            });
        }
        let options = config.pebs;
        if self
            .pebs_buffer
            .is_some_and(|b| b != (options.records_per_pmi, options.data_cfg()))
        {
            return Err(ConfigError::PebsOptionsDiffer);
        }
        if let Some(t) = options.load_latency {
            if c.is_fixed() || !(pebs.baseline || c.number() < 4) {
                return Err(ConfigError::NoLoadLatency(c.index()));
            }
            if !self.load_latency.is_empty() && self.ld_lat != Some(t) {
                return Err(ConfigError::PebsOptionsDiffer);
            }
        }
        Ok(())
    }

    /// Configures PEBS counter `c` as `p` says (checked): the buffer set up
    /// for the records if it is the first PEBS counter, then the preset,
    /// `MSR_PEBS_DATA_CFG` and `MSR_PEBS_LD_LAT` where they change,
    /// `IA32_PEBS_ENABLE`, the control; the counter's reset value in the DS
    /// area, and the handler told.
    fn program_pebs(
        &mut self,
        c: Counter,
        config: &CounterConfig,
        p: &Programmed,
    ) -> Result<(), Error<M::Error>> {
        let (Some(precise), Some(s)) = (p.pebs, p.sampling) else {
            return Err(Error::Config(ConfigError::PreciseNeedsSampling));
        };
        let options = config.pebs;
        let pebs = self.cpu.pebs;
        let cfg = options.data_cfg();
        let layout = RecordLayout::new(pebs.format, pebs.baseline.then_some(cfg))
            .ok_or(Error::Config(ConfigError::PebsUnavailable))?;
        let first = self.pebs.is_empty();
        let index = self.reset_index(c);
        let preset = s.at_residual(1);
        let area = self
            .ds
            .as_mut()
            .ok_or(Error::Config(ConfigError::NoPebsArea))?;
        if first {
            // No PEBS counter is configured: the handler is not draining
            // (the buffer's bit is disarmed), so the area and the layout
            // change under nobody.
            area.reset(layout.bytes(), options.records_per_pmi);
            self.pmu.pmi().set_layout(Some(layout));
        }
        area.set_counter_reset(index, preset);
        self.pmu
            .pmi()
            .set_sampling(c, None, self.cpu.full_width_write);
        self.write_counter(c, preset)?;
        if first && pebs.baseline && self.data_cfg != Some(cfg) {
            self.msr
                .write_msr(MSR_PEBS_DATA_CFG, cfg.bits())
                .map_err(Error::Access)?;
            self.data_cfg = Some(cfg);
        }
        if let Some(t) = options.load_latency
            && self.ld_lat != Some(t)
        {
            self.msr
                .write_msr(
                    MSR_PEBS_LD_LAT,
                    PebsLdLat::from_bits(0).with_threshold(t).bits(),
                )
                .map_err(Error::Access)?;
            self.ld_lat = Some(t);
        }
        self.pebs = self.pebs.with(c);
        if p.load_latency {
            self.load_latency = self.load_latency.with(c);
        }
        self.pebs_buffer = Some((options.records_per_pmi, cfg));
        self.write_pebs_enable()?;
        self.write_control(c, p.select, p.fixed, pebs.baseline)?;
        self.claimed = self.claimed.with(c);
        self.pmu.pmi().set_pebs(c, Some(precise));
        Ok(())
    }

    /// Writes `IA32_PEBS_ENABLE` for the PEBS counters configured.
    fn write_pebs_enable(&mut self) -> Result<(), Error<M::Error>> {
        let image = PebsEnable::new(self.pebs, self.load_latency, self.cpu.pebs.baseline);
        self.msr
            .write_msr(IA32_PEBS_ENABLE, image.bits())
            .map_err(Error::Access)
    }
}

/// A driver dropped without [`ArchPerfDriver::give_back`] releases every
/// counter it still claims and frees the PMU; its owner stays held for good
/// ([`crate::counter::owner`]).
impl<O: Owner, M: MsrBackend> Drop for ArchPerfDriver<'_, O, M> {
    fn drop(&mut self) {
        self.end(Ending::Dropped);
    }
}

impl<O: Owner, M: MsrBackend> Sealed for ArchPerfDriver<'_, O, M> {}

impl<O: Owner, M: MsrBackend> counter::DriverOf<ArchPerfmon, O> for ArchPerfDriver<'_, O, M> {}

impl<O: Owner, M: MsrBackend> counter::Driver<ArchPerfmon> for ArchPerfDriver<'_, O, M> {
    type Owner = O;
    type Config = CounterConfig;
    type Error = Error<M::Error>;

    fn program(
        &mut self,
        _: Token,
        n: u8,
        config: &CounterConfig,
    ) -> Result<Programmed, Self::Error> {
        let c = self.counter(n)?;
        let p = self.build_programmed(c, config)?;
        if p.pebs.is_some() {
            self.program_pebs(c, config, &p)?;
            return Ok(p);
        }
        self.pmu.pmi().set_branches(c, p.branches);
        if p.branches {
            self.branch_counters = self.branch_counters.with(c);
        }
        self.pmu
            .pmi()
            .set_sampling(c, p.sampling, self.cpu.full_width_write);
        self.write_counter(c, Self::preset(&p))?;
        self.write_control(c, p.select, p.fixed, false)?;
        self.claimed = self.claimed.with(c);
        Ok(p)
    }

    fn start(&mut self, _: Token, n: u8, p: &Programmed) -> Result<(), Self::Error> {
        let c = self.counter(n)?;
        // Halted and started again in one bracket: it never stopped.
        self.halting = self.halting.without(c);
        // A PEBS counter is the buffer's, armed while it is configured.
        if p.sampling.is_some() && p.pebs.is_none() {
            self.pmu.pmi().arm(c, true);
        }
        self.set_running(c, p, true)
    }

    fn stop(&mut self, _: Token, n: u8, p: &Programmed) -> Result<(), Self::Error> {
        let c = self.counter(n)?;
        self.pmu.pmi().arm(c, false);
        self.set_running(c, p, false)?;
        // A PEBS counter owes no period a halt must find: its periods are
        // its records, drained by the handler or `drain_pebs`, and what it
        // holds is its residual (`pebs_residual`).
        let (Some(s), None) = (p.sampling, p.pebs) else {
            return Ok(());
        };
        if self.freeze > 0 {
            // Inside a bracket the counter runs on until the thaw's
            // `GLOBAL_CTRL` write: an overflow before it would escape a
            // read now, so the thaw reads it (same accesses, later).
            self.halting = self.halting.with(c);
            return Ok(());
        }
        self.account_halt(c, s)
    }

    fn cascade(&mut self, _: Token, n: u8, _from: u8, _p: &Programmed) -> Result<(), Self::Error> {
        Err(Error::Config(ConfigError::NoSuchCounter(n)))
    }

    fn overflow_rule(&self, n: u8) -> Option<crate::sampling::OverflowRule> {
        let c = Counter::from_index(n).filter(|c| self.present.contains(*c))?;
        Some(if c.is_fixed() {
            self.fixed_overflow_rule()
        } else {
            ArchPerfDriver::overflow_rule(self)
        })
    }

    fn read(&mut self, _: Token, n: u8, _p: &Programmed) -> Result<u64, Self::Error> {
        let c = self.counter(n)?;
        if self.freeze > 0 && !self.stopped && self.global() {
            // A read inside a bracket is part of a snapshot: stop the
            // driver's counters once, for every read up to the thaw.
            self.stopped = true;
            self.write_global()?;
        }
        self.msr.rdpmc(c.rdpmc().ecx()).map_err(Error::Access)
    }

    fn release(&mut self, _: Token, n: u8, p: &Programmed) -> Result<(), Self::Error> {
        let c = self.counter(n)?;
        self.halting = self.halting.without(c);
        self.pmu.pmi().arm(c, false);
        if self.running.contains(c) {
            self.set_running(c, p, false)?;
        }
        if p.pebs.is_some() || self.pebs.contains(c) {
            // No record of it from now on; records left in the buffer
            // are drained with the next PEBS interrupt or `drain_pebs`
            // while another PEBS counter is configured, and dropped with
            // the last one.
            self.pmu.pmi().set_pebs(c, None);
            self.pebs = self.pebs.without(c);
            self.load_latency = self.load_latency.without(c);
            self.write_pebs_enable()?;
            let index = self.reset_index(c);
            if let Some(area) = self.ds.as_mut() {
                area.set_counter_reset(index, 0);
            }
            if self.pebs.is_empty() {
                self.pebs_buffer = None;
                self.pmu.pmi().set_layout(None);
            }
        }
        self.write_control(c, PerfEvtSel::new(0, 0), FixedCtl::OFF, false)?;
        self.write_counter(c, 0)?;
        self.pmu
            .pmi()
            .set_sampling(c, None, self.cpu.full_width_write);
        self.pmu.pmi().set_branches(c, false);
        self.branch_counters = self.branch_counters.without(c);
        self.claimed = self.claimed.without(c);
        Ok(())
    }

    /// Opens a bracket: start and stop only change the driver's
    /// `GLOBAL_CTRL` image, a read stops the driver's counters (once), and
    /// the outermost [`counter::Driver::thaw`] writes `GLOBAL_CTRL` once, so
    /// a group starts and stops at one instant (SDM Vol. 3B: `GLOBAL_CTRL`
    /// enables all counters with one write). v1 has no `GLOBAL_CTRL`: the
    /// bracket does nothing there.
    fn freeze(&mut self, _: Token) -> Result<(), Self::Error> {
        if self.global() {
            self.freeze = self.freeze.saturating_add(1);
        }
        Ok(())
    }

    fn thaw(&mut self, _: Token) -> Result<(), Self::Error> {
        if self.freeze > 0 {
            self.freeze -= 1;
            if self.freeze > 0 {
                return Ok(());
            }
            if self.dirty || self.stopped {
                self.stopped = false;
                self.dirty = false;
                self.write_global()?;
            }
        }
        // The sampling counters halted inside the bracket stopped with the
        // write above: what they owe now is final (a failed access leaves
        // the rest for the next thaw).
        for c in self.halting.iter() {
            let rule = if c.is_fixed() {
                self.fixed_overflow_rule()
            } else {
                self.overflow_rule()
            };
            // Its sample-after value, as configured (so accepted then).
            if let Ok(s) = SampleAfter::new(self.pmu.pmi().period(c), rule) {
                self.account_halt(c, s)?;
            }
            self.halting = self.halting.without(c);
        }
        Ok(())
    }
}

impl<O: Owner, M: MsrBackend> ArchPerfDriver<'_, O, M> {
    /// A halted sampling counter `c` (disarmed and stopped) whose overflow
    /// the halt cancelled (the handler now finds it disarmed): its periods
    /// are accounted here, the counter put at the same point of its next
    /// period and its status bit acknowledged. 1 RDPMC (+2 WRMSR).
    fn account_halt(&mut self, c: Counter, s: SampleAfter) -> Result<(), Error<M::Error>> {
        let raw = self.msr.rdpmc(c.rdpmc().ecx()).map_err(Error::Access)?;
        let (owed, residual) = s.split(raw);
        if owed > 0 {
            self.pmu.pmi().add_halt_periods(c, owed);
            self.write_counter(c, s.at_residual(residual))?;
            if self.global() {
                self.msr
                    .write_msr(IA32_PERF_GLOBAL_OVF_CTRL, CounterSet::EMPTY.with(c).bits())
                    .map_err(Error::Access)?;
            }
        }
        Ok(())
    }
}

mod lbr;
mod switch;
mod world;
pub use world::GuestRegisters;

#[cfg(test)]
mod tests;

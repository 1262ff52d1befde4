//! The AMD core PMU's driver: typestate counters ([`crate::counter`]) over
//! the core counters (`PERF_CTLn`/`PERF_CTRn`, or the legacy
//! `PERF_LEGACY_CTLn`/`PERF_LEGACY_CTRn` without PerfCtrExtCore), started and
//! stopped through `PerfCntrGlobalCtl` with PerfMonV2 and through each
//! counter's `EN` before it (AMD64 APM Vol. 2 13.2).
//!
//! # MSR traffic per operation
//!
//! Each handle caches its image and the driver caches `PerfCntrGlobalCtl`,
//! so no operation reads back a register the driver wrote (counted with
//! [`crate::access::Recording`] in the tests):
//!
//! | operation | RDMSR | WRMSR | RDPMC | accesses |
//! |---|---|---|---|---|
//! | configure | 0 | 2 | 0 | the counter preset; `PERF_CTLn` (with `EN` on PerfMonV2, where the counter counts only once its `PerfCntrGlobalCtl` bit is set; without it before) |
//! | enable / resume | 0 | 1 | 0 | `PerfCntrGlobalCtl` with the counter's bit (before PerfMonV2: `PERF_CTLn` with `EN`) |
//! | halt, counting counter | 0 | 1 | 0 | `PerfCntrGlobalCtl` without it (before PerfMonV2: `EN` clear) |
//! | halt, sampling counter | 0 | 1 (+1, +2 with PerfMonV2) | 1 | as above; RDPMC to find an overflow whose PMI the halt cancelled, then the counter rewritten (and its status bit acknowledged) |
//! | read | 0 | 0 | 1 | RDPMC |
//! | release | 0 | 2 (+1) | 0 (+1) | `PERF_CTLn` = 0, which stops it; a sampling counter then read, for a PMI its overflow may have in flight ([`super::pmi`]); the counter 0; with PerfMonV2 a running counter's `PerfCntrGlobalCtl` bit cleared |
//! | group start or stop ([`crate::counter::Group`]) | 0 | PerfMonV2: 1; before: 1 per member | 0 (stop: 1 per sampling member) | PerfMonV2: one `PerfCntrGlobalCtl` write, every member at one instant; before it: each member's `EN`, back to back (not one instant: the legacy counters have no global enable) |
//! | group read | 0 | PerfMonV2: 2 | K | PerfMonV2: `PerfCntrGlobalCtl` stopped, K RDPMCs, restored (one snapshot); before it K RDPMCs, skewed by one another |
//! | PMI | PerfMonV2: 1 | 1 per overflowed counter (+1 PerfMonV2) | legacy: 1 per armed counter; PerfMonV2: 1 per overflowed counter | [`super::pmi`] |
//!
//! # Counters the firmware uses
//!
//! At take the driver reads every counter's control; a counter found
//! enabled (`EN`, Linux's `check_hw_exists` test) is reported
//! ([`AmdDriver::firmware`]) and left alone: its registers are never
//! written, its `PerfCntrGlobalCtl` and status bits are kept, and
//! configuring it is refused ([`ConfigError::UsedByFirmware`]).
//!
//! # Host and guest
//!
//! An event's host/guest filter ([`EventSpec::host_only`],
//! [`EventSpec::guest_only`], `perf`'s `:H` and `:G`) programs HostOnly or
//! GuestOnly (`PERF_CTL` bits 41 and 40), which act while SVM is enabled:
//! a hypervisor counts its own code apart from its guests'.
//!
//! # Examples
//!
//! (On a register-level model: a doc test with the `model` feature, ignored without it.)
//!
#![cfg_attr(feature = "model", doc = "```")]
#![cfg_attr(not(feature = "model"), doc = "```ignore")]
//! use pmu::arch::amd::driver::{AmdDriver, CounterConfig, Counters};
//! use pmu::arch::amd::{AmdPmu, EventSpec};
//! use pmu::model::amd::{AmdModel, Config, Event};
//!
//! // SAFETY: the one value for this logical processor (the model's).
//! static CPU0: AmdPmu = unsafe { AmdPmu::new() };
//! pmu::owner!(Cpu0);
//! let model = AmdModel::new(Config::zen4());
//! let cpu = pmu::detect::detect(&model, &mut model.clone())?.usable_amd().unwrap();
//! let (mut pmu, c) = AmdDriver::<Cpu0, _>::take(model, &cpu, &CPU0)?;
//! let instructions: EventSpec = "instructions".parse()?;
//! let c0 = c.c0.configure(&mut pmu, &CounterConfig::counting(instructions))?.enable(&mut pmu)?;
//! pmu.msr().inject(Event::new(0xC0, 0x00, 1000));
//! assert_eq!(c0.read(&mut pmu)?, 1000);
//! let c0 = c0.halt(&mut pmu)?.release(&mut pmu)?;
//! let _model = pmu.give_back(Counters { c0, ..c });
//! # Ok::<(), Box<dyn core::error::Error>>(())
//! ```

use core::fmt;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;

use super::events::{EventMap, EventSpec, HardwareEvent};
use super::msrs::{Counter, CounterSet, LEGACY_COUNTERS, MAX_COUNTERS, PerfCtl};
use super::msrs::{PERF_CNTR_GLOBAL_CTL, PERF_CNTR_GLOBAL_STATUS_CLR};
use super::physical::AmdPmu;
use super::pmi::{PmiState, overflow_rule};
use crate::access::{MsrBackend, MsrOps};
use crate::counter::owner::{self, Ending};
use crate::counter::state::Unclaimed;
use crate::counter::{self, Arch, Owner, OwnerId, StateTag};
use crate::detect::{self, CounterProbe};
use crate::sampling::{OverflowRule, SampleAfter};
use crate::sealed::{Sealed, TOKEN, Token};

/// The AMD core PMU, as a type parameter of [`counter::Handle`].
#[derive(Debug)]
pub enum AmdCore {}

/// A counter handle of the AMD core PMU: counter `N` (0-5) of the PMU
/// owned by `O`, in state `S`.
pub type AmdHandle<O, const N: u8, S> = counter::Handle<AmdCore, O, N, S>;

/// What a claimed counter remembers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Programmed {
    ctl: PerfCtl,
    sampling: Option<SampleAfter>,
}

impl Programmed {
    /// The `PERF_CTLn` image the counter runs with (`EN` set on
    /// PerfMonV2, where `PerfCntrGlobalCtl` starts and stops it; clear
    /// before it, where `EN` does).
    pub const fn ctl(&self) -> PerfCtl {
        self.ctl
    }

    /// The sample-after value, for a sampling counter.
    pub const fn sampling(&self) -> Option<SampleAfter> {
        self.sampling
    }
}

impl Sealed for AmdCore {}

impl Arch for AmdCore {
    const NAME: &'static str = "AMD core PMU";
    const COUNTERS: u8 = MAX_COUNTERS;
    type Programmed = Programmed;
    const UNPROGRAMMED: Programmed = Programmed {
        ctl: PerfCtl::new(0, 0),
        sampling: None,
    };

    /// Never: the AMD core PMU has no cascading.
    fn can_cascade(_from: u8, _to: u8) -> bool {
        false
    }
}

/// The claim tokens of the PMU owned by `O`, handed out once by
/// [`AmdDriver::take`]: counters 0-3 always (every AMD core PMU has the
/// four legacy ones), 4 and 5 where the part has them.
#[derive(Debug)]
#[allow(missing_docs)]
pub struct Counters<O: Owner> {
    pub c0: AmdHandle<O, 0, Unclaimed>,
    pub c1: AmdHandle<O, 1, Unclaimed>,
    pub c2: AmdHandle<O, 2, Unclaimed>,
    pub c3: AmdHandle<O, 3, Unclaimed>,
    pub c4: Option<AmdHandle<O, 4, Unclaimed>>,
    pub c5: Option<AmdHandle<O, 5, Unclaimed>>,
}

/// The run-time handles of a driver, by counter ([`Counters::erase_all`]).
pub type Handles = [Option<counter::AnyHandle<AmdCore>>; MAX_COUNTERS as usize];

impl<O: Owner> Counters<O> {
    fn issue(present: CounterSet) -> Counters<O> {
        fn token<O: Owner, const N: u8>(present: CounterSet) -> Option<AmdHandle<O, N, Unclaimed>> {
            Counter::new(N)
                .filter(|c| present.contains(*c))
                .map(|_| counter::Handle::token())
        }
        Counters {
            c0: counter::Handle::token(),
            c1: counter::Handle::token(),
            c2: counter::Handle::token(),
            c3: counter::Handle::token(),
            c4: token(present),
            c5: token(present),
        }
    }

    /// The counters these tokens stand for.
    pub fn present(&self) -> CounterSet {
        let n = LEGACY_COUNTERS + u8::from(self.c4.is_some()) + u8::from(self.c5.is_some());
        CounterSet::first(n)
    }

    /// Every token as a run-time handle, by counter.
    pub fn erase_all(self) -> Handles {
        [
            Some(self.c0.erase()),
            Some(self.c1.erase()),
            Some(self.c2.erase()),
            Some(self.c3.erase()),
            self.c4.map(counter::Handle::erase),
            self.c5.map(counter::Handle::erase),
        ]
    }

    /// The tokens back from run-time handles ([`Counters::erase_all`]'s
    /// form, after release): each Unclaimed, issued for `O`, at its place;
    /// otherwise they come back unchanged.
    #[allow(clippy::result_large_err, reason = "the handles come back by value")]
    pub fn from_erased(all: Handles) -> Result<Counters<O>, Handles> {
        let mut present = CounterSet::EMPTY;
        let mut whole = all[..usize::from(LEGACY_COUNTERS)]
            .iter()
            .all(Option::is_some)
            && (all[5].is_none() || all[4].is_some());
        for (n, h) in (0..MAX_COUNTERS).zip(all.iter()) {
            if let (Some(h), Some(c)) = (h, Counter::new(n)) {
                whole &= h.owner() == OwnerId::of::<O>()
                    && h.index() == n
                    && h.state() == StateTag::Unclaimed;
                present = present.with(c);
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
    /// No counter has this number on this CPU.
    NoSuchCounter(u8),
    /// The counter is claimed already (only a hand-built
    /// [`crate::counter::AnyHandle`] can ask).
    CounterClaimed(u8),
    /// The firmware uses the counter (found enabled at take).
    UsedByFirmware(u8),
    /// A `perf` generic event that this part's map has no entry for
    /// (`stalled-cycles-backend` from Zen 2, `ref-cycles` before Zen 4).
    Unmapped {
        /// Its `perf` name.
        event: &'static str,
        /// The part's map (Linux's name).
        map: &'static str,
    },
    /// An event that can count more than 15 a cycle on a Zen core (event
    /// 003H, retired SSE/AVX FLOPs), which needs an even/odd counter pair,
    /// the odd one programmed with the merge event FFFH (Linux's
    /// `amd_is_pair_event_code`); the driver does not pair counters.
    PairedEvent {
        /// The event select.
        select: u16,
    },
    /// The sample-after value was checked against another counter rule
    /// (use [`AmdDriver::overflow_rule`]).
    SampleAfterRule,
    /// The pass-through world switch starts and stops a guest's counters
    /// through `PerfCntrGlobalCtl` and restores its overflow status
    /// through `PerfCntrGlobalStatusSet`, which PerfMonV2 introduced
    /// (CPUID 8000_0022H:EAX\[0\]; KVM's mediated vPMU requires it too).
    GuestNeedsPerfMonV2,
    /// Counters are reserved for a guest already, a guest is loaded (or
    /// none is, for an exit), or no counter is reserved for one.
    GuestState,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::NoSuchCounter(n) => write!(f, "this CPU has no counter {n}"),
            ConfigError::CounterClaimed(n) => write!(f, "counter {n} is claimed"),
            ConfigError::UsedByFirmware(n) => write!(
                f,
                "counter {n} was found enabled at take: the firmware uses it, so the driver leaves it alone"
            ),
            ConfigError::Unmapped { event, map } => write!(
                f,
                "perf's `{event}` has no event on this part ({map} has no entry for it): give an encoding as event=0x..,umask=0x.."
            ),
            ConfigError::PairedEvent { select } => write!(
                f,
                "event {select:#05x} can count more than 15 a cycle on a Zen core and needs an even/odd counter pair with the merge event 0xfff on the odd one, which the driver does not program"
            ),
            ConfigError::SampleAfterRule => f.write_str(
                "the sample-after value was checked against another counter rule: use AmdDriver::overflow_rule",
            ),
            ConfigError::GuestNeedsPerfMonV2 => f.write_str(
                "the pass-through world switch needs PerfMonV2 (PerfCntrGlobalCtl to start and stop a guest's counters, PerfCntrGlobalStatusSet to restore its overflow status)",
            ),
            ConfigError::GuestState => f.write_str(
                "counters reserved for a guest already, a guest loaded (or none, for an exit), or no counter reserved for a guest",
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
    /// A live driver holds this logical processor's PMU ([`AmdPmu`]).
    PmuTaken,
    /// Detection's probe found the counters unusable (`counters read 0`
    /// under QEMU's TCG and behind a hypervisor that exposes no PMU; every
    /// counter enabled by the firmware; no RDMSR/WRMSR).
    NotUsable(CounterProbe),
    /// Fewer than four counters (CPUID 8000_0022H:EBX\[3:0\]).
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
            InitError::NotUsable(probe) => write!(f, "the AMD core PMU is not usable: {probe}"),
            InitError::TooFewCounters(n) => write!(
                f,
                "CPUID 8000_0022H reports {n} core counters; the driver needs at least 4"
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
    /// The event, its filters, privilege and host/guest mode.
    pub event: EventSpec,
    /// Interrupt every N events (`None`: count only).
    pub sampling: Option<SampleAfter>,
}

impl CounterConfig {
    /// Count `event`, without interrupts.
    pub const fn counting(event: EventSpec) -> CounterConfig {
        CounterConfig {
            event,
            sampling: None,
        }
    }

    /// Interrupt every `n` events.
    pub const fn sampling(mut self, n: SampleAfter) -> CounterConfig {
        self.sampling = Some(n);
        self
    }
}

/// The driver of one logical processor's AMD core PMU ([`AmdPmu`]), held
/// for owner `O`, owning the MSR backend.
pub struct AmdDriver<'s, O: Owner, M: MsrBackend> {
    msr: M,
    pmu: &'s AmdPmu,
    cpu: detect::AmdCpu,
    map: EventMap,
    /// PerfCtrExtCore: the extended addresses.
    extended: bool,
    /// PerfMonV2: `PerfCntrGlobalCtl` starts and stops.
    v2: bool,
    /// The counters this CPU has that the driver may use.
    present: CounterSet,
    firmware: CounterSet,
    claimed: CounterSet,
    /// The driver's counters enabled in `PerfCntrGlobalCtl` (PerfMonV2).
    running: CounterSet,
    /// `PerfCntrGlobalCtl` bits of the firmware's counters, kept in every
    /// write.
    firmware_global: CounterSet,
    /// Open freeze brackets ([`counter::Driver::freeze`]).
    freeze: u8,
    /// Inside a bracket: `PerfCntrGlobalCtl` was written with the driver's
    /// counters stopped (for a snapshot), or an image change is owed.
    stopped: bool,
    dirty: bool,
    /// Sampling counters halted inside a bracket: they stop with the
    /// bracket's `PerfCntrGlobalCtl` write, so the overflow a halt must
    /// find is read after it ([`counter::Driver::thaw`]).
    halting: CounterSet,
    /// The counters set aside for contexts ([`crate::arch::Switch`]) that
    /// run now (PerfMonV2: their `PerfCntrGlobalCtl` bits, kept in every
    /// write), and whether the context switch owes that register a write.
    contexts: CounterSet,
    global_owed: bool,
    /// The counters reserved for a pass-through guest
    /// ([`AmdDriver::reserve_guest`]), whether a guest's registers are
    /// loaded on them, and their controls as last written.
    guest: CounterSet,
    guest_loaded: bool,
    guest_ctl: [u64; MAX_COUNTERS as usize],
    _owner: PhantomData<O>,
}

impl<'s, O: Owner, M: MsrBackend> AmdDriver<'s, O, M> {
    /// Take the PMU of logical processor `pmu` described by `cpu`, for
    /// owner `O`: read every counter's control to find the counters the
    /// firmware uses (left alone, see the module documentation), clear the
    /// others' controls and, with PerfMonV2, their `PerfCntrGlobalCtl` and
    /// status bits, and hand out the claim tokens. Refused before any
    /// register access where detection's probe found the counters
    /// unusable ([`InitError::NotUsable`]), while a driver of `O` is live
    /// ([`InitError::AlreadyTaken`]) or `pmu` is held
    /// ([`InitError::PmuTaken`]).
    pub fn take(
        mut msr: M,
        cpu: &detect::AmdCpu,
        pmu: &'s AmdPmu,
    ) -> Result<(Self, Counters<O>), InitError<M::Error>> {
        if !cpu.usable() {
            return Err(InitError::NotUsable(cpu.probe));
        }
        let counters = cpu.counters();
        if counters < LEGACY_COUNTERS {
            return Err(InitError::TooFewCounters(counters));
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
        // Without PerfCtrExtCore only the four legacy counters exist.
        let extended = cpu.perf_ctr_ext_core || cpu.perfmon_v2;
        let present = CounterSet::first(if extended { counters } else { LEGACY_COUNTERS });
        match Self::reset(&mut msr, cpu.perfmon_v2, extended, present) {
            Ok((firmware, firmware_global)) => {
                pmu.pmi().reset(cpu.perfmon_v2);
                let driver = AmdDriver {
                    msr,
                    pmu,
                    cpu: *cpu,
                    map: EventMap::for_cpu(cpu),
                    extended,
                    v2: cpu.perfmon_v2,
                    present,
                    firmware,
                    claimed: CounterSet::EMPTY,
                    running: CounterSet::EMPTY,
                    firmware_global,
                    freeze: 0,
                    stopped: false,
                    dirty: false,
                    halting: CounterSet::EMPTY,
                    contexts: CounterSet::EMPTY,
                    global_owed: false,
                    guest: CounterSet::EMPTY,
                    guest_loaded: false,
                    guest_ctl: [0; MAX_COUNTERS as usize],
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
    /// firmware's counters and their `PerfCntrGlobalCtl` bits.
    fn reset(
        msr: &mut M,
        v2: bool,
        extended: bool,
        present: CounterSet,
    ) -> Result<(CounterSet, CounterSet), M::Error> {
        let mut firmware = CounterSet::EMPTY;
        for c in present.iter() {
            let ctl = PerfCtl::from_bits(msr.read_msr(c.ctl(extended))?);
            if ctl.enable() {
                firmware = firmware.with(c);
            } else if ctl.bits() != 0 {
                msr.write_msr(c.ctl(extended), 0)?;
            }
        }
        let mut firmware_global = CounterSet::EMPTY;
        if v2 {
            let global = CounterSet::from_bits_truncate(msr.read_msr(PERF_CNTR_GLOBAL_CTL)?);
            firmware_global = global.intersection(firmware);
            if global != firmware_global {
                msr.write_msr(PERF_CNTR_GLOBAL_CTL, firmware_global.bits())?;
            }
            msr.write_msr(
                PERF_CNTR_GLOBAL_STATUS_CLR,
                present.difference(firmware).bits(),
            )?;
        }
        Ok((firmware, firmware_global))
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
        // detection result, sets).
        unsafe { core::ptr::read(&this.msr) }
    }

    /// Ends the driver: every counter it still claims released, so nothing
    /// of it counts or interrupts; then the PMU and owner `O` are given
    /// back (or `O` held for good, when the driver was dropped). A refused
    /// access (only a model refuses) leaves that register as it was.
    fn end(&mut self, how: Ending) {
        if !self.contexts.is_empty() {
            // Counters a context switch left running: stopped first
            // (before PerfMonV2 their release clears their EN).
            self.contexts = CounterSet::EMPTY;
            if self.v2 {
                let _ = self.write_global();
            }
        }
        if !self.claimed.is_empty() {
            self.freeze = 0;
            self.stopped = false;
            for c in self.claimed.iter() {
                // The handle's image is gone with it: release needs the
                // sampling state, which the PMI state keeps.
                let p = Programmed {
                    ctl: PerfCtl::new(0, 0),
                    sampling: SampleAfter::new(self.pmu.pmi().period(c), self.overflow_rule()).ok(),
                };
                let _ = counter::Driver::release(self, TOKEN, c.index(), &p);
            }
        }
        self.pmu.give_back();
        owner::end::<O>(how);
    }

    /// Where this driver counts core cycles (`perf`'s `cycles`, event
    /// 76H): the first free counter (not the firmware's, not claimed).
    /// `None` when every one is taken.
    pub fn core_cycles(&self) -> Option<(u8, CounterConfig)> {
        let c = self
            .present
            .difference(self.firmware)
            .difference(self.claimed)
            .iter()
            .next()?;
        let config = CounterConfig::counting(EventSpec::hardware(HardwareEvent::Cycles));
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
    pub fn physical(&self) -> &'s AmdPmu {
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

    /// The counters this CPU has that the driver drives.
    pub const fn present(&self) -> CounterSet {
        self.present
    }

    /// How the counters overflow (48 bits, the PMI with the overflow), for
    /// [`SampleAfter::new`].
    pub const fn overflow_rule(&self) -> OverflowRule {
        overflow_rule()
    }

    /// What detection found.
    pub const fn cpu(&self) -> &detect::AmdCpu {
        &self.cpu
    }

    /// Linux's event map this part takes (what the `perf` names resolve
    /// to).
    pub const fn event_map(&self) -> EventMap {
        self.map
    }

    fn counter(&self, n: u8) -> Result<Counter, ConfigError> {
        Counter::new(n)
            .filter(|c| self.present.contains(*c))
            .ok_or(ConfigError::NoSuchCounter(n))
    }

    /// Writes `PerfCntrGlobalCtl`: the driver's running counters (none
    /// while a snapshot is taken) and the firmware's.
    fn write_global(&mut self) -> Result<(), Error<M::Error>> {
        self.msr
            .write_msr(PERF_CNTR_GLOBAL_CTL, self.host_global().bits())
            .map_err(Error::Access)
    }

    /// Counter `c` runs (or not): its `PerfCntrGlobalCtl` bit (before
    /// PerfMonV2: `EN`).
    fn set_running(&mut self, c: Counter, p: &Programmed, on: bool) -> Result<(), Error<M::Error>> {
        if !self.v2 {
            return self
                .msr
                .write_msr(c.ctl(self.extended), p.ctl.with_enable(on).bits())
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

    /// The image of `config` on counter `c`, whether or not it is free.
    fn image_of(&self, c: Counter, config: &CounterConfig) -> Result<Programmed, ConfigError> {
        if let Some(s) = config.sampling
            && s.rule() != self.overflow_rule()
        {
            return Err(ConfigError::SampleAfterRule);
        }
        let e = &config.event;
        let ctl = e.perf_ctl(self.map).ok_or(match e.event {
            super::events::Event::Hardware(h) => ConfigError::Unmapped {
                event: h.name(),
                map: self.map.name(),
            },
            // A raw event always has an encoding.
            super::events::Event::Raw { .. } => ConfigError::NoSuchCounter(c.index()),
        })?;
        if self.cpu.family >= 0x17 && ctl.event() == PAIRED_EVENT {
            return Err(ConfigError::PairedEvent {
                select: ctl.event(),
            });
        }
        Ok(Programmed {
            // PerfMonV2: EN stays set, `PerfCntrGlobalCtl` starts and
            // stops; before it EN is the start.
            ctl: ctl.with_int(config.sampling.is_some()).with_enable(self.v2),
            sampling: config.sampling,
        })
    }

    fn write_counter(&mut self, c: Counter, value: u64) -> Result<(), Error<M::Error>> {
        self.msr
            .write_msr(c.ctr(self.extended), value)
            .map_err(Error::Access)
    }

    /// Sampling counter `c`, stopped and disarmed, is read: its overflow,
    /// if it passed one, is owed a late PMI unless one was taken in the
    /// window ([`super::pmi`]). The raw count.
    fn read_stopped(&mut self, c: Counter, s: SampleAfter) -> Result<u64, Error<M::Error>> {
        let raw = self.msr.rdpmc(c.rdpmc()).map_err(Error::Access)?;
        self.pmu.pmi().close_window(c, s.split(raw).0);
        Ok(raw)
    }
}

/// Retired SSE/AVX FLOPs, the one event Linux pairs on a Zen core
/// (`amd_is_pair_event_code`).
const PAIRED_EVENT: u16 = 0x003;

/// A driver dropped without [`AmdDriver::give_back`] releases every
/// counter it still claims and frees the PMU; its owner stays held for
/// good ([`crate::counter::owner`]).
impl<O: Owner, M: MsrBackend> Drop for AmdDriver<'_, O, M> {
    fn drop(&mut self) {
        self.end(Ending::Dropped);
    }
}

impl<O: Owner, M: MsrBackend> Sealed for AmdDriver<'_, O, M> {}

impl<O: Owner, M: MsrBackend> counter::DriverOf<AmdCore, O> for AmdDriver<'_, O, M> {}

impl<O: Owner, M: MsrBackend> counter::Driver<AmdCore> for AmdDriver<'_, O, M> {
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
        self.pmu.pmi().set_sampling(c, p.sampling, self.extended);
        self.write_counter(c, p.sampling.map_or(0, SampleAfter::preset))?;
        self.msr
            .write_msr(c.ctl(self.extended), p.ctl.bits())
            .map_err(Error::Access)?;
        self.claimed = self.claimed.with(c);
        Ok(p)
    }

    fn start(&mut self, _: Token, n: u8, p: &Programmed) -> Result<(), Self::Error> {
        let c = self.counter(n)?;
        // Halted and started again in one bracket: it never stopped.
        if self.halting.contains(c) {
            self.halting = self.halting.without(c);
            self.pmu.pmi().close_window(c, 0);
        }
        if p.sampling.is_some() {
            self.pmu.pmi().arm(c, true);
        }
        self.set_running(c, p, true)
    }

    fn stop(&mut self, _: Token, n: u8, p: &Programmed) -> Result<(), Self::Error> {
        let c = self.counter(n)?;
        if p.sampling.is_some() {
            self.pmu.pmi().open_window(c);
        }
        self.pmu.pmi().arm(c, false);
        self.set_running(c, p, false)?;
        let Some(s) = p.sampling else {
            return Ok(());
        };
        if self.freeze > 0 && self.v2 {
            // Inside a bracket the counter runs on until the thaw's
            // `PerfCntrGlobalCtl` write: an overflow before it would
            // escape a read now, so the thaw reads it (same accesses,
            // later).
            self.halting = self.halting.with(c);
            return Ok(());
        }
        self.account_halt(c, s)
    }

    fn cascade(&mut self, _: Token, n: u8, _from: u8, _p: &Programmed) -> Result<(), Self::Error> {
        Err(Error::Config(ConfigError::NoSuchCounter(n)))
    }

    fn overflow_rule(&self, n: u8) -> Option<OverflowRule> {
        self.counter(n).ok().map(|_| overflow_rule())
    }

    fn read(&mut self, _: Token, n: u8, _p: &Programmed) -> Result<u64, Self::Error> {
        let c = self.counter(n)?;
        if self.freeze > 0 && !self.stopped && self.v2 {
            // A read inside a bracket is part of a snapshot: stop the
            // driver's counters once, for every read up to the thaw.
            self.stopped = true;
            self.write_global()?;
        }
        self.msr.rdpmc(c.rdpmc()).map_err(Error::Access)
    }

    /// Clears the control first, which stops the counter at once on every
    /// part (`EN` clear), then, for a sampling counter, reads it for a PMI
    /// its overflow may have in flight ([`super::pmi`]), zeroes it, and
    /// (PerfMonV2) clears its `PerfCntrGlobalCtl` bit.
    fn release(&mut self, _: Token, n: u8, p: &Programmed) -> Result<(), Self::Error> {
        let c = self.counter(n)?;
        if p.sampling.is_some() && !self.halting.contains(c) {
            self.pmu.pmi().open_window(c);
        }
        self.halting = self.halting.without(c);
        self.pmu.pmi().arm(c, false);
        self.msr
            .write_msr(c.ctl(self.extended), 0)
            .map_err(Error::Access)?;
        if let Some(s) = p.sampling {
            self.read_stopped(c, s)?;
        }
        self.write_counter(c, 0)?;
        if self.running.contains(c) {
            self.set_running(c, p, false)?;
        }
        self.pmu.pmi().set_sampling(c, None, self.extended);
        self.claimed = self.claimed.without(c);
        Ok(())
    }

    /// Opens a bracket (PerfMonV2): start and stop only change the driver's
    /// `PerfCntrGlobalCtl` image, a read stops the driver's counters
    /// (once), and the outermost [`counter::Driver::thaw`] writes
    /// `PerfCntrGlobalCtl` once, so a group starts and stops at one instant
    /// (the register ANDs with each counter's `EN`: Linux's
    /// `amd_pmu_v2_enable_all`). Before PerfMonV2 there is no global
    /// enable: the bracket does nothing, and a group's members start and
    /// stop one `PERF_CTLn` write after another.
    fn freeze(&mut self, _: Token) -> Result<(), Self::Error> {
        if self.v2 {
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
            // Its sample-after value, as configured (so accepted then).
            if let Ok(s) = SampleAfter::new(self.pmu.pmi().period(c), self.overflow_rule()) {
                self.account_halt(c, s)?;
            }
            self.halting = self.halting.without(c);
        }
        Ok(())
    }
}

impl<O: Owner, M: MsrBackend> AmdDriver<'_, O, M> {
    /// A halted sampling counter `c` (disarmed and stopped) whose overflow
    /// the halt cancelled (the handler now finds it disarmed): its periods
    /// are accounted here, the counter put at the same point of its next
    /// period and (PerfMonV2) its status bit acknowledged; the PMI its
    /// overflow raised is owed ([`super::pmi`]). 1 RDPMC (+1 or 2 WRMSR).
    fn account_halt(&mut self, c: Counter, s: SampleAfter) -> Result<(), Error<M::Error>> {
        let raw = self.read_stopped(c, s)?;
        let (owed, residual) = s.split(raw);
        if owed > 0 {
            self.pmu.pmi().add_halt_periods(c, owed);
            self.write_counter(c, s.at_residual(residual))?;
            if self.v2 {
                self.msr
                    .write_msr(
                        PERF_CNTR_GLOBAL_STATUS_CLR,
                        CounterSet::EMPTY.with(c).bits(),
                    )
                    .map_err(Error::Access)?;
            }
        }
        Ok(())
    }
}

mod switch;
mod world;
pub use world::GuestRegisters;

#[cfg(test)]
mod tests;

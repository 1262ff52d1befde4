//! The seam every architecture meets the rest of the crate, and a kernel,
//! at: one table per architecture, as Linux fills one `struct x86_pmu` per
//! vendor (`handle_irq`, `schedule_events`, `cntval_bits`, ...).
//!
//! | what | where | NetBurst | Itanium | architectural PMU | AMD core PMU |
//! |---|---|---|---|---|---|
//! | the physical PMU | [`Architecture::Pmu`] | a package's `NetBurstPmu` | a processor's `ItaniumPmu` | a logical processor's `ArchPerfPmu` | a logical processor's `AmdPmu` |
//! | a CPU's share of it | [`Architecture::Local`] ([`LocalPmu`]) | `LogicalPmu`: one logical processor of the package | the `&ItaniumPmu` | the `&ArchPerfPmu` | the `&AmdPmu` |
//! | its driver, taken over backend `B` | [`Driven::take`], [`Driven::Driver`] | `NetBurstDriver::take_for` | `ItaniumDriver::take` | `ArchPerfDriver::take` | `AmdDriver::take` |
//! | the PMI handler | [`Driven::handle_pmi`], behind [`handle_pmi`] | ESCR/CCCR counters, PEBS | PMC0, EARs, BTB | `IA32_PERF_GLOBAL_STATUS` | each armed counter's top bit; with PerfMonV2 `PerfCntrGlobalStatus` |
//! | what a sample carries | [`Architecture::Payload`] | a PEBS record | an EAR or branch capture | a PEBS record or the last branch records (`archperf::pmi::Capture`) | nothing |
//! | overflow rule, counter width | [`counter::Driver::overflow_rule`] | 40 bits, PMI one event late | 32 or 47 bits | CPUID's widths | 48 bits |
//! | multiplexer placement | [`Architecture::Events`], made by [`Architecture::multiplex`], rotated by [`Driven::tick`] | an event for a logical processor, placed by the exact ESCR and counter scheduler | a counter's PMC image, placed by a bipartite matching under the catalog's counters | an event select, on the general counters the firmware leaves | an event, on the core counters the firmware leaves (least run first) |
//!
//! One outcome ([`PmiOutcome`]), one sink ([`Sink`]), one kernel-side path
//! ([`handle_pmi`]): the architecture's handler, which ends by unmasking
//! the LVT entry (Intel's local APIC masks it when it delivers a PMI, SDM
//! Vol. 3A 11.5.1), for every architecture but AMD's with PerfMonV2: AMD's
//! APIC does not mask the entry, and that handler leaves it alone
//! (`arch::amd::pmi`). A kernel that drives one architecture
//! names its types; code that drives any takes `A: Architecture` and a
//! [`Driven`] local PMU, as the profiler example and the QEMU test kernels
//! do.
//!
//! Multiplexing through the seam: the crate's one multiplexer
//! ([`Multiplexer`]) over the architecture's placement
//! ([`Architecture::Events`]), made from the driver's run-time handles
//! ([`Architecture::erase_all`]) by [`Architecture::multiplex`], rotated
//! with the driver by [`Driven::tick`] and ended by [`Driven::finish`]
//! (each the multiplexer's own method: a bound over every `E` cannot be
//! written, so the seam names them), the handles back with
//! [`Multiplexer::into_handles`].
//!
//! The traits are sealed: the architectures are the crate's.

use core::fmt;

use crate::apic::{LvtPerfCounter, LvtPerfCounterEntry};
use crate::counter::{self, AnyHandle, Owner};
use crate::multiplex::{Multiplexer, Placement, RotateError};
use crate::sampling::{PmiOutcome, SampleAfter, Sink};
use crate::sealed::Sealed;

mod switch;
pub use switch::{
    Bank, BankError, Positions, Quiesce, Saved, Slot, Switch, arm_bank, peeked, switch_bank,
};
pub(crate) use switch::{release_all, reserve};

/// One PMU architecture, as the crate and a kernel meet it: its types. The
/// operations over a register backend are [`Driven`]'s.
pub trait Architecture: counter::Arch + Sealed + 'static {
    /// The physical PMU: one value per PMU, made with its `unsafe`
    /// constructor, from which drivers are taken.
    type Pmu: Sync + 'static;
    /// A CPU's share of a physical PMU: what its driver is taken for and its
    /// PMI handler serves.
    type Local<'a>: LocalPmu<'a, Arch = Self>;
    /// What detection reports of the PMU, which a driver is taken with.
    type Detected: Copy;
    /// A counter's configuration (the driver's `Config`).
    type Config: Copy;
    /// What a sample carries besides its counter, periods and IP.
    type Payload: Copy;
    /// The claim tokens a driver hands out when it is taken.
    type Counters<O: Owner>;
    /// The same tokens as run-time handles ([`Architecture::erase_all`]).
    type Handles;
    /// An event as the multiplexer takes it: on NetBurst an event and the
    /// logical processor to count it for, on Itanium a counter's PMC image
    /// (on any counter: the multiplexer moves it), on the architectural
    /// PMU and AMD's an event select.
    type Event: Copy;
    /// Where the multiplexer places up to `E` events: the events and the
    /// driver's handles ([`Architecture::multiplex`]).
    type Events<const E: usize>: Placement<Arch = Self, Config = Self::Config, Handles = Self::Handles>;
    /// Why events cannot be multiplexed.
    type MultiplexError: fmt::Debug + fmt::Display;

    /// The tokens as run-time handles, for code that picks counters at run
    /// time.
    fn erase_all<O: Owner>(counters: Self::Counters<O>) -> Self::Handles;
    /// The tokens back from run-time handles (each Unclaimed, of owner `O`,
    /// in its place), or the handles unchanged.
    #[allow(clippy::result_large_err, reason = "the handles come back by value")]
    fn from_erased<O: Owner>(handles: Self::Handles) -> Result<Self::Counters<O>, Self::Handles>;
    /// The run-time handle of counter `n` (its handle number), if the PMU
    /// has one.
    fn handle(handles: &mut Self::Handles, n: u8) -> Option<&mut AnyHandle<Self>>;
    /// `config`, sampling every `every` events.
    fn sampling(config: Self::Config, every: SampleAfter) -> Self::Config;
    /// The SDM name of counter `n` (its handle number), for reports.
    fn counter_name(n: u8) -> Option<&'static str>;
    /// Multiplexes `events` (at most `E`) with `handles` (a driver's,
    /// unclaimed, as [`Architecture::erase_all`] gives them) on the PMU
    /// `detected` describes (NetBurst's model, Itanium's generation): the
    /// architecture's own constructor (`multiplex::Multiplexer::new`) with
    /// what it needs of `detected`. Nothing runs until the first
    /// [`Driven::tick`]. Refused with the handles given back.
    #[allow(clippy::result_large_err, reason = "the handles come back by value")]
    #[allow(clippy::type_complexity)]
    fn multiplex<const E: usize>(
        detected: &Self::Detected,
        handles: Self::Handles,
        events: &[Self::Event],
    ) -> Result<Multiplexer<Self::Events<E>, E>, (Self::MultiplexError, Self::Handles)>;
}

/// A CPU's share of a physical PMU ([`Architecture::Local`]): on NetBurst
/// one logical processor of the package (the two share the PMU), elsewhere
/// the PMU itself. What its handler accounted is read here.
pub trait LocalPmu<'a>: Copy + Sealed {
    /// The architecture.
    type Arch: Architecture<Local<'a> = Self>;

    /// The sample-after periods counter `n` completed since it was
    /// configured (serviced by the handler or found by a halt), and of
    /// those, the ones a halt found.
    fn periods(self, n: u8) -> (u64, u64);
    /// PMIs handled.
    fn interrupts(self) -> u64;
    /// PMIs that found no overflowed counter.
    fn spurious(self) -> u64;
}

/// A CPU's share of a PMU driven over register backend `B`: its driver and
/// its PMI handler.
pub trait Driven<'a, B>: LocalPmu<'a> {
    /// A register access's error (only a model's can happen).
    type Error: fmt::Debug;
    /// Why a driver could not be taken.
    type InitError: fmt::Debug + fmt::Display;
    /// The driver of owner `O`.
    type Driver<O: Owner>: counter::DriverOf<Self::Arch, O, Config = <Self::Arch as Architecture>::Config>
        + Switch<Self::Arch>;

    /// Takes the driver of this share for owner `O`, with backend `regs`
    /// (on hardware the CPU's own), as detection described the PMU.
    #[allow(clippy::type_complexity)]
    fn take<O: Owner>(
        self,
        regs: B,
        detected: &<Self::Arch as Architecture>::Detected,
    ) -> Result<(Self::Driver<O>, <Self::Arch as Architecture>::Counters<O>), Self::InitError>;

    /// Gives `driver` back with every token it issued (the backend back),
    /// or both back if the tokens are not its whole set.
    #[allow(clippy::result_large_err, reason = "the driver comes back by value")]
    #[allow(clippy::type_complexity)]
    fn give_back<O: Owner>(
        driver: Self::Driver<O>,
        counters: <Self::Arch as Architecture>::Counters<O>,
    ) -> Result<B, (Self::Driver<O>, <Self::Arch as Architecture>::Counters<O>)>;

    /// The counter and configuration that count core cycles (`perf`'s
    /// `cycles`) for this driver's CPU, the first free one a kernel would
    /// pick: `None` if none is free.
    fn core_cycles<O: Owner>(
        driver: &Self::Driver<O>,
    ) -> Option<(u8, <Self::Arch as Architecture>::Config)>;

    /// One rotation of `m` on `driver`, `dt` of time since the last
    /// ([`Multiplexer::tick`]; the first, with `dt` 0, starts it).
    #[allow(clippy::type_complexity)]
    fn tick<O: Owner, const E: usize>(
        driver: &mut Self::Driver<O>,
        m: &mut Multiplexer<<Self::Arch as Architecture>::Events<E>, E>,
        dt: u64,
    ) -> Result<(), RotateError<Self::Driver<O>, Self::Arch>>;

    /// Ends `m`'s run on `driver`: the last `dt` charged, every counter
    /// released ([`Multiplexer::finish`]).
    #[allow(clippy::type_complexity)]
    fn finish<O: Owner, const E: usize>(
        driver: &mut Self::Driver<O>,
        m: &mut Multiplexer<<Self::Arch as Architecture>::Events<E>, E>,
        dt: u64,
    ) -> Result<(), RotateError<Self::Driver<O>, Self::Arch>>;

    /// The PMI handler: every overflowed counter serviced (re-armed
    /// relative to what it holds, a sample with the interrupted `ip` and
    /// its capture handed to `sink`), the PMU's overflow state
    /// acknowledged, and the interrupt's delivery entry `lvt` written
    /// `entry` last (except where the APIC does not mask it on delivery
    /// and the handler has no need to: AMD's with PerfMonV2). No lock, no
    /// locked instruction, no allocation: it may run as an NMI.
    /// [`handle_pmi`] is the same as a function.
    fn handle_pmi<L: LvtPerfCounterEntry, S: Sink<<Self::Arch as Architecture>::Payload>>(
        self,
        regs: &mut B,
        lvt: &mut L,
        entry: LvtPerfCounter,
        ip: u64,
        sink: S,
    ) -> Result<PmiOutcome, Self::Error>;
}

/// The kernel's PMI path, the same for every architecture: `local`'s
/// handler over `regs` (the interrupted instruction pointer `ip`, each
/// sample to the closure `sink`, whose argument's type is inferred from
/// `local`), ending with the LVT performance-counter entry written `entry`
/// (unmasked: the local APIC masked it when it delivered the PMI, SDM
/// Vol. 3A 11.5.1; Itanium's interrupt vector is not masked by delivery:
/// there `lvt` is `&mut ()` and `entry` any value, such as
/// [`LvtPerfCounter::RESET`], unless the Itanium model's interrupt came
/// through an IA-32 host's APIC, as in the crate's test kernels; AMD's
/// local APIC does not mask it either, and the AMD handler writes it before
/// PerfMonV2 only, `arch::amd::pmi`). A fixed
/// vector still needs its EOI afterwards (an NMI has none); that is the
/// kernel's.
///
/// If a register access fails (only a model fails), the error comes back
/// with the entry still masked.
#[inline(always)]
pub fn handle_pmi<'a, C, B, L>(
    local: C,
    regs: &mut B,
    lvt: &mut L,
    entry: LvtPerfCounter,
    ip: u64,
    sink: impl Sink<<C::Arch as Architecture>::Payload>,
) -> Result<PmiOutcome, C::Error>
where
    C: Driven<'a, B>,
    L: LvtPerfCounterEntry,
{
    local.handle_pmi(regs, lvt, entry, ip, sink)
}

#[cfg(test)]
mod tests;

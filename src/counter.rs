//! Typestate counters: the architecture-independent handle machinery.
//!
//! A [`Handle<A, N, S>`] is the exclusive right to hardware counter `N` of
//! architecture `A`, in state `S`:
//!
//! ```text
//!              configure            enable               halt
//!  Unclaimed ─────────────▶ Configured ──────▶ Enabled ─────────▶ Halted
//!      ▲                        │                ▲                 │  │
//!      │                        │ cascade_from   └──── resume ─────┘  │
//!      │                        ▼                                     │
//!      │                    Cascaded ──────────── halt ───────────────┘
//!      │                                                  (Halted can also
//!      └──────────── release (from any claimed state)      cascade_from again)
//! ```
//!
//! Every transition consumes the handle and returns the next one, so a stale
//! handle cannot be used, and a transition the hardware does not allow does not
//! compile: enabling twice, reading or halting an unclaimed counter, resuming
//! a counter that is not halted, and cascading a counter from one that is not
//! its alternate (the architecture says which pairs exist through
//! [`Cascade`]; NetBurst's 0→2 compiles, 0→1 and 16→14 do not, and nothing
//! cascades on Itanium). The compiler's message names the rule, because each
//! transition's bound is a trait carrying `#[diagnostic::on_unimplemented]`.
//!
//! The handle stores the register images its state implies (an [`Arch::Programmed`]),
//! so no transition reads back what the driver already knows: the
//! [`Driver`] issues exactly the accesses the hardware needs, and the tests
//! assert them with [`crate::access::Recording`].
//!
//! Every handle is bound to the driver that issued it: its type carries the
//! driver's [`Owner`], a type naming one PMU that only one driver at a time
//! can hold ([`owner`] module), and each transition accepts only a driver of
//! that owner, so a handle cannot be used with another driver (that does not
//! compile: "this counter was issued by the driver of another owner").
//!
//! Auto traits, one rule for every architecture: handles are neither `Send`
//! nor `Sync` (a PMU belongs to one CPU, on NetBurst to one physical
//! package, and its registers must be reached from there); a driver is
//! `Send` exactly when its register backend is. The hardware backend
//! ([`crate::access::X86Msr`]) is not, so a driver on hardware stays on the
//! CPU that took it; a driver over a model may move between host threads.
//! Whether a driver is `Sync` does not matter: every operation takes it by
//! `&mut`.
//! Release a counter with [`Handle::release`], which disables it and zeroes
//! its registers so nothing leaks to the next owner; a handle that is merely
//! dropped leaves the counter as it was (the type is `#[must_use]`).
//!
//! For code that keeps counters in arrays, [`AnyHandle`] is the same handle
//! with the counter number and state moved to run time; the same rules are
//! checked and broken ones come back as [`ErasedError`].
//!
//! # Illegal transitions do not compile
//!
//! `tests/compile_fail.rs` type-checks one small program per illegal
//! transition and requires each to fail with its rule's message, for example
//! `counter 14 cannot be cascaded from counter 16` or
//! ``a counter in state `Enabled` cannot be enabled``.
//!
//! # Examples
//!
//! Every transition on the NetBurst model, with the register traffic the
//! typed API promises:
//!
//! (On a register-level model: a doc test with the `model` feature, ignored without it.)
//!
#![cfg_attr(feature = "model", doc = "```")]
#![cfg_attr(not(feature = "model"), doc = "```ignore")]
//! use pmu::access::{AccessCounts, Recording};
//! use pmu::arch::netburst::driver::{CounterConfig, NetBurstDriver};
//! use pmu::arch::netburst::{Escr, NetBurstPmu};
//! use pmu::model::netburst::{Config, NetBurstModel};
//!
//! pmu::owner!(Cpu0);
//! // SAFETY: the model is a package of its own; this is its one value.
//! let package = unsafe { NetBurstPmu::new() };
//! let model = NetBurstModel::new(Config::prescott_ht());
//! let cpu = pmu::detect::detect(&model, &mut model.clone())?.usable_netburst().unwrap();
//! let (mut d, c) = NetBurstDriver::<Cpu0, _>::take(Recording::<_, 8>::new(model), &cpu, &package)?;
//! let config = CounterConfig::counting("instr_retired:NBOGUSNTAG:k".parse()?, Escr::CruEscr0);
//! d.msr().clear();
//! let c12 = c.c12.configure(&mut d, &config)?;
//! assert_eq!(d.msr().take_counts(), AccessCounts::msr(0, 2, 0)); // ESCR, counter
//! let c12 = c12.enable(&mut d)?.halt(&mut d)?;
//! assert_eq!(d.msr().take_counts(), AccessCounts::msr(0, 2, 0)); // CCCR twice
//! let _ = c12.release(&mut d)?;
//! assert!(d.claimed().is_empty());
//! # Ok::<(), Box<dyn core::error::Error>>(())
//! ```

mod erased;
mod group;
pub mod owner;
mod per_cpu;

pub use erased::{AnyHandle, ErasedError, Operation};
pub use group::{Group, GroupError};
pub use owner::{Owner, OwnerFlag, OwnerId};
pub use per_cpu::PerCpuPmu;

use core::fmt;
use core::marker::PhantomData;

use crate::sealed::{Sealed, TOKEN, Token};

/// The counter states. Uninhabited marker types: a state exists only in a
/// handle's type; [`StateTag`] is the same at run time.
///
/// ```
/// use pmu::counter::StateTag;
/// use pmu::counter::state::{Halted, State};
///
/// assert_eq!(Halted::TAG, StateTag::Halted);
/// ```
pub mod state {
    use core::fmt::Debug;

    use crate::sealed::Sealed;

    /// A counter state, as a type.
    pub trait State: Sealed {
        /// The run-time tag of this state.
        const TAG: super::StateTag;
        /// What a handle in this state holds, given the architecture's
        /// register images `P`: nothing when Unclaimed (a token is only the
        /// right to claim), `P` when claimed.
        type Payload<P: Copy + Debug>: Copy + Debug;
        /// The payload as the run-time form holds it (`unprogrammed` for an
        /// Unclaimed handle).
        #[doc(hidden)]
        fn into_images<P: Copy + Debug>(payload: Self::Payload<P>, unprogrammed: P) -> P;
        /// The payload from the run-time form's images.
        #[doc(hidden)]
        fn from_images<P: Copy + Debug>(images: P) -> Self::Payload<P>;
    }

    /// A claimed state: the handle holds its register images.
    pub trait Claimed: State {
        /// The images in a payload.
        #[doc(hidden)]
        fn images<P: Copy + Debug>(payload: &Self::Payload<P>) -> &P;
    }

    macro_rules! claimed_states {
        ($($(#[$doc:meta])* $name:ident,)*) => {$(
            $(#[$doc])*
            #[derive(Debug)]
            pub enum $name {}
            impl Sealed for $name {}
            impl State for $name {
                const TAG: super::StateTag = super::StateTag::$name;
                type Payload<P: Copy + Debug> = P;
                fn into_images<P: Copy + Debug>(payload: P, _: P) -> P {
                    payload
                }
                fn from_images<P: Copy + Debug>(images: P) -> P {
                    images
                }
            }
            impl Claimed for $name {
                fn images<P: Copy + Debug>(payload: &P) -> &P {
                    payload
                }
            }
        )*};
    }

    /// Not claimed: the handle is only the right to claim the counter, and
    /// holds nothing (a zero-sized token).
    #[derive(Debug)]
    pub enum Unclaimed {}
    impl Sealed for Unclaimed {}
    impl State for Unclaimed {
        const TAG: super::StateTag = super::StateTag::Unclaimed;
        type Payload<P: Copy + Debug> = ();
        fn into_images<P: Copy + Debug>((): (), unprogrammed: P) -> P {
            unprogrammed
        }
        fn from_images<P: Copy + Debug>(_: P) {}
    }

    claimed_states! {
        /// Registers programmed, counter preset, not counting.
        Configured,
        /// Counting.
        Enabled,
        /// Stopped with its count kept; can be resumed.
        Halted,
        /// Counting only while its alternate counter's overflow flag is set
        /// (NetBurst CCCR `CASCADE`, SDM 18.15.5.6).
        Cascaded,
    }
}

use state::{Cascaded, Claimed, Configured, Enabled, Halted, State, Unclaimed};

/// A counter state at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum StateTag {
    /// See [`state::Unclaimed`].
    Unclaimed,
    /// See [`state::Configured`].
    Configured,
    /// See [`state::Enabled`].
    Enabled,
    /// See [`state::Halted`].
    Halted,
    /// See [`state::Cascaded`].
    Cascaded,
}

/// A PMU architecture as the typestate machinery sees it. Sealed: the
/// architectures are the crate's.
pub trait Arch: Sized + Sealed {
    /// The architecture's name, for messages.
    const NAME: &'static str;
    /// How many counters the handles can name (`N < COUNTERS`).
    const COUNTERS: u8;
    /// What a claimed counter remembers: the register images of its
    /// configuration, so that no transition has to read them back.
    type Programmed: Copy + fmt::Debug + Eq;
    /// The value an unclaimed handle holds.
    const UNPROGRAMMED: Self::Programmed;

    /// Whether counter `to` can be cascaded from counter `from` (the run-time
    /// form of [`Cascade`]).
    fn can_cascade(from: u8, to: u8) -> bool;
}

/// Counter `TO` can be cascaded from counter `FROM` on this architecture.
/// Implemented exactly for the pairs the manual allows.
#[diagnostic::on_unimplemented(
    message = "counter {TO} cannot be cascaded from counter {FROM} on `{Self}`",
    label = "not a cascade pair of this architecture",
    note = "NetBurst cascades a counter only from its alternate: the same position in the other pair of its block (0<->2, 1<->3, ..., 12<->14, 13<->15), 16 only from 14 and 17 only from 15 (SDM 18.15.5.6); Itanium has no cascading at all"
)]
pub trait Cascade<const FROM: u8, const TO: u8>: Arch {}

/// The register operations behind the transitions, implemented by an
/// architecture's driver (the owner of the register backend).
///
/// Sealed, and its operations are the crate's alone: each takes a
/// crate-private token, so that only the handles call them, each in the
/// state its name implies (the typed API guarantees it, and [`AnyHandle`]
/// checks it). Code outside the crate names the trait in bounds and uses
/// its associated types; it drives counters through the handles.
pub trait Driver<A: Arch>: Sealed {
    /// The PMU this driver holds; every handle it issues carries it.
    type Owner: Owner;
    /// What a configuration request looks like.
    type Config;
    /// A rejected configuration or a faulting register access.
    type Error: fmt::Debug;

    /// Claim counter `n` and program it (Unclaimed → Configured).
    #[doc(hidden)]
    fn program(
        &mut self,
        _: Token,
        n: u8,
        config: &Self::Config,
    ) -> Result<A::Programmed, Self::Error>;
    /// Start counting (Configured or Halted → Enabled).
    #[doc(hidden)]
    fn start(&mut self, _: Token, n: u8, p: &A::Programmed) -> Result<(), Self::Error>;
    /// Stop counting, keeping the count (Enabled or Cascaded → Halted).
    #[doc(hidden)]
    fn stop(&mut self, _: Token, n: u8, p: &A::Programmed) -> Result<(), Self::Error>;
    /// Count only while counter `from` has overflowed (→ Cascaded).
    #[doc(hidden)]
    fn cascade(&mut self, _: Token, n: u8, from: u8, p: &A::Programmed) -> Result<(), Self::Error>;
    /// Whether counter `to` can be cascaded from counter `from` on this
    /// PMU: the architecture's pairs ([`Arch::can_cascade`]), and any this
    /// particular part adds (NetBurst's extended cascade on some models).
    /// The erased handles check it; the typed ones check [`Cascade`].
    fn can_cascade(&self, from: u8, to: u8) -> bool {
        A::can_cascade(from, to)
    }
    /// How counter `n` overflows into a PMI: its width and how late the
    /// interrupt comes ([`crate::sampling::OverflowRule`]), for
    /// [`crate::sampling::SampleAfter::new`] (NetBurst: 40 bits, one event
    /// late; Itanium: the generation's width; the architectural PMU: the
    /// width CPUID gives the counter's kind, general or fixed). `None` for a
    /// counter this PMU does not have.
    fn overflow_rule(&self, n: u8) -> Option<crate::sampling::OverflowRule>;
    /// The counter's current value.
    #[doc(hidden)]
    fn read(&mut self, _: Token, n: u8, p: &A::Programmed) -> Result<u64, Self::Error>;
    /// Disable, zero the registers, give the counter back (→ Unclaimed).
    #[doc(hidden)]
    fn release(&mut self, _: Token, n: u8, p: &A::Programmed) -> Result<(), Self::Error>;
    /// Stop every counter of this PMU at one instant until [`Driver::thaw`],
    /// so that the operations in between ([`Group`]'s) take effect at one
    /// instant too, if the PMU has such a control (Itanium's PMC0.fr). The
    /// default, for a PMU without one (NetBurst has no global enable, SDM
    /// 18.15), writes nothing. The bracket runs with the PMU interrupt
    /// masked on this CPU from freeze to thaw; Itanium's needs it whatever
    /// the interrupt's vector (a handler run inside it would service
    /// overflows the thaw then writes back: `arch::itanium::driver`,
    /// "Interrupts inside driver calls"), while NetBurst's and the
    /// architectural PMU's stay exact with an NMI at any access (tested
    /// at every one). Brackets may nest; the outermost freezes and thaws.
    #[doc(hidden)]
    fn freeze(&mut self, _: Token) -> Result<(), Self::Error> {
        Ok(())
    }
    /// End a [`Driver::freeze`]: the counters count again from the same
    /// instant (the default writes nothing).
    #[doc(hidden)]
    fn thaw(&mut self, _: Token) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// `Self` is a driver of owner `O`: the bound every transition puts on the
/// driver it is given, so that a handle works only with the driver that
/// issued it. Each driver implements it for its own owner (the supertrait
/// makes any other impl fail to compile); it is not a blanket impl so that
/// a foreign handle's error names the rule.
#[diagnostic::on_unimplemented(
    message = "this counter was issued by the driver of owner `{O}`, not by `{Self}`",
    label = "not the driver that issued the handle",
    note = "a handle works only with the driver that issued it: each PMU has one owner type (`pmu::owner!`) and one driver taken for it"
)]
pub trait DriverOf<A: Arch, O: Owner>: Driver<A, Owner = O> {}

/// A driver's error: a configuration it refused (`C`, the architecture's
/// configuration error), or a register access its backend refused (`E`;
/// only a model refuses: on hardware `E` is uninhabited). The same type for
/// every architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DriverError<C, E> {
    /// The configuration was refused; nothing was written.
    Config(C),
    /// The backend refused a register access.
    Access(E),
}

impl<C, E> From<C> for DriverError<C, E> {
    fn from(e: C) -> Self {
        DriverError::Config(e)
    }
}

impl<C: fmt::Display, E: fmt::Debug> fmt::Display for DriverError<C, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriverError::Config(c) => write!(f, "configuration refused: {c}"),
            DriverError::Access(e) => write!(f, "register access refused: {e:?}"),
        }
    }
}

impl<C: fmt::Display + fmt::Debug, E: fmt::Debug> core::error::Error for DriverError<C, E> {}

/// A transition that failed: the unchanged handle, and why.
pub struct Failed<H, E> {
    /// The handle, in the state it had before the attempt.
    pub counter: H,
    /// What went wrong.
    pub error: E,
}

impl<H, E: fmt::Debug> fmt::Debug for Failed<H, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Failed")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

/// The reason, so that a failed transition can be reported (or `?`-ed)
/// like any error; the handle stays in `counter`.
impl<H, E: fmt::Display> fmt::Display for Failed<H, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl<H, E: fmt::Display + fmt::Debug> core::error::Error for Failed<H, E> {}

/// The transition bounds. Each is implemented for the states that allow the
/// transition, and its message says why the others do not.
///
/// ```
/// use pmu::counter::rules::{CanHalt, Readable};
/// use pmu::counter::state::{Cascaded, Enabled, Halted};
///
/// fn haltable<S: CanHalt>() {}
/// fn readable<S: Readable>() {}
/// haltable::<Enabled>();
/// haltable::<Cascaded>();
/// readable::<Halted>();
/// ```
pub mod rules {
    use super::state::{Cascaded, Claimed, Configured, Enabled, Halted, State, Unclaimed};

    /// States that may be programmed.
    #[diagnostic::on_unimplemented(
        message = "a counter in state `{Self}` cannot be configured",
        label = "already claimed",
        note = "only an Unclaimed counter can be configured: release it first, which disables it and zeroes its registers"
    )]
    pub trait CanConfigure: State {}
    impl CanConfigure for Unclaimed {}

    /// States that may be enabled.
    #[diagnostic::on_unimplemented(
        message = "a counter in state `{Self}` cannot be enabled",
        label = "not Configured",
        note = "only a Configured counter can be enabled: an Enabled or Cascaded counter already counts, a Halted one is resumed, an Unclaimed one must be configured first"
    )]
    pub trait CanEnable: Claimed {}
    impl CanEnable for Configured {}

    /// States that may be halted.
    #[diagnostic::on_unimplemented(
        message = "a counter in state `{Self}` cannot be halted",
        label = "not counting",
        note = "only an Enabled or Cascaded counter counts, so only those can be halted"
    )]
    pub trait CanHalt: Claimed {}
    impl CanHalt for Enabled {}
    impl CanHalt for Cascaded {}

    /// States that may be resumed.
    #[diagnostic::on_unimplemented(
        message = "a counter in state `{Self}` cannot be resumed",
        label = "not Halted",
        note = "only a Halted counter can be resumed; a Configured counter is enabled"
    )]
    pub trait CanResume: Claimed {}
    impl CanResume for Halted {}

    /// States that may be cascaded from another counter.
    #[diagnostic::on_unimplemented(
        message = "a counter in state `{Self}` cannot be cascaded",
        label = "must be Configured or Halted",
        note = "a counter is cascaded instead of being enabled: configure it (or halt it) first"
    )]
    pub trait CanCascade: Claimed {}
    impl CanCascade for Configured {}
    impl CanCascade for Halted {}

    /// States that hold a count.
    #[diagnostic::on_unimplemented(
        message = "a counter in state `{Self}` cannot be read",
        label = "unclaimed",
        note = "an Unclaimed counter belongs to nobody and counts nothing of yours: configure it first"
    )]
    pub trait Readable: Claimed {}
    impl Readable for Configured {}
    impl Readable for Enabled {}
    impl Readable for Halted {}
    impl Readable for Cascaded {}

    /// States that may be released.
    #[diagnostic::on_unimplemented(
        message = "a counter in state `{Self}` cannot be released",
        label = "not claimed",
        note = "an Unclaimed counter has nothing to release"
    )]
    pub trait CanRelease: Claimed {}
    impl CanRelease for Configured {}
    impl CanRelease for Enabled {}
    impl CanRelease for Halted {}
    impl CanRelease for Cascaded {}
}

use rules::{CanCascade, CanConfigure, CanEnable, CanHalt, CanRelease, CanResume, Readable};

/// The exclusive right to counter `N` of architecture `A`, issued by the
/// driver of owner `O`, in state `S`.
///
/// A claimed handle is the size of the register images it caches; an
/// Unclaimed one is zero-sized, a token with no payload. Neither is `Send`
/// nor `Sync` (see the module docs).
#[must_use = "a dropped claimed counter stays programmed (release it); a dropped unclaimed one cannot be claimed again"]
pub struct Handle<A: Arch, O: Owner, const N: u8, S: State> {
    programmed: S::Payload<A::Programmed>,
    _state: PhantomData<(O, S, *const ())>,
}

/// The result of a transition of counter `N` from state `S` to state `T`.
pub type Transition<A, O, const N: u8, S, T, E> =
    Result<Handle<A, O, N, T>, Failed<Handle<A, O, N, S>, E>>;

impl<A: Arch, O: Owner, const N: u8, S: State> fmt::Debug for Handle<A, O, N, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("arch", &A::NAME)
            .field("index", &N)
            .field("state", &S::TAG)
            .field("programmed", &self.programmed)
            .finish()
    }
}

impl<A: Arch, O: Owner, const N: u8> Handle<A, O, N, Unclaimed> {
    /// The claim token for counter `N`.
    ///
    /// Only an architecture's driver creates these, once per counter, when it
    /// takes owner `O` ([`owner`]); two tokens for one counter would break
    /// the exclusivity every handle promises.
    pub(crate) const fn token() -> Self {
        const { assert!(N < A::COUNTERS, "no such counter") };
        Handle {
            programmed: (),
            _state: PhantomData,
        }
    }
}

impl<A: Arch, O: Owner, const N: u8, S: State> Handle<A, O, N, S> {
    /// The hardware counter number.
    pub const INDEX: u8 = N;

    /// Program the counter: Unclaimed → Configured.
    pub fn configure<D: DriverOf<A, O>>(
        self,
        pmu: &mut D,
        config: &D::Config,
    ) -> Transition<A, O, N, S, Configured, D::Error>
    where
        S: CanConfigure,
    {
        match pmu.program(TOKEN, N, config) {
            Ok(programmed) => Ok(Handle {
                programmed,
                _state: PhantomData,
            }),
            Err(error) => Err(Failed {
                counter: self,
                error,
            }),
        }
    }

    /// The same handle with its number and state checked at run time.
    pub fn erase(self) -> AnyHandle<A> {
        let images = S::into_images(self.programmed, A::UNPROGRAMMED);
        AnyHandle::from_parts(OwnerId::of::<O>(), N, S::TAG, images)
    }

    /// Back from the erased form; `Err` (with `any` unchanged) if `any` is
    /// not counter `N` of owner `O` in state `S`.
    pub fn from_erased(any: AnyHandle<A>) -> Result<Self, AnyHandle<A>> {
        if any.owner() == OwnerId::of::<O>() && any.index() == N && any.state() == S::TAG {
            Ok(Handle {
                programmed: S::from_images(any.into_programmed()),
                _state: PhantomData,
            })
        } else {
            Err(any)
        }
    }

    fn step<T: Claimed, D: Driver<A>>(
        self,
        r: Result<(), D::Error>,
    ) -> Transition<A, O, N, S, T, D::Error>
    where
        S: Claimed,
    {
        match r {
            Ok(()) => Ok(Handle {
                programmed: T::from_images(*self.programmed()),
                _state: PhantomData,
            }),
            Err(error) => Err(Failed {
                counter: self,
                error,
            }),
        }
    }

    /// The same counter in claimed state `T`, for an architecture's own
    /// transitions beyond the generic ones (NetBurst's extended cascade),
    /// once its driver has programmed the registers.
    pub(crate) fn into_claimed<T: Claimed>(self) -> Handle<A, O, N, T>
    where
        S: Claimed,
    {
        Handle {
            programmed: T::from_images(*self.programmed()),
            _state: PhantomData,
        }
    }

    /// The register images this handle holds (a claimed handle's).
    pub fn programmed(&self) -> &A::Programmed
    where
        S: Claimed,
    {
        S::images(&self.programmed)
    }

    /// Start counting: Configured → Enabled.
    pub fn enable<D: DriverOf<A, O>>(self, pmu: &mut D) -> Transition<A, O, N, S, Enabled, D::Error>
    where
        S: CanEnable,
    {
        let r = pmu.start(TOKEN, N, self.programmed());
        self.step::<Enabled, D>(r)
    }

    /// Stop counting and keep the count: Enabled or Cascaded → Halted.
    pub fn halt<D: DriverOf<A, O>>(self, pmu: &mut D) -> Transition<A, O, N, S, Halted, D::Error>
    where
        S: CanHalt,
    {
        let r = pmu.stop(TOKEN, N, self.programmed());
        self.step::<Halted, D>(r)
    }

    /// Count again from the kept value: Halted → Enabled.
    pub fn resume<D: DriverOf<A, O>>(self, pmu: &mut D) -> Transition<A, O, N, S, Enabled, D::Error>
    where
        S: CanResume,
    {
        let r = pmu.start(TOKEN, N, self.programmed());
        self.step::<Enabled, D>(r)
    }

    /// Count only while counter `FROM` has overflowed: Configured or Halted
    /// → Cascaded. `source` proves counter `FROM` is claimed by the caller;
    /// the architecture decides which pairs exist ([`Cascade`]).
    pub fn cascade_from<const FROM: u8, S2: Readable, D: DriverOf<A, O>>(
        self,
        source: &Handle<A, O, FROM, S2>,
        pmu: &mut D,
    ) -> Transition<A, O, N, S, Cascaded, D::Error>
    where
        S: CanCascade,
        A: Cascade<FROM, N>,
    {
        let _ = source;
        let r = pmu.cascade(TOKEN, N, FROM, self.programmed());
        self.step::<Cascaded, D>(r)
    }

    /// The counter's value.
    pub fn read<D: DriverOf<A, O>>(&self, pmu: &mut D) -> Result<u64, D::Error>
    where
        S: Readable,
    {
        pmu.read(TOKEN, N, self.programmed())
    }

    /// Disable the counter, zero its registers and give it back: any claimed
    /// state → Unclaimed.
    pub fn release<D: DriverOf<A, O>>(
        self,
        pmu: &mut D,
    ) -> Transition<A, O, N, S, Unclaimed, D::Error>
    where
        S: CanRelease,
    {
        match pmu.release(TOKEN, N, self.programmed()) {
            Ok(()) => Ok(Handle {
                programmed: (),
                _state: PhantomData,
            }),
            Err(error) => Err(Failed {
                counter: self,
                error,
            }),
        }
    }
}

#[cfg(test)]
mod tests;

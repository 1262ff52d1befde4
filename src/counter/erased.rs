//! The run-time ("erased") counter handle: the typestate rules checked as
//! `Err` for code that keeps counters in arrays.

use core::fmt;
use core::marker::PhantomData;

use super::{Arch, Driver, OwnerId, StateTag};
use crate::sealed::TOKEN;

/// A transition, named for error reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Operation {
    /// [`AnyHandle::configure`].
    Configure,
    /// [`AnyHandle::enable`].
    Enable,
    /// [`AnyHandle::halt`].
    Halt,
    /// [`AnyHandle::resume`].
    Resume,
    /// [`AnyHandle::cascade_from`].
    Cascade,
    /// [`AnyHandle::read`].
    Read,
    /// [`AnyHandle::release`].
    Release,
    /// Clearing a claimed counter's overflow flag (NetBurst's
    /// `clear_overflow_erased`).
    ClearOverflow,
}

impl Operation {
    /// The states this operation is legal in (the typed API's bounds).
    pub const fn legal_in(self, s: StateTag) -> bool {
        use StateTag::*;
        match self {
            Operation::Configure => matches!(s, Unclaimed),
            Operation::Enable => matches!(s, Configured),
            Operation::Halt => matches!(s, Enabled | Cascaded),
            Operation::Resume => matches!(s, Halted),
            Operation::Cascade => matches!(s, Configured | Halted),
            Operation::Read | Operation::Release | Operation::ClearOverflow => {
                !matches!(s, Unclaimed)
            }
        }
    }
}

/// Why an [`AnyHandle`] operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ErasedError<E> {
    /// The operation is not legal in the counter's state (the typed API
    /// would not have compiled).
    Illegal {
        /// What was attempted.
        operation: Operation,
        /// The state the counter is in.
        state: StateTag,
    },
    /// `to` cannot be cascaded from `from` on this architecture.
    NotCascadePair {
        /// The source counter.
        from: u8,
        /// The counter that was to be cascaded.
        to: u8,
    },
    /// The cascade source is not claimed.
    SourceUnclaimed {
        /// The source counter.
        from: u8,
    },
    /// The handle (or the cascade source) was issued by the driver of
    /// another owner: a handle works only with the driver that issued it.
    ForeignHandle {
        /// The counter the handle names.
        counter: u8,
    },
    /// The driver refused the configuration or a register access faulted;
    /// the handle is unchanged.
    Driver(E),
}

impl<E: fmt::Debug> fmt::Display for ErasedError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErasedError::Illegal { operation, state } => {
                write!(
                    f,
                    "{operation:?} is not legal for a counter in state {state:?}"
                )
            }
            ErasedError::NotCascadePair { from, to } => {
                write!(f, "counter {to} cannot be cascaded from counter {from}")
            }
            ErasedError::SourceUnclaimed { from } => {
                write!(f, "cascade source counter {from} is not claimed")
            }
            ErasedError::ForeignHandle { counter } => write!(
                f,
                "the handle of counter {counter} was issued by another driver"
            ),
            ErasedError::Driver(e) => write!(f, "driver: {e:?}"),
        }
    }
}

impl<E: fmt::Debug> core::error::Error for ErasedError<E> {}

/// A counter handle whose number and state are run-time values. Same rules as
/// [`super::Handle`], checked on every call; an operation that fails leaves
/// the handle unchanged.
#[must_use = "a dropped claimed counter stays programmed (release it); a dropped unclaimed one cannot be claimed again"]
pub struct AnyHandle<A: Arch> {
    owner: OwnerId,
    index: u8,
    state: StateTag,
    programmed: A::Programmed,
    _cpu: PhantomData<*const ()>,
}

impl<A: Arch> fmt::Debug for AnyHandle<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnyHandle")
            .field("arch", &A::NAME)
            .field("index", &self.index)
            .field("state", &self.state)
            .field("programmed", &self.programmed)
            .finish()
    }
}

type Checked<T, D, A> = Result<T, ErasedError<<D as Driver<A>>::Error>>;

impl<A: Arch> AnyHandle<A> {
    pub(super) const fn from_parts(
        owner: OwnerId,
        index: u8,
        state: StateTag,
        programmed: A::Programmed,
    ) -> Self {
        AnyHandle {
            owner,
            index,
            state,
            programmed,
            _cpu: PhantomData,
        }
    }

    pub(super) const fn into_programmed(self) -> A::Programmed {
        self.programmed
    }

    /// The owner of the driver that issued the handle.
    pub const fn owner(&self) -> OwnerId {
        self.owner
    }

    /// The hardware counter number.
    pub const fn index(&self) -> u8 {
        self.index
    }

    /// The current state.
    pub const fn state(&self) -> StateTag {
        self.state
    }

    /// The register images this handle holds.
    pub const fn programmed(&self) -> &A::Programmed {
        &self.programmed
    }

    /// The handle was issued by `D` and `operation` is legal in its state.
    pub fn check<D: Driver<A>>(&self, operation: Operation) -> Checked<(), D, A> {
        if self.owner != OwnerId::of::<D::Owner>() {
            Err(ErasedError::ForeignHandle {
                counter: self.index,
            })
        } else if operation.legal_in(self.state) {
            Ok(())
        } else {
            Err(ErasedError::Illegal {
                operation,
                state: self.state,
            })
        }
    }

    fn finish<E>(&mut self, r: Result<(), E>, to: StateTag) -> Result<(), ErasedError<E>> {
        r.map_err(ErasedError::Driver)?;
        self.state = to;
        Ok(())
    }

    /// Unclaimed → Configured.
    pub fn configure<D: Driver<A>>(
        &mut self,
        pmu: &mut D,
        config: &D::Config,
    ) -> Checked<(), D, A> {
        self.check::<D>(Operation::Configure)?;
        self.programmed = pmu
            .program(TOKEN, self.index, config)
            .map_err(ErasedError::Driver)?;
        self.state = StateTag::Configured;
        Ok(())
    }

    /// Configured → Enabled.
    pub fn enable<D: Driver<A>>(&mut self, pmu: &mut D) -> Checked<(), D, A> {
        self.check::<D>(Operation::Enable)?;
        let r = pmu.start(TOKEN, self.index, &self.programmed);
        self.finish(r, StateTag::Enabled)
    }

    /// Enabled or Cascaded → Halted.
    pub fn halt<D: Driver<A>>(&mut self, pmu: &mut D) -> Checked<(), D, A> {
        self.check::<D>(Operation::Halt)?;
        let r = pmu.stop(TOKEN, self.index, &self.programmed);
        self.finish(r, StateTag::Halted)
    }

    /// Halted → Enabled.
    pub fn resume<D: Driver<A>>(&mut self, pmu: &mut D) -> Checked<(), D, A> {
        self.check::<D>(Operation::Resume)?;
        let r = pmu.start(TOKEN, self.index, &self.programmed);
        self.finish(r, StateTag::Enabled)
    }

    /// Configured or Halted → Cascaded from `source`, which must be claimed
    /// and be this counter's cascade partner on this PMU
    /// ([`Driver::can_cascade`]: NetBurst's extended cascade included).
    pub fn cascade_from<D: Driver<A>>(
        &mut self,
        source: &AnyHandle<A>,
        pmu: &mut D,
    ) -> Checked<(), D, A> {
        self.check::<D>(Operation::Cascade)?;
        if !pmu.can_cascade(source.index, self.index) {
            return Err(ErasedError::NotCascadePair {
                from: source.index,
                to: self.index,
            });
        }
        if source.owner != self.owner {
            return Err(ErasedError::ForeignHandle {
                counter: source.index,
            });
        }
        if source.state == StateTag::Unclaimed {
            return Err(ErasedError::SourceUnclaimed { from: source.index });
        }
        let r = pmu.cascade(TOKEN, self.index, source.index, &self.programmed);
        self.finish(r, StateTag::Cascaded)
    }

    /// The counter's value.
    pub fn read<D: Driver<A>>(&self, pmu: &mut D) -> Checked<u64, D, A> {
        self.check::<D>(Operation::Read)?;
        pmu.read(TOKEN, self.index, &self.programmed)
            .map_err(ErasedError::Driver)
    }

    /// Any claimed state → Unclaimed (disabled, registers zeroed).
    pub fn release<D: Driver<A>>(&mut self, pmu: &mut D) -> Checked<(), D, A> {
        self.check::<D>(Operation::Release)?;
        pmu.release(TOKEN, self.index, &self.programmed)
            .map_err(ErasedError::Driver)?;
        self.programmed = A::UNPROGRAMMED;
        self.state = StateTag::Unclaimed;
        Ok(())
    }
}

//! Counter groups: counters started, stopped and read together.
//!
//! A [`Group`] holds run-time handles of one driver and applies each
//! operation to all of them inside the driver's [`Driver::freeze`] bracket:
//!
//! - **Itanium** has a global stop, PMC0.fr (SDM Vol. 2 7.2.1: while it is
//!   set no counter counts). The group freezes the PMU, programs or reads
//!   every member, and thaws it: the members start and stop at the same
//!   instant and a read is one consistent snapshot, at the price of PMC0
//!   read once and written twice per operation (every other counter of the
//!   PMU pauses for those few instructions too).
//! - **NetBurst** has no global enable (each counter is enabled by its own
//!   CCCR, SDM 18.15.5.6). The group issues its members' CCCR writes back to
//!   back, starting and stopping them in the same order, so each member
//!   counts over a window of the same length, shifted from the first
//!   member's by the accesses before its own (one WRMSR each). A read while
//!   the group runs is skewed the same way by the RDPMCs; stop the group
//!   first for a snapshot in which every member covers the same length of
//!   time. The host tests measure both with a backend in which every
//!   register access takes time.
//!
//! An operation brings every member to its target state: [`Group::start`]
//! enables or resumes the members not yet counting, [`Group::stop`] halts
//! the ones counting, so after a register access failed part way (only a
//! model fails) the same call can simply be repeated. A cascaded counter
//! belongs to its pair, not to a group: it is refused
//! ([`GroupError::Cascaded`]; resuming it would end its cascade). Every
//! member's owner and state is checked before any register is touched.
//! Call the group with the PMU interrupt masked, as every driver call
//! ([`Driver::freeze`]).

use core::fmt;

use super::erased::{AnyHandle, ErasedError};
use super::{Arch, Driver, OwnerId, StateTag};
use crate::sealed::TOKEN;

/// Why handles cannot form a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum GroupError {
    /// A member is not claimed: configure it first.
    Unclaimed {
        /// Its counter.
        counter: u8,
    },
    /// A member was issued by another driver than the first member.
    MixedOwners {
        /// Its counter.
        counter: u8,
    },
    /// A member is cascaded: it counts with its pair, not with a group.
    Cascaded {
        /// Its counter.
        counter: u8,
    },
}

impl fmt::Display for GroupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GroupError::Unclaimed { counter } => {
                write!(f, "counter {counter} is not claimed: configure it first")
            }
            GroupError::MixedOwners { counter } => write!(
                f,
                "counter {counter} was issued by another driver than the group's first member"
            ),
            GroupError::Cascaded { counter } => write!(
                f,
                "counter {counter} is cascaded: it counts with its pair, not in a group"
            ),
        }
    }
}

impl core::error::Error for GroupError {}

/// `K` claimed counters of one driver, started, stopped and read together
/// (module docs: what "together" means on each architecture).
#[must_use = "a dropped group leaves its counters programmed (take them back with into_members and release them)"]
pub struct Group<A: Arch, const K: usize> {
    members: [AnyHandle<A>; K],
}

impl<A: Arch, const K: usize> fmt::Debug for Group<A, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Group")
            .field("members", &self.members)
            .finish()
    }
}

type Checked<T, D, A> = Result<T, ErasedError<<D as Driver<A>>::Error>>;

impl<A: Arch, const K: usize> Group<A, K> {
    /// Groups `members`, each claimed (Configured, Enabled or Halted, not
    /// Cascaded) and all issued by one driver. Refused with the handles
    /// given back.
    #[allow(
        clippy::result_large_err,
        reason = "the error hands the handles back by value: a no_std crate has no Box"
    )]
    pub fn new(members: [AnyHandle<A>; K]) -> Result<Self, (GroupError, [AnyHandle<A>; K])> {
        let owner = members.first().map(AnyHandle::owner);
        let bad = members.iter().find_map(|m| {
            if m.state() == StateTag::Unclaimed {
                Some(GroupError::Unclaimed { counter: m.index() })
            } else if m.state() == StateTag::Cascaded {
                Some(GroupError::Cascaded { counter: m.index() })
            } else if Some(m.owner()) != owner {
                Some(GroupError::MixedOwners { counter: m.index() })
            } else {
                None
            }
        });
        match bad {
            Some(e) => Err((e, members)),
            None => Ok(Group { members }),
        }
    }

    /// The members, in the order given.
    pub const fn members(&self) -> &[AnyHandle<A>; K] {
        &self.members
    }

    /// The members back, in their current states.
    pub fn into_members(self) -> [AnyHandle<A>; K] {
        self.members
    }

    /// Every member not yet counting (Configured or Halted) → Enabled, at
    /// one instant where the PMU can freeze, back to back otherwise.
    pub fn start<D: Driver<A>>(&mut self, pmu: &mut D) -> Checked<(), D, A> {
        self.check::<D>()?;
        self.frozen(pmu, |m, pmu| match m.state() {
            StateTag::Halted => m.resume(pmu),
            StateTag::Configured => m.enable(pmu),
            _ => Ok(()),
        })
    }

    /// Every counting member → Halted, in the order [`Group::start`]
    /// started them.
    pub fn stop<D: Driver<A>>(&mut self, pmu: &mut D) -> Checked<(), D, A> {
        self.check::<D>()?;
        self.frozen(pmu, |m, pmu| match m.state() {
            StateTag::Enabled => m.halt(pmu),
            _ => Ok(()),
        })
    }

    /// Every member's count, in member order: one snapshot.
    pub fn read<D: Driver<A>>(&mut self, pmu: &mut D) -> Checked<[u64; K], D, A> {
        self.check::<D>()?;
        let mut out = [0; K];
        let mut slots = out.iter_mut();
        self.frozen(pmu, |m, pmu| {
            let v = m.read(pmu)?;
            if let Some(slot) = slots.next() {
                *slot = v;
            }
            Ok(())
        })?;
        Ok(out)
    }

    /// The members (all of one driver, [`Group::new`]) were issued by `D`:
    /// checked before any register is touched (the states are kept claimed
    /// and uncascaded by the group).
    fn check<D: Driver<A>>(&self) -> Checked<(), D, A> {
        match self.members.first() {
            Some(m) if m.owner() != OwnerId::of::<D::Owner>() => {
                Err(ErasedError::ForeignHandle { counter: m.index() })
            }
            _ => Ok(()),
        }
    }

    /// `each` on every member inside the driver's freeze bracket; the PMU
    /// is thawed even when a member's operation fails (that member is
    /// unchanged, the ones before it have moved on). A failed thaw is the
    /// error reported, before a member's: the PMU is still frozen then.
    fn frozen<D: Driver<A>>(
        &mut self,
        pmu: &mut D,
        mut each: impl FnMut(&mut AnyHandle<A>, &mut D) -> Checked<(), D, A>,
    ) -> Checked<(), D, A> {
        pmu.freeze(TOKEN).map_err(ErasedError::Driver)?;
        let r = self.members.iter_mut().try_for_each(|m| each(m, pmu));
        pmu.thaw(TOKEN).map_err(ErasedError::Driver)?;
        r
    }
}

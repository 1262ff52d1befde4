//! Owners: one type per PMU, taken by at most one live driver.
//!
//! A kernel names each PMU it drives with a type of its own, declared with
//! [`crate::owner!`]:
//!
//! * on NetBurst one per physical package (the two logical processors of a
//!   package share one PMU, SDM 18.16), on Itanium one per CPU;
//! * a driver is *taken* for an owner type (`NetBurstDriver::take`,
//!   `ItaniumDriver::take`) and every counter handle it issues carries that
//!   type, so a handle cannot be used with any other driver: that does not
//!   compile (and the run-time [`super::AnyHandle`] refuses it with
//!   [`super::ErasedError::ForeignHandle`]);
//! * an owner type can be taken again only after its driver was given back
//!   together with every claim token it issued, each back in its Unclaimed
//!   state (`give_back` takes the whole `Counters` set, which a kernel
//!   reassembles from typed, erased, grouped or multiplexed handles), so no
//!   handle of the old driver can outlive it: that is a type guarantee, not
//!   a convention;
//! * a driver that is dropped instead (a kernel's early return, a test
//!   case's `?`) idles what it ran: it releases every counter it claimed
//!   and takes back its DS save areas, so nothing of it counts, interrupts
//!   or writes memory, and the physical PMU is free for a driver of
//!   another owner type. Its owner type stays taken for good: handles it
//!   issued may still exist, and no driver of that owner may ever accept
//!   them. Taking it again is refused with a message that says so (each
//!   architecture's `InitError::OwnerDropped`); a kernel that needs the
//!   PMU again takes it for another owner type (a fresh `pmu::owner!`);
////! * the flag behind an owner type is opaque ([`OwnerFlag`]): safe code can
//!   neither clear it nor share it with another type;
//! * which physical PMU a driver drives is not the owner type's business:
//!   drivers are taken from the physical PMU's value
//!   (`arch::netburst::NetBurstPmu`, `arch::itanium::ItaniumPmu`), made once
//!   per physical PMU through an `unsafe` constructor, which also refuses a
//!   second driver for the same logical processor.
//!
//! # Examples
//!
//! ```
//! pmu::owner!(
//!     /// The PMU of package 0.
//!     pub Package0
//! );
//! ```

use core::fmt;
use core::sync::atomic::{AtomicU8, Ordering};

/// No driver holds the flag.
const FREE: u8 = 0;
/// A live driver holds it.
const LIVE: u8 = 1;
/// A driver held it and was dropped without being given back: held for
/// good.
const DROPPED: u8 = 2;

/// The flag that says whether a driver holds an owner type (or one was
/// dropped while holding it). Opaque: only the drivers set and clear it, so
/// safe code cannot make an owner free while its driver and handles live.
#[derive(Debug)]
pub struct OwnerFlag(AtomicU8);

/// Why a flag could not be taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Taken {
    /// A live driver holds it.
    Live,
    /// Its driver was dropped without being given back.
    Dropped,
}

impl OwnerFlag {
    /// A free flag, for [`crate::owner!`].
    #[doc(hidden)]
    #[allow(clippy::new_without_default)]
    pub const fn new() -> OwnerFlag {
        OwnerFlag(AtomicU8::new(FREE))
    }

    /// Takes the flag, or says who holds it. (The physical PMU values hold
    /// one too: a driver per PMU.)
    pub(crate) fn take(&self) -> Result<(), Taken> {
        match self
            .0
            .compare_exchange(FREE, LIVE, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Ok(()),
            Err(DROPPED) => Err(Taken::Dropped),
            Err(_) => Err(Taken::Live),
        }
    }

    /// Frees the flag; only its taker calls this.
    pub(crate) fn give_back(&self) {
        self.0.store(FREE, Ordering::Release);
    }

    /// Its taker was dropped without being given back: held for good.
    pub(crate) fn strand(&self) {
        self.0.store(DROPPED, Ordering::Release);
    }

    /// Whether the flag is taken.
    pub(crate) fn is_taken(&self) -> bool {
        self.0.load(Ordering::Acquire) != FREE
    }
}

/// A type that names the owner of one driver. Declare one with
/// [`crate::owner!`].
///
/// # Safety
///
/// [`Owner::taken`] returns a flag that belongs to this type alone: no other
/// type's `taken` may return the same flag. The flag is what lets a driver
/// be taken once per owner, so sharing it would let two drivers, and two
/// handles of one counter, exist at once.
pub unsafe trait Owner: 'static {
    /// The flag that says whether a driver holds this owner. Used by the
    /// drivers only; [`crate::owner!`] implements it.
    #[doc(hidden)]
    fn taken() -> &'static OwnerFlag;
}

/// The run-time identity of an owner type: the address of its flag, unique
/// to the type by [`Owner`]'s contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OwnerId(usize);

impl OwnerId {
    /// The identity of `O`.
    pub fn of<O: Owner>() -> OwnerId {
        OwnerId(core::ptr::from_ref(O::taken()) as usize)
    }
}

/// Take owner `O` for a new driver, or say why not.
pub(crate) fn take<O: Owner>() -> Result<(), Taken> {
    O::taken().take()
}

/// Give owner `O` back. Only a driver that took `O` and holds every one of
/// its claim tokens again (or whose take failed before it issued any) may
/// call this.
pub(crate) fn give_back<O: Owner>() {
    O::taken().give_back();
}

/// The driver of owner `O` was dropped without being given back: `O` stays
/// taken for good, since handles it issued may live on.
pub(crate) fn strand<O: Owner>() {
    O::taken().strand();
}

/// How a driver ends: given back with every token (its owner is free
/// again), or dropped (its owner is held for good).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    /// `give_back` with every claim token.
    GivenBack,
    /// Dropped.
    Dropped,
}

/// Ends the hold of a driver of owner `O` as `how` says.
pub(crate) fn end<O: Owner>(how: Ending) {
    match how {
        Ending::GivenBack => give_back::<O>(),
        Ending::Dropped => strand::<O>(),
    }
}

/// The refusal of a take for an owner whose driver was dropped (every
/// architecture's `InitError::OwnerDropped`).
pub(crate) fn write_dropped(f: &mut fmt::Formatter<'_>, owner: &str) -> fmt::Result {
    write!(
        f,
        "the driver of owner `{owner}` was dropped without `give_back`: it idled its counters and freed the PMU, but handles it issued may still exist, so `{owner}` cannot own a driver again; take the PMU for another owner type (`pmu::owner!`), or give a driver back with every token to reuse its owner"
    )
}

/// Declare an owner type: a type that names one PMU (see
/// [`pmu::counter::Owner`](crate::counter::Owner)). The type is
/// uninhabited; only its name matters.
///
/// ```
/// pmu::owner!(pub Package0);
/// pmu::owner!(
///     /// Doc comments and attributes are kept.
///     CpuPmu
/// );
/// ```
#[macro_export]
macro_rules! owner {
    ($(#[$meta:meta])* $vis:vis $name:ident) => {
        $(#[$meta])*
        #[derive(Debug)]
        $vis enum $name {}

        // SAFETY: the flag is a `static` declared inside this impl's own
        // function, so no other type can return it.
        unsafe impl $crate::counter::Owner for $name {
            fn taken() -> &'static $crate::counter::OwnerFlag {
                static TAKEN: $crate::counter::OwnerFlag = $crate::counter::OwnerFlag::new();
                &TAKEN
            }
        }
    };
}

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
//!   a convention. A driver that is dropped, or a token that is lost,
//!   keeps the owner taken for good (a kernel keeps its driver in a
//!   `static`);
//! * the flag behind an owner type is opaque ([`OwnerFlag`]): safe code can
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

use core::sync::atomic::{AtomicBool, Ordering};

/// The flag that says whether a live driver holds an owner type. Opaque:
/// only the drivers set and clear it, so safe code cannot make an owner
/// free while its driver and handles live.
#[derive(Debug)]
pub struct OwnerFlag(AtomicBool);

impl OwnerFlag {
    /// A free flag, for [`crate::owner!`].
    #[doc(hidden)]
    #[allow(clippy::new_without_default)]
    pub const fn new() -> OwnerFlag {
        OwnerFlag(AtomicBool::new(false))
    }

    /// Takes the flag: `false` if it is taken already. (The physical PMU
    /// values hold one too: a driver per PMU.)
    pub(crate) fn take(&self) -> bool {
        self.0
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Frees the flag; only its taker calls this.
    pub(crate) fn give_back(&self) {
        self.0.store(false, Ordering::Release);
    }

    /// Whether the flag is taken.
    pub(crate) fn is_taken(&self) -> bool {
        self.0.load(Ordering::Acquire)
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

/// Take owner `O` for a new driver: `false` if a driver holds it already.
pub(crate) fn take<O: Owner>() -> bool {
    O::taken().take()
}

/// Give owner `O` back. Only a driver that took `O` and holds every one of
/// its claim tokens again (or whose take failed before it issued any) may
/// call this.
pub(crate) fn give_back<O: Owner>() {
    O::taken().give_back();
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

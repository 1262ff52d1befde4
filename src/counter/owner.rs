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
//!   with every claim token (`give_back`), so no handle of the old driver can
//!   outlive it; a driver that is dropped instead keeps its owner taken
//!   forever (a kernel keeps its driver in a `static`);
//! * that an owner type and a PMU correspond one to one is the promise of the
//!   hardware backend's `unsafe` constructor ([`crate::access::X86Msr::new`]):
//!   one backend reaches one PMU. A model is a PMU of its own.
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

/// A type that names one PMU. Declare one with [`crate::owner!`].
///
/// # Safety
///
/// [`Owner::taken`] returns a flag that belongs to this type alone: no other
/// type's `taken` may return the same flag, and nothing else may change it.
/// The flag is what lets a driver be taken once per owner, so sharing it
/// would let two drivers, and two handles of one counter, exist at once.
pub unsafe trait Owner: 'static {
    /// The flag that says whether a driver holds this owner. Used by the
    /// drivers only; [`crate::owner!`] implements it.
    #[doc(hidden)]
    fn taken() -> &'static AtomicBool;
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
    O::taken()
        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
}

/// Give owner `O` back. Only a driver that took `O` and holds every one of
/// its claim tokens again may call this.
pub(crate) fn give_back<O: Owner>() {
    O::taken().store(false, Ordering::Release);
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
            fn taken() -> &'static ::core::sync::atomic::AtomicBool {
                static TAKEN: ::core::sync::atomic::AtomicBool =
                    ::core::sync::atomic::AtomicBool::new(false);
                &TAKEN
            }
        }
    };
}

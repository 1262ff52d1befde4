//! What keeps the crate's traits its own: [`Sealed`], the supertrait of
//! every public trait only this crate implements, and [`Token`], the
//! argument of every trait method only this crate calls.
//!
//! The module is private, so code outside the crate can name neither: it
//! cannot implement a trait whose supertrait it cannot name, and it cannot
//! call a method whose argument it cannot make (a `Token` has a private
//! field and no public constructor). A sealed trait's methods that program
//! hardware take a `Token`, because sealing alone does not stop a call:
//! a supertrait's methods are callable through any bound that implies it.
//!
//! Every public trait of the crate is listed in this module's test as
//! sealed or as meant for users to implement, with the reason, so a new
//! one cannot slip through unsealed.

/// The supertrait of the crate's sealed traits: implemented only here, for
/// the crate's own types (and, with a marker `K`, for the backend families:
/// `K` keeps the blanket implementations of the MSR and PMC/PMD backends
/// apart).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot implement this trait of `pmu`: the trait is sealed",
    label = "not a type of `pmu`",
    note = "the crate's drivers, architectures, placements and hardware backends are its own; a software register backend implements `pmu::access::MsrAccess` or `pmu::access::PmcPmdAccess` instead"
)]
pub trait Sealed<K = ()> {}

/// The proof that a call comes from inside the crate: the argument of the
/// sealed traits' methods that reach registers. Only [`TOKEN`] exists.
#[derive(Clone, Copy, Debug)]
pub struct Token(());

/// The one [`Token`].
pub(crate) const TOKEN: Token = Token(());

/// [`Sealed`]'s marker for the MSR backends ([`crate::access::MsrBackend`]).
#[derive(Debug)]
pub enum Msr {}

/// [`Sealed`]'s marker for the PMC/PMD backends
/// ([`crate::access::PmcPmdBackend`]).
#[derive(Debug)]
pub enum PmcPmd {}

#[cfg(test)]
mod tests;

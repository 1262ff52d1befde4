//! The operations every set of counters (or of register numbers) has, one
//! name each on every architecture: `union`, `intersection`, `difference`.

/// Defines `union`, `intersection` and `difference` (`const fn`s) on a set
/// type that is a tuple struct over its bit mask (bit n = member n);
/// `$member` names a member in the documentation ("counter", "register").
macro_rules! set_operations {
    ($name:ident, $member:literal) => {
        impl $name {
            #[doc = concat!("The ", $member, "s in either set.")]
            #[inline]
            pub const fn union(self, other: $name) -> $name {
                $name(self.0 | other.0)
            }

            #[doc = concat!("The ", $member, "s in both sets.")]
            #[inline]
            pub const fn intersection(self, other: $name) -> $name {
                $name(self.0 & other.0)
            }

            #[doc = concat!("The ", $member, "s of this set not in `other`.")]
            #[inline]
            pub const fn difference(self, other: $name) -> $name {
                $name(self.0 & !other.0)
            }
        }
    };
}
pub(crate) use set_operations;

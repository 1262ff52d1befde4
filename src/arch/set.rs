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

#[cfg(test)]
mod tests {
    use crate::arch::{archperf, itanium, netburst};

    /// The three architectures' sets answer the same operations alike.
    #[test]
    fn every_architecture_names_the_operations_alike() {
        let (a, b) = (0b0110u32, 0b0011u32);
        let nb = netburst::CounterSet::from_bits_truncate;
        assert_eq!(nb(a).union(nb(b)).bits(), 0b0111);
        assert_eq!(nb(a).intersection(nb(b)).bits(), 0b0010);
        assert_eq!(nb(a).difference(nb(b)).bits(), 0b0100);
        let ap = archperf::CounterSet::from_bits_truncate;
        let (a64, b64) = (u64::from(a), u64::from(b));
        assert_eq!(ap(a64).union(ap(b64)).bits(), 0b0111);
        assert_eq!(ap(a64).intersection(ap(b64)).bits(), 0b0010);
        assert_eq!(ap(a64).difference(ap(b64)).bits(), 0b0100);
        let it = itanium::CounterSet;
        assert_eq!(it(a64).union(it(b64)).bits(), 0b0111);
        assert_eq!(it(a64).intersection(it(b64)).bits(), 0b0010);
        assert_eq!(it(a64).difference(it(b64)).bits(), 0b0100);
        let r = itanium::RegSet::range(4, 7).difference(itanium::RegSet::single(5));
        assert_eq!(r.bits(), 0b1101_0000);
    }
}

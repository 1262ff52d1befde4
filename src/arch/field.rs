//! One declarative style for register fields, shared by both
//! architectures' layouts: a [`Field`] is a position and a width, and every
//! typed register image reads and writes its fields through one.

/// A bit field of a 64-bit register: `bits` bits starting at bit `lsb`.
///
/// Every register layout of the crate is declared with these, for both
/// architectures: the NetBurst ESCR and CCCR fields (SDM Figures 18-44 and
/// 18-45) and the Itanium per-generation layouts
/// ([`crate::arch::itanium::pmc::CounterLayout`] and the constants in the
/// register modules). The accessors are `const`, so layouts and images are
/// built at compile time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Field {
    lsb: u8,
    bits: u8,
}

impl Field {
    /// The field at `lsb` that is `bits` wide. Only the crate builds fields,
    /// and only with `lsb + bits <= 64`, `bits >= 1`; the accessors stay
    /// total for any value anyway.
    pub(crate) const fn new(lsb: u8, bits: u8) -> Field {
        Field { lsb, bits }
    }

    /// The lowest bit.
    pub const fn lsb(self) -> u8 {
        self.lsb
    }

    /// The width in bits.
    pub const fn bits(self) -> u8 {
        self.bits
    }

    /// The highest bit.
    pub const fn msb(self) -> u8 {
        self.lsb.saturating_add(self.bits).saturating_sub(1)
    }

    /// The largest value the field holds.
    pub const fn max(self) -> u64 {
        if self.bits == 0 {
            0
        } else if self.bits >= 64 {
            u64::MAX
        } else {
            (1u64 << self.bits) - 1
        }
    }

    /// The field's bits in place.
    pub const fn mask(self) -> u64 {
        if self.lsb >= 64 {
            0
        } else {
            self.max() << self.lsb
        }
    }

    /// The field's value in `raw`.
    pub const fn get(self, raw: u64) -> u64 {
        if self.lsb >= 64 {
            0
        } else {
            (raw >> self.lsb) & self.max()
        }
    }

    /// `raw` with the field replaced by `v` (truncated to the field).
    pub const fn set(self, raw: u64, v: u64) -> u64 {
        if self.lsb >= 64 {
            raw
        } else {
            (raw & !self.mask()) | ((v & self.max()) << self.lsb)
        }
    }

    /// Whether `v` fits the field.
    pub const fn fits(self, v: u64) -> bool {
        v <= self.max()
    }

    /// A one-bit field's value.
    pub const fn flag(self, raw: u64) -> bool {
        self.get(raw) != 0
    }

    /// `raw` with a one-bit field set or cleared.
    pub const fn set_flag(self, raw: u64, on: bool) -> u64 {
        self.set(raw, on as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_accessors_are_total() {
        let f = Field::new(20, 3);
        assert_eq!(f.mask(), 0x70_0000);
        assert_eq!(f.msb(), 22);
        assert_eq!(f.get(0x0050_0000), 5);
        assert_eq!(f.set(u64::MAX, 0), !0x70_0000);
        assert_eq!(f.set(0, 0xFF), 0x70_0000);
        assert!(f.fits(7) && !f.fits(8));
        let whole = Field::new(0, 64);
        assert_eq!(whole.mask(), u64::MAX);
        assert_eq!(whole.get(0x1234), 0x1234);
        let top = Field::new(63, 1);
        assert_eq!(top.mask(), 1 << 63);
        assert!(top.flag(1 << 63));
        // Out-of-range fields cannot be built outside the crate; they are
        // still harmless.
        let nowhere = Field::new(64, 4);
        assert_eq!(nowhere.mask(), 0);
        assert_eq!(nowhere.get(u64::MAX), 0);
        assert_eq!(nowhere.set(7, 1), 7);
    }
}

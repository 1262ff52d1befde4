//! One declarative way to declare a register, shared by every
//! architecture's layouts and by the models: a [`Field`] is a position and a
//! width, and `register!` declares a typed register image from a list of
//! fields, generating its accessors, so no register image is shifted or
//! masked by hand anywhere else.

/// A bit field of a 64-bit register: `bits` bits starting at bit `lsb`.
///
/// Every register layout of the crate is declared with these, for both
/// architectures: the NetBurst ESCR and CCCR fields (SDM Figures 18-44 and
/// 18-45) and the Itanium per-generation layouts
/// ([`crate::arch::itanium::CounterLayout`] and the constants in the
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
    #[inline]
    pub const fn lsb(self) -> u8 {
        self.lsb
    }

    /// The width in bits.
    #[inline]
    pub const fn bits(self) -> u8 {
        self.bits
    }

    /// The highest bit.
    #[inline]
    pub const fn msb(self) -> u8 {
        self.lsb.saturating_add(self.bits).saturating_sub(1)
    }

    /// The largest value the field holds.
    #[inline]
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
    #[inline]
    pub const fn mask(self) -> u64 {
        if self.lsb >= 64 {
            0
        } else {
            self.max() << self.lsb
        }
    }

    /// The field's value in `raw`.
    #[inline]
    pub const fn get(self, raw: u64) -> u64 {
        if self.lsb >= 64 {
            0
        } else {
            (raw >> self.lsb) & self.max()
        }
    }

    /// `raw` with the field replaced by `v` (truncated to the field).
    #[inline]
    pub const fn set(self, raw: u64, v: u64) -> u64 {
        if self.lsb >= 64 {
            raw
        } else {
            (raw & !self.mask()) | ((v & self.max()) << self.lsb)
        }
    }

    /// Whether `v` fits the field.
    #[inline]
    pub const fn fits(self, v: u64) -> bool {
        v <= self.max()
    }

    /// A one-bit field's value.
    #[inline]
    pub const fn flag(self, raw: u64) -> bool {
        self.get(raw) != 0
    }

    /// `raw` with a one-bit field set or cleared.
    #[inline]
    pub const fn set_flag(self, raw: u64, on: bool) -> u64 {
        self.set(raw, on as u64)
    }
}

/// Declares a register image type and its fields, in the spirit of
/// `tock-registers`' `register_bitfields!`: one line per field, with its
/// bits (as the manual's figure writes them, `lsb` or `lsb..=msb`) and,
/// optionally, a getter and a `with_` setter and the type they speak:
///
/// ```text
/// register! {
///     /// An ESCR image (SDM Figure 18-44).
///     #[derive(Clone, Copy)]
///     pub struct EscrValue(u64) {
///         /// Tag enable.
///         TAG_ENABLE: 4 => tag_enable, with_tag_enable: bool;
///         /// Event select.
///         EVENT_SELECT: 25..=30 => event_select, with_event_select: EventSelect;
///         /// Bit 31: reserved, no accessor.
///         pub(crate) SPARE: 31;
///     }
/// }
/// ```
///
/// With `struct Name(u64): from_bits { .. }` it also defines a `from_bits`
/// that keeps every bit (for registers read whole, such as CPUID leaves).
///
/// A field line may name a getter only (`FIELD: 3..=29 => mask: u32;`):
/// for fields whose setter refuses values (returning an `Option` or a
/// `Result`), which the type then writes over the field constant.
///
/// With `impl Name(u64) { .. }` it declares the fields and accessors only,
/// for a struct written by hand because it holds more than the image or its
/// constructors have another shape (the Itanium opcode matchers, the
/// instruction range configuration); the struct provides `const fn
/// bits(self)` and `const fn with_bits(self, raw)`. (The Itanium PMC
/// images, whose constructors check reserved bits against a descriptor
/// row, are declared with `pmc_register!`, in `arch::itanium`, which builds
/// on this one.)
///
/// Every `struct` form defines the struct over its storage (`u8`, `u16`,
/// `u32` or `u64`), and every form an associated [`Field`] constant per
/// field (private unless given a visibility), `DEFINED` (every bit some
/// field declares); the `struct` forms also `bits()` and a private
/// `with_bits(raw)` (the same register, another image). The accessors:
/// `bool` for one-bit flags, the storage integers as they are, and any
/// other type through its `from_field(u64) -> Self` and
/// `into_field(self) -> u64` (`const fn`s, total: a field value always
/// converts). Every accessor is a `const fn`.
macro_rules! register {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident($repr:ident): from_bits { $($body:tt)* }
    ) => {
        $crate::register::register! {
            $(#[$meta])*
            $vis struct $name($repr) { $($body)* }
        }

        impl $name {
            /// The image `raw`, every bit kept (reserved ones included).
            #[inline]
            pub const fn from_bits(raw: $repr) -> $name {
                $name(raw)
            }
        }
    };
    (
        impl $name:ident($repr:ident) { $($body:tt)* }
    ) => {
        $crate::register::register!(@fields $name, $repr { $($body)* });
    };
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident($repr:ident) { $($body:tt)* }
    ) => {
        $(#[$meta])*
        $vis struct $name($repr);

        #[allow(dead_code)]
        impl $name {
            /// The register image.
            #[inline]
            pub const fn bits(self) -> $repr {
                self.0
            }

            const fn with_bits(self, raw: $repr) -> $name {
                $name(raw)
            }
        }

        $crate::register::register!(@fields $name, $repr { $($body)* });
    };
    (
        @fields $name:ident, $repr:ident {
            $(
                $(#[$fmeta:meta])*
                $fvis:vis $field:ident : $lsb:literal $(..= $msb:literal)?
                    $(=> $get:ident $(, $set:ident)? : $ty:tt)?;
            )*
        }
    ) => {
        #[allow(dead_code)]
        impl $name {
            $(
                $(#[$fmeta])*
                $fvis const $field: $crate::register::Field =
                    $crate::register::Field::new($lsb, $crate::register::register!(@width $lsb $(, $msb)?));
            )*

            /// Every bit that one of the register's fields declares.
            pub const DEFINED: u64 = 0 $(| Self::$field.mask())*;

            $(
                $crate::register::register!(
                    @accessors $name, $repr, $field, [$(#[$fmeta])*] $(, $get, [$($set)?], $ty)?
                );
            )*
        }
    };
    (@accessors $name:ident, $repr:ident, $field:ident, [$(#[$m:meta])*]) => {};
    (
        @accessors $name:ident, $repr:ident, $field:ident, [$(#[$m:meta])*],
        $get:ident, [], $ty:tt
    ) => {
        $(#[$m])*
        #[inline]
        pub const fn $get(self) -> $ty {
            $crate::register::register!(@get $ty, Self::$field, self.bits() as u64)
        }
    };
    (
        @accessors $name:ident, $repr:ident, $field:ident, [$(#[$m:meta])*],
        $get:ident, [$set:ident], $ty:tt
    ) => {
        $crate::register::register!(@accessors $name, $repr, $field, [$(#[$m])*], $get, [], $ty);

        #[doc = concat!("With `", stringify!($field), "` replaced ([`",
            stringify!($name), "::", stringify!($get), "`]).")]
        #[inline]
        pub const fn $set(self, v: $ty) -> $name {
            self.with_bits(
                Self::$field.set(self.bits() as u64, $crate::register::register!(@put $ty, v)) as $repr,
            )
        }
    };
    (@width $lsb:literal) => { 1 };
    (@width $lsb:literal, $msb:literal) => { $msb - $lsb + 1 };
    (@get bool, $f:expr, $raw:expr) => { $f.flag($raw) };
    (@get u8, $f:expr, $raw:expr) => { $f.get($raw) as u8 };
    (@get u16, $f:expr, $raw:expr) => { $f.get($raw) as u16 };
    (@get u32, $f:expr, $raw:expr) => { $f.get($raw) as u32 };
    (@get u64, $f:expr, $raw:expr) => { $f.get($raw) };
    (@get $ty:ident, $f:expr, $raw:expr) => { $ty::from_field($f.get($raw)) };
    (@put bool, $v:expr) => { $v as u64 };
    (@put u8, $v:expr) => { $v as u64 };
    (@put u16, $v:expr) => { $v as u64 };
    (@put u32, $v:expr) => { $v as u64 };
    (@put u64, $v:expr) => { $v };
    (@put $ty:ident, $v:expr) => { $v.into_field() };
}
pub(crate) use register;

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

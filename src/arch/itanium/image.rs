//! The boilerplate shared by the generation-tagged PMC images
//! ([`super::IearConfig`], [`super::DearConfig`], [`super::BtbConfig`]).
//!
//! Each is a `{ generation, bits }` pair whose writable bits come from the
//! generation's [`super::PmcInfo`] (returned by the type's own `info`).
//! [`pmc_image!`] declares the struct and its decoding, accessors and the
//! private `with(bits)` rebuild; [`pmc_image_plm_pm!`] adds the `plm` and
//! `pm` accessors for the images whose fields sit at fixed positions.

/// Declare a generation-tagged PMC image: the struct (with the attributes
/// and doc comment given) and `from_bits_truncate`, `from_bits`, `bits`,
/// `generation` and the private `with`. The type must provide
/// `const fn info(Generation) -> PmcInfo`.
macro_rules! pmc_image {
    ($(#[$attr:meta])* $name:ident) => {
        $(#[$attr])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        pub struct $name {
            generation: $crate::arch::itanium::Generation,
            bits: u64,
        }

        impl $name {
            /// Decode any raw value, replacing non-writable bits by their power-up
            /// values.
            pub const fn from_bits_truncate(
                generation: $crate::arch::itanium::Generation,
                raw: u64,
            ) -> $name {
                $name {
                    generation,
                    bits: Self::info(generation).merge(raw),
                }
            }

            /// Decode a raw value, refusing non-writable bits that differ from the
            /// power-up value.
            pub const fn from_bits(
                generation: $crate::arch::itanium::Generation,
                raw: u64,
            ) -> Result<$name, $crate::arch::itanium::ReservedBits> {
                let r = Self::info(generation).reserved_bits(raw);
                if r != 0 {
                    Err($crate::arch::itanium::ReservedBits(r))
                } else {
                    Ok($name {
                        generation,
                        bits: raw,
                    })
                }
            }

            /// The register image.
            pub const fn bits(self) -> u64 {
                self.bits
            }

            /// The generation.
            pub const fn generation(self) -> $crate::arch::itanium::Generation {
                self.generation
            }

            const fn with(self, bits: u64) -> $name {
                $name {
                    generation: self.generation,
                    bits,
                }
            }
        }
    };
}

/// Add `plm`, `with_plm`, `privileged` and `with_privileged` to a
/// [`pmc_image!`] type whose `plm` and `pm` fields are the constant
/// [`crate::arch::Field`]s given, at the same place on every generation;
/// `$pm_doc` documents `privileged`.
macro_rules! pmc_image_plm_pm {
    ($name:ident, plm: $plm:expr, pm: $pm:expr, $pm_doc:literal) => {
        impl $name {
            /// The privilege level mask.
            pub const fn plm(self) -> $crate::arch::itanium::Plm {
                $crate::arch::itanium::Plm::from_bits_truncate($plm.get(self.bits))
            }

            /// With the privilege level mask replaced.
            pub const fn with_plm(self, plm: $crate::arch::itanium::Plm) -> $name {
                self.with($plm.set(self.bits, plm.get() as u64))
            }

            #[doc = $pm_doc]
            pub const fn privileged(self) -> bool {
                $pm.flag(self.bits)
            }

            /// With the `pm` bit set or cleared.
            pub const fn with_privileged(self, on: bool) -> $name {
                self.with($pm.set_flag(self.bits, on))
            }
        }
    };
}

pub(crate) use pmc_image;
pub(crate) use pmc_image_plm_pm;

/// The [`super::PmcInfo`] of `pmc` on `generation`, or one with nothing
/// writable (so every set bit is reserved) if the generation has no such
/// register.
pub(crate) const fn info_or_empty(
    generation: super::generation::Generation,
    pmc: u8,
) -> super::generation::PmcInfo {
    match generation.pmc(pmc) {
        Some(i) => i,
        None => super::generation::PmcInfo {
            kind: super::generation::PmcKind::Overflow,
            default: 0,
            writable: 0,
            pmds: super::generation::RegSet::EMPTY,
        },
    }
}

/// Declare a PMC image of one fixed register (a tuple struct around the
/// raw value) with the attributes and doc comment given, `from_bits`
/// (refusing the reserved bits of the `PmcInfo` expression `$info`,
/// documented by `$from_bits_doc`) and `bits`.
macro_rules! fixed_pmc_image {
    ($(#[$attr:meta])* $name:ident, info: $info:expr, from_bits_doc: $from_bits_doc:literal) => {
        $(#[$attr])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        pub struct $name(u64);

        impl $name {
            #[doc = $from_bits_doc]
            pub const fn from_bits(
                raw: u64,
            ) -> Result<$name, $crate::arch::itanium::ReservedBits> {
                let r = $info.reserved_bits(raw);
                if r != 0 {
                    Err($crate::arch::itanium::ReservedBits(r))
                } else {
                    Ok($name(raw))
                }
            }

            /// The register image.
            pub const fn bits(self) -> u64 {
                self.0
            }
        }
    };
}

pub(crate) use fixed_pmc_image;

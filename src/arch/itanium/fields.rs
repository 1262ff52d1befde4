//! The bit fields of the PMC layouts (documented on [`Plm`]).

use core::fmt;

use super::generation::{Counter, Generation};

/// A register value with bits outside the register's writable fields that
/// differ from the register's power-up value: the offending bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ReservedBits(pub u64);

impl fmt::Display for ReservedBits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "reserved bits {:#x} differ from their power-up value",
            self.0
        )
    }
}

impl core::error::Error for ReservedBits {}

/// Declares an Itanium PMC image with `register!`'s field lines, whose
/// writable bits and power-up value come from a row of the generation's PMC
/// descriptor table ([`PmcInfo`](crate::arch::itanium::PmcInfo)); three
/// forms:
///
/// * `struct Name(u64): pmc(INFO) { .. }`, one fixed register whose row is
///   the expression `INFO`: `from_bits` refuses a value whose bits outside
///   the writable fields differ from the power-up value ([`ReservedBits`]);
/// * `struct Name(vis key: Key, u64): pmc(info) { .. }`, a register whose
///   number and layout depend on `key` (a [`Counter`] for the counter
///   configurations), the struct holding both; `info` is a
///   `const fn(Key) -> PmcInfo`. It adds `from_bits(key, raw)` (refusing as
///   above), `from_bits_truncate(key, raw)` (replacing those bits by their
///   power-up values, perfmon's rule) and the accessor `key()` (of
///   visibility `vis`);
/// * `struct Name(Generation, u64): pmc(info) { .. }`, short for
///   `struct Name(pub generation: Generation, u64): pmc(info) { .. }`.
///
/// The fields, `DEFINED`, `bits()`, `with_bits(raw)` and the accessors are
/// `register!`'s.
macro_rules! pmc_register {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident(Generation, u64): pmc($info:path) { $($body:tt)* }
    ) => {
        $crate::arch::itanium::pmc_register! {
            $(#[$meta])*
            $vis struct $name(pub generation: $crate::arch::itanium::Generation, u64):
                pmc($info) { $($body)* }
        }
    };
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident($kvis:vis $key:ident: $kty:ty, u64): pmc($info:path) {
            $($body:tt)*
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $key: $kty,
            bits: u64,
        }

        #[allow(dead_code)]
        impl $name {
            /// Decode any raw value, replacing the bits outside the writable
            /// fields by their power-up values (perfmon's rule).
            #[inline]
            pub const fn from_bits_truncate($key: $kty, raw: u64) -> $name {
                $name {
                    $key,
                    bits: $info($key).merge(raw),
                }
            }

            /// Decode a raw value, refusing bits outside the writable fields
            /// that differ from the power-up value.
            #[inline]
            pub const fn from_bits(
                $key: $kty,
                raw: u64,
            ) -> Result<$name, $crate::arch::itanium::ReservedBits> {
                match $info($key).reserved_bits(raw) {
                    0 => Ok($name { $key, bits: raw }),
                    r => Err($crate::arch::itanium::ReservedBits(r)),
                }
            }

            /// The register image.
            #[inline]
            pub const fn bits(self) -> u64 {
                self.bits
            }

            #[doc = concat!("The ", stringify!($key), ".")]
            #[inline]
            $kvis const fn $key(self) -> $kty {
                self.$key
            }

            const fn with_bits(self, bits: u64) -> $name {
                $name {
                    $key: self.$key,
                    bits,
                }
            }
        }

        $crate::register::register!(@fields $name, u64 { $($body)* });
    };
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident(u64): pmc($info:expr) { $($body:tt)* }
    ) => {
        $crate::register::register! {
            $(#[$meta])*
            $vis struct $name(u64) { $($body)* }
        }

        impl $name {
            /// Decode a raw value, refusing bits outside the writable fields
            /// that differ from the power-up value.
            #[inline]
            pub const fn from_bits(raw: u64) -> Result<$name, $crate::arch::itanium::ReservedBits> {
                match $info.reserved_bits(raw) {
                    0 => Ok($name(raw)),
                    r => Err($crate::arch::itanium::ReservedBits(r)),
                }
            }
        }
    };
}
pub(crate) use pmc_register;

/// The privilege level mask, bits 3:0 of every monitor configuration
/// register (libpfm3; VTune's Itanium event help, "PLM"): bit n enables
/// monitoring at privilege level n. All zero disables the monitor, and then
/// the processor need not preserve the monitor's PMD (VTune, "PLM").
///
/// # The field types
///
/// The bounded field types shared by the Itanium register layouts (the bit
/// positions themselves are [`crate::register::Field`]s): privilege level mask, instruction set mask, unit mask, event
/// code, threshold, instruction slot, and the errors the typed builders
/// return.
///
/// Every type here is a value that cannot hold an out-of-range field: the
/// constructors return `None` (or a [`FieldError`]) instead of truncating.
///
/// # Examples
///
/// ```
/// use pmu::arch::itanium::{EventCode, Generation, Plm};
///
/// assert_eq!(Plm::new(0b1001), Some(Plm::KERNEL.with_level(3).unwrap()));
/// assert!(Plm::new(16).is_none());
/// // The first Itanium's event select is 7 bits wide (PMC bits 14:8).
/// assert!(EventCode::new(Generation::Itanium, 0x80).is_none());
/// assert!(EventCode::new(Generation::Itanium2, 0x80).is_some());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Plm(u8);

impl Plm {
    /// No privilege level: the monitor is disabled.
    pub const NONE: Plm = Plm(0);
    /// Privilege level 0 only (the kernel).
    pub const KERNEL: Plm = Plm(1);
    /// Privilege level 3 only (user code).
    pub const USER: Plm = Plm(8);
    /// All four privilege levels.
    pub const ALL: Plm = Plm(0xF);

    /// `Some` if `v` fits in 4 bits.
    pub const fn new(v: u8) -> Option<Plm> {
        if v < 16 { Some(Plm(v)) } else { None }
    }

    /// The low 4 bits of `v`.
    pub const fn from_bits_truncate(v: u64) -> Plm {
        Plm((v & 0xF) as u8)
    }

    /// The mask with privilege level `cpl` (0-3) added; `None` above 3.
    pub const fn with_level(self, cpl: u8) -> Option<Plm> {
        if cpl < 4 {
            Some(Plm(self.0 | 1 << cpl))
        } else {
            None
        }
    }

    /// Whether the monitor counts at privilege level `cpl` (false above 3).
    pub const fn counts_at(self, cpl: u8) -> bool {
        cpl < 4 && self.0 & (1 << cpl) != 0
    }

    /// The 4 bits.
    pub const fn get(self) -> u8 {
        self.0
    }

    /// The `plm` field of a register image (`register!`).
    pub(crate) const fn from_field(v: u64) -> Plm {
        Plm::from_bits_truncate(v)
    }

    /// The field value (`register!`).
    pub(crate) const fn into_field(self) -> u64 {
        self.0 as u64
    }
}

/// The instruction set mask (VTune's Itanium event help, "ISM": bits 25:24
/// of PMC4-7, 10, 11 on Itanium; libpfm3's counter and I-EAR layouts for
/// Itanium 2, where the I-EAR's ISM moved to PMC10 bits 15:14). The
/// discriminant is the 2-bit field value: bit 24 low enables IA-64
/// monitoring, bit 25 low enables IA-32 monitoring.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum Ism {
    /// 00: monitor IA-64 and IA-32 instructions (regardless of PSR.is).
    #[default]
    Both = 0,
    /// 01: IA-32 only (PSR.is = 1).
    Ia32Only = 1,
    /// 10: IA-64 only (PSR.is = 0). The only value Montecito allows
    /// (libpfm3's Montecito counter layout: ism "must be 2").
    Ia64Only = 2,
    /// 11: monitoring disabled.
    Disabled = 3,
}

impl Ism {
    /// From the 2-bit field (higher bits ignored).
    pub const fn from_bits(v: u64) -> Ism {
        match v & 3 {
            0 => Ism::Both,
            1 => Ism::Ia32Only,
            2 => Ism::Ia64Only,
            _ => Ism::Disabled,
        }
    }

    /// The 2-bit field value.
    pub const fn bits(self) -> u8 {
        self as u8
    }

    /// Whether IA-64 instructions are monitored.
    pub const fn monitors_ia64(self) -> bool {
        matches!(self, Ism::Both | Ism::Ia64Only)
    }

    /// Whether IA-32 instructions are monitored.
    pub const fn monitors_ia32(self) -> bool {
        matches!(self, Ism::Both | Ism::Ia32Only)
    }
}

/// A 4-bit unit mask (counter PMC bits 19:16; the D-EAR's PMC11 bits 19:16;
/// the Itanium I-EAR's PMC10 bits 19:16).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Umask(u8);

impl Umask {
    /// `Some` if `v` fits in 4 bits.
    pub const fn new(v: u8) -> Option<Umask> {
        if v < 16 { Some(Umask(v)) } else { None }
    }

    /// The low 4 bits of `v`.
    pub const fn from_bits_truncate(v: u64) -> Umask {
        Umask((v & 0xF) as u8)
    }

    /// The value (0-15).
    pub const fn get(self) -> u8 {
        self.0
    }

    /// The unit mask field of a register image (`register!`).
    pub(crate) const fn from_field(v: u64) -> Umask {
        Umask::from_bits_truncate(v)
    }

    /// The field value (`register!`).
    pub(crate) const fn into_field(self) -> u64 {
        self.0 as u64
    }
}

/// An event code for the `es` field: 7 bits on Itanium (bits 14:8), 8 bits
/// on Itanium 2 and Montecito (bits 15:8) (libpfm3; VTune's Itanium event
/// help, "ES, bit 14:8").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EventCode(u8);

impl EventCode {
    /// `Some` if `code` fits the `es` field of `generation`.
    pub const fn new(generation: Generation, code: u8) -> Option<EventCode> {
        if (code as u32) < 1u32 << generation.event_code_bits() {
            Some(EventCode(code))
        } else {
            None
        }
    }

    /// The code.
    pub const fn get(self) -> u8 {
        self.0
    }
}

/// A counter threshold (counter PMC bits 22:20), bounded by the width of the
/// field on the counter it was made for: 2 bits on Itanium PMC6/7 (bits
/// 21:20), 3 bits everywhere else (VTune's Itanium event help, "Threshold";
/// libpfm3).
///
/// With a threshold of zero the counter adds the event's per-cycle count;
/// with a threshold n > 0 it adds one in every cycle in which the event's
/// count exceeds n (VTune, "Threshold").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Threshold {
    value: u8,
    bits: u8,
}

impl Threshold {
    /// Zero: count every occurrence.
    pub const ZERO: Threshold = Threshold { value: 0, bits: 2 };

    /// `Some` if `value` fits the threshold field of `counter`.
    pub const fn new(counter: Counter, value: u8) -> Option<Threshold> {
        let bits = counter.threshold_bits();
        if (value as u32) < 1u32 << bits {
            Some(Threshold { value, bits })
        } else {
            None
        }
    }

    /// The value.
    pub const fn get(self) -> u8 {
        self.value
    }

    /// The width of the field it was checked against (2 or 3).
    pub const fn bits(self) -> u8 {
        self.bits
    }

    /// Whether it fits a field `bits` wide.
    pub const fn fits(self, bits: u8) -> bool {
        (self.value as u32) < 1u32 << bits
    }
}

/// An instruction slot within a 16-byte bundle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum Slot {
    /// Slot 0.
    S0 = 0,
    /// Slot 1.
    S1 = 1,
    /// Slot 2.
    S2 = 2,
}

impl Slot {
    /// From a 2-bit slot field: `None` for 3, which is not a slot (the
    /// branch trace buffer uses it for "not taken", libpfm3's BTB layout).
    pub const fn from_bits(v: u64) -> Option<Slot> {
        match v & 3 {
            0 => Some(Slot::S0),
            1 => Some(Slot::S1),
            2 => Some(Slot::S2),
            _ => None,
        }
    }

    /// The slot number.
    pub const fn get(self) -> u8 {
        self as u8
    }
}

/// Why a typed builder refused a field value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum FieldError {
    /// The event code does not fit the generation's `es` field.
    EventCodeTooWide {
        /// The code.
        code: u8,
        /// The field width.
        bits: u8,
    },
    /// The threshold does not fit the counter's threshold field.
    ThresholdTooWide {
        /// The threshold.
        value: u8,
        /// The field width on this counter.
        bits: u8,
    },
    /// The register has no such field on this generation (for example the
    /// enable bit on anything but Itanium 2 PMC4, or the `all` bit before
    /// Montecito).
    NoSuchField {
        /// The field's name.
        field: &'static str,
        /// The generation.
        generation: Generation,
        /// The register.
        pmc: u8,
    },
    /// Montecito monitors only IA-64 code: the ISM field must stay 10b.
    IsmFixed,
    /// The event belongs to another generation's catalog.
    WrongGeneration {
        /// The counter's generation.
        expected: Generation,
        /// The event's.
        found: Generation,
    },
    /// The catalog does not allow the event on this counter.
    EventNotOnCounter {
        /// The event's name.
        event: &'static str,
        /// The counter.
        pmc: u8,
    },
    /// An L2 TLB fill was asked of the Itanium I-EAR: Itanium has no L2
    /// instruction TLB fill to capture (HP Caliper's itlb measurement: "L2
    /// fills are not reported for, and do not apply to, Itanium systems").
    L2FillNotOnItanium,
    /// The EAR has no encoding for this latency threshold on this generation.
    LatencyNotAvailable {
        /// The generation.
        generation: Generation,
    },
    /// The D-EAR's ALAT mode does not exist on Itanium.
    AlatNotOnItanium,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            FieldError::EventCodeTooWide { code, bits } => {
                write!(f, "event code {code:#x} does not fit a {bits}-bit es field")
            }
            FieldError::ThresholdTooWide { value, bits } => write!(
                f,
                "threshold {value} does not fit this counter's {bits}-bit threshold field"
            ),
            FieldError::NoSuchField {
                field,
                generation,
                pmc,
            } => write!(
                f,
                "PMC{pmc} has no `{field}` field on {}",
                generation.name()
            ),
            FieldError::IsmFixed => {
                f.write_str("Montecito monitors IA-64 code only: ISM must be 10b")
            }
            FieldError::WrongGeneration { expected, found } => write!(
                f,
                "event from the {} catalog used on {}",
                found.name(),
                expected.name()
            ),
            FieldError::EventNotOnCounter { event, pmc } => {
                write!(f, "event {event} cannot be counted on PMC{pmc}")
            }
            FieldError::L2FillNotOnItanium => f.write_str(
                "the Itanium I-EAR has no L2 ITLB fill to capture (L2 fills do not apply to Itanium)",
            ),
            FieldError::LatencyNotAvailable { generation } => write!(
                f,
                "this EAR latency threshold has no encoding on {}",
                generation.name()
            ),
            FieldError::AlatNotOnItanium => {
                f.write_str("the D-EAR ALAT mode exists from Itanium 2 on")
            }
        }
    }
}

impl core::error::Error for FieldError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_types() {
        assert_eq!(Plm::new(16), None);
        assert_eq!(Plm::KERNEL.with_level(3), Some(Plm::new(9).unwrap()));
        assert_eq!(Plm::ALL.with_level(4), None);
        assert!(Plm::USER.counts_at(3) && !Plm::USER.counts_at(0));
        assert!(!Plm::ALL.counts_at(200));
        for v in 0..4u64 {
            assert_eq!(Ism::from_bits(v).bits() as u64, v);
        }
        assert!(Ism::Both.monitors_ia32() && Ism::Both.monitors_ia64());
        assert!(Ism::Ia64Only.monitors_ia64() && !Ism::Ia64Only.monitors_ia32());
        assert!(!Ism::Disabled.monitors_ia64() && !Ism::Disabled.monitors_ia32());
        assert_eq!(Umask::new(16), None);
        assert_eq!(EventCode::new(Generation::Itanium, 0x80), None);
        assert!(EventCode::new(Generation::Itanium, 0x7F).is_some());
        assert!(EventCode::new(Generation::Itanium2, 0xFF).is_some());
        assert_eq!(Slot::from_bits(3), None);
        assert_eq!(Slot::from_bits(2), Some(Slot::S2));
    }

    #[test]
    fn threshold_width_is_per_counter() {
        let ita = |n| Counter::new(Generation::Itanium, n).unwrap();
        let ita2 = |n| Counter::new(Generation::Itanium2, n).unwrap();
        for n in [4, 5] {
            assert!(Threshold::new(ita(n), 7).is_some());
            assert_eq!(Threshold::new(ita(n), 8), None);
            assert_eq!(Threshold::new(ita(n), 7).unwrap().bits(), 3);
        }
        for n in [6, 7] {
            assert!(Threshold::new(ita(n), 3).is_some());
            assert_eq!(Threshold::new(ita(n), 4), None);
            assert_eq!(Threshold::new(ita(n), 3).unwrap().bits(), 2);
        }
        for n in 4..8 {
            assert!(Threshold::new(ita2(n), 7).is_some());
            assert_eq!(Threshold::new(ita2(n), 8), None);
        }
    }
}

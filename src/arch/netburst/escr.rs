//! The ESCR register layout (documented on [`EscrValue`]).

use crate::register::register;

/// A 6-bit event select (ESCR bits 30:25).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EventSelect(u8);

impl EventSelect {
    /// `Some` if `v` fits in 6 bits.
    pub const fn new(v: u8) -> Option<EventSelect> {
        if v < 64 { Some(EventSelect(v)) } else { None }
    }

    /// The low 6 bits of `v`.
    pub const fn from_bits_truncate(v: u8) -> EventSelect {
        EventSelect(v & 0x3F)
    }

    /// The value (0-63).
    pub const fn get(self) -> u8 {
        self.0
    }

    /// From the ESCR's field (`register!`).
    const fn from_field(v: u64) -> EventSelect {
        EventSelect::from_bits_truncate(v as u8)
    }

    /// As the ESCR's field (`register!`).
    const fn into_field(self) -> u64 {
        self.0 as u64
    }
}

/// The 16-bit event mask (ESCR bits 24:9); bit n is the SDM's "mask bit n".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EventMask(pub u16);

impl EventMask {
    /// No mask bit.
    pub const EMPTY: EventMask = EventMask(0);

    /// The mask with SDM mask bit `bit` (0-15) set, `None` above 15.
    pub const fn bit(bit: u8) -> Option<EventMask> {
        if bit < 16 {
            Some(EventMask(1 << bit))
        } else {
            None
        }
    }

    /// The raw 16 bits.
    pub const fn get(self) -> u16 {
        self.0
    }

    /// From the ESCR's field (`register!`).
    const fn from_field(v: u64) -> EventMask {
        EventMask(v as u16)
    }

    /// As the ESCR's field (`register!`).
    const fn into_field(self) -> u64 {
        self.0 as u64
    }

    /// Union.
    pub const fn union(self, other: EventMask) -> EventMask {
        EventMask(self.0 | other.0)
    }

    /// Whether SDM mask bit `bit` is set.
    pub const fn contains_bit(self, bit: u8) -> bool {
        bit < 16 && self.0 & (1 << bit) != 0
    }

    /// Whether every bit of `other` is set here.
    pub const fn contains(self, other: EventMask) -> bool {
        self.0 & other.0 == other.0
    }

    /// For `execution_event`: the tag bits n whose µops the mask counts,
    /// `NBOGUSn` (mask bit n) or `BOGUSn` (mask bit 4 + n) (SDM Table
    /// 19-32).
    pub const fn execution_tag_bits(self) -> u8 {
        ((self.0 | self.0 >> 4) & 0xF) as u8
    }
}

/// A 4-bit tag value (ESCR bits 8:5), used by execution tagging (SDM
/// 18.15.6.3): tag bit n is counted downstream by `NBOGUSn`/`BOGUSn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TagValue(u8);

impl TagValue {
    /// `Some` if `v` fits in 4 bits.
    pub const fn new(v: u8) -> Option<TagValue> {
        if v < 16 { Some(TagValue(v)) } else { None }
    }

    /// The low 4 bits of `v`.
    pub const fn from_bits_truncate(v: u8) -> TagValue {
        TagValue(v & 0xF)
    }

    /// The value (0-15).
    pub const fn get(self) -> u8 {
        self.0
    }

    /// From the ESCR's field (`register!`).
    const fn from_field(v: u64) -> TagValue {
        TagValue::from_bits_truncate(v as u8)
    }

    /// As the ESCR's field (`register!`).
    const fn into_field(self) -> u64 {
        self.0 as u64
    }
}

/// The four CPL/thread qualification flags of an ESCR (bits 3:0).
///
/// On non-HT parts only `t0_os` (`OS`) and `t0_usr` (`USR`) exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ThreadCpl {
    /// `T0_OS`, bit 3: count logical processor 0 at CPL 0.
    pub t0_os: bool,
    /// `T0_USR`, bit 2: count logical processor 0 at CPL 1-3.
    pub t0_usr: bool,
    /// `T1_OS`, bit 1: count logical processor 1 at CPL 0.
    pub t1_os: bool,
    /// `T1_USR`, bit 0: count logical processor 1 at CPL 1-3.
    pub t1_usr: bool,
}

impl ThreadCpl {
    /// No flag set: the event never counts.
    pub const NONE: ThreadCpl = ThreadCpl::from_bits(0);
    /// All four flags: both logical processors, every CPL.
    pub const ALL: ThreadCpl = ThreadCpl::from_bits(0xF);

    /// From ESCR bits 3:0 (higher bits ignored).
    pub const fn from_bits(b: u8) -> ThreadCpl {
        ThreadCpl::from_field(b as u64)
    }

    /// As ESCR bits 3:0.
    pub const fn bits(self) -> u8 {
        self.into_field() as u8
    }

    /// From the ESCR's field (`register!`). The field starts at bit 0, so
    /// its value is an ESCR image of bits 3:0, read with the flags' own
    /// accessors.
    const fn from_field(v: u64) -> ThreadCpl {
        let escr = EscrValue(v);
        ThreadCpl {
            t0_os: escr.t0_os(),
            t0_usr: escr.t0_usr(),
            t1_os: escr.t1_os(),
            t1_usr: escr.t1_usr(),
        }
    }

    /// As the ESCR's field (`register!`).
    const fn into_field(self) -> u64 {
        EscrValue(0)
            .with_t0_os(self.t0_os)
            .with_t0_usr(self.t0_usr)
            .with_t1_os(self.t1_os)
            .with_t1_usr(self.t1_usr)
            .0
    }

    /// The same OS/USR choice for both logical processors (what libpfm4's
    /// `k` and `u` modifiers do).
    pub const fn both_threads(os: bool, usr: bool) -> ThreadCpl {
        ThreadCpl {
            t0_os: os,
            t0_usr: usr,
            t1_os: os,
            t1_usr: usr,
        }
    }
}

register! {
    /// The ESCR register layout (SDM Vol. 3B Figure 18-43, non-HT, and Figure
    /// 18-45/18-47, Hyper-Threading).
    ///
    /// | bits | field |
    /// |---|---|
    /// | 0 | `T1_USR` (reserved on non-HT parts) |
    /// | 1 | `T1_OS` (reserved on non-HT parts) |
    /// | 2 | `T0_USR` (`USR` on non-HT parts) |
    /// | 3 | `T0_OS` (`OS` on non-HT parts) |
    /// | 4 | tag enable |
    /// | 8:5 | tag value |
    /// | 24:9 | event mask (SDM mask bit n = ESCR bit 9 + n) |
    /// | 30:25 | event select |
    /// | 31, 63:32 | reserved |
    ///
    /// Source disagreement: most per-event rows of SDM Tables 19-28/19-29 write
    /// the event select as `ESCR[31:25]`, others as `ESCR[30:25]`; the register
    /// figures and the 18.15.1 text say bits 30:25 with bit 31 reserved, and so do
    /// Linux, libpfm4, oprofile and perfctr. This crate follows the figures: a
    /// 6-bit event select at 30:25.
    ///
    /// # Examples
    ///
    /// ```
    /// use pmu::arch::netburst::{EscrValue, EventMask, EventSelect, ThreadCpl};
    ///
    /// // instr_retired (event select 02h), NBOGUSNTAG (mask bit 0), T0 at CPL 0:
    /// let v = EscrValue::new(EventSelect::new(0x02).unwrap(), EventMask::bit(0).unwrap())
    ///     .with_cpl(ThreadCpl { t0_os: true, ..ThreadCpl::NONE });
    /// assert_eq!(v.bits(), 0x02 << 25 | 1 << 9 | 1 << 3);
    /// assert_eq!(EscrValue::from_bits(v.bits()), Ok(v));
    /// ```
    ///
    /// An ESCR value whose reserved bits are zero by construction (SDM
    /// Figure 18-44).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct EscrValue(u64) {
        /// The CPL/thread flags (bits 3:0).
        CPL: 0..=3 => cpl, with_cpl: ThreadCpl;
        /// `T1_USR` (bit 0; reserved on parts without Hyper-Threading).
        T1_USR: 0 => t1_usr, with_t1_usr: bool;
        /// `T1_OS` (bit 1; reserved on parts without Hyper-Threading).
        T1_OS: 1 => t1_os, with_t1_os: bool;
        /// `T0_USR` (bit 2; `USR` on parts without Hyper-Threading).
        T0_USR: 2 => t0_usr, with_t0_usr: bool;
        /// `T0_OS` (bit 3; `OS` on parts without Hyper-Threading).
        T0_OS: 3 => t0_os, with_t0_os: bool;
        /// Tag enable (bit 4).
        TAG_ENABLE: 4 => tag_enable, with_tag_enable: bool;
        /// Tag value (bits 8:5).
        TAG_VALUE: 5..=8 => tag_value, with_tag_value: TagValue;
        /// Event mask (bits 24:9).
        EVENT_MASK: 9..=24 => event_mask, with_event_mask: EventMask;
        /// Event select (bits 30:25).
        EVENT_SELECT: 25..=30 => event_select, with_event_select: EventSelect;
    }
}

impl EscrValue {
    /// Reserved bits on Hyper-Threading parts: 31 and 63:32.
    pub const RESERVED: u64 = !Self::DEFINED;
    /// Reserved bits on parts without Hyper-Threading (Figure 18-43): also
    /// bits 1:0 (`T1_OS`, `T1_USR`).
    pub const RESERVED_NON_HT: u64 = Self::RESERVED | Self::T1_OS.mask() | Self::T1_USR.mask();

    /// An ESCR selecting `select` with `mask`, no tag and no CPL flag.
    pub const fn new(select: EventSelect, mask: EventMask) -> EscrValue {
        EscrValue(0).with_event_select(select).with_event_mask(mask)
    }

    /// Decode any raw value: the reserved bits are dropped (see
    /// [`EscrValue::reserved_bits`] to find out whether there were any).
    pub const fn from_bits_truncate(raw: u64) -> EscrValue {
        EscrValue(raw & !Self::RESERVED)
    }

    /// Decode a raw value, refusing one with a reserved bit set.
    pub const fn from_bits(raw: u64) -> Result<EscrValue, ReservedBits> {
        if raw & Self::RESERVED != 0 {
            Err(ReservedBits(raw & Self::RESERVED))
        } else {
            Ok(Self::from_bits_truncate(raw))
        }
    }

    /// The reserved bits set in `raw`.
    pub const fn reserved_bits(raw: u64) -> u64 {
        raw & Self::RESERVED
    }
}

/// A raw register value had reserved bits set (the offending bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ReservedBits(pub u64);

impl core::fmt::Display for ReservedBits {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "reserved bits {:#x} are set", self.0)
    }
}

impl core::error::Error for ReservedBits {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_positions_match_the_sdm_figure() {
        let sel = EventSelect::new(0x3F).unwrap();
        assert_eq!(EscrValue::new(sel, EventMask::EMPTY).bits(), 0x7E00_0000);
        assert_eq!(
            EscrValue::new(EventSelect::new(0).unwrap(), EventMask(0xFFFF)).bits(),
            0x01FF_FE00
        );
        let z = EscrValue::from_bits_truncate(0);
        assert_eq!(z.with_tag_value(TagValue::new(0xF).unwrap()).bits(), 0x1E0);
        assert_eq!(z.with_tag_enable(true).bits(), 0x10);
        assert_eq!(z.with_t0_os(true).bits(), 8);
        assert_eq!(z.with_t0_usr(true).bits(), 4);
        assert_eq!(z.with_t1_os(true).bits(), 2);
        assert_eq!(z.with_t1_usr(true).bits(), 1);
        // global_power_events:RUNNING, all CPL flags (libpfm4 vector).
        let v = EscrValue::new(EventSelect::new(0x13).unwrap(), EventMask::bit(0).unwrap())
            .with_cpl(ThreadCpl::ALL);
        assert_eq!(v.bits(), 0x2600_020F);
    }

    #[test]
    fn out_of_range_fields_are_refused() {
        assert!(EventSelect::new(64).is_none());
        assert!(TagValue::new(16).is_none());
        assert!(EventMask::bit(16).is_none());
        assert_eq!(EventSelect::from_bits_truncate(0xFF).get(), 0x3F);
    }

    /// Deterministic xorshift so the property tests need no crate.
    fn rng(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    #[test]
    fn decode_is_total_and_round_trips() {
        let mut s = 0x1234_5678_9ABC_DEF1u64;
        for _ in 0..20_000 {
            let raw = rng(&mut s);
            let v = EscrValue::from_bits_truncate(raw);
            assert_eq!(v.bits(), raw & !EscrValue::RESERVED);
            assert_eq!(v.bits() & EscrValue::RESERVED, 0);
            assert_eq!(
                EscrValue::from_bits(raw).is_ok(),
                raw & EscrValue::RESERVED == 0
            );
            assert_eq!(EscrValue::reserved_bits(raw), raw & EscrValue::RESERVED);
            // Rebuild from the accessors.
            let rebuilt = EscrValue::new(v.event_select(), v.event_mask())
                .with_tag_value(v.tag_value())
                .with_tag_enable(v.tag_enable())
                .with_cpl(v.cpl());
            assert_eq!(rebuilt, v);
            // Builders never touch a reserved bit, whatever the input.
            let b = v
                .with_event_select(EventSelect::from_bits_truncate(raw as u8))
                .with_event_mask(EventMask((raw >> 8) as u16))
                .with_tag_value(TagValue::from_bits_truncate((raw >> 3) as u8))
                .with_t1_usr(raw & 1 != 0);
            assert_eq!(b.bits() & EscrValue::RESERVED, 0);
            assert_eq!(ThreadCpl::from_bits(v.cpl().bits()), v.cpl());
        }
    }
}

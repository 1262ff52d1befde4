//! The CCCR register layout (documented on [`CccrValue`]).

use super::escr::ReservedBits;
use super::msrs::{Cccr, Counter, EscrSelect};
use crate::register::register;

/// A 4-bit threshold (bits 23:20).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Threshold(u8);

impl Threshold {
    /// No threshold (0).
    pub const ZERO: Threshold = Threshold(0);

    /// `Some` if `v` is 0-15.
    pub const fn new(v: u8) -> Option<Threshold> {
        if v < 16 { Some(Threshold(v)) } else { None }
    }

    /// The value (0-15).
    pub const fn get(self) -> u8 {
        self.0
    }

    /// From the CCCR's field (`register!`).
    const fn from_field(v: u64) -> Threshold {
        Threshold(v as u8 & 0xF)
    }

    /// As the CCCR's field (`register!`).
    const fn into_field(self) -> u64 {
        self.0 as u64
    }
}

/// Active-thread selection (bits 17:16, SDM 18.16.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum ActiveThread {
    /// 00b: count only when neither logical processor is active.
    None = 0,
    /// 01b: count when exactly one logical processor is active.
    Single = 1,
    /// 10b: count when both logical processors are active.
    Both = 2,
    /// 11b: count when either logical processor is active. Required on
    /// parts without Hyper-Threading (Figure 18-45: "must be set to 11B").
    Any = 3,
}

impl ActiveThread {
    /// From the CCCR's field (`register!`).
    const fn from_field(b: u64) -> ActiveThread {
        match b & 3 {
            0 => ActiveThread::None,
            1 => ActiveThread::Single,
            2 => ActiveThread::Both,
            _ => ActiveThread::Any,
        }
    }

    /// As the CCCR's field (`register!`).
    const fn into_field(self) -> u64 {
        self as u64
    }
}

/// Proof that a CCCR has the extended cascade bit 11 on some model: obtained
/// only from [`ExtendedCascade::new`], so the typed API cannot set bit 11 on
/// a CCCR where it is reserved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ExtendedCascade {
    cccr: Cccr,
    from: Counter,
}

impl ExtendedCascade {
    /// The extended cascade of `cccr` on family 0Fh model `model`, if its
    /// bit 11 is defined there (SDM Table 18-65).
    pub const fn new(cccr: Cccr, model: u8) -> Option<ExtendedCascade> {
        match cccr.counter().extended_cascade_source(model) {
            Some(from) => Some(ExtendedCascade { cccr, from }),
            None => None,
        }
    }

    /// The CCCR that carries the bit.
    pub const fn cccr(self) -> Cccr {
        self.cccr
    }

    /// The counter whose overflow starts this CCCR's counter.
    pub const fn from(self) -> Counter {
        self.from
    }
}

register! {
    /// The CCCR register layout (SDM Vol. 3B Figure 18-45 non-HT, Figure 18-48
    /// Hyper-Threading; Table 18-65 for the extended cascade bit).
    ///
    /// | bits | field |
    /// |---|---|
    /// | 10:0 | reserved |
    /// | 11 | extended cascade `CASCNTxINTOy` (IQ_CCCR0/3/4/5 on models 2, 3, 4, 6 only; reserved elsewhere) |
    /// | 12 | `ENABLE` |
    /// | 15:13 | ESCR select |
    /// | 17:16 | active thread (HT); reserved and must be 11b on non-HT parts |
    /// | 18 | `COMPARE` |
    /// | 19 | `COMPLEMENT` |
    /// | 23:20 | `THRESHOLD` |
    /// | 24 | `EDGE` |
    /// | 25 | `FORCE_OVF` |
    /// | 26 | `OVF_PMI_T0` (`OVF_PMI` on non-HT parts) |
    /// | 27 | `OVF_PMI_T1` (reserved on non-HT parts) |
    /// | 29:28 | reserved |
    /// | 30 | `CASCADE` |
    /// | 31 | `OVF` (sticky) |
    /// | 63:32 | reserved |
    ///
    /// Source disagreement on what is reserved: Linux masks only bits 11:0,
    /// perfctr also 29:28 and (for users) 27 and 31, oprofile preserves
    /// 0x38030FFF. This crate follows the SDM figures: 10:0, 29:28 and 63:32
    /// always, bit 11 except where Table 18-65 defines it.
    ///
    /// # Examples
    ///
    /// ```
    /// use pmu::arch::netburst::{CccrValue, EscrSelect, Threshold};
    ///
    /// let v = CccrValue::new(EscrSelect::new(4).unwrap())      // ESCR select 4 (CRU_ESCR0 for counter 12)
    ///     .with_enable(true)
    ///     .with_compare(true)
    ///     .with_threshold(Threshold::new(2).unwrap());
    /// assert_eq!(v.bits(), 1 << 12 | 4 << 13 | 3 << 16 | 1 << 18 | 2 << 20);
    /// assert!(CccrValue::from_bits(1 << 28).is_err(), "bit 28 is reserved");
    /// ```
    ///
    /// A CCCR value whose reserved bits are zero by construction (SDM
    /// Figure 18-45; the extended cascade bit, Table 18-65).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct CccrValue(u64) {
        /// Extended cascade `CASCNTxINTOy` (bit 11), where Table 18-65
        /// defines it: set through [`CccrValue::with_extended_cascade`].
        EXT_CASCADE: 11;
        /// `ENABLE` (bit 12).
        ENABLE: 12 => enable, with_enable: bool;
        /// ESCR select (bits 15:13).
        ESCR_SELECT: 13..=15 => escr_select, with_escr_select: EscrSelect;
        /// Active thread (bits 17:16).
        ACTIVE_THREAD: 16..=17 => active_thread, with_active_thread: ActiveThread;
        /// `COMPARE` (bit 18).
        COMPARE: 18 => compare, with_compare: bool;
        /// `COMPLEMENT` (bit 19).
        COMPLEMENT: 19 => complement, with_complement: bool;
        /// Threshold (bits 23:20; `COMPARE` is not touched by its setter).
        THRESHOLD: 20..=23 => threshold, with_threshold: Threshold;
        /// `EDGE` (bit 24).
        EDGE: 24 => edge, with_edge: bool;
        /// `FORCE_OVF` (bit 25).
        FORCE_OVF: 25 => force_ovf, with_force_ovf: bool;
        /// `OVF_PMI_T0` (bit 26; `OVF_PMI` on parts without Hyper-Threading).
        OVF_PMI_T0: 26 => ovf_pmi_t0, with_ovf_pmi_t0: bool;
        /// `OVF_PMI_T1` (bit 27; reserved on parts without Hyper-Threading).
        OVF_PMI_T1: 27 => ovf_pmi_t1, with_ovf_pmi_t1: bool;
        /// `CASCADE` (bit 30).
        CASCADE: 30 => cascade, with_cascade: bool;
        /// `OVF` (bit 31, sticky).
        OVF: 31 => ovf, with_ovf: bool;
    }
}

impl CccrValue {
    /// Bits reserved on every CCCR: 11:0 except as below, 29:28, 63:32.
    /// Bit 11 is included here; [`CccrValue::reserved_mask`] removes it for
    /// the CCCRs and models where it is the extended cascade flag.
    pub const RESERVED: u64 = !Self::DEFINED | Self::EXT_CASCADE.mask();
    /// Additionally reserved on parts without Hyper-Threading: `OVF_PMI_T1`
    /// (bit 27). (Bits 17:16 are reserved there too but must read 11b.)
    pub const RESERVED_NON_HT_EXTRA: u64 = Self::OVF_PMI_T1.mask();

    /// The reserved bits of `cccr` on family 0Fh model `model`.
    pub const fn reserved_mask(cccr: Cccr, model: u8) -> u64 {
        if ExtendedCascade::new(cccr, model).is_some() {
            Self::RESERVED & !Self::EXT_CASCADE.mask()
        } else {
            Self::RESERVED
        }
    }

    /// The image of a CCCR no one uses: disabled, every field clear except
    /// the active-thread field, which is 11b. Parts without Hyper-Threading
    /// require 11b there (SDM Figure 18-45, "must be set to 11B"; the model
    /// raises #GP otherwise); on Hyper-Threading parts 11b is harmless in a
    /// disabled CCCR. The driver gives it to a free counter, and the world
    /// switch (`pmu::virt::netburst`) to a switched-out one: no `ENABLE`,
    /// `CASCADE`, extended cascade, `FORCE_OVF`, `OVF_PMI` or `OVF`, so the
    /// counter neither counts nor starts another.
    pub const IDLE: CccrValue = CccrValue(0).with_active_thread(ActiveThread::Any);

    /// A disabled CCCR routing ESCR-select `select`, active thread 11b and
    /// every other field clear.
    pub const fn new(select: EscrSelect) -> CccrValue {
        CccrValue(0)
            .with_escr_select(select)
            .with_active_thread(ActiveThread::Any)
    }

    /// Decode any raw value with the generic reserved mask (bit 11 dropped).
    pub const fn from_bits_truncate(raw: u64) -> CccrValue {
        CccrValue(raw & !Self::RESERVED)
    }

    /// Decode a raw value, refusing one with a reserved bit set (generic mask).
    pub const fn from_bits(raw: u64) -> Result<CccrValue, ReservedBits> {
        if raw & Self::RESERVED != 0 {
            Err(ReservedBits(raw & Self::RESERVED))
        } else {
            Ok(CccrValue(raw))
        }
    }

    /// Decode any raw value read from `cccr` on model `model`, keeping bit 11
    /// where it is defined.
    pub const fn from_bits_truncate_for(raw: u64, cccr: Cccr, model: u8) -> CccrValue {
        CccrValue(raw & !Self::reserved_mask(cccr, model))
    }

    /// Decode a raw value for `cccr` on model `model`, refusing reserved bits.
    pub const fn from_bits_for(raw: u64, cccr: Cccr, model: u8) -> Result<CccrValue, ReservedBits> {
        let r = raw & Self::reserved_mask(cccr, model);
        if r != 0 {
            Err(ReservedBits(r))
        } else {
            Ok(CccrValue(raw))
        }
    }

    /// Extended cascade bit 11.
    pub const fn extended_cascade(self) -> bool {
        Self::EXT_CASCADE.flag(self.0)
    }

    /// With extended cascade bit 11 set or cleared; needs the proof that the
    /// CCCR has it.
    pub const fn with_extended_cascade(self, _proof: ExtendedCascade, on: bool) -> CccrValue {
        CccrValue(Self::EXT_CASCADE.set_flag(self.0, on))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_positions_match_the_sdm_figure() {
        let z = CccrValue::from_bits_truncate(0);
        assert_eq!(z.with_enable(true).bits(), 1 << 12);
        assert_eq!(
            z.with_escr_select(EscrSelect::new(7).unwrap()).bits(),
            0xE000
        );
        assert_eq!(z.with_active_thread(ActiveThread::Any).bits(), 0x30000);
        assert_eq!(z.with_compare(true).bits(), 1 << 18);
        assert_eq!(z.with_complement(true).bits(), 1 << 19);
        assert_eq!(
            z.with_threshold(Threshold::new(15).unwrap()).bits(),
            0xF0_0000
        );
        assert_eq!(z.with_edge(true).bits(), 1 << 24);
        assert_eq!(z.with_force_ovf(true).bits(), 1 << 25);
        assert_eq!(z.with_ovf_pmi_t0(true).bits(), 1 << 26);
        assert_eq!(z.with_ovf_pmi_t1(true).bits(), 1 << 27);
        assert_eq!(z.with_cascade(true).bits(), 1 << 30);
        assert_eq!(z.with_ovf(true).bits(), 1 << 31);
        // libpfm4 vector: global_power_events -> 0x3d000.
        let v = CccrValue::new(EscrSelect::new(6).unwrap()).with_enable(true);
        assert_eq!(v.bits(), 0x3D000);
        assert_eq!(v.active_thread(), ActiveThread::Any);
    }

    #[test]
    fn extended_cascade_only_where_defined() {
        for model in 0..16u8 {
            for c in Counter::ALL {
                let proof = ExtendedCascade::new(c.cccr(), model);
                let mask = CccrValue::reserved_mask(c.cccr(), model);
                assert_eq!(proof.is_some(), c.extended_cascade_source(model).is_some());
                assert_eq!(mask & (1 << 11) == 0, proof.is_some());
                if let Some(p) = proof {
                    let v =
                        CccrValue::new(EscrSelect::new(4).unwrap()).with_extended_cascade(p, true);
                    assert!(v.extended_cascade());
                    assert_eq!(CccrValue::from_bits_for(v.bits(), c.cccr(), model), Ok(v));
                    // The generic decoder treats bit 11 as reserved.
                    assert!(CccrValue::from_bits(v.bits()).is_err());
                    assert_eq!(p.cccr(), c.cccr());
                    assert_eq!(Some(p.from()), c.extended_cascade_source(model));
                } else {
                    assert_eq!(
                        CccrValue::from_bits_for(1 << 11, c.cccr(), model),
                        Err(ReservedBits(1 << 11))
                    );
                }
            }
        }
    }

    fn rng(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    #[test]
    fn decode_is_total_and_round_trips() {
        let mut s = 0xDEAD_BEEF_0BAD_F00Du64;
        for _ in 0..20_000 {
            let raw = rng(&mut s);
            let v = CccrValue::from_bits_truncate(raw);
            assert_eq!(v.bits(), raw & !CccrValue::RESERVED);
            assert_eq!(
                CccrValue::from_bits(raw).is_ok(),
                raw & CccrValue::RESERVED == 0
            );
            let rebuilt = CccrValue::new(v.escr_select())
                .with_active_thread(v.active_thread())
                .with_threshold(v.threshold())
                .with_enable(v.enable())
                .with_compare(v.compare())
                .with_complement(v.complement())
                .with_edge(v.edge())
                .with_force_ovf(v.force_ovf())
                .with_ovf_pmi_t0(v.ovf_pmi_t0())
                .with_ovf_pmi_t1(v.ovf_pmi_t1())
                .with_cascade(v.cascade())
                .with_ovf(v.ovf());
            assert_eq!(rebuilt, v);
            for c in Counter::ALL {
                let w = CccrValue::from_bits_truncate_for(raw, c.cccr(), 3);
                assert_eq!(w.bits() & CccrValue::reserved_mask(c.cccr(), 3), 0);
            }
        }
    }
}

//! The tagging MSRs' layouts (documented on [`PebsEnable`]).

use crate::register::register;

register! {
    /// `MSR_PEBS_ENABLE` (3F1H) as one logical processor writes it.
    ///
    /// # The tagging MSRs
    ///
    /// The layouts of the three package-wide tagging MSRs, 3F0H-3F2H:
    /// `MSR_TC_PRECISE_EVENT`, `MSR_PEBS_ENABLE` and `MSR_PEBS_MATRIX_VERT`
    /// (SDM Vol. 3C Table 35-41 for the registers, Vol. 3B Table 19-33 for the
    /// replay-tagging metric bits, 18.15.7 and 18.16.3 for PEBS).
    ///
    /// Source disagreement: SDM 18.15.7.1 calls `MSR_PEBS_ENABLE` bit 24
    /// "Enable PEBS"; Table 35-41 and 18.16.3 put PEBS at bit 25 and call bit
    /// 24 `UOP_Tag`. The crate follows the table.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct PebsEnable(u64): from_bits {
        /// The replay-tagging metric selection, bits 12:0 (Table 35-41;
        /// Table 19-33 names bits 0, 1, 2, 9 and 10).
        METRICS: 0..=12 => metrics, with_metrics: u16;
        /// `1stL_cache_load_miss_retired` (bit 0).
        L1_LOAD_MISS: 0 => l1_load_miss, with_l1_load_miss: bool;
        /// `2ndL_cache_load_miss_retired` (bit 1).
        L2_LOAD_MISS: 1 => l2_load_miss, with_l2_load_miss: bool;
        /// The DTLB misses (bit 2).
        DTLB_MISS: 2 => dtlb_miss, with_dtlb_miss: bool;
        /// `MOB_load_replay_retired` (bit 9).
        MOB_LOAD_REPLAY: 9 => mob_load_replay, with_mob_load_replay: bool;
        /// `split_load_retired` and `split_store_retired` (bit 10).
        SPLIT: 10 => split, with_split: bool;
        /// `Tagged_mispred_branch` (bits 16:15, both set; Table 19-33).
        TAGGED_MISPRED_BRANCH: 15..=16 => tagged_mispred_branch, with_tagged_mispred_branch: u8;
        /// `UOP_Tag` (bit 24): replay tagging on.
        UOP_TAG: 24 => uop_tag, with_uop_tag: bool;
        /// `ENABLE_PEBS_MY_THR` (bit 25; `ENABLE_PEBS` without
        /// Hyper-Threading): PEBS for the writing logical processor.
        ENABLE_PEBS_MY_THR: 25 => enable_pebs_my_thr, with_enable_pebs_my_thr: bool;
        /// `ENABLE_PEBS_OTH_THR` (bit 26; reserved without Hyper-Threading):
        /// PEBS for the other logical processor.
        ENABLE_PEBS_OTH_THR: 26 => enable_pebs_oth_thr, with_enable_pebs_oth_thr: bool;
    }
}

impl PebsEnable {
    /// Nothing enabled: the register's reset value.
    pub const OFF: PebsEnable = PebsEnable(0);
    /// The bits no field declares: 14:13, 23:17 and 63:27.
    pub const RESERVED: u64 = !Self::DEFINED;

    /// Union of two images.
    pub const fn union(self, other: PebsEnable) -> PebsEnable {
        PebsEnable(self.0 | other.0)
    }
}

register! {
    /// `MSR_PEBS_MATRIX_VERT` (3F2H): the µop type whose replays are tagged
    /// (Table 19-33).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct PebsMatrixVert(u64): from_bits {
        /// Loads (bit 0).
        LOADS: 0 => loads, with_loads: bool;
        /// Stores (bit 1).
        STORES: 1 => stores, with_stores: bool;
        /// Tagged mispredicted branches (bit 4).
        TAGGED_MISPRED_BRANCH: 4 => tagged_mispred_branch, with_tagged_mispred_branch: bool;
    }
}

impl PebsMatrixVert {
    /// Nothing tagged: the register's reset value.
    pub const OFF: PebsMatrixVert = PebsMatrixVert(0);
    /// The bits no field declares.
    pub const RESERVED: u64 = !Self::DEFINED;

    /// Union of two images.
    pub const fn union(self, other: PebsMatrixVert) -> PebsMatrixVert {
        PebsMatrixVert(self.0 | other.0)
    }
}

register! {
    /// `MSR_TC_PRECISE_EVENT` (3F0H): trace-cache event selection for
    /// front-end tagging (18.15.6.2, Table 19-31). Its layout is
    /// undocumented; bits 15:0 are taken (perfctr saw FC00H in them after
    /// reset), 63:16 are treated as reserved.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct TcPreciseEvent(u64) {
        /// The undocumented selection, bits 15:0.
        SELECTION: 0..=15 => selection, with_selection: u16;
    }
}

impl TcPreciseEvent {
    /// The value after reset, as perfctr observed ("seems to have a default
    /// value of 0xFC00 ... leave it alone"): the neutral image.
    pub const RESET: TcPreciseEvent = TcPreciseEvent(0xFC00);
    /// The bits no field declares.
    pub const RESERVED: u64 = !Self::DEFINED;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_bits_follow_table_35_41() {
        assert_eq!(
            PebsEnable::RESERVED,
            !0x07FF_FFFF | (0x00FF_E000 & !(3 << 15))
        );
        assert_eq!(PebsMatrixVert::RESERVED, !0x13);
        assert_eq!(TcPreciseEvent::RESERVED, !0xFFFF);
        let v = PebsEnable::OFF
            .with_uop_tag(true)
            .with_enable_pebs_my_thr(true);
        assert_eq!(v.bits(), 1 << 24 | 1 << 25);
        assert_eq!(
            PebsEnable::OFF.with_tagged_mispred_branch(3).bits(),
            3 << 15
        );
    }
}

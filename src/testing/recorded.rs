//! CPUID leaves recorded on real hybrid parts, for the tests of detection
//! and of the architectural PMU's per-core-type driving. Each is one
//! logical processor's leaves 0, 1, 07H (sub-leaves 0 and 1), 0AH, 1AH and
//! 23H (its sub-leaves as recorded), transcribed from InstLatx64's CPUID
//! dumps (`https://github.com/InstLatx64/InstLatx64`, directory
//! `GenuineIntel/`, the file named at each; commit 087af2c of that
//! repository), which print each leaf as `EAX-EBX-ECX-EDX`. The dumps
//! record no MSR: [`Recorded`] answers the two detection reads
//! (`IA32_PERF_CAPABILITIES`, `IA32_MISC_ENABLE`) with 0.

use crate::access::MsrAccess;
use crate::detect::{Cpuid, CpuidResult};

/// One logical processor's recorded leaves: (leaf, sub-leaf, EAX, EBX,
/// ECX, EDX). A leaf or sub-leaf not listed reads 0, as an invalid
/// sub-leaf of leaf 23H does.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Recorded {
    /// The part, the core and the file.
    pub(crate) name: &'static str,
    leaves: &'static [(u32, u32, [u32; 4])],
}

impl Cpuid for Recorded {
    fn cpuid(&self, leaf: u32, subleaf: u32) -> CpuidResult {
        let found = self
            .leaves
            .iter()
            .find(|&&(l, s, _)| l == leaf && s == subleaf)
            .map_or([0; 4], |&(_, _, r)| r);
        CpuidResult {
            eax: found[0],
            ebx: found[1],
            ecx: found[2],
            edx: found[3],
        }
    }
}

impl MsrAccess for Recorded {
    type Error = &'static str;

    fn read_msr(&mut self, msr: u32) -> Result<u64, &'static str> {
        match msr {
            crate::detect::IA32_PERF_CAPABILITIES | crate::detect::IA32_MISC_ENABLE => Ok(0),
            _ => Err("the recorded dumps have no MSRs"),
        }
    }

    fn write_msr(&mut self, _: u32, _: u64) -> Result<(), &'static str> {
        Err("the recorded dumps have no MSRs")
    }

    fn rdpmc(&mut self, _: u32) -> Result<u64, &'static str> {
        Err("the recorded dumps have no counters")
    }
}

const VENDOR: (u32, u32, [u32; 4]) = (0, 0, [0x20, 0x756E_6547, 0x6C65_746E, 0x4965_6E69]);
const VENDOR_23H: (u32, u32, [u32; 4]) = (0, 0, [0x23, 0x756E_6547, 0x6C65_746E, 0x4965_6E69]);

/// Intel Core i9-12900K (Alder Lake-S, 8 Golden Cove + 8 Gracemont
/// cores), logical CPU #0, a Golden Cove (Core) core:
/// `GenuineIntel0090672_AlderLake_01_LC_BC_CPUID.txt`. Leaf 0AH: the
/// common view, 6 general and 3 fixed counters; no leaf 23H (maximum leaf
/// 20H, CPUID.(07H,01H):EAX\[8\] clear).
pub(crate) const ADL_P: Recorded = Recorded {
    name: "i9-12900K CPU #0 (Golden Cove)",
    leaves: &[
        VENDOR,
        (1, 0, [0x0009_0672, 0x0080_0800, 0x7FFA_FBFF, 0xBFEB_FBFF]),
        (7, 0, [0x0000_0001, 0x239C_A7EB, 0x98C0_27AC, 0xFC1C_C410]),
        (7, 1, [0x0040_0810, 0, 0, 0]),
        (0xA, 0, [0x0730_0605, 0, 0x7, 0x8603]),
        (0x1A, 0, [0x4000_0001, 0, 0, 0]),
    ],
};

/// The same i9-12900K, logical CPU #16, a Gracemont (Atom) core: leaf
/// 0AH as on the Golden Cove cores.
pub(crate) const ADL_E: Recorded = Recorded {
    name: "i9-12900K CPU #16 (Gracemont)",
    leaves: &[
        VENDOR,
        (1, 0, [0x0009_0672, 0x4080_0800, 0x7FFA_FBFF, 0xBFEB_FBFF]),
        (7, 0, [0x0000_0001, 0x239C_A7EB, 0x98C0_27AC, 0xFC1C_C410]),
        (7, 1, [0x0040_0810, 0, 0, 0]),
        (0xA, 0, [0x0730_0605, 0, 0x7, 0x8603]),
        (0x1A, 0, [0x2000_0001, 0, 0, 0]),
    ],
};

/// An i9-12900K with its E-cores disabled, logical CPU #0, a Golden Cove
/// core: `GenuineIntel0090672_AlderLake_01_BC_AVX512_CPUID.txt`. Leaf
/// 0AH: the core's own 8 general and 4 fixed counters; still hybrid
/// (CPUID.07H:EDX\[15\]), core type 40H.
pub(crate) const ADL_P_ALONE: Recorded = Recorded {
    name: "i9-12900K without E-cores, CPU #0 (Golden Cove)",
    leaves: &[
        VENDOR,
        (1, 0, [0x0009_0672, 0x0080_0800, 0x7FFA_FBFF, 0xBFEB_FBFF]),
        (7, 0, [0x0000_0001, 0xF3BF_A7EB, 0x98C0_7FEE, 0xFC9C_C510]),
        (7, 1, [0x0040_1C30, 0, 0, 0]),
        (0xA, 0, [0x0830_0805, 0, 0xF, 0x8604]),
        (0x1A, 0, [0x4000_0001, 0, 0, 0]),
    ],
};

/// Intel Core Ultra 7 155H (Meteor Lake, 6 Redwood Cove + 10 Crestmont
/// cores), logical CPU #0, a Redwood Cove (Core) core:
/// `GenuineIntel00A06A4_MeteorLake_10_CPUID.txt`. Version 5 with leaf 23H
/// (CPUID.(07H,01H):EAX\[8\] set): fixed counters 0FH, events DFFH; leaf
/// 0AH the common view.
pub(crate) const MTL_P: Recorded = Recorded {
    name: "Core Ultra 7 155H CPU #0 (Redwood Cove)",
    leaves: &[
        VENDOR_23H,
        (1, 0, [0x000A_06A4, 0x2080_0800, 0x7FFA_FBFF, 0xBFEB_FBFF]),
        (7, 0, [0x0000_0002, 0x239C_27EB, 0x9940_07AC, 0xFC18_C410]),
        (7, 1, [0x4040_0910, 0x0000_0001, 0, 0x0004_0000]),
        (0xA, 0, [0x0730_0805, 0, 0x7, 0x8603]),
        (0x1A, 0, [0x4000_0002, 0, 0, 0]),
        (0x23, 0, [0xB, 0, 0, 0]),
        (0x23, 1, [0xFF, 0xF, 0, 0]),
        (0x23, 3, [0xDFF, 0, 0, 0]),
    ],
};

/// The same Core Ultra 7 155H, logical CPU #4, a Crestmont (Atom) core:
/// leaf 23H fixed counters 07H, events 7FH.
pub(crate) const MTL_E: Recorded = Recorded {
    name: "Core Ultra 7 155H CPU #4 (Crestmont)",
    leaves: &[
        VENDOR_23H,
        (1, 0, [0x000A_06A4, 0x0480_0800, 0x7FFA_FBFF, 0xBFEB_FBFF]),
        (7, 0, [0x0000_0002, 0x239C_27EB, 0x9940_07AC, 0xFC18_C410]),
        (7, 1, [0x4040_0910, 0x0000_0001, 0, 0x0004_0000]),
        (0xA, 0, [0x0730_0805, 0, 0x7, 0x8603]),
        (0x1A, 0, [0x2000_0002, 0, 0, 0]),
        (0x23, 0, [0xB, 0, 0x6, 0]),
        (0x23, 1, [0xFF, 0x7, 0, 0]),
        (0x23, 3, [0x7F, 0, 0, 0]),
    ],
};

/// Intel Core Ultra 9 288V (Lunar Lake, 4 Lion Cove + 4 Skymont cores),
/// logical CPU #0, a Lion Cove (Core) core:
/// `GenuineIntel00B06D1_LunarLake_04_CPUID.txt`. Architectural
/// performance monitoring version 6; leaf 23H: ten general counters
/// (3FFH), fixed counters 0FH, events 1DFFH.
pub(crate) const LNL_P: Recorded = Recorded {
    name: "Core Ultra 9 288V CPU #0 (Lion Cove)",
    leaves: &[
        VENDOR_23H,
        (1, 0, [0x000B_06D1, 0x0080_0800, 0x7FFA_FBFF, 0xBFEB_FBFF]),
        (7, 0, [0x0000_0002, 0x239C_A7EB, 0x9940_27AC, 0xFC1C_C430]),
        (7, 1, [0x44C0_09D7, 0x0000_0003, 0, 0x0004_0430]),
        (0xA, 0, [0x0D30_0806, 0x280, 0x7, 0x8603]),
        (0x1A, 0, [0x4000_0003, 0, 0, 0]),
        (0x23, 0, [0xB, 0x3, 0, 0]),
        (0x23, 1, [0x3FF, 0xF, 0, 0]),
        (0x23, 3, [0x1DFF, 0, 0, 0]),
    ],
};

/// The same Core Ultra 9 288V, logical CPU #4, a Skymont (Atom) core:
/// leaf 23H fixed counters 77H (0-2 and 4-6: a bitmap with a hole),
/// events 1F7FH, and sub-leaf 2 (auto counter reload) valid.
pub(crate) const LNL_E: Recorded = Recorded {
    name: "Core Ultra 9 288V CPU #4 (Skymont)",
    leaves: &[
        VENDOR_23H,
        (1, 0, [0x000B_06D1, 0x4080_0800, 0x7FFA_FBFF, 0xBFEB_FBFF]),
        (7, 0, [0x0000_0002, 0x239C_A7EB, 0x9940_27AC, 0xFC1C_C430]),
        (7, 1, [0x44C0_09D7, 0x0000_0003, 0, 0x0004_0430]),
        (0xA, 0, [0x0D30_0806, 0x280, 0x7, 0x8603]),
        (0x1A, 0, [0x2000_0003, 0, 0, 0]),
        (0x23, 0, [0xF, 0x3, 0x8, 0]),
        (0x23, 1, [0xFF, 0x77, 0, 0]),
        (0x23, 2, [0xFC, 0x3, 0xFC, 0x3]),
        (0x23, 3, [0x1F7F, 0, 0, 0]),
    ],
};

//! Montecito's IP-EAR configuration register (PMC42).

use crate::arch::itanium::Generation;
use crate::arch::itanium::{Plm, pmc_register};

pmc_register! {
    /// Montecito's IP-EAR configuration, PMC42 (libpfm3 `pmc42_mont_reg`:
    /// plm 3:0, pm 6, mode 10:8, delay 18:11). The IP-EAR writes its
    /// captures into the execution trace buffer registers (PMD38, PMD39,
    /// PMD48-63); the sources at hand give neither the meaning of the mode
    /// values nor that capture format, so both fields stay raw and no
    /// sample decoder exists for it.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct IpEarConfig(u64): pmc(Generation::Montecito.pmc_or_empty(IpEarConfig::PMC)) {
        /// The privilege level mask.
        pub(crate) PLM: 0..=3 => plm, with_plm: Plm;
        /// The `pm` bit (6).
        pub(crate) PM: 6 => privileged, with_privileged: bool;
        /// The mode, raw.
        pub(crate) MODE: 8..=10;
        /// The 8-bit delay field (18:11), raw.
        pub(crate) DELAY: 11..=18 => delay, with_delay: u8;
    }
}

impl IpEarConfig {
    /// The register number.
    pub const PMC: u8 = 42;

    /// The power-up value (zero).
    pub const POWER_UP: IpEarConfig = IpEarConfig(0);

    /// The 3-bit mode field (10:8), raw.
    pub const fn mode(self) -> u8 {
        Self::MODE.get(self.0) as u8
    }

    /// With the mode field replaced; `None` if `v` does not fit 3 bits.
    pub const fn with_mode(self, v: u8) -> Option<IpEarConfig> {
        if Self::MODE.fits(v as u64) {
            Some(IpEarConfig(Self::MODE.set(self.0, v as u64)))
        } else {
            None
        }
    }
}

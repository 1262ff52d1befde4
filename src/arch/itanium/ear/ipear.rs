//! Montecito's IP-EAR configuration register (PMC42).

use super::dear::{DEAR_PLM, DEAR_PM};
use crate::arch::Field;
use crate::arch::itanium::Generation;
use crate::arch::itanium::Plm;
use crate::arch::itanium::image::{fixed_pmc_image, info_or_empty};

fixed_pmc_image! {
    /// Montecito's IP-EAR configuration, PMC42 (libpfm3 `pmc42_mont_reg`:
    /// plm 3:0, pm 6, mode 10:8, delay 18:11). The IP-EAR writes its
    /// captures into the execution trace buffer registers (PMD38, PMD39,
    /// PMD48-63); the sources at hand give neither the meaning of the mode
    /// values nor that capture format, so both fields stay raw and no
    /// sample decoder exists for it.
    IpEarConfig,
    info: info_or_empty(Generation::Montecito, IpEarConfig::PMC),
    from_bits_doc: "Decode a raw value, refusing bits outside the fields (perfmon's\nwritable mask 7_FF4Fh)."
}

const IPEAR_MODE: Field = Field::new(8, 3);
const IPEAR_DELAY: Field = Field::new(11, 8);

impl IpEarConfig {
    /// The register number.
    pub const PMC: u8 = 42;

    /// The power-up value (zero).
    pub const POWER_UP: IpEarConfig = IpEarConfig(0);

    /// The privilege level mask.
    pub const fn plm(self) -> Plm {
        Plm::from_bits_truncate(self.0)
    }

    /// With the privilege level mask replaced.
    pub const fn with_plm(self, plm: Plm) -> IpEarConfig {
        IpEarConfig(DEAR_PLM.set(self.0, plm.get() as u64))
    }

    /// The `pm` bit (6).
    pub const fn privileged(self) -> bool {
        DEAR_PM.flag(self.0)
    }

    /// With the `pm` bit set or cleared.
    pub const fn with_privileged(self, on: bool) -> IpEarConfig {
        IpEarConfig(DEAR_PM.set_flag(self.0, on))
    }

    /// The 3-bit mode field (10:8), raw.
    pub const fn mode(self) -> u8 {
        IPEAR_MODE.get(self.0) as u8
    }

    /// With the mode field replaced; `None` if `v` does not fit 3 bits.
    pub const fn with_mode(self, v: u8) -> Option<IpEarConfig> {
        if IPEAR_MODE.fits(v as u64) {
            Some(IpEarConfig(IPEAR_MODE.set(self.0, v as u64)))
        } else {
            None
        }
    }

    /// The 8-bit delay field (18:11), raw.
    pub const fn delay(self) -> u8 {
        IPEAR_DELAY.get(self.0) as u8
    }

    /// With the delay field replaced.
    pub const fn with_delay(self, v: u8) -> IpEarConfig {
        IpEarConfig(IPEAR_DELAY.set(self.0, v as u64))
    }
}

//! The data EAR: its configuration register (PMC11, Montecito PMC40) and
//! its captures (PMD2/3/17, Montecito PMD32/33/36).

use super::*;
use crate::arch::itanium::{FieldError, Ism, Plm, Slot};
use crate::arch::itanium::{Generation, pmc_register};

/// Data EAR mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DearMode {
    /// Data cache misses above a latency.
    CacheMiss,
    /// Data TLB misses.
    TlbMiss,
    /// ALAT misses (Itanium 2 and Montecito).
    Alat,
    /// Itanium 2 `mode` = 3: undefined.
    Undefined,
}

pmc_register! {
    /// A data EAR configuration (PMC11, Montecito PMC40; libpfm3
    /// `pmc11_ita_reg`, `pmc11_ita2_reg`, `pmc40_mont_reg`). Which fields a
    /// generation has is its row of the PMC descriptor table
    /// ([`DearConfig::info`]).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct DearConfig(Generation, u64): pmc(DearConfig::info) {
        /// The privilege level mask.
        pub(crate) PLM: 0..=3 => plm, with_plm: Plm;
        /// The `pm` bit (6).
        pub(crate) PM: 6 => privileged, with_privileged: bool;
        /// Itanium `tlb`: TLB mode (1) or cache mode (0).
        pub(crate) ITA_TLB: 7;
        /// Itanium 2 and Montecito `mode`: cache, TLB, ALAT (3 undefined).
        pub(crate) MODE: 7..=8;
        /// The unit mask (the latency filter, or the fills in TLB mode).
        pub(crate) UMASK: 16..=19;
        /// The instruction set mask (fixed at IA-64 only on Montecito).
        pub(crate) ISM: 24..=25;
        /// Itanium `pt`: pass tags.
        pub(crate) ITA_PT: 28;
    }
}

impl DearConfig {
    const fn with_mode(generation: Generation, mode: u64, umask: u64) -> DearConfig {
        let base = Self::info(generation).default;
        let bits = match generation {
            Generation::Itanium => Self::ITA_TLB.set(base, mode),
            _ => Self::MODE.set(base, mode),
        };
        DearConfig {
            generation,
            bits: Self::UMASK.set(bits, umask),
        }
    }

    /// Capture data cache misses at or above `latency` (PLM zero).
    pub const fn cache_misses(
        generation: Generation,
        latency: LatencyFilter,
    ) -> Result<DearConfig, FieldError> {
        match latency.dear_umask(generation) {
            Some(u) => Ok(Self::with_mode(generation, 0, u as u64)),
            None => Err(FieldError::LatencyNotAvailable { generation }),
        }
    }

    /// Capture data TLB misses filled as `fills` says.
    pub const fn tlb_misses(
        generation: Generation,
        fills: TlbFills,
    ) -> Result<DearConfig, FieldError> {
        match tlb_encode(generation, false, fills) {
            Ok(u) => Ok(Self::with_mode(generation, 1, u as u64)),
            Err(e) => Err(e),
        }
    }

    /// Capture ALAT misses (Itanium 2 and Montecito).
    pub const fn alat_misses(generation: Generation) -> Result<DearConfig, FieldError> {
        match generation {
            Generation::Itanium => Err(FieldError::AlatNotOnItanium),
            _ => Ok(Self::with_mode(generation, 2, 0)),
        }
    }

    /// The instruction set mask (25:24).
    pub const fn ism(self) -> Ism {
        Ism::from_bits(Self::ISM.get(self.bits))
    }

    /// With the instruction set mask replaced; Montecito accepts
    /// [`Ism::Ia64Only`] only.
    pub const fn with_ism(self, ism: Ism) -> Result<DearConfig, FieldError> {
        if matches!(self.generation, Generation::Montecito) && !matches!(ism, Ism::Ia64Only) {
            return Err(FieldError::IsmFixed);
        }
        Ok(self.with_bits(Self::ISM.set(self.bits, ism.bits() as u64)))
    }

    /// Itanium's `pt` (pass tags, bit 28): 1 lets every data reference
    /// through, 0 restricts the D-EAR to the data address ranges of the
    /// DBRs (libpfm3 clears it when data range restriction is in use;
    /// perfmon's power-up value sets it). `None` after Itanium.
    pub const fn pass_tags(self) -> Option<bool> {
        match self.generation {
            Generation::Itanium => Some(Self::ITA_PT.flag(self.bits)),
            _ => None,
        }
    }

    /// With Itanium's `pt` bit set or cleared.
    pub const fn with_pass_tags(self, on: bool) -> Result<DearConfig, FieldError> {
        match self.generation {
            Generation::Itanium => Ok(self.with_bits(Self::ITA_PT.set_flag(self.bits, on))),
            g => Err(FieldError::NoSuchField {
                field: "pt",
                generation: g,
                pmc: g.dear_pmc(),
            }),
        }
    }

    /// The mode.
    pub const fn mode(self) -> DearMode {
        match self.generation {
            Generation::Itanium => {
                if Self::ITA_TLB.flag(self.bits) {
                    DearMode::TlbMiss
                } else {
                    DearMode::CacheMiss
                }
            }
            _ => match Self::MODE.get(self.bits) {
                0 => DearMode::CacheMiss,
                1 => DearMode::TlbMiss,
                2 => DearMode::Alat,
                _ => DearMode::Undefined,
            },
        }
    }

    /// The unit mask (19:16).
    pub const fn umask(self) -> u8 {
        Self::UMASK.get(self.bits) as u8
    }

    /// The latency filter, in cache mode, if the unit mask is defined.
    pub const fn latency(self) -> Option<LatencyFilter> {
        match self.mode() {
            DearMode::CacheMiss => LatencyFilter::from_dear_umask(self.generation, self.umask()),
            _ => None,
        }
    }

    /// The fills captured, in TLB mode.
    pub const fn tlb_fills(self) -> Option<TlbFills> {
        match self.mode() {
            DearMode::TlbMiss => Some(tlb_decode(self.generation, false, self.umask()).0),
            _ => None,
        }
    }

    /// What is wrong with the unit mask, if anything: cache-mode codes the
    /// generation does not define, TLB-mode bits that name no fill. The
    /// ALAT mode's unit mask is not checked.
    pub const fn umask_problem(self) -> Option<UmaskProblem> {
        let u = self.umask();
        match self.mode() {
            DearMode::CacheMiss => {
                if LatencyFilter::from_dear_umask(self.generation, u).is_none() {
                    Some(UmaskProblem::Undefined(u))
                } else {
                    None
                }
            }
            DearMode::TlbMiss => {
                if tlb_decode(self.generation, false, u).1 != 0 {
                    Some(UmaskProblem::Undefined(u))
                } else {
                    None
                }
            }
            _ => None,
        }
    }
}

/// An instruction address captured by the D-EAR.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct InstructionAddress {
    /// The 16-byte-aligned bundle address.
    pub bundle: u64,
    /// The slot; `None` if the field read 3, which is no slot.
    pub slot: Option<Slot>,
}

impl InstructionAddress {
    /// The bundle address with the slot number in bits 3:0 (the form IA-64
    /// tools print; slot 3 is kept as read).
    pub const fn address(self) -> u64 {
        self.bundle
            | match self.slot {
                Some(s) => s.get() as u64,
                None => 3,
            }
    }
}

/// What a D-EAR sample captured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DearEvent {
    /// A data cache miss.
    CacheMiss {
        /// Its latency in cycles (12 bits on Itanium, 13 after).
        latency: u16,
        /// The latency counter overflowed (Itanium 2 PMD3 bit 13).
        latency_overflow: bool,
    },
    /// A data TLB miss.
    TlbMiss {
        /// The level that filled it (`None`: not applicable / invalid).
        fill: Option<TlbFill>,
    },
    /// An ALAT miss.
    Alat,
    /// The configuration's mode is undefined.
    Undefined,
}

/// A decoded D-EAR sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DearSample {
    /// Whether the EAR holds a capture: Itanium PMD17 `vl`; Itanium 2 PMD3
    /// `stat` != 0.
    pub valid: bool,
    /// The data address (PMD2 / PMD32).
    pub data_address: u64,
    /// The instruction that missed, when its valid bit is set.
    pub instruction: Option<InstructionAddress>,
    /// What was captured.
    pub event: DearEvent,
}

impl DearSample {
    /// Decode PMD2, PMD3 and PMD17 (Montecito PMD32, PMD33, PMD36) for a
    /// D-EAR configured as `config`. Total.
    pub const fn decode(config: DearConfig, pmd2: u64, pmd3: u64, pmd17: u64) -> DearSample {
        match config.generation {
            Generation::Itanium => {
                let valid = pmd17 & 1 != 0;
                let instruction = if valid {
                    Some(InstructionAddress {
                        bundle: pmd17 & !0xF,
                        slot: Slot::from_bits(pmd17 >> 2),
                    })
                } else {
                    None
                };
                let event = match config.mode() {
                    DearMode::TlbMiss => DearEvent::TlbMiss {
                        fill: TlbFill::from_level(pmd3 >> 62),
                    },
                    _ => DearEvent::CacheMiss {
                        latency: (pmd3 & 0xFFF) as u16,
                        latency_overflow: false,
                    },
                };
                DearSample {
                    valid,
                    data_address: pmd2,
                    instruction,
                    event,
                }
            }
            _ => {
                let stat = (pmd3 >> 14) & 3;
                let instruction = if pmd17 & (1 << 3) != 0 {
                    Some(InstructionAddress {
                        bundle: (pmd17 & !0xF).wrapping_add(((pmd17 >> 2) & 1) << 4),
                        slot: Slot::from_bits(pmd17),
                    })
                } else {
                    None
                };
                let event = match config.mode() {
                    DearMode::CacheMiss => DearEvent::CacheMiss {
                        latency: (pmd3 & 0x1FFF) as u16,
                        latency_overflow: pmd3 & (1 << 13) != 0,
                    },
                    DearMode::TlbMiss => DearEvent::TlbMiss {
                        fill: TlbFill::from_level(stat),
                    },
                    DearMode::Alat => DearEvent::Alat,
                    DearMode::Undefined => DearEvent::Undefined,
                };
                DearSample {
                    valid: stat != 0 && !matches!(event, DearEvent::Undefined),
                    data_address: pmd2,
                    instruction,
                    event,
                }
            }
        }
    }
}

//! The register file: PMC and PMD access (`mov pmc[]`, `mov pmd[]`), the
//! fault rules, the writable-bit masks, PMD sign extension, the PSR bits the
//! PMU looks at, and user-level PMD reads.

use super::tables::{self, Generation, PmdRule, RegSpec, counter};
use crate::model::itanium::tables::Tables;
use bit_field::BitField;

/// Number of PMC (and PMD) slots the model keeps: every implemented register
/// number is below 64 (Montecito's highest is PMD63).
pub const REGISTER_SLOTS: usize = 64;

/// How the model answers an access that the hardware silently absorbs.
///
/// The Itanium architecture does not fault on PMU register accesses: "Reading
/// of an unimplemented PMC or PMD register returns zero. Writes to
/// unimplemented PMC or PMD registers are ignored" (SDM Vol. 2 7.2), and "All
/// accesses to the implementation-dependent portion of PMC and PMD register
/// files result in implementation dependent behavior but do not fault" (SDM
/// Vol. 3, `mov` indirect). Ignored fields read as zero. A driver bug there
/// goes unnoticed on hardware; a test instrument should notice it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Checking {
    /// Report such accesses as [`Fault::ReservedRegisterField`] (the fault
    /// the architecture raises for reserved registers and fields everywhere
    /// else) and change nothing. The default.
    #[default]
    Strict,
    /// Do what the hardware does: unimplemented registers read as zero and
    /// drop writes, bits that are not writable keep their power-up value,
    /// index bits above 7:0 are ignored; never fault.
    Hardware,
}

/// Which access faulted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AccessKind {
    /// `mov r = pmc[n]`.
    ReadPmc,
    /// `mov pmc[n] = r`.
    WritePmc,
    /// `mov r = pmd[n]`.
    ReadPmd,
    /// `mov pmd[n] = r`.
    WritePmd,
}

/// A field whose value the sources leave undefined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ReservedField {
    /// I-EAR cache-mode latency umask (Itanium: 0Bh-0Eh; Itanium 2 and
    /// Montecito: an 8-bit pattern not in libpfm3's list).
    IEarLatency,
    /// I-EAR TLB-mode umask with a bit that selects no fill source.
    IEarTlbUmask,
    /// D-EAR cache-mode latency umask (Itanium: 7, 0Bh-0Eh; Itanium 2 and
    /// Montecito: 0Bh-0Fh).
    DEarLatency,
    /// D-EAR TLB-mode umask bit 0.
    DEarTlbUmask,
    /// Itanium 2 / Montecito D-EAR mode 11b (only cache 00, TLB 01, ALAT 10
    /// are defined).
    DEarMode,
}

/// What a strict-mode access got wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Violation {
    /// The register number is above 255: the hardware uses bits 7:0 of the
    /// index only.
    IndexOutOfRange,
    /// No such PMC/PMD on this generation (hardware: reads 0, writes ignored).
    Unimplemented,
    /// The write gives `bits` a value other than the one the hardware keeps
    /// there (ignored fields read as zero; fields Linux calls reserved keep
    /// their power-up value). For a counter PMD, `bits` are upper bits 63:W
    /// that are neither all zero nor a sign extension of bit W-1.
    FixedBits {
        /// The offending bits.
        bits: u64,
    },
    /// The write sets bits libpfm3 says must be zero (Itanium 2
    /// counter bits 27:26).
    MustBeZero {
        /// The offending bits.
        bits: u64,
    },
    /// A field holds a value the sources leave undefined.
    ReservedValue {
        /// Which field.
        field: ReservedField,
    },
}

/// An access the model refuses. A refused access changes nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Fault {
    /// Reserved Register/Field fault. Raised only under [`Checking::Strict`]:
    /// real hardware carries these PMU accesses out without a fault (see
    /// [`Checking`]).
    ReservedRegisterField {
        /// The access.
        access: AccessKind,
        /// The register number as given.
        index: u32,
        /// What is wrong with it.
        violation: Violation,
    },
    /// The [`MsrAdapter`](super::MsrAdapter) was given an address outside
    /// its map (a test-harness convention; no Itanium meaning).
    NotMapped {
        /// The address.
        msr: u32,
    },
    /// A write to the adapter's PSR address set bits other than PSR.up,
    /// PSR.sp and PSR.pp, which the model does not have.
    UnmodelledPsrBits {
        /// The offending bits.
        bits: u64,
    },
}

/// "Reserved Register/Field fault on write of PMC10: ReservedValue { .. }".
impl core::fmt::Display for Fault {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Fault::ReservedRegisterField {
                access,
                index,
                violation,
            } => write!(
                f,
                "Reserved Register/Field fault on {access:?} {index}: {violation:?}"
            ),
            Fault::NotMapped { msr } => write!(f, "address {msr:#x} is not in the adapter's map"),
            Fault::UnmodelledPsrBits { bits } => {
                write!(f, "PSR bits {bits:#x} are not modelled")
            }
        }
    }
}

impl core::error::Error for Fault {}

impl Fault {
    /// The violation of a Reserved Register/Field fault.
    pub const fn violation(&self) -> Option<Violation> {
        match *self {
            Self::ReservedRegisterField { violation, .. } => Some(violation),
            _ => None,
        }
    }
}

/// The processor status register bits the PMU depends on (SDM Vol. 2 7.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Psr {
    /// PSR.up (bit 2): enables user monitors (PMC.pm = 0).
    pub up: bool,
    /// PSR.sp (bit 20): secure monitors; PMD reads at CPL > 0 return zero.
    pub sp: bool,
    /// PSR.pp (bit 21): enables privileged monitors (PMC.pm = 1).
    pub pp: bool,
}

impl Psr {
    /// PSR.up bit position as a mask.
    pub const UP: u64 = 1 << 2;
    /// PSR.sp.
    pub const SP: u64 = 1 << 20;
    /// PSR.pp.
    pub const PP: u64 = 1 << 21;
    /// Every PSR bit the model keeps.
    pub const MODELLED: u64 = Self::UP | Self::SP | Self::PP;

    /// Both monitor enables set, PSR.sp clear.
    pub const MONITORING: Self = Self {
        up: true,
        sp: false,
        pp: true,
    };

    /// The modelled bits of a PSR value (others are ignored).
    pub const fn from_bits(bits: u64) -> Self {
        Self {
            up: bits & Self::UP != 0,
            sp: bits & Self::SP != 0,
            pp: bits & Self::PP != 0,
        }
    }

    /// As PSR bits.
    pub const fn bits(self) -> u64 {
        (if self.up { Self::UP } else { 0 })
            | (if self.sp { Self::SP } else { 0 })
            | (if self.pp { Self::PP } else { 0 })
    }
}

/// The PMU interrupt line (raised and taken by the counting logic).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct InterruptLine {
    pub(super) pending: bool,
    pub(super) overflow: u64,
    pub(super) edges: u32,
}

impl InterruptLine {
    pub(super) const NONE: Self = Self {
        pending: false,
        overflow: 0,
        edges: 0,
    };
}

/// The register-level model of one Itanium-family PMU. See the [module
/// documentation](super).
#[derive(Clone, Debug)]
pub struct ItaniumModel {
    pub(super) generation: Generation,
    pub(super) checking: Checking,
    pub(super) pmc: [u64; REGISTER_SLOTS],
    pub(super) pmd: [u64; REGISTER_SLOTS],
    pub(super) psr: Psr,
    pub(super) interrupt: InterruptLine,
    /// BPM pin strobes per counter (`ev`), indexed by counter number.
    pub(super) strobes: [u64; 16],
}

impl ItaniumModel {
    /// A model in its power-up state with [`Checking::Strict`]: every PMC at
    /// its power-up value (PMC0.fr set on Itanium and Itanium 2, Itanium 2
    /// PMC4 with its enable bit 23 set, ...), every PMD zero, PSR.up/pp/sp
    /// clear. `const`, so a model can live in a `static` behind a lock.
    pub const fn new(generation: Generation) -> Self {
        Self::with_checking(generation, Checking::Strict)
    }

    /// A model in its power-up state with the given checking.
    pub const fn with_checking(generation: Generation, checking: Checking) -> Self {
        let mut pmc = [0; REGISTER_SLOTS];
        let mut n = 0;
        while n < REGISTER_SLOTS {
            if let Some(spec) = tables::pmc_spec(generation, n as u32) {
                pmc[n] = spec.reset;
            }
            n += 1;
        }
        Self {
            generation,
            checking,
            pmc,
            pmd: [0; REGISTER_SLOTS],
            psr: Psr {
                up: false,
                sp: false,
                pp: false,
            },
            interrupt: InterruptLine::NONE,
            strobes: [0; 16],
        }
    }

    /// The generation.
    pub const fn generation(&self) -> Generation {
        self.generation
    }

    /// The checking mode.
    pub const fn checking(&self) -> Checking {
        self.checking
    }

    /// Changes the checking mode.
    pub fn set_checking(&mut self, checking: Checking) {
        self.checking = checking;
    }

    /// The modelled PSR bits.
    pub const fn psr(&self) -> Psr {
        self.psr
    }

    /// Sets PSR.up/sp/pp (what `sum`/`rum`/`ssm`/`rsm` would do).
    pub fn set_psr(&mut self, psr: Psr) {
        self.psr = psr;
    }

    /// Whether PMC0.fr is set: nothing counts or captures.
    pub const fn frozen(&self) -> bool {
        self.pmc[0] & tables::pmc0::FR != 0
    }

    /// Counter `n`'s W-bit count, without sign extension; 0 if `n` is not a
    /// counter.
    pub fn counter(&self, n: u32) -> u64 {
        if self.generation.is_counter(n) {
            self.pmd[n as usize]
        } else {
            0
        }
    }

    /// PMC `n` as stored (0 for unimplemented registers), without checks.
    pub const fn pmc(&self, n: u32) -> u64 {
        if (n as usize) < REGISTER_SLOTS {
            self.pmc[n as usize]
        } else {
            0
        }
    }

    /// PMD `n` as stored (counters without sign extension), without checks.
    pub const fn pmd(&self, n: u32) -> u64 {
        if (n as usize) < REGISTER_SLOTS {
            self.pmd[n as usize]
        } else {
            0
        }
    }

    fn fault(access: AccessKind, index: u32, violation: Violation) -> Fault {
        Fault::ReservedRegisterField {
            access,
            index,
            violation,
        }
    }

    /// Resolves index `n` for `access`: `Some(register)` when implemented,
    /// `None` when the hardware would read zero / drop the write.
    fn locate(&self, access: AccessKind, n: u32) -> Result<Option<u32>, Fault> {
        let strict = self.checking == Checking::Strict;
        let r = if n > 0xFF {
            if strict {
                return Err(Self::fault(access, n, Violation::IndexOutOfRange));
            }
            n & 0xFF
        } else {
            n
        };
        let implemented = match access {
            AccessKind::ReadPmc | AccessKind::WritePmc => {
                tables::pmc_spec(self.generation, r).is_some()
            }
            AccessKind::ReadPmd | AccessKind::WritePmd => {
                tables::pmd_kind(self.generation, r).is_some()
            }
        };
        if implemented {
            Ok(Some(r))
        } else if strict {
            Err(Self::fault(access, n, Violation::Unimplemented))
        } else {
            Ok(None)
        }
    }

    /// `mov r = pmc[n]` at CPL 0.
    pub fn read_pmc(&self, n: u32) -> Result<u64, Fault> {
        Ok(match self.locate(AccessKind::ReadPmc, n)? {
            Some(r) => self.pmc[r as usize],
            None => 0,
        })
    }

    /// `mov pmc[n] = value` at CPL 0 (followed by the serialization software
    /// issues: the write takes effect at once).
    pub fn write_pmc(&mut self, n: u32, value: u64) -> Result<(), Fault> {
        let Some(r) = self.locate(AccessKind::WritePmc, n)? else {
            return Ok(());
        };
        let Some(spec) = tables::pmc_spec(self.generation, r) else {
            return Ok(());
        };
        if self.checking == Checking::Strict {
            self.check_pmc(r, &spec, value)
                .map_err(|v| Self::fault(AccessKind::WritePmc, n, v))?;
        }
        self.pmc[r as usize] = (value & spec.writable) | (spec.reset & !spec.writable);
        Ok(())
    }

    /// The strict-mode rules for a write of `value` to PMC `r`.
    fn check_pmc(&self, r: u32, spec: &RegSpec, value: u64) -> Result<(), Violation> {
        let fixed = (value ^ spec.reset) & !spec.writable;
        if fixed != 0 {
            return Err(Violation::FixedBits { bits: fixed });
        }
        let must_be_zero = value & spec.must_be_zero;
        if must_be_zero != 0 {
            return Err(Violation::MustBeZero { bits: must_be_zero });
        }
        let layout = self.generation.layout();
        let field = if r == layout.iear_pmc {
            self.iear_reserved_field(value)
        } else if r == layout.dear_pmc {
            self.dear_reserved_field(value)
        } else {
            None
        };
        match field {
            Some(field) => Err(Violation::ReservedValue { field }),
            None => Ok(()),
        }
    }

    /// `mov r = pmd[n]` at CPL 0. Counter PMDs read with bits 63:W copying
    /// bit W-1.
    pub fn read_pmd(&self, n: u32) -> Result<u64, Fault> {
        Ok(match self.locate(AccessKind::ReadPmd, n)? {
            Some(r) => self.pmd_value(r),
            None => 0,
        })
    }

    /// `mov r = pmd[n]` at CPL > 0: zero when PSR.sp is set or when the
    /// register's monitor is privileged (its PMC's `pm` bit), as SDM 7.2 and
    /// VTune's Itanium event help say; otherwise as
    /// [`read_pmd`](Self::read_pmd).
    pub fn read_pmd_user(&self, n: u32) -> Result<u64, Fault> {
        let Some(r) = self.locate(AccessKind::ReadPmd, n)? else {
            return Ok(0);
        };
        if self.psr.sp || self.privileged_pmd(r) {
            return Ok(0);
        }
        Ok(self.pmd_value(r))
    }

    fn pmd_value(&self, r: u32) -> u64 {
        let v = self.pmd[r as usize];
        if self.generation.is_counter(r) {
            let w = self.generation.pmd_width();
            // Sign-extend bit W-1 into 63:W.
            (((v << (64 - w)) as i64) >> (64 - w)) as u64
        } else {
            v
        }
    }

    /// Whether the PMC controlling PMD `r` has its `pm` bit set.
    fn privileged_pmd(&self, r: u32) -> bool {
        let l = self.generation.layout();
        let (pmc, bit) = if self.generation.is_counter(r) {
            (r, 6)
        } else if r == l.iear_pmd_address || r == l.iear_pmd_latency {
            (l.iear_pmc, l.iear_pm_bit)
        } else if r == l.dear_pmd_address || r == l.dear_pmd_latency || r == l.dear_pmd_ip {
            (l.dear_pmc, 6)
        } else if (r >= l.btb_first_pmd && r < l.btb_first_pmd + l.btb_entries)
            || r == l.btb_index_pmd
            || Some(r) == l.btb_extension_pmd
        {
            (l.btb_pmc, 6)
        } else {
            return false;
        };
        self.pmc[pmc as usize] & (1 << bit) != 0
    }

    /// `mov pmd[n] = value` at CPL 0. A counter keeps bits W-1:0; bits 63:W
    /// are ignored (strict checking accepts them all zero or as a sign
    /// extension of bit W-1, e.g. a value read back). Other PMDs keep their
    /// defined bits.
    pub fn write_pmd(&mut self, n: u32, value: u64) -> Result<(), Fault> {
        let Some(r) = self.locate(AccessKind::WritePmd, n)? else {
            return Ok(());
        };
        let Some(kind) = tables::pmd_kind(self.generation, r) else {
            return Ok(());
        };
        let strict = self.checking == Checking::Strict;
        let kept = match kind {
            PmdRule::Counter => {
                let mask = self.generation.pmd_mask();
                if strict {
                    let upper = value & !mask;
                    let negative = value & (1 << (self.generation.pmd_width() - 1)) != 0;
                    if upper != 0 && !(negative && upper == !mask) {
                        return Err(Self::fault(
                            AccessKind::WritePmd,
                            n,
                            Violation::FixedBits { bits: upper },
                        ));
                    }
                }
                value & mask
            }
            PmdRule::Data { writable } => {
                let ignored = value & !writable;
                if strict && ignored != 0 {
                    return Err(Self::fault(
                        AccessKind::WritePmd,
                        n,
                        Violation::FixedBits { bits: ignored },
                    ));
                }
                value & writable
            }
        };
        self.pmd[r as usize] = kept;
        Ok(())
    }

    /// The threshold field of counter `c` (at most 3 on Itanium PMC6/7,
    /// whose bit 22 is not writable).
    pub(super) fn threshold(&self, c: u32) -> u64 {
        self.pmc[c as usize].get_bits(counter::THRESHOLD)
    }
}

//! The event address registers: the instruction EAR (configuration PMC10,
//! Montecito PMC37; data PMD0/1, Montecito PMD34/35) and the data EAR
//! (configuration PMC11, Montecito PMC40; data PMD2/3/17, Montecito
//! PMD32/33/36), with typed configurations and total decoders of the
//! captured samples (libpfm3's EAR layouts and pfmon's decoders; Intel
//! VTune's Itanium event help; HP Caliper's itlb measurement).
//!
//! Files: this one has what both EARs share (latency filters, TLB fill
//! sets, unit-mask problems); `iear.rs` the instruction EAR, `dear.rs` the
//! data EAR, `ipear.rs` Montecito's IP-EAR, `tests.rs` the per-generation
//! layout tests.
//!
//! An EAR captures one miss at a time: the instruction EAR either
//! instruction cache misses whose latency is above a threshold (cache mode)
//! or instruction TLB misses (TLB mode, VTune: "When PMC\[10\].tlb is one,
//! the instruction event address register captures addresses of
//! instruction TLB misses"); the data EAR likewise for data, and from
//! Itanium 2 on ALAT misses. A counter counting the EAR's event
//! ([`crate::arch::itanium::events`]) overflows every N captures, and the
//! handler reads the sample: that is how HP Caliper samples "every Nth
//! instruction TLB miss" and reports which level filled it (HP Caliper's
//! itlb measurement).
//!
//! # Configuration layouts
//!
//! | | Itanium PMC10 | Itanium 2 PMC10 | Montecito PMC37 |
//! |---|---|---|---|
//! | plm | 3:0 | 3:0 | 3:0 |
//! | pm | 6 | 4 | 4 |
//! | mode | `tlb` 7: 0 cache, 1 TLB | `ct` 13 = 1: cache; 13:12 = 00: TLB; 01: nothing | as Itanium 2 |
//! | umask | 19:16 | 12:5 cache (8 bits), 11:5 TLB (7 bits) | as Itanium 2 |
//! | ism | 25:24 | 15:14 | none |
//!
//! | | Itanium PMC11 | Itanium 2 PMC11 | Montecito PMC40 |
//! |---|---|---|---|
//! | plm, pm | 3:0, 6 | 3:0, 6 | 3:0, 6 |
//! | mode | `tlb` 7 | `mode` 8:7: 0 cache, 1 TLB, 2 ALAT | as Itanium 2 |
//! | umask | 19:16 | 19:16 | 19:16 |
//! | ism | 25:24 | 25:24 | fixed 10b |
//! | other | `pt` 28 (pass tags) | | |
//!
//! # Unit masks
//!
//! | | cache mode | TLB mode |
//! |---|---|---|
//! | Itanium I-EAR | a latency code: 0 >= 4 cycles, 1 >= 8, ..., A >= 4096, F none | 4h HPW fill, 8h software fill; **no L2 fill** (HP Caliper's itlb measurement: "L2 fills are not reported for, and do not apply to, Itanium systems") |
//! | Itanium D-EAR | 0-6 >= 4 ... >= 256, 8 >= 512, 9 >= 1024, A >= 2048, F none (7 unused) | 2h L2 DTLB, 4h HPW, 8h software |
//! | Itanium 2 I-EAR | an 8-bit mask pattern: FFh >= 4, FEh >= 8, FCh >= 16, F8h >= 32, F0h >= 128, E0h >= 256, C0h >= 1024, 80h >= 4096, 40h any latency, 00h RAB hit | 1h L2 ITLB, 2h HPW, 4h software (fault) |
//! | Itanium 2 D-EAR | 0-A: >= 4 ... >= 4096 | 2h L2 DTLB, 4h HPW, 8h software (fault) |
//!
//! # Samples
//!
//! | | Itanium | Itanium 2 and Montecito |
//! |---|---|---|
//! | I-EAR address | PMD0: `v` 0, `tlb` 1 (TLB mode: 0 HPW, 1 software), line 63:5 | PMD0: `stat` 1:0, line 63:5 |
//! | I-EAR latency | PMD1 11:0 | PMD1 11:0, overflow 12 |
//! | D-EAR | PMD2 data address; PMD3 latency 11:0, level 63:62 (TLB mode: N/A, L2, HPW, software); PMD17 `vl` 0, slot 3:2, bundle 63:4 | PMD2 data address; PMD3 latency 12:0, overflow 13, `stat` 15:14; PMD17 slot 1:0, `bn` 2, `vl` 3, bundle 63:4 (+16 if `bn`) |
//!
//! `stat` (Itanium 2, TLB mode): 0 invalid, 1 L2 TLB, 2 HPW (VHPT walker),
//! 3 software (fault). In cache mode the sources say `stat != 0` means
//! valid for the I-EAR; the D-EAR's cache and ALAT modes are given no rule
//! there, and this crate applies the same one (recorded resolution;
//! pfmon's sample printer likewise reports a Montecito D-EAR sample
//! "valid" exactly when PMD33 `stat` is non-zero, in every mode, and the
//! crate's model writes `stat` 01b for a valid capture).
//!
//! # Source notes
//!
//! | topic | resolution |
//! |---|---|
//! | The Itanium 2 I-EAR cache patterns listed (no >= 64, >= 512, >= 2048; 40h "> 0 cycles" although C0h is >= 1024) do not read as one obvious bit-per-range encoding | this crate names the listed patterns ([`LatencyFilter`]); any other 8-bit value is kept as a raw mask, undecoded, and refused as undefined by [`IearConfig::umask_problem`] (so by the validator and the driver), as the strict model refuses it |
//! | libpfm writes "ct=11 => cache mode with umask bit 7 set" | [`IearConfig`] decodes bit 13 = 1 as cache mode with an 8-bit mask at 12:5, so this falls out |
//! | Itanium PMC10 power-up value | not in the sources; zero assumed (cache mode, >= 4 cycles, plm 0) |
//! | Montecito IP-EAR (PMC42) | libpfm3 gives its fields (plm, pm, mode 10:8, delay 18:11) but not the mode values or the capture format: [`IpEarConfig`] keeps mode and delay raw; no decoder |
//!
//! # Examples
//!
//! Sample instruction TLB misses filled by the hardware page walker or by
//! software, and decode a capture:
//!
//! ```
//! use pmu::arch::itanium::ear::{IearConfig, IearMode, ItlbSample, TlbFill, TlbFills};
//! use pmu::arch::itanium::{Generation, Plm};
//!
//! let g = Generation::Itanium2;
//! let fills = TlbFills { l2: false, hpw: true, software: true };
//! let iear = IearConfig::tlb_misses(g, fills)?.with_plm(Plm::ALL);
//! assert_eq!(iear.mode(), IearMode::TlbMiss);
//! // PMD0: address 63:5, stat 1:0 = 2 (filled by the HPW).
//! let s = ItlbSample::decode(iear, 0x4000_0040 | 2).unwrap();
//! assert_eq!((s.address, s.fill), (0x4000_0040, TlbFill::Hpw));
//! # Ok::<(), pmu::arch::itanium::FieldError>(())
//! ```

use super::fields::FieldError;
use super::generation::Generation;

mod dear;
mod iear;
mod ipear;

pub use dear::{DearConfig, DearEvent, DearMode, DearSample, InstructionAddress};
pub use iear::{IcacheSample, IearConfig, IearEvent, IearMode, IearSample, ItlbSample};
pub use ipear::IpEarConfig;

/// An EAR latency threshold: capture only misses whose latency is at least
/// this many cycles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum LatencyFilter {
    /// >= 4 cycles.
    AtLeast4,
    /// >= 8 cycles.
    AtLeast8,
    /// >= 16 cycles.
    AtLeast16,
    /// >= 32 cycles.
    AtLeast32,
    /// >= 64 cycles.
    AtLeast64,
    /// >= 128 cycles.
    AtLeast128,
    /// >= 256 cycles.
    AtLeast256,
    /// >= 512 cycles.
    AtLeast512,
    /// >= 1024 cycles.
    AtLeast1024,
    /// >= 2048 cycles.
    AtLeast2048,
    /// >= 4096 cycles.
    AtLeast4096,
    /// Itanium unit mask Fh, libpfm's `LAT_NONE` (the sources give it no
    /// latency).
    LatNone,
    /// Itanium 2 I-EAR unit mask 40h: every L1 instruction cache miss
    /// ("> 0 cycles").
    AnyLatency,
    /// Itanium 2 I-EAR unit mask 00h: hits in the request address buffer.
    RabHit,
}

impl LatencyFilter {
    /// Every filter.
    pub const ALL: [LatencyFilter; 14] = [
        LatencyFilter::AtLeast4,
        LatencyFilter::AtLeast8,
        LatencyFilter::AtLeast16,
        LatencyFilter::AtLeast32,
        LatencyFilter::AtLeast64,
        LatencyFilter::AtLeast128,
        LatencyFilter::AtLeast256,
        LatencyFilter::AtLeast512,
        LatencyFilter::AtLeast1024,
        LatencyFilter::AtLeast2048,
        LatencyFilter::AtLeast4096,
        LatencyFilter::LatNone,
        LatencyFilter::AnyLatency,
        LatencyFilter::RabHit,
    ];

    /// The minimum latency in cycles, for the thresholds that have one.
    pub const fn min_cycles(self) -> Option<u16> {
        match self {
            LatencyFilter::AtLeast4 => Some(4),
            LatencyFilter::AtLeast8 => Some(8),
            LatencyFilter::AtLeast16 => Some(16),
            LatencyFilter::AtLeast32 => Some(32),
            LatencyFilter::AtLeast64 => Some(64),
            LatencyFilter::AtLeast128 => Some(128),
            LatencyFilter::AtLeast256 => Some(256),
            LatencyFilter::AtLeast512 => Some(512),
            LatencyFilter::AtLeast1024 => Some(1024),
            LatencyFilter::AtLeast2048 => Some(2048),
            LatencyFilter::AtLeast4096 => Some(4096),
            LatencyFilter::AnyLatency => Some(1),
            LatencyFilter::LatNone | LatencyFilter::RabHit => None,
        }
    }

    /// The I-EAR cache-mode unit mask of this filter on `generation`.
    pub const fn iear_umask(self, generation: Generation) -> Option<u8> {
        match generation {
            Generation::Itanium => match self {
                LatencyFilter::AtLeast4 => Some(0x0),
                LatencyFilter::AtLeast8 => Some(0x1),
                LatencyFilter::AtLeast16 => Some(0x2),
                LatencyFilter::AtLeast32 => Some(0x3),
                LatencyFilter::AtLeast64 => Some(0x4),
                LatencyFilter::AtLeast128 => Some(0x5),
                LatencyFilter::AtLeast256 => Some(0x6),
                LatencyFilter::AtLeast512 => Some(0x7),
                LatencyFilter::AtLeast1024 => Some(0x8),
                LatencyFilter::AtLeast2048 => Some(0x9),
                LatencyFilter::AtLeast4096 => Some(0xA),
                LatencyFilter::LatNone => Some(0xF),
                _ => None,
            },
            Generation::Itanium2 | Generation::Montecito => match self {
                LatencyFilter::AtLeast4 => Some(0xFF),
                LatencyFilter::AtLeast8 => Some(0xFE),
                LatencyFilter::AtLeast16 => Some(0xFC),
                LatencyFilter::AtLeast32 => Some(0xF8),
                LatencyFilter::AtLeast128 => Some(0xF0),
                LatencyFilter::AtLeast256 => Some(0xE0),
                LatencyFilter::AtLeast1024 => Some(0xC0),
                LatencyFilter::AtLeast4096 => Some(0x80),
                LatencyFilter::AnyLatency => Some(0x40),
                LatencyFilter::RabHit => Some(0x00),
                _ => None,
            },
        }
    }

    /// The D-EAR cache-mode unit mask of this filter on `generation`.
    pub const fn dear_umask(self, generation: Generation) -> Option<u8> {
        match generation {
            Generation::Itanium => match self {
                LatencyFilter::AtLeast4 => Some(0x0),
                LatencyFilter::AtLeast8 => Some(0x1),
                LatencyFilter::AtLeast16 => Some(0x2),
                LatencyFilter::AtLeast32 => Some(0x3),
                LatencyFilter::AtLeast64 => Some(0x4),
                LatencyFilter::AtLeast128 => Some(0x5),
                LatencyFilter::AtLeast256 => Some(0x6),
                LatencyFilter::AtLeast512 => Some(0x8),
                LatencyFilter::AtLeast1024 => Some(0x9),
                LatencyFilter::AtLeast2048 => Some(0xA),
                LatencyFilter::LatNone => Some(0xF),
                _ => None,
            },
            Generation::Itanium2 | Generation::Montecito => match self {
                LatencyFilter::AtLeast4 => Some(0x0),
                LatencyFilter::AtLeast8 => Some(0x1),
                LatencyFilter::AtLeast16 => Some(0x2),
                LatencyFilter::AtLeast32 => Some(0x3),
                LatencyFilter::AtLeast64 => Some(0x4),
                LatencyFilter::AtLeast128 => Some(0x5),
                LatencyFilter::AtLeast256 => Some(0x6),
                LatencyFilter::AtLeast512 => Some(0x7),
                LatencyFilter::AtLeast1024 => Some(0x8),
                LatencyFilter::AtLeast2048 => Some(0x9),
                LatencyFilter::AtLeast4096 => Some(0xA),
                _ => None,
            },
        }
    }

    /// The filter an I-EAR cache-mode unit mask encodes, if it is one the
    /// sources name.
    pub const fn from_iear_umask(generation: Generation, umask: u8) -> Option<LatencyFilter> {
        let mut i = 0;
        while i < LatencyFilter::ALL.len() {
            let f = LatencyFilter::ALL[i];
            if let Some(u) = f.iear_umask(generation)
                && u == umask
            {
                return Some(f);
            }
            i += 1;
        }
        None
    }

    /// The filter a D-EAR cache-mode unit mask encodes, if defined.
    pub const fn from_dear_umask(generation: Generation, umask: u8) -> Option<LatencyFilter> {
        let mut i = 0;
        while i < LatencyFilter::ALL.len() {
            let f = LatencyFilter::ALL[i];
            if let Some(u) = f.dear_umask(generation)
                && u == umask
            {
                return Some(f);
            }
            i += 1;
        }
        None
    }
}

/// Which TLB-miss fills an EAR in TLB mode captures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TlbFills {
    /// Misses filled from the second-level TLB (not on the Itanium I-EAR).
    pub l2: bool,
    /// Misses filled by the hardware page walker (VHPT walker).
    pub hpw: bool,
    /// Misses that faulted to software.
    pub software: bool,
}

impl TlbFills {
    /// All three.
    pub const ALL: TlbFills = TlbFills {
        l2: true,
        hpw: true,
        software: true,
    };
}

/// The unit mask bits of a TLB fill kind: (L2, HPW, software), per
/// generation and EAR (libpfm3's EAR unit masks). `l2` is `None` on the
/// Itanium I-EAR.
pub(super) const fn tlb_bits(generation: Generation, instruction: bool) -> (Option<u8>, u8, u8) {
    match (generation, instruction) {
        (Generation::Itanium, true) => (None, 0x4, 0x8),
        (Generation::Itanium, false) => (Some(0x2), 0x4, 0x8),
        (_, true) => (Some(0x1), 0x2, 0x4),
        (_, false) => (Some(0x2), 0x4, 0x8),
    }
}

pub(super) const fn tlb_encode(
    generation: Generation,
    instruction: bool,
    f: TlbFills,
) -> Result<u8, FieldError> {
    let (l2, hpw, sw) = tlb_bits(generation, instruction);
    let mut u = 0;
    if f.l2 {
        match l2 {
            Some(b) => u |= b,
            None => return Err(FieldError::L2FillNotOnItanium),
        }
    }
    if f.hpw {
        u |= hpw;
    }
    if f.software {
        u |= sw;
    }
    Ok(u)
}

pub(super) const fn tlb_decode(
    generation: Generation,
    instruction: bool,
    umask: u8,
) -> (TlbFills, u8) {
    let (l2, hpw, sw) = tlb_bits(generation, instruction);
    let l2b = match l2 {
        Some(b) => b,
        None => 0,
    };
    (
        TlbFills {
            l2: umask & l2b != 0,
            hpw: umask & hpw != 0,
            software: umask & sw != 0,
        },
        umask & !(l2b | hpw | sw),
    )
}

/// The TLB level that filled a captured TLB miss.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TlbFill {
    /// The second-level TLB (Itanium 2 I-EAR; the D-EAR of both). Never
    /// reported by the Itanium I-EAR: "L2 fills are not reported for, and do
    /// not apply to, Itanium systems" (HP Caliper's itlb measurement).
    L2,
    /// The hardware page walker (VHPT walker).
    Hpw,
    /// Software (a TLB miss fault).
    Software,
}

impl TlbFill {
    /// From a 2-bit level/status field: 0 is "not applicable / invalid".
    const fn from_level(v: u64) -> Option<TlbFill> {
        match v & 3 {
            1 => Some(TlbFill::L2),
            2 => Some(TlbFill::Hpw),
            3 => Some(TlbFill::Software),
            _ => None,
        }
    }
}

/// Something wrong with an EAR unit mask, for validation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum UmaskProblem {
    /// The unit mask encodes nothing in the current mode.
    Undefined(u8),
    /// The Itanium I-EAR was asked for L2 fills (bit 1, the D-EAR's L2 bit).
    L2FillOnItanium,
}

#[cfg(test)]
mod tests;

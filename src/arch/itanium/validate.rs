//! Checking a PMC value before it is written, the way the Linux perfmon
//! driver checked writes (`perfmon.c`: `pfm_write_pmcs` and the model
//! checkers `pfm_ita_pmc_check`, `pfm_mck_pmc_check`,
//! `pfm_mont_pmc_check`), plus the field and catalog checks the typed
//! layouts make possible. Every illegal case has its own [`PmcError`]
//! variant. [`Validator::check`] is total: it returns a result for every
//! register number and every 64-bit value, without panicking.
//!
//! # The checks, in order
//!
//! Perfmon's order (`pfm_write_pmcs`; the reference's "PMC write path",
//! steps 1 -> 2 -> 3 -> 4): the register, then the privilege rule on the
//! value *as written*, then `oi` forced, then the model checker (reserved
//! bits restored, Itanium 2 PMC4's enable bit). The crate's own checks
//! (field widths, catalog, EARs) sit where they see the value they need.
//!
//! 1. The register must be implemented ([`PmcError::NotImplemented`]) and
//!    not one of the control registers PMC0-3, which perfmon refuses
//!    ([`PmcError::ControlRegister`]; the driver writes PMC0 itself, as a
//!    [`crate::arch::itanium::Pmc0`]).
//! 2. Privilege, per [`PrivilegePolicy`]: perfmon requires `pm` = 1 in
//!    system-wide and 0 in per-task sessions for any value other than the
//!    power-up one ([`PmcError::PrivilegeMismatch`]), and judges both the
//!    comparison and `pm` on the value as written, before step 4 forces
//!    `oi` and restores reserved bits (`perfmon.c`: `value !=
//!    PMC_DFL_VAL(cnum) && is_system ^ pmc_pm`, with `pmc_pm` read from the
//!    written value at the descriptor's `pm_pos`). So system-wide, Itanium 2
//!    PMC4 = 80_0000h (its power-up value, `pm` = 0) is accepted and
//!    written as 80_0020h, and PMC10 = 1_0000h (the power-up value but for
//!    reserved bit 16, `pm` = 0) is refused, although its merged value is
//!    the power-up one.
//! 3. Field values the register cannot hold, refused under every policy
//!    because dropping them would change what is counted: an Itanium event
//!    code above 7Fh in bit 15 ([`PmcError::EventCodeTooWide`]), an Itanium
//!    PMC6/7 threshold in bit 22 ([`PmcError::ThresholdTooWide`]; VTune's
//!    Itanium event help), an instruction set mask on the branch trace
//!    buffer ([`PmcError::IsmNotApplicable`]; VTune: "The instruction set
//!    mask applies to PMC\[4, 5, 6, 7, 10, 11\] but not to PMC\[12\]").
//! 4. Reserved bits, per [`ReservedPolicy`]: bits outside the register's
//!    writable fields ([`crate::arch::itanium::PmcInfo`]) are either
//!    replaced by their power-up values (perfmon's behaviour,
//!    `pfm_mck_reserved`) or refused ([`PmcError::ReservedBits`]; on
//!    Montecito a changed ISM gets [`PmcError::IsmFixed`]).
//! 5. Forced bits, per [`Policy`]: perfmon forces `oi` on every counter (it
//!    virtualises 64-bit counters; its step 3) and the power enable bit on
//!    Itanium 2 PMC4 (`pfm_mck_pmc_check`, step 4).
//! 6. Counters (every generation, against its catalog): the
//!    event code must be in the catalog ([`PmcError::UnknownEvent`]), the
//!    counter must be one the event allows ([`PmcError::EventNotOnCounter`]),
//!    and a non-zero threshold must be below the event's maximum increment
//!    ([`PmcError::ThresholdNotBelowMaxIncrement`]): the counter adds one in
//!    cycles where the count exceeds the threshold (VTune), so a
//!    threshold at or above the maximum never counts.
//! 7. EARs: the D-EAR mode 3 of Itanium 2 is undefined
//!    ([`PmcError::UndefinedEarMode`]); unit masks that encode nothing are
//!    refused ([`PmcError::UndefinedEarUmask`]), and so is an L2 fill asked
//!    of the Itanium I-EAR ([`PmcError::L2FillNotOnItanium`]; HP Caliper's
//!    itlb measurement).
//! 8. Itanium 2 PMC8/13/14 (Montecito PMC32/41/38): perfmon refuses the
//!    combination that "can produce inconsistencies in tagging i-side events
//!    in L1D and L2 caches": no DBR pair enabled in PMC13 (bits 48:45 zero),
//!    PMC8 not ignoring the address range (`ig_ad` clear), and IBR pair 0 or
//!    1 constraining in PMC14 (bit 1 or bit 4 clear)
//!    ([`PmcError::InconsistentTagging`]). The check uses the value being
//!    written and the last accepted values of the other two registers, which
//!    the [`Validator`] remembers (power-up values at first).
//!
//! An accepted value comes back with the bits replaced and forced, and
//! whether the write makes an instruction (IBR) or data (DBR) range
//! restriction active ([`RangeEffect`]): perfmon clears the debug registers
//! before such a write takes effect (Itanium: PMC13 `ta` = 0 or PMC11 `pt`
//! = 0; Itanium 2: PMC13 or PMC14 active, see
//! [`crate::arch::itanium::opcode`]).
//!
//! # Agreement with the model
//!
//! The validator and the strict register-level model
//! (`pmu::model::itanium`, written from the manuals independently, with
//! its own bit tables) agree on every implemented PMC of every generation:
//! every value this validator accepts under [`Policy::STRICT`] the model
//! accepts and holds; every value refused for the register's layout
//! (reserved bits, field widths, EAR modes and unit masks) the model
//! refuses too; every value refused only by the catalog or perfmon's
//! tagging rule the model, which knows no events, accepts. A test
//! (`the_validator_and_the_strict_model_agree_on_every_pmc`) checks it
//! exhaustively over each register's fields, with its reserved bits
//! sampled. Where the sources disagree, one rule holds for both, stated in
//! each one's own code:
//!
//! | bits | sources | the rule |
//! |---|---|---|
//! | Itanium 2 PMC12 bits 5:4 | perfmon's mask 0xFFFF makes them writable; libpfm3's `pmc12_ita2_reg` names them `btbc_ig1` (ignored), and perfmon's mask for the same register on Montecito (PMC39) is 0xFFCF | reserved: refused under [`ReservedPolicy::Reject`], replaced by 0 under [`ReservedPolicy::Replace`] (the hardware ignores them, so perfmon's write and this one leave it in the same state). The model has the same rule |
//! | Itanium 2 / Montecito I-EAR cache-mode unit masks 41h-7Fh | libpfm3 lists ten patterns (FFh ... 80h, 40h "> 0 cycles", 00h RAB hit) and nothing else | undefined, refused ([`PmcError::UndefinedEarUmask`]). The model has the same rule |
//!
//! Two differences remain, both bits the validator treats as reserved and
//! the model stores without effect, so the model is the more lenient (a
//! value the validator accepts is never one the model refuses): Itanium
//! PMC13 bits 49:32 (set in perfmon's power-up value, absent from
//! libpfm3's layout, which has only `ta`) and Itanium 2 PMC5-7 bit 23 (the
//! enable bit, PMC4-only per libpfm3, written on every counter by oprofile
//! and the perf_events port; see [`crate::arch::itanium::Generation`]). The
//! test asserts these are the only ones.
//!
//! # Not checked
//!
//! * Unit masks of counters: the catalog lists the unit masks libpfm
//!   names, which need not be all the hardware accepts; only code, counter
//!   and threshold are checked (with the code's widest rule when the unit
//!   mask is not listed, see [`crate::arch::itanium::events::rule`]).
//! * Multi-register scheduling rules (Itanium 2 cache groups; libpfm's
//!   refusal to combine the BTB with the D-EAR's TLB or ALAT modes, which
//!   comes from pfmon's sources rather than the register layouts).
//!
//! # Examples
//!
//! ```
//! use pmu::arch::itanium::{Generation, PmcError, Policy, Validator};
//!
//! let v = Validator::new(Generation::Itanium2, Policy::STRICT);
//! // PMC0 is a control register: the driver writes it itself.
//! assert_eq!(v.check(0, 0), Err(PmcError::ControlRegister { pmc: 0 }));
//! // An I-EAR cache-mode latency mask no source defines (55h) is refused.
//! let iear = 1 << 13 | 0x55 << 5 | 0xF;
//! assert!(matches!(v.check(10, iear), Err(PmcError::UndefinedEarUmask { .. })));
//! ```

use core::fmt;

use super::descriptors::{self, Checker, PmcInfo, Tagging};
use super::ear::{DearConfig, DearMode, IearConfig, UmaskProblem};
use super::events;
use super::fields::Ism;
use super::generation::{CounterSet, Generation};
use super::opcode::{DataRangeConfig, InstructionRangeConfig, RangeTag};
use super::pmc::CounterLayout;
use crate::register::Field;

/// What to do with bits outside a register's writable fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ReservedPolicy {
    /// Replace them by the register's power-up value (Linux perfmon).
    Replace,
    /// Refuse the value.
    Reject,
}

/// Which `pm` value monitors must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PrivilegePolicy {
    /// Either.
    Any,
    /// Privileged monitors (`pm` = 1), as perfmon requires system-wide.
    System,
    /// User monitors (`pm` = 0), as perfmon requires per task.
    PerTask,
}

/// How a [`Validator`] treats values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Policy {
    /// Reserved bits.
    pub reserved: ReservedPolicy,
    /// The `pm` bit of monitors.
    pub privilege: PrivilegePolicy,
    /// Set `oi` on every counter configuration (perfmon does).
    pub force_overflow_interrupt: bool,
    /// Set the power enable bit of Itanium 2 PMC4 (perfmon does).
    pub force_pmc4_enable: bool,
}

impl Policy {
    /// Linux perfmon's behaviour (system-wide privilege left open).
    pub const PERFMON: Policy = Policy {
        reserved: ReservedPolicy::Replace,
        privilege: PrivilegePolicy::Any,
        force_overflow_interrupt: true,
        force_pmc4_enable: true,
    };

    /// Refuse anything that is not exactly a legal value; change nothing.
    pub const STRICT: Policy = Policy {
        reserved: ReservedPolicy::Reject,
        privilege: PrivilegePolicy::Any,
        force_overflow_interrupt: false,
        force_pmc4_enable: false,
    };
}

/// Why a PMC value was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PmcError {
    /// The generation has no such PMC.
    NotImplemented {
        /// The register.
        pmc: u8,
    },
    /// PMC0-3 hold the freeze and overflow bits and are not configured
    /// through this path.
    ControlRegister {
        /// The register.
        pmc: u8,
    },
    /// Bits outside the writable fields differ from the power-up value
    /// ([`ReservedPolicy::Reject`]).
    ReservedBits {
        /// The register.
        pmc: u8,
        /// The offending bits.
        bits: u64,
    },
    /// Itanium counter: bit 15 set, an event code above 7Fh (the `es` field
    /// is 7 bits).
    EventCodeTooWide {
        /// The register.
        pmc: u8,
        /// Bits 15:8.
        code: u8,
    },
    /// Itanium PMC6/7: bit 22 set, a threshold above 3 (the field is 2
    /// bits).
    ThresholdTooWide {
        /// The register.
        pmc: u8,
        /// Bits 22:20.
        threshold: u8,
        /// The field width.
        bits: u8,
    },
    /// An instruction set mask (bits 25:24) on the branch trace buffer
    /// configuration, which has none.
    IsmNotApplicable {
        /// The register.
        pmc: u8,
    },
    /// Montecito: the ISM of counters and the D-EAR must be 10b (IA-64 only)
    /// ([`ReservedPolicy::Reject`]).
    IsmFixed {
        /// The register.
        pmc: u8,
        /// The ISM written.
        ism: Ism,
    },
    /// `pm` does not match the session ([`PrivilegePolicy`]).
    PrivilegeMismatch {
        /// The register.
        pmc: u8,
        /// The `pm` written.
        pm: bool,
    },
    /// No event in the catalog has this code.
    UnknownEvent {
        /// The register.
        pmc: u8,
        /// The event code.
        code: u8,
    },
    /// The event cannot be counted on this counter.
    EventNotOnCounter {
        /// The register.
        pmc: u8,
        /// The event code.
        code: u8,
        /// The unit mask.
        umask: u8,
        /// The counters that can count it.
        allowed: CounterSet,
    },
    /// A non-zero threshold at or above the event's maximum increment: the
    /// counter would never count.
    ThresholdNotBelowMaxIncrement {
        /// The register.
        pmc: u8,
        /// The event code.
        code: u8,
        /// The threshold.
        threshold: u8,
        /// The event's maximum increment per cycle.
        max_increment: u8,
    },
    /// An undefined EAR mode (Itanium 2 D-EAR `mode` = 3).
    UndefinedEarMode {
        /// The register.
        pmc: u8,
        /// The mode field.
        mode: u8,
    },
    /// An EAR unit mask that encodes nothing in the configured mode.
    UndefinedEarUmask {
        /// The register.
        pmc: u8,
        /// The unit mask.
        umask: u8,
    },
    /// The Itanium I-EAR in TLB mode asked for L2 fills (unit mask bit 1),
    /// which do not apply to Itanium (HP Caliper's itlb measurement).
    L2FillNotOnItanium {
        /// The register.
        pmc: u8,
    },
    /// Itanium 2 PMC8/13/14 (Montecito PMC32/41/38): IBR pair 0 or 1 tags
    /// instructions while no DBR pair is enabled and the opcode matcher does
    /// not ignore the address range, which perfmon refuses because it tags
    /// instruction-side events in the L1D and L2 caches inconsistently.
    InconsistentTagging {
        /// The register being written.
        pmc: u8,
    },
}

impl fmt::Display for PmcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PmcError::NotImplemented { pmc } => write!(f, "PMC{pmc} is not implemented"),
            PmcError::ControlRegister { pmc } => write!(
                f,
                "PMC{pmc} holds the freeze and overflow bits and cannot be configured"
            ),
            PmcError::ReservedBits { pmc, bits } => write!(
                f,
                "PMC{pmc}: reserved bits {bits:#x} differ from their power-up value"
            ),
            PmcError::EventCodeTooWide { pmc, code } => write!(
                f,
                "PMC{pmc}: event code {code:#x} does not fit Itanium's 7-bit es field (bit 15 is reserved)"
            ),
            PmcError::ThresholdTooWide {
                pmc,
                threshold,
                bits,
            } => write!(
                f,
                "PMC{pmc}: threshold {threshold} does not fit its {bits}-bit threshold field"
            ),
            PmcError::IsmNotApplicable { pmc } => write!(
                f,
                "PMC{pmc}: the instruction set mask does not apply to the branch trace buffer"
            ),
            PmcError::IsmFixed { pmc, ism } => write!(
                f,
                "PMC{pmc}: Montecito monitors IA-64 code only, ISM must be 10b (got {:02b}b)",
                ism.bits()
            ),
            PmcError::PrivilegeMismatch { pmc, pm } => write!(
                f,
                "PMC{pmc}: pm={} does not match the session (pm=1 system-wide, pm=0 per task)",
                pm as u8
            ),
            PmcError::UnknownEvent { pmc, code } => {
                write!(f, "PMC{pmc}: no event has code {code:#x}")
            }
            PmcError::EventNotOnCounter {
                pmc, code, umask, ..
            } => write!(
                f,
                "PMC{pmc}: event {code:#x} (unit mask {umask:#x}) cannot be counted on this counter"
            ),
            PmcError::ThresholdNotBelowMaxIncrement {
                pmc,
                code,
                threshold,
                max_increment,
            } => write!(
                f,
                "PMC{pmc}: threshold {threshold} is not below the maximum increment {max_increment} of event {code:#x}, so it would never count"
            ),
            PmcError::UndefinedEarMode { pmc, mode } => {
                write!(f, "PMC{pmc}: EAR mode {mode} is undefined")
            }
            PmcError::UndefinedEarUmask { pmc, umask } => write!(
                f,
                "PMC{pmc}: EAR unit mask {umask:#x} encodes nothing in this mode"
            ),
            PmcError::L2FillNotOnItanium { pmc } => write!(
                f,
                "PMC{pmc}: the Itanium I-EAR has no L2 ITLB fills to capture"
            ),
            PmcError::InconsistentTagging { pmc } => write!(
                f,
                "PMC{pmc}: IBR pair 0/1 tagging with no DBR pair enabled and the opcode matcher honouring the range tags instruction-side cache events inconsistently"
            ),
        }
    }
}

impl core::error::Error for PmcError {}

/// Which address-range restriction a write makes active. Perfmon clears
/// the corresponding debug registers before such a write takes effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RangeEffect {
    /// Instruction ranges (IBRs).
    pub instruction: bool,
    /// Data ranges (DBRs).
    pub data: bool,
}

/// An accepted value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Accepted {
    /// The value to write.
    pub value: u64,
    /// Bits the reserved-bit policy replaced.
    pub replaced: u64,
    /// Bits the policy forced on (`oi`, Itanium 2 PMC4's enable bit).
    pub forced: u64,
    /// The range restrictions the value activates.
    pub range: RangeEffect,
}

/// The 8 bits where the widest `es` lies (Itanium's 7-bit field leaves
/// bit 15 ignored).
const ES_SLOT: Field = Field::new(8, 8);
/// The instruction set mask of the counters, the D-EAR and (absent) the
/// branch trace buffer.
const ISM: Field = DearConfig::ISM;

/// The registers perfmon's tagging check reads: Itanium 2 PMC8, PMC13,
/// PMC14, or Montecito PMC32, PMC41, PMC38 (the generation's descriptor
/// table); `None` on Itanium.
const fn tagging_registers(generation: Generation) -> Option<Tagging> {
    descriptors::table(generation).tagging
}

/// A PMC write checker with the state perfmon's checks need.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Validator {
    generation: Generation,
    policy: Policy,
    /// Last accepted opcode matcher, DBR and IBR configuration values (the
    /// registers of [`tagging_registers`]).
    opcode: u64,
    dbr: u64,
    ibr: u64,
}

impl Validator {
    /// A checker for `generation` under `policy`, with the tagging registers
    /// at their power-up values.
    pub const fn new(generation: Generation, policy: Policy) -> Validator {
        let (opcode, dbr, ibr) = match tagging_registers(generation) {
            Some(t) => (
                generation.pmc_or_empty(t.opcode).default,
                generation.pmc_or_empty(t.dbr).default,
                generation.pmc_or_empty(t.ibr).default,
            ),
            None => (0, 0, 0),
        };
        Validator {
            generation,
            policy,
            opcode,
            dbr,
            ibr,
        }
    }

    /// The generation.
    pub const fn generation(&self) -> Generation {
        self.generation
    }

    /// The policy.
    pub const fn policy(&self) -> Policy {
        self.policy
    }

    /// The remembered opcode matcher, DBR and IBR configuration values
    /// (Itanium 2 PMC8, PMC13, PMC14; Montecito PMC32, PMC41, PMC38).
    /// `None` on Itanium, which has no such check.
    pub const fn tagging_state(&self) -> Option<(u64, u64, u64)> {
        match tagging_registers(self.generation) {
            Some(_) => Some((self.opcode, self.dbr, self.ibr)),
            None => None,
        }
    }

    /// Check `value` for PMC `pmc`, and remember it if it is one of the
    /// registers the tagging check reads.
    pub const fn write(&mut self, pmc: u8, value: u64) -> Result<Accepted, PmcError> {
        let r = self.check(pmc, value);
        if let Ok(a) = r
            && let Some(t) = tagging_registers(self.generation)
        {
            if pmc == t.opcode {
                self.opcode = a.value;
            } else if pmc == t.dbr {
                self.dbr = a.value;
            } else if pmc == t.ibr {
                self.ibr = a.value;
            }
        }
        r
    }

    /// Check `value` for PMC `pmc` without remembering it: perfmon's write
    /// path, step by step (the module documentation), with the register's
    /// row of the generation's descriptor table ([`Generation::pmc`]).
    pub const fn check(&self, pmc: u8, value: u64) -> Result<Accepted, PmcError> {
        let g = self.generation;
        let info = match g.pmc(pmc) {
            Some(i) => i,
            None => return Err(PmcError::NotImplemented { pmc }),
        };
        // 1. Control registers.
        if matches!(info.checker, Checker::Control) {
            return Err(PmcError::ControlRegister { pmc });
        }
        // 2. Privilege, perfmon's step 2: on the value as written, before
        //    `oi` is forced and reserved bits are replaced.
        if let Err(e) = self.check_privilege(pmc, info, value) {
            return Err(e);
        }
        // 3. Values the fields cannot hold (on the value as written, so
        //    that replacing reserved bits cannot change what is counted).
        if let Err(e) = field_widths(pmc, info, value) {
            return Err(e);
        }
        // 4. Reserved bits.
        let merged = match self.merge_reserved(pmc, info, value) {
            Ok(m) => m,
            Err(e) => return Err(e),
        };
        // 5. Forced bits.
        let v = self.force(pmc, info, merged);
        // 6-8. Per register, then the tagging registers together.
        let range = match register_rules(g, pmc, info, v) {
            Ok(r) => r,
            Err(e) => return Err(e),
        };
        if let Err(e) = self.check_tagging(pmc, v) {
            return Err(e);
        }
        Ok(Accepted {
            value: v,
            replaced: value ^ merged,
            forced: v ^ merged,
            range,
        })
    }

    /// Step 2: the `pm` bit of a register that has one, as written, against
    /// the policy (a value equal to the power-up value passes).
    const fn check_privilege(&self, pmc: u8, info: PmcInfo, value: u64) -> Result<(), PmcError> {
        if let Some(pm) = info.pm
            && value != info.default
        {
            let pm = pm.flag(value);
            let bad = match self.policy.privilege {
                PrivilegePolicy::Any => false,
                PrivilegePolicy::System => !pm,
                PrivilegePolicy::PerTask => pm,
            };
            if bad {
                return Err(PmcError::PrivilegeMismatch { pmc, pm });
            }
        }
        Ok(())
    }

    /// Step 4: `value` with every bit outside the writable fields at its
    /// power-up value, or the refusal of a value that differed there under
    /// [`ReservedPolicy::Reject`] (Montecito's fixed ISM named as such).
    const fn merge_reserved(&self, pmc: u8, info: PmcInfo, value: u64) -> Result<u64, PmcError> {
        let merged = info.merge(value);
        let replaced = value ^ merged;
        if matches!(self.policy.reserved, ReservedPolicy::Reject) && replaced != 0 {
            if info.checker.ism_fixed() && ISM.get(value) != ISM.get(info.default) {
                return Err(PmcError::IsmFixed {
                    pmc,
                    ism: Ism::from_bits(ISM.get(value)),
                });
            }
            return Err(PmcError::ReservedBits {
                pmc,
                bits: replaced,
            });
        }
        Ok(merged)
    }

    /// Step 5: perfmon's step 3 (`oi`) and its model checker's PMC4 enable
    /// bit (step 4; the counter layout's enable bit, Itanium 2 PMC4 only).
    /// Both are writable bits, so forcing before or after the merge gives
    /// the same value.
    const fn force(&self, pmc: u8, info: PmcInfo, merged: u64) -> u64 {
        let mut v = merged;
        if let Checker::Counter(layout) = info.checker {
            if self.policy.force_overflow_interrupt {
                v = layout.oi.set_flag(v, true);
            }
            if self.policy.force_pmc4_enable
                && let Some((enable, counter)) = layout.enable
                && counter == pmc
            {
                v = enable.set_flag(v, true);
            }
        }
        v
    }

    /// Step 8: a write to the opcode matcher, DBR or IBR configuration must
    /// leave the three consistent with what was accepted for the others.
    const fn check_tagging(&self, pmc: u8, v: u64) -> Result<(), PmcError> {
        if let Some(t) = tagging_registers(self.generation)
            && (pmc == t.opcode || pmc == t.dbr || pmc == t.ibr)
        {
            let opcode = if pmc == t.opcode { v } else { self.opcode };
            let dbr = if pmc == t.dbr { v } else { self.dbr };
            let ibr = if pmc == t.ibr { v } else { self.ibr };
            let no_dbr_pair = !DataRangeConfig::from_bits_truncate(dbr).any_enabled();
            let opcode_honours_range = !t.ig_ad.flag(opcode);
            let ibr01_constrains =
                match InstructionRangeConfig::from_bits_truncate(self.generation, ibr) {
                    Some(c) => !c.ignored(0) || !c.ignored(1),
                    None => false,
                };
            if no_dbr_pair && opcode_honours_range && ibr01_constrains {
                return Err(PmcError::InconsistentTagging { pmc });
            }
        }
        Ok(())
    }
}

/// Steps 6-7: the rules of one register kind on the value to be written
/// (events and thresholds of a counter, EAR modes and unit masks), and
/// which address range restrictions it turns on.
const fn register_rules(
    g: Generation,
    pmc: u8,
    info: PmcInfo,
    v: u64,
) -> Result<RangeEffect, PmcError> {
    let mut range = RangeEffect {
        instruction: false,
        data: false,
    };
    match info.checker {
        Checker::Counter(layout) => {
            if let Err(e) = counter_event(g, layout, pmc, v) {
                return Err(e);
            }
        }
        Checker::Iear => {
            let c = IearConfig::from_bits_truncate(g, v);
            match c.umask_problem() {
                Some(UmaskProblem::L2FillOnItanium) => {
                    return Err(PmcError::L2FillNotOnItanium { pmc });
                }
                Some(UmaskProblem::Undefined(umask)) => {
                    return Err(PmcError::UndefinedEarUmask { pmc, umask });
                }
                None => {}
            }
        }
        Checker::Dear { .. } => {
            let c = DearConfig::from_bits_truncate(g, v);
            if matches!(c.mode(), DearMode::Undefined) {
                return Err(PmcError::UndefinedEarMode {
                    pmc,
                    mode: DearConfig::MODE.get(v) as u8,
                });
            }
            if let Some(UmaskProblem::Undefined(umask)) = c.umask_problem() {
                return Err(PmcError::UndefinedEarUmask { pmc, umask });
            }
            if let Some(false) = c.pass_tags() {
                range.data = true;
            }
        }
        Checker::RangeTag => {
            range.instruction = !RangeTag::TA.flag(v);
        }
        Checker::DataRange => {
            range.data = DataRangeConfig::from_bits_truncate(v).is_active();
        }
        Checker::InstructionRange => {
            range.instruction = match InstructionRangeConfig::from_bits_truncate(g, v) {
                Some(c) => c.is_active(),
                None => false,
            };
        }
        Checker::Control | Checker::Plain | Checker::Btb => {}
    }
    Ok(range)
}

/// The bits of PMC `pmc` of `generation` whose writability the sources
/// dispute (see the module documentation): Itanium 2 PMC12 bits 5:4,
/// writable in Linux perfmon's mask, ignored in libpfm's layout. A value
/// with them set is one the hardware may not keep; the driver never sets
/// them, and the hypervisor support gives them their power-up value 0
/// (`pmu::virt::itanium`).
pub const fn disputed_bits(generation: Generation, pmc: u8) -> u64 {
    generation.pmc_or_empty(pmc).disputed
}

/// Check `value` for PMC `pmc` of `generation` with a fresh [`Validator`]
/// (tagging registers at their power-up values).
pub const fn validate(
    generation: Generation,
    policy: Policy,
    pmc: u8,
    value: u64,
) -> Result<Accepted, PmcError> {
    Validator::new(generation, policy).check(pmc, value)
}

/// Step 3: field values the register cannot hold: a counter's event code
/// or threshold wider than its layout's field (Itanium's 7-bit `es`, the
/// 2-bit threshold of its PMC6/7), an ISM on the branch trace buffer.
const fn field_widths(pmc: u8, info: PmcInfo, value: u64) -> Result<(), PmcError> {
    match info.checker {
        Checker::Counter(layout) => {
            let code = ES_SLOT.get(value);
            if code >> layout.es.bits() != 0 {
                return Err(PmcError::EventCodeTooWide {
                    pmc,
                    code: code as u8,
                });
            }
            let threshold = layout.threshold.get(value);
            let bits = layout.threshold_of(pmc).bits();
            if threshold >> bits != 0 {
                return Err(PmcError::ThresholdTooWide {
                    pmc,
                    threshold: threshold as u8,
                    bits,
                });
            }
            Ok(())
        }
        Checker::Btb if ISM.get(value) != 0 => Err(PmcError::IsmNotApplicable { pmc }),
        _ => Ok(()),
    }
}

/// Step 6: the counter's event against the catalog.
const fn counter_event(
    g: Generation,
    layout: &CounterLayout,
    pmc: u8,
    v: u64,
) -> Result<(), PmcError> {
    let code = layout.es.get(v) as u8;
    let umask = layout.umask.get(v) as u8;
    let threshold = layout.threshold.get(v) as u8;
    let rule = match events::rule(g, code, umask) {
        Some(r) => r,
        None => return Err(PmcError::UnknownEvent { pmc, code }),
    };
    if !rule.counters.contains(pmc) {
        return Err(PmcError::EventNotOnCounter {
            pmc,
            code,
            umask,
            allowed: rule.counters,
        });
    }
    if threshold != 0 && threshold >= rule.max_increment {
        return Err(PmcError::ThresholdNotBelowMaxIncrement {
            pmc,
            code,
            threshold,
            max_increment: rule.max_increment,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;

//! Shared helpers for the Itanium model tests.

pub use crate::access::MsrAccess;
pub use crate::model::itanium::tables::{Tables, counter, events, pmc0};
pub use crate::model::itanium::*;
pub use Generation::{Itanium, Itanium2, Montecito};

/// Every generation.
pub const GENERATIONS: [Generation; 3] = Generation::ALL;

/// A model in its power-up state, then unfrozen (PMC0 = 0) with PSR.up and
/// PSR.pp set.
pub fn ready(g: Generation) -> ItaniumModel {
    let mut m = ItaniumModel::new(g);
    m.write_pmc(0, 0).unwrap();
    m.set_psr(Psr::MONITORING);
    m
}

/// 2^W.
pub fn wrap(g: Generation) -> u64 {
    1 << g.pmd_width()
}

/// The generic counters of `g`.
pub fn counters(g: Generation) -> core::ops::RangeInclusive<u32> {
    4..=g.last_counter()
}

/// A counter PMC value: event `es`/`umask`, every privilege level, both
/// instruction sets (Montecito: `ism` 10b, the only value it takes), and on
/// Itanium 2 PMC4 the enable bit 23.
pub fn counter_config(g: Generation, c: u32, es: u8, umask: u8) -> u64 {
    let mut v = (u64::from(es) << 8) | (u64::from(umask) << 16) | counter::PLM;
    if g == Montecito {
        v |= 2 << 24;
    }
    if g == Itanium2 && c == 4 {
        v |= counter::ITANIUM2_ENABLE;
    }
    v
}

/// Programs counter `c` with [`counter_config`] plus `extra` bits.
pub fn program(m: &mut ItaniumModel, c: u32, es: u8, umask: u8, extra: u64) {
    let v = counter_config(m.generation(), c, es, umask) | extra;
    m.write_pmc(c, v).unwrap();
}

/// CPU_CYCLES occurrences.
pub fn cycles(n: u64) -> Event {
    Event::new(events::CPU_CYCLES, 0, n)
}

/// A strict-mode fault.
pub fn rrf(access: AccessKind, index: u32, violation: Violation) -> Result<(), Fault> {
    Err(Fault::ReservedRegisterField {
        access,
        index,
        violation,
    })
}

/// A fixed-bits violation of a PMC write.
pub fn pmc_fixed(index: u32, bits: u64) -> Result<(), Fault> {
    rrf(AccessKind::WritePmc, index, Violation::FixedBits { bits })
}

/// Every register, PSR and interrupt state, for before/after comparisons.
pub fn dump(m: &ItaniumModel) -> Vec<u64> {
    let mut v: Vec<u64> = (0..64).map(|n| m.pmc(n)).collect();
    v.extend((0..64).map(|n| m.pmd(n)));
    v.push(m.psr().bits());
    v.push(u64::from(m.interrupt_pending()));
    v
}

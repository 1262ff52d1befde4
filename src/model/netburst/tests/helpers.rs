//! Shared helpers for the model tests.

pub use crate::access::MsrAccess;
pub use crate::model::netburst::tables::{cccr, escr};
pub use crate::model::netburst::*;

pub const T0: LogicalProcessor = LogicalProcessor::T0;
pub const T1: LogicalProcessor = LogicalProcessor::T1;
pub const OS: Privilege = Privilege::Os;
pub const USR: Privilege = Privilege::Usr;
pub const WRAP: u64 = 1 << 40;
/// All four T0/T1 OS/USR bits.
pub const ALL_THREADS: u64 = escr::T0_OS | escr::T0_USR | escr::T1_OS | escr::T1_USR;

pub fn ht() -> NetBurstModel {
    NetBurstModel::new(Config::prescott_ht())
}

/// An ESCR value.
pub fn escr_value(select: u8, mask: u16, bits: u64) -> u64 {
    (u64::from(select) << 25) | (u64::from(mask) << 9) | bits
}

/// A CCCR value with ENABLE, the ESCR select and active thread 11b.
pub fn cccr_value(escr_select: u8) -> u64 {
    cccr::ENABLE | (u64::from(escr_select) << 13) | cccr::ACTIVE_THREAD_ANY
}

/// A TS event each block can count, and how: (ESCR0 MSR, ESCR1 MSR, CCCR
/// ESCR select, event).
pub fn ts_setup(counter: usize) -> (u32, u32, u8, EventKind) {
    match counter {
        // BPU_fetch_request TCMISS on BPU_ESCR0/1.
        0..=3 => (0x3B2, 0x3B3, 0, EventKind::new(EscrGroup::Bpu, 0x03, 1)),
        // tc_ms_xfer CISC on MS_ESCR0/1.
        4..=7 => (0x3C0, 0x3C1, 0, EventKind::new(EscrGroup::Ms, 0x05, 1)),
        // memory_complete LSC on SAAT_ESCR0/1.
        8..=11 => (0x3AE, 0x3AF, 2, EventKind::new(EscrGroup::Saat, 0x08, 1)),
        // uops_retired NBOGUS on CRU_ESCR0/1.
        _ => (0x3B8, 0x3B9, 4, EventKind::new(EscrGroup::Cru01, 0x01, 1)),
    }
}

/// Programs counter `c` to count its block's TS event on both threads at
/// every privilege level, with `extra` CCCR bits; returns the event.
pub fn program(m: &mut NetBurstModel, c: usize, extra: u64) -> EventKind {
    let (e0, e1, sel, kind) = ts_setup(c);
    let side1 = matches!(c, 2 | 3 | 6 | 7 | 10 | 11 | 14 | 15 | 17);
    let msr = if side1 { e1 } else { e0 };
    m.write_msr(msr, escr_value(kind.select, kind.mask, ALL_THREADS))
        .unwrap();
    m.write_msr(0x360 + c as u32, cccr_value(sel) | extra)
        .unwrap();
    kind
}

/// Every MSR the model may have, read as T0 (faults as `None`).
pub fn dump(m: &mut NetBurstModel) -> Vec<Option<u64>> {
    let mut out = Vec::new();
    for msr in (0x300..0x400).chain([0x1A0, 0x600]) {
        out.push(m.read_msr(msr).ok());
    }
    if let Some(mut t1) = m.thread(T1) {
        out.push(t1.read_msr(0x600).ok());
        out.push(t1.read_msr(0x3F1).ok());
    }
    out
}

/// A small deterministic PRNG (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

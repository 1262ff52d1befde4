//! The DS save area as the model sees it (SDM 18.15.7, the 64-bit format):
//! the PEBS fields of the DS management area ([`DsManagement`]), the PEBS
//! record ([`PebsRecord`]), and what the model keeps per logical processor
//! (a copy of those fields, the PEBS registers, an owned buffer of
//! [`PEBS_RECORD_SLOTS`] records). The PEBS assist that fills it is
//! tagging's (`tagging.rs`).

/// Size of a 64-bit PEBS record (SDM 18.15.7: RFLAGS, RIP, RAX-R15).
pub const PEBS_RECORD_SIZE: u64 = 144;
/// How many PEBS records the model keeps per logical processor.
pub const PEBS_RECORD_SLOTS: usize = 8;

/// A 64-bit-format PEBS record: the architectural state after the µop that
/// took the PEBS assist retired.
///
/// One of the two names the model defines beside the driver
/// (`crate::arch::netburst::ds::PebsRecord`), on purpose: these are memory
/// layouts the processor writes, so the model lays them out from the SDM on
/// its own, and a driver that reads a field at the wrong offset reads the
/// model's record wrong.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PebsRecord {
    /// RFLAGS.
    pub rflags: u64,
    /// RIP.
    pub rip: u64,
    /// RAX, RBX, RCX, RDX, RSI, RDI, RBP, RSP, R8-R15, in that order.
    pub gprs: [u64; 16],
}

impl PebsRecord {
    /// The record as the hardware lays it out in memory (little endian).
    pub fn to_bytes(&self) -> [u8; PEBS_RECORD_SIZE as usize] {
        let mut out = [0u8; PEBS_RECORD_SIZE as usize];
        let words = [self.rflags, self.rip].into_iter().chain(self.gprs);
        for (chunk, w) in out.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        out
    }
}

/// The PEBS fields of a 64-bit DS management area (SDM 18.15.7, 64-bit DS
/// save area format: offsets 20H-40H).
///
/// Defined beside the driver's (`crate::arch::netburst::ds::DsManagement`)
/// on purpose, as [`PebsRecord`] is: a memory layout the model reads and
/// writes from its own transcription of the SDM.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DsManagement {
    /// PEBS buffer base (offset 20H).
    pub pebs_buffer_base: u64,
    /// PEBS index: where the next record goes (offset 28H).
    pub pebs_index: u64,
    /// PEBS absolute maximum (offset 30H).
    pub pebs_absolute_maximum: u64,
    /// PEBS interrupt threshold (offset 38H).
    pub pebs_interrupt_threshold: u64,
    /// PEBS counter reset value (offset 40H; 40 bits used).
    pub pebs_counter_reset: u64,
}

impl DsManagement {
    /// Offset of the PEBS buffer base in the 64-bit DS management area.
    pub const PEBS_OFFSET: usize = 0x20;

    /// Parses the PEBS fields from the bytes of a DS management area; `None`
    /// if `area` is shorter than 48H bytes.
    pub fn from_bytes(area: &[u8]) -> Option<Self> {
        let word = |i: usize| -> Option<u64> {
            let at = Self::PEBS_OFFSET + 8 * i;
            let bytes = area.get(at..at + 8)?;
            let mut b = [0u8; 8];
            b.copy_from_slice(bytes);
            Some(u64::from_le_bytes(b))
        };
        Some(Self {
            pebs_buffer_base: word(0)?,
            pebs_index: word(1)?,
            pebs_absolute_maximum: word(2)?,
            pebs_interrupt_threshold: word(3)?,
            pebs_counter_reset: word(4)?,
        })
    }
}

/// Per-logical-processor PEBS state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct PebsState {
    pub ds: DsManagement,
    pub registers: PebsRecord,
    pub records: [PebsRecord; PEBS_RECORD_SLOTS],
    /// The PEBS counter overflowed: the next at-retirement event it counts
    /// takes the assist.
    pub armed: bool,
    /// Records written beyond the model's slots (or below the base).
    pub lost: u64,
}

impl PebsState {
    pub const EMPTY: Self = Self {
        ds: DsManagement {
            pebs_buffer_base: 0,
            pebs_index: 0,
            pebs_absolute_maximum: 0,
            pebs_interrupt_threshold: 0,
            pebs_counter_reset: 0,
        },
        registers: PebsRecord {
            rflags: 0,
            rip: 0,
            gprs: [0; 16],
        },
        records: [PebsRecord {
            rflags: 0,
            rip: 0,
            gprs: [0; 16],
        }; PEBS_RECORD_SLOTS],
        armed: false,
        lost: 0,
    };
}

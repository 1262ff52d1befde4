//! PEBS records of the architectural PMU (documented on [`PebsRecord`]):
//! their formats, the layout a configuration makes ([`RecordLayout`]), the
//! decoding of the words the processor wrote, and the memory that holds
//! them ([`PebsArea`]).

use super::msrs::{CounterSet, PebsDataCfg};
use crate::arch::ia32::ds::{DsMemory, MAX_RECORD_WORDS, RecordSlot};
use crate::register::{Field, register};
use crate::sealed::Sealed;

/// The general registers a record saved: the state after the instruction
/// that took the assist (SDM Vol. 3B: "the machine state after the
/// instruction that causes the PEBS assist is retired").
pub use crate::arch::ia32::Gprs;

/// What a record says of the memory access of its instruction: the load
/// latency facility's fields (formats 1-3, every record; the memory group
/// of an adaptive record).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MemoryInfo {
    /// The data linear address (DLA) of the load (or store).
    pub address: u64,
    /// The data source encoding (DSE; the memory group's "auxiliary"
    /// word): where the load was satisfied, its TLB and lock bits.
    pub source: u64,
    /// The load's latency in core cycles (the `lat` word; 0 for a record
    /// of another event).
    pub latency: u64,
    /// Transactional-execution information (formats 2-5), if the format
    /// has it.
    pub tsx: Option<u64>,
}

/// One PEBS record as the processor wrote it, whatever its format (SDM
/// Vol. 3B "Processor Event Based Sampling (PEBS)" of each generation:
/// Nehalem's record format 1, Haswell's 2, Skylake's 3, Ice Lake's
/// adaptive format 4 and format 5): its words, kept as written, and its
/// layout, which the accessors decode them with. The handler copies the
/// words and reads only what it needs (the counters, the IP), so a record
/// costs the interrupt little more than its copy.
///
/// # Which instruction pointer
///
/// A record has up to two:
///
/// | format | [`PebsRecord::next_ip`] (the RIP field) | [`PebsRecord::eventing_ip`] |
/// |---|---|---|
/// | 1 (Nehalem) | the instruction after the one that took the assist (offset 08H; the assist is trap-like: `IA32_PERF_CAPABILITIES[6]`) | none |
/// | 2 (Haswell), 3 (Skylake) | the same | the instruction that caused the event (EventingIP, offset B0H) |
/// | 4, 5 (adaptive) | the GPR group's RIP, the next instruction, when `MSR_PEBS_DATA_CFG` includes that group | the basic group's IP, EventingIP |
///
/// [`PebsRecord::ip`] picks one for a precise level as `perf` does
/// (`:p` the RIP field, `:pp` and `:ppp` EventingIP).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PebsRecord {
    layout: RecordLayout,
    words: [u64; MAX_RECORD_WORDS],
}

impl PebsRecord {
    /// A record of `layout`, every word 0, for the handler to read the
    /// processor's words into.
    pub(crate) const fn empty(layout: RecordLayout) -> PebsRecord {
        PebsRecord {
            layout,
            words: [0; MAX_RECORD_WORDS],
        }
    }

    /// The layout's words, to read a record into.
    #[inline(always)]
    pub(crate) fn words_mut(&mut self) -> &mut [u64] {
        let n = self.layout.words();
        self.words.get_mut(..n).unwrap_or(&mut [])
    }

    /// Whether the words are a record of the layout: an adaptive record's
    /// basic group names the layout's groups and size.
    #[inline(always)]
    pub(crate) fn is_valid(&self) -> bool {
        if self.layout.format <= 3 {
            return true;
        }
        let basic = BasicFormat::from_bits(self.word(0));
        let groups = self.layout.adaptive.map_or(0, |c| c.bits());
        u64::from(basic.groups()) == groups && u32::from(basic.size()) == self.layout.bytes()
    }

    /// Word `i` of the record (0 past it).
    #[inline(always)]
    fn word(&self, i: usize) -> u64 {
        self.words.get(i).copied().unwrap_or(0)
    }

    /// The record's layout.
    pub const fn layout(&self) -> RecordLayout {
        self.layout
    }

    /// The record format (1-5).
    pub const fn format(&self) -> u8 {
        self.layout.format
    }

    /// The record's words, as the processor wrote them.
    pub fn words(&self) -> &[u64] {
        self.words.get(..self.layout.words()).unwrap_or(&[])
    }

    /// Formats 1-3: the words of the fixed record (RFLAGS 0, RIP 1, the
    /// general registers 2-17 in the order RAX, RBX, RCX, RDX, RSI, RDI,
    /// RBP, RSP, R8-R15, status 18, DLA 19, DSE 20, latency 21, EventingIP
    /// 22, TSX 23, TSC 24). Adaptive: where the memory group and the GPR
    /// group start, if present.
    #[inline]
    fn legacy(&self) -> bool {
        self.layout.format <= 3
    }

    #[inline]
    fn memory_at(&self) -> Option<usize> {
        match self.layout.adaptive {
            _ if self.legacy() => Some(19),
            Some(cfg) if cfg.memory() => Some(words::BASIC),
            _ => None,
        }
    }

    #[inline]
    fn gprs_at(&self) -> Option<usize> {
        match self.layout.adaptive {
            _ if self.legacy() => Some(0),
            Some(cfg) if cfg.gprs() => {
                Some(words::BASIC + if cfg.memory() { words::MEMORY } else { 0 })
            }
            _ => None,
        }
    }

    /// The instruction after the one that took the assist, as the RIP
    /// field gives it (none in an adaptive record without the GPR group).
    #[inline]
    pub fn next_ip(&self) -> Option<u64> {
        self.gprs_at().map(|at| self.word(at + 1))
    }

    /// The instruction that caused the event (formats 2-5).
    #[inline]
    pub fn eventing_ip(&self) -> Option<u64> {
        match self.layout.format {
            1 => None,
            2 | 3 => Some(self.word(22)),
            _ => Some(self.word(1)),
        }
    }

    /// The counters the record is for: formats 3-5's applicable counters
    /// (exact); formats 1-2's status field, `IA32_PERF_GLOBAL_STATUS` at
    /// the assist (which may name other counters too: the driver runs one
    /// PEBS counter at a time there).
    #[inline]
    pub fn counters(&self) -> CounterSet {
        CounterSet::from_bits_truncate(self.word(if self.legacy() { 18 } else { 2 }))
    }

    /// RFLAGS after the instruction, if the record has the registers.
    pub fn rflags(&self) -> Option<u64> {
        self.gprs_at().map(|at| self.word(at))
    }

    /// The general registers after the instruction, if the record has
    /// them (formats 1-3 always; adaptive with the GPR group, whose order
    /// is the registers' encoding order: RAX, RCX, RDX, RBX, RSP, RBP, RSI,
    /// RDI, unlike formats 1-3's).
    pub fn gprs(&self) -> Option<Gprs> {
        let at = self.gprs_at()?;
        let w = |i: usize| self.word(at + i);
        let (rbx, rcx, rdx, rsi, rdi, rbp, rsp) = if self.legacy() {
            (w(3), w(4), w(5), w(6), w(7), w(8), w(9))
        } else {
            (w(5), w(3), w(4), w(8), w(9), w(7), w(6))
        };
        Some(Gprs {
            rax: w(2),
            rbx,
            rcx,
            rdx,
            rsi,
            rdi,
            rbp,
            rsp,
            r8: w(10),
            r9: w(11),
            r10: w(12),
            r11: w(13),
            r12: w(14),
            r13: w(15),
            r14: w(16),
            r15: w(17),
        })
    }

    /// The memory access (formats 1-3 always; adaptive with the memory
    /// group).
    pub fn memory(&self) -> Option<MemoryInfo> {
        let at = self.memory_at()?;
        Some(MemoryInfo {
            address: self.word(at),
            source: self.word(at + 1),
            latency: self.word(at + 2),
            tsx: match self.layout.format {
                1 => None,
                2 | 3 => Some(self.word(23)),
                _ => Some(self.word(at + 3)),
            },
        })
    }

    /// The TSC at the assist (formats 3-5).
    pub fn tsc(&self) -> Option<u64> {
        match self.layout.format {
            1 | 2 => None,
            3 => Some(self.word(24)),
            _ => Some(self.word(3)),
        }
    }

    /// The instruction pointer a sample at precise level `precise`
    /// reports: EventingIP for [`Precise::Zero`] and
    /// [`Precise::MustBeZero`] (the RIP field where the record has none),
    /// the RIP field for [`Precise::Constant`] (EventingIP where the
    /// record has no RIP field); 0 for a record with neither.
    #[inline]
    pub fn ip(&self, precise: Precise) -> u64 {
        let (first, then) = if precise.eventing() {
            (self.eventing_ip(), self.next_ip())
        } else {
            (self.next_ip(), self.eventing_ip())
        };
        first.or(then).unwrap_or(0)
    }
}

/// The instruction pointer a sample reports, by `perf`'s precise level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Precise {
    /// `:p` (`precise_ip` 1): constant skid, the record's RIP field (the
    /// next instruction; EventingIP in an adaptive record without GPRs,
    /// the only IP it has).
    Constant,
    /// `:pp` (`precise_ip` 2): zero skid requested: EventingIP (formats
    /// 2-5; refused on format 1, which has none).
    Zero,
    /// `:ppp` (`precise_ip` 3): zero skid required: EventingIP too, which
    /// is the instruction of the event itself.
    MustBeZero,
}

impl Precise {
    /// The level of `perf`'s `precise_ip` value (1-3).
    pub const fn from_level(level: u8) -> Option<Precise> {
        match level {
            1 => Some(Precise::Constant),
            2 => Some(Precise::Zero),
            3 => Some(Precise::MustBeZero),
            _ => None,
        }
    }

    /// `perf`'s `precise_ip` value.
    pub const fn level(self) -> u8 {
        match self {
            Precise::Constant => 1,
            Precise::Zero => 2,
            Precise::MustBeZero => 3,
        }
    }

    /// Whether the sample takes EventingIP.
    pub const fn eventing(self) -> bool {
        !matches!(self, Precise::Constant)
    }
}

register! {
    /// Word 0 of an adaptive record's basic group (SDM Vol. 3B "Basic Info
    /// Group"): the groups that follow (the record format, bits of
    /// `MSR_PEBS_DATA_CFG`) and the record's size in bytes.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct BasicFormat(u64): from_bits {
        /// The groups present, bits 31:0 (`MSR_PEBS_DATA_CFG`'s layout).
        pub GROUPS: 0..=31 => groups, with_groups: u32;
        /// The record's size in bytes, bits 63:48.
        pub SIZE: 48..=63 => size, with_size: u16;
    }
}

/// The layout of the records a configuration makes: the format and, for
/// an adaptive record, its groups. The driver computes it when it sets the
/// buffer up and publishes it to the PMI handler, which decodes with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RecordLayout {
    format: u8,
    /// Formats 4-5 with PEBS baseline: the memory and GPR groups.
    adaptive: Option<PebsDataCfg>,
}

/// Words of each part of a record.
mod words {
    /// Formats 1-3: RFLAGS, RIP, 16 general registers, then the memory
    /// fields: status (18), DLA (19), DSE (20), latency (21); format 2 adds
    /// EventingIP (22) and TSX information (23), format 3 the TSC (24).
    pub const fn legacy(format: u8) -> usize {
        match format {
            1 => 22,
            2 => 24,
            _ => 25,
        }
    }
    /// The basic group of an adaptive record: format and size, EventingIP,
    /// applicable counters, TSC.
    pub const BASIC: usize = 4;
    /// The memory group: address, auxiliary (data source), latency, TSX.
    pub const MEMORY: usize = 4;
    /// The GPR group: RFLAGS, RIP, RAX, RCX, RDX, RBX, RSP, RBP, RSI, RDI,
    /// R8-R15.
    pub const GPRS: usize = 18;
}

impl RecordLayout {
    /// The layout of format `format` records (1-5): formats 1-3 fixed,
    /// 4-5 a basic group with, given PEBS baseline (`adaptive`), the groups
    /// of `adaptive` (memory and GPRs only: the XMM and LBR groups are not
    /// driven). `None` for another format, or groups outside those.
    pub const fn new(format: u8, adaptive: Option<PebsDataCfg>) -> Option<RecordLayout> {
        match (format, adaptive) {
            (1..=3, _) => Some(RecordLayout {
                format,
                adaptive: None,
            }),
            (4 | 5, Some(cfg)) => {
                if cfg.bits() & !(PebsDataCfg::MEMORY.mask() | PebsDataCfg::GPRS.mask()) != 0 {
                    None
                } else {
                    Some(RecordLayout {
                        format,
                        adaptive: Some(cfg),
                    })
                }
            }
            (4 | 5, None) => Some(RecordLayout {
                format,
                adaptive: None,
            }),
            _ => None,
        }
    }

    /// The format.
    pub const fn format(self) -> u8 {
        self.format
    }

    /// The adaptive groups (`MSR_PEBS_DATA_CFG`'s image), if the records
    /// are adaptive with groups.
    pub const fn groups(self) -> Option<PebsDataCfg> {
        self.adaptive
    }

    /// Words per record.
    #[inline]
    pub const fn words(self) -> usize {
        match self.format {
            1..=3 => words::legacy(self.format),
            _ => {
                let mut n = words::BASIC;
                if let Some(cfg) = self.adaptive {
                    if cfg.memory() {
                        n += words::MEMORY;
                    }
                    if cfg.gprs() {
                        n += words::GPRS;
                    }
                }
                n
            }
        }
    }

    /// Bytes per record: 176 (format 1), 192 (2), 200 (3), 32 to 208
    /// (4-5, by groups).
    #[inline]
    pub const fn bytes(self) -> u32 {
        self.words() as u32 * 8
    }

    /// The record these words are, or `None` if they are not one of this
    /// layout: fewer words, or an adaptive record whose basic group names
    /// other groups or another size than the layout's.
    pub fn decode(self, w: &[u64]) -> Option<PebsRecord> {
        let mut record = PebsRecord::empty(self);
        let words = record.words_mut();
        words.copy_from_slice(w.get(..words.len())?);
        record.is_valid().then_some(record)
    }

    /// Packed for the PMI state (one atomic word): the format in bits 3:0,
    /// whether adaptive groups follow in bit 4, the groups in bits 31:8.
    pub(crate) const fn pack(self) -> u32 {
        let (adaptive, groups) = match self.adaptive {
            Some(cfg) => (1, cfg.bits() as u32),
            None => (0, 0),
        };
        PACKED_FORMAT.set(0, self.format as u64) as u32
            | PACKED_ADAPTIVE.set(0, adaptive) as u32
            | PACKED_GROUPS.set(0, groups as u64) as u32
    }

    /// [`RecordLayout::pack`]'s inverse (`None` for 0, no layout).
    #[inline]
    pub(crate) const fn unpack(packed: u32) -> Option<RecordLayout> {
        let packed = packed as u64;
        let format = PACKED_FORMAT.get(packed) as u8;
        let adaptive = if PACKED_ADAPTIVE.get(packed) != 0 {
            Some(PebsDataCfg::from_bits(PACKED_GROUPS.get(packed)))
        } else {
            None
        };
        RecordLayout::new(format, adaptive)
    }
}

const PACKED_FORMAT: Field = Field::new(0, 4);
const PACKED_ADAPTIVE: Field = Field::new(4, 1);
const PACKED_GROUPS: Field = Field::new(8, 24);

/// One slot of an architectural PMU's PEBS buffer: room for the largest
/// record the driver configures (208 bytes: an adaptive record with the
/// basic, memory and GPR groups). Records of a smaller layout are packed
/// tighter: a buffer of `K` slots holds `K × 208 / record bytes` of them.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PebsSlot([u64; MAX_RECORD_WORDS]);

impl Sealed for PebsSlot {}

impl RecordSlot for PebsSlot {
    const ZERO: PebsSlot = PebsSlot([0; MAX_RECORD_WORDS]);
}

const _: () = assert!(words::BASIC + words::MEMORY + words::GPRS == MAX_RECORD_WORDS);

/// Caller-provided memory for one logical processor's PEBS on the
/// architectural PMU: the DS management area and `K` slots of 208 bytes.
/// Declare it as a `static mut` or leak it, make it a
/// [`DsArea`](crate::arch::ia32::ds::DsArea) (whose `unsafe` constructor
/// states that it is mapped at one linear address in every address space)
/// and hand it to
/// [`ArchPerfDriver::set_pebs_area`](super::driver::ArchPerfDriver::set_pebs_area).
pub type PebsArea<const K: usize> = DsMemory<PebsSlot, K>;

#[cfg(test)]
mod tests;

//! The NetBurst MSR map and counter topology (documented on [`Counter`]).

use crate::register::register;

/// `IA32_MISC_ENABLE`: bit 7 "performance monitoring available", bit 12
/// "PEBS unavailable" (SDM Vol. 3C Table 35-41).
pub const IA32_MISC_ENABLE: u32 = 0x1A0;
/// `IA32_DS_AREA`: linear address of the DS save area (BTS and PEBS buffers),
/// one per logical processor (SDM Vol. 3C Table 35-41).
pub const IA32_DS_AREA: u32 = 0x600;
/// `MSR_TC_PRECISE_EVENT`: trace-cache event selection for front-end tagging
/// (SDM 18.15.6.2, Table 19-31). Shared by both logical processors; no
/// currently documented metric needs it.
pub const MSR_TC_PRECISE_EVENT: u32 = 0x3F0;
/// `MSR_PEBS_ENABLE` (`IA32_PEBS_ENABLE`): replay-tagging metric select,
/// `UOP_Tag` (bit 24) and PEBS enables (SDM Table 35-41, Table 19-33).
pub const MSR_PEBS_ENABLE: u32 = 0x3F1;
/// `MSR_PEBS_MATRIX_VERT`: the µop type (load/store/branch) whose replays are
/// tagged (SDM 18.15.6.4, Table 19-33).
pub const MSR_PEBS_MATRIX_VERT: u32 = 0x3F2;

register! {
    /// RDPMC's ECX on NetBurst (SDM Vol. 2B RDPMC, Pentium 4 and Intel Xeon
    /// processors): bits 4:0 the counter (0-17), bit 31 a fast read of the
    /// low 32 bits; any other bit set is #GP.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct RdpmcIndex(u32) {
        /// The counter, bits 4:0.
        COUNTER: 0..=4 => counter_index, with_counter_index: u8;
        /// Fast read, bit 31.
        FAST: 31 => fast, with_fast: bool;
    }
}

impl RdpmcIndex {
    /// The ECX RDPMC takes: `None` if it sets a bit no field declares, or
    /// names no counter (18 or above).
    pub const fn from_ecx(ecx: u32) -> Option<RdpmcIndex> {
        let v = RdpmcIndex(ecx);
        if ecx as u64 & !Self::DEFINED != 0 {
            None
        } else {
            match Counter::from_index(v.counter_index()) {
                Some(_) => Some(v),
                None => None,
            }
        }
    }

    /// The counter it names.
    pub const fn counter(self) -> Option<Counter> {
        Counter::from_index(self.counter_index())
    }
}

/// Width of every NetBurst counter in bits (SDM Figure 18-44).
pub const COUNTER_WIDTH: u32 = 40;
/// Mask of the implemented counter bits.
pub const COUNTER_MASK: u64 = (1 << COUNTER_WIDTH) - 1;

/// The four counter blocks (SDM 18.15.5.6, Table 18-26).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Block {
    /// Branch prediction unit block: counters 0-3.
    Bpu,
    /// Microcode sequencer block: counters 4-7.
    Ms,
    /// FLAME block: counters 8-11.
    Flame,
    /// Instruction queue block: counters 12-17 (three pairs).
    Iq,
}

impl Block {
    /// All four blocks.
    pub const ALL: [Block; 4] = [Block::Bpu, Block::Ms, Block::Flame, Block::Iq];

    /// The pairs of this block (two, or three for IQ).
    pub const fn pairs(self) -> &'static [Pair] {
        match self {
            Block::Bpu => &[Pair::BpuA, Pair::BpuB],
            Block::Ms => &[Pair::MsA, Pair::MsB],
            Block::Flame => &[Pair::FlameA, Pair::FlameB],
            Block::Iq => &[Pair::IqA, Pair::IqB, Pair::IqC],
        }
    }
}

/// The nine counter pairs. Both counters of a pair are fed by the same ESCRs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Pair {
    /// Counters 0 and 1.
    BpuA,
    /// Counters 2 and 3.
    BpuB,
    /// Counters 4 and 5.
    MsA,
    /// Counters 6 and 7.
    MsB,
    /// Counters 8 and 9.
    FlameA,
    /// Counters 10 and 11.
    FlameB,
    /// Counters 12 and 13.
    IqA,
    /// Counters 14 and 15.
    IqB,
    /// Counters 16 and 17 (the PEBS-capable pair; fed by the same ESCRs as
    /// IQ pairs A and B respectively).
    IqC,
}

impl Pair {
    /// All nine pairs, in counter order.
    pub const ALL: [Pair; 9] = [
        Pair::BpuA,
        Pair::BpuB,
        Pair::MsA,
        Pair::MsB,
        Pair::FlameA,
        Pair::FlameB,
        Pair::IqA,
        Pair::IqB,
        Pair::IqC,
    ];

    /// The two counters of the pair.
    pub const fn counters(self) -> [Counter; 2] {
        let first = (self as u8) * 2;
        // Pair discriminants are 0..=8, so both indices are in 0..=17.
        [
            Counter::ALL[first as usize],
            Counter::ALL[first as usize + 1],
        ]
    }

    /// The block the pair belongs to.
    pub const fn block(self) -> Block {
        match self {
            Pair::BpuA | Pair::BpuB => Block::Bpu,
            Pair::MsA | Pair::MsB => Block::Ms,
            Pair::FlameA | Pair::FlameB => Block::Flame,
            Pair::IqA | Pair::IqB | Pair::IqC => Block::Iq,
        }
    }
}

/// One of the 18 performance counters (counter number n = MSR `0x300 + n`,
/// also the RDPMC index and the index used by the SDM tables).
///
/// # The MSR map and counter topology
///
/// The NetBurst MSR map and counter topology: 18 counters, 18 CCCRs, 45
/// ESCRs, 4 blocks, 9 pairs, the cascade partners and the PEBS/tagging MSRs.
///
/// Everything here is a table lookup on typed identifiers: a [`Counter`], its
/// [`Cccr`] and an [`Escr`] are different types, and an ESCR/counter pairing
/// can only be named through [`Assignment::new`], which refuses pairings the
/// hardware does not wire (SDM Vol. 3B Table 18-63, "Performance Counter MSRs
/// and Associated CCCR and ESCR MSRs").
///
/// # Examples
///
/// ```
/// use pmu::arch::netburst::{Assignment, Counter, Escr};
///
/// // CRU_ESCR0 feeds counters 12, 13 and 16 (IQ_COUNTER0, 1, 4).
/// let a = Assignment::new(Escr::CruEscr0, Counter::IqCounter0).unwrap();
/// assert_eq!((a.escr().msr(), a.counter().msr(), a.cccr().msr()), (0x3B8, 0x30C, 0x36C));
/// assert_eq!(Escr::CruEscr0.name(), "MSR_CRU_ESCR0");
/// assert!(Assignment::new(Escr::CruEscr0, Counter::BpuCounter0).is_none(), "not wired");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
#[allow(missing_docs)] // the names are the SDM's MSR names minus the prefix
pub enum Counter {
    BpuCounter0 = 0,
    BpuCounter1,
    BpuCounter2,
    BpuCounter3,
    MsCounter0,
    MsCounter1,
    MsCounter2,
    MsCounter3,
    FlameCounter0,
    FlameCounter1,
    FlameCounter2,
    FlameCounter3,
    IqCounter0,
    IqCounter1,
    IqCounter2,
    IqCounter3,
    IqCounter4,
    IqCounter5,
}

impl Counter {
    /// All 18 counters in counter-number order.
    pub const ALL: [Counter; 18] = [
        Counter::BpuCounter0,
        Counter::BpuCounter1,
        Counter::BpuCounter2,
        Counter::BpuCounter3,
        Counter::MsCounter0,
        Counter::MsCounter1,
        Counter::MsCounter2,
        Counter::MsCounter3,
        Counter::FlameCounter0,
        Counter::FlameCounter1,
        Counter::FlameCounter2,
        Counter::FlameCounter3,
        Counter::IqCounter0,
        Counter::IqCounter1,
        Counter::IqCounter2,
        Counter::IqCounter3,
        Counter::IqCounter4,
        Counter::IqCounter5,
    ];

    /// The SDM name of the counter's MSR (Table 18-63), e.g.
    /// `"MSR_IQ_COUNTER4"`.
    pub const fn name(self) -> &'static str {
        const NAMES: [&str; 18] = [
            "MSR_BPU_COUNTER0",
            "MSR_BPU_COUNTER1",
            "MSR_BPU_COUNTER2",
            "MSR_BPU_COUNTER3",
            "MSR_MS_COUNTER0",
            "MSR_MS_COUNTER1",
            "MSR_MS_COUNTER2",
            "MSR_MS_COUNTER3",
            "MSR_FLAME_COUNTER0",
            "MSR_FLAME_COUNTER1",
            "MSR_FLAME_COUNTER2",
            "MSR_FLAME_COUNTER3",
            "MSR_IQ_COUNTER0",
            "MSR_IQ_COUNTER1",
            "MSR_IQ_COUNTER2",
            "MSR_IQ_COUNTER3",
            "MSR_IQ_COUNTER4",
            "MSR_IQ_COUNTER5",
        ];
        NAMES[self as usize]
    }

    /// The counter with number `n` (0-17).
    pub const fn from_index(n: u8) -> Option<Counter> {
        if (n as usize) < Self::ALL.len() {
            Some(Self::ALL[n as usize])
        } else {
            None
        }
    }

    /// The counter number (0-17).
    pub const fn index(self) -> u8 {
        self as u8
    }

    /// The MSR address of counter 0; counter n is at `MSR_BASE + n`
    /// (the `MSR_*_COUNTER*` block `300H`-`311H`, SDM Vol. 3B Table 18-63).
    pub const MSR_BASE: u32 = 0x300;

    /// The counter's MSR address (`0x300 + n`).
    pub const fn msr(self) -> u32 {
        Self::MSR_BASE + self as u32
    }

    /// The RDPMC index (ECX) for a full 40-bit read of this counter.
    pub const fn rdpmc_index(self) -> u32 {
        self as u32
    }

    /// The counter's CCCR.
    pub const fn cccr(self) -> Cccr {
        Cccr(self)
    }

    /// The pair the counter belongs to.
    pub const fn pair(self) -> Pair {
        Pair::ALL[(self as usize) / 2]
    }

    /// The block the counter belongs to.
    pub const fn block(self) -> Block {
        self.pair().block()
    }

    /// Which ESCR side feeds this counter: 0 for the `*_ESCR0`-side pairs
    /// (A pairs and counter 16), 1 for the `*_ESCR1`-side (B pairs and 17).
    /// Also the logical processor Linux dedicates the counter to.
    pub const fn side(self) -> u8 {
        match self {
            Counter::IqCounter4 => 0,
            Counter::IqCounter5 => 1,
            _ => (self as u8 / 2) % 2,
        }
    }

    /// The counter whose overflow can start this one through the CCCR
    /// cascade flag (bit 30).
    ///
    /// SDM 18.15.5.6: counters cascade with the same-position counter of
    /// the other pair in the block, in either order (0<->2, 1<->3, 4<->6,
    /// ..., 12<->14, 13<->15). Counter 16 can only be cascaded from 14 and
    /// counter 17 only from 15; 14 and 15 cannot be cascaded from 16/17.
    /// Every counter therefore has exactly one cascade source.
    pub const fn cascade_source(self) -> Counter {
        let n = self as u8;
        let src = match n {
            16 => 14,
            17 => 15,
            _ => n ^ 2,
        };
        Counter::ALL[src as usize]
    }

    /// Whether this counter can be cascaded from `from` (CCCR bit 30).
    pub const fn can_cascade_from(self, from: Counter) -> bool {
        self.cascade_source() as u8 == from as u8
    }

    /// The counter whose overflow starts this one through the *extended*
    /// cascade bit 11 (`CASCNTxINTOy`) on family 0Fh models 2, 3, 4 and 6
    /// (SDM 18.15.5.7, Table 18-65): IQ_CCCR0 `CASCNT4INTO0` (16 into 12),
    /// IQ_CCCR3 `CASCNT5INTO3` (17 into 15), IQ_CCCR4 `CASCNT5INTO4` (17 into
    /// 16), IQ_CCCR5 `CASCNT4INTO5` (16 into 17). `None` where bit 11 is
    /// reserved.
    pub const fn extended_cascade_source(self, model: u8) -> Option<Counter> {
        if !matches!(model, 2 | 3 | 4 | 6) {
            return None;
        }
        match self {
            Counter::IqCounter0 => Some(Counter::IqCounter4),
            Counter::IqCounter3 => Some(Counter::IqCounter5),
            Counter::IqCounter4 => Some(Counter::IqCounter5),
            Counter::IqCounter5 => Some(Counter::IqCounter4),
            _ => None,
        }
    }

    /// Whether the counter can be used for PEBS (SDM 18.15.7: `IQ_COUNTER4`
    /// for logical processor 0; SDM 18.16.3: `IQ_COUNTER5` for logical
    /// processor 1 on Hyper-Threading parts).
    pub const fn pebs_capable(self) -> bool {
        matches!(self, Counter::IqCounter4 | Counter::IqCounter5)
    }

    /// The PEBS counter of logical processor `lp`: `IQ_COUNTER4` (16) for
    /// T0, `IQ_COUNTER5` (17) for T1 (SDM 18.16.3).
    pub const fn pebs_for(lp: super::thread::LogicalProcessor) -> Counter {
        match lp {
            super::thread::LogicalProcessor::T0 => Counter::IqCounter4,
            super::thread::LogicalProcessor::T1 => Counter::IqCounter5,
        }
    }

    /// The ESCR that CCCR ESCR-select value `select` routes to this counter,
    /// on family 0Fh model `model` (SDM Table 18-63). `None` if nothing is
    /// wired there (e.g. select 3 on counters 14, 15, 17).
    pub const fn escr_for_select(self, select: EscrSelect, model: u8) -> Option<Escr> {
        let mut i = 0;
        while i < Escr::ALL.len() {
            let e = Escr::ALL[i];
            if e.select().get() == select.get() && e.feeds(self) && e.available_on(model) {
                return Some(e);
            }
            i += 1;
        }
        None
    }
}

/// The Counter Configuration Control Register of one counter (MSR
/// `0x360 + n`). A distinct type so it cannot be passed where a counter or an
/// ESCR is expected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Cccr(Counter);

impl Cccr {
    /// The counter this CCCR controls.
    pub const fn counter(self) -> Counter {
        self.0
    }

    /// The MSR address of counter 0's CCCR; counter n's is at
    /// `MSR_BASE + n` (the `MSR_*_CCCR*` block `360H`-`371H`, Table 18-63).
    pub const MSR_BASE: u32 = 0x360;

    /// The CCCR's MSR address (`0x360 + n`).
    pub const fn msr(self) -> u32 {
        Self::MSR_BASE + self.0 as u32
    }
}

/// A set of counters (bit n = counter n).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CounterSet(u32);

crate::register::set_operations!(CounterSet, "counter");

impl CounterSet {
    /// The empty set.
    pub const EMPTY: CounterSet = CounterSet(0);

    /// The set as a bit mask (bit n = counter n).
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// The set of bit mask `bits`; bits above 17 name no counter and are
    /// dropped.
    pub const fn from_bits_truncate(bits: u32) -> CounterSet {
        CounterSet(bits & ((1 << Counter::ALL.len()) - 1))
    }

    /// The set of `bits`, known to name counters only (bits 17:0): the PMI
    /// handler's result, made of bits it took from sets of counters,
    /// without [`CounterSet::from_bits_truncate`]'s mask.
    pub(crate) const fn from_counter_bits(bits: u32) -> CounterSet {
        debug_assert!(bits >> Counter::ALL.len() == 0);
        CounterSet(bits)
    }

    /// This set without `c`.
    pub const fn without(self, c: Counter) -> CounterSet {
        CounterSet(self.0 & !(1 << c as u32))
    }

    /// This set plus `c`.
    pub const fn with(self, c: Counter) -> CounterSet {
        CounterSet(self.0 | 1 << c as u32)
    }

    /// Whether `c` is in the set.
    pub const fn contains(self, c: Counter) -> bool {
        self.0 & (1 << c as u32) != 0
    }

    /// Number of counters in the set.
    pub const fn len(self) -> u32 {
        self.0.count_ones()
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The counters in ascending order (one step per member, so an
    /// interrupt handler walks only the counters in the set).
    pub fn iter(self) -> impl Iterator<Item = Counter> {
        let mut rest = self.0;
        core::iter::from_fn(move || {
            let n = rest.trailing_zeros();
            rest &= rest.wrapping_sub(1);
            Counter::from_index(u8::try_from(n).ok()?)
        })
    }
}

/// One of the 45 Event Selection Control Registers (SDM Table 18-63).
///
/// The variants are in MSR-address order. `SSU_ESCR1` (0x3BF, a guess in
/// Linux's headers) does not exist in the SDM and is not modelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
#[allow(missing_docs)] // the names are the SDM's MSR names minus the prefix
pub enum Escr {
    BsuEscr0,
    BsuEscr1,
    FsbEscr0,
    FsbEscr1,
    FirmEscr0,
    FirmEscr1,
    FlameEscr0,
    FlameEscr1,
    DacEscr0,
    DacEscr1,
    MobEscr0,
    MobEscr1,
    PmhEscr0,
    PmhEscr1,
    SaatEscr0,
    SaatEscr1,
    U2lEscr0,
    U2lEscr1,
    BpuEscr0,
    BpuEscr1,
    IsEscr0,
    IsEscr1,
    ItlbEscr0,
    ItlbEscr1,
    CruEscr0,
    CruEscr1,
    IqEscr0,
    IqEscr1,
    RatEscr0,
    RatEscr1,
    SsuEscr0,
    MsEscr0,
    MsEscr1,
    TbpuEscr0,
    TbpuEscr1,
    TcEscr0,
    TcEscr1,
    IxEscr0,
    IxEscr1,
    AlfEscr0,
    AlfEscr1,
    CruEscr2,
    CruEscr3,
    CruEscr4,
    CruEscr5,
}

/// Static facts about one ESCR: one row of SDM Table 18-63.
struct EscrRow {
    name: &'static str,
    wiring: EscrWiring,
}

/// An [`EscrRow`] without its name: what the driver looks up at run time,
/// in a table of its own ([`ESCR_WIRING`]) that holds no pointer, so it is
/// read-only data under any linker script and a kernel that never prints
/// an ESCR's name does not carry the names.
#[derive(Clone, Copy)]
struct EscrWiring {
    msr: u32,
    select: u8,
    block: Block,
    side: u8,
}

const fn row(name: &'static str, msr: u32, select: u8, block: Block, side: u8) -> EscrRow {
    EscrRow {
        name,
        wiring: EscrWiring {
            msr,
            select,
            block,
            side,
        },
    }
}

/// SDM Table 18-63, one row per ESCR, in [`Escr`] order: MSR address, CCCR
/// ESCR-select value, and the block/side that determines the counters fed.
const ESCR_TABLE: [EscrRow; 45] = {
    use Block::*;
    [
        row("MSR_BSU_ESCR0", 0x3A0, 7, Bpu, 0),
        row("MSR_BSU_ESCR1", 0x3A1, 7, Bpu, 1),
        row("MSR_FSB_ESCR0", 0x3A2, 6, Bpu, 0),
        row("MSR_FSB_ESCR1", 0x3A3, 6, Bpu, 1),
        row("MSR_FIRM_ESCR0", 0x3A4, 1, Flame, 0),
        row("MSR_FIRM_ESCR1", 0x3A5, 1, Flame, 1),
        row("MSR_FLAME_ESCR0", 0x3A6, 0, Flame, 0),
        row("MSR_FLAME_ESCR1", 0x3A7, 0, Flame, 1),
        row("MSR_DAC_ESCR0", 0x3A8, 5, Flame, 0),
        row("MSR_DAC_ESCR1", 0x3A9, 5, Flame, 1),
        row("MSR_MOB_ESCR0", 0x3AA, 2, Bpu, 0),
        row("MSR_MOB_ESCR1", 0x3AB, 2, Bpu, 1),
        row("MSR_PMH_ESCR0", 0x3AC, 4, Bpu, 0),
        row("MSR_PMH_ESCR1", 0x3AD, 4, Bpu, 1),
        row("MSR_SAAT_ESCR0", 0x3AE, 2, Flame, 0),
        row("MSR_SAAT_ESCR1", 0x3AF, 2, Flame, 1),
        row("MSR_U2L_ESCR0", 0x3B0, 3, Flame, 0),
        row("MSR_U2L_ESCR1", 0x3B1, 3, Flame, 1),
        row("MSR_BPU_ESCR0", 0x3B2, 0, Bpu, 0),
        row("MSR_BPU_ESCR1", 0x3B3, 0, Bpu, 1),
        row("MSR_IS_ESCR0", 0x3B4, 1, Bpu, 0),
        row("MSR_IS_ESCR1", 0x3B5, 1, Bpu, 1),
        row("MSR_ITLB_ESCR0", 0x3B6, 3, Bpu, 0),
        row("MSR_ITLB_ESCR1", 0x3B7, 3, Bpu, 1),
        row("MSR_CRU_ESCR0", 0x3B8, 4, Iq, 0),
        row("MSR_CRU_ESCR1", 0x3B9, 4, Iq, 1),
        row("MSR_IQ_ESCR0", 0x3BA, 0, Iq, 0),
        row("MSR_IQ_ESCR1", 0x3BB, 0, Iq, 1),
        row("MSR_RAT_ESCR0", 0x3BC, 2, Iq, 0),
        row("MSR_RAT_ESCR1", 0x3BD, 2, Iq, 1),
        row("MSR_SSU_ESCR0", 0x3BE, 3, Iq, 0),
        row("MSR_MS_ESCR0", 0x3C0, 0, Ms, 0),
        row("MSR_MS_ESCR1", 0x3C1, 0, Ms, 1),
        row("MSR_TBPU_ESCR0", 0x3C2, 2, Ms, 0),
        row("MSR_TBPU_ESCR1", 0x3C3, 2, Ms, 1),
        row("MSR_TC_ESCR0", 0x3C4, 1, Ms, 0),
        row("MSR_TC_ESCR1", 0x3C5, 1, Ms, 1),
        row("MSR_IX_ESCR0", 0x3C8, 5, Bpu, 0),
        row("MSR_IX_ESCR1", 0x3C9, 5, Bpu, 1),
        row("MSR_ALF_ESCR0", 0x3CA, 1, Iq, 0),
        row("MSR_ALF_ESCR1", 0x3CB, 1, Iq, 1),
        row("MSR_CRU_ESCR2", 0x3CC, 5, Iq, 0),
        row("MSR_CRU_ESCR3", 0x3CD, 5, Iq, 1),
        row("MSR_CRU_ESCR4", 0x3E0, 6, Iq, 0),
        row("MSR_CRU_ESCR5", 0x3E1, 6, Iq, 1),
    ]
};

/// [`ESCR_TABLE`] without the names, computed at compile time.
static ESCR_WIRING: [EscrWiring; 45] = {
    let mut out = [ESCR_TABLE[0].wiring; 45];
    let mut i = 0;
    while i < out.len() {
        out[i] = ESCR_TABLE[i].wiring;
        i += 1;
    }
    out
};

impl Escr {
    /// All 45 ESCRs in MSR-address order.
    pub const ALL: [Escr; 45] = {
        let mut all = [Escr::BsuEscr0; 45];
        let mut i = 0;
        while i < 45 {
            all[i] = Escr::from_index_unchecked(i as u8);
            i += 1;
        }
        all
    };

    const fn from_index_unchecked(i: u8) -> Escr {
        use Escr::*;
        const ORDER: [Escr; 45] = [
            BsuEscr0, BsuEscr1, FsbEscr0, FsbEscr1, FirmEscr0, FirmEscr1, FlameEscr0, FlameEscr1,
            DacEscr0, DacEscr1, MobEscr0, MobEscr1, PmhEscr0, PmhEscr1, SaatEscr0, SaatEscr1,
            U2lEscr0, U2lEscr1, BpuEscr0, BpuEscr1, IsEscr0, IsEscr1, ItlbEscr0, ItlbEscr1,
            CruEscr0, CruEscr1, IqEscr0, IqEscr1, RatEscr0, RatEscr1, SsuEscr0, MsEscr0, MsEscr1,
            TbpuEscr0, TbpuEscr1, TcEscr0, TcEscr1, IxEscr0, IxEscr1, AlfEscr0, AlfEscr1, CruEscr2,
            CruEscr3, CruEscr4, CruEscr5,
        ];
        ORDER[i as usize]
    }

    const fn row(self) -> &'static EscrWiring {
        &ESCR_WIRING[self as usize]
    }

    /// The ESCR at MSR address `msr`, if there is one.
    pub const fn from_msr(msr: u32) -> Option<Escr> {
        let mut i = 0;
        while i < Self::ALL.len() {
            if ESCR_WIRING[i].msr == msr {
                return Some(Self::ALL[i]);
            }
            i += 1;
        }
        None
    }

    /// The SDM name, e.g. `"MSR_CRU_ESCR2"`.
    pub const fn name(self) -> &'static str {
        ESCR_TABLE[self as usize].name
    }

    /// The MSR address.
    pub const fn msr(self) -> u32 {
        self.row().msr
    }

    /// The value a CCCR's ESCR-select field (bits 15:13) must hold to route
    /// this ESCR to the counter.
    pub const fn select(self) -> EscrSelect {
        EscrSelect::from_bits_truncate(self.row().select)
    }

    /// The block whose counters this ESCR feeds.
    pub const fn block(self) -> Block {
        self.row().block
    }

    /// 0 for `*_ESCR0`/`2`/`4`, 1 for `*_ESCR1`/`3`/`5`: which pair(s) of the
    /// block it feeds.
    pub const fn side(self) -> u8 {
        self.row().side
    }

    /// The counters this ESCR can feed (SDM Table 18-63): pair A (side 0) or
    /// pair B (side 1) of its block, plus counter 16 (side 0) or 17 (side 1)
    /// for the IQ block.
    pub const fn counters(self) -> CounterSet {
        let row = self.row();
        let base = match row.block {
            Block::Bpu => 0,
            Block::Ms => 4,
            Block::Flame => 8,
            Block::Iq => 12,
        } + 2 * row.side;
        let set = CounterSet::EMPTY
            .with(Counter::ALL[base as usize])
            .with(Counter::ALL[base as usize + 1]);
        match row.block {
            Block::Iq => set.with(Counter::ALL[16 + row.side as usize]),
            _ => set,
        }
    }

    /// Whether this ESCR can feed `counter`.
    pub const fn feeds(self, counter: Counter) -> bool {
        self.counters().contains(counter)
    }

    /// Whether the ESCR exists on family 0Fh model `model`: `MSR_IQ_ESCR0/1`
    /// only on models 01h-02h (SDM Table 18-63 note 1; perfctr and oprofile
    /// also enable them on model 0 -- this crate follows the SDM).
    pub const fn available_on(self, model: u8) -> bool {
        match self {
            Escr::IqEscr0 | Escr::IqEscr1 => matches!(model, 1 | 2),
            _ => true,
        }
    }
}

/// A legal ESCR -> counter routing: the ESCR can feed the counter. The only
/// way to name an ESCR/counter pairing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Assignment {
    escr: Escr,
    counter: Counter,
}

impl Assignment {
    /// The pairing, if `escr` is wired to `counter` (SDM Table 18-63).
    pub const fn new(escr: Escr, counter: Counter) -> Option<Assignment> {
        if escr.feeds(counter) {
            Some(Assignment { escr, counter })
        } else {
            None
        }
    }

    /// The ESCR.
    pub const fn escr(self) -> Escr {
        self.escr
    }

    /// The counter.
    pub const fn counter(self) -> Counter {
        self.counter
    }

    /// The counter's CCCR.
    pub const fn cccr(self) -> Cccr {
        self.counter.cccr()
    }

    /// The CCCR ESCR-select value for this routing.
    pub const fn select(self) -> EscrSelect {
        self.escr.select()
    }
}

/// A 3-bit ESCR-select value: how a CCCR (bits 15:13) names one of the
/// ESCRs wired to its counter (SDM Table 18-63).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EscrSelect(u8);

impl EscrSelect {
    /// `Some` if `v` fits in 3 bits.
    pub const fn new(v: u8) -> Option<EscrSelect> {
        if v < 8 { Some(EscrSelect(v)) } else { None }
    }

    /// The low 3 bits of `v`.
    pub const fn from_bits_truncate(v: u8) -> EscrSelect {
        EscrSelect(v & 7)
    }

    /// The value (0-7).
    pub const fn get(self) -> u8 {
        self.0
    }

    /// From the CCCR's field (`register!`).
    pub(crate) const fn from_field(v: u64) -> EscrSelect {
        EscrSelect::from_bits_truncate(v as u8)
    }

    /// As the CCCR's field (`register!`).
    pub(crate) const fn into_field(self) -> u64 {
        self.0 as u64
    }
}

/// A set of ESCRs (bit i = `Escr::ALL[i]`, MSR-address order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EscrSet(u64);

impl EscrSet {
    /// The empty set.
    pub const EMPTY: EscrSet = EscrSet(0);
    /// All 45 ESCRs.
    pub const ALL: EscrSet = EscrSet((1 << Escr::ALL.len()) - 1);

    /// The set as a bit mask (bit i = `Escr::ALL[i]`).
    pub const fn bits(self) -> u64 {
        self.0
    }

    /// The set of the bits of `bits` that name an ESCR.
    pub const fn from_bits_truncate(bits: u64) -> EscrSet {
        EscrSet(bits & Self::ALL.0)
    }

    /// The ESCRs of `escrs`.
    pub const fn from_slice(escrs: &[Escr]) -> EscrSet {
        let mut s = EscrSet::EMPTY;
        let mut i = 0;
        while i < escrs.len() {
            s = s.with(escrs[i]);
            i += 1;
        }
        s
    }

    /// This set plus `e`.
    pub const fn with(self, e: Escr) -> EscrSet {
        EscrSet(self.0 | 1 << e as u32)
    }

    /// Whether `e` is in the set.
    pub const fn contains(self, e: Escr) -> bool {
        self.0 & (1 << e as u32) != 0
    }

    /// The ESCRs in both sets.
    pub const fn intersection(self, other: EscrSet) -> EscrSet {
        EscrSet(self.0 & other.0)
    }

    /// The ESCRs in either set.
    pub const fn union(self, other: EscrSet) -> EscrSet {
        EscrSet(self.0 | other.0)
    }

    /// The ESCRs of this set that are not in `other`.
    pub const fn difference(self, other: EscrSet) -> EscrSet {
        EscrSet(self.0 & !other.0)
    }

    /// Number of ESCRs in the set.
    pub const fn len(self) -> u32 {
        self.0.count_ones()
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The ESCRs in MSR-address order.
    pub fn iter(self) -> impl Iterator<Item = Escr> + Clone {
        let mut bits = self.0;
        core::iter::from_fn(move || {
            let i = bits.trailing_zeros() as usize;
            bits &= bits.wrapping_sub(1);
            Escr::ALL.get(i).copied()
        })
    }
}

#[cfg(test)]
mod tests;

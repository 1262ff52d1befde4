//! µop tagging for at-retirement counting (SDM 18.15.6.2-18.15.6.4) and
//! PEBS (SDM 18.15.7, 18.16.3).
//!
//! A test describes a batch of µops ([`Uops`]): the non-retirement events
//! they cause upstream, what replays they suffer, their type, and whether
//! they retire as NBOGUS or BOGUS. The model tags them from its registers:
//!
//! * execution tagging: every ESCR with tag enable (bit 4) whose event one of
//!   the µops' upstream events matches (and whose T0/T1 OS/USR bits admit it)
//!   ORs its 4-bit tag value into the µops' tag; execution_event then counts
//!   a µop whose tag shares a bit with NBOGUS0-3 (or BOGUS0-3);
//! * front-end tagging: a RAT ESCR with uop_type and TAGLOADS (TAGSTORES)
//!   tags loads (stores); front_end_event counts them;
//! * replay tagging: with MSR_PEBS_ENABLE.UOP_Tag (bit 24), a µop whose
//!   replay cause is a metric bit set in MSR_PEBS_ENABLE and whose type is
//!   selected in MSR_PEBS_MATRIX_VERT is tagged (Table 19-33; MOB and split
//!   metrics also need their additional upstream ESCR); replay_event counts
//!   it.
//!
//! An ESCR takes part in tagging only while one of the counters of its block
//! runs (SDM 18.15.5.9: otherwise its logic may be powered down).
//!
//! PEBS: the DS save area lives in the test's (or the harness's) memory,
//! which the model must not dereference. So the model keeps, per logical
//! processor, a copy of the PEBS fields of the DS management area
//! ([`DsManagement`], which the harness can parse from the bytes the driver
//! wrote with [`DsManagement::from_bytes`]) and an owned buffer of
//! [`PEBS_RECORD_SLOTS`] records; record `k` is the one the hardware would
//! write at `pebs_buffer_base + k * 144`. [`PebsRecord::to_bytes`] gives the
//! SDM byte layout for copying into real memory.

use super::counting::{Event, EventKind, Privilege};
use super::ds::{DsManagement, PEBS_RECORD_SIZE, PEBS_RECORD_SLOTS, PebsRecord, PebsState};
use super::registers::{LogicalProcessor, NetBurstModel};
use super::tables::{
    self, COUNTER_MASK, ESCR_TABLE, EscrGroup, escr, matrix_vert, pebs_enable, retirement,
};
use bit_field::BitField;

/// Replay causes, as the MSR_PEBS_ENABLE metric bits of SDM Table 19-33 that
/// select them.
pub mod replay {
    /// 1stL_cache_load_miss_retired.
    pub const L1_LOAD_MISS: u64 = 1 << 0;
    /// 2ndL_cache_load_miss_retired.
    pub const L2_LOAD_MISS: u64 = 1 << 1;
    /// DTLB_load/store/all_miss_retired.
    pub const DTLB_MISS: u64 = 1 << 2;
    /// MOB_load_replay_retired (needs MOB_load_replay with PARTIAL_DATA and
    /// UNALGN_ADDR in a MOB ESCR).
    pub const MOB_LOAD: u64 = 1 << 9;
    /// split_load_retired / split_store_retired (needs load_port_replay
    /// SPLIT_LD / store_port_replay SPLIT_ST in a SAAT ESCR).
    pub const SPLIT: u64 = 1 << 10;
    /// Tagged_mispred_branch.
    pub const MISPRED_BRANCH: u64 = (1 << 15) | (1 << 16);
}

/// The type of a µop, for MSR_PEBS_MATRIX_VERT and uop_type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum UopKind {
    /// A load (MATRIX_VERT bit 0, TAGLOADS).
    Load,
    /// A store (MATRIX_VERT bit 1, TAGSTORES).
    Store,
    /// A branch (MATRIX_VERT bit 4).
    Branch,
    /// Anything else.
    Other,
}

/// At most this many upstream events per [`Uops`] batch take part; further
/// ones are ignored.
pub const MAX_UPSTREAM: usize = 4;

/// A batch of identical µops executed and retired by one logical processor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Uops<'a> {
    /// The logical processor.
    pub thread: LogicalProcessor,
    /// Its privilege level.
    pub privilege: Privilege,
    /// How many µops (one executes and retires per clock).
    pub count: u64,
    /// Load, store, branch or other.
    pub kind: UopKind,
    /// The non-retirement events each µop causes (e.g. packed_SP_uop); the
    /// first [`MAX_UPSTREAM`] are used.
    pub upstream: &'a [EventKind],
    /// The replays each µop suffers, as [`replay`] bits.
    pub replays: u64,
    /// Retires BOGUS (on a mispredicted path) rather than NBOGUS.
    pub bogus: bool,
}

impl<'a> Uops<'a> {
    /// `count` NBOGUS µops of `kind` on `thread` at `privilege`, with no
    /// upstream events and no replays.
    pub const fn new(
        thread: LogicalProcessor,
        privilege: Privilege,
        kind: UopKind,
        count: u64,
    ) -> Self {
        Self {
            thread,
            privilege,
            count,
            kind,
            upstream: &[],
            replays: 0,
            bogus: false,
        }
    }
}

/// The events one clock of a [`Uops`] batch presents to the ESCRs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EventList {
    events: [Option<Event>; MAX_UPSTREAM + 4],
}

impl EventList {
    /// The events, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Event> {
        self.events.iter().flatten()
    }

    /// Copies the events into `out` and returns the filled part.
    pub fn fill<'o>(&self, out: &'o mut [Event; MAX_UPSTREAM + 4]) -> &'o [Event] {
        let mut n = 0;
        for e in self.iter() {
            out[n] = *e;
            n += 1;
        }
        &out[..n]
    }

    fn push(&mut self, e: Event) {
        if let Some(slot) = self.events.iter_mut().find(|s| s.is_none()) {
            *slot = Some(e);
        }
    }
}

impl NetBurstModel {
    /// Whether an ESCR's logic is powered: some counter of its block runs.
    fn escr_powered(&self, i: usize) -> bool {
        let block = ESCR_TABLE[i].block;
        (0..tables::COUNTERS).any(|c| tables::block_of(c) == block && self.is_counting(c))
    }

    /// Whether some powered ESCR selects `kind` for `thread`/`privilege`,
    /// and with which tag value (if tag enable is set) when it does.
    fn escrs_selecting(
        &self,
        kind: &EventKind,
        thread: LogicalProcessor,
        privilege: Privilege,
    ) -> (bool, u8) {
        let mut any = false;
        let mut tag = 0u8;
        for i in 0..ESCR_TABLE.len() {
            let v = self.escrs[i];
            if self.config.has_escr(i)
                && self.escr_matches(i, v, kind)
                && self.privilege_admits(v, kind, thread, privilege)
                && self.escr_powered(i)
            {
                any = true;
                if v & escr::TAG_ENABLE != 0 {
                    tag |= v.get_bits(escr::TAG_VALUE) as u8;
                }
            }
        }
        (any, tag)
    }

    /// The events one clock of `uops` presents: its upstream events, then
    /// uops_retired and the at-retirement events its tags make it count
    /// (execution_event, front_end_event, replay_event), each with `count`
    /// = `uops.count`. Feed them to [`NetBurstModel::cycle`] (with count 1)
    /// or use [`NetBurstModel::retire`].
    pub fn retirement_events(&self, uops: &Uops<'_>) -> EventList {
        let (t, p, n) = (uops.thread, uops.privilege, uops.count);
        let mut list = EventList {
            events: [None; MAX_UPSTREAM + 4],
        };
        let mut exec_tag = 0u8;
        for kind in uops.upstream.iter().take(MAX_UPSTREAM) {
            list.push(kind.on(t, p, n));
            exec_tag |= self.escrs_selecting(kind, t, p).1;
        }
        let front_end = match uops.kind {
            UopKind::Load => Some(1 << 1),
            UopKind::Store => Some(1 << 2),
            _ => None,
        }
        .is_some_and(|mask| {
            let kind = EventKind::new(EscrGroup::Rat, retirement::UOP_TYPE, mask);
            self.escrs_selecting(&kind, t, p).0
        });
        let replay_tagged = self.replay_tagged(uops);
        let outcome: u16 = if uops.bogus { 2 } else { 1 };
        let retire = |select, mask| EventKind::new(EscrGroup::Cru23, select, mask).on(t, p, n);
        list.push(EventKind::new(EscrGroup::Cru01, retirement::UOPS_RETIRED, outcome).on(t, p, n));
        if exec_tag != 0 {
            let shift = if uops.bogus { 4 } else { 0 };
            list.push(retire(
                retirement::EXECUTION_EVENT,
                u16::from(exec_tag) << shift,
            ));
        }
        if front_end {
            list.push(retire(retirement::FRONT_END_EVENT, outcome));
        }
        if replay_tagged {
            list.push(retire(retirement::REPLAY_EVENT, outcome));
        }
        list
    }

    /// Replay tagging (SDM 18.15.6.4, Table 19-33).
    fn replay_tagged(&self, uops: &Uops<'_>) -> bool {
        if self.pebs_enable & pebs_enable::UOP_TAG == 0 {
            return false;
        }
        let vert = match uops.kind {
            UopKind::Load => matrix_vert::LOADS,
            UopKind::Store => matrix_vert::STORES,
            UopKind::Branch => matrix_vert::BRANCHES,
            UopKind::Other => 0,
        };
        if self.matrix_vert & vert == 0 {
            return false;
        }
        let metrics = uops.replays & self.pebs_enable & pebs_enable::METRICS;
        let (t, p) = (uops.thread, uops.privilege);
        let selected = |group, select, mask| {
            self.escrs_selecting(&EventKind::new(group, select, mask), t, p)
                .0
        };
        let plain = metrics & !(replay::MOB_LOAD | replay::SPLIT) != 0;
        let mob = metrics & replay::MOB_LOAD != 0
            && selected(EscrGroup::Mob, 0x03, 1 << 4)
            && selected(EscrGroup::Mob, 0x03, 1 << 5);
        let split = metrics & replay::SPLIT != 0
            && match uops.kind {
                UopKind::Load => selected(EscrGroup::Saat, 0x04, 1 << 1),
                UopKind::Store => selected(EscrGroup::Saat, 0x05, 1 << 1),
                _ => false,
            };
        plain || mob || split
    }

    /// Executes and retires `uops`: `uops.count` clocks, each presenting the
    /// [`NetBurstModel::retirement_events`] of one µop.
    pub fn retire(&mut self, uops: &Uops<'_>) {
        let list = self.retirement_events(uops);
        let mut buf = [EventKind::new(EscrGroup::Cru01, 0, 0).on(uops.thread, uops.privilege, 0);
            MAX_UPSTREAM + 4];
        let events = list.fill(&mut buf);
        self.run(events, true, uops.count);
    }

    /// The logical processor whose PEBS counter `c` is, if PEBS is enabled
    /// for it, IA32_DS_AREA is set, its PEBS buffer has room for a record,
    /// and `c` counts an at-retirement event:
    /// counter 16 (MSR_IQ_CCCR4) for T0 and counter 17 (MSR_IQ_CCCR5) for T1
    /// (SDM 18.16.3); without Hyper-Threading only counter 16 (18.15.7).
    pub(super) fn pebs_thread_of(&self, c: usize) -> Option<usize> {
        let t = match c {
            16 => 0,
            17 if self.config.hyper_threading => 1,
            _ => return None,
        };
        let ds = &self.pebs[t].ds;
        let room = ds
            .pebs_index
            .checked_add(PEBS_RECORD_SIZE)
            .is_some_and(|end| end <= ds.pebs_absolute_maximum);
        if !self.pebs_on[t] || self.ds_area[t] == 0 || !room {
            return None;
        }
        let i = self.selected_escr(c)?;
        let v = self.escrs[i];
        let select = v.get_bits(escr::EVENT_SELECT) as u8;
        let at_retirement = ESCR_TABLE[i].group == EscrGroup::Cru23
            && matches!(
                select,
                retirement::FRONT_END_EVENT
                    | retirement::EXECUTION_EVENT
                    | retirement::REPLAY_EVENT
            );
        at_retirement.then_some(t)
    }

    /// The PEBS assist of logical processor `t` on counter `c`: writes a
    /// record if the buffer has room, advances the PEBS index, reloads the
    /// counter with the PEBS counter reset value, and raises the PMI when the
    /// index reaches the interrupt threshold. Returns whether a record was
    /// written (a full buffer takes no record and leaves the counter alone).
    pub(super) fn pebs_assist(&mut self, c: usize, t: usize) -> bool {
        let state = &mut self.pebs[t];
        state.armed = false;
        let ds = &mut state.ds;
        let Some(end) = ds.pebs_index.checked_add(PEBS_RECORD_SIZE) else {
            return false;
        };
        if end > ds.pebs_absolute_maximum {
            return false;
        }
        let slot = ds
            .pebs_index
            .checked_sub(ds.pebs_buffer_base)
            .map(|off| off / PEBS_RECORD_SIZE)
            .and_then(|k| usize::try_from(k).ok())
            .filter(|&k| k < PEBS_RECORD_SLOTS);
        match slot {
            Some(k) => state.records[k] = state.registers,
            None => state.lost += 1,
        }
        ds.pebs_index = end;
        let threshold_reached = end >= ds.pebs_interrupt_threshold;
        self.counters[c] = self.pebs[t].ds.pebs_counter_reset & COUNTER_MASK;
        // The assist consumed the overflow the PMI would have reported.
        self.pmi_due[c] = None;
        if threshold_reached {
            self.raise_pmi(t, None);
        }
        true
    }

    /// Mirrors the PEBS fields of logical processor `lp`'s DS management area
    /// into the model (and forgets records written so far).
    pub fn set_ds_management(&mut self, lp: LogicalProcessor, ds: DsManagement) {
        let state = &mut self.pebs[lp.index()];
        state.ds = ds;
        state.records = PebsState::EMPTY.records;
        state.lost = 0;
    }

    /// The PEBS fields of `lp`'s DS management area as the model has updated
    /// them (the PEBS index advances with every record).
    pub fn ds_management(&self, lp: LogicalProcessor) -> DsManagement {
        self.pebs[lp.index()].ds
    }

    /// Sets the architectural state the next PEBS record of `lp` captures.
    pub fn set_pebs_registers(&mut self, lp: LogicalProcessor, registers: PebsRecord) {
        self.pebs[lp.index()].registers = registers;
    }

    /// The PEBS records written for `lp` since the DS area was set, in buffer
    /// order (at most [`PEBS_RECORD_SLOTS`]).
    pub fn pebs_records(&self, lp: LogicalProcessor) -> &[PebsRecord] {
        let state = &self.pebs[lp.index()];
        let written = state
            .ds
            .pebs_index
            .saturating_sub(state.ds.pebs_buffer_base)
            / PEBS_RECORD_SIZE;
        let n = usize::try_from(written)
            .unwrap_or(usize::MAX)
            .min(PEBS_RECORD_SLOTS);
        &state.records[..n]
    }

    /// Runs `f` on the model with the DS save area of `lp` in memory, doing
    /// the memory traffic the processor does for PEBS around it: before,
    /// the PEBS fields of the DS management area at `IA32_DS_AREA` are read
    /// from memory (as the driver or its PMI handler left them); after, the
    /// records the PEBS assists wrote during `f` and the advanced PEBS index
    /// are written back to memory. Without an `IA32_DS_AREA` it just runs
    /// `f`. At most [`PEBS_RECORD_SLOTS`] records per call reach memory.
    ///
    /// # Safety
    ///
    /// `IA32_DS_AREA` of `lp` must hold the address of a live, writable
    /// 64-bit DS management area (72 bytes), and the PEBS buffer it
    /// describes (base to absolute maximum) must be live and writable too;
    /// nothing may hold a Rust reference to either during the call (the
    /// driver keeps only their address).
    pub unsafe fn with_ds_memory<R>(
        &mut self,
        lp: LogicalProcessor,
        f: impl FnOnce(&mut Self) -> R,
    ) -> R {
        let address = self.ds_area[lp.index()];
        if address == 0 {
            return f(self);
        }
        let mut area = [0u8; 0x48];
        let src = core::ptr::with_exposed_provenance::<u8>(address as usize);
        // SAFETY: the caller promises 72 live bytes at `address`, which no
        // reference covers.
        unsafe { core::ptr::copy_nonoverlapping(src, area.as_mut_ptr(), area.len()) };
        let Some(ds) = DsManagement::from_bytes(&area) else {
            return f(self);
        };
        self.set_ds_management(lp, ds);
        let out = f(self);
        let after = self.ds_management(lp);
        let first = ds.pebs_index.saturating_sub(ds.pebs_buffer_base) / PEBS_RECORD_SIZE;
        let state = &self.pebs[lp.index()];
        for (k, record) in state.records.iter().enumerate() {
            let k = k as u64;
            let at = ds.pebs_buffer_base + k * PEBS_RECORD_SIZE;
            if k < first || at >= after.pebs_index {
                continue;
            }
            let bytes = record.to_bytes();
            let dst = core::ptr::with_exposed_provenance_mut::<u8>(at as usize);
            // SAFETY: `at` is inside the PEBS buffer (below the index, which
            // never passes the absolute maximum), live by the caller's
            // promise.
            unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len()) };
        }
        let index_at = address as usize + DsManagement::PEBS_OFFSET + 8;
        let dst = core::ptr::with_exposed_provenance_mut::<u8>(index_at);
        let index = after.pebs_index.to_le_bytes();
        // SAFETY: the PEBS index field of the management area read above.
        unsafe { core::ptr::copy_nonoverlapping(index.as_ptr(), dst, index.len()) };
        out
    }

    /// Records the hardware would have written for `lp` that did not fit in
    /// the model's [`PEBS_RECORD_SLOTS`] slots.
    pub fn pebs_lost(&self, lp: LogicalProcessor) -> u64 {
        self.pebs[lp.index()].lost
    }
}

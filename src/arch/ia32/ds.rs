//! The DS save area in memory (SDM Vol. 3B "Debug Store (DS) Mechanism",
//! "64-bit Format of the DS Save Area"; 18.15.7 in the NetBurst chapter):
//! the DS management area that `IA32_DS_AREA` points at, and the PEBS
//! buffer the processor writes records into behind the program's back. One
//! ownership type, [`DsArea`], for every x86 PMU that writes one: NetBurst's
//! PEBS (one 144-byte record shape) and the architectural PMU's (records of
//! 32 to 208 bytes, per record format and, with adaptive PEBS, per
//! `MSR_PEBS_DATA_CFG`).
//!
//! # Ownership
//!
//! The memory is the caller's ([`DsMemory`], usually a `static`), handed
//! over for good as `&'static mut` to a [`DsArea`], its one owner: from the
//! moment a driver installs it the processor may write records and the PEBS
//! index into it while the program runs, so no Rust reference to it may
//! exist. [`DsArea`] keeps only its address, and every access goes through
//! [`volatile::VolatilePtr`] reads and writes, which the compiler neither
//! merges nor elides. While installed, the area is the driver's: the kernel
//! gets it back only from the driver, once no counter can make the
//! processor write it.
//!
//! # One linear address in every address space
//!
//! The processor writes the DS save area by *linear* address (SDM: "the
//! linear address of the first byte of the DS buffer management area" in
//! `IA32_DS_AREA`, linear addresses in the management area), through
//! whatever page tables CR3 holds when the record is written: a PEBS assist
//! in a user process writes through that process's page tables, an assist
//! in a guest's code through the guest's. So while PEBS runs the area must
//! be mapped, writable, at the same linear address to the same memory in
//! every address space the CPU runs (Linux maps its per-CPU DS area and
//! PEBS buffer into the `cpu_entry_area`, which every page table, user and
//! kernel, maps). Nothing a driver can check says so: [`DsArea::new`] is
//! `unsafe`, and its contract is the kernel's statement that it is.
//!
//! # Layout (64-bit format, every field 8 bytes)
//!
//! | offset | field |
//! |---|---|
//! | 00H-18H | BTS buffer base, index, absolute maximum, interrupt threshold (unused here, kept 0) |
//! | 20H | PEBS buffer base: the first record |
//! | 28H | PEBS index: where the processor writes the next record |
//! | 30H | PEBS absolute maximum: one past the last record that fits |
//! | 38H | PEBS interrupt threshold: the PMI comes when the index reaches it |
//! | 40H + 8n | PEBS counter reset of counter n: what the counter is reloaded with after its record (NetBurst: one, at 40H; the architectural PMU's general counters from 40H, its fixed counters from 80H with record formats up to 4, from 140H with format 5) |
//!
//! [`DsManagement`] has room for 48 reset values (1C0H bytes), format 5's
//! 32 general and 16 fixed counters.

use core::mem::{offset_of, size_of};
use core::ptr::NonNull;

use volatile::VolatilePtr;

use crate::sealed::Sealed;

/// Reset values a [`DsManagement`] has room for: 32 general counters and
/// 16 fixed counters, PEBS record format 5's layout (the largest).
pub const COUNTER_RESETS: usize = 48;

/// The largest record the drain reads, in 8-byte words: 26
/// (208 bytes, an adaptive record with the basic, memory and GPR groups).
pub const MAX_RECORD_WORDS: usize = 26;

/// The DS management area, 64-bit format (see the [module
/// documentation](self) for the offsets).
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[allow(missing_docs)]
pub struct DsManagement {
    pub bts_buffer_base: u64,
    pub bts_index: u64,
    pub bts_absolute_maximum: u64,
    pub bts_interrupt_threshold: u64,
    pub pebs_buffer_base: u64,
    pub pebs_index: u64,
    pub pebs_absolute_maximum: u64,
    pub pebs_interrupt_threshold: u64,
    /// The counters' reload values, at 40H + 8n.
    pub pebs_counter_reset: [u64; COUNTER_RESETS],
}

impl DsManagement {
    /// Every field 0.
    pub const ZERO: DsManagement = DsManagement {
        bts_buffer_base: 0,
        bts_index: 0,
        bts_absolute_maximum: 0,
        bts_interrupt_threshold: 0,
        pebs_buffer_base: 0,
        pebs_index: 0,
        pebs_absolute_maximum: 0,
        pebs_interrupt_threshold: 0,
        pebs_counter_reset: [0; COUNTER_RESETS],
    };
}

impl Default for DsManagement {
    fn default() -> Self {
        Self::ZERO
    }
}

const _: () = {
    assert!(offset_of!(DsManagement, pebs_buffer_base) == 0x20);
    assert!(offset_of!(DsManagement, pebs_index) == 0x28);
    assert!(offset_of!(DsManagement, pebs_interrupt_threshold) == 0x38);
    assert!(offset_of!(DsManagement, pebs_counter_reset) == 0x40);
    assert!(size_of::<DsManagement>() == 0x1C0);
};

/// The shape of one slot of a PEBS buffer: what a [`DsMemory`] holds
/// records as. Sealed: the slots are the architectures' record shapes
/// (NetBurst's 144-byte record, the architectural PMU's 208-byte slot).
pub trait RecordSlot: Copy + Sealed {
    /// A zeroed slot.
    const ZERO: Self;
}

/// Caller-provided memory for one logical processor's PEBS: the DS
/// management area followed by room for `K` record slots of shape `R`
/// (each architecture names its own: `netburst::ds::PebsArea<K>`,
/// `archperf::PebsArea<K>`). Declare it as a `static mut` or leak it, and
/// hand it to a [`DsArea`].
#[repr(C, align(64))]
pub struct DsMemory<R: RecordSlot, const K: usize> {
    management: DsManagement,
    records: [R; K],
}

impl<R: RecordSlot, const K: usize> DsMemory<R, K> {
    /// Zeroed memory.
    pub const fn new() -> Self {
        DsMemory {
            management: DsManagement::ZERO,
            records: [R::ZERO; K],
        }
    }
}

impl<R: RecordSlot, const K: usize> Default for DsMemory<R, K> {
    fn default() -> Self {
        Self::new()
    }
}

/// Where the records start in a [`DsMemory`]: right after the management
/// area, whose size is a multiple of its 64-byte alignment, so the same
/// for every slot shape of alignment 64 or less and every `K`.
const RECORDS_OFFSET: usize = size_of::<DsManagement>();

/// A DS save area: the memory of a [`DsMemory`], owned. Not `Copy`, not
/// `Clone`, not `Sync`: one owner at a time, which is a driver while the
/// area is installed (NetBurst's `set_pebs_area`, the architectural PMU's)
/// and the kernel again once the driver hands it back (`take_pebs_area`),
/// when no counter can make the processor write it.
#[derive(Debug, PartialEq, Eq)]
pub struct DsArea {
    management: NonNull<DsManagement>,
    /// Bytes of the buffer after the management area.
    bytes: u32,
    /// Bytes of one slot of the memory's shape.
    slot: u32,
}

// SAFETY: a `DsArea` is the one owner of memory handed over for good as
// `&'static mut` (nothing else references it); moving the owner to another
// CPU moves the right to touch the memory with it. It is not `Sync`: two
// CPUs never reach the memory through one `DsArea`.
unsafe impl Send for DsArea {}

impl DsArea {
    /// Takes `area` for good: the processor will write it once a driver
    /// installs it.
    ///
    /// # Safety
    ///
    /// While a driver has the area installed (from its `set_pebs_area` to
    /// its `take_pebs_area`, or its end), `area` is mapped, writable, at
    /// this same linear address, to this same memory, in every address
    /// space the CPU that installs it runs in: the processor writes PEBS
    /// records and the PEBS index by linear address through whatever page
    /// tables are current when an assist happens (a user process's, a
    /// guest's under a hypervisor that lets the assist run in it), and a
    /// write through a mapping of other memory, or a fault where there is
    /// none, corrupts that memory or loses the machine. A `static` of a
    /// kernel whose kernel half every address space maps (the usual
    /// higher-half kernel, an identity-mapped hobby kernel with one address
    /// space) keeps it; memory mapped in one process only does not.
    pub unsafe fn new<R: RecordSlot, const K: usize>(area: &'static mut DsMemory<R, K>) -> DsArea {
        // The pointer to the whole area, as a pointer to its first field
        // (`repr(C)`): its provenance covers the records too, which the
        // processor (or a model standing for it) reaches from the exposed
        // address. Derived from `&mut area.management` it would cover the
        // management area alone, and every record access through it would
        // be undefined behaviour (Miri's finding).
        let slot = size_of::<R>();
        let bytes = slot.saturating_mul(K);
        DsArea {
            management: NonNull::from(area).cast::<DsManagement>(),
            bytes: u32::try_from(bytes).unwrap_or(u32::MAX),
            slot: u32::try_from(slot).unwrap_or(u32::MAX),
        }
    }

    /// How many record slots of the memory's shape fit (`K`).
    pub const fn capacity(&self) -> u32 {
        match self.bytes.checked_div(self.slot) {
            Some(k) => k,
            None => 0,
        }
    }

    /// Bytes of the buffer after the management area.
    pub const fn bytes(&self) -> u32 {
        self.bytes
    }

    /// How many records of `record_bytes` fit.
    pub const fn records_of(&self, record_bytes: u32) -> u32 {
        match self.bytes.checked_div(record_bytes) {
            Some(k) => k,
            None => 0,
        }
    }

    /// The linear address for `IA32_DS_AREA` (exposed: the processor, or
    /// the model standing for it, writes records through it).
    pub fn address(&self) -> u64 {
        self.management.as_ptr().expose_provenance() as u64
    }

    /// The management area, for a PMI state to publish.
    pub(crate) const fn management_ptr(&self) -> NonNull<DsManagement> {
        self.management
    }

    /// Sets the area up for a new run of records of `record_bytes` each: no
    /// record yet, the absolute maximum after as many as fit, the interrupt
    /// after `threshold` records (at most as many as fit; 0: at the first
    /// write past the base, which a run without records never makes), every
    /// counter reset value 0 ([`DsArea::set_counter_reset`]). BTS is left
    /// unused.
    pub fn reset(&mut self, record_bytes: u32, threshold: u32) {
        let fit = self.records_of(record_bytes);
        let base = self.address() + RECORDS_OFFSET as u64;
        let at = |k: u32| base + u64::from(k) * u64::from(record_bytes);
        management(self.management).write(DsManagement {
            pebs_buffer_base: base,
            pebs_index: base,
            pebs_absolute_maximum: at(fit),
            pebs_interrupt_threshold: at(threshold.min(fit)),
            ..DsManagement::ZERO
        });
    }

    /// Sets the reload value at offset 40H + 8 `index` (the reset value of
    /// the counter the record format puts there); an index past
    /// [`COUNTER_RESETS`] is ignored.
    pub fn set_counter_reset(&mut self, index: usize, value: u64) {
        if index >= COUNTER_RESETS {
            return;
        }
        let first = offset_of!(DsManagement, pebs_counter_reset);
        let cell = self
            .management
            .as_ptr()
            .wrapping_byte_add(first)
            .cast::<u64>()
            .wrapping_add(index);
        if let Some(cell) = NonNull::new(cell) {
            // SAFETY: reset value `index` < COUNTER_RESETS of the management
            // area this `DsArea` owns (valid, aligned, referenced by nobody).
            unsafe { VolatilePtr::new(cell) }.write(value);
        }
    }

    /// The management area as it is now (the processor advances the index).
    pub fn read_management(&self) -> DsManagement {
        management(self.management).read()
    }

    /// Hands every record of `record_bytes` written since the last drain to
    /// `f` as its words, oldest first, and rewinds the PEBS index to the
    /// buffer base. Only records inside the buffer are read, whatever the
    /// index says. Returns how many were handed over.
    pub fn drain(&mut self, record_bytes: u32, f: impl FnMut(&[u64])) -> u32 {
        // SAFETY: `self` owns the area, as `&'static mut` memory nothing
        // else references.
        unsafe { drain_published(self.management, record_bytes, f) }
    }
}

/// The management area at `ptr`, for volatile accesses.
fn management(ptr: NonNull<DsManagement>) -> VolatilePtr<'static, DsManagement> {
    // SAFETY: every `NonNull<DsManagement>` here is a `DsArea`'s, the
    // management area of a `DsMemory` handed over as `&'static mut`: valid,
    // aligned, live for ever, and referenced by nobody.
    unsafe { VolatilePtr::new(ptr) }
}

/// The records written to a published area, as [`written`] finds them:
/// where the first is, how many there are, their size.
pub(crate) struct Written {
    first: NonNull<u64>,
    count: u32,
    words: usize,
}

impl Written {
    /// How many records.
    #[inline(always)]
    pub(crate) const fn count(&self) -> u32 {
        self.count
    }

    /// Reads record `k` (below [`Written::count`]) into `out`, its first
    /// `out.len()` words (at most the record's), with volatile reads.
    ///
    /// # Safety
    ///
    /// The area [`written`] found these records in is still live and owned
    /// as its contract says.
    #[inline(always)]
    pub(crate) unsafe fn read(&self, k: u32, out: &mut [u64]) {
        if k >= self.count || out.len() > self.words {
            return;
        }
        let at = self.first.as_ptr().wrapping_add(k as usize * self.words);
        for (w, word) in out.iter_mut().enumerate() {
            // SAFETY: word `w` < the record's words of record `k` < count,
            // which ends at or below the absolute maximum, which `reset`
            // put at or below the end of the `DsMemory` whose management
            // area the area is (its records start at `RECORDS_OFFSET`,
            // 8-byte aligned), memory handed over as `&'static mut` that
            // nothing references; live by the caller's promise.
            *word = unsafe { at.add(w).read_volatile() };
        }
    }
}

/// The records of `record_bytes` (a multiple of 8, at most
/// [`MAX_RECORD_WORDS`] words; otherwise none) in the area whose management
/// area is at `area`, from the buffer base up to the PEBS index. The
/// buffer's size is read from the area's PEBS absolute maximum, which only
/// [`DsArea::reset`] writes (the processor writes the index and the
/// records), from the memory's own size: so the whole area is published as
/// one pointer, and a record past the buffer is never read whatever the
/// index says.
///
/// # Safety
///
/// `area` is a live [`DsArea`]'s [`DsArea::management_ptr`], and nothing
/// else drains or resets that area until the records are read and the
/// index rewound ([`rewind`]).
#[inline(always)]
pub(crate) unsafe fn written(area: NonNull<DsManagement>, record_bytes: u32) -> Written {
    let m = management(area);
    let words = record_bytes as usize / 8;
    let size = u64::from(record_bytes);
    let first = area
        .cast::<u8>()
        .as_ptr()
        .wrapping_add(RECORDS_OFFSET)
        .cast::<u64>();
    let none = Written {
        first: area.cast::<u64>(),
        count: 0,
        words,
    };
    let Some(first) = NonNull::new(first) else {
        return none;
    };
    if words == 0 || words > MAX_RECORD_WORDS || !record_bytes.is_multiple_of(8) {
        return none;
    }
    let base = area.as_ptr().expose_provenance() as u64 + RECORDS_OFFSET as u64;
    let maximum = volatile::map_field!(m.pebs_absolute_maximum).read();
    let index = volatile::map_field!(m.pebs_index).read();
    let fit = maximum.saturating_sub(base).checked_div(size).unwrap_or(0);
    let written = index.saturating_sub(base).checked_div(size).unwrap_or(0);
    Written {
        first,
        count: u32::try_from(written.min(fit)).unwrap_or(u32::MAX),
        words,
    }
}

/// Rewinds the PEBS index of the area at `area` to its buffer base.
///
/// # Safety
///
/// As [`written`]'s.
#[inline(always)]
pub(crate) unsafe fn rewind(area: NonNull<DsManagement>) {
    let m = management(area);
    let base = area.as_ptr().expose_provenance() as u64 + RECORDS_OFFSET as u64;
    volatile::map_field!(m.pebs_index).write(base);
}

/// [`DsArea::drain`] for the area whose management area is at `area`: the
/// records of `record_bytes` [`written`] finds, each read into a buffer of
/// words and handed to `f`; then the index is rewound.
///
/// # Safety
///
/// As [`written`]'s.
#[inline(always)]
pub(crate) unsafe fn drain_published(
    area: NonNull<DsManagement>,
    record_bytes: u32,
    mut f: impl FnMut(&[u64]),
) -> u32 {
    let mut record = [0u64; MAX_RECORD_WORDS];
    let words = record_bytes as usize / 8;
    // SAFETY: the caller's promise is `written`'s.
    let records = unsafe { written(area, record_bytes) };
    let Some(record) = record.get_mut(..words) else {
        return 0;
    };
    for k in 0..records.count() {
        // SAFETY: as above.
        unsafe { records.read(k, record) };
        f(record);
    }
    // SAFETY: as above.
    unsafe { rewind(area) };
    records.count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy)]
    #[repr(C)]
    struct Slot([u64; 3]);

    impl Sealed for Slot {}

    impl RecordSlot for Slot {
        const ZERO: Slot = Slot([0; 3]);
    }

    /// The area's management fields after a reset, a counter reset value,
    /// and a drain of what a "processor" wrote by the exposed address:
    /// records of another size than the slot's, bounded by the buffer.
    #[test]
    fn reset_and_drain_through_the_exposed_address() {
        let memory: &'static mut DsMemory<Slot, 4> = Box::leak(Box::new(DsMemory::new()));
        // SAFETY: a leaked allocation, mapped at its address in the one
        // address space of the test process.
        let mut area = unsafe { DsArea::new(memory) };
        assert_eq!(
            (area.capacity(), area.bytes(), area.records_of(16)),
            (4, 96, 6)
        );
        area.reset(16, 2);
        area.set_counter_reset(33, 0xFFFF_FFF0);
        area.set_counter_reset(COUNTER_RESETS, 1);
        let m = area.read_management();
        let base = area.address() + 0x1C0;
        assert_eq!(m.pebs_buffer_base, base);
        assert_eq!(m.pebs_index, base);
        assert_eq!(m.pebs_absolute_maximum, base + 96);
        assert_eq!(m.pebs_interrupt_threshold, base + 32);
        assert_eq!(m.pebs_counter_reset[33], 0xFFFF_FFF0);
        // The "processor" writes three records of two words and an index
        // past the end.
        let words = core::ptr::with_exposed_provenance_mut::<u64>(base as usize);
        for k in 0..6 {
            // SAFETY: inside the leaked buffer of 12 words.
            unsafe { words.add(k).write_volatile(k as u64 + 1) };
        }
        let index = core::ptr::with_exposed_provenance_mut::<u64>(area.address() as usize + 0x28);
        // SAFETY: the index field of the leaked management area.
        unsafe { index.write_volatile(base + 48) };
        let mut seen = Vec::new();
        assert_eq!(area.drain(16, |r| seen.push(r.to_vec())), 3);
        assert_eq!(seen, [vec![1, 2], vec![3, 4], vec![5, 6]]);
        assert_eq!(area.read_management().pebs_index, base);
        // SAFETY: as above.
        unsafe { index.write_volatile(base + 1000) };
        assert_eq!(area.drain(16, |_| {}), 6, "never past the absolute maximum");
        assert_eq!(area.drain(8 * 27, |_| {}), 0, "longer than any record");
    }
}

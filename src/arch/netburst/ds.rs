//! The DS save area in memory for PEBS (SDM Vol. 3B 18.15.7, "64-bit DS
//! save area"): the DS management area that `IA32_DS_AREA` points at, and
//! the buffer of PEBS records the processor writes behind the program's
//! back.
//!
//! The memory is the caller's ([`PebsArea`], usually a `static`), handed
//! over for good as `&'static mut` to a [`DsArea`], its one owner: from the
//! moment a driver installs it the processor may write records and the PEBS
//! index into it while the program runs, so no Rust reference to it may
//! exist. [`DsArea`] keeps only its address, and every access goes through
//! [`volatile::VolatilePtr`] reads and writes, which the compiler neither
//! merges nor elides. While installed, the area is the driver's: the kernel
//! gets it back only from the driver, once no counter can make the
//! processor write it.
//!
//! Layout (64-bit format, all fields 8 bytes):
//!
//! | offset | field |
//! |---|---|
//! | 00H-18H | BTS buffer base, index, absolute maximum, interrupt threshold (unused here, kept 0) |
//! | 20H | PEBS buffer base: the first record |
//! | 28H | PEBS index: where the processor writes the next record |
//! | 30H | PEBS absolute maximum: one past the last record that fits |
//! | 38H | PEBS interrupt threshold: the PMI comes when the index reaches it |
//! | 40H | PEBS counter reset: what the PEBS counter is reloaded with after each record |
//!
//! A record is 144 bytes: RFLAGS, RIP, then RAX, RBX, RCX, RDX, RSI, RDI,
//! RBP, RSP, R8-R15, the state after the instruction whose µop took the
//! PEBS assist.

use core::mem::{offset_of, size_of};
use core::ptr::NonNull;

use volatile::VolatilePtr;

/// One 64-bit PEBS record (SDM 18.15.7): the architectural state after the
/// retired instruction that took the assist.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[allow(missing_docs)]
pub struct PebsRecord {
    pub rflags: u64,
    /// The precise instruction pointer.
    pub rip: u64,
    pub rax: u64,
    pub rbx: u64,
    pub rcx: u64,
    pub rdx: u64,
    pub rsi: u64,
    pub rdi: u64,
    pub rbp: u64,
    pub rsp: u64,
    pub r8: u64,
    pub r9: u64,
    pub r10: u64,
    pub r11: u64,
    pub r12: u64,
    pub r13: u64,
    pub r14: u64,
    pub r15: u64,
}

/// Bytes per PEBS record (SDM 18.15.7, 64-bit format).
pub const PEBS_RECORD_BYTES: u64 = 144;

/// The DS management area, 64-bit format (SDM 18.15.7).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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
    /// 40 bits used: the PEBS counter's reload value.
    pub pebs_counter_reset: u64,
    pub reserved: u64,
}

const _: () = {
    assert!(size_of::<PebsRecord>() == PEBS_RECORD_BYTES as usize);
    assert!(offset_of!(PebsRecord, rip) == 8);
    assert!(offset_of!(PebsRecord, r15) == 136);
    assert!(offset_of!(DsManagement, pebs_buffer_base) == 0x20);
    assert!(offset_of!(DsManagement, pebs_counter_reset) == 0x40);
};

/// Caller-provided memory for one logical processor's PEBS: the DS
/// management area followed by room for `K` records. Declare it as a
/// `static mut` or leak it, and hand it to
/// [`NetBurstDriver::set_pebs_area`](super::driver::NetBurstDriver::set_pebs_area).
#[repr(C, align(64))]
pub struct PebsArea<const K: usize> {
    management: DsManagement,
    records: [PebsRecord; K],
}

impl<const K: usize> PebsArea<K> {
    /// Zeroed memory.
    pub const fn new() -> Self {
        const ZERO: PebsRecord = PebsRecord {
            rflags: 0,
            rip: 0,
            rax: 0,
            rbx: 0,
            rcx: 0,
            rdx: 0,
            rsi: 0,
            rdi: 0,
            rbp: 0,
            rsp: 0,
            r8: 0,
            r9: 0,
            r10: 0,
            r11: 0,
            r12: 0,
            r13: 0,
            r14: 0,
            r15: 0,
        };
        PebsArea {
            management: DsManagement {
                bts_buffer_base: 0,
                bts_index: 0,
                bts_absolute_maximum: 0,
                bts_interrupt_threshold: 0,
                pebs_buffer_base: 0,
                pebs_index: 0,
                pebs_absolute_maximum: 0,
                pebs_interrupt_threshold: 0,
                pebs_counter_reset: 0,
                reserved: 0,
            },
            records: [ZERO; K],
        }
    }
}

impl<const K: usize> Default for PebsArea<K> {
    fn default() -> Self {
        Self::new()
    }
}

/// A DS save area: the memory of a [`PebsArea`], owned. Not `Copy`, not
/// `Clone`, not `Sync`: one owner at a time, which is a driver while the
/// area is installed ([`NetBurstDriver::set_pebs_area`]) and the kernel
/// again once the driver hands it back
/// ([`NetBurstDriver::take_pebs_area`]), when no counter can make the
/// processor write it.
///
/// [`NetBurstDriver::set_pebs_area`]: super::driver::NetBurstDriver::set_pebs_area
/// [`NetBurstDriver::take_pebs_area`]: super::driver::NetBurstDriver::take_pebs_area
#[derive(Debug, PartialEq, Eq)]
pub struct DsArea {
    management: NonNull<DsManagement>,
    capacity: u32,
}

// SAFETY: a `DsArea` is the one owner of memory handed over for good as
// `&'static mut` (nothing else references it); moving the owner to another
// CPU moves the right to touch the memory with it. It is not `Sync`: two
// CPUs never reach the memory through one `DsArea`.
unsafe impl Send for DsArea {}

impl<const K: usize> From<&'static mut PebsArea<K>> for DsArea {
    fn from(area: &'static mut PebsArea<K>) -> DsArea {
        DsArea::new(area)
    }
}

impl DsArea {
    /// Takes `area` for good: the processor will write it once a driver
    /// installs it.
    pub fn new<const K: usize>(area: &'static mut PebsArea<K>) -> DsArea {
        // The pointer to the whole area, as a pointer to its first field
        // (`repr(C)`): its provenance covers the records too, which the
        // processor (or the model) reaches from the exposed address.
        // Derived from `&mut area.management` it would cover the management
        // area alone, and every record access through it would be undefined
        // behaviour (Miri's finding).
        DsArea {
            management: NonNull::from(area).cast::<DsManagement>(),
            capacity: u32::try_from(K).unwrap_or(u32::MAX),
        }
    }

    /// How many records fit.
    pub const fn capacity(&self) -> u32 {
        self.capacity
    }

    /// The linear address for `IA32_DS_AREA` (exposed: the processor, or
    /// the model standing for it, writes records through it).
    pub fn address(&self) -> u64 {
        self.management.as_ptr().expose_provenance() as u64
    }

    /// The management area, for the PMI state to publish.
    pub(crate) const fn management_ptr(&self) -> NonNull<DsManagement> {
        self.management
    }

    /// Sets the area up for a new run: no record yet, the interrupt after
    /// `threshold` records (at most the capacity), the counter reloaded
    /// with `counter_reset` after each record. BTS is left unused.
    pub fn reset(&mut self, threshold: u32, counter_reset: u64) {
        let address = self.address();
        let base = record_address(address, 0);
        management(self.management).write(DsManagement {
            pebs_buffer_base: base,
            pebs_index: base,
            pebs_absolute_maximum: record_address(address, self.capacity),
            pebs_interrupt_threshold: record_address(address, threshold.min(self.capacity)),
            pebs_counter_reset: counter_reset,
            ..DsManagement::default()
        });
    }

    /// The management area as it is now (the processor advances the index).
    pub fn read_management(&self) -> DsManagement {
        management(self.management).read()
    }

    /// Hands every record written since the last drain to `f`, oldest
    /// first, and rewinds the PEBS index to the buffer base. Only records
    /// inside the buffer are read, whatever the index says. Returns how
    /// many were handed over.
    pub fn drain(&mut self, f: impl FnMut(&PebsRecord)) -> u32 {
        // SAFETY: `self` owns the area, as `&'static mut` memory nothing
        // else references.
        unsafe { drain_published(self.management, f) }
    }
}

/// The address of record `k` of the area at `address`.
fn record_address(address: u64, k: u32) -> u64 {
    address + RECORDS_OFFSET as u64 + u64::from(k) * PEBS_RECORD_BYTES
}

/// The management area at `ptr`, for volatile accesses.
fn management(ptr: NonNull<DsManagement>) -> VolatilePtr<'static, DsManagement> {
    // SAFETY: every `NonNull<DsManagement>` here is a `DsArea`'s, the
    // management area of a `PebsArea` handed over as `&'static mut`: valid,
    // aligned, live for ever, and referenced by nobody.
    unsafe { VolatilePtr::new(ptr) }
}

/// [`DsArea::drain`] for the area whose management area is at `area`. The
/// capacity is read from the area's PEBS absolute maximum, which only
/// [`DsArea::reset`] writes (the processor writes the index and the
/// records), so the whole area is published as one pointer.
///
/// # Safety
///
/// `area` is a live [`DsArea`]'s [`DsArea::management_ptr`], and nothing
/// else drains or resets that area during the call.
pub(crate) unsafe fn drain_published(
    area: NonNull<DsManagement>,
    mut f: impl FnMut(&PebsRecord),
) -> u32 {
    let m = management(area);
    let address = area.as_ptr().expose_provenance() as u64;
    let base = record_address(address, 0);
    let maximum = volatile::map_field!(m.pebs_absolute_maximum).read();
    let capacity = u32::try_from(maximum.saturating_sub(base) / PEBS_RECORD_BYTES).unwrap_or(0);
    let index = volatile::map_field!(m.pebs_index).read();
    let written = index.saturating_sub(base) / PEBS_RECORD_BYTES;
    let n = u32::try_from(written).unwrap_or(u32::MAX).min(capacity);
    let records = area
        .as_ptr()
        .wrapping_byte_add(RECORDS_OFFSET)
        .cast::<PebsRecord>();
    for k in 0..n {
        let Some(ptr) = NonNull::new(records.wrapping_add(k as usize)) else {
            break;
        };
        // SAFETY: record `k` < capacity of the `PebsArea` whose management
        // area this is (its absolute maximum was written by `reset` from
        // the area's own capacity), handed over as `&'static mut`.
        f(&unsafe { VolatilePtr::new(ptr) }.read());
    }
    volatile::map_field!(m.pebs_index).write(base);
    n
}

/// Where the records start in a [`PebsArea`] (the same for every `K`).
const RECORDS_OFFSET: usize = offset_of!(PebsArea<1>, records);

// The management area is the first field: a pointer to the area is one to it.
const _: () = assert!(offset_of!(PebsArea<1>, management) == 0);

//! The DS save area in memory, as the model reaches it: by linear address,
//! as the processor does, once the kernel has said that the area at
//! IA32_DS_AREA is memory the model may write
//! ([`ArchPerfModel::attach_ds_memory`]). The model's only `unsafe` code.

use super::registers::ArchPerfModel;

impl ArchPerfModel {
    /// From now on the model's PEBS assists read the DS management area at
    /// IA32_DS_AREA and write records and the PEBS index into the area
    /// and the buffer it describes, as the processor does; before, an
    /// assist writes nothing (it counts as lost, [`ArchPerfModel::pebs_lost`]).
    ///
    /// # Safety
    ///
    /// Until [`ArchPerfModel::detach_ds_memory`] (or the model's end),
    /// whenever the model runs (counts, retires, injects) with an
    /// IA32_DS_AREA that is not 0: that address is the first byte of a
    /// live, writable 64-bit DS management area of at least 1C0H bytes,
    /// the PEBS buffer its base and absolute maximum describe is live and
    /// writable too, and no Rust reference covers either meanwhile. A
    /// driver's DS area (the crate's `DsArea`, which keeps only the
    /// address) installed in IA32_DS_AREA is such memory: the contract of
    /// `DsArea::new` makes it so on the hardware, and the model stands for
    /// the hardware here.
    pub unsafe fn attach_ds_memory(&mut self) {
        self.ds_attached = true;
    }

    /// The model's assists write no memory from now on.
    pub fn detach_ds_memory(&mut self) {
        self.ds_attached = false;
    }

    /// The 8-byte word at linear address `address`, if memory is attached
    /// and the address is 8-byte aligned.
    pub(super) fn read_word(&self, address: u64) -> Option<u64> {
        if !self.ds_attached || !address.is_multiple_of(8) || address == 0 {
            return None;
        }
        let ptr = core::ptr::with_exposed_provenance::<u64>(usize::try_from(address).ok()?);
        // SAFETY: `attach_ds_memory`'s contract: the model reads only the
        // DS management area at IA32_DS_AREA and the buffer it describes
        // (its callers check the bounds), live memory no reference covers;
        // aligned, checked above.
        Some(unsafe { ptr.read_volatile() })
    }

    /// Writes the 8-byte word at linear address `address`, if memory is
    /// attached and the address 8-byte aligned; whether it did.
    pub(super) fn write_word(&mut self, address: u64, value: u64) -> bool {
        if !self.ds_attached || !address.is_multiple_of(8) || address == 0 {
            return false;
        }
        let Ok(address) = usize::try_from(address) else {
            return false;
        };
        let ptr = core::ptr::with_exposed_provenance_mut::<u64>(address);
        // SAFETY: as in `read_word`: the DS management area's PEBS index or
        // a record inside the buffer (its callers check the bounds), live
        // writable memory no reference covers; aligned.
        unsafe { ptr.write_volatile(value) };
        true
    }
}

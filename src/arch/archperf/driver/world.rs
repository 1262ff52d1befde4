//! The pass-through world switch's register steps on the architectural
//! PMU (KVM's mediated vPMU is the model): counters reserved for a guest
//! ([`ArchPerfDriver::reserve_guest`]) hold the guest's registers while it
//! runs ([`ArchPerfDriver::enter_guest`]) and keep them, stopped, while
//! the host runs ([`ArchPerfDriver::exit_guest`]); the host's own counters
//! run on across both. The guest's registers are plain data
//! ([`GuestRegisters`]), so a vCPU's PMU moves between CPUs as a value.
//!
//! The reserved counters are the guest's alone: no handle of the host can
//! claim them while they are reserved, so entering a guest saves none of
//! the host's counters (the guest policy's `host_counters` are the ones
//! the host keeps) and exiting restores none: the host's side of a switch
//! is its `IA32_PERF_GLOBAL_CTRL` bits only.
//!
//! | step | register traffic |
//! |---|---|
//! | entry: stop the guest's counters | 1 WRMSR `IA32_PERF_GLOBAL_CTRL` (the host's bits only) |
//! | entry: controls | 1 WRMSR `IA32_PERFEVTSELx` per general counter whose select changed since it was last written; 1 WRMSR `IA32_FIXED_CTR_CTRL` if a fixed field changed |
//! | entry: values | 1 WRMSR per counter of the guest |
//! | entry: overflow status | 1 WRMSR `IA32_PERF_GLOBAL_STATUS_SET` if the guest has status bits |
//! | (VM entry: the VMCS loads the guest's `IA32_PERF_GLOBAL_CTRL`) | none of the crate's |
//! | (VM exit: the VMCS loads the host's `IA32_PERF_GLOBAL_CTRL`) | none of the crate's |
//! | exit: overflow status | 1 RDMSR `IA32_PERF_GLOBAL_STATUS`; 1 WRMSR `IA32_PERF_GLOBAL_OVF_CTRL` if the guest has status bits (acknowledged for the host) |
//! | exit: values | 1 RDMSR per counter of the guest |
//! | exit: the host's `IA32_PERF_GLOBAL_CTRL` | 1 WRMSR, last |
//!
//! so for a guest of `n` counters an entry costs at most `2n + 3`
//! accesses and an exit `n + 3`; an entry after an exit of the same guest
//! (no other guest in between, its controls unchanged) costs `n + 1`, or
//! `n + 2` with status bits.

use super::{ArchPerfDriver, ConfigError, Error};
use crate::access::{MsrBackend, MsrOps};
use crate::arch::archperf::msrs::{
    Counter, CounterSet, FixedCtl, FixedCtrCtrl, IA32_PERF_GLOBAL_OVF_CTRL,
    IA32_PERF_GLOBAL_STATUS, IA32_PERF_GLOBAL_STATUS_SET, IA32_PERFEVTSEL0, MAX_FIXED, MAX_GENERAL,
};
use crate::counter::Owner;

/// A guest's PMU registers as the world switch loads and saves them: the
/// images the hardware takes (an event select as written to
/// `IA32_PERFEVTSELx`, the guest's fields of `IA32_FIXED_CTR_CTRL`), the
/// counter values, its `IA32_PERF_GLOBAL_CTRL` and its overflow status.
/// Plain data: it moves between CPUs as a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GuestRegisters {
    /// `IA32_PERFEVTSELx` images, by general counter.
    pub evtsel: [u64; MAX_GENERAL as usize],
    /// `IA32_FIXED_CTR_CTRL`: the fields of the guest's fixed counters
    /// are loaded, the others ignored.
    pub fixed_ctrl: FixedCtrCtrl,
    /// General counter values.
    pub general: [u64; MAX_GENERAL as usize],
    /// Fixed counter values.
    pub fixed: [u64; MAX_FIXED as usize],
    /// The guest's `IA32_PERF_GLOBAL_CTRL` (the VMCS loads it; bits of
    /// counters not the guest's are dropped).
    pub global_ctrl: u64,
    /// The guest's overflow status (bits of its counters).
    pub status: CounterSet,
}

impl GuestRegisters {
    /// Every register clear.
    pub const CLEAR: GuestRegisters = GuestRegisters {
        evtsel: [0; MAX_GENERAL as usize],
        fixed_ctrl: FixedCtrCtrl::from_bits(0),
        general: [0; MAX_GENERAL as usize],
        fixed: [0; MAX_FIXED as usize],
        global_ctrl: 0,
        status: CounterSet::EMPTY,
    };

    /// Counter `c`'s value.
    pub fn value(&self, c: Counter) -> u64 {
        let n = usize::from(c.number());
        let v = if c.is_fixed() {
            self.fixed.get(n)
        } else {
            self.general.get(n)
        };
        v.copied().unwrap_or(0)
    }

    /// Counter `c`'s value set to `v`.
    pub fn set_value(&mut self, c: Counter, v: u64) {
        let n = usize::from(c.number());
        let slot = if c.is_fixed() {
            self.fixed.get_mut(n)
        } else {
            self.general.get_mut(n)
        };
        if let Some(s) = slot {
            *s = v;
        }
    }
}

impl<O: Owner, M: MsrBackend> ArchPerfDriver<'_, O, M> {
    /// Reserves `counters` for a pass-through guest: claimed (no handle can
    /// configure them until [`ArchPerfDriver::release_guest`]), never armed
    /// for the host's PMI handler (which therefore neither services nor
    /// acknowledges their overflows). No register access: an unclaimed
    /// counter's control is clear. Refused below version 4 or without
    /// full-width writes ([`ConfigError::GuestNeedsVersion4`]), while counters are reserved
    /// already ([`ConfigError::GuestState`]), for a counter this CPU lacks,
    /// the firmware's or a claimed one.
    pub fn reserve_guest(&mut self, counters: CounterSet) -> Result<(), Error<M::Error>> {
        if self.cpu.version() < 4 || !self.cpu.full_width_write {
            return Err(Error::Config(ConfigError::GuestNeedsVersion4));
        }
        if !self.guest.is_empty() || counters.is_empty() {
            return Err(Error::Config(ConfigError::GuestState));
        }
        for c in counters.iter() {
            self.counter(c.index())?;
            if self.firmware.contains(c) {
                return Err(Error::Config(ConfigError::UsedByFirmware(c.index())));
            }
            if self.claimed.contains(c) {
                return Err(Error::Config(ConfigError::CounterClaimed(c.index())));
            }
        }
        for c in counters.iter() {
            self.pmu.pmi().arm(c, false);
            self.pmu
                .pmi()
                .set_sampling(c, None, self.cpu.full_width_write);
        }
        self.claimed = self.claimed.union(counters);
        self.guest = counters;
        self.guest_evtsel = [0; MAX_GENERAL as usize];
        Ok(())
    }

    /// The counters reserved for a guest.
    pub const fn guest_counters(&self) -> CounterSet {
        self.guest
    }

    /// Gives the guest's counters back to the host: their controls and
    /// values zeroed (1 WRMSR per general counter, 1 per fixed counter,
    /// 1 `IA32_FIXED_CTR_CTRL` if the guest has fixed counters),
    /// unclaimed. Refused while a guest is loaded.
    pub fn release_guest(&mut self) -> Result<(), Error<M::Error>> {
        if self.guest_loaded {
            return Err(Error::Config(ConfigError::GuestState));
        }
        let mut fixed = false;
        for c in self.guest.iter() {
            match c.evtsel() {
                Some(m) => self.msr.write_msr(m, 0).map_err(Error::Access)?,
                None => {
                    fixed = true;
                    self.fixed_ctrl = self.fixed_ctrl.with(c.number(), FixedCtl::OFF);
                }
            }
            self.write_counter(c, 0)?;
        }
        if fixed {
            self.write_fixed_ctrl()?;
        }
        self.claimed = self.claimed.difference(self.guest);
        self.guest = CounterSet::EMPTY;
        self.guest_evtsel = [0; MAX_GENERAL as usize];
        Ok(())
    }

    /// Loads `g` onto the reserved counters before VM entry (traffic:
    /// module documentation): `IA32_PERF_GLOBAL_CTRL` written with the
    /// host's bits only first (none of the guest's counters runs while its
    /// registers are loaded), the controls that changed, every value, the
    /// overflow status through `IA32_PERF_GLOBAL_STATUS_SET`. No guest
    /// counter starts here: the VMCS's "load IA32_PERF_GLOBAL_CTRL" entry
    /// control starts them with the value returned, the host's bits and the
    /// guest's enables, at the instant of VM entry. Interrupts disabled
    /// from here to VM entry.
    pub fn enter_guest(&mut self, g: &GuestRegisters) -> Result<u64, Error<M::Error>> {
        if self.guest.is_empty() || self.guest_loaded {
            return Err(Error::Config(ConfigError::GuestState));
        }
        let host = self.host_global();
        self.write_global()?;
        self.guest_loaded = true;
        let mut fixed = self.fixed_ctrl;
        for c in self.guest.iter() {
            let n = c.number();
            if c.is_fixed() {
                fixed = fixed.with(n, g.fixed_ctrl.get(n)).with_adaptive(n, false);
            } else {
                let i = usize::from(n) % MAX_GENERAL as usize;
                let want = g.evtsel[i];
                if self.guest_evtsel[i] != want {
                    self.msr
                        .write_msr(IA32_PERFEVTSEL0 + u32::from(n), want)
                        .map_err(Error::Access)?;
                    self.guest_evtsel[i] = want;
                }
            }
        }
        if fixed != self.fixed_ctrl {
            self.fixed_ctrl = fixed;
            self.write_fixed_ctrl()?;
        }
        for c in self.guest.iter() {
            self.write_counter(c, g.value(c))?;
        }
        let status = g.status.intersection(self.guest);
        if !status.is_empty() {
            self.msr
                .write_msr(IA32_PERF_GLOBAL_STATUS_SET, status.bits())
                .map_err(Error::Access)?;
        }
        Ok(host.bits() | (g.global_ctrl & self.guest.bits()))
    }

    /// Saves the guest's counters into `g` after VM exit (the VMCS's exit
    /// control loaded the host's `IA32_PERF_GLOBAL_CTRL`, which stopped
    /// them): its overflow status read and acknowledged (the host's PMI
    /// handler never sees it), its values read, and the host's
    /// `IA32_PERF_GLOBAL_CTRL` written last (for a VMM that switches it
    /// through the MSR-load lists instead, as on Nehalem and Westmere).
    /// The controls are not read: the guest's writes to them trap, so `g`
    /// has them already. Returns the guest's counters that overflowed
    /// while it ran (status bits it did not have at entry): its PMI.
    pub fn exit_guest(&mut self, g: &mut GuestRegisters) -> Result<CounterSet, Error<M::Error>> {
        if !self.guest_loaded {
            return Err(Error::Config(ConfigError::GuestState));
        }
        let raw = self
            .msr
            .read_msr(IA32_PERF_GLOBAL_STATUS)
            .map_err(Error::Access)?;
        let status = CounterSet::from_bits_truncate(raw).intersection(self.guest);
        if !status.is_empty() {
            self.msr
                .write_msr(IA32_PERF_GLOBAL_OVF_CTRL, status.bits())
                .map_err(Error::Access)?;
        }
        for c in self.guest.iter() {
            let v = self
                .msr
                .read_msr(c.msr(self.cpu.full_width_write))
                .map_err(Error::Access)?;
            g.set_value(c, v);
        }
        self.guest_loaded = false;
        self.write_global()?;
        let new = status.difference(g.status.intersection(self.guest));
        g.status = status;
        Ok(new)
    }

    /// The host's `IA32_PERF_GLOBAL_CTRL` bits as [`ArchPerfDriver::enter_guest`]
    /// and [`ArchPerfDriver::exit_guest`] write them: what the VMCS's
    /// host-state field holds.
    pub fn host_global(&self) -> CounterSet {
        let ours = if self.stopped {
            CounterSet::EMPTY
        } else {
            self.running
        };
        ours.union(self.firmware_global).union(self.contexts)
    }
}

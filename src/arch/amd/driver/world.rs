//! The pass-through world switch's register steps on the AMD core PMU
//! (KVM's mediated vPMU is the model): counters reserved for a guest
//! ([`AmdDriver::reserve_guest`]) hold the guest's registers while it runs
//! ([`AmdDriver::enter_guest`]) and keep them, stopped, while the host
//! runs ([`AmdDriver::exit_guest`]); the host's own counters run on across
//! both. The guest's registers are plain data ([`GuestRegisters`]), so a
//! vCPU's PMU moves between CPUs as a value.
//!
//! The reserved counters are the guest's alone: no handle of the host can
//! claim them while they are reserved, so entering a guest saves none of
//! the host's counters and exiting restores none: the host's side of a
//! switch is its `PerfCntrGlobalCtl` bits only.
//!
//! # SVM has no global-control load
//!
//! VMX loads `IA32_PERF_GLOBAL_CTRL` with the world (VMCS entry and exit
//! controls); SVM has no such control, so the crate writes
//! `PerfCntrGlobalCtl` itself: the entry sets the guest's enables as its
//! last step, right before the VMM's `VMRUN`, and the exit clears them as
//! its first, right after `#VMEXIT`. In between, and in the few
//! instructions of the host on either side, the guest's counters count
//! only in guest mode: every guest control reaches the hardware with
//! GuestOnly set and HostOnly clear (AMD64 APM Vol. 2 13.2.1, with
//! `EFER.SVME` set; the images [`crate::virt::amd::GuestPmu::hardware_ctl`]
//! builds; the entry forces both bits again), so they count nothing of the
//! host's. The host's own counters run through the guest as configured:
//! one that should not count the guest's events is HostOnly
//! ([`super::EventSpec::host_only`]).
//!
//! PerfMonV2 is required ([`ConfigError::GuestNeedsPerfMonV2`]): before it
//! a counter's only enable is its control's `EN`, shared with the guest's
//! image, and no register restores an overflow status.
//!
//! | step | register traffic |
//! |---|---|
//! | entry: controls | 1 WRMSR `PERF_CTLn` per counter whose control changed since it was last written |
//! | entry: values | 1 WRMSR `PERF_CTRn` per counter of the guest |
//! | entry: overflow status | 1 WRMSR `PerfCntrGlobalStatusSet` if the guest has status bits |
//! | entry: start | 1 WRMSR `PerfCntrGlobalCtl` (the host's bits and the guest's enables), last |
//! | (`VMRUN` … `#VMEXIT`: the VMM's) | none of the crate's |
//! | exit: the guest's enables, where its `PerfCntrGlobalCtl` writes pass (`global_passed`) | 1 RDMSR `PerfCntrGlobalCtl`, first (SVM saves no such register) |
//! | exit: stop | 1 WRMSR `PerfCntrGlobalCtl` (the host's bits only) |
//! | exit: overflow status | 1 RDMSR `PerfCntrGlobalStatus`; 1 WRMSR `PerfCntrGlobalStatusClr` if the guest has status bits (acknowledged for the host) |
//! | exit: values | 1 RDMSR `PERF_CTRn` per counter of the guest |
//!
//! so for a guest of `n` counters an entry costs at most `2n + 2`
//! accesses and an exit `n + 3` (`n + 4` with `global_passed`); an entry after an exit of the same guest
//! (no other guest in between, its controls unchanged) costs `n + 1`, or
//! `n + 2` with status bits.

use super::{AmdDriver, ConfigError, Error};
use crate::access::{MsrBackend, MsrOps};
use crate::arch::amd::msrs::{
    Counter, CounterSet, MAX_COUNTERS, PERF_CNTR_GLOBAL_CTL, PERF_CNTR_GLOBAL_STATUS,
    PERF_CNTR_GLOBAL_STATUS_CLR, PERF_CNTR_GLOBAL_STATUS_SET, PerfCtl,
};
use crate::counter::Owner;

/// A guest's PMU registers as the world switch loads and saves them: its
/// `PERF_CTLn` images (as the guest wrote them after the checks; GuestOnly
/// is set and HostOnly cleared on the way to the hardware where `EN` is set), its counter
/// values, its `PerfCntrGlobalCtl` and its overflow status. Plain data: it
/// moves between CPUs as a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GuestRegisters {
    /// `PERF_CTLn` images, by counter.
    pub ctl: [u64; MAX_COUNTERS as usize],
    /// Counter values, by counter.
    pub ctr: [u64; MAX_COUNTERS as usize],
    /// The guest's `PerfCntrGlobalCtl` (bits of counters not the guest's
    /// are dropped). A guest without PerfMonV2 has no such register: its
    /// VMM keeps every bit of the guest's counters set here, so that the
    /// guest's `EN` alone starts and stops them.
    pub global_ctl: u64,
    /// The guest's overflow status (bits of its counters).
    pub status: CounterSet,
}

impl GuestRegisters {
    /// Every register clear.
    pub const CLEAR: GuestRegisters = GuestRegisters {
        ctl: [0; MAX_COUNTERS as usize],
        ctr: [0; MAX_COUNTERS as usize],
        global_ctl: 0,
        status: CounterSet::EMPTY,
    };

    /// Counter `c`'s value.
    pub fn value(&self, c: Counter) -> u64 {
        self.ctr.get(usize::from(c.index())).copied().unwrap_or(0)
    }

    /// Counter `c`'s value set to `v`.
    pub fn set_value(&mut self, c: Counter, v: u64) {
        if let Some(s) = self.ctr.get_mut(usize::from(c.index())) {
            *s = v;
        }
    }

    /// Counter `c`'s control as the hardware runs it: with `EN`, GuestOnly
    /// set and HostOnly clear; without it (it counts nothing) as it is, so
    /// that a control the guest never wrote stays 0 and costs no write.
    fn hardware_ctl(&self, c: Counter) -> u64 {
        let raw = self.ctl.get(usize::from(c.index())).copied().unwrap_or(0);
        let ctl = PerfCtl::from_bits(raw);
        if ctl.enable() {
            ctl.with_guest_only(true).with_host_only(false).bits()
        } else {
            raw
        }
    }
}

impl<O: Owner, M: MsrBackend> AmdDriver<'_, O, M> {
    /// Reserves `counters` for a pass-through guest: claimed (no handle can
    /// configure them until [`AmdDriver::release_guest`]), never armed for
    /// the host's PMI handler (which therefore neither services nor
    /// acknowledges their overflows). No register access: an unclaimed
    /// counter's control is clear. Refused without PerfMonV2
    /// ([`ConfigError::GuestNeedsPerfMonV2`]), while counters are reserved
    /// already ([`ConfigError::GuestState`]), for a counter this CPU lacks,
    /// the firmware's or a claimed one.
    pub fn reserve_guest(&mut self, counters: CounterSet) -> Result<(), Error<M::Error>> {
        if !self.v2 {
            return Err(Error::Config(ConfigError::GuestNeedsPerfMonV2));
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
            self.pmu.pmi().set_sampling(c, None, self.extended);
        }
        self.claimed = self.claimed.union(counters);
        self.guest = counters;
        self.guest_ctl = [0; MAX_COUNTERS as usize];
        Ok(())
    }

    /// The counters reserved for a guest.
    pub const fn guest_counters(&self) -> CounterSet {
        self.guest
    }

    /// Gives the guest's counters back to the host: their controls and
    /// values zeroed (2 WRMSR per counter), unclaimed. Refused while a
    /// guest is loaded.
    pub fn release_guest(&mut self) -> Result<(), Error<M::Error>> {
        if self.guest_loaded {
            return Err(Error::Config(ConfigError::GuestState));
        }
        for c in self.guest.iter() {
            self.msr
                .write_msr(c.ctl(self.extended), 0)
                .map_err(Error::Access)?;
            self.write_counter(c, 0)?;
        }
        self.claimed = self.claimed.difference(self.guest);
        self.guest = CounterSet::EMPTY;
        self.guest_ctl = [0; MAX_COUNTERS as usize];
        Ok(())
    }

    /// Loads `g` onto the reserved counters and starts them, as the last
    /// step before `VMRUN` (traffic: module documentation): the controls
    /// that changed (GuestOnly set, HostOnly clear), every value, the
    /// overflow status through `PerfCntrGlobalStatusSet`, then
    /// `PerfCntrGlobalCtl` with the host's bits and the guest's enables.
    /// The guest's counters are stopped until that last write (their
    /// `PerfCntrGlobalCtl` bits are clear since the last exit). Interrupts
    /// disabled from here to `VMRUN`. Returns the `PerfCntrGlobalCtl`
    /// written.
    pub fn enter_guest(&mut self, g: &GuestRegisters) -> Result<u64, Error<M::Error>> {
        if self.guest.is_empty() || self.guest_loaded {
            return Err(Error::Config(ConfigError::GuestState));
        }
        for c in self.guest.iter() {
            let i = usize::from(c.index()) % MAX_COUNTERS as usize;
            let want = g.hardware_ctl(c);
            if self.guest_ctl[i] != want {
                self.msr
                    .write_msr(c.ctl(self.extended), want)
                    .map_err(Error::Access)?;
                self.guest_ctl[i] = want;
            }
        }
        for c in self.guest.iter() {
            self.write_counter(c, g.value(c))?;
        }
        let status = g.status.intersection(self.guest);
        if !status.is_empty() {
            self.msr
                .write_msr(PERF_CNTR_GLOBAL_STATUS_SET, status.bits())
                .map_err(Error::Access)?;
        }
        let global = self.host_global().bits() | (g.global_ctl & self.guest.bits());
        self.msr
            .write_msr(PERF_CNTR_GLOBAL_CTL, global)
            .map_err(Error::Access)?;
        self.guest_loaded = true;
        Ok(global)
    }

    /// Stops the guest's counters and saves them into `g`, as the first
    /// step after `#VMEXIT`: `PerfCntrGlobalCtl` written with the host's
    /// bits only, the guest's overflow status read and acknowledged
    /// through `PerfCntrGlobalStatusClr` (the host's PMI handler never
    /// sees it), its values read. `global_passed`: the guest writes
    /// `PerfCntrGlobalCtl` without a `#VMEXIT`
    /// ([`crate::virt::amd::PassThrough::rule`]), so its enables are read
    /// back first (1 RDMSR) into `g`. The controls are not read: the
    /// guest's writes to them trap, so `g` has them already. Returns the
    /// guest's counters that overflowed while it ran (status bits it did
    /// not have at entry): its PMI.
    pub fn exit_guest(
        &mut self,
        g: &mut GuestRegisters,
        global_passed: bool,
    ) -> Result<CounterSet, Error<M::Error>> {
        if !self.guest_loaded {
            return Err(Error::Config(ConfigError::GuestState));
        }
        if global_passed {
            let v = self
                .msr
                .read_msr(PERF_CNTR_GLOBAL_CTL)
                .map_err(Error::Access)?;
            g.global_ctl = v & self.guest.bits();
        }
        self.write_global()?;
        self.guest_loaded = false;
        let raw = self
            .msr
            .read_msr(PERF_CNTR_GLOBAL_STATUS)
            .map_err(Error::Access)?;
        let status = CounterSet::from_bits_truncate(raw).intersection(self.guest);
        if !status.is_empty() {
            self.msr
                .write_msr(PERF_CNTR_GLOBAL_STATUS_CLR, status.bits())
                .map_err(Error::Access)?;
        }
        for c in self.guest.iter() {
            let v = self
                .msr
                .read_msr(c.ctr(self.extended))
                .map_err(Error::Access)?;
            g.set_value(c, v);
        }
        let new = status.difference(g.status.intersection(self.guest));
        g.status = status;
        Ok(new)
    }

    /// The host's `PerfCntrGlobalCtl` bits as [`AmdDriver::enter_guest`]
    /// and [`AmdDriver::exit_guest`] write them: the driver's running
    /// counters (none while a snapshot is taken), the contexts' and the
    /// firmware's.
    pub fn host_global(&self) -> CounterSet {
        let ours = if self.stopped {
            CounterSet::EMPTY
        } else {
            self.running
        };
        ours.union(self.firmware_global).union(self.contexts)
    }
}

//! The driver's last branch records: enabling them with a filter and a
//! mode, disabling them, and saving and restoring a task's records (the
//! hook a kernel's task switch calls). The records ride on the samples of
//! the counters configured with [`CounterConfig::branches`]; the PMI
//! handler reads them ([`crate::arch::archperf::pmi`]).
//!
//! | operation | RDMSR | WRMSR |
//! |---|---|---|
//! | [`ArchPerfDriver::enable_lbr`], legacy stack | 1 (the first time) | 2 or 3 per record (FROM, TO, INFO zeroed), `MSR_LBR_SELECT`, `IA32_DEBUGCTL` |
//! | [`ArchPerfDriver::enable_lbr`], architectural LBR | 1 (the first time) | `IA32_LBR_DEPTH` (which zeroes the records), `IA32_DEBUGCTL`, `IA32_LBR_CTL` |
//! | [`ArchPerfDriver::disable_lbr`] | 0 | `IA32_DEBUGCTL` (architectural LBR: and `IA32_LBR_CTL`) |
//! | [`ArchPerfDriver::save_lbr`] | legacy: 1 + 2-3 per record up to the first empty one; architectural: 3 per record | 1: recording stopped (`IA32_DEBUGCTL` or `IA32_LBR_CTL`) |
//! | [`ArchPerfDriver::restore_lbr`] | 0 | legacy: 2-3 per record (every record: the saved ones and zeros), `MSR_LASTBRANCH_TOS`, `IA32_DEBUGCTL`; architectural: `IA32_LBR_DEPTH`, 3 per saved record, `IA32_LBR_CTL` |
//!
//! [`CounterConfig::branches`]: super::CounterConfig::branches

use super::{ArchPerfDriver, ConfigError, Error};
use crate::access::{MsrBackend, MsrOps};
use crate::arch::archperf::lbr::{
    BranchFilter, BranchStack, DebugCtl, FlaggedFrom, IA32_DEBUGCTL, IA32_LBR_CTL, IA32_LBR_DEPTH,
    Lbr, LbrCtl, LbrDepth, LbrOptions, LbrSnapshot, MSR_LASTBRANCH_TOS, MSR_LBR_SELECT,
    RecordFormat, read_stack,
};
use crate::counter::Owner;

use super::EnabledLbr;

impl<O: Owner, M: MsrBackend> ArchPerfDriver<'_, O, M> {
    /// The last branch records this CPU has, as the driver drives them
    /// ([`Lbr::of`]); `None` if it has none the crate drives.
    pub fn lbr(&self) -> Option<Lbr> {
        Lbr::of(&self.cpu)
    }

    /// The options the LBR runs with, while this driver has it enabled.
    pub fn lbr_options(&self) -> Option<LbrOptions> {
        self.lbr.map(|e| e.options)
    }

    /// Records branches as `options` say, frozen on every PMI
    /// (`IA32_DEBUGCTL.FREEZE_LBRS_ON_PMI`), from now on: the records
    /// zeroed, the filter and mode written, recording started (the module
    /// documentation has the traffic). A counter configured with
    /// [`CounterConfig::branches`](super::CounterConfig::branches) then
    /// carries them on each sample. Enabled again with other options
    /// while no counter carries them, it starts afresh.
    ///
    /// Refused where the CPU has no LBR the crate drives
    /// ([`ConfigError::LbrUnavailable`]), for a filter that asks for
    /// nothing or that the CPU cannot apply ([`ConfigError::LbrFilter`]:
    /// call-stack mode takes near calls and returns only), for call-stack
    /// mode where there is none ([`ConfigError::NoCallStack`]), and while a
    /// counter carries the records ([`ConfigError::LbrBusy`]).
    ///
    /// Linux leaves `FREEZE_LBRS_ON_PMI` clear in call-stack mode ("PMI
    /// near call/return instructions may cause superfluous
    /// increase/decrease of LBR_TOS", and it records user space only
    /// there); the crate freezes in every mode, because it reads the
    /// records from a ring-0 handler whose own calls an unfrozen kernel
    /// call stack would record (the guide's profiling page).
    pub fn enable_lbr(&mut self, options: LbrOptions) -> Result<(), Error<M::Error>> {
        let lbr = Lbr::of(&self.cpu).ok_or(Error::Config(ConfigError::LbrUnavailable))?;
        if !self.branch_counters.is_empty() {
            return Err(Error::Config(ConfigError::LbrBusy));
        }
        let filter = options.filter;
        let nothing = !(filter.user() || filter.kernel()) || filter.kinds() == 0;
        let call_stack_kinds = filter.kinds() == BranchFilter::CALL_STACK.kinds();
        if nothing || !lbr.filters(filter) || (options.call_stack && !call_stack_kinds) {
            return Err(Error::Config(ConfigError::LbrFilter));
        }
        if options.call_stack && !lbr.call_stack() {
            return Err(Error::Config(ConfigError::NoCallStack));
        }
        let found = match self.lbr {
            Some(e) => e.found,
            None => DebugCtl::from_bits(self.msr.read_msr(IA32_DEBUGCTL).map_err(Error::Access)?),
        };
        // Recording off while the records and the filter change (a
        // re-enable), and the handler told only once they are set.
        self.pmu.pmi().set_lbr(None, 0);
        let written = match lbr {
            Lbr::Legacy { generation, .. } => {
                if let Some(e) = self.lbr {
                    self.write_msr(IA32_DEBUGCTL, e.found.bits())?;
                }
                for x in 0..generation.depth {
                    let x = u32::from(x);
                    self.write_msr(generation.from + x, 0)?;
                    self.write_msr(generation.to + x, 0)?;
                    if let Some(info) = generation.info {
                        self.write_msr(info + x, 0)?;
                    }
                }
                self.write_msr(MSR_LBR_SELECT, filter.select(options.call_stack).bits())?;
                let written = found.with_lbr(true).with_freeze_lbrs_on_pmi(true);
                self.write_msr(IA32_DEBUGCTL, written.bits())?;
                written
            }
            Lbr::Architectural(a) => {
                if self.lbr.is_some() {
                    self.write_msr(IA32_LBR_CTL, 0)?;
                }
                // A write of the depth zeroes every record.
                let depth = LbrDepth::from_bits(0).with_depth(u16::from(a.depth));
                self.write_msr(IA32_LBR_DEPTH, depth.bits())?;
                let written = found.with_freeze_lbrs_on_pmi(true);
                self.write_msr(IA32_DEBUGCTL, written.bits())?;
                self.write_msr(IA32_LBR_CTL, filter.ctl(options.call_stack).bits())?;
                written
            }
        };
        self.lbr = Some(EnabledLbr {
            lbr,
            options,
            found,
            written,
        });
        self.pmu.pmi().set_lbr(
            Some(lbr.plan(options.call_stack, self.cpu.version())),
            written.bits(),
        );
        Ok(())
    }

    /// Stops recording branches: `IA32_DEBUGCTL` as the driver found it
    /// (and `IA32_LBR_CTL` 0 on architectural LBR). Refused while a counter
    /// carries the records ([`ConfigError::LbrBusy`]);
    /// [`ConfigError::LbrOff`] if the LBR is not enabled.
    pub fn disable_lbr(&mut self) -> Result<(), Error<M::Error>> {
        let e = self.lbr.ok_or(Error::Config(ConfigError::LbrOff))?;
        if !self.branch_counters.is_empty() {
            return Err(Error::Config(ConfigError::LbrBusy));
        }
        self.pmu.pmi().set_lbr(None, 0);
        if let Lbr::Architectural(_) = e.lbr {
            self.write_msr(IA32_LBR_CTL, 0)?;
        }
        self.write_msr(IA32_DEBUGCTL, e.found.bits())?;
        self.lbr = None;
        Ok(())
    }

    /// The task-switch hook's first half: stops recording and reads the
    /// records, to be restored when the task runs again
    /// ([`ArchPerfDriver::restore_lbr`], on this or another logical
    /// processor with the same LBR). Call it at switch-out with
    /// interrupts disabled, before the switch code's own branches: from
    /// here until the restore nothing is recorded (the next task's restore
    /// starts recording again; a task without records starts on zeroed
    /// ones, [`ArchPerfDriver::enable_lbr`]). [`ConfigError::LbrOff`] if
    /// the LBR is not enabled.
    pub fn save_lbr(&mut self) -> Result<LbrSnapshot, Error<M::Error>> {
        let e = self.lbr.ok_or(Error::Config(ConfigError::LbrOff))?;
        self.stop_recording(&e)?;
        let plan = e.lbr.plan(e.options.call_stack, self.cpu.version());
        let mut stack = BranchStack::for_plan(plan);
        let tos = read_stack(plan, &mut self.msr, &mut stack).map_err(Error::Access)?;
        Ok(LbrSnapshot { stack, tos })
    }

    /// The task-switch hook's second half: writes a task's saved records
    /// back and records again (call it at switch-in, after
    /// [`ArchPerfDriver::save_lbr`] saved the previous task's). The records
    /// past the saved ones are zeroed, so a call stack continues exactly
    /// where the task left it. [`ConfigError::LbrSnapshotMismatch`] for a
    /// snapshot of another format, depth or mode; [`ConfigError::LbrOff`]
    /// if the LBR is not enabled.
    ///
    /// On record format 4 without TSX a WRMSR takes FROM bits 62:61 as the
    /// address's sign extension (Linux's `lbr_from_signext_quirk_wr`): the
    /// driver writes them so there ([`FlaggedFrom::tsx_less`]).
    pub fn restore_lbr(&mut self, snapshot: &LbrSnapshot) -> Result<(), Error<M::Error>> {
        let e = self.lbr.ok_or(Error::Config(ConfigError::LbrOff))?;
        let plan = e.lbr.plan(e.options.call_stack, self.cpu.version());
        let s = &snapshot.stack;
        let fresh = BranchStack::for_plan(plan);
        if (s.format(), s.is_call_stack(), s.depth())
            != (fresh.format(), fresh.is_call_stack(), fresh.depth())
        {
            return Err(Error::Config(ConfigError::LbrSnapshotMismatch));
        }
        let tsx_less =
            !self.cpu.lbr.tsx && matches!(s.format(), RecordFormat::Legacy(f) if f.number() == 4);
        self.stop_recording(&e)?;
        let depth = plan.depth();
        let records = if plan.arch() {
            // A write of the depth zeroes every record.
            let depth = LbrDepth::from_bits(0).with_depth(u16::from(depth));
            self.write_msr(IA32_LBR_DEPTH, depth.bits())?;
            s.len() as u8
        } else {
            depth
        };
        for i in 0..records {
            let (from, to, info) = plan.msrs(plan.record(snapshot.tos, i));
            let (f, t, n) = s.words(usize::from(i)).unwrap_or((0, 0, 0));
            let f = if tsx_less && f != 0 {
                FlaggedFrom::from_bits(f).tsx_less().bits()
            } else {
                f
            };
            self.write_msr(from, f)?;
            self.write_msr(to, t)?;
            if info != 0 {
                self.write_msr(info, n)?;
            }
        }
        match e.lbr {
            Lbr::Legacy { .. } => {
                self.write_msr(MSR_LASTBRANCH_TOS, u64::from(snapshot.tos))?;
                self.write_msr(IA32_DEBUGCTL, e.written.bits())
            }
            Lbr::Architectural(_) => self.write_msr(
                IA32_LBR_CTL,
                e.options.filter.ctl(e.options.call_stack).bits(),
            ),
        }
    }

    /// Stops recording (1 WRMSR): `IA32_DEBUGCTL` without `LBR`, or
    /// `IA32_LBR_CTL` without `LBREn`.
    fn stop_recording(&mut self, e: &EnabledLbr) -> Result<(), Error<M::Error>> {
        match e.lbr {
            Lbr::Legacy { .. } => self.write_msr(IA32_DEBUGCTL, e.written.with_lbr(false).bits()),
            Lbr::Architectural(_) => {
                let ctl = e.options.filter.ctl(e.options.call_stack);
                self.write_msr(
                    IA32_LBR_CTL,
                    LbrCtl::from_bits(ctl.bits()).with_lbren(false).bits(),
                )
            }
        }
    }

    fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Error<M::Error>> {
        self.msr.write_msr(msr, value).map_err(Error::Access)
    }
}

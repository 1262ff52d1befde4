//! The AMD core PMU's steps of the context-switch core
//! ([`crate::arch::Switch`]): counters set aside for contexts run beside
//! the driver's own.
//!
//! | step | PerfMonV2 | before it |
//! |---|---|---|
//! | stop | `PerfCntrGlobalCtl` (one write for every counter that stops) | `PERF_CTLn` without `EN` |
//! | save | RDPMC; a sampling counter past its overflow: its status bit cleared (`PerfCntrGlobalStatusClr`) and its PMI owed, as a halt does | RDPMC; a sampling counter past its overflow: its PMI owed |
//! | control | `PERF_CTLn` (`EN` set: the counter waits for its global bit) | `PERF_CTLn` with `EN` |
//! | value | `PERF_CTRn` (`PERF_LEGACY_CTRn` without PerfCtrExtCore) | the same |
//! | start | `PerfCntrGlobalCtl` (one write) | the control |
//!
//! A sampling counter leaves service as a halt takes it out
//! ([`crate::arch::amd::pmi`]'s window): marked before it is disarmed, and
//! once read, a late PMI owed per period it was past its last service, so
//! the PMI that arrives after the switch is claimed as late rather than
//! found spurious.

use super::{AmdCore, AmdDriver, CounterConfig, Error, Programmed};
use crate::access::{MsrBackend, MsrOps};
use crate::arch::amd::msrs::{Counter, CounterSet, PERF_CNTR_GLOBAL_STATUS_CLR};
use crate::arch::{Saved, peeked};
use crate::counter::Owner;
use crate::sampling::SampleAfter;
use crate::sealed::Token;

impl<O: Owner, M: MsrBackend> AmdDriver<'_, O, M> {
    /// Counter `n`, present and not the firmware's.
    fn context_counter(&self, n: u8) -> Result<Counter, Error<M::Error>> {
        let c = self.counter(n)?;
        if self.firmware.contains(c) {
            return Err(Error::Config(super::ConfigError::UsedByFirmware(n)));
        }
        Ok(c)
    }
}

impl<O: Owner, M: MsrBackend> crate::arch::Switch<AmdCore> for AmdDriver<'_, O, M> {
    fn ctx_reserve(&mut self, _: Token, n: u8) -> Result<(), Self::Error> {
        let c = self.context_counter(n)?;
        if self.claimed.contains(c) {
            return Err(Error::Config(super::ConfigError::CounterClaimed(n)));
        }
        self.claimed = self.claimed.with(c);
        self.pmu.pmi().set_sampling(c, None, self.extended);
        Ok(())
    }

    fn ctx_unreserve(
        &mut self,
        t: Token,
        n: u8,
        images: &Programmed,
        running: bool,
    ) -> Result<(), Self::Error> {
        let c = self.counter(n)?;
        self.pmu.pmi().arm(c, false);
        self.msr
            .write_msr(c.ctl(self.extended), 0)
            .map_err(Error::Access)?;
        if running && self.v2 {
            self.ctx_stop(t, n, images)?;
            self.ctx_flush(t)?;
        }
        self.write_counter(c, 0)?;
        self.pmu.pmi().set_sampling(c, None, self.extended);
        self.claimed = self.claimed.without(c);
        Ok(())
    }

    fn ctx_images(&self, n: u8, config: &CounterConfig) -> Result<Programmed, Self::Error> {
        let c = self.context_counter(n)?;
        Ok(self.image_of(c, config)?)
    }

    /// The family, model and the event map's choice, and PerfMonV2 (whose
    /// images carry `EN`).
    fn ctx_key(&self) -> u64 {
        u64::from(self.cpu.family)
            | u64::from(self.cpu.model) << 16
            | u64::from(self.v2) << 24
            | u64::from(self.extended) << 25
    }

    fn ctx_sampling(images: &Programmed) -> Option<SampleAfter> {
        images.sampling
    }

    fn ctx_global(&self) -> bool {
        self.v2
    }

    fn ctx_disarm(&mut self, _: Token, n: u8, images: &Programmed) {
        if let (Some(c), Some(_)) = (Counter::new(n), images.sampling) {
            self.pmu.pmi().open_window(c);
            self.pmu.pmi().arm(c, false);
        }
    }

    fn ctx_stop(&mut self, _: Token, n: u8, images: &Programmed) -> Result<(), Self::Error> {
        let c = self.counter(n)?;
        if self.v2 {
            self.contexts = self.contexts.without(c);
            self.global_owed = true;
            return Ok(());
        }
        self.msr
            .write_msr(c.ctl(self.extended), images.ctl.with_enable(false).bits())
            .map_err(Error::Access)
    }

    fn ctx_save(&mut self, _: Token, n: u8, images: &Programmed) -> Result<Saved, Self::Error> {
        let c = self.counter(n)?;
        let raw = self.msr.rdpmc(c.rdpmc()).map_err(Error::Access)?;
        let Some(s) = images.sampling else {
            return Ok(Saved {
                raw,
                ..Saved::default()
            });
        };
        let (owed, _) = s.split(raw);
        self.pmu.pmi().close_window(c, owed);
        if owed > 0 && self.v2 {
            self.msr
                .write_msr(
                    PERF_CNTR_GLOBAL_STATUS_CLR,
                    CounterSet::EMPTY.with(c).bits(),
                )
                .map_err(Error::Access)?;
        }
        Ok(Saved {
            raw,
            serviced: self.pmu.pmi().periods(n),
            owed,
        })
    }

    fn ctx_peek(&mut self, _: Token, n: u8, images: &Programmed) -> Result<Saved, Self::Error> {
        let c = self.counter(n)?;
        let raw = self.msr.rdpmc(c.rdpmc()).map_err(Error::Access)?;
        Ok(peeked(raw, images.sampling, self.pmu.pmi().periods(n)))
    }

    fn ctx_control(&mut self, _: Token, n: u8, images: &Programmed) -> Result<(), Self::Error> {
        let c = self.counter(n)?;
        // Before PerfMonV2 the enable is the start (the image has it clear).
        self.msr
            .write_msr(c.ctl(self.extended), images.ctl.with_enable(true).bits())
            .map_err(Error::Access)
    }

    fn ctx_load(
        &mut self,
        _: Token,
        n: u8,
        images: &Programmed,
        value: u64,
    ) -> Result<(), Self::Error> {
        let c = self.counter(n)?;
        self.pmu
            .pmi()
            .set_sampling(c, images.sampling, self.extended);
        self.write_counter(c, value)
    }

    fn ctx_start(&mut self, _: Token, n: u8, _images: &Programmed) {
        if let Some(c) = Counter::new(n) {
            self.contexts = self.contexts.with(c);
            self.global_owed = true;
        }
    }

    fn ctx_flush(&mut self, _: Token) -> Result<(), Self::Error> {
        if self.global_owed {
            self.global_owed = false;
            self.write_global()?;
        }
        Ok(())
    }

    fn ctx_arm(&mut self, _: Token, n: u8, images: &Programmed) {
        if let (Some(c), Some(_)) = (Counter::new(n), images.sampling) {
            self.pmu.pmi().arm(c, true);
        }
    }
}

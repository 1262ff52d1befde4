//! The architectural PMU's steps of the context-switch core
//! ([`crate::arch::Switch`]): counters set aside for contexts run beside
//! the driver's own, their `GLOBAL_CTRL` bits kept in every write.
//!
//! | step | version 2 and later | version 1 |
//! |---|---|---|
//! | stop | `GLOBAL_CTRL` (one write for every counter that stops) | `PERFEVTSELx` without EN |
//! | save | RDPMC; a sampling counter past its overflow: its status bit acknowledged (`IA32_PERF_GLOBAL_OVF_CTRL`), as a halt does | RDPMC |
//! | control | `PERFEVTSELx` (EN set: the counter waits for its `GLOBAL_CTRL` bit), a fixed counter's field of `IA32_FIXED_CTR_CTRL` (one write for all) | `PERFEVTSELx` with EN |
//! | value | `IA32_PMCx` (`IA32_A_PMCx` with full-width writes) or `IA32_FIXED_CTRx` | the same |
//! | start | `GLOBAL_CTRL` (one write) | the control |

use super::{ArchPerfDriver, ArchPerfmon, ConfigError, CounterConfig, Error, Programmed};
use crate::access::{MsrBackend, MsrOps};
use crate::arch::archperf::msrs::{Counter, CounterSet, IA32_PERF_GLOBAL_OVF_CTRL};
use crate::arch::{Saved, peeked};
use crate::counter::Owner;
use crate::sampling::SampleAfter;
use crate::sealed::Token;

impl<O: Owner, M: MsrBackend> ArchPerfDriver<'_, O, M> {
    /// Counter `n`, present and not the firmware's.
    fn context_counter(&self, n: u8) -> Result<Counter, Error<M::Error>> {
        let c = self.counter(n)?;
        if self.firmware.contains(c) {
            return Err(Error::Config(ConfigError::UsedByFirmware(n)));
        }
        Ok(c)
    }
}

impl<O: Owner, M: MsrBackend> crate::arch::Switch<ArchPerfmon> for ArchPerfDriver<'_, O, M> {
    fn ctx_reserve(&mut self, _: Token, n: u8) -> Result<(), Self::Error> {
        let c = self.context_counter(n)?;
        if self.claimed.contains(c) {
            return Err(Error::Config(ConfigError::CounterClaimed(n)));
        }
        self.claimed = self.claimed.with(c);
        self.pmu
            .pmi()
            .set_sampling(c, None, self.cpu.full_width_write);
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
        if running {
            self.ctx_stop(t, n, images)?;
            self.ctx_flush(t)?;
        }
        self.write_control(c, super::PerfEvtSel::new(0, 0), super::FixedCtl::OFF, false)?;
        self.write_counter(c, 0)?;
        self.pmu
            .pmi()
            .set_sampling(c, None, self.cpu.full_width_write);
        self.claimed = self.claimed.without(c);
        Ok(())
    }

    fn ctx_images(&self, n: u8, config: &CounterConfig) -> Result<Programmed, Self::Error> {
        let c = self.context_counter(n)?;
        if config.event.precise > 0 {
            return Err(Error::Config(ConfigError::PreciseInContext));
        }
        Ok(self.image_of(c, config)?)
    }

    /// The display model, the hybrid core type, the counter widths and
    /// full-width writes: what the images and their sample-after values
    /// depend on.
    fn ctx_key(&self) -> u64 {
        let core = match self.cpu.core_type {
            None => 0,
            Some(crate::detect::CoreType::Atom) => 0x120,
            Some(crate::detect::CoreType::Core) => 0x140,
            Some(crate::detect::CoreType::Other(t)) => u64::from(t),
        };
        u64::from(self.cpu.model)
            | core << 8
            | u64::from(self.cpu.leaf.general_width()) << 20
            | u64::from(self.cpu.leaf.fixed_width()) << 28
            | u64::from(self.cpu.full_width_write) << 36
            | u64::from(self.cpu.version()) << 40
    }

    fn ctx_sampling(images: &Programmed) -> Option<SampleAfter> {
        images.sampling
    }

    fn ctx_global(&self) -> bool {
        self.global()
    }

    fn ctx_disarm(&mut self, _: Token, n: u8, images: &Programmed) {
        if let (Some(c), Some(_)) = (Counter::from_index(n), images.sampling) {
            self.pmu.pmi().arm(c, false);
        }
    }

    fn ctx_stop(&mut self, _: Token, n: u8, images: &Programmed) -> Result<(), Self::Error> {
        let c = self.counter(n)?;
        if self.global() {
            self.contexts = self.contexts.without(c);
            self.global_owed = true;
            return Ok(());
        }
        self.write_control(c, images.select.with_enable(false), images.fixed, false)
    }

    fn ctx_save(&mut self, _: Token, n: u8, images: &Programmed) -> Result<Saved, Self::Error> {
        let c = self.counter(n)?;
        let raw = self.msr.rdpmc(c.rdpmc().ecx()).map_err(Error::Access)?;
        let Some(s) = images.sampling else {
            return Ok(Saved {
                raw,
                ..Saved::default()
            });
        };
        let (owed, _) = s.split(raw);
        if owed > 0 && self.global() {
            // Its PMI finds the status bit clear, and nothing of the next
            // context's (module documentation of `crate::arch::Switch`).
            self.msr
                .write_msr(IA32_PERF_GLOBAL_OVF_CTRL, CounterSet::EMPTY.with(c).bits())
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
        let raw = self.msr.rdpmc(c.rdpmc().ecx()).map_err(Error::Access)?;
        Ok(peeked(raw, images.sampling, self.pmu.pmi().periods(n)))
    }

    fn ctx_control(&mut self, _: Token, n: u8, images: &Programmed) -> Result<(), Self::Error> {
        let c = self.counter(n)?;
        if c.is_fixed() {
            self.fixed_ctrl = self.fixed_ctrl.with(c.number(), images.fixed);
            self.fixed_owed = true;
            return Ok(());
        }
        // Version 1: the enable is the start (its image has EN clear).
        let select = images.select.with_enable(true);
        self.write_control(c, select, images.fixed, false)
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
            .set_sampling(c, images.sampling, self.cpu.full_width_write);
        self.write_counter(c, value)
    }

    fn ctx_start(&mut self, _: Token, n: u8, _images: &Programmed) {
        if let Some(c) = Counter::from_index(n) {
            self.contexts = self.contexts.with(c);
            self.global_owed = true;
        }
    }

    fn ctx_flush(&mut self, _: Token) -> Result<(), Self::Error> {
        if self.fixed_owed {
            self.fixed_owed = false;
            self.write_fixed_ctrl()?;
        }
        if self.global_owed {
            self.global_owed = false;
            self.write_global()?;
        }
        Ok(())
    }

    fn ctx_arm(&mut self, _: Token, n: u8, images: &Programmed) {
        if let (Some(c), Some(_)) = (Counter::from_index(n), images.sampling) {
            self.pmu.pmi().arm(c, true);
        }
    }
}

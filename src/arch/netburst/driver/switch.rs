//! NetBurst's steps of the context-switch core ([`crate::arch::Switch`]):
//! counters set aside for a logical processor's tasks, each with the ESCRs
//! that feed it.
//!
//! | step | registers |
//! |---|---|
//! | stop | the CCCR without `ENABLE` (its image, `OVF` clear: a pending overflow's PMI withdrawn, as a halt withdraws it) |
//! | save | RDPMC; a running counter found past its overflow: its CCCR rewritten without `OVF` (the handler's clear; else its PMI would be raised again for the next task's counter) |
//! | control | the ESCR (the event, its masks, this logical processor's `T*_OS`/`T*_USR`), then the CCCR with `ENABLE` (active thread 11b, `OVF_PMI_T0` or `_T1` for this logical processor) |
//! | value | the counter |
//!
//! A NetBurst counter's control is two registers, so a counter that starts
//! costs 3 writes where the other architectures' cost 2.
//!
//! # Thread qualification per task
//!
//! The two logical processors of a Hyper-Threading package share the
//! counters and ESCRs (SDM 18.16); an ESCR counts for a logical processor
//! through its `T0_*` or `T1_*` bits and a CCCR interrupts it through
//! `OVF_PMI_T0` or `_T1`. A task's event is kept without a logical
//! processor; the driver of the logical processor it runs on qualifies it
//! ([`crate::arch::Switch::ctx_images`]: its own `T*` bits, its own PMI
//! bit, on an ESCR set aside with its counters), so a task that moves to
//! the other logical processor is placed again there, with the other
//! thread's bits ([`crate::arch::Switch::ctx_key`] is the logical
//! processor).
//!
//! # ESCRs
//!
//! A counter set aside claims, for the package, every free ESCR that feeds
//! it on this model (the claims protocol of [`super::super::NetBurstPmu`]):
//! an event is placed on a counter with an ESCR of its own, from those, that
//! allows it (its configured ESCR first). The ESCRs stay the contexts'
//! until the last counter they feed is given back.

use super::{
    ConfigError, CounterConfig, Error, IDLE_CCCR, NetBurst, NetBurstDriver, Programmed, counter_at,
};
use crate::access::{MsrBackend, MsrOps};
use crate::arch::netburst::LogicalProcessor;
use crate::arch::netburst::msrs::{Counter, CounterSet, Escr, EscrSet};
use crate::arch::{Saved, peeked};
use crate::counter::{Arch, Owner, StateTag};
use crate::sampling::SampleAfter;
use crate::sealed::Token;

impl<O: Owner, M: MsrBackend> NetBurstDriver<'_, O, M> {
    /// The ESCRs set aside for contexts that feed counter `c` and no other
    /// counter set aside but `c`.
    fn escrs_only_for(&self, c: Counter) -> EscrSet {
        let others = self.context_counters.without(c);
        let mut set = EscrSet::EMPTY;
        for e in Escr::ALL {
            if self.context_escrs.contains(e) && e.feeds(c) && !others.iter().any(|o| e.feeds(o)) {
                set = set.with(e);
            }
        }
        set
    }

    /// `config` for a context on this driver's logical processor: on the
    /// first ESCR set aside for contexts that feeds counter `c` and allows
    /// the event, the configured one first.
    fn context_config(&self, c: Counter, config: &CounterConfig) -> Option<CounterConfig> {
        let lp = self.only.unwrap_or(config.lp);
        let fits = |e: Escr| self.context_escrs.contains(e) && e.feeds(c) && config.event.allows(e);
        let escr = if fits(config.escr) {
            config.escr
        } else {
            Escr::ALL.into_iter().find(|&e| fits(e))?
        };
        Some(CounterConfig {
            escr,
            lp,
            ..*config
        })
    }
}

impl<O: Owner, M: MsrBackend> crate::arch::Switch<NetBurst> for NetBurstDriver<'_, O, M> {
    fn ctx_reserve(&mut self, _: Token, n: u8) -> Result<(), Self::Error> {
        let c = counter_at(n)?;
        let counter_bit = CounterSet::EMPTY.with(c).bits();
        self.pmu
            .claims()
            .claim(counter_bit, 0)
            .map_err(|_| Error::Config(ConfigError::CounterClaimed(c)))?;
        for e in Escr::ALL {
            if e.feeds(c) && e.available_on(self.model) && !self.context_escrs.contains(e) {
                let escr_bit = EscrSet::EMPTY.with(e).bits();
                if self.pmu.claims().claim(0, escr_bit).is_ok() {
                    self.context_escrs = self.context_escrs.with(e);
                }
            }
        }
        self.claimed = self.claimed.with(c);
        self.context_counters = self.context_counters.with(c);
        self.images[usize::from(n) % 18] = NetBurst::UNPROGRAMMED;
        self.pmu.pmi().set_sampling(n, None);
        Ok(())
    }

    fn ctx_unreserve(
        &mut self,
        _: Token,
        n: u8,
        images: &Programmed,
        _running: bool,
    ) -> Result<(), Self::Error> {
        let c = counter_at(n)?;
        self.pmu.pmi().disarm(images.lp, c);
        self.write_cccr(n, IDLE_CCCR)?;
        self.write_counter(n, 0)?;
        self.pmu.pmi().set_sampling(n, None);
        let escrs = self.escrs_only_for(c);
        self.claimed = self.claimed.without(c);
        self.context_counters = self.context_counters.without(c);
        self.context_escrs = self.context_escrs.difference(escrs);
        // Last: from here the other drivers of the package may claim them.
        let counter_bit = CounterSet::EMPTY.with(c).bits();
        self.pmu.claims().release(counter_bit, escrs.bits());
        Ok(())
    }

    fn ctx_images(&self, n: u8, config: &CounterConfig) -> Result<Programmed, Self::Error> {
        let c = counter_at(n)?;
        if !self.context_counters.contains(c) {
            return Err(Error::Config(ConfigError::CounterClaimed(c)));
        }
        if config.pebs.is_some() || config.force_ovf || config.event.touches_tagging() {
            return Err(Error::Config(ConfigError::NotInContext));
        }
        let config = self
            .context_config(c, config)
            .ok_or(Error::Config(ConfigError::NoContextEscr))?;
        let p = self.build_programmed(n, &config)?;
        if p.tagged || p.escr_tags {
            return Err(Error::Config(ConfigError::NotInContext));
        }
        Ok(p)
    }

    /// The model and the logical processor served: a task's images carry
    /// its thread's bits.
    fn ctx_key(&self) -> u64 {
        let lp = match self.only {
            None => 0,
            Some(LogicalProcessor::T0) => 1,
            Some(LogicalProcessor::T1) => 2,
        };
        u64::from(self.model) | lp << 8 | u64::from(self.hyper_threading) << 16
    }

    fn ctx_sampling(images: &Programmed) -> Option<SampleAfter> {
        images.sampling
    }

    fn ctx_global(&self) -> bool {
        // NetBurst has no global enable (SDM 18.15): each CCCR's ENABLE.
        false
    }

    /// Two events of one context on one ESCR would write it twice.
    fn ctx_conflict(a: &Programmed, b: &Programmed) -> bool {
        a.escr.is_some() && a.escr == b.escr
    }

    fn ctx_disarm(&mut self, _: Token, n: u8, images: &Programmed) {
        if let Some(c) = Counter::from_index(n) {
            self.pmu.pmi().disarm(images.lp, c);
        }
    }

    fn ctx_stop(&mut self, _: Token, n: u8, images: &Programmed) -> Result<(), Self::Error> {
        self.write_cccr(n, images.cccr.bits())
    }

    fn ctx_save(&mut self, _: Token, n: u8, images: &Programmed) -> Result<Saved, Self::Error> {
        let raw = self.msr.rdpmc(u32::from(n)).map_err(Error::Access)?;
        let Some(s) = images.sampling else {
            return Ok(Saved {
                raw,
                ..Saved::default()
            });
        };
        let (owed, _) = s.split(raw);
        if owed > 0 {
            // A stopped counter's CCCR was written without `OVF` already;
            // rewriting the running image clears it the same way.
            self.write_cccr(n, images.cccr_for(StateTag::Enabled).bits())?;
        }
        Ok(Saved {
            raw,
            serviced: self.pmu.pmi().periods(n),
            owed,
        })
    }

    fn ctx_peek(&mut self, _: Token, n: u8, images: &Programmed) -> Result<Saved, Self::Error> {
        let raw = self.msr.rdpmc(u32::from(n)).map_err(Error::Access)?;
        Ok(peeked(raw, images.sampling, self.pmu.pmi().periods(n)))
    }

    fn ctx_control(&mut self, _: Token, n: u8, images: &Programmed) -> Result<(), Self::Error> {
        let escr = images
            .escr
            .ok_or(Error::Config(ConfigError::NoContextEscr))?;
        self.msr
            .write_msr(escr.msr(), images.escr_value)
            .map_err(Error::Access)?;
        self.write_cccr(n, images.cccr_for(StateTag::Enabled).bits())
    }

    fn ctx_load(
        &mut self,
        _: Token,
        n: u8,
        images: &Programmed,
        value: u64,
    ) -> Result<(), Self::Error> {
        self.pmu.pmi().set_sampling(n, images.sampling);
        self.write_counter(n, value)
    }

    fn ctx_start(&mut self, _: Token, _n: u8, _images: &Programmed) {}

    fn ctx_flush(&mut self, _: Token) -> Result<(), Self::Error> {
        Ok(())
    }

    fn ctx_arm(&mut self, _: Token, n: u8, images: &Programmed) {
        if let (Some(c), Some(_)) = (Counter::from_index(n), images.sampling) {
            let image = images.cccr_for(StateTag::Enabled);
            self.pmu.pmi().arm(images.lp, c, image, false);
        }
    }
}

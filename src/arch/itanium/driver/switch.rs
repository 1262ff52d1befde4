//! Itanium's steps of the context-switch core ([`crate::arch::Switch`]):
//! counters set aside for contexts, started and stopped by their own
//! `plm` as every Itanium counter is ([`super`]: "Starting and stopping
//! one counter").
//!
//! | step | registers |
//! |---|---|
//! | stop | the counter's PMC with `plm` 0 (first-generation Itanium: its PMD read first, as it is not preserved while `plm` is 0) |
//! | save | its PMD (unless the stop read it); a sampling counter past its overflow: the overflow withdrawn from PMC0 (a read and a write: PMC0 has no atomic update), as a release withdraws it |
//! | control | its PMC with `plm` (the start) |
//! | value | its PMD |
//!
//! # Where the shape does not fit
//!
//! * **An overflow freezes every counter.** A sampling counter's
//!   overflow with `oi` sets PMC0.fr, which stops the whole PMU until the
//!   handler unfreezes it (SDM Vol. 2 7.2.1): a task's overflow stops the
//!   kernel's CPU-wide counters too, for as long as its interrupt takes,
//!   and one left pending at a switch-out has stopped them until the
//!   switch withdraws it. The other architectures' overflows stop nothing.
//! * **No capture unit per task.** The I-EAR, D-EAR and branch trace
//!   buffer are one per processor, their captures in their own PMDs:
//!   refused in a context ([`super::ConfigError::NotInContext`]).
//! * **PSR.up is already per task.** Itanium's own way of monitoring one
//!   process is a user monitor (`pm` = 0) enabled by PSR.up, which the
//!   kernel saves and restores with the task's PSR: its counters count only
//!   while the task runs, with no PMU access at a switch, but they count
//!   every such task's events on one set of PMDs; a count per task needs
//!   the PMDs switched, which is what this does.
//! * The switch must not be interrupted by the overflow handler (PMC0's
//!   read-modify-write): a kernel calls it with PSR.i clear, which holds
//!   the NMI vector too (the driver's rule, [`super`]).

use super::{ConfigError, CounterConfig, Error, Itanium, ItaniumDriver, Programmed, pmd};
use crate::access::{PmcPmdBackend, PmcPmdOps};
use crate::arch::itanium::generation::{Counter as HwCounter, Generation};
use crate::arch::itanium::pmi::Captures;
use crate::arch::{Saved, peeked};
use crate::counter::Owner;
use crate::sampling::SampleAfter;
use crate::sealed::Token;

impl<O: Owner, R: PmcPmdBackend> crate::arch::Switch<Itanium> for ItaniumDriver<'_, O, R> {
    fn ctx_reserve(&mut self, _: Token, n: u8) -> Result<(), Self::Error> {
        HwCounter::new(self.generation, n).ok_or(ConfigError::NoSuchCounter(n))?;
        if self.claimed.contains(n) {
            return Err(Error::Config(ConfigError::CounterClaimed(n)));
        }
        self.claimed = self.claimed.with(n);
        self.saved[usize::from(n) % 16] = None;
        self.pmu
            .pmi()
            .set_sampling(n, None, Captures::Nothing, false);
        Ok(())
    }

    fn ctx_unreserve(
        &mut self,
        _: Token,
        n: u8,
        images: &Programmed,
        _running: bool,
    ) -> Result<(), Self::Error> {
        let g = self.generation;
        self.pmu.pmi().arm(n, false);
        Self::reg(self.regs.write_pmc(n, g.pmc(n).map_or(0, |i| i.default)))?;
        Self::reg(self.regs.write_pmd(n, 0))?;
        if images.sampling.is_some() {
            self.clear_pending_overflow(n)?;
        }
        self.saved[usize::from(n) % 16] = None;
        self.pmu
            .pmi()
            .set_sampling(n, None, Captures::Nothing, false);
        self.claimed = self.claimed.without(n);
        Ok(())
    }

    /// The event's image moved to counter `n` ([`super::pmc::CounterPmc::on`],
    /// as the multiplexer moves it), then checked as a configuration is:
    /// an event counts on whichever counter set aside its catalog allows.
    fn ctx_images(&self, n: u8, config: &CounterConfig) -> Result<Programmed, Self::Error> {
        if config.units().next().is_some() {
            return Err(Error::Config(ConfigError::NotInContext));
        }
        let counter = HwCounter::new(self.generation, n).ok_or(ConfigError::NoSuchCounter(n))?;
        let moved = CounterConfig {
            pmc: config.pmc.on(counter).ok_or(ConfigError::WrongCounter {
                handle: n,
                image: config.pmc.counter().index(),
            })?,
            ..*config
        };
        Ok(self.image_of(n, &moved)?)
    }

    /// The generation.
    fn ctx_key(&self) -> u64 {
        match self.generation {
            Generation::Itanium => 1,
            Generation::Itanium2 => 2,
            Generation::Montecito => 3,
        }
    }

    fn ctx_sampling(images: &Programmed) -> Option<SampleAfter> {
        images.sampling
    }

    fn ctx_global(&self) -> bool {
        false
    }

    fn ctx_disarm(&mut self, _: Token, n: u8, _images: &Programmed) {
        self.pmu.pmi().arm(n, false);
    }

    fn ctx_stop(&mut self, _: Token, n: u8, images: &Programmed) -> Result<(), Self::Error> {
        if self.generation == Generation::Itanium {
            let raw = pmd::count(self.generation, Self::reg(self.regs.read_pmd(n))?);
            self.saved[usize::from(n) % 16] = Some(raw);
        }
        Self::reg(self.regs.write_pmc(n, images.pmc_stopped()))
    }

    fn ctx_save(&mut self, _: Token, n: u8, images: &Programmed) -> Result<Saved, Self::Error> {
        let raw = match self.saved[usize::from(n) % 16].take() {
            Some(raw) => raw,
            None => pmd::count(self.generation, Self::reg(self.regs.read_pmd(n))?),
        };
        let Some(s) = images.sampling else {
            return Ok(Saved {
                raw,
                ..Saved::default()
            });
        };
        let (owed, _) = s.split(raw);
        if owed > 0 {
            self.clear_pending_overflow(n)?;
        }
        Ok(Saved {
            raw,
            serviced: self.pmu.pmi().periods(n),
            owed,
        })
    }

    fn ctx_peek(&mut self, _: Token, n: u8, images: &Programmed) -> Result<Saved, Self::Error> {
        let raw = pmd::count(self.generation, Self::reg(self.regs.read_pmd(n))?);
        Ok(peeked(raw, images.sampling, self.pmu.pmi().periods(n)))
    }

    fn ctx_control(&mut self, _: Token, n: u8, images: &Programmed) -> Result<(), Self::Error> {
        Self::reg(self.regs.write_pmc(n, images.pmc))
    }

    fn ctx_load(
        &mut self,
        _: Token,
        n: u8,
        images: &Programmed,
        value: u64,
    ) -> Result<(), Self::Error> {
        let pmi = self.pmu.pmi();
        pmi.set_sampling(n, images.sampling, Captures::Nothing, images.one_per_cycle);
        pmi.arm(n, false);
        Self::reg(self.regs.write_pmd(n, value))
    }

    fn ctx_start(&mut self, _: Token, _n: u8, _images: &Programmed) {}

    fn ctx_flush(&mut self, _: Token) -> Result<(), Self::Error> {
        Ok(())
    }

    fn ctx_arm(&mut self, _: Token, n: u8, images: &Programmed) {
        if images.sampling.is_some() {
            self.pmu.pmi().arm(n, true);
        }
    }
}

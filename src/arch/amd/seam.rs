//! The AMD core PMU behind the crate's seam ([`crate::arch::Architecture`]):
//! a logical processor's PMU, its driver and its PMI handler.

use super::driver::{AmdCore, AmdDriver, CounterConfig, Counters, Handles, InitError};
use super::events::EventSpec;
use super::multiplex::{Events, MultiplexError, Multiplexer};
use super::physical::AmdPmu;
use super::pmi;
use crate::access::MsrBackend;
use crate::apic::{LvtPerfCounter, LvtPerfCounterEntry};
use crate::arch::{Architecture, Driven, LocalPmu};
use crate::counter::{AnyHandle, Owner};
use crate::detect::AmdCpu;
use crate::multiplex::RotateError;
use crate::sampling::{PmiOutcome, SampleAfter, Sink};
use crate::sealed::Sealed;

impl Architecture for AmdCore {
    type Pmu = AmdPmu;
    type Local<'a> = &'a AmdPmu;
    type Detected = AmdCpu;
    type Config = CounterConfig;
    type Payload = ();
    type Counters<O: Owner> = Counters<O>;
    type Handles = Handles;
    type Event = EventSpec;
    type Events<const E: usize> = Events<E>;
    type MultiplexError = MultiplexError;

    fn erase_all<O: Owner>(counters: Counters<O>) -> Handles {
        counters.erase_all()
    }

    fn from_erased<O: Owner>(handles: Handles) -> Result<Counters<O>, Handles> {
        Counters::from_erased(handles)
    }

    /// Counter `n` at place `n`, as [`Counters::erase_all`] orders them.
    fn handle(handles: &mut Handles, n: u8) -> Option<&mut AnyHandle<AmdCore>> {
        handles.get_mut(usize::from(n))?.as_mut()
    }

    fn sampling(config: CounterConfig, every: SampleAfter) -> CounterConfig {
        config.sampling(every)
    }

    fn counter_name(n: u8) -> Option<&'static str> {
        super::msrs::Counter::new(n).map(super::msrs::Counter::name)
    }

    /// [`Multiplexer::new`]: the core counters whose handles are given
    /// (detection's counter count is the driver's already).
    fn multiplex<const E: usize>(
        _: &AmdCpu,
        handles: Handles,
        events: &[EventSpec],
    ) -> Result<Multiplexer<E>, (MultiplexError, Handles)> {
        Multiplexer::new(handles, events)
    }
}

impl Sealed for &AmdPmu {}

impl<'a> LocalPmu<'a> for &'a AmdPmu {
    type Arch = AmdCore;

    fn periods(self, n: u8) -> (u64, u64) {
        (self.pmi().periods(n), self.pmi().periods_at_halt(n))
    }

    fn interrupts(self) -> u64 {
        self.pmi().interrupts()
    }

    fn spurious(self) -> u64 {
        self.pmi().spurious()
    }
}

impl<'a, M: MsrBackend> Driven<'a, M> for &'a AmdPmu {
    type Error = M::Error;
    type InitError = InitError<M::Error>;
    type Driver<O: Owner> = AmdDriver<'a, O, M>;

    fn take<O: Owner>(
        self,
        regs: M,
        detected: &AmdCpu,
    ) -> Result<(AmdDriver<'a, O, M>, Counters<O>), InitError<M::Error>> {
        AmdDriver::take(regs, detected, self)
    }

    fn give_back<O: Owner>(
        driver: AmdDriver<'a, O, M>,
        counters: Counters<O>,
    ) -> Result<M, (AmdDriver<'a, O, M>, Counters<O>)> {
        Ok(driver.give_back(counters))
    }

    fn core_cycles<O: Owner>(driver: &AmdDriver<'a, O, M>) -> Option<(u8, CounterConfig)> {
        driver.core_cycles()
    }

    fn tick<O: Owner, const E: usize>(
        driver: &mut AmdDriver<'a, O, M>,
        m: &mut Multiplexer<E>,
        dt: u64,
    ) -> Result<(), RotateError<AmdDriver<'a, O, M>, AmdCore>> {
        m.tick(driver, dt)
    }

    fn finish<O: Owner, const E: usize>(
        driver: &mut AmdDriver<'a, O, M>,
        m: &mut Multiplexer<E>,
        dt: u64,
    ) -> Result<(), RotateError<AmdDriver<'a, O, M>, AmdCore>> {
        m.finish(driver, dt)
    }

    #[inline(always)]
    fn handle_pmi<L: LvtPerfCounterEntry, S: Sink>(
        self,
        regs: &mut M,
        lvt: &mut L,
        entry: LvtPerfCounter,
        ip: u64,
        sink: S,
    ) -> Result<PmiOutcome, M::Error> {
        pmi::handle_pmi(self.pmi(), regs, lvt, entry, ip, sink)
    }
}

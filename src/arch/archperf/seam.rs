//! The architectural PMU behind the crate's seam
//! ([`crate::arch::Architecture`]): a logical processor's PMU, its driver
//! and its PMI handler.

use super::driver::{ArchPerfDriver, ArchPerfmon, CounterConfig, Counters, InitError};
use super::events::EventSpec;
use super::multiplex::{Events, MultiplexError, Multiplexer};
use super::physical::ArchPerfPmu;
use super::pmi;
use crate::access::MsrBackend;
use crate::apic::{LvtPerfCounter, LvtPerfCounterEntry};
use crate::arch::{Architecture, Driven, LocalPmu};
use crate::counter::{AnyHandle, Owner};
use crate::detect::ArchPerfCpu;
use crate::multiplex::RotateError;
use crate::sampling::{PmiOutcome, SampleAfter, Sink};
use crate::sealed::Sealed;

impl Architecture for ArchPerfmon {
    type Pmu = ArchPerfPmu;
    type Local<'a> = &'a ArchPerfPmu;
    type Detected = ArchPerfCpu;
    type Config = CounterConfig;
    type Payload = pmi::Capture;
    type Counters<O: Owner> = Counters<O>;
    type Handles = [Option<AnyHandle<ArchPerfmon>>; 12];
    type Event = EventSpec;
    type Events<const E: usize> = Events<E>;
    type MultiplexError = MultiplexError;

    fn erase_all<O: Owner>(counters: Counters<O>) -> Self::Handles {
        counters.erase_all()
    }

    fn from_erased<O: Owner>(handles: Self::Handles) -> Result<Counters<O>, Self::Handles> {
        Counters::from_erased(handles)
    }

    /// General counters 0-7 at 0-7, fixed counters (handle numbers 32-35)
    /// at 8-11, as [`Counters::erase_all`] orders them.
    fn handle(handles: &mut Self::Handles, n: u8) -> Option<&mut AnyHandle<ArchPerfmon>> {
        let i = match n {
            0..=7 => n,
            32..=35 => n - 24,
            _ => return None,
        };
        handles.get_mut(usize::from(i))?.as_mut()
    }

    fn sampling(config: CounterConfig, every: SampleAfter) -> CounterConfig {
        config.sampling(every)
    }

    fn counter_name(n: u8) -> Option<&'static str> {
        super::msrs::Counter::from_index(n).map(super::msrs::Counter::name)
    }

    /// [`Multiplexer::new`]: the general counters whose handles are given
    /// (the driver's: this CPU's), the events this CPU counts (on a hybrid
    /// part, its core type's).
    fn multiplex<const E: usize>(
        detected: &ArchPerfCpu,
        handles: Self::Handles,
        events: &[EventSpec],
    ) -> Result<Multiplexer<E>, (MultiplexError, Self::Handles)> {
        Multiplexer::new(detected, handles, events)
    }
}

impl Sealed for &ArchPerfPmu {}

impl<'a> LocalPmu<'a> for &'a ArchPerfPmu {
    type Arch = ArchPerfmon;

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

impl<'a, M: MsrBackend> Driven<'a, M> for &'a ArchPerfPmu {
    type Error = M::Error;
    type InitError = InitError<M::Error>;
    type Driver<O: Owner> = ArchPerfDriver<'a, O, M>;

    fn take<O: Owner>(
        self,
        regs: M,
        detected: &ArchPerfCpu,
    ) -> Result<(ArchPerfDriver<'a, O, M>, Counters<O>), InitError<M::Error>> {
        ArchPerfDriver::take(regs, detected, self)
    }

    fn give_back<O: Owner>(
        driver: ArchPerfDriver<'a, O, M>,
        counters: Counters<O>,
    ) -> Result<M, (ArchPerfDriver<'a, O, M>, Counters<O>)> {
        Ok(driver.give_back(counters))
    }

    fn core_cycles<O: Owner>(driver: &ArchPerfDriver<'a, O, M>) -> Option<(u8, CounterConfig)> {
        driver.core_cycles()
    }

    fn tick<O: Owner, const E: usize>(
        driver: &mut ArchPerfDriver<'a, O, M>,
        m: &mut Multiplexer<E>,
        dt: u64,
    ) -> Result<(), RotateError<ArchPerfDriver<'a, O, M>, ArchPerfmon>> {
        m.tick(driver, dt)
    }

    fn finish<O: Owner, const E: usize>(
        driver: &mut ArchPerfDriver<'a, O, M>,
        m: &mut Multiplexer<E>,
        dt: u64,
    ) -> Result<(), RotateError<ArchPerfDriver<'a, O, M>, ArchPerfmon>> {
        m.finish(driver, dt)
    }

    #[inline(always)]
    fn handle_pmi<L: LvtPerfCounterEntry, S: Sink<pmi::Capture>>(
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

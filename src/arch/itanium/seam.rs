//! Itanium behind the crate's seam ([`crate::arch::Architecture`]): a
//! processor's PMU, its driver and its PMI handler.

use super::driver::{CounterConfig, Counters, InitError, Itanium, ItaniumDriver};
use super::generation::Generation;
use super::multiplex::{Events, MultiplexError, Multiplexer};
use super::physical::ItaniumPmu;
use super::pmc::CounterPmc;
use super::pmi::{self, Capture};
use crate::access::PmcPmdBackend;
use crate::apic::{LvtPerfCounter, LvtPerfCounterEntry};
use crate::arch::{Architecture, Driven, LocalPmu};
use crate::counter::{AnyHandle, Owner};
use crate::multiplex::RotateError;
use crate::sampling::{PmiOutcome, SampleAfter, Sink};
use crate::sealed::Sealed;

impl Architecture for Itanium {
    type Pmu = ItaniumPmu;
    type Local<'a> = &'a ItaniumPmu;
    /// Itanium is detected by its generation (no CPUID to read on an
    /// IA-32 test host: the kernel names it).
    type Detected = Generation;
    type Config = CounterConfig;
    type Payload = Capture;
    type Counters<O: Owner> = Counters<O>;
    type Handles = [Option<AnyHandle<Itanium>>; 12];
    type Event = CounterPmc;
    type Events<const E: usize> = Events<E>;
    type MultiplexError = MultiplexError;

    fn erase_all<O: Owner>(counters: Counters<O>) -> Self::Handles {
        counters.erase_all()
    }

    fn from_erased<O: Owner>(handles: Self::Handles) -> Result<Counters<O>, Self::Handles> {
        Counters::from_erased(handles)
    }

    /// Counter `n` (4-15) at `n - 4`, as [`Counters::erase_all`] orders
    /// them.
    fn handle(handles: &mut Self::Handles, n: u8) -> Option<&mut AnyHandle<Itanium>> {
        handles.get_mut(usize::from(n.checked_sub(4)?))?.as_mut()
    }

    fn sampling(config: CounterConfig, every: SampleAfter) -> CounterConfig {
        config.sampling(every)
    }

    fn counter_name(n: u8) -> Option<&'static str> {
        super::generation::Counter::new(Generation::Montecito, n)
            .map(super::generation::Counter::name)
    }

    /// [`Multiplexer::new`] for the generation: each event on the
    /// counters its catalog entry allows.
    fn multiplex<const E: usize>(
        detected: &Generation,
        handles: Self::Handles,
        events: &[CounterPmc],
    ) -> Result<Multiplexer<E>, (MultiplexError, Self::Handles)> {
        Multiplexer::new(*detected, handles, events)
    }
}

impl Sealed for &ItaniumPmu {}

impl<'a> LocalPmu<'a> for &'a ItaniumPmu {
    type Arch = Itanium;

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

impl<'a, R: PmcPmdBackend> Driven<'a, R> for &'a ItaniumPmu {
    type Error = R::Error;
    type InitError = InitError<R::Error>;
    type Driver<O: Owner> = ItaniumDriver<'a, O, R>;

    fn take<O: Owner>(
        self,
        regs: R,
        detected: &Generation,
    ) -> Result<(ItaniumDriver<'a, O, R>, Counters<O>), InitError<R::Error>> {
        ItaniumDriver::take(regs, *detected, self)
    }

    fn give_back<O: Owner>(
        driver: ItaniumDriver<'a, O, R>,
        counters: Counters<O>,
    ) -> Result<R, (ItaniumDriver<'a, O, R>, Counters<O>)> {
        driver.give_back(counters)
    }

    fn core_cycles<O: Owner>(driver: &ItaniumDriver<'a, O, R>) -> Option<(u8, CounterConfig)> {
        driver.core_cycles()
    }

    fn tick<O: Owner, const E: usize>(
        driver: &mut ItaniumDriver<'a, O, R>,
        m: &mut Multiplexer<E>,
        dt: u64,
    ) -> Result<(), RotateError<ItaniumDriver<'a, O, R>, Itanium>> {
        m.tick(driver, dt)
    }

    fn finish<O: Owner, const E: usize>(
        driver: &mut ItaniumDriver<'a, O, R>,
        m: &mut Multiplexer<E>,
        dt: u64,
    ) -> Result<(), RotateError<ItaniumDriver<'a, O, R>, Itanium>> {
        m.finish(driver, dt)
    }

    #[inline(always)]
    fn handle_pmi<L: LvtPerfCounterEntry, S: Sink<Capture>>(
        self,
        regs: &mut R,
        lvt: &mut L,
        entry: LvtPerfCounter,
        ip: u64,
        sink: S,
    ) -> Result<PmiOutcome, R::Error> {
        pmi::handle_pmi(self.pmi(), regs, lvt, entry, ip, sink)
    }
}

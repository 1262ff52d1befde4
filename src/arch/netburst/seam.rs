//! NetBurst behind the crate's seam ([`crate::arch::Architecture`]): a
//! package's PMU, a logical processor's share of it, its driver and its
//! PMI handler.

use super::driver::{CounterConfig, Counters, InitError, NetBurst, NetBurstDriver};
use super::multiplex::{Events, MultiplexError, Multiplexer};
use super::parse::EventSpec;
use super::physical::{LogicalPmu, NetBurstPmu};
use super::pmi::{self, Capture};
use super::schedule::Part;
use super::thread::LogicalProcessor;
use crate::access::MsrBackend;
use crate::apic::{LvtPerfCounter, LvtPerfCounterEntry};
use crate::arch::{Architecture, Driven, LocalPmu};
use crate::counter::{AnyHandle, Owner};
use crate::detect::NetBurstCpu;
use crate::multiplex::RotateError;
use crate::sampling::{PmiOutcome, SampleAfter, Sink};
use crate::sealed::Sealed;

impl Architecture for NetBurst {
    type Pmu = NetBurstPmu;
    type Local<'a> = LogicalPmu<'a>;
    type Detected = NetBurstCpu;
    type Config = CounterConfig;
    type Payload = Capture;
    type Counters<O: Owner> = Counters<O>;
    type Handles = [AnyHandle<NetBurst>; 18];
    type Event = (EventSpec, LogicalProcessor);
    type Events<const E: usize> = Events<E>;
    type MultiplexError = MultiplexError;

    fn erase_all<O: Owner>(counters: Counters<O>) -> Self::Handles {
        counters.erase_all()
    }

    fn from_erased<O: Owner>(handles: Self::Handles) -> Result<Counters<O>, Self::Handles> {
        Counters::from_erased(handles)
    }

    fn handle(handles: &mut Self::Handles, n: u8) -> Option<&mut AnyHandle<NetBurst>> {
        handles.get_mut(usize::from(n))
    }

    fn sampling(config: CounterConfig, every: SampleAfter) -> CounterConfig {
        config.sampling(every)
    }

    fn counter_name(n: u8) -> Option<&'static str> {
        super::msrs::Counter::from_index(n).map(super::msrs::Counter::name)
    }

    /// [`Multiplexer::new`] on the detected model. Detection does not
    /// report the stepping, so it is taken as 0, the conservative choice
    /// ([`Part::new`]): a model-2 part is then taken to be older than
    /// F27H, whose IOQ events may not use `FSB_ESCR1` (the scheduler's
    /// `FsbEscr0OnlyBeforeF27`), so an event is never placed where the
    /// part could not count it.
    fn multiplex<const E: usize>(
        detected: &NetBurstCpu,
        handles: Self::Handles,
        events: &[(EventSpec, LogicalProcessor)],
    ) -> Result<Multiplexer<E>, (MultiplexError, Self::Handles)> {
        Multiplexer::new(Part::new(detected.model, 0), handles, events)
    }
}

impl Sealed for LogicalPmu<'_> {}

impl<'a> LocalPmu<'a> for LogicalPmu<'a> {
    type Arch = NetBurst;

    fn periods(self, n: u8) -> (u64, u64) {
        let pmi = self.package().pmi();
        (pmi.periods(n), pmi.periods_at_halt(n))
    }

    fn interrupts(self) -> u64 {
        self.package().pmi().interrupts(self.logical_processor())
    }

    fn spurious(self) -> u64 {
        self.package().pmi().spurious(self.logical_processor())
    }
}

/// A logical processor's share, driven over any MSR backend: its driver is
/// [`NetBurstDriver::take_for`]'s (a driver of both logical processors,
/// [`NetBurstDriver::take`], is NetBurst's own).
impl<'a, M: MsrBackend> Driven<'a, M> for LogicalPmu<'a> {
    type Error = M::Error;
    type InitError = InitError<M::Error>;
    type Driver<O: Owner> = NetBurstDriver<'a, O, M>;

    fn take<O: Owner>(
        self,
        regs: M,
        detected: &NetBurstCpu,
    ) -> Result<(NetBurstDriver<'a, O, M>, Counters<O>), InitError<M::Error>> {
        NetBurstDriver::take_for(self.logical_processor(), regs, detected, self.package())
    }

    fn give_back<O: Owner>(
        driver: NetBurstDriver<'a, O, M>,
        counters: Counters<O>,
    ) -> Result<M, (NetBurstDriver<'a, O, M>, Counters<O>)> {
        Ok(driver.give_back(counters))
    }

    fn core_cycles<O: Owner>(driver: &NetBurstDriver<'a, O, M>) -> Option<(u8, CounterConfig)> {
        driver.core_cycles()
    }

    fn tick<O: Owner, const E: usize>(
        driver: &mut NetBurstDriver<'a, O, M>,
        m: &mut Multiplexer<E>,
        dt: u64,
    ) -> Result<(), RotateError<NetBurstDriver<'a, O, M>, NetBurst>> {
        m.tick(driver, dt)
    }

    fn finish<O: Owner, const E: usize>(
        driver: &mut NetBurstDriver<'a, O, M>,
        m: &mut Multiplexer<E>,
        dt: u64,
    ) -> Result<(), RotateError<NetBurstDriver<'a, O, M>, NetBurst>> {
        m.finish(driver, dt)
    }

    #[inline(always)]
    fn handle_pmi<L: LvtPerfCounterEntry, S: Sink<Capture>>(
        self,
        regs: &mut M,
        lvt: &mut L,
        entry: LvtPerfCounter,
        ip: u64,
        sink: S,
    ) -> Result<PmiOutcome, M::Error> {
        pmi::handle_pmi(
            self.package().pmi(),
            self.logical_processor(),
            regs,
            lvt,
            entry,
            ip,
            sink,
        )
    }
}

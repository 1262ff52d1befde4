//! Every typestate transition of the NetBurst driver inside a real kernel,
//! against the NetBurst PMU model, with the MSR traffic of each operation
//! counted by the recording backend and asserted exactly; the erased form;
//! release from every claimed state; and the scheduler's placements
//! programmed on the model. All counts come from the model, not hardware.
#![no_std]
#![no_main]

use hobby::boot::BootInfo;
use hobby::test::Outcome;
use hobby::{case, check, check_eq, fail, println};
use pmu::access::{AccessCounts, Recording};
use pmu::apic::{LvtPerfCounter, LvtPerfCounterEntry, PmiDelivery, Vector};
use pmu::arch::handle_pmi;
use pmu::arch::netburst::LogicalProcessor as Lp;
use pmu::arch::netburst::driver::{CounterConfig, Counters, NetBurstDriver};
use pmu::arch::netburst::driver::{NetBurst, NetBurstHandle};
use pmu::arch::netburst::pmi::overflow_rule;
use pmu::arch::netburst::{Escr, EventSpec, NetBurstPmu};
use pmu::counter::state::Unclaimed;
use pmu::counter::{Cascade, Owner};
use pmu::counter::{ErasedError, Operation, StateTag};
use pmu::model::netburst::{Config, EscrGroup, EventKind, LogicalProcessor, Privilege};
use pmu::model::netburst::{NetBurstMsr, SharedNetBurstModel};
use pmu::sampling::SampleAfter;

hobby::entry_point!(main);

static MODEL: SharedNetBurstModel = SharedNetBurstModel::new(Config::prescott_ht());

const RUNNING: EventKind = EventKind::new(EscrGroup::Fsb, 0x13, 1);

type Driver<O> = NetBurstDriver<'static, O, Recording<NetBurstMsr<'static>, 16>>;

fn main(_: &'static BootInfo) -> ! {
    println!("counters: every count below comes from the NetBurst PMU model, not hardware");
    hobby::test::run(
        "counters",
        &[
            case!(every_transition_with_exact_msr_traffic),
            case!(release_from_every_claimed_state_idles_the_counter),
            case!(cascade_and_both_ways_of_halting_it),
            case!(erased_handles_refuse_illegal_transitions),
            case!(a_scheduled_set_counts_each_event_on_its_placement),
            case!(pmi_and_halt_traffic_in_every_case),
            case!(cascade_14_16),
            case!(cascade_15_17),
            case!(extended_cascade),
        ],
    )
}

/// A driver for the calling case's own owner type and package: every case
/// resets the model and drives it as a package of its own (so a case that
/// fails with counters claimed leaves the next one a clean package).
macro_rules! setup {
    () => {{
        pmu::owner!(Case);
        // SAFETY: the model, reset for this case, is a package of its own,
        // and this is its one value.
        static PACKAGE: NetBurstPmu = unsafe { NetBurstPmu::new() };
        take::<Case>(&PACKAGE)
    }};
}

fn take<O: Owner>(package: &'static NetBurstPmu) -> (Driver<O>, Counters<O>) {
    MODEL.reset();
    let cpu = MODEL.detect().expect("the model is a usable NetBurst");
    match NetBurstDriver::take(Recording::new(MODEL.msr()), &cpu, package) {
        Ok((mut d, c)) => {
            d.msr().clear();
            (d, c)
        }
        Err(e) => panic!("driver init on the model: {e:?}"),
    }
}

fn clocks(n: u64) {
    MODEL.with(|m| m.inject(RUNNING.on(LogicalProcessor::T0, Privilege::Os, n)));
}

fn running(escr: Escr) -> CounterConfig {
    let spec: EventSpec = "global_power_events:RUNNING:k".parse().unwrap();
    CounterConfig::counting(spec, escr)
}

fn traffic<O: Owner>(d: &mut Driver<O>) -> (u32, u32, u32) {
    let AccessCounts {
        msr_reads,
        msr_writes,
        rdpmc,
        ..
    } = d.msr().take_counts();
    (msr_reads, msr_writes, rdpmc)
}

fn every_transition_with_exact_msr_traffic() -> Outcome {
    let (mut d, c) = setup!();
    let Ok(c0) = c.c0.configure(&mut d, &running(Escr::FsbEscr0)) else {
        fail!("configure")
    };
    check_eq!(
        traffic(&mut d),
        (0, 2, 0),
        "configure: ESCR, counter (CCCR idle already)"
    );
    check_eq!(
        c0.read(&mut d).ok(),
        Some(0),
        "Configured: preset, not counting"
    );
    check_eq!(traffic(&mut d), (0, 0, 1), "read: one RDPMC");
    clocks(50);
    check_eq!(c0.read(&mut d).ok(), Some(0));
    traffic(&mut d);
    let Ok(c0) = c0.enable(&mut d) else {
        fail!("enable")
    };
    check_eq!(traffic(&mut d), (0, 1, 0), "enable: one CCCR write");
    clocks(100);
    check_eq!(c0.read(&mut d).ok(), Some(100));
    traffic(&mut d);
    let Ok(c0) = c0.halt(&mut d) else {
        fail!("halt")
    };
    check_eq!(traffic(&mut d), (0, 1, 0), "halt: one CCCR write");
    clocks(100);
    check_eq!(c0.read(&mut d).ok(), Some(100), "Halted: count kept");
    traffic(&mut d);
    let Ok(c0) = c0.resume(&mut d) else {
        fail!("resume")
    };
    check_eq!(traffic(&mut d), (0, 1, 0), "resume: one CCCR write");
    clocks(1);
    check_eq!(c0.read(&mut d).ok(), Some(101));
    traffic(&mut d);
    let Ok(_free) = c0.release(&mut d) else {
        fail!("release")
    };
    check_eq!(
        traffic(&mut d),
        (0, 2, 0),
        "release: CCCR, counter (the ESCR is inert)"
    );
    Ok(())
}

fn release_from_every_claimed_state_idles_the_counter() -> Outcome {
    let (mut d, c) = setup!();
    // CCCR idle (active thread 11b only), counter zero; the ESCR is left
    // as it was, inert: events after the release count nowhere.
    let zeroed = |n: usize, _escr: Escr| {
        let idle = || MODEL.with(|m| m.counter(n) == 0 && m.cccr(n) & !(3 << 16) == 0);
        let before = idle();
        clocks(5);
        before && idle()
    };
    let Ok(a) = c.c0.configure(&mut d, &running(Escr::FsbEscr0)) else {
        fail!("configure")
    };
    clocks(5);
    let Ok(_) = a.release(&mut d) else {
        fail!("release Configured")
    };
    check!(zeroed(0, Escr::FsbEscr0), "Configured released");
    let Ok(b) =
        c.c1.configure(&mut d, &running(Escr::FsbEscr0))
            .map(|b| b.enable(&mut d))
    else {
        fail!("configure")
    };
    let Ok(b) = b else { fail!("enable") };
    clocks(5);
    let Ok(b) = b.release(&mut d) else {
        fail!("release Enabled")
    };
    check!(zeroed(1, Escr::FsbEscr0), "Enabled released");
    let Ok(b) = b.configure(&mut d, &running(Escr::FsbEscr0)) else {
        fail!("reconfigure")
    };
    let Ok(b) = b.enable(&mut d) else {
        fail!("enable")
    };
    clocks(5);
    let Ok(b) = b.halt(&mut d) else { fail!("halt") };
    let Ok(_) = b.release(&mut d) else {
        fail!("release Halted")
    };
    check!(zeroed(1, Escr::FsbEscr0), "Halted released");
    traffic(&mut d);
    Ok(())
}

fn cascade_and_both_ways_of_halting_it() -> Outcome {
    let (mut d, c) = setup!();
    let Ok(low) = c.c1.configure(&mut d, &running(Escr::FsbEscr0)) else {
        fail!("configure 1")
    };
    let Ok(low) = low.enable(&mut d) else {
        fail!("enable 1")
    };
    let Ok(high) = c.c3.configure(&mut d, &running(Escr::FsbEscr1)) else {
        fail!("configure 3")
    };
    traffic(&mut d);
    let Ok(high) = high.cascade_from(&low, &mut d) else {
        fail!("cascade")
    };
    check_eq!(traffic(&mut d), (0, 1, 0), "cascade_from: one CCCR write");
    clocks((1 << 40) + 7);
    check_eq!(
        high.read(&mut d).ok(),
        Some(7),
        "counts after the low counter overflows"
    );
    check_eq!(low.read(&mut d).ok(), Some(7));
    check!(d.clear_overflow(&low).is_ok());
    clocks(3);
    check_eq!(
        high.read(&mut d).ok(),
        Some(7),
        "stopped by clearing the low OVF"
    );
    traffic(&mut d);
    let Ok(high) = high.halt(&mut d) else {
        fail!("halt")
    };
    check_eq!(
        traffic(&mut d),
        (0, 1, 0),
        "halt (cascaded): one CCCR write"
    );
    clocks(1 << 40);
    check_eq!(
        high.read(&mut d).ok(),
        Some(7),
        "halted: no restart at the next overflow"
    );
    let Ok(high) = high.cascade_from(&low, &mut d) else {
        fail!("re-cascade")
    };
    check!(d.clear_overflow(&low).is_ok());
    // The low counter is at 10: it wraps 10 clocks before the end of these
    // 2^40, and the high counter counts those 10 and the next 4.
    clocks(1 << 40);
    clocks(4);
    check_eq!(
        high.read(&mut d).ok(),
        Some(21),
        "cascaded again from Halted"
    );
    let _ = (high.release(&mut d), low.release(&mut d));
    Ok(())
}

fn erased_handles_refuse_illegal_transitions() -> Outcome {
    let (mut d, c) = setup!();
    let mut a = c.c0.erase();
    fn illegal<T, E>(operation: Operation, state: StateTag) -> Result<T, ErasedError<E>> {
        Err(ErasedError::Illegal { operation, state })
    }
    check_eq!(
        a.read(&mut d),
        illegal(Operation::Read, StateTag::Unclaimed)
    );
    check_eq!(
        a.enable(&mut d),
        illegal(Operation::Enable, StateTag::Unclaimed)
    );
    check!(a.configure(&mut d, &running(Escr::FsbEscr0)).is_ok());
    check_eq!(
        a.halt(&mut d),
        illegal(Operation::Halt, StateTag::Configured)
    );
    check_eq!(
        a.resume(&mut d),
        illegal(Operation::Resume, StateTag::Configured)
    );
    check!(a.enable(&mut d).is_ok());
    check_eq!(
        a.enable(&mut d),
        illegal(Operation::Enable, StateTag::Enabled)
    );
    let mut b = c.c1.erase();
    check!(
        b.configure(&mut d, &running(Escr::FsbEscr1)).is_err(),
        "FSB_ESCR1 does not feed counter 1"
    );
    let mut two = c.c2.erase();
    check!(two.configure(&mut d, &running(Escr::FsbEscr1)).is_ok());
    check_eq!(
        b.cascade_from(&a, &mut d),
        illegal(Operation::Cascade, StateTag::Unclaimed)
    );
    check!(
        b.configure(&mut d, &running(Escr::BsuEscr0)).is_err(),
        "BSU_ESCR0 cannot count global_power_events"
    );
    let mut three = c.c3.erase();
    check!(
        three.configure(&mut d, &running(Escr::FsbEscr0)).is_err(),
        "FSB_ESCR0 busy"
    );
    check_eq!(
        three.cascade_from(&a, &mut d),
        illegal(Operation::Cascade, StateTag::Unclaimed)
    );
    check!(
        two.cascade_from(&a, &mut d).is_ok(),
        "0 -> 2 is a cascade pair"
    );
    check_eq!(two.state(), StateTag::Cascaded);
    check!(two.release(&mut d).is_ok());
    check!(a.release(&mut d).is_ok());
    check_eq!(a.state(), StateTag::Unclaimed);
    Ok(())
}

/// The scheduler places a set that Linux's greedy first-fit cannot (two
/// events that both need CRU_ESCR0/1 on one logical processor, plus one on
/// each thread on the FSB ESCRs); the driver programs each placement through
/// run-time handles, and the model counts each event on its own counter.
fn a_scheduled_set_counts_each_event_on_its_placement() -> Outcome {
    use pmu::arch::netburst::LogicalProcessor as Lp;
    use pmu::arch::netburst::schedule::{self, Occupied, Part, Request};
    let (mut d, c) = setup!();
    let spec = |s: &str| s.parse::<EventSpec>().unwrap();
    let requests = [
        Request::new(spec("instr_retired:NBOGUSNTAG:k"), Lp::T0),
        Request::new(spec("mispred_branch_retired:NBOGUS:k"), Lp::T0),
        Request::new(spec("global_power_events:RUNNING:k"), Lp::T0),
        Request::new(spec("global_power_events:RUNNING:k"), Lp::T1),
    ];
    let part = Part::new(MODEL.config().model, 1);
    let placed = match schedule::schedule(part, &requests, Occupied::NONE) {
        Ok(s) => s,
        Err(e) => fail!("no schedule: {e}"),
    };
    let mut handles = c.erase_all();
    for (i, a) in placed.as_slice().iter().enumerate() {
        let r = &requests[i];
        let cfg = CounterConfig::counting(*r.spec(), a.escr()).on(r.processor());
        let h = &mut handles[usize::from(a.counter().index())];
        if h.configure(&mut d, &cfg)
            .and_then(|()| h.enable(&mut d))
            .is_err()
        {
            fail!("programming placement {i}: {a:?}");
        }
        println!(
            "counters: request {i} -> {} on counter {}",
            a.escr().name(),
            a.counter().index()
        );
    }
    const INSTR: EventKind = EventKind::new(EscrGroup::Cru01, 0x02, 1);
    const MISPRED: EventKind = EventKind::new(EscrGroup::Cru01, 0x03, 1);
    MODEL.with(|m| {
        m.inject(INSTR.on(LogicalProcessor::T0, Privilege::Os, 1000));
        m.inject(MISPRED.on(LogicalProcessor::T0, Privilege::Os, 30));
        m.inject(RUNNING.on(LogicalProcessor::T0, Privilege::Os, 5000));
        m.inject(RUNNING.on(LogicalProcessor::T1, Privilege::Os, 700));
    });
    let expect = [1000u64, 30, 5000, 700];
    for (i, a) in placed.as_slice().iter().enumerate() {
        let h = &handles[usize::from(a.counter().index())];
        check_eq!(
            h.read(&mut d).ok(),
            Some(expect[i]),
            "each event on its own counter"
        );
    }
    for h in &mut handles {
        if h.state() != StateTag::Unclaimed && h.release(&mut d).is_err() {
            fail!("release");
        }
    }
    Ok(())
}

/// The handler is called directly here (the overflow kernel takes real
/// interrupts): an LVT entry that only counts its writes.
struct CountingLvt(u32);

impl LvtPerfCounterEntry for CountingLvt {
    fn write_lvt_perf_counter(&mut self, _: LvtPerfCounter) {
        self.0 += 1;
    }
}

/// One PMI on T0 through the recording backend: its traffic, and how many
/// counters it serviced.
fn pmi<O: Owner>(
    d: &mut Driver<O>,
    lvt: &mut CountingLvt,
) -> Result<((u32, u32, u32), u32), &'static str> {
    traffic(d);
    let entry = LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(0xF0).ok_or("vector")?));
    let t0 = d.physical().logical(Lp::T0);
    let out = handle_pmi(t0, d.msr(), lvt, entry, 0x1000, |_| {}).map_err(|_| "handler")?;
    Ok((traffic(d), out.overflowed.count_ones()))
}

/// The PMI and halt traffic of every case, asserted exactly as on the host:
/// 4 armed with 1 or 4 overflowed, spurious, and a halt that finds an owed
/// period (the one access that cannot go: the halt must read the counter
/// to learn whether it passed its overflow).
fn pmi_and_halt_traffic_in_every_case() -> Outcome {
    let (mut d, c) = setup!();
    let Ok(n) = SampleAfter::new(20, overflow_rule()) else {
        fail!("N")
    };
    let events = [
        ("global_power_events:RUNNING:k", Escr::FsbEscr0),
        ("instr_retired:NBOGUSNTAG:k", Escr::CruEscr0),
        ("branch_retired:MMNP:k", Escr::CruEscr3),
        ("BSQ_cache_reference:RD_2ndL_HITS:k", Escr::BsuEscr0),
    ];
    let mut configs = [running(Escr::FsbEscr0); 4];
    let mut kinds = [RUNNING; 4];
    for (i, (s, escr)) in events.into_iter().enumerate() {
        let Ok(spec) = s.parse::<EventSpec>() else {
            fail!("event")
        };
        configs[i] = CounterConfig::counting(spec, escr).sampling(n);
        let Some(k) = EventKind::for_spec(&spec, escr) else {
            fail!("model event")
        };
        kinds[i] = k;
    }
    let (Some(a), Some(b), Some(e), Some(f)) = (
        c.c0.configure(&mut d, &configs[0])
            .ok()
            .and_then(|h| h.enable(&mut d).ok()),
        c.c12
            .configure(&mut d, &configs[1])
            .ok()
            .and_then(|h| h.enable(&mut d).ok()),
        c.c14
            .configure(&mut d, &configs[2])
            .ok()
            .and_then(|h| h.enable(&mut d).ok()),
        c.c1.configure(&mut d, &configs[3])
            .ok()
            .and_then(|h| h.enable(&mut d).ok()),
    ) else {
        fail!("configure and enable four sampling counters")
    };
    let inject =
        |k: EventKind, n| MODEL.with(|m| m.inject(k.on(LogicalProcessor::T0, Privilege::Os, n)));
    let mut lvt = CountingLvt(0);
    inject(kinds[2], 21);
    check!(
        MODEL.take_pmi(LogicalProcessor::T0).is_some(),
        "counter 14's PMI"
    );
    check_eq!(
        pmi(&mut d, &mut lvt),
        Ok(((0, 2, 4), 1)),
        "4 armed, 1 overflowed"
    );
    for k in kinds {
        inject(k, 20);
    }
    check!(
        MODEL.take_pmi(LogicalProcessor::T0).is_some(),
        "one PMI for four"
    );
    check_eq!(
        pmi(&mut d, &mut lvt),
        Ok(((0, 8, 4), 4)),
        "4 armed, 4 overflowed"
    );
    check_eq!(
        pmi(&mut d, &mut lvt),
        Ok(((0, 0, 4), 0)),
        "spurious: the reads only"
    );
    check_eq!(lvt.0, 3, "one LVT write per PMI");
    inject(kinds[0], 25);
    traffic(&mut d);
    let Ok(a) = a.halt(&mut d).map_err(|e| e.error) else {
        fail!("halt")
    };
    check_eq!(
        traffic(&mut d),
        (0, 2, 1),
        "halt that finds a period: CCCR, RDPMC, counter"
    );
    let state = d.pmi_state();
    check_eq!((state.periods(0), state.periods_at_halt(0)), (2, 1));
    let _ = (a, b, e, f);
    Ok(())
}

/// One configured counter of a cascade pair: its token, its event on its
/// ESCR, and the model's event that it counts.
struct Side<O: Owner, const N: u8> {
    token: NetBurstHandle<O, N, Unclaimed>,
    spec: &'static str,
    escr: Escr,
}

impl<O: Owner, const N: u8> Side<O, N> {
    fn kind(&self) -> Result<(CounterConfig, EventKind), hobby::test::Failure> {
        let spec: EventSpec = self.spec.parse()?;
        let kind = EventKind::for_spec(&spec, self.escr).ok_or("no model event")?;
        Ok((CounterConfig::counting(spec, self.escr), kind))
    }
}

/// The IQ block's cascades into counters 16 and 17 (only from 14 and 15,
/// SDM 18.15.5.6), with both ways of halting a cascaded counter (SDM
/// 18.15.5.5): clear the alternate's `OVF`, or clear the counter's own
/// `CASCADE` (a halt); each transition one CCCR write.
fn cascade_pair<O: Owner, const L: u8, const H: u8>(
    d: &mut Driver<O>,
    low: Side<O, L>,
    high: Side<O, H>,
) -> Outcome
where
    NetBurst: Cascade<L, H>,
{
    let (low_cfg, low_kind) = low.kind()?;
    let (high_cfg, high_kind) = high.kind()?;
    let feed = |k: EventKind, n: u64| {
        MODEL.with(|m| m.inject(k.on(LogicalProcessor::T0, Privilege::Os, n)))
    };
    let lo = low.token.configure(d, &low_cfg)?.enable(d)?;
    let hi = high.token.configure(d, &high_cfg)?;
    traffic(d);
    let hi = hi.cascade_from(&lo, d)?;
    check_eq!(traffic(d), (0, 1, 0), "cascade_from: one CCCR write");
    feed(high_kind, 5);
    check_eq!(hi.read(d)?, 0, "nothing before the low counter overflows");
    // The low counter wraps: from now on the high counter counts.
    feed(low_kind, 1 << 40);
    feed(high_kind, 7);
    check_eq!(hi.read(d)?, 7, "counting once the low counter overflowed");
    // First way: clear the low counter's OVF.
    d.clear_overflow(&lo)?;
    feed(high_kind, 3);
    check_eq!(hi.read(d)?, 7, "stopped by clearing the low OVF");
    // Second way: the low counter overflows again, and the halt clears
    // the high counter's CASCADE.
    feed(low_kind, 1 << 40);
    feed(high_kind, 2);
    check_eq!(hi.read(d)?, 9);
    traffic(d);
    let hi = hi.halt(d)?;
    check_eq!(traffic(d), (0, 1, 0), "halt (cascaded): one CCCR write");
    feed(high_kind, 4);
    check_eq!(hi.read(d)?, 9, "halted while the low OVF is still set");
    // Cascaded again from Halted: the low OVF is still set, so it counts.
    let hi = hi.cascade_from(&lo, d)?;
    feed(high_kind, 1);
    check_eq!(hi.read(d)?, 10, "cascaded again from Halted");
    let _ = (hi.release(d)?, lo.release(d)?);
    Ok(())
}

fn cascade_14_16() -> Outcome {
    let (mut d, c) = setup!();
    let low = Side {
        token: c.c14,
        spec: "instr_retired:NBOGUSNTAG:k",
        escr: Escr::CruEscr1,
    };
    let high = Side {
        token: c.c16,
        spec: "instr_retired:NBOGUSTAG:k",
        escr: Escr::CruEscr0,
    };
    cascade_pair(&mut d, low, high)
}

fn cascade_15_17() -> Outcome {
    let (mut d, c) = setup!();
    let low = Side {
        token: c.c15,
        spec: "instr_retired:NBOGUSNTAG:k",
        escr: Escr::CruEscr1,
    };
    let high = Side {
        token: c.c17,
        spec: "branch_retired:MMNP:k",
        escr: Escr::CruEscr3,
    };
    cascade_pair(&mut d, low, high)
}

/// The extended cascade (CCCR bit 11, SDM Table 18-65): counter 12 counts
/// only while counter 16 has overflowed, on this model (0F_03); one CCCR
/// write; stopped by clearing 16's `OVF`, and by the halt.
fn extended_cascade() -> Outcome {
    let (mut d, c) = setup!();
    let low = Side {
        token: c.c16,
        spec: "instr_retired:NBOGUSNTAG:k",
        escr: Escr::CruEscr0,
    };
    let high = Side {
        token: c.c12,
        spec: "branch_retired:MMNP:k",
        escr: Escr::CruEscr2,
    };
    let (low_cfg, low_kind) = low.kind()?;
    let (high_cfg, high_kind) = high.kind()?;
    let feed = |k: EventKind, n: u64| {
        MODEL.with(|m| m.inject(k.on(LogicalProcessor::T0, Privilege::Os, n)))
    };
    let c16 = low.token.configure(&mut d, &low_cfg)?.enable(&mut d)?;
    let c12 = high.token.configure(&mut d, &high_cfg)?;
    traffic(&mut d);
    let c12 = d.cascade_extended(c12, &c16)?;
    check_eq!(traffic(&mut d), (0, 1, 0), "one CCCR write");
    check!(MODEL.with(|m| m.cccr(12) & 1 << 11 != 0), "bit 11 set");
    feed(high_kind, 5);
    check_eq!(c12.read(&mut d)?, 0, "gated until counter 16 overflows");
    feed(low_kind, 1 << 40);
    feed(high_kind, 7);
    check_eq!(c12.read(&mut d)?, 7, "counting once 16 overflowed");
    d.clear_overflow(&c16)?;
    feed(high_kind, 3);
    check_eq!(c12.read(&mut d)?, 7, "stopped by clearing 16's OVF");
    feed(low_kind, 1 << 40);
    let c12 = c12.halt(&mut d)?;
    feed(high_kind, 4);
    check_eq!(c12.read(&mut d)?, 7, "stopped by the halt");
    let _ = (c12.release(&mut d)?, c16.release(&mut d)?);
    Ok(())
}

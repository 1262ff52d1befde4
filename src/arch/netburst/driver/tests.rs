//! The NetBurst driver against the NetBurst model (a test instrument written
//! from the manuals): behaviour, and exact MSR traffic per operation through
//! the recording backend. All counts here come from the model.

use std::vec::Vec;

use super::*;
use crate::access::{AccessCounts, Recording};
use crate::apic::{LvtPerfCounter, LvtPerfCounterEntry, PmiDelivery, Vector};
use crate::arch::handle_pmi;
use crate::arch::netburst::CounterSet;
use crate::arch::netburst::pmi::Capture;
use crate::counter::Owner;
use crate::counter::state::{Configured, Enabled};
use crate::counter::{AnyHandle, ErasedError, Operation};
use crate::model::netburst::{
    Config, EscrGroup, EventKind, LogicalProcessor as ModelLp, NetBurstModel, Privilege, UopKind,
    Uops,
};
use crate::sampling::Sample;

type Model = Recording<NetBurstModel, 256>;

const RUNNING: EventKind = EventKind::new(EscrGroup::Fsb, 0x13, 1);
const INSTR: EventKind = EventKind::new(EscrGroup::Cru01, 0x02, 1);

fn cpu(m: &NetBurstModel) -> detect::NetBurstCpu {
    let c = m.config();
    detect::NetBurstCpu {
        model: c.model,
        msr_instructions: true,
        perf_mon_available: true,
        pebs_available: true,
        hyper_threading: c.hyper_threading,
        logical_processors: if c.hyper_threading { 2 } else { 1 },
    }
}

/// The driver of a fresh model under test, for owner `O`.
type Nb<'s, O> = NetBurstDriver<'s, O, Model>;

fn take<O: Owner>(state: &NetBurstPmu, config: Config) -> (Nb<'_, O>, Counters<O>) {
    let m = NetBurstModel::new(config);
    let info = cpu(&m);
    let (mut d, c) = NetBurstDriver::take(Recording::new(m), &info, state).unwrap();
    d.msr().clear();
    (d, c)
}

/// A driver on a fresh model, for an owner type of its own: tests run in
/// parallel, and an owner can be taken by one driver at a time.
macro_rules! driver {
    ($state:expr, $config:expr) => {{
        crate::owner!(Fresh);
        take::<Fresh>($state, $config)
    }};
}

fn spec(s: &str) -> EventSpec {
    s.parse().unwrap()
}

fn running() -> CounterConfig {
    CounterConfig::counting(spec("global_power_events:RUNNING:k"), Escr::FsbEscr0)
}

fn counts(reads: u32, writes: u32, rdpmc: u32) -> AccessCounts {
    AccessCounts::msr(reads, writes, rdpmc)
}

fn model<'a, O: Owner>(d: &'a mut Nb<'_, O>) -> &'a mut NetBurstModel {
    d.msr().inner_mut()
}

fn inject<O: Owner>(d: &mut Nb<'_, O>, kind: EventKind, n: u64) {
    model(d).inject(kind.on(ModelLp::T0, Privilege::Os, n));
}

#[derive(Default)]
struct Lvt(Vec<LvtPerfCounter>);

impl LvtPerfCounterEntry for Lvt {
    fn write_lvt_perf_counter(&mut self, entry: LvtPerfCounter) {
        self.0.push(entry);
    }
}

fn entry() -> LvtPerfCounter {
    LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(0xF0).unwrap()))
}

/// Deliver the model's PMI for T0, if raised, through the handler.
fn service<O: Owner>(
    d: &mut Nb<'_, O>,
    state: &NetBurstPmu,
    lvt: &mut Lvt,
    rip: u64,
    samples: &mut Vec<Sample>,
) -> bool {
    if model(d).take_pmi(ModelLp::T0).is_none() {
        return false;
    }
    handle_pmi(
        state.logical(LogicalProcessor::T0),
        d.msr(),
        lvt,
        entry(),
        rip,
        |s| samples.push(s.with_payload(())),
    )
    .unwrap();
    true
}

/// Run the T0 handler without a PMI from the model: whether it found
/// nothing to service (a spurious PMI).
fn handler_finds_nothing<O: Owner>(d: &mut Nb<'_, O>, state: &NetBurstPmu, lvt: &mut Lvt) -> bool {
    let out = handle_pmi(
        state.logical(LogicalProcessor::T0),
        d.msr(),
        lvt,
        entry(),
        0,
        |_| {},
    );
    out.unwrap().is_spurious()
}

#[test]
fn init_clears_every_cccr() {
    let state = crate::testing::netburst_pmu();
    let mut m = NetBurstModel::new(Config::prescott_ht());
    m.write_msr(0x36C, 1 << 12 | 3 << 16).unwrap();
    let info = cpu(&m);
    crate::owner!(Package);
    let (mut d, _) = Nb::<Package>::take(Recording::new(m), &info, &state).unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 18, 0));
    assert_eq!(model(&mut d).cccr(12), IDLE_CCCR);
    let off = detect::NetBurstCpu {
        perf_mon_available: false,
        ..info
    };
    crate::owner!(Other);
    let r =
        NetBurstDriver::<Other, _>::take(NetBurstModel::new(Config::prescott_ht()), &off, &state);
    assert!(matches!(r, Err(InitError::PerfMonUnavailable)));
}

/// Release writes the CCCR idle and the counter zero and leaves a plain
/// ESCR, which is inert without an enabled CCCR selecting it; a tagging ESCR
/// (`Tag_Enable`) acts on its own, so release clears it too.
#[test]
fn release_clears_only_a_tagging_escr() {
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    let c0 = c.c0.configure(&mut d, &running()).unwrap();
    let c0 = c0.enable(&mut d).unwrap();
    inject(&mut d, RUNNING, 5);
    d.msr().clear();
    let c0 = c0.release(&mut d).unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 2, 0), "CCCR, counter");
    let fsb0 = Escr::FsbEscr0.msr();
    assert_ne!(model(&mut d).read_msr(fsb0).unwrap(), 0, "the ESCR is left");
    assert_eq!(model(&mut d).counter(0), 0, "the count is not left");
    inject(&mut d, RUNNING, 7);
    assert_eq!(model(&mut d).counter(0), 0, "the left ESCR counts nothing");
    // The next owner of the ESCR gets all of it: the other counter it
    // feeds counts its own event only.
    let other = CounterConfig::counting(spec("global_power_events:RUNNING:u"), Escr::FsbEscr0);
    let c1 =
        c.c1.configure(&mut d, &other)
            .unwrap()
            .enable(&mut d)
            .unwrap();
    inject(&mut d, RUNNING, 3);
    assert_eq!(
        c1.read(&mut d).unwrap(),
        0,
        "OS events: the old T0_OS bit is gone"
    );
    let _ = (c1, c0);

    let tagging = CounterConfig::counting(spec("packed_SP_uop:TAG0:TAG2:k"), Escr::FirmEscr0);
    let c8 = c.c8.configure(&mut d, &tagging).unwrap();
    assert!(c8.programmed().escr_tags());
    let c8 = c8.enable(&mut d).unwrap();
    d.msr().clear();
    let _ = c8.release(&mut d).unwrap();
    assert_eq!(
        d.msr().take_counts(),
        counts(0, 3, 0),
        "CCCR, ESCR, counter"
    );
    assert_eq!(model(&mut d).read_msr(Escr::FirmEscr0.msr()).unwrap(), 0);
}

/// A front-end tagging ESCR (`uop_type`, SDM 18.15.6.2) tags µops while
/// any counter of its block runs, so release clears it: after a `uop_type`
/// TAGLOADS counter is released and another owner tags only stores (on the
/// other RAT ESCR), `front_end_event` counts the stores and no loads. And
/// with no `uop_type` counter claimed, `front_end_event` is refused.
#[test]
fn release_clears_a_front_end_tagging_escr() {
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    let loads = CounterConfig::counting(spec("uop_type:TAGLOADS:k"), Escr::RatEscr0);
    let c12 = c.c12.configure(&mut d, &loads).unwrap();
    assert!(c12.programmed().escr_tags());
    let c12 = c12.enable(&mut d).unwrap();
    d.msr().clear();
    let c12 = c12.release(&mut d).unwrap();
    assert_eq!(
        d.msr().take_counts(),
        counts(0, 3, 0),
        "CCCR, ESCR, counter"
    );
    assert_eq!(model(&mut d).read_msr(Escr::RatEscr0.msr()).unwrap(), 0);
    let front_end = CounterConfig::counting(spec("front_end_event:NBOGUS:k"), Escr::CruEscr2);
    let refused = c.c13.configure(&mut d, &front_end).unwrap_err();
    assert_eq!(
        refused.error,
        Error::Config(ConfigError::Untagged {
            tagging: Tagging::FrontEnd,
            bit: None
        })
    );
    assert_eq!(
        d.msr().take_counts(),
        counts(0, 0, 0),
        "refused: nothing written"
    );
    let stores = CounterConfig::counting(spec("uop_type:TAGSTORES:k"), Escr::RatEscr1);
    let c14 = c.c14.configure(&mut d, &stores).unwrap();
    let c14 = c14.enable(&mut d).unwrap();
    let c13 = refused
        .counter
        .configure(&mut d, &front_end)
        .unwrap()
        .enable(&mut d)
        .unwrap();
    let retire = |d: &mut Nb<'_, _>, kind, n| {
        model(d).retire(&Uops::new(ModelLp::T0, Privilege::Os, kind, n));
    };
    retire(&mut d, UopKind::Load, 9);
    retire(&mut d, UopKind::Store, 4);
    assert_eq!(
        c13.read(&mut d).unwrap(),
        4,
        "stores only: no ESCR tags loads any more"
    );
    let _ = (c12, c13, c14);
}

/// The MSR-traffic table of the guide's counters page, operation by operation.
#[test]
fn msr_traffic_per_operation_is_exact() {
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    let c0 = c.c0.configure(&mut d, &running()).unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 2, 0), "configure");
    let c0 = c0.enable(&mut d).unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 1, 0), "enable");
    inject(&mut d, RUNNING, 10);
    assert_eq!(c0.read(&mut d).unwrap(), 10);
    assert_eq!(d.msr().take_counts(), counts(0, 0, 1), "read");
    let c0 = c0.halt(&mut d).unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 1, 0), "halt (counting)");
    let c0 = c0.resume(&mut d).unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 1, 0), "resume");
    d.clear_overflow(&c0).unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 1, 0), "clear_overflow");

    let c2 = c.c2.configure(
        &mut d,
        &CounterConfig {
            escr: Escr::FsbEscr1,
            ..running()
        },
    );
    let c2 = c2.unwrap();
    d.msr().clear();
    let c2 = c2.cascade_from(&c0, &mut d).unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 1, 0), "cascade_from");
    let c2 = c2.halt(&mut d).unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 1, 0), "halt (cascaded)");
    let _ = c2.release(&mut d).unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 2, 0), "release");

    let n = SampleAfter::new(1000, overflow_rule()).unwrap();
    let s = c.c12.configure(
        &mut d,
        &CounterConfig::counting(spec("instr_retired:NBOGUSNTAG:k"), Escr::CruEscr0).sampling(n),
    );
    let s = s.unwrap().enable(&mut d).unwrap();
    d.msr().clear();
    let s = s.halt(&mut d).unwrap();
    assert_eq!(
        d.msr().take_counts(),
        counts(0, 1, 1),
        "halt (sampling, nothing owed)"
    );
    let _ = (s, c0);
}

#[test]
fn pmi_handler_traffic_is_one_read_per_armed_and_two_writes_per_overflowed() {
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    let n = SampleAfter::new(50, overflow_rule()).unwrap();
    let a = c.c0.configure(&mut d, &running().sampling(n)).unwrap();
    let instr = CounterConfig::counting(spec("instr_retired:NBOGUSNTAG:k"), Escr::CruEscr0);
    let b = c.c12.configure(&mut d, &instr.sampling(n)).unwrap();
    let (a, b) = (a.enable(&mut d).unwrap(), b.enable(&mut d).unwrap());
    // Counter 0 overflows and raises its PMI; counter 12 does not.
    inject(&mut d, RUNNING, 51);
    inject(&mut d, INSTR, 10);
    d.msr().clear();
    let (mut lvt, mut samples) = (Lvt::default(), Vec::new());
    assert!(service(&mut d, &state, &mut lvt, 0x1234, &mut samples));
    assert_eq!(d.msr().take_counts(), counts(0, 2, 2));
    assert_eq!(lvt.0, [entry()], "exactly one LVT write, unmasked");
    assert_eq!(
        samples,
        [Sample {
            counter: 0,
            periods: 1,
            rip: 0x1234,
            payload: ()
        }]
    );
    // After the reload the next period is exactly N events long: the PMI
    // event is the first of it (-(N-1), SDM 18.15.5.8).
    assert_eq!(a.read(&mut d).unwrap(), n.at_residual(1));
    assert_eq!(b.read(&mut d).unwrap(), n.preset() + 10);
    // A spurious PMI: same reads, no writes but the LVT.
    d.msr().clear();
    assert!(handler_finds_nothing(&mut d, &state, &mut lvt));
    assert_eq!(
        d.msr().take_counts(),
        counts(0, 0, 2),
        "spurious: the reads only"
    );
    assert_eq!(lvt.0.len(), 2, "and the LVT write");
    assert_eq!(state.pmi().spurious(LogicalProcessor::T0), 1);
}

/// The traffic the bench reports, asserted: a PMI with 4 armed counters of
/// which 1 or all 4 overflowed, a spurious one, and the halt that finds an
/// owed period (it must read the counter to learn that; see the module
/// docs).
#[test]
fn pmi_and_halt_traffic_in_every_case() {
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    let n = SampleAfter::new(20, overflow_rule()).unwrap();
    let configs = [
        ("global_power_events:RUNNING:k", Escr::FsbEscr0),
        ("instr_retired:NBOGUSNTAG:k", Escr::CruEscr0),
        ("branch_retired:MMNP:k", Escr::CruEscr3),
        ("BSQ_cache_reference:RD_2ndL_HITS:k", Escr::BsuEscr0),
    ]
    .map(|(s, e)| (CounterConfig::counting(spec(s), e).sampling(n), e));
    let kinds = configs.map(|(c, e)| EventKind::for_spec(&c.event, e).unwrap());
    let h = [
        c.c0.configure(&mut d, &configs[0].0)
            .unwrap()
            .enable(&mut d)
            .unwrap()
            .erase(),
        c.c12
            .configure(&mut d, &configs[1].0)
            .unwrap()
            .enable(&mut d)
            .unwrap()
            .erase(),
        c.c14
            .configure(&mut d, &configs[2].0)
            .unwrap()
            .enable(&mut d)
            .unwrap()
            .erase(),
        c.c1.configure(&mut d, &configs[3].0)
            .unwrap()
            .enable(&mut d)
            .unwrap()
            .erase(),
    ];
    let (mut lvt, mut samples) = (Lvt::default(), Vec::new());
    // 4 armed, 1 overflowed.
    inject(&mut d, kinds[2], 21);
    d.msr().clear();
    assert!(service(&mut d, &state, &mut lvt, 1, &mut samples));
    assert_eq!(
        d.msr().take_counts(),
        counts(0, 2, 4),
        "4 armed, 1 overflowed"
    );
    // 4 armed, 4 overflowed, one PMI for all.
    for k in kinds {
        inject(&mut d, k, 20);
    }
    d.msr().clear();
    assert!(service(&mut d, &state, &mut lvt, 2, &mut samples));
    assert_eq!(
        d.msr().take_counts(),
        counts(0, 8, 4),
        "4 armed, 4 overflowed"
    );
    assert!(
        !service(&mut d, &state, &mut lvt, 3, &mut samples),
        "no PMI owed"
    );
    // Spurious.
    assert!(handler_finds_nothing(&mut d, &state, &mut lvt));
    assert_eq!(d.msr().take_counts(), counts(0, 0, 4), "spurious");
    assert_eq!(lvt.0.len(), 3, "one LVT write per PMI");
    // A halt that finds an owed period: CCCR, RDPMC, counter rewrite.
    inject(&mut d, kinds[0], 25);
    d.msr().clear();
    let [mut c0, ..] = h;
    c0.halt(&mut d).unwrap();
    assert_eq!(
        d.msr().take_counts(),
        counts(0, 2, 1),
        "halt, a period owed"
    );
    assert_eq!(state.pmi().periods_at_halt(0), 1);
    assert_eq!(state.pmi().periods(0), 2);
    assert_eq!(samples.len(), 5);
    let _ = c0;
}

#[test]
fn counting_halting_resuming_on_the_model() {
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    let c0 = c.c0.configure(&mut d, &running()).unwrap();
    inject(&mut d, RUNNING, 5);
    assert_eq!(
        c0.read(&mut d).unwrap(),
        0,
        "a Configured counter does not count"
    );
    let c0 = c0.enable(&mut d).unwrap();
    inject(&mut d, RUNNING, 100);
    let c0 = c0.halt(&mut d).unwrap();
    inject(&mut d, RUNNING, 100);
    assert_eq!(c0.read(&mut d).unwrap(), 100);
    let c0 = c0.resume(&mut d).unwrap();
    inject(&mut d, RUNNING, 23);
    assert_eq!(c0.read(&mut d).unwrap(), 123);
    // User-level events are not counted by a :k event.
    model(&mut d).inject(RUNNING.on(ModelLp::T0, Privilege::Usr, 7));
    // Nor T1's events by a T0 counter.
    model(&mut d).inject(RUNNING.on(ModelLp::T1, Privilege::Os, 7));
    assert_eq!(c0.read(&mut d).unwrap(), 123);
    let _c0 = c0.release(&mut d).unwrap();
    let m = model(&mut d);
    assert_eq!((m.cccr(0), m.counter(0)), (IDLE_CCCR, 0), "release zeroes");
}

#[test]
fn configuration_errors_leave_the_handle() {
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    let e = c.c4.configure(&mut d, &running()).unwrap_err();
    assert!(matches!(
        e.error,
        Error::Config(ConfigError::NotWired { .. })
    ));
    let bad = CounterConfig::counting(spec("instr_retired:NBOGUSNTAG"), Escr::FsbEscr0);
    let e = e.counter.configure(&mut d, &bad).unwrap_err();
    assert!(matches!(
        e.error,
        Error::Config(ConfigError::NotWired { .. })
    ));
    let c0 = c.c0.configure(&mut d, &running()).unwrap();
    let e = c.c1.configure(&mut d, &running()).unwrap_err();
    assert_eq!(
        e.error,
        Error::Config(ConfigError::EscrBusy {
            escr: Escr::FsbEscr0
        })
    );
    let e = e
        .counter
        .configure(
            &mut d,
            &CounterConfig::counting(spec("instr_retired:NBOGUSNTAG"), Escr::FsbEscr0),
        )
        .unwrap_err();
    assert_eq!(
        e.error,
        Error::Config(ConfigError::EscrNotAllowed {
            escr: Escr::FsbEscr0
        })
    );
    // Released ESCRs are free again.
    let _ = c0.release(&mut d).unwrap();
    assert!(e.counter.configure(&mut d, &running()).is_ok());

    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::northwood());
    let t1 = running().on(LogicalProcessor::T1);
    let e = c.c0.configure(&mut d, &t1).unwrap_err();
    assert_eq!(e.error, Error::Config(ConfigError::NoSuchLogicalProcessor));
}

#[test]
fn thread_1_counter_counts_and_interrupts_thread_1_only() {
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    let n = SampleAfter::new(10, overflow_rule()).unwrap();
    let c2 = c.c2.configure(
        &mut d,
        &CounterConfig {
            escr: Escr::FsbEscr1,
            ..running()
        }
        .on(LogicalProcessor::T1)
        .sampling(n),
    );
    let c2 = c2.unwrap().enable(&mut d).unwrap();
    let only_2 = CounterSet::EMPTY.with(Counter::BpuCounter2);
    assert_eq!(state.pmi().armed(LogicalProcessor::T1), only_2);
    assert!(state.pmi().armed(LogicalProcessor::T0).is_empty());
    inject(&mut d, RUNNING, 100);
    assert_eq!(
        c2.read(&mut d).unwrap(),
        n.preset(),
        "T0 events not counted"
    );
    model(&mut d).inject(RUNNING.on(ModelLp::T1, Privilege::Os, 11));
    assert!(model(&mut d).take_pmi(ModelLp::T0).is_none());
    assert!(model(&mut d).take_pmi(ModelLp::T1).is_some());
    let mut lvt = Lvt::default();
    let mut got = Vec::new();
    handle_pmi(
        state.logical(LogicalProcessor::T1),
        d.msr(),
        &mut lvt,
        entry(),
        7,
        |s| got.push(s),
    )
    .unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(state.pmi().periods(2), 1);
}

/// Conservation: events = periods x N + residual, for N = 1, 2 and larger,
/// with a PMI serviced whenever the model raises one.
#[test]
fn conservation_over_randomised_runs() {
    let mut rnd = crate::testing::rng(0x2545_f491_4f6c_dd1du64);
    for n in [1u64, 2, 3, 7, 100, 4096] {
        let state = crate::testing::netburst_pmu();
        let (mut d, c) = driver!(&state, Config::prescott_ht());
        let sa = SampleAfter::new(n, overflow_rule()).unwrap();
        let c0 = c.c0.configure(&mut d, &running().sampling(sa)).unwrap();
        let mut c0 = c0.enable(&mut d).unwrap().erase();
        let (mut lvt, mut samples, mut events) = (Lvt::default(), Vec::new(), 0u64);
        for step in 0..2000u64 {
            // A burst of events, injected in chunks that end at most at the
            // event that raises the PMI (the one after the overflow), which
            // is delivered before more events count: no skid.
            let mut left = 1 + rnd(3 * n);
            while left > 0 {
                let (owed, r) = sa.split(model(&mut d).counter(0));
                let chunk = if owed > 0 { 1 } else { left.min(n - r + 1) };
                inject(&mut d, RUNNING, chunk);
                events += chunk;
                left -= chunk;
                service(&mut d, &state, &mut lvt, step, &mut samples);
            }
            if rnd(5) == 0 {
                c0.halt(&mut d).unwrap();
                inject(&mut d, RUNNING, 3); // not counted
                c0.resume(&mut d).unwrap();
            }
        }
        let raw = c0.read(&mut d).unwrap();
        let (owed, residual) = sa.split(raw);
        let periods = state.pmi().periods(0);
        assert_eq!(events, (periods + owed) * n + residual, "N = {n}");
        let sampled: u64 = samples.iter().map(|s| u64::from(s.periods)).sum();
        assert_eq!(sampled + state.pmi().periods_at_halt(0), periods, "N = {n}");
        assert_eq!(state.pmi().spurious(LogicalProcessor::T0), 0);
        assert!(events / n - periods <= 1);
        c0.release(&mut d).unwrap();
        // The same owner again in the next round: give the PMU back first,
        // with every token.
        let c0 = counter::Handle::from_erased(c0).unwrap();
        let _ = d.give_back(Counters { c0, ..c });
    }
}

/// PMI skid (the model's, [`NetBurstModel::set_skid`]): with a skid of 1
/// to 100 events the PMI comes `1 + skid` events after the overflow, and
/// the handler, which re-arms relative to the count it reads, keeps those
/// events (and any the PMI's delivery adds) in the next period, or in
/// whole periods when they are more than `N`: each sample completes
/// exactly `1 + (1 + skid + late) div N` periods, and
/// `events = periods x N + residual` at the end.
#[test]
fn skid_of_1_to_100_events_keeps_every_count_exact() {
    let mut rnd = crate::testing::rng(0x5C1D_0001);
    crate::owner!(Skid);
    for skid in 1..=100u64 {
        for n in [3u64, 37, 250] {
            let state = crate::testing::netburst_pmu();
            let (mut d, c) = take::<Skid>(&state, Config::prescott_ht());
            model(&mut d).set_skid(skid);
            let sa = SampleAfter::new(n, overflow_rule()).unwrap();
            let c0 = c.c0.configure(&mut d, &running().sampling(sa)).unwrap();
            let c0 = c0.enable(&mut d).unwrap();
            let (mut lvt, mut samples, mut events) = (Lvt::default(), Vec::new(), 0u64);
            let mut left = 4 * (n + skid);
            while left > 0 {
                // Up to the event that raises the PMI, then `late` more
                // before the handler runs.
                let chunk = model(&mut d).events_without_pmi().clamp(1, left);
                inject(&mut d, RUNNING, chunk);
                (events, left) = (events + chunk, left - chunk);
                if !model(&mut d).pmi_pending(ModelLp::T0) {
                    continue;
                }
                let late = rnd(4).min(left);
                inject(&mut d, RUNNING, late);
                (events, left) = (events + late, left - late);
                let before = samples.len();
                assert!(service(&mut d, &state, &mut lvt, events, &mut samples));
                let got: &Sample = &samples[before];
                assert_eq!(
                    u64::from(got.periods),
                    1 + (1 + skid + late) / n,
                    "skid {skid}, N = {n}"
                );
            }
            let (owed, residual) = sa.split(c0.read(&mut d).unwrap());
            let periods = state.pmi().periods(0);
            assert_eq!(
                events,
                (periods + owed) * n + residual,
                "skid {skid}, N = {n}"
            );
            let sampled: u64 = samples.iter().map(|s| u64::from(s.periods)).sum();
            assert_eq!(sampled, periods, "skid {skid}, N = {n}");
            assert!(periods >= 3, "skid {skid}, N = {n}: {periods} periods");
            assert_eq!(state.pmi().spurious(LogicalProcessor::T0), 0);
            let c0 = c0.halt(&mut d).unwrap().release(&mut d).unwrap();
            let _ = d.give_back(Counters { c0, ..c });
        }
    }
}

/// A PMI raised but not yet taken when the counter is halted: the halt
/// accounts for the period, the late PMI is spurious, nothing is counted
/// twice; also the overflow-but-no-PMI-yet boundary.
#[test]
fn pmi_racing_a_halt_is_counted_once() {
    for extra in [0u64, 1, 2] {
        let state = crate::testing::netburst_pmu();
        let (mut d, c) = driver!(&state, Config::prescott_ht());
        let sa = SampleAfter::new(10, overflow_rule()).unwrap();
        let c0 = c.c0.configure(&mut d, &running().sampling(sa)).unwrap();
        let c0 = c0.enable(&mut d).unwrap();
        // 10 events overflow the counter; the 11th raises the PMI.
        inject(&mut d, RUNNING, 10 + extra);
        let raised = model(&mut d).pmi_pending(ModelLp::T0);
        assert_eq!(raised, extra > 0);
        let c0 = c0.halt(&mut d).unwrap();
        assert_eq!(state.pmi().periods_at_halt(0), 1);
        let (mut lvt, mut samples) = (Lvt::default(), Vec::new());
        if raised {
            assert!(service(&mut d, &state, &mut lvt, 1, &mut samples));
            assert!(samples.is_empty());
            assert_eq!(state.pmi().spurious(LogicalProcessor::T0), 1);
        }
        let c0 = c0.resume(&mut d).unwrap();
        inject(&mut d, RUNNING, 10 - extra);
        assert!(
            !service(&mut d, &state, &mut lvt, 2, &mut samples),
            "period not over"
        );
        inject(&mut d, RUNNING, 1);
        assert!(service(&mut d, &state, &mut lvt, 3, &mut samples));
        assert_eq!(samples.len(), 1);
        assert_eq!(state.pmi().periods(0), 2);
        let (owed, residual) = sa.split(c0.read(&mut d).unwrap());
        assert_eq!((owed, residual), (0, 1), "21 events = 2 x 10 + 1");
        let c0 = c0.halt(&mut d).unwrap().release(&mut d).unwrap();
        let _ = d.give_back(Counters { c0, ..c });
    }
}

#[test]
fn cascaded_pair_counts_past_40_bits_and_halts_both_ways() {
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    let low =
        c.c0.configure(&mut d, &running())
            .unwrap()
            .enable(&mut d)
            .unwrap();
    let high = c.c2.configure(
        &mut d,
        &CounterConfig {
            escr: Escr::FsbEscr1,
            ..running()
        },
    );
    let high = high.unwrap().cascade_from(&low, &mut d).unwrap();
    inject(&mut d, RUNNING, 1000);
    assert_eq!(
        high.read(&mut d).unwrap(),
        0,
        "waits for the low counter's overflow"
    );
    inject(&mut d, RUNNING, (1 << 40) - 1000 + 500);
    assert_eq!(low.read(&mut d).unwrap(), 500);
    assert_eq!(high.read(&mut d).unwrap(), 500);
    // Halt by clearing the alternate's OVF: the high counter stops.
    d.clear_overflow(&low).unwrap();
    inject(&mut d, RUNNING, 10);
    assert_eq!(
        (low.read(&mut d).unwrap(), high.read(&mut d).unwrap()),
        (510, 500)
    );
    // It is still cascaded: the next overflow of the low counter restarts it.
    inject(&mut d, RUNNING, (1 << 40) - 510 + 5);
    assert_eq!(high.read(&mut d).unwrap(), 505);
    // Halt by clearing CASCADE.
    let high = high.halt(&mut d).unwrap();
    inject(&mut d, RUNNING, 10);
    assert_eq!(
        (low.read(&mut d).unwrap(), high.read(&mut d).unwrap()),
        (15, 505)
    );
}

#[test]
fn erased_handles_check_the_same_rules() {
    let state = crate::testing::netburst_pmu();
    crate::owner!(Pkg);
    let (mut d, c) = take::<Pkg>(&state, Config::prescott_ht());
    let mut a = c.c0.erase();
    let e = a.enable(&mut d).unwrap_err();
    assert_eq!(
        e,
        ErasedError::Illegal {
            operation: Operation::Enable,
            state: StateTag::Unclaimed
        }
    );
    assert!(matches!(
        a.read(&mut d),
        Err(ErasedError::Illegal {
            operation: Operation::Read,
            ..
        })
    ));
    a.configure(&mut d, &running()).unwrap();
    a.enable(&mut d).unwrap();
    assert!(matches!(a.enable(&mut d), Err(ErasedError::Illegal { .. })));
    let mut b: AnyHandle<NetBurst> = c.c1.erase();
    b.configure(
        &mut d,
        &CounterConfig {
            escr: Escr::BsuEscr0,
            ..running()
        },
    )
    .unwrap_err();
    let mut c16 = c.c16.erase();
    let mut c14 = c.c14.erase();
    let instr = CounterConfig::counting(spec("instr_retired:NBOGUSNTAG"), Escr::CruEscr1);
    c14.configure(&mut d, &instr).unwrap();
    c16.configure(
        &mut d,
        &CounterConfig {
            escr: Escr::CruEscr0,
            ..instr
        },
    )
    .unwrap();
    assert_eq!(
        c14.cascade_from(&c16, &mut d),
        Err(ErasedError::NotCascadePair { from: 16, to: 14 })
    );
    c16.cascade_from(&c14, &mut d).unwrap();
    assert_eq!(c16.state(), StateTag::Cascaded);
    let typed = NetBurstHandle::<Pkg, 16, Configured>::from_erased(c16).unwrap_err();
    let typed =
        NetBurstHandle::<Pkg, 16, crate::counter::state::Cascaded>::from_erased(typed).unwrap();
    let _ = typed.halt(&mut d).unwrap();
    let _ = NetBurstHandle::<Pkg, 0, Enabled>::from_erased(a).unwrap();
}

#[test]
fn cascade_table_matches_the_arch_rule() {
    for from in 0..18u8 {
        for to in 0..18u8 {
            let listed = CASCADE_PAIRS.contains(&(from, to));
            assert_eq!(listed, NetBurst::can_cascade(from, to), "{from} -> {to}");
        }
    }
    assert_eq!(
        CASCADE_PAIRS.len(),
        18,
        "every counter has exactly one source"
    );
}

/// A counter that overflowed on the very last event, before
/// its own PMI, serviced by a PMI taken for another reason (here a call
/// with nothing pending) is re-armed with what it holds (0), not `-(N-1)`:
/// 6 events are 6, not 7.
#[test]
fn a_pmi_serviced_early_invents_no_event() {
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    let sa = SampleAfter::new(3, overflow_rule()).unwrap();
    let c0 = c.c0.configure(&mut d, &running().sampling(sa)).unwrap();
    let c0 = c0.enable(&mut d).unwrap();
    inject(&mut d, RUNNING, 3);
    assert!(
        !model(&mut d).pmi_pending(ModelLp::T0),
        "PMI not raised yet"
    );
    assert_ne!(model(&mut d).cccr(0) & 1 << 31, 0, "OVF set");
    let (mut lvt, mut samples) = (Lvt::default(), Vec::new());
    d.msr().clear();
    let out = handle_pmi(
        state.logical(LogicalProcessor::T0),
        d.msr(),
        &mut lvt,
        entry(),
        9,
        |s| samples.push(s),
    );
    let only_0 = CounterSet::EMPTY.with(Counter::BpuCounter0);
    assert_eq!(out.unwrap().overflowed, u64::from(only_0.bits()));
    assert_eq!(
        d.msr().take_counts(),
        counts(0, 2, 1),
        "same traffic as ever"
    );
    assert_eq!(
        c0.read(&mut d).unwrap(),
        sa.preset(),
        "-N: nothing invented"
    );
    inject(&mut d, RUNNING, 3);
    let (owed, residual) = sa.split(c0.read(&mut d).unwrap());
    let periods = state.pmi().periods(0);
    assert_eq!((periods + owed) * 3 + residual, 6);
    // The second overflow's own PMI comes with the 7th event.
    assert!(!model(&mut d).pmi_pending(ModelLp::T0));
    inject(&mut d, RUNNING, 1);
    let mut later = Vec::new();
    assert!(service(&mut d, &state, &mut lvt, 10, &mut later));
    assert_eq!(samples.len() + later.len(), 2);
    assert_eq!(state.pmi().periods(0), 2);
    assert_eq!(c0.read(&mut d).unwrap(), sa.at_residual(1), "7 = 2 x 3 + 1");
}

/// A counter that overflowed on the last event, with two counters on one event stream: sample-after 4
/// and 3; the 4th event is counter 2's PMI event and counter 0's overflow.
/// Counter 0 accounts 4 events, not 5.
#[test]
fn two_counters_on_one_stream_each_account_exactly() {
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    let (four, three) = (
        SampleAfter::new(4, overflow_rule()).unwrap(),
        SampleAfter::new(3, overflow_rule()).unwrap(),
    );
    let on_escr1 = CounterConfig {
        escr: Escr::FsbEscr1,
        ..running()
    };
    let a = c.c0.configure(&mut d, &running().sampling(four)).unwrap();
    let b = c.c2.configure(&mut d, &on_escr1.sampling(three)).unwrap();
    let (a, b) = (a.enable(&mut d).unwrap(), b.enable(&mut d).unwrap());
    inject(&mut d, RUNNING, 4);
    let (mut lvt, mut samples) = (Lvt::default(), Vec::new());
    assert!(service(&mut d, &state, &mut lvt, 5, &mut samples));
    assert_eq!(samples.len(), 2);
    assert_eq!(a.read(&mut d).unwrap(), four.preset(), "4 = 1 x 4 + 0");
    assert_eq!(
        b.read(&mut d).unwrap(),
        three.at_residual(1),
        "4 = 1 x 3 + 1"
    );
    assert_eq!(state.pmi().periods(0), 1);
    assert_eq!(state.pmi().periods(2), 1);
}

/// Randomised conservation: four sampling counters on both logical
/// processors (two on T0, one on T1 for each event), events arriving one
/// per clock or up to 4 in one clock, PMIs taken at once, late, for the
/// other logical processor, or spuriously, halts and resumes, and counters
/// released and reconfigured with a new sample-after value, often with an
/// overflow pending. For every configuration, `events = (periods + owed) x
/// N + residual` exactly at its release, and the samples plus the periods a
/// halt found add up to the periods.
#[test]
fn conservation_with_several_counters_both_threads_and_releases() {
    let mut rnd = crate::testing::rng(0x9e37_79b9_7f4a_7c15u64);
    const NS: [u64; 6] = [1, 2, 3, 7, 50, 300];
    let instr = |escr| CounterConfig::counting(spec("instr_retired:NBOGUSNTAG:k"), escr);
    // (counter, event kind, configuration without sampling)
    let setup = [
        (0u8, RUNNING, running()),
        (
            2,
            RUNNING,
            CounterConfig {
                escr: Escr::FsbEscr1,
                ..running()
            }
            .on(LogicalProcessor::T1),
        ),
        (12, INSTR, instr(Escr::CruEscr0)),
        (14, INSTR, instr(Escr::CruEscr1).on(LogicalProcessor::T1)),
    ];
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    let all = c.erase_all();
    let mut handles = all.map(Some);
    let mut h: Vec<AnyHandle<NetBurst>> = setup
        .iter()
        .map(|&(n, ..)| handles[usize::from(n)].take().unwrap())
        .collect();
    let mut n = [0u64; 4];
    let (mut events, mut sampled) = ([0u64; 4], [0u64; 4]);
    let mut checked = 0;
    for (i, &(_, _, cfg)) in setup.iter().enumerate() {
        n[i] = NS[rnd(6) as usize];
        h[i].configure(
            &mut d,
            &cfg.sampling(SampleAfter::new(n[i], overflow_rule()).unwrap()),
        )
        .unwrap();
        h[i].enable(&mut d).unwrap();
    }
    let lp_of = |i: usize| {
        if i.is_multiple_of(2) {
            ModelLp::T0
        } else {
            ModelLp::T1
        }
    };
    for step in 0..6000u64 {
        match rnd(12) {
            0..=5 => {
                let (kind, lp) = (if rnd(2) == 0 { RUNNING } else { INSTR }, rnd(2));
                let lp = if lp == 0 { ModelLp::T0 } else { ModelLp::T1 };
                let (per_clock, clocks) = if rnd(2) == 0 {
                    (1 + rnd(4), 1)
                } else {
                    (1, 1 + rnd(20))
                };
                for _ in 0..clocks {
                    let e = kind.on(lp, Privilege::Os, per_clock);
                    if per_clock == 1 {
                        model(&mut d).inject(e);
                    } else {
                        model(&mut d).cycle(&[e]);
                    }
                }
                for (i, &(_, k, _)) in setup.iter().enumerate() {
                    if k == kind && lp_of(i) == lp && h[i].state() == StateTag::Enabled {
                        events[i] += per_clock * clocks;
                    }
                }
            }
            6..=8 => {
                // T0's or T1's PMI, raised or not (then it is spurious).
                let lp = if rnd(2) == 0 {
                    LogicalProcessor::T0
                } else {
                    LogicalProcessor::T1
                };
                let model_lp = if lp == LogicalProcessor::T0 {
                    ModelLp::T0
                } else {
                    ModelLp::T1
                };
                model(&mut d).take_pmi(model_lp);
                let mut lvt = Lvt::default();
                handle_pmi(state.logical(lp), d.msr(), &mut lvt, entry(), step, |s| {
                    let i = setup.iter().position(|&(c, ..)| c == s.counter).unwrap();
                    sampled[i] += u64::from(s.periods);
                })
                .unwrap();
            }
            9 => {
                let x = &mut h[rnd(4) as usize];
                match x.state() {
                    StateTag::Enabled => x.halt(&mut d).unwrap(),
                    _ => x.resume(&mut d).unwrap(),
                }
            }
            _ => {
                let i = rnd(4) as usize;
                let s = SampleAfter::new(n[i], overflow_rule()).unwrap();
                let counter = Counter::from_index(setup[i].0).unwrap();
                let (owed, residual) = s.split(h[i].read(&mut d).unwrap());
                let periods = state.pmi().periods(counter.index());
                assert_eq!(
                    events[i],
                    (periods + owed) * n[i] + residual,
                    "counter {} N = {} step {step}",
                    setup[i].0,
                    n[i]
                );
                assert_eq!(
                    sampled[i] + state.pmi().periods_at_halt(counter.index()),
                    periods
                );
                checked += 1;
                h[i].release(&mut d).unwrap();
                n[i] = NS[rnd(6) as usize];
                let s = SampleAfter::new(n[i], overflow_rule()).unwrap();
                h[i].configure(&mut d, &setup[i].2.sampling(s)).unwrap();
                h[i].enable(&mut d).unwrap();
                (events[i], sampled[i]) = (0, 0);
            }
        }
    }
    assert!(checked > 200, "{checked} configurations checked");
}

/// Every catalog event, on every ESCR it allows and every counter that ESCR
/// feeds, programmed by the driver from its default spec (`name:k`), counts
/// exactly the occurrences the model injects for that spec
/// (`EventKind::for_spec`, which reads the model's own ESCR table): the
/// driver's encoders (event select, masks, ESCR select routing of SDM
/// Table 18-63, CPL and thread bits) against the model's decoding.
#[test]
fn every_catalog_event_counts_on_every_escr_and_counter_it_may_use() {
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    let mut all = c.erase_all();
    let mut checked = 0;
    for event in crate::arch::netburst::EventName::ALL {
        let info = event.info();
        // At-retirement events count tagged µops as they retire (SDM
        // Table 19-29): the tagging tests drive those through the model's
        // retirement path.
        if info.counting != crate::arch::netburst::Counting::NonRetirement {
            continue;
        }
        // The default mask, or the first mask for events without one.
        let spec = std::format!("{}:k", info.name)
            .parse::<EventSpec>()
            .or_else(|_| std::format!("{}:{}:k", info.name, info.masks[0].name).parse())
            .unwrap();
        for &escr in info.escrs {
            for counter in Counter::ALL.into_iter().filter(|&c| escr.feeds(c)) {
                let h = &mut all[counter.index() as usize];
                let config = CounterConfig::counting(spec, escr);
                if h.configure(&mut d, &config).is_err() {
                    // The driver refuses what the model does not have.
                    let m = Config::prescott_ht().model;
                    assert!(!escr.available_on(m), "{} {escr:?}", info.name);
                    continue;
                }
                h.enable(&mut d).unwrap();
                let kind = EventKind::for_spec(&spec, escr).unwrap();
                model(&mut d).inject(kind.on(ModelLp::T0, Privilege::Os, 7));
                assert_eq!(
                    h.read(&mut d).unwrap(),
                    7,
                    "{} on {escr:?} -> counter {counter:?}",
                    info.name
                );
                h.release(&mut d).unwrap();
                checked += 1;
            }
        }
    }
    assert!(checked >= 100, "{checked} placements checked");
}

/// One owner per driver: a second take of an owner fails while its driver
/// is live, touching no register; the driver knows its claimed counters and
/// is given back with every token, each released (the types make a claimed
/// one impossible to hand back); then the owner can be taken again.
#[test]
fn an_owner_is_taken_once_and_given_back_with_every_token() {
    let state = crate::testing::netburst_pmu();
    crate::owner!(Package0);
    crate::owner!(Other);
    let (mut d, c) = take::<Package0>(&state, Config::prescott_ht());
    let m = NetBurstModel::new(Config::prescott_ht());
    let info = cpu(&m);
    let again = Nb::<Package0>::take(Recording::new(m.clone()), &info, &state);
    let Err(InitError::AlreadyTaken) = again else {
        panic!("a second driver of one owner")
    };
    // Another owner type on the same package: its logical processors are
    // served by the live driver already.
    let Err(InitError::LogicalProcessorTaken {
        lp: LogicalProcessor::T0,
    }) = Nb::<Other>::take(Recording::new(m.clone()), &info, &state)
    else {
        panic!("a second driver of one logical processor")
    };
    let other_pmu = crate::testing::netburst_pmu();
    let (o, oc) = Nb::<Other>::take(Recording::new(m), &info, &other_pmu).unwrap();
    let mut m2 = o.give_back(oc);
    assert_eq!(
        m2.take_counts(),
        counts(0, 18, 0),
        "the other package's reset only"
    );
    let c12 = c
        .c12
        .configure(
            &mut d,
            &CounterConfig::counting(spec("instr_retired:NBOGUSNTAG:k"), Escr::CruEscr0),
        )
        .unwrap();
    assert_eq!(d.claimed(), CounterSet::EMPTY.with(Counter::IqCounter0));
    let c12 = c12.release(&mut d).unwrap();
    assert!(d.claimed().is_empty());
    let _ = d.give_back(Counters { c12, ..c });
    assert!(!state.is_served(LogicalProcessor::T0) && !state.is_served(LogicalProcessor::T1));
    // Taken again, with a new set of tokens.
    let (d2, c2) = take::<Package0>(&state, Config::prescott_ht());
    let _ = d2.give_back(c2);
}

/// The run-time handles refuse a handle issued by another driver.
#[test]
fn erased_handles_refuse_a_foreign_driver() {
    let state = crate::testing::netburst_pmu();
    let other = crate::testing::netburst_pmu();
    let (mut a, ca) = driver!(&state, Config::prescott_ht());
    let (mut b, _cb) = driver!(&other, Config::prescott_ht());
    let mut h = ca.c0.erase();
    assert_eq!(
        h.configure(&mut b, &running()),
        Err(ErasedError::ForeignHandle { counter: 0 })
    );
    assert!(b.claimed().is_empty(), "driver B wrote nothing");
    h.configure(&mut a, &running()).unwrap();
    assert_eq!(
        h.read(&mut b),
        Err(ErasedError::ForeignHandle { counter: 0 })
    );
    assert_eq!(
        std::format!("{}", ErasedError::<()>::ForeignHandle { counter: 0 }),
        "the handle of counter 0 was issued by another driver"
    );
    h.release(&mut a).unwrap();
}

/// Every driver error says what went wrong.
#[test]
fn driver_errors_display_their_reason() {
    let e: Error<()> = ConfigError::NotWired {
        escr: Escr::CruEscr0,
        counter: Counter::BpuCounter0,
    }
    .into();
    assert_eq!(
        std::format!("{e}"),
        "configuration refused: MSR_CRU_ESCR0 does not feed counter 0: it feeds counters 12, 13 and 16 (SDM Table 18-63)"
    );
    let e: Error<()> = ConfigError::NotWired {
        escr: Escr::BpuEscr0,
        counter: Counter::IqCounter0,
    }
    .into();
    assert_eq!(
        std::format!("{e}"),
        "configuration refused: MSR_BPU_ESCR0 does not feed counter 12: it feeds counters 0 and 1 (SDM Table 18-63)"
    );
    assert_eq!(
        std::format!("{}", InitError::<()>::AlreadyTaken),
        "the PMU's owner is taken by a live driver"
    );
    let ia: crate::arch::itanium::driver::Error<()> =
        crate::arch::itanium::driver::ConfigError::UnitBusy {
            unit: crate::arch::itanium::driver::Unit::Iear,
            owner: 5,
        }
        .into();
    assert_eq!(
        std::format!("{ia}"),
        "configuration refused: counter 5 owns the I-EAR"
    );
}

/// Unclaimed tokens carry no payload: the 18 tokens `take` hands out are
/// zero-sized, and a claimed handle is the size of its images.
#[test]
fn unclaimed_tokens_are_zero_sized() {
    crate::owner!(Sized);
    use core::mem::size_of;
    assert_eq!(
        size_of::<NetBurstHandle<Sized, 0, crate::counter::state::Unclaimed>>(),
        0
    );
    assert_eq!(size_of::<Counters<Sized>>(), 0);
    assert_eq!(
        size_of::<NetBurstHandle<Sized, 0, Enabled>>(),
        size_of::<Programmed>()
    );
}

/// `FORCE_OVF` through the driver (SDM 18.15.5.5): every increment is an
/// overflow and raises a PMI on the increment after it (18.15.5.8). The
/// handler accounts the increments since its last service and clears
/// `OVF` without reloading (1 RDPMC, 1 WRMSR), the counter counts on, and
/// a halt accounts what no PMI serviced: increments = periods, exactly.
#[test]
fn force_ovf_interrupts_on_every_increment_and_counts_on() {
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    let refused = c.c0.configure(
        &mut d,
        &running()
            .every_increment()
            .sampling(SampleAfter::new(5, overflow_rule()).unwrap()),
    );
    // `sampling` after `every_increment` replaces it: accepted.
    let c0 = refused.unwrap();
    assert!(!c0.programmed().cccr().force_ovf());
    let c0 = c0.release(&mut d).unwrap();
    let both = CounterConfig {
        force_ovf: true,
        ..running().sampling(SampleAfter::new(5, overflow_rule()).unwrap())
    };
    let e = c0.configure(&mut d, &both).unwrap_err();
    assert_eq!(e.error, Error::Config(ConfigError::ForceOvfWithSampling));
    let c0 = e
        .counter
        .configure(&mut d, &running().every_increment())
        .unwrap();
    assert!(c0.programmed().cccr().force_ovf());
    let c0 = c0.enable(&mut d).unwrap();
    let (mut lvt, mut samples) = (Lvt::default(), Vec::new());
    let mut pmis = 0;
    for _ in 0..20 {
        inject(&mut d, RUNNING, 1);
        d.msr().clear();
        if service(&mut d, &state, &mut lvt, 0x40, &mut samples) {
            assert_eq!(d.msr().take_counts(), counts(0, 1, 1), "RDPMC, CCCR");
            pmis += 1;
        }
    }
    assert_eq!(c0.read(&mut d).unwrap(), 20, "counting on from 0");
    // An increment sets OVF and the next one raises the PMI: with the
    // handler clearing OVF at once, every second increment interrupts.
    assert_eq!(pmis, 10);
    let serviced: u64 = samples.iter().map(|s| u64::from(s.periods)).sum();
    assert_eq!(serviced, state.pmi().periods(0));
    // The last increment's overflow has no PMI yet: the halt accounts it.
    let c0 = c0.halt(&mut d).unwrap();
    assert_eq!(state.pmi().periods(0), 20, "every increment accounted once");
    assert_eq!(state.pmi().periods_at_halt(0), 20 - serviced);
    assert!(
        !service(&mut d, &state, &mut lvt, 0x40, &mut samples),
        "withdrawn"
    );
    let _ = c0.release(&mut d).unwrap();
}

/// The handler's rare cases in one PMI with usual ones, in both orders: a
/// `FORCE_OVF` counter and a counter three periods past its overflow leave
/// the handler's loop for its out-of-line continuation, which services
/// them and every counter after them exactly as the loop would (the loop
/// keeps nothing for them). Exact samples, periods, counter
/// values and traffic.
#[test]
fn rare_counters_hand_the_rest_of_the_pmi_out_of_line() {
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    let n = SampleAfter::new(20, overflow_rule()).unwrap();
    let cfg = |s: &str, e: Escr| CounterConfig::counting(spec(s), e);
    let (c0, c1, c12, c14) = (
        cfg("global_power_events:RUNNING:k", Escr::FsbEscr0),
        cfg("BSQ_cache_reference:RD_2ndL_HITS:k", Escr::BsuEscr0),
        cfg("instr_retired:NBOGUSNTAG:k", Escr::CruEscr0),
        cfg("branch_retired:MMNP:k", Escr::CruEscr3),
    );
    let kinds = [&c0, &c1, &c12, &c14].map(|c| EventKind::for_spec(&c.event, c.escr).unwrap());
    let h0 = c.c0.configure(&mut d, &c0.sampling(n)).unwrap();
    let h1 = c.c1.configure(&mut d, &c1.every_increment()).unwrap();
    let h12 = c.c12.configure(&mut d, &c12.sampling(n)).unwrap();
    let h14 = c.c14.configure(&mut d, &c14.sampling(n)).unwrap();
    let (h0, h1, h12, h14) = (
        h0.enable(&mut d).unwrap(),
        h1.enable(&mut d).unwrap(),
        h12.enable(&mut d).unwrap(),
        h14.enable(&mut d).unwrap(),
    );
    let (mut lvt, mut samples) = (Lvt::default(), Vec::new());
    // Counter 0 the usual overflow, 1 three increments, 12 three periods
    // and 5 events past its preset (45 past its overflow), 14 the usual
    // overflow: the loop hands over at counter 1.
    for (k, events) in [(0, 21), (1, 3), (2, 65), (3, 21)] {
        inject(&mut d, kinds[k], events);
    }
    d.msr().clear();
    assert!(service(&mut d, &state, &mut lvt, 0x10, &mut samples));
    assert_eq!(
        d.msr().take_counts(),
        counts(0, 2 + 1 + 2 + 2, 4),
        "4 RDPMC; counter and CCCR, CCCR only for FORCE_OVF"
    );
    assert_eq!(
        samples,
        [(0, 1), (1, 3), (12, 3), (14, 1)].map(|(c, p)| Sample::new(c, p, 0x10))
    );
    assert_eq!(lvt.0, [entry()]);
    // The second PMI: counter 0 hands over (one event into its period,
    // 47 more: two periods and 8 events), then 1 (one increment), 12 the
    // usual overflow (5 + 16), 14 not past (1 + 4).
    for (k, events) in [(0, 47), (1, 1), (2, 16), (3, 4)] {
        inject(&mut d, kinds[k], events);
    }
    d.msr().clear();
    assert!(service(&mut d, &state, &mut lvt, 0x20, &mut samples));
    assert_eq!(d.msr().take_counts(), counts(0, 2 + 1 + 2, 4));
    assert_eq!(
        samples[4..],
        [(0, 2), (1, 1), (12, 1)].map(|(c, p)| Sample::new(c, p, 0x20))
    );
    assert_eq!(lvt.0.len(), 2);
    assert_eq!(state.pmi().spurious(LogicalProcessor::T0), 0);
    for (c, periods) in [(0, 3), (1, 4), (12, 4), (14, 1)] {
        assert_eq!(state.pmi().periods(c), periods, "counter {c}");
    }
    assert_eq!(h0.read(&mut d).unwrap(), n.at_residual(8));
    assert_eq!(h1.read(&mut d).unwrap(), 4, "FORCE_OVF counts on");
    assert_eq!(h12.read(&mut d).unwrap(), n.at_residual(1));
    assert_eq!(h14.read(&mut d).unwrap(), n.at_residual(5));
    assert!(handler_finds_nothing(&mut d, &state, &mut lvt));
    let _ = (h0, h1, h12, h14);
}

/// The handler's loop visits the list of armed counters the driver keeps
/// beside the armed word; a PMI that interrupts the driver while it
/// rewrites the list (count 0) is serviced from the armed word, out of
/// line, with the same accesses in the same order.
#[test]
fn a_pmi_while_the_driver_lists_its_counters_reads_the_armed_word() {
    use crate::access::Access;
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    let n = SampleAfter::new(50, overflow_rule()).unwrap();
    let cfg = |s: &str, e: Escr| CounterConfig::counting(spec(s), e).sampling(n);
    let h14 = c
        .c14
        .configure(&mut d, &cfg("branch_retired:MMNP:k", Escr::CruEscr3));
    let h0 = c.c0.configure(&mut d, &running().sampling(n));
    let h12 = c
        .c12
        .configure(&mut d, &cfg("instr_retired:NBOGUSNTAG:k", Escr::CruEscr0));
    let (h14, h0, h12) = (
        h14.unwrap().enable(&mut d).unwrap(),
        h0.unwrap().enable(&mut d).unwrap(),
        h12.unwrap().enable(&mut d).unwrap(),
    );
    assert_eq!(state.pmi().listed(LogicalProcessor::T0), [0, 12, 14]);
    // 51 events, then 50: both times one past the overflow (the reload
    // counts the PMI's event), so both PMIs read the same values.
    let pmi = |d: &mut Nb<'_, _>, events: u64, listing: bool| {
        inject(d, RUNNING, events);
        inject(d, INSTR, events);
        if listing {
            state.pmi().interrupt_listing(LogicalProcessor::T0);
        }
        d.msr().clear();
        let (mut lvt, mut samples) = (Lvt::default(), Vec::new());
        assert!(service(d, &state, &mut lvt, 0x40, &mut samples));
        assert_eq!(lvt.0, [entry()]);
        (d.msr().log().to_vec(), samples)
    };
    let (listed, samples) = pmi(&mut d, 51, false);
    let (interrupted, again) = pmi(&mut d, 50, true);
    assert_eq!(state.pmi().listed(LogicalProcessor::T0), []);
    let order: Vec<_> = listed
        .iter()
        .map(|a| match *a {
            Access::Rdpmc { index, .. } => ("rdpmc", index),
            Access::WriteMsr { msr, .. } => ("wrmsr", msr),
            _ => ("other", 0),
        })
        .collect();
    let (counter, cccr) = (|c: u32| 0x300 + c, |c: u32| 0x360 + c);
    assert_eq!(
        order,
        [
            ("rdpmc", 0),
            ("wrmsr", counter(0)),
            ("wrmsr", cccr(0)),
            ("rdpmc", 12),
            ("wrmsr", counter(12)),
            ("wrmsr", cccr(12)),
            ("rdpmc", 14),
        ]
    );
    assert_eq!(interrupted, listed, "the same accesses, values and order");
    let expected = [(0, 1), (12, 1)].map(|(c, p)| Sample::new(c, p, 0x40));
    assert_eq!((samples, again), (expected.to_vec(), expected.to_vec()));
    assert_eq!([0, 12, 14].map(|c| state.pmi().periods(c)), [2, 2, 0]);
    // The next change lists the counters again.
    let h14 = h14.halt(&mut d).unwrap();
    assert_eq!(state.pmi().listed(LogicalProcessor::T0), [0, 12]);
    let h0 = h0.halt(&mut d).unwrap();
    assert_eq!(state.pmi().listed(LogicalProcessor::T0), [12]);
    let h12 = h12.halt(&mut d).unwrap();
    assert_eq!(state.pmi().listed(LogicalProcessor::T0), []);
    let _ = (h0, h12, h14);
}

/// A zero-sized backend, as `X86Msr` is, over a model kept per test
/// thread: the handler hands its out-of-line continuation a reference of
/// its own to a zero-sized backend, not the caller's.
struct ZeroSized;

std::thread_local! {
    static ZERO_SIZED: core::cell::RefCell<Option<Model>> =
        const { core::cell::RefCell::new(None) };
}

impl ZeroSized {
    fn with<T>(f: impl FnOnce(&mut Model) -> T) -> T {
        ZERO_SIZED.with_borrow_mut(|m| f(m.as_mut().expect("a model installed")))
    }
}

impl crate::access::MsrAccess for ZeroSized {
    type Error = <Model as crate::access::MsrAccess>::Error;
    fn read_msr(&mut self, msr: u32) -> Result<u64, Self::Error> {
        Self::with(|m| crate::access::MsrAccess::read_msr(m, msr))
    }
    fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Self::Error> {
        Self::with(|m| crate::access::MsrAccess::write_msr(m, msr, value))
    }
    fn rdpmc(&mut self, index: u32) -> Result<u64, Self::Error> {
        Self::with(|m| crate::access::MsrAccess::rdpmc(m, index))
    }
}

/// What one PMI with a rare counter did: the accesses, samples, periods
/// of counters 0, 1 and 12, and their values after it.
type RarePmi = (Vec<crate::access::Access>, Vec<Sample>, [u64; 3], [u64; 3]);

/// A usual overflow (counter 0), a `FORCE_OVF` counter with three
/// increments (1, where the loop hands over) and a counter three periods
/// past its overflow (12), serviced through the driver's own backend or,
/// with `zero_sized`, through [`ZeroSized`] over the same model.
fn rare_pmi<O: Owner>(zero_sized: bool) -> RarePmi {
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = take::<O>(&state, Config::prescott_ht());
    let n = SampleAfter::new(20, overflow_rule()).unwrap();
    let cfg = |s: &str, e: Escr| CounterConfig::counting(spec(s), e);
    let (c0, c1, c12) = (
        cfg("global_power_events:RUNNING:k", Escr::FsbEscr0),
        cfg("BSQ_cache_reference:RD_2ndL_HITS:k", Escr::BsuEscr0),
        cfg("instr_retired:NBOGUSNTAG:k", Escr::CruEscr0),
    );
    let kinds = [&c0, &c1, &c12].map(|c| EventKind::for_spec(&c.event, c.escr).unwrap());
    let h0 = c.c0.configure(&mut d, &c0.sampling(n)).unwrap();
    let h1 = c.c1.configure(&mut d, &c1.every_increment()).unwrap();
    let h12 = c.c12.configure(&mut d, &c12.sampling(n)).unwrap();
    let (h0, h1, h12) = (
        h0.enable(&mut d).unwrap(),
        h1.enable(&mut d).unwrap(),
        h12.enable(&mut d).unwrap(),
    );
    for (k, events) in [(0, 21), (1, 3), (2, 65)] {
        inject(&mut d, kinds[k], events);
    }
    assert!(model(&mut d).take_pmi(ModelLp::T0).is_some());
    d.msr().clear();
    let (mut lvt, mut samples) = (Lvt::default(), Vec::new());
    let sink = |s: Sample<Capture>| samples.push(s.with_payload(()));
    let out = if zero_sized {
        let spare = Recording::new(NetBurstModel::new(Config::prescott_ht()));
        ZERO_SIZED.set(Some(core::mem::replace(d.msr(), spare)));
        let out = handle_pmi(
            state.logical(LogicalProcessor::T0),
            &mut ZeroSized,
            &mut lvt,
            entry(),
            0x10,
            sink,
        );
        *d.msr() = ZERO_SIZED.take().unwrap();
        out
    } else {
        handle_pmi(
            state.logical(LogicalProcessor::T0),
            d.msr(),
            &mut lvt,
            entry(),
            0x10,
            sink,
        )
    };
    let bits = |cs: &[u8]| cs.iter().fold(0, |b, &c| b | 1 << c);
    assert_eq!(out.unwrap().overflowed, bits(&[0, 1, 12]));
    assert_eq!(lvt.0, [entry()]);
    let log = d.msr().log().to_vec();
    let periods = [0, 1, 12].map(|c| state.pmi().periods(c));
    let values = [
        h0.read(&mut d).unwrap(),
        h1.read(&mut d).unwrap(),
        h12.read(&mut d).unwrap(),
    ];
    assert_eq!(
        (periods, values),
        ([1, 3, 3], [n.at_residual(1), 3, n.at_residual(5)])
    );
    (log, samples, periods, values)
}

#[test]
fn a_zero_sized_backend_reaches_the_out_of_line_handler() {
    assert_eq!(core::mem::size_of::<ZeroSized>(), 0);
    crate::owner!(Direct);
    crate::owner!(Zst);
    let direct = rare_pmi::<Direct>(false);
    let zst = rare_pmi::<Zst>(true);
    assert_eq!(
        direct.0.len(),
        3 + 2 + 1 + 2,
        "3 RDPMC, counter and CCCR, CCCR"
    );
    assert_eq!(
        direct.1,
        [(0, 1), (1, 3), (12, 3)].map(|(c, p)| Sample::new(c, p, 0x10))
    );
    assert_eq!(
        zst, direct,
        "the same accesses in the same order, samples, counts"
    );
    // Nothing armed: the handler goes out of line at once, with no access.
    let state = crate::testing::netburst_pmu();
    ZERO_SIZED.set(Some(Recording::new(NetBurstModel::new(
        Config::prescott_ht(),
    ))));
    let mut lvt = Lvt::default();
    let pmi = state.pmi();
    let out = handle_pmi(
        state.logical(LogicalProcessor::T0),
        &mut ZeroSized,
        &mut lvt,
        entry(),
        0,
        |_| {},
    );
    assert!(out.unwrap().is_spurious());
    assert_eq!(
        (lvt.0, pmi.spurious(LogicalProcessor::T0)),
        (vec![entry()], 1)
    );
    assert_eq!(ZERO_SIZED.take().unwrap().take_counts().total(), 0);
}

/// Counters 16 and 17 cascade only from 14 and 15 (SDM 18.15.5.6), and a
/// cascaded counter halts either way (18.15.5.5): clearing the alternate's
/// `OVF`, or clearing its own `CASCADE`.
#[test]
fn cascades_into_16_and_17_halt_both_ways() {
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    let cfg = |s: &str, e: Escr| {
        let spec = spec(s);
        (
            CounterConfig::counting(spec, e),
            EventKind::for_spec(&spec, e).unwrap(),
        )
    };
    let (low_cfg, low) = cfg("instr_retired:NBOGUSNTAG:k", Escr::CruEscr1);
    let (high_cfg, high) = cfg("instr_retired:NBOGUSTAG:k", Escr::CruEscr0);
    let c14 = c
        .c14
        .configure(&mut d, &low_cfg)
        .unwrap()
        .enable(&mut d)
        .unwrap();
    let c16 = c
        .c16
        .configure(&mut d, &high_cfg)
        .unwrap()
        .cascade_from(&c14, &mut d)
        .unwrap();
    inject(&mut d, high, 5);
    assert_eq!(c16.read(&mut d).unwrap(), 0, "gated until 14 overflows");
    inject(&mut d, low, 1 << 40);
    inject(&mut d, high, 7);
    assert_eq!(c16.read(&mut d).unwrap(), 7);
    d.clear_overflow(&c14).unwrap();
    inject(&mut d, high, 3);
    assert_eq!(c16.read(&mut d).unwrap(), 7, "stopped: 14's OVF cleared");
    inject(&mut d, low, 1 << 40);
    let c16 = c16.halt(&mut d).unwrap();
    inject(&mut d, high, 4);
    assert_eq!(c16.read(&mut d).unwrap(), 7, "stopped: CASCADE cleared");
    let _ = (c16.release(&mut d).unwrap(), c14.release(&mut d).unwrap());
    // 15 -> 17, on two side-1 ESCRs.
    let (low_cfg, low) = cfg("instr_retired:NBOGUSNTAG:k", Escr::CruEscr1);
    let (high_cfg, high) = cfg("branch_retired:MMNP:k", Escr::CruEscr3);
    let c15 = c
        .c15
        .configure(&mut d, &low_cfg)
        .unwrap()
        .enable(&mut d)
        .unwrap();
    let c17 = c
        .c17
        .configure(&mut d, &high_cfg)
        .unwrap()
        .cascade_from(&c15, &mut d)
        .unwrap();
    inject(&mut d, low, (1 << 40) + 2);
    inject(&mut d, high, 6);
    assert_eq!(
        (c15.read(&mut d).unwrap(), c17.read(&mut d).unwrap()),
        (2, 6)
    );
    let _ = (c17, c15);
}

/// The CCCR's filter through the driver, with exact counts on the model
/// (SDM 18.15.3): the event's per-clock count goes through COMPARE
/// (`count > THRESHOLD`), COMPLEMENT (`count <= THRESHOLD`) and EDGE (a
/// rising edge of the comparison's output), set by the event string's
/// `thr=`, `cmpl` and `e` modifiers.
#[test]
fn compare_complement_threshold_and_edge_count_exactly() {
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    // Instructions retired per clock.
    let clocks = [0u64, 1, 2, 3, 4, 3, 0, 5, 1];
    let cases = [
        ("instr_retired:NBOGUSNTAG:k", 19, "every instruction"),
        (
            "instr_retired:NBOGUSNTAG:k:thr=2",
            4,
            "clocks with more than 2",
        ),
        (
            "instr_retired:NBOGUSNTAG:k:cmpl:thr=2",
            5,
            "clocks with at most 2",
        ),
        (
            "instr_retired:NBOGUSNTAG:k:e:thr=2",
            2,
            "rising edges of more than 2",
        ),
        (
            "instr_retired:NBOGUSNTAG:k:cmpl:thr=0",
            2,
            "clocks with none",
        ),
    ];
    let mut token = Some(c.c12);
    for (s, expected, what) in cases {
        let cfg = CounterConfig::counting(spec(s), Escr::CruEscr0);
        let kind = EventKind::for_spec(&cfg.event, Escr::CruEscr0).unwrap();
        let h = token.take().unwrap().configure(&mut d, &cfg).unwrap();
        assert_eq!(
            h.programmed().cccr().compare(),
            s.contains("thr=") || s.contains(":e"),
            "{s}"
        );
        let h = h.enable(&mut d).unwrap();
        for &n in &clocks {
            let events = [kind.on(ModelLp::T0, Privilege::Os, n)];
            model(&mut d).cycle(if n == 0 { &[] } else { &events });
        }
        assert_eq!(h.read(&mut d).unwrap(), expected, "{s}: {what}");
        token = Some(h.release(&mut d).unwrap());
    }
}

/// The extended cascade through the driver (CCCR bit 11, SDM Table 18-65):
/// counter 12 counts only while counter 16 has overflowed, on models 2, 3,
/// 4 and 6; refused, handle given back, on a model without it and for a
/// pair it does not define. Halting works both ways, one CCCR write each.
#[test]
fn extended_cascade_16_into_12() {
    let state = crate::testing::netburst_pmu();
    let cfg = |s: &str, e: Escr| {
        let spec = spec(s);
        (
            CounterConfig::counting(spec, e),
            EventKind::for_spec(&spec, e).unwrap(),
        )
    };
    let (low_cfg, low) = cfg("instr_retired:NBOGUSNTAG:k", Escr::CruEscr0);
    let (high_cfg, high) = cfg("branch_retired:MMNP:k", Escr::CruEscr2);
    // Northwood (model 2) has it too; a model 1 part does not.
    let (mut old, c) = driver!(&state, Config::new(1, false));
    let c16 = c
        .c16
        .configure(&mut old, &low_cfg)
        .unwrap()
        .enable(&mut old)
        .unwrap();
    let c12 = c.c12.configure(&mut old, &high_cfg).unwrap();
    let e = old.cascade_extended(c12, &c16).unwrap_err();
    assert_eq!(
        e.error,
        Error::Config(ConfigError::NoExtendedCascade { from: 16, to: 12 })
    );
    // Erased, the pair is checked against the model at run time.
    let mut any12 = e.counter.erase();
    let any16 = c16.erase();
    assert_eq!(
        any12.cascade_from(&any16, &mut old),
        Err(ErasedError::NotCascadePair { from: 16, to: 12 })
    );
    any12.release(&mut old).unwrap();
    let mut any16 = any16;
    any16.release(&mut old).unwrap();

    // Another model: another package.
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    let c16 = c
        .c16
        .configure(&mut d, &low_cfg)
        .unwrap()
        .enable(&mut d)
        .unwrap();
    let c13 = c.c13.configure(&mut d, &high_cfg).unwrap();
    let e = d.cascade_extended(c13, &c16).unwrap_err();
    assert_eq!(
        e.error,
        Error::Config(ConfigError::NoExtendedCascade { from: 16, to: 13 }),
        "13 has no extended cascade"
    );
    let _ = e.counter.release(&mut d).unwrap();
    let c12 = c.c12.configure(&mut d, &high_cfg).unwrap();
    d.msr().clear();
    let c12 = d.cascade_extended(c12, &c16).unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 1, 0), "one CCCR write");
    assert_ne!(model(&mut d).cccr(12) & 1 << 11, 0, "bit 11 set");
    assert_eq!(model(&mut d).cccr(12) & 1 << 30, 0, "not CASCADE");
    inject(&mut d, high, 5);
    assert_eq!(c12.read(&mut d).unwrap(), 0, "gated until 16 overflows");
    inject(&mut d, low, 1 << 40);
    inject(&mut d, high, 7);
    assert_eq!(c12.read(&mut d).unwrap(), 7);
    d.msr().clear();
    d.clear_overflow(&c16).unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 1, 0));
    inject(&mut d, high, 3);
    assert_eq!(c12.read(&mut d).unwrap(), 7, "stopped: 16's OVF cleared");
    // clear_overflow on the extended-cascaded counter keeps bit 11.
    d.clear_overflow(&c12).unwrap();
    assert_ne!(model(&mut d).cccr(12) & 1 << 11, 0);
    inject(&mut d, low, 1 << 40);
    let c12 = c12.halt(&mut d).unwrap();
    assert_eq!(
        model(&mut d).cccr(12) & (1 << 11 | 1 << 12 | 1 << 30),
        0,
        "halted"
    );
    inject(&mut d, high, 4);
    assert_eq!(c12.read(&mut d).unwrap(), 7, "stopped by the halt");
    // The erased form: the same pair, checked at run time against the model.
    let mut any12 = c12.release(&mut d).unwrap().erase();
    let any16 = c16.erase();
    any12.configure(&mut d, &high_cfg).unwrap();
    d.msr().clear();
    any12.cascade_from(&any16, &mut d).unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 1, 0));
    assert_eq!(any12.state(), StateTag::Cascaded);
    assert_ne!(model(&mut d).cccr(12) & 1 << 11, 0, "bit 11 set");
    any12.release(&mut d).unwrap();
    let mut any16 = any16;
    any16.release(&mut d).unwrap();
}

/// The run-time handles reach every CCCR feature the
/// typed ones do: `FORCE_OVF`, the 14->16 cascade with both ways of
/// halting it (the alternate's `OVF` cleared through
/// `clear_overflow_erased`, or the cascaded counter halted), counts exact
/// on the model.
#[test]
fn erased_handles_reach_force_ovf_and_both_ways_of_halting_a_cascade() {
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    let all = c.erase_all();
    let [
        mut c0,
        c1,
        _,
        _,
        _,
        _,
        _,
        _,
        _,
        _,
        _,
        _,
        _,
        _,
        mut c14,
        _,
        mut c16,
        _,
    ] = all;
    // FORCE_OVF: a PMI on every second increment, every increment accounted.
    c0.configure(&mut d, &running().every_increment()).unwrap();
    c0.enable(&mut d).unwrap();
    let (mut lvt, mut samples) = (Lvt::default(), Vec::new());
    let mut pmis = 0;
    for _ in 0..8 {
        inject(&mut d, RUNNING, 1);
        pmis += u32::from(service(&mut d, &state, &mut lvt, 0x40, &mut samples));
    }
    c0.halt(&mut d).unwrap();
    assert_eq!(
        (c0.read(&mut d).unwrap(), pmis, state.pmi().periods(0)),
        (8, 4, 8)
    );
    // The cascade: 16 counts only while 14 has overflowed.
    let low = CounterConfig::counting(spec("instr_retired:NBOGUSNTAG:k"), Escr::CruEscr1);
    let high = CounterConfig::counting(spec("instr_retired:NBOGUSTAG:k"), Escr::CruEscr0);
    let tagged = EventKind::new(EscrGroup::Cru01, 0x02, 1 << 1);
    c14.configure(&mut d, &low).unwrap();
    c14.enable(&mut d).unwrap();
    c16.configure(&mut d, &high).unwrap();
    c16.cascade_from(&c14, &mut d).unwrap();
    inject(&mut d, tagged, 5);
    assert_eq!(c16.read(&mut d).unwrap(), 0, "waits for 14's overflow");
    inject(&mut d, INSTR, 1 << 40);
    inject(&mut d, tagged, 7);
    assert_eq!(c16.read(&mut d).unwrap(), 7);
    // Halted the first way: 14's OVF cleared (one CCCR write).
    d.msr().clear();
    d.clear_overflow_erased(&c14).unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 1, 0));
    inject(&mut d, tagged, 3);
    assert_eq!(c16.read(&mut d).unwrap(), 7, "stopped: 14's OVF clear");
    // Restarted by 14's next overflow, then halted the second way.
    inject(&mut d, INSTR, 1 << 40);
    inject(&mut d, tagged, 2);
    assert_eq!(c16.read(&mut d).unwrap(), 9);
    c16.halt(&mut d).unwrap();
    inject(&mut d, tagged, 4);
    assert_eq!(c16.read(&mut d).unwrap(), 9, "stopped by the halt");
    // Refused as the typed form would not compile: an unclaimed counter.
    assert_eq!(
        d.clear_overflow_erased(&c1),
        Err(ErasedError::Illegal {
            operation: Operation::ClearOverflow,
            state: StateTag::Unclaimed
        })
    );
    for h in [&mut c0, &mut c14, &mut c16] {
        h.release(&mut d).unwrap();
    }
}

mod group;
mod interrupts;
mod ownership;
mod package;
mod tagging;

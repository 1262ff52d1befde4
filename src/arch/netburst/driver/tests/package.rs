//! Two drivers on one package (SDM 18.16: the logical processors share the
//! counters, CCCRs and ESCRs): one per logical processor, each with its own
//! MSR backend (a view of the one model through its logical processor) and
//! the package's one `PmiState`. Claims are package-wide and atomic; the
//! threaded test runs two drivers on two host threads at once. Counts come
//! from the model.

use std::boxed::Box;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};
use std::thread;

use super::*;
use crate::model::netburst::Fault;

/// One logical processor's view of a model shared by two drivers.
pub(super) struct View<'m> {
    model: &'m Mutex<NetBurstModel>,
    lp: ModelLp,
}

impl View<'_> {
    fn with<R>(&self, f: impl FnOnce(&mut crate::model::netburst::ThreadView<'_>) -> R) -> R {
        let mut m = self.model.lock().unwrap();
        let mut view = m.thread(self.lp).expect("a Hyper-Threading model");
        f(&mut view)
    }
}

impl crate::access::MsrAccess for View<'_> {
    type Error = Fault;
    fn read_msr(&mut self, msr: u32) -> Result<u64, Fault> {
        self.with(|v| crate::access::MsrAccess::read_msr(v, msr))
    }
    fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Fault> {
        self.with(|v| crate::access::MsrAccess::write_msr(v, msr, value))
    }
    fn rdpmc(&mut self, index: u32) -> Result<u64, Fault> {
        self.with(|v| crate::access::MsrAccess::rdpmc(v, index))
    }
}

pub(super) type Lpd<'s, 'm, O> = NetBurstDriver<'s, O, Recording<View<'m>, 64>>;

pub(super) fn lp_driver<'s, 'm, O: Owner>(
    lp: LogicalProcessor,
    model: &'m Mutex<NetBurstModel>,
    state: &'s NetBurstPmu,
) -> (Lpd<'s, 'm, O>, Counters<O>) {
    let info = cpu(&model.lock().unwrap());
    let view = View {
        model,
        lp: match lp {
            LogicalProcessor::T0 => ModelLp::T0,
            LogicalProcessor::T1 => ModelLp::T1,
        },
    };
    NetBurstDriver::take_for(lp, Recording::new(view), &info, state).unwrap()
}

fn config(s: &str, escr: Escr, lp: LogicalProcessor) -> CounterConfig {
    CounterConfig::counting(spec(s), escr).on(lp)
}

#[test]
fn two_drivers_share_one_package() {
    use LogicalProcessor::{T0, T1};
    crate::owner!(Cpu0);
    crate::owner!(Cpu1);
    let model = Mutex::new(NetBurstModel::new(Config::prescott_ht()));
    let state = crate::testing::netburst_pmu();
    let (mut a, ca) = lp_driver::<Cpu0>(T0, &model, &state);
    assert_eq!(
        a.msr().take_counts(),
        counts(0, 18, 0),
        "the first driver idles every CCCR"
    );
    let c0 = ca
        .c0
        .configure(
            &mut a,
            &config("global_power_events:RUNNING:k", Escr::FsbEscr0, T0),
        )
        .unwrap()
        .enable(&mut a)
        .unwrap();
    let (mut b, cb) = lp_driver::<Cpu1>(T1, &model, &state);
    assert_eq!(
        b.msr().take_counts(),
        counts(0, 0, 0),
        "the second touches nothing"
    );
    let running = |lp, n| {
        model
            .lock()
            .unwrap()
            .inject(RUNNING.on(lp, Privilege::Os, n))
    };
    running(ModelLp::T0, 5);
    assert_eq!(c0.read(&mut a).unwrap(), 5, "T0's counter kept counting");

    // The package's claims: the counter, then the ESCR, are taken.
    let t1_running = config("global_power_events:RUNNING:k", Escr::FsbEscr0, T1);
    let e = cb.c0.configure(&mut b, &t1_running).unwrap_err();
    assert_eq!(
        e.error,
        Error::Config(ConfigError::CounterClaimed(Counter::BpuCounter0))
    );
    let e1 = cb.c1.configure(&mut b, &t1_running).unwrap_err();
    assert_eq!(
        e1.error,
        Error::Config(ConfigError::EscrBusy {
            escr: Escr::FsbEscr0
        })
    );
    // Each driver configures its own logical processor's counters only.
    let e2 = cb
        .c2
        .configure(
            &mut b,
            &config("global_power_events:RUNNING:k", Escr::FsbEscr1, T0),
        )
        .unwrap_err();
    assert_eq!(
        e2.error,
        Error::Config(ConfigError::OtherLogicalProcessor { lp: T0 })
    );
    assert_eq!(
        b.msr().take_counts(),
        counts(0, 0, 0),
        "refusals write nothing"
    );
    let c2 = e2
        .counter
        .configure(
            &mut b,
            &config("global_power_events:RUNNING:k", Escr::FsbEscr1, T1),
        )
        .unwrap()
        .enable(&mut b)
        .unwrap();
    running(ModelLp::T1, 7);
    running(ModelLp::T0, 3);
    assert_eq!(
        c0.read(&mut a).unwrap(),
        8,
        "T0's events only (Table 18-29)"
    );
    assert_eq!(c2.read(&mut b).unwrap(), 7, "T1's events only");

    // A's release frees the counter and its ESCR for B.
    let _ = c0.release(&mut a).unwrap();
    let c0b = e
        .counter
        .configure(&mut b, &t1_running)
        .unwrap()
        .enable(&mut b)
        .unwrap();
    running(ModelLp::T1, 2);
    assert_eq!(c0b.read(&mut b).unwrap(), 2);
    let _ = a.retire();
    let _ = (
        c0b.release(&mut b).unwrap(),
        c2.release(&mut b).unwrap(),
        e1.counter,
    );
    let _ = b.retire();
    // No live driver: the next one resets the PMU again.
    crate::owner!(Cpu0Again);
    let (mut again, _) = lp_driver::<Cpu0Again>(T0, &model, &state);
    assert_eq!(again.msr().take_counts(), counts(0, 18, 0));
    // T1 exists only with Hyper-Threading.
    crate::owner!(NoHt);
    let m = NetBurstModel::new(Config::northwood());
    let info = cpu(&m);
    let other = crate::testing::netburst_pmu();
    let refused = NetBurstDriver::<NoHt, _>::take_for(T1, m, &info, &other);
    assert!(matches!(refused, Err(InitError::NoSuchLogicalProcessor)));
}

const ROUNDS: u32 = 10_000;
// SAFETY: the stress test's shared model is a package of its own.
static STRESS_STATE: NetBurstPmu = unsafe { NetBurstPmu::new() };
static HOLDER: [AtomicU8; 18] = [const { AtomicU8::new(0) }; 18];
/// Every counter a `global_power_events` ESCR is wired to: the FSB ESCRs
/// feed counters 0-3, so both threads want the same few.
const WANTED: [(usize, Escr); 4] = [
    (0, Escr::FsbEscr0),
    (1, Escr::FsbEscr0),
    (2, Escr::FsbEscr1),
    (3, Escr::FsbEscr1),
];

/// One thread's rounds, as owner `O` on logical processor `lp`: claims won
/// and lost.
fn stress<O: Owner>(
    lp: LogicalProcessor,
    me: u8,
    seed: u64,
    model: &'static Mutex<NetBurstModel>,
) -> (u32, u32) {
    let (mut d, c) = lp_driver::<O>(lp, model, &STRESS_STATE);
    let mut handles = c.erase_all();
    let mut rnd = crate::testing::rng(seed);
    let (mut won, mut lost) = (0u32, 0u32);
    for _ in 0..ROUNDS {
        let (n, escr) = WANTED[rnd(4) as usize];
        let h = &mut handles[n];
        match h.configure(&mut d, &config("global_power_events:RUNNING:k", escr, lp)) {
            Ok(()) => {
                let was = HOLDER[n].swap(me, Ordering::AcqRel);
                assert_eq!(was, 0, "counter {n} held twice");
                h.enable(&mut d).unwrap();
                h.halt(&mut d).unwrap();
                assert_eq!(HOLDER[n].swap(0, Ordering::AcqRel), me);
                h.release(&mut d).unwrap();
                won += 1;
            }
            Err(ErasedError::Driver(Error::Config(
                ConfigError::CounterClaimed(_) | ConfigError::EscrBusy { .. },
            ))) => lost += 1,
            Err(other) => panic!("{other:?}"),
        }
    }
    let _ = d.retire();
    (won, lost)
}

/// Two drivers on two host threads claim, configure, enable, halt and
/// release counters of one package at once, 10,000 rounds each: no counter
/// or ESCR is ever held by both (each holder marks the counter in a table
/// with an atomic swap that must find it free), no model fault.
#[test]
fn two_threads_claim_at_once() {
    crate::owner!(Thread0);
    crate::owner!(Thread1);
    let model: &'static Mutex<NetBurstModel> = Box::leak(Box::new(Mutex::new(NetBurstModel::new(
        Config::prescott_ht(),
    ))));
    let t0 = thread::spawn(move || stress::<Thread0>(LogicalProcessor::T0, 1, 1, model));
    let t1 = thread::spawn(move || stress::<Thread1>(LogicalProcessor::T1, 2, 2, model));
    let (a, b) = (t0.join().unwrap(), t1.join().unwrap());
    assert_eq!(a.0 + a.1, ROUNDS);
    assert_eq!(b.0 + b.1, ROUNDS);
    assert!(a.0 > 0 && b.0 > 0, "both won claims: {a:?} {b:?}");
    std::println!(
        "two threads, {ROUNDS} rounds each: T0 won {} lost {}, T1 won {} lost {}",
        a.0,
        a.1,
        b.0,
        b.1
    );
    assert_eq!(STRESS_STATE.claimed_counters(), CounterSet::EMPTY);
}

/// A multiplexer on T0 rotates beside T1's driver holding FSB_ESCR0: it
/// schedules around the package's claims (`NetBurstDriver::occupied`), so
/// its FSB events take turns on FSB_ESCR1 alone, one at a time, and no
/// rotation is refused.
#[test]
fn a_multiplexer_schedules_around_the_other_logical_processor() {
    use crate::arch::netburst::multiplex::Multiplexer;
    use crate::arch::netburst::schedule::Part;
    use LogicalProcessor::{T0, T1};
    crate::owner!(Mux0);
    crate::owner!(Mux1);
    let model = Mutex::new(NetBurstModel::new(Config::prescott_ht()));
    let state = crate::testing::netburst_pmu();
    let (mut d0, c0) = lp_driver::<Mux0>(T0, &model, &state);
    let (mut d1, c1) = lp_driver::<Mux1>(T1, &model, &state);
    let running = config("global_power_events:RUNNING:k", Escr::FsbEscr0, T1);
    let held = c1.c0.configure(&mut d1, &running).unwrap();
    let list = [
        (spec("global_power_events:RUNNING:k"), T0),
        (spec("bnr:BIT0:k"), T0),
        (spec("instr_retired:NBOGUSNTAG:k"), T0),
    ];
    let mut mux = Multiplexer::<3>::new(Part::new(3, 1), c0.erase_all(), &list).unwrap();
    for _ in 0..40 {
        mux.tick(&mut d0, 1).unwrap();
        assert_eq!(mux.running().filter(|&i| i < 2).count(), 1, "one FSB event");
    }
    mux.finish(&mut d0, 1).unwrap();
    let running: [u64; 3] = core::array::from_fn(|i| mux.results()[i].running);
    assert_eq!(running, [20, 20, 40]);
    assert!(mux.into_handles().is_ok());
    let _ = held.release(&mut d1).unwrap();
}

//! Interrupts at any instant: the counters overflow before every
//! register access of every driver operation (and after it), and the PMI
//! is taken after the call and, where the contract lets it land inside, at
//! that access or any later one of the call ([`sweep`]: a PMI comes some
//! instructions after its overflow), as a fixed vector and as an NMI;
//! after each, conservation and the register state.
//!
//! # What the architectural PMU's contract allows
//!
//! The handler shares its state with the driver through atomics with one
//! writer at a time, the handler of the logical processor or the driver
//! halting a counter it has disarmed first ([`PmiState`]): a single-counter
//! call (configure, enable, halt, resume, read, release) may be
//! interrupted anywhere by the handler of its own CPU, by the vector or the
//! NMI alike. A group operation and a multiplexer's rotation run inside the
//! driver's freeze bracket, which is called with the PMU interrupt masked
//! ([`crate::counter::Driver::freeze`], [`crate::counter::Group`]): there a
//! vector PMI raised inside the call is taken when it returns; an NMI is
//! taken where it lands.
//!
//! # The rig
//!
//! Three general counters of a Skylake model: `X` (IA32_PMC0,
//! instructions, a sample every 5), the one the operations act on; `S`
//! (PMC1, core cycles, every 7), always sampling, so that every PMI has
//! work; `B` (PMC2, instructions), counting. An overflow brings 8 of each
//! event: every running sampling counter passes its overflow, by up to 7
//! events (one or two periods). Each interleaving runs with `X` started in
//! 5 phases of `S`'s period. The ground truth is the model's: the
//! events each counter counted are the increments the injections gave it.
//! After each run, for every claimed counter: a sampling one conserves
//! `counted = (periods + owed) x N + residual`, its samples add up to its
//! periods less those a halt found, and, every PMI delivered, it is not
//! past its overflow and its status bit is clear; a counting one holds
//! exactly what it counted; its `IA32_PERFEVTSELx` is the handle's image
//! and its `IA32_PERF_GLOBAL_CTRL` bit is set exactly while it is enabled;
//! an unclaimed counter's select and count are 0 and its enable bit clear;
//! the
//! handler's armed set is exactly the running sampling counters.

use super::*;
use crate::arch::archperf::ArchPerfPmu;
use crate::counter::{AnyHandle, StateTag};
use crate::testing::{At, Interrupt, Interrupting, sweep};

const X: usize = 0;
const S: usize = 1;
const B: usize = 2;

/// How the PMI is delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Delivery {
    /// A fixed vector, held while interrupts are masked.
    Vector,
    /// An NMI, which nothing masks.
    Nmi,
}

impl Delivery {
    const ALL: [Delivery; 2] = [Delivery::Vector, Delivery::Nmi];

    fn entry(self) -> LvtPerfCounter {
        match self {
            Delivery::Vector => entry(),
            Delivery::Nmi => LvtPerfCounter::new(PmiDelivery::Nmi),
        }
    }
}

/// The PMU interrupt: where the events that overflow the counters happen
/// and where the PMI is taken (access numbers of the call under test;
/// `None`: after it), the handler, and what it all counted.
struct Pmi<'s> {
    pmu: &'s ArchPerfPmu,
    entry: LvtPerfCounter,
    overflow_at: Option<usize>,
    take_at: Option<usize>,
    /// Per general counter, the events the model counted.
    counted: [u64; 4],
    samples: Vec<Sample>,
    lvt: Vec<LvtPerfCounter>,
    handled: u64,
    /// An overflow raised the PMI (none does while the PMU is stopped).
    raised: bool,
}

impl Pmi<'_> {
    fn inject(&mut self, m: &mut ArchPerfModel, (select, umask): (u8, u8), n: u64) {
        let mask = (1u64 << m.config().gp_bits()) - 1;
        let before: [u64; 4] = core::array::from_fn(|c| m.counter(c));
        m.inject(Event::new(select, umask, n));
        for (c, counted) in self.counted.iter_mut().enumerate() {
            *counted += m.counter(c).wrapping_sub(before[c]) & mask;
        }
    }

    /// Every running sampling counter past its overflow, the PMI raised.
    fn overflow(&mut self, m: &mut ArchPerfModel) {
        self.inject(m, INSTRUCTIONS, 8);
        self.inject(m, CYCLES, 8);
        self.raised |= m.pmi_pending();
    }

    /// The handler, if the PMI is pending.
    fn deliver(&mut self, m: &mut ArchPerfModel) {
        if !m.take_pmi() {
            return;
        }
        self.handled += 1;
        let mut lvt = Lvt::default();
        let samples = &mut self.samples;
        handle_pmi(self.pmu, m, &mut lvt, self.entry, self.handled, |s| {
            samples.push(s.with_payload(()))
        })
        .unwrap();
        self.lvt.extend(lvt.0);
    }
}

impl Interrupt<ArchPerfModel> for Pmi<'_> {
    fn before(&mut self, at: usize, m: &mut ArchPerfModel) {
        if self.overflow_at == Some(at) {
            self.overflow(m);
        }
        if self.take_at == Some(at) {
            self.deliver(m);
        }
    }
}

type Regs<'s> = Interrupting<ArchPerfModel, Pmi<'s>>;

/// The operations swept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Configure,
    Enable,
    Halt,
    Resume,
    Read,
    Release,
    GroupStart,
    GroupStop,
    GroupRead,
}

impl Op {
    const ALL: [Op; 9] = [
        Op::Configure,
        Op::Enable,
        Op::Halt,
        Op::Resume,
        Op::Read,
        Op::Release,
        Op::GroupStart,
        Op::GroupStop,
        Op::GroupRead,
    ];

    /// Inside the freeze bracket, called with the PMU interrupt masked.
    const fn masked(self) -> bool {
        matches!(self, Op::GroupStart | Op::GroupStop | Op::GroupRead)
    }
}

/// A driver of a fresh model with the rig at an operation's starting point,
/// and the handles.
struct Rig<'s, O: Owner> {
    d: ArchPerfDriver<'s, O, Regs<'s>>,
    h: [Option<AnyHandle<ArchPerfmon>>; 12],
}

impl<'s, O: Owner> Rig<'s, O> {
    fn new(pmu: &'s ArchPerfPmu, op: Op, delivery: Delivery, phase: u64) -> Self {
        let m = ArchPerfModel::new(Config::skylake());
        let info = cpu(&m);
        let pmi = Pmi {
            pmu,
            entry: delivery.entry(),
            overflow_at: None,
            take_at: None,
            counted: [0; 4],
            samples: Vec::new(),
            lvt: Vec::new(),
            handled: 0,
            raised: false,
        };
        let (d, c) = ArchPerfDriver::take(Interrupting::new(m, pmi), &info, pmu).unwrap();
        let mut rig = Rig {
            d,
            h: c.erase_all(),
        };
        rig.bring(S, StateTag::Enabled);
        // Where `S` is in its period when `X` starts.
        let r = rig.d.msr();
        r.hook.inject(&mut r.inner, CYCLES, phase);
        r.hook.deliver(&mut r.inner);
        let x = match op {
            Op::Configure => StateTag::Unclaimed,
            Op::Enable | Op::GroupStart => StateTag::Configured,
            Op::Resume => StateTag::Halted,
            _ => StateTag::Enabled,
        };
        rig.bring(X, x);
        let b = match op {
            Op::GroupStart => StateTag::Halted,
            _ => StateTag::Enabled,
        };
        rig.bring(B, b);
        // Every counter somewhere in a period, a PMI or two behind it.
        rig.between_calls();
        rig
    }

    fn config(&self, n: usize) -> CounterConfig {
        let sa = |n| SampleAfter::new(n, self.d.overflow_rule()).unwrap();
        match n {
            X => CounterConfig::counting(spec("instructions")).sampling(sa(5)),
            S => CounterConfig::counting(spec("cycles")).sampling(sa(7)),
            _ => CounterConfig::counting(spec("instructions")),
        }
    }

    /// `f` on counter `n`'s handle, with the driver.
    fn on<R>(
        &mut self,
        n: usize,
        f: impl FnOnce(&mut AnyHandle<ArchPerfmon>, &mut ArchPerfDriver<'s, O, Regs<'s>>) -> R,
    ) -> R {
        f(self.h[n].as_mut().unwrap(), &mut self.d)
    }

    fn configure(&mut self, n: usize) {
        let config = self.config(n);
        self.on(n, |h, d| h.configure(d, &config).unwrap());
    }

    fn bring(&mut self, n: usize, to: StateTag) {
        if to == StateTag::Unclaimed {
            return;
        }
        self.configure(n);
        if to == StateTag::Configured {
            return;
        }
        self.on(n, |h, d| h.enable(d).unwrap());
        self.between_calls();
        if to == StateTag::Halted {
            self.on(n, |h, d| h.halt(d).unwrap());
        }
    }

    /// An overflow between two calls, its PMI taken there.
    fn between_calls(&mut self) {
        let r = self.d.msr();
        r.hook.overflow(&mut r.inner);
        r.hook.deliver(&mut r.inner);
    }

    fn group(
        &mut self,
        f: impl FnOnce(&mut Group<ArchPerfmon, 2>, &mut ArchPerfDriver<'s, O, Regs<'s>>),
    ) {
        let members = [self.h[X].take().unwrap(), self.h[B].take().unwrap()];
        let mut g = Group::new(members).unwrap();
        f(&mut g, &mut self.d);
        let [x, b] = g.into_members();
        (self.h[X], self.h[B]) = (Some(x), Some(b));
    }

    fn run(&mut self, op: Op) {
        match op {
            Op::Configure => self.configure(X),
            Op::Enable => self.on(X, |h, d| h.enable(d).unwrap()),
            Op::Halt => self.on(X, |h, d| h.halt(d).unwrap()),
            Op::Resume => self.on(X, |h, d| h.resume(d).unwrap()),
            Op::Read => {
                self.on(X, |h, d| h.read(d).unwrap());
            }
            Op::Release => self.on(X, |h, d| h.release(d).unwrap()),
            Op::GroupStart => self.group(|g, d| g.start(d).unwrap()),
            Op::GroupStop => self.group(|g, d| g.stop(d).unwrap()),
            Op::GroupRead => self.group(|g, d| {
                g.read(d).unwrap();
            }),
        }
    }

    /// Conservation and the register state (module docs).
    fn check(&mut self, what: &str) {
        let state = self.d.pmi_state();
        let mut running = CounterSet::EMPTY;
        let r = self.d.msr();
        let (m, pmi) = (&r.inner, &r.hook);
        for n in 0..4 {
            let counter = Counter::general(n as u8).unwrap();
            let enabled = m.global_ctrl() & 1 << n != 0;
            let Some(h) = self.h[n]
                .as_ref()
                .filter(|h| h.state() != StateTag::Unclaimed)
            else {
                assert_eq!(
                    (m.evtsel(n), enabled),
                    (0, false),
                    "{what}: counter {n} unclaimed"
                );
                continue;
            };
            let p = h.programmed();
            assert_eq!(
                m.evtsel(n),
                p.evtsel().bits(),
                "{what}: counter {n}'s select"
            );
            assert_eq!(
                enabled,
                h.state() == StateTag::Enabled,
                "{what}: counter {n} ({:?}) in GLOBAL_CTRL",
                h.state()
            );
            let status = m.global_status() & 1 << n != 0;
            let raw = m.counter(n);
            let Some(sa) = p.sampling() else {
                assert!(!status, "{what}: counter {n} counts, no overflow");
                assert_eq!(raw, pmi.counted[n], "{what}: counter {n} counts exactly");
                continue;
            };
            let (owed, residual) = sa.split(raw);
            // Every overflow was followed by the PMI, the last delivered: a
            // running counter left past its overflow would wait 2^48 events.
            assert_eq!(
                (status, owed),
                (false, 0),
                "{what}: counter {n} ({:?}) serviced, raw {raw:#x}",
                h.state()
            );
            if h.state() == StateTag::Enabled {
                running = running.with(counter);
            }
            let periods = state.periods(n as u8);
            assert_eq!(
                pmi.counted[n],
                (periods + owed) * sa.get() + residual,
                "{what}: counter {n} conserves its events"
            );
            let sampled: u64 = pmi
                .samples
                .iter()
                .filter(|s| usize::from(s.counter) == n)
                .map(|s| u64::from(s.periods))
                .sum();
            assert_eq!(
                sampled + state.periods_at_halt(n as u8),
                periods,
                "{what}: counter {n}'s samples, none lost or counted twice"
            );
        }
        assert_eq!(state.armed(), running, "{what}: armed");
        assert_eq!(
            pmi.lvt.len() as u64,
            pmi.handled,
            "{what}: one LVT write per PMI"
        );
        assert!(
            pmi.lvt.iter().all(|&e| e == pmi.entry),
            "{what}: the LVT entry"
        );
    }
}

/// Every operation; the overflow before every access and the PMI taken
/// after the call and, where the contract lets it land inside, at that
/// access and at every later one ([`sweep`]), as a vector and as an NMI:
/// conservation and the register state after each.
#[test]
fn a_pmi_at_every_access_of_every_operation() {
    crate::owner!(Swept);
    let (mut runs, mut with_pmi) = (0, 0);
    for op in Op::ALL {
        for (delivery, phase) in Delivery::ALL
            .into_iter()
            .flat_map(|d| (0..5).map(move |p| (d, p)))
        {
            let inside = delivery == Delivery::Nmi || !op.masked();
            runs += sweep(inside, |overflow, take| {
                let what = format!(
                    "{op:?} phase {phase}, {delivery:?}: overflow {overflow:?}, PMI {take:?}"
                );
                let pmu = crate::testing::archperf_pmu();
                let mut rig = Rig::<Swept>::new(&pmu, op, delivery, phase);
                let r = rig.d.msr();
                let handled = r.hook.handled;
                r.hook.raised = false;
                (r.hook.overflow_at, r.hook.take_at) = (overflow.access(), take.access());
                r.arm();
                rig.run(op);
                let r = rig.d.msr();
                let accesses = r.accesses();
                let last = overflow.access().max(take.access());
                assert!(last.is_none_or(|a| a < accesses), "{what}: in the call");
                if overflow == At::After {
                    r.hook.overflow(&mut r.inner);
                }
                // A PMI still pending is taken once the call returns.
                r.hook.deliver(&mut r.inner);
                assert!(
                    !r.hook.raised || r.hook.handled > handled,
                    "{what}: the PMI was taken"
                );
                with_pmi += usize::from(r.hook.handled > handled);
                rig.check(&what);
                retire(rig);
                accesses
            });
        }
    }
    std::println!("architectural PMU: {runs} interleavings, a PMI taken in {with_pmi}");
}

/// Gives the PMU back with every token (each handle released first).
fn retire<O: Owner>(mut rig: Rig<'_, O>) {
    let r = rig.d.msr();
    (r.hook.overflow_at, r.hook.take_at) = (None, None);
    for n in 0..12 {
        if let Some(h) = rig.h[n]
            .as_mut()
            .filter(|h| h.state() != StateTag::Unclaimed)
        {
            h.release(&mut rig.d).unwrap();
        }
    }
    let Ok(counters) = Counters::from_erased(rig.h) else {
        panic!("every token back")
    };
    let _ = rig.d.give_back(counters);
}

/// The events a multiplexer rotates on PMC0-PMC2 (raw selects the overflow
/// does not bring), each 100 per tick.
const ROTATED: [u8; 4] = [0x10, 0x11, 0x12, 0x13];

/// What a rotation leaves that the PMI must not change: the multiplexer's
/// counts, and PMC0-PMC2's selects, enable bits and counts.
type Rotated = (Vec<crate::multiplex::Multiplexed>, [u64; 3], u64, [u64; 3]);

/// A multiplexer's rotation ([`Multiplexer::tick`]) with the overflow
/// before every access and the PMI taken after the call (a vector: the
/// rotation's bracket is called with the PMU interrupt masked) or also at
/// that access and at every later one (an NMI), `S` (PMC3, cycles, every
/// 5) sampling beside the multiplexer so that the PMI has work: the
/// rotation's counts and registers are those of the run without an
/// interrupt (the overflow's cycles are not among the rotated events), and
/// `S` conserves its events, serviced, its samples exact.
#[test]
fn a_pmi_at_every_access_of_a_multiplexer_rotation() {
    use crate::arch::archperf::multiplex::Multiplexer;
    crate::owner!(Rotating);
    let (mut runs, mut with_pmi) = (0, 0);
    for (delivery, phase) in Delivery::ALL
        .into_iter()
        .flat_map(|d| (0..5).map(move |p| (d, p)))
    {
        let mut reference: Option<Rotated> = None;
        runs += sweep(delivery == Delivery::Nmi, |overflow, take| {
            let what = format!(
                "rotation phase {phase}, {delivery:?}: overflow {overflow:?}, PMI {take:?}"
            );
            let pmu = crate::testing::archperf_pmu();
            let m = ArchPerfModel::new(Config::skylake());
            let info = cpu(&m);
            let pmi = Pmi {
                pmu: &pmu,
                entry: delivery.entry(),
                overflow_at: None,
                take_at: None,
                counted: [0; 4],
                samples: Vec::new(),
                lvt: Vec::new(),
                handled: 0,
                raised: false,
            };
            let (mut d, c) =
                ArchPerfDriver::<Rotating, _>::take(Interrupting::new(m, pmi), &info, &pmu)
                    .unwrap();
            let mut handles = c.erase_all();
            let mut s = handles[3].take().unwrap();
            let n = SampleAfter::new(5, d.overflow_rule()).unwrap();
            let config = CounterConfig::counting(spec("cycles")).sampling(n);
            s.configure(&mut d, &config).unwrap();
            s.enable(&mut d).unwrap();
            let events = ROTATED.map(|s| EventSpec::raw(s, 0));
            let mut mux = Multiplexer::<4>::new(d.cpu(), handles, &events).unwrap();
            let tick = |d: &mut ArchPerfDriver<'_, Rotating, Regs<'_>>| {
                let r = d.msr();
                for select in ROTATED {
                    r.inner.inject(Event::new(select, 0, 100));
                }
                r.hook.inject(&mut r.inner, CYCLES, 8);
                r.hook.deliver(&mut r.inner);
            };
            let r = d.msr();
            r.hook.inject(&mut r.inner, CYCLES, phase);
            mux.tick(&mut d, 0).unwrap();
            for _ in 0..2 {
                tick(&mut d);
                mux.tick(&mut d, 1).unwrap();
            }
            tick(&mut d);
            let r = d.msr();
            let handled = r.hook.handled;
            (r.hook.overflow_at, r.hook.take_at) = (overflow.access(), take.access());
            r.arm();
            mux.tick(&mut d, 1).unwrap();
            let r = d.msr();
            let accesses = r.accesses();
            let last = overflow.access().max(take.access());
            assert!(last.is_none_or(|a| a < accesses), "{what}: in the call");
            if overflow == At::After {
                r.hook.overflow(&mut r.inner);
            }
            r.hook.deliver(&mut r.inner);
            with_pmi += usize::from(r.hook.handled > handled);
            (r.hook.overflow_at, r.hook.take_at) = (None, None);
            let model = &r.inner;
            let rotated: Rotated = (
                mux.results().to_vec(),
                core::array::from_fn(|n| model.evtsel(n)),
                model.global_ctrl() & 0b111,
                core::array::from_fn(|n| model.counter(n)),
            );
            match &reference {
                None => reference = Some(rotated),
                Some(r) => assert_eq!(&rotated, r, "{what}: the rotation"),
            }
            let r = d.msr();
            let (pmi, raw) = (&r.hook, r.inner.counter(3));
            let (owed, residual) = n.split(raw);
            let periods = pmu.pmi().periods(3);
            assert_eq!(owed, 0, "{what}: S serviced");
            assert_eq!(
                pmi.counted[3],
                periods * 5 + residual,
                "{what}: S conserves its events"
            );
            let sampled: u64 = pmi.samples.iter().map(|s| u64::from(s.periods)).sum();
            assert_eq!(sampled, periods, "{what}: S's samples");
            assert_eq!(pmu.pmi().armed().bits(), 1 << 3, "{what}: armed");
            assert_eq!(
                r.inner.global_status(),
                0,
                "{what}: every overflow acknowledged"
            );
            mux.finish(&mut d, 0).unwrap();
            s.release(&mut d).unwrap();
            let Ok(mut handles) = mux.into_handles() else {
                panic!("{what}: nothing runs")
            };
            handles[3] = Some(s);
            let Ok(counters) = Counters::from_erased(handles) else {
                panic!("every token back")
            };
            let _ = d.give_back(counters);
            accesses
        });
    }
    std::println!("architectural PMU rotation: {runs} interleavings, a PMI taken in {with_pmi}");
}

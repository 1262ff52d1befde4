//! Interrupts at any instant, as the architectural PMU's driver is tested:
//! on each kind of part, the counters overflow before every
//! register access of every driver operation (and after it), and the PMI
//! is taken after the call and, where the contract lets it land inside, at
//! that access or any later one of the call ([`sweep`]), as a fixed vector
//! and as an NMI; after each, conservation, the register state, and every
//! PMI the PMU's own (serviced, or claimed late: a halt or release that
//! found its counter past its overflow owes the PMI in flight).
//!
//! The contract is the architectural PMU's (the LVT entry is written by
//! the handler before PerfMonV2 only): a single-counter call may be
//! interrupted anywhere by its CPU's handler, vector or NMI; a group
//! operation runs inside the driver's freeze bracket, called with the PMU
//! interrupt masked (only the NMI lands inside it).
//!
//! The rig: `X` (counter 0, instructions, a sample every 5), the one the
//! operations act on; `S` (counter 1, cycles, every 7), always sampling;
//! `B` (counter 2, instructions), counting. An overflow brings 8 of each
//! event. Each interleaving runs with `X` started in 5 phases of `S`'s
//! period.

use super::*;
use crate::counter::{AnyHandle, StateTag};
use crate::testing::{At, Interrupt, Interrupting, sweep};

const X: usize = 0;
const S: usize = 1;
const B: usize = 2;

/// How the PMI is delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Delivery {
    Vector,
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

/// The PMU interrupt: where the overflow happens and where the PMI is
/// taken, the handler, and what it all counted.
struct Pmi<'s> {
    pmu: &'s AmdPmu,
    entry: LvtPerfCounter,
    overflow_at: Option<usize>,
    take_at: Option<usize>,
    counted: [u64; 3],
    samples: Vec<Sample>,
    lvt: Vec<LvtPerfCounter>,
    handled: u64,
    not_ours: u64,
    raised: bool,
}

impl Pmi<'_> {
    fn new(pmu: &AmdPmu, delivery: Delivery) -> Pmi<'_> {
        Pmi {
            pmu,
            entry: delivery.entry(),
            overflow_at: None,
            take_at: None,
            counted: [0; 3],
            samples: Vec::new(),
            lvt: Vec::new(),
            handled: 0,
            not_ours: 0,
            raised: false,
        }
    }

    fn inject(&mut self, m: &mut AmdModel, select: u16, n: u64) {
        let before: [u64; 3] = core::array::from_fn(|c| m.counter(c));
        m.inject(Event::new(select, 0, n));
        for (c, counted) in self.counted.iter_mut().enumerate() {
            *counted += m.counter(c).wrapping_sub(before[c]) & ((1 << 48) - 1);
        }
    }

    /// Every running sampling counter past its overflow, the PMI raised.
    fn overflow(&mut self, m: &mut AmdModel) {
        self.inject(m, INSTRUCTIONS, 8);
        self.inject(m, CYCLES, 8);
        self.raised |= m.pmi_pending();
    }

    /// The handler, for each pending PMI.
    fn deliver(&mut self, m: &mut AmdModel) {
        while m.take_pmi() {
            self.handled += 1;
            let mut lvt = Lvt::default();
            let samples = &mut self.samples;
            let o = handle_pmi(self.pmu, m, &mut lvt, self.entry, self.handled, |s| {
                samples.push(s)
            })
            .unwrap();
            self.not_ours += u64::from(!o.is_ours());
            self.lvt.extend(lvt.0);
        }
    }
}

impl Interrupt<AmdModel> for Pmi<'_> {
    fn before(&mut self, at: usize, m: &mut AmdModel) {
        if self.overflow_at == Some(at) {
            self.overflow(m);
        }
        if self.take_at == Some(at) {
            self.deliver(m);
        }
    }
}

type Regs<'s> = Interrupting<AmdModel, Pmi<'s>>;

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

    const fn masked(self) -> bool {
        matches!(self, Op::GroupStart | Op::GroupStop | Op::GroupRead)
    }
}

struct Rig<'s, O: Owner> {
    d: AmdDriver<'s, O, Regs<'s>>,
    h: Handles,
}

impl<'s, O: Owner> Rig<'s, O> {
    fn new(pmu: &'s AmdPmu, config: Config, op: Op, delivery: Delivery, phase: u64) -> Self {
        let m = AmdModel::new(config);
        let info = cpu(&m);
        let regs = Interrupting::new(m, Pmi::new(pmu, delivery));
        let (d, c) = AmdDriver::take(regs, &info, pmu).unwrap();
        let mut rig = Rig {
            d,
            h: c.erase_all(),
        };
        rig.bring(S, StateTag::Enabled);
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

    fn on<R>(
        &mut self,
        n: usize,
        f: impl FnOnce(&mut AnyHandle<AmdCore>, &mut AmdDriver<'s, O, Regs<'s>>) -> R,
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

    fn between_calls(&mut self) {
        let r = self.d.msr();
        r.hook.overflow(&mut r.inner);
        r.hook.deliver(&mut r.inner);
    }

    fn group(&mut self, f: impl FnOnce(&mut Group<AmdCore, 2>, &mut AmdDriver<'s, O, Regs<'s>>)) {
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

    /// Conservation and the register state.
    fn check(&mut self, what: &str) {
        let state = self.d.pmi_state();
        let v2 = self.d.cpu().perfmon_v2;
        let mut running = CounterSet::EMPTY;
        let r = self.d.msr();
        let (m, pmi) = (&r.inner, &r.hook);
        for n in 0..3 {
            let counter = Counter::new(n as u8).unwrap();
            let enabled_bit = !v2 || m.global_ctl() & 1 << n != 0;
            let Some(h) = self.h[n]
                .as_ref()
                .filter(|h| h.state() != StateTag::Unclaimed)
            else {
                assert_eq!(m.control(n), 0, "{what}: counter {n} unclaimed");
                if v2 {
                    assert!(!enabled_bit, "{what}: counter {n}'s global bit");
                }
                continue;
            };
            let p = h.programmed();
            let enabled = h.state() == StateTag::Enabled;
            let want = if v2 {
                p.ctl()
            } else {
                p.ctl().with_enable(enabled)
            };
            assert_eq!(m.control(n), want.bits(), "{what}: counter {n}'s control");
            if v2 {
                assert_eq!(enabled_bit, enabled, "{what}: counter {n}'s global bit");
            }
            let status = m.global_status() & 1 << n != 0;
            let raw = m.counter(n);
            let Some(sa) = p.sampling() else {
                assert!(!status, "{what}: counter {n} counts, no overflow");
                assert_eq!(raw, pmi.counted[n], "{what}: counter {n} counts exactly");
                continue;
            };
            let (owed, residual) = sa.split(raw);
            assert_eq!(
                (status, owed),
                (false, 0),
                "{what}: counter {n} ({:?}) serviced, raw {raw:#x}",
                h.state()
            );
            if enabled {
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
                "{what}: counter {n}'s samples, none lost or made twice"
            );
        }
        assert_eq!(state.armed(), running, "{what}: armed");
        assert_eq!(
            pmi.not_ours, 0,
            "{what}: a PMI of the PMU's own not claimed"
        );
        // Before PerfMonV2 one LVT write per PMI, as Linux's generic
        // handler writes it; with PerfMonV2 none (the delivery does not
        // mask it: `pmi`'s documentation).
        let writes = if v2 { 0 } else { pmi.handled };
        assert_eq!(pmi.lvt.len() as u64, writes, "{what}: LVT writes");
        assert!(
            pmi.lvt.iter().all(|&e| e == pmi.entry),
            "{what}: the LVT entry"
        );
    }
}

fn retire<O: Owner>(mut rig: Rig<'_, O>) {
    let r = rig.d.msr();
    (r.hook.overflow_at, r.hook.take_at) = (None, None);
    for h in rig.h.iter_mut().flatten() {
        if h.state() != StateTag::Unclaimed {
            h.release(&mut rig.d).unwrap();
        }
    }
    let Ok(counters) = Counters::from_erased(rig.h) else {
        panic!("every token back")
    };
    let _ = rig.d.give_back(counters);
}

#[test]
fn a_pmi_at_every_access_of_every_operation() {
    crate::owner!(Swept);
    let (mut runs, mut with_pmi) = (0, 0);
    for (part, config) in PARTS {
        for op in Op::ALL {
            for (delivery, phase) in Delivery::ALL
                .into_iter()
                .flat_map(|d| (0..5).map(move |p| (d, p)))
            {
                let inside = delivery == Delivery::Nmi || !op.masked();
                runs += sweep(inside, |overflow, take| {
                    let what = format!(
                        "{part} {op:?} phase {phase}, {delivery:?}: overflow {overflow:?}, PMI {take:?}"
                    );
                    let pmu = crate::testing::amd_pmu();
                    let mut rig = Rig::<Swept>::new(&pmu, config, op, delivery, phase);
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
    }
    std::println!("AMD core PMU: {runs} interleavings, a PMI taken in {with_pmi}");
}

/// A multiplexer's rotation with the overflow before every access and the
/// PMI taken after the call (a vector) or also inside it (an NMI), `S`
/// (counter 3, cycles, every 5) sampling beside it: the rotation's counts
/// and registers are those of the run without an interrupt, and `S`
/// conserves its events.
#[test]
fn a_pmi_at_every_access_of_a_multiplexer_rotation() {
    use crate::arch::amd::multiplex::Multiplexer;
    crate::owner!(Rotating);
    const ROTATED: [u16; 4] = [0x40, 0x41, 0x42, 0x43];
    let (mut runs, mut with_pmi) = (0, 0);
    for (part, config) in PARTS {
        for (delivery, phase) in Delivery::ALL
            .into_iter()
            .flat_map(|d| (0..5).map(move |p| (d, p)))
        {
            let mut reference: Option<(Vec<crate::multiplex::Multiplexed>, [u64; 3], [u64; 3])> =
                None;
            runs += sweep(delivery == Delivery::Nmi, |overflow, take| {
                let what = format!(
                    "{part} rotation phase {phase}, {delivery:?}: overflow {overflow:?}, PMI {take:?}"
                );
                let pmu = crate::testing::amd_pmu();
                let m = AmdModel::new(config);
                let info = cpu(&m);
                let regs = Interrupting::new(m, Pmi::new(&pmu, delivery));
                let (mut d, c) = AmdDriver::<Rotating, _>::take(regs, &info, &pmu).unwrap();
                let mut handles = c.erase_all();
                let mut s = handles[3].take().unwrap();
                let n = SampleAfter::new(5, d.overflow_rule()).unwrap();
                s.configure(&mut d, &CounterConfig::counting(spec("cycles")).sampling(n))
                    .unwrap();
                s.enable(&mut d).unwrap();
                // Three counters left to the multiplexer (0-2).
                let spare = [handles[4].take(), handles[5].take()];
                let events = ROTATED.map(|s| EventSpec::raw(s, 0));
                let mut mux = Multiplexer::<4>::new(handles, &events).unwrap();
                let tick = |d: &mut AmdDriver<'_, Rotating, Regs<'_>>| {
                    let r = d.msr();
                    for select in ROTATED {
                        r.inner.inject(Event::new(select, 0, 100));
                    }
                    r.inner.inject(Event::new(CYCLES, 0, 8));
                    r.hook.deliver(&mut r.inner);
                };
                let r = d.msr();
                r.inner.inject(Event::new(CYCLES, 0, phase));
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
                if overflow == At::After {
                    r.hook.overflow(&mut r.inner);
                }
                r.hook.deliver(&mut r.inner);
                with_pmi += usize::from(r.hook.handled > handled);
                (r.hook.overflow_at, r.hook.take_at) = (None, None);
                let model = &r.inner;
                let rotated = (
                    mux.results().to_vec(),
                    core::array::from_fn(|n| model.control(n)),
                    core::array::from_fn(|n| model.counter(n)),
                );
                match &reference {
                    None => reference = Some(rotated),
                    Some(r) => assert_eq!(&rotated, r, "{what}: the rotation"),
                }
                let r = d.msr();
                let (owed, _) = n.split(r.inner.counter(3));
                assert_eq!(owed, 0, "{what}: S serviced");
                assert_eq!(r.hook.not_ours, 0, "{what}: every PMI the PMU's own");
                let sampled: u64 = r.hook.samples.iter().map(|s| u64::from(s.periods)).sum();
                assert_eq!(sampled, pmu.pmi().periods(3), "{what}: S's samples");
                assert_eq!(pmu.pmi().armed().bits(), 1 << 3, "{what}: armed");
                mux.finish(&mut d, 0).unwrap();
                s.release(&mut d).unwrap();
                let Ok(mut handles) = mux.into_handles() else {
                    panic!("{what}: nothing runs")
                };
                handles[3] = Some(s);
                [handles[4], handles[5]] = spare;
                let Ok(counters) = Counters::from_erased(handles) else {
                    panic!("every token back")
                };
                let _ = d.give_back(counters);
                accesses
            });
        }
    }
    std::println!("AMD core PMU rotation: {runs} interleavings, a PMI taken in {with_pmi}");
}

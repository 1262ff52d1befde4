//! Interrupts at any instant: the counters overflow before every
//! register access of every driver operation (and after it), and the PMI
//! is taken after the call and, where the contract lets it land inside, at
//! that access or any later one of the call ([`sweep`]: a PMI comes some
//! instructions after its overflow), as a fixed vector and as an NMI;
//! after each, conservation and the register state.
//!
//! # What NetBurst's contract allows
//!
//! The handler of a logical processor runs on that processor's CPU and runs
//! to completion before the driver call it interrupted resumes
//! ([`crate::arch::netburst::pmi::PmiState`]); a single-counter call (configure, enable, halt, resume,
//! cascade, read, release) may be interrupted anywhere, by the vector or
//! the NMI alike: both are swept at every access. A group operation is
//! called with the PMU interrupt masked ([`crate::counter::Group`]), so
//! there a vector PMI raised inside the call is taken when it returns,
//! while an NMI (which the mask of IF does not hold) is taken where it
//! lands: both are swept, each as it is delivered.
//!
//! # The rig
//!
//! Four counters of T0, all on the model: `X` (counter 12, `instr_retired`
//! on CRU_ESCR0, a sample every 5), the one the operations act on; `S`
//! (14, `instr_retired` on CRU_ESCR1, every 7), always sampling, so that
//! every PMI has work; `A` (0, `global_power_events` RUNNING on FSB_ESCR0,
//! every 4), sampling; `B` (2, RUNNING on FSB_ESCR1), counting, or
//! cascaded from `A` (it counts while `A`'s `OVF` is set: from `A`'s
//! overflow to the handler's service). An overflow brings 8 events of each
//! kind: every running sampling counter passes its overflow (once, by up
//! to 7 events: one or two periods) and raises its PMI. Each interleaving
//! runs with `X` started in 5 phases of the others' periods.
//!
//! The ground truth is the model's: the events each counter counted are
//! the increments the injections gave it (no driver or handler access is
//! an injection). After each run, for every claimed counter: a sampling
//! one conserves `counted = (periods + owed) x N + residual`, its samples
//! add up to its periods less those a halt found, and, every PMI
//! delivered, it is not past its overflow and its `OVF` is clear (a
//! running counter left past it would wait 2^40 events for its next PMI);
//! a counting one holds exactly what it counted. Every CCCR is the
//! handle's image (the state's `ENABLE` or `CASCADE`, `OVF` aside) or,
//! unclaimed, idle with its counter 0; the handler's armed set is exactly
//! the running sampling counters; every ESCR is as in the run without an
//! interrupt.

use super::*;
use crate::counter::Group;
use crate::testing::{At, Interrupt, Interrupting, sweep};

const MASK: u64 = (1 << 40) - 1;
const X: usize = 12;
const S: usize = 14;
const A: usize = 0;
const B: usize = 2;

/// How the PMI is delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Delivery {
    /// A fixed vector, held by a masked interrupt flag.
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

/// T0's PMU interrupt: where the events that overflow the counters happen
/// and where the PMI is taken (access numbers of the call under test;
/// `None`: after it), the handler, and what it all counted.
struct Pmi<'s> {
    pmu: &'s NetBurstPmu,
    entry: LvtPerfCounter,
    overflow_at: Option<usize>,
    take_at: Option<usize>,
    /// Per counter, the events the model counted.
    counted: [u64; 18],
    samples: Vec<Sample>,
    lvt: Vec<LvtPerfCounter>,
    handled: u64,
    /// An overflow raised the PMI (none does while the PMU is stopped).
    raised: bool,
}

impl Pmi<'_> {
    fn inject(&mut self, m: &mut NetBurstModel, kind: EventKind, n: u64) {
        let before: [u64; 18] = core::array::from_fn(|c| m.counter(c));
        m.inject(kind.on(ModelLp::T0, Privilege::Os, n));
        for (c, counted) in self.counted.iter_mut().enumerate() {
            *counted += m.counter(c).wrapping_sub(before[c]) & MASK;
        }
    }

    /// Every running sampling counter past its overflow, its PMI raised.
    fn overflow(&mut self, m: &mut NetBurstModel) {
        self.inject(m, INSTR, 8);
        self.inject(m, RUNNING, 8);
        self.raised |= m.pmi_pending(ModelLp::T0);
    }

    /// T0's handler, if its PMI is pending.
    fn deliver(&mut self, m: &mut NetBurstModel) {
        if m.take_pmi(ModelLp::T0).is_none() {
            return;
        }
        self.handled += 1;
        let mut lvt = Lvt::default();
        let samples = &mut self.samples;
        handle_pmi(
            self.pmu.logical(LogicalProcessor::T0),
            m,
            &mut lvt,
            self.entry,
            self.handled,
            |s| samples.push(s.with_payload(())),
        )
        .unwrap();
        self.lvt.extend(lvt.0);
    }
}

impl Interrupt<NetBurstModel> for Pmi<'_> {
    fn before(&mut self, at: usize, m: &mut NetBurstModel) {
        if self.overflow_at == Some(at) {
            self.overflow(m);
        }
        if self.take_at == Some(at) {
            self.deliver(m);
        }
    }
}

type Regs<'s> = Interrupting<NetBurstModel, Pmi<'s>>;

/// The operations swept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Configure,
    Enable,
    Halt,
    Resume,
    Read,
    Release,
    Cascade,
    HaltCascaded,
    GroupStart,
    GroupStop,
    GroupRead,
}

impl Op {
    const ALL: [Op; 11] = [
        Op::Configure,
        Op::Enable,
        Op::Halt,
        Op::Resume,
        Op::Read,
        Op::Release,
        Op::Cascade,
        Op::HaltCascaded,
        Op::GroupStart,
        Op::GroupStop,
        Op::GroupRead,
    ];

    /// Called with the PMU interrupt masked (the group operations).
    const fn masked(self) -> bool {
        matches!(self, Op::GroupStart | Op::GroupStop | Op::GroupRead)
    }
}

fn instr(escr: Escr) -> CounterConfig {
    CounterConfig::counting(spec("instr_retired:NBOGUSNTAG:k"), escr)
}

fn sampling(config: CounterConfig, n: u64) -> CounterConfig {
    config.sampling(SampleAfter::new(n, overflow_rule()).unwrap())
}

/// Each counter's configuration.
fn config(n: usize) -> CounterConfig {
    match n {
        X => sampling(instr(Escr::CruEscr0), 5),
        S => sampling(instr(Escr::CruEscr1), 7),
        A => sampling(running(), 4),
        _ => CounterConfig::counting(spec("global_power_events:RUNNING:k"), Escr::FsbEscr1),
    }
}

/// A driver of a fresh model with the rig at `op`'s starting point, and
/// the handles.
struct Rig<'s, O: Owner> {
    d: NetBurstDriver<'s, O, Regs<'s>>,
    h: [Option<AnyHandle<NetBurst>>; 18],
}

impl<'s, O: Owner> Rig<'s, O> {
    fn new(pmu: &'s NetBurstPmu, op: Op, delivery: Delivery, phase: u64) -> Self {
        let m = NetBurstModel::new(Config::prescott_ht());
        let info = cpu(&m);
        let pmi = Pmi {
            pmu,
            entry: delivery.entry(),
            overflow_at: None,
            take_at: None,
            counted: [0; 18],
            samples: Vec::new(),
            lvt: Vec::new(),
            handled: 0,
            raised: false,
        };
        let (d, c) = NetBurstDriver::take(Interrupting::new(m, pmi), &info, pmu).unwrap();
        let mut rig = Rig {
            d,
            h: c.erase_all().map(Some),
        };
        for n in [S, A] {
            rig.configure(n);
            rig.on(n, |h, d| h.enable(d).unwrap());
        }
        // Where `S` and `A` are in their periods when `X` starts.
        let r = rig.d.msr();
        r.hook.inject(&mut r.inner, INSTR, phase);
        r.hook.inject(&mut r.inner, RUNNING, phase);
        r.hook.deliver(&mut r.inner);
        let x = match op {
            Op::Configure => StateTag::Unclaimed,
            Op::Enable | Op::GroupStart => StateTag::Configured,
            Op::Resume => StateTag::Halted,
            _ => StateTag::Enabled,
        };
        rig.bring(X, x);
        match op {
            Op::Cascade => rig.configure(B),
            Op::HaltCascaded => {
                rig.configure(B);
                rig.cascade();
            }
            Op::GroupStart => rig.bring(B, StateTag::Halted),
            _ => rig.bring(B, StateTag::Enabled),
        }
        // Every counter somewhere in a period, a PMI or two behind it.
        rig.between_calls();
        rig
    }

    /// `f` on counter `n`'s handle, with the driver.
    fn on<R>(
        &mut self,
        n: usize,
        f: impl FnOnce(&mut AnyHandle<NetBurst>, &mut NetBurstDriver<'s, O, Regs<'s>>) -> R,
    ) -> R {
        f(self.h[n].as_mut().unwrap(), &mut self.d)
    }

    fn configure(&mut self, n: usize) {
        let h = self.h[n].as_mut().unwrap();
        h.configure(&mut self.d, &config(n)).unwrap();
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

    fn cascade(&mut self) {
        let mut b = self.h[B].take().unwrap();
        b.cascade_from(self.h[A].as_ref().unwrap(), &mut self.d)
            .unwrap();
        self.h[B] = Some(b);
    }

    /// An interrupt between two calls, delivered there.
    fn between_calls(&mut self) {
        let r = self.d.msr();
        r.hook.overflow(&mut r.inner);
        r.hook.deliver(&mut r.inner);
    }

    fn group(
        &mut self,
        f: impl FnOnce(&mut Group<NetBurst, 2>, &mut NetBurstDriver<'s, O, Regs<'s>>),
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
            Op::Cascade => self.cascade(),
            Op::HaltCascaded => self.on(B, |h, d| h.halt(d).unwrap()),
            Op::GroupStart => self.group(|g, d| g.start(d).unwrap()),
            Op::GroupStop => self.group(|g, d| g.stop(d).unwrap()),
            Op::GroupRead => self.group(|g, d| {
                g.read(d).unwrap();
            }),
        }
    }

    /// The ESCRs this model has, as the registers hold them.
    fn escrs(&mut self) -> Vec<Option<u64>> {
        let m = &mut self.d.msr().inner;
        Escr::ALL.iter().map(|e| m.read_msr(e.msr()).ok()).collect()
    }

    /// Conservation and the register state (module docs), the ESCRs
    /// against `reference` if given, but for counter `foreign` (another
    /// party's, if any); `what` names the run.
    fn check(&mut self, reference: Option<&[Option<u64>]>, foreign: Option<usize>, what: &str) {
        let state = self.d.pmi_state();
        let mut running = CounterSet::EMPTY;
        if let Some(reference) = reference {
            assert_eq!(self.escrs(), reference, "{what}: the ESCRs");
        }
        let r = self.d.msr();
        let (m, pmi) = (&r.inner, &r.hook);
        for n in (0..18).filter(|&n| Some(n) != foreign) {
            let counter = Counter::from_index(n as u8).unwrap();
            let cccr = CccrValue::from_bits_truncate(m.cccr(n));
            let Some(h) = self.h[n]
                .as_ref()
                .filter(|h| h.state() != StateTag::Unclaimed)
            else {
                assert_eq!(
                    cccr.bits(),
                    IDLE_CCCR,
                    "{what}: counter {n} unclaimed, its CCCR idle"
                );
                continue;
            };
            let p = h.programmed();
            // Configure leaves the idle CCCR (written by take and release).
            let image = match h.state() {
                StateTag::Enabled => p.cccr().with_enable(true),
                StateTag::Cascaded => p.cccr().with_cascade(true),
                StateTag::Configured => CccrValue::from_bits_truncate(IDLE_CCCR),
                _ => p.cccr(),
            };
            assert_eq!(cccr.with_ovf(false), image, "{what}: counter {n}'s CCCR");
            let raw = m.counter(n);
            let Some(sa) = p.sampling() else {
                assert!(!cccr.ovf(), "{what}: counter {n} counts, no overflow");
                assert_eq!(raw, pmi.counted[n], "{what}: counter {n} counts exactly");
                continue;
            };
            let (owed, residual) = sa.split(raw);
            // Every overflow was followed by events, so its PMI came, and
            // the last was delivered: a running counter past its overflow
            // now would wait 2^40 events for its next PMI.
            assert_eq!(
                (cccr.ovf(), owed),
                (false, 0),
                "{what}: counter {n} ({:?}) serviced, raw {raw:#x}",
                h.state()
            );
            if matches!(h.state(), StateTag::Enabled | StateTag::Cascaded) {
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
        assert_eq!(state.armed(LogicalProcessor::T0), running, "{what}: armed");
        assert!(state.armed(LogicalProcessor::T1).is_empty(), "{what}");
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
            let mut reference = Vec::new();
            runs += sweep(inside, |overflow, take| {
                let what = format!(
                    "{op:?} phase {phase}, {delivery:?}: overflow {overflow:?}, PMI {take:?}"
                );
                let pmu = crate::testing::netburst_pmu();
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
                if overflow == At::Never {
                    reference = rig.escrs();
                }
                rig.check(Some(&reference), None, &what);
                rig.d.retire();
                accesses
            });
        }
    }
    std::println!("NetBurst: {runs} interleavings, a PMI taken in {with_pmi}");
}

/// One logical processor's view of a model two drivers share.
struct Lp<'m> {
    model: &'m std::sync::Mutex<NetBurstModel>,
    lp: ModelLp,
}

impl Lp<'_> {
    fn with<R>(&self, f: impl FnOnce(&mut crate::model::netburst::ThreadView<'_>) -> R) -> R {
        let mut m = self.model.lock().unwrap();
        f(&mut m.thread(self.lp).unwrap())
    }
}

impl crate::access::MsrAccess for Lp<'_> {
    type Error = crate::model::netburst::Fault;
    fn read_msr(&mut self, msr: u32) -> Result<u64, Self::Error> {
        self.with(|v| crate::access::MsrAccess::read_msr(v, msr))
    }
    fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Self::Error> {
        self.with(|v| crate::access::MsrAccess::write_msr(v, msr, value))
    }
    fn rdpmc(&mut self, index: u32) -> Result<u64, Self::Error> {
        self.with(|v| crate::access::MsrAccess::rdpmc(v, index))
    }
}

/// T1's PMU interrupt, on T1's CPU, between the accesses of T0's driver
/// (the two logical processors share the PMU, SDM 18.16: at the register
/// level their accesses interleave at any point): where T1's counter
/// overflows and where T1's handler runs, and what it all counted.
struct OtherCpu<'s, 'm> {
    model: &'m std::sync::Mutex<NetBurstModel>,
    pmu: &'s NetBurstPmu,
    overflow_at: Option<usize>,
    take_at: Option<usize>,
    /// The events T1's counter (12) counted.
    counted: u64,
    samples: Vec<Sample>,
    handled: u64,
}

impl OtherCpu<'_, '_> {
    fn overflow(&mut self) {
        let mut m = self.model.lock().unwrap();
        let before = m.counter(X);
        m.inject(INSTR.on(ModelLp::T1, Privilege::Os, 8));
        self.counted += m.counter(X).wrapping_sub(before) & MASK;
    }

    fn deliver(&mut self) {
        let mut m = self.model.lock().unwrap();
        if m.take_pmi(ModelLp::T1).is_none() {
            return;
        }
        self.handled += 1;
        let samples = &mut self.samples;
        let mut t1 = m.thread(ModelLp::T1).unwrap();
        let mut lvt = Lvt::default();
        handle_pmi(
            self.pmu.logical(LogicalProcessor::T1),
            &mut t1,
            &mut lvt,
            entry(),
            self.handled,
            |s| samples.push(s.with_payload(())),
        )
        .unwrap();
    }
}

impl<'m> Interrupt<Lp<'m>> for OtherCpu<'_, 'm> {
    fn before(&mut self, at: usize, _: &mut Lp<'m>) {
        if self.overflow_at == Some(at) {
            self.overflow();
        }
        if self.take_at == Some(at) {
            self.deliver();
        }
    }
}

/// What a rotation leaves that T1's PMI must not change: the
/// multiplexer's counts, and every register but T1's counter and CCCR.
type Rotated = (Vec<crate::multiplex::Multiplexed>, Vec<Option<u64>>);

/// A multiplexer's rotation ([`crate::arch::netburst::multiplex::Multiplexer::tick`])
/// on T0 (four FSB events, two at a time), with T1's sampling counter (12,
/// `instr_retired`, every 5) overflowing before every access of it and
/// T1's handler running at that access or any later one, or after (the
/// other CPU's interrupt is not masked by T0's calls): the rotation's
/// counts and every register but T1's are those of the run without T1's
/// interrupt, and T1's counter conserves its events, serviced, its
/// samples exact, its CCCR its image.
#[test]
fn the_other_cpus_pmi_at_every_access_of_a_rotation() {
    use crate::arch::netburst::multiplex::Multiplexer;
    use crate::arch::netburst::schedule::Part;
    crate::owner!(Rot0);
    crate::owner!(Rot1);
    let fsb = [
        (
            "global_power_events:RUNNING:k",
            EventKind::new(EscrGroup::Fsb, 0x13, 1),
        ),
        (
            "FSB_data_activity:DRDY_DRV:k",
            EventKind::new(EscrGroup::Fsb, 0x17, 1),
        ),
        (
            "b2b_cycles:BIT1:k",
            EventKind::new(EscrGroup::Fsb, 0x16, 1 << 1),
        ),
        ("bnr:BIT0:k", EventKind::new(EscrGroup::Fsb, 0x08, 1)),
    ];
    let mut runs = 0;
    for phase in 0..5 {
        let mut reference: Option<Rotated> = None;
        runs += sweep(true, |overflow, take| {
            let what = format!("rotation phase {phase}: overflow {overflow:?}, T1's PMI {take:?}");
            let model = std::sync::Mutex::new(NetBurstModel::new(Config::prescott_ht()));
            let info = cpu(&model.lock().unwrap());
            let pmu = crate::testing::netburst_pmu();
            let hook = OtherCpu {
                model: &model,
                pmu: &pmu,
                overflow_at: None,
                take_at: None,
                counted: 0,
                samples: Vec::new(),
                handled: 0,
            };
            let t0 = Interrupting::new(
                Lp {
                    model: &model,
                    lp: ModelLp::T0,
                },
                hook,
            );
            let (mut d0, c0) =
                NetBurstDriver::<Rot0, _>::take_for(LogicalProcessor::T0, t0, &info, &pmu).unwrap();
            let t1 = Lp {
                model: &model,
                lp: ModelLp::T1,
            };
            let (mut d1, c1) =
                NetBurstDriver::<Rot1, _>::take_for(LogicalProcessor::T1, t1, &info, &pmu).unwrap();
            let x = config(X).on(LogicalProcessor::T1);
            let x = c1
                .c12
                .configure(&mut d1, &x)
                .unwrap()
                .enable(&mut d1)
                .unwrap();
            let list = fsb.map(|(s, _)| (spec(s), LogicalProcessor::T0));
            let mut mux = Multiplexer::<4>::new(Part::new(3, 1), c0.erase_all(), &list).unwrap();
            model
                .lock()
                .unwrap()
                .inject(INSTR.on(ModelLp::T1, Privilege::Os, phase));
            d0.msr().hook.counted += phase;
            mux.tick(&mut d0, 0).unwrap();
            for round in 0..3 {
                for (_, kind) in fsb {
                    let mut m = model.lock().unwrap();
                    m.inject(kind.on(ModelLp::T0, Privilege::Os, 100));
                }
                d0.msr().hook.overflow();
                d0.msr().hook.deliver();
                if round < 2 {
                    mux.tick(&mut d0, 1).unwrap();
                }
            }
            let r = d0.msr();
            (r.hook.overflow_at, r.hook.take_at) = (overflow.access(), take.access());
            r.arm();
            mux.tick(&mut d0, 1).unwrap();
            let r = d0.msr();
            let accesses = r.accesses();
            let last = overflow.access().max(take.access());
            assert!(last.is_none_or(|a| a < accesses), "{what}: in the call");
            if overflow == At::After {
                r.hook.overflow();
            }
            r.hook.deliver();
            (r.hook.overflow_at, r.hook.take_at) = (None, None);
            let registers: Vec<Option<u64>> = {
                let mut m = model.lock().unwrap();
                (0x300..0x3F3)
                    .filter(|&msr| msr != 0x300 + X as u32 && msr != 0x360 + X as u32)
                    .map(|msr| m.read_msr(msr).ok())
                    .collect()
            };
            let rotated: Rotated = (mux.results().to_vec(), registers);
            match &reference {
                None => reference = Some(rotated),
                Some(r) => assert_eq!(&rotated, r, "{what}: the rotation"),
            }
            let sa = SampleAfter::new(5, overflow_rule()).unwrap();
            let (raw, cccr) = {
                let m = model.lock().unwrap();
                (m.counter(X), m.cccr(X))
            };
            let (owed, residual) = sa.split(raw);
            let periods = pmu.pmi().periods(X as u8);
            let hook = &d0.msr().hook;
            assert_eq!(owed, 0, "{what}: T1's counter serviced");
            assert_eq!(
                hook.counted,
                periods * 5 + residual,
                "{what}: T1's counter conserves its events"
            );
            let sampled: u64 = hook.samples.iter().map(|s| u64::from(s.periods)).sum();
            assert_eq!(sampled, periods, "{what}: T1's samples");
            assert_eq!(
                cccr,
                x.programmed().cccr().with_enable(true).bits(),
                "{what}: T1's CCCR"
            );
            let armed = CounterSet::EMPTY.with(Counter::IqCounter0);
            assert_eq!(pmu.pmi().armed(LogicalProcessor::T1), armed, "{what}");
            assert!(pmu.pmi().armed(LogicalProcessor::T0).is_empty(), "{what}");
            mux.finish(&mut d0, 0).unwrap();
            let _ = x.halt(&mut d1).unwrap().release(&mut d1).unwrap();
            let _ = (d0.retire(), d1.retire());
            accesses
        });
    }
    std::println!("NetBurst rotation: {runs} interleavings");
}

mod world_switch;

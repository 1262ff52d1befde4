//! A randomized run of task switches on two CPUs, with PMIs and migrations
//! at random points, on each architecture's model: every task's every
//! count exact.
//!
//! Six tasks: two with the same event set (the switch between them writes
//! counter values only), one with three events (every counter set aside),
//! one with one, one with an empty context and one with none. Each CPU has
//! its own driver, three counters set aside for tasks and a CPU-wide
//! counter of the kernel's own event beside them. At each step one CPU
//! either runs its task (events of the task's kinds and of the kernel's
//! injected through the register backend, at the first access of a
//! kernel's read), reads its task's counts live (checked against the
//! events it was given so far), or switches to any task that does not run
//! on the other CPU (a migration when it last ran there) or to none. An
//! overflow's PMI is taken at a random access from its raise on: at once,
//! at any access of the next switch (an NMI inside it; it finds the
//! outgoing counters disarmed) or after it (a vector held by the switch's
//! disabled interrupts). At the end every task's count equals the events
//! injected while it ran, its samples (attributed through the CPU's
//! [`OnCpu`]) plus the periods its switch-outs found owed equal its
//! periods, its times equal the time it ran, and each kernel counter
//! counted every event of its own on its CPU. Counts from the models.

use std::boxed::Box;
use std::collections::HashMap;
use std::vec::Vec;

use crate::arch::{Architecture, Switch};
use crate::counter::{AnyHandle, Owner};
use crate::task::{Attribution, OnCpu, TaskEvents, TaskSwitcher};
use crate::testing::{Interrupt, Interrupting, rng};

/// Task event kinds, and the kernel's own event.
const KINDS: usize = 3;
/// Counters set aside per CPU.
pub(super) const K: usize = 3;
/// Events per context.
const E: usize = 4;

/// Each task's events: (kind, sample-after value or 0 for counting); `None`
/// for the task without a context.
const TASKS: [Option<&[(usize, u64)]>; 6] = [
    Some(&[(0, 0), (1, 97)]),
    Some(&[(0, 0), (1, 97)]),
    Some(&[(1, 0), (2, 13), (0, 1000)]),
    Some(&[(2, 0)]),
    Some(&[]),
    None,
];

/// What [`Rig::take`] gives: a CPU's driver, its kernel counter's token and
/// the tokens of the counters set aside.
pub(super) type Taken<R, O> = (
    <R as Rig>::Driver<O>,
    AnyHandle<<R as Rig>::A>,
    [AnyHandle<<R as Rig>::A>; K],
);

/// What a rig gives the run: two CPUs of one architecture's model.
pub(super) trait Rig: Sized + 'static {
    type A: Architecture;
    /// What both CPUs share (a NetBurst package's model; nothing else).
    type Machine: 'static;
    /// One CPU's registers.
    type Regs: 'static;
    /// One CPU's driver over its registers behind the hook.
    type Driver<O: Owner>: Switch<Self::A, Config = <Self::A as Architecture>::Config>;
    /// Whether the PMI may be taken inside a switch (an NMI): not on
    /// Itanium, whose switch edits PMC0 and is called with PSR.i clear.
    const PMI_IN_SWITCH: bool = true;

    fn machine() -> &'static Self::Machine;
    fn regs(m: &'static Self::Machine, cpu: usize) -> Self::Regs;
    /// CPU `cpu`'s driver, its kernel counter's token and the tokens of
    /// the counters set aside.
    fn take<O: Owner>(
        m: &'static Self::Machine,
        cpu: usize,
        regs: Interrupting<Self::Regs, Hook<Self>>,
    ) -> Taken<Self, O>;
    fn backend<O: Owner>(d: &mut Self::Driver<O>) -> &mut Interrupting<Self::Regs, Hook<Self>>;
    /// Kind `kind`, sampling every `every` (0: counting); kind `KINDS`:
    /// the kernel's event.
    fn config<O: Owner>(
        d: &Self::Driver<O>,
        kind: usize,
        every: u64,
    ) -> <Self::A as Architecture>::Config;
    /// Injects `n` of kind `kind` on CPU `cpu`: how many the counters
    /// counted.
    fn inject(
        m: &'static Self::Machine,
        regs: &mut Self::Regs,
        cpu: usize,
        kind: usize,
        n: u64,
    ) -> u64;
    fn take_pmi(m: &'static Self::Machine, regs: &mut Self::Regs, cpu: usize) -> bool;
    /// The PMI handler of CPU `cpu`, each sample's counter and periods to
    /// `sink`.
    fn handle(
        m: &'static Self::Machine,
        regs: &mut Self::Regs,
        cpu: usize,
        sink: &mut dyn FnMut(u8, u64),
    );
}

/// One CPU's hook between register accesses: the injections and PMIs.
pub(super) struct Hook<R: Rig> {
    m: &'static R::Machine,
    cpu: usize,
    on: &'static OnCpu,
    rnd: Box<dyn FnMut(u64) -> u64>,
    /// Injections queued for the next access: (kind, n).
    inject: Vec<(usize, u64)>,
    /// A PMI raised and not yet taken: taken at the access this many
    /// accesses on.
    pmi: Option<u64>,
    /// Per task: events counted, by kind.
    truth: HashMap<u64, [u64; KINDS]>,
    kernel: u64,
    samples: Vec<(Attribution, u64)>,
    pmis: u64,
    /// A sweep's injection: at this access (counted from the backend's
    /// arm), of this kind, this many.
    at: Option<(usize, usize, u64)>,
    /// Inside a switch that holds the PMI (Itanium's): no PMI taken.
    masked: bool,
}

impl<R: Rig> Hook<R> {
    fn new(m: &'static R::Machine, cpu: usize, on: &'static OnCpu, seed: u64) -> Self {
        Hook {
            m,
            cpu,
            on,
            rnd: Box::new(rng(seed)),
            inject: Vec::new(),
            pmi: None,
            truth: HashMap::new(),
            kernel: 0,
            samples: Vec::new(),
            pmis: 0,
            at: None,
            masked: false,
        }
    }

    fn take(&mut self, regs: &mut R::Regs) {
        let (m, cpu, on) = (self.m, self.cpu, self.on);
        let samples = &mut self.samples;
        R::handle(m, regs, cpu, &mut |counter, periods| {
            if let Some(a) = on.attribute(counter) {
                samples.push((a, periods));
            }
        });
        self.pmis += 1;
    }
}

impl<R: Rig> Interrupt<R::Regs> for Hook<R> {
    fn before(&mut self, at: usize, regs: &mut R::Regs) {
        if let Some((k, kind, n)) = self.at
            && k <= at
        {
            self.at = None;
            self.inject.push((kind, n));
        }
        for (kind, n) in core::mem::take(&mut self.inject) {
            let counted = R::inject(self.m, regs, self.cpu, kind, n);
            if kind == KINDS {
                self.kernel += counted;
            } else if let Some(task) = self.on.task() {
                self.truth.entry(task).or_default()[kind] += counted;
            }
            if self.pmi.is_none() && R::take_pmi(self.m, regs, self.cpu) {
                // At once, or up to 7 accesses on (inside the next switch
                // or after it).
                let delay = match (self.rnd)(3) {
                    0 => 0,
                    _ => (self.rnd)(8),
                };
                self.pmi = Some(delay);
            }
        }
        if self.masked {
            return;
        }
        match self.pmi {
            Some(0) => {
                self.pmi = None;
                self.take(regs);
                if R::take_pmi(self.m, regs, self.cpu) {
                    self.pmi = Some(0);
                }
            }
            Some(k) => self.pmi = Some(k - 1),
            None => {}
        }
    }
}

/// One task: its context, where it runs, the time it ran.
struct Task<A: Architecture> {
    ctx: Option<TaskEvents<A, E>>,
    last: Option<usize>,
    since: u64,
    ran: u64,
}

/// One CPU's state in the run.
struct Cpu<R: Rig, O: Owner> {
    d: R::Driver<O>,
    kernel: AnyHandle<R::A>,
    s: TaskSwitcher<'static, R::A, K>,
    cur: Option<usize>,
}

/// The pair of tasks `a` and `b` (distinct) mutably.
fn two<T>(v: &mut [T], a: usize, b: usize) -> (&mut T, &mut T) {
    let [x, y] = v.get_disjoint_mut([a, b]).expect("two tasks");
    (x, y)
}

fn ctx_of<A: Architecture>(t: &mut Task<A>) -> Option<&mut TaskEvents<A, E>> {
    t.ctx.as_mut()
}

/// Counters of the run, for its report.
#[derive(Debug, Default)]
pub(super) struct Ran {
    pub(super) switches: u64,
    pub(super) migrations: u64,
    pub(super) pmis: u64,
    pub(super) samples: u64,
    pub(super) owed: u64,
}

impl<R: Rig, O: Owner> Cpu<R, O> {
    fn hook(&mut self) -> &mut Hook<R> {
        &mut R::backend(&mut self.d).hook
    }

    /// Events of the running task's kinds and the kernel's, taken in at
    /// the kernel counter's read.
    fn run(&mut self, rnd: &mut impl FnMut(u64) -> u64) {
        let h = self.hook();
        for _ in 0..=rnd(2) {
            let kind = rnd(KINDS as u64) as usize;
            h.inject.push((kind, 1 + rnd(200)));
        }
        h.inject.push((KINDS, 1 + rnd(50)));
        self.kernel.read(&mut self.d).unwrap();
    }

    /// The running task's counts, read live, against what it was given on
    /// both CPUs.
    fn check_live(&mut self, tasks: &[Task<R::A>], truth: impl Fn(u64, usize) -> u64, now: u64) {
        let Some(t) = self.cur else { return };
        let Some(ctx) = tasks[t].ctx.as_ref() else {
            return;
        };
        for (i, &(kind, _)) in TASKS[t].unwrap_or(&[]).iter().enumerate() {
            let c = self.s.read(&mut self.d, ctx, i, now).unwrap();
            // The read's access may take a PMI first; the count holds
            // either way.
            assert_eq!(c.count, truth(t as u64, kind), "task {t} event {i}, live");
        }
    }

    /// Switches to task `next` (or none).
    fn switch(
        &mut self,
        me: usize,
        tasks: &mut [Task<R::A>],
        next: Option<usize>,
        now: u64,
        ran: &mut Ran,
    ) {
        let prev = self.cur;
        self.hook().masked = !R::PMI_IN_SWITCH;
        if let Some(p) = prev {
            let t = &mut tasks[p];
            t.ran += now - t.since;
        }
        match (prev, next) {
            (Some(p), Some(n)) => {
                let (a, b) = two(tasks, p, n);
                self.s
                    .switch(&mut self.d, ctx_of(a), ctx_of(b), now)
                    .unwrap();
            }
            (Some(p), None) => {
                let a = &mut tasks[p];
                self.s.switch(&mut self.d, ctx_of(a), None, now).unwrap();
            }
            (None, Some(n)) => {
                let b = &mut tasks[n];
                self.s.switch(&mut self.d, None, ctx_of(b), now).unwrap();
            }
            (None, None) => self
                .s
                .switch(&mut self.d, None::<&mut TaskEvents<R::A, E>>, None, now)
                .unwrap(),
        }
        if let Some(n) = next {
            let t = &mut tasks[n];
            if t.last.is_some_and(|l| l != me) {
                ran.migrations += 1;
            }
            t.last = Some(me);
            t.since = now;
        }
        self.hook().masked = false;
        self.cur = next;
        ran.switches += 1;
    }
}

/// The run: `switches` task switches in all, with `seed`.
pub(super) fn run<R: Rig, O0: Owner, O1: Owner>(seed: u64, switches: u64) -> Ran {
    let m = R::machine();
    let on: [&'static OnCpu; 2] = [
        Box::leak(Box::new(OnCpu::new())),
        Box::leak(Box::new(OnCpu::new())),
    ];
    let mut rnd = rng(seed);
    let regs0 = Interrupting::new(R::regs(m, 0), Hook::new(m, 0, on[0], seed ^ 0x55));
    let regs1 = Interrupting::new(R::regs(m, 1), Hook::new(m, 1, on[1], seed ^ 0xAA));
    let (mut d0, mut k0, b0) = R::take::<O0>(m, 0, regs0);
    let (mut d1, mut k1, b1) = R::take::<O1>(m, 1, regs1);
    let kc0 = R::config(&d0, KINDS, 0);
    k0.configure(&mut d0, &kc0).unwrap();
    k0.enable(&mut d0).unwrap();
    let kc1 = R::config(&d1, KINDS, 0);
    k1.configure(&mut d1, &kc1).unwrap();
    k1.enable(&mut d1).unwrap();
    let s0 = TaskSwitcher::new(&mut d0, b0, on[0])
        .map_err(|(e, _)| e)
        .unwrap();
    let s1 = TaskSwitcher::new(&mut d1, b1, on[1])
        .map_err(|(e, _)| e)
        .unwrap();
    let mut tasks: Vec<Task<R::A>> = Vec::new();
    for (t, events) in TASKS.iter().enumerate() {
        let ctx = events.map(|events| {
            let mut ctx = TaskEvents::new(t as u64);
            for &(kind, every) in events {
                let config = R::config(&d0, kind, every);
                s0.attach(&d0, &mut ctx, config, false).unwrap();
            }
            ctx
        });
        tasks.push(Task {
            ctx,
            last: None,
            since: 0,
            ran: 0,
        });
    }
    let mut c0: Cpu<R, O0> = Cpu {
        d: d0,
        kernel: k0,
        s: s0,
        cur: None,
    };
    let mut c1: Cpu<R, O1> = Cpu {
        d: d1,
        kernel: k1,
        s: s1,
        cur: None,
    };
    let mut ran = Ran::default();
    let mut now = 1u64;
    while ran.switches < switches {
        now += 1 + rnd(5);
        let cpu = rnd(2) as usize;
        let action = rnd(100);
        if action < 45 {
            match cpu {
                0 => c0.run(&mut rnd),
                _ => c1.run(&mut rnd),
            }
        } else if action < 50 {
            let (t0, t1) = (c0.hook().truth.clone(), c1.hook().truth.clone());
            let truth = |t: u64, kind: usize| both(&t0, &t1, t, kind);
            match cpu {
                0 => c0.check_live(&tasks, truth, now),
                _ => c1.check_live(&tasks, truth, now),
            }
        } else {
            let (mine, other) = match cpu {
                0 => (c0.cur, c1.cur),
                _ => (c1.cur, c0.cur),
            };
            let k = rnd(TASKS.len() as u64 + 1) as usize;
            let next = (k < TASKS.len()).then_some(k);
            if next.is_some() && (next == mine || next == other) {
                continue;
            }
            match cpu {
                0 => c0.switch(0, &mut tasks, next, now, &mut ran),
                _ => c1.switch(1, &mut tasks, next, now, &mut ran),
            }
        }
    }
    // Everything switched out; every PMI still owed taken.
    now += 1;
    c0.switch(0, &mut tasks, None, now, &mut ran);
    c1.switch(1, &mut tasks, None, now, &mut ran);
    for _ in 0..8 {
        c0.kernel.read(&mut c0.d).unwrap();
        c1.kernel.read(&mut c1.d).unwrap();
    }
    assert!(
        c0.hook().pmi.is_none() && c1.hook().pmi.is_none(),
        "every PMI taken"
    );
    let (t0, t1) = (c0.hook().truth.clone(), c1.hook().truth.clone());
    let mut samples = c0.hook().samples.clone();
    samples.extend(c1.hook().samples.iter().copied());
    ran.pmis = c0.hook().pmis + c1.hook().pmis;
    for (t, task) in tasks.iter_mut().enumerate() {
        let Some(ctx) = task.ctx.as_mut() else {
            continue;
        };
        for (i, &(kind, every)) in TASKS[t].unwrap_or(&[]).iter().enumerate() {
            let c = ctx.count(i).unwrap();
            assert_eq!(
                c.count,
                both(&t0, &t1, t as u64, kind),
                "task {t} event {i}"
            );
            assert_eq!(
                (c.enabled, c.running),
                (task.ran, task.ran),
                "task {t} event {i}: times"
            );
            if every > 0 {
                let residual = ctx.residual(i).unwrap();
                assert_eq!(c.count, c.periods * every + residual, "task {t} event {i}");
                let owed = ctx.take_pending(i);
                let sampled: u64 = samples
                    .iter()
                    .filter(|(a, _)| a.task == t as u64 && usize::from(a.event) == i)
                    .map(|(_, p)| p)
                    .sum();
                assert_eq!(sampled + owed, c.periods, "task {t} event {i}: samples");
                ran.samples += sampled;
                ran.owed += owed;
            }
        }
    }
    assert!(
        samples
            .iter()
            .all(|(a, _)| TASKS[a.task as usize].is_some()),
        "no sample of a task without a context"
    );
    let (kernel0, kernel1) = (c0.hook().kernel, c1.hook().kernel);
    assert_eq!(
        c0.kernel.read(&mut c0.d).unwrap(),
        kernel0,
        "CPU 0's kernel counter"
    );
    assert_eq!(
        c1.kernel.read(&mut c1.d).unwrap(),
        kernel1,
        "CPU 1's kernel counter"
    );
    ran
}

/// Events of kind `kind` task `t` was given on both CPUs.
fn both(
    t0: &HashMap<u64, [u64; KINDS]>,
    t1: &HashMap<u64, [u64; KINDS]>,
    t: u64,
    kind: usize,
) -> u64 {
    t0.get(&t).map_or(0, |k| k[kind]) + t1.get(&t).map_or(0, |k| k[kind])
}

/// Events at every access of a switch between two tasks with different
/// events on one counter: each event is counted for the task whose event
/// it is or for neither, never for the other (the core writes a counter's
/// control before its value, and reads it before either). The outgoing
/// task counts kind 0, the incoming one kind 2.
pub(super) fn sweep<R: Rig, O: Owner>() -> usize {
    let m = R::machine();
    let on: &'static OnCpu = Box::leak(Box::new(OnCpu::new()));
    let regs = Interrupting::new(R::regs(m, 0), Hook::new(m, 0, on, 1));
    let (mut d, mut kernel, set_aside) = R::take::<O>(m, 0, regs);
    let kc = R::config(&d, KINDS, 0);
    kernel.configure(&mut d, &kc).unwrap();
    kernel.enable(&mut d).unwrap();
    let mut s = TaskSwitcher::new(&mut d, set_aside, on)
        .map_err(|(e, _)| e)
        .unwrap();
    let mut accesses = 0;
    let mut runs = 0;
    for kind in [0, 2] {
        let mut k = 0;
        loop {
            let mut a = TaskEvents::<R::A, E>::new(1);
            let mut b = TaskEvents::<R::A, E>::new(2);
            s.attach(&d, &mut a, R::config(&d, 0, 0), false).unwrap();
            s.attach(&d, &mut b, R::config(&d, 2, 0), false).unwrap();
            s.switch(&mut d, None, Some(&mut a), 0).unwrap();
            R::backend(&mut d).hook.inject.push((0, 10));
            kernel.read(&mut d).unwrap();
            R::backend(&mut d).hook.at = Some((k, kind, 5));
            R::backend(&mut d).arm();
            s.switch(&mut d, Some(&mut a), Some(&mut b), 1).unwrap();
            let n = R::backend(&mut d).accesses();
            accesses = accesses.max(n);
            s.switch(&mut d, Some(&mut b), None, 2).unwrap();
            kernel.read(&mut d).unwrap();
            let (ca, cb) = (a.count(0).unwrap().count, b.count(0).unwrap().count);
            match kind {
                0 => {
                    assert!(ca == 10 || ca == 15, "access {k}: A counted {ca}");
                    assert_eq!(cb, 0, "access {k}: A's event counted for B");
                }
                _ => {
                    assert_eq!(ca, 10, "access {k}: B's event counted for A");
                    assert!(cb == 0 || cb == 5, "access {k}: B counted {cb}");
                }
            }
            runs += 1;
            if k > n {
                break;
            }
            k += 1;
        }
    }
    assert!(accesses >= 3, "a read, a control, a value");
    runs
}

/// The accesses of each kind of switch, in order: none to none, none to
/// an empty context and back, a context of two events in (both start),
/// one with the same events, one with other events on the same counters,
/// out to an empty context (both stop), and the counters given back.
pub(super) fn traffic<R: Rig, O: Owner>() -> [usize; 6] {
    let m = R::machine();
    let on: &'static OnCpu = Box::leak(Box::new(OnCpu::new()));
    let regs = Interrupting::new(R::regs(m, 0), Hook::new(m, 0, on, 1));
    let (mut d, _kernel, set_aside) = R::take::<O>(m, 0, regs);
    let mut s = TaskSwitcher::new(&mut d, set_aside, on)
        .map_err(|(e, _)| e)
        .unwrap();
    let ctx = |events: &[(usize, u64)], d: &R::Driver<O>| {
        let mut c = TaskEvents::<R::A, E>::new(0);
        for &(kind, every) in events {
            s.attach(d, &mut c, R::config(d, kind, every), false)
                .unwrap();
        }
        c
    };
    let mut a = ctx(&[(0, 0), (1, 1000)], &d);
    let mut b = ctx(&[(0, 0), (1, 1000)], &d);
    let mut other = ctx(&[(2, 0), (0, 0)], &d);
    let mut empty = ctx(&[], &d);
    let mut out = [0; 6];
    let count = |d: &mut R::Driver<O>| {
        let n = R::backend(d).accesses();
        R::backend(d).arm();
        n
    };
    count(&mut d);
    s.switch(&mut d, None::<&mut TaskEvents<R::A, E>>, None, 0)
        .unwrap();
    s.switch(&mut d, None, Some(&mut empty), 0).unwrap();
    s.switch(&mut d, Some(&mut empty), None, 0).unwrap();
    out[0] = count(&mut d);
    s.switch(&mut d, None, Some(&mut a), 0).unwrap();
    out[1] = count(&mut d);
    s.switch(&mut d, Some(&mut a), Some(&mut b), 0).unwrap();
    out[2] = count(&mut d);
    s.switch(&mut d, Some(&mut b), Some(&mut other), 0).unwrap();
    out[3] = count(&mut d);
    s.switch(&mut d, Some(&mut other), Some(&mut empty), 0)
        .unwrap();
    out[4] = count(&mut d);
    s.switch(&mut d, Some(&mut empty), None, 0).unwrap();
    let _tokens = s.finish(&mut d).map_err(|(e, _)| e).unwrap();
    out[5] = count(&mut d);
    out
}

//! Minimal preemptive tasks: kernel threads on stacks of their own, run
//! round robin on each CPU and switched by that CPU's local APIC timer at
//! jittered, so random, points; a task may move to another CPU's queue at
//! any switch. Enough of a scheduler to test per-task counting
//! (`pmu::task`) under preemption and migration, as a kernel's scheduler
//! would call it: one hook per switch, with interrupts disabled.
//!
//! # How a switch works
//!
//! The timer's interrupt entry saves every register of the interrupted
//! code in its [`InterruptFrame`] (`crate::idt`), and IRETQ resumes from
//! it. The tick's frame handler copies the frame into the outgoing task's
//! context and the incoming task's context into the frame, so IRETQ
//! resumes the incoming task, on its own stack, where its last tick left
//! it (a new task at its entry). A CPU whose queue is empty runs its idle
//! context (the code that called [`run`], halting). Before it touches a
//! context the handler calls the kernel's [`OnSwitch`] hook with the
//! outgoing and incoming tasks (`None`: the idle context), with interrupts
//! disabled (an interrupt gate): the place a kernel saves and restores the
//! outgoing and incoming tasks' PMU state. A task that moves goes to the
//! other CPU's queue at this CPU's next tick (or its idle loop), not at
//! once: until this handler's IRETQ it runs on the task's stack, where
//! the other CPU would run the task; the queue's lock orders the task's
//! context saved before the other CPU's load.
//!
//! The timer is the xAPIC's ([`ApicTimer`]); a run needs the kernel in
//! xAPIC mode. Each CPU's tick is a one-shot countdown re-armed at the end
//! of its handler with a jittered count ([`Jitter`]), so a task is
//! preempted at an independent point each time and always runs a little
//! between two ticks.
//!
//! # Use
//!
//! On the boot CPU [`prepare`] (the mean time between ticks, how often a
//! switched-out task moves, the hook), [`spawn`] each task on a CPU's
//! queue, then [`run`] on every CPU of the run (the application processors
//! through [`smp::run_on`]); each returns when every task has returned,
//! with its CPU's [`Stats`]. Tasks poll [`stopping`], which the kernel (or
//! [`Config::stop_after`] switches) sets.

use core::cell::UnsafeCell;
use core::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};

use pmu::apic::Vector;
use x86_64::instructions::interrupts;
use x86_64::instructions::segmentation::{CS, SS, Segment};

use crate::idt::{self, InterruptFrame};
use crate::smp;
use crate::timer::{self, ApicTimer, Divide, Jitter};

/// Tasks a run can have.
pub const MAX_TASKS: usize = 16;
/// CPUs a run can use.
pub const MAX_CPUS: usize = 4;
/// Each task's stack.
const STACK_SIZE: usize = 32 * 1024;

/// The hook a switch calls: `(cpu, outgoing, incoming)`, tasks by number,
/// `None` for the CPU's idle context; with interrupts disabled, on the CPU
/// that switches, before either context is touched.
pub type OnSwitch = fn(usize, Option<usize>, Option<usize>);

/// What a run does.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// The timer's vector.
    pub vector: u8,
    /// The mean time between two ticks of a CPU, in ns (each jittered to
    /// between half and one and a half times it).
    pub mean_ns: u64,
    /// Every this-many-th preemption of a task on a CPU moves it to another
    /// CPU's queue (0: never); the ticks' jitter makes where the task is
    /// when it moves random.
    pub migrate_one_in: u32,
    /// The CPUs of the run (their numbers 0 to `cpus - 1`).
    pub cpus: usize,
    /// Ask the tasks to stop ([`stopping`]) after this many switches on
    /// all CPUs (0: only when the kernel calls [`stop`]).
    pub stop_after: u64,
    /// The kernel's hook.
    pub on_switch: OnSwitch,
}

/// Why a run could not be set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskError {
    /// No such task slot, or it is in use.
    Slot(usize),
    /// No such CPU in the run.
    Cpu(usize),
    /// The vector is not one a timer can raise (32-255).
    Vector(u8),
    /// The kernel is in x2APIC mode; the timer here is the xAPIC's.
    X2Apic,
}

impl core::fmt::Display for TaskError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            TaskError::Slot(t) => write!(f, "task {t}: no such slot, or in use"),
            TaskError::Cpu(c) => write!(f, "CPU {c} is not in the run"),
            TaskError::Vector(v) => write!(f, "vector {v} cannot be a timer's"),
            TaskError::X2Apic => f.write_str("the tasks' timer needs xAPIC mode"),
        }
    }
}

/// What one CPU did in a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Ticks taken.
    pub ticks: u64,
    /// Switches made (a tick that keeps the running task is not one).
    pub switches: u64,
    /// Tasks this CPU sent to another CPU's queue.
    pub migrations: u64,
    /// Ticks that could have moved the running task (one was running and
    /// had not returned, the run has more than one CPU): every
    /// [`Config::migrate_one_in`]-th of them did.
    pub preemptions: u64,
}

/// A context saved by a switch: what the interrupt frame holds, but the
/// vector and error code.
#[derive(Clone, Copy, Debug, Default)]
struct Context {
    regs: [u64; 15],
    rip: u64,
    cs: u64,
    rflags: u64,
    rsp: u64,
    ss: u64,
}

impl Context {
    fn save(f: &InterruptFrame) -> Context {
        Context {
            regs: [
                f.r15, f.r14, f.r13, f.r12, f.r11, f.r10, f.r9, f.r8, f.rbp, f.rdi, f.rsi, f.rdx,
                f.rcx, f.rbx, f.rax,
            ],
            rip: f.rip,
            cs: f.cs,
            rflags: f.rflags,
            rsp: f.rsp,
            ss: f.ss,
        }
    }

    fn load(&self, f: &mut InterruptFrame) {
        let [
            r15,
            r14,
            r13,
            r12,
            r11,
            r10,
            r9,
            r8,
            rbp,
            rdi,
            rsi,
            rdx,
            rcx,
            rbx,
            rax,
        ] = self.regs;
        (f.r15, f.r14, f.r13, f.r12, f.r11) = (r15, r14, r13, r12, r11);
        (f.r10, f.r9, f.r8, f.rbp, f.rdi) = (r10, r9, r8, rbp, rdi);
        (f.rsi, f.rdx, f.rcx, f.rbx, f.rax) = (rsi, rdx, rcx, rbx, rax);
        (f.rip, f.cs, f.rflags, f.rsp, f.ss) = (self.rip, self.cs, self.rflags, self.rsp, self.ss);
    }
}

const FREE: u8 = 0;
const READY: u8 = 1;
const RUNNING: u8 = 2;
const DONE: u8 = 3;

/// One task: its context while it does not run, its state, its entry.
struct Slot {
    context: UnsafeCell<Context>,
    state: AtomicU8,
    entry: AtomicPtr<()>,
}

// SAFETY: a slot's context is written by `spawn` before the task is queued
// and by the CPU that switches the task out, and read by the CPU that
// switches it in: the run queue's lock orders each write before the read
// (a task is in one queue, or running on one CPU, at a time).
unsafe impl Sync for Slot {}

static SLOTS: [Slot; MAX_TASKS] = [const {
    Slot {
        context: UnsafeCell::new(Context {
            regs: [0; 15],
            rip: 0,
            cs: 0,
            rflags: 0,
            rsp: 0,
            ss: 0,
        }),
        state: AtomicU8::new(FREE),
        entry: AtomicPtr::new(core::ptr::null_mut()),
    }
}; MAX_TASKS];

#[repr(C, align(16))]
struct Stack(UnsafeCell<[u8; STACK_SIZE]>);

// SAFETY: each stack is the one task's whose slot it shares an index with;
// only that task's code uses it.
unsafe impl Sync for Stack {}

static STACKS: [Stack; MAX_TASKS] = [const { Stack(UnsafeCell::new([0; STACK_SIZE])) }; MAX_TASKS];

/// A CPU's run queue: task numbers, first in first out.
struct Queue {
    tasks: [u8; MAX_TASKS],
    head: usize,
    len: usize,
}

impl Queue {
    const fn new() -> Queue {
        Queue {
            tasks: [0; MAX_TASKS],
            head: 0,
            len: 0,
        }
    }

    fn push(&mut self, t: usize) {
        if self.len < MAX_TASKS {
            self.tasks[(self.head + self.len) % MAX_TASKS] = t as u8;
            self.len += 1;
        }
    }

    fn pop(&mut self) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let t = self.tasks[self.head];
        self.head = (self.head + 1) % MAX_TASKS;
        self.len -= 1;
        Some(usize::from(t))
    }
}

static QUEUES: [spin::Mutex<Queue>; MAX_CPUS] =
    [const { spin::Mutex::new(Queue::new()) }; MAX_CPUS];

/// A CPU's scheduler: its running task, its idle context, its counts.
struct Cpu {
    active: bool,
    current: Option<usize>,
    /// A task switched out to another CPU's queue, and which: queued at
    /// this CPU's next tick, once this CPU no longer runs on its stack.
    outbox: Option<(usize, usize)>,
    idle: Context,
    stats: Stats,
    /// The state of the choice of the CPU a task moves to (xorshift).
    choice: u64,
}

struct PerCpu(UnsafeCell<Cpu>);

// SAFETY: CPU `i`'s entry is used only on CPU `i`, with interrupts
// disabled: by its tick handler (an interrupt gate) and by `run`, which
// disables interrupts around every use.
unsafe impl Sync for PerCpu {}

static CPUS: [PerCpu; MAX_CPUS] = [const {
    PerCpu(UnsafeCell::new(Cpu {
        active: false,
        current: None,
        outbox: None,
        idle: Context {
            regs: [0; 15],
            rip: 0,
            cs: 0,
            rflags: 0,
            rsp: 0,
            ss: 0,
        },
        stats: Stats {
            ticks: 0,
            switches: 0,
            migrations: 0,
            preemptions: 0,
        },
        choice: 0,
    }))
}; MAX_CPUS];

static JITTER: [Jitter; MAX_CPUS] = [
    Jitter::new(0x39_0001),
    Jitter::new(0x39_0002),
    Jitter::new(0x39_0003),
    Jitter::new(0x39_0004),
];

static HOOK: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());
static VECTOR: AtomicU8 = AtomicU8::new(0);
static MEAN_COUNT: AtomicU32 = AtomicU32::new(0);
static MIGRATE_ONE_IN: AtomicU32 = AtomicU32::new(0);
static RUN_CPUS: AtomicUsize = AtomicUsize::new(1);
static STOP_AFTER: AtomicU64 = AtomicU64::new(0);
static SWITCHES: AtomicU64 = AtomicU64::new(0);
static LIVE: AtomicUsize = AtomicUsize::new(0);
static STOP: AtomicBool = AtomicBool::new(false);

/// Sets up a run (on the boot CPU, before [`spawn`]): the timer measured
/// against the PIT (5 ms), the hook and the choices of `config`, every
/// slot free, no task asked to stop.
pub fn prepare(config: &Config) -> Result<(), TaskError> {
    if crate::apic::x2apic_mode() {
        return Err(TaskError::X2Apic);
    }
    if Vector::new(config.vector).is_none() {
        return Err(TaskError::Vector(config.vector));
    }
    if config.cpus == 0 || config.cpus > MAX_CPUS.min(smp::online().max(1)) {
        return Err(TaskError::Cpu(config.cpus));
    }
    // SAFETY: the boot CPU's xAPIC, in xAPIC mode (checked); no run is
    // active, so no tick handler programs the timer meanwhile.
    let mut t = unsafe { ApicTimer::at_default_base() };
    let cal = timer::calibrate(&mut t, 5_966);
    MEAN_COUNT.store(
        cal.count_for(config.mean_ns, Divide::By1),
        Ordering::Release,
    );
    HOOK.store(config.on_switch as *mut (), Ordering::Release);
    VECTOR.store(config.vector, Ordering::Release);
    MIGRATE_ONE_IN.store(config.migrate_one_in, Ordering::Release);
    RUN_CPUS.store(config.cpus, Ordering::Release);
    STOP_AFTER.store(config.stop_after, Ordering::Release);
    SWITCHES.store(0, Ordering::Release);
    STOP.store(false, Ordering::Release);
    for s in &SLOTS {
        if s.state.load(Ordering::Acquire) == DONE {
            s.state.store(FREE, Ordering::Release);
        }
    }
    Ok(())
}

/// Task `id` will run `entry(id)` on its own stack, starting in CPU
/// `cpu`'s queue. Refused for a slot in use.
pub fn spawn(id: usize, cpu: usize, entry: fn(usize)) -> Result<(), TaskError> {
    let slot = SLOTS.get(id).ok_or(TaskError::Slot(id))?;
    if cpu >= RUN_CPUS.load(Ordering::Acquire) {
        return Err(TaskError::Cpu(cpu));
    }
    if slot
        .state
        .compare_exchange(FREE, READY, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return Err(TaskError::Slot(id));
    }
    slot.entry.store(entry as *mut (), Ordering::Release);
    let top = STACKS[id % MAX_TASKS].0.get() as u64 + STACK_SIZE as u64;
    let mut regs = [0; 15];
    regs[9] = id as u64; // rdi: `start`'s argument
    let context = Context {
        regs,
        rip: start as *const () as u64,
        cs: u64::from(CS::get_reg().0),
        // IF: the task runs with interrupts enabled.
        rflags: 0x202,
        // As after a call: the return address slot below a 16-byte
        // boundary.
        rsp: top - 8,
        ss: u64::from(SS::get_reg().0),
    };
    // SAFETY: the slot was FREE (the exchange above made it this call's):
    // no CPU switches it, so nothing else uses its context.
    unsafe { *slot.context.get() = context };
    LIVE.fetch_add(1, Ordering::AcqRel);
    QUEUES[cpu % MAX_CPUS].lock().push(id);
    Ok(())
}

/// Every task's first code: its entry, then done (never switched in
/// again), halting until a tick switches it out.
extern "C" fn start(id: usize) -> ! {
    let slot = &SLOTS[id % MAX_TASKS];
    let entry = slot.entry.load(Ordering::Acquire);
    if !entry.is_null() {
        // SAFETY: `spawn` stored a `fn(usize)` there.
        let entry: fn(usize) = unsafe { core::mem::transmute(entry) };
        entry(id);
    }
    interrupts::disable();
    slot.state.store(DONE, Ordering::Release);
    LIVE.fetch_sub(1, Ordering::AcqRel);
    loop {
        interrupts::enable_and_hlt();
    }
}

/// Whether the tasks have been asked to stop.
pub fn stopping() -> bool {
    STOP.load(Ordering::Acquire)
}

/// Asks the tasks to stop.
pub fn stop() {
    STOP.store(true, Ordering::Release);
}

/// Switches made on all CPUs since [`prepare`].
pub fn switches() -> u64 {
    SWITCHES.load(Ordering::Acquire)
}

/// The task running on this CPU (`None`: its idle context).
pub fn current() -> Option<usize> {
    interrupts::without_interrupts(|| {
        let cpu = smp::cpu();
        // SAFETY: this CPU's entry, interrupts disabled.
        CPUS.get(cpu).and_then(|c| unsafe { (*c.0.get()).current })
    })
}

/// Runs the tasks on this CPU until every task spawned has returned:
/// this code becomes the CPU's idle context, the timer ticks, and each
/// tick switches round robin (see the [module documentation](self)).
/// Returns this CPU's [`Stats`]. Call it on every CPU of the run, with
/// interrupts disabled; they stay disabled on return.
pub fn run() -> Stats {
    interrupts::disable();
    let cpu = smp::cpu();
    let Some(state) = CPUS.get(cpu) else {
        return Stats::default();
    };
    let vector = VECTOR.load(Ordering::Acquire);
    // SAFETY: `on_tick` leaves the frame either unchanged or holding a
    // context a switch saved (the interrupted code's own, or a task's
    // first, at `start` on its own stack, which nothing else uses): a
    // context the CPU resumes with IRETQ and whose code expects it.
    unsafe { idt::set_frame_handler(vector, on_tick) };
    {
        // SAFETY: this CPU's entry, interrupts disabled.
        let s = unsafe { &mut *state.0.get() };
        s.active = true;
        s.current = None;
        s.outbox = None;
        s.stats = Stats::default();
        s.choice = 0x9E37_79B9_7F4A_7C15 ^ (cpu as u64 + 1);
    }
    // SAFETY: this CPU's xAPIC (the run is in xAPIC mode, `prepare`);
    // only this CPU's tick handler programs its timer, with interrupts
    // disabled as here.
    let mut t = unsafe { ApicTimer::at_default_base() };
    if let Some(v) = Vector::new(vector) {
        let count = JITTER[cpu % MAX_CPUS].count(MEAN_COUNT.load(Ordering::Acquire));
        t.start_one_shot(v, Divide::By1, count);
    }
    while LIVE.load(Ordering::Acquire) > 0 {
        interrupts::enable_and_hlt();
        interrupts::disable();
        // SAFETY: this CPU's entry, interrupts disabled.
        let s = unsafe { &mut *state.0.get() };
        // The idle context runs on its own stack: a task the last switch
        // moved may go to its queue now.
        if let Some((task, to)) = s.outbox.take() {
            QUEUES[to % MAX_CPUS].lock().push(task);
        }
    }
    t.stop();
    // SAFETY: as above.
    let s = unsafe { &mut *state.0.get() };
    s.active = false;
    s.stats
}

/// One tick: re-armed, and a switch when another task is ready or the
/// running one has returned (the module documentation).
fn on_tick(frame: &mut InterruptFrame) -> bool {
    let cpu = smp::cpu();
    let Some(state) = CPUS.get(cpu) else {
        return false;
    };
    // SAFETY: this CPU's entry, in its tick handler (interrupts disabled).
    let s = unsafe { &mut *state.0.get() };
    // SAFETY: this CPU's xAPIC (xAPIC mode, `prepare`); only this handler
    // and `run` (interrupts disabled) program its timer.
    let mut t = unsafe { ApicTimer::at_default_base() };
    t.eoi();
    if !s.active {
        return true;
    }
    // The task moved at the last switch: this handler no longer runs on
    // its stack (it runs on the task the last switch loaded), so the other
    // CPU may run it now.
    if let Some((task, to)) = s.outbox.take() {
        QUEUES[to % MAX_CPUS].lock().push(task);
    }
    s.stats.ticks += 1;
    let prev = s.current;
    let done = prev.is_some_and(|p| SLOTS[p % MAX_TASKS].state.load(Ordering::Acquire) == DONE);
    let cpus = RUN_CPUS.load(Ordering::Acquire);
    let one_in = u64::from(MIGRATE_ONE_IN.load(Ordering::Acquire));
    let movable = prev.is_some() && !done && cpus > 1 && one_in > 0;
    if movable {
        s.stats.preemptions += 1;
    }
    let moves = movable && s.stats.preemptions.is_multiple_of(one_in);
    let next = QUEUES[cpu % MAX_CPUS].lock().pop();
    if next.is_none() && prev.is_some() && !done && !moves {
        // Nothing else to run: the task runs on.
        rearm(&mut t, cpu);
        return true;
    }
    let hook = HOOK.load(Ordering::Acquire);
    if !hook.is_null() {
        // SAFETY: `prepare` stored an `OnSwitch` there.
        let hook: OnSwitch = unsafe { core::mem::transmute(hook) };
        hook(cpu, prev, next);
    }
    match prev {
        Some(p) => {
            let slot = &SLOTS[p % MAX_TASKS];
            // SAFETY: task `p` runs on this CPU: no other CPU uses its
            // context until it is queued below.
            unsafe { *slot.context.get() = Context::save(frame) };
            if !done {
                slot.state.store(READY, Ordering::Release);
                if moves {
                    // Not yet: this handler runs on the task's stack until
                    // its IRETQ, and the other CPU would run it there.
                    s.stats.migrations += 1;
                    let to = (cpu + 1 + s.choose(cpus as u64 - 1) as usize) % cpus;
                    s.outbox = Some((p, to));
                } else {
                    QUEUES[cpu % MAX_CPUS].lock().push(p);
                }
            }
        }
        None => s.idle = Context::save(frame),
    }
    match next {
        Some(n) => {
            let slot = &SLOTS[n % MAX_TASKS];
            slot.state.store(RUNNING, Ordering::Release);
            // SAFETY: task `n` came out of this CPU's queue: it runs nowhere
            // and its context was written before it was queued.
            unsafe { (*slot.context.get()).load(frame) };
        }
        None => s.idle.load(frame),
    }
    s.current = next;
    s.stats.switches += 1;
    let all = SWITCHES.fetch_add(1, Ordering::AcqRel) + 1;
    let after = STOP_AFTER.load(Ordering::Acquire);
    if after > 0 && all >= after {
        STOP.store(true, Ordering::Release);
    }
    rearm(&mut t, cpu);
    true
}

/// The next tick, a jittered count from now.
fn rearm(t: &mut ApicTimer, cpu: usize) {
    t.restart_one_shot(JITTER[cpu % MAX_CPUS].count(MEAN_COUNT.load(Ordering::Acquire)));
}

impl Cpu {
    /// A number below `m` (xorshift).
    fn choose(&mut self, m: u64) -> u64 {
        let mut x = self.choice;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.choice = x;
        x % m.max(1)
    }
}

//! Per-task counting (`pmu::task`) under a preemptive scheduler: six
//! kernel tasks (`hobby::task`), each feeding the architectural-PMU model
//! of the CPU it runs on its own mix of instructions, branches and cycles,
//! preempted thousands of times by each CPU's APIC timer at jittered
//! points; with two CPUs a switched-out task moves to the other CPU once in
//! eight switches. The scheduler's hook switches each CPU's per-task
//! counters (`TaskSwitcher::switch`, interrupts disabled); each CPU's
//! kernel counts branches CPU-wide on a counter of its own beside them;
//! PMIs (their vector below the timer's, so a tick that comes with one is
//! taken first) are attributed to the running task through the CPU's
//! `OnCpu`. At the end every task's every count is its iterations times
//! its mix, exactly; its samples and the periods its switch-outs found
//! owed add up to its periods; each kernel counter holds every branch of
//! its CPU. Every count comes from the models (Skylake configuration),
//! not hardware.
//!
//! qemu-run: cpu1:
//! qemu-run: smp2: -smp 2 -accel tcg,thread=multi
#![no_std]
#![no_main]

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU64, Ordering};

use hobby::boot::BootInfo;
use hobby::idt::{self, InterruptFrame};
use hobby::pmi::{self, local_apic};
use hobby::task::{self, Config as RunConfig};
use hobby::test::Outcome;
use hobby::timer::{self, ApicTimer};
use hobby::{case, check, check_eq, println, smp};
use pmu::apic::{LvtPerfCounter, PmiDelivery, Vector};
use pmu::arch::archperf::driver::{ArchPerfDriver, ArchPerfmon, CounterConfig};
use pmu::arch::archperf::{ArchPerfPmu, EventSpec};
use pmu::arch::handle_pmi;
use pmu::counter::{AnyHandle, Owner};
use pmu::model::archperf::{ArchPerfMsr, Config, Event, SharedArchPerfModel};
use pmu::sampling::SampleAfter;
use pmu::task::{OnCpu, TaskEvents, TaskSwitcher};
use x86_64::instructions::interrupts;

hobby::entry_point!(main);

/// The tasks' timer; the model's PMI, below it.
const TIMER: u8 = 0xF8;
const PMI: u8 = 0xD0;
const TASKS: usize = 6;
/// Switches on all CPUs after which the tasks stop, on a platform that
/// runs code as fast as TCG; at least [`FEWEST_SWITCHES`] where it runs it
/// much slower (`hobby::pace::scaled`: the project's nested KVM, which
/// emulates its guest, runs this kernel's debug build about a thousand
/// times slower, some 40 ms a switch).
const SWITCHES: u64 = 4_000;
const FEWEST_SWITCHES: u64 = 1_000;
/// A task halts after every this-many-th iteration ([`work`]) where the
/// platform runs code much slower than TCG (`hobby::pace::slowdown`), or
/// never (0).
static HALT_EVERY: AtomicU64 = AtomicU64::new(0);
/// Every this-many-th preemption of a task moves it to another CPU.
const MIGRATE_ONE_IN: u32 = 8;
/// The shortest mean time between two ticks of a CPU, in ns, and the
/// longest tried ([`tick_ns`]).
const TICK_NS: (u64, u64) = (150_000, 40_000_000);
/// The share of a spinning CPU (percent) the probe ticks may take
/// ([`tick_ns`]): the tasks keep at least the rest.
const TICK_OVERHEAD_PERCENT: u64 = 50;

static MODELS: [SharedArchPerfModel; 2] = [
    SharedArchPerfModel::new(Config::skylake()),
    SharedArchPerfModel::new(Config::skylake()),
];
// SAFETY: one value per CPU's model, each a logical processor of its own.
static PMUS: [ArchPerfPmu; 2] = [const { unsafe { ArchPerfPmu::new() } }; 2];
static ON: [OnCpu; 2] = [const { OnCpu::new() }; 2];

/// Each task's mix per iteration: instructions, branches, cycles.
const MIX: [[u64; 3]; TASKS] = [
    [12, 2, 7],
    [12, 2, 7],
    [31, 5, 40],
    [3, 1, 11],
    [17, 4, 9],
    [8, 3, 5],
];
/// The events' names, by kind (as in `MIX`).
const EVENTS: [&str; 3] = ["instructions", "branches", "cycles"];
const SELECTS: [(u8, u8); 3] = [(0xC0, 0x00), (0xC4, 0x00), (0x3C, 0x00)];
/// Each task's events: (kind, sample-after value or 0 for counting);
/// `None`: the task has no context. Tasks 0 and 1 have the same set.
const CONTEXTS: [Option<&[(usize, u64)]>; TASKS] = [
    Some(&[(0, 0), (2, 997)]),
    Some(&[(0, 0), (2, 997)]),
    Some(&[(1, 0), (0, 1_009), (2, 0)]),
    Some(&[(2, 503)]),
    Some(&[]),
    None,
];

static CONTEXT: [spin::Mutex<Option<TaskEvents<ArchPerfmon, 4>>>; TASKS] =
    [const { spin::Mutex::new(None) }; TASKS];
/// Iterations each task ran on each CPU.
static ITERATIONS: [[AtomicU64; TASKS]; 2] = [const { [const { AtomicU64::new(0) }; TASKS] }; 2];
/// Sample periods the PMI handler gave each task's event.
static SAMPLED: [[AtomicU64; 4]; TASKS] = [const { [const { AtomicU64::new(0) }; 4] }; TASKS];
static FOREIGN: AtomicU64 = AtomicU64::new(0);
static HANDLER_ERRORS: AtomicU64 = AtomicU64::new(0);
static SWITCH_ERRORS: AtomicU64 = AtomicU64::new(0);
static PMIS: AtomicU64 = AtomicU64::new(0);
static KERNEL: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];
static STATS: [spin::Mutex<task::Stats>; 2] = [const {
    spin::Mutex::new(task::Stats {
        ticks: 0,
        switches: 0,
        migrations: 0,
        preemptions: 0,
    })
}; 2];

pmu::owner!(Cpu0);
pmu::owner!(Cpu1);

type Driver<O> = ArchPerfDriver<'static, O, ArchPerfMsr<'static>>;

/// One CPU's PMU: its driver, its switcher, its kernel's counter.
struct PerCpu<O: Owner> {
    d: Driver<O>,
    s: TaskSwitcher<'static, ArchPerfmon, 3>,
    kernel: AnyHandle<ArchPerfmon>,
}

struct Cell<O: Owner>(UnsafeCell<Option<PerCpu<O>>>);

// SAFETY: CPU `i`'s cell is used only on CPU `i` with interrupts disabled
// (its setup, the scheduler's hook, its final read): never by two at once.
unsafe impl<O: Owner> Sync for Cell<O> {}

static CPU0: Cell<Cpu0> = Cell(UnsafeCell::new(None));
static CPU1: Cell<Cpu1> = Cell(UnsafeCell::new(None));

impl<O: Owner> Cell<O> {
    /// `f` on the cell, with interrupts disabled.
    fn with<R>(&self, f: impl FnOnce(&mut Option<PerCpu<O>>) -> R) -> R {
        interrupts::without_interrupts(|| {
            // SAFETY: the `Sync` impl's rule: this CPU's cell, interrupts
            // disabled, so neither its hook nor another use runs meanwhile.
            f(unsafe { &mut *self.0.get() })
        })
    }
}

fn main(_: &'static BootInfo) -> ! {
    println!(
        "tasks: six tasks preempted by each CPU's timer, their counters switched with them; every count comes from the architectural-PMU models (Skylake), not hardware"
    );
    idt::set_handler(PMI, on_pmi);
    let cpus = if smp::start_aps(2).is_ok() { 2 } else { 1 };
    println!("tasks: {cpus} CPU(s)");
    hobby::test::run("tasks", &[case!(every_task_counts_exactly_its_own_events)])
}

fn entry() -> LvtPerfCounter {
    LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(PMI).unwrap()))
}

/// The model's PMI on either CPU: that CPU's handler, each sample to the
/// task and event its `OnCpu` names.
fn on_pmi(frame: &InterruptFrame) {
    let cpu = smp::cpu().min(1);
    let mut apic = local_apic();
    let r = handle_pmi(
        &PMUS[cpu],
        &mut MODELS[cpu].msr(),
        &mut apic,
        entry(),
        frame.rip,
        |s| match ON[cpu].attribute(s.counter) {
            Some(a) => {
                if let Some(slot) = SAMPLED
                    .get(a.task as usize)
                    .and_then(|t| t.get(usize::from(a.event)))
                {
                    slot.fetch_add(u64::from(s.periods), Ordering::SeqCst);
                }
            }
            None => {
                FOREIGN.fetch_add(1, Ordering::SeqCst);
            }
        },
    );
    if r.is_err() {
        HANDLER_ERRORS.fetch_add(1, Ordering::SeqCst);
    }
    PMIS.fetch_add(1, Ordering::SeqCst);
    apic.eoi();
}

/// The probe tick [`tick_ns`] measures: what a tick costs without its
/// switch (its EOI, a TSC read, an APIC timer access).
fn probe(_: &InterruptFrame) {
    let _ = timer::rdtsc();
    // SAFETY: the default xAPIC page, identity-mapped; only the boot CPU's
    // probe burst uses its timer now, and this reads it.
    let _ = unsafe { ApicTimer::at_default_base() }.current_count();
    local_apic().eoi();
}

/// The mean time between two ticks: the shortest of [`TICK_NS`], doubled
/// as often as needed, whose probe ticks ([`probe`]) take at most
/// [`TICK_OVERHEAD_PERCENT`] of a spinning CPU, with at least half of
/// their expirations delivered (`hobby::timer::burst`). 150 µs under TCG;
/// under a hypervisor whose exits cost 100 µs each (the project's nested
/// KVM) a 150 µs tick would take the whole CPU (a switch at every tick, no
/// task ever reaching its next instruction), so the tick there is
/// milliseconds long. Whether ticks come on time does not matter here
/// (`hobby::timer::kept_up_period` asks that too, and a busy host makes
/// TCG's late): the points they preempt at are random anyway.
fn tick_ns() -> u64 {
    interrupts::disable();
    // SAFETY: the boot CPU's xAPIC, identity-mapped; no run is active, so
    // nothing else programs its timer meanwhile.
    let cal = timer::calibrate(&mut unsafe { ApicTimer::at_default_base() }, 5_966);
    let vector = Vector::new(TIMER).unwrap();
    let mut period = TICK_NS.0;
    loop {
        let burst = timer::burst(&cal, vector, probe, period, timer::Load::Spin);
        let fits =
            burst.overhead_percent <= TICK_OVERHEAD_PERCENT && burst.ticks * 2 >= burst.periods;
        if fits || period >= TICK_NS.1 {
            println!("tasks: the tick: {burst}");
            return period;
        }
        period = (period * 2).min(TICK_NS.1);
    }
}

fn config(kind: usize, every: u64) -> CounterConfig {
    let c = CounterConfig::counting(EVENTS[kind].parse::<EventSpec>().unwrap());
    match every {
        0 => c,
        n => c.sampling(SampleAfter::new(n, pmu::arch::archperf::pmi::overflow_rule(48)).unwrap()),
    }
}

/// CPU `cpu`'s PMU taken on its model: the kernel's CPU-wide branches on
/// general counter 0, counters 1-3 set aside for tasks.
fn setup<O: Owner>(cpu: usize, cell: &'static Cell<O>) -> Result<(), &'static str> {
    MODELS[cpu].reset();
    let info = MODELS[cpu]
        .detect()
        .ok_or("no architectural PMU on the model")?;
    let (mut d, c) =
        ArchPerfDriver::<O, _>::take(MODELS[cpu].msr(), &info, &PMUS[cpu]).map_err(|_| "take")?;
    let mut kernel = c.g0.erase();
    kernel
        .configure(&mut d, &config(1, 0))
        .map_err(|_| "the kernel's counter")?;
    kernel.enable(&mut d).map_err(|_| "the kernel's counter")?;
    let set_aside = [
        c.g1.erase(),
        c.g2.ok_or("PMC2")?.erase(),
        c.g3.ok_or("PMC3")?.erase(),
    ];
    let s = TaskSwitcher::new(&mut d, set_aside, &ON[cpu]).map_err(|_| "setting aside")?;
    local_apic().set_perf_counter_entry(entry());
    cell.with(|c| *c = Some(PerCpu { d, s, kernel }));
    Ok(())
}

/// Task `id`'s context, its events attached through CPU 0's switcher.
fn contexts() -> Result<(), &'static str> {
    CPU0.with(|c| {
        let c = c.as_mut().ok_or("CPU 0 not set up")?;
        for (t, events) in CONTEXTS.iter().enumerate() {
            let ctx = match events {
                None => None,
                Some(events) => {
                    let mut ctx = TaskEvents::new(t as u64);
                    for &(kind, every) in *events {
                        c.s.attach(&c.d, &mut ctx, config(kind, every), false)
                            .map_err(|_| "an event does not fit")?;
                    }
                    Some(ctx)
                }
            };
            *CONTEXT[t].lock() = ctx;
        }
        Ok(())
    })
}

/// The scheduler's hook: this CPU's counters switched from `prev`'s
/// context to `next`'s (interrupts are disabled).
fn on_switch(cpu: usize, prev: Option<usize>, next: Option<usize>) {
    let ok = match cpu {
        0 => switch(&CPU0, prev, next),
        _ => switch(&CPU1, prev, next),
    };
    if !ok {
        SWITCH_ERRORS.fetch_add(1, Ordering::SeqCst);
    }
}

fn switch<O: Owner>(cell: &'static Cell<O>, prev: Option<usize>, next: Option<usize>) -> bool {
    let now = hobby::timer::rdtsc();
    // SAFETY: called from this CPU's tick handler (interrupts disabled),
    // this CPU's cell: the `Sync` impl's rule.
    let c = unsafe { &mut *cell.0.get() };
    let Some(c) = c.as_mut() else { return false };
    // Each task's context lock is free: a task is switched by one CPU at
    // a time, and the main code holds none while the tasks run.
    let mut p = prev.and_then(|t| CONTEXT.get(t)).map(|m| m.lock());
    let mut n = next.and_then(|t| CONTEXT.get(t)).map(|m| m.lock());
    let p = p.as_mut().and_then(|g| g.as_mut());
    let n = n.as_mut().and_then(|g| g.as_mut());
    c.s.switch(&mut c.d, p, n, now).is_ok()
}

/// A task: iterations of its mix on the model of the CPU it runs on
/// (interrupts disabled for each, so it is counted on one CPU for one
/// task), each PMI it raises sent through the APIC (taken when interrupts
/// are on again, after a tick that came with it), until asked to stop.
/// On a slow platform it halts after every [`HALT_EVERY`]-th iteration
/// until the next interrupt: where a hypervisor delivers a timer
/// interrupt only long after its expiration to code that keeps it busy
/// (the project's nested KVM, which emulates its guest: about 100 ms late
/// to these tasks, against a 1 ms tick), a halting CPU takes its ticks on
/// time, so the run's switches do not wait on the tasks' work. A tick
/// still lands between any two iterations, in the spin between them or in
/// the halt. Elsewhere the tasks never halt: their ticks and their PMIs
/// then race, and a tick that wins finds an overflow owed at the
/// switch-out.
fn work(id: usize) {
    let mix = MIX[id % TASKS];
    let mut n = 0u64;
    while !task::stopping() {
        interrupts::without_interrupts(|| {
            let cpu = smp::cpu().min(1);
            let raised = MODELS[cpu].with(|m| {
                for (k, &(select, umask)) in SELECTS.iter().enumerate() {
                    m.inject(Event::new(select, umask, mix[k]));
                }
                m.take_pmi()
            });
            ITERATIONS[cpu][id % TASKS].fetch_add(1, Ordering::SeqCst);
            if raised {
                pmi::deliver(&mut local_apic());
            }
        });
        for _ in 0..(id * 7) % 23 {
            core::hint::spin_loop();
        }
        n += 1;
        let halt_every = HALT_EVERY.load(Ordering::Relaxed);
        if halt_every > 0 && n.is_multiple_of(halt_every) {
            // Interrupts are enabled in a task: the halt ends at the next
            // one (a tick, or a PMI this task raised).
            x86_64::instructions::hlt();
        }
    }
}

/// CPU `cpu`'s share of the run: the scheduler until every task returned,
/// then its kernel counter read.
fn run_here(cpu: usize) -> u64 {
    let stats = task::run();
    *STATS[cpu].lock() = stats;
    let kernel = match cpu {
        0 => CPU0.with(|c| {
            c.as_mut()
                .map_or(u64::MAX, |c| c.kernel.read(&mut c.d).unwrap_or(u64::MAX))
        }),
        _ => CPU1.with(|c| {
            c.as_mut()
                .map_or(u64::MAX, |c| c.kernel.read(&mut c.d).unwrap_or(u64::MAX))
        }),
    };
    KERNEL[cpu].store(kernel, Ordering::SeqCst);
    stats.switches
}

fn setup_on(cpu: usize) -> u64 {
    let r = match cpu {
        0 => setup(0, &CPU0),
        _ => setup(1, &CPU1),
    };
    u64::from(r.is_err())
}

fn every_task_counts_exactly_its_own_events() -> Outcome {
    let cpus = smp::online().min(2);
    for cpu in 1..cpus {
        smp::run_on(cpu, setup_on)?;
        let failed = smp::wait(cpu)?;
        check!(failed == 0, "CPU {cpu} could not set its PMU up");
    }
    setup(0, &CPU0)?;
    contexts()?;
    let mean_ns = tick_ns();
    let stop_after = hobby::pace::scaled(SWITCHES, FEWEST_SWITCHES);
    let slow = hobby::pace::slowdown() > hobby::pace::TOLERATED;
    HALT_EVERY.store(if slow { 4 } else { 0 }, Ordering::SeqCst);
    task::prepare(&RunConfig {
        vector: TIMER,
        mean_ns,
        migrate_one_in: MIGRATE_ONE_IN,
        cpus,
        stop_after,
        on_switch,
    })?;
    for t in 0..TASKS {
        task::spawn(t, t % cpus, work)?;
    }
    for cpu in 1..cpus {
        smp::run_on(cpu, run_here)?;
    }
    run_here(0);
    for cpu in 1..cpus {
        smp::wait(cpu)?;
    }
    check_eq!(
        SWITCH_ERRORS.load(Ordering::SeqCst),
        0,
        "every switch accepted"
    );
    check_eq!(HANDLER_ERRORS.load(Ordering::SeqCst), 0);
    check_eq!(FOREIGN.load(Ordering::SeqCst), 0, "every sample a task's");
    let iterations = |t: usize| -> u64 {
        (0..2)
            .map(|c| ITERATIONS[c][t].load(Ordering::SeqCst))
            .sum()
    };
    let (mut sampled_all, mut owed_all) = (0, 0);
    for t in 0..TASKS {
        let Some(events) = CONTEXTS[t] else { continue };
        let mut guard = CONTEXT[t].lock();
        let ctx = guard.as_mut().ok_or("a context went missing")?;
        check!(!ctx.is_loaded(), "task {t} switched out at the end");
        for (i, &(kind, every)) in events.iter().enumerate() {
            let c = ctx.count(i).ok_or("no such event")?;
            let (name, want) = (EVENTS[kind], iterations(t) * MIX[t][kind]);
            check!(
                c.count == want,
                "task {t} event {i} ({name}): counted {}, its iterations give {want}",
                c.count
            );
            check!(
                c.enabled == c.running,
                "task {t} event {i}: enabled {} but running {}",
                c.enabled,
                c.running
            );
            if every > 0 {
                let residual = ctx.residual(i).unwrap_or(u64::MAX);
                check!(
                    c.count == c.periods * every + residual,
                    "task {t} event {i}: {} events, {} periods of {every}, residual {residual}",
                    c.count,
                    c.periods
                );
                let owed = ctx.take_pending(i);
                let sampled = SAMPLED[t][i].load(Ordering::SeqCst);
                check!(
                    sampled + owed == c.periods,
                    "task {t} event {i}: {sampled} periods sampled and {owed} owed, of {}",
                    c.periods
                );
                sampled_all += sampled;
                owed_all += owed;
            }
        }
    }
    for cpu in 0..cpus {
        let branches: u64 = (0..TASKS)
            .map(|t| ITERATIONS[cpu][t].load(Ordering::SeqCst) * MIX[t][1])
            .sum();
        let kernel = KERNEL[cpu].load(Ordering::SeqCst);
        check!(
            kernel == branches,
            "CPU {cpu}'s kernel counter: {kernel}, its CPU's branches {branches}"
        );
    }
    let stats: [task::Stats; 2] = [*STATS[0].lock(), *STATS[1].lock()];
    let switches: u64 = stats.iter().map(|s| s.switches).sum();
    let migrations: u64 = stats.iter().map(|s| s.migrations).sum();
    check!(
        switches >= stop_after,
        "{switches} switches of {stop_after}"
    );
    if cpus > 1 {
        for (cpu, s) in stats.iter().enumerate().take(cpus) {
            check!(
                s.migrations == s.preemptions / u64::from(MIGRATE_ONE_IN),
                "CPU {cpu}: {} migrations in {} preemptions",
                s.migrations,
                s.preemptions
            );
        }
        check!(migrations > 0, "no task moved: {stats:?}");
    }
    let ticks: u64 = stats.iter().map(|s| s.ticks).sum();
    println!(
        "tasks: {cpus} CPU(s), {ticks} ticks, {switches} switches, {migrations} migrations, {} PMIs, {sampled_all} periods sampled, {owed_all} found owed at a switch-out; iterations {:?}{}; every count exact (model)",
        PMIS.load(Ordering::SeqCst),
        core::array::from_fn::<u64, TASKS, _>(iterations),
        if slow {
            " (a slow platform: tasks halt after every 4th)"
        } else {
            ""
        },
    );
    Ok(())
}

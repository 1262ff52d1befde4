//! Per-task counting: counters that follow their task across a kernel's
//! context switches, as `perf stat -p` and `perf record -p` count one
//! task, not the CPU. The [guide page](crate::guide::tasks) shows the
//! wiring in a kernel.
//!
//! # The parts
//!
//! * [`TaskEvents`]: one task's events and what they counted (counts,
//!   sample-after periods, `perf`'s enabled and running times). Plain
//!   data, with no handle and no reference to a driver: it moves with its
//!   task.
//! * [`TaskSwitcher`]: one CPU's per-task counting. It takes some of the
//!   CPU driver's counters (Unclaimed tokens) and sets them aside for
//!   tasks; the driver's other counters stay the kernel's, counting
//!   CPU-wide beside the tasks'. [`TaskSwitcher::switch`] is the
//!   scheduler's hook, called once per switch with interrupts disabled.
//! * [`OnCpu`]: one `static` per CPU, written by its switcher, read by its
//!   PMI path ([`OnCpu::attribute`]) to give each sample to the task and
//!   event whose counter overflowed.
//!
//! # What a switch does
//!
//! The save/restore core is the one a hypervisor's world switch uses
//! ([`crate::arch::switch_bank`], [`crate::arch::Quiesce::Lazy`]): the
//! outgoing context's counters are read and folded into it, the incoming
//! one's controls and values written, and only the counters that change
//! hands are touched. Between two tasks without events no register is
//! accessed; between two tasks with the same event set only the counter
//! values (one read and one write each); otherwise at most 2 accesses per
//! counter either task uses and 3 more. Each architecture's switch
//! traffic is asserted exactly by the recording backend in this module's
//! tests.
//!
//! A sampling event's period spans switches: the counter is saved before
//! its overflow and resumed from the same point, not restarted. An
//! overflow the save finds unserviced (its PMI pending, or not raised
//! yet) is the outgoing task's: its periods are counted for it and held
//! as owed ([`TaskEvents::take_pending`]), and the PMI that arrives after
//! the switch finds nothing of the incoming task's. For a sampling event
//! `count = periods x N + residual` ([`TaskEvents::residual`]) always.
//!
//! # What fits
//!
//! [`TaskSwitcher::attach`] places a task's events on the counters set
//! aside (on NetBurst with the ESCRs that feed them: two events of one
//! context never share an ESCR): an event that does not fit beside the task's others is
//! refused ([`TaskError::DoesNotFit`]), as Linux puts a pinned event that
//! does not fit in an error state; the kernel's CPU-wide counters are
//! never taken from it. A context placed for one type of CPU and run on
//! another (a hybrid part's other core type, NetBurst's other logical
//! processor) is placed again at the switch; an event that fits nowhere
//! there does not run, and its time runs enabled but not running, as
//! `perf` reports a multiplexed event (`TaskCount::estimate` scales it).
//!
//! # Migration
//!
//! A handle works only with the driver that issued it, and each CPU has
//! its own driver; so a task's context holds no handle: it names its
//! events by their configurations and its placement by the key of the
//! CPUs it was placed for ([`crate::arch::Switch::ctx_key`]). A task that
//! moves is switched out by the old CPU's switcher (its counts saved into
//! the context) and switched in by the new CPU's, on that CPU's counters
//! set aside; the context is never loaded on two CPUs at once (the
//! switcher refuses a context loaded elsewhere, [`TaskError::Loaded`]).
//! The kernel passes the context from one CPU to the other under the
//! same lock as the task itself (its run queue's).
//!
//! # Inheritance
//!
//! [`TaskEvents::inherit`] makes a child's context with the events
//! attached with `inherit`; at the child's exit [`TaskEvents::absorb`]
//! adds its counts to the parent's [`TaskEvents::children`]. As in
//! Linux's `inherit_event`, a child of a child adds to the top-level
//! context.
//!
//! # Per architecture
//!
//! The architectural PMU (`GLOBAL_CTRL` stops and starts every counter at
//! once; precise events refused in a context, their PEBS records being
//! the CPU's) and AMD (PerfMonV2's `PerfCntrGlobalCtl`, or each counter's
//! `EN` before it; a late PMI owed) take it as it is. NetBurst: a task
//! runs on one logical processor of a Hyper-Threading package at a time,
//! and the driver of that logical processor qualifies its events with its
//! own `T*_OS`/`T*_USR` and PMI bits. Itanium: counters start and stop by
//! their `plm`; an overflow freezes every counter, the kernel's too, until
//! the handler unfreezes them; the EARs and branch trace buffer are the
//! processor's, refused in a context; PSR.up already gives a user monitor
//! per process. Each driver's `switch` module has the details.

mod context;
mod cpu;
mod switcher;

pub use context::{InheritError, TaskCount, TaskEvents};
pub use cpu::{Attribution, OnCpu};
pub use switcher::{TaskError, TaskSwitcher};

#[cfg(test)]
mod tests;

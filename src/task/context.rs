//! A task's counter context: its events and what they counted, plain data
//! that moves with the task between CPUs.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::arch::Architecture;

/// What one event of a task counted ([`TaskEvents::count`]). Times are in
/// the unit of the `now` the kernel passes to the switches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TaskCount {
    /// Events counted while the task ran.
    pub count: u64,
    /// A sampling event's completed sample-after periods: `count = periods
    /// x N + residual` ([`TaskEvents::residual`]).
    pub periods: u64,
    /// Time the task ran with the event asked for (`perf`'s
    /// `time_enabled`).
    pub enabled: u64,
    /// Of that, time the event was on a counter (`perf`'s `time_running`):
    /// less than `enabled` only where the task ran on a CPU whose counters
    /// set aside could not take it.
    pub running: u64,
}

impl TaskCount {
    /// `self` plus `other`, field by field (saturating).
    pub const fn plus(self, other: TaskCount) -> TaskCount {
        TaskCount {
            count: self.count.saturating_add(other.count),
            periods: self.periods.saturating_add(other.periods),
            enabled: self.enabled.saturating_add(other.enabled),
            running: self.running.saturating_add(other.running),
        }
    }

    /// `perf`'s scaled estimate, `count x enabled / running` (`None` if the
    /// event never ran), as [`crate::multiplex::Multiplexed::estimate`].
    pub const fn estimate(&self) -> Option<u64> {
        crate::multiplex::Multiplexed {
            enabled: self.enabled,
            running: self.running,
            raw: self.count,
        }
        .estimate()
    }
}

/// One event of a task context.
pub(super) struct Event<A: Architecture> {
    /// What the kernel asked for (its logical processor, on NetBurst,
    /// replaced by the CPU's when it is placed).
    pub(super) config: A::Config,
    /// Inherited by the task's children ([`TaskEvents::inherit`]).
    pub(super) inherit: bool,
    /// In a child context: the parent's event it adds to at exit.
    pub(super) of_parent: u8,
    /// Its bank position and images on the CPUs of [`TaskEvents`]'s
    /// placement key; `None`: it does not run there.
    pub(super) at: Option<(u8, A::Programmed)>,
    /// What the counter resumes from: a sampling event's events into its
    /// current period; a counting event's raw counter value.
    pub(super) resume: u64,
    pub(super) own: TaskCount,
    pub(super) children: TaskCount,
    /// Periods found past their overflow at a switch-out, not yet taken.
    pub(super) pending: u64,
}

impl<A: Architecture> Clone for Event<A> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<A: Architecture> Copy for Event<A> {}

/// The source of context keys: a context's identity, by which a CPU's
/// switcher recognises the context it loaded (a copy cannot be made, so
/// two contexts never share a key). Shared by every CPU for that reason
/// alone; taken once per context made, never in a switch or a PMI.
static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

/// The events of one task and what they counted: up to `E` events of
/// architecture `A`. Plain data, with no handle and no reference to a
/// driver, so it moves with the task from one CPU's switcher to another's
/// (module documentation, "Migration"). Made by the kernel with the task
/// ([`TaskEvents::new`]), given events while the task is switched out
/// ([`crate::task::TaskSwitcher::attach`]), and passed to the switcher of
/// the CPU the task runs on at every switch.
///
/// Not `Clone`: a context has one identity, the one its CPU's switcher
/// checks at the switch-out.
pub struct TaskEvents<A: Architecture, const E: usize> {
    pub(super) key: u64,
    id: u64,
    /// The context this one's counts are added to at exit (its key).
    pub(super) parent: Option<u64>,
    pub(super) events: [Option<Event<A>>; E],
    /// The [`crate::arch::Switch::ctx_key`] (and bank) the placements are
    /// for; 0: none yet.
    pub(super) placed_for: u64,
    /// Loaded on a CPU now.
    pub(super) loaded: bool,
}

impl<A: Architecture, const E: usize> core::fmt::Debug for TaskEvents<A, E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TaskEvents")
            .field("id", &self.id)
            .field("events", &self.len())
            .field("loaded", &self.loaded)
            .finish_non_exhaustive()
    }
}

/// Why a child context could not be added to its parent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum InheritError {
    /// The child was not inherited from this context.
    NotOurChild,
    /// The child is loaded on a CPU: switch it out first.
    ChildLoaded,
}

impl core::fmt::Display for InheritError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            InheritError::NotOurChild => "the child context was not inherited from this one",
            InheritError::ChildLoaded => {
                "the child context is loaded on a CPU: switch it out before its exit"
            }
        })
    }
}

impl core::error::Error for InheritError {}

impl<A: Architecture, const E: usize> TaskEvents<A, E> {
    /// A context with no event for the task the kernel calls `id` (what
    /// the PMI's attribution reports, [`crate::task::OnCpu::attribute`]).
    pub fn new(id: u64) -> Self {
        TaskEvents {
            key: NEXT_KEY.fetch_add(1, Ordering::Relaxed),
            id,
            parent: None,
            events: [const { None }; E],
            placed_for: 0,
            loaded: false,
        }
    }

    /// The kernel's name for the task.
    pub const fn id(&self) -> u64 {
        self.id
    }

    /// How many events.
    pub fn len(&self) -> usize {
        self.events.iter().filter(|e| e.is_some()).count()
    }

    /// Whether it has no event (then a switch to or from it touches no
    /// register).
    pub fn is_empty(&self) -> bool {
        self.events.iter().all(Option::is_none)
    }

    /// Whether it is loaded on a CPU now (between a switch-in and the
    /// switch-out).
    pub const fn is_loaded(&self) -> bool {
        self.loaded
    }

    /// What event `i` counted up to the task's last switch-out: its own
    /// count. While the task runs, [`crate::task::TaskSwitcher::read`] adds
    /// what the counter holds.
    pub fn count(&self, i: usize) -> Option<TaskCount> {
        Some(self.events.get(i)?.as_ref()?.own)
    }

    /// What event `i`'s inherited events counted in the task's exited
    /// children ([`TaskEvents::absorb`]); with [`TaskEvents::count`], the
    /// total `perf` reads for an inherited event.
    pub fn children(&self, i: usize) -> Option<TaskCount> {
        Some(self.events.get(i)?.as_ref()?.children)
    }

    /// A sampling event's events into its current period at the last
    /// switch-out (`count = periods x N + residual`); a counting event's
    /// raw counter value.
    pub fn residual(&self, i: usize) -> Option<u64> {
        Some(self.events.get(i)?.as_ref()?.resume)
    }

    /// Whether event `i` runs on the CPUs the context was last placed for
    /// (`None`: no such event).
    pub fn placed(&self, i: usize) -> Option<bool> {
        Some(self.events.get(i)?.as_ref()?.at.is_some())
    }

    /// Takes event `i`'s periods that a switch-out found past their
    /// overflow with the PMI not serviced (module documentation,
    /// "Sampling"): they are in [`TaskCount::periods`] already, and have
    /// no sample from the handler; the kernel delivers them to the task
    /// (rr's time-slice signal, a sample without an IP). 0 if none.
    pub fn take_pending(&mut self, i: usize) -> u64 {
        self.events
            .get_mut(i)
            .and_then(Option::as_mut)
            .map_or(0, |e| core::mem::take(&mut e.pending))
    }

    /// A child context for a task this one's task creates (`fork`): the
    /// events attached with `inherit` (their configurations and placement,
    /// nothing counted), for the child the kernel calls `id`. At the
    /// child's exit the kernel adds it to this one ([`TaskEvents::absorb`]).
    /// Linux's `inherit` attribute (`inherit_event`), with its rule that
    /// children always add to the top-level context: a child of a child
    /// is the top-level context's child too (absorbed there, whichever of
    /// the two exits first).
    pub fn inherit(&self, id: u64) -> TaskEvents<A, E> {
        let mut child = TaskEvents::new(id);
        child.parent = Some(self.parent.unwrap_or(self.key));
        child.placed_for = self.placed_for;
        let top = self.parent.is_none();
        let mut k = 0;
        for (i, e) in self.events.iter().enumerate() {
            let Some(e) = e.filter(|e| e.inherit) else {
                continue;
            };
            if let Some(slot) = child.events.get_mut(k) {
                *slot = Some(Event {
                    of_parent: if top { i as u8 } else { e.of_parent },
                    resume: 0,
                    own: TaskCount::default(),
                    children: TaskCount::default(),
                    pending: 0,
                    ..e
                });
                k += 1;
            }
        }
        child
    }

    /// Adds an exited child's counts (its own and its children's) to this
    /// context's [`TaskEvents::children`], event by event, and ends the
    /// child. Refused for a context not inherited from this one, and for a
    /// child still loaded. This context may be loaded: what the switch
    /// accounts and what this adds are apart.
    #[allow(clippy::result_large_err, reason = "the child comes back by value")]
    pub fn absorb(
        &mut self,
        child: TaskEvents<A, E>,
    ) -> Result<(), (InheritError, TaskEvents<A, E>)> {
        if child.parent != Some(self.key) {
            return Err((InheritError::NotOurChild, child));
        }
        if child.loaded {
            return Err((InheritError::ChildLoaded, child));
        }
        for e in child.events.iter().flatten() {
            if let Some(Some(mine)) = self.events.get_mut(usize::from(e.of_parent)) {
                mine.children = mine.children.plus(e.own).plus(e.children);
            }
        }
        Ok(())
    }
}

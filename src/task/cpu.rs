//! What a CPU's PMI handler needs to know of the task whose counters run:
//! one value per CPU, written by its switcher, read by its PMI.

use core::sync::atomic::{AtomicU8, AtomicU64, Ordering};

/// Counter numbers a PMI names (every architecture's handle numbers are
/// below 64: the architectural PMU's fixed counters are 32-35).
const COUNTERS: usize = 64;

/// A sample's task and event ([`OnCpu::attribute`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Attribution {
    /// The kernel's name for the task ([`crate::task::TaskEvents::id`]).
    pub task: u64,
    /// The event's index in the task's context.
    pub event: u8,
}

/// The task whose counters run on one CPU and which counter is which of
/// its events: a `static` per CPU, handed to that CPU's switcher
/// ([`crate::task::TaskSwitcher::new`]) and read by its PMI path
/// ([`OnCpu::attribute`]) to give each sample to its task.
///
/// Atomics only, one writer (the CPU's switcher, called with interrupts
/// disabled) and readers on the same CPU (its PMI, which may be an NMI): no
/// lock, no locked instruction. The switcher disarms the outgoing
/// counters before it changes anything here and arms the incoming ones
/// after, so a PMI that lands inside a switch finds no counter of either
/// context armed, and every sample the handler produces is of the context
/// this names.
pub struct OnCpu {
    /// The task's name plus one; 0: none.
    task: AtomicU64,
    /// Per counter number: its event's index plus one; 0: not a task's.
    events: [AtomicU8; COUNTERS],
}

impl core::fmt::Debug for OnCpu {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("OnCpu")
            .field("task", &self.task())
            .finish_non_exhaustive()
    }
}

impl Default for OnCpu {
    fn default() -> Self {
        Self::new()
    }
}

impl OnCpu {
    /// No task.
    pub const fn new() -> OnCpu {
        OnCpu {
            task: AtomicU64::new(0),
            events: [const { AtomicU8::new(0) }; COUNTERS],
        }
    }

    /// The task whose context is loaded, if any.
    pub fn task(&self) -> Option<u64> {
        self.task.load(Ordering::Acquire).checked_sub(1)
    }

    /// Whose sample of counter `counter` (its handle number, a
    /// [`crate::sampling::Sample`]'s `counter`) is: the loaded task's and
    /// which of its events, or `None` for a counter that is not a task's
    /// (the kernel's CPU-wide counters). Lock-free: for the PMI path.
    pub fn attribute(&self, counter: u8) -> Option<Attribution> {
        let event = self
            .events
            .get(usize::from(counter))?
            .load(Ordering::Acquire)
            .checked_sub(1)?;
        Some(Attribution {
            task: self.task()?,
            event,
        })
    }

    /// Counter `counter` is event `event` of the task loaded next (or,
    /// with `None`, no task's).
    pub(super) fn set_event(&self, counter: u8, event: Option<u8>) {
        if let Some(e) = self.events.get(usize::from(counter)) {
            e.store(event.map_or(0, |i| i.saturating_add(1)), Ordering::Release);
        }
    }

    /// The task loaded (or none).
    pub(super) fn set_task(&self, task: Option<u64>) {
        self.task
            .store(task.map_or(0, |t| t.saturating_add(1)), Ordering::Release);
    }
}

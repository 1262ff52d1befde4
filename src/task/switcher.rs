//! A CPU's task switcher: the counters set aside for tasks on that CPU's
//! driver, and the switch a scheduler calls.

use core::fmt;

use super::context::{Event, TaskCount, TaskEvents};
use super::cpu::OnCpu;
use crate::arch::{
    Architecture, Bank, BankError, Quiesce, Saved, Slot, Switch, arm_bank, release_all, reserve,
    switch_bank,
};
use crate::counter::{AnyHandle, OwnerId, StateTag};
use crate::sampling::SampleAfter;
use crate::sealed::TOKEN;

/// Why the switcher refused a call. Nothing was changed, except where a
/// register access failed (only a model's can).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TaskError<E> {
    /// The driver is not the one the switcher's counters came from: a
    /// handle works only with the driver that issued it.
    ForeignDriver,
    /// A token given to [`TaskSwitcher::new`] is another driver's, or not
    /// Unclaimed.
    NotAToken {
        /// The token's counter.
        counter: u8,
    },
    /// The outgoing context is not the one loaded on this CPU.
    NotLoadedHere,
    /// The context is loaded on a CPU (the incoming one of a switch, or
    /// one given events or read as switched out).
    Loaded,
    /// The context has room for no more events.
    Full,
    /// The event does not fit beside the task's other events on the
    /// counters set aside here (the kernel's CPU-wide counters keep the
    /// rest): refused, the context unchanged (Linux puts such a pinned
    /// event in an error state).
    DoesNotFit,
    /// No such event in the context.
    NoSuchEvent,
    /// A context is still loaded: switch it out first.
    Busy,
    /// The driver refused the event, or a register access.
    Driver(E),
    /// A register access failed inside the switch (only a model's can):
    /// the switcher's state is as far as the switch got; finish it.
    Bank(BankError<E>),
}

impl<E: fmt::Debug> fmt::Display for TaskError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskError::ForeignDriver => f.write_str(
                "this driver did not issue the switcher's counters: a handle works only with the driver that issued it",
            ),
            TaskError::NotAToken { counter } => write!(
                f,
                "the token of counter {counter} is another driver's, or not Unclaimed"
            ),
            TaskError::NotLoadedHere => {
                f.write_str("the outgoing context is not the one loaded on this CPU")
            }
            TaskError::Loaded => f.write_str("the context is loaded on a CPU"),
            TaskError::Full => f.write_str("the context has room for no more events"),
            TaskError::DoesNotFit => f.write_str(
                "the event does not fit beside the task's other events on the counters set aside for tasks",
            ),
            TaskError::NoSuchEvent => f.write_str("no such event in the context"),
            TaskError::Busy => f.write_str("a context is loaded: switch it out first"),
            TaskError::Driver(e) => write!(f, "driver: {e:?}"),
            TaskError::Bank(e) => write!(f, "switch: {e}"),
        }
    }
}

impl<E: fmt::Debug> core::error::Error for TaskError<E> {}

/// The context loaded on the bank: whose, since when, and per position
/// which event and what the counter started from.
#[derive(Clone, Copy, Debug)]
struct Loaded<const K: usize> {
    key: u64,
    since: u64,
    /// Per position: the event's index (`None`: no event of this context).
    event: [Option<u8>; K],
    /// Per position: the value loaded.
    value: [u64; K],
    /// Per position: the counter's width, as a mask.
    mask: [u64; K],
}

/// One CPU's per-task counting: up to `K` counters of this CPU's driver
/// set aside for tasks (the rest stay the kernel's, counting CPU-wide
/// beside them), and the switch the scheduler calls
/// ([`TaskSwitcher::switch`]). See the [module documentation](super).
pub struct TaskSwitcher<'s, A: Architecture, const K: usize> {
    owner: OwnerId,
    tokens: [AnyHandle<A>; K],
    bank: Bank<A, K>,
    key: u64,
    cpu: &'s OnCpu,
    loaded: Option<Loaded<K>>,
    saved: [Saved; K],
}

impl<A: Architecture, const K: usize> fmt::Debug for TaskSwitcher<'_, A, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskSwitcher")
            .field("arch", &A::NAME)
            .field("counters", &self.bank.counters())
            .field("loaded", &self.loaded.is_some())
            .finish_non_exhaustive()
    }
}

/// The key a placement is made for: the driver's ([`Switch::ctx_key`])
/// and the bank's counters.
fn placement_key(driver_key: u64, counters: &[u8]) -> u64 {
    let mut k = driver_key ^ 0x9E37_79B9_7F4A_7C15;
    for &n in counters {
        k = (k ^ u64::from(n)).wrapping_mul(0x0000_0100_0000_01B3);
    }
    k | 1
}

impl<'s, A: Architecture, const K: usize> TaskSwitcher<'s, A, K> {
    /// Sets the counters of `tokens` (Unclaimed handles that `driver`
    /// issued) aside for tasks on this CPU, where `cpu` (this CPU's
    /// `static`) tells the PMI path whose counters run. No register
    /// access: the counters are free, their controls clear. Refused with
    /// the tokens back (and nothing set aside) if one is not `driver`'s
    /// or not Unclaimed, or the driver refuses a counter (the firmware's).
    #[allow(clippy::result_large_err, reason = "the tokens come back by value")]
    #[allow(clippy::type_complexity)]
    pub fn new<D: Switch<A>>(
        driver: &mut D,
        tokens: [AnyHandle<A>; K],
        cpu: &'s OnCpu,
    ) -> Result<Self, (TaskError<D::Error>, [AnyHandle<A>; K])> {
        let owner = OwnerId::of::<D::Owner>();
        if let Some(t) = tokens
            .iter()
            .find(|t| t.owner() != owner || t.state() != StateTag::Unclaimed)
        {
            let counter = t.index();
            return Err((TaskError::NotAToken { counter }, tokens));
        }
        let mut bank = Bank::new();
        for (i, t) in tokens.iter().enumerate() {
            match reserve(driver, &mut bank, t.index()) {
                Ok(Some(_)) => {}
                Ok(None) => {
                    let _ = release_all(driver, &mut bank);
                    let counter = t.index();
                    return Err((TaskError::NotAToken { counter }, tokens));
                }
                Err(e) => {
                    let _ = release_all(driver, &mut bank);
                    let _ = i;
                    return Err((TaskError::Driver(e), tokens));
                }
            }
        }
        let key = placement_key(driver.ctx_key(), bank.counters());
        Ok(TaskSwitcher {
            owner,
            tokens,
            bank,
            key,
            cpu,
            loaded: None,
            saved: [Saved::default(); K],
        })
    }

    /// The counters set aside, by position.
    pub fn counters(&self) -> &[u8] {
        self.bank.counters()
    }

    /// The key the contexts loaded here are placed for: two switchers of
    /// one key (CPUs of one type, with the same counters set aside) run a
    /// context's events on the same counters with the same images, so a
    /// task that moves between them is not placed again.
    pub const fn key(&self) -> u64 {
        self.key
    }

    /// The task whose context is loaded here, if any.
    pub fn running(&self) -> Option<u64> {
        self.cpu.task()
    }

    fn check<D: Switch<A>>(&self) -> Result<(), TaskError<D::Error>> {
        if OwnerId::of::<D::Owner>() == self.owner {
            Ok(())
        } else {
            Err(TaskError::ForeignDriver)
        }
    }

    /// Gives `ctx` one more event, `config` (for NetBurst, on whichever
    /// logical processor: each CPU's driver qualifies it for its own), if
    /// it fits beside the context's other events on this CPU's counters
    /// set aside: its index. With `inherit`, the task's children count it
    /// too ([`TaskEvents::inherit`]). The context must be switched out
    /// (attach before the task next runs); it is placed here, for every
    /// CPU of this switcher's [`TaskSwitcher::key`]. Refused, the context
    /// unchanged, when it does not fit ([`TaskError::DoesNotFit`]: the
    /// kernel's counters keep the rest of the PMU) or the driver refuses
    /// the event on every counter set aside (its error for the first).
    pub fn attach<D: Switch<A, Config = A::Config>, const E: usize>(
        &self,
        driver: &D,
        ctx: &mut TaskEvents<A, E>,
        config: A::Config,
        inherit: bool,
    ) -> Result<usize, TaskError<D::Error>> {
        self.check::<D>()?;
        if ctx.loaded {
            return Err(TaskError::Loaded);
        }
        let Some(i) = ctx.events.iter().position(Option::is_none) else {
            return Err(TaskError::Full);
        };
        let mut events = ctx.events;
        if let Some(slot) = events.get_mut(i) {
            *slot = Some(Event {
                config,
                inherit,
                of_parent: 0,
                at: None,
                resume: 0,
                own: TaskCount::default(),
                children: TaskCount::default(),
                pending: 0,
            });
        }
        let refusal = self.place(driver, &mut events, ctx.placed_for);
        if let Some(e) = refusal {
            return Err(e);
        }
        if events.iter().flatten().any(|e| e.at.is_none()) {
            return Err(TaskError::DoesNotFit);
        }
        ctx.events = events;
        ctx.placed_for = self.key;
        Ok(i)
    }

    /// Places `events` on this bank (first fit, in order), unless they are
    /// placed for this key already; `placed_for` is their key. Returns the
    /// driver's refusal of the first event that fits no counter for a
    /// reason of its own (`None`: each fit, or found no free counter).
    fn place<D: Switch<A, Config = A::Config>, const E: usize>(
        &self,
        driver: &D,
        events: &mut [Option<Event<A>>; E],
        placed_for: u64,
    ) -> Option<TaskError<D::Error>> {
        if placed_for != self.key {
            for e in events.iter_mut().flatten() {
                if let Some((_, images)) = e.at.take()
                    && D::ctx_sampling(&images).is_none()
                {
                    // A counting event starts its new counter from 0 (its
                    // count is kept); a sampling event keeps its residual.
                    e.resume = 0;
                }
            }
        }
        let mut refusal = None;
        for i in 0..E {
            let Some(Some(e)) = events.get(i) else {
                continue;
            };
            if e.at.is_some() {
                continue;
            }
            let config = e.config;
            let mut found = None;
            for (at, &n) in self.bank.counters().iter().enumerate() {
                let taken = events
                    .iter()
                    .flatten()
                    .any(|o| o.at.is_some_and(|(p, _)| usize::from(p) == at));
                if taken {
                    continue;
                }
                match driver.ctx_images(n, &config) {
                    Ok(images) => {
                        let conflict = events.iter().flatten().any(|o| {
                            o.at.is_some_and(|(_, other)| D::ctx_conflict(&images, &other))
                        });
                        if !conflict {
                            found = Some((at as u8, images));
                            break;
                        }
                    }
                    Err(err) => {
                        if refusal.is_none() {
                            refusal = Some(TaskError::Driver(err));
                        }
                    }
                }
            }
            if let Some(Some(e)) = events.get_mut(i) {
                e.at = found;
            }
        }
        // A refusal matters only for an event that fit nowhere.
        if events.iter().flatten().all(|e| e.at.is_some()) {
            None
        } else {
            refusal
        }
    }

    /// The scheduler's hook, called once per task switch on this CPU with
    /// interrupts disabled, with the outgoing task's context (`prev`) and
    /// the incoming one's (`next`), `None` for a task without one, and the
    /// time `now` (any clock, in the unit the counts' times are wanted in).
    ///
    /// The outgoing context's counters are saved into it (its counts, its
    /// periods, the periods found owed at the switch, its times) and the
    /// incoming one's loaded: a sampling event resumes its period where it
    /// left it. What it costs ([`crate::arch::switch_bank`]): nothing when
    /// neither context has an event placed here; only the counter values
    /// (a read and a write each) between contexts with the same event set;
    /// otherwise at most 2 accesses per counter the two contexts use, and
    /// 3 more. A context placed for another key (another type of CPU, or
    /// another logical processor of a NetBurst package) is placed here
    /// first: events that fit nowhere here do not run (their time runs
    /// enabled, not running).
    ///
    /// Refused, with nothing changed, for a `driver` that did not issue the
    /// switcher's counters, a `prev` other than the context loaded here
    /// ([`TaskError::NotLoadedHere`]; `None` only when none is), or a
    /// `next` loaded on a CPU.
    pub fn switch<D: Switch<A, Config = A::Config>, const E: usize>(
        &mut self,
        driver: &mut D,
        prev: Option<&mut TaskEvents<A, E>>,
        next: Option<&mut TaskEvents<A, E>>,
        now: u64,
    ) -> Result<(), TaskError<D::Error>> {
        self.check::<D>()?;
        match (&self.loaded, &prev) {
            (Some(l), Some(p)) if p.key == l.key => {}
            (None, None) => {}
            (None, Some(p)) if !p.loaded => {}
            _ => return Err(TaskError::NotLoadedHere),
        }
        if next.as_ref().is_some_and(|n| n.loaded) {
            return Err(TaskError::Loaded);
        }
        let mut next = next;
        if let Some(n) = next.as_deref_mut()
            && n.placed_for != self.key
        {
            let _ = self.place(driver, &mut n.events, n.placed_for);
            n.placed_for = self.key;
        }
        let mut into = [Slot {
            at: 0,
            images: A::UNPROGRAMMED,
            value: 0,
        }; K];
        let mut k = 0;
        let mut incoming: Option<Loaded<K>> = None;
        if let Some(n) = next.as_deref() {
            let mut l = Loaded {
                key: n.key,
                since: now,
                event: [None; K],
                value: [0; K],
                mask: [0; K],
            };
            for (i, e) in n.events.iter().enumerate() {
                let Some((e, (at, images))) = e.as_ref().and_then(|e| Some((e, e.at?))) else {
                    continue;
                };
                let p = usize::from(at) % K;
                let counter = self.bank.counter(at).unwrap_or(0);
                let mask = driver.overflow_rule(counter).map_or(u64::MAX, |r| r.mask());
                let value = match D::ctx_sampling(&images) {
                    Some(s) => s.at_residual(e.resume),
                    None => e.resume & mask,
                };
                l.event[p] = Some(i as u8);
                l.value[p] = value;
                l.mask[p] = mask;
                if let Some(slot) = into.get_mut(k) {
                    *slot = Slot { at, images, value };
                    k += 1;
                }
            }
            incoming = Some(l);
        }
        let outgoing = self.loaded;
        let before = self.bank.running();
        switch_bank(
            driver,
            &mut self.bank,
            &mut self.saved,
            into.get(..k).unwrap_or(&[]),
            Quiesce::Lazy,
        )
        .map_err(TaskError::Bank)?;
        // The outgoing counters are disarmed and saved: the PMI path may
        // now be told the incoming context, then its counters armed.
        for at in before.iter() {
            if let Some(n) = self.bank.counter(at as u8) {
                self.cpu.set_event(n, None);
            }
        }
        if let (Some(l), Some(p)) = (outgoing, prev) {
            self.account::<D, E>(l, p, now);
            p.loaded = false;
        }
        match (&incoming, next) {
            (Some(l), Some(n)) => {
                for (at, e) in l.event.iter().enumerate() {
                    if let (Some(e), Some(c)) = (e, self.bank.counter(at as u8)) {
                        self.cpu.set_event(c, Some(*e));
                    }
                }
                self.cpu.set_task(Some(n.id()));
                n.loaded = true;
            }
            _ => self.cpu.set_task(None),
        }
        arm_bank(driver, &self.bank);
        self.loaded = incoming;
        Ok(())
    }

    /// Folds what the bank saved for loaded context `l` into `p`, at `now`.
    fn account<D: Switch<A>, const E: usize>(
        &self,
        l: Loaded<K>,
        p: &mut TaskEvents<A, E>,
        now: u64,
    ) {
        let dt = now.saturating_sub(l.since);
        for e in p.events.iter_mut().flatten() {
            e.own.enabled = e.own.enabled.saturating_add(dt);
            if e.at.is_some() {
                e.own.running = e.own.running.saturating_add(dt);
            }
        }
        for (at, ev) in l.event.iter().enumerate() {
            let Some(i) = ev else { continue };
            let Some(Some(e)) = p.events.get_mut(usize::from(*i)) else {
                continue;
            };
            let Some(images) = e.at.map(|(_, images)| images) else {
                continue;
            };
            let saved = self.saved[at % K];
            fold(
                e,
                D::ctx_sampling(&images),
                saved,
                l.value[at % K],
                l.mask[at % K],
            );
        }
    }

    /// What event `i` of `ctx` counted so far: its count at the last
    /// switch-out, plus, while `ctx` is the context loaded here, what its
    /// counter holds now (1 read; the time up to `now`). A context loaded
    /// on another CPU is read there ([`TaskError::Loaded`]).
    pub fn read<D: Switch<A, Config = A::Config>, const E: usize>(
        &self,
        driver: &mut D,
        ctx: &TaskEvents<A, E>,
        i: usize,
        now: u64,
    ) -> Result<TaskCount, TaskError<D::Error>> {
        self.check::<D>()?;
        let e = ctx
            .events
            .get(i)
            .and_then(|e| e.as_ref())
            .ok_or(TaskError::NoSuchEvent)?;
        if !ctx.loaded {
            return Ok(e.own);
        }
        let Some(l) = self.loaded.filter(|l| l.key == ctx.key) else {
            return Err(TaskError::Loaded);
        };
        let mut e = *e;
        let dt = now.saturating_sub(l.since);
        e.own.enabled = e.own.enabled.saturating_add(dt);
        if let Some((at, images)) = e.at {
            e.own.running = e.own.running.saturating_add(dt);
            let counter = self.bank.counter(at).unwrap_or(0);
            let saved = driver
                .ctx_peek(TOKEN, counter, &images)
                .map_err(TaskError::Driver)?;
            let p = usize::from(at) % K;
            fold(
                &mut e,
                D::ctx_sampling(&images),
                saved,
                l.value[p],
                l.mask[p],
            );
        }
        Ok(e.own)
    }

    /// Gives the counters back to `driver` (stopped, zeroed, unclaimed)
    /// with their tokens, as [`TaskSwitcher::new`] took them. Refused
    /// while a context is loaded ([`TaskError::Busy`]: switch it out
    /// first, to `None`), with the switcher back.
    #[allow(clippy::result_large_err, reason = "the switcher comes back by value")]
    #[allow(clippy::type_complexity)]
    pub fn finish<D: Switch<A>>(
        mut self,
        driver: &mut D,
    ) -> Result<[AnyHandle<A>; K], (TaskError<D::Error>, Self)> {
        if OwnerId::of::<D::Owner>() != self.owner {
            return Err((TaskError::ForeignDriver, self));
        }
        if self.loaded.is_some() {
            return Err((TaskError::Busy, self));
        }
        if let Err(e) = release_all(driver, &mut self.bank) {
            return Err((TaskError::Driver(e), self));
        }
        let TaskSwitcher { tokens, .. } = self;
        Ok(tokens)
    }
}

/// Folds what one counter held when saved into its event: a counting
/// event's count grows by what the counter counted since it was loaded
/// with `loaded` (modulo its width, `mask`) and resumes from what it held;
/// a sampling event (every `sampling`) completed the periods the handler
/// serviced and those found owed, and its count grows by `periods x N`
/// plus its residual now less its residual at the load.
fn fold<A: Architecture>(
    e: &mut Event<A>,
    sampling: Option<SampleAfter>,
    saved: Saved,
    loaded: u64,
    mask: u64,
) {
    match sampling {
        None => {
            let counted = saved.raw.wrapping_sub(loaded) & mask;
            e.own.count = e.own.count.saturating_add(counted);
            e.resume = saved.raw & mask;
        }
        Some(s) => {
            let periods = saved.serviced.saturating_add(saved.owed);
            let (_, residual) = s.split(saved.raw);
            let (_, from) = s.split(loaded);
            let counted = periods
                .saturating_mul(s.get())
                .saturating_add(residual)
                .saturating_sub(from);
            e.own.count = e.own.count.saturating_add(counted);
            e.own.periods = e.own.periods.saturating_add(periods);
            e.pending = e.pending.saturating_add(saved.owed);
            e.resume = residual;
        }
    }
}

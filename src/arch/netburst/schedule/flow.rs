//! The search: augmenting paths over request -> ESCR -> counter group,
//! and the minimal conflicting subset when it fails.

use crate::arch::netburst::LogicalProcessor;
use crate::arch::netburst::events::{Constraint, EventName};
use crate::arch::netburst::{Assignment, Block, Counter, CounterSet, Escr, EscrSet};

use super::*;

/// The group (block side) an ESCR feeds: 2 * block + side.
pub(super) const fn group_of(e: Escr) -> usize {
    let b = match e.block() {
        Block::Bpu => 0,
        Block::Ms => 1,
        Block::Flame => 2,
        Block::Iq => 3,
    };
    b * 2 + (e.side() & 1) as usize
}

/// Per ESCR (by index): its group.
pub(super) const ESCR_GROUP: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < ESCRS {
        t[i] = group_of(Escr::ALL[i]) as u8;
        i += 1;
    }
    t
};

/// Per group: the ESCRs feeding it (bit mask).
pub(super) const GROUP_ESCRS: [u64; GROUPS] = {
    let mut t = [0u64; GROUPS];
    let mut i = 0;
    while i < ESCRS {
        t[group_of(Escr::ALL[i])] |= 1 << i;
        i += 1;
    }
    t
};

/// Per group: its counters (bit mask). Every ESCR of the group feeds
/// exactly these (SDM Table 18-63; checked by a test).
pub(super) const GROUP_COUNTERS: [u32; GROUPS] = {
    let mut t = [0u32; GROUPS];
    let mut i = 0;
    while i < ESCRS {
        t[group_of(Escr::ALL[i])] = Escr::ALL[i].counters().bits();
        i += 1;
    }
    t
};

/// Per logical processor: the ESCRs of its own side (tried first).
pub(super) const SIDE_ESCRS: [u64; 2] = {
    let mut t = [0u64; 2];
    let mut i = 0;
    while i < ESCRS {
        t[(Escr::ALL[i].side() & 1) as usize] |= 1 << i;
        i += 1;
    }
    t
};

pub(super) fn counter_set(bits: u32) -> CounterSet {
    Counter::ALL
        .into_iter()
        .filter(|c| bits & (1 << c.index()) != 0)
        .fold(CounterSet::EMPTY, CounterSet::with)
}

/// BFS node codes: request r (< 64), ESCR 64 + e, group 128 + g.
const ESCR_NODE: u8 = 64;
const GROUP_NODE: u8 = 128;
/// `escr_from` marker: reached backwards from group `g` (low bits).
const FROM_GROUP: u8 = 0x80;
/// Each node is queued at most once per search.
const QUEUE: usize = MAX_REQUESTS + ESCRS + GROUPS;

/// Appends `node` to the search queue (each node is queued at most once,
/// so the queue never fills).
fn push(queue: &mut [u8; QUEUE], tail: &mut usize, node: u8) {
    if let Some(slot) = queue.get_mut(*tail) {
        *slot = node;
        *tail += 1;
    }
}

/// The flow: which ESCR each request uses, who uses each ESCR, how many
/// requests each group receives.
#[derive(Clone, Copy)]
struct Flow {
    escr_of: [u8; MAX_REQUESTS],
    user_of: [u8; 64],
    load: [u8; GROUPS],
}

impl Flow {
    const EMPTY: Flow = Flow {
        escr_of: [NONE; MAX_REQUESTS],
        user_of: [NONE; 64],
        load: [0; GROUPS],
    };
}

/// What a failed search reached (bit masks).
#[derive(Clone, Copy, Default)]
struct Reach {
    requests: u32,
    escrs: u64,
    groups: u8,
}

/// The prepared instance: usable ESCRs per request, free counters per group.
pub(super) struct Problem {
    n: usize,
    /// Free ESCRs the request may use whose group has a free counter.
    usable: [u64; MAX_REQUESTS],
    /// The part of `usable` on the request's own side.
    preferred: [u64; MAX_REQUESTS],
    /// ESCRs the request could use if nothing were occupied.
    existing: [u64; MAX_REQUESTS],
    free_counters: u32,
    cap: [u8; GROUPS],
    /// Insertion order: most constrained first.
    order: [u8; MAX_REQUESTS],
    /// Searches run (for the work-bound test).
    #[cfg(test)]
    pub(super) searches: core::cell::Cell<u32>,
}

impl Problem {
    /// Places every request, or explains the conflict.
    pub(super) fn solve(
        &self,
        requests: &[Request],
        occupied: Occupied,
    ) -> Result<Schedule, ScheduleError> {
        let mut flow = Flow::EMPTY;
        if let Err(reach) = self.place(&mut flow) {
            let c = self.explain(requests, occupied, &flow, reach);
            return Err(ScheduleError::Conflict(c));
        }
        self.schedule(&flow)
    }

    pub(super) fn new(
        part: Part,
        requests: &[Request],
        occupied: Occupied,
    ) -> Result<Problem, ScheduleError> {
        let n = requests.len();
        if n > MAX_REQUESTS {
            return Err(ScheduleError::TooMany { requests: n });
        }
        let free_counters = ALL_COUNTERS & !occupied.counters.bits();
        let mut cap = [0u8; GROUPS];
        for (g, c) in cap.iter_mut().enumerate() {
            *c = (GROUP_COUNTERS[g] & free_counters).count_ones() as u8;
        }
        let mut p = Problem {
            n,
            usable: [0; MAX_REQUESTS],
            preferred: [0; MAX_REQUESTS],
            existing: [0; MAX_REQUESTS],
            free_counters,
            cap,
            order: [0; MAX_REQUESTS],
            #[cfg(test)]
            searches: core::cell::Cell::new(0),
        };
        for (i, r) in requests.iter().enumerate() {
            let event = r.event();
            let processor = r.processor;
            if !event.available_on(part.model) {
                return Err(ScheduleError::EventUnavailable {
                    request: i,
                    event,
                    processor,
                    model: part.model,
                });
            }
            companions_present(i, requests, occupied)?;
            let catalog = EscrSet::from_slice(event.info().escrs);
            let excluded = catalog.difference(r.escrs);
            let existing = catalog
                .intersection(r.escrs)
                .intersection(part.escrs_for(event));
            let absent = catalog.intersection(r.escrs).difference(existing);
            let busy = existing.intersection(occupied.escrs);
            let free = existing.difference(busy);
            if free.is_empty() {
                return Err(ScheduleError::NoEscr {
                    request: i,
                    event,
                    processor,
                    excluded,
                    absent,
                    occupied: busy,
                });
            }
            let (usable, fed) = usable_escrs(free, &cap);
            if usable == 0 {
                return Err(ScheduleError::NoCounter {
                    request: i,
                    event,
                    processor,
                    escrs: free,
                    counters: counter_set(fed),
                });
            }
            let side = match processor {
                LogicalProcessor::T0 => 0,
                LogicalProcessor::T1 => 1,
            };
            p.usable[i] = usable;
            p.preferred[i] = usable & SIDE_ESCRS[side];
            p.existing[i] = existing.bits();
        }
        p.order_most_constrained_first();
        Ok(p)
    }

    /// Sets `order`: most constrained first, fewest (ESCR, free counter)
    /// options; a stable insertion sort keeps ties in request order.
    fn order_most_constrained_first(&mut self) {
        let options = |r: usize| -> u32 {
            let mut m = self.usable[r];
            let mut k = 0;
            while m != 0 {
                let e = m.trailing_zeros() as usize;
                m &= m - 1;
                k += self.cap[ESCR_GROUP[e] as usize] as u32;
            }
            k
        };
        let mut key = [0u32; MAX_REQUESTS];
        for (r, k) in key.iter_mut().enumerate().take(self.n) {
            *k = options(r);
        }
        for i in 0..self.n {
            let mut j = i;
            while j > 0 && key[self.order[j - 1] as usize] > key[i] {
                self.order[j] = self.order[j - 1];
                j -= 1;
            }
            self.order[j] = i as u8;
        }
    }

    /// Places the requests one by one in `order`; on the first that does
    /// not fit, returns what its search reached (the flow is left as it
    /// was before that search).
    fn place(&self, flow: &mut Flow) -> Result<(), Reach> {
        for &r in &self.order[..self.n] {
            self.augment(flow, r as usize)?;
        }
        Ok(())
    }

    /// One breadth-first search for an augmenting path from request
    /// `start` (not yet placed); applies it if found.
    fn augment(&self, flow: &mut Flow, start: usize) -> Result<(), Reach> {
        #[cfg(test)]
        self.searches.set(self.searches.get() + 1);
        let mut reach = Reach {
            requests: 1 << start,
            ..Reach::default()
        };
        // How each ESCR was reached: from request r (forward) or from group
        // g (FROM_GROUP | g, backward); how each group was reached: from
        // an unused ESCR.
        let mut escr_from = [NONE; 64];
        let mut group_from = [NONE; GROUPS];
        let mut queue = [0u8; QUEUE];
        let mut tail = 0;
        push(&mut queue, &mut tail, start as u8);
        let mut head = 0;
        while head < tail {
            let node = queue[head];
            head += 1;
            if node < ESCR_NODE {
                // A request: to each ESCR it may use, own side first.
                let r = node as usize;
                for cands in [self.preferred[r], self.usable[r] & !self.preferred[r]] {
                    let mut m = cands & !reach.escrs;
                    while m != 0 {
                        let e = m.trailing_zeros() as usize;
                        m &= m - 1;
                        reach.escrs |= 1 << e;
                        escr_from[e] = r as u8;
                        push(&mut queue, &mut tail, ESCR_NODE + e as u8);
                    }
                }
            } else if node < GROUP_NODE {
                let e = (node - ESCR_NODE) as usize;
                let user = flow.user_of[e];
                if user != NONE {
                    // Used: its request would have to move.
                    if reach.requests & (1 << user) == 0 {
                        reach.requests |= 1 << user;
                        push(&mut queue, &mut tail, user);
                    }
                } else {
                    // Unused: on to its group.
                    let g = ESCR_GROUP[e] as usize;
                    if reach.groups & (1 << g) == 0 {
                        reach.groups |= 1 << g;
                        group_from[g] = e as u8;
                        if flow.load[g] < self.cap[g] {
                            return if self.apply(flow, start, g, &escr_from, &group_from) {
                                Ok(())
                            } else {
                                Err(reach)
                            };
                        }
                        push(&mut queue, &mut tail, GROUP_NODE + g as u8);
                    }
                }
            } else {
                // A full group: one of its requests would have to leave.
                let g = (node - GROUP_NODE) as usize & (GROUPS - 1);
                let mut m = GROUP_ESCRS[g] & !reach.escrs;
                while m != 0 {
                    let e = m.trailing_zeros() as usize;
                    m &= m - 1;
                    if flow.user_of[e] != NONE {
                        reach.escrs |= 1 << e;
                        escr_from[e] = FROM_GROUP | g as u8;
                        push(&mut queue, &mut tail, ESCR_NODE + e as u8);
                    }
                }
            }
        }
        Err(reach)
    }

    /// Follows the search tree back from group `g` (which has a free
    /// counter) to `start`, moving every request on the path to its new
    /// ESCR. Each step back either reaches a request or passes a group, all
    /// distinct, so the walk is bounded; `false` (never expected) if it
    /// does not reach `start`, with the flow unchanged.
    fn apply(
        &self,
        flow: &mut Flow,
        start: usize,
        g: usize,
        escr_from: &[u8; 64],
        group_from: &[u8; GROUPS],
    ) -> bool {
        let mut moves = [(NONE, NONE); MAX_REQUESTS];
        let mut k = 0;
        let mut e = group_from[g];
        let mut reached = false;
        for _ in 0..MAX_REQUESTS + GROUPS + 1 {
            let Some(&from) = escr_from.get(e as usize) else {
                break;
            };
            if from == NONE {
                break;
            }
            if from & FROM_GROUP != 0 {
                e = group_from[(from & !FROM_GROUP) as usize & (GROUPS - 1)];
                continue;
            }
            let r = from as usize;
            let Some(slot) = moves.get_mut(k) else { break };
            *slot = (from, e);
            k += 1;
            if r == start {
                reached = true;
                break;
            }
            e = flow.escr_of[r];
        }
        if !reached {
            return false;
        }
        // Vacate first (a vacated ESCR may be taken again on the path),
        // then occupy: O(path length).
        for &(r, _) in &moves[..k] {
            let old = flow.escr_of[r as usize];
            if old != NONE {
                flow.user_of[old as usize] = NONE;
                let g = ESCR_GROUP[old as usize] as usize;
                flow.load[g] = flow.load[g].saturating_sub(1);
            }
        }
        for &(r, e) in &moves[..k] {
            flow.escr_of[r as usize] = e;
            flow.user_of[e as usize] = r;
            flow.load[ESCR_GROUP[e as usize] as usize] += 1;
        }
        true
    }

    /// Counters for a complete flow: each group's free counters in
    /// ascending order (so 16 and 17, the PEBS counters, last), to its
    /// requests in request order.
    fn schedule(&self, flow: &Flow) -> Result<Schedule, ScheduleError> {
        let mut out = Schedule {
            assignments: [FILLER; MAX_REQUESTS],
            len: self.n as u8,
        };
        let mut taken = 0u32;
        for r in 0..self.n {
            let e = flow.escr_of[r] as usize;
            let g = ESCR_GROUP[e & 63] as usize;
            let avail = GROUP_COUNTERS[g] & self.free_counters & !taken;
            let placed = Escr::ALL
                .get(e)
                .zip(Counter::from_index(avail.trailing_zeros() as u8));
            match placed.and_then(|(e, c)| Assignment::new(*e, c)) {
                Some(a) => {
                    taken |= 1 << a.counter().index();
                    out.assignments[r] = a;
                }
                // Unreachable: a complete flow gives every request an ESCR
                // and no group more requests than free counters. Reported
                // rather than panicking.
                None => return Err(ScheduleError::TooMany { requests: self.n }),
            }
        }
        Ok(out)
    }

    /// The conflict a failed search proves: the requests it reached (with
    /// the new one) and the cut it stopped at (module docs).
    fn explain(
        &self,
        requests: &[Request],
        occupied: Occupied,
        flow: &Flow,
        reach: Reach,
    ) -> Conflict {
        let set = reach.requests;
        // Cut: used ESCRs reached whose group was not (an unused ESCR
        // always leads on to its group), and the free counters of the
        // (full) groups reached.
        let (mut escrs, mut counters) = (0u64, 0u32);
        let mut m = reach.escrs;
        while m != 0 {
            let e = m.trailing_zeros() as usize;
            m &= m - 1;
            let g = ESCR_GROUP[e];
            if flow.user_of[e] != NONE && reach.groups & (1 << g) == 0 {
                escrs |= 1 << e;
            }
        }
        for (g, &c) in GROUP_COUNTERS.iter().enumerate() {
            if reach.groups & (1 << g) != 0 {
                counters |= c & self.free_counters;
            }
        }
        let mut c = Conflict {
            requests: set,
            events: [EventName::ALL[0]; MAX_REQUESTS],
            processors: [LogicalProcessor::T0; MAX_REQUESTS],
            escrs: EscrSet::from_bits_truncate(escrs),
            counters: counter_set(counters),
            occupied: false,
        };
        for (i, r) in requests.iter().enumerate().take(self.n) {
            if set & (1 << i) != 0 {
                c.events[i] = r.event();
                c.processors[i] = r.processor;
                let mut fed = 0u32;
                for e in EscrSet::from_bits_truncate(self.existing[i]).iter() {
                    fed |= GROUP_COUNTERS[group_of(e)];
                }
                c.occupied |= self.existing[i] & occupied.escrs.bits() != 0
                    || fed & occupied.counters.bits() != 0;
            }
        }
        c
    }
}

/// Whether every companion request `i`'s event requires (its catalog
/// entry's `RequiresCompanion` constraints) is running or requested too.
fn companions_present(
    i: usize,
    requests: &[Request],
    occupied: Occupied,
) -> Result<(), ScheduleError> {
    let r = &requests[i];
    let event = r.event();
    for c in event.info().constraints {
        if let Constraint::RequiresCompanion(needs) = *c {
            let present = occupied.is_running(needs)
                || requests
                    .iter()
                    .enumerate()
                    .any(|(j, o)| j != i && o.event() == needs);
            if !present {
                return Err(ScheduleError::MissingCompanion {
                    request: i,
                    event,
                    processor: r.processor,
                    needs,
                });
            }
        }
    }
    Ok(())
}

/// Of the free ESCRs, those whose counter group has a free counter (bit e
/// = ESCR e), and the counters the free ESCRs feed.
fn usable_escrs(free: EscrSet, cap: &[u8; GROUPS]) -> (u64, u32) {
    let mut usable = 0u64;
    let mut fed = 0u32;
    let mut m = free.bits();
    while m != 0 {
        let e = m.trailing_zeros() as usize;
        m &= m - 1;
        let g = ESCR_GROUP[e] as usize;
        fed |= GROUP_COUNTERS[g];
        if cap[g] > 0 {
            usable |= 1 << e;
        }
    }
    (usable, fed)
}

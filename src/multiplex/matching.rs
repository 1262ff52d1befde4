//! Placing events on counters when not every counter counts every event:
//! a bipartite matching, for the placements whose events have counter
//! constraints (Itanium's catalog lists, for each event, the counters that
//! count it: [`crate::arch::itanium::multiplex`]).
//!
//! [`choose`] decides in two steps, each exact:
//!
//! 1. **Which events run.** Taking the events in the order given (least run
//!    first), each joins the set if the set with it still has a matching
//!    (every member on a counter it may use, no counter twice): an
//!    augmenting path from it through the matching of those before it
//!    (Kuhn's algorithm, breadth first). The members stay matched as the
//!    set grows, so no earlier choice is undone, and the set is the one a
//!    greedy choice by priority picks in the transversal matroid: an event
//!    is left out only when no matching of it with the events before it
//!    exists, never because an earlier event took its counter where
//!    another counter would have served.
//! 2. **Where they run.** Of the set's matchings, one in which the fewest
//!    running events leave their counters: a minimum-cost perfect matching,
//!    by successive shortest augmenting paths (Bellman-Ford, since moving
//!    an event back to its own counter costs -1) from the matching that
//!    keeps every running member where it is (cost 0). Each path costs one
//!    per running event it moves off its counter, so a running event
//!    moves only where every matching of the set needs one of them moved.
//!
//! Counters are numbers 0-63 (bits of a `u64`); at most `E` events. No
//! allocation, no recursion, under 1 KiB of stack plus about 40 bytes per
//! event; every index the input gives is checked: input that names no
//! event or counter is skipped, never a panic.

/// Counters are bits 0-63.
const COUNTERS: usize = 64;

/// A matching of up to `E` events to counters: each event's counter (a
/// counter's holder is found by looking, so the two never disagree).
#[derive(Clone, Copy)]
struct Matching<const E: usize> {
    on: [Option<u8>; E],
}

impl<const E: usize> Matching<E> {
    const EMPTY: Self = Matching { on: [None; E] };

    fn counter(&self, i: usize) -> Option<u8> {
        self.on.get(i).copied().flatten()
    }

    fn holder(&self, n: u8) -> Option<usize> {
        self.on.iter().position(|&c| c == Some(n))
    }

    /// Event `i` now on counter `n` (its old counter is left to whoever
    /// takes it next on the path being applied); nothing for an event out
    /// of range.
    fn set(&mut self, i: usize, n: u8) {
        if let Some(on) = self.on.get_mut(i) {
            *on = Some(n);
        }
    }
}

/// The counters of mask `m`, ascending.
fn bits(mut m: u64) -> impl Iterator<Item = u8> {
    core::iter::from_fn(move || {
        if m == 0 {
            return None;
        }
        let n = m.trailing_zeros() as u8;
        m &= m - 1;
        Some(n)
    })
}

/// Where the events run next: `allowed[i]` is the mask of counters event
/// `i` may use, `order` the events by priority (least run first), `now`
/// where each runs (`None`: it does not); `next` receives where each is to
/// run (`None`: it waits). See the module docs for the rule.
pub(crate) fn choose<const E: usize>(
    allowed: &[u64],
    order: &[usize],
    now: &[Option<u8>],
    next: &mut [Option<u8>],
) {
    let mask = |i: usize| allowed.get(i).copied().unwrap_or(0);
    // 1. Which events run.
    let mut any = Matching::<E>::EMPTY;
    let mut chosen = [false; E];
    for &i in order {
        if chosen.get(i) == Some(&false) && augment(&mut any, &mask, i) {
            chosen[i] = true;
        }
    }
    // 2. Where: the running members where they are, then the cheapest
    // augmenting path for the others, one at a time.
    let mut placed = Matching::<E>::EMPTY;
    for (i, _) in chosen.iter().enumerate().filter(|(_, c)| **c) {
        if let Some(n) = now.get(i).copied().flatten()
            && mask(i) & 1u64.checked_shl(u32::from(n)).unwrap_or(0) != 0
            && placed.holder(n).is_none()
        {
            placed.set(i, n);
        }
    }
    let cost = |i: usize, n: u8| match now.get(i).copied().flatten() {
        Some(home) if home != n => 1,
        _ => 0,
    };
    for _ in 0..E {
        if !cheapest_path(&mut placed, &mask, &cost, &chosen) {
            break;
        }
    }
    let complete = (0..E).all(|i| !chosen[i] || placed.counter(i).is_some());
    // Step 1's matching proves one exists, so a path is always found;
    // were none, that matching still places the set.
    let result = if complete { placed } else { any };
    for (i, slot) in next.iter_mut().enumerate() {
        *slot = if chosen.get(i) == Some(&true) {
            result.counter(i)
        } else {
            None
        };
    }
}

/// Kuhn's step, breadth first: an augmenting path from unmatched event
/// `start` to a free counter, applied; `false` (the matching unchanged)
/// if there is none.
fn augment<const E: usize>(
    m: &mut Matching<E>,
    mask: &impl Fn(usize) -> u64,
    start: usize,
) -> bool {
    if start >= E {
        return false;
    }
    let mut queue = [0usize; E];
    let (mut head, mut tail) = (0, 1);
    queue[0] = start;
    // How each event was reached: from the event whose path took its
    // counter.
    let mut via: [Option<usize>; E] = [None; E];
    let mut seen = 0u64;
    while head < tail {
        let e = queue[head];
        head += 1;
        for n in bits(mask(e) & !seen) {
            seen |= 1 << n;
            match m.holder(n) {
                None => {
                    // Back along the path: each event takes the counter
                    // found for it, its old one going to the event before.
                    let (mut e, mut n) = (e, n);
                    for _ in 0..E {
                        let old = m.counter(e);
                        m.set(e, n);
                        match (old, via[e]) {
                            (Some(c), Some(before)) => (e, n) = (before, c),
                            _ => break,
                        }
                    }
                    return true;
                }
                Some(h) if h != start && via[h].is_none() && tail < E => {
                    via[h] = Some(e);
                    queue[tail] = h;
                    tail += 1;
                }
                Some(_) => {}
            }
        }
    }
    false
}

/// The cheapest augmenting path from any chosen event without a counter
/// to a free counter (Bellman-Ford over the residual graph: event to a
/// counter it may use at its cost, a counter back to its holder at minus
/// the holder's cost there), applied; `false` if there is none.
fn cheapest_path<const E: usize>(
    m: &mut Matching<E>,
    mask: &impl Fn(usize) -> u64,
    cost: &impl Fn(usize, u8) -> i32,
    chosen: &[bool; E],
) -> bool {
    const FAR: i32 = i32::MAX / 2;
    let mut to_event = [FAR; E];
    let mut to_counter = [FAR; COUNTERS];
    // The event each counter was reached from.
    let mut from = [0usize; COUNTERS];
    let mut sources = false;
    for i in 0..E {
        if chosen[i] && m.counter(i).is_none() {
            to_event[i] = 0;
            sources = true;
        }
    }
    if !sources {
        return false;
    }
    // A shortest path visits each event at most once, so E + 1 rounds
    // settle every distance (there is no negative cycle: each path keeps
    // the matching the cheapest of its size).
    for _ in 0..=E {
        let mut changed = false;
        for i in (0..E).filter(|&i| to_event[i] < FAR) {
            let here = m.counter(i);
            for n in bits(mask(i)).filter(|&n| Some(n) != here) {
                let d = to_event[i] + cost(i, n);
                if d < to_counter[usize::from(n)] {
                    to_counter[usize::from(n)] = d;
                    from[usize::from(n)] = i;
                    changed = true;
                }
            }
        }
        for (h, to) in to_event.iter_mut().enumerate() {
            let Some(n) = m.counter(h) else { continue };
            let d = to_counter[usize::from(n)];
            if d < FAR && d - cost(h, n) < *to {
                *to = d - cost(h, n);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let free = (0..COUNTERS as u8)
        .filter(|&n| m.holder(n).is_none() && to_counter[usize::from(n)] < FAR)
        .min_by_key(|&n| to_counter[usize::from(n)]);
    let Some(mut n) = free else {
        return false;
    };
    // Back along the path: the event that reached `n` takes it, and its
    // own counter goes to the event that reached that one.
    for _ in 0..=E {
        let e = from[usize::from(n)];
        let old = m.counter(e);
        m.set(e, n);
        match old {
            Some(c) => n = c,
            None => return true,
        }
    }
    true
}

#[cfg(test)]
mod tests;

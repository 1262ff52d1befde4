//! [`choose`] against brute force on random instances: the set chosen is
//! the greedy one by priority under exact feasibility, the placement is a
//! matching, and it moves the fewest running events any matching of the
//! set can.

use super::choose;

/// Counters 0..C in the random instances.
const C: u8 = 6;
/// Events in the random instances.
const N: usize = 7;

/// Every assignment of `set` (events, in order) to distinct counters each
/// may use, handed to `visit` (as each event's counter).
fn assignments(
    allowed: &[u64],
    set: &[usize],
    k: usize,
    used: u64,
    at: &mut [Option<u8>; N],
    visit: &mut dyn FnMut(&[Option<u8>; N]),
) {
    let Some(&i) = set.get(k) else {
        visit(at);
        return;
    };
    for n in 0..C {
        if allowed[i] & 1 << n != 0 && used & 1 << n == 0 {
            at[i] = Some(n);
            assignments(allowed, set, k + 1, used | 1 << n, at, visit);
            at[i] = None;
        }
    }
}

fn feasible(allowed: &[u64], set: &[usize]) -> bool {
    let mut any = false;
    assignments(allowed, set, 0, 0, &mut [None; N], &mut |_| any = true);
    any
}

fn moves(now: &[Option<u8>], at: &[Option<u8>; N]) -> usize {
    (0..N)
        .filter(|&i| now[i].is_some() && at[i].is_some() && now[i] != at[i])
        .count()
}

#[test]
fn the_choice_is_greedy_by_priority_and_moves_the_fewest_running_events() {
    let mut rnd = crate::testing::rng(0x36_36);
    for _ in 0..3000 {
        // Each event allowed one to four counters (sometimes every one).
        let allowed: [u64; N] = core::array::from_fn(|_| {
            if rnd(4) == 0 {
                (1 << C) - 1
            } else {
                (0..1 + rnd(3)).fold(0, |m, _| m | 1 << rnd(u64::from(C)))
            }
        });
        // A valid running set: some events on distinct allowed counters.
        let mut now = [None; N];
        let mut used = 0u64;
        for i in 0..N {
            let n = rnd(u64::from(C)) as u8;
            if rnd(2) == 0 && allowed[i] & 1 << n != 0 && used & 1 << n == 0 {
                now[i] = Some(n);
                used |= 1 << n;
            }
        }
        let mut order: [usize; N] = core::array::from_fn(|i| i);
        for k in (1..N).rev() {
            order.swap(k, rnd(k as u64 + 1) as usize);
        }
        let mut next = [None; N];
        choose::<N>(&allowed, &order, &now, &mut next);

        // The set: greedy by priority with exact feasibility.
        let mut set = std::vec::Vec::new();
        for &i in &order {
            set.push(i);
            if !feasible(&allowed, &set) {
                set.pop();
            }
        }
        let mut chosen: std::vec::Vec<usize> = (0..N).filter(|&i| next[i].is_some()).collect();
        chosen.sort_unstable();
        set.sort_unstable();
        assert_eq!(chosen, set, "{allowed:?} {order:?}");
        // A matching.
        let mut taken = 0u64;
        for n in next.iter().flatten() {
            assert_eq!(taken & 1 << n, 0, "counter {n} twice: {next:?}");
            taken |= 1 << n;
        }
        for i in 0..N {
            if let Some(n) = next[i] {
                assert_ne!(allowed[i] & 1 << n, 0, "event {i} on counter {n}");
            }
        }
        // The fewest moves.
        let mut best = usize::MAX;
        assignments(&allowed, &set, 0, 0, &mut [None; N], &mut |at| {
            best = best.min(moves(&now, at));
        });
        assert_eq!(moves(&now, &next), best, "{allowed:?} {now:?} {next:?}");
    }
}

/// The case a greedy choice fails: the first event takes the only counter
/// the second can use; the matching puts the first elsewhere.
#[test]
fn a_greedy_choice_would_leave_an_event_out() {
    let allowed = [0b11u64, 0b01];
    let mut next = [None; 2];
    choose::<2>(&allowed, &[0, 1], &[None, None], &mut next);
    assert_eq!(next, [Some(1), Some(0)]);
    // Running on counter 0, the first event moves to make room: the one
    // move any placement of both needs.
    choose::<2>(&allowed, &[1, 0], &[Some(0), None], &mut next);
    assert_eq!(next, [Some(1), Some(0)]);
}

/// Input naming no event or no counter is skipped, never a panic.
#[test]
fn bad_input_is_skipped() {
    let mut next = [Some(9); 3];
    choose::<2>(&[u64::MAX, 0], &[7, 0, 0, 1], &[Some(200), None], &mut next);
    assert_eq!(next, [Some(0), None, None]);
    choose::<0>(&[], &[0], &[], &mut []);
}

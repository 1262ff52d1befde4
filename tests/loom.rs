//! Model-checks the claims protocol of a NetBurst package
//! (`src/arch/netburst/physical/claims.rs`) with loom: every interleaving of
//! two drivers, on two CPUs, joining the package (the first resets the PMU,
//! the others wait until it has), claiming counters and ESCRs with atomic
//! read-modify-writes, releasing them and leaving. The file is the crate's
//! own source, compiled here against loom's atomics; the registers a claim
//! guards are `loom::cell::UnsafeCell`s, so loom reports any interleaving in
//! which two drivers could write one register, or a joiner could use the
//! PMU before the first driver's reset is visible to it.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release --test loom`
//! (`.ci/run` does); without `--cfg loom` this file is empty.
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

/// The atomics `claims.rs` is written against.
mod sync {
    pub(super) use loom::hint::spin_loop;
    pub(super) use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};
}

#[allow(dead_code)]
#[path = "../src/arch/netburst/physical/claims.rs"]
mod claims;

use claims::{Claims, Joined, Refused};
use sync::{AtomicU32, AtomicU64};

/// A package: its claims and two registers (a CCCR "reset" flag written by
/// the first driver, and the register of counter 0), plain memory that
/// only the protocol orders.
struct Package {
    claims: Claims,
    reset: UnsafeCell<bool>,
    counter0: UnsafeCell<u64>,
}

impl Package {
    fn new() -> Package {
        Package {
            claims: Claims {
                counters: AtomicU32::new(0),
                escrs: AtomicU64::new(0),
                drivers: AtomicU32::new(0),
            },
            reset: UnsafeCell::new(false),
            counter0: UnsafeCell::new(0),
        }
    }

    /// A driver is taken: the first resets, every one then sees the reset.
    fn take(&self) {
        if self.claims.join() == Joined::First {
            // SAFETY: the first driver alone writes it, before `ready`.
            self.reset.with_mut(|r| unsafe { *r = true });
            self.claims.ready();
        }
        // SAFETY: read after `join` returned, which orders it after the
        // first driver's write (loom checks that it does).
        assert!(
            self.reset.with(|r| unsafe { *r }),
            "joined before the reset"
        );
    }
}

/// Two drivers taken at once: exactly one resets, and the other uses the
/// PMU only after the reset (a race on the reset register fails the check).
#[test]
fn two_drivers_join_and_the_second_waits_for_the_reset() {
    loom::model(|| {
        let p = Arc::new(Package::new());
        let other = {
            let p = p.clone();
            thread::spawn(move || p.take())
        };
        p.take();
        other.join().unwrap();
        assert_eq!(
            p.claims.drivers.load(sync::Ordering::Relaxed) & 0x7FFF_FFFF,
            2
        );
    });
}

/// Two drivers race for one counter (through different ESCRs) and then for
/// one ESCR (through different counters): at most one wins each, the loser
/// is refused with the reason, a refused claim leaves nothing claimed, and
/// only a winner writes the counter's register.
#[test]
fn a_counter_and_an_escr_are_claimed_by_one_driver_at_a_time() {
    loom::model(|| {
        let p = Arc::new(Package::new());
        let race = |p: &Package, counter: u32, escr: u64| match p.claims.claim(counter, escr) {
            Ok(()) => {
                if counter == 1 {
                    // SAFETY: the claim's winner alone writes the register
                    // (loom checks that it does).
                    p.counter0.with_mut(|c| unsafe { *c += 1 });
                }
                p.claims.release(counter, escr);
                Ok(())
            }
            Err(r) => Err(r),
        };
        let other = {
            let p = p.clone();
            thread::spawn(move || race(&p, 1, 1 << 5))
        };
        let mine = race(&p, 1, 1 << 6);
        let theirs = other.join().unwrap();
        for r in [mine, theirs] {
            assert!(matches!(r, Ok(()) | Err(Refused::Counter)), "{r:?}");
        }
        assert_eq!((p.claims.counters(), p.claims.escrs()), (0, 0));
    });
    loom::model(|| {
        let p = Arc::new(Package::new());
        let other = {
            let p = p.clone();
            thread::spawn(move || p.claims.claim(1 << 2, 1 << 7))
        };
        let mine = p.claims.claim(1 << 3, 1 << 7);
        let theirs = other.join().unwrap();
        match (mine, theirs) {
            (Ok(()), Err(Refused::Escr)) => assert_eq!(p.claims.counters(), 1 << 3),
            (Err(Refused::Escr), Ok(())) => assert_eq!(p.claims.counters(), 1 << 2),
            other => panic!("both or neither: {other:?}"),
        }
        assert_eq!(p.claims.escrs(), 1 << 7);
    });
}

/// One driver leaves while another joins: the joiner either joins the live
/// package or, if it came last, resets it again; the count of live drivers
/// never goes wrong, and the last to leave leaves it empty.
#[test]
fn leaving_and_joining_at_once_keep_the_count() {
    loom::model(|| {
        let p = Arc::new(Package::new());
        p.take();
        let other = {
            let p = p.clone();
            thread::spawn(move || {
                let first = p.claims.join() == Joined::First;
                if first {
                    p.claims.ready();
                }
                p.claims.leave();
                first
            })
        };
        p.claims.leave();
        let _ = other.join().unwrap();
        assert_eq!(p.claims.drivers.load(sync::Ordering::Relaxed), 0);
    });
}

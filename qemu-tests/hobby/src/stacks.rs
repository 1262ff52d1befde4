//! Call stacks for profiles: the bounds of the stack a PMI interrupted
//! (for [`pmu::sampling::CallChain::walk`]), and a tally of chains that
//! prints them in the runner's `stack` lines, from which `pmu-qemu-run`
//! folds stacks with the kernel's symbols and draws a flame graph
//! (`pmu_qemu_run::stacks` documents the lines).
//!
//! The kernels are built with frame pointers (`-C force-frame-pointers=yes`
//! in the workspace's `.cargo/config.toml`), and the boot code and each
//! AP's entry clear RBP before their first call, so every walk ends at the
//! CPU's first Rust frame ([`pmu::sampling::ChainEnd::Root`]).

use core::ops::Range;

use pmu::sampling::{CallChain, StackBounds};

use crate::println;

unsafe extern "C" {
    /// The boot CPU's stack (`boot.rs`).
    static hobby_stack: u8;
    static hobby_stack_top: u8;
}

/// The boot CPU's stack: its addresses.
pub fn boot_stack() -> Range<usize> {
    (&raw const hobby_stack) as usize..(&raw const hobby_stack_top) as usize
}

/// The bounds of the kernel stack that holds `rsp` (an interrupted RSP):
/// the boot CPU's or an AP's; [`StackBounds::EMPTY`] for any other address
/// (a user stack, an IST stack), whose chain is then its RIP alone.
pub fn bounds(rsp: u64) -> StackBounds<'static> {
    let rsp = rsp as usize;
    let stack = core::iter::once(boot_stack())
        .chain((1..crate::smp::MAX_CPUS).filter_map(crate::smp::ap_stack))
        .find(|s| s.start < rsp && rsp <= s.end);
    match stack {
        // SAFETY: a stack of this kernel, in its identity-mapped `.bss`
        // for the whole run; only its own CPU writes it, and a walk reads
        // it from that CPU's interrupt handler, the writer suspended.
        Some(s) => unsafe { StackBounds::from_raw(s) },
        None => StackBounds::EMPTY,
    }
}

/// Up to `ROWS` distinct call chains of up to `N` addresses, each with its
/// count: what a profile prints as `stack` lines ([`Tally::print`]).
pub struct Tally<const N: usize, const ROWS: usize> {
    rows: [(CallChain<N>, u64); ROWS],
    used: usize,
    unplaced: u64,
}

impl<const N: usize, const ROWS: usize> Default for Tally<N, ROWS> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize, const ROWS: usize> Tally<N, ROWS> {
    /// No chains.
    pub const fn new() -> Self {
        Tally {
            rows: [(CallChain::EMPTY, 0); ROWS],
            used: 0,
            unplaced: 0,
        }
    }

    /// Counts `chain` `count` more times (an empty chain, or a new one when
    /// every row is taken, is counted as unplaced).
    pub fn add(&mut self, chain: &CallChain<N>, count: u64) {
        if chain.frames().is_empty() {
            self.unplaced += count;
            return;
        }
        let rows = &mut self.rows[..self.used];
        if let Some(row) = rows.iter_mut().find(|r| r.0.frames() == chain.frames()) {
            row.1 += count;
        } else if let Some(row) = self.rows.get_mut(self.used) {
            *row = (*chain, count);
            self.used += 1;
        } else {
            self.unplaced += count;
        }
    }

    /// The distinct chains and their counts, in the order first seen.
    pub fn rows(&self) -> &[(CallChain<N>, u64)] {
        &self.rows[..self.used]
    }

    /// Samples not in a row: without a chain, or past `ROWS` chains.
    pub fn unplaced(&self) -> u64 {
        self.unplaced
    }

    /// Prints a `stack` line per chain, under the root frame `root` if
    /// given (`stack <root>: <count> <addresses>`).
    pub fn print(&self, root: Option<&str>) {
        for (chain, count) in self.rows() {
            let addrs =
                core::fmt::from_fn(|f| chain.frames().iter().try_for_each(|a| write!(f, " {a:x}")));
            match root {
                Some(root) => println!("stack {root}: {count}{addrs}"),
                None => println!("stack: {count}{addrs}"),
            }
        }
    }
}

//! Call chains: the interrupted code's callers, found by walking its frame
//! pointers from the overflow interrupt, for profiles read as call graphs
//! and flame graphs (Linux `perf record -g`'s frame-pointer mode).
//!
//! Code built with frame pointers (`-C force-frame-pointers=yes`) keeps a
//! linked list on its stack: each function's prologue pushes the caller's
//! RBP and points RBP at that slot, so `[RBP]` is the caller's frame and
//! `[RBP + 8]` the return address into the caller (System V AMD64 ABI
//! 3.2.2, "The Stack Frame"). [`CallChain::walk`] starts at the interrupted
//! RIP and RBP ([`crate::entry::PmiFrame`] carries both) and follows the
//! list, reading only inside the [`StackBounds`] the kernel vouches for, at
//! or above the interrupted RSP (a live frame of the interrupted code cannot
//! lie below it), and only upwards: a corrupt, foreign or cyclic frame
//! pointer ends the chain ([`ChainEnd`] says why), it never faults and
//! never loops. The chain is bounded by its capacity `N` and travels in the
//! sample's payload ([`crate::sampling::Sample::with_payload`]), through a
//! [`crate::sampling::SampleBuffer`] like any other payload.
//!
//! What a frame-pointer walk cannot see, as on any platform that uses it:
//! a sample taken in a function's prologue (before its `push rbp; mov rbp,
//! rsp`) or in code built without frame pointers (such as the precompiled
//! `core` of `x86_64-unknown-none`) names that function's caller's caller
//! as its caller, skipping one frame.
//!
//! The walk is the caller's choice, outside the drivers' handlers: a
//! handler's closure that does not walk costs nothing more than before
//! (`cargo bench --bench pmi` measures the walk per frame).
//!
//! # Examples
//!
//! A stack of two frames (in a real kernel: the CPU's stack, from
//! [`StackBounds::from_raw`]) walked from an interrupt at `0x1000`:
//!
//! ```
//! use pmu::sampling::{CallChain, ChainEnd, StackBounds};
//!
//! let mut stack = [0u64; 8];
//! let base = stack.as_ptr() as u64;
//! // Frame at word 2: caller's frame at word 5, return address 0x2000;
//! // frame at word 5: the outermost (saved RBP 0), return address 0x3000.
//! stack[2] = base + 5 * 8;
//! stack[3] = 0x2000;
//! stack[5] = 0;
//! stack[6] = 0x3000;
//! let bounds = StackBounds::of(&stack);
//! let chain: CallChain<4> = CallChain::walk(0x1000, base + 2 * 8, base, &bounds);
//! assert_eq!(chain.frames(), &[0x1000, 0x2000, 0x3000]);
//! assert_eq!(chain.end(), ChainEnd::Root);
//! ```

use core::marker::PhantomData;
use core::ops::Range;
use core::sync::atomic::{AtomicU64, Ordering};

use super::Payload;

/// The memory a walk may read: one stack, `[low, high)`, 8-byte words.
///
/// Made from a borrowed slice ([`StackBounds::of`]), or for a kernel's own
/// stacks from their addresses ([`StackBounds::from_raw`], whose contract
/// is that the range stays mapped and readable).
#[derive(Clone, Copy, Debug)]
pub struct StackBounds<'a> {
    /// The lowest word, with the provenance of the memory vouched for.
    low: *const u64,
    /// The first address in the range.
    start: u64,
    /// The first address past the range.
    end: u64,
    stack: PhantomData<&'a [u64]>,
}

// SAFETY: the bounds are a permission to read the words of one stack, as
// the `&'a [u64]` they stand for is: shared or sent to another context,
// they still only read (volatile), which `from_raw`'s contract allows.
unsafe impl Send for StackBounds<'_> {}
// SAFETY: as for `Send`.
unsafe impl Sync for StackBounds<'_> {}

impl<'a> StackBounds<'a> {
    /// Bounds that let a walk read nothing: every chain is its RIP alone.
    pub const EMPTY: StackBounds<'static> = StackBounds {
        low: core::ptr::null(),
        start: 0,
        end: 0,
        stack: PhantomData,
    };

    /// The words of `stack`, borrowed for as long as the bounds live.
    pub fn of(stack: &'a [u64]) -> StackBounds<'a> {
        let low = stack.as_ptr();
        let start = low as u64;
        StackBounds {
            low,
            start,
            end: start + 8 * stack.len() as u64,
            stack: PhantomData,
        }
    }

    /// The stack at addresses `range` (a kernel's stack of a CPU, from its
    /// linker symbols or its allocator); an empty or misaligned range gives
    /// bounds that admit the aligned words inside it.
    ///
    /// # Safety
    ///
    /// Every address in `range` is mapped and readable for `'a`, and the
    /// memory is only written, while a walk may read it, by code that a
    /// walk's reads cannot disturb: the interrupted code of the CPU whose
    /// stack it is (suspended while its interrupt handler walks) or plain
    /// stores of other code (a walk's reads are volatile and may see any
    /// value: it checks every word it follows).
    pub unsafe fn from_raw(range: Range<usize>) -> StackBounds<'a> {
        let start = (range.start as u64).next_multiple_of(8);
        let end = (range.end as u64) & !7;
        if end <= start {
            return StackBounds::EMPTY;
        }
        StackBounds {
            low: core::ptr::with_exposed_provenance(start as usize),
            start,
            end,
            stack: PhantomData,
        }
    }

    /// The same stack, only below `top`: a walk then ends at the frame
    /// whose record lies at or above `top` (with its return address
    /// recorded), as if that frame were the stack's outermost. A profile of
    /// one subsystem stops at its entry's frame this way.
    pub fn below(self, top: u64) -> StackBounds<'a> {
        StackBounds {
            end: self.end.min(top & !7).max(self.start),
            ..self
        }
    }

    /// The addresses a walk may read.
    pub fn range(&self) -> Range<u64> {
        self.start..self.end
    }

    /// The lowest and highest address a frame record (two words) may
    /// start at, at or above `floor`: an empty range (`lo > hi`) when none
    /// fits.
    #[inline(always)]
    fn record_range(&self, floor: u64) -> (u64, u64) {
        (self.start.max(floor), self.end.saturating_sub(16))
    }

    /// The frame record at `fp`: `[fp]`, the caller's frame pointer, and
    /// `[fp + 8]`, the return address.
    ///
    /// # Safety
    ///
    /// `fp` is 8-byte aligned and within [`StackBounds::record_range`].
    #[inline(always)]
    unsafe fn record(&self, fp: u64) -> (u64, u64) {
        // SAFETY: `fp` and `fp + 8` are aligned words inside the range,
        // which `of` (a borrowed slice) or `from_raw`'s contract makes
        // readable for 'a; `low` carries that memory's provenance and the
        // offset stays inside it. Volatile: the memory may be the
        // interrupted code's stack, which the compiler knows nothing of.
        unsafe {
            let at = self.low.wrapping_byte_add((fp - self.start) as usize);
            (at.read_volatile(), at.add(1).read_volatile())
        }
    }
}

/// Why a walk stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ChainEnd {
    /// The outermost frame: a saved frame pointer or return address of 0
    /// (the kernel's entry clears RBP before its first call).
    Root,
    /// The next frame pointer points outside the stack's bounds (below the
    /// interrupted RSP, or misaligned): a corrupt or foreign frame, or code
    /// that keeps something else in RBP.
    OutOfBounds,
    /// The next frame pointer is not above the current one: frames only go
    /// up the stack, so the list is corrupt (or cyclic).
    NotAscending,
    /// The chain is full: `N` addresses (or, from a hardware call stack,
    /// the stack was full: older calls may have been pushed out of it).
    Full,
    /// The oldest call a hardware call stack recorded
    /// ([`CallChain::from_calls`]): the calls open before recording began
    /// are not in it.
    OldestRecorded,
}

/// Up to `N` code addresses, innermost first: the interrupted RIP, then the
/// return address into each caller (an address just after a call
/// instruction: symbolise `address - 1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CallChain<const N: usize> {
    frames: [u64; N],
    len: u8,
    end: ChainEnd,
}

impl<const N: usize> CallChain<N> {
    /// No addresses: the payload of a sample taken without a walk.
    pub const EMPTY: CallChain<N> = CallChain {
        frames: [0; N],
        len: 0,
        end: ChainEnd::Root,
    };

    /// The chain of code interrupted at `rip` with frame pointer `rbp` and
    /// stack pointer `rsp`, read from `bounds` (never below `rsp`).
    #[inline]
    pub fn walk(rip: u64, rbp: u64, rsp: u64, bounds: &StackBounds<'_>) -> CallChain<N> {
        const { assert!(N >= 1 && N <= 255, "a call chain holds 1 to 255 addresses") };
        let mut chain = CallChain::EMPTY;
        chain.end = ChainEnd::Full;
        let Some((first, callers)) = chain.frames.split_first_mut() else {
            return chain;
        };
        *first = rip;
        let mut len = 1;
        let (lo, hi) = bounds.record_range(rsp);
        let mut fp = rbp;
        for slot in callers {
            if fp == 0 {
                chain.end = ChainEnd::Root;
                break;
            }
            if !fp.is_multiple_of(8) || fp < lo || fp > hi {
                chain.end = ChainEnd::OutOfBounds;
                break;
            }
            // SAFETY: aligned and within the record range, just checked.
            let (next, ret) = unsafe { bounds.record(fp) };
            if ret == 0 {
                chain.end = ChainEnd::Root;
                break;
            }
            *slot = ret;
            len += 1;
            if next != 0 && next <= fp {
                chain.end = ChainEnd::NotAscending;
                break;
            }
            fp = next;
        }
        chain.len = len;
        chain
    }

    /// The chain of code interrupted at `rip` whose open calls a hardware
    /// call stack recorded (LBR call-stack mode: each call's own address,
    /// innermost first), for the same profiles as a frame-pointer walk's.
    ///
    /// Each caller is stored as the call instruction's address plus one: a
    /// frame-pointer walk's callers are return addresses, which a
    /// symboliser reads one byte back, into the call instruction (the
    /// runner's rule, `pmu_qemu_run::stacks`), and one byte past the
    /// call's first byte is inside the same instruction. So the two
    /// chains of one sample fold to the same functions, and a flame graph
    /// draws them alike. `complete`: the recording held every call it
    /// took (the chain ends [`ChainEnd::OldestRecorded`]); otherwise it was
    /// full and may have lost the oldest ([`ChainEnd::Full`]), as when the
    /// chain itself fills.
    pub fn from_calls(
        rip: u64,
        calls: impl IntoIterator<Item = u64>,
        complete: bool,
    ) -> CallChain<N> {
        const { assert!(N >= 1 && N <= 255, "a call chain holds 1 to 255 addresses") };
        let mut chain = CallChain::EMPTY;
        chain.end = if complete {
            ChainEnd::OldestRecorded
        } else {
            ChainEnd::Full
        };
        let mut calls = calls.into_iter();
        let mut len = 0;
        for (i, slot) in chain.frames.iter_mut().enumerate() {
            let next = if i == 0 {
                Some(rip)
            } else {
                calls.next().map(|call| call.wrapping_add(1))
            };
            let Some(address) = next else { break };
            *slot = address;
            len += 1;
        }
        if len == N && calls.next().is_some() {
            chain.end = ChainEnd::Full;
        }
        chain.len = len as u8;
        chain
    }

    /// The addresses, innermost first.
    pub fn frames(&self) -> &[u64] {
        self.frames.get(..usize::from(self.len)).unwrap_or(&[])
    }

    /// Why the walk stopped.
    pub fn end(&self) -> ChainEnd {
        self.end
    }
}

impl<const N: usize> Default for CallChain<N> {
    /// [`CallChain::EMPTY`].
    fn default() -> Self {
        CallChain::EMPTY
    }
}

/// A chain's storage in a [`crate::sampling::SampleBuffer`] slot: its
/// length and end in one word, its addresses in `N`.
pub struct CallChainSlot<const N: usize> {
    meta: AtomicU64,
    frames: [AtomicU64; N],
}

/// The slot's `meta` word: `len | end << 8 | VALID`.
const VALID: u64 = 1 << 63;

impl<const N: usize> crate::sealed::Sealed for CallChain<N> {}

impl<const N: usize> Payload for CallChain<N> {
    type Slot = CallChainSlot<N>;
    #[allow(clippy::declare_interior_mutable_const)]
    const EMPTY_SLOT: CallChainSlot<N> = CallChainSlot {
        meta: AtomicU64::new(0),
        frames: [const { AtomicU64::new(0) }; N],
    };

    #[inline]
    fn store(self, slot: &CallChainSlot<N>) {
        let end = match self.end {
            ChainEnd::Root => 0,
            ChainEnd::OutOfBounds => 1,
            ChainEnd::NotAscending => 2,
            ChainEnd::Full => 3,
            ChainEnd::OldestRecorded => 4,
        };
        for (s, &f) in slot.frames.iter().zip(self.frames()) {
            s.store(f, Ordering::Relaxed);
        }
        slot.meta
            .store(u64::from(self.len) | end << 8 | VALID, Ordering::Relaxed);
    }

    fn load(slot: &CallChainSlot<N>) -> Option<CallChain<N>> {
        let meta = slot.meta.load(Ordering::Relaxed);
        let len = (meta & 0xFF) as usize;
        let end = match meta >> 8 & 0xFF {
            0 => ChainEnd::Root,
            1 => ChainEnd::OutOfBounds,
            2 => ChainEnd::NotAscending,
            3 => ChainEnd::Full,
            4 => ChainEnd::OldestRecorded,
            _ => return None,
        };
        if meta & VALID == 0 || len > N {
            return None;
        }
        let mut chain = CallChain {
            frames: [0; N],
            len: len as u8,
            end,
        };
        for (f, s) in chain.frames.iter_mut().zip(&slot.frames).take(len) {
            *f = s.load(Ordering::Relaxed);
        }
        Some(chain)
    }
}

#[cfg(test)]
mod tests;

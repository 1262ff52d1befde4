use super::*;
use crate::sampling::{Sample, SampleBuffer};

/// A stack of 32 words with frame records at the given word indices (each
/// linking to the next, the last to 0), return addresses 0x1000 * (i + 1).
/// Returns the stack's address.
fn stack_with(stack: &mut [u64; 32], records: &[usize]) -> u64 {
    let base = stack.as_ptr() as u64;
    for (i, &w) in records.iter().enumerate() {
        stack[w] = records.get(i + 1).map_or(0, |&n| base + 8 * n as u64);
        stack[w + 1] = 0x1000 * (i as u64 + 1);
    }
    base
}

#[test]
fn a_well_formed_stack_walks_to_its_root() {
    let mut stack = [0u64; 32];
    let base = stack_with(&mut stack, &[4, 10, 20]);
    let b = StackBounds::of(&stack);
    let c: CallChain<8> = CallChain::walk(0xABC, base + 32, base, &b);
    assert_eq!(c.frames(), &[0xABC, 0x1000, 0x2000, 0x3000]);
    assert_eq!(c.end(), ChainEnd::Root);
}

#[test]
fn the_chain_stops_full_at_its_capacity() {
    let mut stack = [0u64; 32];
    let base = stack_with(&mut stack, &[4, 10, 20]);
    let b = StackBounds::of(&stack);
    let c: CallChain<3> = CallChain::walk(0xABC, base + 32, base, &b);
    assert_eq!(c.frames(), &[0xABC, 0x1000, 0x2000]);
    assert_eq!(c.end(), ChainEnd::Full);
    let c: CallChain<1> = CallChain::walk(0xABC, base + 32, base, &b);
    assert_eq!(c.frames(), &[0xABC]);
    assert_eq!(c.end(), ChainEnd::Full);
}

#[test]
fn a_frame_pointer_outside_the_bounds_ends_the_chain_unread() {
    let mut stack = [0u64; 32];
    let base = stack_with(&mut stack, &[4, 10]);
    // The second record points far outside the stack (an unmapped address
    // on a kernel: it must not be read).
    stack[10] = 0xDEAD_0000_0000;
    let b = StackBounds::of(&stack);
    let c: CallChain<8> = CallChain::walk(1, base + 32, base, &b);
    assert_eq!(c.frames(), &[1, 0x1000, 0x2000]);
    assert_eq!(c.end(), ChainEnd::OutOfBounds);
    // RBP itself foreign: the RIP alone.
    for rbp in [0xFFFF_8000_0000_0000, base - 8, base + 8 * 31, u64::MAX - 7] {
        let c: CallChain<8> = CallChain::walk(1, rbp, base, &b);
        assert_eq!((c.frames(), c.end()), (&[1u64][..], ChainEnd::OutOfBounds));
    }
    // Misaligned.
    let c: CallChain<8> = CallChain::walk(1, base + 33, base, &b);
    assert_eq!(c.end(), ChainEnd::OutOfBounds);
}

#[test]
fn nothing_below_the_interrupted_rsp_is_read() {
    let mut stack = [0u64; 32];
    let base = stack_with(&mut stack, &[4, 10]);
    let b = StackBounds::of(&stack);
    // The interrupted code's RSP above the first record: that record is not
    // its stack's (the handler's frames live below RSP).
    let c: CallChain<8> = CallChain::walk(1, base + 32, base + 40, &b);
    assert_eq!(c.frames(), &[1]);
    assert_eq!(c.end(), ChainEnd::OutOfBounds);
}

#[test]
fn a_cycle_or_a_downward_link_ends_the_chain() {
    let mut stack = [0u64; 32];
    let base = stack_with(&mut stack, &[4, 10]);
    stack[10] = base + 32; // back to the first record
    let b = StackBounds::of(&stack);
    let c: CallChain<16> = CallChain::walk(1, base + 32, base, &b);
    assert_eq!(c.frames(), &[1, 0x1000, 0x2000]);
    assert_eq!(c.end(), ChainEnd::NotAscending);
    stack[4] = base + 32; // a record pointing at itself
    let b = StackBounds::of(&stack);
    let c: CallChain<16> = CallChain::walk(1, base + 32, base, &b);
    assert_eq!(c.frames(), &[1, 0x1000]);
    assert_eq!(c.end(), ChainEnd::NotAscending);
}

#[test]
fn a_zero_return_address_or_frame_pointer_is_the_root() {
    let mut stack = [0u64; 32];
    let base = stack_with(&mut stack, &[4, 10]);
    stack[11] = 0;
    let b = StackBounds::of(&stack);
    let c: CallChain<8> = CallChain::walk(1, base + 32, base, &b);
    assert_eq!((c.frames(), c.end()), (&[1, 0x1000][..], ChainEnd::Root));
    let c: CallChain<8> = CallChain::walk(1, 0, base, &b);
    assert_eq!((c.frames(), c.end()), (&[1][..], ChainEnd::Root));
}

#[test]
fn empty_and_raw_bounds_admit_what_they_say() {
    let mut stack = [0u64; 32];
    let base = stack_with(&mut stack, &[4, 10]);
    let c: CallChain<8> = CallChain::walk(1, base + 32, base, &StackBounds::EMPTY);
    assert_eq!((c.frames(), c.end()), (&[1][..], ChainEnd::OutOfBounds));
    let start = stack.as_ptr() as usize;
    // SAFETY: the array's own addresses, borrowed while the bounds live;
    // the misaligned ends are rounded inwards.
    let b = unsafe { StackBounds::from_raw(start - 3..start + 8 * 32 + 5) };
    assert_eq!(b.range(), base..base + 256);
    let c: CallChain<8> = CallChain::walk(1, base + 32, base, &b);
    assert_eq!(c.frames(), &[1, 0x1000, 0x2000]);
    // SAFETY: an empty range reads nothing.
    let b = unsafe { StackBounds::from_raw(start + 5..start + 7) };
    assert_eq!(b.range(), 0..0);
    let _ = stack;
}

#[test]
fn chains_travel_through_the_sample_buffer() {
    let mut stack = [0u64; 32];
    let base = stack_with(&mut stack, &[4, 10, 20]);
    let b = StackBounds::of(&stack);
    let buf: SampleBuffer<2, CallChain<4>> = SampleBuffer::new();
    let deep: CallChain<4> = CallChain::walk(0xA, base + 32, base, &b);
    let short: CallChain<4> = CallChain::walk(0xB, base + 80, base, &b);
    assert!(buf.push(Sample::new(3, 1, 0xA).with_payload(deep)));
    assert!(buf.push(Sample::new(4, 2, 0xB).with_payload(short)));
    assert!(!buf.push(Sample::new(5, 1, 0xC).with_payload(CallChain::default())));
    let mut got = Vec::new();
    assert_eq!(buf.drain(|s| got.push(s)), 2);
    assert_eq!(got[0].payload, deep);
    assert_eq!(got[0].payload.frames(), &[0xA, 0x1000, 0x2000, 0x3000]);
    assert_eq!(got[0].payload.end(), ChainEnd::Full);
    assert_eq!(got[1].payload, short);
    assert_eq!(got[1].payload.frames(), &[0xB, 0x2000, 0x3000]);
    assert_eq!((got[1].counter, got[1].periods), (4, 2));
    assert_eq!(buf.dropped(), 1);
    // A slot nothing stored into holds no chain.
    let empty = <CallChain<4> as Payload>::EMPTY_SLOT;
    assert_eq!(CallChain::<4>::load(&empty), None);
}

#[test]
fn bounds_below_a_frame_end_the_walk_there() {
    let mut stack = [0u64; 32];
    let base = stack_with(&mut stack, &[4, 10, 20]);
    let b = StackBounds::of(&stack);
    // Below the third record: the walk reads the first two.
    let c: CallChain<8> = CallChain::walk(1, base + 32, base, &b.below(base + 160));
    assert_eq!(c.frames(), &[1, 0x1000, 0x2000]);
    assert_eq!(c.end(), ChainEnd::OutOfBounds);
    // Never above the stack, never below its start.
    assert_eq!(b.below(u64::MAX).range(), b.range());
    assert_eq!(b.below(0).range(), base..base);
}

/// A hardware call stack's chain: the RIP, then each call's address plus
/// one (inside the call instruction, as a return address minus one is),
/// innermost first; it ends at the oldest call recorded, or full.
#[test]
fn chains_from_recorded_calls() {
    let c: CallChain<4> = CallChain::from_calls(0x10, [0x200, 0x300], true);
    assert_eq!(c.frames(), &[0x10, 0x201, 0x301]);
    assert_eq!(c.end(), ChainEnd::OldestRecorded);
    // A recording that was full may have lost calls.
    let full: CallChain<4> = CallChain::from_calls(0x10, [0x200], false);
    assert_eq!(full.frames(), &[0x10, 0x201]);
    assert_eq!(full.end(), ChainEnd::Full);
    // More calls than the chain holds.
    let cut: CallChain<3> = CallChain::from_calls(0x10, [1, 2, 3, 4], true);
    assert_eq!(cut.frames(), &[0x10, 2, 3]);
    assert_eq!(cut.end(), ChainEnd::Full);
    // Exactly as many: complete.
    let exact: CallChain<3> = CallChain::from_calls(0x10, [1, 2], true);
    assert_eq!(exact.end(), ChainEnd::OldestRecorded);
    let alone: CallChain<2> = CallChain::from_calls(0x10, [], true);
    assert_eq!(alone.frames(), &[0x10]);
    // Through a sample buffer, the end kept.
    let buf: SampleBuffer<1, CallChain<4>> = SampleBuffer::new();
    assert!(buf.push(Sample::new(0, 1, 0x10).with_payload(c)));
    let mut got = None;
    buf.drain(|s| got = Some(s.payload));
    assert_eq!(got, Some(c));
}

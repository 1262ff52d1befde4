//! The time-stamp counter, read by the timer's calibration and clocks
//! (`crate::timer`, which re-exports [`rdtsc`]) and by the bounded waits of
//! CPU bring-up (`crate::smp`), which the timer builds on.

/// Reads the time-stamp counter (RDTSC).
#[inline]
pub fn rdtsc() -> u64 {
    let (low, high): (u32, u32);
    // SAFETY: RDTSC only reads the TSC into EDX:EAX (CR4.TSD is clear in
    // this kernel, and it runs at CPL 0 anyway).
    unsafe {
        core::arch::asm!("rdtsc", out("eax") low, out("edx") high, options(nomem, nostack));
    }
    u64::from(high) << 32 | u64::from(low)
}

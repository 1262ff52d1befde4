//! The lock the shared models sit behind ([`IrqLock`]): a spin lock only
//! ever held with interrupts disabled, which knows the CPU holding it.
//!
//! Every access disables interrupts for as long as it holds the lock and
//! then restores RFLAGS.IF as it was, so an interrupt handler that takes the
//! lock can never find it held by the main code it interrupted on the same
//! CPU. The lock remembers which CPU holds it (its initial APIC ID,
//! CPUID.01H:EBX\[31:24\]): held by another CPU, an access spins until it is
//! free; held by the same CPU it can only be re-entry (a nested access, or
//! an NMI handler interrupting a holder), which panics instead of spinning
//! forever. It is a test instrument's lock, for x86-64 kernels at ring 0
//! (`CLI` faults elsewhere): the driver itself takes no lock.

use core::sync::atomic::{AtomicU32, Ordering};

use x86_64::instructions::interrupts;

/// A spin lock held only with interrupts disabled (see the [module
/// documentation](self)).
#[derive(Debug)]
pub struct IrqLock<T> {
    inner: spin::Mutex<T>,
    /// The initial APIC ID + 1 of the CPU holding the lock; 0 when free.
    holder: AtomicU32,
}

/// This CPU's initial APIC ID (CPUID.01H:EBX\[31:24\]) + 1, never 0.
fn this_cpu() -> u32 {
    // CPUID leaf 1 exists on every x86-64 processor.
    let leaf1 = core::arch::x86_64::__cpuid(1);
    (leaf1.ebx >> 24) + 1
}

impl<T> IrqLock<T> {
    /// `value`, unlocked.
    pub const fn new(value: T) -> Self {
        IrqLock {
            inner: spin::Mutex::new(value),
            holder: AtomicU32::new(0),
        }
    }

    /// Runs `f` on the value with interrupts disabled and the lock held;
    /// restores RFLAGS.IF afterwards. Waits while another CPU holds the lock.
    ///
    /// # Panics
    ///
    /// If this CPU holds the lock already: with interrupts disabled that is
    /// re-entry (a nested access, or an NMI handler), which would otherwise
    /// deadlock.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        interrupts::without_interrupts(|| {
            let me = this_cpu();
            let mut value = match self.inner.try_lock() {
                Some(value) => value,
                None => {
                    assert!(
                        self.holder.load(Ordering::Acquire) != me,
                        "a shared model re-entered while locked (nested access or NMI)"
                    );
                    self.inner.lock()
                }
            };
            self.holder.store(me, Ordering::Release);
            let out = f(&mut value);
            self.holder.store(0, Ordering::Release);
            out
        })
    }
}

//! A real time source: the local APIC timer, and the TSC to measure how much
//! time passed between two of its ticks.
//!
//! [`ApicTimer`] programs the xAPIC timer (SDM Vol. 3A 11.5.4): the LVT timer
//! entry (320H: vector, mask bit 16, mode bits 18:17), the divide
//! configuration (3E0H), the initial count (380H) and the current count
//! (390H). In periodic mode the current count reloads from the initial count
//! each time it reaches zero, and every reload raises the entry's vector.
//! [`rdtsc`] reads the time-stamp counter, and [`TickClock`] turns successive
//! TSC reads into "cycles since the previous tick", which is what a tick
//! handler needs to advance a PMU model by the time that really passed.
//! [`calibrate`] measures both rates against the PIT (channel 2, 1.193182
//! MHz), the one clock of the PC whose rate is architectural.
//!
//! # What QEMU 7.2 under TCG gives
//!
//! Measured with the `timer` test kernel (`-M pc`, one CPU) on the project
//! machine (2 cores, "Intel Xeon Processor" at a nominal 2000 MHz), over 18
//! boots: 6 alone, 6 two at a time and 6 three at a time.
//!
//! * **APIC timer rate: 1 GHz** before the divider. QEMU computes the count
//!   from `QEMU_CLOCK_VIRTUAL` in nanoseconds shifted right by log2 of the
//!   divisor (`apic_get_current_count`), so one count is 1 ns at
//!   [`Divide::By1`]; [`calibrate_best_of`] (5 x 10 ms) read 1.0001-1.0012
//!   GHz. QEMU makes a periodic period `initial count + 1` counts (one more
//!   than the SDM's), and schedules expiration `k` at `load time + k *
//!   period` (`apic_next_timer`): late ticks do not make later ones drift.
//! * **TSC rate: the host's.** Under TCG, RDTSC returns the host TSC
//!   (`cpu_get_host_ticks`), whatever the guest CPU model; here 2.0005-2.0030
//!   GHz, constant and monotonic. So TSC deltas measure host time at the
//!   host's rate, consistent with the APIC timer to about 0.1 %.
//! * **Achievable interval.** Any initial count is accepted, but every tick
//!   is a trip through QEMU's main loop, and QEMU keeps one pending
//!   interrupt per vector: expirations the guest has not taken yet merge.
//!   With the guest spinning, the fraction of expirations delivered was:
//!   5 µs 0.001-0.14 (the guest starves: deltas of 6 to 1600 periods),
//!   10 µs 0.43-0.45 (every other tick merged), 20 µs 0.50-0.95, 50 µs
//!   0.88-0.96, 100 µs 0.91-1.00, 200 µs 0.98-1.00, 1 ms 1.00. Use 50 µs
//!   or more; the tests sample at 100 µs (10 kHz).
//! * **Jitter** at 100 µs, 1000 ticks with the guest halting between them:
//!   the median TSC delta was 0.997-1.003 periods in every boot; p10 >= 0.81
//!   and p90 <= 1.19 periods in 17 of 18 boots (one: p90 1.80); 70-98 % of
//!   the deltas within 25 % of the period; 69-99 % of the expirations
//!   delivered. Outliers are host scheduling: a short delta (down to 0.07
//!   periods) follows a late tick, and stalls of 0.5-11 ms (up to 110
//!   periods, about 4 ms in half the boots even alone) merge ticks. A tick
//!   handler should therefore use the measured TSC delta ([`TickClock`]) as
//!   the elapsed time, never the nominal period. The periodic mode itself
//!   does not drift, so the long-run rate is right.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, Ordering};

use pmu::apic::Vector;
use x86_64::instructions::port::Port;

/// Register offsets in the xAPIC page.
mod reg {
    pub const EOI: usize = 0x0B0;
    pub const LVT_TIMER: usize = 0x320;
    pub const INITIAL_COUNT: usize = 0x380;
    pub const CURRENT_COUNT: usize = 0x390;
    pub const DIVIDE_CONFIG: usize = 0x3E0;
}

/// LVT timer entry: mask bit.
const LVT_MASKED: u32 = 1 << 16;
/// LVT timer entry: periodic mode (bits 18:17 = 01b).
const LVT_PERIODIC: u32 = 0b01 << 17;

/// The timer's input clock divider (divide configuration register 3E0H:
/// bits 3, 1 and 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Divide {
    /// Divide by 1 (1011b).
    By1,
    /// Divide by 2 (0000b).
    By2,
    /// Divide by 4 (0001b).
    By4,
    /// Divide by 8 (0010b).
    By8,
    /// Divide by 16 (0011b).
    By16,
    /// Divide by 32 (1000b).
    By32,
    /// Divide by 64 (1001b).
    By64,
    /// Divide by 128 (1010b).
    By128,
}

impl Divide {
    /// The divisor: 1, 2, 4, ... 128.
    pub const fn divisor(self) -> u32 {
        match self {
            Self::By1 => 1,
            Self::By2 => 2,
            Self::By4 => 4,
            Self::By8 => 8,
            Self::By16 => 16,
            Self::By32 => 32,
            Self::By64 => 64,
            Self::By128 => 128,
        }
    }

    /// The divide configuration register value (SDM Figure 11-10).
    pub const fn bits(self) -> u32 {
        match self {
            Self::By1 => 0b1011,
            Self::By2 => 0b0000,
            Self::By4 => 0b0001,
            Self::By8 => 0b0010,
            Self::By16 => 0b0011,
            Self::By32 => 0b1000,
            Self::By64 => 0b1001,
            Self::By128 => 0b1010,
        }
    }
}

/// The local APIC timer of the CPU the code runs on (xAPIC, memory-mapped).
///
/// It uses its own handle on the xAPIC page rather than
/// [`pmu::apic::LocalApic`], which covers the registers a PMU driver needs
/// and not the timer's; the two may coexist (they write different
/// registers, and EOI is a single write). The APIC must be software-enabled
/// (`LocalApic::enable`) for the timer to interrupt. `!Send` and `!Sync`,
/// like `LocalApic`: every CPU sees its own APIC at the same address.
#[derive(Debug)]
pub struct ApicTimer {
    base: NonNull<u32>,
}

impl ApicTimer {
    /// Takes the xAPIC page at virtual address `base`.
    ///
    /// # Safety
    ///
    /// `base` must be the virtual address of this CPU's xAPIC register page
    /// (4 KiB, mapped uncacheable), valid for as long as the handle lives,
    /// with the CPU in xAPIC mode. No other code may program the timer
    /// registers (320H, 380H, 3E0H) concurrently.
    pub const unsafe fn new(base: NonNull<u8>) -> Self {
        Self { base: base.cast() }
    }

    /// Takes the xAPIC page at its default address, FEE00000H, which the
    /// hobby kernel identity-maps uncacheable.
    ///
    /// # Safety
    ///
    /// As for [`ApicTimer::new`]: the CPU's APIC is in xAPIC mode at its
    /// default base, and nothing else programs the timer concurrently.
    pub const unsafe fn at_default_base() -> Self {
        // SAFETY: the caller promises the page is this CPU's xAPIC; the
        // address is not null.
        unsafe {
            Self::new(NonNull::new_unchecked(
                pmu::apic::DEFAULT_BASE as usize as *mut u8,
            ))
        }
    }

    fn read(&self, offset: usize) -> u32 {
        // SAFETY: `new`'s contract makes the whole page valid MMIO for the
        // handle's lifetime; every offset used is an aligned 32-bit register
        // inside it.
        unsafe { self.base.byte_add(offset).as_ptr().read_volatile() }
    }

    fn write(&mut self, offset: usize, value: u32) {
        // SAFETY: as in `read`; the registers written are the timer's and
        // EOI, which `new`'s contract leaves to this handle.
        unsafe { self.base.byte_add(offset).as_ptr().write_volatile(value) }
    }

    /// Starts the timer in periodic mode: `vector` is raised every
    /// `initial_count` counts of the APIC clock divided by `divide`. Writing
    /// the initial count (last) starts the countdown. An `initial_count` of 0
    /// stops the timer.
    pub fn start_periodic(&mut self, vector: Vector, divide: Divide, initial_count: u32) {
        self.write(reg::INITIAL_COUNT, 0);
        self.write(reg::DIVIDE_CONFIG, divide.bits());
        self.write(reg::LVT_TIMER, LVT_PERIODIC | u32::from(vector.get()));
        self.write(reg::INITIAL_COUNT, initial_count);
    }

    /// Starts a one-shot countdown of `initial_count` counts with the LVT
    /// entry masked: no interrupt, only [`ApicTimer::current_count`] runs down
    /// (used by [`calibrate`]).
    pub fn start_masked_countdown(&mut self, divide: Divide, initial_count: u32) {
        self.write(reg::INITIAL_COUNT, 0);
        self.write(reg::DIVIDE_CONFIG, divide.bits());
        self.write(reg::LVT_TIMER, LVT_MASKED);
        self.write(reg::INITIAL_COUNT, initial_count);
    }

    /// Stops the timer: masks the LVT entry and writes an initial count of 0.
    /// An interrupt already pending in the IRR is still delivered.
    pub fn stop(&mut self) {
        let entry = self.read(reg::LVT_TIMER);
        self.write(reg::LVT_TIMER, entry | LVT_MASKED);
        self.write(reg::INITIAL_COUNT, 0);
    }

    /// The current count (390H): counts left until the next expiration.
    pub fn current_count(&self) -> u32 {
        self.read(reg::CURRENT_COUNT)
    }

    /// The initial count (380H).
    pub fn initial_count(&self) -> u32 {
        self.read(reg::INITIAL_COUNT)
    }

    /// The raw LVT timer entry (320H).
    pub fn lvt_entry(&self) -> u32 {
        self.read(reg::LVT_TIMER)
    }

    /// Signals end of interrupt for the vector in service (the tick handler
    /// must, or no further tick is delivered).
    pub fn eoi(&mut self) {
        self.write(reg::EOI, 0);
    }
}

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

/// TSC bookkeeping for a tick handler: each [`TickClock::tick`] returns the
/// TSC cycles elapsed since the previous tick (or since
/// [`TickClock::start`]). `static`-friendly; lock-free, so main code and a
/// handler may both use it.
#[derive(Debug)]
pub struct TickClock {
    last: AtomicU64,
}

impl TickClock {
    /// A clock that has not been started (the first tick returns the
    /// cycles since TSC 0 unless [`TickClock::start`] is called first).
    pub const fn new() -> Self {
        Self {
            last: AtomicU64::new(0),
        }
    }

    /// Records the current TSC as the previous tick; returns it.
    pub fn start(&self) -> u64 {
        let now = rdtsc();
        self.last.store(now, Ordering::Relaxed);
        now
    }

    /// Reads the TSC, records it, and returns the cycles since the previous
    /// tick.
    pub fn tick(&self) -> u64 {
        let now = rdtsc();
        now.wrapping_sub(self.last.swap(now, Ordering::Relaxed))
    }

    /// The TSC value recorded by the last tick or start.
    pub fn last(&self) -> u64 {
        self.last.load(Ordering::Relaxed)
    }
}

impl Default for TickClock {
    fn default() -> Self {
        Self::new()
    }
}

/// The PIT's input clock, in Hz.
pub const PIT_HZ: u64 = 1_193_182;

/// The APIC timer and TSC rates, measured against the PIT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Calibration {
    /// APIC timer counts per second at [`Divide::By1`] (the APIC bus or
    /// core-crystal clock; 1 GHz under QEMU).
    pub apic_hz: u64,
    /// TSC cycles per second.
    pub tsc_hz: u64,
}

impl Calibration {
    /// The initial count that makes a periodic timer at `divide` expire
    /// every `period_ns` nanoseconds, at least 1 and at most `u32::MAX`.
    pub const fn count_for(&self, period_ns: u64, divide: Divide) -> u32 {
        let counts =
            (self.apic_hz as u128 * period_ns as u128 / 1_000_000_000) / divide.divisor() as u128;
        if counts == 0 {
            1
        } else if counts > u32::MAX as u128 {
            u32::MAX
        } else {
            counts as u32
        }
    }

    /// TSC cycles in `ns` nanoseconds.
    pub const fn tsc_cycles(&self, ns: u64) -> u64 {
        (self.tsc_hz as u128 * ns as u128 / 1_000_000_000) as u64
    }

    /// Nanoseconds in `cycles` TSC cycles.
    pub const fn tsc_to_ns(&self, cycles: u64) -> u64 {
        if self.tsc_hz == 0 {
            return 0;
        }
        (cycles as u128 * 1_000_000_000 / self.tsc_hz as u128) as u64
    }
}

/// Measures the APIC timer (at [`Divide::By1`]) and the TSC against PIT
/// channel 2 counting `pit_counts` (at most 65535, i.e. about 55 ms) of its
/// 1.193182 MHz clock: the method of Linux's `pit_calibrate_tsc`. Leaves
/// the APIC timer stopped and the PC speaker gate as it found it; interrupts
/// may stay enabled (nothing here is raised), but an interrupt handler that
/// runs meanwhile lengthens the measured interval.
///
/// One measurement is as good as the poll of the PIT's output: under QEMU a
/// host that deschedules the virtual CPU for a few milliseconds makes both
/// rates come out high (single 55 ms measurements read 4.5-4.9 % high with
/// three QEMUs on two cores).
/// [`calibrate_best_of`] repeats it and keeps the least delayed one.
pub fn calibrate(timer: &mut ApicTimer, pit_counts: u16) -> Calibration {
    measure(timer, pit_counts).0
}

/// [`calibrate`] `tries` times (at least once), keeping the measurement
/// that took the fewest TSC cycles: a delay in noticing the PIT's output
/// only ever lengthens the interval.
pub fn calibrate_best_of(timer: &mut ApicTimer, pit_counts: u16, tries: u32) -> Calibration {
    let mut best = measure(timer, pit_counts);
    for _ in 1..tries {
        let next = measure(timer, pit_counts);
        if next.1 < best.1 {
            best = next;
        }
    }
    best.0
}

/// One PIT measurement: the rates, and the TSC cycles it took.
fn measure(timer: &mut ApicTimer, pit_counts: u16) -> (Calibration, u64) {
    let pit_counts = pit_counts.max(1);
    let mut port_61 = Port::<u8>::new(0x61);
    let mut pit_command = Port::<u8>::new(0x43);
    let mut pit_channel2 = Port::<u8>::new(0x42);
    // SAFETY: port 61H (NMI status and control: bit 0 gates PIT channel 2,
    // bit 1 the speaker) and the PIT's ports 42H/43H: gating channel 2 with
    // the speaker off and programming it only affects channel 2, which
    // nothing else in this kernel uses.
    let saved = unsafe {
        let saved = port_61.read();
        port_61.write((saved & !0x02) | 0x01);
        // Channel 2, low byte then high byte, mode 0 (interrupt on terminal
        // count: OUT goes high when the count reaches 0), binary.
        pit_command.write(0b1011_0000);
        let [low, high] = pit_counts.to_le_bytes();
        pit_channel2.write(low);
        timer.start_masked_countdown(Divide::By1, u32::MAX);
        pit_channel2.write(high);
        saved
    };
    // Counting starts with the high byte.
    let tsc_start = rdtsc();
    let apic_start = timer.current_count();
    // SAFETY: reading port 61H has no side effect; bit 5 is channel 2's OUT.
    while unsafe { port_61.read() } & 0x20 == 0 {
        core::hint::spin_loop();
    }
    let apic_end = timer.current_count();
    let tsc_end = rdtsc();
    timer.stop();
    // SAFETY: as above; restores the gate and speaker bits.
    unsafe { port_61.write(saved & 0x0F) };
    let pit_ns = u128::from(pit_counts) * 1_000_000_000 / u128::from(PIT_HZ);
    let per_second = |counts: u64| (u128::from(counts) * 1_000_000_000 / pit_ns.max(1)) as u64;
    let tsc_cycles = tsc_end.wrapping_sub(tsc_start);
    let calibration = Calibration {
        apic_hz: per_second(u64::from(apic_start.wrapping_sub(apic_end))),
        tsc_hz: per_second(tsc_cycles),
    };
    (calibration, tsc_cycles)
}

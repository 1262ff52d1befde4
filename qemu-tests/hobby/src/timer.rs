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

//!
//! # What KVM gives on the project machine
//!
//! Measured 2026-11-26 with `PMU_QEMU_ACCEL=kvm` (`-enable-kvm -cpu host`)
//! on the project machine, whose nested KVM (`kvm_pvm`) emulates its
//! guest: about 0.6 µs per instruction, and 50-150 µs for each RDTSC,
//! CPUID, CLI, STI, PUSHF, APIC register or port access.
//!
//! * **APIC timer rate: 1 GHz**, as under TCG (KVM's in-kernel APIC), and
//!   the TSC the host's (2.6 GHz).
//! * **Achievable interval.** A self-IPI takes about 1.2 ms from the write
//!   that sends it to the end of its handler. With the guest halting
//!   between ticks, 800 µs to 1 ms ticks come on time; with the guest
//!   spinning (a workload), periods under 2 ms are not kept up with: the
//!   ticks pile up and are taken wherever the hypervisor next delivers an
//!   interrupt, so the interrupted RIPs stop being samples of where the
//!   time went (a profile at 100 µs gave `work_4x` 74 % of the samples
//!   for 57 % of the time); at 2 ms spinning, 75 % of the expirations came,
//!   at 4 ms 99 %, at 8 ms all, within 25 % of the period.
//! * So a case picks its period with [`kept_up_period`]: the shortest the
//!   platform keeps up with for the case's handler and load, which is the
//!   nominal one under TCG.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

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

    /// Starts a one-shot countdown: `vector` is raised once, `initial_count`
    /// counts of the APIC clock divided by `divide` from now (LVT timer mode
    /// 00b). Writing the initial count (last) starts it.
    pub fn start_one_shot(&mut self, vector: Vector, divide: Divide, initial_count: u32) {
        self.write(reg::INITIAL_COUNT, 0);
        self.write(reg::DIVIDE_CONFIG, divide.bits());
        self.write(reg::LVT_TIMER, u32::from(vector.get()));
        self.write(reg::INITIAL_COUNT, initial_count);
    }

    /// Starts the next one-shot countdown of `initial_count` counts on the
    /// vector and divide that [`ApicTimer::start_one_shot`] programmed: only
    /// the initial-count register is written (a write to it starts the
    /// count, SDM Vol. 3A 11.5.4; the LVT timer entry and the divide
    /// configuration keep their values). One register access instead of
    /// four: under a hypervisor each is a VM exit (about 90 µs on the
    /// project machine's nested KVM), and a tick re-armed from its handler
    /// pays it on every tick.
    pub fn restart_one_shot(&mut self, initial_count: u32) {
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

pub use crate::tsc::rdtsc;

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

/// Tick lengths drawn at random around a mean, for profiles taken on
/// timer ticks: each count is the mean times a factor uniform in [1/2,
/// 3/2), from a xorshift64 generator (deterministic from its seed, so a
/// kernel under `-icount` stays deterministic).
///
/// Ticks at a fixed period sample the workload at a fixed period; where
/// that period keeps a steady ratio to the workload's own (a round of the
/// profiler's workload takes about 150 µs under TCG; a tick, its handler
/// costing the same every time, a steady 200 µs or so), samples fall on the
/// same few phases of it and the shares are off by more than their noise
/// (seen: 5 standard errors, twice in 50 warm runs of the
/// architectural-PMU profiler, and in the `timer` kernel's profile under
/// KVM). Jittered, each tick lands at an independent phase; the mean, and
/// any clock that follows the TSC, are unchanged. A one-shot timer
/// re-armed from the handler with [`Jitter::count`] gives such ticks.
#[derive(Debug)]
pub struct Jitter(AtomicU64);

impl Jitter {
    /// A generator from `seed` (any value but 0).
    pub const fn new(seed: u64) -> Jitter {
        Jitter(AtomicU64::new(if seed == 0 { 1 } else { seed }))
    }

    /// The next count around `mean`: `mean` times a factor uniform in
    /// [1/2, 3/2), at least 1. One caller at a time (a CPU's tick handler,
    /// or its main code with ticks stopped).
    pub fn count(&self, mean: u32) -> u32 {
        let mut x = self.0.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0.store(x, Ordering::Relaxed);
        let mean = u64::from(mean);
        // mean/2 + mean * u, u = the high 32 bits / 2^32 in [0, 1).
        let count = mean / 2 + ((u128::from(mean) * u128::from(x >> 32)) >> 32) as u64;
        count.clamp(1, u64::from(u32::MAX)) as u32
    }
}

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
    measure(Some(timer), pit_counts).calibration
}

/// [`calibrate`] `tries` times (at least once), keeping the one that took
/// the fewest TSC cycles (a delay in noticing the PIT's output only ever
/// lengthens the interval); under KVM a measurement during which the host
/// descheduled this CPU ([`crate::steal`]) is taken again, up to 8 times
/// as many in all.
pub fn calibrate_best_of(timer: &mut ApicTimer, pit_counts: u16, tries: u32) -> Calibration {
    best_of(tries, || measure(Some(&mut *timer), pit_counts))
}

/// The TSC's rate in Hz, measured once against the PIT (the best of two
/// 5 ms measurements, as [`calibrate_best_of`], without touching the APIC
/// timer) and kept.
pub fn tsc_hz() -> u64 {
    static TSC_HZ: spin::Once<u64> = spin::Once::new();
    *TSC_HZ.call_once(|| best_of(2, || measure(None, 5_966)).tsc_hz)
}

/// How many measurements [`best_of`] takes at most, per one it keeps.
const TRIES_PER_KEPT: u32 = 8;

/// The best of `tries` measurements (at least one): a delay in noticing
/// the PIT's output only ever lengthens the interval, so the one that took
/// the fewest TSC cycles. Under KVM a measurement during which the host
/// descheduled this CPU (its steal time grew, [`crate::steal`]) is taken
/// again, up to [`TRIES_PER_KEPT`] times as many: the host may have kept
/// the CPU away just as the PIT's output rose, and the delay then counts in
/// both rates, whichever measurement is the shortest.
fn best_of(tries: u32, mut measure: impl FnMut() -> Measurement) -> Calibration {
    crate::steal::enable();
    let tries = tries.max(1);
    let mut best = measure();
    let mut kept = u32::from(!best.disturbed);
    for _ in 1..tries * TRIES_PER_KEPT {
        if kept >= tries {
            break;
        }
        let next = measure();
        kept += u32::from(!next.disturbed);
        if (next.disturbed, next.tsc_cycles) < (best.disturbed, best.tsc_cycles) {
            best = next;
        }
    }
    best.calibration
}

/// One PIT measurement.
struct Measurement {
    /// The rates (the APIC timer's 0 without a timer).
    calibration: Calibration,
    /// The TSC cycles it took.
    tsc_cycles: u64,
    /// Whether the hypervisor descheduled this CPU meanwhile (its steal
    /// time grew).
    disturbed: bool,
}

/// One PIT measurement of `pit_counts` counts, of the TSC and, with
/// `timer`, the APIC timer.
fn measure(mut timer: Option<&mut ApicTimer>, pit_counts: u16) -> Measurement {
    let stolen = crate::steal::stolen_ns();
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
        if let Some(timer) = timer.as_deref_mut() {
            timer.start_masked_countdown(Divide::By1, u32::MAX);
        }
        pit_channel2.write(high);
        saved
    };
    // Counting starts with the high byte.
    let tsc_start = rdtsc();
    let apic_start = timer.as_deref().map_or(0, ApicTimer::current_count);
    // SAFETY: reading port 61H has no side effect; bit 5 is channel 2's OUT.
    while unsafe { port_61.read() } & 0x20 == 0 {
        core::hint::spin_loop();
    }
    let apic_end = timer.as_deref().map_or(0, ApicTimer::current_count);
    let tsc_end = rdtsc();
    if let Some(timer) = timer {
        timer.stop();
    }
    // SAFETY: as above; restores the gate and speaker bits.
    unsafe { port_61.write(saved & 0x0F) };
    let pit_ns = u128::from(pit_counts) * 1_000_000_000 / u128::from(PIT_HZ);
    let per_second = |counts: u64| (u128::from(counts) * 1_000_000_000 / pit_ns.max(1)) as u64;
    let tsc_cycles = tsc_end.wrapping_sub(tsc_start);
    let calibration = Calibration {
        apic_hz: per_second(u64::from(apic_start.wrapping_sub(apic_end))),
        tsc_hz: per_second(tsc_cycles),
    };
    Measurement {
        calibration,
        tsc_cycles,
        disturbed: crate::steal::stolen_ns() != stolen,
    }
}

/// What the code interrupted by a [`burst`] of ticks does between them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Load {
    /// Spins in register-only code (as a workload does), reading the TSC
    /// only every few thousand instructions.
    Spin,
    /// Halts until the next interrupt.
    Halt,
}

/// What a burst of periodic ticks at one period showed ([`burst`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TickBurst {
    /// The period, in ns.
    pub period_ns: u64,
    /// Ticks delivered.
    pub ticks: u64,
    /// Whole periods that passed while the timer ran.
    pub periods: u64,
    /// Ticks whose TSC delta since the previous one (or the start) was
    /// within 25 % of the period.
    pub on_time: u64,
    /// The share of the CPU (percent) the ticks took from spinning code
    /// ([`Load::Spin`]; 0 for [`Load::Halt`]).
    pub overhead_percent: u64,
}

impl TickBurst {
    /// Whether the platform keeps up with this period: at least 80 % of the
    /// expirations delivered, at least half of them on time, the handler
    /// taking at most `max_overhead_percent` of the CPU.
    pub fn kept_up(&self, max_overhead_percent: u64) -> bool {
        self.ticks * 5 >= self.periods * 4
            && self.on_time * 2 >= self.ticks
            && self.overhead_percent <= max_overhead_percent
    }
}

impl core::fmt::Display for TickBurst {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{} us: {} ticks in {} periods, {} on time, handler {} % of the CPU",
            self.period_ns / 1000,
            self.ticks,
            self.periods,
            self.on_time,
            self.overhead_percent
        )
    }
}

/// Periods a [`burst`] lasts, at least (and at least [`BURST_NS`]).
pub const BURST_PERIODS: u64 = 40;
/// How long a [`burst`] lasts at least, in ns: long enough that one stall
/// of a busy host (a few milliseconds) does not decide it.
pub const BURST_NS: u64 = 20_000_000;

/// The handler a [`burst`] runs inside its own, and its bookkeeping.
static BURST_HANDLER: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());
static BURST_TICKS: AtomicU64 = AtomicU64::new(0);
static BURST_ON_TIME: AtomicU64 = AtomicU64::new(0);
static BURST_PERIOD: AtomicU64 = AtomicU64::new(0);
static BURST_CLOCK: TickClock = TickClock::new();

/// The tick of a [`burst`]: counts it, and whether it came on time, then
/// runs the caller's handler (which signals EOI).
fn burst_tick(frame: &crate::idt::InterruptFrame) {
    let delta = BURST_CLOCK.tick();
    let period = BURST_PERIOD.load(Ordering::Relaxed);
    BURST_TICKS.fetch_add(1, Ordering::Relaxed);
    if delta.abs_diff(period) <= period / 4 {
        BURST_ON_TIME.fetch_add(1, Ordering::Relaxed);
    }
    let handler = BURST_HANDLER.load(Ordering::Acquire);
    if !handler.is_null() {
        // SAFETY: `burst` stores only a `crate::idt::Handler` there (as
        // `idt::set_handler` does), and clears the slot only after
        // stopping the timer and taking any tick still pending.
        let handler = unsafe { core::mem::transmute::<*mut (), crate::idt::Handler>(handler) };
        handler(frame);
    }
}

/// Spins in register-only code for about `cycles` TSC cycles (the TSC read
/// every 4096 iterations); returns the iterations run.
fn spin_for(cycles: u64) -> u64 {
    let start = rdtsc();
    let mut iterations = 0u64;
    while rdtsc().wrapping_sub(start) < cycles {
        // SAFETY: a register-only loop.
        unsafe {
            core::arch::asm!(
                "2:",
                "dec {n:e}",
                "jnz 2b",
                n = inout(reg) 4096u32 => _,
                options(nomem, nostack),
            );
        }
        iterations += 4096;
    }
    iterations
}

/// Runs the periodic timer at `period_ns` on `vector` for
/// [`BURST_PERIODS`] periods (at least [`BURST_NS`]) into `handler` (which
/// must signal EOI, and may do whatever a case's tick does), the
/// interrupted code doing `load`; says how the platform kept up
/// ([`TickBurst`]). For [`Load::Spin`] a spin of [`BURST_NS`] without
/// ticks first measures what the ticks take. Call it with interrupts disabled and the APIC software-enabled;
/// it leaves them disabled, the timer stopped and no tick pending, and
/// the vector's IDT handler set to `handler`.
pub fn burst(
    cal: &Calibration,
    vector: Vector,
    handler: crate::idt::Handler,
    period_ns: u64,
    load: Load,
) -> TickBurst {
    let quiet = quiet_spin(cal, load);
    burst_against(cal, vector, handler, period_ns, load, quiet)
}

/// For [`Load::Spin`]: the iterations a spin of [`BURST_NS`] without ticks
/// runs, and the TSC cycles it lasts (what a burst's spin is compared with).
fn quiet_spin(cal: &Calibration, load: Load) -> (u64, u64) {
    x86_64::instructions::interrupts::disable();
    match load {
        Load::Spin => {
            let length = cal.tsc_cycles(BURST_NS);
            (spin_for(length), length)
        }
        Load::Halt => (0, 0),
    }
}

/// [`burst`], its spin compared with `quiet` ([`quiet_spin`]).
fn burst_against(
    cal: &Calibration,
    vector: Vector,
    handler: crate::idt::Handler,
    period_ns: u64,
    load: Load,
    (quiet, quiet_cycles): (u64, u64),
) -> TickBurst {
    let length = cal.tsc_cycles((period_ns * BURST_PERIODS).max(BURST_NS));
    x86_64::instructions::interrupts::disable();
    BURST_HANDLER.store(handler as *mut (), Ordering::Release);
    BURST_TICKS.store(0, Ordering::SeqCst);
    BURST_ON_TIME.store(0, Ordering::SeqCst);
    BURST_PERIOD.store(cal.tsc_cycles(period_ns), Ordering::SeqCst);
    crate::idt::set_handler(vector.get(), burst_tick);
    // SAFETY: the default xAPIC page, identity-mapped; the caller leaves
    // the timer to this function for the burst.
    let mut timer = unsafe { ApicTimer::at_default_base() };
    let start = BURST_CLOCK.start();
    timer.start_periodic(vector, Divide::By1, cal.count_for(period_ns, Divide::By1));
    let ticking = match load {
        Load::Spin => {
            x86_64::instructions::interrupts::enable();
            let n = spin_for(length);
            x86_64::instructions::interrupts::disable();
            n
        }
        Load::Halt => {
            while rdtsc().wrapping_sub(start) < length {
                x86_64::instructions::interrupts::enable_and_hlt();
                x86_64::instructions::interrupts::disable();
            }
            0
        }
    };
    let end = rdtsc();
    timer.stop();
    crate::pmi::wait_until_taken(vector.get());
    crate::idt::set_handler(vector.get(), handler);
    BURST_HANDLER.store(core::ptr::null_mut(), Ordering::Release);
    let overhead_percent = match load {
        Load::Spin => {
            // What the spin would have run without ticks in its time.
            let quiet = (u128::from(quiet) * u128::from(end.wrapping_sub(start))
                / u128::from(quiet_cycles.max(1))) as u64;
            100 - ticking.min(quiet) * 100 / quiet.max(1)
        }
        Load::Halt => 0,
    };
    TickBurst {
        period_ns,
        ticks: BURST_TICKS.load(Ordering::SeqCst),
        periods: end.wrapping_sub(start) / cal.tsc_cycles(period_ns).max(1),
        on_time: BURST_ON_TIME.load(Ordering::SeqCst),
        overhead_percent,
    }
}

/// The shortest period the platform keeps up with ([`TickBurst::kept_up`]
/// with `max_overhead_percent`), trying `shortest_ns` and longer ones up
/// to `longest_ns`, with [`burst`]s of `handler` under `load`: on TCG the
/// shortest (a tick costs microseconds), under a hypervisor whose
/// interrupts and exits are slow a longer one. A burst whose ticks took
/// more than their share of the CPU says what a tick costs, and the next
/// period tried is long enough for that, an eighth to spare, rounded up
/// to a multiple of `shortest_ns` (a doubling would overshoot by up to
/// twice, and a case's run lasts as many ticks whatever their length);
/// one that failed otherwise (ticks late or lost) doubles. Returns the burst that chose the period
/// (the last tried if none kept up). As [`burst`]: it runs `handler`,
/// which must tolerate ticks before the case's own.
pub fn kept_up_period(
    cal: &Calibration,
    vector: Vector,
    handler: crate::idt::Handler,
    (shortest_ns, longest_ns): (u64, u64),
    load: Load,
    max_overhead_percent: u64,
) -> TickBurst {
    let mut period = shortest_ns.max(1);
    let quiet = quiet_spin(cal, load);
    loop {
        let seen = burst_against(cal, vector, handler, period, load, quiet);
        if seen.kept_up(max_overhead_percent) || period >= longest_ns {
            return seen;
        }
        // What one tick costs: its share of the CPU times the period, or,
        // where the ticks took it all, the time per tick delivered.
        let cost = if seen.overhead_percent < 100 {
            period * seen.overhead_percent / 100
        } else {
            period * seen.periods / seen.ticks.max(1)
        };
        // Long enough for that cost, with an eighth to spare, in whole
        // multiples of the shortest; where the cost says nothing (ticks
        // late or missing, not too costly) twice the period.
        let enough = cost * 100 / max_overhead_percent.max(1);
        let enough = (enough + enough / 8).div_ceil(shortest_ns.max(1)) * shortest_ns.max(1);
        period = if enough > period { enough } else { period * 2 }.min(longest_ns);
    }
}

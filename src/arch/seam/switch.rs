//! The one save/restore core of a context switch: a kernel's task switch
//! (`crate::task`) moves a context's counters through it, and a
//! [`Quiesce::First`] stops every counter first, as a world switch would.
//! The architectural PMU's pass-through world switch
//! (`ArchPerfDriver::enter_guest`) does not go through it: its start step
//! writes the global enable in host mode, where a VM entry leaves the
//! guest's start to the VMCS (the hypervisor guide says why).
//!
//! A driver sets counters aside for contexts (a [`Bank`]); a context is
//! what runs on them, as [`Slot`]s: a bank position, the counter's images
//! (what a claimed handle of it would hold, as this CPU runs it) and the
//! value it starts from. [`switch_bank`] saves the context on the bank and
//! loads the next: stop what must stop, save what ran (disarmed for the
//! PMI handler first), write the controls that change, the values, start
//! what must start; [`arm_bank`] then arms the sampling counters for the
//! handler. Each architecture's driver supplies the register steps
//! ([`Switch`]): one global enable (`IA32_PERF_GLOBAL_CTRL`,
//! `PerfCntrGlobalCtl`) or each counter's own (NetBurst's CCCR, Itanium's
//! `plm`, AMD before PerfMonV2, architectural perfmon version 1).
//!
//! The steps, their register traffic and what a switch does with the
//! overflows it finds: [`switch_bank`]'s documentation.

use crate::counter::{self, Arch};
use crate::sampling::SampleAfter;
use crate::sealed::{TOKEN, Token};

/// How a switch stops the counters of the bank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Quiesce {
    /// A task switch: a counter that runs in both contexts runs on (see
    /// the module documentation); only the counters that stop are stopped.
    Lazy,
    /// A world switch: every counter of the bank stopped first, the
    /// incoming context's started last.
    First,
}

/// Bank positions (bit `i`: position `i`; at most 32).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Positions(u32);

crate::register::set_operations!(Positions, "position");

impl Positions {
    /// No position.
    pub const EMPTY: Positions = Positions(0);
    /// The most positions a bank has.
    pub const MAX: usize = 32;

    /// This set plus position `i` (unchanged for `i` of 32 or more).
    pub const fn with(self, i: usize) -> Positions {
        if i < Self::MAX {
            Positions(self.0 | 1 << i)
        } else {
            self
        }
    }

    /// This set without position `i`.
    pub const fn without(self, i: usize) -> Positions {
        if i < Self::MAX {
            Positions(self.0 & !(1 << i))
        } else {
            self
        }
    }

    /// Whether position `i` is in the set.
    pub const fn contains(self, i: usize) -> bool {
        i < Self::MAX && self.0 & 1 << i != 0
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// How many positions.
    pub const fn len(self) -> u32 {
        self.0.count_ones()
    }

    /// The positions, lowest first.
    pub fn iter(self) -> impl Iterator<Item = usize> {
        let mut rest = self.0;
        core::iter::from_fn(move || {
            if rest == 0 {
                return None;
            }
            let i = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            Some(i)
        })
    }
}

/// One counter of a context, as the core loads it.
pub struct Slot<A: Arch> {
    /// Its position in the bank.
    pub at: u8,
    /// Its images: what a claimed handle of the counter would hold, as
    /// this CPU runs the context's event ([`Switch::ctx_images`]).
    pub images: A::Programmed,
    /// The value it starts from: a sampling counter's is before its
    /// overflow ([`SampleAfter::at_residual`]).
    pub value: u64,
}

impl<A: Arch> Clone for Slot<A> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<A: Arch> Copy for Slot<A> {}

impl<A: Arch> PartialEq for Slot<A> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.images, self.value) == (other.at, other.images, other.value)
    }
}

impl<A: Arch> Eq for Slot<A> {}

impl<A: Arch> core::fmt::Debug for Slot<A> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Slot")
            .field("at", &self.at)
            .field("images", &self.images)
            .field("value", &self.value)
            .finish()
    }
}

/// What the core found of a counter it saved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Saved {
    /// The raw value it held when read.
    pub raw: u64,
    /// The sample-after periods the PMI handler serviced since it was
    /// loaded.
    pub serviced: u64,
    /// The periods it was past its last service when read, whose PMI had
    /// not been serviced: the outgoing context's (module documentation).
    pub owed: u64,
}

/// Why the core refused a switch: a slot naming no position of the bank
/// (nothing was touched), or a register access the backend refused (only
/// a model refuses; the bank is then as far as the switch got).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum BankError<E> {
    /// A slot names position `at`, which the bank does not have, or names
    /// a position twice.
    NoSuchPosition {
        /// The position.
        at: u8,
    },
    /// The driver refused a register access or an image.
    Driver(E),
}

impl<E: core::fmt::Debug> core::fmt::Display for BankError<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            BankError::NoSuchPosition { at } => {
                write!(f, "no bank position {at} (or named twice)")
            }
            BankError::Driver(e) => write!(f, "driver: {e:?}"),
        }
    }
}

impl<E: core::fmt::Debug> core::error::Error for BankError<E> {}

/// The counters a driver set aside for contexts, up to `K` of them
/// (`K <= 32`), and what their registers hold: each position's images as
/// last written, and which positions run. Made empty; positions are added
/// by whoever reserved the counters from the driver ([`Switch::ctx_reserve`]).
pub struct Bank<A: Arch, const K: usize> {
    counters: [u8; K],
    len: u8,
    images: [A::Programmed; K],
    running: Positions,
}

impl<A: Arch, const K: usize> core::fmt::Debug for Bank<A, K> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Bank")
            .field("counters", &self.counters())
            .field("running", &self.running)
            .finish_non_exhaustive()
    }
}

impl<A: Arch, const K: usize> Default for Bank<A, K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<A: Arch, const K: usize> Bank<A, K> {
    /// No position.
    pub const fn new() -> Self {
        const { assert!(K > 0 && K <= Positions::MAX, "a bank has 1 to 32 positions") };
        Bank {
            counters: [0; K],
            len: 0,
            images: [A::UNPROGRAMMED; K],
            running: Positions::EMPTY,
        }
    }

    /// Adds counter `n`, reserved from the driver, whose registers hold
    /// the unprogrammed images (an unclaimed counter's): its position, or
    /// `None` if the bank is full.
    pub(crate) fn push(&mut self, n: u8) -> Option<u8> {
        let at = self.len;
        let slot = self.counters.get_mut(usize::from(at))?;
        if usize::from(at) >= Positions::MAX {
            return None;
        }
        *slot = n;
        self.len += 1;
        Some(at)
    }

    /// The counters, by position.
    pub fn counters(&self) -> &[u8] {
        self.counters.get(..usize::from(self.len)).unwrap_or(&[])
    }

    /// The counter at position `at`.
    pub fn counter(&self, at: u8) -> Option<u8> {
        self.counters().get(usize::from(at)).copied()
    }

    /// The images position `at`'s registers hold.
    pub fn images(&self, at: u8) -> Option<&A::Programmed> {
        self.counters().get(usize::from(at))?;
        self.images.get(usize::from(at))
    }

    /// The positions whose counters run.
    pub const fn running(&self) -> Positions {
        self.running
    }
}

/// What a driver does for the switch core: the register steps of
/// [`switch_bank`], and the images of a context's event on a counter set
/// aside. Sealed; the steps take the crate's token, so only the core calls
/// them. Every architecture's driver implements it.
pub trait Switch<A: Arch>: counter::Driver<A> {
    /// Counter `n` set aside for contexts: claimed from this driver (so no
    /// handle can configure it and the driver's end releases it), its
    /// registers holding the unprogrammed images. No register access: an
    /// unclaimed counter's control is clear. Refused like a configuration
    /// of a counter that is not free.
    #[doc(hidden)]
    fn ctx_reserve(&mut self, _: Token, n: u8) -> Result<(), Self::Error>;
    /// Counter `n` given back: stopped if it runs, its registers zeroed as
    /// a release zeroes them (its images are `images`), unclaimed.
    #[doc(hidden)]
    fn ctx_unreserve(
        &mut self,
        _: Token,
        n: u8,
        images: &A::Programmed,
        running: bool,
    ) -> Result<(), Self::Error>;
    /// The images of `config` on counter `n` set aside, as this CPU runs
    /// it, checked as a configuration is (but for the counter being set
    /// aside); no register access. Refused for what a context cannot
    /// carry (PEBS, tagging, EARs: their state is not the counter's).
    fn ctx_images(&self, n: u8, config: &Self::Config) -> Result<A::Programmed, Self::Error>;
    /// What images depend on besides the event, here: two CPUs of one
    /// key run the same images (the architecture's CPU type, a hybrid
    /// core type, NetBurst's logical processor).
    fn ctx_key(&self) -> u64;
    /// The sample-after value in `images`, for a sampling counter.
    fn ctx_sampling(images: &A::Programmed) -> Option<SampleAfter>;
    /// Whether two counters of one context cannot run `a` and `b` at once
    /// although each fits its counter (NetBurst: the same ESCR). The
    /// default: never.
    fn ctx_conflict(a: &A::Programmed, b: &A::Programmed) -> bool {
        let _ = (a, b);
        false
    }
    /// Whether counters start and stop through one global enable (then
    /// [`Switch::ctx_stop`] and [`Switch::ctx_start`] only mark, and
    /// [`Switch::ctx_flush`] writes it), or each through its control.
    #[doc(hidden)]
    fn ctx_global(&self) -> bool;
    /// Counter `n` (running with `images`) is no longer serviced by the
    /// PMI handler: memory only.
    #[doc(hidden)]
    fn ctx_disarm(&mut self, _: Token, n: u8, images: &A::Programmed);
    /// Stop counter `n`: its enable cleared (global: marked).
    #[doc(hidden)]
    fn ctx_stop(&mut self, _: Token, n: u8, images: &A::Programmed) -> Result<(), Self::Error>;
    /// Read counter `n` (disarmed) and account an unserviced overflow.
    #[doc(hidden)]
    fn ctx_save(&mut self, _: Token, n: u8, images: &A::Programmed) -> Result<Saved, Self::Error>;
    /// What a running counter `n` holds, as [`Switch::ctx_save`] would find
    /// it, without acknowledging or withdrawing anything: a read of a
    /// context that runs.
    #[doc(hidden)]
    fn ctx_peek(&mut self, _: Token, n: u8, images: &A::Programmed) -> Result<Saved, Self::Error>;
    /// Write counter `n`'s controls for `images` (per-counter enable: with
    /// the enable, so this starts it; a shared control register: marked).
    #[doc(hidden)]
    fn ctx_control(&mut self, _: Token, n: u8, images: &A::Programmed) -> Result<(), Self::Error>;
    /// Write counter `n`'s value and set the PMI handler's constants for
    /// `images` (not armed).
    #[doc(hidden)]
    fn ctx_load(
        &mut self,
        _: Token,
        n: u8,
        images: &A::Programmed,
        value: u64,
    ) -> Result<(), Self::Error>;
    /// Start counter `n` (global: marked; per-counter: nothing, its
    /// control write started it).
    #[doc(hidden)]
    fn ctx_start(&mut self, _: Token, n: u8, images: &A::Programmed);
    /// Write what the marks changed (a shared control register, the
    /// global enable); nothing if nothing changed.
    #[doc(hidden)]
    fn ctx_flush(&mut self, _: Token) -> Result<(), Self::Error>;
    /// Arm counter `n` for the PMI handler if `images` sample: memory only.
    #[doc(hidden)]
    fn ctx_arm(&mut self, _: Token, n: u8, images: &A::Programmed);
}

/// Every running position of `bank` saved into `saved` (by position) and
/// the slots `into` loaded, as [`Quiesce`] says; the steps and their
/// traffic are below. The incoming counters are not armed yet: [`arm_bank`] arms them (so a caller can
/// publish what the PMIs of the incoming context belong to in between).
/// Refused before any access if a slot names a position the bank lacks
/// or names one twice.
///
/// # Register traffic
///
/// For `p` counters the outgoing context ran and `n` the incoming one
/// runs, asserted exactly in the tests of each architecture (a counter is
/// *reused* when it runs in both; *changed* when its images differ):
///
/// | step | global enable | per-counter enable |
/// |---|---|---|
/// | stop | 1 write if a counter stops (not reused) | 1 control write per counter that stops |
/// | save | `p` reads (+1 write per counter found past its overflow: its status acknowledged) | `p` reads |
/// | controls | 1 write per changed counter (fixed counters: 1 `IA32_FIXED_CTR_CTRL` write) | 1 per changed reused counter, 1 per counter that starts (its control with the enable) |
/// | values | `n` writes | `n` writes |
/// | start | 1 write if a counter starts | (the control writes) |
///
/// so at most `2 (p + n) + 3` accesses (NetBurst's control is two
/// registers, its ESCR and CCCR: there a counter that starts costs 3), 0
/// when neither context runs a counter, and between two contexts with the
/// same counters and images (the same event set) only the `2p` counter
/// values: `p` reads, `p` writes, no control and no enable written.
///
/// # Lazy and first: two ways to stop
///
/// [`Quiesce::Lazy`], the task switch: a counter that runs in both
/// contexts is not stopped. It is read, its control rewritten if the
/// images change, and its value written: the events it counts between its
/// read and its value write belong to neither context (they are the
/// switch's own, as they would be between a stop and a start), and none
/// is counted for the wrong one, because the control is written before the
/// value. A counter that stops is stopped before it is read, so its saved
/// value is final. [`Quiesce::First`], the world switch: every counter of
/// the bank is stopped first and the incoming ones started last, so
/// nothing of one context counts while the other's registers are loaded
/// (the isolation a guest needs).
///
/// # Overflows across the switch
///
/// A sampling counter is disarmed before it is read, so the PMI handler
/// (an NMI at any instruction of the switch) no longer services it; the
/// periods the handler serviced since it was loaded are in [`Saved`], and
/// an overflow the read finds unserviced (its PMI pending, or not yet
/// raised) is [`Saved::owed`]: its periods belong to the outgoing context,
/// which the switch's caller delivers them to. Each architecture withdraws
/// or owes that PMI as its halt does (the status bit acknowledged on the
/// architectural PMU and PerfMonV2, a late PMI owed on AMD, the overflow
/// bit withdrawn from PMC0 on Itanium, NetBurst's CCCR rewritten without
/// `OVF`), so the PMI that arrives after the switch finds nothing of the
/// incoming context's: it finds that context's counters before their
/// overflow, where a stale status bit is no period ([`crate::sampling::Rearm`]).
pub fn switch_bank<A: Arch, D: Switch<A>, const K: usize>(
    d: &mut D,
    bank: &mut Bank<A, K>,
    saved: &mut [Saved; K],
    into: &[Slot<A>],
    quiesce: Quiesce,
) -> Result<(), BankError<D::Error>> {
    let mut target = Positions::EMPTY;
    for s in into {
        if bank.counter(s.at).is_none() || target.contains(usize::from(s.at)) {
            return Err(BankError::NoSuchPosition { at: s.at });
        }
        target = target.with(usize::from(s.at));
    }
    let global = d.ctx_global();
    let before = bank.running;
    let counter = |at: usize| bank.counters.get(at).copied().unwrap_or(0);
    for at in before.iter() {
        d.ctx_disarm(TOKEN, counter(at), &bank.images[at % K]);
    }
    let stop = match quiesce {
        Quiesce::Lazy => before.difference(target),
        Quiesce::First => before,
    };
    for at in stop.iter() {
        d.ctx_stop(TOKEN, counter(at), &bank.images[at % K])
            .map_err(BankError::Driver)?;
    }
    if !stop.is_empty() {
        d.ctx_flush(TOKEN).map_err(BankError::Driver)?;
    }
    let running = before.difference(stop);
    bank.running = running;
    for at in before.iter() {
        let n = counter(at);
        saved[at % K] = d
            .ctx_save(TOKEN, n, &bank.images[at % K])
            .map_err(BankError::Driver)?;
    }
    // Controls first: a running counter counts the new event on its old
    // value until the value write (no event of one context is counted for
    // the other); on a global enable, a counter that starts counts nothing
    // before the start.
    for s in into {
        let at = usize::from(s.at);
        let on = running.contains(at);
        if (on || global) && bank.images[at % K] != s.images {
            d.ctx_control(TOKEN, counter(at), &s.images)
                .map_err(BankError::Driver)?;
            bank.images[at % K] = s.images;
        }
    }
    d.ctx_flush(TOKEN).map_err(BankError::Driver)?;
    for s in into {
        d.ctx_load(TOKEN, counter(usize::from(s.at)), &s.images, s.value)
            .map_err(BankError::Driver)?;
    }
    for s in into {
        let at = usize::from(s.at);
        if running.contains(at) {
            continue;
        }
        if global {
            d.ctx_start(TOKEN, counter(at), &s.images);
        } else {
            // Its control with the enable: the start, after its value.
            d.ctx_control(TOKEN, counter(at), &s.images)
                .map_err(BankError::Driver)?;
            bank.images[at % K] = s.images;
        }
    }
    d.ctx_flush(TOKEN).map_err(BankError::Driver)?;
    bank.running = target;
    Ok(())
}

/// Arms every running position's sampling counter for the PMI handler
/// (memory only): the end of a switch ([`switch_bank`]).
pub fn arm_bank<A: Arch, D: Switch<A>, const K: usize>(d: &mut D, bank: &Bank<A, K>) {
    for at in bank.running.iter() {
        if let (Some(n), Some(images)) = (bank.counters.get(at), bank.images.get(at)) {
            d.ctx_arm(TOKEN, *n, images);
        }
    }
}

/// What a counter read without side effects holds ([`Switch::ctx_peek`]):
/// `raw`, the periods `serviced` by the handler, and for a sampling
/// counter (every `sampling`) the periods it is past its last service.
pub fn peeked(raw: u64, sampling: Option<SampleAfter>, serviced: u64) -> Saved {
    match sampling {
        Some(s) => Saved {
            raw,
            serviced,
            owed: s.split(raw).0,
        },
        None => Saved {
            raw,
            ..Saved::default()
        },
    }
}

/// Sets counter `n` aside from `d` and adds it to `bank`: its position.
pub(crate) fn reserve<A: Arch, D: Switch<A>, const K: usize>(
    d: &mut D,
    bank: &mut Bank<A, K>,
    n: u8,
) -> Result<Option<u8>, D::Error> {
    if usize::from(bank.len) >= K.min(Positions::MAX) {
        return Ok(None);
    }
    d.ctx_reserve(TOKEN, n)?;
    Ok(bank.push(n))
}

/// Gives every counter of `bank` back to `d` (stopped, zeroed, unclaimed)
/// and empties it. Nothing may be loaded: the caller saved it first.
pub(crate) fn release_all<A: Arch, D: Switch<A>, const K: usize>(
    d: &mut D,
    bank: &mut Bank<A, K>,
) -> Result<(), D::Error> {
    while bank.len > 0 {
        let at = usize::from(bank.len - 1);
        let n = bank.counters.get(at).copied().unwrap_or(0);
        d.ctx_unreserve(TOKEN, n, &bank.images[at % K], bank.running.contains(at))?;
        bank.running = bank.running.without(at);
        bank.images[at % K] = A::UNPROGRAMMED;
        bank.len -= 1;
    }
    Ok(())
}

//! A NetBurst PMU model shared by a kernel's main code and its interrupt
//! handlers, on one CPU or on the two CPUs of an SMP kernel that play its
//! two logical processors (x86-64 kernels: the lock disables interrupts
//! with `CLI`, so this is for ring 0, not for host programs).
//!
//! [`SharedNetBurstModel`] is a `static`-friendly lock around
//! [`NetBurstModel`]. Every access ([`SharedNetBurstModel::with`], and each MSR
//! access through a [`NetBurstMsr`] handle) disables interrupts for as long as
//! it holds the lock and then restores RFLAGS.IF as it was, so an interrupt
//! handler that takes the lock can never find it held by the main code it
//! interrupted on the same CPU. The lock remembers which CPU holds it (its
//! initial APIC ID, CPUID.01H:EBX\[31:24\]): held by another CPU, an access
//! spins until it is free; held by the same CPU it can only be re-entry (a
//! closure passed to [`SharedNetBurstModel::with`] using a [`NetBurstMsr`], or an NMI
//! handler interrupting a holder), which panics instead of spinning
//! forever. Do not use the model from an NMI handler (a PMI delivered as NMI
//! should only record and defer).
//!
//! [`NetBurstMsr`] is a `Copy` reference handle implementing
//! [`crate::access::MsrAccess`]: each access locks, forwards to the model (as
//! logical processor T0 or T1) and unlocks, so the same driver can be given
//! one as its MSR backend both in main code and in its PMI handler.
//!
//! [`inject_until_pmi`] (and [`SharedNetBurstModel::inject_until_pmi`]) is the tick
//! helper: it injects up to `n` occurrences of an event but stops right after
//! the one that raises a PMI, so that the caller can deliver that PMI (via
//! the kernel's PMI delivery, such as `hobby::pmi::deliver`) before any
//! further event counts, and carry the
//! rest over to its next tick.

use super::{Config, Event, Fault, LogicalProcessor, NetBurstModel, PmiLine};
use crate::access::MsrAccess;
use crate::model::lock::IrqLock;

/// A [`NetBurstModel`] behind a spin lock that is only ever held with
/// interrupts disabled. See the [module documentation](self).
#[derive(Debug)]
pub struct SharedNetBurstModel {
    config: Config,
    model: IrqLock<NetBurstModel>,
}

impl SharedNetBurstModel {
    /// A shared model in the reset state.
    pub const fn new(config: Config) -> Self {
        Self {
            config,
            model: IrqLock::new(NetBurstModel::new(config)),
        }
    }

    /// The model's configuration.
    pub const fn config(&self) -> &Config {
        &self.config
    }

    /// Runs `f` on the model with interrupts disabled and the lock held;
    /// restores RFLAGS.IF afterwards.
    ///
    /// Waits while another CPU holds the lock.
    ///
    /// # Panics
    ///
    /// If this CPU holds the lock already: with interrupts disabled that is
    /// re-entry (`f` using a [`NetBurstMsr`] of the same model, or an NMI
    /// handler), which would otherwise deadlock.
    pub fn with<R>(&self, f: impl FnOnce(&mut NetBurstModel) -> R) -> R {
        self.model.with(f)
    }

    /// Puts the model back in its reset state.
    pub fn reset(&self) {
        let config = self.config;
        self.with(|model| *model = NetBurstModel::new(config));
    }

    /// An MSR backend that accesses the model as logical processor T0.
    pub const fn msr(&self) -> NetBurstMsr<'_> {
        NetBurstMsr {
            shared: self,
            lp: LogicalProcessor::T0,
        }
    }

    /// An MSR backend that accesses the model as logical processor `lp`;
    /// `None` for T1 on a model without Hyper-Threading.
    pub const fn msr_as(&self, lp: LogicalProcessor) -> Option<NetBurstMsr<'_>> {
        if matches!(lp, LogicalProcessor::T1) && !self.config.hyper_threading {
            return None;
        }
        Some(NetBurstMsr { shared: self, lp })
    }

    /// The model as the driver sees it: `crate::detect::detect` run against
    /// the model's CPUID and IA32_MISC_ENABLE. `None` if detection does not
    /// find a usable NetBurst PMU (which would be a model or detection bug).
    pub fn detect(&self) -> Option<crate::detect::NetBurstCpu> {
        self.with(|model| {
            let cpuid = model.clone();
            crate::detect::detect(&cpuid, model).ok()?.usable_netburst()
        })
    }

    /// Takes the PMI line of `lp` (see [`NetBurstModel::take_pmi`]).
    pub fn take_pmi(&self, lp: LogicalProcessor) -> Option<PmiLine> {
        self.with(|model| model.take_pmi(lp))
    }

    /// Whether a PMI is pending on either logical processor.
    pub fn pmi_pending(&self) -> bool {
        self.with(|model| any_pmi_pending(model))
    }

    /// [`inject_until_pmi`] on the shared model, under one lock.
    pub fn inject_until_pmi(&self, event: Event) -> Injected {
        self.with(|model| inject_until_pmi(model, event))
    }

    /// [`inject_until_pmi`] for the CPU that plays `event`'s logical
    /// processor in an SMP kernel: it stops only at a PMI of that logical
    /// processor (the other CPU takes and delivers its own), under one
    /// lock. [`Injected::pmi_pending`] is about that logical processor.
    pub fn inject_until_own_pmi(&self, event: Event) -> Injected {
        self.with(|model| inject_until_pmi_of(model, event, Some(event.thread)))
    }
}

/// A [`crate::access::MsrAccess`] backend onto a [`SharedNetBurstModel`], as one logical
/// processor: every access locks the model (interrupts disabled), forwards
/// and unlocks. `Copy`, so main code and a handler can each hold one.
///
/// Do not use it inside [`SharedNetBurstModel::with`] on the same model: that is a
/// nested lock, which panics.
#[derive(Clone, Copy, Debug)]
pub struct NetBurstMsr<'a> {
    shared: &'a SharedNetBurstModel,
    lp: LogicalProcessor,
}

impl NetBurstMsr<'_> {
    /// The logical processor the accesses are made as.
    pub const fn logical_processor(&self) -> LogicalProcessor {
        self.lp
    }

    fn on_thread<R>(
        &self,
        f: impl FnOnce(&mut super::ThreadView<'_>) -> Result<R, Fault>,
    ) -> Result<R, Fault> {
        let lp = self.lp;
        self.shared.with(|model| {
            let Some(mut view) = model.thread(lp) else {
                // `msr_as` hands out T1 handles only with Hyper-Threading.
                unreachable!("no logical processor {lp:?} on this model")
            };
            f(&mut view)
        })
    }
}

impl MsrAccess for NetBurstMsr<'_> {
    type Error = Fault;

    fn read_msr(&mut self, msr: u32) -> Result<u64, Fault> {
        self.on_thread(|view| view.read_msr(msr))
    }

    fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Fault> {
        self.on_thread(|view| view.write_msr(msr, value))
    }

    fn rdpmc(&mut self, index: u32) -> Result<u64, Fault> {
        self.on_thread(|view| view.rdpmc(index))
    }
}

/// What [`inject_until_pmi`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Injected {
    /// How many occurrences were injected (at most the event's count).
    pub injected: u64,
    /// Whether a PMI line (T0 or T1) is pending now. When it is, the last
    /// occurrence injected is the one that raised it (or none was injected
    /// because a PMI was already pending).
    pub pmi_pending: bool,
}

/// Whether either logical processor's PMI line is pending.
pub fn any_pmi_pending(model: &NetBurstModel) -> bool {
    LogicalProcessor::ALL
        .into_iter()
        .any(|lp| model.pmi_pending(lp))
}

/// Injects up to `event.count` occurrences of `event` (one per clock, as
/// [`NetBurstModel::inject`]), stopping right after the occurrence that
/// raises a PMI on either logical processor. Nothing is injected while a PMI
/// is already pending: take it (and deliver it) first.
///
/// Exact for whatever the model does (filters, cascades, FORCE_OVF, PEBS),
/// and cheap in the common cases. An injected occurrence adds at most 1 to
/// any counter, so the public counter and CCCR state give a number of
/// occurrences that certainly raise no PMI ([`NetBurstModel::events_without_pmi`]: a
/// counter with OVF_PMI_T0/T1 raises it on the increment after its 40-bit
/// wrap, SDM 18.15.5.8); those are injected in one piece. When the very next
/// occurrence may raise one, it is injected alone. If that raised none (a
/// filtered event, a counter whose OVF software left set, PEBS), the rest is
/// tried in one piece on a copy of the model and, if that raises a PMI, the
/// first occurrence that does is found by bisection on copies (about
/// log2(`event.count`) trials).
///
/// A call with no PMI in reach costs one [`NetBurstModel::inject`], one
/// that stops at a counter's PMI two. Under QEMU (TCG), in the debug build
/// the test kernels use, one `inject` costs 150-180 µs, a copy of the model
/// 15-30 µs and a [`SharedNetBurstModel::with`] about 10 µs; with the `pmu` crate
/// optimized (`opt-level = 2`) `inject` takes about 20 µs. A tick that
/// injects should therefore come at most every millisecond or so in a debug
/// build.
pub fn inject_until_pmi(model: &mut NetBurstModel, event: Event) -> Injected {
    inject_until_pmi_of(model, event, None)
}

/// Whether the PMI line of `lp` (of either, for `None`) is pending.
fn pending(model: &NetBurstModel, lp: Option<LogicalProcessor>) -> bool {
    match lp {
        Some(lp) => model.pmi_pending(lp),
        None => any_pmi_pending(model),
    }
}

/// [`inject_until_pmi`], stopping at a PMI of `lp` only (of either, for
/// `None`).
fn inject_until_pmi_of(
    model: &mut NetBurstModel,
    event: Event,
    lp: Option<LogicalProcessor>,
) -> Injected {
    let mut remaining = event.count;
    let mut injected = 0u64;
    let inject = |model: &mut NetBurstModel, k: u64| model.inject(Event { count: k, ..event });
    let mut single_done = false;
    while remaining > 0 && !pending(model, lp) {
        let safe = model.events_without_pmi().min(remaining);
        let k = if safe > 0 {
            inject(model, safe);
            safe
        } else if !single_done {
            // The very next occurrence may raise a PMI: it alone.
            single_done = true;
            inject(model, 1);
            1
        } else {
            // Still no bound (OVF left set, PEBS on): search on copies.
            let (k, after) = first_pmi_by_bisection(model, event, remaining, lp);
            *model = after;
            k
        };
        injected += k;
        remaining -= k;
    }
    Injected {
        injected,
        pmi_pending: pending(model, lp),
    }
}

/// The smallest `k` in 1..=`n` such that injecting `k` occurrences of
/// `event` raises a PMI (or `n` if none does), with the model after those
/// `k`. A raised line stays pending, so "pending after k" is monotonic in
/// k. Works on copies of `model`.
fn first_pmi_by_bisection(
    model: &NetBurstModel,
    event: Event,
    n: u64,
    lp: Option<LogicalProcessor>,
) -> (u64, NetBurstModel) {
    let after = |k: u64| {
        let mut copy = model.clone();
        copy.inject(Event { count: k, ..event });
        copy
    };
    let mut best = after(n);
    if !pending(&best, lp) {
        return (n, best);
    }
    let (mut lo, mut hi) = (0u64, n);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        let copy = after(mid);
        if pending(&copy, lp) {
            hi = mid;
            best = copy;
        } else {
            lo = mid;
        }
    }
    (hi, best)
}

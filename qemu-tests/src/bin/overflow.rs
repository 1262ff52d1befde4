//! The driver's overflow interrupt path with real interrupts: sampling
//! counters programmed through the typestate API on the NetBurst model
//! overflow, the model's PMI line goes through the real APIC (vector or NMI),
//! and `pmu::arch::netburst::pmi::handle_pmi` runs from the IDT with the
//! interrupted RIP, reloads, clears OVF, unmasks the LVT entry and fills a
//! sample buffer. Covers N = 1 and 2, spurious PMIs, a PMI racing a halt,
//! two overflows in one PMI, conservation over long randomised runs, and
//! `FORCE_OVF` (an interrupt on every increment, the counter counting on),
//! and PEBS (records in a DS buffer in this kernel's memory, the PMI at the
//! buffer's threshold, each record a sample at its precise RIP).
//! All counts and records come from the model, not hardware.
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

use hobby::boot::BootInfo;
use hobby::idt::{self, InterruptFrame};
use hobby::pmi::{self, Delivery, PmiError, Taken, Waited};
use hobby::test::{Failure, Outcome};
use hobby::{case, check, check_eq, fail, println};
use pmu::apic::{LvtPerfCounter, PmiDelivery, Vector};
use pmu::arch::handle_pmi;
use pmu::arch::netburst::driver::{CounterConfig, Counters, NetBurstDriver, NetBurstHandle};
use pmu::arch::netburst::ds::{DsArea, PebsArea};
use pmu::arch::netburst::pmi::{PmiState, overflow_rule};
use pmu::arch::netburst::{Escr, EventSpec, LogicalProcessor, NetBurstPmu};
use pmu::counter::state::{Enabled, Unclaimed};
use pmu::counter::{Handle, Owner};
use pmu::model::netburst::{Config, EscrGroup, EventKind, LogicalProcessor as ModelLp, Privilege};
use pmu::model::netburst::{NetBurstMsr, SharedNetBurstModel};
use pmu::model::netburst::{PebsRecord, UopKind, Uops, replay};
use pmu::sampling::{SampleAfter, SampleBuffer};

hobby::entry_point!(main);

const PMI_VECTOR: u8 = 0xF0;
const NMI_VECTOR: u8 = 2;
const RUNNING: EventKind = EventKind::new(EscrGroup::Fsb, 0x13, 1);
const INSTR: EventKind = EventKind::new(EscrGroup::Cru01, 0x02, 1);

static MODEL: SharedNetBurstModel = SharedNetBurstModel::new(Config::prescott_ht());
/// The package of the running case (its own `static`, `setup!`), for the
/// PMI handler; null before the first case.
static PACKAGE: AtomicPtr<NetBurstPmu> = AtomicPtr::new(core::ptr::null_mut());
static SAMPLES: SampleBuffer<512> = SampleBuffer::new();
static NMI_MODE: AtomicBool = AtomicBool::new(false);
static HANDLED: AtomicU64 = AtomicU64::new(0);
static HANDLER_ERRORS: AtomicU64 = AtomicU64::new(0);

type Driver<O> = NetBurstDriver<'static, O, NetBurstMsr<'static>>;

fn main(_: &'static BootInfo) -> ! {
    println!("overflow: every count below comes from the NetBurst PMU model, not hardware");
    apic().enable(Vector::new(0xFF).unwrap());
    idt::set_handler(PMI_VECTOR, on_pmi);
    idt::set_handler(NMI_VECTOR, on_pmi);
    hobby::test::run(
        "overflow",
        &[
            case!(sampling_pmis_are_real_interrupts_with_the_interrupted_rip),
            case!(sample_after_1_completes_a_period_per_event),
            case!(sample_after_2),
            case!(spurious_pmi_is_counted_and_unmasks),
            case!(pmi_racing_a_halt_is_counted_once),
            case!(two_overflows_one_pmi),
            case!(pmi_as_nmi),
            case!(conservation_over_long_randomised_runs),
            case!(force_ovf),
            case!(pebs),
        ],
    )
}

fn apic() -> hobby::apic::Apic {
    pmi::local_apic()
}

fn entry() -> LvtPerfCounter {
    if NMI_MODE.load(Ordering::SeqCst) {
        LvtPerfCounter::new(PmiDelivery::Nmi)
    } else {
        LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(PMI_VECTOR).unwrap()))
    }
}

/// The package the running case drives, once a case has taken it.
fn package() -> Option<&'static NetBurstPmu> {
    // SAFETY: `PACKAGE` is null or the address of a case's `static`
    // package (`take`), which lives for ever and is only shared.
    unsafe { PACKAGE.load(Ordering::SeqCst).as_ref() }
}

/// The state the running case's driver shares with the PMI handler.
fn pmi() -> &'static PmiState {
    package().expect("the case took its package").pmi()
}

/// The kernel's PMI entry: the driver's handler routine, then EOI.
fn on_pmi(frame: &InterruptFrame) {
    let mut apic = apic();
    let serviced = package().is_some_and(|package| {
        handle_pmi(
            package.logical(LogicalProcessor::T0),
            &mut MODEL.msr(),
            &mut apic,
            entry(),
            frame.rip,
            |s| {
                SAMPLES.push(s.with_payload(()));
            },
        )
        .is_ok()
    });
    if !serviced {
        HANDLER_ERRORS.fetch_add(1, Ordering::SeqCst);
    }
    HANDLED.fetch_add(1, Ordering::SeqCst);
    if frame.vector != u64::from(NMI_VECTOR) {
        apic.eoi();
    }
}

/// A fresh model and driver, the LVT entry programmed, for the calling
/// case's own owner type and package: every case resets the model and
/// drives it as a package of its own.
macro_rules! setup {
    ($nmi:expr) => {{
        pmu::owner!(Case);
        // SAFETY: the model, reset for this case, is a package of its own,
        // and this is its one value.
        static CASE_PACKAGE: NetBurstPmu = unsafe { NetBurstPmu::new() };
        take::<Case>(&CASE_PACKAGE, $nmi)
    }};
}

fn take<O: Owner>(package: &'static NetBurstPmu, nmi: bool) -> (Driver<O>, Counters<O>) {
    MODEL.reset();
    PACKAGE.store(core::ptr::from_ref(package).cast_mut(), Ordering::SeqCst);
    NMI_MODE.store(nmi, Ordering::SeqCst);
    SAMPLES.drain(|_| {});
    apic().set_perf_counter_entry(entry());
    let cpu = MODEL.detect().expect("the model is a usable NetBurst");
    match NetBurstDriver::take(MODEL.msr(), &cpu, package) {
        Ok(d) => d,
        Err(e) => panic!("driver init on the model: {e:?}"),
    }
}

/// Configure and enable a counter.
fn start<O: Owner, const N: u8>(
    d: &mut Driver<O>,
    token: NetBurstHandle<O, N, Unclaimed>,
    cfg: &CounterConfig,
) -> Result<NetBurstHandle<O, N, Enabled>, ()> {
    token
        .configure(d, cfg)
        .map_err(|_| ())?
        .enable(d)
        .map_err(|_| ())
}

fn running(n: u64) -> CounterConfig {
    let spec: EventSpec = "global_power_events:RUNNING:k".parse().unwrap();
    let s = SampleAfter::new(n, overflow_rule()).unwrap();
    CounterConfig::counting(spec, Escr::FsbEscr0).sampling(s)
}

/// Waits (boundedly) until the PMI just sent as `taken` has reached the
/// handler, which had run `before` times: a real CPU takes it some
/// instructions after the write that sent it, TCG at the next boundary.
/// Whether it ran exactly once more.
fn handled_once(before: u64, taken: Taken) -> bool {
    pmi::wait_for_interrupt(&HANDLED, before, taken);
    HANDLED.load(Ordering::SeqCst) == before + 1
}

/// Inject `n` events of `kind` at CPL 0 on T0, delivering each PMI through
/// the APIC as soon as the model raises it (before more events count) and
/// waiting until the handler has taken it: a vector PMI interrupts an
/// instruction of the wait's loop ([`pmi::wait_window`]). Returns how many
/// PMIs were delivered.
/// PMIs delivered; an error says what was observed ([`PmiError`]).
fn run(kind: EventKind, mut n: u64) -> Result<u64, Failure> {
    let mut pmis = 0;
    while n > 0 {
        let got = MODEL.inject_until_pmi(kind.on(ModelLp::T0, Privilege::Os, n));
        n -= got.injected;
        if got.pmi_pending {
            MODEL.take_pmi(ModelLp::T0).ok_or("PMI line vanished")?;
            let before = HANDLED.load(Ordering::SeqCst);
            let taken = match pmi::deliver(&mut apic()) {
                Delivery::Vector(_) => Taken::Vector,
                Delivery::Nmi => Taken::Nmi,
                Delivery::Masked => {
                    let entry = apic().perf_counter_entry();
                    return Err(PmiError::Masked {
                        entry,
                        handled: pmis,
                    }
                    .into());
                }
                Delivery::Invalid => {
                    let entry = apic().perf_counter_entry();
                    return Err(PmiError::Invalid { entry }.into());
                }
            };
            pmi::wait_for_interrupt(&HANDLED, before, taken);
            let runs = HANDLED.load(Ordering::SeqCst) - before;
            if runs != 1 {
                return Err(PmiError::Runs {
                    pmi: pmis + 1,
                    runs,
                    waited: Waited::Cycles(pmi::WAIT_CYCLES),
                }
                .into());
            }
            pmis += 1;
        }
    }
    Ok(pmis)
}

fn sampling_pmis_are_real_interrupts_with_the_interrupted_rip() -> Outcome {
    let (mut d, c) = setup!(false);
    let Ok(c0) = c.c0.configure(&mut d, &running(100)) else {
        fail!("configure")
    };
    let Ok(c0) = c0.enable(&mut d) else {
        fail!("enable")
    };
    let window = pmi::wait_window(); // every delivery interrupts an instruction here
    let pmis = run(RUNNING, 1000)?;
    check_eq!(pmis, 9, "first PMI on event 101, then every 100");
    let mut n = 0;
    let mut wrong_rip = 0;
    SAMPLES.drain(|s| {
        n += 1;
        wrong_rip += u32::from(!window.contains(&s.rip) || s.counter != 0 || s.periods != 1);
    });
    check_eq!((n, wrong_rip), (9, 0));
    check!(
        !apic().perf_counter_entry().is_masked(),
        "handler unmasked the LVT entry"
    );
    let raw = c0.read(&mut d).unwrap_or(0);
    let s = running(100).sampling.unwrap();
    let (owed, residual) = s.split(raw);
    check_eq!(pmi().periods(0) + owed, 10);
    check_eq!(residual, 0);
    println!(
        "overflow: 1000 events, N = 100: 9 PMIs serviced + 1 overflow pending its PMI, residual 0 (model)"
    );
    check_eq!(HANDLER_ERRORS.load(Ordering::SeqCst), 0);
    let _ = c0.release(&mut d);
    Ok(())
}

fn conservation(n: u64, events: u64, raw: u64) -> Outcome {
    let s = SampleAfter::new(n, overflow_rule()).unwrap();
    let (owed, residual) = s.split(raw);
    let periods = pmi().periods(0);
    check_eq!(
        events,
        (periods + owed) * n + residual,
        "events = periods x N + residual"
    );
    Ok(())
}

fn sample_after_1_completes_a_period_per_event() -> Outcome {
    let (mut d, c) = setup!(false);
    let Ok(c0) = start(&mut d, c.c0, &running(1)) else {
        fail!("configure/enable")
    };
    let pmis = run(RUNNING, 101)?;
    // Overflow on every event; the PMI comes with the next one, which is a
    // period of its own: one PMI per two events, two periods each.
    check_eq!(pmis, 50);
    let mut periods = 0;
    SAMPLES.drain(|s| periods += s.periods);
    check_eq!(periods, 100);
    conservation(1, 101, c0.read(&mut d).unwrap_or(0))?;
    let _ = c0.release(&mut d);
    Ok(())
}

fn sample_after_2() -> Outcome {
    let (mut d, c) = setup!(false);
    let Ok(c0) = start(&mut d, c.c0, &running(2)) else {
        fail!("configure/enable")
    };
    let pmis = run(RUNNING, 101)?;
    check_eq!(pmis, 50, "PMIs at events 3, 5, ..., 101");
    conservation(2, 101, c0.read(&mut d).unwrap_or(0))?;
    let _ = c0.release(&mut d);
    Ok(())
}

fn spurious_pmi_is_counted_and_unmasks() -> Outcome {
    let (mut d, c) = setup!(false);
    let Ok(c0) = start(&mut d, c.c0, &running(100)) else {
        fail!("configure/enable")
    };
    let spurious = pmi().spurious(LogicalProcessor::T0);
    let handled = HANDLED.load(Ordering::SeqCst);
    check_eq!(pmi::deliver(&mut apic()), Delivery::Vector(PMI_VECTOR));
    check!(handled_once(handled, Taken::Vector), "one PMI");
    check_eq!(pmi().spurious(LogicalProcessor::T0), spurious + 1);
    check!(SAMPLES.is_empty());
    check!(!apic().perf_counter_entry().is_masked());
    let _ = c0.release(&mut d);
    Ok(())
}

fn pmi_racing_a_halt_is_counted_once() -> Outcome {
    let (mut d, c) = setup!(false);
    let Ok(c0) = start(&mut d, c.c0, &running(10)) else {
        fail!("configure/enable")
    };
    // 11 events: overflow on the 10th, PMI raised by the 11th; it is sent to
    // the APIC but interrupts stay off, so it is still pending when the
    // counter is halted.
    MODEL.with(|m| m.inject(RUNNING.on(ModelLp::T0, Privilege::Os, 11)));
    check!(MODEL.take_pmi(ModelLp::T0).is_some());
    check_eq!(pmi::deliver(&mut apic()), Delivery::Vector(PMI_VECTOR));
    let Ok(c0) = c0.halt(&mut d) else {
        fail!("halt")
    };
    check_eq!(pmi().periods_at_halt(0), 1, "the halt found the period");
    let spurious = pmi().spurious(LogicalProcessor::T0);
    // The late PMI arrives now.
    check!(
        handled_once(HANDLED.load(Ordering::SeqCst), Taken::Vector),
        "one PMI"
    );
    check_eq!(
        pmi().spurious(LogicalProcessor::T0),
        spurious + 1,
        "and the PMI finds no OVF"
    );
    check!(SAMPLES.is_empty(), "nothing counted twice");
    let Ok(c0) = c0.resume(&mut d) else {
        fail!("resume")
    };
    let pmis = run(RUNNING, 10)?;
    check_eq!(pmis, 1, "the next period is exactly 10 events");
    check_eq!(pmi().periods(0), 2);
    conservation(10, 21, c0.read(&mut d).unwrap_or(0))?;
    let _ = c0.release(&mut d);
    Ok(())
}

fn two_overflows_one_pmi() -> Outcome {
    let (mut d, c) = setup!(false);
    let instr: EventSpec = "instr_retired:NBOGUSNTAG:k".parse().unwrap();
    let s = SampleAfter::new(5, overflow_rule()).unwrap();
    let cfg = CounterConfig::counting(instr, Escr::CruEscr0).sampling(s);
    let Ok(a) = start(&mut d, c.c0, &running(5)) else {
        fail!("configure/enable 0")
    };
    let Ok(b) = start(&mut d, c.c12, &cfg) else {
        fail!("configure/enable 12")
    };
    // Both overflow, and both raise the PMI, before it is taken.
    MODEL.with(|m| {
        m.inject(RUNNING.on(ModelLp::T0, Privilege::Os, 6));
        m.inject(INSTR.on(ModelLp::T0, Privilege::Os, 6));
    });
    check!(MODEL.take_pmi(ModelLp::T0).is_some());
    check_eq!(pmi::deliver(&mut apic()), Delivery::Vector(PMI_VECTOR));
    let handled = HANDLED.load(Ordering::SeqCst);
    check!(handled_once(handled, Taken::Vector), "one PMI");
    let mut counters = 0u32;
    SAMPLES.drain(|s| counters |= 1 << s.counter);
    check_eq!(counters, 1 << 0 | 1 << 12, "both serviced");
    let _ = (a.release(&mut d), b.release(&mut d));
    Ok(())
}

fn pmi_as_nmi() -> Outcome {
    let (mut d, c) = setup!(true);
    let Ok(c0) = start(&mut d, c.c0, &running(50)) else {
        fail!("configure/enable")
    };
    let pmis = run(RUNNING, 500)?;
    check_eq!(pmis, 9);
    check_eq!(SAMPLES.len(), 9);
    check_eq!(
        apic().perf_counter_entry(),
        LvtPerfCounter::new(PmiDelivery::Nmi),
        "unmasked NMI entry"
    );
    conservation(50, 500, c0.read(&mut d).unwrap_or(0))?;
    let _ = c0.release(&mut d);
    Ok(())
}

fn conservation_over_long_randomised_runs() -> Outcome {
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut rnd = move |m: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % m
    };
    let mut total = 0u64;
    // 300 rounds of random runs per N, fewer (at least 30) where the
    // platform runs code far slower than TCG (`hobby::pace::scaled`).
    let rounds = hobby::pace::scaled(300, 30);
    for n in [1u64, 2, 3, 10, 97, 1000, 65_536] {
        let (mut d, c) = setup!(false);
        let Ok(c0) = start(&mut d, c.c0, &running(n)) else {
            fail!("configure/enable")
        };
        let mut c0 = c0.erase();
        let (mut events, mut sampled, mut dropped) = (0u64, 0u64, SAMPLES.dropped());
        for _ in 0..rounds {
            let k = 1 + rnd(4 * n);
            run(RUNNING, k)?;
            events += k;
            SAMPLES.drain(|s| sampled += u64::from(s.periods));
            if rnd(4) == 0 {
                if c0.halt(&mut d).is_err() {
                    fail!("halt");
                }
                MODEL.with(|m| m.inject(RUNNING.on(ModelLp::T0, Privilege::Os, 7)));
                if c0.resume(&mut d).is_err() {
                    fail!("resume");
                }
            }
        }
        dropped = SAMPLES.dropped() - dropped;
        let raw = c0.read(&mut d).unwrap_or(0);
        conservation(n, events, raw)?;
        let periods = pmi().periods(0);
        check_eq!(
            sampled + pmi().periods_at_halt(0),
            periods,
            "samples conserved"
        );
        check_eq!(dropped, 0);
        total += events;
        if c0.release(&mut d).is_err() {
            fail!("release");
        }
        let Ok(c0) = Handle::from_erased(c0) else {
            fail!("counter 0 back from its run-time handle");
        };
        // The next round takes the same owner and package again.
        let _msr = d.give_back(Counters { c0, ..c });
    }
    println!(
        "overflow: conservation held over {total} events in 7 randomised runs of {rounds} rounds (model)"
    );
    check_eq!(HANDLER_ERRORS.load(Ordering::SeqCst), 0);
    Ok(())
}

/// `FORCE_OVF` through the driver with real interrupts: each increment
/// overflows the counter and the increment after raises the PMI; the
/// handler accounts the increments since its last service and the counter
/// counts on from 0. Every increment is accounted exactly once, by a PMI
/// or by the halt.
fn force_ovf() -> Outcome {
    let (mut d, c) = setup!(false);
    let spec: EventSpec = pmu::netburst_event!("global_power_events:RUNNING:k");
    let config = CounterConfig::counting(spec, Escr::FsbEscr0).every_increment();
    let c0 = c.c0.configure(&mut d, &config)?.enable(&mut d)?;
    let pmis = run(RUNNING, 301)?;
    let mut samples = 0u64;
    let mut increments = 0u64;
    SAMPLES.drain(|s| {
        samples += 1;
        increments += u64::from(s.periods);
    });
    check_eq!(c0.read(&mut d)?, 301, "the counter counts on");
    check_eq!(samples, pmis, "a sample per PMI");
    check_eq!(increments, pmi().periods(0));
    let c0 = c0.halt(&mut d)?;
    check_eq!(pmi().periods(0), 301, "every increment accounted once");
    println!(
        "overflow: FORCE_OVF, 301 events: {pmis} PMIs serviced {increments} increments, the halt {} (model)",
        pmi().periods_at_halt(0)
    );
    check!(pmis >= 150, "a PMI at least every second increment: {pmis}");
    check_eq!(HANDLER_ERRORS.load(Ordering::SeqCst), 0);
    let _ = c0.release(&mut d)?;
    Ok(())
}

/// The DS save area the PEBS case hands the driver (for good).
static mut PEBS_AREA: PebsArea<4> = PebsArea::new();
static PEBS_AREA_TAKEN: AtomicBool = AtomicBool::new(false);

/// PEBS on counter 16 for T0: `replay_event` counting loads that missed
/// the first-level cache (replay tagging, SDM Table 19-33), a record every
/// 10th, a PMI every 2 records. The model retires the loads, takes the
/// assists and writes the records into this kernel's memory (the DS buffer
/// above); each PMI goes through the APIC to the handler, which drains the
/// buffer into the sample buffer: one sample per record, at the record's
/// precise RIP, not the interrupted one.
fn pebs() -> Outcome {
    let (mut d, c) = setup!(false);
    if PEBS_AREA_TAKEN.swap(true, Ordering::SeqCst) {
        fail!("the PEBS area is handed over once");
    }
    let area = &raw mut PEBS_AREA;
    // SAFETY: the flag above makes this the only reference ever made.
    let area = unsafe { &mut *area };
    // SAFETY: a static of this kernel, whose one address space maps it
    // (identity) wherever the CPU runs.
    d.set_pebs_area(LogicalProcessor::T0, unsafe { DsArea::new(area) })?;
    let spec: EventSpec = pmu::netburst_event!("replay_event:NBOGUS:L1_LD_MISS:k");
    let every = SampleAfter::new(10, overflow_rule())?;
    let config = CounterConfig::counting(spec, Escr::CruEscr2).pebs(every, 2);
    let c16 = c.c16.configure(&mut d, &config)?.enable(&mut d)?;
    let mut pmis = 0;
    for k in 0..10u64 {
        let rip = 0xFFFF_8000_0010_0000 + 0x40 * k;
        let raised = MODEL.with(|m| {
            m.set_pebs_registers(
                ModelLp::T0,
                PebsRecord {
                    rflags: 0x202,
                    rip,
                    gprs: [k; 16],
                },
            );
            let loads = Uops {
                replays: replay::L1_LOAD_MISS,
                ..Uops::new(ModelLp::T0, Privilege::Os, UopKind::Load, 10)
            };
            // SAFETY: T0's IA32_DS_AREA is `PEBS_AREA`, owned by the
            // driver as a `DsArea`, which keeps only its address.
            unsafe { m.with_ds_memory(ModelLp::T0, |m| m.retire(&loads)) };
            m.take_pmi(ModelLp::T0)
        });
        if let Some(line) = raised {
            check!(line.pebs_threshold, "the DS buffer's threshold raised it");
            let before = HANDLED.load(Ordering::SeqCst);
            check_eq!(pmi::deliver(&mut apic()), Delivery::Vector(PMI_VECTOR));
            check!(handled_once(before, Taken::Vector), "one PMI");
            pmis += 1;
        }
    }
    let mut rips = [0u64; 10];
    let mut n = 0;
    SAMPLES.drain(|s| {
        if let Some(r) = rips.get_mut(n)
            && s.counter == 16
            && s.periods == 1
        {
            *r = s.rip;
        }
        n += 1;
    });
    check_eq!(pmis, 5, "a PMI every 2 records");
    check_eq!(n, 10, "a sample per record");
    for (k, rip) in rips.iter().enumerate() {
        check_eq!(*rip, 0xFFFF_8000_0010_0000 + 0x40 * k as u64, "precise RIP");
    }
    check_eq!(pmi().periods(16), 10);
    check_eq!(
        c16.read(&mut d)?,
        every.at_residual(1),
        "100 loads, 10 whole periods"
    );
    check_eq!(HANDLER_ERRORS.load(Ordering::SeqCst), 0);
    println!(
        "overflow: PEBS, 100 L1-missing loads, every 10th: {n} records in {pmis} PMIs, each at its precise RIP (model)"
    );
    let _ = c16.release(&mut d)?;
    Ok(())
}

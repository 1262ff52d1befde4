//! The Itanium driver and overflow handler against the Itanium model (a
//! test instrument written from the manuals): behaviour, and exact register
//! traffic per operation through [`Recording`]. Every count here comes from
//! the model.

use crate::sampling::{Payload, Sample};
use std::vec::Vec;

use super::*;
use crate::access::{Access, AccessCounts, Recording};
use crate::arch::handle_pmi;
use crate::arch::itanium::CounterSet;
use crate::arch::itanium::driver::Unit;
use crate::arch::itanium::ear::{self, ItlbSample};
use crate::arch::itanium::ear::{IearConfig, TlbFills};
use crate::arch::itanium::pmi::Capture;
use crate::arch::itanium::{EventCode, Plm};
use crate::counter::Owner;
use crate::counter::{AnyHandle, ErasedError, StateTag};
use crate::model::itanium::{Event, FetchMiss, ItaniumModel, Psr, TlbFill};
use crate::sampling::calibrate;

type Regs = Recording<ItaniumModel, 64>;

const CYCLES: u8 = 0x12;

/// The LVT entry the handler is given (`&mut ()`: Itanium's interrupt is
/// not masked by its delivery, so nothing is written).
const ENTRY: crate::apic::LvtPerfCounter =
    crate::apic::LvtPerfCounter::new(crate::apic::PmiDelivery::Nmi);

/// The model has its own generation type (written independently).
fn model_generation(g: Generation) -> crate::model::itanium::Generation {
    match g {
        Generation::Itanium => crate::model::itanium::Generation::Itanium,
        Generation::Itanium2 => crate::model::itanium::Generation::Itanium2,
        Generation::Montecito => crate::model::itanium::Generation::Montecito,
    }
}

/// The driver of a fresh model under test, for owner `O`.
type Ia<'s, O> = ItaniumDriver<'s, O, Regs>;

fn take<O: Owner>(state: &ItaniumPmu, g: Generation) -> (Ia<'_, O>, Counters<O>) {
    let mut m = ItaniumModel::new(model_generation(g));
    m.set_psr(Psr::MONITORING);
    let (mut d, c) = ItaniumDriver::take(Recording::new(m), g, state).unwrap();
    d.regs().clear();
    (d, c)
}

/// A driver on a fresh model, for an owner type of its own: tests run in
/// parallel, and an owner can be taken by one driver at a time. A loop that
/// takes it again each round retires the driver at the end of the round.
macro_rules! driver {
    ($state:expr, $g:expr) => {{
        crate::owner!(Fresh);
        take::<Fresh>($state, $g)
    }};
}

fn model<'a, O: Owner>(d: &'a mut Ia<'_, O>) -> &'a mut ItaniumModel {
    d.regs().inner_mut()
}

fn counts(a: u32, b: u32, c: u32, e: u32) -> AccessCounts {
    AccessCounts::pmc_pmd(a, b, c, e)
}

fn cycles_on(g: Generation, n: u8) -> CounterConfig {
    let hw = HwCounter::new(g, n).unwrap();
    let pmc = pmc::CounterPmc::new(hw, EventCode::new(g, CYCLES).unwrap())
        .unwrap()
        .with_plm(Plm::ALL)
        .with_privileged(true);
    CounterConfig::counting(pmc)
}

fn sa(g: Generation, n: u64) -> SampleAfter {
    SampleAfter::new(n, overflow_rule(g)).unwrap()
}

/// Inject `n` cycles, servicing each overflow as soon as the model raises
/// it (the model stops counting at the freeze; the rest is injected after
/// the handler has unfrozen). Returns the events counted.
fn run<O: Owner>(
    d: &mut Ia<'_, O>,
    state: &ItaniumPmu,
    mut n: u64,
    iip: u64,
    out: &mut Vec<Sample<Capture>>,
) -> u64 {
    let mut counted = 0;
    while n > 0 {
        let got = model(d).inject(Event::new(CYCLES, 0, n));
        counted += got.counted_cycles;
        n -= got.counted_cycles;
        if model(d).take_interrupt().is_some() {
            handle_pmi(state, d.regs(), &mut (), ENTRY, iip, |s| out.push(s)).unwrap();
        }
    }
    counted
}

/// Reproduction 4: a second driver of one processor's PMU, for another
/// owner, is refused before it touches a register, and the live driver's
/// handler state (a sampling counter's periods, the generation) is not
/// reset under it.
#[test]
fn a_second_driver_of_one_pmu_is_refused() {
    crate::owner!(First);
    crate::owner!(Second);
    for g in [
        Generation::Itanium,
        Generation::Itanium2,
        Generation::Montecito,
    ] {
        let state = crate::testing::itanium_pmu();
        let (mut d, c) = take::<First>(&state, g);
        let c4 =
            c.c4.configure(&mut d, &cycles_on(g, 4).sampling(sa(g, 10)))
                .unwrap();
        let c4 = c4.enable(&mut d).unwrap();
        let mut out = Vec::new();
        assert_eq!(run(&mut d, &state, 25, 0x100, &mut out), 25);
        assert_eq!(state.pmi().periods(4), 2, "{g:?}");
        let mut other = Recording::<_, 64>::new(ItaniumModel::new(model_generation(g)));
        let Err(InitError::PmuTaken) = ItaniumDriver::<Second, _>::take(&mut other, g, &state)
        else {
            panic!("a second driver of one PMU")
        };
        assert_eq!(
            other.take_counts(),
            counts(0, 0, 0, 0),
            "no register touched"
        );
        assert_eq!(state.pmi().periods(4), 2, "the live driver's state stands");
        assert_eq!(state.pmi().generation(), g);
        assert!(state.is_taken());
        let c4 = c4.halt(&mut d).unwrap().release(&mut d).unwrap();
        let Ok(_) = d.give_back(Counters { c4, ..c }) else {
            panic!("every token back")
        };
        assert!(!state.is_taken());
        // Now a driver of another owner may take it.
        let (d, c) = take::<Second>(&state, g);
        let Ok(_) = d.give_back(c) else {
            panic!("every token back")
        };
    }
}

/// The Montecito tokens belong to a Montecito driver: a set without them
/// (or with them elsewhere) does not give it back.
#[test]
fn montecito_counters_come_back_with_a_montecito_driver() {
    crate::owner!(Mc);
    crate::owner!(It2);
    let (p1, p2) = (crate::testing::itanium_pmu(), crate::testing::itanium_pmu());
    let (mc, mut cmc) = take::<Mc>(&p1, Generation::Montecito);
    let (it2, c2) = take::<It2>(&p2, Generation::Itanium2);
    let extra = cmc.montecito.take();
    let Err((mc, mut cmc)) = mc.give_back(cmc) else {
        panic!("Montecito's counters 8-15 missing")
    };
    cmc.montecito = extra;
    assert!(mc.give_back(cmc).is_ok());
    assert!(it2.give_back(c2).is_ok());
}

#[test]
fn init_freezes_resets_and_unfreezes() {
    let state = crate::testing::itanium_pmu();
    for (g, counters) in [
        (Generation::Itanium, 4u32),
        (Generation::Itanium2, 4),
        (Generation::Montecito, 12),
    ] {
        let mut m = ItaniumModel::new(model_generation(g));
        m.set_psr(Psr::MONITORING);
        crate::owner!(Cpu);
        let (mut d, c) = Ia::<Cpu>::take(Recording::new(m), g, &state).unwrap();
        assert_eq!(
            d.regs().counts(),
            counts(0, 2 + counters + 3, 0, counters),
            "{g:?}"
        );
        assert!(!model(&mut d).frozen());
        assert_eq!(c.montecito.is_some(), g == Generation::Montecito);
        if g == Generation::Itanium2 {
            assert_eq!(model(&mut d).pmc(4) & 1 << 23, 1 << 23, "enable bit kept");
        }
        // One owner, one driver: a second take fails and touches nothing.
        let other = Recording::new(ItaniumModel::new(model_generation(g)));
        let again = Ia::<Cpu>::take(other, g, &state);
        assert!(matches!(again, Err(InitError::AlreadyTaken)), "{g:?}");
        // Given back with every token (each released), the owner can be
        // taken again: the next round does.
        let c4 = c.c4.configure(&mut d, &cycles_on(g, 4)).unwrap();
        assert_eq!(d.claimed(), CounterSet::single(4));
        let c4 = c4.release(&mut d).unwrap();
        assert!(d.claimed().is_empty());
        assert!(d.give_back(Counters { c4, ..c }).is_ok(), "{g:?}");
        assert!(!state.is_taken());
    }
}

/// The module table, operation by operation (Itanium 2 and Montecito keep
/// a halted count; Itanium saves and restores it).
#[test]
fn register_traffic_per_operation_is_exact() {
    for g in Generation::ALL {
        let state = crate::testing::itanium_pmu();
        let (mut d, c) = driver!(&state, g);
        let merced = g == Generation::Itanium;
        let c5 = c.c5.configure(&mut d, &cycles_on(g, 5)).unwrap();
        assert_eq!(d.regs().take_counts(), counts(0, 1, 0, 1), "configure");
        let c5 = c5.enable(&mut d).unwrap();
        assert_eq!(d.regs().take_counts(), counts(0, 1, 0, 0), "enable");
        model(&mut d).inject(Event::new(CYCLES, 0, 10));
        assert_eq!(c5.read(&mut d).unwrap(), 10);
        assert_eq!(d.regs().take_counts(), counts(0, 0, 1, 0), "read");
        let c5 = c5.halt(&mut d).unwrap();
        let halt = if merced {
            counts(0, 1, 1, 0)
        } else {
            counts(0, 1, 0, 0)
        };
        assert_eq!(d.regs().take_counts(), halt, "halt");
        model(&mut d).inject(Event::new(CYCLES, 0, 10));
        assert_eq!(c5.read(&mut d).unwrap(), 10, "halted: not counting");
        let read = if merced {
            counts(0, 0, 0, 0)
        } else {
            counts(0, 0, 1, 0)
        };
        assert_eq!(d.regs().take_counts(), read, "read (halted)");
        let c5 = c5.resume(&mut d).unwrap();
        let resume = if merced {
            counts(0, 1, 0, 1)
        } else {
            counts(0, 1, 0, 0)
        };
        assert_eq!(d.regs().take_counts(), resume, "resume");
        model(&mut d).inject(Event::new(CYCLES, 0, 5));
        assert_eq!(c5.read(&mut d).unwrap(), 15);
        d.regs().clear();
        let _ = c5.release(&mut d).unwrap();
        assert_eq!(d.regs().take_counts(), counts(0, 1, 0, 1), "release");
        let m = model(&mut d);
        assert_eq!(m.counter(5), 0);
        assert_eq!(
            m.pmc(5),
            g.pmc(5).unwrap().default,
            "release: power-up value"
        );
        d.retire();
    }
}

#[test]
fn exact_register_log_on_itanium2() {
    let g = Generation::Itanium2;
    let state = crate::testing::itanium_pmu();
    let (mut d, c) = driver!(&state, g);
    let n = sa(g, 100);
    let c4 =
        c.c4.configure(&mut d, &cycles_on(g, 4).sampling(n))
            .unwrap();
    let image = c4.programmed().pmc();
    // es 12h, plm F, pm, oi, PMC4's enable bit 23 from the power-up value.
    assert_eq!(image, 0x12 << 8 | 0xF | 1 << 6 | 1 << 5 | 1 << 23);
    let c4 = c4.enable(&mut d).unwrap();
    assert_eq!(
        d.regs().log(),
        [
            Access::WritePmc {
                pmc: 4,
                value: image & !0xF
            },
            Access::WritePmd {
                pmd: 4,
                value: (1 << 47) - 100
            },
            Access::WritePmc {
                pmc: 4,
                value: image
            },
        ]
    );
    d.regs().clear();
    let _ = c4.release(&mut d).unwrap();
    assert_eq!(
        d.regs().log(),
        [
            Access::WritePmc {
                pmc: 4,
                value: 1 << 23
            },
            Access::WritePmd { pmd: 4, value: 0 },
            // A sampling counter: is an overflow of it pending? (No.)
            Access::ReadPmc { pmc: 0, value: 0 },
        ]
    );
}

#[test]
fn configurations_are_validated() {
    let g = Generation::Itanium2;
    let state = crate::testing::itanium_pmu();
    let (mut d, c) = driver!(&state, g);
    // The image of counter 5 on counter 4's handle.
    let e = c.c4.configure(&mut d, &cycles_on(g, 5)).unwrap_err();
    assert_eq!(
        e.error,
        Error::Config(ConfigError::WrongCounter {
            handle: 4,
            image: 5
        })
    );
    // Another generation's image.
    let e = e
        .counter
        .configure(&mut d, &cycles_on(Generation::Itanium, 4))
        .unwrap_err();
    assert!(matches!(
        e.error,
        Error::Config(ConfigError::WrongGeneration { .. })
    ));
    // plm 0 never counts.
    let mut cfg = cycles_on(g, 4);
    cfg.pmc = cfg.pmc.with_plm(Plm::NONE);
    let e = e.counter.configure(&mut d, &cfg).unwrap_err();
    assert_eq!(e.error, Error::Config(ConfigError::NoPrivilegeLevel));
    // The arch layer's validator: a threshold at CPU_CYCLES' maximum
    // increment (1) never counts (VTune's Itanium event help: "exceeds the
    // threshold").
    let mut cfg = cycles_on(g, 4);
    let hw = HwCounter::new(g, 4).unwrap();
    cfg.pmc = cfg
        .pmc
        .with_threshold(crate::arch::itanium::Threshold::new(hw, 1).unwrap())
        .unwrap();
    let e = e.counter.configure(&mut d, &cfg).unwrap_err();
    assert!(
        matches!(
            e.error,
            Error::Config(ConfigError::Pmc(
                crate::arch::itanium::validate::PmcError::ThresholdNotBelowMaxIncrement { .. }
            ))
        ),
        "{:?}",
        e.error
    );
    // A sample-after value for 32-bit counters on a 47-bit PMU.
    let cfg = cycles_on(g, 4).sampling(sa(Generation::Itanium, 10));
    let e = e.counter.configure(&mut d, &cfg).unwrap_err();
    assert_eq!(e.error, Error::Config(ConfigError::SampleAfterRule));
    // I-EAR sampling on a counter that counts cycles.
    let ear = iear(g, TlbFills::ALL);
    let mut cfg = cycles_on(g, 4).sampling(sa(g, 10));
    cfg.iear = Some(ear);
    let e = e.counter.configure(&mut d, &cfg).unwrap_err();
    assert_eq!(
        e.error,
        Error::Config(ConfigError::NotTheUnitEvent(Unit::Iear))
    );
    assert_eq!(
        d.regs().take_counts(),
        counts(0, 0, 0, 0),
        "nothing written"
    );
    // The I-EAR belongs to one counter at a time.
    let hw4 = HwCounter::new(g, 4).unwrap();
    let hw6 = HwCounter::new(g, 6).unwrap();
    let c4 = e
        .counter
        .configure(
            &mut d,
            &CounterConfig::itlb_sampling(hw4, sa(g, 5), ear).unwrap(),
        )
        .unwrap();
    let e =
        c.c6.configure(
            &mut d,
            &CounterConfig::itlb_sampling(hw6, sa(g, 5), ear).unwrap(),
        )
        .unwrap_err();
    assert_eq!(
        e.error,
        Error::Config(ConfigError::UnitBusy {
            unit: Unit::Iear,
            owner: 4
        })
    );
    let _ = c4.release(&mut d).unwrap();
    assert!(
        e.counter
            .configure(
                &mut d,
                &CounterConfig::itlb_sampling(hw6, sa(g, 5), ear).unwrap()
            )
            .is_ok()
    );
    // No L2 ITLB fills on the first Itanium (HP Caliper): the arch layer
    // cannot even build such a configuration, and the validator refuses
    // the raw value (umask 1 in ITLB mode).
    assert!(IearConfig::tlb_misses(Generation::Itanium, TlbFills::ALL).is_err());
    let v = crate::arch::itanium::validate::validate(
        Generation::Itanium,
        crate::arch::itanium::validate::Policy::STRICT,
        10,
        0xF | 1 << 7 | 0x1 << 16,
    );
    assert!(v.is_err());
}

/// Every generation's I-EAR fills, minus L2 on Itanium.
fn all_fills(g: Generation) -> TlbFills {
    TlbFills {
        l2: g != Generation::Itanium,
        ..TlbFills::ALL
    }
}

fn iear(g: Generation, fills: TlbFills) -> IearConfig {
    IearConfig::tlb_misses(g, fills)
        .unwrap()
        .with_plm(Plm::ALL)
        .with_privileged(true)
}

#[test]
fn reserved_bits_cannot_reach_the_driver() {
    // Itanium 2 counter bits 27:26 are reserved (libpfm3: "must be zero"):
    // the arch layer's typed image cannot hold them (its decoder refuses or
    // drops them), and the driver validates the image again before writing.
    let g = Generation::Itanium2;
    let hw = HwCounter::new(g, 5).unwrap();
    assert!(pmc::CounterPmc::from_bits(hw, 0x12 << 8 | 1 | 1 << 26).is_err());
    let state = crate::testing::itanium_pmu();
    let (mut d, c) = driver!(&state, g);
    let mut cfg = cycles_on(g, 5);
    cfg.pmc = pmc::CounterPmc::from_bits_truncate(hw, 0x12 << 8 | 1 | 1 << 26);
    // from_bits_truncate dropped the bit: accepted.
    assert!(c.c5.configure(&mut d, &cfg).is_ok());
}

#[test]
fn overflow_freezes_at_once_and_the_handler_unfreezes_last() {
    let g = Generation::Itanium2;
    let state = crate::testing::itanium_pmu();
    let (mut d, c) = driver!(&state, g);
    let n = sa(g, 50);
    let a =
        c.c4.configure(&mut d, &cycles_on(g, 4).sampling(n))
            .unwrap();
    let b = c.c5.configure(&mut d, &cycles_on(g, 5)).unwrap();
    let (a, b) = (a.enable(&mut d).unwrap(), b.enable(&mut d).unwrap());
    let got = model(&mut d).inject(Event::new(CYCLES, 0, 80));
    assert_eq!(got.counted_cycles, 50, "frozen on the 50th event");
    assert!(model(&mut d).frozen());
    assert_eq!(b.read(&mut d).unwrap(), 50, "every counter froze");
    model(&mut d).inject(Event::new(CYCLES, 0, 7));
    assert_eq!(b.read(&mut d).unwrap(), 50, "nothing counts while frozen");
    assert!(model(&mut d).take_interrupt().is_some());
    d.regs().clear();
    let mut out = Vec::new();
    let o = handle_pmi(&state, d.regs(), &mut (), ENTRY, 0x4000_0010, |s| {
        out.push(s)
    })
    .unwrap();
    assert_eq!(o.overflowed, CounterSet::single(4).bits());
    assert_eq!(d.regs().take_counts(), counts(1, 1, 0, 1));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].rip, 0x4000_0010);
    assert_eq!(out[0].payload.itlb(), None);
    assert!(!model(&mut d).frozen());
    assert_eq!(a.read(&mut d).unwrap(), n.preset());
    model(&mut d).inject(Event::new(CYCLES, 0, 30));
    assert_eq!(a.read(&mut d).unwrap(), n.at_residual(30));
    assert_eq!(b.read(&mut d).unwrap(), 80);
    assert_eq!(state.pmi().periods(4), 1);
}

/// A kernel's sink of its own type.
#[derive(Default)]
struct Collected(Vec<Sample<Capture>>);

impl Collected {
    fn sample(&mut self, s: Sample<Capture>) {
        self.0.push(s);
    }
}

/// A consumer of the kernel's own type gets the samples through a closure
/// that borrows it: two counters overflowed on the
/// same event, one sample each, lowest counter first.
#[test]
fn a_sink_of_its_own_gets_the_samples() {
    let g = Generation::Itanium2;
    let state = crate::testing::itanium_pmu();
    let (mut d, c) = driver!(&state, g);
    let n = sa(g, 10);
    let x =
        c.c5.configure(&mut d, &cycles_on(g, 5).sampling(n))
            .unwrap();
    let y =
        c.c4.configure(&mut d, &cycles_on(g, 4).sampling(n))
            .unwrap();
    let (_x, _y) = (x.enable(&mut d).unwrap(), y.enable(&mut d).unwrap());
    model(&mut d).inject(Event::new(CYCLES, 0, 10));
    assert!(model(&mut d).take_interrupt().is_some());
    let mut sink = Collected::default();
    let o = handle_pmi(&state, d.regs(), &mut (), ENTRY, 0x4000_0020, |s| {
        sink.sample(s)
    })
    .unwrap();
    assert_eq!(o.overflowed, CounterSet::single(4).with(5).bits());
    let none = |c| Sample::new(c, 1, 0x4000_0020).with_payload(Capture::None);
    assert_eq!(sink.0, [none(4), none(5)]);
}

#[test]
fn handler_order_is_pmc0_read_reloads_then_pmc0_write() {
    let g = Generation::Montecito;
    let state = crate::testing::itanium_pmu();
    let (mut d, c) = driver!(&state, g);
    let n = sa(g, 10);
    let m = c.montecito.unwrap();
    let x =
        m.c9.configure(&mut d, &cycles_on(g, 9).sampling(n))
            .unwrap();
    let y =
        c.c4.configure(&mut d, &cycles_on(g, 4).sampling(n))
            .unwrap();
    let _x = x.enable(&mut d).unwrap();
    let _y = y.enable(&mut d).unwrap();
    // Both overflow on the same event: one interrupt, two overflow bits.
    model(&mut d).inject(Event::new(CYCLES, 0, 10));
    assert!(model(&mut d).take_interrupt().is_some());
    d.regs().clear();
    let o = handle_pmi(&state, d.regs(), &mut (), ENTRY, 1, |_| {}).unwrap();
    assert_eq!(o.overflowed, CounterSet::single(4).with(9).bits());
    // Montecito's catalog says CPU_OP_CYCLES (12h) gains at most 1 per
    // cycle, so the frozen counters hold exactly 0 and are reloaded without
    // being read: PMC0 read, one PMD write each, PMC0 written last.
    let reload = n.preset();
    assert_eq!(
        d.regs().log(),
        [
            Access::ReadPmc {
                pmc: 0,
                value: 1 << 9 | 1 << 4 | 1
            },
            Access::WritePmd {
                pmd: 4,
                value: reload
            },
            Access::WritePmd {
                pmd: 9,
                value: reload
            },
            Access::WritePmc { pmc: 0, value: 0 },
        ]
    );
}

/// Four counters overflowing on one event: one interrupt, PMC0 read once
/// and written once, one reload per counter and no PMD read (CPU_CYCLES
/// gains at most one per cycle on Itanium 2).
#[test]
fn four_overflowed_counters_cost_one_pmc0_read_and_write() {
    let g = Generation::Itanium2;
    let state = crate::testing::itanium_pmu();
    let (mut d, c) = driver!(&state, g);
    let n = sa(g, 10);
    let h = [
        c.c4.configure(&mut d, &cycles_on(g, 4).sampling(n))
            .unwrap()
            .enable(&mut d)
            .unwrap()
            .erase(),
        c.c5.configure(&mut d, &cycles_on(g, 5).sampling(n))
            .unwrap()
            .enable(&mut d)
            .unwrap()
            .erase(),
        c.c6.configure(&mut d, &cycles_on(g, 6).sampling(n))
            .unwrap()
            .enable(&mut d)
            .unwrap()
            .erase(),
        c.c7.configure(&mut d, &cycles_on(g, 7).sampling(n))
            .unwrap()
            .enable(&mut d)
            .unwrap()
            .erase(),
    ];
    model(&mut d).inject(Event::new(CYCLES, 0, 10));
    assert!(model(&mut d).take_interrupt().is_some());
    d.regs().clear();
    let mut samples = 0;
    let o = handle_pmi(&state, d.regs(), &mut (), ENTRY, 1, |_| samples += 1).unwrap();
    assert_eq!(o.overflowed, CounterSet::range(4, 7).bits());
    assert_eq!(d.regs().take_counts(), counts(1, 1, 0, 4));
    assert_eq!(samples, 4);
    assert!((4..8).all(|i| state.pmi().periods(i) == 1));
    let _ = h;
}

#[test]
fn spurious_interrupt_is_one_read() {
    let state = crate::testing::itanium_pmu();
    let (mut d, _c) = driver!(&state, Generation::Itanium2);
    let o = handle_pmi(&state, d.regs(), &mut (), ENTRY, 0, |_| panic!("no sample")).unwrap();
    assert!(o.is_spurious());
    assert_eq!(d.regs().take_counts(), counts(1, 0, 0, 0));
    assert_eq!(state.pmi().spurious(), 1);
    // Frozen by someone, no overflow bit: unfrozen, still spurious.
    model(&mut d).write_pmc(0, 1).unwrap();
    let o = handle_pmi(&state, d.regs(), &mut (), ENTRY, 0, |_| panic!("no sample")).unwrap();
    assert!(o.is_spurious());
    assert_eq!(d.regs().take_counts(), counts(1, 1, 0, 0));
    assert!(!model(&mut d).frozen());
}

/// events = periods x N + residual, exactly, for N = 1 and up, on all three
/// generations, with halts (Itanium: saved counts) in between.
#[test]
fn conservation_over_randomised_runs() {
    let mut rnd = crate::testing::rng(0x9e37_79b9_7f4a_7c15u64);
    for g in Generation::ALL {
        for n in [1u64, 2, 3, 7, 100, 4096] {
            let state = crate::testing::itanium_pmu();
            let (mut d, c) = driver!(&state, g);
            let s = sa(g, n);
            let c6 =
                c.c6.configure(&mut d, &cycles_on(g, 6).sampling(s))
                    .unwrap();
            let mut c6: AnyHandle<Itanium> = c6.enable(&mut d).unwrap().erase();
            let (mut out, mut events) = (Vec::new(), 0u64);
            for step in 0..500u64 {
                events += run(&mut d, &state, 1 + rnd(3 * n), step, &mut out);
                if rnd(5) == 0 {
                    c6.halt(&mut d).unwrap();
                    model(&mut d).inject(Event::new(CYCLES, 0, 3)); // not counted
                    c6.resume(&mut d).unwrap();
                }
            }
            let (owed, residual) = s.split(c6.read(&mut d).unwrap());
            let periods = state.pmi().periods(6);
            assert_eq!(owed, 0, "{g:?} N = {n}: every overflow serviced");
            assert_eq!(events, periods * n + residual, "{g:?} N = {n}");
            assert_eq!(out.len() as u64, periods);
            assert_eq!(state.pmi().spurious(), 0);
            c6.release(&mut d).unwrap();
            d.retire();
        }
    }
}

/// A late interrupt (the skid of the other architectures' models, 1 to 100
/// events between the overflow and the handler) changes no Itanium count:
/// the overflow froze the PMU (PMC0.fr, SDM Vol. 2 7.2.2), so those events
/// are not counted, each interrupt completes exactly one period and the
/// handler reloads the preset; `events = periods x N + residual` with the
/// events the model counted.
#[test]
fn events_between_the_overflow_and_a_late_handler_are_not_counted() {
    for g in Generation::ALL {
        let state = crate::testing::itanium_pmu();
        let (mut d, c) = driver!(&state, g);
        let s = sa(g, 10);
        let c5 =
            c.c5.configure(&mut d, &cycles_on(g, 5).sampling(s))
                .unwrap();
        let c5 = c5.enable(&mut d).unwrap();
        let (mut events, mut out) = (0u64, Vec::new());
        for late in 1..=100u64 {
            let got = model(&mut d).inject(Event::new(CYCLES, 0, 10 + late));
            assert!(got.froze, "{g:?}");
            assert_eq!(got.counted_cycles, 10, "{g:?}: frozen from the overflow on");
            events += got.counted_cycles;
            assert_eq!(c5.read(&mut d).unwrap(), 0, "{g:?}: wrapped to 0 and held");
            assert!(model(&mut d).take_interrupt().is_some());
            handle_pmi(&state, d.regs(), &mut (), ENTRY, late, |o| out.push(o)).unwrap();
            assert_eq!(out.last().map(|o| o.periods), Some(1), "{g:?}");
        }
        let (owed, residual) = s.split(c5.read(&mut d).unwrap());
        assert_eq!((owed, residual), (0, 0), "{g:?}");
        assert_eq!(events, state.pmi().periods(5) * 10 + residual, "{g:?}");
        assert_eq!(state.pmi().periods(5), 100, "{g:?}");
        d.retire();
    }
}

/// The overflow between a halt's PMC write and the interrupt: on Itanium
/// the halt saves the reloaded point, the handler counts the period once.
#[test]
fn halt_with_a_pending_overflow_counts_it_once() {
    for g in Generation::ALL {
        let state = crate::testing::itanium_pmu();
        let (mut d, c) = driver!(&state, g);
        let s = sa(g, 10);
        let c4 =
            c.c4.configure(&mut d, &cycles_on(g, 4).sampling(s))
                .unwrap();
        let c4 = c4.enable(&mut d).unwrap();
        model(&mut d).inject(Event::new(CYCLES, 0, 10));
        let c4 = c4.halt(&mut d).unwrap();
        assert!(model(&mut d).take_interrupt().is_some());
        handle_pmi(&state, d.regs(), &mut (), ENTRY, 0, |_| {}).unwrap();
        assert_eq!(state.pmi().periods(4), 1);
        let c4 = c4.resume(&mut d).unwrap();
        model(&mut d).inject(Event::new(CYCLES, 0, 4));
        assert_eq!(s.split(c4.read(&mut d).unwrap()), (0, 4), "{g:?}");
        d.retire();
    }
}

/// HP Caliper's itlb measurement: sample every Nth ITLB miss through the
/// I-EAR; each overflow hands over the Nth miss's address and fill level,
/// on every generation.
#[test]
fn iear_samples_every_nth_itlb_miss() {
    for g in Generation::ALL {
        let state = crate::testing::itanium_pmu();
        let (mut d, c) = driver!(&state, g);
        let n = 3u64;
        let hw = HwCounter::new(g, 7).unwrap();
        let ear = iear(g, all_fills(g));
        let cfg = CounterConfig::itlb_sampling(hw, sa(g, n), ear).unwrap();
        let c7 = c.c7.configure(&mut d, &cfg).unwrap();
        assert_eq!(
            d.regs().take_counts(),
            counts(0, 2, 0, 1),
            "configure: I-EAR PMC, counter PMC, PMD"
        );
        let c7 = c7.enable(&mut d).unwrap();
        let fills: &[TlbFill] = if g == Generation::Itanium {
            &[TlbFill::Hpw, TlbFill::Software]
        } else {
            &[TlbFill::L2, TlbFill::Hpw, TlbFill::Software, TlbFill::Hpw]
        };
        let mut out = Vec::new();
        let mut expected = Vec::new();
        for i in 0..60u64 {
            let fill = fills[(i as usize * 7 / 3) % fills.len()];
            let address = 0x4000_0000 + i * 0x1040;
            model(&mut d).fetch_miss(FetchMiss::tlb(address, fill));
            if (i + 1) % n == 0 {
                expected.push(ItlbSample {
                    address: address & !0x1F,
                    fill: match fill {
                        TlbFill::L2 => ear::TlbFill::L2,
                        TlbFill::Hpw => ear::TlbFill::Hpw,
                        TlbFill::Software => ear::TlbFill::Software,
                    },
                });
            }
            if model(&mut d).take_interrupt().is_some() {
                d.regs().clear();
                handle_pmi(&state, d.regs(), &mut (), ENTRY, i, |s| out.push(s)).unwrap();
                assert_eq!(d.regs().take_counts(), counts(1, 1, 1, 1), "{g:?}");
            }
        }
        let got: Vec<_> = out.iter().map(|s| s.payload.itlb().unwrap()).collect();
        assert_eq!(got, expected, "{g:?}");
        for s in &got {
            let slot = <ItlbSample as Payload>::EMPTY_SLOT;
            s.store(&slot);
            assert_eq!(ItlbSample::load(&slot), Some(*s));
        }
        assert_eq!(state.pmi().periods(7), 20);
        d.regs().clear();
        let _ = c7.release(&mut d).unwrap();
        assert_eq!(d.regs().take_counts(), counts(1, 2, 0, 1), "release");
        d.retire();
    }
}

#[test]
fn calibration_is_shared_with_netburst() {
    let g = Generation::Itanium;
    let s = calibrate(1_000_000, 300, overflow_rule(g)).unwrap();
    assert_eq!(s.get(), 3333);
    assert_eq!(s.preset(), (1 << 32) - 3333);
    assert_eq!(s.rearm(0), (1, s.preset()), "no PMI delay: reload -N");
    assert!(
        calibrate(1 << 40, 1, overflow_rule(g)).is_err(),
        "above 2^31"
    );
    assert!(calibrate(1 << 40, 1, overflow_rule(Generation::Itanium2)).is_ok());
}

#[test]
fn releasing_pmc4_keeps_the_itanium2_enable_bit() {
    let g = Generation::Itanium2;
    let state = crate::testing::itanium_pmu();
    let (mut d, c) = driver!(&state, g);
    let c4 = c.c4.configure(&mut d, &cycles_on(g, 4)).unwrap();
    let c5 = c.c5.configure(&mut d, &cycles_on(g, 5)).unwrap();
    let (c4, c5) = (c4.enable(&mut d).unwrap(), c5.enable(&mut d).unwrap());
    let _ = c4.release(&mut d).unwrap();
    model(&mut d).inject(Event::new(CYCLES, 0, 9));
    assert_eq!(c5.read(&mut d).unwrap(), 9, "counter 5 still powered");
}

#[test]
fn erased_handles_refuse_cascading() {
    let g = Generation::Itanium2;
    let state = crate::testing::itanium_pmu();
    let (mut d, c) = driver!(&state, g);
    let mut a = c.c4.erase();
    let mut b = c.c5.erase();
    a.configure(&mut d, &cycles_on(g, 4)).unwrap();
    b.configure(&mut d, &cycles_on(g, 5)).unwrap();
    assert_eq!(
        b.cascade_from(&a, &mut d),
        Err(ErasedError::NotCascadePair { from: 4, to: 5 })
    );
    assert_eq!(b.state(), StateTag::Configured);
    assert!(!Itanium::can_cascade(4, 6));
}

/// The itlb path on the host: the overflow handler hands on each sampled
/// I-EAR capture as an itlb sample (address and fill level), the injected
/// mix (`pmu-report`'s itlb report tabulates such samples).
#[test]
fn handler_samples_are_the_injected_itlb_misses() {
    let g = Generation::Itanium2;
    let state = crate::testing::itanium_pmu();
    let (mut d, c) = driver!(&state, g);
    let hw = HwCounter::new(g, 5).unwrap();
    let cfg = CounterConfig::itlb_sampling(hw, sa(g, 2), iear(g, TlbFills::ALL)).unwrap();
    let _c5 =
        c.c5.configure(&mut d, &cfg)
            .unwrap()
            .enable(&mut d)
            .unwrap();
    // Pairs of misses, the second of each pair sampled: 2 L2, 1 HPW, 1 SW.
    let fills = [TlbFill::L2, TlbFill::L2, TlbFill::Hpw, TlbFill::Software];
    let mut samples = Vec::new();
    for (i, fill) in fills.iter().flat_map(|f| [*f, *f]).enumerate() {
        let address = 0x4000_0000 + (i as u64 % 4) * 0x40;
        model(&mut d).fetch_miss(FetchMiss::tlb(address, fill));
        if model(&mut d).take_interrupt().is_some() {
            handle_pmi(&state, d.regs(), &mut (), ENTRY, 0, |s| {
                samples.push(s.payload.itlb().unwrap());
            })
            .unwrap();
        }
    }
    let got: Vec<_> = samples.iter().map(|s| (s.address, s.fill)).collect();
    assert_eq!(
        got,
        [
            (0x4000_0040, TlbFill::L2),
            (0x4000_00C0, TlbFill::L2),
            (0x4000_0040, TlbFill::Hpw),
            (0x4000_00C0, TlbFill::Software),
        ]
    );
}

/// IA64_INST_RETIRED: code 08h, unit mask 0, up to 6 per cycle, counters
/// 4 and 5 on every generation (libpfm3's event tables).
const RETIRED: u8 = 0x08;

fn retired_on(g: Generation, n: u8) -> CounterConfig {
    let hw = HwCounter::new(g, n).unwrap();
    let pmc = pmc::CounterPmc::new(hw, EventCode::new(g, RETIRED).unwrap())
        .unwrap()
        .with_plm(Plm::ALL)
        .with_privileged(true);
    CounterConfig::counting(pmc)
}

/// An event that counts more than once per cycle leaves
/// the frozen counter past 0; the reload keeps it. With sample-after 1,
/// 520 events at 6 per cycle are 520 periods, not one per overflow.
#[test]
fn events_counting_several_per_cycle_are_not_lost() {
    for g in Generation::ALL {
        for n in [1u64, 4, 5, 13] {
            let state = crate::testing::itanium_pmu();
            let (mut d, c) = driver!(&state, g);
            let s = sa(g, n);
            let c4 = c.c4.configure(&mut d, &retired_on(g, 4).sampling(s));
            let c4 = c4.unwrap();
            assert!(!c4.programmed().one_per_cycle(), "maximum increment 6");
            let c4 = c4.enable(&mut d).unwrap();
            let (mut events, mut sampled) = (0u64, 0u64);
            while events < 520 {
                let got = model(&mut d).inject(Event::new(RETIRED, 0, 6).per_cycle(6));
                events += 6 * got.counted_cycles;
                if model(&mut d).take_interrupt().is_some() {
                    d.regs().clear();
                    let o = handle_pmi(&state, d.regs(), &mut (), ENTRY, 0, |o| {
                        sampled += u64::from(o.periods)
                    });
                    assert_eq!(o.unwrap().overflowed, CounterSet::single(4).bits());
                    // The reload is relative: the counter is read first.
                    assert_eq!(d.regs().take_counts(), counts(1, 1, 1, 1), "{g:?}");
                }
            }
            let (owed, residual) = s.split(c4.read(&mut d).unwrap());
            let periods = state.pmi().periods(4);
            assert_eq!(owed, 0, "{g:?} N = {n}");
            assert_eq!(events, periods * n + residual, "{g:?} N = {n}");
            assert_eq!(sampled, periods, "{g:?} N = {n}");
            if n == 1 {
                assert_eq!(periods, events, "{g:?}: a period per event");
            }
            d.retire();
        }
    }
}

/// Releasing a counter whose overflow interrupt is still
/// pending withdraws the overflow (PMC0 bit and freeze): the next owner's
/// count starts at 0, and the late interrupt is spurious.
#[test]
fn release_with_an_overflow_pending_leaves_nothing_for_the_next_owner() {
    for g in Generation::ALL {
        let state = crate::testing::itanium_pmu();
        let (mut d, c) = driver!(&state, g);
        let s = sa(g, 10);
        let config = cycles_on(g, 4).sampling(s);
        let c4 = c.c4.configure(&mut d, &config).unwrap();
        let c4 = c4.enable(&mut d).unwrap();
        model(&mut d).inject(Event::new(CYCLES, 0, 10));
        assert!(model(&mut d).frozen(), "{g:?}: interrupt pending");
        d.regs().clear();
        let c4 = c4.release(&mut d).unwrap();
        assert_eq!(
            &d.regs().log()[2..],
            [
                Access::ReadPmc {
                    pmc: 0,
                    value: 1 << 4 | 1
                },
                Access::WritePmc { pmc: 0, value: 0 },
            ],
            "{g:?}: the overflow is withdrawn, the PMU unfrozen"
        );
        assert!(!model(&mut d).frozen());
        let c4 = c4.configure(&mut d, &config).unwrap();
        let c4 = c4.enable(&mut d).unwrap();
        let o = handle_pmi(&state, d.regs(), &mut (), ENTRY, 0, |_| panic!("no sample"));
        assert!(o.unwrap().is_spurious(), "{g:?}");
        model(&mut d).inject(Event::new(CYCLES, 0, 5));
        assert_eq!(s.split(c4.read(&mut d).unwrap()), (0, 5), "{g:?}: 5 events");
        assert_eq!(state.pmi().periods(4), 0);
        d.retire();
    }
}

/// A release with another counter's overflow also pending keeps the PMU
/// frozen for that counter's interrupt, which then samples only it.
#[test]
fn release_keeps_another_counters_pending_overflow() {
    let g = Generation::Itanium2;
    let state = crate::testing::itanium_pmu();
    let (mut d, c) = driver!(&state, g);
    let s = sa(g, 10);
    let c4 = c.c4.configure(&mut d, &cycles_on(g, 4).sampling(s));
    let c5 = c.c5.configure(&mut d, &cycles_on(g, 5).sampling(s));
    let c4 = c4.unwrap().enable(&mut d).unwrap();
    let c5 = c5.unwrap().enable(&mut d).unwrap();
    model(&mut d).inject(Event::new(CYCLES, 0, 10));
    let _ = c4.release(&mut d).unwrap();
    assert!(model(&mut d).frozen());
    assert_eq!(model(&mut d).pmc(0), 1 << 5 | 1);
    let mut out = Vec::new();
    let o = handle_pmi(&state, d.regs(), &mut (), ENTRY, 7, |s| out.push(s)).unwrap();
    assert_eq!(o.overflowed, CounterSet::single(5).bits());
    assert_eq!((out.len(), state.pmi().periods(5)), (1, 1));
    assert_eq!(c5.read(&mut d).unwrap(), s.preset());
}

/// Randomised conservation on every generation: four sampling counters at
/// once (two counting an event that gains up to 6 per cycle, two counting
/// cycles), overflows serviced late or at once, spurious interrupts,
/// halts, and counters released and reconfigured with a random new
/// sample-after value, often with their overflow still pending. For every
/// configuration of every counter, `events = (periods + owed) x N +
/// residual` exactly when it is released, and the samples handed to the
/// sink add up to the periods.
#[test]
fn conservation_with_several_counters_multi_increments_and_releases() {
    let mut rnd = crate::testing::rng(0x2545_f491_4f6c_dd1du64);
    const NS: [u64; 6] = [1, 2, 3, 7, 50, 300];
    for g in Generation::ALL {
        let state = crate::testing::itanium_pmu();
        let (mut d, c) = driver!(&state, g);
        let config = |i: usize, s: SampleAfter| {
            let n = 4 + i as u8;
            if i < 2 {
                retired_on(g, n)
            } else {
                cycles_on(g, n)
            }
            .sampling(s)
        };
        let mut handles = [c.c4.erase(), c.c5.erase(), c.c6.erase(), c.c7.erase()];
        let mut n = [0u64; 4];
        let mut events = [0u64; 4];
        let mut sampled = [0u64; 4];
        let mut checked = 0;
        for (i, h) in handles.iter_mut().enumerate() {
            n[i] = NS[rnd(6) as usize];
            h.configure(&mut d, &config(i, sa(g, n[i]))).unwrap();
            h.enable(&mut d).unwrap();
        }
        for step in 0..3000u64 {
            let action = rnd(10);
            match action {
                0..=4 => {
                    let retired = rnd(2) == 0;
                    let k = if retired { 1 + rnd(6) } else { 1 };
                    let cycles = 1 + rnd(40);
                    let code = if retired { RETIRED } else { CYCLES };
                    let e = Event::new(code, 0, k * cycles).per_cycle(k as u8);
                    let got = model(&mut d).inject(e);
                    for (i, h) in handles.iter().enumerate() {
                        if (i < 2) == retired && h.state() == StateTag::Enabled {
                            events[i] += k * got.counted_cycles;
                        }
                    }
                }
                5 | 6 => {
                    // The interrupt, if one is pending; otherwise spurious.
                    model(&mut d).take_interrupt();
                    handle_pmi(&state, d.regs(), &mut (), ENTRY, step, |o| {
                        sampled[usize::from(o.counter - 4)] += u64::from(o.periods)
                    })
                    .unwrap();
                }
                7 => {
                    let h = &mut handles[rnd(4) as usize];
                    match h.state() {
                        StateTag::Enabled => h.halt(&mut d).unwrap(),
                        _ => h.resume(&mut d).unwrap(),
                    }
                }
                _ => {
                    let i = rnd(4) as usize;
                    let s = sa(g, n[i]);
                    let h = &mut handles[i];
                    let (owed, residual) = s.split(h.read(&mut d).unwrap());
                    let periods = state.pmi().periods(4 + i as u8);
                    assert_eq!(
                        events[i],
                        (periods + owed) * n[i] + residual,
                        "{g:?} counter {} N = {} step {step}",
                        4 + i,
                        n[i]
                    );
                    let at_halt = state.pmi().periods_at_halt(4 + i as u8);
                    assert_eq!(sampled[i] + at_halt, periods, "{g:?} counter {}", 4 + i);
                    checked += 1;
                    h.release(&mut d).unwrap();
                    n[i] = NS[rnd(6) as usize];
                    h.configure(&mut d, &config(i, sa(g, n[i]))).unwrap();
                    h.enable(&mut d).unwrap();
                    (events[i], sampled[i]) = (0, 0);
                }
            }
        }
        assert!(checked > 100, "{g:?}: {checked} configurations checked");
        d.retire();
    }
}

/// An Itanium 2 I-EAR image in cache mode with a latency
/// unit mask no source defines (here F9h) is refused by the driver, as the
/// strict model would refuse the PMC10 write; the defined masks pass.
#[test]
fn undefined_iear_latency_masks_are_refused() {
    let state = crate::testing::itanium_pmu();
    for g in [Generation::Itanium2, Generation::Montecito] {
        let (mut d, c) = driver!(&state, g);
        let c4 = HwCounter::new(g, 4).unwrap();
        let bad = IearConfig::from_bits_truncate(g, 0xfd32);
        let config = CounterConfig::itlb(c4, bad).unwrap();
        let e = c.c4.configure(&mut d, &config).unwrap_err();
        assert!(
            matches!(
                e.error,
                Error::Config(ConfigError::Pmc(PmcError::UndefinedEarUmask { .. }))
            ),
            "{g:?}: {:?}",
            e.error
        );
        assert_eq!(d.regs().counts(), counts(0, 0, 0, 0), "nothing written");
        // At least 1024 cycles (C0h): defined, accepted, and the model takes it.
        let good = IearConfig::from_bits_truncate(g, (0xfd32 & !(0xFF << 5)) | 0xC0 << 5);
        let config = CounterConfig::itlb(c4, good).unwrap();
        let c4h = e.counter.configure(&mut d, &config).unwrap();
        let _ = c4h.release(&mut d).unwrap();
        d.retire();
    }
}

/// Unclaimed tokens carry no payload (Montecito's eight are behind one
/// `Option` tag).
#[test]
fn unclaimed_tokens_are_zero_sized() {
    crate::owner!(Sized);
    use core::mem::size_of;
    assert_eq!(
        size_of::<ItaniumHandle<Sized, 4, crate::counter::state::Unclaimed>>(),
        0
    );
    assert_eq!(size_of::<MontecitoCounters<Sized>>(), 0);
    assert_eq!(size_of::<Counters<Sized>>(), 1);
}

mod captures;
mod group;
mod interrupts;

/// On Itanium: a driver dropped with a sampling
/// counter running (its handle alive) resets the PMU as a take does
/// (counter PMC at its power-up value, PMD 0, PMC0 unfrozen with no
/// overflow bit) and frees it; its owner stays held for good, and taking
/// it again says why.
#[test]
fn a_dropped_driver_resets_the_pmu_and_holds_its_owner() {
    crate::owner!(Dropped);
    crate::owner!(Next);
    let g = Generation::Itanium2;
    let pmu = crate::testing::itanium_pmu();
    let mut m = ItaniumModel::new(model_generation(g));
    m.set_psr(Psr::MONITORING);
    let mut rec = Recording::<_, 64>::new(m);
    let (mut d, c) = ItaniumDriver::<Dropped, _>::take(&mut rec, g, &pmu).unwrap();
    let c4 =
        c.c4.configure(&mut d, &cycles_on(g, 4).sampling(sa(g, 100)));
    let c4 = c4.unwrap().enable(&mut d).unwrap();
    let _ = d.regs().inner_mut().inject(Event::new(CYCLES, 0, 10));
    let running = (d.regs().read_pmc(4).unwrap(), d.regs().read_pmd(4).unwrap());
    drop(d);
    let _alive = c4;
    let default = g.pmc(4).map_or(0, |i| i.default);
    assert_ne!(running.0, default, "the counter was programmed");
    assert_ne!(running.1, 0, "and counted");
    assert_eq!(
        rec.read_pmc(4).unwrap(),
        default,
        "PMC4 at its power-up value"
    );
    assert_eq!(rec.read_pmd(4).unwrap(), 0, "PMD4 zeroed");
    assert_eq!(rec.read_pmc(0).unwrap(), pmc::Pmc0::UNFROZEN.bits());
    assert!(!pmu.is_taken(), "the PMU is free");
    rec.clear();
    let e = match ItaniumDriver::<Dropped, _>::take(&mut rec, g, &pmu) {
        Err(e) => e,
        Ok(_) => panic!("a dropped driver's owner taken again"),
    };
    let owner = core::any::type_name::<Dropped>();
    assert_eq!(e, InitError::OwnerDropped { owner });
    assert!(e.to_string().starts_with(&format!(
        "the driver of owner `{owner}` was dropped without `give_back`"
    )));
    assert_eq!(rec.take_counts(), counts(0, 0, 0, 0), "refused untouched");
    let (d, c) = ItaniumDriver::<Next, _>::take(&mut rec, g, &pmu).unwrap();
    assert!(d.give_back(c).is_ok());
}

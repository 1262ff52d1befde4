//! The architectural PMU's driver against its model (a test instrument
//! written from the SDM, independently of the driver's layouts): behaviour,
//! and exact register traffic per operation through the recording backend.
//! All counts here come from the model.

use std::vec::Vec;

use super::*;
use crate::access::{Access, AccessCounts, Recording};
use crate::apic::{LvtPerfCounter, LvtPerfCounterEntry, PmiDelivery, Vector};
use crate::arch::archperf::{IA32_PERF_GLOBAL_CTRL, IA32_PERF_GLOBAL_STATUS, IA32_PERFEVTSEL0};
use crate::arch::handle_pmi;
use crate::counter::{Group, Owner};
use crate::model::archperf::{ArchPerfModel, Config, Event, Privilege};
use crate::sampling::Sample;

type Model = Recording<ArchPerfModel, 256>;
type Ap<'s, O> = ArchPerfDriver<'s, O, Model>;

const CYCLES: (u8, u8) = (0x3C, 0x00);
const INSTRUCTIONS: (u8, u8) = (0xC0, 0x00);

fn counts(reads: u32, writes: u32, rdpmc: u32) -> AccessCounts {
    AccessCounts::msr(reads, writes, rdpmc)
}

fn cpu(m: &ArchPerfModel) -> detect::ArchPerfCpu {
    detect::detect(m, &mut m.clone())
        .unwrap()
        .arch_perf()
        .expect("the model is an architectural PMU")
}

fn take<O: Owner>(pmu: &ArchPerfPmu, config: Config) -> (Ap<'_, O>, Counters<O>) {
    let m = ArchPerfModel::new(config);
    let info = cpu(&m);
    let (mut d, c) = ArchPerfDriver::take(Recording::new(m), &info, pmu).unwrap();
    d.msr().clear();
    (d, c)
}

/// A driver on a fresh model, for an owner type of its own (tests run in
/// parallel; an owner is taken by one driver at a time).
macro_rules! driver {
    ($pmu:expr, $config:expr) => {{
        crate::owner!(Fresh);
        take::<Fresh>($pmu, $config)
    }};
}

fn model<'a, O: Owner>(d: &'a mut Ap<'_, O>) -> &'a mut ArchPerfModel {
    d.msr().inner_mut()
}

fn inject<O: Owner>(d: &mut Ap<'_, O>, (select, umask): (u8, u8), n: u64) {
    model(d).inject(Event::new(select, umask, n));
}

fn spec(s: &str) -> EventSpec {
    s.parse().unwrap()
}

#[derive(Default)]
struct Lvt(Vec<LvtPerfCounter>);

impl LvtPerfCounterEntry for Lvt {
    fn write_lvt_perf_counter(&mut self, entry: LvtPerfCounter) {
        self.0.push(entry);
    }
}

fn entry() -> LvtPerfCounter {
    LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(0xF0).unwrap()))
}

/// Deliver the model's PMI, if raised, through the handler.
fn service<O: Owner>(d: &mut Ap<'_, O>, lvt: &mut Lvt, rip: u64, out: &mut Vec<Sample>) -> bool {
    if !model(d).take_pmi() {
        return false;
    }
    let pmu = d.physical();
    handle_pmi(pmu, d.msr(), lvt, entry(), rip, |s| {
        out.push(s.with_payload(()))
    })
    .unwrap();
    true
}

/// Take on a clean PMU: every select and the fixed control read, the
/// enabled global bits and every status bit of the driver's counters
/// cleared; then the exact traffic of each operation on a general counter.
#[test]
fn counting_on_a_general_counter_has_exact_traffic() {
    let pmu = crate::testing::archperf_pmu();
    crate::owner!(Cpu);
    let m = ArchPerfModel::new(Config::skylake());
    let info = cpu(&m);
    let (mut d, c) =
        ArchPerfDriver::<Cpu, _>::take(Recording::<_, 256>::new(m), &info, &pmu).unwrap();
    let t = d.msr().take_counts();
    assert_eq!(
        (t.msr_reads, t.rdpmc),
        (4 + 1 + 1, 0),
        "4 selects, FIXED_CTR_CTRL, GLOBAL_CTRL"
    );
    assert!(t.msr_writes <= 2, "GLOBAL_CTRL if set, OVF_CTRL: {t:?}");
    assert_eq!(model(&mut d).read_msr(IA32_PERF_GLOBAL_CTRL).unwrap(), 0);
    assert!(d.firmware().is_empty());

    let g0 =
        c.g0.configure(&mut d, &CounterConfig::counting(spec("instructions:k")))
            .unwrap();
    assert_eq!(
        d.msr().take_counts(),
        counts(0, 2, 0),
        "preset, PERFEVTSEL0 with EN"
    );
    inject(&mut d, INSTRUCTIONS, 7);
    assert_eq!(
        g0.read(&mut d).unwrap(),
        0,
        "not counting before GLOBAL_CTRL enables it"
    );
    d.msr().clear();
    let g0 = g0.enable(&mut d).unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 1, 0), "GLOBAL_CTRL");
    inject(&mut d, INSTRUCTIONS, 1000);
    model(&mut d).inject(Event::new(0xC0, 0x00, 50).at(Privilege::Usr));
    assert_eq!(g0.read(&mut d).unwrap(), 1000, ":k counts CPL 0 only");
    assert_eq!(d.msr().take_counts(), counts(0, 0, 1), "one RDPMC");
    let g0 = g0.halt(&mut d).unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 1, 0), "GLOBAL_CTRL");
    inject(&mut d, INSTRUCTIONS, 9);
    assert_eq!(g0.read(&mut d).unwrap(), 1000, "halted");
    let g0 = g0.resume(&mut d).unwrap();
    inject(&mut d, INSTRUCTIONS, 1);
    assert_eq!(g0.read(&mut d).unwrap(), 1001);
    d.msr().clear();
    let g0 = g0.halt(&mut d).unwrap().release(&mut d).unwrap();
    assert_eq!(
        d.msr().take_counts(),
        counts(0, 3, 0),
        "halt; PERFEVTSEL0 = 0, counter 0"
    );
    assert_eq!(model(&mut d).read_msr(IA32_PERFEVTSEL0).unwrap(), 0);
    assert_eq!(
        model(&mut d).counter(0),
        0,
        "nothing left for the next owner"
    );
    let _ = d.give_back(Counters { g0, ..c });
    assert!(!pmu.is_taken());
}

/// The fixed counters count their one event each, enabled by their field
/// of FIXED_CTR_CTRL and their GLOBAL_CTRL bit; another event is refused.
#[test]
fn fixed_counters_count_their_event() {
    let pmu = crate::testing::archperf_pmu();
    let (mut d, c) = driver!(&pmu, Config::skylake());
    let (f0, f1) = (c.f0.unwrap(), c.f1.unwrap());
    let e = f0
        .configure(&mut d, &CounterConfig::counting(spec("cycles")))
        .unwrap_err();
    assert_eq!(
        e.error,
        Error::Config(ConfigError::NotFixedEvent { fixed: 0 })
    );
    assert_eq!(d.msr().take_counts(), counts(0, 0, 0), "nothing written");
    let f0 = e
        .counter
        .configure(&mut d, &CounterConfig::counting(spec("instructions")))
        .unwrap();
    let f1 = f1
        .configure(&mut d, &CounterConfig::counting(spec("cycles:u")))
        .unwrap();
    assert_eq!(
        d.msr().take_counts(),
        counts(0, 4, 0),
        "2 presets, FIXED_CTR_CTRL twice"
    );
    assert_eq!(
        FixedCtrCtrl::from_bits(model(&mut d).read_msr(IA32_FIXED_CTR_CTRL).unwrap()).get(1),
        FixedCtl::new(false, true, false)
    );
    let mut g = Group::new([f0.erase(), f1.erase()]).unwrap();
    g.start(&mut d).unwrap();
    assert_eq!(
        d.msr().take_counts(),
        counts(0, 1, 0),
        "one GLOBAL_CTRL write starts both"
    );
    inject(&mut d, INSTRUCTIONS, 300);
    model(&mut d).inject(Event::new(0x3C, 0x00, 40).at(Privilege::Usr));
    inject(&mut d, CYCLES, 5);
    assert_eq!(g.read(&mut d).unwrap(), [300, 40]);
    assert_eq!(
        d.msr().take_counts(),
        counts(0, 2, 2),
        "stopped, 2 RDPMC (bit 30), restored"
    );
    g.stop(&mut d).unwrap();
    assert_eq!(
        d.msr().take_counts(),
        counts(0, 1, 0),
        "one GLOBAL_CTRL write stops both"
    );
    for m in g.into_members().iter_mut() {
        m.release(&mut d).unwrap();
    }
    assert_eq!(model(&mut d).read_msr(IA32_FIXED_CTR_CTRL).unwrap(), 0);
}

/// A group of general counters starts and stops at one instant (one
/// GLOBAL_CTRL write) and reads one snapshot.
#[test]
fn a_group_starts_stops_and_reads_at_one_instant() {
    let pmu = crate::testing::archperf_pmu();
    let (mut d, c) = driver!(&pmu, Config::alder_lake_p_core());
    let cfg = CounterConfig::counting(spec("cycles"));
    let a = c.g0.configure(&mut d, &cfg).unwrap().erase();
    let b = c.g1.configure(&mut d, &cfg).unwrap().erase();
    let e = c.g2.unwrap().configure(&mut d, &cfg).unwrap().erase();
    d.msr().clear();
    let mut g = Group::new([a, b, e]).unwrap();
    g.start(&mut d).unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 1, 0));
    assert_eq!(
        model(&mut d).read_msr(IA32_PERF_GLOBAL_CTRL).unwrap(),
        0b111,
        "the three bits at once"
    );
    inject(&mut d, CYCLES, 123);
    assert_eq!(g.read(&mut d).unwrap(), [123; 3]);
    assert_eq!(
        model(&mut d).read_msr(IA32_PERF_GLOBAL_CTRL).unwrap(),
        0b111,
        "restored"
    );
    g.stop(&mut d).unwrap();
    inject(&mut d, CYCLES, 5);
    assert_eq!(g.read(&mut d).unwrap(), [123; 3]);
}

/// The model with time passing: 3 instructions retire before every
/// register access (the driver's code runs between them).
struct Busy(ArchPerfModel);

impl crate::access::MsrAccess for Busy {
    type Error = <ArchPerfModel as crate::access::MsrAccess>::Error;
    fn read_msr(&mut self, msr: u32) -> Result<u64, Self::Error> {
        self.0.inject(Event::new(0xC0, 0, 3));
        crate::access::MsrAccess::read_msr(&mut self.0, msr)
    }
    fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Self::Error> {
        self.0.inject(Event::new(0xC0, 0, 3));
        crate::access::MsrAccess::write_msr(&mut self.0, msr, value)
    }
    fn rdpmc(&mut self, index: u32) -> Result<u64, Self::Error> {
        self.0.inject(Event::new(0xC0, 0, 3));
        crate::access::MsrAccess::rdpmc(&mut self.0, index)
    }
}

/// A group stop halts its sampling members with its one `GLOBAL_CTRL`
/// write and only then reads each as a halt does (the sweep in
/// `tests/interrupts.rs` checks every instant too): the read used to come first, while the
/// member still counted until the bracket's write, so an overflow in
/// between left it halted past its overflow, its status bit set and its
/// period unaccounted. Here the member, at the start of a period of 5,
/// counts 3 events before the write and none after: the read finds 3, and
/// the traffic is the same as before (1 WRMSR, 1 RDPMC).
#[test]
fn a_group_stop_reads_its_sampling_members_once_they_stop() {
    let pmu = crate::testing::archperf_pmu();
    crate::owner!(Cpu);
    let m = ArchPerfModel::new(Config::skylake());
    let info = cpu(&m);
    let (mut d, c) =
        ArchPerfDriver::<Cpu, _>::take(Recording::<_, 16>::new(Busy(m)), &info, &pmu).unwrap();
    let n = SampleAfter::new(5, d.overflow_rule()).unwrap();
    let x = c.g0.configure(
        &mut d,
        &CounterConfig::counting(spec("instructions")).sampling(n),
    );
    let b =
        c.g1.configure(&mut d, &CounterConfig::counting(spec("instructions")));
    let mut g = Group::new([x.unwrap().erase(), b.unwrap().erase()]).unwrap();
    g.start(&mut d).unwrap();
    assert_eq!(
        d.msr().inner_mut().0.counter(0),
        n.preset(),
        "started with the write"
    );
    d.msr().clear();
    g.stop(&mut d).unwrap();
    let log: Vec<Access> = d.msr().log().to_vec();
    assert_eq!(d.msr().take_counts(), counts(0, 1, 1), "GLOBAL_CTRL, RDPMC");
    assert!(
        matches!(
            log[..],
            [
                Access::WriteMsr {
                    msr: IA32_PERF_GLOBAL_CTRL,
                    ..
                },
                Access::Rdpmc { index: 0, .. }
            ]
        ),
        "{log:?}"
    );
    let model = &d.msr().inner_mut().0;
    assert_eq!(
        n.split(model.counter(0)),
        (0, 3),
        "stopped 3 into its period"
    );
    assert_eq!(model.counter(1), 3);
    assert_eq!(model.global_status(), 0);
    assert_eq!(pmu.pmi().periods_at_halt(0), 0);
}

/// Sampling: a PMI per period with the interrupted RIP, re-armed relative
/// to what the counter holds (skid included), one status read and one
/// acknowledgement per PMI; conservation exact.
#[test]
fn sampling_services_each_overflow_with_exact_traffic() {
    let pmu = crate::testing::archperf_pmu();
    let (mut d, c) = driver!(&pmu, Config::skylake());
    let n = SampleAfter::new(100, d.overflow_rule()).unwrap();
    let g1 =
        c.g1.configure(&mut d, &CounterConfig::counting(spec("cycles")).sampling(n))
            .unwrap();
    let g1 = g1.enable(&mut d).unwrap();
    let (mut lvt, mut out) = (Lvt::default(), Vec::new());
    let mut events = 0;
    for step in 0..25u64 {
        inject(&mut d, CYCLES, 40 + step % 7);
        events += 40 + step % 7;
        d.msr().clear();
        if service(&mut d, &mut lvt, 0x1000 + step, &mut out) {
            assert_eq!(
                d.msr().take_counts(),
                counts(1, 2, 1),
                "status, RDPMC, counter, OVF_CTRL"
            );
        }
    }
    let raw = g1.read(&mut d).unwrap();
    let (owed, residual) = n.split(raw);
    let periods = pmu.pmi().periods(1);
    assert_eq!(events, (periods + owed) * 100 + residual);
    assert_eq!(
        out.iter().map(|s| u64::from(s.periods)).sum::<u64>(),
        periods
    );
    assert!(out.iter().all(|s| s.counter == 1));
    assert_eq!(
        lvt.0.len() as u64,
        pmu.pmi().interrupts(),
        "the LVT unmasked every time"
    );
    assert_eq!(
        model(&mut d).global_status(),
        0,
        "every overflow acknowledged"
    );
    let g1 = g1.halt(&mut d).unwrap();
    let (_, residual_after) = n.split(g1.read(&mut d).unwrap());
    assert_eq!(residual_after, residual);
    let _ = g1.release(&mut d).unwrap();
}

/// A kernel's consumer of its own type.
#[derive(Default)]
struct Collected(Vec<Sample>);

impl Collected {
    fn sample(&mut self, s: Sample<Capture>) {
        self.0.push(s.with_payload(()));
    }
}

/// A consumer of the kernel's own type gets the samples through a closure
/// that borrows it: 120 instructions at 50 per sample are 2 periods in one
/// interrupt, 20 into the third.
#[test]
fn a_sink_of_its_own_gets_the_samples() {
    let pmu = crate::testing::archperf_pmu();
    let (mut d, c) = driver!(&pmu, Config::skylake());
    let n = SampleAfter::new(50, d.overflow_rule()).unwrap();
    let config = CounterConfig::counting(spec("instructions")).sampling(n);
    let g2 =
        c.g2.unwrap()
            .configure(&mut d, &config)
            .unwrap()
            .enable(&mut d);
    let g2 = g2.unwrap();
    inject(&mut d, INSTRUCTIONS, 120);
    assert!(model(&mut d).take_pmi());
    let (mut lvt, mut sink) = (Lvt::default(), Collected::default());
    let out = handle_pmi(&pmu, d.msr(), &mut lvt, entry(), 0x77, |s| sink.sample(s)).unwrap();
    let g = Counter::general(2).unwrap();
    assert_eq!(out.overflowed, CounterSet::EMPTY.with(g).bits());
    assert_eq!(sink.0, [Sample::new(2, 2, 0x77)]);
    assert_eq!(n.split(g2.read(&mut d).unwrap()), (0, 20));
}

/// A PMI with skid: the counter counted past its overflow before the
/// handler ran; the re-arm keeps those events in the next period.
#[test]
fn skid_is_kept_in_the_next_period() {
    let pmu = crate::testing::archperf_pmu();
    let (mut d, c) = driver!(&pmu, Config::skylake());
    model(&mut d).set_skid(7);
    let n = SampleAfter::new(50, d.overflow_rule()).unwrap();
    let g0 =
        c.g0.configure(
            &mut d,
            &CounterConfig::counting(spec("instructions")).sampling(n),
        )
        .unwrap();
    let g0 = g0.enable(&mut d).unwrap();
    let (mut lvt, mut out) = (Lvt::default(), Vec::new());
    for _ in 0..57 {
        inject(&mut d, INSTRUCTIONS, 1);
        service(&mut d, &mut lvt, 1, &mut out);
    }
    assert_eq!(out.len(), 1, "the PMI came 7 events after the overflow");
    assert_eq!(
        g0.read(&mut d).unwrap(),
        n.at_residual(7),
        "the 7 events of skid kept"
    );
}

/// Skid of 1 to 100 events ([`ArchPerfModel::set_skid`]), on a general
/// and a fixed counter: the PMI comes `skid` increments after the
/// overflow, and the handler, re-arming relative to the count it reads,
/// keeps those events (and any the delivery adds) in the next period or in
/// whole periods: each sample completes exactly `1 + (skid + late) div N`
/// periods, and `events = periods x N + residual` at the end.
#[test]
fn skid_of_1_to_100_events_keeps_every_count_exact() {
    let mut rnd = crate::testing::rng(0x5C1D_0002);
    crate::owner!(Skid);
    for skid in 1..=100u64 {
        for (fixed, n) in [(false, 3u64), (false, 37), (true, 250)] {
            let pmu = crate::testing::archperf_pmu();
            let (mut d, c) = take::<Skid>(&pmu, Config::skylake());
            model(&mut d).set_skid(skid);
            let rule = if fixed {
                d.fixed_overflow_rule()
            } else {
                d.overflow_rule()
            };
            let sa = SampleAfter::new(n, rule).unwrap();
            let config = CounterConfig::counting(spec("instructions")).sampling(sa);
            let mut all = c.erase_all();
            let slot = if fixed { 8 } else { 0 };
            let mut h = all[slot].take().unwrap();
            h.configure(&mut d, &config).unwrap();
            h.enable(&mut d).unwrap();
            let (mut lvt, mut samples, mut events) = (Lvt::default(), Vec::new(), 0u64);
            let mut left = 4 * (n + skid);
            while left > 0 {
                let run = model(&mut d).inject_until_pmi(Event::new(0xC0, 0, left));
                (events, left) = (events + run.injected, left - run.injected);
                if !run.pmi_pending {
                    continue;
                }
                let late = rnd(4).min(left);
                inject(&mut d, INSTRUCTIONS, late);
                (events, left) = (events + late, left - late);
                let before = samples.len();
                assert!(service(&mut d, &mut lvt, events, &mut samples));
                assert_eq!(
                    u64::from(samples[before].periods),
                    1 + (skid + late) / n,
                    "skid {skid}, N = {n}, fixed {fixed}"
                );
            }
            let (owed, residual) = sa.split(h.read(&mut d).unwrap());
            let periods = pmu.pmi().periods(h.index());
            let what = format!("skid {skid}, N = {n}, fixed {fixed}");
            assert_eq!(events, (periods + owed) * n + residual, "{what}");
            let sampled: u64 = samples.iter().map(|s| u64::from(s.periods)).sum();
            assert_eq!(sampled, periods, "{what}");
            assert!(periods >= 3, "{what}: {periods} periods");
            assert_eq!(pmu.pmi().spurious(), 0, "{what}");
            h.halt(&mut d).unwrap();
            h.release(&mut d).unwrap();
            all[slot] = Some(h);
            let Ok(counters) = Counters::from_erased(all) else {
                panic!("every token back")
            };
            let _ = d.give_back(counters);
        }
    }
}

/// Counters the firmware left enabled are reported and left alone: never
/// written, their GLOBAL_CTRL bit kept, configuring them refused.
#[test]
fn counters_the_firmware_uses_are_left_alone() {
    let pmu = crate::testing::archperf_pmu();
    crate::owner!(Kernel);
    let mut m = ArchPerfModel::new(Config::skylake());
    let firmware_select = 0x3C | 1 << 17 | 1 << 22; // cycles, OS, EN
    m.write_msr(IA32_PERFEVTSEL0 + 3, firmware_select).unwrap();
    m.write_msr(IA32_FIXED_CTR_CTRL, 0b0011 << 8).unwrap(); // fixed 2: OS and USR
    m.write_msr(IA32_PERF_GLOBAL_CTRL, 1 << 3 | 1 << 34 | 1 << 1)
        .unwrap();
    let info = cpu(&m);
    let (mut d, c) =
        ArchPerfDriver::<Kernel, _>::take(Recording::<_, 256>::new(m), &info, &pmu).unwrap();
    let g3 = Counter::general(3).unwrap();
    let f2 = Counter::fixed(2).unwrap();
    assert_eq!(d.firmware(), CounterSet::EMPTY.with(g3).with(f2));
    assert_eq!(
        model(&mut d).read_msr(IA32_PERF_GLOBAL_CTRL).unwrap(),
        1 << 3 | 1 << 34,
        "the firmware's bits kept, the stray bit 1 cleared"
    );
    assert_eq!(
        model(&mut d).read_msr(IA32_PERFEVTSEL0 + 3).unwrap(),
        firmware_select
    );
    d.msr().clear();
    let e =
        c.g3.unwrap()
            .configure(&mut d, &CounterConfig::counting(spec("cycles")))
            .unwrap_err();
    assert_eq!(e.error, Error::Config(ConfigError::UsedByFirmware(3)));
    assert_eq!(d.msr().take_counts(), counts(0, 0, 0));
    // The driver's own GLOBAL_CTRL writes keep the firmware's counters on.
    let g0 =
        c.g0.configure(&mut d, &CounterConfig::counting(spec("cycles")))
            .unwrap();
    let g0 = g0.enable(&mut d).unwrap();
    assert_eq!(
        model(&mut d).read_msr(IA32_PERF_GLOBAL_CTRL).unwrap(),
        1 | 1 << 3 | 1 << 34
    );
    let _ = g0.halt(&mut d).unwrap().release(&mut d).unwrap();
    assert_eq!(
        model(&mut d).read_msr(IA32_PERF_GLOBAL_CTRL).unwrap(),
        1 << 3 | 1 << 34
    );
}

/// Without full-width writes a preset is written to IA32_PMCx (bits 31:0,
/// sign-extended), so a period above 2^31 is refused; with them,
/// IA32_A_PMCx takes any period the width allows.
#[test]
fn legacy_and_full_width_presets() {
    let pmu = crate::testing::archperf_pmu();
    let (mut d, c) = driver!(&pmu, Config::core2());
    assert!(!d.cpu().full_width_write);
    let long = SampleAfter::new((1 << 31) + 1, d.overflow_rule()).unwrap();
    let e =
        c.g0.configure(
            &mut d,
            &CounterConfig::counting(spec("cycles")).sampling(long),
        )
        .unwrap_err();
    assert_eq!(e.error, Error::Config(ConfigError::PeriodNeedsFullWidth));
    let n = SampleAfter::new(1 << 31, d.overflow_rule()).unwrap();
    let g0 = e
        .counter
        .configure(&mut d, &CounterConfig::counting(spec("cycles")).sampling(n))
        .unwrap();
    assert_eq!(
        model(&mut d).counter(0),
        n.preset(),
        "-2^31 through the legacy write"
    );
    let _ = g0.release(&mut d).unwrap();

    let pmu = crate::testing::archperf_pmu();
    let (mut d, c) = driver!(&pmu, Config::skylake());
    let long = SampleAfter::new(1 << 40, d.overflow_rule()).unwrap();
    let g0 =
        c.g0.configure(
            &mut d,
            &CounterConfig::counting(spec("cycles")).sampling(long),
        )
        .unwrap();
    assert_eq!(
        model(&mut d).counter(0),
        long.preset(),
        "full width through IA32_A_PMC0"
    );
    let _ = g0.release(&mut d).unwrap();
}

/// Version 1 has no GLOBAL_CTRL: EN is the start and the stop.
#[test]
fn version_1_starts_with_en() {
    let pmu = crate::testing::archperf_pmu();
    let (mut d, c) = driver!(&pmu, Config::v1());
    assert!(c.f0.is_none(), "no fixed counters on v1");
    let g1 =
        c.g1.configure(&mut d, &CounterConfig::counting(spec("cycles")))
            .unwrap();
    inject(&mut d, CYCLES, 5);
    assert_eq!(g1.read(&mut d).unwrap(), 0);
    d.msr().clear();
    let g1 = g1.enable(&mut d).unwrap();
    assert_eq!(
        d.msr().take_counts(),
        counts(0, 1, 0),
        "PERFEVTSEL1 with EN"
    );
    inject(&mut d, CYCLES, 5);
    let g1 = g1.halt(&mut d).unwrap();
    inject(&mut d, CYCLES, 5);
    assert_eq!(g1.read(&mut d).unwrap(), 5);
    let _ = g1.release(&mut d).unwrap();
    // No GLOBAL_STATUS on v1: the handler could not find an overflow.
    let n = SampleAfter::new(10, d.overflow_rule()).unwrap();
    let e =
        c.g0.configure(&mut d, &CounterConfig::counting(spec("cycles")).sampling(n))
            .unwrap_err();
    assert_eq!(e.error, Error::Config(ConfigError::NoOverflowStatus));
}

/// A kernel that routes every NMI to the handler
/// (as perf does), on a version-1 part, whose `IA32_PERF_GLOBAL_STATUS`
/// does not exist (the model refuses its read, as the hardware's #GP).
/// With a counter counting, an NMI that is not the PMU's is answered "not
/// ours" with one read of an MSR version 1 has (`IA32_PERFEVTSEL0`,
/// `PmiState`'s status register there), and the LVT entry is written back
/// as always.
#[test]
fn an_nmi_on_version_1_touches_no_missing_msr() {
    let pmu = crate::testing::archperf_pmu();
    let (mut d, c) = driver!(&pmu, Config::v1());
    assert!(
        model(&mut d).read_msr(IA32_PERF_GLOBAL_STATUS).is_err(),
        "the v1 model has no GLOBAL_STATUS: its read faults"
    );
    let g0 =
        c.g0.configure(&mut d, &CounterConfig::counting(spec("cycles")))
            .unwrap()
            .enable(&mut d)
            .unwrap();
    inject(&mut d, CYCLES, 7);
    d.msr().clear();
    let mut lvt = Lvt::default();
    let nmi = LvtPerfCounter::new(PmiDelivery::Nmi);
    let state = d.pmi_state();
    let out = handle_pmi(&pmu, d.msr(), &mut lvt, nmi, 0x1000, |_| {
        panic!("no sample")
    })
    .unwrap();
    assert!(out.is_spurious(), "not ours");
    let select = model(&mut d).read_msr(IA32_PERFEVTSEL0).unwrap();
    assert_eq!(
        d.msr().log(),
        [Access::ReadMsr {
            msr: IA32_PERFEVTSEL0,
            value: select
        }],
        "one read of an MSR version 1 has"
    );
    assert_eq!(lvt.0, [nmi], "the entry written back");
    assert_eq!((state.interrupts(), state.spurious()), (1, 1));
    assert_eq!(g0.read(&mut d).unwrap(), 7, "the count untouched");
    let _ = g0.release(&mut d).unwrap();
}

/// CMASK, INV and EDGE reach the select: two events in a clock count one
/// cycle with CMASK 2.
#[test]
fn cmask_counts_cycles() {
    let pmu = crate::testing::archperf_pmu();
    let (mut d, c) = driver!(&pmu, Config::skylake());
    let g0 = c.g0.configure(
        &mut d,
        &CounterConfig::counting(spec("event=0xc0,umask=0x00,cmask=2")),
    );
    let g0 = g0.unwrap().enable(&mut d).unwrap();
    let two = Event::new(0xC0, 0x00, 2);
    let one = Event::new(0xC0, 0x00, 1);
    model(&mut d).cycle(&[two]);
    model(&mut d).cycle(&[one]);
    model(&mut d).cycle(&[two, one]);
    assert_eq!(g0.read(&mut d).unwrap(), 2, "the clocks with 2 or more");
    let _ = g0.halt(&mut d).unwrap().release(&mut d).unwrap();
}

/// An architectural event CPUID marks unavailable is refused on a general
/// counter; a counter CPUID does not report has no token.
#[test]
fn unavailable_events_and_absent_counters() {
    let pmu = crate::testing::archperf_pmu();
    let config = Config {
        unavailable: 1 << 4, // LLC Misses
        ..Config::skylake()
    };
    let (mut d, c) = driver!(&pmu, config);
    assert!(c.g4.is_none() && c.f3.is_none());
    let e =
        c.g0.configure(&mut d, &CounterConfig::counting(spec("cache-misses")))
            .unwrap_err();
    let Error::Config(ConfigError::NotOnThisCpu(lack)) = e.error else {
        panic!("{:?}", e.error)
    };
    assert_eq!(lack.missing, Missing::Event(ArchEvent::LlcMisses));
    assert_eq!(
        (lack.core_type, lack.leaf),
        (None, detect::Enumeration::Leaf0A)
    );
    assert_eq!(
        e.error.to_string(),
        "configuration refused: the architectural event cache-misses (2EH/41H, CPUID event bit 4) is not on this CPU: CPUID.0AH:EBX[4] is set or beyond EAX[31:24]'s vector length (its available events: 0x6f)"
    );
    assert_eq!(
        d.check(&spec("cache-misses")),
        Err(ConfigError::NotOnThisCpu(lack))
    );
    assert_eq!(d.check(&spec("cache-references")), Ok(()));
    // Fixed counter 3's pseudo-encoding, on a part without it.
    let Err(ConfigError::NotOnThisCpu(slots)) = d.check(&spec("slots")) else {
        panic!("slots without fixed counter 3")
    };
    assert_eq!(slots.missing, Missing::Counter(Counter::fixed(3).unwrap()));
    assert_eq!(d.msr().take_counts(), counts(0, 0, 0));
}

/// One PMU, one driver: a second take is refused before any register
/// access, and the live driver's state stands.
#[test]
fn a_second_driver_of_one_pmu_is_refused() {
    crate::owner!(First);
    crate::owner!(Second);
    let pmu = crate::testing::archperf_pmu();
    let (d, c) = take::<First>(&pmu, Config::skylake());
    let m = ArchPerfModel::new(Config::skylake());
    let info = cpu(&m);
    let mut other = Recording::<_, 64>::new(m);
    let Err(InitError::PmuTaken) = ArchPerfDriver::<Second, _>::take(&mut other, &info, &pmu)
    else {
        panic!("a second driver of one PMU")
    };
    assert_eq!(other.take_counts(), counts(0, 0, 0));
    let _ = d.give_back(c);
    let (d, c) = take::<Second>(&pmu, Config::skylake());
    let _ = d.give_back(c);
}

/// Run-time handles come back whole, or not at all.
#[test]
fn tokens_reassemble_from_run_time_handles() {
    let pmu = crate::testing::archperf_pmu();
    crate::owner!(Mine);
    let (mut d, c) = take::<Mine>(&pmu, Config::alder_lake_p_core());
    let present = c.present();
    let mut all = c.erase_all();
    if let Some(h) = all[8].as_mut() {
        h.configure(&mut d, &CounterConfig::counting(spec("instructions")))
            .unwrap();
    }
    let Err(mut all) = Counters::<Mine>::from_erased(all) else {
        panic!("a claimed handle reassembled")
    };
    if let Some(h) = all[8].as_mut() {
        h.release(&mut d).unwrap();
    }
    let c = Counters::<Mine>::from_erased(all).unwrap();
    assert_eq!(c.present(), present);
    let _ = d.give_back(c);
}

mod hybrid;
mod interrupts;
mod lbr;
mod pebs;

/// On the architectural PMU: a driver dropped
/// with a sampling counter running (its handle alive) releases it (select
/// 0, `GLOBAL_CTRL` bit clear, counter 0, disarmed) and frees the PMU; its
/// owner stays held for good, and taking it again says why.
#[test]
fn a_dropped_driver_releases_its_counters_and_holds_its_owner() {
    crate::owner!(Dropped);
    crate::owner!(Next);
    let pmu = crate::testing::archperf_pmu();
    let m = ArchPerfModel::new(Config::skylake());
    let info = cpu(&m);
    let mut rec = Recording::<_, 64>::new(m);
    let (mut d, c) = ArchPerfDriver::<Dropped, _>::take(&mut rec, &info, &pmu).unwrap();
    let n = SampleAfter::new(1000, d.overflow_rule()).unwrap();
    let g0 =
        c.g0.configure(&mut d, &CounterConfig::counting(spec("cycles")).sampling(n));
    let g0 = g0.unwrap().enable(&mut d).unwrap();
    assert_ne!(d.msr().read_msr(IA32_PERF_GLOBAL_CTRL).unwrap() & 1, 0);
    drop(d);
    let _alive = g0;
    assert_eq!(rec.read_msr(IA32_PERFEVTSEL0).unwrap(), 0, "select 0");
    assert_eq!(
        rec.read_msr(IA32_PERF_GLOBAL_CTRL).unwrap() & 1,
        0,
        "disabled"
    );
    assert_eq!(rec.rdpmc(0).unwrap(), 0, "zeroed");
    assert!(pmu.pmi().armed().is_empty(), "disarmed");
    assert!(!pmu.is_taken(), "the PMU is free");
    rec.clear();
    let e = match ArchPerfDriver::<Dropped, _>::take(&mut rec, &info, &pmu) {
        Err(e) => e,
        Ok(_) => panic!("a dropped driver's owner taken again"),
    };
    let owner = core::any::type_name::<Dropped>();
    assert_eq!(e, InitError::OwnerDropped { owner });
    assert!(e.to_string().starts_with(&format!(
        "the driver of owner `{owner}` was dropped without `give_back`"
    )));
    assert_eq!(rec.take_counts(), counts(0, 0, 0), "refused untouched");
    let (d, c) = ArchPerfDriver::<Next, _>::take(&mut rec, &info, &pmu).unwrap();
    let _ = d.give_back(c);
}

/// `ref-cycles` (the pseudo-encoding 00H/03H) counts on fixed counter 2
/// only (Linux never places a pseudo-encoding on a general counter), and
/// AnyThread is refused where the version lacks it (below 3) or CPUID
/// deprecates it (version 5, CPUID.0AH:EDX\[15\]), before any register is
/// touched; version 4 takes it.
#[test]
fn pseudo_encodings_and_any_thread_are_refused_where_they_cannot_count() {
    let pmu = crate::testing::archperf_pmu();
    let (mut d, c) = driver!(&pmu, Config::skylake());
    let e =
        c.g0.configure(&mut d, &CounterConfig::counting(spec("ref-cycles")));
    let e = e.unwrap_err();
    assert_eq!(
        e.error,
        Error::Config(ConfigError::NotGeneralEvent {
            counter: 0,
            fixed: Some(2)
        })
    );
    assert_eq!(
        e.error.to_string(),
        "configuration refused: general counter 0 cannot count a pseudo-encoding (event select 00H): it counts on fixed counter 2 only"
    );
    assert_eq!(d.msr().take_counts(), counts(0, 0, 0), "nothing written");
    let any = CounterConfig::counting(spec("event=0x3c,umask=0x00,any=1"));
    let g0 = e.counter.configure(&mut d, &any).unwrap();
    assert!(g0.programmed().select.any_thread(), "v4: AnyThread set");
    let _ = g0.release(&mut d).unwrap();

    for (config, version) in [(Config::core2(), 2), (Config::alder_lake_p_core(), 5)] {
        let pmu = crate::testing::archperf_pmu();
        let (mut d, c) = driver!(&pmu, config);
        let e = c.g0.configure(&mut d, &any).unwrap_err();
        assert_eq!(
            e.error,
            Error::Config(ConfigError::AnyThreadUnavailable { version })
        );
        assert!(
            e.error
                .to_string()
                .contains(&format!("this CPU has version {version}"))
        );
        assert_eq!(d.msr().take_counts(), counts(0, 0, 0), "nothing written");
        let _ = d.give_back(Counters { g0: e.counter, ..c });
    }
}

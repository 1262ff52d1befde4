//! The AMD driver against its model (a test instrument written from the
//! APM, independently of the driver's layouts): behaviour, and exact
//! register traffic per operation through the recording backend, on a
//! legacy part (K8: four counters at C001_0000H), a PerfCtrExtCore part
//! (Zen 2) and a PerfMonV2 part (Zen 4). All counts here come from the
//! model.

use std::vec::Vec;

use super::*;
use crate::access::{Access, AccessCounts, Recording};
use crate::apic::{LvtPerfCounter, LvtPerfCounterEntry, PmiDelivery, Vector};
use crate::arch::amd::PERF_LEGACY_CTR0;
use crate::arch::amd::pmi::PmiState;
use crate::arch::amd::{PERF_CNTR_GLOBAL_STATUS, PERF_CTL0, PERF_CTR0, PERF_LEGACY_CTL0};
use crate::arch::handle_pmi;
use crate::counter::{Group, Owner};
use crate::model::amd::Fault;
use crate::model::amd::{AmdModel, Config, Event, Privilege};
use crate::sampling::{PmiOutcome, Sample};

type Model = Recording<AmdModel, 256>;
type Amd<'s, O> = AmdDriver<'s, O, Model>;

const CYCLES: u16 = 0x76;
const INSTRUCTIONS: u16 = 0xC0;

fn counts(reads: u32, writes: u32, rdpmc: u32) -> AccessCounts {
    AccessCounts::msr(reads, writes, rdpmc)
}

fn cpu(m: &AmdModel) -> detect::AmdCpu {
    detect::detect(m, &mut m.clone())
        .unwrap()
        .usable_amd()
        .expect("the model is a usable AMD core PMU")
}

fn take<O: Owner>(pmu: &AmdPmu, config: Config) -> (Amd<'_, O>, Counters<O>) {
    let m = AmdModel::new(config);
    let info = cpu(&m);
    let (mut d, c) = AmdDriver::take(Recording::new(m), &info, pmu).unwrap();
    d.msr().clear();
    (d, c)
}

/// A driver on a fresh model, for an owner type of its own.
macro_rules! driver {
    ($pmu:expr, $config:expr) => {{
        crate::owner!(Fresh);
        take::<Fresh>($pmu, $config)
    }};
}

fn model<'a, O: Owner>(d: &'a mut Amd<'_, O>) -> &'a mut AmdModel {
    d.msr().inner_mut()
}

fn inject<O: Owner>(d: &mut Amd<'_, O>, select: u16, n: u64) {
    model(d).inject(Event::new(select, 0, n));
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

/// The handler, as the kernel runs it for a PMI.
fn pmi<O: Owner>(d: &mut Amd<'_, O>, lvt: &mut Lvt, rip: u64, out: &mut Vec<Sample>) -> PmiOutcome {
    let pmu = d.physical();
    handle_pmi(pmu, d.msr(), lvt, entry(), rip, |s| out.push(s)).unwrap()
}

/// Deliver one of the model's PMIs, if raised, through the handler.
fn service<O: Owner>(d: &mut Amd<'_, O>, lvt: &mut Lvt, rip: u64, out: &mut Vec<Sample>) -> bool {
    if !model(d).take_pmi() {
        return false;
    }
    pmi(d, lvt, rip, out);
    true
}

/// Releases every claimed handle of `all` and gives the driver back.
fn retire<O: Owner>(mut d: Amd<'_, O>, mut all: Handles) {
    for h in all.iter_mut().flatten() {
        if h.state() != StateTag::Unclaimed {
            h.release(&mut d).unwrap();
        }
    }
    let Ok(c) = Counters::from_erased(all) else {
        panic!("every token back")
    };
    let _ = d.give_back(c);
}

/// The three kinds of part: the addresses each uses and whether a
/// `PerfCntrGlobalCtl` starts and stops.
const PARTS: [(&str, Config); 3] = [
    ("legacy", Config::k8()),
    ("PerfCtrExtCore", Config::zen2()),
    ("PerfMonV2", Config::zen4()),
];

/// Take: every control read, the free ones left clear, and with
/// PerfMonV2 `PerfCntrGlobalCtl` (every bit set at RESET) cleared and the
/// status acknowledged: exact traffic on each kind of part.
#[test]
fn take_reads_every_control_and_resets_the_global_registers() {
    for (what, config, reads, writes) in [
        ("legacy", Config::k8(), 4, 0),
        ("PerfCtrExtCore", Config::zen2(), 6, 0),
        ("PerfMonV2", Config::zen4(), 7, 2),
    ] {
        crate::owner!(Cpu);
        let pmu = crate::testing::amd_pmu();
        let m = AmdModel::new(config);
        let info = cpu(&m);
        let (mut d, c) =
            AmdDriver::<Cpu, _>::take(Recording::<_, 64>::new(m), &info, &pmu).unwrap();
        assert_eq!(d.msr().take_counts(), counts(reads, writes, 0), "{what}");
        assert_eq!(d.msr().inner_mut().global_ctl(), 0, "{what}");
        assert_eq!(c.present().len(), info.counters().into(), "{what}");
        assert_eq!(
            (c.c4.is_some(), c.c5.is_some()),
            (config.counters() > 4, config.counters() > 5)
        );
        let _ = d.give_back(c);
    }
}

/// Counting on each kind of part, every operation's traffic exact, at the
/// addresses the part has: the legacy ones without PerfCtrExtCore, the
/// extended ones with it; `EN` the start and stop before PerfMonV2,
/// `PerfCntrGlobalCtl` with it.
#[test]
fn counting_has_exact_traffic_on_every_kind_of_part() {
    for (what, config) in PARTS {
        crate::owner!(Cpu);
        let pmu = crate::testing::amd_pmu();
        let (mut d, c) = take::<Cpu>(&pmu, config);
        let v2 = config.perfmon_v2;
        let (ctl1, ctr1) = if config.perf_ctr_ext_core {
            (PERF_CTL0 + 2, PERF_CTR0 + 2)
        } else {
            (PERF_LEGACY_CTL0 + 1, PERF_LEGACY_CTR0 + 1)
        };
        let c1 =
            c.c1.configure(&mut d, &CounterConfig::counting(spec("instructions:k")));
        let c1 = c1.unwrap();
        let log = d.msr().log().to_vec();
        let want_ctl = 0xC0 | 1 << 17 | u64::from(v2) << 22;
        assert_eq!(
            log,
            [
                Access::WriteMsr {
                    msr: ctr1,
                    value: 0
                },
                Access::WriteMsr {
                    msr: ctl1,
                    value: want_ctl
                },
            ],
            "{what}: preset, then the control"
        );
        d.msr().clear();
        inject(&mut d, INSTRUCTIONS, 7);
        assert_eq!(c1.read(&mut d).unwrap(), 0, "{what}: not counting yet");
        d.msr().clear();
        let c1 = c1.enable(&mut d).unwrap();
        let log = d.msr().log().to_vec();
        let start = if v2 {
            Access::WriteMsr {
                msr: PERF_CNTR_GLOBAL_CTL,
                value: 0b10,
            }
        } else {
            Access::WriteMsr {
                msr: ctl1,
                value: want_ctl | 1 << 22,
            }
        };
        assert_eq!(log, [start], "{what}: enable");
        d.msr().clear();
        inject(&mut d, INSTRUCTIONS, 1000);
        model(&mut d).inject(Event::new(INSTRUCTIONS, 0, 50).at(Privilege::Usr));
        assert_eq!(
            c1.read(&mut d).unwrap(),
            1000,
            "{what}: :k counts CPL 0 only"
        );
        assert_eq!(d.msr().take_counts(), counts(0, 0, 1), "{what}: one RDPMC");
        let c1 = c1.halt(&mut d).unwrap();
        assert_eq!(d.msr().take_counts(), counts(0, 1, 0), "{what}: halt");
        inject(&mut d, INSTRUCTIONS, 9);
        assert_eq!(c1.read(&mut d).unwrap(), 1000, "{what}: halted");
        let c1 = c1.resume(&mut d).unwrap();
        assert_eq!(d.msr().take_counts(), counts(0, 1, 1), "{what}: resume");
        inject(&mut d, INSTRUCTIONS, 1);
        assert_eq!(c1.read(&mut d).unwrap(), 1001);
        d.msr().clear();
        let c1 = c1.release(&mut d).unwrap();
        assert_eq!(
            d.msr().take_counts(),
            counts(0, 2 + u32::from(v2), 0),
            "{what}: release of a running counter: control 0, counter 0 (+ PerfCntrGlobalCtl)"
        );
        let m = model(&mut d);
        assert_eq!(
            (m.control(1), m.counter(1), m.global_ctl()),
            (0, 0, 0),
            "{what}"
        );
        let _ = d.give_back(Counters { c1, ..c });
        assert!(!pmu.is_taken());
    }
}

/// Sampling before PerfMonV2: the handler reads every armed counter (RDPMC)
/// and services those whose top bit is clear (one WRMSR each), no status
/// register; a PMI with nothing past its overflow reads the armed
/// counters and writes nothing but the LVT entry.
#[test]
fn the_legacy_handler_tests_each_armed_counters_top_bit() {
    for config in [Config::k8(), Config::zen2()] {
        let pmu = crate::testing::amd_pmu();
        let (mut d, c) = driver!(&pmu, config);
        let n = SampleAfter::new(100, d.overflow_rule()).unwrap();
        let m = SampleAfter::new(1000, d.overflow_rule()).unwrap();
        let sampling = |e: &str, n| CounterConfig::counting(spec(e)).sampling(n);
        let c0 = c.c0.configure(&mut d, &sampling("cycles", n)).unwrap();
        let c2 =
            c.c2.configure(&mut d, &sampling("instructions", m))
                .unwrap();
        let (c0, c2) = (c0.enable(&mut d).unwrap(), c2.enable(&mut d).unwrap());
        let (mut lvt, mut out) = (Lvt::default(), Vec::new());
        inject(&mut d, CYCLES, 130);
        assert!(model(&mut d).take_pmi());
        d.msr().clear();
        let o = pmi(&mut d, &mut lvt, 0x40, &mut out);
        assert_eq!(
            d.msr().take_counts(),
            counts(0, 1, 2),
            "two RDPMCs (both armed), one re-arm"
        );
        assert_eq!((o.overflowed, o.late), (1, false));
        assert_eq!(out, [Sample::new(0, 1, 0x40)]);
        assert_eq!(n.split(c0.read(&mut d).unwrap()), (0, 30), "the skid kept");
        // Nothing past its overflow: the armed counters read, nothing else.
        d.msr().clear();
        let o = pmi(&mut d, &mut lvt, 0x41, &mut out);
        assert!(o.is_spurious() && !o.is_ours());
        assert_eq!(d.msr().take_counts(), counts(0, 0, 2));
        assert_eq!(
            lvt.0,
            [entry(), entry()],
            "the entry written back every time"
        );
        assert_eq!((pmu.pmi().interrupts(), pmu.pmi().spurious()), (2, 1));
        let (c0, c2) = (c0.halt(&mut d).unwrap(), c2.halt(&mut d).unwrap());
        let (c0, c2) = (c0.release(&mut d).unwrap(), c2.release(&mut d).unwrap());
        let _ = d.give_back(Counters { c0, c2, ..c });
    }
}

/// Sampling with PerfMonV2: one status read, per overflowed counter one
/// RDPMC and one re-arm, one `PerfCntrGlobalStatusClr` write; conservation
/// exact over many PMIs.
#[test]
fn the_v2_handler_reads_the_status_once_and_clears_it_once() {
    let pmu = crate::testing::amd_pmu();
    let (mut d, c) = driver!(&pmu, Config::zen4());
    let n = SampleAfter::new(100, d.overflow_rule()).unwrap();
    let c3 =
        c.c3.configure(&mut d, &CounterConfig::counting(spec("cycles")).sampling(n));
    let c3 = c3.unwrap().enable(&mut d).unwrap();
    let (mut lvt, mut out) = (Lvt::default(), Vec::new());
    let mut events = 0;
    for step in 0..25u64 {
        inject(&mut d, CYCLES, 40 + step % 7);
        events += 40 + step % 7;
        d.msr().clear();
        if service(&mut d, &mut lvt, 0x1000 + step, &mut out) {
            let log = d.msr().log().to_vec();
            assert_eq!(
                d.msr().take_counts(),
                counts(1, 2, 1),
                "status, RDPMC, re-arm, clear"
            );
            assert!(matches!(
                log[0],
                Access::ReadMsr {
                    msr: PERF_CNTR_GLOBAL_STATUS,
                    ..
                }
            ));
            assert!(matches!(
                log[3],
                Access::WriteMsr {
                    msr: PERF_CNTR_GLOBAL_STATUS_CLR,
                    value: 0b1000
                }
            ));
        }
    }
    let (owed, residual) = n.split(c3.read(&mut d).unwrap());
    let periods = pmu.pmi().periods(3);
    assert_eq!(events, (periods + owed) * 100 + residual);
    assert_eq!(
        out.iter().map(|s| u64::from(s.periods)).sum::<u64>(),
        periods
    );
    assert_eq!(
        model(&mut d).global_status(),
        0,
        "every overflow acknowledged"
    );
    let _ = c3.halt(&mut d).unwrap().release(&mut d).unwrap();
}

/// A halt that finds its counter past its overflow accounts the period
/// (1 RDPMC, the counter rewritten, with PerfMonV2 its status bit cleared)
/// and owes the PMI in flight: that PMI, when it comes, finds nothing and
/// is claimed as late, and nothing is counted twice.
#[test]
fn a_halt_with_a_pmi_in_flight_accounts_it_and_owes_the_pmi() {
    for (what, config) in PARTS {
        let pmu = crate::testing::amd_pmu();
        let (mut d, c) = driver!(&pmu, config);
        let v2 = config.perfmon_v2;
        let n = SampleAfter::new(50, d.overflow_rule()).unwrap();
        let c1 =
            c.c1.configure(&mut d, &CounterConfig::counting(spec("cycles")).sampling(n));
        let c1 = c1.unwrap().enable(&mut d).unwrap();
        inject(&mut d, CYCLES, 55);
        assert!(model(&mut d).pmi_pending(), "{what}: the PMI in flight");
        d.msr().clear();
        let c1 = c1.halt(&mut d).unwrap();
        assert_eq!(
            d.msr().take_counts(),
            counts(0, 2 + u32::from(v2), 1),
            "{what}: stop, RDPMC, rewrite (+ status clear)"
        );
        assert_eq!(
            (
                pmu.pmi().periods(1),
                pmu.pmi().periods_at_halt(1),
                pmu.pmi().owed()
            ),
            (1, 1, 1)
        );
        let (mut lvt, mut out) = (Lvt::default(), Vec::new());
        assert!(model(&mut d).take_pmi());
        let o = pmi(&mut d, &mut lvt, 1, &mut out);
        assert_eq!(
            (o.overflowed, o.late, o.is_ours()),
            (0, true, true),
            "{what}"
        );
        assert!(out.is_empty(), "{what}: no sample twice");
        assert_eq!((pmu.pmi().owed(), pmu.pmi().late()), (0, 1));
        // A foreign NMI now: not ours.
        let o = pmi(&mut d, &mut lvt, 2, &mut out);
        assert!(!o.is_ours(), "{what}");
        assert_eq!(
            n.split(c1.read(&mut d).unwrap()),
            (0, 5),
            "{what}: 5 into the next period"
        );
        let c1 = c1.release(&mut d).unwrap();
        let _ = d.give_back(Counters { c1, ..c });
    }
}

/// Two counters overflow, each with its own PMI (the late delivery AMD
/// documents): the first PMI's handler services both and owes one; the
/// second finds nothing and is claimed late; a third, foreign, is not
/// claimed.
#[test]
fn a_pmi_whose_counter_an_earlier_one_serviced_is_claimed_late() {
    for (what, config) in PARTS {
        let pmu = crate::testing::amd_pmu();
        let (mut d, c) = driver!(&pmu, config);
        model(&mut d).set_separate_pmis(true);
        let n = SampleAfter::new(10, d.overflow_rule()).unwrap();
        let cfg = CounterConfig::counting(spec("cycles")).sampling(n);
        let c0 =
            c.c0.configure(&mut d, &cfg)
                .unwrap()
                .enable(&mut d)
                .unwrap();
        let c2 =
            c.c2.configure(&mut d, &cfg)
                .unwrap()
                .enable(&mut d)
                .unwrap();
        inject(&mut d, CYCLES, 10);
        assert_eq!(model(&mut d).pending_pmis(), 2, "{what}");
        let (mut lvt, mut out) = (Lvt::default(), Vec::new());
        let outcomes: Vec<PmiOutcome> = (0..3)
            .map(|rip| {
                model(&mut d).take_pmi();
                pmi(&mut d, &mut lvt, rip, &mut out)
            })
            .collect();
        assert_eq!(
            outcomes[0],
            PmiOutcome {
                overflowed: 0b101,
                late: false
            },
            "{what}"
        );
        assert_eq!(
            outcomes[1],
            PmiOutcome {
                overflowed: 0,
                late: true
            },
            "{what}"
        );
        assert_eq!(
            outcomes[2],
            PmiOutcome {
                overflowed: 0,
                late: false
            },
            "{what}"
        );
        let state: &PmiState = d.pmi_state();
        assert_eq!(
            (state.interrupts(), state.spurious(), state.late()),
            (3, 2, 1)
        );
        let (c0, c2) = (c0.release(&mut d).unwrap(), c2.release(&mut d).unwrap());
        let _ = d.give_back(Counters { c0, c2, ..c });
    }
}

/// A PMI taken between a halt's disarm and its read (the window), for the
/// counter the halt is taking out of service: claimed there, and the halt
/// then owes nothing (the late PMI accounted once). The halt is run over a
/// backend that delivers the PMI just before the halt's RDPMC.
#[test]
fn a_pmi_in_the_halts_window_is_claimed_once() {
    struct Rig {
        m: AmdModel,
        at_rdpmc: Option<(u64, PmiOutcome)>,
        pmu: &'static AmdPmu,
    }
    impl crate::access::MsrAccess for Rig {
        type Error = Fault;
        fn read_msr(&mut self, msr: u32) -> Result<u64, Self::Error> {
            crate::access::MsrAccess::read_msr(&mut self.m, msr)
        }
        fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Self::Error> {
            crate::access::MsrAccess::write_msr(&mut self.m, msr, value)
        }
        fn rdpmc(&mut self, ecx: u32) -> Result<u64, Self::Error> {
            if self.at_rdpmc.is_none() && self.m.take_pmi() {
                let mut lvt = Lvt::default();
                let o = handle_pmi(self.pmu, &mut self.m, &mut lvt, entry(), 7, |_| {
                    panic!("no sample: the counter is disarmed")
                });
                self.at_rdpmc = Some((self.pmu.pmi().owed(), o.unwrap()));
            }
            crate::access::MsrAccess::rdpmc(&mut self.m, ecx)
        }
    }
    crate::owner!(Window);
    let pmu: &'static AmdPmu = Box::leak(Box::new(crate::testing::amd_pmu()));
    let m = AmdModel::new(Config::zen2());
    let info = cpu(&m);
    let rig = Rig {
        m,
        at_rdpmc: None,
        pmu,
    };
    let (mut d, c) = AmdDriver::<Window, _>::take(rig, &info, pmu).unwrap();
    let n = SampleAfter::new(20, d.overflow_rule()).unwrap();
    let c0 =
        c.c0.configure(&mut d, &CounterConfig::counting(spec("cycles")).sampling(n));
    let c0 = c0.unwrap().enable(&mut d).unwrap();
    d.msr().m.inject(Event::new(CYCLES, 0, 23));
    let c0 = c0.halt(&mut d).unwrap();
    let (owed_then, outcome) = d.msr().at_rdpmc.expect("the PMI in the window");
    assert_eq!((owed_then, outcome.overflowed, outcome.late), (0, 0, true));
    assert_eq!(
        (pmu.pmi().periods_at_halt(0), pmu.pmi().owed()),
        (1, 0),
        "owed once, taken once"
    );
    assert_eq!(n.split(c0.read(&mut d).unwrap()), (0, 3));
    let c0 = c0.release(&mut d).unwrap();
    let _ = d.give_back(Counters { c0, ..c });
}

/// Groups: with PerfMonV2 one `PerfCntrGlobalCtl` write starts or stops
/// every member, and a read is one snapshot (stopped, K RDPMCs, restored);
/// before it each member's `EN` is written, one after another (not one
/// instant), and a read is K RDPMCs.
#[test]
fn groups_start_and_stop_in_one_write_with_perfmon_v2_only() {
    for (what, config) in PARTS {
        let pmu = crate::testing::amd_pmu();
        let (mut d, c) = driver!(&pmu, config);
        let v2 = config.perfmon_v2;
        let cfg = CounterConfig::counting(spec("cycles"));
        let a = c.c0.configure(&mut d, &cfg).unwrap().erase();
        let b = c.c1.configure(&mut d, &cfg).unwrap().erase();
        let e = c.c3.configure(&mut d, &cfg).unwrap().erase();
        d.msr().clear();
        let mut g = Group::new([a, b, e]).unwrap();
        g.start(&mut d).unwrap();
        let writes = if v2 { 1 } else { 3 };
        assert_eq!(d.msr().take_counts(), counts(0, writes, 0), "{what}: start");
        if v2 {
            assert_eq!(
                model(&mut d).global_ctl(),
                0b1011,
                "{what}: the three bits at once"
            );
        }
        inject(&mut d, CYCLES, 123);
        assert_eq!(g.read(&mut d).unwrap(), [123; 3], "{what}");
        let read = if v2 { counts(0, 2, 3) } else { counts(0, 0, 3) };
        assert_eq!(d.msr().take_counts(), read, "{what}: read");
        g.stop(&mut d).unwrap();
        assert_eq!(d.msr().take_counts(), counts(0, writes, 0), "{what}: stop");
        inject(&mut d, CYCLES, 5);
        assert_eq!(g.read(&mut d).unwrap(), [123; 3], "{what}");
        let [a, b, e] = g.into_members();
        let mut all = [Some(a), Some(b), None, Some(e), None, None];
        (all[2], all[4], all[5]) = (
            Some(c.c2.erase()),
            c.c4.map(|h| h.erase()),
            c.c5.map(|h| h.erase()),
        );
        retire(d, all);
    }
}

/// Counters the firmware left enabled are reported and left alone: never
/// written, their `PerfCntrGlobalCtl` bit kept, configuring them refused.
#[test]
fn counters_the_firmware_uses_are_left_alone() {
    for (what, config) in PARTS {
        crate::owner!(Kernel);
        let pmu = crate::testing::amd_pmu();
        let mut m = AmdModel::new(config);
        let firmware_ctl = 0x76 | 1 << 17 | 1 << 22;
        crate::access::MsrAccess::write_msr(&mut m, PERF_LEGACY_CTL0 + 2, firmware_ctl).unwrap();
        let info = cpu(&m);
        let (mut d, c) =
            AmdDriver::<Kernel, _>::take(Recording::<_, 256>::new(m), &info, &pmu).unwrap();
        let c2 = Counter::new(2).unwrap();
        assert_eq!(d.firmware(), CounterSet::EMPTY.with(c2), "{what}");
        assert_eq!(info.probe, detect::CounterProbe::ReadBack { counter: 0 });
        d.msr().clear();
        let e =
            c.c2.configure(&mut d, &CounterConfig::counting(spec("cycles")))
                .unwrap_err();
        assert_eq!(
            e.error,
            Error::Config(ConfigError::UsedByFirmware(2)),
            "{what}"
        );
        assert_eq!(d.msr().take_counts(), counts(0, 0, 0), "{what}");
        let c0 =
            c.c0.configure(&mut d, &CounterConfig::counting(spec("cycles")))
                .unwrap();
        let c0 = c0.enable(&mut d).unwrap();
        inject(&mut d, CYCLES, 10);
        assert_eq!(
            (c0.read(&mut d).unwrap(), model(&mut d).counter(2)),
            (10, 10),
            "{what}"
        );
        if config.perfmon_v2 {
            assert_eq!(
                model(&mut d).global_ctl(),
                0b101,
                "{what}: the firmware's bit kept"
            );
        }
        let c0 = c0.halt(&mut d).unwrap().release(&mut d).unwrap();
        assert_eq!(
            model(&mut d).control(2),
            firmware_ctl,
            "{what}: never written"
        );
        let _ = d.give_back(Counters {
            c0,
            c2: e.counter,
            ..c
        });
    }
}

/// HostOnly and GuestOnly, from `:H` and `:G`: with SVM enabled a
/// hypervisor counts its own events apart from its guest's.
#[test]
fn host_and_guest_filters_reach_the_counter() {
    let pmu = crate::testing::amd_pmu();
    let (mut d, c) = driver!(&pmu, Config::zen4());
    model(&mut d).set_svme(true);
    let host =
        c.c0.configure(&mut d, &CounterConfig::counting(spec("instructions:H")));
    let guest =
        c.c1.configure(&mut d, &CounterConfig::counting(spec("instructions:G")));
    let both =
        c.c2.configure(&mut d, &CounterConfig::counting(spec("instructions")));
    let host = host.unwrap().enable(&mut d).unwrap();
    let guest = guest.unwrap().enable(&mut d).unwrap();
    let both = both.unwrap().enable(&mut d).unwrap();
    assert!(host.programmed().ctl().host_only() && !host.programmed().ctl().guest_only());
    inject(&mut d, INSTRUCTIONS, 30);
    model(&mut d).inject(Event::new(INSTRUCTIONS, 0, 12).in_guest());
    let got = [host.read(&mut d), guest.read(&mut d), both.read(&mut d)].map(Result::unwrap);
    assert_eq!(got, [30, 12, 42]);
}

/// A `perf` name resolves to the part's own encoding; one the part's map
/// has no entry for, and Zen's paired event, are refused before any
/// register is touched.
#[test]
fn names_resolve_per_part_and_unmapped_ones_are_refused() {
    let pmu = crate::testing::amd_pmu();
    let (mut d, c) = driver!(&pmu, Config::zen2());
    assert_eq!(d.event_map(), EventMap::Zen2);
    let e =
        c.c0.configure(&mut d, &CounterConfig::counting(spec("ref-cycles")))
            .unwrap_err();
    assert_eq!(
        e.error,
        Error::Config(ConfigError::Unmapped {
            event: "ref-cycles",
            map: "amd_zen2_perfmon_event_map"
        })
    );
    let e = e
        .counter
        .configure(
            &mut d,
            &CounterConfig::counting(spec("event=0x3,umask=0xff")),
        )
        .unwrap_err();
    assert_eq!(
        e.error,
        Error::Config(ConfigError::PairedEvent { select: 3 })
    );
    assert!(
        e.error.to_string().contains("merge event 0xfff"),
        "{}",
        e.error
    );
    assert_eq!(d.msr().take_counts(), counts(0, 0, 0), "nothing written");
    let c0 = e
        .counter
        .configure(&mut d, &CounterConfig::counting(spec("cache-misses")))
        .unwrap();
    assert_eq!(
        (c0.programmed().ctl().event(), c0.programmed().ctl().umask()),
        (0x64, 0x09)
    );
    let _ = c0.release(&mut d).unwrap();
    // Zen 4 has ref-cycles (event 120H), the legacy map cache-misses 77EH.
    let pmu = crate::testing::amd_pmu();
    let (mut d, c) = driver!(&pmu, Config::zen4());
    let c0 =
        c.c0.configure(&mut d, &CounterConfig::counting(spec("ref-cycles")))
            .unwrap();
    assert_eq!(c0.programmed().ctl().event(), 0x120);
    let pmu = crate::testing::amd_pmu();
    let (mut d, c) = driver!(&pmu, Config::k8());
    let c0 =
        c.c0.configure(&mut d, &CounterConfig::counting(spec("cache-misses")))
            .unwrap();
    assert_eq!(
        (c0.programmed().ctl().event(), c0.programmed().ctl().umask()),
        (0x7E, 0x07)
    );
    // Event 003H is not paired before Zen.
    let c1 =
        c.c1.configure(&mut d, &CounterConfig::counting(spec("event=0x3")));
    assert!(c1.is_ok());
}

/// A part whose probe found the counters hold nothing ("counters read 0")
/// is refused before any register access.
#[test]
fn a_part_whose_counters_read_0_is_refused() {
    crate::owner!(Nothing);
    let pmu = crate::testing::amd_pmu();
    let m = AmdModel::new(Config::k8());
    let mut info = cpu(&m);
    let lost = detect::CounterProbe::Lost {
        counter: 0,
        wrote: 0xFFFF,
        read: 0,
    };
    info.probe = lost;
    let mut rec = Recording::<_, 8>::new(m);
    let Err(e) = AmdDriver::<Nothing, _>::take(&mut rec, &info, &pmu) else {
        panic!("taken")
    };
    assert_eq!(e, InitError::NotUsable(lost));
    assert!(e.to_string().contains("counters read 0"), "{e}");
    assert_eq!(rec.take_counts(), counts(0, 0, 0));
    assert!(!pmu.is_taken());
}

/// One PMU, one driver; a dropped driver releases its counters (a
/// sampling one read first, for a PMI in flight), frees the PMU and holds
/// its owner for good.
#[test]
fn one_driver_per_pmu_and_a_dropped_driver_releases() {
    crate::owner!(Dropped);
    crate::owner!(Second);
    let pmu = crate::testing::amd_pmu();
    let m = AmdModel::new(Config::zen4());
    let info = cpu(&m);
    let mut rec = Recording::<_, 64>::new(m);
    let (mut d, c) = AmdDriver::<Dropped, _>::take(&mut rec, &info, &pmu).unwrap();
    let other = AmdModel::new(Config::zen4());
    let Err(InitError::PmuTaken) = AmdDriver::<Second, _>::take(other, &info, &pmu) else {
        panic!("a second driver of one PMU")
    };
    let n = SampleAfter::new(1000, d.overflow_rule()).unwrap();
    let c0 =
        c.c0.configure(&mut d, &CounterConfig::counting(spec("cycles")).sampling(n));
    let c0 = c0.unwrap().enable(&mut d).unwrap();
    d.msr().clear();
    drop(d);
    let _alive = c0;
    assert_eq!(
        rec.take_counts(),
        counts(0, 3, 1),
        "control 0, RDPMC, counter 0, PerfCntrGlobalCtl"
    );
    assert_eq!(rec.read_msr(PERF_CTL0).unwrap(), 0);
    assert_eq!(rec.read_msr(PERF_CNTR_GLOBAL_CTL).unwrap(), 0);
    assert!(pmu.pmi().armed().is_empty(), "disarmed");
    assert!(!pmu.is_taken(), "the PMU is free");
    let owner = core::any::type_name::<Dropped>();
    match AmdDriver::<Dropped, _>::take(&mut rec, &info, &pmu) {
        Err(e) => assert_eq!(e, InitError::OwnerDropped { owner }),
        Ok(_) => panic!("a dropped driver's owner taken again"),
    }
    let (d, c) = AmdDriver::<Second, _>::take(&mut rec, &info, &pmu).unwrap();
    let _ = d.give_back(c);
}

/// Run-time handles come back whole, or not at all.
#[test]
fn tokens_reassemble_from_run_time_handles() {
    crate::owner!(Mine);
    let pmu = crate::testing::amd_pmu();
    let (mut d, c) = take::<Mine>(&pmu, Config::zen2());
    let present = c.present();
    let mut all = c.erase_all();
    if let Some(h) = all[5].as_mut() {
        h.configure(&mut d, &CounterConfig::counting(spec("instructions")))
            .unwrap();
    }
    let Err(mut all) = Counters::<Mine>::from_erased(all) else {
        panic!("a claimed handle reassembled")
    };
    if let Some(h) = all[5].as_mut() {
        h.release(&mut d).unwrap();
    }
    let c = Counters::<Mine>::from_erased(all).unwrap();
    assert_eq!(c.present(), present);
    let _ = d.give_back(c);
}

mod conservation;
mod interrupts;
mod world;

//! PEBS and tagging through the driver's handles, on the NetBurst model:
//! the DS save area in memory, the PEBS MSRs the driver owns, the records
//! the PMI handler drains, and the checks a counter of tagged µops passes
//! before it is programmed. All counts and records come from the model.

use std::boxed::Box;

use super::*;
use crate::arch::handle_pmi;
use crate::arch::netburst::ds::{DsArea, PebsArea, PebsRecord};
use crate::arch::netburst::pmi::Capture;
use crate::arch::netburst::{IA32_DS_AREA, MSR_PEBS_ENABLE, MSR_PEBS_MATRIX_VERT};
use crate::model::netburst::{PebsRecord as ModelRecord, replay};

/// A DS save area for `K` records, for good (as a kernel's `static`).
fn area<const K: usize>() -> DsArea {
    let memory: &'static mut PebsArea<K> = Box::leak(Box::new(PebsArea::new()));
    // SAFETY: a leaked allocation: mapped at its address in the test
    // process's one address space.
    unsafe { DsArea::new(memory) }
}

/// Retires `n` loads on T0 at CPL 0 that missed the first-level cache,
/// with the model doing the DS memory traffic.
fn l1_missing_loads<O: Owner>(d: &mut Nb<'_, O>, n: u64) {
    let uops = Uops {
        replays: replay::L1_LOAD_MISS,
        ..Uops::new(ModelLp::T0, Privilege::Os, UopKind::Load, n)
    };
    // SAFETY: IA32_DS_AREA of T0 is the leaked `PebsArea` the driver was
    // given, which nothing references.
    unsafe { model(d).with_ds_memory(ModelLp::T0, |m| m.retire(&uops)) };
}

/// The registers the model's next PEBS record captures.
fn state_at(rip: u64) -> ModelRecord {
    ModelRecord {
        rflags: 0x202,
        rip,
        gprs: core::array::from_fn(|i| 0x100 + i as u64),
    }
}

/// Collects the records, as a kernel's sink would.
#[derive(Default)]
struct Records {
    samples: Vec<Sample>,
    records: Vec<(u8, PebsRecord)>,
}

/// The samples, and the PEBS records apart (each also a sample of its
/// counter at the record's RIP, one period).
impl Records {
    fn sample(&mut self, s: Sample<Capture>) {
        match s.payload {
            Capture::Pebs(r) => {
                assert_eq!((s.periods, s.rip), (1, r.rip), "a record is one period");
                self.records.push((s.counter, r));
            }
            Capture::None => self.samples.push(s.with_payload(())),
        }
    }
}

fn l1_miss_pebs(every: u64, per_pmi: u32) -> CounterConfig {
    let n = SampleAfter::new(every, overflow_rule()).unwrap();
    CounterConfig::counting(spec("replay_event:NBOGUS:L1_LD_MISS:k"), Escr::CruEscr2)
        .pebs(n, per_pmi)
}

/// PEBS on counter 16 for T0, every 5th load that missed L1, a PMI every
/// 2 records: exact records (precise RIP and registers), periods, counter
/// and register traffic.
#[test]
fn pebs_records_reach_the_sink() {
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    d.set_pebs_area(LogicalProcessor::T0, area::<4>()).unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 1, 0), "IA32_DS_AREA");
    let ds = model(&mut d).read_msr(IA32_DS_AREA).unwrap();
    assert_eq!(
        Some(ds),
        d.pebs_area(LogicalProcessor::T0).map(|a| a.address())
    );

    let c16 = c.c16.configure(&mut d, &l1_miss_pebs(5, 2)).unwrap();
    assert_eq!(
        d.msr().take_counts(),
        counts(0, 4, 0),
        "ESCR, counter, MSR_PEBS_ENABLE, MSR_PEBS_MATRIX_VERT"
    );
    assert_eq!(
        model(&mut d).read_msr(MSR_PEBS_ENABLE).unwrap(),
        1 << 25 | 1 << 24 | 1,
        "PEBS for T0, UOP_Tag, 1stL_cache_load_miss_retired (Table 19-33)"
    );
    assert_eq!(model(&mut d).read_msr(MSR_PEBS_MATRIX_VERT).unwrap(), 1);
    assert!(c16.programmed().pebs());
    assert!(
        c16.programmed().cccr().bits() & (3 << 26) == 0,
        "no OVF_PMI: the buffer interrupts"
    );
    let c16 = c16.enable(&mut d).unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 1, 0), "CCCR");

    let mut sink = Records::default();
    let mut lvt = Lvt::default();
    let mut pmis = 0;
    for (k, rip) in [0x1000u64, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000]
        .into_iter()
        .enumerate()
    {
        model(&mut d).set_pebs_registers(ModelLp::T0, state_at(rip));
        // Five loads: the fifth takes the assist.
        l1_missing_loads(&mut d, 5);
        if let Some(line) = model(&mut d).take_pmi(ModelLp::T0) {
            assert!(line.pebs_threshold);
            assert_eq!(k % 2, 1, "a PMI every second record");
            d.msr().clear();
            let out = handle_pmi(
                state.logical(LogicalProcessor::T0),
                d.msr(),
                &mut lvt,
                entry(),
                0xdead,
                |s| sink.sample(s),
            )
            .unwrap();
            assert_eq!(out.overflowed, 1 << 16);
            assert_eq!(
                d.msr().take_counts(),
                counts(0, 0, 0),
                "the records are memory"
            );
            pmis += 1;
        }
    }
    assert_eq!(pmis, 3);
    assert_eq!(state.pmi().spurious(LogicalProcessor::T0), 0);
    assert!(
        sink.samples.is_empty(),
        "a PEBS counter takes no overflow PMI"
    );
    let rips: Vec<u64> = sink.records.iter().map(|(_, r)| r.rip).collect();
    assert_eq!(rips, [0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000]);
    assert!(
        sink.records
            .iter()
            .all(|(n, r)| *n == 16 && r.rflags == 0x202 && r.rax == 0x100 && r.r15 == 0x10F)
    );
    assert_eq!(state.pmi().periods(16), 6);
    // 30 loads = 6 periods of 5, nothing left over: the counter is back at
    // its reset value -(5 - 1).
    let reset = SampleAfter::new(5, overflow_rule()).unwrap().at_residual(1);
    assert_eq!(c16.read(&mut d).unwrap(), reset);

    // Three more loads, a halt, and the one record below the threshold is
    // drained by hand.
    model(&mut d).set_pebs_registers(ModelLp::T0, state_at(0x7000));
    l1_missing_loads(&mut d, 5);
    let c16 = c16.halt(&mut d).unwrap();
    let mut left = Vec::new();
    assert_eq!(d.drain_pebs(LogicalProcessor::T0, |r| left.push(r.rip)), 1);
    assert_eq!(left, [0x7000]);
    assert_eq!(state.pmi().periods(16), 7);

    d.msr().clear();
    let _ = c16.release(&mut d).unwrap();
    assert_eq!(
        d.msr().take_counts(),
        counts(0, 4, 0),
        "CCCR, counter, MSR_PEBS_ENABLE, MSR_PEBS_MATRIX_VERT"
    );
    assert_eq!(model(&mut d).read_msr(MSR_PEBS_ENABLE).unwrap(), 0);
    assert_eq!(model(&mut d).read_msr(MSR_PEBS_MATRIX_VERT).unwrap(), 0);
}

/// A closure sink gets each record as a one-period sample at its precise
/// RIP; the run-time handle form configures PEBS like the typed one.
#[test]
fn a_closure_sink_gets_precise_rips() {
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    d.set_pebs_area(LogicalProcessor::T0, area::<2>()).unwrap();
    let mut c16 = c.c16.erase();
    c16.configure(&mut d, &l1_miss_pebs(3, 1)).unwrap();
    c16.enable(&mut d).unwrap();
    model(&mut d).set_pebs_registers(ModelLp::T0, state_at(0xABC));
    l1_missing_loads(&mut d, 3);
    assert!(model(&mut d).take_pmi(ModelLp::T0).is_some());
    let mut samples = Vec::new();
    handle_pmi(
        state.logical(LogicalProcessor::T0),
        d.msr(),
        &mut Lvt::default(),
        entry(),
        1,
        |s: Sample<Capture>| samples.push(s.with_payload(())),
    )
    .unwrap();
    assert_eq!(samples, [Sample::new(16, 1, 0xABC)]);
    c16.release(&mut d).unwrap();
}

/// With PEBS armed the whole handler runs out of line: the
/// sampling and `FORCE_OVF` counters beside the PEBS counter are serviced
/// exactly as by the usual loop, then the buffer is drained. Exact
/// samples, records, periods and traffic; a PMI with nothing to service
/// still counts as spurious.
#[test]
fn pebs_beside_sampling_and_force_ovf_counters() {
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    d.set_pebs_area(LogicalProcessor::T0, area::<4>()).unwrap();
    let c16 = c.c16.configure(&mut d, &l1_miss_pebs(3, 1)).unwrap();
    let c16 = c16.enable(&mut d).unwrap();
    let n = SampleAfter::new(20, overflow_rule()).unwrap();
    let c0 = c.c0.configure(&mut d, &running().sampling(n)).unwrap();
    let c0 = c0.enable(&mut d).unwrap();
    let bsq = CounterConfig::counting(spec("BSQ_cache_reference:RD_2ndL_HITS:k"), Escr::BsuEscr0);
    let c1 = c.c1.configure(&mut d, &bsq.every_increment()).unwrap();
    let c1 = c1.enable(&mut d).unwrap();
    let bsq = EventKind::for_spec(&bsq.event, bsq.escr).unwrap();

    model(&mut d).set_pebs_registers(ModelLp::T0, state_at(0x5000));
    l1_missing_loads(&mut d, 3);
    inject(&mut d, RUNNING, 21);
    inject(&mut d, bsq, 2);
    assert!(model(&mut d).take_pmi(ModelLp::T0).is_some());
    d.msr().clear();
    let (mut sink, mut lvt) = (Records::default(), Lvt::default());
    let mut pmi = |d: &mut Nb<'_, _>, sink: &mut Records| {
        handle_pmi(
            state.logical(LogicalProcessor::T0),
            d.msr(),
            &mut lvt,
            entry(),
            0x40,
            |s| sink.sample(s),
        )
        .unwrap()
    };
    let out = pmi(&mut d, &mut sink);
    assert_eq!(
        out.overflowed,
        u64::from(
            CounterSet::EMPTY
                .with(Counter::BpuCounter0)
                .with(Counter::BpuCounter1)
                .with(Counter::IqCounter4)
                .bits()
        )
    );
    assert_eq!(
        d.msr().take_counts(),
        counts(0, 2 + 1, 2),
        "RDPMC 0 and 1; counter and CCCR of 0, CCCR of 1; the records are memory"
    );
    assert_eq!(
        sink.samples,
        [Sample::new(0, 1, 0x40), Sample::new(1, 2, 0x40)]
    );
    let rips: Vec<u64> = sink
        .records
        .iter()
        .map(|(n, r)| (u64::from(*n) << 32) | r.rip)
        .collect();
    assert_eq!(rips, [16 << 32 | 0x5000]);
    assert_eq!([0, 1, 16].map(|c| state.pmi().periods(c)), [1, 2, 1]);
    assert_eq!(c0.read(&mut d).unwrap(), n.at_residual(1));
    // Nothing more: spurious, with the same reads.
    d.msr().clear();
    let out = pmi(&mut d, &mut sink);
    assert!(out.is_spurious());
    assert_eq!(d.msr().take_counts(), counts(0, 0, 2));
    assert_eq!(state.pmi().spurious(LogicalProcessor::T0), 1);
    let _ = (c0, c1, c16);
}

/// What PEBS refuses, each with the handle back and nothing written.
#[test]
fn pebs_refusals() {
    use LogicalProcessor::{T0, T1};
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    let nothing_written = |d: &mut Nb<'_, _>| assert_eq!(d.msr().take_counts(), counts(0, 0, 0));
    let e = c.c16.configure(&mut d, &l1_miss_pebs(5, 1)).unwrap_err();
    assert_eq!(e.error, Error::Config(ConfigError::NoPebsArea { lp: T0 }));
    nothing_written(&mut d);
    d.set_pebs_area(T0, area::<2>()).unwrap();
    d.msr().clear();
    let on_17 = CounterConfig {
        escr: Escr::CruEscr3,
        ..l1_miss_pebs(5, 1)
    };
    let e17 = c.c17.configure(&mut d, &on_17).unwrap_err();
    assert_eq!(
        e17.error,
        Error::Config(ConfigError::NotPebsCounter { lp: T0 })
    );
    let one = CounterConfig {
        sampling: SampleAfter::new(1, overflow_rule()).ok(),
        ..l1_miss_pebs(5, 1)
    };
    let e = e.counter.configure(&mut d, &one).unwrap_err();
    assert_eq!(e.error, Error::Config(ConfigError::PebsPeriod));
    let n = SampleAfter::new(5, overflow_rule()).unwrap();
    let not_retirement =
        CounterConfig::counting(spec("uop_type:TAGLOADS:k"), Escr::RatEscr0).pebs(n, 1);
    let e = e.counter.configure(&mut d, &not_retirement).unwrap_err();
    assert_eq!(e.error, Error::Config(ConfigError::NotAtRetirement));
    nothing_written(&mut d);
    // A driver of both logical processors runs on one CPU: an area for T1
    // while T0 has one is refused.
    assert_eq!(
        d.set_pebs_area(T1, area::<2>()),
        Err(Error::Config(ConfigError::PebsElsewhere { lp: T1 }))
    );
    nothing_written(&mut d);
    // Taken back, T0's area is T0's no more: PEBS for T0 needs one again.
    let t0 = d.take_pebs_area(T0).unwrap();
    assert_eq!(t0.capacity(), 2);
    assert_eq!(d.msr().take_counts(), counts(0, 1, 0), "IA32_DS_AREA = 0");
    assert_eq!(model(&mut d).read_msr(IA32_DS_AREA).unwrap(), 0);
    assert_eq!(
        d.take_pebs_area(T0),
        Err(Error::Config(ConfigError::NoPebsArea { lp: T0 }))
    );
    d.set_pebs_area(T1, area::<2>()).unwrap();
    d.msr().clear();
    let e = e
        .counter
        .configure(&mut d, &l1_miss_pebs(5, 1))
        .unwrap_err();
    assert_eq!(e.error, Error::Config(ConfigError::NoPebsArea { lp: T0 }));
    nothing_written(&mut d);
    let _t1 = d.take_pebs_area(T1).unwrap();
    // The area taken back is installed again.
    assert!(d.set_pebs_area(T0, t0).unwrap().is_none());
    let c16 = e.counter.configure(&mut d, &l1_miss_pebs(5, 1)).unwrap();
    d.msr().clear();
    assert_eq!(
        d.set_pebs_area(T0, area::<2>()),
        Err(Error::Config(ConfigError::PebsBusy { lp: T0 }))
    );
    assert_eq!(
        d.take_pebs_area(T0).map(|a| a.capacity()),
        Err(Error::Config(ConfigError::PebsBusy { lp: T0 })),
        "no area back while a counter can make the CPU write it"
    );
    nothing_written(&mut d);
    let c16 = c16.release(&mut d).unwrap();
    assert_eq!(d.take_pebs_area(T0).map(|a| a.capacity()), Ok(2));
    let _ = (c16, e17.counter);

    // A part whose IA32_MISC_ENABLE[12] says PEBS is unavailable.
    crate::owner!(NoPebs);
    let m = NetBurstModel::new(Config::prescott_ht());
    let info = detect::NetBurstCpu {
        pebs_available: false,
        ..cpu(&m)
    };
    let state = crate::testing::netburst_pmu();
    let (mut d, c) =
        NetBurstDriver::<NoPebs, _>::take(Recording::<_, 256>::new(m), &info, &state).unwrap();
    assert_eq!(
        d.set_pebs_area(T0, area::<2>()),
        Err(Error::Config(ConfigError::PebsUnavailable))
    );
    let e = c.c16.configure(&mut d, &l1_miss_pebs(5, 1)).unwrap_err();
    assert_eq!(e.error, Error::Config(ConfigError::PebsUnavailable));
}

/// Execution tagging through handles (SDM 18.15.6.3, Table 19-32): up to
/// four upstream events, each on its own counter with its tag bits
/// (`TAGn`), and `execution_event` counting the tagged µops; the
/// downstream counter is refused until every tag bit it counts is set by a
/// claimed upstream of the same logical processor.
#[test]
fn execution_tagging_through_handles() {
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    let down = CounterConfig::counting(spec("execution_event:NBOGUS0:NBOGUS1:k"), Escr::CruEscr2);
    let e = c.c12.configure(&mut d, &down).unwrap_err();
    assert_eq!(
        e.error,
        Error::Config(ConfigError::Untagged {
            tagging: Tagging::Execution,
            bit: Some(0)
        })
    );
    let packed = CounterConfig::counting(spec("packed_SP_uop:ALL:TAG0:k"), Escr::FirmEscr0);
    let c8 =
        c.c8.configure(&mut d, &packed)
            .unwrap()
            .enable(&mut d)
            .unwrap();
    let e = e.counter.configure(&mut d, &down).unwrap_err();
    assert_eq!(
        e.error,
        Error::Config(ConfigError::Untagged {
            tagging: Tagging::Execution,
            bit: Some(1)
        }),
        "tag bit 1 still unset"
    );
    // A T1 upstream does not tag T0's µops.
    let x87_t1 = CounterConfig::counting(spec("x87_FP_uop:ALL:TAG1:k"), Escr::FirmEscr1)
        .on(LogicalProcessor::T1);
    let c10 = c.c10.configure(&mut d, &x87_t1).unwrap();
    let e = e.counter.configure(&mut d, &down).unwrap_err();
    let c10 = c10.release(&mut d).unwrap();
    let x87 = CounterConfig {
        lp: LogicalProcessor::T0,
        ..x87_t1
    };
    let c10 = c10.configure(&mut d, &x87).unwrap().enable(&mut d).unwrap();
    let c12 = e
        .counter
        .configure(&mut d, &down)
        .unwrap()
        .enable(&mut d)
        .unwrap();
    let packed_sp = EventKind::for_spec(&packed.event, Escr::FirmEscr0).unwrap();
    let x87_fp = EventKind::for_spec(&x87.event, Escr::FirmEscr1).unwrap();
    let retire = |d: &mut Nb<'_, _>, upstream: &[EventKind], n| {
        model(d).retire(&Uops {
            upstream,
            ..Uops::new(ModelLp::T0, Privilege::Os, UopKind::Other, n)
        });
    };
    retire(&mut d, &[packed_sp], 3);
    retire(&mut d, &[x87_fp], 5);
    retire(&mut d, &[packed_sp, x87_fp], 7);
    retire(&mut d, &[], 11);
    assert_eq!(
        c12.read(&mut d).unwrap(),
        3 + 5 + 7,
        "a µop with both tags counts once"
    );
    for mut h in [c8.erase(), c10.erase(), c12.erase()] {
        h.release(&mut d).unwrap();
    }
}

/// Replay tagging through handles (SDM 18.15.6.4, Table 19-33): the metric
/// is a `replay_event` mask, the driver writes the shared PEBS MSRs once
/// for every counter using that metric, refuses another metric meanwhile,
/// and wants a metric's upstream event claimed first.
#[test]
fn replay_tagging_through_handles() {
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    let split = CounterConfig::counting(spec("replay_event:NBOGUS:SP_LD_RET:k"), Escr::CruEscr2);
    let e = c.c12.configure(&mut d, &split).unwrap_err();
    assert_eq!(
        e.error,
        Error::Config(ConfigError::MissingUpstream {
            event: EventName::LoadPortReplay
        })
    );
    let untagged = CounterConfig::counting(spec("replay_event:NBOGUS:k"), Escr::CruEscr2);
    let e = e.counter.configure(&mut d, &untagged).unwrap_err();
    assert!(matches!(
        e.error,
        Error::Config(ConfigError::Untagged {
            tagging: Tagging::Replay,
            ..
        })
    ));
    let l1 = CounterConfig::counting(spec("replay_event:NBOGUS:L1_LD_MISS:k"), Escr::CruEscr2);
    d.msr().clear();
    let c12 = e
        .counter
        .configure(&mut d, &l1)
        .unwrap()
        .enable(&mut d)
        .unwrap();
    assert_eq!(
        d.msr().take_counts(),
        counts(0, 5, 0),
        "ESCR, counter, MSR_PEBS_ENABLE, MSR_PEBS_MATRIX_VERT, CCCR"
    );
    // The same metric on T1's side shares the registers: nothing more.
    let l1_t1 = CounterConfig {
        escr: Escr::CruEscr3,
        lp: LogicalProcessor::T1,
        ..l1
    };
    let c14 = c.c14.configure(&mut d, &l1_t1).unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 2, 0), "ESCR, counter");
    let c14 = c14.release(&mut d).unwrap();
    assert_eq!(
        d.msr().take_counts(),
        counts(0, 2, 0),
        "CCCR, counter: still in use"
    );
    let other_metric =
        CounterConfig::counting(spec("replay_event:NBOGUS:L2_LD_MISS:k"), Escr::CruEscr3);
    let e = c.c15.configure(&mut d, &other_metric).unwrap_err();
    assert_eq!(e.error, Error::Config(ConfigError::ReplayTaggingBusy));
    let l1_misses = Uops {
        replays: replay::L1_LOAD_MISS,
        ..Uops::new(ModelLp::T0, Privilege::Os, UopKind::Load, 6)
    };
    model(&mut d).retire(&l1_misses);
    model(&mut d).retire(&Uops::new(ModelLp::T0, Privilege::Os, UopKind::Load, 4));
    assert_eq!(c12.read(&mut d).unwrap(), 6);
    // The last user's release clears the shared registers.
    d.msr().clear();
    let _ = (c12.release(&mut d).unwrap(), c14);
    assert_eq!(d.msr().take_counts(), counts(0, 4, 0), "and both PEBS MSRs");
    assert_eq!(model(&mut d).read_msr(MSR_PEBS_ENABLE).unwrap(), 0);
    assert_eq!(model(&mut d).read_msr(MSR_PEBS_MATRIX_VERT).unwrap(), 0);
    // Now another metric may go: split loads with their upstream first.
    let upstream = CounterConfig::counting(spec("load_port_replay:SPLIT_LD:k"), Escr::SaatEscr1);
    let c10 = c
        .c10
        .configure(&mut d, &upstream)
        .unwrap()
        .enable(&mut d)
        .unwrap();
    let c15 = e
        .counter
        .configure(
            &mut d,
            &CounterConfig {
                escr: Escr::CruEscr3,
                ..split
            },
        )
        .unwrap();
    let _ = (c15.release(&mut d).unwrap(), c10.release(&mut d).unwrap());
}

//! PEBS on the architectural PMU against the model, which writes its
//! records into the DS area's memory from its own layout tables (record
//! formats 1 to 5), for instructions whose addresses the test feeds it one
//! at a time: exact register traffic per operation, each record decoded
//! per format and its IPs checked against the instruction that retired the
//! event, the refusals (with no register access), and a randomized check
//! that every event fed to a PEBS counter is in exactly one record or in
//! its residual count. All counts here come from the model.

use super::*;
use crate::arch::archperf::{
    IA32_DS_AREA, IA32_PEBS_ENABLE, MSR_PEBS_DATA_CFG, MSR_PEBS_LD_LAT, PebsArea, PebsRecord,
};
use crate::arch::ia32::ds::DsArea;
use crate::model::archperf::{Branch, BranchKind, Gprs, Load, PebsConfig, Retirement};

/// A DS area of `K` slots of 208 bytes, for good (a kernel's `static`).
fn area<const K: usize>() -> DsArea {
    let memory: &'static mut PebsArea<K> = Box::leak(Box::new(PebsArea::new()));
    // SAFETY: a leaked allocation: mapped at its address in the test
    // process's one address space.
    unsafe { DsArea::new(memory) }
}

/// The model may write the DS area the driver installs: it stands for the
/// processor, and the area is leaked memory only the driver's `DsArea`
/// knows by its address.
fn attach<O: Owner>(d: &mut Ap<'_, O>) {
    // SAFETY: the only DS areas these tests install are `area()`'s, leaked
    // memory no reference covers.
    unsafe { model(d).attach_ds_memory() };
}

/// Instruction `k` of a made-up workload: at 0x40_0000 + 4k, the next one
/// 4 bytes on, RAX = k after it; every third a taken branch to 0x50_0000 +
/// k; every fifth a load of latency 10 k at 0x60_0000 + 8k.
fn instruction(k: u64) -> Retirement {
    let ip = 0x40_0000 + 4 * k;
    let branch = k % 3 == 2;
    Retirement {
        ip,
        next_ip: if branch { 0x50_0000 + k } else { ip + 4 },
        rflags: 0x202,
        registers: Gprs {
            rax: k,
            rbx: 0xB0 + k,
            rsp: 0x7000 - k,
            r15: !k,
            ..Gprs::default()
        },
        branch: branch.then_some(Branch {
            kind: BranchKind::Conditional,
            taken: true,
        }),
        load: (k % 5 == 4).then_some(Load {
            address: 0x60_0000 + 8 * k,
            latency: 10 * k,
            source: 3,
        }),
        ..Retirement::NONE
    }
}

/// Feeds instructions `from..to`; after each, a pending PMI goes through
/// the handler (at the next instruction's address, as an interrupt taken
/// after the instruction), its samples to `out`.
fn run<O: Owner>(d: &mut Ap<'_, O>, from: u64, to: u64, out: &mut Vec<Sample<Capture>>) -> u32 {
    let mut pmis = 0;
    for k in from..to {
        let r = instruction(k);
        if model(d).retire(&r) && model(d).take_pmi() {
            let pmu = d.physical();
            handle_pmi(pmu, d.msr(), &mut Lvt::default(), entry(), r.next_ip, |s| {
                out.push(s)
            })
            .unwrap();
            pmis += 1;
        }
    }
    pmis
}

fn pebs_record(s: &Sample<Capture>) -> PebsRecord {
    *s.payload.pebs().expect("a PEBS sample")
}

const BRANCHES: (u8, u8) = (0xC4, 0x00);

/// The exact traffic of each PEBS operation on Skylake (record format 3):
/// the area (1 WRMSR), a PEBS counter's configuration (preset,
/// `IA32_PEBS_ENABLE`, the select without INT), start and halt (one
/// `GLOBAL_CTRL` write each, no RDPMC: a PEBS counter's periods are its
/// records), the buffer's PMI (the status read, one RDPMC of the PEBS
/// counter, the acknowledgement of bit 62 and the PEBS counter's status
/// bit, the LVT), release (`IA32_PEBS_ENABLE`, select, counter) and the
/// area back (1 WRMSR).
#[test]
fn pebs_traffic_is_exact() {
    let pmu = crate::testing::archperf_pmu();
    let (mut d, c) = driver!(&pmu, Config::skylake());
    attach(&mut d);
    let a = area::<8>();
    let address = a.address();
    assert!(d.set_pebs_area(a).unwrap().is_none());
    assert_eq!(
        d.msr().log(),
        [Access::WriteMsr {
            msr: IA32_DS_AREA,
            value: address
        }]
    );
    d.msr().clear();
    let n = SampleAfter::new(4, d.overflow_rule()).unwrap();
    let config = CounterConfig::counting(spec("instructions:pp")).sampling(n);
    let g0 = c.g0.configure(&mut d, &config).unwrap();
    let preset = (1 << 48) - 3;
    assert_eq!(
        d.msr().log(),
        [
            Access::WriteMsr {
                msr: 0x4C1,
                value: preset
            },
            Access::WriteMsr {
                msr: IA32_PEBS_ENABLE,
                value: 1
            },
            Access::WriteMsr {
                msr: IA32_PERFEVTSEL0,
                value: 0xC0 | 1 << 16 | 1 << 17 | 1 << 22
            },
        ],
        "preset -(N-1), PEBS_EN_PMC0, the select with EN and without INT"
    );
    let m = d.pebs_area().unwrap().read_management();
    assert_eq!(m.pebs_counter_reset[0], preset);
    assert_eq!(
        m.pebs_absolute_maximum - m.pebs_buffer_base,
        8 * 208 / 200 * 200
    );
    assert_eq!(
        m.pebs_interrupt_threshold - m.pebs_buffer_base,
        200,
        "a PMI per record"
    );
    d.msr().clear();
    let g0 = g0.enable(&mut d).unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 1, 0), "GLOBAL_CTRL");
    let mut out = Vec::new();
    assert_eq!(
        run(&mut d, 0, 4, &mut out),
        1,
        "the 4th instruction's record"
    );
    let log = d.msr().log().to_vec();
    assert_eq!(log.len(), 3, "{log:?}");
    assert!(
        matches!(log[0], Access::ReadMsr { msr: IA32_PERF_GLOBAL_STATUS, value } if value & 1 << 62 != 0)
    );
    assert!(matches!(log[1], Access::Rdpmc { index: 0, .. }), "{log:?}");
    assert_eq!(
        log[2],
        Access::WriteMsr {
            msr: 0x390,
            value: 1 << 62 | 1
        },
        "bit 62 and the PEBS counter's status bit"
    );
    assert_eq!(out.len(), 1);
    assert_eq!(
        out[0].rip,
        instruction(3).ip,
        "EventingIP: the 4th instruction"
    );
    assert_eq!((out[0].counter, out[0].periods), (0, 1));
    assert_eq!(pmu.pmi().periods(0), 1);
    d.msr().clear();
    let g0 = g0.halt(&mut d).unwrap();
    assert_eq!(d.msr().take_counts(), counts(0, 1, 0), "GLOBAL_CTRL only");
    let g0 = g0.release(&mut d).unwrap();
    assert_eq!(
        d.msr().log(),
        [
            Access::WriteMsr {
                msr: IA32_PEBS_ENABLE,
                value: 0
            },
            Access::WriteMsr {
                msr: IA32_PERFEVTSEL0,
                value: 0
            },
            Access::WriteMsr {
                msr: 0x4C1,
                value: 0
            },
        ]
    );
    d.msr().clear();
    assert!(d.take_pebs_area().is_ok());
    assert_eq!(
        d.msr().log(),
        [Access::WriteMsr {
            msr: IA32_DS_AREA,
            value: 0
        }]
    );
    let _ = d.give_back(Counters { g0, ..c });
}

/// Ice Lake (PEBS baseline): the first PEBS counter also writes
/// `MSR_PEBS_DATA_CFG` and the select's Adaptive_Record bit; a fixed
/// counter takes PEBS too (its `IA32_PEBS_ENABLE` bit 32 + i, its
/// Adaptive_Record bit 32 + 4i in `FIXED_CTR_CTRL`, its reset value after
/// 8 general counters'); a second PEBS counter with the same options
/// writes no `DATA_CFG` again; load latency writes `MSR_PEBS_LD_LAT` once.
#[test]
fn baseline_traffic_is_exact() {
    let pmu = crate::testing::archperf_pmu();
    let (mut d, c) = driver!(&pmu, Config::icelake());
    attach(&mut d);
    d.set_pebs_area(area::<8>()).unwrap();
    d.msr().clear();
    let n = SampleAfter::new(10, d.overflow_rule()).unwrap();
    let options = PebsOptions {
        gprs: true,
        load_latency: Some(30),
        ..PebsOptions::DEFAULT
    };
    let config = CounterConfig::counting(spec("event=0xcd,umask=0x01:p"))
        .sampling(n)
        .pebs(options);
    let g1 = c.g1.configure(&mut d, &config).unwrap();
    let preset = (1 << 48) - 9;
    assert_eq!(
        d.msr().log(),
        [
            Access::WriteMsr {
                msr: 0x4C2,
                value: preset
            },
            Access::WriteMsr {
                msr: MSR_PEBS_DATA_CFG,
                value: 0b11
            },
            Access::WriteMsr {
                msr: MSR_PEBS_LD_LAT,
                value: 30
            },
            Access::WriteMsr {
                msr: IA32_PEBS_ENABLE,
                value: 0b10
            },
            Access::WriteMsr {
                msr: IA32_PERFEVTSEL0 + 1,
                value: 0xCD | 1 << 8 | 1 << 16 | 1 << 17 | 1 << 22 | 1 << 34
            },
        ],
        "load latency forces the memory group"
    );
    d.msr().clear();
    // The fixed counter counts no loads: no load latency for it, the
    // buffer's other options the same (the memory group included).
    let shared = PebsOptions {
        memory: true,
        load_latency: None,
        ..options
    };
    let fixed = CounterConfig::counting(spec("instructions:ppp"))
        .sampling(n)
        .pebs(shared);
    let f0 = c.f0.unwrap().configure(&mut d, &fixed).unwrap();
    assert_eq!(
        d.msr().log(),
        [
            Access::WriteMsr {
                msr: 0x309,
                value: preset
            },
            Access::WriteMsr {
                msr: IA32_PEBS_ENABLE,
                value: 0b10 | 1 << 32
            },
            Access::WriteMsr {
                msr: 0x38D,
                value: 0b11 | 1 << 32
            },
        ],
        "OS, USR, no PMI, Adaptive_Record"
    );
    let m = d.pebs_area().unwrap().read_management();
    assert_eq!(
        (m.pebs_counter_reset[1], m.pebs_counter_reset[8]),
        (preset, preset)
    );
    let other = CounterConfig::counting(spec("branches:p")).sampling(n);
    let e = c.g2.unwrap().configure(&mut d, &other).unwrap_err();
    assert_eq!(e.error, Error::Config(ConfigError::PebsOptionsDiffer));
    let threshold = PebsOptions {
        load_latency: Some(31),
        ..options
    };
    let e = e
        .counter
        .configure(&mut d, &other.pebs(threshold))
        .unwrap_err();
    assert_eq!(
        e.error,
        Error::Config(ConfigError::PebsOptionsDiffer),
        "one LD_LAT"
    );
    let _ = (g1, f0, e);
}

/// Each record format through the driver: the model writes the record of
/// the instruction that took the assist (the N-th of each period), the
/// handler decodes it, and the sample's IP is the one the precise level
/// asks for: `:p` the next instruction's (the RIP field; EventingIP in an
/// adaptive record without GPRs), `:pp` the instruction of the event. The
/// registers, applicable counters, memory fields and TSC are the ones the
/// format has.
#[test]
fn records_of_every_format_carry_the_instruction_of_the_event() {
    let icelake5 = Config {
        pebs: PebsConfig::format(5),
        ..Config::icelake()
    };
    let groups = [
        PebsOptions::DEFAULT,
        PebsOptions {
            memory: true,
            ..PebsOptions::DEFAULT
        },
        PebsOptions {
            gprs: true,
            ..PebsOptions::DEFAULT
        },
        PebsOptions {
            memory: true,
            gprs: true,
            ..PebsOptions::DEFAULT
        },
    ];
    let mut cases = Vec::new();
    for (config, format) in [
        (Config::nehalem(), 1u8),
        (Config::haswell(), 2),
        (Config::skylake(), 3),
        (Config::icelake(), 4),
        (icelake5, 5),
    ] {
        for precise in 1..=3u8 {
            for options in groups {
                if format < 4 && options != PebsOptions::DEFAULT {
                    continue;
                }
                cases.push((config, format, precise, options));
            }
        }
    }
    for (config, format, precise, options) in cases {
        let pmu = crate::testing::archperf_pmu();
        let (mut d, c) = driver!(&pmu, config);
        attach(&mut d);
        d.set_pebs_area(area::<16>()).unwrap();
        let n = SampleAfter::new(7, d.overflow_rule()).unwrap();
        let event = EventSpec::raw(0xC4, 0x00).with_precise(precise);
        let cfg = CounterConfig::counting(event).sampling(n).pebs(options);
        let g0 = match c.g0.configure(&mut d, &cfg) {
            Ok(g0) => g0,
            Err(e) => {
                assert_eq!(format, 1, "{e:?}");
                assert!(precise >= 2);
                assert_eq!(
                    e.error,
                    Error::Config(ConfigError::NoEventingIp { format: 1 })
                );
                assert_eq!(
                    ConfigError::NoEventingIp { format: 1 }.to_string(),
                    ":pp and :ppp ask for the event's own instruction (EventingIP), which PEBS record format 1 lacks: use :p, the next instruction's address"
                );
                let _ = d.give_back(Counters { g0: e.counter, ..c });
                continue;
            }
        };
        let g0 = g0.enable(&mut d).unwrap();
        let mut out = Vec::new();
        // 105 instructions: 35 branches (every third), 5 periods.
        run(&mut d, 0, 105, &mut out);
        let what = format!(
            "format {format}, :{}, {options:?}",
            "p".repeat(precise.into())
        );
        assert_eq!(out.len(), 5, "{what}");
        for (j, s) in out.iter().enumerate() {
            // The (7j+7)-th branch: instruction 3(7j+7) - 1.
            let k = 3 * (7 * j as u64 + 7) - 1;
            let event = instruction(k);
            let r = pebs_record(s);
            assert_eq!(r.format(), format, "{what}");
            let adaptive_gprs = format >= 4 && options.gprs;
            let next = (format <= 3 || adaptive_gprs).then_some(event.next_ip);
            assert_eq!(r.next_ip(), next, "{what}");
            assert_eq!(r.eventing_ip(), (format >= 2).then_some(event.ip), "{what}");
            let expected = if precise >= 2 || next.is_none() {
                event.ip
            } else {
                event.next_ip
            };
            assert_eq!(s.rip, expected, "{what}: record {j}");
            assert_eq!(s.counter, 0);
            if format <= 3 || adaptive_gprs {
                let g = r.gprs().unwrap();
                assert_eq!(
                    (g.rax, g.rbx, g.rsp, g.r15),
                    (k, 0xB0 + k, 0x7000 - k, !k),
                    "{what}"
                );
                assert_eq!(r.rflags(), Some(0x202));
            } else {
                assert_eq!(r.gprs(), None);
            }
            assert_eq!(
                r.memory().is_some(),
                format <= 3 || options.memory,
                "{what}"
            );
            assert_eq!(r.tsc().is_some(), format >= 3, "{what}");
            if format >= 3 {
                assert_eq!(r.counters().bits(), 1, "{what}: applicable counters");
            } else {
                assert_ne!(r.counters().bits() & 1, 0, "{what}: the status field");
            }
        }
        assert_eq!(pmu.pmi().periods(0), 5);
        assert_eq!(pmu.pmi().pebs_dropped(), 0);
        let g0 = g0.halt(&mut d).unwrap();
        assert_eq!(
            crate::arch::archperf::driver::pebs_residual(n, g0.read(&mut d).unwrap()),
            0,
            "35 branches: 5 records of 7"
        );
        let g0 = g0.release(&mut d).unwrap();
        let _ = d.give_back(Counters { g0, ..c });
    }
}

/// Load latency: only loads above `MSR_PEBS_LD_LAT`'s threshold count for
/// the load-latency event, and their records carry the load's address,
/// data source and latency (formats 1-3 in every record, adaptive records
/// in the memory group that load latency turns on).
#[test]
fn load_latency_records_carry_the_load() {
    for config in [Config::nehalem(), Config::skylake(), Config::icelake()] {
        let pmu = crate::testing::archperf_pmu();
        let (mut d, c) = driver!(&pmu, config);
        attach(&mut d);
        d.set_pebs_area(area::<16>()).unwrap();
        let n = SampleAfter::new(2, d.overflow_rule()).unwrap();
        let (select, umask) = config.pebs.load_latency_event;
        let options = PebsOptions {
            load_latency: Some(100),
            ..PebsOptions::DEFAULT
        };
        let cfg = CounterConfig::counting(EventSpec::raw(select, umask).with_precise(1))
            .sampling(n)
            .pebs(options);
        let g3 = c.g3.unwrap().configure(&mut d, &cfg).unwrap();
        let enable = model(&mut d).read_msr(IA32_PEBS_ENABLE).unwrap();
        if config.pebs.baseline {
            assert_eq!(enable, 1 << 3);
        } else {
            assert_eq!(enable, 1 << 3 | 1 << 35, "PEBS_EN_PMC3 and LL_EN_PMC3");
        }
        let g3 = g3.enable(&mut d).unwrap();
        let mut out = Vec::new();
        // Loads at k = 4, 9, 14, ...: latency 10k above 100 from k = 14.
        run(&mut d, 0, 60, &mut out);
        // Loads above the threshold: k = 14, 19, ..., 59: 10 of them, 5
        // records, each at the second of a pair.
        assert_eq!(out.len(), 5, "{config:?}");
        for (j, s) in out.iter().enumerate() {
            let k = 14 + 5 * (2 * j as u64 + 1);
            let m = pebs_record(s).memory().unwrap();
            assert_eq!(
                (m.address, m.latency, m.source),
                (0x60_0000 + 8 * k, 10 * k, 3)
            );
        }
        let g3 = g3.halt(&mut d).unwrap().release(&mut d).unwrap();
        let _ = d.give_back(Counters { g3: Some(g3), ..c });
    }
}

/// Every refusal comes before any register access, with its message.
#[test]
fn pebs_refusals_touch_no_register() {
    crate::owner!(Nehalem);
    crate::owner!(Sky);
    crate::owner!(Ice);
    crate::owner!(Core2);
    let n_pmu = crate::testing::archperf_pmu();
    let (mut nhm, nc) = take::<Nehalem>(&n_pmu, Config::nehalem());
    let n = SampleAfter::new(10, nhm.overflow_rule()).unwrap();
    let pebs = |s: &str| CounterConfig::counting(spec(s)).sampling(n);
    // No area yet.
    let e = nc.g0.configure(&mut nhm, &pebs("branches:p")).unwrap_err();
    assert_eq!(e.error, Error::Config(ConfigError::NoPebsArea));
    let g0 = e.counter;
    nhm.set_pebs_area(area::<4>()).unwrap();
    nhm.msr().clear();
    let table = [
        ("branches:pp", ConfigError::NoEventingIp { format: 1 }),
        ("event=0xc4,cmask=2:p", ConfigError::PebsFilter),
    ];
    let mut g0 = Some(g0);
    for (s, error) in table {
        let e = g0
            .take()
            .unwrap()
            .configure(&mut nhm, &pebs(s))
            .unwrap_err();
        assert_eq!(e.error, Error::Config(error), "{s}");
        g0 = Some(e.counter);
    }
    let e = g0
        .take()
        .unwrap()
        .configure(&mut nhm, &CounterConfig::counting(spec("branches:p")))
        .unwrap_err();
    assert_eq!(e.error, Error::Config(ConfigError::PreciseNeedsSampling));
    let one = SampleAfter::new(1, nhm.overflow_rule()).unwrap();
    let e = e
        .counter
        .configure(
            &mut nhm,
            &CounterConfig::counting(spec("branches:p")).sampling(one),
        )
        .unwrap_err();
    assert_eq!(e.error, Error::Config(ConfigError::PebsPeriod));
    let f1 = nc
        .f1
        .unwrap()
        .configure(&mut nhm, &pebs("cycles:p"))
        .unwrap_err();
    assert_eq!(f1.error, Error::Config(ConfigError::NotPebsCounter(33)));
    let g0 = e.counter.configure(&mut nhm, &pebs("branches:p")).unwrap();
    nhm.msr().clear();
    let e = nc
        .g1
        .configure(&mut nhm, &pebs("instructions:p"))
        .unwrap_err();
    assert_eq!(
        e.error,
        Error::Config(ConfigError::PebsOneCounter { format: 1 })
    );
    assert_eq!(nhm.msr().take_counts(), counts(0, 0, 0));
    assert_eq!(
        nhm.take_pebs_area().map(|_| ()),
        Err(Error::Config(ConfigError::PebsBusy))
    );
    assert_eq!(
        nhm.set_pebs_area(area::<4>()).map(|_| ()),
        Err(Error::Config(ConfigError::PebsBusy))
    );
    let g0 = g0.enable(&mut nhm).unwrap();
    assert_eq!(
        nhm.drain_pebs(|_| {}),
        Err(Error::Config(ConfigError::PebsRunning))
    );
    assert_eq!(nhm.msr().take_counts(), counts(0, 1, 0), "the enable only");
    let _ = g0;

    // Skylake: counters 0-3 only; load latency on those only.
    let s_pmu = crate::testing::archperf_pmu();
    let (mut sky, sc) = take::<Sky>(&s_pmu, Config::skylake());
    sky.set_pebs_area(area::<4>()).unwrap();
    sky.msr().clear();
    let e = sc
        .f0
        .unwrap()
        .configure(&mut sky, &pebs("instructions:p"))
        .unwrap_err();
    assert_eq!(e.error, Error::Config(ConfigError::NotPebsCounter(32)));
    assert_eq!(sky.msr().take_counts(), counts(0, 0, 0));

    // Ice Lake: fixed counters take PEBS, but no load latency.
    let i_pmu = crate::testing::archperf_pmu();
    let (mut ice, ic) = take::<Ice>(&i_pmu, Config::icelake());
    ice.set_pebs_area(area::<4>()).unwrap();
    ice.msr().clear();
    let ll = PebsOptions {
        load_latency: Some(3),
        ..PebsOptions::DEFAULT
    };
    let e = ic
        .f0
        .unwrap()
        .configure(&mut ice, &pebs("instructions:p").pebs(ll))
        .unwrap_err();
    assert_eq!(e.error, Error::Config(ConfigError::NoLoadLatency(32)));
    assert_eq!(ice.msr().take_counts(), counts(0, 0, 0));

    // Core 2 (no PEBS here): unavailable, area refused.
    let c_pmu = crate::testing::archperf_pmu();
    let (mut core2, cc) = take::<Core2>(&c_pmu, Config::core2());
    let n2 = SampleAfter::new(10, core2.overflow_rule()).unwrap();
    let e = cc
        .g0
        .configure(
            &mut core2,
            &CounterConfig::counting(spec("instructions:p")).sampling(n2),
        )
        .unwrap_err();
    assert_eq!(e.error, Error::Config(ConfigError::PebsUnavailable));
    assert_eq!(
        core2.set_pebs_area(area::<4>()).map(|_| ()),
        Err(Error::Config(ConfigError::PebsUnavailable))
    );
    assert_eq!(core2.msr().take_counts(), counts(0, 0, 0));
}

/// A driver dropped with a PEBS counter running idles it: its select 0,
/// `IA32_PEBS_ENABLE` 0, `IA32_DS_AREA` 0, nothing armed for the handler.
#[test]
fn a_dropped_driver_takes_its_area_back() {
    let pmu = crate::testing::archperf_pmu();
    crate::owner!(Dropped);
    let m = ArchPerfModel::new(Config::icelake());
    let info = cpu(&m);
    let mut rec = Recording::<_, 64>::new(m);
    let (mut d, c) = ArchPerfDriver::<Dropped, _>::take(&mut rec, &info, &pmu).unwrap();
    d.set_pebs_area(area::<4>()).unwrap();
    let n = SampleAfter::new(10, d.overflow_rule()).unwrap();
    let cfg = CounterConfig::counting(spec("instructions:p")).sampling(n);
    let f0 = c.f0.unwrap().configure(&mut d, &cfg).unwrap();
    let f0 = f0.enable(&mut d).unwrap();
    drop(d);
    let m = rec.inner_mut();
    assert_eq!(m.read_msr(IA32_PEBS_ENABLE).unwrap(), 0);
    assert_eq!(m.read_msr(IA32_DS_AREA).unwrap(), 0);
    assert_eq!(m.read_msr(0x38D).unwrap(), 0);
    assert!(pmu.pmi().armed().is_empty());
    assert!(pmu.pmi().pebs_counters().is_empty());
    let _ = f0;
}

/// Conservation, randomized: on each PEBS configuration (Skylake, one to
/// three PEBS counters of random periods; Ice Lake with a fixed counter;
/// Haswell with one), instructions and branches fed one at a time with the
/// PMI taken at once or some instructions late (the records piling up,
/// and sometimes filling the buffer, whose assists then keep their events
/// in the counter); at the end the counters are halted, the buffer drained
/// and each counter read. Every event fed to a PEBS counter is in exactly
/// one record or in its residual count: `events = records × N +
/// pebs_residual`, and the samples add up to the periods.
#[test]
fn every_event_is_in_one_record_or_the_residual() {
    let mut rnd = crate::testing::rng(0x5EB5_0001);
    let (mut records, mut full, mut late) = (0, 0, 0);
    for round in 0..60u64 {
        let (config, max_counters) = match round % 3 {
            0 => (Config::skylake(), 3),
            1 => (Config::icelake(), 3),
            _ => (Config::haswell(), 1),
        };
        let pmu = crate::testing::archperf_pmu();
        let (mut d, c) = driver!(&pmu, config);
        attach(&mut d);
        d.set_pebs_area(area::<6>()).unwrap();
        let options = PebsOptions {
            records_per_pmi: 1 + rnd(3) as u32,
            gprs: rnd(2) == 0,
            ..PebsOptions::DEFAULT
        };
        let mut handles = c.erase_all();
        // (handle index, event, N).
        let mut chosen: Vec<(usize, (u8, u8), SampleAfter)> = Vec::new();
        let want = 1 + rnd(max_counters) as usize;
        let candidates: &[(usize, (u8, u8))] = if config.pebs.baseline {
            &[(8, INSTRUCTIONS), (1, BRANCHES), (2, INSTRUCTIONS)]
        } else {
            &[(0, BRANCHES), (1, INSTRUCTIONS), (3, BRANCHES)]
        };
        for &(i, event) in candidates.iter().take(want) {
            let rule = d.overflow_rule();
            let n = SampleAfter::new(2 + rnd(9), rule).unwrap();
            let spec = EventSpec::raw(event.0, event.1).with_precise(1 + rnd(3) as u8);
            let cfg = CounterConfig::counting(spec).sampling(n).pebs(options);
            let h = handles[i].as_mut().unwrap();
            h.configure(&mut d, &cfg).unwrap();
            h.enable(&mut d).unwrap();
            chosen.push((i, event, n));
        }
        let mut samples = Vec::new();
        let mut pending = false;
        let (mut instructions, mut branches) = (0u64, 0u64);
        for k in 0..(200 + rnd(300)) {
            let r = instruction(k);
            instructions += 1;
            branches += u64::from(r.branch.is_some());
            pending |= model(&mut d).retire(&r);
            // Taken at once, or some instructions late.
            let now = rnd(4) == 0;
            late += u64::from(pending && !now);
            if pending && now && model(&mut d).take_pmi() {
                let pmu = d.physical();
                handle_pmi(pmu, d.msr(), &mut Lvt::default(), entry(), r.next_ip, |s| {
                    samples.push(s)
                })
                .unwrap();
                pending = false;
            }
        }
        for &(i, _, _) in &chosen {
            handles[i].as_mut().unwrap().halt(&mut d).unwrap();
        }
        d.drain_pebs(|s| samples.push(s)).unwrap();
        for &(i, event, n) in &chosen {
            let h = handles[i].as_mut().unwrap();
            let raw = h.read(&mut d).unwrap();
            let fed = if event == BRANCHES {
                branches
            } else {
                instructions
            };
            let counter = h.index();
            let periods = pmu.pmi().periods(counter);
            let residual = crate::arch::archperf::driver::pebs_residual(n, raw);
            assert_eq!(
                fed,
                periods * n.get() + residual,
                "round {round}: counter {counter}, N {}, {periods} records, residual {residual}, lost {}",
                n.get(),
                model(&mut d).pebs_lost()
            );
            let sampled: u64 = samples
                .iter()
                .filter(|s| s.counter == counter)
                .map(|s| u64::from(s.periods))
                .sum();
            assert_eq!(sampled, periods, "round {round}: counter {counter}");
            h.release(&mut d).unwrap();
        }
        assert_eq!(pmu.pmi().pebs_dropped(), 0);
        records += model(&mut d).pebs_records();
        full += u64::from(model(&mut d).pebs_lost() > 0);
        let Ok(c) = Counters::from_erased(handles) else {
            panic!("every handle back")
        };
        let _ = d.give_back(c);
    }
    // The randomness reached what it is for: records, PMIs taken late, and
    // buffers full.
    assert!(
        records > 1000 && late > 100 && full >= 3,
        "{records} {late} {full}"
    );
}

//! The world switch's isolation property, checked on the NetBurst model (a test
//! instrument written from the manuals, independently of `check_msr_write`):
//!
//! * random guest writes, per guest policy: a random MSR in and around the
//!   PMU's range 300H-3FFH with a random value, through [`check_msr_write`];
//!   every write it applies the model of the guest's processor takes
//!   (zero applied writes the hardware would #GP), every #GP it gives for
//!   a hardware reason the model gives too, no applied write touches a
//!   host register, no guest counter ever selects a host ESCR or cascades
//!   from a host counter, the host's counter counts exactly its events,
//!   and the emulated vPMU answers each write exactly as `check_msr_write`;
//! * random world switches between two guests beside a host counter, with
//!   cascades, extended cascades and all three tagging mechanisms in use:
//!   after every switch each register the incoming guest can read equals
//!   what a private model of that guest's PMU (fed only that guest's
//!   writes and events) holds, so no read shows another context's value,
//!   no switched-out counter counted the other side's events (events are
//!   injected while the other guest runs and while none does), each guest's
//!   counts are exact, and the host's counter and registers are exact.
//!
//! Every count is the model's. Both run at full size (1,000,000 writes per
//! policy, 10,000 switches) in every `cargo test`: about two seconds.

use std::vec::Vec;

use super::*;
use crate::access::{AccessCounts, Recording};
use crate::model::netburst::{
    Config, EscrGroup, EventKind, LogicalProcessor as Lp, NetBurstModel, Privilege, UopKind, Uops,
    replay,
};
use crate::testing::rng;
use crate::virt::vpmu::VirtualPmu;

const RUNNING: EventKind = EventKind::new(EscrGroup::Fsb, 0x13, 1);
const FETCH: EventKind = EventKind::new(EscrGroup::Bpu, 0x03, 1);
const INSTR: EventKind = EventKind::new(EscrGroup::Cru01, 0x02, 1);
const X87: EventKind = EventKind::new(EscrGroup::Firm, 0x04, 1 << 15);

const fn escr(select: u64, mask: u64) -> u64 {
    select << 25 | mask << 9
}
const T0_OS: u64 = 1 << 3;
const T0_USR: u64 = 1 << 2;
const ENABLE: u64 = 1 << 12;
const CASCADE: u64 = 1 << 30;
const OVF_PMI: u64 = 1 << 26;
const ANY: u64 = 3 << 16;
const fn cccr(select: u64) -> u64 {
    select << 13 | ANY | ENABLE
}

/// A random 64-bit value from the fixed-seed generator.
fn u64_of(rnd: &mut impl FnMut(u64) -> u64) -> u64 {
    rnd(1 << 32) << 32 | rnd(1 << 32)
}

/// A random MSR in and around the PMU's range: mostly 300H-3FFH, some just
/// below and above it, IA32_MISC_ENABLE, IA32_DS_AREA, and the defined
/// registers more often than their share.
fn random_msr(rnd: &mut impl FnMut(u64) -> u64) -> u32 {
    (match rnd(20) {
        0..=11 => 0x300 + rnd(0x100),
        12 => 0x2C0 + rnd(0x40),
        13 => 0x400 + rnd(0x40),
        14 => 0x1A0,
        15 => 0x600,
        16 => 0x300 + rnd(18),
        17 => 0x360 + rnd(18),
        18 => 0x3F0 + rnd(3),
        _ => u64::from(Escr::ALL[rnd(45) as usize].msr()),
    }) as u32
}

/// A random value for `msr`: any 64 bits, any 32, a single bit, or one
/// built from the register's fields (so that legal writes are common).
fn random_value(rnd: &mut impl FnMut(u64) -> u64, msr: u32) -> u64 {
    match rnd(4) {
        0 => u64_of(rnd),
        1 => rnd(1 << 32),
        2 => 1 << rnd(64),
        _ => match classify(msr) {
            MsrClass::Counter(_) => match rnd(3) {
                0 => rnd(1 << 40),
                1 => (1 << 40) - 1 - rnd(64),
                _ => rnd(1000),
            },
            MsrClass::Cccr(_) => {
                let at = if rnd(8) == 0 { rnd(4) << 16 } else { ANY };
                let flags = [ENABLE, 1 << 11, 1 << 18, 1 << 19, 1 << 24, 1 << 25]
                    .into_iter()
                    .chain([OVF_PMI, 1 << 27, CASCADE, 1 << 31])
                    .filter(|_| rnd(3) == 0)
                    .fold(0, |a, b| a | b);
                rnd(8) << 13 | at | rnd(16) << 20 | flags
            }
            MsrClass::Escr(_) => rnd(64) << 25 | rnd(1 << 16) << 9 | rnd(32) << 4 | rnd(16),
            MsrClass::PebsEnable => rnd(1 << 27),
            MsrClass::PebsMatrixVert => rnd(32),
            MsrClass::TcPreciseEvent => rnd(1 << 17),
            _ => rnd(1 << 32),
        },
    }
}

/// Whether `msr` is one of the host's registers under `p`.
fn host_register(p: &GuestPolicy, msr: u32) -> bool {
    match classify(msr) {
        MsrClass::Counter(c) | MsrClass::Cccr(c) => p.host_counters.contains(c),
        MsrClass::Escr(e) => p.host_escrs.contains(e),
        MsrClass::PebsEnable | MsrClass::PebsMatrixVert | MsrClass::TcPreciseEvent => {
            p.host_tagging
        }
        _ => false,
    }
}

/// The #GP reasons that are the hardware's own (for a guest processor
/// without PEBS): the model of that processor must fault too.
fn hardware_reason(gp: GuestGp) -> bool {
    matches!(
        gp,
        GuestGp::Reserved { .. }
            | GuestGp::OtherLogicalProcessor { .. }
            | GuestGp::ActiveThreadMustBeAny { .. }
            | GuestGp::NoSuchMsr { .. }
    ) || matches!(gp, GuestGp::PebsRefused { msr } if msr == 0x3F1)
}

/// A guest counter (not the host's) whose CCCR on `m` would count through
/// a host ESCR or start on a host counter's overflow, if any.
fn guest_counter_runs_on_host(p: &GuestPolicy, m: &NetBurstModel) -> Option<usize> {
    (0..18).find(|&n| {
        let c = Counter::ALL[n];
        if p.host_counters.contains(c) {
            return false;
        }
        let v = CccrValue::from_bits_truncate_for(m.cccr(n), c.cccr(), p.model);
        let selects_host = c
            .escr_for_select(v.escr_select(), p.model)
            .is_some_and(|e| p.host_escrs.contains(e));
        let runs = v.enable() || v.cascade() || v.extended_cascade();
        (runs && selects_host)
            || (v.cascade() && p.host_counters.contains(c.cascade_source()))
            || (v.extended_cascade()
                && c.extended_cascade_source(p.model)
                    .is_some_and(|s| p.host_counters.contains(s)))
    })
}

/// What the random writes did, for the report.
#[derive(Debug, Default)]
struct WriteTally {
    applied: u64,
    refused_by_both: u64,
    refused_by_policy: u64,
    not_pmu: u64,
    host_events: u64,
}

/// `n` random guest writes under `p`, checked as the module says.
fn random_writes(p: &GuestPolicy, seed: u64, n: u64) -> WriteTally {
    let ht = p.logical_processors >= 2;
    let mut config = Config::new(p.model, ht);
    config.pebs_available = false;
    // `applied` gets the writes check_msr_write applies; `probe` the ones it
    // refuses for a hardware reason (a refused write changes nothing, so
    // one probe serves them all).
    let mut applied = NetBurstModel::new(config);
    let mut probe = NetBurstModel::new(config);
    let mut vpmu = (!ht).then(|| VirtualPmu::new(*p));
    // The host's counter: RUNNING at CPL 0 on the first counter and ESCR
    // it keeps that can count it (FSB_ESCR0 -> counter 0), if any.
    let host =
        p.host_counters.contains(Counter::BpuCounter0) && p.host_escrs.contains(Escr::FsbEscr0);
    if host {
        applied.write_msr(0x3A2, escr(0x13, 1) | T0_OS).unwrap();
        applied.write_msr(0x360, cccr(6)).unwrap();
    }
    let host_images: Vec<(u32, u64)> = (0x300..=0x3FF)
        .filter(|&m| host_register(p, m) && m != 0x300)
        .filter_map(|m| applied.read_msr(m).ok().map(|v| (m, v)))
        .collect();
    let mut rnd = rng(seed);
    let mut t = WriteTally::default();
    let mut wrong: Vec<std::string::String> = Vec::new();
    for i in 0..n {
        let msr = random_msr(&mut rnd);
        let value = random_value(&mut rnd, msr);
        let verdict = check_msr_write(p, msr, value);
        match verdict {
            Verdict::Apply => {
                t.applied += 1;
                if let Err(f) = applied.write_msr(msr, value) {
                    wrong.push(std::format!(
                        "applied {msr:#x} {value:#x}: the model says {f}"
                    ));
                }
                if host_register(p, msr) {
                    wrong.push(std::format!("applied {msr:#x} {value:#x}: a host register"));
                }
                if let MsrClass::Cccr(_) = classify(msr)
                    && let Some(c) = guest_counter_runs_on_host(p, &applied)
                {
                    wrong.push(std::format!(
                        "{msr:#x} {value:#x}: counter {c} on the host's"
                    ));
                }
            }
            Verdict::InjectGp(gp) if hardware_reason(gp) => {
                t.refused_by_both += 1;
                if probe.write_msr(msr, value).is_ok() {
                    wrong.push(std::format!("{gp} but the model takes {msr:#x} {value:#x}"));
                }
            }
            Verdict::InjectGp(_) => t.refused_by_policy += 1,
            Verdict::NotPmu => {
                t.not_pmu += 1;
                if PMU_MSRS.contains(&msr) {
                    wrong.push(std::format!("{msr:#x} NotPmu"));
                }
            }
            Verdict::Emulate => wrong.push(std::format!("{msr:#x} Emulate on a write")),
        }
        if let Some(v) = vpmu.as_mut() {
            let same = match (v.wrmsr(msr, value), verdict) {
                (Ok(true), Verdict::Apply) | (Ok(false), Verdict::NotPmu) => true,
                (Err(a), Verdict::InjectGp(b)) => a == b,
                _ => false,
            };
            if !same {
                wrong.push(std::format!(
                    "vpmu and check_msr_write differ on {msr:#x} {value:#x}"
                ));
            }
        }
        if host && i % 1000 == 999 {
            let k = 1 + rnd(20);
            applied.inject(RUNNING.on(Lp::T0, Privilege::Os, k));
            applied.inject(RUNNING.on(Lp::T0, Privilege::Usr, 3));
            t.host_events += k;
            if applied.counter(0) != t.host_events {
                wrong.push(std::format!(
                    "after write {i}: the host counted {} of {}",
                    applied.counter(0),
                    t.host_events
                ));
            }
        }
        if wrong.len() > 8 {
            break;
        }
    }
    for &(m, v) in &host_images {
        if applied.read_msr(m).ok() != Some(v) {
            wrong.push(std::format!("host register {m:#x} changed"));
        }
    }
    assert!(wrong.is_empty(), "{:?}: {wrong:?}", p);
    t
}

/// One-processor Prescott, the host keeps counter 0 and FSB_ESCR0,
/// `x87_FP_uop` denied (the `hypervisor` kernel's policy).
const PRESCOTT_HOST_COUNTER: GuestPolicy = GuestPolicy {
    filter: EventFilter::Deny(&[EventName::X87FpUop]),
    host_counters: CounterSet::EMPTY.with(Counter::BpuCounter0),
    host_escrs: EscrSet::EMPTY.with(Escr::FsbEscr0),
    ..GuestPolicy::new(3)
};

/// The four policies the writes run under: the kernel's; a Northwood
/// (model 2: IQ_ESCR0/1, extended cascade) whose host keeps counters 12 and
/// 16, CRU_ESCR2 and tagging; a guest with two logical processors (on a
/// Hyper-Threading host) of model 4 allowed three events; a model 0 guest
/// with everything.
fn policies() -> [(&'static str, GuestPolicy, u64); 4] {
    [
        (
            "model 3, host counter 0",
            PRESCOTT_HOST_COUNTER,
            0x9E37_79B9_7F4A_7C15,
        ),
        (
            "model 2, host counters 12/16, CRU_ESCR2, tagging",
            GuestPolicy {
                host_counters: CounterSet::EMPTY
                    .with(Counter::IqCounter0)
                    .with(Counter::IqCounter4),
                host_escrs: EscrSet::EMPTY.with(Escr::CruEscr2),
                host_tagging: true,
                ..GuestPolicy::new(2)
            },
            0xD1B5_4A32_D192_ED03,
        ),
        (
            "model 4, 2 logical processors, 3 events allowed",
            GuestPolicy {
                logical_processors: 2,
                filter: EventFilter::Allow(&[
                    EventName::GlobalPowerEvents,
                    EventName::InstrRetired,
                    EventName::ExecutionEvent,
                ]),
                ..GuestPolicy::new(4)
            },
            0xA076_1D64_78BD_642F,
        ),
        (
            "model 0, everything",
            GuestPolicy::new(0),
            0x2545_F491_4F6C_DD1D,
        ),
    ]
}

#[test]
fn random_guest_writes_never_reach_what_the_hardware_or_the_host_refuses() {
    let n = crate::testing::fuzz_cases(1_000_000);
    for (name, p, seed) in policies() {
        let t = random_writes(&p, seed, n);
        std::println!(
            "{name}: {n} random writes: {} applied (the model took each), {} #GP the model \
             raises too, {} #GP by policy, {} not PMU{}",
            t.applied,
            t.refused_by_both,
            t.refused_by_policy,
            t.not_pmu,
            if t.host_events > 0 {
                std::format!("; the host's counter exact over {} events", t.host_events)
            } else {
                std::string::String::new()
            }
        );
        // Each kind of answer happens, so no check above is vacuous.
        assert!(t.applied > n / 50, "{name}: {t:?}");
        assert!(t.refused_by_both > n / 10, "{name}: {t:?}");
        assert!(t.not_pmu > n / 50, "{name}: {t:?}");
        if p.host_counters.len() + p.host_escrs.len() > 0 {
            assert!(t.refused_by_policy > n / 100, "{name}: {t:?}");
        }
    }
}

type Hw = Recording<NetBurstModel, 64>;

/// A guest for the switch test: its context, its virtual LVT entry, and a
/// private model of its PMU that sees only its own writes and events.
struct Guest {
    ctx: PmuContext,
    lvt: VirtualLvt,
    reference: NetBurstModel,
    writes: u64,
    events: u64,
}

impl Guest {
    fn new() -> Guest {
        let mut reference = NetBurstModel::new(Config::new(3, false));
        // A guest's PMU starts from the neutral images (scrub_all's): the
        // CCCRs idle, written here by the test itself.
        for n in 0..18 {
            reference.write_msr(0x360 + n, ANY).unwrap();
        }
        Guest {
            ctx: PmuContext::new(),
            lvt: VirtualLvt::new(),
            reference,
            writes: 0,
            events: 0,
        }
    }

    /// A write the guest makes while loaded: if `check_msr_write` applies it,
    /// recorded, on the hardware and on the private model (both must take
    /// it).
    fn write(&mut self, p: &GuestPolicy, hw: &mut Hw, msr: u32, value: u64) {
        if check_msr_write(p, msr, value) == Verdict::Apply {
            assert!(self.ctx.record(msr, value));
            hw.write_msr(msr, value)
                .unwrap_or_else(|f| panic!("applied {msr:#x} {value:#x}: {f}"));
            self.reference.write_msr(msr, value).unwrap();
            self.writes += 1;
        }
    }
}

/// One of the set-ups the switch test's guests program: counting,
/// cascades, the extended cascade, and each tagging mechanism, from a
/// random preset (often just below the wrap, so cascades start).
fn program(rnd: &mut impl FnMut(u64) -> u64, g: &mut Guest, p: &GuestPolicy, hw: &mut Hw) {
    let preset = |rnd: &mut dyn FnMut(u64) -> u64| {
        if rnd(2) == 0 {
            (1 << 40) - 1 - rnd(40)
        } else {
            rnd(1000)
        }
    };
    let pmi = |rnd: &mut dyn FnMut(u64) -> u64| if rnd(2) == 0 { OVF_PMI } else { 0 };
    let mut w = |msr: u32, value: u64| g.write(p, hw, msr, value);
    match rnd(9) {
        // RUNNING on counter 2 or 3 through FSB_ESCR1.
        0 => {
            let c = 2 + rnd(2) as u32;
            w(0x3A3, escr(0x13, 1) | T0_OS);
            w(0x300 + c, preset(rnd));
            w(0x360 + c, cccr(6) | pmi(rnd));
        }
        // Fetch requests on counter 1 (BPU_ESCR0), counter 3 cascading
        // from it through FSB_ESCR1 (the cascade leak).
        1 => {
            w(0x3B2, escr(0x03, 1) | T0_OS);
            w(0x301, preset(rnd));
            w(0x361, cccr(0) | pmi(rnd));
            w(0x303, 0);
            w(0x363, 6 << 13 | ANY | CASCADE | pmi(rnd));
        }
        // instr_retired on counter 12 (CRU_ESCR0), counter 14 cascading
        // from it (CRU_ESCR1).
        2 => {
            w(0x3B8, escr(0x02, 1) | T0_OS);
            w(0x3B9, escr(0x02, 1) | T0_OS | T0_USR);
            w(0x30C, preset(rnd));
            w(0x36C, cccr(4));
            w(0x30E, preset(rnd));
            w(0x36E, 4 << 13 | ANY | CASCADE | pmi(rnd));
        }
        // Extended cascade: counter 16 (CRU_ESCR0) into counter 12
        // (IQ_CCCR0 bit 11, CASCNT4INTO0).
        3 => {
            w(0x3B8, escr(0x02, 1) | T0_OS);
            w(0x310, preset(rnd));
            w(0x370, cccr(4) | pmi(rnd));
            w(0x30C, 0);
            w(0x36C, 4 << 13 | ANY | 1 << 11);
        }
        // Execution tagging: x87_FP_uop tags on FIRM_ESCR0 (counter 8
        // running, SDM 18.15.5.9), execution_event on counter 13
        // (CRU_ESCR2) counting the tag.
        4 => {
            let tag = 1 + rnd(15);
            w(0x3A4, escr(0x04, 1 << 15) | T0_OS | 1 << 4 | tag << 5);
            w(0x368, cccr(1));
            w(0x3CC, escr(0x0C, tag) | T0_OS);
            w(0x30D, preset(rnd));
            w(0x36D, cccr(5) | pmi(rnd));
        }
        // Front-end tagging: uop_type TAGLOADS on RAT_ESCR0 (counter 13
        // running it), front_end_event on counter 15 (CRU_ESCR3).
        5 => {
            w(0x3BC, escr(0x02, 2) | T0_OS);
            w(0x36D, cccr(2));
            w(0x3CD, escr(0x08, 1) | T0_OS);
            w(0x30F, preset(rnd));
            w(0x36F, cccr(5));
        }
        // Replay tagging: first-level load misses of loads, replay_event
        // on counter 13 (CRU_ESCR2).
        6 => {
            w(0x3F1, 1 << 24 | replay::L1_LOAD_MISS);
            w(0x3F2, 1);
            w(0x3CC, escr(0x09, 1) | T0_OS);
            w(0x30D, preset(rnd));
            w(0x36D, cccr(5));
        }
        // MSR_TC_PRECISE_EVENT.
        7 => w(0x3F0, rnd(1 << 16)),
        // A counter stopped: its CCCR idle (OVF cleared).
        _ => w(0x361 + rnd(17) as u32, ANY),
    }
}

/// Events the guest causes while loaded (to the hardware and its private
/// model), or that happen while no guest is (to the hardware only).
/// Returns the RUNNING events at CPL 0 among them (the host counts those).
fn events(
    rnd: &mut impl FnMut(u64) -> u64,
    hw: &mut Hw,
    mut reference: Option<&mut NetBurstModel>,
) -> u64 {
    let n = if rnd(8) == 0 {
        1 + rnd(4000)
    } else {
        1 + rnd(60)
    };
    let mut running = 0;
    let privilege = if rnd(4) == 0 {
        Privilege::Usr
    } else {
        Privilege::Os
    };
    match rnd(5) {
        0..=2 => {
            let kind = [RUNNING, FETCH, INSTR][rnd(3) as usize];
            let e = kind.on(Lp::T0, privilege, n);
            hw.inner_mut().inject(e);
            if let Some(r) = reference.as_deref_mut() {
                r.inject(e);
            }
            if kind == RUNNING && privilege == Privilege::Os {
                running = n;
            }
        }
        _ => {
            static UPSTREAM: [EventKind; 1] = [X87];
            let uops = Uops {
                upstream: if rnd(2) == 0 { &UPSTREAM } else { &[] },
                replays: if rnd(2) == 0 { replay::L1_LOAD_MISS } else { 0 },
                bogus: rnd(8) == 0,
                ..Uops::new(
                    Lp::T0,
                    privilege,
                    [UopKind::Load, UopKind::Store, UopKind::Other][rnd(3) as usize],
                    n,
                )
            };
            hw.inner_mut().retire(&uops);
            if let Some(r) = reference {
                r.retire(&uops);
            }
        }
    }
    running
}

/// What the switches did, for the report.
#[derive(Debug, Default)]
struct SwitchTally {
    switches: u64,
    reads_compared: u64,
    owed_pmis: u64,
    pmis: u64,
}

/// `n` random world switches between two guests beside the host's counter
/// 0 (RUNNING at CPL 0 on FSB_ESCR0), checked as the module says.
fn random_switches(seed: u64, n: u64) -> (SwitchTally, [Guest; 2], u64) {
    let p = GuestPolicy {
        host_counters: CounterSet::EMPTY.with(Counter::BpuCounter0),
        host_escrs: EscrSet::EMPTY.with(Escr::FsbEscr0),
        ..GuestPolicy::new(3)
    };
    let mut hw = Hw::new(NetBurstModel::new(Config::new(3, false)));
    let host_escr = escr(0x13, 1) | T0_OS;
    hw.write_msr(0x3A2, host_escr).unwrap();
    hw.write_msr(0x360, cccr(6)).unwrap();
    scrub_all(&p, &mut hw).unwrap();
    let mut guests = [Guest::new(), Guest::new()];
    let mut rnd = rng(seed);
    let mut host = 0u64;
    let mut t = SwitchTally::default();
    let readable: Vec<u32> = PMU_MSRS
        .filter(|&m| check_msr_read(&p, m) == Verdict::Apply)
        .collect();
    let mut g = 0;
    for _ in 0..n {
        // The loaded guest runs: writes (its set-ups and random ones),
        // events, reads.
        for _ in 0..rnd(12) {
            let guest = &mut guests[g];
            match rnd(10) {
                0..=2 => program(&mut rnd, guest, &p, &mut hw),
                3..=4 => {
                    let msr = random_msr(&mut rnd);
                    let value = random_value(&mut rnd, msr);
                    guest.write(&p, &mut hw, msr, value);
                }
                5..=7 => {
                    host += events(&mut rnd, &mut hw, Some(&mut guest.reference));
                    guest.events += 1;
                    if hw.inner_mut().take_pmi(Lp::T0).is_some() {
                        t.pmis += 1;
                        if !guest.ctx.take_overflows(&mut hw).unwrap().is_empty() {
                            guest.lvt.raise();
                        }
                    }
                }
                _ => {
                    let msr = readable[rnd(readable.len() as u64) as usize];
                    assert_eq!(
                        hw.read_msr(msr).unwrap(),
                        guest.reference.read_msr(msr).unwrap(),
                        "guest {g} reads {msr:#x} while loaded"
                    );
                    let index = rnd(18) as u32;
                    if let Ok(v) = emulate_rdpmc(&p, index, true, 0, |c| {
                        hw.inner().counter(usize::from(c.index()))
                    }) {
                        assert_eq!(v, guest.reference.counter(index as usize));
                    }
                }
            }
        }
        // The switch: save (an owed PMI raised), scrub, with the exact
        // traffic for what the context uses.
        let guest = &mut guests[g];
        let (k, e) = (
            guest.ctx.counters_used().len(),
            guest.ctx.escrs_used().len(),
        );
        hw.clear();
        if !guest.ctx.save(&mut hw).unwrap().is_empty() {
            guest.lvt.raise();
            t.owed_pmis += 1;
        }
        assert_eq!(hw.take_counts(), AccessCounts::msr(2 * k, k, 0));
        guest.ctx.scrub(&mut hw).unwrap();
        let tagging = hw.take_counts().msr_writes - k - e;
        assert!(tagging <= 3);
        // Time passes before anything is restored (at least the VMM's own
        // clocks): one idle clock. The private model's CCCRs are stopped
        // for it and restarted, as the switch does to the guest's own, so
        // that the state the hardware keeps only while a counter runs (the
        // EDGE comparator's last output, a PMI armed by an overflow)
        // behaves the same on both.
        hw.inner_mut().idle(1);
        let images: Vec<u64> = (1..18).map(|n| guest.reference.cccr(n)).collect();
        for n in 1..18u32 {
            guest.reference.write_msr(0x360 + n, ANY).unwrap();
        }
        guest.reference.idle(1);
        for (n, v) in (1..18u32).zip(images) {
            guest.reference.write_msr(0x360 + n, v).unwrap();
        }
        // Events with no guest loaded: only the host counts them.
        for _ in 0..rnd(3) {
            host += events(&mut rnd, &mut hw, None);
        }
        // The other guest comes in.
        g = 1 - g;
        let guest = &mut guests[g];
        hw.clear();
        guest.ctx.restore(&mut hw).unwrap();
        let (k, e) = (
            guest.ctx.counters_used().len(),
            guest.ctx.escrs_used().len(),
        );
        let restore = hw.take_counts();
        assert_eq!((restore.msr_reads, restore.rdpmc), (0, 0));
        assert!((e + 2 * k..=e + 2 * k + 3).contains(&restore.msr_writes));
        t.switches += 1;
        // Everything it can read is its own, or the neutral image: what
        // its private model holds.
        for &msr in &readable {
            let (got, want) = (
                hw.read_msr(msr).unwrap(),
                guest.reference.read_msr(msr).unwrap(),
            );
            assert_eq!(
                got, want,
                "after switch {}: guest {g} reads {msr:#x}",
                t.switches
            );
        }
        t.reads_compared += readable.len() as u64;
        if guest.lvt.pending() {
            guest.lvt.write(crate::apic::LvtPerfCounter::new(
                crate::apic::PmiDelivery::Nmi,
            ));
            assert!(guest.lvt.deliver().is_some());
        }
        // The host's registers and count, exactly.
        let m = hw.inner();
        assert_eq!(
            (m.cccr(0), m.counter(0)),
            (cccr(6), host),
            "the host's counter"
        );
        assert_eq!(hw.read_msr(0x3A2).unwrap(), host_escr);
    }
    (t, guests, host)
}

#[test]
fn random_world_switches_show_no_guest_another_context() {
    let n = 10_000;
    let (t, guests, host) = random_switches(0x5851_F42D_4C95_7F2D, n);
    let counted: Vec<u64> = guests
        .iter()
        .map(|g| (0..18).map(|c| g.reference.counter(c)).sum())
        .collect();
    std::println!(
        "{} switches: {} reads after a switch, each the guest's own value or the neutral \
         image; guest writes applied {} and {}, event batches {} and {}; guest counters \
         (sum) {} and {}; the host's counter exact at {} RUNNING events; {} PMIs taken, \
         {} owed across a switch (model)",
        t.switches,
        t.reads_compared,
        guests[0].writes,
        guests[1].writes,
        guests[0].events,
        guests[1].events,
        counted[0],
        counted[1],
        host,
        t.pmis,
        t.owed_pmis
    );
    assert_eq!(t.switches, n);
    // The set-ups ran: cascades and tagging counted, PMIs came.
    for g in &guests {
        assert!(
            g.writes > n && g.events > n / 2,
            "{} {}",
            g.writes,
            g.events
        );
    }
    assert!(host > n && t.pmis > 0 && t.owed_pmis > 0, "{t:?}");
}

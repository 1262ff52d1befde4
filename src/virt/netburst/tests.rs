//! The NetBurst virtualisation support against the NetBurst model (a test
//! instrument written from the manuals): classification, every kind of
//! illegal guest write (cross-checked with the model where the hardware
//! itself faults), RDPMC, the world switch's exact traffic and isolation
//! over 1,000 switches, and the reproductions of its leaks (the cascade leak,
//! `MSR_TC_PRECISE_EVENT`, the active-thread field, unimplemented MSRs,
//! PEBS, the extended cascade, host tagging, PMIs across the switch);
//! `isolation` checks the property at random. Counts come from the model.

use std::vec::Vec;

mod isolation;

use super::*;
use crate::access::{AccessCounts, Recording};
use crate::arch::netburst::ActiveThread;
use crate::arch::netburst::EscrSelect;
use crate::model::netburst::{
    Config, EscrGroup, EventKind, LogicalProcessor as ModelLp, NetBurstModel, Privilege,
};

const T0_OS: u64 = 1 << 3;
const T0_USR: u64 = 1 << 2;
const ENABLE: u64 = 1 << 12;
const CASCADE: u64 = 1 << 30;
const ANY_THREAD: u64 = 0b11 << 16;
const fn escr(select: u64, mask: u64) -> u64 {
    select << 25 | mask << 9
}
const fn cccr(select: u64) -> u64 {
    select << 13 | ANY_THREAD | ENABLE
}

const FSB_ESCR0: u32 = 0x3A2;
const FSB_ESCR1: u32 = 0x3A3;
const FIRM_ESCR0: u32 = 0x3A4;
const FIRM_ESCR1: u32 = 0x3A5;
const CRU_ESCR0: u32 = 0x3B8;

/// A one-processor guest of model 3 without PEBS, denied `x87_FP_uop`;
/// the host keeps counter 0 and FSB_ESCR0.
fn policy() -> GuestPolicy {
    GuestPolicy {
        filter: EventFilter::Deny(&[EventName::X87FpUop]),
        host_counters: CounterSet::EMPTY.with(Counter::BpuCounter0),
        host_escrs: EscrSet::EMPTY.with(Escr::FsbEscr0),
        ..GuestPolicy::new(3)
    }
}

#[test]
fn every_msr_has_its_class() {
    assert_eq!(classify(0x300), MsrClass::Counter(Counter::BpuCounter0));
    assert_eq!(classify(0x311), MsrClass::Counter(Counter::IqCounter5));
    assert_eq!(classify(0x312), MsrClass::Unimplemented);
    assert_eq!(classify(0x360), MsrClass::Cccr(Counter::BpuCounter0));
    assert_eq!(classify(0x371), MsrClass::Cccr(Counter::IqCounter5));
    assert_eq!(classify(FSB_ESCR0), MsrClass::Escr(Escr::FsbEscr0));
    assert_eq!(classify(0x3E1), MsrClass::Escr(Escr::CruEscr5));
    assert_eq!(classify(0x3F0), MsrClass::TcPreciseEvent);
    assert_eq!(classify(0x3F1), MsrClass::PebsEnable);
    assert_eq!(classify(0x3F2), MsrClass::PebsMatrixVert);
    assert_eq!(classify(0x600), MsrClass::DsArea);
    assert_eq!(classify(0x1A0), MsrClass::MiscEnable);
    assert_eq!(classify(0x10), MsrClass::NotPmu, "the TSC");
    assert_eq!(classify(0x2FF), MsrClass::NotPmu);
    assert_eq!(classify(0x400), MsrClass::NotPmu);
    // Every ESCR of the map, and nothing else between 3A0H and 3E1H.
    let escrs = (0x3A0..=0x3E1)
        .filter(|&m| matches!(classify(m), MsrClass::Escr(_)))
        .count();
    assert_eq!(escrs, 45);
}

/// At least 30 illegal guest writes, each answered with #GP and its
/// reason; where the reason is the hardware's own (reserved bits, the
/// missing logical processor, an absent ESCR), the model of the guest's
/// processor (model 3 without Hyper-Threading) faults on the same write.
#[test]
fn illegal_guest_writes_get_gp() {
    use GuestGp::*;
    let p = policy();
    let writes: [(&GuestPolicy, u32, u64, GuestGp); 33] = [
        (
            &p,
            0x301,
            1 << 40,
            Reserved {
                msr: 0x301,
                bits: 1 << 40,
            },
        ),
        (
            &p,
            0x305,
            u64::MAX,
            Reserved {
                msr: 0x305,
                bits: !((1 << 40) - 1),
            },
        ),
        (
            &p,
            0x311,
            1 << 63,
            Reserved {
                msr: 0x311,
                bits: 1 << 63,
            },
        ),
        (
            &p,
            0x311,
            1 << 45,
            Reserved {
                msr: 0x311,
                bits: 1 << 45,
            },
        ),
        (&p, 0x300, 5, HostOwned { msr: 0x300 }),
        (
            &p,
            0x361,
            cccr(6) | 1,
            Reserved {
                msr: 0x361,
                bits: 1,
            },
        ),
        (
            &p,
            0x361,
            cccr(6) | 1 << 28,
            Reserved {
                msr: 0x361,
                bits: 1 << 28,
            },
        ),
        (
            &p,
            0x361,
            1 << 40,
            Reserved {
                msr: 0x361,
                bits: 1 << 40,
            },
        ),
        (
            &p,
            0x371,
            1 << 2,
            Reserved {
                msr: 0x371,
                bits: 1 << 2,
            },
        ),
        (
            &p,
            0x361,
            cccr(6) | 1 << 27,
            OtherLogicalProcessor { msr: 0x361 },
        ),
        (&p, 0x360, 0, HostOwned { msr: 0x360 }),
        (&p, 0x361, cccr(6), HostOwned { msr: 0x361 }),
        (
            &p,
            0x362,
            ANY_THREAD | 6 << 13 | CASCADE,
            HostOwned { msr: 0x362 },
        ),
        (
            &p,
            0x361,
            cccr(6) | 1 << 11,
            Reserved {
                msr: 0x361,
                bits: 1 << 11,
            },
        ),
        (
            &p,
            CRU_ESCR0,
            escr(2, 1) | T0_OS | 1 << 31,
            Reserved {
                msr: CRU_ESCR0,
                bits: 1 << 31,
            },
        ),
        (
            &p,
            CRU_ESCR0,
            1 << 40,
            Reserved {
                msr: CRU_ESCR0,
                bits: 1 << 40,
            },
        ),
        (
            &p,
            CRU_ESCR0,
            escr(2, 1) | 1 << 1,
            OtherLogicalProcessor { msr: CRU_ESCR0 },
        ),
        (
            &p,
            CRU_ESCR0,
            escr(2, 1) | 1,
            OtherLogicalProcessor { msr: CRU_ESCR0 },
        ),
        (
            &p,
            FSB_ESCR0,
            escr(0x13, 1) | T0_OS,
            HostOwned { msr: FSB_ESCR0 },
        ),
        (&p, FSB_ESCR0, 0, HostOwned { msr: FSB_ESCR0 }),
        (&p, 0x3BA, escr(1, 1) | T0_OS, NoSuchMsr { msr: 0x3BA }),
        (&p, 0x3BB, 0, NoSuchMsr { msr: 0x3BB }),
        (
            &p,
            FIRM_ESCR1,
            escr(0x04, 1 << 15) | T0_OS,
            Filtered {
                escr: Escr::FirmEscr1,
                select: 0x04,
            },
        ),
        (
            &p,
            FIRM_ESCR0,
            escr(0x04, 1 << 15) | T0_USR,
            Filtered {
                escr: Escr::FirmEscr0,
                select: 0x04,
            },
        ),
        (&p, 0x3F1, 1 << 25, PebsRefused { msr: 0x3F1 }),
        (&p, 0x3F1, 1 << 26, OtherLogicalProcessor { msr: 0x3F1 }),
        (
            &p,
            0x3F1,
            1 << 13,
            Reserved {
                msr: 0x3F1,
                bits: 1 << 13,
            },
        ),
        (
            &p,
            0x3F1,
            1 << 27,
            Reserved {
                msr: 0x3F1,
                bits: 1 << 27,
            },
        ),
        (
            &p,
            0x3F1,
            1 << 63,
            Reserved {
                msr: 0x3F1,
                bits: 1 << 63,
            },
        ),
        (
            &p,
            0x3F2,
            1 << 2,
            Reserved {
                msr: 0x3F2,
                bits: 1 << 2,
            },
        ),
        (
            &p,
            0x3F2,
            1 << 5,
            Reserved {
                msr: 0x3F2,
                bits: 1 << 5,
            },
        ),
        (&p, 0x600, 0x1000, PebsRefused { msr: 0x600 }),
        (&p, 0x312, 0, NoSuchMsr { msr: 0x312 }),
    ];
    let mut distinct = Vec::new();
    for (policy, msr, value, why) in writes {
        assert_eq!(
            check_msr_write(policy, msr, value),
            Verdict::InjectGp(why),
            "WRMSR {msr:#x} {value:#x}"
        );
        let hardware_rule = matches!(
            why,
            Reserved { .. }
                | OtherLogicalProcessor { .. }
                | NoSuchMsr { .. }
                | ActiveThreadMustBeAny { .. }
        );
        if hardware_rule {
            let mut m = NetBurstModel::new(Config::new(3, false));
            assert!(
                m.write_msr(msr, value).is_err(),
                "the model accepts WRMSR {msr:#x} {value:#x}"
            );
        }
        if !distinct.contains(&(msr, value)) {
            distinct.push((msr, value));
        }
    }
    assert!(distinct.len() >= 30);
    assert_eq!(
        check_msr_write(&p, 0x1A0, 0),
        Verdict::InjectGp(ReadOnly { msr: 0x1A0 })
    );
}

/// What the same guest may do: each legal write is applied, and the model
/// of its processor takes it too.
#[test]
fn legal_guest_writes_apply() {
    let p = policy();
    let legal = [
        (0x301, 12_345),
        (0x362, cccr(6)),                         // counter 2 on FSB_ESCR1
        (FSB_ESCR1, escr(0x13, 1) | T0_OS),       // global_power_events RUNNING
        (CRU_ESCR0, escr(2, 1) | T0_OS | T0_USR), // instr_retired
        (FIRM_ESCR1, escr(0x04, 1 << 15)),        // the denied event, counting nowhere
        (0x3F1, 1 << 24 | 1),                     // replay tagging, no PEBS
        (0x3F2, 1),
        (0x3F0, 0),
    ];
    for (msr, value) in legal {
        assert_eq!(
            check_msr_write(&p, msr, value),
            Verdict::Apply,
            "WRMSR {msr:#x} {value:#x}"
        );
        let mut m = NetBurstModel::new(Config::new(3, false));
        assert!(
            m.write_msr(msr, value).is_ok(),
            "the model refuses WRMSR {msr:#x} {value:#x}"
        );
    }
    assert_eq!(check_msr_write(&p, 0x10, 0), Verdict::NotPmu);
    // Reads: the host's registers do not exist for the guest.
    assert_eq!(
        check_msr_read(&p, 0x300),
        Verdict::InjectGp(GuestGp::HostOwned { msr: 0x300 })
    );
    assert_eq!(
        check_msr_read(&p, FSB_ESCR0),
        Verdict::InjectGp(GuestGp::HostOwned { msr: FSB_ESCR0 })
    );
    assert_eq!(
        check_msr_read(&p, 0x3BA),
        Verdict::InjectGp(GuestGp::NoSuchMsr { msr: 0x3BA })
    );
    assert_eq!(check_msr_read(&p, 0x301), Verdict::Apply);
    assert_eq!(check_msr_read(&p, 0x1A0), Verdict::Emulate);
    assert_eq!(
        MISC_ENABLE_PMU_BITS,
        1 << 7 | 1 << 11 | 1 << 12,
        "monitoring available, BTS and PEBS unavailable"
    );
}

#[test]
fn rdpmc_is_emulated_as_the_hardware_answers() {
    let p = policy();
    let value = |_: Counter| 0xAB_1234_5678;
    // CPL 0 always; CPL 3 only with CR4.PCE.
    assert_eq!(
        emulate_rdpmc(&p, 5, false, 0, value),
        Ok(0xAB_1234_5678),
        "40 bits"
    );
    assert_eq!(
        emulate_rdpmc(&p, 5, false, 3, value),
        Err(GuestGp::RdpmcNotAllowed)
    );
    assert_eq!(emulate_rdpmc(&p, 5, true, 3, value), Ok(0xAB_1234_5678));
    // Bit 31: the fast read, the low 32 bits.
    assert_eq!(
        emulate_rdpmc(&p, 1 << 31 | 5, true, 3, value),
        Ok(0x1234_5678)
    );
    assert_eq!(
        emulate_rdpmc(&p, 18, false, 0, value),
        Err(GuestGp::RdpmcIndex { ecx: 18 })
    );
    assert_eq!(
        emulate_rdpmc(&p, 1 << 20 | 1, false, 0, value),
        Err(GuestGp::RdpmcIndex { ecx: 1 << 20 | 1 })
    );
    assert_eq!(
        emulate_rdpmc(&p, 0, false, 0, value),
        Err(GuestGp::HostOwned { msr: 0x300 })
    );
    // The model's RDPMC agrees on the width and the fast read.
    let mut m = NetBurstModel::new(Config::new(3, false));
    m.write_msr(0x305, 0xAB_1234_5678).unwrap();
    assert_eq!(m.rdpmc(5), Ok(0xAB_1234_5678));
    assert_eq!(m.rdpmc(1 << 31 | 5), Ok(0x1234_5678));
}

type Model = Recording<NetBurstModel, 64>;

fn counts(reads: u32, writes: u32) -> AccessCounts {
    AccessCounts::msr(reads, writes, 0)
}

const INSTR: EventKind = EventKind::new(EscrGroup::Cru01, 0x02, 1);
const RUNNING: EventKind = EventKind::new(EscrGroup::Fsb, 0x13, 1);

/// A guest context counting instr_retired on counter 12 (CRU_ESCR0, select
/// 4), recorded from its writes as the VMM would.
fn guest(p: &GuestPolicy) -> PmuContext {
    let mut ctx = PmuContext::new();
    let select = EscrSelect::new(4).unwrap().get() as u64;
    let cccr12 = CccrValue::from_bits_truncate(cccr(select)).with_active_thread(ActiveThread::Any);
    for (msr, value) in [
        (CRU_ESCR0, escr(2, 1) | T0_OS),
        (0x30C, 0),
        (0x36C, cccr12.bits()),
    ] {
        assert_eq!(check_msr_write(p, msr, value), Verdict::Apply);
        assert!(ctx.record(msr, value));
    }
    ctx
}

/// Two guests share counter 12 through the world switch, 1,000 times each,
/// while the host's own counter 0 runs throughout: each guest's count is
/// exactly its own events, the host's exactly all of its own, and each
/// switch touches only the registers in use.
#[test]
fn world_switch_isolates_and_conserves() {
    let p = policy();
    let mut hw = Model::new(NetBurstModel::new(Config::new(3, false)));
    // The host's counter 0 on FSB_ESCR0 (which the policy keeps).
    hw.write_msr(FSB_ESCR0, escr(0x13, 1) | T0_OS).unwrap();
    hw.write_msr(0x360, cccr(6)).unwrap();
    let (mut a, mut b) = (guest(&p), guest(&p));
    assert_eq!(
        a.counters_used(),
        CounterSet::EMPTY.with(Counter::IqCounter0)
    );
    let (mut want_a, mut want_b, mut host) = (0u64, 0u64, 0u64);
    let feed = |hw: &mut Model, kind: EventKind, n: u64| {
        hw.inner_mut()
            .inject(kind.on(ModelLp::T0, Privilege::Os, n));
    };
    for round in 0..1000u64 {
        for (ctx, want, n) in [
            (&mut a, &mut want_a, 3 + round % 5),
            (&mut b, &mut want_b, 7 + round % 3),
        ] {
            hw.clear();
            ctx.restore(&mut hw).unwrap();
            assert_eq!(hw.take_counts(), counts(0, 3), "ESCR, counter, CCCR last");
            feed(&mut hw, INSTR, n);
            feed(&mut hw, RUNNING, 2);
            *want += n;
            host += 2;
            assert_eq!(ctx.save(&mut hw).unwrap(), CounterSet::EMPTY);
            assert_eq!(
                hw.take_counts(),
                counts(2, 1),
                "CCCR read and idled, counter read"
            );
            ctx.scrub(&mut hw).unwrap();
            assert_eq!(hw.take_counts(), counts(0, 2), "counter and ESCR zeroed");
            // Between guests, nothing of the guest counts.
            feed(&mut hw, INSTR, 11);
        }
    }
    assert_eq!(a.counter(Counter::IqCounter0), want_a);
    assert_eq!(b.counter(Counter::IqCounter0), want_b);
    assert_eq!(
        hw.read_msr(0x300).unwrap(),
        host,
        "the host's counter saw only its own events"
    );
    assert_eq!(
        hw.read_msr(0x360).unwrap(),
        cccr(6),
        "and no guest touched its CCCR"
    );
}

/// An overflow pending when a guest leaves is still pending when it comes
/// back: save keeps the CCCR's OVF, restore writes it back.
#[test]
fn a_pending_overflow_survives_the_switch() {
    let p = policy();
    let mut hw = Model::new(NetBurstModel::new(Config::new(3, false)));
    let mut ctx = guest(&p);
    assert!(ctx.record(0x30C, (1 << 40) - 2));
    ctx.restore(&mut hw).unwrap();
    hw.inner_mut()
        .inject(INSTR.on(ModelLp::T0, Privilege::Os, 5));
    assert_eq!(ctx.save(&mut hw).unwrap(), CounterSet::EMPTY, "no OVF_PMI");
    assert_eq!(ctx.counter(Counter::IqCounter0), 3);
    let ovf = 1u64 << 31;
    assert_ne!(ctx.read(0x36C).unwrap() & ovf, 0, "OVF captured");
    assert_eq!(
        hw.read_msr(0x36C).unwrap(),
        CccrValue::IDLE.bits(),
        "idle on the hardware, OVF cleared"
    );
    ctx.scrub(&mut hw).unwrap();
    ctx.restore(&mut hw).unwrap();
    assert_ne!(hw.read_msr(0x36C).unwrap() & ovf, 0, "OVF back");
    assert_eq!(hw.read_msr(0x30C).unwrap(), 3);
}

/// The VMM's WRMSR exit for a guest whose context is loaded on `hw`:
/// checked, recorded and applied (the model must take what is applied).
fn guest_wrmsr(p: &GuestPolicy, ctx: &mut PmuContext, hw: &mut Model, msr: u32, v: u64) {
    assert_eq!(
        check_msr_write(p, msr, v),
        Verdict::Apply,
        "WRMSR {msr:#x} {v:#x}"
    );
    assert!(ctx.record(msr, v));
    hw.write_msr(msr, v).unwrap();
}

/// The VMM's RDMSR exit for a guest whose context is loaded on `hw`.
fn guest_rdmsr(p: &GuestPolicy, hw: &mut Model, msr: u32) -> u64 {
    assert_eq!(check_msr_read(p, msr), Verdict::Apply, "RDMSR {msr:#x}");
    hw.read_msr(msr).unwrap()
}

const BPU_ESCR0: u32 = 0x3B2;
/// BPU_fetch_request TCMISS (BPU_ESCR0/1, select 03H, mask bit 0).
const FETCH: EventKind = EventKind::new(EscrGroup::Bpu, 0x03, 1);

/// The cascade leak: guest 0 cascades counter 3 from counter 1 (CCCR3 =
/// CASCADE, ESCR select 6) and lets counter 1 wrap; after the switch guest
/// 1 programs FSB_ESCR1 for its own counter 2 and runs 100 events. Before
/// the fix guest 0's counter 3 counted them (its CCCR kept CASCADE and
/// counter 1's OVF stayed set) and guest 1 read CCCR3 = 0x4003C000 and
/// counter 3 = 100. Now save leaves every CCCR in use idle, guest 1 reads
/// the idle image and 0, and guest 0 gets back exactly what it had.
#[test]
fn a_switched_out_cascade_counts_nothing_and_shows_nothing() {
    let p = policy();
    let mut hw = Model::new(NetBurstModel::new(Config::new(3, false)));
    hw.write_msr(FSB_ESCR0, escr(0x13, 1) | T0_OS).unwrap();
    hw.write_msr(0x360, cccr(6)).unwrap();
    scrub_all(&p, &mut hw).unwrap();
    let (mut g0, mut g1) = (PmuContext::new(), PmuContext::new());
    // Guest 0: counter 1 counts BPU_fetch_request on BPU_ESCR0 (select 0)
    // from 10 below the wrap; counter 3 cascades from it, selecting
    // FSB_ESCR1, which guest 0 leaves alone.
    guest_wrmsr(&p, &mut g0, &mut hw, BPU_ESCR0, escr(0x03, 1) | T0_OS);
    guest_wrmsr(&p, &mut g0, &mut hw, 0x301, (1 << 40) - 10);
    guest_wrmsr(&p, &mut g0, &mut hw, 0x361, cccr(0));
    guest_wrmsr(&p, &mut g0, &mut hw, 0x363, 0x4003_C000);
    hw.inner_mut()
        .inject(FETCH.on(ModelLp::T0, Privilege::Os, 10));
    assert_ne!(
        guest_rdmsr(&p, &mut hw, 0x361) & 1 << 31,
        0,
        "counter 1 wrapped"
    );
    assert_eq!(g0.save(&mut hw).unwrap(), CounterSet::EMPTY);
    g0.scrub(&mut hw).unwrap();
    // Guest 1: its counter 2 on FSB_ESCR1, 100 RUNNING events.
    g1.restore(&mut hw).unwrap();
    guest_wrmsr(&p, &mut g1, &mut hw, FSB_ESCR1, escr(0x13, 1) | T0_OS);
    guest_wrmsr(&p, &mut g1, &mut hw, 0x302, 0);
    guest_wrmsr(&p, &mut g1, &mut hw, 0x362, cccr(6));
    hw.inner_mut()
        .inject(RUNNING.on(ModelLp::T0, Privilege::Os, 100));
    assert_eq!(
        guest_rdmsr(&p, &mut hw, 0x302),
        100,
        "guest 1's own counter"
    );
    assert_eq!(
        guest_rdmsr(&p, &mut hw, 0x363),
        CccrValue::IDLE.bits(),
        "CCCR3 idle, not guest 0's 0x4003C000"
    );
    assert_eq!(
        guest_rdmsr(&p, &mut hw, 0x303),
        0,
        "counter 3 counted nothing"
    );
    assert_eq!(guest_rdmsr(&p, &mut hw, 0x361), CccrValue::IDLE.bits());
    assert_eq!(guest_rdmsr(&p, &mut hw, 0x301), 0);
    assert_eq!(guest_rdmsr(&p, &mut hw, BPU_ESCR0), 0);
    g1.save(&mut hw).unwrap();
    g1.scrub(&mut hw).unwrap();
    // Guest 0 back: its counters as it left them, its cascade armed again.
    g0.restore(&mut hw).unwrap();
    assert_eq!(
        guest_rdmsr(&p, &mut hw, 0x301),
        0,
        "wrapped at its 10th event"
    );
    assert_eq!(guest_rdmsr(&p, &mut hw, 0x303), 0, "nothing while out");
    assert_eq!(guest_rdmsr(&p, &mut hw, 0x363), 0x4003_C000);
    assert_eq!(guest_rdmsr(&p, &mut hw, 0x361), cccr(0) | 1 << 31);
    // And the host's counter saw every RUNNING event.
    assert_eq!(hw.read_msr(0x300).unwrap(), 100);
}

/// `MSR_TC_PRECISE_EVENT` is part of the context:
/// recorded, restored, and scrubbed to its reset value FC00H, so the next
/// guest reads what an unused register holds, not the previous guest's.
#[test]
fn tc_precise_event_is_switched() {
    let p = policy();
    let mut hw = Model::new(NetBurstModel::new(Config::new(3, false)));
    scrub_all(&p, &mut hw).unwrap();
    let (mut g0, mut g1) = (PmuContext::new(), PmuContext::new());
    assert_eq!(g0.read(0x3F0), Some(0xFC00), "the neutral image");
    guest_wrmsr(&p, &mut g0, &mut hw, 0x3F0, 0x1234);
    assert_eq!(g0.save(&mut hw).unwrap(), CounterSet::EMPTY);
    hw.clear();
    g0.scrub(&mut hw).unwrap();
    assert_eq!(hw.take_counts(), counts(0, 1), "3F0H only");
    assert_eq!(g0.read(0x3F0), Some(0x1234));
    g1.restore(&mut hw).unwrap();
    assert_eq!(guest_rdmsr(&p, &mut hw, 0x3F0), 0xFC00, "not guest 0's");
    g1.save(&mut hw).unwrap();
    g1.scrub(&mut hw).unwrap();
    hw.clear();
    g0.restore(&mut hw).unwrap();
    assert_eq!(hw.take_counts(), counts(0, 1));
    assert_eq!(guest_rdmsr(&p, &mut hw, 0x3F0), 0x1234);
    // Its undocumented upper bits are refused, as the model refuses them.
    assert_eq!(
        check_msr_write(&p, 0x3F0, 1 << 16),
        Verdict::InjectGp(GuestGp::Reserved {
            msr: 0x3F0,
            bits: 1 << 16
        })
    );
    assert!(hw.write_msr(0x3F0, 1 << 16).is_err());
}

/// A one-processor guest's CCCR active-thread field must
/// be 11b (SDM Figure 18-45). WRMSR 369H = 10000H (01b) was applied; now it
/// is #GP, as the model of a part without Hyper-Threading raises, and the
/// emulated vPMU answers the same through the same rule. A guest with two
/// logical processors may use every value.
#[test]
fn a_one_processor_guest_cccr_needs_active_thread_11b() {
    let p = policy();
    let mut vpmu = super::super::vpmu::VirtualPmu::new(p);
    for (value, want) in [
        (
            0x1_0000,
            Some(GuestGp::ActiveThreadMustBeAny { msr: 0x369 }),
        ),
        (
            0x2_0000,
            Some(GuestGp::ActiveThreadMustBeAny { msr: 0x369 }),
        ),
        (0, Some(GuestGp::ActiveThreadMustBeAny { msr: 0x369 })),
        (
            ENABLE | 0x1_0000,
            Some(GuestGp::ActiveThreadMustBeAny { msr: 0x369 }),
        ),
        (0x3_0000, None),
        (ENABLE | 0x3_0000, None),
    ] {
        let verdict = check_msr_write(&p, 0x369, value);
        let mut m = NetBurstModel::new(Config::new(3, false));
        match want {
            Some(gp) => {
                assert_eq!(verdict, Verdict::InjectGp(gp), "{value:#x}");
                assert_eq!(vpmu.wrmsr(0x369, value), Err(gp));
                assert_eq!(
                    m.write_msr(0x369, value).map_err(|f| f.reason()),
                    Err(crate::model::netburst::GpReason::ActiveThreadMustBeAny)
                );
            }
            None => {
                assert_eq!(verdict, Verdict::Apply, "{value:#x}");
                assert_eq!(vpmu.wrmsr(0x369, value), Ok(true));
                assert!(m.write_msr(0x369, value).is_ok());
            }
        }
    }
    let ht = GuestPolicy {
        logical_processors: 2,
        ..p
    };
    let mut m = NetBurstModel::new(Config::new(3, true));
    for at in 0..4u64 {
        assert_eq!(check_msr_write(&ht, 0x369, at << 16), Verdict::Apply);
        assert!(m.write_msr(0x369, at << 16).is_ok());
    }
}

/// MSRs of the PMU's range 300H-3FFH that family 0Fh
/// does not implement were `NotPmu`, left to a VMM that might pass them
/// through and take the #GP in the host; now they are #GP for the guest,
/// read and write, exactly where the model has no register.
#[test]
fn unimplemented_pmu_msrs_are_gp() {
    let p = policy();
    for msr in [
        0x312, 0x35F, 0x3BF, 0x372, 0x39F, 0x3C6, 0x3E2, 0x3EF, 0x3F3, 0x3FF,
    ] {
        assert_eq!(classify(msr), MsrClass::Unimplemented);
        assert_eq!(
            check_msr_write(&p, msr, 0),
            Verdict::InjectGp(GuestGp::NoSuchMsr { msr })
        );
        assert_eq!(
            check_msr_read(&p, msr),
            Verdict::InjectGp(GuestGp::NoSuchMsr { msr })
        );
    }
    // Across the whole range: #GP exactly where the model (of model 2,
    // which has every ESCR) has no MSR.
    let mut m = NetBurstModel::new(Config::new(2, true));
    let every = GuestPolicy {
        logical_processors: 2,
        ..GuestPolicy::new(2)
    };
    let mut unimplemented = 0;
    for msr in PMU_MSRS {
        let absent = m.read_msr(msr).is_err();
        let gp = check_msr_read(&every, msr) == Verdict::InjectGp(GuestGp::NoSuchMsr { msr });
        assert_eq!(absent, gp, "{msr:#x}");
        unimplemented += u32::from(gp);
    }
    // 256 addresses: 18 counters, 18 CCCRs, 45 ESCRs and 3 tagging MSRs.
    assert_eq!(unimplemented, 256 - 18 - 18 - 45 - 3);
    assert_eq!(check_msr_write(&p, 0x2FF, 0), Verdict::NotPmu);
    assert_eq!(check_msr_write(&p, 0x400, 0), Verdict::NotPmu);
}

/// Guest PEBS is refused whatever the policy (there is no PEBS option):
/// `PEBS_ENABLE`'s PEBS bits and every access to `IA32_DS_AREA` are #GP,
/// so a guest's DS area value never reaches the host's MSR; replay
/// tagging's bits of `PEBS_ENABLE` stay the guest's.
#[test]
fn guest_pebs_is_refused() {
    let p = policy();
    let mut hw = Model::new(NetBurstModel::new(Config::new(3, false)));
    let host_ds = 0xFFFF_8000_0010_0000;
    hw.write_msr(0x600, host_ds).unwrap();
    for (msr, value) in [
        (0x3F1, 1 << 25),
        (0x3F1, 1 << 25 | 1 << 24 | 1),
        (0x600, 0x1000),
        (0x600, 0),
        (0x600, host_ds),
    ] {
        assert_eq!(
            check_msr_write(&p, msr, value),
            Verdict::InjectGp(GuestGp::PebsRefused { msr })
        );
    }
    assert_eq!(
        check_msr_read(&p, 0x600),
        Verdict::InjectGp(GuestGp::PebsRefused { msr: 0x600 })
    );
    assert_eq!(check_msr_write(&p, 0x3F1, 1 << 24 | 1), Verdict::Apply);
    assert_eq!(hw.read_msr(0x600).unwrap(), host_ds);
    let mut v = super::super::vpmu::VirtualPmu::new(p);
    assert_eq!(
        v.wrmsr(0x600, 0x1000),
        Err(GuestGp::PebsRefused { msr: 0x600 })
    );
    assert_eq!(
        v.wrmsr(0x3F1, 1 << 25),
        Err(GuestGp::PebsRefused { msr: 0x3F1 })
    );
}

/// A guest counter may not start on the host's overflow through the
/// extended cascade either (IQ_CCCR0 bit 11, CASCNT4INTO0: counter 16 into
/// 12, SDM Table 18-65), nor select a host ESCR with bit 11 set.
#[test]
fn no_extended_cascade_from_the_host() {
    let p = GuestPolicy {
        host_counters: CounterSet::EMPTY.with(Counter::IqCounter4),
        host_escrs: EscrSet::EMPTY.with(Escr::CruEscr2),
        ..GuestPolicy::new(3)
    };
    let ext = 1 << 11;
    assert_eq!(
        check_msr_write(&p, 0x36C, 4 << 13 | ANY_THREAD | ext),
        Verdict::InjectGp(GuestGp::HostOwned { msr: 0x36C })
    );
    assert_eq!(
        check_msr_write(&p, 0x36D, 5 << 13 | ANY_THREAD | ext),
        Verdict::InjectGp(GuestGp::Reserved {
            msr: 0x36D,
            bits: ext
        }),
        "IQ_CCCR1 has no bit 11"
    );
    // IQ_CCCR5 bit 11 (CASCNT4INTO5: 16 into 17) selecting CRU_ESCR3 is
    // fine; selecting the host's CRU_ESCR2 (select 5 on counter 16's side)
    // is not.
    assert_eq!(
        check_msr_write(&p, 0x36C, 5 << 13 | ANY_THREAD | ENABLE),
        Verdict::InjectGp(GuestGp::HostOwned { msr: 0x36C }),
        "counter 12 with select 5 reads CRU_ESCR2"
    );
    assert_eq!(
        check_msr_write(&p, 0x36C, 4 << 13 | ANY_THREAD),
        Verdict::Apply
    );
}

/// With `host_tagging`, a guest may neither tag µops nor count tagged ones
/// nor touch the tagging MSRs. Why: the model shows a guest's
/// `Tag_Enable` ESCR adding to a host's execution_event count when the
/// policy lets it (the tags belong to the package, not to a counter).
#[test]
fn a_host_that_tags_keeps_tagging() {
    use crate::model::netburst::{UopKind, Uops};
    let p = GuestPolicy {
        host_tagging: true,
        ..GuestPolicy::new(3)
    };
    const CRU_ESCR2: u32 = 0x3CC;
    const RAT_ESCR0: u32 = 0x3BC;
    let tag = 1 << 4 | 1 << 5; // Tag_Enable, tag value 1
    for (msr, value) in [
        (FIRM_ESCR0, escr(0x04, 1 << 15) | T0_OS | tag), // x87_FP_uop TAG0
        (CRU_ESCR2, escr(0x0C, 1) | T0_OS),              // execution_event NBOGUS0
        (CRU_ESCR2, escr(0x08, 1) | T0_OS),              // front_end_event
        (CRU_ESCR2, escr(0x09, 1) | T0_OS),              // replay_event
        (RAT_ESCR0, escr(0x02, 2) | T0_OS),              // uop_type TAGLOADS
        (CRU_ESCR0, escr(0x02, 2) | T0_OS),              // instr_retired NBOGUSTAG
    ] {
        assert_eq!(
            check_msr_write(&p, msr, value),
            Verdict::InjectGp(GuestGp::TaggingRefused { msr }),
            "{msr:#x} {value:#x}"
        );
    }
    for (msr, value) in [
        (FIRM_ESCR0, escr(0x04, 1 << 15) | T0_OS), // untagged
        (FIRM_ESCR0, escr(0x04, 1 << 15) | tag),   // tags nothing: no T bits
        (CRU_ESCR0, escr(0x02, 1) | T0_OS),        // instr_retired NBOGUSNTAG
    ] {
        assert_eq!(check_msr_write(&p, msr, value), Verdict::Apply, "{msr:#x}");
    }
    for msr in [0x3F0, 0x3F1, 0x3F2] {
        assert_eq!(
            check_msr_write(&p, msr, 0),
            Verdict::InjectGp(GuestGp::HostOwned { msr })
        );
        assert_eq!(
            check_msr_read(&p, msr),
            Verdict::InjectGp(GuestGp::HostOwned { msr })
        );
    }
    // The interference the flag prevents. The host counts execution_event
    // NBOGUS0 on counter 12 and tags x87_FP_uop itself with FIRM_ESCR0 on
    // counter 8; a guest on counter 10 tagging packed_SP_uop (FIRM_ESCR1,
    // select 08H) with the same tag bit adds its µops to the host's count.
    let mut m = NetBurstModel::new(Config::new(3, false));
    m.write_msr(FIRM_ESCR0, escr(0x04, 1 << 15) | T0_OS | tag)
        .unwrap();
    m.write_msr(0x368, cccr(1)).unwrap();
    m.write_msr(CRU_ESCR2, escr(0x0C, 1) | T0_OS).unwrap();
    m.write_msr(0x36C, cccr(5)).unwrap();
    let uops = |up: &'static [EventKind]| Uops {
        upstream: up,
        ..Uops::new(ModelLp::T0, Privilege::Os, UopKind::Other, 10)
    };
    const X87: EventKind = EventKind::new(EscrGroup::Firm, 0x04, 1 << 15);
    const PACKED: [EventKind; 1] = [EventKind::new(EscrGroup::Firm, 0x08, 1 << 15)];
    m.retire(&uops(&[X87]));
    m.retire(&uops(&PACKED));
    assert_eq!(m.counter(12), 10, "the host's own tagged µops only");
    let guest_tagging = escr(0x08, 1 << 15) | T0_OS | tag;
    assert_eq!(
        check_msr_write(&p, FIRM_ESCR1, guest_tagging),
        Verdict::InjectGp(GuestGp::TaggingRefused { msr: FIRM_ESCR1 })
    );
    m.write_msr(FIRM_ESCR1, guest_tagging).unwrap();
    m.write_msr(0x36A, cccr(1)).unwrap();
    m.retire(&uops(&PACKED));
    assert_eq!(m.counter(12), 20, "what a guest would have added");
}

/// An overflow on a guest's last event before a switch has not raised its
/// PMI yet (it comes with the next event, SDM 18.15.5.8), and the idle
/// image withdraws it on the model: save reports the counter, the VMM
/// raises the guest's virtual PMI, and it is delivered at the next entry,
/// once. An overflow whose PMI came while loaded is reported by
/// `take_overflows` and not again by save; clearing `OVF` starts over.
#[test]
fn an_overflow_pmi_survives_the_switch_once() {
    use crate::apic::{LvtPerfCounter, PmiDelivery, Vector};
    let p = policy();
    let mut hw = Model::new(NetBurstModel::new(Config::new(3, false)));
    scrub_all(&p, &mut hw).unwrap();
    let mut ctx = PmuContext::new();
    let mut lvt = VirtualLvt::new();
    let entry = LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(0xF0).unwrap()));
    lvt.write(entry);
    let ovf_pmi = 1 << 26;
    guest_wrmsr(&p, &mut ctx, &mut hw, FSB_ESCR1, escr(0x13, 1) | T0_OS);
    guest_wrmsr(&p, &mut ctx, &mut hw, 0x302, (1 << 40) - 3);
    guest_wrmsr(&p, &mut ctx, &mut hw, 0x362, cccr(6) | ovf_pmi);
    hw.inner_mut()
        .inject(RUNNING.on(ModelLp::T0, Privilege::Os, 3));
    assert!(!hw.inner().pmi_pending(ModelLp::T0), "armed, not raised");
    let owed = ctx.save(&mut hw).unwrap();
    assert_eq!(owed, CounterSet::EMPTY.with(Counter::BpuCounter2));
    lvt.raise();
    ctx.scrub(&mut hw).unwrap();
    ctx.restore(&mut hw).unwrap();
    assert_eq!(
        lvt.deliver(),
        Some(PmiDelivery::Fixed(Vector::new(0xF0).unwrap()))
    );
    assert!(lvt.entry().is_masked(), "masked by the delivery");
    hw.inner_mut()
        .inject(RUNNING.on(ModelLp::T0, Privilege::Os, 5));
    assert!(!hw.inner().pmi_pending(ModelLp::T0), "no second PMI");
    assert_eq!(ctx.save(&mut hw).unwrap(), CounterSet::EMPTY, "owed once");
    ctx.scrub(&mut hw).unwrap();
    ctx.restore(&mut hw).unwrap();
    // The guest's handler clears OVF and re-arms; this time the PMI comes
    // while it is loaded.
    guest_wrmsr(&p, &mut ctx, &mut hw, 0x302, (1 << 40) - 3);
    guest_wrmsr(&p, &mut ctx, &mut hw, 0x362, cccr(6) | ovf_pmi);
    lvt.write(entry);
    hw.inner_mut()
        .inject(RUNNING.on(ModelLp::T0, Privilege::Os, 4));
    assert!(hw.inner_mut().take_pmi(ModelLp::T0).is_some());
    assert_eq!(
        ctx.take_overflows(&mut hw).unwrap(),
        CounterSet::EMPTY.with(Counter::BpuCounter2)
    );
    lvt.raise();
    assert_eq!(ctx.take_overflows(&mut hw).unwrap(), CounterSet::EMPTY);
    assert_eq!(ctx.save(&mut hw).unwrap(), CounterSet::EMPTY, "reported");
    assert!(lvt.deliver().is_some());
    assert_eq!(lvt.injected(), 2);
}

/// `scrub_all` gives every register a guest may read its neutral image and
/// leaves the host's alone: `2(18 - h) + e + 3` writes.
#[test]
fn scrub_all_leaves_only_neutral_images() {
    let p = policy();
    let mut hw = Model::new(NetBurstModel::new(Config::new(3, false)));
    hw.write_msr(FSB_ESCR0, escr(0x13, 1) | T0_OS).unwrap();
    hw.write_msr(0x360, cccr(6)).unwrap();
    hw.write_msr(0x300, 77).unwrap();
    for c in 1..18u32 {
        hw.write_msr(0x360 + c, cccr(0) | CASCADE).unwrap();
        hw.write_msr(0x300 + c, c.into()).unwrap();
    }
    hw.write_msr(CRU_ESCR0, escr(2, 1) | T0_OS).unwrap();
    hw.write_msr(0x3F0, 0x55).unwrap();
    hw.write_msr(0x3F1, 1 << 24 | 1).unwrap();
    hw.clear();
    scrub_all(&p, &mut hw).unwrap();
    assert_eq!(hw.take_counts(), counts(0, 2 * 17 + 42 + 3));
    for msr in PMU_MSRS {
        let want = match classify(msr) {
            MsrClass::Counter(Counter::BpuCounter0) => 77,
            MsrClass::Cccr(Counter::BpuCounter0) => cccr(6),
            MsrClass::Escr(Escr::FsbEscr0) => escr(0x13, 1) | T0_OS,
            MsrClass::Cccr(_) => CccrValue::IDLE.bits(),
            MsrClass::TcPreciseEvent => 0xFC00,
            MsrClass::Escr(e) if !e.available_on(3) => continue,
            MsrClass::Unimplemented => continue,
            _ => 0,
        };
        assert_eq!(hw.read_msr(msr).unwrap(), want, "{msr:#x}");
        if check_msr_read(&p, msr) == Verdict::Apply {
            assert_eq!(PmuContext::new().read(msr), Some(want), "{msr:#x}");
        }
    }
}

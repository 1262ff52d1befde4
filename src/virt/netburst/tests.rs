//! The NetBurst virtualisation support against the NetBurst model (a test
//! instrument written from the manuals): classification, every kind of
//! illegal guest write (cross-checked with the model where the hardware
//! itself faults), RDPMC, and the world switch's exact traffic and
//! isolation over 1,000 switches. Counts come from the model.

use std::vec::Vec;

use super::*;
use crate::access::{AccessCounts, Recording};
use crate::arch::netburst::cccr::ActiveThread;
use crate::arch::netburst::msrs::EscrSelect;
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
        filter: EventFilter::Deny(&[Event::X87FpUop]),
        host_counters: CounterSet::EMPTY.with(Counter::BpuCounter0),
        host_escrs: EscrSet::EMPTY.with(Escr::FsbEscr0),
        ..GuestPolicy::new(3)
    }
}

#[test]
fn every_msr_has_its_class() {
    assert_eq!(classify(0x300), MsrClass::Counter(Counter::BpuCounter0));
    assert_eq!(classify(0x311), MsrClass::Counter(Counter::IqCounter5));
    assert_eq!(classify(0x312), MsrClass::NotPmu);
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
    let pebs = GuestPolicy {
        pebs: true,
        ..policy()
    };
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
        (&pebs, 0x600, 0x0000_8000_0000_0000, NonCanonical),
    ];
    let mut distinct = Vec::new();
    for (policy, msr, value, why) in writes {
        assert_eq!(
            check_write(policy, msr, value),
            Verdict::InjectGp(why),
            "WRMSR {msr:#x} {value:#x}"
        );
        let hardware_rule = matches!(
            why,
            Reserved { .. } | OtherLogicalProcessor { .. } | NoSuchMsr { .. }
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
        check_write(&p, 0x1A0, 0),
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
            check_write(&p, msr, value),
            Verdict::Apply,
            "WRMSR {msr:#x} {value:#x}"
        );
        let mut m = NetBurstModel::new(Config::new(3, false));
        assert!(
            m.write_msr(msr, value).is_ok(),
            "the model refuses WRMSR {msr:#x} {value:#x}"
        );
    }
    let pebs = GuestPolicy { pebs: true, ..p };
    assert_eq!(
        check_write(&pebs, 0x3F1, 1 << 25 | 1 << 24 | 1),
        Verdict::Apply
    );
    assert_eq!(
        check_write(&pebs, 0x600, 0xFFFF_8000_0000_1000),
        Verdict::Emulate
    );
    assert_eq!(check_write(&p, 0x10, 0), Verdict::NotPmu);
    // Reads: the host's registers do not exist for the guest.
    assert_eq!(
        check_read(&p, 0x300),
        Verdict::InjectGp(GuestGp::HostOwned { msr: 0x300 })
    );
    assert_eq!(
        check_read(&p, FSB_ESCR0),
        Verdict::InjectGp(GuestGp::HostOwned { msr: FSB_ESCR0 })
    );
    assert_eq!(
        check_read(&p, 0x3BA),
        Verdict::InjectGp(GuestGp::NoSuchMsr { msr: 0x3BA })
    );
    assert_eq!(check_read(&p, 0x301), Verdict::Apply);
    assert_eq!(check_read(&p, 0x1A0), Verdict::Emulate);
    assert_eq!(
        misc_enable_pmu_bits(&p),
        1 << 7 | 1 << 12,
        "PEBS unavailable"
    );
    assert_eq!(misc_enable_pmu_bits(&pebs), 1 << 7);
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
    assert_eq!(m.read_pmc(5), Ok(0xAB_1234_5678));
    assert_eq!(m.read_pmc(1 << 31 | 5), Ok(0x1234_5678));
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
        assert_eq!(check_write(p, msr, value), Verdict::Apply);
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
            ctx.save(&mut hw).unwrap();
            assert_eq!(
                hw.take_counts(),
                counts(2, 1),
                "CCCR read and disabled, counter read"
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
    ctx.save(&mut hw).unwrap();
    assert_eq!(ctx.counter(Counter::IqCounter0), 3);
    let ovf = 1u64 << 31;
    assert_ne!(ctx.read(0x36C).unwrap() & ovf, 0, "OVF captured");
    assert_eq!(
        hw.read_msr(0x36C).unwrap() & ENABLE,
        0,
        "disabled on the hardware"
    );
    ctx.scrub(&mut hw).unwrap();
    ctx.restore(&mut hw).unwrap();
    assert_ne!(hw.read_msr(0x36C).unwrap() & ovf, 0, "OVF back");
    assert_eq!(hw.read_msr(0x30C).unwrap(), 3);
}

//! Execution tagging (SDM 18.15.6.3, Table 19-32) with two tag values on the
//! NetBurst PMU model. Upstream, `packed_SP_uop` on `FIRM_ESCR0` tags its
//! µops with tag value 1 (tag bit 0) and `x87_FP_uop` on `FIRM_ESCR1` tags
//! its µops with tag value 2 (tag bit 1); downstream, two `execution_event`
//! counters count the tagged µops at retirement, one per tag bit. QEMU has
//! no PMU, so the counters are the crate's register-level model of a
//! Pentium 4 PMU: the µops are retired on the model, and every count printed
//! comes from it.
//!
//! Each set-up is an [`ExecutionTagging`] request, checked whole and turned
//! into a plan: the event and ESCR for each counter's handle. A plan has
//! one downstream counter, and the request insists that the upstream tag bits
//! and the downstream `NBOGUSn`/`BOGUSn` bits coincide (SDM 18.15.6.3: "The
//! value selected for the tag value should coincide with the event mask
//! selected in the downstream ESCR"), so one request with both upstream
//! events and only `NBOGUS0` downstream is rejected (`TagNotCounted { bit: 1 }`).
//! The hardware does allow both at once: there are two `execution_event`
//! ESCRs, `CRU_ESCR2` (counters 12, 13, 16) and `CRU_ESCR3` (14, 15, 17),
//! and the tag bits are per µop, not per ESCR. So the example plans
//!
//! * A: `packed_SP_uop` tag 1 (`FIRM_ESCR0`, counter 8) -> `execution_event`
//!   `NBOGUS0` on counter 12 (`CRU_ESCR2`);
//! * B: `x87_FP_uop` tag 2 (`FIRM_ESCR1`, counter 10) -> `execution_event`
//!   `NBOGUS1` on counter 14 (`CRU_ESCR3`);
//!
//! and configures both plans' counters through the driver's handles, so
//! the two set-ups run side by side. Phase 2 does the same with `BOGUS0`
//! and `BOGUS1` (the µops squashed on a mispredicted path); phase 3 is a
//! single plan with both upstream events and `NBOGUS0|NBOGUS1` on counter
//! 12, which counts a µop carrying both tags once. Each phase releases
//! every counter it claimed (the driver clears the tagging ESCRs). The
//! driver refuses a downstream counter whose tags no claimed counter sets,
//! which the example shows first.
//!
//! In each phase the same µops are retired on logical processor 0 at CPL 0:
//! some carry `packed_SP_uop`, some `x87_FP_uop`, some both, some neither,
//! some NBOGUS and some BOGUS. The counts are checked exactly against
//! numbers worked out by hand from that mix.
//!
//! ```text
//! cargo qemu tagging
//! ```
#![no_std]
#![no_main]

use hobby::boot::BootInfo;
use hobby::exit::{ExitCode, exit_qemu};
use hobby::println;
use hobby::test::Failure;
use pmu::arch::netburst::driver::{ConfigError, CounterConfig, Counters, NetBurst, NetBurstDriver};
use pmu::arch::netburst::{
    Counter, EventName, ExecUpstream, ExecutionTagging, NetBurstPmu, TagValue, Tagging,
    TaggingError, TaggingPlan,
};
use pmu::counter::{AnyHandle, DriverError};
use pmu::model::netburst::{
    Config, EscrGroup, EventKind, LogicalProcessor, Privilege, UopKind, Uops,
};
use pmu::model::netburst::{NetBurstMsr, SharedNetBurstModel};

hobby::entry_point!(main);

static MODEL: SharedNetBurstModel = SharedNetBurstModel::new(Config::prescott_ht());
// SAFETY: the model is a package of its own, and this is its one value.
static PACKAGE: NetBurstPmu = unsafe { NetBurstPmu::new() };
pmu::owner!(Package);

type Driver = NetBurstDriver<'static, Package, NetBurstMsr<'static>>;

/// The two upstream events, their tag values and the counters that count
/// them (and keep their FIRM ESCRs powered, SDM 18.15.5.9).
const PACKED_SP: (EventName, Counter, u8) = (EventName::PackedSpUop, Counter::FlameCounter0, 1);
const X87_FP: (EventName, Counter, u8) = (EventName::X87FpUop, Counter::FlameCounter2, 2);
/// The downstream `execution_event` counters: 12 is fed by `CRU_ESCR2`, 14
/// by `CRU_ESCR3`.
const DOWN_A: Counter = Counter::IqCounter0;
const DOWN_B: Counter = Counter::IqCounter2;
/// `:k`: CPL 0 only, for every counter of a plan (on T0, the driver's
/// default logical processor).
const OS: bool = true;
const USR: bool = false;

/// Which upstream events a batch of µops causes.
#[derive(Clone, Copy)]
enum Carries {
    PackedSp,
    X87Fp,
    Both,
    Neither,
}

/// One line of the injected mix: µops carrying `carries`, `nbogus` of them
/// retiring NBOGUS and `bogus` BOGUS.
struct Batch {
    carries: Carries,
    nbogus: u64,
    bogus: u64,
}

const MIX: [Batch; 4] = [
    Batch {
        carries: Carries::PackedSp,
        nbogus: 5,
        bogus: 3,
    },
    Batch {
        carries: Carries::X87Fp,
        nbogus: 7,
        bogus: 2,
    },
    Batch {
        carries: Carries::Both,
        nbogus: 4,
        bogus: 1,
    },
    Batch {
        carries: Carries::Neither,
        nbogus: 11,
        bogus: 6,
    },
];

/// A counter of a phase and the count it must reach, worked out from [`MIX`].
struct Check {
    counter: Counter,
    what: &'static str,
    expected: u64,
}

fn main(_: &'static BootInfo) -> ! {
    println!("pmu example: tagging (on the NetBurst PMU model: QEMU has no PMU)");
    match run() {
        Ok(()) => {
            println!("every count matches: the downstream counters count exactly the tagged µops");
            exit_qemu(ExitCode::Success)
        }
        Err(e) => {
            println!("tagging failed: {}", e.message());
            exit_qemu(ExitCode::Failure)
        }
    }
}

fn tag(v: u8) -> Result<TagValue, Failure> {
    Ok(TagValue::new(v).ok_or("tag value out of range")?)
}

fn upstream((event, counter, value): (EventName, Counter, u8)) -> Result<ExecUpstream, Failure> {
    Ok(ExecUpstream {
        event,
        counter,
        tag: tag(value)?,
    })
}

/// One downstream counter fed by `ups`, counting `NBOGUSn` for the bits of
/// `nbogus` and `BOGUSn` for those of `bogus`.
fn plan(
    counter: Counter,
    nbogus: u8,
    bogus: u8,
    ups: &[(EventName, Counter, u8)],
) -> Result<TaggingPlan, Failure> {
    let mut t = ExecutionTagging::new(counter, tag(nbogus)?, tag(bogus)?, OS, USR);
    for &u in ups {
        t = t.with_upstream(upstream(u)?)?;
    }
    Ok(t.plan()?)
}

/// `packed_SP_uop` and `x87_FP_uop` with mask bit 15 `ALL` as the model
/// sees them (FIRM ESCRs, event selects 08H and 04H of SDM Table 19-29),
/// written out here rather than taken from the driver's catalog, so that a
/// wrong select or mask in a plan would show as a wrong count.
const PACKED_SP_KIND: EventKind = EventKind::new(EscrGroup::Firm, 0x08, 1 << 15);
const X87_FP_KIND: EventKind = EventKind::new(EscrGroup::Firm, 0x04, 1 << 15);

fn run() -> Result<(), Failure> {
    let cpu = MODEL.detect().ok_or("detection on the model")?;
    println!(
        "detected on the model: NetBurst model {}, {} logical processor(s)",
        cpu.model, cpu.logical_processors
    );
    let (mut d, c) = NetBurstDriver::take(MODEL.msr(), &cpu, &PACKAGE)?;
    let mut handles = c.erase_all();

    // Why two plans: a plan has one downstream counter, and all of its
    // upstream tag bits must be counted there.
    let x87_up = upstream(X87_FP)?;
    let one = ExecutionTagging::new(DOWN_A, tag(1)?, tag(0)?, OS, USR)
        .with_upstream(upstream(PACKED_SP)?)
        .and_then(|t| t.with_upstream(x87_up))?
        .plan()
        .map(|_| ());
    println!(
        "one plan, both upstream events, NBOGUS0 only on counter 12: {}",
        match one {
            Err(TaggingError::TagNotCounted { bit: 1 }) => "rejected (tag bit 1 not counted)",
            Err(_) => "rejected (other reason)",
            Ok(_) => "accepted",
        }
    );
    if one != Err(TaggingError::TagNotCounted { bit: 1 }) {
        return Err("the request should reject an uncounted tag bit".into());
    }
    // And the driver: execution_event NBOGUS0 before anything sets tag bit 0.
    let down = plan(DOWN_A, 1, 0, &[PACKED_SP])?.downstream();
    let refused = handles[usize::from(DOWN_A.index())]
        .configure(&mut d, &CounterConfig::counting(down.event, down.escr));
    let expected = ConfigError::Untagged {
        tagging: Tagging::Execution,
        bit: Some(0),
    };
    match refused {
        Err(pmu::counter::ErasedError::Driver(DriverError::Config(e))) if e == expected => {
            println!("the driver, the downstream counter alone: refused ({e})")
        }
        _ => return Err("the driver should refuse an untagged execution_event".into()),
    }

    print_mix();

    let (packed, x87) = (PACKED_SP_KIND, X87_FP_KIND);
    let upstream_checks = [
        Check {
            counter: PACKED_SP.1,
            // Upstream events count at execution, bogus or not: 5+3+4+1.
            what: "packed_SP_uop, upstream (FIRM_ESCR0)",
            expected: 13,
        },
        Check {
            counter: X87_FP.1,
            // 7+2+4+1.
            what: "x87_FP_uop, upstream (FIRM_ESCR1)",
            expected: 14,
        },
    ];

    // Phase 1: two builds, NBOGUS0 on 12 and NBOGUS1 on 14.
    let a = plan(DOWN_A, 1, 0, &[PACKED_SP])?;
    let b = plan(DOWN_B, 2, 0, &[X87_FP])?;
    let checks = [
        Check {
            counter: DOWN_A,
            // packed only 5 + both 4.
            what: "execution_event NBOGUS0 (tag 1)",
            expected: 9,
        },
        Check {
            counter: DOWN_B,
            // x87 only 7 + both 4.
            what: "execution_event NBOGUS1 (tag 2)",
            expected: 11,
        },
    ];
    let mut ok = phase(
        &mut d,
        &mut handles,
        "phase 1: two plans, NBOGUS0 on counter 12 (CRU_ESCR2), NBOGUS1 on counter 14 (CRU_ESCR3)",
        &[a, b],
        &checks,
        &upstream_checks,
        (packed, x87),
    )?;

    // Phase 2: the same with BOGUS0 and BOGUS1.
    let a = plan(DOWN_A, 0, 1, &[PACKED_SP])?;
    let b = plan(DOWN_B, 0, 2, &[X87_FP])?;
    let checks = [
        Check {
            counter: DOWN_A,
            // packed only 3 + both 1.
            what: "execution_event BOGUS0 (tag 1)",
            expected: 4,
        },
        Check {
            counter: DOWN_B,
            // x87 only 2 + both 1.
            what: "execution_event BOGUS1 (tag 2)",
            expected: 3,
        },
    ];
    ok &= phase(
        &mut d,
        &mut handles,
        "phase 2: two plans, BOGUS0 on counter 12, BOGUS1 on counter 14",
        &[a, b],
        &checks,
        &upstream_checks,
        (packed, x87),
    )?;

    // Phase 3: one build, both upstream events, NBOGUS0|NBOGUS1 on 12.
    let both = plan(DOWN_A, 3, 0, &[PACKED_SP, X87_FP])?;
    let checks = [
        Check {
            counter: DOWN_A,
            // 5 + 7 + 4: a µop with both tag bits counts once.
            what: "execution_event NBOGUS0|NBOGUS1",
            expected: 16,
        },
        Check {
            counter: DOWN_B,
            what: "counter 14, not programmed",
            expected: 0,
        },
    ];
    ok &= phase(
        &mut d,
        &mut handles,
        "phase 3: one plan, both upstream events, NBOGUS0|NBOGUS1 on counter 12",
        &[both],
        &checks,
        &upstream_checks,
        (packed, x87),
    )?;

    // Every token back (each phase releases what it claimed).
    let Ok(c) = Counters::from_erased(handles) else {
        return Err("a counter is still claimed".into());
    };
    let _msr = d.give_back(c);
    if ok {
        Ok(())
    } else {
        Err("the model counted something else".into())
    }
}

fn print_mix() {
    println!("µops retired in each phase (logical processor 0, CPL 0, on the model):");
    println!("  upstream events carried          NBOGUS  BOGUS");
    for b in &MIX {
        let what = match b.carries {
            Carries::PackedSp => "packed_SP_uop (tag 1)",
            Carries::X87Fp => "x87_FP_uop (tag 2)",
            Carries::Both => "both (tags 1|2 = 3)",
            Carries::Neither => "neither (no tag)",
        };
        println!("  {what:<32} {:>6} {:>6}", b.nbogus, b.bogus);
    }
}

/// Configures and enables every counter of `plans` through its handle
/// (upstream first), retires [`MIX`], compares the counters with `checks`
/// and `upstream`, and releases every counter again. Returns whether every
/// count matched.
fn phase(
    d: &mut Driver,
    handles: &mut [AnyHandle<NetBurst>; 18],
    title: &str,
    plans: &[TaggingPlan],
    checks: &[Check],
    upstream: &[Check],
    (packed, x87): (EventKind, EventKind),
) -> Result<bool, Failure> {
    println!("{title}");
    for t in plans.iter().flat_map(TaggingPlan::iter) {
        let h = &mut handles[usize::from(t.counter.index())];
        h.configure(d, &CounterConfig::counting(t.event, t.escr))?;
        h.enable(d)?;
        println!(
            "  counter {:>2} on {:<10} {:<18} event image {:#010x}",
            t.counter.index(),
            t.escr.name(),
            t.event.event().name(),
            t.event.escr_value().bits()
        );
    }

    for b in &MIX {
        let upstream: &[EventKind] = match b.carries {
            Carries::PackedSp => &[packed],
            Carries::X87Fp => &[x87],
            Carries::Both => &[packed, x87],
            Carries::Neither => &[],
        };
        for (count, bogus) in [(b.nbogus, false), (b.bogus, true)] {
            let uops = Uops {
                upstream,
                bogus,
                ..Uops::new(LogicalProcessor::T0, Privilege::Os, UopKind::Other, count)
            };
            MODEL.with(|m| m.retire(&uops));
        }
    }

    println!("  counter  event                                  expected  counted");
    let mut ok = true;
    for c in checks.iter().chain(upstream) {
        let h = &handles[usize::from(c.counter.index())];
        let v = if h.state() == pmu::counter::StateTag::Unclaimed {
            0
        } else {
            h.read(d)?
        };
        let mark = if v == c.expected { "" } else { "  MISMATCH" };
        ok &= v == c.expected;
        println!(
            "  {:>7}  {:<37}  {:>8}  {:>7}{mark}",
            c.counter.index(),
            c.what,
            c.expected,
            v
        );
    }
    for t in plans.iter().flat_map(TaggingPlan::iter) {
        handles[usize::from(t.counter.index())].release(d)?;
    }
    Ok(ok)
}

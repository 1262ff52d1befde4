//! Execution tagging (SDM 18.15.6.3, Table 19-32) with two tag values on the
//! NetBurst PMU model. Upstream, `packed_SP_uop` on `FIRM_ESCR0` tags its
//! µops with tag value 1 (tag bit 0) and `x87_FP_uop` on `FIRM_ESCR1` tags
//! its µops with tag value 2 (tag bit 1); downstream, two `execution_event`
//! counters count the tagged µops at retirement, one per tag bit. QEMU has
//! no PMU, so the counters are the crate's register-level model of a
//! Pentium 4 PMU: the µops are retired on the model, and every count printed
//! comes from it.
//!
//! Two downstream counters take two builds. [`ExecutionTagging`] has one
//! downstream counter per build, and it insists that the upstream tag bits
//! and the downstream `NBOGUSn`/`BOGUSn` bits coincide (SDM 18.15.6.3: "The
//! value selected for the tag value should coincide with the event mask
//! selected in the downstream ESCR"), so one build with both upstream events
//! and only `NBOGUS0` downstream is rejected (`TagNotCounted { bit: 1 }`).
//! The hardware does allow both at once: there are two `execution_event`
//! ESCRs, `CRU_ESCR2` (counters 12, 13, 16) and `CRU_ESCR3` (14, 15, 17),
//! and the tag bits are per µop, not per ESCR. So the example builds
//!
//! * A: `packed_SP_uop` tag 1 (`FIRM_ESCR0`, counter 8) -> `execution_event`
//!   `NBOGUS0` on counter 12 (`CRU_ESCR2`);
//! * B: `x87_FP_uop` tag 2 (`FIRM_ESCR1`, counter 10) -> `execution_event`
//!   `NBOGUS1` on counter 14 (`CRU_ESCR3`);
//!
//! checks that the two lists of writes touch disjoint MSRs, and writes both,
//! so the two set-ups run side by side. Phase 2 does the same with `BOGUS0`
//! and `BOGUS1` (the µops squashed on a mispredicted path); phase 3 is a
//! single build with both upstream events and `NBOGUS0|NBOGUS1` on counter
//! 12, which counts a µop carrying both tags once. Between phases every MSR
//! the previous builds wrote is zeroed again (CCCRs first).
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
use pmu::access::MsrAccess;
use pmu::arch::netburst::{
    Counter, Escr, Event, ExecUpstream, ExecutionTagging, MsrWrites, TagValue, TaggingError,
    ThreadCpl,
};
use pmu::model::netburst::SharedModel;
use pmu::model::netburst::{
    Config, EscrGroup, EventKind, LogicalProcessor, Privilege, UopKind, Uops,
};

hobby::entry_point!(main);

static MODEL: SharedModel = SharedModel::new(Config::prescott_ht());

/// The two upstream events, their tag values and the counters that count
/// them (and keep their FIRM ESCRs powered, SDM 18.15.5.9).
const PACKED_SP: (Event, Counter, u8) = (Event::PackedSpUop, Counter::FlameCounter0, 1);
const X87_FP: (Event, Counter, u8) = (Event::X87FpUop, Counter::FlameCounter2, 2);
/// The downstream `execution_event` counters: 12 is fed by `CRU_ESCR2`, 14
/// by `CRU_ESCR3`.
const DOWN_A: Counter = Counter::IqCounter0;
const DOWN_B: Counter = Counter::IqCounter2;
/// `:k` on both logical processors, for every ESCR the builder writes.
const CPL: ThreadCpl = ThreadCpl::both_threads(true, false);

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

fn upstream((event, counter, value): (Event, Counter, u8)) -> Result<ExecUpstream, Failure> {
    Ok(ExecUpstream {
        event,
        counter,
        tag: tag(value)?,
    })
}

/// One downstream counter fed by `ups`, counting `NBOGUSn` for the bits of
/// `nbogus` and `BOGUSn` for those of `bogus`.
fn build(
    counter: Counter,
    nbogus: u8,
    bogus: u8,
    ups: &[(Event, Counter, u8)],
) -> Result<MsrWrites, Failure> {
    let mut t = ExecutionTagging::new(counter, tag(nbogus)?, tag(bogus)?, CPL);
    for &u in ups {
        t = t.with_upstream(upstream(u)?)?;
    }
    Ok(t.build()?)
}

/// `packed_SP_uop` and `x87_FP_uop` with mask bit 15 `ALL` as the model
/// sees them (FIRM ESCRs, event selects 08H and 04H of SDM Table 19-29),
/// written out here rather than taken from the driver's catalog, so that a
/// wrong select or mask in the builder would show as a wrong count.
const PACKED_SP_KIND: EventKind = EventKind::new(EscrGroup::Firm, 0x08, 1 << 15);
const X87_FP_KIND: EventKind = EventKind::new(EscrGroup::Firm, 0x04, 1 << 15);

fn run() -> Result<(), Failure> {
    let cpu = MODEL.detect().ok_or("detection on the model")?;
    println!(
        "detected on the model: NetBurst model {}, {} logical processor(s)",
        cpu.model, cpu.logical_processors
    );
    let mut msr = MODEL.msr();

    // Why two builds: one build has one downstream counter, and all of its
    // upstream tag bits must be counted there.
    let x87_up = upstream(X87_FP)?;
    let one = ExecutionTagging::new(DOWN_A, tag(1)?, tag(0)?, CPL)
        .with_upstream(upstream(PACKED_SP)?)
        .and_then(|t| t.with_upstream(x87_up))?
        .build();
    println!(
        "one build, both upstream events, NBOGUS0 only on counter 12: {}",
        match one {
            Err(TaggingError::TagNotCounted { bit: 1 }) => "rejected (tag bit 1 not counted)",
            Err(_) => "rejected (other reason)",
            Ok(_) => "accepted",
        }
    );
    if one != Err(TaggingError::TagNotCounted { bit: 1 }) {
        return Err("the builder should reject an uncounted tag bit".into());
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
    let a = build(DOWN_A, 1, 0, &[PACKED_SP])?;
    let b = build(DOWN_B, 2, 0, &[X87_FP])?;
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
        &mut msr,
        "phase 1: two builds, NBOGUS0 on counter 12 (CRU_ESCR2), NBOGUS1 on counter 14 (CRU_ESCR3)",
        &[a, b],
        &checks,
        &upstream_checks,
        (packed, x87),
    )?;

    // Phase 2: the same with BOGUS0 and BOGUS1.
    let a = build(DOWN_A, 0, 1, &[PACKED_SP])?;
    let b = build(DOWN_B, 0, 2, &[X87_FP])?;
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
        &mut msr,
        "phase 2: two builds, BOGUS0 on counter 12, BOGUS1 on counter 14",
        &[a, b],
        &checks,
        &upstream_checks,
        (packed, x87),
    )?;

    // Phase 3: one build, both upstream events, NBOGUS0|NBOGUS1 on 12.
    let both = build(DOWN_A, 3, 0, &[PACKED_SP, X87_FP])?;
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
        &mut msr,
        "phase 3: one build, both upstream events, NBOGUS0|NBOGUS1 on counter 12",
        &[both],
        &checks,
        &upstream_checks,
        (packed, x87),
    )?;

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

/// Writes `builds` (after checking they touch disjoint MSRs), retires
/// [`MIX`], compares the counters with `checks` and `upstream`, and zeroes
/// every MSR written again. Returns whether every count matched.
fn phase<M: MsrAccess>(
    msr: &mut M,
    title: &str,
    builds: &[MsrWrites],
    checks: &[Check],
    upstream: &[Check],
    (packed, x87): (EventKind, EventKind),
) -> Result<bool, Failure> {
    println!("{title}");
    for (i, w) in builds.iter().enumerate() {
        for (j, other) in builds.iter().enumerate().skip(i + 1) {
            let shared = w
                .as_slice()
                .iter()
                .any(|x| other.as_slice().iter().any(|y| y.msr == x.msr));
            if shared {
                println!("  builds {i} and {j} write the same MSR");
                return Err("overlapping builds".into());
            }
        }
    }
    for w in builds {
        for x in w.as_slice() {
            describe(x.msr, x.value);
            msr.write_msr(x.msr, x.value)?;
        }
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
        let v = msr.read_pmc(c.counter.rdpmc_index())?;
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

    // Tear down: CCCRs first, then counters, then ESCRs.
    for w in builds.iter().rev() {
        for x in w.as_slice().iter().rev() {
            msr.write_msr(x.msr, 0)?;
        }
    }
    Ok(ok)
}

/// Prints one WRMSR of a build with the register's name.
fn describe(msr: u32, value: u64) {
    match (Escr::from_msr(msr), msr) {
        (Some(e), _) => println!("  WRMSR {msr:#05x} {:<16} <- {value:#010x}", e.name()),
        (None, 0x300..=0x311) => println!(
            "  WRMSR {msr:#05x} counter {:<8} <- {value:#x}",
            msr - 0x300
        ),
        (None, 0x360..=0x371) => {
            println!("  WRMSR {msr:#05x} CCCR {:<11} <- {value:#x}", msr - 0x360)
        }
        (None, _) => println!("  WRMSR {msr:#05x} {:<16} <- {value:#x}", "?"),
    }
}

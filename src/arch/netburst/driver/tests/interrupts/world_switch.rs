//! The world switch ([`PmuContext::save`], [`PmuContext::scrub`],
//! [`PmuContext::restore`], as `pmu::virt::netburst` has them now) with
//! the host's sampling counter overflowing before every access of each and
//! its PMI taken after the call (a vector: a VM exit leaves RFLAGS.IF
//! clear, SDM Vol. 3C "Loading Host RIP, RSP, and RFLAGS") or also at that
//! access and at every later one (an NMI), in 5 phases of its period. The
//! host keeps counter 0 (`A` of the rig: RUNNING, a sample every 4); the
//! guest counts `instr_retired` on counter 12, which the overflow's events
//! feed while the guest's context is loaded. After each: the host's
//! counter conserves its events, serviced, its samples exact, its CCCR
//! its image, the only one armed; the guest's count (the registers' while
//! loaded, the context's once saved) is exactly what it counted; the
//! registers are the context's after a restore, idle after a save and
//! zero after a scrub.

use super::*;
use crate::virt::netburst::PmuContext;

const CRU_ESCR0: u32 = 0x3B8;
const GUEST: usize = 12;

/// The switch's calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Switch {
    Save,
    Scrub,
    Restore,
}

/// The guest's context as the VMM records it: `instr_retired` for T0 at
/// CPL 0 on counter 12 through CRU_ESCR0 (ESCR select 4), enabled.
fn guest() -> PmuContext {
    let mut ctx = PmuContext::new();
    let escr = 0x02 << 25 | 1 << 9 | 1 << 3;
    let cccr = 1 << 12 | 4 << 13 | 0b11 << 16;
    for (msr, value) in [(CRU_ESCR0, escr), (0x30C, 0), (0x36C, cccr)] {
        assert!(ctx.record(msr, value));
    }
    ctx
}

#[test]
fn a_pmi_at_every_access_of_the_world_switch() {
    crate::owner!(Host);
    let mut runs = 0;
    for op in [Switch::Save, Switch::Scrub, Switch::Restore] {
        for (delivery, phase) in Delivery::ALL
            .into_iter()
            .flat_map(|d| (0..5).map(move |p| (d, p)))
        {
            runs += sweep(delivery == Delivery::Nmi, |overflow, take| {
                let what = format!(
                    "{op:?} phase {phase}, {delivery:?}: overflow {overflow:?}, PMI {take:?}"
                );
                let pmu = crate::testing::netburst_pmu();
                let mut rig = Rig::<Host>::new(&pmu, Op::Read, delivery, phase);
                // The rig's counters but the host's `A` go: the guest's
                // counter and ESCR must be free.
                for n in [X, S, B] {
                    rig.on(n, |h, d| h.release(d).unwrap());
                }
                let mut ctx = guest();
                let r = rig.d.msr();
                ctx.restore(&mut r.inner).unwrap();
                r.hook.counted[GUEST] = 0;
                r.hook.overflow(&mut r.inner);
                r.hook.deliver(&mut r.inner);
                if op != Switch::Save {
                    ctx.save(&mut r.inner).unwrap();
                }
                if op == Switch::Restore {
                    ctx.scrub(&mut r.inner).unwrap();
                }
                let handled = r.hook.handled;
                r.hook.raised = false;
                (r.hook.overflow_at, r.hook.take_at) = (overflow.access(), take.access());
                r.arm();
                match op {
                    Switch::Save => {
                        ctx.save(r).unwrap();
                    }
                    Switch::Scrub => ctx.scrub(r).unwrap(),
                    Switch::Restore => ctx.restore(r).unwrap(),
                }
                let accesses = r.accesses();
                let last = overflow.access().max(take.access());
                assert!(last.is_none_or(|a| a < accesses), "{what}: in the call");
                if overflow == At::After {
                    r.hook.overflow(&mut r.inner);
                }
                r.hook.deliver(&mut r.inner);
                assert!(
                    !r.hook.raised || r.hook.handled > handled,
                    "{what}: the PMI was taken"
                );
                (r.hook.overflow_at, r.hook.take_at) = (None, None);
                let m = &mut r.inner;
                let counted = r.hook.counted[GUEST];
                let (escr, count, cccr) = (
                    m.read_msr(CRU_ESCR0).unwrap(),
                    m.counter(GUEST),
                    m.cccr(GUEST),
                );
                let image = ctx.read(0x36C).unwrap();
                match op {
                    Switch::Save => {
                        assert_eq!(ctx.counter(Counter::IqCounter0), counted, "{what}: saved");
                        assert_eq!(
                            cccr,
                            crate::arch::netburst::CccrValue::IDLE.bits(),
                            "{what}: idle (a switched-out CCCR neither counts nor cascades)"
                        );
                    }
                    Switch::Scrub => {
                        assert_eq!(ctx.counter(Counter::IqCounter0), counted, "{what}");
                        assert_eq!((escr, count), (0, 0), "{what}: scrubbed");
                    }
                    Switch::Restore => {
                        assert_eq!(count, counted, "{what}: restored, counting on");
                        assert_eq!(escr, ctx.read(CRU_ESCR0).unwrap(), "{what}: ESCR");
                        assert_eq!(cccr, image, "{what}: CCCR, enabled");
                    }
                }
                assert_eq!(image & 1 << 31, 0, "{what}: the guest never overflowed");
                rig.check(None, Some(GUEST), &what);
                rig.d.retire();
                accesses
            });
        }
    }
    std::println!("NetBurst world switch: {runs} interleavings");
}

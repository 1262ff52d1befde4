//! The Itanium virtualisation support against the Itanium 2 model: the
//! guest's PMC writes through the validator, and the world switch's exact
//! traffic and isolation. Counts come from the model.

use super::*;
use crate::access::{AccessCounts, Recording};
use crate::arch::itanium::fields::{EventCode, Plm};
use crate::arch::itanium::generation::Counter;
use crate::arch::itanium::pmc::CounterPmc;
use crate::arch::itanium::validate::Policy;
use crate::model::itanium::{Event, Generation as ModelGeneration, ItaniumModel, Psr};

const G: Generation = Generation::Itanium2;

fn policy() -> GuestPolicy {
    GuestPolicy {
        generation: G,
        host_counters: RegSet::single(7),
    }
}

/// PMC4 counting CPU cycles (12H) at every privilege level.
fn cycles_pmc(n: u8) -> u64 {
    let c = Counter::new(G, n).unwrap();
    CounterPmc::new(c, EventCode::new(G, 0x12).unwrap())
        .unwrap()
        .with_plm(Plm::ALL)
        .with_privileged(true)
        .bits()
}

#[test]
fn guest_pmc_writes_go_through_the_validator() {
    let p = policy();
    let mut v = Validator::new(G, Policy::STRICT);
    assert_eq!(
        check_pmc_write(&mut v, &p, 4, cycles_pmc(4)),
        Verdict::Apply
    );
    assert_eq!(
        check_pmc_write(&mut v, &p, 0, 1),
        Verdict::Emulate,
        "PMC0: virtual"
    );
    assert_eq!(
        check_pmc_write(&mut v, &p, 7, cycles_pmc(7)),
        Verdict::InjectGp(GuestFault::HostOwned { reg: 7 })
    );
    // A reserved bit, and an event the catalog does not have.
    assert!(matches!(
        check_pmc_write(&mut v, &p, 4, cycles_pmc(4) | 1 << 63),
        Verdict::InjectGp(GuestFault::Pmc(PmcError::ReservedBits { pmc: 4, .. }))
    ));
    assert!(matches!(
        check_pmc_write(&mut v, &p, 200, 0),
        Verdict::InjectGp(GuestFault::Pmc(PmcError::NotImplemented { pmc: 200 }))
    ));
    assert_eq!(check_pmd(&p, 4), Verdict::Apply);
    assert_eq!(
        check_pmd(&p, 7),
        Verdict::InjectGp(GuestFault::HostOwned { reg: 7 })
    );
    assert_eq!(
        check_pmd(&p, 63),
        Verdict::InjectGp(GuestFault::NoSuchPmd { pmd: 63 })
    );
}

/// Two guests count cycles on PMD4 through the world switch, 1,000 times
/// each, beside the host's PMD7: each count is exactly its own, the host's
/// counts whenever a guest runs, and each switch touches only what is in
/// use. Guest A freezes its own PMU half of the time: its counter stops,
/// the host's does not.
#[test]
fn world_switch_under_the_freeze() {
    let mut model = ItaniumModel::new(ModelGeneration::Itanium2);
    model.set_psr(Psr::MONITORING);
    let mut hw: Recording<ItaniumModel, 64> = Recording::new(model);
    // The host's counter 7 counts cycles throughout.
    hw.write_pmc(7, cycles_pmc(7)).unwrap();
    hw.write_pmc(0, 0).unwrap();
    let guest = || {
        let mut ctx = PmuContext::new(G);
        assert!(ctx.record_pmc(4, cycles_pmc(4)));
        assert!(ctx.record_pmd(4, 0));
        assert!(ctx.record_pmc(0, 0), "the guest unfroze its PMU");
        ctx
    };
    let (mut a, mut b) = (guest(), guest());
    let (mut want_a, mut want_b, mut host) = (0u64, 0u64, 0u64);
    for round in 0..1000u64 {
        for (which, n) in [(0, 10 + round % 7), (1, 3 + round % 2)] {
            let ctx = if which == 0 { &mut a } else { &mut b };
            hw.clear();
            ctx.restore(&mut hw).unwrap();
            assert_eq!(
                hw.take_counts(),
                AccessCounts::pmc_pmd(1, 3, 0, 1),
                "PMC0 read and frozen, PMC4, PMD4, PMC0 last"
            );
            // Guest A freezes its PMU every other round, while loaded.
            let frozen = which == 0 && round % 2 == 1;
            if frozen {
                ctx.write_pmc0(&mut hw, 1).unwrap();
                assert_eq!(hw.take_counts(), AccessCounts::pmc_pmd(1, 2, 0, 0));
            }
            hw.inner_mut().inject(Event::new(0x12, 0, n));
            if !frozen {
                *(if which == 0 { &mut want_a } else { &mut want_b }) += n;
            }
            host += n;
            if frozen {
                ctx.write_pmc0(&mut hw, 0).unwrap();
            }
            hw.clear();
            ctx.save(&mut hw).unwrap();
            assert_eq!(
                hw.take_counts(),
                AccessCounts::pmc_pmd(1, 1, 1, 0),
                "PMC0 read, frozen, PMD4 read"
            );
            // Frozen between the guests: nothing counts, not even the host.
            hw.inner_mut().inject(Event::new(0x12, 0, 5));
        }
    }
    assert_eq!(a.pmd(4), want_a);
    assert_eq!(b.pmd(4), want_b);
    assert_eq!(
        hw.read_pmd(7).unwrap() & G.counter_mask(),
        host,
        "the host counts while a guest runs, frozen or not"
    );
}

/// A host counter's pending overflow bit survives a guest's switch, and a
/// guest's own overflow bit goes with its context.
#[test]
fn overflow_bits_belong_to_their_counters() {
    let mut model = ItaniumModel::new(ModelGeneration::Itanium2);
    model.set_psr(Psr::MONITORING);
    let mut hw: Recording<ItaniumModel, 64> = Recording::new(model);
    let mask = G.counter_mask();
    // With `oi`: an overflow sets its PMC0 bit and freezes the PMU (SDM
    // Vol. 2 7.2.2).
    let c7 = CounterPmc::from_bits_truncate(Counter::new(G, 7).unwrap(), cycles_pmc(7));
    hw.write_pmc(7, c7.with_overflow_interrupt(true).bits())
        .unwrap();
    hw.write_pmd(7, mask - 2).unwrap();
    hw.write_pmc(0, 0).unwrap();
    let mut ctx = PmuContext::new(G);
    assert!(ctx.record_pmc(4, cycles_pmc(4)));
    assert!(ctx.record_pmd(4, mask - 4));
    assert!(ctx.record_pmc(0, 0));
    ctx.restore(&mut hw).unwrap();
    // The host's counter 7 overflows after 3 cycles and freezes the PMU
    // (SDM Vol. 2 7.2); 2 more reach neither.
    hw.inner_mut().inject(Event::new(0x12, 0, 5));
    ctx.save(&mut hw).unwrap();
    let bit = |n: u8| 1u64 << n;
    let pmc0 = hw.read_pmc(0).unwrap();
    assert_ne!(pmc0 & bit(7), 0, "the host's overflow bit stays in the PMU");
    assert_eq!(ctx.pmc0() & bit(7), 0, "and is not the guest's");
    assert_eq!(
        ctx.pmd(4) & mask,
        mask - 1,
        "the guest's counter froze with the PMU"
    );
    // Restoring another context keeps the host's bit pending.
    let other = PmuContext::new(G);
    other.restore(&mut hw).unwrap();
    assert_ne!(hw.read_pmc(0).unwrap() & bit(7), 0);
}

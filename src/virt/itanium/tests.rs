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
/// sees everything, and each switch touches only what is in use.
#[test]
fn world_switch_under_the_freeze() {
    let mut model = ItaniumModel::new(ModelGeneration::Itanium2);
    model.set_psr(Psr::MONITORING);
    let mut hw: Recording<ItaniumModel, 64> = Recording::new(model);
    // The host's counter 7 counts cycles throughout.
    hw.write_pmc(7, cycles_pmc(7)).unwrap();
    hw.write_pmc(0, 0).unwrap();
    let guest = || {
        let mut ctx = PmuContext::new();
        assert!(ctx.record_pmc(4, cycles_pmc(4)));
        assert!(ctx.record_pmd(4, 0));
        assert!(ctx.record_pmc(0, 0), "the guest unfroze its PMU");
        ctx
    };
    let (mut a, mut b) = (guest(), guest());
    let (mut want_a, mut want_b, mut host) = (0u64, 0u64, 0u64);
    for round in 0..1000u64 {
        for (ctx, want, n) in [
            (&mut a, &mut want_a, 10 + round % 7),
            (&mut b, &mut want_b, 3 + round % 2),
        ] {
            hw.clear();
            ctx.restore(&mut hw).unwrap();
            assert_eq!(
                hw.take_counts(),
                AccessCounts::pmc_pmd(0, 3, 0, 1),
                "fr, PMC4, PMD4, PMC0 last"
            );
            hw.inner_mut().inject(Event::new(0x12, 0, n));
            *want += n;
            host += n;
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
        "the host counts while a guest runs"
    );
}

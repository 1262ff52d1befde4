//! The Itanium virtualisation support against the Itanium 2 model (a test
//! instrument written from the manuals): the guest's PMC and PMD writes as
//! perfmon treats them, and the world switch's exact traffic and
//! isolation. Counts and captures come from the model.

use super::*;
use crate::access::{AccessCounts, Recording};
use crate::arch::itanium::Counter;
use crate::arch::itanium::CounterPmc;
use crate::arch::itanium::ear::{DearConfig, LatencyFilter};
use crate::arch::itanium::{EventCode, Plm};
use crate::model::itanium::{
    Capture, DataMiss, Event, Generation as ModelGeneration, ItaniumModel, Psr,
};

mod isolation;

const G: Generation = Generation::Itanium2;
/// The Itanium 2 PMC4 power enable (bit 23), which gates every counter.
const POWER: u64 = 1 << 23;

fn policy() -> GuestPolicy {
    GuestPolicy {
        generation: G,
        host_pmcs: RegSet::single(7),
    }
}

/// PMC `n` counting CPU cycles (12H) at every privilege level.
fn cycles_pmc(n: u8) -> u64 {
    let c = Counter::new(G, n).unwrap();
    CounterPmc::new(c, EventCode::new(G, 0x12).unwrap())
        .unwrap()
        .with_plm(Plm::ALL)
        .with_privileged(true)
        .bits()
}

/// The model playing the host's Itanium 2, monitoring on, with the host's
/// counter 7 counting cycles.
fn hardware() -> Recording<ItaniumModel, 64> {
    let mut model = ItaniumModel::new(ModelGeneration::Itanium2);
    model.set_psr(Psr::MONITORING);
    let mut hw = Recording::new(model);
    hw.write_pmc(4, POWER).unwrap();
    hw.write_pmc(7, cycles_pmc(7)).unwrap();
    hw.write_pmc(0, 0).unwrap();
    hw
}

/// A guest's PMC write while its context is loaded, as the VMM handles it.
fn guest_pmc(
    v: &mut GuestValidator,
    ctx: &mut PmuContext,
    hw: &mut Recording<ItaniumModel, 64>,
    pmc: u8,
    value: u64,
) {
    match check_pmc_write(v, &policy(), pmc, value) {
        PmcWrite::Apply(w) => ctx.write_pmc(hw, pmc, w).unwrap(),
        PmcWrite::Virtual => {
            ctx.take_overflows(hw).unwrap();
            ctx.write_pmc0(hw, value).unwrap();
        }
        PmcWrite::Ignore(f) => panic!("PMC{pmc} {value:#x}: {f}"),
    }
}

#[test]
fn guest_pmc_writes_are_treated_as_perfmon_treats_them() {
    let p = policy();
    let mut v = GuestValidator::new(G);
    assert_eq!(
        check_pmc_write(&mut v, &p, 5, cycles_pmc(5)),
        PmcWrite::Apply(cycles_pmc(5))
    );
    assert_eq!(
        check_pmc_write(&mut v, &p, 0, 1),
        PmcWrite::Virtual,
        "PMC0: virtual"
    );
    // A counter the host keeps, a PMC the generation lacks, an event the
    // catalog does not have: dropped, no fault.
    assert_eq!(
        check_pmc_write(&mut v, &p, 7, cycles_pmc(7)),
        PmcWrite::Ignore(GuestRefusal::HostOwned { reg: 7 })
    );
    assert_eq!(
        check_pmc_write(&mut v, &p, 200, 0),
        PmcWrite::Ignore(GuestRefusal::Pmc(PmcError::NotImplemented { pmc: 200 }))
    );
    assert!(matches!(
        check_pmc_write(&mut v, &p, 5, cycles_pmc(5) & !(0xFF << 8) | 0x7F << 8),
        PmcWrite::Ignore(GuestRefusal::Pmc(PmcError::UnknownEvent { pmc: 5, .. }))
    ));
    // A reserved bit gets its power-up value (pfm_mck_reserved), the
    // Itanium 2 PMC4 power enable is forced on (pfm_mck_pmc_check), and
    // the disputed PMC12 bits 5:4 are cleared.
    assert_eq!(
        check_pmc_write(&mut v, &p, 5, cycles_pmc(5) | 1 << 63),
        PmcWrite::Apply(cycles_pmc(5))
    );
    assert_eq!(
        check_pmc_write(&mut v, &p, 4, cycles_pmc(4) & !POWER),
        PmcWrite::Apply(cycles_pmc(4) | POWER)
    );
    let btb = 0xF | 0b11 << 4;
    assert_eq!(check_pmc_write(&mut v, &p, 12, btb), PmcWrite::Apply(0xF));
    let mut m = ItaniumModel::new(ModelGeneration::Itanium2);
    assert!(m.write_pmc(12, btb).is_err(), "the model: bits 5:4 ignored");
    assert!(m.write_pmc(12, 0xF).is_ok());
    // PMDs: a counter keeps its 47 bits, an unimplemented or host PMD is
    // read as 0 and its writes dropped.
    assert_eq!(check_pmd_read(&p, 4), Ok(()));
    assert_eq!(
        check_pmd_write(&p, 4, u64::MAX),
        PmdWrite::Apply(G.counter_mask())
    );
    assert_eq!(
        check_pmd_read(&p, 7),
        Err(GuestRefusal::HostOwned { reg: 7 })
    );
    assert_eq!(
        check_pmd_write(&p, 63, 1),
        PmdWrite::Ignore(GuestRefusal::NoSuchPmd { pmd: 63 })
    );
    assert_eq!(check_pmd_write(&p, 3, u64::MAX), PmdWrite::Apply(0xFFFF));
    // A host EAR keeps its PMDs too.
    let ear = GuestPolicy {
        generation: G,
        host_pmcs: RegSet::single(11),
    };
    for pmd in [2, 3, 17] {
        assert_eq!(
            check_pmd_read(&ear, pmd),
            Err(GuestRefusal::HostOwned { reg: pmd })
        );
    }
    assert_eq!(check_pmd_read(&ear, 11), Ok(()), "PMD11 is a BTB record");
}

/// Itanium: a guest's PMC5 counting cycles and its D-EAR's
/// capture stay its own. Before the fix the switch left them programmed
/// and filled: the other guest read the first one's captured data address
/// and a counter that went on counting its cycles, and the first one's
/// capture was lost.
#[test]
fn a_switched_out_guest_counts_and_captures_nothing_and_shows_nothing() {
    let p = policy();
    let mut hw = hardware();
    scrub_all(&p, &mut hw).unwrap();
    let (mut va, mut vb) = (GuestValidator::new(G), GuestValidator::new(G));
    let (mut a, mut b) = (PmuContext::new(G), PmuContext::new(G));
    a.restore(&mut hw).unwrap();
    guest_pmc(&mut va, &mut a, &mut hw, 5, cycles_pmc(5));
    let dear = DearConfig::cache_misses(G, LatencyFilter::AtLeast4)
        .unwrap()
        .with_plm(Plm::ALL)
        .bits();
    guest_pmc(&mut va, &mut a, &mut hw, 11, dear);
    guest_pmc(&mut va, &mut a, &mut hw, 0, 0);
    hw.inner_mut().inject(Event::new(0x12, 0, 100));
    assert_eq!(
        hw.inner_mut()
            .data_miss(DataMiss::cache(0x6000_0040, 0x4000_0010, 1, 40)),
        Capture::Captured
    );
    let captured = hw.read_pmd(2).unwrap();
    assert_eq!(captured, 0x6000_0040);
    assert_eq!(a.save(&mut hw).unwrap(), CounterSet::EMPTY);
    a.scrub(&mut hw).unwrap();
    b.restore(&mut hw).unwrap();
    guest_pmc(&mut vb, &mut b, &mut hw, 0, 0);
    hw.inner_mut().inject(Event::new(0x12, 0, 50));
    hw.inner_mut()
        .data_miss(DataMiss::cache(0x7000_0080, 0x4000_0020, 0, 40));
    for pmd in [2, 3, 5, 17] {
        assert_eq!(check_pmd_read(&p, pmd), Ok(()));
        assert_eq!(hw.read_pmd(pmd).unwrap(), 0, "guest B reads PMD{pmd}");
    }
    assert_eq!(b.read_pmc(5), G.pmc(5).unwrap().default);
    assert_eq!(b.read_pmc(11), G.pmc(11).unwrap().default);
    b.save(&mut hw).unwrap();
    b.scrub(&mut hw).unwrap();
    a.restore(&mut hw).unwrap();
    assert_eq!(hw.read_pmd(5).unwrap() & G.counter_mask(), 100);
    assert_eq!(hw.read_pmd(2).unwrap(), captured, "A's capture is back");
    assert_eq!(a.read_pmc(11), dear);
    // The host's counter 7 counted every cycle.
    assert_eq!(hw.read_pmd(7).unwrap() & G.counter_mask(), 150);
}

/// A guest's counter overflow with `oi` freezes the whole PMU; the VMM's
/// interrupt handler makes it the guest's virtual freeze and unfreezes, so
/// the host's counter counts on; the guest's PMC reads show its own
/// values (plm intact), its PMC0 its own overflow bit and freeze; the next
/// guest sees none of it.
#[test]
fn a_guest_overflow_freezes_only_the_guest() {
    let p = policy();
    let mut hw = hardware();
    scrub_all(&p, &mut hw).unwrap();
    let mut va = GuestValidator::new(G);
    let (mut a, mut b) = (PmuContext::new(G), PmuContext::new(G));
    a.restore(&mut hw).unwrap();
    let oi = CounterPmc::from_bits_truncate(Counter::new(G, 5).unwrap(), cycles_pmc(5))
        .with_overflow_interrupt(true)
        .bits();
    guest_pmc(&mut va, &mut a, &mut hw, 5, oi);
    a.write_pmd(&mut hw, 5, G.counter_mask() - 9).unwrap();
    guest_pmc(&mut va, &mut a, &mut hw, 0, 0);
    let d = hw.inner_mut().inject(Event::new(0x12, 0, 30));
    assert!(d.froze && d.counted_cycles == 10, "{d:?}");
    assert!(hw.inner_mut().take_interrupt().is_some());
    assert_eq!(a.take_overflows(&mut hw).unwrap(), CounterSet::single(5));
    assert_eq!(a.pmc0(), 1 << 5 | 1, "its overflow bit and its freeze");
    assert_eq!(a.read_pmc(0), 1 << 5 | 1);
    assert_eq!(a.read_pmc(5), oi, "its own value, not the hardware's plm 0");
    assert_eq!(hw.read_pmc(5).unwrap() & 0xF, 0, "plm held at 0");
    assert_eq!(hw.read_pmc(0).unwrap(), 0, "the PMU unfrozen, no bit left");
    hw.inner_mut().inject(Event::new(0x12, 0, 20));
    assert_eq!(hw.read_pmd(5).unwrap() & G.counter_mask(), 0, "frozen");
    assert_eq!(
        hw.read_pmd(7).unwrap() & G.counter_mask(),
        30,
        "the host lost the 20 cycles after the freeze, counted the rest"
    );
    assert_eq!(a.save(&mut hw).unwrap(), CounterSet::EMPTY, "taken already");
    a.scrub(&mut hw).unwrap();
    assert_eq!(hw.read_pmc(0).unwrap(), 0, "unfrozen between guests");
    b.restore(&mut hw).unwrap();
    assert_eq!(b.read_pmc(0), 1, "B's own power-up PMC0");
    assert_eq!(hw.read_pmc(0).unwrap(), 0);
    // A unfreezes its PMU: its counter counts again.
    b.save(&mut hw).unwrap();
    b.scrub(&mut hw).unwrap();
    a.restore(&mut hw).unwrap();
    guest_pmc(&mut va, &mut a, &mut hw, 0, 0);
    hw.inner_mut().inject(Event::new(0x12, 0, 4));
    assert_eq!(hw.read_pmd(5).unwrap() & G.counter_mask(), 4);
}

/// An overflow not yet taken when the guest leaves is taken by save: the
/// interrupt is the guest's, and the host's PMU is not left frozen.
#[test]
fn an_overflow_at_the_switch_is_the_guests() {
    let p = policy();
    let mut hw = hardware();
    scrub_all(&p, &mut hw).unwrap();
    let mut va = GuestValidator::new(G);
    let mut a = PmuContext::new(G);
    a.restore(&mut hw).unwrap();
    let oi = CounterPmc::from_bits_truncate(Counter::new(G, 6).unwrap(), cycles_pmc(6))
        .with_overflow_interrupt(true)
        .bits();
    guest_pmc(&mut va, &mut a, &mut hw, 6, oi);
    a.write_pmd(&mut hw, 6, G.counter_mask()).unwrap();
    guest_pmc(&mut va, &mut a, &mut hw, 0, 0);
    hw.inner_mut().inject(Event::new(0x12, 0, 1));
    assert_eq!(hw.read_pmc(0).unwrap(), 1 << 6 | 1);
    assert_eq!(a.save(&mut hw).unwrap(), CounterSet::single(6));
    assert_eq!(a.pmc0(), 1 << 6 | 1);
    a.scrub(&mut hw).unwrap();
    assert_eq!(hw.read_pmc(0).unwrap(), 0, "no guest bit, unfrozen");
    hw.inner_mut().inject(Event::new(0x12, 0, 5));
    assert_eq!(hw.read_pmd(7).unwrap() & G.counter_mask(), 6);
}

/// Two guests count cycles on PMD4 through the world switch, 1,000 times
/// each, beside the host's PMD7: each count is exactly its own, the host's
/// counts whenever a guest runs, and each switch touches only what is in
/// use. Guest A freezes its own PMU half of the time: its counter stops,
/// the host's does not.
#[test]
fn world_switch_under_the_freeze() {
    let p = policy();
    let mut hw = hardware();
    scrub_all(&p, &mut hw).unwrap();
    let guest = || {
        let mut ctx = PmuContext::new(G);
        assert!(ctx.record_pmc(4, cycles_pmc(4) | POWER));
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
                assert_eq!(hw.take_counts(), AccessCounts::pmc_pmd(0, 1, 0, 0), "PMC4");
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
            ctx.scrub(&mut hw).unwrap();
            assert_eq!(
                hw.take_counts(),
                AccessCounts::pmc_pmd(1, 2, 0, 1),
                "PMC4 and PMD4 scrubbed, PMC0 unfrozen"
            );
            // Between the guests the host counts on.
            hw.inner_mut().inject(Event::new(0x12, 0, 5));
            host += 5;
        }
    }
    assert_eq!(a.pmd(4) & G.counter_mask(), want_a);
    assert_eq!(b.pmd(4) & G.counter_mask(), want_b);
    assert_eq!(
        hw.read_pmd(7).unwrap() & G.counter_mask(),
        host,
        "the host counts while a guest runs, frozen or not, and between them"
    );
}

/// A host counter's pending overflow bit survives a guest's switch, and a
/// guest's own overflow bit goes with its context.
#[test]
fn overflow_bits_belong_to_their_counters() {
    let mut hw = hardware();
    let mask = G.counter_mask();
    // With `oi`: an overflow sets its PMC0 bit and freezes the PMU (SDM
    // Vol. 2 7.2.2).
    let c7 = CounterPmc::from_bits_truncate(Counter::new(G, 7).unwrap(), cycles_pmc(7));
    hw.write_pmc(7, c7.with_overflow_interrupt(true).bits())
        .unwrap();
    hw.write_pmd(7, mask - 2).unwrap();
    let mut ctx = PmuContext::new(G);
    assert!(ctx.record_pmc(4, cycles_pmc(4) | POWER));
    assert!(ctx.record_pmd(4, mask - 4));
    assert!(ctx.record_pmc(0, 0));
    ctx.restore(&mut hw).unwrap();
    // The host's counter 7 overflows after 3 cycles and freezes the PMU
    // (SDM Vol. 2 7.2); 2 more reach neither.
    hw.inner_mut().inject(Event::new(0x12, 0, 5));
    assert_eq!(ctx.save(&mut hw).unwrap(), CounterSet::EMPTY);
    let bit = |n: u8| 1u64 << n;
    let pmc0 = hw.read_pmc(0).unwrap();
    assert_ne!(pmc0 & bit(7), 0, "the host's overflow bit stays in the PMU");
    assert_eq!(ctx.pmc0() & bit(7), 0, "and is not the guest's");
    assert_eq!(
        ctx.pmd(4) & mask,
        mask - 1,
        "the guest's counter froze with the PMU"
    );
    ctx.scrub(&mut hw).unwrap();
    assert_eq!(
        hw.read_pmc(0).unwrap(),
        bit(7) | 1,
        "frozen by the host's overflow: it stays frozen for the host"
    );
    // Restoring another context keeps the host's bit pending.
    let other = PmuContext::new(G);
    other.restore(&mut hw).unwrap();
    assert_eq!(hw.read_pmc(0).unwrap(), bit(7) | 1);
}

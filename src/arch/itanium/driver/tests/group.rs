//! Groups on Itanium: started, stopped and read under the PMC0.fr freeze,
//! with the exact traffic, and on a backend in which every access takes
//! time, one snapshot. Counts come from the model.

use super::*;
use crate::counter::{Group, GroupError};

/// Three counters of cycles, configured and grouped.
fn three<O: Owner, R: crate::access::PmcPmdBackend>(
    d: &mut ItaniumDriver<'_, O, R>,
    c: Counters<O>,
    g: Generation,
) -> Group<Itanium, 3>
where
    R::Error: core::fmt::Debug,
{
    // On Montecito, two of its own counters (PMD12, PMD15) beside PMD4.
    let mut members = match c.montecito {
        Some(m) => [c.c4.erase(), m.c12.erase(), m.c15.erase()],
        None => [c.c4.erase(), c.c5.erase(), c.c6.erase()],
    };
    for m in &mut members {
        let n = m.index();
        m.configure(d, &cycles_on(g, n)).unwrap();
    }
    Group::new(members).unwrap()
}

#[test]
fn a_group_is_frozen_around_each_operation_with_exact_traffic() {
    let g = Generation::Itanium2;
    let state = crate::testing::itanium_pmu();
    let (mut d, c) = driver!(&state, g);
    let mut group = three(&mut d, c, g);
    d.regs().clear();
    group.start(&mut d).unwrap();
    let on = |n: u8| group_image(&group, n);
    assert_eq!(
        d.regs().log(),
        [
            Access::ReadPmc { pmc: 0, value: 0 },
            Access::WritePmc { pmc: 0, value: 1 },
            Access::WritePmc {
                pmc: 4,
                value: on(4)
            },
            Access::WritePmc {
                pmc: 5,
                value: on(5)
            },
            Access::WritePmc {
                pmc: 6,
                value: on(6)
            },
            Access::WritePmc { pmc: 0, value: 0 },
        ],
        "PMC0.fr set first and cleared last"
    );
    model(&mut d).inject(Event::new(CYCLES, 0, 1000));
    d.regs().clear();
    assert_eq!(group.read(&mut d).unwrap(), [1000; 3]);
    assert_eq!(d.regs().counts(), counts(1, 2, 3, 0), "PMC0 1r 2w, 3 PMDs");
    d.regs().clear();
    group.stop(&mut d).unwrap();
    assert_eq!(d.regs().counts(), counts(1, 5, 0, 0));
    assert!(!model(&mut d).frozen(), "thawed");
    assert!(
        group
            .members()
            .iter()
            .all(|m| m.state() == StateTag::Halted),
        "every member halted"
    );
    // Halted members resume together.
    group.start(&mut d).unwrap();
    model(&mut d).inject(Event::new(CYCLES, 0, 10));
    assert_eq!(group.read(&mut d).unwrap(), [1010; 3]);
    for mut m in group.into_members() {
        m.release(&mut d).unwrap();
    }
    assert!(d.claimed().is_empty());
}

fn group_image(group: &Group<Itanium, 3>, n: u8) -> u64 {
    group.members()[usize::from(n - 4)].programmed().pmc()
}

/// With time passing at every access, the freeze makes each operation one
/// instant: the members count exactly the same cycles, on every
/// generation (Itanium's halted counts are kept by the driver).
#[test]
fn a_group_read_is_one_snapshot_while_time_passes() {
    for g in [
        Generation::Itanium,
        Generation::Itanium2,
        Generation::Montecito,
    ] {
        let state = crate::testing::itanium_pmu();
        crate::owner!(Clocked);
        let (mut d, c) = timed::<Clocked>(&state, g);
        d.regs().clocked = true;
        let mut group = three(&mut d, c, g);
        group.start(&mut d).unwrap();
        let running = group.read(&mut d).unwrap();
        assert!(running[0] > 0, "{g:?}: time passed");
        assert_eq!(running, [running[0]; 3], "{g:?}: one snapshot");
        group.stop(&mut d).unwrap();
        let halted = group.read(&mut d).unwrap();
        assert_eq!(halted, [halted[0]; 3], "{g:?}: stopped at one instant");
        assert!(halted[0] > running[0], "{g:?}");
        // Started and read one by one instead, the members' windows
        // differ.
        let mut members = group.into_members();
        for m in &mut members {
            let n = m.index();
            m.release(&mut d).unwrap();
            m.configure(&mut d, &cycles_on(g, n)).unwrap();
        }
        for m in &mut members {
            m.enable(&mut d).unwrap();
        }
        let one_by_one = members.each_ref().map(|m| m.read(&mut d).unwrap());
        assert!(
            one_by_one[0] != one_by_one[1] && one_by_one[1] != one_by_one[2],
            "{g:?}: {one_by_one:?}"
        );
        for m in &mut members {
            m.release(&mut d).unwrap();
        }
        d.retire();
    }
}

/// A group refuses unclaimed or foreign members; start and stop bring
/// every member to their state, whatever state each is in.
#[test]
fn groups_check_their_members_and_reach_one_state() {
    let g = Generation::Itanium2;
    let state = crate::testing::itanium_pmu();
    let (mut d, c) = driver!(&state, g);
    let Err((e, members)) = Group::new([c.c4.erase(), c.c5.erase()]) else {
        panic!("an unclaimed member was accepted");
    };
    assert_eq!(e, GroupError::Unclaimed { counter: 4 });
    assert_eq!(
        e.to_string(),
        "counter 4 is not claimed: configure it first"
    );
    let [mut a, mut b] = members;
    a.configure(&mut d, &cycles_on(g, 4)).unwrap();
    b.configure(&mut d, &cycles_on(g, 5)).unwrap();
    b.enable(&mut d).unwrap();
    let mut group = Group::new([a, b]).unwrap();
    d.regs().clear();
    // Start brings the members not yet counting to Enabled: only counter 4
    // is written (inside the freeze).
    group.start(&mut d).unwrap();
    assert_eq!(d.regs().counts(), counts(1, 3, 0, 0));
    assert!(
        group
            .members()
            .iter()
            .all(|m| m.state() == StateTag::Enabled),
        "both count"
    );
    // So is a repeated stop: the second finds nothing counting.
    group.stop(&mut d).unwrap();
    d.regs().clear();
    group.stop(&mut d).unwrap();
    assert_eq!(d.regs().counts(), counts(1, 2, 0, 0), "the bracket only");
    // Another driver's group is refused by this driver.
    let other_state = crate::testing::itanium_pmu();
    let (mut other, oc) = driver!(&other_state, g);
    let mut theirs = [oc.c4.erase()];
    theirs[0].configure(&mut other, &cycles_on(g, 4)).unwrap();
    let mut theirs = Group::new(theirs).unwrap();
    assert!(matches!(
        theirs.read(&mut d),
        Err(ErasedError::ForeignHandle { counter: 4 })
    ));
    let [mine, _] = group.into_members();
    let [foreign] = theirs.into_members();
    let Err((e, _)) = Group::new([mine, foreign]) else {
        panic!("members of two drivers were grouped");
    };
    assert_eq!(e, GroupError::MixedOwners { counter: 4 });
}

/// A group stopped while a member's overflow is pending: the halt accounts
/// for it inside the freeze (no PMC0 access of its own), and the thaw
/// writes PMC0 back once, without the withdrawn bit; the period is counted
/// once and the other member keeps its count, on every generation.
#[test]
fn a_group_stop_with_a_pending_overflow_counts_it_once() {
    for g in Generation::ALL {
        let state = crate::testing::itanium_pmu();
        let (mut d, c) = driver!(&state, g);
        let (s4, s5) = (sa(g, 10), sa(g, 1000));
        let mut members = [c.c4.erase(), c.c5.erase()];
        members[0]
            .configure(&mut d, &cycles_on(g, 4).sampling(s4))
            .unwrap();
        members[1]
            .configure(&mut d, &cycles_on(g, 5).sampling(s5))
            .unwrap();
        let mut group = Group::new(members).unwrap();
        group.start(&mut d).unwrap();
        model(&mut d).inject(Event::new(CYCLES, 0, 10));
        assert!(model(&mut d).frozen(), "{g:?}: counter 4 overflowed");
        d.regs().clear();
        group.stop(&mut d).unwrap();
        let pmc0_writes = d
            .regs()
            .log()
            .iter()
            .filter(|a| matches!(a, Access::WritePmc { pmc: 0, .. }))
            .count();
        assert_eq!(pmc0_writes, 2, "{g:?}: the freeze and the thaw only");
        if g == Generation::Itanium {
            assert!(!model(&mut d).frozen(), "{g:?}: the overflow withdrawn");
        }
        if model(&mut d).take_interrupt().is_some() {
            handle_pmi(&state, d.regs(), &mut (), ENTRY, 0, |_| {}).unwrap();
        }
        assert_eq!(state.pmi().periods(4), 1, "{g:?}: one period, counted once");
        group.start(&mut d).unwrap();
        model(&mut d).inject(Event::new(CYCLES, 0, 4));
        let [v4, v5] = group.read(&mut d).unwrap();
        assert_eq!(s4.split(v4), (0, 4), "{g:?}");
        assert_eq!(s5.split(v5), (0, 14), "{g:?}");
        for mut m in group.into_members() {
            m.release(&mut d).unwrap();
        }
        d.retire();
    }
}

/// The model, where time passes with register accesses: with `clocked`,
/// `i` cycles elapse before access `i` (from 1; a rate that changes, so
/// that two windows of the same length at different times count
/// differently); `count` cycles just before access `at`; and accesses
/// refused from `fail_from` on.
#[derive(Debug)]
struct Timed {
    m: ItaniumModel,
    accesses: u64,
    clocked: bool,
    at: u64,
    count: u64,
    fail_from: u64,
}

impl Timed {
    fn access(&mut self) -> Result<(), <ItaniumModel as crate::access::PmcPmdAccess>::Error> {
        self.accesses += 1;
        if self.clocked {
            self.m.inject(Event::new(CYCLES, 0, self.accesses));
        }
        if self.accesses == self.at {
            self.m.inject(Event::new(CYCLES, 0, self.count));
        }
        if self.accesses >= self.fail_from {
            // Any refused access: PMC 200 is not implemented.
            return crate::access::PmcPmdAccess::read_pmc(&mut self.m, 200).map(|_| ());
        }
        Ok(())
    }
}

impl crate::access::PmcPmdAccess for Timed {
    type Error = <ItaniumModel as crate::access::PmcPmdAccess>::Error;
    fn read_pmc(&mut self, n: u8) -> Result<u64, Self::Error> {
        self.access()?;
        crate::access::PmcPmdAccess::read_pmc(&mut self.m, n)
    }
    fn write_pmc(&mut self, n: u8, value: u64) -> Result<(), Self::Error> {
        self.access()?;
        crate::access::PmcPmdAccess::write_pmc(&mut self.m, n, value)
    }
    fn read_pmd(&mut self, n: u8) -> Result<u64, Self::Error> {
        self.access()?;
        crate::access::PmcPmdAccess::read_pmd(&mut self.m, n)
    }
    fn write_pmd(&mut self, n: u8, value: u64) -> Result<(), Self::Error> {
        self.access()?;
        crate::access::PmcPmdAccess::write_pmd(&mut self.m, n, value)
    }
}

/// A driver of generation `g` on a [`Timed`] model (time still: set
/// `clocked`, `at` or `fail_from` through `regs()`).
fn timed<O: Owner>(
    state: &ItaniumPmu,
    g: Generation,
) -> (ItaniumDriver<'_, O, Timed>, Counters<O>) {
    let mut m = ItaniumModel::new(model_generation(g));
    m.set_psr(Psr::MONITORING);
    let t = Timed {
        m,
        accesses: 0,
        clocked: false,
        at: 0,
        count: 0,
        fail_from: u64::MAX,
    };
    ItaniumDriver::take(t, g, state).unwrap()
}

/// A sampling counter outside the group overflows between the freeze's
/// PMC0 read and its PMC0 write, which would wipe its overflow bit: the
/// freeze finds it wrapped and puts the bit back, so its interrupt samples
/// it once and re-arms it, on every generation.
#[test]
fn an_overflow_racing_the_freeze_is_not_lost() {
    for g in Generation::ALL {
        let state = crate::testing::itanium_pmu();
        crate::owner!(Racing);
        let (mut d, c) = timed::<Racing>(&state, g);
        let s = sa(g, 10);
        let c4 = c.c4.configure(&mut d, &cycles_on(g, 4).sampling(s));
        let _c4 = c4.unwrap().enable(&mut d).unwrap();
        let mut member = [c.c5.erase()];
        member[0].configure(&mut d, &cycles_on(g, 5)).unwrap();
        let mut group = Group::new(member).unwrap();
        group.start(&mut d).unwrap();
        model_of(&mut d).inject(Event::new(CYCLES, 0, 5));
        // The freeze: access 1 reads PMC0, access 2 writes it; counter 4
        // overflows just before the write.
        let t = d.regs();
        (t.at, t.count) = (t.accesses + 2, 5);
        let [v] = group.read(&mut d).unwrap();
        assert_eq!(v, 10, "{g:?}: the member counted until the freeze");
        assert!(model_of(&mut d).frozen(), "{g:?}: the overflow kept");
        assert!(model_of(&mut d).take_interrupt().is_some());
        let mut samples = Vec::new();
        handle_pmi(&state, d.regs(), &mut (), ENTRY, 0, |x| samples.push(x)).unwrap();
        assert_eq!((samples.len(), state.pmi().periods(4)), (1, 1), "{g:?}");
        assert!(!model_of(&mut d).frozen(), "{g:?}");
        model_of(&mut d).inject(Event::new(CYCLES, 0, 3));
        assert_eq!(
            s.split(_c4.read(&mut d).unwrap()),
            (0, 3),
            "{g:?}: re-armed"
        );
        d.retire();
    }
}

/// A thaw whose PMC0 write fails leaves the driver knowing the PMU frozen:
/// the group reports the thaw's error, and the next thaw writes PMC0.
#[test]
fn a_failed_thaw_is_reported_and_retried() {
    let g = Generation::Itanium2;
    let state = crate::testing::itanium_pmu();
    crate::owner!(Failing);
    let (mut d, c) = timed::<Failing>(&state, g);
    let mut member = [c.c4.erase()];
    member[0].configure(&mut d, &cycles_on(g, 4)).unwrap();
    let mut group = Group::new(member).unwrap();
    // Start: PMC0 read, PMC0 write, PMC4 write, then the thaw fails.
    let t = d.regs();
    t.fail_from = t.accesses + 4;
    assert!(matches!(group.start(&mut d), Err(ErasedError::Driver(_))));
    assert!(model_of(&mut d).frozen(), "still frozen");
    d.regs().fail_from = u64::MAX;
    counter::Driver::thaw(&mut d, crate::sealed::TOKEN).unwrap();
    assert!(!model_of(&mut d).frozen(), "the retried thaw unfroze it");
    d.retire();
}

/// Nested brackets freeze once and thaw once.
#[test]
fn nested_freezes_thaw_at_the_outermost() {
    let g = Generation::Itanium2;
    let state = crate::testing::itanium_pmu();
    let (mut d, _c) = driver!(&state, g);
    counter::Driver::freeze(&mut d, crate::sealed::TOKEN).unwrap();
    counter::Driver::freeze(&mut d, crate::sealed::TOKEN).unwrap();
    counter::Driver::thaw(&mut d, crate::sealed::TOKEN).unwrap();
    assert!(model(&mut d).frozen(), "the inner thaw keeps it frozen");
    counter::Driver::thaw(&mut d, crate::sealed::TOKEN).unwrap();
    assert!(!model(&mut d).frozen());
    assert_eq!(d.regs().counts(), counts(1, 2, 0, 0));
    d.retire();
}

fn model_of<'a, O: Owner>(d: &'a mut ItaniumDriver<'_, O, Timed>) -> &'a mut ItaniumModel {
    &mut d.regs().m
}

//! Groups on NetBurst, which has no global enable (SDM 18.15): the
//! members' CCCRs written back to back, started and stopped in the same
//! order, with the exact traffic; on a backend in which every access takes
//! time, what that consistency is, measured. Counts come from the model.

use super::*;
use crate::access::Access;
use crate::counter::Group;

/// Three events in three ESCR groups' worth of counters: the
/// FSB_ESCR0 event on counter 0, FSB_ESCR1's on counter 2, CRU_ESCR0's on
/// counter 12 (Table 18-63), and the model's view of each.
const BNR: EventKind = EventKind::new(EscrGroup::Fsb, 0x08, 1);

fn members() -> [(u8, CounterConfig, EventKind); 3] {
    [
        (0, running(), RUNNING),
        (
            2,
            CounterConfig::counting(spec("bnr:BIT0:k"), Escr::FsbEscr1),
            BNR,
        ),
        (
            12,
            CounterConfig::counting(spec("instr_retired:NBOGUSNTAG:k"), Escr::CruEscr0),
            INSTR,
        ),
    ]
}

/// The model, where time passes with every access: before access `i`
/// (from 1), `i` of each member's events occur (a rate that changes, so
/// that windows of one length at different times count differently).
#[derive(Debug)]
struct Clocked {
    m: NetBurstModel,
    accesses: u64,
}

impl Clocked {
    fn tick(&mut self) {
        self.accesses += 1;
        for (_, _, kind) in members() {
            self.m
                .inject(kind.on(ModelLp::T0, Privilege::Os, self.accesses));
        }
    }
}

impl crate::access::MsrAccess for Clocked {
    type Error = <NetBurstModel as crate::access::MsrAccess>::Error;
    fn read_msr(&mut self, msr: u32) -> Result<u64, Self::Error> {
        self.tick();
        crate::access::MsrAccess::read_msr(&mut self.m, msr)
    }
    fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Self::Error> {
        self.tick();
        crate::access::MsrAccess::write_msr(&mut self.m, msr, value)
    }
    fn rdpmc(&mut self, index: u32) -> Result<u64, Self::Error> {
        self.tick();
        crate::access::MsrAccess::rdpmc(&mut self.m, index)
    }
}

/// The group of the three members, configured, from `c`'s handles.
fn group<O: Owner, M: crate::access::MsrBackend>(
    d: &mut NetBurstDriver<'_, O, M>,
    c: Counters<O>,
) -> Group<NetBurst, 3> {
    let [h0, _, h2, _, _, _, _, _, _, _, _, _, h12, ..] = c.erase_all();
    let mut group = [h0, h2, h12];
    for (h, (_, config, _)) in group.iter_mut().zip(members()) {
        h.configure(d, &config).unwrap();
    }
    Group::new(group).unwrap()
}

#[test]
fn a_group_writes_its_cccrs_back_to_back_in_member_order() {
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    let mut g = group(&mut d, c);
    d.msr().clear();
    g.start(&mut d).unwrap();
    let cccrs = |log: &[Access]| -> Vec<u32> {
        log.iter()
            .map(|a| match *a {
                Access::WriteMsr { msr, .. } => msr,
                ref other => panic!("not a CCCR write: {other:?}"),
            })
            .collect()
    };
    assert_eq!(cccrs(d.msr().log()), [0x360, 0x362, 0x36C], "start");
    for (_, _, kind) in members() {
        inject(&mut d, kind, 100);
    }
    d.msr().clear();
    assert_eq!(g.read(&mut d).unwrap(), [100; 3]);
    assert_eq!(d.msr().counts(), counts(0, 0, 3), "three RDPMCs");
    d.msr().clear();
    g.stop(&mut d).unwrap();
    assert_eq!(
        cccrs(d.msr().log()),
        [0x360, 0x362, 0x36C],
        "stop: same order"
    );
    for mut m in g.into_members() {
        m.release(&mut d).unwrap();
    }
    assert!(d.claimed().is_empty());
}

/// What "together" is without a global enable, measured with time passing
/// at every access: member `i` is enabled by access `a + i` and stopped by
/// access `s + i`, so each member counts over a window of the same length
/// (`s - a` accesses) shifted by one access from the previous member's.
/// At a constant rate the members count alike; at this changing rate each
/// member counts the window's rate change more than the one before. A read
/// while running is skewed the same way.
#[test]
fn a_group_counts_equal_length_windows_shifted_by_one_access() {
    crate::owner!(Timed);
    let state = crate::testing::netburst_pmu();
    let m = NetBurstModel::new(Config::prescott_ht());
    let info = cpu(&m);
    let clocked = Clocked { m, accesses: 0 };
    let (mut d, c) = NetBurstDriver::<Timed, _>::take(clocked, &info, &state).unwrap();
    let mut g = group(&mut d, c);
    // Events at accesses a+i+1 ..= e+i, for member i.
    let window = |from: u64, to: u64, i: u64| (from + i + 1..=to + i).sum::<u64>();
    let a = d.msr().accesses + 1;
    g.start(&mut d).unwrap();
    let r = d.msr().accesses + 1;
    let running = g.read(&mut d).unwrap();
    assert_eq!(
        running,
        [0, 1, 2].map(|i| window(a, r, i)),
        "read while running"
    );
    let s = d.msr().accesses + 1;
    g.stop(&mut d).unwrap();
    let halted = g.read(&mut d).unwrap();
    assert_eq!(halted, [0, 1, 2].map(|i| window(a, s, i)), "stopped");
    assert!(halted[0] < halted[1] && halted[1] < halted[2], "{halted:?}");
    for mut m in g.into_members() {
        m.release(&mut d).unwrap();
    }
    let _ = d.retire();
}

/// A cascaded counter counts with its pair: a group refuses it (resuming it
/// after a group stop would end its cascade).
#[test]
fn a_cascaded_counter_is_not_grouped() {
    let state = crate::testing::netburst_pmu();
    let (mut d, c) = driver!(&state, Config::prescott_ht());
    let [mut c0, _, mut c2, ..] = c.erase_all();
    c0.configure(&mut d, &running()).unwrap();
    c0.enable(&mut d).unwrap();
    let high = CounterConfig {
        escr: Escr::FsbEscr1,
        ..running()
    };
    c2.configure(&mut d, &high).unwrap();
    c2.cascade_from(&c0, &mut d).unwrap();
    let Err((e, [mut c0, mut c2])) = Group::new([c0, c2]) else {
        panic!("a cascaded counter was grouped");
    };
    assert_eq!(e, crate::counter::GroupError::Cascaded { counter: 2 });
    c2.release(&mut d).unwrap();
    c0.release(&mut d).unwrap();
}

//! The machinery on a toy architecture of its own (four counters, one
//! cascade pair 0 -> 1), to show it is architecture-independent and that
//! each transition calls the driver exactly once, with the right operation.

use super::*;
use std::vec::Vec;

enum Toy {}

impl Sealed for Toy {}
impl Sealed for Log {}

impl Arch for Toy {
    const NAME: &'static str = "toy";
    const COUNTERS: u8 = 4;
    type Programmed = u32;
    const UNPROGRAMMED: u32 = 0;
    fn can_cascade(from: u8, to: u8) -> bool {
        (from, to) == (0, 1)
    }
}

impl Cascade<0, 1> for Toy {}

#[derive(Default)]
struct Log(Vec<(&'static str, u8, u32)>, bool);

crate::owner!(ToyPmu);

impl DriverOf<Toy, ToyPmu> for Log {}

impl Driver<Toy> for Log {
    type Owner = ToyPmu;
    type Config = u32;
    type Error = &'static str;
    fn program(&mut self, _: Token, n: u8, c: &u32) -> Result<u32, &'static str> {
        if self.1 {
            return Err("refused");
        }
        self.0.push(("program", n, *c));
        Ok(*c + 1)
    }
    fn start(&mut self, _: Token, n: u8, p: &u32) -> Result<(), &'static str> {
        self.0.push(("start", n, *p));
        Ok(())
    }
    fn stop(&mut self, _: Token, n: u8, p: &u32) -> Result<(), &'static str> {
        self.0.push(("stop", n, *p));
        Ok(())
    }
    fn cascade(&mut self, _: Token, n: u8, from: u8, p: &u32) -> Result<(), &'static str> {
        self.0.push(("cascade", n, *p + 100 * u32::from(from)));
        Ok(())
    }
    fn read(&mut self, _: Token, n: u8, p: &u32) -> Result<u64, &'static str> {
        self.0.push(("read", n, *p));
        Ok(u64::from(*p) * 10)
    }
    fn overflow_rule(&self, n: u8) -> Option<crate::sampling::OverflowRule> {
        (n < 4).then_some(crate::sampling::OverflowRule {
            width: 32,
            pmi_delay: 0,
        })
    }
    fn release(&mut self, _: Token, n: u8, p: &u32) -> Result<(), &'static str> {
        self.0.push(("release", n, *p));
        Ok(())
    }
}

#[test]
fn every_transition_is_one_driver_call() {
    let mut d = Log::default();
    let c0 = Handle::<Toy, ToyPmu, 0, Unclaimed>::token()
        .configure(&mut d, &7)
        .unwrap();
    assert_eq!(c0.read(&mut d), Ok(80));
    let c0 = c0.enable(&mut d).unwrap();
    let c1 = Handle::<Toy, ToyPmu, 1, Unclaimed>::token()
        .configure(&mut d, &1)
        .unwrap();
    let c1 = c1.cascade_from(&c0, &mut d).unwrap();
    let c1 = c1.halt(&mut d).unwrap();
    let c1 = c1.resume(&mut d).unwrap();
    let _ = c1.release(&mut d).unwrap();
    let c0 = c0.halt(&mut d).unwrap();
    let _ = c0.release(&mut d).unwrap();
    assert_eq!(
        d.0,
        [
            ("program", 0, 7),
            ("read", 0, 8),
            ("start", 0, 8),
            ("program", 1, 1),
            ("cascade", 1, 2),
            ("stop", 1, 2),
            ("start", 1, 2),
            ("release", 1, 2),
            ("stop", 0, 8),
            ("release", 0, 8),
        ]
    );
}

#[test]
fn a_refused_transition_returns_the_unchanged_handle() {
    let mut d = Log(Vec::new(), true);
    let e = Handle::<Toy, ToyPmu, 2, Unclaimed>::token()
        .configure(&mut d, &3)
        .unwrap_err();
    assert_eq!(e.error, "refused");
    d.1 = false;
    let c = e.counter.configure(&mut d, &3).unwrap();
    assert_eq!(*c.programmed(), 4);
    let any = c.erase();
    assert_eq!((any.index(), any.state()), (2, StateTag::Configured));
    let c = Handle::<Toy, ToyPmu, 2, Enabled>::from_erased(any).unwrap_err();
    let c = Handle::<Toy, ToyPmu, 3, Configured>::from_erased(c).unwrap_err();
    assert!(Handle::<Toy, ToyPmu, 2, Configured>::from_erased(c).is_ok());
}

#[test]
fn erased_rules_match_the_typed_bounds() {
    use StateTag::*;
    let all = [Unclaimed, Configured, Enabled, Halted, Cascaded];
    let legal = |op: Operation| all.iter().filter(|s| op.legal_in(**s)).count();
    assert_eq!(legal(Operation::Configure), 1);
    assert_eq!(legal(Operation::Enable), 1);
    assert_eq!(legal(Operation::Halt), 2);
    assert_eq!(legal(Operation::Resume), 1);
    assert_eq!(legal(Operation::Cascade), 2);
    assert_eq!(legal(Operation::Read), 4);
    assert_eq!(legal(Operation::Release), 4);
    assert_eq!(legal(Operation::ClearOverflow), 4);
    let mut d = Log::default();
    let mut a = Handle::<Toy, ToyPmu, 2, state::Unclaimed>::token().erase();
    let mut b = Handle::<Toy, ToyPmu, 3, state::Unclaimed>::token().erase();
    a.configure(&mut d, &0).unwrap();
    b.configure(&mut d, &0).unwrap();
    assert_eq!(
        b.cascade_from(&a, &mut d),
        Err(ErasedError::NotCascadePair { from: 2, to: 3 })
    );
    assert_eq!(
        a.resume(&mut d),
        Err(ErasedError::Illegal {
            operation: Operation::Resume,
            state: Configured
        })
    );
    assert_eq!(d.0.len(), 2, "refused operations reach no register");
}

/// Auto traits, one rule (module documentation): a driver is `Send`
/// exactly when its register backend is, so the drivers over the models
/// are; the hardware backend is not, nor are handles (`tests/compile_fail.rs`:
/// `hardware_driver_is_not_send`, `handle_is_not_send`).
#[test]
fn drivers_over_models_are_send() {
    fn send<T: Send>() {}
    use crate::arch::archperf::driver::ArchPerfDriver;
    use crate::arch::itanium::driver::ItaniumDriver;
    use crate::arch::netburst::driver::NetBurstDriver;
    send::<NetBurstDriver<'static, ToyPmu, crate::model::netburst::NetBurstModel>>();
    send::<ArchPerfDriver<'static, ToyPmu, crate::model::archperf::ArchPerfModel>>();
    send::<ItaniumDriver<'static, ToyPmu, crate::model::itanium::ItaniumModel>>();
}

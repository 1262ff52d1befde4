//! The check both vendors' pass-through maps are held to: every PMU MSR has
//! a rule, and each direction that passes is one the guest checks accept
//! as the guest's own register.

use std::vec::Vec;

use crate::virt::archperf::{Intercept, MsrRule};
use crate::virt::x86::PMU_MSR_RANGES;

/// Every MSR of [`PMU_MSR_RANGES`] through `rule`: each has one, a read
/// that passes is `read_ok`, a write that passes `write_ok`. The MSRs with
/// a passing direction, lowest first; `what` names the guest in a failure.
pub(crate) fn passing(
    what: &str,
    rule: impl Fn(u32) -> Option<MsrRule>,
    read_ok: impl Fn(u32) -> bool,
    write_ok: impl Fn(u32) -> bool,
) -> Vec<u32> {
    let mut passing = Vec::new();
    for r in PMU_MSR_RANGES {
        for msr in r {
            let rule = rule(msr).unwrap_or_else(|| panic!("{what}: {msr:#x}: no rule"));
            let read = rule.read == Intercept::Pass;
            let write = rule.write == Intercept::Pass;
            assert!(
                !read || read_ok(msr),
                "{what}: {msr:#x}: reads pass, the checks refuse"
            );
            assert!(
                !write || write_ok(msr),
                "{what}: {msr:#x}: writes pass, the checks refuse"
            );
            if read || write {
                passing.push(msr);
            }
        }
    }
    passing.sort_unstable();
    passing
}

//! The D-EAR report: attribution, latencies, ordering and the exact text.

use super::*;
use crate::symbols::Function;
use pmu::arch::itanium::Slot;
use pmu::arch::itanium::ear::{InstructionAddress, TlbFill};
use std::string::ToString;

const APP_FNS: &[Function<'static>] = &[
    Function {
        name: "main",
        start: 0x4000_0000,
        end: 0x4000_0100,
    },
    Function {
        name: "walk_list",
        start: 0x4000_0100,
        end: 0x4000_0400,
    },
];
const SYMBOLS: &[LoadModule<'static>] = &[LoadModule {
    name: "app",
    start: 0x4000_0000,
    end: 0x4001_0000,
    functions: APP_FNS,
}];

fn cache(data: u64, ip: u64, latency: u16) -> DearSample {
    DearSample {
        valid: true,
        data_address: data,
        instruction: Some(InstructionAddress {
            bundle: ip,
            slot: Some(Slot::S1),
        }),
        event: DearEvent::CacheMiss {
            latency,
            latency_overflow: false,
        },
    }
}

#[test]
fn samples_go_to_the_function_of_the_instruction() {
    let mut r: DearReport<'_, 4, 8> = DearReport::new(SYMBOLS).with_sample_after(10);
    for (data, ip, lat) in [
        (0x6000_0040, 0x4000_0110, 120),
        (0x6000_0040, 0x4000_0110, 80),
        (0x6000_1000, 0x4000_0200, 400),
        (0x6000_0080, 0x4000_0010, 64),
        (0x7000_0000, 0x5000_0000, 90),
    ] {
        assert!(r.record(cache(data, ip, lat)));
    }
    let tlb = DearSample {
        event: DearEvent::TlbMiss {
            fill: Some(TlbFill::Hpw),
        },
        ..cache(0x6000_2000, 0x4000_0120, 0)
    };
    assert!(r.record(tlb));
    assert!(!r.record(DearSample {
        valid: false,
        ..tlb
    }));
    let walk = r.function("app", "walk_list").unwrap();
    assert_eq!(
        (walk.samples, walk.cache, walk.min, walk.max, walk.average()),
        (4, 3, 80, 400, Some(200))
    );
    assert_eq!(walk.fills.hpw, 1);
    assert_eq!(r.address(0x6000_0040).unwrap().samples, 2);
    assert_eq!(r.total().samples, 6);
    let expected = "\
dear measurement: sampled data cache, data TLB and ALAT misses (D-EAR)
Sampling: one in every 10 D-EAR captures, 6 samples

Function Summary
------------------------------------------------------------------------------
% Total  Cumulat  Sampled  Avg Lat  Max Lat L2TLB   HPW  Soft  ALAT  Function   Load Module
------------------------------------------------------------------------------
   66.7     66.7        4      200      400     0     1     0     0  walk_list  app
   16.7     83.3        1       64       64     0     0     0     0  main       app
   16.7    100.0        1       90       90     0     0     0     0  (unknown)  (unknown)
------------------------------------------------------------------------------
  100.0                 6      151      400     0     1     0     0  [total]

Function Details
------------------------------------------------------------------------------
walk_list [app]: 4 samples
 Sampled  Avg Lat  Max Lat L2TLB   HPW  Soft  ALAT  Data Address        Instruction
- - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -
       2      100      120     0     0     0     0  0x0000000060000040  0x0000000040000111
       1      400      400     0     0     0     0  0x0000000060001000  0x0000000040000201
       1        -        -     0     1     0     0  0x0000000060002000  0x0000000040000121
------------------------------------------------------------------------------
main [app]: 1 samples
 Sampled  Avg Lat  Max Lat L2TLB   HPW  Soft  ALAT  Data Address        Instruction
- - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -
       1       64       64     0     0     0     0  0x0000000060000080  0x0000000040000011
------------------------------------------------------------------------------
(unknown) [(unknown)]: 1 samples
 Sampled  Avg Lat  Max Lat L2TLB   HPW  Soft  ALAT  Data Address        Instruction
- - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -
       1       90       90     0     0     0     0  0x0000000070000000  0x0000000050000001
------------------------------------------------------------------------------
";
    assert_eq!(r.to_string(), expected);
}

#[test]
fn full_tables_are_counted_not_panicked() {
    let mut r: DearReport<'_, 1, 1> = DearReport::new(SYMBOLS);
    r.record(cache(0x6000_0000, 0x4000_0010, 10));
    r.record(cache(0x6000_0040, 0x4000_0110, 10));
    assert_eq!(
        r.not_tabulated(),
        DearNotTabulated {
            functions: 1,
            addresses: 1
        }
    );
    assert_eq!(r.total().samples, 2);
    let text = r.to_string();
    assert!(
        text.contains("Tables full, samples not tabulated: 1 by function (capacity 1), 1 by data address (capacity 1)"),
        "{text}"
    );
    let empty: DearReport<'_, 0, 0> = DearReport::new(&[]);
    assert!(empty.to_string().contains("Samples: 0"));
    assert_eq!(Latencies::ZERO.average(), None);
}

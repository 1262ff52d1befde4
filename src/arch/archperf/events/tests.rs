//! The event strings against `perf`'s own tables: every expected image
//! below is computed from Linux's sources, not from the parser's tables.
//!
//! * Names: `tools/perf/util/parse-events.l` (the generic hardware events
//!   and their aliases).
//! * What a name programs: `arch/x86/events/intel/core.c`,
//!   `intel_perfmon_event_map` (`umask << 8 | event`), and the `cpu` PMU's
//!   sysfs event `slots` (`EVENT_ATTR_STR(slots, ..., "event=0x00,umask=0x4")`).
//! * Where it counts: the same file's `FIXED_EVENT_CONSTRAINT`s (0x00c0 on
//!   fixed counter 0, 0x003c on 1, 0x0300 on 2, 0x0400 on 3) and
//!   `intel_pmu_check_event_constraints`, which extends every fixed
//!   constraint to the general counters except the pseudo-encodings'.
//! * Where a term's value goes: the `cpu` PMU's formats (`PMU_FORMAT_ATTR`
//!   in the same file: `event` "config:0-7", ...).
//! * The privilege bits: `x86_pmu_hw_config` (`arch/x86/events/core.c`)
//!   sets `ARCH_PERFMON_EVENTSEL_USR` (bit 16) unless `exclude_user` and
//!   `ARCH_PERFMON_EVENTSEL_OS` (bit 17) unless `exclude_kernel`;
//!   `get_event_modifier` (`tools/perf/util/parse-events.c`) excludes every
//!   privilege at the first of `u`/`k` and includes each one named.

use std::string::ToString;

use super::*;

/// Linux's `cpu` PMU formats, as `PMU_FORMAT_ATTR` writes them.
const LINUX_FORMATS: [(&str, &str); 7] = [
    ("event", "config:0-7"),
    ("umask", "config:8-15"),
    ("edge", "config:18"),
    ("pc", "config:19"),
    ("any", "config:21"),
    ("inv", "config:23"),
    ("cmask", "config:24-31"),
];

/// `value` placed in `perf_event_attr.config` where format `term` says.
fn format(term: &str, value: u64) -> u64 {
    let (_, spec) = LINUX_FORMATS.iter().find(|(t, _)| *t == term).unwrap();
    let bits = spec.strip_prefix("config:").unwrap();
    let (lo, hi) = bits.split_once('-').unwrap_or((bits, bits));
    let (lo, hi): (u32, u32) = (lo.parse().unwrap(), hi.parse().unwrap());
    assert!(value < 1 << (hi - lo + 1), "{term}={value} fits");
    value << lo
}

/// The config of a list of terms.
fn config(terms: &[(&str, u64)]) -> u64 {
    terms.iter().map(|&(t, v)| format(t, v)).sum()
}

/// `ARCH_PERFMON_EVENTSEL_USR` and `_OS`.
const USR: u64 = 1 << 16;
const OS: u64 = 1 << 17;

fn parse(s: &str) -> EventSpec {
    s.parse()
        .unwrap_or_else(|e: ParseError| panic!("{s:?}: {e}"))
}

/// Every name `perf` resolves on Intel's architectural PMU, with the
/// config Linux maps it to and the counters Linux places it on.
#[test]
fn perf_names_program_what_linux_maps_them_to() {
    // (name, intel_perfmon_event_map or sysfs, fixed counter, general)
    let table: [(&str, u64, Option<u8>, bool); 11] = [
        ("cpu-cycles", 0x003c, Some(1), true),
        ("cycles", 0x003c, Some(1), true),
        ("instructions", 0x00c0, Some(0), true),
        ("cache-references", 0x4f2e, None, true),
        ("cache-misses", 0x412e, None, true),
        ("branch-instructions", 0x00c4, None, true),
        ("branches", 0x00c4, None, true),
        ("branch-misses", 0x00c5, None, true),
        ("bus-cycles", 0x013c, None, true),
        ("ref-cycles", 0x0300, Some(2), false),
        ("slots", 0x0400, Some(3), false),
    ];
    for (name, linux, fixed, general) in table {
        for s in [name.to_string(), format!("cpu/{name}/")] {
            let e = parse(&s);
            assert_eq!(e.perf_config(), linux, "{s}: config");
            assert_eq!(e.evtsel().bits(), linux | USR | OS, "{s}: PERFEVTSEL image");
            assert_eq!(e.fixed_counter(), fixed, "{s}: fixed counter");
            assert_eq!(e.counts_on_general(), general, "{s}: general counters");
        }
    }
}

/// Every generic hardware event `perf`'s lexer knows (name|alias) is either
/// taken or refused as unmapped: none is "unknown".
#[test]
fn every_perf_hardware_name_is_known() {
    const LEXER: [&str; 10] = [
        "cpu-cycles|cycles",
        "stalled-cycles-frontend|idle-cycles-frontend",
        "stalled-cycles-backend|idle-cycles-backend",
        "instructions",
        "cache-references",
        "cache-misses",
        "branch-instructions|branches",
        "branch-misses",
        "bus-cycles",
        "ref-cycles",
    ];
    for names in LEXER {
        for name in names.split('|') {
            match name.parse::<EventSpec>() {
                Ok(_) => {}
                Err(e) => assert_eq!(e.kind, ParseErrorKind::Unmapped, "{name}: {e}"),
            }
        }
    }
    let e = "stalled-cycles-backend:u".parse::<EventSpec>().unwrap_err();
    assert_eq!(e.offset, 0);
    assert_eq!(
        e.to_string(),
        "`stalled-cycles-backend` at byte 0 is a perf event that Linux maps to no event on the architectural PMU (intel_perfmon_event_map has none): give the model's encoding as event=0x..,umask=0x.."
    );
}

/// Each architectural event's name parses back to it: `bus-cycles` is
/// UnHalted Reference Cycles, and `ref-cycles` is not.
#[test]
fn architectural_event_names_round_trip() {
    for a in ArchEvent::ALL {
        assert_eq!(parse(a.name()).architectural(), Some(a), "{}", a.name());
    }
    assert_eq!(ArchEvent::ReferenceCycles.name(), "bus-cycles");
    assert_eq!(parse("ref-cycles").architectural(), None);
    assert_eq!(parse("ref-tsc"), parse("ref-cycles"));
    assert_eq!(parse("topdown-slots").perf_config(), 0x01a4);
}

/// The fixed counters take exactly Linux's fixed encodings, unfiltered.
#[test]
fn fixed_counters_take_linuxs_encodings_only() {
    let linux = [0x00c0, 0x003c, 0x0300, 0x0400];
    for (i, config) in (0u8..).zip(linux) {
        let e = EventSpec::fixed(i).unwrap();
        assert_eq!(e.perf_config(), config, "fixed counter {i}");
        assert!(e.counts_on_fixed(i));
        for filtered in [
            EventSpec { cmask: 1, ..e },
            EventSpec { inv: true, ..e },
            EventSpec { edge: true, ..e },
            EventSpec { any: true, ..e },
        ] {
            assert_eq!(filtered.fixed_counter(), None, "{filtered:?}");
        }
    }
    assert_eq!(EventSpec::fixed(4), None);
    // The SDM's pairings that Linux does not make.
    assert_eq!(
        EventSpec::arch(ArchEvent::ReferenceCycles).fixed_counter(),
        None
    );
    assert_eq!(
        EventSpec::arch(ArchEvent::TopdownSlots).fixed_counter(),
        None
    );
    // Event select 00H counts on no general counter, whatever the mask.
    assert!(!EventSpec::raw(0, 0).counts_on_general());
    assert!(EventSpec::raw(1, 0).counts_on_general());
}

/// The modifiers, as `perf`'s `get_event_modifier` applies them, in both
/// syntaxes.
#[test]
fn modifiers_select_the_privilege_bits() {
    // (suffix after a name, after `cpu/cycles/`, USR | OS)
    let table = [
        ("", "", USR | OS),
        (":u", "u", USR),
        (":k", "k", OS),
        (":uk", "uk", USR | OS),
        (":ku", ":ku", USR | OS),
        (":u", ":u", USR),
    ];
    for (plain, pmu, bits) in table {
        for s in [format!("cycles{plain}"), format!("cpu/cycles/{pmu}")] {
            let e = parse(&s);
            assert_eq!(e.evtsel().bits(), 0x3c | bits, "{s}");
            assert_eq!((e.usr, e.os), (bits & USR != 0, bits & OS != 0), "{s}");
        }
    }
    for s in ["event=0x3c,umask=1:k", "r13c:k", "cpu/r13c/k"] {
        assert_eq!(parse(s).evtsel().bits(), 0x13c | OS, "{s}");
    }
}

/// Every term in its `name=value` and bare forms, the raw config forms and
/// `perf`'s PMU syntax, against the formats' placement.
#[test]
fn terms_and_raw_configs_place_their_fields_as_linuxs_formats() {
    let table: [(&str, u64); 22] = [
        ("event=0x3c", config(&[("event", 0x3c)])),
        ("event=60,umask=1", config(&[("event", 60), ("umask", 1)])),
        (
            "cpu/event=0x3c,umask=0x0,inv=1,cmask=1/",
            config(&[("event", 0x3c), ("inv", 1), ("cmask", 1)]),
        ),
        ("event=0x3c,inv", config(&[("event", 0x3c), ("inv", 1)])),
        ("event=0x3c,inv=0", config(&[("event", 0x3c)])),
        (
            "event=0xc0,edge=1,cmask=2",
            config(&[("event", 0xc0), ("edge", 1), ("cmask", 2)]),
        ),
        ("event=0xc0,edge", config(&[("event", 0xc0), ("edge", 1)])),
        ("event=0xc0,edge=0", config(&[("event", 0xc0)])),
        ("event=0x3c,any=1", config(&[("event", 0x3c), ("any", 1)])),
        (
            "cpu/event=0x3c,any/",
            config(&[("event", 0x3c), ("any", 1)]),
        ),
        ("event=0x3c,cmask", config(&[("event", 0x3c), ("cmask", 1)])),
        (
            "event=0x3c,cmask=255",
            config(&[("event", 0x3c), ("cmask", 255)]),
        ),
        // Linux's sysfs strings (core.c: topdown-total-slots and
        // topdown-recovery-bubbles, the HT variants).
        (
            "event=0x3c,umask=0x0,any=1",
            config(&[("event", 0x3c), ("any", 1)]),
        ),
        (
            "event=0xd,umask=0x3,cmask=1,any=1",
            config(&[("event", 0xd), ("umask", 3), ("cmask", 1), ("any", 1)]),
        ),
        // perf-list.txt's examples: LSD.UOPS (A8H/01H), raw and as terms.
        (
            "cpu/event=0xa8,umask=0x1,cmask=0x1/",
            config(&[("event", 0xa8), ("umask", 1), ("cmask", 1)]),
        ),
        ("r1a8", config(&[("event", 0xa8), ("umask", 1)])),
        ("cpu/r1a8/", config(&[("event", 0xa8), ("umask", 1)])),
        ("cpu/r0x1a8/", config(&[("event", 0xa8), ("umask", 1)])),
        ("r0x1a8", config(&[("event", 0xa8), ("umask", 1)])),
        ("config=0x13c", config(&[("event", 0x3c), ("umask", 1)])),
        (
            "cpu/config=0x1a0003c/",
            config(&[("event", 0x3c), ("cmask", 1), ("inv", 1), ("any", 1)]),
        ),
        (
            "r1a0003c",
            config(&[("event", 0x3c), ("cmask", 1), ("inv", 1), ("any", 1)]),
        ),
    ];
    for (s, want) in table {
        let e = parse(s);
        assert_eq!(e.perf_config(), want, "{s}: config");
        assert_eq!(e.evtsel().bits(), want | USR | OS, "{s}: PERFEVTSEL image");
    }
    let e = parse("event=0x3c,umask=0x01,cmask=3,inv,edge,any:u");
    assert_eq!(
        (
            e.select, e.umask, e.cmask, e.inv, e.edge, e.any, e.usr, e.os
        ),
        (0x3c, 1, 3, true, true, true, true, false)
    );
}

/// The union of the formats is the mask a raw config may use.
#[test]
fn format_bits_are_the_formats() {
    let union = LINUX_FORMATS
        .iter()
        .filter(|(t, _)| *t != "pc")
        .map(|(_, spec)| {
            let bits = spec.strip_prefix("config:").unwrap();
            let (lo, hi) = bits.split_once('-').unwrap_or((bits, bits));
            let (lo, hi): (u32, u32) = (lo.parse().unwrap(), hi.parse().unwrap());
            ((1u64 << (hi - lo + 1)) - 1) << lo
        })
        .fold(0, |a, b| a | b);
    assert_eq!(FORMAT_BITS, union);
    for (term, shift, width) in FORMAT {
        assert_eq!(format(term, 1), 1 << shift, "{term}");
        assert_eq!(format(term, (1 << width) - 1) >> shift, (1 << width) - 1);
    }
}

/// What `perf` would refuse (and the forms this driver refuses), each with
/// its offset and message.
#[test]
fn refusals_say_what_and_where() {
    use ParseErrorKind::*;
    let table: [(&str, ParseErrorKind, usize, &str); 28] = [
        (
            "",
            Empty,
            0,
            "no event at byte 0: expected a name (such as `cycles`), terms (`event=0x..`) or a raw config (`r..`)",
        ),
        (
            "cpu//",
            Empty,
            4,
            "no event at byte 4: expected a name (such as `cycles`), terms (`event=0x..`) or a raw config (`r..`)",
        ),
        (
            ":u",
            Empty,
            0,
            "no event at byte 0: expected a name (such as `cycles`), terms (`event=0x..`) or a raw config (`r..`)",
        ),
        (
            "event=0x3c,,umask=1",
            EmptyTerm,
            11,
            "empty term at byte 11: remove the extra `,`",
        ),
        (
            "event=0x3c,umaks=1",
            UnknownTerm,
            11,
            "unknown term `umaks` at byte 11: expected event=, umask=, cmask=, inv, edge, any or config=; did you mean `umask`?",
        ),
        (
            "cpu/event=0x3c,period=1000/",
            UnknownTerm,
            15,
            "unknown term `period` at byte 15: expected event=, umask=, cmask=, inv, edge, any or config=",
        ),
        (
            "cyles",
            UnknownEvent,
            0,
            "unknown event `cyles` at byte 0: expected cycles, cpu-cycles, instructions, cache-references, cache-misses, branches, branch-instructions, branch-misses, bus-cycles, ref-cycles, slots, topdown-slots, ref-tsc, event=0x..,umask=0x.. or r<hex>; did you mean `cycles`?",
        ),
        (
            "idle-cycles-frontend",
            Unmapped,
            0,
            "`idle-cycles-frontend` at byte 0 is a perf event that Linux maps to no event on the architectural PMU (intel_perfmon_event_map has none): give the model's encoding as event=0x..,umask=0x..",
        ),
        (
            "event=0xg1",
            BadNumber,
            6,
            "`0xg1` at byte 6 is not a number (decimal or 0x hexadecimal)",
        ),
        (
            "event=+5",
            BadNumber,
            6,
            "`+5` at byte 6 is not a number (decimal or 0x hexadecimal)",
        ),
        (
            "event=256",
            TooBig { bits: 8 },
            6,
            "`256` at byte 6 does not fit its 8-bit field (0 to 255)",
        ),
        (
            "event=0x3c,inv=2",
            TooBig { bits: 1 },
            15,
            "`2` at byte 15 does not fit its 1-bit field (0 to 1)",
        ),
        (
            "umask=1,cmask=2",
            MissingEvent,
            0,
            "the terms at byte 0 have no event= (or config=) term",
        ),
        (
            "event=1,event=2",
            RepeatedTerm,
            8,
            "term `event` at byte 8 sets a field an earlier term set: give each once (config= sets them all)",
        ),
        (
            "config=0x13c,umask=1",
            RepeatedTerm,
            13,
            "term `umask` at byte 13 sets a field an earlier term set: give each once (config= sets them all)",
        ),
        (
            "event=0x3c,pc",
            PinControl,
            11,
            "term `pc` at byte 11 is not supported: pin control (IA32_PERFEVTSELx bit 19) is a bit Linux clears (X86_RAW_EVENT_MASK has no PC), so perf never programs it",
        ),
        (
            "r1013c",
            RawBits { bits: 0x10000 },
            0,
            "raw config `r1013c` at byte 0 sets bits 0x10000 that no term covers (event 7:0, umask 15:8, edge 18, any 21, inv 23, cmask 31:24); the privilege comes from the :u and :k modifiers",
        ),
        (
            "cpu/config=0x53003c/",
            RawBits { bits: 0x530000 },
            11,
            "raw config `0x53003c` at byte 11 sets bits 0x530000 that no term covers (event 7:0, umask 15:8, edge 18, any 21, inv 23, cmask 31:24); the privilege comes from the :u and :k modifiers",
        ),
        (
            "cpu_core/cycles/",
            UnknownPmu,
            0,
            "unknown PMU `cpu_core` at byte 0: expected cpu/.../ (the architectural PMU of the logical processor the driver runs on)",
        ),
        (
            "cpu/cycles",
            Unclosed,
            0,
            "`cpu/` at byte 0 has no closing `/`: expected cpu/.../",
        ),
        (
            "cycles:x",
            BadModifier,
            7,
            "unknown modifier `x` at byte 7: expected u (CPL > 0), k (CPL 0) or both, and p, pp or ppp (precise level, PEBS)",
        ),
        (
            "cycles:",
            BadModifier,
            7,
            "empty modifier at byte 7: expected u (CPL > 0), k (CPL 0) or both, and p, pp or ppp (precise level, PEBS)",
        ),
        (
            "cycles:u:k",
            BadModifier,
            8,
            "unknown modifier `:` at byte 8: expected u (CPL > 0), k (CPL 0) or both, and p, pp or ppp (precise level, PEBS)",
        ),
        (
            "cycles:uu",
            RepeatedModifier,
            8,
            "modifier `u` at byte 8 is given twice (perf refuses a repeated modifier too)",
        ),
        (
            "cpu/cycles/kuk",
            RepeatedModifier,
            13,
            "modifier `k` at byte 13 is given twice (perf refuses a repeated modifier too)",
        ),
        (
            "cycles:pppp",
            TooPrecise,
            10,
            "modifier `p` at byte 10 asks for a precise level above 3: perf's are p, pp and ppp",
        ),
        (
            "cycles:P",
            UnsupportedModifier,
            7,
            "modifier `P` at byte 7 is perf's maximum precise level (PEBS), which this driver has no counterpart for: expected u (CPL > 0), k (CPL 0) or both, and p, pp or ppp (precise level, PEBS)",
        ),
        (
            "instructions:uh",
            UnsupportedModifier,
            14,
            "modifier `h` at byte 14 is perf's hypervisor counting, which this driver has no counterpart for: expected u (CPL > 0), k (CPL 0) or both, and p, pp or ppp (precise level, PEBS)",
        ),
    ];
    for (s, kind, offset, message) in table {
        let e = s.parse::<EventSpec>().unwrap_err();
        assert_eq!((e.kind, e.offset), (kind, offset), "{s:?}: {e}");
        assert_eq!(e.to_string(), message, "{s:?}");
    }
}

/// Suggestions: the closest name or term, only when near.
#[test]
fn suggestions_are_the_nearest_names() {
    let table = [
        ("ref-cylces", Some("ref-cycles")),
        ("instrutions", Some("instructions")),
        ("branch-mises", Some("branch-misses")),
        ("bus-cycle", Some("bus-cycles")),
        ("nope", None),
        ("event=1,evnet=2", Some("event")),
        ("event=1,cmsak=2", Some("cmask")),
        ("event=1,xyz", None),
    ];
    for (s, want) in table {
        let e = s.parse::<EventSpec>().unwrap_err();
        assert_eq!(e.suggestion(), want, "{s}: {e}");
    }
}

/// A long term is kept to its first 24 bytes, cut at a character boundary.
#[test]
fn long_terms_are_cut_at_a_character_boundary() {
    let s = "event=1,ééééééééééééé=1";
    let e = s.parse::<EventSpec>().unwrap_err();
    assert_eq!(e.kind, ParseErrorKind::UnknownTerm);
    assert_eq!(e.term(), "éééééééééééé");
}

/// The driver places the events as Linux does: `ref-cycles` and `slots` on
/// their fixed counters, `bus-cycles` and `topdown-slots` (the SDM's
/// pairings) not there but on general counters.
#[test]
fn the_driver_places_events_where_linux_does() {
    use crate::arch::archperf::driver::{ArchPerfDriver, ConfigError, CounterConfig, Error};
    use crate::model::archperf::{ArchPerfModel, Config};
    crate::owner!(Cpu);
    let pmu = crate::testing::archperf_pmu();
    let m = ArchPerfModel::new(Config::alder_lake_p_core());
    let cpu = crate::detect::detect(&m, &mut m.clone())
        .unwrap()
        .arch_perf()
        .unwrap();
    let (mut d, c) = ArchPerfDriver::<Cpu, _>::take(m, &cpu, &pmu).unwrap();
    let counting = |s: &str| CounterConfig::counting(parse(s));
    let (f2, f3) = (c.f2.unwrap(), c.f3.unwrap());
    let refused = f2.configure(&mut d, &counting("bus-cycles")).unwrap_err();
    assert_eq!(
        refused.error,
        Error::Config(ConfigError::NotFixedEvent { fixed: 2 })
    );
    let f2 = refused
        .counter
        .configure(&mut d, &counting("ref-cycles:k"))
        .unwrap();
    let refused = f3
        .configure(&mut d, &counting("topdown-slots"))
        .unwrap_err();
    assert_eq!(
        refused.error,
        Error::Config(ConfigError::NotFixedEvent { fixed: 3 })
    );
    let f3 = refused
        .counter
        .configure(&mut d, &counting("slots"))
        .unwrap();
    let g0 = c.g0.configure(&mut d, &counting("bus-cycles")).unwrap();
    let g1 = c.g1.configure(&mut d, &counting("topdown-slots")).unwrap();
    let (f2, f3) = (f2.release(&mut d).unwrap(), f3.release(&mut d).unwrap());
    let (g0, g1) = (g0.release(&mut d).unwrap(), g1.release(&mut d).unwrap());
    let _ = d.give_back(crate::arch::archperf::driver::Counters {
        f2: Some(f2),
        f3: Some(f3),
        g0,
        g1,
        ..c
    });
}

/// `p`, `pp`, `ppp`: perf's precise levels 1-3, with or without a
/// privilege, in either syntax; the privilege stays both without `u`/`k`.
#[test]
fn precise_modifiers_set_the_precise_level() {
    let table = [
        ("cycles", 0, true, true),
        ("instructions:p", 1, true, true),
        ("instructions:pp", 2, true, true),
        ("branches:ppp", 3, true, true),
        ("branches:upp", 2, true, false),
        ("branches:pku", 1, true, true),
        ("cpu/event=0xc4/ppk", 2, false, true),
        ("cpu/branches/:p", 1, true, true),
    ];
    for (s, precise, usr, os) in table {
        let e = parse(s);
        assert_eq!((e.precise, e.usr, e.os), (precise, usr, os), "{s}");
    }
    assert_eq!(EventSpec::raw(0xC0, 0).with_precise(9).precise, 3);
}

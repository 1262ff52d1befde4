//! The event strings against `perf`'s and Linux's own tables: every
//! expected image below is written out from Linux's sources, not taken
//! from the parser's tables.
//!
//! * Names: `tools/perf/util/parse-events.l`.
//! * What a name programs per generation: `arch/x86/events/amd/core.c`,
//!   `amd_perfmon_event_map`, `amd_zen1_perfmon_event_map`,
//!   `amd_zen2_perfmon_event_map`, `amd_zen4_perfmon_event_map`.
//! * Which map a part takes: `amd_pmu_event_map` and the Zen feature bits
//!   of `arch/x86/kernel/cpu/amd.c`.
//! * Where a term's value goes: the AMD `cpu` PMU's formats (`event`
//!   "config:0-7,32-35", `umask` "config:8-15", `edge` "config:18", `inv`
//!   "config:23", `cmask` "config:24-31").
//! * The privilege bits: `x86_pmu_hw_config` (USR bit 16, OS bit 17);
//!   HostOnly (bit 41) for `exclude_guest`, GuestOnly (bit 40) for
//!   `exclude_host`: `amd_core_hw_config`.

use super::*;
use crate::detect::Vendor;

fn parse(s: &str) -> EventSpec {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

/// `(USR, OS)` bits.
const BOTH: u64 = 3 << 16;

/// Every generic name on every map, as Linux's four tables give it.
#[test]
fn names_resolve_as_linux_maps_them_per_generation() {
    let none = u64::MAX;
    // name, K7, Zen 1, Zen 2, Zen 4.
    let table: [(&str, [u64; 4]); 13] = [
        ("cycles", [0x76; 4]),
        ("cpu-cycles", [0x76; 4]),
        ("instructions", [0xC0; 4]),
        ("cache-references", [0x077D, 0xFF60, 0xFF60, 0xFF60]),
        ("cache-misses", [0x077E, 0x0964, 0x0964, 0x0964]),
        ("branches", [0xC2; 4]),
        ("branch-instructions", [0xC2; 4]),
        ("branch-misses", [0xC3; 4]),
        ("stalled-cycles-frontend", [0xD0, 0x0287, 0xA9, 0xA9]),
        ("idle-cycles-frontend", [0xD0, 0x0287, 0xA9, 0xA9]),
        ("stalled-cycles-backend", [0xD1, 0x0187, none, none]),
        ("idle-cycles-backend", [0xD1, 0x0187, none, none]),
        ("ref-cycles", [none, none, none, 0x1_0000_0120]),
    ];
    let maps = [EventMap::K7, EventMap::Zen1, EventMap::Zen2, EventMap::Zen4];
    for (name, configs) in table {
        let e = parse(name);
        for (map, want) in maps.into_iter().zip(configs) {
            let want = (want != none).then_some(want);
            assert_eq!(e.perf_config(map), want, "{name} on {}", map.name());
            assert_eq!(
                e.perf_ctl(map).map(|c| c.bits()),
                want.map(|w| w | BOTH),
                "{name} on {}",
                map.name()
            );
        }
    }
}

/// The map by family and model, as Linux places its Zen generations.
#[test]
fn the_map_follows_linuxs_generations() {
    let amd = |family, model| EventMap::of(Vendor::Amd, family, model);
    let table = [
        (0x0F, 0x6B, EventMap::K7), // QEMU's qemu64
        (0x10, 0x02, EventMap::K7),
        (0x15, 0x01, EventMap::K7),
        (0x16, 0x30, EventMap::K7),
        (0x17, 0x01, EventMap::Zen1),
        (0x17, 0x08, EventMap::Zen1),
        (0x17, 0x5F, EventMap::Zen1),
        (0x17, 0x31, EventMap::Zen2), // Rome
        (0x17, 0x71, EventMap::Zen2),
        (0x17, 0x90, EventMap::Zen2),
        (0x17, 0xA0, EventMap::Zen2),
        (0x17, 0x80, EventMap::K7),   // no Zen feature bit in Linux
        (0x19, 0x01, EventMap::Zen2), // Milan: family 19h, Zen 3
        (0x19, 0x21, EventMap::Zen2),
        (0x19, 0x11, EventMap::Zen4), // Genoa
        (0x19, 0x61, EventMap::Zen4), // Raphael
        (0x19, 0xA0, EventMap::Zen4),
        (0x1A, 0x02, EventMap::Zen4), // Zen 5
    ];
    for (family, model, map) in table {
        assert_eq!(
            amd(family, model),
            map,
            "family {family:#x} model {model:#x}"
        );
    }
    assert_eq!(EventMap::of(Vendor::Hygon, 0x18, 0), EventMap::Zen1);
}

/// Terms and raw configs go where Linux's AMD formats put them; the
/// 12-bit event splits over bits 7:0 and 35:32.
#[test]
fn terms_and_raw_configs_follow_the_amd_formats() {
    let table: [(&str, u64); 9] = [
        ("event=0x76", 0x76),
        ("event=0x1c0,umask=0x1", 0x1_0000_01C0),
        ("event=0xfff,umask=0xff", 0xF_0000_FFFF),
        ("event=0xc0,cmask=2,inv", 0x0280_00C0),
        ("event=0xc0,edge=1", 0x4_00C0),
        ("config=0x100000120", 0x1_0000_0120),
        ("r76", 0x76),
        ("r0x1000001c0", 0x1_0000_01C0),
        ("cpu/event=0x3,umask=0x8/", 0x0803),
    ];
    let maps = [EventMap::K7, EventMap::Zen1, EventMap::Zen2, EventMap::Zen4];
    for (s, config) in table {
        let e = parse(s);
        for map in maps {
            assert_eq!(e.perf_config(map), Some(config), "{s}");
            assert_eq!(
                e.perf_ctl(map).map(|c| c.bits()),
                Some(config | BOTH),
                "{s}"
            );
        }
    }
    let e = parse("event=0x1c0");
    assert_eq!(
        e.event,
        Event::Raw {
            select: 0x1C0,
            umask: 0
        }
    );
}

/// Modifiers: the first of `u`/`k` excludes both privileges, each one
/// given includes its own; `H` and `G` likewise for the modes, HostOnly
/// for host only, GuestOnly for guest only, neither for both.
#[test]
fn modifiers_set_privilege_and_mode() {
    let usr = 1 << 16;
    let os = 1 << 17;
    let guest_only = 1 << 40;
    let host_only = 1 << 41;
    let table: [(&str, u64); 10] = [
        ("cycles", usr | os),
        ("cycles:u", usr),
        ("cycles:k", os),
        ("cycles:uk", usr | os),
        ("cycles:H", usr | os | host_only),
        ("cycles:G", usr | os | guest_only),
        ("cycles:HG", usr | os),
        ("cycles:uG", usr | guest_only),
        ("cpu/cycles/kH", os | host_only),
        ("cpu/instructions/:Gu", usr | guest_only),
    ];
    for (s, bits) in table {
        let ctl = parse(s).perf_ctl(EventMap::Zen2).unwrap();
        let want = PerfCtl::new(ctl.event(), 0).bits() | bits;
        assert_eq!(ctl.bits(), want, "{s}");
    }
    // Excluded from both modes: nowhere, as Linux emulates it.
    let mut e = parse("instructions");
    (e.host, e.guest) = (false, false);
    let ctl = e.perf_ctl(EventMap::Zen4).unwrap();
    assert_eq!(
        (ctl.usr(), ctl.os(), ctl.host_only(), ctl.guest_only()),
        (false, false, false, false)
    );
}

/// Each refusal with its byte offset, term and message.
#[test]
fn refusals_say_where_and_why() {
    let table: [(&str, ParseErrorKind, usize, &str); 16] = [
        ("", ParseErrorKind::Empty, 0, ""),
        ("event=1,,umask=2", ParseErrorKind::EmptyTerm, 8, ""),
        ("event=1,any=1", ParseErrorKind::UnknownTerm, 8, "any"),
        ("event=1,pc", ParseErrorKind::UnknownTerm, 8, "pc"),
        ("cyclez", ParseErrorKind::UnknownEvent, 0, "cyclez"),
        ("bus-cycles", ParseErrorKind::Unmapped, 0, "bus-cycles"),
        ("event=0x1g", ParseErrorKind::BadNumber, 6, "0x1g"),
        (
            "event=0x1000",
            ParseErrorKind::TooBig { bits: 12 },
            6,
            "0x1000",
        ),
        ("umask=1", ParseErrorKind::MissingEvent, 0, "umask=1"),
        ("event=1,event=2", ParseErrorKind::RepeatedTerm, 8, "event"),
        (
            "r400076",
            ParseErrorKind::RawBits { bits: 1 << 22 },
            0,
            "r400076",
        ),
        ("cpux/cycles/", ParseErrorKind::UnknownPmu, 0, "cpux"),
        ("cpu/cycles", ParseErrorKind::Unclosed, 0, "cpu/"),
        ("cycles:x", ParseErrorKind::BadModifier, 7, "x"),
        ("cycles:uu", ParseErrorKind::RepeatedModifier, 8, "u"),
        ("cycles:p", ParseErrorKind::UnsupportedModifier, 7, "p"),
    ];
    for (s, kind, offset, term) in table {
        let e = s.parse::<EventSpec>().unwrap_err();
        assert_eq!(
            (e.kind, e.offset, e.term()),
            (kind, offset, term),
            "{s}: {e}"
        );
        assert!(!e.to_string().is_empty());
    }
    let e = "cycles:p".parse::<EventSpec>().unwrap_err();
    assert!(e.to_string().contains("instruction-based sampling"), "{e}");
    let e = "config=0x10000000000".parse::<EventSpec>().unwrap_err();
    assert_eq!(e.kind, ParseErrorKind::RawBits { bits: 1 << 40 });
    assert!(e.to_string().contains(":H and :G"), "{e}");
}

/// The nearest name or term is suggested.
#[test]
fn misspellings_get_a_suggestion() {
    let table = [
        ("cyles", Some("cycles")),
        ("instrucions", Some("instructions")),
        ("event=1,umaks=2", Some("umask")),
        ("event=1,cmsk=2", Some("cmask")),
        ("cpy/cycles/", Some("cpu")),
        ("event=1,xyz", None),
    ];
    for (s, want) in table {
        let e = s.parse::<EventSpec>().unwrap_err();
        assert_eq!(e.suggestion(), want, "{s}: {e}");
    }
}

//! Illegal counter transitions (and event strings `pmu::netburst_event!`
//! refuses) must not compile, and the compiler must say why. Each case is a small program using `pmu` as a dependency; it is
//! type-checked with `cargo check` in a scratch crate and must fail with the
//! expected message. A control program doing every legal transition must
//! compile, so a broken scratch crate cannot make the failures pass.
//!
//! (Doc tests would be the usual home for `compile_fail`, but cargo runs
//! them after the integration tests and `cargo test` must end with the QEMU
//! tally; this file's name sorts before `qemu.rs`.)

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const PRELUDE: &str = r#"
#![allow(unused)]
use pmu::arch::netburst::driver::{Counters, CounterConfig, NetBurstDriver};
use pmu::access::{MsrAccess, MsrBackend};
use pmu::access::PmcPmdAccess;
use pmu::arch::netburst::driver::{NetBurst, Programmed};
use pmu::arch::itanium::driver::{CounterConfig as IaConfig, Counters as IaCounters, ItaniumDriver};
use pmu::arch::netburst::driver::NetBurstHandle;
use pmu::counter::Owner;
use pmu::counter::state::{Configured, Unclaimed};
pmu::owner!(A);
pmu::owner!(B);
fn main() {}
"#;

/// Legal: every transition, the erased form, and both cascade directions
/// the manual allows.
const CONTROL: &str = r#"
fn f<M: MsrAccess>(d: &mut NetBurstDriver<'_, A, M>, c: Counters<A>, cfg: CounterConfig) {
    let _spec = pmu::netburst_event!("global_power_events:RUNNING:k");
    let c0 = c.c0.configure(d, &cfg).unwrap();
    let _ = c0.read(d);
    let c0 = c0.enable(d).unwrap();
    let c0 = c0.halt(d).unwrap();
    let c0 = c0.resume(d).unwrap();
    let c2 = c.c2.configure(d, &cfg).unwrap().cascade_from(&c0, d).unwrap();
    let c2 = c2.halt(d).unwrap();
    let _ = c2.release(d).unwrap();
    let c14 = c.c14.configure(d, &cfg).unwrap();
    let c16 = c.c16.configure(d, &cfg).unwrap().cascade_from(&c14, d).unwrap();
    let c12 = c.c12.configure(d, &cfg).unwrap().cascade_from(&c14, d).unwrap();
    let mut any = c0.erase();
    let _ = any.halt(d);
}
fn give_back<M: MsrAccess>(mut d: NetBurstDriver<'_, A, M>, c: Counters<A>, cfg: CounterConfig) {
    let c0 = c.c0.configure(&mut d, &cfg).unwrap().release(&mut d).unwrap();
    let _backend = d.give_back(Counters { c0, ..c });
}
fn g<R: PmcPmdAccess>(d: &mut ItaniumDriver<'_, A, R>, c: IaCounters<A>, cfg: IaConfig) {
    let c4 = c.c4.configure(d, &cfg).unwrap().enable(d).unwrap();
    let c4 = c4.halt(d).unwrap().resume(d).unwrap();
    let _ = c4.read(d);
    let _ = c4.release(d).unwrap();
}
"#;

struct Case {
    name: &'static str,
    body: &'static str,
    expect: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case {
        name: "enable_twice",
        body: "let c0 = c.c0.configure(d, &cfg).unwrap().enable(d).unwrap(); let _ = c0.enable(d);",
        expect: &["a counter in state `pmu::counter::state::Enabled` cannot be enabled"],
    },
    Case {
        name: "read_unclaimed",
        body: "let _ = c.c3.read(d);",
        expect: &["a counter in state `pmu::counter::state::Unclaimed` cannot be read"],
    },
    Case {
        name: "halt_configured",
        body: "let _ = c.c3.configure(d, &cfg).unwrap().halt(d);",
        expect: &["a counter in state `pmu::counter::state::Configured` cannot be halted"],
    },
    Case {
        name: "resume_enabled",
        body: "let _ = c.c3.configure(d, &cfg).unwrap().enable(d).unwrap().resume(d);",
        expect: &["a counter in state `pmu::counter::state::Enabled` cannot be resumed"],
    },
    Case {
        name: "configure_twice",
        body: "let _ = c.c3.configure(d, &cfg).unwrap().configure(d, &cfg);",
        expect: &["a counter in state `pmu::counter::state::Configured` cannot be configured"],
    },
    Case {
        name: "release_unclaimed",
        body: "let _ = c.c3.release(d);",
        expect: &["a counter in state `pmu::counter::state::Unclaimed` cannot be released"],
    },
    Case {
        name: "cascade_0_to_1",
        body: "let c0 = c.c0.configure(d, &cfg).unwrap(); \
               let _ = c.c1.configure(d, &cfg).unwrap().cascade_from(&c0, d);",
        expect: &["counter 1 cannot be cascaded from counter 0"],
    },
    Case {
        name: "cascade_16_to_14",
        body: "let c16 = c.c16.configure(d, &cfg).unwrap(); \
               let _ = c.c14.configure(d, &cfg).unwrap().cascade_from(&c16, d);",
        expect: &["counter 14 cannot be cascaded from counter 16"],
    },
    Case {
        name: "cascade_from_unclaimed",
        body: "let _ = c.c2.configure(d, &cfg).unwrap().cascade_from(&c.c0, d);",
        expect: &["a counter in state `pmu::counter::state::Unclaimed` cannot be read"],
    },
    Case {
        name: "cascade_an_enabled_counter",
        body: "let c0 = c.c0.configure(d, &cfg).unwrap(); \
               let _ = c.c2.configure(d, &cfg).unwrap().enable(d).unwrap().cascade_from(&c0, d);",
        expect: &["a counter in state `pmu::counter::state::Enabled` cannot be cascaded"],
    },
    Case {
        name: "itanium_has_no_cascading",
        body: "fn g<R: PmcPmdAccess>(d: &mut ItaniumDriver<'_, A, R>, c: IaCounters<A>, cfg: IaConfig) { \
               let c4 = c.c4.configure(d, &cfg).unwrap(); \
               let _ = c.c5.configure(d, &cfg).unwrap().cascade_from(&c4, d); }",
        expect: &[
            "counter 5 cannot be cascaded from counter",
            "on `pmu::arch::itanium::driver::Itanium`",
            "Itanium has no cascading at all",
        ],
    },
    Case {
        name: "stale_handle",
        body: "let c0 = c.c0.configure(d, &cfg).unwrap(); let _e = c0.enable(d); let _ = c0.read(d);",
        expect: &["moved value: `c0`"],
    },
    Case {
        // Issue 11's reproduction: driver A's counter 0 enabled through
        // driver B (whose own counter 0 could then be configured too).
        name: "foreign_handle",
        body: "let c0 = c.c0.configure(d, &cfg).unwrap(); \
               fn other<M: MsrAccess>(b: &mut NetBurstDriver<'_, B, M>, c0: NetBurstHandle<A, 0, Configured>) { \
               let _ = c0.enable(b); }",
        expect: &[
            "this counter was issued by the driver of owner `A`",
            "a handle works only with the driver that issued it",
        ],
    },
    Case {
        name: "foreign_cascade_source",
        body: "fn other<M: MsrAccess>(b: &mut NetBurstDriver<'_, B, M>, cb: Counters<B>, \
               c0: NetBurstHandle<A, 0, Configured>, cfg: CounterConfig) { \
               let c2 = cb.c2.configure(b, &cfg).unwrap(); let _ = c2.cascade_from(&c0, b); }",
        expect: &["mismatched types"],
    },
    Case {
        // A second owner of one PMU needs a second owner type, which only
        // `pmu::owner!` (or an `unsafe impl` with its contract) makes.
        name: "owner_without_unsafe",
        body: "enum Mine {} \
               impl Owner for Mine { fn taken() -> &'static pmu::counter::OwnerFlag { A::taken() } }",
        expect: &["the trait `Owner` requires an `unsafe impl` declaration"],
    },
    Case {
        // Ownership, reproduction 1: an owner's flag cannot be cleared from
        // safe code (it was a public `AtomicBool`), so a second driver of
        // `A` cannot be taken while the first and its handles live.
        name: "reset_an_owner",
        body: "A::taken().store(false, core::sync::atomic::Ordering::Release);",
        expect: &["no method named `store` found for reference `&'static OwnerFlag`"],
    },
    Case {
        // Ownership, reproduction 2: the package's state cannot be made in
        // safe code; one value names one package, by the contract of the
        // `unsafe` constructor.
        name: "second_package_in_safe_code",
        body: "let _p = pmu::arch::netburst::NetBurstPmu::new();",
        expect: &["call to unsafe function"],
    },
    Case {
        name: "pmi_state_alone",
        body: "let _s = pmu::arch::netburst::pmi::PmiState::new();",
        expect: &["associated function `new` is private"],
    },
    Case {
        name: "itanium_pmu_in_safe_code",
        body: "let _p = pmu::arch::itanium::ItaniumPmu::new();",
        expect: &["call to unsafe function"],
    },
    Case {
        // A driver is given back with its tokens, each Unclaimed: a claimed
        // one does not fit (so no handle outlives its driver).
        name: "give_back_a_claimed_token",
        body: "} fn g<M: MsrAccess>(mut d: NetBurstDriver<'_, A, M>, c: Counters<A>, cfg: CounterConfig) { \
               let c0 = c.c0.configure(&mut d, &cfg).unwrap(); let _ = d.give_back(Counters { c0, ..c });",
        expect: &[
            "mismatched types",
            "expected `Handle<NetBurst, A, 0, Unclaimed>`",
        ],
    },
    Case {
        name: "give_back_without_tokens",
        body: "} fn g<M: MsrAccess>(d: NetBurstDriver<'_, A, M>) { let _ = d.give_back();",
        expect: &["this method takes 1 argument but 0 arguments were supplied"],
    },
    Case {
        name: "give_back_another_owners_tokens",
        body: "} fn g<M: MsrAccess>(d: NetBurstDriver<'_, A, M>, cb: Counters<B>) { let _ = d.give_back(cb);",
        expect: &["mismatched types"],
    },
    Case {
        // Ownership, reproduction 6: a DS save area has one owner; it is
        // neither `Copy` nor `Sync`, so two threads cannot reach its memory.
        name: "ds_area_is_not_sync",
        body: "fn sync<T: Sync>() {} sync::<pmu::arch::netburst::ds::DsArea>();",
        expect: &["cannot be shared between threads safely"],
    },
    Case {
        name: "ds_area_is_not_copy",
        body: "fn copy<T: Copy>() {} copy::<pmu::arch::netburst::ds::DsArea>();",
        expect: &["DsArea: Copy` is not satisfied"],
    },
    Case {
        name: "pmi_state_has_no_ds_area",
        body: "fn h(s: &pmu::arch::netburst::pmi::PmiState) { let _ = s.ds_area(pmu::arch::netburst::LogicalProcessor::T0); }",
        expect: &["no method named `ds_area` found"],
    },
    Case {
        // Tokens come only from `take`: no public constructor.
        name: "forge_a_token",
        body: "let _t = NetBurstHandle::<A, 0, Unclaimed>::token();",
        expect: &["private"],
    },
    // `pmu::netburst_event!` runs the event-string parser at compile time:
    // a string `parse()` refuses stops the build with the same error.
    Case {
        name: "event_unknown_mask",
        body: "let _ = pmu::netburst_event!(\"global_power_events:NOPE:k\");",
        expect: &[
            "evaluation panicked: `NOPE` at byte 20 is neither a mask of `global_power_events` nor a modifier (u, k, cmpl, e, thr=N)",
        ],
    },
    Case {
        name: "event_misspelt_suggests_the_closest",
        body: "let _ = pmu::netburst_event!(\"instr_retird:NBOGUS\");",
        expect: &[
            "evaluation panicked: `instr_retird` at byte 0 is not a NetBurst event; did you mean `instr_retired`?",
        ],
    },
    Case {
        name: "event_misspelt_mask_suggests_the_closest",
        body: "let _ = pmu::netburst_event!(\"instr_retired:NBOGUSNTG:u\");",
        expect: &[
            "evaluation panicked: `NBOGUSNTG` at byte 14 is neither a mask of `instr_retired` nor a modifier (u, k, cmpl, e, thr=N); did you mean `NBOGUSNTAG`?",
        ],
    },
    Case {
        name: "event_threshold_out_of_range",
        body: "let _ = pmu::netburst_event!(\"global_power_events:RUNNING:thr=16\");",
        expect: &[
            "evaluation panicked: the value of modifier `thr` at byte 28 is out of range: `thr` takes 0 to 15",
        ],
    },
    Case {
        name: "event_not_on_this_pmu",
        body: "let _ = pmu::netburst_event!(\"netburst::instr_completed:NBOGUS\");",
        expect: &[
            "evaluation panicked: event `instr_completed` at byte 10 is not available on PMU `netburst`: it needs netburst_p (family 0Fh models 3, 4, 6), write `netburst_p::instr_completed`",
        ],
    },
    // Issue 35: safe code cannot drive the PMU around its driver.
    Case {
        // Reproduction 1: a driver's register operation called without a
        // handle (driver A releasing driver B's claim).
        name: "driver_operation_without_a_handle",
        body: "} fn g<M: MsrBackend>(a: &mut NetBurstDriver<'_, A, M>, p: &Programmed) { \
               let _ = pmu::counter::Driver::<NetBurst>::release(a, 0, p);",
        expect: &["this function takes 4 arguments but 3 arguments were supplied"],
    },
    Case {
        // Reproduction 2: PEBS programmed and started through the trait.
        name: "driver_program_without_a_handle",
        body: "let _ = pmu::counter::Driver::<NetBurst>::program(d, 16, &cfg);",
        expect: &["this function takes 4 arguments but 3 arguments were supplied"],
    },
    Case {
        // The argument those operations take cannot be named outside.
        name: "name_the_crates_token",
        body: "let _t: Option<pmu::sealed::Token> = None;",
        expect: &["module `sealed` is private"],
    },
    Case {
        // Reproduction 3: a driver of an outside type.
        name: "implement_driver_outside",
        body: "} struct Fake; impl pmu::counter::Driver<NetBurst> for Fake { \
               type Owner = A; type Config = CounterConfig; type Error = (); } fn unused() {",
        expect: &["`Fake` cannot implement this trait of `pmu`: the trait is sealed"],
    },
    Case {
        name: "implement_driver_of_outside",
        body: "} struct Fake; impl pmu::counter::DriverOf<NetBurst, A> for Fake {} fn unused() {",
        expect: &[
            "the trait bound `Fake: pmu::counter::Driver<pmu::arch::netburst::driver::NetBurst>` is not satisfied",
        ],
    },
    Case {
        name: "implement_arch_outside",
        body: "} enum Mine {} impl pmu::counter::Arch for Mine { \
               const NAME: &'static str = \"mine\"; const COUNTERS: u8 = 1; \
               type Programmed = (); const UNPROGRAMMED: () = (); \
               fn can_cascade(_: u8, _: u8) -> bool { false } } fn unused() {",
        expect: &["`Mine` cannot implement this trait of `pmu`: the trait is sealed"],
    },
    Case {
        // Reproduction 4: a static as the PMI entry's handler.
        name: "pmi_entry_with_a_static",
        body: "} extern \"C\" fn h(_: &pmu::entry::PmiFrame) {} \
               static H: extern \"C\" fn(&pmu::entry::PmiFrame) = h; \
               pmu::pmi_entry!(stub => H); fn unused() {",
        expect: &["`pmi_entry!`'s handler must name a function"],
    },
    Case {
        name: "pmi_entry_with_a_value",
        body: "} const H: u32 = 0; pmu::pmi_entry!(stub => H); fn unused() {",
        expect: &["mismatched types", "expected fn pointer, found `u32`"],
    },
    Case {
        // Reproduction 5: the safe access trait on the hardware backend.
        name: "write_efer_on_hardware",
        body: "let mut x = unsafe { pmu::access::X86Msr::new() }; \
               let _ = MsrAccess::write_msr(&mut x, 0xC000_0080, 0);",
        expect: &["`X86Msr` is not a software MSR backend (`pmu::access::MsrAccess`)"],
    },
    Case {
        name: "write_efer_through_a_hardware_driver",
        body: "} fn g(d: &mut NetBurstDriver<'_, A, pmu::access::X86Msr>) { \
               d.msr().write_msr(0xC000_0080, 0);",
        expect: &["call to unsafe function `X86Msr::write_msr` is unsafe"],
    },
    Case {
        name: "write_efer_through_the_x2apic",
        body: "} fn g(a: &mut pmu::apic::X2Apic<pmu::access::X86Msr>) { \
               a.msr().write_msr(0xC000_0080, 0);",
        expect: &["call to unsafe function `X86Msr::write_msr` is unsafe"],
    },
    Case {
        // Auto traits: a driver is `Send` exactly when its backend is, and
        // the hardware backend is not.
        name: "hardware_driver_is_not_send",
        body: "fn send<T: Send>() {} \
               send::<NetBurstDriver<'static, A, pmu::access::X86Msr>>();",
        expect: &["cannot be sent between threads safely"],
    },
    Case {
        name: "handle_is_not_send",
        body: "fn send<T: Send>(_: T) {} send(c.c0);",
        expect: &["cannot be sent between threads safely"],
    },
];

fn program(body: &str) -> String {
    format!(
        "{PRELUDE}\nfn f<M: MsrAccess>(d: &mut NetBurstDriver<'_, A, M>, c: Counters<A>, cfg: CounterConfig) {{\n    {body}\n}}\n"
    )
}

/// The scratch crate, written once: one binary per case plus the control.
fn scratch() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("compile-fail");
        let bin = dir.join("src/bin");
        std::fs::create_dir_all(&bin).unwrap();
        let root = env!("CARGO_MANIFEST_DIR");
        std::fs::write(
            dir.join("Cargo.toml"),
            format!(
                "[package]\nname = \"pmu-compile-fail\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\
                 publish = false\n\n[dependencies]\npmu = {{ path = {root:?} }}\n\n[workspace]\n"
            ),
        )
        .unwrap();
        // The workspace's lock file pins the same dependency versions, so
        // nothing is resolved anew (a packaged crate may have none).
        let lock = Path::new(root).join("Cargo.lock");
        if lock.exists() {
            std::fs::copy(lock, dir.join("Cargo.lock")).unwrap();
        }
        std::fs::write(bin.join("control.rs"), format!("{PRELUDE}{CONTROL}")).unwrap();
        for case in CASES {
            std::fs::write(bin.join(format!("{}.rs", case.name)), program(case.body)).unwrap();
        }
        dir
    })
}

/// What `cargo check` said of each binary of the scratch crate: whether it
/// compiled, and its rendered diagnostics.
struct Checked {
    compiled: HashSet<String>,
    diagnostics: HashMap<String, String>,
}

/// Checks every binary of the scratch crate in one `cargo check --bins
/// --keep-going` (cargo checks them side by side, the crate once; one
/// `cargo check` per binary took 5 s of every cold `cargo test` here),
/// reading its report as JSON lines (`--message-format=json`): a binary
/// compiled when cargo reports its artifact; its diagnostics are those of
/// the compiler messages whose target it is.
fn checked() -> &'static Checked {
    static CHECKED: OnceLock<Checked> = OnceLock::new();
    CHECKED.get_or_init(|| {
        let dir = scratch();
        let out = Command::new(env!("CARGO"))
            .args(["check", "--quiet", "--bins", "--keep-going"])
            .arg("--message-format=json")
            .current_dir(dir)
            .env("CARGO_TARGET_DIR", dir.join("target"))
            .env_remove("RUSTFLAGS")
            .output()
            .expect("run cargo");
        let mut checked = Checked {
            compiled: HashSet::new(),
            diagnostics: HashMap::new(),
        };
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Some(name) = json_string_after(line, r#""target":{"#, r#""name":""#) else {
                continue;
            };
            if line.starts_with(r#"{"reason":"compiler-artifact""#) {
                checked.compiled.insert(name);
            } else if let Some(text) = json_string_after(line, r#""message":{"#, r#""rendered":""#)
            {
                let all = checked.diagnostics.entry(name).or_default();
                all.push_str(&text);
            }
        }
        assert!(
            checked.compiled.contains("control") || !checked.diagnostics.is_empty(),
            "cargo check of the scratch crate reported nothing:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        checked
    })
}

/// The JSON string value that follows `key` after the first `object` in
/// `line` (a line of cargo's JSON report), unescaped.
fn json_string_after(line: &str, object: &str, key: &str) -> Option<String> {
    let rest = &line[line.find(object)?..];
    let rest = &rest[rest.find(key)? + key.len()..];
    let mut value = String::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(value),
            '\\' => match chars.next()? {
                'n' => value.push('\n'),
                't' => value.push('\t'),
                'u' => {
                    let hex: String = chars.by_ref().take(4).collect();
                    value.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                }
                other => value.push(other),
            },
            c => value.push(c),
        }
    }
    None
}

/// One binary of the scratch crate: (compiled, its diagnostics).
fn check(name: &str) -> (bool, String) {
    let checked = checked();
    let diagnostics = checked.diagnostics.get(name).cloned().unwrap_or_default();
    (checked.compiled.contains(name), diagnostics)
}

#[test]
fn legal_transitions_compile() {
    let (ok, stderr) = check("control");
    assert!(ok, "the control program must compile:\n{stderr}");
}

#[test]
fn illegal_transitions_do_not_compile() {
    let (ok, stderr) = check("control");
    assert!(ok, "the control program must compile:\n{stderr}");
    let mut wrong = Vec::new();
    for case in CASES {
        let (ok, stderr) = check(case.name);
        let missing: Vec<_> = case
            .expect
            .iter()
            .filter(|e| !stderr.contains(*e))
            .collect();
        if ok || !missing.is_empty() {
            wrong.push(format!(
                "{}: compiled={ok}, missing {missing:?}\n{stderr}",
                case.name
            ));
        } else {
            println!("{}: rejected: {}", case.name, case.expect[0]);
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

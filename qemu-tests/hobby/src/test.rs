//! The test-case runner of the test kernels.
//!
//! A kernel lists its cases and hands them to [`run`] (or, to report each
//! case in a form of its own too, runs them one by one with [`run_case`],
//! reads what a case said with [`message`], and ends with [`conclude`]).
//! The output is the
//! protocol the QEMU suite on the host reads (`qemu-tests/host`, whose
//! crate documentation describes the same lines):
//!
//! ```text
//! suite <name>: <n> cases
//! test <suite>::<case> ... ok
//! test <suite>::<case> ... FAILED
//!     <why>
//! test <suite>::<case> ... skipped: <reason>
//! suite <name>: <p> passed, <f> failed
//! suite <name>: <p> passed, <f> failed, <s> skipped   (when a case was skipped)
//! ```
//!
//! A case fails when it returns `Err` from [`fail!`](crate::fail!) (or
//! `?`), panics, or raises an exception; it is skipped when it returns
//! through [`skip!`](crate::skip!): what it needs is not there (a real PMU,
//! in a guest whose hypervisor exposes none), which is neither a pass nor a
//! failure. The run goes on with the next case either way. The kernel exits
//! with the success code when no case failed (skipped cases do not fail the
//! run; the host counts them apart and never as passed).

use core::fmt;

use crate::exit::{ExitCode, exit_qemu};
use crate::fault::{Fault, catch};
use crate::println;
use crate::text::Text;

/// A case that did not pass: it failed ([`Failure::new`],
/// [`fail!`](crate::fail!)) or was skipped ([`Failure::skipped`],
/// [`skip!`](crate::skip!)). The message lives in a static buffer (no
/// allocator, and a small `Err` for every case to return); the runner
/// prints it.
#[derive(Debug)]
pub struct Failure(Verdict);

/// Whether a [`Failure`] is a failure or a skip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Failed,
    Skipped,
}

/// The last failure message, cut at 240 bytes.
type Message = Text<240>;

static MESSAGE: spin::Mutex<Message> = spin::Mutex::new(Text::new());

impl Failure {
    /// Records a failure message and returns the failure.
    pub fn new(args: fmt::Arguments<'_>) -> Self {
        Self::record(Verdict::Failed, args)
    }

    /// Records why the case is skipped and returns the skip: the case
    /// neither passed nor failed (see [`skip!`](crate::skip!)).
    pub fn skipped(args: fmt::Arguments<'_>) -> Self {
        Self::record(Verdict::Skipped, args)
    }

    /// Whether this is a skip rather than a failure.
    pub fn is_skip(&self) -> bool {
        self.0 == Verdict::Skipped
    }

    fn record(verdict: Verdict, args: fmt::Arguments<'_>) -> Self {
        MESSAGE.lock().set(args);
        Self(verdict)
    }
}

/// The message a [`Failure`] recorded, for printing (a `Failure` itself is
/// not `Display`: see the `From` impl below).
pub struct FailureMessage(());

impl fmt::Display for FailureMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(MESSAGE.lock().as_str())
    }
}

impl Failure {
    /// What the failure says.
    pub fn message(&self) -> FailureMessage {
        FailureMessage(())
    }
}

/// Any error that can be displayed fails a case through `?`: its message
/// is recorded, so a case returning [`Outcome`] can use `?` on the driver's
/// results (every `pmu` error implements `Display`). `Failure` itself is
/// not `Display`, which is what lets this impl exist beside `From<T> for T`.
impl<E: fmt::Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure::new(format_args!("{e}"))
    }
}

/// What a case returns.
pub type Outcome = Result<(), Failure>;

/// One named test case.
///
/// A case runs inside [`crate::fault::catch`]: a fault or panic in it fails
/// the case and abandons its frames without dropping them. So a case must
/// not hold a lock or a resource others wait for at a point where it can
/// fault or panic (the shared models take their locks only inside short
/// calls that do not panic); every case in this repository keeps to that.
pub struct Case {
    /// The name reported on the console.
    pub name: &'static str,
    /// The case itself.
    pub run: fn() -> Outcome,
}

/// Makes a [`Case`] named after the function.
#[macro_export]
macro_rules! case {
    ($f:path) => {
        $crate::test::Case {
            name: stringify!($f),
            run: $f,
        }
    };
}

/// Fails the case with a formatted message.
#[macro_export]
macro_rules! fail {
    ($($arg:tt)+) => {
        return Err($crate::test::Failure::new(format_args!(
            "{}:{}: {}", file!(), line!(), format_args!($($arg)+)
        )))
    };
}

/// Skips the case with a formatted reason: what the case needs is not
/// there (say what, and how to get it), so it neither passes nor fails. The
/// reason is printed on the case's line (`... skipped: <reason>`), without
/// the source location [`fail!`](crate::fail!) adds: a skip is not a
/// defect to find.
#[macro_export]
macro_rules! skip {
    ($($arg:tt)+) => {
        return Err($crate::test::Failure::skipped(format_args!($($arg)+)))
    };
}

/// Fails the case with a formatted message unless the condition holds.
#[macro_export]
macro_rules! check {
    ($cond:expr) => {
        $crate::check!($cond, "{}", stringify!($cond))
    };
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            $crate::fail!($($arg)+);
        }
    };
}

/// Fails the case unless the two values are equal, showing both (and the
/// optional reason).
#[macro_export]
macro_rules! check_eq {
    ($left:expr, $right:expr $(,)?) => {
        match (&$left, &$right) {
            (l, r) => $crate::check!(
                *l == *r,
                "{} == {}: left {:?}, right {:?}",
                stringify!($left),
                stringify!($right),
                l,
                r
            ),
        }
    };
    ($left:expr, $right:expr, $why:literal $(,)?) => {
        match (&$left, &$right) {
            (l, r) => $crate::check!(
                *l == *r,
                "{} == {} ({}): left {:?}, right {:?}",
                stringify!($left),
                stringify!($right),
                $why,
                l,
                r
            ),
        }
    };
}

/// How one case ended ([`run_case`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ran {
    /// It passed.
    Passed,
    /// It was skipped: what it needs is not there ([`message`] says why).
    Skipped,
    /// It failed, panicked or raised an exception ([`message`] says how).
    Failed,
}

/// How the cases of a suite ended, so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Cases that passed.
    pub passed: usize,
    /// Cases that failed.
    pub failed: usize,
    /// Cases that were skipped.
    pub skipped: usize,
}

impl Tally {
    /// Counts one more case.
    pub fn add(&mut self, ran: Ran) {
        match ran {
            Ran::Passed => self.passed += 1,
            Ran::Skipped => self.skipped += 1,
            Ran::Failed => self.failed += 1,
        }
    }
}

/// What the last case that did not pass said (why it was skipped, or how
/// it failed), until the next case runs: for a kernel that reports its
/// cases in a form of its own besides the case lines.
pub fn message() -> FailureMessage {
    FailureMessage(())
}

/// Records `text` as the message of a case that faulted or panicked, unless
/// the abandoned case holds the message's lock (a fault inside a message's
/// formatting): then the message stays as it was.
fn record_fault(args: fmt::Arguments<'_>) {
    if let Some(mut message) = MESSAGE.try_lock() {
        message.set(args);
    }
}

/// Runs one case of `suite` (inside [`catch`]) and prints its line, as
/// [`run`] does for each of its cases; returns how it ended. A kernel that
/// runs its cases one by one prints `suite <name>: <n> cases` first and
/// ends with [`conclude`].
pub fn run_case(suite: &str, case: &Case) -> Ran {
    // SAFETY: the contract every `Case` keeps (see [`Case`]).
    match unsafe { catch(case.run) } {
        Ok(Ok(())) => {
            println!("test {suite}::{} ... ok", case.name);
            Ran::Passed
        }
        Ok(Err(Failure(Verdict::Skipped))) => {
            let message = MESSAGE.lock();
            // One line: the host reads the reason up to its end.
            println!(
                "test {suite}::{} ... skipped: {}",
                case.name,
                OneLine(message.as_str())
            );
            Ran::Skipped
        }
        Ok(Err(Failure(Verdict::Failed))) => {
            let message = MESSAGE.lock();
            println!(
                "test {suite}::{} ... FAILED\n    {}",
                case.name,
                message.as_str()
            );
            Ran::Failed
        }
        Err(Fault::Panic) => {
            record_fault(format_args!("panicked"));
            println!("test {suite}::{} ... FAILED\n    panicked", case.name);
            Ran::Failed
        }
        Err(fault) => {
            record_fault(format_args!("unexpected {fault}"));
            println!(
                "test {suite}::{} ... FAILED\n    unexpected {fault}",
                case.name
            );
            Ran::Failed
        }
    }
}

/// Prints the suite's closing line (`suite <name>: <p> passed, <f>
/// failed`, and `, <s> skipped` when a case was skipped) and exits QEMU
/// with the verdict: success when no case failed.
pub fn conclude(suite: &str, tally: Tally) -> ! {
    let Tally {
        passed,
        failed,
        skipped,
    } = tally;
    if skipped == 0 {
        println!("suite {suite}: {passed} passed, {failed} failed");
    } else {
        println!("suite {suite}: {passed} passed, {failed} failed, {skipped} skipped");
    }
    exit_qemu(if failed == 0 {
        ExitCode::Success
    } else {
        ExitCode::Failure
    })
}

/// Runs every case of `suite`, reports each, and exits QEMU with the verdict:
/// success when no case failed.
pub fn run(suite: &str, cases: &[Case]) -> ! {
    println!("suite {suite}: {} cases", cases.len());
    let mut tally = Tally::default();
    for case in cases {
        tally.add(run_case(suite, case));
    }
    conclude(suite, tally)
}

/// A text printed on one line: each line break becomes a space.
struct OneLine<'a>(&'a str);

impl fmt::Display for OneLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, line) in self.0.lines().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            f.write_str(line)?;
        }
        Ok(())
    }
}

//! Lines written to a stream whose reader may be gone: `pmu-qemu-run ... |
//! head` closes the pipe after ten lines, and a write to it fails with
//! `EPIPE` (Rust's runtime ignores `SIGPIPE`, so `println!` would panic,
//! exit status 101). The runner stops instead, quietly: QEMU killed,
//! nothing more printed, exit status [`CLOSED_STATUS`].

use std::fmt;
use std::io::{self, Write};

/// The binary's exit status when its standard output is a closed pipe: 141
/// (128 + 13, `SIGPIPE`), what a shell reports for a program that
/// `SIGPIPE` ended, as it ends most programs at `| head`.
pub const CLOSED_STATUS: u8 = 141;

/// The stream's reader is gone (the write failed with `EPIPE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Closed;

impl fmt::Display for Closed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the output's reader is gone (a closed pipe)")
    }
}

impl std::error::Error for Closed {}

/// Writes `args` and a newline to `w`, then flushes it. `Err(Closed)` when
/// the reader is gone; any other error loses the line and nothing else (as
/// a full disk would).
pub fn line(w: &mut impl Write, args: fmt::Arguments<'_>) -> Result<(), Closed> {
    let written = w
        .write_fmt(args)
        .and_then(|()| w.write_all(b"\n"))
        .and_then(|()| w.flush());
    match written {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Err(Closed),
        _ => Ok(()),
    }
}

/// [`line()`] on this process's standard output.
pub fn stdout(args: fmt::Arguments<'_>) -> Result<(), Closed> {
    line(&mut io::stdout().lock(), args)
}

/// [`line()`] on this process's standard error, the line lost when nobody
/// reads it (a diagnostic: the exit status still says what happened).
pub fn stderr(args: fmt::Arguments<'_>) {
    let _ = line(&mut io::stderr().lock(), args);
}

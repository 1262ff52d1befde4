//! `pmu-defmt-decode KERNEL.elf FRAMES`: decode the defmt frames a kernel
//! wrote (the bytes QEMU saved from its COM2, see `hobby::defmt_serial`)
//! with the format table in the kernel's ELF, and print one message per
//! line. Fails on a missing table or a malformed frame.
//!
//! A separate program, on the pinned `defmt-decoder` library: cargo builds
//! it for this package's QEMU test (`tests/qemu.rs`), which runs it on the
//! `defmt_log` kernel's frames; `cargo qemu` does not need it.

use std::process::ExitCode;

use defmt_decoder::{DecodeError, Table};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pmu-defmt-decode: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [elf, frames] = args.as_slice() else {
        return Err("usage: pmu-defmt-decode KERNEL.elf FRAMES".into());
    };
    let elf = std::fs::read(elf).map_err(|e| format!("{elf}: {e}"))?;
    let table = Table::parse(&elf)
        .map_err(|e| format!("reading the defmt table: {e}"))?
        .ok_or("the kernel has no .defmt section: it does not log with defmt")?;
    let bytes = std::fs::read(frames).map_err(|e| format!("{frames}: {e}"))?;
    let mut stream = table.new_stream_decoder();
    stream.received(&bytes);
    loop {
        match stream.decode() {
            Ok(frame) => println!("{}", frame.display_message()),
            Err(DecodeError::UnexpectedEof) => return Ok(()),
            Err(DecodeError::Malformed) => return Err("a malformed frame".into()),
        }
    }
}

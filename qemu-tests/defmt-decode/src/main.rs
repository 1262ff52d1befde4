//! `pmu-defmt-decode KERNEL.elf FRAMES`: decode the defmt frames a kernel
//! wrote with the format table in the kernel's ELF
//! ([`pmu_defmt_decode::decode`]) and print one message per line. Fails on a
//! missing table or a malformed frame.

use std::process::ExitCode;

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
    let bytes = std::fs::read(frames).map_err(|e| format!("{frames}: {e}"))?;
    for message in pmu_defmt_decode::decode(&elf, &bytes)? {
        println!("{message}");
    }
    Ok(())
}

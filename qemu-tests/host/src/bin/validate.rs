//! `cargo validate`: the validation run (every real-PMU case of every
//! architecture on this machine's CPU) and its report; `cargo validate
//! iso` makes the bootable image for bare metal. See
//! `qemu_host::validate`.

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    qemu_host::validate::main(&args)
}

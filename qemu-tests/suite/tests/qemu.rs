//! The QEMU half of `cargo test` (`harness = false`): builds every test and
//! example kernel, boots each under QEMU, prints every case, and ends with
//! the line `N passed, N failed`. The work is in `qemu-tests/host`; the
//! defmt frames of a kernel that logs with defmt are decoded by this
//! package's program, which cargo built for this test.

fn main() -> std::process::ExitCode {
    let decoder = std::path::Path::new(env!("CARGO_BIN_EXE_pmu-defmt-decode"));
    qemu_host::Workspace::new().test_all(decoder)
}

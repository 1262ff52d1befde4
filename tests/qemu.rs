//! The QEMU half of `cargo test` (`harness = false`): builds every test and
//! example kernel, boots each under QEMU, prints every case, and ends with
//! the line `N passed, N failed`. The work is in `qemu-tests/host`.

fn main() -> std::process::ExitCode {
    qemu_host::Workspace::new().test_all()
}

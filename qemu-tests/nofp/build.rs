//! Links the kernels with the hobby kernel's linker script, as non-PIE
//! images QEMU boots through their PVH note. `hobby.ld` comes with the
//! pmu-hobby crate, whose build script puts it on the linker's search path.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("none") {
        println!("cargo:rustc-link-arg-bins=-Thobby.ld");
        println!("cargo:rustc-link-arg-bins=--no-pie");
    }
}

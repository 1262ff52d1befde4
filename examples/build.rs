//! The examples are hobby-OS kernels: link them with the hobby kernel's
//! linker script, as non-PIE ELF images that QEMU boots.

fn main() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../qemu-tests/linker.ld");
    println!("cargo:rerun-if-changed={script}");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("none") {
        println!("cargo:rustc-link-arg-bins=-T{script}");
        println!("cargo:rustc-link-arg-bins=--no-pie");
    }
}

//! Link with the hobby kernel's linker script (it comes with pmu-hobby) as
//! a non-PIE image, which QEMU boots through its PVH note.

fn main() {
    println!("cargo:rustc-link-arg-bins=-Thobby.ld");
    println!("cargo:rustc-link-arg-bins=--no-pie");
}

//! Puts the kernel's linker script, `hobby.ld`, on the linker's search path
//! of every crate that depends on this one, so that a kernel's own build
//! script needs two lines and copies no file:
//!
//! ```no_run
//! println!("cargo:rustc-link-arg-bins=-Thobby.ld");
//! println!("cargo:rustc-link-arg-bins=--no-pie");
//! ```
//!
//! (The linker looks for a `-T` script in the `-L` directories, which cargo
//! passes on from here.)

fn main() {
    println!("cargo:rerun-if-changed=hobby.ld");
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    std::fs::copy("hobby.ld", std::path::Path::new(&out).join("hobby.ld"))
        .expect("copy hobby.ld to OUT_DIR");
    println!("cargo:rustc-link-search=native={out}");
}

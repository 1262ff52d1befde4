//! Puts the kernel's linker script, `hobby.ld`, on the linker's search path
//! of every crate that depends on this one, so that a kernel links with
//!
//! ```toml
//! # .cargo/config.toml of the kernel crate
//! [target.x86_64-unknown-none]
//! rustflags = ["-C", "link-arg=-Thobby.ld", "-C", "link-arg=--no-pie"]
//! ```
//!
//! and copies no file (the linker looks for a `-T` script in the `-L`
//! directories, which cargo passes on from here).

fn main() {
    println!("cargo:rerun-if-changed=hobby.ld");
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    std::fs::copy("hobby.ld", std::path::Path::new(&out).join("hobby.ld"))
        .expect("copy hobby.ld to OUT_DIR");
    println!("cargo:rustc-link-search=native={out}");
}

//! The binary's link: a release build of the x86_64 binary discards the unwind tables
//! (`link/no-unwind.ld`, docs/build.md "Unwind tables"). rdma-core's static link is
//! `crates/observe/build.rs`'s.

use std::env;
use std::path::Path;

fn main() {
    let script =
        Path::new(&env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("link/no-unwind.ld");
    println!("cargo:rerun-if-changed={}", script.display());
    let release = env::var("PROFILE").as_deref() == Ok("release");
    let x86_64 = env::var("TARGET").as_deref() == Ok("x86_64-unknown-linux-gnu");
    if release && x86_64 {
        println!("cargo:rustc-link-arg-bins=-Wl,-T,{}", script.display());
    }
}

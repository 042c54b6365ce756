//! The binary's link: a release build of the x86_64 binary discards the unwind tables
//! (`link/no-unwind.ld`, docs/build.md "Unwind tables"). rdma-core's static link is
//! `crates/observe/build.rs`'s. Also the facts `--version` prints that only the build knows: the
//! commit it was built from and the rdma-core version it links.

use std::env;
use std::path::Path;
use std::process::Command;

fn main() {
    let script =
        Path::new(&env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("link/no-unwind.ld");
    println!("cargo:rerun-if-changed={}", script.display());
    let release = env::var("PROFILE").as_deref() == Ok("release");
    let x86_64 = env::var("TARGET").as_deref() == Ok("x86_64-unknown-linux-gnu");
    if release && x86_64 {
        println!("cargo:rustc-link-arg-bins=-Wl,-T,{}", script.display());
    }
    println!("cargo:rustc-env=NCCL_WRAP_COMMIT={}", commit());
    println!("cargo:rustc-env=NCCL_WRAP_RDMA_CORE={}", rdma_core());
}

/// The commit checked out, from git; "unknown" outside a git checkout (a source tarball) or
/// without git. A checkout's HEAD and the branch it names are watched, so a new commit rebuilds.
fn commit() -> String {
    let git = |args: &[&str]| {
        let out = Command::new("git").args(args).output().ok().filter(|o| o.status.success())?;
        String::from_utf8(out.stdout).ok().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
    };
    let Some(commit) = git(&["rev-parse", "HEAD"]) else {
        return "unknown".into();
    };
    let branch = git(&["symbolic-ref", "-q", "HEAD"]);
    for name in ["HEAD", "packed-refs"].into_iter().map(String::from).chain(branch) {
        if let Some(path) = git(&["rev-parse", "--git-path", &name]) {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    commit
}

/// The rdma-core release linked: libibverbs' pkg-config version is `1.14.44.0` for rdma-core
/// 44.0, its last two parts. Asked as `crates/observe/build.rs` asks for the static link (the
/// target's own .pc files on a cross build), so the two name the same libraries.
fn rdma_core() -> String {
    let target = env::var("TARGET").expect("cargo sets TARGET");
    let cross = env::var("HOST").expect("cargo sets HOST") != target;
    let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("cargo sets CARGO_CFG_TARGET_ARCH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_LIBDIR");
    let mut pkg_config = Command::new("pkg-config");
    pkg_config.args(["--modversion", "libibverbs"]);
    if let Some(dir) = target_var("PKG_CONFIG_LIBDIR", &target) {
        pkg_config.env("PKG_CONFIG_LIBDIR", dir);
    } else if cross && env::var_os("PKG_CONFIG_LIBDIR").is_none() {
        pkg_config.env("PKG_CONFIG_LIBDIR", format!("/usr/lib/{arch}-linux-gnu/pkgconfig:/usr/share/pkgconfig"));
    }
    if let Some(dirs) = target_var("PKG_CONFIG_PATH", &target) {
        pkg_config.env("PKG_CONFIG_PATH", dirs);
    }
    let Some(version) = pkg_config
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
    else {
        return "unknown".into();
    };
    let parts: Vec<&str> = version.split('.').collect();
    match parts.len() {
        4 => format!("{}.{}", parts[2], parts[3]),
        _ => format!("unknown (libibverbs {version})"),
    }
}

/// `NAME_<target>`, then `NAME_<target with underscores>`, as `crates/observe/build.rs` reads them.
fn target_var(name: &str, target: &str) -> Option<std::ffi::OsString> {
    for key in [format!("{name}_{target}"), format!("{name}_{}", target.replace('-', "_"))] {
        println!("cargo:rerun-if-env-changed={key}");
        if let Some(v) = env::var_os(&key) {
            return Some(v);
        }
    }
    None
}

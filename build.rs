//! Links rdma-core statically: libibverbs, every provider Debian ships, and libnl.
//!
//! `rdma-sys` only generates the bindings; the libraries it asks for are the dynamic ones. A
//! container entrypoint must not depend on the image carrying rdma-core, so we link the static
//! archives here, in the order `pkg-config --static --libs libibverbs` gives them.
//!
//! In a static link libibverbs cannot dlopen providers from disk: each provider registers itself
//! from a constructor in its own object file, and that object is only linked in when something
//! references its `verbs_provider_<name>` symbol. So this script also writes
//! `$OUT_DIR/static_providers.rs`, which names every provider it linked and calls
//! `ibv_static_providers(NULL, &verbs_provider_x, ..., NULL)` (what verbs.h does under
//! RDMA_STATIC_PROVIDERS). `src/verbs/ffi.rs` includes it.
//!
//! Build needs: libibverbs-dev, ibverbs-providers, librdmacm-dev (rdma-sys's bindings),
//! libnl-3-dev, libnl-route-3-dev, pkg-config, clang and libclang-dev (bindgen).
//!
//! Cross builds (`--target aarch64-unknown-linux-gnu`) read the target's Debian multiarch
//! libraries: the same packages as `:arm64` (`dpkg --add-architecture arm64`). pkg-config is asked
//! with `PKG_CONFIG_LIBDIR` pointing at `/usr/lib/<multiarch>/pkgconfig` unless the environment
//! names one for the target (`PKG_CONFIG_LIBDIR_<target>`, as the pkg-config crate reads it for
//! rdma-sys; `.cargo/config.toml` sets it), and only that multiarch directory is searched: the
//! host's `/usr/lib` holds archives of the wrong architecture.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Libraries pkg-config names that are not rdma-core providers.
const NOT_PROVIDERS: &[&str] = &["ibverbs", "nl-3", "nl-route-3"];
/// Part of glibc itself since 2.34; `+crt-static` links it already.
const LIBC_PARTS: &[&str] = &["pthread", "dl", "rt", "m", "c"];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_LIBDIR");

    let target = env::var("TARGET").expect("cargo sets TARGET");
    let cross = env::var("HOST").expect("cargo sets HOST") != target;
    let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("cargo sets CARGO_CFG_TARGET_ARCH");
    // Debian's multiarch tuple: x86_64-linux-gnu, aarch64-linux-gnu.
    let multiarch = PathBuf::from(format!("/usr/lib/{arch}-linux-gnu"));

    let mut pkg_config = Command::new("pkg-config");
    pkg_config.args(["--static", "--libs", "libibverbs"]);
    if let Some(dir) = target_var("PKG_CONFIG_LIBDIR", &target) {
        pkg_config.env("PKG_CONFIG_LIBDIR", dir);
    } else if cross && env::var_os("PKG_CONFIG_LIBDIR").is_none() {
        // The host's own .pc files would name the host's libraries.
        pkg_config.env("PKG_CONFIG_LIBDIR", format!("{}/pkgconfig:/usr/share/pkgconfig", multiarch.display()));
    }
    if let Some(dirs) = target_var("PKG_CONFIG_PATH", &target) {
        pkg_config.env("PKG_CONFIG_PATH", dirs);
    }
    let out = pkg_config
        .output()
        .unwrap_or_else(|e| panic!("running pkg-config: {e} (install pkg-config and libibverbs-dev)"));
    if !out.status.success() {
        panic!(
            "pkg-config --static --libs libibverbs failed: {} (install libibverbs-dev)",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let flags = String::from_utf8(out.stdout).expect("pkg-config printed non-UTF-8");

    let mut search: Vec<PathBuf> = Vec::new();
    let mut libs: Vec<String> = Vec::new();
    for flag in flags.split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            search.push(PathBuf::from(dir));
        } else if let Some(lib) = flag.strip_prefix("-l") {
            if LIBC_PARTS.contains(&lib) {
                continue;
            }
            // pkg-config repeats libibverbs after the providers (they call back into it). Keep
            // each library at its last position: providers, then libibverbs, then libnl.
            libs.retain(|l| l != lib);
            libs.push(lib.to_owned());
        }
    }
    // The multiarch directory is a default pkg-config leaves out; the static archives live there.
    search.push(multiarch);
    if !cross {
        search.push(PathBuf::from("/usr/lib64"));
        search.push(PathBuf::from("/usr/lib"));
    }

    for dir in &search {
        if dir.is_dir() {
            println!("cargo:rustc-link-search=native={}", dir.display());
        }
    }

    let mut providers = Vec::new();
    for lib in &libs {
        let archive = format!("lib{lib}.a");
        if !search.iter().any(|d| d.join(&archive).is_file()) {
            panic!("{archive} not found in {search:?}: a static build needs the .a from libibverbs-dev / libnl-3-dev / libnl-route-3-dev");
        }
        println!("cargo:rustc-link-lib=static={lib}");
        if !NOT_PROVIDERS.contains(&lib.as_str()) {
            providers.push(provider_name(lib));
        }
    }
    if providers.is_empty() {
        panic!("pkg-config --static --libs libibverbs named no provider libraries ({flags})");
    }

    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    write_provider_table(&out_dir.join("static_providers.rs"), &providers);
}

/// `NAME_<target>`, then `NAME_<target with underscores>`: the per-target variables the pkg-config
/// crate reads, so this script and rdma-sys's ask the same pkg-config.
fn target_var(name: &str, target: &str) -> Option<std::ffi::OsString> {
    for key in [format!("{name}_{target}"), format!("{name}_{}", target.replace('-', "_"))] {
        println!("cargo:rerun-if-env-changed={key}");
        if let Some(v) = env::var_os(&key) {
            return Some(v);
        }
    }
    None
}

/// `bnxt_re-rdmav34` -> `bnxt_re`, `mlx5` -> `mlx5`: the `verbs_provider_<name>` suffix.
fn provider_name(lib: &str) -> String {
    match lib.find("-rdmav") {
        Some(i) => lib[..i].to_owned(),
        None => lib.to_owned(),
    }
}

fn write_provider_table(path: &Path, providers: &[String]) {
    let mut s = String::new();
    s.push_str("// Generated by build.rs from `pkg-config --static --libs libibverbs`.\n\n");
    s.push_str("/// `struct verbs_device_ops`; only its address is ever used.\n");
    s.push_str("#[repr(C)]\npub(crate) struct VerbsDeviceOps {\n    _opaque: [u8; 0],\n}\n\n");
    s.push_str("extern \"C\" {\n");
    s.push_str("    fn ibv_static_providers(unused: *mut ::std::ffi::c_void, ...);\n");
    for p in providers {
        writeln!(s, "    static verbs_provider_{p}: VerbsDeviceOps;").expect("write to String");
    }
    s.push_str("}\n\n");
    writeln!(
        s,
        "/// Providers linked into this binary, as `ibv_devinfo` names their drivers.\npub(crate) const STATIC_PROVIDERS: [&str; {}] = [{}];\n",
        providers.len(),
        providers.iter().map(|p| format!("{p:?}")).collect::<Vec<_>>().join(", ")
    )
    .expect("write to String");
    s.push_str("/// References every provider's `verbs_provider_<name>` so the linker keeps its object file,\n");
    s.push_str("/// whose constructor registers the driver with libibverbs.\n");
    s.push_str("pub(crate) fn register_static_providers() {\n");
    s.push_str("    // SAFETY: ibv_static_providers takes a NULL-terminated list of `const struct\n");
    s.push_str("    // verbs_device_ops *`; each argument is the address of a provider's static descriptor,\n");
    s.push_str("    // which lives for the whole program, and the last argument is the terminating NULL. The\n");
    s.push_str("    // function only reads the list and keeps no pointer to it.\n");
    s.push_str("    unsafe {\n        ibv_static_providers(\n            ::std::ptr::null_mut(),\n");
    for p in providers {
        writeln!(s, "            ::std::ptr::addr_of!(verbs_provider_{p}),").expect("write to String");
    }
    s.push_str("            ::std::ptr::null::<VerbsDeviceOps>(),\n        );\n    }\n}\n");
    fs::write(path, s).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

//! Links rdma-core statically: libibverbs and the providers of GPU nodes' RDMA devices.
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
//! Only the providers in [`LINKED_PROVIDERS`] are linked (README, "Build", says why each of the
//! others is left out). A device whose driver has no provider here is not listed by libibverbs;
//! the verbs probe reports it as not checked, never as unusable (`src/verbs/driver.rs`), and NCCL,
//! which loads the image's own rdma-core, is not affected.
//!
//! Three parts of rdma-core that nccl-wrap can do without are left out by answering, from Rust,
//! the functions through which the rest of rdma-core would pull them in ([`STUBBED`]): the linker
//! takes an archive member only for a symbol nothing else defines. This script reads which
//! global functions each such member defines (its `ar` index and ELF symbol table) and writes
//! `$OUT_DIR/rdma_stubs.rs` with one stub for each; a member this rdma-core does not have gets
//! none. `src/verbs/ffi.rs` includes it.
//! - libibverbs' neighbour resolver (`neigh.c`, over libnl-route) serves only
//!   `ibv_resolve_eth_l2_from_gid`, which providers call to build UD address handles
//!   (`ibv_create_ah`). nccl-wrap makes RC queue pairs only, whose route the kernel resolves at
//!   `ibv_modify_qp`. Its stubs fail with ENOSYS, as rdma-core built without libnl does
//!   (NRESOLVE_NEIGH): 150 KB with libnl-route and the libc parts only they use.
//! - libibverbs' device discovery over RDMA netlink (`ibdev_nl.c`, over libnl-3): nccl-wrap
//!   answers `find_sysfs_devs_nl` itself, over its own netlink socket and only for the devices it
//!   opens (`src/verbs/nldev.rs`; the forwarder below), where the rdma-core linked is the one
//!   whose `struct verbs_sysfs_dev` it fills (`DISCOVERY_PREFIX`); with another, the stub fails
//!   with ENOSYS and libibverbs lists devices from sysfs (`find_sysfs_devs`, its own fallback for
//!   kernels without RDMA netlink). `get_copy_on_fork` says "not known" (false), so
//!   `ibv_fork_init` would still mark registered memory: 80 KB with libnl-3.
//! - mlx5's VFIO driver (`mlx5_vfio.c`) serves only devices made by
//!   `mlx5dv_get_vfio_device_list`, which nccl-wrap never calls; mlx5 asks `is_mlx5_vfio_dev`
//!   of every device, and "no" (0) is the exact answer here: 40 KB.
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
/// An archive member stubbed out, and what each of its functions returns (see the top).
struct Stubbed {
    archive: &'static str,
    member: &'static str,
    returns: i32,
    /// Functions that answer otherwise, by name without rdma-core's version prefix.
    except: &'static [(&'static str, i32)],
}

/// The version prefix of the rdma-core whose `struct verbs_sysfs_dev` (`libibverbs/driver.h`)
/// `src/verbs/ffi.rs` fills: rdma-core v44 (Debian 12's 44.0). With this prefix,
/// `find_sysfs_devs_nl` is forwarded to `crate::verbs::ffi::find_sysfs_devs_nl`.
const DISCOVERY_PREFIX: &str = "rdmacore44_0_";

const STUBBED: &[Stubbed] = &[
    // -ENOSYS (38 on x86_64 and aarch64 alike).
    Stubbed { archive: "libibverbs.a", member: "neigh.c.o", returns: -38, except: &[] },
    // Device discovery over RDMA netlink: failing it (ENOSYS), libibverbs lists the devices from
    // sysfs, as it does on kernels without RDMA netlink; copy-on-fork is reported as not known,
    // so that ibv_fork_init would still mark registered memory. libnl-3 then goes too.
    Stubbed { archive: "libibverbs.a", member: "ibdev_nl.c.o", returns: -38, except: &[("get_copy_on_fork", 0)] },
    Stubbed { archive: "libmlx5.a", member: "mlx5_vfio.c.o", returns: 0, except: &[] },
];

/// The providers linked, by their `verbs_provider_<name>` suffix: the RDMA devices of GPU nodes
/// that NCCL's IB/RoCE transport can drive. mlx5: ConnectX-4 and later, BlueField (InfiniBand and
/// RoCE); efa: AWS; bnxt_re: Broadcom NetXtreme RoCE; irdma: Intel E810 (RoCE); erdma: Alibaba
/// Cloud; rxe: Soft-RoCE (the labs). Left out: mana (Azure's front-end NIC: Azure's GPU VMs carry
/// NCCL over ConnectX InfiniBand, mlx5), cxgb4 and siw (iWARP, which NCCL's
/// verbs transport cannot use), qedr (FastLinQ, iWARP/RoCE NICs not found on GPU nodes), mlx4
/// (ConnectX-3, end of life), mthca (InfiniHost), ocrdma (Emulex OneConnect), vmw_pvrdma
/// (VMware's paravirtual device), hfi1verbs and ipathverbs (Omni-Path and QLogic InfiniPath,
/// which NCCL reaches through its own PSM2/OFI plugins, not verbs) and hns (HiSilicon Kunpeng
/// SoC NICs).
const LINKED_PROVIDERS: &[&str] = &["mlx5", "efa", "bnxt_re", "irdma", "erdma", "rxe"];
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
        let is_provider = !NOT_PROVIDERS.contains(&lib.as_str());
        if is_provider && !LINKED_PROVIDERS.contains(&provider_name(lib).as_str()) {
            continue;
        }
        let archive = format!("lib{lib}.a");
        if !search.iter().any(|d| d.join(&archive).is_file()) {
            panic!("{archive} not found in {search:?}: a static build needs the .a from libibverbs-dev / libnl-3-dev / libnl-route-3-dev");
        }
        println!("cargo:rustc-link-lib=static={lib}");
        if is_provider {
            providers.push(provider_name(lib));
        }
    }
    if !providers.iter().any(|p| p == "mlx5") {
        panic!("pkg-config --static --libs libibverbs named no mlx5 provider ({flags}): install ibverbs-providers");
    }

    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    write_provider_table(&out_dir.join("static_providers.rs"), &providers);

    let mut stubs = Vec::new();
    let mut forwarded = Vec::new();
    for st in STUBBED {
        let path = search
            .iter()
            .map(|d| d.join(st.archive))
            .find(|p| p.is_file())
            .unwrap_or_else(|| panic!("{} not found in {search:?}", st.archive));
        println!("cargo:rerun-if-changed={}", path.display());
        let archive = fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        if let Some(obj) = archive_member(&archive, st.member) {
            let what = format!("{}({})", st.archive, st.member);
            for f in elf_defined_functions(obj, &what) {
                if f == format!("{DISCOVERY_PREFIX}find_sysfs_devs_nl") {
                    forwarded.push((f, what.clone()));
                    continue;
                }
                let own = st.except.iter().find(|(name, _)| f.ends_with(&format!("_{name}")) || f == *name);
                let ret = own.map_or(st.returns, |(_, r)| *r);
                stubs.push((f, what.clone(), ret));
            }
        }
    }
    if stubs.iter().any(|(f, _, _)| f.ends_with("_find_sysfs_devs_nl")) {
        println!(
            "cargo:warning=the rdma-core linked is not {DISCOVERY_PREFIX}: libibverbs lists devices from sysfs (every uverbs device's files at each listing)"
        );
    }
    write_stubs(&out_dir.join("rdma_stubs.rs"), &stubs, &forwarded);
}

/// The member called `name` of a System V / GNU `ar` archive (short names end in `/`; long names
/// are `/<offset>` into the `//` member).
fn archive_member<'a>(ar: &'a [u8], name: &str) -> Option<&'a [u8]> {
    let mut at = ar.strip_prefix(b"!<arch>\n".as_slice()).map(|_| 8)?;
    let mut long_names: &[u8] = &[];
    while at + 60 <= ar.len() {
        let header = &ar[at..at + 60];
        let size: usize = std::str::from_utf8(&header[48..58]).ok()?.trim().parse().ok()?;
        let body = ar.get(at + 60..at + 60 + size)?;
        let raw = std::str::from_utf8(&header[..16]).ok()?.trim_end();
        if raw == "//" {
            long_names = body;
        } else {
            let member = match raw.strip_prefix('/').and_then(|o| o.parse::<usize>().ok()) {
                Some(offset) => {
                    let rest = long_names.get(offset..)?;
                    let end = rest.iter().position(|&b| b == b'/' || b == b'\n').unwrap_or(rest.len());
                    std::str::from_utf8(&rest[..end]).ok()?
                }
                None => raw.strip_suffix('/').unwrap_or(raw),
            };
            if member == name {
                return Some(body);
            }
        }
        at += 60 + size + size % 2;
    }
    None
}

/// Names of the global functions an ELF64 little-endian relocatable object defines (x86_64 and
/// aarch64 alike).
fn elf_defined_functions(obj: &[u8], what: &str) -> Vec<String> {
    let u16_at = |o: usize| obj.get(o..o + 2).map_or(0, |b| u16::from_le_bytes([b[0], b[1]]) as usize);
    let u32_at = |o: usize| obj.get(o..o + 4).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
    let u64_at =
        |o: usize| obj.get(o..o + 8).map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")) as usize);
    if obj.get(..6) != Some(b"\x7fELF\x02\x01".as_slice()) {
        panic!("{what} is not a 64-bit little-endian ELF object");
    }
    let (shoff, shentsize, shnum) = (u64_at(0x28), u16_at(0x3a), u16_at(0x3c));
    let section = |i: usize| shoff + i * shentsize;
    let mut names = Vec::new();
    for i in 0..shnum {
        const SHT_SYMTAB: usize = 2;
        if u32_at(section(i) + 4) != SHT_SYMTAB {
            continue;
        }
        let (symoff, symsize, strtab) =
            (u64_at(section(i) + 0x18), u64_at(section(i) + 0x20), u32_at(section(i) + 0x28));
        let stroff = u64_at(section(strtab) + 0x18);
        for sym in (symoff..symoff + symsize).step_by(24) {
            let (info, shndx) = (obj.get(sym + 4).copied().unwrap_or(0), u16_at(sym + 6));
            // STB_GLOBAL, STT_FUNC, defined here (not SHN_UNDEF).
            if info >> 4 != 1 || info & 0xf != 2 || shndx == 0 {
                continue;
            }
            let name = &obj[stroff + u32_at(sym)..];
            let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
            names.push(String::from_utf8_lossy(&name[..end]).into_owned());
        }
    }
    names
}

fn write_stubs(path: &Path, stubs: &[(String, String, i32)], forwarded: &[(String, String)]) {
    let mut s = String::new();
    s.push_str("// Generated by build.rs: the functions of the rdma-core archive members it leaves out.\n\n");
    writeln!(
        s,
        "/// Each stub's symbol and the value it returns.\n#[cfg(test)]\npub(crate) const STUBS: [(&str, ::std::ffi::c_int, extern \"C\" fn() -> ::std::ffi::c_int); {}] = [{}];\n",
        stubs.len(),
        stubs.iter().enumerate().map(|(i, (f, _, r))| format!("({f:?}, {r}, stub_{i})")).collect::<Vec<_>>().join(", "),
    )
    .expect("write to String");
    for (i, (name, what, ret)) in stubs.iter().enumerate() {
        writeln!(
            s,
            "/// Stands in for `{name}` of {what}: returns {ret} (see build.rs).\n\
             #[export_name = {name:?}]\n\
             pub(crate) extern \"C\" fn stub_{i}() -> ::std::ffi::c_int {{\n    {ret}\n}}\n"
        )
        .expect("write to String");
    }
    for (name, what) in forwarded {
        writeln!(
            s,
            "/// Stands in for `{name}` of {what}: nccl-wrap's own discovery (see build.rs).\n\
             #[export_name = {name:?}]\n\
             pub(crate) extern \"C\" fn find_sysfs_devs_nl(list: *mut ::std::ffi::c_void) -> ::std::ffi::c_int {{\n    super::find_sysfs_devs_nl(list)\n}}\n"
        )
        .expect("write to String");
    }
    writeln!(s, "/// Whether libibverbs' discovery goes through nccl-wrap's own.\n#[cfg(test)]\npub(crate) const DISCOVERY: bool = {};", !forwarded.is_empty())
        .expect("write to String");
    fs::write(path, s).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
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

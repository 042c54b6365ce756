//! The training image's own RDMA userspace: the files NCCL here will load (`libibverbs.so.1`, each driver's provider,
//! NCCL, net plugins), found by the image's loader rules under its root, or the package that provides a missing one.
//! `stat`s, a few listings and bounded reads only; never loads or runs anything, never leaves the image root.

use std::ffi::OsStr;
use std::path::Path;

use serde::Serialize;

use crate::detect::image::{exists, inside, DIR_ENTRIES};
use crate::detect::sysfs::Sysfs;
use crate::detect::{file, ldcache, python, Vars};

/// How much to read: the start path's few `stat`s, or doctor's full look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Depth {
    #[default]
    Quick,
    Full,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Found {
    pub path: String,
    /// `LD_LIBRARY_PATH`, `ld.so.cache`, `default path`, `PyTorch wheel`, or the variable that named it.
    pub by: String,
}

/// The provider libibverbs needs for one driver, and whether the image has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Provider {
    /// rdma-core's provider name: `mlx5`, `rxe`, `efa`...
    pub name: String,
    pub devices: Vec<String>,
    /// `/etc/libibverbs.d/<name>.driver`, when present.
    pub config: Option<String>,
    /// `lib<name>-rdmav<N>.so` next to libibverbs, when present.
    pub library: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Nccl {
    #[serde(flatten)]
    pub found: Found,
    /// `2.28.9`: from the file name a symlink points at, or (doctor) from the library's text.
    pub version: Option<String>,
}

/// A piece NCCL needs that the image lacks, with the package that provides it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Missing {
    pub file: String,
    pub package: &'static str,
    /// What NCCL does without it.
    pub(crate) effect: String,
}

impl Missing {
    pub fn describe(&self) -> String {
        format!("the image lacks {} ({}): {}", self.file, self.package, self.effect)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Userspace {
    pub image_root: String,
    /// What the loader cache said: `N entries`, `absent`, or why it was not read.
    pub(crate) ld_cache: String,
    pub libibverbs: Option<Found>,
    pub providers: Vec<Provider>,
    pub nccl: Option<Nccl>,
    /// An NCCL net plugin the image holds (`libnccl-net*.so`, `NCCL_NET_PLUGIN`).
    pub net_plugin: Option<Found>,
    /// `libfabric.so.1`, looked for where a device's provider is EFA's (aws-ofi-nccl loads it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub libfabric: Option<Found>,
    pub missing: Vec<Missing>,
}

const VERBS_PKG: &str = "libibverbs1 on Debian/Ubuntu, libibverbs from rdma-core on RHEL";
const PROVIDER_PKG: &str = "ibverbs-providers on Debian/Ubuntu, libibverbs from rdma-core on RHEL";
const SOCKETS: &str =
    "NCCL's IB transport cannot start and NCCL runs over TCP sockets, silently at the default log level";
/// NCCL's library is scanned this far for its version (doctor only).
const NCCL_SCAN_BYTES: u64 = 1 << 30;

/// The loader's default directories (glibc's, with Debian's multiarch ones first).
#[cfg(target_arch = "aarch64")]
const DEFAULT_DIRS: [&str; 6] =
    ["/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"];
#[cfg(not(target_arch = "aarch64"))]
const DEFAULT_DIRS: [&str; 6] =
    ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"];

pub(crate) struct Loader<'a> {
    root: &'a Path,
    ld_path: Vec<String>,
    /// The cache's bytes, read once and searched per name (`ldcache::find`).
    cache: Option<Vec<u8>>,
    cache_note: String,
}

impl<'a> Loader<'a> {
    pub fn new(root: &'a Path, vars: &Vars) -> Loader<'a> {
        let ld_path = vars
            .get(OsStr::new("LD_LIBRARY_PATH"))
            .map(|v| v.to_string_lossy().split([':', ';']).filter(|d| d.starts_with('/')).map(String::from).collect())
            .unwrap_or_default();
        let (cache, cache_note) = match inside(root, "etc/ld.so.cache").map(|p| file::read(&p, ldcache::MAX_BYTES)) {
            Some(Ok(b)) => match ldcache::count(&b) {
                Some(n) => (Some(b), format!("{n} entries")),
                None => (None, "not a glibc ld.so.cache; only the default directories searched".into()),
            },
            Some(Err(e)) if e.is_not_found() => (None, "absent".into()),
            Some(Err(e)) => (None, e.to_string()),
            None => (None, "absent".into()),
        };
        Loader { root, ld_path, cache, cache_note }
    }

    /// The file the loader opens for `name`: `LD_LIBRARY_PATH`, then the cache, then `DEFAULT_DIRS`.
    pub(crate) fn find(&self, name: &str) -> Option<Found> {
        if name.contains('/') {
            return exists(self.root, name).then(|| Found { path: name.into(), by: "a path".into() });
        }
        let cached = || {
            let e = self.cache.as_deref().and_then(|c| ldcache::find(c, name))?;
            exists(self.root, &e.path).then(|| Found { path: e.path, by: "ld.so.cache".into() })
        };
        let default = || DEFAULT_DIRS.iter().map(|d| format!("{d}/{name}")).find(|p| exists(self.root, p));
        self.in_ld_path(name)
            .or_else(cached)
            .or_else(|| default().map(|path| Found { path, by: "default path".into() }))
    }

    fn in_ld_path(&self, name: &str) -> Option<Found> {
        let mut paths = self.ld_path.iter().map(|d| format!("{}/{name}", d.trim_end_matches('/')));
        paths.find(|p| exists(self.root, p)).map(|path| Found { path, by: "LD_LIBRARY_PATH".into() })
    }
}

/// rdma-core provider -> the kernel drivers (an auxiliary one up to its first `.`) of its devices:
/// every provider rdma-core ships, linked or not, so that a message can name the missing one.
const PROVIDER_OF: &[(&str, &[&str])] = &[
    ("mlx5", &["mlx5_core"]),
    ("efa", &["efa"]),
    ("bnxt_re", &["bnxt_en", "bnxt_re"]),
    ("irdma", &["ice", "i40e", "irdma", "idpf"]),
    ("mana", &["mana", "mana_ib"]),
    ("erdma", &["erdma"]),
    ("rxe", &["rdma_rxe"]),
    ("siw", &["siw"]),
    ("mlx4", &["mlx4_core"]),
    ("mthca", &["ib_mthca"]),
    ("cxgb4", &["cxgb4", "iw_cxgb4"]),
    ("qedr", &["qede", "qedr"]),
    ("ocrdma", &["be2net", "ocrdma"]),
    ("vmw_pvrdma", &["vmw_pvrdma"]),
    ("hfi1verbs", &["hfi1"]),
    ("ipathverbs", &["ib_qib"]),
    ("hns", &["hns3", "hns_roce_hw_v2"]),
];

/// The rdma-core provider that serves devices of kernel driver `driver`, when one is known.
pub fn provider_of_driver(driver: &str) -> Option<&'static str> {
    let module = driver.split('.').next().unwrap_or(driver);
    PROVIDER_OF.iter().find(|(_, d)| d.contains(&module)).map(|(p, _)| *p)
}

/// rdma-core's provider for a device, from its kernel driver or its name (`mlx5_3` -> `mlx5`).
pub fn provider_for(device: &str, kernel_driver: Option<&str>) -> Option<&'static str> {
    if let Some(p) = kernel_driver.and_then(provider_of_driver) {
        return Some(p);
    }
    let stem = device.trim_end_matches(|c: char| c.is_ascii_digit()).trim_end_matches('_');
    PROVIDER_OF.iter().map(|(p, _)| *p).find(|p| *p == stem)
}

/// Where libibverbs looks for providers: beside it (merged /usr), and the distributions' own paths.
fn provider_dirs(beside: &str) -> Vec<String> {
    let triplet = if cfg!(target_arch = "aarch64") { "aarch64-linux-gnu" } else { "x86_64-linux-gnu" };
    let mut dirs =
        vec![beside.to_string(), format!("/usr/lib/{triplet}/libibverbs"), "/usr/lib64/libibverbs".to_string()];
    dirs.dedup();
    dirs
}

/// `lib<name>-rdmav<N>.so` in `dir`: the provider file libibverbs loads (of ABI `want` if known).
fn provider_library(root: &Path, dir: &str, name: &str, want: Option<u32>) -> Option<String> {
    let prefix = format!("lib{name}-rdmav");
    let listed = file::names(&inside(root, dir)?, DIR_ENTRIES).ok()?;
    let mut found: Vec<String> = listed
        .into_iter()
        .filter_map(|n| {
            let abi = n.strip_prefix(&prefix)?.strip_suffix(".so")?;
            (!abi.is_empty() && abi.len() <= 4 && abi.bytes().all(|b| b.is_ascii_digit())).then(|| format!("{dir}/{n}"))
        })
        .collect();
    found.sort();
    let exact = found.iter().position(|f| want.is_some() && provider_abi(f) == want);
    exact.map(|i| found.swap_remove(i)).or_else(|| found.pop())
}

/// `2.28.9` from `libnccl.so.2.28.9`.
fn version_from_name(name: &str) -> Option<String> {
    let v = name.rsplit_once("libnccl.so.")?.1;
    (v.split('.').count() >= 3 && v.split('.').all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())))
        .then(|| v.to_string())
}

/// The first `needle` in the first `limit` bytes of `path` whose next 24 bytes `accept` takes.
fn find_after(path: &Path, needle: &[u8], limit: u64, accept: impl Fn(&[u8]) -> Option<String>) -> Option<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).ok()?.take(limit);
    let mut buf = vec![0u8; 1 << 20];
    let mut carry: Vec<u8> = Vec::new();
    loop {
        let n = f.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        carry.extend_from_slice(&buf[..n]);
        let mut from = 0;
        while let Some(i) = carry[from..].windows(needle.len()).position(|w| w == needle) {
            let at = from + i + needle.len();
            if let Some(v) = accept(&carry[at..carry.len().min(at + 24)]) {
                return Some(v);
            }
            from = at;
        }
        let keep = carry.len().saturating_sub(64);
        carry.drain(..keep);
    }
}

/// NCCL's version from the text it prints (`NCCL version 2.28.9+cuda12.9`).
fn version_from_text(path: &Path) -> Option<String> {
    find_after(path, b"NCCL version ", NCCL_SCAN_BYTES, |rest| {
        let v: Vec<u8> = rest.iter().take_while(|b| b.is_ascii_digit() || **b == b'.').copied().collect();
        (v.len() >= 5 && v.first().is_some_and(u8::is_ascii_digit))
            .then(|| String::from_utf8_lossy(&v).trim_end_matches('.').to_string())
    })
}

/// libibverbs' private ABI (`IBVERBS_PRIVATE_34`): it loads only `lib<name>-rdmav<ABI>.so`.
/// `None` when the library says nothing (not a libibverbs, or a stand-in).
fn private_abi(path: &Path) -> Option<u32> {
    let v = find_after(path, b"IBVERBS_PRIVATE_", 16 << 20, |rest| {
        let d: Vec<u8> = rest.iter().take_while(|b| b.is_ascii_digit()).copied().collect();
        (!d.is_empty() && d.len() <= 4).then(|| String::from_utf8_lossy(&d).into_owned())
    })?;
    v.parse().ok()
}

/// The ABI a provider file was built for: `libmlx5-rdmav34.so` -> 34.
fn provider_abi(file: &str) -> Option<u32> {
    file.rsplit_once("-rdmav")?.1.strip_suffix(".so")?.parse().ok()
}

fn nccl_version(root: &Path, p: &str, depth: Depth) -> Option<String> {
    let full = inside(root, p)?;
    let target = std::fs::read_link(&full).ok();
    target
        .as_deref()
        .and_then(|t| t.file_name())
        .and_then(|n| version_from_name(&n.to_string_lossy()))
        .or_else(|| version_from_name(p))
        .or_else(|| (depth == Depth::Full).then(|| version_from_text(&full)).flatten())
}

/// The net plugin NCCL will load: `NCCL_NET_PLUGIN` (`none`, `X` as `libnccl-net-X.so` or `X`).
fn net_plugin(loader: &Loader, vars: &Vars) -> Option<Found> {
    let set = vars.get(OsStr::new("NCCL_NET_PLUGIN")).map(|v| v.to_string_lossy().trim().to_string());
    match set.as_deref() {
        Some("none") => None,
        Some(x) if !x.is_empty() => {
            let by = format!("NCCL_NET_PLUGIN={x}");
            let names = [format!("libnccl-net-{x}.so"), x.to_string()];
            names.iter().find_map(|n| loader.find(n)).map(|f| Found { by: format!("{by} via {}", f.by), ..f })
        }
        _ => loader.find("libnccl-net.so"),
    }
}

/// Each device with its kernel driver, read only where its name does not tell its provider.
pub fn drivers<'a>(sysfs: &Sysfs, devices: impl IntoIterator<Item = &'a str>) -> Vec<(String, Option<String>)> {
    let driver = |d: &str| sysfs.link_name(&format!("class/infiniband/{d}/device/driver"));
    devices.into_iter().map(|d| (d.to_string(), provider_for(d, None).is_none().then(|| driver(d)).flatten())).collect()
}

/// The image's userspace for `devices` (each with its kernel driver, when sysfs names one).
pub fn check(root: &Path, vars: &Vars, devices: &[(String, Option<String>)], depth: Depth) -> Userspace {
    let loader = Loader::new(root, vars);
    let mut missing = Vec::new();
    let libibverbs = loader.find("libibverbs.so.1");
    let mut providers: Vec<Provider> = Vec::new();
    for (dev, driver) in devices {
        let Some(name) = provider_for(dev, driver.as_deref()) else { continue };
        if let Some(p) = providers.iter_mut().find(|p| p.name == name) {
            p.devices.push(dev.clone());
        } else {
            providers.push(Provider { name: name.into(), devices: vec![dev.clone()], config: None, library: None });
        }
    }
    match &libibverbs {
        None => missing.push(Missing { file: "libibverbs.so.1".into(), package: VERBS_PKG, effect: SOCKETS.into() }),
        Some(v) => {
            let dir = v.path.rsplit_once('/').map_or("", |(d, _)| d);
            let provider_dir = format!("{dir}/libibverbs");
            let dirs = provider_dirs(&provider_dir);
            // Doctor reads libibverbs' private ABI: a provider built for another is not loaded.
            let abi = (depth == Depth::Full).then(|| inside(root, &v.path).and_then(|f| private_abi(&f))).flatten();
            for p in &mut providers {
                let conf = format!("/etc/libibverbs.d/{}.driver", p.name);
                p.config = exists(root, &conf).then_some(conf.clone());
                p.library = dirs.iter().find_map(|d| provider_library(root, d, &p.name, abi));
                let effect = format!("libibverbs finds no provider for {}, {}", p.devices.join(", "), SOCKETS);
                let built_for = p.library.as_deref().and_then(provider_abi);
                if let (Some(lib), Some(want), Some(has)) = (&p.library, abi, built_for) {
                    if want != has {
                        let effect = format!(
                            "{lib} is built for libibverbs' private ABI {has}, and the image's libibverbs.so.1 ({}) is ABI {want}: libibverbs skips it (\"couldn't load driver\") and finds no provider for {}; {SOCKETS} (install the providers of the same rdma-core release as libibverbs)",
                            v.path,
                            p.devices.join(", ")
                        );
                        let file = format!("{provider_dir}/lib{}-rdmav{want}.so", p.name);
                        missing.push(Missing { file, package: PROVIDER_PKG, effect });
                        continue;
                    }
                }
                let file = match (&p.library, &p.config) {
                    (None, _) => format!("{provider_dir}/lib{}-rdmav*.so", p.name),
                    (Some(_), None) => conf,
                    (Some(_), Some(_)) => continue,
                };
                missing.push(Missing { file, package: PROVIDER_PKG, effect });
            }
        }
    }
    let nccl_found = loader
        .in_ld_path("libnccl.so.2")
        .or_else(|| python::wheel_nccl(root, vars).map(|path| Found { path, by: "PyTorch wheel (nvidia-nccl)".into() }))
        .or_else(|| loader.find("libnccl.so.2"));
    let nccl = nccl_found.map(|found| Nccl { version: nccl_version(root, &found.path, depth), found });
    // AWS EFA: aws-ofi-nccl loads libfabric; looked for only where a device needs it.
    let libfabric = providers.iter().any(|p| p.name == "efa").then(|| loader.find("libfabric.so.1")).flatten();
    Userspace {
        libfabric,
        image_root: root.display().to_string(),
        ld_cache: loader.cache_note.clone(),
        net_plugin: net_plugin(&loader, vars),
        libibverbs,
        providers,
        nccl,
        missing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::image::scratch;

    #[test]
    fn providers_by_name_and_by_driver() {
        assert_eq!(provider_for("mlx5_11", None), Some("mlx5"));
        assert_eq!(provider_for("rxe0", None), Some("rxe"));
        assert_eq!(provider_for("bnxt_re0", None), Some("bnxt_re"));
        assert_eq!(provider_for("rocep59s0f1", Some("mlx5_core")), Some("mlx5"));
        assert_eq!(provider_for("weird", None), None);
    }

    #[test]
    fn a_provider_under_usr_is_found_where_lib_is_kept_apart() {
        // The Soft-RoCE lab's guest: libibverbs at /lib/<triplet>, its providers under /usr/lib.
        let triplet = if cfg!(target_arch = "aarch64") { "aarch64-linux-gnu" } else { "x86_64-linux-gnu" };
        let root = std::env::temp_dir().join(format!("nccl-wrap-unmerged-{}", std::process::id()));
        let mk = |p: &str| {
            let f = root.join(p.trim_start_matches('/'));
            std::fs::create_dir_all(f.parent().expect("parent")).expect("mkdir");
            std::fs::write(f, b"").expect("write");
        };
        mk(&format!("/lib/{triplet}/libibverbs.so.1"));
        mk(&format!("/usr/lib/{triplet}/libibverbs/librxe-rdmav34.so"));
        mk("/etc/libibverbs.d/rxe.driver");
        let vars = Vars::new();
        let u = check(&root, &vars, &[("rxe0".to_string(), None)], Depth::Quick);
        let _ = std::fs::remove_dir_all(&root);
        assert!(u.missing.is_empty(), "{:?}", u.missing);
        assert_eq!(
            u.providers[0].library.as_deref(),
            Some(format!("/usr/lib/{triplet}/libibverbs/librxe-rdmav34.so").as_str())
        );
    }

    #[test]
    fn the_driver_link_is_read_only_for_a_device_its_name_does_not_place() {
        let root = scratch(
            "drivers",
            &["sys/bus/pci/drivers/mlx5_core/.keep"],
            &[
                ("sys/class/infiniband/rocep59s0f1/device/driver", "../../../../bus/pci/drivers/mlx5_core"),
                ("sys/class/infiniband/mlx5_3/device/driver", "../../../../bus/pci/drivers/mlx5_core"),
            ],
        );
        let sysfs = Sysfs::new(root.join("sys"));
        let d = drivers(&sysfs, ["rocep59s0f1", "mlx5_3"]);
        let _ = std::fs::remove_dir_all(&root);
        assert_eq!(d, vec![("rocep59s0f1".to_string(), Some("mlx5_core".to_string())), ("mlx5_3".to_string(), None)]);
    }

    #[test]
    fn versions_from_names() {
        assert_eq!(version_from_name("libnccl.so.2.28.9").as_deref(), Some("2.28.9"));
        assert_eq!(version_from_name("libnccl.so.2"), None);
        assert_eq!(version_from_name("libnccl.so.2.x.1"), None);
    }
}

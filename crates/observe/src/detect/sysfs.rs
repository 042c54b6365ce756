//! Source 5, and the reader behind every source: a walker over an RDMA node's sysfs, under the root
//! it is given, that fills the port facts. Every read is bounded and every failure returned with its
//! path; it never follows a name it has not validated and never panics on what it finds.

use std::collections::BTreeMap;
use std::io;
use std::net::Ipv6Addr;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};
use serde::Serialize;

use crate::detect::file;
use crate::detect::gid_source::{SysfsOnly, TableSource};
use crate::detect::port::{GidPick, PkeyPick, PortFacts};
use crate::detect::{gids, names};
use nw_nccl::gid;

pub use super::sysfs_error::SysfsError;
pub use nw_nccl::gid::format_gid;

/// How an RDMA device is attached, which decides how we tell whether it is the pod's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Attachment {
    /// An SR-IOV virtual function; `pf` is its physical function's address.
    Vf { pci: String, pf: String },
    /// A PCI function without `physfn`: a PF (or a VF passed through to a VM).
    Pf { pci: String },
    /// A scalable function on the auxiliary bus.
    Sf { id: String },
    /// A software device (rxe, siw) bound to the net device `parent`.
    Software { parent: String },
    /// `device` could not be resolved.
    #[default]
    Unknown,
}

impl Attachment {
    /// The kind's short name, as the node agent counts and labels devices.
    pub fn kind(&self) -> &'static str {
        match self {
            Attachment::Pf { .. } => "pf",
            Attachment::Vf { .. } => "vf",
            Attachment::Sf { .. } => "sf",
            Attachment::Software { .. } => "software",
            Attachment::Unknown => "unknown",
        }
    }
}

/// An RDMA device's directory, `class/infiniband/<name>`, looked up once (`Sysfs::open_device`).
pub(crate) struct DeviceDir {
    fd: OwnedFd,
    pub(crate) name: String,
}

/// Whether a software RDMA device sits on a given net device of this namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Identity {
    Same,
    /// The device's identifier (`id`, EUI-64) is not derived from this net device's `mac`.
    Different {
        mac: String,
        id: String,
    },
    /// Cannot be told, and why.
    Unknown(String),
}

/// Colon-separated groups of `width` bytes in hex: a MAC (1), `node_guid` as sysfs prints it (2,
/// `0858:0aff:fe64:0007`).
fn parse_hex<const N: usize>(text: &str, width: usize) -> Option<[u8; N]> {
    let mut out = [0u8; N];
    let mut parts = text.split(':');
    for group in out.chunks_mut(width) {
        let p = parts.next().filter(|p| p.len() == 2 * width)?;
        let v = u16::from_str_radix(p, 16).ok()?;
        group.copy_from_slice(&v.to_be_bytes()[2 - width..]);
    }
    parts.next().is_none().then_some(out)
}

/// Modified EUI-64 of a MAC, as the kernel builds link-local GIDs and rxe's node GUID from it.
fn eui64(mac: &[u8; 6]) -> [u8; 8] {
    [mac[0] ^ 0x02, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]]
}

fn format_hex(bytes: &[u8], width: usize) -> String {
    let group = |g: &[u8]| g.iter().map(|b| format!("{b:02x}")).collect::<String>();
    bytes.chunks(width).map(group).collect::<Vec<_>>().join(":")
}

/// More ports than any RDMA device has (HCAs have one or two); a bound on the walk.
const MAX_PORTS: u32 = 255;

pub struct Sysfs {
    root: PathBuf,
}

/// Net devices of this namespace: interface name -> the function its `device` link names.
pub(crate) type NetDevs = BTreeMap<String, Option<String>>;

impl Sysfs {
    pub fn new(root: impl Into<PathBuf>) -> Sysfs {
        Sysfs { root: root.into() }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Reads one attribute, without its trailing newline.
    pub fn attr(&self, rel: &str) -> Result<String, SysfsError> {
        read_attr(&self.path(rel))
    }

    /// Names under `rel`, validated, in natural order; invalid ones are reported. Missing: none.
    pub fn list(&self, rel: &str, problems: &mut Vec<SysfsError>) -> Vec<String> {
        let mut out = self.listed(rel, names::device_id, problems);
        names::sort_natural(&mut out);
        out
    }

    /// Names under `rel` that `check` accepts, in directory order; the others are reported.
    fn listed(
        &self,
        rel: &str,
        check: fn(&str) -> Result<&str, names::NameError>,
        problems: &mut Vec<SysfsError>,
    ) -> Vec<String> {
        let path = self.path(rel);
        let mut entries = match file::names(&path, usize::MAX) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Vec::new(),
            Err(source) => {
                problems.push(SysfsError::Read { path, source });
                return Vec::new();
            }
        };
        entries.retain_mut(|name| match check(name) {
            Ok(_) => true,
            Err(source) => {
                problems.push(SysfsError::Name { path: path.clone(), name: std::mem::take(name), source });
                false
            }
        });
        entries
    }

    /// Every RDMA device this namespace shows in `class/infiniband`, in natural order.
    pub fn rdma_devices(&self, problems: &mut Vec<SysfsError>) -> Vec<String> {
        let mut out = self.rdma_devices_listed(problems);
        names::sort_natural(&mut out);
        out
    }

    /// The same names in directory order: a start only counts the ones not the pod's, and sorting 256
    /// of them was a quarter of its instructions. Device names allow no `:` (NCCL_IB_HCA's separator).
    pub(crate) fn rdma_devices_listed(&self, problems: &mut Vec<SysfsError>) -> Vec<String> {
        self.listed("class/infiniband", names::device_name, problems)
    }

    /// `class/infiniband/<name>`, looked up once (`O_PATH`) for its links and ports to be read relative
    /// to it; the error says why the name leads to no device (absent, a loop, not a directory).
    pub(crate) fn open_device(&self, name: &str) -> Result<DeviceDir, SysfsError> {
        let path = self.path(&format!("class/infiniband/{name}"));
        match rustix::fs::open(&path, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()) {
            Ok(fd) => Ok(DeviceDir { fd, name: name.to_string() }),
            Err(e) => Err(SysfsError::Read { path, source: e.into() }),
        }
    }

    /// RDMA devices behind a PCI address or an auxiliary ID (`bus/<bus>/devices/<id>/infiniband/`).
    pub(crate) fn rdma_devices_of(&self, device_id: &str, problems: &mut Vec<SysfsError>) -> Vec<String> {
        let Ok(id) = names::device_id(device_id) else { return Vec::new() };
        let bus = if looks_like_pci(id) { "pci" } else { "auxiliary" };
        let mut out = self.listed(&format!("bus/{bus}/devices/{id}/infiniband"), names::device_name, problems);
        names::sort_natural(&mut out);
        out
    }

    /// The last component of the symlink at `rel` (`../../../0000:3b:02.6` -> `0000:3b:02.6`): PCI
    /// addresses and auxiliary IDs are unique, so one readlink names the function.
    pub(crate) fn link_name(&self, rel: &str) -> Option<String> {
        link_name_at(rustix::fs::CWD, self.path(rel))
    }

    /// The function (PCI address or auxiliary ID) the net device `ifname` sits on, if any.
    pub(crate) fn netdev_function(&self, ifname: &str) -> Option<String> {
        names::device_name(ifname).ok()?;
        self.link_name(&format!("class/net/{ifname}/device"))
    }

    /// How a device is attached, and the name of its function (PCI address or auxiliary ID), from its
    /// links read relative to its directory.
    pub(crate) fn attachment_of(&self, d: &DeviceDir) -> (Attachment, Option<String>) {
        match link_name_at(&d.fd, "device") {
            Some(func) => {
                let att = if !looks_like_pci(&func) {
                    Attachment::Sf { id: func.clone() }
                } else if let Some(pf) = link_name_at(&d.fd, "device/physfn") {
                    Attachment::Vf { pci: func.clone(), pf }
                } else {
                    Attachment::Pf { pci: func.clone() }
                };
                (att, Some(func))
            }
            None => {
                let dir = self.path(&format!("class/infiniband/{}", d.name));
                match file::read_attr_at(&d.fd, &dir, "parent") {
                    Ok(parent) if names::device_name(&parent).is_ok() => (Attachment::Software { parent }, None),
                    _ => (Attachment::Unknown, None),
                }
            }
        }
    }

    /// The kernel driver bound to the device's function (`mlx5_core`, `efa`), if any.
    pub(crate) fn driver_of(&self, d: &DeviceDir) -> Option<String> {
        link_name_at(&d.fd, "device/driver")
    }

    /// Net devices of this namespace: sysfs shows only its own in `class/net`, which tells a pod's VFs
    /// from the host's.
    pub fn netdevs(&self, problems: &mut Vec<SysfsError>) -> NetDevs {
        let names = self.list("class/net", problems);
        names.iter().map(|n| (n.clone(), self.link_name(&format!("class/net/{n}/device")))).collect()
    }

    /// Whether the software RDMA device `dev` is bound to this namespace's `ifname`, by identity, not
    /// name (every pod calls its rails `net1`...): port 1's default GID, else `node_guid`, against the
    /// modified EUI-64 of `ifname`'s MAC.
    pub(crate) fn software_identity(&self, dev: &str, ifname: &str) -> Identity {
        let text = match self.attr(&format!("class/net/{ifname}/address")) {
            Ok(text) => text,
            Err(e) => return Identity::Unknown(e.to_string()),
        };
        let Some(mac) = parse_hex::<6>(&text, 1) else {
            return Identity::Unknown(format!("class/net/{ifname}/address reads {text:?}, not a MAC address"));
        };
        let want = eui64(&mac);
        let base = format!("class/infiniband/{dev}");
        let gid0 = self.attr(&format!("{base}/ports/1/gids/0")).ok().and_then(|t| gid::parse_gid(&t));
        let from_gid = gid0.filter(|g| g.segments()[0] == 0xfe80).and_then(|g| g.octets()[8..].try_into().ok());
        let from_guid = || self.attr(&format!("{base}/node_guid")).ok().and_then(|t| parse_hex::<8>(&t, 2));
        match from_gid.or_else(from_guid) {
            Some(id) if id == want => Identity::Same,
            Some(id) => Identity::Different { mac: format_hex(&mac, 1), id: format_hex(&id, 2) },
            None => Identity::Unknown(format!(
                "neither {base}/ports/1/gids/0 nor {base}/node_guid holds an identifier derived from a MAC"
            )),
        }
    }

    /// `Y` (shared, the default) or `N` (exclusive) from ib_core's `netns_mode` parameter.
    pub fn netns_exclusive(&self) -> Option<bool> {
        match self.attr("module/ib_core/parameters/netns_mode").ok()?.as_str() {
            "N" | "0" => Some(true),
            "Y" | "1" => Some(false),
            _ => None,
        }
    }

    /// Reads every port of `dev` for no pod (the node's view); for Ethernet ports, runs `rule`'s GID
    /// choice over the table.
    pub fn ports(&self, dev: &str, rule: &dyn gids::GidRule, problems: &mut Vec<SysfsError>) -> Vec<PortFacts> {
        let no_pod = gids::Pod { gids: &[], addrs: &[], tables: &SysfsOnly };
        match self.open_device(dev) {
            Ok(d) => return self.ports_of(&d, rule, &no_pod, problems),
            Err(SysfsError::Read { source, .. }) if source.kind() != io::ErrorKind::NotFound => {
                problems.push(SysfsError::Read { path: self.path(&format!("class/infiniband/{dev}/ports/1")), source })
            }
            Err(_) => {
                let base = self.path(&format!("class/infiniband/{dev}/ports"));
                problems.push(SysfsError::Content { path: base, content: "no port 1".into() })
            }
        }
        Vec::new()
    }

    /// `ports`, for a device already looked up, against `pod`. Ports are opened 1, 2, ... until one
    /// is missing (IBTA numbers them without gaps): one failed open instead of a listing. Every port
    /// is read (a multi-plane ConnectX-8 carries data on 3/6/9/12 with port 1 down); without a port
    /// 1, the directory is listed. Where the pick is not the pod's, the table is read up to the
    /// pod's entry (`gids::shared`).
    pub(crate) fn ports_of(
        &self,
        d: &DeviceDir,
        rule: &dyn gids::GidRule,
        pod: &gids::Pod,
        problems: &mut Vec<SysfsError>,
    ) -> Vec<PortFacts> {
        let base = format!("class/infiniband/{}/ports", d.name);
        let mut ports = Vec::new();
        let mut numbers: Box<dyn Iterator<Item = u32>> = Box::new(1..=MAX_PORTS);
        let mut listed = false;
        while let Some(n) = numbers.next() {
            let dir = self.path(&format!("{base}/{n}"));
            let opened = rustix::fs::openat(&d.fd, format!("ports/{n}"), file::DIR_FLAGS, Mode::empty());
            match opened.map_err(io::Error::from) {
                Ok(fd) => ports.push(self.port(fd, dir, (&d.name, n), rule, pod)),
                Err(e) if e.kind() == io::ErrorKind::NotFound && n == 1 && !listed => {
                    listed = true;
                    let mut found: Vec<u32> = file::names(&self.path(&base), MAX_PORTS as usize)
                        .unwrap_or_default()
                        .iter()
                        .filter_map(|p| p.parse::<u32>().ok())
                        .filter(|p| (2..=MAX_PORTS).contains(p))
                        .collect();
                    found.sort_unstable();
                    numbers = Box::new(found.into_iter());
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound && !listed => break,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => {
                    problems.push(SysfsError::Read { path: dir, source });
                    break;
                }
            }
        }
        if ports.is_empty() && !problems.iter().any(|p| matches!(p, SysfsError::Read { .. })) {
            problems.push(SysfsError::Content { path: self.path(&base), content: "no port 1".into() });
        }
        ports
    }

    fn port(
        &self,
        fd: OwnedFd,
        dir: PathBuf,
        (dev, port): (&str, u32),
        rule: &dyn gids::GidRule,
        pod: &gids::Pod,
    ) -> PortFacts {
        let mut problems = Vec::new();
        let mut get = |name: &str| file::read_attr_at(&fd, &dir, name).map_err(|e| problems.push(e.into())).ok();
        let (state, phys_state, link_layer, rate) = (get("state"), get("phys_state"), get("link_layer"), get("rate"));
        let mut facts = PortFacts { port, state, phys_state, link_layer, rate, ..PortFacts::default() };
        if facts.link_layer.as_deref() == Some("Ethernet") {
            let mut table = gids::SysfsGids::new(&fd, &dir, &mut problems);
            facts.gid = gids::choose(&mut table, rule);
            if !pod.gids.is_empty() {
                gids::shared(&mut facts, &mut table, rule, pod, dev);
            }
        }
        facts.problems = problems.iter().map(ToString::to_string).collect();
        facts
    }

    /// Every non-empty entry of `dev`'s port `port`, with whose address it holds (given `own`) and
    /// whether `rule` accepts it, and the table's length; `None` when the port cannot be opened.
    pub fn gid_table(
        &self,
        dev: &str,
        port: u32,
        rule: &dyn gids::GidRule,
        own: &[Ipv6Addr],
        problems: &mut Vec<SysfsError>,
    ) -> Option<(Vec<GidPick>, u32)> {
        let (fd, dir) = self.open_port(dev, port, problems)?;
        let mut table = gids::SysfsGids::new(&fd, &dir, problems);
        Some(gids::rows(&mut table, rule, own, gids::Extent::Whole))
    }

    /// Fills the types of rows a run read by address only (`gids::with_types`).
    pub(crate) fn gid_types(
        &self,
        (dev, port): (&str, u32),
        rows: &mut [GidPick],
        rule: &dyn gids::GidRule,
        tables: &dyn TableSource,
        problems: &mut Vec<SysfsError>,
    ) {
        let Some((fd, dir)) = self.open_port(dev, port, problems) else { return };
        let mut table = gids::SysfsGids::new(&fd, &dir, problems);
        table.load(tables, dev, port, &[]);
        gids::with_types(&mut table, rows, rule);
    }

    /// `dev`'s port directory, opened, and its path; a failure goes to `problems`.
    fn open_port(&self, dev: &str, port: u32, problems: &mut Vec<SysfsError>) -> Option<(OwnedFd, PathBuf)> {
        let dir = self.path(&format!("class/infiniband/{dev}/ports/{port}"));
        let opened = rustix::fs::open(&dir, file::DIR_FLAGS, Mode::empty());
        let fd = opened.map_err(|e| problems.push(SysfsError::Read { path: dir.clone(), source: e.into() })).ok()?;
        Some((fd, dir))
    }

    /// The partition of the IPoIB child `ifname` on `dev`'s port `dev_port` + 1, and where that port's
    /// pkey table holds it; `None` when `ifname` is not IPoIB.
    pub(crate) fn ipoib_pkey(
        &self,
        dev: &str,
        ifname: &str,
        problems: &mut Vec<SysfsError>,
    ) -> Option<(u32, PkeyPick)> {
        let raw = self.attr(&format!("class/net/{ifname}/pkey")).ok()?;
        let hex = |t: &str| t.strip_prefix("0x").and_then(|h| u16::from_str_radix(h, 16).ok());
        let Some(pkey) = hex(&raw) else {
            problems.push(SysfsError::Content { path: self.path(&format!("class/net/{ifname}/pkey")), content: raw });
            return None;
        };
        let dev_port = self.attr(&format!("class/net/{ifname}/dev_port")).ok().and_then(|p| p.parse::<u32>().ok());
        let port = dev_port.unwrap_or(0) + 1;
        let mut found = None;
        for i in 0..MAX_PKEYS {
            let Ok(text) = self.attr(&format!("class/infiniband/{dev}/ports/{port}/pkeys/{i}")) else { break };
            let Some(v) = hex(&text) else { continue };
            // The low 15 bits name the partition, the top bit full membership: an exact match wins.
            if v == pkey {
                found = Some(i);
                break;
            }
            if v & 0x7fff == pkey & 0x7fff && v & 0x7fff != 0 && found.is_none() {
                found = Some(i);
            }
        }
        Some((port, PkeyPick { netdev: ifname.to_string(), pkey, index: found }))
    }
}

/// The pkey table's length bound (mlx5 ports have 128 entries).
const MAX_PKEYS: u32 = 256;

pub fn looks_like_pci(id: &str) -> bool {
    // dddd:bb:dd.f
    let b = id.as_bytes();
    b.len() == 12 && b[4] == b':' && b[7] == b':' && b[10] == b'.' && {
        let hex = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_hexdigit);
        hex(0..4) && hex(5..7) && hex(8..10) && b[11].is_ascii_digit()
    }
}

/// The last component of the symlink `rel` under `dir`, as `Sysfs::link_name` reads it.
fn link_name_at(dir: impl AsFd, rel: impl rustix::path::Arg) -> Option<String> {
    let target = rustix::fs::readlinkat(dir, rel, Vec::new()).ok()?;
    let target = target.to_str().ok()?;
    let name = target.rsplit('/').next()?;
    names::device_id(name).ok().map(String::from)
}

/// Reads a small attribute by path (bounded, non-blocking, regular files only: see `file`).
pub fn read_attr(path: &Path) -> Result<String, SysfsError> {
    Ok(file::read_attr(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rdma_device_names_with_a_colon_never_leave_the_walker() {
        let root = std::env::temp_dir().join(format!("nccl-wrap-colon-{}", std::process::id()));
        for name in ["mlx5_0", "mlx5:1", "bad name"] {
            std::fs::create_dir_all(root.join("class/infiniband").join(name)).expect("mkdir");
        }
        let mut problems = Vec::new();
        let names = Sysfs::new(&root).rdma_devices(&mut problems);
        let _ = std::fs::remove_dir_all(&root);
        assert_eq!(names, ["mlx5_0"]);
        assert_eq!(problems.len(), 2, "{problems:?}");
    }

    #[test]
    fn a_device_without_port_1_has_its_ports_read_whatever_their_numbers() {
        let root = std::env::temp_dir().join(format!("nccl-wrap-ports-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for (n, state) in [(3, "4: ACTIVE"), (6, "4: ACTIVE"), (7, "1: DOWN")] {
            let p = root.join(format!("class/infiniband/cx8_0/ports/{n}"));
            std::fs::create_dir_all(&p).expect("mkdir");
            for (attr, v) in [("state", state), ("phys_state", "5: LinkUp"), ("link_layer", "InfiniBand")] {
                std::fs::write(p.join(attr), format!("{v}\n")).expect("write");
            }
        }
        std::fs::create_dir_all(root.join("class/infiniband/cx8_0/ports/not-a-port")).expect("mkdir");
        let mut problems = Vec::new();
        let ports = Sysfs::new(&root).ports("cx8_0", &gids::rule::DEFAULT, &mut problems);
        let _ = std::fs::remove_dir_all(&root);
        let seen: Vec<(u32, Option<&str>)> = ports.iter().map(|p| (p.port, p.state_name())).collect();
        assert_eq!(seen, [(3, Some("ACTIVE")), (6, Some("ACTIVE")), (7, Some("DOWN"))]);
        assert!(problems.is_empty(), "{problems:?}");
    }

    fn parse_mac(text: &str) -> Option<[u8; 6]> {
        parse_hex(text, 1)
    }
    fn parse_guid(text: &str) -> Option<[u8; 8]> {
        parse_hex(text, 2)
    }
    fn format_guid(id: &[u8; 8]) -> String {
        format_hex(id, 2)
    }

    #[test]
    fn eui64_matches_the_kernels_link_local_form() {
        let mac = parse_mac("0a:58:0a:64:00:07").expect("mac");
        assert_eq!(format_guid(&eui64(&mac)), "0858:0aff:fe64:0007");
        assert_eq!(parse_guid("0858:0aff:fe64:0007"), Some(eui64(&mac)));
        assert_eq!(parse_mac("0a:58:0a:64:00"), None);
        assert_eq!(parse_mac("0a:58:0a:64:00:07:09"), None);
        assert_eq!(parse_guid("0858:0aff:fe64"), None);
    }

    #[test]
    fn pci_address_shape() {
        assert!(looks_like_pci("0000:3b:02.6"));
        assert!(!looks_like_pci("mlx5_core.sf.2"));
        assert!(!looks_like_pci("0000:3b:02.x"));
    }

    #[test]
    fn gid_format_matches_sysfs() {
        let g = gid::parse_gid("0000:0000:0000:0000:0000:ffff:0a00:6a07").expect("gid");
        assert_eq!(format_gid(&g), "0000:0000:0000:0000:0000:ffff:0a00:6a07");
    }
}

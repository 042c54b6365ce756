//! The road's first stage: [`observe`] reads what any decision needs in the pod's or the node's
//! [`View`]; the decision names its far reads ([`Asks`]) and [`answer`] reads exactly those. It never
//! decides what a caller could from what it returns, never names a caller; every root is a parameter.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::Path;

use nw_nccl::gid::{rail_family, Family, RailFamily};

use crate::detect::bootstrap::{self, Lookup, RESOLVE_WAIT};
use crate::detect::gid_source::TableSource;
use crate::detect::netif::OwnAddr;
use crate::detect::sysfs::Sysfs;
use crate::detect::userspace::{self, Depth, Userspace};
use crate::detect::{self, host, rails, route, Detection, Device, GidRule, Vars};

/// Where every read starts: the machine's, or a fixture's.
pub struct Roots<'a> {
    pub sysfs: &'a Sysfs,
    pub proc_root: &'a Path,
    pub dev_root: &'a Path,
    pub image_root: &'a Path,
    /// The downward-API file of the pod's annotations.
    pub annotations: &'a Path,
    /// The root of the KEP-5304 device metadata trees (`dra_metadata::CONTAINER_DIR` in a pod).
    pub dra_metadata: &'a Path,
    /// `dev_root`, where its uverbs nodes go with the sysfs tree read; `None` where they would not.
    pub device_nodes: Option<&'a Path>,
}

/// Whose devices: the pod's, or the node's (every device but VFs and SFs, for the node agent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Pod,
    Node,
}

/// What the first round read.
pub struct Observation {
    pub detection: Detection,
    /// The family the pod's rails call for (`Unknown` where the user set one, or in the node's view);
    /// `Inet6`: the ports were read under the rule for AF_INET6, which the caller's plan takes.
    pub family: RailFamily,
    /// The node's view only: how many devices of each kind it left out (VFs, SFs).
    pub skipped: BTreeMap<&'static str, usize>,
    /// What both rounds read once: this namespace's addresses and each device's net devices.
    pub seen: Seen,
}

/// Reads kept for the second round, so that nothing is read twice.
#[derive(Default)]
pub struct Seen {
    addrs: Option<Vec<OwnAddr>>,
    netdevs: BTreeMap<String, Vec<String>>,
    /// The coordinator's name, looked up once for the rails' evidence.
    lookup: Option<(String, Lookup)>,
}

impl Seen {
    fn addrs(&mut self, detection: &Detection) -> &[OwnAddr] {
        self.addrs.get_or_insert_with(|| {
            if detection.addresses.is_empty() {
                detect::netif::read().unwrap_or_default()
            } else {
                detection.addresses.clone()
            }
        })
    }

    fn netdevs(&mut self, sysfs: &Sysfs, device: &Device) -> &[String] {
        self.netdevs.entry(device.name.clone()).or_insert_with(|| bootstrap::rails(sysfs, device))
    }
}

/// The first round. Where the user set no NCCL_IB_ADDR_FAMILY, rails with only IPv6 addresses are
/// read again with AF_INET6, so that their RoCE v2 IPv6 entries are found. `rule` picks each port's
/// GID entry: the caller's, never this crate's.
pub fn observe(roots: &Roots, vars: &Vars, view: View, rule: &dyn GidRule, tables: &dyn TableSource) -> Observation {
    if view == View::Node {
        let (detection, skipped) = host::detect(roots.sysfs, rule);
        return Observation { detection, family: RailFamily::Unknown, skipped, seen: Seen::default() };
    }
    let detect_with = |rule: &dyn GidRule| {
        detect::detect(&detect::Inputs {
            vars,
            sysfs: roots.sysfs,
            annotations: roots.annotations,
            dra_metadata: Some(roots.dra_metadata),
            device_nodes: roots.device_nodes,
            rule,
            addrs: &detect::netif::read,
            kinds: &detect::links::read_or_log,
            tables,
        })
    };
    let mut seen = Seen::default();
    let detection = detect_with(rule);
    let done = |detection, family| Observation { detection, family, skipped: BTreeMap::new(), seen: Seen::default() };
    if vars.contains_key(std::ffi::OsStr::new(nw_nccl::env::IB_ADDR_FAMILY)) || detection.devices.is_empty() {
        return done(detection, RailFamily::Unknown);
    }
    let addrs = seen.addrs(&detection).to_vec();
    let mut rails: Vec<(String, Vec<IpAddr>)> = Vec::new();
    for d in detection.devices.iter().filter(|d| d.ports.iter().any(|p| p.link_layer.as_deref() == Some("Ethernet"))) {
        let mut names: BTreeSet<String> = seen.netdevs(roots.sysfs, d).iter().cloned().collect();
        names.extend(d.ports.iter().filter_map(|p| p.gid.as_ref().and_then(|g| g.ndev.clone())));
        rails.extend(names.into_iter().map(|n| {
            let a = addrs.iter().filter(|a| a.ifname == n).map(|a| a.addr).collect();
            (n, a)
        }));
    }
    let family = rail_family(&rails);
    let detection =
        if family == RailFamily::Inet6 { detect_with(rule.for_family(Family::Inet6).as_ref()) } else { detection };
    Observation { seen, ..done(detection, family) }
}

/// The rails rule's evidence for the ports `usable`, with the coordinator's host resolved once.
pub fn rails_evidence(
    roots: &Roots,
    detection: &Detection,
    seen: &mut Seen,
    usable: &[(String, u32)],
    coordinator: Option<&str>,
) -> rails::Evidence {
    let to: Vec<IpAddr> = match coordinator.map(|c| (c, c.parse::<IpAddr>())) {
        None => Vec::new(),
        Some((_, Ok(a))) => vec![a],
        Some((c, Err(_))) => {
            let lookup = bootstrap::resolve(c, RESOLVE_WAIT);
            let found = if let Lookup::Addrs(a) = &lookup { a.clone() } else { Vec::new() };
            seen.lookup = Some((c.to_string(), lookup));
            found
        }
    };
    let addrs = seen.addrs(detection).to_vec();
    let routes = route::Table::read(roots.proc_root);
    rails::read(roots.sysfs, &detection.devices, usable, &addrs, &routes, &to)
}

/// The far reads a decision asks for, once it knows which devices it uses.
#[derive(Debug, Default)]
pub struct Asks {
    /// The devices handed to NCCL: their drivers' userspace, and their net devices.
    pub used: Vec<String>,
    /// How far to check the image's userspace.
    pub depth: Depth,
    /// The coordinator's host name to resolve, when it is a name and not an address.
    pub resolve: Option<String>,
    /// Devices with unused ports: their node type (an iWARP device explains them).
    pub node_types: Vec<String>,
    /// A kept NCCL_IB_GID_INDEX: the entry and its type on each of these ports.
    pub entries: Option<(String, Vec<(String, u32)>)>,
}

/// What [`answer`] read for [`Asks`].
pub struct Answers<'a> {
    pub userspace: Userspace,
    /// Net devices of the used devices, and the pod's other interfaces on their functions.
    pub rails: Vec<String>,
    pub addrs: Vec<OwnAddr>,
    /// Read lazily, one family at a time: an IPv6 table only where the decision looks at it.
    pub routes: route::Table<'a>,
    pub lookup: Option<Lookup>,
    /// `(device, node_type)` for each asked device that has one.
    pub node_types: Vec<(String, String)>,
    /// `(device:port, entry, type)` for the kept index.
    pub entries: Vec<(String, Option<String>, Option<String>)>,
}

/// The second round: exactly the reads `asks` names.
pub fn answer<'a>(roots: &Roots<'a>, vars: &Vars, detection: &Detection, seen: &mut Seen, asks: &Asks) -> Answers<'a> {
    let sysfs = roots.sysfs;
    let userspace = userspace::check(
        roots.image_root,
        vars,
        &userspace::drivers(sysfs, asks.used.iter().map(String::as_str)),
        asks.depth,
    );
    let used: Vec<&Device> = detection.devices.iter().filter(|d| asks.used.contains(&d.name)).collect();
    let mut rails: Vec<String> = used.iter().flat_map(|d| seen.netdevs(sysfs, d).to_vec()).collect();
    for p in detection.devices.iter().flat_map(|d| &d.ports) {
        rails.extend(p.gid.as_ref().and_then(|g| g.ndev.clone()));
        rails.extend(p.pkey.as_ref().map(|k| k.netdev.clone()));
    }
    let addrs = seen.addrs(detection).to_vec();
    // The pod's other interfaces on a used device's function are rails too (beyond link-local).
    let functions: Vec<&str> = used.iter().filter_map(|d| detect::devices::function(&d.attachment)).collect();
    let others: BTreeSet<&str> = addrs
        .iter()
        .filter(|a| !bootstrap::is_link_local(&a.addr))
        .map(|a| a.ifname.as_str())
        .filter(|n| !rails.iter().any(|r| r == n))
        .collect();
    rails.extend(bootstrap::on_functions(sysfs, others, &functions));
    let lookup = asks.resolve.as_deref().map(|n| match seen.lookup.take() {
        Some((name, l)) if name == n => l,
        _ => bootstrap::resolve(n, RESOLVE_WAIT),
    });
    let node_types = asks
        .node_types
        .iter()
        .filter_map(|d| sysfs.attr(&format!("class/infiniband/{d}/node_type")).ok().map(|t| (d.clone(), t)))
        .collect();
    let mut entries = Vec::new();
    for (index, (device, port)) in asks.entries.iter().flat_map(|(i, ports)| ports.iter().map(move |p| (i, p))) {
        let read = |what: &str| {
            let at = format!("class/infiniband/{device}/ports/{port}/{what}/{index}");
            index.parse::<u32>().is_ok().then(|| sysfs.attr(&at).ok()).flatten()
        };
        entries.push((format!("{device}:{port}"), read("gids"), read("gid_attrs/types")));
    }
    Answers { userspace, rails, addrs, routes: route::Table::read(roots.proc_root), lookup, node_types, entries }
}

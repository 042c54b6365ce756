//! Detect: finds the RDMA devices that are this pod's and reads their ports. Sources are tried in
//! order (DRA metadata, SR-IOV DRA variables, SR-IOV device plugin, network-status annotation,
//! sysfs); the first that names a device is used. Pure reads; no decisions about what to export.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::ErrorKind;
use std::net::Ipv6Addr;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::detect::annotation;
use crate::detect::children;
use crate::detect::claim;
use crate::detect::dra_drivers;
use crate::detect::dra_files;
use crate::detect::dra_metadata::ClaimKind;
use crate::detect::function::{self, FunctionFacts};
use crate::detect::gid_source::TableSource;
use crate::detect::gids::{self, GidRule};
use crate::detect::links;
use crate::detect::names;
use crate::detect::netif::{OwnAddr, Owner};
use crate::detect::port::PortFacts;
use crate::detect::sriov;
use crate::detect::sriov_dra;
use crate::detect::sysfs::{Attachment, DeviceDir, Sysfs, SysfsError};
use crate::detect::uverbs::{self, Nodes};

pub type Vars = BTreeMap<OsString, OsString>;

/// Where the pod's devices were named (`describe` says it for people).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    DraMetadata,
    SriovDra,
    Sriov,
    Annotation,
    Sysfs,
    #[default]
    None,
}

impl Source {
    pub fn describe(self) -> &'static str {
        match self {
            Source::DraMetadata => "DRA device metadata",
            Source::SriovDra => "SR-IOV DRA driver",
            Source::Sriov => "SR-IOV device plugin",
            Source::Annotation => "network-status annotation",
            Source::Sysfs => "sysfs",
            Source::None => "no source",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SourceReport {
    pub source: Source,
    /// `used`, `no devices`, `not needed`, `absent`.
    pub status: &'static str,
    /// The variables or file read.
    pub inputs: Vec<String>,
    pub problems: Vec<String>,
}

/// A device a source named (or the walk found) that this container cannot open: its uverbs node is
/// not in the container's `/dev/infiniband`, so it is not this pod's, whatever the source said.
#[derive(Debug, Clone, Serialize)]
pub struct NotOpenable {
    pub name: String,
    pub origin: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Device {
    pub name: String,
    /// The variable, network or rule that named it.
    pub origin: String,
    #[serde(flatten)]
    pub attachment: Attachment,
    pub ports: Vec<PortFacts>,
    pub problems: Vec<String>,
    /// The name the source gave it, where this pod sees it under another (the host's `mlx5_7` for the
    /// pod's `rdma_net1`, or a name from before a udev rename).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub named_as: Option<String>,
    /// The kernel driver of its function (`efa`, `erdma`), read where the link layer says neither
    /// InfiniBand nor Ethernet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// What its PCI function says of itself, read for InfiniBand PFs (see `function`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function: Option<FunctionFacts>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Detection {
    pub source: Source,
    pub sources: Vec<SourceReport>,
    pub devices: Vec<Device>,
    /// Visible devices not the pod's, unsorted (a start only counts them; whatever shows them sorts).
    #[serde(serialize_with = "names::serialize_natural")]
    pub not_ours: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_openable: Vec<NotOpenable>,
    #[serde(rename = "detection_warnings")]
    pub warnings: Vec<String>,
    /// This namespace's addresses, read only when RDMA devices are visible: on a shared device they
    /// tell the pod's GID entries from the others'.
    #[serde(rename = "pod_addresses")]
    pub addresses: Vec<OwnAddr>,
    /// No source told the pod's devices from the node's and every visible device was taken: where the
    /// rails rule weighs each port's evidence.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub every_visible: bool,
}

/// Reads this namespace's addresses (`netif::read` in production; tests hand in their own).
pub type AddrSource<'a> = &'a dyn Fn() -> Result<Vec<OwnAddr>, String>;

/// Reads the kind of each of this namespace's interfaces (`links::read` in production; `None`:
/// unknown, and every address is looked for).
pub type KindSource<'a> = &'a dyn Fn() -> Option<links::Kinds>;

pub struct Inputs<'a> {
    pub vars: &'a Vars,
    pub sysfs: &'a Sysfs,
    pub annotations: &'a Path,
    /// The root of the KEP-5304 metadata trees; `None`: not looked for.
    pub dra_metadata: Option<&'a Path>,
    /// The container's dev root, whose uverbs nodes say which devices it can open; `None` where it
    /// does not go with the sysfs tree read.
    pub device_nodes: Option<&'a Path>,
    /// The GID rule the ports' walks follow (`gids::GidRule`, NCCL's from `nw_decide::gid_rule`).
    pub rule: &'a dyn GidRule,
    pub addrs: AddrSource<'a>,
    pub kinds: KindSource<'a>,
    /// Where a port's whole GID table may come from in one call (ibverbs), for the far reads.
    pub tables: &'a dyn TableSource,
}

/// How long detection waits, in all, for the kernel to add a pod address's GID entry after CNI gave
/// the address (lab `37-shared-gid-timing`: they follow within milliseconds).
pub(crate) const GID_WAIT: Duration = Duration::from_millis(2000);
const GID_POLL: Duration = Duration::from_millis(10);

struct Own<'a> {
    addrs: Vec<OwnAddr>,
    gids: Vec<Ipv6Addr>,
    rule: &'a dyn GidRule,
    tables: &'a dyn TableSource,
    /// When waiting for missing entries stops, for every device.
    deadline: Instant,
}

impl<'a> Own<'a> {
    /// No addresses: every port gets NCCL's own pick.
    fn none(inp: &Inputs<'a>) -> Own<'a> {
        Own { addrs: Vec::new(), gids: Vec::new(), rule: inp.rule, tables: inp.tables, deadline: Instant::now() }
    }

    fn read(inp: &Inputs<'a>, warnings: &mut Vec<String>) -> Own<'a> {
        let addrs = (inp.addrs)().unwrap_or_else(|e| {
            warnings.push(format!("{e}; GID entries cannot be told from other pods' on a shared device"));
            Vec::new()
        });
        let gids = addrs.iter().map(OwnAddr::gid).collect();
        Own { addrs, gids, rule: inp.rule, tables: inp.tables, deadline: Instant::now() + GID_WAIT }
    }
}

/// A device name a source gave, before its ports are read, with what the source already read of it
/// (its directory, attachment and function, ports).
#[derive(Default)]
struct Named {
    name: String,
    origin: String,
    dir: Option<DeviceDir>,
    attachment: Option<(Attachment, Option<String>)>,
    /// The device ID the source gave with the name, checked against its attachment once read.
    claimed_id: Option<String>,
    named_as: Option<String>,
    ports: Option<ReadPorts>,
}

/// What a source read (inputs, problems) and the devices it named.
type Found = (Vec<String>, Vec<String>, Vec<Named>);

type ReadPorts = (Vec<PortFacts>, Vec<String>);

impl Named {
    fn new(name: &str, origin: String) -> Named {
        Named { name: name.to_string(), origin, ..Named::default() }
    }
}

pub fn detect(inp: &Inputs) -> Detection {
    let mut warnings = Vec::new();
    let mut sources = Vec::new();
    let mut visible_problems = Vec::new();
    let visible = inp.sysfs.rdma_devices_listed(&mut visible_problems);
    warnings.extend(visible_problems.iter().map(ToString::to_string));
    // A device whose uverbs node the container lacks is never the pod's; where some have theirs,
    // that tells the pod's when nothing else can.
    let nodes = match inp.device_nodes {
        Some(dev) if !visible.is_empty() => uverbs::read(inp.sysfs, dev),
        Some(_) => Nodes::Silent("no RDMA device is visible".into()),
        None => Nodes::Silent("the container's /dev does not go with the sysfs tree read".into()),
    };
    log::debug!("uverbs nodes: {nodes:?}");
    // A device a source names was allocated to this pod alone, so NCCL's pick is the pod's: the pod's
    // addresses are read only for the sysfs walk, where shared devices are found.
    let mut own = Own::none(inp);

    let mut chosen: Option<(Source, Vec<Named>)> = None;
    // The walk took devices without telling them by pod.
    let mut untold = false;
    for source in [Source::DraMetadata, Source::SriovDra, Source::Sriov, Source::Annotation, Source::Sysfs] {
        if chosen.is_some() {
            sources.push(SourceReport { source, status: "not needed", inputs: Vec::new(), problems: Vec::new() });
            continue;
        }
        let (inputs, problems, mut named) = match source {
            Source::DraMetadata => from_dra_metadata(inp),
            Source::SriovDra => from_sriov_dra(inp),
            Source::Sriov => from_sriov(inp),
            Source::Annotation => from_annotation(inp),
            _ => {
                if !visible.is_empty() {
                    own = Own::read(inp, &mut warnings);
                }
                from_sysfs(inp, &visible, &own, &nodes, &mut warnings, &mut untold)
            }
        };
        named.sort_unstable_by(|a, b| names::natural_cmp(&a.name, &b.name));
        named.dedup_by(|a, b| a.name == b.name);
        let status = match (named.is_empty(), inputs.is_empty()) {
            (false, _) => "used",
            (true, true) => "absent",
            (true, false) => "no devices",
        };
        sources.push(SourceReport { source, status, inputs, problems });
        if !named.is_empty() {
            chosen = Some((source, named));
        }
    }

    let (source, named) = chosen.unwrap_or((Source::None, Vec::new()));
    let mut not_openable = Vec::new();
    let named: Vec<Named> =
        named.into_iter().filter(|n| openable(&nodes, &n.name, &n.origin, &mut warnings, &mut not_openable)).collect();
    let mut present = Vec::new();
    for mut n in named {
        match n.dir.take().map_or_else(|| inp.sysfs.open_device(&n.name), Ok) {
            Ok(dir) => present.push((n, dir)),
            Err(e) => {
                warnings.push(format!("{} names RDMA device {}, which cannot be used ({e}); skipped", n.origin, n.name))
            }
        }
    }
    let mut devices: Vec<Device> = Vec::new();
    for (n, dir) in present {
        let claimed = n.claimed_id.clone();
        let dev = read_device(inp, &own, n, &dir, &mut warnings);
        match (claimed, function(&dev.attachment)) {
            (Some(id), Some(func)) if id != func => {
                // Two names for one device disagree: the device ID was allocated to the pod, so the device
                // sysfs finds there wins.
                let mut found = Vec::new();
                let mut problems = Vec::new();
                resolve_id(inp, (&id, None), &dev.origin, &mut found, &mut problems);
                let others: Vec<String> = found.iter().map(|f| f.name.clone()).collect();
                if others.is_empty() {
                    warnings.push(format!(
                        "{}: names {} for device {id}, but sysfs puts {} on {func}, and {id} has no RDMA device; using {}",
                        dev.origin, dev.name, dev.name, dev.name
                    ));
                    devices.push(dev);
                } else {
                    warnings.push(format!(
                        "{}: names {} for device {id}, but sysfs puts {} on {func} and finds {} on {id}; using {} (the device at the allocated ID)",
                        dev.origin, dev.name, dev.name, others.join(","), others.join(",")
                    ));
                    for f in found {
                        if devices.iter().any(|d| d.name == f.name)
                            || !openable(&nodes, &f.name, &f.origin, &mut warnings, &mut not_openable)
                        {
                            continue;
                        }
                        if let Ok(dir) = inp.sysfs.open_device(&f.name) {
                            devices.push(read_device(inp, &own, f, &dir, &mut warnings));
                        }
                    }
                }
            }
            _ => {
                if !devices.iter().any(|d| d.name == dev.name) {
                    devices.push(dev);
                }
            }
        }
    }
    types_for_a_range(inp, &mut devices);
    let not_ours: Vec<String> = visible.into_iter().filter(|v| !devices.iter().any(|d| &d.name == v)).collect();
    // Exclusive RDMA netns mode and EFA (the net plugin's devices) are never a node's every port.
    let every_visible = source == Source::Sysfs
        && untold
        && not_ours.is_empty()
        && !devices.is_empty()
        && inp.sysfs.netns_exclusive() != Some(true)
        && devices.iter().all(|d| d.driver.as_deref() != Some("efa"));
    Detection { source, sources, devices, not_ours, not_openable, warnings, addresses: own.addrs, every_visible }
}

/// Whether the container can open `name` (or its nodes tell nothing); if not, says so.
fn openable(
    nodes: &Nodes,
    name: &str,
    origin: &str,
    warnings: &mut Vec<String>,
    not_openable: &mut Vec<NotOpenable>,
) -> bool {
    let Nodes::Tell { dir, openable } = nodes else { return true };
    if openable.contains(name) {
        return true;
    }
    if !not_openable.iter().any(|n: &NotOpenable| n.name == name) {
        warnings.push(format!(
            "{origin} names {name}, but its uverbs node is not in {}: this container cannot open it (libibverbs lists only the devices whose node it has), so it is not this pod's; left out",
            dir.display()
        ));
        not_openable.push(NotOpenable { name: name.to_string(), origin: origin.to_string() });
    }
    false
}

/// Where the pod's entries sit at different indices on its shared ports, the plan simulates NCCL's
/// rule over each table up to the pod's entry, which needs the other entries' types: read only then.
fn types_for_a_range(inp: &Inputs, devices: &mut [Device]) {
    let picks = || devices.iter().flat_map(|d| d.ports.iter()).filter_map(|p| p.gid.as_ref().map(|g| (p, g.index)));
    let mut indices = picks().map(|(_, i)| i);
    let first = indices.next();
    if indices.all(|i| Some(i) == first) || !picks().any(|(p, _)| p.nccl_pick.is_some()) {
        return;
    }
    for dev in devices.iter_mut() {
        for p in dev.ports.iter_mut().filter(|p| p.nccl_pick.is_some()) {
            let mut errs = Vec::new();
            inp.sysfs.gid_types((&dev.name, p.port), &mut p.table, inp.rule, inp.tables, &mut errs);
            dev.problems.extend(errs.iter().map(ToString::to_string));
        }
    }
}

/// The function a device sits on (PCI address, auxiliary ID), if any.
pub fn function(a: &Attachment) -> Option<&str> {
    match a {
        Attachment::Vf { pci, .. } | Attachment::Pf { pci } => Some(pci),
        Attachment::Sf { id } => Some(id),
        Attachment::Software { .. } | Attachment::Unknown => None,
    }
}

/// An InfiniBand PF: the only kind an NVSwitch management function can be.
pub(crate) fn infiniband_pf(attachment: &Attachment, ports: &[PortFacts]) -> bool {
    matches!(attachment, Attachment::Pf { .. }) && ports.iter().any(|p| p.link_layer.as_deref() == Some("InfiniBand"))
}

fn read_device(inp: &Inputs, own: &Own, n: Named, dir: &DeviceDir, warnings: &mut Vec<String>) -> Device {
    let (attachment, func) = n.attachment.unwrap_or_else(|| inp.sysfs.attachment_of(dir));
    let (mut ports, mut problems) = n.ports.unwrap_or_else(|| read_ports(inp.sysfs, dir, own, warnings));
    if ports.iter().any(|p| p.link_layer.as_deref() == Some("InfiniBand")) {
        ipoib_pkeys(inp.sysfs, &n.name, func.as_deref(), &mut ports, &mut problems);
    }
    let told = |p: &PortFacts| matches!(p.link_layer.as_deref(), Some("InfiniBand" | "Ethernet"));
    let driver = (ports.is_empty() || !ports.iter().all(told)).then(|| inp.sysfs.driver_of(dir)).flatten();
    let function = infiniband_pf(&attachment, &ports).then(|| function::read(inp.sysfs, &n.name));
    Device { name: n.name, origin: n.origin, attachment, ports, problems, named_as: n.named_as, driver, function }
}

/// Reads a device's ports. Where a port's table holds a pod interface's link-local entry but not
/// yet its address of NCCL's family, the kernel is still adding entries: read again until they
/// appear or the shared deadline passes, and say which never came.
fn read_ports(sysfs: &Sysfs, dir: &DeviceDir, own: &Own, warnings: &mut Vec<String>) -> ReadPorts {
    let dev = &dir.name;
    let start = Instant::now();
    loop {
        let mut errs = Vec::new();
        let pod = gids::Pod { gids: &own.gids, addrs: &own.addrs, tables: own.tables };
        let ports = sysfs.ports_of(dir, own.rule, &pod, &mut errs);
        let missing: Vec<String> = ports.iter().flat_map(|p| missing_entries(dev, p, own)).collect();
        if missing.is_empty() || Instant::now() >= own.deadline {
            if !missing.is_empty() {
                warnings.push(format!(
                    "{}: not in the GID table after waiting {} ms; the kernel adds an address's entries when it is configured: if the address came later, NCCL will still use another entry, so start nccl-wrap after the network is ready (a CNI that finished), or check that the interface sits on this device",
                    missing.join("; "),
                    start.elapsed().as_millis()
                ));
            } else if start.elapsed() >= GID_POLL {
                log::info!("{dev}: waited {} ms for the pod's GID entries", start.elapsed().as_millis());
            }
            let mut problems: Vec<String> = errs.iter().map(ToString::to_string).collect();
            problems.extend(ports.iter().flat_map(|p| p.problems.iter().cloned()));
            return (ports, problems);
        }
        std::thread::sleep(GID_POLL);
    }
}

/// The pod's addresses of NCCL's family on interfaces with an entry in this table, missing theirs.
fn missing_entries(dev: &str, p: &PortFacts, own: &Own) -> Vec<String> {
    if p.table.is_empty() || p.gid.as_ref().is_some_and(|g| g.owner == Some(Owner::Pod)) {
        return Vec::new();
    }
    let present: Vec<Ipv6Addr> = p.table.iter().filter_map(|r| nw_nccl::gid::parse_gid(&r.gid)).collect();
    let on_device: Vec<&str> =
        own.addrs.iter().filter(|a| present.contains(&a.gid())).map(|a| a.ifname.as_str()).collect();
    own.addrs
        .iter()
        .filter(|a| on_device.contains(&a.ifname.as_str()) && !present.contains(&a.gid()))
        .filter(|a| nw_nccl::gid::valid(&a.gid()) && nw_nccl::gid::family_of(&a.gid()) == own.rule.family())
        .map(|a| format!("{} {} on {dev}:{}", a.ifname, a.addr, p.port))
        .collect()
}

fn ipoib_pkeys(sysfs: &Sysfs, dev: &str, func: Option<&str>, ports: &mut [PortFacts], problems: &mut Vec<String>) {
    let Some(func) = func else { return };
    let mut errs = Vec::new();
    for (ifname, _) in sysfs.netdevs(&mut errs).iter().filter(|(_, f)| f.as_deref() == Some(func)) {
        let Some((port, pick)) = sysfs.ipoib_pkey(dev, ifname, &mut errs) else { continue };
        if let Some(p) = ports.iter_mut().find(|p| p.port == port && p.pkey.is_none()) {
            p.pkey = Some(pick);
        }
    }
    problems.extend(errs.iter().map(ToString::to_string));
}

/// Whether a device's ports hold this pod's address, and the first such entry as `net1 10.9.0.52`.
fn own_entry(ports: &[PortFacts]) -> Option<String> {
    let g = ports.iter().find_map(|p| p.gid.iter().chain(&p.table).find(|g| g.owner == Some(Owner::Pod)))?;
    Some(format!("{} {}", g.ndev.as_deref().unwrap_or("?"), g.address))
}

/// Resolves a device ID to its RDMA devices through sysfs, or says why it could not. A device the
/// source called `hint` under another name is marked as named so.
fn resolve_id(
    inp: &Inputs,
    (id, hint): (&str, Option<&String>),
    origin: &str,
    out: &mut Vec<Named>,
    problems: &mut Vec<String>,
) {
    let mut errs = Vec::new();
    let found = inp.sysfs.rdma_devices_of(id, &mut errs);
    problems.extend(errs.iter().map(ToString::to_string));
    if found.is_empty() {
        let bus = if crate::detect::sysfs::looks_like_pci(id) { "pci" } else { "auxiliary" };
        problems.push(format!(
            "{origin}: device {id} has no RDMA device ({} is empty or missing): is it an RDMA-capable function, and is the resource pool marked isRdma?",
            inp.sysfs.path(&format!("bus/{bus}/devices/{id}/infiniband")).display()
        ));
    }
    let named_as = |name: &String| hint.filter(|h| *h != name).cloned();
    out.extend(
        found.into_iter().map(|name| Named { named_as: named_as(&name), ..Named::new(&name, origin.to_string()) }),
    );
}

/// The KEP-5304 metadata files: each NIC driver's device, found by its PCI address, else by its
/// `networkData` interface, else by its RDMA device name (a hint).
fn from_dra_metadata(inp: &Inputs) -> Found {
    let Some(root) = inp.dra_metadata else {
        return Found::default();
    };
    let walk = dra_files::walk(root);
    let mut problems = walk.problems;
    let mut named = Vec::new();
    let mut inputs = Vec::new();
    for f in &walk.files {
        inputs.push(root.join(&f.rel).display().to_string());
        let claim = if f.path.kind == ClaimKind::Claim { "claim" } else { "pod claim" };
        for d in f.metadata.devices.iter().filter(|d| d.nic_driver) {
            let iface = d.network.as_ref().and_then(|n| n.interface_name.as_deref());
            let origin = format!(
                "DRA {claim} {}/{} ({}{})",
                f.path.claim,
                f.path.request,
                d.name,
                iface.map(|i| format!(", {i}")).unwrap_or_default()
            );
            let (before, hint) = (named.len(), d.rdma_device_hint.as_ref());
            match (&d.pci_address, iface, hint) {
                (Some(a), _, _) => resolve_id(inp, (a, hint), &origin, &mut named, &mut problems),
                (None, Some(i), _) => match inp.sysfs.netdev_function(i) {
                    Some(func) => resolve_id(inp, (&func, hint), &origin, &mut named, &mut problems),
                    None => problems.push(format!(
                        "{origin}: no PCI address, and its interface {i} is not on a function in this namespace"
                    )),
                },
                (None, None, Some(hint)) => match inp.sysfs.open_device(hint) {
                    Ok(dir) => named.push(Named { dir: Some(dir), ..Named::new(hint, origin.clone()) }),
                    Err(e) => {
                        problems.push(format!("{origin}: no PCI address, and RDMA device {hint} cannot be used ({e})"))
                    }
                },
                (None, None, None) => problems.push(format!(
                    "{origin}: neither a PCI address, an interface nor an RDMA device name tells which device it is"
                )),
            }
            log::debug!("{origin}: {} RDMA device(s)", named.len() - before);
        }
    }
    (inputs, problems, named)
}

/// The SR-IOV DRA driver's variables: each VF found by its PCI address (`_RDMA_DEVICE` is a hint).
fn from_sriov_dra(inp: &Inputs) -> Found {
    let scan = sriov_dra::scan(inp.vars);
    let mut problems: Vec<String> = scan.problems.iter().map(ToString::to_string).collect();
    if !scan.unknown.is_empty() {
        let shown: Vec<String> = scan.unknown.iter().take(8).map(|v| dra_drivers::printable(v, 100)).collect();
        problems.push(format!(
            "SRIOVNETWORK_* variables of no form nccl-wrap reads (a newer driver's?), not read: {}",
            shown.join(", ")
        ));
    }
    let mut named = Vec::new();
    for vf in &scan.devices {
        let origin = format!("SRIOVNETWORK_VF_DEVICE_{}", vf.key);
        let Some(addr) = &vf.pci_address else {
            problems.push(format!("{origin}: no PCI address for device {}; not used", vf.key));
            continue;
        };
        if vf.rdma.is_none() {
            problems.push(format!(
                "{origin}: no SRIOVNETWORK_{}_RDMA_* variables (the driver did not prepare {addr} as RDMA-capable); looking for an RDMA device at its address",
                vf.key
            ));
        }
        let hint = vf.rdma.as_ref().and_then(|r| r.device.as_ref());
        resolve_id(inp, (addr, hint), &origin, &mut named, &mut problems);
    }
    (scan.variables, problems, named)
}

fn from_sriov(inp: &Inputs) -> Found {
    let scan = sriov::scan(inp.vars);
    let mut problems: Vec<String> = scan.problems.iter().map(ToString::to_string).collect();
    let mut named = Vec::new();
    for dev in &scan.devices {
        match dev.rdma_dev.as_ref().map(|name| (name, inp.sysfs.open_device(name))) {
            Some((name, Ok(dir))) => {
                let (dir, claimed_id) = (Some(dir), Some(dev.device_id.clone()));
                named.push(Named { dir, claimed_id, ..Named::new(name, dev.variable.clone()) })
            }
            Some((name, Err(e))) => {
                // A renamed device (the plugin gives the host's name) found by its ID: both names shown.
                let before = named.len();
                let mut found = Vec::new();
                let absent = matches!(&e, SysfsError::Read { source, .. } if source.kind() == ErrorKind::NotFound);
                let hint = absent.then_some(name);
                resolve_id(inp, (&dev.device_id, hint), &dev.variable, &mut named, &mut found);
                if named.len() == before || hint.is_none() {
                    problems.push(format!(
                        "{}: rdma_dev {name} of {} cannot be used ({e}); trying the device ID",
                        dev.variable, dev.device_id
                    ));
                }
                problems.extend(found);
            }
            None => resolve_id(inp, (&dev.device_id, None), &dev.variable, &mut named, &mut problems),
        }
    }
    (scan.variables, problems, named)
}

fn from_annotation(inp: &Inputs) -> Found {
    let path = inp.annotations.display().to_string();
    let text = match crate::detect::file::read(inp.annotations, annotation::MAX_FILE_BYTES) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) if e.is_not_found() => return Found::default(),
        Err(e) => return (vec![path], vec![format!("{e}; the annotation is not used")], Vec::new()),
    };
    let scan = annotation::scan(&path, &text);
    let mut problems: Vec<String> = scan.problems.iter().map(ToString::to_string).collect();
    let mut named = Vec::new();
    for dev in &scan.devices {
        let origin = format!("network {}", dev.network);
        let opened = dev.rdma_dev.as_ref().and_then(|name| inp.sysfs.open_device(name).ok());
        match (opened, &dev.rdma_dev, &dev.pci_address) {
            (Some(dir), Some(name), _) => {
                named.push(Named { dir: Some(dir), claimed_id: dev.pci_address.clone(), ..Named::new(name, origin) })
            }
            (_, _, Some(addr)) => resolve_id(inp, (addr, dev.rdma_dev.as_ref()), &origin, &mut named, &mut problems),
            (_, Some(name), None) => {
                // No address: the interface the network gave the pod sits on the device's function.
                match dev.interface.as_deref().and_then(|i| inp.sysfs.netdev_function(i)) {
                    Some(func) => resolve_id(inp, (&func, Some(name)), &origin, &mut named, &mut problems),
                    None => {
                        problems.push(format!("{origin}: rdma-device {name} is not in this namespace's RDMA devices"))
                    }
                }
            }
            (_, None, None) => {}
        }
    }
    let inputs = if scan.found { vec![path] } else { Vec::new() };
    (inputs, problems, named)
}

/// The fallback: which of the visible devices are this pod's?
/// - exclusive RDMA netns mode: all of them;
/// - a function (VF, PF, SF) one of this namespace's net devices sits on (an IPoIB child too);
/// - a software device (rxe, siw) whose parent is here, told by MAC, not name (`software_identity`);
/// - a shared device whose GID table holds one of the pod's addresses (by address, never by name:
///   every pod's child is `net1`), read in natural order until each child of the pod was seen;
/// - else every visible device, as NCCL would take, with a warning.
fn from_sysfs(
    inp: &Inputs,
    visible: &[String],
    own: &Own,
    nodes: &Nodes,
    warnings: &mut Vec<String>,
    untold: &mut bool,
) -> Found {
    let class = inp.sysfs.path("class/infiniband").display().to_string();
    if visible.is_empty() {
        return Found::default();
    }
    let mut problems = Vec::new();
    let inputs = vec![class.clone()];
    let named = |name: &String, origin: String, ports| Named { ports, ..Named::new(name, origin) };
    if inp.sysfs.netns_exclusive() == Some(true) {
        let all = visible.iter().map(|n| named(n, "sysfs (exclusive RDMA netns mode)".into(), None));
        return (inputs, problems, all.collect());
    }
    let mut errs = Vec::new();
    let netdevs = inp.sysfs.netdevs(&mut errs);
    problems.extend(errs.iter().map(ToString::to_string));
    // A claimed device goes on with the directory and attachment that claimed it.
    let claimed = claim::claimed(inp.sysfs, visible, &netdevs, &mut problems).into_iter().map(|c| {
        let (dir, attachment) = (Some(c.dir), Some(c.attachment));
        Named { dir, attachment, ..named(&c.name, format!("sysfs ({})", c.how), None) }
    });
    let mut found: Vec<Named> = claimed.collect();
    // Ports read to look for the pod's addresses, kept for the fallback. Once devices are claimed by
    // function, only child interfaces' addresses (macvlan, ipvlan, VLAN) can be in other devices:
    // a pod whose other interfaces are veths reads no table here.
    let kinds = if own.gids.is_empty() { None } else { (inp.kinds)() };
    let look_for =
        if found.is_empty() { own.gids.clone() } else { children::addresses(&own.addrs, &own.gids, kinds.as_ref()) };
    // Once every child of the pod was seen in a table, no device left holds its addresses.
    let mut unseen = children::names(&own.addrs, kinds.as_ref());
    // A device found by the pod's address in its GID table is told by pod.
    let mut shared = false;
    let stops = !unseen.is_empty();
    let mut read: Vec<(String, ReadPorts)> = Vec::new();
    if !look_for.is_empty() {
        let claimed: Vec<String> = found.iter().map(|f| f.name.clone()).collect();
        // Natural order: where the walk stops does not depend on the directory's order.
        for dev in names::sorted_natural(visible).iter().filter(|v| !claimed.contains(v)) {
            if stops && unseen.is_empty() {
                log::debug!("{dev} and after: not read, every child interface of the pod is on a device already");
                break;
            }
            let ports = match inp.sysfs.open_device(dev) {
                Ok(dir) => read_ports(inp.sysfs, &dir, own, warnings),
                Err(e) => (Vec::new(), vec![e.to_string()]),
            };
            match own_entry(&ports.0) {
                Some(entry) => {
                    let on = children::seen_on(&ports.0, &own.addrs);
                    unseen.retain(|r| !on.contains(r));
                    shared = true;
                    found.push(named(dev, format!("sysfs (shared device, via {entry})"), Some(ports)));
                }
                None => read.push((dev.clone(), ports)),
            }
        }
    }
    // A device left to the fallback keeps the ports the walk read of it.
    let mut reuse = |n: &String, origin: String| {
        let ports = read.iter().position(|(d, _)| d == n).map(|i| read.swap_remove(i).1);
        named(n, origin, ports)
    };
    if found.is_empty() {
        if let Nodes::Tell { openable, dir } = nodes {
            // The container's uverbs nodes tell (dranet's InfiniBand-only NICs, a shared device plugin's
            // resource without a rail, a pod given one of two HCAs).
            let mine: Vec<&String> = visible.iter().filter(|v| openable.contains(*v)).collect();
            if mine.is_empty() {
                problems.push(format!(
                    "none of the {} RDMA devices in {class} is this pod's: no net device here sits on one, no GID table holds an address of this pod, and none has its uverbs node in {} (NCCL can open none of them)",
                    visible.len(),
                    dir.display()
                ));
                return (inputs, problems, Vec::new());
            }
            let found = mine.into_iter().map(|n| reuse(n, format!("sysfs (its uverbs node is in {})", dir.display())));
            return (inputs, problems, found.collect());
        }
        // AWS EFA (every device's function driven by `efa`): NCCL's net plugin opens what the container
        // was given, never through NCCL_IB_HCA.
        let efa =
            |v: &String| inp.sysfs.open_device(v).ok().and_then(|d| inp.sysfs.driver_of(&d)).as_deref() == Some("efa");
        if visible.iter().all(efa) {
            let all = visible
                .iter()
                .map(|n| reuse(n, "sysfs (EFA: NCCL's net plugin takes the devices the container was given)".into()));
            return (inputs, problems, all.collect());
        }
        problems.push(format!(
            "cannot tell which of the {} RDMA devices in {class} are this pod's: no net device in this namespace sits on any of them, and no GID table holds an address of this pod (InfiniBand without IPoIB?); using all of them, as NCCL would by default. Name the pod's devices with the SR-IOV device plugin or the network-status annotation.",
            visible.len()
        ));
        found = visible.iter().map(|n| reuse(n, "sysfs (ownership unknown)".into())).collect();
    }
    *untold = !shared;
    (inputs, problems, found)
}

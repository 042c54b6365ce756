//! The evidence the rails rule (`nw_decide::rails`) weighs on a node whose pod sees every RDMA
//! port: each port's net devices, function and nearest GPU, their addresses, bond masters and the
//! routes that leave by them. Reads only; never decides which port is a rail.

use std::net::IpAddr;

use serde::Serialize;

use crate::detect::netif::OwnAddr;
use crate::detect::route::{self, Route};
use crate::detect::sysfs::Sysfs;
use crate::detect::topology::{self, Relation};
use crate::detect::Device;

/// One address of an interface, with the prefix of the connected route that holds it (a host
/// prefix where none does).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IfAddr {
    pub addr: IpAddr,
    pub prefix: u8,
}

/// A net device of a port, or a bond master one of those is a slave of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Iface {
    pub name: String,
    pub addrs: Vec<IfAddr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub master: Option<String>,
    pub default_route: bool,
    pub coordinator_route: bool,
}

/// One port NCCL would take, as the rule sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PortEvidence {
    pub device: String,
    pub port: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pci: Option<String>,
    pub netdevs: Vec<String>,
    /// How near the nearest GPU is (`None`: no GPU found, or the function not placed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<Relation>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Evidence {
    pub ports: Vec<PortEvidence>,
    /// The ports' net devices and their bond masters, each once.
    pub ifaces: Vec<Iface>,
    /// How many NVIDIA GPUs the PCI tree shows.
    pub gpus: usize,
}

/// At most this many interfaces are looked at (a node has tens).
const MAX_IFACES: usize = 512;

/// A port's net devices: its GID entry's, its IPoIB child, else `device/net`'s.
fn netdevs(sysfs: &Sysfs, d: &Device, port: &crate::detect::port::PortFacts) -> Vec<String> {
    let named: Vec<String> =
        port.gid.iter().filter_map(|g| g.ndev.clone()).chain(port.pkey.iter().map(|k| k.netdev.clone())).collect();
    if !named.is_empty() {
        return named;
    }
    let mut problems = Vec::new();
    sysfs.list(&format!("class/infiniband/{}/device/net", d.name), &mut problems)
}

/// Adds an interface to look at, once, up to [`MAX_IFACES`].
fn add(names: &mut Vec<String>, n: &str) {
    if !names.iter().any(|x| x == n) && names.len() < MAX_IFACES {
        names.push(n.to_string());
    }
}

/// The prefix of the connected route (no gateway) on `ifname` that holds `a`, longest first.
fn prefix_of(a: &IpAddr, ifname: &str, routes: &[Route]) -> u8 {
    let on: Vec<Route> =
        routes.iter().filter(|r| r.ifname == ifname && r.gateway.is_none() && !r.is_default()).cloned().collect();
    route::lookup(&on, a).map_or(if a.is_ipv4() { 32 } else { 128 }, |r| r.prefix)
}

/// The interfaces the route to `to` may leave by: every route of the longest prefix holding it, or
/// the interface holding it.
fn coordinator_ifaces(to: &IpAddr, routes: &[Route], addrs: &[OwnAddr]) -> Vec<String> {
    if let Some(a) = addrs.iter().find(|a| a.addr == *to) {
        return vec![a.ifname.clone()];
    }
    let Some(best) = route::lookup(routes, to) else { return Vec::new() };
    routes
        .iter()
        .filter(|r| r.prefix == best.prefix && route::lookup(std::slice::from_ref(*r), to).is_some())
        .map(|r| r.ifname.clone())
        .collect()
}

/// Reads the evidence for `devices`' ports `usable`, given the namespace's addresses and routes and
/// the addresses the coordinator resolved to.
pub fn read(
    sysfs: &Sysfs,
    devices: &[Device],
    usable: &[(String, u32)],
    addrs: &[OwnAddr],
    routes: &route::Table,
    coordinator: &[IpAddr],
) -> Evidence {
    let gpus = topology::gpus(sysfs);
    let mut ports = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for d in devices {
        let pci = crate::detect::devices::function(&d.attachment).map(String::from);
        let place = pci.as_deref().and_then(|p| topology::place(sysfs, p));
        let gpu = place.as_ref().and_then(|nic| gpus.iter().map(|g| topology::relation(g, nic)).min());
        for p in d.ports.iter().filter(|p| usable.iter().any(|(n, q)| *n == d.name && *q == p.port)) {
            let nd = netdevs(sysfs, d, p);
            nd.iter().for_each(|n| add(&mut names, n));
            ports.push(PortEvidence { device: d.name.clone(), port: p.port, pci: pci.clone(), netdevs: nd, gpu });
        }
    }
    let masters: Vec<(String, Option<String>)> =
        names.iter().map(|n| (n.clone(), sysfs.link_name(&format!("class/net/{n}/master")))).collect();
    masters.iter().filter_map(|(_, m)| m.as_deref()).for_each(|m| add(&mut names, m));
    let v4 = routes.family(false);
    let any_v6 =
        addrs.iter().any(|a| a.addr.is_ipv6() && names.contains(&a.ifname)) || coordinator.iter().any(IpAddr::is_ipv6);
    let v6: &[Route] = if any_v6 || !v4.iter().any(Route::is_default) { routes.family(true) } else { &[] };
    let default = v4
        .iter()
        .filter(|r| r.is_default())
        .min_by_key(|r| r.metric)
        .or_else(|| v6.iter().filter(|r| r.is_default()).min_by_key(|r| r.metric))
        .map(|r| r.ifname.clone());
    let family = |a: &IpAddr| if a.is_ipv6() { v6 } else { v4 };
    let mut to_coordinator: Vec<String> = Vec::new();
    for c in coordinator.iter().filter(|c| !c.is_loopback()) {
        to_coordinator.extend(coordinator_ifaces(c, family(c), addrs));
    }
    let ifaces = names.iter().map(|n| {
        let addrs = addrs.iter().filter(|a| a.ifname == *n);
        let addrs = addrs.map(|a| IfAddr { addr: a.addr, prefix: prefix_of(&a.addr, n, family(&a.addr)) }).collect();
        let master = masters.iter().find(|(x, _)| x == n).and_then(|(_, m)| m.clone());
        let (default_route, coordinator_route) = (default.as_deref() == Some(n.as_str()), to_coordinator.contains(n));
        Iface { name: n.clone(), addrs, master, default_route, coordinator_route }
    });
    Evidence { ports, ifaces: ifaces.collect(), gpus: gpus.len() }
}

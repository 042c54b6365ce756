//! The pod's own IP addresses, as the kernel holds them for this network namespace
//! (`getifaddrs`, a netlink dump), and whose address a GID table entry holds.
//!
//! On a shared RDMA device (the RDMA shared device plugin with macvlan or ipvlan children, or
//! IPoIB children) every pod's addresses sit in the one GID table, beside the host's, and every
//! pod's child is called `net1`: an entry is this pod's when it holds one of these addresses,
//! never when its net device merely has a familiar name. Never parses any tool's output.

use std::net::{IpAddr, Ipv6Addr};

use serde::Serialize;

use crate::detect::names;

/// One address of this namespace's interfaces (loopback left out).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OwnAddr {
    pub ifname: String,
    pub addr: IpAddr,
    /// The interface's index in this namespace, where the kernel gave it (ibverbs names a GID
    /// entry's net device by index; see `gid_source::pod_ndev`).
    #[serde(skip)]
    pub ifindex: Option<u32>,
}

impl OwnAddr {
    /// The address as a GID holds it (IPv4 mapped into IPv6, as the kernel's RoCE entries do).
    pub fn gid(&self) -> Ipv6Addr {
        as_gid(self.addr)
    }
}

pub fn as_gid(addr: IpAddr) -> Ipv6Addr {
    match addr {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

/// The addresses of this network namespace, or why they could not be read.
pub fn read() -> Result<Vec<OwnAddr>, String> {
    let addrs =
        nix::ifaddrs::getifaddrs().map_err(|e| format!("cannot list this namespace's addresses (getifaddrs): {e}"))?;
    let mut out = Vec::new();
    // The same dump lists each link once with its index (an AF_PACKET entry): no extra call.
    let mut index = std::collections::BTreeMap::new();
    for a in addrs {
        if a.flags.contains(nix::net::if_::InterfaceFlags::IFF_LOOPBACK) {
            continue;
        }
        let Some(sa) = a.address else { continue };
        if let Some(link) = sa.as_link_addr() {
            index.insert(a.interface_name.clone(), u32::try_from(link.ifindex()).ok().filter(|&i| i != 0));
            continue;
        }
        let addr = if let Some(v4) = sa.as_sockaddr_in() {
            IpAddr::V4(v4.ip())
        } else if let Some(v6) = sa.as_sockaddr_in6() {
            IpAddr::V6(v6.ip())
        } else {
            continue;
        };
        // An interface name reaches messages and JSON only: still, only the names the kernel
        // allows for RDMA-related devices are kept as given; others are shown escaped.
        let ifname = match names::device_name(&a.interface_name) {
            Ok(n) => n.to_string(),
            Err(_) => a.interface_name.escape_debug().to_string(),
        };
        out.push((a.interface_name, OwnAddr { ifname, addr, ifindex: None }));
    }
    Ok(out.into_iter().map(|(raw, a)| OwnAddr { ifindex: index.get(&raw).copied().flatten(), ..a }).collect())
}

/// Whose address a GID table entry holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Owner {
    /// One of this pod's addresses.
    Pod,
    /// The address of the device's own net device (the port's default entry's, index 0): the host's.
    Host,
    /// Another net device's: a child interface in another namespace (another pod's).
    Other,
}

impl Owner {
    pub fn describe(self) -> &'static str {
        match self {
            Owner::Pod => "this pod's",
            Owner::Host => "the host's",
            Owner::Other => "another namespace's",
        }
    }
}

/// Whose `gid` is, on a port whose default entry (index 0) belongs to net device `host_ndev`.
/// `own` holds this pod's addresses in GID form.
pub fn owner(gid: &Ipv6Addr, ndev: Option<&str>, host_ndev: Option<&str>, own: &[Ipv6Addr]) -> Owner {
    if own.contains(gid) {
        Owner::Pod
    } else if ndev.is_some() && ndev == host_ndev {
        Owner::Host
    } else {
        Owner::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_addresses_match_their_mapped_gid() {
        let a = OwnAddr { ifname: "net1".into(), addr: "10.9.0.52".parse().expect("ip"), ifindex: None };
        let gid: Ipv6Addr = "0000:0000:0000:0000:0000:ffff:0a09:0034".parse().expect("gid");
        assert_eq!(a.gid(), gid);
    }

    #[test]
    fn owner_is_told_by_address_then_by_the_default_entrys_net_device() {
        let own = [as_gid("10.9.0.52".parse().expect("ip"))];
        let mine = as_gid("10.9.0.52".parse().expect("ip"));
        let theirs = as_gid("10.9.0.51".parse().expect("ip"));
        // Every pod's child is net1: the name never makes an entry ours.
        assert_eq!(owner(&mine, Some("net1"), Some("eth1"), &own), Owner::Pod);
        assert_eq!(owner(&theirs, Some("net1"), Some("eth1"), &own), Owner::Other);
        assert_eq!(owner(&theirs, Some("eth1"), Some("eth1"), &own), Owner::Host);
        assert_eq!(owner(&theirs, None, None, &own), Owner::Other);
    }

    #[test]
    fn this_namespace_has_readable_addresses() {
        // Whatever the runner has, the call succeeds and never lists loopback.
        let addrs = read().expect("getifaddrs");
        assert!(addrs.iter().all(|a| !a.addr.is_loopback()), "{addrs:?}");
        // Each interface's index is the kernel's for its name.
        for a in &addrs {
            let want = nix::net::if_::if_nametoindex(a.ifname.as_str()).ok();
            assert_eq!(a.ifindex, want, "{a:?}");
        }
    }
}

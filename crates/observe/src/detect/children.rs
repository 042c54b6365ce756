//! The pod's children on shared devices (macvlan, ipvlan, VLAN interfaces, by `links` kind): only they can hold its
//! addresses in another device's GID table, and each has one lower device, so once each was seen on a device's
//! ports the walk of shared devices stops. Kinds unknown: no child is known, and every device is read.

use std::net::Ipv6Addr;

use crate::detect::links::{self, Kinds};
use crate::detect::netif::{OwnAddr, Owner};
use crate::detect::port::PortFacts;

/// Whether an interface may be another namespace's child: by its kind, or absent from the dump.
fn may_be_child(kinds: &Kinds, ifname: &str) -> bool {
    kinds.get(ifname).is_none_or(|k| links::may_be_upper(k.as_deref()))
}

/// The pod's addresses (`gids`) on interfaces that may be children: the only ones a device the pod
/// does not sit on can hold. Every address when the kinds cannot be read.
pub(crate) fn addresses(addrs: &[OwnAddr], gids: &[Ipv6Addr], kinds: Option<&Kinds>) -> Vec<Ipv6Addr> {
    let Some(kinds) = kinds else { return gids.to_vec() };
    addrs.iter().filter(|a| may_be_child(kinds, &a.ifname)).map(OwnAddr::gid).collect()
}

/// The pod's interfaces with an address that may be children; none when the kinds are unknown.
pub fn names(addrs: &[OwnAddr], kinds: Option<&Kinds>) -> Vec<String> {
    let Some(kinds) = kinds else { return Vec::new() };
    let mut out: Vec<String> = Vec::new();
    for a in addrs.iter().filter(|a| may_be_child(kinds, &a.ifname)) {
        if !out.contains(&a.ifname) {
            out.push(a.ifname.clone());
        }
    }
    out
}

/// The pod's interfaces whose addresses a device's ports hold (picks and rows as the pod's); an
/// address several of them hold tells none.
pub(crate) fn seen_on(ports: &[PortFacts], addrs: &[OwnAddr]) -> Vec<String> {
    let mine = ports
        .iter()
        .flat_map(|p| p.gid.iter().chain(p.table.iter()))
        .filter(|g| g.owner == Some(Owner::Pod))
        .filter_map(|g| nw_nccl::gid::parse_gid(&g.gid));
    let mut out: Vec<String> = Vec::new();
    for g in mine {
        let mut holders = addrs.iter().filter(|a| a.gid() == g).map(|a| &a.ifname);
        let first = holders.next();
        if let Some(name) = first.filter(|n| holders.all(|h| h == *n)) {
            if !out.contains(name) {
                out.push(name.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::port::GidPick;

    fn addr(ifname: &str, ip: &str) -> OwnAddr {
        OwnAddr { ifname: ifname.into(), addr: ip.parse().expect("ip"), ifindex: None }
    }

    /// A port whose table holds `ips` as the pod's entries.
    fn port(ips: &[&str]) -> PortFacts {
        let row = |ip: &&str| {
            let g = crate::detect::netif::as_gid(ip.parse().expect("ip"));
            GidPick {
                index: 0,
                gid: crate::detect::sysfs::format_gid(&g),
                address: (*ip).into(),
                roce: None,
                ndev: None,
                full_match: true,
                owner: Some(Owner::Pod),
            }
        };
        PortFacts {
            port: 1,
            state: None,
            phys_state: None,
            link_layer: None,
            rate: None,
            gid: None,
            nccl_pick: None,
            table: ips.iter().map(row).collect(),
            table_len: 0,
            pkey: None,
            verbs: None,
            selftest: None,
            problems: Vec::new(),
        }
    }

    fn kinds(pairs: &[(&str, Option<&str>)]) -> Kinds {
        pairs.iter().map(|(n, k)| ((*n).to_string(), k.map(String::from))).collect()
    }

    #[test]
    fn children_are_the_macvlan_ipvlan_vlan_and_unknown_kinds_and_any_interface_the_dump_missed() {
        let addrs =
            [addr("eth0", "10.244.1.7"), addr("net1", "10.9.0.7"), addr("net2", "10.9.1.7"), addr("ib0", "10.8.0.7")];
        let k = kinds(&[("eth0", Some("veth")), ("net1", Some("macvlan")), ("ib0", Some("ipoib"))]);
        assert_eq!(names(&addrs, Some(&k)), ["net1", "net2"], "net2 is not in the dump");
        let gids: Vec<Ipv6Addr> = addrs.iter().map(OwnAddr::gid).collect();
        assert_eq!(addresses(&addrs, &gids, Some(&k)), [gids[1], gids[2]]);
        // Kinds unknown: every address looked for, no interface known to be a child.
        assert_eq!(addresses(&addrs, &gids, None), gids);
        assert!(names(&addrs, None).is_empty());
    }

    #[test]
    fn an_address_two_rails_hold_tells_neither_so_the_walk_goes_on() {
        let addrs = [addr("net1", "10.9.0.7"), addr("net2", "10.9.1.7"), addr("net2", "10.9.0.7")];
        // 10.9.0.7 is on both rails: seeing it on a device says nothing of which rail is there.
        assert!(seen_on(&[port(&["10.9.0.7"])], &addrs).is_empty());
        assert_eq!(seen_on(&[port(&["10.9.1.7", "10.9.0.7"])], &addrs), ["net2"]);
    }
}

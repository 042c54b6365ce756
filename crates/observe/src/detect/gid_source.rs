//! Where a port's whole GID table may come from in one call instead of three sysfs files an entry (ibverbs, handed
//! in by main): the seam, its tables, and the check that makes raw entries trustworthy. What a source says goes
//! through the same rule as sysfs's entries, so the plan cannot depend on which was asked.

use std::collections::BTreeMap;
use std::net::Ipv6Addr;

use crate::detect::names;
use crate::detect::netif::OwnAddr;
use nw_nccl::gid::{RoceType, GID_TABLE_MAX};

/// A port's table as a source gives it: its length and its non-empty entries by index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Whole {
    pub len: u32,
    pub entries: BTreeMap<u32, Entry>,
}

/// One non-empty entry: its address, its RoCE type and its net device's index (in its namespace).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub gid: Ipv6Addr,
    pub roce: Option<RoceType>,
    pub ifindex: Option<u32>,
}

/// Answers "the whole GID table of `device`'s port `port`", or `None` (sysfs is read). Asked again,
/// it answers afresh: detection polls a table while the kernel adds the pod's entries.
pub trait TableSource {
    fn table(&self, device: &str, port: u32) -> Option<Whole>;
}

pub struct SysfsOnly;

impl TableSource for SysfsOnly {
    fn table(&self, _: &str, _: u32) -> Option<Whole> {
        None
    }
}

/// An entry as a source was told it, before any check (ibverbs' `struct ibv_gid_entry`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raw {
    pub gid: [u8; 16],
    pub index: u32,
    pub port: u32,
    /// `enum ibv_gid_type`: 0 IB, 1 RoCE v1, 2 RoCE v2.
    pub gid_type: u32,
    /// 0: no net device.
    pub ifindex: u32,
}

/// Why a device's raw answer was not used (the caller falls back to sysfs and logs it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    #[error("entry {index} of port {port} is past the port's table of {len} entries")]
    PastEnd { port: u32, index: u32, len: u32 },
    #[error("port {port} is not one of the device's ports")]
    NoSuchPort { port: u32 },
    #[error("entry {index} of port {port} is given twice")]
    Twice { port: u32, index: u32 },
}

/// The tables of a device's ports from one answer, given each port's table length: an entry of
/// another port, past a length or given twice makes the whole answer untrusted (sysfs is read
/// instead); all-zero entries are empty, unnamed types unknown, as in sysfs.
pub fn tables(raw: &[Raw], lens: &BTreeMap<u32, u32>) -> Result<BTreeMap<u32, Whole>, TableError> {
    let mut out: BTreeMap<u32, Whole> =
        lens.iter().map(|(&port, &len)| (port, Whole { len, entries: BTreeMap::new() })).collect();
    for r in raw {
        let Some(table) = out.get_mut(&r.port) else { return Err(TableError::NoSuchPort { port: r.port }) };
        if r.index >= table.len {
            return Err(TableError::PastEnd { port: r.port, index: r.index, len: table.len });
        }
        let gid = Ipv6Addr::from(r.gid);
        if gid.is_unspecified() {
            continue;
        }
        let roce = match r.gid_type {
            // IB and RoCE v1 share sysfs's "IB/RoCE v1".
            0 | 1 => Some(RoceType::V1),
            2 => Some(RoceType::V2),
            _ => None,
        };
        let entry = Entry { gid, roce, ifindex: (r.ifindex != 0).then_some(r.ifindex) };
        if table.entries.insert(r.index, entry).is_some() {
            return Err(TableError::Twice { port: r.port, index: r.index });
        }
    }
    Ok(out)
}

/// How many entries a device's answer may hold (each table bounded as the sysfs walk is).
pub fn max_entries(lens: &BTreeMap<u32, u32>) -> usize {
    lens.values().map(|&l| usize::try_from(l.min(GID_TABLE_MAX)).unwrap_or(0)).sum()
}

/// The pod's interface an entry was added for, told by ibverbs' interface index among those holding
/// the entry's address (the address decides whose the entry is, the index only which of the pod's
/// interfaces); otherwise `None`, and sysfs names it.
pub(crate) fn pod_ndev(entry: &Entry, pod: &[OwnAddr]) -> Option<String> {
    let ifindex = entry.ifindex?;
    pod.iter()
        .find(|a| a.ifindex == Some(ifindex) && a.gid() == entry.gid && names::device_name(&a.ifname).is_ok())
        .map(|a| a.ifname.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(port: u32, index: u32, gid: &str, gid_type: u32, ifindex: u32) -> Raw {
        let g: Ipv6Addr = gid.parse().expect("gid");
        Raw { gid: g.octets(), index, port, gid_type, ifindex }
    }

    fn lens(pairs: &[(u32, u32)]) -> BTreeMap<u32, u32> {
        pairs.iter().copied().collect()
    }

    #[test]
    fn entries_land_on_their_ports_with_types_and_indices() {
        let r = [
            raw(1, 0, "fe80::1", 2, 4),
            raw(2, 3, "::ffff:10.9.0.52", 2, 9),
            raw(1, 1, "fe80::1", 1, 4),
            raw(1, 2, "::ffff:10.9.0.1", 0, 0),
        ];
        let t = tables(&r, &lens(&[(1, 255), (2, 16)])).expect("tables");
        assert_eq!(t[&1].len, 255);
        assert_eq!(t[&1].entries[&0].roce, Some(RoceType::V2));
        assert_eq!(t[&1].entries[&1].roce, Some(RoceType::V1));
        assert_eq!(
            t[&1].entries[&2],
            Entry { gid: "::ffff:10.9.0.1".parse().expect("gid"), roce: Some(RoceType::V1), ifindex: None }
        );
        assert_eq!(t[&2].entries.keys().copied().collect::<Vec<_>>(), [3]);
        assert_eq!(t[&2].entries[&3].ifindex, Some(9));
    }

    #[test]
    fn hostile_answers_are_refused_whole_not_half_used() {
        let l = lens(&[(1, 16)]);
        assert_eq!(
            tables(&[raw(1, 16, "fe80::1", 2, 1)], &l),
            Err(TableError::PastEnd { port: 1, index: 16, len: 16 })
        );
        assert_eq!(
            tables(&[raw(1, u32::MAX, "fe80::1", 2, 1)], &l).map(|_| ()),
            Err(TableError::PastEnd { port: 1, index: u32::MAX, len: 16 })
        );
        assert_eq!(tables(&[raw(0, 1, "fe80::1", 2, 1)], &l), Err(TableError::NoSuchPort { port: 0 }));
        assert_eq!(tables(&[raw(7, 1, "fe80::1", 2, 1)], &l), Err(TableError::NoSuchPort { port: 7 }));
        let twice = [raw(1, 1, "fe80::1", 2, 1), raw(1, 1, "fe80::2", 2, 1)];
        assert_eq!(tables(&twice, &l), Err(TableError::Twice { port: 1, index: 1 }));
        // Zeros are empty entries, as sysfs shows them; an unknown type is an unknown type.
        let t = tables(&[raw(1, 2, "::", 2, 1), raw(1, 3, "fe80::1", 77, 0)], &l).expect("tables");
        assert_eq!(t[&1].entries.len(), 1);
        assert_eq!(t[&1].entries[&3].roce, None);
        assert_eq!(t[&1].entries[&3].ifindex, None);
    }

    #[test]
    fn the_bound_is_every_ports_table_each_at_most_the_walks() {
        assert_eq!(max_entries(&lens(&[(1, 255), (2, 1024)])), 255 + 256);
        assert_eq!(max_entries(&lens(&[])), 0);
    }

    #[test]
    fn an_entry_is_named_for_the_pods_interface_only_when_index_and_address_both_match() {
        let a = |ifname: &str, addr: &str, ifindex| OwnAddr {
            ifname: ifname.into(),
            addr: addr.parse().expect("ip"),
            ifindex,
        };
        let pod = [a("eth0", "10.244.1.7", Some(3)), a("net1", "10.9.0.52", Some(4)), a("net2", "10.9.0.52", Some(5))];
        let e = |gid: &str, ifindex| Entry { gid: gid.parse().expect("gid"), roce: Some(RoceType::V2), ifindex };
        // The same address on two interfaces: the index tells which.
        assert_eq!(pod_ndev(&e("::ffff:10.9.0.52", Some(5)), &pod).as_deref(), Some("net2"));
        assert_eq!(pod_ndev(&e("::ffff:10.9.0.52", Some(4)), &pod).as_deref(), Some("net1"));
        // Another namespace's net device with an index that is the pod's eth0's: not named.
        assert_eq!(pod_ndev(&e("::ffff:10.9.0.51", Some(3)), &pod), None);
        // The pod's address on a net device whose index is none of the pod's: sysfs names it.
        assert_eq!(pod_ndev(&e("::ffff:10.9.0.52", Some(40)), &pod), None);
        assert_eq!(pod_ndev(&e("::ffff:10.9.0.52", None), &pod), None);
        // An interface whose name the kernel's rules refuse is never given as a name.
        let odd = [a("bad name", "10.9.0.52", Some(4))];
        assert_eq!(pod_ndev(&e("::ffff:10.9.0.52", Some(4)), &odd), None);
    }
}

//! The pod's own IP addresses (one rtnetlink `RTM_GETADDR` dump, interfaces named by `SIOCGIFNAME`: a third of
//! `getifaddrs`' time), and whose address a GID entry holds: by address, never by name (every pod's child is
//! `net1`). A malformed reply is an error callers take as "no addresses".

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv6Addr};

use rustix::net::netdevice;
use serde::Serialize;

use crate::detect::{names, rtnetlink};

/// One address of this namespace's interfaces (loopback left out).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OwnAddr {
    pub ifname: String,
    pub addr: IpAddr,
    /// The interface's index, where the kernel gave it (ibverbs names an entry's net device by index).
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

pub fn read() -> Result<Vec<OwnAddr>, String> {
    let why = |e| format!("cannot list this namespace's addresses (rtnetlink address dump): {e}");
    let sock = rtnetlink::Socket::open().map_err(why)?;
    let mut found = Vec::new();
    sock.dump(RTM_GETADDR, &[0; IFADDRMSG], |ty, payload| add(ty, payload, &mut found)).map_err(why)?;
    // Interfaces by index, each named once; one gone since the dump takes its addresses with it.
    let mut names = BTreeMap::new();
    let mut out = Vec::with_capacity(found.len());
    for KernelAddr { ifindex, addr } in found {
        let name = names.entry(ifindex).or_insert_with(|| netdevice::index_to_name(&sock, ifindex).ok());
        let Some(raw) = name.as_deref() else {
            log::debug!("address {addr}: interface {ifindex} has no name now; left out");
            continue;
        };
        // Names the kernel allows for RDMA-related devices are kept as given; others are shown escaped.
        let ifname = names::device_name(raw).map_or_else(|_| raw.escape_debug().to_string(), String::from);
        out.push(OwnAddr { ifname, addr, ifindex: Some(ifindex) });
    }
    Ok(out)
}

/// One address of the dump, before its interface is named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelAddr {
    pub ifindex: u32,
    pub(crate) addr: IpAddr,
}

const RTM_NEWADDR: u16 = 20;
const RTM_GETADDR: u16 = 22;
/// `struct ifaddrmsg`: family u8, prefix length u8, flags u8, scope u8, interface index u32.
const IFADDRMSG: usize = 8;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;
/// The loopback device's index in every network namespace (`LOOPBACK_IFINDEX`).
const LOOPBACK_IFINDEX: u32 = 1;

/// Parses one datagram of the dump into `out`; `Ok(true)` at the dump's end.
pub fn parse(buf: &[u8], out: &mut Vec<KernelAddr>) -> Result<bool, rtnetlink::Error> {
    rtnetlink::walk(buf, |ty, payload| add(ty, payload, out))
}

/// One message of the dump: an IPv4 or IPv6 `RTM_NEWADDR` adds its address, loopback's left out;
/// tentative and deprecated ones are kept (a GID table holds an address once it is configured).
fn add(ty: u16, payload: &[u8], out: &mut Vec<KernelAddr>) -> Result<(), rtnetlink::Error> {
    if ty != RTM_NEWADDR {
        return Ok(());
    }
    let bad = |what: String| rtnetlink::Error::Reply(format!("address message: {what}"));
    let (Some(head), Some(attrs)) = (payload.get(..IFADDRMSG), payload.get(IFADDRMSG..)) else {
        return Err(bad(format!("{} bytes, shorter than ifaddrmsg", payload.len())));
    };
    let (family, ifindex) = (head[0], rtnetlink::u32_at(head, 4));
    let size = match family {
        AF_INET => 4,
        AF_INET6 => 16,
        _ => return Ok(()),
    };
    let (mut address, mut local) = (None, None);
    for (ty, val) in rtnetlink::attrs(attrs).map_err(|e| bad(e.to_string()))? {
        let slot = match ty {
            IFA_ADDRESS => &mut address,
            IFA_LOCAL => &mut local,
            _ => continue,
        };
        if val.len() != size {
            return Err(bad(format!("address attribute {ty} of {} bytes in family {family}", val.len())));
        }
        *slot = Some(val);
    }
    // IPv4: the own address is IFA_LOCAL (IFA_ADDRESS is a point-to-point peer's); IPv6 gives
    // IFA_ADDRESS only, unless it has a peer.
    let Some(val) = local.or(address) else { return Ok(()) };
    if ifindex == LOOPBACK_IFINDEX {
        return Ok(());
    }
    let addr = match <[u8; 4]>::try_from(val) {
        Ok(v4) => IpAddr::from(v4),
        Err(_) => IpAddr::from(<[u8; 16]>::try_from(val).map_err(|_| bad("address size".into()))?),
    };
    out.push(KernelAddr { ifindex, addr });
    Ok(())
}

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

/// Whose `gid` is, on a port whose default entry belongs to `host_ndev`, given `own` in GID form.
pub(crate) fn owner(gid: &Ipv6Addr, ndev: Option<&str>, host_ndev: Option<&str>, own: &[Ipv6Addr]) -> Owner {
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

    /// One `RTM_GETADDR` dump (AF_UNSPEC) as Linux 6.18 answered it in one datagram, captured
    /// with a raw netlink socket in a fresh `unshare --net` namespace made by:
    ///   ip link set lo up; ip addr add 127.0.0.2/8 dev lo
    ///   ip link add eth0 type veth peer name eth0p; ip link set eth0 address 0a:58:0a:09:00:34
    ///   ip link set eth0p up; ip link set eth0 up
    ///   ip addr add 10.9.0.52/24 dev eth0
    ///   ip addr add 10.9.9.1 peer 10.9.9.2/32 dev eth0 label eth0:1
    ///   ip addr add fd00::52/64 dev eth0 nodad
    /// lo is index 1 (127.0.0.1, 127.0.0.2, ::1), eth0p 2 (a tentative fe80), eth0 3.
    const DUMP: &[&str] = &[
        "4c0000001400020001000000a8160000020880fe01000000080001007f000001080002007f000001070003006c6f0000",
        "080008008000000014000600ffffffffffffffffbb9b2200bb9b22004c0000001400020001000000a8160000020881fe",
        "01000000080001007f000002080002007f000002070003006c6f0000080008008100000014000600ffffffffffffffff",
        "bb9b2200bb9b2200500000001400020001000000a81600000218800003000000080001000a090034080002000a090034",
        "090003006574683000000000080008008000000014000600ffffffffffffffffbc9b2200bc9b22005000000014000200",
        "01000000a81600000220800003000000080001000a090902080002000a0909010b000300657468303a31000008000800",
        "8000000014000600ffffffffffffffffbc9b2200bc9b2200500000001400020001000000a81600000a8080fe01000000",
        "140001000000000000000000000000000000000114000600ffffffffffffffffbb9b2200bb9b22000800080080000000",
        "05000b0001000000500000001400020001000000a81600000a40c0fd0200000014000100fe80000000000000d8fe33ff",
        "fe0c6ebd14000600ffffffffffffffffbc9b2200bc9b220008000800c000000005000b00030000004800000014000200",
        "01000000a81600000a4082000300000014000100fd00000000000000000000000000005214000600ffffffffffffffff",
        "bc9b2200bc9b22000800080082000000500000001400020001000000a81600000a40c0fd0300000014000100fe800000",
        "0000000008580afffe09003414000600ffffffffffffffffbc9b2200bc9b220008000800c000000005000b0003000000",
        "140000000300020001000000a816000000000000",
    ];

    fn dump() -> Vec<u8> {
        let hex: String = DUMP.concat();
        (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex")).collect()
    }

    fn ka(ifindex: u32, addr: &str) -> KernelAddr {
        KernelAddr { ifindex, addr: addr.parse().expect("ip") }
    }

    fn parsed(buf: &[u8]) -> Result<(bool, Vec<KernelAddr>), rtnetlink::Error> {
        let mut out = Vec::new();
        parse(buf, &mut out).map(|end| (end, out))
    }

    /// The messages of a dump, each its own byte vector (lengths from the kernel's own buffer).
    fn messages(buf: &[u8]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < buf.len() {
            let len = rtnetlink::u32_at(buf, at) as usize;
            out.push(buf[at..at + len].to_vec());
            at += rtnetlink::align(len);
        }
        out
    }

    #[test]
    fn a_real_dump_gives_each_interfaces_own_addresses_loopback_left_out() {
        let (end, got) = parsed(&dump()).expect("parse");
        assert!(end);
        assert_eq!(
            got,
            vec![
                ka(3, "10.9.0.52"),
                // The point-to-point address: the interface's own (IFA_LOCAL), not the peer's.
                ka(3, "10.9.9.1"),
                // Tentative (DAD not done): listed, as the GID table has it already.
                ka(2, "fe80::d8fe:33ff:fe0c:6ebd"),
                ka(3, "fd00::52"),
                ka(3, "fe80::858:aff:fe09:34"),
            ]
        );
    }

    #[test]
    fn a_dump_split_over_datagrams_ends_only_at_done() {
        let msgs = messages(&dump());
        let (end, first) = parsed(&msgs[..4].concat()).expect("first part");
        assert!(!end);
        assert_eq!(first, vec![ka(3, "10.9.0.52"), ka(3, "10.9.9.1")]);
        let (end, rest) = parsed(&msgs[4..].concat()).expect("rest");
        assert!(end);
        assert_eq!(rest.len(), 3);
    }

    #[test]
    fn hostile_address_messages_are_errors() {
        let msgs = messages(&dump());
        let eth0 = msgs[2].clone(); // 10.9.0.52: ifaddrmsg, IFA_ADDRESS, IFA_LOCAL, IFA_LABEL...
        assert_eq!(parsed(&eth0).expect("one").1, vec![ka(3, "10.9.0.52")]);
        let with_len = |m: &[u8], len: usize| {
            let mut m = m.to_vec();
            m.truncate(len);
            m[..4].copy_from_slice(&u32::try_from(len).expect("len").to_ne_bytes());
            m
        };
        // A message length past the buffer.
        let mut long = eth0.clone();
        long[..4].copy_from_slice(&1000u32.to_ne_bytes());
        assert!(parsed(&long).is_err());
        // A truncated ifaddrmsg.
        let e = parsed(&with_len(&eth0, NLMSG + 5)).expect_err("short ifaddrmsg");
        assert!(e.to_string().contains("shorter than ifaddrmsg"), "{e}");
        // An attribute of length 0, and one past its message.
        for alen in [0u16, 200] {
            let mut m = eth0.clone();
            m[NLMSG + IFADDRMSG..NLMSG + IFADDRMSG + 2].copy_from_slice(&alen.to_ne_bytes());
            assert!(parsed(&m).is_err(), "attribute length {alen}");
        }
        // A message cut inside an attribute.
        assert!(parsed(&with_len(&eth0, NLMSG + IFADDRMSG + 6)).is_err());
        // An IPv4 address attribute of 16 bytes; an IPv6 one of 4.
        let mut m = eth0.clone();
        m[NLMSG + IFADDRMSG..NLMSG + IFADDRMSG + 2].copy_from_slice(&7u16.to_ne_bytes());
        assert!(parsed(&m).expect_err("3-byte IPv4").to_string().contains("of 3 bytes"));
        let mut v6 = msgs[6].clone(); // fd00::52
        v6[16] = AF_INET;
        assert!(parsed(&v6).is_err());
        // NLMSG_ERROR is the kernel's errno.
        let mut err = msgs[8].clone();
        err[4..6].copy_from_slice(&rtnetlink::NLMSG_ERROR.to_ne_bytes());
        err.truncate(16);
        err.extend_from_slice(&(-22i32).to_ne_bytes());
        err[..4].copy_from_slice(&20u32.to_ne_bytes());
        assert_eq!(parsed(&err).expect_err("error").to_string(), "kernel answered error 22");
        // Other families and messages without an address are passed over, as getifaddrs did.
        let mut other = eth0.clone();
        other[16] = 12;
        assert_eq!(parsed(&other).expect("other family"), (false, vec![]));
        assert_eq!(parsed(&with_len(&eth0, NLMSG + IFADDRMSG)).expect("no attributes"), (false, vec![]));
    }

    const NLMSG: usize = rtnetlink::NLMSG_HDR;

    #[test]
    fn this_namespace_has_readable_addresses() {
        // Whatever the runner has, the call succeeds and never lists loopback.
        let addrs = read().expect("address dump");
        assert!(addrs.iter().all(|a| !a.addr.is_loopback()), "{addrs:?}");
        // Each interface's index is the kernel's for its name.
        for a in &addrs {
            let want = nix::net::if_::if_nametoindex(a.ifname.as_str()).ok();
            assert_eq!(a.ifindex, want, "{a:?}");
        }
    }
}

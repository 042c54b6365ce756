//! What kind of link each of this namespace's interfaces is (`veth`, `macvlan`, `ipvlan`,
//! `vlan`...), from one rtnetlink dump (`RTM_GETLINK`), so detection knows which of the pod's
//! addresses can sit in another device's GID table at all.
//!
//! The kernel puts an address into a RoCE port's GID table when its interface is the port's net
//! device or an upper device of it (a macvlan, ipvlan or VLAN child: `roce_gid_mgmt.c`). A pod's
//! own interfaces that sit on a function of their own (a VF's netdev, an IPoIB child) are found
//! by that function; a veth, the usual primary interface, is nobody's upper device. Only the
//! children kinds are looked for in the tables of devices the pod cannot otherwise claim, which
//! keeps start-up proportional to the devices the pod owns, not to the devices it can see.
//!
//! The kernel's reply is outside input like any other: bounded in bytes and messages, read with a
//! receive deadline, parsed without trusting a length, and never a reason to fail the job (on any
//! error detection looks for every address, as before).

use std::collections::BTreeMap;
use std::os::fd::AsRawFd;

use nix::sys::socket::{self, sockopt, AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType};
use nix::sys::time::TimeVal;

/// Interface name -> its link kind (`IFLA_INFO_KIND`); `None` for links without one (physical
/// devices, loopback).
pub type Kinds = BTreeMap<String, Option<String>>;

/// Kinds whose addresses the kernel may enter into another (lower) device's GID table.
const UPPER_KINDS: &[&str] = &["macvlan", "macvtap", "ipvlan", "ipvtap", "vlan"];

/// Kinds that are never an upper device of an RDMA port's net device.
const NEVER_UPPER: &[&str] = &[
    "veth",
    "dummy",
    "bridge",
    "bond",
    "team",
    "vxlan",
    "geneve",
    "gre",
    "gretap",
    "ip6gre",
    "ip6gretap",
    "ipip",
    "ip6tnl",
    "sit",
    "tun",
    "wireguard",
    "vrf",
    "ifb",
    "nlmon",
    "netkit",
    "vti",
    "vti6",
    "ipoib",
];

/// Whether an interface of this kind may hold its addresses in another device's GID table:
/// the children kinds, and, to stay on the safe side, any kind this list does not know. A link
/// without a kind (a physical function's netdev, an IPoIB interface) sits on its own function.
pub fn may_be_upper(kind: Option<&str>) -> bool {
    match kind {
        None => false,
        Some(k) => UPPER_KINDS.contains(&k) || !NEVER_UPPER.contains(&k),
    }
}

/// The reply is read in buffers of this size; a dump message is a few KiB per link.
const BUF: usize = 32 * 1024;
/// At most this much of a dump is read: about 1,000 links with their statistics.
const MAX_BYTES: usize = 4 * 1024 * 1024;
/// How long one receive may wait for the kernel, in microseconds (under a second).
const DEADLINE_US: i64 = 500_000;

const NLMSG_HDR: usize = 16;
const NLMSG_DONE: u16 = 3;
const NLMSG_ERROR: u16 = 2;
const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const IFINFOMSG: usize = 16;
const IFLA_IFNAME: u16 = 3;
const IFLA_LINKINFO: u16 = 18;
const IFLA_INFO_KIND: u16 = 1;
/// `IFLA_EXT_MASK` with `RTEXT_FILTER_SKIP_STATS`: the kernel leaves the statistics out.
const IFLA_EXT_MASK: u16 = 29;
const RTEXT_FILTER_SKIP_STATS: u32 = 1 << 3;

#[derive(Debug, thiserror::Error)]
pub enum LinksError {
    #[error("rtnetlink link dump failed at {step}: {source}")]
    Io { step: &'static str, source: nix::Error },
    #[error("rtnetlink link dump: {0}")]
    Reply(String),
}

/// One dump of this namespace's links.
pub fn read() -> Result<Kinds, LinksError> {
    let io = |step| move |source| LinksError::Io { step, source };
    let fd = socket::socket(AddressFamily::Netlink, SockType::Raw, SockFlag::SOCK_CLOEXEC, SockProtocol::NetlinkRoute)
        .map_err(io("socket"))?;
    socket::setsockopt(&fd, sockopt::ReceiveTimeout, &TimeVal::new(0, DEADLINE_US)).map_err(io("setsockopt"))?;
    socket::bind(fd.as_raw_fd(), &NetlinkAddr::new(0, 0)).map_err(io("bind"))?;
    socket::send(fd.as_raw_fd(), &request(1), MsgFlags::empty()).map_err(io("send"))?;
    let mut kinds = Kinds::new();
    let mut buf = vec![0u8; BUF];
    let mut total = 0;
    loop {
        let n = socket::recv(fd.as_raw_fd(), &mut buf, MsgFlags::empty()).map_err(io("recv"))?;
        total += n;
        if n == 0 || total > MAX_BYTES {
            return Err(LinksError::Reply(format!("no end of dump after {total} bytes")));
        }
        if parse(&buf[..n], &mut kinds)? {
            return Ok(kinds);
        }
    }
}

/// `read`, with a failure logged: detection then looks for every address, as it always did.
pub fn read_or_log() -> Option<Kinds> {
    read().map_err(|e| log::debug!("{e}; every address of the pod is looked for in other devices' GID tables")).ok()
}

/// `RTM_GETLINK` dump request, statistics left out.
fn request(seq: u32) -> Vec<u8> {
    let len = NLMSG_HDR + IFINFOMSG + 8;
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&u32::try_from(len).unwrap_or(0).to_ne_bytes());
    m.extend_from_slice(&RTM_GETLINK.to_ne_bytes());
    m.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&[0u8; IFINFOMSG]); // AF_UNSPEC: every link
    m.extend_from_slice(&8u16.to_ne_bytes());
    m.extend_from_slice(&IFLA_EXT_MASK.to_ne_bytes());
    m.extend_from_slice(&RTEXT_FILTER_SKIP_STATS.to_ne_bytes());
    m
}

/// Parses one datagram of the dump into `kinds`; `Ok(true)` at the dump's end.
pub fn parse(mut buf: &[u8], kinds: &mut Kinds) -> Result<bool, LinksError> {
    while buf.len() >= NLMSG_HDR {
        let len = u32_at(buf, 0) as usize;
        if len < NLMSG_HDR || len > buf.len() {
            return Err(LinksError::Reply(format!("message length {len} with {} bytes left", buf.len())));
        }
        let (msg, rest) = buf.split_at(len);
        match u16_at(msg, 4) {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => {
                let errno =
                    msg.get(NLMSG_HDR..NLMSG_HDR + 4).map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                return Err(LinksError::Reply(format!("kernel answered error {}", errno.unsigned_abs())));
            }
            RTM_NEWLINK => {
                if let Some((name, kind)) = link(&msg[NLMSG_HDR..]) {
                    kinds.insert(name, kind);
                }
            }
            _ => {}
        }
        // Messages are padded to 4 bytes; the last one may end the datagram unpadded.
        buf = rest.get(align(len) - len..).unwrap_or(&[]);
    }
    Ok(false)
}

/// The name and kind of one `RTM_NEWLINK` payload (`ifinfomsg` then attributes).
fn link(payload: &[u8]) -> Option<(String, Option<String>)> {
    let attrs = payload.get(IFINFOMSG..)?;
    let mut name = None;
    let mut kind = None;
    for (ty, val) in Attrs(attrs) {
        match ty {
            IFLA_IFNAME => name = text(val),
            IFLA_LINKINFO => {
                kind = Attrs(val).find(|(t, _)| *t == IFLA_INFO_KIND).and_then(|(_, v)| text(v));
            }
            _ => {}
        }
    }
    name.map(|n| (n, kind))
}

/// A NUL-terminated string attribute, kept only when it is a plausible name.
fn text(val: &[u8]) -> Option<String> {
    let end = val.iter().position(|&b| b == 0).unwrap_or(val.len());
    let s = std::str::from_utf8(&val[..end]).ok()?;
    (!s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_graphic())).then(|| s.to_string())
}

/// Route attributes (`struct rtattr`: length, type, value, padded to 4 bytes).
struct Attrs<'a>(&'a [u8]);

impl<'a> Iterator for Attrs<'a> {
    type Item = (u16, &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        let b = self.0;
        if b.len() < 4 {
            return None;
        }
        let len = usize::from(u16_at(b, 0));
        if len < 4 || len > b.len() {
            self.0 = &[];
            return None;
        }
        // The top bits of the type are flags (NLA_F_NESTED, NLA_F_NET_BYTEORDER).
        let ty = u16_at(b, 2) & 0x3fff;
        let val = &b[4..len];
        self.0 = b.get(align(len)..).unwrap_or(&[]);
        Some((ty, val))
    }
}

fn align(n: usize) -> usize {
    (n + 3) & !3
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2).map_or(0, |x| u16::from_ne_bytes([x[0], x[1]]))
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4).map_or(0, |x| u32::from_ne_bytes([x[0], x[1], x[2], x[3]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(ty: u16, val: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend_from_slice(&u16::try_from(4 + val.len()).expect("len").to_ne_bytes());
        a.extend_from_slice(&ty.to_ne_bytes());
        a.extend_from_slice(val);
        a.resize(align(a.len()), 0);
        a
    }

    fn newlink(name: &str, kind: Option<&str>) -> Vec<u8> {
        let mut body = vec![0u8; IFINFOMSG];
        body.extend(attr(IFLA_IFNAME, format!("{name}\0").as_bytes()));
        if let Some(k) = kind {
            body.extend(attr(IFLA_LINKINFO, &attr(IFLA_INFO_KIND, format!("{k}\0").as_bytes())));
        }
        msg(RTM_NEWLINK, &body)
    }

    fn msg(ty: u16, body: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&u32::try_from(NLMSG_HDR + body.len()).expect("len").to_ne_bytes());
        m.extend_from_slice(&ty.to_ne_bytes());
        m.extend_from_slice(&[0u8; 10]);
        m.extend_from_slice(body);
        m
    }

    #[test]
    fn a_dump_names_each_links_kind() {
        let mut buf = newlink("lo", None);
        buf.extend(newlink("eth0", Some("veth")));
        buf.extend(newlink("net1", Some("macvlan")));
        let mut kinds = Kinds::new();
        assert!(!parse(&buf, &mut kinds).expect("parse"));
        assert!(parse(&msg(NLMSG_DONE, &[0; 4]), &mut kinds).expect("done"));
        assert_eq!(kinds.get("eth0"), Some(&Some("veth".to_string())));
        assert_eq!(kinds.get("net1"), Some(&Some("macvlan".to_string())));
        assert_eq!(kinds.get("lo"), Some(&None));
    }

    #[test]
    fn children_and_unknown_kinds_may_be_upper_devices_veth_and_physical_never() {
        for k in ["macvlan", "ipvlan", "vlan", "macvtap", "someday-new"] {
            assert!(may_be_upper(Some(k)), "{k}");
        }
        for k in [None, Some("veth"), Some("dummy"), Some("bridge"), Some("ipoib")] {
            assert!(!may_be_upper(k), "{k:?}");
        }
    }

    #[test]
    fn hostile_replies_end_cleanly() {
        let mut kinds = Kinds::new();
        // A length past the buffer, a zero length, an attribute longer than its message.
        assert!(parse(&[0xff, 0xff, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], &mut kinds).is_err());
        assert!(parse(&[0; 16], &mut kinds).is_err());
        let mut body = vec![0u8; IFINFOMSG];
        body.extend_from_slice(&[200, 0, 3, 0, b'x', 0, 0, 0]);
        assert!(!parse(&msg(RTM_NEWLINK, &body), &mut kinds).expect("truncated attribute"));
        assert!(kinds.is_empty());
        // An error message is an error, not an end; the most negative errno too (found by fuzzing).
        assert!(parse(&msg(NLMSG_ERROR, &(-13i32).to_ne_bytes()), &mut kinds).is_err());
        assert!(parse(&msg(NLMSG_ERROR, &i32::MIN.to_ne_bytes()), &mut kinds).is_err());
        // Names that are not names are dropped.
        assert!(!parse(&newlink("a\u{1b}[2J", Some("veth")), &mut kinds).expect("parse"));
        assert!(kinds.is_empty());
    }

    /// This machine's own namespace answers, and loopback is there without a kind.
    #[test]
    fn this_namespace_answers() {
        let kinds = read().expect("rtnetlink dump");
        assert_eq!(kinds.get("lo"), Some(&None), "{kinds:?}");
    }
}

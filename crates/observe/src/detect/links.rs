//! The link kind of each of this namespace's interfaces (`veth`, `macvlan`, `vlan`...), from one rtnetlink dump: only
//! upper devices put the pod's addresses into another device's GID table (`roce_gid_mgmt.c`), so only they are
//! looked for there. The reply never fails the job (on error every address is looked for).

use std::collections::BTreeMap;

use crate::detect::rtnetlink::{self, Attrs};

/// Interface name -> its link kind (`IFLA_INFO_KIND`); `None` for links without one.
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

/// Whether an interface of this kind may hold its addresses in another device's GID table: the
/// children kinds and any kind not known (a link without a kind sits on its own function).
pub fn may_be_upper(kind: Option<&str>) -> bool {
    match kind {
        None => false,
        Some(k) => UPPER_KINDS.contains(&k) || !NEVER_UPPER.contains(&k),
    }
}

const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const IFINFOMSG: usize = 16;
const IFLA_IFNAME: u16 = 3;
const IFLA_LINKINFO: u16 = 18;
const IFLA_INFO_KIND: u16 = 1;
/// `IFLA_EXT_MASK` with `RTEXT_FILTER_SKIP_STATS`: the kernel leaves the statistics out.
const IFLA_EXT_MASK: u16 = 29;
const RTEXT_FILTER_SKIP_STATS: u32 = 1 << 3;

pub fn read() -> Result<Kinds, rtnetlink::Error> {
    let mut kinds = Kinds::new();
    rtnetlink::Socket::open()?.dump(RTM_GETLINK, &request(), |ty, payload| {
        add(ty, payload, &mut kinds);
        Ok(())
    })?;
    Ok(kinds)
}

/// `read`, with a failure logged: detection then looks for every address, as it always did.
pub fn read_or_log() -> Option<Kinds> {
    let why = |e| {
        log::debug!("rtnetlink link dump: {e}; every address of the pod is looked for in other devices' GID tables")
    };
    read().map_err(why).ok()
}

/// The `RTM_GETLINK` dump request's body: every link (`AF_UNSPEC`), then an 8-byte attribute that
/// leaves statistics out.
fn request() -> Vec<u8> {
    let attr_header = [8u16.to_ne_bytes(), IFLA_EXT_MASK.to_ne_bytes()].concat();
    [&[0u8; IFINFOMSG][..], &attr_header, &RTEXT_FILTER_SKIP_STATS.to_ne_bytes()].concat()
}

/// Parses one datagram of the dump into `kinds`; `Ok(true)` at the dump's end.
pub fn parse(buf: &[u8], kinds: &mut Kinds) -> Result<bool, rtnetlink::Error> {
    rtnetlink::walk(buf, |ty, payload| {
        add(ty, payload, kinds);
        Ok(())
    })
}

fn add(ty: u16, payload: &[u8], kinds: &mut Kinds) {
    if ty == RTM_NEWLINK {
        kinds.extend(link(payload));
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::rtnetlink::{align, NLMSG_DONE, NLMSG_ERROR, NLMSG_HDR};

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

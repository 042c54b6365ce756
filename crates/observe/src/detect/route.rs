//! This namespace's routes (`/proc/net/route`, `/proc/net/ipv6_route` under a proc root) and the interface a
//! destination leaves by, by the main table's rule (longest prefix, then lowest metric; `ip rule` is not modelled).
//! Bounded: at most [`MAX_BYTES`] a file and [`MAX_ROUTES`] routes; a line it cannot parse is skipped.

use std::cell::OnceCell;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

use serde::Serialize;

use crate::detect::file;

pub(crate) const MAX_BYTES: usize = 1 << 20;
pub(crate) const MAX_ROUTES: usize = 8192;

/// `RTF_UP`: the route is usable.
const RTF_UP: u32 = 0x0001;
/// `RTF_REJECT`: an unreachable or prohibit route.
const RTF_REJECT: u32 = 0x0200;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Route {
    pub ifname: String,
    pub dest: IpAddr,
    pub prefix: u8,
    pub gateway: Option<IpAddr>,
    pub metric: u32,
}

impl Route {
    pub fn holds(&self, a: &IpAddr) -> bool {
        nw_nccl::prefix::Prefix { addr: self.dest, len: self.prefix }.contains(*a)
    }

    pub fn is_default(&self) -> bool {
        self.prefix == 0
    }

    /// As `ip route` prints it: `default via 10.128.0.1 dev eth0`, `10.0.106.0/24 dev net1`.
    pub fn describe(&self) -> String {
        let via = self.gateway.map(|g| format!(" via {g}")).unwrap_or_default();
        let dest = if self.prefix == 0 { "default".to_string() } else { format!("{}/{}", self.dest, self.prefix) };
        format!("{dest}{via} dev {}", self.ifname)
    }
}

/// An interface name as the kernel allows it: a line naming anything else is skipped.
fn ifname_ok(n: &str) -> bool {
    !n.is_empty() && n.len() <= 15 && n.chars().all(|c| c.is_ascii_graphic() && c != '/')
}

fn fields<const N: usize>(line: &str) -> Option<[&str; N]> {
    let mut it = line.split_ascii_whitespace();
    let mut out = [""; N];
    for f in &mut out {
        *f = it.next()?;
    }
    Some(out)
}

/// A route from one line's fields, where its interface name, flags (up, not a reject route) and
/// every value read.
fn route(
    ifname: &str,
    flags: &str,
    [dest, gw]: [Option<IpAddr>; 2],
    prefix: Option<u8>,
    metric: Option<u32>,
) -> Option<Route> {
    let flags = u32::from_str_radix(flags, 16).ok()?;
    if !ifname_ok(ifname) || flags & RTF_UP == 0 || flags & RTF_REJECT != 0 {
        return None;
    }
    let gw = gw?;
    let gateway = (!gw.is_unspecified()).then_some(gw);
    Some(Route { ifname: ifname.to_string(), dest: dest?, prefix: prefix?, gateway, metric: metric? })
}

/// `/proc/net/route`: `Iface Destination Gateway Flags RefCnt Use Metric Mask ...`, in `%08X`.
pub fn parse_v4(text: &str) -> Vec<Route> {
    // The kernel prints each address as eight hex digits: anything else is not its table.
    let ip = |h: &str| {
        (h.len() == 8).then(|| u32::from_str_radix(h, 16).ok().map(|v| Ipv4Addr::from(v.to_ne_bytes()))).flatten()
    };
    let lines = text.lines().skip(1).filter_map(|l| {
        let f: [&str; 8] = fields(l)?;
        // A mask is contiguous ones: its prefix length is its count of ones.
        let mask = ip(f[7]).map(u32::from).filter(|b| b.leading_ones() == b.count_ones());
        let prefix = mask.and_then(|b| u8::try_from(b.count_ones()).ok());
        let [dest, gw] = [f[1], f[2]].map(|h| ip(h).map(IpAddr::V4));
        route(f[0], f[3], [dest, gw], prefix, f[6].parse().ok())
    });
    lines.take(MAX_ROUTES).collect()
}

/// `/proc/net/ipv6_route`: `dest plen src plen nexthop metric refcnt use flags ifname`, in hex.
pub fn parse_v6(text: &str) -> Vec<Route> {
    let ip = |h: &str| (h.len() == 32).then(|| u128::from_str_radix(h, 16).ok().map(Ipv6Addr::from)).flatten();
    let lines = text.lines().filter_map(|l| {
        let f: [&str; 10] = fields(l)?;
        let prefix = u8::from_str_radix(f[1], 16).ok().filter(|p| *p <= 128);
        let [dest, gw] = [f[0], f[4]].map(|h| ip(h).map(IpAddr::V6));
        route(f[9], f[8], [dest, gw], prefix, u32::from_str_radix(f[5], 16).ok())
    });
    lines.take(MAX_ROUTES).collect()
}

/// Both tables under `proc_root`, or why neither could be read.
pub fn read(proc_root: &Path) -> Result<Vec<Route>, String> {
    match (read_family(proc_root, false), read_family(proc_root, true)) {
        (Err(v4), Err(v6)) => Err(format!("{v4}; {v6}")),
        (v4, v6) => Ok(v4.unwrap_or_default().into_iter().chain(v6.unwrap_or_default()).collect()),
    }
}

/// The IPv4 table alone, or why it could not be read.
pub fn read_v4(proc_root: &Path) -> Result<Vec<Route>, String> {
    read_family(proc_root, false)
}

fn read_family(proc_root: &Path, v6: bool) -> Result<Vec<Route>, String> {
    let (name, parse): (&str, fn(&str) -> Vec<Route>) =
        if v6 { ("net/ipv6_route", parse_v6) } else { ("net/route", parse_v4) };
    let bytes = file::read(&proc_root.join(name), MAX_BYTES).map_err(|e| e.to_string())?;
    Ok(parse(&String::from_utf8_lossy(&bytes)))
}

/// This namespace's routes, each family's table read when first asked for (an IPv4 route often
/// settles a start without the IPv6 table). A table that cannot be read holds no routes.
pub struct Table<'a> {
    proc_root: Option<&'a Path>,
    v4: OnceCell<Vec<Route>>,
    v6: OnceCell<Vec<Route>>,
}

impl<'a> Table<'a> {
    pub fn read(proc_root: &'a Path) -> Self {
        Table { proc_root: Some(proc_root), v4: OnceCell::new(), v6: OnceCell::new() }
    }

    /// Routes already at hand (tests, fixtures).
    pub fn given(routes: Vec<Route>) -> Self {
        let (v6, v4): (Vec<Route>, Vec<Route>) = routes.into_iter().partition(|r| r.dest.is_ipv6());
        Table { proc_root: None, v4: OnceCell::from(v4), v6: OnceCell::from(v6) }
    }

    pub fn family(&self, v6: bool) -> &[Route] {
        let cell = if v6 { &self.v6 } else { &self.v4 };
        cell.get_or_init(|| self.proc_root.map(|p| read_family(p, v6).unwrap_or_default()).unwrap_or_default())
    }

    /// Whether one family's table has been read (or given): for tests of its laziness.
    pub fn has_read(&self, v6: bool) -> bool {
        if v6 { &self.v6 } else { &self.v4 }.get().is_some()
    }
}

/// The route the kernel's main table takes to `to`: the longest prefix, then the lowest metric.
pub fn lookup<'a>(routes: &'a [Route], to: &IpAddr) -> Option<&'a Route> {
    routes.iter().filter(|r| r.holds(to)).min_by_key(|r| (std::cmp::Reverse(r.prefix), r.metric))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pod's table as the kernel prints it: eth0 with the default route, two rails.
    const V4: &str = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
eth0\t00000000\t0100800A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
eth0\t0000800A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n\
net1\t0000090A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
net2\t0001090A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";

    const V6: &str = "fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     net1\n\
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003     eth0\n\
00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n";

    #[cfg(target_endian = "little")]
    #[test]
    fn ipv4_routes_pick_the_longest_prefix() {
        let r = parse_v4(V4);
        assert_eq!(r.len(), 4);
        let to = |s: &str| lookup(&r, &s.parse().expect("ip")).map(|x| x.ifname.as_str());
        assert_eq!(to("10.9.1.7"), Some("net2"));
        assert_eq!(to("10.128.3.4"), Some("eth0"));
        assert_eq!(to("8.8.8.8"), Some("eth0"));
        assert!(r[0].is_default() && r[0].gateway == Some("10.128.0.1".parse().expect("ip")));
    }

    #[test]
    fn ipv6_routes_skip_reject_entries() {
        let r = parse_v6(V6);
        assert_eq!(r.len(), 2);
        let to = |s: &str| lookup(&r, &s.parse().expect("ip")).map(|x| x.ifname.as_str());
        assert_eq!(to("fd00::5"), Some("net1"));
        assert_eq!(to("2001:db8::1"), Some("eth0"));
    }

    #[test]
    fn hostile_lines_are_skipped() {
        assert!(parse_v4("header\neth0 zz 0 1 0 0 0 0\n\n\t\t\n").is_empty());
        // A mask that is not contiguous ones.
        assert!(parse_v4("h\neth0 00000000 00000000 0001 0 0 0 00FF00FF 0 0 0\n").is_empty());
        assert!(parse_v6("fd00 ff 0 0 0 0 0 0 1 net1\n").is_empty());
        assert!(parse_v6(&"x ".repeat(100_000)).is_empty());
    }
}

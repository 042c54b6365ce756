//! NCCL's bootstrap interface: which of this namespace's interfaces routes to the job's
//! coordinator (`MASTER_ADDR`, `PET_MASTER_ADDR`, or the gate's coordinator), else carries the
//! default route. NCCL left to itself prefers `ib*` interfaces, then any but `lo` and `docker*`:
//! in a pod that can be a rail, a link-local-only link or a pod-identity (169.254) link, and its
//! out-of-band socket then hangs or fails.
//!
//! A coordinator given by name is resolved with a deadline ([`RESOLVE_WAIT`]): its DNS record
//! often appears only once its pod is ready, and the job must not wait on it here; past the
//! deadline the default route decides and the answer says so. The candidate is never a rail
//! (an interface whose RDMA port is handed to NCCL), never loopback, never an interface with only
//! link-local addresses. Reads the routing table (`route`) and this namespace's addresses; the
//! name lookup comes in as a function, so tests decide what it answers and how long it takes.

use std::ffi::OsStr;
use std::net::IpAddr;
use std::sync::mpsc;
use std::time::Duration;

use serde::Serialize;

use crate::detect::netif::OwnAddr;
use crate::detect::route::{self, Route};
use crate::detect::sysfs::Sysfs;
use crate::detect::Vars;

/// How long a coordinator's name may take to resolve at start.
pub const RESOLVE_WAIT: Duration = Duration::from_millis(1000);
/// The longest coordinator value looked at (a DNS name is at most 253 bytes).
const MAX_NAME: usize = 253;

/// What a name lookup gave.
pub enum Lookup {
    Addrs(Vec<IpAddr>),
    Failed(String),
    TimedOut,
}

/// Resolves `name` through the system's resolver on a thread of its own, waiting at most `wait`:
/// a lookup still running then is left to finish unread.
pub fn resolve(name: &str, wait: Duration) -> Lookup {
    use std::net::ToSocketAddrs;
    let (tx, rx) = mpsc::channel();
    let host = name.to_string();
    let spawned = std::thread::Builder::new().name("resolve".into()).spawn(move || {
        let r = (host.as_str(), 0).to_socket_addrs().map(|a| a.map(|s| s.ip()).collect::<Vec<_>>());
        let _ = tx.send(r);
    });
    if let Err(e) = spawned {
        return Lookup::Failed(format!("cannot start the lookup: {e}"));
    }
    match rx.recv_timeout(wait) {
        Ok(Ok(a)) => Lookup::Addrs(a),
        Ok(Err(e)) => Lookup::Failed(e.to_string()),
        Err(_) => Lookup::TimedOut,
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bootstrap {
    /// `MASTER_ADDR=trainer-0.job` (sanitised), when one was given.
    pub coordinator: Option<String>,
    /// What it resolved to (empty: not given, not resolved in time, or no address).
    pub coordinator_addresses: Vec<IpAddr>,
    /// The interface NCCL's and Gloo's bootstrap should use, when one qualifies.
    pub ifname: Option<String>,
    /// `AF_INET` or `AF_INET6`: the family of the address it reaches the coordinator with.
    pub family: Option<&'static str>,
    /// How it was chosen, or why none was: for the summary.
    pub how: String,
}

/// The net devices of `devices` (`device/net/*` in sysfs): rails, whose RDMA ports NCCL_IB_HCA
/// holds, never the bootstrap's.
pub fn rails<'a>(sysfs: &Sysfs, devices: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for d in devices {
        out.extend(sysfs.list(&format!("class/infiniband/{d}/device/net"), &mut problems));
    }
    out
}

/// Where the coordinator comes from, in order: the launcher's variables, then the gate's.
pub fn coordinator(vars: &Vars, gate: Option<&str>) -> Option<(String, String)> {
    for v in ["MASTER_ADDR", "PET_MASTER_ADDR"] {
        if let Some(x) = vars.get(OsStr::new(v)).map(|x| x.to_string_lossy().trim().to_string()) {
            if !x.is_empty() {
                return Some((v.to_string(), x));
            }
        }
    }
    let g = gate?;
    // The gate's coordinator is HOST or HOST:PORT (an IPv6 literal in brackets).
    let host = match g.strip_prefix('[') {
        Some(rest) => rest.split_once(']').map_or(rest, |(h, _)| h),
        None if g.matches(':').count() == 1 => g.split_once(':').map_or(g, |(h, _)| h),
        None => g,
    };
    Some(("--gate-coordinator".into(), host.to_string()))
}

/// A value from outside as it may be printed: control characters escaped, length bounded.
fn shown(s: &str) -> String {
    let cut: String = s.chars().take(MAX_NAME).collect();
    cut.escape_debug().to_string()
}

fn is_link_local(a: &IpAddr) -> bool {
    match a {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

/// Why `ifname` must not carry the bootstrap, or `None` when it may.
pub fn unfit(ifname: &str, addrs: &[OwnAddr], rails: &[String]) -> Option<String> {
    if ifname == "lo" {
        return Some("loopback".into());
    }
    if rails.iter().any(|r| r == ifname) {
        return Some("a rail whose RDMA port NCCL_IB_HCA holds".into());
    }
    let own: Vec<&IpAddr> = addrs.iter().filter(|a| a.ifname == ifname).map(|a| &a.addr).collect();
    if own.is_empty() {
        return Some("an interface without an address".into());
    }
    if own.iter().all(|a| is_link_local(a)) {
        return Some(
            "an interface with only link-local addresses (fe80::/10, 169.254.0.0/16), which reach only their own link"
                .into(),
        );
    }
    None
}

/// The interface that leaves for `to`: the one holding it, if it is this namespace's own, else
/// the route's.
pub fn interface_to<'a>(to: &IpAddr, routes: &'a [Route], addrs: &'a [OwnAddr]) -> Option<&'a str> {
    if let Some(a) = addrs.iter().find(|a| a.addr == *to) {
        return Some(&a.ifname);
    }
    route::lookup(routes, to).map(|r| r.ifname.as_str())
}

fn family(a: &IpAddr) -> &'static str {
    if a.is_ipv4() {
        "AF_INET"
    } else {
        "AF_INET6"
    }
}

/// The interface the bootstrap should use.
pub fn choose(
    vars: &Vars,
    gate: Option<&str>,
    routes: &[Route],
    addrs: &[OwnAddr],
    rails: &[String],
    lookup: &dyn Fn(&str) -> Lookup,
) -> Bootstrap {
    let coord = coordinator(vars, gate);
    let mut notes = Vec::new();
    let mut resolved = Vec::new();
    if let Some((var, value)) = &coord {
        let targets: Vec<IpAddr> = match value.parse::<IpAddr>() {
            Ok(a) => vec![a],
            Err(_) if value.len() > MAX_NAME || value.chars().any(|c| c.is_control() || c.is_whitespace()) => {
                notes.push(format!("{var}={} is no host name", shown(value)));
                Vec::new()
            }
            Err(_) => match lookup(value) {
                Lookup::Addrs(a) => a,
                Lookup::Failed(e) => {
                    notes.push(format!("{var}={} does not resolve ({})", shown(value), shown(&e)));
                    Vec::new()
                }
                Lookup::TimedOut => {
                    notes.push(format!(
                        "{var}={} did not resolve within {} ms (its record may appear only once its pod is ready)",
                        shown(value),
                        RESOLVE_WAIT.as_millis()
                    ));
                    Vec::new()
                }
            },
        };
        resolved.clone_from(&targets);
        for t in &targets {
            if t.is_loopback() {
                notes.push(format!(
                    "{var}={} is this host's loopback, which tells nothing of the job's network",
                    shown(value)
                ));
                continue;
            }
            match interface_to(t, routes, addrs) {
                Some(i) => match unfit(i, addrs, rails) {
                    None => {
                        return Bootstrap {
                            coordinator: Some(format!("{var}={}", shown(value))),
                            coordinator_addresses: targets.clone(),
                            ifname: Some(i.to_string()),
                            family: Some(family(t)),
                            how: format!("{i} routes to the coordinator {var}={} ({t})", shown(value)),
                        }
                    }
                    Some(why) => notes.push(format!("the route to {var}={} ({t}) leaves by {i}, {why}", shown(value))),
                },
                None => notes.push(format!("no route to {var}={} ({t})", shown(value))),
            }
        }
    }
    let default = routes
        .iter()
        .filter(|r| r.is_default() && unfit(&r.ifname, addrs, rails).is_none())
        .min_by_key(|r| (r.dest.is_ipv6(), r.metric));
    let coordinator = coord.as_ref().map(|(v, x)| format!("{v}={}", shown(x)));
    match default {
        Some(r) => {
            let why = if coord.is_none() {
                "no MASTER_ADDR, PET_MASTER_ADDR or gate coordinator".to_string()
            } else {
                notes.join("; ")
            };
            Bootstrap {
                coordinator,
                coordinator_addresses: resolved,
                ifname: Some(r.ifname.clone()),
                family: Some(family(&r.dest)),
                how: format!("{} carries the default route ({why})", r.ifname),
            }
        }
        None => {
            notes.push("no default route leaves by an interface that qualifies".into());
            Bootstrap {
                coordinator,
                coordinator_addresses: resolved,
                ifname: None,
                family: None,
                how: format!("left to NCCL: {}", notes.join("; ")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(i: &str, a: &str) -> OwnAddr {
        OwnAddr { ifname: i.into(), addr: a.parse().expect("ip"), ifindex: None }
    }
    fn r(i: &str, d: &str, p: u8, m: u32) -> Route {
        Route { ifname: i.into(), dest: d.parse().expect("ip"), prefix: p, gateway: None, metric: m }
    }
    fn vars(kv: &[(&str, &str)]) -> Vars {
        kv.iter().map(|(k, v)| (k.into(), v.into())).collect()
    }
    fn pod() -> (Vec<Route>, Vec<OwnAddr>) {
        (
            vec![
                r("eth0", "0.0.0.0", 0, 0),
                r("eth0", "10.128.0.0", 16, 0),
                r("net1", "10.9.0.0", 24, 0),
                r("ib0", "10.50.0.0", 16, 0),
            ],
            vec![
                addr("eth0", "10.128.3.4"),
                addr("net1", "10.9.0.51"),
                addr("ib0", "10.50.0.2"),
                addr("pid0", "169.254.1.2"),
            ],
        )
    }
    fn never(_: &str) -> Lookup {
        Lookup::Failed("not asked".into())
    }

    #[test]
    fn the_coordinators_route_decides() {
        let (routes, addrs) = pod();
        let b = choose(&vars(&[("MASTER_ADDR", "10.50.0.9")]), None, &routes, &addrs, &["net1".into()], &never);
        assert_eq!(b.ifname.as_deref(), Some("ib0"), "{b:?}");
        assert_eq!(b.family, Some("AF_INET"));
    }

    #[test]
    fn a_rail_route_falls_back_to_the_default_route_and_says_why() {
        let (routes, addrs) = pod();
        let b = choose(&vars(&[("MASTER_ADDR", "10.9.0.9")]), None, &routes, &addrs, &["net1".into()], &never);
        assert_eq!(b.ifname.as_deref(), Some("eth0"));
        assert!(b.how.contains("leaves by net1, a rail"), "{}", b.how);
    }

    #[test]
    fn a_name_that_does_not_resolve_in_time_leaves_it_to_the_default_route() {
        let (routes, addrs) = pod();
        let b = choose(&vars(&[("MASTER_ADDR", "trainer-0.job")]), None, &routes, &addrs, &[], &|_| Lookup::TimedOut);
        assert_eq!(b.ifname.as_deref(), Some("eth0"));
        assert!(b.how.contains("did not resolve within 1000 ms"), "{}", b.how);
    }

    #[test]
    fn link_local_only_and_loopback_never_qualify() {
        let (mut routes, addrs) = pod();
        routes.retain(|r| r.ifname != "eth0");
        routes.push(r("pid0", "0.0.0.0", 0, 0));
        let b = choose(&vars(&[("MASTER_ADDR", "127.0.0.1")]), None, &routes, &addrs, &[], &never);
        assert_eq!(b.ifname, None, "{b:?}");
        assert!(b.how.contains("loopback") && b.how.starts_with("left to NCCL"), "{}", b.how);
    }

    #[test]
    fn the_gate_coordinator_is_read_without_its_port() {
        assert_eq!(coordinator(&vars(&[]), Some("head-0:18516")).map(|c| c.1).as_deref(), Some("head-0"));
        assert_eq!(coordinator(&vars(&[]), Some("[fd00::1]:1")).map(|c| c.1).as_deref(), Some("fd00::1"));
        assert_eq!(coordinator(&vars(&[]), Some("fd00::1")).map(|c| c.1).as_deref(), Some("fd00::1"));
    }

    #[test]
    fn hostile_names_are_not_looked_up_and_print_escaped() {
        let (routes, addrs) = pod();
        let b = choose(&vars(&[("MASTER_ADDR", "a\u{1b}[31mb")]), None, &routes, &addrs, &[], &|_| panic!("looked up"));
        assert!(b.how.contains("\\u{1b}"), "{}", b.how);
    }
}

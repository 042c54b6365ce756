//! NCCL's bootstrap interface: the one that routes to the job's coordinator, else carries the
//! default route; never a rail, loopback or link-local only. Pure but for the routing table's
//! lazy read; a user's `NCCL_SOCKET_IFNAME`/`GLOO_SOCKET_IFNAME` is kept and checked.

use std::collections::BTreeSet;
use std::net::IpAddr;

use serde::Serialize;

use nw_nccl::env::{GLOO_SOCKET_IFNAME, SOCKET_IFNAME};
use nw_nccl::list::List;
use nw_observe::detect::bootstrap::{is_link_local, Lookup, RESOLVE_WAIT};
use nw_observe::detect::netif::OwnAddr;
use nw_observe::detect::route::{self, Route};
use nw_observe::detect::Vars;

use crate::host::RailsReport;
use crate::{Action, Plan};

/// The longest coordinator value looked at (a DNS name is at most 253 bytes).
const MAX_NAME: usize = 253;

/// The gate's coordinator: `--gate-coordinator`'s value (`HOST` or `HOST:PORT`).
#[derive(Debug, Clone, Copy)]
pub struct Gate<'a> {
    pub name: &'a str,
    pub value: &'a str,
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

/// `(where it was given, host)`: the launcher's variables first, then the gate's.
pub fn coordinator(vars: &Vars, gate: Option<Gate>) -> Option<(String, String)> {
    for v in ["MASTER_ADDR", "PET_MASTER_ADDR"] {
        if let Some(x) = crate::user(vars, v).map(|x| x.trim().to_string()).filter(|x| !x.is_empty()) {
            return Some((v.to_string(), x));
        }
    }
    let Gate { name, value: g } = gate?;
    // The gate's coordinator is HOST or HOST:PORT (an IPv6 literal in brackets).
    let host = match g.strip_prefix('[') {
        Some(rest) => rest.split_once(']').map_or(rest, |(h, _)| h),
        None if g.matches(':').count() == 1 => g.split_once(':').map_or(g, |(h, _)| h),
        None => g,
    };
    Some((name.to_string(), host.to_string()))
}

/// A value from outside as it may be printed: control characters escaped, length bounded.
fn shown(s: &str) -> String {
    let cut: String = s.chars().take(MAX_NAME).collect();
    cut.escape_debug().to_string()
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
    let why =
        "an interface with only link-local addresses (fe80::/10, 169.254.0.0/16), which reach only their own link";
    own.iter().all(|a| is_link_local(a)).then(|| why.into())
}

/// The interface that leaves for `to`: the one holding it, else the route's.
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

/// Whether `value` may be a host name to look up: bounded, no control character or space.
fn host_name(value: &str) -> bool {
    value.len() <= MAX_NAME && !value.chars().any(|c| c.is_control() || c.is_whitespace())
}

/// The coordinator's host name, where it must be looked up (given, not an address).
pub fn to_resolve(vars: &Vars, gate: Option<Gate>) -> Option<String> {
    let (_, value) = coordinator(vars, gate)?;
    (value.parse::<IpAddr>().is_err() && host_name(&value)).then_some(value)
}

/// The interface the bootstrap should use; `lookup` is what [`to_resolve`]'s name resolved to.
pub fn choose(
    vars: &Vars,
    gate: Option<Gate>,
    routes: &route::Table,
    addrs: &[OwnAddr],
    rails: &[String],
    lookup: Option<&Lookup>,
) -> Bootstrap {
    let coord = coordinator(vars, gate);
    let coordinator = coord.as_ref().map(|(v, x)| format!("{v}={}", shown(x)));
    let mut notes = Vec::new();
    let mut resolved = Vec::new();
    if let (Some((_, value)), Some(given)) = (&coord, &coordinator) {
        let (targets, problem) = match (value.parse::<IpAddr>(), lookup) {
            (Ok(a), _) => (vec![a], None),
            (Err(_), _) if !host_name(value) => (Vec::new(), Some("is no host name".to_string())),
            (Err(_), Some(Lookup::Addrs(a))) => (a.clone(), None),
            (Err(_), Some(Lookup::Failed(e))) => (Vec::new(), Some(format!("does not resolve ({})", shown(e)))),
            (Err(_), None) => (Vec::new(), Some("was not looked up".to_string())),
            (Err(_), Some(Lookup::TimedOut)) => (
                Vec::new(),
                Some(format!(
                    "did not resolve within {} ms (its record may appear only once its pod is ready)",
                    RESOLVE_WAIT.as_millis()
                )),
            ),
        };
        notes.extend(problem.map(|p| format!("{given} {p}")));
        resolved.clone_from(&targets);
        for t in &targets {
            if t.is_loopback() {
                notes.push(format!("{given} is this host's loopback, which tells nothing of the job's network"));
                continue;
            }
            match interface_to(t, routes.family(t.is_ipv6()), addrs) {
                Some(i) => match unfit(i, addrs, rails) {
                    None => {
                        return Bootstrap {
                            coordinator: Some(given.clone()),
                            coordinator_addresses: targets.clone(),
                            ifname: Some(i.to_string()),
                            family: Some(family(t)),
                            how: format!("{i} routes to the coordinator {given} ({t})"),
                        }
                    }
                    Some(why) => notes.push(format!("the route to {given} ({t}) leaves by {i}, {why}")),
                },
                None => notes.push(format!("no route to {given} ({t})")),
            }
        }
    }
    // An IPv4 default route first: the IPv6 table is read only when none qualifies.
    let default_of = |v6: bool| {
        routes
            .family(v6)
            .iter()
            .filter(|r| r.is_default() && unfit(&r.ifname, addrs, rails).is_none())
            .min_by_key(|r| r.metric)
    };
    let (ifname, family, how) = match default_of(false).or_else(|| default_of(true)) {
        Some(r) => {
            let why = if coord.is_none() {
                "no MASTER_ADDR, PET_MASTER_ADDR or gate coordinator".to_string()
            } else {
                notes.join("; ")
            };
            (Some(r.ifname.clone()), Some(family(&r.dest)), format!("{} carries the default route ({why})", r.ifname))
        }
        None => {
            notes.push("no default route leaves by an interface that qualifies".into());
            (None, None, format!("left to NCCL: {}", notes.join("; ")))
        }
    };
    Bootstrap { coordinator, coordinator_addresses: resolved, ifname, family, how }
}

/// Where the pod sees every port, the rails' interfaces less those that route to the coordinator.
pub fn host_rails(plan: &Plan, r: &RailsReport) -> Vec<String> {
    let to_coordinator: Vec<&str> =
        r.evidence.ifaces.iter().filter(|i| i.coordinator_route).map(|i| i.name.as_str()).collect();
    let used = r.evidence.ports.iter().filter(|p| plan.is_used(&p.device, p.port));
    let rails = used.flat_map(|p| p.netdevs.iter().cloned()).filter(|n| !to_coordinator.contains(&n.as_str()));
    rails.collect::<BTreeSet<_>>().into_iter().collect()
}

/// Why a user's value of `name` is wrong here, or `None`: Gloo reads plain interface names only,
/// and NCCL must not be let take a link-local-only interface. A start warns of it; doctor fails it.
pub fn user_value_problem(name: &str, value: &str, addrs: &[OwnAddr]) -> Option<String> {
    if name == GLOO_SOCKET_IFNAME {
        if value.starts_with('^') || value.starts_with('=') {
            return Some(format!(
                "GLOO_SOCKET_IFNAME={:?} is NCCL's list syntax, which Gloo does not read: it looks for an interface named {:?} and fails (\"Unable to find address for\"); Gloo takes interface names only (eth0, or eth0,eth1)",
                shown(value),
                shown(value.split(',').next().unwrap_or(value))
            ));
        }
        return None;
    }
    let list = List::parse(value);
    let link_local_only = |n: &str| addrs.iter().filter(|a| a.ifname == n).all(|a| is_link_local(&a.addr));
    let taken: BTreeSet<&str> = addrs.iter().map(|a| a.ifname.as_str()).collect();
    let taken: Vec<&str> =
        taken.into_iter().filter(|n| *n != "lo" && list.selects(n, None) && link_local_only(n)).collect();
    (!taken.is_empty()).then(|| {
        format!(
            "{name}={:?} lets NCCL take {}, with only link-local addresses (fe80::/10, 169.254.0.0/16): its bootstrap there reaches no other node and hangs (NVIDIA/nccl#1291)",
            shown(value),
            taken.join(", ")
        )
    })
}

/// A user's bootstrap variables that would break the job: a warning each, and with `--override`
/// the value nccl-wrap chose replaces it (where it chose one).
pub fn user_values(plan: &mut Plan, vars: &Vars, addrs: &[OwnAddr], override_user: bool) {
    for name in [SOCKET_IFNAME, GLOO_SOCKET_IFNAME] {
        let Some(why) = crate::user(vars, name).and_then(|u| user_value_problem(name, &u, addrs)) else { continue };
        let line = match plan.vars.iter_mut().find(|v| v.name == name) {
            Some(v) if override_user => {
                v.action = Action::Override;
                format!("{why}; replaced with {:?} (--override)", v.value)
            }
            Some(v) => format!("{why}; kept (pass --override to replace it with {:?})", v.value),
            None => format!("{why}; kept (no interface qualifies for the bootstrap to replace it with)"),
        };
        plan.warnings.push(line);
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
    fn pod() -> (route::Table<'static>, Vec<OwnAddr>) {
        let (routes, addrs) = pod_routes();
        (route::Table::given(routes), addrs)
    }
    fn pod_routes() -> (Vec<Route>, Vec<OwnAddr>) {
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
    fn g(value: &str) -> Option<Gate<'_>> {
        Some(Gate { name: "--gate-coordinator", value })
    }

    #[test]
    fn user_values_gloo_cannot_read_or_that_take_a_link_local_link_are_named() {
        let addrs = [addr("eth0", "10.0.0.5"), addr("pod-id-link0", "169.254.170.23"), addr("eth0", "fe80::1")];
        let eks = "^lo,docker,veth,eni";
        let why = user_value_problem(SOCKET_IFNAME, eks, &addrs).expect("takes the pod-identity link");
        assert!(why.contains("lets NCCL take pod-id-link0"), "{why}");
        let why = user_value_problem(GLOO_SOCKET_IFNAME, eks, &addrs).expect("NCCL's syntax");
        assert!(why.contains("Gloo does not read"), "{why}");
        assert!(user_value_problem(GLOO_SOCKET_IFNAME, "=eth0", &addrs).is_some());
        // Plain names for Gloo, and an NCCL list that leaves the link out, are fine.
        assert_eq!(user_value_problem(GLOO_SOCKET_IFNAME, "eth0", &addrs), None);
        assert_eq!(user_value_problem(SOCKET_IFNAME, "=eth0", &addrs), None);
        assert_eq!(user_value_problem(SOCKET_IFNAME, "^lo,docker,veth,eni,pod-id", &addrs), None);
    }

    #[test]
    fn the_coordinators_route_decides() {
        let (routes, addrs) = pod();
        let b = choose(&vars(&[("MASTER_ADDR", "10.50.0.9")]), None, &routes, &addrs, &["net1".into()], None);
        assert_eq!(b.ifname.as_deref(), Some("ib0"), "{b:?}");
        assert_eq!(b.family, Some("AF_INET"));
    }

    #[test]
    fn a_rail_route_falls_back_to_the_default_route_and_says_why() {
        let (routes, addrs) = pod();
        let b = choose(&vars(&[("MASTER_ADDR", "10.9.0.9")]), None, &routes, &addrs, &["net1".into()], None);
        assert_eq!(b.ifname.as_deref(), Some("eth0"));
        assert!(b.how.contains("leaves by net1, a rail"), "{}", b.how);
    }

    #[test]
    fn a_name_that_does_not_resolve_in_time_leaves_it_to_the_default_route() {
        let (routes, addrs) = pod();
        let v = vars(&[("MASTER_ADDR", "trainer-0.job")]);
        assert_eq!(to_resolve(&v, None).as_deref(), Some("trainer-0.job"));
        let b = choose(&v, None, &routes, &addrs, &[], Some(&Lookup::TimedOut));
        assert_eq!(b.ifname.as_deref(), Some("eth0"));
        assert!(b.how.contains("did not resolve within 1000 ms"), "{}", b.how);
    }

    #[test]
    fn link_local_only_and_loopback_never_qualify() {
        let (mut routes, addrs) = pod_routes();
        routes.retain(|r| r.ifname != "eth0");
        routes.push(r("pid0", "0.0.0.0", 0, 0));
        let routes = route::Table::given(routes);
        let b = choose(&vars(&[("MASTER_ADDR", "127.0.0.1")]), None, &routes, &addrs, &[], None);
        assert_eq!(b.ifname, None, "{b:?}");
        assert!(b.how.contains("loopback") && b.how.starts_with("left to NCCL"), "{}", b.how);
    }

    /// A pod's proc root holding both tables: an IPv4 default route by eth0, an IPv6 one by eth1.
    fn proc_root() -> tempfile::TempDir {
        let t = tempfile::tempdir().expect("tempdir");
        let root = t.path();
        std::fs::create_dir_all(root.join("net")).expect("mkdir");
        std::fs::write(
            root.join("net/route"),
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
eth0\t00000000\t0100800A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n",
        )
        .expect("write");
        std::fs::write(
            root.join("net/ipv6_route"),
            "00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003     eth1\n",
        )
        .expect("write");
        t
    }

    #[test]
    fn an_ipv4_default_route_settles_it_without_the_ipv6_table() {
        let root = proc_root();
        let routes = route::Table::read(root.path());
        let addrs = vec![addr("eth0", "10.128.3.4"), addr("eth1", "fd00::4")];
        let b = choose(&vars(&[]), None, &routes, &addrs, &[], None);
        assert_eq!((b.ifname.as_deref(), b.family), (Some("eth0"), Some("AF_INET")), "{b:?}");
        assert!(routes.has_read(false) && !routes.has_read(true), "the IPv6 table was read");
        // An IPv6 coordinator is looked up in the IPv6 table.
        let b = choose(&vars(&[("MASTER_ADDR", "2001:db8::9")]), None, &routes, &addrs, &[], None);
        assert_eq!((b.ifname.as_deref(), b.family), (Some("eth1"), Some("AF_INET6")), "{b:?}");
    }

    #[test]
    fn the_ipv6_default_route_is_taken_when_no_ipv4_one_qualifies() {
        let root = proc_root();
        let routes = route::Table::read(root.path());
        let addrs = vec![addr("eth0", "10.128.3.4"), addr("eth1", "fd00::4")];
        let b = choose(&vars(&[]), None, &routes, &addrs, &["eth0".into()], None);
        assert_eq!((b.ifname.as_deref(), b.family), (Some("eth1"), Some("AF_INET6")), "{b:?}");
    }

    #[test]
    fn the_gate_coordinator_is_read_without_its_port_and_named_as_given() {
        assert_eq!(coordinator(&vars(&[]), g("head-0")).map(|c| c.0).as_deref(), Some("--gate-coordinator"));
        assert_eq!(coordinator(&vars(&[]), g("head-0:18516")).map(|c| c.1).as_deref(), Some("head-0"));
        assert_eq!(coordinator(&vars(&[]), g("[fd00::1]:1")).map(|c| c.1).as_deref(), Some("fd00::1"));
        assert_eq!(coordinator(&vars(&[]), g("fd00::1")).map(|c| c.1).as_deref(), Some("fd00::1"));
    }

    #[test]
    fn hostile_names_are_not_looked_up_and_print_escaped() {
        let (routes, addrs) = pod();
        let v = vars(&[("MASTER_ADDR", "a\u{1b}[31mb")]);
        assert_eq!(to_resolve(&v, None), None, "a hostile name is never looked up");
        let b = choose(&v, None, &routes, &addrs, &[], None);
        assert!(b.how.contains("\\u{1b}"), "{}", b.how);
    }
}

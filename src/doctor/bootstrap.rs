//! Check `bootstrap`: the interface NCCL's and Gloo's out-of-band sockets use, and where a user's
//! `NCCL_SOCKET_IFNAME` or `GLOO_SOCKET_IFNAME` selects none, a rail, a link-local-only one, or
//! one that does not route to the coordinator. Reads routes and addresses; never connects.

use std::collections::BTreeSet;
use std::net::IpAddr;

use serde_json::json;

use super::{user_var, Check, Inputs, Status};
use nw_decide::bootstrap::{interface_to, unfit, user_value_problem, Bootstrap};
use nw_nccl::env::{GLOO_SOCKET_IFNAME, SOCKET_IFNAME};
use nw_nccl::list::List;
use nw_observe::detect::netif::OwnAddr;
use nw_observe::detect::route;

pub(super) fn checks(inp: &Inputs) -> Vec<Check> {
    let Some(b) = inp.plan.bootstrap.as_ref() else { return Vec::new() };
    let routes = route::read(inp.proc_root).unwrap_or_default();
    let seen = &inp.plan.detection.addresses;
    let addrs: Vec<OwnAddr> = if seen.is_empty() { (inp.addrs)().unwrap_or_default() } else { seen.clone() };
    let ports = inp.plan.detection.devices.iter().flat_map(|d| &d.ports);
    let rails: Vec<String> = ports
        .filter_map(|p| {
            p.gid.as_ref().and_then(|g| g.ndev.clone()).or_else(|| p.pkey.as_ref().map(|k| k.netdev.clone()))
        })
        .collect();
    let names: BTreeSet<&str> = addrs.iter().map(|a| a.ifname.as_str()).collect();
    let mut out = Vec::new();
    let set = [SOCKET_IFNAME, GLOO_SOCKET_IFNAME].into_iter().filter_map(|v| user_var(inp.vars, v).map(|x| (v, x)));
    for (var, value) in set {
        // NCCL's list syntax, or Gloo's plain names.
        let (list, want): (_, Vec<&str>) = (List::parse(&value), value.split(',').map(str::trim).collect());
        let selects = |n: &&str| if var == SOCKET_IFNAME { list.selects(n, None) } else { want.contains(n) };
        let selected: Vec<&str> = names.iter().copied().filter(selects).collect();
        let mut c = user_value(var, &value, &selected, b, &routes, &addrs, &rails);
        // What a start warns of (decide's rule, the one copy) fails here, with what to set instead.
        if let Some(why) = user_value_problem(var, &value, &addrs) {
            c.status = Status::Fail;
            c.summary = format!("{}; {why}", c.summary);
            c.hint = Some(instead(var, b.ifname.as_deref()));
        }
        out.push(c);
    }
    if out.is_empty() || user_var(inp.vars, SOCKET_IFNAME).is_none() {
        let c = match &b.ifname {
            Some(i) => Check::new(
                "bootstrap",
                Status::Pass,
                format!("nccl-wrap exports NCCL_SOCKET_IFNAME='={i}' and GLOO_SOCKET_IFNAME={i}: {}", b.how),
            ),
            None => Check::new("bootstrap", Status::Warn, format!("no bootstrap interface exported: {}", b.how)).hint(
                "set MASTER_ADDR (or NCCL_SOCKET_IFNAME=='<interface>') to the interface that reaches every other pod",
            ),
        };
        out.push(c.ev("bootstrap", json!(b)));
    }
    out
}

/// What to set instead of a user's bootstrap value that Gloo cannot read or that lets NCCL take a
/// link-local-only interface (`ours`: the interface nccl-wrap would export).
fn instead(var: &str, ours: Option<&str>) -> String {
    let name = ours.unwrap_or("IFNAME");
    if var == GLOO_SOCKET_IFNAME {
        format!("set GLOO_SOCKET_IFNAME={name} (interface names only, a comma list at most; never NCCL's ^ or = syntax), or unset it and nccl-wrap exports it")
    } else {
        format!("set NCCL_SOCKET_IFNAME=={name} (the interface that routes to the coordinator), or add the link-local-only interface to the ^ list; or unset it and nccl-wrap exports it")
    }
}

/// A user's bootstrap value, judged: what it selects, and whether that reaches the coordinator.
fn user_value(
    var: &'static str,
    value: &str,
    selected: &[&str],
    b: &Bootstrap,
    routes: &[route::Route],
    addrs: &[OwnAddr],
    rails: &[String],
) -> Check {
    let (coordinator, targets) = (b.coordinator.as_deref(), &b.coordinator_addresses);
    let mut status = Status::Pass;
    let sel = if selected.is_empty() { "no interface".to_string() } else { selected.join(", ") };
    let mut findings = vec![format!("{var}={value:?} (kept as set) selects {sel}")];
    if selected.is_empty() {
        status = Status::Fail;
        findings.push(
            "the bootstrap will find no socket interface (NCCL: \"Bootstrap : no socket interface found\")".into(),
        );
    }
    for i in selected {
        if let Some(why) = unfit(i, addrs, rails) {
            status = status.max(Status::Warn);
            findings.push(format!("{i} is {why}"));
        }
    }
    let via: Vec<(IpAddr, Option<&str>)> = targets.iter().map(|t| (*t, interface_to(t, routes, addrs))).collect();
    if let (Some(c), false) = (coordinator, via.is_empty()) {
        if !via.iter().any(|(_, i)| i.is_some_and(|i| selected.contains(&i))) {
            status = status.max(Status::Warn);
            let leaves: Vec<String> = via.iter().map(|(t, i)| format!("{t} by {}", i.unwrap_or("no route"))).collect();
            findings
                .push(format!("the coordinator {c} is reached {}, not through what {var} selects", leaves.join(", ")));
        }
    }
    Check::new("bootstrap", status, findings.join("; "))
        .ev("variable", var)
        .ev("value", value)
        .ev("selects", json!(selected))
        .ev("coordinator", json!(coordinator))
        .ev("rails", json!(rails))
        .fix(format!("name the interface that routes to the coordinator and every other pod (usually eth0); unset {var} and nccl-wrap exports it"))
}

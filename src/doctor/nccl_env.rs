//! nccl-env: what the NCCL variables set in the environment actually select.

use super::*;

pub(super) fn checks(inp: &Inputs) -> Vec<Check> {
    let mut out = vec![ib_hca(inp)];
    if let Some(v) = user_var(inp.vars, SOCKET_IFNAME) {
        out.push(socket_ifname(inp, &v));
    }
    if let Some(v) = user_var(inp.vars, IB_DISABLE) {
        let on = v.trim().parse::<i64>().is_ok_and(|n| n != 0);
        let c = if on && inp.plan.rdma {
            let summary =
                format!("NCCL_IB_DISABLE={v} is set though this pod has usable RDMA ports: NCCL will use TCP sockets");
            Check::new("nccl-env", Status::Fail, summary).hint("unset NCCL_IB_DISABLE in the pod spec")
        } else {
            Check::new("nccl-env", Status::Pass, format!("NCCL_IB_DISABLE={v}"))
        };
        out.push(c.ev("variable", IB_DISABLE).ev("value", v));
    }
    out
}

/// Every visible RDMA device with its port numbers: the pod's from detection, others from sysfs.
pub(super) fn visible_ports(inp: &Inputs) -> Vec<(String, Vec<u32>)> {
    let d = &inp.plan.detection;
    let mut all: Vec<(String, Vec<u32>)> =
        d.devices.iter().map(|x| (x.name.clone(), x.ports.iter().map(|p| p.port).collect())).collect();
    for name in &d.not_ours {
        let mut problems = Vec::new();
        let listed = inp.sysfs.list(&format!("class/infiniband/{name}/ports"), &mut problems);
        all.push((name.clone(), listed.into_iter().filter_map(|p| p.parse().ok()).collect()));
    }
    all.sort_unstable_by(|a, b| nw_observe::detect::names::natural_cmp(&a.0, &b.0));
    all
}

pub(super) fn ib_hca(inp: &Inputs) -> Check {
    let plan = inp.plan;
    let pass = |summary: String| Check::new("nccl-env", Status::Pass, summary).ev("variable", IB_HCA);
    let Some(var) = plan.vars.iter().find(|v| v.name == IB_HCA) else {
        // Not in the plan: no usable port, so nccl-wrap sets NCCL_IB_DISABLE=1 instead.
        return match user_var(inp.vars, IB_HCA) {
            Some(v) => pass(format!(
                "NCCL_IB_HCA={v} is set, but no usable RDMA port exists; NCCL_IB_DISABLE=1 takes precedence"
            ))
            .ev("value", v),
            None => pass("NCCL_IB_HCA not set; no usable RDMA port, so nccl-wrap sets NCCL_IB_DISABLE=1".into()),
        };
    };
    let base =
        |c: Check| c.ev("variable", IB_HCA).ev("pod_ports", json!(plan.hca)).ev("nccl_wrap_value", var.value.as_str());
    let user = match (&var.previous, &var.action) {
        (None, _) => return base(pass(format!("NCCL_IB_HCA not set; nccl-wrap sets it exactly: {}", var.value))),
        (Some(prev), Action::Override) => {
            let summary = format!("NCCL_IB_HCA={prev} is replaced by {} (--override)", var.value);
            return base(pass(summary)).ev("value", prev.as_str());
        }
        (Some(prev), _) => prev.clone(),
    };
    let list = List::parse(&user);
    let visible = visible_ports(inp);
    let names: Vec<&str> = visible.iter().map(|(n, _)| n.as_str()).collect();
    let ports = visible.iter().flat_map(|(n, ports)| ports.iter().map(move |p| (n, *p)));
    let selected: Vec<String> =
        ports.filter(|(n, p)| list.selects(n, Some(i64::from(*p)))).map(|(n, p)| format!("{n}:{p}")).collect();
    let pod_names: Vec<&str> = plan.detection.devices.iter().map(|d| d.name.as_str()).collect();
    let pod_port = |s: &&str| pod_names.iter().any(|n| s.split(':').next() == Some(*n));
    let foreign: Vec<&str> = selected.iter().map(String::as_str).filter(|s| !pod_port(s)).collect();
    let missing: Vec<&str> = plan.hca.iter().filter(|p| !selected.contains(p)).map(String::as_str).collect();
    let head = format!("NCCL_IB_HCA={user} (set in the environment, kept) selects");
    let empty = ["nothing", "NCCL will find no IB device and fall back to TCP sockets silently"];
    let (mut status, mut findings) = selection(&list, &names, &head, &selected.join(", "), empty);
    if !foreign.is_empty() {
        status = Status::Fail;
        findings.push(format!(
            "{} {} not this pod's",
            foreign.join(", "),
            if foreign.len() == 1 { "is" } else { "are" }
        ));
    }
    unmatched(&list, &names, "no visible device", &mut status, &mut findings);
    if !missing.is_empty() && !selected.is_empty() {
        status = status.max(Status::Warn);
        findings.push(format!("leaves out this pod's {}", missing.join(", ")));
    }
    base(Check::new("nccl-env", status, findings.join("; ")))
        .ev("value", user.as_str())
        .ev("exclude", list.exclude)
        .ev("exact", list.exact)
        .ev("selects", json!(selected))
        .ev("visible", json!(names))
        .fix(format!(
            "nccl-wrap keeps a user-set NCCL_IB_HCA: remove it from the pod spec, pass --override (NCCL_WRAP_OVERRIDE=1), or write it exactly: NCCL_IB_HCA='{}' ('=' makes names exact)",
            var.value
        ))
}

pub(super) fn socket_ifname(inp: &Inputs, value: &str) -> Check {
    let mut problems = Vec::new();
    let netdevs = inp.sysfs.netdevs(&mut problems);
    let names: Vec<&str> = netdevs.keys().map(String::as_str).collect();
    let list = List::parse(value);
    let selected: Vec<&str> = names.iter().copied().filter(|n| list.selects(n, None)).collect();
    let head = format!("NCCL_SOCKET_IFNAME={value} selects");
    let empty = ["no interface", "NCCL's bootstrap will find no socket interface and abort"];
    let (mut status, mut findings) = selection(&list, &names, &head, &selected.join(", "), empty);
    unmatched(&list, &names, "no interface in this namespace", &mut status, &mut findings);
    Check::new("nccl-env", status, findings.join("; "))
        .ev("variable", SOCKET_IFNAME)
        .ev("value", value)
        .ev("selects", json!(selected))
        .ev("interfaces", json!(names))
        .ev("class_net", inp.sysfs.path("class/net").display().to_string())
        .fix(
            "name this namespace's interfaces (`ip -br link`); put '=' before the list for exact names, '^' to exclude",
        )
}

/// A list variable's first findings: what it selects (`[none, why]` when nothing: a failure), then
/// each entry that is a prefix of more names than one.
fn selection(list: &List, names: &[&str], head: &str, selected: &str, [none, why]: [&str; 2]) -> (Status, Vec<String>) {
    let mut status = Status::Pass;
    let mut findings = vec![format!("{head} {}", if selected.is_empty() { none } else { selected })];
    if selected.is_empty() {
        status = Status::Fail;
        findings.push(why.into());
    }
    for (entry, extra) in list.over_matches(names) {
        status = status.max(Status::Warn);
        findings.push(format!("`{entry}` is a prefix and also matches {}", extra.join(", ")));
    }
    (status, findings)
}

/// The list's entries that match none of `names`: a warning.
fn unmatched(list: &List, names: &[&str], nothing: &str, status: &mut Status, findings: &mut Vec<String>) {
    let unmatched = list.unmatched(names);
    if !unmatched.is_empty() {
        *status = (*status).max(Status::Warn);
        findings.push(format!("{} match(es) {nothing}", unmatched.join(", ")));
    }
}

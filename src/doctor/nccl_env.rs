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
            Check::new(
                "nccl-env",
                Status::Fail,
                format!("NCCL_IB_DISABLE={v} is set though this pod has usable RDMA ports: NCCL will use TCP sockets"),
            )
            .hint("unset NCCL_IB_DISABLE in the pod spec")
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
        let ports = inp
            .sysfs
            .list(&format!("class/infiniband/{name}/ports"), &mut problems)
            .into_iter()
            .filter_map(|p| p.parse().ok())
            .collect();
        all.push((name.clone(), ports));
    }
    all.sort_unstable_by(|a, b| nw_observe::detect::names::natural_cmp(&a.0, &b.0));
    all
}

pub(super) fn ib_hca(inp: &Inputs) -> Check {
    let plan = inp.plan;
    let ours: Vec<String> = plan.hca.clone();
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
        |c: Check| c.ev("variable", IB_HCA).ev("pod_ports", json!(ours)).ev("nccl_wrap_value", var.value.as_str());
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
    let selected: Vec<String> = visible
        .iter()
        .flat_map(|(n, ports)| ports.iter().map(move |p| (n, *p)))
        .filter(|(n, p)| list.selects(n, Some(i64::from(*p))))
        .map(|(n, p)| format!("{n}:{p}"))
        .collect();
    let pod_names: Vec<&str> = plan.detection.devices.iter().map(|d| d.name.as_str()).collect();
    let foreign: Vec<&String> =
        selected.iter().filter(|s| !pod_names.iter().any(|n| s.split(':').next() == Some(*n))).collect();
    let missing: Vec<&String> = ours.iter().filter(|p| !selected.contains(p)).collect();
    let over = list.over_matches(&names);
    let unmatched = list.unmatched(&names);

    let mut status = Status::Pass;
    let mut findings = vec![format!(
        "NCCL_IB_HCA={user} (set in the environment, kept) selects {}",
        if selected.is_empty() { "nothing".to_string() } else { selected.join(", ") }
    )];
    if selected.is_empty() {
        status = Status::Fail;
        findings.push("NCCL will find no IB device and fall back to TCP sockets silently".into());
    }
    for (entry, extra) in &over {
        status = status.max(Status::Warn);
        findings.push(format!("`{entry}` is a prefix and also matches {}", extra.join(", ")));
    }
    if !foreign.is_empty() {
        status = Status::Fail;
        findings.push(format!(
            "{} not this pod's",
            foreign.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                + if foreign.len() == 1 { " is" } else { " are" }
        ));
    }
    if !unmatched.is_empty() {
        status = status.max(Status::Warn);
        findings.push(format!("{} match(es) no visible device", unmatched.join(", ")));
    }
    if !missing.is_empty() && !selected.is_empty() {
        status = status.max(Status::Warn);
        findings.push(format!(
            "leaves out this pod's {}",
            missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        ));
    }
    let mut c = base(Check::new("nccl-env", status, findings.join("; ")))
        .ev("value", user.as_str())
        .ev("exclude", list.exclude)
        .ev("exact", list.exact)
        .ev("selects", json!(selected))
        .ev("visible", json!(names));
    if status != Status::Pass {
        c = c.hint(format!(
            "nccl-wrap keeps a user-set NCCL_IB_HCA: remove it from the pod spec, pass --override (NCCL_WRAP_OVERRIDE=1), or write it exactly: NCCL_IB_HCA='{}' ('=' makes names exact)",
            var.value
        ));
    }
    c
}

pub(super) fn socket_ifname(inp: &Inputs, value: &str) -> Check {
    let mut problems = Vec::new();
    let netdevs = inp.sysfs.netdevs(&mut problems);
    let names: Vec<&str> = netdevs.keys().map(String::as_str).collect();
    let list = List::parse(value);
    let selected: Vec<&str> = names.iter().copied().filter(|n| list.selects(n, None)).collect();
    let over = list.over_matches(&names);
    let unmatched = list.unmatched(&names);
    let mut status = Status::Pass;
    let mut findings = vec![format!(
        "NCCL_SOCKET_IFNAME={value} selects {}",
        if selected.is_empty() { "no interface".to_string() } else { selected.join(", ") }
    )];
    if selected.is_empty() {
        status = Status::Fail;
        findings.push("NCCL's bootstrap will find no socket interface and abort".into());
    }
    for (entry, extra) in &over {
        status = status.max(Status::Warn);
        findings.push(format!("`{entry}` is a prefix and also matches {}", extra.join(", ")));
    }
    if !unmatched.is_empty() {
        status = status.max(Status::Warn);
        findings.push(format!("{} match(es) no interface in this namespace", unmatched.join(", ")));
    }
    let mut c = Check::new("nccl-env", status, findings.join("; "))
        .ev("variable", SOCKET_IFNAME)
        .ev("value", value)
        .ev("selects", json!(selected))
        .ev("interfaces", json!(names))
        .ev("class_net", inp.sysfs.path("class/net").display().to_string());
    if status != Status::Pass {
        c = c.hint(
            "name this namespace's interfaces (`ip -br link`); put '=' before the list for exact names, '^' to exclude",
        );
    }
    c
}

//! devices and ports: does the pod have RDMA devices, and is each port usable as NCCL requires.

use super::*;

pub(super) fn check(inp: &Inputs) -> Check {
    let d = &inp.plan.detection;
    let class = inp.sysfs.path("class/infiniband");
    let devs: Vec<Value> = d
        .devices
        .iter()
        .map(|x| json!({"name": x.name, "origin": x.origin, "attachment": x.attachment, "named_as": x.named_as}))
        .collect();
    let mut problems: Vec<String> = d.sources.iter().flat_map(|s| s.problems.iter().cloned()).collect();
    problems.extend(d.warnings.iter().cloned());
    let names: Vec<&str> = d.devices.iter().map(|x| x.name.as_str()).collect();
    let others = if d.not_ours.is_empty() {
        String::new()
    } else {
        format!(
            "; {} other RDMA device(s) visible that are not this pod's ({}): a privileged pod, or shared RDMA netns mode",
            d.not_ours.len(),
            nw_observe::detect::names::abbreviate(&d.not_ours, 6)
        )
    };
    let (n, from, list) = (names.len(), d.source.describe(), names.join(", "));
    let c = if d.devices.is_empty() {
        let among =
            if d.not_ours.is_empty() { String::new() } else { format!(" among the {} visible", d.not_ours.len()) };
        let summary = format!(
            "no RDMA device of this pod found{among}: NCCL would run over TCP sockets (about 1 GiB/s instead of 80+)"
        );
        Check::new("devices", Status::Fail, summary)
        .hint("request an RDMA resource for the pod (an SR-IOV pool with isRdma: true, or an RDMA shared device plugin resource) and attach its network; `nccl-wrap env --json` shows what each source said")
    } else if !problems.is_empty() {
        let summary = format!(
            "{n} RDMA device(s) of this pod from {from} ({list}), with {} problem(s) in the sources{others}",
            problems.len()
        );
        Check::new("devices", Status::Warn, summary)
            .hint("fix what the problems name; the devices listed were still found")
    } else {
        Check::new("devices", Status::Pass, format!("{n} RDMA device(s) of this pod from {from}: {list}{others}"))
    };
    let mut c = c
        .ev("source", json!(d.source))
        .ev("sources", json!(d.sources))
        .ev("devices", devs)
        .ev("not_ours", json!(nw_observe::detect::names::sorted_natural(&d.not_ours)))
        .ev("class_infiniband", class.display().to_string());
    if !problems.is_empty() {
        c = c.ev("problems", json!(problems));
    }
    c
}

pub(super) fn ports(inp: &Inputs) -> Vec<Check> {
    let mut out = Vec::new();
    for dev in &inp.plan.detection.devices {
        let base = format!("class/infiniband/{}/ports", dev.name);
        if dev.ports.is_empty() {
            out.push(
                Check::new("ports", Status::Fail, format!("{}: no port readable in sysfs", dev.name))
                    .ev("device", dev.name.as_str())
                    .ev("ports_dir", inp.sysfs.path(&base).display().to_string())
                    .ev("problems", json!(dev.problems))
                    .hint("check that the device's driver is bound and its sysfs directory is readable"),
            );
            continue;
        }
        for p in &dev.ports {
            let mut what = format!(
                "{}:{} {} ({}), {}, {}",
                dev.name,
                p.port,
                p.state_name().unwrap_or("state unreadable"),
                p.phys_state_name().unwrap_or("physical state unreadable"),
                p.link_layer.as_deref().unwrap_or("link layer unreadable"),
                p.rate.as_deref().unwrap_or("rate unreadable")
            );
            // EFA reports no link layer: its port is fine when it is up, and NCCL reaches it
            // through the net plugin (the `efa` check), not its IB transport.
            let problem = if nw_decide::is_efa(dev) {
                match (p.state_name(), p.phys_state_name()) {
                    (Some("ACTIVE"), Some("LinkUp")) => None,
                    (state, phys) => Some(format!(
                        "port state is {} (physical state {}), not ACTIVE and LinkUp",
                        state.unwrap_or("unreadable"),
                        phys.unwrap_or("unreadable")
                    )),
                }
            } else {
                nw_decide::link_problem(p)
            };
            if nw_decide::is_efa(dev) && problem.is_none() {
                what += " (an EFA port: EFA reports no link layer)";
            }
            let mut c = match problem {
                None => Check::new("ports", Status::Pass, what),
                Some(why) => Check::new("ports", Status::Fail, format!("{what}: not usable, {why}")).hint(
                    "check the cable and the switch port (ibstat, `ip link` on its net device); for a VF, the PF's link and the VF's link state (`ip link set <pf> vf <n> state auto`); physical state Disabled means the port was disabled administratively (ibportstate, switch configuration)",
                ),
            };
            c = c.ev("device", dev.name.as_str()).ev("port", p.port);
            let files =
                [("state", &p.state), ("phys_state", &p.phys_state), ("link_layer", &p.link_layer), ("rate", &p.rate)];
            for (attr, value) in files {
                c = c.ev(attr, file(&inp.sysfs.path(&format!("{base}/{}/{attr}", p.port)), value.as_deref()));
            }
            if !p.problems.is_empty() {
                c = c.ev("problems", json!(p.problems));
            }
            out.push(c);
        }
    }
    if out.is_empty() {
        // The devices check already fails for this; one failure per cause.
        out.push(Check::new("ports", Status::Warn, "no RDMA port to check: this pod has no RDMA device"));
    }
    out
}

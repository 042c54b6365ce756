//! The report: what nccl-wrap found, from where, what it set, and what it could not do and why.
//! A short, stable block on stderr for people (`nccl-wrap:` prefix), and the whole plan as JSON.
//! Detail for debugging goes through `log` instead.

use std::fmt::Write as _;

use serde::Serialize;

use nw_decide::{Action, Plan};
use nw_nccl::env::shell_quote;
use nw_observe::detect::port::PortFacts;
use nw_observe::detect::userspace::Provider;
use nw_output::msg::PREFIX;
use nw_pid1::memlock::Memlock;

/// The summary printed before the command runs. `quiet` keeps only warnings.
pub fn summary(plan: &Plan, memlock: &Memlock, quiet: bool) -> String {
    let mut out = String::new();
    let mut line = |s: &str| {
        let _ = writeln!(out, "{PREFIX} {s}");
    };
    if !quiet {
        let d = &plan.detection;
        let on_efa = |name: &str| plan.efa.as_ref().is_some_and(|e| e.devices.iter().any(|x| x == name));
        let decisions: Vec<_> = plan.decisions.iter().filter(|x| !on_efa(&x.device)).collect();
        let used = decisions.iter().filter(|x| x.used).count();
        let source = d.sources.iter().find(|s| s.status == "used").filter(|s| !s.inputs.is_empty());
        let inputs = source.map(|s| format!(" ({})", inputs_shown(&s.inputs))).unwrap_or_default();
        let from = format!("from {}{inputs}", d.source.describe());
        if plan.efa.is_none() || !decisions.is_empty() {
            line(&format!("{} of {} RDMA port(s) usable, {from}", used, decisions.len()));
        }
        if let Some(e) = &plan.efa {
            line(&format!(
                "{} AWS EFA device(s) of this pod, {from}: {}; NCCL reaches them through its net plugin (aws-ofi-nccl over libfabric), never NCCL_IB_HCA",
                e.devices.len(),
                nw_observe::detect::names::abbreviate(&e.devices, 4)
            ));
        }
        for dev in d.devices.iter().filter(|x| !on_efa(&x.name)) {
            if dev.origin.contains("shared device") || dev.origin.contains("uverbs node") {
                line(&format!("  {}: {}", dev.name, dev.origin));
            }
            if let Some(host) = &dev.named_as {
                let at = nw_observe::detect::devices::function(&dev.attachment)
                    .map(|f| format!(" at {f}"))
                    .unwrap_or_default();
                line(&format!(
                    "  {}: {} names it {host} (its name in the host's namespace, or before a rename); found{at}",
                    dev.name, dev.origin
                ));
            }
            // A device of more than two ports is a multi-plane one (ConnectX-8/9): each active
            // port is a plane, said with its place among them; a name may carry the rest.
            let plane =
                |p: &&PortFacts| dev.ports.len() > 2 && p.state.as_deref().is_some_and(|s| s.contains("ACTIVE"));
            let planes: Vec<u32> = dev.ports.iter().filter(plane).map(|p| p.port).collect();
            let named = nw_observe::detect::names::identity(&dev.name);
            for p in &dev.ports {
                let decision = plan.decisions.iter().find(|x| x.device == dev.name && x.port == p.port);
                let mut s = format!("  {}:{} ", dev.name, p.port);
                match decision.and_then(|x| x.reason.as_deref()) {
                    None => {
                        let (layer, rate) = (p.link_layer.as_deref(), p.rate.as_deref());
                        let _ = write!(s, "{} {}", layer.unwrap_or("?"), rate.unwrap_or("rate unknown"));
                        if let Some((nic, plane, rail)) = named {
                            let _ = write!(s, ", NIC {nic} plane {plane} rail {rail} (by its name)");
                        } else if let Some(i) = planes.iter().position(|&n| n == p.port).filter(|_| planes.len() > 1) {
                            let _ = write!(s, ", plane {} of {}", i + 1, planes.len());
                        }
                        if let Some(g) = &p.gid {
                            let _ = write!(s, ", GID {} ({})", g.index, g.address);
                            if let Some(n) = &g.ndev {
                                let _ = write!(s, " on {n}");
                            }
                            if let Some(n) = &p.nccl_pick {
                                let whose = n.owner.map_or("owner unknown", |o| o.describe());
                                let _ = write!(
                                    s,
                                    ", this pod's (NCCL alone would take {}, {}, {whose})",
                                    n.index, n.address
                                );
                            }
                        }
                    }
                    Some(reason) => {
                        let _ = write!(s, "not used: {reason}");
                    }
                }
                line(&s);
            }
        }
        if !d.not_ours.is_empty() {
            line(&format!(
                "  {} other RDMA device(s) visible but not this pod's: {}",
                d.not_ours.len(),
                nw_observe::detect::names::abbreviate(&d.not_ours, 8)
            ));
        }
        for l in ready_lines(plan) {
            line(&l);
        }
        for v in &plan.vars {
            let prev = v.previous.as_deref().unwrap_or("");
            match v.action {
                Action::Set => line(&format!("set {}={}", v.name, shell_quote(&v.value))),
                Action::Override => line(&format!("set {}={} (overriding {prev:?})", v.name, shell_quote(&v.value))),
                Action::Kept => line(&format!("kept {}={}", v.name, shell_quote(prev))),
            }
        }
        line(&memlock.describe());
    } else if !memlock.sufficient() {
        line(&memlock.describe());
    }
    for w in all_warnings(plan) {
        line(&format!("warning: {w}"));
    }
    out
}

/// A source's inputs for the summary's first line: all where few, else the first two and how many
/// more (`env --json` lists them all).
fn inputs_shown(inputs: &[String]) -> String {
    if inputs.len() <= 3 {
        return inputs.join(", ");
    }
    format!("{}, ... ({} more)", inputs[..2].join(", "), inputs.len() - 2)
}

/// The image's userspace and the bootstrap interface, one line each, and the plan's notes.
fn ready_lines(plan: &Plan) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(u) = &plan.userspace {
        let verbs = match &u.libibverbs {
            Some(v) => {
                let ok = |p: bool| if p { "ok" } else { "MISSING" };
                let provider = |p: &Provider| format!("{} {}", p.name, ok(p.library.is_some() && p.config.is_some()));
                let p = u.providers.iter().map(provider).collect::<Vec<_>>().join(", ");
                let p = if p.is_empty() { p } else { format!(" (providers: {p})") };
                format!("libibverbs {}{p}", v.path)
            }
            None => "no libibverbs.so.1".into(),
        };
        let nccl = match &u.nccl {
            Some(n) => {
                let version = n.version.as_deref().unwrap_or("(version unknown)");
                format!("NCCL {version} {} ({})", n.found.path, n.found.by)
            }
            None => "no libnccl.so.2 found".into(),
        };
        let plugin = u.net_plugin.as_ref().map(|p| format!(", net plugin {} ({})", p.path, p.by)).unwrap_or_default();
        out.push(format!("image {}: {verbs}; {nccl}{plugin}", u.image_root));
    }
    if let Some(b) = &plan.bootstrap {
        out.push(format!("bootstrap: {}", b.how));
    }
    out.extend(plan.notes.iter().cloned());
    out
}

/// Every warning of the plan, detection's and the sources' included, in one list.
pub fn all_warnings(plan: &Plan) -> Vec<String> {
    let d = &plan.detection;
    let mut w: Vec<String> = d.sources.iter().flat_map(|s| s.problems.iter().cloned()).collect();
    w.extend(d.warnings.iter().cloned());
    w.extend(d.devices.iter().flat_map(|dev| dev.problems.iter().map(|p| format!("{}: {p}", dev.name))));
    w.extend(plan.warnings.iter().cloned());
    w
}

#[derive(Serialize)]
struct Whole<'a> {
    #[serde(flatten)]
    plan: &'a Plan,
    memlock: &'a Memlock,
    all_warnings: Vec<String>,
}

pub fn json(plan: &Plan, memlock: &Memlock) -> String {
    let whole = Whole { plan, memlock, all_warnings: all_warnings(plan) };
    serde_json::to_string(&whole).unwrap_or_else(|e| format!("{{\"error\":\"cannot serialise plan: {e}\"}}"))
}

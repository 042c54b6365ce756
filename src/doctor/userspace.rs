//! Check `userspace`: what NCCL in this image will load (libibverbs, each device's provider, NCCL,
//! any net plugin), from what the plan carries. Never loads a library.

use serde_json::json;

use super::{Check, Inputs, Status};

pub(super) fn check(inp: &Inputs) -> Option<Check> {
    let u = inp.plan.userspace.as_ref()?;
    let mut status = Status::Pass;
    let mut findings = vec![match &u.libibverbs {
        Some(v) => format!("libibverbs.so.1 is {} ({})", v.path, v.by),
        None => "no libibverbs.so.1".into(),
    }];
    for p in &u.providers {
        findings.push(match (&p.library, &p.config) {
            (Some(l), Some(_)) => format!("{} provider {l} for {}", p.name, p.devices.join(", ")),
            _ => format!("no usable {} provider for {}", p.name, p.devices.join(", ")),
        });
    }
    match &u.nccl {
        Some(n) => findings.push(format!(
            "NCCL {} is {} ({})",
            n.version.as_deref().unwrap_or("of unknown version"),
            n.found.path,
            n.found.by
        )),
        None => {
            status = Status::Warn;
            findings.push(
                "no libnccl.so.2 found (NCCL linked statically, or loaded from a path this check does not know)".into(),
            );
        }
    }
    if let Some(p) = &u.net_plugin {
        findings.push(format!("net plugin {} ({})", p.path, p.by));
    }
    let mut hint = None;
    if !u.missing.is_empty() {
        let what: Vec<String> = u.missing.iter().map(|m| format!("{} ({})", m.file, m.package)).collect();
        // EFA devices need the provider too (libfabric's efa provider opens them through libefa).
        let needed = inp.plan.rdma || inp.plan.efa.is_some();
        status = if needed { Status::Fail } else { Status::Warn };
        findings.push(format!(
            "missing: {}{}",
            what.join(", "),
            if needed { ": NCCL will run over TCP sockets though the pod has usable RDMA or EFA devices" } else { "" }
        ));
        hint = Some(format!(
            "install {} in the training image (NCCL loads the image's verbs stack, not nccl-wrap's); --require-rdma refuses to start without it",
            u.missing.iter().map(|m| m.package).collect::<Vec<_>>().join("; ")
        ));
    }
    Some(Check::new("userspace", status, findings.join("; ")).ev("userspace", json!(u)).hint_opt(hint))
}

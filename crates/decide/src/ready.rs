//! "Ready" means NCCL is ready: what the image's userspace, the bootstrap interface and the rails'
//! family add to the plan (`NCCL_NET`, `*_SOCKET_IFNAME`, `NCCL_IB_ADDR_FAMILY`, `NCCL_IGNORE_NET_MISMATCH`).
//! Pure. Never sets a variable the user set, but by the `--override` rule (`NCCL_NET`, the mismatch).

use super::{index_is_kept, reasons, user, Action, Choices, Plan, Var};
use crate::bootstrap::{self, Gate};
use nw_nccl::env::{
    version_at_least, GLOO_SOCKET_IFNAME, IB_ADDR_FAMILY, IB_GID_INDEX, IGNORE_NET_MISMATCH, IGNORE_NET_MISMATCH_SINCE,
    NET, SOCKET_IFNAME,
};
use nw_nccl::gid::{GidPrefs, RailFamily};
use nw_observe::detect::userspace::{Depth, Userspace};
use nw_observe::detect::Vars;
use nw_observe::observation::{Answers, Asks};

impl Plan {
    /// Why NCCL's IB transport will not start in this image though ports are usable, or `None`.
    pub fn userspace_refusal(&self) -> Option<String> {
        let why = self.missing(self.userspace.as_ref()?);
        (!why.is_empty()).then(|| why.join("; "))
    }

    /// What the image lacks for the ports and EFA devices in use, in words.
    fn missing(&self, u: &Userspace) -> Vec<String> {
        let used = self.rdma || self.efa.is_some();
        let mut why: Vec<String> = u.missing.iter().filter(|_| used).map(|m| m.describe()).collect();
        why.extend(self.efa.iter().flat_map(|e| e.missing.iter().cloned()));
        why
    }
}

/// The far reads the plan's second round needs, now that it knows which devices it uses.
pub fn asks(plan: &Plan, vars: &Vars, gate: Option<Gate>, depth: Depth) -> Asks {
    let devices = |used: bool| {
        let mut v: Vec<String> = plan.decisions.iter().filter(|d| d.used == used).map(|d| d.device.clone()).collect();
        v.dedup();
        v
    };
    let mut used = devices(true);
    // EFA devices are not NCCL_IB_HCA's, but the net plugin loads their provider and libfabric.
    used.extend(plan.efa.iter().flat_map(|e| e.devices.iter().cloned()));
    let user = user(vars, IB_GID_INDEX);
    let entries = index_is_kept(plan, user.as_deref()).then(|| {
        let roce = plan.used_ports().filter(|(_, p)| p.link_layer.as_deref() == Some("Ethernet"));
        (user.unwrap_or_default().trim().to_string(), roce.map(|(d, p)| (d.to_string(), p.port)).collect())
    });
    Asks { used, depth, resolve: bootstrap::to_resolve(vars, gate), node_types: devices(false), entries }
}

/// The second round's decisions over what was read for [`asks`]: the image's, the bootstrap's
/// and the rails' family's (`family`: `Unknown` where the user set one).
pub fn settle(
    plan: &mut Plan,
    a: Answers,
    vars: &Vars,
    gate: Option<Gate>,
    prefs: GidPrefs,
    family: RailFamily,
    choices: Choices,
) {
    let rails = plan.rails.as_ref().map_or(a.rails, |r| bootstrap::host_rails(plan, r));
    let bootstrap = bootstrap::choose(vars, gate, &a.routes, &a.addrs, &rails, a.lookup.as_ref());
    let iwarp: Vec<String> = a.node_types.into_iter().filter(|(_, t)| t.starts_with("4:")).map(|(d, _)| d).collect();
    let index = user(vars, IB_GID_INDEX);
    let kept_index = index_is_kept(plan, index.as_deref()).then(|| (index.unwrap_or_default(), a.entries));
    let u = a.userspace;
    efa(plan, &u);
    let refuse = if choices.require_rdma { "" } else { " (--require-rdma would refuse to start)" };
    plan.warnings.extend(plan.missing(&u).into_iter().map(|m| format!("{m}{refuse}")));
    if choices.require_rdma && plan.rdma && u.missing.is_empty() {
        match &u.net_plugin {
            None => {
                let previous = user(vars, NET);
                let action = Action::of(previous.as_deref(), "IB", choices.override_user);
                if action == Action::Kept && previous.as_deref() != Some("IB") {
                    plan.warnings.push(format!(
                        "NCCL_NET is already set to {:?}; kept, so NCCL may still fall back to sockets (--require-rdma would set NCCL_NET=IB; pass --override to replace it)",
                        previous.as_deref().unwrap_or("")
                    ));
                }
                plan.vars.push(Var { name: NET, value: "IB".into(), action, previous });
            }
            Some(p) => plan.notes.push(format!(
                "NCCL_NET not pinned: the image's net plugin {} ({}) carries the traffic under its own name, and NCCL_NET=IB would turn it off",
                p.path, p.by
            )),
        }
    }
    net_mismatch(plan, &u, vars, choices);
    if let Some(i) = &bootstrap.ifname {
        for (name, value) in [(SOCKET_IFNAME, format!("={i}")), (GLOO_SOCKET_IFNAME, i.clone())] {
            let previous = user(vars, name);
            let action = if previous.is_some() { Action::Kept } else { Action::Set };
            plan.vars.push(Var { name, value, action, previous });
        }
    }
    match &family {
        RailFamily::Inet6 if plan.rdma => {
            plan.vars.push(Var { name: IB_ADDR_FAMILY, value: "AF_INET6".into(), action: Action::Set, previous: None });
            plan.notes.push(
                "the rails carry only IPv6 addresses: NCCL is told NCCL_IB_ADDR_FAMILY=AF_INET6, so that it takes their RoCE v2 IPv6 entries"
                    .into(),
            );
        }
        RailFamily::Mixed { inet, inet6_only } => plan.warnings.push(format!(
            "the rails mix address families: {} carry IPv4, {} only IPv6; NCCL_IB_ADDR_FAMILY is one family for all ports, so NCCL (told AF_INET) finds no entry on the IPv6-only ones. Fix: give every rail an IPv4 address, or make every rail IPv6-only (then nccl-wrap exports AF_INET6)",
            inet.join(", "),
            inet6_only.join(", ")
        )),
        _ => {}
    }
    reasons::apply(plan, &iwarp, kept_index, &prefs);
    plan.userspace = Some(u);
    plan.bootstrap = Some(bootstrap);
    bootstrap::user_values(plan, vars, &a.addrs, choices.override_user);
}

/// `NCCL_IGNORE_NET_MISMATCH=0` under an interlock, unless the image's NCCL is older than 2.30.
fn net_mismatch(plan: &mut Plan, u: &Userspace, vars: &Vars, choices: Choices) {
    if !(choices.require_rdma || choices.gate) || !(plan.rdma || plan.efa.is_some()) {
        return;
    }
    let version = u.nccl.as_ref().and_then(|n| n.version.as_deref());
    let since = format!("{}.{}", IGNORE_NET_MISMATCH_SINCE.0, IGNORE_NET_MISMATCH_SINCE.1);
    let which = match version.map(|v| (v, version_at_least(v, IGNORE_NET_MISMATCH_SINCE))) {
        Some((_, Some(false))) => return,
        Some((v, Some(true))) => format!("NCCL {v} reads it"),
        _ => format!(
            "NCCL's version is not known from its file name (`nccl-wrap doctor` reads it): set anyway, as NCCL before {since} does not read it"
        ),
    };
    let asked = match (choices.require_rdma, choices.gate) {
        (true, true) => "--require-rdma and --gate",
        (true, false) => "--require-rdma",
        _ => "--gate",
    };
    let previous = user(vars, IGNORE_NET_MISMATCH);
    let action = Action::of(previous.as_deref().map(str::trim), "0", choices.override_user);
    if action == Action::Kept && previous.as_deref().map(str::trim) != Some("0") {
        plan.warnings.push(format!(
            "{IGNORE_NET_MISMATCH} is already set to {:?}; kept, so ranks handed different numbers of NICs may still start ({asked} would set it to 0; pass --override to replace it)",
            previous.as_deref().unwrap_or("")
        ));
    } else {
        plan.notes.push(format!(
            "{IGNORE_NET_MISMATCH}=0 under {asked}: ranks handed different numbers of NICs fail at NCCL's init instead of starting crippled or spinning (NVIDIA/nccl#2428; {since}'s default is 1); {which}"
        ));
    }
    plan.vars.push(Var { name: IGNORE_NET_MISMATCH, value: "0".into(), action, previous });
}

/// The pod's EFA devices need aws-ofi-nccl and libfabric: a missing one is a warning naming it.
fn efa(plan: &mut Plan, u: &Userspace) {
    let Some(e) = plan.efa.as_mut() else { return };
    let n = e.devices.len();
    e.plugin = u.net_plugin.as_ref().map(|p| p.path.clone());
    e.libfabric = u.libfabric.as_ref().map(|f| f.path.clone());
    match (&u.net_plugin, &u.libfabric) {
        (None, _) => e.missing.push(format!(
            "the image has no NCCL net plugin for this pod's {n} EFA device(s): aws-ofi-nccl (libnccl-net.so, or libnccl-net-ofi.so with NCCL_NET_PLUGIN=ofi, from /opt/amazon/ofi-nccl/lib on LD_LIBRARY_PATH or in ld.so.cache) carries NCCL's traffic over EFA, and without it NCCL runs over TCP sockets"
        )),
        (Some(p), None) => e.missing.push(format!(
            "the image lacks libfabric.so.1 (the EFA installer's /opt/amazon/efa/lib, on LD_LIBRARY_PATH or in ld.so.cache), which the net plugin {} loads for this pod's {n} EFA device(s): NCCL runs over TCP sockets",
            p.path
        )),
        (Some(p), Some(f)) => plan.notes.push(format!(
            "EFA: NCCL will use the image's net plugin {} ({}) over libfabric {} for the {n} EFA device(s); no NCCL_IB_* is exported for them",
            p.path, p.by, f.path
        )),
    }
}

//! What this pod brings to every edge of a test, read once: its ports as the run uses them, its
//! name, its routes, the ports left out for their GID. Reads only; opens nothing.

use std::ffi::OsStr;
use std::path::Path;

use super::cause::{cannot, Cause, PlanGid};
use super::output::{self, Dropped};
use super::pair::Planned;
use super::route::Route;
use nw_decide::{Action, Plan};
use nw_nccl::env::IB_GID_INDEX;
use nw_nccl::gid::RoceType;
use nw_observe::detect::port::{GidPick, PortFacts};
use nw_observe::detect::sysfs::Attachment;
use nw_observe::detect::Vars;
use nw_observe::verbs::{Verbs, VerbsError};

/// What ping (and the gate's pairs) read besides their options.
pub struct Inputs<'a> {
    pub plan: &'a Plan,
    pub vars: &'a Vars,
    pub proc_root: &'a Path,
    pub verbs: &'a dyn Verbs,
}

#[derive(Debug, Clone)]
pub struct Here {
    pub planned: Vec<Planned>,
    pub(crate) host: String,
    pub(crate) routes: Option<Vec<Route>>,
    pub(crate) dropped: Vec<Dropped>,
    /// The plan's entry at each port's GID index, for naming a foreign or vanished source GID.
    pub(crate) gids: Vec<PlanGid>,
}

impl Here {
    /// What a cause is named with beside the run.
    pub(crate) fn local(&self) -> output::Local<'_> {
        output::Local { routes: self.routes.as_deref(), gids: &self.gids }
    }
}

/// This pod's side of every edge, or why it has none: ibverbs not used, no usable port.
pub fn read(inp: &Inputs) -> Result<Here, Cause> {
    if let Err(VerbsError::Unavailable(reason)) = inp.verbs.device_names() {
        let summary = format!("ping moves bytes through ibverbs, which are not used here: {reason}");
        return Err(cannot("no-port", summary, "run against the kernel's /sys, without --skip-verbs"));
    }
    let planned = planned(inp.plan);
    if planned.is_empty() {
        let summary = "no usable RDMA port in this pod: nothing to test (a run would set NCCL_IB_DISABLE=1)";
        return Err(cannot("no-port", summary, "run `nccl-wrap doctor` to see why each port is not used"));
    }
    let gids = plan_gids(inp.plan, &planned);
    Ok(Here {
        planned,
        host: hostname(inp.proc_root, inp.vars),
        // `PROC/net/route`, bounded; none when it cannot be read.
        routes: nw_observe::detect::route::read_v4(inp.proc_root).ok(),
        dropped: dropped_for_gid(inp.plan),
        gids,
    })
}

/// The plan's entry at each planned port's GID index, and whose address it held.
fn plan_gids(plan: &Plan, planned: &[Planned]) -> Vec<PlanGid> {
    let gid = |p: &Planned| {
        let (index, f) = (p.gid_index?, facts(plan, &p.device, u32::from(p.port))?);
        let g = entry_at(f, index)?;
        let (gid, address, owner) = (g.gid.clone(), g.address.clone(), g.owner);
        Some(PlanGid { device: p.device.clone(), port: p.port, index, gid, address, owner })
    };
    planned.iter().filter_map(gid).collect()
}

/// The plan's ports with NCCL_IB_GID_INDEX as NCCL will read it, else each port's own pick.
pub(crate) fn planned(plan: &Plan) -> Vec<Planned> {
    let forced: Option<u32> = plan.vars.iter().find(|v| v.name == IB_GID_INDEX).and_then(|v| {
        let value = if v.action == Action::Kept { v.previous.as_deref()? } else { v.value.as_str() };
        value.trim().parse().ok()
    });
    let planned = |hca: &String| {
        let (dev, port) = hca.rsplit_once(':')?;
        let port = port.parse::<u8>().ok()?;
        let device = plan.detection.devices.iter().find(|d| d.name == dev);
        let facts = device.and_then(|d| d.ports.iter().find(|p| p.port == u32::from(port)));
        // A software device's rate is its net device's, not what it moves: no rate to judge by.
        let software = device.is_some_and(|d| matches!(d.attachment, Attachment::Software { .. }));
        let rate_kbps = facts
            .and_then(|f| nw_observe::detect::port::rate_mbps(f.rate.as_deref()?).map(|m| u64::from(m) * 1000))
            .filter(|_| !software);
        let pick = facts.and_then(|p| p.gid.as_ref());
        let gid_index = forced.filter(|_| pick.is_some()).or(pick.map(|g| g.index));
        // The entry at that index as the plan read it (else read from the port when it opens).
        let entry = facts.and_then(|f| entry_at(f, gid_index?));
        let gid_type = entry.and_then(|g| g.roce).map(|r| match r {
            RoceType::V1 => "IB/RoCE v1".to_owned(),
            RoceType::V2 => "RoCE v2".to_owned(),
        });
        Some(Planned {
            device: dev.to_owned(),
            port,
            gid_index,
            gid_type,
            netdev: entry.or(pick).and_then(|g| g.ndev.clone()),
            rate_kbps,
        })
    };
    plan.hca.iter().filter_map(planned).collect()
}

fn facts<'p>(plan: &'p Plan, device: &str, port: u32) -> Option<&'p PortFacts> {
    plan.detection.devices.iter().find(|d| d.name == device).and_then(|d| d.ports.iter().find(|f| f.port == port))
}

/// The entry at `index` of a port, as the plan read it.
fn entry_at(f: &PortFacts, index: u32) -> Option<&GidPick> {
    f.gid.iter().chain(f.nccl_pick.iter()).chain(f.table.iter()).find(|g| g.index == index)
}

/// The RoCE ports the plan leaves out only for their GID, with the plan's reason.
pub(crate) fn dropped_for_gid(plan: &Plan) -> Vec<output::Dropped> {
    let dropped = |d: &nw_decide::PortDecision| {
        let (Some(reason), Ok(port)) = (&d.reason, u8::try_from(d.port)) else { return None };
        let f = facts(plan, &d.device, d.port)?;
        let gid_only = f.link_layer.as_deref() == Some("Ethernet")
            && nw_decide::link_problem(f).is_none()
            && f.gid.as_ref().is_some_and(|g| !g.full_match);
        gid_only.then(|| output::Dropped { device: d.device.clone(), port, reason: reason.clone() })
    };
    plan.decisions.iter().filter(|d| !d.used).filter_map(dropped).collect()
}

/// This pod's name: the kernel's hostname under the proc root, else `HOSTNAME`.
pub fn hostname(proc_root: &Path, vars: &Vars) -> String {
    let from_proc = nw_observe::detect::file::read_attr(&proc_root.join("sys/kernel/hostname")).ok();
    let raw = from_proc.or_else(|| vars.get(OsStr::new("HOSTNAME")).map(|h| h.to_string_lossy().into_owned()));
    let h: String = raw
        .unwrap_or_default()
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || "-._".contains(*c))
        .take(253)
        .collect();
    Some(h).filter(|h| !h.is_empty()).unwrap_or_else(|| "unknown".into())
}

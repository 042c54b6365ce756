//! netns: the RDMA network-namespace mode.

use super::*;

pub(super) fn check(inp: &Inputs) -> Check {
    let rel = "module/ib_core/parameters/netns_mode";
    let path = inp.sysfs.path(rel);
    let value = inp.sysfs.attr(rel).ok();
    let d = &inp.plan.detection;
    let (status, summary) = match inp.sysfs.netns_exclusive() {
        Some(true) => (Status::Pass, "exclusive: this namespace shows only its own RDMA devices".to_string()),
        Some(false) if d.not_ours.is_empty() => {
            (Status::Pass, "shared (the default): every RDMA device appears in every namespace".to_string())
        }
        Some(false) => (
            Status::Pass,
            format!(
                "shared (the default): {} RDMA device(s) here are not this pod's; an exact NCCL_IB_HCA keeps NCCL off them",
                d.not_ours.len()
            ),
        ),
        None if value.is_none() && !inp.sysfs.path("module/ib_core").exists() => {
            (Status::Warn, "ib_core is not loaded: no RDMA stack on this node".to_string())
        }
        None => (Status::Warn, format!("RDMA netns mode unknown ({}: {:?})", path.display(), value)),
    };
    Check::new("netns", status, summary)
        .ev("netns_mode", file(&path, value.as_deref()))
        .ev("not_ours", d.not_ours.len())
}

//! Check `efa`: what NCCL needs for the pod's AWS EFA devices (the aws-ofi-nccl plugin and
//! libfabric in the image, the uverbs nodes in the container). Stats only, never a load.

use serde_json::json;

use super::{uverbs, Check, Inputs, Status};

pub(super) fn check(inp: &Inputs) -> Option<Check> {
    let e = inp.plan.efa.as_ref()?;
    let map = uverbs::uverbs_map(inp.sysfs);
    let dir = inp.dev_root.join("infiniband");
    let no_node: Vec<&str> =
        e.devices.iter().filter(|d| map.get(*d).is_none_or(|uv| !dir.join(uv).exists())).map(String::as_str).collect();
    let mut missing = e.missing.clone();
    if !no_node.is_empty() {
        missing.push(format!(
            "no uverbs node in {} for {}: libfabric's efa provider cannot open them",
            dir.display(),
            nw_observe::detect::names::abbreviate(&no_node.iter().map(|s| s.to_string()).collect::<Vec<_>>(), 8)
        ));
    }
    let n = e.devices.len();
    let c = if missing.is_empty() {
        let (plugin, libfabric) = (e.plugin.as_deref().unwrap_or("?"), e.libfabric.as_deref().unwrap_or("?"));
        let summary = format!("{n} EFA device(s), each with its uverbs node; net plugin {plugin}, libfabric {libfabric}: NCCL will carry its traffic over EFA");
        Check::new("efa", Status::Pass, summary)
    } else {
        Check::new("efa", Status::Fail, format!("{n} EFA device(s), and NCCL will run over TCP sockets: {}", missing.join("; ")))
            .hint("use an image with the EFA installer's libfabric (/opt/amazon/efa/lib) and aws-ofi-nccl (/opt/amazon/ofi-nccl/lib) on LD_LIBRARY_PATH or in ld.so.cache (AWS's Deep Learning Containers have both); request the EFA devices (vpc.amazonaws.com/efa) so that the EFA device plugin mounts their uverbs nodes")
    };
    let c = c.ev("devices", json!(e.devices)).ev("net_plugin", json!(e.plugin)).ev("libfabric", json!(e.libfabric));
    Some(c.ev("no_uverbs_node", json!(no_node)))
}

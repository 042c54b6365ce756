//! uverbs: can libibverbs in this container reach each device (the `/dev/infiniband/uverbsN` node).

use super::*;

/// RDMA device name -> `uverbsN`, from `class/infiniband_verbs/uverbs*/ibdev`.
pub(super) fn uverbs_map(sysfs: &Sysfs) -> BTreeMap<String, String> {
    let listed = sysfs.list("class/infiniband_verbs", &mut Vec::new());
    let ibdev = |n: String| sysfs.attr(&format!("class/infiniband_verbs/{n}/ibdev")).ok().map(|dev| (dev, n));
    listed.into_iter().filter(|n| n.starts_with("uverbs")).filter_map(ibdev).collect()
}

pub(super) fn checks(inp: &Inputs) -> Vec<Check> {
    let map = uverbs_map(inp.sysfs);
    let mut out = Vec::new();
    // The devices the plan took, and those a source named that detection left out for want of
    // their node: doctor names the node each one lacks, and the fix.
    let d = &inp.plan.detection;
    let names = d.devices.iter().map(|x| x.name.as_str()).chain(d.not_openable.iter().map(|x| x.name.as_str()));
    for name in names {
        let Some(uv) = map.get(name) else {
            let summary =
                format!("{name}: no uverbs device names it in class/infiniband_verbs: libibverbs cannot open it");
            let dir = inp.sysfs.path("class/infiniband_verbs").display().to_string();
            let c = Check::new("uverbs", Status::Fail, summary).ev("device", name).ev("class_infiniband_verbs", dir);
            out.push(c.hint("load ib_uverbs on the host (modprobe ib_uverbs)"));
            continue;
        };
        let dev_attr = format!("class/infiniband_verbs/{uv}/dev");
        let sys_dev = inp.sysfs.attr(&dev_attr).ok();
        let node = inp.dev_root.join("infiniband").join(uv);
        let at = format!("{name}: {}", node.display());
        let meta = std::fs::metadata(&node);
        let kind = meta.as_ref().ok().map(|m| {
            if m.file_type().is_char_device() {
                use std::os::unix::fs::MetadataExt;
                format!("character device {}:{}", rustix::fs::major(m.rdev()), rustix::fs::minor(m.rdev()))
            } else if m.is_file() {
                "regular file".to_string()
            } else {
                "neither a character device nor a file".to_string()
            }
        });
        let mismatch = meta.as_ref().is_ok_and(|m| m.file_type().is_char_device())
            && sys_dev.as_deref().zip(kind.as_deref()).is_some_and(|(s, k)| !k.ends_with(&format!(" {s}")));
        let (status, summary, hint) = match &meta {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (
                Status::Fail,
                format!("{at} is not in this container: libibverbs will not list {name} and NCCL cannot use it"),
                Some("the device plugin must mount it: set isRdma: true in the SR-IOV resource pool (or request the RDMA shared device plugin's resource); a privileged pod needs /dev/infiniband mounted"),
            ),
            Err(e) => (Status::Fail, format!("{name}: cannot stat {}: {e}", node.display()), None),
            Ok(_) => match open_rw(&node) {
                Err(e) => (
                    Status::Fail,
                    format!("{at} is present but cannot be opened read-write: {e}"),
                    Some("the container's device cgroup or file mode refuses it: the device plugin must add it to the container's devices (or run privileged)"),
                ),
                Ok(()) if mismatch => (
                    Status::Fail,
                    format!(
                        "{at} is {}, but sysfs says {uv} is {}",
                        kind.as_deref().unwrap_or("?"),
                        sys_dev.as_deref().unwrap_or("?")
                    ),
                    Some("the node under /dev/infiniband points at another device: remount /dev/infiniband from the host"),
                ),
                Ok(()) => (Status::Pass, format!("{at} present and opens read-write"), None),
            },
        };
        let mut c = Check::new("uverbs", status, summary)
            .hint_opt(hint)
            .ev("device", name)
            .ev("uverbs", uv.as_str())
            .ev("ibdev", file(&inp.sysfs.path(&format!("class/infiniband_verbs/{uv}/ibdev")), Some(name)))
            .ev("dev", node.display().to_string())
            .ev("kind", json!(kind));
        if let Some(s) = &sys_dev {
            c = c.ev("sysfs_dev", file(&inp.sysfs.path(&dev_attr), Some(s)));
        }
        out.push(c);
    }
    if out.is_empty() {
        out.push(Check::new("uverbs", Status::Warn, "no RDMA device of this pod: no uverbs node to check"));
    }
    out
}

/// Opens read-write as libibverbs does, without creating, blocking or taking a terminal.
pub(super) fn open_rw(path: &Path) -> std::io::Result<()> {
    let flags = OFlags::RDWR | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
    rustix::fs::open(path, flags, Mode::empty()).map(drop).map_err(std::io::Error::from)
}

//! selftest: move bytes through each usable port (loopback RC, through the `Verbs` seam).

use super::*;
use nw_observe::detect::port::VerbsCheck;

pub(super) fn checks(inp: &Inputs) -> Vec<Check> {
    let Some(opts) = inp.selftest else {
        return vec![Check::new("selftest", Status::Warn, "loopback self-test skipped (--no-selftest)")];
    };
    let names = match inp.verbs.device_names() {
        Ok(n) => n,
        Err(VerbsError::Unavailable(reason)) => {
            return vec![Check::new("selftest", Status::Warn, format!("loopback self-test not run: {reason}"))
                .hint("run doctor inside the pod, against the kernel's /sys, without --skip-verbs")];
        }
        Err(e) => {
            return vec![Check::new("selftest", Status::Fail, format!("cannot list verbs devices: {e}"))
                .hint("check that /dev/infiniband is mounted and the uverbs check passes")];
        }
    };
    let mut out = Vec::new();
    for dev in &inp.plan.detection.devices {
        for p in &dev.ports {
            if !inp.plan.decisions.iter().any(|x| x.used && x.device == dev.name && x.port == p.port) {
                continue;
            }
            let Ok(port) = u8::try_from(p.port) else { continue };
            let label = format!("{}:{}", dev.name, p.port);
            let gid_index = p.gid.as_ref().map(|g| g.index);
            let base =
                |c: Check| c.ev("device", dev.name.as_str()).ev("port", p.port).ev("gid_index", json!(gid_index));
            // ibverbs could not be asked about it (this build links no provider for its driver).
            if let Some(VerbsCheck::NotChecked { reason }) = &p.verbs {
                out.push(
                    base(Check::new(
                        "selftest",
                        Status::Warn,
                        format!("{label}: loopback self-test not run: {reason}"),
                    ))
                    .hint("NCCL uses the image's own rdma-core: this says nothing against the device"),
                );
                continue;
            }
            if !names.contains(&dev.name) {
                out.push(
                    base(Check::new(
                        "selftest",
                        Status::Fail,
                        format!("{label}: {}", VerbsError::NotListed(dev.name.clone())),
                    ))
                    .hint("see the uverbs check for this device"),
                );
                continue;
            }
            let queried = inp.verbs.query_port(&dev.name, port, gid_index);
            let r = inp.verbs.selftest(&dev.name, port, gid_index, opts);
            let mut c = if r.passed {
                Check::new("selftest", Status::Pass, format!("{label}: loopback RC send passed in {} us", r.micros))
            } else {
                let c = Check::new(
                    "selftest",
                    Status::Fail,
                    format!(
                        "{label}: loopback RC send failed at {}: {}",
                        r.step.as_deref().unwrap_or("?"),
                        r.status.as_deref().unwrap_or("?")
                    ),
                );
                match &r.hint {
                    Some(h) => c.hint(h.as_str()),
                    None => c,
                }
            };
            c = c.ev("result", json!(r));
            c = match queried {
                Ok(vp) => c.ev("query_port", json!(vp)),
                Err(e) => c.ev("query_port_error", e.to_string()),
            };
            out.push(base(c));
        }
    }
    if out.is_empty() {
        out.push(Check::new("selftest", Status::Warn, "no usable RDMA port to test"));
    }
    out
}

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
    for (name, p) in inp.plan.used_ports() {
        let Ok(port) = u8::try_from(p.port) else { continue };
        let label = format!("{name}:{}", p.port);
        let gid_index = p.gid.as_ref().map(|g| g.index);
        let base = |c: Check| c.ev("device", name).ev("port", p.port).ev("gid_index", json!(gid_index));
        let skip = match &p.verbs {
            // ibverbs could not be asked about it (this build links no provider for its driver).
            Some(VerbsCheck::NotChecked { reason }) => Some((
                Status::Warn,
                format!("{label}: loopback self-test not run: {reason}"),
                "NCCL uses the image's own rdma-core: this says nothing against the device",
            )),
            _ if !names.iter().any(|n| n == name) => Some((
                Status::Fail,
                format!("{label}: {}", VerbsError::NotListed(name.to_string())),
                "see the uverbs check for this device",
            )),
            _ => None,
        };
        if let Some((status, summary, hint)) = skip {
            out.push(base(Check::new("selftest", status, summary)).hint(hint));
            continue;
        }
        let queried = inp.verbs.query_port(name, port, gid_index);
        let r = inp.verbs.selftest(name, port, gid_index, opts);
        let (status, summary) = if r.passed {
            (Status::Pass, format!("{label}: loopback RC send passed in {} us", r.micros))
        } else {
            let (step, status) = (r.step.as_deref().unwrap_or("?"), r.status.as_deref().unwrap_or("?"));
            (Status::Fail, format!("{label}: loopback RC send failed at {step}: {status}"))
        };
        let c = Check::new("selftest", status, summary)
            .ev("result", json!(r))
            .hint_opt(r.hint.clone().filter(|_| !r.passed));
        let c = match queried {
            Ok(vp) => c.ev("query_port", json!(vp)),
            Err(e) => c.ev("query_port_error", e.to_string()),
        };
        out.push(base(c));
    }
    if out.is_empty() {
        out.push(Check::new("selftest", Status::Warn, "no usable RDMA port to test"));
    }
    out
}

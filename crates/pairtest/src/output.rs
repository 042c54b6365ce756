//! Each pair's result as the front ends take it: what both ends said, the cause it came to, and
//! the keys of the contract (`--json`'s form is this type's). Pure: the front ends print it
//! (ping's printers are `src/ping/print.rs`), fold it into the gate's findings or the agent's files.

use serde::Serialize;
use serde_json::{json, Value};

use super::cause::{self, cannot, describe, Cause, PairFacts, PlanGid, Status};
use super::route::{self, Reach, Route};
use super::session::PairRun;
use super::wire::{parse_gid, PortInfo};

/// One pair's result, in the form `--json` prints.
#[derive(Debug, Clone, Serialize)]
pub struct PairResult {
    pub(crate) kind: &'static str,
    pub index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_index: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer_index: Option<u32>,
    pub(crate) peer: String,
    pub local: PortOut,
    pub remote: Option<PortOut>,
    pub status: Status,
    /// `{"median", "p99"}`, one way.
    pub latency_us: Option<Value>,
    pub bandwidth_gbytes_per_s: Option<f64>,
    pub cause: Option<Cause>,
    /// The slower end's rated speed in kb/s, hardware ports only (not in ping's JSON).
    #[serde(skip)]
    pub(crate) rated_kbps: Option<u64>,
}

impl PairResult {
    /// The measured bandwidth in kb/s, and the rated speed: what `slow` judges.
    pub fn figure(&self) -> super::slow::Figure {
        let kbps = self.bandwidth_gbytes_per_s.map(|g| (g * 8e6).round()).filter(|k| k.is_finite() && *k >= 0.0);
        super::slow::Figure {
            kbps: kbps.map(|k| k.min(super::wire::MAX_KBPS as f64) as u64),
            rated_kbps: self.rated_kbps,
        }
    }
}

/// The keys of a port in a result (the wire carries more; these are the contract's), in order.
#[derive(Debug, Clone, Serialize)]
pub struct PortOut {
    pub device: String,
    pub port: u8,
    pub(crate) link_layer: Option<&'static str>,
    pub(crate) gid_index: Option<u8>,
    pub(crate) gid: Option<String>,
    pub(crate) lid: Option<u16>,
    /// The port's active MTU.
    #[serde(rename = "mtu_bytes")]
    pub(crate) mtu: Option<u32>,
}

impl PortOut {
    fn of(p: &PortInfo) -> PortOut {
        PortOut {
            device: p.device.clone(),
            port: p.port,
            link_layer: Some(p.link_layer.name()),
            gid_index: p.gid_index,
            gid: p.gid.clone(),
            lid: p.lid,
            mtu: Some(p.mtu),
        }
    }
    /// `device:port`.
    pub fn name(&self) -> String {
        format!("{}:{}", self.device, self.port)
    }
}

fn round(v: f64, places: i32) -> f64 {
    let m = 10f64.powi(places);
    (v * m).round() / m
}

/// GB/s as printed: three decimals, six below 1 GB/s (software RoCE moves a few MB/s).
fn gbytes(g: f64) -> f64 {
    round(g, if g < 1.0 { 6 } else { 3 })
}

/// What this end knows beside the run when it names a cause: its routes and plan entries.
#[derive(Debug, Clone, Copy, Default)]
pub struct Local<'a> {
    pub(crate) routes: Option<&'a [Route]>,
    pub(crate) gids: &'a [PlanGid],
}

/// A pair's result from what both ends said, with its cause.
pub fn result(index: usize, peer: &str, run: &PairRun, local: Local) -> PairResult {
    let reach: Option<Reach> = match (local.routes, &run.local.netdev, run.remote.gid.as_deref().and_then(parse_gid)) {
        (Some(r), Some(dev), Some(gid)) => route::gid_ipv4(&gid).map(|a| route::reach(r, dev, a)),
        _ => None,
    };
    let facts = PairFacts {
        local: &run.local,
        remote: &run.remote,
        local_fault: run.local_fault.as_ref(),
        remote_fault: run.remote_fault.as_ref(),
        reach: reach.as_ref(),
        path_mtu: run.local.mtu.min(run.remote.mtu),
        plan_gid: local.gids.iter().find(|g| g.device == run.local.device && g.port == run.local.port),
    };
    let cause = cause::classify(&facts);
    let mut r = pair_result(index, peer, PortOut::of(&run.local), Some(PortOut::of(&run.remote)), cause);
    let fig = run.figures.filter(|_| r.status != Status::Fail);
    r.latency_us = fig.and_then(|f| Some(json!({"median": round(f.median_us?, 2), "p99": round(f.p99_us?, 2)})));
    r.bandwidth_gbytes_per_s = fig.and_then(|f| f.gbps).map(gbytes);
    r.rated_kbps = run.local.rate_kbps.zip(run.remote.rate_kbps).map(|(l, r)| l.min(r));
    r
}

/// A result without figures, its status its cause's.
fn pair_result(index: usize, peer: &str, local: PortOut, remote: Option<PortOut>, cause: Option<Cause>) -> PairResult {
    PairResult {
        kind: "ping-pair",
        index,
        node_index: None,
        peer_index: None,
        peer: peer.to_owned(),
        local,
        remote,
        status: cause.as_ref().map_or(Status::Pass, |c| c.status),
        latency_us: None,
        bandwidth_gbytes_per_s: None,
        cause,
        rated_kbps: None,
    }
}

/// A pair that never ran because this end's port could not be opened.
pub(crate) fn unopened(index: usize, peer: &str, device: &str, port: u8, cause: Cause) -> PairResult {
    fail(index, peer, bare(device, port), None, cause)
}

/// A port of this end that the plan leaves out for its GID: its rail cannot be paired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    pub device: String,
    pub port: u8,
    pub reason: String,
}

fn bare(device: &str, port: u8) -> PortOut {
    PortOut { device: device.to_owned(), port, link_layer: None, gid_index: None, gid: None, lid: None, mtu: None }
}

fn fail(index: usize, peer: &str, local: PortOut, remote: Option<PortOut>, cause: Cause) -> PairResult {
    PairResult { status: Status::Fail, ..pair_result(index, peer, local, remote, Some(cause)) }
}

/// The rails left without a partner (not with `--all-pairs`) and this end's ports dropped for
/// their GID, each as a failed pair with cause `no-port`, numbered from `first`.
pub fn unpaired(
    first: usize,
    peer: &str,
    local: &[PortInfo],
    remote: &[PortInfo],
    all_pairs: bool,
    dropped: &[Dropped],
) -> Vec<PairResult> {
    let (nl, nr) = (local.len(), remote.len());
    let counts = |c: Cause| c.ev("local_ports", nl).ev("peer_ports", nr);
    let mut out = Vec::new();
    let mut dropped = dropped.iter();
    if !all_pairs {
        for (i, p) in local.iter().enumerate().skip(nr) {
            let c = cannot(
                "no-port",
                format!(
                    "rail {i} ({}:{}) has no partner: the peer offers {nr} usable port(s), this end {nl}; the peer's rail {i} is missing or unusable there",
                    p.device, p.port
                ),
                "every pod must offer the same rails: run `nccl-wrap doctor` (or look at `nccl-wrap ping` there) on the peer: a rail without its IPv4 address, a port down, a missing uverbs node",
            );
            out.push(fail(first + out.len(), peer, PortOut::of(p), None, counts(c).ev("local", describe(p))));
        }
        for (i, p) in remote.iter().enumerate().skip(nl) {
            let d = dropped.next();
            let here =
                d.map(|d| format!("; {}:{} is not used here: {}", d.device, d.port, d.reason)).unwrap_or_default();
            let mut c = cannot(
                "no-port",
                format!(
                    "the peer's rail {i} ({}:{}) has no partner here: this end offers {nl} usable port(s), the peer {nr}{here}",
                    p.device, p.port
                ),
                "every pod must offer the same rails: fix this end's missing rail (`nccl-wrap doctor` names why a port is not used; a RoCE rail needs its IPv4 address for NCCL's RoCE v2 IPv4 GID)",
            );
            if let Some(d) = d {
                c = c.ev("not_used", format!("{}:{}: {}", d.device, d.port, d.reason));
            }
            let local = d.map_or_else(|| bare("none", 0), |d| bare(&d.device, d.port));
            out.push(fail(first + out.len(), peer, local, Some(PortOut::of(p)), counts(c).ev("remote", describe(p))));
        }
    }
    for d in dropped {
        let summary = format!("{}:{} is not used here, so its rail is not tested: {}", d.device, d.port, d.reason);
        let hint = "fix the port as the reason says (`nccl-wrap doctor` on this pod), then run ping again";
        let c = cannot("no-port", summary, hint).ev("not_used", format!("{}:{}: {}", d.device, d.port, d.reason));
        out.push(fail(first + out.len(), peer, bare(&d.device, d.port), None, counts(c)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::wire::tests::roce_port;
    use super::super::wire::{Fault, Figures};
    use super::*;

    fn run(fault: Option<Fault>) -> PairRun {
        PairRun {
            local: roce_port("mlx5_6", 7),
            remote: roce_port("mlx5_6", 8),
            local_fault: fault,
            remote_fault: None,
            figures: Some(Figures { median_us: Some(5.123), p99_us: Some(7.04), gbps: Some(46.2049) }),
        }
    }

    fn json_line(r: &PairResult) -> String {
        serde_json::to_string(r).expect("json") + "\n"
    }

    #[test]
    fn a_passing_pair_has_the_contract_keys() {
        let r = result(0, "train-1.train:18515", &run(None), Local::default());
        let v: Value = serde_json::from_str(&json_line(&r)).expect("json");
        let keys: Vec<&str> = v.as_object().expect("obj").keys().map(String::as_str).collect();
        for k in ["kind", "index", "peer", "local", "remote", "status", "latency_us", "bandwidth_gbytes_per_s", "cause"]
        {
            assert!(keys.contains(&k), "{k} missing from {keys:?}");
        }
        assert!(!keys.contains(&"node_index"));
        let line = json_line(&r);
        assert!(line.contains(r#""local":{"device":"mlx5_6","port":1,"link_layer":"Ethernet","gid_index":3,"gid":"0000:0000:0000:0000:0000:ffff:0a00:6a07","lid":null,"mtu_bytes":4096}"#), "{line}");
        assert_eq!(v["status"], "pass");
        assert_eq!(v["latency_us"]["median"], 5.12);
        assert_eq!(v["cause"], Value::Null);
    }

    #[test]
    fn a_failing_pair_names_its_cause_with_evidence_and_a_fix() {
        let f =
            Fault { step: "latency".into(), error: "IBV_WC_RETRY_EXC_ERR".into(), wc_status: Some(12), errno: None };
        let r = result(1, "h:1", &run(Some(f)), Local::default());
        assert_eq!(r.status, Status::Fail);
        assert!(r.latency_us.is_none() && r.bandwidth_gbytes_per_s.is_none());
        let v: Value = serde_json::from_str(&json_line(&r)).expect("json");
        assert_eq!(v["cause"]["id"], "retry-exceeded");
        assert!(v["cause"]["evidence"].is_object() && v["cause"]["hint"].is_string());
    }

    #[test]
    fn small_bandwidths_keep_their_digits() {
        assert_eq!(gbytes(46.2049), 46.205);
        assert_eq!(gbytes(0.006_254_9), 0.006255);
        assert_eq!(gbytes(0.000_000_4), 0.0);
    }

    #[test]
    fn rails_without_a_partner_fail_as_no_port_on_both_ends() {
        let two = [roce_port("rxe0", 1), roce_port("rxe1", 2)];
        let one = [roce_port("rxe0", 1)];
        // The end with both rails: its rail 1 has no partner.
        let r = unpaired(1, "n0:1", &two, &one, false, &[]);
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].index, r[0].status), (1, Status::Fail));
        let c = r[0].cause.as_ref().expect("cause");
        assert_eq!(c.id, "no-port");
        assert!(c.summary.starts_with("rail 1 (rxe1:1) has no partner: the peer offers 1"), "{}", c.summary);
        assert_eq!(c.evidence["peer_ports"], 1);
        // The end whose rail 1 lost its address: the peer's rail 1 is named with the reason.
        let d = Dropped { device: "rxe1".into(), port: 1, reason: "no usable RoCE v2 IPv4 GID".into() };
        let r = unpaired(1, "n1:1", &one, &two, false, std::slice::from_ref(&d));
        assert_eq!(r.len(), 1);
        let c = r[0].cause.as_ref().expect("cause");
        assert_eq!(c.id, "no-port");
        assert!(c.summary.contains("the peer's rail 1 (rxe1:1) has no partner here"), "{}", c.summary);
        assert!(c.summary.ends_with("rxe1:1 is not used here: no usable RoCE v2 IPv4 GID"), "{}", c.summary);
        assert_eq!(r[0].local.device, "rxe1");
        assert_eq!(r[0].remote.as_ref().map(|p| p.device.as_str()), Some("rxe1"));
        // Same counts, nothing dropped: nothing to say; all pairs: only the dropped port.
        assert!(unpaired(2, "p", &two, &two, false, &[]).is_empty());
        assert!(unpaired(2, "p", &two, &one, true, &[]).is_empty());
        let r = unpaired(2, "p", &one, &one, true, &[d]);
        assert_eq!(r.len(), 1);
        assert!(r[0].cause.as_ref().expect("cause").summary.starts_with("rxe1:1 is not used here"));
        assert!(r[0].remote.is_none() && r[0].local.name() == "rxe1:1", "{:?}", r[0]);
    }
}

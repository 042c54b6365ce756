//! What ping prints: one result per pair and a summary, as JSON lines (`--json`) or for people.
//! Pure; every peer text in a result was made printable when the pair test decoded it.

use serde::Serialize;
use serde_json::{json, Value};

use nw_pairtest::cause::Cause;
use nw_pairtest::output::{PairResult, PortOut};

pub fn json_line(r: &PairResult) -> String {
    serde_json::to_string(r).unwrap_or_else(|e| format!("{{\"kind\":\"ping-pair\",\"error\":{:?}}}", e.to_string()))
        + "\n"
}

#[derive(Serialize)]
struct Summary {
    kind: &'static str,
    pairs: usize,
    failed: usize,
    exit: u8,
}

pub fn summary_json(pairs: usize, failed: usize, exit: u8) -> String {
    let s = Summary { kind: "ping-summary", pairs, failed, exit };
    serde_json::to_string(&s).unwrap_or_default() + "\n"
}

/// Why the check could not run, as a line before the summary.
pub fn error_json(cause: &Cause) -> String {
    json!({"kind": "ping-error", "cause": cause}).to_string() + "\n"
}

fn evidence_lines(c: &Cause, out: &mut String) {
    out.push_str(&format!("  {}: {}\n", c.id, c.summary));
    let plain = |x: &Value| x.as_str().map_or_else(|| x.to_string(), str::to_owned);
    let fields = |o: &serde_json::Map<String, Value>| {
        let set: Vec<_> = o.iter().filter(|(_, x)| !x.is_null()).map(|(k, x)| format!("{k}={}", plain(x))).collect();
        set.join(" ")
    };
    for (k, v) in &c.evidence {
        let text = v.as_object().map_or_else(|| plain(v), fields);
        out.push_str(&format!("  evidence: {k}: {text}\n"));
    }
    out.push_str(&format!("  fix: {}\n", c.hint));
}

/// `PASS pair 0 mlx5_6:1 -> peer mlx5_6:1  latency median 5.1 us p99 7.0 us, 92.3 GB/s`
pub fn human(r: &PairResult) -> String {
    let ring = r.node_index.map(|n| format!(" (node {n} -> {})", r.peer_index.unwrap_or(0))).unwrap_or_default();
    let mut out = format!(
        "{} pair {}{ring} {} -> peer {}",
        r.status.label(),
        r.index,
        r.local.name(),
        r.remote.as_ref().map_or("?".into(), PortOut::name)
    );
    let lat = r.latency_us.as_ref().and_then(|l| Some((l["median"].as_f64()?, l["p99"].as_f64()?)));
    let lat = lat.map(|(m, p)| format!("latency median {m:.1} us p99 {p:.1} us"));
    let figures: Vec<String> = lat.into_iter().chain(r.bandwidth_gbytes_per_s.map(gbs)).collect();
    if !figures.is_empty() {
        out.push_str(&format!("  {}", figures.join(", ")));
    }
    out.push('\n');
    if let Some(c) = &r.cause {
        evidence_lines(c, &mut out);
    }
    out
}

/// GB/s with one decimal, or three below 1 GB/s (software RoCE).
fn gbs(g: f64) -> String {
    format!("{g:.*} GB/s", if g < 1.0 { 3 } else { 1 })
}

pub fn summary_human(pairs: usize, failed: usize, peer: &str) -> String {
    format!("{pairs} pair(s) with {peer}, {failed} failed\n")
}

pub fn error_human(c: &Cause) -> String {
    let mut out = String::from("FAIL the check could not run\n");
    evidence_lines(c, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_ports::roce_port;
    use nw_pairtest::cause::Status;
    use nw_pairtest::output::{self, Dropped, Local};
    use nw_pairtest::session::PairRun;
    use nw_pairtest::wire::{Fault, Figures};

    fn run(fault: Option<Fault>) -> PairRun {
        PairRun {
            local: roce_port("mlx5_6", 7),
            remote: roce_port("mlx5_6", 8),
            local_fault: fault,
            remote_fault: None,
            figures: Some(Figures { median_us: Some(5.123), p99_us: Some(7.04), gbps: Some(46.2049) }),
        }
    }

    #[test]
    fn a_passing_pair_prints_the_contract_keys_and_one_line() {
        let r = output::result(0, "train-1.train:18515", &run(None), Local::default());
        let v: Value = serde_json::from_str(&json_line(&r)).expect("json");
        let keys: Vec<&str> = v.as_object().expect("obj").keys().map(String::as_str).collect();
        for k in ["kind", "index", "peer", "local", "remote", "status", "latency_us", "bandwidth_gbytes_per_s", "cause"]
        {
            assert!(keys.contains(&k), "{k} missing from {keys:?}");
        }
        assert!(json_line(&r).ends_with("}\n"));
        assert_eq!(human(&r), "PASS pair 0 mlx5_6:1 -> peer mlx5_6:1  latency median 5.1 us p99 7.0 us, 46.2 GB/s\n");
        assert_eq!(summary_json(4, 1, 1), "{\"kind\":\"ping-summary\",\"pairs\":4,\"failed\":1,\"exit\":1}\n");
    }

    #[test]
    fn a_failing_pair_prints_evidence_and_a_fix() {
        let f =
            Fault { step: "latency".into(), error: "IBV_WC_RETRY_EXC_ERR".into(), wc_status: Some(12), errno: None };
        let r = output::result(1, "h:1", &run(Some(f)), Local::default());
        assert_eq!(r.status, Status::Fail);
        let text = human(&r);
        assert!(text.starts_with("FAIL pair 1 mlx5_6:1 -> peer mlx5_6:1\n  retry-exceeded: "), "{text}");
        assert!(text.contains("  evidence: error: IBV_WC_RETRY_EXC_ERR\n"), "{text}");
        assert!(text.contains("  fix: "), "{text}");
        let v: Value = serde_json::from_str(&json_line(&r)).expect("json");
        assert_eq!(v["cause"]["id"], "retry-exceeded");
    }

    #[test]
    fn a_rail_without_a_partner_prints_without_a_remote_port() {
        let one = [roce_port("rxe0", 1)];
        let d = Dropped { device: "rxe1".into(), port: 1, reason: "no usable RoCE v2 IPv4 GID".into() };
        let r = output::unpaired(2, "p", &one, &one, true, &[d]);
        assert!(human(&r[0]).starts_with("FAIL pair 2 rxe1:1 -> peer ?\n  no-port: "), "{}", human(&r[0]));
    }

    #[test]
    fn the_check_that_cannot_run_and_the_summary_read_as_one_block() {
        let c = Cause::new("peer", Status::Fail, "no peer came", "start the other end");
        assert_eq!(error_human(&c), "FAIL the check could not run\n  peer: no peer came\n  fix: start the other end\n");
        let v: Value = serde_json::from_str(&error_json(&c)).expect("json");
        assert_eq!((v["kind"].as_str(), v["cause"]["id"].as_str()), (Some("ping-error"), Some("peer")));
        assert!(error_json(&c).ends_with("}\n"));
        assert_eq!(summary_human(4, 1, "h:1"), "4 pair(s) with h:1, 1 failed\n");
    }
}

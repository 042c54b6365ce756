//! The gate's verdict, pure: every pod's findings and the ranks that never came, to one decision
//! every pod receives; and that decision as lines on stderr, JSON, and the termination message.

use std::collections::BTreeMap;

use serde::Serialize;

use super::wire::{Dropped, Finding, Verdict, MAX_LISTED};
use nw_pairtest::cause::{Cause, Status};
use nw_pairtest::output::PairResult;
use nw_pairtest::slow::{self, Figure, Slow};
use nw_pairtest::wire::{PortInfo, MAX_TEXT};

pub use nw_output::termination::{clip, MAX as TERMINATION_MAX};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    pub rank: u32,
    pub host: String,
}

/// One pair's result as the verdict carries it.
pub fn of_pair(me: &Pod, peer: &Pod, r: &PairResult) -> Finding {
    let figure = r.figure();
    let rail = |d: &str, p: u8| (p > 0 && d != "none").then(|| format!("{d}:{p}"));
    Finding {
        rail: rail(&r.local.device, r.local.port),
        peer_rail: r.remote.as_ref().and_then(|p| rail(&p.device, p.port)),
        kbps: figure.kbps,
        rated_kbps: figure.rated_kbps,
        ..finding(me, Some(peer), r.status.label().to_ascii_lowercase(), r.cause.as_ref())
    }
}

/// A pod (or its edge as a whole) that failed without a pair to name: no port, no successor.
pub fn of_pod(me: &Pod, peer: Option<&Pod>, c: &Cause) -> Finding {
    finding(me, peer, "fail".into(), Some(c))
}

fn finding(me: &Pod, peer: Option<&Pod>, status: String, c: Option<&Cause>) -> Finding {
    Finding {
        rank: me.rank,
        host: me.host.clone(),
        peer_rank: peer.map(|p| p.rank),
        peer_host: peer.map(|p| p.host.clone()),
        rail: None,
        peer_rail: None,
        status,
        cause: c.map(|c| c.id.to_owned()),
        summary: clip(c.map_or("", |c| c.summary.as_str()), MAX_TEXT),
        hint: clip(c.map_or("", |c| c.hint.as_str()), MAX_TEXT),
        kbps: None,
        rated_kbps: None,
    }
}

pub fn pod_fails(rank: u32, host: &str, id: &'static str, summary: String, hint: &str) -> Finding {
    of_pod(&Pod { rank, host: host.to_owned() }, None, &Cause::new(id, Status::Fail, summary, hint))
}

/// What rank 0 makes of a pair that passed slowly (`--gate-slow`, `--gate-refuse-slow`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlowRule {
    /// A pair below this percent of the job's median, or of its rated speed, is slow; 0: none.
    pub pct: u8,
    /// A slow pair fails the gate (else it is named and the command starts).
    pub refuse: bool,
}

impl SlowRule {
    /// Nothing judged (a pod deciding alone has no job to compare with).
    pub const OFF: SlowRule = SlowRule { pct: 0, refuse: false };
}

/// The slow pairs among `findings` (against the median and their rated speed), marked in place;
/// returns their indexes, slowest first.
fn mark_slow(findings: &mut [Finding], rule: SlowRule) -> Vec<usize> {
    let tested = |f: &Finding| f.status != "fail" && (f.rail.is_some() || f.peer_rail.is_some());
    let figures: Vec<Figure> =
        findings.iter().map(|f| Figure { kbps: f.kbps.filter(|_| tested(f)), rated_kbps: f.rated_kbps }).collect();
    let mut slow: Vec<(usize, Slow)> =
        slow::judge(&figures, rule.pct).into_iter().enumerate().filter_map(|(i, s)| Some((i, s?))).collect();
    slow.sort_by_key(|(i, s)| (s.kbps, *i));
    for (i, s) in &slow {
        let f = &mut findings[*i];
        f.status = if rule.refuse { "fail" } else { "warn" }.into();
        f.cause = Some("slow-pair".into());
        f.summary = clip(&format!("passes, but slowly: {}", s.summary("the job's")), MAX_TEXT);
        f.hint = clip(slow::HINT, MAX_TEXT);
    }
    slow.into_iter().map(|(i, _)| i).collect()
}

/// The decision: go only when every rank came and nothing fails. Findings without a rail come
/// first, then failed pairs by rank; slow pairs are listed apart, slowest first.
pub fn decide(size: u32, missing: &[u32], mut findings: Vec<Finding>, rule: SlowRule) -> Verdict {
    let pairs = findings.iter().filter(|f| f.rail.is_some() || f.peer_rail.is_some()).count() as u32;
    let slow_at = mark_slow(&mut findings, rule);
    let slow_total = slow_at.len() as u32;
    let listed = slow_at.iter().take(if rule.refuse { 0 } else { MAX_LISTED });
    let slow: Vec<Finding> = listed.map(|&i| findings[i].clone()).collect();
    let mut failed: Vec<Finding> = findings.into_iter().filter(|f| f.status == "fail").collect();
    failed.sort_by_key(|f| (f.rail.is_some() || f.peer_rail.is_some(), f.rank, f.rail.clone()));
    let failed_total = failed.len() as u32;
    failed.truncate(MAX_LISTED);
    Verdict {
        go: missing.is_empty() && failed_total == 0,
        size,
        pairs,
        failed_total,
        missing: missing.iter().copied().take(MAX_LISTED).collect(),
        missing_total: missing.len() as u32,
        findings: failed,
        slow,
        slow_total: if rule.refuse { 0 } else { slow_total },
        dropped: Vec::new(),
        mac: None,
    }
}

/// A pod's rails as findings name them (`device:port`), in the order it hands them to NCCL.
pub fn rail_names(ports: &[PortInfo]) -> Vec<String> {
    ports.iter().map(|p| format!("{}:{}", p.device, p.port)).collect()
}

/// `--gate-prune` on a refusing verdict: the places of the rails whose pairs failed, each with its
/// first failure, when every failure is listed and is a pair's over rails in `rails` (each rank's,
/// in order) and a rail is left; else none, and the gate refuses.
pub fn prune(v: &Verdict, rails: &BTreeMap<u32, Vec<String>>) -> Option<Vec<Dropped>> {
    if v.go || !v.missing.is_empty() || v.failed_total as usize != v.findings.len() {
        return None;
    }
    let mut at: BTreeMap<u32, u32> = BTreeMap::new();
    let mut count = usize::MAX;
    for (i, f) in v.findings.iter().enumerate() {
        for (rank, rail) in [(f.rank, f.rail.as_ref()), (f.peer_rank?, f.peer_rail.as_ref())] {
            let list = rails.get(&rank)?;
            let place = list.iter().position(|r| Some(r) == rail)?;
            count = count.min(list.len());
            at.entry(u32::try_from(place).ok()?).or_insert(u32::try_from(i).ok()?);
        }
    }
    (at.len() < count).then(|| at.into_iter().map(|(position, finding)| Dropped { position, finding }).collect())
}

/// A rail this pod drops before NCCL starts (`--gate-prune`), and the line said for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pruned {
    pub rail: String,
    pub line: String,
}

/// This pod's share of a verdict that drops rails (`mine`: its rails, in order); refused when a
/// place is not one of its rails, or none would be left.
pub fn dropped_here(v: &Verdict, mine: &[String]) -> Result<Vec<Pruned>, String> {
    let n = mine.len();
    if !v.dropped.is_empty() && v.dropped.len() >= n {
        return Err(format!("it drops {} rail(s), and this pod hands NCCL {n}: none would be left", v.dropped.len()));
    }
    v.dropped
        .iter()
        .map(|d| {
            let p = d.position as usize;
            let rail =
                mine.get(p).ok_or_else(|| format!("it drops the rail at place {p}, and this pod hands NCCL {n}"))?;
            let f = v.findings.get(d.finding as usize).ok_or_else(|| format!("it names no failure for place {p}"))?;
            let (place, why) = (p + 1, line(f));
            let line = format!(
                "gate: --gate-prune: {rail} (rail {place} of {n}) is dropped here, as its place is on every pod: {why}"
            );
            Ok(Pruned { rail: rail.clone(), line })
        })
        .collect()
}

/// One finding on one line: node, rank, rail and cause.
pub fn line(f: &Finding) -> String {
    let rail = |r: &Option<String>| r.as_deref().map(|r| format!(" {r}")).unwrap_or_default();
    let to = f.peer_rank.map(|p| match f.peer_host.as_deref() {
        Some(h) => format!(" -> {h} (rank {p}){}", rail(&f.peer_rail)),
        None => format!(" -> rank {p}{}", rail(&f.peer_rail)),
    });
    let cause = f.cause.as_deref().unwrap_or("fail");
    format!("{} (rank {}){}{}: {cause}: {}", f.host, f.rank, rail(&f.rail), to.unwrap_or_default(), f.summary)
}

/// The headline: what was decided and why, in one line.
pub fn headline(v: &Verdict, wait_ms: u64) -> String {
    let (failed, pairs, size, missing) = (v.failed_total, v.pairs, v.size, v.missing_total);
    if v.go {
        let slow =
            if v.slow_total == 0 { String::new() } else { format!("; {} of them slow, named below", v.slow_total) };
        if !v.dropped.is_empty() {
            let n = v.dropped.len();
            return format!("gate: {failed} failure(s) over {pairs} pair(s) tested; --gate-prune drops {n} rail(s) on every pod, and the command starts on the rest{slow}");
        }
        return format!("gate: every pair passes ({pairs} pair(s) over {size} pod(s)){slow}");
    }
    let mut parts = Vec::new();
    if missing > 0 {
        let mut ranks = v.missing.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
        if missing as usize > v.missing.len() {
            ranks.push_str(&format!(" and {} more", missing as usize - v.missing.len()));
        }
        parts.push(format!("{missing} of {size} pod(s) never joined within {wait_ms} ms: rank(s) {ranks}"));
    }
    if failed > 0 {
        parts.push(format!("{failed} failure(s) over {pairs} pair(s) tested"));
    }
    format!("gate: {}", parts.join("; "))
}

/// The lines for people (the caller prefixes them): the headline, each failure with its fix.
pub fn human(v: &Verdict, wait_ms: u64) -> Vec<String> {
    let mut out = vec![headline(v, wait_ms)];
    for f in &v.findings {
        out.push(format!("gate: FAIL {}", line(f)));
        out.extend((!f.hint.is_empty()).then(|| format!("gate:   fix: {}", f.hint)));
    }
    if v.failed_total as usize > v.findings.len() {
        out.push(format!("gate: ... and {} more failure(s)", v.failed_total as usize - v.findings.len()));
    }
    for f in &v.slow {
        out.push(format!("gate: SLOW {}", line(f)));
    }
    out.extend(v.slow.first().map(|f| format!("gate:   check: {}", f.hint)));
    if v.slow_total as usize > v.slow.len() {
        out.push(format!("gate: ... and {} more slow pair(s)", v.slow_total as usize - v.slow.len()));
    }
    if v.missing_total > 0 {
        out.push("gate:   fix: start the missing pods (pending? image pull? `kubectl get pods -o wide`), or raise NCCL_WRAP_GATE_WAIT_MS; check that every pod has the same NCCL_WRAP_GATE_ID, size and coordinator".into());
    }
    out
}

/// The verdict as one JSON line, keys in this order.
#[derive(Serialize)]
struct Line<'a> {
    kind: &'static str,
    rank: u32,
    go: bool,
    started: bool,
    size: u32,
    pairs: u32,
    failed: u32,
    missing: &'a [u32],
    missing_total: u32,
    findings: &'a [Finding],
    slow: &'a [Finding],
    slow_total: u32,
    dropped: &'a [Dropped],
}

/// The verdict as one JSON line (`kind: gate-verdict`), with this pod's rank.
pub fn json(v: &Verdict, rank: u32, started: bool) -> String {
    let line = Line {
        kind: "gate-verdict",
        rank,
        go: v.go,
        started,
        size: v.size,
        pairs: v.pairs,
        failed: v.failed_total,
        missing: &v.missing,
        missing_total: v.missing_total,
        findings: &v.findings,
        slow: &v.slow,
        slow_total: v.slow_total,
        dropped: &v.dropped,
    };
    serde_json::to_string(&line)
        .unwrap_or_else(|e| format!("{{\"kind\":\"gate-verdict\",\"error\":{:?}}}", e.to_string()))
}

/// The termination message: the headline, then one line per failure, cut whole lines at a time.
pub fn termination(v: &Verdict, wait_ms: u64) -> String {
    let lines: Vec<String> = v.findings.iter().map(line).collect();
    let headline = format!("nccl-wrap refused to start the command: {}", headline(v, wait_ms));
    nw_output::termination::fit(&headline, &lines, (v.failed_total as usize).max(lines.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(rank: u32, rail: Option<&str>, status: &str, cause: Option<&str>) -> Finding {
        Finding {
            rank,
            host: format!("train-{rank}"),
            peer_rank: Some(rank + 1),
            peer_host: Some(format!("train-{}", rank + 1)),
            rail: rail.map(str::to_owned),
            peer_rail: rail.map(str::to_owned),
            status: status.into(),
            cause: cause.map(str::to_owned),
            summary: cause.map_or(String::new(), |c| format!("{c} happened")),
            hint: cause.map_or(String::new(), |_| "fix it".into()),
            kbps: None,
            rated_kbps: None,
        }
    }

    #[test]
    fn every_pair_passing_is_go_and_a_warning_passes() {
        let v = decide(
            2,
            &[],
            vec![
                finding(0, Some("mlx5_6:1"), "pass", None),
                finding(1, Some("mlx5_6:1"), "warn", Some("mtu-mismatch")),
            ],
            SlowRule::OFF,
        );
        assert!(v.go);
        assert_eq!((v.pairs, v.failed_total, v.findings.len()), (2, 0, 0));
        assert_eq!(headline(&v, 1000), "gate: every pair passes (2 pair(s) over 2 pod(s))");
    }

    #[test]
    fn one_failed_pair_stops_every_pod_and_is_named() {
        let v = decide(
            3,
            &[],
            vec![
                finding(0, Some("rxe0:1"), "pass", None),
                finding(1, Some("rxe0:1"), "fail", Some("retry-exceeded")),
                finding(2, Some("rxe0:1"), "pass", None),
            ],
            SlowRule::OFF,
        );
        assert!(!v.go);
        assert_eq!((v.pairs, v.failed_total), (3, 1));
        assert_eq!(
            line(&v.findings[0]),
            "train-1 (rank 1) rxe0:1 -> train-2 (rank 2) rxe0:1: retry-exceeded: retry-exceeded happened"
        );
        let h = human(&v, 1000);
        assert_eq!(h[0], "gate: 1 failure(s) over 3 pair(s) tested");
        assert_eq!(h[2], "gate:   fix: fix it");
    }

    #[test]
    fn missing_ranks_are_named_after_the_wait() {
        let v = decide(4, &[2, 3], vec![finding(0, Some("rxe0:1"), "pass", None)], SlowRule::OFF);
        assert!(!v.go);
        assert_eq!(headline(&v, 5000), "gate: 2 of 4 pod(s) never joined within 5000 ms: rank(s) 2, 3");
        assert!(human(&v, 5000).iter().any(|l| l.contains("NCCL_WRAP_GATE_WAIT_MS")));
    }

    #[test]
    fn a_pod_that_could_not_test_comes_before_failed_pairs() {
        let mut no_port = finding(3, None, "fail", Some("no-port"));
        no_port.peer_rank = None;
        no_port.peer_host = None;
        let v = decide(
            4,
            &[],
            vec![
                finding(0, Some("rxe0:1"), "fail", Some("timeout")),
                no_port,
                finding(1, Some("rxe1:1"), "pass", None),
            ],
            SlowRule::OFF,
        );
        assert_eq!(v.findings[0].cause.as_deref(), Some("no-port"));
        assert_eq!(line(&v.findings[0]), "train-3 (rank 3): no-port: no-port happened");
        assert_eq!(v.pairs, 2);
    }

    #[test]
    fn the_termination_message_fits_kubernetes_with_the_headline_first() {
        let many: Vec<Finding> = (0..200)
            .map(|r| {
                let mut f = finding(r, Some("mlx5_10:1"), "fail", Some("retry-exceeded"));
                f.summary = "x".repeat(300);
                f
            })
            .collect();
        let v = decide(200, &(150..200).collect::<Vec<_>>(), many, SlowRule::OFF);
        assert_eq!((v.findings.len(), v.failed_total, v.missing.len()), (MAX_LISTED, 200, 50));
        let t = termination(&v, 600_000);
        assert!(t.len() <= TERMINATION_MAX, "{}", t.len());
        assert!(t.starts_with("nccl-wrap refused to start the command: gate: 50 of 200 pod(s) never joined"), "{t}");
        assert!(t.ends_with(" more\n"), "{t}");
        let n = t.lines().filter(|l| l.contains("retry-exceeded")).count();
        let left: usize = t.lines().last().and_then(|l| l.split(' ').nth(2)).and_then(|n| n.parse().ok()).unwrap_or(0);
        assert_eq!(n + left, 200, "every failure is listed or counted");
    }

    fn measured(rank: u32, kbps: u64) -> Finding {
        Finding { kbps: Some(kbps), rated_kbps: Some(400_000_000), ..finding(rank, Some("mlx5_0:1"), "pass", None) }
    }

    #[test]
    fn a_slow_pair_is_named_with_its_figures_and_the_job_still_starts() {
        let rule = SlowRule { pct: 70, refuse: false };
        let mut all: Vec<Finding> = (0..7).map(|r| measured(r, 380_000_000 + u64::from(r) * 1_000_000)).collect();
        all.push(measured(7, 150_000_000));
        // A failed pair carries no figure and does not pull the median down.
        all.push(finding(8, Some("mlx5_0:1"), "fail", Some("retry-exceeded")));
        let v = decide(9, &[], all.clone(), rule);
        assert!(!v.go, "the failed pair still fails");
        assert_eq!((v.failed_total, v.slow_total, v.slow.len()), (1, 1, 1));
        assert_eq!(
            line(&v.slow[0]),
            "train-7 (rank 7) mlx5_0:1 -> train-8 (rank 8) mlx5_0:1: slow-pair: passes, but slowly: 150 Gb/s: 39 % of the job's median 382 Gb/s, 37 % of its rated 400 Gb/s"
        );
        all.pop();
        let v = decide(8, &[], all.clone(), rule);
        assert!(v.go);
        let h = human(&v, 1000);
        assert_eq!(h[0], "gate: every pair passes (8 pair(s) over 8 pod(s)); 1 of them slow, named below");
        assert!(h[1].starts_with("gate: SLOW train-7 (rank 7)"), "{h:?}");
        assert!(h[2].contains("nccl-wrap doctor") && h[2].contains("pcie-link"), "{h:?}");
        let j: serde_json::Value = serde_json::from_str(&json(&v, 0, true)).expect("JSON");
        assert_eq!((j["slow_total"].as_u64(), j["slow"][0]["kbps"].as_u64()), (Some(1), Some(150_000_000)));
        // Asked to refuse: the slow pair fails the gate, and the termination message names it.
        let v = decide(8, &[], all.clone(), SlowRule { pct: 70, refuse: true });
        assert!(!v.go);
        assert_eq!((v.failed_total, v.slow_total), (1, 0));
        assert!(termination(&v, 1000).contains("train-7 (rank 7) mlx5_0:1 -> train-8 (rank 8) mlx5_0:1: slow-pair"));
        // Off: nothing judged.
        let v = decide(8, &[], all, SlowRule::OFF);
        assert!(v.go && v.slow.is_empty());
    }

    #[test]
    fn the_json_line_starts_with_its_kind() {
        let v = decide(2, &[1], vec![finding(0, Some("rxe0:1"), "fail", Some("timeout"))], SlowRule::OFF);
        let j = json(&v, 0, false);
        assert!(j.starts_with("{\"kind\":\"gate-verdict\",\"rank\":0,\"go\":false,\"started\":false,\"size\":2,\"pairs\":1,\"failed\":1,\"missing\":[1],\"missing_total\":1,\"findings\":[{\"rank\":0,"), "{j}");
        let back: serde_json::Value = serde_json::from_str(&j).expect("JSON");
        assert_eq!(back["findings"][0]["cause"], "timeout");
    }

    #[test]
    fn pruning_drops_the_places_of_failed_pairs_and_refuses_everything_else() {
        let three = || ["mlx5_0:1", "mlx5_1:1", "mlx5_2:1"].map(str::to_owned).to_vec();
        let rails: BTreeMap<u32, Vec<String>> = (0..4).map(|r| (r, three())).collect();
        let pair = |rank, rail: &str, status: &str| {
            finding(rank, Some(rail), status, (status == "fail").then_some("retry-exceeded"))
        };
        let decided = |missing: &[u32], f: Vec<Finding>| decide(4, missing, f, SlowRule::OFF);
        // Rank 1's mlx5_1 towards rank 2 fails: its place, 1, is dropped on every pod.
        let v =
            decided(&[], vec![pair(0, "mlx5_0:1", "pass"), pair(1, "mlx5_1:1", "fail"), pair(2, "mlx5_2:1", "pass")]);
        let dropped = prune(&v, &rails).expect("pruned");
        assert_eq!(dropped, [Dropped { position: 1, finding: 0 }]);
        // Two places, each with the first failure over it (the verdict's order: by rank).
        let two = decided(&[], vec![pair(1, "mlx5_1:1", "fail"), pair(0, "mlx5_2:1", "fail")]);
        let want = [Dropped { position: 1, finding: 1 }, Dropped { position: 2, finding: 0 }];
        assert_eq!(prune(&two, &rails).as_deref(), Some(&want[..]));
        // Refused as without it: every rail would go, a pod-wide failure, a rank missing, a rail
        // no pod joined with, or nothing failed.
        let all: Vec<Finding> = (0..3).map(|i| pair(0, &format!("mlx5_{i}:1"), "fail")).collect();
        assert_eq!(prune(&decided(&[], all), &rails), None);
        let mut lost = finding(3, None, "fail", Some("no-result"));
        lost.peer_rank = None;
        assert_eq!(prune(&decided(&[], vec![pair(1, "mlx5_1:1", "fail"), lost]), &rails), None);
        assert_eq!(prune(&decided(&[3], vec![pair(1, "mlx5_1:1", "fail")]), &rails), None);
        assert_eq!(prune(&decided(&[], vec![pair(1, "mlx5_9:1", "fail")]), &rails), None);
        assert_eq!(prune(&decided(&[], vec![pair(1, "mlx5_1:1", "pass")]), &rails), None);

        // Every pod names the rail at that place on itself, and the pair that failed.
        let go = Verdict { go: true, dropped, ..v };
        let here = dropped_here(&go, &rails[&0]).expect("applies");
        assert_eq!(here.len(), 1);
        assert_eq!(here[0].rail, "mlx5_1:1");
        assert_eq!(
            here[0].line,
            "gate: --gate-prune: mlx5_1:1 (rail 2 of 3) is dropped here, as its place is on every pod: train-1 (rank 1) mlx5_1:1 -> train-2 (rank 2) mlx5_1:1: retry-exceeded: retry-exceeded happened"
        );
        assert!(headline(&go, 0).contains("--gate-prune drops 1 rail(s) on every pod"), "{}", headline(&go, 0));
        assert!(
            json(&go, 0, true).ends_with(",\"dropped\":[{\"position\":1,\"finding\":0}]}"),
            "{}",
            json(&go, 0, true)
        );
        // A place this pod does not have, or no rail left: refused.
        let e = dropped_here(&go, &rails[&0][..1]).expect_err("one rail");
        assert!(e.contains("none would be left"), "{e}");
        let far = Verdict { dropped: vec![Dropped { position: 5, finding: 0 }], ..go };
        let e = dropped_here(&far, &rails[&0]).expect_err("place 5");
        assert_eq!(e, "it drops the rail at place 5, and this pod hands NCCL 3");
    }

    #[test]
    fn clip_keeps_characters_whole() {
        assert_eq!(clip("abc", 10), "abc");
        assert_eq!(clip("ééééé", 7), "éé...");
        assert!(clip(&"é".repeat(1000), MAX_TEXT).len() <= MAX_TEXT);
    }
}

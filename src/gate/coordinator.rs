//! Rank 0's part, one way ([`run`]): joins (from the listener) -> roster -> assignments -> this
//! pod's edge and the reports -> the verdict, sent to all. A join that is not this job's, or does
//! not answer its connection's challenge, is refused and logged, and the wait goes on.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::successor;
use super::verdict::{self, pod_fails, Pod};
use super::who::Who;
use nw_output::msg::PREFIX;
use nw_pairtest::edge::PairTest;
use nw_pairtest::exchange::Session;
use nw_pairtest::ledger::Ledger;
use nw_pairtest::session::{budget, pairing, rounds};
use nw_pairtest::wire::Protocol;
use nw_pairtest::Settings;

use super::seal::{self, Bound};
use super::wire::{Assign, Bootstrap, Finding, Frame, Join, Verdict};
use super::{Options, Trust};

/// A pod that joined: its connection, what it said, and the addresses of that connection.
pub struct Member {
    pub session: Session,
    pub join: Join,
    pub peer: SocketAddr,
    pub local: SocketAddr,
    /// Whether it was sent its assignment (every later frame is bound to this gate's nonce).
    pub assigned: bool,
}

impl Member {
    /// The session this member's frames are bound to.
    fn bound<'a>(&'a self, job: &'a str, gate: &'a str) -> Bound<'a> {
        let member = self.join.nonce.as_deref().unwrap_or("");
        Bound { job, member, gate: if self.assigned { gate } else { "" } }
    }
}

pub struct Roster {
    pub members: BTreeMap<u32, Member>,
    pub missing: Vec<u32>,
}

/// Why a join is not this job's.
pub fn check(join: &Join, who: &Who) -> Result<(), String> {
    let (Join { job, rank, size: says, .. }, size) = (join, who.size);
    if *job != who.job {
        let mine = &who.job;
        return Err(format!("a pod of another job (job {job:?}, this job is {mine:?}): refused; set the same NCCL_WRAP_GATE_ID on every pod of one job"));
    }
    if *says != size {
        return Err(format!(
            "rank {rank} says the job has {says} pods, the coordinator {size}: refused; every pod needs the same size"
        ));
    }
    if *rank == 0 || *rank >= size {
        return Err(format!("rank {rank} is not one of ranks 1..{size} that join the coordinator: refused"));
    }
    Ok(())
}

/// Why a join of this job is not taken: it does not answer its connection's challenge (a replay,
/// where the job's secret made it for another), or fails the job secret's MAC.
fn unsealed(j: Join, peer: SocketAddr, local: SocketAddr, job: &str, trust: Trust) -> Result<Join, String> {
    let expected = seal::challenge(trust.nonce, peer, local);
    let nonce = j.nonce.clone().unwrap_or_default();
    let (rank, host, answered) = (j.rank, j.host.clone(), j.challenge.clone());
    let bound = |gate| Bound { job, member: &nonce, gate };
    let msg = Frame::Join(j.clone());
    let replayed = || {
        format!("rank {rank} ({host}): its join was made for another connection's challenge: a join recorded from an earlier run (or another connection) and replayed: refused")
    };
    match seal::check(&msg, trust.key, &bound(&expected)) {
        Ok(()) if answered.as_deref() == Some(expected.as_str()) => {}
        Ok(()) if answered.is_none() => {
            return Err(format!("rank {rank} ({host}): its join answers no challenge (sent without a knock: a join replayed from an earlier run, or a pod of an older nccl-wrap): refused"))
        }
        Ok(()) => return Err(replayed()),
        Err(_) if answered.as_deref().is_some_and(|c| seal::check(&msg, trust.key, &bound(c)).is_ok()) => {
            return Err(replayed())
        }
        Err(e) => return Err(format!("rank {rank} ({host}): its join {e}: refused")),
    }
    Ok(j)
}

/// How often rank 0 says whom it still waits for (the wait is 10 minutes by default).
const WAITING_EVERY: Duration = Duration::from_secs(30);

/// `waiting for 2 of 8 pods (ranks 3, 7), 9m30s left`: the ranks not yet joined, at most 16.
fn waiting(members: &BTreeMap<u32, Member>, size: u32, left: Duration) -> String {
    let missing: Vec<u32> = (1..size).filter(|r| !members.contains_key(r)).collect();
    let mut ranks: Vec<String> = missing.iter().take(16).map(u32::to_string).collect();
    if missing.len() > 16 {
        ranks.push(format!("and {} more", missing.len() - 16));
    }
    let (n, secs, ranks) = (missing.len(), left.as_secs(), ranks.join(", "));
    let s = if n == 1 { "" } else { "s" };
    format!("waiting for {n} of {size} pods (rank{s} {ranks}), {}m{:02}s left", secs / 60, secs % 60)
}

/// Gathers joins until every rank 1..size is in, the wait passes or it is cancelled.
pub fn gather(joins: &Joins, who: &Who, trust: Trust) -> Roster {
    let Joins { rx: joins, until, cancel, ledger } = joins;
    let mut members: BTreeMap<u32, Member> = BTreeMap::new();
    let mut said = Instant::now();
    while members.len() + 1 < who.size as usize && !cancel.load(Ordering::SeqCst) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        if said.elapsed() >= WAITING_EVERY {
            said = Instant::now();
            eprintln!("{PREFIX} gate: {}", waiting(&members, who.size, left));
        }
        let (s, j) = match joins.recv_timeout(left.min(Duration::from_millis(100))) {
            Ok(x) => x,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let Some((peer, local)) = s.addrs() else { continue };
        // An earlier pod of this rank whose connection has ended is an old run's: replaced.
        let taken = |j: Join| match members.get(&j.rank).filter(|m| !m.session.readable().unwrap_or(true)) {
            Some(m) => Err(format!(
                "rank {} already joined from {} ({}): refused {peer} ({})",
                j.rank, m.peer, m.join.host, j.host
            )),
            None => Ok(j),
        };
        match check(&j, who).and_then(|()| unsealed(j, peer, local, &who.job, trust)).and_then(taken) {
            Ok(j) => _ = members.insert(j.rank, Member { session: s, join: j, peer, local, assigned: false }),
            // Told to the pod, and said on stderr at the rate the port's strays are.
            Err(why) => {
                if ledger.refused(peer.ip(), &why) {
                    eprintln!("{PREFIX} gate: ignored {peer}: {why}");
                }
                s.refuse(&why);
            }
        }
    }
    let missing = (1..who.size).filter(|r| !members.contains_key(r)).collect();
    Roster { members, missing }
}

/// Where rank `r`'s successor is reached: its address as the coordinator saw it, at its port;
/// rank 0 at the address `r` reached the coordinator on.
pub fn target(roster: &Roster, r: u32, size: u32, port: u16) -> String {
    let next = (r + 1) % size;
    let addr = match (next, roster.members.get(&next), roster.members.get(&r)) {
        (0, _, Some(m)) => SocketAddr::new(m.local.ip(), port),
        (1.., Some(n), _) => SocketAddr::new(n.peer.ip(), n.join.port),
        _ => SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port),
    };
    addr.to_string()
}

/// How long every edge's test may take: the slowest edge's budget, plus the connect and hello.
pub fn results_budget(ports: &[usize], limits: &Settings) -> Duration {
    let n = ports.len();
    let slowest = (0..n)
        .map(|r| {
            let p = pairing(ports[r], ports[(r + 1) % n], limits.all_pairs);
            budget(p.len(), rounds(&p).len(), limits)
        })
        .max()
        .unwrap_or_default();
    // The wire carries it in milliseconds, at most a day: no test of ping's ranges comes near.
    (slowest + limits.timeout * 2).min(Duration::from_secs(24 * 3600))
}

/// The nonce rank `r`'s successor joined with (rank 0's: the gate's).
fn successor_nonce(roster: &Roster, r: u32, size: u32, gate: &str) -> String {
    match (r + 1) % size {
        0 => gate.to_owned(),
        next => roster.members.get(&next).and_then(|m| m.join.nonce.clone()).unwrap_or_default(),
    }
}

/// Sends each member its assignment; a member that cannot be told is named.
pub fn assign(
    roster: &mut Roster,
    who: &Who,
    me_host: &str,
    limits: &Settings,
    results: Duration,
    trust: Trust,
) -> Vec<Finding> {
    let mut lost = Vec::new();
    let ranks: Vec<u32> = roster.members.keys().copied().collect();
    for r in ranks {
        let next = (r + 1) % who.size;
        let a = Assign {
            successor: next,
            successor_host: roster.members.get(&next).map_or_else(|| me_host.to_owned(), |m| m.join.host.clone()),
            target: target(roster, r, who.size, who.port),
            predecessor: (r + who.size - 1) % who.size,
            all_pairs: limits.all_pairs,
            bytes: limits.bytes,
            iters: limits.iters,
            duration_ms: limits.duration_ms,
            timeout_ms: limits.timeout_ms(),
            results_ms: u32::try_from(results.as_millis()).unwrap_or(u32::MAX),
            nonce: Some(trust.nonce.to_owned()),
            successor_nonce: Some(successor_nonce(roster, r, who.size, trust.nonce)).filter(|n| !n.is_empty()),
            mac: None,
        };
        let Some(m) = roster.members.get_mut(&r) else { continue };
        m.assigned = true;
        let sealed = seal::seal(Frame::Assign(a), trust.key, &m.bound(&who.job, trust.nonce));
        m.session.set_deadline(Instant::now() + limits.timeout);
        if let Err(e) = m.session.send(&sealed) {
            let why = format!("rank {r} could not be told its successor: {e}");
            lost.push(pod_fails(r, &m.join.host, "peer", why, "the pod went away during the gate: look at its logs"));
        }
    }
    lost
}

/// Reads every member's report until `until`; a member without one is named.
pub fn collect(roster: &mut Roster, until: Instant, job: &str, trust: Trust) -> Vec<Finding> {
    let mut out = Vec::new();
    for (&r, m) in roster.members.iter_mut() {
        m.session.set_deadline(until);
        let got = m.session.recv_as::<Frame>();
        // Checked before it is used: a report without the job's MAC counts for nothing.
        let fails = |id, summary, hint| pod_fails(r, &m.join.host, id, summary, hint);
        if let Ok(x @ Frame::Report(_)) = &got {
            if let Err(e) = seal::check(x, trust.key, &m.bound(job, trust.nonce)) {
                out.push(fails("secret", format!("rank {r}'s report {e}"), super::member::SECRET_HINT));
                continue;
            }
        }
        match got {
            // A pod speaks for its own rank only.
            Ok(Frame::Report(rep)) if rep.rank == r => {
                out.extend(rep.pairs.into_iter().map(|f| Finding { rank: r, ..f }))
            }
            Ok(Frame::Report(rep)) => {
                let why = format!("rank {r} sent the report of rank {}", rep.rank);
                out.push(fails("peer", why, "run the same nccl-wrap on every pod"));
            }
            got => {
                let e = got.map_or_else(|e| e, |x| m.session.unexpected("report", x.name()));
                let hint = "the pod went away or hung during its pair test: look at its logs";
                out.push(fails("no-result", format!("rank {r} sent no result: {e}"), hint));
            }
        }
    }
    out
}

/// Sends the verdict to every member (best effort, each bounded by `timeout`).
pub fn announce(roster: &mut Roster, v: &Verdict, timeout: Duration, job: &str, trust: Trust) {
    for (r, m) in roster.members.iter_mut() {
        let sealed = seal::seal(Frame::Verdict(v.clone()), trust.key, &m.bound(job, trust.nonce));
        m.session.set_deadline(Instant::now() + timeout);
        if let Err(e) = m.session.send(&sealed) {
            eprintln!("{PREFIX} gate: could not send the verdict to rank {r} ({}): {e}", m.join.host);
        }
    }
}

/// Pods that joined but cannot test (no usable port...): each named.
pub fn problems(roster: &Roster) -> Vec<Finding> {
    let hint = "run `nccl-wrap doctor` on that pod";
    let of = |(&r, m): (&u32, &Member)| Some(pod_fails(r, &m.join.host, "no-port", m.join.problem.clone()?, hint));
    roster.members.iter().filter_map(of).collect()
}

/// The pods whose NCCL bootstrap uses another address family than rank 0's (`mine`): NCCL
/// connects every rank to rank 0 over one family, so they would hang at its init. Unknown: unjudged.
pub fn bootstrap_mismatches<'a>(joins: impl IntoIterator<Item = &'a Join>, mine: Option<&Bootstrap>) -> Vec<Finding> {
    let Some((my_if, my_family)) = mine.and_then(|b| Some((b.ifname.as_str(), b.family.as_deref()?))) else {
        return Vec::new();
    };
    let hint = "give every pod an address of one family on the interface that routes to the coordinator (MASTER_ADDR), or set NCCL_SOCKET_FAMILY and NCCL_SOCKET_IFNAME the same way on every pod (docs/ready.md, the bootstrap interface)";
    let of = |j: &Join| {
        let b = j.bootstrap.as_ref()?;
        let (ifname, family) = (&b.ifname, b.family.as_deref().filter(|f| *f != my_family)?);
        let why = format!("NCCL's bootstrap here uses {ifname} ({family}), rank 0's {my_if} ({my_family}): NCCL connects every rank to rank 0 over one address family, so this pod would hang at NCCL's init");
        Some(pod_fails(j.rank, &j.host, "bootstrap-family", why, hint))
    };
    joins.into_iter().filter_map(of).collect()
}

const SAME_RAILS: &str =
    "give every pod the same rails (one device-plugin resource per rail, the same count on every node)";

/// The pods that hand NCCL another number of rails than the job's most common count (rank 0's
/// on a tie), pods with a `problem` (named apart) not counted.
pub fn rail_count_mismatches<'a>(joins: impl IntoIterator<Item = &'a Join>, mine: Option<usize>) -> Vec<Finding> {
    let joins: Vec<&Join> = joins.into_iter().filter(|j| j.problem.is_none()).collect();
    let mut counts: BTreeMap<usize, u32> = BTreeMap::new();
    for n in joins.iter().map(|j| j.ports.len()).chain(mine) {
        *counts.entry(n).or_default() += 1;
    }
    let Some(&most) = counts.values().max() else { return Vec::new() };
    let common = mine
        .filter(|m| counts.get(m) == Some(&most))
        .unwrap_or_else(|| counts.iter().find(|(_, &c)| c == most).map_or(0, |(&n, _)| n));
    let pods = counts.values().sum::<u32>();
    let odd = |j: &&Join| {
        let (n, names) = (j.ports.len(), verdict::rail_names(&j.ports));
        let names = if names.is_empty() { "none".to_string() } else { names.join(",") };
        let why = format!("this pod hands NCCL {n} rail(s) ({names}), {most} of the job's {pods} pods hand it {common}: NCCL pairs rails by their place in the list, and a rank with fewer NICs than its peers starts crippled or spins (NVIDIA/nccl#2428)");
        let hint = format!("{SAME_RAILS}, or name them with --rails on host-network nodes");
        pod_fails(j.rank, &j.host, "rail-count", why, &hint)
    };
    let mut found: Vec<Finding> = joins.iter().filter(|j| j.ports.len() != common).map(odd).collect();
    if let Some(n) = mine.filter(|&n| n != common) {
        let why = format!("rank 0 hands NCCL {n} rail(s), {most} of the job's {pods} pods hand it {common}: NCCL pairs rails by their place in the list");
        found.push(pod_fails(0, "rank 0", "rail-count", why, SAME_RAILS));
    }
    found
}

/// Where the joins come from, and until when they are waited for (or `cancel`); the gate
/// port's sources, which a refused join counts against.
pub struct Joins<'a> {
    pub rx: Receiver<(Session, Join)>,
    pub until: Instant,
    pub cancel: &'a AtomicBool,
    pub ledger: Ledger,
}

/// Rank 0: the roster, the assignments, this pod's own edge, the reports, the verdict to all
/// (with `--gate-prune`, rails whose pairs failed dropped on every pod).
pub fn run(
    who: &Who,
    me: &Pod,
    fabric: &dyn PairTest,
    limits: &Settings,
    joins: Joins,
    trust: Trust,
    opts: &Options,
) -> Verdict {
    let (key, timeout, mine) = (trust.key, limits.timeout, fabric.ports());
    let mut roster = gather(&joins, who, trust);
    // The roster is closed: the listener tells a late join so (its channel is gone).
    drop(joins);
    let joins = || roster.members.values().map(|m| &m.join);
    let mut findings: Vec<Finding> = problems(&roster);
    findings.extend(bootstrap_mismatches(joins(), who.bootstrap.as_ref()));
    findings.extend(rail_count_mismatches(joins(), mine.as_ref().ok().map(Vec::len)));
    if let Err(c) = &mine {
        findings.push(verdict::of_pod(me, None, c));
    }
    if !roster.missing.is_empty() || !findings.is_empty() {
        let v = verdict::decide(who.size, &roster.missing, findings, opts.slow);
        announce(&mut roster, &v, timeout, &who.job, trust);
        return v;
    }
    // Every rank's rails by name, in order (every rank joined).
    let joined = roster.members.iter().map(|(&r, m)| (r, verdict::rail_names(&m.join.ports)));
    let rails: BTreeMap<u32, Vec<String>> =
        std::iter::once((0, verdict::rail_names(&mine.unwrap_or_default()))).chain(joined).collect();
    let results = results_budget(&rails.values().map(Vec::len).collect::<Vec<_>>(), limits);
    findings.extend(assign(&mut roster, who, &me.host, limits, results, trust));
    let until = Instant::now() + results;
    let next = (who.rank + 1) % who.size;
    let target = target(&roster, 0, who.size, who.port);
    let peer_host = roster.members.get(&next).map_or_else(|| me.host.clone(), |m| m.join.host.clone());
    // Rank 0's own test, its tag proving the secret to its successor.
    let bound = Bound { job: &who.job, member: &successor_nonce(&roster, 0, who.size, trust.nonce), gate: "" };
    let sealed = limits.gate.clone().map(|t| seal::seal_tag(t, key, &bound));
    let limits = &Settings { gate: sealed, ..limits.clone() };
    findings.extend(successor::test(me, &Pod { rank: next, host: peer_host }, fabric, &target, limits));
    findings.extend(collect(&mut roster, until + timeout, &who.job, trust));
    let mut v = verdict::decide(who.size, &[], findings, opts.slow);
    // Rail-specific failures only: every pod joined with the same count (checked above). Rails
    // are dropped only where every pod asked for it: a pod that did not would start with fewer.
    if let Some(dropped) = verdict::prune(&v, &rails).filter(|_| opts.prune) {
        let unasked: Vec<u32> = roster.members.iter().filter(|(_, m)| !m.join.prune).map(|(&r, _)| r).collect();
        if unasked.is_empty() {
            v = Verdict { go: true, dropped, ..v };
        } else {
            let ranks: Vec<String> = unasked.iter().map(u32::to_string).collect();
            eprintln!(
                "{PREFIX} gate: --gate-prune is set here but not on rank(s) {}: no rail is dropped, the job refuses",
                ranks.join(", ")
            );
        }
    }
    announce(&mut roster, &v, timeout, &who.job, trust);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use nw_pairtest::wire::PortInfo;

    fn who() -> Who {
        Who {
            rank: 0,
            size: 4,
            coordinator: "train-0:18516".into(),
            port: 18516,
            job: "train-0:18516/4".into(),
            source: String::new(),
            bootstrap: None,
        }
    }

    fn join(job: &str, rank: u32, size: u32) -> Join {
        Join {
            job: job.into(),
            rank,
            size,
            host: "w".into(),
            port: 18516,
            ports: Vec::new(),
            problem: Some("x".into()),
            nonce: None,
            challenge: None,
            bootstrap: None,
            prune: false,
            mac: None,
        }
    }

    fn rails(n: usize) -> Vec<PortInfo> {
        (0..n)
            .map(|i| PortInfo {
                device: format!("mlx5_{i}"),
                port: 1,
                link_layer: nw_pairtest::wire::LinkLayer::InfiniBand,
                gid_index: None,
                gid: None,
                gid_type: None,
                lid: Some(u16::try_from(i + 1).unwrap_or(1)),
                mtu: 4096,
                pkey: None,
                netdev: None,
                rate_kbps: None,
            })
            .collect()
    }

    #[test]
    fn the_wait_names_the_ranks_not_yet_joined() {
        let none = BTreeMap::new();
        assert_eq!(waiting(&none, 3, Duration::from_secs(570)), "waiting for 2 of 3 pods (ranks 1, 2), 9m30s left");
        assert_eq!(waiting(&none, 2, Duration::from_secs(5)), "waiting for 1 of 2 pods (rank 1), 0m05s left");
        let many = waiting(&none, 40, Duration::ZERO);
        assert!(many.starts_with("waiting for 39 of 40 pods (ranks 1, 2,"), "{many}");
        assert!(many.contains("16, and 23 more)"), "{many}");
    }

    #[test]
    fn a_pod_handing_nccl_another_number_of_rails_is_named() {
        let with = |rank, n| Join {
            rank,
            host: format!("train-{rank}"),
            ports: rails(n),
            problem: None,
            ..join("j", rank, 4)
        };
        // Rank 2 brings 7 rails where the job's others, rank 0 included, bring 8.
        let joins = [with(1, 8), with(2, 7), with(3, 8)];
        let found = rail_count_mismatches(&joins, Some(8));
        assert_eq!(found.len(), 1, "{found:?}");
        let f = &found[0];
        assert_eq!((f.rank, f.cause.as_deref(), f.status.as_str()), (2, Some("rail-count"), "fail"));
        assert!(f.summary.starts_with("this pod hands NCCL 7 rail(s) (mlx5_0:1,"), "{}", f.summary);
        assert!(f.summary.contains("3 of the job's 4 pods hand it 8"), "{}", f.summary);
        // Rank 0 the odd one: named as such, the others not.
        let found = rail_count_mismatches(&[with(1, 4), with(2, 4), with(3, 4)], Some(5));
        assert_eq!(found.iter().map(|f| f.rank).collect::<Vec<_>>(), [0], "{found:?}");
        // Two counts as common: rank 0's is the job's.
        let found = rail_count_mismatches(&[with(1, 2), with(2, 4), with(3, 2)], Some(4));
        assert_eq!(found.iter().map(|f| f.rank).collect::<Vec<_>>(), [1, 3], "{found:?}");
        // Equal counts, and a pod that brings none for a reason of its own, are not findings.
        assert!(rail_count_mismatches(&[with(1, 8), with(2, 8), join("j", 3, 4)], Some(8)).is_empty());
    }

    #[test]
    fn a_pod_whose_bootstrap_family_is_not_rank_0s_is_named() {
        let boot = |i: &str, f: Option<&str>| Some(Bootstrap { ifname: i.into(), family: f.map(str::to_owned) });
        let with = |rank, b| Join { rank, host: format!("train-{rank}"), bootstrap: b, ..join("j", rank, 4) };
        let joins = [
            with(1, boot("eth0", Some("AF_INET"))),
            with(2, boot("eth0", Some("AF_INET6"))),
            with(3, boot("eth1", None)),
        ];
        let mine = boot("eth0", Some("AF_INET"));
        let found = bootstrap_mismatches(&joins, mine.as_ref());
        assert_eq!(found.len(), 1, "{found:?}");
        let f = &found[0];
        assert_eq!((f.rank, f.cause.as_deref(), f.status.as_str()), (2, Some("bootstrap-family"), "fail"));
        assert!(
            f.summary.starts_with("NCCL's bootstrap here uses eth0 (AF_INET6), rank 0's eth0 (AF_INET)"),
            "{}",
            f.summary
        );
        // Rank 0's family unknown (its interface the user's): nothing judged.
        assert!(bootstrap_mismatches(&joins, boot("ib0", None).as_ref()).is_empty());
        assert!(bootstrap_mismatches(&joins, None).is_empty());
    }

    #[test]
    fn joins_of_another_job_size_or_rank_are_refused_and_named() {
        assert_eq!(check(&join("train-0:18516/4", 3, 4), &who()), Ok(()));
        let e = check(&join("other", 1, 4), &who()).expect_err("job");
        assert!(e.starts_with("a pod of another job (job \"other\", this job is \"train-0:18516/4\")"), "{e}");
        let e = check(&join("train-0:18516/4", 1, 8), &who()).expect_err("size");
        assert!(e.contains("says the job has 8 pods, the coordinator 4"), "{e}");
        assert!(check(&join("train-0:18516/4", 0, 4), &who()).expect_err("rank 0").contains("rank 0 is not"));
        assert!(check(&join("train-0:18516/4", 4, 4), &who()).is_err());
    }

    #[test]
    fn the_results_budget_is_the_slowest_edge_and_bounded() {
        let l = Settings {
            all_pairs: false,
            bytes: 1 << 20,
            iters: 1000,
            duration_ms: 1000,
            timeout: Duration::from_secs(3),
            gate: None,
        };
        // 4 rails everywhere but one pod with 2: its edges have 2 pairs; the slowest has 4:
        // 3 s x (2 + 4) + 1 s x 1 round, plus 2 x 3 s for the connect and the hello.
        assert_eq!(results_budget(&[4, 4, 2, 4], &l), Duration::from_secs(25));
        let all = Settings { all_pairs: true, ..l.clone() };
        // 4 x 4 pairs in 4 rounds: 3 s x 18 + 4 s, plus 6 s.
        assert_eq!(results_budget(&[4, 4], &all), Duration::from_secs(64));
        let huge = Settings { timeout: Duration::from_secs(600), ..all };
        assert_eq!(results_budget(&[32, 32], &huge), Duration::from_secs(24 * 3600));
    }
}

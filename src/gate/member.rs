//! Every rank but 0: knock at the coordinator, join answering its challenge, take the
//! assignment, test the successor, report, and wait for the verdict. A coordinator that cannot
//! be reached, or goes silent, fails this pod's gate.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::successor;
use super::verdict::{self, pod_fails, Pod, SlowRule};
use super::who::Who;
use nw_pairtest::edge::PairTest;
use nw_pairtest::exchange::{self, ExchangeError, Session};
use nw_pairtest::wire::Protocol;
use nw_pairtest::Settings;

use super::seal::{self, Bound, Secret};
use super::wire::{Assign, Frame, Join, Knock, Report, Verdict};

fn alone(who: &Who, me: &Pod, id: &'static str, summary: String, hint: &str) -> Verdict {
    verdict::decide(who.size, &[], vec![pod_fails(me.rank, &me.host, id, summary, hint)], SlowRule::OFF)
}

/// What every pod of a job with a secret needs.
pub const SECRET_HINT: &str = "every pod of the job needs the same NCCL_WRAP_GATE_SECRET or NCCL_WRAP_GATE_SECRET_FILE (the kit mounts one Secret per job: docs/gate.md)";

fn coordinator_lost(who: &Who, me: &Pod, e: &ExchangeError, when: &str) -> Verdict {
    // The coordinator refused this pod for its secret (another, or none): named as such.
    if let ExchangeError::Refused { reason, .. } = e {
        if reason.contains("job-secret") || reason.contains("job secret") {
            let summary = format!("the coordinator {} refused this pod's join: {reason}", who.coordinator);
            return alone(who, me, "secret", summary, SECRET_HINT);
        }
    }
    let hint = if e.no_peer() {
        "is rank 0 running with --gate, and NCCL_WRAP_GATE_PORT open between the pods? raise NCCL_WRAP_GATE_WAIT_MS for slow starts"
    } else {
        "run the same nccl-wrap on every pod; look at rank 0's log"
    };
    alone(who, me, "peer", format!("the coordinator {} {when}: {e}", who.coordinator), hint)
}

/// Where the coordinator's frame fails this pod's key: the verdict that says so.
fn forged(who: &Who, me: &Pod, m: &Frame, key: Option<&Secret>, b: &Bound) -> Option<Verdict> {
    let e = seal::check(m, key, b).err()?;
    let summary = format!("the coordinator {}'s {} {e}", who.coordinator, m.name());
    Some(alone(who, me, "secret", summary, SECRET_HINT))
}

/// Connects to the coordinator, retrying until `end` or `cancel`.
fn reach(who: &Who, end: Instant, timeout: Duration, cancel: &AtomicBool) -> Result<Session, ExchangeError> {
    loop {
        // Slices of a second, so that a stopping signal is seen between them.
        let slice = (Instant::now() + Duration::from_secs(1)).min(end);
        match exchange::connect(&who.coordinator, slice, timeout) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() >= end || cancel.load(Ordering::SeqCst) => return Err(e),
            Err(_) => {}
        }
    }
}

/// Waits until something arrives on `s`, `until` passes or `cancel` is set (the read itself
/// keeps its own deadline).
fn arrival(s: &Session, until: Instant, cancel: &AtomicBool) {
    while Instant::now() < until && !cancel.load(Ordering::SeqCst) {
        // In slices, so that a stopping signal is seen between them.
        if s.wait(until.saturating_duration_since(Instant::now()).min(Duration::from_millis(100))) {
            return;
        }
    }
}

/// Joins, tests, reports; returns the coordinator's verdict (or this pod's own failure).
pub fn take_part(
    who: &Who,
    me: &Pod,
    fabric: &dyn PairTest,
    limits: &Settings,
    opts: &super::Options,
    cancel: &AtomicBool,
    trust: super::Trust,
) -> Verdict {
    let (key, wait) = (trust.key, Duration::from_millis(opts.wait_ms));
    let ports = fabric.ports();
    let problem = ports.as_ref().err().map(|c| verdict::clip(&c.summary, nw_pairtest::wire::MAX_TEXT));
    let join = Join {
        job: who.job.clone(),
        rank: who.rank,
        size: who.size,
        host: me.host.clone(),
        port: who.port,
        ports: ports.unwrap_or_default(),
        problem,
        nonce: Some(trust.nonce.to_owned()),
        challenge: None,
        bootstrap: who.bootstrap.clone(),
        prune: opts.prune,
        mac: None,
    };
    let early = Bound { job: &who.job, member: trust.nonce, gate: "" };
    let knock = Frame::Knock(Knock { job: who.job.clone(), rank: who.rank });
    let reach_until = Instant::now() + wait;
    // The coordinator waits for the last pod up to its own wait, which began no later than ours.
    let until = Instant::now() + wait + limits.timeout;
    let (mut s, first) = loop {
        let mut s = match reach(who, reach_until, limits.timeout, cancel) {
            Ok(s) => s,
            Err(e) => return coordinator_lost(who, me, &e, "could not be reached"),
        };
        // The coordinator's challenge for this connection first: the join answers it, so that
        // no one can join as this pod with a join of an earlier run.
        s.set_deadline(Instant::now() + limits.timeout);
        let challenge = match s.send(&knock).and_then(|()| s.recv_as::<Frame>()) {
            Ok(Frame::Challenge(c)) => c.nonce,
            // Closed without a word: the coordinator's door was full, the knock never read.
            Err(ExchangeError::Closed { got: 0, .. }) if Instant::now() < reach_until => {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            Ok(m) => {
                let e = s.unexpected("challenge", m.name());
                return coordinator_lost(who, me, &e, "answered this pod's knock wrongly");
            }
            Err(e) => return coordinator_lost(who, me, &e, "did not take this pod's join"),
        };
        let answered = Join { challenge: Some(challenge.clone()), ..join.clone() };
        let sealed = seal::seal(Frame::Join(answered), key, &Bound { gate: &challenge, ..early });
        if let Err(e) = s.send(&sealed) {
            return coordinator_lost(who, me, &e, "did not take this pod's join");
        }
        arrival(&s, until, cancel);
        if cancel.load(Ordering::SeqCst) {
            return alone(who, me, "peer", "stopped by a signal while waiting for the coordinator".into(), "");
        }
        s.set_deadline(until);
        match s.recv_as::<Frame>() {
            // Closed without a word: the coordinator's door was full (a burst of joins, or a
            // scanner), so the join was never read. Join again while the wait lasts.
            Err(ExchangeError::Closed { got: 0, .. }) if Instant::now() < reach_until => {
                std::thread::sleep(Duration::from_millis(50));
            }
            other => break (s, other),
        }
    };
    let (a, gate): (Assign, String) = match first {
        Ok(Frame::Assign(a)) => {
            let gate = a.nonce.clone().unwrap_or_default();
            if let Some(v) = forged(who, me, &Frame::Assign(a.clone()), key, &Bound { gate: &gate, ..early }) {
                return v;
            }
            (a, gate)
        }
        Ok(Frame::Verdict(v)) => return forged(who, me, &Frame::Verdict(v.clone()), key, &early).unwrap_or(v),
        Ok(m) => return coordinator_lost(who, me, &s.unexpected("assign", m.name()), "answered the join wrongly"),
        Err(e) => return coordinator_lost(who, me, &e, "sent no assignment"),
    };
    // The pair test's tag proves the secret to the successor, bound to the nonce it joined with.
    let succ = a.successor_nonce.clone().unwrap_or_default();
    let tag = limits.gate.clone().map(|t| seal::seal_tag(t, key, &Bound { job: &who.job, member: &succ, gate: "" }));
    // Every pair of the job runs the coordinator's test.
    let timeout = Duration::from_millis(u64::from(a.timeout_ms));
    let (all_pairs, bytes, iters, duration_ms) = (a.all_pairs, a.bytes, a.iters, a.duration_ms);
    let theirs = Settings { all_pairs, bytes, iters, duration_ms, timeout, gate: tag };
    let until = Instant::now() + Duration::from_millis(u64::from(a.results_ms));
    let next = Pod { rank: a.successor, host: a.successor_host.clone() };
    let pairs = successor::test(me, &next, fabric, &a.target, &theirs);
    s.set_deadline(until.max(Instant::now()) + theirs.timeout);
    let session = Bound { gate: &gate, ..early };
    let report = seal::seal(Frame::Report(Report { rank: who.rank, pairs, mac: None }), key, &session);
    if let Err(e) = s.send(&report) {
        return coordinator_lost(who, me, &e, "did not take this pod's results");
    }
    s.set_deadline(until.max(Instant::now()) + theirs.timeout * 3);
    match s.recv_as::<Frame>() {
        Ok(Frame::Verdict(v)) => forged(who, me, &Frame::Verdict(v.clone()), key, &session).unwrap_or(v),
        got => {
            let e = got.map_or_else(|e| e, |m| s.unexpected("verdict", m.name()));
            coordinator_lost(who, me, &e, "sent no verdict")
        }
    }
}

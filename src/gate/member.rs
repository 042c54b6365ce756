//! Every rank but 0: join the coordinator, take the assignment, test the successor, report,
//! and wait for the verdict. A coordinator that cannot be reached, or that goes silent, is a
//! failure of this pod's gate (it cannot know that the job's fabric works).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::successor;
use super::verdict::{self, pod_fails, Pod};
use super::who::Who;
use crate::pairtest::edge::PairTest;
use crate::pairtest::exchange::{self, ExchangeError, Session};
use crate::pairtest::wire::{Assign, Join, Message, Report, Verdict};
use crate::pairtest::Settings;

fn alone(who: &Who, me: &Pod, id: &'static str, summary: String, hint: &str) -> Verdict {
    verdict::decide(who.size, &[], vec![pod_fails(me.rank, &me.host, id, summary, hint)])
}

fn coordinator_lost(who: &Who, me: &Pod, e: &ExchangeError, when: &str) -> Verdict {
    let hint = if e.no_peer() {
        "is rank 0 running with --gate, and NCCL_WRAP_GATE_PORT open between the pods? raise NCCL_WRAP_GATE_WAIT_MS for slow starts"
    } else {
        "run the same nccl-wrap on every pod; look at rank 0's log"
    };
    alone(who, me, "peer", format!("the coordinator {} {when}: {e}", who.coordinator), hint)
}

fn verdict_of(s: &mut Session) -> Result<Verdict, ExchangeError> {
    s.expect("verdict", |m| if let Message::Verdict(v) = m { Ok(v) } else { Err(m) })
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
    while Instant::now() < until && !cancel.load(Ordering::SeqCst) && !s.readable().unwrap_or(true) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Joins, tests, reports; returns the coordinator's verdict (or this pod's own failure).
pub fn take_part(
    who: &Who,
    me: &Pod,
    fabric: &dyn PairTest,
    limits: &Settings,
    wait: Duration,
    cancel: &AtomicBool,
) -> Verdict {
    let (ports, problem) = match fabric.ports() {
        Ok(p) => (p, None),
        Err(c) => (Vec::new(), Some(verdict::clip(&c.summary, crate::pairtest::wire::MAX_TEXT))),
    };
    let join = Join {
        job: who.job.clone(),
        rank: who.rank,
        size: who.size,
        host: me.host.clone(),
        port: who.port,
        ports,
        problem,
    };
    let mut s = match reach(who, Instant::now() + wait, limits.timeout, cancel) {
        Ok(s) => s,
        Err(e) => return coordinator_lost(who, me, &e, "could not be reached"),
    };
    if let Err(e) = s.send(&Message::Join(join)) {
        return coordinator_lost(who, me, &e, "did not take this pod's join");
    }
    // The coordinator waits for the last pod up to its own wait, which began no later than ours.
    let until = Instant::now() + wait + limits.timeout;
    arrival(&s, until, cancel);
    if cancel.load(Ordering::SeqCst) {
        return alone(who, me, "peer", "stopped by a signal while waiting for the coordinator".into(), "");
    }
    s.set_deadline(until);
    let a: Assign = match s.recv() {
        Ok(Message::Assign(a)) => a,
        Ok(Message::Verdict(v)) => return v,
        Ok(m) => {
            let e = ExchangeError::Unexpected { peer: s.peer.clone(), want: "assign", got: m.name() };
            return coordinator_lost(who, me, &e, "answered the join wrongly");
        }
        Err(e) => return coordinator_lost(who, me, &e, "sent no assignment"),
    };
    let theirs = Settings::of_assign(&a, limits.gate.clone());
    let until = Instant::now() + Duration::from_millis(u64::from(a.results_ms));
    let next = Pod { rank: a.successor, host: a.successor_host.clone() };
    let pairs = successor::test(me, &next, fabric, &a.target, &theirs);
    s.set_deadline(until.max(Instant::now()) + theirs.timeout);
    if let Err(e) = s.send(&Message::Report(Report { rank: who.rank, pairs })) {
        return coordinator_lost(who, me, &e, "did not take this pod's results");
    }
    s.set_deadline(until.max(Instant::now()) + theirs.timeout * 3);
    verdict_of(&mut s).unwrap_or_else(|e| coordinator_lost(who, me, &e, "sent no verdict"))
}

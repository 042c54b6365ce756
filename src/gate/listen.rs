//! The gate's port on every pod, through the pair test's one door (`pairtest::desk`): it serves
//! the predecessor's pair test and, on rank 0, takes the joins (a knock, its challenge, then the
//! join). Everything else is a stray: logged at a bounded rate, told why, and ignored.

use std::net::TcpListener;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{self, Sender};
use std::time::Instant;

use nw_output::msg::PREFIX;
use nw_pairtest::desk::{Arrival, Desk};
use nw_pairtest::door::{Allow, Policy};
use nw_pairtest::edge::PairTest;
use nw_pairtest::exchange::Session;
use nw_pairtest::ledger::Ledger;
use nw_pairtest::output::PairResult;
use nw_pairtest::wire::{Message, Protocol};
use nw_pairtest::Settings;

use super::seal::{self, Bound};
use super::wire::{Challenge, Frame, Join, Knock};

/// Whom the listener serves.
pub struct Listen<'a> {
    pub job: &'a str,
    pub predecessor: u32,
    /// The most this pod answers its predecessor's test with; its timeout bounds each first message.
    pub test: &'a Settings,
    /// With a job secret, the predecessor's test must prove it, bound to this pod's nonce.
    pub trust: super::Trust<'a>,
    /// Rank 0: where joins go (dropped when the roster closes).
    pub joins: Option<Sender<(Session, Join)>>,
    /// Set when the verdict is in: the listener returns.
    pub stop: &'a AtomicBool,
    /// This port's sources, shared with the roster (its refusals count there too).
    pub ledger: Ledger,
}

/// What the listener did: the predecessor's pairs (as this end saw them), and the strays.
#[derive(Debug, Default)]
pub struct Served {
    pub pairs: Option<Result<Vec<PairResult>, String>>,
    pub strays: usize,
}

/// One line for what this pod's test cut of its predecessor's hello, said before it answers.
fn say_clamped(peer: &str, clamped: &[String]) {
    eprintln!("{PREFIX} pair test: {peer} asked for more than this listener allows: {}", clamped.join(", "));
}

/// A stray: counted, and said if its source's share of lines this window allows.
fn stray(served: &mut Served, what: &str, said: bool) {
    served.strays += 1;
    if said {
        eprintln!("{PREFIX} gate: ignored a stray connection: {what}");
    }
}

/// Strays not said one by one, as one line.
fn counted(what: &str) {
    eprintln!("{PREFIX} gate: ignored: {what}");
}

/// The gate port's policy: anyone may knock (a join and a pair test prove themselves), each first
/// message within the test's timeout.
pub fn policy(test: &Settings) -> Policy {
    Policy::new(Allow::Anyone, test.timeout, test.clone())
}

/// Serves until `stop` is set or `until` passes; connections still unjudged are shut on return.
pub fn serve(l: &TcpListener, opts: Listen<'_>, fabric: &dyn PairTest, until: Instant) -> Served {
    let mut desk: Desk<'_, Frame> = Desk::with_ledger(l, policy(opts.test), opts.ledger.clone());
    let (stop, mut opts, mut served) = (opts.stop, opts, Served::default());
    while let Some(arrival) = desk.next(Some(until), stop) {
        match arrival {
            Arrival::First(s, m) => {
                if let Some(s) = dispatch(&mut opts, fabric, &mut served, s, m) {
                    desk.again(s);
                }
            }
            Arrival::Stray { error, said } => stray(&mut served, &error.to_string(), said),
            Arrival::Counted(e) => counted(&e.to_string()),
        }
    }
    desk.counted(true).iter().for_each(|e| counted(&e.to_string()));
    served
}

/// A stray's first message: counted (against its source too), said if the source's share allows,
/// and the peer told `tell`, where it can be.
fn refuse(served: &mut Served, ledger: &Ledger, s: Session, why: &str, tell: Option<&str>) {
    let said = s.addrs().is_none_or(|(peer, _)| ledger.refused(peer.ip(), why));
    stray(served, &format!("{}: {why}", s.peer), said);
    if let Some(tell) = tell {
        s.refuse(tell);
    }
}

/// Sorts one connection's first message: a join, the predecessor, or a stray; returns the
/// connection where its next message is to be read as a first message again (after a knock).
fn dispatch(
    opts: &mut Listen,
    fabric: &dyn PairTest,
    served: &mut Served,
    mut s: Session,
    first: Frame,
) -> Option<Session> {
    let Listen { job, predecessor, test, trust, ref mut joins, ref ledger, .. } = *opts;
    let what = first.name();
    match first {
        Frame::Knock(k) if joins.is_some() => {
            // This connection's challenge, fresh for this gate run: the join sent next on it
            // must answer it, so that a join recorded from an earlier run is refused.
            let (theirs, ours) = s.addrs()?;
            let nonce = seal::challenge(trust.nonce, theirs, ours);
            s.set_deadline(Instant::now() + test.timeout);
            let Err(e) = s.send(&Frame::Challenge(Challenge { nonce })) else { return Some(s) };
            let why = format!("rank {} of job {:?} knocked: {e}", k.rank, k.job);
            refuse(served, ledger, s, &why, None);
        }
        Frame::Join(j) if joins.is_some() => {
            let Some(tx) = joins else { return None };
            if let Err(mpsc::SendError((s, j))) = tx.send((s, j)) {
                *joins = None;
                let (rank, job) = (j.rank, j.job);
                let why = format!(
                    "rank {rank} of job {job:?} joined after the roster closed (every rank was in, or the wait ended)"
                );
                refuse(served, ledger, s, &why, Some(&why));
            }
        }
        Frame::Knock(Knock { rank, job }) | Frame::Join(Join { rank, job, .. }) => {
            let why = format!("a {what} from rank {rank} of job {job:?}, but this pod is not the coordinator");
            let tell = format!("{why}: set NCCL_WRAP_GATE_COORDINATOR to rank 0's address");
            refuse(served, ledger, s, &why, Some(&tell));
        }
        Frame::Pair(Message::Hello(h)) => {
            let ours = h.gate.as_ref().is_some_and(|g| g.job == job && g.rank == predecessor);
            // The job's secret, bound to this pod's nonce (which only rank 0 and this pod
            // know), before anything of the test runs.
            let bound = Bound { job, member: trust.nonce, gate: "" };
            let proof = h.gate.as_ref().filter(|_| ours).and_then(|g| seal::check_tag(g, trust.key, &bound).err());
            if let Some(e) = proof {
                let why = format!("a pair test as rank {predecessor} of job {job:?} ({}): its tag {e}", h.host);
                refuse(served, ledger, s, &why, Some(&why));
                return None;
            }
            if ours && served.pairs.is_none() {
                served.pairs = Some(fabric.answer(s, &h, test, &say_clamped));
                if let Some(Err(e)) = &served.pairs {
                    eprintln!("{PREFIX} gate: serving rank {predecessor}'s pair test: {e}");
                }
                return None;
            }
            let who = match &h.gate {
                Some(g) => format!("rank {} of job {:?}", g.rank, g.job),
                None => "a plain `nccl-wrap ping`".to_owned(),
            };
            let (host, again) = (&h.host, if served.pairs.is_some() { ", already served" } else { "" });
            let why = format!(
                "{who} ({host}) asked for a pair test; this port serves only rank {predecessor} of job {job:?}{again}"
            );
            refuse(served, ledger, s, &why, Some(&why));
        }
        other => {
            let why = format!("sent a {} message first", other.name());
            refuse(served, ledger, s, &why, Some(&why));
        }
    }
    None
}

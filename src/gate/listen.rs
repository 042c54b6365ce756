//! The gate's port on every pod: one listener that serves the predecessor's pair test and, on
//! rank 0, takes the other pods' joins: a pod knocks, is sent this connection's challenge, and
//! its join (read as a first message again) must answer it. Everything else that connects (a
//! probe, a scanner, a plain `ping`, a pod of another job or an old run) is a stray: logged,
//! told why, and ignored while the wait goes on. Never a peer.
//!
//! Connections come through the pair test's door (`pairtest::door`): each first message is
//! read on a short-lived thread under the hello deadline, at most `door::READERS` at once (a
//! connection past that is closed unread), and a stray is closed as soon as it is judged.

use std::net::TcpListener;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{self, Sender};
use std::time::{Duration, Instant};

use nw_output::msg::PREFIX;
use nw_pairtest::door::{Allow, Arrival, Desk, Policy};
use nw_pairtest::edge::PairTest;
use nw_pairtest::exchange::Session;
use nw_pairtest::output::PairResult;
use nw_pairtest::wire::{Message, Protocol};
use nw_pairtest::Settings;

use super::seal::{self, Bound};
use super::wire::{Challenge, Frame, Join};

/// Whom the listener serves.
pub struct Listen<'a> {
    pub job: &'a str,
    pub predecessor: u32,
    /// Deadline of each connection's first message.
    pub hello: Duration,
    /// The most this pod answers its predecessor's test with (its own pair test settings).
    pub test: &'a Settings,
    /// With a job secret, the predecessor's test must prove it, bound to this pod's nonce.
    pub trust: super::Trust<'a>,
    /// Rank 0: where joins go (dropped when the roster closes).
    pub joins: Option<Sender<(Session, Join)>>,
    /// Set when the verdict is in: the listener returns.
    pub stop: &'a AtomicBool,
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

fn stray(served: &mut Served, what: &str) {
    served.strays += 1;
    eprintln!("{PREFIX} gate: ignored a stray connection: {what}");
}

/// Serves until `stop` is set or `until` passes. Every connection goes through the pair test's
/// door: strays are closed as soon as they are judged, and at most the door's readers are open
/// unjudged; those are shut when this returns.
pub fn serve(l: &TcpListener, opts: Listen<'_>, fabric: &dyn PairTest, until: Instant) -> Served {
    // Anyone may knock: a join proves itself by the job's secret, a pair test by its tag.
    let mut desk: Desk<'_, Frame> = Desk::new(l, Policy::new(Allow::Anyone, opts.hello, opts.test.clone()));
    let mut desk_of = Dispatch {
        job: opts.job,
        predecessor: opts.predecessor,
        joins: opts.joins,
        fabric,
        test: opts.test,
        trust: opts.trust,
        hello: opts.hello,
        served: Served::default(),
    };
    while let Some(arrival) = desk.next(Some(until), opts.stop) {
        match arrival {
            Arrival::First(s, m) => {
                if let Some(s) = desk_of.dispatch(s, m) {
                    desk.again(s);
                }
            }
            Arrival::Stray(e) => stray(&mut desk_of.served, &e.to_string()),
        }
    }
    drop(desk);
    desk_of.served
}

/// Where each connection's first message is sorted: a join, the predecessor, or a stray.
struct Dispatch<'a> {
    job: &'a str,
    predecessor: u32,
    joins: Option<Sender<(Session, Join)>>,
    fabric: &'a dyn PairTest,
    test: &'a Settings,
    trust: super::Trust<'a>,
    hello: Duration,
    served: Served,
}

impl Dispatch<'_> {
    /// Sorts one first message; returns the connection where its next message is to be read as a
    /// first message again (a knock answered with its challenge: the join comes next).
    fn dispatch(&mut self, mut s: Session, first: Frame) -> Option<Session> {
        let Dispatch { job, predecessor, joins, fabric, test, trust, hello, served } = self;
        let (job, predecessor, fabric, test, trust, hello) = (*job, *predecessor, *fabric, *test, *trust, *hello);
        let peer = s.peer.clone();
        match first {
            Frame::Knock(k) if joins.is_some() => {
                // This connection's challenge, fresh for this gate run: the join sent next on it
                // must answer it, so that a join recorded from an earlier run is refused.
                let (theirs, ours) = s.addrs()?;
                let nonce = seal::challenge(trust.nonce, theirs, ours);
                s.set_deadline(Instant::now() + hello);
                match s.send_as(&Frame::Challenge(Challenge { nonce })) {
                    Ok(()) => return Some(s),
                    Err(e) => stray(served, &format!("{peer}: rank {} of job {:?} knocked: {e}", k.rank, k.job)),
                }
            }
            Frame::Knock(k) => {
                let why =
                    format!("a knock from rank {} of job {:?}, but this pod is not the coordinator", k.rank, k.job);
                stray(served, &format!("{peer}: {why}"));
                s.refuse(&format!("{why}: set NCCL_WRAP_GATE_COORDINATOR to rank 0's address"));
            }
            Frame::Join(j) => match joins {
                Some(tx) => {
                    if let Err(mpsc::SendError((s, j))) = tx.send((s, j)) {
                        *joins = None;
                        let why = format!(
                            "rank {} of job {:?} joined after the roster closed (every rank was in, or the wait ended)",
                            j.rank, j.job
                        );
                        stray(served, &format!("{peer}: {why}"));
                        s.refuse(&why);
                    }
                }
                None => {
                    let why =
                        format!("a join from rank {} of job {:?}, but this pod is not the coordinator", j.rank, j.job);
                    stray(served, &format!("{peer}: {why}"));
                    s.refuse(&format!("{why}: set NCCL_WRAP_GATE_COORDINATOR to rank 0's address"));
                }
            },
            Frame::Pair(Message::Hello(h)) => {
                let ours = h.gate.as_ref().is_some_and(|g| g.job == job && g.rank == predecessor);
                // The job's secret, bound to this pod's nonce (which only rank 0 and this pod
                // know), before anything of the test runs.
                let bound = Bound { job, member: trust.nonce, gate: "" };
                let proof = match &h.gate {
                    Some(g) if ours => seal::check_tag(g, trust.key, &bound).err(),
                    _ => None,
                };
                if let Some(e) = proof {
                    let why = format!("a pair test as rank {predecessor} of job {job:?} ({}): its tag {e}", h.host);
                    stray(served, &format!("{peer}: {why}"));
                    s.refuse(&why);
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
                let why = format!(
                    "{who} ({}) asked for a pair test; this port serves only rank {predecessor} of job {job:?}{}",
                    h.host,
                    if served.pairs.is_some() { ", already served" } else { "" }
                );
                stray(served, &format!("{peer}: {why}"));
                s.refuse(&why);
            }
            other => {
                let why = format!("sent a {} message first", other.name());
                stray(served, &format!("{peer}: {why}"));
                s.refuse(&why);
            }
        }
        None
    }
}

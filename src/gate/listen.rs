//! The gate's port on every pod: one listener that serves the predecessor's pair test and, on
//! rank 0, takes the other pods' joins. Everything else that connects (a probe, a scanner, a
//! plain `ping`, a pod of another job or an old run) is a stray: logged, told why, and ignored
//! while the wait goes on. Never a peer.
//!
//! Each connection's first message is read on a short-lived thread under the hello deadline, so
//! a silent stray holds up nothing; at most [`MAX_READERS`] such reads run at once, and a
//! connection past that is closed unread.

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::msg::PREFIX;
use crate::pairtest::edge::PairTest;
use crate::pairtest::exchange::{ExchangeError, Session};
use crate::pairtest::output::PairResult;
use crate::pairtest::wire::{Join, Message};
use crate::pairtest::Settings;

/// First messages read at once; scanners opening hundreds of connections get the rest closed.
pub const MAX_READERS: usize = 32;

/// Whom the listener serves.
pub struct Listen<'a> {
    pub job: &'a str,
    pub predecessor: u32,
    /// Deadline of each connection's first message.
    pub hello: Duration,
    /// The most this pod answers its predecessor's test with (its own pair test settings).
    pub test: &'a Settings,
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

type First = (Session, Result<Message, ExchangeError>);

fn read_first(stream: std::net::TcpStream, addr: String, hello: Duration, tx: Sender<First>, busy: Arc<AtomicUsize>) {
    std::thread::spawn(move || {
        let mut s = Session::new(stream, addr, Instant::now() + hello);
        let first = s.recv();
        let _ = tx.send((s, first));
        busy.fetch_sub(1, Ordering::SeqCst);
    });
}

fn stray(served: &mut Served, what: &str) {
    served.strays += 1;
    eprintln!("{PREFIX} gate: ignored a stray connection: {what}");
}

/// Serves until `stop` is set or `until` passes.
pub fn serve(l: &TcpListener, opts: Listen<'_>, fabric: &dyn PairTest, until: Instant) -> Served {
    let (tx, rx): (Sender<First>, Receiver<First>) = mpsc::channel();
    let busy = Arc::new(AtomicUsize::new(0));
    // Every connection this port took, to be shut when the gate ends: a stray still being read
    // (silent until its hello deadline) must not stay open beside the command.
    let mut accepted: Vec<std::net::TcpStream> = Vec::new();
    let mut desk = Desk {
        job: opts.job,
        predecessor: opts.predecessor,
        joins: opts.joins,
        fabric,
        test: opts.test,
        served: Served::default(),
    };
    while !opts.stop.load(Ordering::SeqCst) && Instant::now() < until {
        let mut idle = true;
        match l.accept() {
            Ok((stream, addr)) => {
                idle = false;
                if let Ok(c) = stream.try_clone() {
                    accepted.push(c);
                }
                if busy.load(Ordering::SeqCst) >= MAX_READERS || stream.set_nonblocking(false).is_err() {
                    stray(
                        &mut desk.served,
                        &format!("{addr}: closed unread, {MAX_READERS} connections already being read"),
                    );
                } else {
                    busy.fetch_add(1, Ordering::SeqCst);
                    read_first(stream, addr.to_string(), opts.hello, tx.clone(), Arc::clone(&busy));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => eprintln!("{PREFIX} gate: accepting on the gate port: {e}"),
        }
        if let Ok((s, first)) = rx.try_recv() {
            idle = false;
            desk.dispatch(s, first);
        }
        if idle {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    for c in accepted {
        let _ = c.shutdown(std::net::Shutdown::Both);
    }
    // The readers see their connection end at once; give them a moment to drop it.
    let end = Instant::now() + Duration::from_millis(500);
    while busy.load(Ordering::SeqCst) > 0 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(2));
    }
    desk.served
}

/// Where each connection's first message is sorted: a join, the predecessor, or a stray.
struct Desk<'a> {
    job: &'a str,
    predecessor: u32,
    joins: Option<Sender<(Session, Join)>>,
    fabric: &'a dyn PairTest,
    test: &'a Settings,
    served: Served,
}

impl Desk<'_> {
    fn dispatch(&mut self, s: Session, first: Result<Message, ExchangeError>) {
        let Desk { job, predecessor, joins, fabric, test, served } = self;
        let (job, predecessor, fabric, test) = (*job, *predecessor, *fabric, *test);
        let peer = s.peer.clone();
        match first {
            Ok(Message::Join(j)) => match joins {
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
            Ok(Message::Hello(h)) => {
                let ours = h.gate.as_ref().is_some_and(|g| g.job == job && g.rank == predecessor);
                if ours && served.pairs.is_none() {
                    served.pairs = Some(fabric.answer(s, &h, test));
                    if let Some(Err(e)) = &served.pairs {
                        eprintln!("{PREFIX} gate: serving rank {predecessor}'s pair test: {e}");
                    }
                    return;
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
            Ok(other) => {
                let why = format!("sent a {} message first", other.name());
                stray(served, &format!("{peer}: {why}"));
                s.refuse(&why);
            }
            Err(e) => {
                stray(served, &e.to_string());
                if !matches!(e, ExchangeError::Closed { .. } | ExchangeError::Refused { .. }) {
                    s.refuse(&e.to_string());
                }
            }
        }
    }
}

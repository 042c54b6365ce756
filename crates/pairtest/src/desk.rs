//! A listener at work under its [`Policy`](super::door::Policy) ([`Desk`]), and the serving of
//! hellos ping and the agents' ring share ([`serve`]). It must never keep a stray's socket past its
//! judgement, hold more than `readers` unjudged connections, start a reader for a source out of its
//! rate, or print a peer's text.

use std::collections::BTreeMap;
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::door::{Policy, SILENT};
use super::exchange::{self, ExchangeError, Session};
use super::ledger::{Ledger, Source};
use super::wire::{Hello, Message, Protocol};

/// What one accepted connection came to, or what is due to be said.
pub enum Arrival<P = Message> {
    /// Its first message, valid; the connection is the caller's now.
    First(Session, P),
    /// A stray, already closed: what happened, and whether to say it (else counted).
    Stray { error: ExchangeError, said: bool },
    /// The strays of a log window not said one by one, as one line ([`ExchangeError::Counted`]).
    Counted(ExchangeError),
}

type Read<P> = (u64, Source, Session, Result<P, ExchangeError>);

/// One connection in its first read: a copy to shut it, its peer and source, since when.
struct Reader {
    stream: TcpStream,
    peer: String,
    source: Source,
    since: Instant,
}

/// A listener under its policy: accepts, reads first messages, hands them out one at a time.
pub struct Desk<'l, P = Message> {
    l: &'l TcpListener,
    policy: Policy,
    ledger: Ledger,
    tx: Sender<Read<P>>,
    rx: Receiver<Read<P>>,
    /// The connections in their first read, to be shut when the desk closes.
    reading: Arc<Mutex<BTreeMap<u64, Reader>>>,
    next_id: u64,
    pending: Vec<Arrival<P>>,
}

fn would_block(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted)
}

/// Closes a stray at once: both directions, so a client waiting for our close sees EOF now.
fn close(s: &TcpStream) {
    let _ = s.shutdown(Shutdown::Both);
}

impl<P> Desk<'_, P> {
    /// Connections in their first read now.
    pub(crate) fn reading(&self) -> usize {
        self.reading.lock().map_or(0, |r| r.len())
    }
}

impl<'l, P: Protocol + Send + 'static> Desk<'l, P> {
    /// A desk whose sources are counted in `ledger`, shared with the front end.
    pub fn with_ledger(l: &'l TcpListener, policy: Policy, ledger: Ledger) -> Desk<'l, P> {
        let (tx, rx) = mpsc::channel();
        Desk { l, policy, ledger, tx, rx, reading: Arc::default(), next_id: 0, pending: Vec::new() }
    }

    /// A stray closed unread, handed out and counted.
    fn unread(&mut self, stream: Option<&TcpStream>, peer: SocketAddr, why: String) {
        stream.into_iter().for_each(close);
        self.stray(peer.to_string(), Source::of(peer.ip()), why);
    }

    fn stray(&mut self, peer: String, source: Source, why: String) {
        let said = self.ledger.count(source, &why, false);
        self.pending.push(Arrival::Stray { error: ExchangeError::Unread { peer, why }, said });
    }

    fn admit(&mut self, stream: TcpStream, addr: SocketAddr) {
        // A dual-stack listener sees IPv4 peers as IPv4-mapped IPv6 addresses: named as IPv4.
        let addr = SocketAddr::new(addr.ip().to_canonical(), addr.port());
        if let Some(why) = self.policy.allow.refusal(addr.ip()) {
            return self.unread(Some(&stream), addr, why);
        }
        if stream.set_nonblocking(false).is_err() {
            return self.unread(Some(&stream), addr, "cannot read it (socket mode)".to_owned());
        }
        self.read(stream, addr);
    }

    /// Reads the next message of `s` as a first message, under the same policy (the gate's join).
    pub fn again(&mut self, s: Session) {
        match s.addrs() {
            Some((peer, _)) => self.read(s.into_stream(), peer),
            None => s.close(),
        }
    }

    /// Closes the oldest first read (of `source`, or of any) silent for [`SILENT`]; whether one was.
    fn evict(&mut self, source: Option<Source>) -> bool {
        let oldest = self.reading.lock().ok().and_then(|mut r| {
            let id = r
                .iter()
                .filter(|(_, x)| source.is_none_or(|s| x.source == s))
                .min_by_key(|(id, _)| **id)
                .filter(|(_, x)| x.since.elapsed() >= SILENT)
                .map(|(id, _)| *id)?;
            r.remove(&id)
        });
        let Some(x) = oldest else { return false };
        close(&x.stream);
        self.stray(x.peer, x.source, format!("silent for {} ms while newer connections waited", SILENT.as_millis()));
        true
    }

    /// One connection's first message read on a thread of its own, if the policy allows it.
    fn read(&mut self, stream: TcpStream, addr: SocketAddr) {
        let source = Source::of(addr.ip());
        let mine = self.reading.lock().map_or(0, |r| r.values().filter(|x| x.source == source).count());
        // One source's share: its own oldest silent read gives way, else this one is closed.
        if mine >= self.policy.per_source && !self.evict(Some(source)) {
            let why = format!("{mine} connections from {source} already in their first read");
            return self.unread(Some(&stream), addr, why);
        }
        // Its rate: no thread for a source that has spent its reads (a reconnecting flood).
        if !self.ledger.take(source) {
            let why = format!(
                "more than {} first reads from {source} at once and {} a second past them",
                self.policy.burst, self.policy.rate
            );
            return self.unread(Some(&stream), addr, why);
        }
        // The whole: the oldest connection gives way if it has been silent for a while (closed
        // now; its reader ends), else this one is closed unread (its token given back).
        if self.reading() >= self.policy.readers && !self.evict(None) {
            self.ledger.give_back(source);
            let why = format!("{} connections already in their first read", self.policy.readers);
            return self.unread(Some(&stream), addr, why);
        }
        let id = self.next_id;
        self.next_id += 1;
        if let (Ok(copy), Ok(mut r)) = (stream.try_clone(), self.reading.lock()) {
            r.insert(id, Reader { stream: copy, peer: addr.to_string(), source, since: Instant::now() });
        }
        let (tx, reading, hello) = (self.tx.clone(), Arc::clone(&self.reading), self.policy.hello);
        let spawned = std::thread::Builder::new().name("first-read".into()).spawn(move || {
            let mut s = Session::new(stream, addr.to_string(), Instant::now() + hello);
            let first = s.recv_as::<P>();
            // Gone from the map: evicted (already reported) or the desk closed; just close. The
            // result is sent before the lock is let go, so that a desk that sees no first read
            // under way finds every finished one's result in its channel (see `next`).
            let mut map = reading.lock();
            if map.as_mut().is_ok_and(|r| r.remove(&id).is_some()) {
                let _ = tx.send((id, source, s, first));
            } else {
                drop(map);
                s.close();
            }
        });
        if spawned.is_err() {
            if let Some(x) = self.reading.lock().ok().and_then(|mut r| r.remove(&id)) {
                close(&x.stream);
            }
            self.unread(None, addr, "no thread to read it".to_owned());
        }
    }

    fn judge(&mut self, (_, source, s, first): Read<P>) -> Arrival<P> {
        match first {
            Ok(m) => {
                // A valid first message: its source's share comes back.
                self.ledger.give_back(source);
                Arrival::First(s, m)
            }
            Err(e) => {
                match e {
                    ExchangeError::Closed { .. } | ExchangeError::Refused { .. } => s.close(),
                    _ => s.refuse(&e.to_string()),
                }
                let said = self.ledger.count(source, &e.to_string(), false);
                Arrival::Stray { error: e, said }
            }
        }
    }

    /// The count lines due: at a window's end, or all of them now (`now`: the listener closes).
    pub fn counted(&mut self, now: bool) -> Vec<ExchangeError> {
        self.ledger.due(now)
    }

    /// The next arrival, waiting until `until` (`None`: for ever) or `stop`.
    pub fn next(&mut self, until: Option<Instant>, stop: &AtomicBool) -> Option<Arrival<P>> {
        loop {
            if let Some(a) = self.pending.pop() {
                return Some(a);
            }
            if let Ok(read) = self.rx.try_recv() {
                return Some(self.judge(read));
            }
            let due = self.ledger.due(false);
            if !due.is_empty() {
                self.pending.extend(due.into_iter().rev().map(Arrival::Counted));
                continue;
            }
            if stop.load(Ordering::SeqCst) || until.is_some_and(|u| Instant::now() >= u) {
                return None;
            }
            // Nothing in flight or to say, no end to wait for: sleep in the kernel until a peer.
            let idle = until.is_none() && self.reading() == 0 && !self.ledger.pending();
            if idle {
                // A first read that ended between the look at the channel above and the count
                // has sent its result already: take it rather than block in accept with it
                // waiting (regression: a listener hung under qemu-user with a peer served).
                if let Ok(read) = self.rx.try_recv() {
                    return Some(self.judge(read));
                }
            }
            if idle && self.l.set_nonblocking(false).is_ok() {
                let got = self.l.accept();
                let _ = self.l.set_nonblocking(true);
                if let Ok((s, a)) = got {
                    self.admit(s, a);
                }
                continue;
            }
            match self.l.accept() {
                Ok((s, a)) => self.admit(s, a),
                // Short while first reads are under way, longer when idle.
                Err(e) if would_block(&e) => {
                    let nap = if self.reading() > 0 { Duration::from_millis(2) } else { Duration::from_millis(25) };
                    let nap = until.map_or(nap, |u| nap.min(u.saturating_duration_since(Instant::now())));
                    exchange::wait_readable(self.l.as_fd(), nap);
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
}

impl<P> Drop for Desk<'_, P> {
    fn drop(&mut self) {
        if let Ok(r) = self.reading.lock() {
            r.values().for_each(|x| close(&x.stream));
        }
        // The readers see their connection end at once; give them a moment to drop it.
        let end = Instant::now() + Duration::from_millis(500);
        while self.reading() > 0 && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(2));
        }
        while let Ok((_, _, s, _)) = self.rx.try_recv() {
            s.close();
        }
    }
}

/// Accepts peers under `policy` and hands each valid hello to `on_peer`, one at a time. Strays
/// and refused hellos go to `on_error` (bounded per source and window) and the wait goes on; a
/// peer failing after its hello ends the serving unless `keep`. Returns the peers completed.
pub fn serve(
    l: &TcpListener,
    policy: &Policy,
    mut on_peer: impl FnMut(Session, Hello) -> Result<(), ExchangeError>,
    mut on_error: impl FnMut(&ExchangeError),
) -> Result<usize, ExchangeError> {
    let start = Instant::now();
    let addr = l.local_addr().map_or_else(|_| "the listener".to_owned(), |a| a.to_string());
    let first_until = policy.wait.map(|w| start + w);
    let (mut seen, mut served, mut strays) = (0usize, 0usize, 0usize);
    let mut desk: Desk<'_, Message> = Desk::with_ledger(l, policy.clone(), Ledger::of(policy));
    let never = AtomicBool::new(false);
    let result = loop {
        // With `keep`, only the first peer is waited for; without it, strays do not end the wait.
        let until = if policy.keep && seen > 0 { None } else { first_until };
        let Some(arrival) = desk.next(until, &never) else {
            break Err(ExchangeError::NoPeer { addr, waited_ms: start.elapsed().as_millis(), strays });
        };
        // Our refusal of a peer, said or counted against its source as a stray is, then told.
        let refuse = |desk: &Desk<'_, Message>, s: Session, e: ExchangeError, tell: &str| {
            let said = s.addrs().is_none_or(|(ip, _)| desk.ledger.refused(ip.ip(), &e.to_string()));
            s.refuse(tell);
            Err((false, e, said))
        };
        let outcome = match arrival {
            Arrival::Counted(e) => {
                on_error(&e);
                continue;
            }
            Arrival::First(session, Message::Hello(hello)) => match policy.refusal(&hello) {
                Some(why) => {
                    let e = ExchangeError::NotServed { peer: session.peer.clone(), why: why.clone() };
                    refuse(&desk, session, e, &why)
                }
                None => on_peer(session, hello).map_err(|e| (true, e, true)),
            },
            Arrival::First(session, m) => {
                let e = session.unexpected("hello", m.name());
                let tell = e.to_string();
                refuse(&desk, session, e, &tell)
            }
            Arrival::Stray { error, said } => Err((false, error, said)),
        };
        seen += 1;
        let at_max = policy.max_peers.is_some_and(|m| seen >= m);
        match outcome {
            Ok(()) => served += 1,
            Err((valid, e, said)) => {
                if said {
                    on_error(&e);
                }
                strays += usize::from(!valid);
                if (valid && !policy.keep) || (at_max && served == 0) {
                    break Err(e);
                }
            }
        }
        if (!policy.keep && served > 0) || at_max {
            break Ok(served);
        }
    };
    // The counts not yet said, said as the serving ends (whichever way it does).
    desk.counted(true).iter().for_each(&mut on_error);
    result
}

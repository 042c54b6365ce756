//! The one accept policy of every listener of the pair test (`ping --listen`, `ping --ring`, the
//! gate's port, the node agents' ring), in one type, [`Policy`]: who may connect, how many
//! connections are read at once, how long each may take for its first message, how long a peer
//! is waited for, and the most a peer's test may ask; and the serving of hellos under it
//! ([`serve`]).
//!
//! - A connection from an address the listener does not admit is closed at once, unread.
//! - Each admitted connection's first message is read on a short-lived thread under the hello
//!   deadline, so a silent one holds up nothing; at most [`Policy::readers`] such reads run at
//!   once: a new connection past that closes the oldest one if it has been silent for
//!   [`SILENT`] (a scanner holding connections open cannot keep a real peer out: its first
//!   message comes at once), else the new one is closed unread (a burst of real peers: each
//!   retries).
//! - A connection judged a stray (EOF, garbage, a refusal, a wrong first message) is closed as
//!   soon as it is judged: nothing keeps a copy of it. The only sockets held besides the
//!   caller's are those in their first read (at most `readers`), shut when the desk closes.
//! - A hello asking for more than the listener's own test ([`Policy::answer`]) is clamped to it
//!   (ping, the gate: both ends then run the smaller), or refused ([`Over::Refuse`], the agents'
//!   ring); a test tagged for a job is refused where the listener serves plain tests only.
//!
//! It must never keep a stray's socket open past its judgement, never hold more than `readers`
//! unjudged connections, and never print a peer's text (the caller gets it as a value).

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::clean;
use super::exchange::{self, ExchangeError, Session};
use super::settings::Settings;
use super::wire::{Hello, Message, Protocol};

/// First messages read at once by default: scanners opening hundreds of connections get the
/// rest closed unread.
pub(crate) const READERS: usize = 32;
/// How long a connection in its first read must have been silent before a newer one may close it.
pub(crate) const SILENT: Duration = Duration::from_millis(250);
/// The most entries an allow-list takes, and its longest spelling.
pub const MAX_NETS: usize = 64;
pub(crate) const MAX_ALLOW_LEN: usize = 4096;

/// An IPv4 or IPv6 network (`10.0.0.0/8`, `fd00::/8`, or one address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Net {
    pub addr: IpAddr,
    pub prefix: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllowError {
    #[error("{0:?} is not an IPv4 or IPv6 address, or ADDR/PREFIX")]
    Net(String),
    #[error("prefix /{prefix} is longer than the {bits} bits of {addr}")]
    Prefix { addr: String, prefix: u32, bits: u32 },
    #[error("more than {MAX_NETS} networks, or longer than {MAX_ALLOW_LEN} bytes")]
    TooLong,
    #[error("an empty list admits no one: leave it unset to admit anyone")]
    Empty,
}

impl Net {
    fn bits(a: IpAddr) -> u32 {
        if a.is_ipv4() {
            32
        } else {
            128
        }
    }

    fn as_u128(a: IpAddr) -> u128 {
        match a {
            IpAddr::V4(v) => u128::from(u32::from(v)),
            IpAddr::V6(v) => u128::from(v),
        }
    }

    /// `ADDR` or `ADDR/PREFIX`.
    pub fn parse(spec: &str) -> Result<Net, AllowError> {
        let bad = || AllowError::Net(clean::bounded(spec, 64));
        let (a, p) = match spec.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (spec, None),
        };
        let addr: IpAddr = a.trim().parse().map_err(|_| bad())?;
        let bits = Net::bits(addr);
        let prefix = match p {
            None => bits,
            Some(p) => p.trim().parse::<u32>().map_err(|_| bad())?,
        };
        if prefix > bits {
            return Err(AllowError::Prefix { addr: addr.to_string(), prefix, bits });
        }
        Ok(Net { addr, prefix: prefix as u8 })
    }

    /// Whether `ip` is in this network (an IPv4-mapped IPv6 address counts as its IPv4 one).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        let net = self.addr.to_canonical();
        if ip.is_ipv4() != net.is_ipv4() {
            return false;
        }
        let bits = Net::bits(net);
        let prefix = u32::from(self.prefix).min(bits);
        if prefix == 0 {
            return true;
        }
        let shift = bits - prefix;
        (Net::as_u128(ip) >> shift) == (Net::as_u128(net) >> shift)
    }
}

/// `CIDR,CIDR,...` (`--allow`, `NCCL_WRAP_PING_ALLOW`).
pub fn parse_allow(spec: &str) -> Result<Vec<Net>, AllowError> {
    if spec.len() > MAX_ALLOW_LEN {
        return Err(AllowError::TooLong);
    }
    let nets: Vec<Net> =
        spec.split(',').map(str::trim).filter(|s| !s.is_empty()).map(Net::parse).collect::<Result<_, _>>()?;
    if nets.len() > MAX_NETS {
        return Err(AllowError::TooLong);
    }
    if nets.is_empty() {
        return Err(AllowError::Empty);
    }
    Ok(nets)
}

/// Who may connect.
#[derive(Debug, Clone, Default)]
pub enum Allow {
    /// Anyone who reaches the port (the gate: a join proves itself by the job's secret).
    #[default]
    Anyone,
    /// These networks (`ping --listen --allow`).
    Nets(Vec<Net>),
    /// These addresses, renewed by the caller (the ring: the last resolved peers).
    Peers(Arc<Mutex<Vec<IpAddr>>>),
}

impl Allow {
    /// Why `ip` is not admitted, or `None`.
    pub fn refusal(&self, ip: IpAddr) -> Option<String> {
        let ip = ip.to_canonical();
        match self {
            Allow::Anyone => None,
            Allow::Nets(nets) => (!nets.iter().any(|n| n.contains(ip))).then(|| {
                let list: Vec<String> = nets.iter().take(4).map(|n| format!("{}/{}", n.addr, n.prefix)).collect();
                format!(
                    "{ip} is not in the allowed networks ({}{})",
                    list.join(", "),
                    if nets.len() > 4 { ", ..." } else { "" }
                )
            }),
            Allow::Peers(peers) => {
                let peers = peers.lock().map(|p| p.clone()).unwrap_or_default();
                (!peers.iter().any(|p| p.to_canonical() == ip)).then(|| {
                    let list: Vec<String> = peers.iter().take(4).map(ToString::to_string).collect();
                    let list = if list.is_empty() { "none yet".to_owned() } else { list.join(", ") };
                    format!("{ip} is not among the peers (the last resolved list: {list})")
                })
            }
        }
    }
}

/// What a listener does with a hello that asks for more than its own test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Over {
    /// Run the listener's own sizes, said on stderr (both ends run the smaller).
    Clamp,
    /// Refuse the test, naming the listener so (`"an agent"`: "an agent answers at most ...").
    Refuse(&'static str),
}

/// Whether a test tagged for a job (a gate's pair test) is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tags {
    /// Served; the front end judges the tag (the gate: its predecessor only, with the secret).
    Serve,
    /// Refused with this reason (the agents' ring answers plain tests only).
    Refuse(&'static str),
}

/// A listener's policy, the one of every listener of the pair test.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Who may connect.
    pub allow: Allow,
    /// Connections in their first read at once; past it, closed unread.
    pub readers: usize,
    /// Deadline of each connection's first message, from its acceptance.
    pub hello: Duration,
    /// How long to wait for the first valid peer (`None`: for ever).
    pub wait: Option<Duration>,
    /// Serve peer after peer (otherwise one valid peer).
    pub keep: bool,
    /// Stop after this many connections (tests; `None` in the binary).
    pub max_peers: Option<usize>,
    /// The most a peer's test may ask: the listener's own test (message size per pair, round
    /// trips, bandwidth run; its phase deadline is the listener's).
    pub answer: Settings,
    /// A hello asking for more than `answer`.
    pub over: Over,
    /// A hello tagged for a job.
    pub tags: Tags,
}

impl Policy {
    /// Anyone admitted by `allow`, each first message within `hello`, one peer served within
    /// `answer` (clamped to it), waited for for ever: the rest is set field by field.
    pub fn new(allow: Allow, hello: Duration, answer: Settings) -> Policy {
        Policy {
            allow,
            readers: READERS,
            hello,
            wait: None,
            keep: false,
            max_peers: None,
            answer,
            over: Over::Clamp,
            tags: Tags::Serve,
        }
    }

    /// Why a valid hello is not served, or `None`: a tag where plain tests only are served, or
    /// more than the listener's test where it refuses rather than clamps.
    pub fn refusal(&self, hello: &Hello) -> Option<String> {
        if let (Tags::Refuse(why), Some(_)) = (self.tags, &hello.gate) {
            return Some(why.to_owned());
        }
        let a = &self.answer;
        match self.over {
            Over::Refuse(who)
                if hello.bytes > a.bytes || hello.iters > a.iters || hello.duration_ms > a.duration_ms =>
            {
                Some(format!(
                    "asked for {} bytes x {} iterations ({} ms); {who} answers at most {} bytes x {}, {} ms",
                    hello.bytes, hello.iters, hello.duration_ms, a.bytes, a.iters, a.duration_ms
                ))
            }
            _ => None,
        }
    }
}

/// What one accepted connection came to.
pub enum Arrival<P = Message> {
    /// Its first message, valid; the connection is the caller's now.
    First(Session, P),
    /// A stray, already closed: what happened (peer text in it is printable: the wire cleans it).
    Stray(ExchangeError),
}

type Read<P> = (u64, Session, Result<P, ExchangeError>);

/// The connections in their first read: a copy to shut each, its peer, when it was accepted.
type Reading = Arc<Mutex<BTreeMap<u64, (TcpStream, String, Instant)>>>;

/// A listener under its door: accepts, reads first messages, hands them out one at a time.
pub struct Desk<'l, P = Message> {
    l: &'l TcpListener,
    door: Policy,
    tx: Sender<Read<P>>,
    rx: Receiver<Read<P>>,
    /// The connections in their first read, to be shut when the desk closes.
    reading: Reading,
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
    pub fn new(l: &'l TcpListener, door: Policy) -> Desk<'l, P> {
        let (tx, rx) = mpsc::channel();
        Desk { l, door, tx, rx, reading: Arc::default(), next_id: 0, pending: Vec::new() }
    }

    fn admit(&mut self, stream: TcpStream, addr: SocketAddr) {
        // A dual-stack listener sees IPv4 peers as IPv4-mapped IPv6 addresses: named as IPv4.
        let addr = SocketAddr::new(addr.ip().to_canonical(), addr.port());
        if let Some(why) = self.door.allow.refusal(addr.ip()) {
            close(&stream);
            self.pending.push(Arrival::Stray(ExchangeError::Unread { peer: addr.to_string(), why }));
            return;
        }
        if stream.set_nonblocking(false).is_err() {
            close(&stream);
            let why = "cannot read it (socket mode)".to_owned();
            self.pending.push(Arrival::Stray(ExchangeError::Unread { peer: addr.to_string(), why }));
            return;
        }
        self.read(stream, addr);
    }

    /// Reads the next message of `s` as a first message, under the same policy: a front end that
    /// answered a first message and waits for the next (the gate's challenge, then the join).
    pub fn again(&mut self, s: Session) {
        match s.addrs() {
            Some((peer, _)) => self.read(s.into_stream(), peer),
            None => s.close(),
        }
    }

    /// One connection's first message read on a thread of its own, under the hello deadline.
    fn read(&mut self, stream: TcpStream, addr: SocketAddr) {
        // Full: the oldest connection gives way if it has been silent for a while (closed now;
        // its reader ends), else this one is closed unread.
        if self.reading() >= self.door.readers {
            let oldest = self.reading.lock().ok().and_then(|mut r| {
                let silent = r.first_key_value().is_some_and(|(_, (_, _, since))| since.elapsed() >= SILENT);
                if silent {
                    r.pop_first()
                } else {
                    None
                }
            });
            match oldest {
                Some((_, (s, peer, _))) => {
                    close(&s);
                    let why = format!("silent for {} ms while newer connections waited", SILENT.as_millis());
                    self.pending.push(Arrival::Stray(ExchangeError::Unread { peer, why }));
                }
                None => {
                    close(&stream);
                    let why = format!("{} connections already in their first read", self.door.readers);
                    self.pending.push(Arrival::Stray(ExchangeError::Unread { peer: addr.to_string(), why }));
                    return;
                }
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        if let (Ok(copy), Ok(mut r)) = (stream.try_clone(), self.reading.lock()) {
            r.insert(id, (copy, addr.to_string(), Instant::now()));
        }
        let (tx, reading, hello) = (self.tx.clone(), Arc::clone(&self.reading), self.door.hello);
        let spawned = std::thread::Builder::new().name("first-read".into()).spawn(move || {
            let mut s = Session::new(stream, addr.to_string(), Instant::now() + hello);
            let first = s.recv_as::<P>();
            // Gone from the map: evicted (already reported) or the desk closed; just close. The
            // result is sent before the lock is let go, so that a desk that sees no first read
            // under way finds every finished one's result in its channel (see `next`).
            let mut map = reading.lock();
            let ours = map.as_mut().map(|r| r.remove(&id).is_some()).unwrap_or(false);
            if ours {
                let _ = tx.send((id, s, first));
                drop(map);
            } else {
                drop(map);
                s.close();
            }
        });
        if spawned.is_err() {
            if let Ok(mut r) = self.reading.lock() {
                if let Some((s, _, _)) = r.remove(&id) {
                    close(&s);
                }
            }
            let why = "no thread to read it".to_owned();
            self.pending.push(Arrival::Stray(ExchangeError::Unread { peer: addr.to_string(), why }));
        }
    }

    fn judge(&mut self, (_, s, first): Read<P>) -> Arrival<P> {
        match first {
            Ok(m) => Arrival::First(s, m),
            Err(e) => {
                if !matches!(e, ExchangeError::Closed { .. } | ExchangeError::Refused { .. }) {
                    s.refuse(&e.to_string());
                } else {
                    s.close();
                }
                Arrival::Stray(e)
            }
        }
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
            if stop.load(Ordering::SeqCst) || until.is_some_and(|u| Instant::now() >= u) {
                return None;
            }
            // Nothing in flight and no end to wait for: sleep in the kernel until a peer comes
            // (the node agent's listener lives as long as the agent: no polling for its life).
            let idle = until.is_none() && self.reading() == 0;
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
                // Until a peer comes: short while first reads are under way (their results come
                // over the channel), longer when idle (`stop` and `until` are checked between).
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
            r.values().for_each(|(s, _, _)| close(s));
        }
        // The readers see their connection end at once; give them a moment to drop it.
        let end = Instant::now() + Duration::from_millis(500);
        while self.reading() > 0 && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(2));
        }
        while let Ok((_, s, _)) = self.rx.try_recv() {
            s.close();
        }
    }
}

/// Accepts peers under `policy` and hands each valid hello to `on_peer`, one at a time on this
/// thread. A connection that never sends a valid hello (a probe, a scanner, garbage, silence, an
/// address not admitted) is a stray: reported to `on_error`, closed as soon as it is judged, and
/// the wait goes on until it ends; so is a hello the policy refuses (told why). A peer that fails
/// after its hello is reported too; without `keep` it ends the serving, with `keep` the next peer
/// is served. Returns how many peers `on_peer` completed.
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
    let mut desk: Desk<'_, Message> = Desk::new(l, policy.clone());
    let never = AtomicBool::new(false);
    loop {
        // With `keep`, only the first peer is waited for; without it, strays do not end the wait.
        let until = if policy.keep && seen > 0 { None } else { first_until };
        let Some(arrival) = desk.next(until, &never) else {
            return Err(ExchangeError::NoPeer { addr, waited_ms: start.elapsed().as_millis(), strays });
        };
        seen += 1;
        let outcome = match arrival {
            Arrival::First(session, Message::Hello(hello)) => match policy.refusal(&hello) {
                Some(why) => {
                    let e = ExchangeError::NotServed { peer: session.peer.clone(), why: why.clone() };
                    session.refuse(&why);
                    Err((false, e))
                }
                None => on_peer(session, hello).map_err(|e| (true, e)),
            },
            Arrival::First(session, m) => {
                let e = ExchangeError::Unexpected { peer: session.peer.clone(), want: "hello", got: m.name() };
                session.refuse(&e.to_string());
                Err((false, e))
            }
            Arrival::Stray(e) => Err((false, e)),
        };
        let at_max = policy.max_peers.is_some_and(|m| seen >= m);
        match outcome {
            Ok(()) => served += 1,
            Err((valid, e)) => {
                on_error(&e);
                strays += usize::from(!valid);
                if (valid && !policy.keep) || (at_max && served == 0) {
                    return Err(e);
                }
            }
        }
        if (!policy.keep && served > 0) || at_max {
            return Ok(served);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test address")
    }

    #[test]
    fn networks_of_both_families_parse_and_match() {
        let nets = parse_allow("10.0.0.0/8, fd00::/8,192.168.1.7").expect("list");
        let allow = Allow::Nets(nets);
        for ok in ["10.1.2.3", "::ffff:10.9.9.9", "fd12::1", "192.168.1.7"] {
            assert_eq!(allow.refusal(ip(ok)), None, "{ok}");
        }
        for no in ["11.0.0.1", "192.168.1.8", "fe80::1", "::1"] {
            assert!(allow.refusal(ip(no)).is_some_and(|w| w.contains("not in the allowed networks")), "{no}");
        }
        assert!(Net::parse("0.0.0.0/0").expect("all").contains(ip("8.8.8.8")));
        assert!(!Net::parse("0.0.0.0/0").expect("all v4").contains(ip("fd00::1")));
        assert!(Net::parse("::/0").expect("all v6").contains(ip("fd00::1")));
    }

    #[test]
    fn bad_lists_are_named() {
        assert!(matches!(parse_allow("10.0.0.0/33"), Err(AllowError::Prefix { prefix: 33, bits: 32, .. })));
        assert!(matches!(parse_allow("fd00::/129"), Err(AllowError::Prefix { .. })));
        assert!(matches!(parse_allow("pod-network"), Err(AllowError::Net(_))));
        assert!(matches!(parse_allow("10.0.0.0/x"), Err(AllowError::Net(_))));
        assert!(matches!(parse_allow(" , "), Err(AllowError::Empty)));
        assert!(matches!(parse_allow(&"10.0.0.1,".repeat(65)), Err(AllowError::TooLong)));
        assert!(matches!(parse_allow(&"1".repeat(5000)), Err(AllowError::TooLong)));
        // A hostile spelling is printed escaped.
        let e = parse_allow("10.0.0.1\n\x1b[31m").expect_err("bad").to_string();
        assert!(!e.contains('\n') && !e.contains('\x1b'), "{e}");
    }

    #[test]
    fn the_ring_admits_its_peers_only() {
        let peers = Arc::new(Mutex::new(vec![ip("10.0.0.1")]));
        let allow = Allow::Peers(Arc::clone(&peers));
        assert_eq!(allow.refusal(ip("::ffff:10.0.0.1")), None);
        assert!(allow.refusal(ip("10.0.0.2")).is_some_and(|w| w.contains("not among the peers")));
        peers.lock().expect("lock").clear();
        assert!(allow.refusal(ip("10.0.0.1")).is_some_and(|w| w.contains("none yet")));
    }
}

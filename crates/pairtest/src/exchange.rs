//! The out-of-band exchange over TCP: the one dual-stack bind, connecting, and reading and writing
//! [`wire`](super::wire) frames. A peer is not trusted: no read blocks past its deadline, and an
//! oversized frame is refused before anything is allocated for it.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};

use nix::poll::{poll, PollFd, PollFlags};
use std::net::{Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, SocketAddrV6, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::wire::{self, Message, Protocol, WireError, HEADER_LEN};

#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    #[error("cannot listen on {addr}: {source}; is another nccl-wrap ping (or anything else) using the port?")]
    Bind { addr: String, source: io::Error },
    #[error("{addr} is not HOST:PORT or [ADDR]:PORT ({detail})")]
    Address { addr: String, detail: String },
    #[error("cannot resolve {host}: {source}; is the name right, and does this image resolve names (static binaries need the glibc NSS libraries)?")]
    Resolve { host: String, source: io::Error },
    #[error("no peer connected to {addr} within {waited_ms} ms{}: start `nccl-wrap ping HOST:PORT` on the other pod, or raise --wait-ms", note((*strays > 0).then(|| format!("{strays} stray connection(s) ignored, each named above"))))]
    NoPeer { addr: String, waited_ms: u128, strays: usize },
    #[error("cannot reach {addr} within {waited_ms} ms (last error: {source}): is `nccl-wrap ping --listen` running there, and is the port open between the pods?")]
    Connect { addr: String, waited_ms: u128, source: io::Error },
    #[error("{peer} sent nothing for {what} before the deadline ({got} of {want} bytes arrived)")]
    Timeout { peer: String, what: &'static str, got: usize, want: usize },
    #[error("{peer} closed the connection half way through {what} ({got} of {want} bytes)")]
    Closed { peer: String, what: &'static str, got: usize, want: usize },
    #[error("{peer} sent a bad message: {source}")]
    Wire { peer: String, source: WireError },
    #[error("{peer} sent a {got} message where a {want} message belongs")]
    Unexpected { peer: String, want: &'static str, got: &'static str },
    #[error("{peer} refused the run: {reason}")]
    Refused { peer: String, reason: String },
    #[error("talking to {peer}: {source}")]
    Io { peer: String, source: io::Error },
    #[error("{peer}: closed unread: {why}")]
    Unread { peer: String, why: String },
    #[error("{peer}: not served: {why}")]
    NotServed { peer: String, why: String },
    /// A peer's test this end could not answer (what the pair test said, as it said it).
    #[error("{why}")]
    Answer { peer: String, why: String },
    /// A log window's strays of one source not said one by one (`door`'s limits, `ledger`).
    #[error("{} connection(s) refused from {from} in the last {secs} s{}", nw_output::msg::thousands(*count), note((!last.is_empty()).then(|| format!("the last: {last}"))))]
    Counted { count: u64, from: String, secs: u64, last: String },
}

/// ` (TEXT)`, or nothing: a note at the end of an error's message.
fn note(text: Option<String>) -> String {
    text.map(|t| format!(" ({t})")).unwrap_or_default()
}

impl ExchangeError {
    /// The peer never came (as opposed to a peer that came and misbehaved).
    pub fn no_peer(&self) -> bool {
        matches!(self, ExchangeError::NoPeer { .. } | ExchangeError::Connect { .. } | ExchangeError::Resolve { .. })
    }
}

/// One connection with a peer and the deadline of the whole run with it.
#[derive(Debug)]
pub struct Session {
    stream: TcpStream,
    pub peer: String,
    pub(crate) deadline: Instant,
}

/// Waits until `fd` is readable (data, the end, or an error) or `timeout` passes: one poll(2).
pub(crate) fn wait_readable(fd: BorrowedFd<'_>, timeout: Duration) -> bool {
    let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    matches!(poll(&mut fds, ms), Ok(n) if n > 0)
}

fn timed_out(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

impl Session {
    pub fn new(stream: TcpStream, peer: String, deadline: Instant) -> Session {
        // Small frames, each answered at once: do not wait to coalesce them.
        let _ = stream.set_nodelay(true);
        Session { stream, peer, deadline }
    }

    /// The peer's address and ours (an IPv4 peer of a dual-stack listener as IPv4, not mapped).
    pub fn addrs(&self) -> Option<(SocketAddr, SocketAddr)> {
        let canonical = |a: SocketAddr| SocketAddr::new(a.ip().to_canonical(), a.port());
        Some((canonical(self.stream.peer_addr().ok()?), canonical(self.stream.local_addr().ok()?)))
    }

    fn remaining(&self) -> Option<Duration> {
        self.deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero())
    }

    fn read_full(&mut self, buf: &mut [u8], what: &'static str) -> Result<(), ExchangeError> {
        let mut got = 0;
        while got < buf.len() {
            let (peer, want) = (self.peer.clone(), buf.len());
            let Some(left) = self.remaining() else { return Err(ExchangeError::Timeout { peer, what, got, want }) };
            self.stream.set_read_timeout(Some(left)).map_err(|e| self.io(e))?;
            match self.stream.read(&mut buf[got..]) {
                Ok(n) if n > 0 => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted || timed_out(&e) => {}
                Err(e) if e.kind() != io::ErrorKind::ConnectionReset => return Err(self.io(e)),
                // The end of the stream, or a reset: the peer closed.
                _ => return Err(ExchangeError::Closed { peer, what, got, want }),
            }
        }
        Ok(())
    }

    fn io(&self, source: io::Error) -> ExchangeError {
        ExchangeError::Io { peer: self.peer.clone(), source }
    }

    /// Reads one message before the deadline (an oversized header refused before any read).
    pub fn recv(&mut self) -> Result<Message, ExchangeError> {
        self.recv_as()
    }

    /// [`Session::recv`] for protocol `P` (a front end's kinds beside the pair test's).
    pub fn recv_as<P: Protocol>(&mut self) -> Result<P, ExchangeError> {
        let mut head = [0u8; HEADER_LEN];
        self.read_full(&mut head, "a message header")?;
        let wire = |source| ExchangeError::Wire { peer: self.peer.clone(), source };
        let (kind, len) = wire::header_as::<P>(&head).map_err(wire)?;
        let mut payload = vec![0u8; len];
        self.read_full(&mut payload, "a message body")?;
        let m = P::decode_payload(kind, &payload)
            .map_err(|source| ExchangeError::Wire { peer: self.peer.clone(), source })?;
        match m.as_pair() {
            // Printable already: the wire cleans every peer text it decodes.
            Some(Message::Refuse(reason)) => {
                Err(ExchangeError::Refused { peer: self.peer.clone(), reason: reason.clone() })
            }
            _ => Ok(m),
        }
    }

    /// Reads one message and checks it is of the kind `want` names.
    pub fn expect<T>(
        &mut self,
        want: &'static str,
        pick: impl FnOnce(Message) -> Option<T>,
    ) -> Result<T, ExchangeError> {
        let m = self.recv()?;
        let got = m.name();
        pick(m).ok_or_else(|| self.unexpected(want, got))
    }

    /// A `got` message where a `want` message belongs.
    pub fn unexpected(&self, want: &'static str, got: &'static str) -> ExchangeError {
        ExchangeError::Unexpected { peer: self.peer.clone(), want, got }
    }

    /// Sends one message of protocol `P` (the pair test's, or a front end's) before the deadline.
    pub fn send<P: Protocol>(&mut self, msg: &P) -> Result<(), ExchangeError> {
        let bytes = wire::encode_as(msg).map_err(|source| ExchangeError::Wire { peer: "this end".into(), source })?;
        let timeout = |what| ExchangeError::Timeout { peer: self.peer.clone(), what, got: 0, want: bytes.len() };
        let Some(left) = self.remaining() else { return Err(timeout("sending")) };
        self.stream.set_write_timeout(Some(left)).map_err(|e| self.io(e))?;
        let sent = self.stream.write_all(&bytes);
        sent.map_err(|e| if timed_out(&e) { timeout("sending (the peer does not read)") } else { self.io(e) })
    }

    /// Whether anything (a message, the end of the connection) arrives within `timeout`.
    pub fn wait(&self, timeout: Duration) -> bool {
        wait_readable(self.stream.as_fd(), timeout)
    }

    /// Whether anything (a message, or the end of the connection) has arrived, without waiting.
    pub fn readable(&self) -> Result<bool, ExchangeError> {
        self.stream.set_nonblocking(true).map_err(|e| self.io(e))?;
        let mut b = [0u8; 1];
        let r = self.stream.peek(&mut b);
        self.stream.set_nonblocking(false).map_err(|e| self.io(e))?;
        // Data, the end or an error: anything but a peek that would have waited.
        Ok(!matches!(r, Err(e) if timed_out(&e) || e.kind() == io::ErrorKind::Interrupted))
    }

    /// Sets the deadline to `deadline`, earlier or later (the gate's phases each have their own).
    pub fn set_deadline(&mut self, deadline: Instant) {
        self.deadline = deadline;
    }

    /// The connection, for another first read (`Desk::again`).
    pub(crate) fn into_stream(self) -> TcpStream {
        self.stream
    }

    /// Closes the connection both ways at once (a peer waiting for our close sees EOF now).
    pub(crate) fn close(self) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }

    /// Best effort: tell the peer why, with a short bound, then close.
    pub fn refuse(mut self, reason: &str) {
        let mut text: String = reason.chars().take(wire::MAX_TEXT / 4).collect();
        text.truncate(wire::MAX_TEXT);
        self.deadline = Instant::now() + Duration::from_millis(200);
        let _ = self.send(&Message::Refuse(text));
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Every address of both families, at this port ([`bind_any`]).
    Any(u16),
    /// This address only.
    At(SocketAddr),
}

impl Place {
    pub fn bind(self) -> Result<TcpListener, ExchangeError> {
        match self {
            Place::Any(port) => bind_any(port),
            Place::At(addr) => bind(addr),
        }
    }
}

/// Splits `[ADDR:]PORT` for `--listen` (a bare port: every address of both families).
pub fn listen_addr(spec: &str) -> Result<Place, ExchangeError> {
    let bad = |detail: &str| ExchangeError::Address { addr: spec.to_owned(), detail: detail.to_owned() };
    if let Ok(port) = spec.parse::<u16>() {
        return Ok(Place::Any(port));
    }
    spec.parse::<SocketAddr>().map(Place::At).map_err(|_| bad("a port, or an IP address and a port"))
}

/// Splits `HOST:PORT` (`[v6]:PORT` too) and checks the host is a name or an address.
pub fn split_target(spec: &str) -> Result<(String, u16), ExchangeError> {
    let bad = |detail: &str| ExchangeError::Address { addr: spec.to_owned(), detail: detail.to_owned() };
    let (host, port) = spec.rsplit_once(':').ok_or_else(|| bad("no :PORT"))?;
    let port: u16 = port.parse().map_err(|_| bad("the port is not a number in 1..=65535"))?;
    if port == 0 {
        return Err(bad("port 0"));
    }
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    let ok = !host.is_empty()
        && host.len() <= 253
        && host.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.:".contains(&b))
        && !host.starts_with('-');
    if !ok {
        return Err(bad("the host is not a host name or an IP address"));
    }
    Ok((host.to_owned(), port))
}

/// Connects to `HOST:PORT`, retrying until `wait_until`; the session's deadline is then `run`.
pub fn connect(target: &str, wait_until: Instant, run: Duration) -> Result<Session, ExchangeError> {
    let (host, port) = split_target(target)?;
    let start = Instant::now();
    loop {
        let resolve = |source| ExchangeError::Resolve { host: host.clone(), source };
        let attempt = (host.as_str(), port).to_socket_addrs().map_err(resolve).and_then(|addrs| {
            let mut last = io::Error::new(io::ErrorKind::NotFound, "the name has no address");
            for a in addrs {
                let left = wait_until.saturating_duration_since(Instant::now()).max(Duration::from_millis(100));
                match TcpStream::connect_timeout(&a, left.min(Duration::from_secs(5))) {
                    Ok(s) => return Ok(s),
                    Err(e) => last = e,
                }
            }
            Err(ExchangeError::Connect {
                addr: target.to_owned(),
                waited_ms: start.elapsed().as_millis(),
                source: last,
            })
        });
        match attempt {
            Ok(stream) => return Ok(Session::new(stream, target.to_owned(), Instant::now() + run)),
            Err(e) if Instant::now() >= wait_until => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(200).min(wait_until - Instant::now())),
        }
    }
}

pub fn bind(addr: SocketAddr) -> Result<TcpListener, ExchangeError> {
    let l = TcpListener::bind(addr).map_err(|source| ExchangeError::Bind { addr: addr.to_string(), source })?;
    ready(l, addr)
}

/// The one listener on every address: `[::]` with IPV6_V6ONLY off, whatever
/// `net.ipv6.bindv6only` says; `0.0.0.0` where IPv6 is off, named in the error if that fails too.
pub fn bind_any(port: u16) -> Result<TcpListener, ExchangeError> {
    let any6 = SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, port, 0, 0);
    let dual = || -> io::Result<TcpListener> {
        use rustix::net::{sockopt, AddressFamily, SocketFlags, SocketType};
        let fd = rustix::net::socket_with(AddressFamily::INET6, SocketType::STREAM, SocketFlags::CLOEXEC, None)?;
        // What std's bind sets: a port in TIME_WAIT from the last run is free again.
        sockopt::set_socket_reuseaddr(&fd, true)?;
        sockopt::set_ipv6_v6only(&fd, false)?;
        rustix::net::bind_v6(&fd, &any6)?;
        rustix::net::listen(&fd, 128)?;
        Ok(TcpListener::from(fd))
    };
    match dual() {
        Ok(l) => ready(l, SocketAddr::V6(any6)),
        Err(e) => {
            log::debug!("[::]:{port}: {e}; listening on IPv4 only");
            bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)))
        }
    }
}

/// A bound listener made ready to serve: the kernel's longest accept queue, non-blocking.
fn ready(l: TcpListener, addr: SocketAddr) -> Result<TcpListener, ExchangeError> {
    // A job's pods join in one burst, which std's backlog of 128 overflows (SYNs dropped).
    if let Err(e) = nix::sys::socket::listen(&l, nix::sys::socket::Backlog::MAXCONN) {
        log::debug!("{addr}: listen backlog stays at 128: {e}");
    }
    l.set_nonblocking(true).map_err(|source| ExchangeError::Bind { addr: addr.to_string(), source })?;
    Ok(l)
}

#[cfg(test)]
#[path = "exchange_tests.rs"]
mod tests;

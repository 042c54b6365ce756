//! The one policy of every listener of the pair test ([`Policy`]): who may connect, how many reads
//! at once and from one source, how fast, how long, and the most a peer's test may ask. Pure. It
//! must never admit an address `allow` does not, nor let a hello decide more than the listener's
//! own test allows.

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::clean;
use super::settings::Settings;
use super::wire::Hello;

/// First messages read at once by default; past it, connections are closed unread.
pub(crate) const READERS: usize = 32;
/// First messages of one source read at once by default: half, the rest left to everyone else.
pub(crate) const PER_SOURCE: usize = READERS / 2;
/// First reads one source may start at once by default, and a second past them.
pub(crate) const BURST: u32 = 64;
pub(crate) const RATE: u32 = 32;
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
    /// `ADDR` or `ADDR/PREFIX`.
    pub fn parse(spec: &str) -> Result<Net, AllowError> {
        let bad = || AllowError::Net(clean::bounded(spec, 64));
        let (a, p) = spec.split_once('/').map_or((spec, None), |(a, p)| (a, Some(p)));
        let addr: IpAddr = a.trim().parse().map_err(|_| bad())?;
        let bits = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = p.map_or(Ok(bits), |p| p.trim().parse::<u32>()).map_err(|_| bad())?;
        if prefix > bits {
            return Err(AllowError::Prefix { addr: addr.to_string(), prefix, bits });
        }
        Ok(Net { addr, prefix: prefix as u8 })
    }

    /// Whether `ip` is in this network (an IPv4-mapped IPv6 address counts as its IPv4 one).
    pub fn contains(&self, ip: IpAddr) -> bool {
        nw_nccl::prefix::Prefix { addr: self.addr.to_canonical(), len: self.prefix }.contains(ip.to_canonical())
    }
}

/// `CIDR,CIDR,...` (`--allow`, `NCCL_WRAP_PING_ALLOW`).
pub fn parse_allow(spec: &str) -> Result<Vec<Net>, AllowError> {
    if spec.len() > MAX_ALLOW_LEN {
        return Err(AllowError::TooLong);
    }
    let nets: Vec<Net> =
        spec.split(',').map(str::trim).filter(|s| !s.is_empty()).map(Net::parse).collect::<Result<_, _>>()?;
    match nets.len() {
        0 => Err(AllowError::Empty),
        n if n > MAX_NETS => Err(AllowError::TooLong),
        _ => Ok(nets),
    }
}

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
                let more = if nets.len() > 4 { ", ..." } else { "" };
                format!("{ip} is not in the allowed networks ({}{more})", list.join(", "))
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
    pub allow: Allow,
    /// Connections in their first read at once; past it, closed unread.
    pub readers: usize,
    /// Of them, from one source at once.
    pub per_source: usize,
    /// First reads one source may start at once, and then a second.
    pub burst: u32,
    pub rate: u32,
    /// Deadline of each connection's first message, from its acceptance.
    pub hello: Duration,
    /// How long to wait for the first valid peer (`None`: for ever).
    pub wait: Option<Duration>,
    /// Serve peer after peer (otherwise one valid peer).
    pub keep: bool,
    /// Stop after this many connections (tests; `None` in the binary).
    pub max_peers: Option<usize>,
    /// The most a peer's test may ask: the listener's own test.
    pub answer: Settings,
    /// A hello asking for more than `answer`.
    pub over: Over,
    pub tags: Tags,
}

impl Policy {
    /// Anyone `allow` admits, first messages within `hello`, peers within `answer`, no end.
    pub fn new(allow: Allow, hello: Duration, answer: Settings) -> Policy {
        Policy {
            allow,
            readers: READERS,
            per_source: PER_SOURCE,
            burst: BURST,
            rate: RATE,
            hello,
            wait: None,
            keep: false,
            max_peers: None,
            answer,
            over: Over::Clamp,
            tags: Tags::Serve,
        }
    }

    /// Why a valid hello is not served (its tag, or asking more where `over` refuses), or `None`.
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

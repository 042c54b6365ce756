//! The agents' ring ping (`watch --ring SERVICE[:PORT]`): each agent tests its successor among a
//! headless Service's sorted addresses, and answers its predecessor for its whole life through the
//! pair test's one listener policy. Data from outside never panics: it is a cause in the results.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::doctor::{status_word, Status};
use nw_output::msg::PREFIX;
use nw_pairtest::desk;
use nw_pairtest::door::{Allow, Over, Policy, Tags};
use nw_pairtest::edge::PairTest;
use nw_pairtest::exchange::{ExchangeError, Session};
use nw_pairtest::output::PairResult;
use nw_pairtest::slow::{self, Figure};
use nw_pairtest::wire::Hello;
use nw_pairtest::Settings;

/// An agent's test: enough to prove the path and give each rail one bandwidth figure that a slow
/// link stands out in (`pairtest::slow`), not a benchmark.
pub const LIMITS: Settings = Settings {
    all_pairs: false,
    bytes: 64 * 1024,
    iters: 20,
    duration_ms: 200,
    timeout: Duration::from_secs(2),
    gate: None,
};

/// How long a connection may stay silent before its hello: the listener serves one at a time, so a
/// silent one (a probe) holds a predecessor's test up this long at most; peers say hello at once.
pub const HELLO: Duration = Duration::from_millis(500);

/// The largest test a peer may ask an agent to answer (a peer's knobs are its own, within these):
/// the listener's own settings bound every hello (a larger one is refused, named: [`policy`]).
pub const ANSWER: Settings = Settings { all_pairs: true, bytes: 1 << 20, iters: 1000, duration_ms: 500, ..LIMITS };

/// `--ring SERVICE[:PORT]` and `--ring-every`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub service: String,
    pub port: u16,
    /// A ring round every this many rounds (the first round is one).
    pub every: u64,
    /// Each phase's deadline of the pair test, both ways (`--ring-timeout-ms`).
    pub timeout: Duration,
}

/// Where this node stands among the peers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Position {
    /// Fewer than two distinct peers: no ring.
    Alone { peers: usize },
    /// None of this node's addresses is a peer (the Service selects other nodes, or this
    /// agent's own pod is not ready yet).
    NotListed { peers: usize },
    /// This node's address, its successor (tested by this node) and predecessor (testing it).
    Placed { me: IpAddr, next: IpAddr, prev: IpAddr, peers: usize },
}

/// The peers sorted (IPv4 before IPv6, then by address) and deduplicated; this node is the first
/// peer that is one of `own`; its successor the next one, the last wrapping to the first.
pub fn position(peers: &[IpAddr], own: &[IpAddr]) -> Position {
    let sorted: Vec<IpAddr> = peers.iter().map(|a| a.to_canonical()).collect::<BTreeSet<_>>().into_iter().collect();
    let n = sorted.len();
    if n < 2 {
        return Position::Alone { peers: n };
    }
    let own: Vec<IpAddr> = own.iter().map(|a| a.to_canonical()).collect();
    let Some(i) = sorted.iter().position(|p| own.contains(p)) else { return Position::NotListed { peers: n } };
    Position::Placed { me: sorted[i], next: sorted[(i + 1) % n], prev: sorted[(i + n - 1) % n], peers: n }
}

/// The headless Service's addresses through the system resolver (one A/AAAA answer per ready
/// endpoint), or why there are none.
pub fn resolve(service: &str) -> Result<Vec<IpAddr>, String> {
    (service, 0u16)
        .to_socket_addrs()
        .map(|it| it.map(|a| a.ip()).collect())
        .map_err(|e| format!("cannot resolve {service}: {e} (is the headless Service there, and this agent's DNS policy ClusterFirstWithHostNet?)"))
}

/// The addresses whose hellos are answered: the last resolved peers.
pub type Allowed = Arc<Mutex<Vec<IpAddr>>>;

/// The agent's listener policy: the last resolved peers only, each hello within [`HELLO`], plain
/// tests within [`ANSWER`]'s sizes, anything larger or tagged for a job refused, named.
pub fn policy(allowed: &Allowed, timeout: Duration, max_peers: Option<usize>) -> Policy {
    Policy {
        keep: true,
        max_peers,
        over: Over::Refuse("an agent"),
        tags: Tags::Refuse("a gate's pair test; this port is a node agent's ring"),
        ..Policy::new(Allow::Peers(Arc::clone(allowed)), HELLO, Settings { timeout, ..ANSWER })
    }
}

/// Answers peers on `l` one at a time until `max_peers` tests or for ever; a stray or a failed
/// peer is one stderr line.
pub fn serve(l: &TcpListener, fabric: &dyn PairTest, allowed: &Allowed, timeout: Duration, max_peers: Option<usize>) {
    let policy = policy(allowed, timeout, max_peers);
    // No deadline to wait for: a blocking accept sleeps in the kernel until a peer comes, where
    // a polling listener would cost the agent 100 wake-ups a second for its life.
    if let Err(e) = l.set_nonblocking(false) {
        eprintln!("{PREFIX} watch: ring: the listener polls every 10 ms (cannot make it blocking: {e})");
    }
    let on_peer = |s: Session, hello: Hello| -> Result<(), ExchangeError> {
        let peer = s.peer.clone();
        // A failed answer is reported here, not as the peer's refusal.
        if let Err(e) = fabric.answer(s, &hello, &policy.answer, &say_clamped) {
            eprintln!("{PREFIX} watch: ring: answering {peer} ({}): {e}", hello.host);
        }
        Ok(())
    };
    let on_error = |e: &ExchangeError| eprintln!("{PREFIX} watch: ring: ignored a connection: {e}");
    if let Err(e) = desk::serve(l, &policy, on_peer, on_error) {
        eprintln!("{PREFIX} watch: ring: the listener stopped: {e}");
    }
}

/// One line for what the agent's test cut of a peer's hello (its deadline), said before it answers.
fn say_clamped(peer: &str, clamped: &[String]) {
    eprintln!("{PREFIX} watch: ring: {peer} asked for more than this agent allows: {}", clamped.join(", "));
}

/// One pair of a ring round, as the files show it.
#[derive(Debug, Clone, PartialEq)]
pub struct Pair {
    pub device: String,
    pub port: Option<u8>,
    pub status: Status,
    /// ping's cause id where the pair did not pass.
    pub cause: Option<&'static str>,
    /// The cause's summary (stderr), where the test could not run or the pair is slow.
    pub summary: Option<String>,
    /// The measured bandwidth and the rated speed (the slower end's), kb/s.
    pub kbps: Option<u64>,
    pub rated_kbps: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// No test: no peers resolved, alone, or this node not among them.
    Untested { reason: &'static str, detail: String },
    /// Every pair (a test that could not run is one failed pair with the cause).
    Tested { next: IpAddr, pairs: Vec<Pair> },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub timestamp: f64,
    pub peers: usize,
    pub outcome: Outcome,
}

impl Report {
    /// `pass`, `warn`, `fail` (the worst pair), or `none` when nothing was tested.
    pub fn word(&self) -> &'static str {
        match &self.outcome {
            Outcome::Untested { .. } => "none",
            Outcome::Tested { pairs, .. } => pairs.iter().map(|p| p.status).max().map_or("fail", status_word),
        }
    }
    /// What a change of the ring's state is told by: the line without a summary's figures, so a
    /// lasting failure is one line, not one per ring round.
    pub fn key(&self) -> String {
        let mut quiet = self.clone();
        if let Outcome::Tested { pairs, .. } = &mut quiet.outcome {
            pairs.iter_mut().for_each(|p| p.summary = None);
        }
        quiet.line()
    }

    /// The line people read when the ring's state changes.
    pub fn line(&self) -> String {
        match &self.outcome {
            Outcome::Untested { detail, .. } => format!("ring: not tested: {detail}"),
            Outcome::Tested { next, pairs } => {
                let bad: Vec<String> = pairs
                    .iter()
                    .filter(|p| p.status != Status::Pass)
                    .map(|p| match (p.port, &p.summary) {
                        (Some(n), _) => format!("{}:{n} {}", p.device, p.cause.unwrap_or("?")),
                        (None, Some(why)) => format!("{}: {why}", p.cause.unwrap_or("?")),
                        (None, None) => p.cause.unwrap_or("?").to_string(),
                    })
                    .collect();
                let bad = if bad.is_empty() { String::new() } else { format!("; {}", bad.join(", ")) };
                format!("ring: {} towards {next} ({} pair(s) of {} peers){bad}", self.word(), pairs.len(), self.peers)
            }
        }
    }
}

/// What a ring round takes besides the fabric.
pub struct Round<'a> {
    pub config: &'a Config,
    pub resolve: &'a dyn Fn(&str) -> Result<Vec<IpAddr>, String>,
    /// This node's addresses, or why they cannot be read.
    pub own: Result<Vec<IpAddr>, String>,
    pub allowed: &'a Allowed,
    pub timestamp: f64,
}

/// One ring round: resolve, place this node, test the successor.
pub fn round(r: &Round, fabric: &dyn PairTest) -> Report {
    let untested =
        |peers, reason, detail| Report { timestamp: r.timestamp, peers, outcome: Outcome::Untested { reason, detail } };
    let peers = match (r.resolve)(&r.config.service) {
        Ok(p) => p,
        Err(e) => return untested(0, "resolve", e),
    };
    if let Ok(mut a) = r.allowed.lock() {
        *a = peers.clone();
    }
    let own = match &r.own {
        Ok(o) => o,
        Err(e) => return untested(0, "no-own-address", e.clone()),
    };
    match position(&peers, own) {
        Position::Alone { peers } => untested(
            peers,
            "alone",
            format!("{} resolves to {peers} address(es); a ring needs 2 or more", r.config.service),
        ),
        Position::NotListed { peers } => untested(
            peers,
            "not-listed",
            format!("none of this node's addresses is among the {peers} {} resolves to", r.config.service),
        ),
        Position::Placed { next, peers, .. } => {
            let target = SocketAddr::new(next, r.config.port).to_string();
            // The successor's agent listens for its whole life: no long wait for it.
            let limits = Settings { timeout: r.config.timeout, ..LIMITS };
            let pairs = match fabric.initiate(&target, &limits, Instant::now() + limits.timeout) {
                Ok(results) => judged(results.iter().map(pair).collect()),
                Err(c) => vec![Pair {
                    device: String::new(),
                    port: None,
                    status: Status::Fail,
                    cause: Some(c.id),
                    summary: Some(c.summary),
                    kbps: None,
                    rated_kbps: None,
                }],
            };
            Report { timestamp: r.timestamp, peers, outcome: Outcome::Tested { next, pairs } }
        }
    }
}

fn pair(r: &PairResult) -> Pair {
    let figure = r.figure();
    Pair {
        device: r.local.device.clone(),
        port: Some(r.local.port),
        status: r.status,
        cause: r.cause.as_ref().filter(|_| r.status != Status::Pass).map(|c| c.id),
        summary: None,
        kbps: figure.kbps,
        rated_kbps: figure.rated_kbps,
    }
}

/// The round's passing pairs judged against this node's rails' median and their rated speed
/// (`pairtest::slow`): a slow one warns, cause `slow-pair`. The fleet-wide comparison is the
/// shipped alert's.
pub fn judged(mut pairs: Vec<Pair>) -> Vec<Pair> {
    let figures: Vec<Figure> = pairs
        .iter()
        .map(|p| Figure { kbps: p.kbps.filter(|_| p.status == Status::Pass), rated_kbps: p.rated_kbps })
        .collect();
    let flagged = pairs.iter_mut().zip(slow::judge(&figures, slow::DEFAULT_PCT)).filter_map(|(p, s)| Some((p, s?)));
    for (p, s) in flagged {
        p.status = Status::Warn;
        p.cause = Some("slow-pair");
        p.summary = Some(s.summary("this node's rails'"));
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rail_far_below_its_siblings_warns_with_both_figures() {
        let p = |dev: &str, status, kbps| Pair {
            device: dev.into(),
            port: Some(1),
            status,
            cause: None,
            summary: None,
            kbps,
            rated_kbps: Some(400_000_000),
        };
        let pairs = judged(vec![
            p("mlx5_0", Status::Pass, Some(390_000_000)),
            p("mlx5_1", Status::Pass, Some(180_000_000)),
            p("mlx5_2", Status::Pass, Some(385_000_000)),
            p("mlx5_3", Status::Fail, None),
        ]);
        assert_eq!(
            pairs.iter().map(|p| p.status).collect::<Vec<_>>(),
            [Status::Pass, Status::Warn, Status::Pass, Status::Fail]
        );
        assert_eq!(pairs[1].cause, Some("slow-pair"));
        assert_eq!(
            pairs[1].summary.as_deref(),
            Some("180 Gb/s: 46 % of this node's rails' median 385 Gb/s, 45 % of its rated 400 Gb/s")
        );
        let r = Report { timestamp: 1.0, peers: 3, outcome: Outcome::Tested { next: ip("10.0.0.2"), pairs } };
        assert_eq!(r.word(), "fail");
        assert!(r.line().contains("mlx5_1:1 slow-pair"), "{}", r.line());
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test address")
    }

    #[test]
    fn peers_are_sorted_and_the_successor_wraps() {
        let peers = [ip("10.0.0.3"), ip("10.0.0.10"), ip("fd00::1"), ip("10.0.0.2"), ip("10.0.0.3")];
        assert_eq!(
            position(&peers, &[ip("10.0.0.3")]),
            Position::Placed { me: ip("10.0.0.3"), next: ip("10.0.0.10"), prev: ip("10.0.0.2"), peers: 4 }
        );
        assert_eq!(
            position(&peers, &[ip("192.168.1.1"), ip("fd00::1")]),
            Position::Placed { me: ip("fd00::1"), next: ip("10.0.0.2"), prev: ip("10.0.0.10"), peers: 4 }
        );
        // Two nodes test each other; an IPv4-mapped own address is the IPv4 peer.
        assert_eq!(
            position(&[ip("10.0.0.2"), ip("10.0.0.1")], &[ip("::ffff:10.0.0.1")]),
            Position::Placed { me: ip("10.0.0.1"), next: ip("10.0.0.2"), prev: ip("10.0.0.2"), peers: 2 }
        );
    }

    #[test]
    fn fewer_than_two_peers_or_self_missing_is_no_ring() {
        assert_eq!(position(&[], &[ip("10.0.0.1")]), Position::Alone { peers: 0 });
        assert_eq!(position(&[ip("10.0.0.1"), ip("10.0.0.1")], &[ip("10.0.0.1")]), Position::Alone { peers: 1 });
        assert_eq!(position(&[ip("10.0.0.1"), ip("10.0.0.2")], &[ip("10.0.0.9")]), Position::NotListed { peers: 2 });
        assert_eq!(position(&[ip("10.0.0.1"), ip("10.0.0.2")], &[]), Position::NotListed { peers: 2 });
    }

    fn hello(bytes: u32) -> Hello {
        Hello { host: "n".into(), ports: Vec::new(), all_pairs: false, bytes, iters: 20, duration_ms: 0, gate: None }
    }

    /// Why the agent's one listener policy does not serve this hello from `from`, or `None`.
    fn refusal(from: IpAddr, hello: &Hello, peers: &[IpAddr]) -> Option<String> {
        let p = policy(&Allowed::new(Mutex::new(peers.to_vec())), Duration::from_secs(2), None);
        p.allow.refusal(from).or_else(|| p.refusal(hello))
    }

    #[test]
    fn only_peers_small_plain_tests_are_answered() {
        let peers = [ip("10.0.0.1"), ip("10.0.0.2")];
        assert_eq!(refusal(ip("::ffff:10.0.0.2"), &hello(4096), &peers), None);
        assert!(refusal(ip("10.0.0.3"), &hello(4096), &peers).is_some_and(|w| w.contains("not among")));
        assert!(refusal(ip("10.0.0.1"), &hello(ANSWER.bytes + 1), &peers).is_some_and(|w| w.contains("at most")));
        assert!(refusal(ip("10.0.0.1"), &hello(4096), &[]).is_some_and(|w| w.contains("none yet")));
        let tagged =
            Hello { gate: Some(nw_pairtest::wire::Tag { job: "j".into(), rank: 1, mac: None }), ..hello(4096) };
        assert!(refusal(ip("10.0.0.1"), &tagged, &peers).is_some_and(|w| w.contains("a gate's pair test")));
    }

    fn report(outcome: Outcome) -> Report {
        Report { timestamp: 1_700_000_000.0, peers: 3, outcome }
    }

    #[test]
    fn a_ring_round_in_both_files_and_none_before_the_first() {
        use crate::health::{features, metrics, sample};
        let mut h = sample();
        let label = |h: &crate::health::Health, name: &str| {
            features::labels(h).into_iter().find(|(k, _)| k == &format!("{}/{name}", features::PREFIX)).map(|(_, v)| v)
        };
        assert_eq!(label(&h, "ring"), None, "no ring label without --ring");
        assert!(!metrics::render(&h, &metrics::Round::default()).contains("ring"));

        let pairs = vec![
            Pair {
                device: "mlx5_0".into(),
                port: Some(1),
                status: Status::Pass,
                cause: None,
                summary: None,
                kbps: Some(380_000_000),
                rated_kbps: Some(400_000_000),
            },
            Pair {
                device: "mlx5_1".into(),
                port: Some(1),
                status: Status::Fail,
                cause: Some("retry-exceeded"),
                summary: None,
                kbps: None,
                rated_kbps: None,
            },
        ];
        h.ring = Some(report(Outcome::Tested { next: ip("10.0.0.2"), pairs }));
        assert_eq!(label(&h, "ring").as_deref(), Some("fail"));
        assert_eq!(label(&h, "ring-cause").as_deref(), Some("retry-exceeded"));
        let (text, refused) = features::render(&h, "test", 0, None);
        assert!(refused.is_empty() && text.contains("/ring=fail\n"), "{text}");
        let m = metrics::render(&h, &metrics::Round::default());
        for want in [
            "# TYPE nccl_wrap_ring_pair_status gauge\n",
            "nccl_wrap_ring_pair_status{peer=\"10.0.0.2\",device=\"mlx5_0\",port=\"1\"} 0\n",
            "nccl_wrap_ring_pair_status{peer=\"10.0.0.2\",device=\"mlx5_1\",port=\"1\",cause=\"retry-exceeded\"} 2\n",
            "nccl_wrap_ring_tested 1\n",
            "nccl_wrap_ring_peers 3\n",
            "nccl_wrap_ring_last_run_timestamp_seconds 1700000000\n",
        ] {
            assert!(m.contains(want), "{want} missing from:\n{m}");
        }

        // A test that could not run: one failed pair without a device, its cause named.
        let cannot = vec![Pair {
            device: String::new(),
            port: None,
            status: Status::Fail,
            cause: Some("peer"),
            summary: Some("cannot reach [fd00::2]:18517 within 2001 ms".into()),
            kbps: None,
            rated_kbps: None,
        }];
        h.ring = Some(report(Outcome::Tested { next: ip("fd00::2"), pairs: cannot }));
        let r = h.ring.as_ref().expect("set");
        assert!(r.line().ends_with("; peer: cannot reach [fd00::2]:18517 within 2001 ms"), "{}", r.line());
        assert_eq!(r.key(), "ring: fail towards fd00::2 (1 pair(s) of 3 peers); peer", "no figures in the key");
        let m = metrics::render(&h, &metrics::Round::default());
        assert!(m.contains("nccl_wrap_ring_pair_status{peer=\"fd00::2\",cause=\"peer\"} 2\n"), "{m}");
        assert_eq!(label(&h, "ring-cause").as_deref(), Some("peer"));

        h.ring = Some(report(Outcome::Untested { reason: "alone", detail: "svc resolves to 1 address(es)".into() }));
        assert_eq!(label(&h, "ring").as_deref(), Some("none"));
        assert_eq!(label(&h, "ring-cause"), None);
        let m = metrics::render(&h, &metrics::Round::default());
        assert!(m.contains("nccl_wrap_ring_tested{reason=\"alone\"} 0\n") && !m.contains("ring_pair_status"), "{m}");
    }
}

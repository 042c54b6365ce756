//! The agents' ring (`nccl-wrap watch --ring`) on 127.0.0.1 and 127.0.0.2, each agent a pair of
//! threads of this test (its ring round, its listener) with a stand-in fabric: the pair test is a
//! hello exchange plus a result the test chooses, so that the ring's control path (resolve, place,
//! connect to the successor, serve the predecessor, ignore strays, bound a round by its deadline,
//! the files) is tested without RDMA. What is stand-in: the bytes over ibverbs only; the
//! listener, the peer checks, ping's exchange and the renderers are the real ones. Then the real
//! binary on a fixture node (no ibverbs there): `--ring` binds its port and reports an untested
//! ring in both files.

mod common;

use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use common::{fixture, output_within, DEADLINE};
use nccl_wrap::doctor::Status;
use nccl_wrap::health::ring::{self, Allowed, Config, Outcome, Report};
use nccl_wrap::pairtest::cause::Cause;
use nccl_wrap::pairtest::edge::{peer_cause, Clamped, PairTest};
use nccl_wrap::pairtest::exchange::{self, Session};
use nccl_wrap::pairtest::output::{self, PairResult};
use nccl_wrap::pairtest::session::PairRun;
use nccl_wrap::pairtest::wire::{Fault, Figures, Hello, LinkLayer, Message, PortInfo};
use nccl_wrap::pairtest::Settings;

fn port_info(last: u8) -> PortInfo {
    PortInfo {
        device: "mlx5_0".into(),
        port: 1,
        link_layer: LinkLayer::Ethernet,
        gid_index: Some(3),
        gid: Some(format!("0000:0000:0000:0000:0000:ffff:0a00:00{last:02x}")),
        gid_type: Some("RoCE v2".into()),
        lid: None,
        mtu: 4096,
        pkey: None,
        netdev: Some("eth1".into()),
        rate_kbps: None,
    }
}

/// A node's fabric: a hello exchange stands for the pair test, whose result the test picks.
struct StandIn {
    host: String,
    last: u8,
    /// The pair towards the successor fails with IBV_WC_RETRY_EXC_ERR.
    drops: bool,
}

fn hello(f: &StandIn, limits: &Settings) -> Hello {
    Hello {
        host: f.host.clone(),
        ports: vec![port_info(f.last)],
        all_pairs: limits.all_pairs,
        bytes: limits.bytes,
        iters: limits.iters,
        duration_ms: limits.duration_ms,
        gate: None,
    }
}

impl PairTest for StandIn {
    fn host(&self) -> String {
        self.host.clone()
    }
    fn ports(&self) -> Result<Vec<PortInfo>, Cause> {
        Ok(vec![port_info(self.last)])
    }
    fn initiate(&self, target: &str, limits: &Settings, wait_until: Instant) -> Result<Vec<PairResult>, Cause> {
        let mut s = exchange::connect(target, wait_until, limits.timeout).map_err(|e| peer_cause(&e))?;
        s.send(&Message::Hello(hello(self, limits))).map_err(|e| peer_cause(&e))?;
        let theirs = s
            .expect("hello", |m| if let Message::Hello(h) = m { Some(h) } else { None })
            .map_err(|e| peer_cause(&e))?;
        let fault = self.drops.then(|| Fault {
            step: "latency".into(),
            error: "IBV_WC_RETRY_EXC_ERR".into(),
            wc_status: Some(12),
            errno: None,
        });
        let run = PairRun {
            local: port_info(self.last),
            remote: theirs.ports[0].clone(),
            local_fault: fault,
            remote_fault: None,
            figures: Some(Figures { median_us: Some(5.0), p99_us: Some(7.0), gbps: Some(20.0) }),
        };
        Ok(vec![output::result(0, target, &run, output::Local::default())])
    }
    fn answer(
        &self,
        mut s: Session,
        theirs: &Hello,
        _ours: &Settings,
        _: Clamped<'_>,
    ) -> Result<Vec<PairResult>, String> {
        let limits = Settings { bytes: theirs.bytes, iters: theirs.iters, ..ring::LIMITS };
        s.send(&Message::Hello(hello(self, &limits))).map_err(|e| e.to_string())?;
        Ok(Vec::new())
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().expect("test address")
}

/// A port free on both loopback addresses the two agents use.
fn free_port() -> u16 {
    for _ in 0..50 {
        let p = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port");
        if TcpListener::bind(("127.0.0.2", p)).is_ok() {
            return p;
        }
    }
    panic!("no port free on both 127.0.0.1 and 127.0.0.2");
}

struct Node {
    addr: IpAddr,
    fabric: StandIn,
    allowed: Allowed,
}

fn node(addr: &str, last: u8) -> Node {
    Node {
        addr: ip(addr),
        fabric: StandIn { host: format!("node-{last}"), last, drops: false },
        allowed: Allowed::default(),
    }
}

/// Runs every node's ring round at once while each serves its count of `serves` connections;
/// each node's report.
fn ring_round(nodes: &[Node], peers: &[IpAddr], port: u16, serves: &[usize], strays: &[SocketAddr]) -> Vec<Report> {
    let config = Config { service: "nccl-wrap-ring.test".into(), port, every: 1, timeout: Duration::from_secs(2) };
    let resolve = |name: &str| -> Result<Vec<IpAddr>, String> {
        assert_eq!(name, "nccl-wrap-ring.test");
        Ok(peers.to_vec())
    };
    // Every node knows its peers before any test arrives (in the agent: the previous ring round).
    for n in nodes {
        *n.allowed.lock().expect("allowed") = peers.to_vec();
    }
    let listeners: Vec<TcpListener> =
        nodes.iter().map(|n| exchange::bind(SocketAddr::new(n.addr, port)).expect("bind")).collect();
    // A probe that sends garbage, and one that says nothing: neither may hold up the round.
    // Both are closed when this function returns.
    let mut held = Vec::new();
    for s in strays {
        let mut c = TcpStream::connect(s).expect("stray connects");
        let _ = c.write_all(b"GET / HTTP/1.0\r\n\r\n");
        held.push(c);
        held.push(TcpStream::connect(s).expect("silent stray connects"));
    }
    std::thread::scope(|s| {
        for ((n, l), count) in nodes.iter().zip(&listeners).zip(serves) {
            s.spawn(move || ring::serve(l, &n.fabric, &n.allowed, Duration::from_secs(2), Some(*count)));
        }
        let rounds: Vec<_> = nodes
            .iter()
            .map(|n| {
                let (config, resolve) = (&config, &resolve);
                s.spawn(move || {
                    let r = ring::Round {
                        config,
                        resolve,
                        own: Ok(vec![n.addr]),
                        allowed: &n.allowed,
                        timestamp: 1_700_000_000.0,
                    };
                    ring::round(&r, &n.fabric)
                })
            })
            .collect();
        rounds.into_iter().map(|h| h.join().expect("round thread")).collect()
    })
}

fn tested(r: &Report) -> (IpAddr, Vec<(Status, Option<&'static str>)>) {
    match &r.outcome {
        Outcome::Tested { next, pairs } => (*next, pairs.iter().map(|p| (p.status, p.cause)).collect()),
        other => panic!("not tested: {other:?}"),
    }
}

#[test]
fn two_agents_test_each_other() {
    let port = free_port();
    let nodes = [node("127.0.0.1", 1), node("127.0.0.2", 2)];
    let peers = [ip("127.0.0.2"), ip("127.0.0.1")];
    let reports = ring_round(&nodes, &peers, port, &[1, 1], &[]);
    assert_eq!(tested(&reports[0]), (ip("127.0.0.2"), vec![(Status::Pass, None)]));
    assert_eq!(tested(&reports[1]), (ip("127.0.0.1"), vec![(Status::Pass, None)]));
    assert!(reports.iter().all(|r| r.word() == "pass" && r.peers == 2), "{reports:?}");
}

#[test]
fn a_failed_pair_is_named_with_pings_cause_in_both_files() {
    let port = free_port();
    let mut nodes = [node("127.0.0.1", 1), node("127.0.0.2", 2)];
    nodes[1].fabric.drops = true;
    let peers = [ip("127.0.0.1"), ip("127.0.0.2")];
    let reports = ring_round(&nodes, &peers, port, &[1, 1], &[]);
    assert_eq!(tested(&reports[0]).1, vec![(Status::Pass, None)]);
    assert_eq!(tested(&reports[1]), (ip("127.0.0.1"), vec![(Status::Fail, Some("retry-exceeded"))]));
    assert_eq!(reports[1].word(), "fail");
    assert!(reports[1].line().contains("mlx5_0:1 retry-exceeded"), "{}", reports[1].line());
}

#[test]
fn strays_are_ignored_and_the_round_still_passes_within_its_deadline() {
    let port = free_port();
    let nodes = [node("127.0.0.1", 1), node("127.0.0.2", 2)];
    let peers = [ip("127.0.0.1"), ip("127.0.0.2")];
    let started = Instant::now();
    // Node 1's listener sees two strays first, then node 2's test: three connections.
    let stray_at = [SocketAddr::new(ip("127.0.0.1"), port)];
    let reports = ring_round(&nodes, &peers, port, &[3, 1], &stray_at);
    // The silent stray holds node 1's listener for the hello deadline; node 2's connect waits
    // in the backlog, within its own deadline.
    assert_eq!(tested(&reports[1]), (ip("127.0.0.1"), vec![(Status::Pass, None)]), "{reports:?}");
    assert_eq!(tested(&reports[0]).1, vec![(Status::Pass, None)]);
    assert!(started.elapsed() < ring::LIMITS.timeout * 4, "took {:?}", started.elapsed());
}

#[test]
fn a_successor_that_does_not_answer_fails_the_pair_by_the_deadline() {
    let port = free_port();
    let me = node("127.0.0.1", 1);
    // 127.0.0.2 has no agent: nothing listens on the port.
    let peers = [ip("127.0.0.1"), ip("127.0.0.2")];
    let config = Config { service: "svc".into(), port, every: 1, timeout: Duration::from_secs(2) };
    let r = ring::Round {
        config: &config,
        resolve: &|_| Ok(peers.to_vec()),
        own: Ok(vec![me.addr]),
        allowed: &me.allowed,
        timestamp: 1.0,
    };
    let started = Instant::now();
    let report = ring::round(&r, &me.fabric);
    assert!(started.elapsed() < ring::LIMITS.timeout * 3, "took {:?}", started.elapsed());
    assert_eq!(tested(&report), (ip("127.0.0.2"), vec![(Status::Fail, Some("peer"))]));
    assert_eq!(*me.allowed.lock().expect("allowed"), peers.to_vec(), "the resolved peers are the ones answered");
}

#[test]
fn no_ring_without_two_peers_a_listed_self_or_an_answer_from_dns() {
    let me = node("10.0.0.1", 1);
    let config = Config { service: "svc".into(), port: 1, every: 1, timeout: Duration::from_secs(2) };
    let untested = |resolve: &dyn Fn(&str) -> Result<Vec<IpAddr>, String>| {
        let r = ring::Round { config: &config, resolve, own: Ok(vec![me.addr]), allowed: &me.allowed, timestamp: 1.0 };
        let report = ring::round(&r, &me.fabric);
        assert_eq!(report.word(), "none");
        match report.outcome {
            Outcome::Untested { reason, .. } => (reason, report.peers),
            other => panic!("tested: {other:?}"),
        }
    };
    assert_eq!(untested(&|_| Ok(vec![ip("10.0.0.1")])), ("alone", 1));
    assert_eq!(untested(&|_| Ok(vec![ip("10.0.0.2"), ip("10.0.0.3")])), ("not-listed", 2));
    assert_eq!(untested(&|_| Err("cannot resolve svc: no such name".into())), ("resolve", 0));
}

#[test]
fn the_binary_binds_the_ring_port_and_reports_an_untested_ring() {
    let dir = common::Scratch::new("ring");
    let (features, metrics) = (dir.0.join("nccl-wrap"), dir.0.join("nccl-wrap.prom"));
    let root = fixture("host-healthy");
    let port = free_port();
    let argv = common::bin_argv();
    let mut cmd = std::process::Command::new(&argv[0]);
    // A name only the loopback holds: this node (whose loopback addresses are not its own) is
    // never placed, whatever the runner's /etc/hosts says of it.
    cmd.args(&argv[1..])
        .env_clear()
        .env("NCCL_WRAP_SYSFS_ROOT", root.join("sys"))
        .env("NCCL_WRAP_PROC_ROOT", root.join("proc"))
        .env("NCCL_WRAP_DEV_ROOT", root.join("dev"))
        .args(["watch", "--rounds", "1", "--ring", &format!("localhost:{port}"), "--features"])
        .arg(&features)
        .arg("--metrics")
        .arg(&metrics);
    let o = output_within(&mut cmd, DEADLINE);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains(&format!("answering on port {port}")), "{stderr}");
    assert!(stderr.contains("ring: not tested:"), "{stderr}");
    let f = std::fs::read_to_string(&features).expect("features written");
    assert!(f.contains("nccl-wrap.feature.node.kubernetes.io/ring=none\n"), "{f}");
    let m = std::fs::read_to_string(&metrics).expect("metrics written");
    assert!(m.contains("nccl_wrap_ring_tested{reason="), "{m}");
    assert!(m.contains("nccl_wrap_ring_last_run_timestamp_seconds "), "{m}");

    // The port taken: the agent says so and does not start.
    // Held on IPv4 and, where the kernel keeps them apart (bindv6only), on IPv6 too.
    let busy = TcpListener::bind(("0.0.0.0", port)).expect("hold the port");
    let busy6 = TcpListener::bind(("::", port));
    let mut cmd = common::bin_command();
    cmd.env_clear().env("NCCL_WRAP_SYSFS_ROOT", root.join("sys")).args([
        "watch",
        "--rounds",
        "1",
        "--ring",
        &format!("localhost:{port}"),
    ]);
    let o = output_within(&mut cmd, DEADLINE);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("cannot listen on 0.0.0.0:{port}")), "{stderr}");
    drop((busy, busy6));
}

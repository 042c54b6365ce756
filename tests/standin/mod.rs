//! The gate's stand-in fabric on loopback, shared by the gate's tests: every pod is a thread of
//! the test, and its pair test is a hello exchange plus a result the test chooses, so that the
//! protocol (and its listeners) are tested without RDMA.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use nccl_wrap::detect::Vars;
use nccl_wrap::gate::seal::Secret;
use nccl_wrap::gate::verdict::SlowRule;
use nccl_wrap::gate::who::Given;
use nccl_wrap::gate::wire::{self as gate_wire, Bootstrap, Challenge, Frame, Join, Knock};
use nccl_wrap::gate::{self, Ran};
use nccl_wrap::pairtest::cause::Cause;
use nccl_wrap::pairtest::edge::{peer_cause, Clamped, PairTest};
use nccl_wrap::pairtest::exchange::{self, Session};
use nccl_wrap::pairtest::output::{self, PairResult};
use nccl_wrap::pairtest::session::PairRun;
use nccl_wrap::pairtest::wire::{Fault, Figures, Hello, LinkLayer, Message, PortInfo};
use nccl_wrap::pairtest::Settings;

pub fn port_info(last: u8) -> PortInfo {
    PortInfo {
        device: "rxe0".into(),
        port: 1,
        link_layer: LinkLayer::Ethernet,
        gid_index: Some(1),
        gid: Some(format!("0000:0000:0000:0000:0000:ffff:0a00:64{last:02x}")),
        gid_type: Some("RoCE v2".into()),
        lid: None,
        mtu: 1024,
        pkey: None,
        netdev: Some("eth1".into()),
        rate_kbps: None,
    }
}

/// A pod's fabric: a hello exchange stands for the pair test, whose result the test picks.
pub struct Fake {
    pub host: String,
    pub last: u8,
    /// The pair towards the successor fails with IBV_WC_RETRY_EXC_ERR.
    pub drops: bool,
    /// No usable port at all.
    pub no_port: bool,
    /// What this pod says of its missing port (peer text, as hostile as a test wants).
    pub problem: Option<String>,
    /// The bandwidth its pair towards the successor measures, GB/s.
    pub gbytes_per_s: f64,
    /// The family of its NCCL bootstrap interface (eth0), when known.
    pub bootstrap_family: Option<&'static str>,
    /// Rails it hands NCCL beyond its first (named mlx5_1, mlx5_2, ...): a pod of another shape.
    pub extra_rails: u8,
    /// The pair over this rail (its place in the list) towards the successor fails as `drops`.
    pub fails_rail: Option<usize>,
    /// This pod does not ask for `--gate-prune` whatever the job's options say.
    pub no_prune: bool,
}

pub fn fake(rank: u32) -> Fake {
    Fake {
        host: format!("pod-{rank}"),
        last: rank as u8 + 1,
        drops: false,
        no_port: false,
        problem: None,
        gbytes_per_s: 0.01,
        bootstrap_family: Some("AF_INET"),
        extra_rails: 0,
        fails_rail: None,
        no_prune: false,
    }
}

/// A job with the same pods, ports and coordinator as `j`, and its own secret.
pub fn same(j: &Job, secret: Option<&'static str>) -> Job {
    Job {
        coordinator: j.coordinator.clone(),
        ports: j.ports.clone(),
        size: j.size,
        id: j.id.clone(),
        wait_ms: j.wait_ms,
        warn: j.warn,
        secret,
        slow: j.slow,
        prune: j.prune,
    }
}

/// The number of open file descriptors of this process.
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0)
}

pub fn hello(f: &Fake, limits: Option<&Settings>) -> Hello {
    Hello {
        host: f.host.clone(),
        ports: f.ports().unwrap_or_else(|_| vec![port_info(f.last)]),
        all_pairs: false,
        bytes: 4096,
        iters: 10,
        duration_ms: 0,
        gate: limits.and_then(|l| l.gate.clone()),
    }
}

impl PairTest for Fake {
    fn host(&self) -> String {
        self.host.clone()
    }
    fn ports(&self) -> Result<Vec<PortInfo>, Cause> {
        if self.no_port {
            return Err(nccl_wrap::pairtest::edge::cannot(
                "no-port",
                self.problem.as_deref().unwrap_or("no usable RDMA port in this pod"),
                "doctor",
            ));
        }
        let extra = (1..=self.extra_rails).map(|i| PortInfo { device: format!("mlx5_{i}"), ..port_info(self.last) });
        Ok(std::iter::once(port_info(self.last)).chain(extra).collect())
    }
    fn initiate(&self, target: &str, limits: &Settings, wait_until: Instant) -> Result<Vec<PairResult>, Cause> {
        let mut s = exchange::connect(target, wait_until, limits.timeout).map_err(|e| peer_cause(&e))?;
        s.send(&Message::Hello(hello(self, Some(limits)))).map_err(|e| peer_cause(&e))?;
        let theirs = s
            .expect("hello", |m| if let Message::Hello(h) = m { Some(h) } else { None })
            .map_err(|e| peer_cause(&e))?;
        // Rail by rail, by place: the first rail fails with `drops`, the one at `fails_rail` too.
        let ours = self.ports()?;
        let results = ours.iter().zip(&theirs.ports).enumerate().map(|(i, (local, remote))| {
            let fails = (self.drops && i == 0) || self.fails_rail == Some(i);
            let fault = fails.then(|| Fault {
                step: "latency".into(),
                error: "IBV_WC_RETRY_EXC_ERR".into(),
                wc_status: Some(12),
                errno: None,
            });
            let run = PairRun {
                local: local.clone(),
                remote: remote.clone(),
                local_fault: fault,
                remote_fault: None,
                figures: Some(Figures { median_us: Some(30.0), p99_us: Some(40.0), gbps: Some(self.gbytes_per_s) }),
            };
            output::result(i, target, &run, output::Local::default())
        });
        Ok(results.collect())
    }
    fn answer(
        &self,
        mut s: Session,
        _hello: &Hello,
        _ours: &Settings,
        _: Clamped<'_>,
    ) -> Result<Vec<PairResult>, String> {
        s.send(&Message::Hello(hello(self, None))).map_err(|e| e.to_string())?;
        Ok(Vec::new())
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// The test's scratch directory (its path, and tempfile's guard that removes it on every way
/// out); the stand-in fabric is also built into benchmarks, which have no `common`.
pub struct Scratch(pub PathBuf, tempfile::TempDir);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        let d = tempfile::Builder::new().prefix(&format!("nccl-wrap-gate-{tag}-")).tempdir().expect("scratch dir");
        Scratch(d.path().to_path_buf(), d)
    }
    /// Where a pod writes its termination message.
    pub fn log(&self, rank: u32) -> PathBuf {
        self.0.join(format!("termination-{rank}"))
    }
}

pub struct Job {
    pub coordinator: String,
    pub ports: Vec<u16>,
    pub size: u32,
    pub id: Option<String>,
    pub wait_ms: u64,
    pub warn: bool,
    /// The job's secret, as NCCL_WRAP_GATE_SECRET would give it.
    pub secret: Option<&'static str>,
    /// What rank 0 makes of a slow pair.
    pub slow: SlowRule,
    /// Rails whose pairs fail are dropped on every pod (`--gate-prune`).
    pub prune: bool,
}

pub fn job(size: u32) -> Job {
    let ports: Vec<u16> = (0..size).map(|_| free_port()).collect();
    Job {
        coordinator: format!("127.0.0.1:{}", ports[0]),
        ports,
        size,
        id: None,
        wait_ms: 10_000,
        warn: false,
        secret: None,
        slow: SlowRule { pct: 70, refuse: false },
        prune: false,
    }
}

pub fn options(j: &Job, rank: u32, log: Option<PathBuf>) -> gate::Options {
    gate::Options {
        warn: j.warn,
        given: Given {
            coordinator: Some(j.coordinator.clone()),
            rank: Some(rank),
            size: Some(j.size),
            port: j.ports[rank as usize],
            id: j.id.clone(),
            bootstrap: None,
        },
        wait_ms: j.wait_ms,
        test: Settings {
            all_pairs: false,
            bytes: 4096,
            iters: 10,
            duration_ms: 0,
            timeout: Duration::from_millis(2000),
            gate: None,
        },
        json: false,
        termination_log: log,
        secret: j.secret.map(|s| Secret::new(s.as_bytes()).map_err(|e| e.to_string())).transpose(),
        slow: j.slow,
        prune: j.prune,
    }
}

/// Runs the pods given (rank, fabric) at once; returns each pod's outcome, in the same order.
pub fn run_pods(j: &Job, pods: Vec<(u32, Fake)>, scratch: &Scratch) -> Vec<Ran> {
    let vars = Vars::new();
    std::thread::scope(|s| {
        let handles: Vec<_> = pods
            .into_iter()
            .map(|(rank, f)| {
                let mut opts = options(j, rank, Some(scratch.log(rank)));
                opts.prune &= !f.no_prune;
                opts.given.bootstrap =
                    f.bootstrap_family.map(|fam| Bootstrap { ifname: "eth0".into(), family: Some(fam.into()) });
                let vars = &vars;
                s.spawn(move || gate::run(vars, &f, &opts))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("pod thread")).collect()
    })
}

/// A connection to 127.0.0.1:`port` from the loopback address `src` (every 127/8 address is
/// this host's): another client, as the listener's per-source limits see it. Its port is
/// reusable once it is closed, and (`abort`) it closes with a reset: a flood's thousands of
/// connections leave no TIME_WAIT behind that would keep later listeners off those ports.
pub fn connect_from(src: Ipv4Addr, port: u16, abort: bool) -> std::io::Result<TcpStream> {
    use rustix::net::{sockopt, AddressFamily, SocketFlags, SocketType};
    let fd = rustix::net::socket_with(AddressFamily::INET, SocketType::STREAM, SocketFlags::CLOEXEC, None)?;
    sockopt::set_socket_reuseaddr(&fd, true)?;
    if abort {
        sockopt::set_socket_linger(&fd, Some(Duration::ZERO))?;
    }
    rustix::net::bind_v4(&fd, &SocketAddrV4::new(src, 0))?;
    rustix::net::connect_v4(&fd, &SocketAddrV4::new(Ipv4Addr::LOCALHOST, port))?;
    Ok(TcpStream::from(fd))
}

/// How one client floods a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flood {
    /// Connects, stays silent for 100 ms (less than the 250 ms after which a silent first read
    /// may be closed for a newer connection), closes, and again, from 40 threads: every first
    /// read a listener holds is a young, silent one of the flood's.
    Reconnect,
    /// Opens connections as fast as it can and holds them open, silent (500 a thread at most).
    Connect,
    /// Connects, sends garbage, closes, over and over.
    Garbage,
}

/// Floods 127.0.0.1:`port` from `src` until `stop`, once something listens there (before it,
/// the flood's own ephemeral ports could take the port it waits for); returns how many
/// connections it made.
pub fn flood(src: Ipv4Addr, port: u16, how: Flood, stop: &AtomicBool) -> usize {
    let until = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() && Instant::now() < until && !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let made = AtomicUsize::new(0);
    let threads = if how == Flood::Reconnect { 40 } else { 3 };
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut held = std::collections::VecDeque::new();
                while !stop.load(Ordering::SeqCst) {
                    let Ok(mut c) = connect_from(src, port, true) else {
                        std::thread::sleep(Duration::from_millis(1));
                        continue;
                    };
                    made.fetch_add(1, Ordering::SeqCst);
                    match how {
                        Flood::Reconnect => std::thread::sleep(Duration::from_millis(100)),
                        Flood::Garbage => {
                            let _ = c.write_all(b"GET / HTTP/1.0\r\n\r\n");
                        }
                        Flood::Connect => {
                            held.push_back(c);
                            if held.len() > 500 {
                                held.pop_front();
                            }
                        }
                    }
                }
            });
        }
    });
    made.into_inner()
}

/// A pod that joins rank 0 at `port` once, from `src`, as rank `rank` of `size` in job `job`:
/// one connection, its knock, the join answering the challenge (no secret); whether rank 0 read
/// it (it answered the join: an assignment, a verdict or a refusal), within `wait`.
pub fn single_try_join(src: Ipv4Addr, port: u16, job: &str, rank: u32, size: u32, wait: Duration) -> bool {
    let Ok(mut c) = connect_from(src, port, false) else { return false };
    let until = Instant::now() + wait;
    let send = |c: &mut TcpStream, f: &Frame| c.write_all(&gate_wire::encode(f).expect("frame")).is_ok();
    let recv = |c: &mut TcpStream| -> Option<Frame> {
        c.set_read_timeout(Some(until.saturating_duration_since(Instant::now()).max(Duration::from_millis(1)))).ok()?;
        let mut head = [0u8; 13];
        c.read_exact(&mut head).ok()?;
        let (_, len) = gate_wire::header(&head).ok()?;
        let mut body = vec![0u8; len];
        c.read_exact(&mut body).ok()?;
        let mut frame = head.to_vec();
        frame.extend_from_slice(&body);
        gate_wire::decode(&frame).ok()
    };
    if !send(&mut c, &Frame::Knock(Knock { job: job.into(), rank })) {
        return false;
    }
    let Some(Frame::Challenge(Challenge { nonce })) = recv(&mut c) else { return false };
    let f = fake(rank);
    let join = Join {
        job: job.into(),
        rank,
        size,
        host: f.host.clone(),
        port: 1,
        ports: vec![port_info(f.last)],
        problem: None,
        nonce: None,
        challenge: Some(nonce),
        bootstrap: None,
        prune: false,
        mac: None,
    };
    if !send(&mut c, &Frame::Join(join)) {
        return false;
    }
    // Read: rank 0 answered the join (a refusal of a read join comes back as an error frame).
    let mut head = [0u8; 13];
    c.set_read_timeout(Some(until.saturating_duration_since(Instant::now()).max(Duration::from_millis(1)))).is_ok()
        && c.read_exact(&mut head).is_ok()
}

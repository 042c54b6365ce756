//! The gate's stand-in fabric on loopback, shared by the gate's tests: every pod is a thread of
//! the test, and its pair test is a hello exchange plus a result the test chooses, so that the
//! protocol (and its listeners) are tested without RDMA.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use nccl_wrap::detect::Vars;
use nccl_wrap::gate::seal::Secret;
use nccl_wrap::gate::verdict::SlowRule;
use nccl_wrap::gate::who::Given;
use nccl_wrap::gate::wire::Bootstrap;
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
    }
}

/// The number of open file descriptors of this process.
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0)
}

pub fn hello(f: &Fake, limits: Option<&Settings>) -> Hello {
    Hello {
        host: f.host.clone(),
        ports: vec![port_info(f.last)],
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
        Ok(vec![port_info(self.last)])
    }
    fn initiate(&self, target: &str, limits: &Settings, wait_until: Instant) -> Result<Vec<PairResult>, Cause> {
        let mut s = exchange::connect(target, wait_until, limits.timeout).map_err(|e| peer_cause(&e))?;
        s.send(&Message::Hello(hello(self, Some(limits)))).map_err(|e| peer_cause(&e))?;
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
            figures: Some(Figures { median_us: Some(30.0), p99_us: Some(40.0), gbps: Some(self.gbytes_per_s) }),
        };
        Ok(vec![output::result(0, target, &run, output::Local::default())])
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

/// A scratch directory removed when dropped (on every way out of the test).
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        let p = std::env::temp_dir().join(format!("nccl-wrap-gate-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("scratch dir");
        Scratch(p)
    }
    pub fn log(&self, rank: u32) -> PathBuf {
        self.0.join(format!("termination-{rank}"))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
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
                opts.given.bootstrap =
                    f.bootstrap_family.map(|fam| Bootstrap { ifname: "eth0".into(), family: Some(fam.into()) });
                let vars = &vars;
                s.spawn(move || gate::run(vars, &f, &opts))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("pod thread")).collect()
    })
}

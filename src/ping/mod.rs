//! `nccl-wrap ping`: an RDMA test between two pods over the ports a run would hand NCCL.
//!
//! Takes the [`Plan`] (the same detection, options and GID rule as a start, so what is tested is
//! what NCCL would use), the variables and the proc root; connects to a peer over TCP
//! (`HOST:PORT`), waits for one (`--listen`), or both in a ring; runs a latency ping-pong and a
//! bandwidth run on each pair of ports; prints one result per pair and a summary. Exit status:
//! 0 every pair passes (warnings included), 1 a pair fails, 2 the check could not run.
//!
//! - `wire`: the messages and their framing (pure); `exchange`: TCP with deadlines, hostile
//!   peers; `edge`: this pod towards one peer, as results; `session`: one run with one peer
//!   from either end; `pair`: the verbs work;
//! - `cause`: why a pair failed (pure); `route`: this namespace's IPv4 routes (pure parse);
//! - `ring`: index, size and peer template (pure); `output`: JSON lines and the human form.

pub mod cause;
pub mod edge;
pub mod exchange;
pub mod output;
pub mod pair;
pub mod ring;
pub mod route;
pub mod session;
pub mod wire;

use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use cause::{Cause, Status};
use edge::{cannot, peer_cause, Here};
use exchange::Serve;
use output::PairResult;
use pair::Planned;
use session::Limits;

use crate::detect::Vars;
use crate::msg::PREFIX;
use crate::nccl::env::IB_GID_INDEX;
use crate::nccl::gid::RoceType;
use crate::plan::{Action, Plan};
use crate::verbs::Verbs;

pub const EXIT_PASS: u8 = 0;
pub const EXIT_FAILED: u8 = 1;
pub const EXIT_CANNOT_RUN: u8 = 2;
/// The ring's default TCP port (perftest's).
pub const DEFAULT_PORT: u16 = 18515;

/// What to do: connect to `target`, listen on `listen`, or both in a ring.
#[derive(Debug, Clone)]
pub enum Mode {
    Connect(String),
    Listen { addr: String, keep: bool },
    Ring { template: Option<String>, index: Option<u32>, size: Option<u32>, port: u16 },
}

#[derive(Debug, Clone)]
pub struct Options {
    pub mode: Mode,
    pub json: bool,
    pub all_pairs: bool,
    pub bytes: u32,
    pub iters: u32,
    pub duration_ms: u32,
    pub timeout_ms: u64,
    pub wait_ms: u64,
}

/// What ping reads besides its options.
pub struct Inputs<'a> {
    pub plan: &'a Plan,
    pub vars: &'a Vars,
    pub proc_root: &'a Path,
    pub verbs: &'a dyn Verbs,
}

/// Runs ping and prints its results; returns the exit status.
pub fn main(inp: &Inputs, opts: &Options) -> u8 {
    let mut out = Printer { json: opts.json, pairs: 0, failed: 0 };
    let exit = match run(inp, opts, &mut out) {
        Ok(()) if out.failed > 0 => EXIT_FAILED,
        Ok(()) => EXIT_PASS,
        Err(cause) => {
            eprintln!("{PREFIX} ping cannot run: {}", cause.summary);
            out.emit(&if opts.json { output::error_json(&cause) } else { output::error_human(&cause) });
            EXIT_CANNOT_RUN
        }
    };
    let peer = match &opts.mode {
        Mode::Connect(t) => t.clone(),
        Mode::Listen { addr, .. } => format!("peers of {addr}"),
        Mode::Ring { .. } => "the next pod of the ring".into(),
    };
    out.emit(&if opts.json {
        output::summary_json(out.pairs, out.failed, exit)
    } else {
        output::summary_human(out.pairs, out.failed, &peer)
    });
    exit
}

struct Printer {
    json: bool,
    pairs: usize,
    failed: usize,
}

impl Printer {
    fn pair(&mut self, r: &PairResult) {
        self.pairs += 1;
        if r.status == Status::Fail {
            self.failed += 1;
        }
        self.emit(&if self.json { output::json_line(r) } else { output::human(r) });
    }
    fn emit(&self, text: &str) {
        let mut o = std::io::stdout().lock();
        if o.write_all(text.as_bytes()).and_then(|()| o.flush()).is_err() {
            eprintln!("{PREFIX} cannot write ping results to stdout");
        }
    }
}

/// The plan's ports as the run will use them: NCCL_IB_GID_INDEX as NCCL will read it (the
/// user's value when kept), otherwise each port's own pick.
pub fn planned(plan: &Plan) -> Vec<Planned> {
    let forced: Option<u32> = plan.vars.iter().find(|v| v.name == IB_GID_INDEX).and_then(|v| {
        let value = if v.action == Action::Kept { v.previous.as_deref()? } else { v.value.as_str() };
        value.trim().parse().ok()
    });
    let mut out = Vec::new();
    for hca in &plan.hca {
        let Some((dev, port)) = hca.rsplit_once(':') else { continue };
        let Ok(port) = port.parse::<u8>() else { continue };
        let facts = plan
            .detection
            .devices
            .iter()
            .find(|d| d.name == dev)
            .and_then(|d| d.ports.iter().find(|p| p.port == u32::from(port)));
        let pick = facts.and_then(|p| p.gid.as_ref());
        let gid_index = forced.filter(|_| pick.is_some()).or(pick.map(|g| g.index));
        let gid_type = pick.filter(|g| Some(g.index) == gid_index).and_then(|g| g.roce).map(|r| match r {
            RoceType::V1 => "IB/RoCE v1".to_owned(),
            RoceType::V2 => "RoCE v2".to_owned(),
        });
        out.push(Planned {
            device: dev.to_owned(),
            port,
            gid_index,
            gid_type,
            netdev: pick.and_then(|g| g.ndev.clone()),
        });
    }
    out
}

/// The RoCE ports the plan leaves out only for their GID (up and ACTIVE, but no GID of NCCL's
/// family and RoCE version: a rail without its IPv4 address), with the plan's reason. A port
/// left out for anything else (down, not this pod's) is not a rail of this pod.
pub fn dropped_for_gid(plan: &Plan) -> Vec<output::Dropped> {
    let mut out = Vec::new();
    for d in plan.decisions.iter().filter(|d| !d.used) {
        let (Some(reason), Ok(port)) = (&d.reason, u8::try_from(d.port)) else { continue };
        let facts = plan
            .detection
            .devices
            .iter()
            .find(|x| x.name == d.device)
            .and_then(|x| x.ports.iter().find(|p| p.port == d.port));
        let Some(f) = facts else { continue };
        let gid_only = f.link_layer.as_deref() == Some("Ethernet")
            && crate::plan::link_problem(f).is_none()
            && f.gid.as_ref().is_some_and(|g| !g.full_match);
        if gid_only {
            out.push(output::Dropped { device: d.device.clone(), port, reason: reason.clone() });
        }
    }
    out
}

/// This pod's name: the kernel's hostname under the proc root, else `HOSTNAME`.
pub fn hostname(proc_root: &Path, vars: &Vars) -> String {
    let from_proc = std::fs::read_to_string(proc_root.join("sys/kernel/hostname")).ok();
    let raw = from_proc.or_else(|| vars.get(OsStr::new("HOSTNAME")).map(|h| h.to_string_lossy().into_owned()));
    let h: String = raw
        .unwrap_or_default()
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || "-._".contains(*c))
        .take(253)
        .collect();
    if h.is_empty() {
        "unknown".into()
    } else {
        h
    }
}

fn limits(opts: &Options) -> Limits {
    Limits {
        all_pairs: opts.all_pairs,
        bytes: opts.bytes,
        iters: opts.iters,
        duration_ms: opts.duration_ms,
        timeout: Duration::from_millis(opts.timeout_ms),
        gate: None,
    }
}

/// Usage first: a wrong address or ring setting is named before anything is opened.
fn check_usage(inp: &Inputs, opts: &Options) -> Result<Option<(ring::Ring, u16)>, Cause> {
    wire::check_params(opts.bytes, opts.iters, opts.duration_ms)
        .map_err(|e| cannot("peer", format!("bad test size: {e}"), "see nccl-wrap ping --help for the ranges"))?;
    let usage = |e: String, hint: &str| cannot("peer", e, hint);
    match &opts.mode {
        Mode::Connect(target) => {
            exchange::split_target(target).map_err(|e| usage(e.to_string(), "the peer is HOST:PORT"))?;
            Ok(None)
        }
        Mode::Listen { addr, .. } => {
            exchange::listen_addr(addr).map_err(|e| usage(e.to_string(), "--listen takes PORT or ADDR:PORT"))?;
            Ok(None)
        }
        Mode::Ring { template, index, size, port } => {
            let host = hostname(inp.proc_root, inp.vars);
            let r = ring::resolve(*index, *size, template.as_deref(), inp.vars, &host)
                .map_err(|e| usage(e.to_string(), "see nccl-wrap ping --help (ring mode)"))?;
            Ok(Some((r, *port)))
        }
    }
}

fn run(inp: &Inputs, opts: &Options, out: &mut Printer) -> Result<(), Cause> {
    let ring = check_usage(inp, opts)?;
    let here = edge::here(inp)?;
    let wait = Duration::from_millis(opts.wait_ms);
    match (&opts.mode, ring) {
        (Mode::Connect(target), _) => {
            let results = edge::initiate(&here, target, &limits(opts), Instant::now() + wait)?;
            results.iter().for_each(|r| out.pair(r));
            Ok(())
        }
        (Mode::Listen { addr, keep }, _) => {
            let sock = exchange::listen_addr(addr)
                .map_err(|e| cannot("peer", e.to_string(), "--listen takes PORT or ADDR:PORT"))?;
            let l = exchange::bind(sock).map_err(|e| cannot("peer", e.to_string(), "pick a free port"))?;
            let opened = edge::open(&here.planned)?;
            let timeout = Duration::from_millis(opts.timeout_ms);
            let serve = Serve { keep: *keep, wait: (!keep).then_some(wait), hello: timeout, max_peers: None };
            let served = exchange::serve(
                &l,
                serve,
                |s, hello| {
                    edge::answer(&here, &opened, s, &hello, timeout)?.iter().for_each(|r| out.pair(r));
                    Ok(())
                },
                |e| eprintln!("{PREFIX} ping: {e}"),
            );
            served.map(|_| ()).map_err(|e| peer_cause(&e))
        }
        (Mode::Ring { .. }, Some((r, port))) => {
            for mut res in ring_run(&r, port, &here, opts)? {
                res.node_index = Some(r.index);
                res.peer_index = Some(r.peer_index);
                out.pair(&res);
            }
            Ok(())
        }
        (Mode::Ring { .. }, None) => Ok(()),
    }
}

/// Ring mode: serve the predecessor on a thread, test the successor here; returns the pairs
/// towards the successor.
fn ring_run(r: &ring::Ring, port: u16, here: &Here, opts: &Options) -> Result<Vec<PairResult>, Cause> {
    let l = exchange::bind(std::net::SocketAddr::from(([0, 0, 0, 0], port)))
        .map_err(|e| cannot("peer", e.to_string(), "pick a free --port (NCCL_WRAP_PING_PORT)"))?;
    let target = format!("{}:{port}", r.peer_host);
    let timeout = Duration::from_millis(opts.timeout_ms);
    let wait = Duration::from_millis(opts.wait_ms);
    std::thread::scope(|scope| {
        let listener = scope.spawn(|| {
            // Contexts are opened on this thread: nothing of verbs crosses threads.
            let opened = edge::open(&here.planned).map_err(|c| c.summary)?;
            let serve = Serve { keep: false, wait: Some(wait), hello: timeout, max_peers: None };
            exchange::serve(
                &l,
                serve,
                |s, h| edge::answer(here, &opened, s, &h, timeout).map(drop),
                |e| eprintln!("{PREFIX} ping: serving the previous pod of the ring: {e}"),
            )
            .map_err(|e| e.to_string())
        });
        let result = edge::initiate(here, &target, &limits(opts), Instant::now() + wait);
        match listener.join() {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => eprintln!("{PREFIX} ping: serving the previous pod of the ring: {e}"),
            Err(_) => eprintln!("{PREFIX} ping: the listener thread stopped"),
        }
        result
    })
}

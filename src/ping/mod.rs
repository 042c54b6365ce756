//! `nccl-wrap ping`: the pair test (`nw_pairtest`) between two pods, or a ring of them, over the
//! ports a run would hand NCCL; this file reads the mode, `print` the output, `order` ring mode's
//! arithmetic. Exit status: 0 every pair passes, 1 a pair fails, 2 the check could not run.

pub mod order;
pub mod print;

use std::io::Write;
use std::time::{Duration, Instant};

use nw_output::msg::PREFIX;
use nw_pairtest::cause::{Cause, Status};
use nw_pairtest::desk;
use nw_pairtest::door::{self, Allow, Policy};
use nw_pairtest::edge::{cannot, peer_cause, PairTest};
use nw_pairtest::exchange::{self, ExchangeError, Session};
use nw_pairtest::here::{self, hostname, Inputs};
use nw_pairtest::output::PairResult;
use nw_pairtest::rdma::Rdma;
use nw_pairtest::ring;
use nw_pairtest::wire::Hello;
use nw_pairtest::Settings;

pub const EXIT_PASS: u8 = 0;
pub const EXIT_FAILED: u8 = 1;
pub const EXIT_CANNOT_RUN: u8 = 2;

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
    /// What each test does (as the initiator), and the most a listener answers.
    pub test: Settings,
    pub wait_ms: u64,
    /// `--allow CIDR,...`: whom the listener answers (unset: anyone).
    pub allow: Option<String>,
}

/// Runs ping and prints its results; returns the exit status.
pub fn main(inp: &Inputs, opts: &Options) -> u8 {
    let mut out = Printer { json: opts.json, pairs: 0, failed: 0 };
    let exit = match run(inp, opts, &mut out) {
        Ok(()) if out.failed > 0 => EXIT_FAILED,
        Ok(()) => EXIT_PASS,
        Err(cause) => {
            eprintln!("{PREFIX} ping cannot run: {}", cause.summary);
            out.emit(&if opts.json { print::error_json(&cause) } else { print::error_human(&cause) });
            EXIT_CANNOT_RUN
        }
    };
    let peer = match &opts.mode {
        Mode::Connect(t) => t.clone(),
        Mode::Listen { addr, .. } => format!("peers of {addr}"),
        Mode::Ring { .. } => "the next pod of the ring".into(),
    };
    out.emit(&if opts.json {
        print::summary_json(out.pairs, out.failed, exit)
    } else {
        print::summary_human(out.pairs, out.failed, &peer)
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
        self.failed += usize::from(r.status == Status::Fail);
        self.emit(&if self.json { print::json_line(r) } else { print::human(r) });
    }
    fn emit(&self, text: &str) {
        let mut o = std::io::stdout().lock();
        if o.write_all(text.as_bytes()).and_then(|()| o.flush()).is_err() {
            eprintln!("{PREFIX} cannot write ping results to stdout");
        }
    }
}

/// Usage first: a wrong address or ring setting is named before anything is opened.
fn check_usage(inp: &Inputs, opts: &Options) -> Result<(Option<(order::Ring, u16)>, Allow), Cause> {
    let usage = |e: String, hint: &str| cannot("peer", e, hint);
    opts.test.check().map_err(|e| usage(format!("bad test size: {e}"), "see nccl-wrap ping --help for the ranges"))?;
    // An allow-list that cannot be read is never taken for "anyone": the check does not run.
    let hint = "a comma-separated list of CIDRs, e.g. 10.0.0.0/8,fd00::/8";
    let nets = opts.allow.as_deref().map(door::parse_allow).transpose();
    let nets = nets.map_err(|e| usage(format!("--allow (NCCL_WRAP_PING_ALLOW): {e}"), hint))?;
    let allow = nets.map_or(Allow::Anyone, Allow::Nets);
    let ring = match &opts.mode {
        Mode::Connect(target) => {
            exchange::split_target(target).map_err(|e| usage(e.to_string(), "the peer is HOST:PORT"))?;
            None
        }
        Mode::Listen { addr, .. } => {
            exchange::listen_addr(addr).map_err(|e| usage(e.to_string(), "--listen takes PORT or ADDR:PORT"))?;
            None
        }
        Mode::Ring { template, index, size, port } => {
            let host = hostname(inp.proc_root, inp.vars);
            let r = order::resolve(*index, *size, template.as_deref(), inp.vars, &host)
                .map_err(|e| usage(e.to_string(), "see nccl-wrap ping --help (ring mode)"))?;
            Some((r, *port))
        }
    };
    Ok((ring, allow))
}

/// The listener's policy: whom `allow` admits, each hello within the test's deadline, peers
/// asking for more than this end's own test clamped to it.
fn policy(opts: &Options, allow: Allow, keep: bool) -> Policy {
    let wait = (!keep).then(|| Duration::from_millis(opts.wait_ms));
    Policy { keep, wait, ..Policy::new(allow, opts.test.timeout, opts.test.clone()) }
}

fn run(inp: &Inputs, opts: &Options, out: &mut Printer) -> Result<(), Cause> {
    let (ring, allow) = check_usage(inp, opts)?;
    // Through the pair test's one seam, as the gate and the agents' ring: ports are opened on
    // the thread that tests, and closed before each test returns.
    let fabric = Rdma::new(Ok(here::read(inp)?), hostname(inp.proc_root, inp.vars));
    let wait = Duration::from_millis(opts.wait_ms);
    match (&opts.mode, ring) {
        (Mode::Connect(target), _) => {
            fabric.initiate(target, &opts.test, Instant::now() + wait)?.iter().for_each(|r| out.pair(r));
            Ok(())
        }
        (Mode::Listen { addr, keep }, _) => {
            let place = exchange::listen_addr(addr)
                .map_err(|e| cannot("peer", e.to_string(), "--listen takes PORT or ADDR:PORT"))?;
            let l = place.bind().map_err(|e| cannot("peer", e.to_string(), "pick a free port"))?;
            // A pod none of whose ports opens is named now, not when a peer comes.
            fabric.ports()?;
            let on_peer =
                |s, hello| answer(&fabric, opts, s, hello).map(|results| results.iter().for_each(|r| out.pair(r)));
            let served = desk::serve(&l, &policy(opts, allow, *keep), on_peer, |e| eprintln!("{PREFIX} ping: {e}"));
            served.map(|_| ()).map_err(|e| peer_cause(&e))
        }
        (Mode::Ring { .. }, Some((r, port))) => {
            for mut res in ring_run(&r, port, &fabric, opts, allow)? {
                res.node_index = Some(r.index);
                res.peer_index = Some(r.peer_index);
                out.pair(&res);
            }
            Ok(())
        }
        (Mode::Ring { .. }, None) => Ok(()),
    }
}

/// Ring mode, the pair test's ring step: serve the predecessor on a thread, test the successor
/// here; returns the pairs towards the successor.
fn ring_run(r: &order::Ring, port: u16, fabric: &Rdma, opts: &Options, allow: Allow) -> Result<Vec<PairResult>, Cause> {
    let l = exchange::bind_any(port)
        .map_err(|e| cannot("peer", e.to_string(), "pick a free --port (NCCL_WRAP_PING_PORT)"))?;
    let target = format!("{}:{port}", r.peer_host);
    let wait = Duration::from_millis(opts.wait_ms);
    let policy = policy(opts, allow, false);
    let serve = || {
        let answer = |s, h| answer(fabric, opts, s, h).map(drop);
        desk::serve(&l, &policy, answer, |e| eprintln!("{PREFIX} ping: serving the previous pod of the ring: {e}"))
    };
    let (result, served) = ring::step(serve, || fabric.initiate(&target, &opts.test, Instant::now() + wait));
    match served {
        Some(Ok(_)) => {}
        Some(Err(e)) => eprintln!("{PREFIX} ping: serving the previous pod of the ring: {e}"),
        None => eprintln!("{PREFIX} ping: the listener thread stopped"),
    }
    result
}

/// A peer's test answered, with a line for what of its hello was clamped.
fn answer(fabric: &Rdma, opts: &Options, s: Session, hello: Hello) -> Result<Vec<PairResult>, ExchangeError> {
    let peer = s.peer.clone();
    fabric.answer(s, &hello, &opts.test, &say_clamped).map_err(|why| ExchangeError::Answer { peer, why })
}

/// One line for what a listener clamped of a peer's hello, said before it answers.
fn say_clamped(peer: &str, clamped: &[String]) {
    let clamped = clamped.join(", ");
    eprintln!("{PREFIX} ping: {peer} asked for more than --bytes/--iters/--duration-ms allow here: {clamped}");
}

//! The gate (`--gate`): this job's pods test each other over NCCL's rails, and every pod starts
//! the command or none does: `who` -> `listen` -> `coordinator` or `member` -> `successor` ->
//! `verdict`. Every listener, connection and RDMA resource is closed before `run` returns.

pub mod coordinator;
pub mod listen;
pub mod member;
pub mod nofile;
pub mod seal;
pub mod successor;
pub mod verdict;
pub mod who;
pub mod wire;

use std::io::Write;
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use verdict::{Pod, Pruned, SlowRule};
use who::{Given, Who};

use nix::libc;

use nw_observe::detect::Vars;
use nw_output::msg::PREFIX;
use nw_pairtest::cause::{Cause, Status};
use nw_pairtest::edge::PairTest;
use nw_pairtest::exchange;
use nw_pairtest::ledger::Ledger;
use nw_pairtest::ring;
use nw_pairtest::wire::Tag;
use nw_pairtest::Settings;
use seal::Secret;
use wire::Verdict;

#[derive(Debug, Clone)]
pub struct Options {
    /// Report and start anyway.
    pub warn: bool,
    pub given: Given,
    pub wait_ms: u64,
    /// The pair test every pod of the job runs (the coordinator's).
    pub test: Settings,
    /// The verdict also as one JSON line on stdout.
    pub json: bool,
    /// Where a refusal's cause goes (the caller picks `/dev/termination-log` when it exists).
    pub termination_log: Option<PathBuf>,
    /// The job's secret (`NCCL_WRAP_GATE_SECRET` or `_FILE`), none, or why it cannot be read
    /// (then the gate refuses).
    pub secret: Result<Option<Secret>, String>,
    pub slow: SlowRule,
    /// Rails whose pairs fail are dropped on every pod instead of refusing (`--gate-prune`).
    pub prune: bool,
}

/// Start the command, refuse (exit 125), or stop: a stopping signal came during the gate, so
/// nothing starts and nccl-wrap ends with 128 + the signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Start,
    Refuse,
    Interrupted(i32),
}

/// The signals that end the gate at once. Under supervision they are blocked from the start (to
/// be forwarded to the command); pending, they are seen here and left pending.
const STOPPING: [i32; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];

/// The job's secret (or none) and this pod's nonce for this gate run (rank 0's is the gate's).
#[derive(Debug, Clone, Copy)]
pub struct Trust<'a> {
    pub key: Option<&'a Secret>,
    pub nonce: &'a str,
}

/// What the gate decided on this pod.
#[derive(Debug, Clone)]
pub struct Ran {
    pub outcome: Outcome,
    pub verdict: Verdict,
    pub rank: u32,
    /// The rails this pod drops before NCCL starts (`--gate-prune`), each with its line.
    pub pruned: Vec<Pruned>,
}

/// Runs the gate and reports its verdict; returns whether the command starts, and why.
pub fn run(vars: &Vars, fabric: &dyn PairTest, opts: &Options) -> Ran {
    let start = Instant::now();
    let signal = AtomicI32::new(0);
    let checked = check(vars, fabric, opts, &signal);
    let sig = signal.load(Ordering::SeqCst);
    if sig != 0 {
        eprintln!("{PREFIX} gate: signal {sig} arrived during the gate: the command is not started");
        let rank = checked.as_ref().map_or(0, |(w, _)| w.rank);
        let verdict = checked.map_or_else(|_| verdict::decide(1, &[], Vec::new(), SlowRule::OFF), |(_, v)| v);
        return Ran { outcome: Outcome::Interrupted(sig), verdict, rank, pruned: Vec::new() };
    }
    let (verdict, rank) = match checked {
        Ok((Who { rank, size, source, coordinator, .. }, v)) => {
            let ms = start.elapsed().as_millis();
            eprintln!("{PREFIX} gate: rank {rank} of {size} ({source}), coordinator {coordinator}, {ms} ms");
            (v, rank)
        }
        Err(c) => {
            // The rank as far as it is known (the cause may be that it is not).
            let rank = opts.given.rank.or_else(|| who::resolve(&opts.given, vars).ok().map(|w| w.rank)).unwrap_or(0);
            let f = verdict::of_pod(&Pod { rank, host: fabric.host() }, None, &c);
            eprintln!("{PREFIX} gate: cannot run: {}", c.summary);
            (Verdict { size: 1, pairs: 0, ..verdict::decide(1, &[], vec![f], SlowRule::OFF) }, rank)
        }
    };
    // The rails a pruning verdict drops, by place, checked against this pod's own.
    let mine = (!verdict.dropped.is_empty()).then(|| fabric.ports().ok()).flatten();
    let mine = mine.map(|p| verdict::rail_names(&p)).unwrap_or_default();
    let (verdict, pruned) = match verdict::dropped_here(&verdict, &mine) {
        Ok(pruned) => (verdict, pruned),
        Err(why) => {
            let summary = format!("the coordinator's verdict cannot be applied here: {why}");
            let f = verdict::pod_fails(rank, &fabric.host(), "peer", summary, "run the same nccl-wrap on every pod");
            (verdict::decide(verdict.size, &[], vec![f], SlowRule::OFF), Vec::new())
        }
    };
    let start_anyway = !verdict.go && opts.warn;
    for l in verdict::human(&verdict, opts.wait_ms).iter().chain(pruned.iter().map(|p| &p.line)) {
        eprintln!("{PREFIX} {l}");
    }
    if opts.json {
        let mut o = std::io::stdout().lock();
        let _ = writeln!(o, "{}", verdict::json(&verdict, rank, verdict.go || start_anyway)).and_then(|()| o.flush());
    }
    if start_anyway {
        eprintln!("{PREFIX} gate: --gate=warn: starting the command anyway");
    }
    if verdict.go || start_anyway {
        return Ran { outcome: Outcome::Start, verdict, rank, pruned };
    }
    if let Some(path) = &opts.termination_log {
        if let Err(e) = nw_output::termination::write(path, &verdict::termination(&verdict, opts.wait_ms)) {
            eprintln!("{PREFIX} gate: cannot write the termination message to {}: {e}", path.display());
        }
    }
    Ran { outcome: Outcome::Refuse, verdict, rank, pruned }
}

fn usage(summary: String, hint: &str) -> Cause {
    Cause::new("gate-usage", Status::Fail, summary, hint)
}

/// Who, then the gate port, then the coordinator's or the member's part, while the listener
/// serves the predecessor on a thread; it is closed before this returns.
fn check(vars: &Vars, fabric: &dyn PairTest, opts: &Options, signal: &AtomicI32) -> Result<(Who, Verdict), Cause> {
    let who = who::resolve(&opts.given, vars).map_err(|e| usage(e.to_string(), "see docs/gate.md (who the job is)"))?;
    let hint = "mount the job's Secret where NCCL_WRAP_GATE_SECRET_FILE points, or unset it (docs/gate.md)";
    let key = opts.secret.clone().map_err(|e| Cause::new("secret", Status::Fail, e, hint))?;
    if key.is_none() {
        let job = &who.job;
        eprintln!("{PREFIX} gate: job {job:?} is not authenticated (no NCCL_WRAP_GATE_SECRET or NCCL_WRAP_GATE_SECRET_FILE): a process that knows the job id can join as a rank");
    }
    let hint = "see nccl-wrap ping --help; NCCL_WRAP_PING_TIMEOUT_MS: 3000 suits real hardware, 20000 software RoCE under emulation";
    opts.test.check().map_err(|e| usage(format!("bad pair test from NCCL_WRAP_PING_*: {e}"), hint))?;
    // Rank 0 holds a connection per pod until the verdict; the limit is put back on return.
    let _nofile = (who.rank == 0).then(|| nofile::raise(who.size));
    let hint = "pick a free NCCL_WRAP_GATE_PORT (the same on every pod), never the launcher's MASTER_PORT";
    let l: TcpListener = exchange::bind_any(who.port).map_err(|e| usage(e.to_string(), hint))?;
    let me = Pod { rank: who.rank, host: fabric.host() };
    let (timeout, wait) = (opts.test.timeout, Duration::from_millis(opts.wait_ms));
    let limits = Settings { gate: Some(Tag { job: who.job.clone(), rank: who.rank, mac: None }), ..opts.test.clone() };
    let (stop, done) = (AtomicBool::new(false), AtomicBool::new(false));
    let (joins_tx, joins_rx) = mpsc::channel();
    let nonce = seal::nonce();
    let trust = Trust { key: key.as_ref(), nonce: &nonce };
    let predecessor = (who.rank + who.size - 1) % who.size;
    // The gate port's sources: the listener admits by it, the roster's refusals count there.
    let ledger = Ledger::of(&listen::policy(&opts.test));
    let v = std::thread::scope(|scope| {
        // A stopping signal ends every wait of the gate (and the listener) at once.
        scope.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                if let Some(sig) = nw_pid1::sys::pending(&STOPPING) {
                    signal.store(sig, Ordering::SeqCst);
                    stop.store(true, Ordering::SeqCst);
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        // The ring's step: this pod's listener serves its predecessor (and, on rank 0, takes the
        // joins) until the verdict is in, while this thread joins, tests its successor, reports.
        let serve = || {
            let (job, test, stop, ledger) = (&who.job, &opts.test, &stop, ledger.clone());
            let joins = (who.rank == 0).then_some(joins_tx);
            let l_opts = listen::Listen { job, predecessor, test, trust, joins, stop, ledger };
            // Bounded by the verdict (stop), or else by the longest the gate can last.
            listen::serve(&l, l_opts, fabric, Instant::now() + wait * 2 + timeout * 8 + Duration::from_secs(3600))
        };
        let test = || {
            let v = if who.rank == 0 {
                let until = Instant::now() + wait;
                let joins = coordinator::Joins { rx: joins_rx, until, cancel: &stop, ledger: ledger.clone() };
                coordinator::run(&who, &me, fabric, &limits, joins, trust, opts)
            } else {
                drop(joins_rx);
                member::take_part(&who, &me, fabric, &limits, opts, &stop, trust)
            };
            stop.store(true, Ordering::SeqCst);
            v
        };
        let (v, served) = ring::step(serve, test);
        done.store(true, Ordering::SeqCst);
        match served {
            Some(served) if served.strays > 0 => {
                eprintln!("{PREFIX} gate: {} stray connection(s) ignored on port {}", served.strays, who.port)
            }
            Some(_) => {}
            None => eprintln!("{PREFIX} gate: the listener thread stopped"),
        }
        v
    });
    drop(l);
    Ok((who, v))
}

//! The gate's coordination on 127.0.0.1, every pod a thread of this test with a stand-in fabric
//! (the pair test is a hello exchange plus a result the test chooses), so that the protocol is
//! tested without RDMA: a healthy job starts everywhere; one failed rail stops every pod with
//! the cause in its termination file; a pod that never comes is named after the wait; strays
//! are ignored; a pod of another job is refused. Then the real binary on fixture nodes (no
//! ibverbs there): a gate that cannot test refuses with 125, `--gate=warn` starts anyway.
//! The real pair test runs in the fabric lab (`tests/lab/fabric/78-gate*.sh`).

mod common;
mod standin;

use std::ffi::OsString;
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::Run;
use nccl_wrap::detect::Vars;
use nccl_wrap::gate::{self, Outcome};
use nccl_wrap::pairtest::wire::Message;
use standin::*;

#[test]
fn a_healthy_job_starts_on_every_pod() {
    let scratch = Scratch::new("healthy");
    let j = job(3);
    let ran = run_pods(&j, (0..3).map(|r| (r, fake(r))).collect(), &scratch);
    for r in &ran {
        assert_eq!(r.outcome, Outcome::Start, "rank {}: {:?}", r.rank, r.verdict);
        assert_eq!((r.verdict.pairs, r.verdict.failed_total), (3, 0), "{:?}", r.verdict);
        assert!(!scratch.log(r.rank).exists(), "no termination message when the command starts");
    }
}

#[test]
fn a_two_pod_job_tests_the_pair_both_ways_and_a_one_pod_job_itself() {
    let scratch = Scratch::new("small");
    let j = job(2);
    let ran = run_pods(&j, vec![(0, fake(0)), (1, fake(1))], &scratch);
    assert!(ran.iter().all(|r| r.outcome == Outcome::Start && r.verdict.pairs == 2), "{ran:?}");
    let j = job(1);
    let ran = run_pods(&j, vec![(0, fake(0))], &scratch);
    assert!(ran[0].outcome == Outcome::Start && ran[0].verdict.pairs == 1, "{ran:?}");
}

#[test]
fn one_failed_rail_stops_every_pod_with_the_cause_in_its_termination_file() {
    let scratch = Scratch::new("drop");
    let j = job(3);
    let mut bad = fake(1);
    bad.drops = true;
    let ran = run_pods(&j, vec![(0, fake(0)), (1, bad), (2, fake(2))], &scratch);
    for r in &ran {
        assert_eq!(r.outcome, Outcome::Refuse, "rank {}", r.rank);
        assert_eq!(r.verdict, ran[0].verdict, "every pod gets the same verdict");
        let text = std::fs::read_to_string(scratch.log(r.rank)).expect("termination message");
        assert!(
            text.starts_with("nccl-wrap refused to start the command: gate: 1 failure(s) over 3 pair(s)"),
            "{text}"
        );
        assert!(text.contains("pod-1 (rank 1) rxe0:1 -> pod-2 (rank 2) rxe0:1: retry-exceeded:"), "{text}");
    }
    let f = &ran[0].verdict.findings[0];
    assert_eq!((f.rank, f.peer_rank, f.cause.as_deref()), (1, Some(2), Some("retry-exceeded")));
}

#[test]
fn with_gate_prune_a_rail_failing_on_one_pod_is_dropped_on_every_pod_and_the_job_starts() {
    use nccl_wrap::gate::wire::Dropped;
    let scratch = Scratch::new("prune");
    let mut j = job(3);
    // Three rails on every pod (rxe0:1, mlx5_1:1, mlx5_2:1); rank 1's second fails towards rank 2.
    let pods = || {
        let pod = |r| {
            let mut f = fake(r);
            f.extra_rails = 2;
            f.fails_rail = (r == 1).then_some(1);
            (r, f)
        };
        (0..3).map(pod).collect::<Vec<_>>()
    };
    // Without --gate-prune: every pod refuses, naming the rail, as before.
    let ran = run_pods(&j, pods(), &scratch);
    for r in &ran {
        assert_eq!(r.outcome, Outcome::Refuse, "rank {}: {:?}", r.rank, r.verdict);
        assert!(r.pruned.is_empty() && r.verdict.dropped.is_empty(), "{r:?}");
        let text = std::fs::read_to_string(scratch.log(r.rank)).expect("termination message");
        assert!(text.contains("pod-1 (rank 1) mlx5_1:1 -> pod-2 (rank 2) mlx5_1:1: retry-exceeded:"), "{text}");
        std::fs::remove_file(scratch.log(r.rank)).expect("cleared");
    }
    // With it: every pod starts with the same list less that place, and says so.
    j.prune = true;
    let ran = run_pods(&j, pods(), &scratch);
    for r in &ran {
        assert_eq!(r.outcome, Outcome::Start, "rank {}: {:?}", r.rank, r.verdict);
        assert_eq!(r.verdict, ran[0].verdict, "every pod gets the same verdict");
        assert_eq!(r.verdict.dropped, [Dropped { position: 1, finding: 0 }]);
        assert_eq!(r.pruned.iter().map(|p| p.rail.as_str()).collect::<Vec<_>>(), ["mlx5_1:1"]);
        assert!(
            r.pruned[0].line.starts_with("gate: --gate-prune: mlx5_1:1 (rail 2 of 3) is dropped here, as its place is on every pod: pod-1 (rank 1) mlx5_1:1 -> pod-2 (rank 2) mlx5_1:1: retry-exceeded:"),
            "{}",
            r.pruned[0].line
        );
        assert!(!scratch.log(r.rank).exists(), "no termination message when the command starts");
    }
    // A pod that did not ask for it: nothing is dropped anywhere, and every pod refuses.
    let mut one_unasked = pods();
    one_unasked[1].1.no_prune = true;
    let ran = run_pods(&j, one_unasked, &scratch);
    for r in &ran {
        assert_eq!(r.outcome, Outcome::Refuse, "rank {}: {:?}", r.rank, r.verdict);
        assert!(r.pruned.is_empty() && r.verdict.dropped.is_empty(), "{r:?}");
    }
    // Every rail failing, or a pod with one rail more: refused, pruning or not.
    let every = |r| {
        let mut f = fake(r);
        f.drops = true;
        (r, f)
    };
    let ran = run_pods(&j, (0..3).map(every).collect(), &scratch);
    assert!(ran.iter().all(|r| r.outcome == Outcome::Refuse && r.pruned.is_empty()), "{ran:?}");
    let mut wide = pods();
    wide[2].1.extra_rails = 3;
    let ran = run_pods(&j, wide, &scratch);
    for r in &ran {
        assert_eq!(r.outcome, Outcome::Refuse, "rank {}", r.rank);
        let text = std::fs::read_to_string(scratch.log(r.rank)).expect("termination message");
        assert!(text.contains("pod-2 (rank 2): rail-count:"), "{text}");
    }
}

#[test]
fn a_slow_pair_is_named_on_every_pod_and_refuses_only_when_asked() {
    let scratch = Scratch::new("slow");
    let mut j = job(4);
    // Rank 2's pair towards rank 3 moves a third of what the others move.
    let pods = || {
        (0..4)
            .map(|r| {
                let mut f = fake(r);
                f.gbytes_per_s = if r == 2 { 15.0 } else { 45.0 + f64::from(r) };
                (r, f)
            })
            .collect::<Vec<_>>()
    };
    let ran = run_pods(&j, pods(), &scratch);
    for r in &ran {
        assert_eq!(r.outcome, Outcome::Start, "rank {}: {:?}", r.rank, r.verdict);
        assert_eq!(r.verdict, ran[0].verdict, "every pod gets the same verdict");
        assert_eq!((r.verdict.slow_total, r.verdict.failed_total), (1, 0), "{:?}", r.verdict);
        let s = &r.verdict.slow[0];
        assert_eq!((s.rank, s.peer_rank, s.cause.as_deref()), (2, Some(3), Some("slow-pair")));
        assert_eq!(s.summary, "passes, but slowly: 120 Gb/s: 32 % of the job's median 364 Gb/s");
    }
    // --gate-refuse-slow: the same job stops on every pod, the slow pair in the termination file.
    j.slow.refuse = true;
    let ran = run_pods(&j, pods(), &scratch);
    for r in &ran {
        assert_eq!(r.outcome, Outcome::Refuse, "rank {}", r.rank);
        let text = std::fs::read_to_string(scratch.log(r.rank)).expect("termination message");
        assert!(
            text.contains("pod-2 (rank 2) rxe0:1 -> pod-3 (rank 3) rxe0:1: slow-pair: passes, but slowly: 120 Gb/s"),
            "{text}"
        );
    }
}

#[test]
fn a_pod_whose_bootstrap_cannot_reach_rank_0s_family_stops_the_job_and_is_named() {
    let scratch = Scratch::new("bootstrap");
    let j = job(3);
    let mut v6 = fake(2);
    v6.bootstrap_family = Some("AF_INET6");
    let ran = run_pods(&j, vec![(0, fake(0)), (1, fake(1)), (2, v6)], &scratch);
    for r in &ran {
        assert_eq!(r.outcome, Outcome::Refuse, "rank {}", r.rank);
        let text = std::fs::read_to_string(scratch.log(r.rank)).expect("termination message");
        assert!(
            text.contains(
                "pod-2 (rank 2): bootstrap-family: NCCL's bootstrap here uses eth0 (AF_INET6), rank 0's eth0 (AF_INET)"
            ),
            "{text}"
        );
    }
    // Families unknown (a user's interface kept): nothing to compare, the job starts.
    let mut unknown = fake(2);
    unknown.bootstrap_family = None;
    let ran = run_pods(&j, vec![(0, fake(0)), (1, fake(1)), (2, unknown)], &scratch);
    assert!(ran.iter().all(|r| r.outcome == Outcome::Start), "{ran:?}");
}

#[test]
fn a_pod_handing_nccl_one_rail_more_than_the_others_stops_the_job_and_is_named() {
    let scratch = Scratch::new("rails");
    let j = job(3);
    let mut wide = fake(2);
    wide.extra_rails = 1;
    let ran = run_pods(&j, vec![(0, fake(0)), (1, fake(1)), (2, wide)], &scratch);
    for r in &ran {
        assert_eq!(r.outcome, Outcome::Refuse, "rank {}", r.rank);
        let text = std::fs::read_to_string(scratch.log(r.rank)).expect("termination message");
        assert!(text.contains("pod-2 (rank 2): rail-count: this pod hands NCCL 2 rail(s)"), "{text}");
        assert!(!text.contains("(rank 1): rail-count"), "{text}");
    }
}

#[test]
fn a_pod_that_never_comes_is_named_after_the_wait() {
    let scratch = Scratch::new("missing");
    let mut j = job(3);
    j.wait_ms = 1500;
    let start = Instant::now();
    let ran = run_pods(&j, vec![(0, fake(0)), (1, fake(1))], &scratch);
    assert!(start.elapsed() < Duration::from_secs(10), "{:?}", start.elapsed());
    for r in &ran {
        assert_eq!(r.outcome, Outcome::Refuse);
        assert_eq!((r.verdict.missing.clone(), r.verdict.missing_total), (vec![2], 1), "{:?}", r.verdict);
        let text = std::fs::read_to_string(scratch.log(r.rank)).expect("termination message");
        assert!(text.contains("1 of 3 pod(s) never joined within 1500 ms: rank(s) 2"), "{text}");
    }
}

#[test]
fn a_coordinator_that_never_comes_is_named() {
    let scratch = Scratch::new("nocoord");
    let mut j = job(2);
    j.wait_ms = 700;
    let ran = run_pods(&j, vec![(1, fake(1))], &scratch);
    assert_eq!(ran[0].outcome, Outcome::Refuse);
    let f = &ran[0].verdict.findings[0];
    assert!(f.summary.starts_with(&format!("the coordinator {} could not be reached", j.coordinator)), "{f:?}");
}

/// Connects to `port` and sends `bytes`, holding the connection for `hold`.
fn stray(port: u16, bytes: &[u8], hold: Duration) -> std::thread::JoinHandle<()> {
    let bytes = bytes.to_vec();
    std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
                let _ = s.write_all(&bytes);
                std::thread::sleep(hold);
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    })
}

#[test]
fn stray_connections_during_the_wait_are_ignored() {
    let scratch = Scratch::new("strays");
    let j = job(2);
    let plain = nccl_wrap::pairtest::wire::encode(&Message::Hello(hello(&fake(7), None))).expect("frame");
    let mut strays = Vec::new();
    for &p in &j.ports {
        strays.push(stray(p, b"GET / HTTP/1.0\r\n\r\n", Duration::ZERO));
        strays.push(stray(p, b"", Duration::from_millis(800)));
        strays.push(stray(p, &plain, Duration::from_millis(300)));
    }
    // The strays go first; rank 1 comes late.
    let vars = Vars::new();
    let ran = std::thread::scope(|s| {
        let o0 = options(&j, 0, Some(scratch.log(0)));
        let o1 = options(&j, 1, Some(scratch.log(1)));
        let vars = &vars;
        let a = s.spawn(move || gate::run(vars, &fake(0), &o0));
        std::thread::sleep(Duration::from_millis(400));
        let b = s.spawn(move || gate::run(vars, &fake(1), &o1));
        vec![a.join().expect("rank 0"), b.join().expect("rank 1")]
    });
    for t in strays {
        let _ = t.join();
    }
    assert!(ran.iter().all(|r| r.outcome == Outcome::Start), "{ran:?}");
}

#[test]
fn a_pod_of_another_job_is_refused_and_the_job_goes_on() {
    let scratch = Scratch::new("foreign");
    let j = job(2);
    let mut other = job(2);
    other.coordinator = j.coordinator.clone();
    other.id = Some("another-job".into());
    let vars = Vars::new();
    let ran = std::thread::scope(|s| {
        let vars = &vars;
        let o0 = options(&j, 0, Some(scratch.log(0)));
        let o1 = options(&j, 1, Some(scratch.log(1)));
        let ox = options(&other, 1, Some(scratch.log(9)));
        let a = s.spawn(move || gate::run(vars, &fake(0), &o0));
        let x = s.spawn(move || gate::run(vars, &fake(5), &ox));
        std::thread::sleep(Duration::from_millis(400));
        let b = s.spawn(move || gate::run(vars, &fake(1), &o1));
        (a.join().expect("rank 0"), b.join().expect("rank 1"), x.join().expect("foreign"))
    });
    assert_eq!(ran.0.outcome, Outcome::Start, "{:?}", ran.0.verdict);
    assert_eq!(ran.1.outcome, Outcome::Start, "{:?}", ran.1.verdict);
    assert_eq!(ran.2.outcome, Outcome::Refuse);
    let text = std::fs::read_to_string(scratch.log(9)).expect("termination message");
    assert!(text.contains("a pod of another job (job \"another-job\""), "{text}");
}

#[test]
fn a_pod_without_rdma_stops_the_job_and_is_named() {
    let scratch = Scratch::new("noport");
    let j = job(3);
    let mut bad = fake(2);
    bad.no_port = true;
    let ran = run_pods(&j, vec![(0, fake(0)), (1, fake(1)), (2, bad)], &scratch);
    for r in &ran {
        assert_eq!(r.outcome, Outcome::Refuse);
        let f = &r.verdict.findings[0];
        assert_eq!(
            (f.rank, f.cause.as_deref(), f.summary.as_str()),
            (2, Some("no-port"), "no usable RDMA port in this pod")
        );
    }
}

#[test]
fn warn_reports_and_starts_anyway() {
    let scratch = Scratch::new("warn");
    let mut j = job(2);
    j.warn = true;
    let mut bad = fake(0);
    bad.drops = true;
    let ran = run_pods(&j, vec![(0, bad), (1, fake(1))], &scratch);
    for r in &ran {
        assert_eq!(r.outcome, Outcome::Start);
        assert!(!r.verdict.go);
        assert!(!scratch.log(r.rank).exists());
    }
}

// The real binary: fixture nodes have no ibverbs, so the gate cannot test and must refuse.

fn gate_run(node: &str, scratch: &Scratch, extra: &[(&str, String)], args: &[&str]) -> common::Done {
    let mut r = Run::node(node).env("NCCL_WRAP_TERMINATION_LOG", scratch.log(0));
    for (k, v) in extra {
        r = r.env(k, v);
    }
    let mut argv: Vec<OsString> = args.iter().map(OsString::from).collect();
    argv.extend(["--", "sh", "-c", "echo the command ran"].map(OsString::from));
    r.args(argv)
}

#[test]
fn the_binary_refuses_with_125_when_the_gate_cannot_test() {
    let scratch = Scratch::new("bin");
    let port = free_port().to_string();
    let vars = [
        ("PET_NODE_RANK", "0".to_string()),
        ("PET_NNODES", "1".to_string()),
        ("PET_MASTER_ADDR", "127.0.0.1".to_string()),
        ("NCCL_WRAP_GATE_PORT", port),
        ("NCCL_WRAP_GATE", "1".to_string()),
    ];
    let d = gate_run("h100-roce-sriov", &scratch, &vars, &[]);
    assert_eq!(d.code(), Some(125), "{}", d.stderr());
    assert!(!d.stdout().contains("the command ran"), "{}", d.stdout());
    assert!(d.stderr().contains("nccl-wrap: gate: cannot run:") || d.stderr().contains("no-port"), "{}", d.stderr());
    assert!(d.stderr().contains("refusing to start \"sh\": --gate (NCCL_WRAP_GATE) is set"), "{}", d.stderr());
    let text = std::fs::read_to_string(scratch.log(0)).expect("termination message");
    assert!(text.starts_with("nccl-wrap refused to start the command: gate: 1 failure(s)"), "{text}");
    assert!(text.contains("no-port: ping moves bytes through ibverbs, which are not used here"), "{text}");

    // --gate=warn: the same report, and the command runs.
    let _ = std::fs::remove_file(scratch.log(0));
    let d = gate_run("h100-roce-sriov", &scratch, &vars, &["--gate=warn"]);
    assert_eq!(d.code(), Some(0), "{}", d.stderr());
    assert!(d.stdout().contains("the command ran"));
    assert!(d.stderr().contains("gate: --gate=warn: starting the command anyway"), "{}", d.stderr());
    assert!(!scratch.log(0).exists());
}

#[test]
fn the_binary_names_a_missing_rank_source() {
    let scratch = Scratch::new("norank");
    let d = gate_run("h100-roce-sriov", &scratch, &[], &["--gate"]);
    assert_eq!(d.code(), Some(125), "{}", d.stderr());
    assert!(d.stderr().contains("the gate needs this pod's rank: set NCCL_WRAP_GATE_RANK"), "{}", d.stderr());
    let text = std::fs::read_to_string(scratch.log(0)).expect("termination message");
    assert!(text.contains("gate-usage: the gate needs this pod's rank"), "{text}");
}

#[test]
fn without_the_gate_nothing_listens_and_the_command_runs() {
    let scratch = Scratch::new("off");
    let d = gate_run("h100-roce-sriov", &scratch, &[("NCCL_WRAP_GATE", "0".into())], &[]);
    assert_eq!(d.code(), Some(0), "{}", d.stderr());
    assert!(!d.stderr().contains("nccl-wrap: gate"), "{}", d.stderr());
    assert!(!scratch.log(0).exists());
}

#[test]
fn a_stopping_signal_ends_the_gate_at_once_even_when_supervising() {
    // Under --init every signal is blocked from the start (to be forwarded to the command); the
    // gate's waits (here: a coordinator that never comes, a 60 s wait) must still end on SIGTERM,
    // as the command would: 143, and the command never runs.
    let scratch = Scratch::new("sigterm");
    let root = common::fixture("h100-roce-sriov");
    let mut cmd = common::bin_command();
    cmd.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("NCCL_WRAP_SYSFS_ROOT", root.join("sys"))
        .env("NCCL_WRAP_ANNOTATIONS", root.join("podnetinfo/annotations"))
        .env("NCCL_WRAP_TERMINATION_LOG", scratch.log(0))
        .args(["--init", "--gate", "--gate-rank=1", "--gate-size=2", "--gate-wait-ms=60000"])
        .arg(format!("--gate-coordinator=127.0.0.1:{}", free_port()))
        .args(["--", "sh", "-c", "echo the command ran"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("spawn nccl-wrap");
    std::thread::sleep(Duration::from_millis(800));
    let start = Instant::now();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("nccl-wrap did not end within 10 s of SIGTERM during the gate");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().expect("output");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(status.code(), Some(143), "{stderr}");
    assert!(start.elapsed() < Duration::from_secs(3), "{:?}", start.elapsed());
    assert!(!stdout.contains("the command ran"), "{stdout}");
    assert!(stderr.contains("gate: signal 15 arrived during the gate: the command is not started"), "{stderr}");
}

#[test]
fn a_silent_stray_is_closed_when_the_gate_ends() {
    // Its first message would be waited for until the hello deadline (2 s here); the gate ends
    // sooner, and must not leave that connection open beside the command.
    let scratch = Scratch::new("silent");
    let j = job(2);
    let port = j.ports[0];
    let (tx, rx) = std::sync::mpsc::channel();
    let stray = std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(5);
        loop {
            if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
                let _ = tx.send(());
                let t = Instant::now();
                s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
                let mut b = [0u8; 64];
                let n = std::io::Read::read(&mut s, &mut b).map_err(|e| e.to_string());
                return (n, t.elapsed());
            }
            assert!(Instant::now() < until, "the gate port never took a connection");
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let vars = Vars::new();
    let ran = std::thread::scope(|s| {
        let vars = &vars;
        let o0 = options(&j, 0, Some(scratch.log(0)));
        let o1 = options(&j, 1, Some(scratch.log(1)));
        let a = s.spawn(move || gate::run(vars, &fake(0), &o0));
        // Rank 1 comes once the stray is in (and accepted: the listener polls every 5 ms).
        rx.recv_timeout(Duration::from_secs(5)).expect("the stray connected");
        std::thread::sleep(Duration::from_millis(100));
        let b = gate::run(vars, &fake(1), &o1);
        (a.join().expect("rank 0"), b)
    });
    assert_eq!((ran.0.outcome, ran.1.outcome), (Outcome::Start, Outcome::Start), "{ran:?}");
    let (n, waited) = stray.join().expect("stray");
    assert_eq!(n, Ok(0), "the stray's connection ends without a message");
    assert!(waited < Duration::from_millis(1800), "closed after {waited:?}, not at the gate's end");
}

fn parse(args: &[&str], env: &[(&str, &str)]) -> Result<nccl_wrap::cli::Cli, nccl_wrap::cli::CliError> {
    let argv: Vec<OsString> = std::iter::once("nccl-wrap").chain(args.iter().copied()).map(OsString::from).collect();
    let env: Vec<(String, OsString)> = env.iter().map(|(k, v)| (k.to_string(), OsString::from(v))).collect();
    nccl_wrap::cli::Cli::parse(&argv, |name| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
}

#[test]
fn the_switch_and_its_options_parse_from_flags_and_variables() {
    use nccl_wrap::cli::{Gate, GATE_PORT, GATE_WAIT_MS};
    let c = parse(&["--", "torchrun"], &[]).expect("parse");
    assert_eq!((c.opts.gate, c.opts.gate_port, c.opts.gate_wait_ms), (Gate::Off, GATE_PORT, GATE_WAIT_MS));
    assert_eq!(parse(&["--gate", "--", "x"], &[]).expect("parse").opts.gate, Gate::Refuse);
    assert_eq!(parse(&["--gate=warn", "--", "x"], &[]).expect("parse").opts.gate, Gate::Warn);
    assert_eq!(parse(&["--", "x"], &[("NCCL_WRAP_GATE", "WARN")]).expect("parse").opts.gate, Gate::Warn);
    assert_eq!(parse(&["--gate=off", "--", "x"], &[("NCCL_WRAP_GATE", "1")]).expect("parse").opts.gate, Gate::Off);
    // Set but unreadable, the switch counts as asked for: the run refuses, naming it.
    let c = parse(&["--", "x"], &[("NCCL_WRAP_GATE", "maybe")]).expect("parse");
    let refusal = nccl_wrap::cli::verdict(&c).refusal.expect("refusal");
    assert!(refusal.contains("NCCL_WRAP_GATE") && refusal.contains("warn"), "{refusal}");
    let c = parse(
        &["--gate", "--gate-rank=3", "--gate-coordinator", "train-0:2000", "--", "x"],
        &[("NCCL_WRAP_GATE_SIZE", "8"), ("NCCL_WRAP_GATE_ID", "uid"), ("NCCL_WRAP_GATE_WAIT_MS", "1000")],
    )
    .expect("parse");
    assert_eq!(
        (c.opts.gate_rank, c.opts.gate_size, c.opts.gate_coordinator.as_deref(), c.opts.gate_id.as_deref()),
        (Some(3), Some(8), Some("train-0:2000"), Some("uid"))
    );
    assert_eq!(c.opts.gate_wait_ms, 1000);
    // Out of range: ignored alone without the gate, a refusal with it.
    let c = parse(&["--gate-port=0", "--", "x"], &[]).expect("parse");
    assert_eq!((c.opts.gate_port, nccl_wrap::cli::verdict(&c).refusal), (GATE_PORT, None));
    let c = parse(&["--gate", "--gate-port=0", "--", "x"], &[]).expect("parse");
    assert!(nccl_wrap::cli::verdict(&c).refusal.is_some_and(|r| r.contains("--gate-port")));
    assert!(parse(&["--gate-port=0"], &[]).is_err(), "no command: a usage error");
}

#[test]
fn gate_prune_without_the_gate_refuses_naming_both() {
    for (args, env) in
        [(&["--gate-prune", "--", "x"][..], &[][..]), (&["--", "x"][..], &[("NCCL_WRAP_GATE_PRUNE", "1")][..])]
    {
        let c = parse(args, env).expect("parse");
        assert!(c.opts.gate_prune);
        let (c, v) = nccl_wrap::cli::validate(c, &Vars::new());
        let refusal = v.refusal.unwrap_or_default();
        assert!(
            refusal.contains("--gate-prune (NCCL_WRAP_GATE_PRUNE)") && refusal.contains("--gate (NCCL_WRAP_GATE)"),
            "{refusal}"
        );
        assert!(c.gate.is_none());
    }
    let c = parse(&["--gate", "--gate-prune", "--", "x"], &[]).expect("parse");
    let (c, v) = nccl_wrap::cli::validate(c, &Vars::new());
    assert_eq!(v.refusal, None);
    assert!(c.cli.opts.gate_prune && c.gate.is_some());
    // The binary: exit 125 before anything runs.
    let scratch = Scratch::new("prune-alone");
    let d = gate_run("h100-roce-sriov", &scratch, &[("NCCL_WRAP_GATE_PRUNE", "1".into())], &[]);
    assert_eq!(d.code(), Some(125), "{}", d.stderr());
    assert!(!d.stdout().contains("the command ran"), "{}", d.stdout());
    assert!(
        d.stderr().contains("--gate-prune (NCCL_WRAP_GATE_PRUNE) is set and --gate (NCCL_WRAP_GATE) is not"),
        "{}",
        d.stderr()
    );
}

#[test]
fn gate_prune_refuses_before_joining_where_nccl_ib_hca_is_the_users() {
    // That pod could not drop a rail: it never joins, so the job refuses everywhere, never split.
    let scratch = Scratch::new("prune-user");
    let vars = [
        ("PET_NODE_RANK", "0".to_string()),
        ("PET_NNODES", "1".to_string()),
        ("PET_MASTER_ADDR", "127.0.0.1".to_string()),
        ("NCCL_WRAP_GATE_PORT", free_port().to_string()),
        ("NCCL_WRAP_GATE", "1".to_string()),
        ("NCCL_WRAP_GATE_PRUNE", "1".to_string()),
        ("NCCL_IB_HCA", "=mlx5_6".to_string()),
    ];
    let d = gate_run("h100-roce-sriov", &scratch, &vars, &[]);
    assert_eq!(d.code(), Some(125), "{}", d.stderr());
    assert!(
        d.stderr().contains("--gate-prune (NCCL_WRAP_GATE_PRUNE) is set and NCCL_IB_HCA is the user's, kept"),
        "{}",
        d.stderr()
    );
    assert!(!d.stderr().contains("nccl-wrap: gate: rank"), "{}", d.stderr());
}

#[test]
fn the_gate_reads_pings_knobs_from_their_variables_only_when_on() {
    let knobs = [("NCCL_WRAP_PING_ITERS", "20"), ("NCCL_WRAP_PING_TIMEOUT_MS", "20000"), ("NCCL_WRAP_PING_JSON", "1")];
    let c = parse(&["--gate", "--", "x"], &knobs).expect("parse");
    assert_eq!((c.opts.gate_ping.iters, c.opts.gate_ping.timeout_ms, c.opts.gate_ping.json), (20, 20000, true));
    // Off, ping's variables are none of a run's business, even a wrong one.
    let c = parse(&["--", "x"], &[("NCCL_WRAP_PING_ITERS", "lots")]).expect("parse");
    assert_eq!(c.opts.gate_ping.iters, 1000);
    let c = parse(&["--gate", "--", "x"], &[("NCCL_WRAP_PING_ITERS", "lots")]).expect("parse");
    assert!(nccl_wrap::cli::verdict(&c).refusal.is_some_and(|r| r.contains("NCCL_WRAP_PING_ITERS")));
    // ping's own options stay ping's: not on a run's command line (named, ignored).
    let c = parse(&["--iters=5", "--", "x"], &[]).expect("parse");
    assert_eq!(c.opts.gate_ping.iters, 1000);
    assert_eq!(
        nccl_wrap::cli::verdict(&c).ignored,
        vec!["--iters is an option of `nccl-wrap ping`, not of a run, ignored".to_string()]
    );
    assert!(parse(&["--iters=5", "x"], &[]).is_err());
}

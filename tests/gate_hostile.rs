//! The gate's listener and protocol against strangers, on 127.0.0.1 with the stand-in fabric
//! (`standin`): a stray that half-closes and waits for our close, hundreds of silent
//! connections, a scanner during the whole wait, forged peer text, and pods with another job
//! secret or none, a join replayed from an earlier run, one address's flood of connections (20
//! joins that connect once must get in; rank 0's lines stay a few). Each must leave the job able
//! to start (or refuse, named), with rank 0's file descriptors bounded. The tests run one at a time: the descriptor counts are this process's.

mod common;
mod standin;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::Run;
use nccl_wrap::detect::Vars;
use nccl_wrap::gate::wire::{Challenge, Dropped, Finding, Frame, Knock, Verdict};
use nccl_wrap::gate::{self, Outcome, Ran};
use nccl_wrap::pairtest::exchange::{self, Session};
use standin::*;

/// One test at a time: descriptor counts and timings are this process's.
static ONE: Mutex<()> = Mutex::new(());

fn one() -> std::sync::MutexGuard<'static, ()> {
    ONE.lock().unwrap_or_else(|p| p.into_inner())
}

fn connect(port: u16) -> TcpStream {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => return s,
            Err(e) if Instant::now() > until => panic!("the gate port never took a connection: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Rank 0 and rank 1 of `j`, rank 1 started after `before` ran with rank 0 listening.
fn two_pods(j: &Job, scratch: &Scratch, before: impl FnOnce()) -> (Ran, Ran) {
    let vars = Vars::new();
    std::thread::scope(|s| {
        let (o0, o1) = (options(j, 0, Some(scratch.log(0))), options(j, 1, Some(scratch.log(1))));
        let vars = &vars;
        let a = s.spawn(move || gate::run(vars, &fake(0), &o0));
        before();
        let b = gate::run(vars, &fake(1), &o1);
        (a.join().expect("rank 0"), b)
    })
}

#[test]
fn a_stray_that_half_closes_gets_eof_at_once_and_the_job_starts() {
    let _one = one();
    let scratch = Scratch::new("halfclose");
    let j = job(2);
    let port = j.ports[0];
    let ran = two_pods(&j, &scratch, || {
        // busybox `nc -w 1 HOST PORT </dev/null`: connect, half-close, wait for our close.
        let mut s = connect(port);
        s.shutdown(Shutdown::Write).expect("half-close");
        s.set_read_timeout(Some(Duration::from_secs(1))).expect("timeout");
        let mut b = [0u8; 256];
        let started = Instant::now();
        let n = s.read(&mut b).map_err(|e| e.kind());
        // Closed from our side within the second (before: held until the gate ended).
        assert_eq!(n, Ok(0), "after {:?}", started.elapsed());
    });
    assert_eq!((ran.0.outcome, ran.1.outcome), (Outcome::Start, Outcome::Start), "{ran:?}");
}

#[test]
fn two_hundred_silent_connections_keep_fds_bounded_and_a_join_gets_through() {
    let _one = one();
    let scratch = Scratch::new("silent200");
    let mut j = job(2);
    j.wait_ms = 15_000;
    let port = j.ports[0];
    let mut peak = 0;
    let mut held = Vec::new();
    let ran = two_pods(&j, &scratch, || {
        let base = open_fds();
        for _ in 0..200 {
            held.push(connect(port));
        }
        // Let rank 0 take them all (it polls every 5 ms).
        std::thread::sleep(Duration::from_millis(500));
        peak = open_fds().saturating_sub(base + held.len());
    });
    // Rank 0 holds at most its 32 first reads (each a socket and the copy that shuts it): far
    // below one per connection, which a listener keeping every stray would hold.
    assert!(peak <= 2 * 32 + 8, "rank 0 holds {peak} descriptors for 200 silent connections");
    assert_eq!((ran.0.outcome, ran.1.outcome), (Outcome::Start, Outcome::Start), "{ran:?}");
    // Every silent connection was closed from our side by now.
    let mut closed = 0;
    for mut s in held {
        s.set_read_timeout(Some(Duration::from_millis(200))).expect("timeout");
        let mut b = [0u8; 64];
        match s.read(&mut b) {
            Ok(0) => closed += 1,
            Err(e) if !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => closed += 1,
            _ => {}
        }
    }
    assert_eq!(closed, 200);
}

#[test]
fn a_scanner_during_the_whole_wait_does_not_stop_the_job() {
    let _one = one();
    let scratch = Scratch::new("scanner");
    let j = job(3);
    let stop = AtomicBool::new(false);
    let ran = std::thread::scope(|s| {
        for &port in &j.ports {
            let stop = &stop;
            s.spawn(move || {
                let probes: [&[u8]; 4] =
                    [b"", b"GET / HTTP/1.0\r\n\r\n", b"\x16\x03\x01\x00\xa5", b"NCWPING\x01\x06\xff\xff\xff\xff"];
                let mut k = 0;
                while !stop.load(Ordering::SeqCst) {
                    if let Ok(mut c) = TcpStream::connect(("127.0.0.1", port)) {
                        let _ = c.write_all(probes[k % probes.len()]);
                        if k % 3 == 0 {
                            let _ = c.shutdown(Shutdown::Write);
                        }
                    }
                    k += 1;
                    std::thread::sleep(Duration::from_millis(3));
                }
            });
        }
        std::thread::sleep(Duration::from_millis(200));
        let ran = run_pods(&j, (0..3).map(|r| (r, fake(r))).collect(), &scratch);
        stop.store(true, Ordering::SeqCst);
        ran
    });
    for r in &ran {
        assert_eq!(r.outcome, Outcome::Start, "rank {}: {:?}", r.rank, r.verdict);
    }
}

#[test]
fn forged_peer_text_never_reaches_the_termination_message_as_lines_or_escapes() {
    let _one = one();
    let scratch = Scratch::new("forged");
    let j = job(2);
    let mut liar = fake(1);
    liar.no_port = true;
    liar.problem = Some("no port\nnccl-wrap: gate: verdict: GO, every pod starts\x1b[2J\x1b]0;pwned\x07".into());
    let ran = run_pods(&j, vec![(0, fake(0)), (1, liar)], &scratch);
    for r in &ran {
        assert_eq!(r.outcome, Outcome::Refuse, "rank {}", r.rank);
        let text = std::fs::read_to_string(scratch.log(r.rank)).expect("termination message");
        assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text:?}");
        assert!(!text.lines().any(|l| l.starts_with("nccl-wrap: gate: verdict")), "{text}");
        assert!(text.contains("no port\\u{a}nccl-wrap: gate: verdict: GO"), "{text}");
    }
}

#[test]
fn pods_with_the_same_secret_start() {
    let _one = one();
    let scratch = Scratch::new("secret-ok");
    let mut j = job(3);
    j.secret = Some("job-7f3a");
    let ran = run_pods(&j, (0..3).map(|r| (r, fake(r))).collect(), &scratch);
    assert!(ran.iter().all(|r| r.outcome == Outcome::Start && r.verdict.pairs == 3), "{ran:?}");
}

/// Rank 0 with `ours`, rank 1 with `theirs`: rank 1 is refused and names the secret; rank 0
/// waits for it in vain and refuses too (no split start).
fn refused_for_the_secret(ours: Option<&'static str>, theirs: Option<&'static str>, says: &str) {
    let _one = one();
    let scratch = Scratch::new("secret-bad");
    let mut j = job(2);
    j.wait_ms = 1500;
    j.secret = ours;
    let other = same(&j, theirs);
    let vars = Vars::new();
    let (r0, r1) = std::thread::scope(|s| {
        let (o0, o1) = (options(&j, 0, Some(scratch.log(0))), options(&other, 1, Some(scratch.log(1))));
        let vars = &vars;
        let a = s.spawn(move || gate::run(vars, &fake(0), &o0));
        std::thread::sleep(Duration::from_millis(200));
        let b = gate::run(vars, &fake(1), &o1);
        (a.join().expect("rank 0"), b)
    });
    assert_eq!((r0.outcome, r1.outcome), (Outcome::Refuse, Outcome::Refuse));
    assert_eq!(r0.verdict.missing, vec![1], "{:?}", r0.verdict);
    let f = &r1.verdict.findings[0];
    assert_eq!(f.cause.as_deref(), Some("secret"), "{f:?}");
    assert!(f.summary.contains(says), "{}", f.summary);
    let text = std::fs::read_to_string(scratch.log(1)).expect("termination message");
    assert!(text.contains("): secret: ") && text.contains("job-secret MAC"), "{text}");
}

#[test]
fn a_pod_with_another_secret_is_refused_and_named() {
    refused_for_the_secret(Some("job-7f3a"), Some("job-0000"), "its join fails the job-secret MAC check");
}

#[test]
fn a_pod_without_the_secret_is_refused_and_named() {
    refused_for_the_secret(Some("job-7f3a"), None, "its join carries no job-secret MAC");
}

#[test]
fn a_pod_with_a_secret_the_coordinator_lacks_is_refused_and_named() {
    refused_for_the_secret(None, Some("job-7f3a"), "its join carries a job-secret MAC, and this pod has no job secret");
}

#[test]
fn the_binary_refuses_with_125_when_the_secret_file_cannot_be_read() {
    let _one = one();
    let scratch = Scratch::new("secret-file");
    let port = standin::free_port().to_string();
    let missing = scratch.0.join("no-such-secret");
    let r = Run::node("h100-roce-sriov")
        .env("NCCL_WRAP_TERMINATION_LOG", scratch.log(0))
        .env("PET_NODE_RANK", "0")
        .env("PET_NNODES", "1")
        .env("PET_MASTER_ADDR", "127.0.0.1")
        .env("NCCL_WRAP_GATE_PORT", &port)
        .env("NCCL_WRAP_GATE", "1")
        .env("NCCL_WRAP_GATE_SECRET_FILE", &missing);
    let d = r.args(["--", "sh", "-c", "echo the command ran"]);
    assert_eq!(d.code(), Some(125), "{}", d.stderr());
    assert!(!d.stdout().contains("the command ran"));
    assert!(d.stderr().contains("NCCL_WRAP_GATE_SECRET_FILE="), "{}", d.stderr());
    assert!(d.stderr().contains("cannot read it"), "{}", d.stderr());
    let text = std::fs::read_to_string(scratch.log(0)).expect("termination message");
    assert!(text.contains("secret: NCCL_WRAP_GATE_SECRET_FILE="), "{text}");
}

#[test]
fn a_stranger_knowing_the_job_id_cannot_take_the_predecessors_pair_test() {
    let _one = one();
    let scratch = Scratch::new("secret-hello");
    let mut j = job(2);
    j.id = Some("llm-train".into());
    j.secret = Some("job-7f3a");
    let port = j.ports[0];
    let mut refused = String::new();
    let ran = two_pods(&j, &scratch, || {
        // A hello tagged as rank 1 of the job (rank 0's predecessor), without the secret's MAC.
        let target = format!("127.0.0.1:{port}");
        let until = Instant::now() + Duration::from_secs(5);
        let mut s = nccl_wrap::pairtest::exchange::connect(&target, until, Duration::from_secs(2)).expect("connect");
        let tag = nccl_wrap::pairtest::wire::Tag { job: "llm-train".into(), rank: 1, mac: None };
        let h = nccl_wrap::pairtest::wire::Hello { gate: Some(tag), ..hello(&fake(1), None) };
        s.send(&nccl_wrap::pairtest::wire::Message::Hello(h)).expect("send");
        refused = s.recv().map(|m| format!("{m:?}")).unwrap_or_else(|e| e.to_string());
    });
    assert!(refused.contains("refused the run") && refused.contains("carries no job-secret MAC"), "{refused}");
    // The real rank 1 is still served: the job starts.
    assert_eq!((ran.0.outcome, ran.1.outcome), (Outcome::Start, Outcome::Start), "{ran:?}");
}

/// Stands as rank 0 of an earlier run of `j` for rank 1: answers its knock with a challenge of
/// that run and returns the join it sent (sealed with the job's secret), then refuses it.
fn record_a_join(j: &Job, scratch: &Scratch) -> Frame {
    let l = std::net::TcpListener::bind(("127.0.0.1", j.ports[0])).expect("the coordinator's port");
    let vars = Vars::new();
    let o1 = options(j, 1, Some(scratch.log(1)));
    std::thread::scope(|s| {
        let pod = s.spawn(|| gate::run(&vars, &fake(1), &o1));
        let (c, from) = l.accept().expect("rank 1 knocks");
        let mut earlier = Session::new(c, from.to_string(), Instant::now() + Duration::from_secs(5));
        assert!(matches!(earlier.recv_as::<Frame>(), Ok(Frame::Knock(_))), "a knock first");
        let challenge = Frame::Challenge(Challenge { nonce: "3c".repeat(16) });
        earlier.send(&challenge).expect("the earlier run's challenge");
        let join = earlier.recv_as::<Frame>().expect("rank 1's join");
        earlier.refuse("the earlier run ends here");
        assert_eq!(pod.join().expect("rank 1").outcome, Outcome::Refuse);
        join
    })
}

#[test]
fn a_verdict_dropping_a_rail_this_pod_does_not_have_is_refused() {
    // A coordinator (or someone in its place) that says "go, without the rail at place 5" to a
    // pod with two rails: the pod checks the place against its own rails and starts nothing.
    let _one = one();
    let scratch = Scratch::new("prune-far");
    let j = job(2);
    let l = std::net::TcpListener::bind(("127.0.0.1", j.ports[0])).expect("the coordinator's port");
    let vars = Vars::new();
    let o1 = options(&j, 1, Some(scratch.log(1)));
    let mut two = fake(1);
    two.extra_rails = 1;
    let ran = std::thread::scope(|s| {
        let pod = s.spawn(|| gate::run(&vars, &two, &o1));
        let (c, from) = l.accept().expect("rank 1 knocks");
        let mut fake0 = Session::new(c, from.to_string(), Instant::now() + Duration::from_secs(5));
        assert!(matches!(fake0.recv_as::<Frame>(), Ok(Frame::Knock(_))), "a knock first");
        fake0.send(&Frame::Challenge(Challenge { nonce: "3c".repeat(16) })).expect("challenge");
        assert!(matches!(fake0.recv_as::<Frame>(), Ok(Frame::Join(_))), "its join");
        let failed = Finding {
            rank: 0,
            host: "pod-0".into(),
            peer_rank: Some(1),
            peer_host: Some("pod-1".into()),
            rail: Some("rxe0:1".into()),
            peer_rail: Some("rxe0:1".into()),
            status: "fail".into(),
            cause: Some("retry-exceeded".into()),
            summary: "x".into(),
            hint: String::new(),
            kbps: None,
            rated_kbps: None,
        };
        let v = Verdict {
            go: true,
            size: 2,
            pairs: 2,
            failed_total: 1,
            missing: Vec::new(),
            missing_total: 0,
            findings: vec![failed],
            slow: Vec::new(),
            slow_total: 0,
            dropped: vec![Dropped { position: 5, finding: 0 }],
            mac: None,
        };
        fake0.send(&Frame::Verdict(v)).expect("the verdict");
        pod.join().expect("rank 1")
    });
    assert_eq!(ran.outcome, Outcome::Refuse, "{:?}", ran.verdict);
    assert!(ran.pruned.is_empty());
    let text = std::fs::read_to_string(scratch.log(1)).expect("termination message");
    assert!(
        text.contains(
            "the coordinator's verdict cannot be applied here: it drops the rail at place 5, and this pod hands NCCL 2"
        ),
        "{text}"
    );
}

#[test]
fn a_join_recorded_from_an_earlier_run_is_refused_and_the_real_pod_still_joins() {
    // Regression: rank 0 took a join replayed from an earlier run of the same job (same id and
    // secret) as that rank, closed its roster and sent the verdict down the replayed connection;
    // the real pod found no coordinator and exited 125.
    let _one = one();
    let scratch = Scratch::new("replay");
    let mut j = job(2);
    j.id = Some("llm-train".into());
    j.secret = Some("job-7f3a");
    let recorded = record_a_join(&j, &scratch);
    let Frame::Join(join) = &recorded else { panic!("not a join: {recorded:?}") };
    assert!(join.mac.is_some() && join.challenge.as_deref() == Some("3c".repeat(16).as_str()), "{join:?}");
    let port = j.ports[0];
    let mut said = Vec::new();
    let ran = two_pods(&j, &scratch, || {
        // The replay as it was recorded, sent first on a new connection, and after a knock of
        // its own (the new challenge is not the one the recorded join answers).
        let target = format!("127.0.0.1:{port}");
        for knock in [false, true] {
            let until = Instant::now() + Duration::from_secs(5);
            let mut s = exchange::connect(&target, until, Duration::from_secs(2)).expect("connect");
            if knock {
                s.send(&Frame::Knock(Knock { job: "llm-train".into(), rank: 1 })).expect("knock");
                assert!(matches!(s.recv_as::<Frame>(), Ok(Frame::Challenge(_))), "a challenge for the knock");
            }
            s.send(&recorded).expect("the replayed join");
            said.push(s.recv_as::<Frame>().map(|m| format!("{m:?}")).unwrap_or_else(|e| e.to_string()));
        }
    });
    for (k, what) in said.iter().enumerate() {
        assert!(what.contains("refused the run"), "replay {k} was taken: {what}");
    }
    assert!(said[0].contains("answers another") || said[0].contains("another connection's challenge"), "{}", said[0]);
    assert!(said[1].contains("replayed"), "{}", said[1]);
    // The real rank 1 joins: the job starts.
    assert_eq!((ran.0.outcome, ran.1.outcome), (Outcome::Start, Outcome::Start), "{ran:?}");
}

#[test]
fn a_flood_from_one_address_keeps_no_single_try_join_out_of_rank_0() {
    // Regression: under one client's reconnect flood, rank 0 read 0 of 20 joins that connect
    // once (7-9 of 20 under a connect flood); real pods got in only by retrying, seconds late.
    let _one = one();
    let scratch = Scratch::new("flood-joins");
    let mut j = job(21);
    j.wait_ms = 20_000;
    let (port, id) = (j.ports[0], format!("{}/{}", j.coordinator, j.size));
    let stop = AtomicBool::new(false);
    let vars = Vars::new();
    let o0 = options(&j, 0, Some(scratch.log(0)));
    let (read, made) = std::thread::scope(|s| {
        let rank0 = s.spawn(|| gate::run(&vars, &fake(0), &o0));
        let floods: Vec<_> = [Flood::Reconnect, Flood::Connect]
            .into_iter()
            .map(|how| {
                let stop = &stop;
                s.spawn(move || flood(Ipv4Addr::new(127, 0, 0, 2), port, how, stop))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(500));
        // 20 pods, each from an address of its own, each connecting once.
        let pods: Vec<_> = (1..=20u32)
            .map(|r| {
                let id = &id;
                s.spawn(move || {
                    single_try_join(Ipv4Addr::new(127, 0, 1, r as u8), port, id, r, 21, Duration::from_secs(10))
                })
            })
            .collect();
        let read = pods.into_iter().map(|p| p.join()).filter(|p| matches!(p, Ok(true))).count();
        stop.store(true, Ordering::SeqCst);
        let made: usize = floods.into_iter().map(|f| f.join().expect("flood")).sum();
        let _ = rank0.join();
        (read, made)
    });
    eprintln!("rank 0 read {read} of 20 single-try joins under a flood of {made} connections");
    assert_eq!(read, 20, "under a flood of {made} connections");
}

/// The real binary as rank 0 of a 2-pod job on a fixture node (it cannot test: it refuses after
/// its wait), while `how` floods its port from 127.0.0.2 (or nothing does): its stderr lines, and
/// the connections the flood made.
fn rank_0_logs(how: Option<Flood>) -> (Vec<String>, usize) {
    let scratch = Scratch::new("flood-log");
    let port = free_port();
    let root = common::fixture("h100-roce-sriov");
    let mut cmd = common::bin_command();
    cmd.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("NCCL_WRAP_SYSFS_ROOT", root.join("sys"))
        .env("NCCL_WRAP_ANNOTATIONS", root.join("podnetinfo/annotations"))
        .env("NCCL_WRAP_TERMINATION_LOG", scratch.log(0))
        .args(["--gate", "--gate-rank=0", "--gate-size=2", "--gate-wait-ms=3000"])
        .arg(format!("--gate-coordinator=127.0.0.1:{port}"))
        .args(["--", "true"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("spawn nccl-wrap");
    let stop = AtomicBool::new(false);
    let made = std::thread::scope(|s| {
        let stop = &stop;
        let f = how.map(|how| s.spawn(move || flood(Ipv4Addr::new(127, 0, 0, 2), port, how, stop)));
        let start = Instant::now();
        while child.try_wait().expect("wait").is_none() && start.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(50));
        }
        stop.store(true, Ordering::SeqCst);
        f.map_or(0, |f| f.join().expect("flood"))
    });
    let _ = child.kill();
    let out = child.wait_with_output().expect("output");
    (String::from_utf8_lossy(&out.stderr).lines().map(str::to_owned).collect(), made)
}

#[test]
fn a_log_flood_is_a_few_lines_with_a_count() {
    // Regression: every refused connection was a stderr line: 126k-546k lines in 7-15 s at
    // rank 0 under one client's flood.
    let _one = one();
    let (quiet, _) = rank_0_logs(None);
    let (flooded, made) = rank_0_logs(Some(Flood::Garbage));
    eprintln!("rank 0 said {} line(s) under a flood of {made} connections, {} without", flooded.len(), quiet.len());
    assert!(made >= 200, "the flood made only {made} connections");
    // The first few of the source in full, then its count, said when the gate ends.
    assert!(
        flooded.len() <= quiet.len() + 8,
        "{} lines for {made} connections:\n{}",
        flooded.len(),
        flooded.join("\n")
    );
    let count = flooded.iter().find(|l| l.contains("connection(s) refused from 127.0.0.2 in the last"));
    assert!(count.is_some(), "no count line:\n{}", flooded.join("\n"));
}

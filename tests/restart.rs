//! A job restarted in place (JobSet's in-place restart, a container restart in a pod that keeps
//! its addresses): every pod runs the gate again at once, on the same addresses and ports, while
//! the kernel still holds the first attempt's connections to those ports in TIME_WAIT; a stale
//! pod of the first attempt that knocks again is answered with a new challenge, and its old
//! answer is refused. The stand-in fabric of tests/gate.rs; the real binary under a parent that is
//! not PID 1, with real RDMA, in the fabric lab (`tests/lab/fabric/83-gate-restart.sh`).

mod common;
mod standin;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::time::Duration;

use nccl_wrap::detect::Vars;
use nccl_wrap::gate::wire::{self as gate_wire, Challenge, Frame, Join, Knock};
use nccl_wrap::gate::{self, Outcome};
use standin::*;

/// How many connections of this host's network namespace to `port` sit in TIME_WAIT, local or
/// remote end (/proc/net/tcp: state 06; addresses as hex `ADDR:PORT`).
fn time_wait(port: u16) -> usize {
    let tail = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .flat_map(|t| t.lines().skip(1).map(str::to_owned).collect::<Vec<_>>())
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[3] == "06" && (f[1].ends_with(&tail) || f[2].ends_with(&tail))
        })
        .count()
}

fn read_frame(c: &mut TcpStream) -> Option<Frame> {
    c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut head = [0u8; 13];
    c.read_exact(&mut head).ok()?;
    let (_, len) = gate_wire::header(&head).ok()?;
    let mut frame = head.to_vec();
    frame.resize(13 + len, 0);
    c.read_exact(&mut frame[13..]).ok()?;
    gate_wire::decode(&frame).ok()
}

#[test]
fn a_job_restarted_in_place_gates_again_at_once_on_the_same_ports() {
    let scratch = Scratch::new("restart");
    let mut j = job(3);
    j.secret = Some("the-jobs-secret-of-32-bytes-or-more!");
    let first = run_pods(&j, (0..3).map(|r| (r, fake(r))).collect(), &scratch);
    assert!(first.iter().all(|r| r.outcome == Outcome::Start), "{first:?}");
    let held: usize = j.ports.iter().map(|&p| time_wait(p)).sum();
    assert!(held > 0, "the first attempt leaves connections to its gate ports in TIME_WAIT");

    // The second attempt: the same pods, addresses and ports, started at once.
    let again = run_pods(&j, (0..3).map(|r| (r, fake(r))).collect(), &scratch);
    for r in &again {
        assert_eq!(r.outcome, Outcome::Start, "rank {}: {:?}", r.rank, r.verdict);
        assert_eq!((r.verdict.pairs, r.verdict.failed_total), (3, 0), "{:?}", r.verdict);
    }
}

#[test]
fn a_stale_pods_answer_to_an_earlier_challenge_is_refused_and_the_job_goes_on() {
    let scratch = Scratch::new("restart-stale");
    let j = job(2);
    let vars = Vars::new();
    // A pod of the earlier attempt, still knocking as rank 1: it answers an earlier attempt's
    // challenge, not the one this attempt's rank 0 gives it.
    let id = format!("{}/{}", j.coordinator, j.size);
    let stale = |port: u16| -> Option<Frame> {
        let mut c = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).ok()?;
        c.write_all(&gate_wire::encode(&Frame::Knock(Knock { job: id.clone(), rank: 1 })).ok()?).ok()?;
        let Some(Frame::Challenge(Challenge { nonce })) = read_frame(&mut c) else { return None };
        let earlier = nonce.chars().rev().collect::<String>();
        assert_ne!(earlier, nonce);
        let f = fake(1);
        let join = Join {
            job: id.clone(),
            rank: 1,
            size: 2,
            host: "pod-1-earlier".into(),
            port: 1,
            ports: vec![port_info(f.last)],
            problem: None,
            nonce: None,
            challenge: Some(earlier),
            bootstrap: None,
            prune: false,
            mac: None,
        };
        c.write_all(&gate_wire::encode(&Frame::Join(join)).ok()?).ok()?;
        read_frame(&mut c)
    };
    let (ran, answer) = std::thread::scope(|s| {
        let vars = &vars;
        let o0 = options(&j, 0, Some(scratch.log(0)));
        let o1 = options(&j, 1, Some(scratch.log(1)));
        let a = s.spawn(move || gate::run(vars, &fake(0), &o0));
        let mut answer = None;
        for _ in 0..100 {
            answer = stale(j.ports[0]);
            if answer.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let b = s.spawn(move || gate::run(vars, &fake(1), &o1));
        (vec![a.join().expect("rank 0"), b.join().expect("rank 1")], answer)
    });
    assert!(!matches!(answer, Some(Frame::Verdict(_))), "the stale pod got no verdict: {answer:?}");
    for r in &ran {
        assert_eq!(r.outcome, Outcome::Start, "rank {}: {:?}", r.rank, r.verdict);
        assert!(r.verdict.findings.iter().all(|f| !f.host.contains("earlier")), "{:?}", r.verdict);
    }
}

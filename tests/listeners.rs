//! `ping --listen` (and `--ring`)'s listener and the node agents' ring listener against
//! strangers, on 127.0.0.1, through the same accept policy (`pairtest::door`) the gate's uses: a
//! stray that half-closes and waits for our close, 200 silent connections, an address not
//! admitted, a hello asking for 1 GiB, forged text in a refusal, one address's flood of
//! connections against a peer that connects once. The pair test itself is the
//! stand-in of `standin` (a hello exchange): ibverbs are not what is tested here. The tests run
//! one at a time: the descriptor counts are this process's.

mod common;
mod standin;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::Run;
use nccl_wrap::health::ring::{self, Allowed};
use nccl_wrap::pairtest::desk;
use nccl_wrap::pairtest::door::{parse_allow, Allow, Policy};
use nccl_wrap::pairtest::exchange::{self, ExchangeError};
use nccl_wrap::pairtest::wire::{self, Message};
use standin::*;

static ONE: Mutex<()> = Mutex::new(());

fn one() -> std::sync::MutexGuard<'static, ()> {
    ONE.lock().unwrap_or_else(|p| p.into_inner())
}

fn listener() -> (TcpListener, u16) {
    let l = exchange::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
    let port = l.local_addr().expect("addr").port();
    (l, port)
}

/// A well-behaved client: its hello, and the listener's answer.
fn good_peer(port: u16, bytes: u32) -> thread::JoinHandle<Result<Message, String>> {
    thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(5);
        let target = format!("127.0.0.1:{port}");
        let mut s = exchange::connect(&target, until, Duration::from_secs(5)).map_err(|e| e.to_string())?;
        let h = wire::Hello { bytes, ..hello(&fake(9), None) };
        s.send(&Message::Hello(h)).map_err(|e| e.to_string())?;
        s.recv().map_err(|e| e.to_string())
    })
}

/// Connects, half-closes, and waits up to a second for the listener's close: Ok(0) is EOF.
fn half_close(port: u16) -> Result<usize, std::io::ErrorKind> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.shutdown(Shutdown::Write).expect("half-close");
    s.set_read_timeout(Some(Duration::from_secs(1))).expect("timeout");
    let mut b = [0u8; 256];
    let mut got = 0;
    loop {
        match s.read(&mut b[got..]) {
            Ok(0) => return Ok(got),
            Ok(n) => got += n,
            Err(e) => return Err(e.kind()),
        }
    }
}

/// ping's listener (`--listen --keep`): serves `max` connections, answering each hello.
fn ping_listener(l: TcpListener, allow: Allow, max: usize) -> thread::JoinHandle<(usize, Vec<String>)> {
    thread::spawn(move || {
        let ours = options(&job(1), 0, None).test;
        let opts = Policy {
            keep: true,
            wait: Some(Duration::from_secs(10)),
            max_peers: Some(max),
            ..Policy::new(allow, Duration::from_secs(2), ours)
        };
        let mut errors = Vec::new();
        let f = fake(1);
        let served = desk::serve(
            &l,
            &opts,
            |mut s, _| s.send(&Message::Hello(hello(&f, None))),
            |e: &ExchangeError| errors.push(e.to_string()),
        );
        (served.unwrap_or(0), errors)
    })
}

#[test]
fn ping_a_half_closed_stray_gets_eof_at_once_and_the_next_peer_is_served() {
    let _one = one();
    let (l, port) = listener();
    let server = ping_listener(l, Allow::Anyone, 2);
    assert_eq!(half_close(port), Ok(0), "no EOF within a second");
    assert!(matches!(good_peer(port, 4096).join().expect("peer"), Ok(Message::Hello(_))));
    let (served, errors) = server.join().expect("listener");
    assert_eq!(served, 1, "{errors:?}");
}

#[test]
fn ping_two_hundred_silent_connections_keep_fds_bounded_and_a_peer_is_served() {
    let _one = one();
    let (l, port) = listener();
    let base = open_fds();
    let server = ping_listener(l, Allow::Anyone, 201);
    let held: Vec<TcpStream> = (0..200).map(|_| TcpStream::connect(("127.0.0.1", port)).expect("connect")).collect();
    thread::sleep(Duration::from_millis(500));
    let listener_side = open_fds().saturating_sub(base + held.len());
    assert!(listener_side <= 2 * 32 + 8, "the listener holds {listener_side} descriptors for 200 silent connections");
    assert!(matches!(good_peer(port, 4096).join().expect("peer"), Ok(Message::Hello(_))));
    drop(held);
    let (served, _) = server.join().expect("listener");
    assert_eq!(served, 1);
}

#[test]
fn ping_allow_closes_other_addresses_unread() {
    let _one = one();
    let (l, port) = listener();
    let allow = Allow::Nets(parse_allow("10.0.0.0/8,fd00::/8").expect("list"));
    let server = ping_listener(l, allow, 1);
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let _ = s.write_all(&wire::encode(&Message::Hello(hello(&fake(9), None))).expect("frame"));
    s.set_read_timeout(Some(Duration::from_secs(1))).expect("timeout");
    let mut b = [0u8; 64];
    // Closed without a word: not even a refusal is sent to a stranger.
    assert!(matches!(s.read(&mut b), Ok(0) | Err(_)));
    let (served, errors) = server.join().expect("listener");
    assert_eq!(served, 0);
    assert!(errors.iter().any(|e| e.contains("closed unread: 127.0.0.1 is not in the allowed networks")), "{errors:?}");
    // The same listener admitting loopback serves the peer.
    let (l, port) = listener();
    let server = ping_listener(l, Allow::Nets(parse_allow("127.0.0.0/8").expect("list")), 1);
    assert!(matches!(good_peer(port, 4096).join().expect("peer"), Ok(Message::Hello(_))));
    assert_eq!(server.join().expect("listener").0, 1);
}

#[test]
fn ping_refuses_an_allow_list_it_cannot_read() {
    let _one = one();
    for (args, env) in [
        (vec!["ping", "--listen", "0", "--allow", "pod-network"], None),
        (vec!["ping", "--listen", "0"], Some("10.0.0.0/33")),
    ] {
        let mut r = Run::node("h100-roce-sriov");
        if let Some(v) = env {
            r = r.env("NCCL_WRAP_PING_ALLOW", v);
        }
        let d = r.args(args);
        assert_eq!(d.code(), Some(2), "{}", d.stderr());
        assert!(d.stderr().contains("--allow (NCCL_WRAP_PING_ALLOW): "), "{}", d.stderr());
    }
}

#[test]
fn a_refusal_with_control_characters_reaches_the_client_printable() {
    let _one = one();
    let (l, port) = listener();
    let server = thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(5);
        let mut s = loop {
            match l.accept() {
                Ok((s, _)) => break s,
                Err(e) if Instant::now() >= until => panic!("accept: {e}"),
                Err(_) => thread::sleep(Duration::from_millis(10)),
            }
        };
        s.set_nonblocking(false).expect("blocking");
        let forged = Message::Refuse("busy\nnccl-wrap: gate: verdict: GO\x1b[2J".into());
        let _ = s.write_all(&wire::encode(&forged).expect("frame"));
        thread::sleep(Duration::from_millis(300));
    });
    let target = format!("127.0.0.1:{port}");
    let mut s = exchange::connect(&target, Instant::now() + Duration::from_secs(2), Duration::from_secs(2)).expect("c");
    let e = s.recv().expect_err("refused").to_string();
    assert!(!e.contains('\n') && !e.contains('\x1b'), "{e:?}");
    assert!(e.contains("busy\\u{a}nccl-wrap: gate: verdict: GO\\u{1b}[2J"), "{e}");
    let _ = server.join();
}

/// The node agent's ring listener on 127.0.0.1, answering `peers`, for `max` connections.
fn ring_listener(peers: Vec<std::net::IpAddr>, max: usize) -> (thread::JoinHandle<()>, u16) {
    let (l, port) = listener();
    let allowed: Allowed = Arc::new(Mutex::new(peers));
    let server = thread::spawn(move || ring::serve(&l, &fake(1), &allowed, Duration::from_secs(2), Some(max)));
    (server, port)
}

#[test]
fn ring_a_half_closed_stray_gets_eof_at_once_and_a_peer_is_served() {
    let _one = one();
    let (server, port) = ring_listener(vec!["127.0.0.1".parse().expect("ip")], 2);
    assert_eq!(half_close(port), Ok(0), "no EOF within a second");
    assert!(matches!(good_peer(port, 4096).join().expect("peer"), Ok(Message::Hello(_))));
    server.join().expect("listener");
}

#[test]
fn ring_two_hundred_silent_connections_keep_fds_bounded_and_a_peer_is_served() {
    let _one = one();
    let base = open_fds();
    let (server, port) = ring_listener(vec!["127.0.0.1".parse().expect("ip")], 201);
    let held: Vec<TcpStream> = (0..200).map(|_| TcpStream::connect(("127.0.0.1", port)).expect("connect")).collect();
    thread::sleep(Duration::from_millis(500));
    let listener_side = open_fds().saturating_sub(base + held.len());
    assert!(listener_side <= 2 * 32 + 8, "the ring holds {listener_side} descriptors for 200 silent connections");
    assert!(matches!(good_peer(port, 4096).join().expect("peer"), Ok(Message::Hello(_))));
    drop(held);
    server.join().expect("listener");
}

#[test]
fn ring_a_stranger_is_closed_unread_and_a_greedy_hello_refused() {
    let _one = one();
    // 127.0.0.1 is not among the peers: its connection is closed before anything is read.
    let (server, port) = ring_listener(vec!["10.0.0.2".parse().expect("ip")], 1);
    assert!(good_peer(port, 4096).join().expect("peer").is_err());
    server.join().expect("listener");
    // A peer asking for 1 GiB per pair is refused, and told the agent's limit.
    let (server, port) = ring_listener(vec!["127.0.0.1".parse().expect("ip")], 1);
    let e = good_peer(port, 1 << 30).join().expect("peer").expect_err("refused");
    assert!(e.contains("asked for 1073741824 bytes") && e.contains("an agent answers at most 1048576"), "{e}");
    server.join().expect("listener");
}

#[test]
fn the_allow_list_takes_both_families() {
    let nets = parse_allow("10.0.0.0/8,fd00::/8").expect("list");
    let a = Allow::Nets(nets);
    for (ip, ok) in [("10.1.1.1", true), ("fd00::5", true), ("::ffff:10.2.3.4", true), ("192.168.0.1", false)] {
        let ip: std::net::IpAddr = ip.parse().expect("ip");
        assert_eq!(a.refusal(SocketAddr::new(ip, 1).ip()).is_none(), ok, "{ip}");
    }
}

/// A client that connects once, from 127.0.0.1, sends its hello and reads the answer: no retry.
fn single_try_hello(port: u16) -> Result<Message, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.write_all(&wire::encode(&Message::Hello(hello(&fake(9), None))).expect("frame")).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(5))).map_err(|e| e.to_string())?;
    let mut head = [0u8; 13];
    s.read_exact(&mut head).map_err(|e| format!("closed unread: {e}"))?;
    let (_, len) = wire::header(&head).map_err(|e| e.to_string())?;
    let mut frame = head.to_vec();
    frame.resize(13 + len, 0);
    s.read_exact(&mut frame[13..]).map_err(|e| e.to_string())?;
    wire::decode(&frame).map_err(|e| e.to_string())
}

/// Serves under `policy` (one peer, answered with the stand-in's hello) while 127.0.0.2 floods
/// the port `how`; a single-try peer from 127.0.0.1 comes once the flood is under way. Returns
/// what the peer got, the listener's outcome, its stray lines and the connections the flood made.
fn flooded(policy: Policy, how: Flood) -> (Result<Message, String>, Result<usize, String>, usize, usize) {
    let (l, port) = listener();
    let stop = std::sync::atomic::AtomicBool::new(false);
    thread::scope(|s| {
        let flood = s.spawn(|| flood(std::net::Ipv4Addr::new(127, 0, 0, 2), port, how, &stop));
        let server = s.spawn(|| {
            let mut lines = 0;
            let f = fake(1);
            let served = desk::serve(&l, &policy, |mut s, _| s.send(&Message::Hello(hello(&f, None))), |_| lines += 1);
            (served.map_err(|e| e.to_string()), lines)
        });
        thread::sleep(Duration::from_millis(500));
        let got = single_try_hello(port);
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let made = flood.join().expect("flood");
        let (served, lines) = server.join().expect("listener");
        (got, served, lines, made)
    })
}

#[test]
fn a_flood_from_one_address_keeps_no_single_try_peer_out() {
    // Regression: one client's flood of connections took every first read, so a peer that
    // connects once (ping's hello, the pair test's) was closed unread; and each stray was a
    // stderr line of its own.
    let _one = one();
    let ours = options(&job(1), 0, None).test;
    let ping = || Policy {
        wait: Some(Duration::from_secs(10)),
        ..Policy::new(Allow::Anyone, Duration::from_secs(2), ours.clone())
    };
    // The agents' ring, flooded from an address it admits.
    let peers: Allowed = Arc::new(Mutex::new(vec!["127.0.0.1".parse().expect("ip"), "127.0.0.2".parse().expect("ip")]));
    let ring = || Policy {
        keep: false,
        wait: Some(Duration::from_secs(10)),
        ..ring::policy(&peers, Duration::from_secs(2), None)
    };
    for (what, policy) in [("ping", ping()), ("ring", ring())] {
        for how in [Flood::Connect, Flood::Reconnect, Flood::Garbage] {
            let (got, served, lines, made) = flooded(policy.clone(), how);
            eprintln!("{what} under a {how:?} flood: {made} connections, {lines} line(s)");
            assert!(matches!(got, Ok(Message::Hello(_))), "{what} under a {how:?} flood of {made}: {got:?}");
            assert_eq!(served, Ok(1), "{what} {how:?}");
            // A few lines a source, however many connections.
            assert!(lines <= 8, "{what} under a {how:?} flood of {made} connections said {lines} lines");
        }
    }
}

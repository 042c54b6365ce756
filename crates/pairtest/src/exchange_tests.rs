//! Hostile peers against the listener and the connector, over 127.0.0.1, each bounded by a short
//! deadline: garbage, a huge length, silence, a trickle, a disconnect half way. After each, a
//! good peer must still be served under `keep`.

use std::io::Write;
use std::net::TcpStream;
use std::thread;

use super::*;
use crate::desk::serve;
use crate::door::{Allow, Policy};
use crate::settings::Settings;
use crate::wire::{Hello, LinkLayer, PortInfo};

/// One connection of the (non-blocking) listener within `until`, made blocking, as a test's peer.
fn accept(l: &TcpListener, until: Option<Instant>) -> io::Result<(TcpStream, SocketAddr)> {
    loop {
        match l.accept() {
            Ok((s, peer)) => return s.set_nonblocking(false).map(|()| (s, peer)),
            Err(e) if until.is_some_and(|u| Instant::now() >= u) => return Err(e),
            Err(_) => thread::sleep(Duration::from_millis(10)),
        }
    }
}

fn hello() -> Hello {
    Hello {
        host: "test".into(),
        ports: vec![PortInfo {
            device: "rxe0".into(),
            port: 1,
            link_layer: LinkLayer::Ethernet,
            gid_index: Some(1),
            gid: Some("0000:0000:0000:0000:0000:ffff:0a00:0001".into()),
            gid_type: Some("RoCE v2".into()),
            lid: None,
            mtu: 1024,
            pkey: None,
            netdev: Some("veth0".into()),
            rate_kbps: None,
        }],
        all_pairs: false,
        bytes: 4096,
        iters: 10,
        duration_ms: 10,
        gate: None,
    }
}

fn listener() -> (TcpListener, String) {
    let l = bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
    let addr = l.local_addr().expect("addr").to_string();
    (l, addr)
}

const SHORT: Duration = Duration::from_millis(300);

/// The listener's own test: what it answers at most.
fn ours() -> Settings {
    Settings { all_pairs: false, bytes: 4096, iters: 10, duration_ms: 10, timeout: SHORT, gate: None }
}

fn policy(keep: bool, wait: Duration, max: Option<usize>) -> Policy {
    Policy { keep, wait: Some(wait), max_peers: max, ..Policy::new(Allow::Anyone, SHORT, ours()) }
}

fn opts(keep: bool, max: usize) -> Policy {
    policy(keep, Duration::from_secs(5), Some(max))
}

/// A peer that sends `bytes`, then holds the connection for `hold` (or closes at once).
fn raw_peer(addr: &str, bytes: Vec<u8>, hold: Duration) -> thread::JoinHandle<()> {
    let addr = addr.to_owned();
    thread::spawn(move || {
        let mut s = TcpStream::connect(addr).expect("connect");
        let _ = s.write_all(&bytes);
        thread::sleep(hold);
    })
}

/// A well-behaved client: hello, then the listener's hello back.
fn good_peer(addr: &str) -> thread::JoinHandle<Result<Message, String>> {
    let addr = addr.to_owned();
    thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(5);
        let mut s = connect(&addr, until, Duration::from_secs(5)).map_err(|e| e.to_string())?;
        s.send(&Message::Hello(hello())).map_err(|e| e.to_string())?;
        s.recv().map_err(|e| e.to_string())
    })
}

/// Serves `max` peers with `keep`, answering each hello with one; returns (served, errors).
fn serve_collect(l: &TcpListener, keep: bool, max: usize) -> (Result<usize, ExchangeError>, Vec<String>) {
    let mut errors = Vec::new();
    let r = serve(
        l,
        &opts(keep, max),
        |mut s, h| {
            assert_eq!(h, hello());
            s.send(&Message::Hello(hello()))
        },
        |e| errors.push(e.to_string()),
    );
    (r, errors)
}

/// Runs one bad peer and then a good one against a `keep` listener.
fn bad_then_good(bad: impl FnOnce(&str) -> thread::JoinHandle<()>) -> Vec<String> {
    let (l, addr) = listener();
    let start = Instant::now();
    let b = bad(&addr);
    // The bad peer connects first: the good one waits until it is being served.
    thread::sleep(Duration::from_millis(50));
    let g = good_peer(&addr);
    let (served, errors) = serve_collect(&l, true, 2);
    assert_eq!(served.expect("serve"), 1, "{errors:?}");
    assert_eq!(g.join().expect("good peer"), Ok(Message::Hello(hello())));
    let _ = b.join();
    assert!(start.elapsed() < Duration::from_secs(3), "took {:?}", start.elapsed());
    errors
}

#[test]
fn garbage_is_refused_and_the_next_peer_served() {
    let errors =
        bad_then_good(|a| raw_peer(a, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), Duration::from_millis(100)));
    assert_eq!(errors.len(), 1);
    assert!(errors[0].contains("not a nccl-wrap ping message"), "{errors:?}");
}

#[test]
fn a_huge_length_is_refused_before_reading_it() {
    let mut f = wire::MAGIC.to_vec();
    f.extend_from_slice(&[wire::VERSION, 1]);
    f.extend_from_slice(&u32::MAX.to_be_bytes());
    let errors = bad_then_good(move |a| raw_peer(a, f, Duration::from_millis(100)));
    assert!(errors[0].contains("over the 65536-byte limit"), "{errors:?}");
}

#[test]
fn a_silent_peer_times_out() {
    let errors = bad_then_good(|a| raw_peer(a, Vec::new(), Duration::from_secs(1)));
    assert!(errors[0].contains("sent nothing for a message header before the deadline (0 of 13"), "{errors:?}");
}

#[test]
fn a_trickling_peer_is_stopped_by_the_deadline() {
    let errors = bad_then_good(|a| {
        let addr = a.to_owned();
        thread::spawn(move || {
            let mut s = TcpStream::connect(addr).expect("connect");
            for b in wire::MAGIC.iter() {
                if s.write_all(&[*b]).is_err() {
                    return;
                }
                thread::sleep(Duration::from_millis(100));
            }
        })
    });
    assert!(errors[0].contains("before the deadline"), "{errors:?}");
}

#[test]
fn a_disconnect_half_way_is_named() {
    let mut f = wire::encode(&Message::Hello(hello())).expect("encode");
    f.truncate(f.len() / 2);
    let errors = bad_then_good(move |a| raw_peer(a, f, Duration::ZERO));
    assert!(errors[0].contains("closed the connection half way through a message body"), "{errors:?}");
}

#[test]
fn a_wrong_first_message_is_refused() {
    let f = wire::encode(&Message::Done(Vec::new())).expect("encode");
    let errors = bad_then_good(move |a| raw_peer(a, f, Duration::from_millis(100)));
    assert!(errors[0].contains("sent a done message where a hello message belongs"), "{errors:?}");
}

#[test]
fn without_keep_a_stray_is_ignored_and_the_peer_after_it_served() {
    // Regression: one stray connection (a probe, a scanner) ended a `--listen` or `--ring`
    // listener with exit 2; the wait now goes on until a valid hello or its end.
    let (l, addr) = listener();
    let b = raw_peer(&addr, b"GET / HTTP/1.0\r\n\r\n".to_vec(), Duration::from_millis(100));
    let s = raw_peer(&addr, Vec::new(), Duration::from_millis(600));
    thread::sleep(Duration::from_millis(50));
    let g = good_peer(&addr);
    let (r, errors) = serve_collect(&l, false, 10);
    assert_eq!(r.expect("served"), 1, "{errors:?}");
    // First messages are read side by side: the good peer need not wait for the silent stray's
    // deadline, which may still be running when it is served (and is then shut with the desk).
    assert!(errors.len() <= 2, "{errors:?}");
    assert!(
        errors.iter().all(|e| e.contains("not a nccl-wrap ping message") || e.contains("sent nothing")),
        "{errors:?}"
    );
    assert_eq!(g.join().expect("good peer"), Ok(Message::Hello(hello())));
    let _ = (b.join(), s.join());
}

#[test]
fn without_keep_strays_until_the_wait_ends_are_counted() {
    let (l, addr) = listener();
    let b = raw_peer(&addr, b"\0\0\0\0\0\0\0\0\0\0\0\0\0\0".to_vec(), Duration::from_millis(100));
    let o = policy(false, Duration::from_millis(700), None);
    let mut errors = Vec::new();
    let r = serve(&l, &o, |_, _| Ok(()), |e| errors.push(e.to_string()));
    match r {
        Err(e @ ExchangeError::NoPeer { strays: 1, .. }) => assert!(e.to_string().contains("1 stray"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(errors.len(), 1, "{errors:?}");
    let _ = b.join();
}

#[test]
fn without_keep_a_peer_failing_after_its_hello_ends_the_listener() {
    let (l, addr) = listener();
    let g = good_peer(&addr);
    let o = policy(false, Duration::from_secs(5), None);
    let r = serve(&l, &o, |s, _| Err(ExchangeError::Unexpected { peer: s.peer, want: "x", got: "y" }), |_| {});
    assert!(matches!(r, Err(ExchangeError::Unexpected { .. })), "{r:?}");
    let _ = g.join();
}

#[test]
fn the_refused_client_reads_why() {
    let (l, addr) = listener();
    let client = thread::spawn(move || {
        let mut s = connect(&addr, Instant::now() + Duration::from_secs(2), Duration::from_secs(2)).expect("connect");
        // A hello whose frame is fine but whose version is not.
        let mut f = wire::encode(&Message::Hello(hello())).expect("encode");
        f[7] = 2;
        s.stream.write_all(&f).expect("write");
        s.recv()
    });
    let (r, _) = serve_collect(&l, false, 1);
    assert!(matches!(r, Err(ExchangeError::Wire { source: WireError::Version { got: 2 }, .. })), "{r:?}");
    match client.join().expect("client") {
        Err(ExchangeError::Refused { reason, .. }) => assert!(reason.contains("protocol version 2"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn no_peer_within_the_wait_is_named() {
    let (l, _) = listener();
    let o = policy(false, Duration::from_millis(100), None);
    let r = serve(&l, &o, |_, _| Ok(()), |_| {});
    assert!(matches!(&r, Err(e) if e.no_peer()), "{r:?}");
}

#[test]
fn connecting_to_nothing_gives_up_at_the_wait() {
    let (l, addr) = listener();
    drop(l);
    let start = Instant::now();
    let r = connect(&addr, Instant::now() + Duration::from_millis(400), SHORT);
    assert!(matches!(&r, Err(ExchangeError::Connect { .. })), "{r:?}");
    assert!(start.elapsed() < Duration::from_secs(2));
}

#[test]
fn a_client_reading_garbage_from_a_listener_is_bounded() {
    let (l, addr) = listener();
    let server = thread::spawn(move || {
        let (mut s, _) = accept(&l, Some(Instant::now() + Duration::from_secs(2))).expect("accept");
        let _ = s.write_all(b"SSH-2.0-OpenSSH_9.2\r\n");
        thread::sleep(Duration::from_millis(500));
    });
    let mut s = connect(&addr, Instant::now() + Duration::from_secs(2), SHORT).expect("connect");
    assert!(matches!(s.recv(), Err(ExchangeError::Wire { source: WireError::Magic(_), .. })));
    let _ = server.join();
}

#[test]
fn addresses_are_checked() {
    // A bare port: every address, IPv4 and IPv6 (the one dual-stack bind).
    assert_eq!(listen_addr("18515").expect("port"), Place::Any(18515));
    assert_eq!(listen_addr("127.0.0.1:9").expect("addr"), Place::At("127.0.0.1:9".parse().expect("addr")));
    assert!(listen_addr("[::]:9").is_ok());
    assert!(listen_addr("host:9").is_err());
    assert_eq!(split_target("train-1.train:18515").expect("t"), ("train-1.train".into(), 18515));
    assert_eq!(split_target("[fd00::1]:7").expect("t"), ("fd00::1".into(), 7));
    for bad in ["train-1", "h:0", "h:99999", ":1", "a b:1", "$(x):1", "-x:1"] {
        assert!(split_target(bad).is_err(), "{bad}");
    }
}

#[test]
fn the_one_bind_takes_both_families() {
    // Regression: the gate and ping bound 0.0.0.0 only, so a pod reached over IPv6 was never
    // served; only the agents' ring bound both.
    let Ok(probe) = TcpListener::bind("[::1]:0") else {
        eprintln!("skipped: no IPv6 loopback here");
        return;
    };
    drop(probe);
    let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
    let l = match bind_any(port) {
        Ok(l) => l,
        Err(e) => panic!("{e}"),
    };
    assert!(l.local_addr().expect("addr").is_ipv6(), "{:?}", l.local_addr());
    for peer in [format!("127.0.0.1:{port}"), format!("[::1]:{port}")] {
        let c = TcpStream::connect(&peer).expect("connect");
        let (s, from) = accept(&l, Some(Instant::now() + Duration::from_secs(2))).expect("accept");
        let session = Session::new(s, from.to_string(), Instant::now() + SHORT);
        let (theirs, ours) = session.addrs().expect("addrs");
        // An IPv4 peer is named as IPv4, not IPv4-mapped IPv6.
        assert_eq!(theirs.ip(), c.local_addr().expect("client").ip(), "{peer}");
        assert_eq!(ours.ip(), c.peer_addr().expect("client").ip(), "{peer}");
    }
}

#[test]
fn a_client_closed_unread_connects_again_within_its_deadline() {
    // Regression: the pair test's hello connected once, so a listener whose first reads were
    // full for a moment (someone else's flood) failed it as `peer`.
    let (l, addr) = listener();
    let server = thread::spawn(move || {
        // The first connection is closed without a word, as a full door does; the second answered.
        let (first, _) = accept(&l, Some(Instant::now() + Duration::from_secs(2))).expect("first");
        first.shutdown(std::net::Shutdown::Both).expect("close");
        let (s, from) = accept(&l, Some(Instant::now() + Duration::from_secs(2))).expect("again");
        let mut s = Session::new(s, from.to_string(), Instant::now() + Duration::from_secs(2));
        let _ = s.recv();
        s.send(&Message::Hello(hello())).expect("answer");
    });
    let greet = |s: &mut Session| {
        s.send(&Message::Hello(hello()))?;
        s.expect("hello", |m| if let Message::Hello(h) = m { Some(h) } else { None })
    };
    let (_, theirs) =
        crate::edge::greet(&addr, Instant::now() + Duration::from_secs(3), greet, &ours()).expect("greeted");
    assert_eq!(theirs, hello());
    server.join().expect("listener");
    // A refusal is the listener's answer: not tried again.
    let (l, addr) = listener();
    let server = thread::spawn(move || {
        let (s, from) = accept(&l, Some(Instant::now() + Duration::from_secs(2))).expect("first");
        Session::new(s, from.to_string(), Instant::now() + SHORT).refuse("busy");
        accept(&l, Some(Instant::now() + Duration::from_millis(600))).is_ok()
    });
    let r = crate::edge::greet(&addr, Instant::now() + Duration::from_secs(1), greet, &ours());
    assert!(matches!(r, Err(ExchangeError::Refused { .. })), "{r:?}");
    assert!(!server.join().expect("listener"), "a refused client connected again");
}

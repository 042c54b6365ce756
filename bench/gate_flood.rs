//! One client's connection flood against the listeners of the pair test, on loopback with the
//! stand-in fabric of the gate's tests (the pair test is a hello exchange): driven by
//! bench/gate-flood.sh, which counts the lines this process says on stderr.
//!
//!   gate_flood joins FLOOD SECONDS   rank 0 of a 21-pod job; 127.0.0.2 floods its port (FLOOD:
//!                                    none, connect, reconnect, garbage) for SECONDS, and after
//!                                    one of them 20 pods, each from an address of its own,
//!                                    join once (knock, challenge, join: no retry)
//!   gate_flood ring FLOOD SECONDS    a node agent's ring listener, flooded from 127.0.0.2 (an
//!                                    address it admits); 20 peers each send one hello, once
//!
//! Prints one line on stdout: how many of the 20 were read (answered), and the connections the
//! flood made.

#[path = "../tests/standin/mod.rs"]
mod standin;

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nccl_wrap::detect::Vars;
use nccl_wrap::gate;
use nccl_wrap::health::ring;
use nccl_wrap::pairtest::{exchange, wire};
use standin::{connect_from, fake, flood, hello, job, options, single_try_join, Flood};

fn pod(k: u32) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 1, k as u8)
}

/// One hello from `src`, once; whether the listener answered it within `wait`.
fn single_try_hello(src: Ipv4Addr, port: u16, wait: Duration) -> bool {
    let Ok(mut c) = connect_from(src, port, false) else { return false };
    let frame = wire::encode(&wire::Message::Hello(hello(&fake(9), None))).expect("frame");
    let mut head = [0u8; 13];
    c.write_all(&frame).is_ok() && c.set_read_timeout(Some(wait)).is_ok() && c.read_exact(&mut head).is_ok()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (what, how, secs) = match args.as_slice() {
        [_, w, h, s] => (w.clone(), h.clone(), s.parse::<u64>().expect("SECONDS")),
        _ => panic!("usage: gate_flood joins|ring none|connect|reconnect|garbage SECONDS"),
    };
    let how = match how.as_str() {
        "none" => None,
        "connect" => Some(Flood::Connect),
        "reconnect" => Some(Flood::Reconnect),
        "garbage" => Some(Flood::Garbage),
        other => panic!("no flood {other:?}"),
    };
    let stop = AtomicBool::new(false);
    let flooder = Ipv4Addr::new(127, 0, 0, 2);
    let mut j = job(21);
    j.wait_ms = (secs + 10) * 1000;
    let port = j.ports[0];
    let id = format!("{}/{}", j.coordinator, j.size);
    let vars = Vars::new();
    let (read, made) = std::thread::scope(|s| {
        match what.as_str() {
            "joins" => {
                let o0 = options(&j, 0, None);
                let vars = &vars;
                s.spawn(move || gate::run(vars, &fake(0), &o0));
            }
            "ring" => {
                let l = exchange::bind(format!("127.0.0.1:{port}").parse().expect("addr")).expect("bind");
                let mut peers: Vec<IpAddr> = (1..=20).map(|k| IpAddr::V4(pod(k))).collect();
                peers.push(IpAddr::V4(flooder));
                let allowed = Arc::new(Mutex::new(peers));
                // The agent's listener lives as long as the agent: here, as long as this process.
                std::thread::spawn(move || ring::serve(&l, &fake(1), &allowed, Duration::from_secs(2), None));
            }
            other => panic!("no listener {other:?}"),
        }
        let floods: Vec<_> = how
            .into_iter()
            .map(|how| {
                let stop = &stop;
                s.spawn(move || flood(flooder, port, how, stop))
            })
            .collect();
        let start = Instant::now();
        std::thread::sleep(Duration::from_secs(1));
        let wait = Duration::from_secs(secs.saturating_sub(1).max(1));
        let pods: Vec<_> = (1..=20u32)
            .map(|r| {
                let id = &id;
                let what = &what;
                s.spawn(move || match what.as_str() {
                    "joins" => single_try_join(pod(r), port, id, r, 21, wait),
                    _ => single_try_hello(pod(r), port, wait),
                })
            })
            .collect();
        let read = pods.into_iter().map(|p| p.join()).filter(|p| matches!(p, Ok(true))).count();
        std::thread::sleep(Duration::from_secs(secs).saturating_sub(start.elapsed()));
        stop.store(true, Ordering::SeqCst);
        let made: usize = floods.into_iter().map(|f| f.join().expect("flood")).sum();
        (read, made)
    });
    println!(
        "{what}: {read} of 20 read under a {} flood of {made} connections",
        how.map_or("no".to_owned(), |h| format!("{h:?}").to_lowercase())
    );
    // Rank 0 and the agent's listener are left to the process's end.
    std::process::exit(0);
}

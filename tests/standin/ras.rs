//! A stand-in for NCCL's RAS server on loopback, for the client's unit tests and the supervisor's
//! integration tests: it answers `CLIENT PROTOCOL` / `SET FORMAT json` / `STATUS` with captured
//! replies (fixtures/ras/), or misbehaves as asked (garbage, an endless reply, a slow drip,
//! silence). Each connection is served by its own thread; dropping the server stops accepting.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone)]
pub enum Mode {
    /// The text reply to STATUS, the JSON reply after SET FORMAT json (both as captured, with the
    /// protocol line).
    Replies { text: String, json: String },
    /// A server from before `CLIENT PROTOCOL`: the report without the protocol line.
    NoProtocolLine(String),
    /// Bytes that are not RAS.
    Garbage,
    /// A reply that never ends.
    Endless,
    /// One byte every 100 ms.
    Drip,
    /// Accepts and never answers (a stopped rank holding the port).
    Silent,
    /// `ERROR: Unknown command STATUS`, and the connection kept open, as NCCL does.
    Unknown,
}

pub struct Server {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    pub served: Arc<AtomicUsize>,
}

/// The captured reply `name` from fixtures/ras/.
pub fn fixture(name: &str) -> String {
    // Included by the workspace's tests and by a crate's unit tests: the fixtures are at the
    // workspace root, the nearest folder above the manifest that has them.
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = here.ancestors().find(|d| d.join("fixtures/ras").is_dir()).unwrap_or(here);
    let p = root.join("fixtures/ras").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A text report naming `n` processes as briefly as NCCL prints them: communicators of 256
/// missing ranks each, every rank its own (65,536 of them are 858 KB, inside the client's cap).
pub fn many(n: usize) -> String {
    let mut t = String::from("SERVER PROTOCOL 2\nNCCL version 2.28.9 compiled with CUDA 13.0\n\nErrors\n======\n\n");
    for c in 0..n.div_ceil(256) {
        t.push_str(&format!("#0-{c} ({c:016x}) INCOMPLETE\n  Missing communicator data from 256 ranks\n"));
        for r in c * 256..((c + 1) * 256).min(n) {
            t.push_str(&format!("  Rank {r}\n"));
        }
        t.push('\n');
    }
    t
}

/// The JSON report (after `SET FORMAT json`) of a job whose `n` ranks are all missing but one
/// per communicator of 256, which has launched 57 AllReduces: what a stall poll reads.
pub fn many_json(n: usize) -> String {
    let mut comms = Vec::new();
    for c in 0..n.div_ceil(256) {
        let missing: Vec<String> = (c * 256 + 1..((c + 1) * 256).min(n))
            .map(|r| {
                format!(
                    "{{\"rank\": {r}, \"host\": \"10.0.0.{}\", \"pid\": {}, \"cuda_dev\": {}}}",
                    r % 250,
                    1000 + r,
                    r % 8
                )
            })
            .collect();
        comms.push(format!(
            "{{\"hash\": \"0x{c:016x}\", \"ranks\": [{{\"rank\": {}, \"pid\": 1, \"collective_counts\": {{\"AllReduce\": 57}}}}], \"missing_ranks\": [{}]}}",
            c * 256,
            missing.join(", ")
        ));
    }
    format!("SERVER PROTOCOL 2\nOK\n{{\"nccl_version\": \"2.28.9\", \"communicators\": [{}]}}\n", comms.join(", "))
}

/// The healthy / stopped / killed captures, in both formats.
pub fn captured(state: &str) -> Mode {
    Mode::Replies { text: fixture(&format!("{state}.txt")), json: fixture(&format!("{state}.json.txt")) }
}

impl Server {
    pub fn start(mode: Mode) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the stand-in RAS");
        let addr = listener.local_addr().expect("address");
        let stop = Arc::new(AtomicBool::new(false));
        let served = Arc::new(AtomicUsize::new(0));
        let (stop2, served2) = (stop.clone(), served.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                served2.fetch_add(1, Ordering::SeqCst);
                let (mode, stop3) = (mode.clone(), stop2.clone());
                std::thread::spawn(move || serve(conn, &mode, &stop3));
            }
        });
        Server { addr, stop, served }
    }

    /// A loopback port nobody listens on (bound, then closed).
    pub fn closed_port() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("address")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(100));
    }
}

fn serve(conn: TcpStream, mode: &Mode, stop: &AtomicBool) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let mut out = match conn.try_clone() {
        Ok(c) => c,
        Err(_) => return,
    };
    let mut json = false;
    let mut proto = false;
    let mut reader = BufReader::new(conn).take(4096);
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let cmd = line.trim();
        if cmd.starts_with("CLIENT PROTOCOL") {
            proto = true;
        } else if cmd == "SET FORMAT json" {
            json = true;
        } else if cmd == "STATUS" || cmd == "VERBOSE STATUS" {
            break;
        }
    }
    let alive = || !stop.load(Ordering::SeqCst);
    match mode {
        Mode::Replies { text, json: j } => {
            let reply = if json { j } else { text };
            let reply = if proto { reply.clone() } else { reply.replacen("SERVER PROTOCOL 2\n", "", 1) };
            let _ = out.write_all(reply.as_bytes());
        }
        Mode::NoProtocolLine(text) => {
            let _ = out.write_all(text.as_bytes());
        }
        Mode::Garbage => {
            let _ = out.write_all(b"\x00\xff\x1b[2J HTTP/1.1 400 Bad Request\r\n\r\n");
        }
        Mode::Endless => {
            let chunk = [b'A'; 65536];
            while alive() && out.write_all(&chunk).is_ok() {}
        }
        Mode::Drip => {
            let _ = out.write_all(b"SERVER PROTOCOL 2\n");
            while alive() && out.write_all(b"N").is_ok() {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Mode::Silent => {
            while alive() {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Mode::Unknown => {
            let _ = out.write_all(b"SERVER PROTOCOL 2\nERROR: Unknown command STATUS\n");
            while alive() {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

//! The gate at scale on loopback, with the stand-in fabric of the gate's tests (the pair test is
//! a hello exchange): driven by bench/gate-scale.sh, which runs rank 0 in one process and every
//! other rank as a thread of another, so that rank 0's descriptors and memory are its own.
//!
//!   gate_scale coordinator SIZE BASE_PORT   rank 0 on BASE_PORT; prints one JSON line
//!   gate_scale members SIZE BASE_PORT       ranks 1..SIZE on BASE_PORT+rank; one JSON line
//!
//! Times are wall-clock seconds since the epoch (the two processes compare them); rank 0 samples
//! its own open descriptors every 2 ms and reads its peak RSS (VmHWM) when the verdict is in.

#[path = "../tests/standin/mod.rs"]
mod standin;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nccl_wrap::detect::Vars;
use nccl_wrap::gate::{self, Outcome};
use standin::{fake, options, Job};

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

fn hwm_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).map(str::to_owned))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// The gate's options for `rank`, with a pair-test deadline fit for a thousand pods sharing a
/// few cores (`GATE_SCALE_TIMEOUT_MS`, default 20000: what the fabric lab uses under emulation).
fn opts(j: &Job, rank: u32) -> gate::Options {
    let mut o = options(j, rank, None);
    let ms = std::env::var("GATE_SCALE_TIMEOUT_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    o.test.timeout = Duration::from_millis(ms);
    o
}

/// This process's CPU time (user + system) in milliseconds (`/proc` counts in USER_HZ, 100 on
/// Linux).
fn cpu_ms() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces, within parentheses).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest.split_whitespace().filter_map(|v| v.parse().ok()).collect();
    // utime and stime are the 14th and 15th fields: the 12th and 13th after the state.
    f.get(10).zip(f.get(11)).map_or(0, |(u, s)| (u + s) * 10)
}

fn job(size: u32, base: u16) -> Job {
    let ports: Vec<u16> = (0..size).map(|r| base + r as u16).collect();
    Job {
        coordinator: format!("127.0.0.1:{base}"),
        ports,
        size,
        id: Some(format!("bench-{size}")),
        wait_ms: 120_000,
        warn: false,
        secret: std::env::var("GATE_SCALE_SECRET").ok().map(|s| &*Box::leak(s.into_boxed_str())),
        // Judged as a real gate judges (every stand-in pair moves the same, so none is slow).
        slow: nccl_wrap::gate::verdict::SlowRule { pct: nccl_wrap::pairtest::slow::DEFAULT_PCT, refuse: false },
        prune: false,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(mode), Some(size), Some(base)) = (args.get(1), args.get(2), args.get(3)) else {
        eprintln!("usage: gate_scale coordinator|members SIZE BASE_PORT");
        std::process::exit(2);
    };
    let (Ok(size), Ok(base)) = (size.parse::<u32>(), base.parse::<u16>()) else {
        eprintln!("SIZE and BASE_PORT are numbers");
        std::process::exit(2);
    };
    let j = job(size, base);
    let vars = Vars::new();
    match mode.as_str() {
        "coordinator" => {
            let done = AtomicBool::new(false);
            let peak = AtomicUsize::new(0);
            let ran = std::thread::scope(|s| {
                s.spawn(|| {
                    while !done.load(Ordering::SeqCst) {
                        let n = std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0);
                        peak.fetch_max(n, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(2));
                    }
                });
                let ran = gate::run(&vars, &fake(0), &opts(&j, 0));
                done.store(true, Ordering::SeqCst);
                ran
            });
            println!(
                "{{\"rank\":0,\"start\":{},\"verdict_at\":{:.6},\"pairs\":{},\"go\":{},\"peak_fds\":{},\"peak_rss_kib\":{},\"cpu_ms\":{}}}",
                ran.outcome == Outcome::Start,
                now(),
                ran.verdict.pairs,
                ran.verdict.go,
                peak.load(Ordering::SeqCst),
                hwm_kib(),
                cpu_ms()
            );
        }
        "members" => {
            let times = std::thread::scope(|s| {
                let handles: Vec<_> = (1..size)
                    .map(|r| {
                        let (j, vars) = (&j, &vars);
                        s.spawn(move || {
                            let started = now();
                            let ran = gate::run(vars, &fake(r), &opts(j, r));
                            (started, now(), ran.outcome == Outcome::Start)
                        })
                    })
                    .collect();
                handles.into_iter().filter_map(|h| h.join().ok()).collect::<Vec<_>>()
            });
            let last_start = times.iter().map(|t| t.0).fold(0.0, f64::max);
            let last_verdict = times.iter().map(|t| t.1).fold(0.0, f64::max);
            let started = times.iter().filter(|t| t.2).count();
            println!(
                "{{\"members\":{},\"started\":{started},\"last_start\":{last_start:.6},\"last_verdict\":{last_verdict:.6},\"peak_rss_kib\":{},\"cpu_ms\":{}}}",
                times.len(),
                hwm_kib(),
                cpu_ms()
            );
        }
        _ => {
            eprintln!("usage: gate_scale coordinator|members SIZE BASE_PORT");
            std::process::exit(2);
        }
    }
}

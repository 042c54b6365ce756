//! Hidden debug entry (`nccl-wrap __verbs ...`), used by the Soft-RoCE lab: one JSON line out.

use std::time::Instant;

use super::ffi::STATIC_PROVIDERS;
use super::ibverbs::IbVerbs;
use super::probe::{SelftestOptions, Verbs};

/// `list` | `port DEV PORT [GID]` | `selftest DEV PORT GID|- [BYTES] [TIMEOUT_MS]`. Exit 0 when
/// the answer is good (device listed, port queried, self-test passed), 1 otherwise, 2 on usage.
pub fn debug_main(args: Vec<String>) -> i32 {
    // main owns logging setup; this entry runs before it, so it sets up the same filter itself.
    let _ = env_logger::Builder::from_env(env_logger::Env::new().filter("NCCL_WRAP_LOG")).try_init();
    let v = IbVerbs;
    let start = Instant::now();
    // Keys print sorted (serde_json's map), so adding this one last changes nothing of the line.
    let timed = |mut v: serde_json::Value| {
        v["elapsed_us"] = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX).into();
        v
    };
    let arg = |i: usize| args.get(i).map(String::as_str);
    let num = |i: usize| arg(i).and_then(|s| s.parse::<u64>().ok());
    let gid = |i: usize| arg(i).filter(|s| *s != "-").and_then(|s| s.parse::<u32>().ok());
    let (ok, out) = match (arg(0), arg(1), num(2)) {
        (Some("list"), _, _) => match v.device_names() {
            Ok(d) => (true, timed(serde_json::json!({"providers": STATIC_PROVIDERS, "devices": d}))),
            Err(e) => (false, timed(serde_json::json!({"providers": STATIC_PROVIDERS, "error": e.to_string()}))),
        },
        (Some("port"), Some(dev), Some(port)) => match v.query_port(dev, port as u8, gid(3)) {
            Ok(p) => (true, timed(serde_json::json!({"device": dev, "port": port, "attr": p}))),
            Err(e) => (false, timed(serde_json::json!({"device": dev, "port": port, "error": e.to_string()}))),
        },
        (Some("selftest"), Some(dev), Some(port)) => {
            let d = SelftestOptions::default();
            let opts = SelftestOptions {
                buffer_bytes: num(4).map_or(d.buffer_bytes, |b| b as usize),
                timeout_ms: num(5).unwrap_or(d.timeout_ms),
            };
            let r = v.selftest(dev, port as u8, gid(3), &opts);
            (
                r.passed,
                serde_json::json!({"device": dev, "port": port, "buffer_bytes": opts.buffer_bytes, "timeout_ms": opts.timeout_ms, "result": r}),
            )
        }
        _ => {
            eprintln!(
                "usage: nccl-wrap __verbs list | port DEV PORT [GID] | selftest DEV PORT GID|- [BYTES] [TIMEOUT_MS]"
            );
            return 2;
        }
    };
    println!("{out}");
    i32::from(!ok)
}

//! `nccl-wrap ping` through the real binary where no RDMA is needed: usage errors, no usable
//! port, verbs not available, ring settings; each must exit 2 with a clear message, and `--json`
//! must still end with the summary line. (Hostile peers are tested against the exchange layer
//! itself, in `src/ping/exchange_tests.rs`; a real pair runs in the Soft-RoCE lab,
//! `tests/lab/scenarios/80-ping-loopback.sh`.)

mod common;

use common::Run;

fn last_json(stdout: &str) -> serde_json::Value {
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("last line {line:?} is not JSON: {e}"))
}

#[test]
fn no_mode_is_a_usage_error() {
    let d = Run::node("no-rdma").args(["ping"]);
    assert_eq!(d.code(), Some(2), "{}", d.stderr());
    assert!(
        d.stderr().contains("ping needs exactly one of HOST:PORT (connect), --listen [ADDR:]PORT, or --ring"),
        "{}",
        d.stderr()
    );
}

#[test]
fn a_peer_and_listen_together_are_a_usage_error() {
    let d = Run::node("no-rdma").args(["ping", "host:1", "--listen", "18515"]);
    assert_eq!(d.code(), Some(2));
    assert!(d.stderr().contains("ping needs exactly one of"), "{}", d.stderr());
}

#[test]
fn a_node_without_rdma_cannot_run_and_says_so() {
    let d = Run::node("no-rdma").args(["ping", "--json", "127.0.0.1:9"]);
    assert_eq!(d.code(), Some(2), "{}", d.stderr());
    let lines: Vec<serde_json::Value> =
        d.stdout().lines().map(|l| serde_json::from_str(l).expect("one JSON object per line")).collect();
    assert_eq!(lines.len(), 2, "{}", d.stdout());
    assert_eq!(lines[0]["kind"], "ping-error");
    assert_eq!(lines[0]["cause"]["id"], "no-port");
    assert_eq!(lines[1], serde_json::json!({"kind": "ping-summary", "pairs": 0, "failed": 0, "exit": 2}));
    assert!(d.stderr().contains("nccl-wrap: ping cannot run:"), "{}", d.stderr());
}

#[test]
fn usable_ports_without_verbs_cannot_run() {
    // A fixture tree is not the kernel's /sys, so ibverbs are not consulted: ping must not
    // pretend to test anything.
    let d = Run::node("h100-roce-sriov").with_env_file("h100-roce-sriov", "env").args(["ping", "127.0.0.1:9"]);
    assert_eq!(d.code(), Some(2), "{}", d.stderr());
    assert!(d.stdout().contains("FAIL the check could not run"), "{}", d.stdout());
    assert!(d.stdout().contains("no-port: ping moves bytes through ibverbs"), "{}", d.stdout());
    assert!(d.stdout().ends_with("0 pair(s) with 127.0.0.1:9, 0 failed\n"), "{}", d.stdout());
}

#[test]
fn bad_addresses_and_sizes_are_named() {
    for (args, want) in [
        (vec!["ping", "--json", "train-1"], "no :PORT"),
        (vec!["ping", "--json", "a;b:1"], "not a host name"),
        (vec!["ping", "--json", "--listen", "host:1"], "a port, or an IP address"),
        (vec!["ping", "--json", "--bytes", "4", "h:1"], "bytes"),
        (vec!["ping", "--json", "--iters", "0", "h:1"], "iters"),
    ] {
        let d = Run::node("no-rdma").args(&args);
        assert_eq!(d.code(), Some(2), "{args:?}: {}", d.stderr());
        assert!(d.stdout().contains(want), "{args:?}: {}", d.stdout());
        assert_eq!(last_json(&d.stdout())["exit"], 2);
    }
}

/// (arguments, variables, what stderr must say)
type Case = (&'static [&'static str], &'static [(&'static str, &'static str)], &'static str);

#[test]
fn ring_settings_are_checked_before_anything_runs() {
    let cases: [Case; 5] = [
        (&["--size", "4", "--peer-template", "train-{index}.train"], &[], "needs this pod's index"),
        (&["--index", "1", "--peer-template", "t-{index}"], &[], "--size"),
        (&["--index", "4", "--size", "4", "--peer-template", "t-{index}"], &[], "not below the ring size"),
        (&["--size", "4", "--peer-template", "$(reboot)-{index}"], &[("JOB_COMPLETION_INDEX", "1")], "not a host name"),
        (&["--size", "4"], &[("JOB_COMPLETION_INDEX", "1")], "--peer-template"),
    ];
    for (args, env, want) in cases {
        let mut run = Run::node("no-rdma");
        for (k, v) in env {
            run = run.env(k, v);
        }
        let d = run.args(["ping", "--ring", "--json"].iter().chain(args));
        assert_eq!(d.code(), Some(2), "{args:?}: {}", d.stderr());
        assert!(d.stderr().contains(want), "{args:?}: {}", d.stderr());
    }
}

#[test]
fn options_also_come_from_the_environment() {
    let d =
        Run::node("no-rdma").env("NCCL_WRAP_PING_TARGET", "127.0.0.1:9").env("NCCL_WRAP_PING_JSON", "1").args(["ping"]);
    assert_eq!(d.code(), Some(2), "{}", d.stderr());
    assert_eq!(last_json(&d.stdout())["kind"], "ping-summary");
}

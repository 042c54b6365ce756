//! Every `NCCL_WRAP_*` variable with values it cannot take, each alone, with the gate asked for
//! and with `--require-rdma`: the real binary on a node with RDMA ports. A refusal (125, the
//! variable named, before anything runs) exactly where the value belongs to an interlock the
//! user asked for; everywhere else the value is named and ignored alone, and the rest still
//! applies (NCCL_IB_HCA exported, the gate run, the requirement checked).

mod common;

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use common::Run;

const NODE: &str = "h200-ib";

/// What a variable is part of, which decides what a bad value of it costs.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Class {
    /// An interlock's switch: set to anything unreadable, it counts as asked for.
    Switch,
    /// The gate's own setting.
    Gate,
    /// One of ping's knobs that the gate's pair test reads (and nothing else in a run).
    GateKnob,
    /// A run's option.
    Run,
    /// The sysfs root: ignored, the run reads the kernel's /sys, so its ports are another matter.
    Root,
    /// A subcommand's own variable: a run does not read it.
    Sub,
}
use Class::*;

fn not_utf8() -> OsString {
    OsString::from_vec(b"/x/\xff\xfe".to_vec())
}

/// (variable, class, bad values). Non-UTF-8 is added for every one of them.
const TABLE: &[(&str, Class, &[&str])] = &[
    ("NCCL_WRAP_REQUIRE_RDMA", Switch, &["yes-please", "2"]),
    ("NCCL_WRAP_REQUIRE_MEMLOCK", Switch, &["maybe"]),
    ("NCCL_WRAP_GATE", Switch, &["maybe", "refuse"]),
    ("NCCL_WRAP_GATE_COORDINATOR", Gate, &[]),
    ("NCCL_WRAP_GATE_RANK", Gate, &["one", "-1", "65536"]),
    ("NCCL_WRAP_GATE_SIZE", Gate, &["four", "0", "65537"]),
    ("NCCL_WRAP_GATE_PORT", Gate, &["0", "65536", "http"]),
    ("NCCL_WRAP_GATE_ID", Gate, &[]),
    ("NCCL_WRAP_GATE_SECRET", Gate, &[" ", "\t\n"]),
    ("NCCL_WRAP_GATE_SECRET_FILE", Gate, &[]),
    ("NCCL_WRAP_GATE_WAIT_MS", Gate, &["0", "soon", "86400001"]),
    ("NCCL_WRAP_GATE_SLOW", Gate, &["0.7", "101", "-1", "70%"]),
    ("NCCL_WRAP_GATE_REFUSE_SLOW", Gate, &["if-slow"]),
    ("NCCL_WRAP_GATE_PRUNE", Gate, &["drop"]),
    ("NCCL_WRAP_PING_ALL_PAIRS", GateKnob, &["both"]),
    ("NCCL_WRAP_PING_JSON", GateKnob, &["pretty"]),
    ("NCCL_WRAP_PING_BYTES", GateKnob, &["1MiB", "0", "1073741825"]),
    ("NCCL_WRAP_PING_DURATION_MS", GateKnob, &["600001", "1s"]),
    ("NCCL_WRAP_PING_ITERS", GateKnob, &["many", "1000001"]),
    ("NCCL_WRAP_PING_TIMEOUT_MS", GateKnob, &["0", "3s"]),
    ("NCCL_WRAP_OVERRIDE", Run, &["please"]),
    ("NCCL_WRAP_RAILS", Run, &["^mlx5_0", "=mlx5_0", "mlx5_0,,mlx5_1", "pci:zz", "nic:eth0", "mlx5_0:0"]),
    ("NCCL_WRAP_QUIET", Run, &["shh"]),
    ("NCCL_WRAP_SELFTEST", Run, &["maybe"]),
    ("NCCL_WRAP_SELFTEST_BYTES", Run, &["lots", "4095", "1073741825"]),
    ("NCCL_WRAP_SELFTEST_TIMEOUT_MS", Run, &["0", "600001"]),
    ("NCCL_WRAP_SKIP_VERBS", Run, &["nah"]),
    ("NCCL_WRAP_SYSFS_ROOT", Root, &[]),
    ("NCCL_WRAP_PROC_ROOT", Run, &[]),
    ("NCCL_WRAP_IMAGE_ROOT", Run, &[]),
    ("NCCL_WRAP_SUPERVISE", Run, &["sometimes"]),
    ("NCCL_WRAP_INIT", Run, &["sometimes"]),
    ("NCCL_WRAP_KILL_GROUP", Run, &["all"]),
    ("NCCL_WRAP_GRACE", Run, &["four", "86401", "18446744073709551615", "-1"]),
    ("NCCL_WRAP_REPORT", Run, &[]),
    ("NCCL_WRAP_WATCH_MS", Run, &["fast", "3600001"]),
    ("NCCL_WRAP_STALL_MS", Run, &["soon", "500", "86400001"]),
    ("NCCL_WRAP_STATE_FILE", Run, &[]),
    ("NCCL_WRAP_DEV_ROOT", Run, &[]),
    ("NCCL_WRAP_ANNOTATIONS", Run, &[]),
    ("NCCL_WRAP_TERMINATION_LOG", Run, &[]),
    ("NCCL_WRAP_FEATURES", Sub, &[]),
    ("NCCL_WRAP_METRICS", Sub, &[]),
    ("NCCL_WRAP_WATCH_INTERVAL", Sub, &["0.01", "soon"]),
    ("NCCL_WRAP_WATCH_JITTER", Sub, &["51"]),
    ("NCCL_WRAP_WATCH_ROUNDS", Sub, &["1000000001"]),
    ("NCCL_WRAP_WATCH_RING", Sub, &["ring;rm -rf /", "ring:0"]),
    ("NCCL_WRAP_WATCH_RING_EVERY", Sub, &["0", "10001"]),
    ("NCCL_WRAP_WATCH_RING_TIMEOUT_MS", Sub, &["99", "2s", "600001"]),
    ("NCCL_WRAP_PING_TARGET", Sub, &[]),
    ("NCCL_WRAP_PING_LISTEN", Sub, &[]),
    ("NCCL_WRAP_PING_KEEP", Sub, &["forever"]),
    ("NCCL_WRAP_PING_ALLOW", Sub, &["10.0.0.0/33", "pod-network"]),
    ("NCCL_WRAP_PING_RING", Sub, &["round"]),
    ("NCCL_WRAP_PING_PEER_TEMPLATE", Sub, &[]),
    ("NCCL_WRAP_PING_INDEX", Sub, &["65536"]),
    ("NCCL_WRAP_PING_SIZE", Sub, &["0"]),
    ("NCCL_WRAP_PING_PORT", Sub, &["0"]),
    ("NCCL_WRAP_PING_WAIT_MS", Sub, &["86400001"]),
];

/// The context a bad value is tried in.
#[derive(Clone, Copy, PartialEq, Debug)]
enum With {
    Alone,
    /// `NCCL_WRAP_GATE=1` for a job of one pod: the gate runs (and, without ibverbs here, refuses
    /// for the fabric: a refusal of its own, after it ran).
    Gate,
    RequireRdma,
}

fn run(var: &str, value: &OsString, with: With, port: u16) -> common::Done {
    let mut r = Run::node(NODE).env(var, value);
    if with == With::Gate {
        let port = port.to_string();
        for (k, v) in [
            ("NCCL_WRAP_GATE_SIZE", "1"),
            ("NCCL_WRAP_GATE_RANK", "0"),
            ("NCCL_WRAP_GATE_COORDINATOR", "127.0.0.1"),
            ("NCCL_WRAP_GATE_PORT", port.as_str()),
            ("NCCL_WRAP_GATE_WAIT_MS", "2000"),
        ] {
            if k != var {
                r = r.env(k, v);
            }
        }
        if var != "NCCL_WRAP_GATE" {
            r = r.env("NCCL_WRAP_GATE", "1");
        }
    }
    if with == With::RequireRdma && var != "NCCL_WRAP_REQUIRE_RDMA" {
        r = r.env("NCCL_WRAP_REQUIRE_RDMA", "1");
    }
    // Not PID 1 here, so nccl-wrap execs the command (NCCL_WRAP_SUPERVISE is in the table).
    r.args(["--", "/usr/bin/env", "-0"])
}

#[test]
fn every_bad_value_refuses_exactly_where_an_interlock_was_asked_for() {
    let mut port = 28_600u16 + (std::process::id() % 200) as u16 * 16;
    let mut cases = 0;
    for (var, class, bad) in TABLE {
        let values: Vec<OsString> = bad.iter().map(OsString::from).chain([not_utf8()]).collect();
        for value in &values {
            for with in [With::Alone, With::Gate, With::RequireRdma] {
                port = port.wrapping_add(1).max(20_000);
                cases += 1;
                let r = run(var, value, with, port);
                let shown = format!("{var}={value:?} with {with:?}");
                let gate_asked = with == With::Gate;
                let refuses = *class == Switch || (gate_asked && matches!(class, Gate | GateKnob));
                if refuses {
                    assert_eq!(r.code(), Some(125), "{shown}: must refuse\n{}", r.stderr());
                    r.stderr_has("refusing to start").stderr_has(var);
                    r.stderr_lacks("gate: rank");
                    assert_eq!(r.stdout(), "", "{shown}: the command ran");
                    continue;
                }
                // Named (unless a run does not read it), and everything else still applies.
                if matches!(class, Sub) || (*class == GateKnob && !gate_asked) {
                    r.stderr_lacks(var);
                } else {
                    r.stderr_has(&format!("warning: {var}=")).stderr_has("ignored");
                }
                match with {
                    With::Gate => {
                        // The gate was not switched off: it ran, and refused for the fabric.
                        assert_eq!(r.code(), Some(125), "{shown}\n{}", r.stderr());
                        r.stderr_has("gate: rank 0 of 1").stderr_has("the job's fabric check failed");
                    }
                    _ if *class == Root => {
                        assert!(r.code() == Some(0) || with == With::RequireRdma, "{shown}\n{}", r.stderr());
                    }
                    _ => {
                        assert_eq!(r.code(), Some(0), "{shown}\n{}", r.stderr());
                        assert!(
                            r.child_var("NCCL_IB_HCA").is_some(),
                            "{shown}: NCCL_IB_HCA not exported\n{}",
                            r.stderr()
                        );
                    }
                }
            }
        }
    }
    assert!(cases > 250, "{cases}");
}

/// The table covers every variable the help names (the log filter is env_logger's).
#[test]
fn the_table_covers_every_variable() {
    let mut named = std::collections::BTreeSet::new();
    for sub in [None, Some("ping"), Some("watch"), Some("doctor"), Some("env")] {
        let mut c = common::bin_command();
        c.args(sub).arg("--help");
        let out = common::output_within(&mut c, common::DEADLINE);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        for (i, _) in text.match_indices("NCCL_WRAP_") {
            let name: String =
                text[i..].chars().take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_').collect();
            named.insert(name);
        }
    }
    named.remove("NCCL_WRAP_LOG");
    named.remove("NCCL_WRAP_"); // "NCCL_WRAP_*" in prose
    let covered: std::collections::BTreeSet<String> = TABLE.iter().map(|(v, _, _)| v.to_string()).collect();
    let missing: Vec<&String> = named.difference(&covered).collect();
    assert!(missing.is_empty(), "variables without bad values in TABLE: {missing:?}");
}

#[test]
fn a_typo_in_a_variable_name_is_named_with_the_closest_and_refuses_only_for_an_interlock() {
    let r = Run::node(NODE).env("NCCL_WRAP_REQUIRE_RDAM", "1").args(["--", "/usr/bin/env", "-0"]);
    r.code_is(125).stderr_has("NCCL_WRAP_REQUIRE_RDAM").stderr_has("did you mean NCCL_WRAP_REQUIRE_RDMA?");
    assert_eq!(r.stdout(), "");
    let r = Run::node(NODE).env("NCCL_WRAP_QUEIT", "1").args(["--supervise=false", "--", "/usr/bin/env", "-0"]);
    r.success()
        .stderr_has("NCCL_WRAP_QUEIT is not a variable nccl-wrap reads, ignored (did you mean NCCL_WRAP_QUIET?)");
    assert!(r.child_var("NCCL_IB_HCA").is_some());
}

#[test]
fn an_unknown_option_before_dashes_is_named_and_refuses_only_for_an_interlock() {
    let r = Run::node(NODE).args(["--requre-rdma", "--", "/usr/bin/env", "-0"]);
    r.code_is(125).stderr_has("--requre-rdma").stderr_has("did you mean --require-rdma?");
    let r = Run::node(NODE).args(["--verbose", "2", "--supervise=false", "--", "/usr/bin/env", "-0"]);
    r.success().stderr_has("--verbose is not an option of nccl-wrap, ignored");
    assert!(r.child_var("NCCL_IB_HCA").is_some());
    // Without `--` the command's start cannot be told: a usage error, with the closest name.
    Run::node(NODE).args(["--requre-rdma", "/usr/bin/true"]).code_is(2).stderr_has("did you mean --require-rdma?");
}

/// Hostile text in a value or a name (a terminal escape, a forged line of nccl-wrap's own, a
/// hundred kilobytes) reaches stderr escaped, bounded and on one line.
#[test]
fn hostile_names_and_values_are_printed_escaped_and_bounded() {
    let forged = "x\n\u{1b}[2Jnccl-wrap: gate: verdict: GO\r";
    let long = "9".repeat(100_000); // MAX_ARG_STRLEN is 128 KiB
    let r = Run::node(NODE)
        .env("NCCL_WRAP_GRACE", forged)
        .env("NCCL_WRAP_WATCH_MS", &long)
        .env("NCCL_WRAP_\u{1b}[31mEVIL", "1")
        .args(["--\u{1b}]0;title\u{7}", "--", "/usr/bin/env", "-0"]);
    r.success();
    let err = r.stderr();
    assert!(!err.contains('\u{1b}') && !err.contains('\r') && !err.contains('\u{7}'), "{err:?}");
    assert!(!err.lines().any(|l| l.starts_with("nccl-wrap: gate: verdict")), "a forged line got through: {err}");
    assert!(err.lines().all(|l| l.len() < 1024), "an unbounded line: {}", err.len());
    // Control characters become `?`: the value stays recognisable, and cannot act on a terminal.
    assert!(err.contains("warning: NCCL_WRAP_GRACE=\"x??[2Jnccl-wrap: gate: verdict: GO?\" ignored"), "{err}");
    assert!(err.contains("warning: NCCL_WRAP_?[31mEVIL is not a variable nccl-wrap reads"), "{err}");
    assert!(err.contains("warning: --?]0;title? is not an option of nccl-wrap"), "{err}");
    assert!(r.child_var("NCCL_IB_HCA").is_some());
}

/// A command line that cannot be parsed at all (a subcommand given a command) runs the command
/// without nccl-wrap's settings, as before; but not when an interlock was asked for.
#[test]
fn an_unparsable_command_line_never_drops_an_interlock() {
    Run::node(NODE).args(["env", "--", "/usr/bin/true"]).success().stderr_has("running the command without");
    for (var, value) in
        [("NCCL_WRAP_GATE", "1"), ("NCCL_WRAP_REQUIRE_RDMA", "yes-please"), ("NCCL_WRAP_REQUIRE_MEMLOCK", "1")]
    {
        let r = Run::node(NODE).env(var, value).args(["env", "--", "/usr/bin/env", "-0"]);
        r.code_is(125).stderr_has(var);
        assert_eq!(r.stdout(), "", "{var}: the command ran");
    }
    Run::node(NODE).env("NCCL_WRAP_GATE", "off").args(["env", "--", "/usr/bin/true"]).success();
    Run::node(NODE).args(["--require-rdma", "ping", "--", "/usr/bin/true"]).code_is(125).stderr_has("--require-rdma");
}

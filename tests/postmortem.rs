//! The post-mortem end to end: the real binary supervises (`--supervise`, not PID 1) a command on
//! a copy of a fixture node, the test changes a port's `state` file and bumps its counters while
//! the command runs, and the output and the `--report` JSON must name the port, the change, its
//! time and the counters, with the command's exit status kept.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::Scratch;

const NODE: &str = "h100-roce-sriov";
const PORT: &str = "sys/class/infiniband/mlx5_6/ports/1";

/// A supervised run in the background, its stderr going to a file so the test can read the
/// transition line while it runs; killed on drop, so a failing test leaves nothing running.
struct Running {
    child: Child,
    err: PathBuf,
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Running {
    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// The exit code and stderr. Under qemu-user, prctl(PR_SET_CHILD_SUBREAPER) is refused
    /// (EINVAL: the emulator does not pass it on), and nccl-wrap says so in one warning line; that
    /// line is the emulator's, so it is left out of what the tests count.
    fn finish(mut self) -> (i32, String) {
        let deadline = Instant::now() + common::DEADLINE;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                let code = status.code().unwrap_or_else(|| panic!("nccl-wrap ended by a signal: {status:?}"));
                let mut err = self.stderr();
                if !common::runner().is_empty() {
                    err = err
                        .lines()
                        .filter(|l| !l.contains("cannot become a child subreaper"))
                        .map(|l| format!("{l}\n"))
                        .collect();
                }
                return (code, err);
            }
            assert!(Instant::now() < deadline, "nccl-wrap still running\n{}", self.stderr());
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// The fixture copy, with counters on the watched port: `counters/` as mlx5 has it (the IB port
/// counters) and `hw_counters/` (the driver's), `lifespan` included.
fn node(tag: &str) -> Scratch {
    let s = Scratch::node(NODE, tag);
    let port = s.root().join(PORT);
    std::fs::create_dir_all(port.join("counters")).expect("mkdir");
    std::fs::create_dir_all(port.join("hw_counters")).expect("mkdir");
    for (name, v) in [
        ("counters/link_downed", 0),
        ("counters/symbol_error", 2),
        ("counters/port_xmit_data", 1000),
        ("hw_counters/out_of_sequence", 0),
        ("hw_counters/np_cnp_sent", 0),
        ("hw_counters/lifespan", 10),
    ] {
        set(&s, name, &format!("{v}\n"));
    }
    s
}

fn set(s: &Scratch, rel: &str, text: &str) {
    // Written beside the tree, then renamed over the file: the kernel's attributes never read
    // half-written, and a poll between a truncate and its write would see a change that never was.
    let tmp = s.0.join(".set");
    std::fs::write(&tmp, text).unwrap_or_else(|e| panic!("{rel}: {e}"));
    std::fs::rename(&tmp, s.root().join(PORT).join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
}

/// `nccl-wrap --supervise OPTS -- sh -c SCRIPT` on the copied node, environment cleared but for
/// PATH and the node's device-plugin variables.
fn start(s: &Scratch, opts: &[&str], script: &str) -> Running {
    let root = s.root();
    let err = s.0.join("stderr");
    let mut cmd = common::bin_command();
    cmd.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("NCCL_WRAP_SYSFS_ROOT", root.join("sys"))
        .env("NCCL_WRAP_ANNOTATIONS", "/nonexistent/annotations");
    for (k, v) in common::env_file(NODE, "env") {
        cmd.env(k, v);
    }
    cmd.args(["-q", "--supervise"])
        .args(opts)
        .args(["--", "sh", "-c", script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).expect("stderr file"));
    Running { child: cmd.spawn().expect("spawn nccl-wrap"), err }
}

fn wait_for(what: &str, r: &Running, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + common::DEADLINE;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}\n{}", r.stderr());
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A command that says it runs (`ready`), waits for `go`, then runs `then`.
fn waiting(s: &Scratch, then: &str) -> String {
    let (ready, go) = (s.0.join("ready"), s.0.join("go"));
    format!("touch {}; while [ ! -e {} ]; do sleep 0.01; done; {then}", ready.display(), go.display())
}

fn go(s: &Scratch) {
    std::fs::write(s.0.join("go"), "").expect("go file");
}

/// `2026-11-23T18:40:12.345Z` at the start of `text`.
fn starts_with_utc(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() >= 24
        && b[..24].iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            19 => *c == b'.',
            23 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

/// The report at `path`, checked against docs/schemas/postmortem.schema.json.
fn report(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("report is not JSON: {e}\n{text}"));
    let errors: Vec<String> = schema().iter_errors(&v).map(|e| format!("{e} at {}", e.instance_path())).collect();
    assert!(errors.is_empty(), "the report does not match its schema:\n{}\n{text}", errors.join("\n"));
    v
}

fn schema() -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schemas/postmortem.schema.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let value: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    jsonschema::validator_for(&value).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_schema_rejects_what_the_report_never_holds() {
    let good = serde_json::json!({
        "kind": "postmortem",
        "command": {"code": 137, "signal": "SIGKILL", "forwarded": "SIGTERM"},
        "started": "2026-11-23T18:00:00.000Z", "ended": "2026-11-23T18:00:01.500Z", "seconds": 1.5,
        "watch_ms": 1000, "polls": 1,
        "ports": [{"port": "mlx5_6:1", "start": {"state": "ACTIVE", "phys_state": "LinkUp"},
                   "exit": {"state": "DOWN", "phys_state": "Disabled"},
                   "counters": [{"name": "link_downed", "group": "counters", "start": 0, "exit": 1, "delta": 1,
                                 "kind": "error", "meaning": "the link went down"}]}],
        "transitions": [], "transitions_dropped": 0, "problems": []
    });
    let v = schema();
    assert!(v.is_valid(&good), "{:?}", v.iter_errors(&good).map(|e| e.to_string()).collect::<Vec<_>>());
    for (what, pointer, bad) in [
        ("a local time", "/started", serde_json::json!("2026-11-23 18:00:00")),
        ("a delta of zero (an unmoved counter)", "/ports/0/counters/0/delta", serde_json::json!(0)),
        ("an exit code past 255", "/command/code", serde_json::json!(256)),
        ("a port without its number", "/ports/0/port", serde_json::json!("mlx5_6")),
        ("a kind outside the table's", "/ports/0/counters/0/kind", serde_json::json!("fatal")),
        ("a negative count of dropped transitions", "/transitions_dropped", serde_json::json!(-1)),
    ] {
        let mut doc = good.clone();
        *doc.pointer_mut(pointer).unwrap_or_else(|| panic!("{pointer}")) = bad;
        assert!(!v.is_valid(&doc), "the schema accepts {what}");
    }
}

#[test]
fn a_port_going_down_mid_run_is_logged_when_seen_and_named_in_the_post_mortem() {
    let s = node("pm-down");
    let json = s.0.join("report.json");
    let log = s.0.join("termination-log");
    let r = start(
        &s,
        &["--watch-ms", "50", "--report", &json.to_string_lossy(), "--termination-log", &log.to_string_lossy()],
        &waiting(&s, "exit 3"),
    );
    wait_for("the command to start", &r, || s.0.join("ready").exists());
    set(&s, "state", "1: DOWN\n");
    set(&s, "phys_state", "3: Disabled\n");
    set(&s, "counters/link_downed", "1\n");
    set(&s, "counters/port_xmit_data", "5000\n");
    set(&s, "hw_counters/out_of_sequence", "7\n");
    set(&s, "hw_counters/np_cnp_sent", "12\n");
    // Logged while the command still runs, not only at its end.
    wait_for("the transition line", &r, || r.stderr().contains("port state"));
    go(&s);
    let (code, err) = r.finish();
    assert_eq!(code, 3, "the command's status passes through\n{err}");
    // No RAS here: the failed run's termination message is its ports' account.
    let told = std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("termination message: {e}\n{err}"));
    assert!(told.starts_with("nccl-wrap: the command exited with status 3; the RDMA ports it used:"), "{told}");
    assert!(told.contains(" mlx5_6:1 port state ACTIVE/LinkUp -> DOWN/Disabled"), "{told}");
    assert!(told.contains("mlx5_6:1 link_downed +1 since the start (read at exit)"), "{told}");

    let live = err.lines().find(|l| l.contains("port state")).expect("transition line");
    let live = live.strip_prefix("nccl-wrap: ").unwrap_or_else(|| panic!("not prefixed: {live}"));
    assert!(starts_with_utc(live), "no UTC time first: {live}");
    assert!(live.ends_with(" mlx5_6:1 port state ACTIVE/LinkUp -> DOWN/Disabled"), "{live}");
    for needle in [
        "post-mortem: the command exited with status 3 after",
        "on its RDMA ports (mlx5_6:1, mlx5_7:1, mlx5_10:1, mlx5_11:1) since it started:",
        "mlx5_6:1 link_downed +1: the link went down",
        "mlx5_6:1 out_of_sequence +7: packets arrived out of order",
        "mlx5_6:1 np_cnp_sent +12: congestion notifications sent",
        &format!("post-mortem as JSON: {}", json.display()),
    ] {
        assert!(err.contains(needle), "stderr lacks {needle:?}\n{err}");
    }
    assert!(
        !err.contains("port_xmit_data") && !err.contains("symbol_error"),
        "traffic and unmoved counters stay out\n{err}"
    );
    assert!(err.lines().all(|l| l.starts_with("nccl-wrap: ")), "{err}");

    let v = report(&json);
    assert_eq!(v["kind"], "postmortem");
    assert_eq!(v["command"]["code"], 3);
    assert_eq!(v["command"]["signal"], serde_json::Value::Null);
    assert_eq!(v["watch_ms"], 50);
    assert!(v["polls"].as_u64().is_some_and(|n| n >= 1), "the transition was seen by a poll: {v}");
    let t = &v["transitions"][0];
    assert_eq!((t["port"].as_str(), t["seen"].as_str()), (Some("mlx5_6:1"), Some("poll")), "{v}");
    assert_eq!((t["from"]["state"].as_str(), t["to"]["state"].as_str()), (Some("ACTIVE"), Some("DOWN")));
    assert_eq!(t["to"]["phys_state"], "Disabled");
    assert!(live.starts_with(t["time"].as_str().unwrap_or("?")), "the JSON time is the logged one");
    let port = &v["ports"][0];
    assert_eq!(port["port"], "mlx5_6:1");
    assert_eq!(port["exit"]["state"], "DOWN");
    let names: Vec<(&str, &str, u64)> = port["counters"]
        .as_array()
        .expect("counters")
        .iter()
        .map(|c| {
            (c["name"].as_str().unwrap_or("?"), c["kind"].as_str().unwrap_or("?"), c["delta"].as_u64().unwrap_or(0))
        })
        .collect();
    assert_eq!(
        names,
        vec![
            ("link_downed", "error", 1),
            ("out_of_sequence", "error", 7),
            ("np_cnp_sent", "congestion", 12),
            ("port_xmit_data", "traffic", 4000)
        ]
    );
    assert_eq!(port["counters"][0]["group"], "counters");
    assert_eq!(port["counters"][1]["group"], "hw_counters");
    assert!(v["ports"][1]["counters"].as_array().is_some_and(Vec::is_empty), "mlx5_7:1 did not change");
}

#[test]
fn a_change_between_polls_and_a_death_by_signal_are_still_reported() {
    let s = node("pm-signal");
    // No polling at all: only the reading at exit can see the change.
    let r = start(&s, &["--watch-ms", "0"], &waiting(&s, "kill -KILL $$"));
    wait_for("the command to start", &r, || s.0.join("ready").exists());
    set(&s, "state", "2: INIT\n");
    set(&s, "counters/symbol_error", "9\n");
    std::thread::sleep(Duration::from_millis(200));
    assert!(!r.stderr().contains("port state"), "nothing polls with --watch-ms 0\n{}", r.stderr());
    go(&s);
    let (code, err) = r.finish();
    assert_eq!(code, 137, "{err}");
    assert!(err.contains("post-mortem: the command was killed by SIGKILL (exit status 137)"), "{err}");
    assert!(err.contains("mlx5_6:1 port state ACTIVE/LinkUp -> INIT/LinkUp (seen at exit)"), "{err}");
    assert!(err.contains("mlx5_6:1 symbol_error +7: bit errors on the wire"), "{err}");
}

#[test]
fn a_command_stopped_through_nccl_wrap_is_told_apart_from_a_crash() {
    // The kubelet's SIGTERM goes to nccl-wrap, which forwards it; the post-mortem says so.
    let s = node("pm-term");
    let r = start(&s, &[], &waiting(&s, "exit 0"));
    wait_for("the command to start", &r, || s.0.join("ready").exists());
    let pid = nix::unistd::Pid::from_raw(i32::try_from(r.child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("kill");
    let (code, err) = r.finish();
    assert_eq!(code, 143, "{err}");
    assert!(
        err.contains("the command was killed by SIGTERM (exit status 143); nccl-wrap had forwarded SIGTERM to it"),
        "{err}"
    );
}

#[test]
fn a_failure_with_nothing_changed_gets_one_line_and_a_clean_exit_none() {
    let s = node("pm-quiet");
    let (code, err) = start(&s, &[], "exit 1").finish();
    assert_eq!(code, 1);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("kept their state (mlx5_6:1 ACTIVE/LinkUp, mlx5_7:1 ACTIVE/LinkUp"), "{err}");
    assert!(err.contains("no error counter moved"), "{err}");
    let (code, err) = start(&s, &[], "exit 0").finish();
    assert_eq!((code, err.as_str()), (0, ""), "a clean exit with nothing changed adds nothing");
}

#[test]
fn a_clean_exit_after_a_change_adds_exactly_one_line() {
    let s = node("pm-clean");
    let r = start(&s, &["--watch-ms", "20"], &waiting(&s, "exit 0"));
    wait_for("the command to start", &r, || s.0.join("ready").exists());
    set(&s, "counters/link_downed", "2\n");
    set(&s, "state", "1: DOWN\n");
    wait_for("the transition line", &r, || r.stderr().contains("port state"));
    set(&s, "state", "4: ACTIVE\n");
    wait_for("the second transition", &r, || r.stderr().matches("port state").count() == 2);
    go(&s);
    let (code, err) = r.finish();
    assert_eq!(code, 0, "{err}");
    let after: Vec<&str> = err.lines().filter(|l| !l.contains(" port state ")).collect();
    assert_eq!(after.len(), 1, "{err}");
    assert!(after[0].contains("the command exited 0, but its RDMA ports changed during the run"), "{err}");
    assert!(after[0].contains("mlx5_6:1 link_downed +2"), "{err}");
}

#[test]
fn a_report_that_cannot_be_written_is_a_warning_and_the_status_is_kept() {
    let s = node("pm-unwritable");
    let bad = s.0.join("no/such/dir/report.json");
    let (code, err) = start(&s, &["--report", &bad.to_string_lossy()], "exit 4").finish();
    assert_eq!(code, 4, "{err}");
    assert!(err.contains(&format!("cannot write the post-mortem to {}", bad.display())), "{err}");
    assert!(!err.contains("post-mortem as JSON"), "{err}");
    // A clean run writes the report too, for tools that collect it.
    let good = s.0.join("clean.json");
    let (code, _) = start(&s, &["--report", &good.to_string_lossy()], "exit 0").finish();
    assert_eq!(code, 0);
    assert_eq!(report(&good)["command"]["code"], 0);
}

#[test]
fn a_fifo_among_the_counters_is_refused_not_waited_on() {
    // A counter file that is a FIFO without a writer would block a plain read for ever, and the
    // supervisor with it. It is refused by kind and named in the report.
    let s = node("pm-fifo");
    let fifo = s.root().join(PORT).join("hw_counters/retry_exceeded_err");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR).expect("mkfifo");
    let json = s.0.join("r.json");
    let (code, err) = start(&s, &["--report", &json.to_string_lossy()], "exit 2").finish();
    assert_eq!(code, 2, "{err}");
    let v = report(&json);
    let problems = v["problems"].as_array().expect("problems");
    assert!(
        problems.iter().any(|p| p.as_str().is_some_and(|t| t.contains("retry_exceeded_err") && t.contains("FIFO"))),
        "{v}"
    );
}

#[test]
fn a_closed_stderr_never_ends_the_supervisor() {
    // Regression guard: stderr a pipe whose reader has gone (`nccl-wrap ... 2>&1 | tee` with tee
    // killed). Printing there with eprintln! panics on EPIPE; a transition logged mid-run must not
    // end the supervisor, and with it (as PID 1) the pod.
    let s = node("pm-epipe");
    let json = s.0.join("r.json");
    let mut cmd = common::bin_command();
    cmd.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("NCCL_WRAP_SYSFS_ROOT", s.root().join("sys"))
        .env("NCCL_WRAP_ANNOTATIONS", "/nonexistent/annotations");
    for (k, v) in common::env_file(NODE, "env") {
        cmd.env(k, v);
    }
    cmd.args(["-q", "--supervise", "--watch-ms", "20", "--report", &json.to_string_lossy()])
        .args(["--", "sh", "-c", &waiting(&s, "exit 3")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn nccl-wrap");
    drop(child.stderr.take()); // the reader is gone
    let r = Running { child, err: s.0.join("none") };
    wait_for("the command to start", &r, || s.0.join("ready").exists());
    set(&s, "state", "1: DOWN\n");
    // The transition is in the report once it is seen; wait two periods and more, then end.
    std::thread::sleep(Duration::from_millis(300));
    go(&s);
    let (code, _) = r.finish();
    assert_eq!(code, 3, "the command's status, not a panic's");
    assert_eq!(report(&json)["transitions"][0]["seen"], "poll");
}

#[test]
fn report_in_exec_mode_says_there_will_be_none() {
    let s = node("pm-exec");
    let json = s.0.join("r.json");
    let mut cmd = common::bin_command();
    cmd.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("NCCL_WRAP_SYSFS_ROOT", s.root().join("sys"))
        .env("NCCL_WRAP_ANNOTATIONS", "/nonexistent")
        .env("NCCL_WRAP_REPORT", &json)
        .args(["-q", "--init=false", "--", "sh", "-c", "exit 5"]);
    let out = common::output_within(&mut cmd, common::DEADLINE);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(err.contains("no post-mortem will be written") && err.contains("--supervise"), "{err}");
    assert!(!json.exists());
}

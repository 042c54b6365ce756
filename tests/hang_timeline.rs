//! The hang account joined with the post-mortem, end to end: the real binary supervises a command
//! on a copy of a fixture node, a watched port goes DOWN and an error counter moves while it runs,
//! a stand-in RAS server names a stopped rank, and at SIGTERM the termination message must hold
//! both on one time line (the port's transition, RAS's finding, the counter's move at exit),
//! the rank first, under 4096 bytes.

mod common;
#[path = "standin/ras.rs"]
mod standin;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::Scratch;
use standin::{captured, Server};

const NODE: &str = "h100-roce-sriov";
const PORT: &str = "sys/class/infiniband/mlx5_6/ports/1";

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + common::DEADLINE;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn the_termination_message_puts_the_port_and_the_rank_on_one_time_line() {
    let s = Scratch::node(NODE, "hang-timeline");
    let port = s.root().join(PORT);
    std::fs::create_dir_all(port.join("counters")).expect("mkdir");
    std::fs::write(port.join("counters/symbol_error"), "2\n").expect("counter");
    let ras = Server::start(captured("stopped-dead"));
    let (ready, term, stderr) = (s.0.join("ready"), s.0.join("termination"), s.0.join("stderr"));
    let mut cmd = common::bin_command();
    cmd.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("NCCL_WRAP_SYSFS_ROOT", s.root().join("sys"))
        .env("NCCL_WRAP_ANNOTATIONS", "/nonexistent/annotations")
        .env("NCCL_RAS_ADDR", ras.addr.to_string());
    for (k, v) in common::env_file(NODE, "env") {
        cmd.env(k, v);
    }
    cmd.args(["-q", "--supervise", "--watch-ms", "20", "--state-file"])
        .arg(s.0.join("state.json"))
        .arg("--termination-log")
        .arg(&term)
        .args(["--", "sh", "-c"])
        .arg(format!("touch {}; exec sleep 30", ready.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).expect("stderr"));
    let mut child = Killed(cmd.spawn().expect("spawn"));
    wait_for("the command", || ready.exists());
    // Changed by rename, as sysfs never reads half-written: a poll between a plain write's
    // truncate and its write would see a transition that never was.
    for (rel, text) in [("state", "1: DOWN\n"), ("counters/symbol_error", "9\n")] {
        std::fs::write(s.0.join(".set"), text).expect(rel);
        std::fs::rename(s.0.join(".set"), port.join(rel)).expect(rel);
    }
    wait_for("the transition to be seen", || {
        std::fs::read_to_string(&stderr)
            .unwrap_or_default()
            .contains("mlx5_6:1 port state ACTIVE/LinkUp -> DOWN/LinkUp")
    });
    let pid = i32::try_from(child.0.id()).expect("pid");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
    let deadline = Instant::now() + common::DEADLINE;
    let status = loop {
        if let Some(st) = child.0.try_wait().expect("wait") {
            break st;
        }
        assert!(Instant::now() < deadline, "nccl-wrap still running");
        std::thread::sleep(Duration::from_millis(5));
    };
    let err = std::fs::read_to_string(&stderr).unwrap_or_default();
    assert_eq!(status.code(), Some(143), "{err}");
    let t = std::fs::read_to_string(&term).unwrap_or_default();
    assert!(t.len() <= 4096);
    let lines: Vec<&str> = t.lines().collect();
    assert!(lines[1].contains("rank 1 (pid 610 on node 127.0.0.1, GPU 0) dead"), "the rank first:\n{t}");
    let at = |needle: &str| lines.iter().position(|l| l.contains(needle)).unwrap_or_else(|| panic!("{needle}:\n{t}"));
    let (line, port_down, ras_line, counter) = (
        at("time line:"),
        at("mlx5_6:1 port state ACTIVE/LinkUp -> DOWN/LinkUp"),
        at("RAS: rank 1 (pid 610"),
        at("mlx5_6:1 symbol_error +7 since the start (read at exit)"),
    );
    assert!(line < port_down && port_down < ras_line && ras_line < counter, "in time order:\n{t}");
    assert!(!t.contains("no port moved"), "{t}");
}

//! `nccl-wrap status` end to end: the real binary supervises a command on a copy of a fixture
//! node with a stand-in RAS server on loopback; while it runs, a counter moves and `status`
//! (text and `--json`, checked against docs/schemas/status.schema.json) must name the port, the
//! counter's move since the start and the rank RAS names; once the command has ended, the state
//! is gone and `status` says so (exit 2).

mod common;
#[path = "standin/ras.rs"]
mod standin;

use std::path::Path;
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

fn status(s: &Scratch, state: &Path, json: bool) -> (i32, String, String) {
    let mut cmd = common::bin_command();
    cmd.env_clear()
        .env("PATH", "/usr/bin:/bin")
        .arg("status")
        .arg("--state-file")
        .arg(state)
        .arg("--sysfs-root")
        .arg(s.root().join("sys"));
    if json {
        cmd.arg("--json");
    }
    let out = common::output_within(&mut cmd, common::DEADLINE);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn status_names_the_moved_counter_and_the_rank_ras_names_while_the_job_runs() {
    let s = Scratch::node(NODE, "status");
    let port = s.root().join(PORT);
    std::fs::create_dir_all(port.join("counters")).expect("mkdir");
    std::fs::write(port.join("counters/symbol_error"), "2\n").expect("counter");
    let ras = Server::start(captured("stopped-incomplete"));
    let state = s.0.join("state.json");
    let (ready, go) = (s.0.join("ready"), s.0.join("go"));
    let mut cmd = common::bin_command();
    cmd.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("NCCL_WRAP_SYSFS_ROOT", s.root().join("sys"))
        .env("NCCL_WRAP_ANNOTATIONS", "/nonexistent/annotations")
        .env("NCCL_RAS_ADDR", ras.addr.to_string());
    for (k, v) in common::env_file(NODE, "env") {
        cmd.env(k, v);
    }
    cmd.args(["-q", "--supervise", "--state-file"])
        .arg(&state)
        .args(["--", "sh", "-c"])
        .arg(format!("touch {}; while [ ! -e {} ]; do sleep 0.01; done", ready.display(), go.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = Killed(cmd.spawn().expect("spawn"));
    let deadline = Instant::now() + common::DEADLINE;
    while !(ready.exists() && state.exists()) {
        assert!(Instant::now() < deadline, "the command or its state never appeared");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::fs::write(port.join("counters/symbol_error"), "9\n").expect("counter");

    let (code, out, err) = status(&s, &state, false);
    assert_eq!(code, 1, "something needs a look\n{out}{err}");
    assert!(out.contains("port mlx5_6:1 ACTIVE/LinkUp"), "{out}");
    assert!(out.contains("symbol_error +7 since the start"), "{out}");
    assert!(out.contains("rank 1 (pid 610 on node 127.0.0.1, GPU 0) not answering"), "{out}");

    let (_, out, _) = status(&s, &state, true);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));
    let schema_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schemas/status.schema.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path).expect("schema")).expect("schema JSON");
    let validator = jsonschema::validator_for(&schema).expect("schema");
    let errors: Vec<String> = validator.iter_errors(&v).map(|e| format!("{e} at {}", e.instance_path())).collect();
    assert!(errors.is_empty(), "{}\n{v}", errors.join("\n"));
    assert_eq!(v["ras"]["findings"][1]["who"][0]["rank"], 1, "{v}");

    std::fs::write(&go, "").expect("go");
    let deadline = Instant::now() + common::DEADLINE;
    while child.0.try_wait().expect("wait").is_none() {
        assert!(Instant::now() < deadline, "nccl-wrap still running");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(!state.exists(), "the state is withdrawn when the supervisor ends");
    let (code, _, err) = status(&s, &state, false);
    assert_eq!(code, 2);
    assert!(err.contains("no supervisor state"), "{err}");
}

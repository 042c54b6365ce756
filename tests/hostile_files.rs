//! Files that could block or never end a read: FIFOs, character devices, sockets, directories
//! and oversized files where nccl-wrap expects a small regular file. Every run must finish
//! (common::DEADLINE turns a hang into a failure), say which path was refused and what it is,
//! and still run the command.

mod common;

use std::path::Path;
use std::process::Command;

use common::{Run, Scratch};

const NODE: &str = "h100-roce-sriov";

/// Replaces the file at `rel` of a scratch node (symlinks resolved) by a FIFO.
fn fifo(s: &Scratch, rel: &str) {
    let real = std::fs::canonicalize(s.root().join(rel)).expect("resolve");
    std::fs::remove_file(&real).expect("rm");
    mkfifo(&real);
}

fn mkfifo(path: &Path) {
    let st = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(st.success(), "mkfifo {path:?}");
}

fn run_on(s: &Scratch) -> Run {
    Run::node(NODE).env("NCCL_WRAP_SYSFS_ROOT", s.root().join("sys")).with_env_file(NODE, "env")
}

#[test]
fn fifo_port_state_is_refused_and_the_command_still_runs() {
    let s = Scratch::node(NODE, "hostile-state");
    fifo(&s, "sys/class/infiniband/mlx5_6/ports/1/state");
    let named = s.root().join("sys/class/infiniband/mlx5_6/ports/1/state");
    let r = run_on(&s).no_annotations().args(["--", "/usr/bin/env", "-0"]);
    r.success();
    let j = run_on(&s).no_annotations().args(["env", "--json"]).success().json();
    let problems = j.to_string();
    assert!(
        problems.contains(&format!("{} is a FIFO (named pipe), not a regular file", named.display())),
        "{problems}"
    );
    // The port whose state cannot be read is not used; the other three are.
    assert_eq!(r.child_var("NCCL_IB_HCA").as_deref(), Some("=mlx5_7:1,mlx5_10:1,mlx5_11:1"));
}

#[test]
fn fifo_gid_entry_is_refused_in_doctor_too() {
    let s = Scratch::node(NODE, "hostile-gid");
    fifo(&s, "sys/class/infiniband/mlx5_7/ports/1/gids/3");
    let r = run_on(&s).no_annotations().args(["doctor", "--json", "--no-selftest"]);
    assert!(matches!(r.code(), Some(0 | 1)), "doctor ran to the end: {:?}\n{}", r.code(), r.stderr());
    assert!(r.stdout().contains("gids/3 is a FIFO (named pipe)"), "{}\n{}", r.stdout(), r.stderr());
}

#[test]
fn annotations_that_are_not_regular_files_are_refused_by_kind() {
    let s = Scratch::node(NODE, "hostile-ann");
    let fifo = s.0.join("annotations.fifo");
    mkfifo(&fifo);
    let dir = s.0.join("annotations.dir");
    std::fs::create_dir_all(&dir).expect("mkdir");
    for (path, kind) in [
        (fifo.as_path(), "is a FIFO (named pipe)"),
        (Path::new("/dev/zero"), "is a character device"),
        (dir.as_path(), "is a directory"),
    ] {
        // No device-plugin variables: the annotation is the source nccl-wrap would use.
        let r = Run::node(NODE).env("NCCL_WRAP_SYSFS_ROOT", s.root().join("sys")).env("NCCL_WRAP_ANNOTATIONS", path);
        let r = r.args(["--", "/usr/bin/env", "-0"]);
        r.success().stderr_lacks("panicked");
        let j = Run::node(NODE)
            .env("NCCL_WRAP_SYSFS_ROOT", s.root().join("sys"))
            .env("NCCL_WRAP_ANNOTATIONS", path)
            .args(["env", "--json"]);
        let text = j.success().stdout();
        assert!(text.contains(&format!("{} {kind}", path.display())), "{kind}: {text}");
    }
}

#[test]
fn oversized_annotations_are_refused_not_read() {
    let s = Scratch::node(NODE, "hostile-big");
    let big = s.0.join("annotations");
    std::fs::write(&big, vec![b'x'; 2 << 20]).expect("write");
    let r = Run::node(NODE).env("NCCL_WRAP_SYSFS_ROOT", s.root().join("sys")).env("NCCL_WRAP_ANNOTATIONS", &big);
    let text = r.args(["env", "--json"]).success().stdout();
    assert!(text.contains("is larger than 1048576 bytes: refused, not read"), "{text}");
}

#[test]
fn fifo_proc_files_do_not_hang_doctor() {
    let s = Scratch::node(NODE, "hostile-proc");
    let proc_root = s.0.join("proc");
    std::fs::create_dir_all(proc_root.join("driver/nvidia")).expect("mkdir");
    std::fs::create_dir_all(proc_root.join("sys/kernel")).expect("mkdir");
    mkfifo(&proc_root.join("cmdline"));
    mkfifo(&proc_root.join("driver/nvidia/version"));
    mkfifo(&proc_root.join("sys/kernel/osrelease"));
    let r =
        run_on(&s).no_annotations().env("NCCL_WRAP_PROC_ROOT", &proc_root).args(["doctor", "--json", "--no-selftest"]);
    assert!(matches!(r.code(), Some(0 | 1)), "{:?}\n{}", r.code(), r.stderr());
    let text = r.stdout();
    assert!(text.contains("cmdline"), "{text}");
}

/// Regression: the gate read the pod's name from PROC/sys/kernel/hostname with an unbounded,
/// blocking read; a FIFO there (no writer) hung `--gate` before it started. Now refused, and the
/// gate runs (without ibverbs here it then refuses for the fabric, which is the answer).
#[test]
fn fifo_proc_hostname_and_route_do_not_hang_the_gate() {
    let s = Scratch::node(NODE, "hostile-gate-proc");
    let proc_root = s.0.join("proc");
    std::fs::create_dir_all(proc_root.join("sys/kernel")).expect("mkdir");
    std::fs::create_dir_all(proc_root.join("net")).expect("mkdir");
    mkfifo(&proc_root.join("sys/kernel/hostname"));
    mkfifo(&proc_root.join("net/route"));
    let port = (30_000 + std::process::id() % 20_000).to_string();
    let r = run_on(&s)
        .env("NCCL_WRAP_PROC_ROOT", &proc_root)
        .env("HOSTNAME", "pod-a")
        .env("NCCL_WRAP_GATE", "1")
        .env("NCCL_WRAP_GATE_SIZE", "1")
        .env("NCCL_WRAP_GATE_RANK", "0")
        .env("NCCL_WRAP_GATE_COORDINATOR", "127.0.0.1")
        .env("NCCL_WRAP_GATE_PORT", &port)
        .args(["--", "/usr/bin/true"]);
    r.code_is(125).stderr_has("gate: rank 0 of 1").stderr_has("pod-a");
}

/// KEP-5304 metadata under a tree the container was handed: a 10 MB file, a FIFO, JSON nested far
/// deeper than any metadata, directories nested 200 deep (one of them named like a metadata file),
/// a symlink to itself and one back to its own tree. Each is named and skipped, never waited on;
/// the good files still name the pod's devices.
#[test]
fn hostile_dra_metadata_is_named_and_skipped_and_never_hangs() {
    const DRIVER_FILE: &str = "sriovnetwork.k8snetworkplumbingwg.io-metadata.json";
    let node = "dra-metadata";
    let s = Scratch::node(node, "hostile-dra");
    let claims = s.root().join("var/run/kubernetes.io/dra-device-attributes/resourceclaims");
    let request = |claim: &str| {
        let d = claims.join(claim).join("nics");
        std::fs::create_dir_all(&d).expect("mkdir");
        d
    };
    std::fs::write(request("big").join(DRIVER_FILE), vec![b' '; 10 << 20]).expect("write");
    mkfifo(&request("fifo").join(DRIVER_FILE));
    std::fs::write(request("deep").join(DRIVER_FILE), "[".repeat(100_000)).expect("write");
    let mut nested = request("dirs").join(DRIVER_FILE);
    for _ in 0..200 {
        nested = nested.join("a");
    }
    std::fs::create_dir_all(&nested).expect("mkdir");
    std::os::unix::fs::symlink("loop", claims.join("loop")).expect("symlink");
    std::os::unix::fs::symlink(".", claims.join("cycle")).expect("symlink");

    let run = || Run::node(node).env("NCCL_WRAP_SYSFS_ROOT", s.root().join("sys"));
    let j = run().args(["env", "--json"]).success().json();
    assert_eq!(j["source"], "dra_metadata", "{j}");
    assert_eq!(j["hca"], serde_json::json!(["mlx5_5:1", "mlx5_6:1", "mlx5_7:1"]), "{j}");
    let problems = j["sources"][0]["problems"].to_string();
    for needle in [
        "big/nics/sriovnetwork.k8snetworkplumbingwg.io-metadata.json is larger than 1048576 bytes: refused, not read",
        "fifo/nics/sriovnetwork.k8snetworkplumbingwg.io-metadata.json is a FIFO (named pipe), not a regular file",
        "deep/nics/sriovnetwork.k8snetworkplumbingwg.io-metadata.json skipped: metadata file nests arrays and objects deeper than 32",
        "dirs/nics/sriovnetwork.k8snetworkplumbingwg.io-metadata.json is a directory, not a regular file",
        "resourceclaims/loop: Too many levels of symbolic links",
    ] {
        assert!(problems.contains(needle), "{needle}\n{problems}");
    }
    run().args(["--", "/usr/bin/true"]).success().stderr_lacks("panicked");
}

//! Reasons that name the real cause, on copies of the h100 node changed one fact at a time: an
//! iWARP device, a port without a GID table, a kept NCCL_IB_GID_INDEX at an empty entry (at start
//! and in doctor), an IPv4 link-local GID.

mod common;

use std::path::PathBuf;

use common::{image, Run, Scratch};

const NODE: &str = "h100-roce-sriov";

fn run_on(s: &Scratch) -> Run {
    let root = s.root();
    Run::node(NODE)
        .with_env_file(NODE, "env")
        .env("NCCL_WRAP_SYSFS_ROOT", root.join("sys"))
        .env("NCCL_WRAP_DEV_ROOT", root.join("dev"))
        .env("NCCL_WRAP_IMAGE_ROOT", image("full"))
}

fn dev(s: &Scratch, name: &str) -> PathBuf {
    std::fs::canonicalize(s.root().join("sys/class/infiniband").join(name)).expect("device dir")
}

#[test]
fn an_iwarp_device_is_named_as_such_not_as_a_missing_address() {
    let s = Scratch::node(NODE, "iwarp");
    let d = dev(&s, "mlx5_6");
    std::fs::write(d.join("node_type"), "4: RNIC\n").expect("write");
    std::fs::write(d.join("ports/1/gids/3"), "0000:0000:0000:0000:0000:0000:0000:0000\n").expect("write");
    let r = run_on(&s).args(["--supervise=false", "--", "true"]);
    r.success().stderr_has("mlx5_6:1 not used: an iWARP device (node_type 4: RNIC)");
}

#[test]
fn a_port_without_a_gid_table_says_so() {
    let s = Scratch::node(NODE, "nogids");
    std::fs::remove_dir_all(dev(&s, "mlx5_7").join("ports/1/gids")).expect("rm");
    let r = run_on(&s).args(["--supervise=false", "--", "true"]);
    r.success().stderr_has("mlx5_7:1 not used: no GID table");
}

#[test]
fn a_kept_gid_index_at_an_empty_entry_says_nccl_will_fail_on_it_at_start_and_in_doctor() {
    let s = Scratch::node(NODE, "keptindex");
    let r = run_on(&s).env("NCCL_IB_GID_INDEX", "5").args(["--supervise=false", "--", "true"]);
    r.success()
        .stderr_has(
            "NCCL_IB_GID_INDEX=\"5\" is kept from the environment and points where mlx5_6:1 holds an empty entry",
        )
        .stderr_has("NCCL will fail on it");
    let root = s.root();
    let j = run_on(&s)
        .env("NCCL_IB_GID_INDEX", "5")
        .env("NCCL_WRAP_PROC_ROOT", root.join("proc"))
        .args(["doctor", "--json", "--no-selftest"])
        .json();
    let gid: Vec<&serde_json::Value> =
        j["checks"].as_array().expect("checks").iter().filter(|c| c["id"] == "gid").collect();
    assert!(!gid.is_empty());
    for c in gid.iter().filter(|c| c["evidence"]["port"].is_number()) {
        assert_eq!(c["status"], "fail", "{c}");
        assert!(c["summary"].as_str().is_some_and(|x| x.contains("NCCL will fail on it")), "{c}");
    }
    // The right index: no such warning.
    run_on(&s)
        .env("NCCL_IB_GID_INDEX", "3")
        .args(["--supervise=false", "--", "true"])
        .success()
        .stderr_lacks("NCCL will fail on it");
}

#[test]
fn an_ipv4_link_local_gid_is_used_and_said_to_reach_only_its_link() {
    let s = Scratch::node(NODE, "linklocal");
    std::fs::write(dev(&s, "mlx5_6").join("ports/1/gids/3"), "0000:0000:0000:0000:0000:ffff:a9fe:6a07\n")
        .expect("write");
    let r = run_on(&s).args(["--supervise=false", "--", "true"]);
    r.success()
        .stderr_has("mlx5_6:1 Ethernet")
        .stderr_has("link-local GID on mlx5_6:1 (169.254.106.7)")
        .stderr_has("reaches only its own link");
    let j =
        run_on(&s).env("NCCL_WRAP_PROC_ROOT", s.root().join("proc")).args(["doctor", "--json", "--no-selftest"]).json();
    let c = j["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["id"] == "gid" && c["evidence"]["device"] == "mlx5_6")
        .cloned()
        .expect("gid check of mlx5_6");
    assert_eq!(c["status"], "warn", "{c}");
    assert!(c["summary"].as_str().is_some_and(|x| x.contains("reaches only its own link")), "{c}");
}

//! The PCIe link check end to end: `doctor` and the node agent (`watch --rounds 1`) on the fixture
//! node whose pod NIC's PF is trained down to x8 and one GPU to Gen3 (fixtures/nodes/pcie-trained-down)
//! must warn for exactly those, through the VF's PF, and the agent's metrics carry one series per
//! device; a node without link files gets no such check.

mod common;

use std::process::Command;

fn command(node: &str) -> Command {
    let root = common::fixture(node);
    let mut cmd = common::bin_command();
    cmd.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("NCCL_WRAP_SYSFS_ROOT", root.join("sys"))
        .env("NCCL_WRAP_PROC_ROOT", root.join("proc"))
        .env("NCCL_WRAP_DEV_ROOT", root.join("dev"))
        .env("NCCL_WRAP_ANNOTATIONS", root.join("podnetinfo/annotations"));
    for (k, v) in common::env_file(node, "env") {
        cmd.env(k, v);
    }
    cmd
}

fn pcie_checks(node: &str) -> Vec<(String, String, String)> {
    let mut cmd = command(node);
    cmd.args(["doctor", "--json", "--no-selftest"]);
    let out = common::output_within(&mut cmd, common::DEADLINE);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("doctor --json");
    v["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["id"] == "pcie-link")
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
            (c["evidence"]["device"].as_str().unwrap_or_default().to_string(), s("status"), s("summary"))
        })
        .collect()
}

#[test]
fn doctor_names_the_links_trained_down_with_both_figures() {
    let checks = pcie_checks("pcie-trained-down");
    let find = |d: &str| checks.iter().find(|c| c.0 == d).unwrap_or_else(|| panic!("{d}: {checks:?}"));
    let nic = find("mlx5_6");
    assert_eq!(nic.1, "warn", "{nic:?}");
    assert!(nic.2.contains("trained down to 32 GT/s x8 (it can do 32 GT/s x16)"), "{nic:?}");
    let gpu = find("0000:18:00.0");
    assert_eq!(gpu.1, "warn");
    assert!(gpu.2.contains("8 GT/s x16 (it can do 32 GT/s x16): about 25 %"), "{gpu:?}");
    assert_eq!(find("mlx5_10").1, "pass");
    assert_eq!(checks.iter().filter(|c| c.1 == "warn").count(), 3, "mlx5_6 and mlx5_7 share the PF: {checks:?}");
}

#[test]
fn a_node_without_link_files_gets_no_pcie_check() {
    assert_eq!(pcie_checks("h100-roce-sriov"), Vec::new());
}

#[test]
fn the_agent_exports_a_series_per_device() {
    let dir = std::env::temp_dir().join(format!("nccl-wrap-pcie-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let mut cmd = command("pcie-trained-down");
    cmd.args(["watch", "--rounds", "1", "--metrics"]).arg(dir.join("m.prom")).arg("--features").arg(dir.join("f"));
    let out = common::output_within(&mut cmd, common::DEADLINE);
    let m = std::fs::read_to_string(dir.join("m.prom")).unwrap_or_default();
    let f = std::fs::read_to_string(dir.join("f")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(m.contains(r#"nccl_wrap_check_status{check="pcie-link",device="0000:18:00.0"} 1"#), "{m}");
    assert!(m.contains(r#"nccl_wrap_check_status{check="pcie-link",device="0000:19:00.0"} 0"#), "{m}");
    assert!(f.contains("check.pcie-link=warn"), "{f}");
}

#[test]
fn a_port_slower_than_its_siblings_is_named_with_both_rates() {
    let mut cmd = command("pcie-trained-down");
    cmd.args(["doctor", "--json", "--no-selftest"]);
    let out = common::output_within(&mut cmd, common::DEADLINE);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("doctor --json");
    let rate: Vec<&serde_json::Value> =
        v["checks"].as_array().expect("checks").iter().filter(|c| c["id"] == "port-rate").collect();
    let warned: Vec<&str> =
        rate.iter().filter(|c| c["status"] == "warn").filter_map(|c| c["evidence"]["device"].as_str()).collect();
    assert_eq!(warned, ["mlx5_11"], "{rate:?}");
    let s = rate.iter().find(|c| c["status"] == "warn").and_then(|c| c["summary"].as_str()).unwrap_or_default();
    assert!(s.contains("200 Gb/s") && s.contains("400 Gb/s"), "{s}");
    assert!(pcie_checks("h100-roce-sriov").is_empty());
}

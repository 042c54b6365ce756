//! The rdma-core providers the real binary links (`nccl-wrap __verbs list`, the hidden entry the
//! Soft-RoCE lab uses): those of GPU nodes' RDMA devices, and no others (build.rs says why).
//! On a machine without RDMA the device list fails cleanly, and the providers are named anyway.

mod common;

use common::{bin_command, output_within, DEADLINE};

#[test]
fn the_binary_links_the_gpu_node_providers_only() {
    let out = output_within(bin_command().args(["__verbs", "list"]).env_clear(), DEADLINE);
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text:?}"));
    let mut providers: Vec<&str> = v["providers"]
        .as_array()
        .unwrap_or_else(|| panic!("no providers in {v}"))
        .iter()
        .filter_map(|p| p.as_str())
        .collect();
    providers.sort_unstable();
    assert_eq!(providers, ["bnxt_re", "efa", "erdma", "irdma", "mlx5", "rxe"], "{v}");
    // Exit 0 with a device list, 1 with the reason it could not be had: never a crash.
    match out.status.code() {
        Some(0) => assert!(v["devices"].is_array(), "{v}"),
        Some(1) => assert!(v["error"].as_str().is_some_and(|e| e.contains("ibv_get_device_list")), "{v}"),
        other => panic!("exit {other:?}: {v}"),
    }
}

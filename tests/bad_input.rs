//! Bad input gets a clear message and nothing is lost: the command still runs.

mod common;
use common::Run;

const NODE: &str = "bad-input";

#[test]
fn hostile_rdma_dev_is_refused_and_the_device_found_by_its_address() {
    let r = Run::node(NODE).with_env_file(NODE, "env").args(["--", "/usr/bin/env", "-0"]);
    r.success()
        .stderr_has("PCIDEVICE_OPENSHIFT_IO_RAIL_A_INFO: rdma.rdma_dev of 0000:1a:00.3 refused (name \"mlx5_1;rm -rf /\" has characters outside [A-Za-z0-9_.-])");
    // mlx5_3 found from the PCI address, mlx5_5 from RAIL_B's plain list.
    assert_eq!(r.child_var("NCCL_IB_HCA").as_deref(), Some("=mlx5_3:1,mlx5_5:1"));
    for (k, v) in r.child_env() {
        if k.to_string_lossy().starts_with("NCCL_") {
            assert!(!v.to_string_lossy().contains("rm -rf"), "{k:?}={v:?}");
        }
    }
}

#[test]
fn truncated_json_names_the_variable_and_position_and_falls_back_to_the_plain_list() {
    let r = Run::node(NODE).with_env_file(NODE, "env").args(["env", "--json"]);
    let j = r.success().json();
    let warnings = j["all_warnings"].to_string();
    assert!(warnings.contains("PCIDEVICE_OPENSHIFT_IO_RAIL_B_INFO: invalid JSON: EOF while parsing"), "{warnings}");
    assert!(warnings.contains("at line 1 column"), "{warnings}");
}

#[test]
fn junk_gid_and_unknown_gid_type_are_never_chosen() {
    let r = Run::node(NODE).with_env_file(NODE, "env").args(["env", "--json"]);
    let j = r.success().json();
    let mlx5_3 =
        j["devices"].as_array().expect("devices").iter().find(|d| d["name"] == "mlx5_3").expect("mlx5_3").clone();
    assert_eq!(mlx5_3["ports"][0]["gid"]["index"], 3, "{mlx5_3}");
    assert!(mlx5_3["problems"].to_string().contains("gids/2: unexpected content"), "{mlx5_3}");
}

#[test]
fn symlink_loop_and_missing_state_in_sysfs_fallback_are_reported_not_fatal() {
    let r = Run::node(NODE).args(["env", "--json"]);
    let j = r.success().json();
    assert_eq!(j["source"], "sysfs");
    assert_eq!(j["hca"], serde_json::json!(["mlx5_3:1", "mlx5_5:1"]), "{j}");
    // And with the loop named directly by a source:
    let r = Run::node(NODE)
        .env("PCIDEVICE_X_INFO", r#"{"0000:1a:00.9":{"rdma":{"rdma_dev":"mlx5_9"}}}"#)
        .args(["--", "true"]);
    r.success()
        .stderr_has("rdma_dev mlx5_9 of 0000:1a:00.9 cannot be used")
        .stderr_has("Too many levels of symbolic links");
}

#[test]
fn port_without_state_file_is_listed_with_its_reason() {
    let r = Run::node(NODE)
        .env("PCIDEVICE_X_INFO", r#"{"0000:1a:00.1":{"rdma":{"rdma_dev":"mlx5_1"}}}"#)
        .args(["--", "true"]);
    r.success().stderr_has("mlx5_1:1 not used: port state is unreadable").stderr_has("ports/1/state");
}

#[test]
fn non_utf8_and_oversized_variables_are_reported() {
    use std::os::unix::ffi::OsStrExt;
    let r = Run::node(NODE)
        .env("PCIDEVICE_A_INFO", std::ffi::OsStr::from_bytes(b"{\"\xff\":1}"))
        .env("PCIDEVICE_B", "0".repeat(70_000))
        .args(["--", "true"]);
    r.success()
        .stderr_has("PCIDEVICE_A_INFO: value is not UTF-8; ignored")
        .stderr_has("PCIDEVICE_B: value is 70000 bytes, over the 65536-byte bound");
}

#[test]
fn path_traversal_in_a_device_id_is_refused() {
    let r = Run::node(NODE).env("PCIDEVICE_EVIL", "../../../etc,0000:1a:00.3").args(["env"]);
    r.success()
        .stderr_has("PCIDEVICE_EVIL: device ID refused")
        .stdout_is("export NCCL_IB_HCA='=mlx5_3:1'\nexport NCCL_IB_GID_INDEX='3'\n");
}

#[test]
fn broken_annotation_file_is_reported_and_sysfs_used() {
    let dir = std::env::temp_dir().join(format!("nccl-wrap-ann-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let file = dir.join("annotations");
    std::fs::write(&file, "k8s.v1.cni.cncf.io/network-status=\"[{\\\"name\\\": \"\n").expect("write");
    let r = Run::node(NODE).env("NCCL_WRAP_ANNOTATIONS", &file).args(["env", "--json"]);
    let j = r.success().json();
    assert_eq!(j["source"], "sysfs");
    assert!(j["all_warnings"].to_string().contains("network-status is not valid JSON"), "{j}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_unknown_option_with_a_command_is_named_and_ignored_alone() {
    let r = Run::node(NODE).args(["--no-such-option", "--supervise=false", "--", "/usr/bin/env", "-0"]);
    r.success().stderr_has("--no-such-option is not an option of nccl-wrap, ignored");
    // The rest still applies: before, one unknown option dropped every setting.
    assert!(r.child_var("NCCL_IB_HCA").is_some(), "{}", r.stderr());
}

#[test]
fn empty_double_dash_is_a_usage_error() {
    Run::node(NODE).args(["--"]).code_is(2).stderr_has("no command given");
}

#[test]
fn json_plan_has_no_duplicate_keys_regression() {
    // Detection and plan were both flattened with a `warnings` key; a JSON reader kept only one.
    let r = Run::node(NODE).with_env_file(NODE, "env").args(["env", "--json"]);
    let text = r.success().stdout();
    assert_eq!(text.matches("\"warnings\":").count(), 1, "{text}");
    assert_eq!(text.matches("\"detection_warnings\":").count(), 1, "{text}");
}

#[test]
fn a_device_named_differently_by_its_id_and_its_rdma_dev_is_reported_and_the_id_wins() {
    // 0000:3c:00.2 is mlx5_6 in sysfs; the variable says mlx5_7 (which sits on 0000:3c:00.3).
    let info = r#"{"0000:3c:00.2":{"generic":{"deviceID":"0000:3c:00.2"},"rdma":{"rdma_dev":"mlx5_7"}}}"#;
    let r = Run::node("h100-roce-sriov").env("PCIDEVICE_OPENSHIFT_IO_MLX_RDMA_INFO", info).args(["env", "--json"]);
    let j = r.success().json();
    assert_eq!(j["hca"], serde_json::json!(["mlx5_6:1"]), "{j}");
    let w = j["all_warnings"].to_string();
    assert!(w.contains("names mlx5_7 for device 0000:3c:00.2, but sysfs puts mlx5_7 on 0000:3c:00.3 and finds mlx5_6 on 0000:3c:00.2; using mlx5_6"), "{w}");
}

#[test]
fn a_device_id_twice_in_one_info_object_names_both_values() {
    let info = r#"{"0000:3c:00.2":{"rdma":{"rdma_dev":"mlx5_6"}},"0000:3c:00.2":{"rdma":{"rdma_dev":"mlx5_7"}}}"#;
    let r = Run::node("h100-roce-sriov").env("PCIDEVICE_OPENSHIFT_IO_MLX_RDMA_INFO", info).args(["env", "--json"]);
    let j = r.success().json();
    let w = j["all_warnings"].to_string();
    assert!(w.contains("device 0000:3c:00.2 appears twice"), "{w}");
    assert!(w.contains("mlx5_6") && w.contains("mlx5_7") && w.contains("using the second"), "{w}");
    // The second names mlx5_7, which does not sit on that ID: that is reported too, and the ID wins.
    assert_eq!(j["hca"], serde_json::json!(["mlx5_6:1"]), "{j}");
}

#[test]
fn hostile_sriov_dra_variables_are_named_and_never_reach_nccl_or_sysfs() {
    use std::os::unix::ffi::OsStrExt;
    let node = "dra-sriov-env";
    let r = Run::node(node)
        .env("SRIOVNETWORK_VF_DEVICE_0000_08_00_2", "0000:08:00.2")
        .env("SRIOVNETWORK_0000_08_00_2_RDMA_DEVICE", "mlx5_5,mlx5_0;rm -rf /")
        .env("SRIOVNETWORK_0000_08_00_2_RDMA_UVERB", "/dev/infiniband/../../etc/shadow")
        .env("SRIOVNETWORK_VF_DEVICE_0000_08_00_3", "../../../../etc")
        .env("SRIOVNETWORK_VF_DEVICE_X", std::ffi::OsStr::from_bytes(b"\xff\xfe"))
        .env("SRIOVNETWORK_PCI_ADDRESSES", "0".repeat(100_000))
        .args(["--", "/usr/bin/env", "-0"]);
    r.success()
        .stderr_has("SRIOVNETWORK_0000_08_00_2_RDMA_DEVICE: \"mlx5_5,mlx5_0;rm -rf /\" is not an RDMA device name")
        .stderr_has("SRIOVNETWORK_VF_DEVICE_0000_08_00_3: \"../../../../etc\" is not a PCI address")
        .stderr_has("SRIOVNETWORK_VF_DEVICE_X: value is not UTF-8; ignored")
        .stderr_has("SRIOVNETWORK_PCI_ADDRESSES: value is 100000 bytes, over the 16384-byte bound; ignored");
    // The device is still found by its address; the other VF by the address its name spells.
    assert_eq!(r.child_var("NCCL_IB_HCA").as_deref(), Some("=mlx5_5:1,mlx5_6:1"));
    for (k, v) in r.child_env() {
        if k.to_string_lossy().starts_with("NCCL_") {
            assert!(!v.to_string_lossy().contains("rm -rf"), "{k:?}={v:?}");
        }
    }
}

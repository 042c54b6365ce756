//! The real binary on fixture nodes: which ports, which GID, which variables, from which source.

mod common;
use common::Run;

const H100: &str = "h100-roce-sriov";
const H100_HCA: &str = "export NCCL_IB_HCA='=mlx5_6:1,mlx5_7:1,mlx5_10:1,mlx5_11:1'\nexport NCCL_IB_GID_INDEX='3'\n";

#[test]
fn sriov_plugin_v3_10_names_the_pods_four_vfs() {
    let r = Run::node(H100).with_env_file(H100, "env").args(["env"]);
    r.success().stdout_is(H100_HCA);
    // The annotation and the sysfs walk give the same four: only the source says the variables
    // decided, so that this test fails without them.
    let j = Run::node(H100).with_env_file(H100, "env").args(["env", "--json"]).success().json();
    assert_eq!(j["source"], "sriov", "{j}");
    assert_eq!(j["sources"][2]["inputs"], serde_json::json!(["PCIDEVICE_OPENSHIFT_IO_MLX_RDMA_INFO"]), "{j}");
    assert!(
        j["devices"].as_array().expect("devices").iter().all(|d| d["origin"] == "PCIDEVICE_OPENSHIFT_IO_MLX_RDMA_INFO"),
        "{j}"
    );
}

/// The two VFs of the pod's RDMA pool: neither the annotation nor the sysfs walk (both find all
/// four of the pod's VFs) gives this answer, so a test expecting it sees the variable's source
/// work, not a fallback's.
const HALF_HCA: &str = "export NCCL_IB_HCA='=mlx5_7:1,mlx5_10:1'\nexport NCCL_IB_GID_INDEX='3'\n";

#[test]
fn sriov_plugin_before_v3_10_resolves_devices_through_bus_pci() {
    Run::node(H100).with_env_file(H100, "env.v3.6").args(["env"]).success().stdout_is(H100_HCA);
    Run::node(H100).with_env_file(H100, "env.v3.6.half").args(["env"]).success().stdout_is(HALF_HCA);
    let j = Run::node(H100).with_env_file(H100, "env.v3.6.half").no_annotations().args(["env", "--json"]).json();
    assert_eq!(j["hca"], serde_json::json!(["mlx5_7:1", "mlx5_10:1"]), "{j}");
}

#[test]
fn plain_pcidevice_list_from_old_plugins() {
    Run::node(H100).with_env_file(H100, "env.plain").args(["env"]).success().stdout_is(H100_HCA);
    Run::node(H100).with_env_file(H100, "env.plain.half").args(["env"]).success().stdout_is(HALF_HCA);
    let j = Run::node(H100).with_env_file(H100, "env.plain.half").no_annotations().args(["env", "--json"]).json();
    assert_eq!(j["hca"], serde_json::json!(["mlx5_7:1", "mlx5_10:1"]), "{j}");
}

#[test]
fn network_status_annotation_when_no_plugin_variables() {
    let r = Run::node(H100).args(["env", "--json"]);
    let j = r.success().json();
    assert_eq!(j["source"], "annotation");
    assert_eq!(j["hca"], serde_json::json!(["mlx5_6:1", "mlx5_7:1", "mlx5_10:1", "mlx5_11:1"]));
}

#[test]
fn privileged_pod_sysfs_fallback_keeps_only_vfs_with_a_net_device_here() {
    let r = Run::node(H100).no_annotations().args(["env", "--json"]);
    let j = r.success().json();
    assert_eq!(j["source"], "sysfs");
    assert_eq!(j["hca"], serde_json::json!(["mlx5_6:1", "mlx5_7:1", "mlx5_10:1", "mlx5_11:1"]));
    // A start keeps the devices that are not the pod's in the order the directory lists them
    // (hash order on ext4, creation order reversed on tmpfs); output shows them in natural order.
    assert_eq!(
        j["not_ours"],
        serde_json::json!(["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_8", "mlx5_9"]),
        "{j}"
    );
    assert_eq!(j["gid_index"], 3);
}

#[test]
fn infiniband_node_skips_the_down_port_and_sets_no_gid_index() {
    let r = Run::node("h200-ib").args(["env"]);
    r.success().stdout_is("export NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1'\n");
    let r = Run::node("h200-ib").args(["-q", "--", "true"]);
    r.success();
    let r = Run::node("h200-ib").args(["--", "true"]);
    r.success().stderr_has("mlx5_3:1 not used: port state is DOWN (physical state Disabled), not ACTIVE");
}

#[test]
fn sparse_255_entry_gid_tables_and_disagreeing_ports() {
    let node = "roce-sparse-gid";
    let r = Run::node(node).with_env_file(node, "env").args(["env", "--json"]);
    let j = r.success().json();
    assert_eq!(j["hca"], serde_json::json!(["mlx5_2:1", "mlx5_3:1"]));
    assert_eq!(j["gid_index"], serde_json::Value::Null);
    let ports: Vec<_> =
        j["devices"].as_array().expect("devices").iter().map(|d| d["ports"][0]["gid"]["index"].clone()).collect();
    assert_eq!(ports, [serde_json::json!(3), serde_json::json!(201), serde_json::json!(0)]);
    let warnings = j["all_warnings"].to_string();
    assert!(warnings.contains("disagree on the GID index (mlx5_2:1=3, mlx5_3:1=201)"), "{warnings}");
    let dropped = j["decisions"][2]["reason"].as_str().expect("reason");
    assert!(dropped.starts_with("no usable RoCE v2 IPv4 GID"), "{dropped}");
    Run::node(node)
        .with_env_file(node, "env")
        .args(["env"])
        .success()
        .stdout_is("export NCCL_IB_HCA='=mlx5_2:1,mlx5_3:1'\n");
}

#[test]
fn scalable_functions_resolve_through_the_auxiliary_bus() {
    let node = "sf-roce";
    let r = Run::node(node).with_env_file(node, "env").args(["env"]);
    r.success().stdout_is("export NCCL_IB_HCA='=mlx5_2:1,mlx5_3:1'\nexport NCCL_IB_GID_INDEX='3'\n");
}

#[test]
fn soft_roce_shared_mode_picks_the_device_on_this_namespaces_veth() {
    let r = Run::node("rxe-shared").args(["env"]);
    r.success().stdout_is("export NCCL_IB_HCA='=rxe0:1'\nexport NCCL_IB_GID_INDEX='1'\n");
}

#[test]
fn soft_roce_rails_named_alike_in_two_pods_are_told_apart_by_mac() {
    // Regression: rxe0 and rxe1 both have parent `net1` (two pods' rails); matching by name
    // claimed both. Only rxe0's link-local GID comes from this namespace's net1 MAC.
    let r = Run::node("rxe-same-name").args(["env", "--json"]);
    let j = r.success().json();
    let names: Vec<&str> =
        j["devices"].as_array().expect("devices").iter().filter_map(|d| d["name"].as_str()).collect();
    assert_eq!(names, ["rxe0"], "{j}");
    assert_eq!(j["hca"], serde_json::json!(["rxe0:1"]));
    assert!(j["not_ours"].to_string().contains("rxe1"), "{j}");
    assert!(j["devices"][0]["origin"].to_string().contains("same MAC"), "{j}");
}

#[test]
fn soft_roce_ownership_that_cannot_be_told_is_said_not_guessed_silently() {
    // This namespace's net1 has no readable MAC: the name alone decides, with a warning naming why.
    let s = common::Scratch::node("rxe-same-name", "rxe-unknown");
    let addr = std::fs::canonicalize(s.root().join("sys/class/net/net1/address")).expect("address");
    std::fs::write(&addr, "not-a-mac\n").expect("write");
    let r = Run::node("rxe-same-name").env("NCCL_WRAP_SYSFS_ROOT", s.root().join("sys")).args(["env", "--json"]);
    let j = r.success().json();
    assert_eq!(j["hca"], serde_json::json!(["rxe0:1", "rxe1:1"]), "{j}");
    let warnings = j["all_warnings"].to_string();
    assert!(warnings.contains("cannot tell whether rxe1 is this pod's"), "{warnings}");
    assert!(warnings.contains("not a MAC address"), "{warnings}");
}

#[test]
fn exclusive_netns_mode_takes_every_visible_device() {
    let r = Run::node("exclusive-netns").args(["env", "--json"]);
    let j = r.success().json();
    assert_eq!(j["hca"], serde_json::json!(["mlx5_4:1", "mlx5_5:1"]));
    assert!(j["devices"][0]["origin"].as_str().expect("origin").contains("exclusive"));
}

#[test]
fn no_rdma_node_disables_ib_and_says_tcp_loudly() {
    let r = Run::node("no-rdma").args(["--", "/usr/bin/env", "-0"]);
    r.success().stderr_has("warning: no RDMA device found: NCCL will run over TCP sockets");
    assert_eq!(r.child_var("NCCL_IB_DISABLE").as_deref(), Some("1"));
    assert_eq!(r.child_var("NCCL_IB_HCA"), None);
}

#[test]
fn require_rdma_refuses_with_125_and_does_not_run_the_command() {
    let marker = std::env::temp_dir().join(format!("nccl-wrap-require-{}", std::process::id()));
    Run::node("no-rdma").args(["--require-rdma", "--", "true"]).code_is(125).stderr_has("refusing to start \"true\"");
    let r = Run::node("no-rdma").env("NCCL_WRAP_REQUIRE_RDMA", "1").args([
        std::ffi::OsStr::new("--"),
        "touch".as_ref(),
        marker.as_os_str(),
    ]);
    r.code_is(125).stderr_has("--require-rdma (NCCL_WRAP_REQUIRE_RDMA)");
    assert!(!marker.exists());
}

#[test]
fn every_interlock_refusal_is_the_termination_message() {
    // kubectl describe pod shows the cause: here --require-rdma on a node without RDMA (the
    // memlock and userspace refusals take the same road, src/run.rs's refuse).
    let dir = common::Scratch::new("refusal-log");
    let log = dir.path().join("termination-log");
    let r = Run::node("no-rdma").args([
        std::ffi::OsStr::new("--require-rdma"),
        "--termination-log".as_ref(),
        log.as_os_str(),
        "--".as_ref(),
        "true".as_ref(),
    ]);
    r.code_is(125);
    let text = std::fs::read_to_string(&log).expect("a termination message");
    assert!(text.starts_with("nccl-wrap refused to start the command"), "{text}");
    assert!(
        text.contains("--require-rdma (NCCL_WRAP_REQUIRE_RDMA) is set and no usable RDMA port was found"),
        "{text}"
    );
    assert!(text.len() <= 4096, "{}", text.len());
}

#[test]
fn summary_names_source_ports_gids_and_privileged_visibility() {
    let r = Run::node(H100).with_env_file(H100, "env").args(["--", "true"]);
    r.success()
        .stderr_has(
            "nccl-wrap: 4 of 4 RDMA port(s) usable, from SR-IOV device plugin (PCIDEVICE_OPENSHIFT_IO_MLX_RDMA_INFO)",
        )
        .stderr_has("nccl-wrap:   mlx5_6:1 Ethernet 400 Gb/sec (4X NDR), GID 3 (10.0.106.7) on net1")
        .stderr_has("8 other RDMA device(s) visible but not this pod's")
        .stderr_has("nccl-wrap: set NCCL_IB_HCA='=mlx5_6:1,mlx5_7:1,mlx5_10:1,mlx5_11:1'");
}

#[test]
fn nccl_addr_family_and_range_steer_the_gid_choice() {
    let node = "roce-sparse-gid";
    // mlx5_4 has only IPv6 GIDs: with AF_INET6 it becomes usable, the IPv4-only ports do not.
    let r = Run::node(node).with_env_file(node, "env").env("NCCL_IB_ADDR_FAMILY", "AF_INET6").args(["env", "--json"]);
    let j = r.success().json();
    assert_eq!(j["hca"], serde_json::json!(["mlx5_4:1"]), "{j}");
    let r =
        Run::node(node).with_env_file(node, "env").env("NCCL_IB_ADDR_RANGE", "10.20.1.0/24").args(["env", "--json"]);
    let j = r.success().json();
    assert_eq!(j["hca"], serde_json::json!(["mlx5_3:1"]), "{j}");
    assert_eq!(j["gid_index"], 201);
}

const DRA_META: &str = "dra-metadata";
const DRA_ENV: &str = "dra-sriov-env";

/// The names of the sources in order, with the status each reported.
fn statuses(j: &serde_json::Value) -> Vec<(String, String)> {
    j["sources"]
        .as_array()
        .expect("sources")
        .iter()
        .map(|s| (s["source"].as_str().unwrap_or("").to_string(), s["status"].as_str().unwrap_or("").to_string()))
        .collect()
}

#[test]
fn dra_metadata_files_name_the_claims_devices_before_every_other_source() {
    // Both trees: a claim's v1beta1+v1alpha1 stream (net1, net2) and a template claim's stream led
    // by an unknown version (net3).
    let j = Run::node(DRA_META).with_env_file(DRA_META, "env.cdi").args(["env", "--json"]).success().json();
    assert_eq!(j["source"], "dra_metadata", "{j}");
    assert_eq!(j["hca"], serde_json::json!(["mlx5_5:1", "mlx5_6:1", "mlx5_7:1"]), "{j}");
    let s = statuses(&j);
    assert_eq!(s[0], ("dra_metadata".into(), "used".into()));
    assert_eq!(s[1], ("sriov_dra".into(), "not needed".into()));
    assert_eq!(s[2].0, "sriov");
    assert_eq!(j["sources"][0]["inputs"].as_array().map(Vec::len), Some(2), "{j}");
    assert_eq!(j["devices"][0]["origin"], "DRA claim rdma-rails/nics (0000-08-00-2, net1)", "{j}");
    assert_eq!(j["devices"][2]["origin"], "DRA pod claim extra-nic/nic (0000-08-00-4, net3)", "{j}");
    assert!(j["all_warnings"].as_array().expect("warnings").is_empty(), "{j}");
    Run::node(DRA_META)
        .args(["--", "true"])
        .success()
        .stderr_has("nccl-wrap: 3 of 3 RDMA port(s) usable, from DRA device metadata (");
}

#[test]
fn only_the_metadata_tells_a_claim_that_is_not_every_interface_of_the_pod() {
    // Without the template claim's file, the metadata names mlx5_5 and mlx5_6 alone, while net3
    // (mlx5_7) is still in the namespace: the sysfs walk would take all three.
    let s = common::Scratch::node(DRA_META, "dra-one-claim");
    let templates = s.root().join("var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates");
    std::fs::remove_dir_all(&templates).expect("rm");
    let j =
        Run::node(DRA_META).env("NCCL_WRAP_SYSFS_ROOT", s.root().join("sys")).args(["env", "--json"]).success().json();
    assert_eq!(j["source"], "dra_metadata", "{j}");
    assert_eq!(j["hca"], serde_json::json!(["mlx5_5:1", "mlx5_6:1"]), "{j}");
    // Without any metadata the walk of sysfs answers, with all three.
    std::fs::remove_dir_all(s.root().join("var")).expect("rm");
    let j =
        Run::node(DRA_META).env("NCCL_WRAP_SYSFS_ROOT", s.root().join("sys")).args(["env", "--json"]).success().json();
    assert_eq!((j["source"].as_str(), j["hca"].as_array().map(Vec::len)), (Some("sysfs"), Some(3)), "{j}");
    assert_eq!(statuses(&j)[0], ("dra_metadata".into(), "absent".into()));
}

/// `dra-sriov-env`'s variables of one VF only: the sysfs walk (net1 and net2 are both in the
/// namespace) would name two.
fn one_vf_env() -> Vec<(String, String)> {
    common::env_file(DRA_ENV, "env").into_iter().filter(|(k, _)| k.contains("0000_08_00_3")).collect()
}

#[test]
fn sriov_dra_variables_name_the_pods_vfs_by_pci_address() {
    let mut r = Run::node(DRA_ENV);
    for (k, v) in one_vf_env() {
        r = r.env(k, v);
    }
    let j = r.args(["env", "--json"]).success().json();
    assert_eq!(j["source"], "sriov_dra", "{j}");
    assert_eq!(j["hca"], serde_json::json!(["mlx5_6:1"]), "{j}");
    assert_eq!(j["devices"][0]["origin"], "SRIOVNETWORK_VF_DEVICE_0000_08_00_3", "{j}");
    assert!(j["devices"][0].get("named_as").is_none(), "the host's name is the pod's here: {j}");
    // `_RDMA_DEVICE` is the host's name at prepare time, a hint: the address decides, and a name
    // the pod does not see is shown beside the one it does.
    let mut r = Run::node(DRA_ENV);
    for (k, v) in one_vf_env() {
        let v = if k.ends_with("_RDMA_DEVICE") { "mlx5_99".to_string() } else { v };
        r = r.env(k, v);
    }
    let j = r.args(["env", "--json"]).success().json();
    assert_eq!((&j["hca"], &j["devices"][0]["named_as"]), (&serde_json::json!(["mlx5_6:1"]), &"mlx5_99".into()));
    // The whole environment: both VFs, ahead of the device plugin's source.
    let j = Run::node(DRA_ENV).with_env_file(DRA_ENV, "env").args(["env", "--json"]).success().json();
    assert_eq!((j["source"].as_str(), &j["hca"]), (Some("sriov_dra"), &serde_json::json!(["mlx5_5:1", "mlx5_6:1"])));
    assert_eq!(statuses(&j)[1], ("sriov_dra".into(), "used".into()));
    assert!(j["all_warnings"].as_array().expect("warnings").is_empty(), "{j}");
}

#[test]
fn sriov_dra_vfs_without_rdma_variables_are_looked_up_by_address_and_said_so() {
    let j = Run::node(DRA_ENV).with_env_file(DRA_ENV, "env.no-rdma").args(["env", "--json"]).success().json();
    assert_eq!(j["source"], "sriov_dra", "{j}");
    assert_eq!(j["hca"], serde_json::json!(["mlx5_5:1", "mlx5_6:1"]), "{j}");
    let w = j["all_warnings"].to_string();
    assert!(
        w.contains("SRIOVNETWORK_VF_DEVICE_0000_08_00_2: no SRIOVNETWORK_0000_08_00_2_RDMA_* variables (the driver did not prepare 0000:08:00.2 as RDMA-capable)"),
        "{w}"
    );
}

/// A run on `node` with the node's own `/dev`, whose uverbs nodes say which devices the container
/// can open.
fn with_dev(node: &str) -> Run {
    Run::node(node).env("NCCL_WRAP_DEV_ROOT", common::fixture(node).join("dev"))
}

#[test]
fn an_infiniband_only_dra_pod_is_told_by_its_uverbs_node_alone() {
    // dranet moved no netdev (IB-only), and nothing names the device: only uverbs0 is in the pod.
    let j = with_dev("dra-ib-only").args(["env", "--json"]).success().json();
    assert_eq!(j["hca"], serde_json::json!(["mlx5_0:1"]), "{j}");
    assert!(j["devices"][0]["origin"].as_str().expect("origin").contains("its uverbs node is in"), "{j}");
    assert!(!j["all_warnings"].to_string().contains("cannot tell"), "{j}");
    assert_eq!(j["not_ours"], serde_json::json!(["mlx5_1", "mlx5_2", "mlx5_3"]), "{j}");
    // Without the pod's /dev nothing tells: every visible device, as NCCL would, with the warning.
    let j = Run::node("dra-ib-only").args(["env", "--json"]).success().json();
    assert_eq!(j["hca"].as_array().map(Vec::len), Some(4), "{j}");
    assert!(j["all_warnings"].to_string().contains("cannot tell which of the 4 RDMA devices"), "{j}");
}

#[test]
fn a_dranet_shared_mode_pod_takes_the_two_hcas_it_was_given() {
    let r = with_dev("dranet-gb200-shared").args(["env"]);
    r.success().stdout_is("export NCCL_IB_HCA='=mlx5_2:1,mlx5_3:1'\nexport NCCL_IB_GID_INDEX='3'\n");
}

#[test]
fn a_device_without_its_uverbs_node_is_never_exported_whatever_the_source_says() {
    // The SR-IOV pool without isRdma: the plugin names mlx5_3, the container has no uverbs3. A
    // stat, so also with verbs skipped.
    let node = "missing-uverbs";
    let j = with_dev(node).with_env_file(node, "env").args(["--skip-verbs", "env", "--json"]).success().json();
    assert_eq!(j["source"], "sriov", "{j}");
    assert_eq!(j["hca"], serde_json::json!(["mlx5_2:1"]), "{j}");
    assert_eq!(j["not_openable"][0]["name"], "mlx5_3", "{j}");
    assert_eq!(j["not_openable"][0]["origin"], "PCIDEVICE_OPENSHIFT_IO_RAIL_B_INFO", "{j}");
    let w = j["all_warnings"].to_string();
    assert!(w.contains("PCIDEVICE_OPENSHIFT_IO_RAIL_B_INFO names mlx5_3, but its uverbs node is not in"), "{w}");
    // NVIDIA/nccl#2428: two eRDMA devices listed, one node given. erdma_1 never reaches NCCL.
    let j = with_dev("two-hcas-one-uverbs").args(["env", "--json"]).success().json();
    let names: Vec<&str> =
        j["devices"].as_array().expect("devices").iter().filter_map(|d| d["name"].as_str()).collect();
    assert_eq!(names, ["erdma_0"], "{j}");
    assert!(!j["hca"].to_string().contains("erdma_1"), "{j}");
}

#[test]
fn a_pod_given_no_uverbs_node_gets_no_device_of_the_node() {
    // An RDMA node in shared mode, a pod without any RDMA resource: /dev/infiniband is absent.
    let r = Run::node("two-hcas-one-uverbs").env("NCCL_WRAP_DEV_ROOT", "/nonexistent/dev").args(["env", "--json"]);
    let j = r.success().json();
    assert_eq!(j["source"], "none", "{j}");
    assert_eq!(j["rdma"], false, "{j}");
    let w = j["all_warnings"].to_string();
    assert!(w.contains("none of the 2 RDMA devices"), "{w}");
    assert!(w.contains("NCCL can open none of them"), "{w}");
}

#[test]
fn a_privileged_pods_dev_with_every_node_tells_nothing() {
    // Every uverbs node of the node present: the rule that cannot tell stands, with its warning.
    let s = common::Scratch::node("two-hcas-one-uverbs", "privileged-dev");
    std::fs::write(s.root().join("dev/infiniband/uverbs1"), "").expect("write");
    let j = Run::node("two-hcas-one-uverbs")
        .env("NCCL_WRAP_SYSFS_ROOT", s.root().join("sys"))
        .env("NCCL_WRAP_DEV_ROOT", s.root().join("dev"))
        .args(["env", "--json"])
        .success()
        .json();
    let names: Vec<&str> =
        j["devices"].as_array().expect("devices").iter().filter_map(|d| d["name"].as_str()).collect();
    assert_eq!(names, ["erdma_0", "erdma_1"], "{j}");
    assert!(j["all_warnings"].to_string().contains("cannot tell which of the 2 RDMA devices"), "{j}");
    assert!(j.get("not_openable").is_none(), "{j}");
    // h200-ib: a bare-metal pod's /dev, every node: all seven usable ports, as before.
    let j = with_dev("h200-ib").args(["env", "--json"]).success().json();
    assert_eq!(j["hca"].as_array().map(Vec::len), Some(7), "{j}");
}

#[test]
fn a_device_renamed_in_the_pod_is_found_by_its_address_and_shown_by_both_names() {
    // rdma-cni renamed the pod's VFs after their interfaces: the plugin (v3.10) and the annotation
    // say mlx5_7/mlx5_9, the pod (exclusive mode) sees rdma_net1/rdma_net2.
    let node = "renamed-pod-device";
    for r in [with_dev(node).with_env_file(node, "env"), with_dev(node)] {
        let j = r.args(["env", "--json"]).success().json();
        assert_eq!(j["hca"], serde_json::json!(["rdma_net1:1", "rdma_net2:1"]), "{j}");
        assert_eq!((&j["devices"][0]["named_as"], &j["devices"][1]["named_as"]), (&"mlx5_7".into(), &"mlx5_9".into()));
        assert!(j["all_warnings"].as_array().expect("warnings").is_empty(), "a rename is no fault: {j}");
    }
    with_dev(node)
        .with_env_file(node, "env")
        .args(["--", "true"])
        .success()
        .stderr_has("rdma_net1: PCIDEVICE_OPENSHIFT_IO_RAIL_INFO names it mlx5_7 (its name in the host's namespace, or before a rename); found at 0000:3a:00.3")
        .stderr_has("set NCCL_IB_HCA='=rdma_net1:1,rdma_net2:1'")
        .stderr_lacks("cannot be used");
}

#[test]
fn host_devices_renamed_by_plane_and_rail_are_taken_in_natural_order() {
    // No mlx5_ name anywhere: the nic-configuration-operator's rdma_<nic>_<plane>_<rail>.
    let r = with_dev("host-renamed-rdma").args(["--", "true"]);
    r.success()
        .stderr_has("set NCCL_IB_HCA='=rdma_0_0_0:1,rdma_0_1_0:1,rdma_1_0_1:1,rdma_1_1_1:1,rdma_2_0_2:1,rdma_2_1_2:1,rdma_3_0_3:1,rdma_3_1_3:1'")
        .stderr_has("(providers: mlx5 ok)")
        .stderr_has("rdma_1_1_1:1 Ethernet 400 Gb/sec (4X NDR), NIC 1 plane 1 rail 1 (by its name), GID 3");
}

#[test]
fn every_data_port_of_a_multi_plane_device_is_handed_to_nccl() {
    // ConnectX-8 in multi-plane mode: 12 ports per device, data on 3/6/9/12, port 1 down.
    let j = with_dev("cx8-multiplane").args(["env", "--json"]).success().json();
    let hca: Vec<String> = (0..8).flat_map(|d| [3, 6, 9, 12].map(move |p| format!("mlx5_{d}:{p}"))).collect();
    assert_eq!(j["hca"], serde_json::json!(hca), "{j}");
    assert_eq!(j["decisions"].as_array().map(Vec::len), Some(96), "{j}");
    let down = &j["decisions"][0];
    assert_eq!(
        (down["device"].as_str(), down["port"].as_u64(), down["used"].as_bool()),
        (Some("mlx5_0"), Some(1), Some(false))
    );
    with_dev("cx8-multiplane")
        .args(["--", "true"])
        .success()
        .stderr_has("nccl-wrap: 32 of 96 RDMA port(s) usable")
        .stderr_has("nccl-wrap:   mlx5_0:3 InfiniBand 200 Gb/sec (1X XDR), plane 1 of 4\n")
        .stderr_has("nccl-wrap:   mlx5_0:12 InfiniBand 200 Gb/sec (1X XDR), plane 4 of 4\n")
        .stderr_has("set NCCL_IB_HCA='=mlx5_0:3,mlx5_0:6,mlx5_0:9,mlx5_0:12,mlx5_1:3,");
}

#[test]
fn an_nvswitch_management_function_is_left_out_with_its_reason_whatever_names_it() {
    // A source names a management function of the HGX B200 baseboard (0000:05:00.0, mlx5_0) beside
    // a data NIC: its ACTIVE InfiniBand port is not handed to NCCL, and the reason says why.
    let node = "hgx-b200-lpf";
    let r = with_dev(node).env("PCIDEVICE_X", "0000:05:00.0,0000:19:00.0").args(["env", "--json"]);
    let j = r.success().json();
    assert_eq!(j["hca"], serde_json::json!(["mlx5_4:1"]), "{j}");
    let why = j["decisions"][0]["reason"].as_str().expect("reason");
    assert!(why.starts_with("an NVSwitch management function, not a data NIC (its PCI VPD says SMDL=SW_MNG"), "{why}");
    assert_eq!(j["devices"][0]["function"]["vpd_smdl"], "SW_MNG", "{j}");
    // Where VPD cannot be read (root-only on most kernels), the x2 link and subsystem 15b3:0087
    // still leave it out, said to be weak evidence.
    let s = common::Scratch::node(node, "lpf-no-vpd");
    let vpd = std::fs::canonicalize(s.root().join("sys/class/infiniband/mlx5_0/device/vpd")).expect("vpd");
    std::fs::remove_file(vpd).expect("rm");
    let j = with_dev(node)
        .env("NCCL_WRAP_SYSFS_ROOT", s.root().join("sys"))
        .env("PCIDEVICE_X", "0000:05:00.0,0000:19:00.0")
        .args(["env", "--json"])
        .success()
        .json();
    assert_eq!(j["hca"], serde_json::json!(["mlx5_4:1"]), "{j}");
    let w = j["all_warnings"].to_string();
    assert!(w.contains("mlx5_0: left out, probably an NVSwitch management function"), "{w}");
    assert!(w.contains("PCIe x2 16.0 GT/s PCIe link with subsystem 15b3:0087") && w.contains("weak evidence"), "{w}");
    // The data NICs' VPD has no SMDL: all eight are used on the node's own sysfs walk.
    let j = with_dev(node).args(["env", "--json"]).success().json();
    assert_eq!(j["hca"].as_array().map(Vec::len), Some(8), "{j}");
}

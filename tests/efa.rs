//! AWS EFA (`eks-p5-efa` with the image `fixtures/images/efa`): EFA devices are named as EFA, never
//! put in NCCL_IB_HCA and never called TCP; with aws-ofi-nccl and libfabric in the image NCCL uses
//! them and `--require-rdma` is satisfied; without, the warning names the missing piece and
//! `--require-rdma` refuses naming it; doctor checks what EFA needs that it can see.

mod common;

use common::{fixture, image, Run};

const NODE: &str = "eks-p5-efa";
/// As AWS's Deep Learning Containers set it: the image has no ld.so.cache.
const LD_PATH: &str = "/opt/amazon/efa/lib:/opt/amazon/ofi-nccl/lib";

fn efa(ld_path: Option<&str>) -> Run {
    let r =
        Run::node(NODE).env("NCCL_WRAP_IMAGE_ROOT", image("efa")).env("NCCL_WRAP_DEV_ROOT", fixture(NODE).join("dev"));
    match ld_path {
        Some(p) => r.env("LD_LIBRARY_PATH", p),
        None => r,
    }
}

#[test]
fn efa_devices_are_named_as_efa_never_tcp_and_never_in_nccl_ib_hca() {
    let j = efa(Some(LD_PATH)).args(["env", "--json"]).success().json();
    assert_eq!(j["hca"], serde_json::json!([]), "{j}");
    assert_eq!(j["efa"]["devices"].as_array().map(Vec::len), Some(32), "{j}");
    assert_eq!(j["efa"]["plugin"], "/opt/amazon/ofi-nccl/lib/libnccl-net.so", "{j}");
    assert_eq!(j["efa"]["libfabric"], "/opt/amazon/efa/lib/libfabric.so.1", "{j}");
    assert!(
        j["vars"].as_array().expect("vars").iter().all(|v| !v["name"].as_str().unwrap_or("").starts_with("NCCL_IB_")),
        "{j}"
    );
    assert!(j["all_warnings"].as_array().expect("warnings").is_empty(), "{j}");
    // Which of the 32 the pod was given is the plugin's to take: no "cannot tell" warning.
    assert!(j["decisions"][0]["reason"].as_str().expect("reason").starts_with("an AWS EFA device"), "{j}");
    efa(Some(LD_PATH))
        .args(["--", "true"])
        .success()
        .stderr_has("nccl-wrap: 32 AWS EFA device(s) of this pod, from sysfs")
        .stderr_has("EFA: NCCL will use the image's net plugin /opt/amazon/ofi-nccl/lib/libnccl-net.so (LD_LIBRARY_PATH) over libfabric /opt/amazon/efa/lib/libfabric.so.1")
        .stderr_lacks("TCP")
        .stderr_lacks("not used");
}

#[test]
fn require_rdma_is_satisfied_by_efa_with_the_ofi_plugin() {
    let r = efa(Some(LD_PATH)).args(["--require-rdma", "--", "/usr/bin/env", "-0"]);
    r.success();
    for v in ["NCCL_IB_HCA", "NCCL_IB_DISABLE", "NCCL_IB_GID_INDEX", "NCCL_NET"] {
        assert_eq!(r.child_var(v), None, "{v}");
    }
}

#[test]
fn without_the_plugin_the_warning_names_it_and_require_rdma_refuses_naming_it() {
    efa(None)
        .args(["--", "true"])
        .success()
        .stderr_has(
            "warning: the image has no NCCL net plugin for this pod's 32 EFA device(s): aws-ofi-nccl (libnccl-net.so",
        )
        .stderr_has("(--require-rdma would refuse to start)");
    efa(None)
        .args(["--require-rdma", "--", "true"])
        .code_is(125)
        .stderr_has("refusing to start \"true\": --require-rdma (NCCL_WRAP_REQUIRE_RDMA) is set and NCCL would run over TCP sockets: the image has no NCCL net plugin for this pod's 32 EFA device(s): aws-ofi-nccl");
    // The plugin without libfabric: the missing piece is libfabric.
    efa(Some("/opt/amazon/ofi-nccl/lib"))
        .args(["--require-rdma", "--", "true"])
        .code_is(125)
        .stderr_has("the image lacks libfabric.so.1 (the EFA installer's /opt/amazon/efa/lib");
}

#[test]
fn doctor_checks_the_plugin_libfabric_and_the_uverbs_nodes() {
    let j = efa(Some(LD_PATH)).args(["doctor", "--json", "--no-selftest"]).json();
    let checks = j["checks"].as_array().expect("checks");
    let c = checks.iter().find(|c| c["id"] == "efa").expect("efa check");
    assert_eq!(c["status"], "pass", "{c}");
    assert!(checks.iter().filter(|c| c["id"] == "ports").all(|c| c["status"] == "pass"), "EFA ports are up: {j}");
    assert_eq!(j["exit"], 0, "{j}");
    // Without the plugin, and with a uverbs node gone: both named.
    let s = common::Scratch::node(NODE, "efa-no-node");
    std::fs::remove_file(s.root().join("dev/infiniband/uverbs5")).expect("rm");
    let j = Run::node(NODE)
        .env("NCCL_WRAP_SYSFS_ROOT", s.root().join("sys"))
        .env("NCCL_WRAP_DEV_ROOT", s.root().join("dev"))
        .env("NCCL_WRAP_IMAGE_ROOT", image("efa"))
        .args(["doctor", "--json", "--no-selftest"])
        .json();
    let c = j["checks"].as_array().expect("checks").iter().find(|c| c["id"] == "efa").expect("efa check").clone();
    assert_eq!(c["status"], "fail", "{c}");
    let summary = c["summary"].as_str().expect("summary");
    assert!(summary.contains("no NCCL net plugin"), "{summary}");
    // uverbs5 gone: the nodes now tell, and detection leaves rdmap98s0 out (this pod cannot open
    // it), listed as not this pod's; the 31 left all have their node.
    assert!(summary.contains("31 EFA device(s)"), "{summary}");
    assert!(j["checks"].to_string().contains("rdmap98s0"), "{j}");
}

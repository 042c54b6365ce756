//! `env --json` and `doctor --json` are documented by JSON Schemas (docs/schemas/); every fixture
//! node's real output must validate, and a schema must reject what the output promises never to
//! hold (an unlimited limit as null, a number without its unit).

mod common;

use common::Run;
use serde_json::Value;

const NODES: &[&str] = &[
    "h100-roce-sriov",
    "h200-ib",
    "roce-sparse-gid",
    "no-rdma",
    "sf-roce",
    "rxe-shared",
    "rxe-same-name",
    "exclusive-netns",
    "translated-iommu",
    "bad-input",
    "missing-uverbs",
    "dra-metadata",
    "dra-sriov-env",
    "dra-ib-only",
    "dranet-gb200-shared",
    "two-hcas-one-uverbs",
    "renamed-pod-device",
    "host-renamed-rdma",
    "eks-p5-efa",
    "cx8-multiplane",
    "hgx-b200-lpf",
    "counters-einval",
];

fn schema(name: &str) -> jsonschema::Validator {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schemas").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    jsonschema::validator_for(&value).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[track_caller]
fn assert_valid(v: &jsonschema::Validator, what: &str, doc: &Value) {
    let errors: Vec<String> = v.iter_errors(doc).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    assert!(errors.is_empty(), "{what} does not match its schema:\n{}\n{doc}", errors.join("\n"));
}

/// A run on `node` with all its roots and its device-plugin variables, where it has them.
fn run(node: &str) -> Run {
    let r = Run::node(node).env("NCCL_WRAP_PROC_ROOT", common::fixture(node).join("proc"));
    let r = r.env("NCCL_WRAP_DEV_ROOT", common::fixture(node).join("dev"));
    if common::fixture(node).join("env").exists() {
        r.with_env_file(node, "env")
    } else {
        r
    }
}

#[test]
fn env_json_of_every_fixture_node_matches_the_schema() {
    let v = schema("env.schema.json");
    for node in NODES {
        let out = run(node).args(["env", "--json"]);
        let text = out.success().stdout();
        assert_eq!(text.lines().count(), 1, "{node}: env --json is one line");
        assert_valid(&v, &format!("{node}: env --json"), &out.json());
    }
}

#[test]
fn doctor_json_of_every_fixture_node_matches_the_schema() {
    let v = schema("doctor.schema.json");
    for node in NODES {
        let out = run(node).args(["doctor", "--json", "--no-selftest"]);
        assert!(matches!(out.code(), Some(0 | 1)), "{node}: doctor exit {:?}\n{}", out.code(), out.stderr());
        assert_eq!(out.stdout().lines().count(), 1, "{node}: doctor --json is one line");
        assert_valid(&v, &format!("{node}: doctor --json"), &out.json());
    }
}

#[test]
fn the_schemas_reject_null_limits_and_unitless_sizes() {
    let v = schema("env.schema.json");
    let mut doc = run("h100-roce-sriov").args(["env", "--json"]).json();
    assert!(v.is_valid(&doc));
    doc["memlock"]["after"]["soft_bytes"] = Value::Null;
    assert!(!v.is_valid(&doc), "null must not stand for unlimited");
    doc["memlock"]["after"]["soft_bytes"] = Value::from("unlimited");
    assert!(v.is_valid(&doc));
    let limits = doc["memlock"]["after"].as_object_mut().expect("limits");
    let soft = limits.remove("soft_bytes").expect("soft_bytes");
    limits.insert("soft".into(), soft);
    assert!(!v.is_valid(&doc), "a size without its unit in the key is refused");

    let d = schema("doctor.schema.json");
    let mut doc = run("h100-roce-sriov").args(["doctor", "--json", "--no-selftest"]).json();
    assert!(d.is_valid(&doc));
    let checks = doc["checks"].as_array_mut().expect("checks");
    let memlock = checks.iter_mut().find(|c| c["id"] == "memlock").expect("memlock check");
    memlock["evidence"]["soft_bytes"] = Value::Null;
    assert!(!d.is_valid(&doc), "doctor: null must not stand for unlimited");
}

//! `nccl-wrap doctor` on fixture nodes: each failing case names its check, and the exit status
//! says whether anything failed (0), something did (1), or doctor could not run (2).

mod common;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{fixture, Run};
use serde_json::Value;

const H100: &str = "h100-roce-sriov";
const REQUIRED_IDS: [&str; 10] =
    ["devices", "ports", "uverbs", "gid", "nccl-env", "memlock", "iommu", "gpudirect", "netns", "selftest"];

/// Doctor on `node` with every root in the fixture and its `env` loaded when it has one.
fn node(node: &str) -> Run {
    let root = fixture(node);
    let run = Run::node(node).env("NCCL_WRAP_PROC_ROOT", root.join("proc")).env("NCCL_WRAP_DEV_ROOT", root.join("dev"));
    if root.join("env").exists() {
        run.with_env_file(node, "env")
    } else {
        run
    }
}

fn checks<'a>(j: &'a Value, id: &str) -> Vec<&'a Value> {
    j["checks"].as_array().expect("checks").iter().filter(|c| c["id"] == id).collect()
}

/// The one check of `id` about `device`, or with no device in its evidence when `device` is None.
#[track_caller]
fn check<'a>(j: &'a Value, id: &str, device: Option<&str>) -> &'a Value {
    let found: Vec<&Value> = checks(j, id)
        .into_iter()
        .filter(|c| c["evidence"]["device"] == device.map_or(Value::Null, Value::from))
        .collect();
    assert_eq!(found.len(), 1, "expected one {id} check for {device:?}, got {}\n{j:#}", found.len());
    found[0]
}

#[track_caller]
fn status(j: &Value, id: &str, device: Option<&str>) -> String {
    check(j, id, device)["status"].as_str().expect("status").to_string()
}

#[test]
fn healthy_sriov_node_passes_and_exits_0() {
    let r = node(H100).args(["doctor", "--json"]);
    let j = r.code_is(0).json();
    for id in REQUIRED_IDS {
        assert!(!checks(&j, id).is_empty(), "no {id} check\n{j:#}");
    }
    assert_eq!(status(&j, "devices", None), "pass");
    for dev in ["mlx5_6", "mlx5_7", "mlx5_10", "mlx5_11"] {
        for id in ["ports", "uverbs", "iommu", "gid"] {
            assert_eq!(status(&j, id, Some(dev)), "pass", "{id} {dev}");
        }
    }
    assert_eq!(status(&j, "nccl-env", None), "pass");
    assert_eq!(status(&j, "gpudirect", None), "pass");
    assert_eq!(status(&j, "netns", None), "pass");
    assert_eq!(j["exit"], 0);
}

#[test]
fn selftest_without_verbs_is_a_warning_never_a_pass() {
    let j = node(H100).args(["doctor", "--json"]).json();
    let c = check(&j, "selftest", None);
    assert_eq!(c["status"], "warn");
    assert!(
        c["summary"].as_str().expect("summary").contains("loopback self-test not run: the sysfs root is not /sys"),
        "{c}"
    );
    let j = node(H100).args(["doctor", "--json", "--no-selftest"]).json();
    assert_eq!(status(&j, "selftest", None), "warn");
}

#[test]
fn translated_iommu_fails_and_names_loc_prot_err_and_acs() {
    let r = node("translated-iommu").args(["doctor", "--json"]);
    let j = r.code_is(1).json();
    for dev in ["mlx5_2", "mlx5_4"] {
        let c = check(&j, "iommu", Some(dev));
        assert_eq!(c["status"], "fail", "{c}");
        assert_eq!(c["evidence"]["type"]["value"], "DMA-FQ");
        assert_eq!(c["evidence"]["cmdline"]["iommu_pt"], false);
        assert!(c["summary"].as_str().expect("summary").contains("IBV_WC_LOC_PROT_ERR (vendor_err 81)"), "{c}");
        assert!(c["hint"].as_str().expect("hint").contains("iommu=pt"), "{c}");
        assert!(c["hint"].as_str().expect("hint").contains("ACS"), "{c}");
    }
    assert_eq!(status(&j, "gpudirect", None), "warn");
}

#[test]
fn gpus_on_the_far_numa_node_are_sys() {
    let j = node("translated-iommu").args(["doctor", "--json"]).json();
    let c = check(&j, "topology", None);
    assert_eq!(c["status"], "warn", "{c}");
    let gpus = c["evidence"]["gpus"].as_array().expect("gpus");
    assert_eq!(gpus.len(), 2);
    for g in gpus {
        assert_eq!(g["relation"], "SYS", "{g}");
        assert_eq!(g["numa"], 1);
    }
}

#[test]
fn gpu_on_the_nics_switch_is_pix() {
    let j = node("missing-uverbs").args(["doctor", "--json"]).json();
    let c = check(&j, "topology", None);
    assert_eq!(c["status"], "pass", "{c}");
    assert_eq!(c["evidence"]["gpus"][0]["relation"], "PIX");
}

#[test]
fn no_gpus_and_no_rdma() {
    let r = node("no-rdma").args(["doctor", "--json"]);
    let j = r.code_is(1).json();
    assert_eq!(status(&j, "devices", None), "fail");
    assert_eq!(status(&j, "gpudirect", None), "warn");
    assert_eq!(status(&j, "topology", None), "warn");
    assert!(check(&j, "gpudirect", None)["summary"].as_str().expect("summary").contains("no NVIDIA GPU"));
}

#[test]
fn down_port_fails_the_ports_check() {
    let r = node("h200-ib").args(["doctor", "--json"]);
    let j = r.code_is(1).json();
    let c = check(&j, "ports", Some("mlx5_3"));
    assert_eq!(c["status"], "fail", "{c}");
    assert_eq!(c["evidence"]["state"]["value"], "1: DOWN");
    assert_eq!(c["evidence"]["phys_state"]["value"], "3: Disabled");
    assert_eq!(status(&j, "ports", Some("mlx5_0")), "pass");
    // InfiniBand: no GID index needed.
    assert_eq!(status(&j, "gid", None), "pass");
}

#[test]
fn missing_uverbs_node_fails_for_that_device_only() {
    let r = node("missing-uverbs").args(["doctor", "--json"]);
    let j = r.code_is(1).json();
    let c = check(&j, "uverbs", Some("mlx5_3"));
    assert_eq!(c["status"], "fail", "{c}");
    assert_eq!(c["evidence"]["uverbs"], "uverbs3");
    assert!(c["hint"].as_str().expect("hint").contains("isRdma"), "{c}");
    assert_eq!(status(&j, "uverbs", Some("mlx5_2")), "pass");
}

#[test]
fn port_without_roce_v2_ipv4_gid_fails_and_disagreeing_indices_warn() {
    let r = node("roce-sparse-gid").args(["doctor", "--json"]);
    let j = r.code_is(1).json();
    assert_eq!(status(&j, "gid", Some("mlx5_4")), "fail");
    assert_eq!(status(&j, "gid", Some("mlx5_2")), "pass");
    assert_eq!(status(&j, "gid", Some("mlx5_3")), "pass");
    let agreement = check(&j, "gid", None);
    assert_eq!(agreement["status"], "warn", "{agreement}");
    assert_eq!(agreement["evidence"]["indices"], serde_json::json!({"mlx5_2:1": 3, "mlx5_3:1": 201}));
    assert!(agreement["summary"].as_str().expect("summary").contains("older than 2.21"), "{agreement}");
}

#[test]
fn prefix_nccl_ib_hca_over_matches_mlx5_10_and_11() {
    let r = node(H100).env("NCCL_IB_HCA", "mlx5_1").args(["doctor", "--json"]);
    let j = r.code_is(1).json();
    let c = check(&j, "nccl-env", None);
    assert_eq!(c["status"], "fail", "{c}");
    assert_eq!(c["evidence"]["selects"], serde_json::json!(["mlx5_1:1", "mlx5_10:1", "mlx5_11:1"]));
    let summary = c["summary"].as_str().expect("summary");
    assert!(summary.contains("`mlx5_1` is a prefix and also matches mlx5_10, mlx5_11"), "{summary}");
    assert!(summary.contains("mlx5_1:1 is not this pod's"), "{summary}");
}

#[test]
fn exact_or_overridden_nccl_ib_hca_passes() {
    let exact = "=mlx5_6:1,mlx5_7:1,mlx5_10:1,mlx5_11:1";
    let j = node(H100).env("NCCL_IB_HCA", exact).args(["doctor", "--json"]).json();
    assert_eq!(status(&j, "nccl-env", None), "pass");
    let j = node(H100).env("NCCL_IB_HCA", "mlx5_1").args(["--override", "doctor", "--json"]).json();
    assert_eq!(status(&j, "nccl-env", None), "pass");
}

#[test]
fn socket_ifname_and_ib_disable_from_the_environment() {
    let r = node(H100).env("NCCL_SOCKET_IFNAME", "=eth9").env("NCCL_IB_DISABLE", "1").args(["doctor", "--json"]);
    let j = r.code_is(1).json();
    let by_var = |v: &str| {
        checks(&j, "nccl-env").into_iter().find(|c| c["evidence"]["variable"] == v).expect(v)["status"].clone()
    };
    assert_eq!(by_var("NCCL_SOCKET_IFNAME"), "fail");
    assert_eq!(by_var("NCCL_IB_DISABLE"), "fail");
    assert_eq!(by_var("NCCL_IB_HCA"), "pass");
}

#[test]
fn user_gid_index_0_fails_on_roce_v2_ipv4_ports() {
    let j = node(H100).env("NCCL_IB_GID_INDEX", "0").args(["doctor", "--json"]).json();
    let c = check(&j, "gid", Some("mlx5_6"));
    assert_eq!(c["status"], "fail", "{c}");
    assert!(c["summary"].as_str().expect("summary").contains("NCCL_IB_GID_INDEX=0"), "{c}");
}

#[test]
fn human_form_shows_evidence_fix_and_the_gpu_nic_table() {
    let r = node("h200-ib").args(["doctor"]);
    let out = r.code_is(1).stdout();
    assert!(out.contains("FAIL ports     mlx5_3:1 DOWN (Disabled)"), "{out}");
    assert!(out.contains("ports/1/state = \"1: DOWN\""), "{out}");
    assert!(out.contains("     fix: "), "{out}");
    assert!(out.contains("GPU0          PIX"), "{out}");
    assert!(out.lines().any(|l| l.starts_with("PASS devices")), "{out}");
}

/// Runs the binary on `bad-input` with a deadline: a hang or a panic is a failure.
#[test]
fn bad_input_never_hangs_or_panics() {
    let root = fixture("bad-input");
    for args in [&["doctor", "--json"][..], &["doctor"][..]] {
        let mut cmd = common::bin_command();
        cmd.env_clear()
            .env("NCCL_WRAP_SYSFS_ROOT", root.join("sys"))
            .env("NCCL_WRAP_PROC_ROOT", root.join("proc"))
            .env("NCCL_WRAP_DEV_ROOT", root.join("dev"))
            .env("NCCL_WRAP_ANNOTATIONS", root.join("podnetinfo/annotations"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in common::env_file("bad-input", "env") {
            cmd.env(k, v);
        }
        let started = Instant::now();
        let mut child = cmd.spawn().expect("spawn");
        let code = loop {
            if let Some(st) = child.try_wait().expect("wait") {
                break st.code();
            }
            if started.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                panic!("doctor {args:?} on bad-input did not finish in 10 s");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let out = child.wait_with_output().expect("output");
        assert!(matches!(code, Some(0 | 1)), "exit {code:?}: {}", String::from_utf8_lossy(&out.stderr));
        if args.contains(&"--json") {
            let j: Value = serde_json::from_slice(&out.stdout).expect("JSON");
            assert_eq!(check(&j, "devices", None)["status"], "warn");
        }
    }
}

#[test]
fn doctor_that_cannot_read_sysfs_exits_2() {
    let r = node(H100).env("NCCL_WRAP_SYSFS_ROOT", "/nonexistent/sys").args(["doctor", "--json"]);
    r.code_is(2).stderr_has("doctor cannot run");
}

/// CapEff of this test process (the binary inherits the same set), from /proc/self/status.
fn cap_eff() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(line.trim(), 16).ok()
}

/// The memlock check against this machine's real limits and capabilities.
#[test]
fn memlock_on_this_machine() {
    let hard = Command::new("sh").args(["-c", "ulimit -H -l"]).output().expect("sh");
    let hard = String::from_utf8_lossy(&hard.stdout).trim().to_string();
    let hard_bytes: Option<u64> = hard.parse::<u64>().ok().map(|k| k * 1024); // None: unlimited
    let caps = cap_eff().expect("CapEff in /proc/self/status");
    let (ipc_lock, sys_resource) = (caps >> 14 & 1 == 1, caps >> 24 & 1 == 1);
    let want = if hard_bytes.is_none() || sys_resource || ipc_lock {
        "pass"
    } else if hard_bytes.is_some_and(|h| h >= 64 << 20) {
        "warn"
    } else {
        "fail"
    };
    // Real /proc: the check reads this process's capabilities.
    let j = Run::node(H100).with_env_file(H100, "env").args(["doctor", "--json"]).json();
    let c = check(&j, "memlock", None);
    assert_eq!(c["status"], want, "hard {hard:?}, CapEff {caps:#x}\n{c:#}");
    assert_eq!(c["evidence"]["cap_ipc_lock"], ipc_lock);
    assert_eq!(c["evidence"]["cap_sys_resource"], sys_resource);
    match hard_bytes {
        Some(h) if !sys_resource => {
            assert_eq!(c["evidence"]["hard_bytes"], h, "{c:#}");
            assert_eq!(c["evidence"]["soft_bytes"], h, "soft is raised to the hard limit\n{c:#}");
        }
        _ => assert_eq!(c["evidence"]["soft_bytes"], "unlimited", "{c:#}"),
    }
}

#[test]
fn the_devices_check_says_which_source_decided() {
    for (n, env, source, words) in [
        ("dra-metadata", None, "dra_metadata", "from DRA device metadata: mlx5_5, mlx5_6, mlx5_7"),
        ("dra-sriov-env", Some("env"), "sriov_dra", "from SR-IOV DRA driver: mlx5_5, mlx5_6"),
        (H100, Some("env"), "sriov", "from SR-IOV device plugin: mlx5_6, mlx5_7, mlx5_10, mlx5_11"),
    ] {
        let mut r = Run::node(n).env("NCCL_WRAP_DEV_ROOT", fixture(n).join("dev"));
        if let Some(e) = env {
            r = r.with_env_file(n, e);
        }
        let j = r.args(["doctor", "--json", "--no-selftest"]).json();
        let c = check(&j, "devices", None);
        assert_eq!(c["evidence"]["source"], source, "{c}");
        assert!(c["summary"].as_str().expect("summary").contains(words), "{n}: {c}");
    }
}

/// `doctor -q`: only the checks that do not pass, failures first, then the tally. On this node
/// the report's own order has a warning (bootstrap) before its failures (iommu), so the order
/// is pinned; PASS lines and the GPU/NIC matrix are gone, evidence and fixes stay. A pod's
/// `NCCL_WRAP_QUIET` (for its run's summary) does not thin a doctor run in it.
#[test]
fn doctor_quiet_hides_passes_and_puts_failures_first() {
    let r = node("translated-iommu").args(["doctor"]);
    r.code_is(1);
    let full = r.stdout();
    let check_lines = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| ["PASS ", "WARN ", "FAIL "].iter().any(|p| l.starts_with(p)))
            .map(String::from)
            .collect()
    };
    let all = check_lines(&full);
    let not_passing: Vec<&String> = all.iter().filter(|l| !l.starts_with("PASS ")).collect();
    assert!(
        not_passing.first().is_some_and(|l| l.starts_with("WARN ")),
        "the report's order starts with a warning:\n{full}"
    );
    assert!(full.contains("GPU/NIC topology"), "{full}");

    for flag in ["-q", "--quiet"] {
        let r = node("translated-iommu").args(["doctor", flag]);
        r.code_is(1);
        let quiet = r.stdout();
        let mut want: Vec<&String> = not_passing.iter().filter(|l| l.starts_with("FAIL ")).copied().collect();
        want.extend(not_passing.iter().filter(|l| l.starts_with("WARN ")));
        assert_eq!(check_lines(&quiet).iter().collect::<Vec<_>>(), want, "{flag}:\n{quiet}");
        assert!(quiet.contains("     fix: boot with iommu=pt"), "{quiet}");
        assert!(!quiet.contains("GPU/NIC topology"), "{quiet}");
        assert_eq!(quiet.lines().last(), full.lines().last(), "the tally");
    }

    let r = node("translated-iommu").env("NCCL_WRAP_QUIET", "1").args(["doctor"]);
    r.code_is(1);
    assert_eq!(r.stdout(), full, "NCCL_WRAP_QUIET thinned doctor");
}

/// The `bootstrap` check of doctor about the user's `var`.
#[track_caller]
fn bootstrap_of<'a>(j: &'a Value, var: &str) -> &'a Value {
    let found = checks(j, "bootstrap").into_iter().find(|c| c["evidence"]["variable"] == var);
    found.unwrap_or_else(|| panic!("no bootstrap check of {var}\n{j:#}"))
}

#[test]
fn a_gloo_socket_ifname_in_nccls_syntax_fails_with_what_to_set_instead() {
    let r = node(H100).env("GLOO_SOCKET_IFNAME", "^lo,docker").args(["doctor", "--json", "--no-selftest"]);
    let j = r.code_is(1).json();
    let c = bootstrap_of(&j, "GLOO_SOCKET_IFNAME");
    assert_eq!(c["status"], "fail", "{c}");
    let summary = c["summary"].as_str().expect("summary");
    assert!(summary.contains("is NCCL's list syntax, which Gloo does not read"), "{c}");
    let hint = c["hint"].as_str().expect("hint");
    assert!(hint.starts_with("set GLOO_SOCKET_IFNAME=") && hint.contains("interface names only"), "{c}");
}

#[test]
fn an_nccl_socket_ifname_that_takes_a_link_local_only_link_fails_with_what_to_set_instead() {
    // The EKS pod-identity link (169.254.170.23): only a network namespace of our own holds one.
    if common::no_netns() {
        return;
    }
    let setup = "set -e; ip link set lo up
        for i in eth0 pid0; do ip link add $i type veth peer name ${i}p; ip link set ${i}p up; ip link set $i up; done
        ip addr add 10.128.3.4/16 dev eth0; ip addr add 169.254.170.23/16 dev pid0
        ip route add default via 10.128.0.1
        exec \"$@\"";
    let root = fixture(H100);
    let mut cmd = Command::new("unshare");
    cmd.args(["--net", "--", "sh", "-c", setup, "sh"]).args(common::bin_argv());
    cmd.args(["doctor", "--json", "--no-selftest"])
        .env_clear()
        .env("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        .env("NCCL_WRAP_SYSFS_ROOT", root.join("sys"))
        .env("NCCL_WRAP_DEV_ROOT", root.join("dev"))
        .env("NCCL_WRAP_ANNOTATIONS", "/nonexistent/annotations")
        .env("NCCL_WRAP_IMAGE_ROOT", common::image("full"))
        .envs(common::env_file(H100, "env"))
        .env("NCCL_SOCKET_IFNAME", "^lo,docker,veth,eni");
    let out = common::output_within(&mut cmd, Duration::from_secs(60));
    let j: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let c = bootstrap_of(&j, "NCCL_SOCKET_IFNAME");
    assert_eq!(c["status"], "fail", "{c}");
    let summary = c["summary"].as_str().expect("summary");
    // (The veth peers, up without an address of their own, hold only fe80:: ones too.)
    let taken = summary.split_once("lets NCCL take ").map(|(_, t)| t).unwrap_or_default();
    assert!(taken.contains("pid0") && taken.contains("with only link-local addresses"), "{c}");
    let hint = c["hint"].as_str().expect("hint");
    assert!(hint.starts_with("set NCCL_SOCKET_IFNAME==eth0"), "{c}");
}

//! Node health files from the real binary: `nccl-wrap watch` on the host-* fixture nodes (the
//! node's view: healthy, a port down, IOMMU translated, and memlock under a low limit) and
//! `doctor --features --metrics` in a pod's view; the features each case gives, its metrics, the
//! label syntax of every line, and SIGTERM ending the agent with both files whole.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{fixture, output_within, DEADLINE};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

const P: &str = "nccl-wrap.feature.node.kubernetes.io/";

/// The two health files in a test's own directory.
struct Out(common::Scratch);

impl Out {
    fn new(tag: &str) -> Out {
        Out(common::Scratch::new(&format!("health-{tag}")))
    }
    fn features(&self) -> PathBuf {
        self.0.path().join("nccl-wrap")
    }
    fn metrics(&self) -> PathBuf {
        self.0.path().join("nccl-wrap.prom")
    }
}

/// The binary on `node` with every root in the fixture and a clean environment; `wrap` goes first
/// (a limit or capability changer).
fn command(node: &str, wrap: &[String]) -> Command {
    let root = fixture(node);
    let argv: Vec<String> = wrap.iter().cloned().chain(common::bin_argv()).collect();
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
        .env("NCCL_WRAP_SYSFS_ROOT", root.join("sys"))
        .env("NCCL_WRAP_PROC_ROOT", root.join("proc"))
        .env("NCCL_WRAP_DEV_ROOT", root.join("dev"))
        .env("NCCL_WRAP_ANNOTATIONS", root.join("podnetinfo/annotations"));
    for (k, v) in common::env_file(node, "env") {
        cmd.env(k, v);
    }
    cmd
}

struct Files {
    /// name (without the prefix) -> value
    features: BTreeMap<String, String>,
    feature_text: String,
    metrics: String,
    stderr: String,
}

fn read(out: &Out, stderr: String) -> Files {
    let feature_text = std::fs::read_to_string(out.features()).expect("features written");
    let features = feature_text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap_or_else(|| panic!("not name=value: {l:?}"));
            (k.strip_prefix(P).unwrap_or_else(|| panic!("not under {P}: {k}")).to_string(), v.to_string())
        })
        .collect();
    Files { features, feature_text, metrics: std::fs::read_to_string(out.metrics()).expect("metrics written"), stderr }
}

/// One round of `watch` on `node`.
fn watch_once(node: &str, wrap: &[String], tag: &str) -> Files {
    let out = Out::new(tag);
    let mut cmd = command(node, wrap);
    cmd.args(["watch", "--rounds", "1", "--features"]).arg(out.features()).arg("--metrics").arg(out.metrics());
    let o = output_within(&mut cmd, DEADLINE);
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "watch on {node}: {stderr}");
    read(&out, stderr)
}

/// `name{labels} value` -> value, for every sample line.
fn samples(metrics: &str) -> BTreeMap<String, String> {
    metrics
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').expect("sample");
            (k.to_string(), v.to_string())
        })
        .collect()
}

#[track_caller]
fn sample(m: &BTreeMap<String, String>, key: &str) -> String {
    m.get(key).cloned().unwrap_or_else(|| panic!("no sample {key}\n{m:#?}"))
}

fn cap_eff() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").expect("status");
    let line = s.lines().find_map(|l| l.strip_prefix("CapEff:")).expect("CapEff");
    u64::from_str_radix(line.trim(), 16).expect("hex")
}

/// What the memlock lines say for a process with this machine's limits and capabilities (the
/// binary inherits the test's).
fn memlock_here() -> (&'static str, &'static str) {
    let hard = Command::new("sh").args(["-c", "ulimit -H -l"]).output().expect("sh");
    let hard = String::from_utf8_lossy(&hard.stdout).trim().to_string();
    let hard_bytes: Option<u64> = hard.parse::<u64>().ok().map(|k| k * 1024);
    let caps = cap_eff();
    let (ipc_lock, sys_resource) = (caps >> 14 & 1 == 1, caps >> 24 & 1 == 1);
    let unlimited = hard_bytes.is_none() || sys_resource;
    let check = if unlimited || ipc_lock {
        "pass"
    } else if hard_bytes.is_some_and(|h| h >= 64 << 20) {
        "warn"
    } else {
        "fail"
    };
    (if unlimited { "unlimited" } else { "limited" }, check)
}

/// The expected labels: the node's own, then the memlock pair this machine gives.
fn expect(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    let (memlock, check) = memlock_here();
    let mut m: BTreeMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    m.insert("memlock".into(), memlock.into());
    m.insert("check.memlock".into(), check.into());
    m
}

/// Every line is a comment or a label Kubernetes accepts: checked here by hand, by a regex in the
/// deploy tests (tests/deploy/test_health.py).
#[track_caller]
fn labels_are_valid(f: &Files) {
    let seg = |s: &str| {
        !s.is_empty()
            && s.len() <= 63
            && s.bytes().all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(&c))
            && s.as_bytes()[0].is_ascii_alphanumeric()
            && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric()
    };
    for (k, v) in &f.features {
        assert!(seg(k), "label name {k:?}");
        assert!(v.is_empty() || seg(v), "label value {v:?} of {k}");
    }
    let lines: Vec<&str> = f.feature_text.lines().collect();
    assert!(lines[0].starts_with("# nccl-wrap "), "{}", f.feature_text);
    let expiry = lines[1].strip_prefix("# +expiry-time=").expect("expiry line second");
    assert!(expiry.len() == 20 && expiry.ends_with('Z') && expiry.as_bytes()[10] == b'T', "{expiry}");
}

/// HELP and TYPE once per family, before its samples; every sample's family has both.
#[track_caller]
fn metrics_are_well_formed(m: &str) {
    let mut typed: Vec<String> = Vec::new();
    let mut current = String::new();
    for l in m.lines() {
        if let Some(rest) = l.strip_prefix("# TYPE ") {
            let name = rest.split(' ').next().expect("name").to_string();
            assert!(!typed.contains(&name), "TYPE {name} twice");
            typed.push(name.clone());
            current = name;
        } else if !l.starts_with('#') {
            let name = l.split(['{', ' ']).next().expect("name");
            assert_eq!(name, current, "sample {l:?} outside its family");
            assert!(name.starts_with("nccl_wrap_"), "{l}");
        }
    }
}

#[test]
fn healthy_node() {
    let f = watch_once("host-healthy", &[], "healthy");
    let want = expect(&[
        ("check.devices", "pass"),
        ("check.gpudirect", "pass"),
        ("check.iommu", "pass"),
        ("check.netns", "pass"),
        ("check.port-rate", "pass"),
        ("check.ports", "pass"),
        ("check.topology", "pass"),
        ("gid-index", "3"),
        ("gid-index-consistent", "true"),
        ("gpudirect", "true"),
        ("healthy", "true"),
        ("iommu-passthrough", "true"),
        ("link-layer", "ethernet"),
        ("rdma-ports", "2"),
        ("rdma-ports-usable", "2"),
        ("rdma-rate-gbps", "400"),
    ]);
    assert_eq!(f.features, want, "{}", f.feature_text);
    labels_are_valid(&f);
    metrics_are_well_formed(&f.metrics);
    let m = samples(&f.metrics);
    assert_eq!(sample(&m, "nccl_wrap_healthy"), "1");
    assert_eq!(sample(&m, "nccl_wrap_rdma_ports_usable"), "2");
    assert_eq!(sample(&m, r#"nccl_wrap_info{version="0.1.0",view="node"}"#), "1");
    // VFs are counted, not checked.
    assert_eq!(sample(&m, r#"nccl_wrap_rdma_devices{kind="vf"}"#), "4");
    assert!(!f.metrics.contains("mlx5_2"), "a VF in the node's view:\n{}", f.metrics);
    assert_eq!(sample(&m, r#"nccl_wrap_port_state{device="mlx5_0",port="1"}"#), "4");
    assert_eq!(sample(&m, r#"nccl_wrap_port_rate_bytes_per_second{device="mlx5_0",port="1"}"#), "50000000000");
    assert_eq!(sample(&m, r#"nccl_wrap_port_gid_index{device="mlx5_1",port="1"}"#), "3");
    // Both counter directories, one family per counter, node_exporter's names; the IBTA data
    // counters (4-octet words) in bytes; lifespan is a setting and left out.
    let c = |family: &str| format!(r#"nccl_wrap_{family}{{device="mlx5_0",port="1"}}"#);
    assert_eq!(sample(&m, &c("out_of_sequence_packets_received_total")), "17");
    assert_eq!(sample(&m, &c("port_data_transmitted_bytes_total")), (902117334207u64 * 4).to_string());
    assert_eq!(sample(&m, &c("vl15_dropped_total")), "0");
    assert!(f.metrics.contains("# TYPE nccl_wrap_port_packets_received_total counter\n"), "{}", f.metrics);
    assert!(!f.metrics.contains("counter=") && !f.metrics.contains("_counter_total"), "{}", f.metrics);
    assert!(!f.metrics.contains("lifespan"), "{}", f.metrics);
    assert_eq!(sample(&m, r#"nccl_wrap_check_status{check="iommu",device="mlx5_1"}"#), "0");
    assert_eq!(sample(&m, "nccl_wrap_rounds_total"), "1");
    assert!(m.contains_key("nccl_wrap_agent_max_rss_bytes") && m.contains_key("nccl_wrap_round_duration_seconds"));
    assert!(f.stderr.contains("watch: healthy: 2 of 2 RDMA port(s) usable"), "{}", f.stderr);
}

#[test]
fn a_port_down_flips_its_metric_and_the_node_label() {
    let f = watch_once("host-port-down", &[], "down");
    let want = expect(&[
        ("check.devices", "pass"),
        ("check.gpudirect", "pass"),
        ("check.iommu", "pass"),
        ("check.netns", "pass"),
        ("check.ports", "fail"),
        // GPU1's NIC is left out, so its nearest chosen NIC is across the host bridge.
        ("check.topology", "warn"),
        ("gid-index", "3"),
        ("gid-index-consistent", "true"),
        ("gpudirect", "true"),
        ("healthy", "false"),
        ("iommu-passthrough", "true"),
        ("link-layer", "ethernet"),
        ("rdma-ports", "2"),
        ("rdma-ports-usable", "1"),
        ("rdma-rate-gbps", "400"),
    ]);
    assert_eq!(f.features, want, "{}", f.feature_text);
    labels_are_valid(&f);
    metrics_are_well_formed(&f.metrics);
    let m = samples(&f.metrics);
    assert_eq!(sample(&m, "nccl_wrap_healthy"), "0");
    assert_eq!(sample(&m, r#"nccl_wrap_port_state{device="mlx5_1",port="1"}"#), "1");
    assert_eq!(sample(&m, r#"nccl_wrap_port_phys_state{device="mlx5_1",port="1"}"#), "3");
    assert_eq!(sample(&m, r#"nccl_wrap_port_usable{device="mlx5_1",port="1"}"#), "0");
    assert_eq!(sample(&m, r#"nccl_wrap_port_usable{device="mlx5_0",port="1"}"#), "1");
    assert_eq!(sample(&m, r#"nccl_wrap_check_status{check="ports",device="mlx5_1",port="1"}"#), "2");
    assert_eq!(sample(&m, r#"nccl_wrap_link_downed_total{device="mlx5_1",port="1"}"#), "3");
    assert_eq!(sample(&m, r#"nccl_wrap_checks{status="fail"}"#), "1");
    assert!(f.stderr.contains("NOT healthy: 1 of 2 RDMA port(s) usable; failing: ports mlx5_1:1"), "{}", f.stderr);
}

#[test]
fn translated_iommu_is_not_passthrough_and_not_healthy() {
    let f = watch_once("host-translated-iommu", &[], "iommu");
    let want = expect(&[
        ("check.devices", "pass"),
        ("check.gpudirect", "pass"),
        ("check.iommu", "fail"),
        ("check.netns", "pass"),
        ("check.port-rate", "pass"),
        ("check.ports", "pass"),
        ("check.topology", "pass"),
        ("gid-index", "3"),
        ("gid-index-consistent", "true"),
        ("gpudirect", "true"),
        ("healthy", "false"),
        ("iommu-passthrough", "false"),
        ("link-layer", "ethernet"),
        ("rdma-ports", "2"),
        ("rdma-ports-usable", "2"),
        ("rdma-rate-gbps", "400"),
    ]);
    assert_eq!(f.features, want, "{}", f.feature_text);
    labels_are_valid(&f);
    let m = samples(&f.metrics);
    assert_eq!(sample(&m, "nccl_wrap_iommu_passthrough"), "0");
    assert_eq!(sample(&m, r#"nccl_wrap_check_status{check="iommu",device="mlx5_0"}"#), "2");
    assert_eq!(sample(&m, "nccl_wrap_healthy"), "0");
}

/// `sh -c 'ulimit -l 1024; exec "$@"'` and, where this process holds CAP_IPC_LOCK or
/// CAP_SYS_RESOURCE (root), setpriv dropping both: the agent then gets a 1 MiB limit it cannot
/// raise, as a container on a node whose runtime sets a low default does.
fn low_memlock() -> Option<Vec<String>> {
    let mut wrap: Vec<String> = ["sh", "-c", "ulimit -l 1024 && exec \"$@\"", "sh"].map(String::from).to_vec();
    let caps = cap_eff();
    if caps >> 14 & 1 == 1 || caps >> 24 & 1 == 1 {
        let have = Command::new("setpriv").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
        if !have.is_ok_and(|s| s.success()) {
            return None;
        }
        let drop = "-ipc_lock,-sys_resource";
        wrap.extend(["setpriv".into(), format!("--inh-caps={drop}"), format!("--bounding-set={drop}"), "--".into()]);
    }
    Some(wrap)
}

#[test]
fn memlock_below_64_mib_without_cap_ipc_lock() {
    let Some(wrap) = low_memlock() else {
        common::skip(
            "this process holds CAP_IPC_LOCK or CAP_SYS_RESOURCE and setpriv(1) is not installed to drop them",
        );
        return;
    };
    let f = watch_once("host-healthy", &wrap, "memlock");
    assert_eq!(f.features["memlock"], "limited", "{}", f.feature_text);
    assert_eq!(f.features["check.memlock"], "fail", "{}", f.feature_text);
    // Pods that add CAP_IPC_LOCK are not bound by the limit: memlock has its own label.
    assert_eq!(f.features["healthy"], "true", "{}", f.feature_text);
    let m = samples(&f.metrics);
    assert_eq!(sample(&m, "nccl_wrap_memlock_limit_bytes"), "1048576");
    assert_eq!(sample(&m, "nccl_wrap_cap_ipc_lock"), "0");
    assert_eq!(sample(&m, r#"nccl_wrap_check_status{check="memlock"}"#), "2");
}

#[test]
fn hostile_sysfs_gives_whole_valid_files() {
    // A symlink loop, a missing state file, garbage rate bytes, junk GIDs (fixtures/nodes/bad-input).
    let f = watch_once("bad-input", &[], "bad");
    labels_are_valid(&f);
    metrics_are_well_formed(&f.metrics);
    assert_eq!(f.features["rdma-ports"], "2", "the PFs; the VFs are counted only");
    assert_eq!(f.features["check.devices"], "warn", "the loop is reported: {}", f.feature_text);
    assert_eq!(f.features["healthy"], "false", "mlx5_1's port has no state");
}

#[test]
fn doctor_writes_the_pods_view() {
    let out = Out::new("doctor");
    let mut cmd = command("h100-roce-sriov", &[]);
    cmd.args(["doctor", "--json", "--features"]).arg(out.features()).env("NCCL_WRAP_METRICS", out.metrics());
    let o = output_within(&mut cmd, DEADLINE);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let f = read(&out, String::new());
    assert_eq!(f.features["healthy"], "true", "{}", f.feature_text);
    assert_eq!(f.features["rdma-ports"], "4");
    assert_eq!(f.features["rdma-ports-usable"], "4");
    assert_eq!(f.features["gid-index"], "3");
    assert_eq!(f.features["check.uverbs"], "pass");
    assert_eq!(f.features["check.selftest"], "warn");
    assert!(!f.feature_text.contains("+expiry-time"), "a one-off snapshot has no expiry");
    let m = samples(&f.metrics);
    assert_eq!(sample(&m, r#"nccl_wrap_info{version="0.1.0",view="pod"}"#), "1");
    assert_eq!(sample(&m, r#"nccl_wrap_port_usable{device="mlx5_10",port="1"}"#), "1");
    assert!(!m.contains_key(r#"nccl_wrap_port_usable{device="mlx5_0",port="1"}"#), "not the pod's");
    metrics_are_well_formed(&f.metrics);
    // Stdout is doctor's JSON, as without the files.
    assert!(serde_json::from_slice::<serde_json::Value>(&o.stdout).is_ok());

    let mut cmd = command("translated-iommu", &[]);
    cmd.args(["doctor", "--features"]).arg(out.features());
    let o = output_within(&mut cmd, DEADLINE);
    assert_eq!(o.status.code(), Some(1));
    let text = std::fs::read_to_string(out.features()).expect("features");
    assert!(
        text.contains(&format!("{P}iommu-passthrough=false")) && text.contains(&format!("{P}healthy=false")),
        "{text}"
    );
}

#[test]
fn unwritable_files_are_named_and_exit_2() {
    let mut cmd = command("host-healthy", &[]);
    cmd.args(["doctor", "--metrics", "/nonexistent/dir/nccl-wrap.prom"]);
    let o = output_within(&mut cmd, DEADLINE);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("/nonexistent/dir/.nccl-wrap.prom.tmp.") && err.contains("mounted and writable"), "{err}");
    let mut cmd = command("host-healthy", &[]);
    cmd.args(["watch", "--rounds", "3", "--features", "/nonexistent/dir/nccl-wrap"]);
    let o = output_within(&mut cmd, DEADLINE);
    assert_eq!(o.status.code(), Some(2), "the first round's failure stops the agent");
    assert!(String::from_utf8_lossy(&o.stderr).contains("round 1: features: cannot create"));
}

fn wait_for(deadline: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Kills the agent if the test fails before it stops.
struct Agent(std::process::Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn sigterm_ends_the_agent_between_rounds_with_both_files_whole() {
    let out = Out::new("sigterm");
    let mut cmd = command("host-healthy", &[]);
    cmd.args(["watch", "--interval", "0.1", "--features"])
        .arg(out.features())
        .arg("--metrics")
        .arg(out.metrics())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut agent = Agent(cmd.spawn().expect("spawn"));
    let rounds = |p: &Path| {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|t| samples(&t).get("nccl_wrap_rounds_total").and_then(|v| v.parse::<u64>().ok()))
            .unwrap_or(0)
    };
    assert!(wait_for(Duration::from_secs(20), || rounds(&out.metrics()) >= 3), "three rounds within 20 s");
    // The files are replaced, never rewritten in place: rounds go on while we read them.
    for _ in 0..20 {
        let t = std::fs::read_to_string(out.metrics()).expect("metrics");
        assert!(t.ends_with('\n') && t.contains("nccl_wrap_rounds_total "), "a partial file:\n{t}");
        std::thread::sleep(Duration::from_millis(7));
    }
    kill(Pid::from_raw(i32::try_from(agent.0.id()).expect("pid")), Signal::SIGTERM).expect("kill");
    let mut status = None;
    assert!(wait_for(Duration::from_secs(10), || {
        status = agent.0.try_wait().expect("wait");
        status.is_some()
    }));
    let mut err = String::new();
    let _ = std::io::Read::read_to_string(agent.0.stderr.as_mut().expect("stderr"), &mut err);
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{err}");
    assert!(err.contains("stopping on signal 15"), "{err}");
    let names: Vec<String> = std::fs::read_dir(out.0.path())
        .expect("ls")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "no temporary file stays behind: {names:?}");
    let f = read(&out, err);
    assert_eq!(f.features["healthy"], "true");
    metrics_are_well_formed(&f.metrics);
    assert!(f.metrics.ends_with("\n") && f.metrics.contains("nccl_wrap_agent_max_rss_bytes "));
}

/// HGX B200: the GPU baseboard's NVSwitch management functions (mlx5_0..3, VPD `SMDL=SW_MNG`)
/// are ACTIVE InfiniBand devices whose counters fail to read (and flood the kernel log when
/// read): the agent never reads them, and never counts their ports as usable.
#[test]
fn management_functions_counters_are_never_read_and_their_ports_never_usable() {
    let f = watch_once("hgx-b200-lpf", &[], "lpf");
    let m = samples(&f.metrics);
    for d in 0..12 {
        let usable = sample(&m, &format!("nccl_wrap_port_usable{{device=\"mlx5_{d}\",port=\"1\"}}"));
        assert_eq!(usable, if d < 4 { "0" } else { "1" }, "mlx5_{d}");
        let counters = m
            .keys()
            .filter(|k| k.ends_with("_total") || k.contains("_total{"))
            .filter(|k| k.contains(&format!("device=\"mlx5_{d}\"")))
            .count();
        if d < 4 {
            assert_eq!(counters, 0, "mlx5_{d}'s counters were read\n{}", f.metrics);
        } else {
            assert!(counters > 0, "mlx5_{d}'s counters are missing\n{}", f.metrics);
        }
    }
    // Their counter files fail to read: had they been read, each would have been named.
    assert!(!f.stderr.contains("port_rcv_data"), "{}", f.stderr);
}

/// A healthy port whose `counters/VL15_dropped` fails (EINVAL in switching mode,
/// prometheus/node_exporter#3265): that file costs itself only, and is named once, not every round.
#[test]
fn a_counter_file_that_fails_costs_that_file_only_named_once() {
    let out = Out::new("einval");
    let mut cmd = command("counters-einval", &[]);
    cmd.args(["watch", "--rounds", "3", "--interval", "1", "--features"])
        .arg(out.features())
        .arg("--metrics")
        .arg(out.metrics());
    let o = output_within(&mut cmd, DEADLINE);
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert_eq!(stderr.matches("VL15_dropped").count(), 1, "named once over three rounds:\n{stderr}");
    let f = read(&out, stderr);
    let m = samples(&f.metrics);
    assert!(!m.contains_key("nccl_wrap_vl15_dropped_total{device=\"mlx5_0\",port=\"1\"}"), "{}", f.metrics);
    assert_eq!(sample(&m, "nccl_wrap_vl15_dropped_total{device=\"mlx5_1\",port=\"1\"}"), "0");
    let mlx5_0 = m.keys().filter(|k| k.contains("_total{device=\"mlx5_0\"")).count();
    let mlx5_1 = m.keys().filter(|k| k.contains("_total{device=\"mlx5_1\"")).count();
    assert_eq!(mlx5_0 + 1, mlx5_1, "mlx5_0 lost VL15_dropped only\n{}", f.metrics);
    assert_eq!(f.features.get("healthy").map(String::as_str), Some("true"), "{:?}", f.features);
}

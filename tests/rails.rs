//! The rails rule on the hostNetwork fixture nodes (docs/rails.md), each run in a real network
//! namespace (`unshare --net`) that holds the node's interfaces and addresses (its `addrs` file:
//! the address dump the pod would get) while its routing table is the node's `proc/net/route`.
//! Each node pins the rule it was built on: the front end, PCIe placement, a bond's role, the
//! coordinator's network, the small node, a disagreement; then `--rails`, the bootstrap on the
//! front end, and a user's bootstrap values (the EKS case). Where this machine cannot make a
//! namespace, each case says SKIPPED and why.

mod common;

use std::process::Command;

use common::{bin_argv, fixture, image, output_within, Done, DEADLINE};

/// Makes one veth per interface the node's `addrs` file names (plus `extra` lines, same form),
/// gives each its addresses without a route of their own (the node's table is its proc file),
/// then runs the command.
const NETNS: &str = r#"set -e
addrs=$1; shift
ip link set lo up
n=0
for i in $(cut -d' ' -f1 "$addrs" | sort -u); do
    n=$((n + 1))
    ip link add "$i" type veth peer name "veth$n"
    ip link set "veth$n" up
    ip link set "$i" up
done
while read -r i a; do
    case $a in *:*) ip addr add "$a" dev "$i" nodad ;; *) ip addr add "$a" dev "$i" noprefixroute ;; esac
done < "$addrs"
exec "$@"
"#;

/// nccl-wrap ARGS on `node`, in a namespace holding its interfaces and addresses (and `extra`
/// `IFNAME ADDRESS/PREFIX` lines), with its `env_file` variables and `vars`.
fn on_node(node: &str, env_file: &str, extra: &str, vars: &[(&str, &str)], args: &[&str]) -> Done {
    let root = fixture(node);
    let mut addrs = std::fs::read_to_string(root.join("addrs")).expect("the node's addrs");
    addrs.push_str(extra);
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let file = std::env::temp_dir().join(format!("nccl-wrap-rails-{}-{node}-{n}", std::process::id()));
    std::fs::write(&file, addrs).expect("write addrs");
    let mut cmd = Command::new("unshare");
    cmd.args(["--net", "--", "sh", "-c", NETNS, "sh"]).arg(&file).args(bin_argv()).args(args);
    cmd.env_clear()
        .env("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        .env("NCCL_WRAP_SYSFS_ROOT", root.join("sys"))
        .env("NCCL_WRAP_PROC_ROOT", root.join("proc"))
        .env("NCCL_WRAP_DEV_ROOT", root.join("dev"))
        .env("NCCL_WRAP_ANNOTATIONS", "/nonexistent/annotations")
        .env("NCCL_WRAP_IMAGE_ROOT", image("full"));
    for (k, v) in common::env_file(node, env_file) {
        cmd.env(k, v);
    }
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let done = Done { out: output_within(&mut cmd, DEADLINE) };
    let _ = std::fs::remove_file(&file);
    done
}

fn json(node: &str, env_file: &str, args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend(["env", "--json"]);
    on_node(node, env_file, "", &[], &all).success().json()
}

fn hca(j: &serde_json::Value) -> Option<String> {
    j["vars"]
        .as_array()?
        .iter()
        .find(|v| v["name"] == "NCCL_IB_HCA")
        .and_then(|v| v["value"].as_str())
        .map(String::from)
}

/// `device` port 1's reason for not being used (`None`: used).
fn reason(j: &serde_json::Value, device: &str) -> Option<String> {
    let d = j["decisions"].as_array()?.iter().find(|d| d["device"] == device)?;
    d["reason"].as_str().map(String::from)
}

fn rule(j: &serde_json::Value, device: &str) -> String {
    let p = j["rails"]["ports"].as_array().and_then(|ps| ps.iter().find(|p| p["device"] == device).cloned());
    p.map(|p| format!("{} {}", p["class"].as_str().unwrap_or("?"), p["rule"].as_str().unwrap_or("?")))
        .unwrap_or_default()
}

fn bootstrap(j: &serde_json::Value) -> String {
    j["bootstrap"]["ifname"].as_str().unwrap_or("none").to_string()
}

#[test]
fn an_ethernet_front_end_beside_an_infiniband_fabric_is_no_rail() {
    if common::no_netns() {
        return;
    }
    let j = json("host-ib-roce-frontend", "env", &[]);
    assert_eq!(
        hca(&j).as_deref(),
        Some("=mlx5_0:1,mlx5_1:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1,mlx5_8:1,mlx5_9:1"),
        "{j}"
    );
    assert_eq!(rule(&j, "mlx5_2"), "left_out front end", "{j}");
    assert_eq!(rule(&j, "mlx5_3"), "left_out PCIe placement", "{j}");
    assert_eq!(rule(&j, "mlx5_0"), "rail PCIe placement", "{j}");
    let why = reason(&j, "mlx5_2").expect("mlx5_2 left out");
    assert!(why.contains("enp50s0f0np0 carries the default route") && why.contains("--rails"), "{why}");
    // The front end's port is no rail: it carries the bootstrap.
    assert_eq!(bootstrap(&j), "enp50s0f0np0", "{j}");
}

#[test]
fn oci_h100_gets_oracles_sixteen_rails_and_eth0_for_the_bootstrap() {
    if common::no_netns() {
        return;
    }
    let j = json("host-oci-h100", "env", &[]);
    let want = "=mlx5_0:1,mlx5_1:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1,mlx5_8:1,mlx5_9:1,mlx5_10:1,mlx5_12:1,mlx5_13:1,mlx5_14:1,mlx5_15:1,mlx5_16:1,mlx5_17:1";
    assert_eq!(hca(&j).as_deref(), Some(want), "{j}");
    assert_eq!(j["rails"]["verdict"], "confident", "{j}");
    assert_eq!(rule(&j, "mlx5_2"), "left_out front end", "{j}");
    let why = reason(&j, "mlx5_2").expect("mlx5_2 left out");
    assert!(why.contains("eth0 carries the default route and a route to the coordinator"), "{why}");
    assert!(why.contains("100 Gb/s where the 16 rails run at 200"), "{why}");
    // eth1 (fe80 only): never exported.
    assert!(reason(&j, "mlx5_11").is_some(), "{j}");
    assert_eq!(bootstrap(&j), "eth0", "{j}");
    // The evidence is in the plan: eth0's default route, a rail's GPU switch.
    let ev = &j["rails"]["evidence"];
    let eth0 = ev["ifaces"].as_array().and_then(|i| i.iter().find(|i| i["name"] == "eth0").cloned());
    assert_eq!(eth0.as_ref().map(|i| i["default_route"].clone()), Some(serde_json::json!(true)), "{ev}");
    let rail0 = ev["ports"].as_array().and_then(|p| p.iter().find(|p| p["device"] == "mlx5_0").cloned());
    assert!(rail0.is_some_and(|p| p["gpu"] == "PIX" || p["gpu"] == "PXB"), "{ev}");
}

#[test]
fn a_bond_front_end_takes_its_slaves_and_ib0_with_only_fe80_never_bootstraps() {
    if common::no_netns() {
        return;
    }
    let j = json("host-gh200-bond", "env", &[]);
    assert_eq!(hca(&j).as_deref(), Some("=mlx5_2:1"), "{j}");
    assert_eq!(rule(&j, "mlx5_0"), "left_out front end", "{j}");
    assert_eq!(rule(&j, "mlx5_1"), "left_out front end", "{j}");
    assert_eq!(rule(&j, "mlx5_2"), "rail one network", "{j}");
    // Its RoCE GIDs name bond0 (the kernel's LAG): the bond's default route settles both ports.
    assert!(reason(&j, "mlx5_0").expect("left out").contains("bond0 carries the default route"), "{j}");
    // NVIDIA/nccl#1291: bond0, never ib0's link-local address.
    assert_eq!(bootstrap(&j), "bond0", "{j}");
}

#[test]
fn dgx_spark_takes_the_coordinators_network_and_disagrees_without_it() {
    if common::no_netns() {
        return;
    }
    let j = json("host-dgx-spark", "env", &[]);
    assert_eq!(hca(&j).as_deref(), Some("=roceP2p1s0f0:1,rocep1s0f0:1"), "{j}");
    assert_eq!(rule(&j, "roceP2p1s0f1"), "left_out link-local only", "{j}");
    assert_eq!(rule(&j, "rocep1s0f1"), "left_out coordinator's network", "{j}");
    // A small node: the coordinator's interface is a rail's, and carries the bootstrap still.
    assert_eq!(bootstrap(&j), "enp1s0f0np0", "{j}");
    // The coordinator behind the management port: nothing tells, NCCL's default, with the warning.
    let j = json("host-dgx-spark", "env.mgmt", &[]);
    assert_eq!(hca(&j), None, "{j}");
    assert_eq!(j["rails"]["verdict"], "disagreement", "{j}");
    let w = j["warnings"].to_string();
    assert!(w.contains("rails not chosen") && w.contains("2 networks"), "{w}");
    assert_eq!(bootstrap(&j), "enP7s7", "{j}");
}

#[test]
fn a_single_nic_node_keeps_its_only_port_as_the_rail_and_the_bootstrap() {
    if common::no_netns() {
        return;
    }
    let j = json("host-single-nic", "env", &[]);
    assert_eq!(hca(&j).as_deref(), Some("=mlx5_0:1"), "{j}");
    assert_eq!(rule(&j, "mlx5_0"), "rail small node", "{j}");
    assert_eq!(bootstrap(&j), "ens1np0", "{j}");
}

#[test]
fn rails_option_names_the_rails_and_one_matching_nothing_warns_or_refuses() {
    if common::no_netns() {
        return;
    }
    let j = json("host-oci-h100", "env", &["--rails", "netdev:rdma*"]);
    assert_eq!(j["rails"]["verdict"], "override", "{j}");
    assert_eq!(hca(&j).map(|h| h.matches(':').count()), Some(16), "{j}");
    assert!(reason(&j, "mlx5_2").expect("left out").contains("not matched by --rails netdev:rdma*"), "{j}");
    // Matching nothing: NCCL's default, with the warning; under --require-rdma, a refusal.
    let d = on_node("host-oci-h100", "env", "", &[("NCCL_WRAP_RAILS", "cx9_*")], &["env", "--json"]);
    let j = d.success().json();
    assert_eq!(hca(&j), None, "{j}");
    assert!(j["warnings"].to_string().contains("--rails cx9_* matches none of the 17 usable ports"), "{j}");
    let d = on_node("host-oci-h100", "env", "", &[], &["--rails", "cx9_*", "--require-rdma", "--", "true"]);
    d.code_is(125).stderr_has("refusing to start").stderr_has("--rails cx9_* matches none");
    // A malformed value: on the command line a usage error; in the variable, named and ignored
    // alone, and the rule decides.
    let d = on_node("host-oci-h100", "env", "", &[], &["--rails", "^mlx5_2", "env"]);
    d.code_is(2).stderr_has("'^' and '=' are NCCL_IB_HCA's syntax");
    let d = on_node("host-oci-h100", "env", "", &[("NCCL_WRAP_RAILS", "^mlx5_2")], &["env", "--json"]);
    let j = d.success().json();
    assert_eq!(j["rails"]["verdict"], "confident", "{j}");
    assert!(d.stderr().contains("NCCL_WRAP_RAILS"), "{}", d.stderr());
}

#[test]
fn eks_user_bootstrap_values_that_take_the_pod_identity_link_are_warned_and_replaced_with_override() {
    if common::no_netns() {
        return;
    }
    // An EKS hostNetwork pod: the pod-identity link holds 169.254.170.23 only.
    let extra = "pod-id-link0 169.254.170.23/32\n";
    let user = "^lo,docker,veth,eni";
    let vars = [("NCCL_SOCKET_IFNAME", user), ("GLOO_SOCKET_IFNAME", user)];
    let d = on_node("host-single-nic", "env", extra, &vars, &["env"]);
    d.success()
        .stderr_has("NCCL_SOCKET_IFNAME=\"^lo,docker,veth,eni\" lets NCCL take pod-id-link0")
        .stderr_has("GLOO_SOCKET_IFNAME=\"^lo,docker,veth,eni\" is NCCL's list syntax, which Gloo does not read");
    assert!(!d.stdout().contains("SOCKET_IFNAME"), "kept: {}", d.stdout());
    let d = on_node("host-single-nic", "env", extra, &vars, &["--override", "env"]);
    let out = d.success().stdout();
    assert!(out.contains("export NCCL_SOCKET_IFNAME='=ens1np0'\nexport GLOO_SOCKET_IFNAME='ens1np0'\n"), "{out}");
    // A value that takes no link-local interface and that Gloo reads is kept without a word.
    let d = on_node("host-single-nic", "env", extra, &[("GLOO_SOCKET_IFNAME", "ens1np0")], &["env"]);
    d.success().stderr_lacks("GLOO_SOCKET_IFNAME");
}

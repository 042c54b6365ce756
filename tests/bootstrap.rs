//! The bootstrap interface and the rails' address family in real network namespaces (`unshare --net`: a real address dump, a real
//! routing table in `/proc/net/route` and `/proc/net/ipv6_route`): eth0 beside the h100 node's
//! rails net1..net4, a 169.254 link, a coordinator reachable through only one of two interfaces, a
//! coordinator name that does not resolve; rails with only IPv6 addresses, and a mix of families. The namespace dies with the process on every exit
//! path; where this machine cannot make one, each case says SKIPPED and why.

mod common;

use std::process::Command;

use common::{bin_argv, fixture, image, output_within, Done, Scratch, DEADLINE};

const NODE: &str = "h100-roce-sriov";

/// Makes veth interfaces (`name,addr/len[,addr/len]` words), then routes (`;`-separated `ip route
/// add` arguments), then runs the command.
const NETNS: &str = r#"set -e
specs=$1; routes=$2; shift 2
ip link set lo up
for spec in $specs; do
    name=${spec%%,*}; addrs=${spec#*,}
    ip link add "$name" type veth peer name "${name}p"
    ip link set "${name}p" up
    ip link set "$name" up
    for a in $(echo "$addrs" | tr ',' ' '); do
        case $a in *:*) ip addr add "$a" dev "$name" nodad ;; *) ip addr add "$a" dev "$name" ;; esac
    done
done
IFS=';'
for r in $routes; do IFS=' '; ip route add $r; IFS=';'; done
unset IFS
exec "$@"
"#;

/// The h100 pod's rails as its namespace holds them.
const RAILS: &str = "net1,10.0.106.7/24 net2,10.0.107.7/24 net3,10.0.190.7/24 net4,10.0.191.7/24";

/// nccl-wrap ARGS on the h100 node (its SR-IOV rails), in a namespace with `specs` and `routes`.
fn in_pod(specs: &str, routes: &str, vars: &[(&str, &str)], args: &[&str]) -> Done {
    in_pod_at(&fixture(NODE), specs, routes, vars, args)
}

/// [`in_pod`] on a node tree at `root` (a changed copy of the h100 node).
fn in_pod_at(root: &std::path::Path, specs: &str, routes: &str, vars: &[(&str, &str)], args: &[&str]) -> Done {
    let mut cmd = Command::new("unshare");
    cmd.args(["--net", "--", "sh", "-c", NETNS, "sh", specs, routes]).args(bin_argv()).args(args);
    cmd.env_clear()
        .env("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        .env("NCCL_WRAP_SYSFS_ROOT", root.join("sys"))
        .env("NCCL_WRAP_ANNOTATIONS", "/nonexistent/annotations")
        .env("NCCL_WRAP_IMAGE_ROOT", image("full"));
    for (k, v) in common::env_file(NODE, "env") {
        cmd.env(k, v);
    }
    for (k, v) in vars {
        cmd.env(k, v);
    }
    Done { out: output_within(&mut cmd, DEADLINE) }
}

fn pod(extra: &str) -> String {
    format!("eth0,10.128.3.4/16 {RAILS} {extra}")
}

#[test]
fn eth0_and_rails_export_eth0_exactly_never_a_rail() {
    if common::no_netns() {
        return;
    }
    let d = in_pod(&pod(""), "default via 10.128.0.1", &[], &["env"]);
    let out = d.success().stdout();
    assert!(out.contains("export NCCL_SOCKET_IFNAME='=eth0'\nexport GLOO_SOCKET_IFNAME='eth0'\n"), "{out}");
    // The coordinator on rail 0's subnet: its route leaves by net1, a rail; eth0 still.
    let d = in_pod(
        &pod(""),
        "default via 10.128.0.1",
        &[("MASTER_ADDR", "10.0.106.9")],
        &["--supervise=false", "--", "true"],
    );
    d.success()
        .stderr_has("bootstrap: eth0 carries the default route (the route to MASTER_ADDR=10.0.106.9 (10.0.106.9) leaves by net1, a rail")
        .stderr_has("set NCCL_SOCKET_IFNAME='=eth0'");
}

#[test]
fn the_coordinator_reachable_through_one_of_two_interfaces_decides() {
    if common::no_netns() {
        return;
    }
    let d = in_pod(&pod("eth1,10.200.0.2/24"), "default via 10.128.0.1", &[("MASTER_ADDR", "10.200.0.9")], &["env"]);
    assert!(d.success().stdout().contains("export NCCL_SOCKET_IFNAME='=eth1'\n"), "{}", d.stderr());
    let d =
        in_pod(&pod("eth1,10.200.0.2/24"), "default via 10.128.0.1", &[("PET_MASTER_ADDR", "10.128.9.9")], &["env"]);
    assert!(d.success().stdout().contains("export NCCL_SOCKET_IFNAME='=eth0'\n"), "{}", d.stderr());
}

#[test]
fn a_link_local_only_link_never_carries_the_bootstrap() {
    if common::no_netns() {
        return;
    }
    // A pod-identity link with only 169.254 holds the better default route.
    let d = in_pod(
        &pod("pid0,169.254.20.2/16"),
        "default dev pid0 metric 10;default via 10.128.0.1 metric 100",
        &[],
        &["--supervise=false", "--", "true"],
    );
    d.success().stderr_has("set NCCL_SOCKET_IFNAME='=eth0'").stderr_lacks("=pid0");
    // Nothing else: left to NCCL, said so, nothing exported.
    let d = in_pod("pid0,169.254.20.2/16", "default dev pid0", &[], &["--supervise=false", "--", "true"]);
    d.success().stderr_has("bootstrap: left to NCCL").stderr_lacks("NCCL_SOCKET_IFNAME");
}

#[test]
fn a_coordinator_name_that_does_not_resolve_falls_back_to_the_default_route() {
    if common::no_netns() {
        return;
    }
    let args = ["--supervise=false", "--", "true"];
    let d = in_pod(&pod(""), "default via 10.128.0.1", &[("MASTER_ADDR", "trainer-0.job.invalid")], &args);
    let err = d.success().stderr();
    assert!(err.contains("set NCCL_SOCKET_IFNAME='=eth0'"), "{err}");
    assert!(
        err.contains("MASTER_ADDR=trainer-0.job.invalid does not resolve")
            || err.contains("MASTER_ADDR=trainer-0.job.invalid did not resolve within 1000 ms"),
        "{err}"
    );
}

#[test]
fn user_values_are_kept() {
    if common::no_netns() {
        return;
    }
    let d = in_pod(
        &pod(""),
        "default via 10.128.0.1",
        &[("NCCL_SOCKET_IFNAME", "net1"), ("GLOO_SOCKET_IFNAME", "eth0")],
        &["env"],
    );
    let out = d.success().stdout();
    assert!(!out.contains("SOCKET_IFNAME"), "{out}");
}

#[test]
fn ipv6_coordinator_routes_give_af_inet6() {
    if common::no_netns() {
        return;
    }
    let d = in_pod(
        "eth0,10.128.3.4/16,fd00:128::4/64 eth1,fd00:200::2/64",
        "default via 10.128.0.1",
        &[("MASTER_ADDR", "fd00:200::9")],
        &["env", "--json"],
    );
    let j = d.success().json();
    assert_eq!(j["bootstrap"]["ifname"], "eth1", "{}", j["bootstrap"]);
    assert_eq!(j["bootstrap"]["family"], "AF_INET6");
}

/// Doctor's `bootstrap` checks in a namespace.
fn doctor(specs: &str, routes: &str, vars: &[(&str, &str)]) -> Vec<serde_json::Value> {
    let dev = fixture(NODE).join("dev");
    let mut all: Vec<(&str, &str)> = vars.to_vec();
    let dev = dev.to_string_lossy().into_owned();
    all.push(("NCCL_WRAP_DEV_ROOT", &dev));
    let j = in_pod(specs, routes, &all, &["doctor", "--json", "--no-selftest"]).json();
    j["checks"].as_array().expect("checks").iter().filter(|c| c["id"] == "bootstrap").cloned().collect()
}

#[test]
fn doctor_names_a_user_value_that_selects_a_rail_nothing_or_not_the_coordinators_route() {
    if common::no_netns() {
        return;
    }
    let routes = "default via 10.128.0.1";
    let c = doctor(&pod(""), routes, &[("NCCL_SOCKET_IFNAME", "=net1")]);
    assert_eq!(c[0]["status"], "warn", "{c:?}");
    assert!(c[0]["summary"].as_str().is_some_and(|s| s.contains("net1 is a rail")), "{c:?}");
    let c = doctor(&pod(""), routes, &[("NCCL_SOCKET_IFNAME", "=nope0")]);
    assert_eq!(c[0]["status"], "fail", "{c:?}");
    let c =
        doctor(&pod("eth1,10.200.0.2/24"), routes, &[("NCCL_SOCKET_IFNAME", "=eth1"), ("MASTER_ADDR", "10.128.7.7")]);
    assert!(
        c[0]["summary"]
            .as_str()
            .is_some_and(|s| s.contains("is reached 10.128.7.7 by eth0, not through what NCCL_SOCKET_IFNAME selects")),
        "{c:?}"
    );
    let c = doctor(&pod("pid0,169.254.20.2/16"), routes, &[("GLOO_SOCKET_IFNAME", "pid0")]);
    let gloo = c.iter().find(|x| x["evidence"]["variable"] == "GLOO_SOCKET_IFNAME").expect("gloo check");
    assert!(
        gloo["summary"].as_str().is_some_and(|s| s.contains("pid0 is an interface with only link-local addresses")),
        "{gloo}"
    );
    // Unset: what nccl-wrap exports, passing.
    let c = doctor(&pod(""), routes, &[]);
    assert_eq!(c[0]["status"], "pass", "{c:?}");
}

/// A copy of the h100 node whose rails `which` (net1..net4) carry IPv6 ULA addresses instead of
/// IPv4: entries 2 (RoCE v1) and 3 (RoCE v2) hold `fd00:<rail>::7`, as the kernel adds them.
fn ipv6_rails(tag: &str, which: &[&str]) -> Scratch {
    let s = Scratch::node(NODE, tag);
    for (dev, net, rail) in
        [("mlx5_6", "net1", "106"), ("mlx5_7", "net2", "107"), ("mlx5_10", "net3", "190"), ("mlx5_11", "net4", "191")]
    {
        if !which.contains(&net) {
            continue;
        }
        let d = std::fs::canonicalize(s.root().join("sys/class/infiniband").join(dev)).expect("dev");
        for i in ["2", "3"] {
            std::fs::write(d.join("ports/1/gids").join(i), format!("fd00:0000:0000:{rail:0>4}:0000:0000:0000:0007\n"))
                .expect("gid");
        }
    }
    s
}

fn rails_spec(v6: &[&str]) -> String {
    let mut out = vec!["eth0,10.128.3.4/16".to_string()];
    for (net, rail) in [("net1", "106"), ("net2", "107"), ("net3", "190"), ("net4", "191")] {
        if v6.contains(&net) {
            out.push(format!("{net},fd00:0:0:{rail}::7/64"));
        } else {
            out.push(format!("{net},10.0.{rail}.7/24"));
        }
    }
    out.join(" ")
}

#[test]
fn ipv6_only_rails_export_af_inet6_and_their_index() {
    if common::no_netns() {
        return;
    }
    let all = ["net1", "net2", "net3", "net4"];
    let s = ipv6_rails("v6rails", &all);
    let d = in_pod_at(&s.root(), &rails_spec(&all), "default via 10.128.0.1", &[], &["env"]);
    let out = d.success().stdout();
    assert!(out.contains("export NCCL_IB_HCA='=mlx5_6:1,mlx5_7:1,mlx5_10:1,mlx5_11:1'\n"), "{out}{}", d.stderr());
    assert!(out.contains("export NCCL_IB_GID_INDEX='3'\n"), "{out}");
    assert!(out.contains("export NCCL_IB_ADDR_FAMILY='AF_INET6'\n"), "{out}");
    // A user's family is kept: nothing exported for it, and AF_INET finds no entry.
    let d = in_pod_at(
        &s.root(),
        &rails_spec(&all),
        "default via 10.128.0.1",
        &[("NCCL_IB_ADDR_FAMILY", "AF_INET")],
        &["env"],
    );
    assert!(!d.success().stdout().contains("NCCL_IB_ADDR_FAMILY"), "{}", d.stdout());
}

#[test]
fn rails_of_mixed_families_are_named_with_the_fix() {
    if common::no_netns() {
        return;
    }
    let s = ipv6_rails("mixrails", &["net3", "net4"]);
    let d = in_pod_at(
        &s.root(),
        &rails_spec(&["net3", "net4"]),
        "default via 10.128.0.1",
        &[],
        &["--supervise=false", "--", "true"],
    );
    d.success()
        .stderr_has("the rails mix address families: net1, net2 carry IPv4, net3, net4 only IPv6")
        .stderr_has("Fix: give every rail an IPv4 address")
        .stderr_lacks("AF_INET6'");
}

#[test]
fn hostile_routing_tables_are_refused_and_the_job_still_starts() {
    let s = Scratch::node(NODE, "hostileroutes");
    let net = s.root().join("proc/net");
    std::fs::create_dir_all(&net).expect("mkdir");
    // A FIFO without a writer (a read would block) and a table past the 1 MiB bound.
    let made = Command::new("mkfifo").arg(net.join("route")).status();
    if !made.is_ok_and(|st| st.success()) {
        eprintln!("SKIPPED: mkfifo unavailable");
        return;
    }
    let line = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 00000001 00000001 00000000 00000001 \u{1b}[31meth0\n";
    std::fs::write(net.join("ipv6_route"), line.repeat(20_000)).expect("write");
    let r = common::Run::node(NODE)
        .with_env_file(NODE, "env")
        .env("NCCL_WRAP_PROC_ROOT", s.root().join("proc"))
        .args(["--supervise=false", "--", "true"]);
    r.success().stderr_has("bootstrap: left to NCCL").stderr_lacks("\u{1b}");
    // Within the bound, the hostile interface name is skipped, never printed.
    std::fs::write(net.join("ipv6_route"), line.repeat(3)).expect("write");
    std::fs::remove_file(net.join("route")).expect("rm");
    let r = common::Run::node(NODE)
        .with_env_file(NODE, "env")
        .env("NCCL_WRAP_PROC_ROOT", s.root().join("proc"))
        .args(["--supervise=false", "--", "true"]);
    r.success().stderr_lacks("\u{1b}").stderr_lacks("SOCKET_IFNAME");
}

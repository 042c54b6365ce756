//! Shared RDMA devices: the real binary on the `roce-shared-macvlan` and `ib-shared-ipoib` fixture
//! nodes. The pod's own addresses come from the kernel (an rtnetlink dump), so each RoCE case runs in a
//! fresh network namespace (`unshare --net`) holding one pod's interfaces: veth ends with that
//! pod's MACs and addresses, named net1 and net2 as Multus names every pod's rails. The namespace
//! dies with the process, on every exit path. Where this machine cannot make one, the RoCE cases
//! say SKIPPED and why.

mod common;

use std::process::Command;

use common::{bin_argv, fixture, output_within, Done, DEADLINE};

/// Makes the interfaces, then runs the command; the specs are `name,mac,addr/len[,macvlan]`
/// words: a veth end, or with `macvlan` a macvlan child (of a veth standing in for the node's NIC),
/// whose kind the kernel reports as a node's would.
const POD_NETNS: &str = r#"set -e
specs=$1; shift
ip link set lo up
for spec in $specs; do
    name=${spec%%,*}; rest=${spec#*,}; mac=${rest%%,*}; addr=${rest#*,}; kind=${addr#*,}
    addr=${addr%%,*}
    if [ "$kind" = macvlan ]; then
        ip link add "${name}l" type veth peer name "${name}p"
        ip link set "${name}l" up
        ip link add link "${name}l" name "$name" type macvlan
    else
        ip link add "$name" type veth peer name "${name}p"
    fi
    ip link set "$name" address "$mac"
    ip link set "${name}p" up
    ip link set "$name" up
    ip addr add "$addr" dev "$name"
done
exec "$@"
"#;

/// The interfaces of pod `a`, `b` or `c` of `fixtures/nodes.py` (SHARED_PODS): rail 1's MAC is
/// rail 0's with 0x10 added to the last byte.
fn pod(which: char) -> String {
    let (mac, r0, r1) = match which {
        'a' => ("0a:58:0a:09:00:33", "10.9.0.51", "10.9.1.51"),
        'b' => ("0a:58:0a:09:00:34", "10.9.0.52", "10.9.1.52"),
        _ => ("0a:58:0a:14:00:35", "10.20.0.53", "10.20.1.53"),
    };
    let last = u8::from_str_radix(&mac[15..], 16).expect("mac");
    format!("net1,{mac},{r0}/24 net2,{}{:02x},{r1}/24", &mac[..15], last + 0x10)
}

/// nccl-wrap ARGS on `node`, in a new network namespace holding `specs`' interfaces.
fn in_pod(node: &str, specs: &str, vars: &[(&str, &str)], args: &[&str]) -> Done {
    let root = fixture(node);
    let mut cmd = Command::new("unshare");
    cmd.args(["--net", "--", "sh", "-c", POD_NETNS, "sh", specs]).args(bin_argv()).args(args);
    cmd.env_clear()
        .env("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        .env("NCCL_WRAP_SYSFS_ROOT", root.join("sys"))
        .env("NCCL_WRAP_ANNOTATIONS", "/nonexistent/annotations");
    for (k, v) in vars {
        cmd.env(k, v);
    }
    Done { out: output_within(&mut cmd, DEADLINE) }
}

fn env_lines(d: &Done) -> String {
    d.stdout()
}

#[test]
fn each_pod_gets_its_own_entries_or_a_warning_never_a_neighbours_index() {
    if common::no_netns() {
        return;
    }
    // Pod b: own entries 9 (rail 0) and 5 (rail 1). No one index; a range over its addresses
    // (10.9.0.0/23) holds pod a's 10.9.0.51, first on rail 0: neither is exported, and the
    // warning gives each port's own index and what NCCL would take.
    let b = in_pod("roce-shared-macvlan", &pod('b'), &[], &["env"]);
    b.success();
    assert_eq!(env_lines(&b), "export NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1'\n", "{}", b.stderr());
    b.stderr_has("mlx5_0:1: own index 9 (10.9.0.52), NCCL would take 5 (10.9.0.51, another namespace's)");
    b.stderr_has("mlx5_1:1: own index 5 (10.9.1.52), NCCL would take 5 (10.9.1.52, this pod's)");
    b.stderr_has("Fix: give each pod its rails in the same order");

    // Pod c: 10.20.x, a subnet of its own: NCCL_IB_ADDR_RANGE lands NCCL's rule on 13 and 9.
    let c = in_pod("roce-shared-macvlan", &pod('c'), &[], &["env"]);
    c.success();
    assert_eq!(
        env_lines(&c),
        "export NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1'\nexport NCCL_IB_ADDR_RANGE='10.20.0.0/23'\n",
        "{}",
        c.stderr()
    );
}

#[test]
fn the_summary_and_json_say_how_ownership_was_told() {
    if common::no_netns() {
        return;
    }
    let run = in_pod("roce-shared-macvlan", &pod('c'), &[], &["--", "/bin/true"]);
    run.success();
    run.stderr_has("mlx5_0: sysfs (shared device, via net1 10.20.0.53)");
    run.stderr_has("GID 13 (10.20.0.53) on net1, this pod's (NCCL alone would take 5, 10.9.0.51, another namespace's)");
    let j = in_pod("roce-shared-macvlan", &pod('c'), &[], &["env", "--json"]).json();
    let port = &j["devices"][0]["ports"][0];
    assert_eq!(port["gid"]["index"], 13);
    assert_eq!(port["gid"]["owner"], "pod");
    assert_eq!(port["nccl_pick"]["index"], 5);
    assert_eq!(port["nccl_pick"]["owner"], "other");
    // A run tells the entries before the pod's own by address only; doctor says whose each is.
    let host = port["gid_table"].as_array().expect("gid_table").iter().find(|r| r["index"] == 1).expect("row 1");
    assert_eq!(host["address"], "fe80::ba3f:d2ff:fe5a:1000");
    assert!(host["owner"].is_null() && host["ndev"].is_null(), "{host}");
    let doctor = in_pod("roce-shared-macvlan", &pod('c'), &[], &["doctor", "--json", "--no-selftest"]).json();
    let check = doctor["checks"].as_array().expect("checks").iter().find(|c| c["id"] == "gid-owner").cloned();
    let rows = check.map(|c| c["evidence"]["gid_table"].clone()).unwrap_or_default();
    let host = rows.as_array().expect("doctor's gid_table").iter().find(|r| r["index"] == 1).expect("row 1");
    assert_eq!(host["owner"], "host");
    assert_eq!(host["ndev"], "ens1f0np0");
    assert_eq!(j["addr_range"], "10.20.0.0/23");
    assert!(j["pod_addresses"].as_array().expect("addresses").iter().any(|a| a["addr"] == "10.20.1.53"));
}

#[test]
fn doctor_says_whose_address_the_effective_index_holds() {
    if common::no_netns() {
        return;
    }
    let ok = in_pod("roce-shared-macvlan", &pod('c'), &[], &["doctor", "--json", "--no-selftest"]);
    let owner: Vec<serde_json::Value> =
        ok.json()["checks"].as_array().expect("checks").iter().filter(|c| c["id"] == "gid-owner").cloned().collect();
    assert_eq!(owner.len(), 2, "{owner:?}");
    assert!(owner.iter().all(|c| c["status"] == "pass"), "{owner:?}");
    assert!(owner[0]["evidence"]["gid_table"].as_array().is_some_and(|t| t.len() == 14), "{owner:?}");

    // A kept NCCL_IB_GID_INDEX=5: pod a's address on rail 0, pod b's on rail 1.
    let kept = in_pod("roce-shared-macvlan", &pod('c'), &[("NCCL_IB_GID_INDEX", "5")], &["doctor", "--no-selftest"]);
    kept.code_is(1);
    let out = kept.stdout();
    assert!(
        out.contains("mlx5_0:1: NCCL_IB_GID_INDEX=5 points at index 5: 10.9.0.51 on net1, another namespace's address"),
        "{out}"
    );
    assert!(out.contains("this pod's own entry on mlx5_0:1 is index 13 (10.20.0.53)"), "{out}");

    // Index 1: the host's fe80 entry, on the PF's own net device.
    let host = in_pod("roce-shared-macvlan", &pod('c'), &[("NCCL_IB_GID_INDEX", "1")], &["doctor", "--no-selftest"]);
    assert!(
        host.stdout().contains("points at index 1: fe80::ba3f:d2ff:fe5a:1000 on ens1f0np0, the host's address"),
        "{}",
        host.stdout()
    );
}

#[test]
fn a_pod_address_without_its_entry_is_waited_for_then_named() {
    if common::no_netns() {
        return;
    }
    // Pod b's MACs (its link-local entries are in the tables) with addresses the tables lack: the
    // kernel would still be adding them. nccl-wrap waits its bound, then says which never came.
    let late = "net1,0a:58:0a:09:00:34,10.9.0.99/24 net2,0a:58:0a:09:00:44,10.9.1.52/24";
    let probe = Command::new("unshare")
        .args(["--net", "--", "sh", "-c", POD_NETNS, "sh", late, "ip", "-6", "addr", "show", "dev", "net1"])
        .output();
    if !probe.as_ref().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("fe80::858:aff:fe09:34")) {
        common::skip("no IPv6 link-local address on a veth interface here (IPv6 disabled?)");
        return;
    }
    let run = in_pod("roce-shared-macvlan", late, &[], &["env"]);
    run.success();
    run.stderr_has("net1 10.9.0.99 on mlx5_0:1: not in the GID table after waiting");
    // Rail 1 still gets the pod's own entry; rail 0 has none, and NCCL's pick there is pod a's.
    let j = in_pod("roce-shared-macvlan", late, &[], &["env", "--json"]).json();
    assert_eq!(j["hca"], serde_json::json!(["mlx5_1:1"]), "{j}");
    let reason = j["decisions"][0]["reason"].as_str().unwrap_or_default().to_string();
    assert!(reason.contains("no GID entry of this pod's addresses (shared device)"), "{reason}");
}

#[test]
fn without_any_address_of_the_pod_in_a_table_ownership_stays_unknown() {
    if common::no_netns() {
        return;
    }
    let run = in_pod("roce-shared-macvlan", "net1,0a:58:0a:63:00:01,192.168.77.1/24", &[], &["env"]);
    run.success();
    run.stderr_has("cannot tell which of the 2 RDMA devices");
}

#[test]
fn ipoib_children_give_the_pod_its_devices_and_its_partitions_pkey_index() {
    // No addresses needed: IPoIB children sit on their device's PCI function.
    let run = common::Run::node("ib-shared-ipoib").no_annotations().args(["env"]);
    run.success();
    assert_eq!(run.stdout(), "export NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1'\nexport NCCL_IB_PKEY='2'\n", "{}", run.stderr());
    run.stderr_has("mlx5_1:1: IPoIB interface net2 is in partition 0x8005, which the port's pkey table does not hold");
    let j = common::Run::node("ib-shared-ipoib").no_annotations().args(["env", "--json"]).json();
    assert_eq!(j["devices"][0]["origin"], "sysfs (shared device, via IPoIB child net1, pkey 0x8002)");
    assert_eq!(j["devices"][0]["ports"][0]["pkey"], serde_json::json!({"netdev": "net1", "pkey": 0x8002, "index": 2}));
    assert_eq!(j["not_ours"], serde_json::json!(["mlx5_2"]));
}

#[test]
fn a_run_reads_a_shared_table_only_up_to_the_pods_own_entry() {
    if common::no_netns() {
        return;
    }
    // Pod b on rail 0: NCCL's pick is pod a's 5, b's own entry is 9, pod c's follow at 10..13.
    // A run stops at 9; doctor (below) reads the whole table.
    let j = in_pod("roce-shared-macvlan", &pod('b'), &[], &["env", "--json"]).json();
    let port = &j["devices"][0]["ports"][0];
    assert_eq!(port["gid"]["index"], 9, "{port}");
    let rows: Vec<u64> =
        port["gid_table"].as_array().expect("gid_table").iter().filter_map(|r| r["index"].as_u64()).collect();
    assert_eq!(rows.last(), Some(&9), "the table was read past the pod's own entry: {rows:?}");
    let doctor = in_pod("roce-shared-macvlan", &pod('b'), &[], &["doctor", "--json", "--no-selftest"]).json();
    let owner = doctor["checks"].as_array().expect("checks").iter().find(|c| c["id"] == "gid-owner").cloned();
    let whole = owner.and_then(|c| c["evidence"]["gid_table"].as_array().map(Vec::len));
    assert_eq!(whole, Some(14), "doctor shows every non-empty entry");
}

#[test]
fn the_walk_stops_at_the_device_of_the_pods_last_child_interface() {
    if common::no_netns() {
        return;
    }
    if !macvlan_here() {
        return;
    }
    // Pod b's rail 0 as a macvlan: a child sits on one device, so once mlx5_0's table holds its
    // address, mlx5_1 is not read. The same rail as a veth (a fixture's stand-in) reads both.
    let log = [("NCCL_WRAP_LOG", "nw_observe::detect::devices=debug")];
    let child = in_pod("roce-shared-macvlan", "net1,0a:58:0a:09:00:34,10.9.0.52/24,macvlan", &log, &["env"]);
    let veth = in_pod("roce-shared-macvlan", "net1,0a:58:0a:09:00:34,10.9.0.52/24", &log, &["env"]);
    child.success();
    veth.success();
    assert_eq!(
        env_lines(&child),
        "export NCCL_IB_HCA='=mlx5_0:1'\nexport NCCL_IB_GID_INDEX='9'\n",
        "{}",
        child.stderr()
    );
    assert_eq!(env_lines(&child), env_lines(&veth));
    assert!(child.stderr().contains("mlx5_1 and after: not read"), "{}", child.stderr());
    assert!(!veth.stderr().contains("not read"), "{}", veth.stderr());
    // Both rails children: each device holds one, and both are the pod's.
    let both = in_pod("roce-shared-macvlan", &pod('b').replace("/24", "/24,macvlan"), &[], &["env"]);
    assert_eq!(
        env_lines(&both),
        env_lines(&in_pod("roce-shared-macvlan", &pod('b'), &[], &["env"])),
        "{}",
        both.stderr()
    );
}

/// Whether this machine's kernel makes macvlans (a pod's shared-device rail); SKIPPED if not.
fn macvlan_here() -> bool {
    let out = Command::new("unshare")
        .args([
            "--net",
            "--",
            "sh",
            "-c",
            "ip link add p0 type veth peer name p1 && ip link add link p0 name m0 type macvlan",
        ])
        .output();
    match out {
        Ok(o) if o.status.success() => true,
        Ok(o) => {
            common::skip(&format!("no macvlan here ({})", String::from_utf8_lossy(&o.stderr).trim()));
            false
        }
        Err(e) => {
            common::skip(&format!("cannot run unshare: {e}"));
            false
        }
    }
}

/// The h100-roce-sriov pod's rails (its VFs' netdevs, named in the tree's `class/net`) with the
/// addresses their tables hold, plus `eth0`.
fn h100_pod(eth0: &str) -> String {
    format!(
        "net1,0a:58:0a:00:6a:07,10.0.106.7/24 net2,0a:58:0a:00:6b:07,10.0.107.7/24 net3,0a:58:0a:00:be:07,10.0.190.7/24 net4,0a:58:0a:00:bf:07,10.0.191.7/24 eth0,0a:58:0a:80:02:11,{eth0}"
    )
}

#[test]
fn once_devices_are_claimed_by_function_a_veths_address_is_not_looked_for_elsewhere() {
    if common::no_netns() {
        return;
    }
    // A privileged pod (sysfs fallback) whose VFs are claimed by their netdevs. Its eth0 is a veth
    // whose address happens to be another pod's VF address (10.0.156.11 sits in mlx5_8's table):
    // a veth is nobody's upper device, so no other table is read for it and mlx5_8 stays not ours.
    let run = in_pod("h100-roce-sriov", &h100_pod("10.0.156.11/24"), &[], &["env"]);
    run.success();
    assert_eq!(
        env_lines(&run),
        "export NCCL_IB_HCA='=mlx5_6:1,mlx5_7:1,mlx5_10:1,mlx5_11:1'\nexport NCCL_IB_GID_INDEX='3'\n",
        "{}",
        run.stderr()
    );
    let j = in_pod("h100-roce-sriov", &h100_pod("10.0.156.11/24"), &[], &["env", "--json"]).json();
    assert!(j["not_ours"].as_array().expect("not_ours").iter().any(|d| d == "mlx5_8"), "{j}");
    assert!(j["devices"].as_array().expect("devices").iter().all(|d| d["ports"][0]["gid_table"].is_null()), "{j}");
}

//! The pod's own addresses as nccl-wrap reads them from the kernel (one rtnetlink address dump),
//! in a real network namespace (`unshare --net`): IPv4, a point-to-point IPv4 under an alias
//! label, IPv6 and link-local IPv6 on the pod's rails, loopback up with an extra address, all of
//! loopback's left out. `env --json` on the shared-device node shows them (`pod_addresses`). The
//! namespace dies with the process on every exit path; where this machine cannot make one, each
//! case says SKIPPED and why.

mod common;

use std::collections::BTreeSet;
use std::process::Command;

use common::{bin_argv, fixture, output_within, Done, DEADLINE};

/// lo up with 127.0.0.2 beside 127.0.0.1 and ::1; pod c's rails of `roce-shared-macvlan` (its
/// MACs, so detection finds its GID entries at once) as veth ends, no automatic link-local
/// address (addrgenmode none, on the peers too) so that the set below is exact.
const NETNS: &str = r#"set -e
ip link set lo up
ip addr add 127.0.0.2/8 dev lo
for n in net1,0a:58:0a:14:00:35 net2,0a:58:0a:14:00:45; do
    name=${n%%,*}; mac=${n#*,}
    ip link add "$name" type veth peer name "${name}p"
    ip link set "$name" address "$mac"
    ip link set "$name" addrgenmode none
    ip link set "${name}p" addrgenmode none
    ip link set "${name}p" up
    ip link set "$name" up
done
ip addr add 10.20.0.53/24 dev net1
ip addr add 10.20.9.1 peer 10.20.9.2/32 dev net1 label net1:1
ip addr add fd00:20::53/64 dev net1 nodad
ip addr add fe80::53/64 dev net1
ip addr add 10.20.1.53/24 dev net2
exec "$@"
"#;

fn in_pod(args: &[&str]) -> Done {
    let root = fixture("roce-shared-macvlan");
    let mut cmd = Command::new("unshare");
    cmd.args(["--net", "--", "sh", "-c", NETNS, "sh"]).args(bin_argv()).args(args);
    cmd.env_clear()
        .env("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        .env("NCCL_WRAP_SYSFS_ROOT", root.join("sys"))
        .env("NCCL_WRAP_ANNOTATIONS", "/nonexistent/annotations");
    Done { out: output_within(&mut cmd, DEADLINE) }
}

#[test]
fn the_pods_addresses_are_its_interfaces_own_and_never_loopbacks() {
    if common::no_netns() {
        return;
    }
    let d = in_pod(&["env", "--json"]);
    d.success().stderr_lacks("cannot list this namespace's addresses");
    let j = d.json();
    let got: BTreeSet<(String, String)> = j["pod_addresses"]
        .as_array()
        .expect("pod_addresses")
        .iter()
        .map(|a| (a["ifname"].as_str().unwrap_or("?").to_string(), a["addr"].as_str().unwrap_or("?").to_string()))
        .collect();
    let want: BTreeSet<(String, String)> = [
        ("net1", "10.20.0.53"),
        // The interface's own end of the point-to-point pair, under its name, not the label.
        ("net1", "10.20.9.1"),
        ("net1", "fd00:20::53"),
        // Link-local, and still tentative while DAD runs: the GID table has it already.
        ("net1", "fe80::53"),
        ("net2", "10.20.1.53"),
    ]
    .iter()
    .map(|(i, a)| (i.to_string(), a.to_string()))
    .collect();
    assert_eq!(got, want, "{}", d.stderr());
    // The addresses told this pod's GID entries from its neighbours', as before.
    assert_eq!(j["devices"][0]["ports"][0]["gid"]["owner"], "pod", "{j}");
}

# Shared set-up of the benchmark scripts (sourced, run from the repository root):
#   bin      the release binary (built here, or NCCL_WRAP_BIN for a prebuilt one)
#   tmp      a scratch directory, removed on exit
#   truebin  /bin/true (the baseline)
# and `synthetic_node DIR` (16 HCAs x 2 RoCE ports, 255-entry GID tables), `load_env FILE`, and
#   pod_netns  a command prefix: `"${pod_netns[@]}" SPECS CMD...` runs CMD in a fresh network and
#              mount namespace holding a pod's interfaces (veths whose peers are in another
#              namespace, as a CNI leaves them, or with `,macvlan` macvlans whose lower device is
#              there, as the macvlan CNI leaves a shared device's rails; SPECS:
#              `name,mac,addr/len[,macvlan]` words)
#   pod_eth0   the pod's primary interface (a veth, the CNI's, with an address and the default
#              route), as SPECS: every case's pod has it
#   pod_specs  NODE (a name of fixtures/nodes.py, or `synthetic HCAS GIDS VISIBLE MODE OWN_AT`): the
#              pod's interfaces on that node, as SPECS
# Where nothing can be installed (the GPU host), tables.sh times with bench/alternate.py instead.
command -v hyperfine >/dev/null || { apt-get update -qq && apt-get install -y -qq hyperfine time; } 2>/dev/null \
  || echo "bench: no hyperfine here" >&2
if [ -n "${NCCL_WRAP_BIN:-}" ]; then
  bin=$(realpath "$NCCL_WRAP_BIN")
else
  cargo build --release -q
  bin=$PWD/target/x86_64-unknown-linux-gnu/release/nccl-wrap
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
truebin=$(command -v true)
[ -x /bin/true ] && truebin=/bin/true

synthetic_node() { # DIR: the benchmark node
  python3 fixtures/mknode.py synthetic "$1" --hcas 16 --ports 2 --gids 255 --gid-at 3 >/dev/null
}

load_env() { # FILE: export a node's device-plugin variables (raw NAME=VALUE lines)
  while IFS= read -r line; do export "${line%%=*}=${line#*=}"; done < "$1"
}

# The pod's interfaces are veths, or macvlans where asked and the kernel has them; the kernel reads their
# addresses to nccl-wrap through getifaddrs as it would a pod's rails.
pod_netns=(unshare --net --mount -- sh -c '
set -e
specs=$1; shift
ip link set lo up
# A pod'"'"'s namespace holds its own ends only: the peers go to a namespace of their own (the
# node'"'"'s side), held by a sleeper that goes when the command ends.
unshare --net sleep 1000000 &
node=$!
trap "kill $node 2>/dev/null" EXIT
until [ "$(readlink /proc/$node/ns/net)" != "$(readlink /proc/self/ns/net)" ]; do sleep 0.01; done
for spec in $specs; do
    name=${spec%%,*}; rest=${spec#*,}; mac=${rest%%,*}; addr=${rest#*,}; kind=${addr#*,}
    addr=${addr%%,*}
    made=
    if [ "$kind" = macvlan ]; then
        # As the macvlan CNI leaves a shared device'"'"'s rail: a child of the node'"'"'s NIC (a veth
        # end there), moved into the pod.
        if nsenter -t "$node" -n sh -c "ip link add ${name}l type veth peer name ${name}p && ip link set ${name}l up && ip link set ${name}p up && ip link add link ${name}l name $name type macvlan && ip link set $name netns $$" 2>/dev/null; then
            made=1
        else
            nsenter -t "$node" -n ip link del "${name}l" 2>/dev/null || true
            echo "bench: no macvlan here, $name is a veth" >&2
        fi
    fi
    if [ -z "$made" ]; then
        ip link add "$name" type veth peer name "${name}p"
        ip link set "${name}p" netns "$node"
        nsenter -t "$node" -n ip link set "${name}p" up
    fi
    ip link set "$name" address "$mac"
    ip link set "$name" up
    ip addr add "$addr" dev "$name"
    # The primary interface carries the default route, as a pod'"'"'s does.
    if [ "$name" = eth0 ]; then ip route add default via "${addr%.*}.1" dev eth0; fi
done
"$@"' sh)

pod_eth0="eth0,0a:58:0a:80:02:11,10.128.2.17/23"

# The pod's interfaces on NODE (a name of fixtures/nodes.py, or `synthetic ARGS...`), as
# `name,mac,addr/len` words: its rails on their functions with the addresses their GID tables hold
# (SR-IOV VFs, a privileged pod's netdevs), or, on a shared node, its children (macvlans) with
# their addresses.
pod_specs() {
  python3 - "$@" <<'PY'
import ipaddress, sys
sys.path.insert(0, "fixtures")
import nodes
if sys.argv[1] == "synthetic":
    a = sys.argv[2:]
    kw = dict(hcas=int(a[0]), ports=1, gids=int(a[1]), visible=int(a[2]), mode=a[3], own_at=int(a[4]))
    n = nodes.synthetic(**kw)
    if kw["mode"] == "shared":
        print(" ".join(f"net{i + 1},{m},{ip}/16,macvlan" for i in range(kw["hcas"]) for m, ip in [nodes.synthetic_pod_address(i, 1)]))
        sys.exit()
else:
    n = nodes.NODES[sys.argv[1]]()
out = []
for net in n.net:
    if net.parent is None:
        continue
    for r in (r for r in n.rdma if r.parent == net.parent):
        for p in r.ports:
            for g in p.gids.values():
                if g.ndev == net.name and g.gid.startswith("0000:0000:0000:0000:0000:ffff:"):
                    ip = ipaddress.IPv6Address(g.gid).ipv4_mapped
                    spec = f"{net.name},{net.address},{ip}/24"
                    if spec not in out:
                        out.append(spec)
print(" ".join(out))
PY
}

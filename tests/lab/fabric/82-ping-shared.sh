# lab-nodes: 2
# Shared RDMA device between nodes: on each node rail 0's NIC has no address and rxe0 sits on it.
# A neighbour pod's macvlan child comes first (its own namespace), then the pod under test's, so
# the table holds the host's, the neighbour's, then the pod's entries, and NCCL alone would take
# the neighbour's (the first IPv4 RoCE v2 one). nccl-wrap exports the pod's own index, and ping
# between the two pods under test (the TCP exchange over their rail addresses) uses each end's
# own entry: its GID is its own pod's address on both ends, and the pair passes.
#
# What this kernel's rxe (6.1) can carry decides the pod under test's interface: rxe sends and
# receives RoCE only through its UDP socket of the initial namespace (RDMA from a pod namespace
# fails whatever its GID: measured, IBV_WC_LOC_QP_OP_ERR with the pod's own entry too), and takes
# in only packets that arrive on its own net device or a VLAN of it (rxe_udp_encap_recv; on a
# macvlan child of the initial namespace: IBV_WC_RETRY_EXC_ERR, measured). So the pod under test
# is a VLAN child (eth1.100) in the initial namespace; nccl-wrap tells entries apart by address
# whatever the child's kind. The neighbour is a macvlan child in a namespace of its own, created
# first, as on a real node. Real ConnectX adapters steer macvlan children's RoCE in hardware.
. /lab/fabric/lib.sh

me=$LAB_NODE
peer=$((1 - me))
nb=10.0.100.$((51 + me))
mine=10.0.100.$((61 + me))
theirs=10.0.100.$((61 + peer))
pod_child() {
    $IP link add link eth1 name eth1.100 type vlan id 100 && $IP addr add "$mine/24" dev eth1.100 &&
        $IP link set eth1.100 up
}
require "rail 0 NIC without an address, rxe0 on it" fab_rail 0 1500 noaddr
require "neighbour pod $nb first" lab_shared_pod nb eth1 macvlan "$nb"
require "neighbour's entry" wait_gid rxe0 "$nb"
require "pod under test $mine on eth1.100" pod_child
require "its entry" wait_gid rxe0 "$mine"
own=$(gid_index_of rxe0 "$mine")
other=$(gid_index_of rxe0 "$nb")
say "rxe0: neighbour at $other, pod at $own"
wrap env
assert_eq "pod: NCCL_IB_GID_INDEX is its own entry, not the neighbour's $other" "$own" "$(plan_var NCCL_IB_GID_INDEX)"
require "both pods ready" fab_barrier pods

out=/tmp/fab.shared.out
if [ "$me" = 0 ]; then
    timeout "$FAB_CLIENT_TIMEOUT" "$NCCL_WRAP" ping --listen 18530 --json $FAB_PING_ARGS >"$out" 2>"$out.err"
else
    timeout "$FAB_CLIENT_TIMEOUT" "$NCCL_WRAP" ping "$theirs:18530" --json $FAB_PING_ARGS >"$out" 2>"$out.err"
fi
RC=$?
sed 's/^/      out| /' "$out" | head -n 10
sed 's/^/      err| /' "$out.err" | head -n 20
fab_barrier pinged 90 >/dev/null
l=$(pj_pair "$out" 0)
assert_eq "ping exit" 0 "$RC"
assert_eq "pair status" pass "$(pj_status "$l")"
assert "pair: the local GID index is the pod's own ($own)" has "$l" "\"local\":{\"device\":\"rxe0\",\"port\":1,\"link_layer\":\"Ethernet\",\"gid_index\":$own,"
assert "pair: the local GID is the pod's address $mine" has "$l" "\"local\":{[^}]*\"gid\":\"[0-9a-f:]*:ffff:$(gid_hex_of "$mine")\""
assert "pair: the peer's GID is the peer pod's address $theirs" has "$(pj_remote_gid "$l")" ":ffff:$(gid_hex_of "$theirs")\$"

# Node 0 keeps a NCCL_IB_GID_INDEX of the neighbour's entry: its queue pair sends from the
# neighbour's address, the peer's replies go there, and node 0's pair fails, named as a foreign
# source GID (not as firmware). Node 1 keeps its own entry.
bad=
[ "$me" = 0 ] && bad=$other
if [ "$me" = 0 ]; then
    timeout "$FAB_CLIENT_TIMEOUT" env NCCL_IB_GID_INDEX="$bad" "$NCCL_WRAP" ping --listen 18531 --json $FAB_PING_ARGS --timeout-ms=6000 >"$out" 2>"$out.err"
else
    timeout "$FAB_CLIENT_TIMEOUT" "$NCCL_WRAP" ping "$theirs:18531" --json $FAB_PING_ARGS --timeout-ms=6000 >"$out" 2>"$out.err"
fi
RC2=$?
sed 's/^/      out| /' "$out" | head -n 10
fab_barrier pinged-foreign 90 >/dev/null
l=$(pj_pair "$out" 0)
assert_eq "with a foreign index: ping exit" 1 "$RC2"
assert_eq "with a foreign index: pair status" fail "$(pj_status "$l")"
if [ "$me" = 0 ]; then
    assert_eq "node 0: cause" foreign-gid "$(pj_cause "$l")"
    assert "node 0: the summary names the neighbour's address" has "$(pj_summary_of "$l")" "GID index $other ($nb), another namespace's address"
fi
finish "exit $RC: the pods ping over their own GID entries (index $own here, the neighbour's $other); with the neighbour's index kept: exit $RC2, $(pj_cause "$l")"

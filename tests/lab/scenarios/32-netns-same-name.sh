# Two pods whose rails have the same name: pods A and B each own a veth called net1 (as every
# Multus pod names its first rail), each with its own rxe device created from inside. In shared
# RDMA netns mode both pods see both rxe devices, and both devices' `parent` reads `net1`. A name
# match would claim both; nccl-wrap must tell them apart by the MAC behind each device's
# link-local GID and pick only the pod's own.
. "$(dirname "$0")/lib.sh"

# pod_rail NS TMP PEER RXE ADDR PEER_ADDR: like lab_pod_netns, but the pod's end is renamed net1
# inside the namespace (two net1 cannot exist in the host namespace at once).
pod_rail() {
    $IP netns add "$1" || return 1
    $IP link add "$2" type veth peer name "$3" || return 1
    $IP link set "$2" netns "$1" || return 1
    $IP -n "$1" link set "$2" name net1 || return 1
    $IP -n "$1" link set lo up || return 1
    $IP -n "$1" addr add "$5/24" dev net1 || return 1
    $IP -n "$1" link set net1 up || return 1
    $IP addr add "$6/24" dev "$3" || return 1
    $IP link set "$3" up || return 1
    $IP netns exec "$1" $RDMA link add "$4" type rxe netdev net1 || return 1
    wait_port_state "$4" 4
}

require "pod A: net1 and rxe_a" pod_rail poda tmpa hosta rxe_a 10.42.1.1 10.42.1.2
require "pod B: net1 and rxe_b" pod_rail podb tmpb hostb rxe_b 10.42.2.1 10.42.2.2
assert_eq "rxe_a parent" "net1" "$(cat /sys/class/infiniband/rxe_a/parent)"
assert_eq "rxe_b parent" "net1" "$(cat /sys/class/infiniband/rxe_b/parent)"
assert "pod A sees rxe_b too (shared mode)" $IP netns exec poda test -e /sys/class/infiniband/rxe_b

for pod in a b; do
    $IP netns exec "pod$pod" "$NCCL_WRAP" env >"$OUT_FILE" 2>"$ERR_FILE"
    WRAP_RC=$?
    say "ip netns exec pod$pod nccl-wrap env -> exit $WRAP_RC"
    sed 's/^/      out| /' "$OUT_FILE"; sed 's/^/      err| /' "$ERR_FILE"
    assert_eq "pod $pod: env exit" 0 "$WRAP_RC"
    assert_eq "pod $pod: NCCL_IB_HCA" "=rxe_$pod:1" "$(plan_var NCCL_IB_HCA)"
done
finish "pods A and B, both with a rail named net1, each pick only their own rxe device"

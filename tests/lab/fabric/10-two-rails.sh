# lab-nodes: 2
# Two nodes, two rails: rail i on 10.0.(100+i).0/24, rxe<i> on eth(1+i) of each node. An RC
# ping-pong (ibv_rc_pingpong, GID index 1 = RoCE v2 IPv4) passes on each rail pair, and each side
# saw the other's rail address as the remote GID: the traffic took the rail, not the pod network.
. /lab/fabric/lib.sh

require "rail 0 up with rxe0" fab_rail 0
require "rail 1 up with rxe1" fab_rail 1
for r in 0 1; do
    assert_eq "rxe$r GID 1 type" "RoCE v2" "$(cat /sys/class/infiniband/rxe$r/ports/1/gid_attrs/types/1)"
    assert_eq "rxe$r GID 1 ndev" "$(rail_dev $r)" "$(cat /sys/class/infiniband/rxe$r/ports/1/gid_attrs/ndevs/1)"
done
require "both nodes have their rails" fab_barrier rails

detail=
for r in 0 1; do
    port=$((18515 + r))
    peer_ip=$(rail_addr $r $((1 - LAB_NODE)))
    if [ "$LAB_NODE" = 0 ]; then
        fab_serve 1 "pp$r" "$port" ibv_rc_pingpong -d "rxe$r" -g 1 -n "$FAB_PP_ITERS" -p "$port"
        assert_eq "rail $r server exit" 0 "$SRV_RC"
        out=/tmp/fab.pp$r.srv
    else
        fab_client 0 "pp$r" "$FAB_CLIENT_TIMEOUT" \
            ibv_rc_pingpong -d "rxe$r" -g 1 -n "$FAB_PP_ITERS" -p "$port" "$(pod_addr 0)"
        assert_eq "rail $r client exit" 0 "$CLI_RC"
        out=/tmp/fab.pp$r.cli
    fi
    assert "rail $r remote GID is the peer's rail address $peer_ip" grep -q "remote address:.*GID ::ffff:$peer_ip\$" "$out"
    set -- $(pp_iters "$out")
    assert_eq "rail $r iterations" "$FAB_PP_ITERS" "${1:-none}"
    detail="${detail}rail$r ${1:-?} iters ${2:-?} us/iter; "
done
finish "ibv_rc_pingpong passes on both rail pairs: ${detail%; }"

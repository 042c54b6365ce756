# lab-nodes: 2
# Rails on different subnets, no router between them (rail-optimised fabric): both nodes have both
# rails, and node 0's rail 0 (rxe0, 10.0.100.1) connects to node 1's rail 1 (rxe1, 10.0.101.2).
# The QP connects (the GIDs travel over the pod network), but no RoCE packet reaches rxe1: the
# client (rc_probe, QP timeout $LAB_FABRIC_TIMEOUT_EXP default 14, retry_cnt $LAB_FABRIC_RETRY
# default 6) must end in IBV_WC_RETRY_EXC_ERR (12). Records the error and the time to fail.
. /lab/fabric/lib.sh
t=${LAB_FABRIC_TIMEOUT_EXP:-14}
r=${LAB_FABRIC_RETRY:-6}

require "rail 0 up with rxe0" fab_rail 0
require "rail 1 up with rxe1" fab_rail 1
require "both nodes have their rails" fab_barrier rails
$IP route get 10.0.101.2 from 10.0.100.1 oif eth1 >/tmp/fab.route 2>&1
say "ip route get 10.0.101.2 from 10.0.100.1 oif eth1: $(head -n1 /tmp/fab.route)"

if [ "$LAB_NODE" = 0 ]; then dev=rxe0; else dev=rxe1; fi
pair 1 0 x 18515 "$FAB_CLIENT_TIMEOUT" rc_probe -d "$dev" -g 1 -t "$t" -r "$r" -n 5
if [ "$LAB_NODE" = 1 ]; then
    assert "server did not complete (exit $RC)" test "$RC" != 0
    finish "server rxe1 10.0.101.2: $(probe_line "$OUT")${SRV_KILLED:+ (stopped after the client ended)}"
fi
assert "the client exchanged GIDs with rxe1 10.0.101.2" grep -q "^remote .*GID ::ffff:10.0.101.2\$" "$OUT"
assert "the client did not time out (exit $RC)" test "$RC" != 124
assert_eq "rxe0 10.0.100.1 -> rxe1 10.0.101.2 completion status" 12 "$(probe_status "$OUT")"
finish "rxe0 10.0.100.1 -> rxe1 10.0.101.2 (timeout $t, retry_cnt $r): exit $RC after ${SECS}s: $(probe_line "$OUT")"

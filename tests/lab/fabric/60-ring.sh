# lab-nodes: 3
# Three nodes on one rail (rail 0 is a shared segment, like a rail switch): a ring 0->1, 1->2,
# 2->0 of RC ping-pongs, all three at once. Each node serves its predecessor and connects to its
# successor; each edge must pass and see the successor's rail address as the remote GID.
. /lab/fabric/lib.sh

require "rail 0 up with rxe0" fab_rail 0
require "every node has its rail" fab_barrier rails
prev=$(prev_node)
next=$(next_node)
# Server for prev -> this node in the background (its result through a file), client to next.
(
    fab_serve "$prev" ring 18515 ibv_rc_pingpong -d rxe0 -g 1 -n "$FAB_PP_ITERS" -p 18515
    echo "$SRV_RC" >/tmp/fab.ring.srvrc
) &
srv=$!
fab_client "$next" ring "$FAB_CLIENT_TIMEOUT" ibv_rc_pingpong -d rxe0 -g 1 -n "$FAB_PP_ITERS" -p 18515 "$(pod_addr "$next")"
wait "$srv"
assert_eq "edge $LAB_NODE->$next (client) exit" 0 "$CLI_RC"
assert "edge $LAB_NODE->$next reached $(rail_addr 0 "$next")" grep -q "remote address:.*GID ::ffff:$(rail_addr 0 "$next")\$" /tmp/fab.ring.cli
assert_eq "edge $prev->$LAB_NODE (server) exit" 0 "$(cat /tmp/fab.ring.srvrc 2>/dev/null)"
assert "edge $prev->$LAB_NODE came from $(rail_addr 0 "$prev")" grep -q "remote address:.*GID ::ffff:$(rail_addr 0 "$prev")\$" /tmp/fab.ring.srv
set -- $(pp_iters /tmp/fab.ring.cli)
finish "edge $LAB_NODE->$next: ${1:-?} iters ${2:-?} us/iter; edge $prev->$LAB_NODE served"

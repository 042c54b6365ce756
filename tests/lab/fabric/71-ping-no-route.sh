# lab-nodes: 2
# nccl-wrap ping --all-pairs across rails on different subnets with no route between them: both
# nodes have both rails (10.0.100.0/24 on eth1, 10.0.101.0/24 on eth2). Of the four pairs, rail
# i with rail i passes; rail 0 with the peer's rail 1 (and rail 1 with rail 0) fails with cause
# `no-route` naming the peer's address and the route on the other net device; exit 1 on both
# ends. (RoCE sees status 12 there, 20-no-route: the kernel takes the peer as on-link.)
. /lab/fabric/lib.sh

require "rail 0 up with rxe0" fab_rail 0
require "rail 1 up with rxe1" fab_rail 1
require "both nodes have their rails" fab_barrier rails

ping_pair 0 1 allp 18515 "$FAB_CLIENT_TIMEOUT" --all-pairs --timeout-ms=8000
assert_eq "ping exit" 1 "$RC"
assert_eq "summary: pairs failed exit" "4 2 1" "$(pj_summary "$OUT")"
peer=$((1 - LAB_NODE))
detail=
# Pairs in order (initiator's port, listener's port): (0,0) (0,1) (1,0) (1,1).
for k in 0 1 2 3; do
    l=$(pj_pair "$OUT" $k)
    if [ "$LAB_NODE" = 1 ]; then lr=$((k / 2)) pr=$((k % 2)); else lr=$((k % 2)) pr=$((k / 2)); fi
    if [ "$lr" = "$pr" ]; then
        assert_eq "pair $k rxe$lr -> peer rxe$pr: status" pass "$(pj_status "$l")"
        assert "pair $k: bandwidth > 0" positive "$(pj_gbps "$l")"
    else
        assert_eq "pair $k rxe$lr -> peer rxe$pr: status" fail "$(pj_status "$l")"
        assert_eq "pair $k rxe$lr -> peer rxe$pr: cause" no-route "$(pj_cause "$l")"
        paddr=$(rail_addr "$pr" "$peer")
        assert "pair $k: names the peer's address $paddr" has "$l" "\"peer_address\":\"$paddr\""
        assert "pair $k: names the route on $(rail_dev "$pr")" \
            has "$l" "\"best_route\":\"10.0.$((100 + pr)).0/24 dev $(rail_dev "$pr") "
        detail="${detail}pair $k rxe$lr->rxe$pr: $(pj_summary_of "$l"); "
    fi
done
finish "exit $RC${SECS:+ after ${SECS}s}: ${detail%; }"

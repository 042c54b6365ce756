# lab-nodes: 2
# nccl-wrap ping, two nodes, two rails, everything healthy: node 0 `ping --listen`, node 1
# `ping <node 0's pod address>:PORT --json`. Both ends print one passing pair per rail (rail i with
# rail i, the peer's GID its address on that rail) with a median and p99 latency and a bandwidth
# above 0, and a summary of 2 pairs, 0 failed, exit 0; both exit 0.
. /lab/fabric/lib.sh

require "rail 0 up with rxe0" fab_rail 0
require "rail 1 up with rxe1" fab_rail 1
require "both nodes have their rails" fab_barrier rails

ping_pair 0 1 rails 18515 "$FAB_CLIENT_TIMEOUT"
assert_eq "ping exit" 0 "$RC"
assert_eq "summary: pairs failed exit" "2 0 0" "$(pj_summary "$OUT")"
assert_eq "pair lines" 2 "$(pj_count "$OUT")"
peer=$((1 - LAB_NODE))
detail=
for r in 0 1; do
    l=$(pj_pair "$OUT" $r)
    assert_eq "pair $r status" pass "$(pj_status "$l")"
    assert "pair $r: local rxe$r" has "$l" "\"local\":{\"device\":\"rxe$r\""
    want=$(gid_hex_of "$(rail_addr $r $peer)")
    assert "pair $r: the peer's GID is its rail $r address $(rail_addr $r $peer)" \
        has "$(pj_remote_gid "$l")" ":ffff:$want\$"
    med=$(pj_median "$l") p99=$(pj_p99 "$l") bw=$(pj_gbps "$l")
    assert "pair $r: median latency ${med:-none} > 0" positive "$med"
    assert "pair $r: p99 latency ${p99:-none} > 0" positive "$p99"
    assert "pair $r: bandwidth ${bw:-none} GB/s > 0" positive "$bw"
    detail="${detail}rail$r median ${med:-?} us p99 ${p99:-?} us ${bw:-?} GB/s; "
done
finish "exit $RC${SECS:+ after ${SECS}s}: ${detail%; }"

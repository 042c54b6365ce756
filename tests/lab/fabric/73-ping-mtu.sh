# lab-nodes: 2
# nccl-wrap ping between MTU 1500 (node 0, active MTU 1024) and MTU 9000 (node 1, 4096): the pair
# passes at path MTU 1024, the smaller of the two (a path MTU of 4096 would hang, 30-mtu-mismatch),
# with status `warn`, cause `mtu-mismatch` naming both MTUs and the path MTU used; exit 0 on both.
. /lab/fabric/lib.sh

if [ "$LAB_NODE" = 0 ]; then mtu=1500; else mtu=9000; fi
require "rail 0 up with MTU $mtu" fab_rail 0 "$mtu"
require "both nodes have their rails" fab_barrier rails

ping_pair 0 1 mtu 18515 "$FAB_CLIENT_TIMEOUT"
assert_eq "ping exit" 0 "$RC"
assert_eq "summary: pairs failed exit" "1 0 0" "$(pj_summary "$OUT")"
l=$(pj_pair "$OUT" 0)
assert_eq "pair status" warn "$(pj_status "$l")"
assert_eq "pair cause" mtu-mismatch "$(pj_cause "$l")"
assert "evidence: path MTU 1024" has "$l" '"path_mtu_bytes":1024'
assert "summary names the path MTU used" has "$(pj_summary_of "$l")" 'path MTU 1024'
assert "the pair ran: bandwidth > 0" positive "$(pj_gbps "$l")"
assert "the pair ran: median > 0" positive "$(pj_median "$l")"
finish "exit $RC: $(pj_status "$l") $(pj_cause "$l"): $(pj_summary_of "$l"); median $(pj_median "$l") us, $(pj_gbps "$l") GB/s"

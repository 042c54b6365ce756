# lab-nodes: 2
# nccl-wrap ping over a rail that drops RoCE v2 while TCP flows: node 0 drops UDP dport 4791
# leaving eth1 (as 40-tc-drop). With --timeout-ms 6000 ping's queue pair has ACK timeout 15
# (134 ms) and retry_cnt 6, so the client's first SEND ends in IBV_WC_RETRY_EXC_ERR after about
# 0.94 s: cause `retry-exceeded`, exit 1, well within the 6 s phase deadline (with retry_cnt 7
# rxe never completes and the pair would end as `timeout` at the deadline). The listener reports
# the same cause from the client's fault.
. /lab/fabric/lib.sh
deadline_ms=6000

require "rail 0 up with rxe0" fab_rail 0
if [ "$LAB_NODE" = 0 ]; then
    require "tc clsact on eth1" $TC qdisc add dev eth1 clsact
    require "tc drop of UDP dport 4791 leaving eth1" $TC filter add dev eth1 egress protocol ip \
        flower ip_proto udp dst_port 4791 action drop
fi
require "both nodes have their rails, the drop in place" fab_barrier rails

ping_pair 0 1 drop 18515 "$FAB_CLIENT_TIMEOUT" --timeout-ms=$deadline_ms
assert_eq "ping exit" 1 "$RC"
assert_eq "summary: pairs failed exit" "1 1 1" "$(pj_summary "$OUT")"
l=$(pj_pair "$OUT" 0)
assert_eq "pair status" fail "$(pj_status "$l")"
assert_eq "pair cause" retry-exceeded "$(pj_cause "$l")"
assert "the error is IBV_WC_RETRY_EXC_ERR" has "$l" 'IBV_WC_RETRY_EXC_ERR'
if [ "$LAB_NODE" = 1 ]; then
    assert "the whole client run (${SECS}s) ends within the ${deadline_ms} ms deadline" \
        awk -v s="$SECS" -v d="$deadline_ms" 'BEGIN{exit !(s * 1000 < d)}'
fi
if [ "$LAB_NODE" = 0 ]; then
    drops=$($TC -s filter show dev eth1 egress | sed -n 's/^[ \t]*Sent [0-9]* bytes \([0-9]*\) pkt.*/\1/p' | head -n1)
    assert "the filter dropped packets (${drops:-0})" test "${drops:-0}" -gt 0
fi
finish "exit $RC${SECS:+ after ${SECS}s (deadline ${deadline_ms} ms)}: $(pj_cause "$l"): $(pj_summary_of "$l")"

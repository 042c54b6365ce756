# lab-nodes: 2
# A path that drops RoCE v2 but not TCP: node 0 drops UDP destination port 4791 leaving its rail 0
# (tc clsact + flower + gact). TCP over the same rail still works (HTTP to node 0's rail address);
# RC traffic from node 1 (rc_probe) never gets an ACK:
#  - retry_cnt 7 (the fixed value of ibv_rc_pingpong and perftest): rxe retries for ever, no
#    completion within $LAB_FABRIC_HANG_SECS (default 8) seconds;
#  - QP timeout 14, retry_cnt 6 ($LAB_FABRIC_RETRY): IBV_WC_RETRY_EXC_ERR (12) after about 0.5 s;
#  - QP timeout $LAB_FABRIC_LOW_TIMEOUT (default 8), retry_cnt $LAB_FABRIC_LOW_RETRY (default 2):
#    status 12, sooner.
. /lab/fabric/lib.sh
r=${LAB_FABRIC_RETRY:-6}
lt=${LAB_FABRIC_LOW_TIMEOUT:-8}
lr=${LAB_FABRIC_LOW_RETRY:-2}
hang=${LAB_FABRIC_HANG_SECS:-8}

require "rail 0 up with rxe0" fab_rail 0
require "both nodes have their rails" fab_barrier rails
pair 0 1 ctl 18515 "$FAB_CLIENT_TIMEOUT" rc_probe -d rxe0 -g 1 -n 5 -t 14 -r "$r"
assert_eq "control: rc_probe before the drop: exit" 0 "$RC"

if [ "$LAB_NODE" = 0 ]; then
    require "tc clsact on eth1" $TC qdisc add dev eth1 clsact
    require "tc drop of UDP dport 4791 leaving eth1" $TC filter add dev eth1 egress protocol ip \
        flower ip_proto udp dst_port 4791 action drop
fi
require "the drop is in place" fab_barrier dropping
if [ "$LAB_NODE" = 1 ]; then
    # TCP over the same rail: node 0's flag server answers on its rail address too.
    printf 'GET /%s.dropping HTTP/1.0\r\n\r\n' "$LAB_SCENARIO" | nc -w 5 "$(rail_addr 0 0)" "$FAB_HTTP_PORT" >/tmp/fab.tcp 2>&1
    assert "TCP to node 0's rail address $(rail_addr 0 0) still works" grep -q '200 OK' /tmp/fab.tcp
fi

pair 0 1 r7 18516 "$hang" rc_probe -d rxe0 -g 1 -n 5 -t 14 -r 7
r7="exit $RC${SECS:+ after ${SECS}s}: $(probe_line "$OUT")"
[ "$LAB_NODE" = 0 ] || assert "retry_cnt 7: no completion within ${hang}s ($r7)" test "$RC" = 124
pair 0 1 dflt 18517 "$FAB_CLIENT_TIMEOUT" rc_probe -d rxe0 -g 1 -n 5 -t 14 -r "$r"
dflt="exit $RC${SECS:+ after ${SECS}s}: $(probe_line "$OUT")"
[ "$LAB_NODE" = 0 ] || assert_eq "timeout 14 retry_cnt $r: completion status" 12 "$(probe_status "$OUT")"
pair 0 1 low 18518 "$FAB_CLIENT_TIMEOUT" rc_probe -d rxe0 -g 1 -n 5 -t "$lt" -r "$lr"
low="exit $RC${SECS:+ after ${SECS}s}: $(probe_line "$OUT")"
[ "$LAB_NODE" = 0 ] || assert_eq "timeout $lt retry_cnt $lr: completion status" 12 "$(probe_status "$OUT")"
say "rxe0 counters: $(hw_counters rxe0)"

if [ "$LAB_NODE" = 0 ]; then
    $TC -s filter show dev eth1 egress >/tmp/fab.tc 2>&1
    sed 's/^/      tc| /' /tmp/fab.tc
    drops=$(sed -n 's/^[ \t]*Sent [0-9]* bytes \([0-9]*\) pkt.*/\1/p' /tmp/fab.tc | head -n1)
    assert "the filter dropped packets (${drops:-0})" test "${drops:-0}" -gt 0
    finish "filter dropped ${drops:-0} RoCE packets; server side: t14/r$r $dflt; t$lt/r$lr $low"
fi
finish "TCP on the rail ok; t14/r7: $r7; t14/r$r: $dflt; t$lt/r$lr: $low"

# lab-nodes: 2
# The post-mortem when RoCE is dropped mid-run under traffic. Node 0 runs, under
# `nccl-wrap --supervise --report`, a `nccl-wrap ping` client with a long bandwidth run against
# node 1's listener; once rxe0's sent_pkts climb (the run is under way) node 0 drops UDP dport
# 4791 arriving on eth1: node 1's ACKs are lost on the way, as behind a switch that drops RoCE.
# node 0 retransmits after each ACK timeout (completer_retry_err) until its queue pair gives up
# (retry_exceeded_err; ACK timeout 15 with --timeout-ms 6000, about 0.94 s): cause
# `retry-exceeded`, the ping's exit status passes through, and the post-mortem names the rxe
# counters that moved, each with what it usually means. Measured: completer_retry_err +12 and
# +13, retry_exceeded_err +1 (once with duplicate_request +1), the command done in 2.8-3.1 s.
# Why arriving, not leaving: with a drop of what leaves eth1, rxe 6.1 meets each refused send
# (send_err) by running its requester again at once, about 1.3 million times a minute; in four
# of about twenty runs that loop held the guest's one CPU past the soft-lockup watchdog (26-48 s),
# and the boot was lost. 74-ping-tc-drop keeps the leaving drop, where one SEND is in flight and the
# queue pair gives up within a second.
# Why two nodes: within one kernel rxe hands traffic between its own queue pairs over without its
# net device (rxe_loopback), so no tc filter can drop it there.
. /lab/fabric/lib.sh

require "rail 0 up with rxe0" fab_rail 0
require "both nodes have their rails" fab_barrier rails
ARGS="--json --iters=20 --bytes=65536 --duration-ms=15000 --timeout-ms=6000 --wait-ms=60000"

if [ "$LAB_NODE" = 1 ]; then
    fab_serve 0 pm 18515 sh -c "exec $NCCL_WRAP ping --listen 18515 $ARGS"
    finish "listener served node 0 (exit $SRV_RC${SRV_KILLED:+, stopped after the client ended})"
fi

counter() { cat "/sys/class/infiniband/rxe0/ports/1/hw_counters/$1"; }
undrop() { $TC qdisc del dev eth1 clsact 2>/dev/null; }
trap undrop EXIT
r=$(fab_wait 1 pm.ready) || { fab_post pm.done 255; result FAIL "listener never ready"; }
rm -f /tmp/pm.json
"$NCCL_WRAP" -q --supervise --watch-ms 500 --report /tmp/pm.json -- \
    "$NCCL_WRAP" ping "$(pod_addr 1):18515" $ARGS >/tmp/pm.out 2>/tmp/pm.err &
wpid=$!
sent0=$(counter sent_pkts)
_n=150
while [ "$(counter sent_pkts)" -le $((sent0 + 300)) ] && [ $_n -gt 0 ]; do usleep 200000; _n=$((_n - 1)); done
sent1=$(counter sent_pkts)
assert "under traffic before the drop (rxe0 sent_pkts $sent0 -> $sent1)" [ "$sent1" -gt $((sent0 + 300)) ]
$TC qdisc add dev eth1 clsact
$TC filter add dev eth1 ingress protocol ip flower ip_proto udp dst_port 4791 action drop
say "RoCE dropped arriving on eth1 at $(date -u +%H:%M:%S)"
_n=300
while kill -0 $wpid 2>/dev/null && [ $_n -gt 0 ]; do usleep 200000; _n=$((_n - 1)); done
kill $wpid 2>/dev/null
wait $wpid
rc=$?
fab_post pm.done "$rc"
drops=$($TC -s filter show dev eth1 ingress | sed -n 's/^[ \t]*Sent [0-9]* bytes \([0-9]*\) pkt.*/\1/p' | head -n1)
sed 's/^/      out| /' /tmp/pm.out | cut -c1-240 | head -n 6
sed 's/^/      err| /' /tmp/pm.err | head -n 30
l=$(pj_pair /tmp/pm.out 0)
cause=$(pj_cause "$l")
assert_eq "ping's pair gave up on the path: cause" retry-exceeded "$cause"
assert_eq "nccl-wrap exits with the command's status (ping's 1)" 1 "$rc"
assert "the filter dropped packets (${drops:-0})" test "${drops:-0}" -gt 0
assert "post-mortem header" grep -q 'post-mortem: the command exited with status 1 after .* on its RDMA ports (rxe0:1) since it started:' /tmp/pm.err
moved=$(sed -n 's/^nccl-wrap:   rxe0:1 \([a-z_]*\) [+r].*/\1/p' /tmp/pm.err | tr '\n' ' ')
say "counters named: $moved"
assert "completer_retry_err named with its meaning" grep -q '^nccl-wrap:   rxe0:1 completer_retry_err +[0-9]*: sent packets were retransmitted' /tmp/pm.err
assert "retry_exceeded_err named with its meaning" grep -q '^nccl-wrap:   rxe0:1 retry_exceeded_err +[0-9]*: a queue pair gave up after its retries' /tmp/pm.err
assert "no transition: the link stayed up" sh -c "! grep -q 'port state' /tmp/pm.err"
assert "JSON: completer_retry_err as an error" grep -q '{"name":"completer_retry_err","group":"hw_counters","start":[0-9]*,"exit":[0-9]*,"delta":[0-9]*,"kind":"error"' /tmp/pm.json
assert "JSON: sent_pkts as traffic" grep -q '{"name":"sent_pkts","group":"hw_counters","start":[0-9]*,"exit":[0-9]*,"delta":[0-9]*,"kind":"traffic"' /tmp/pm.json
finish "RoCE dropped under a ping bandwidth run: ping $cause, exit $rc kept; counters named: $moved"

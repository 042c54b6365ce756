# The post-mortem of a run under traffic whose rail goes down: nccl-wrap supervises a command that
# runs `nccl-wrap ping` in loopback on rxe0 (listener and client, two queue pairs of one device,
# as 80-ping-loopback) with a long bandwidth run; once rxe0's sent_pkts climb, veth0 is set down.
# The port's queue pairs fail with it (measured: ping's cause `qp-transition`, exit 1); nccl-wrap
# exits with that status, logs the transition during the run, and its post-mortem names the port,
# the change and the counters that moved: link_downed, and the retransmissions that preceded it.
# (RoCE dropped by a filter under traffic needs two kernels: fabric/85-postmortem-roce-drop.)
. "$(dirname "$0")/lib.sh"

require "rxe0 on veth0" lab_veth_rxe veth0 veth1 rxe0 10.86.0.1 10.86.0.2
rm -f /tmp/pm.json
counter() { cat "/sys/class/infiniband/rxe0/ports/1/hw_counters/$1"; }
ARGS="--json --bytes=65536 --iters=20 --duration-ms=15000 --timeout-ms=6000 --wait-ms=20000"
cat >/tmp/pm-cmd.sh <<CMD
$NCCL_WRAP ping --listen 10.86.0.1:18515 $ARGS >/tmp/pm.listen 2>&1 &
l=\$!
sleep 1
$NCCL_WRAP ping 10.86.0.1:18515 $ARGS >/tmp/pm.client 2>&1
rc=\$?
kill \$l 2>/dev/null
exit \$rc
CMD
"$NCCL_WRAP" -q --supervise --watch-ms 250 --report /tmp/pm.json -- sh /tmp/pm-cmd.sh >"$OUT_FILE" 2>"$ERR_FILE" &
wpid=$!
sent0=$(counter sent_pkts)
_n=100
while [ "$(counter sent_pkts)" -le $((sent0 + 500)) ] && [ $_n -gt 0 ]; do usleep 200000; _n=$((_n - 1)); done
sent1=$(counter sent_pkts)
require "under traffic (rxe0 sent_pkts $sent0 -> $sent1)" [ "$sent1" -gt $((sent0 + 500)) ]
lab_link_down veth0
say "veth0 set down at $(date -u +%H:%M:%S)"
_n=300
while kill -0 $wpid 2>/dev/null && [ $_n -gt 0 ]; do usleep 200000; _n=$((_n - 1)); done
kill $wpid 2>/dev/null
wait $wpid
rc=$?
sent2=$(counter sent_pkts)
sed 's/^/      client| /' /tmp/pm.client | cut -c1-300 | head -n 4
sed 's/^/      err| /' "$ERR_FILE" | head -n 30
pexit=$(sed -n 's/.*"kind":"ping-summary".*"exit":\([0-9]*\)}$/\1/p' /tmp/pm.client)
cause=$(sed -n 's/.*"cause":{"id":"\([a-z-]*\)".*/\1/p' /tmp/pm.client | head -n1)
say "ping: exit ${pexit:-none}, cause ${cause:-none}; sent_pkts after the drop: $sent2"
assert_eq "the ping failed with its port" 1 "${pexit:-none}"
assert_eq "nccl-wrap exits with the command's (ping's) status" "${pexit:-none}" "$rc"
# The ping may die before the next poll (250 ms): then the change is found by the last reading.
if grep -q '^nccl-wrap: [0-9TZ:.-]* rxe0:1 port state ' "$ERR_FILE"; then seen=poll; else seen=exit; fi
assert "post-mortem header" grep -q '^nccl-wrap: post-mortem: the command exited with status 1 after .* on its RDMA ports (rxe0:1) since it started:$' "$ERR_FILE"
assert "the post-mortem names the change (seen by $seen)" grep -Eq '^nccl-wrap:   [0-9TZ:.-]* rxe0:1 port state ACTIVE/[A-Za-z]* -> DOWN/Disabled( \(seen at exit\))?$' "$ERR_FILE"
assert "the post-mortem names link_downed" grep -q '^nccl-wrap:   rxe0:1 link_downed +1: the link went down' "$ERR_FILE"
moved=$(grep -o '{"name":"[a-z_]*","group":"[a-z_]*","start":[0-9]*,"exit":[0-9]*,"delta":[0-9]*,"kind":"error"' /tmp/pm.json | sed 's/{"name":"\([a-z_]*\)".*"delta":\([0-9]*\).*/\1+\2/' | tr '\n' ' ')
assert "JSON: link_downed moved" grep -q '{"name":"link_downed","group":"hw_counters","start":[0-9]*,"exit":[0-9]*,"delta":1,"kind":"error"' /tmp/pm.json
finish "rxe0 down under a loopback ping: ping exit ${pexit:-none} (${cause:-no cause}) kept; change seen by $seen; error counters: $moved"

# `nccl-wrap watch`, the node agent, on a real kernel RDMA stack: rxe0 and rxe1 up, a 1 s interval
# without jitter. veth0 taken down flips rxe0's port metric and the node's labels (healthy,
# rdma-ports-usable, check.ports) within one interval; rxe's hw_counters reach the metrics; SIGTERM
# ends the agent with exit 0, both files whole and no temporary file left.
. "$(dirname "$0")/lib.sh"

require "rxe0 on veth0" lab_veth_rxe veth0 veth1 rxe0 10.85.0.1 10.85.0.2
require "rxe1 on veth2" lab_veth_rxe veth2 veth3 rxe1 10.85.1.1 10.85.1.2

D=/tmp/health
rm -rf "$D"
mkdir -p "$D"
F=$D/nccl-wrap
M=$D/nccl-wrap.prom
P=nccl-wrap.feature.node.kubernetes.io

# label NAME: its value in the feature file; metric SERIES: its value in the metrics file.
label() { sed -n "s|^$P/$1=||p" "$F" 2>/dev/null; }
metric() { grep -F "$1 " "$M" 2>/dev/null | grep -v '^#' | head -n1 | sed 's/.* //'; }
now_ms() { awk '{ printf "%d\n", $1 * 1000 }' /proc/uptime; }

"$NCCL_WRAP" watch --interval 1 --jitter 0 --features "$F" --metrics "$M" 2>"$D.err" &
pid=$!
n=100
while [ "$n" -gt 0 ] && [ -z "$(metric nccl_wrap_rounds_total)" ]; do usleep 100000; n=$((n - 1)); done
require "first round written within 10 s" [ -n "$(metric nccl_wrap_rounds_total)" ]

assert_eq "healthy with both ports up" true "$(label healthy)"
assert_eq "rdma-ports-usable" 2 "$(label rdma-ports-usable)"
assert_eq "link-layer" ethernet "$(label link-layer)"
assert_eq "rxe0 port_state" 4 "$(metric 'nccl_wrap_port_state{device="rxe0",port="1"}')"
assert "rxe0 is a software device, Ethernet" grep -q 'nccl_wrap_port_info{device="rxe0",port="1",kind="software",link_layer="Ethernet"' "$M"
assert "rxe0's hw_counters are metrics, one family each" grep -q '^nccl_wrap_port_hw_sent_pkts_total{device="rxe0",port="1"} ' "$M"
assert "rxe has no ports/1/counters, and none is made up" sh -c "! grep -Eq '^nccl_wrap_(port_data_received_bytes|port_packets_received|symbol_error|port_ibta_[a-z0-9_]+)_total\{device=\"rxe' $M"
assert "lifespan (a setting) is not a counter" sh -c "! grep -q 'lifespan' $M"
if command -v promtool >/dev/null; then assert "promtool check metrics passes" promtool check metrics <"$M"; fi

r0=$(metric nccl_wrap_rounds_total)
require "veth0 set down" lab_link_down veth0
require "rxe0 port goes DOWN" wait_port_state rxe0 1
t0=$(now_ms)
r1=$(metric nccl_wrap_rounds_total)
n=30
while [ "$n" -gt 0 ] && [ "$(label rdma-ports-usable)" != 1 ]; do usleep 100000; n=$((n - 1)); done
t1=$(now_ms)
r2=$(metric nccl_wrap_rounds_total)
say "port DOWN seen by sysfs at round $r1 (rounds before the link went down: $r0); labels flipped at round $r2, $((t1 - t0)) ms later"
assert_eq "rdma-ports-usable after veth0 down" 1 "$(label rdma-ports-usable)"
assert_eq "healthy after veth0 down" false "$(label healthy)"
assert_eq "check.ports" fail "$(label check.ports)"
assert_eq "rxe0 port_state" 1 "$(metric 'nccl_wrap_port_state{device="rxe0",port="1"}')"
assert_eq "rxe0 port_usable" 0 "$(metric 'nccl_wrap_port_usable{device="rxe0",port="1"}')"
assert_eq "rxe1 port_usable" 1 "$(metric 'nccl_wrap_port_usable{device="rxe1",port="1"}')"
assert_eq "nccl_wrap_healthy" 0 "$(metric nccl_wrap_healthy)"
# Within one interval: the round that was running when the port went down (if any) and the next.
assert "flipped by the next round (round $r2 <= $r1 + 1)" [ "$r2" -le $((r1 + 1)) ]
assert "flipped within one interval plus a round ($((t1 - t0)) ms <= 1500)" [ $((t1 - t0)) -le 1500 ]

cpu=$(metric nccl_wrap_agent_cpu_seconds_total)
rss=$(metric nccl_wrap_agent_max_rss_bytes)
dur=$(metric nccl_wrap_round_duration_seconds)
say "agent after $r2 rounds: CPU ${cpu} s in all, last round ${dur} s of wall time, peak RSS ${rss} bytes (TCG)"

kill -TERM "$pid"
wait "$pid"
rc=$?
sed 's/^/      err| /' "$D.err"
assert_eq "SIGTERM: exit status" 0 "$rc"
assert "SIGTERM: named on stderr" grep -q 'stopping on signal 15' "$D.err"
assert "the verdict changed once, named on stderr" grep -q 'NOT healthy: 1 of 2 RDMA port(s) usable; failing: ports rxe0:1' "$D.err"
assert_eq "only the two files are left (no temporary file)" "nccl-wrap
nccl-wrap.prom" "$(ls -A "$D")"
assert "metrics file whole: its last family is there" sh -c "tail -n1 $M | grep -q '^nccl_wrap_agent_max_rss_bytes [0-9]'"
assert_eq "metrics file whole: it ends in a newline" 1 "$(tail -c1 "$M" | wc -l)"
assert "features file whole: every line a comment or a label" sh -c "! grep -v -e '^#' -e '^$P/[a-z.-]*=[A-Za-z0-9.]*\$' $F"
finish "watch: rxe0 down flipped port_state and healthy/rdma-ports-usable by the next round; SIGTERM left both files whole"
